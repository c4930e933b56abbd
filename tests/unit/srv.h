/* srv.h: a small HTTP/1.1 server on loopback for unit tests, on the
 * test's libuv loop. It reads each request (head and Content-Length body),
 * records it in reqs[], and hands it to a handler that answers now or later
 * (a test can hold a connection unanswered, to script long polls and
 * watches). Responses close their connection, unless the test sets
 * keep_alive: then a connection carries requests one after another, each
 * handed over as soon as it is complete (answered or not), and the test
 * answers with srv_send. The e2e suites run the same clients against the
 * real servers; this one lets a test script what a real server does
 * rarely. */
#ifndef VMG_TEST_SRV_H
#define VMG_TEST_SRV_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "lib/queue.h"

#define SRV_MAX_REQS 64

struct sreq {
    char method[16];
    char target[1024];
    char ua[128];
    char auth[256];
    char ctype[128];
    char accept[128];
    char body[2048];
};

struct srv;
struct sconn;

/* A handler answers request number i (from 0) on c, now or later. */
typedef void (*srv_handler_fn)(struct srv *s, int i, struct sconn *c);

struct sconn {
    uv_tcp_t tcp;
    struct srv *s;
    struct lq link; /* in s->conns */
    char buf[32768];
    size_t len;
    /* While the handler runs: buf holds the request's head as a string
     * (without its blank line), its body is at buf + head_len. */
    size_t head_len, body_len;
    bool closing, answered;
};

struct srv {
    uv_loop_t *loop;
    uv_tcp_t lis;
    int port;
    struct lq conns; /* every connection not closed yet (closing ones too) */
    int n;
    struct sreq reqs[SRV_MAX_REQS];
    srv_handler_fn handle;
    void *data;
    struct sconn *held; /* a connection left unanswered */
    bool keep_alive;    /* set before srv_start; see above */
    int accepted;       /* connections accepted, ever */
    /* Optional: told when a connection starts closing (either side). */
    void (*on_close)(struct srv *s, struct sconn *c);
};

/* srv_req is request number i; with keep_alive, reqs[] keeps the last
 * SRV_MAX_REQS (without it, a test may make no more). */
#define srv_req(s, i) (&(s)->reqs[(i) % SRV_MAX_REQS])

/* srv_start listens on an ephemeral loopback port (s->port); s->handle
 * must be set. srv_stop closes the listener and every connection. */
void srv_start(struct srv *s, uv_loop_t *loop);
void srv_stop(struct srv *s);
/* srv_bind_loopback binds tcp to a free port of 127.0.0.1 and returns the
 * port (bound and not listening, a port that refuses connections). */
int srv_bind_loopback(uv_tcp_t *tcp);

/* srv_reply answers with status, extra headers (each ending "\r\n") and
 * body, then closes the connection. */
void srv_reply(struct sconn *c, int status, const char *headers, const char *body);
/* srv_stream_start answers 200 with a body of unknown length: text follows
 * with srv_stream_send, which closes the connection when close_after. */
void srv_stream_start(struct sconn *c);
void srv_stream_send(struct sconn *c, const char *text, bool close_after);
/* srv_send writes raw bytes; srv_conn_close closes the connection. */
void srv_send(struct sconn *c, const char *data, size_t len, bool close_after);
void srv_conn_close(struct sconn *c);
/* srv_header_value copies the value of header name in head (a request
 * head, "\r\n"-separated) into out, or "" when it is absent. */
void srv_header_value(const char *head, const char *name, char *out, size_t len);

#endif
