/* ratelimit.h: how long a failed key waits before it is retried.
 *
 * One limiter combines two rules and answers with the larger delay, like
 * client-go's DefaultControllerRateLimiter:
 *   - per key, exponential backoff: base, 2*base, 4*base, ... capped at max;
 *     each rl_when() counts one more failure of the key, rl_forget() resets it;
 *   - for all keys together, a token bucket of qps tokens a second holding at
 *     most burst tokens; a call that finds the bucket empty reserves a future
 *     token and waits until it is due.
 * Time comes from an injected clock in milliseconds, so tests control it.
 * The limiter is not thread-safe; it lives on the loop's thread.
 */
#ifndef VMG_RATELIMIT_H
#define VMG_RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

#define RL_DEFAULT_BASE_DELAY_MS 5u
#define RL_DEFAULT_MAX_DELAY_MS (1000u * 1000u) /* 1000 s */
#define RL_DEFAULT_QPS 10.0
#define RL_DEFAULT_BURST 100u
#define RL_DEFAULT_MAX_KEYS (1000u * 1000u)
#define RL_KEY_MAX 512 /* longest key accepted, in bytes, without the NUL */

struct rl_options {
    uint64_t base_delay_ms;         /* first per-key delay; 0: no per-key delay (still counted) */
    uint64_t max_delay_ms;          /* cap of the per-key delay */
    double qps;                     /* token refill per second; 0 turns the bucket off */
    uint32_t burst;                 /* bucket size, and its content at start; >= 1 if qps > 0 */
    size_t max_keys;                /* bound on keys with a failure count; 0: the default */
    uint64_t (*now_ms)(void *data); /* the clock; required when qps > 0 */
    void *clock_data;
};

struct rl;

/* rl_options_init fills o with client-go's defaults (5 ms .. 1000 s per key,
 * 10 per second with a burst of 100) and no clock. */
void rl_options_init(struct rl_options *o);

/* rl_new makes a limiter from o (copied). Returns 0 and *ret, or -EINVAL for
 * bad options (max < base, qps < 0, qps > 0 without a clock or a burst) or
 * -ENOMEM. */
int rl_new(const struct rl_options *o, struct rl **ret);

/* rl_free frees l; NULL is fine. */
void rl_free(struct rl *l);

/* rl_when counts one more failure of key and writes the delay before its
 * retry to *ret_delay_ms: the larger of its backoff (base * 2^(failures
 * before this call), capped) and the bucket's wait. Returns 0, -EINVAL for
 * an empty or NULL key, VMG_ETOOBIG for a key longer than RL_KEY_MAX,
 * -ENOSPC when max_keys keys already have failures (nothing counted), or
 * -ENOMEM. */
int rl_when(struct rl *l, const char *key, uint64_t *ret_delay_ms);

/* rl_forget drops key's failure count (call it when the key succeeded). The
 * bucket is shared by all keys and is not refunded. */
void rl_forget(struct rl *l, const char *key);

/* rl_num_requeues returns how many times rl_when counted key since it was
 * last forgotten (0 for an unknown key). */
uint32_t rl_num_requeues(const struct rl *l, const char *key);

/* rl_keys returns how many keys have a failure count. */
size_t rl_keys(const struct rl *l);

#endif
