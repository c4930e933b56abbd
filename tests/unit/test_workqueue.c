/* test_workqueue.c: the workqueue's semantics on a fake clock, driven with
 * wq_poll() and no sleeping; a real loop only for closing and for one timer
 * of a few milliseconds. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "kube/workqueue.h"
#include "lib/err.h"

/* What a test sees: the keys dispatched, in order, and the observations. */
struct fx {
    uv_loop_t loop;
    struct wq *q;
    uint64_t now;
    char **got; /* copies of dispatched keys */
    size_t ngot, capgot;
    int done_at_once;  /* the handler calls wq_done itself */
    int readd_at_once; /* ... after adding the key again */
    int delay_once;    /* ... after adding the key again in 100 ms, once */
    int close_after;   /* close the queue once this many keys came (real loop) */
    int close_called;
    int closed;
    double queue_sum, work_sum;
    int nqueue, nwork;
};

static uint64_t fake_now(void *data)
{
    return ((struct fx *)data)->now;
}

static void on_closed(void *data)
{
    ((struct fx *)data)->closed++;
}

static void record(void *data, const char *key)
{
    struct fx *f = data;
    if (f->ngot == f->capgot) {
        f->capgot = f->capgot ? f->capgot * 2 : 64;
        f->got = realloc(f->got, f->capgot * sizeof(*f->got));
        assert_non_null(f->got);
    }
    f->got[f->ngot] = strdup(key);
    assert_non_null(f->got[f->ngot]);
    f->ngot++;
    if (f->readd_at_once)
        assert_int_equal(wq_add(f->q, key), 0);
    if (f->delay_once) {
        f->delay_once = 0;
        assert_int_equal(wq_add_after(f->q, key, 100), 0);
        assert_int_equal(wq_done(f->q, key), 0);
    } else if (f->done_at_once || f->readd_at_once) {
        assert_int_equal(wq_done(f->q, key), 0);
    }
    if (f->close_after && (int)f->ngot == f->close_after) {
        assert_int_equal(wq_close(f->q, on_closed, f), 0);
        f->close_called = 1;
    }
}

static void observed(void *data, int kind, double seconds)
{
    struct fx *f = data;
    if (kind == WQ_QUEUE_DURATION) {
        f->queue_sum += seconds;
        f->nqueue++;
    } else {
        assert_int_equal(kind, WQ_WORK_DURATION);
        f->work_sum += seconds;
        f->nwork++;
    }
}

static void options(struct fx *f, struct wq_options *o, size_t max_active)
{
    memset(o, 0, sizeof(*o));
    o->name = "vmgroup";
    o->handler = record;
    o->handler_data = f;
    o->max_active = max_active;
    o->now_ms = fake_now;
    o->clock_data = f;
    o->observe = observed;
    o->observe_data = f;
}

/* fx_alloc: a fixture with its loop and no queue yet. */
static struct fx *fx_alloc(void)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    return f;
}

/* fx_start: a queue on the fake clock delivering to record(). */
static struct fx *fx_start(size_t max_active)
{
    struct fx *f = fx_alloc();
    struct wq_options o;
    options(f, &o, max_active);
    assert_int_equal(wq_new(&f->loop, &o, &f->q), 0);
    return f;
}

/* fx_end closes the queue on the real loop and checks that it went: the
 * close callback ran once and the loop has no handle left. ASan's leak
 * check does the rest. */
static void fx_end(struct fx *f)
{
    if (!f->close_called)
        assert_int_equal(wq_close(f->q, on_closed, f), 0);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f->closed, 1);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    for (size_t i = 0; i < f->ngot; i++)
        free(f->got[i]);
    free(f->got);
    free(f);
}

static void assert_got(struct fx *f, const char *const *keys, size_t n)
{
    assert_int_equal(f->ngot, n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(f->got[i], keys[i]);
}

#define ASSERT_GOT(f, ...)                                                                         \
    do {                                                                                           \
        const char *const want_[] = {__VA_ARGS__};                                                 \
        assert_got((f), want_, sizeof(want_) / sizeof(want_[0]));                                  \
    } while (0)

static struct wq_stats stats(struct fx *f)
{
    struct wq_stats s;
    wq_get_stats(f->q, &s);
    return s;
}

static void test_duplicates_collapse(void **state)
{
    (void)state;
    struct fx *f = fx_start(10);
    assert_int_equal(wq_add(f->q, "ns/a"), 0);
    assert_int_equal(wq_add(f->q, "ns/b"), 0);
    assert_int_equal(wq_add(f->q, "ns/a"), 0);
    assert_int_equal(wq_add(f->q, "ns/a"), 0);
    struct wq_stats s = stats(f);
    assert_int_equal(s.depth, 2);
    assert_int_equal(s.keys, 2);
    assert_int_equal(s.adds_total, 2);
    assert_int_equal(f->ngot, 0); /* nothing is dispatched from inside wq_add */
    assert_int_equal(wq_poll(f->q), 2);
    ASSERT_GOT(f, "ns/a", "ns/b");
    assert_int_equal(wq_poll(f->q), 0);
    assert_int_equal(stats(f).depth, 0);
    assert_string_equal(wq_name(f->q), "vmgroup");
    fx_end(f);
}

static void test_fifo_order(void **state)
{
    (void)state;
    struct fx *f = fx_start(100);
    const char *keys[] = {"ns/c", "ns/a", "ns/e", "ns/b", "ns/d"};
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(wq_add(f->q, keys[i]), 0);
    assert_int_equal(wq_add(f->q, "ns/a"), 0); /* a duplicate keeps its place */
    assert_int_equal(wq_poll(f->q), 5);
    assert_got(f, keys, 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(wq_done(f->q, keys[i]), 0);
    assert_int_equal(stats(f).keys, 0); /* all freed */
    fx_end(f);
}

static void test_never_twice_at_once(void **state)
{
    (void)state;
    struct fx *f = fx_start(10);
    assert_int_equal(wq_add(f->q, "ns/a"), 0);
    assert_int_equal(wq_poll(f->q), 1);
    /* Added while it is processed: held back, once however many adds. */
    assert_int_equal(wq_add(f->q, "ns/a"), 0);
    assert_int_equal(wq_add(f->q, "ns/a"), 0);
    assert_int_equal(wq_add(f->q, "ns/b"), 0);
    struct wq_stats s = stats(f);
    assert_int_equal(s.depth, 1); /* only b */
    assert_int_equal(s.active, 1);
    assert_int_equal(wq_poll(f->q), 1);
    ASSERT_GOT(f, "ns/a", "ns/b");
    assert_int_equal(wq_poll(f->q), 0);
    /* Done: it runs again, after what was queued meanwhile. */
    assert_int_equal(wq_add(f->q, "ns/c"), 0);
    assert_int_equal(wq_done(f->q, "ns/a"), 0);
    assert_int_equal(stats(f).depth, 2);
    assert_int_equal(wq_poll(f->q), 2);
    ASSERT_GOT(f, "ns/a", "ns/b", "ns/c", "ns/a");
    /* Done without re-add: it goes. */
    assert_int_equal(wq_done(f->q, "ns/a"), 0);
    assert_int_equal(wq_done(f->q, "ns/a"), -ENOENT);
    assert_int_equal(wq_done(f->q, "ns/never"), -ENOENT);
    assert_int_equal(wq_poll(f->q), 0);
    assert_int_equal(stats(f).keys, 2); /* b and c are processing */
    fx_end(f);
}

static void test_max_active_bound(void **state)
{
    (void)state;
    struct fx *f = fx_start(2);
    char key[16];
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof(key), "ns/k%d", i);
        assert_int_equal(wq_add(f->q, key), 0);
    }
    assert_int_equal(wq_poll(f->q), 2);
    assert_int_equal(wq_poll(f->q), 0);
    struct wq_stats s = stats(f);
    assert_int_equal(s.active, 2);
    assert_int_equal(s.depth, 3);
    assert_int_equal(wq_done(f->q, "ns/k1"), 0);
    assert_int_equal(wq_poll(f->q), 1);
    ASSERT_GOT(f, "ns/k0", "ns/k1", "ns/k2");
    assert_int_equal(stats(f).active, 2);
    fx_end(f);
}

/* A handler that finishes at once, even re-adding its key, does not make
 * dispatch recurse or spin: one pass hands out what was ready when it
 * started, and the re-added key waits for the next pass. */
static void test_synchronous_done_and_readd(void **state)
{
    (void)state;
    struct fx *f = fx_start(1);
    f->readd_at_once = 1;
    assert_int_equal(wq_add(f->q, "ns/a"), 0);
    assert_int_equal(wq_add(f->q, "ns/b"), 0);
    assert_int_equal(wq_poll(f->q), 2);
    ASSERT_GOT(f, "ns/a", "ns/b");
    assert_int_equal(stats(f).depth, 2);
    assert_int_equal(stats(f).active, 0);
    assert_int_equal(wq_poll(f->q), 2);
    ASSERT_GOT(f, "ns/a", "ns/b", "ns/a", "ns/b");
    fx_end(f);
}

/* A handler that puts its key off (as the manager does with a key met
 * past the lease's renew deadline) adds it again before its wq_done, while
 * the queue's copy of the key is still valid: it comes again once, when
 * due. */
static void test_put_off_by_its_handler(void **state)
{
    (void)state;
    struct fx *f = fx_start(1);
    f->done_at_once = 1;
    f->delay_once = 1;
    assert_int_equal(wq_add(f->q, "ns/a"), 0);
    assert_int_equal(wq_poll(f->q), 1);
    assert_int_equal(stats(f).active, 0);
    f->now += 99;
    assert_int_equal(wq_poll(f->q), 0);
    f->now += 1;
    assert_int_equal(wq_poll(f->q), 1);
    ASSERT_GOT(f, "ns/a", "ns/a");
    f->now += 1000;
    assert_int_equal(wq_poll(f->q), 0);
    fx_end(f);
}

static void test_add_after_order(void **state)
{
    (void)state;
    struct fx *f = fx_start(10);
    f->done_at_once = 1;
    f->now = 1000;
    assert_int_equal(wq_add_after(f->q, "ns/a", 300), 0);
    assert_int_equal(wq_add_after(f->q, "ns/b", 100), 0);
    assert_int_equal(wq_add_after(f->q, "ns/c", 200), 0);
    assert_int_equal(wq_add_after(f->q, "ns/d", 200), 0); /* same deadline as c: after c */
    struct wq_stats s = stats(f);
    assert_int_equal(s.waiting, 4);
    assert_int_equal(s.depth, 0);
    assert_int_equal(s.retries_total, 4);
    assert_int_equal(wq_poll(f->q), 0);
    f->now = 1099;
    assert_int_equal(wq_poll(f->q), 0);
    f->now = 1100;
    assert_int_equal(wq_poll(f->q), 1);
    ASSERT_GOT(f, "ns/b");
    f->now = 1250;
    assert_int_equal(wq_poll(f->q), 2);
    ASSERT_GOT(f, "ns/b", "ns/c", "ns/d");
    f->now = 5000; /* late polls still deliver */
    assert_int_equal(wq_poll(f->q), 1);
    ASSERT_GOT(f, "ns/b", "ns/c", "ns/d", "ns/a");
    s = stats(f);
    assert_int_equal(s.waiting, 0);
    assert_int_equal(s.keys, 0);
    /* A zero delay is an add. */
    assert_int_equal(wq_add_after(f->q, "ns/e", 0), 0);
    assert_int_equal(stats(f).depth, 1);
    assert_int_equal(stats(f).waiting, 0);
    fx_end(f);
}

static void test_earlier_deadline_wins(void **state)
{
    (void)state;
    struct fx *f = fx_start(10);
    assert_int_equal(wq_add_after(f->q, "ns/a", 500), 0);
    assert_int_equal(wq_add_after(f->q, "ns/a", 100), 0); /* moves a earlier */
    assert_int_equal(wq_add_after(f->q, "ns/b", 100), 0);
    assert_int_equal(wq_add_after(f->q, "ns/b", 500), 0); /* keeps b's earlier deadline */
    assert_int_equal(stats(f).waiting, 2);
    f->now = 100;
    assert_int_equal(wq_poll(f->q), 2);
    ASSERT_GOT(f, "ns/a", "ns/b");
    f->now = 10000;
    assert_int_equal(wq_poll(f->q), 0); /* no leftover deadline */
    assert_int_equal(stats(f).waiting, 0);
    fx_end(f);
}

/* A key both queued and waiting runs once when its deadline comes while it
 * is still queued, and once more if the deadline comes after it ran. */
static void test_add_after_of_a_queued_key(void **state)
{
    (void)state;
    struct fx *f = fx_start(1);
    assert_int_equal(wq_add(f->q, "ns/x"), 0);
    assert_int_equal(wq_add(f->q, "ns/a"), 0);
    assert_int_equal(wq_add_after(f->q, "ns/a", 10), 0);
    assert_int_equal(wq_poll(f->q), 1); /* x */
    f->now = 10;
    assert_int_equal(wq_poll(f->q), 0); /* a is due but already queued */
    assert_int_equal(stats(f).depth, 1);
    assert_int_equal(wq_done(f->q, "ns/x"), 0);
    assert_int_equal(wq_poll(f->q), 1); /* a, once */
    assert_int_equal(wq_done(f->q, "ns/a"), 0);
    assert_int_equal(wq_poll(f->q), 0);
    ASSERT_GOT(f, "ns/x", "ns/a");
    /* Due while processing: runs again after done. */
    assert_int_equal(wq_add(f->q, "ns/b"), 0);
    assert_int_equal(wq_add_after(f->q, "ns/b", 5), 0);
    assert_int_equal(wq_poll(f->q), 1);
    f->now = 20;
    assert_int_equal(wq_poll(f->q), 0);
    assert_int_equal(wq_done(f->q, "ns/b"), 0);
    assert_int_equal(wq_poll(f->q), 1);
    ASSERT_GOT(f, "ns/x", "ns/a", "ns/b", "ns/b");
    fx_end(f);
}

/* poll_until returns the first time (stepping 1 ms) at which key comes. */
static uint64_t poll_until(struct fx *f, uint64_t limit)
{
    size_t before = f->ngot;
    while (f->now < limit) {
        wq_poll(f->q);
        if (f->ngot > before)
            return f->now;
        f->now++;
    }
    return UINT64_MAX;
}

static void test_rate_limited_backoff(void **state)
{
    (void)state;
    struct fx *f = fx_start(1);
    f->done_at_once = 1;
    uint64_t want[] = {5, 10, 20, 40, 80};
    for (size_t i = 0; i < 5; i++) {
        uint64_t start = f->now;
        assert_int_equal(wq_num_requeues(f->q, "ns/a"), i);
        assert_int_equal(wq_add_rate_limited(f->q, "ns/a"), 0);
        assert_int_equal(poll_until(f, start + 1000) - start, want[i]);
    }
    assert_int_equal(wq_num_requeues(f->q, "ns/a"), 5);
    assert_int_equal(stats(f).retries_total, 5);
    wq_forget(f->q, "ns/a");
    assert_int_equal(wq_num_requeues(f->q, "ns/a"), 0);
    uint64_t start = f->now;
    assert_int_equal(wq_add_rate_limited(f->q, "ns/a"), 0);
    assert_int_equal(poll_until(f, start + 1000) - start, 5);
    assert_int_equal(f->ngot, 6);
    fx_end(f);
}

/* The default limiter's bucket: after a burst of 100, 10 a second. */
static void test_rate_limited_bucket(void **state)
{
    (void)state;
    struct fx *f = fx_start(1000);
    f->done_at_once = 1;
    char key[16];
    for (int i = 0; i < 110; i++) {
        snprintf(key, sizeof(key), "ns/k%03d", i);
        assert_int_equal(wq_add_rate_limited(f->q, key), 0);
    }
    f->now = 5;
    assert_int_equal(wq_poll(f->q), 100);
    f->now = 99;
    assert_int_equal(wq_poll(f->q), 0);
    f->now = 100;
    assert_int_equal(wq_poll(f->q), 1);
    f->now = 1000;
    assert_int_equal(wq_poll(f->q), 9);
    assert_int_equal(f->ngot, 110);
    assert_string_equal(f->got[100], "ns/k100");
    assert_string_equal(f->got[109], "ns/k109");
    fx_end(f);
}

static void test_bound_returns_enospc(void **state)
{
    (void)state;
    struct fx *f = fx_alloc();
    struct wq_options o;
    options(f, &o, 1);
    o.max_keys = 3;
    assert_int_equal(wq_new(&f->loop, &o, &f->q), 0);

    assert_int_equal(wq_add(f->q, "ns/a"), 0);
    assert_int_equal(wq_add_after(f->q, "ns/b", 100), 0);
    assert_int_equal(wq_add(f->q, "ns/c"), 0);
    assert_int_equal(wq_add(f->q, "ns/d"), -ENOSPC);
    assert_int_equal(wq_add_after(f->q, "ns/d", 5), -ENOSPC);
    assert_int_equal(wq_add_rate_limited(f->q, "ns/d"), -ENOSPC);
    assert_int_equal(wq_num_requeues(f->q, "ns/d"), 0); /* nothing counted */
    assert_int_equal(wq_add(f->q, "ns/a"), 0);          /* known keys are fine */
    assert_int_equal(wq_add_after(f->q, "ns/c", 5), 0);
    assert_int_equal(wq_add_rate_limited(f->q, "ns/a"), 0);
    struct wq_stats s = stats(f);
    assert_int_equal(s.keys, 3);
    assert_int_equal(s.rejected_total, 3);
    /* a processing still counts; once it is done (and not waiting) it goes. */
    assert_int_equal(wq_poll(f->q), 1);
    f->now = 5;
    assert_int_equal(wq_poll(f->q), 0);
    assert_int_equal(wq_done(f->q, "ns/a"), 0); /* a ran; its rate-limited add is due at 5 */
    assert_int_equal(wq_poll(f->q), 1);         /* c */
    assert_int_equal(wq_done(f->q, "ns/c"), 0);
    assert_int_equal(wq_poll(f->q), 1); /* a, from its rate-limited add */
    assert_int_equal(wq_done(f->q, "ns/a"), 0);
    assert_int_equal(stats(f).keys, 1); /* b waits */
    assert_int_equal(wq_add(f->q, "ns/d"), 0);
    ASSERT_GOT(f, "ns/a", "ns/c", "ns/a");
    fx_end(f);
}

static void test_bad_keys(void **state)
{
    (void)state;
    struct fx *f = fx_start(1);
    char big[WQ_KEY_MAX + 2];
    memset(big, 'k', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(wq_add(f->q, NULL), -EINVAL);
    assert_int_equal(wq_add(f->q, ""), -EINVAL);
    assert_int_equal(wq_add(f->q, big), VMG_ETOOBIG);
    assert_int_equal(wq_add_after(f->q, big, 10), VMG_ETOOBIG);
    assert_int_equal(wq_add_rate_limited(f->q, big), VMG_ETOOBIG);
    assert_int_equal(wq_done(f->q, ""), -EINVAL);
    big[WQ_KEY_MAX] = '\0';
    assert_int_equal(wq_add(f->q, big), 0);
    assert_int_equal(wq_poll(f->q), 1);
    assert_int_equal(strlen(f->got[0]), WQ_KEY_MAX);
    assert_int_equal(stats(f).keys, 1);

    struct wq_options o;
    struct wq *q = NULL;
    options(f, &o, 1);
    o.name = big;
    assert_int_equal(wq_new(&f->loop, &o, &q), -EINVAL);
    assert_int_equal(wq_new(NULL, NULL, &q), -EINVAL);
    assert_null(q);
    fx_end(f);
}

static void test_shut_down_rejects_adds(void **state)
{
    (void)state;
    struct fx *f = fx_start(1);
    assert_int_equal(wq_add(f->q, "ns/a"), 0);
    assert_int_equal(wq_add(f->q, "ns/b"), 0);
    assert_int_equal(wq_add_after(f->q, "ns/c", 10), 0);
    assert_int_equal(wq_poll(f->q), 1);
    assert_false(wq_shutting_down(f->q));
    wq_shut_down(f->q);
    wq_shut_down(f->q);
    assert_true(wq_shutting_down(f->q));
    assert_int_equal(wq_add(f->q, "ns/x"), -ESHUTDOWN);
    assert_int_equal(wq_add_after(f->q, "ns/x", 10), -ESHUTDOWN);
    assert_int_equal(wq_add_rate_limited(f->q, "ns/x"), -ESHUTDOWN);
    assert_int_equal(wq_num_requeues(f->q, "ns/x"), 0);
    const char *key = NULL;
    assert_int_equal(wq_get(f->q, &key), -ESHUTDOWN);
    /* Work in hand can finish, but nothing more is handed out. */
    assert_int_equal(wq_done(f->q, "ns/a"), 0);
    f->now = 100;
    assert_int_equal(wq_poll(f->q), 0);
    ASSERT_GOT(f, "ns/a");
    fx_end(f);
}

/* Closing frees keys in every state: queued, waiting, processing, and
 * processing with a re-add pending. */
static void test_close_frees_everything(void **state)
{
    (void)state;
    struct fx *f = fx_start(2);
    assert_int_equal(wq_add(f->q, "ns/p"), 0);
    assert_int_equal(wq_add(f->q, "ns/pd"), 0);
    assert_int_equal(wq_poll(f->q), 2);
    assert_int_equal(wq_add(f->q, "ns/pd"), 0);
    assert_int_equal(wq_add(f->q, "ns/q"), 0);
    assert_int_equal(wq_add_after(f->q, "ns/w", 1000000), 0);
    assert_int_equal(wq_add_after(f->q, "ns/q", 5), 0);
    assert_int_equal(wq_add_rate_limited(f->q, "ns/r"), 0);
    assert_int_equal(stats(f).keys, 5);
    assert_int_equal(wq_close(f->q, on_closed, f), 0);
    f->close_called = 1;
    assert_int_equal(wq_close(f->q, on_closed, f), -EALREADY);
    assert_int_equal(f->closed, 0); /* freed in the close callbacks, not before */
    fx_end(f);
}

/* The pull API, without a handler. */
static void test_get(void **state)
{
    (void)state;
    struct fx *f = fx_alloc();
    struct wq_options o = {.max_active = 2, .now_ms = fake_now, .clock_data = f};
    assert_int_equal(wq_new(&f->loop, &o, &f->q), 0);
    const char *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(wq_get(f->q, &a), -EAGAIN);
    assert_int_equal(wq_add(f->q, "ns/a"), 0);
    assert_int_equal(wq_add(f->q, "ns/b"), 0);
    assert_int_equal(wq_add(f->q, "ns/c"), 0);
    assert_int_equal(wq_add_after(f->q, "ns/d", 10), 0);
    assert_int_equal(wq_poll(f->q), 0); /* no handler: nothing dispatched */
    assert_int_equal(wq_get(f->q, &a), 0);
    assert_string_equal(a, "ns/a");
    assert_int_equal(wq_get(f->q, &b), 0);
    assert_string_equal(b, "ns/b");
    assert_int_equal(wq_get(f->q, &c), -EAGAIN); /* max_active */
    assert_null(c);
    assert_int_equal(wq_add(f->q, "ns/a"), 0);
    assert_int_equal(wq_done(f->q, a), 0);
    assert_int_equal(wq_done(f->q, b), 0);
    f->now = 10;
    assert_int_equal(wq_get(f->q, &c), 0);
    assert_string_equal(c, "ns/c");
    assert_int_equal(wq_get(f->q, &c), 0);
    assert_string_equal(c, "ns/a");
    assert_int_equal(wq_done(f->q, c), 0);
    assert_int_equal(wq_get(f->q, &c), 0);
    assert_string_equal(c, "ns/d"); /* moved in by wq_get itself */
    fx_end(f);
}

static void test_stats_and_durations(void **state)
{
    (void)state;
    struct fx *f = fx_start(5);
    f->now = 1000;
    assert_int_equal(wq_add(f->q, "ns/a"), 0);
    f->now = 1030;
    assert_int_equal(wq_add(f->q, "ns/b"), 0);
    assert_int_equal(wq_poll(f->q), 2); /* a waited 30 ms, b 0 ms */
    assert_int_equal(f->nqueue, 2);
    assert_float_equal(f->queue_sum, 0.030, 1e-9);
    f->now = 1060;
    assert_int_equal(wq_add(f->q, "ns/c"), 0);
    assert_int_equal(wq_poll(f->q), 1);
    f->now = 1100;
    struct wq_stats s = stats(f);
    assert_int_equal(s.active, 3);
    /* a and b for 70 ms, c for 40 ms. */
    assert_float_equal(s.unfinished_work_seconds, 0.180, 1e-9);
    assert_float_equal(s.longest_running_processor_seconds, 0.070, 1e-9);
    assert_int_equal(wq_done(f->q, "ns/a"), 0);
    assert_int_equal(f->nwork, 1);
    assert_float_equal(f->work_sum, 0.070, 1e-9);
    assert_int_equal(wq_done(f->q, "ns/b"), 0);
    assert_int_equal(wq_done(f->q, "ns/c"), 0);
    s = stats(f);
    assert_float_equal(s.unfinished_work_seconds, 0, 0);
    assert_float_equal(s.longest_running_processor_seconds, 0, 0);
    assert_int_equal(s.adds_total, 3);
    assert_int_equal(f->nwork, 3);
    fx_end(f);
}

/* A real loop: dispatch comes from the idle handle, delays from the uv
 * timer on the loop's own clock. */
static void test_real_loop(void **state)
{
    (void)state;
    struct fx *f = fx_alloc();
    struct wq_options o = {.handler = record, .handler_data = f, .max_active = 1};
    assert_int_equal(wq_new(&f->loop, &o, &f->q), 0);
    f->done_at_once = 1;
    f->close_after = 3;
    uv_update_time(&f->loop);
    uint64_t start = uv_now(&f->loop);
    assert_int_equal(wq_add_after(f->q, "ns/late", 8), 0);
    assert_int_equal(wq_add_after(f->q, "ns/later", 20), 0);
    assert_int_equal(wq_add_after(f->q, "ns/later", 3), 0); /* earlier: now the first */
    assert_int_equal(wq_add(f->q, "ns/now"), 0);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0); /* returns once closed */
    assert_true(uv_now(&f->loop) - start >= 8);
    ASSERT_GOT(f, "ns/now", "ns/later", "ns/late");
    fx_end(f);
}

/* A handler that keeps re-adding its key on a real loop still lets the
 * loop turn: other handles (here a timer that closes the queue) run. */
static void close_from_timer(uv_timer_t *t)
{
    struct fx *f = t->data;
    assert_int_equal(wq_close(f->q, on_closed, f), 0);
    f->close_called = 1;
    uv_close((uv_handle_t *)t, NULL);
}

static void test_busy_handler_does_not_starve_the_loop(void **state)
{
    (void)state;
    struct fx *f = fx_alloc();
    struct wq_options o = {.handler = record, .handler_data = f, .max_active = 4};
    assert_int_equal(wq_new(&f->loop, &o, &f->q), 0);
    f->readd_at_once = 1;
    assert_int_equal(wq_add(f->q, "ns/spin"), 0);
    uv_timer_t t;
    assert_int_equal(uv_timer_init(&f->loop, &t), 0);
    t.data = f;
    assert_int_equal(uv_timer_start(&t, close_from_timer, 2, 0), 0);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f->closed, 1);
    assert_true(f->ngot > 1);
    fx_end(f);
}

/* Many keys, each path: dedup, FIFO, deadlines out of order. */
static void test_ten_thousand_keys(void **state)
{
    (void)state;
    enum { N = 10000 };
    struct fx *f = fx_start(N);
    char key[32];
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < N; i++) {
            snprintf(key, sizeof(key), "ns/vg-%d", i);
            assert_int_equal(wq_add(f->q, key), 0);
        }
    assert_int_equal(stats(f).depth, N);
    assert_int_equal(wq_poll(f->q), N);
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "ns/vg-%d", i);
        assert_string_equal(f->got[i], key);
        assert_int_equal(wq_done(f->q, key), 0);
    }
    assert_int_equal(stats(f).keys, 0);

    /* Deadlines in a scrambled order come out sorted. */
    uint32_t x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        snprintf(key, sizeof(key), "%u/vg-%d", (x >> 8) % 5000, i);
        assert_int_equal(wq_add_after(f->q, key, 1 + (x >> 8) % 5000), 0);
    }
    assert_int_equal(stats(f).waiting, N);
    f->now = 5001;
    assert_int_equal(wq_poll(f->q), N);
    unsigned prev = 0;
    for (int i = N; i < 2 * N; i++) {
        unsigned d = (unsigned)strtoul(f->got[i], NULL, 10);
        assert_true(d >= prev);
        prev = d;
    }
    fx_end(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duplicates_collapse),
        cmocka_unit_test(test_fifo_order),
        cmocka_unit_test(test_never_twice_at_once),
        cmocka_unit_test(test_max_active_bound),
        cmocka_unit_test(test_synchronous_done_and_readd),
        cmocka_unit_test(test_put_off_by_its_handler),
        cmocka_unit_test(test_add_after_order),
        cmocka_unit_test(test_earlier_deadline_wins),
        cmocka_unit_test(test_add_after_of_a_queued_key),
        cmocka_unit_test(test_rate_limited_backoff),
        cmocka_unit_test(test_rate_limited_bucket),
        cmocka_unit_test(test_bound_returns_enospc),
        cmocka_unit_test(test_bad_keys),
        cmocka_unit_test(test_shut_down_rejects_adds),
        cmocka_unit_test(test_close_frees_everything),
        cmocka_unit_test(test_get),
        cmocka_unit_test(test_stats_and_durations),
        cmocka_unit_test(test_real_loop),
        cmocka_unit_test(test_busy_handler_does_not_starve_the_loop),
        cmocka_unit_test(test_ten_thousand_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
