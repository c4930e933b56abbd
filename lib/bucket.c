/* bucket.c: a token bucket (see bucket.h). */
#include "lib/bucket.h"

#include <math.h>

void vmg_bucket_init(struct vmg_bucket *b, double qps, uint32_t burst, uint64_t now_ms)
{
    b->qps = qps > 0 ? qps : 0; /* NaN too */
    b->burst = burst ? burst : 1;
    b->tokens = b->burst;
    b->last_ms = now_ms;
}

/* refill brings the tokens up to date at now_ms. */
static void refill(struct vmg_bucket *b, uint64_t now_ms)
{
    if (now_ms <= b->last_ms)
        return;
    b->tokens += (double)(now_ms - b->last_ms) * b->qps / 1000.0;
    if (b->tokens > b->burst)
        b->tokens = b->burst;
    b->last_ms = now_ms;
}

/* wait_ms returns the milliseconds until the tokens reach want, rounded
 * up (a hair below a whole millisecond counts as it), and bounded. */
static uint64_t wait_ms(const struct vmg_bucket *b, double want)
{
    double ms = ceil((want - b->tokens) * 1000.0 / b->qps - 1e-6);

    if (!(ms < (double)VMG_BUCKET_MAX_WAIT_MS))
        return VMG_BUCKET_MAX_WAIT_MS;
    return ms > 0 ? (uint64_t)ms : 0;
}

uint64_t vmg_bucket_take(struct vmg_bucket *b, uint64_t now_ms)
{
    uint64_t ms;

    if (b->qps <= 0)
        return 0;
    refill(b, now_ms);
    if (b->tokens >= 1.0) {
        b->tokens -= 1.0;
        return 0;
    }
    ms = wait_ms(b, 1.0);
    return ms ? ms : 1;
}

uint64_t vmg_bucket_reserve(struct vmg_bucket *b, uint64_t now_ms)
{
    if (b->qps <= 0)
        return 0;
    refill(b, now_ms);
    b->tokens -= 1.0;
    return b->tokens >= 0 ? 0 : wait_ms(b, 0.0);
}

int vmg_bucket_full(const struct vmg_bucket *b, uint64_t now_ms)
{
    double tokens = b->tokens;

    if (b->qps <= 0)
        return 1;
    if (now_ms > b->last_ms)
        tokens += (double)(now_ms - b->last_ms) * b->qps / 1000.0;
    return tokens >= b->burst;
}
