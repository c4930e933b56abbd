/* rest.c: the vSphere Automation REST client: session and tagging (see
 * rest.h for the contract; the JSON of requests and responses is made and
 * read in rest_json.c; the tag id cache and the steps of an operation in
 * rest_tags.c).
 *
 * Every operation is a small state machine (struct op). It first makes
 * sure of the category id, then of the tag id (each from memory, else by
 * creating it, else by listing and reading until the name matches), then
 * sends its own request. An op has at most one request at a time; a request
 * waits in the send queue while there is no session (one login runs for
 * all of them) or while max_inflight requests are out. An op that can
 * finish without a request (everything cached) still finishes from the
 * loop: new ops start from a zero timer, never inside the call.
 *
 * Re-entrancy: callbacks may start ops or close the client. An op is
 * unlinked before its callback runs; the client is freed only in the
 * close callback of its timer, so it outlives every stack frame that
 * could still look at it.
 */
#include "vsphere/rest.h"

#include "vsphere/rest_int.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "lib/b64.h"
#include "lib/buf.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/secretfile.h"

/* ---- the client ---- */

static void pump(vs_rest *r);

/* ---- the sticky unavailable state ---- */

void vs__rest_disable(vs_rest *r, const char *fmt, ...)
{
    va_list ap;

    if (r->disabled)
        return;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
    va_end(ap);
    r->disabled = true;
}

bool vs_rest_available(const vs_rest *r)
{
    return r && !r->disabled;
}

const char *vs_rest_disabled_reason(const vs_rest *r)
{
    if (!r)
        return "no REST client";
    return r->disabled ? r->reason : "";
}

unsigned long vs_rest_logins(const vs_rest *r)
{
    return r ? r->logins : 0;
}

int vs_rest_set_password(vs_rest *r, const char *password)
{
    return r ? vmg_secret_replace(&r->password, password) : -EINVAL;
}

void vs_rest_reset(vs_rest *r)
{
    if (!r)
        return;
    r->disabled = false;
    r->reason[0] = '\0';
}

/* ---- ops: queues and finishing ---- */

static void op_unlink(struct op *op)
{
    lq_remove(&op->link);
    op->r->n_ops--;
}

static void queue_push(struct lq *q, struct op *op)
{
    lq_insert_tail(q, &op->qlink);
}

static struct op *queue_pop(struct lq *q)
{
    struct lq *l = lq_pop_head(q);

    return l ? lq_entry(l, struct op, qlink) : NULL;
}

static void op_free(struct op *op)
{
    vs_rest_ids_free(op->ids, op->n_ids);
    free(op->body);
    free(op->tag_desc);
    free(op);
}

/* op_finish unlinks op, calls its callback and frees it. op has no request
 * in flight. */
void vs__rest_op_finish_full(struct op *op, int err, const char *msg, const char *id,
                             const struct vs_rest_object *objs, size_t n)
{
    vs_rest *r = op->r;
    struct vs_rest_result res = {.err = err, .msg = err ? (msg ? msg : vmg_strerror(err)) : ""};

    if (op->queued) {
        if (op->in_runq)
            r->n_runq--;
        lq_remove(&op->qlink);
        op->in_runq = false;
        op->queued = false;
    }
    op_unlink(op);
    if (err == 0) {
        res.id = id;
        res.objects = objs;
        res.n_objects = n;
    }
    op->cb(op->data, &res);
    op_free(op);
}

void vs__rest_op_finish(struct op *op, int err, const char *msg)
{
    vs__rest_op_finish_full(op, err, msg, NULL, NULL, 0);
}

void vs__rest_op_failf(struct op *op, int err, const char *fmt, ...)
{
    char msg[VS_REST_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    vs__rest_op_finish(op, err, msg);
}

void vs__rest_op_unavailable(struct op *op)
{
    vs__rest_op_failf(op, VS_REST_EUNAVAILABLE, "tagging unavailable: %s", op->r->reason);
}

/* ---- requests ---- */

static void on_xfer_done(void *data, const struct vmg_http_result *res);

/* make_easy makes an easy handle for method on url, and in *send its
 * headers, with the session header (when session is not NULL), and its
 * JSON body (POST only: body, or an empty one when NULL), for start_xfer.
 * Returns NULL on failure. */
static CURL *make_easy(vs_rest *r, const char *method, const char *url, const char *session,
                       const char *body, long timeout_ms, struct vmg_http_send *send)
{
    char hv[sizeof(SESSION_HEADER) + VS_REST_ID_MAX + 4];
    struct curl_slist *h = NULL, *t;
    CURL *easy = curl_easy_init();

    if (!easy)
        return NULL;
    t = curl_slist_append(h, "Accept: application/json");
    if (!t)
        goto fail;
    h = t;
    if (body || strcmp(method, "POST") == 0) {
        t = curl_slist_append(h, "Content-Type: application/json");
        if (!t)
            goto fail;
        h = t;
    }
    if (session) {
        snprintf(hv, sizeof(hv), SESSION_HEADER ": %s", session);
        t = curl_slist_append(h, hv);
        OPENSSL_cleanse(hv, sizeof(hv));
        if (!t)
            goto fail;
        h = t;
    }
    if (curl_easy_setopt(easy, CURLOPT_URL, url) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, r->connect_timeout_ms) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK)
        goto fail;
    if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0 &&
        curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method) != CURLE_OK)
        goto fail;
    *send = (struct vmg_http_send){.headers = h};
    if (strcmp(method, "POST") == 0) {
        send->body = body ? body : "";
        send->body_len = strlen(send->body);
    }
    return easy;
fail:
    vmg_http_headers_free(h);
    curl_easy_cleanup(easy);
    return NULL;
}

/* start_xfer prepares and starts easy for x, sending send. Returns 0 or a
 * negative code; on failure easy and the headers are cleaned up and x
 * freed. */
static int start_xfer(vs_rest *r, struct xctx *x, CURL *easy, const struct vmg_http_send *send)
{
    int err;

    if (r->prepare)
        r->prepare(r->prepare_data, easy);
    err = vmg_http_start(r->http, easy, send, r->max_body, NULL, on_xfer_done, x, &x->xfer);
    if (err < 0)
        free(x);
    return err;
}

static void url_of(vs_rest *r, const char *path, char *url, size_t size)
{
    snprintf(url, size, "%s%s", r->base, path);
}

/* send_now sends op's current request. On failure the op is finished. */
static void send_now(struct op *op)
{
    vs_rest *r = op->r;
    char url[BASE_URL_MAX + PATH_MAX_LEN + 8];
    struct xctx *x;
    struct vmg_http_send send;
    CURL *easy;
    int err;

    x = calloc(1, sizeof(*x));
    if (!x) {
        vs__rest_op_finish(op, -ENOMEM, NULL);
        return;
    }
    x->r = r;
    x->op = op;
    x->kind = X_OP;
    x->gen = r->gen;
    url_of(r, op->path, url, sizeof(url));
    easy = make_easy(r, op->method, url, r->session, op->body, r->timeout_ms, &send);
    if (!easy) {
        free(x);
        vs__rest_op_finish(op, -ENOMEM, NULL);
        return;
    }
    op->x = x;
    r->inflight++;
    err = start_xfer(r, x, easy, &send);
    if (err < 0) {
        op->x = NULL;
        r->inflight--;
        vs__rest_op_failf(op, err, "cannot start a vCenter REST request: %s", vmg_strerror(err));
    }
}

/* op_send sets op's request and queues it to be sent. body is taken over
 * (may be NULL). */

void vs__rest_op_send(struct op *op, enum step step, const char *method, char *body,
                      const char *fmt, ...)
{
    vs_rest *r = op->r;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(op->path, sizeof(op->path), fmt, ap);
    va_end(ap);
    free(op->body);
    op->body = body;
    op->step = step;
    op->method = method;
    op->retried = false;
    if (n < 0 || (size_t)n >= sizeof(op->path)) {
        vs__rest_op_finish(op, -EINVAL, "request path too long");
        return;
    }
    op->queued = true;
    queue_push(&r->sendq, op);
    pump(r);
}

/* send_list_tags asks for the ids of the category's tags; the body repeats
 * the category id, as vCenter's own clients send it. */
void vs__rest_send_list_tags(struct op *op)
{
    vs_rest *r = op->r;
    char *body = NULL;
    int err = vs_rest_body_list_tags(r->cat_id, &body);

    if (err < 0) {
        vs__rest_op_finish(op, err, NULL);
        return;
    }
    vs__rest_op_send(op, ST_TAG_LIST, "POST", body,
                     TAG_PATH "/id:%s?~action=list-tags-for-category", r->cat_id);
}

static void fail_sendq(vs_rest *r, int err, const char *msg)
{
    struct op *op;

    while ((op = queue_pop(&r->sendq))) {
        op->queued = false;
        if (err == VS_REST_EUNAVAILABLE)
            vs__rest_op_unavailable(op);
        else
            vs__rest_op_finish(op, err, msg);
    }
}

/* basic_auth appends "Authorization: Basic <base64 of user:password>" to
 * h. Built here rather than by curl (CURLOPT_USERNAME, PASSWORD), which
 * keeps copies of the password it frees unwiped: the list is wiped with
 * the transfer, and the buffers here at once. Returns 0 or -ENOMEM. */
static int basic_auth(const vs_rest *r, struct curl_slist *h)
{
    static const char prefix[] = "Authorization: Basic ";
    const char *pw = r->password ? r->password : "";
    size_t ul = strlen(r->user), pl = strlen(pw), n = ul + 1 + pl;
    size_t hl = sizeof(prefix) + VMG_B64_LEN(n); /* with its NUL */
    char *plain = n < INT_MAX / 2 ? malloc(n) : NULL, *hdr = plain ? malloc(hl) : NULL;
    int rc = -ENOMEM;

    if (hdr) {
        memcpy(plain, r->user, ul);
        plain[ul] = ':';
        memcpy(plain + ul + 1, pw, pl);
        memcpy(hdr, prefix, sizeof(prefix) - 1);
        if (vmg_b64_encode(plain, n, hdr + sizeof(prefix) - 1, hl - (sizeof(prefix) - 1)) >= 0 &&
            curl_slist_append(h, hdr))
            rc = 0;
    }
    vmg_wipe_free(plain, n);
    vmg_wipe_free(hdr, hl);
    return rc;
}

static void start_login(vs_rest *r)
{
    char url[BASE_URL_MAX + PATH_MAX_LEN + 8];
    struct xctx *x;
    struct vmg_http_send send;
    CURL *easy;
    int err = -ENOMEM;

    x = calloc(1, sizeof(*x));
    if (!x)
        goto fail;
    x->r = r;
    x->kind = X_LOGIN;
    url_of(r, SESSION_PATH, url, sizeof(url));
    easy = make_easy(r, "POST", url, NULL, NULL, r->timeout_ms, &send);
    if (!easy) {
        free(x);
        goto fail;
    }
    /* Ask for no cookie: the id travels in the header only. The list
     * keeps its head when appended to. */
    if (!curl_slist_append(send.headers, "vmware-use-header-authn: true") ||
        basic_auth(r, send.headers) < 0) {
        vmg_http_headers_free(send.headers);
        curl_easy_cleanup(easy);
        free(x);
        goto fail;
    }
    r->login = x;
    err = start_xfer(r, x, easy, &send);
    if (err < 0) {
        r->login = NULL;
        goto fail;
    }
    return;
fail:
    fail_sendq(r, err, "cannot start the vCenter REST login");
}

/* pump sends what the send queue holds, as the session and the bound on
 * requests in flight allow, or fails it when tagging is unavailable. */
static void pump(vs_rest *r)
{
    struct op *op;

    if (r->pumping) {
        r->pump_again = true;
        return;
    }
    r->pumping = 1;
    do {
        r->pump_again = false;
        if (r->closing) {
            fail_sendq(r, VMG_ECANCELED, "the vCenter REST client is closing");
        } else if (r->disabled) {
            fail_sendq(r, VS_REST_EUNAVAILABLE, NULL);
        } else if (!r->session[0]) {
            if (!lq_empty(&r->sendq) && !r->login)
                start_login(r);
        } else {
            while (r->inflight < r->max_inflight && !r->closing && r->session[0] &&
                   (op = queue_pop(&r->sendq))) {
                op->queued = false;
                send_now(op);
            }
        }
    } while (r->pump_again);
    r->pumping = 0;
}

static void on_kick(uv_timer_t *t)
{
    vs_rest *r = t->data;
    size_t n = r->n_runq;

    /* Only the ops queued before this run: ops they queue wait for the next. */
    while (n-- > 0 && !r->closing) {
        struct op *op = queue_pop(&r->runq);

        if (!op)
            break;
        r->n_runq--;
        op->in_runq = false;
        op->queued = false;
        vs__rest_op_run(op);
    }
    if (!lq_empty(&r->runq) && !r->closing)
        (void)uv_timer_start(&r->kick, on_kick, 0, 0);
}

/* ---- transfer completions ---- */

static void on_login_done(vs_rest *r, const struct vmg_http_result *res)
{
    char id[VS_REST_ID_MAX + 1];
    char msg[VS_REST_MSG_MAX];
    int err;

    if (res->err == VMG_ECANCELED) {
        fail_sendq(r, VMG_ECANCELED, "the vCenter REST login was canceled");
        return;
    }
    if (res->err < 0) {
        if (!r->ever_logged_in) {
            vs__rest_disable(r, "cannot reach the vCenter REST API at %s: %s", r->base,
                             res->errmsg);
            fail_sendq(r, VS_REST_EUNAVAILABLE, NULL);
        } else {
            snprintf(msg, sizeof(msg), "vCenter REST login failed: %s", res->errmsg);
            fail_sendq(r, res->err, msg);
        }
        return;
    }
    switch (res->status) {
    case 200:
        err = vs_rest_parse_string(res->body, res->body_len, id, sizeof(id));
        if (err < 0) {
            vs__rest_disable(r, "the answer of %s%s to a login is not a session id", r->base,
                             SESSION_PATH);
            break;
        }
        memcpy(r->session, id, sizeof(r->session));
        OPENSSL_cleanse(id, sizeof(id));
        r->gen++;
        r->logins++;
        r->ever_logged_in = true;
        pump(r);
        return;
    case 401:
        vs__rest_disable(r,
                         "vCenter refused the REST login of user %s (HTTP 401): wrong user name or "
                         "password",
                         r->user);
        break;
    case 403:
        vs__rest_disable(r, "vCenter refused the user %s the REST API (HTTP 403)", r->user);
        break;
    case 404:
    case 405:
    case 501:
        vs__rest_disable(r, "no vSphere Automation REST endpoint at %s (HTTP %ld to POST %s)",
                         r->base, res->status, SESSION_PATH);
        break;
    default: {
        char type[64], vmsg[256];

        vs_rest_parse_error(res->body, res->body_len, type, sizeof(type), vmsg, sizeof(vmsg));
        snprintf(msg, sizeof(msg), "vCenter answered HTTP %ld to the REST login%s%s", res->status,
                 vmsg[0] ? ": " : "", vmsg);
        fail_sendq(r, VMG_EHTTP, msg);
        return;
    }
    }
    fail_sendq(r, VS_REST_EUNAVAILABLE, NULL);
}

static void teardown(vs_rest *r);

static void on_xfer_done(void *data, const struct vmg_http_result *res)
{
    struct xctx *x = data;
    vs_rest *r = x->r;
    struct op *op = x->op;
    enum xkind kind = x->kind;
    unsigned gen = x->gen;

    free(x);
    if (kind == X_LOGIN) {
        r->login = NULL;
        on_login_done(r, res);
        return;
    }
    if (kind == X_LOGOUT) {
        r->logout = NULL;
        teardown(r);
        return;
    }
    op->x = NULL;
    r->inflight--;
    if (res->err < 0) {
        vs__rest_op_failf(op, res->err, "vCenter REST %s %s: %s", op->method, op->path,
                          res->errmsg);
    } else if (res->status == 401) {
        if (gen == r->gen)
            OPENSSL_cleanse(r->session, sizeof(r->session));
        if (!op->retried) {
            /* Expired or lost (vCenter restarted): log in, send again. */
            op->retried = true;
            op->queued = true;
            queue_push(&r->sendq, op);
        } else {
            vs__rest_disable(r, "vCenter answered HTTP 401 to %s %s right after a new login",
                             op->method, op->path);
            vs__rest_op_unavailable(op);
        }
    } else {
        vs__rest_on_response(op, res);
    }
    pump(r);
}

/* ---- life cycle ---- */

static void on_kick_closed(uv_handle_t *h)
{
    vs_rest *r = h->data;
    void (*closed)(void *) = r->closed;
    void *closed_data = r->closed_data;
    void (*release)(void *) = r->release;
    void *prepare_data = r->prepare_data;

    vs__rest_cache_clear(r);
    if (r->password) {
        OPENSSL_cleanse(r->password, strlen(r->password));
        free(r->password);
    }
    OPENSSL_cleanse(r->session, sizeof(r->session));
    free(r->user);
    free(r->base);
    free(r->category);
    free(r->category_desc);
    free(r);
    if (release)
        release(prepare_data);
    if (closed)
        closed(closed_data);
}

static void teardown(vs_rest *r)
{
    uv_close((uv_handle_t *)&r->kick, on_kick_closed);
}

vs_rest *vs_rest_new(uv_loop_t *loop, vmg_http *http, const struct vs_rest_options *opts,
                     int *ret_err)
{
    vs_rest *r = NULL;
    size_t blen;
    int err = -EINVAL;

    if (!loop || !http || !opts || !opts->base_url || !opts->user || !opts->user[0] ||
        !opts->password || opts->timeout_ms < 0 || opts->connect_timeout_ms < 0 ||
        opts->max_inflight < 0)
        goto fail;
    if (strncmp(opts->base_url, "https://", 8) != 0 && strncmp(opts->base_url, "http://", 7) != 0)
        goto fail;
    blen = strlen(opts->base_url);
    while (blen > 0 && opts->base_url[blen - 1] == '/')
        blen--;
    if (blen > BASE_URL_MAX - 8)
        goto fail;
    if (!opts->category || !opts->category[0] || strlen(opts->category) > VS_REST_NAME_MAX ||
        (opts->category_description &&
         strlen(opts->category_description) > VS_REST_DESCRIPTION_MAX))
        goto fail;
    err = -ENOMEM;
    r = calloc(1, sizeof(*r));
    if (!r)
        goto fail;
    lq_init(&r->cache);
    lq_init(&r->ops);
    lq_init(&r->runq);
    lq_init(&r->sendq);
    r->loop = loop;
    r->http = http;
    r->base = malloc(blen + sizeof("/rest"));
    if (r->base) {
        memcpy(r->base, opts->base_url, blen);
        memcpy(r->base + blen, "/rest", sizeof("/rest"));
    }
    r->user = strdup(opts->user);
    r->password = strdup(opts->password);
    r->category = strdup(opts->category);
    r->category_desc = strdup(opts->category_description ? opts->category_description : "");
    if (!r->base || !r->user || !r->password || !r->category || !r->category_desc)
        goto fail;
    /* Too short a password cannot be masked (-EINVAL); it is never written
     * anyway. A full registry is not a reason to refuse to work. */
    err = vmg_log_add_secret(opts->password);
    if (err == -ENOMEM)
        goto fail;
    r->prepare = opts->prepare;
    r->prepare_data = opts->prepare_data;
    r->release = opts->release;
    r->multiple = opts->multiple;
    r->timeout_ms = opts->timeout_ms ? opts->timeout_ms : DEFAULT_TIMEOUT_MS;
    r->connect_timeout_ms =
        opts->connect_timeout_ms ? opts->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
    r->max_body = opts->max_body ? opts->max_body : DEFAULT_MAX_BODY;
    r->max_inflight = opts->max_inflight ? opts->max_inflight : DEFAULT_MAX_INFLIGHT;
    err = uv_timer_init(loop, &r->kick);
    if (err < 0)
        goto fail;
    r->kick.data = r;
    return r;
fail:
    if (r) {
        if (r->password) {
            OPENSSL_cleanse(r->password, strlen(r->password));
            free(r->password);
        }
        free(r->user);
        free(r->base);
        free(r->category);
        free(r->category_desc);
        free(r);
    }
    if (ret_err)
        *ret_err = err;
    return NULL;
}

void vs_rest_close(vs_rest *r, void (*closed)(void *data), void *data)
{
    char url[BASE_URL_MAX + PATH_MAX_LEN + 8];
    struct vmg_http_send send;
    struct xctx *x;
    CURL *easy;

    if (!r || r->closing)
        return;
    r->closing = true;
    r->closed = closed;
    r->closed_data = data;
    (void)uv_timer_stop(&r->kick);
    /* Each step removes the head op: a canceled transfer finishes it. */
    while (!lq_empty(&r->ops)) {
        struct op *op = lq_entry(lq_head(&r->ops), struct op, link);

        if (op->x)
            vmg_http_cancel(op->x->xfer);
        else
            vs__rest_op_finish(op, VMG_ECANCELED, "the vCenter REST client was closed");
    }
    lq_init(&r->runq);
    r->n_runq = 0;
    if (r->login)
        vmg_http_cancel(r->login->xfer);
    if (!r->session[0]) {
        teardown(r);
        return;
    }
    x = calloc(1, sizeof(*x));
    if (!x) {
        teardown(r);
        return;
    }
    x->r = r;
    x->kind = X_LOGOUT;
    url_of(r, SESSION_PATH, url, sizeof(url));
    easy = make_easy(r, "DELETE", url, r->session, NULL, LOGOUT_TIMEOUT_MS, &send);
    OPENSSL_cleanse(r->session, sizeof(r->session));
    if (!easy) {
        free(x);
        teardown(r);
        return;
    }
    r->logout = x;
    if (start_xfer(r, x, easy, &send) < 0) {
        r->logout = NULL;
        teardown(r);
    }
}

/* op_new checks the common arguments and makes an op, queued to start from
 * the loop. */
static int op_new(vs_rest *r, enum op_kind kind, bool create, const char *tag, const char *desc,
                  const char *vm, vs_rest_cb cb, void *data)
{
    struct op *op;
    int err;

    if (!r || !cb)
        return -EINVAL;
    if (r->closing)
        return VMG_ECANCELED;
    if (r->disabled)
        return VS_REST_EUNAVAILABLE;
    if (kind != OP_LOGIN && kind != OP_CATEGORY &&
        (!tag || !tag[0] || strlen(tag) > VS_REST_TAG_NAME_MAX))
        return -EINVAL;
    if (desc && strlen(desc) > VS_REST_DESCRIPTION_MAX)
        return -EINVAL;
    if (vm && (!vm[0] || strlen(vm) >= sizeof(op->vm.id)))
        return -EINVAL;
    if (r->n_ops >= VS_REST_MAX_OPS)
        return -EBUSY;
    op = calloc(1, sizeof(*op));
    if (!op)
        return -ENOMEM;
    op->r = r;
    op->kind = kind;
    op->create = create;
    op->cb = cb;
    op->data = data;
    if (tag)
        snprintf(op->tag_name, sizeof(op->tag_name), "%s", tag);
    if (desc) {
        op->tag_desc = strdup(desc);
        if (!op->tag_desc) {
            free(op);
            return -ENOMEM;
        }
    }
    if (vm) {
        snprintf(op->vm.type, sizeof(op->vm.type), "VirtualMachine");
        snprintf(op->vm.id, sizeof(op->vm.id), "%s", vm);
    }
    err = uv_timer_start(&r->kick, on_kick, 0, 0);
    if (err < 0) {
        free(op->tag_desc);
        free(op);
        return err;
    }
    lq_insert_head(&r->ops, &op->link);
    r->n_ops++;
    op->queued = true;
    op->in_runq = true;
    queue_push(&r->runq, op);
    r->n_runq++;
    return 0;
}

int vs_rest_login(vs_rest *r, vs_rest_cb cb, void *data)
{
    return op_new(r, OP_LOGIN, false, NULL, NULL, NULL, cb, data);
}

int vs_rest_ensure_category(vs_rest *r, vs_rest_cb cb, void *data)
{
    return op_new(r, OP_CATEGORY, true, NULL, NULL, NULL, cb, data);
}

int vs_rest_ensure_tag(vs_rest *r, const char *tag, const char *description, vs_rest_cb cb,
                       void *data)
{
    if (!tag)
        return -EINVAL;
    return op_new(r, OP_TAG, true, tag, description, NULL, cb, data);
}

int vs_rest_attach(vs_rest *r, const char *tag, const char *description, const char *vm,
                   vs_rest_cb cb, void *data)
{
    if (!tag || !vm)
        return -EINVAL;
    return op_new(r, OP_ATTACH, true, tag, description, vm, cb, data);
}

int vs_rest_detach(vs_rest *r, const char *tag, const char *vm, vs_rest_cb cb, void *data)
{
    if (!tag || !vm)
        return -EINVAL;
    return op_new(r, OP_DETACH, false, tag, NULL, vm, cb, data);
}

int vs_rest_list_attached(vs_rest *r, const char *tag, vs_rest_cb cb, void *data)
{
    if (!tag)
        return -EINVAL;
    return op_new(r, OP_LIST, false, tag, NULL, NULL, cb, data);
}

int vs_rest_delete_tag(vs_rest *r, const char *tag, vs_rest_cb cb, void *data)
{
    if (!tag)
        return -EINVAL;
    return op_new(r, OP_DELETE, false, tag, NULL, NULL, cb, data);
}
