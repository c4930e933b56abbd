/* events.h: Kubernetes Events (core/v1) about the objects a controller
 * manages, recorded like client-go's EventRecorder and EventCorrelator.
 *
 * events_record() never blocks and never fails the caller's work: it
 * checks the object's rate limit, aggregates, queues, and returns; writes
 * go out later, from the loop, one at a time (in order, so that the create
 * of an Event comes before its patches).
 *
 *   - Rate limit: a token bucket per involved object (apiVersion, kind,
 *     namespace, name, uid), client-go's spam filter: a burst of 25, then
 *     one event per 5 minutes. Events beyond are dropped and counted (the
 *     on_drop observer, for a metric). The buckets live in an LRU cache.
 *   - Aggregation: the same event (object, type, reason, message) seen again
 *     within the window (10 minutes since it was last seen) is not created
 *     again: the existing Event is patched (merge patch of count and
 *     lastTimestamp). A write still queued absorbs the repeats, so a burst
 *     of equal events costs one request. Recent events live in an LRU cache
 *     of 4096 entries; an evicted or expired one makes a new Event. Entries
 *     past their window, and buckets full again, are dropped; so are an
 *     object's entries on events_forget.
 *   - Event: created in the object's namespace, named "<name>.<hex>" (the
 *     wall clock in nanoseconds, in hex, unique in this recorder), with
 *     type Normal or Warning, a CamelCase reason, a message redacted with
 *     vmg_log_redact() and cut to EVENTS_MAX_MESSAGE bytes (valid UTF-8,
 *     "..." marking the cut), source.component, reportingComponent,
 *     reportingInstance, firstTimestamp, lastTimestamp and count.
 *   - Writes: a patch that finds no Event (deleted by its TTL) becomes a
 *     create, a create that finds one (an earlier try did land) becomes a
 *     patch; throttling (429), server errors (5xx), timeouts and transport
 *     errors are retried a bounded number of times with backoff (the
 *     server's Retry-After when it gives one); anything else, or the last
 *     failure, drops the event with one log line (lib/log.h) and a count.
 *
 * The I/O goes through struct events_io (events_kube_io over
 * kube/kube.h, a fake in unit tests); time comes from injected
 * clocks. Everything runs on one libuv loop. Not thread-safe.
 */
#ifndef VMG_EVENTS_H
#define VMG_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

/* The program's name, the Events' default component; the build names the
 * program (-DKUBE_AGENT=...), as kube/kube.h does for the User-Agent. */
#ifndef KUBE_AGENT
#define KUBE_AGENT "kube-c"
#endif

#define EVENTS_COMPONENT KUBE_AGENT
#define EVENTS_MAX_MESSAGE 1024 /* bytes of a message, "..." included */
#define EVENTS_MAX_REASON 128   /* bytes of a reason */
#define EVENTS_MAX_NAME 253     /* bytes of an Event's name */
#define EVENTS_MAX_FIELD 253    /* bytes of the object's fields and of component/instance */

#define EVENTS_DEFAULT_CACHE_SIZE 4096u
#define EVENTS_DEFAULT_WINDOW_MS (10u * 60u * 1000u)
#define EVENTS_DEFAULT_BURST 25u
#define EVENTS_DEFAULT_REFILL_MS (5u * 60u * 1000u) /* one token per 5 minutes */
#define EVENTS_DEFAULT_MAX_PENDING 1000u
#define EVENTS_DEFAULT_MAX_ATTEMPTS 3
#define EVENTS_DEFAULT_RETRY_MS 1000u /* first retry delay; doubles */
#define EVENTS_DEFAULT_TIMEOUT_MS 10000u
#define EVENTS_MAX_RETRY_AFTER_MS 30000u /* a longer Retry-After is cut to this */

enum events_type {
    EVENTS_NORMAL = 0,
    EVENTS_WARNING = 1,
};

/* The involved object. api_version, kind, ns and name are required; uid
 * and resource_version may be NULL or "". */
struct events_object {
    const char *api_version;
    const char *kind;
    const char *ns;
    const char *name;
    const char *uid;
    const char *resource_version;
};

/* Why an event was not written. */
enum events_drop {
    EVENTS_DROP_RATE_LIMITED = 1, /* the object's bucket was empty */
    EVENTS_DROP_QUEUE_FULL = 2,   /* max_pending writes were queued */
    EVENTS_DROP_FAILED = 3,       /* the API refused it, or retries ran out */
};

/* I/O on Events. Each call starts an asynchronous request and returns 0 and
 * a handle in *ret_req, or a negative code (then done is never called).
 * done is called exactly once, later, never from inside the call: err 0,
 * or a negative code (VMG_ENOTFOUND, VMG_ECONFLICT, VMG_ETHROTTLED, ...),
 * the server's Retry-After in seconds (0 if none) and a message valid
 * during the call. cancel makes done come with VMG_ECANCELED, possibly
 * before cancel returns. Bodies are not consumed. */
typedef void (*events_io_done)(void *data, int err, unsigned retry_after_s, const char *msg);
struct events_io {
    int (*create)(void *ctx, const char *ns, const cJSON *event, uint64_t timeout_ms,
                  events_io_done done, void *data, void **ret_req);
    /* A JSON merge patch of the Event ns/name. */
    int (*patch)(void *ctx, const char *ns, const char *name, const cJSON *patch,
                 uint64_t timeout_ms, events_io_done done, void *data, void **ret_req);
    void (*cancel)(void *ctx, void *req);
};

/* events_kube_io writes through the Kubernetes client: io_ctx is a
 * kube_client (kube/kube.h). The client's own retries are turned off
 * (the recorder retries). */
extern const struct events_io events_kube_io;

/* The observer of drops, for a metric; obj and reason are valid during the
 * call. */
typedef void (*events_drop_fn)(void *data, enum events_drop why, const struct events_object *obj,
                               const char *reason);

/* The options; zero means the default given above. */
struct events_options {
    const char *component; /* source.component and reportingComponent; NULL: EVENTS_COMPONENT */
    const char *instance;  /* reportingInstance; NULL: the host name */
    size_t cache_size;     /* entries of each LRU cache (aggregation, buckets) */
    uint64_t window_ms;    /* aggregation window */
    uint32_t burst;        /* per object, type and reason */
    uint64_t refill_ms;    /* one token per refill_ms */
    size_t max_pending;    /* writes queued or in flight */
    int max_attempts;      /* tries per write, the first included */
    uint64_t retry_ms;     /* first retry delay */
    uint64_t timeout_ms;   /* of one request */
    /* Monotonic clock in ms (windows, buckets, retries); NULL: uv_hrtime. */
    uint64_t (*now_ms)(void *data);
    /* Wall clock in us since the epoch (timestamps, names); NULL: realtime. */
    int64_t (*wall_us)(void *data);
    void *clock_data;
    const struct events_io *io; /* required */
    void *io_ctx;
    events_drop_fn on_drop; /* may be NULL */
    void *drop_data;
};

/* Counters since events_new. */
struct events_stats {
    uint64_t recorded;     /* accepted by events_record */
    uint64_t aggregated;   /* of which merged into an existing Event */
    uint64_t created;      /* successful creates */
    uint64_t patched;      /* successful patches */
    uint64_t retries;      /* writes tried again */
    uint64_t rate_limited; /* dropped: rate limit */
    uint64_t queue_full;   /* dropped: too many pending */
    uint64_t failed;       /* dropped: write failed */
    size_t cached;         /* entries in the aggregation cache */
    size_t buckets;        /* entries in the rate-limit cache */
    size_t pending;        /* writes queued or in flight */
};

typedef struct events events;

/* events_new makes a recorder on loop. Returns 0 and *ret, or -EINVAL (no
 * loop or io, a component or instance longer than EVENTS_MAX_FIELD) or
 * -ENOMEM. */
int events_new(uv_loop_t *loop, const struct events_options *o, events **ret);

/* events_record records one event about obj. reason is CamelCase
 * ([A-Za-z0-9], starting with a letter, at most EVENTS_MAX_REASON bytes).
 * Returns 0 when the event will be written (or was merged into one that
 * will), VMG_ETHROTTLED when the rate limit dropped it, -ENOSPC when the
 * queue was full, -EINVAL for a bad argument (missing object field, bad
 * reason or type), VMG_ETOOBIG for an object field above EVENTS_MAX_FIELD,
 * -ESHUTDOWN when closing, or -ENOMEM. Dropped events are counted and
 * given to on_drop. */
int events_record(events *ev, const struct events_object *obj, enum events_type type,
                  const char *reason, const char *message);

/* events_recordf is events_record with a printf message. */
int events_recordf(events *ev, const struct events_object *obj, enum events_type type,
                   const char *reason, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* events_flush calls done(data) once, from the loop, when no write is queued
 * or in flight (at once, via the loop, when there is none). A second flush
 * replaces the first's callback. Returns 0 or -ESHUTDOWN. */
int events_flush(events *ev, void (*done)(void *data), void *data);

/* events_forget drops what the recorder remembers of the object ns/name
 * (whatever its uid): its aggregation entries and rate-limit buckets, so
 * that a deleted object leaves nothing behind. Writes already queued are
 * still sent. Returns the number of cache entries dropped. The caches also
 * forget by themselves what no longer matters: an aggregation entry past
 * its window, a bucket idle long enough to be full again. */
size_t events_forget(events *ev, const char *ns, const char *name);

/* events_get_stats writes the counters to *ret. */
void events_get_stats(const events *ev, struct events_stats *ret);

/* events_close cancels the write in flight, forgets queued ones, closes the
 * timer and frees ev in its close callback, then calls closed(data) when
 * not NULL. A pending flush callback is not called. NULL is fine. */
void events_close(events *ev, void (*closed)(void *data), void *data);

/* events_poll sends what is due on the recorder's clock (the timer does it
 * on a running loop). For tests with a fake clock. */
void events_poll(events *ev);

/* events_message writes msg redacted (vmg_log_redact) and bounded to
 * dst: at most EVENTS_MAX_MESSAGE bytes, cut on a UTF-8 boundary and ended
 * by "..." when cut; invalid UTF-8 bytes become '?'. dst must hold
 * EVENTS_MAX_MESSAGE + 1 bytes. Returns the length. */
size_t events_message(char *dst, const char *msg);

#endif
