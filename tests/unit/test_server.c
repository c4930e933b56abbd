/* test_server.c: the HTTP/HTTPS server, driven by real clients (libcurl and
 * raw sockets) in a thread while the loop runs in the main thread, and the
 * self-signed certificates of lib/tlsgen. */
#include "tests/unit/unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <uv.h>

#include "lib/err.h"
#include "lib/server.h"
#include "lib/tlsgen.h"

#define MAXR 16
#define BODY_MAX 4096

/* What one request of the client thread saw. */
struct result {
    int rc;      /* CURLcode, or for raw requests 0 / -1 (closed) */
    long status; /* HTTP status, 0 if none */
    char body[BODY_MAX];
    size_t body_len;
    char ctype[128];
    long connects; /* new connections the request made */
    char errbuf[CURL_ERROR_SIZE];
    double ms;
};

struct fx {
    uv_loop_t loop;
    vmg_server *srv;
    struct vmg_server_opts opts;
    uv_async_t signal;
    pthread_t thread;
    void (*client)(struct fx *);
    int port;
    int https;
    char *cert_pem;
    char *key_pem;
    /* When to close the server: the client has signalled, and as many
     * requests are held / aborted as wanted. */
    int client_signalled;
    int want_held;
    int want_aborts;
    int finishing;
    /* Handler state. */
    int requests;
    int aborts;
    int abort_responds_rc;
    vmg_server_req *held[4];
    int nheld;
    int closed_called;
    uv_timer_t late;
    uv_timer_t settle; /* the final stats, one loop iteration after the client is done */
    int late_rc[4];
    /* Client results, filled by the thread, read after the join. */
    struct result r[MAXR];
    int n;
    int flags[8];
    int self_signalled; /* the client sent the signal itself */
    /* The server's stats when the client signalled, and when it closed. */
    struct vmg_server_stats at_signal;
    struct vmg_server_stats stats;
    /* With sample set, the loop looks at the stats every 5 ms: it counts
     * its looks and records how many connections are open, for the client
     * to wait on, and stops the server's loop for stall_ms when the client
     * sets it (stalling while it does). */
    int sample;
    uv_timer_t sampler;
    size_t max_paused;
    atomic_uint samples;
    atomic_size_t sampled_conns;
    atomic_size_t sampled_paused; /* connections not read, at the last look */
    atomic_int stall_ms;
    atomic_int stalling;
    /* tls_reloaded calls: their count, the last status and message. */
    int reloads;
    int reload_failures;
    int reload_status;
    char reload_msg[512];
};

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* ---- the handler ---- */

struct later {
    uv_timer_t t;
    vmg_server_req *req;
    size_t big; /* the answer's body: this many bytes, "later\n" when 0 */
};

#define LATE_BIG (4u << 20)

static void later_closed(uv_handle_t *h)
{
    free(h);
}

static void later_fire(uv_timer_t *t)
{
    struct later *l = (struct later *)t;
    if (l->big) {
        char *b = calloc(1, l->big);
        assert_non_null(b);
        vmg_server_respond(l->req, 200, "application/octet-stream", b, l->big);
        free(b);
    } else {
        vmg_server_respond(l->req, 200, "text/plain", "later\n", 6);
    }
    uv_close((uv_handle_t *)t, later_closed);
}

static void maybe_finish(struct fx *f);
static void server_closed(void *data);

static void on_abort_respond(void *data, vmg_server_req *r)
{
    struct fx *f = data;
    f->aborts++;
    assert_true(vmg_server_req_aborted(r));
    f->abort_responds_rc = vmg_server_respond(r, 200, "text/plain", "too late", 8);
    maybe_finish(f);
}

static void on_abort_count(void *data, vmg_server_req *r)
{
    struct fx *f = data;
    f->aborts++;
    assert_true(vmg_server_req_aborted(r));
}

static void handler(void *data, vmg_server_req *req)
{
    struct fx *f = data;
    const char *path = vmg_server_req_path(req);
    char buf[512];

    f->requests++;
    assert_false(vmg_server_req_aborted(req));
    if (strcmp(path, "/hello") == 0) {
        vmg_server_respond(req, 200, "text/plain; charset=utf-8", "hello\n", 6);
    } else if (strcmp(path, "/info") == 0) {
        int n = snprintf(buf, sizeof(buf), "%s %s ?%s %s", vmg_server_req_method(req), path,
                         vmg_server_req_query(req), vmg_server_req_peer(req));
        vmg_server_respond(req, 200, "text/plain", buf, (size_t)n);
    } else if (strcmp(path, "/echo-header") == 0) {
        const char *v = vmg_server_req_header(req, "X-CUSTOM-HEADER");
        const char *v2 = vmg_server_req_header(req, "x-custom-header");
        assert_true(v == v2);
        assert_null(vmg_server_req_header(req, "X-Custom"));
        assert_int_equal(vmg_server_req_add_header(req, "X-Reply", "yes"), 0);
        assert_int_equal(vmg_server_req_add_header(req, "Bad Name", "x"), -EINVAL);
        assert_int_equal(vmg_server_req_add_header(req, "X-Split", "a\r\nb"), -EINVAL);
        assert_int_equal(vmg_server_req_add_header(req, "content-length", "1"), -EINVAL);
        vmg_server_respond(req, 200, "text/plain", v ? v : "(none)", v ? strlen(v) : 6);
    } else if (strcmp(path, "/body") == 0) {
        size_t len;
        const char *b = vmg_server_req_body(req, &len);
        vmg_server_respond(req, 201, "application/octet-stream", b, len);
    } else if (strcmp(path, "/async") == 0) {
        struct later *l = calloc(1, sizeof(*l));
        assert_non_null(l);
        l->req = req;
        uv_timer_init(&f->loop, &l->t);
        uv_timer_start(&l->t, later_fire, 50, 0);
    } else if (strcmp(path, "/slow") == 0) {
        /* With the handler for a while: its connection is not evictable. */
        struct later *l = calloc(1, sizeof(*l));
        assert_non_null(l);
        l->req = req;
        uv_timer_init(&f->loop, &l->t);
        uv_timer_start(&l->t, later_fire, 2000, 0);
    } else if (strcmp(path, "/late-big") == 0) {
        /* A big answer near the end of the request's time (1 s here). */
        struct later *l = calloc(1, sizeof(*l));
        assert_non_null(l);
        l->req = req;
        l->big = LATE_BIG;
        uv_timer_init(&f->loop, &l->t);
        uv_timer_start(&l->t, later_fire, 900, 0);
    } else if (strcmp(path, "/slower") == 0) {
        struct later *l = calloc(1, sizeof(*l));
        assert_non_null(l);
        l->req = req;
        uv_timer_init(&f->loop, &l->t);
        uv_timer_start(&l->t, later_fire, 4000, 0);
    } else if (strcmp(path, "/close-server") == 0) {
        /* The server goes while it parses this connection's input: the
         * request is aborted, and the answer only frees it. */
        vmg_server_close(f->srv, server_closed, f);
        f->flags[7] = vmg_server_respond(req, 200, "text/plain", "gone\n", 5);
    } else if (strcmp(path, "/hang") == 0) {
        /* Answered only by the abort callback. */
        vmg_server_req_on_abort(req, on_abort_respond, f);
        f->held[f->nheld++] = NULL;
        maybe_finish(f);
    } else if (strcmp(path, "/hold") == 0) {
        /* Held across the server's close, answered by a timer after it. */
        vmg_server_req_on_abort(req, on_abort_count, f);
        assert_true(f->nheld < 4);
        f->held[f->nheld++] = req;
        maybe_finish(f);
    } else {
        vmg_server_respond(req, 404, "text/plain", "not found\n", 10);
    }
}

/* ---- the fixture ---- */

static void tls_reloaded(void *data, int status, const char *msg)
{
    struct fx *f = data;

    f->reloads++;
    if (status < 0)
        f->reload_failures++;
    f->reload_status = status;
    snprintf(f->reload_msg, sizeof(f->reload_msg), "%s", msg ? msg : "");
}

static void late_fire(uv_timer_t *t)
{
    struct fx *f = t->data;
    for (int i = 0; i < f->nheld; i++)
        if (f->held[i])
            f->late_rc[i] = vmg_server_respond(f->held[i], 200, "text/plain", "x", 1);
    uv_close((uv_handle_t *)t, NULL);
}

static void server_closed(void *data)
{
    struct fx *f = data;
    f->closed_called++;
    f->srv = NULL;
    /* Requests still held are answered after the server is gone. */
    if (f->nheld > 0) {
        uv_timer_init(&f->loop, &f->late);
        f->late.data = f;
        uv_timer_start(&f->late, late_fire, 10, 0);
    }
}

static void finish(uv_timer_t *t)
{
    struct fx *f = t->data;

    vmg_server_get_stats(f->srv, &f->stats);
    uv_close((uv_handle_t *)&f->settle, NULL);
    if (f->sample)
        uv_close((uv_handle_t *)&f->sampler, NULL);
    uv_close((uv_handle_t *)&f->signal, NULL);
    vmg_server_close(f->srv, server_closed, f);
}

static void maybe_finish(struct fx *f)
{
    if (f->finishing || !f->client_signalled || f->nheld < f->want_held ||
        f->aborts < f->want_aborts)
        return;
    f->finishing = 1;
    /* The connections the server closed as the client finished free what
     * libuv still holds for them (cancelled writes) in this iteration's
     * close callbacks: the stats are read after them, in the next. */
    uv_timer_init(&f->loop, &f->settle);
    f->settle.data = f;
    uv_timer_start(&f->settle, finish, 0, 0);
}

static void on_sample(uv_timer_t *t)
{
    struct fx *f = t->data;
    struct vmg_server_stats st;

    vmg_server_get_stats(f->srv, &st);
    if (st.paused > f->max_paused)
        f->max_paused = st.paused;
    atomic_store(&f->sampled_conns, st.connections);
    atomic_store(&f->sampled_paused, st.paused);
    atomic_fetch_add(&f->samples, 1);
    if (atomic_load(&f->stall_ms) > 0) {
        atomic_store(&f->stalling, 1);
        usleep((useconds_t)atomic_load(&f->stall_ms) * 1000);
        atomic_store(&f->stall_ms, 0);
        atomic_store(&f->stalling, 0);
    }
}

static void on_signal(uv_async_t *a)
{
    struct fx *f = a->data;
    if (!f->client_signalled)
        vmg_server_get_stats(f->srv, &f->at_signal);
    f->client_signalled = 1;
    maybe_finish(f);
}

static void *client_main(void *arg)
{
    struct fx *f = arg;
    f->client(f);
    if (!f->self_signalled)
        uv_async_send(&f->signal);
    return NULL;
}

static void fx_init(struct fx *f)
{
    memset(f, 0, sizeof(*f));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    f->opts.addr = "127.0.0.1:0";
    f->opts.handler = handler;
    f->opts.data = f;
    f->opts.tls_reloaded = tls_reloaded;
}

static void fx_tls(struct fx *f)
{
    const char *sans[] = {"localhost", "metrics.vmgroup.svc"};
    assert_int_equal(vmg_tls_selfsigned("vmgroup-metrics", sans, 2, &f->cert_pem, &f->key_pem), 0);
    f->opts.cert_pem = f->cert_pem;
    f->opts.key_pem = f->key_pem;
    f->https = 1;
}

/* fx_run starts the server, runs client in a thread until it signals, closes
 * the server and waits for everything to be freed. */
static void fx_run(struct fx *f, void (*client)(struct fx *))
{
    int err = 0;
    char errbuf[256] = "";

    f->opts.errbuf = errbuf;
    f->opts.errbuf_size = sizeof(errbuf);
    f->srv = vmg_server_new(&f->loop, &f->opts, &err);
    if (!f->srv)
        fprintf(stderr, "# vmg_server_new: %s: %s\n", vmg_strerror(err), errbuf);
    assert_non_null(f->srv);
    f->port = vmg_server_port(f->srv);
    assert_true(f->port > 0);
    f->client = client;
    assert_int_equal(uv_async_init(&f->loop, &f->signal, on_signal), 0);
    f->signal.data = f;
    if (f->sample) {
        uv_timer_init(&f->loop, &f->sampler);
        f->sampler.data = f;
        uv_timer_start(&f->sampler, on_sample, 5, 5);
    }
    assert_int_equal(pthread_create(&f->thread, NULL, client_main, f), 0);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(pthread_join(f->thread, NULL), 0);
    assert_int_equal(f->closed_called, 1);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    free(f->cert_pem);
    free(f->key_pem);
}

/* ---- client helpers (run in the thread: no cmocka asserts there) ---- */

static size_t write_body(char *p, size_t size, size_t n, void *ud)
{
    struct result *r = ud;
    size_t len = size * n;
    size_t room = BODY_MAX - 1 - r->body_len;
    size_t k = len < room ? len : room;
    memcpy(r->body + r->body_len, p, k);
    r->body_len += k;
    r->body[r->body_len] = '\0';
    return len;
}

static CURL *easy_new(struct fx *f)
{
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 10000L);
    if (f->https) {
        struct curl_blob blob = {f->cert_pem, strlen(f->cert_pem), CURL_BLOB_COPY};
        curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &blob);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
    }
    return e;
}

/* perform_url runs e on url and records the result in the next slot. */
static struct result *perform_url(struct fx *f, CURL *e, const char *url)
{
    struct result *r = &f->r[f->n < MAXR - 1 ? f->n++ : f->n];
    char *ct = NULL;
    long t0 = now_ms();

    memset(r, 0, sizeof(*r));
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
    r->rc = (int)curl_easy_perform(e);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &r->connects);
    if (curl_easy_getinfo(e, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
        snprintf(r->ctype, sizeof(r->ctype), "%s", ct);
    r->ms = (double)(now_ms() - t0);
    return r;
}

/* perform runs e on path of the test server. */
static struct result *perform(struct fx *f, CURL *e, const char *path)
{
    char url[256];
    snprintf(url, sizeof(url), "%s://127.0.0.1:%d%s", f->https ? "https" : "http", f->port, path);
    return perform_url(f, e, url);
}

static struct result *get(struct fx *f, const char *path)
{
    CURL *e = easy_new(f);
    struct result *r = perform(f, e, path);
    curl_easy_cleanup(e);
    return r;
}

/* raw_connect_from connects to the test server from address src (NULL:
 * any), with a receive buffer of rcvbuf bytes (0: the system's). */
static int raw_connect_from(int port, const char *src, int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {.tv_sec = 10};

    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    /* A guard against a hung test, not a timing assumption. */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (rcvbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    if (src) {
        struct sockaddr_in b = {.sin_family = AF_INET};
        inet_pton(AF_INET, src, &b.sin_addr);
        if (bind(fd, (struct sockaddr *)&b, sizeof(b)) < 0) {
            close(fd);
            return -1;
        }
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int raw_connect(int port)
{
    return raw_connect_from(port, NULL, 0);
}

static int send_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
        if (k <= 0)
            return -1;
        s += k;
        n -= (size_t)k;
    }
    return 0;
}

/* raw_response reads one response (headers and a Content-Length body) from
 * fd, keeping bytes of the next one in *pending. Records it in the next
 * slot; status 0 when the connection closed first. */
struct rawbuf {
    char data[65536];
    size_t len;
};

static struct result *raw_response(struct fx *f, int fd, struct rawbuf *rb)
{
    struct result *r = &f->r[f->n < MAXR - 1 ? f->n++ : f->n];
    long t0 = now_ms();

    memset(r, 0, sizeof(*r));
    for (;;) {
        char *end;
        rb->data[rb->len] = '\0';
        end = strstr(rb->data, "\r\n\r\n");
        if (end) {
            size_t hl = (size_t)(end - rb->data) + 4;
            const char *cl = strstr(rb->data, "Content-Length: ");
            size_t bl = cl && cl < end ? strtoul(cl + 16, NULL, 10) : 0;
            const char *ct = strstr(rb->data, "Content-Type: ");
            if (rb->len >= hl + bl) {
                r->status = strtol(rb->data + 9, NULL, 10);
                if (ct && ct < end)
                    snprintf(r->ctype, sizeof(r->ctype), "%.*s", (int)strcspn(ct + 14, "\r"),
                             ct + 14);
                /* Keep the whole head and body for the test to look at. */
                size_t keep = hl + bl < BODY_MAX - 1 ? hl + bl : BODY_MAX - 1;
                memcpy(r->body, rb->data, keep);
                r->body[keep] = '\0';
                r->body_len = keep;
                memmove(rb->data, rb->data + hl + bl, rb->len - hl - bl);
                rb->len -= hl + bl;
                break;
            }
        }
        if (rb->len >= sizeof(rb->data) - 1) {
            r->rc = -1;
            break;
        }
        ssize_t k = recv(fd, rb->data + rb->len, sizeof(rb->data) - 1 - rb->len, 0);
        if (k <= 0) {
            r->rc = -1;
            break;
        }
        rb->len += (size_t)k;
    }
    r->ms = (double)(now_ms() - t0);
    return r;
}

/* wait_served blocks until the server has n connections open and its loop
 * has turned twice more since it had, so that what the client sent on them
 * before the call has been read; 0, or -1 after 10 s. Needs f->sample. */
static int wait_served(struct fx *f, size_t n)
{
    long t0 = now_ms();
    unsigned seen;

    while (atomic_load(&f->sampled_conns) != n)
        if (now_ms() - t0 > 10000)
            return -1;
        else
            usleep(1000);
    seen = atomic_load(&f->samples);
    while (atomic_load(&f->samples) - seen < 2)
        if (now_ms() - t0 > 10000)
            return -1;
        else
            usleep(1000);
    return 0;
}

/* wait_closed blocks until the server closes fd; returns the milliseconds
 * it took, or -1 if the guard timeout hit first. */
static long wait_closed(int fd)
{
    char buf[4096];
    long t0 = now_ms();

    for (;;) {
        ssize_t k = recv(fd, buf, sizeof(buf), 0);
        if (k == 0 || (k < 0 && errno == ECONNRESET))
            return now_ms() - t0;
        if (k < 0)
            return -1;
    }
}

/* ---- tests: plain HTTP ---- */

static void client_basic(struct fx *f)
{
    get(f, "/hello");
    get(f, "/nope");
    get(f, "/info?a=1&b=2");

    CURL *e = easy_new(f);
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    perform(f, e, "/hello");
    curl_easy_cleanup(e);

    e = easy_new(f);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, "some body bytes");
    perform(f, e, "/body");
    curl_easy_cleanup(e);

    /* Expect: 100-continue gets the interim answer before the body. */
    static struct rawbuf rb;
    int fd = raw_connect(f->port);
    const char *head = "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                       "Expect: 100-continue\r\n\r\n";
    send_all(fd, head, strlen(head));
    raw_response(f, fd, &rb);
    send_all(fd, "12345", 5);
    raw_response(f, fd, &rb);
    close(fd);
}

static void test_plain_basic(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    fx_run(&f, client_basic);
    assert_int_equal(f.n, 7);
    assert_int_equal(f.r[0].rc, CURLE_OK);
    assert_int_equal(f.r[0].status, 200);
    assert_string_equal(f.r[0].body, "hello\n");
    assert_string_equal(f.r[0].ctype, "text/plain; charset=utf-8");
    assert_int_equal(f.r[1].status, 404);
    assert_int_equal(f.r[2].status, 200);
    /* The peer is the client's loopback address and some port. */
    assert_memory_equal(f.r[2].body, "GET /info ?a=1&b=2 127.0.0.1:", 29);
    assert_true(strtol(f.r[2].body + 29, NULL, 10) > 0);
    assert_int_equal(f.r[3].rc, CURLE_OK); /* HEAD: no body */
    assert_int_equal(f.r[3].status, 200);
    assert_int_equal(f.r[3].body_len, 0);
    assert_int_equal(f.r[4].status, 201);
    assert_string_equal(f.r[4].body, "some body bytes");
    assert_int_equal(f.r[5].status, 100);
    assert_string_equal(f.r[5].body, "HTTP/1.1 100 Continue\r\n\r\n");
    assert_int_equal(f.r[6].status, 201);
    assert_non_null(strstr(f.r[6].body, "\r\n\r\n12345"));
    assert_int_equal(f.requests, 6);
}

static void client_keepalive(struct fx *f)
{
    /* One easy handle, three requests: one connection. */
    CURL *e = easy_new(f);
    perform(f, e, "/hello");
    perform(f, e, "/async");
    perform(f, e, "/hello");
    curl_easy_cleanup(e);

    /* Pipelined: three requests in one write, answered in order, the slow
     * one first. */
    static struct rawbuf rb;
    int fd = raw_connect(f->port);
    const char *reqs = "GET /async HTTP/1.1\r\nHost: x\r\n\r\n"
                       "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                       "GET /info?z HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    send_all(fd, reqs, strlen(reqs));
    raw_response(f, fd, &rb);
    raw_response(f, fd, &rb);
    raw_response(f, fd, &rb);
    f->flags[0] = wait_closed(fd) >= 0; /* closed after Connection: close */
    close(fd);

    /* HTTP/1.0 without keep-alive: the server closes. */
    fd = raw_connect(f->port);
    const char *r10 = "GET /hello HTTP/1.0\r\n\r\n";
    send_all(fd, r10, strlen(r10));
    raw_response(f, fd, &rb);
    f->flags[1] = wait_closed(fd) >= 0;
    close(fd);
}

static void test_keepalive_and_pipelining(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    fx_run(&f, client_keepalive);
    assert_int_equal(f.n, 7);
    assert_int_equal(f.r[0].status, 200);
    assert_int_equal(f.r[0].connects, 1);
    assert_int_equal(f.r[1].status, 200);
    assert_string_equal(f.r[1].body, "later\n");
    assert_int_equal(f.r[1].connects, 0); /* reused */
    assert_int_equal(f.r[2].connects, 0);

    assert_int_equal(f.r[3].status, 200);
    assert_non_null(strstr(f.r[3].body, "\r\n\r\nlater\n"));
    assert_int_equal(f.r[4].status, 201);
    assert_non_null(strstr(f.r[4].body, "\r\n\r\nabc"));
    assert_int_equal(f.r[5].status, 200);
    assert_non_null(strstr(f.r[5].body, "Connection: close\r\n"));
    assert_non_null(strstr(f.r[5].body, "\r\n\r\nGET /info ?z "));
    assert_true(f.flags[0]);
    assert_int_equal(f.r[6].status, 200);
    assert_non_null(strstr(f.r[6].body, "Connection: close\r\n"));
    assert_true(f.flags[1]);
}

static void client_headers(struct fx *f)
{
    CURL *e = easy_new(f);
    struct curl_slist *h = curl_slist_append(NULL, "x-cUSTOM-hEADER:   Some Value  ");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_HEADER, 1L); /* headers in the body, to look at */
    perform(f, e, "/echo-header");
    curl_easy_cleanup(e);
    curl_slist_free_all(h);
}

static void test_header_lookup(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    fx_run(&f, client_headers);
    assert_int_equal(f.r[0].status, 200);
    assert_non_null(strstr(f.r[0].body, "\r\nX-Reply: yes\r\n"));
    assert_non_null(strstr(f.r[0].body, "\r\n\r\nSome Value"));
    assert_null(strstr(f.r[0].body, "Some Value "));
}

static void client_limits(struct fx *f)
{
    static struct rawbuf rb;
    static char big[20000];
    struct curl_slist *h;
    CURL *e;
    int fd;

    /* A 20 KB header: 431. */
    memset(big, 'a', sizeof(big) - 1);
    memcpy(big, "X-Big: ", 7);
    big[sizeof(big) - 1] = '\0';
    e = easy_new(f);
    h = curl_slist_append(NULL, big);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    perform(f, e, "/hello");
    curl_easy_cleanup(e);
    curl_slist_free_all(h);

    /* Too many headers: 431. */
    fd = raw_connect(f->port);
    char req[8192];
    size_t n = (size_t)snprintf(req, sizeof(req), "GET /hello HTTP/1.1\r\n");
    for (int i = 0; i < 70; i++)
        n += (size_t)snprintf(req + n, sizeof(req) - n, "X-H%d: v\r\n", i);
    n += (size_t)snprintf(req + n, sizeof(req) - n, "\r\n");
    send_all(fd, req, n);
    raw_response(f, fd, &rb);
    f->flags[0] = wait_closed(fd) >= 0;
    close(fd);

    /* A body above the limit, announced: 413 before it is sent. */
    static char body[100 * 1024];
    memset(body, 'b', sizeof(body));
    e = easy_new(f);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)sizeof(body));
    perform(f, e, "/body");
    curl_easy_cleanup(e);

    /* A chunked body above the limit: 413 too. */
    fd = raw_connect(f->port);
    const char *ch = "POST /body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    send_all(fd, ch, strlen(ch));
    for (int i = 0; i < 20; i++) {
        char chunk[8192 + 16];
        int cn = snprintf(chunk, sizeof(chunk), "2000\r\n");
        memset(chunk + cn, 'c', 8192);
        memcpy(chunk + cn + 8192, "\r\n", 2);
        if (send_all(fd, chunk, (size_t)cn + 8194) < 0)
            break;
    }
    raw_response(f, fd, &rb);
    close(fd);

    /* Garbage: 400. */
    rb.len = 0;
    fd = raw_connect(f->port);
    const char *junk = "HELLO THERE\r\n\r\n";
    send_all(fd, junk, strlen(junk));
    raw_response(f, fd, &rb);
    close(fd);

    /* Within the limits, on the same server, still fine. */
    get(f, "/hello");
}

static void test_limits(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.opts.max_header_bytes = 16 * 1024;
    f.opts.max_headers = 64;
    f.opts.max_body = 64 * 1024;
    fx_run(&f, client_limits);
    assert_int_equal(f.n, 6);
    assert_int_equal(f.r[0].status, 431);
    assert_int_equal(f.r[1].status, 431);
    assert_non_null(strstr(f.r[1].body, "Connection: close\r\n"));
    assert_true(f.flags[0]);
    assert_int_equal(f.r[2].status, 413);
    assert_int_equal(f.r[3].status, 413);
    assert_int_equal(f.r[4].status, 400);
    assert_int_equal(f.r[5].status, 200);
    assert_int_equal(f.requests, 1); /* the handler saw only the good one */
}

static void client_max_conns(struct fx *f)
{
    static struct rawbuf rb1, rb2;
    const char *req = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    const char *slow = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
    int a = raw_connect(f->port), b = raw_connect(f->port), c;

    /* Two connections, each answered, then each with a request in the
     * handler: both are held by the server now, and neither gives way. */
    send_all(a, req, strlen(req));
    raw_response(f, a, &rb1);
    send_all(b, req, strlen(req));
    raw_response(f, b, &rb2);
    send_all(a, slow, strlen(slow));
    send_all(b, slow, strlen(slow));
    usleep(100 * 1000); /* the server has read them */
    /* The third is closed at once. */
    c = raw_connect(f->port);
    f->flags[0] = c >= 0;
    send_all(c, req, strlen(req));
    f->flags[1] = wait_closed(c) >= 0;
    close(c);
    /* The first two still get their answers. */
    raw_response(f, a, &rb1);
    raw_response(f, b, &rb2);
    close(a);
    close(b);
}

static void test_max_connections(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.opts.max_conns = 2;
    fx_run(&f, client_max_conns);
    assert_int_equal(f.r[0].status, 200);
    assert_int_equal(f.r[1].status, 200);
    assert_true(f.flags[0]);
    assert_true(f.flags[1]);
    assert_int_equal(f.r[2].status, 200);
    assert_int_equal(f.r[3].status, 200);
    assert_int_equal(f.requests, 4);
    assert_int_equal(f.stats.refused, 1);
    assert_int_equal(f.stats.evicted, 0);
}

static void client_slow(struct fx *f)
{
    static struct rawbuf rb;
    const char *part = "GET /hello HTTP/1.1\r\nHost: x\r\n";
    const char *full = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    long t0;
    int fd;

    /* A request that never ends is cut at the request timeout. */
    fd = raw_connect(f->port);
    t0 = now_ms();
    send_all(fd, part, strlen(part));
    wait_closed(fd);
    f->r[0].ms = (double)(now_ms() - t0);
    close(fd);

    /* A connection that sends nothing: the same (the first request's time
     * runs from the accept). */
    fd = raw_connect(f->port);
    t0 = now_ms();
    wait_closed(fd);
    f->r[1].ms = (double)(now_ms() - t0);
    close(fd);

    /* An idle keep-alive connection is closed at the idle timeout. */
    f->n = 2;
    fd = raw_connect(f->port);
    send_all(fd, full, strlen(full));
    raw_response(f, fd, &rb);
    t0 = now_ms();
    wait_closed(fd);
    f->r[3].ms = (double)(now_ms() - t0);
    close(fd);

    /* A handler slower than the request timeout: the connection is closed
     * and the request aborted. */
    const char *hang = "GET /hang HTTP/1.1\r\nHost: x\r\n\r\n";
    fd = raw_connect(f->port);
    t0 = now_ms();
    send_all(fd, hang, strlen(hang));
    wait_closed(fd);
    f->r[4].ms = (double)(now_ms() - t0);
    close(fd);
}

static void test_slow_client_timeout(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.opts.request_timeout_ms = 300;
    f.opts.idle_timeout_ms = 200;
    fx_run(&f, client_slow);
    /* The timers are the loop's: not earlier than set (less a tick), and
     * well before the 10 s guard. */
    assert_true(f.r[0].ms >= 280 && f.r[0].ms < 5000);
    assert_true(f.r[1].ms >= 280 && f.r[1].ms < 5000);
    assert_int_equal(f.r[2].status, 200);
    assert_true(f.r[3].ms >= 180 && f.r[3].ms < 5000);
    assert_true(f.r[4].ms >= 280 && f.r[4].ms < 5000);
    assert_int_equal(f.aborts, 1);
    assert_int_equal(f.abort_responds_rc, VMG_ECANCELED);
}

static void client_abort(struct fx *f)
{
    const char *req = "GET /hang HTTP/1.1\r\nHost: x\r\n\r\n";
    int fd = raw_connect(f->port);
    send_all(fd, req, strlen(req));
    close(fd);
}

static void test_abort_when_client_leaves(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.want_held = 1;
    f.want_aborts = 1; /* the server closes only after the abort was seen */
    fx_run(&f, client_abort);
    assert_int_equal(f.aborts, 1);
    assert_int_equal(f.abort_responds_rc, VMG_ECANCELED);
}

static void client_close_with_clients(struct fx *f)
{
    static struct rawbuf rb;
    const char *hold = "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n";
    const char *hello = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    int a = raw_connect(f->port), b = raw_connect(f->port), c = raw_connect(f->port);

    send_all(a, hold, strlen(hold));
    send_all(b, hold, strlen(hold));
    send_all(c, hello, strlen(hello));
    raw_response(f, c, &rb);
    /* Tell the loop we are ready; it closes the server once both held
     * requests arrived. Every connection is then closed by the server. */
    f->self_signalled = 1;
    uv_async_send(&f->signal);
    f->flags[0] = wait_closed(a) >= 0;
    f->flags[1] = wait_closed(b) >= 0;
    f->flags[2] = wait_closed(c) >= 0;
    close(a);
    close(b);
    close(c);
}

static void test_close_with_clients(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.want_held = 2;
    fx_run(&f, client_close_with_clients);
    assert_int_equal(f.r[0].status, 200);
    assert_true(f.flags[0] && f.flags[1] && f.flags[2]);
    assert_int_equal(f.aborts, 2);
    /* Answered after the server was freed: dropped, and freed. */
    assert_int_equal(f.late_rc[0], VMG_ECANCELED);
    assert_int_equal(f.late_rc[1], VMG_ECANCELED);
}

/* ---- tests: HTTPS ---- */

static void client_https(struct fx *f)
{
    CURL *e = easy_new(f);
    perform(f, e, "/hello");
    perform(f, e, "/async"); /* same TLS connection */
    curl_easy_cleanup(e);

    /* TLS 1.1 at most: refused by the server (the client is told it may
     * use it, at security level 0). */
    e = easy_new(f);
    curl_easy_setopt(e, CURLOPT_SSLVERSION,
                     (long)(CURL_SSLVERSION_TLSv1_1 | CURL_SSLVERSION_MAX_TLSv1_1));
    curl_easy_setopt(e, CURLOPT_SSL_CIPHER_LIST, "DEFAULT:@SECLEVEL=0");
    perform(f, e, "/hello");
    curl_easy_cleanup(e);

    /* TLS 1.2 exactly works. */
    e = easy_new(f);
    curl_easy_setopt(e, CURLOPT_SSLVERSION,
                     (long)(CURL_SSLVERSION_TLSv1_2 | CURL_SSLVERSION_MAX_TLSv1_2));
    perform(f, e, "/hello");
    curl_easy_cleanup(e);

    /* A name the certificate does not hold fails verification. */
    char resolve[64];
    snprintf(resolve, sizeof(resolve), "other.example:%d:127.0.0.1", f->port);
    struct curl_slist *rs = curl_slist_append(NULL, resolve);
    char url[128];
    snprintf(url, sizeof(url), "https://other.example:%d/hello", f->port);
    e = easy_new(f);
    curl_easy_setopt(e, CURLOPT_RESOLVE, rs);
    perform_url(f, e, url);
    curl_easy_cleanup(e);
    curl_slist_free_all(rs);

    /* Plain HTTP to the TLS port gets nothing. */
    f->https = 0;
    get(f, "/hello");
    f->https = 1;

    /* The limits hold over TLS too. */
    static char big[20000];
    memset(big, 'a', sizeof(big) - 1);
    memcpy(big, "X-Big: ", 7);
    big[sizeof(big) - 1] = '\0';
    e = easy_new(f);
    struct curl_slist *h = curl_slist_append(NULL, big);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    perform(f, e, "/hello");
    curl_easy_cleanup(e);
    curl_slist_free_all(h);
}

static void test_https(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    fx_tls(&f);
    fx_run(&f, client_https);
    assert_int_equal(f.n, 7);
    assert_int_equal(f.r[0].rc, CURLE_OK);
    assert_int_equal(f.r[0].status, 200);
    assert_string_equal(f.r[0].body, "hello\n");
    assert_int_equal(f.r[1].status, 200);
    assert_string_equal(f.r[1].body, "later\n");
    assert_int_equal(f.r[1].connects, 0);
    if (f.r[2].rc == CURLE_OK)
        fprintf(stderr, "# TLS 1.1 was accepted\n");
    assert_int_not_equal(f.r[2].rc, CURLE_OK);
    assert_int_equal(f.r[2].status, 0);
    /* The server's alert, not a client-side refusal. */
    assert_non_null(strstr(f.r[2].errbuf, "alert protocol version"));
    assert_int_equal(f.r[3].rc, CURLE_OK);
    assert_int_equal(f.r[3].status, 200);
    assert_int_equal(f.r[4].rc, CURLE_PEER_FAILED_VERIFICATION);
    assert_int_not_equal(f.r[5].rc, CURLE_OK);
    assert_int_equal(f.r[5].status, 0);
    assert_int_equal(f.r[6].status, 431);
}

/* get_from: a GET of path on a new connection from address src. */
static struct result *get_from(struct fx *f, const char *src, const char *path)
{
    CURL *e = easy_new(f);
    struct result *r;

    curl_easy_setopt(e, CURLOPT_INTERFACE, src);
    r = perform(f, e, path);
    curl_easy_cleanup(e);
    return r;
}

/* client_handshakes: five connections from .5 to .9 that send nothing
 * and close; 127.0.0.1 makes a connection and uses it twice, then a
 * second one (over its limit); 127.0.0.2 and .3 a connection each (the
 * server's burst is then spent), .4 one more (it waits for the server's
 * rate); the first connection is used once more. */
static void client_handshakes(struct fx *f)
{
    CURL *e = easy_new(f);
    char src[24];

    for (int i = 5; i <= 9; i++) {
        snprintf(src, sizeof(src), "127.0.0.%d", i);
        close(raw_connect_from(f->port, src, 0));
    }
    curl_easy_setopt(e, CURLOPT_INTERFACE, "127.0.0.1");
    perform(f, e, "/hello");
    perform(f, e, "/hello");
    get_from(f, "127.0.0.1", "/hello");
    get_from(f, "127.0.0.2", "/hello");
    get_from(f, "127.0.0.3", "/hello");
    get_from(f, "127.0.0.4", "/hello");
    perform(f, e, "/hello");
    curl_easy_cleanup(e);
}

/* A new TLS connection beyond its peer's handshake rate is closed before
 * any handshake, and takes nothing of the server's rate; beyond the
 * server's rate, the handshake waits its turn. Connections that send
 * nothing take nothing of the server's rate (.2 and .3 get the burst's
 * last two). Open connections go on. */
static void test_tls_handshake_limits(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    fx_tls(&f);
    /* A token every 5 s after the burst: .4 waits about as long, within
     * the request's 10 s. */
    f.opts.tls_handshakes_per_sec = 0.2;
    f.opts.tls_handshake_burst = 3;
    f.opts.tls_handshakes_per_peer_per_sec = 0.001;
    f.opts.tls_handshake_burst_per_peer = 1;
    fx_run(&f, client_handshakes);
    assert_int_equal(f.n, 7);
    assert_int_equal(f.r[0].status, 200);
    assert_int_equal(f.r[1].status, 200);
    assert_int_equal(f.r[1].connects, 0);
    assert_int_not_equal(f.r[2].rc, CURLE_OK); /* 127.0.0.1's second */
    assert_int_equal(f.r[2].status, 0);
    assert_int_equal(f.r[3].status, 200); /* .2: the server's second */
    assert_int_equal(f.r[4].status, 200); /* .3: its third */
    assert_int_equal(f.r[5].status, 200); /* .4: after a wait */
    fprintf(stderr, "# the handshake beyond the server's rate waited: %.0f ms\n", f.r[5].ms);
    assert_true(f.r[5].ms >= 1000);
    assert_int_equal(f.r[6].status, 200);
    assert_int_equal(f.r[6].connects, 0);
    assert_int_equal(f.stats.throttled, 1);
    assert_int_equal(f.stats.delayed, 1);
    assert_int_equal(f.requests, 6);
}

/* client_left_waiting: .1 takes the server's one token; .2 sends the
 * start of a ClientHello and leaves while it waits; .3 connects behind it
 * and waits for the next token, which .2 does not take. */
static void client_left_waiting(struct fx *f)
{
    static const char hello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
    int fd;

    get_from(f, "127.0.0.1", "/hello");
    fd = raw_connect_from(f->port, "127.0.0.2", 0);
    send_all(fd, hello, sizeof(hello) - 1);
    usleep(200 * 1000); /* read and put in the line */
    close(fd);
    get_from(f, "127.0.0.3", "/hello");
}

/* A handshake waiting for the server's rate whose client left is closed
 * at its turn without taking a token: the next in line gets it. */
static void test_tls_waiting_client_left(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    fx_tls(&f);
    /* A token every 2 s: .3 gets the first (4 s if .2 took it). */
    f.opts.tls_handshakes_per_sec = 0.5;
    f.opts.tls_handshake_burst = 1;
    fx_run(&f, client_left_waiting);
    assert_int_equal(f.n, 2);
    assert_int_equal(f.r[0].status, 200);
    assert_int_equal(f.r[1].status, 200);
    fprintf(stderr, "# the handshake behind one whose client left waited %.0f ms\n", f.r[1].ms);
    assert_true(f.r[1].ms < 3000);
    assert_int_equal(f.stats.delayed, 2);
}

/* Plain HTTP has no handshake to limit. */
static void client_plain_many(struct fx *f)
{
    for (int i = 0; i < 4; i++)
        get_from(f, "127.0.0.1", "/hello");
}

static void test_plain_not_throttled(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.opts.tls_handshakes_per_sec = 0.001;
    f.opts.tls_handshake_burst = 1;
    f.opts.tls_handshakes_per_peer_per_sec = 0.001;
    f.opts.tls_handshake_burst_per_peer = 1;
    fx_run(&f, client_plain_many);
    for (int i = 0; i < 4; i++)
        assert_int_equal(f.r[i].status, 200);
    assert_int_equal(f.stats.throttled, 0);
}

static void client_https_files(struct fx *f)
{
    get(f, "/hello");
}

static void test_https_from_files(void **state)
{
    struct fx f;
    char cpath[] = "/tmp/test_server_crt_XXXXXX", kpath[] = "/tmp/test_server_key_XXXXXX";
    int cfd, kfd;
    (void)state;

    fx_init(&f);
    fx_tls(&f);
    cfd = mkstemp(cpath);
    kfd = mkstemp(kpath);
    assert_true(cfd >= 0 && kfd >= 0);
    assert_int_equal(write(cfd, f.cert_pem, strlen(f.cert_pem)), (ssize_t)strlen(f.cert_pem));
    assert_int_equal(write(kfd, f.key_pem, strlen(f.key_pem)), (ssize_t)strlen(f.key_pem));
    close(cfd);
    close(kfd);
    f.opts.cert_pem = NULL;
    f.opts.key_pem = NULL;
    f.opts.cert_file = cpath;
    f.opts.key_file = kpath;
    fx_run(&f, client_https_files);
    unlink(cpath);
    unlink(kpath);
    assert_int_equal(f.r[0].rc, CURLE_OK);
    assert_int_equal(f.r[0].status, 200);
}

/* ---- construction errors ---- */

static int try_new(uv_loop_t *loop, struct vmg_server_opts *o, char *errbuf, size_t n)
{
    int err = 0;
    vmg_server *s;

    o->errbuf = errbuf;
    o->errbuf_size = n;
    errbuf[0] = '\0';
    s = vmg_server_new(loop, o, &err);
    if (s) {
        vmg_server_close(s, NULL, NULL);
        return 0;
    }
    assert_true(err < 0);
    return err;
}

static void test_new_errors(void **state)
{
    uv_loop_t loop;
    struct vmg_server_opts o = {0};
    char errbuf[256];
    char *cert = NULL, *key = NULL, *cert2 = NULL, *key2 = NULL;
    int err = 0;
    (void)state;

    assert_int_equal(uv_loop_init(&loop), 0);
    assert_null(vmg_server_new(&loop, NULL, &err));
    assert_int_equal(err, -EINVAL);
    assert_null(vmg_server_new(&loop, &o, &err)); /* no address */
    assert_int_equal(err, -EINVAL);

    const char *bad[] = {"",       "8080", "1.2.3.4", "::1:80",          "[::1]80",   "[::1",
                         ":70000", ":-1",  ":80x",    "host.example:80", "127.0.0.1:"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        o.addr = bad[i];
        assert_int_equal(try_new(&loop, &o, errbuf, sizeof(errbuf)), VMG_ECONFIG);
        assert_non_null(strstr(errbuf, "bad listen address"));
    }

    /* Good forms. */
    const char *good[] = {"127.0.0.1:0", "localhost:0", ":0", "0.0.0.0:0"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        o.addr = good[i];
        assert_int_equal(try_new(&loop, &o, errbuf, sizeof(errbuf)), 0);
    }
    o.addr = "[::1]:0";
    err = try_new(&loop, &o, errbuf, sizeof(errbuf));
    assert_true(err == 0 || err == -EADDRNOTAVAIL || err == -EAFNOSUPPORT);

    /* A port in use. */
    o.addr = "127.0.0.1:0";
    vmg_server *s = vmg_server_new(&loop, &o, &err);
    assert_non_null(s);
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", vmg_server_port(s));
    o.addr = addr;
    assert_int_equal(try_new(&loop, &o, errbuf, sizeof(errbuf)), -EADDRINUSE);
    assert_non_null(strstr(errbuf, "cannot listen"));
    vmg_server_close(s, NULL, NULL);

    /* TLS material that does not work. */
    assert_int_equal(vmg_tls_selfsigned("a", NULL, 0, &cert, &key), 0);
    assert_int_equal(vmg_tls_selfsigned("b", NULL, 0, &cert2, &key2), 0);
    o.addr = "127.0.0.1:0";
    o.cert_pem = cert;
    assert_int_equal(try_new(&loop, &o, errbuf, sizeof(errbuf)), VMG_ECONFIG);
    o.key_pem = "-----BEGIN PRIVATE KEY-----\nnonsense\n-----END PRIVATE KEY-----\n";
    assert_int_equal(try_new(&loop, &o, errbuf, sizeof(errbuf)), VMG_ECONFIG);
    assert_non_null(strstr(errbuf, "TLS key"));
    o.key_pem = key2; /* another certificate's key */
    assert_int_equal(try_new(&loop, &o, errbuf, sizeof(errbuf)), VMG_ECONFIG);
    assert_non_null(strstr(errbuf, "TLS key"));
    o.cert_pem = "not a certificate";
    o.key_pem = key;
    assert_int_equal(try_new(&loop, &o, errbuf, sizeof(errbuf)), VMG_ECONFIG);
    assert_non_null(strstr(errbuf, "TLS certificate"));
    o.cert_pem = NULL;
    o.key_pem = NULL;
    o.cert_file = "/nonexistent/tls.crt";
    o.key_file = "/nonexistent/tls.key";
    assert_int_equal(try_new(&loop, &o, errbuf, sizeof(errbuf)), VMG_ECONFIG);
    assert_non_null(strstr(errbuf, "/nonexistent/tls.crt"));
    o.cert_file = o.key_file = NULL;
    o.cert_pem = cert;
    o.key_pem = key;
    assert_int_equal(try_new(&loop, &o, errbuf, sizeof(errbuf)), 0);

    vmg_server_close(NULL, NULL, NULL);
    assert_int_equal(vmg_server_port(NULL), -1);
    /* Failed and closed servers are freed by the loop. */
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    free(cert);
    free(key);
    free(cert2);
    free(key2);
}

/* ---- tlsgen ---- */

static void test_tls_selfsigned(void **state)
{
    const char *sans[] = {"localhost", "vmgroup-metrics.vmgroup-system.svc", "*.example.org"};
    char *cert_pem = NULL, *key_pem = NULL;
    BIO *b;
    X509 *x;
    EVP_PKEY *k;
    (void)state;

    assert_int_equal(vmg_tls_selfsigned("vmgroup-metrics", sans, 3, &cert_pem, &key_pem), 0);
    assert_non_null(strstr(cert_pem, "-----BEGIN CERTIFICATE-----"));
    assert_non_null(strstr(key_pem, "-----BEGIN PRIVATE KEY-----"));

    b = BIO_new_mem_buf(cert_pem, -1);
    x = PEM_read_bio_X509(b, NULL, NULL, NULL);
    BIO_free(b);
    assert_non_null(x);
    b = BIO_new_mem_buf(key_pem, -1);
    k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
    BIO_free(b);
    assert_non_null(k);

    assert_int_equal(X509_check_private_key(x, k), 1);
    assert_int_equal(X509_get_version(x), X509_VERSION_3);
    assert_int_equal(X509_check_host(x, "localhost", 0, 0, NULL), 1);
    assert_int_equal(X509_check_host(x, "vmgroup-metrics.vmgroup-system.svc", 0, 0, NULL), 1);
    assert_int_equal(X509_check_host(x, "a.example.org", 0, 0, NULL), 1);
    assert_int_equal(X509_check_host(x, "other.example", 0, 0, NULL), 0);
    assert_int_equal(X509_check_ip_asc(x, "127.0.0.1", 0), 1);
    assert_int_equal(X509_check_ip_asc(x, "::1", 0), 1);
    assert_int_equal(X509_check_ip_asc(x, "10.0.0.1", 0), 0);
    assert_int_equal(X509_check_purpose(x, X509_PURPOSE_SSL_SERVER, 0), 1);
    assert_true(X509_get_extended_key_usage(x) & XKU_SSL_SERVER);
    /* Self-signed: its own issuer, signed by its own key. */
    assert_int_equal(X509_NAME_cmp(X509_get_subject_name(x), X509_get_issuer_name(x)), 0);
    assert_int_equal(X509_verify(x, k), 1);

    /* Valid now, for about a year. */
    int days = 0, secs = 0;
    assert_true(X509_cmp_current_time(X509_get0_notBefore(x)) < 0);
    assert_true(X509_cmp_current_time(X509_get0_notAfter(x)) > 0);
    assert_int_equal(ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(x), X509_get0_notAfter(x)),
                     1);
    assert_true(days == 365);

    /* Subject CN. */
    char cn[80];
    assert_true(
        X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof(cn)) > 0);
    assert_string_equal(cn, "vmgroup-metrics");

    /* Two certificates differ (keys and serial numbers). */
    char *c2 = NULL, *k2 = NULL;
    assert_int_equal(vmg_tls_selfsigned("vmgroup-metrics", sans, 3, &c2, &k2), 0);
    assert_string_not_equal(c2, cert_pem);
    assert_string_not_equal(k2, key_pem);
    free(c2);
    free(k2);

    X509_free(x);
    EVP_PKEY_free(k);
    free(cert_pem);
    free(key_pem);
}

static void test_tls_selfsigned_rejects(void **state)
{
    char *c = NULL, *k = NULL;
    const char *bad_san[] = {"bad name"};
    const char *inject[] = {"a.example,IP:10.0.0.1"};
    const char *empty[] = {""};
    char longcn[70];
    (void)state;

    memset(longcn, 'c', sizeof(longcn) - 1);
    longcn[sizeof(longcn) - 1] = '\0';
    assert_int_equal(vmg_tls_selfsigned(NULL, NULL, 0, &c, &k), -EINVAL);
    assert_int_equal(vmg_tls_selfsigned("", NULL, 0, &c, &k), -EINVAL);
    assert_int_equal(vmg_tls_selfsigned(longcn, NULL, 0, &c, &k), -EINVAL);
    assert_int_equal(vmg_tls_selfsigned("x", bad_san, 1, &c, &k), -EINVAL);
    assert_int_equal(vmg_tls_selfsigned("x", inject, 1, &c, &k), -EINVAL);
    assert_int_equal(vmg_tls_selfsigned("x", empty, 1, &c, &k), -EINVAL);
    assert_int_equal(vmg_tls_selfsigned("x", NULL, 1, &c, &k), -EINVAL);
    assert_int_equal(vmg_tls_selfsigned("x", NULL, 0, NULL, &k), -EINVAL);
    assert_null(c);
    assert_null(k);
}

/* ---- tests: what a peer may hold ---- */

static void client_evict(struct fx *f)
{
    static struct rawbuf rb1, rb2, rb3;
    const char *req = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    int a = raw_connect(f->port), b, c;

    /* Two idle keep-alive connections hold every slot ... */
    send_all(a, req, strlen(req));
    raw_response(f, a, &rb1);
    usleep(20 * 1000); /* a is idle the longer */
    b = raw_connect(f->port);
    send_all(b, req, strlen(req));
    raw_response(f, b, &rb2);
    /* ... and a new one gets in all the same: the oldest idle gives way. */
    c = raw_connect(f->port);
    send_all(c, req, strlen(req));
    raw_response(f, c, &rb3);
    f->flags[0] = wait_closed(a) >= 0;
    /* The other idle one was left alone. */
    send_all(b, req, strlen(req));
    raw_response(f, b, &rb2);
    close(a);
    close(b);
    close(c);
}

static void test_evict_oldest_idle(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.opts.max_conns = 2;
    fx_run(&f, client_evict);
    assert_int_equal(f.r[0].status, 200);
    assert_int_equal(f.r[1].status, 200);
    assert_int_equal(f.r[2].status, 200); /* the newcomer */
    assert_true(f.r[2].ms < 1000);
    assert_true(f.flags[0]); /* the oldest idle was closed */
    assert_int_equal(f.r[3].status, 200);
    assert_int_equal(f.stats.evicted, 1);
    assert_int_equal(f.stats.refused, 0);
}

static void client_per_peer(struct fx *f)
{
    static struct rawbuf rb1, rb2, rb3;
    const char *req = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    const char *slow = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
    const char *slower = "GET /slower HTTP/1.1\r\nHost: x\r\n\r\n";
    int a = raw_connect(f->port), b = raw_connect(f->port), c, d, e;

    /* 127.0.0.1 holds its two connections, both with the handler. */
    send_all(a, slow, strlen(slow));
    send_all(b, slower, strlen(slower)); /* b stays busy after a is answered */
    usleep(100 * 1000);
    /* A third from 127.0.0.1 is closed at once, though the server has room. */
    c = raw_connect(f->port);
    send_all(c, req, strlen(req));
    f->flags[0] = wait_closed(c) >= 0;
    close(c);
    /* Another peer gets in. */
    d = raw_connect_from(f->port, "127.0.0.2", 0);
    f->flags[1] = d >= 0;
    send_all(d, req, strlen(req));
    raw_response(f, d, &rb3);
    /* Once a is idle, a new one from 127.0.0.1 takes its place. */
    raw_response(f, a, &rb1);
    e = raw_connect(f->port);
    send_all(e, req, strlen(req));
    raw_response(f, e, &rb3);
    f->flags[2] = wait_closed(a) >= 0;
    raw_response(f, b, &rb2);
    close(a);
    close(b);
    close(d);
    close(e);
}

static void run_per_peer_cap(const char *addr)
{
    struct fx f;

    fx_init(&f);
    f.opts.addr = addr;
    f.opts.max_conns = 8;
    f.opts.max_conns_per_peer = 2;
    fx_run(&f, client_per_peer);
    assert_true(f.flags[0]);
    assert_true(f.flags[1]);
    assert_int_equal(f.r[0].status, 200); /* 127.0.0.2 */
    assert_int_equal(f.r[1].status, 200); /* a, completed */
    assert_int_equal(f.r[2].status, 200); /* e, in a's place */
    assert_true(f.flags[2]);
    assert_int_equal(f.r[3].status, 200); /* b */
    assert_int_equal(f.stats.refused, 1);
    assert_int_equal(f.stats.evicted, 1);
}

static void test_per_peer_cap(void **state)
{
    (void)state;
    run_per_peer_cap("127.0.0.1:0");
}

/* On every interface, IPv6 as well where the host has it, IPv4 peers come
 * as v4-mapped IPv6 addresses, whose /64 they all share: each counts by its
 * own address all the same. */
static void test_per_peer_cap_dual_stack(void **state)
{
    (void)state;
    run_per_peer_cap(":0");
}

/* partial_from opens a connection from src and sends the start of a
 * request on it; the fd, or -1. */
static int partial_from(struct fx *f, const char *src)
{
    const char *head = "GET /hello HTTP/1.1\r\n";
    int fd = raw_connect_from(f->port, src, 0);

    if (fd >= 0)
        send_all(fd, head, strlen(head));
    return fd;
}

/* newcomer_evicts sends a complete request on a new connection from src,
 * reads its answer (the next f->r), and says whether the server closed
 * victim to let it in. */
static int newcomer_evicts(struct fx *f, const char *src, int victim)
{
    static struct rawbuf rb;
    const char *req = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    int fd = raw_connect_from(f->port, src, 0);

    rb.len = 0;
    send_all(fd, req, strlen(req));
    raw_response(f, fd, &rb);
    close(fd);
    return wait_closed(victim) >= 0;
}

/* client_close_from_handler: a request whose handler closes the server,
 * pipelined with another behind it; the connection closes. */
static void client_close_from_handler(struct fx *f)
{
    const char *reqs = "GET /close-server HTTP/1.1\r\nHost: x\r\n\r\n"
                       "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    int fd = raw_connect(f->port);

    send_all(fd, reqs, strlen(reqs));
    f->flags[0] = wait_closed(fd) >= 0;
    close(fd);
}

static void test_close_from_handler(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    fx_run(&f, client_close_from_handler);
    assert_true(f.flags[0]);
    assert_int_equal(f.requests, 1);             /* nothing after the close is served */
    assert_int_equal(f.flags[7], VMG_ECANCELED); /* the answer had nowhere to go */
}

/* answered_from opens a connection from src, sends a request that is the
 * connection's last (HTTP/1.0) and reads its answer, but never closes: the
 * server lingers on it for the client's FIN. The fd, or -1. */
static int answered_from(struct fx *f, const char *src)
{
    static struct rawbuf rb;
    const char *req = "GET /hello HTTP/1.0\r\n\r\n";
    int fd = raw_connect_from(f->port, src, 0);

    if (fd < 0)
        return -1;
    rb.len = 0;
    send_all(fd, req, strlen(req));
    if (raw_response(f, fd, &rb)->status != 200) {
        close(fd);
        return -1;
    }
    return fd;
}

/* client_lockout: 32 connections from four addresses each try to hold a
 * slot (opened by open_from, which returns the fd or -1); complete
 * requests on new connections are answered all the same, from a fifth
 * address (the server is full) and from one of the four (at its cap),
 * each in the place of the first of the 32 of its scope. */
static void client_lockout(struct fx *f, int (*open_from)(struct fx *f, const char *src))
{
    static const char *const src[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.1"};
    int fds[32], n = 0, fd;

    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) {
            fd = open_from(f, src[i]);
            if (fd < 0)
                continue;
            fds[n++] = fd;
            usleep(2 * 1000); /* an order of arrival */
        }
    f->flags[0] = n;
    f->n = 0; /* what the 32 were answered was checked: the slots go to the newcomers */
    f->flags[3] = wait_served(f, 32) == 0; /* the server has read them */
    /* The server is full: a newcomer takes the place of 127.0.0.2's first. */
    f->flags[1] = newcomer_evicts(f, "127.0.0.5", fds[0]);
    /* 127.0.0.1 is at its cap: its own first one gives way. */
    f->flags[2] = newcomer_evicts(f, "127.0.0.1", fds[24]);
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

/* A peer sending the start of a request on each connection and stopping. */
static void client_partial(struct fx *f)
{
    client_lockout(f, partial_from);
}

/* A peer sending one last request (HTTP/1.0) on each connection, reading
 * its answer and never closing. */
static void client_answered(struct fx *f)
{
    client_lockout(f, answered_from);
}

static void run_lockout(void (*client)(struct fx *))
{
    struct fx f;

    fx_init(&f);
    f.opts.max_conns = 32;
    f.opts.max_conns_per_peer = 8;
    f.opts.request_timeout_ms = 30000; /* not what frees the slots here */
    f.sample = 1;
    fx_run(&f, client);
    assert_int_equal(f.flags[0], 32);
    assert_true(f.flags[3]);
    assert_int_equal(f.r[0].status, 200);
    assert_true(f.flags[1]);
    assert_int_equal(f.r[1].status, 200);
    assert_true(f.flags[2]);
    assert_int_equal(f.stats.evicted, 2);
    assert_int_equal(f.stats.refused, 0);
}

static void test_evict_partial_requests(void **state)
{
    (void)state;
    run_lockout(client_partial);
}

static void test_evict_answered(void **state)
{
    (void)state;
    run_lockout(client_answered);
}

/* client_partial_burst: the server's loop stops while 8 connections from
 * one address each send the start of a request, so that it reads them all
 * in one turn, at one time of its clock; at the peer's cap, a complete
 * request takes the place of the first of them. */
static void client_partial_burst(struct fx *f)
{
    int fds[8], n = 0, fd;
    long t0 = now_ms();

    atomic_store(&f->stall_ms, 300);
    while (!atomic_load(&f->stalling) && now_ms() - t0 < 10000)
        usleep(1000);
    f->flags[2] = atomic_load(&f->stalling); /* the loop is in its stall */
    for (int i = 0; i < 8; i++) {
        fd = partial_from(f, "127.0.0.2");
        if (fd >= 0)
            fds[n++] = fd;
    }
    f->flags[0] = n;
    f->flags[3] = wait_served(f, 8) == 0;
    f->flags[1] = newcomer_evicts(f, "127.0.0.2", fds[0]);
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

static void test_evict_partial_burst_oldest_first(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.opts.max_conns = 32;
    f.opts.max_conns_per_peer = 8;
    f.opts.request_timeout_ms = 30000;
    f.sample = 1;
    fx_run(&f, client_partial_burst);
    assert_true(f.flags[2]);
    assert_int_equal(f.flags[0], 8);
    assert_true(f.flags[3]);
    assert_int_equal(f.r[0].status, 200);
    assert_true(f.flags[1]);
    assert_int_equal(f.stats.evicted, 1);
}

/* client_partial_before_silent: at a peer's cap, a connection that has sent
 * nothing yet (as a probe's whose request is not read yet) outlasts an
 * older-begun partial request: the partial one gives way. */
static void client_partial_before_silent(struct fx *f)
{
    static struct rawbuf rb;
    const char *head = "GET /hello HTTP/1.1\r\n";
    const char *req = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    int silent = raw_connect(f->port), partial, c;

    usleep(50 * 1000); /* silent is the older */
    partial = raw_connect(f->port);
    send_all(partial, head, strlen(head));
    usleep(100 * 1000);
    c = raw_connect(f->port);
    send_all(c, req, strlen(req));
    raw_response(f, c, &rb);
    close(c);
    f->flags[0] = wait_closed(partial) >= 0;
    /* The silent one still gets its answer. */
    rb.len = 0;
    send_all(silent, req, strlen(req));
    raw_response(f, silent, &rb);
    close(silent);
    close(partial);
}

static void test_evict_partial_before_silent(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.opts.max_conns = 8;
    f.opts.max_conns_per_peer = 2;
    f.opts.request_timeout_ms = 30000;
    fx_run(&f, client_partial_before_silent);
    assert_int_equal(f.r[0].status, 200);
    assert_true(f.flags[0]);
    assert_int_equal(f.r[1].status, 200);
    assert_int_equal(f.stats.evicted, 1);
}

/* client_burst_after_probe: a probe connects and has not sent its request
 * yet when a burst of connections that send nothing comes from the same
 * peer, beyond its cap: the burst's own members give way to each other,
 * newest first, and the probe, the oldest of them all, is answered once
 * it speaks; so is the newest of the burst. */
static void client_burst_after_probe(struct fx *f)
{
    static struct rawbuf rb;
    const char *req = "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    int probe = raw_connect(f->port), silent[6];
    size_t i;

    usleep(20 * 1000); /* accepted, not yet speaking */
    for (i = 0; i < 6; i++)
        silent[i] = raw_connect(f->port);
    usleep(50 * 1000); /* the burst is accepted */
    send_all(probe, req, strlen(req));
    raw_response(f, probe, &rb);
    rb.len = 0;
    send_all(silent[5], req, strlen(req));
    raw_response(f, silent[5], &rb);
    for (i = 0; i < 3; i++) /* the ones that gave way */
        f->flags[i] = wait_closed(silent[2 + i]) >= 0;
    close(probe);
    for (i = 0; i < 6; i++)
        close(silent[i]);
}

static void test_evict_burst_keeps_probe(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.opts.max_conns = 16;
    f.opts.max_conns_per_peer = 4;
    f.opts.request_timeout_ms = 30000;
    fx_run(&f, client_burst_after_probe);
    assert_int_equal(f.r[0].status, 200); /* the probe */
    assert_int_equal(f.r[1].status, 200); /* the newest of the burst */
    assert_true(f.flags[0] && f.flags[1] && f.flags[2]);
    assert_int_equal(f.stats.evicted, 3);
    assert_int_equal(f.stats.refused, 0);
}

/* client_header_deadline: headers that do not complete in time close the
 * connection at the header timeout, well before the request timeout; a
 * request whose headers came in time is not cut at it. */
static void client_header_deadline(struct fx *f)
{
    static struct rawbuf rb;
    const char *head = "GET /hello HTTP/1.1\r\n";
    const char *post = "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n12";
    int fd = raw_connect(f->port);
    long t0;

    usleep(300 * 1000); /* the header time runs from the first byte */
    t0 = now_ms();
    send_all(fd, head, strlen(head));
    wait_closed(fd);
    f->r[0].ms = (double)(now_ms() - t0);
    close(fd);
    /* Headers in time, the body slower than the header timeout. */
    f->n = 1;
    fd = raw_connect(f->port);
    send_all(fd, post, strlen(post));
    usleep(800 * 1000);
    send_all(fd, "345", 3);
    raw_response(f, fd, &rb);
    close(fd);
}

static void test_header_deadline(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.opts.request_timeout_ms = 8000;
    f.opts.header_timeout_ms = 400;
    fx_run(&f, client_header_deadline);
    assert_true(f.r[0].ms >= 380 && f.r[0].ms < 4000);
    assert_int_equal(f.r[1].status, 201);
}

/* flood sends pipelined requests on fd until the server has read none for
 * 1 s (30 s at most, or until a send fails) and returns the bytes sent;
 * *how is 0 when it stopped for no progress, -1 at the cap, -2 when the
 * kernel held the flood back, or the errno of the send that failed.
 *
 * With f (whose loop samples the stats), no progress for 3 s while the
 * server reads every connection is the kernel's doing, not the server's:
 * now and then, with 4 MB queued in the client's socket, the flood stops
 * on loopback while the server, having read all that arrived, reads on
 * with nothing buffered and no answer unsent, for more than a minute
 * (seen about once in 40 runs with four of them at once). */
static size_t flood(struct fx *f, int fd, int *how)
{
    static char reqs[64 * 1024];
    const char *one = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    size_t n1 = strlen(one), n = 0, pos = 0, sent = 0;
    long t0 = now_ms(), progress = t0;

    while (n + n1 <= sizeof(reqs)) {
        memcpy(reqs + n, one, n1);
        n += n1;
    }
    for (;;) {
        ssize_t k = send(fd, reqs + pos, n - pos, MSG_NOSIGNAL | MSG_DONTWAIT);
        long now = now_ms();
        int reading;

        if (k > 0) {
            sent += (size_t)k;
            pos = (pos + (size_t)k) % n;
            progress = now;
        } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            reading = f && atomic_load(&f->sampled_paused) == 0;
            if (!reading && now - progress >= 1000) {
                *how = 0;
                return sent;
            }
            if (reading && now - progress >= 3000) {
                *how = -2;
                return sent;
            }
            usleep(5 * 1000);
        } else {
            *how = k < 0 ? errno : 0;
            return sent;
        }
        if (now - t0 >= 30000) {
            *how = -1;
            return sent;
        }
    }
}

/* client_flood floods a connection that never reads its answers, on a new
 * connection when the kernel held the flood back (twice at most; flags[5]
 * counts them), has another connection served, and waits for the server
 * to reset the flood's. */
static void client_flood(struct fx *f)
{
    const char *one = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    size_t n1 = strlen(one);
    int fd = -1;
    long t0, blocked;

    for (int attempt = 0; attempt < 3; attempt++) {
        if (fd >= 0) {
            close(fd);
            f->flags[5]++;
        }
        fd = raw_connect_from(f->port, NULL, 4096);
        t0 = now_ms();
        f->flags[0] = (int)(flood(f, fd, &f->flags[2]) / 1024);
        if (f->flags[2] != -2)
            break;
    }
    blocked = now_ms();
    f->flags[3] = (int)(blocked - t0);
    /* Meanwhile another connection is served. */
    get(f, "/hello");
    /* The flood is closed for not reading, at the drain timeout: sending
     * fails (the server reset it). flags[4] counts the sends the server
     * still took meanwhile, for the failure's message. */
    for (;;) {
        ssize_t k = send(fd, one, n1, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0)
            f->flags[4]++;
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            f->flags[1] = 1;
            break;
        }
        if (now_ms() - blocked > 20000)
            break;
        usleep(10 * 1000);
    }
    f->r[1].ms = (double)(now_ms() - blocked);
    close(fd);
}

static void test_pipelined_flood_bounded(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.sample = 1;
    f.opts.max_header_bytes = 4096;
    f.opts.max_body = 1024;
    f.opts.max_pending_output = 16 * 1024;
    f.opts.max_buffered = 64 * 1024;
    f.opts.request_timeout_ms = 2000;
    f.opts.max_requests = 1000 * 1000; /* not retired before it is drained */
    fx_run(&f, client_flood);
    fprintf(stderr,
            "# flood: %d KiB sent in %d ms (ended by %s %d; %d floods held back by the "
            "kernel before), %d requests handled, peak %zu bytes buffered; then %d sends "
            "taken, closed %s after %.0f ms; %zu drained\n",
            f.flags[0], f.flags[3], f.flags[2] == 0 ? "no progress" : "cap/kernel/errno",
            f.flags[2], f.flags[5], f.requests, f.stats.peak_buffered, f.flags[4],
            f.flags[1] ? "yes" : "no", f.r[1].ms, (size_t)f.stats.drained);
    /* The reading of the flood stopped ... */
    assert_true(f.max_paused >= 1);
    /* ... with at most an input buffer (headers + body + two reads), the
     * output bound and one more answer, and the other connection's read,
     * held in the server; the client sent far more. */
    assert_true(f.stats.peak_buffered < 256 * 1024);
    assert_true((size_t)f.flags[0] * 1024 > 4 * f.stats.peak_buffered);
    /* Requests in the server's buffer were not parsed: the handler saw
     * fewer than were sent. */
    assert_true((size_t)f.requests < (size_t)f.flags[0] * 1024 / 33);
    assert_int_equal(f.r[0].status, 200);
    assert_true(f.flags[1]);
    assert_true(f.r[1].ms < 15000);
    assert_int_equal(f.stats.drained, 1);
    assert_int_equal(f.stats.buffered, 0);
}

/* client_flood4 floods four connections at once, as client_flood does one,
 * then leaves without reading. */
static void client_flood4(struct fx *f)
{
    static char reqs[64 * 1024];
    const char *one = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    size_t n1 = strlen(one), n = 0, pos[4] = {0}, sent = 0;
    long t0 = now_ms(), progress = t0;
    int fd[4];

    while (n + n1 <= sizeof(reqs)) {
        memcpy(reqs + n, one, n1);
        n += n1;
    }
    for (int i = 0; i < 4; i++)
        fd[i] = raw_connect_from(f->port, NULL, 4096);
    while (now_ms() - progress < 1000 && now_ms() - t0 < 30000) {
        int any = 0;
        for (int i = 0; i < 4; i++) {
            ssize_t k = send(fd[i], reqs + pos[i], n - pos[i], MSG_NOSIGNAL | MSG_DONTWAIT);
            if (k > 0) {
                sent += (size_t)k;
                pos[i] = (pos[i] + (size_t)k) % n;
                any = 1;
            }
        }
        if (any)
            progress = now_ms();
        else
            usleep(5 * 1000);
    }
    f->flags[0] = (int)(sent / 1024);
    get(f, "/hello"); /* a connection that holds nothing gets in */
    for (int i = 0; i < 4; i++)
        close(fd[i]);
}

static void test_total_budget(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.sample = 1;
    f.opts.max_header_bytes = 4096;
    f.opts.max_body = 1024;
    f.opts.max_pending_output = 1024 * 1024; /* the budget, not this, holds them */
    f.opts.max_buffered = 64 * 1024;
    f.opts.max_requests = 1000 * 1000;
    fx_run(&f, client_flood4);
    fprintf(stderr, "# flood4: %d KiB sent, %d requests handled, peak %zu bytes buffered\n",
            f.flags[0], f.requests, f.stats.peak_buffered);
    /* Each connection holds at most its input buffer and one answer: four
     * times 133 KiB, far below the megabyte of output each could queue. */
    assert_true(f.max_paused >= 4);
    assert_true(f.stats.peak_buffered < 1024 * 1024);
    assert_true((size_t)f.flags[0] * 1024 > 4 * f.stats.peak_buffered);
    assert_int_equal(f.r[0].status, 200);
}

/* client_partial_many: 16 clients each send the start of a request and
 * stop; once the server has read them all, each sends the rest and reads
 * its answer. */
static void client_partial_many(struct fx *f)
{
    static struct rawbuf rb;
    const char *rest = "Host: x\r\n\r\n";
    int fds[16];

    for (int i = 0; i < 16; i++)
        fds[i] = partial_from(f, NULL);
    f->flags[0] = wait_served(f, 16) == 0;
    for (int i = 0; i < 16; i++) {
        rb.len = 0;
        send_all(fds[i], rest, strlen(rest));
        f->flags[1] += raw_response(f, fds[i], &rb)->status == 200;
        close(fds[i]);
    }
}

/* A connection's input costs the server what it sent, not a read's worth
 * of buffer: 16 clients sending their requests in two parts keep the
 * server's buffers within a 16 KiB budget (a 64 KiB buffer a read went
 * over it at the first), and are all answered at once. */
static void test_partial_requests_within_budget(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.sample = 1;
    f.opts.max_buffered = 16 * 1024;
    f.opts.request_timeout_ms = 5000;
    fx_run(&f, client_partial_many);
    fprintf(stderr, "# partial16: peak %zu bytes buffered, %d of 16 answered\n",
            f.stats.peak_buffered, f.flags[1]);
    assert_true(f.flags[0]);
    assert_int_equal(f.flags[1], 16);
    assert_true(f.stats.peak_buffered <= 16 * 1024);
    for (int i = 0; i < MAXR; i++)
        assert_true(f.r[i].ms < 1000);
}

static void client_evict_flood(struct fx *f)
{
    static struct rawbuf rb;
    const char *req = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    int a = raw_connect_from(f->port, NULL, 4096), b, how;

    /* The only slot is held by a client that does not read its answers ... */
    f->flags[0] = (int)(flood(NULL, a, &how) / 1024);
    /* ... and gives way to a new one. */
    b = raw_connect(f->port);
    send_all(b, req, strlen(req));
    raw_response(f, b, &rb);
    close(a);
    close(b);
}

static void test_evict_not_reading(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.opts.max_conns = 1;
    f.opts.max_requests = 1000 * 1000;
    fx_run(&f, client_evict_flood);
    assert_true(f.flags[0] > 0);
    assert_int_equal(f.r[0].status, 200);
    assert_true(f.r[0].ms < 1000);
    assert_int_equal(f.stats.evicted, 1);
    assert_int_equal(f.stats.refused, 0);
}

/* client_late_big: an HTTP/1.0 request (the answer closes the
 * connection) whose big answer comes 100 ms before the request's time is
 * up; the client starts reading it 200 ms later, then reads it all. */
static void client_late_big(struct fx *f)
{
    const char *req = "GET /late-big HTTP/1.0\r\n\r\n";
    int fd = raw_connect_from(f->port, NULL, 4096);
    char buf[65536];
    size_t got = 0;
    ssize_t k;

    send_all(fd, req, strlen(req));
    usleep(1100 * 1000);
    while ((k = recv(fd, buf, sizeof(buf), 0)) > 0)
        got += (size_t)k;
    f->flags[0] = (int)(got / 1024);
    close(fd);
}

/* The last answer of a connection has the request's time anew to be
 * written, as an answer on a kept connection has: one that comes late in
 * the request's time is not cut off when that time is up. */
static void test_late_last_answer_written_whole(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.opts.request_timeout_ms = 1000;
    f.opts.max_requests = 1000 * 1000;
    fx_run(&f, client_late_big);
    fprintf(stderr, "# %d KiB of the late answer read\n", f.flags[0]);
    assert_true((size_t)f.flags[0] >= LATE_BIG / 1024);
    assert_int_equal(f.stats.drained, 0);
}

static void client_max_requests(struct fx *f)
{
    CURL *e = easy_new(f);
    for (int i = 0; i < 4; i++)
        perform(f, e, "/hello");
    curl_easy_cleanup(e);
}

static void test_max_requests(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.opts.max_requests = 3;
    fx_run(&f, client_max_requests);
    for (int i = 0; i < 4; i++)
        assert_int_equal(f.r[i].status, 200);
    /* The third answer closed the connection: the fourth made a new one. */
    assert_int_equal(f.r[0].connects, 1);
    assert_int_equal(f.r[1].connects, 0);
    assert_int_equal(f.r[2].connects, 0);
    assert_int_equal(f.r[3].connects, 1);
    assert_int_equal(f.stats.retired, 1);
}

static void client_max_age(struct fx *f)
{
    static struct rawbuf rb;
    const char *req = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    long t0 = now_ms();
    int fd = raw_connect(f->port), n = 0;

    /* A connection that keeps sending: its timers are re-armed each time,
     * but its age is not. It is closed after an answer that says so, or
     * between two requests. */
    for (;;) {
        struct result *r;
        send_all(fd, req, strlen(req));
        f->n = 0;
        r = raw_response(f, fd, &rb);
        n++;
        if (r->status != 200 || strstr(r->body, "Connection: close\r\n") || n > 500)
            break;
        usleep(20 * 1000);
    }
    f->flags[0] = n;
    f->flags[1] = wait_closed(fd) >= 0;
    f->r[1].ms = (double)(now_ms() - t0);
    close(fd);

    /* An idle one goes at its age too, well before the idle timeout. */
    t0 = now_ms();
    fd = raw_connect(f->port);
    send_all(fd, req, strlen(req));
    f->n = 2;
    raw_response(f, fd, &rb);
    f->flags[2] = wait_closed(fd) >= 0;
    f->r[3].ms = (double)(now_ms() - t0);
    close(fd);
}

static void test_max_conn_age(void **state)
{
    struct fx f;
    (void)state;

    fx_init(&f);
    f.opts.max_conn_age_ms = 400;
    f.opts.idle_timeout_ms = 60000;
    fx_run(&f, client_max_age);
    assert_true(f.flags[0] >= 2 && f.flags[0] < 500);
    assert_true(f.flags[1]);
    assert_true(f.r[1].ms >= 380 && f.r[1].ms < 5000);
    assert_int_equal(f.r[2].status, 200);
    assert_true(f.flags[2]);
    assert_true(f.r[3].ms >= 380 && f.r[3].ms < 5000);
    assert_int_equal(f.stats.retired, 2);
}

/* ---- the certificate reloaded ---- */

struct certs {
    char dir[64];
    char *cert[3];
    char *key[3];
};

static int write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "we");
    int ok;

    if (!fp)
        return -1;
    ok = fputs(text, fp) >= 0;
    return fclose(fp) == 0 && ok ? 0 : -1;
}

/* kube_publish writes cert and key as the kubelet updates a Secret volume:
 * a new ..vN directory, then the ..data symlink swapped atomically. */
static int kube_publish(const struct certs *cs, int version, const char *cert, const char *key)
{
    char d[128], p[160], tmp[128], target[32];

    snprintf(target, sizeof(target), "..v%d", version);
    snprintf(d, sizeof(d), "%s/%s", cs->dir, target);
    if (mkdir(d, 0700) < 0)
        return -1;
    snprintf(p, sizeof(p), "%s/tls.crt", d);
    if (write_file(p, cert) < 0)
        return -1;
    snprintf(p, sizeof(p), "%s/tls.key", d);
    if (write_file(p, key) < 0)
        return -1;
    snprintf(tmp, sizeof(tmp), "%s/..data_tmp", cs->dir);
    snprintf(p, sizeof(p), "%s/..data", cs->dir);
    if (symlink(target, tmp) < 0 || rename(tmp, p) < 0)
        return -1;
    return 0;
}

/* get_with_ca tells whether a request to the server succeeds when only
 * ca is trusted. */
static int get_with_ca(struct fx *f, const char *ca)
{
    char *keep = f->cert_pem;
    CURL *e;
    struct result *r;
    int ok;

    f->cert_pem = (char *)ca;
    e = easy_new(f);
    f->n = MAXR - 1; /* a scratch slot */
    r = perform(f, e, "/hello");
    ok = r->rc == CURLE_OK && r->status == 200;
    curl_easy_cleanup(e);
    f->cert_pem = keep;
    return ok;
}

static int wait_for_ca(struct fx *f, const char *ca)
{
    for (long t0 = now_ms(); now_ms() - t0 < 10000; usleep(50 * 1000))
        if (get_with_ca(f, ca))
            return 1;
    return 0;
}

static struct certs *g_certs;

static void client_reload(struct fx *f)
{
    struct certs *cs = g_certs;
    char p[160];

    f->flags[0] = get_with_ca(f, cs->cert[0]);
    /* The Secret is updated: the new certificate, without a restart. */
    f->flags[1] = kube_publish(cs, 2, cs->cert[1], cs->key[1]) == 0 && wait_for_ca(f, cs->cert[1]);
    /* A pair that does not match is refused: the last good one stays. */
    f->flags[2] = kube_publish(cs, 3, cs->cert[2], cs->key[1]) == 0;
    usleep(500 * 1000); /* ten polls */
    f->flags[3] = get_with_ca(f, cs->cert[1]) && !get_with_ca(f, cs->cert[2]);
    /* The key is rewritten in place: now the pair works. */
    snprintf(p, sizeof(p), "%s/..v3/tls.key", cs->dir);
    f->flags[4] = write_file(p, cs->key[2]) == 0 && wait_for_ca(f, cs->cert[2]);
}

static void test_tls_reload(void **state)
{
    const char *sans[] = {"localhost"};
    struct certs cs = {.dir = "/tmp/test_server_tls_XXXXXX"};
    char crt[128], key[128], p[160];
    struct fx f;
    (void)state;

    assert_non_null(mkdtemp(cs.dir));
    for (int i = 0; i < 3; i++)
        assert_int_equal(vmg_tls_selfsigned("metrics", sans, 1, &cs.cert[i], &cs.key[i]), 0);
    assert_int_equal(kube_publish(&cs, 1, cs.cert[0], cs.key[0]), 0);
    snprintf(crt, sizeof(crt), "%s/tls.crt", cs.dir);
    snprintf(key, sizeof(key), "%s/tls.key", cs.dir);
    snprintf(p, sizeof(p), "..data/tls.crt");
    assert_int_equal(symlink(p, crt), 0);
    snprintf(p, sizeof(p), "..data/tls.key");
    assert_int_equal(symlink(p, key), 0);

    fx_init(&f);
    f.https = 1;
    f.opts.cert_file = crt;
    f.opts.key_file = key;
    f.opts.tls_reload_ms = 50;
    g_certs = &cs;
    fx_run(&f, client_reload);
    assert_true(f.flags[0]);
    assert_true(f.flags[1]);
    assert_true(f.flags[2]);
    assert_true(f.flags[3]);
    assert_true(f.flags[4]);
    assert_int_equal(f.stats.tls_reloads, 2);
    /* The refused pair was reported, once, naming what is wrong. */
    assert_int_equal(f.reload_failures, 1);
    assert_int_equal(f.reload_status, 0);
    assert_int_equal(f.reloads, 3);

    unlink(crt);
    unlink(key);
    for (int v = 1; v <= 3; v++) {
        snprintf(p, sizeof(p), "%s/..v%d/tls.crt", cs.dir, v);
        unlink(p);
        snprintf(p, sizeof(p), "%s/..v%d/tls.key", cs.dir, v);
        unlink(p);
        snprintf(p, sizeof(p), "%s/..v%d", cs.dir, v);
        rmdir(p);
    }
    snprintf(p, sizeof(p), "%s/..data", cs.dir);
    unlink(p);
    rmdir(cs.dir);
    for (int i = 0; i < 3; i++) {
        free(cs.cert[i]);
        free(cs.key[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_selfsigned),
        cmocka_unit_test(test_tls_selfsigned_rejects),
        cmocka_unit_test(test_new_errors),
        cmocka_unit_test(test_plain_basic),
        cmocka_unit_test(test_keepalive_and_pipelining),
        cmocka_unit_test(test_header_lookup),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_max_connections),
        cmocka_unit_test(test_slow_client_timeout),
        cmocka_unit_test(test_abort_when_client_leaves),
        cmocka_unit_test(test_close_with_clients),
        cmocka_unit_test(test_https),
        cmocka_unit_test(test_https_from_files),
        cmocka_unit_test(test_tls_handshake_limits),
        cmocka_unit_test(test_tls_waiting_client_left),
        cmocka_unit_test(test_plain_not_throttled),
        cmocka_unit_test(test_evict_oldest_idle),
        cmocka_unit_test(test_evict_not_reading),
        cmocka_unit_test(test_per_peer_cap),
        cmocka_unit_test(test_per_peer_cap_dual_stack),
        cmocka_unit_test(test_evict_partial_requests),
        cmocka_unit_test(test_evict_answered),
        cmocka_unit_test(test_close_from_handler),
        cmocka_unit_test(test_evict_partial_burst_oldest_first),
        cmocka_unit_test(test_evict_partial_before_silent),
        cmocka_unit_test(test_evict_burst_keeps_probe),
        cmocka_unit_test(test_header_deadline),
        cmocka_unit_test(test_pipelined_flood_bounded),
        cmocka_unit_test(test_total_budget),
        cmocka_unit_test(test_partial_requests_within_budget),
        cmocka_unit_test(test_late_last_answer_written_whole),
        cmocka_unit_test(test_max_requests),
        cmocka_unit_test(test_max_conn_age),
        cmocka_unit_test(test_tls_reload),
    };
    int rc;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
