/* tls.h: the server side of TLS (1.2 and later) on OpenSSL, for lib/server:
 * the context made from a certificate chain and key in PEM, from text or
 * from files that are watched and reloaded when they change; and each
 * connection's TLS engine on memory BIOs, so that all I/O stays with the
 * caller's loop. lib/tlsgen makes certificates; this module uses them.
 *
 * Secrets: the key's PEM text and every plaintext buffer are wiped before
 * they are freed; OpenSSL is told to wipe the plaintext it decrypted.
 *
 * Not thread-safe: every call is made on the loop's thread. */
#ifndef VMG_TLS_H
#define VMG_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define VMG_TLS_MAX_PEM (1024 * 1024) /* bytes of a certificate or key file */

typedef struct vmg_tls vmg_tls;
typedef struct vmg_tls_conn vmg_tls_conn;

struct vmg_tls_opts {
    /* A certificate chain and its key, as PEM text or PEM files; text wins
     * over a file. Files are watched (see vmg_tls_watch) only when neither
     * is given as text. */
    const char *cert_pem;
    const char *key_pem;
    const char *cert_file;
    const char *key_file;
    /* Optional, with files: called after each reload attempt that found
     * the files changed, with 0 (the new certificate is in use) or a
     * negative code and a message naming the file and what is wrong with
     * it (the certificate in use is kept). */
    void (*reloaded)(void *data, int status, const char *msg);
    void *data;
    /* Optional: a buffer that receives a message when vmg_tls_new fails. */
    char *errbuf;
    size_t errbuf_size;
};

/* vmg_tls_new makes the context from o (strings are used during the call
 * only, file names copied). Returns 0 and *ret, or 0 and *ret NULL when o
 * names no certificate and no key (plain HTTP); VMG_ECONFIG (a file that
 * cannot be read or is larger than VMG_TLS_MAX_PEM, a certificate without
 * a key or the reverse, PEM that OpenSSL refuses, a key that does not
 * match) or -ENOMEM, with a message in o->errbuf. */
int vmg_tls_new(uv_loop_t *loop, const struct vmg_tls_opts *o, vmg_tls **ret);

/* vmg_tls_watch polls the files every interval_ms (a stat follows a
 * Secret's symlinks, so the ..data swap shows as a change) and reloads
 * them when either changes: new connections get the new certificate, open
 * ones keep theirs. Nothing when t was made from text. A failure to watch
 * is told to the reloaded callback. */
void vmg_tls_watch(vmg_tls *t, uint64_t interval_ms);

/* vmg_tls_reloads counts the certificates taken from changed files. */
uint64_t vmg_tls_reloads(const vmg_tls *t);

/* vmg_tls_close stops watching and frees t once its handles are closed,
 * then calls closed(data) (when not NULL); without handles, before it
 * returns. Connections made from t stay usable until they are freed.
 * NULL is fine (closed is then not called). */
void vmg_tls_close(vmg_tls *t, void (*closed)(void *data), void *data);

/* ---- a connection ---- */

/* out receives ciphertext for the peer, in order; it returns 0, or a
 * negative code that stops the call that flushes and is returned by it. */
typedef int (*vmg_tls_out_fn)(void *arg, const char *p, size_t n);
/* plain receives plaintext from the peer, in order, in a buffer wiped
 * afterwards; 0, or a negative code that stops vmg_tls_conn_input. */
typedef int (*vmg_tls_plain_fn)(void *arg, const char *p, size_t n);

/* What vmg_tls_conn_input returns besides 0 (more input wanted) and
 * negative codes (the connection must close). */
#define VMG_TLS_CLOSED 1  /* the peer's close_notify: close */
#define VMG_TLS_REFUSED 2 /* the handshake failed: its alert was flushed; close after it */

/* vmg_tls_conn_new makes the TLS engine of a new server connection with
 * t's current certificate, or NULL (out of memory). */
vmg_tls_conn *vmg_tls_conn_new(const vmg_tls *t);

/* vmg_tls_conn_free frees tc and its BIOs; NULL is fine. */
void vmg_tls_conn_free(vmg_tls_conn *tc);

/* vmg_tls_conn_input feeds n bytes of ciphertext, finishes the handshake
 * when it can, passes the plaintext to plain and the ciphertext to send
 * (handshake messages, alerts) to out. Returns 0, VMG_TLS_CLOSED,
 * VMG_TLS_REFUSED, plain's negative code, -ENOMEM, or VMG_ETRANSPORT (a
 * protocol error, or out failed). */
int vmg_tls_conn_input(vmg_tls_conn *tc, const char *data, size_t n, vmg_tls_plain_fn plain,
                       vmg_tls_out_fn out, void *arg);

/* vmg_tls_conn_write encrypts data[0..len) and passes the ciphertext to
 * out. Returns 0, VMG_ETRANSPORT, or out's code. */
int vmg_tls_conn_write(vmg_tls_conn *tc, const char *data, size_t len, vmg_tls_out_fn out,
                       void *arg);

/* vmg_tls_conn_shutdown queues close_notify (after a handshake that
 * completed; else nothing) and passes it to out. Returns 0 or out's code. */
int vmg_tls_conn_shutdown(vmg_tls_conn *tc, vmg_tls_out_fn out, void *arg);

#endif
