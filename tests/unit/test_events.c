/* test_events.c: the Event recorder on a fake clock, with a fake API whose
 * requests complete when a test says so: aggregation (key, count, patch
 * body, window, LRU), rate limiting, messages, retries and drops. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "controller/vmgroup.h"
#include "kube/events.h"
#include "lib/err.h"
#include "lib/log.h"

enum { R_CREATE = 1, R_PATCH };

#define MAX_REQS 8
struct req {
    bool live;
    int kind;
    char ns[300], name[300];
    cJSON *body;
    events_io_done done;
    void *data;
};

struct t {
    uv_loop_t loop;
    uint64_t now;
    int64_t wall;
    struct req reqs[MAX_REQS];
    struct req *last;
    int sent;
    int drops[4];
    char drop_reason[200];
    events *ev;
    int flushed;
    char logpath[64];
    int logfd;
};

static struct req *add_req(struct t *t, int kind, const char *ns, const char *name,
                           const cJSON *body, events_io_done done, void *data, void **ret)
{
    struct req *r = NULL;
    for (size_t i = 0; i < MAX_REQS && !r; i++)
        if (!t->reqs[i].live)
            r = &t->reqs[i];
    assert_non_null(r);
    memset(r, 0, sizeof(*r));
    r->live = true;
    r->kind = kind;
    snprintf(r->ns, sizeof(r->ns), "%s", ns);
    snprintf(r->name, sizeof(r->name), "%s", name ? name : "");
    r->body = cJSON_Duplicate(body, 1);
    r->done = done;
    r->data = data;
    *ret = r;
    t->last = r;
    t->sent++;
    return r;
}

static int f_create(void *ctx, const char *ns, const cJSON *event, uint64_t timeout_ms,
                    events_io_done done, void *data, void **ret_req)
{
    assert_int_equal(timeout_ms, EVENTS_DEFAULT_TIMEOUT_MS);
    add_req(ctx, R_CREATE, ns, NULL, event, done, data, ret_req);
    return 0;
}

static int f_patch(void *ctx, const char *ns, const char *name, const cJSON *patch,
                   uint64_t timeout_ms, events_io_done done, void *data, void **ret_req)
{
    add_req(ctx, R_PATCH, ns, name, patch, done, data, ret_req);
    return 0;
}

static void f_cancel(void *ctx, void *req)
{
    struct req *r = req;
    assert_true(r->live);
    r->live = false;
    cJSON_Delete(r->body);
    r->body = NULL;
    r->done(r->data, VMG_ECANCELED, 0, "canceled");
}

static const struct events_io fake_io = {f_create, f_patch, f_cancel};

/* The one request in flight (the recorder sends one at a time). */
static struct req *inflight(struct t *t)
{
    struct req *found = NULL;
    for (size_t i = 0; i < MAX_REQS; i++) {
        if (t->reqs[i].live) {
            assert_null(found);
            found = &t->reqs[i];
        }
    }
    return found;
}

/* Completes the request in flight with err. */
static void complete(struct t *t, int err, unsigned retry_after_s)
{
    struct req *r = inflight(t);
    assert_non_null(r);
    r->live = false;
    cJSON_Delete(r->body);
    r->body = NULL;
    r->done(r->data, err, retry_after_s, err ? "fake error" : NULL);
}

static uint64_t t_now(void *data)
{
    return ((struct t *)data)->now;
}

static int64_t t_wall(void *data)
{
    return ((struct t *)data)->wall;
}

static void on_drop(void *data, enum events_drop why, const struct events_object *obj,
                    const char *reason)
{
    struct t *t = data;
    assert_true(why >= 1 && why <= 3);
    t->drops[why]++;
    snprintf(t->drop_reason, sizeof(t->drop_reason), "%s/%s %s", obj->ns, obj->name, reason);
}

static void opts(struct t *t, struct events_options *o)
{
    memset(o, 0, sizeof(*o));
    o->instance = "pod-1";
    o->now_ms = t_now;
    o->wall_us = t_wall;
    o->clock_data = t;
    o->io = &fake_io;
    o->io_ctx = t;
    o->on_drop = on_drop;
    o->drop_data = t;
}

static int setup_with(void **state, void (*tweak)(struct events_options *))
{
    struct t *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    assert_int_equal(uv_loop_init(&t->loop), 0);
    t->now = 5000;
    t->wall = 1700000000LL * 1000000; /* 2023-11-14T22:13:20Z */
    struct events_options o;
    opts(t, &o);
    if (tweak)
        tweak(&o);
    assert_int_equal(events_new(&t->loop, &o, &t->ev), 0);
    snprintf(t->logpath, sizeof(t->logpath), "/tmp/test_events.log.XXXXXX");
    t->logfd = mkstemp(t->logpath);
    assert_true(t->logfd >= 0);
    vmg_log_setup(0, t->logfd);
    *state = t;
    return 0;
}

static int setup(void **state)
{
    return setup_with(state, NULL);
}

static void small_cache(struct events_options *o)
{
    o->cache_size = 2;
}

static int setup_small_cache(void **state)
{
    return setup_with(state, small_cache);
}

static void small_queue(struct events_options *o)
{
    o->max_pending = 2;
}

static int setup_small_queue(void **state)
{
    return setup_with(state, small_queue);
}

static int teardown(void **state)
{
    struct t *t = *state;
    events_close(t->ev, NULL, NULL);
    for (size_t i = 0; i < MAX_REQS; i++)
        assert_false(t->reqs[i].live);
    assert_int_equal(uv_run(&t->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&t->loop), 0);
    vmg_log_setup(0, -1);
    vmg_log_clear_secrets();
    close(t->logfd);
    unlink(t->logpath);
    free(t);
    return 0;
}

static const struct events_object web = {
    .api_version = "vm.codeconnect.vmworld.com/v1alpha1",
    .kind = "VmGroup",
    .ns = "team-a",
    .name = "web",
    .uid = "0b7c7e4c-0000-4000-8000-000000000001",
    .resource_version = "42",
};

static const char *str(const cJSON *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", path);
    const cJSON *cur = o;
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save))
        cur = cJSON_GetObjectItemCaseSensitive(cur, k);
    assert_true(cJSON_IsString(cur));
    return cur->valuestring;
}

static int num(const cJSON *o, const char *key)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(n));
    return (int)n->valuedouble;
}

static void record_ok(struct t *t, const struct events_object *obj, enum events_type type,
                      const char *reason, const char *msg)
{
    assert_int_equal(events_record(t->ev, obj, type, reason, msg), 0);
}

static void test_event_body(void **state)
{
    struct t *t = *state;
    record_ok(t, &web, EVENTS_WARNING, "CloneFailed", "clone of web-0 failed: no space");
    assert_null(inflight(t)); /* nothing is sent from inside events_record */
    events_poll(t->ev);
    struct req *r = inflight(t);
    assert_non_null(r);
    assert_int_equal(r->kind, R_CREATE);
    assert_string_equal(r->ns, "team-a");
    const cJSON *b = r->body;
    assert_string_equal(str(b, "apiVersion"), "v1");
    assert_string_equal(str(b, "kind"), "Event");
    assert_string_equal(str(b, "metadata.namespace"), "team-a");
    /* "<name>.<hex of the wall clock in ns>" */
    assert_string_equal(str(b, "metadata.name"), "web.17979cfe362a0000");
    assert_string_equal(str(b, "involvedObject.apiVersion"), "vm.codeconnect.vmworld.com/v1alpha1");
    assert_string_equal(str(b, "involvedObject.kind"), "VmGroup");
    assert_string_equal(str(b, "involvedObject.namespace"), "team-a");
    assert_string_equal(str(b, "involvedObject.name"), "web");
    assert_string_equal(str(b, "involvedObject.uid"), web.uid);
    assert_string_equal(str(b, "involvedObject.resourceVersion"), "42");
    assert_string_equal(str(b, "type"), "Warning");
    assert_string_equal(str(b, "reason"), "CloneFailed");
    assert_string_equal(str(b, "message"), "clone of web-0 failed: no space");
    assert_string_equal(str(b, "source.component"), "vmgroup-operator");
    assert_string_equal(str(b, "reportingComponent"), "vmgroup-operator");
    assert_string_equal(str(b, "reportingInstance"), "pod-1");
    assert_string_equal(str(b, "firstTimestamp"), "2023-11-14T22:13:20Z");
    assert_string_equal(str(b, "lastTimestamp"), "2023-11-14T22:13:20Z");
    assert_int_equal(num(b, "count"), 1);
    complete(t, 0, 0);
    struct events_stats st;
    events_get_stats(t->ev, &st);
    assert_int_equal(st.created, 1);
    assert_int_equal(st.recorded, 1);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.cached, 1);

    /* Names are unique even within one microsecond; Normal is written. */
    struct events_object other = web;
    other.name = "db";
    other.uid = NULL;
    other.resource_version = "";
    record_ok(t, &other, EVENTS_NORMAL, "Created", "x");
    events_poll(t->ev);
    b = inflight(t)->body;
    assert_string_equal(str(b, "metadata.name"), "db.17979cfe362a0001");
    assert_string_equal(str(b, "type"), "Normal");
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(b, "involvedObject"), "uid"));
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(b, "involvedObject"), "resourceVersion"));
    complete(t, 0, 0);
}

static void test_same_event_is_patched(void **state)
{
    struct t *t = *state;
    record_ok(t, &web, EVENTS_NORMAL, "Scaled", "scaled to 3");
    events_poll(t->ev);
    char name[300];
    snprintf(name, sizeof(name), "%s", str(inflight(t)->body, "metadata.name"));
    complete(t, 0, 0);

    t->now += 60000;
    t->wall += 60000000;
    record_ok(t, &web, EVENTS_NORMAL, "Scaled", "scaled to 3");
    events_poll(t->ev);
    struct req *r = inflight(t);
    assert_int_equal(r->kind, R_PATCH);
    assert_string_equal(r->ns, "team-a");
    assert_string_equal(r->name, name);
    char *p = cJSON_PrintUnformatted(r->body);
    assert_string_equal(p, "{\"count\":2,\"lastTimestamp\":\"2023-11-14T22:14:20Z\"}");
    free(p);
    complete(t, 0, 0);

    /* Three more: each a patch with the next count. */
    for (int i = 3; i <= 5; i++) {
        t->now += 1000;
        record_ok(t, &web, EVENTS_NORMAL, "Scaled", "scaled to 3");
        events_poll(t->ev);
        r = inflight(t);
        assert_int_equal(r->kind, R_PATCH);
        assert_string_equal(r->name, name);
        assert_int_equal(num(r->body, "count"), i);
        complete(t, 0, 0);
    }
    struct events_stats st;
    events_get_stats(t->ev, &st);
    assert_int_equal(st.created, 1);
    assert_int_equal(st.patched, 4);
    assert_int_equal(st.recorded, 5);
    assert_int_equal(st.aggregated, 4);
    assert_int_equal(t->sent, 5);
}

static void test_burst_of_same_event_costs_one_write(void **state)
{
    struct t *t = *state;
    for (int i = 0; i < 5; i++)
        record_ok(t, &web, EVENTS_NORMAL, "Scaled", "scaled to 3");
    events_poll(t->ev);
    struct req *r = inflight(t);
    assert_int_equal(r->kind, R_CREATE);
    assert_int_equal(num(r->body, "count"), 5);
    /* Repeats while the create is in flight wait in one patch. */
    t->wall += 3000000;
    for (int i = 0; i < 3; i++)
        record_ok(t, &web, EVENTS_NORMAL, "Scaled", "scaled to 3");
    complete(t, 0, 0);
    events_poll(t->ev);
    r = inflight(t);
    assert_int_equal(r->kind, R_PATCH);
    assert_int_equal(num(r->body, "count"), 8);
    assert_string_equal(str(r->body, "lastTimestamp"), "2023-11-14T22:13:23Z");
    complete(t, 0, 0);
    events_poll(t->ev);
    assert_null(inflight(t));
    assert_int_equal(t->sent, 2);
}

static void test_aggregation_key(void **state)
{
    struct t *t = *state;
    struct events_object other_uid = web, other_name = web, other_ns = web;
    other_uid.uid = "another-uid"; /* a new object of the same name */
    other_name.name = "web2";
    other_ns.ns = "team-b";
    struct events_object other_rv = web;
    other_rv.resource_version = "43"; /* not part of the key */

    record_ok(t, &web, EVENTS_NORMAL, "Scaled", "m");
    record_ok(t, &web, EVENTS_NORMAL, "Scaled", "m2");      /* message */
    record_ok(t, &web, EVENTS_NORMAL, "Resized", "m");      /* reason */
    record_ok(t, &web, EVENTS_WARNING, "Scaled", "m");      /* type */
    record_ok(t, &other_uid, EVENTS_NORMAL, "Scaled", "m"); /* uid */
    record_ok(t, &other_name, EVENTS_NORMAL, "Scaled", "m");
    record_ok(t, &other_ns, EVENTS_NORMAL, "Scaled", "m");
    record_ok(t, &other_rv, EVENTS_NORMAL, "Scaled", "m"); /* same as the first */
    char names[7][300];
    for (int i = 0; i < 7; i++) {
        events_poll(t->ev);
        struct req *r = inflight(t);
        assert_int_equal(r->kind, R_CREATE);
        snprintf(names[i], sizeof(names[i]), "%s", str(r->body, "metadata.name"));
        assert_int_equal(num(r->body, "count"), i == 0 ? 2 : 1);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(names[i], names[j]);
        complete(t, 0, 0);
    }
    events_poll(t->ev);
    assert_null(inflight(t));
    struct events_stats st;
    events_get_stats(t->ev, &st);
    assert_int_equal(st.cached, 7);
    assert_int_equal(st.aggregated, 1);
}

static void test_window_and_lru(void **state)
{
    struct t *t = *state;
    record_ok(t, &web, EVENTS_NORMAL, "Scaled", "a");
    events_poll(t->ev);
    char first[300];
    snprintf(first, sizeof(first), "%s", str(inflight(t)->body, "metadata.name"));
    complete(t, 0, 0);
    /* Within 10 minutes of the last occurrence: a patch... */
    t->now += 10 * 60 * 1000;
    t->wall += 1000;
    record_ok(t, &web, EVENTS_NORMAL, "Scaled", "a");
    events_poll(t->ev);
    assert_int_equal(inflight(t)->kind, R_PATCH);
    complete(t, 0, 0);
    /* ...after that, a new Event. */
    t->now += 10 * 60 * 1000 + 1;
    t->wall += 1000;
    record_ok(t, &web, EVENTS_NORMAL, "Scaled", "a");
    events_poll(t->ev);
    struct req *r = inflight(t);
    assert_int_equal(r->kind, R_CREATE);
    assert_int_equal(num(r->body, "count"), 1);
    assert_string_not_equal(str(r->body, "metadata.name"), first);
    complete(t, 0, 0);
}

static void test_lru_evicts_least_recent(void **state)
{
    struct t *t = *state; /* cache of 2 */
    record_ok(t, &web, EVENTS_NORMAL, "A", "x");
    record_ok(t, &web, EVENTS_NORMAL, "B", "x");
    record_ok(t, &web, EVENTS_NORMAL, "A", "x"); /* A is now the most recent */
    record_ok(t, &web, EVENTS_NORMAL, "C", "x"); /* evicts B */
    struct events_stats st;
    events_get_stats(t->ev, &st);
    assert_int_equal(st.cached, 2);
    for (int i = 0; i < 3; i++) {
        events_poll(t->ev);
        assert_int_equal(inflight(t)->kind, R_CREATE);
        complete(t, 0, 0);
    }
    record_ok(t, &web, EVENTS_NORMAL, "A", "x"); /* still cached: patch */
    events_poll(t->ev);
    assert_int_equal(inflight(t)->kind, R_PATCH);
    assert_int_equal(num(inflight(t)->body, "count"), 3);
    complete(t, 0, 0);
    record_ok(t, &web, EVENTS_NORMAL, "B", "x"); /* evicted: new Event */
    events_poll(t->ev);
    assert_int_equal(inflight(t)->kind, R_CREATE);
    complete(t, 0, 0);
}

static void test_eviction_of_an_entry_with_a_queued_write(void **state)
{
    struct t *t = *state; /* cache of 2 */
    record_ok(t, &web, EVENTS_NORMAL, "A", "x");
    record_ok(t, &web, EVENTS_NORMAL, "B", "x");
    record_ok(t, &web, EVENTS_NORMAL, "C", "x"); /* evicts A, whose create is queued */
    record_ok(t, &web, EVENTS_NORMAL, "A", "x"); /* a new A */
    int creates = 0;
    for (int i = 0; i < 4; i++) {
        events_poll(t->ev);
        creates += inflight(t)->kind == R_CREATE;
        complete(t, 0, 0);
    }
    assert_int_equal(creates, 4);
}

/* A deleted object's entries leave both caches on events_forget (another
 * object's stay); a write already queued is still sent. */
static void test_forget(void **state)
{
    struct t *t = *state;
    struct events_object db = web, other_ns = web;
    struct events_stats st;
    db.name = "db";
    db.uid = "0b7c7e4c-0000-4000-8000-000000000002";
    other_ns.ns = "team-b";

    record_ok(t, &web, EVENTS_NORMAL, "Created", "created web-0");
    record_ok(t, &web, EVENTS_WARNING, "CloneFailed", "no space");
    record_ok(t, &db, EVENTS_NORMAL, "Created", "created db-0");
    record_ok(t, &other_ns, EVENTS_NORMAL, "Created", "created web-0");
    events_get_stats(t->ev, &st);
    assert_int_equal(st.cached, 4);
    assert_int_equal(st.buckets, 4);

    assert_int_equal(events_forget(t->ev, "team-a", "web"), 4);
    events_get_stats(t->ev, &st);
    assert_int_equal(st.cached, 2);
    assert_int_equal(st.buckets, 2);
    assert_int_equal(st.pending, 4);
    assert_int_equal(events_forget(t->ev, "team-a", "web"), 0);
    assert_int_equal(events_forget(t->ev, "team-a", "db"), 2);
    assert_int_equal(events_forget(t->ev, "team-b", "web"), 2);
    events_get_stats(t->ev, &st);
    assert_int_equal(st.cached, 0);
    assert_int_equal(st.buckets, 0);
    for (int i = 0; i < 4; i++) {
        events_poll(t->ev);
        assert_int_equal(inflight(t)->kind, R_CREATE);
        complete(t, 0, 0);
    }
    /* Forgotten: the same event again is a new Event, with a full bucket. */
    record_ok(t, &web, EVENTS_NORMAL, "Created", "created web-0");
    events_poll(t->ev);
    assert_int_equal(inflight(t)->kind, R_CREATE);
    complete(t, 0, 0);
    assert_int_equal(events_forget(NULL, "team-a", "web"), 0);
}

/* Entries that no longer change anything go by themselves: aggregation
 * entries past their window, buckets idle until full again. */
static void test_expiry(void **state)
{
    struct t *t = *state;
    struct events_object db = web;
    struct events_stats st;
    db.name = "db";

    record_ok(t, &web, EVENTS_NORMAL, "Created", "x");
    events_poll(t->ev);
    complete(t, 0, 0);
    /* Past the window: the aggregation entry goes, the bucket stays. */
    t->now += EVENTS_DEFAULT_WINDOW_MS + 1;
    record_ok(t, &db, EVENTS_NORMAL, "Created", "x");
    events_poll(t->ev);
    complete(t, 0, 0);
    events_get_stats(t->ev, &st);
    assert_int_equal(st.cached, 1);
    assert_int_equal(st.buckets, 2);
    /* Idle for burst * refill: web's bucket is full again and goes. */
    t->now += (uint64_t)EVENTS_DEFAULT_BURST * EVENTS_DEFAULT_REFILL_MS - EVENTS_DEFAULT_WINDOW_MS;
    record_ok(t, &db, EVENTS_NORMAL, "Created", "x");
    events_poll(t->ev);
    complete(t, 0, 0);
    events_get_stats(t->ev, &st);
    assert_int_equal(st.cached, 1);
    assert_int_equal(st.buckets, 1);
}

static void test_rate_limit(void **state)
{
    struct t *t = *state;
    int ok = 0, limited = 0;
    for (int i = 0; i < 30; i++) {
        int r = events_record(t->ev, &web, EVENTS_NORMAL, "Scaled", "same");
        if (r == 0)
            ok++;
        else if (r == VMG_ETHROTTLED)
            limited++;
    }
    assert_int_equal(ok, 25);
    assert_int_equal(limited, 5);
    assert_int_equal(t->drops[EVENTS_DROP_RATE_LIMITED], 5);
    assert_string_equal(t->drop_reason, "team-a/web Scaled");
    events_poll(t->ev);
    assert_int_equal(num(inflight(t)->body, "count"), 25);
    complete(t, 0, 0);

    /* The same reason stays held, with any message ... */
    assert_int_equal(events_record(t->ev, &web, EVENTS_NORMAL, "Scaled", "other"), VMG_ETHROTTLED);
    /* ... but another reason, or a Warning, has a bucket of its own: a burst
     * of one kind never silences another. */
    record_ok(t, &web, EVENTS_NORMAL, "Reconfigured", "m");
    events_poll(t->ev);
    complete(t, 0, 0);
    record_ok(t, &web, EVENTS_WARNING, "FolderKept", "m");
    events_poll(t->ev);
    complete(t, 0, 0);
    /* Another object has its own. */
    struct events_object db = web;
    db.name = "db";
    db.uid = "db-uid";
    record_ok(t, &db, EVENTS_NORMAL, "Scaled", "same");

    /* One token comes back every 5 minutes. */
    t->now += 5 * 60 * 1000 - 1;
    assert_int_equal(events_record(t->ev, &web, EVENTS_NORMAL, "Scaled", "same"), VMG_ETHROTTLED);
    t->now += 1;
    record_ok(t, &web, EVENTS_NORMAL, "Scaled", "same");
    assert_int_equal(events_record(t->ev, &web, EVENTS_NORMAL, "Scaled", "same"), VMG_ETHROTTLED);
    /* A long quiet time refills to the burst, not beyond. */
    t->now += 24ull * 3600 * 1000;
    ok = 0;
    for (int i = 0; i < 40; i++)
        ok += events_record(t->ev, &web, EVENTS_NORMAL, "Later", "m") == 0;
    assert_int_equal(ok, 25);
    struct events_stats st;
    events_get_stats(t->ev, &st);
    assert_int_equal(st.rate_limited, 5 + 1 + 1 + 1 + 15);
    assert_int_equal(t->drops[EVENTS_DROP_RATE_LIMITED], (int)st.rate_limited);
    while (inflight(t) || (events_poll(t->ev), inflight(t)))
        complete(t, 0, 0);
}

static void test_message_redaction_and_bounds(void **state)
{
    struct t *t = *state;
    char out[EVENTS_MAX_MESSAGE + 1];

    assert_int_equal(vmg_log_add_secret("hunter2-secret"), 0);
    assert_int_equal(events_message(out, "login as bob with hunter2-secret failed"),
                     strlen("login as bob with [REDACTED] failed"));
    assert_string_equal(out, "login as bob with [REDACTED] failed");
    assert_int_equal(events_message(out, NULL), 0);
    assert_string_equal(out, "");

    /* Long: cut to the bound, "..." at the end. */
    static char big[5001];
    memset(big, 'x', 5000);
    big[5000] = '\0';
    assert_int_equal(events_message(out, big), EVENTS_MAX_MESSAGE);
    assert_int_equal(strlen(out), EVENTS_MAX_MESSAGE);
    assert_string_equal(out + EVENTS_MAX_MESSAGE - 3, "...");
    assert_int_equal(out[EVENTS_MAX_MESSAGE - 4], 'x');
    /* Exactly the bound: kept whole. */
    big[EVENTS_MAX_MESSAGE] = '\0';
    assert_int_equal(events_message(out, big), EVENTS_MAX_MESSAGE);
    assert_int_equal(out[EVENTS_MAX_MESSAGE - 1], 'x');
    /* A secret far in a long message is redacted before the cut, and one
     * that straddles the cut does not leak a prefix. */
    memset(big, 'y', 5000);
    memcpy(big + 1015, "hunter2-secret", 14);
    events_message(out, big);
    assert_null(strstr(out, "hunt"));
    assert_non_null(strstr(out, "[REDAC..."));

    /* UTF-8: never cut inside a character; invalid bytes become '?'. */
    memset(big, 'z', 5000);
    for (int i = 1010; i < 1030; i += 2)
        memcpy(big + i, "\xc3\xa9", 2); /* é */
    events_message(out, big);
    assert_int_equal(strlen(out), EVENTS_MAX_MESSAGE - 1); /* 1020 + "..." */
    assert_string_equal(out + strlen(out) - 5, "\xc3\xa9...");
    assert_int_equal(events_message(out, "a\xff"
                                         "b\xc3(c\xed\xa0\x80"),
                     9);
    assert_string_equal(out, "a?b?(c???");

    /* Recorded messages go through the same. */
    record_ok(t, &web, EVENTS_WARNING, "LoginFailed", "password hunter2-secret refused");
    events_poll(t->ev);
    assert_string_equal(str(inflight(t)->body, "message"), "password [REDACTED] refused");
    complete(t, 0, 0);
    char fmtbuf[8];
    snprintf(fmtbuf, sizeof(fmtbuf), "%d", 7);
    assert_int_equal(
        events_recordf(t->ev, &web, EVENTS_NORMAL, "Scaled", "scaled to %s of %d", fmtbuf, 9), 0);
    events_poll(t->ev);
    assert_string_equal(str(inflight(t)->body, "message"), "scaled to 7 of 9");
    complete(t, 0, 0);
}

static void test_bad_arguments(void **state)
{
    struct t *t = *state;
    struct events_object o = web;
    assert_int_equal(events_record(t->ev, &web, EVENTS_NORMAL, "not camel", "m"), -EINVAL);
    assert_int_equal(events_record(t->ev, &web, EVENTS_NORMAL, "", "m"), -EINVAL);
    assert_int_equal(events_record(t->ev, &web, EVENTS_NORMAL, NULL, "m"), -EINVAL);
    assert_int_equal(events_record(t->ev, &web, EVENTS_NORMAL, "9Lives", "m"), -EINVAL);
    assert_int_equal(events_record(t->ev, &web, (enum events_type)7, "Scaled", "m"), -EINVAL);
    o.name = "";
    assert_int_equal(events_record(t->ev, &o, EVENTS_NORMAL, "Scaled", "m"), -EINVAL);
    o = web;
    o.kind = NULL;
    assert_int_equal(events_record(t->ev, &o, EVENTS_NORMAL, "Scaled", "m"), -EINVAL);
    char longname[400];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    o = web;
    o.name = longname;
    assert_int_equal(events_record(t->ev, &o, EVENTS_NORMAL, "Scaled", "m"), VMG_ETOOBIG);
    struct events_stats st;
    events_get_stats(t->ev, &st);
    assert_int_equal(st.recorded, 0);
    assert_int_equal(st.pending, 0);

    /* A long object name is cut so that the Event's name stays a valid
     * length. */
    longname[250] = '\0';
    o.name = longname;
    record_ok(t, &o, EVENTS_NORMAL, "Scaled", "m");
    events_poll(t->ev);
    assert_true(strlen(str(inflight(t)->body, "metadata.name")) <= EVENTS_MAX_NAME);
    complete(t, 0, 0);
}

static void test_retries_then_drop(void **state)
{
    struct t *t = *state;
    record_ok(t, &web, EVENTS_NORMAL, "Scaled", "m");
    events_poll(t->ev);
    int sent = t->sent;
    /* 429 with Retry-After: 2 s. */
    complete(t, VMG_ETHROTTLED, 2);
    t->now += 1999;
    events_poll(t->ev);
    assert_int_equal(t->sent, sent);
    t->now += 1;
    events_poll(t->ev);
    assert_int_equal(t->sent, sent + 1);
    /* A 5xx: backoff of 2 s (1 s doubled for the second retry). */
    complete(t, VMG_EHTTP, 0);
    t->now += 1999;
    events_poll(t->ev);
    assert_int_equal(t->sent, sent + 1);
    t->now += 1;
    events_poll(t->ev);
    assert_int_equal(t->sent, sent + 2);
    /* The third failure is the last: dropped, counted, logged once. */
    complete(t, VMG_ETRANSPORT, 0);
    events_poll(t->ev);
    assert_null(inflight(t));
    assert_int_equal(t->drops[EVENTS_DROP_FAILED], 1);
    struct events_stats st;
    events_get_stats(t->ev, &st);
    assert_int_equal(st.retries, 2);
    assert_int_equal(st.failed, 1);
    assert_int_equal(st.pending, 0);
    t->now += 60000;
    events_poll(t->ev);
    assert_null(inflight(t));

    char log[4096];
    ssize_t n = pread(t->logfd, log, sizeof(log) - 1, 0);
    assert_true(n > 0);
    log[n] = '\0';
    assert_non_null(strstr(log, "\"msg\":\"event dropped\""));
    assert_non_null(strstr(log, "\"namespace\":\"team-a\""));
    assert_non_null(strstr(log, "\"reason\":\"Scaled\""));
    assert_null(strstr(strstr(log, "event dropped") + 1, "event dropped"));

    /* Not retried: forbidden, invalid. */
    record_ok(t, &web, EVENTS_NORMAL, "Other", "m");
    events_poll(t->ev);
    complete(t, VMG_EFORBIDDEN, 0);
    events_poll(t->ev);
    assert_null(inflight(t));
    assert_int_equal(t->drops[EVENTS_DROP_FAILED], 2);
}

static void test_patch_of_a_deleted_event_creates_it(void **state)
{
    struct t *t = *state;
    record_ok(t, &web, EVENTS_NORMAL, "Scaled", "m");
    events_poll(t->ev);
    char name[300];
    snprintf(name, sizeof(name), "%s", str(inflight(t)->body, "metadata.name"));
    complete(t, 0, 0);
    record_ok(t, &web, EVENTS_NORMAL, "Scaled", "m");
    record_ok(t, &web, EVENTS_NORMAL, "Scaled", "m");
    events_poll(t->ev);
    assert_int_equal(inflight(t)->kind, R_PATCH);
    complete(t, VMG_ENOTFOUND, 0); /* the Event's TTL passed */
    events_poll(t->ev);
    struct req *r = inflight(t);
    assert_int_equal(r->kind, R_CREATE);
    assert_string_equal(str(r->body, "metadata.name"), name);
    assert_int_equal(num(r->body, "count"), 3);
    assert_string_equal(str(r->body, "reason"), "Scaled");
    /* The switch does not use up a try: the create still gets three. */
    complete(t, VMG_EHTTP, 0);
    t->now += 1000;
    events_poll(t->ev);
    complete(t, VMG_EHTTP, 0);
    t->now += 2000;
    events_poll(t->ev);
    assert_int_equal(inflight(t)->kind, R_CREATE);
    complete(t, 0, 0);

    /* A create that finds its Event (an earlier try landed) patches it. */
    record_ok(t, &web, EVENTS_NORMAL, "Other", "m");
    events_poll(t->ev);
    complete(t, VMG_ECONFLICT, 0);
    events_poll(t->ev);
    assert_int_equal(inflight(t)->kind, R_PATCH);
    complete(t, 0, 0);
    struct events_stats st;
    events_get_stats(t->ev, &st);
    assert_int_equal(st.created, 2);
    assert_int_equal(st.patched, 1);
    assert_int_equal(st.failed, 0);
}

static void test_queue_bound(void **state)
{
    struct t *t = *state; /* max_pending 2 */
    record_ok(t, &web, EVENTS_NORMAL, "A", "x");
    record_ok(t, &web, EVENTS_NORMAL, "B", "x");
    assert_int_equal(events_record(t->ev, &web, EVENTS_NORMAL, "C", "x"), -ENOSPC);
    assert_int_equal(t->drops[EVENTS_DROP_QUEUE_FULL], 1);
    /* A repeat of a queued event is absorbed, so it is not refused. */
    record_ok(t, &web, EVENTS_NORMAL, "A", "x");
    struct events_stats st;
    events_get_stats(t->ev, &st);
    assert_int_equal(st.queue_full, 1);
    assert_int_equal(st.pending, 2);
}

static void flushed(void *data)
{
    ((struct t *)data)->flushed++;
}

static void test_flush_and_close(void **state)
{
    struct t *t = *state;
    record_ok(t, &web, EVENTS_NORMAL, "A", "x");
    record_ok(t, &web, EVENTS_NORMAL, "B", "x");
    assert_int_equal(events_flush(t->ev, flushed, t), 0);
    events_poll(t->ev);
    complete(t, 0, 0);
    assert_int_equal(t->flushed, 0);
    events_poll(t->ev);
    complete(t, 0, 0);
    events_poll(t->ev);
    assert_int_equal(t->flushed, 1);
    /* On a running loop, with nothing pending: from the loop. */
    assert_int_equal(events_flush(t->ev, flushed, t), 0);
    assert_int_equal(t->flushed, 1);
    assert_int_equal(uv_run(&t->loop, UV_RUN_NOWAIT), 0);
    assert_int_equal(t->flushed, 2);
    /* Close with a write in flight and one queued: canceled, freed. */
    record_ok(t, &web, EVENTS_NORMAL, "C", "x");
    record_ok(t, &web, EVENTS_NORMAL, "D", "x");
    events_poll(t->ev);
    assert_non_null(inflight(t));
    events_close(t->ev, NULL, NULL);
    t->ev = NULL;
    assert_null(inflight(t));
    assert_int_equal(t->flushed, 2);
}

static void test_object_of_vmgroup(void **state)
{
    (void)state;
    cJSON *j = cJSON_Parse("{\"apiVersion\":\"vm.codeconnect.vmworld.com/v1alpha1\","
                           "\"kind\":\"VmGroup\",\"metadata\":{\"name\":\"web\",\"namespace\":"
                           "\"team-a\",\"uid\":\"u-1\",\"resourceVersion\":\"9\"},\"spec\":"
                           "{\"cpu\":1,\"memory\":1,\"replicas\":1,\"template\":\"t\"}}");
    struct vmgroup *g = NULL;
    assert_int_equal(vmgroup_from_json(j, &g, NULL, 0), 0);
    struct events_object o;
    vmgroup_event_object(g, &o);
    assert_string_equal(o.api_version, "vm.codeconnect.vmworld.com/v1alpha1");
    assert_string_equal(o.kind, "VmGroup");
    assert_string_equal(o.ns, "team-a");
    assert_string_equal(o.name, "web");
    assert_string_equal(o.uid, "u-1");
    assert_string_equal(o.resource_version, "9");
    vmgroup_free(g);
    cJSON_Delete(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_event_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_event_is_patched, setup, teardown),
        cmocka_unit_test_setup_teardown(test_burst_of_same_event_costs_one_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_aggregation_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_window_and_lru, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lru_evicts_least_recent, setup_small_cache, teardown),
        cmocka_unit_test_setup_teardown(test_eviction_of_an_entry_with_a_queued_write,
                                        setup_small_cache, teardown),
        cmocka_unit_test_setup_teardown(test_forget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rate_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_message_redaction_and_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retries_then_drop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_patch_of_a_deleted_event_creates_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_bound, setup_small_queue, teardown),
        cmocka_unit_test_setup_teardown(test_flush_and_close, setup, teardown),
        cmocka_unit_test(test_object_of_vmgroup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
