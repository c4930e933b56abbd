/* test_ratelimit.c: per-key exponential backoff, the token bucket, and the
 * two combined, all on a fake clock. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kube/ratelimit.h"
#include "lib/err.h"

static uint64_t fake_now(void *data)
{
    return *(uint64_t *)data;
}

static uint64_t when(struct rl *l, const char *key)
{
    uint64_t d = 12345;
    assert_int_equal(rl_when(l, key, &d), 0);
    return d;
}

/* A limiter with only the per-key backoff (the bucket off). */
static struct rl *backoff_only(void)
{
    struct rl_options o;
    rl_options_init(&o);
    o.qps = 0;
    struct rl *l = NULL;
    assert_int_equal(rl_new(&o, &l), 0);
    return l;
}

/* A limiter with only the bucket (no per-key delay). */
static struct rl *bucket_only(uint64_t *clock)
{
    struct rl_options o;
    rl_options_init(&o);
    o.base_delay_ms = 0;
    o.now_ms = fake_now;
    o.clock_data = clock;
    struct rl *l = NULL;
    assert_int_equal(rl_new(&o, &l), 0);
    return l;
}

static void test_defaults_are_client_go(void **state)
{
    (void)state;
    struct rl_options o;
    rl_options_init(&o);
    assert_int_equal(o.base_delay_ms, 5);
    assert_int_equal(o.max_delay_ms, 1000 * 1000);
    assert_true(o.qps == 10.0);
    assert_int_equal(o.burst, 100);
    assert_null(o.now_ms);
}

static void test_backoff_doubles_up_to_the_cap(void **state)
{
    (void)state;
    struct rl *l = backoff_only();
    uint64_t want = 5;
    for (int i = 0; i < 18; i++) {
        assert_int_equal(rl_num_requeues(l, "ns/a"), i);
        assert_int_equal(when(l, "ns/a"), want); /* 5, 10, 20, 40, ... 655360 */
        want *= 2;
    }
    /* 5 * 2^18 = 1310720 ms is above 1000 s: capped from now on, without
     * overflow however many failures follow. */
    for (int i = 0; i < 100; i++)
        assert_int_equal(when(l, "ns/a"), 1000 * 1000);
    assert_int_equal(rl_num_requeues(l, "ns/a"), 118);
    /* Keys are counted separately. */
    assert_int_equal(when(l, "ns/b"), 5);
    assert_int_equal(when(l, "ns/b"), 10);
    assert_int_equal(rl_keys(l), 2);
    rl_free(l);
}

static void test_forget_resets(void **state)
{
    (void)state;
    struct rl *l = backoff_only();
    when(l, "ns/a");
    when(l, "ns/a");
    when(l, "ns/b");
    assert_int_equal(when(l, "ns/a"), 20);
    rl_forget(l, "ns/a");
    assert_int_equal(rl_num_requeues(l, "ns/a"), 0);
    assert_int_equal(rl_num_requeues(l, "ns/b"), 1);
    assert_int_equal(when(l, "ns/a"), 5);
    rl_forget(l, "ns/unknown"); /* no-op */
    rl_forget(l, "");
    rl_forget(l, NULL);
    assert_int_equal(rl_keys(l), 2);
    rl_free(l);
}

static void test_custom_parameters(void **state)
{
    (void)state;
    struct rl_options o;
    rl_options_init(&o);
    o.qps = 0;
    o.base_delay_ms = 100;
    o.max_delay_ms = 350;
    struct rl *l = NULL;
    assert_int_equal(rl_new(&o, &l), 0);
    assert_int_equal(when(l, "k"), 100);
    assert_int_equal(when(l, "k"), 200);
    assert_int_equal(when(l, "k"), 350);
    assert_int_equal(when(l, "k"), 350);
    rl_free(l);
}

static void test_bucket_burst_then_rate(void **state)
{
    (void)state;
    uint64_t clock = 1000;
    struct rl *l = bucket_only(&clock);
    char key[32];
    /* 100 at once pass, whatever the keys. */
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "ns/k%d", i);
        assert_int_equal(when(l, key), 0);
    }
    /* Then one every 100 ms: each caller reserves the next token. */
    assert_int_equal(when(l, "ns/x"), 100);
    assert_int_equal(when(l, "ns/x"), 200);
    assert_int_equal(when(l, "ns/y"), 300);
    /* One second later 10 tokens came: 7 pay back the 3 reserved... */
    clock += 1000;
    for (int i = 0; i < 7; i++)
        assert_int_equal(when(l, "ns/z"), 0);
    assert_int_equal(when(l, "ns/z"), 100);
    /* ... and a partial refill shortens the wait: 50 ms in, the token
     * reserved above is half there, the next one is 150 ms away. */
    clock += 50;
    assert_int_equal(when(l, "ns/z"), 150);
    /* A long pause refills to the burst and no further. */
    clock += 3600 * 1000;
    for (int i = 0; i < 100; i++)
        assert_int_equal(when(l, "ns/w"), 0);
    assert_int_equal(when(l, "ns/w"), 100);
    /* A clock going back adds nothing. */
    clock -= 10000;
    assert_int_equal(when(l, "ns/w"), 200);
    rl_free(l);
}

static void test_combined_takes_the_max(void **state)
{
    (void)state;
    uint64_t clock = 0;
    struct rl_options o;
    rl_options_init(&o);
    o.now_ms = fake_now;
    o.clock_data = &clock;
    struct rl *l = NULL;
    assert_int_equal(rl_new(&o, &l), 0);
    /* Within the burst, the per-key backoff decides. */
    assert_int_equal(when(l, "ns/a"), 5);
    assert_int_equal(when(l, "ns/a"), 10);
    char key[32];
    for (int i = 0; i < 98; i++) {
        snprintf(key, sizeof(key), "ns/k%d", i);
        assert_int_equal(when(l, key), 5);
    }
    /* The bucket is empty: a fresh key waits 100 ms rather than 5. */
    assert_int_equal(when(l, "ns/b"), 100);
    /* A key deep in backoff waits for its backoff, the longer. */
    clock += 100 * 1000; /* refill */
    for (int i = 0; i < 12; i++)
        when(l, "ns/c");
    assert_int_equal(when(l, "ns/c"), 5 << 12);
    rl_free(l);
}

static void test_bad_options_and_keys(void **state)
{
    (void)state;
    uint64_t clock = 0;
    struct rl_options o;
    struct rl *l = NULL;

    rl_options_init(&o); /* a bucket without a clock */
    assert_int_equal(rl_new(&o, &l), -EINVAL);
    o.now_ms = fake_now;
    o.clock_data = &clock;
    o.burst = 0;
    assert_int_equal(rl_new(&o, &l), -EINVAL);
    o.burst = 1;
    o.qps = -1;
    assert_int_equal(rl_new(&o, &l), -EINVAL);
    o.qps = 1;
    o.max_delay_ms = 1;
    assert_int_equal(rl_new(&o, &l), -EINVAL); /* max < base */
    assert_null(l);
    assert_int_equal(rl_new(NULL, &l), -EINVAL);

    rl_options_init(&o);
    o.qps = 0;
    o.max_keys = 2;
    assert_int_equal(rl_new(&o, &l), 0);
    uint64_t d = 77;
    assert_int_equal(rl_when(l, "", &d), -EINVAL);
    assert_int_equal(rl_when(l, NULL, &d), -EINVAL);
    char big[RL_KEY_MAX + 2];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(rl_when(l, big, &d), VMG_ETOOBIG);
    big[RL_KEY_MAX] = '\0'; /* exactly the maximum is fine */
    assert_int_equal(rl_when(l, big, &d), 0);
    assert_int_equal(rl_when(l, "a", &d), 0);
    d = 77;
    assert_int_equal(rl_when(l, "b", &d), -ENOSPC); /* bounded, and told */
    assert_int_equal(d, 77);                        /* no output on failure */
    assert_int_equal(rl_num_requeues(l, "b"), 0);
    assert_int_equal(rl_when(l, "a", &d), 0); /* known keys still count */
    assert_int_equal(d, 10);
    rl_forget(l, "a");
    assert_int_equal(rl_when(l, "b", &d), 0);
    rl_free(l);
    rl_free(NULL);
}

/* Many keys: the table grows, shrinks, and deleting from the middle of
 * probe clusters keeps every other key reachable. */
static void test_many_keys(void **state)
{
    (void)state;
    struct rl *l = backoff_only();
    char key[32];
    enum { N = 20000 };
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "ns/vg-%d", i);
        for (int j = 0; j <= i % 3; j++)
            when(l, key);
    }
    assert_int_equal(rl_keys(l), N);
    for (int i = 0; i < N; i += 2) {
        snprintf(key, sizeof(key), "ns/vg-%d", i);
        rl_forget(l, key);
    }
    assert_int_equal(rl_keys(l), N / 2);
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "ns/vg-%d", i);
        assert_int_equal(rl_num_requeues(l, key), i % 2 ? i % 3 + 1 : 0);
    }
    for (int i = 1; i < N; i += 2) {
        snprintf(key, sizeof(key), "ns/vg-%d", i);
        rl_forget(l, key);
    }
    assert_int_equal(rl_keys(l), 0);
    assert_int_equal(when(l, "ns/vg-1"), 5);
    rl_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_client_go),
        cmocka_unit_test(test_backoff_doubles_up_to_the_cap),
        cmocka_unit_test(test_forget_resets),
        cmocka_unit_test(test_custom_parameters),
        cmocka_unit_test(test_bucket_burst_then_rate),
        cmocka_unit_test(test_combined_takes_the_max),
        cmocka_unit_test(test_bad_options_and_keys),
        cmocka_unit_test(test_many_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
