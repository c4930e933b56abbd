/* server.c: the HTTP/1.1 (and TLS) server on libuv (see server.h).
 *
 * Each connection keeps the plaintext it has received but not parsed yet in
 * a buffer. TLS connections first pass what arrives through OpenSSL (the
 * read BIO), and everything OpenSSL wants to send (the write BIO) is written
 * to the socket after each call. The parser is paused at the end of every
 * request, which is then handed to the handler; the rest of the buffer is
 * parsed once the response is written. Reading goes on meanwhile, so that a
 * client leaving is noticed, up to a bound on the buffer.
 *
 * Every byte of a connection's input buffer and unsent output is counted,
 * per connection (out_pending) and for the server (buffered): reading and
 * parsing stop at the bounds and resume when the writes complete. Buffers
 * that held request bytes are wiped before they are freed; none is grown
 * with realloc, which could leave a copy behind.
 */
#include "lib/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <http_parser.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "lib/err.h"

#define READ_CHUNK (64 * 1024)
#define LINGER_MS 2000            /* how long a closing connection drains input */
#define LINGER_BYTES (256 * 1024) /* and how much of it, at most */
#define SILENT_GRACE_MS 500       /* a new connection's time to send before it is the first to go */

/* What the connection's one timer bounds: a request, the wait between two,
 * unsent output over the bound (the client does not read), the drain
 * before the close. */
enum timer_mode { T_NONE, T_REQUEST, T_HEADERS, T_IDLE, T_DRAIN, T_LINGER };

struct hdr {
    char *name;
    size_t nlen;
    char *value;
    size_t vlen;
};

struct conn;

struct vmg_server_req {
    struct conn *conn; /* NULL once the connection is gone */
    char *url;
    size_t url_len;
    char *path;
    char *query;
    struct hdr *hdrs;
    size_t nhdrs;
    char *body;
    size_t body_len;
    char *extra; /* extra response header lines */
    size_t extra_len;
    char peer[64];
    const char *method;
    int complete;
    int keep_alive;
    int head;
    void (*on_abort)(void *data, vmg_server_req *r);
    void *abort_data;
};

struct conn {
    uv_tcp_t tcp; /* first: alloc_cb and read_cb cast the handle to the conn */
    uv_timer_t timer;
    vmg_server *srv;
    struct conn *prev;
    struct conn *next;
    int handles; /* libuv handles not closed yet */
    int closing;
    int reading;
    int in_process;
    int close_after_write; /* no more requests: close once writes are done */
    int lingering;         /* output shut down, input drained until EOF */
    size_t lingered;       /* bytes drained and dropped while lingering */
    enum timer_mode mode;
    uint64_t born;       /* loop time of the accept */
    uint64_t req_start;  /* loop time the request timer runs from */
    uint64_t first_byte; /* loop time of the request's first byte */
    uint64_t idle_since; /* loop time of the last answer (or the accept) */
    size_t served;       /* requests handed to the handler */
    size_t out_pending;  /* bytes of uv_write requests in flight */
    http_parser parser;
    int last_was_value;  /* header callbacks: the last one was a value */
    size_t header_bytes; /* of the request being parsed */
    int error_status;    /* a limit a callback hit: the status to answer */
    size_t writes;       /* uv_write requests in flight */
    SSL *ssl;
    BIO *rbio;
    BIO *wbio;
    int handshake_done;
    int got_bytes; /* something was read from the socket since the accept */
    uint64_t seq;  /* the order of the accept */
    char *in;      /* plaintext received, not parsed yet */
    size_t in_len;
    size_t in_cap;
    vmg_server_req *req;    /* being parsed; owned by the connection */
    vmg_server_req *active; /* with the handler, waiting for its answer */
    char peer[64];
    char host[64]; /* the peer's address without the port */
};

struct vmg_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    int handles; /* open libuv handles: the listener, connections, refused ones */
    int closing;
    int port;
    SSL_CTX *ctx;
    struct conn *conns;
    size_t nconns; /* allocated, closing ones included */
    size_t open;   /* not closing */
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
    /* TLS from files, watched. */
    char *cert_file;
    char *key_file;
    uv_fs_poll_t cert_poll;
    uv_fs_poll_t key_poll;
    int polling;                  /* the two poll handles are initialized */
    unsigned char tls_digest[32]; /* of the PEM text in use */
    unsigned char tls_failed[32]; /* of the last that could not be used */
    void (*tls_reloaded)(void *data, int status, const char *msg);
    void (*closed)(void *data);
    void *closed_data;
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

/* wipe_free wipes the n bytes at p, which may have held a secret (an
 * Authorization header, a token in a body), and frees p; NULL is fine. */
static void wipe_free(void *p, size_t n)
{
    if (!p)
        return;
    OPENSSL_cleanse(p, n);
    free(p);
}

static void wipe_str(char *p)
{
    if (p)
        wipe_free(p, strlen(p) + 1);
}

/* append grows *buf (NULL, or *len + 1 bytes holding a NUL-terminated
 * string) by s[0..n). It moves the bytes to a new buffer and wipes the old
 * one: realloc could leave a copy behind. */
static int append(char **buf, size_t *len, const char *s, size_t n)
{
    char *nb = malloc(*len + n + 1);

    if (!nb)
        return -ENOMEM;
    if (*buf)
        memcpy(nb, *buf, *len);
    memcpy(nb + *len, s, n);
    if (*buf)
        wipe_free(*buf, *len + 1);
    *len += n;
    nb[*len] = '\0';
    *buf = nb;
    return 0;
}

static void req_free(vmg_server_req *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nhdrs; i++) {
        /* A trimmed value is wiped up to its length: behind it are blanks. */
        if (r->hdrs[i].name)
            wipe_free(r->hdrs[i].name, r->hdrs[i].nlen + 1);
        if (r->hdrs[i].value)
            wipe_free(r->hdrs[i].value, r->hdrs[i].vlen + 1);
    }
    wipe_free(r->hdrs, r->nhdrs * sizeof(*r->hdrs));
    if (r->url)
        wipe_free(r->url, r->url_len + 1);
    wipe_str(r->path);
    wipe_str(r->query);
    if (r->body)
        wipe_free(r->body, r->body_len + 1);
    if (r->extra)
        wipe_free(r->extra, r->extra_len + 1);
    wipe_free(r, sizeof(*r));
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
    wipe_free(c->in, c->in_cap);
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
    for (struct conn *c = s->conns; c; c = c->next)
        if (!c->closing)
            process_input(c); /* parses what it may, and reads again */
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

    wipe_free(w, sizeof(*w) + len);
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
    } else if (c->mode == T_DRAIN && !out_blocked(c)) {
        /* The client reads again: on with its pipelined requests. */
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

/* flush_tls writes what OpenSSL has produced to the socket. */
static int flush_tls(struct conn *c)
{
    char buf[16 * 1024];
    int n, r;

    while ((n = BIO_read(c->wbio, buf, sizeof(buf))) > 0) {
        r = raw_write(c, buf, (size_t)n);
        if (r < 0)
            return r;
    }
    return 0;
}

/* conn_write sends plaintext: through TLS when the connection has it. */
static int conn_write(struct conn *c, const char *data, size_t len)
{
    if (c->closing)
        return VMG_ECANCELED;
    if (!c->ssl)
        return raw_write(c, data, len);
    while (len > 0) {
        int chunk = len > INT32_MAX ? INT32_MAX : (int)len;
        int n = SSL_write(c->ssl, data, chunk);
        if (n <= 0) {
            ERR_clear_error();
            return VMG_ETRANSPORT;
        }
        data += n;
        len -= (size_t)n;
    }
    return flush_tls(c);
}

/* finish_output: no more requests on c; it closes once writes are done. */
static void finish_output(struct conn *c)
{
    c->close_after_write = 1;
    if (c->ssl && c->handshake_done) {
        SSL_shutdown(c->ssl); /* queue close_notify */
        ERR_clear_error();
        if (flush_tls(c) < 0) {
            conn_close(c);
            return;
        }
    }
    start_linger(c); /* the FIN follows the writes in flight */
}

/* send_error answers a request the server refuses, and closes. */
static void send_error(struct conn *c, int status)
{
    char buf[256];
    const char *reason = http_status_str((enum http_status)status);
    int n;

    req_free(c->req);
    c->req = NULL;
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

/* ---- parser callbacks ---- */

static struct conn *parser_conn(http_parser *p)
{
    return p->data;
}

/* count_header_bytes adds n bytes to the request's URL and header bytes;
 * nonzero (an error for the parser) above the limit. */
static int count_header_bytes(struct conn *c, size_t n)
{
    c->header_bytes += n;
    if (c->header_bytes > c->srv->max_header_bytes) {
        c->error_status = HTTP_STATUS_REQUEST_HEADER_FIELDS_TOO_LARGE;
        return -1;
    }
    return 0;
}

static int on_message_begin(http_parser *p)
{
    struct conn *c = parser_conn(p);

    req_free(c->req);
    c->req = calloc(1, sizeof(*c->req));
    if (!c->req) {
        c->error_status = HTTP_STATUS_INTERNAL_SERVER_ERROR;
        return -1;
    }
    memcpy(c->req->peer, c->peer, sizeof(c->peer));
    c->header_bytes = 0;
    c->last_was_value = 1;
    c->error_status = 0;
    c->first_byte = uv_now(c->srv->loop);
    if (c->mode != T_REQUEST)
        c->req_start = c->first_byte;
    set_timer(c, T_HEADERS);
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
    struct conn *c = parser_conn(p);

    if (count_header_bytes(c, n) < 0)
        return -1;
    if (append(&c->req->url, &c->req->url_len, at, n) < 0) {
        c->error_status = HTTP_STATUS_INTERNAL_SERVER_ERROR;
        return -1;
    }
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    struct conn *c = parser_conn(p);
    vmg_server_req *r = c->req;

    if (count_header_bytes(c, n) < 0)
        return -1;
    if (c->last_was_value) {
        struct hdr *nh;
        if (r->nhdrs >= c->srv->max_headers) {
            c->error_status = HTTP_STATUS_REQUEST_HEADER_FIELDS_TOO_LARGE;
            return -1;
        }
        nh = realloc(r->hdrs, (r->nhdrs + 1) * sizeof(*nh));
        if (!nh)
            goto nomem;
        r->hdrs = nh;
        memset(&r->hdrs[r->nhdrs], 0, sizeof(*nh));
        r->nhdrs++;
        c->last_was_value = 0;
    }
    if (append(&r->hdrs[r->nhdrs - 1].name, &r->hdrs[r->nhdrs - 1].nlen, at, n) < 0)
        goto nomem;
    return 0;
nomem:
    c->error_status = HTTP_STATUS_INTERNAL_SERVER_ERROR;
    return -1;
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    struct conn *c = parser_conn(p);
    struct hdr *h;

    if (count_header_bytes(c, n) < 0)
        return -1;
    if (c->req->nhdrs == 0)
        return -1;
    h = &c->req->hdrs[c->req->nhdrs - 1];
    c->last_was_value = 1;
    if (append(&h->value, &h->vlen, at, n) < 0) {
        c->error_status = HTTP_STATUS_INTERNAL_SERVER_ERROR;
        return -1;
    }
    return 0;
}

static char *dup_range(const char *s, size_t n)
{
    char *d = malloc(n + 1);

    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static int on_headers_complete(http_parser *p)
{
    struct conn *c = parser_conn(p);
    vmg_server_req *r = c->req;
    struct http_parser_url u;
    const char *expect;

    /* Every header has a value (maybe empty), without trailing blanks. */
    for (size_t i = 0; i < r->nhdrs; i++) {
        struct hdr *h = &r->hdrs[i];
        if (!h->value && append(&h->value, &h->vlen, "", 0) < 0)
            goto nomem;
        while (h->vlen > 0 && (h->value[h->vlen - 1] == ' ' || h->value[h->vlen - 1] == '\t'))
            h->value[--h->vlen] = '\0';
    }
    if (!r->url) {
        c->error_status = HTTP_STATUS_BAD_REQUEST;
        return -1;
    }
    http_parser_url_init(&u);
    if (http_parser_parse_url(r->url, r->url_len, p->method == HTTP_CONNECT, &u) != 0) {
        c->error_status = HTTP_STATUS_BAD_REQUEST;
        return -1;
    }
    if (u.field_set & (1 << UF_PATH))
        r->path = dup_range(r->url + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len);
    else
        r->path = dup_range("/", 1);
    if (u.field_set & (1 << UF_QUERY))
        r->query = dup_range(r->url + u.field_data[UF_QUERY].off, u.field_data[UF_QUERY].len);
    else
        r->query = dup_range("", 0);
    if (!r->path || !r->query)
        goto nomem;
    r->method = http_method_str((enum http_method)p->method);
    r->head = p->method == HTTP_HEAD;
    r->keep_alive = http_should_keep_alive(p) && !p->upgrade;

    if ((p->flags & F_CONTENTLENGTH) && p->content_length > c->srv->max_body) {
        c->error_status = HTTP_STATUS_PAYLOAD_TOO_LARGE;
        return -1;
    }
    set_timer(c, T_REQUEST); /* the headers are in: the request's own bound only */
    expect = vmg_server_req_header(r, "Expect");
    if (expect && strcasecmp(expect, "100-continue") == 0 && p->http_major == 1 &&
        p->http_minor >= 1) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (conn_write(c, cont, sizeof(cont) - 1) < 0) {
            c->error_status = HTTP_STATUS_INTERNAL_SERVER_ERROR;
            return -1;
        }
    }
    return 0;
nomem:
    c->error_status = HTTP_STATUS_INTERNAL_SERVER_ERROR;
    return -1;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    struct conn *c = parser_conn(p);
    vmg_server_req *r = c->req;

    if (n > c->srv->max_body - r->body_len) {
        c->error_status = HTTP_STATUS_PAYLOAD_TOO_LARGE;
        return -1;
    }
    if (append(&r->body, &r->body_len, at, n) < 0) {
        c->error_status = HTTP_STATUS_INTERNAL_SERVER_ERROR;
        return -1;
    }
    return 0;
}

static int on_message_complete(http_parser *p)
{
    struct conn *c = parser_conn(p);

    if (!c->req->body && append(&c->req->body, &c->req->body_len, "", 0) < 0) {
        c->error_status = HTTP_STATUS_INTERNAL_SERVER_ERROR;
        return -1;
    }
    c->req->complete = 1;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- input ---- */

static void dispatch(struct conn *c)
{
    vmg_server_req *r = c->req;
    vmg_server *s = c->srv;

    c->req = NULL;
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

    if (c->in_process)
        return;
    c->in_process = 1;
    while (!c->closing && !c->active && !c->close_after_write && off < c->in_len &&
           !out_blocked(c)) {
        size_t n;
        enum http_errno e;

        if (HTTP_PARSER_ERRNO(&c->parser) == HPE_PAUSED)
            http_parser_pause(&c->parser, 0);
        n = http_parser_execute(&c->parser, &parser_settings, c->in + off, c->in_len - off);
        off += n < c->in_len - off ? n : c->in_len - off;
        e = HTTP_PARSER_ERRNO(&c->parser);
        if (c->req && c->req->complete) {
            if (!c->req->keep_alive || c->parser.upgrade)
                off = c->in_len; /* nothing after this request is parsed */
            dispatch(c);
            continue;
        }
        if (e != HPE_OK) {
            int status = c->error_status;
            if (!status)
                status = e == HPE_HEADER_OVERFLOW ? HTTP_STATUS_REQUEST_HEADER_FIELDS_TOO_LARGE
                                                  : HTTP_STATUS_BAD_REQUEST;
            off = c->in_len;
            send_error(c, status);
            break;
        }
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

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct conn *c = (struct conn *)h;
    size_t want = READ_CHUNK;

    (void)suggested;
    buf->base = NULL;
    buf->len = 0;
    if (c->ssl || c->lingering) {
        buf->base = malloc(want);
        buf->len = buf->base ? want : 0;
        return;
    }
    /* Plain HTTP reads straight into the input buffer. */
    if (c->in_cap - c->in_len < want && in_resize(c, c->in_len + want) < 0)
        return;
    buf->base = c->in + c->in_len;
    buf->len = want;
}

static int in_reserve(struct conn *c, size_t n)
{
    if (c->in_cap - c->in_len >= n)
        return 0;
    return in_resize(c, c->in_len + (n > READ_CHUNK ? n : READ_CHUNK));
}

/* tls_input feeds n bytes of ciphertext to OpenSSL and moves the plaintext
 * into the input buffer. Returns 0, or a negative code when the connection
 * must close (1 for a clean close_notify). */
static int tls_input(struct conn *c, const char *data, size_t n)
{
    char buf[16 * 1024];
    int r;

    if (n > 0 && BIO_write(c->rbio, data, (int)n) != (int)n)
        return -ENOMEM;
    if (!c->handshake_done) {
        r = SSL_do_handshake(c->ssl);
        if (flush_tls(c) < 0)
            return VMG_ETRANSPORT;
        if (r != 1) {
            int e = SSL_get_error(c->ssl, r);
            ERR_clear_error();
            if (e == SSL_ERROR_WANT_READ)
                return 0;
            /* Let the alert OpenSSL queued reach the client, then close. */
            c->close_after_write = 1;
            c->in_len = 0;
            start_linger(c);
            return 0;
        }
        c->handshake_done = 1;
    }
    for (;;) {
        r = SSL_read(c->ssl, buf, sizeof(buf));
        if (r <= 0)
            break;
        if (in_reserve(c, (size_t)r) < 0) {
            OPENSSL_cleanse(buf, sizeof(buf));
            return -ENOMEM;
        }
        memcpy(c->in + c->in_len, buf, (size_t)r);
        c->in_len += (size_t)r;
    }
    OPENSSL_cleanse(buf, sizeof(buf)); /* plaintext: a token, maybe */
    r = SSL_get_error(c->ssl, r);
    ERR_clear_error();
    if (flush_tls(c) < 0)
        return VMG_ETRANSPORT;
    if (r == SSL_ERROR_WANT_READ)
        return 0;
    return r == SSL_ERROR_ZERO_RETURN ? 1 : VMG_ETRANSPORT;
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = (struct conn *)stream;
    int own = c->ssl || c->lingering; /* buf was malloc'd by alloc_cb */

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
    if (c->ssl) {
        int r = tls_input(c, buf->base, (size_t)nread);
        if (r != 0) {
            conn_close(c);
            goto out;
        }
    } else {
        c->in_len += (size_t)nread;
    }
    process_input(c);
out:
    if (own) /* ciphertext, or input drained and dropped: a request all the same */
        wipe_free(buf->base, nread > 0 ? (size_t)nread : 0);
}

/* update_reading reads while there is room: the buffer holds less than
 * max_header_bytes + max_body, the unsent output is within its bound, and
 * the server within its budget unless c holds nothing yet (or the
 * connection is draining before its close). */
static void update_reading(struct conn *c)
{
    vmg_server *s = c->srv;
    size_t cap = s->max_header_bytes + s->max_body + READ_CHUNK;
    int want = c->lingering || (c->in_len < cap && !out_blocked(c) &&
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
    SSL_CTX_free(s->ctx);
    free(s->cert_file);
    free(s->key_file);
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
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    SSL_free(c->ssl); /* frees the BIOs too */
    in_resize(c, 0);
    wipe_free(c, sizeof(*c));
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
    req_free(c->req);
    c->req = NULL;
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
            return;
        }
    }
    snprintf(c->peer, sizeof(c->peer), "%s:%d", host, port);
    snprintf(c->host, sizeof(c->host), "%s", host);
}

/* evictable: c may give way to a new connection first. It has no request
 * with the handler or half received, and is idle between requests
 * (nothing buffered, its answers sent), or does not read its answers
 * (whatever it pipelined behind them). */
static int evictable(const struct conn *c)
{
    if (c->closing || c->lingering || c->close_after_write || c->active || c->req)
        return 0;
    return (c->mode == T_IDLE && c->out_pending == 0 && c->in_len == 0) || c->mode == T_DRAIN;
}

/* unread_input: c was accepted and never read from, and bytes of it wait in
 * the kernel. In a burst of new connections, libuv accepts them all before
 * it reads from any: a probe's request that has already arrived must not
 * make its connection look silent. */
static int unread_input(const struct conn *c)
{
    uv_os_fd_t fd;
    char b;

    if (!c->reading || c->got_bytes || uv_fileno((const uv_handle_t *)&c->tcp, &fd) != 0)
        return 0;
    return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

/* incomplete: c's request is on its way and has not reached the handler:
 * 1 when it has begun and is not complete (a peer that sends part of a
 * request and stops holds a slot with it), 2 when nothing of it has come
 * since the accept (nothing sent yet, or a TLS handshake); *since is when
 * it began, or the accept. 0 otherwise, as for a connection whose first
 * bytes have arrived and are about to be read. */
static int incomplete(const struct conn *c, uint64_t *since)
{
    if (c->closing || c->lingering || c->close_after_write || c->active)
        return 0;
    if (c->req) {
        *since = c->first_byte;
        return c->req->complete ? 0 : 1;
    }
    *since = c->born;
    if (c->mode != T_REQUEST && c->mode != T_HEADERS)
        return 0;
    return unread_input(c) ? 0 : 2;
}

/* oldest_idle returns the connection to give way, of peer host when host
 * is not NULL, other than except, or NULL: the evictable one idle the
 * longest; failing that, the one whose incomplete request began the
 * longest ago; failing that, one that has sent nothing yet: the one
 * accepted the longest ago among those silent for SILENT_GRACE_MS or more,
 * or else the one accepted last. A burst of silent connections thus makes
 * its own members give way, not a probe accepted just before it that has
 * yet to send its request, while silent connections that hold their slots
 * still give way oldest first. A connection whose request is with the
 * handler never gives way. */
static struct conn *oldest_idle(vmg_server *s, const char *host, const struct conn *except)
{
    struct conn *best = NULL, *partial = NULL, *silent_old = NULL, *silent_new = NULL;
    uint64_t oldest = 0, since = 0, now = uv_now(s->loop);

    for (struct conn *c = s->conns; c; c = c->next) {
        if (c == except || (host && strcmp(c->host, host) != 0))
            continue;
        if (evictable(c)) {
            if (!best || c->idle_since < best->idle_since)
                best = c;
            continue;
        }
        switch (incomplete(c, &since)) {
        case 1:
            if (!partial || since < oldest) {
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
    if (best)
        return best;
    if (partial)
        return partial;
    return silent_old ? silent_old : silent_new;
}

static size_t peer_conns(vmg_server *s, const char *host)
{
    size_t n = 0;

    for (struct conn *c = s->conns; c; c = c->next)
        if (!c->closing && strcmp(c->host, host) == 0)
            n++;
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
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;

    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    format_peer(c);
    if (admit(s, c) < 0) {
        conn_close(c);
        return;
    }
    if (s->ctx) {
        c->ssl = SSL_new(s->ctx);
        c->rbio = BIO_new(BIO_s_mem());
        c->wbio = BIO_new(BIO_s_mem());
        if (!c->ssl || !c->rbio || !c->wbio) {
            if (c->ssl) {
                SSL_free(c->ssl);
                c->ssl = NULL;
            }
            BIO_free(c->rbio);
            BIO_free(c->wbio);
            ERR_clear_error();
            conn_close(c);
            return;
        }
        BIO_set_mem_eof_return(c->rbio, -1);
        SSL_set_bio(c->ssl, c->rbio, c->wbio);
        SSL_set_accept_state(c->ssl);
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
    char head[512];
    char *msg;
    size_t hlen, total;
    int n, keep, retire;

    if (!r)
        return -EINVAL;
    c = r->conn;
    if (!c || c->closing || c->active != r) {
        req_free(r);
        return VMG_ECANCELED;
    }
    if (status < 100 || status > 599)
        status = 500;
    if (content_type && (strlen(content_type) > 200 || strpbrk(content_type, "\r\n")))
        content_type = NULL;
    if (!body)
        len = 0;
    s = c->srv;
    /* However busy, a connection serves so many requests for so long. */
    retire = c->served >= s->max_requests || uv_now(s->loop) - c->born >= s->max_conn_age_ms;
    keep = r->keep_alive && !s->closing && !retire;
    if (r->keep_alive && retire)
        s->stats.retired++;
    n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\n%s%s%sContent-Length: %zu\r\n%s", status,
                 http_status_str((enum http_status)status), content_type ? "Content-Type: " : "",
                 content_type ? content_type : "", content_type ? "\r\n" : "", len,
                 keep ? "" : "Connection: close\r\n");
    hlen = n > 0 && (size_t)n < sizeof(head) ? (size_t)n : 0; /* always fits */
    if (r->head)
        len = 0;
    total = hlen + r->extra_len + 2 + len;
    c->active = NULL; /* r is answered: closing c will not abort it */
    msg = malloc(total);
    if (!msg) {
        req_free(r);
        conn_close(c);
        return -ENOMEM;
    }
    memcpy(msg, head, hlen);
    if (r->extra_len)
        memcpy(msg + hlen, r->extra, r->extra_len);
    memcpy(msg + hlen + r->extra_len, "\r\n", 2);
    if (len)
        memcpy(msg + hlen + r->extra_len + 2, body, len);

    req_free(r);
    if (conn_write(c, msg, total) < 0) {
        wipe_free(msg, total);
        conn_close(c);
        return VMG_ETRANSPORT;
    }
    wipe_free(msg, total);
    c->idle_since = uv_now(s->loop);
    if (!keep) {
        finish_output(c);
        return 0;
    }
    /* A request already buffered restarts the request timer; unsent output
     * over the bound waits for the client to read, for so long. */
    set_timer(c, out_blocked(c) ? T_DRAIN : T_IDLE);
    process_input(c);
    return 0;
}

static int token_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

int vmg_server_req_add_header(vmg_server_req *r, const char *name, const char *value)
{
    static const char *const reserved[] = {"Content-Length", "Content-Type", "Connection",
                                           "Transfer-Encoding"};
    size_t nl, vl;

    if (!r || !name || !value || !*name)
        return -EINVAL;
    for (const char *p = name; *p; p++)
        if (!token_char(*p))
            return -EINVAL;
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
        if (strcasecmp(name, reserved[i]) == 0)
            return -EINVAL;
    if (strpbrk(value, "\r\n"))
        return -EINVAL;
    nl = strlen(name);
    vl = strlen(value);
    if (nl + vl + 4 > VMG_SERVER_MAX_EXTRA_HEADERS - r->extra_len)
        return VMG_ETOOBIG;
    if (append(&r->extra, &r->extra_len, name, nl) < 0 ||
        append(&r->extra, &r->extra_len, ": ", 2) < 0 ||
        append(&r->extra, &r->extra_len, value, vl) < 0 ||
        append(&r->extra, &r->extra_len, "\r\n", 2) < 0)
        return -ENOMEM;
    return 0;
}

/* ---- request accessors ---- */

const char *vmg_server_req_method(const vmg_server_req *r)
{
    return r->method;
}

const char *vmg_server_req_path(const vmg_server_req *r)
{
    return r->path;
}

const char *vmg_server_req_query(const vmg_server_req *r)
{
    return r->query;
}

const char *vmg_server_req_header(const vmg_server_req *r, const char *name)
{
    if (!r || !name)
        return NULL;
    for (size_t i = 0; i < r->nhdrs; i++)
        if (r->hdrs[i].name && strcasecmp(r->hdrs[i].name, name) == 0)
            return r->hdrs[i].value ? r->hdrs[i].value : "";
    return NULL;
}

const char *vmg_server_req_peer(const vmg_server_req *r)
{
    return r->peer;
}

const char *vmg_server_req_body(const vmg_server_req *r, size_t *ret_len)
{
    if (ret_len)
        *ret_len = r->body_len;
    return r->body ? r->body : "";
}

int vmg_server_req_aborted(const vmg_server_req *r)
{
    return r->conn == NULL;
}

void vmg_server_req_on_abort(vmg_server_req *r, void (*fn)(void *data, vmg_server_req *r),
                             void *data)
{
    if (!r)
        return;
    r->on_abort = fn;
    r->abort_data = data;
}

/* ---- TLS setup ---- */

static int read_file(const char *path, char **ret)
{
    FILE *f = fopen(path, "re");
    char *buf = NULL;
    size_t n;
    int r = VMG_ECONFIG;

    if (!f)
        return VMG_ECONFIG;
    setvbuf(f, NULL, _IONBF, 0); /* no copy of a key in stdio's buffer */
    buf = malloc(VMG_SERVER_MAX_PEM + 1);
    if (!buf) {
        r = -ENOMEM;
        goto out;
    }
    n = fread(buf, 1, VMG_SERVER_MAX_PEM + 1, f);
    if (ferror(f) || n > VMG_SERVER_MAX_PEM)
        goto out;
    buf[n] = '\0';
    *ret = buf;
    buf = NULL;
    r = 0;
out:
    wipe_free(buf, VMG_SERVER_MAX_PEM + 1); /* a key read in part, too big or unreadable */
    fclose(f);
    return r;
}

static void ssl_err(const struct vmg_server_opts *o, const char *what)
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
static int make_ctx(const struct vmg_server_opts *o, const char *cert_pem, const char *key_pem,
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

static int setup_tls(vmg_server *s, const struct vmg_server_opts *o)
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
    r = make_ctx(o, cert_pem, key_pem, &s->ctx);
    if (r == 0)
        pem_digest(cert_pem, key_pem, s->tls_digest);
out:
    free(cert);
    if (key) {
        OPENSSL_cleanse(key, strlen(key));
        free(key);
    }
    return r;
}

/* tls_reload builds a TLS context from the files again and, when it works,
 * new connections get it (open ones keep theirs: SSL_CTX is counted).
 * Files unchanged since the last attempt are not reported twice. */
static void tls_reload(vmg_server *s)
{
    char msg[512] = "";
    struct vmg_server_opts eo = {.errbuf = msg, .errbuf_size = sizeof(msg)};
    char *cert = NULL, *key = NULL;
    unsigned char d[32];
    SSL_CTX *ctx = NULL;
    int r;

    r = read_file(s->cert_file, &cert);
    if (r < 0) {
        snprintf(msg, sizeof(msg), "cannot read the TLS certificate %s", s->cert_file);
        goto report;
    }
    r = read_file(s->key_file, &key);
    if (r < 0) {
        snprintf(msg, sizeof(msg), "cannot read the TLS key %s", s->key_file);
        goto report;
    }
    pem_digest(cert, key, d);
    if (memcmp(d, s->tls_digest, sizeof(d)) == 0 || memcmp(d, s->tls_failed, sizeof(d)) == 0)
        goto out; /* nothing new */
    r = make_ctx(&eo, cert, key, &ctx);
    if (r < 0) {
        memcpy(s->tls_failed, d, sizeof(d));
        goto report;
    }
    SSL_CTX_free(s->ctx);
    s->ctx = ctx;
    memcpy(s->tls_digest, d, sizeof(d));
    memset(s->tls_failed, 0, sizeof(s->tls_failed));
    s->stats.tls_reloads++;
report:
    if (s->tls_reloaded)
        s->tls_reloaded(s->data, r, msg);
out:
    free(cert);
    wipe_str(key);
}

static void on_tls_file(uv_fs_poll_t *h, int status, const uv_stat_t *prev, const uv_stat_t *curr)
{
    vmg_server *s = h->data;

    (void)status; /* a file gone is reported by the reload */
    (void)prev;
    (void)curr;
    if (!s->closing)
        tls_reload(s);
}

static void poll_closed(uv_handle_t *h)
{
    vmg_server *s = h->data;
    s->handles--;
    maybe_free_server(s);
}

/* watch_tls polls the certificate and key files (a stat follows the
 * Secret's symlinks, so the ..data swap shows as a change). */
static void watch_tls(vmg_server *s, uint64_t ms)
{
    int r;

    uv_fs_poll_init(s->loop, &s->cert_poll); /* cannot fail */
    uv_fs_poll_init(s->loop, &s->key_poll);
    s->cert_poll.data = s->key_poll.data = s;
    s->polling = 1;
    s->handles += 2;
    ms = ms > UINT32_MAX ? UINT32_MAX : ms;
    r = uv_fs_poll_start(&s->cert_poll, on_tls_file, s->cert_file, (unsigned)ms);
    if (r == 0)
        r = uv_fs_poll_start(&s->key_poll, on_tls_file, s->key_file, (unsigned)ms);
    if (r < 0 && s->tls_reloaded) {
        char msg[512];
        snprintf(msg, sizeof(msg), "cannot watch %s and %s: %s", s->cert_file, s->key_file,
                 uv_strerror(r));
        s->tls_reloaded(s->data, r, msg);
    }
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

static void listener_closed(uv_handle_t *h)
{
    vmg_server *s = h->data;
    s->handles--;
    maybe_free_server(s);
}

static void free_unstarted(uv_handle_t *h)
{
    vmg_server *s = h->data;
    SSL_CTX_free(s->ctx);
    free(s->cert_file);
    free(s->key_file);
    free(s);
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

vmg_server *vmg_server_new(uv_loop_t *loop, const struct vmg_server_opts *opts, int *err)
{
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
    s->loop = loop;
    s->port = -1;
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
    s->tls_reloaded = opts->tls_reloaded;

    r = setup_tls(s, opts);
    if (r == 0 && s->ctx && !opts->cert_pem && !opts->key_pem) {
        /* From files: kept, to be read again when they change. */
        s->cert_file = strdup(opts->cert_file);
        s->key_file = strdup(opts->key_file);
        if (!s->cert_file || !s->key_file)
            r = -ENOMEM;
    }
    if (r < 0) {
        SSL_CTX_free(s->ctx);
        free(s->cert_file);
        free(s->key_file);
        free(s);
        if (err)
            *err = r;
        return NULL;
    }
    r = uv_tcp_init(loop, &s->listener);
    if (r < 0) {
        SSL_CTX_free(s->ctx);
        free(s->cert_file);
        free(s->key_file);
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
    s->handles = 1;
    if (s->cert_file)
        watch_tls(s, opts->tls_reload_ms ? opts->tls_reload_ms : VMG_SERVER_TLS_RELOAD_MS);
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
    *ret = s->stats;
    ret->connections = s->open;
    ret->buffered = s->buffered;
    for (const struct conn *c = s->conns; c; c = c->next)
        if (!c->closing && !c->reading)
            ret->paused++;
}

void vmg_server_close(vmg_server *s, void (*closed)(void *data), void *data)
{
    struct conn *c, *next;

    if (!s || s->closing)
        return;
    s->closing = 1;
    s->closed = closed;
    s->closed_data = data;
    uv_close((uv_handle_t *)&s->listener, listener_closed);
    if (s->polling) {
        uv_close((uv_handle_t *)&s->cert_poll, poll_closed);
        uv_close((uv_handle_t *)&s->key_poll, poll_closed);
    }
    for (c = s->conns; c; c = next) {
        next = c->next;
        conn_close(c);
    }
}
