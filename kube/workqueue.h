/* workqueue.h: the queue of keys ("namespace/name") that need reconciling.
 *
 * The semantics of client-go's workqueue, "fair and stingy", on one libuv loop:
 *   - keys are copied; adding a key that is already queued does nothing
 *     (a dirty set), so a burst of events costs one reconcile;
 *   - a key is never handed out twice at once (a processing set); a key
 *     added while it is processed is queued again when wq_done() is called;
 *   - otherwise keys come out in the order they were added (FIFO);
 *   - wq_add_after() delays a key (one uv timer for the earliest deadline
 *     over a min-heap); re-adding a waiting key keeps the earlier deadline;
 *   - wq_add_rate_limited() delays a key by the rate limiter's answer
 *     (kube/ratelimit.h); wq_forget() resets the key's backoff.
 *
 * Delivery: the queue calls the handler with a ready key while fewer than
 * max_active keys are being processed; the handler (or work it starts)
 * calls wq_done() for the key when that work ends, in the same callback or
 * any later one. Dispatch runs from a uv_idle callback, never from inside
 * wq_add(), so handlers may add and finish keys freely. wq_get() is a pull
 * alternative for simple users and tests, and wq_poll() lets tests drive
 * the queue with a fake clock and no running loop.
 *
 * Not thread-safe: every call is made on the loop's thread.
 */
#ifndef VMG_WORKQUEUE_H
#define VMG_WORKQUEUE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kube/ratelimit.h"

#define WQ_DEFAULT_MAX_KEYS (1000u * 1000u)
#define WQ_KEY_MAX 512 /* longest key accepted, in bytes, without the NUL */
#define WQ_NAME_MAX 63 /* longest queue name (the metrics' "name" label) */

/* The kinds of duration given to the observer. */
enum {
    WQ_QUEUE_DURATION = 0, /* from the add that queued a key to its dispatch */
    WQ_WORK_DURATION = 1,  /* from a key's dispatch to its wq_done() */
};

struct wq;

/* A handler receives a key to process. The key string stays valid until
 * wq_done() is called for it; the handler must call wq_done() exactly once
 * per dispatch (now or later). */
typedef void (*wq_handler_fn)(void *data, const char *key);

/* The options; all-zero is valid and means the defaults given here. */
struct wq_options {
    const char *name;      /* copied; NULL or "" for none; at most WQ_NAME_MAX */
    wq_handler_fn handler; /* NULL: no dispatch, keys are pulled with wq_get() */
    void *handler_data;
    size_t max_active; /* keys processed at once; 0: 1 */
    size_t max_keys;   /* distinct keys held (queued, waiting or processing); 0: default */
    uint64_t (*now_ms)(void *data); /* the clock; NULL: uv_now(loop) */
    void *clock_data;
    /* The rate limiter, borrowed: it must outlive the queue (free it after
     * the close callback). NULL: a limiter with rl_options_init()'s defaults
     * on the queue's clock, owned and freed by the queue. */
    struct rl *limiter;
    /* Called with durations, in seconds, as they are measured; may be NULL. */
    void (*observe)(void *data, int kind, double seconds);
    void *observe_data;
};

/* Counters and gauges, controller-runtime's workqueue metrics among them. */
struct wq_stats {
    size_t depth;                   /* keys queued, ready for dispatch (workqueue_depth) */
    size_t waiting;                 /* keys waiting for a deadline */
    size_t active;                  /* keys being processed */
    size_t keys;                    /* distinct keys held */
    uint64_t adds_total;            /* adds that queued a key (workqueue_adds_total) */
    uint64_t retries_total;         /* delayed adds (workqueue_retries_total) */
    uint64_t rejected_total;        /* adds refused with -ENOSPC */
    double unfinished_work_seconds; /* sum over active keys of time since dispatch */
    double longest_running_processor_seconds; /* the largest of those */
};

/* wq_new makes a queue whose handles live on loop. Returns 0 and *ret, or
 * -EINVAL (a NULL loop, a name too long, a limiter that could not be made
 * from these options) or -ENOMEM. Release it with wq_close(). */
int wq_new(uv_loop_t *loop, const struct wq_options *o, struct wq **ret);

/* wq_add queues key unless it is already queued; a key being processed is
 * queued again when it is done. Returns 0, -EINVAL (NULL or empty key),
 * VMG_ETOOBIG (key longer than WQ_KEY_MAX), -ESHUTDOWN after wq_shut_down(),
 * -ENOSPC when max_keys distinct keys are held already, or -ENOMEM. */
int wq_add(struct wq *q, const char *key);

/* wq_add_after queues key once delay_ms have passed on the queue's clock
 * (at once when delay_ms is 0). If key is already waiting, the earlier of
 * the two deadlines is kept. Counts a retry. Errors as wq_add(). */
int wq_add_after(struct wq *q, const char *key, uint64_t delay_ms);

/* wq_add_rate_limited is wq_add_after(key, the limiter's delay for key),
 * counting one more failure of key. Errors as wq_add() and rl_when(); after
 * -ESHUTDOWN, -ENOSPC or a bad key no failure is counted. */
int wq_add_rate_limited(struct wq *q, const char *key);

/* wq_forget resets key's backoff in the limiter (call it on success). It
 * does not remove key from the queue. */
void wq_forget(struct wq *q, const char *key);

/* wq_num_requeues returns how many rate-limited adds key had since it was
 * last forgotten. */
uint32_t wq_num_requeues(const struct wq *q, const char *key);

/* wq_done marks the end of key's processing; if key was added meanwhile it
 * is queued again. The key string given to the handler (or by wq_get) is
 * invalid once this returns. Returns 0, or -ENOENT if key is not being
 * processed. Works after wq_shut_down(). */
int wq_done(struct wq *q, const char *key);

/* wq_get takes the next ready key (first moving due waiting keys in) and
 * marks it as processing, writing it to *ret_key (valid until wq_done).
 * Returns 0, -EAGAIN when no key is ready or max_active keys are being
 * processed, or -ESHUTDOWN after wq_shut_down(). */
int wq_get(struct wq *q, const char **ret_key);

/* wq_poll moves every waiting key that is due on the queue's clock into the
 * queue, then hands ready keys to the handler (if any) up to max_active,
 * at most as many as were ready when it started. Returns the number
 * dispatched. For tests with a fake clock and for callers that know time
 * moved; the queue's timer and idle handle do the same on a running loop. */
int wq_poll(struct wq *q);

/* wq_shut_down stops dispatch and the timer; adds fail with -ESHUTDOWN from
 * now on. Keys being processed may still be marked done. Idempotent. */
void wq_shut_down(struct wq *q);

/* wq_shutting_down tells whether wq_shut_down() or wq_close() was called. */
int wq_shutting_down(const struct wq *q);

/* wq_close shuts the queue down and closes its handles; once the loop has
 * run their close callbacks it frees every key and the queue and then
 * calls closed_cb(data) if not NULL. No wq_ call may follow, and no
 * handler will be called again. Returns 0, or -EALREADY if already closing
 * (closed_cb is then not called). */
int wq_close(struct wq *q, void (*closed_cb)(void *data), void *data);

/* wq_get_stats writes the queue's counters and gauges to *ret; the time
 * gauges are computed from the processing set and the clock now. */
void wq_get_stats(const struct wq *q, struct wq_stats *ret);

/* wq_name returns the queue's name ("" if none). */
const char *wq_name(const struct wq *q);

#endif
