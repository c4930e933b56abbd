/* events.c: the Event recorder (see events.h).
 *
 * Two LRU caches of the same shape (a hash table of chains over a recency
 * list, fixed capacity): one of token buckets per involved object, one of
 * recent events for aggregation. Keys encode each field with its length
 * ("5:hello"), so no two field lists make the same key.
 *
 * Writes wait in a FIFO; one is in flight at a time. A write owns the
 * whole Event as JSON (a patch is derived from it when sent), so that it
 * survives the eviction of its cache entry and can turn from a patch into
 * a create. A cache entry points at its queued, not yet sent write (if
 * any), which absorbs repeats of the event.
 */
#include "kube/events.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kube/kube.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/queue.h"
#include "lib/log.h"
#include "lib/str.h"

#define LOGGER "events"
#define FORMAT_MAX (64u * 1024u) /* a formatted message is cut here before redaction */

/* LRU */

struct lru_node {
    struct lq link;         /* in the recency order */
    struct lru_node *hnext; /* hash chain */
    uint64_t hash;
    uint64_t used_ms; /* when last added or found: the recency order */
    char *key;
};

struct lru {
    struct lq order; /* of lru_node.link, the most recent first */
    struct lru_node **table;
    size_t nbuckets; /* a power of 2 */
    size_t count, cap;
    void (*evict)(void *ctx, struct lru_node *n); /* unlinked already; frees n */
    void *ctx;
};

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return h;
}

static int lru_init(struct lru *l, size_t cap, void (*evict)(void *, struct lru_node *), void *ctx)
{
    size_t n = 16;
    while (n < cap)
        n *= 2;
    l->table = calloc(n, sizeof(*l->table));
    if (!l->table)
        return -ENOMEM;
    l->nbuckets = n;
    lq_init(&l->order);
    l->count = 0;
    l->cap = cap;
    l->evict = evict;
    l->ctx = ctx;
    return 0;
}

static void lru_unlink(struct lru *l, struct lru_node *n)
{
    struct lru_node **pp = &l->table[n->hash & (l->nbuckets - 1)];
    while (*pp != n)
        pp = &(*pp)->hnext;
    *pp = n->hnext;
    lq_remove(&n->link);
    l->count--;
}

/* lru_oldest is the least recent entry, or NULL. */
static struct lru_node *lru_oldest(const struct lru *l)
{
    struct lq *n = lq_tail(&l->order);
    return n ? lq_entry(n, struct lru_node, link) : NULL;
}

/* Finds key and makes it the most recent, used at now. */
static struct lru_node *lru_get(struct lru *l, const char *key, uint64_t hash, uint64_t now)
{
    struct lru_node *n = l->table[hash & (l->nbuckets - 1)];
    for (; n; n = n->hnext) {
        if (n->hash == hash && strcmp(n->key, key) == 0) {
            lq_remove(&n->link);
            lq_insert_head(&l->order, &n->link);
            n->used_ms = now;
            return n;
        }
    }
    return NULL;
}

/* Adds n (key and hash set, not present) as the most recent, used at now,
 * evicting the least recent entry when full. */
static void lru_add(struct lru *l, struct lru_node *n, uint64_t now)
{
    if (l->count >= l->cap) {
        struct lru_node *old = lru_oldest(l);
        lru_unlink(l, old);
        l->evict(l->ctx, old);
    }
    size_t b = n->hash & (l->nbuckets - 1);
    n->hnext = l->table[b];
    l->table[b] = n;
    lq_insert_head(&l->order, &n->link);
    n->used_ms = now;
    l->count++;
}

/* Removes the entries not used for more than ttl_ms before now: they are
 * the least recent ones, at the tail. */
static void lru_expire(struct lru *l, uint64_t now, uint64_t ttl_ms)
{
    struct lru_node *n;
    while ((n = lru_oldest(l)) != NULL) {
        if (now < n->used_ms || now - n->used_ms <= ttl_ms)
            break;
        lru_unlink(l, n);
        l->evict(l->ctx, n);
    }
}

/* key_field finds field i (from 0) of a key made by make_key (below). */
static bool key_field(const char *key, size_t i, const char **ret, size_t *ret_len)
{
    const char *p = key;
    for (;;) {
        char *end;
        unsigned long long n = strtoull(p, &end, 10);
        if (end == p || *end != ':' || n > strlen(end + 1))
            return false;
        if (i-- == 0) {
            *ret = end + 1;
            *ret_len = (size_t)n;
            return true;
        }
        p = end + 1 + n;
    }
}

static bool key_field_is(const char *key, size_t i, const char *want)
{
    const char *f;
    size_t n;
    return key_field(key, i, &f, &n) && n == strlen(want) && memcmp(f, want, n) == 0;
}

/* Removes the entries whose key has ns and name as fields 2 and 3 (both
 * caches' keys begin apiVersion, kind, namespace, name). Returns how many. */
static size_t lru_forget(struct lru *l, const char *ns, const char *name)
{
    size_t n = 0;
    struct lq *pos, *tmp;
    lq_foreach_safe(pos, tmp, &l->order)
    {
        struct lru_node *e = lq_entry(pos, struct lru_node, link);
        if (key_field_is(e->key, 2, ns) && key_field_is(e->key, 3, name)) {
            lru_unlink(l, e);
            l->evict(l->ctx, e);
            n++;
        }
    }
    return n;
}

/* Removes every entry (through evict) and the table. */
static void lru_clear(struct lru *l)
{
    if (!l->table)
        return;
    while (!lq_empty(&l->order)) {
        struct lru_node *n = lq_entry(lq_head(&l->order), struct lru_node, link);
        lru_unlink(l, n);
        l->evict(l->ctx, n);
    }
    free(l->table);
    l->table = NULL;
}

/* The recorder. */

struct write;

struct bucket {
    struct lru_node node; /* first */
    uint32_t tokens;
    uint64_t last_ms; /* time credited so far (now when the bucket is full) */
};

struct entry {
    struct lru_node node;           /* first */
    char name[EVENTS_MAX_NAME + 1]; /* the Event's name */
    int64_t count;
    char first_ts[32];
    uint64_t last_ms;     /* when last recorded, monotonic */
    struct write *queued; /* a write not sent yet, which absorbs repeats */
};

enum wkind { W_CREATE = 1, W_PATCH };

struct write {
    struct lq link;      /* in the events' queue */
    struct entry *entry; /* whose repeats it absorbs; NULL once sent or evicted */
    enum wkind kind;
    cJSON *event; /* the whole Event, count and lastTimestamp current */
    char ns[EVENTS_MAX_FIELD + 1];
    char name[EVENTS_MAX_NAME + 1];
    int attempts;        /* sent so far */
    bool switched;       /* turned from patch to create or back once already */
    uint64_t not_before; /* monotonic ms: a retry waits until then */
};

/* The context of a request in flight. */
struct op {
    struct events *ev; /* NULL once abandoned */
};

struct events {
    uv_loop_t *loop;
    uv_timer_t timer;
    char component[EVENTS_MAX_FIELD + 1];
    char instance[EVENTS_MAX_FIELD + 1];
    uint64_t window_ms, refill_ms, retry_ms, timeout_ms;
    uint32_t burst;
    size_t max_pending;
    int max_attempts;
    uint64_t (*now_ms)(void *data);
    int64_t (*wall_us)(void *data);
    void *clock_data;
    const struct events_io *io;
    void *io_ctx;
    events_drop_fn on_drop;
    void *drop_data;

    struct lru buckets, recent;
    struct lq writes; /* of write.link; the head may be in flight */
    size_t pending;
    struct op *op; /* the head's request in flight */
    void *req;
    uint64_t last_suffix; /* the last name suffix given */

    bool flush_due;
    void (*flush_cb)(void *data);
    void *flush_data;

    bool closing;
    void (*closed)(void *data);
    void *closed_data;
    struct events_stats st;
};

static void arm(struct events *ev);

static uint64_t now_ms(const struct events *ev)
{
    return ev->now_ms(ev->clock_data);
}

static void free_write(struct write *w)
{
    if (!w)
        return;
    if (w->entry && w->entry->queued == w)
        w->entry->queued = NULL;
    cJSON_Delete(w->event);
    free(w);
}

static void evict_bucket(void *ctx, struct lru_node *n)
{
    (void)ctx;
    free(n->key);
    free(n);
}

static void evict_entry(void *ctx, struct lru_node *n)
{
    (void)ctx;
    struct entry *e = (struct entry *)n;
    if (e->queued)
        e->queued->entry = NULL;
    free(n->key);
    free(n);
}

int events_new(uv_loop_t *loop, const struct events_options *o, events **ret)
{
    char host[256];
    if (!loop || !o || !ret || !o->io || !o->io->create || !o->io->patch || !o->io->cancel)
        return -EINVAL;
    if ((o->component && strlen(o->component) > EVENTS_MAX_FIELD) ||
        (o->instance && strlen(o->instance) > EVENTS_MAX_FIELD))
        return -EINVAL;
    struct events *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return -ENOMEM;
    ev->loop = loop;
    lq_init(&ev->writes);
    snprintf(ev->component, sizeof(ev->component), "%s",
             o->component && o->component[0] ? o->component : EVENTS_COMPONENT);
    if (o->instance) {
        snprintf(ev->instance, sizeof(ev->instance), "%s", o->instance);
    } else {
        if (gethostname(host, sizeof(host)) != 0)
            host[0] = '\0';
        host[sizeof(host) - 1] = '\0';
        snprintf(ev->instance, sizeof(ev->instance), "%.*s", EVENTS_MAX_FIELD, host);
    }
    ev->window_ms = o->window_ms ? o->window_ms : EVENTS_DEFAULT_WINDOW_MS;
    ev->refill_ms = o->refill_ms ? o->refill_ms : EVENTS_DEFAULT_REFILL_MS;
    ev->retry_ms = o->retry_ms ? o->retry_ms : EVENTS_DEFAULT_RETRY_MS;
    ev->timeout_ms = o->timeout_ms ? o->timeout_ms : EVENTS_DEFAULT_TIMEOUT_MS;
    ev->burst = o->burst ? o->burst : EVENTS_DEFAULT_BURST;
    ev->max_pending = o->max_pending ? o->max_pending : EVENTS_DEFAULT_MAX_PENDING;
    ev->max_attempts = o->max_attempts > 0 ? o->max_attempts : EVENTS_DEFAULT_MAX_ATTEMPTS;
    ev->now_ms = o->now_ms ? o->now_ms : vmg_clock_mono_ms;
    ev->wall_us = o->wall_us ? o->wall_us : vmg_clock_wall_us;
    ev->clock_data = o->clock_data;
    ev->io = o->io;
    ev->io_ctx = o->io_ctx;
    ev->on_drop = o->on_drop;
    ev->drop_data = o->drop_data;
    size_t cap = o->cache_size ? o->cache_size : EVENTS_DEFAULT_CACHE_SIZE;
    int r = lru_init(&ev->buckets, cap, evict_bucket, ev);
    if (r == 0)
        r = lru_init(&ev->recent, cap, evict_entry, ev);
    if (r == 0)
        r = uv_timer_init(loop, &ev->timer);
    if (r < 0) {
        lru_clear(&ev->buckets);
        lru_clear(&ev->recent);
        free(ev);
        return r;
    }
    ev->timer.data = ev;
    *ret = ev;
    return 0;
}

/* Messages. */

/* The length of the valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    unsigned cp = c & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

size_t events_message(char *dst, const char *msg)
{
    char red[4 * EVENTS_MAX_MESSAGE + 1];
    size_t n = vmg_log_redact(red, sizeof(red), msg ? msg : "");
    size_t i = 0, out = 0;
    const size_t keep = EVENTS_MAX_MESSAGE - 3; /* room for "..." */
    size_t cut_at = 0;                          /* out when a cut must happen */
    bool cut = false;

    /* Sanitize, remembering the last boundary at or below keep. */
    while (i < n) {
        size_t l = utf8_len((const unsigned char *)red + i, n - i);
        size_t w = l ? l : 1;
        if (out + w > EVENTS_MAX_MESSAGE) {
            cut = true;
            break;
        }
        if (l) {
            memcpy(dst + out, red + i, l);
        } else {
            dst[out] = '?';
        }
        out += w;
        i += w;
        if (out <= keep)
            cut_at = out;
    }
    if (cut) {
        memcpy(dst + cut_at, "...", 3);
        out = cut_at + 3;
    }
    dst[out] = '\0';
    return out;
}

/* Keys: each field as "<len>:<bytes>". */
static char *make_key(const char *const *fields, size_t n)
{
    size_t total = 1;
    for (size_t i = 0; i < n; i++)
        total += strlen(fields[i]) + 24;
    char *k = malloc(total);
    if (!k)
        return NULL;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        int w = snprintf(k + off, total - off, "%zu:%s", strlen(fields[i]), fields[i]);
        if (w < 0 || (size_t)w >= total - off) {
            free(k);
            return NULL;
        }
        off += (size_t)w;
    }
    return k;
}

static bool valid_reason(const char *r)
{
    size_t n = r ? strlen(r) : 0;
    if (n == 0 || n > EVENTS_MAX_REASON)
        return false;
    if (!((r[0] >= 'A' && r[0] <= 'Z') || (r[0] >= 'a' && r[0] <= 'z')))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = r[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
            return false;
    }
    return true;
}

static int check_field(const char *s, bool required)
{
    if (!s || !s[0])
        return required ? -EINVAL : 0;
    return strlen(s) > EVENTS_MAX_FIELD ? VMG_ETOOBIG : 0;
}

static void dropped(struct events *ev, enum events_drop why, const struct events_object *obj,
                    const char *reason)
{
    switch (why) {
    case EVENTS_DROP_RATE_LIMITED:
        ev->st.rate_limited++;
        break;
    case EVENTS_DROP_QUEUE_FULL:
        ev->st.queue_full++;
        break;
    case EVENTS_DROP_FAILED:
        ev->st.failed++;
        break;
    }
    if (ev->on_drop)
        ev->on_drop(ev->drop_data, why, obj, reason);
}

/* expire forgets what no longer changes anything: an aggregation entry
 * past its window (the next equal event makes a new Event anyway) and a
 * bucket idle long enough to be full again (as a new one would be). */
static void expire(struct events *ev)
{
    uint64_t now = now_ms(ev);
    uint64_t full_ms =
        ev->refill_ms > UINT64_MAX / ev->burst ? UINT64_MAX : ev->refill_ms * ev->burst;
    lru_expire(&ev->recent, now, ev->window_ms);
    lru_expire(&ev->buckets, now, full_ms);
}

/* Takes a token of the bucket of obj, type and reason; false when empty.
 * Each kind of event has a bucket of its own, so that a burst of one kind
 * (VMs created while scaling up) never silences another (the Reconfigured
 * or the Warning that follows it), while a repeating one is still held. */
static int take_token(struct events *ev, const struct events_object *obj, enum events_type type,
                      const char *reason, bool *ret_ok)
{
    const char *f[] = {obj->api_version,
                       obj->kind,
                       obj->ns,
                       obj->name,
                       vmg_nz(obj->uid),
                       type == EVENTS_WARNING ? "Warning" : "Normal",
                       reason};
    char *key = make_key(f, 7);
    if (!key)
        return -ENOMEM;
    uint64_t h = fnv1a(key), now = now_ms(ev);
    struct bucket *b = (struct bucket *)lru_get(&ev->buckets, key, h, now);
    if (b) {
        free(key);
        if (now > b->last_ms) {
            uint64_t add = (now - b->last_ms) / ev->refill_ms;
            if (add >= ev->burst - b->tokens) {
                b->tokens = ev->burst;
                b->last_ms = now;
            } else {
                b->tokens += (uint32_t)add;
                b->last_ms += add * ev->refill_ms;
            }
        }
    } else {
        b = calloc(1, sizeof(*b));
        if (!b) {
            free(key);
            return -ENOMEM;
        }
        b->node.key = key;
        b->node.hash = h;
        b->tokens = ev->burst;
        b->last_ms = now;
        lru_add(&ev->buckets, &b->node, now);
    }
    *ret_ok = b->tokens > 0;
    if (*ret_ok) {
        if (b->tokens == ev->burst)
            b->last_ms = now; /* the refill starts now */
        b->tokens--;
    }
    return 0;
}

/* A fresh name "<obj name>.<hex>", unique in this recorder. */
static void event_name(struct events *ev, const char *obj_name, char *buf, size_t len)
{
    int64_t us = ev->wall_us(ev->clock_data);
    uint64_t ns = us > 0 ? (uint64_t)us * 1000u : 0;
    if (ns <= ev->last_suffix)
        ns = ev->last_suffix + 1;
    ev->last_suffix = ns;
    char suffix[24];
    int sl = snprintf(suffix, sizeof(suffix), ".%" PRIx64, ns);
    size_t room = EVENTS_MAX_NAME - (size_t)sl;
    snprintf(buf, len, "%.*s%s", (int)room, obj_name, suffix);
}

static cJSON *build_event(struct events *ev, const struct events_object *obj, const char *name,
                          enum events_type type, const char *reason, const char *message,
                          const char *first_ts, const char *last_ts, int64_t count)
{
    cJSON *e = cJSON_CreateObject(), *m, *io, *src;
    if (!e)
        return NULL;
    if (!cJSON_AddStringToObject(e, "apiVersion", "v1") ||
        !cJSON_AddStringToObject(e, "kind", "Event"))
        goto nomem;
    m = cJSON_AddObjectToObject(e, "metadata");
    if (!m || !cJSON_AddStringToObject(m, "name", name) ||
        !cJSON_AddStringToObject(m, "namespace", obj->ns))
        goto nomem;
    io = cJSON_AddObjectToObject(e, "involvedObject");
    if (!io || !cJSON_AddStringToObject(io, "apiVersion", obj->api_version) ||
        !cJSON_AddStringToObject(io, "kind", obj->kind) ||
        !cJSON_AddStringToObject(io, "namespace", obj->ns) ||
        !cJSON_AddStringToObject(io, "name", obj->name) ||
        (obj->uid && obj->uid[0] && !cJSON_AddStringToObject(io, "uid", obj->uid)) ||
        (obj->resource_version && obj->resource_version[0] &&
         !cJSON_AddStringToObject(io, "resourceVersion", obj->resource_version)))
        goto nomem;
    if (!cJSON_AddStringToObject(e, "reason", reason) ||
        !cJSON_AddStringToObject(e, "message", message) ||
        !cJSON_AddStringToObject(e, "type", type == EVENTS_WARNING ? "Warning" : "Normal"))
        goto nomem;
    src = cJSON_AddObjectToObject(e, "source");
    if (!src || !cJSON_AddStringToObject(src, "component", ev->component))
        goto nomem;
    if (!cJSON_AddStringToObject(e, "firstTimestamp", first_ts) ||
        !cJSON_AddStringToObject(e, "lastTimestamp", last_ts) ||
        !cJSON_AddNumberToObject(e, "count", (double)count) ||
        !cJSON_AddStringToObject(e, "reportingComponent", ev->component) ||
        !cJSON_AddStringToObject(e, "reportingInstance", ev->instance))
        goto nomem;
    return e;
nomem:
    cJSON_Delete(e);
    return NULL;
}

/* Sets count and lastTimestamp of a queued write's Event. */
static int bump(cJSON *event, int64_t count, const char *last_ts)
{
    cJSON *c = cJSON_CreateNumber((double)count), *t = cJSON_CreateString(last_ts);
    if (!c || !t) {
        cJSON_Delete(c);
        cJSON_Delete(t);
        return -ENOMEM;
    }
    cJSON_ReplaceItemInObjectCaseSensitive(event, "count", c);
    cJSON_ReplaceItemInObjectCaseSensitive(event, "lastTimestamp", t);
    return 0;
}

/* head_write is the first queued write, or NULL. */
static struct write *head_write(const struct events *ev)
{
    struct lq *n = lq_head(&ev->writes);
    return n ? lq_entry(n, struct write, link) : NULL;
}

static void enqueue(struct events *ev, struct write *w)
{
    lq_insert_tail(&ev->writes, &w->link);
    ev->pending++;
    arm(ev);
}

int events_record(events *ev, const struct events_object *obj, enum events_type type,
                  const char *reason, const char *message)
{
    char msg[EVENTS_MAX_MESSAGE + 1], last_ts[32];
    int r;
    if (!ev || !obj)
        return -EINVAL;
    if (ev->closing)
        return -ESHUTDOWN;
    if ((r = check_field(obj->api_version, true)) < 0 || (r = check_field(obj->kind, true)) < 0 ||
        (r = check_field(obj->ns, true)) < 0 || (r = check_field(obj->name, true)) < 0 ||
        (r = check_field(obj->uid, false)) < 0 ||
        (r = check_field(obj->resource_version, false)) < 0)
        return r;
    if ((type != EVENTS_NORMAL && type != EVENTS_WARNING) || !valid_reason(reason))
        return -EINVAL;

    expire(ev);
    bool ok = false;
    r = take_token(ev, obj, type, reason, &ok);
    if (r < 0)
        return r;
    if (!ok) {
        dropped(ev, EVENTS_DROP_RATE_LIMITED, obj, reason);
        return VMG_ETHROTTLED;
    }

    events_message(msg, message);
    vmg_rfc3339(ev->wall_us(ev->clock_data), last_ts, sizeof(last_ts));
    const char *f[] = {obj->api_version, obj->kind,
                       obj->ns,          obj->name,
                       vmg_nz(obj->uid), type == EVENTS_WARNING ? "Warning" : "Normal",
                       reason,           msg};
    char *key = make_key(f, 8);
    if (!key)
        return -ENOMEM;
    uint64_t h = fnv1a(key), now = now_ms(ev);
    struct entry *e = (struct entry *)lru_get(&ev->recent, key, h, now);
    if (e && now - e->last_ms <= ev->window_ms) {
        free(key);
        e->count++;
        e->last_ms = now;
        ev->st.recorded++;
        ev->st.aggregated++;
        if (e->queued) /* not sent yet: it carries the new count */
            return bump(e->queued->event, e->count, last_ts);
        if (ev->pending >= ev->max_pending) {
            dropped(ev, EVENTS_DROP_QUEUE_FULL, obj, reason);
            return -ENOSPC;
        }
        struct write *w = calloc(1, sizeof(*w));
        if (!w)
            return -ENOMEM;
        w->event = build_event(ev, obj, e->name, type, reason, msg, e->first_ts, last_ts, e->count);
        if (!w->event) {
            free(w);
            return -ENOMEM;
        }
        w->kind = W_PATCH;
        w->entry = e;
        snprintf(w->ns, sizeof(w->ns), "%s", obj->ns);
        snprintf(w->name, sizeof(w->name), "%s", e->name);
        e->queued = w;
        enqueue(ev, w);
        return 0;
    }

    /* A new Event (or one whose window passed: forget the old). */
    if (e) {
        lru_unlink(&ev->recent, &e->node);
        evict_entry(ev, &e->node);
        e = NULL;
    }
    if (ev->pending >= ev->max_pending) {
        free(key);
        dropped(ev, EVENTS_DROP_QUEUE_FULL, obj, reason);
        return -ENOSPC;
    }
    e = calloc(1, sizeof(*e));
    struct write *w = calloc(1, sizeof(*w));
    if (!e || !w) {
        free(key);
        free(e);
        free(w);
        return -ENOMEM;
    }
    event_name(ev, obj->name, e->name, sizeof(e->name));
    e->count = 1;
    snprintf(e->first_ts, sizeof(e->first_ts), "%s", last_ts);
    e->last_ms = now;
    w->event = build_event(ev, obj, e->name, type, reason, msg, last_ts, last_ts, 1);
    if (!w->event) {
        free(key);
        free(e);
        free(w);
        return -ENOMEM;
    }
    e->node.key = key;
    e->node.hash = h;
    lru_add(&ev->recent, &e->node, now);
    w->kind = W_CREATE;
    w->entry = e;
    snprintf(w->ns, sizeof(w->ns), "%s", obj->ns);
    snprintf(w->name, sizeof(w->name), "%s", e->name);
    e->queued = w;
    ev->st.recorded++;
    enqueue(ev, w);
    return 0;
}

int events_recordf(events *ev, const struct events_object *obj, enum events_type type,
                   const char *reason, const char *fmt, ...)
{
    va_list ap;
    char small[1024];
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    if ((size_t)n < sizeof(small))
        return events_record(ev, obj, type, reason, small);
    size_t len = (size_t)n + 1 > FORMAT_MAX ? FORMAT_MAX : (size_t)n + 1;
    char *big = malloc(len);
    if (!big)
        return -ENOMEM;
    va_start(ap, fmt);
    vsnprintf(big, len, fmt, ap);
    va_end(ap);
    int r = events_record(ev, obj, type, reason, big);
    free(big);
    return r;
}

/* Sending. */

static void on_done(void *data, int err, unsigned retry_after_s, const char *msg);

/* The involved object of a write, for logs and on_drop. */
static void write_object(const struct write *w, struct events_object *obj, const char **reason)
{
    const cJSON *io = cJSON_GetObjectItemCaseSensitive(w->event, "involvedObject");
#define S(o, k) (cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k)))
    obj->api_version = vmg_nz(S(io, "apiVersion"));
    obj->kind = vmg_nz(S(io, "kind"));
    obj->ns = vmg_nz(S(io, "namespace"));
    obj->name = vmg_nz(S(io, "name"));
    obj->uid = vmg_nz(S(io, "uid"));
    obj->resource_version = vmg_nz(S(io, "resourceVersion"));
    *reason = vmg_nz(S(w->event, "reason"));
#undef S
}

/* Pops the head (done with, whatever the outcome). */
static void pop_head(struct events *ev)
{
    struct write *w = head_write(ev);
    lq_remove(&w->link);
    ev->pending--;
    free_write(w);
}

static void fail_head(struct events *ev, int err, const char *msg)
{
    struct write *w = head_write(ev);
    struct events_object obj;
    const char *reason;
    write_object(w, &obj, &reason);
    vmg_log_kv(VMG_LOG_WARN, LOGGER, obj.ns, obj.name, "event dropped", "reason", reason, "event",
               w->name, "error", vmg_strerror(err), "detail", msg ? msg : "", (const char *)NULL);
    dropped(ev, EVENTS_DROP_FAILED, &obj, reason);
    pop_head(ev);
}

/* Starts the head's request. */
static void send_head(struct events *ev)
{
    struct write *w = head_write(ev);
    cJSON *patch = NULL;
    struct op *op = malloc(sizeof(*op));
    int r;
    if (!op) {
        fail_head(ev, -ENOMEM, "out of memory");
        return;
    }
    op->ev = ev;
    ev->op = op;
    w->attempts++;
    if (w->entry) { /* sent: later repeats need a write of their own */
        if (w->entry->queued == w)
            w->entry->queued = NULL;
        w->entry = NULL;
    }
    if (w->kind == W_CREATE) {
        r = ev->io->create(ev->io_ctx, w->ns, w->event, ev->timeout_ms, on_done, op, &ev->req);
    } else {
        patch = cJSON_CreateObject();
        cJSON *c = cJSON_GetObjectItemCaseSensitive(w->event, "count");
        cJSON *t = cJSON_GetObjectItemCaseSensitive(w->event, "lastTimestamp");
        if (!patch || !cJSON_AddItemToObject(patch, "count", cJSON_Duplicate(c, 0)) ||
            !cJSON_AddItemToObject(patch, "lastTimestamp", cJSON_Duplicate(t, 0)))
            r = -ENOMEM;
        else
            r = ev->io->patch(ev->io_ctx, w->ns, w->name, patch, ev->timeout_ms, on_done, op,
                              &ev->req);
        cJSON_Delete(patch);
    }
    if (r < 0) {
        ev->op = NULL;
        ev->req = NULL;
        free(op);
        fail_head(ev, r, "could not start the request");
    }
}

static bool retriable(int err)
{
    return err == VMG_ETHROTTLED || err == VMG_EHTTP || err == VMG_ETRANSPORT ||
           err == -ETIMEDOUT || err == -EAGAIN || err == VMG_ECONFLICT;
}

static void on_done(void *data, int err, unsigned retry_after_s, const char *msg)
{
    struct op *op = data;
    struct events *ev = op->ev;
    free(op);
    if (!ev)
        return;
    ev->op = NULL;
    ev->req = NULL;
    struct write *w = head_write(ev);
    if (!err) {
        if (w->kind == W_CREATE)
            ev->st.created++;
        else
            ev->st.patched++;
        pop_head(ev);
    } else if (!w->switched && ((w->kind == W_PATCH && err == VMG_ENOTFOUND) ||
                                (w->kind == W_CREATE && err == VMG_ECONFLICT))) {
        /* The Event is gone (TTL): create it again with the count; or it
         * exists already (an earlier try landed): patch it. At once. */
        w->switched = true;
        w->kind = w->kind == W_PATCH ? W_CREATE : W_PATCH;
        w->attempts--;
        w->not_before = 0;
    } else if (retriable(err) && w->attempts < ev->max_attempts) {
        uint64_t delay = ev->retry_ms << (w->attempts - 1);
        if (retry_after_s) {
            delay = (uint64_t)retry_after_s * 1000u;
            if (delay > EVENTS_MAX_RETRY_AFTER_MS)
                delay = EVENTS_MAX_RETRY_AFTER_MS;
        }
        w->not_before = now_ms(ev) + delay;
        ev->st.retries++;
    } else {
        fail_head(ev, err, msg);
    }
    if (!ev->closing)
        arm(ev);
}

/* Sends the head when due; calls a flush callback when all is done. */
static void pump(struct events *ev)
{
    if (ev->closing)
        return;
    if (!ev->op && head_write(ev) && now_ms(ev) >= head_write(ev)->not_before)
        send_head(ev);
    if (ev->flush_due && !head_write(ev) && !ev->op) {
        ev->flush_due = false;
        void (*cb)(void *) = ev->flush_cb;
        ev->flush_cb = NULL;
        if (cb)
            cb(ev->flush_data);
    }
}

static void on_timer(uv_timer_t *t)
{
    struct events *ev = t->data;
    pump(ev);
    if (!ev->closing)
        arm(ev);
}

/* The timer fires when the head may be sent (at once, from the loop, for a
 * new write) or a flush is due. */
static void arm(struct events *ev)
{
    uint64_t now = now_ms(ev);
    if (ev->closing)
        return;
    if (!ev->op && head_write(ev)) {
        uint64_t at = head_write(ev)->not_before;
        uv_timer_start(&ev->timer, on_timer, at > now ? at - now : 0, 0);
    } else if (ev->flush_due && !head_write(ev) && !ev->op) {
        uv_timer_start(&ev->timer, on_timer, 0, 0);
    } else {
        uv_timer_stop(&ev->timer);
    }
}

void events_poll(events *ev)
{
    pump(ev);
    if (!ev->closing)
        arm(ev);
}

int events_flush(events *ev, void (*done)(void *data), void *data)
{
    if (ev->closing)
        return -ESHUTDOWN;
    ev->flush_due = true;
    ev->flush_cb = done;
    ev->flush_data = data;
    arm(ev);
    return 0;
}

void events_get_stats(const events *ev, struct events_stats *ret)
{
    *ret = ev->st;
    ret->cached = ev->recent.count;
    ret->buckets = ev->buckets.count;
    ret->pending = ev->pending;
}

size_t events_forget(events *ev, const char *ns, const char *name)
{
    if (!ev || !ns || !name)
        return 0;
    return lru_forget(&ev->recent, ns, name) + lru_forget(&ev->buckets, ns, name);
}

static void on_closed(uv_handle_t *h)
{
    struct events *ev = h->data;
    void (*closed)(void *) = ev->closed;
    void *data = ev->closed_data;
    free(ev);
    if (closed)
        closed(data);
}

void events_close(events *ev, void (*closed)(void *data), void *data)
{
    if (!ev || ev->closing)
        return;
    ev->closing = true;
    ev->closed = closed;
    ev->closed_data = data;
    if (ev->op) {
        struct op *op = ev->op;
        void *req = ev->req;
        ev->op = NULL;
        ev->req = NULL;
        op->ev = NULL;
        ev->io->cancel(ev->io_ctx, req);
    }
    while (head_write(ev))
        pop_head(ev);
    lru_clear(&ev->recent);
    lru_clear(&ev->buckets);
    uv_timer_stop(&ev->timer);
    uv_close((uv_handle_t *)&ev->timer, on_closed);
}

/* The io over kube/kube. */

struct kreq {
    events_io_done done;
    void *data;
};

static void kube_done(void *data, const struct kube_result *res)
{
    struct kreq *k = data;
    events_io_done done = k->done;
    void *d = k->data;
    free(k);
    done(d, res->err, res->retry_after_s, res->err ? res->message : NULL);
}

static int kube_send(void *ctx, const char *method, const char *ns, const char *name,
                     const char *content_type, const cJSON *body, uint64_t timeout_ms,
                     events_io_done done, void *data, void **ret_req)
{
    char path[KUBE_PATH_MAX];
    int r = kube_path(path, sizeof(path), "", "v1", ns, "events", name, NULL);
    if (r < 0)
        return r;
    struct kreq *k = malloc(sizeof(*k));
    if (!k)
        return -ENOMEM;
    k->done = done;
    k->data = data;
    kube_req *req = NULL;
    r = kube_send_once(ctx, method, path, content_type, body, timeout_ms, kube_done, k, &req);
    if (r < 0) {
        free(k);
        return r;
    }
    *ret_req = req;
    return 0;
}

static int kube_io_create(void *ctx, const char *ns, const cJSON *event, uint64_t timeout_ms,
                          events_io_done done, void *data, void **ret_req)
{
    return kube_send(ctx, "POST", ns, NULL, "application/json", event, timeout_ms, done, data,
                     ret_req);
}

static int kube_io_patch(void *ctx, const char *ns, const char *name, const cJSON *patch,
                         uint64_t timeout_ms, events_io_done done, void *data, void **ret_req)
{
    return kube_send(ctx, "PATCH", ns, name, "application/merge-patch+json", patch, timeout_ms,
                     done, data, ret_req);
}

static void kube_io_cancel(void *ctx, void *req)
{
    (void)ctx;
    kube_cancel(req);
}

const struct events_io events_kube_io = {
    .create = kube_io_create,
    .patch = kube_io_patch,
    .cancel = kube_io_cancel,
};
