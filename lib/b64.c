/* b64.c: see b64.h. */
#include "lib/b64.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>

#include <openssl/evp.h>

#include "lib/buf.h"
#include "lib/err.h"

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

long vmg_b64_decoded_len(const char *s, size_t len)
{
    size_t pad = 0;

    if (!s || len % 4)
        return -1;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                     c == '+' || c == '/';
        if (c == '=' && i >= len - 2) {
            pad++;
            continue;
        }
        if (!alpha || pad)
            return -1;
    }
    return (long)(len / 4 * 3 - pad);
}

int vmg_b64_decode_alloc(const char *in, size_t len, char **ret, size_t *ret_len)
{
    char *text = NULL, *out = NULL; /* both may be a secret */
    size_t n = 0;
    long want;
    int r = VMG_EPARSE;

    if (!in || len > MAX_IN)
        return VMG_EPARSE;
    text = malloc(len + 1);
    if (!text)
        return -ENOMEM;
    for (size_t i = 0; i < len; i++)
        if (!isspace((unsigned char)in[i]))
            text[n++] = in[i];
    if (n == 0 || (want = vmg_b64_decoded_len(text, n)) < 0)
        goto out;
    out = malloc(n / 4 * 3 + 1);
    if (!out) {
        r = -ENOMEM;
        goto out;
    }
    /* OpenSSL's block decoder keeps no state (its context-based one keeps
     * the text's tail, and frees it unwiped); it writes the padding's
     * zero bytes too, which the length leaves out. */
    if (EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)text, (int)n) < want)
        goto out;
    out[want] = '\0';
    *ret = out;
    *ret_len = (size_t)want;
    out = NULL;
    r = 0;
out:
    vmg_wipe_free(out, n / 4 * 3 + 1);
    vmg_wipe_free(text, len + 1);
    return r;
}
