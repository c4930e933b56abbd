/* server.h: a small HTTP/1.1 server, plain or TLS, on a libuv loop, for the
 * operator's /metrics, /healthz and /readyz endpoints.
 *
 * Requests are parsed by the http-parser library; TLS (1.2 and later) runs
 * through OpenSSL with memory BIOs, so all I/O stays on the loop. Each
 * complete request goes to the handler, which answers it now or later with
 * vmg_server_respond(); a connection handles one request at a time (more
 * requests may be sent on it, keep-alive and pipelining, and are answered in
 * order).
 *
 * Request lifetime ("a reference" model): a request handed to the handler
 * stays valid until the handler calls vmg_server_respond() on it, which it
 * must do exactly once, even when the connection is gone meanwhile; respond
 * then only frees it. The handler may learn that the client went away, to
 * stop its work early, with vmg_server_req_on_abort(). Requests that never
 * reached the handler are freed by the server.
 *
 * Limits, so that no peer can take more than its share (every byte from the
 * network is hostile):
 * - Requests: a request whose URL and headers exceed max_header_bytes or
 *   that has more than max_headers headers is answered 431, one whose body
 *   exceeds max_body 413, a malformed one 400, and the connection is then
 *   closed.
 * - Time: a connection is closed when a request (from its first byte, or
 *   from the accept for the first request, TLS handshake included, until
 *   its response is written) takes longer than request_timeout_ms, when
 *   its headers take longer than header_timeout_ms from the request's
 *   first byte, or when it is idle between requests longer than
 *   idle_timeout_ms; a pending
 *   request is aborted then. However busy, a connection serves at most
 *   max_requests requests and lives at most max_conn_age_ms: the response
 *   that crosses either says "Connection: close" and the connection closes
 *   after it (idle at its age, it closes then). A closing connection reads
 *   and drops at most 256 KiB more of its input.
 * - Output: while a connection's unsent responses exceed max_pending_output
 *   bytes (a client that sends but does not read), the server neither reads
 *   it nor parses its pipelined requests; a connection that does not drain
 *   below the bound within request_timeout_ms is closed.
 * - Connections: at most max_conns, and at most max_conns_per_peer from one
 *   peer address (its port aside; an IPv6 address by its /64, which one
 *   host may hold whole, here and below). A new connection beyond either limit
 *   takes the place (of that peer's, for the per-peer limit) of one that
 *   was given its last answer and waits to close (the one accepted first),
 *   else of the oldest idle one: idle is between requests, or not reading
 *   its answers; those whose answers are still being written go only after
 *   those with an incomplete request. When
 *   none is idle, the one whose request, begun but incomplete (not handed
 *   to the handler), began the longest ago gives way, and failing that one
 *   that has sent nothing since the accept: the oldest of those silent for
 *   half a second or more, or else the newest. A peer that sends parts of
 *   requests cannot hold slots against a complete one, silent connections
 *   that hold slots go oldest first, and a burst of new silent ones gives
 *   way among itself, not a probe accepted just before it that is about to
 *   send (or has sent: bytes waiting to be read are not silence). One
 *   whose request is with the handler is never evicted; when nothing can
 *   give way, the new connection is closed at once.
 * - TLS handshakes: a TLS connection costs the server a handshake's
 *   cryptography before it has sent a byte of a request. A new TLS
 *   connection from a peer address beyond tls_handshakes_per_peer_per_sec
 *   (with a burst of tls_handshake_burst_per_peer) is closed at once,
 *   before any handshake work, and counted as throttled. The server counts
 *   up to VMG_SERVER_HANDSHAKE_PEERS peers apart at a time, and forgets
 *   one once its burst is whole again; a new peer while all are counted
 *   has the server's rate only. That rate, tls_handshakes_per_sec (burst
 *   tls_handshake_burst), is taken when a connection's first bytes come:
 *   beyond it, the handshake waits (its bytes kept, the connection not
 *   read) until the rate allows it, first come first served, within the
 *   request's time; counted as delayed. So a flood from many addresses
 *   costs the server no more than the rate's handshakes, a connection
 *   that sends nothing costs the rate nothing, and a new client waits its
 *   turn rather than being turned away; one whose client left meanwhile
 *   is closed at its turn, without a token. The line holds at most
 *   max_conns connections, so its wait, max_conns / rate, is to stay well
 *   within request_timeout_ms. Connections past their handshake are not
 *   touched.
 * - Memory: input buffers and unsent output of all connections together
 *   stay near max_buffered: above it, a connection that already holds bytes
 *   is not read until the total falls (one read or one response more per
 *   connection at most), so a connection holding nothing still gets in.
 * Each vmg_server has limits of its own: two servers cannot starve each
 * other.
 *
 * TLS from files (cert_file, key_file) is reloaded when either file
 * changes (polled every tls_reload_ms; a Kubernetes Secret's atomic
 * ..data symlink swap and a plain rewrite alike): new connections get the
 * new certificate, open ones keep theirs. A pair that cannot be used (half
 * written, not matching) keeps the certificate in use; tls_reloaded tells
 * the caller either way.
 *
 * Secrets: every buffer that held a request (headers such as
 * Authorization, bodies, the input buffer, TLS plaintext) is wiped before
 * it is freed.
 *
 * Not thread-safe: every call is made on the loop's thread.
 */
#ifndef VMG_SERVER_H
#define VMG_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* Defaults of the limits (a zero in the options means the default). */
#define VMG_SERVER_MAX_CONNS 64
#define VMG_SERVER_MAX_HEADER_BYTES (16 * 1024)
#define VMG_SERVER_MAX_HEADERS 64
#define VMG_SERVER_MAX_BODY (64 * 1024)
#define VMG_SERVER_REQUEST_TIMEOUT_MS 10000
#define VMG_SERVER_IDLE_TIMEOUT_MS 60000
#define VMG_SERVER_MAX_CONNS_PER_PEER 16 /* never more than max_conns */
#define VMG_SERVER_MAX_PENDING_OUTPUT (64 * 1024)
#define VMG_SERVER_MAX_BUFFERED (8 * 1024 * 1024)
#define VMG_SERVER_MAX_REQUESTS 1000
#define VMG_SERVER_MAX_CONN_AGE_MS (10 * 60 * 1000)
#define VMG_SERVER_TLS_RELOAD_MS 5000
#define VMG_SERVER_HANDSHAKES_PER_SEC 200.0
#define VMG_SERVER_HANDSHAKES_PER_PEER_PER_SEC 20.0
/* Bounds that are not options. */
#define VMG_SERVER_MAX_PEM (1024 * 1024)        /* = VMG_TLS_MAX_PEM: bytes of a PEM file */
#define VMG_SERVER_MAX_EXTRA_HEADERS (8 * 1024) /* bytes of a response's extra headers */
#define VMG_SERVER_HANDSHAKE_PEERS 256          /* peers whose handshakes are counted apart */

typedef struct vmg_server vmg_server;
typedef struct vmg_server_req vmg_server_req;

/* The handler gets every complete request; see the lifetime rule above. */
typedef void (*vmg_server_handler)(void *data, vmg_server_req *req);

struct vmg_server_opts {
    /* "host:port", "[v6]:port" or ":port" (all interfaces, IPv6 and IPv4
     * when the host has IPv6); the host is a numeric address or
     * "localhost"; port 0 picks a free port (see vmg_server_port). */
    const char *addr;
    /* TLS: a certificate chain and its key, as PEM text (cert_pem,
     * key_pem) or as PEM files (cert_file, key_file); text wins when both
     * are given. No certificate and no key: plain HTTP. */
    const char *cert_pem;
    const char *key_pem;
    const char *cert_file;
    const char *key_file;
    /* Limits; 0 means the default above. */
    size_t max_conns;
    size_t max_header_bytes;
    size_t max_headers;
    size_t max_body;
    uint64_t request_timeout_ms;
    /* From a request's first byte until its headers are complete (within
     * request_timeout_ms); 0: request_timeout_ms. */
    uint64_t header_timeout_ms;
    uint64_t idle_timeout_ms;
    size_t max_conns_per_peer;
    size_t max_pending_output;
    size_t max_buffered;
    size_t max_requests;
    uint64_t max_conn_age_ms;
    uint64_t tls_reload_ms;
    /* TLS handshakes a second, for the server (they wait beyond it) and
     * from one peer (refused beyond it); 0 means the default above, a
     * negative rate (or NaN) no limit. A burst of 0 is twice the rate (at
     * least 1). */
    double tls_handshakes_per_sec;
    double tls_handshakes_per_peer_per_sec;
    uint32_t tls_handshake_burst;
    uint32_t tls_handshake_burst_per_peer;
    /* The handler; NULL answers 404 to everything. */
    vmg_server_handler handler;
    void *data;
    /* Optional, with TLS from files: called after each reload attempt that
     * found the files changed, with 0 (new connections use the new
     * certificate) or a negative code and a message naming the file and
     * what is wrong with it (the certificate in use is kept). */
    void (*tls_reloaded)(void *data, int status, const char *msg);
    /* Optional: a buffer that receives a message when vmg_server_new fails. */
    char *errbuf;
    size_t errbuf_size;
};

/* vmg_server_new binds, listens and returns the server, or NULL with *err
 * set (err may be NULL): -EINVAL for bad options, VMG_ECONFIG for an
 * address, certificate or key that cannot be used, a negated errno from
 * binding (-EADDRINUSE, -EACCES, ...) or -ENOMEM. Strings in opts are
 * copied or used during the call only. */
vmg_server *vmg_server_new(uv_loop_t *loop, const struct vmg_server_opts *opts, int *err);

/* vmg_server_port returns the port the server listens on, or -1. */
int vmg_server_port(const vmg_server *s);

/* vmg_server_connections returns the number of open connections. */
size_t vmg_server_connections(const vmg_server *s);

/* What the limits did, for metrics and tests. */
struct vmg_server_stats {
    size_t connections; /* open now */
    size_t buffered;    /* bytes of input buffers and unsent output, all connections */
    size_t peak_buffered;
    size_t paused;        /* connections not read now (output or memory bound, or a handshake
                             waiting for the rate) */
    uint64_t evicted;     /* idle or incomplete connections closed to let a new one in */
    uint64_t refused;     /* new connections closed at once: nothing idle to evict */
    uint64_t throttled;   /* new TLS connections closed at once: over their peer's handshake rate */
    uint64_t delayed;     /* TLS connections whose handshake waited for the server's rate */
    uint64_t drained;     /* closed for not reading their answers in time */
    uint64_t retired;     /* closed at max_requests or max_conn_age_ms */
    uint64_t tls_reloads; /* certificates taken from changed files */
};

/* vmg_server_get_stats fills *ret (zeros for a NULL server). */
void vmg_server_get_stats(const vmg_server *s, struct vmg_server_stats *ret);

/* vmg_server_close stops listening and closes every connection (pending
 * requests are aborted: their abort callbacks run before this returns);
 * once the loop has run the close callbacks, the server is freed and
 * closed(data) runs when closed is not NULL. s must not be used after this
 * call; NULL is fine (closed is then not called). */
void vmg_server_close(vmg_server *s, void (*closed)(void *data), void *data);

/* The request, valid until vmg_server_respond(). Strings are NUL-terminated
 * and owned by the request. */
const char *vmg_server_req_method(const vmg_server_req *r); /* "GET" */
/* The path of the URL, as sent (not percent-decoded), without the query;
 * "/" when the URL has none. */
const char *vmg_server_req_path(const vmg_server_req *r);
const char *vmg_server_req_query(const vmg_server_req *r); /* "" when none */
/* vmg_server_req_header returns the value of the first header called name
 * (case-insensitive), without surrounding blanks, or NULL. */
const char *vmg_server_req_header(const vmg_server_req *r, const char *name);
/* The peer's address: "127.0.0.1:40000" or "[::1]:40000". */
const char *vmg_server_req_peer(const vmg_server_req *r);
/* The body (NUL-terminated, for convenience) and its length. */
const char *vmg_server_req_body(const vmg_server_req *r, size_t *ret_len);
/* vmg_server_req_aborted tells whether the connection is gone. */
int vmg_server_req_aborted(const vmg_server_req *r);

/* vmg_server_req_on_abort sets fn(data, r), called once if the connection
 * closes before the answer (the client left, a timeout, or
 * vmg_server_close). fn may call vmg_server_respond(r); if it does not, r
 * stays valid until the handler responds. fn must not close the server. */
void vmg_server_req_on_abort(vmg_server_req *r, void (*fn)(void *data, vmg_server_req *r),
                             void *data);

/* vmg_server_req_add_header adds a header to the response to come. Returns
 * 0, -EINVAL (a name that is not a token, or one the server sets itself:
 * Content-Length, Content-Type, Connection, Transfer-Encoding; a value
 * with CR or LF) or VMG_ETOOBIG (above VMG_SERVER_MAX_EXTRA_HEADERS). */
int vmg_server_req_add_header(vmg_server_req *r, const char *name, const char *value);

/* vmg_server_respond answers r with status (100..599; otherwise 500),
 * Content-Type content_type (none when NULL) and a copy of body[0..len),
 * and frees r, in every case. Returns 0, or VMG_ECANCELED when the
 * connection is gone (the answer is dropped), or -ENOMEM (the connection
 * is closed). */
int vmg_server_respond(vmg_server_req *r, int status, const char *content_type, const void *body,
                       size_t len);

#endif
