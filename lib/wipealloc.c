/* wipealloc.c: see wipealloc.h. */
#include "lib/wipealloc.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <openssl/crypto.h>

static void (*then_free)(void *) = free;

static void wipe_free(void *p)
{
    if (!p)
        return;
    explicit_bzero(p, malloc_usable_size(p));
    then_free(p);
}

/* wipe_realloc keeps p when its block holds n bytes (what lies past them
 * is wiped with the block, later); else it moves p, wiping the old block. */
static void *wipe_realloc(void *p, size_t n)
{
    size_t have;
    void *q;

    if (!p)
        return malloc(n);
    if (n == 0) {
        wipe_free(p);
        return NULL;
    }
    have = malloc_usable_size(p);
    if (n <= have)
        return p;
    q = malloc(n);
    if (!q)
        return NULL; /* p is left as it was, as realloc leaves it */
    memcpy(q, p, have);
    wipe_free(p);
    return q;
}

static char *wipe_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);

    if (p)
        memcpy(p, s, n);
    return p;
}

static void *ossl_malloc(size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    return malloc(n);
}

static void *ossl_realloc(void *p, size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    return wipe_realloc(p, n);
}

static void ossl_free(void *p, const char *file, int line)
{
    (void)file;
    (void)line;
    wipe_free(p);
}

int vmg_wipe_allocators(void (*free_fn)(void *))
{
    then_free = free_fn ? free_fn : free;
    if (!CRYPTO_set_mem_functions(ossl_malloc, ossl_realloc, ossl_free))
        return -EBUSY;
    if (curl_global_init_mem(CURL_GLOBAL_DEFAULT, malloc, wipe_free, wipe_realloc, wipe_strdup,
                             calloc) != CURLE_OK)
        return -EIO;
    return 0;
}
