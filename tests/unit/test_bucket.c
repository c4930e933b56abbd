/* test_bucket.c: the token bucket: the burst, the rate, waits (taken or
 * reserved), refill up to the burst, a clock going back, no limit, waits
 * too long to count, and when a bucket is full again. */
#include "tests/unit/unit.h"

#include <math.h>

#include "lib/bucket.h"

static void test_take_burst_then_rate(void **state)
{
    struct vmg_bucket b;

    (void)state;
    vmg_bucket_init(&b, 20, 3, 1000);
    /* The burst at once... */
    for (int i = 0; i < 3; i++)
        assert_int_equal(vmg_bucket_take(&b, 1000), 0);
    /* ...then one token every 50 ms; an empty bucket takes nothing. */
    assert_int_equal(vmg_bucket_take(&b, 1000), 50);
    assert_int_equal(vmg_bucket_take(&b, 1000), 50);
    assert_int_equal(vmg_bucket_take(&b, 1030), 20);
    assert_int_equal(vmg_bucket_take(&b, 1049), 1);
    assert_int_equal(vmg_bucket_take(&b, 1050), 0);
    assert_int_equal(vmg_bucket_take(&b, 1050), 50);
    /* Idle time refills up to the burst only. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(vmg_bucket_take(&b, 100000), 0);
    assert_int_equal(vmg_bucket_take(&b, 100000), 50);
}

static void test_take_never_says_zero_when_empty(void **state)
{
    struct vmg_bucket b;

    (void)state;
    /* 3 per second: the wait is 333.33 ms, rounded up. */
    vmg_bucket_init(&b, 3, 1, 0);
    assert_int_equal(vmg_bucket_take(&b, 0), 0);
    assert_int_equal(vmg_bucket_take(&b, 0), 334);
    assert_int_equal(vmg_bucket_take(&b, 333), 1);
    assert_int_equal(vmg_bucket_take(&b, 334), 0);
}

static void test_reserve_goes_into_debt(void **state)
{
    struct vmg_bucket b;
    uint64_t now = 1000;

    (void)state;
    vmg_bucket_init(&b, 10, 100, now);
    for (int i = 0; i < 100; i++)
        assert_int_equal(vmg_bucket_reserve(&b, now), 0);
    /* Each caller reserves the next token. */
    assert_int_equal(vmg_bucket_reserve(&b, now), 100);
    assert_int_equal(vmg_bucket_reserve(&b, now), 200);
    assert_int_equal(vmg_bucket_reserve(&b, now), 300);
    /* One second brings 10: 3 pay the debt, 7 are free. */
    now += 1000;
    for (int i = 0; i < 7; i++)
        assert_int_equal(vmg_bucket_reserve(&b, now), 0);
    assert_int_equal(vmg_bucket_reserve(&b, now), 100);
    /* Half a token later, the next one is 150 ms away. */
    now += 50;
    assert_int_equal(vmg_bucket_reserve(&b, now), 150);
}

static void test_clock_going_back(void **state)
{
    struct vmg_bucket b;

    (void)state;
    vmg_bucket_init(&b, 10, 1, 100000);
    assert_int_equal(vmg_bucket_reserve(&b, 100000), 0);
    /* Back 10 s: no token comes, none is taken away... */
    assert_int_equal(vmg_bucket_reserve(&b, 90000), 100);
    assert_int_equal(vmg_bucket_take(&b, 90000), 200);
    /* ...and none comes while the clock catches up. */
    assert_int_equal(vmg_bucket_take(&b, 100000), 200);
    assert_int_equal(vmg_bucket_take(&b, 100100), 100);
    assert_int_equal(vmg_bucket_take(&b, 100200), 0);
}

static void test_no_limit(void **state)
{
    struct vmg_bucket b;

    (void)state;
    vmg_bucket_init(&b, 0, 1, 0);
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(vmg_bucket_take(&b, 0), 0);
        assert_int_equal(vmg_bucket_reserve(&b, 0), 0);
    }
    vmg_bucket_init(&b, -1, 1, 0);
    assert_int_equal(vmg_bucket_take(&b, 0), 0);
    assert_int_equal(vmg_bucket_take(&b, 0), 0);
    vmg_bucket_init(&b, NAN, 1, 0);
    assert_int_equal(vmg_bucket_take(&b, 0), 0);
    assert_int_equal(vmg_bucket_take(&b, 0), 0);
}

static void test_burst_zero_is_one(void **state)
{
    struct vmg_bucket b;

    (void)state;
    vmg_bucket_init(&b, 1, 0, 0);
    assert_int_equal(vmg_bucket_take(&b, 0), 0);
    assert_int_equal(vmg_bucket_take(&b, 0), 1000);
}

/* A bucket is full once idle time has brought back its burst (a debt
 * paid first), and a clock going back refills nothing. */
static void test_full(void **state)
{
    struct vmg_bucket b;

    (void)state;
    vmg_bucket_init(&b, 10, 2, 1000);
    assert_true(vmg_bucket_full(&b, 1000));
    assert_int_equal(vmg_bucket_take(&b, 1000), 0);
    assert_false(vmg_bucket_full(&b, 1000));
    assert_false(vmg_bucket_full(&b, 1099));
    assert_true(vmg_bucket_full(&b, 1100));
    assert_false(vmg_bucket_full(&b, 500));
    assert_int_equal(vmg_bucket_reserve(&b, 1000), 0);
    assert_int_equal(vmg_bucket_reserve(&b, 1000), 100); /* -1 */
    assert_false(vmg_bucket_full(&b, 1299));
    assert_true(vmg_bucket_full(&b, 1300));
    vmg_bucket_init(&b, 0, 1, 0); /* no limit */
    vmg_bucket_take(&b, 0);
    assert_true(vmg_bucket_full(&b, 0));
}

static void test_wait_is_bounded(void **state)
{
    struct vmg_bucket b;

    (void)state;
    vmg_bucket_init(&b, 1e-300, 1, 0);
    assert_int_equal(vmg_bucket_take(&b, 0), 0);
    assert_int_equal(vmg_bucket_take(&b, 0), VMG_BUCKET_MAX_WAIT_MS);
    assert_int_equal(vmg_bucket_reserve(&b, 0), VMG_BUCKET_MAX_WAIT_MS);
    /* A very late clock neither overflows nor refills past the burst. */
    vmg_bucket_init(&b, 1e9, 2, 0);
    assert_int_equal(vmg_bucket_take(&b, UINT64_MAX), 0);
    assert_int_equal(vmg_bucket_take(&b, UINT64_MAX), 0);
    assert_int_equal(vmg_bucket_take(&b, UINT64_MAX), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_take_burst_then_rate),
        cmocka_unit_test(test_take_never_says_zero_when_empty),
        cmocka_unit_test(test_reserve_goes_into_debt),
        cmocka_unit_test(test_clock_going_back),
        cmocka_unit_test(test_no_limit),
        cmocka_unit_test(test_burst_zero_is_one),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_wait_is_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
