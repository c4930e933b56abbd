/* buf.c: a bounded growable byte buffer (see buf.h). */
#include "lib/buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "lib/err.h"

#define MIN_ALLOC 16 /* the first block, unless max is smaller */

static void (*free_hook)(const void *p, size_t n, void *data);
static void *free_hook_data;

void vmg_buf_testing_hook(void (*hook)(const void *p, size_t n, void *data), void *data)
{
    free_hook = hook;
    free_hook_data = data;
}

void vmg_wipe(void *p, size_t n)
{
    if (p && n)
        OPENSSL_cleanse(p, n);
}

void vmg_wipe_free(void *p, size_t n)
{
    vmg_wipe(p, n);
    free(p);
}

/* release gives a block of b back, wiped when b holds secrets. */
static void release(const struct vmg_buf *b, char *p, size_t n)
{
    if (!p)
        return;
    if (b->flags & VMG_BUF_WIPE)
        vmg_wipe(p, n);
    if (free_hook)
        free_hook(p, n, free_hook_data);
    free(p);
}

void vmg_buf_init(struct vmg_buf *b, size_t max, unsigned flags)
{
    memset(b, 0, sizeof(*b));
    b->max = max < SIZE_MAX / 2 ? max : SIZE_MAX / 2 - 1;
    b->flags = flags;
}

static int fail(struct vmg_buf *b, int err)
{
    b->err = err;
    return err;
}

/* grow makes the block hold at least need bytes (NUL included), doubling,
 * within max + 1. */
static int grow(struct vmg_buf *b, size_t need)
{
    size_t n = b->alloc ? b->alloc : MIN_ALLOC;
    char *p;

    while (n < need)
        n *= 2; /* need <= max + 1 < SIZE_MAX / 2: no overflow */
    if (n > b->max + 1)
        n = b->max + 1;
    if (b->flags & VMG_BUF_WIPE) {
        /* Not realloc: the old block is wiped before it is given back. */
        p = malloc(n);
        if (!p)
            return fail(b, -ENOMEM);
        if (b->data)
            memcpy(p, b->data, b->len + 1);
        release(b, b->data, b->alloc);
    } else {
        p = realloc(b->data, n);
        if (!p)
            return fail(b, -ENOMEM);
    }
    if (!b->data)
        p[0] = '\0';
    b->data = p;
    b->alloc = n;
    return 0;
}

int vmg_buf_reserve(struct vmg_buf *b, size_t n)
{
    if (b->err)
        return b->err;
    if (n > b->max - b->len)
        return fail(b, VMG_ETOOBIG);
    if (n > 0 && b->len + n + 1 > b->alloc)
        return grow(b, b->len + n + 1);
    return 0;
}

int vmg_buf_append(struct vmg_buf *b, const void *p, size_t n)
{
    int r = vmg_buf_reserve(b, n);

    if (r < 0)
        return r;
    if (n == 0)
        return 0;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int vmg_buf_append_str(struct vmg_buf *b, const char *s)
{
    return vmg_buf_append(b, s, strlen(s));
}

int vmg_buf_append_vfmt(struct vmg_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    int n, r;

    if (b->err)
        return b->err;
    va_copy(ap2, ap);
    n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return fail(b, -EINVAL);
    if (n == 0)
        return 0; /* nothing to add; data may still be NULL */
    r = vmg_buf_reserve(b, (size_t)n);
    if (r < 0)
        return r;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int vmg_buf_append_fmt(struct vmg_buf *b, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = vmg_buf_append_vfmt(b, fmt, ap);
    va_end(ap);
    return r;
}

char *vmg_buf_prepare(struct vmg_buf *b, size_t want, size_t *ret_room)
{
    size_t left;

    if (b->err)
        return NULL;
    left = b->max - b->len;
    if (left == 0) {
        fail(b, VMG_ETOOBIG);
        return NULL;
    }
    if (want == 0)
        want = 1;
    if (want > left)
        want = left;
    if (b->alloc - b->len < want + 1 && vmg_buf_reserve(b, want) < 0)
        return NULL;
    *ret_room = b->alloc - b->len - 1;
    if (*ret_room > left)
        *ret_room = left;
    return b->data + b->len;
}

void vmg_buf_commit(struct vmg_buf *b, size_t n)
{
    if (!b->data || n > b->alloc - b->len - 1)
        abort(); /* more than vmg_buf_prepare gave: a bug, not input */
    b->len += n;
    b->data[b->len] = '\0';
}

const char *vmg_buf_str(const struct vmg_buf *b)
{
    return b->data ? b->data : "";
}

size_t vmg_buf_len(const struct vmg_buf *b)
{
    return b->len;
}

int vmg_buf_err(const struct vmg_buf *b)
{
    return b->err;
}

void vmg_buf_truncate(struct vmg_buf *b, size_t len)
{
    if (len >= b->len)
        return;
    if (b->flags & VMG_BUF_WIPE)
        vmg_wipe(b->data + len, b->len - len);
    b->len = len;
    b->data[len] = '\0';
}

void vmg_buf_reset(struct vmg_buf *b)
{
    vmg_buf_truncate(b, 0);
    b->err = 0;
}

void vmg_buf_free(struct vmg_buf *b)
{
    if (!b)
        return;
    release(b, b->data, b->alloc);
    b->data = NULL;
    b->len = b->alloc = 0;
    b->err = 0;
}

char *vmg_buf_steal(struct vmg_buf *b, size_t *ret_len)
{
    char *p;

    if (b->err)
        return NULL;
    p = b->data;
    if (!p) {
        p = malloc(1);
        if (!p)
            return NULL;
        p[0] = '\0';
    }
    if (ret_len)
        *ret_len = b->len;
    b->data = NULL;
    b->len = b->alloc = 0;
    return p;
}
