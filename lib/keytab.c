/* keytab.c: open addressing with linear probing and backward-shift deletion. */
#include "lib/keytab.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/err.h"

#define MIN_CAP 16

void keytab_init(struct keytab *t)
{
    struct timespec ts = {0};

    memset(t, 0, sizeof(*t));
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    t->seed = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)t;
}

void keytab_release(struct keytab *t, void (*free_entry)(struct keytab_node *n))
{
    for (size_t i = 0; free_entry && i < t->cap; i++)
        if (t->slots[i])
            free_entry(t->slots[i]);
    free(t->slots);
    t->slots = NULL;
    t->cap = t->count = 0;
}

long keytab_key_len(const char *key, size_t max)
{
    if (!key || !key[0])
        return -EINVAL;
    size_t len = strnlen(key, max + 1);
    if (len > max)
        return VMG_ETOOBIG;
    return (long)len;
}

uint64_t keytab_hash(const struct keytab *t, const char *key, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull ^ t->seed;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static size_t find_slot(const struct keytab *t, const char *key, uint64_t h)
{
    size_t mask = t->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        struct keytab_node *n = t->slots[i];
        if (!n || (n->hash == h && strcmp(n->key, key) == 0))
            return i;
    }
}

struct keytab_node *keytab_find(const struct keytab *t, const char *key, uint64_t h)
{
    if (t->cap == 0)
        return NULL;
    return t->slots[find_slot(t, key, h)];
}

struct keytab_node *keytab_lookup(const struct keytab *t, const char *key, size_t len,
                                  uint64_t *ret_hash)
{
    uint64_t h = keytab_hash(t, key, len);

    if (ret_hash)
        *ret_hash = h;
    return keytab_find(t, key, h);
}

static int resize(struct keytab *t, size_t cap)
{
    struct keytab_node **slots = calloc(cap, sizeof(*slots));
    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i < t->cap; i++) {
        struct keytab_node *n = t->slots[i];
        if (!n)
            continue;
        size_t j = n->hash & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = n;
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 0;
}

int keytab_reserve(struct keytab *t)
{
    if ((t->count + 1) * 4 <= t->cap * 3)
        return 0;
    return resize(t, t->cap ? t->cap * 2 : MIN_CAP);
}

void keytab_insert(struct keytab *t, struct keytab_node *n)
{
    t->slots[find_slot(t, n->key, n->hash)] = n;
    t->count++;
}

void keytab_remove(struct keytab *t, struct keytab_node *n)
{
    size_t mask = t->cap - 1;
    size_t i = n->hash & mask;

    while (t->slots[i] != n)
        i = (i + 1) & mask;
    t->slots[i] = NULL;
    t->count--;
    /* Shift later members of the cluster back, so that every lookup still
     * finds its key: slot j moves into the hole at i unless its home lies
     * cyclically in (i, j]. */
    for (size_t j = (i + 1) & mask; t->slots[j]; j = (j + 1) & mask) {
        size_t home = t->slots[j]->hash & mask;
        bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (stays)
            continue;
        t->slots[i] = t->slots[j];
        t->slots[j] = NULL;
        i = j;
    }
    /* Shrink when sparse; a failed shrink only keeps the larger table. */
    if (t->cap > MIN_CAP && t->count < t->cap / 8)
        (void)resize(t, t->cap / 2);
}
