/* backoff.h: exponential backoff, the project's one: base, 2 base, 4 base,
 * ... up to a cap, optionally less a random part (jitter).
 *
 * The delay is a pure function of the number of failures so far, so that a
 * caller may keep the count where it likes (per key, per request, per
 * session); struct vmg_backoff bundles a count with a policy for the
 * callers that keep one of each. Randomness comes from the caller (a
 * uint32_t, or a function), so that tests are deterministic. */
#ifndef VMG_BACKOFF_H
#define VMG_BACKOFF_H

#include <stdint.h>

/* vmg_backoff_ms returns min(base_ms * 2^n, cap_ms), computed without
 * overflow: n is the number of doublings (the failures before this one),
 * so n = 0 gives base_ms. base_ms 0 gives 0; base_ms above cap_ms gives
 * cap_ms. */
uint64_t vmg_backoff_ms(uint64_t base_ms, uint64_t cap_ms, unsigned n);

/* vmg_backoff_jitter takes from d a random part of at most jitter * d:
 * the result is in [d * (1 - jitter), d], never above d. jitter is clamped
 * to [0, 1] (NaN counts as 0); rnd is uniform over uint32_t (0 takes
 * nothing off, UINT32_MAX nearly jitter * d). */
uint64_t vmg_backoff_jitter(uint64_t d, double jitter, uint32_t rnd);

/* vmg_xorshift32 advances *state (xorshift32) and returns the new value:
 * a cheap, non-cryptographic source of rnd for the jitter. A zero state
 * (whose successor would be zero forever) is taken as 1. */
uint32_t vmg_xorshift32(uint32_t *state);

/* A policy and a failure count. */
struct vmg_backoff {
    uint64_t base_ms;             /* the first delay */
    uint64_t cap_ms;              /* the largest delay */
    double jitter;                /* the part in [0, 1] taken off at random; 0: none */
    uint32_t (*rand)(void *data); /* the random source; NULL: no jitter */
    void *rand_data;
    unsigned failures; /* counted by vmg_backoff_next, saturating */
};

/* vmg_backoff_init sets base and cap (a cap below base is raised to base),
 * no jitter, no failures. */
void vmg_backoff_init(struct vmg_backoff *b, uint64_t base_ms, uint64_t cap_ms);

/* vmg_backoff_set_jitter takes up to jitter * delay off each delay, with
 * rnd(data) as the random source; rnd NULL or jitter 0 turns jitter off. */
void vmg_backoff_set_jitter(struct vmg_backoff *b, double jitter, uint32_t (*rnd)(void *data),
                            void *data);

/* vmg_backoff_next counts one more failure and returns the delay before
 * the retry that follows it: vmg_backoff_ms(base, cap, failures before
 * this call), with jitter when set. */
uint64_t vmg_backoff_next(struct vmg_backoff *b);

/* vmg_backoff_peek returns what vmg_backoff_next would return (without
 * jitter), counting nothing. */
uint64_t vmg_backoff_peek(const struct vmg_backoff *b);

/* vmg_backoff_reset forgets the failures (call it on success). */
void vmg_backoff_reset(struct vmg_backoff *b);

#endif
