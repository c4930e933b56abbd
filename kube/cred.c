/* cred.c: credential material as kubeconfig files and exec plugins give
 * it: secrets wiped when freed, files read whole with a bound, PEM
 * certificates and keys (OpenSSL), bearer tokens and RFC 3339 expiries. */
#include "kube/cred.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "lib/buf.h"
#include "lib/err.h"
#include "lib/file.h"

void kcred_free_str(char *p)
{
    if (p)
        vmg_wipe_free(p, strlen(p));
}

char *kcred_dup(const char *s, size_t len)
{
    char *p = malloc(len + 1);
    if (!p)
        return NULL;
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

/* ---- files ---- */

/* kcred_read_file reads all of path (at most max bytes) into a new NUL-terminated
 * buffer. The file's status, taken before reading, goes to *ret_st when
 * ret_st is not NULL. Returns 0, a negated errno, VMG_ETOOBIG, or
 * VMG_ENOTREG for what is not a regular file (a FIFO, a device), which is
 * never opened for blocking reads. */
int kcred_read_file(const char *path, size_t max, char **ret, size_t *ret_len, struct stat *ret_st)
{
    struct stat st;
    struct vmg_buf b;
    size_t size, len;
    char *out;
    int r = 0;
    /* Never a FIFO or a device: a token file is read again on the loop. */
    int fd = vmg_open_regular(path, &st);
    if (fd < 0)
        return fd;
    /* One byte more than max: a file of max bytes is read, a longer one
     * is found out when that byte arrives. */
    vmg_buf_init(&b, max + 1, VMG_BUF_WIPE);
    /* The size stat gives, and one byte to see the end: one allocation for
     * a file that does not change while it is read. */
    size = st.st_size > 0 && (size_t)st.st_size < max ? (size_t)st.st_size + 1 : 0;
    for (;;) {
        size_t room, have = vmg_buf_len(&b);
        ssize_t n;
        char *p = vmg_buf_prepare(&b, size > have ? size - have : 0, &room);
        if (!p) {
            r = vmg_buf_err(&b);
            goto out;
        }
        n = read(fd, p, room);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            goto out;
        }
        if (n == 0)
            break;
        vmg_buf_commit(&b, (size_t)n);
    }
    if (vmg_buf_len(&b) > max) {
        r = VMG_ETOOBIG;
        goto out;
    }
    out = vmg_buf_steal(&b, &len);
    if (!out) {
        r = -ENOMEM;
        goto out;
    }
    *ret = out;
    *ret_len = len;
    if (ret_st)
        *ret_st = st;
out:
    vmg_buf_free(&b);
    close(fd);
    return r;
}

/* ---- PEM (OpenSSL) ---- */

/* A pass phrase callback that refuses: never prompt on a terminal. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return -1;
}

/* kcred_pem_certs counts the PEM certificates in pem (0 when none parses). */
int kcred_pem_certs(const char *pem, size_t len)
{
    int n = 0;
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    X509 *x;
    if (!b)
        return -ENOMEM;
    while ((x = PEM_read_bio_X509(b, NULL, no_passphrase, NULL)) != NULL) {
        X509_free(x);
        n++;
    }
    BIO_free(b);
    ERR_clear_error();
    return n;
}

/* kcred_check_pair says whether cert and key are PEM and belong together. */
int kcred_check_pair(const char *cert, size_t cert_len, const char *key, size_t key_len)
{
    int r = KCRED_PAIR_OK;
    X509 *x = NULL;
    EVP_PKEY *k = NULL;
    BIO *cb = BIO_new_mem_buf(cert, (int)cert_len);
    BIO *kb = BIO_new_mem_buf(key, (int)key_len);
    if (!cb || !kb) {
        r = -ENOMEM;
        goto out;
    }
    x = PEM_read_bio_X509(cb, NULL, no_passphrase, NULL);
    if (!x) {
        r = KCRED_PAIR_BAD_CERT;
        goto out;
    }
    k = PEM_read_bio_PrivateKey(kb, NULL, no_passphrase, NULL);
    if (!k) {
        r = KCRED_PAIR_BAD_KEY;
        goto out;
    }
    if (X509_check_private_key(x, k) != 1)
        r = KCRED_PAIR_MISMATCH;
out:
    EVP_PKEY_free(k);
    X509_free(x);
    BIO_free(kb);
    BIO_free(cb);
    ERR_clear_error();
    return r;
}

/* kcred_token_ok: a token must be non-empty and printable, as it goes in a header. */
int kcred_token_ok(const char *t, size_t len)
{
    if (len == 0)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)t[i];
        if (ch < 0x20 || ch == 0x7f)
            return 0;
    }
    return 1;
}

/* ---- RFC 3339 ---- */

static int digits(const char *s, int n, int *ret)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *ret = v;
    return 0;
}

/* kcred_parse_time parses "2006-01-02T15:04:05[.frac](Z|+hh:mm|-hh:mm)". */
int kcred_parse_time(const char *s, time_t *ret)
{
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int Y, M, D, h, m, sec, oh = 0, om = 0, sign = 0;
    struct tm tm = {0};
    time_t t;
    size_t len = strlen(s);

    if (len < 20 || digits(s, 4, &Y) || s[4] != '-' || digits(s + 5, 2, &M) || s[7] != '-' ||
        digits(s + 8, 2, &D) || (s[10] != 'T' && s[10] != 't') || digits(s + 11, 2, &h) ||
        s[13] != ':' || digits(s + 14, 2, &m) || s[16] != ':' || digits(s + 17, 2, &sec))
        return VMG_EPARSE;
    s += 19;
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9')
            return VMG_EPARSE;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'Z' || *s == 'z') {
        s++;
    } else if (*s == '+' || *s == '-') {
        sign = *s == '+' ? 1 : -1;
        if (digits(s + 1, 2, &oh) || s[3] != ':' || digits(s + 4, 2, &om) || oh > 23 || om > 59)
            return VMG_EPARSE;
        s += 6;
    } else {
        return VMG_EPARSE;
    }
    if (*s != '\0' || M < 1 || M > 12 || D < 1 || D > mdays[M - 1] || h > 23 || m > 59 || sec > 60)
        return VMG_EPARSE;
    tm.tm_year = Y - 1900;
    tm.tm_mon = M - 1;
    tm.tm_mday = D;
    tm.tm_hour = h;
    tm.tm_min = m;
    tm.tm_sec = sec;
    t = timegm(&tm);
    if (t == (time_t)-1 && !(Y == 1969 && M == 12 && D == 31))
        return VMG_EPARSE;
    *ret = t - sign * (oh * 3600 + om * 60);
    return 0;
}
