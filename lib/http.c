/* http.c: libcurl's multi interface driven by a libuv loop.
 *
 * curl tells, through its socket callback, which sockets to watch for what;
 * each watched socket gets a uv_poll handle whose events go back to curl
 * with curl_multi_socket_action(). curl's timer callback only (re)arms one
 * uv_timer, whose expiry is also reported with curl_multi_socket_action().
 * After every such call, finished transfers are read from
 * curl_multi_info_read() and their done callbacks run.
 *
 * Re-entrancy: user callbacks (on_line, done) may call back into this
 * module. curl forbids calling the multi API from inside its callbacks, and
 * a transfer must not be freed while a callback of ours still uses it, so:
 * - every entry point holds h (a depth count) while it runs;
 * - finishing a transfer only marks it done and calls its done callback;
 *   removing it from curl and freeing it ("reaping") waits until the
 *   outermost entry point lets go of h, as does adding transfers started
 *   from inside a curl callback, and the final teardown after
 *   vmg_http_close().
 * Memory of h and of watched sockets is freed in uv_close callbacks only.
 */
#include "lib/http.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/buf.h"
#include "lib/err.h"
#include "lib/queue.h"

enum xfer_state {
    XS_PENDING, /* started from inside a curl callback; not yet added */
    XS_ACTIVE,  /* added to the multi handle */
    XS_DONE,    /* done has run (or runs now); waiting to be reaped */
};

enum body_mode {
    BM_UNSET,  /* no body byte seen yet */
    BM_BUFFER, /* the body is collected in body */
    BM_STREAM, /* body holds the current, incomplete line */
};

struct vmg_http_xfer {
    vmg_http *h;
    CURL *easy;
    struct lq link; /* in h->xfers */
    enum xfer_state state;
    bool added; /* curl_multi_add_handle succeeded, not yet removed */
    vmg_http_line_cb on_line;
    vmg_http_done_cb done;
    void *data;
    enum body_mode mode;
    struct vmg_buf body; /* at most max_body bytes, wiped */
    /* Headers of the current response, each "name\0value\0". */
    char *hdrs[VMG_HTTP_MAX_HEADERS];
    size_t nhdrs;
    size_t hdr_bytes;
    /* An error found by our callbacks, which made curl stop the transfer. */
    int fail;
    uint64_t start_ns;
    char errbuf[CURL_ERROR_SIZE];
    /* What curl sends from: freed (wiped) when the transfer is reaped. */
    struct curl_slist *req_headers;
    char *req_body;
    size_t req_body_len;
};

/* A socket curl asked us to watch. */
struct sock {
    uv_poll_t poll;
    curl_socket_t fd;
    vmg_http *h;
    struct lq link; /* in h->socks until closed */
};

struct vmg_http {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    struct lq xfers;     /* every transfer not yet reaped, newest first */
    struct lq socks;     /* every watched socket not yet closing */
    size_t active;       /* transfers whose done has not run */
    size_t npending;     /* transfers in XS_PENDING */
    size_t ndone;        /* transfers in XS_DONE */
    int busy;            /* depth of entry points running */
    int in_curl;         /* depth of curl_multi_socket_action calls */
    bool closing;        /* vmg_http_close was called */
    bool torn_down;      /* the multi handle is gone, handles closing */
    size_t open_handles; /* uv handles not yet closed: timer and polls */
    void (*closed)(void *data);
    void *closed_data;
    vmg_http_observer obs;
    void *obs_data;
};

static void release(vmg_http *h);

static void hold(vmg_http *h)
{
    h->busy++;
}

static void maybe_free(vmg_http *h)
{
    if (!h->torn_down || h->open_handles > 0)
        return;
    if (h->closed)
        h->closed(h->closed_data);
    free(h);
}

/* ---- watched sockets and the timer ---- */

static void on_sock_closed(uv_handle_t *handle)
{
    struct sock *s = handle->data;
    vmg_http *h = s->h;

    free(s);
    h->open_handles--;
    maybe_free(h);
}

static void sock_close(struct sock *s)
{
    lq_remove(&s->link);
    uv_close((uv_handle_t *)&s->poll, on_sock_closed);
}

static void drain(vmg_http *h);

/* socket_action reports an event on fd (or the timeout) to curl, then
 * handles the transfers that finished. Call with h held. */
static void socket_action(vmg_http *h, curl_socket_t fd, int flags)
{
    int running = 0;
    CURLMcode mc;

    if (!h->multi)
        return;
    h->in_curl++;
    mc = curl_multi_socket_action(h->multi, fd, flags, &running);
    h->in_curl--;
    drain(h);
    /* A socket curl no longer knows is harmless. Any other error leaves
     * the transfers in an unknown state: fail them rather than let them
     * wait forever (fail_marked() finishes them). */
    if (mc != CURLM_OK && mc != CURLM_BAD_SOCKET) {
        int err = mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : VMG_ETRANSPORT;
        struct lq *p;

        lq_foreach(p, &h->xfers)
        {
            struct vmg_http_xfer *x = lq_entry(p, struct vmg_http_xfer, link);
            if (x->state == XS_ACTIVE && !x->fail)
                x->fail = err;
        }
    }
}

static void on_poll(uv_poll_t *poll, int status, int events)
{
    struct sock *s = poll->data;
    vmg_http *h = s->h;
    int flags = 0;

    if (status < 0) {
        /* libuv stopped the handle; curl learns of the error by trying the
         * socket, and then closes it or asks for it to be watched anew. */
        flags = CURL_CSELECT_ERR;
    } else {
        if (events & UV_READABLE)
            flags |= CURL_CSELECT_IN;
        if (events & UV_WRITABLE)
            flags |= CURL_CSELECT_OUT;
    }
    hold(h);
    socket_action(h, s->fd, flags);
    release(h);
}

/* xfer_of returns the transfer of an easy handle, NULL for curl's own. */
static struct vmg_http_xfer *xfer_of(CURL *easy)
{
    char *p = NULL;

    if (!easy || curl_easy_getinfo(easy, CURLINFO_PRIVATE, &p) != CURLE_OK)
        return NULL;
    return (struct vmg_http_xfer *)(void *)p;
}

/* fail_easy makes the transfer of easy fail with err once h is let go of,
 * for when its socket cannot be watched. */
static void fail_easy(CURL *easy, int err)
{
    struct vmg_http_xfer *x = xfer_of(easy);

    if (x && !x->fail)
        x->fail = err;
}

/* on_socket is curl's socket callback. It must return 0: -1 would make the
 * multi handle unusable. A socket we fail to watch fails its transfer. */
static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    vmg_http *h = userp;
    struct sock *s = socketp;
    int events = 0, r;

    if (what == CURL_POLL_REMOVE) {
        if (s) {
            sock_close(s);
            /* Fails only for a socket curl does not know: nothing to undo. */
            if (!h->torn_down)
                (void)curl_multi_assign(h->multi, fd, NULL);
        }
        return 0;
    }
    if (!s) {
        if (h->torn_down)
            return 0;
        s = calloc(1, sizeof(*s));
        if (!s) {
            fail_easy(easy, -ENOMEM);
            return 0;
        }
        r = uv_poll_init_socket(h->loop, &s->poll, fd);
        if (r < 0) {
            free(s);
            fail_easy(easy, VMG_ETRANSPORT);
            return 0;
        }
        s->fd = fd;
        s->h = h;
        s->poll.data = s;
        lq_insert_head(&h->socks, &s->link);
        h->open_handles++;
        if (curl_multi_assign(h->multi, fd, s) != CURLM_OK) {
            sock_close(s);
            fail_easy(easy, VMG_ETRANSPORT);
            return 0;
        }
    }
    if (what & CURL_POLL_IN)
        events |= UV_READABLE;
    if (what & CURL_POLL_OUT)
        events |= UV_WRITABLE;
    if (events == 0)
        r = uv_poll_stop(&s->poll);
    else
        r = uv_poll_start(&s->poll, events, on_poll);
    if (r < 0)
        fail_easy(easy, VMG_ETRANSPORT);
    return 0;
}

static void on_timeout(uv_timer_t *timer)
{
    vmg_http *h = timer->data;

    hold(h);
    socket_action(h, CURL_SOCKET_TIMEOUT, 0);
    release(h);
}

/* on_timer is curl's timer callback: it only arms the uv timer, whose
 * expiry calls curl from the loop, never from inside this callback. */
static int on_timer(CURLM *multi, long timeout_ms, void *userp)
{
    vmg_http *h = userp;

    if (h->torn_down)
        return 0;
    /* Neither call fails on a timer that is not closing, which this one is
     * not before teardown. */
    if (timeout_ms < 0)
        (void)uv_timer_stop(&h->timer);
    else
        (void)uv_timer_start(&h->timer, on_timeout, timeout_ms == 0 ? 1 : (uint64_t)timeout_ms, 0);
    return 0;
}

static void on_timer_closed(uv_handle_t *handle)
{
    vmg_http *h = handle->data;

    h->open_handles--;
    maybe_free(h);
}

vmg_http *vmg_http_new(uv_loop_t *loop, int *ret_err)
{
    vmg_http *h;
    int r = VMG_ETRANSPORT;

    if (!loop) {
        if (ret_err)
            *ret_err = -EINVAL;
        return NULL;
    }
    h = calloc(1, sizeof(*h));
    if (!h) {
        r = -ENOMEM;
        goto fail;
    }
    h->loop = loop;
    lq_init(&h->xfers);
    lq_init(&h->socks);
    h->multi = curl_multi_init();
    if (!h->multi)
        goto fail;
    if (curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, on_socket) != CURLM_OK ||
        curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h) != CURLM_OK ||
        curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, on_timer) != CURLM_OK ||
        curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h) != CURLM_OK ||
        curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)VMG_HTTP_MAX_IDLE_CONNS) !=
            CURLM_OK)
        goto fail;
    r = uv_timer_init(loop, &h->timer);
    if (r < 0)
        goto fail;
    h->timer.data = h;
    h->open_handles = 1;
    return h;
fail:
    if (h && h->multi)
        curl_multi_cleanup(h->multi);
    free(h);
    if (ret_err)
        *ret_err = r;
    return NULL;
}

void vmg_http_headers_free(struct curl_slist *h)
{
    for (struct curl_slist *p = h; p; p = p->next)
        if (p->data)
            vmg_wipe(p->data, strlen(p->data));
    curl_slist_free_all(h);
}

/* ---- transfers ---- */

/* Response headers and bodies may hold secrets (a session cookie, a
 * session id, a token): their memory is wiped before it is given back. */
static void headers_clear(struct vmg_http_xfer *x)
{
    for (size_t i = 0; i < x->nhdrs; i++) {
        char *e = x->hdrs[i];
        size_t nlen = strlen(e);
        vmg_wipe_free(e, nlen + 1 + strlen(e + nlen + 1));
    }
    x->nhdrs = 0;
    x->hdr_bytes = 0;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* on_header keeps the header lines of the latest response: a status line
 * starts a new response (after a redirect or a 1xx) and drops the headers
 * kept so far. */
static size_t on_header(char *buf, size_t size, size_t nitems, void *userp)
{
    struct vmg_http_xfer *x = userp;
    size_t len = size * nitems, nlen, vlen;
    const char *colon, *name, *val, *end;
    char *entry;

    if (x->state == XS_DONE || x->fail)
        return 0;
    if (len >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
        headers_clear(x);
        x->mode = BM_UNSET;
        return len;
    }
    x->hdr_bytes += len;
    if (x->hdr_bytes > VMG_HTTP_MAX_HEADER_BYTES) {
        x->fail = VMG_ETOOBIG;
        return 0;
    }
    colon = memchr(buf, ':', len);
    /* The blank line that ends the headers, an obsolete folded line, or a
     * line without a colon: nothing to keep. */
    if (!colon || colon == buf || is_space(buf[0]))
        return len;
    if (x->nhdrs == VMG_HTTP_MAX_HEADERS) {
        x->fail = VMG_ETOOBIG;
        return 0;
    }
    name = buf;
    nlen = (size_t)(colon - buf);
    while (nlen > 0 && is_space(name[nlen - 1]))
        nlen--;
    val = colon + 1;
    end = buf + len;
    while (val < end && is_space(*val))
        val++;
    while (end > val && is_space(end[-1]))
        end--;
    vlen = (size_t)(end - val);
    entry = malloc(nlen + vlen + 2);
    if (!entry) {
        x->fail = -ENOMEM;
        return 0;
    }
    memcpy(entry, name, nlen);
    entry[nlen] = '\0';
    memcpy(entry + nlen + 1, val, vlen);
    entry[nlen + 1 + vlen] = '\0';
    x->hdrs[x->nhdrs++] = entry;
    return len;
}

/* body_append adds n bytes to the body (or current line), within max_body.
 * On failure it sets x->fail and returns it. */
static int body_append(struct vmg_http_xfer *x, const char *p, size_t n)
{
    int r = vmg_buf_append(&x->body, p, n);

    if (r < 0)
        x->fail = r;
    return r;
}

/* deliver_line hands the line collected in body to on_line and empties
 * body. Returns nonzero when the transfer must stop: on_line asked so, or
 * canceled it. */
static int deliver_line(struct vmg_http_xfer *x)
{
    size_t len = vmg_buf_len(&x->body);
    int r;

    if (len > 0 && vmg_buf_str(&x->body)[len - 1] == '\r')
        vmg_buf_truncate(&x->body, --len);
    r = x->on_line(x->data, vmg_buf_str(&x->body), len);
    vmg_buf_reset(&x->body);
    if (x->state == XS_DONE)
        return 1;
    if (r != 0) {
        x->fail = r < 0 ? r : VMG_ECANCELED;
        return 1;
    }
    return 0;
}

static size_t on_write(char *buf, size_t size, size_t nmemb, void *userp)
{
    struct vmg_http_xfer *x = userp;
    size_t len = size * nmemb;
    const char *p = buf, *end = buf + len;

    if (len == 0)
        return 0;
    if (x->state == XS_DONE || x->fail)
        return 0;
    if (x->mode == BM_UNSET) {
        long status = 0;

        if (curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
            status = 0;
        x->mode = x->on_line && status >= 200 && status < 300 ? BM_STREAM : BM_BUFFER;
        vmg_buf_reset(&x->body);
    }
    if (x->mode == BM_BUFFER)
        return body_append(x, buf, len) == 0 ? len : 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

        if (body_append(x, p, n) != 0)
            return 0;
        if (!nl)
            break;
        p = nl + 1;
        if (deliver_line(x) != 0)
            return 0;
    }
    return len;
}

static void xfer_free(struct vmg_http_xfer *x)
{
    headers_clear(x);
    curl_easy_cleanup(x->easy);
    vmg_buf_free(&x->body);
    vmg_http_headers_free(x->req_headers);
    vmg_wipe_free(x->req_body, x->req_body_len);
    free(x);
}

/* host_of writes the host of url into buf, or "" when it has none. */
static void host_of(const char *url, char *buf, size_t size)
{
    CURLU *u;
    char *host = NULL;

    buf[0] = '\0';
    if (!url)
        return;
    u = curl_url();
    if (!u)
        return;
    if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK && host) {
        size_t n = strlen(host);

        if (n >= size)
            n = size - 1;
        memcpy(buf, host, n);
        buf[n] = '\0';
    }
    curl_free(host);
    curl_url_cleanup(u);
}

/* finish marks x done and runs its observer and done callback; reaping
 * waits for release(). Call with h held. */
static void finish(struct vmg_http_xfer *x, int err, const char *errmsg)
{
    vmg_http *h = x->h;
    struct vmg_http_result res;

    if (x->state == XS_DONE)
        return;
    if (x->state == XS_PENDING)
        h->npending--;
    x->state = XS_DONE;
    h->active--;
    h->ndone++;

    memset(&res, 0, sizeof(res));
    res.err = err;
    if (curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &res.status) != CURLE_OK)
        res.status = 0;
    /* A streamed body is not a result; a buffered one is. */
    if (x->mode == BM_BUFFER) {
        res.body = vmg_buf_str(&x->body);
        res.body_len = vmg_buf_len(&x->body);
    } else {
        res.body = "";
    }
    res.errmsg = "";
    if (err)
        res.errmsg = errmsg && *errmsg ? errmsg : vmg_strerror(err);
    res.seconds = (double)(uv_hrtime() - x->start_ns) / 1e9;
    res.xfer = x;
    if (h->obs) {
        char *method = NULL, *url = NULL;
        char host[256];

        if (curl_easy_getinfo(x->easy, CURLINFO_EFFECTIVE_METHOD, &method) != CURLE_OK)
            method = NULL;
        if (curl_easy_getinfo(x->easy, CURLINFO_EFFECTIVE_URL, &url) != CURLE_OK)
            url = NULL;
        host_of(url, host, sizeof(host));
        h->obs(h->obs_data, method ? method : "", host, res.status, err, res.seconds);
    }
    x->done(x->data, &res);
}

/* hide_span replaces s[from, to) with "***" (or as many '*' when it is
 * shorter) in place. */
static void hide_span(char *from, char *to)
{
    size_t n = (size_t)(to - from);

    if (n >= 3) {
        memcpy(from, "***", 3);
        memmove(from + 3, to, strlen(to) + 1);
    } else {
        memset(from, '*', n);
    }
}

/* after_scheme returns p past "scheme://" when p begins with one, else p. */
static char *after_scheme(char *p)
{
    char *q = p;

    if (!((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z')))
        return p;
    while ((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') ||
           *q == '+' || *q == '.' || *q == '-')
        q++;
    return strncmp(q, "://", 3) == 0 ? q + 3 : p;
}

/* hide_userinfo hides the user information of the URLs in curl's error
 * text s (in a buffer of cap bytes): curl quotes a proxy's URL whole in
 * some of its errors ("Unsupported proxy syntax in '...'"), scheme or not,
 * and its password may hold spaces, slashes, quotes and "://". After the
 * text's first quote, all up to its last '@' (past a leading scheme)
 * becomes "***"; so does, before that quote, an unquoted
 * "scheme://user@". A text that fills the buffer may have been cut before
 * the '@': its quoted or last URL is then hidden to the end. A path's '@'
 * hides more than needed, never less. The bytes the text no longer holds
 * are zeroed. */
static void hide_userinfo(char *s, size_t cap)
{
    size_t was = strlen(s);
    bool cut = was + 1 >= cap;
    char *quote = strchr(s, '\''), *p, *at;

    if (quote) {
        char *open = after_scheme(quote + 1);

        at = strrchr(open, '@');
        if (at)
            hide_span(open, at);
        else if (cut)
            hide_span(open, open + strlen(open));
        *quote = '\0'; /* the text before it, below */
    }
    for (p = s; (p = strstr(p, "://")) != NULL;) {
        char *start = p + 3, *stop = start + strcspn(start, " \t\n");

        at = NULL;
        for (char *q = start; q < stop; q++)
            if (*q == '@')
                at = q;
        p = start;
        if (at)
            hide_span(start, at);
        else if (cut && !quote && !*stop)
            hide_span(start, stop);
    }
    if (quote)
        *quote = '\'';
    memset(s + strlen(s), 0, was - strlen(s));
}

/* complete finishes x, which curl reports as ended with rc. */
static void complete(struct vmg_http_xfer *x, CURLcode rc)
{
    int err = 0;
    const char *msg = NULL;

    if (x->fail) {
        err = x->fail;
    } else if (rc == CURLE_OK) {
        /* A last line without a newline is still a line. */
        if (x->mode == BM_STREAM && vmg_buf_len(&x->body) > 0) {
            deliver_line(x);
            if (x->state == XS_DONE)
                return;
            err = x->fail;
        }
    } else if (rc == CURLE_FILESIZE_EXCEEDED) {
        err = VMG_ETOOBIG;
    } else if (rc == CURLE_OUT_OF_MEMORY) {
        err = -ENOMEM;
    } else {
        err = VMG_ETRANSPORT;
        hide_userinfo(x->errbuf, sizeof(x->errbuf));
        msg = x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc);
    }
    finish(x, err, msg);
}

/* drain runs the done callbacks of the transfers curl reports as ended.
 * Call with h held, outside curl's callbacks. */
static void drain(vmg_http *h)
{
    CURLMsg *m;
    int left;

    while (h->multi && (m = curl_multi_info_read(h->multi, &left)) != NULL) {
        struct vmg_http_xfer *x;
        CURLcode rc = m->data.result;

        if (m->msg != CURLMSG_DONE)
            continue;
        x = xfer_of(m->easy_handle);
        if (x && x->state == XS_ACTIVE)
            complete(x, rc);
    }
}

/* add_now hands a pending transfer to curl, or fails it. */
static void add_now(struct vmg_http_xfer *x)
{
    vmg_http *h = x->h;
    CURLMcode mc = curl_multi_add_handle(h->multi, x->easy);

    if (mc != CURLM_OK) {
        finish(x, mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : VMG_ETRANSPORT, curl_multi_strerror(mc));
        return;
    }
    x->added = true;
    x->state = XS_ACTIVE;
    h->npending--;
}

static void reap(struct vmg_http_xfer *x)
{
    vmg_http *h = x->h;

    if (x->added) {
        /* Should removal fail, curl_easy_cleanup removes the handle too. */
        (void)curl_multi_remove_handle(h->multi, x->easy);
        x->added = false;
    }
    lq_remove(&x->link);
    h->ndone--;
    xfer_free(x);
}

static bool failed_active(const struct vmg_http_xfer *x)
{
    return x->state == XS_ACTIVE && x->fail;
}

static bool unfinished(const struct vmg_http_xfer *x)
{
    return x->state != XS_DONE;
}

/* find_xfer returns the first transfer (newest first) that pred accepts,
 * or NULL. */
static struct vmg_http_xfer *find_xfer(vmg_http *h, bool (*pred)(const struct vmg_http_xfer *))
{
    struct lq *p;

    lq_foreach(p, &h->xfers)
    {
        struct vmg_http_xfer *x = lq_entry(p, struct vmg_http_xfer, link);
        if (pred(x))
            return x;
    }
    return NULL;
}

/* fail_marked finishes the active transfers whose sockets could not be
 * watched: curl would otherwise wait on them forever. */
static void fail_marked(vmg_http *h)
{
    struct vmg_http_xfer *x;

    while ((x = find_xfer(h, failed_active)) != NULL)
        finish(x, x->fail, NULL);
}

static void teardown(vmg_http *h)
{
    h->torn_down = true;
    /* Every transfer was reaped: curl_multi_cleanup only closes cached
     * connections, telling on_socket to stop watching their sockets. */
    curl_multi_cleanup(h->multi);
    h->multi = NULL;
    while (!lq_empty(&h->socks))
        sock_close(lq_entry(lq_head(&h->socks), struct sock, link));
    uv_close((uv_handle_t *)&h->timer, on_timer_closed);
}

/* release lets go of h; the outermost release, outside of curl, adds the
 * pending transfers, reaps the finished ones, and tears h down when it is
 * closing. */
static void release(vmg_http *h)
{
    struct lq *p, *next;
    bool progress = true;

    if (h->busy > 1 || h->in_curl > 0) {
        h->busy--;
        return;
    }
    fail_marked(h);
    /* Callbacks run by add_now() may start, cancel or close, which links
     * new transfers at the head or changes states, but only reap() unlinks:
     * the saved next stays valid. Passes repeat until nothing is left. */
    while ((h->npending > 0 || h->ndone > 0) && progress) {
        progress = false;
        lq_foreach_safe(p, next, &h->xfers)
        {
            struct vmg_http_xfer *x = lq_entry(p, struct vmg_http_xfer, link);
            if (x->state == XS_PENDING) {
                add_now(x);
                progress = true;
            } else if (x->state == XS_DONE) {
                reap(x);
                progress = true;
            }
        }
    }
    h->busy--;
    if (h->closing && !h->torn_down && h->busy == 0)
        teardown(h);
}

/* take_send gives x what send holds (the headers taken over, the body
 * copied) and points easy at it. Returns 0, -ENOMEM or VMG_ETRANSPORT. */
static int take_send(struct vmg_http_xfer *x, const struct vmg_http_send *send)
{
    if (!send)
        return 0;
    x->req_headers = send->headers;
    if (x->req_headers && curl_easy_setopt(x->easy, CURLOPT_HTTPHEADER, x->req_headers) != CURLE_OK)
        return VMG_ETRANSPORT;
    if (!send->body)
        return 0;
    /* One byte more, so that an empty body is not a NULL one. */
    x->req_body = malloc(send->body_len + 1);
    if (!x->req_body)
        return -ENOMEM;
    memcpy(x->req_body, send->body, send->body_len);
    x->req_body_len = send->body_len;
    if (curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->req_body_len) !=
            CURLE_OK ||
        curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, x->req_body) != CURLE_OK)
        return VMG_ETRANSPORT;
    return 0;
}

int vmg_http_start(vmg_http *h, CURL *easy, const struct vmg_http_send *send, size_t max_body,
                   vmg_http_line_cb on_line, vmg_http_done_cb done, void *data,
                   vmg_http_xfer **ret_xfer)
{
    struct vmg_http_xfer *x = NULL;
    CURLMcode mc;
    int r;

    if (!easy) {
        vmg_http_headers_free(send ? send->headers : NULL);
        return -EINVAL;
    }
    if (!h || !done || max_body == 0 || max_body >= SIZE_MAX / 2 ||
        (send && send->body_len && !send->body) || (send && send->body_len >= SIZE_MAX / 2)) {
        r = -EINVAL;
        goto fail;
    }
    if (h->closing) {
        r = VMG_ECANCELED;
        goto fail;
    }
    x = calloc(1, sizeof(*x));
    if (!x) {
        r = -ENOMEM;
        goto fail;
    }
    x->h = h;
    x->easy = easy;
    vmg_buf_init(&x->body, max_body, VMG_BUF_WIPE);
    x->on_line = on_line;
    x->done = done;
    x->data = data;
    r = take_send(x, send);
    send = NULL; /* x holds what it held */
    if (r < 0)
        goto fail;
    r = VMG_ETRANSPORT;
    if (curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_write) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, x) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_HEADERDATA, x) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_PRIVATE, x) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, x->errbuf) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L) != CURLE_OK)
        goto fail;
    x->start_ns = uv_hrtime();
    if (h->in_curl > 0) {
        /* curl refuses a new handle from inside its callbacks: add it when
         * the callback's caller lets go of h. */
        x->state = XS_PENDING;
        h->npending++;
    } else {
        mc = curl_multi_add_handle(h->multi, easy);
        if (mc != CURLM_OK) {
            r = mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : VMG_ETRANSPORT;
            goto fail;
        }
        x->state = XS_ACTIVE;
        x->added = true;
    }
    lq_insert_head(&h->xfers, &x->link);
    h->active++;
    if (ret_xfer)
        *ret_xfer = x;
    return 0;
fail:
    if (x) {
        xfer_free(x); /* cleans easy up */
    } else {
        vmg_http_headers_free(send ? send->headers : NULL);
        curl_easy_cleanup(easy);
    }
    return r;
}

void vmg_http_cancel(vmg_http_xfer *x)
{
    vmg_http *h;

    if (!x || x->state == XS_DONE)
        return;
    h = x->h;
    hold(h);
    finish(x, VMG_ECANCELED, NULL);
    release(h);
}

const char *vmg_http_xfer_header_nth(const vmg_http_xfer *x, const char *name, size_t n)
{
    if (!x || !name)
        return NULL;
    for (size_t i = 0; i < x->nhdrs; i++) {
        if (strcasecmp(x->hdrs[i], name) != 0)
            continue;
        if (n == 0)
            return x->hdrs[i] + strlen(x->hdrs[i]) + 1;
        n--;
    }
    return NULL;
}

const char *vmg_http_xfer_header(const vmg_http_xfer *x, const char *name)
{
    return vmg_http_xfer_header_nth(x, name, 0);
}

CURL *vmg_http_xfer_easy(const vmg_http_xfer *x)
{
    return x ? x->easy : NULL;
}

void vmg_http_set_observer(vmg_http *h, vmg_http_observer obs, void *data)
{
    if (!h)
        return;
    h->obs = obs;
    h->obs_data = obs ? data : NULL;
}

size_t vmg_http_active(const vmg_http *h)
{
    return h ? h->active : 0;
}

void vmg_http_close(vmg_http *h, void (*closed)(void *data), void *data)
{
    struct vmg_http_xfer *x;

    if (!h || h->closing)
        return;
    h->closing = true;
    h->closed = closed;
    h->closed_data = data;
    hold(h);
    while ((x = find_xfer(h, unfinished)) != NULL)
        finish(x, VMG_ECANCELED, NULL);
    release(h);
}

#ifdef VMG_TESTING
vmg_http_xfer *vmg_http_testing_xfer(size_t max_body, vmg_http_line_cb on_line, void *data)
{
    struct vmg_http_xfer *x;

    if (max_body == 0 || max_body >= SIZE_MAX / 2)
        return NULL;
    x = calloc(1, sizeof(*x));
    if (!x)
        return NULL;
    x->state = XS_ACTIVE;
    vmg_buf_init(&x->body, max_body, VMG_BUF_WIPE);
    x->on_line = on_line;
    x->data = data;
    return x;
}

int vmg_http_testing_header(vmg_http_xfer *x, const char *line, size_t len)
{
    char *copy = malloc(len + 1);
    size_t n;

    if (!copy)
        return -ENOMEM;
    memcpy(copy, line, len);
    copy[len] = '\0';
    n = on_header(copy, 1, len, x);
    free(copy);
    if (n == len)
        return 0;
    return x->fail ? x->fail : VMG_ECANCELED;
}

int vmg_http_testing_body(vmg_http_xfer *x, long status, const char *buf, size_t len)
{
    char *copy;
    size_t n;

    if (len == 0)
        return x->fail;
    /* What on_write would learn from curl's CURLINFO_RESPONSE_CODE. */
    if (x->mode == BM_UNSET && x->state != XS_DONE && !x->fail) {
        x->mode = x->on_line && status >= 200 && status < 300 ? BM_STREAM : BM_BUFFER;
        vmg_buf_reset(&x->body);
    }
    copy = malloc(len);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, buf, len);
    n = on_write(copy, 1, len, x);
    free(copy);
    if (n == len)
        return 0;
    return x->fail ? x->fail : VMG_ECANCELED;
}

int vmg_http_testing_end(vmg_http_xfer *x, const char **ret_body, size_t *ret_len)
{
    if (!x->fail && x->mode == BM_STREAM && vmg_buf_len(&x->body) > 0)
        deliver_line(x);
    x->state = XS_DONE;
    *ret_body = x->mode == BM_BUFFER ? vmg_buf_str(&x->body) : "";
    *ret_len = x->mode == BM_BUFFER ? vmg_buf_len(&x->body) : 0;
    return x->fail;
}

void vmg_http_testing_xfer_free(vmg_http_xfer *x)
{
    if (x)
        xfer_free(x);
}
#endif
