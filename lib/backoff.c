/* backoff.c: exponential backoff (see backoff.h). */
#include "lib/backoff.h"

#include <limits.h>
#include <stddef.h>

uint64_t vmg_backoff_ms(uint64_t base_ms, uint64_t cap_ms, unsigned n)
{
    if (base_ms == 0)
        return 0;
    if (base_ms >= cap_ms || n >= 64 || base_ms > (cap_ms >> n))
        return cap_ms;
    return base_ms << n;
}

uint64_t vmg_backoff_jitter(uint64_t d, double jitter, uint32_t rnd)
{
    double cut;

    if (!(jitter > 0)) /* also NaN */
        return d;
    if (jitter > 1)
        jitter = 1;
    /* rnd / 2^32 < 1, so the cut is below d; the test only guards the
     * conversion against a rounding up to 2^64. */
    cut = (double)d * jitter * ((double)rnd / 4294967296.0);
    if (!(cut < 18446744073709551616.0))
        return 0;
    return d - (uint64_t)cut;
}

uint32_t vmg_xorshift32(uint32_t *state)
{
    uint32_t x = *state ? *state : 1u;

    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return x;
}

void vmg_backoff_init(struct vmg_backoff *b, uint64_t base_ms, uint64_t cap_ms)
{
    b->base_ms = base_ms;
    b->cap_ms = cap_ms < base_ms ? base_ms : cap_ms;
    b->jitter = 0;
    b->rand = NULL;
    b->rand_data = NULL;
    b->failures = 0;
}

void vmg_backoff_set_jitter(struct vmg_backoff *b, double jitter, uint32_t (*rnd)(void *data),
                            void *data)
{
    b->jitter = rnd ? jitter : 0;
    b->rand = rnd;
    b->rand_data = data;
}

uint64_t vmg_backoff_peek(const struct vmg_backoff *b)
{
    return vmg_backoff_ms(b->base_ms, b->cap_ms, b->failures);
}

uint64_t vmg_backoff_next(struct vmg_backoff *b)
{
    uint64_t d = vmg_backoff_peek(b);

    if (b->failures < UINT_MAX)
        b->failures++;
    if (b->rand && b->jitter > 0)
        d = vmg_backoff_jitter(d, b->jitter, b->rand(b->rand_data));
    return d;
}

void vmg_backoff_reset(struct vmg_backoff *b)
{
    b->failures = 0;
}
