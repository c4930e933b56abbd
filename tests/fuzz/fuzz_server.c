/* fuzz_server.c: libFuzzer target for the HTTP server (lib/server.c) that
 * answers /metrics, /healthz and /readyz: bytes in, responses and limits
 * out. One server on a loop, with small limits, serves every input: a
 * client connects over loopback, sends the input and its FIN, and reads
 * what comes back until the server closes. The handler answers at once, or
 * later from the loop for paths that start with "/a" (so that pipelined
 * requests wait), echoing a request header into a response header.
 *
 * What must hold: every request the handler gets is within the limits
 * (URL and headers, header count, body), its strings are whole; what the
 * client reads is a sequence of well-formed HTTP responses (it may be cut
 * short only by the close), at most one per request plus the 100 Continue
 * answers and one final error; nothing follows an error; the connection
 * is gone at the end and no request is left unanswered.
 *
 * fuzz-sources: lib/server.c lib/server_req.c lib/tls.c lib/err.c lib/file.c
 * fuzz-sources: lib/buf.c lib/backoff.c lib/bucket.c lib/clock.c
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <http_parser.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <uv.h>

#include "lib/err.h"
#include "lib/server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_HEADER_BYTES 2048
#define MAX_HEADERS 16
#define MAX_BODY 4096
#define MAX_REQUEST_BYTES (48 * 1024)
#define MAX_REQS 8192

static uv_loop_t loop;
static vmg_server *srv;
static uv_timer_t later; /* answers the deferred request */

/* One input's run. */
static struct run {
    vmg_server_req *pending; /* deferred, not answered yet */
    size_t dispatched;
    unsigned char head[MAX_REQS]; /* request i was a HEAD */
    char *out;                    /* what the client read */
    size_t out_len, out_cap;
    int eof;
    uv_poll_t poll;
    int fd;
} run;

static void answer(vmg_server_req *r)
{
    const char *path = vmg_server_req_path(r), *echo = vmg_server_req_header(r, "X-Echo");
    size_t n = strlen(path);

    if (echo && vmg_server_req_add_header(r, "X-Echo", echo) > 0)
        abort();
    if (strcmp(path, "/healthz") == 0)
        vmg_server_respond(r, 200, "text/plain", "ok\n", 3);
    else
        vmg_server_respond(r, 404, "text/plain", path, n > 100 ? 100 : n);
}

static void on_later(uv_timer_t *t)
{
    vmg_server_req *r = run.pending;

    (void)t;
    if (r) {
        run.pending = NULL;
        answer(r);
    }
}

static void on_abort(void *data, vmg_server_req *r)
{
    (void)data;
    if (r != run.pending || !vmg_server_req_aborted(r))
        abort();
    run.pending = NULL;
    if (vmg_server_respond(r, 200, NULL, "late", 4) != VMG_ECANCELED)
        abort();
}

static void handler(void *data, vmg_server_req *r)
{
    const char *method = vmg_server_req_method(r), *path = vmg_server_req_path(r);
    const char *query = vmg_server_req_query(r), *body;
    size_t blen = 99999;

    (void)data;
    body = vmg_server_req_body(r, &blen);
    if (!method || !method[0] || !path || !path[0] || !query || !vmg_server_req_peer(r) || !body)
        abort();
    if (strlen(path) + strlen(query) > MAX_HEADER_BYTES || blen > MAX_BODY || body[blen] != '\0')
        abort();
    if (vmg_server_req_aborted(r) || run.pending)
        abort();
    if (run.dispatched < MAX_REQS)
        run.head[run.dispatched] = strcmp(method, "HEAD") == 0;
    run.dispatched++;
    if (strncmp(path, "/a", 2) == 0) {
        run.pending = r;
        vmg_server_req_on_abort(r, on_abort, NULL);
        uv_timer_start(&later, on_later, 0, 0);
        return;
    }
    answer(r);
}

static void on_readable(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    for (;;) {
        ssize_t n;

        if (run.out_cap - run.out_len < 16384) {
            char *nb = realloc(run.out, run.out_cap + 65536);
            if (!nb)
                abort();
            run.out = nb;
            run.out_cap += 65536;
        }
        n = recv(run.fd, run.out + run.out_len, run.out_cap - run.out_len, 0);
        if (n > 0) {
            run.out_len += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        /* EOF, or the server reset the connection: it is done. */
        run.eof = 1;
        uv_poll_stop(p);
        uv_stop(&loop);
        return;
    }
}

/* ---- the responses, read back ---- */

struct rparse {
    size_t finals, continues, errors;
    int after_error;
    long status;
};

static int r_headers_complete(http_parser *p)
{
    struct rparse *rp = p->data;

    rp->status = (long)p->status_code;
    if (p->status_code < 100 || p->status_code > 599)
        abort();
    if (p->status_code < 200)
        return 0;
    /* A HEAD's answer announces a body it does not send. */
    return rp->finals < MAX_REQS && rp->finals < run.dispatched && run.head[rp->finals] ? 1 : 0;
}

static int r_message_complete(http_parser *p)
{
    struct rparse *rp = p->data;

    if (rp->after_error)
        abort(); /* nothing follows an error */
    if (rp->status == 100) {
        rp->continues++;
        return 0;
    }
    if (rp->finals >= run.dispatched) {
        /* Not the answer to a request the handler got: the server's own
         * refusal, which ends the connection. */
        if (rp->status != 400 && rp->status != 413 && rp->status != 431 && rp->status != 500)
            abort();
        rp->after_error = 1;
        rp->errors++;
    }
    rp->finals++;
    return 0;
}

static void check_responses(void)
{
    static const http_parser_settings s = {.on_headers_complete = r_headers_complete,
                                           .on_message_complete = r_message_complete};
    struct rparse rp = {0};
    http_parser p;
    size_t n;

    http_parser_init(&p, HTTP_RESPONSE);
    p.data = &rp;
    n = http_parser_execute(&p, &s, run.out, run.out_len);
    if (HTTP_PARSER_ERRNO(&p) != HPE_OK || n != run.out_len)
        abort();
    if (rp.finals > run.dispatched + 1 || rp.continues > run.dispatched + 1)
        abort();
}

/* ---- setup ---- */

static void setup(void)
{
    struct vmg_server_opts o = {
        .addr = "127.0.0.1:0",
        .max_conns = 4,
        .max_header_bytes = MAX_HEADER_BYTES,
        .max_headers = MAX_HEADERS,
        .max_body = MAX_BODY,
        .request_timeout_ms = 5000,
        .idle_timeout_ms = 5000,
        .handler = handler,
    };
    int err = 0;

    signal(SIGPIPE, SIG_IGN);
    if (uv_loop_init(&loop) != 0 || uv_timer_init(&loop, &later) != 0)
        abort();
    srv = vmg_server_new(&loop, &o, &err);
    if (!srv)
        abort();
}

/* connect_client connects to the server. The client closes first, so each
 * run leaves a TIME_WAIT behind; Linux reuses them on loopback, but a long
 * run may still find no free port for a moment: it tries again. */
static int connect_client(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)vmg_server_port(srv))};

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int tries = 0; tries < 200; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
            break;
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
            return fd;
        fprintf(stderr, "fuzz_server: connect: %s\n", strerror(errno));
        close(fd);
        usleep(10000);
    }
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t sent = 0;

    if (!srv)
        setup();
    if (size > MAX_REQUEST_BYTES)
        return 0;
    memset(&run, 0, sizeof(run));
    run.fd = connect_client();
    /* The whole input and the FIN go out before the server runs: the
     * kernel holds them (the input is below the socket buffers). */
    while (sent < size) {
        ssize_t n = send(run.fd, data + sent, size - sent, MSG_NOSIGNAL);
        if (n <= 0)
            abort();
        sent += (size_t)n;
    }
    shutdown(run.fd, SHUT_WR);
    if (fcntl(run.fd, F_SETFL, O_NONBLOCK) != 0 || uv_poll_init(&loop, &run.poll, run.fd) != 0 ||
        uv_poll_start(&run.poll, UV_READABLE, on_readable) != 0)
        abort();
    while (!run.eof)
        uv_run(&loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&run.poll, NULL);
    close(run.fd);
    /* The server closes its side too, and answers or aborts every request. */
    while (vmg_server_connections(srv) > 0 || run.pending)
        uv_run(&loop, UV_RUN_ONCE);
    uv_run(&loop, UV_RUN_NOWAIT);
    check_responses();
    free(run.out);
    return 0;
}
