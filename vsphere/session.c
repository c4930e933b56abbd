/* session.c: login, keep-alive, re-login and the SOAP calls of one vCenter
 * session, over lib/http on the libuv loop.
 *
 * Every request is a struct vs_call, user calls as well as the session's
 * own (RetrieveServiceContent and Login while logging in, CurrentTime to
 * keep alive or to see whether vCenter still answers under a long poll,
 * Logout when closing). A call is either waiting (for a login) or active
 * (its transfer is in flight); the session keeps both lists, so that
 * closing can end them all.
 *
 * Patience (vs_call_opts.patience_ms): a patient call's transfer may run
 * for patience_ms; the session's patience timer wakes at its due time (its
 * timeout_ms after it was sent), marks it probing and sends one CurrentTime
 * (CK_PROBE) for all the calls probing. Any answer of vCenter's (a fault
 * too) gives each of them another call timeout; no answer gives them up,
 * as a call without patience is at its timeout (VMG_ETRANSPORT).
 */
#include "vsphere/session.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "lib/backoff.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/queue.h"
#include "lib/secretfile.h"
#include "lib/str.h"

#define COOKIE_NAME "vmware_soap_session"
#define COOKIE_MAX 512
/* The SOAPAction version of the requests before ServiceContent tells the
 * server's: every supported vCenter accepts it for RetrieveServiceContent. */
#define BOOTSTRAP_VERSION "6.5"
#define LOGOUT_TIMEOUT_MS 5000
/* TCP keep-alive probes on a connection silent for TCP_KEEPIDLE_S, then
 * every TCP_KEEPINTVL_S (the kernel gives up after tcp_keepalive_probes,
 * 9 by default: 165 s): a connection dropped on the way (a NAT or a
 * firewall forgetting it) fails a long poll that CurrentTime, sent on
 * another connection, would show alive (see "Patience"). */
#define TCP_KEEPIDLE_S 30L
#define TCP_KEEPINTVL_S 15L
#define PROBE_RETRY_MS 1000 /* after a CurrentTime that could not be sent */
#define LOGIN_MAX_RESPONSE (1u << 20)

enum call_kind {
    CK_USER,      /* a caller's call */
    CK_CONTENT,   /* RetrieveServiceContent, first step of a login */
    CK_LOGIN,     /* Login */
    CK_KEEPALIVE, /* CurrentTime */
    CK_LOGOUT,    /* Logout, while closing */
    CK_PROBE,     /* CurrentTime: is vCenter alive under a patient call? */
};

/* CL_ASIDE: taken from the waiting queue by flush_waiting or fail_waiting,
 * whose loop has not reached it yet (a callback before it may cancel it). */
enum call_list { CL_NONE, CL_WAITING, CL_ACTIVE, CL_ASIDE };

struct vs_req {
    vs_session *s;
    struct lq link; /* in s->waiting, s->active or a list aside, per list */
    enum call_list list;
    enum call_kind kind;
    char method[64];
    char *buf;
    size_t len;
    size_t max_response;
    uint64_t timeout_ms;
    uint64_t patience_ms; /* 0: none; else see "Patience" above */
    uint64_t sent;        /* loop ms: when it was last sent */
    uint64_t due;         /* loop ms: a patient call's next probe */
    bool probing;         /* waits for the answer of a probe */
    bool gave_up;         /* canceled for a probe that vCenter did not answer */
    vs_kept_cb kept;      /* told when kept past a probe's answer */
    vs_call_cb cb;
    void *data;
    vmg_http_xfer *xfer;
    unsigned long gen; /* the session generation it was last sent in */
    bool retried;      /* already sent again after NotAuthenticated */
    bool in_cb;
};

struct call_queue {
    struct lq head;
    size_t n;
};

struct vs_session {
    uv_loop_t *loop;
    vmg_http *http;
    char url[VS_URL_MAX];
    char *user;
    char *password;
    size_t password_len;
    char *ca_file;
    bool pinned;
    unsigned char pin[VS_SHA256_LEN];
    bool insecure;
    char *user_agent;
    uint64_t connect_timeout_ms, call_timeout_ms, keepalive_ms, backoff_min_ms, backoff_max_ms;
    uint64_t refused_retry_ms;
    size_t max_waiting;

    enum vs_state state;
    bool closing;
    bool have_content;
    struct vim_service_content content;
    char action[96];         /* SOAPAction for the server's apiVersion */
    char cookie[COOKIE_MAX]; /* "vmware_soap_session=...", "" when none */
    char key[128];           /* the session key */
    unsigned long gen;       /* successful logins */
    bool login_inflight;
    unsigned long password_gen;       /* vs_session_set_password calls that changed it */
    unsigned long login_password_gen; /* password_gen when the login in flight began */
    unsigned attempts;                /* failed logins in a row */
    /* The last login whose session vCenter answered a caller's call in
     * (any answer but NotAuthenticated), and how many logins in a row since had their
     * session refused at once: a vCenter that takes every login and then
     * says NotAuthenticated to every call is logged in to again after a
     * backoff, not once per call. */
    unsigned long served_gen;
    unsigned empty_logins;
    int last_err;
    char last_msg[512];
    uint64_t retry_in_ms;

    struct call_queue waiting; /* FIFO */
    struct call_queue active;
    uint64_t last_activity; /* loop ms of the last request start or end */

    uv_timer_t backoff_timer;
    uv_timer_t keepalive_timer;
    uv_timer_t patience_timer;
    vs_req *probe;       /* the CurrentTime in flight for patient calls */
    char probe_msg[384]; /* why the last probe failed */
    int open_handles;
    unsigned refs; /* vs_session_ref's holders: the memory stays while any */
    void (*closed)(void *data);
    void *closed_data;
    bool logout_inflight;

    vs_state_cb state_cb;
    void *state_data;
    vs_observer obs;
    void *obs_data;
    struct vs_session_stats stats;
};

/* ---- Pure helpers (VC_HOST and the thumbprint: endpoint.c) ---- */

uint64_t vs_backoff_ms(unsigned failures, uint64_t min_ms, uint64_t max_ms)
{
    return vmg_backoff_ms(min_ms, max_ms, failures ? failures - 1 : 0);
}

const char *vs_state_name(enum vs_state st)
{
    switch (st) {
    case VS_STATE_IDLE:
        return "idle";
    case VS_STATE_CONNECTING:
        return "connecting";
    case VS_STATE_READY:
        return "ready";
    case VS_STATE_BACKOFF:
        return "backoff";
    case VS_STATE_CLOSED:
        return "closed";
    }
    return "unknown";
}

/* ---- Queues ---- */

static void q_push(struct call_queue *q, vs_req *c, enum call_list which)
{
    lq_insert_tail(&q->head, &c->link);
    q->n++;
    c->list = which;
}

static void q_remove(struct call_queue *q, vs_req *c)
{
    lq_remove(&c->link);
    q->n--;
    c->list = CL_NONE;
}

/* q_take_all moves every call of q, in order, to the list aside (which
 * must be a head not in use), leaving q empty and the calls CL_ASIDE. */
static void q_take_all(struct call_queue *q, struct lq *aside)
{
    struct lq *l;

    lq_move(&q->head, aside);
    q->n = 0;
    lq_foreach(l, aside) lq_entry(l, vs_req, link)->list = CL_ASIDE;
}

/* aside_pop takes the next call of a list aside, in no list then. */
static vs_req *aside_pop(struct lq *aside)
{
    struct lq *l = lq_pop_head(aside);
    vs_req *c = l ? lq_entry(l, vs_req, link) : NULL;

    if (c)
        c->list = CL_NONE;
    return c;
}

static void unlink_call(vs_req *c)
{
    if (c->list == CL_WAITING) {
        q_remove(&c->s->waiting, c);
    } else if (c->list == CL_ACTIVE) {
        q_remove(&c->s->active, c);
    } else if (c->list == CL_ASIDE) {
        lq_remove(&c->link);
        c->list = CL_NONE;
    }
}

/* ---- Calls ---- */

static void call_free(vs_req *c)
{
    if (!c)
        return;
    soap_buf_free(c->buf, c->len);
    free(c);
}

/* finish ends a call: its callback (user calls) and its memory. */
static void finish(vs_req *c, const struct vs_reply *r)
{
    unlink_call(c);
    if (c->cb) {
        c->in_cb = true;
        c->cb(c->data, r);
    }
    call_free(c);
}

static void finish_err(vs_req *c, int err, const char *msg)
{
    struct vs_reply r = {.err = err, .message = msg ? msg : vmg_strerror(err)};

    finish(c, &r);
}

static void notify(vs_session *s)
{
    struct vs_session_status st = {
        .state = s->state,
        .err = s->last_err,
        .message = s->last_err ? s->last_msg : "",
        .attempts = s->attempts,
        .retry_in_ms = s->state == VS_STATE_BACKOFF ? s->retry_in_ms : 0,
        .logins = s->stats.logins,
    };

    if (s->state_cb && !s->closing)
        s->state_cb(s->state_data, &st);
}

/* pin_verify replaces OpenSSL's chain verification when a thumbprint is
 * pinned: the leaf certificate's SHA-256 must be the pinned one. */
static int pin_verify(X509_STORE_CTX *x, void *arg)
{
    const vs_session *s = arg;
    X509 *leaf = X509_STORE_CTX_get0_cert(x);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;

    if (!leaf || !X509_digest(leaf, EVP_sha256(), md, &mdlen) || mdlen != VS_SHA256_LEN ||
        CRYPTO_memcmp(md, s->pin, VS_SHA256_LEN) != 0) {
        X509_STORE_CTX_set_error(x, X509_V_ERR_CERT_REJECTED);
        return 0;
    }
    X509_STORE_CTX_set_error(x, X509_V_OK);
    return 1;
}

static CURLcode ssl_ctx_pin(CURL *curl, void *ssl_ctx, void *userptr)
{
    SSL_CTX *ctx = ssl_ctx;

    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_cert_verify_callback(ctx, pin_verify, userptr);
    return CURLE_OK;
}

static void on_done(void *data, const struct vmg_http_result *res);

/* apply_tls sets the session's TLS trust on easy: verification against
 * the CA file alone (curl's CA folder, the system's, left out) or the
 * system roots, a pinned certificate, or none with insecure. Returns 0 or
 * VMG_ETRANSPORT (curl built without OpenSSL), verification still on
 * then. */
static int apply_tls(const vs_session *s, CURL *easy)
{
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 2L);
    /* The pin's check first: without it, verification stays on. */
    if (s->pinned && (curl_easy_setopt(easy, CURLOPT_SSL_CTX_FUNCTION, ssl_ctx_pin) != CURLE_OK ||
                      curl_easy_setopt(easy, CURLOPT_SSL_CTX_DATA, (void *)s) != CURLE_OK ||
                      curl_easy_setopt(easy, CURLOPT_SSL_SESSIONID_CACHE, 0L) != CURLE_OK))
        return VMG_ETRANSPORT;
    if (s->insecure || s->pinned) {
        curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
    } else if (s->ca_file) {
        if (curl_easy_setopt(easy, CURLOPT_CAINFO, s->ca_file) != CURLE_OK ||
            curl_easy_setopt(easy, CURLOPT_CAPATH, NULL) != CURLE_OK)
            return VMG_ETRANSPORT;
#if LIBCURL_VERSION_NUM >= 0x075700
        /* Without a CA folder, curl (7.87 and later) would keep the CA
         * file's certificates a day: a CA rotated in the file is read at
         * the next connection instead. */
        (void)curl_easy_setopt(easy, CURLOPT_CA_CACHE_TIMEOUT, 0L);
#endif
    }
    return 0;
}

static void arm_patience(vs_session *s);

/* call_timeout is how long c may take: its own timeout, or the session's. */
static uint64_t call_timeout(const vs_session *s, const vs_req *c)
{
    return c->timeout_ms ? c->timeout_ms : s->call_timeout_ms;
}

/* send_call starts c's transfer and puts it on the active list. A patient
 * call's transfer may take its patience; its first probe is due after its
 * timeout. */
static int send_call(vs_session *s, vs_req *c)
{
    CURL *easy = NULL;
    struct curl_slist *h = NULL, *t;
    char hdr[160];
    const char *action = s->have_content ? s->action : "urn:vim25/" BOOTSTRAP_VERSION;
    uint64_t timeout = call_timeout(s, c);
    uint64_t limit = c->patience_ms ? c->patience_ms : timeout; /* patience > timeout */
    struct vmg_http_send send;
    int r;

    if (limit > LONG_MAX)
        limit = LONG_MAX;

    vmg_putf(hdr, sizeof(hdr), "SOAPAction: %s", action);
    t = curl_slist_append(h, "Content-Type: text/xml; charset=utf-8");
    if (t)
        t = curl_slist_append(h = t, hdr);
    if (t)
        t = curl_slist_append(h = t, "Expect:");
    if (!t) {
        vmg_http_headers_free(h);
        return -ENOMEM;
    }
    h = t;
    easy = curl_easy_init();
    if (!easy) {
        vmg_http_headers_free(h);
        return -ENOMEM;
    }
    if (curl_easy_setopt(easy, CURLOPT_URL, s->url) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_POST, 1L) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_USERAGENT, s->user_agent) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "") != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, (long)s->connect_timeout_ms) !=
            CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)limit) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_TCP_KEEPIDLE, TCP_KEEPIDLE_S) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_TCP_KEEPINTVL, TCP_KEEPINTVL_S) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "https") != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK ||
        (s->cookie[0] && c->kind != CK_CONTENT &&
         curl_easy_setopt(easy, CURLOPT_COOKIE, s->cookie) != CURLE_OK) ||
        apply_tls(s, easy) < 0) {
        vmg_http_headers_free(h);
        curl_easy_cleanup(easy);
        return VMG_ETRANSPORT;
    }
    send = (struct vmg_http_send){.headers = h, .body = c->buf, .body_len = c->len};
    r = vmg_http_start(s->http, easy, &send, c->max_response, NULL, on_done, c, &c->xfer);
    if (r < 0)
        return r;
    c->gen = s->gen;
    q_push(&s->active, c, CL_ACTIVE);
    s->last_activity = c->sent = uv_now(s->loop);
    if (c->patience_ms) {
        c->due = c->sent + timeout;
        c->probing = false;
        arm_patience(s);
    }
    return 0;
}

static vs_req *call_new(vs_session *s, enum call_kind kind, const char *method, char *buf,
                        size_t len, size_t max_response, uint64_t timeout_ms)
{
    vs_req *c = calloc(1, sizeof(*c));

    if (!c) {
        soap_buf_free(buf, len);
        return NULL;
    }
    c->s = s;
    c->kind = kind;
    vmg_putf(c->method, sizeof(c->method), "%s", method);
    c->buf = buf;
    c->len = len;
    c->max_response = max_response ? max_response : VS_CALL_MAX_RESPONSE;
    c->timeout_ms = timeout_ms;
    return c;
}

/* ---- Login ---- */

static void start_login(vs_session *s);
static void arm_keepalive(vs_session *s);

/* flush sends every call that waited for the login just made. */
static void flush_waiting(vs_session *s)
{
    struct lq q;
    vs_req *c;

    q_take_all(&s->waiting, &q);
    while ((c = aside_pop(&q)) != NULL) {
        int r;
        if (s->closing) {
            finish_err(c, VMG_ECANCELED, "the vCenter session is closing");
            continue;
        }
        r = send_call(s, c);
        if (r < 0)
            finish_err(c, r, "could not start a request to vCenter");
    }
}

/* fail_waiting fails every call that waited for a login that failed, with
 * vs_waited_err(err) and the login's sentence (a login's RequestCanceled
 * must not read as the call's); calls their callbacks make wait for the
 * next one. */
static void fail_waiting(vs_session *s, int err, const char *msg)
{
    struct lq q;
    vs_req *c;

    err = vs_waited_err(err);
    q_take_all(&s->waiting, &q);
    while ((c = aside_pop(&q)) != NULL)
        finish_err(c, err, msg);
}

static void on_backoff(uv_timer_t *t)
{
    vs_session *s = t->data;

    if (!s->closing)
        start_login(s);
}

static void login_failed(vs_session *s, int err, const char *msg)
{
    char copy[sizeof(s->last_msg)];

    s->login_inflight = false;
    s->stats.login_failures++;
    s->attempts++;
    s->last_err = err;
    vmg_putf(s->last_msg, sizeof(s->last_msg), "%s", msg);
    vmg_putf(copy, sizeof(copy), "%s", msg);
    if (s->closing)
        return;
    s->state = VS_STATE_BACKOFF;
    s->retry_in_ms = vs_backoff_ms(s->attempts, s->backoff_min_ms, s->backoff_max_ms);
    if (err == VMG_EAUTH && s->login_password_gen != s->password_gen) {
        /* Refused an older password: the new one goes next. */
        s->attempts = 0;
        s->retry_in_ms = s->backoff_min_ms;
    } else if (err == VMG_EAUTH && s->retry_in_ms < s->refused_retry_ms) {
        s->retry_in_ms = s->refused_retry_ms;
    }
    uv_timer_start(&s->backoff_timer, on_backoff, s->retry_in_ms, 0);
    notify(s);
    fail_waiting(s, err, copy);
}

int vs_session_set_password(vs_session *s, const char *password)
{
    int r;

    if (!s)
        return -EINVAL;
    r = vmg_secret_replace(&s->password, password);
    if (r != 0)
        return r;
    s->password_len = strlen(s->password);
    s->password_gen++;
    if (s->state == VS_STATE_BACKOFF && !s->closing) {
        s->attempts = 0;
        start_login(s);
    }
    return 0;
}

static void login_succeeded(vs_session *s)
{
    s->login_inflight = false;
    if (s->gen && s->served_gen != s->gen) {
        s->empty_logins++; /* the session before served nothing: its backoff stays */
    } else {
        s->empty_logins = 0;
        s->attempts = 0;
    }
    s->gen++;
    s->stats.logins++;
    s->last_err = 0;
    s->last_msg[0] = '\0';
    s->state = VS_STATE_READY;
    arm_keepalive(s);
    notify(s);
    flush_waiting(s);
}

/* internal_send sends one of the session's own requests; *ret_call (when
 * not NULL) is the call, until on_done ends it. */
static int internal_send(vs_session *s, enum call_kind kind, const char *method, char *buf,
                         size_t len, uint64_t timeout_ms, vs_req **ret_call)
{
    vs_req *c = call_new(s, kind, method, buf, len, LOGIN_MAX_RESPONSE, timeout_ms);
    int r;

    if (!c)
        return -ENOMEM;
    r = send_call(s, c);
    if (r < 0)
        call_free(c);
    else if (ret_call)
        *ret_call = c;
    return r;
}

static void start_login(vs_session *s)
{
    char *buf = NULL, msg[256];
    size_t len = 0;
    int r;

    if (s->login_inflight || s->closing)
        return;
    uv_timer_stop(&s->backoff_timer);
    s->login_inflight = true;
    s->login_password_gen = s->password_gen;
    s->cookie[0] = '\0';
    s->key[0] = '\0';
    s->state = VS_STATE_CONNECTING;
    notify(s);
    r = vim_req_retrieve_service_content(&buf, &len);
    if (r == 0)
        r = internal_send(s, CK_CONTENT, "RetrieveServiceContent", buf, len, 0, NULL);
    if (r < 0) {
        vmg_putf(msg, sizeof(msg), "could not start a login to vCenter: %s", vmg_strerror(r));
        login_failed(s, r, msg);
    }
}

int vs_session_cookie(const char *v, char *buf, size_t size)
{
    size_t n;

    while (*v == ' ')
        v++;
    if (strncmp(v, COOKIE_NAME "=", sizeof(COOKIE_NAME)) != 0)
        return 1;
    n = strcspn(v, ";");
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (n <= sizeof(COOKIE_NAME) || n >= size)
        return VMG_EPARSE;
    /* It goes back in a Cookie header: a control character (a CR, which
     * ends a header line for some servers) would change the request. */
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
            return VMG_EPARSE;
    memcpy(buf, v, n);
    buf[n] = '\0';
    return 0;
}

/* take_cookie keeps the session cookie of a Login response. */
static int take_cookie(vs_session *s, const vmg_http_xfer *x)
{
    const char *v;

    for (size_t i = 0; (v = vmg_http_xfer_header_nth(x, "set-cookie", i)) != NULL; i++) {
        int r = vs_session_cookie(v, s->cookie, sizeof(s->cookie));
        if (r <= 0)
            return r;
    }
    return VMG_EPARSE;
}

/* describe writes the sentence for a failed request. */
static void describe(char *buf, size_t size, const char *method, int err,
                     const struct soap_fault *f, long status, const char *errmsg)
{
    if (err == VMG_EFAULT && f && !f->message[0])
        vmg_putf(buf, size, "vCenter %s failed: %s", method, f->type);
    else if (err == VMG_EFAULT && f)
        vmg_putf(buf, size, "vCenter %s failed: %s: %s", method, f->type, f->message);
    else if (err == VMG_EHTTP)
        vmg_putf(buf, size, "vCenter %s failed: HTTP status %ld", method, status);
    else if (errmsg && *errmsg)
        vmg_putf(buf, size, "vCenter %s failed: %s: %s", method, vmg_strerror(err), errmsg);
    else
        vmg_putf(buf, size, "vCenter %s failed: %s", method, vmg_strerror(err));
}

/* login_refusal says whether a fault answering Login (other than
 * InvalidLogin itself) refuses these credentials (VMG_EAUTH: a person
 * must act), rather than a vCenter that cannot log anyone in at the
 * moment (a SystemError while its services start, a RequestCanceled),
 * which is retried as any transient failure. InvalidLocale, Login's other
 * documented fault, is not a refusal of the credentials (the operator
 * sends no locale); it is logged as vCenter's and retried. */
static bool login_refusal(const char *type)
{
    static const char *const refusals[] = {
        "PasswordExpired",          /* an InvalidLogin (handled before) */
        "InvalidClientCertificate", /* an InvalidLogin */
        "NoPermission",             /* not in Login's documented faults, and no waiting mends it */
    };

    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++)
        if (strcmp(type, refusals[i]) == 0)
            return true;
    return false;
}

/* login_fault_name is type when it is a fault vim25 names for a login
 * step (or one that refuses it), else "an unknown fault": the type is
 * vCenter's text too (xsi:type, faultcode). */
static const char *login_fault_name(const char *type)
{
    static const char *const known[] = {
        "InvalidLogin",    "PasswordExpired", "InvalidClientCertificate",
        "NoPermission",    "InvalidLocale",   "SystemError",
        "RequestCanceled", "RuntimeFault",    "HostCommunication",
        "InvalidRequest",  "InvalidArgument", "NotAuthenticated",
        "SecurityError",   "NotSupported",    "InvalidState",
    };

    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(type, known[i]) == 0)
            return known[i];
    return "an unknown fault";
}

static void login_step_done(vs_session *s, vs_req *c, const struct vmg_http_result *res, int err,
                            const struct soap_fault *fault, soap_resp *resp)
{
    char msg[512], *buf = NULL;
    size_t len = 0;
    struct soap_fault type_only;
    int r;

    /* A fault's text answering a login step is not repeated, nor a type
     * vim25 does not name: vCenter writes both, and an impostor that has
     * been sent the password once could echo it, cut where the log's
     * masking no longer knows it. */
    if (fault) {
        memset(&type_only, 0, sizeof(type_only));
        vmg_putf(type_only.type, sizeof(type_only.type), "%s", login_fault_name(fault->type));
        fault = &type_only;
    }

    if (err == 0 && c->kind == CK_CONTENT) {
        struct vim_service_content sc;
        r = vim_decode_service_content(resp, &sc);
        if (r == 0 && soap_action(s->action, sizeof(s->action), sc.api_version) < 0)
            r = VMG_EPARSE;
        if (r < 0) {
            vmg_putf(msg, sizeof(msg), "vCenter at %s sent an unreadable ServiceContent", s->url);
            login_failed(s, r, msg);
            return;
        }
        s->content = sc;
        s->have_content = true;
        r = vim_req_login(&sc.session_manager, s->user, s->password, &buf, &len);
        if (r == 0)
            r = internal_send(s, CK_LOGIN, "Login", buf, len, 0, NULL);
        if (r < 0) {
            vmg_putf(msg, sizeof(msg), "could not start a login to vCenter: %s", vmg_strerror(r));
            login_failed(s, r, msg);
        }
        return;
    }
    if (err == 0) { /* Login */
        struct vim_user_session us;
        if (take_cookie(s, res->xfer) < 0 || vim_decode_user_session(resp, &us) < 0) {
            vmg_putf(msg, sizeof(msg), "vCenter at %s accepted the login but sent no session",
                     s->url);
            login_failed(s, VMG_EPARSE, msg);
            return;
        }
        vmg_putf(s->key, sizeof(s->key), "%s", us.key);
        login_succeeded(s);
        return;
    }
    if (err == VMG_EFAULT && c->kind == CK_LOGIN && strcmp(fault->type, "InvalidLogin") == 0) {
        vmg_putf(msg, sizeof(msg),
                 "vCenter refused the login for user %s: incorrect user name or password", s->user);
        login_failed(s, VMG_EAUTH, msg);
        return;
    }
    if (err == VMG_EFAULT && c->kind == CK_LOGIN && login_refusal(fault->type)) {
        vmg_putf(msg, sizeof(msg), "vCenter refused the login for user %s: %s", s->user,
                 fault->type);
        login_failed(s, VMG_EAUTH, msg);
        return;
    }
    describe(msg, sizeof(msg), c->method, err, fault, res->status, res->errmsg);
    if (err == VMG_ETRANSPORT) {
        size_t n = strlen(msg);
        vmg_putf(msg + n, sizeof(msg) - n, " (at %s)", s->url);
    }
    login_failed(s, err, msg);
}

/* ---- Keep-alive ---- */

static void on_keepalive(uv_timer_t *t)
{
    vs_session *s = t->data;
    uint64_t now = uv_now(s->loop), idle_for;
    char *buf = NULL;
    size_t len = 0;

    if (s->closing || s->state != VS_STATE_READY)
        return;
    idle_for = now - s->last_activity;
    if (s->active.n > 0 || idle_for < s->keepalive_ms) {
        arm_keepalive(s);
        return;
    }
    if (vim_req_current_time(&buf, &len) == 0 &&
        internal_send(s, CK_KEEPALIVE, "CurrentTime", buf, len, 0, NULL) == 0)
        s->stats.keepalives++;
    arm_keepalive(s);
}

static void arm_keepalive(vs_session *s)
{
    uint64_t now = uv_now(s->loop), due;

    if (s->keepalive_ms == UINT64_MAX || s->closing)
        return;
    due = s->last_activity + s->keepalive_ms;
    uv_timer_start(&s->keepalive_timer, on_keepalive, due > now ? due - now : s->keepalive_ms, 0);
}

/* ---- Patience ---- */

static void on_patience(uv_timer_t *t);

/* first_probing is the first active call waiting for a probe's answer. */
static vs_req *first_probing(vs_session *s)
{
    struct lq *l;

    lq_foreach(l, &s->active.head)
    {
        vs_req *c = lq_entry(l, vs_req, link);
        if (c->probing)
            return c;
    }
    return NULL;
}

/* arm_patience sets the patience timer to the first due time of the
 * patient calls not probing yet, or stops it when there is none. */
static void arm_patience(vs_session *s)
{
    uint64_t now = uv_now(s->loop), first = UINT64_MAX;
    struct lq *l;

    if (s->closing)
        return;
    lq_foreach(l, &s->active.head)
    {
        vs_req *c = lq_entry(l, vs_req, link);
        if (c->patience_ms && !c->probing && c->due < first)
            first = c->due;
    }
    if (first == UINT64_MAX)
        uv_timer_stop(&s->patience_timer);
    else
        uv_timer_start(&s->patience_timer, on_patience, first > now ? first - now : 0, 0);
}

/* postpone ends the wait of every call probing, its next probe due in
 * delay_ms; when tell, its caller is told that it is kept (vCenter
 * answered). Callbacks may change the list, hence first_probing each
 * time, and c is not read after its own. */
static void postpone(vs_session *s, uint64_t delay_ms, bool tell)
{
    uint64_t now = uv_now(s->loop);
    vs_req *c;

    while ((c = first_probing(s)) != NULL) {
        c->probing = false;
        c->due = now + delay_ms;
        if (tell && c->kept)
            c->kept(c->data, now - c->sent);
    }
}

/* probe_answered ends the wait of every call probing: vCenter answered
 * (alive), and each gets another call timeout; or it did not, and each is
 * given up (on_done finishes it with VMG_ETRANSPORT, s->probe_msg saying
 * why; its callback may change the list, hence first_probing each time). */
static void probe_answered(vs_session *s, bool alive)
{
    vs_req *c;

    if (alive)
        postpone(s, s->call_timeout_ms, true);
    while ((c = first_probing(s)) != NULL) {
        c->probing = false;
        c->gave_up = true;
        vmg_http_cancel(c->xfer); /* on_done runs now and finishes c */
    }
    arm_patience(s);
}

/* on_patience: patient calls are due. Each waits for one CurrentTime's
 * answer, sent now unless one is in flight already: that one's answer,
 * later than now, tells as much, and its failure (within
 * VS_PROBE_TIMEOUT_MS of its sending) gives up every call waiting. */
static void on_patience(uv_timer_t *t)
{
    vs_session *s = t->data;
    uint64_t now = uv_now(s->loop);
    bool due = false;
    char *buf = NULL;
    size_t len = 0;
    struct lq *l;
    vs_req *p = NULL;
    int r;

    if (s->closing)
        return;
    lq_foreach(l, &s->active.head)
    {
        vs_req *c = lq_entry(l, vs_req, link);
        if (c->patience_ms && !c->probing && c->due <= now) {
            c->probing = true;
            due = true;
        }
    }
    if (!due || s->probe) {
        arm_patience(s);
        return;
    }
    r = vim_req_current_time(&buf, &len);
    if (r == 0)
        r = internal_send(s, CK_PROBE, "CurrentTime", buf, len,
                          s->call_timeout_ms < VS_PROBE_TIMEOUT_MS ? s->call_timeout_ms
                                                                   : VS_PROBE_TIMEOUT_MS,
                          &p);
    if (r < 0) {
        /* Not vCenter's doing: no answer either way. Asked again in a
         * second (the patience still bounds the calls). */
        postpone(s, PROBE_RETRY_MS, false);
        arm_patience(s);
        return;
    }
    s->probe = p;
    s->stats.probes++;
    arm_patience(s);
}

/* ---- Completion ---- */

static void close_step(vs_session *s);

static bool is_fault(const struct soap_fault *f, int err, const char *type)
{
    return err == VMG_EFAULT && f && strcmp(f->type, type) == 0;
}

/* relogin_if_lost: a CurrentTime of the session's own (keep-alive, probe)
 * found the session gone at vCenter: log in again, unless a newer login
 * happened meanwhile. */
static void relogin_if_lost(vs_session *s, const vs_req *c, const struct soap_fault *f, int err)
{
    if (is_fault(f, err, "NotAuthenticated") && !s->closing && s->state == VS_STATE_READY &&
        c->gen == s->gen)
        start_login(s);
}

static void on_done(void *data, const struct vmg_http_result *res)
{
    vs_req *c = data;
    vs_session *s = c->s;
    struct soap_fault fault;
    soap_resp *resp = NULL;
    char msg[768], why[512];
    const char *errmsg = res->errmsg;
    int err = res->err;

    c->xfer = NULL;
    unlink_call(c);
    if (c->gave_up) {
        /* Canceled by probe_answered: vCenter answers neither. */
        err = VMG_ETRANSPORT;
        vmg_putf(why, sizeof(why), "no answer in %llu s, nor to a CurrentTime then (%s)",
                 (unsigned long long)((uv_now(s->loop) - c->sent) / 1000), s->probe_msg);
        errmsg = why;
    }
    s->last_activity = uv_now(s->loop);
    s->stats.requests++;
    memset(&fault, 0, sizeof(fault));
    if (err == 0) {
        err = soap_parse(res->body, res->body_len, c->max_response, &resp, &fault);
        if (err < 0 && err != VMG_EFAULT && res->status != 200)
            err = VMG_EHTTP;
    }
    if (s->obs)
        s->obs(s->obs_data, c->method, err, err == VMG_EFAULT ? fault.type : "", res->seconds);
    /* A caller's call only: a CurrentTime of the session's own needs no
     * privilege, and an impostor could answer those alone. */
    if ((err == 0 || (err == VMG_EFAULT && !is_fault(&fault, err, "NotAuthenticated"))) &&
        c->gen == s->gen && c->kind == CK_USER && s->served_gen != s->gen) {
        s->served_gen = s->gen; /* this session serves */
        s->empty_logins = 0;
        s->attempts = 0;
    }

    switch (c->kind) {
    case CK_CONTENT:
    case CK_LOGIN:
        if (err == VMG_ECANCELED || s->closing) {
            s->login_inflight = false;
            call_free(c);
            break;
        }
        login_step_done(s, c, res, err, &fault, resp);
        call_free(c);
        break;
    case CK_KEEPALIVE:
        relogin_if_lost(s, c, &fault, err);
        call_free(c);
        break;
    case CK_LOGOUT:
        call_free(c);
        s->logout_inflight = false;
        close_step(s);
        break;
    case CK_PROBE:
        s->probe = NULL;
        if (err == VMG_ECANCELED || s->closing) {
            call_free(c);
            break;
        }
        /* A fault is an answer: vCenter is alive (and, as for a
         * keep-alive, NotAuthenticated means a new login). */
        relogin_if_lost(s, c, &fault, err);
        if (err != 0 && err != VMG_EFAULT)
            describe(s->probe_msg, sizeof(s->probe_msg), c->method, err, &fault, res->status,
                     errmsg);
        call_free(c);
        probe_answered(s, err == 0 || err == VMG_EFAULT);
        break;
    case CK_USER:
        if (is_fault(&fault, err, "NotAuthenticated") && !c->retried && !s->closing &&
            s->state == VS_STATE_READY && c->gen == s->gen && s->served_gen != s->gen &&
            s->empty_logins > 0) {
            /* The login before this one served nothing either: not once
             * more at once, after a backoff (the call is answered). */
            c->retried = true;
            login_failed(s, VMG_EFAULT,
                         "vCenter refused the calls of two sessions in a row "
                         "(NotAuthenticated) right after their logins");
        }
        if (is_fault(&fault, err, "NotAuthenticated") && !c->retried && !s->closing) {
            /* Log in again (unless a newer login already happened) and
             * send the call once more. */
            c->retried = true;
            if (s->state == VS_STATE_READY && c->gen != s->gen) {
                if (send_call(s, c) == 0)
                    break;
            } else {
                if (s->state == VS_STATE_READY)
                    start_login(s);
                if (s->login_inflight || s->state != VS_STATE_READY) {
                    q_push(&s->waiting, c, CL_WAITING);
                    break;
                }
                if (send_call(s, c) == 0)
                    break;
            }
        }
        {
            struct vs_reply r = {.err = err, .status = res->status};
            if (err == 0) {
                r.message = "";
                r.resp = resp;
            } else {
                describe(msg, sizeof(msg), c->method, err, &fault, res->status, errmsg);
                r.message = msg;
                if (err == VMG_EFAULT)
                    r.fault = &fault;
            }
            finish(c, &r);
        }
        break;
    }
    soap_resp_free(resp);
}

/* ---- Public ---- */

static char *dup_str(const char *s)
{
    return s ? strdup(s) : NULL;
}

vs_session *vs_session_new(uv_loop_t *loop, vmg_http *http, const struct vs_session_config *cfg,
                           int *ret_err, char *err, size_t errlen)
{
    vs_session *s = NULL;
    int r = -EINVAL;

    if (err && errlen)
        err[0] = '\0';
    if (!loop || !http || !cfg) {
        vmg_putf(err, errlen, "no loop, HTTP client or configuration");
        goto fail;
    }
    if (!cfg->user || !*cfg->user) {
        vmg_putf(err, errlen, "VC_USER is empty");
        r = VMG_ECONFIG;
        goto fail;
    }
    if (!cfg->password || !*cfg->password) {
        vmg_putf(err, errlen, "VC_PASS is empty");
        r = VMG_ECONFIG;
        goto fail;
    }
    s = calloc(1, sizeof(*s));
    if (!s) {
        r = -ENOMEM;
        goto fail;
    }
    lq_init(&s->waiting.head);
    lq_init(&s->active.head);
    s->loop = loop;
    s->http = http;
    r = vs_url_build(cfg->host, s->url, sizeof(s->url), err, errlen);
    if (r < 0)
        goto fail;
    if (cfg->thumbprint && *cfg->thumbprint) {
        r = vs_thumbprint_parse(cfg->thumbprint, s->pin, err, errlen);
        if (r < 0)
            goto fail;
        s->pinned = true;
    }
    if (cfg->ca_file && *cfg->ca_file && access(cfg->ca_file, R_OK) != 0) {
        vmg_putf(err, errlen, "the vCenter CA file %.300s cannot be read: %s", cfg->ca_file,
                 strerror(errno));
        r = VMG_ECONFIG;
        goto fail;
    }
    s->insecure = cfg->insecure;
    s->user = dup_str(cfg->user);
    s->password = dup_str(cfg->password);
    s->ca_file = cfg->ca_file && *cfg->ca_file ? dup_str(cfg->ca_file) : NULL;
    s->user_agent = dup_str(cfg->user_agent ? cfg->user_agent : "vmgroup-operator");
    if (!s->user || !s->password || !s->user_agent ||
        (cfg->ca_file && *cfg->ca_file && !s->ca_file)) {
        r = -ENOMEM;
        goto fail;
    }
    s->password_len = strlen(s->password);
    /* Too short a password cannot be masked without masking everything;
     * it is never logged by this module either way. */
    (void)vmg_log_add_secret(s->password);
    s->connect_timeout_ms =
        cfg->connect_timeout_ms ? cfg->connect_timeout_ms : VS_DEFAULT_CONNECT_TIMEOUT_MS;
    s->call_timeout_ms = cfg->call_timeout_ms ? cfg->call_timeout_ms : VS_DEFAULT_CALL_TIMEOUT_MS;
    s->keepalive_ms = cfg->keepalive_ms ? cfg->keepalive_ms : VS_DEFAULT_KEEPALIVE_MS;
    s->backoff_min_ms = cfg->backoff_min_ms ? cfg->backoff_min_ms : VS_DEFAULT_BACKOFF_MIN_MS;
    s->backoff_max_ms = cfg->backoff_max_ms ? cfg->backoff_max_ms : VS_DEFAULT_BACKOFF_MAX_MS;
    if (s->backoff_max_ms < s->backoff_min_ms)
        s->backoff_max_ms = s->backoff_min_ms;
    s->refused_retry_ms =
        cfg->refused_retry_ms ? cfg->refused_retry_ms : VS_DEFAULT_REFUSED_RETRY_MS;
    s->max_waiting = cfg->max_waiting ? cfg->max_waiting : VS_DEFAULT_MAX_WAITING;
    /* uv_timer_init cannot fail: it only fills in the handle. */
    uv_timer_init(loop, &s->backoff_timer);
    uv_timer_init(loop, &s->keepalive_timer);
    uv_timer_init(loop, &s->patience_timer);
    s->open_handles = 3;
    s->backoff_timer.data = s;
    s->keepalive_timer.data = s;
    s->patience_timer.data = s;
    s->last_activity = uv_now(loop);
    return s;
fail:
    if (s) {
        if (s->password)
            OPENSSL_cleanse(s->password, strlen(s->password));
        free(s->password);
        free(s->user);
        free(s->ca_file);
        free(s->user_agent);
        free(s);
    }
    if (ret_err)
        *ret_err = r;
    return NULL;
}

void vs_session_set_state_cb(vs_session *s, vs_state_cb cb, void *data)
{
    if (!s)
        return;
    s->state_cb = cb;
    s->state_data = data;
}

void vs_session_set_observer(vs_session *s, vs_observer obs, void *data)
{
    if (!s)
        return;
    s->obs = obs;
    s->obs_data = data;
}

int vs_session_start(vs_session *s)
{
    if (!s)
        return -EINVAL;
    if (s->closing)
        return VMG_ECANCELED;
    if (s->state == VS_STATE_IDLE)
        start_login(s);
    return 0;
}

int vs_call(vs_session *s, const char *method, char *buf, size_t len,
            const struct vs_call_opts *opts, vs_call_cb cb, void *data, vs_req **ret_call)
{
    vs_req *c;
    int r;

    if (!s || !method || !buf || len == 0 || !cb) {
        soap_buf_free(buf, len);
        return -EINVAL;
    }
    if (s->closing) {
        soap_buf_free(buf, len);
        return VMG_ECANCELED;
    }
    if (s->state != VS_STATE_READY && s->waiting.n >= s->max_waiting) {
        soap_buf_free(buf, len);
        return -ENOSPC;
    }
    c = call_new(s, CK_USER, method, buf, len, opts ? opts->max_response : 0,
                 opts ? opts->timeout_ms : 0);
    if (!c)
        return -ENOMEM;
    c->cb = cb;
    c->data = data;
    /* Patience no longer than the timeout is none. */
    if (opts && opts->patience_ms > call_timeout(s, c)) {
        c->patience_ms = opts->patience_ms;
        c->kept = opts->kept;
    }
    if (s->state == VS_STATE_READY) {
        r = send_call(s, c);
        if (r < 0) {
            call_free(c);
            return r;
        }
    } else {
        q_push(&s->waiting, c, CL_WAITING);
        /* The first login starts from the loop: one that cannot even
         * start fails the calls waiting for it, and cb is never called
         * before vs_call returns. */
        if (s->state == VS_STATE_IDLE && !s->login_inflight)
            uv_timer_start(&s->backoff_timer, on_backoff, 0, 0);
    }
    if (ret_call)
        *ret_call = c;
    return 0;
}

void vs_req_cancel(vs_req *c)
{
    if (!c || c->in_cb)
        return;
    if (c->list == CL_WAITING || c->list == CL_ASIDE) {
        /* (Aside: its turn in flush_waiting's or fail_waiting's loop has
         * not come; it leaves that loop's list.) */
        finish_err(c, VMG_ECANCELED, "the vCenter call was canceled");
        return;
    }
    if (c->xfer)
        vmg_http_cancel(c->xfer); /* on_done runs now and finishes c */
}

const struct vim_service_content *vs_session_content(const vs_session *s)
{
    return s && s->have_content ? &s->content : NULL;
}

uint64_t vs_session_call_timeout_ms(const vs_session *s)
{
    return s ? s->call_timeout_ms : VS_DEFAULT_CALL_TIMEOUT_MS;
}

struct vs_call_opts vs_long_poll_opts(const vs_session *s, int max_wait_seconds)
{
    uint64_t call = vs_session_call_timeout_ms(s);
    uint64_t wait = max_wait_seconds > 0 ? (uint64_t)max_wait_seconds * 1000 : 0;

    return (struct vs_call_opts){.max_response = VS_CALL_MAX_RESPONSE_LARGE,
                                 .timeout_ms = wait + call,
                                 .patience_ms = wait + call * (1 + VS_LONG_POLL_PATIENCE)};
}

unsigned long vs_session_generation(const vs_session *s)
{
    return s ? s->gen : 0;
}

enum vs_state vs_session_state(const vs_session *s)
{
    return s ? s->state : VS_STATE_CLOSED;
}

const char *vs_session_url(const vs_session *s)
{
    return s ? s->url : "";
}

const char *vs_session_user(const vs_session *s)
{
    return s ? s->user : "";
}

void vs_session_key(const vs_session *s, char *buf, size_t size)
{
    if (!buf || size == 0)
        return;
    vmg_putf(buf, size, "%s", s && s->state == VS_STATE_READY ? s->key : "");
}

void vs_session_stats(const vs_session *s, struct vs_session_stats *ret)
{
    if (!s || !ret)
        return;
    *ret = s->stats;
    ret->active = s->active.n;
    ret->waiting = s->waiting.n;
}

/* ---- Closing ---- */

static void free_session(vs_session *s)
{
    void (*closed)(void *) = s->closed;
    void *closed_data = s->closed_data;

    if (s->password)
        OPENSSL_cleanse(s->password, s->password_len);
    OPENSSL_cleanse(s->cookie, sizeof(s->cookie));
    free(s->password);
    free(s->user);
    free(s->ca_file);
    free(s->user_agent);
    free(s);
    if (closed)
        closed(closed_data);
}

static void on_handle_closed(uv_handle_t *h)
{
    vs_session *s = h->data;

    if (--s->open_handles == 0 && s->refs == 0)
        free_session(s);
}

void vs_session_ref(vs_session *s)
{
    if (s)
        s->refs++;
}

void vs_session_unref(void *data)
{
    vs_session *s = data;

    if (s && --s->refs == 0 && s->open_handles == 0)
        free_session(s);
}

/* close_step finishes closing once no logout is in flight. */
static void close_step(vs_session *s)
{
    if (s->logout_inflight)
        return;
    uv_close((uv_handle_t *)&s->backoff_timer, on_handle_closed);
    uv_close((uv_handle_t *)&s->keepalive_timer, on_handle_closed);
    uv_close((uv_handle_t *)&s->patience_timer, on_handle_closed);
}

void vs_session_close(vs_session *s, void (*closed)(void *data), void *data)
{
    bool logged_in;
    char *buf = NULL;
    size_t len = 0;

    if (!s || s->closing)
        return;
    logged_in = s->state == VS_STATE_READY && s->cookie[0];
    s->closing = true;
    s->state = VS_STATE_CLOSED;
    s->closed = closed;
    s->closed_data = data;
    uv_timer_stop(&s->backoff_timer);
    uv_timer_stop(&s->keepalive_timer);
    uv_timer_stop(&s->patience_timer);
    fail_waiting(s, VMG_ECANCELED, "the vCenter session is closing");
    while (!lq_empty(&s->active.head)) {
        vs_req *c = lq_entry(lq_head(&s->active.head), vs_req, link);
        if (c->xfer)
            vmg_http_cancel(c->xfer);
        else
            finish_err(c, VMG_ECANCELED, "the vCenter session is closing");
    }
    /* Calls made by the callbacks above were refused (closing). */
    if (logged_in && s->have_content &&
        vim_req_logout(&s->content.session_manager, &buf, &len) == 0) {
        s->logout_inflight = true;
        if (internal_send(s, CK_LOGOUT, "Logout", buf, len, LOGOUT_TIMEOUT_MS, NULL) < 0)
            s->logout_inflight = false;
    }
    close_step(s);
}

void vs_session_prepare_tls(void *data, CURL *easy)
{
    /* The caller's own start reports a handle that cannot do TLS. */
    (void)apply_tls(data, easy);
}
