/* ratelimit.c: per-key exponential backoff (lib/backoff) combined with a
 * token bucket (lib/bucket) for all keys.
 *
 * Failure counts live in a lib/keytab table keyed by string, bounded by
 * max_keys. */
#include "kube/ratelimit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backoff.h"
#include "lib/bucket.h"
#include "lib/err.h"
#include "lib/keytab.h"

struct failure {
    struct keytab_node node;
    uint32_t count;
    char key[]; /* NUL-terminated copy */
};

struct rl {
    struct rl_options o;
    struct keytab failures;   /* struct failure by key, at most max_keys */
    struct vmg_bucket bucket; /* for all keys; tokens reserved ahead of time */
};

/* lookup finds key (len bytes); its hash goes to *ret_hash, for adding it. */
static struct failure *lookup(const struct rl *l, const char *key, size_t len, uint64_t *ret_hash)
{
    struct keytab_node *n = keytab_lookup(&l->failures, key, len, ret_hash);
    return n ? keytab_entry(n, struct failure, node) : NULL;
}

static void free_failure(struct keytab_node *n)
{
    free(keytab_entry(n, struct failure, node));
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
    keytab_init(&l->failures);
    if (l->o.max_keys == 0)
        l->o.max_keys = RL_DEFAULT_MAX_KEYS;
    vmg_bucket_init(&l->bucket, o->qps, o->burst, o->qps > 0 ? o->now_ms(o->clock_data) : 0);
    *ret = l;
    return 0;
}

void rl_free(struct rl *l)
{
    if (!l)
        return;
    keytab_release(&l->failures, free_failure);
    free(l);
}

int rl_when(struct rl *l, const char *key, uint64_t *ret_delay_ms)
{
    long len = keytab_key_len(key, RL_KEY_MAX);
    if (len < 0)
        return (int)len;
    uint64_t h;
    struct failure *f = lookup(l, key, (size_t)len, &h);
    if (!f) {
        if (l->failures.count >= l->o.max_keys)
            return -ENOSPC;
        int r = keytab_reserve(&l->failures);
        if (r < 0)
            return r;
        f = malloc(sizeof(*f) + (size_t)len + 1);
        if (!f)
            return -ENOMEM;
        f->count = 0;
        memcpy(f->key, key, (size_t)len + 1);
        f->node.key = f->key;
        f->node.hash = h;
        keytab_insert(&l->failures, &f->node);
    }
    uint64_t d = vmg_backoff_ms(l->o.base_delay_ms, l->o.max_delay_ms, f->count);
    if (f->count < UINT32_MAX)
        f->count++;
    uint64_t b = l->o.qps > 0 ? vmg_bucket_reserve(&l->bucket, l->o.now_ms(l->o.clock_data)) : 0;
    *ret_delay_ms = b > d ? b : d;
    return 0;
}

void rl_forget(struct rl *l, const char *key)
{
    long len = keytab_key_len(key, RL_KEY_MAX);
    if (!l || len < 0)
        return;
    struct failure *f = lookup(l, key, (size_t)len, NULL);
    if (f) {
        keytab_remove(&l->failures, &f->node);
        free(f);
    }
}

uint32_t rl_num_requeues(const struct rl *l, const char *key)
{
    long len = keytab_key_len(key, RL_KEY_MAX);
    if (!l || len < 0)
        return 0;
    struct failure *f = lookup(l, key, (size_t)len, NULL);
    return f ? f->count : 0;
}

size_t rl_keys(const struct rl *l)
{
    return l ? l->failures.count : 0;
}
