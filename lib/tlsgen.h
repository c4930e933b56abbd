/* tlsgen.h: a self-signed TLS server certificate, made in memory.
 *
 * The metrics endpoint serves HTTPS even when no certificate was given
 * (controller-runtime does the same): this module makes an ECDSA P-256 key
 * and a self-signed X.509 v3 certificate for it, valid for one year (from
 * one hour ago, to allow for clock skew), with the serverAuth extended key
 * usage and subject alternative names for the given DNS names and the
 * loopback addresses 127.0.0.1 and ::1.
 */
#ifndef VMG_TLSGEN_H
#define VMG_TLSGEN_H

#include <stddef.h>

#define VMG_TLS_MAX_SANS 32      /* DNS names in one certificate */
#define VMG_TLS_MAX_DNS_NAME 253 /* bytes of one DNS name */

/* vmg_tls_selfsigned makes a key and a certificate whose subject CN is cn
 * (1..64 bytes) and whose DNS subject alternative names are dns_sans[0..n_dns)
 * (each 1..VMG_TLS_MAX_DNS_NAME bytes of letters, digits, '-', '.' and a
 * leading "*."). On success returns 0 and sets *ret_cert_pem and
 * *ret_key_pem to new NUL-terminated PEM strings (the key unencrypted,
 * PKCS#8) that the caller frees. Returns -EINVAL for bad arguments, or
 * -ENOMEM / VMG_ETRANSPORT when OpenSSL fails. */
int vmg_tls_selfsigned(const char *cn, const char *const *dns_sans, size_t n_dns,
                       char **ret_cert_pem, char **ret_key_pem);

#endif
