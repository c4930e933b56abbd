/* test_leader.c: the Lease leader elector on a fake clock, against a fake
 * API server that holds one Lease with resourceVersions (so updates can
 * conflict), whose requests complete only when a test delivers them. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube/leader.h"
#include "lib/err.h"

/* The fake API server: one Lease (or none). */
struct store {
    cJSON *lease; /* NULL: absent */
    long rv;
    int fail; /* when nonzero, every delivered request fails with it */
    int writes;
    const char *rewrite_holder; /* non-NULL: a write keeps this holder (a webhook) */
};

/* rewrite puts s->rewrite_holder in the Lease just written, if set. */
static void rewrite(struct store *s)
{
    cJSON *spec = cJSON_GetObjectItemCaseSensitive(s->lease, "spec");

    if (s->rewrite_holder && spec)
        cJSON_ReplaceItemInObjectCaseSensitive(spec, "holderIdentity",
                                               cJSON_CreateString(s->rewrite_holder));
}

enum { R_GET = 1, R_CREATE, R_UPDATE };

struct req {
    unsigned long seq; /* start order */
    int kind;
    cJSON *body;
    uint64_t timeout_ms;
    leader_io_done done;
    void *data;
    bool live;
};

#define MAX_REQS 8
/* One candidate's connection to the store; slots are reused. */
struct fio {
    struct store *store;
    struct req reqs[MAX_REQS];
    struct req *last; /* the newest request */
    unsigned long seq;
    int started, canceled;
};

static struct req *fio_add(struct fio *f, int kind, const cJSON *body, uint64_t timeout_ms,
                           leader_io_done done, void *data, void **ret_req)
{
    struct req *r = NULL;
    for (size_t i = 0; i < MAX_REQS && !r; i++)
        if (!f->reqs[i].live)
            r = &f->reqs[i];
    assert_non_null(r);
    memset(r, 0, sizeof(*r));
    r->seq = ++f->seq;
    f->last = r;
    r->kind = kind;
    r->body = body ? cJSON_Duplicate(body, 1) : NULL;
    r->timeout_ms = timeout_ms;
    r->done = done;
    r->data = data;
    r->live = true;
    *ret_req = r;
    f->started++;
    return r;
}

static int f_get(void *ctx, const char *ns, const char *name, uint64_t timeout_ms,
                 leader_io_done done, void *data, void **ret_req)
{
    assert_string_equal(ns, "ns1");
    assert_string_equal(name, "lock");
    fio_add(ctx, R_GET, NULL, timeout_ms, done, data, ret_req);
    return 0;
}

static int f_create(void *ctx, const char *ns, const cJSON *body, uint64_t timeout_ms,
                    leader_io_done done, void *data, void **ret_req)
{
    assert_string_equal(ns, "ns1");
    fio_add(ctx, R_CREATE, body, timeout_ms, done, data, ret_req);
    return 0;
}

static int f_update(void *ctx, const char *ns, const char *name, const cJSON *body,
                    uint64_t timeout_ms, leader_io_done done, void *data, void **ret_req)
{
    assert_string_equal(name, "lock");
    fio_add(ctx, R_UPDATE, body, timeout_ms, done, data, ret_req);
    return 0;
}

static void f_cancel(void *ctx, void *req)
{
    struct fio *f = ctx;
    struct req *r = req;
    assert_true(r->live);
    r->live = false;
    f->canceled++;
    cJSON_Delete(r->body);
    r->body = NULL;
    r->done(r->data, VMG_ECANCELED, NULL, "canceled");
}

static const struct leader_io fake_io = {f_get, f_create, f_update, f_cancel};

static const char *rv_of(const cJSON *o)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(m, "resourceVersion");
    return cJSON_IsString(rv) ? rv->valuestring : "";
}

static void set_rv(struct store *s, cJSON *o)
{
    char buf[32];
    cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    assert_non_null(m);
    cJSON_DeleteItemFromObjectCaseSensitive(m, "resourceVersion");
    snprintf(buf, sizeof(buf), "%ld", ++s->rv);
    cJSON_AddStringToObject(m, "resourceVersion", buf);
}

/* Completes the oldest live request of f against its store. Returns its
 * kind, or 0 when none was pending. */
static struct req *oldest(struct fio *f)
{
    struct req *o = NULL;
    for (size_t i = 0; i < MAX_REQS; i++)
        if (f->reqs[i].live && (!o || f->reqs[i].seq < o->seq))
            o = &f->reqs[i];
    return o;
}

static int deliver_one(struct fio *f)
{
    struct req *r = oldest(f);
    if (r) {
        r->live = false;
        struct store *s = f->store;
        int kind = r->kind, err = 0;
        cJSON *answer = NULL;
        if (s->fail) {
            err = s->fail;
        } else if (kind == R_GET) {
            if (s->lease)
                answer = cJSON_Duplicate(s->lease, 1);
            else
                err = VMG_ENOTFOUND;
        } else if (kind == R_CREATE) {
            if (s->lease) {
                err = VMG_ECONFLICT; /* AlreadyExists */
            } else {
                s->lease = cJSON_Duplicate(r->body, 1);
                rewrite(s);
                set_rv(s, s->lease);
                s->writes++;
                answer = cJSON_Duplicate(s->lease, 1);
            }
        } else {
            if (!s->lease) {
                err = VMG_ENOTFOUND;
            } else if (strcmp(rv_of(r->body), rv_of(s->lease)) != 0) {
                err = VMG_ECONFLICT;
            } else {
                cJSON_Delete(s->lease);
                s->lease = cJSON_Duplicate(r->body, 1);
                rewrite(s);
                set_rv(s, s->lease);
                s->writes++;
                answer = cJSON_Duplicate(s->lease, 1);
            }
        }
        cJSON_Delete(r->body);
        r->body = NULL;
        r->done(r->data, err, answer, err ? vmg_strerror(err) : NULL);
        cJSON_Delete(answer);
        return kind;
    }
    return 0;
}

/* Delivers until nothing is pending (completions may start requests). */
static int deliver_all(struct fio *f)
{
    int n = 0;
    while (deliver_one(f))
        n++;
    return n;
}

static int pending(const struct fio *f)
{
    int n = 0;
    for (size_t i = 0; i < MAX_REQS; i++)
        n += f->reqs[i].live;
    return n;
}

static int pending_kind(struct fio *f)
{
    struct req *r = oldest(f);
    return r ? r->kind : 0;
}

/* The lease's spec as the store holds it. */
static struct leader_record stored(const struct store *s)
{
    struct leader_record r;
    assert_non_null(s->lease);
    assert_int_equal(leader_record_from_json(s->lease, &r), 0);
    return r;
}

/* Puts a lease held by holder into the store. */
static void store_put(struct store *s, const char *holder, int64_t dur_s, const char *renew,
                      int64_t transitions)
{
    struct leader_record r;
    memset(&r, 0, sizeof(r));
    snprintf(r.holder, sizeof(r.holder), "%s", holder);
    r.lease_duration_s = dur_s;
    snprintf(r.renew_time, sizeof(r.renew_time), "%s", renew);
    snprintf(r.acquire_time, sizeof(r.acquire_time), "%s", renew);
    r.transitions = transitions;
    cJSON *o = NULL;
    assert_int_equal(leader_record_to_json("ns1", "lock", &r, &o), 0);
    set_rv(s, o);
    cJSON_Delete(s->lease);
    s->lease = o;
}

/* The world of one test: a fake clock shared by candidates. */
struct cand {
    struct fio io;
    leader *le;
    int started, stopped, new_leader;
    enum leader_stop_reason reason;
    char stop_msg[1024];
    char last_leader[LEADER_MAX_IDENTITY + 1];
    bool close_on_stop;
};

struct world {
    uv_loop_t loop;
    uint64_t now;  /* ms */
    int64_t wall;  /* us */
    double jitter; /* what rand01 returns */
    struct store store;
    struct cand c[3];
    int release_done, release_err;
};

static uint64_t w_now(void *data)
{
    return ((struct world *)data)->now;
}

static int64_t w_wall(void *data)
{
    return ((struct world *)data)->wall;
}

static double w_rand(void *data)
{
    return ((struct world *)data)->jitter;
}

static void cb_started(void *data)
{
    ((struct cand *)data)->started++;
}

static void cb_stopped(void *data, enum leader_stop_reason reason, const char *msg)
{
    struct cand *c = data;
    c->stopped++;
    c->reason = reason;
    snprintf(c->stop_msg, sizeof(c->stop_msg), "%s", msg);
    if (c->close_on_stop) {
        leader_close(c->le, NULL, NULL);
        c->le = NULL;
    }
}

static void cb_new_leader(void *data, const char *id)
{
    struct cand *c = data;
    c->new_leader++;
    snprintf(c->last_leader, sizeof(c->last_leader), "%s", id);
}

static void default_opts(struct world *w, struct cand *c, const char *id, struct leader_options *o)
{
    memset(o, 0, sizeof(*o));
    o->ns = "ns1";
    o->name = "lock";
    o->identity = id;
    o->now_ms = w_now;
    o->wall_us = w_wall;
    o->rand01 = w_rand;
    o->clock_data = w;
    o->io = &fake_io;
    o->io_ctx = &c->io;
    o->cb.on_started_leading = cb_started;
    o->cb.on_stopped_leading = cb_stopped;
    o->cb.on_new_leader = cb_new_leader;
    o->cb.data = c;
}

static struct cand *make(struct world *w, int i, const char *id)
{
    struct cand *c = &w->c[i];
    struct leader_options o;
    char err[256];
    c->io.store = &w->store;
    default_opts(w, c, id, &o);
    assert_int_equal(leader_new(&w->loop, &o, &c->le, err, sizeof(err)), 0);
    assert_int_equal(leader_start(c->le), 0);
    return c;
}

static int setup(void **state)
{
    struct world *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    assert_int_equal(uv_loop_init(&w->loop), 0);
    w->now = 1000000;
    w->wall = 1700000000LL * 1000000 + 123456; /* 2023-11-14T22:13:20.123456Z */
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    struct world *w = *state;
    for (int i = 0; i < 3; i++) {
        leader_close(w->c[i].le, NULL, NULL);
        if (pending(&w->c[i].io))
            fail_msg("request left pending after close");
    }
    assert_int_equal(uv_run(&w->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&w->loop), 0);
    cJSON_Delete(w->store.lease);
    free(w);
    return 0;
}

/* Moves the fake clocks on by ms. */
static void advance(struct world *w, uint64_t ms)
{
    w->now += ms;
    w->wall += (int64_t)ms * 1000;
}

/* Advances in steps of step_ms up to total_ms, polling every candidate and
 * delivering their requests at each step. */
static void run_for(struct world *w, uint64_t total_ms, uint64_t step_ms)
{
    for (uint64_t t = 0; t < total_ms; t += step_ms) {
        advance(w, step_ms);
        for (int i = 0; i < 3; i++) {
            if (!w->c[i].le)
                continue;
            leader_poll(w->c[i].le);
            deliver_all(&w->c[i].io);
        }
    }
}

static void test_timing_validation(void **state)
{
    (void)state;
    char err[256];
    assert_int_equal(leader_check_timing(15000, 10000, 2000, err, sizeof(err)), 0);
    assert_int_equal(leader_check_timing(3000, 2000, 500, err, sizeof(err)), 0);
    assert_int_equal(leader_check_timing(10000, 10000, 2000, err, sizeof(err)), VMG_ECONFIG);
    assert_non_null(strstr(err, "lease duration > renew deadline > retry period > 0"));
    assert_non_null(strstr(err, "10000ms, 10000ms, 2000ms"));
    assert_int_equal(leader_check_timing(15000, 2000, 2000, err, sizeof(err)), VMG_ECONFIG);
    assert_int_equal(leader_check_timing(15000, 1000, 2000, err, sizeof(err)), VMG_ECONFIG);
    assert_int_equal(leader_check_timing(15000, 10000, 0, err, sizeof(err)), VMG_ECONFIG);
    assert_int_equal(leader_check_timing(900, 500, 100, err, sizeof(err)), VMG_ECONFIG);
    assert_int_equal(leader_check_timing(0, 0, 0, NULL, 0), VMG_ECONFIG);
}

static void test_new_validates(void **state)
{
    struct world *w = *state;
    struct cand *c = &w->c[0];
    struct leader_options o;
    char err[256];
    leader *le = NULL;

    default_opts(w, c, "a", &o);
    o.lease_duration_ms = 5000;
    o.renew_deadline_ms = 6000;
    assert_int_equal(leader_new(&w->loop, &o, &le, err, sizeof(err)), VMG_ECONFIG);
    assert_null(le);
    assert_non_null(strstr(err, "renew deadline"));

    default_opts(w, c, "a", &o);
    o.ns = "";
    assert_int_equal(leader_new(&w->loop, &o, &le, err, sizeof(err)), -EINVAL);
    default_opts(w, c, "a", &o);
    o.io = NULL;
    assert_int_equal(leader_new(&w->loop, &o, &le, err, sizeof(err)), -EINVAL);
    assert_null(le);

    /* The defaults: 15 s lease, written in whole seconds. */
    default_opts(w, c, NULL, &o);
    c->io.store = &w->store;
    assert_int_equal(leader_new(&w->loop, &o, &c->le, err, sizeof(err)), 0);
    assert_non_null(strchr(leader_identity(c->le), '_'));
    assert_int_equal(leader_start(c->le), 0);
    assert_int_equal(leader_start(c->le), -EALREADY);
    leader_poll(c->le);
    deliver_all(&c->io);
    assert_int_equal(c->started, 1);
    assert_int_equal(stored(&w->store).lease_duration_s, 15);
}

static void test_acquire_when_absent(void **state)
{
    struct world *w = *state;
    struct cand *a = make(w, 0, "a");

    assert_false(leader_is_leader(a->le));
    assert_true(leader_status_value(a->le) == 0.0);
    leader_poll(a->le); /* the first try is at once */
    assert_int_equal(pending_kind(&a->io), R_GET);
    assert_int_equal(deliver_one(&a->io), R_GET);
    assert_int_equal(pending_kind(&a->io), R_CREATE);
    assert_false(leader_is_leader(a->le));
    assert_int_equal(a->started, 0);
    assert_int_equal(deliver_one(&a->io), R_CREATE);
    assert_int_equal(a->started, 1);
    assert_true(leader_is_leader(a->le));
    assert_true(leader_status_value(a->le) == 1.0);
    assert_int_equal(a->new_leader, 1);
    assert_string_equal(a->last_leader, "a");

    struct leader_record r = stored(&w->store);
    assert_string_equal(r.holder, "a");
    assert_int_equal(r.lease_duration_s, 15);
    assert_int_equal(r.transitions, 0);
    assert_string_equal(r.acquire_time, "2023-11-14T22:13:20.123456Z");
    assert_string_equal(r.renew_time, "2023-11-14T22:13:20.123456Z");
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(w->store.lease, "kind");
    assert_string_equal(kind->valuestring, "Lease");

    /* Nothing more until RetryPeriod has passed. */
    advance(w, 1999);
    leader_poll(a->le);
    assert_int_equal(pending(&a->io), 0);
    /* Then it renews: read, then update with the read resourceVersion;
     * acquireTime and transitions are kept. */
    advance(w, 1);
    leader_poll(a->le);
    assert_int_equal(deliver_one(&a->io), R_GET);
    assert_int_equal(pending_kind(&a->io), R_UPDATE);
    assert_int_equal(deliver_one(&a->io), R_UPDATE);
    r = stored(&w->store);
    assert_string_equal(r.holder, "a");
    assert_int_equal(r.transitions, 0);
    assert_string_equal(r.acquire_time, "2023-11-14T22:13:20.123456Z");
    assert_string_equal(r.renew_time, "2023-11-14T22:13:22.123456Z");
    assert_int_equal(a->started, 1);
    assert_int_equal(a->new_leader, 1);

    /* Renewing for a long time keeps it leading. */
    run_for(w, 60000, 100);
    assert_true(leader_is_leader(a->le));
    assert_int_equal(a->stopped, 0);
    assert_int_equal(a->started, 1);
    assert_int_equal(stored(&w->store).transitions, 0);
}

static void test_held_not_expired_then_expired(void **state)
{
    struct world *w = *state;
    /* Held by "other", with a renewTime an hour in the past by our wall
     * clock: that does not count, only when we saw it change. */
    store_put(&w->store, "other", 15, "2023-11-14T21:13:20.000000Z", 4);
    struct cand *b = make(w, 1, "b");
    w->jitter = 0.0;

    leader_poll(b->le);
    assert_int_equal(deliver_one(&b->io), R_GET);
    assert_int_equal(pending(&b->io), 0); /* no write: held */
    assert_false(leader_is_leader(b->le));
    assert_int_equal(b->new_leader, 1);
    assert_string_equal(b->last_leader, "other");

    /* 14.9 s later, with the record unchanged, it is still held. */
    run_for(w, 14900, 100);
    assert_false(leader_is_leader(b->le));
    assert_int_equal(w->store.writes, 0);

    /* At 15 s since the observation, it is taken. */
    run_for(w, 100, 100);
    assert_true(leader_is_leader(b->le));
    assert_int_equal(b->started, 1);
    struct leader_record r = stored(&w->store);
    assert_string_equal(r.holder, "b");
    assert_int_equal(r.transitions, 5);
    assert_string_equal(b->last_leader, "b");
    assert_int_equal(b->new_leader, 2);
}

/* A Lease deleted by hand while another holds it: that holder acts on
 * until it next reads the Lease, so a candidate takes it only once the
 * lease it last saw has expired, not at its next try. */
static void test_deleted_while_held(void **state)
{
    struct world *w = *state;
    store_put(&w->store, "other", 15, "2023-11-14T22:13:20.000000Z", 3);
    struct cand *b = make(w, 1, "b");
    w->jitter = 0.0;

    leader_poll(b->le);
    assert_int_equal(deliver_one(&b->io), R_GET);
    assert_false(leader_is_leader(b->le));
    cJSON_Delete(w->store.lease);
    w->store.lease = NULL;

    /* Read absent every try, for 14.9 s since "other" was seen: held. */
    run_for(w, 14900, 100);
    assert_false(leader_is_leader(b->le));
    assert_int_equal(w->store.writes, 0);
    assert_null(w->store.lease);

    /* Once that lease has expired, the Lease is made anew. */
    run_for(w, 200, 100);
    assert_true(leader_is_leader(b->le));
    assert_int_equal(b->started, 1);
    assert_string_equal(stored(&w->store).holder, "b");
}

/* A write the API server accepted but kept with another holder (a
 * webhook rewrote it) does not make this process the leader, and a
 * leader's renewal kept so ends its leadership. */
static void test_write_kept_with_another_holder(void **state)
{
    struct world *w = *state;
    struct cand *b = make(w, 1, "b");
    w->jitter = 0.0;

    w->store.rewrite_holder = "webhook";
    leader_poll(b->le);
    assert_int_equal(deliver_one(&b->io), R_GET);
    assert_int_equal(deliver_one(&b->io), R_CREATE);
    assert_int_equal(w->store.writes, 1);
    assert_false(leader_is_leader(b->le));
    assert_int_equal(b->started, 0);
    assert_string_equal(b->last_leader, "webhook");

    /* Held by "webhook" now: taken once that lease has expired. */
    w->store.rewrite_holder = NULL;
    run_for(w, 14900, 100);
    assert_false(leader_is_leader(b->le));
    run_for(w, 200, 100);
    assert_true(leader_is_leader(b->le));
    assert_int_equal(b->started, 1);

    /* A renewal kept with another holder: leadership ends. */
    w->store.rewrite_holder = "webhook";
    run_for(w, 2000, 100);
    assert_false(leader_is_leader(b->le));
    assert_int_equal(b->stopped, 1);
    assert_int_equal(b->reason, LEADER_STOP_TAKEN);
    assert_non_null(strstr(b->stop_msg, "holder \"webhook\""));
}

static void test_expiry_counts_from_last_change(void **state)
{
    struct world *w = *state;
    store_put(&w->store, "other", 15, "2023-11-14T22:13:20.000000Z", 0);
    struct cand *b = make(w, 1, "b");
    w->jitter = 0.5;

    run_for(w, 10000, 100);
    assert_false(leader_is_leader(b->le));
    /* The holder renews at t=10 s: a new record, so expiry is counted from
     * when b next reads it. */
    store_put(&w->store, "other", 15, "2023-11-14T22:13:30.000000Z", 0);
    run_for(w, 14000, 100);
    assert_false(leader_is_leader(b->le));
    assert_int_equal(b->started, 0);
    /* Within 15 s + one jittered period (3.2 s) of the change, b holds it. */
    run_for(w, 4200, 100);
    assert_true(leader_is_leader(b->le));
    assert_int_equal(stored(&w->store).transitions, 1);
}

static void test_candidate_wakes_at_expiry_and_jitters(void **state)
{
    struct world *w = *state;
    store_put(&w->store, "other", 3, "2023-11-14T22:13:20.000000Z", 0);
    struct leader_options o;
    char err[256];
    struct cand *b = &w->c[1];
    b->io.store = &w->store;
    default_opts(w, b, "b", &o);
    o.lease_duration_ms = 3000;
    o.renew_deadline_ms = 2000;
    o.retry_period_ms = 500;
    assert_int_equal(leader_new(&w->loop, &o, &b->le, err, sizeof(err)), 0);
    assert_int_equal(leader_start(b->le), 0);
    w->jitter = 0.999;

    leader_poll(b->le);
    assert_int_equal(deliver_all(&b->io), 1);
    int gets = b->io.started;
    /* The next try waits 500 ms + up to 1.2 * 500 ms (here 599 ms). */
    advance(w, 1098);
    leader_poll(b->le);
    assert_int_equal(b->io.started, gets);
    advance(w, 1);
    leader_poll(b->le);
    assert_int_equal(b->io.started, gets + 1);
    assert_int_equal(deliver_all(&b->io), 1);
    /* Tries at 0, 1099, 2198: the next would be 3297, but the lease seen at
     * 0 expires at 3000, and b wakes then. */
    advance(w, 1099);
    leader_poll(b->le);
    assert_int_equal(deliver_all(&b->io), 1);
    assert_false(leader_is_leader(b->le));
    advance(w, 801);
    leader_poll(b->le);
    assert_int_equal(pending(&b->io), 0);
    advance(w, 1);
    leader_poll(b->le);
    assert_int_equal(deliver_all(&b->io), 2);
    assert_true(leader_is_leader(b->le));
}

static void test_renew_deadline_loss(void **state)
{
    struct world *w = *state;
    struct cand *a = make(w, 0, "a");
    leader_poll(a->le);
    deliver_all(&a->io);
    assert_true(leader_is_leader(a->le));
    uint64_t last_ok = w->now; /* the create was sent now */

    /* The API server fails every request from now on. */
    w->store.fail = VMG_ETRANSPORT;
    run_for(w, 9900, 100);
    assert_true(leader_is_leader(a->le));
    assert_int_equal(a->stopped, 0);
    run_for(w, 100, 100);
    assert_int_equal(w->now - last_ok, 10000);
    assert_false(leader_is_leader(a->le));
    assert_int_equal(a->stopped, 1);
    assert_int_equal(a->reason, LEADER_STOP_RENEW_DEADLINE);
    assert_non_null(strstr(a->stop_msg, "not renewed within 10000ms"));
    assert_non_null(strstr(a->stop_msg, "last error"));

    /* Final: the API server coming back changes nothing. */
    w->store.fail = 0;
    int before = a->io.started;
    run_for(w, 30000, 500);
    assert_int_equal(a->io.started, before);
    assert_false(leader_is_leader(a->le));
    assert_int_equal(a->stopped, 1);
    assert_int_equal(a->started, 1);
}

static void test_deadline_counts_from_sending(void **state)
{
    struct world *w = *state;
    struct cand *a = make(w, 0, "a");
    leader_poll(a->le);
    deliver_all(&a->io);
    /* A slow renewal: read at +2 s, answered at +2.3 s; the update is sent
     * then and answered at +2.8 s. The deadline counts from +2.3 s. */
    advance(w, 2000);
    leader_poll(a->le);
    advance(w, 300);
    assert_int_equal(deliver_one(&a->io), R_GET);
    uint64_t sent = w->now;
    advance(w, 500);
    assert_int_equal(deliver_one(&a->io), R_UPDATE);
    w->store.fail = VMG_ETRANSPORT;
    while (w->now < sent + 9999) {
        advance(w, 1);
        leader_poll(a->le);
        deliver_all(&a->io);
    }
    assert_true(leader_is_leader(a->le));
    advance(w, 1);
    leader_poll(a->le);
    assert_false(leader_is_leader(a->le));
    assert_int_equal(a->stopped, 1);
}

static void test_hung_request_loses_at_deadline(void **state)
{
    struct world *w = *state;
    struct cand *a = make(w, 0, "a");
    a->close_on_stop = true; /* the callback may close the elector */
    leader_poll(a->le);
    deliver_all(&a->io);
    assert_true(leader_is_leader(a->le));

    /* The renewal's read never comes back. */
    advance(w, 2000);
    leader_poll(a->le);
    assert_int_equal(pending_kind(&a->io), R_GET);
    assert_int_equal(a->io.last->timeout_ms, 8000); /* what is left */
    advance(w, 7999);
    leader_poll(a->le);
    assert_int_equal(a->stopped, 0);
    advance(w, 1);
    leader_poll(a->le);
    assert_int_equal(a->stopped, 1);
    assert_int_equal(a->reason, LEADER_STOP_RENEW_DEADLINE);
    assert_null(a->le);
    assert_int_equal(pending(&a->io), 0);
    assert_int_equal(a->io.canceled, 1);
}

static void test_conflicting_update_loses(void **state)
{
    struct world *w = *state;
    /* An expired record (holder gone) read by two candidates at once. */
    store_put(&w->store, "", 1, "", 7);
    struct cand *a = make(w, 0, "a");
    struct cand *b = make(w, 1, "b");
    leader_poll(a->le);
    leader_poll(b->le);
    assert_int_equal(deliver_one(&a->io), R_GET);
    assert_int_equal(deliver_one(&b->io), R_GET);
    assert_int_equal(pending_kind(&a->io), R_UPDATE);
    assert_int_equal(pending_kind(&b->io), R_UPDATE);
    /* b's update lands first; a's carries a stale resourceVersion. */
    assert_int_equal(deliver_one(&b->io), R_UPDATE);
    assert_int_equal(deliver_one(&a->io), R_UPDATE);
    assert_true(leader_is_leader(b->le));
    assert_false(leader_is_leader(a->le));
    assert_int_equal(a->started, 0);
    assert_int_equal(stored(&w->store).transitions, 8);
    assert_string_equal(stored(&w->store).holder, "b");
    /* a keeps trying and sees b: no more writes from a. */
    int writes = w->store.writes;
    run_for(w, 20000, 100);
    assert_false(leader_is_leader(a->le));
    assert_true(leader_is_leader(b->le));
    assert_string_equal(a->last_leader, "b");
    assert_int_equal(stored(&w->store).transitions, 8);
    assert_true(w->store.writes > writes); /* b's renewals */
}

static void test_create_race(void **state)
{
    struct world *w = *state;
    struct cand *a = make(w, 0, "a");
    struct cand *b = make(w, 1, "b");
    leader_poll(a->le);
    leader_poll(b->le);
    deliver_one(&a->io);
    deliver_one(&b->io);
    assert_int_equal(pending_kind(&a->io), R_CREATE);
    assert_int_equal(pending_kind(&b->io), R_CREATE);
    deliver_one(&a->io);
    deliver_one(&b->io); /* AlreadyExists */
    assert_true(leader_is_leader(a->le));
    assert_false(leader_is_leader(b->le));
    assert_int_equal(b->started, 0);
}

static void test_leader_sees_other_holder(void **state)
{
    struct world *w = *state;
    struct cand *a = make(w, 0, "a");
    leader_poll(a->le);
    deliver_all(&a->io);
    assert_true(leader_is_leader(a->le));
    /* Someone overwrote the Lease (say, by hand). */
    store_put(&w->store, "intruder", 15, "2023-11-14T22:13:21.000000Z", 1);
    run_for(w, 2000, 100);
    assert_int_equal(a->stopped, 1);
    assert_int_equal(a->reason, LEADER_STOP_TAKEN);
    assert_non_null(strstr(a->stop_msg, "held by intruder"));
    assert_false(leader_is_leader(a->le));
}

static void on_released(void *data, int err)
{
    struct world *w = data;
    w->release_done++;
    w->release_err = err;
}

static void test_release_and_transitions(void **state)
{
    struct world *w = *state;
    w->jitter = 0.0;
    struct cand *a = make(w, 0, "a");
    leader_poll(a->le);
    deliver_all(&a->io);
    assert_true(leader_is_leader(a->le));
    struct cand *b = make(w, 1, "b");
    run_for(w, 1000, 100);
    assert_false(leader_is_leader(b->le));
    assert_string_equal(b->last_leader, "a");

    /* a shuts down cleanly: stopped (released), then the Lease is written
     * with no holder and a 1 s duration. */
    assert_int_equal(leader_release(a->le, on_released, w), 0);
    assert_int_equal(leader_release(a->le, on_released, w), -EALREADY);
    assert_false(leader_is_leader(a->le));
    assert_int_equal(a->stopped, 1);
    assert_int_equal(a->reason, LEADER_STOP_RELEASED);
    assert_int_equal(pending_kind(&a->io), R_UPDATE);
    assert_int_equal(w->release_done, 0);
    deliver_all(&a->io);
    struct leader_record r = stored(&w->store);
    assert_string_equal(r.holder, "");
    assert_int_equal(r.lease_duration_s, 1);
    assert_int_equal(r.transitions, 0);
    assert_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItem(w->store.lease, "spec"),
                                                 "holderIdentity"));
    assert_int_equal(w->release_done, 1); /* when the write completed */
    assert_int_equal(w->release_err, 0);
    leader_poll(a->le);
    assert_int_equal(w->release_done, 1);

    /* b takes over at its next try (2 s after its last), not after the
     * 15 s expiry. */
    run_for(w, 1200, 100);
    assert_true(leader_is_leader(b->le));
    r = stored(&w->store);
    assert_string_equal(r.holder, "b");
    assert_int_equal(r.transitions, 1);
    assert_int_equal(r.lease_duration_s, 15);

    /* b dies without releasing; c takes over after expiry: 2 transitions. */
    leader_close(b->le, NULL, NULL);
    b->le = NULL;
    struct cand *c = make(w, 2, "c");
    run_for(w, 14000, 100);
    assert_false(leader_is_leader(c->le));
    run_for(w, 3000, 100);
    assert_true(leader_is_leader(c->le));
    assert_int_equal(stored(&w->store).transitions, 2);
    /* a stays stopped. */
    assert_int_equal(a->started, 1);
    assert_int_equal(a->stopped, 1);
}

static void test_release_conflict_rereads(void **state)
{
    struct world *w = *state;
    struct cand *a = make(w, 0, "a");
    leader_poll(a->le);
    deliver_all(&a->io);
    /* A renewal is in flight when the release starts: it is canceled, but
     * say the server had applied it: the resourceVersion moved on. */
    advance(w, 2000);
    leader_poll(a->le);
    deliver_one(&a->io); /* GET */
    assert_int_equal(pending_kind(&a->io), R_UPDATE);
    store_put(&w->store, "a", 15, "2023-11-14T22:13:22.123456Z", 0);
    assert_int_equal(leader_release(a->le, on_released, w), 0);
    assert_int_equal(a->io.canceled, 1);
    assert_int_equal(deliver_one(&a->io), R_UPDATE); /* conflict */
    assert_int_equal(deliver_one(&a->io), R_GET);
    assert_int_equal(deliver_one(&a->io), R_UPDATE);
    leader_poll(a->le);
    assert_int_equal(w->release_done, 1);
    assert_int_equal(w->release_err, 0);
    assert_string_equal(stored(&w->store).holder, "");
}

static void test_release_when_not_leading(void **state)
{
    struct world *w = *state;
    store_put(&w->store, "other", 15, "2023-11-14T22:13:20.000000Z", 0);
    struct cand *b = make(w, 1, "b");
    leader_poll(b->le);
    assert_int_equal(leader_release(b->le, on_released, w), 0);
    assert_int_equal(pending(&b->io), 0);
    assert_int_equal(b->stopped, 0); /* it never led */
    leader_poll(b->le);
    assert_int_equal(w->release_done, 1);
    assert_int_equal(w->release_err, 0);
    assert_string_equal(stored(&w->store).holder, "other");
    /* And it does not try any more. */
    int started = b->io.started;
    run_for(w, 30000, 500);
    assert_int_equal(b->io.started, started);
}

static void test_update_keeps_metadata(void **state)
{
    struct world *w = *state;
    store_put(&w->store, "", 1, "", 0);
    cJSON *meta = cJSON_GetObjectItem(w->store.lease, "metadata");
    cJSON *labels = cJSON_AddObjectToObject(meta, "labels");
    cJSON_AddStringToObject(labels, "team", "vm");
    struct cand *a = make(w, 0, "a");
    leader_poll(a->le);
    deliver_all(&a->io);
    assert_true(leader_is_leader(a->le));
    cJSON *l = cJSON_GetObjectItem(cJSON_GetObjectItem(w->store.lease, "metadata"), "labels");
    assert_string_equal(cJSON_GetObjectItem(l, "team")->valuestring, "vm");
}

static void test_record_json(void **state)
{
    (void)state;
    struct leader_record r, back;
    cJSON *o = NULL;
    memset(&r, 0, sizeof(r));
    snprintf(r.holder, sizeof(r.holder), "host_1234");
    r.lease_duration_s = 15;
    snprintf(r.acquire_time, sizeof(r.acquire_time), "2024-01-02T03:04:05.000006Z");
    snprintf(r.renew_time, sizeof(r.renew_time), "2024-01-02T03:04:07.000006Z");
    r.transitions = 3;
    snprintf(r.resource_version, sizeof(r.resource_version), "42");
    assert_int_equal(leader_record_to_json("ns1", "lock", &r, &o), 0);
    char *s = cJSON_PrintUnformatted(o);
    assert_string_equal(s, "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
                           "\"metadata\":{\"name\":\"lock\",\"namespace\":\"ns1\","
                           "\"resourceVersion\":\"42\"},\"spec\":{\"holderIdentity\":"
                           "\"host_1234\",\"leaseDurationSeconds\":15,\"acquireTime\":"
                           "\"2024-01-02T03:04:05.000006Z\",\"renewTime\":"
                           "\"2024-01-02T03:04:07.000006Z\",\"leaseTransitions\":3}}");
    free(s);
    assert_int_equal(leader_record_from_json(o, &back), 0);
    assert_memory_equal(&r, &back, sizeof(r));
    cJSON_Delete(o);

    /* A Lease with no spec (made by hand) reads as empty. */
    o = cJSON_Parse("{\"kind\":\"Lease\",\"metadata\":{\"name\":\"x\"},\"spec\":{}}");
    assert_int_equal(leader_record_from_json(o, &back), 0);
    assert_string_equal(back.holder, "");
    assert_int_equal(back.lease_duration_s, 0);
    cJSON_Delete(o);
    o = cJSON_Parse("{\"spec\":{\"holderIdentity\":null,\"leaseDurationSeconds\":null}}");
    assert_int_equal(leader_record_from_json(o, &back), 0);
    cJSON_Delete(o);

    static const char *bad[] = {
        "[]",
        "{\"kind\":\"ConfigMap\"}",
        "{\"spec\":{\"holderIdentity\":5}}",
        "{\"spec\":{\"leaseDurationSeconds\":\"15\"}}",
        "{\"spec\":{\"leaseDurationSeconds\":1.5}}",
        "{\"spec\":{\"leaseTransitions\":1e12}}",
        "{\"spec\":[]}",
        "{\"metadata\":{\"resourceVersion\":7}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        o = cJSON_Parse(bad[i]);
        assert_non_null(o);
        assert_int_equal(leader_record_from_json(o, &back), VMG_EPARSE);
        cJSON_Delete(o);
    }
    /* An identity above its bound. */
    char big[600];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "spec"), "holderIdentity", big);
    assert_int_equal(leader_record_from_json(o, &back), VMG_EPARSE);
    cJSON_Delete(o);
}

static void test_microtime(void **state)
{
    (void)state;
    char buf[LEADER_MICROTIME_LEN + 1];
    assert_int_equal(leader_microtime(0, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "1970-01-01T00:00:00.000000Z");
    assert_int_equal(leader_microtime(1700000000LL * 1000000 + 5, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2023-11-14T22:13:20.000005Z");
    assert_int_equal(strlen(buf), LEADER_MICROTIME_LEN);
    assert_int_equal(leader_microtime(-1, buf, sizeof(buf)), -EINVAL);
    assert_int_equal(leader_microtime(0, buf, LEADER_MICROTIME_LEN), -EINVAL);
}

static void test_identity(void **state)
{
    (void)state;
    char a[LEADER_MAX_IDENTITY + 1], b[LEADER_MAX_IDENTITY + 1], host[256];
    assert_int_equal(leader_make_identity(a, sizeof(a)), 0);
    assert_int_equal(leader_make_identity(b, sizeof(b)), 0);
    assert_string_not_equal(a, b);
    assert_int_equal(gethostname(host, sizeof(host)), 0);
    size_t hl = strlen(host);
    assert_memory_equal(a, host, hl);
    assert_int_equal(a[hl], '_');
    assert_int_equal(strlen(a + hl + 1), 36);
    assert_int_equal(a[hl + 1 + 14], '4'); /* UUID version 4 */
    assert_int_equal(leader_make_identity(a, 10), -EINVAL);
    /* Cut to fit a small buffer. */
    char small[64];
    assert_int_equal(leader_make_identity(small, sizeof(small)), 0);
    assert_true(strlen(small) <= 63);
}

static const char *fake_env(void *data, const char *name)
{
    const char **kv = data;
    for (; kv[0]; kv += 2)
        if (strcmp(kv[0], name) == 0)
            return kv[1];
    return NULL;
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_namespace(void **state)
{
    (void)state;
    char err[256], dir[] = "/tmp/test_leader.XXXXXX", path[PATH_MAX];
    const char *ns = NULL;
    kcfg *c = NULL;

    assert_int_equal(leader_namespace("ops", NULL, &ns, err, sizeof(err)), 0);
    assert_string_equal(ns, "ops");
    ns = NULL;
    assert_int_equal(leader_namespace(NULL, NULL, &ns, err, sizeof(err)), VMG_ECONFIG);
    assert_null(ns);
    assert_non_null(strstr(err, "--leader-election-namespace"));

    assert_non_null(mkdtemp(dir));
    /* Out of a cluster, the kubeconfig's namespace is not used. */
    write_file(dir, "config",
               "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
               "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
               "users: [{name: u, user: {token: abcdefgh}}]\n"
               "contexts: [{name: x, context: {cluster: c, user: u, namespace: dev}}]\n");
    snprintf(path, sizeof(path), "%s/config", dir);
    const char *env_none[] = {NULL};
    struct kcfg_opts ko = {.kubeconfig = path, .getenv = fake_env, .env_data = env_none};
    assert_int_equal(kcfg_load(&ko, &c, err, sizeof(err)), 0);
    assert_int_equal(leader_namespace("", c, &ns, err, sizeof(err)), VMG_ECONFIG);
    assert_non_null(strstr(err, "pass --leader-election-namespace"));
    kcfg_free(c);

    /* In a cluster, the service account's namespace. */
    char *pem = unit_fixture("kubeconfig", "ca.crt", NULL);
    write_file(dir, "ca.crt", pem);
    free(pem);
    write_file(dir, "token", "sa-token\n");
    write_file(dir, "namespace", "operators\n");
    const char *env_in[] = {"KUBERNETES_SERVICE_HOST", "10.0.0.1", "KUBERNETES_SERVICE_PORT", "443",
                            NULL};
    struct kcfg_opts ki = {.getenv = fake_env, .env_data = env_in, .incluster_dir = dir};
    assert_int_equal(kcfg_load(&ki, &c, err, sizeof(err)), 0);
    assert_int_equal(leader_namespace(NULL, c, &ns, err, sizeof(err)), 0);
    assert_string_equal(ns, "operators");
    assert_int_equal(leader_namespace("flagged", c, &ns, err, sizeof(err)), 0);
    assert_string_equal(ns, "flagged");
    kcfg_free(c);

    static const char *files[] = {"config", "ca.crt", "token", "namespace"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timing_validation),
        cmocka_unit_test_setup_teardown(test_new_validates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acquire_when_absent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_held_not_expired_then_expired, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deleted_while_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_kept_with_another_holder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expiry_counts_from_last_change, setup, teardown),
        cmocka_unit_test_setup_teardown(test_candidate_wakes_at_expiry_and_jitters, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_renew_deadline_loss, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline_counts_from_sending, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hung_request_loses_at_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conflicting_update_loses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_race, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leader_sees_other_holder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_release_and_transitions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_release_conflict_rereads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_release_when_not_leading, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_keeps_metadata, setup, teardown),
        cmocka_unit_test(test_record_json),
        cmocka_unit_test(test_microtime),
        cmocka_unit_test(test_identity),
        cmocka_unit_test(test_namespace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
