/* tls.c: the server side of TLS: context, reload, connections (see tls.h). */
#include "lib/tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "lib/buf.h"
#include "lib/err.h"
#include "lib/file.h"

struct vmg_tls {
    uv_loop_t *loop;
    SSL_CTX *ctx;
    /* From files, watched. */
    char *cert_file;
    char *key_file;
    uv_fs_poll_t cert_poll;
    uv_fs_poll_t key_poll;
    int handles;              /* poll handles not closed yet */
    int closing;              /* vmg_tls_close was called */
    unsigned char digest[32]; /* of the PEM text in use */
    unsigned char failed[32]; /* of the last that could not be used */
    uint64_t reloads;
    void (*reloaded)(void *data, int status, const char *msg);
    void *data;
    void (*closed)(void *data);
    void *closed_data;
};

struct vmg_tls_conn {
    SSL *ssl;
    BIO *rbio; /* ciphertext from the peer; owned by ssl */
    BIO *wbio; /* ciphertext for the peer; owned by ssl */
    int handshake_done;
};

/* set_err writes "msg" or "msg detail" to the caller's error buffer. */
static void set_err(const struct vmg_tls_opts *o, const char *msg, const char *detail)
{
    if (o && o->errbuf && o->errbuf_size > 0)
        snprintf(o->errbuf, o->errbuf_size, "%s%s%s", msg, detail ? " " : "", detail ? detail : "");
}

static void wipe_str(char *p)
{
    if (p)
        vmg_wipe_free(p, strlen(p) + 1);
}

/* ---- the context ---- */

static int read_file(const char *path, char **ret)
{
    int fd = vmg_open_regular(path, NULL); /* never a FIFO: it is read again on the loop */
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    char *buf = NULL;
    size_t n;
    int r = VMG_ECONFIG;

    if (!f) {
        if (fd >= 0)
            close(fd);
        return VMG_ECONFIG;
    }
    setvbuf(f, NULL, _IONBF, 0); /* no copy of a key in stdio's buffer */
    buf = malloc(VMG_TLS_MAX_PEM + 1);
    if (!buf) {
        r = -ENOMEM;
        goto out;
    }
    n = fread(buf, 1, VMG_TLS_MAX_PEM + 1, f);
    if (ferror(f) || n > VMG_TLS_MAX_PEM)
        goto out;
    buf[n] = '\0';
    *ret = buf;
    buf = NULL;
    r = 0;
out:
    if (buf) /* a key read in part, too big or unreadable */
        vmg_wipe_free(buf, VMG_TLS_MAX_PEM + 1);
    fclose(f);
    return r;
}

static void ssl_err(const struct vmg_tls_opts *o, const char *what)
{
    char msg[256], full[400];
    unsigned long e = ERR_get_error();

    if (e)
        ERR_error_string_n(e, msg, sizeof(msg));
    else
        snprintf(msg, sizeof(msg), "no detail");
    snprintf(full, sizeof(full), "%s: %s", what, msg);
    set_err(o, full, NULL);
    ERR_clear_error();
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    static const unsigned char h11[] = "\x08http/1.1";
    unsigned char *sel = NULL;

    (void)ssl;
    (void)arg;
    if (SSL_select_next_proto(&sel, outlen, h11, sizeof(h11) - 1, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

/* make_ctx builds the TLS context from PEM text. */
static int make_ctx(const struct vmg_tls_opts *o, const char *cert_pem, const char *key_pem,
                    SSL_CTX **ret)
{
    SSL_CTX *ctx = NULL;
    BIO *b = NULL;
    X509 *x = NULL;
    EVP_PKEY *k = NULL;
    int r = VMG_ECONFIG;

    ERR_clear_error();
    ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        ssl_err(o, "TLS context");
        return -ENOMEM;
    }
    if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
        !SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20")) {
        ssl_err(o, "TLS settings");
        goto out;
    }
    /* OpenSSL wipes the plaintext it decrypted (a token) once it is read. */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_NO_COMPRESSION | SSL_OP_CLEANSE_PLAINTEXT);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);

    /* The certificate, then the chain behind it. */
    b = BIO_new_mem_buf(cert_pem, -1);
    if (!b || !(x = PEM_read_bio_X509(b, NULL, NULL, NULL)) || !SSL_CTX_use_certificate(ctx, x)) {
        ssl_err(o, "TLS certificate");
        goto out;
    }
    X509_free(x);
    x = NULL;
    while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
        if (!SSL_CTX_add0_chain_cert(ctx, x)) {
            ssl_err(o, "TLS certificate chain");
            goto out;
        }
        x = NULL;
    }
    ERR_clear_error(); /* the end of the PEM text */
    BIO_free(b);
    b = BIO_new_mem_buf(key_pem, -1);
    if (!b || !(k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL)) ||
        !SSL_CTX_use_PrivateKey(ctx, k)) {
        ssl_err(o, "TLS key");
        goto out;
    }
    if (!SSL_CTX_check_private_key(ctx)) {
        ssl_err(o, "TLS key does not match the certificate");
        goto out;
    }
    *ret = ctx;
    ctx = NULL;
    r = 0;
out:
    EVP_PKEY_free(k);
    X509_free(x);
    BIO_free(b);
    SSL_CTX_free(ctx);
    return r;
}

/* pem_digest is the SHA-256 of a certificate and key's PEM text: a reload
 * of files that did not change changes nothing. */
static void pem_digest(const char *cert, const char *key, unsigned char d[32])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned int n = 0;

    memset(d, 0, 32);
    if (md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) &&
        EVP_DigestUpdate(md, cert, strlen(cert)) && EVP_DigestUpdate(md, "\0", 1) &&
        EVP_DigestUpdate(md, key, strlen(key)))
        EVP_DigestFinal_ex(md, d, &n);
    EVP_MD_CTX_free(md);
    ERR_clear_error();
}

/* setup makes t->ctx from o; t->ctx stays NULL without a certificate and
 * a key. */
static int setup(vmg_tls *t, const struct vmg_tls_opts *o)
{
    char *cert = NULL, *key = NULL;
    const char *cert_pem = o->cert_pem, *key_pem = o->key_pem;
    int r;

    if (!cert_pem && o->cert_file) {
        r = read_file(o->cert_file, &cert);
        if (r < 0) {
            set_err(o, "cannot read the TLS certificate", o->cert_file);
            goto out;
        }
        cert_pem = cert;
    }
    if (!key_pem && o->key_file) {
        r = read_file(o->key_file, &key);
        if (r < 0) {
            set_err(o, "cannot read the TLS key", o->key_file);
            goto out;
        }
        key_pem = key;
    }
    if (!cert_pem && !key_pem) {
        r = 0; /* plain HTTP */
        goto out;
    }
    if (!cert_pem || !key_pem) {
        set_err(o, "TLS needs both a certificate and a key", NULL);
        r = VMG_ECONFIG;
        goto out;
    }
    r = make_ctx(o, cert_pem, key_pem, &t->ctx);
    if (r == 0)
        pem_digest(cert_pem, key_pem, t->digest);
out:
    free(cert);
    wipe_str(key);
    return r;
}

static void tls_free(vmg_tls *t)
{
    SSL_CTX_free(t->ctx);
    free(t->cert_file);
    free(t->key_file);
    free(t);
}

int vmg_tls_new(uv_loop_t *loop, const struct vmg_tls_opts *o, vmg_tls **ret)
{
    vmg_tls *t;
    int r;

    *ret = NULL;
    t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->loop = loop;
    t->reloaded = o->reloaded;
    t->data = o->data;
    r = setup(t, o);
    if (r == 0 && t->ctx && !o->cert_pem && !o->key_pem) {
        /* From files: kept, to be read again when they change. */
        t->cert_file = strdup(o->cert_file);
        t->key_file = strdup(o->key_file);
        if (!t->cert_file || !t->key_file)
            r = -ENOMEM;
    }
    if (r < 0 || !t->ctx) {
        tls_free(t);
        return r;
    }
    *ret = t;
    return 0;
}

uint64_t vmg_tls_reloads(const vmg_tls *t)
{
    return t ? t->reloads : 0;
}

/* reload builds a TLS context from the files again and, when it works,
 * new connections get it (open ones keep theirs: SSL_CTX is counted).
 * Files unchanged since the last attempt are not reported twice. */
static void reload(vmg_tls *t)
{
    char msg[512] = "";
    struct vmg_tls_opts eo = {.errbuf = msg, .errbuf_size = sizeof(msg)};
    char *cert = NULL, *key = NULL;
    unsigned char d[32];
    SSL_CTX *ctx = NULL;
    int r;

    r = read_file(t->cert_file, &cert);
    if (r < 0) {
        snprintf(msg, sizeof(msg), "cannot read the TLS certificate %s", t->cert_file);
        goto report;
    }
    r = read_file(t->key_file, &key);
    if (r < 0) {
        snprintf(msg, sizeof(msg), "cannot read the TLS key %s", t->key_file);
        goto report;
    }
    pem_digest(cert, key, d);
    if (memcmp(d, t->digest, sizeof(d)) == 0 || memcmp(d, t->failed, sizeof(d)) == 0)
        goto out; /* nothing new */
    r = make_ctx(&eo, cert, key, &ctx);
    if (r < 0) {
        memcpy(t->failed, d, sizeof(d));
        goto report;
    }
    SSL_CTX_free(t->ctx);
    t->ctx = ctx;
    memcpy(t->digest, d, sizeof(d));
    memset(t->failed, 0, sizeof(t->failed));
    t->reloads++;
report:
    if (t->reloaded)
        t->reloaded(t->data, r, msg);
out:
    free(cert);
    wipe_str(key);
}

static void on_file(uv_fs_poll_t *h, int status, const uv_stat_t *prev, const uv_stat_t *curr)
{
    vmg_tls *t = h->data;

    (void)status; /* a file gone is reported by the reload */
    (void)prev;
    (void)curr;
    if (!t->closing)
        reload(t);
}

void vmg_tls_watch(vmg_tls *t, uint64_t interval_ms)
{
    int r;

    if (!t || !t->cert_file || t->handles > 0 || t->closing)
        return;
    uv_fs_poll_init(t->loop, &t->cert_poll); /* cannot fail */
    uv_fs_poll_init(t->loop, &t->key_poll);
    t->cert_poll.data = t->key_poll.data = t;
    t->handles = 2;
    interval_ms = interval_ms > UINT32_MAX ? UINT32_MAX : interval_ms;
    r = uv_fs_poll_start(&t->cert_poll, on_file, t->cert_file, (unsigned)interval_ms);
    if (r == 0)
        r = uv_fs_poll_start(&t->key_poll, on_file, t->key_file, (unsigned)interval_ms);
    if (r < 0 && t->reloaded) {
        char msg[512];
        snprintf(msg, sizeof(msg), "cannot watch %s and %s: %s", t->cert_file, t->key_file,
                 uv_strerror(r));
        t->reloaded(t->data, r, msg);
    }
}

static void finish_close(vmg_tls *t)
{
    void (*closed)(void *) = t->closed;
    void *data = t->closed_data;

    tls_free(t);
    if (closed)
        closed(data);
}

static void poll_closed(uv_handle_t *h)
{
    vmg_tls *t = h->data;

    if (--t->handles == 0)
        finish_close(t);
}

void vmg_tls_close(vmg_tls *t, void (*closed)(void *data), void *data)
{
    if (!t || t->closing)
        return;
    t->closing = 1;
    t->closed = closed;
    t->closed_data = data;
    if (t->handles == 0) {
        finish_close(t);
        return;
    }
    uv_close((uv_handle_t *)&t->cert_poll, poll_closed);
    uv_close((uv_handle_t *)&t->key_poll, poll_closed);
}

/* ---- a connection ---- */

vmg_tls_conn *vmg_tls_conn_new(const vmg_tls *t)
{
    vmg_tls_conn *tc = calloc(1, sizeof(*tc));

    if (!tc)
        return NULL;
    tc->ssl = SSL_new(t->ctx);
    tc->rbio = BIO_new(BIO_s_mem());
    tc->wbio = BIO_new(BIO_s_mem());
    if (!tc->ssl || !tc->rbio || !tc->wbio) {
        SSL_free(tc->ssl);
        BIO_free(tc->rbio);
        BIO_free(tc->wbio);
        ERR_clear_error();
        free(tc);
        return NULL;
    }
    BIO_set_mem_eof_return(tc->rbio, -1);
    SSL_set_bio(tc->ssl, tc->rbio, tc->wbio);
    SSL_set_accept_state(tc->ssl);
    return tc;
}

void vmg_tls_conn_free(vmg_tls_conn *tc)
{
    if (!tc)
        return;
    SSL_free(tc->ssl); /* frees the BIOs too */
    free(tc);
}

/* flush hands what OpenSSL has produced to out. */
static int flush(vmg_tls_conn *tc, vmg_tls_out_fn out, void *arg)
{
    char buf[16 * 1024];
    int n, r;

    while ((n = BIO_read(tc->wbio, buf, sizeof(buf))) > 0) {
        r = out(arg, buf, (size_t)n);
        if (r < 0)
            return r;
    }
    return 0;
}

int vmg_tls_conn_input(vmg_tls_conn *tc, const char *data, size_t n, vmg_tls_plain_fn plain,
                       vmg_tls_out_fn out, void *arg)
{
    char buf[16 * 1024];
    int r;

    if (n > 0 && BIO_write(tc->rbio, data, (int)n) != (int)n)
        return -ENOMEM;
    if (!tc->handshake_done) {
        r = SSL_do_handshake(tc->ssl);
        if (flush(tc, out, arg) < 0)
            return VMG_ETRANSPORT;
        if (r != 1) {
            int e = SSL_get_error(tc->ssl, r);
            ERR_clear_error();
            return e == SSL_ERROR_WANT_READ ? 0 : VMG_TLS_REFUSED;
        }
        tc->handshake_done = 1;
    }
    for (;;) {
        r = SSL_read(tc->ssl, buf, sizeof(buf));
        if (r <= 0)
            break;
        r = plain(arg, buf, (size_t)r);
        if (r < 0) {
            vmg_wipe(buf, sizeof(buf));
            return r;
        }
    }
    vmg_wipe(buf, sizeof(buf)); /* plaintext: a token, maybe */
    r = SSL_get_error(tc->ssl, r);
    ERR_clear_error();
    if (flush(tc, out, arg) < 0)
        return VMG_ETRANSPORT;
    if (r == SSL_ERROR_WANT_READ)
        return 0;
    return r == SSL_ERROR_ZERO_RETURN ? VMG_TLS_CLOSED : VMG_ETRANSPORT;
}

int vmg_tls_conn_write(vmg_tls_conn *tc, const char *data, size_t len, vmg_tls_out_fn out,
                       void *arg)
{
    while (len > 0) {
        int chunk = len > INT32_MAX ? INT32_MAX : (int)len;
        int n = SSL_write(tc->ssl, data, chunk);
        if (n <= 0) {
            ERR_clear_error();
            return VMG_ETRANSPORT;
        }
        data += n;
        len -= (size_t)n;
    }
    return flush(tc, out, arg);
}

int vmg_tls_conn_shutdown(vmg_tls_conn *tc, vmg_tls_out_fn out, void *arg)
{
    if (!tc->handshake_done)
        return 0;
    SSL_shutdown(tc->ssl); /* queue close_notify */
    ERR_clear_error();
    return flush(tc, out, arg);
}
