/* b64.h: standard, padded base64 (RFC 4648, section 4), the project's
 * one, on OpenSSL's encoder and decoder. */
#ifndef VMG_B64_H
#define VMG_B64_H

#include <stddef.h>

/* The characters of the base64 of n bytes, without the NUL. */
#define VMG_B64_LEN(n) (4 * (((n) + 2) / 3))

/* vmg_b64_encode writes the base64 of in[0..len) into out, NUL
 * terminated, and returns its length (VMG_B64_LEN(len)). Returns -ENOSPC
 * when out's size cannot hold it and its NUL, or -EINVAL (in or out NULL
 * with len or size not 0, len too large for OpenSSL); out is then left
 * as it was. */
long vmg_b64_encode(const void *in, size_t len, char *out, size_t size);

/* vmg_b64_encode_alloc returns the base64 of in[0..len) in a string of
 * its own (free it; wipe it first when in is a secret), or NULL
 * (no memory, len too large). */
char *vmg_b64_encode_alloc(const void *in, size_t len);

/* vmg_b64_decoded_len checks that s[0..len) is base64 with its padding
 * ('=' only as the last one or two characters; nothing else but the
 * alphabet) and returns the length of what it decodes to, or -1. */
long vmg_b64_decoded_len(const char *s, size_t len);

/* vmg_b64_decode_alloc decodes in[0..len), base64 with its padding in
 * which whitespace (line breaks, say) is ignored, into a NUL-terminated
 * string of its own (*ret, *ret_len; wipe it when the text was a secret,
 * then free it). Its scratch copy of the text is wiped; no state of the
 * decoding stays anywhere. Returns 0, VMG_EPARSE (no text, not base64) or
 * -ENOMEM. */
int vmg_b64_decode_alloc(const char *in, size_t len, char **ret, size_t *ret_len);

#endif
