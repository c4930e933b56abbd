/* hex.h: lowercase hex digits of bytes, and the random UUID written with
 * them, the project's one of each. */
#ifndef VMG_HEX_H
#define VMG_HEX_H

#include <stddef.h>

/* The characters of a UUID, "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx". */
#define VMG_UUID_LEN 36

/* vmg_hex writes the 2 * len lowercase hex digits of in[0..len) and a NUL
 * into out, which holds 2 * len + 1 characters. */
void vmg_hex(const void *in, size_t len, char *out);

/* vmg_uuid_random writes a random (version 4, variant 10) UUID in lowercase,
 * as vCenter and Kubernetes write them, and a NUL into out. Returns 0, or
 * -EIO when OpenSSL's generator fails (out is then left as it was). */
int vmg_uuid_random(char out[VMG_UUID_LEN + 1]);

#endif
