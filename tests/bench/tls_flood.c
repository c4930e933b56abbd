/* tls_flood: what a flood of TLS handshakes costs the loop that serves
 * them (the manager's loop, which its controller shares), with the metrics
 * port's handshake limits and without them.
 *
 * The loop serves lib/server over TLS with a self-signed certificate, as
 * the manager's metrics port does by default. Client threads make full
 * handshakes as fast as they can, each connection from the next of 200
 * loopback addresses (a flood from many hosts: one address alone is held
 * to its own limit), and close. Meanwhile a scraper that connected before
 * the flood asks for a page every 100 ms on its keep-alive connection, and
 * a new scraper connects every second. For each run it prints
 *
 *   tls_flood: LIMITS: H handshakes/s completed, D/s waited for the rate,
 *   T/s throttled; loop CPU P% of a core (K% in the kernel), U us a flood
 *   connection; keep-alive answers A of B, max M ms; new scrapers S of N
 *   served, the slowest in W ms
 *
 * and exits 1 when, with the limits, more handshakes completed than the
 * server's rate and burst allow over the run, none waited (the rate was
 * never reached: nothing was measured), the keep-alive scraper was not
 * answered every time, or a new scraper was not served. Without the
 * limits, a machine too slow to pass the rate cannot show the limit: it
 * says so.
 *
 *   tls_flood [SECONDS [CLIENTS]]   (default 5 s, 2 client threads; at
 *                                    most 60 s, 64 threads)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <uv.h>

#include "lib/server.h"
#include "lib/tlsgen.h"

#define ADDRS 200

struct run {
    const char *name;
    double rate, peer_rate; /* as the server's options: 0 default, < 0 none */
    int seconds, clients;
    int port;
    atomic_int stop;
    atomic_long done, failed;
    /* the loop thread's */
    uv_loop_t loop;
    vmg_server *srv;
    uv_async_t wake;
    double cpu0, cpu1, sys0, sys1;
    struct vmg_server_stats stats;
    /* the scrapers' */
    double ka_max_ms, new_max_ms;
    int ka_asked, ka_ok, new_asked, new_ok;
    double wall;
};

static double now_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void handler(void *data, vmg_server_req *r)
{
    (void)data;
    vmg_server_respond(r, 200, "text/plain", "ok\n", 3);
}

/* sys_s: the calling thread's CPU time in the kernel. */
static double sys_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void on_wake(uv_async_t *a)
{
    struct run *r = a->data;

    r->cpu1 = now_s(CLOCK_THREAD_CPUTIME_ID);
    r->sys1 = sys_s();
    vmg_server_get_stats(r->srv, &r->stats);
    vmg_server_close(r->srv, NULL, NULL);
    uv_close((uv_handle_t *)a, NULL);
}

/* tcp_from connects to the server from 127.0.0.(2 + k); -1 on failure. */
static int tcp_from(int port, int k)
{
    struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

    if (fd < 0)
        return -1;
    src.sin_addr.s_addr = htonl(0x7f000002u + (uint32_t)k);
    dst.sin_addr.s_addr = htonl(0x7f000001u);
    dst.sin_port = htons((uint16_t)port);
    struct timeval tv = {.tv_sec = 5};

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* A server that stops answering fails the bench, not hangs it. */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0 ||
        connect(fd, (struct sockaddr *)&dst, sizeof(dst)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static SSL *tls_from(SSL_CTX *ctx, int port, int k, int *fd)
{
    SSL *ssl;

    *fd = tcp_from(port, k);
    if (*fd < 0)
        return NULL;
    ssl = SSL_new(ctx);
    SSL_set_fd(ssl, *fd);
    if (SSL_connect(ssl) != 1) {
        SSL_free(ssl);
        close(*fd);
        return NULL;
    }
    return ssl;
}

/* ask sends one GET on ssl and reads its answer; 0 when it is a 200. */
static int ask(SSL *ssl)
{
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    char buf[512];
    int n = 0, k;

    if (SSL_write(ssl, req, sizeof(req) - 1) <= 0)
        return -1;
    while (n < (int)sizeof(buf) - 1 && (k = SSL_read(ssl, buf + n, sizeof(buf) - 1 - n)) > 0) {
        n += k;
        buf[n] = '\0';
        if (strstr(buf, "\r\n\r\nok\n"))
            return strncmp(buf, "HTTP/1.1 200", 12) == 0 ? 0 : -1;
    }
    return -1;
}

struct client {
    struct run *r;
    SSL_CTX *ctx;
    int id;
};

static void *flooder(void *arg)
{
    struct client *c = arg;
    struct run *r = c->r;

    for (int k = c->id; !atomic_load(&r->stop); k += r->clients) {
        int fd;
        SSL *ssl = tls_from(c->ctx, r->port, k % ADDRS, &fd);
        if (!ssl) {
            atomic_fetch_add(&r->failed, 1);
            continue;
        }
        atomic_fetch_add(&r->done, 1);
        SSL_free(ssl); /* no close_notify: a flood does not say goodbye */
        close(fd);
    }
    return NULL;
}

static void *scraper(void *arg)
{
    struct client *c = arg;
    struct run *r = c->r;
    pthread_t *th = calloc((size_t)r->clients, sizeof(*th));
    struct client *cs = calloc((size_t)r->clients, sizeof(*cs));
    int fd, kfd;
    /* The keep-alive scraper connects before the flood, from an address of
     * its own (ADDRS + 1). */
    SSL *ka = tls_from(c->ctx, r->port, ADDRS + 1, &kfd);

    for (int i = 0; i < r->clients; i++) {
        cs[i] = (struct client){.r = r, .ctx = c->ctx, .id = i};
        pthread_create(&th[i], NULL, flooder, &cs[i]);
    }
    for (int t = 0; t < r->seconds * 10; t++) {
        double t0 = now_s(CLOCK_MONOTONIC), ms;
        r->ka_asked++;
        if (ka && ask(ka) == 0) {
            r->ka_ok++;
            ms = (now_s(CLOCK_MONOTONIC) - t0) * 1000;
            if (ms > r->ka_max_ms)
                r->ka_max_ms = ms;
        }
        if (t % 10 == 5) {
            /* A new scraper, from an address of its own (ADDRS + 2). */
            double t1 = now_s(CLOCK_MONOTONIC);
            SSL *n = tls_from(c->ctx, r->port, ADDRS + 2, &fd);
            r->new_asked++;
            if (n) {
                if (ask(n) == 0) {
                    r->new_ok++;
                    ms = (now_s(CLOCK_MONOTONIC) - t1) * 1000;
                    if (ms > r->new_max_ms)
                        r->new_max_ms = ms;
                }
                SSL_free(n);
                close(fd);
            }
        }
        ms = (now_s(CLOCK_MONOTONIC) - t0) * 1000;
        if (ms < 100)
            usleep((useconds_t)((100 - ms) * 1000));
    }
    atomic_store(&r->stop, 1);
    for (int i = 0; i < r->clients; i++)
        pthread_join(th[i], NULL);
    if (ka) {
        SSL_free(ka);
        close(kfd);
    }
    free(th);
    free(cs);
    uv_async_send(&r->wake);
    return NULL;
}

static int run(struct run *r, const char *cert, const char *key)
{
    struct vmg_server_opts o = {.addr = "127.0.0.1:0",
                                .cert_pem = cert,
                                .key_pem = key,
                                .handler = handler,
                                .tls_handshakes_per_sec = r->rate,
                                .tls_handshakes_per_peer_per_sec = r->peer_rate};
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    struct client sc = {.r = r, .ctx = ctx};
    pthread_t th;
    double hs, wall, conns;
    int err = 0;

    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF); /* full handshakes */
    uv_loop_init(&r->loop);
    r->srv = vmg_server_new(&r->loop, &o, &err);
    if (!r->srv) {
        fprintf(stderr, "tls_flood: vmg_server_new: %d\n", err);
        return -1;
    }
    r->port = vmg_server_port(r->srv);
    uv_async_init(&r->loop, &r->wake, on_wake);
    r->wake.data = r;
    wall = now_s(CLOCK_MONOTONIC);
    r->cpu0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    r->sys0 = sys_s();
    pthread_create(&th, NULL, scraper, &sc);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    pthread_join(th, NULL);
    uv_loop_close(&r->loop);
    SSL_CTX_free(ctx);
    wall = now_s(CLOCK_MONOTONIC) - wall;
    hs = (double)atomic_load(&r->done) / wall;
    conns = (double)atomic_load(&r->done) + (double)r->stats.throttled;
    r->wall = wall;
    printf("tls_flood: %s: %.0f handshakes/s completed, %.0f/s waited for the rate, %.0f/s "
           "throttled; loop CPU %.0f%% of a core (%.0f%% in the kernel), %.0f us a flood "
           "connection; keep-alive answers %d of %d, max %.1f ms; new scrapers %d of %d served, "
           "the slowest in %.1f ms\n",
           r->name, hs, (double)r->stats.delayed / wall, (double)r->stats.throttled / wall,
           100 * (r->cpu1 - r->cpu0) / wall, 100 * (r->sys1 - r->sys0) / wall,
           conns > 0 ? (r->cpu1 - r->cpu0) * 1e6 / conns : 0, r->ka_ok, r->ka_asked, r->ka_max_ms,
           r->new_ok, r->new_asked, r->new_max_ms);
    return 0;
}

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 5;
    int clients = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 2, rc = 0;
    const char *sans[] = {"localhost"};
    char *cert = NULL, *key = NULL;
    struct run none = {.name = "no limits", .rate = -1, .peer_rate = -1};
    struct run dflt = {.name = "the metrics port's limits"};
    double most;

    signal(SIGPIPE, SIG_IGN); /* a connection the server closed */
    if (seconds < 1 || seconds > 60 || clients < 1 || clients > 64) {
        fprintf(stderr, "usage: tls_flood [SECONDS [CLIENTS]]\n");
        return 2;
    }
    if (vmg_tls_selfsigned("tls-flood", sans, 1, &cert, &key) < 0) {
        fprintf(stderr, "tls_flood: no certificate\n");
        return 1;
    }
    none.seconds = dflt.seconds = seconds;
    none.clients = dflt.clients = clients;
    if (run(&none, cert, key) < 0 || run(&dflt, cert, key) < 0)
        rc = 1;
    /* The server's rate over the run (its time measured, plus a second's
     * slack), and its burst. */
    most = VMG_SERVER_HANDSHAKES_PER_SEC * (dflt.wall + 1) + 2 * VMG_SERVER_HANDSHAKES_PER_SEC;
    if ((double)atomic_load(&dflt.done) > most) {
        printf("tls_flood: FAIL: %ld handshakes completed with the limits, more than %.0f\n",
               atomic_load(&dflt.done), most);
        rc = 1;
    }
    if (dflt.stats.delayed == 0) {
        printf("tls_flood: FAIL: no handshake waited for the server's rate: the flood never "
               "reached it\n");
        rc = 1;
    }
    if (dflt.new_ok != dflt.new_asked) {
        printf("tls_flood: FAIL: %d of %d new scrapers were served\n", dflt.new_ok, dflt.new_asked);
        rc = 1;
    }
    if ((double)atomic_load(&none.done) <=
        VMG_SERVER_HANDSHAKES_PER_SEC * (none.wall + 1) + 2 * VMG_SERVER_HANDSHAKES_PER_SEC)
        printf("tls_flood: this machine made no more handshakes without the limits than the "
               "rate allows: the limits' effect cannot show here\n");
    if (dflt.ka_ok != dflt.ka_asked) {
        printf("tls_flood: FAIL: the keep-alive scraper was answered %d times of %d\n", dflt.ka_ok,
               dflt.ka_asked);
        rc = 1;
    }
    free(cert);
    free(key);
    return rc;
}
