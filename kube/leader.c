/* leader.c: the Lease-based leader elector (see leader.h).
 *
 * One state machine driven by one timer: step() looks at the clock and
 * decides whether a request timed out, the renew deadline passed, or a try
 * is due; the completion of each request (on_io_done) moves the machine on.
 * At most one request is in flight. A request's context (struct op) is its
 * own allocation, so that a completion arriving after the elector gave the
 * request up (timeout, release, close) finds op->le NULL and only frees it.
 */
#include "kube/leader.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kube/kube.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/hex.h"

#define LEASE_API_VERSION "coordination.k8s.io/v1"
#define LEASE_KIND "Lease"
#define RELEASE_MAX_TRIES 3
#define MSG_MAX 512

enum state {
    ST_IDLE = 0,  /* made, not started */
    ST_CANDIDATE, /* trying to acquire */
    ST_LEADER,    /* holding the Lease */
    ST_RELEASING, /* leader_release() writing the Lease */
    ST_DONE,      /* lost or released: nothing more happens */
};

enum opkind {
    OP_GET = 1,
    OP_CREATE,
    OP_UPDATE,
    OP_RELEASE,     /* the update that gives the Lease up */
    OP_RELEASE_GET, /* re-read after a conflicting release */
};

struct op {
    struct leader *le; /* NULL once the elector gave the request up */
    enum opkind kind;
};

struct leader {
    uv_loop_t *loop;
    uv_timer_t timer;
    char ns[LEADER_MAX_NAME + 1];
    char name[LEADER_MAX_NAME + 1];
    char identity[LEADER_MAX_IDENTITY + 1];
    uint64_t lease_ms, renew_ms, retry_ms;
    uint64_t (*now_ms)(void *data);
    int64_t (*wall_us)(void *data);
    void *clock_data;
    double (*rand01)(void *data);
    uint64_t rng; /* splitmix64 state for the default jitter */
    const struct leader_io *io;
    void *io_ctx;
    struct leader_callbacks cb;

    enum state state;
    bool closing;

    /* What was last read or written, and when it was seen to change. */
    struct leader_record observed;
    cJSON *observed_obj; /* the Lease as last read or written, for updates */
    bool have_observed;
    uint64_t observed_ms;
    char reported[LEADER_MAX_IDENTITY + 1]; /* last identity given to on_new_leader */

    uint64_t last_renew_ms; /* sending time of the last successful write */
    uint64_t next_try_ms;
    char last_err[MSG_MAX]; /* the last failed try, for the stop message */

    /* The request in flight. */
    struct op *op;
    void *req;
    uint64_t op_sent_ms;
    uint64_t op_deadline_ms;

    int release_tries;
    bool release_due; /* release done to be called from the timer */
    int release_err;
    void (*release_done)(void *data, int err);
    void *release_data;
    bool released; /* leader_release() was called */

    void (*closed)(void *data);
    void *closed_data;
};

static void step(struct leader *le);
static void arm(struct leader *le);

/* Randomness (jitter). */

static double splitmix_rand(void *data)
{
    uint64_t *s = data;
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0; /* 2^53 */
}

static uint64_t now_ms(const struct leader *le)
{
    return le->now_ms(le->clock_data);
}

/* Pure helpers. */

int leader_check_timing(uint64_t lease_duration_ms, uint64_t renew_deadline_ms,
                        uint64_t retry_period_ms, char *err, size_t errlen)
{
    if (lease_duration_ms > renew_deadline_ms && renew_deadline_ms > retry_period_ms &&
        retry_period_ms > 0 && lease_duration_ms >= 1000 &&
        lease_duration_ms <= INT32_MAX * 1000ULL)
        return 0;
    if (err && errlen)
        snprintf(err, errlen,
                 "leader election needs lease duration > renew deadline > retry period > 0 and a "
                 "lease duration of at least 1s (got %" PRIu64 "ms, %" PRIu64 "ms, %" PRIu64 "ms)",
                 lease_duration_ms, renew_deadline_ms, retry_period_ms);
    return VMG_ECONFIG;
}

int leader_namespace(const char *flag_ns, const kcfg *cfg, const char **ret, char *err,
                     size_t errlen)
{
    if (flag_ns && flag_ns[0]) {
        if (strlen(flag_ns) > LEADER_MAX_NAME)
            goto bad;
        *ret = flag_ns;
        return 0;
    }
    if (cfg && kcfg_in_cluster(cfg) && kcfg_namespace(cfg)[0]) {
        *ret = kcfg_namespace(cfg);
        return 0;
    }
bad:
    if (err && errlen)
        snprintf(err, errlen,
                 "leader election needs the namespace of its Lease: not running in a cluster, so "
                 "pass --leader-election-namespace");
    return VMG_ECONFIG;
}

int leader_make_identity(char *buf, size_t len)
{
    char host[256], uuid[VMG_UUID_LEN + 1];
    int r;

    if (!buf || len < 64)
        return -EINVAL;
    r = vmg_uuid_random(uuid);
    if (r < 0)
        return r;
    if (gethostname(host, sizeof(host)) != 0 || !host[0])
        snprintf(host, sizeof(host), "unknown");
    host[sizeof(host) - 1] = '\0';

    size_t cap = len - 1 < LEADER_MAX_IDENTITY ? len - 1 : LEADER_MAX_IDENTITY;
    size_t hostmax = cap - 1 - VMG_UUID_LEN;
    snprintf(buf, len, "%.*s_%s", (int)hostmax, host, uuid);
    return 0;
}

int leader_microtime(int64_t wall_us, char *buf, size_t len)
{
    struct tm tm;
    if (!buf || len < LEADER_MICROTIME_LEN + 1 || wall_us < 0)
        return -EINVAL;
    time_t secs = (time_t)(wall_us / 1000000);
    long us = (long)(wall_us % 1000000);
    if (!gmtime_r(&secs, &tm) || tm.tm_year + 1900 > 9999)
        return -EINVAL;
    snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us);
    return 0;
}

/* Copies the string item (absent or null: "") into dst; VMG_EPARSE for
 * another type or a string too long. */
static int get_str(const cJSON *parent, const char *key, char *dst, size_t dstsize)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(parent, key);
    dst[0] = '\0';
    if (!it || cJSON_IsNull(it))
        return 0;
    if (!cJSON_IsString(it) || !it->valuestring)
        return VMG_EPARSE;
    size_t n = strlen(it->valuestring);
    if (n >= dstsize)
        return VMG_EPARSE;
    memcpy(dst, it->valuestring, n + 1);
    return 0;
}

static int get_int(const cJSON *parent, const char *key, int64_t *ret)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(parent, key);
    *ret = 0;
    if (!it || cJSON_IsNull(it))
        return 0;
    if (!cJSON_IsNumber(it))
        return VMG_EPARSE;
    double v = it->valuedouble;
    if (v != v || v < (double)INT32_MIN || v > (double)INT32_MAX || v != (double)(int64_t)v)
        return VMG_EPARSE;
    *ret = (int64_t)v;
    return 0;
}

int leader_record_from_json(const cJSON *obj, struct leader_record *ret)
{
    struct leader_record r;
    memset(&r, 0, sizeof(r));
    if (!cJSON_IsObject(obj))
        return VMG_EPARSE;
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(obj, "kind");
    if (kind && !(cJSON_IsString(kind) && strcmp(kind->valuestring, LEASE_KIND) == 0))
        return VMG_EPARSE;
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    if (meta && !cJSON_IsNull(meta)) {
        if (!cJSON_IsObject(meta) ||
            get_str(meta, "resourceVersion", r.resource_version, sizeof(r.resource_version)))
            return VMG_EPARSE;
    }
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
    if (spec && !cJSON_IsNull(spec)) {
        if (!cJSON_IsObject(spec) || get_str(spec, "holderIdentity", r.holder, sizeof(r.holder)) ||
            get_int(spec, "leaseDurationSeconds", &r.lease_duration_s) ||
            get_str(spec, "acquireTime", r.acquire_time, sizeof(r.acquire_time)) ||
            get_str(spec, "renewTime", r.renew_time, sizeof(r.renew_time)) ||
            get_int(spec, "leaseTransitions", &r.transitions))
            return VMG_EPARSE;
    }
    *ret = r;
    return 0;
}

/* Makes the spec object of r. */
static cJSON *spec_json(const struct leader_record *r)
{
    cJSON *spec = cJSON_CreateObject();
    if (!spec)
        return NULL;
    if ((r->holder[0] && !cJSON_AddStringToObject(spec, "holderIdentity", r->holder)) ||
        !cJSON_AddNumberToObject(spec, "leaseDurationSeconds", (double)r->lease_duration_s) ||
        (r->acquire_time[0] && !cJSON_AddStringToObject(spec, "acquireTime", r->acquire_time)) ||
        (r->renew_time[0] && !cJSON_AddStringToObject(spec, "renewTime", r->renew_time)) ||
        !cJSON_AddNumberToObject(spec, "leaseTransitions", (double)r->transitions)) {
        cJSON_Delete(spec);
        return NULL;
    }
    return spec;
}

int leader_record_to_json(const char *ns, const char *name, const struct leader_record *r,
                          cJSON **ret)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *meta = NULL, *spec = NULL;
    if (!o)
        return -ENOMEM;
    if (!cJSON_AddStringToObject(o, "apiVersion", LEASE_API_VERSION) ||
        !cJSON_AddStringToObject(o, "kind", LEASE_KIND))
        goto nomem;
    meta = cJSON_AddObjectToObject(o, "metadata");
    if (!meta || !cJSON_AddStringToObject(meta, "name", name) ||
        !cJSON_AddStringToObject(meta, "namespace", ns) ||
        (r->resource_version[0] &&
         !cJSON_AddStringToObject(meta, "resourceVersion", r->resource_version)))
        goto nomem;
    spec = spec_json(r);
    if (!spec)
        goto nomem;
    cJSON_AddItemToObject(o, "spec", spec);
    *ret = o;
    return 0;
nomem:
    cJSON_Delete(o);
    return -ENOMEM;
}

/* The body of an update: the Lease as last read, with r's spec and
 * resourceVersion, so that labels and annotations are kept. */
static int update_body(const struct leader *le, const struct leader_record *r, cJSON **ret)
{
    if (!le->observed_obj)
        return leader_record_to_json(le->ns, le->name, r, ret);
    cJSON *o = cJSON_Duplicate(le->observed_obj, 1);
    cJSON *spec = spec_json(r);
    if (!o || !spec)
        goto nomem;
    if (cJSON_HasObjectItem(o, "spec"))
        cJSON_ReplaceItemInObjectCaseSensitive(o, "spec", spec);
    else
        cJSON_AddItemToObject(o, "spec", spec);
    spec = NULL;
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    if (!cJSON_IsObject(meta)) {
        cJSON_DeleteItemFromObjectCaseSensitive(o, "metadata");
        meta = cJSON_AddObjectToObject(o, "metadata");
        if (!meta || !cJSON_AddStringToObject(meta, "name", le->name) ||
            !cJSON_AddStringToObject(meta, "namespace", le->ns))
            goto nomem;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "managedFields");
    if (r->resource_version[0] &&
        !cJSON_AddStringToObject(meta, "resourceVersion", r->resource_version))
        goto nomem;
    *ret = o;
    return 0;
nomem:
    cJSON_Delete(spec);
    cJSON_Delete(o);
    return -ENOMEM;
}

/* Two records say the same (client-go compares the whole record; the
 * resourceVersion is not part of it). */
static bool same_spec(const struct leader_record *a, const struct leader_record *b)
{
    return strcmp(a->holder, b->holder) == 0 && a->lease_duration_s == b->lease_duration_s &&
           strcmp(a->acquire_time, b->acquire_time) == 0 &&
           strcmp(a->renew_time, b->renew_time) == 0 && a->transitions == b->transitions;
}

/* The machine. */

int leader_new(uv_loop_t *loop, const struct leader_options *o, leader **ret, char *err,
               size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!loop || !o || !ret || !o->io || !o->io->get || !o->io->create || !o->io->update ||
        !o->io->cancel || !o->ns || !o->ns[0] || strlen(o->ns) > LEADER_MAX_NAME || !o->name ||
        !o->name[0] || strlen(o->name) > LEADER_MAX_NAME ||
        (o->identity && (!o->identity[0] || strlen(o->identity) > LEADER_MAX_IDENTITY))) {
        if (err && errlen)
            snprintf(err, errlen, "leader election: missing or bad namespace, name or identity");
        return -EINVAL;
    }
    uint64_t lease = o->lease_duration_ms ? o->lease_duration_ms : LEADER_DEFAULT_LEASE_DURATION_MS;
    uint64_t renew = o->renew_deadline_ms ? o->renew_deadline_ms : LEADER_DEFAULT_RENEW_DEADLINE_MS;
    uint64_t retry = o->retry_period_ms ? o->retry_period_ms : LEADER_DEFAULT_RETRY_PERIOD_MS;
    int r = leader_check_timing(lease, renew, retry, err, errlen);
    if (r < 0)
        return r;

    struct leader *le = calloc(1, sizeof(*le));
    if (!le)
        return -ENOMEM;
    le->loop = loop;
    snprintf(le->ns, sizeof(le->ns), "%s", o->ns);
    snprintf(le->name, sizeof(le->name), "%s", o->name);
    if (o->identity) {
        snprintf(le->identity, sizeof(le->identity), "%s", o->identity);
    } else {
        r = leader_make_identity(le->identity, sizeof(le->identity));
        if (r < 0) {
            free(le);
            return r;
        }
    }
    le->lease_ms = lease;
    le->renew_ms = renew;
    le->retry_ms = retry;
    le->now_ms = o->now_ms ? o->now_ms : vmg_clock_mono_ms;
    le->wall_us = o->wall_us ? o->wall_us : vmg_clock_wall_us;
    le->clock_data = o->clock_data;
    if (o->rand01) {
        le->rand01 = o->rand01;
    } else {
        le->rand01 = NULL;
        le->rng = uv_hrtime() ^ (uint64_t)(uintptr_t)le ^ ((uint64_t)getpid() << 32);
    }
    le->io = o->io;
    le->io_ctx = o->io_ctx;
    le->cb = o->cb;
    le->state = ST_IDLE;
    r = uv_timer_init(loop, &le->timer);
    if (r < 0) {
        free(le);
        return r;
    }
    le->timer.data = le;
    *ret = le;
    return 0;
}

static double rand01(struct leader *le)
{
    return le->rand01 ? le->rand01(le->clock_data) : splitmix_rand(&le->rng);
}

/* Gives up the request in flight: its completion will only free its op. */
static void drop_op(struct leader *le)
{
    struct op *op = le->op;
    void *req = le->req;
    if (!op)
        return;
    le->op = NULL;
    le->req = NULL;
    op->le = NULL;
    le->io->cancel(le->io_ctx, req); /* may free op */
}

static void set_err(struct leader *le, int err, const char *msg)
{
    snprintf(le->last_err, sizeof(le->last_err), "%s%s%s", vmg_strerror(err),
             msg && msg[0] ? ": " : "", msg ? msg : "");
}

static void report_leader(struct leader *le, const char *holder)
{
    if (!holder[0] || strcmp(holder, le->reported) == 0)
        return;
    snprintf(le->reported, sizeof(le->reported), "%s", holder);
    if (le->cb.on_new_leader)
        le->cb.on_new_leader(le->cb.data, le->reported);
}

/* Records what was read or written at now; obj (may be NULL) is kept for
 * later updates. */
static void observe(struct leader *le, const struct leader_record *r, const cJSON *obj,
                    uint64_t now)
{
    if (!le->have_observed || !same_spec(&le->observed, r))
        le->observed_ms = now;
    le->observed = *r;
    le->have_observed = true;
    if (obj) {
        cJSON *dup = cJSON_Duplicate(obj, 1);
        if (dup) {
            cJSON_Delete(le->observed_obj);
            le->observed_obj = dup;
        }
    }
}

/* Leadership ends (lost); the machine stops. */
static void lose(struct leader *le, enum leader_stop_reason reason, const char *msg)
{
    drop_op(le);
    le->state = ST_DONE;
    if (le->cb.on_stopped_leading)
        le->cb.on_stopped_leading(le->cb.data, reason, msg);
}

static void on_io_done(void *data, int err, const cJSON *obj, const char *msg);

/* The timeout of the next request: the time left to the renew deadline for
 * the leader, else RenewDeadline. */
static uint64_t op_timeout(const struct leader *le, uint64_t now)
{
    if (le->state == ST_LEADER) {
        uint64_t deadline = le->last_renew_ms + le->renew_ms;
        return deadline > now ? deadline - now : 1;
    }
    return le->renew_ms;
}

static void try_failed(struct leader *le, int err, const char *msg);

/* Starts a request of kind (body for writes). Failing to start counts as a
 * failed try (or a failed release). */
static void start_op(struct leader *le, enum opkind kind, const cJSON *body)
{
    uint64_t now = now_ms(le);
    uint64_t timeout = op_timeout(le, now);
    struct op *op = malloc(sizeof(*op));
    int r;
    if (!op) {
        r = -ENOMEM;
        goto fail;
    }
    op->le = le;
    op->kind = kind;
    le->op = op;
    le->op_sent_ms = now;
    le->op_deadline_ms = now + timeout;
    switch (kind) {
    case OP_GET:
    case OP_RELEASE_GET:
        r = le->io->get(le->io_ctx, le->ns, le->name, timeout, on_io_done, op, &le->req);
        break;
    case OP_CREATE:
        r = le->io->create(le->io_ctx, le->ns, body, timeout, on_io_done, op, &le->req);
        break;
    default:
        r = le->io->update(le->io_ctx, le->ns, le->name, body, timeout, on_io_done, op, &le->req);
        break;
    }
    if (r < 0) {
        le->op = NULL;
        le->req = NULL;
        free(op);
        goto fail;
    }
    return;
fail:
    if (kind == OP_RELEASE || kind == OP_RELEASE_GET) {
        le->state = ST_DONE;
        le->release_err = r;
        le->release_due = true;
    } else {
        try_failed(le, r, "could not start the request");
    }
}

/* A write of r (create or update). */
static void start_write(struct leader *le, enum opkind kind, const struct leader_record *r)
{
    cJSON *body = NULL;
    int e = kind == OP_CREATE ? leader_record_to_json(le->ns, le->name, r, &body)
                              : update_body(le, r, &body);
    if (e < 0) {
        if (kind == OP_RELEASE) {
            le->state = ST_DONE;
            le->release_err = e;
            le->release_due = true;
        } else {
            try_failed(le, e, "could not build the Lease");
        }
        return;
    }
    start_op(le, kind, body);
    cJSON_Delete(body);
}

/* A try did not end with this process holding the Lease: schedule the
 * next. */
static void try_failed(struct leader *le, int err, const char *msg)
{
    uint64_t now = now_ms(le);
    if (err)
        set_err(le, err, msg);
    if (le->state == ST_LEADER) {
        le->next_try_ms = now + le->retry_ms;
        return;
    }
    uint64_t wait = le->retry_ms + (uint64_t)(rand01(le) * LEADER_JITTER_FACTOR * le->retry_ms);
    le->next_try_ms = now + wait;
    /* Wake when the holder's lease expires, if that comes first. */
    if (le->have_observed && le->observed.holder[0] &&
        strcmp(le->observed.holder, le->identity) != 0 && le->observed.lease_duration_s > 0) {
        uint64_t expiry = le->observed_ms + (uint64_t)le->observed.lease_duration_s * 1000u;
        if (expiry > now && expiry < le->next_try_ms)
            le->next_try_ms = expiry;
    }
}

/* The record this process writes to hold the Lease, given what it read
 * (NULL: the Lease is absent). */
static void holding_record(struct leader *le, const struct leader_record *old,
                           struct leader_record *ret)
{
    char now[LEADER_MICROTIME_LEN + 1];
    if (leader_microtime(le->wall_us(le->clock_data), now, sizeof(now)) < 0)
        now[0] = '\0';
    memset(ret, 0, sizeof(*ret));
    snprintf(ret->holder, sizeof(ret->holder), "%s", le->identity);
    ret->lease_duration_s = (int64_t)((le->lease_ms + 999) / 1000);
    snprintf(ret->renew_time, sizeof(ret->renew_time), "%s", now);
    if (old && strcmp(old->holder, le->identity) == 0 && old->acquire_time[0]) {
        snprintf(ret->acquire_time, sizeof(ret->acquire_time), "%s", old->acquire_time);
        ret->transitions = old->transitions;
    } else {
        snprintf(ret->acquire_time, sizeof(ret->acquire_time), "%s", now);
        ret->transitions = old ? old->transitions + (strcmp(old->holder, le->identity) != 0) : 0;
    }
    if (old)
        snprintf(ret->resource_version, sizeof(ret->resource_version), "%s", old->resource_version);
}

/* other_holds: the record last read names another holder, whose lease,
 * counted from when this process saw the record change, has not expired. */
static bool other_holds(const struct leader *le, uint64_t now)
{
    const struct leader_record *r = &le->observed;

    return le->have_observed && r->holder[0] && strcmp(r->holder, le->identity) != 0 &&
           le->observed_ms + (uint64_t)(r->lease_duration_s > 0 ? r->lease_duration_s : 0) * 1000u >
               now;
}

static void got_lease(struct leader *le, int err, const cJSON *obj, const char *msg)
{
    uint64_t now = now_ms(le);
    struct leader_record rec, want;
    if (err == VMG_ENOTFOUND) {
        /* Deleted while another held it (by hand: a release only clears
         * it): the holder acts on until it next reads the Lease, so it is
         * held until the lease last seen expires, as if unchanged. */
        if (other_holds(le, now)) {
            try_failed(le, 0, NULL);
            return;
        }
        holding_record(le, NULL, &want);
        start_write(le, OP_CREATE, &want);
        return;
    }
    if (err) {
        try_failed(le, err, msg);
        return;
    }
    if (leader_record_from_json(obj, &rec) < 0) {
        try_failed(le, VMG_EPARSE, "the Lease could not be read");
        return;
    }
    observe(le, &rec, obj, now);
    report_leader(le, rec.holder);
    if (le->closing)
        return;
    if (other_holds(le, now)) {
        if (le->state == ST_LEADER) {
            char m[3 * LEADER_MAX_NAME + 64];
            snprintf(m, sizeof(m), "the Lease %s/%s is held by %s", le->ns, le->name, rec.holder);
            lose(le, LEADER_STOP_TAKEN, m);
            return;
        }
        try_failed(le, 0, NULL);
        return;
    }
    holding_record(le, &rec, &want);
    start_write(le, OP_UPDATE, &want);
}

static void wrote_lease(struct leader *le, int err, const cJSON *obj, const char *msg,
                        uint64_t sent)
{
    uint64_t now = now_ms(le);
    struct leader_record rec;
    bool readable;
    if (err) {
        if (err == VMG_ECONFLICT && le->state == ST_CANDIDATE)
            msg = "another candidate wrote the Lease first";
        try_failed(le, err, msg);
        return;
    }
    readable = leader_record_from_json(obj, &rec) == 0;
    if (readable && strcmp(rec.holder, le->identity) != 0) {
        /* Written, but the Lease the server kept names another holder, or
         * none (a webhook or a proxy rewrote it): this process does not
         * hold it, and acting as if would lead beside whoever takes it. */
        char m[3 * LEADER_MAX_NAME + 96];

        observe(le, &rec, obj, now);
        report_leader(le, rec.holder);
        if (le->closing)
            return;
        snprintf(m, sizeof(m),
                 "the API server kept the Lease %s/%s with holder \"%s\", not this one", le->ns,
                 le->name, rec.holder);
        if (le->state == ST_LEADER) {
            lose(le, LEADER_STOP_TAKEN, m);
            return;
        }
        try_failed(le, VMG_ECONFLICT, m);
        return;
    }
    if (readable) {
        observe(le, &rec, obj, now);
    } else {
        /* Unreadable answer: the write succeeded; the next try re-reads. */
        le->observed.resource_version[0] = '\0';
        le->observed_ms = now;
    }
    le->last_renew_ms = sent;
    le->next_try_ms = now + le->retry_ms;
    le->last_err[0] = '\0';
    if (le->state == ST_CANDIDATE) {
        le->state = ST_LEADER;
        report_leader(le, le->identity);
        if (le->closing)
            return;
        if (le->cb.on_started_leading)
            le->cb.on_started_leading(le->cb.data);
    }
}

static void release_finished(struct leader *le, int err)
{
    le->state = ST_DONE;
    le->release_err = err;
    le->release_due = true;
}

/* The record that gives the Lease up. */
static void release_record(struct leader *le, struct leader_record *ret)
{
    char now[LEADER_MICROTIME_LEN + 1];
    if (leader_microtime(le->wall_us(le->clock_data), now, sizeof(now)) < 0)
        now[0] = '\0';
    memset(ret, 0, sizeof(*ret));
    ret->lease_duration_s = 1;
    snprintf(ret->acquire_time, sizeof(ret->acquire_time), "%s", now);
    snprintf(ret->renew_time, sizeof(ret->renew_time), "%s", now);
    ret->transitions = le->observed.transitions;
    snprintf(ret->resource_version, sizeof(ret->resource_version), "%s",
             le->observed.resource_version);
}

static void released(struct leader *le, int err, const cJSON *obj)
{
    struct leader_record rec;
    if (err == VMG_ECONFLICT && le->release_tries < RELEASE_MAX_TRIES) {
        start_op(le, OP_RELEASE_GET, NULL);
        return;
    }
    if (!err && leader_record_from_json(obj, &rec) == 0)
        observe(le, &rec, obj, now_ms(le));
    release_finished(le, err);
}

static void release_reread(struct leader *le, int err, const cJSON *obj)
{
    struct leader_record rec, want;
    if (err == VMG_ENOTFOUND) {
        release_finished(le, 0);
        return;
    }
    if (err || leader_record_from_json(obj, &rec) < 0) {
        release_finished(le, err ? err : VMG_EPARSE);
        return;
    }
    observe(le, &rec, obj, now_ms(le));
    if (strcmp(rec.holder, le->identity) != 0) {
        release_finished(le, 0); /* not ours any more: nothing to give up */
        return;
    }
    le->release_tries++;
    release_record(le, &want);
    start_write(le, OP_RELEASE, &want);
}

static void on_io_done(void *data, int err, const cJSON *obj, const char *msg)
{
    struct op *op = data;
    struct leader *le = op->le;
    enum opkind kind = op->kind;
    free(op);
    if (!le)
        return;
    uint64_t sent = le->op_sent_ms;
    le->op = NULL;
    le->req = NULL;
    if (!err && !obj)
        err = VMG_EPARSE;
    switch (kind) {
    case OP_GET:
        got_lease(le, err, obj, msg);
        break;
    case OP_CREATE:
    case OP_UPDATE:
        wrote_lease(le, err, obj, msg, sent);
        break;
    case OP_RELEASE:
        released(le, err, obj);
        break;
    case OP_RELEASE_GET:
        release_reread(le, err, obj);
        break;
    }
    if (!le->closing)
        step(le);
}

/* A request ran past its deadline: give it up as failed. */
static void op_timed_out(struct leader *le)
{
    enum opkind kind = le->op->kind;
    drop_op(le);
    if (kind == OP_RELEASE || kind == OP_RELEASE_GET)
        release_finished(le, -ETIMEDOUT);
    else
        try_failed(le, -ETIMEDOUT, "the request timed out");
}

static void step(struct leader *le)
{
    if (le->closing)
        return;
    uint64_t now = now_ms(le);
    if (le->op && now >= le->op_deadline_ms)
        op_timed_out(le);
    if (le->state == ST_LEADER && now >= le->last_renew_ms + le->renew_ms) {
        char m[2 * LEADER_MAX_NAME + MSG_MAX + 128];
        snprintf(m, sizeof(m), "the Lease %s/%s was not renewed within %" PRIu64 "ms%s%s", le->ns,
                 le->name, le->renew_ms, le->last_err[0] ? "; last error: " : "", le->last_err);
        lose(le, LEADER_STOP_RENEW_DEADLINE, m);
        if (le->closing)
            return;
    }
    if ((le->state == ST_CANDIDATE || le->state == ST_LEADER) && !le->op && now >= le->next_try_ms)
        start_op(le, OP_GET, NULL);
    if (le->release_due && !le->op) {
        le->release_due = false;
        void (*done)(void *, int) = le->release_done;
        le->release_done = NULL;
        if (done)
            done(le->release_data, le->release_err);
        if (le->closing)
            return;
    }
    arm(le);
}

static void on_timer(uv_timer_t *t)
{
    step(t->data);
}

/* Sets the timer to the earliest thing that is due. */
static void arm(struct leader *le)
{
    uint64_t now = now_ms(le);
    uint64_t at = UINT64_MAX;
    if (le->op)
        at = le->op_deadline_ms;
    if (le->state == ST_LEADER && le->last_renew_ms + le->renew_ms < at)
        at = le->last_renew_ms + le->renew_ms;
    if ((le->state == ST_CANDIDATE || le->state == ST_LEADER) && !le->op && le->next_try_ms < at)
        at = le->next_try_ms;
    if (le->release_due && !le->op)
        at = now;
    if (at == UINT64_MAX) {
        uv_timer_stop(&le->timer);
        return;
    }
    uv_timer_start(&le->timer, on_timer, at > now ? at - now : 0, 0);
}

int leader_start(leader *le)
{
    if (le->closing)
        return -ESHUTDOWN;
    if (le->state != ST_IDLE)
        return -EALREADY;
    le->state = ST_CANDIDATE;
    le->next_try_ms = now_ms(le);
    arm(le);
    return 0;
}

bool leader_is_leader(const leader *le)
{
    return le && le->state == ST_LEADER && !le->closing &&
           le->now_ms(le->clock_data) < le->last_renew_ms + le->renew_ms;
}

double leader_status_value(void *le)
{
    return leader_is_leader(le) ? 1.0 : 0.0;
}

const char *leader_identity(const leader *le)
{
    return le->identity;
}

bool leader_observed(const leader *le, struct leader_record *ret)
{
    if (!le->have_observed)
        return false;
    *ret = le->observed;
    return true;
}

int leader_release(leader *le, void (*done)(void *data, int err), void *data)
{
    if (le->closing)
        return -ESHUTDOWN;
    if (le->released)
        return -EALREADY;
    le->released = true;
    le->release_done = done;
    le->release_data = data;
    drop_op(le);
    if (le->state != ST_LEADER) {
        le->state = ST_DONE;
        le->release_err = 0;
        le->release_due = true;
        arm(le);
        return 0;
    }
    le->state = ST_RELEASING;
    if (le->cb.on_stopped_leading)
        le->cb.on_stopped_leading(le->cb.data, LEADER_STOP_RELEASED, "the Lease is being released");
    if (le->closing)
        return 0;
    struct leader_record want;
    release_record(le, &want);
    le->release_tries = 1;
    start_write(le, OP_RELEASE, &want);
    arm(le);
    return 0;
}

static void on_closed(uv_handle_t *h)
{
    struct leader *le = h->data;
    void (*closed)(void *) = le->closed;
    void *data = le->closed_data;
    cJSON_Delete(le->observed_obj);
    free(le);
    if (closed)
        closed(data);
}

void leader_close(leader *le, void (*closed)(void *data), void *data)
{
    if (!le || le->closing)
        return;
    le->closing = true;
    le->closed = closed;
    le->closed_data = data;
    drop_op(le);
    uv_timer_stop(&le->timer);
    uv_close((uv_handle_t *)&le->timer, on_closed);
}

void leader_poll(leader *le)
{
    step(le);
}

/* The io over kube/kube. */

struct kreq {
    leader_io_done done;
    void *data;
};

static void kube_done(void *data, const struct kube_result *res)
{
    struct kreq *k = data;
    leader_io_done done = k->done;
    void *d = k->data;
    free(k);
    if (res->err)
        done(d, res->err, NULL, res->message);
    else
        done(d, 0, res->body, NULL);
}

static int kube_send(void *ctx, const char *method, const char *ns, const char *name,
                     const cJSON *body, uint64_t timeout_ms, leader_io_done done, void *data,
                     void **ret_req)
{
    char path[KUBE_PATH_MAX];
    int r = kube_path(path, sizeof(path), "coordination.k8s.io", "v1", ns, "leases", name, NULL);
    if (r < 0)
        return r;
    struct kreq *k = malloc(sizeof(*k));
    if (!k)
        return -ENOMEM;
    k->done = done;
    k->data = data;
    kube_req *req = NULL;
    r = kube_send_once(ctx, method, path, "application/json", body, timeout_ms, kube_done, k, &req);
    if (r < 0) {
        free(k);
        return r;
    }
    *ret_req = req;
    return 0;
}

static int kube_io_get(void *ctx, const char *ns, const char *name, uint64_t timeout_ms,
                       leader_io_done done, void *data, void **ret_req)
{
    return kube_send(ctx, "GET", ns, name, NULL, timeout_ms, done, data, ret_req);
}

static int kube_io_create(void *ctx, const char *ns, const cJSON *body, uint64_t timeout_ms,
                          leader_io_done done, void *data, void **ret_req)
{
    return kube_send(ctx, "POST", ns, NULL, body, timeout_ms, done, data, ret_req);
}

static int kube_io_update(void *ctx, const char *ns, const char *name, const cJSON *body,
                          uint64_t timeout_ms, leader_io_done done, void *data, void **ret_req)
{
    return kube_send(ctx, "PUT", ns, name, body, timeout_ms, done, data, ret_req);
}

static void kube_io_cancel(void *ctx, void *req)
{
    (void)ctx;
    kube_cancel(req);
}

const struct leader_io leader_kube_io = {
    .get = kube_io_get,
    .create = kube_io_create,
    .update = kube_io_update,
    .cancel = kube_io_cancel,
};
