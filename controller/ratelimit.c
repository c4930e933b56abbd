/* ratelimit.c: per-key exponential backoff combined with a token bucket.
 *
 * Failure counts live in an open-addressing hash table (linear probing,
 * backward-shift deletion) keyed by string, bounded by max_keys. */
#include "controller/ratelimit.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/err.h"

#define TABLE_MIN_CAP 16

struct failure {
    uint64_t hash;
    uint32_t count;
    char key[]; /* NUL-terminated copy */
};

struct rl {
    struct rl_options o;
    struct failure **slots; /* cap slots, NULL when empty; cap is 0 or a power of 2 */
    size_t cap;
    size_t count;
    uint64_t seed;
    double tokens;    /* may go negative: tokens reserved ahead of time */
    uint64_t last_ms; /* when tokens was last brought up to date */
};

/* hash_key hashes a key with FNV-1a from a per-table seed, then mixes the
 * result so that its low bits (the slot) depend on every byte. The seed
 * makes colliding names harder to choose; it is not a keyed PRF. */
static uint64_t hash_key(uint64_t seed, const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

/* check_key returns the length of a valid key, or a negative code. */
static long check_key(const char *key)
{
    if (!key || !key[0])
        return -EINVAL;
    size_t len = strnlen(key, RL_KEY_MAX + 1);
    if (len > RL_KEY_MAX)
        return VMG_ETOOBIG;
    return (long)len;
}

static size_t find_slot(const struct rl *l, const char *key, uint64_t h)
{
    size_t mask = l->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        struct failure *f = l->slots[i];
        if (!f || (f->hash == h && strcmp(f->key, key) == 0))
            return i;
    }
}

static struct failure *lookup(const struct rl *l, const char *key, uint64_t h)
{
    if (l->cap == 0)
        return NULL;
    return l->slots[find_slot(l, key, h)];
}

static int resize(struct rl *l, size_t cap)
{
    struct failure **slots = calloc(cap, sizeof(*slots));
    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i < l->cap; i++) {
        struct failure *f = l->slots[i];
        if (!f)
            continue;
        size_t j = f->hash & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = f;
    }
    free(l->slots);
    l->slots = slots;
    l->cap = cap;
    return 0;
}

/* remove_at empties slot i and shifts later members of its cluster back, so
 * that every lookup still finds its key without tombstones. */
static void remove_at(struct rl *l, size_t i)
{
    size_t mask = l->cap - 1;
    free(l->slots[i]);
    l->slots[i] = NULL;
    l->count--;
    for (size_t j = (i + 1) & mask; l->slots[j]; j = (j + 1) & mask) {
        size_t home = l->slots[j]->hash & mask;
        /* Move slot j into the hole at i unless its home lies cyclically in (i, j]. */
        bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (stays)
            continue;
        l->slots[i] = l->slots[j];
        l->slots[j] = NULL;
        i = j;
    }
    /* Shrink when sparse; a failed shrink only keeps the larger table. */
    if (l->cap > TABLE_MIN_CAP && l->count < l->cap / 8)
        (void)resize(l, l->cap / 2);
}

void rl_options_init(struct rl_options *o)
{
    memset(o, 0, sizeof(*o));
    o->base_delay_ms = RL_DEFAULT_BASE_DELAY_MS;
    o->max_delay_ms = RL_DEFAULT_MAX_DELAY_MS;
    o->qps = RL_DEFAULT_QPS;
    o->burst = RL_DEFAULT_BURST;
    o->max_keys = RL_DEFAULT_MAX_KEYS;
}

int rl_new(const struct rl_options *o, struct rl **ret)
{
    if (!o || !ret || o->max_delay_ms < o->base_delay_ms || !(o->qps >= 0) ||
        (o->qps > 0 && (!o->now_ms || o->burst == 0)))
        return -EINVAL;
    struct rl *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->o = *o;
    struct timespec ts = {0};
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    l->seed = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)l;
    if (l->o.max_keys == 0)
        l->o.max_keys = RL_DEFAULT_MAX_KEYS;
    l->tokens = o->burst;
    if (o->qps > 0)
        l->last_ms = o->now_ms(o->clock_data);
    *ret = l;
    return 0;
}

void rl_free(struct rl *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->cap; i++)
        free(l->slots[i]);
    free(l->slots);
    free(l);
}

/* backoff returns base * 2^exp, capped at max, without overflow. */
static uint64_t backoff(uint64_t base, uint64_t max, uint32_t exp)
{
    if (base == 0)
        return 0;
    if (exp >= 64 || base > (max >> exp))
        return max;
    return base << exp;
}

/* bucket_reserve takes one token, possibly one not yet refilled, and returns
 * how long to wait until it is there. */
static uint64_t bucket_reserve(struct rl *l)
{
    if (l->o.qps <= 0)
        return 0;
    uint64_t now = l->o.now_ms(l->o.clock_data);
    if (now > l->last_ms) {
        l->tokens += (double)(now - l->last_ms) * l->o.qps / 1000.0;
        if (l->tokens > l->o.burst)
            l->tokens = l->o.burst;
    }
    l->last_ms = now; /* a clock that goes back refills nothing */
    l->tokens -= 1.0;
    if (l->tokens >= 0)
        return 0;
    double ms = ceil(-l->tokens * 1000.0 / l->o.qps - 1e-6);
    if (ms >= 1e15) /* about 30,000 years: far enough, and no overflow */
        return (uint64_t)1e15;
    return ms > 0 ? (uint64_t)ms : 0;
}

int rl_when(struct rl *l, const char *key, uint64_t *ret_delay_ms)
{
    long len = check_key(key);
    if (len < 0)
        return (int)len;
    uint64_t h = hash_key(l->seed, key, (size_t)len);
    struct failure *f = lookup(l, key, h);
    if (!f) {
        if (l->count >= l->o.max_keys)
            return -ENOSPC;
        if ((l->count + 1) * 4 > l->cap * 3) {
            int r = resize(l, l->cap ? l->cap * 2 : TABLE_MIN_CAP);
            if (r < 0)
                return r;
        }
        f = malloc(sizeof(*f) + (size_t)len + 1);
        if (!f)
            return -ENOMEM;
        f->hash = h;
        f->count = 0;
        memcpy(f->key, key, (size_t)len + 1);
        l->slots[find_slot(l, key, h)] = f;
        l->count++;
    }
    uint64_t d = backoff(l->o.base_delay_ms, l->o.max_delay_ms, f->count);
    if (f->count < UINT32_MAX)
        f->count++;
    uint64_t b = bucket_reserve(l);
    *ret_delay_ms = b > d ? b : d;
    return 0;
}

void rl_forget(struct rl *l, const char *key)
{
    long len = check_key(key);
    if (!l || len < 0 || l->cap == 0)
        return;
    size_t i = find_slot(l, key, hash_key(l->seed, key, (size_t)len));
    if (l->slots[i])
        remove_at(l, i);
}

uint32_t rl_num_requeues(const struct rl *l, const char *key)
{
    long len = check_key(key);
    if (!l || len < 0)
        return 0;
    struct failure *f = lookup(l, key, hash_key(l->seed, key, (size_t)len));
    return f ? f->count : 0;
}

size_t rl_keys(const struct rl *l)
{
    return l ? l->count : 0;
}
