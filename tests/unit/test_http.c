/* test_http.c: lib/http against a real HTTP/1.1 server on loopback.
 *
 * The server (tests/unit/srv.c, keep-alive) runs on the same libuv loop as
 * the client and answers canned responses by path. Where timing matters
 * (concurrency, streaming, cancellation) the server and the client drive
 * each other by events, never by sleeping: the server holds responses
 * until enough requests arrived, and sends the next chunk of a stream when
 * the client saw the previous line. A watchdog timer fails a test that
 * stops making progress. */
#include "tests/unit/unit.h"
#include "tests/unit/srv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <uv.h>

#include "lib/err.h"
#include "lib/http.h"

/* ---- the server: tests/unit/srv.c, keep-alive, answering by path ---- */

struct server {
    struct srv base; /* first: the handler gets it */
    int port;
    int nrequests;
    char last_method[16];
    /* /together: responses held until together_n requests are waiting. */
    int together_n;
    struct sconn *waiting[64];
    int nwaiting;
    /* /stream: the connection and the next chunk to send. */
    struct sconn *stream_conn;
    int stream_step;
    /* Called after each request is read, with its path. */
    void (*on_request)(void *data, const char *path);
    void *on_request_data;
};

/* A connection that closes leaves the server's bookkeeping. */
static void on_conn_close(struct srv *base, struct sconn *c)
{
    struct server *s = (struct server *)base;

    if (s->stream_conn == c)
        s->stream_conn = NULL;
    for (int i = 0; i < s->nwaiting; i++)
        if (s->waiting[i] == c)
            s->waiting[i] = NULL;
}

static void conn_send(struct sconn *c, const char *data, size_t len)
{
    if (c)
        srv_send(c, data, len, false);
}

static void conn_sends(struct sconn *c, const char *s)
{
    conn_send(c, s, strlen(s));
}

static void send_chunk(struct sconn *c, const char *data)
{
    char head[32];

    snprintf(head, sizeof(head), "%zx\r\n", strlen(data));
    conn_sends(c, head);
    conn_sends(c, data);
    conn_sends(c, "\r\n");
}

static const char HELLO[] = "HTTP/1.1 200 OK\r\n"
                            "Content-Type: text/plain\r\n"
                            "X-Test: yes\r\n"
                            "Set-Cookie: a=1\r\n"
                            "set-cookie: b=2\r\n"
                            "Content-Length: 11\r\n"
                            "\r\n"
                            "hello world";

static const char STREAM_HEAD[] = "HTTP/1.1 200 OK\r\n"
                                  "Content-Type: application/json\r\n"
                                  "Transfer-Encoding: chunked\r\n"
                                  "\r\n";

/* server_stream_next sends the next part of /stream. */
static void server_stream_next(struct server *s)
{
    struct sconn *c = s->stream_conn;

    switch (s->stream_step++) {
    case 0:
        send_chunk(c, "first\nsec");
        break;
    case 1:
        send_chunk(c, "ond\r\nthird\n");
        break;
    case 2:
        send_chunk(c, "fourth-no-newline");
        conn_sends(c, "0\r\n\r\n");
        break;
    default:
        break;
    }
}

static void respond(struct sconn *c, const char *path)
{
    struct server *s = (struct server *)c->s;
    char buf[8192];

    if (strcmp(path, "/hello") == 0) {
        conn_sends(c, HELLO);
    } else if (strncmp(path, "/status/", 8) == 0) {
        long code = strtol(path + 8, NULL, 10);

        if (code == 204)
            snprintf(buf, sizeof(buf), "HTTP/1.1 204 No Content\r\n\r\n");
        else
            snprintf(buf, sizeof(buf), "HTTP/1.1 %ld Whatever\r\nContent-Length: 8\r\n\r\nnot here",
                     code);
        conn_sends(c, buf);
    } else if (strcmp(path, "/redirect") == 0) {
        conn_sends(c, "HTTP/1.1 302 Found\r\nLocation: /hello\r\nX-Old: 1\r\n"
                      "Content-Length: 5\r\n\r\nmoved");
    } else if (strcmp(path, "/big") == 0) {
        static char body[100000];

        memset(body, 'b', sizeof(body));
        conn_sends(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
        conn_send(c, body, sizeof(body));
    } else if (strcmp(path, "/bigchunked") == 0) {
        static char chunk[10001];

        memset(chunk, 'c', sizeof(chunk) - 1);
        conn_sends(c, STREAM_HEAD);
        for (int i = 0; i < 10; i++)
            send_chunk(c, chunk);
        conn_sends(c, "0\r\n\r\n");
    } else if (strcmp(path, "/together") == 0) {
        s->waiting[s->nwaiting++] = c;
        if (s->nwaiting == s->together_n) {
            for (int i = 0; i < s->nwaiting; i++)
                conn_sends(s->waiting[i], HELLO);
            s->nwaiting = 0;
        }
    } else if (strcmp(path, "/stream") == 0) {
        conn_sends(c, STREAM_HEAD);
        s->stream_conn = c;
        s->stream_step = 0;
        server_stream_next(s);
    } else if (strcmp(path, "/stream-idle") == 0) {
        conn_sends(c, STREAM_HEAD);
        send_chunk(c, "hello\nagain\n");
    } else if (strcmp(path, "/stream-error") == 0) {
        conn_sends(c, "HTTP/1.1 410 Gone\r\nContent-Type: application/json\r\n"
                      "Content-Length: 17\r\n\r\n{\"kind\":\"Status\"}");
    } else if (strcmp(path, "/longline") == 0) {
        static char line[5001];

        memset(line, 'l', sizeof(line) - 1);
        conn_sends(c, STREAM_HEAD);
        send_chunk(c, "short\n");
        send_chunk(c, line);
        send_chunk(c, "\n");
        conn_sends(c, "0\r\n\r\n");
    } else if (strcmp(path, "/manyheaders") == 0) {
        size_t n = (size_t)snprintf(buf, sizeof(buf), "HTTP/1.1 200 OK\r\n");

        for (int i = 0; i < VMG_HTTP_MAX_HEADERS + 5; i++)
            n += (size_t)snprintf(buf + n, sizeof(buf) - n, "X-H%d: v\r\n", i);
        snprintf(buf + n, sizeof(buf) - n, "Content-Length: 2\r\n\r\nok");
        conn_sends(c, buf);
    } else if (strcmp(path, "/bigheader") == 0) {
        static char value[VMG_HTTP_MAX_HEADER_BYTES + 1];

        memset(value, 'h', sizeof(value) - 1);
        conn_sends(c, "HTTP/1.1 200 OK\r\nX-Big: ");
        conn_sends(c, value);
        conn_sends(c, "\r\nContent-Length: 2\r\n\r\nok");
    } else if (strcmp(path, "/hang") == 0) {
        /* never answered */
    } else {
        conn_sends(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    }
}

static void handle(struct srv *base, int i, struct sconn *c)
{
    struct server *s = (struct server *)base;
    const struct sreq *q = srv_req(base, i);

    s->nrequests++;
    snprintf(s->last_method, sizeof(s->last_method), "%s", q->method);
    respond(c, q->target);
    if (s->on_request)
        s->on_request(s->on_request_data, q->target);
}

static void server_start(struct server *s, uv_loop_t *loop)
{
    memset(s, 0, sizeof(*s));
    s->base.handle = handle;
    s->base.keep_alive = true;
    s->base.on_close = on_conn_close;
    srv_start(&s->base, loop);
    s->port = s->base.port;
}

static void server_stop(struct server *s)
{
    srv_stop(&s->base);
}

/* ---- the fixture: a loop, the server and a vmg_http ---- */

struct fx {
    uv_loop_t loop;
    struct server srv;
    vmg_http *h;
    uv_timer_t watchdog;
    bool timed_out;
    int closed_calls;
    /* observer records */
    int obs_calls;
    char obs_method[16];
    char obs_host[64];
    long obs_status;
    int obs_err;
};

static void on_watchdog(uv_timer_t *t)
{
    struct fx *f = t->data;

    f->timed_out = true;
}

/* run_until runs the loop until *count reaches want, failing after 10 s. */
static void run_until(struct fx *f, const int *count, int want)
{
    assert_int_equal(uv_timer_start(&f->watchdog, on_watchdog, 10000, 0), 0);
    while (*count < want && !f->timed_out)
        uv_run(&f->loop, UV_RUN_ONCE);
    uv_timer_stop(&f->watchdog);
    assert_false(f->timed_out);
}

static void on_obs(void *data, const char *method, const char *host, long status, int err,
                   double seconds)
{
    struct fx *f = data;

    f->obs_calls++;
    snprintf(f->obs_method, sizeof(f->obs_method), "%s", method);
    snprintf(f->obs_host, sizeof(f->obs_host), "%s", host);
    f->obs_status = status;
    f->obs_err = err;
    assert_true(seconds >= 0);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    int err = 0;

    assert_non_null(f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    server_start(&f->srv, &f->loop);
    f->h = vmg_http_new(&f->loop, &err);
    assert_non_null(f->h);
    vmg_http_set_observer(f->h, on_obs, f);
    assert_int_equal(uv_timer_init(&f->loop, &f->watchdog), 0);
    f->watchdog.data = f;
    *state = f;
    return 0;
}

static void on_closed(void *data)
{
    struct fx *f = data;

    f->closed_calls++;
}

/* teardown closes the client (unless the test did), the server, and checks
 * that every handle is gone: uv_loop_close fails on a leaked handle, and
 * ASan reports leaked memory. */
static int teardown(void **state)
{
    struct fx *f = *state;

    if (f->h) {
        vmg_http_close(f->h, on_closed, f);
        f->h = NULL;
    }
    server_stop(&f->srv);
    assert_int_equal(uv_timer_start(&f->watchdog, on_watchdog, 10000, 0), 0);
    uv_unref((uv_handle_t *)&f->watchdog);
    while (uv_run(&f->loop, UV_RUN_ONCE) != 0 && !f->timed_out)
        ;
    assert_false(f->timed_out);
    uv_close((uv_handle_t *)&f->watchdog, NULL);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->closed_calls, 1);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    free(f);
    return 0;
}

/* ---- what a transfer saw ---- */

struct rec {
    struct fx *f;
    int calls;
    int err;
    long status;
    char *body;
    size_t body_len;
    char errmsg[CURL_ERROR_SIZE];
    double seconds;
    char *x_test, *cookie0, *cookie1, *cookie2, *x_old, *location;
    char *lines[16];
    int nlines;
    int line_ret; /* what on_line returns */
    /* hooks run by on_line / done */
    void (*line_hook)(struct rec *r, const char *line);
    void (*done_hook)(struct rec *r);
    vmg_http_xfer *xfer;
    int *counter; /* incremented by done when set */
};

static char *dup_or_null(const char *s)
{
    char *d;

    if (!s)
        return NULL;
    d = strdup(s);
    assert_non_null(d);
    return d;
}

static void rec_free(struct rec *r)
{
    free(r->body);
    free(r->x_test);
    free(r->cookie0);
    free(r->cookie1);
    free(r->cookie2);
    free(r->x_old);
    free(r->location);
    for (int i = 0; i < r->nlines; i++)
        free(r->lines[i]);
    memset(r, 0, sizeof(*r));
}

static void on_done(void *data, const struct vmg_http_result *res)
{
    struct rec *r = data;

    r->calls++;
    assert_int_equal(r->calls, 1);
    r->err = res->err;
    r->status = res->status;
    assert_non_null(res->body);
    assert_int_equal(res->body[res->body_len], '\0');
    r->body = malloc(res->body_len + 1);
    assert_non_null(r->body);
    memcpy(r->body, res->body, res->body_len + 1);
    r->body_len = res->body_len;
    assert_non_null(res->errmsg);
    assert_true((res->err == 0) == (res->errmsg[0] == '\0'));
    snprintf(r->errmsg, sizeof(r->errmsg), "%s", res->errmsg);
    r->seconds = res->seconds;
    assert_non_null(res->xfer);
    assert_ptr_equal(vmg_http_xfer_easy(res->xfer) != NULL, 1);
    r->x_test = dup_or_null(vmg_http_xfer_header(res->xfer, "x-TEST"));
    r->cookie0 = dup_or_null(vmg_http_xfer_header_nth(res->xfer, "Set-Cookie", 0));
    r->cookie1 = dup_or_null(vmg_http_xfer_header_nth(res->xfer, "Set-Cookie", 1));
    r->cookie2 = dup_or_null(vmg_http_xfer_header_nth(res->xfer, "Set-Cookie", 2));
    r->x_old = dup_or_null(vmg_http_xfer_header(res->xfer, "X-Old"));
    r->location = dup_or_null(vmg_http_xfer_header(res->xfer, "Location"));
    /* Canceling a transfer from its own done is a no-op. */
    vmg_http_cancel(res->xfer);
    if (r->counter)
        (*r->counter)++;
    if (r->done_hook)
        r->done_hook(r);
}

static int on_line(void *data, const char *line, size_t len)
{
    struct rec *r = data;

    assert_int_equal(strlen(line), len);
    assert_true(r->nlines < 16);
    r->lines[r->nlines++] = dup_or_null(line);
    if (r->line_hook)
        r->line_hook(r, line);
    return r->line_ret;
}

static CURL *easy_for(struct fx *f, const char *path)
{
    CURL *e = curl_easy_init();
    char url[256];

    assert_non_null(e);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", f->srv.port, path);
    assert_int_equal(curl_easy_setopt(e, CURLOPT_URL, url), CURLE_OK);
    /* Whatever the environment says, talk to the server directly. */
    assert_int_equal(curl_easy_setopt(e, CURLOPT_PROXY, ""), CURLE_OK);
    assert_int_equal(curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 5000L), CURLE_OK);
    return e;
}

static void start(struct fx *f, const char *path, size_t max_body, bool stream, struct rec *r)
{
    r->f = f;
    assert_int_equal(vmg_http_start(f->h, easy_for(f, path), NULL, max_body,
                                    stream ? on_line : NULL, on_done, r, &r->xfer),
                     0);
}

/* ---- the tests ---- */

static void test_get_body_and_headers(void **state)
{
    struct fx *f = *state;
    struct rec r = {0};

    start(f, "/hello", 1024, false, &r);
    assert_int_equal(vmg_http_active(f->h), 1);
    /* done never runs from inside vmg_http_start. */
    assert_int_equal(r.calls, 0);
    run_until(f, &r.calls, 1);
    assert_int_equal(r.err, 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 11);
    assert_string_equal(r.body, "hello world");
    assert_string_equal(r.x_test, "yes");
    assert_string_equal(r.cookie0, "a=1");
    assert_string_equal(r.cookie1, "b=2");
    assert_null(r.cookie2);
    assert_null(r.x_old);
    assert_true(r.seconds >= 0 && r.seconds < 10);
    assert_int_equal(vmg_http_active(f->h), 0);
    assert_int_equal(f->obs_calls, 1);
    assert_string_equal(f->obs_method, "GET");
    assert_string_equal(f->obs_host, "127.0.0.1");
    assert_int_equal(f->obs_status, 200);
    assert_int_equal(f->obs_err, 0);
    rec_free(&r);

    /* A body exactly at the bound is fine. */
    start(f, "/hello", 11, false, &r);
    run_until(f, &r.calls, 1);
    assert_int_equal(r.err, 0);
    assert_string_equal(r.body, "hello world");
    rec_free(&r);
}

static void test_status_codes(void **state)
{
    struct fx *f = *state;
    struct rec r404 = {0}, r500 = {0}, r204 = {0}, rdel = {0};
    int done = 0;
    CURL *e;

    r404.counter = r500.counter = r204.counter = rdel.counter = &done;
    start(f, "/status/404", 1024, false, &r404);
    start(f, "/status/500", 1024, false, &r500);
    start(f, "/status/204", 1024, false, &r204);
    run_until(f, &done, 3);
    /* An error status is a result, not an error. */
    assert_int_equal(r404.err, 0);
    assert_int_equal(r404.status, 404);
    assert_string_equal(r404.body, "not here");
    assert_int_equal(r500.status, 500);
    assert_int_equal(r204.err, 0);
    assert_int_equal(r204.status, 204);
    assert_int_equal(r204.body_len, 0);
    assert_string_equal(r204.body, "");

    /* The observer sees the method actually used. */
    e = easy_for(f, "/status/404");
    assert_int_equal(curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE"), CURLE_OK);
    rdel.f = f;
    assert_int_equal(vmg_http_start(f->h, e, NULL, 1024, NULL, on_done, &rdel, NULL), 0);
    run_until(f, &done, 4);
    assert_string_equal(f->srv.last_method, "DELETE");
    assert_string_equal(f->obs_method, "DELETE");
    assert_int_equal(f->obs_status, 404);
    assert_int_equal(f->obs_calls, 4);
    rec_free(&r404);
    rec_free(&r500);
    rec_free(&r204);
    rec_free(&rdel);
}

static void test_redirect_keeps_final_headers(void **state)
{
    struct fx *f = *state;
    struct rec r = {0}, rn = {0};
    CURL *e = easy_for(f, "/redirect");

    assert_int_equal(curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L), CURLE_OK);
    r.f = f;
    assert_int_equal(vmg_http_start(f->h, e, NULL, 1024, NULL, on_done, &r, NULL), 0);
    run_until(f, &r.calls, 1);
    assert_int_equal(r.err, 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "hello world");
    assert_string_equal(r.x_test, "yes");
    assert_null(r.x_old);
    assert_null(r.location);

    start(f, "/redirect", 1024, false, &rn);
    run_until(f, &rn.calls, 1);
    assert_int_equal(rn.status, 302);
    assert_string_equal(rn.x_old, "1");
    assert_string_equal(rn.location, "/hello");
    assert_string_equal(rn.body, "moved");
    rec_free(&r);
    rec_free(&rn);
}

static void test_concurrent(void **state)
{
    struct fx *f = *state;
    struct rec r[20];
    int done = 0;

    memset(r, 0, sizeof(r));
    /* The server answers none until all 20 requests are in: they must be in
     * flight together. */
    f->srv.together_n = 20;
    for (int i = 0; i < 20; i++) {
        r[i].counter = &done;
        start(f, "/together", 1024, false, &r[i]);
    }
    assert_int_equal(vmg_http_active(f->h), 20);
    run_until(f, &done, 20);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(r[i].calls, 1);
        assert_int_equal(r[i].err, 0);
        assert_int_equal(r[i].status, 200);
        assert_string_equal(r[i].body, "hello world");
        rec_free(&r[i]);
    }
    assert_int_equal(vmg_http_active(f->h), 0);
    assert_int_equal(f->srv.nrequests, 20);
}

/* server_open counts the server's connections not closed yet. */
static int server_open(const struct server *s)
{
    const struct lq *q;
    int n = 0;

    lq_foreach(q, &s->base.conns) n += !lq_entry(q, const struct sconn, link)->closing;
    return n;
}

/* Idle connections are bounded: after 40 transfers at once, all answered
 * with keep-alive, curl keeps at most VMG_HTTP_MAX_IDLE_CONNS of them open
 * (its default would keep all 40). */
static void test_idle_connections_bounded(void **state)
{
    struct fx *f = *state;
    enum { N = 40 };
    struct rec r[N];
    int done = 0;

    memset(r, 0, sizeof(r));
    f->srv.together_n = N;
    for (int i = 0; i < N; i++) {
        r[i].counter = &done;
        start(f, "/together", 1024, false, &r[i]);
    }
    run_until(f, &done, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(r[i].status, 200);
        rec_free(&r[i]);
    }
    /* The server sees the connections curl closed end (EOF): give it the
     * time to read them, then count what stays open. */
    assert_int_equal(uv_timer_start(&f->watchdog, on_watchdog, 1000, 0), 0);
    while (server_open(&f->srv) > VMG_HTTP_MAX_IDLE_CONNS && !f->timed_out)
        uv_run(&f->loop, UV_RUN_ONCE);
    uv_timer_stop(&f->watchdog);
    f->timed_out = false;
    assert_in_range(server_open(&f->srv), 1, VMG_HTTP_MAX_IDLE_CONNS);
    assert_int_equal(f->srv.nrequests, N);
}

/* A burst of 24 transfers at once (the Kubernetes clients and vCenter
 * share one pool) leaves its connections for the next burst: the second
 * burst opens no new connection. */
static void test_idle_connections_reused_after_burst(void **state)
{
    struct fx *f = *state;
    enum { N = 24 };
    struct rec r[N];
    int done = 0;

    f->srv.together_n = N;
    for (int round = 0; round < 2; round++) {
        memset(r, 0, sizeof(r));
        done = 0;
        for (int i = 0; i < N; i++) {
            r[i].counter = &done;
            start(f, "/together", 1024, false, &r[i]);
        }
        run_until(f, &done, N);
        for (int i = 0; i < N; i++) {
            assert_int_equal(r[i].status, 200);
            rec_free(&r[i]);
        }
    }
    assert_int_equal(f->srv.nrequests, 2 * N);
    assert_int_equal(f->srv.base.accepted, N);
}

static void test_body_too_big(void **state)
{
    struct fx *f = *state;
    struct rec r1 = {0}, r2 = {0};
    int done = 0;

    r1.counter = r2.counter = &done;
    start(f, "/big", 1000, false, &r1);        /* Content-Length announced */
    start(f, "/bigchunked", 1000, false, &r2); /* found while reading */
    run_until(f, &done, 2);
    assert_int_equal(r1.err, VMG_ETOOBIG);
    assert_int_equal(r2.err, VMG_ETOOBIG);
    assert_int_equal(f->obs_err, VMG_ETOOBIG);
    assert_true(r2.body_len <= 1000);
    rec_free(&r1);
    rec_free(&r2);

    /* With room enough, the same body arrives whole. */
    start(f, "/bigchunked", 100000, false, &r1);
    run_until(f, &r1.calls, 1);
    assert_int_equal(r1.err, 0);
    assert_int_equal(r1.body_len, 100000);
    rec_free(&r1);
}

static void stream_hook(struct rec *r, const char *line)
{
    /* The next chunk is sent only once the client has the line before it,
     * so "sec" and "ond" reach the client separately. */
    if (strcmp(line, "first") == 0 || strcmp(line, "third") == 0)
        server_stream_next(&r->f->srv);
}

static void test_streaming_lines(void **state)
{
    struct fx *f = *state;
    struct rec r = {0};

    r.line_hook = stream_hook;
    start(f, "/stream", 64, true, &r);
    run_until(f, &r.calls, 1);
    assert_int_equal(r.err, 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.nlines, 4);
    assert_string_equal(r.lines[0], "first");
    assert_string_equal(r.lines[1], "second");
    assert_string_equal(r.lines[2], "third");
    assert_string_equal(r.lines[3], "fourth-no-newline");
    /* A streamed body is not handed over again. */
    assert_int_equal(r.body_len, 0);
    rec_free(&r);
}

static void test_stream_error_status_is_buffered(void **state)
{
    struct fx *f = *state;
    struct rec r = {0};

    start(f, "/stream-error", 1024, true, &r);
    run_until(f, &r.calls, 1);
    assert_int_equal(r.err, 0);
    assert_int_equal(r.status, 410);
    assert_int_equal(r.nlines, 0);
    assert_string_equal(r.body, "{\"kind\":\"Status\"}");
    rec_free(&r);
}

static void test_stream_line_too_long(void **state)
{
    struct fx *f = *state;
    struct rec r = {0};

    start(f, "/longline", 1000, true, &r);
    run_until(f, &r.calls, 1);
    assert_int_equal(r.err, VMG_ETOOBIG);
    assert_int_equal(r.nlines, 1);
    assert_string_equal(r.lines[0], "short");
    rec_free(&r);
}

static void test_line_callback_aborts(void **state)
{
    struct fx *f = *state;
    struct rec r1 = {0}, r2 = {0};
    int done = 0;

    r1.counter = r2.counter = &done;
    r1.line_ret = -EPROTO;
    r2.line_ret = 1;
    start(f, "/stream-idle", 1024, true, &r1);
    start(f, "/stream-idle", 1024, true, &r2);
    run_until(f, &done, 2);
    /* No line after the one that said stop. */
    assert_int_equal(r1.nlines, 1);
    assert_int_equal(r1.err, -EPROTO);
    assert_int_equal(r2.nlines, 1);
    assert_int_equal(r2.err, VMG_ECANCELED);
    rec_free(&r1);
    rec_free(&r2);
}

static void cancel_on_request(void *data, const char *path)
{
    struct rec *r = data;

    if (strcmp(path, "/hang") == 0)
        vmg_http_cancel(r->xfer);
}

static void cancel_own_line(struct rec *r, const char *line)
{
    vmg_http_cancel(r->xfer);
    /* done ran before vmg_http_cancel returned. */
    assert_int_equal(r->calls, 1);
}

static void test_cancel(void **state)
{
    struct fx *f = *state;
    struct rec r1 = {0}, r2 = {0}, r3 = {0}, r4 = {0};

    /* Before the loop ever ran. */
    start(f, "/hang", 1024, false, &r1);
    vmg_http_cancel(r1.xfer);
    assert_int_equal(r1.calls, 1);
    assert_int_equal(r1.err, VMG_ECANCELED);
    assert_int_equal(r1.status, 0);
    assert_int_equal(f->obs_err, VMG_ECANCELED);
    assert_int_equal(vmg_http_active(f->h), 0);

    /* In flight: the server has the request and holds its answer. */
    f->srv.on_request = cancel_on_request;
    f->srv.on_request_data = &r2;
    start(f, "/hang", 1024, false, &r2);
    run_until(f, &r2.calls, 1);
    assert_int_equal(r2.err, VMG_ECANCELED);
    f->srv.on_request = NULL;

    /* From inside its own line callback. */
    r3.line_hook = cancel_own_line;
    start(f, "/stream-idle", 1024, true, &r3);
    run_until(f, &r3.calls, 1);
    assert_int_equal(r3.err, VMG_ECANCELED);
    assert_int_equal(r3.nlines, 1);

    /* The client still works afterwards. */
    start(f, "/hello", 1024, false, &r4);
    run_until(f, &r4.calls, 1);
    assert_int_equal(r4.err, 0);
    assert_int_equal(vmg_http_active(f->h), 0);
    rec_free(&r1);
    rec_free(&r2);
    rec_free(&r3);
    rec_free(&r4);
}

static void test_connection_refused(void **state)
{
    struct fx *f = *state;
    struct rec r = {0};
    uv_tcp_t unused;
    char url[64];
    CURL *e = curl_easy_init();

    /* A port bound but not listening refuses connections. */
    assert_int_equal(uv_tcp_init(&f->loop, &unused), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/", srv_bind_loopback(&unused));
    assert_non_null(e);
    assert_int_equal(curl_easy_setopt(e, CURLOPT_URL, url), CURLE_OK);
    assert_int_equal(curl_easy_setopt(e, CURLOPT_PROXY, ""), CURLE_OK);
    r.f = f;
    assert_int_equal(vmg_http_start(f->h, e, NULL, 1024, NULL, on_done, &r, NULL), 0);
    run_until(f, &r.calls, 1);
    assert_int_equal(r.err, VMG_ETRANSPORT);
    assert_int_equal(r.status, 0);
    assert_true(strlen(r.errmsg) > 0);
    assert_int_equal(f->obs_err, VMG_ETRANSPORT);
    uv_close((uv_handle_t *)&unused, NULL);
    rec_free(&r);
}

/* stop_run ends the loop's run: with nothing else to do, UV_RUN_ONCE would
 * wait for the watchdog once the transfer is done. */
static void stop_run(struct rec *r)
{
    uv_stop(&r->f->loop);
}

/* A proxy URL curl cannot use is quoted whole in curl's error: its
 * password is not in the message handed to the caller, who logs it. */
static void test_proxy_password_not_in_errors(void **state)
{
    char longest[400];
    const char *proxies[] = {
        "http://svc:S3cr3tPw@proxy.corp:31280x",
        "bogus://svc:S3cr3tPw@proxy.corp:3128",
        "bogus://svc:S3c/r3tPw@proxy.corp:3128",
        "svc:S3cr3tPw@proxy.corp:31280x",
        "http://svc:S3c r3tPw@proxy.corp:31280x",
        "http://svc:S3c'r3tPw@proxy.corp:31280x",
        "svc:S3c://r3tPw@proxy.corp:31280x",
        longest, /* a password so long that curl's text is cut before its '@' */
    };
    struct fx *f = *state;

    snprintf(longest, sizeof(longest), "svc:S3c%0300dr3tPw@proxy.corp:31280x", 0);
    for (size_t i = 0; i < sizeof(proxies) / sizeof(proxies[0]); i++) {
        struct rec r = {0};
        CURL *e = curl_easy_init();

        assert_non_null(e);
        assert_int_equal(curl_easy_setopt(e, CURLOPT_URL, "http://127.0.0.1:1/"), CURLE_OK);
        assert_int_equal(curl_easy_setopt(e, CURLOPT_PROXY, proxies[i]), CURLE_OK);
        r.f = f;
        r.done_hook = stop_run;
        assert_int_equal(vmg_http_start(f->h, e, NULL, 1024, NULL, on_done, &r, NULL), 0);
        run_until(f, &r.calls, 1);
        assert_int_equal(r.err, VMG_ETRANSPORT);
        assert_non_null(strstr(r.errmsg, "proxy"));
        if (strstr(r.errmsg, "S3c") || strstr(r.errmsg, "r3tPw") || strstr(r.errmsg, "svc") ||
            strstr(r.errmsg, "00000000"))
            fail_msg("proxy %zu: %s", i, r.errmsg);
        rec_free(&r);
    }
}

struct close_case {
    struct fx *f;
    struct rec r[4];
    int done;
    int started_after_close;
};

static void try_start_after_close(struct rec *r)
{
    struct fx *f = r->f;

    /* f->h is closing: a new transfer is refused, and its easy handle freed
     * (ASan would report it otherwise). */
    if (r->err == VMG_ECANCELED)
        assert_int_equal(
            vmg_http_start(f->h, easy_for(f, "/hello"), NULL, 1024, NULL, on_done, r, NULL),
            VMG_ECANCELED);
}

static void close_on_third_request(void *data, const char *path)
{
    struct close_case *c = data;
    struct fx *f = c->f;

    if (f->srv.nrequests == 3) {
        vmg_http_close(f->h, on_closed, f);
        /* Every done ran, once, before vmg_http_close returned. */
        assert_int_equal(c->done, 3);
    }
}

static void test_close_in_flight(void **state)
{
    struct fx *f = *state;
    struct close_case c;

    memset(&c, 0, sizeof(c));
    c.f = f;
    for (int i = 0; i < 3; i++) {
        c.r[i].counter = &c.done;
        c.r[i].done_hook = try_start_after_close;
    }
    f->srv.on_request = close_on_third_request;
    f->srv.on_request_data = &c;
    start(f, "/hang", 1024, false, &c.r[0]);
    start(f, "/hang", 1024, false, &c.r[1]);
    start(f, "/stream-idle", 1024, true, &c.r[2]);
    run_until(f, &c.done, 3);
    f->h = NULL;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(c.r[i].calls, 1);
        assert_int_equal(c.r[i].err, VMG_ECANCELED);
    }
    /* teardown runs the loop until h is freed and checks closed ran once. */
    for (int i = 0; i < 3; i++)
        rec_free(&c.r[i]);
}

static void close_from_done(struct rec *r)
{
    struct fx *f = r->f;

    if (r->err == 0) {
        vmg_http_close(f->h, on_closed, f);
        f->h = NULL;
    }
}

static void test_close_from_done(void **state)
{
    struct fx *f = *state;
    struct rec r1 = {0}, r2 = {0};

    start(f, "/hang", 1024, false, &r1);
    r2.done_hook = close_from_done;
    start(f, "/hello", 1024, false, &r2);
    run_until(f, &r2.calls, 1);
    assert_null(f->h);
    assert_int_equal(r2.err, 0);
    assert_int_equal(r1.calls, 1);
    assert_int_equal(r1.err, VMG_ECANCELED);
    run_until(f, &f->closed_calls, 1);
    rec_free(&r1);
    rec_free(&r2);
}

static void close_from_line(struct rec *r, const char *line)
{
    struct fx *f = r->f;

    vmg_http_close(f->h, on_closed, f);
    f->h = NULL;
    assert_int_equal(r->calls, 1);
}

static void test_close_from_line(void **state)
{
    struct fx *f = *state;
    struct rec r1 = {0}, r2 = {0};

    start(f, "/hang", 1024, false, &r1);
    r2.line_hook = close_from_line;
    start(f, "/stream-idle", 1024, true, &r2);
    run_until(f, &f->closed_calls, 1);
    assert_int_equal(r1.calls, 1);
    assert_int_equal(r1.err, VMG_ECANCELED);
    assert_int_equal(r2.calls, 1);
    assert_int_equal(r2.err, VMG_ECANCELED);
    assert_int_equal(r2.nlines, 1);
    rec_free(&r1);
    rec_free(&r2);
}

static struct rec *started_from_line;

static void start_from_line(struct rec *r, const char *line)
{
    if (started_from_line->xfer)
        return;
    start(r->f, "/hello", 1024, false, started_from_line);
    /* Not yet running, but counted. */
    assert_int_equal(vmg_http_active(r->f->h), 2);
    assert_int_equal(started_from_line->calls, 0);
    vmg_http_cancel(r->xfer);
}

static void test_start_from_line(void **state)
{
    struct fx *f = *state;
    struct rec r1 = {0}, r2 = {0};

    started_from_line = &r2;
    r1.line_hook = start_from_line;
    start(f, "/stream-idle", 1024, true, &r1);
    run_until(f, &r2.calls, 1);
    assert_int_equal(r1.err, VMG_ECANCELED);
    assert_int_equal(r2.err, 0);
    assert_string_equal(r2.body, "hello world");
    rec_free(&r1);
    rec_free(&r2);
}

static void test_headers_bounded(void **state)
{
    struct fx *f = *state;
    struct rec r = {0};

    start(f, "/manyheaders", 1024, false, &r);
    run_until(f, &r.calls, 1);
    assert_int_equal(r.err, VMG_ETOOBIG);
    rec_free(&r);
    start(f, "/bigheader", 1024, false, &r);
    run_until(f, &r.calls, 1);
    assert_int_equal(r.err, VMG_ETOOBIG);
    rec_free(&r);
}

/* The transfer owns what it sends: curl may read a request's headers and
 * body until the transfer is reaped, after its done callback (when it was
 * cancelled from inside another transfer's callback), so the caller's
 * copies may go as soon as vmg_http_start returns. */
static void test_send_owned(void **state)
{
    struct fx *f = *state;
    struct rec r = {0};
    char *body = strdup("{\"spec\":\"the body\"}");
    struct vmg_http_send send = {0};
    const struct sreq *q;
    CURL *e;

    assert_non_null(body);
    send.headers = curl_slist_append(NULL, "Content-Type: application/x-test");
    assert_non_null(send.headers);
    assert_non_null(curl_slist_append(send.headers, "Authorization: Bearer sekrit"));
    send.body = body;
    send.body_len = strlen(body);
    e = easy_for(f, "/hello");
    assert_int_equal(curl_easy_setopt(e, CURLOPT_POST, 1L), CURLE_OK);
    r.f = f;
    assert_int_equal(vmg_http_start(f->h, e, &send, 1024, NULL, on_done, &r, &r.xfer), 0);
    /* Nothing of the caller's is read from here on. */
    memset(body, 'X', strlen(body));
    free(body);
    run_until(f, &r.calls, 1);
    assert_int_equal(r.err, 0);
    assert_int_equal(r.status, 200);
    q = srv_req(&f->srv.base, f->srv.base.n - 1);
    assert_string_equal(q->method, "POST");
    assert_string_equal(q->ctype, "application/x-test");
    assert_string_equal(q->auth, "Bearer sekrit");
    assert_string_equal(q->body, "{\"spec\":\"the body\"}");
    rec_free(&r);

    /* An empty body is sent as one, not as none. */
    e = easy_for(f, "/hello");
    assert_int_equal(curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PUT"), CURLE_OK);
    send = (struct vmg_http_send){.body = ""};
    r.f = f;
    assert_int_equal(vmg_http_start(f->h, e, &send, 1024, NULL, on_done, &r, &r.xfer), 0);
    run_until(f, &r.calls, 1);
    assert_int_equal(r.status, 200);
    q = srv_req(&f->srv.base, f->srv.base.n - 1);
    assert_string_equal(q->method, "PUT");
    assert_string_equal(q->body, "");
    rec_free(&r);

    /* A refused start frees the headers too (ASan checks). */
    send = (struct vmg_http_send){.headers = curl_slist_append(NULL, "X-A: b"), .body_len = 3};
    assert_non_null(send.headers);
    assert_int_equal(
        vmg_http_start(f->h, easy_for(f, "/hello"), &send, 1024, NULL, on_done, &r, NULL), -EINVAL);
    send.headers = curl_slist_append(NULL, "X-A: b");
    send.body_len = 0;
    assert_non_null(send.headers);
    assert_int_equal(vmg_http_start(f->h, NULL, &send, 1024, NULL, on_done, &r, NULL), -EINVAL);
    assert_int_equal(r.calls, 0);
}

static void test_bad_arguments(void **state)
{
    struct fx *f = *state;
    struct rec r = {0};

    /* Each refused easy handle is freed (ASan checks), done never runs. */
    assert_int_equal(vmg_http_start(f->h, easy_for(f, "/hello"), NULL, 0, NULL, on_done, &r, NULL),
                     -EINVAL);
    assert_int_equal(vmg_http_start(f->h, easy_for(f, "/hello"), NULL, 10, NULL, NULL, &r, NULL),
                     -EINVAL);
    assert_int_equal(vmg_http_start(NULL, easy_for(f, "/hello"), NULL, 10, NULL, on_done, &r, NULL),
                     -EINVAL);
    assert_int_equal(vmg_http_start(f->h, NULL, NULL, 10, NULL, on_done, &r, NULL), -EINVAL);
    assert_int_equal(vmg_http_active(f->h), 0);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(r.calls, 0);
    vmg_http_cancel(NULL);
    vmg_http_close(NULL, on_closed, f);
    assert_null(vmg_http_xfer_header(NULL, "x"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_get_body_and_headers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_codes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redirect_keeps_final_headers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_connections_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_connections_reused_after_burst, setup, teardown),
        cmocka_unit_test_setup_teardown(test_body_too_big, setup, teardown),
        cmocka_unit_test_setup_teardown(test_streaming_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_error_status_is_buffered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_line_too_long, setup, teardown),
        cmocka_unit_test_setup_teardown(test_line_callback_aborts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proxy_password_not_in_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_from_done, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_from_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_from_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_headers_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_send_owned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
    };
    int r;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    r = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return r;
}
