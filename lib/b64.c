/* b64.c: see b64.h. */
#include "lib/b64.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include <openssl/evp.h>

/* OpenSSL takes the length as an int. */
#define MAX_IN ((size_t)INT_MAX / 4 * 3)

long vmg_b64_encode(const void *in, size_t len, char *out, size_t size)
{
    if ((!in && len) || (!out && size) || len > MAX_IN)
        return -EINVAL;
    if (size < VMG_B64_LEN(len) + 1)
        return -ENOSPC;
    return EVP_EncodeBlock((unsigned char *)out, in, (int)len);
}

char *vmg_b64_encode_alloc(const void *in, size_t len)
{
    size_t size = len <= MAX_IN ? VMG_B64_LEN(len) + 1 : 0;
    char *out = size ? malloc(size) : NULL;

    if (out && vmg_b64_encode(in, len, out, size) < 0) {
        free(out);
        out = NULL;
    }
    return out;
}
