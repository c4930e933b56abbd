/* kube.c: the Kubernetes API client: a queue of requests in front of
 * lib/http, a token bucket, retries with backoff, exec credential refresh,
 * and the decoding of Status errors.
 *
 * A request lives in exactly one of three lists until its callback: ready
 * (waiting for a token or a credential), delayed (waiting for its retry
 * time, sorted by due time) or in flight (a transfer of lib/http). One
 * timer, the pump, moves delayed requests to ready and sends ready ones as
 * tokens allow; it is the only place that sends, so no callback ever runs
 * from inside the call that queued a request. */
#include "kube/kube.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "lib/backoff.h"
#include "lib/bucket.h"
#include "lib/buf.h"
#include "lib/err.h"
#include "lib/jsonarena.h"
#include "lib/jsonwipe.h"
#include "lib/queue.h"

#ifndef VMG_VERSION
#define VMG_VERSION "dev"
#endif

#define DEFAULT_PAGE_LIMIT 500u
#define MIN_REFRESH_INTERVAL_MS 1000u /* between two exec refreshes */
#define UA_MAX 256
#define HOST_MAX 300

enum where { W_NONE = 0, W_READY, W_DELAYED, W_INFLIGHT, W_DONE };

/* The context of one exec refresh: detached from the client when the
 * client closes first, freed by the refresh's callback. */
struct refresh_ctx {
    kube_client *c;
};

struct kube_client {
    uv_loop_t *loop;
    vmg_http *http;
    kcfg *cfg;
    char ua[UA_MAX];
    char host[HOST_MAX];
    size_t max_response;
    unsigned timeout_ms, connect_timeout_ms;
    unsigned watch_stall_s; /* 0: none */
    int retries;
    unsigned backoff_base_ms, backoff_max_ms;
    size_t max_queued;
    kube_observer observe;
    void *observe_data;

    struct vmg_bucket bucket;
    uint32_t rnd; /* xorshift32 state, for jitter */

    struct lq ready, delayed, inflight; /* of kube_req.link; delayed by due_ms */
    size_t pending;                     /* requests not yet called back */

    uv_timer_t timer;
    uint64_t timer_due; /* when the armed timer fires; UINT64_MAX: not armed */

    struct refresh_ctx *refresh; /* the exec refresh running, or NULL */
    bool refreshed;              /* a refresh ended at last_refresh_ms */
    bool invalidated;            /* a 401 since the last refresh began */
    uint64_t last_refresh_ms;

    bool closing;
    void (*closed)(void *data);
    void *closed_data;
};

struct kube_req {
    kube_client *c;
    struct lq link; /* in the list where says */
    enum where where;
    char method[8];
    char *path; /* as given */
    char *content_type;
    char *body;
    size_t body_len;
    unsigned timeout_ms;
    int retries; /* negative: none */
    kube_line_cb on_line;
    kube_cb cb;
    void *data;

    /* Lists. */
    bool is_list;
    unsigned limit;
    kube_page_cb on_page;
    char *cont;   /* the continue token of the next page, or NULL */
    cJSON *acc;   /* gathered items (no on_page) */
    size_t total; /* bytes of the pages so far */
    /* With on_page, each page is parsed into this arena (lib/jsonarena):
     * its tree is freed whole, leaving no holes among the objects the
     * reader keeps. page is the tree in it, freed with body_free. */
    struct json_arena *arena;
    cJSON *page;

    unsigned attempts; /* exchanges made */
    unsigned retried;  /* retries used (reset per page) */
    bool auth_retried;
    unsigned long cred_gen; /* kcfg_credential_gen when this was sent */
    bool lines_seen;
    bool canceling;      /* kube_cancel is stopping the transfer */
    bool in_page;        /* on_page is running */
    bool cancel_pending; /* kube_cancel was called from on_page */
    bool hurried;        /* sent before the requests that are not (kube_hurry) */
    uint64_t due_ms;
    unsigned retry_after_s;
    vmg_http_xfer *xfer;
};

/* ---- small helpers ---- */

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);

    if (!p)
        return NULL;
    if (n)
        memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static bool idempotent(const char *method)
{
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ||
           strcmp(method, "PUT") == 0 || strcmp(method, "DELETE") == 0 ||
           strcmp(method, "OPTIONS") == 0;
}

/* first is the first request of list q, or NULL. */
static kube_req *first(const struct lq *q)
{
    struct lq *n = lq_head(q);

    return n ? lq_entry(n, kube_req, link) : NULL;
}

static void req_detach(kube_req *r)
{
    lq_remove(&r->link);
    r->where = W_NONE;
}

uint64_t kube_backoff_ms(uint64_t base_ms, uint64_t max_ms, unsigned attempt, double jitter,
                         uint32_t rnd)
{
    return vmg_backoff_jitter(vmg_backoff_ms(base_ms, max_ms, attempt), jitter, rnd);
}

/* ---- the queue and the pump ---- */

static void pump_cb(uv_timer_t *t);

/* arm makes the pump run at due (loop milliseconds) at the latest. */
static void arm(kube_client *c, uint64_t due)
{
    uint64_t now;

    if (c->closing || due >= c->timer_due)
        return;
    now = uv_now(c->loop);
    c->timer_due = due;
    uv_timer_start(&c->timer, pump_cb, due > now ? due - now : 0, 0);
}

cJSON *kube_result_take_body(const struct kube_result *res)
{
    struct kube_result *r = (struct kube_result *)res;
    cJSON *b;

    if (!r)
        return NULL;
    b = r->body;
    r->body = NULL;
    /* A page parsed into the list's arena is freed with it: the caller
     * gets a copy of its own. */
    return b && r->body_borrowed ? cJSON_Duplicate(b, true) : b;
}

/* The outcome of a request, gathered before its callback. */
struct outcome {
    int err;
    long status;
    cJSON *body; /* owned; freed after the callback unless taken */
    const char *raw;
    size_t raw_len;
    int code;
    const char *reason;
    const char *message;
};

static void req_free(kube_req *r)
{
    if (!r)
        return;
    free(r->path);
    free(r->content_type);
    /* A body may carry a secret (a TokenReview carries a bearer token). */
    vmg_wipe_free(r->body, r->body_len);
    free(r->cont);
    cJSON_Delete(r->acc);
    json_arena_free(r->arena);
    free(r);
}

/* body_free frees a response body: the page in the arena, or a tree. */
static void body_free(kube_req *r, cJSON *body)
{
    if (body && body == r->page) {
        json_arena_reset(r->arena);
        r->page = NULL;
        return;
    }
    cJSON_Delete(body);
}

/* finish calls r back with o and frees r. */
static void finish(kube_req *r, struct outcome *o)
{
    kube_client *c = r->c;
    struct kube_result res;

    req_detach(r);
    r->where = W_DONE;
    memset(&res, 0, sizeof(res));
    res.err = o->err;
    res.status = o->status;
    res.body = o->body;
    res.raw = o->raw ? o->raw : "";
    res.raw_len = o->raw ? o->raw_len : 0;
    res.code = o->code;
    res.reason = o->reason ? o->reason : "";
    res.message = o->message ? o->message : "";
    res.retry_after_s = r->retry_after_s;
    res.attempts = r->attempts;
    res.method = r->method;
    res.path = r->path;
    res.body_borrowed = o->body && o->body == r->page;
    if (o->body == r->acc)
        r->acc = NULL;
    c->pending--;
    r->cb(r->data, &res);
    body_free(r, res.body_borrowed ? r->page : res.body);
    req_free(r);
}

static void finish_err(kube_req *r, int err, const char *message)
{
    struct outcome o = {.err = err, .message = message ? message : vmg_strerror(err)};

    finish(r, &o);
}

static void insert_delayed(kube_client *c, kube_req *r)
{
    struct lq *p = lq_tail(&c->delayed);

    /* Sorted by due time; equal times keep their order. */
    while (p && lq_entry(p, kube_req, link)->due_ms > r->due_ms)
        p = lq_prev(&c->delayed, p);
    r->where = W_DELAYED;
    lq_insert_after(p ? p : &c->delayed, &r->link);
    arm(c, first(&c->delayed)->due_ms);
}

/* ready_insert queues r for a token: last, or when r is hurried, after the
 * requests hurried before it. */
static void ready_insert(kube_client *c, kube_req *r)
{
    struct lq *at = &c->ready;

    r->where = W_READY;
    if (!r->hurried) {
        lq_insert_tail(&c->ready, &r->link);
        return;
    }
    for (struct lq *n = lq_head(&c->ready); n && lq_entry(n, kube_req, link)->hurried;
         n = lq_next(&c->ready, n))
        at = n;
    lq_insert_after(at, &r->link);
}

static void make_ready(kube_client *c, kube_req *r)
{
    ready_insert(c, r);
    arm(c, uv_now(c->loop));
}

static int max_retries(const kube_req *r)
{
    return r->retries < 0 ? 0 : r->retries;
}

/* retry puts r back after delay_ms, when it has retries left. */
static bool retry(kube_req *r, uint64_t delay_ms)
{
    kube_client *c = r->c;

    if (c->closing || (int)r->retried >= max_retries(r))
        return false;
    r->retried++;
    r->due_ms = uv_now(c->loop) + delay_ms;
    insert_delayed(c, r);
    return true;
}

static uint64_t backoff(kube_req *r)
{
    kube_client *c = r->c;

    return kube_backoff_ms(c->backoff_base_ms, c->backoff_max_ms, r->retried, 0.5,
                           vmg_xorshift32(&c->rnd));
}

/* ---- sending ---- */

static void on_done(void *data, const struct vmg_http_result *res);

static int on_stream_line(void *data, const char *line, size_t len)
{
    kube_req *r = data;

    r->lines_seen = true;
    /* r may be gone when this returns (the callback may cancel it). */
    return r->on_line(r->data, line, len);
}

/* on_sockopt completes the keepalive of each new connection with what
 * curl 7.88 has no option for: the number of probes (the kernel's default,
 * 9, would stretch the minute to two) and TCP_USER_TIMEOUT, which bounds
 * the time data sent stays unacknowledged, when keepalive probes do not go
 * out. Idle and interval are also set here, so that the order in which
 * curl applies its own options does not matter. Best effort: a socket that
 * refuses one keeps the kernel's default. */
static int on_sockopt(void *data, curl_socket_t fd, curlsocktype purpose)
{
    int on = 1, idle = KUBE_KEEPALIVE_IDLE_S, intvl = KUBE_KEEPALIVE_INTERVAL_S;
    int cnt = KUBE_KEEPALIVE_PROBES;

    (void)data;
    if (purpose != CURLSOCKTYPE_IPCXN)
        return CURL_SOCKOPT_OK;
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
#ifdef TCP_USER_TIMEOUT
    {
        unsigned uto =
            (KUBE_KEEPALIVE_IDLE_S + KUBE_KEEPALIVE_INTERVAL_S * KUBE_KEEPALIVE_PROBES) * 1000u;

        (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto, sizeof(uto));
    }
#endif
    return CURL_SOCKOPT_OK;
}

/* url_of builds the URL of r's next exchange: server, path, and for a list
 * its limit and continue. */
static char *url_of(kube_req *r)
{
    const char *server = kcfg_server(r->c->cfg);
    size_t cap = strlen(server) + KUBE_PATH_MAX + 64 + (r->cont ? 3 * strlen(r->cont) : 0);
    char *url = malloc(cap), lim[16];
    int n;

    if (!url)
        return NULL;
    n = snprintf(url, cap, "%s%s", server, r->path);
    if (n < 0 || (size_t)n >= cap)
        goto toobig;
    if (r->is_list) {
        snprintf(lim, sizeof(lim), "%u", r->limit);
        if (kube_query_add(url, cap, "limit", lim) < 0)
            goto toobig;
        if (r->cont && kube_query_add(url, cap, "continue", r->cont) < 0)
            goto toobig;
    }
    return url;
toobig:
    free(url);
    return NULL;
}

/* send_req starts r's next exchange; on failure returns a negative code and
 * r is where it was (nowhere). */
static int send_req(kube_req *r, const char **errmsg)
{
    kube_client *c = r->c;
    CURL *easy = NULL;
    struct curl_slist *h = NULL, *n;
    struct vmg_http_send send = {0};
    char *url = NULL, ct[160];
    int err;

    *errmsg = NULL;
    easy = curl_easy_init();
    url = url_of(r);
    if (!easy || !url) {
        err = easy ? VMG_ETOOBIG : -ENOMEM;
        goto fail;
    }
    err = kcfg_apply(c->cfg, easy, &h);
    if (err == -EAGAIN) {
        err = VMG_EAUTH;
        *errmsg = "the exec credential plugin has given no credential";
        goto fail;
    }
    if (err < 0)
        goto fail;
    err = -ENOMEM;
    if (!(n = curl_slist_append(h, "Accept: application/json")))
        goto fail;
    h = n;
    if (!(n = curl_slist_append(h, "Expect:")))
        goto fail;
    h = n;
    if (r->content_type) {
        snprintf(ct, sizeof(ct), "Content-Type: %s", r->content_type);
        if (!(n = curl_slist_append(h, ct)))
            goto fail;
        h = n;
    }
    err = VMG_ETRANSPORT;
    if (curl_easy_setopt(easy, CURLOPT_URL, url) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_USERAGENT, c->ua) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_timeout_ms) !=
            CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)r->timeout_ms) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_PIPEWAIT, 1L) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_TCP_KEEPIDLE, (long)KUBE_KEEPALIVE_IDLE_S) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_TCP_KEEPINTVL, (long)KUBE_KEEPALIVE_INTERVAL_S) !=
            CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_SOCKOPTFUNCTION, on_sockopt) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK)
        goto fail;
    /* A stalled watch, as a speed under 1 byte/s: curl checks it once a
     * second, averaged over its last 5 seconds, so the stream fails between
     * watch_stall_s and a few seconds more after its last byte. */
    if (r->on_line && c->watch_stall_s &&
        (curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L) != CURLE_OK ||
         curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, (long)c->watch_stall_s) != CURLE_OK))
        goto fail;
    if (strcmp(r->method, "GET") == 0) {
        if (curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L) != CURLE_OK)
            goto fail;
    } else if (strcmp(r->method, "HEAD") == 0) {
        if (curl_easy_setopt(easy, CURLOPT_NOBODY, 1L) != CURLE_OK)
            goto fail;
    } else {
        if (strcmp(r->method, "POST") != 0 &&
            curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, r->method) != CURLE_OK)
            goto fail;
        /* A POST without a body sends an empty one. */
        if (r->body || strcmp(r->method, "POST") == 0)
            send.body = r->body ? r->body : "";
        send.body_len = r->body_len;
    }
    free(url);
    url = NULL;
    r->attempts++;
    r->where = W_INFLIGHT;
    lq_insert_tail(&c->inflight, &r->link);
    send.headers = h;
    err = vmg_http_start(c->http, easy, &send, c->max_response, r->on_line ? on_stream_line : NULL,
                         on_done, r, &r->xfer);
    /* easy and the headers are taken over in every case */
    if (err < 0) {
        req_detach(r);
        r->xfer = NULL;
        return err;
    }
    return 0;
fail:
    vmg_http_headers_free(h);
    curl_easy_cleanup(easy);
    free(url);
    return err;
}

static void on_refreshed(void *data, int err, const char *msg);

/* start_refresh runs the exec plugin; the ready requests wait for it. */
static int start_refresh(kube_client *c)
{
    struct refresh_ctx *ctx = malloc(sizeof(*ctx));
    int r;

    if (!ctx)
        return -ENOMEM;
    ctx->c = c;
    r = kcfg_exec_refresh(c->cfg, c->loop, on_refreshed, ctx);
    if (r < 0) {
        free(ctx);
        return r;
    }
    c->refresh = ctx;
    return 0;
}

static void fail_ready(kube_client *c, int err, const char *msg)
{
    while (!lq_empty(&c->ready))
        finish_err(first(&c->ready), err, msg);
}

static void on_refreshed(void *data, int err, const char *msg)
{
    struct refresh_ctx *ctx = data;
    kube_client *c = ctx->c;

    free(ctx);
    if (!c)
        return;
    c->refresh = NULL;
    c->refreshed = true;
    c->last_refresh_ms = uv_now(c->loop);
    if (err < 0) {
        char m[KUBE_MESSAGE_MAX];

        kube_copy_str(m, sizeof(m), msg ? msg : vmg_strerror(err));
        fail_ready(c, err, m);
    }
    arm(c, uv_now(c->loop));
}

static void pump(kube_client *c)
{
    uint64_t now = uv_now(c->loop);

    while (first(&c->delayed) && first(&c->delayed)->due_ms <= now) {
        kube_req *r = first(&c->delayed);

        req_detach(r);
        ready_insert(c, r);
    }
    if (!lq_empty(&c->ready) && !c->refresh && kcfg_has_exec(c->cfg) &&
        kcfg_needs_refresh(c->cfg, time(NULL)) &&
        (!c->refreshed || c->invalidated || now - c->last_refresh_ms >= MIN_REFRESH_INTERVAL_MS)) {
        int err;

        c->invalidated = false;
        err = start_refresh(c);

        if (err < 0)
            fail_ready(c, err, "cannot run the exec credential plugin");
    }
    while (!lq_empty(&c->ready) && !c->refresh && !c->closing) {
        kube_req *r = first(&c->ready);
        uint64_t wait = vmg_bucket_take(&c->bucket, now);
        const char *msg;
        int err;

        if (wait) {
            arm(c, now + wait);
            break;
        }
        req_detach(r);
        err = send_req(r, &msg);
        /* Taken after send_req, whose kcfg_apply may read a token file
         * anew: the count of the credential the request carries. */
        r->cred_gen = kcfg_credential_gen(c->cfg);
        if (err < 0)
            finish_err(r, err, msg);
    }
    if (!lq_empty(&c->delayed))
        arm(c, first(&c->delayed)->due_ms);
}

static void pump_cb(uv_timer_t *t)
{
    kube_client *c = t->data;

    c->timer_due = UINT64_MAX;
    pump(c);
}

/* ---- completion ---- */

static bool sent_nothing(const struct vmg_http_result *res)
{
    curl_off_t pre = 0;
    CURL *easy = vmg_http_xfer_easy(res->xfer);

    if (!easy || curl_easy_getinfo(easy, CURLINFO_PRETRANSFER_TIME_T, &pre) != CURLE_OK)
        return false;
    return pre == 0;
}

/* cert_refused tells whether TLS verification failed: trying again cannot
 * help. */
static bool cert_refused(const struct vmg_http_result *res)
{
    long v = 0;
    CURL *easy = vmg_http_xfer_easy(res->xfer);

    return easy && curl_easy_getinfo(easy, CURLINFO_SSL_VERIFYRESULT, &v) == CURLE_OK && v != 0;
}

static bool is_json(const struct vmg_http_result *res)
{
    const char *ct = vmg_http_xfer_header(res->xfer, "Content-Type");

    if (ct)
        return strstr(ct, "json") != NULL;
    return res->body_len > 0 && (res->body[0] == '{' || res->body[0] == '[');
}

/* next_page handles one page of a list; returns true when r went on. */
static bool next_page(kube_req *r, struct outcome *o)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(o->body, "metadata");
    const cJSON *cv =
        cJSON_IsObject(meta) ? cJSON_GetObjectItemCaseSensitive(meta, "continue") : NULL;
    const char *cont = cJSON_IsString(cv) && cv->valuestring ? cv->valuestring : NULL;
    cJSON *items;

    r->total += o->raw_len;
    if (!cJSON_IsObject(o->body)) {
        o->err = VMG_EPARSE;
        o->message = "a page of the list is not an object";
        return false;
    }
    if (r->on_page) {
        int rc;

        r->in_page = true;
        rc = r->on_page(r->data, o->body);
        r->in_page = false;
        if (rc != 0 || r->cancel_pending || r->c->closing) {
            o->err = rc < 0 ? rc : VMG_ECANCELED;
            o->message = vmg_strerror(o->err);
            return false;
        }
    } else {
        if (r->total > KUBE_LIST_MAX_TOTAL) {
            o->err = VMG_ETOOBIG;
            o->message = "the list is larger than the client's bound";
            return false;
        }
        items = cJSON_GetObjectItemCaseSensitive(o->body, "items");
        if (!r->acc) {
            if (!cJSON_IsArray(items) && !cJSON_AddArrayToObject(o->body, "items")) {
                o->err = -ENOMEM;
                return false;
            }
            r->acc = o->body;
            o->body = NULL;
        } else if (cJSON_IsArray(items)) {
            cJSON *dst = cJSON_GetObjectItemCaseSensitive(r->acc, "items");
            cJSON *it;

            while ((it = cJSON_DetachItemFromArray(items, 0)) != NULL)
                cJSON_AddItemToArray(dst, it);
        }
    }
    if (!cont || !*cont) {
        if (!r->on_page) {
            cJSON *m = cJSON_GetObjectItemCaseSensitive(r->acc, "metadata");

            cJSON_Delete(o->body);
            o->body = r->acc;
            cJSON_DeleteItemFromObjectCaseSensitive(m, "continue");
            cJSON_DeleteItemFromObjectCaseSensitive(m, "remainingItemCount");
        }
        return false;
    }
    free(r->cont);
    r->cont = strdup(cont);
    if (!r->cont) {
        o->err = -ENOMEM;
        return false;
    }
    body_free(r, o->body);
    o->body = NULL;
    r->retried = 0;
    r->auth_retried = false;
    make_ready(r->c, r);
    return true;
}

static void on_done(void *data, const struct vmg_http_result *res)
{
    kube_req *r = data;
    kube_client *c = r->c;
    struct outcome o = {.status = res->status, .raw = res->body, .raw_len = res->body_len};
    struct kube_status st;
    const char *ra;
    char msg[KUBE_MESSAGE_MAX];

    req_detach(r);
    r->xfer = NULL;
    if (c->observe)
        c->observe(c->observe_data, r->method, c->host, res->status, res->err, res->seconds);
    r->retry_after_s = 0;
    ra = res->status ? vmg_http_xfer_header(res->xfer, "Retry-After") : NULL;
    if (ra && kube_parse_retry_after(ra, time(NULL), &r->retry_after_s) < 0)
        r->retry_after_s = 0;

    if (res->err) {
        bool safe = idempotent(r->method) || sent_nothing(res);

        if (res->err == VMG_ETRANSPORT && !c->closing && !r->canceling && !r->on_line && safe &&
            !cert_refused(res) && retry(r, backoff(r)))
            return;
        kube_copy_str(msg, sizeof(msg), res->errmsg);
        o.err = res->err;
        o.message = msg;
        o.raw = NULL;
        finish(r, &o);
        return;
    }
    if (res->status == 401 && !r->auth_retried && !c->closing) {
        /* Only the credential this request carried is known bad: one
         * refused before a refresh ended (of this client, or of another
         * sharing the configuration) must not throw the new one away. */
        if (r->cred_gen == kcfg_credential_gen(c->cfg)) {
            kcfg_invalidate(c->cfg);
            c->invalidated = true;
        }
        r->auth_retried = true;
        make_ready(c, r);
        return;
    }
    if ((res->status == 429 || (res->status >= 500 && res->status < 600)) && !r->lines_seen) {
        /* A stream is retried on 429 only: its caller has its own policy. */
        bool may = res->status == 429 || (!r->on_line && (ra || idempotent(r->method)));

        if (may && retry(r, r->retry_after_s ? r->retry_after_s * 1000ull : backoff(r)))
            return;
    }
    if (res->body_len > 0 && r->is_list && r->on_page && res->status >= 200 && res->status < 300 &&
        is_json(res) && (r->arena || (r->arena = json_arena_new()) != NULL)) {
        json_arena_reset(r->arena);
        r->page = o.body = json_arena_parse(r->arena, res->body, res->body_len);
    } else if (res->body_len > 0 && (is_json(res) || res->status >= 300)) {
        o.body = json_parse_secret(res->body, res->body_len); /* a Secret, say */
    }
    if (res->status >= 200 && res->status < 300) {
        if (res->body_len > 0 && !o.body && is_json(res)) {
            o.err = VMG_EPARSE;
            o.message = "the response is not valid JSON";
        } else if (r->is_list) {
            if (next_page(r, &o))
                return;
        }
        finish(r, &o);
        return;
    }
    kube_status_decode(o.body, res->status, &st);
    if (st.retry_after_s && !r->retry_after_s)
        r->retry_after_s = st.retry_after_s;
    o.err = st.err ? st.err : VMG_EHTTP;
    o.code = st.code;
    o.reason = st.reason;
    o.message = st.message;
    if (!st.message[0]) {
        snprintf(msg, sizeof(msg), "HTTP status %ld", res->status);
        o.message = msg;
    }
    finish(r, &o);
}

/* ---- the public side ---- */

int kube_client_new(uv_loop_t *loop, vmg_http *http, kcfg *cfg, const struct kube_client_opts *opts,
                    kube_client **ret)
{
    struct kube_client_opts o;
    kube_client *c;
    CURLU *u;

    if (!loop || !http || !cfg || !ret)
        return -EINVAL;
    if (opts)
        o = *opts;
    else
        memset(&o, 0, sizeof(o));
    if (o.backoff_base_ms && o.backoff_max_ms && o.backoff_max_ms < o.backoff_base_ms)
        return -EINVAL;
    if (o.user_agent && strlen(o.user_agent) >= UA_MAX)
        return -EINVAL;
    if (o.max_response >= SIZE_MAX / 4)
        return -EINVAL;
    c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->loop = loop;
    c->http = http;
    c->cfg = cfg;
    lq_init(&c->ready);
    lq_init(&c->delayed);
    lq_init(&c->inflight);
    if (o.user_agent)
        kube_copy_str(c->ua, sizeof(c->ua), o.user_agent);
    else
        snprintf(c->ua, sizeof(c->ua), "%s/%s", KUBE_AGENT, VMG_VERSION);
    c->max_response = o.max_response ? o.max_response : KUBE_DEFAULT_MAX_RESPONSE;
    c->timeout_ms = o.timeout_ms ? o.timeout_ms : KUBE_DEFAULT_TIMEOUT_MS;
    c->connect_timeout_ms =
        o.connect_timeout_ms ? o.connect_timeout_ms : KUBE_DEFAULT_CONNECT_TIMEOUT_MS;
    c->watch_stall_s = (unsigned)((o.watch_stall_ms + 999ull) / 1000u);
    c->retries = o.retries == 0 ? KUBE_DEFAULT_RETRIES : o.retries < 0 ? -1 : o.retries;
    c->backoff_base_ms = o.backoff_base_ms ? o.backoff_base_ms : KUBE_DEFAULT_BACKOFF_BASE_MS;
    c->backoff_max_ms = o.backoff_max_ms ? o.backoff_max_ms : KUBE_DEFAULT_BACKOFF_MAX_MS;
    if (c->backoff_max_ms < c->backoff_base_ms)
        c->backoff_max_ms = c->backoff_base_ms;
    c->max_queued = o.max_queued ? o.max_queued : KUBE_DEFAULT_MAX_QUEUED;
    c->observe = o.observe;
    c->observe_data = o.observe_data;
    vmg_bucket_init(&c->bucket, o.qps == 0 ? KUBE_DEFAULT_QPS : o.qps,
                    o.burst ? o.burst : KUBE_DEFAULT_BURST, uv_now(loop));
    c->rnd = (uint32_t)(uv_hrtime() ^ ((uint64_t)getpid() << 16)) | 1u;
    c->timer_due = UINT64_MAX;

    u = curl_url();
    if (u && curl_url_set(u, CURLUPART_URL, kcfg_server(cfg), 0) == CURLUE_OK) {
        char *host = NULL, *port = NULL;

        if (curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK && host) {
            if (curl_url_get(u, CURLUPART_PORT, &port, 0) == CURLUE_OK && port)
                snprintf(c->host, sizeof(c->host), "%s:%s", host, port);
            else
                kube_copy_str(c->host, sizeof(c->host), host);
        }
        curl_free(host);
        curl_free(port);
    }
    curl_url_cleanup(u);

    if (uv_timer_init(loop, &c->timer) < 0) {
        free(c);
        return -ENOMEM;
    }
    c->timer.data = c;
    *ret = c;
    return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
    kube_client *c = h->data;
    void (*closed)(void *data) = c->closed;
    void *data = c->closed_data;

    free(c);
    if (closed)
        closed(data);
}

void kube_client_close(kube_client *c, void (*closed)(void *data), void *data)
{
    if (!c || c->closing)
        return;
    c->closing = true;
    c->closed = closed;
    c->closed_data = data;
    if (c->refresh) {
        c->refresh->c = NULL;
        c->refresh = NULL;
    }
    for (;;) {
        kube_req *r = first(&c->inflight) ? first(&c->inflight)
                      : first(&c->ready)  ? first(&c->ready)
                                          : first(&c->delayed);

        if (!r)
            break;
        kube_cancel(r);
    }
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_timer_closed);
}

const char *kube_client_host(const kube_client *c)
{
    return c ? c->host : "";
}

size_t kube_client_pending(const kube_client *c)
{
    return c ? c->pending : 0;
}

void kube_cancel(kube_req *r)
{
    if (!r || r->where == W_DONE)
        return;
    if (r->in_page) {
        r->cancel_pending = true;
        return;
    }
    switch (r->where) {
    case W_INFLIGHT:
        r->canceling = true;
        /* Its done callback runs now and finishes it. */
        vmg_http_cancel(r->xfer);
        break;
    case W_READY:
    case W_DELAYED:
        finish_err(r, VMG_ECANCELED, NULL);
        break;
    default:
        /* Between two steps of its own completion: nothing to stop. */
        break;
    }
}

static bool method_ok(const char *m)
{
    size_t n = 0;

    for (; m[n]; n++)
        if (m[n] < 'A' || m[n] > 'Z')
            return false;
    return n > 0 && n < 8;
}

static int submit(kube_client *c, const char *method, const char *path, const char *content_type,
                  const char *body, size_t body_len, const struct kube_req_opts *o, kube_cb cb,
                  void *data, bool is_list, unsigned limit, kube_page_cb on_page,
                  kube_req **ret_req)
{
    kube_req *r;
    size_t plen;

    if (!c || !method || !path || !cb || !method_ok(method) || path[0] != '/')
        return -EINVAL;
    plen = strlen(path);
    if (plen > KUBE_PATH_MAX || (body_len && !body) || (content_type && strlen(content_type) > 128))
        return -EINVAL;
    if (body_len > c->max_response)
        return VMG_ETOOBIG;
    if (c->closing)
        return VMG_ECANCELED;
    if (c->pending >= c->max_queued)
        return -ENOSPC;
    r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->c = c;
    kube_copy_str(r->method, sizeof(r->method), method);
    r->path = dup_n(path, plen);
    if (content_type)
        r->content_type = strdup(content_type);
    if (body)
        r->body = dup_n(body, body_len);
    if (!r->path || (content_type && !r->content_type) || (body && !r->body)) {
        req_free(r);
        return -ENOMEM;
    }
    r->body_len = body_len;
    r->timeout_ms = o && o->timeout_ms ? o->timeout_ms : c->timeout_ms;
    r->retries = o && o->retries ? (o->retries < 0 ? -1 : o->retries) : c->retries;
    r->on_line = o ? o->on_line : NULL;
    r->cb = cb;
    r->data = data;
    r->is_list = is_list;
    r->limit = limit ? limit : DEFAULT_PAGE_LIMIT;
    r->on_page = on_page;
    c->pending++;
    make_ready(c, r);
    if (ret_req)
        *ret_req = r;
    return 0;
}

int kube_request_ex(kube_client *c, const char *method, const char *path, const char *content_type,
                    const char *body, size_t body_len, const struct kube_req_opts *o, kube_cb cb,
                    void *data, kube_req **ret_req)
{
    return submit(c, method, path, content_type, body, body_len, o, cb, data, false, 0, NULL,
                  ret_req);
}

int kube_request(kube_client *c, const char *method, const char *path, const char *content_type,
                 const char *body, kube_cb cb, void *data)
{
    return submit(c, method, path, content_type, body, body ? strlen(body) : 0, NULL, cb, data,
                  false, 0, NULL, NULL);
}

int kube_get(kube_client *c, const char *path, kube_cb cb, void *data)
{
    return kube_request(c, "GET", path, NULL, NULL, cb, data);
}

/* encode_submit sends obj (NULL: no body) encoded as JSON of content_type. */
static int encode_submit(kube_client *c, const char *method, const char *path,
                         const char *content_type, const cJSON *obj, const struct kube_req_opts *o,
                         kube_cb cb, void *data, kube_req **ret_req)
{
    char *text = NULL;
    size_t len;
    int r;

    if (obj && !(text = cJSON_PrintUnformatted(obj)))
        return -ENOMEM;
    len = text ? strlen(text) : 0;
    r = submit(c, method, path, text ? content_type : NULL, text, len, o, cb, data, false, 0, NULL,
               ret_req);
    /* submit keeps a copy of its own, wiped when the request is freed; the
     * text is wiped as well, as any body may carry a secret. */
    if (text)
        vmg_wipe(text, len);
    cJSON_free(text);
    return r;
}

int kube_send_once(kube_client *c, const char *method, const char *path, const char *content_type,
                   const cJSON *obj, uint64_t timeout_ms, kube_cb cb, void *data,
                   kube_req **ret_req)
{
    struct kube_req_opts o = {
        .timeout_ms =
            timeout_ms > UINT32_MAX ? UINT32_MAX : (unsigned)(timeout_ms ? timeout_ms : 1),
        .retries = -1,
    };

    return encode_submit(c, method, path, content_type, obj, &o, cb, data, ret_req);
}

/* send_json encodes obj and sends it with method and content type. */
static int send_json(kube_client *c, const char *method, const char *path, const char *sub,
                     const char *content_type, const cJSON *obj, kube_cb cb, void *data,
                     kube_req **ret_req)
{
    char full[KUBE_PATH_MAX + 16];
    int r;

    if (!c || !path || (!obj && strcmp(method, "DELETE") != 0))
        return -EINVAL;
    if (sub) {
        if (strchr(path, '?'))
            return -EINVAL;
        r = snprintf(full, sizeof(full), "%s/%s", path, sub);
        if (r < 0 || (size_t)r >= sizeof(full))
            return -EINVAL;
        path = full;
    }
    return encode_submit(c, method, path, content_type, obj, NULL, cb, data, ret_req);
}

int kube_create(kube_client *c, const char *path, const cJSON *obj, kube_cb cb, void *data)
{
    return send_json(c, "POST", path, NULL, "application/json", obj, cb, data, NULL);
}

int kube_update(kube_client *c, const char *path, const cJSON *obj, kube_cb cb, void *data)
{
    return send_json(c, "PUT", path, NULL, "application/json", obj, cb, data, NULL);
}

int kube_merge_patch(kube_client *c, const char *path, const cJSON *patch, kube_cb cb, void *data,
                     kube_req **ret_req)
{
    return send_json(c, "PATCH", path, NULL, "application/merge-patch+json", patch, cb, data,
                     ret_req);
}

int kube_json_patch(kube_client *c, const char *path, const cJSON *ops, kube_cb cb, void *data,
                    kube_req **ret_req)
{
    if (!cJSON_IsArray(ops))
        return -EINVAL;
    return send_json(c, "PATCH", path, NULL, "application/json-patch+json", ops, cb, data, ret_req);
}

int kube_delete(kube_client *c, const char *path, const cJSON *options, kube_cb cb, void *data)
{
    return send_json(c, "DELETE", path, NULL, "application/json", options, cb, data, NULL);
}

int kube_update_status(kube_client *c, const char *path, const cJSON *obj, kube_cb cb, void *data)
{
    return send_json(c, "PUT", path, "status", "application/json", obj, cb, data, NULL);
}

int kube_merge_patch_status(kube_client *c, const char *path, const cJSON *patch, kube_cb cb,
                            void *data, kube_req **ret_req)
{
    return send_json(c, "PATCH", path, "status", "application/merge-patch+json", patch, cb, data,
                     ret_req);
}

/* unsent says whether r waits to be sent (0): for the rate limit, or for
 * a retry after an answer that is to be tried again; -EBUSY once it is
 * out, -EINVAL for no request. */
static int unsent(const kube_req *r)
{
    if (!r)
        return -EINVAL;
    return !r->in_page && (r->where == W_READY || r->where == W_DELAYED) ? 0 : -EBUSY;
}

int kube_rebody(kube_req *r, const cJSON *obj)
{
    char *text;
    size_t len;

    int e;

    if (!r || !obj || !r->body)
        return -EINVAL;
    if ((e = unsent(r)) < 0)
        return e;
    text = cJSON_PrintUnformatted(obj);
    if (!text)
        return -ENOMEM;
    len = strlen(text);
    if (len > r->c->max_response) {
        vmg_wipe_free(text, len);
        return VMG_ETOOBIG;
    }
    vmg_wipe_free(r->body, r->body_len);
    r->body = text;
    r->body_len = len;
    return 0;
}

int kube_hurry(kube_req *r)
{
    int e = unsent(r);

    if (e < 0)
        return e;
    if (r->hurried)
        return 0;
    r->hurried = true;
    if (r->where == W_READY) {
        req_detach(r);
        ready_insert(r->c, r);
    }
    return 0;
}

int kube_unsend(kube_req *r)
{
    int e = unsent(r);

    if (e < 0)
        return e;
    finish_err(r, VMG_ECANCELED, NULL);
    return 0;
}

int kube_list(kube_client *c, const char *path, unsigned limit, kube_page_cb on_page, kube_cb cb,
              void *data, kube_req **ret_req)
{
    return submit(c, "GET", path, NULL, NULL, 0, NULL, cb, data, true, limit, on_page, ret_req);
}

int kube_watch(kube_client *c, const char *path, unsigned timeout_ms, kube_line_cb on_line,
               kube_cb cb, void *data, kube_req **ret_req)
{
    struct kube_req_opts o = {.timeout_ms = timeout_ms, .on_line = on_line};

    if (!on_line)
        return -EINVAL;
    return submit(c, "GET", path, NULL, NULL, 0, &o, cb, data, false, 0, NULL, ret_req);
}
