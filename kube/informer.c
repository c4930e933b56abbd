/* informer.c: list + watch into a hash table of decoded objects.
 *
 * State: the informer is listing (a kube_list in flight), watching (a
 * kube_watch in flight), waiting (the retry timer will list or watch), or
 * closing. Relist diffing marks every entry a list sees with the list's
 * generation; at the end of the list, entries of an older generation are
 * the deleted ones. */
#include "kube/informer.h"

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/backoff.h"
#include "lib/err.h"

#define INITIAL_BUCKETS 64u
#define SHORT_WATCH_MS 1000u   /* a watch ending sooner, with no event, counts as failed */
#define STABLE_WATCH_MS 10000u /* a watch lasting this long resets the backoff */
#define WATCH_TIMEOUT_MARGIN_S 30u

/* ---- the informer ---- */

struct ent {
    struct ent *next;
    uint32_t hash;
    uint32_t gen; /* the list that last saw it */
    void *obj;
    char key[];
};

enum state { ST_IDLE = 0, ST_LISTING, ST_WATCHING, ST_WAITING };
enum next { NEXT_LIST = 0, NEXT_WATCH };

struct informer {
    uv_loop_t *loop;
    kube_client *kc;
    const struct informer_type *type;
    struct informer_handlers h;
    void (*on_note)(void *data, const struct informer_note *n);
    void *note_data;
    char list_path[KUBE_PATH_MAX + 1];
    char watch_base[KUBE_PATH_MAX + 1];
    unsigned page_size, watch_min_s, watch_max_s;
    unsigned backoff_base_ms, backoff_max_ms;
    uint64_t resync_ms;
    size_t max_objects;

    struct ent **buckets;
    size_t nbuckets, count, obj_bytes, key_bytes;
    /* The entries the current list has seen (and the watch after it has
     * kept): what max_objects bounds. While a list replaces another, the
     * entries only the one before saw are counted apart, in count, until
     * list_end: a list is not refused room that they hold. count stays
     * under twice max_objects however many lists fail; a list after a
     * failed one that had added objects may meet that bound and leave an
     * object out (a BAD_OBJECT note) until the next list. */
    size_t current;
    uint32_t gen;
    uint32_t seed;
    uint32_t rnd;

    char rv[INFORMER_RV_MAX + 1];
    char list_rv[INFORMER_RV_MAX + 1];
    size_t added, updated, deleted; /* in the current list */
    bool first_page;

    enum state state;
    enum next next;
    kube_req *req;
    unsigned failures; /* consecutive, for the backoff */
    unsigned gones;    /* consecutive 410s, with no watch event or stable watch between */
    bool rewatch;      /* the watch is being canceled to start another */
    enum informer_list_mode mode;
    bool streaming; /* a streaming list's initial events are arriving */
    bool no_stream; /* the server refused a streaming list: list in pages */
    bool synced, started, closing;
    uint64_t watch_start_ms;
    size_t watch_events;
    struct kube_status watch_status; /* of an ERROR event that ended the watch */

    uv_timer_t retry_timer, resync_timer;
    int handles_open;
    void (*closed)(void *data);
    void *closed_data;

    struct informer_stats stats;
};

static uint32_t hash_key(uint32_t seed, const char *s)
{
    uint64_t h = 1469598103934665603ull ^ seed;

    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    h ^= h >> 29;
    return (uint32_t)(h ^ (h >> 32));
}

static struct ent *lookup(const struct informer *inf, const char *key, uint32_t h,
                          struct ent ***ret_link)
{
    struct ent **link, *e;

    if (!inf->nbuckets)
        return NULL;
    link = &inf->buckets[h & (inf->nbuckets - 1)];
    for (e = *link; e; link = &e->next, e = *link) {
        if (e->hash == h && strcmp(e->key, key) == 0) {
            if (ret_link)
                *ret_link = link;
            return e;
        }
    }
    return NULL;
}

static int grow(struct informer *inf)
{
    size_t n = inf->nbuckets ? inf->nbuckets * 2 : INITIAL_BUCKETS;
    struct ent **b = calloc(n, sizeof(*b));

    if (!b)
        return -ENOMEM;
    for (size_t i = 0; i < inf->nbuckets; i++) {
        struct ent *e = inf->buckets[i], *next;

        for (; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    free(inf->buckets);
    inf->buckets = b;
    inf->nbuckets = n;
    return 0;
}

static size_t footprint(const struct informer *inf, const void *obj)
{
    return inf->type->footprint ? inf->type->footprint(obj) : 0;
}

static void note(struct informer *inf, struct informer_note *n)
{
    if (!n->op)
        n->op = "";
    if (!n->reason)
        n->reason = "";
    if (!n->message)
        n->message = "";
    if (!n->rv)
        n->rv = inf->rv;
    if (!n->key)
        n->key = "";
    if (inf->on_note)
        inf->on_note(inf->note_data, n);
}

static void note_bad(struct informer *inf, const char *key, int err, const char *msg)
{
    struct informer_note n = {
        .kind = INFORMER_NOTE_BAD_OBJECT, .err = err, .key = key, .message = msg};

    note(inf, &n);
}

/* remove_ent unlinks e (found through link), notifies the delete and frees
 * it. */
static void remove_ent(struct informer *inf, struct ent **link, struct ent *e)
{
    *link = e->next;
    inf->count--;
    if (e->gen == inf->gen)
        inf->current--;
    inf->obj_bytes -= footprint(inf, e->obj);
    inf->key_bytes -= sizeof(*e) + strlen(e->key) + 1;
    if (inf->h.on_delete)
        inf->h.on_delete(inf->h.data, e->key, e->obj);
    inf->type->free(e->obj);
    free(e);
}

static bool same_version(const struct informer *inf, const void *a, const void *b)
{
    const char *ra, *rb;

    if (!inf->type->resource_version)
        return false;
    ra = inf->type->resource_version(a);
    rb = inf->type->resource_version(b);
    return ra && rb && *ra && strcmp(ra, rb) == 0;
}

/* upsert stores obj (taken over) under key and notifies. Returns 1 for an
 * add, 2 for an update, 0 when nothing changed, or a negative code (obj is
 * freed then). */
static int upsert(struct informer *inf, const char *key, void *obj)
{
    uint32_t h = hash_key(inf->seed, key);
    struct ent *e = lookup(inf, key, h, NULL);
    size_t klen;
    void *old;

    if (e) {
        if (e->gen != inf->gen) {
            /* Seen again by a list with no room left: left to list_end. */
            if (inf->current >= inf->max_objects) {
                inf->type->free(obj);
                return -ENOSPC;
            }
            inf->current++;
        }
        e->gen = inf->gen;
        if (same_version(inf, e->obj, obj)) {
            inf->type->free(obj);
            return 0;
        }
        old = e->obj;
        e->obj = obj;
        inf->obj_bytes += footprint(inf, obj);
        inf->obj_bytes -= footprint(inf, old);
        if (inf->h.on_update)
            inf->h.on_update(inf->h.data, e->key, old, obj);
        inf->type->free(old);
        return 2;
    }
    if (inf->current >= inf->max_objects || inf->count >= 2 * inf->max_objects) {
        inf->type->free(obj);
        return -ENOSPC;
    }
    if (inf->count >= inf->nbuckets && grow(inf) < 0) {
        inf->type->free(obj);
        return -ENOMEM;
    }
    klen = strlen(key);
    e = malloc(sizeof(*e) + klen + 1);
    if (!e) {
        inf->type->free(obj);
        return -ENOMEM;
    }
    memcpy(e->key, key, klen + 1);
    e->hash = h;
    e->gen = inf->gen;
    e->obj = obj;
    e->next = inf->buckets[h & (inf->nbuckets - 1)];
    inf->buckets[h & (inf->nbuckets - 1)] = e;
    inf->count++;
    inf->current++;
    inf->obj_bytes += footprint(inf, obj);
    inf->key_bytes += sizeof(*e) + klen + 1;
    if (inf->h.on_add)
        inf->h.on_add(inf->h.data, e->key, obj);
    return 1;
}

/* drop removes key from the cache, notifying its delete; 1 if it was there. */
static int drop(struct informer *inf, const char *key)
{
    struct ent **link, *e = lookup(inf, key, hash_key(inf->seed, key), &link);

    if (!e)
        return 0;
    remove_ent(inf, link, e);
    return 1;
}

int informer_key_of(const cJSON *obj, char *buf, size_t len)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(meta, "namespace");
    int n;

    if (!cJSON_IsString(name) || !name->valuestring[0])
        return VMG_EPARSE;
    if (cJSON_IsString(ns) && ns->valuestring[0])
        n = snprintf(buf, len, "%s/%s", ns->valuestring, name->valuestring);
    else
        n = snprintf(buf, len, "%s", name->valuestring);
    if (n < 0 || (size_t)n >= len || (size_t)n > INFORMER_KEY_MAX) {
        if (len)
            buf[0] = '\0';
        return VMG_EPARSE;
    }
    return 0;
}

static const char *rv_of(const cJSON *obj)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");

    return cJSON_IsString(rv) ? rv->valuestring : "";
}

static void set_rv(char *dst, const char *rv)
{
    size_t n = strlen(rv);

    if (n == 0 || n > INFORMER_RV_MAX)
        return;
    memcpy(dst, rv, n + 1);
}

/* apply_object decodes obj and stores it (or drops its key when it cannot
 * be decoded). Returns what upsert returns, or a negative code: -ENOMEM
 * when memory ran out, and then the cache is as it was (the object is not
 * at fault: its key stays, and the caller must not count it applied). */
static int apply_object(struct informer *inf, const cJSON *obj)
{
    char key[INFORMER_KEY_MAX + 1], msg[256];
    void *dec = NULL;
    int r;

    if (informer_key_of(obj, key, sizeof(key)) < 0) {
        note_bad(inf, "", VMG_EPARSE, "an object without a usable metadata.name");
        return VMG_EPARSE;
    }
    msg[0] = '\0';
    r = inf->type->decode(obj, &dec, msg, sizeof(msg));
    if (r == -ENOMEM)
        return r;
    if (r < 0) {
        note_bad(inf, key, r, msg[0] ? msg : vmg_strerror(r));
        if (drop(inf, key))
            inf->deleted++;
        return r;
    }
    r = upsert(inf, key, dec);
    if (r < 0 && r != -ENOMEM)
        note_bad(inf, key, r, vmg_strerror(r));
    return r;
}

/* ---- lists ---- */

static void list_begin(struct informer *inf)
{
    inf->gen++;
    inf->current = 0;
    inf->added = inf->updated = inf->deleted = 0;
    inf->first_page = true;
    inf->list_rv[0] = '\0';
}

static int list_page(struct informer *inf, const cJSON *page)
{
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(page, "items"), *it;

    if (inf->first_page) {
        set_rv(inf->list_rv, rv_of(page));
        inf->first_page = false;
    }
    cJSON_ArrayForEach(it, items)
    {
        int r = apply_object(inf, it);

        if (r == 1)
            inf->added++;
        else if (r == 2)
            inf->updated++;
        else if (r == -ENOMEM)
            return r;
    }
    return 0;
}

/* list_end deletes the entries the list did not see. */
static void list_end(struct informer *inf)
{
    for (size_t i = 0; i < inf->nbuckets; i++) {
        struct ent **link = &inf->buckets[i], *e;

        while ((e = *link) != NULL) {
            if (e->gen != inf->gen) {
                remove_ent(inf, link, e);
                inf->deleted++;
            } else {
                link = &e->next;
            }
        }
    }
    if (inf->list_rv[0])
        memcpy(inf->rv, inf->list_rv, sizeof(inf->rv));
    inf->stats.lists++;
}

/* ---- watch events ---- */

static void start_list(struct informer *inf);
static void start_watch(struct informer *inf);
static void list_finished(struct informer *inf, const char *op);

static const struct {
    const char *name;
    enum informer_event_type type;
} event_types[] = {
    {"ADDED", INFORMER_EV_ADDED},     {"MODIFIED", INFORMER_EV_MODIFIED},
    {"DELETED", INFORMER_EV_DELETED}, {"BOOKMARK", INFORMER_EV_BOOKMARK},
    {"ERROR", INFORMER_EV_ERROR},
};

int informer_parse_event(const char *line, size_t len, struct informer_event *ret)
{
    cJSON *root;
    const cJSON *type, *obj;
    enum informer_event_type t = 0;

    if (!line || !ret)
        return -EINVAL;
    root = cJSON_ParseWithLength(line, len);
    if (!root)
        return VMG_EPARSE;
    type = cJSON_GetObjectItemCaseSensitive(root, "type");
    obj = cJSON_GetObjectItemCaseSensitive(root, "object");
    if (cJSON_IsString(type)) {
        for (size_t i = 0; i < sizeof(event_types) / sizeof(event_types[0]); i++)
            if (strcmp(type->valuestring, event_types[i].name) == 0)
                t = event_types[i].type;
    }
    if (!t || !cJSON_IsObject(obj)) {
        cJSON_Delete(root);
        return VMG_EPARSE;
    }
    memset(ret, 0, sizeof(*ret));
    ret->type = t;
    ret->root = root;
    ret->object = obj;
    ret->rv = t == INFORMER_EV_ERROR ? "" : rv_of(obj);
    if (t == INFORMER_EV_BOOKMARK) {
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        const cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
        const cJSON *end = cJSON_GetObjectItemCaseSensitive(ann, "k8s.io/initial-events-end");

        ret->initial_end = cJSON_IsString(end) && strcmp(end->valuestring, "true") == 0;
    }
    if (t == INFORMER_EV_ERROR)
        kube_status_decode(obj, 0, &ret->status);
    return 0;
}

void informer_event_clear(struct informer_event *ev)
{
    if (!ev)
        return;
    cJSON_Delete(ev->root);
    ev->root = NULL;
    ev->object = NULL;
}

/* apply_line handles one watch line. Returns 0, or the code that ends the
 * watch: VMG_EGONE for an expired resourceVersion, another error for an
 * ERROR event, VMG_EPARSE for a line that is not an event. */
static int apply_line(struct informer *inf, const char *line, size_t len, struct kube_status *st)
{
    struct informer_event ev;
    int r;

    if (len == 0)
        return 0;
    r = informer_parse_event(line, len, &ev);
    if (r < 0)
        return r;
    inf->stats.events++;
    switch (ev.type) {
    case INFORMER_EV_ADDED:
    case INFORMER_EV_MODIFIED:
        inf->watch_events++;
        r = apply_object(inf, ev.object);
        if (r == -ENOMEM) {
            /* Not applied: the version stays before it, and ending the
             * watch makes the next one (or the next list) deliver it
             * again. */
            break;
        }
        if (inf->streaming) {
            /* Part of a list: counted, and the version comes at its end. */
            if (r == 1)
                inf->added++;
            else if (r == 2)
                inf->updated++;
        } else {
            set_rv(inf->rv, ev.rv);
        }
        r = 0;
        break;
    case INFORMER_EV_DELETED: {
        char key[INFORMER_KEY_MAX + 1];

        inf->watch_events++;
        if (informer_key_of(ev.object, key, sizeof(key)) == 0)
            drop(inf, key);
        if (!inf->streaming)
            set_rv(inf->rv, ev.rv);
        r = 0;
        break;
    }
    case INFORMER_EV_BOOKMARK:
        if (inf->streaming && ev.initial_end) {
            /* The streaming list is complete; the watch goes on. */
            set_rv(inf->list_rv, ev.rv);
            inf->streaming = false;
            list_finished(inf, "stream");
            /* Its note may have closed the informer (and this watch). */
            if (inf->closing) {
                r = VMG_ECANCELED;
                break;
            }
            inf->state = ST_WATCHING;
            inf->watch_start_ms = uv_now(inf->loop);
            inf->watch_events = 0;
            {
                struct informer_note n = {.kind = INFORMER_NOTE_WATCHING, .op = "watch"};

                note(inf, &n);
            }
        } else if (!inf->streaming) {
            set_rv(inf->rv, ev.rv);
        }
        r = 0;
        break;
    case INFORMER_EV_ERROR:
        if (st)
            *st = ev.status;
        r = ev.status.code == 410 ? VMG_EGONE : ev.status.err ? ev.status.err : VMG_EHTTP;
        break;
    }
    informer_event_clear(&ev);
    return r;
}

/* ---- the machine ---- */

static void on_retry_timer(uv_timer_t *t)
{
    struct informer *inf = t->data;

    if (inf->closing || inf->state != ST_WAITING)
        return;
    if (inf->next == NEXT_WATCH)
        start_watch(inf);
    else
        start_list(inf);
}

/* wait_then schedules the next list or watch after delay_ms; nothing once
 * closing (a note before it may have closed the informer). */
static void wait_then(struct informer *inf, enum next next, uint64_t delay_ms)
{
    if (inf->closing)
        return;
    inf->state = ST_WAITING;
    inf->next = next;
    uv_timer_start(&inf->retry_timer, on_retry_timer, delay_ms, 0);
}

static uint64_t next_backoff(struct informer *inf, unsigned retry_after_s)
{
    uint64_t d = kube_backoff_ms(inf->backoff_base_ms, inf->backoff_max_ms, inf->failures, 0.25,
                                 vmg_xorshift32(&inf->rnd));

    if (inf->failures < 32)
        inf->failures++;
    if (retry_after_s && d < retry_after_s * 1000ull)
        d = retry_after_s * 1000ull;
    return d;
}

static void note_error(struct informer *inf, const char *op, const struct kube_result *res,
                       uint64_t retry_ms)
{
    struct informer_note n = {.kind = INFORMER_NOTE_ERROR,
                              .op = op,
                              .err = res->err,
                              .status = res->code,
                              .reason = res->reason,
                              .message = res->message,
                              .retry_ms = retry_ms};

    inf->stats.errors++;
    note(inf, &n);
}

/* stopped handles a list or watch canceled by someone else than the
 * informer (its client was closed): the informer stops, reporting it. */
static bool stopped(struct informer *inf, const char *op, const struct kube_result *res)
{
    if (res->err != VMG_ECANCELED)
        return false;
    inf->streaming = false;
    inf->state = ST_IDLE;
    note_error(inf, op, res, 0);
    return true;
}

static int on_page(void *data, const cJSON *page)
{
    struct informer *inf = data;

    return list_page(inf, page);
}

/* list_finished ends a list (paged or streamed): it deletes what the list
 * did not hold and reports. */
static void list_finished(struct informer *inf, const char *op)
{
    struct informer_note n = {0};

    list_end(inf);
    /* A list that 410s made, back to back, keeps the backoff growing:
     * a server that expires every watch at once (or a proxy answering 410)
     * would otherwise be listed in full about every base delay. */
    if (inf->gones == 0)
        inf->failures = 0;
    n.kind = INFORMER_NOTE_LISTED;
    n.op = op;
    n.count = inf->count;
    n.added = inf->added;
    n.updated = inf->updated;
    n.deleted = inf->deleted;
    note(inf, &n);
    if (inf->closing)
        return; /* closed by the note: no notification after that */
    if (!inf->synced) {
        inf->synced = true;
        memset(&n, 0, sizeof(n));
        n.kind = INFORMER_NOTE_SYNCED;
        n.op = op;
        n.count = inf->count;
        note(inf, &n);
    }
}

static void on_list_done(void *data, const struct kube_result *res)
{
    struct informer *inf = data;
    uint64_t d;

    inf->req = NULL;
    if (inf->closing || stopped(inf, "list", res))
        return;
    if (res->err == 0) {
        list_finished(inf, "list");
#ifdef __GLIBC__
        /* The pages' JSON trees were freed between the objects kept from
         * them: give the emptied heap pages back (a third of the RSS of a
         * freshly listed cache otherwise). */
        malloc_trim(0);
#endif
        if (!inf->closing)
            start_watch(inf);
        return;
    }
    d = next_backoff(inf, res->retry_after_s);
    note_error(inf, "list", res, d);
    if (!inf->closing)
        wait_then(inf, NEXT_LIST, d);
}

static void start_stream(struct informer *inf);

/* start_failed is what follows a request that could not even be sent: a
 * note and a retry of next after a backoff. */
static void start_failed(struct informer *inf, const char *op, enum next next, int r)
{
    struct kube_result res = {.err = r, .message = vmg_strerror(r), .reason = ""};
    uint64_t d = next_backoff(inf, 0);

    inf->req = NULL;
    note_error(inf, op, &res, d);
    wait_then(inf, next, d);
}

/* ahead puts the request just made (r: what making it returned) before
 * the writes that wait for the client's rate limit, after those hurried
 * before it (kube_hurry): every pass plans from the cache, and writers
 * that hurry theirs (a status's headline, a finalizer) would otherwise
 * keep a list or a watch waiting for as long as they write. Returns r. */
static int ahead(struct informer *inf, int r)
{
    if (r == 0 && inf->req)
        (void)kube_hurry(inf->req);
    return r;
}

static void start_list(struct informer *inf)
{
    int r;

    if (inf->mode != INFORMER_LIST_PAGED && !inf->no_stream) {
        start_stream(inf);
        return;
    }
    list_begin(inf);
    inf->state = ST_LISTING;
    r = ahead(inf, kube_list(inf->kc, inf->list_path, inf->page_size, on_page, on_list_done, inf,
                             &inf->req));
    if (r < 0)
        start_failed(inf, "list", NEXT_LIST, r);
}

static int on_watch_line(void *data, const char *line, size_t len)
{
    struct informer *inf = data;
    bool listing = inf->streaming;
    int r;

    r = apply_line(inf, line, len, &inf->watch_status);
    /* An event of the watch proper (not one of a streaming list's, nor
     * the bookmark that ends them) ends a run of 410s. */
    if (r == 0 && len > 0 && !listing)
        inf->gones = 0;
    return r;
}

/* stream_failed handles the end of a streaming list before its last
 * initial event: a server that refuses the parameters is listed in pages
 * from now on (in the AUTO mode); anything else is a failed list. */
static void stream_failed(struct informer *inf, const struct kube_result *res)
{
    struct kube_result r = *res;
    uint64_t d = 0;

    if (stopped(inf, "stream", res))
        return;
    inf->streaming = false;
    if (r.err == 0) {
        r.err = VMG_EPARSE;
        r.message = "the watch ended before its initial events did";
    }
    if ((r.err == -EINVAL || r.err == -EOPNOTSUPP) && inf->mode == INFORMER_LIST_AUTO) {
        inf->no_stream = true;
        note_error(inf, "stream", &r, 0);
        if (!inf->closing)
            start_list(inf);
        return;
    }
    d = next_backoff(inf, r.retry_after_s);
    if (inf->watch_status.code) {
        r.code = inf->watch_status.code;
        r.reason = inf->watch_status.reason;
        r.message = inf->watch_status.message;
    }
    note_error(inf, "stream", &r, d);
    if (!inf->closing)
        wait_then(inf, NEXT_LIST, d);
}

static void on_watch_done(void *data, const struct kube_result *res)
{
    struct informer *inf = data;
    const struct kube_status *st = &inf->watch_status;
    uint64_t lasted = uv_now(inf->loop) - inf->watch_start_ms, d;
    struct informer_note n = {.op = "watch", .err = res->err, .events = inf->watch_events};

    inf->req = NULL;
    if (inf->closing)
        return;
    if (inf->streaming) {
        stream_failed(inf, res);
        return;
    }
    if (lasted >= STABLE_WATCH_MS || inf->watch_events > 0) {
        inf->failures = 0;
        inf->gones = 0;
    }
    if (res->err == VMG_ECANCELED && inf->rewatch) {
        inf->rewatch = false;
        start_watch(inf);
        return;
    }
    if (stopped(inf, "watch", res))
        return;
    /* What ended the watch: an ERROR event (its Status), or the response. */
    if (st->code) {
        n.status = st->code;
        n.reason = st->reason;
        n.message = st->message;
    } else {
        n.status = res->err ? res->code : res->status;
        n.reason = res->reason;
        n.message = res->message;
    }
    if (res->err == VMG_EGONE) {
        /* List again at once, unless 410s come back to back. */
        d = inf->gones++ == 0 ? 0 : next_backoff(inf, 0);
        n.kind = INFORMER_NOTE_GONE;
        n.retry_ms = d;
        inf->stats.gone++;
        note(inf, &n);
        /* The note may have closed the informer: nothing may start then. */
        if (inf->closing)
            return;
        if (d == 0)
            start_list(inf);
        else
            wait_then(inf, NEXT_LIST, d);
        return;
    }
    if (res->err == 0) {
        n.kind = INFORMER_NOTE_WATCH_ENDED;
        note(inf, &n);
        if (inf->closing)
            return;
        if (lasted >= SHORT_WATCH_MS || inf->watch_events > 0) {
            start_watch(inf);
            return;
        }
        wait_then(inf, NEXT_WATCH, next_backoff(inf, 0));
        return;
    }
    d = next_backoff(inf, st->retry_after_s > res->retry_after_s ? st->retry_after_s
                                                                 : res->retry_after_s);
    n.kind = INFORMER_NOTE_ERROR;
    n.retry_ms = d;
    inf->stats.errors++;
    note(inf, &n);
    if (!inf->closing)
        wait_then(inf, NEXT_WATCH, d);
}

/* open_watch sends the watch request: from inf->rv, or with stream one
 * that first sends every object (see start_stream). Its timeout is drawn
 * in [watch_min_s, watch_max_s], so that watches do not all end at once. */
static int open_watch(struct informer *inf, bool stream)
{
    char path[KUBE_PATH_MAX + 1], tos[16];
    unsigned span = inf->watch_max_s - inf->watch_min_s;
    unsigned secs = inf->watch_min_s + (span ? vmg_xorshift32(&inf->rnd) % (span + 1) : 0);

    memcpy(path, inf->watch_base, sizeof(path));
    snprintf(tos, sizeof(tos), "%u", secs);
    if (stream ? kube_query_add(path, sizeof(path), "sendInitialEvents", "true") < 0 ||
                     kube_query_add(path, sizeof(path), "resourceVersionMatch", "NotOlderThan") < 0
               : inf->rv[0] && kube_query_add(path, sizeof(path), "resourceVersion", inf->rv) < 0)
        return VMG_ETOOBIG;
    if (kube_query_add(path, sizeof(path), "timeoutSeconds", tos) < 0)
        return VMG_ETOOBIG;
    inf->state = stream ? ST_LISTING : ST_WATCHING;
    if (stream)
        inf->streaming = true;
    inf->watch_start_ms = uv_now(inf->loop);
    inf->watch_events = 0;
    memset(&inf->watch_status, 0, sizeof(inf->watch_status));
    return ahead(inf, kube_watch(inf->kc, path, (secs + WATCH_TIMEOUT_MARGIN_S) * 1000u,
                                 on_watch_line, on_watch_done, inf, &inf->req));
}

static void start_watch(struct informer *inf)
{
    int r = open_watch(inf, false);

    if (r < 0) {
        start_failed(inf, "watch", NEXT_WATCH, r);
        return;
    }
    inf->stats.watches++;
    {
        struct informer_note n = {.kind = INFORMER_NOTE_WATCHING, .op = "watch"};

        note(inf, &n);
    }
}

/* start_stream lists by watching with sendInitialEvents: every object
 * arrives as an ADDED event, then a BOOKMARK marks the end of the list,
 * and the same watch goes on. One object at a time, from the watch cache:
 * faster than pages and without a page's peak of memory. */
static void start_stream(struct informer *inf)
{
    int r;

    list_begin(inf);
    r = open_watch(inf, true);
    if (r < 0) {
        inf->streaming = false;
        start_failed(inf, "stream", NEXT_LIST, r);
        return;
    }
    inf->stats.watches++;
}

static void on_resync(uv_timer_t *t)
{
    struct informer *inf = t->data;

    if (inf->closing || !inf->synced || !inf->h.on_update)
        return;
    for (size_t i = 0; i < inf->nbuckets; i++)
        for (struct ent *e = inf->buckets[i]; e; e = e->next)
            inf->h.on_update(inf->h.data, e->key, e->obj, e->obj);
}

/* ---- the public side ---- */

int informer_new(uv_loop_t *loop, kube_client *client, const struct informer_opts *o,
                 struct informer **ret)
{
    struct informer_opts d;
    struct informer *inf;
    int n;

    if (!loop || !ret)
        return -EINVAL;
#ifndef VMG_TESTING
    if (!client)
        return -EINVAL;
#endif
    if (o)
        d = *o;
    else
        memset(&d, 0, sizeof(d));
    if (!d.plural || !d.version || !d.type)
        return -EINVAL;
    if (!d.type->decode || !d.type->free)
        return -EINVAL;
    if (!d.watch_min_s)
        d.watch_min_s = INFORMER_DEFAULT_WATCH_MIN_S;
    if (!d.watch_max_s)
        d.watch_max_s = d.watch_min_s > INFORMER_DEFAULT_WATCH_MAX_S ? d.watch_min_s
                                                                     : INFORMER_DEFAULT_WATCH_MAX_S;
    if (d.watch_max_s < d.watch_min_s || d.watch_max_s > 24 * 3600)
        return -EINVAL;
    inf = calloc(1, sizeof(*inf));
    if (!inf)
        return -ENOMEM;
    inf->loop = loop;
    inf->kc = client;
    inf->type = d.type;
    inf->h = d.handlers;
    inf->on_note = d.on_note;
    inf->note_data = d.note_data;
    inf->page_size = d.page_size ? d.page_size : INFORMER_DEFAULT_PAGE;
    inf->watch_min_s = d.watch_min_s;
    inf->watch_max_s = d.watch_max_s;
    inf->backoff_base_ms = d.backoff_base_ms ? d.backoff_base_ms : INFORMER_DEFAULT_BACKOFF_BASE_MS;
    inf->backoff_max_ms = d.backoff_max_ms ? d.backoff_max_ms : INFORMER_DEFAULT_BACKOFF_MAX_MS;
    if (inf->backoff_max_ms < inf->backoff_base_ms)
        inf->backoff_max_ms = inf->backoff_base_ms;
    inf->resync_ms = d.resync_ms;
    if (d.list_mode != INFORMER_LIST_AUTO && d.list_mode != INFORMER_LIST_PAGED &&
        d.list_mode != INFORMER_LIST_STREAM) {
        free(inf);
        return -EINVAL;
    }
    inf->mode = d.list_mode;
    inf->max_objects = d.max_objects ? d.max_objects : INFORMER_DEFAULT_MAX_OBJECTS;
    inf->seed = (uint32_t)uv_hrtime();
    inf->rnd = (uint32_t)(uv_hrtime() ^ ((uint64_t)getpid() << 20)) | 1u;

    n = kube_path(inf->list_path, sizeof(inf->list_path), d.group, d.version, d.ns, d.plural, NULL,
                  NULL);
    if (n < 0)
        goto invalid;
    if (d.label_selector && *d.label_selector &&
        kube_query_add(inf->list_path, sizeof(inf->list_path), "labelSelector", d.label_selector) <
            0)
        goto invalid;
    memcpy(inf->watch_base, inf->list_path, sizeof(inf->watch_base));
    if (kube_query_add(inf->watch_base, sizeof(inf->watch_base), "watch", "1") < 0 ||
        kube_query_add(inf->watch_base, sizeof(inf->watch_base), "allowWatchBookmarks", "true") < 0)
        goto invalid;
    /* Leave room for resourceVersion and timeoutSeconds. */
    if (strlen(inf->watch_base) + INFORMER_RV_MAX + 64 > KUBE_PATH_MAX)
        goto invalid;

    if (uv_timer_init(loop, &inf->retry_timer) < 0)
        goto nomem;
    inf->retry_timer.data = inf;
    inf->handles_open++;
    if (uv_timer_init(loop, &inf->resync_timer) < 0) {
        /* Cannot happen with libuv's timers; free through the close path. */
        informer_close(inf, NULL, NULL);
        return -ENOMEM;
    }
    inf->resync_timer.data = inf;
    inf->handles_open++;
    *ret = inf;
    return 0;
invalid:
    free(inf);
    return -EINVAL;
nomem:
    free(inf);
    return -ENOMEM;
}

int informer_start(struct informer *inf)
{
    if (!inf || inf->closing)
        return -EINVAL;
    if (inf->started)
        return -EALREADY;
    if (!inf->kc)
        return -EINVAL;
    inf->started = true;
    if (inf->resync_ms)
        uv_timer_start(&inf->resync_timer, on_resync, inf->resync_ms, inf->resync_ms);
    start_list(inf);
    return 0;
}

static void free_all(struct informer *inf)
{
    for (size_t i = 0; i < inf->nbuckets; i++) {
        struct ent *e = inf->buckets[i], *next;

        for (; e; e = next) {
            next = e->next;
            inf->type->free(e->obj);
            free(e);
        }
    }
    free(inf->buckets);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct informer *inf = h->data;
    void (*closed)(void *data);
    void *data;

    if (--inf->handles_open > 0)
        return;
    closed = inf->closed;
    data = inf->closed_data;
    free_all(inf);
    free(inf);
    if (closed)
        closed(data);
}

void informer_close(struct informer *inf, void (*closed)(void *data), void *data)
{
    if (!inf || inf->closing)
        return;
    inf->closing = true;
    inf->closed = closed;
    inf->closed_data = data;
    if (inf->req) {
        kube_req *r = inf->req;

        inf->req = NULL;
        kube_cancel(r);
    }
    uv_close((uv_handle_t *)&inf->retry_timer, on_handle_closed);
    if (inf->handles_open > 1)
        uv_close((uv_handle_t *)&inf->resync_timer, on_handle_closed);
}

const void *informer_get(const struct informer *inf, const char *key)
{
    struct ent *e;

    if (!inf || !key)
        return NULL;
    e = lookup(inf, key, hash_key(inf->seed, key), NULL);
    return e ? e->obj : NULL;
}

bool informer_has_synced(const struct informer *inf)
{
    return inf && inf->synced;
}

size_t informer_count(const struct informer *inf)
{
    return inf ? inf->count : 0;
}

const char *informer_resource_version(const struct informer *inf)
{
    return inf ? inf->rv : "";
}

int informer_foreach(const struct informer *inf,
                     int (*fn)(void *data, const char *key, const void *obj), void *data)
{
    if (!inf || !fn)
        return -EINVAL;
    for (size_t i = 0; i < inf->nbuckets; i++) {
        for (struct ent *e = inf->buckets[i]; e; e = e->next) {
            int r = fn(data, e->key, e->obj);

            if (r)
                return r;
        }
    }
    return 0;
}

int informer_rewatch(struct informer *inf)
{
    if (!inf || inf->closing)
        return -EAGAIN;
    if (inf->state == ST_WATCHING && inf->req) {
        inf->rewatch = true;
        kube_cancel(inf->req);
        return 0;
    }
    if (inf->state == ST_WAITING && inf->next == NEXT_WATCH) {
        uv_timer_stop(&inf->retry_timer);
        start_watch(inf);
        return 0;
    }
    return -EAGAIN;
}

void informer_get_stats(const struct informer *inf, struct informer_stats *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (!inf)
        return;
    *ret = inf->stats;
    ret->objects = inf->count;
    ret->bytes = inf->obj_bytes + inf->key_bytes + inf->nbuckets * sizeof(struct ent *);
}

#ifdef VMG_TESTING
void informer_testing_list_begin(struct informer *inf)
{
    list_begin(inf);
}

void informer_testing_stream_begin(struct informer *inf)
{
    list_begin(inf);
    inf->streaming = true;
    inf->state = ST_LISTING;
}

int informer_testing_list_page(struct informer *inf, const cJSON *page)
{
    return list_page(inf, page);
}

void informer_testing_list_end(struct informer *inf)
{
    list_finished(inf, "list");
}

int informer_testing_watch_line(struct informer *inf, const char *line)
{
    return apply_line(inf, line, strlen(line), NULL);
}
#endif
