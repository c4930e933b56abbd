/* informer.h: a watch-backed cache of one kind of Kubernetes object (the
 * objects of all namespaces, or of one), kept current by list + watch.
 *
 * The informer lists the collection, then watches it from the list's
 * resourceVersion with bookmarks, keeping its
 * resourceVersion current from every event and BOOKMARK. When the server
 * ends a watch (timeoutSeconds, 5 to 10 minutes, randomized), it watches
 * again from there. When the resourceVersion has expired (HTTP 410, or an
 * ERROR event with code 410) it lists again and replaces the cache,
 * notifying the differences only: an add for a new key, an update for a key
 * whose resourceVersion changed, a delete for a key the list no longer
 * holds. It lists again at once, and after the backoff below when 410s
 * come back to back (no event and no stable watch between them).
 *
 * Lists come in one of two ways (informer_opts.list_mode). A paged list
 * GETs the collection in pages (limit 500) and then starts a watch. A
 * streaming list is one watch with sendInitialEvents=true: every object
 * comes as an ADDED event, a BOOKMARK annotated k8s.io/initial-events-end
 * ends the list, and the watch goes on from there. kube-apiserver serves
 * it from its watch cache, one object at a time, which is several times
 * faster than pages (whose later pages are read from etcd) and never holds
 * a page of decoded JSON. By default the informer streams, and lists in
 * pages from the first time the server refuses the streaming parameters
 * (servers before 1.32, or with the WatchList feature off).
 *
 * When the server cannot be reached, it retries with backoff (0.8 s
 * doubling to 30 s, with jitter), listing again only if the list had
 * failed; a failing list is retried forever, each failure reported. A
 * watch whose connection died silently fails the same way, in about a
 * minute (the client's TCP keepalive, kube/kube.h), and so does one
 * that stalls, with the client's watch_stall_ms. An event the informer
 * could not apply for want of memory ends the watch (or streaming list)
 * with -ENOMEM, the resourceVersion still that of the last event applied,
 * so that the next watch delivers the event again; the cached object
 * stays.
 *
 * The cache maps a key, "namespace/name" ("name" for cluster-scoped kinds),
 * to one decoded object. It holds at most max_objects objects of the
 * last list and the events after it; an object beyond them is left out
 * (a BAD_OBJECT note, -ENOSPC; a list leaves out its last ones). While a
 * list replaces the cache, the objects only the list before held are kept
 * apart until it ends, and take no room from it: up to twice max_objects
 * then, a bound that a list following a failed one can meet (an object
 * left out, noted, until the next list).
 *
 * What an object is comes from an informer_type: decode from JSON, free,
 * and its resourceVersion; the caller supplies it (a custom resource's
 * type lives beside that resource's struct).
 *
 * Objects are read-only and owned by the informer. Lifetime rule: a pointer
 * from informer_get(), informer_foreach() or a handler stays valid until
 * the informer next changes the cache, which it does only while it handles
 * a list page or a watch event, from its own callbacks on the loop. So a
 * pointer may be used until the caller returns to the loop; it must not be
 * kept across loop iterations (keep the key and look it up again). Handlers
 * run after the cache changed (informer_get already sees the new state);
 * the old object of an update or delete is freed when the handler returns.
 * Handlers are expected only to enqueue keys; they must not call
 * informer_close().
 *
 * Library code: the informer does not log; it reports what happens (lists,
 * watches, relists, errors, objects it could not decode) to on_note.
 * Not thread-safe: everything runs on the loop's thread.
 */
#ifndef VMG_INFORMER_H
#define VMG_INFORMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "kube/kube.h"

#define INFORMER_DEFAULT_PAGE 500u
#define INFORMER_DEFAULT_WATCH_MIN_S 300u
#define INFORMER_DEFAULT_WATCH_MAX_S 600u
#define INFORMER_DEFAULT_BACKOFF_BASE_MS 800u
#define INFORMER_DEFAULT_BACKOFF_MAX_MS 30000u
#define INFORMER_DEFAULT_MAX_OBJECTS (1000u * 1000u)
#define INFORMER_KEY_MAX 320 /* "namespace/name", without the NUL */
#define INFORMER_RV_MAX 128

struct informer;

/* What the cache holds. decode returns 0 and *ret, or a negative code with
 * a message in err; resource_version may be NULL (then every relisted
 * object counts as updated); footprint (may be NULL) gives an object's
 * bytes, for informer_get_stats. */
struct informer_type {
    const char *kind;
    int (*decode)(const cJSON *obj, void **ret, char *err, size_t errlen);
    void (*free)(void *obj);
    const char *(*resource_version)(const void *obj);
    size_t (*footprint)(const void *obj);
};

/* Notifications. key and the objects are valid during the call. */
struct informer_handlers {
    void (*on_add)(void *data, const char *key, const void *obj);
    void (*on_update)(void *data, const char *key, const void *old_obj, const void *new_obj);
    void (*on_delete)(void *data, const char *key, const void *old_obj);
    void *data;
};

enum informer_note_kind {
    INFORMER_NOTE_LISTED = 1,  /* a list finished: count, added/updated/deleted, rv */
    INFORMER_NOTE_SYNCED,      /* the first list finished: count */
    INFORMER_NOTE_WATCHING,    /* a watch was sent: rv */
    INFORMER_NOTE_WATCH_ENDED, /* the server ended a watch: events, rv */
    INFORMER_NOTE_GONE,        /* rv expired (410): listing again; status, message, retry_ms */
    INFORMER_NOTE_ERROR,       /* a list or watch failed: op, err..., retry_ms */
    INFORMER_NOTE_BAD_OBJECT,  /* an object could not be decoded and is left out: key, message */
};

/* What on_note gets; strings are never NULL and valid during the call. */
struct informer_note {
    enum informer_note_kind kind;
    const char *op; /* "list" or "watch" */
    int err;
    long status; /* HTTP status, or the ERROR event's code */
    const char *reason;
    const char *message;
    const char *rv;
    const char *key;
    size_t count, added, updated, deleted, events;
    uint64_t retry_ms; /* ERROR, GONE: when the next attempt comes (GONE: 0, at once) */
};

/* How the informer lists. */
enum informer_list_mode {
    /* A streaming list when the server offers it (kube-apiserver 1.32 and
     * later by default), else pages. */
    INFORMER_LIST_AUTO = 0,
    INFORMER_LIST_PAGED,  /* always pages of page_size */
    INFORMER_LIST_STREAM, /* always a streaming list */
};

/* The options; zero fields take the defaults. */
struct informer_opts {
    /* The collection: group ("" or NULL for core), version, plural
     * (version and plural required). ns NULL or "": all namespaces. All
     * copied. */
    const char *group, *version, *plural, *ns;
    const char *label_selector;       /* NULL: none */
    const struct informer_type *type; /* required */
    struct informer_handlers handlers;
    void (*on_note)(void *data, const struct informer_note *n);
    void *note_data;
    enum informer_list_mode list_mode;
    unsigned page_size;                /* 0: 500 */
    unsigned watch_min_s, watch_max_s; /* timeoutSeconds range; 0: 300, 600 */
    unsigned backoff_base_ms;          /* 0: 800 */
    unsigned backoff_max_ms;           /* 0: 30000 */
    uint64_t resync_ms;                /* 0: no resync */
    size_t max_objects;                /* 0: 1000000; objects a list may hold (see below) */
};

struct informer_stats {
    size_t objects;
    size_t bytes; /* objects (their footprint), keys and the table */
    uint64_t lists, watches, gone, events, errors;
};

/* informer_new makes an informer on loop using client, which must outlive
 * it. Nothing is sent before informer_start(). Returns 0 and *ret, or
 * -EINVAL (bad options or path segments) or -ENOMEM. Under VMG_TESTING,
 * client may be NULL (for the informer_testing_* calls). */
int informer_new(uv_loop_t *loop, kube_client *client, const struct informer_opts *o,
                 struct informer **ret);

/* informer_start begins listing. Returns 0, -EALREADY, or -EINVAL without
 * a client. */
int informer_start(struct informer *inf);

/* informer_close stops the list or watch in flight, closes the timers, and
 * once the loop has run their close callbacks frees every cached object and
 * the informer, then calls closed(data) when not NULL. No notification runs
 * after this call. An on_note handler may call it, except on a BAD_OBJECT
 * note, which comes in the middle of a page or an event (nor may the
 * object handlers). NULL is fine. Close the informer before its client:
 * closing the client first stops a list or watch in flight (the informer
 * notes an ERROR with VMG_ECANCELED), but an informer waiting to retry
 * would send through the freed client when its timer fires. */
void informer_close(struct informer *inf, void (*closed)(void *data), void *data);

/* informer_get returns the object cached under key, or NULL (see the
 * lifetime rule above). */
const void *informer_get(const struct informer *inf, const char *key);

/* informer_has_synced tells whether a first list has filled the cache. */
bool informer_has_synced(const struct informer *inf);

/* informer_count returns the number of cached objects. */
size_t informer_count(const struct informer *inf);

/* informer_resource_version returns the resourceVersion the next watch
 * would start from ("" before the first list). */
const char *informer_resource_version(const struct informer *inf);

/* informer_foreach calls fn for every cached object, in no order, until fn
 * returns nonzero (which it then returns); fn must not change the cache
 * (it may not be called from a handler either). Returns 0 otherwise. */
int informer_foreach(const struct informer *inf,
                     int (*fn)(void *data, const char *key, const void *obj), void *data);

/* informer_rewatch ends the current watch and starts another from the
 * current resourceVersion now (also cutting short a backoff before a
 * watch). Returns 0, or -EAGAIN when the informer is not watching or
 * waiting to watch (listing, not started, closing). */
int informer_rewatch(struct informer *inf);

/* informer_get_stats writes the informer's figures. */
void informer_get_stats(const struct informer *inf, struct informer_stats *ret);

/* ---- watch events ---- */

enum informer_event_type {
    INFORMER_EV_ADDED = 1,
    INFORMER_EV_MODIFIED,
    INFORMER_EV_DELETED,
    INFORMER_EV_BOOKMARK,
    INFORMER_EV_ERROR,
};

struct informer_event {
    enum informer_event_type type;
    cJSON *root;               /* the parsed line; owned (informer_event_clear) */
    const cJSON *object;       /* root's "object" */
    const char *rv;            /* object.metadata.resourceVersion, or "" */
    bool initial_end;          /* a BOOKMARK ending a streaming list's initial events */
    struct kube_status status; /* ERROR: the Status object (status.code 410: expired) */
};

/* informer_parse_event parses one line of a watch stream, {"type": ...,
 * "object": {...}}. Returns 0 and *ret (clear it with
 * informer_event_clear), or VMG_EPARSE (not JSON, unknown type, no object)
 * or -ENOMEM. */
int informer_parse_event(const char *line, size_t len, struct informer_event *ret);
void informer_event_clear(struct informer_event *ev);

/* informer_key_of writes the key of a JSON object ("namespace/name" or
 * "name") to buf. Returns 0, or VMG_EPARSE (no metadata.name, or too long). */
int informer_key_of(const cJSON *obj, char *buf, size_t len);

#ifdef VMG_TESTING
/* Drive the cache without a server: a list is begin, pages, end (which
 * deletes what the pages did not hold); a watch line is applied as if it
 * had come from a watch, returning 0 or the code that would end the watch
 * (VMG_EGONE for an expired resourceVersion). */
void informer_testing_list_begin(struct informer *inf);
int informer_testing_list_page(struct informer *inf, const cJSON *page);
void informer_testing_list_end(struct informer *inf);
/* A streaming list: begin, then watch lines up to the BOOKMARK that ends
 * the initial events. */
void informer_testing_stream_begin(struct informer *inf);
int informer_testing_watch_line(struct informer *inf, const char *line);
#endif

#endif
