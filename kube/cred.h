/* cred.h: credential material, as kubeconfig.c loads it and exec.c reads it
 * from an exec plugin: secrets that are wiped when freed, files read whole
 * with a bound, base64, PEM certificates and keys, bearer tokens and the
 * RFC 3339 times of their expiry. Inputs are hostile: every function checks
 * bounds and says no rather than guess. */
#ifndef VMG_KUBE_CRED_H
#define VMG_KUBE_CRED_H

#include <stddef.h>
#include <sys/stat.h>
#include <time.h>

/* kcred_free_str wipes a NUL-terminated secret and frees it (NULL is
 * fine); vmg_wipe_free (lib/buf.h) does so for len bytes. */
void kcred_free_str(char *p);

/* kcred_dup is a new NUL-terminated copy of s[0..len), or NULL. */
char *kcred_dup(const char *s, size_t len);

/* kcred_read_file reads all of path (at most max bytes) into a new
 * NUL-terminated buffer (*ret, *ret_len; free it with vmg_wipe_free). The
 * file's status, taken before reading, goes to *ret_st when ret_st is not
 * NULL. Returns 0, a negated errno or VMG_ETOOBIG; what was read before a
 * failure is wiped. */
int kcred_read_file(const char *path, size_t max, char **ret, size_t *ret_len, struct stat *ret_st);

/* kcred_pem_certs counts the PEM certificates in pem (0 when none parses),
 * or returns -ENOMEM. Nothing ever prompts for a pass phrase. */
int kcred_pem_certs(const char *pem, size_t len);

/* What kcred_check_pair finds. */
enum { KCRED_PAIR_OK, KCRED_PAIR_BAD_CERT, KCRED_PAIR_BAD_KEY, KCRED_PAIR_MISMATCH };

/* kcred_check_pair says whether cert and key are PEM and belong together:
 * one of the KCRED_PAIR_ values, or -ENOMEM. */
int kcred_check_pair(const char *cert, size_t cert_len, const char *key, size_t key_len);

/* kcred_token_ok: a token must be non-empty and printable, as it goes in a
 * header. 1 when t[0..len) is such a token, else 0. */
int kcred_token_ok(const char *t, size_t len);

/* kcred_parse_time parses "2006-01-02T15:04:05[.frac](Z|+hh:mm|-hh:mm)" into
 * *ret (seconds since the epoch). Returns 0 or VMG_EPARSE. */
int kcred_parse_time(const char *s, time_t *ret);

#endif
