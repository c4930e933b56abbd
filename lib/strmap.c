/* strmap.c: string-keyed hash map with chaining. */
#include "lib/strmap.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct node {
    struct node *next;
    void *value;
    size_t hash;
    char key[];
};

struct strmap {
    struct node **b;
    size_t nb, n;
};

static size_t hash_of(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return (size_t)h;
}

strmap *strmap_new(void)
{
    strmap *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->nb = 64;
    m->b = calloc(m->nb, sizeof(*m->b));
    if (!m->b) {
        free(m);
        return NULL;
    }
    return m;
}

/* destroy frees m and its keys, and its values when values. */
static void destroy(strmap *m, bool values)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nb; i++) {
        struct node *n = m->b[i], *next;
        for (; n; n = next) {
            next = n->next;
            if (values)
                free(n->value);
            free(n);
        }
    }
    free(m->b);
    free(m);
}

void strmap_free(strmap *m)
{
    destroy(m, false);
}

void strmap_free_all(strmap *m)
{
    destroy(m, true);
}

static struct node **find(const strmap *m, const char *key, size_t h)
{
    struct node **pp = &m->b[h & (m->nb - 1)];
    while (*pp && ((*pp)->hash != h || strcmp((*pp)->key, key) != 0))
        pp = &(*pp)->next;
    return pp;
}

static void grow(strmap *m)
{
    size_t nb = m->nb * 2;
    struct node **b = calloc(nb, sizeof(*b));
    if (!b)
        return; /* stay at this size: still correct, just slower */
    for (size_t i = 0; i < m->nb; i++) {
        struct node *n = m->b[i], *next;
        for (; n; n = next) {
            next = n->next;
            n->next = b[n->hash & (nb - 1)];
            b[n->hash & (nb - 1)] = n;
        }
    }
    free(m->b);
    m->b = b;
    m->nb = nb;
}

int strmap_set(strmap *m, const char *key, void *value)
{
    size_t h = hash_of(key), len;
    struct node **pp = find(m, key, h), *n;

    if (*pp) {
        (*pp)->value = value;
        return 0;
    }
    len = strlen(key);
    n = malloc(sizeof(*n) + len + 1);
    if (!n)
        return -ENOMEM;
    memcpy(n->key, key, len + 1);
    n->hash = h;
    n->value = value;
    n->next = NULL;
    *pp = n;
    if (++m->n > m->nb * 2)
        grow(m);
    return 0;
}

void *strmap_get(const strmap *m, const char *key)
{
    struct node **pp = find(m, key, hash_of(key));
    return *pp ? (*pp)->value : NULL;
}

void *strmap_del(strmap *m, const char *key)
{
    struct node **pp = find(m, key, hash_of(key)), *n = *pp;
    void *v;

    if (!n)
        return NULL;
    *pp = n->next;
    v = n->value;
    free(n);
    m->n--;
    return v;
}

size_t strmap_count(const strmap *m)
{
    return m->n;
}

int strmap_foreach(const strmap *m, int (*fn)(void *data, const char *key, void *value), void *data)
{
    for (size_t i = 0; i < m->nb; i++)
        for (struct node *n = m->b[i]; n; n = n->next) {
            int r = fn(data, n->key, n->value);
            if (r)
                return r;
        }
    return 0;
}
