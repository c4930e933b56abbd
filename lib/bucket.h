/* bucket.h: a token bucket, the project's one: qps tokens a second, at
 * most burst of them, full at the start.
 *
 * Time is given by the caller (monotonic milliseconds) at each call, so
 * that tests drive it. A clock that goes back refills nothing, and nothing
 * more is refilled until it has caught up again. Two ways to spend a
 * token:
 *   - vmg_bucket_take: take one if there is one, else say how long to wait
 *     (taking nothing): for a caller that comes back later, as the kube
 *     client's request queue does;
 *   - vmg_bucket_reserve: take one now, even one not refilled yet (the
 *     count goes negative), and say how long until it is there: for a
 *     caller that schedules the work at once, as the workqueue's rate
 *     limiter does (client-go's rate.Limiter.Reserve). */
#ifndef VMG_BUCKET_H
#define VMG_BUCKET_H

#include <stdint.h>

/* The longest wait either call returns, about 30,000 years: a qps so small
 * that the true wait would overflow waits this long. */
#define VMG_BUCKET_MAX_WAIT_MS 1000000000000000ull

struct vmg_bucket {
    double qps;       /* tokens a second; <= 0: no limit */
    double burst;     /* the most tokens held */
    double tokens;    /* may be negative after vmg_bucket_reserve */
    uint64_t last_ms; /* when tokens was last brought up to date */
};

/* vmg_bucket_init makes b full at now_ms. qps <= 0 (or NaN) means no
 * limit: every call returns 0. burst 0 counts as 1. */
void vmg_bucket_init(struct vmg_bucket *b, double qps, uint32_t burst, uint64_t now_ms);

/* vmg_bucket_take takes a token at now_ms and returns 0, or returns the
 * milliseconds (at least 1) until one is there, taking nothing. */
uint64_t vmg_bucket_take(struct vmg_bucket *b, uint64_t now_ms);

/* vmg_bucket_reserve takes a token at now_ms, possibly one that is not
 * there yet, and returns the milliseconds until it is (0: now). */
uint64_t vmg_bucket_reserve(struct vmg_bucket *b, uint64_t now_ms);

/* vmg_bucket_full says whether b holds its whole burst at now_ms (always,
 * without a limit): such a bucket is as good as a new one. */
int vmg_bucket_full(const struct vmg_bucket *b, uint64_t now_ms);

#endif
