/* test_backoff.c: exponential backoff: doubling, the cap, overflow, the
 * jitter's bounds, and a policy with a count. */
#include "tests/unit/unit.h"

#include <limits.h>
#include <math.h>

#include "lib/backoff.h"

static void test_doubling_and_cap(void **state)
{
    (void)state;
    assert_int_equal(vmg_backoff_ms(800, 30000, 0), 800);
    assert_int_equal(vmg_backoff_ms(800, 30000, 1), 1600);
    assert_int_equal(vmg_backoff_ms(800, 30000, 5), 25600);
    assert_int_equal(vmg_backoff_ms(800, 30000, 6), 30000);
    /* client-go's per-item limiter: 5 ms .. 1000 s. */
    assert_int_equal(vmg_backoff_ms(5, 1000000, 12), 5 << 12);
    assert_int_equal(vmg_backoff_ms(5, 1000000, 18), 1000000);
    /* The cap exactly reached. */
    assert_int_equal(vmg_backoff_ms(1000, 8000, 3), 8000);
    assert_int_equal(vmg_backoff_ms(1000, 7999, 3), 7999);
    /* A base of 0 stays 0; a base over the cap is the cap. */
    assert_int_equal(vmg_backoff_ms(0, 1000, 10), 0);
    assert_int_equal(vmg_backoff_ms(5000, 1000, 0), 1000);
}

static void test_no_overflow(void **state)
{
    (void)state;
    assert_int_equal(vmg_backoff_ms(1, UINT64_MAX, 63), 1ull << 63);
    assert_int_equal(vmg_backoff_ms(1, UINT64_MAX, 64), UINT64_MAX);
    assert_int_equal(vmg_backoff_ms(1, UINT64_MAX, 200), UINT64_MAX);
    assert_int_equal(vmg_backoff_ms(3, UINT64_MAX, 63), UINT64_MAX);
    assert_int_equal(vmg_backoff_ms(UINT64_MAX / 2 + 1, UINT64_MAX, 1), UINT64_MAX);
    assert_int_equal(vmg_backoff_ms(1000, 60000, UINT_MAX), 60000);
    /* Every count gives a delay that never shrinks. */
    uint64_t last = 0;
    for (unsigned n = 0; n < 100; n++) {
        uint64_t d = vmg_backoff_ms(7, 1ull << 40, n);
        assert_true(d >= last);
        assert_true(d <= 1ull << 40);
        last = d;
    }
}

static void test_jitter_bounds(void **state)
{
    (void)state;
    for (unsigned n = 0; n < 10; n++) {
        uint64_t d = vmg_backoff_ms(800, 30000, n);
        uint64_t lo = vmg_backoff_jitter(d, 0.25, UINT32_MAX);
        uint64_t mid = vmg_backoff_jitter(d, 0.25, UINT32_MAX / 2);

        assert_int_equal(vmg_backoff_jitter(d, 0.25, 0), d);
        assert_true(lo >= d - d / 4 && lo < d);
        assert_true(mid > lo && mid < d);
    }
    /* Out of [0, 1], clamped; NaN takes nothing. */
    assert_int_equal(vmg_backoff_jitter(1000, 5, UINT32_MAX), 1);
    assert_int_equal(vmg_backoff_jitter(1000, -1, UINT32_MAX), 1000);
    assert_int_equal(vmg_backoff_jitter(1000, NAN, UINT32_MAX), 1000);
    /* The largest delay converts without overflow. */
    assert_true(vmg_backoff_jitter(UINT64_MAX, 1, UINT32_MAX) <= UINT64_MAX / 1000);
    assert_int_equal(vmg_backoff_jitter(UINT64_MAX, 1, 0), UINT64_MAX);
    assert_int_equal(vmg_backoff_jitter(0, 1, UINT32_MAX), 0);
}

static void test_xorshift(void **state)
{
    uint32_t s = 1, z = 0;
    uint32_t first = vmg_xorshift32(&s);

    (void)state;
    /* Deterministic: the known successor of 1. */
    assert_int_equal(first, 270369);
    assert_int_equal(s, 270369);
    assert_true(vmg_xorshift32(&s) != first);
    /* A zero state does not stay zero. */
    assert_int_equal(vmg_xorshift32(&z), 270369);
}

static uint32_t fixed_rand(void *data)
{
    return *(uint32_t *)data;
}

static void test_policy_counts_and_resets(void **state)
{
    struct vmg_backoff b;
    const uint64_t want[] = {1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000};

    (void)state;
    vmg_backoff_init(&b, 1000, 60000);
    for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_int_equal(vmg_backoff_peek(&b), want[i]);
        assert_int_equal(vmg_backoff_next(&b), want[i]);
        assert_int_equal(b.failures, i + 1);
    }
    vmg_backoff_reset(&b);
    assert_int_equal(vmg_backoff_next(&b), 1000);
    /* The count saturates rather than wrapping to the base. */
    b.failures = UINT_MAX;
    assert_int_equal(vmg_backoff_next(&b), 60000);
    assert_int_equal(b.failures, UINT_MAX);
    /* A cap below the base is raised to it. */
    vmg_backoff_init(&b, 500, 10);
    assert_int_equal(b.cap_ms, 500);
    assert_int_equal(vmg_backoff_next(&b), 500);
    assert_int_equal(vmg_backoff_next(&b), 500);
}

static void test_policy_jitter(void **state)
{
    struct vmg_backoff b;
    uint32_t r = UINT32_MAX;

    (void)state;
    vmg_backoff_init(&b, 1000, 8000);
    vmg_backoff_set_jitter(&b, 0.5, fixed_rand, &r);
    uint64_t d = vmg_backoff_next(&b);
    assert_true(d > 500 && d < 1000);
    r = 0;
    assert_int_equal(vmg_backoff_next(&b), 2000);
    /* Without a source there is no jitter. */
    vmg_backoff_set_jitter(&b, 0.5, NULL, NULL);
    r = UINT32_MAX;
    assert_int_equal(vmg_backoff_next(&b), 4000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_doubling_and_cap),
        cmocka_unit_test(test_no_overflow),
        cmocka_unit_test(test_jitter_bounds),
        cmocka_unit_test(test_xorshift),
        cmocka_unit_test(test_policy_counts_and_resets),
        cmocka_unit_test(test_policy_jitter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
