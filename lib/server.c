/* server.c: the HTTP/1.1 (and TLS) server on libuv (see server.h).
 *
 * Each connection keeps the plaintext it has received but not parsed yet in
 * a buffer sized to what it holds: every read lands in one buffer of the
 * server's, wiped after each, and what it brings is added. TLS connections
 * first pass what arrives through their lib/tls engine, and every byte of
 * ciphertext it produces is written to the socket at once. The requests
 * are parsed by lib/server_req, which stops at the end of every request;
 * the request is then handed to the handler, and the rest of the buffer is
 * parsed once the response is written. Reading goes on meanwhile, so that
 * a client leaving is noticed, up to a bound on the buffer.
 *
 * Every byte of a connection's input buffer and unsent output is counted,
 * per connection (out_pending) and for the server (buffered): reading and
 * parsing stop at the bounds and resume when the writes complete. Buffers
 * that held request bytes are wiped before they are freed; none is grown
 * with realloc, which could leave a copy behind.
 */
#include "lib/server.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <http_parser.h>

#include "lib/bucket.h"
#include "lib/buf.h"
#include "lib/err.h"
#include "lib/queue.h"
#include "lib/server_req.h"
#include "lib/tls.h"

#define READ_CHUNK (64 * 1024)
#define IN_MIN 1024               /* a connection's first input buffer */
#define LINGER_MS 2000            /* how long a closing connection drains input */
#define LINGER_BYTES (256 * 1024) /* and how much of it, at most */
#define SILENT_GRACE_MS 500       /* a new connection's time to send before it is the first to go */

/* What the connection's one timer bounds: a request, the wait between two,
 * unsent output over the bound (the client does not read), the drain
 * before the close. */
enum timer_mode { T_NONE, T_REQUEST, T_HEADERS, T_IDLE, T_DRAIN, T_LINGER };

struct conn {
    uv_tcp_t tcp; /* first: alloc_cb and read_cb cast the handle to the conn */
    uv_timer_t timer;
    vmg_server *srv;
    struct lq link; /* in srv->conns */
    int handles;    /* libuv handles not closed yet */
    int closing;
    int reading;
    int in_process;
    int close_after_write; /* no more requests: close once writes are done */
    int lingering;         /* output shut down, input drained until EOF */
    size_t lingered;       /* bytes drained and dropped while lingering */
    enum timer_mode mode;
    uint64_t born;          /* loop time of the accept */
    uint64_t req_start;     /* loop time the request timer runs from */
    uint64_t first_byte;    /* loop time of the request's first byte */
    uint64_t idle_since;    /* loop time of the last answer (or the accept) */
    size_t served;          /* requests handed to the handler */
    size_t out_pending;     /* bytes of uv_write requests in flight */
    struct vmg_reqparse rp; /* the request being parsed: rp.req */
    size_t writes;          /* uv_write requests in flight */
    vmg_tls_conn *tls;      /* NULL for plain HTTP */
    int got_bytes;          /* something was read from the socket since the accept */
    int hs_token;           /* TLS: may start its handshake (the server's rate allowed it) */
    int hs_waiting;         /* TLS: its first bytes wait in `in` for the server's rate */
    struct lq hs_link;      /* in srv->hs_waiting while hs_waiting */
    uint64_t seq;           /* the order of the accept */
    char *in;               /* plaintext received, not parsed yet */
    size_t in_len;
    size_t in_cap;
    vmg_server_req *active; /* with the handler, waiting for its answer */
    char peer[64];
    char host[64]; /* whose limits it counts against: the peer's address
                      without the port, an IPv6 one's /64 (one host may hold
                      it whole) */
};

struct vmg_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    int handles; /* open libuv handles: the listener, connections, refused ones */
    int closing;
    int port;
    vmg_tls *tls;    /* NULL for plain HTTP */
    struct lq conns; /* every connection not freed yet, newest first */
    size_t nconns;   /* allocated, closing ones included */
    size_t open;     /* not closing */
    size_t max_conns;
    size_t max_conns_per_peer;
    size_t max_header_bytes;
    size_t max_headers;
    size_t max_body;
    size_t max_pending_output;
    size_t max_buffered;
    size_t max_requests;
    uint64_t request_timeout_ms;
    uint64_t header_timeout_ms;
    uint64_t idle_timeout_ms;
    uint64_t max_conn_age_ms;
    size_t buffered;   /* input buffers and unsent output of every connection */
    uint64_t accepted; /* connections accepted, for conn.seq */
    int over_budget;   /* buffered went above max_buffered: some reads stopped */
    int resuming;
    struct vmg_server_stats stats;
    vmg_server_handler handler;
    void *data;
    void (*closed)(void *data);
    void *closed_data;
    /* Every read lands here first: libuv calls read_cb right after
     * alloc_cb, one connection at a time, so one buffer serves them all,
     * and a connection's input buffer grows by what it received, not by
     * a whole chunk a read. Wiped after each read. */
    int scratch_busy;
    char scratch[READ_CHUNK];
    /* TLS handshakes allowed: the server's, and the recent peers' (an
     * entry whose bucket is full again is free: it is as good as new). */
    struct vmg_bucket hs_all;
    struct lq hs_waiting; /* connections whose handshake waits for hs_all, first come first */
    uv_timer_t hs_timer;  /* when hs_all has a token for the first of them */
    double hs_peer_qps;
    uint32_t hs_peer_burst;
    struct hs_peer {
        char host[64];
        struct vmg_bucket b;
    } hs_peers[VMG_SERVER_HANDSHAKE_PEERS];
};

struct wreq {
    uv_write_t req;
    struct conn *conn;
    size_t len;
    char data[];
};

static void conn_close(struct conn *c);
static void process_input(struct conn *c);
static void update_reading(struct conn *c);

/* ---- helpers ---- */

/* set_err writes "msg" or "msg detail" to the caller's error buffer. */
static void set_err(const struct vmg_server_opts *o, const char *msg, const char *detail)
{
    if (o && o->errbuf && o->errbuf_size > 0)
        snprintf(o->errbuf, o->errbuf_size, "%s%s%s", msg, detail ? " " : "", detail ? detail : "");
}

/* account adds add and takes sub bytes from the server's buffered total. */
static void account(vmg_server *s, size_t add, size_t sub)
{
    s->buffered = s->buffered + add - sub;
    if (s->buffered > s->stats.peak_buffered)
        s->stats.peak_buffered = s->buffered;
    if (s->buffered > s->max_buffered)
        s->over_budget = 1;
}

/* out_blocked: c's unsent output is over its bound, or c holds some while
 * the server is over its budget. Such a connection is neither read nor
 * parsed until its writes complete. */
static int out_blocked(const struct conn *c)
{
    const vmg_server *s = c->srv;

    return c->out_pending > s->max_pending_output ||
           (c->out_pending > 0 && s->buffered > s->max_buffered);
}

/* in_resize moves c's input to a new buffer of cap bytes (cap >= in_len;
 * 0 frees it), wiping the old one. */
static int in_resize(struct conn *c, size_t cap)
{
    char *ni = NULL;

    if (cap > 0) {
        ni = malloc(cap);
        if (!ni)
            return -ENOMEM;
        if (c->in_len)
            memcpy(ni, c->in, c->in_len);
    }
    vmg_wipe_free(c->in, c->in_cap);
    account(c->srv, cap, c->in_cap);
    c->in = ni;
    c->in_cap = cap;
    return 0;
}

/* maybe_resume goes on with the connections the server's budget stopped,
 * once the total is back under it. */
static void maybe_resume(vmg_server *s)
{
    if (!s->over_budget || s->buffered > s->max_buffered || s->resuming || s->closing)
        return;
    s->over_budget = 0;
    s->resuming = 1; /* not re-entered from a handler that answers at once */
    struct lq *p;

    lq_foreach(p, &s->conns)
    {
        struct conn *c = lq_entry(p, struct conn, link);
        if (!c->closing)
            process_input(c); /* parses what it may, and reads again */
    }
    s->resuming = 0;
}

static void timer_fired(uv_timer_t *t)
{
    struct conn *c = t->data;

    if (c->mode == T_DRAIN)
        c->srv->stats.drained++;
    else if (c->mode == T_IDLE && uv_now(c->srv->loop) - c->born >= c->srv->max_conn_age_ms)
        c->srv->stats.retired++;
    conn_close(c);
}

static void set_timer(struct conn *c, enum timer_mode mode)
{
    uint64_t ms = 0;

    if (c->closing)
        return;
    c->mode = mode;
    switch (mode) {
    case T_REQUEST:
    case T_HEADERS: {
        /* What is left of the request's time; the headers have their own
         * bound from the request's first byte, within it. */
        uint64_t now = uv_now(c->srv->loop), spent = now - c->req_start;
        ms = spent < c->srv->request_timeout_ms ? c->srv->request_timeout_ms - spent : 0;
        if (mode == T_HEADERS && c->srv->header_timeout_ms < ms)
            ms = c->srv->header_timeout_ms;
        break;
    }
    case T_IDLE: {
        /* Never beyond the connection's maximum age. */
        uint64_t now = uv_now(c->srv->loop), end = c->born + c->srv->max_conn_age_ms;
        ms = c->srv->idle_timeout_ms;
        if (end <= now)
            ms = 0;
        else if (end - now < ms)
            ms = end - now;
        break;
    }
    case T_DRAIN:
        ms = c->srv->request_timeout_ms;
        break;
    case T_LINGER:
        ms = c->srv->request_timeout_ms < LINGER_MS ? c->srv->request_timeout_ms : LINGER_MS;
        break;
    case T_NONE:
        uv_timer_stop(&c->timer);
        return;
    }
    uv_timer_start(&c->timer, timer_fired, ms, 0);
}

/* ---- output ---- */

static void after_shutdown(uv_shutdown_t *req, int status)
{
    free(req);
}

/* start_linger ends output (FIN) and drains input until EOF or a short
 * timer, so that the client reads the last answer before the close. */
static void start_linger(struct conn *c)
{
    uv_shutdown_t *sr;

    if (c->closing || c->lingering)
        return;
    c->lingering = 1;
    sr = malloc(sizeof(*sr));
    if (!sr || uv_shutdown(sr, (uv_stream_t *)&c->tcp, after_shutdown) < 0) {
        free(sr);
        conn_close(c);
        return;
    }
    /* While writes are in flight the request timer bounds them. */
    if (c->writes == 0)
        set_timer(c, T_LINGER);
    update_reading(c);
}

static void after_write(uv_write_t *req, int status)
{
    struct wreq *w = (struct wreq *)req;
    struct conn *c = w->conn;
    vmg_server *s = c->srv;
    size_t len = w->len;

    vmg_wipe_free(w, sizeof(*w) + len);
    c->writes--;
    c->out_pending -= len;
    account(s, 0, len);
    if (c->closing) {
        maybe_resume(s);
        return;
    }
    if (status < 0) {
        conn_close(c);
        maybe_resume(s);
        return;
    }
    if (c->writes == 0 && c->lingering) {
        set_timer(c, T_LINGER); /* all sent: now wait briefly for the client's FIN */
    } else if (c->mode == T_DRAIN && !out_blocked(c) && !c->close_after_write) {
        /* The client reads again: on with its pipelined requests (a last
         * answer's writes keep their time: there are none after it). */
        set_timer(c, T_IDLE);
        process_input(c);
    }
    maybe_resume(s);
}

static int raw_write(struct conn *c, const char *data, size_t len)
{
    struct wreq *w;
    uv_buf_t buf;
    int r;

    if (c->closing)
        return VMG_ECANCELED;
    w = malloc(sizeof(*w) + len);
    if (!w)
        return -ENOMEM;
    w->conn = c;
    w->len = len;
    memcpy(w->data, data, len);
    buf = uv_buf_init(w->data, (unsigned)len);
    r = uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, after_write);
    if (r < 0) {
        free(w);
        return r;
    }
    c->writes++;
    c->out_pending += len;
    account(c->srv, len, 0);
    return 0;
}

/* tls_out is the TLS engine's output: ciphertext for the socket. */
static int tls_out(void *arg, const char *p, size_t n)
{
    return raw_write(arg, p, n);
}

/* conn_write sends plaintext: through TLS when the connection has it. */
static int conn_write(struct conn *c, const char *data, size_t len)
{
    if (c->closing)
        return VMG_ECANCELED;
    if (!c->tls)
        return raw_write(c, data, len);
    return vmg_tls_conn_write(c->tls, data, len, tls_out, c);
}

/* finish_output: no more requests on c; it closes once writes are done. */
static void finish_output(struct conn *c)
{
    c->close_after_write = 1;
    if (c->tls && vmg_tls_conn_shutdown(c->tls, tls_out, c) < 0) { /* close_notify */
        conn_close(c);
        return;
    }
    start_linger(c); /* the FIN follows the writes in flight */
}

/* send_error answers a request the server refuses, and closes. */
static void send_error(struct conn *c, int status)
{
    char buf[256];
    const char *reason = http_status_str((enum http_status)status);
    int n;

    vmg_reqparse_drop(&c->rp);
    /* Until the answer is written and the client gone, the request's time
     * bounds the connection: garbage sent between two requests is no
     * request begun, and the idle timeout would be far longer. */
    if (c->mode != T_REQUEST && c->mode != T_HEADERS) {
        c->req_start = uv_now(c->srv->loop);
        set_timer(c, T_REQUEST);
    }
    n = snprintf(buf, sizeof(buf),
                 "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n",
                 status, reason, strlen(reason) + 1, reason);
    if (conn_write(c, buf, (size_t)n) < 0) {
        conn_close(c);
        return;
    }
    finish_output(c);
}

/* ---- the parse's events ---- */

/* on_begun: a request's first byte; its headers' time runs from now. */
static void on_begun(void *arg)
{
    struct conn *c = arg;

    c->first_byte = uv_now(c->srv->loop);
    if (c->mode != T_REQUEST)
        c->req_start = c->first_byte;
    set_timer(c, T_HEADERS);
}

/* on_headers: the headers are in: the request's own bound only, and the
 * "100 Continue" the client may wait for. */
static int on_headers(void *arg, int expect_continue)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    struct conn *c = arg;

    set_timer(c, T_REQUEST);
    if (expect_continue && conn_write(c, cont, sizeof(cont) - 1) < 0)
        return -1;
    return 0;
}

/* ---- input ---- */

static void dispatch(struct conn *c)
{
    vmg_server_req *r = vmg_reqparse_take(&c->rp);
    vmg_server *s = c->srv;

    c->active = r;
    c->served++;
    r->conn = c;
    if (s->handler)
        s->handler(s->data, r);
    else
        vmg_server_respond(r, 404, "text/plain; charset=utf-8", "not found\n", 10);
}

/* process_input parses buffered plaintext and dispatches complete requests,
 * one at a time, while the unsent output is within its bound. Not
 * re-entered: a synchronous answer continues the loop. The parsed bytes
 * leave the buffer once, at the end (a flood of small pipelined requests
 * costs no copy of the buffer each). */
static void process_input(struct conn *c)
{
    size_t off = 0;

    if (c->in_process || c->hs_waiting) /* TLS bytes wait for the rate: no plaintext yet */
        return;
    c->in_process = 1;
    while (!c->closing && !c->active && !c->close_after_write && off < c->in_len &&
           !out_blocked(c)) {
        size_t n = vmg_reqparse_execute(&c->rp, c->in + off, c->in_len - off);
        int status;

        off += n < c->in_len - off ? n : c->in_len - off;
        if (c->rp.req && c->rp.req->complete) {
            if (!c->rp.req->keep_alive || c->rp.parser.upgrade)
                off = c->in_len; /* nothing after this request is parsed */
            dispatch(c);
            continue;
        }
        status = vmg_reqparse_status(&c->rp);
        if (status) {
            off = c->in_len;
            send_error(c, status);
            break;
        }
    }
    if (c->closing) {
        /* Closed by what ran in the loop (a failed write, the handler
         * closing the server): its input is gone already. */
        c->in_process = 0;
        return;
    }
    if (off > 0) {
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
    }
    c->in_process = 0;
    if (c->in_len == 0 && c->in_cap > 0)
        in_resize(c, 0); /* an idle connection holds no buffer */
    update_reading(c);
    maybe_resume(c->srv);
}

/* scratch_take lends s->scratch for n bytes (n <= READ_CHUNK), or, should
 * it be lent already (libuv does not read while a read is handled), a
 * buffer of its own; NULL when none can be had. scratch_give wipes the n
 * bytes used and gives it back. */
static char *scratch_take(vmg_server *s, size_t n)
{
    if (!s->scratch_busy) {
        s->scratch_busy = 1;
        return s->scratch;
    }
    return malloc(n ? n : 1);
}

static void scratch_give(vmg_server *s, char *p, size_t n)
{
    if (p == s->scratch) {
        vmg_wipe(p, n);
        s->scratch_busy = 0;
    } else {
        vmg_wipe_free(p, n);
    }
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    char *p = scratch_take(((struct conn *)h)->srv, READ_CHUNK);

    (void)suggested;
    *buf = uv_buf_init(p, p ? READ_CHUNK : 0);
}

/* in_reserve makes room for n more bytes of input: the buffer grows to
 * twice its size, within the most update_reading lets in, or to what n
 * needs if that is more. */
static int in_reserve(struct conn *c, size_t n)
{
    vmg_server *s = c->srv;
    size_t need = c->in_len + n, most = s->max_header_bytes + s->max_body + READ_CHUNK, cap;

    if (c->in_cap >= need)
        return 0;
    cap = c->in_cap < IN_MIN ? IN_MIN : c->in_cap < most / 2 ? 2 * c->in_cap : most;
    return in_resize(c, cap > need ? cap : need);
}

/* tls_plain moves plaintext from the TLS engine into the input buffer. */
static int tls_plain(void *arg, const char *p, size_t n)
{
    struct conn *c = arg;

    if (in_reserve(c, n) < 0)
        return -ENOMEM;
    memcpy(c->in + c->in_len, p, n);
    c->in_len += n;
    return 0;
}

/* tls_input feeds n bytes of ciphertext to the TLS engine. Returns 0, or
 * nonzero when the connection must close (VMG_TLS_CLOSED for a clean
 * close_notify). */
static int tls_input(struct conn *c, const char *data, size_t n)
{
    int r = vmg_tls_conn_input(c->tls, data, n, tls_plain, tls_out, c);

    if (r == VMG_TLS_REFUSED) {
        /* Let the alert the engine sent reach the client, then close. */
        c->close_after_write = 1;
        c->in_len = 0;
        start_linger(c);
        return 0;
    }
    return r;
}

/* ---- TLS handshakes, at the server's rate ---- */

static void hs_fired(uv_timer_t *t);

/* handshake_start: the first bytes (data, n) of c, a TLS connection, have
 * come. Returns 1 when the server's rate lets its handshake start now
 * (the bytes go to the TLS engine), else 0: the bytes wait in c->in, c is
 * no longer read, and it joins the line of those waiting, first come
 * first served (or is closed when its bytes cannot be kept). Nothing is
 * taken of the rate by a connection that sends nothing. */
static int handshake_start(struct conn *c, const char *data, size_t n)
{
    vmg_server *s = c->srv;

    if (!c->hs_waiting && lq_empty(&s->hs_waiting) &&
        vmg_bucket_take(&s->hs_all, uv_now(s->loop)) == 0) {
        c->hs_token = 1;
        return 1;
    }
    if (in_reserve(c, n) < 0) {
        conn_close(c);
        return 0;
    }
    memcpy(c->in + c->in_len, data, n);
    c->in_len += n;
    if (!c->hs_waiting) {
        c->hs_waiting = 1;
        lq_insert_tail(&s->hs_waiting, &c->hs_link);
        s->stats.delayed++;
    }
    update_reading(c);
    /* Served from the timer, outside this read. */
    if (!uv_is_active((uv_handle_t *)&s->hs_timer))
        uv_timer_start(&s->hs_timer, hs_fired, 0, 0);
    return 0;
}

/* hs_feed starts the handshake of c, whose first bytes waited in c->in. */
static void hs_feed(struct conn *c)
{
    vmg_server *s = c->srv;
    size_t n = c->in_len;
    char *p = scratch_take(s, n);
    int r;

    if (!p) {
        conn_close(c);
        return;
    }
    memcpy(p, c->in, n); /* the TLS engine's plaintext goes to c->in */
    c->in_len = 0;
    r = tls_input(c, p, n);
    scratch_give(s, p, n);
    if (r != 0) {
        conn_close(c);
        return;
    }
    process_input(c); /* reads again */
}

/* peek looks at what waits in the kernel for c, taking nothing: 1 bytes,
 * 0 the client's end (FIN), -1 nothing yet, -2 an error (a reset) or no
 * socket. */
static int peek(const struct conn *c)
{
    uv_os_fd_t fd;
    char b;
    ssize_t k;

    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) != 0)
        return -2;
    k = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (k >= 0)
        return k > 0;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -1 : -2;
}

/* client_left: c, not read while it waits, was closed or reset by its
 * client meanwhile. */
static int client_left(const struct conn *c)
{
    int k = peek(c);

    return k == 0 || k == -2;
}

/* hs_pump starts the handshakes waiting, first come first served, while
 * the server's rate has tokens; then the timer waits for the next. One
 * whose client left is closed without a token. */
static void hs_pump(vmg_server *s)
{
    uint64_t wait = 0;

    while (!s->closing && !lq_empty(&s->hs_waiting)) {
        struct conn *c = lq_entry(lq_head(&s->hs_waiting), struct conn, hs_link);
        if (client_left(c)) {
            conn_close(c); /* leaves the line */
            continue;
        }
        if ((wait = vmg_bucket_take(&s->hs_all, uv_now(s->loop))) != 0)
            break;
        lq_remove(&c->hs_link);
        c->hs_waiting = 0;
        c->hs_token = 1;
        hs_feed(c);
    }
    if (!s->closing && !lq_empty(&s->hs_waiting))
        uv_timer_start(&s->hs_timer, hs_fired, wait, 0);
}

static void hs_fired(uv_timer_t *t)
{
    hs_pump(t->data);
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = (struct conn *)stream;
    vmg_server *s = c->srv;

    if (c->closing)
        goto out;
    if (nread < 0) {
        /* EOF or an error: the client is gone (or half-closed; a pending
         * request is aborted either way). */
        conn_close(c);
        goto out;
    }
    if (nread == 0)
        goto out;
    c->got_bytes = 1;
    if (c->lingering) {
        /* Drained and dropped, up to a bound: a client that keeps sending
         * to a closing connection is cut off. */
        c->lingered += (size_t)nread;
        if (c->lingered > LINGER_BYTES)
            conn_close(c);
        goto out;
    }
    if (c->tls && !c->hs_token && !handshake_start(c, buf->base, (size_t)nread)) {
        goto out; /* waits, its bytes kept */
    } else if (c->tls) {
        int r = tls_input(c, buf->base, (size_t)nread);
        if (r != 0) {
            conn_close(c);
            goto out;
        }
    } else {
        if (in_reserve(c, (size_t)nread) < 0) {
            conn_close(c);
            goto out;
        }
        memcpy(c->in + c->in_len, buf->base, (size_t)nread);
        c->in_len += (size_t)nread;
    }
    process_input(c);
out:
    /* Ciphertext, plaintext now in c->in, or input dropped: a request's
     * bytes all the same. The server outlives this call: c's handles are
     * not closed yet. */
    scratch_give(s, buf->base, nread > 0 ? (size_t)nread : 0);
}

/* update_reading reads while there is room: the buffer holds less than
 * max_header_bytes + max_body, the unsent output is within its bound, and
 * the server within its budget unless c holds nothing yet (or the
 * connection is draining before its close). */
static void update_reading(struct conn *c)
{
    vmg_server *s = c->srv;
    size_t cap = s->max_header_bytes + s->max_body + READ_CHUNK;
    int want = c->lingering || (!c->hs_waiting && c->in_len < cap && !out_blocked(c) &&
                                !(s->buffered > s->max_buffered && c->in_len > 0));

    if (c->closing)
        return; /* uv_close stops reading */

    if (want && !c->reading) {
        if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) == 0)
            c->reading = 1;
    } else if (!want && c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = 0;
    }
}

/* ---- connections ---- */

static void maybe_free_server(vmg_server *s)
{
    if (!s->closing || s->handles > 0)
        return;
    void (*closed)(void *) = s->closed;
    void *data = s->closed_data;
    free(s);
    if (closed)
        closed(data);
}

static void conn_handle_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    vmg_server *s = c->srv;

    if (--c->handles > 0)
        return;
    lq_remove(&c->link);
    s->nconns--;
    vmg_tls_conn_free(c->tls);
    in_resize(c, 0);
    vmg_wipe_free(c, sizeof(*c));
    s->handles--;
    maybe_resume(s);
    maybe_free_server(s);
}

static void conn_close(struct conn *c)
{
    vmg_server_req *r;

    if (c->closing)
        return;
    c->closing = 1;
    c->srv->open--;
    if (c->hs_waiting) {
        lq_remove(&c->hs_link);
        c->hs_waiting = 0;
    }
    vmg_reqparse_drop(&c->rp);
    /* Nothing reads it again: its input goes now, not when libuv has
     * closed its handles, so the budget and the stats see it gone. */
    c->in_len = 0;
    in_resize(c, 0);
    r = c->active;
    c->active = NULL;
    uv_close((uv_handle_t *)&c->tcp, conn_handle_closed);
    uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
    if (r) {
        r->conn = NULL;
        if (r->on_abort) {
            void (*fn)(void *, vmg_server_req *) = r->on_abort;
            r->on_abort = NULL;
            fn(r->abort_data, r);
        }
    }
}

static void refused_closed(uv_handle_t *h)
{
    vmg_server *s = h->data;

    free(h);
    s->handles--;
    maybe_free_server(s);
}

static void format_peer(struct conn *c)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;

    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET) {
            const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
            uv_ip4_name(a, host, sizeof(host));
            port = ntohs(a->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
            uv_ip6_name(a, host, sizeof(host));
            port = ntohs(a->sin6_port);
            snprintf(c->peer, sizeof(c->peer), "[%s]:%d", host, port);
            snprintf(c->host, sizeof(c->host), "%s", host);
            if (!IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
                struct sockaddr_in6 net = *a;
                memset(net.sin6_addr.s6_addr + 8, 0, 8);
                uv_ip6_name(&net, host, sizeof(host));
                snprintf(c->host, sizeof(c->host), "%s/64", host);
            }
            return;
        }
    }
    snprintf(c->peer, sizeof(c->peer), "%s:%d", host, port);
    snprintf(c->host, sizeof(c->host), "%s", host);
}

/* answered: c was given its last answer and closes once it is written and
 * the client has gone (or a short linger has passed): it serves nothing
 * more, and gives way first once that answer is written. A peer that sends
 * requests and never closes would otherwise hold a slot each until their
 * lingers end. */
static int answered(const struct conn *c)
{
    return !c->closing && !c->active && (c->lingering || c->close_after_write);
}

/* evictable: c may give way to a new connection, after the answered ones.
 * It has no request with the handler or half received, and is idle
 * between requests (nothing buffered; its answers may still be on their
 * way: it gives way after those whose answers are written), or does not
 * read its answers (whatever it pipelined behind them). */
static int evictable(const struct conn *c)
{
    if (c->closing || c->lingering || c->close_after_write || c->active || c->rp.req)
        return 0;
    return (c->mode == T_IDLE && c->in_len == 0) || c->mode == T_DRAIN;
}

/* unread_input: c was accepted and never read from, and bytes of it wait in
 * the kernel. In a burst of new connections, libuv accepts them all before
 * it reads from any: a probe's request that has already arrived must not
 * make its connection look silent. */
static int unread_input(const struct conn *c)
{
    return c->reading && !c->got_bytes && peek(c) == 1;
}

/* incomplete: c's request is on its way and has not reached the handler:
 * 1 when it has begun and is not complete (a peer that sends part of a
 * request and stops holds a slot with it), 2 when nothing of it has come
 * since the accept (nothing sent yet, a TLS handshake, or one waiting
 * for the server's rate); *since is when it began, or the accept. 0
 * otherwise, as for a connection whose first bytes have arrived and are
 * about to be read. */
static int incomplete(const struct conn *c, uint64_t *since)
{
    if (c->closing || c->lingering || c->close_after_write || c->active)
        return 0;
    if (c->rp.req) {
        *since = c->first_byte;
        return c->rp.req->complete ? 0 : 1;
    }
    *since = c->born;
    if (c->mode != T_REQUEST && c->mode != T_HEADERS)
        return 0;
    return unread_input(c) ? 0 : 2;
}

/* oldest_idle returns the connection to give way, of peer host when host
 * is not NULL, other than except, or NULL: the answered one accepted
 * first, its answer written; failing that, the evictable one idle the
 * longest, its answers written; failing that, the one whose incomplete
 * request began the longest ago; failing that, the same first two whose
 * answers are still on their way (closing them cuts the answers); failing
 * that, one that has sent nothing yet: the one accepted the longest ago among
 * those silent for SILENT_GRACE_MS or more, or else the one accepted last.
 * A burst of silent connections thus makes its own members give way, not
 * a probe accepted just before it that has yet to send its request, while
 * silent connections that hold their slots still give way oldest first. A
 * connection whose request is with the handler never gives way. Ties of
 * idle or partial ones (the same millisecond of the loop's clock, as a
 * burst read in one turn has) go to the one accepted first; the list holds
 * the newest first. */
static struct conn *oldest_idle(vmg_server *s, const char *host, const struct conn *except)
{
    /* [0]: its answers written; [1]: some still on their way. */
    struct conn *done[2] = {NULL, NULL}, *best[2] = {NULL, NULL};
    struct conn *partial = NULL, *silent_old = NULL, *silent_new = NULL;
    uint64_t oldest = 0, since = 0, now = uv_now(s->loop);

    struct lq *p;

    lq_foreach(p, &s->conns)
    {
        struct conn *c = lq_entry(p, struct conn, link);
        if (c == except || (host && strcmp(c->host, host) != 0))
            continue;
        if (answered(c)) {
            struct conn **d = &done[c->writes > 0];
            if (!*d || c->seq < (*d)->seq)
                *d = c;
            continue;
        }
        if (evictable(c)) {
            /* One that does not read its answers goes first all the same. */
            struct conn **b = &best[c->mode != T_DRAIN && c->out_pending > 0];
            if (!*b || c->idle_since < (*b)->idle_since ||
                (c->idle_since == (*b)->idle_since && c->seq < (*b)->seq))
                *b = c;
            continue;
        }
        switch (incomplete(c, &since)) {
        case 1:
            if (!partial || since < oldest || (since == oldest && c->seq < partial->seq)) {
                partial = c;
                oldest = since;
            }
            break;
        case 2:
            if (now - c->born >= SILENT_GRACE_MS) {
                if (!silent_old || c->seq < silent_old->seq)
                    silent_old = c;
            } else if (!silent_new || c->seq > silent_new->seq) {
                silent_new = c;
            }
            break;
        default:
            break;
        }
    }
    if (done[0])
        return done[0];
    if (best[0])
        return best[0];
    if (partial)
        return partial;
    if (done[1])
        return done[1];
    if (best[1])
        return best[1];
    return silent_old ? silent_old : silent_new;
}

static size_t peer_conns(vmg_server *s, const char *host)
{
    size_t n = 0;
    struct lq *p;

    lq_foreach(p, &s->conns)
    {
        const struct conn *c = lq_entry(p, struct conn, link);
        if (!c->closing && strcmp(c->host, host) == 0)
            n++;
    }
    return n;
}

/* admit makes room for the new connection c: beyond a limit, the oldest
 * idle connection, or else the oldest with an incomplete request (of c's
 * peer, for the per-peer limit) is closed. Returns
 * 0, or -1 when nothing can give way (c is to be closed). */
static int admit(vmg_server *s, struct conn *c)
{
    struct conn *victim;

    if (peer_conns(s, c->host) > s->max_conns_per_peer)
        victim = oldest_idle(s, c->host, c);
    else if (s->open > s->max_conns)
        victim = oldest_idle(s, NULL, c);
    else
        return 0;
    if (!victim) {
        s->stats.refused++;
        return -1;
    }
    s->stats.evicted++;
    conn_close(victim);
    return 0;
}

static void refuse(vmg_server *s)
{
    uv_tcp_t *t = malloc(sizeof(*t));

    if (!t)
        return;
    if (uv_tcp_init(s->loop, t) < 0) {
        free(t);
        return;
    }
    t->data = s;
    s->handles++;
    (void)uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)t);
    uv_close((uv_handle_t *)t, refused_closed);
}

/* reset_close closes c with a reset, not a FIN: the kernel keeps no
 * state of it after the close (TIME_WAIT) and has less to do. */
static void reset_close(struct conn *c)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    uv_os_fd_t fd;

    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) == 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    conn_close(c);
}

/* peer_allowed takes a token of host's for a new TLS connection; 0 when
 * it has none. */
static int peer_allowed(vmg_server *s, const char *host)
{
    uint64_t now = uv_now(s->loop);
    struct hs_peer *p = NULL, *spare = NULL;

    for (size_t i = 0; s->hs_peer_qps > 0 && i < VMG_SERVER_HANDSHAKE_PEERS; i++) {
        struct hs_peer *e = &s->hs_peers[i];
        if (e->host[0] && strcmp(e->host, host) == 0) {
            p = e;
            break;
        }
        if (!spare && (!e->host[0] || vmg_bucket_full(&e->b, now)))
            spare = e;
    }
    if (!p && spare) {
        p = spare;
        snprintf(p->host, sizeof(p->host), "%s", host);
        vmg_bucket_init(&p->b, s->hs_peer_qps, s->hs_peer_burst, now);
    }
    return !p || vmg_bucket_take(&p->b, now) == 0;
}

static void on_connection(uv_stream_t *server, int status)
{
    vmg_server *s = server->data;
    struct conn *c;

    if (status < 0 || s->closing)
        return;
    c = calloc(1, sizeof(*c));
    if (!c) {
        refuse(s);
        return;
    }
    c->srv = s;
    if (uv_tcp_init(s->loop, &c->tcp) < 0) {
        free(c);
        return;
    }
    c->tcp.data = c;
    uv_timer_init(s->loop, &c->timer); /* cannot fail */
    c->timer.data = c;
    c->handles = 2;
    s->handles++;
    s->nconns++;
    s->open++;
    c->born = c->idle_since = uv_now(s->loop);
    c->seq = ++s->accepted;
    lq_insert_head(&s->conns, &c->link);
    vmg_reqparse_init(&c->rp);
    c->rp.max_header_bytes = s->max_header_bytes;
    c->rp.max_headers = s->max_headers;
    c->rp.max_body = s->max_body;
    c->rp.peer = c->peer; /* formatted below, before the first byte */
    c->rp.begun = on_begun;
    c->rp.headers = on_headers;
    c->rp.arg = c;

    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    format_peer(c);
    if (s->tls && !peer_allowed(s, c->host)) {
        s->stats.throttled++;
        reset_close(c);
        return;
    }
    if (admit(s, c) < 0) {
        conn_close(c);
        return;
    }
    if (s->tls && !(c->tls = vmg_tls_conn_new(s->tls))) {
        conn_close(c);
        return;
    }
    /* The first request's time runs from the accept, TLS handshake included. */
    c->req_start = c->born;
    set_timer(c, T_REQUEST);
    update_reading(c);
}

/* ---- responses ---- */

int vmg_server_respond(vmg_server_req *r, int status, const char *content_type, const void *body,
                       size_t len)
{
    struct conn *c;
    vmg_server *s;
    char *msg;
    size_t total;
    int keep, retire;

    if (!r)
        return -EINVAL;
    c = r->conn;
    if (!c || c->closing || c->active != r) {
        vmg_req_free(r);
        return VMG_ECANCELED;
    }
    s = c->srv;
    /* However busy, a connection serves so many requests for so long. */
    retire = c->served >= s->max_requests || uv_now(s->loop) - c->born >= s->max_conn_age_ms;
    keep = r->keep_alive && !s->closing && !retire;
    if (r->keep_alive && retire)
        s->stats.retired++;
    c->active = NULL; /* r is answered: closing c will not abort it */
    msg = vmg_req_response(r, status, content_type, body, len, keep, &total);
    vmg_req_free(r);
    if (!msg) {
        conn_close(c);
        return -ENOMEM;
    }
    if (conn_write(c, msg, total) < 0) {
        vmg_wipe_free(msg, total);
        conn_close(c);
        return VMG_ETRANSPORT;
    }
    vmg_wipe_free(msg, total);
    c->idle_since = uv_now(s->loop);
    if (!keep) {
        /* Its writes have the request's time anew, as a kept connection's
         * answer has (T_DRAIN below): one that came late in the request's
         * time is not cut off when that time is up. */
        if (c->writes > 0)
            set_timer(c, T_DRAIN);
        finish_output(c);
        return 0;
    }
    /* A request already buffered restarts the request timer; unsent output
     * over the bound waits for the client to read, for so long. */
    set_timer(c, out_blocked(c) ? T_DRAIN : T_IDLE);
    process_input(c);
    return 0;
}

/* ---- the server ---- */

/* parse_addr turns "host:port", "[v6]:port" or ":port" into a socket
 * address; *ret_any is set for an empty host. */
static int parse_addr(const char *addr, struct sockaddr_storage *ss, int *ret_any)
{
    char host[INET6_ADDRSTRLEN + 1];
    const char *colon, *hs;
    size_t hl;
    char *end;
    long port;

    if (!addr)
        return -EINVAL;
    if (addr[0] == '[') {
        const char *close = strchr(addr, ']');
        if (!close || close[1] != ':')
            return VMG_ECONFIG;
        hs = addr + 1;
        hl = (size_t)(close - hs);
        colon = close + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon)
            return VMG_ECONFIG;
        hs = addr;
        hl = (size_t)(colon - addr);
        if (memchr(hs, ':', hl))
            return VMG_ECONFIG; /* IPv6 needs brackets */
    }
    if (hl >= sizeof(host))
        return VMG_ECONFIG;
    memcpy(host, hs, hl);
    host[hl] = '\0';
    if (!colon[1] || colon[1] == '-' || colon[1] == '+' || colon[1] == ' ')
        return VMG_ECONFIG;
    errno = 0;
    port = strtol(colon + 1, &end, 10);
    if (errno || *end || port < 0 || port > 65535)
        return VMG_ECONFIG;
    *ret_any = hl == 0;
    if (hl == 0)
        return uv_ip6_addr("::", (int)port, (struct sockaddr_in6 *)ss) == 0 ? 0 : VMG_ECONFIG;
    if (strcmp(host, "localhost") == 0)
        return uv_ip4_addr("127.0.0.1", (int)port, (struct sockaddr_in *)ss) == 0 ? 0 : VMG_ECONFIG;
    if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) == 0)
        return 0;
    if (uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss) == 0)
        return 0;
    return VMG_ECONFIG;
}

static void own_handle_closed(uv_handle_t *h)
{
    vmg_server *s = h->data;
    s->handles--;
    maybe_free_server(s);
}

static void free_unstarted(uv_handle_t *h)
{
    vmg_server *s = h->data;
    vmg_tls_close(s->tls, NULL, NULL); /* not watching yet: at once */
    free(s);
}

static void tls_closed(void *data)
{
    vmg_server *s = data;
    s->tls = NULL;
    s->handles--;
    maybe_free_server(s);
}

static int bind_listen(vmg_server *s, const struct vmg_server_opts *o)
{
    struct sockaddr_storage ss;
    int any = 0, r, len = sizeof(ss);

    memset(&ss, 0, sizeof(ss));
    r = parse_addr(o->addr, &ss, &any);
    if (r < 0) {
        set_err(o, "bad listen address", o->addr);
        return r;
    }
    if (any) {
        /* "::" takes IPv6 and IPv4; without IPv6 on this host, 0.0.0.0. */
        int probe = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe < 0) {
            int port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
            memset(&ss, 0, sizeof(ss));
            uv_ip4_addr("0.0.0.0", port, (struct sockaddr_in *)&ss);
        } else {
            close(probe);
        }
    }
    r = uv_tcp_bind(&s->listener, (const struct sockaddr *)&ss, 0);
    if (r == 0)
        r = uv_listen((uv_stream_t *)&s->listener, 128, on_connection);
    if (r < 0) {
        set_err(o, "cannot listen on", o->addr);
        return r;
    }
    if (uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &len) == 0)
        s->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return 0;
}

/* hs_limit sets b to rate a second (0: def, negative: no limit) with a
 * burst of burst (0: twice the rate, at least 1). */
static void hs_limit(struct vmg_bucket *b, double rate, double def, uint32_t burst, uint64_t now)
{
    if (rate == 0)
        rate = def;
    if (burst == 0)
        burst = rate * 2 < 1 ? 1 : rate * 2 < UINT32_MAX ? (uint32_t)(rate * 2) : UINT32_MAX;
    vmg_bucket_init(b, rate, burst, now);
}

vmg_server *vmg_server_new(uv_loop_t *loop, const struct vmg_server_opts *opts, int *err)
{
    struct vmg_tls_opts tls_opts;
    struct vmg_bucket peer;
    vmg_server *s;
    int r;

    if (!loop || !opts || !opts->addr) {
        if (err)
            *err = -EINVAL;
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        if (err)
            *err = -ENOMEM;
        return NULL;
    }
    tls_opts = (struct vmg_tls_opts){
        .cert_pem = opts->cert_pem,
        .key_pem = opts->key_pem,
        .cert_file = opts->cert_file,
        .key_file = opts->key_file,
        .reloaded = opts->tls_reloaded,
        .data = opts->data,
        .errbuf = opts->errbuf,
        .errbuf_size = opts->errbuf_size,
    };
    s->loop = loop;
    s->port = -1;
    lq_init(&s->conns);
    lq_init(&s->hs_waiting);
    s->max_conns = opts->max_conns ? opts->max_conns : VMG_SERVER_MAX_CONNS;
    s->max_header_bytes =
        opts->max_header_bytes ? opts->max_header_bytes : VMG_SERVER_MAX_HEADER_BYTES;
    s->max_headers = opts->max_headers ? opts->max_headers : VMG_SERVER_MAX_HEADERS;
    s->max_body = opts->max_body ? opts->max_body : VMG_SERVER_MAX_BODY;
    s->request_timeout_ms =
        opts->request_timeout_ms ? opts->request_timeout_ms : VMG_SERVER_REQUEST_TIMEOUT_MS;
    s->idle_timeout_ms = opts->idle_timeout_ms ? opts->idle_timeout_ms : VMG_SERVER_IDLE_TIMEOUT_MS;
    s->header_timeout_ms =
        opts->header_timeout_ms ? opts->header_timeout_ms : s->request_timeout_ms;
    s->max_conns_per_peer =
        opts->max_conns_per_peer ? opts->max_conns_per_peer : VMG_SERVER_MAX_CONNS_PER_PEER;
    if (s->max_conns_per_peer > s->max_conns)
        s->max_conns_per_peer = s->max_conns;
    s->max_pending_output =
        opts->max_pending_output ? opts->max_pending_output : VMG_SERVER_MAX_PENDING_OUTPUT;
    s->max_buffered = opts->max_buffered ? opts->max_buffered : VMG_SERVER_MAX_BUFFERED;
    s->max_requests = opts->max_requests ? opts->max_requests : VMG_SERVER_MAX_REQUESTS;
    s->max_conn_age_ms = opts->max_conn_age_ms ? opts->max_conn_age_ms : VMG_SERVER_MAX_CONN_AGE_MS;
    s->handler = opts->handler;
    s->data = opts->data;
    hs_limit(&s->hs_all, opts->tls_handshakes_per_sec, VMG_SERVER_HANDSHAKES_PER_SEC,
             opts->tls_handshake_burst, uv_now(loop));
    hs_limit(&peer, opts->tls_handshakes_per_peer_per_sec, VMG_SERVER_HANDSHAKES_PER_PEER_PER_SEC,
             opts->tls_handshake_burst_per_peer, 0);
    s->hs_peer_qps = peer.qps;
    s->hs_peer_burst = (uint32_t)peer.burst;

    r = vmg_tls_new(loop, &tls_opts, &s->tls);
    if (r == 0)
        r = uv_tcp_init(loop, &s->listener);
    if (r < 0) {
        vmg_tls_close(s->tls, NULL, NULL); /* not watching yet: at once */
        free(s);
        if (err)
            *err = r;
        return NULL;
    }
    s->listener.data = s;
    r = bind_listen(s, opts);
    if (r < 0) {
        /* The handle is initialized: it is freed in its close callback. */
        uv_close((uv_handle_t *)&s->listener, free_unstarted);
        if (err)
            *err = r;
        return NULL;
    }
    uv_timer_init(loop, &s->hs_timer); /* cannot fail */
    s->hs_timer.data = s;
    s->handles = 2;
    vmg_tls_watch(s->tls, opts->tls_reload_ms ? opts->tls_reload_ms : VMG_SERVER_TLS_RELOAD_MS);
    return s;
}

int vmg_server_port(const vmg_server *s)
{
    return s ? s->port : -1;
}

size_t vmg_server_connections(const vmg_server *s)
{
    return s ? s->open : 0;
}

void vmg_server_get_stats(const vmg_server *s, struct vmg_server_stats *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (!s)
        return;
    const struct lq *p;

    *ret = s->stats;
    ret->connections = s->open;
    ret->buffered = s->buffered;
    ret->tls_reloads = vmg_tls_reloads(s->tls);
    lq_foreach(p, &s->conns)
    {
        const struct conn *c = lq_entry(p, struct conn, link);
        if (!c->closing && !c->reading)
            ret->paused++;
    }
}

void vmg_server_close(vmg_server *s, void (*closed)(void *data), void *data)
{
    struct lq *p, *next;

    if (!s || s->closing)
        return;
    s->closing = 1;
    s->closed = closed;
    s->closed_data = data;
    uv_close((uv_handle_t *)&s->listener, own_handle_closed);
    uv_close((uv_handle_t *)&s->hs_timer, own_handle_closed);
    if (s->tls) {
        s->handles++;
        vmg_tls_close(s->tls, tls_closed, s);
    }
    lq_foreach_safe(p, next, &s->conns)
    {
        conn_close(lq_entry(p, struct conn, link));
    }
}
