/* hex.c: see hex.h. */
#include "lib/hex.h"

#include <errno.h>

#include <openssl/rand.h>

void vmg_hex(const void *in, size_t len, char *out)
{
    static const char digit[] = "0123456789abcdef";
    const unsigned char *p = in;

    for (size_t i = 0; i < len; i++) {
        *out++ = digit[p[i] >> 4];
        *out++ = digit[p[i] & 0x0f];
    }
    *out = '\0';
}

int vmg_uuid_random(char out[VMG_UUID_LEN + 1])
{
    unsigned char r[16];
    size_t k = 0;

    if (RAND_bytes(r, sizeof(r)) != 1)
        return -EIO;
    r[6] = (unsigned char)((r[6] & 0x0f) | 0x40); /* version 4 */
    r[8] = (unsigned char)((r[8] & 0x3f) | 0x80); /* variant 10 */
    for (size_t i = 0; i < sizeof(r); i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[k++] = '-';
        vmg_hex(&r[i], 1, &out[k]); /* and a NUL, the last one kept */
        k += 2;
    }
    return 0;
}
