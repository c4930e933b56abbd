/* server_req.c: a connection's requests, parsed within the server's limits,
 * and their responses' text (see server_req.h). */
#include "lib/server_req.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/err.h"

static void wipe_str(char *p)
{
    if (p)
        vmg_wipe_free(p, strlen(p) + 1);
}

void vmg_req_free(vmg_server_req *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nhdrs; i++) {
        vmg_buf_free(&r->hdrs[i].name);
        vmg_buf_free(&r->hdrs[i].value);
    }
    vmg_wipe_free(r->hdrs, r->nhdrs * sizeof(*r->hdrs));
    vmg_buf_free(&r->url);
    wipe_str(r->path);
    wipe_str(r->query);
    vmg_buf_free(&r->body);
    vmg_buf_free(&r->extra);
    vmg_wipe_free(r, sizeof(*r));
}

/* ---- parser callbacks ---- */

static struct vmg_reqparse *parse_of(http_parser *p)
{
    return p->data;
}

/* fail makes the parse answer status; nonzero, an error for the parser. */
static int fail(struct vmg_reqparse *rp, int status)
{
    rp->error_status = status;
    return -1;
}

/* count_header_bytes adds n bytes to the request's URL and header bytes;
 * nonzero (an error for the parser) above the limit. */
static int count_header_bytes(struct vmg_reqparse *rp, size_t n)
{
    rp->header_bytes += n;
    if (rp->header_bytes > rp->max_header_bytes)
        return fail(rp, HTTP_STATUS_REQUEST_HEADER_FIELDS_TOO_LARGE);
    return 0;
}

static int on_message_begin(http_parser *p)
{
    struct vmg_reqparse *rp = parse_of(p);
    vmg_server_req *r;

    vmg_reqparse_drop(rp);
    r = rp->req = calloc(1, sizeof(*rp->req));
    if (!r)
        return fail(rp, HTTP_STATUS_INTERNAL_SERVER_ERROR);
    vmg_buf_init(&r->url, rp->max_header_bytes, VMG_BUF_WIPE);
    vmg_buf_init(&r->body, rp->max_body, VMG_BUF_WIPE);
    vmg_buf_init(&r->extra, VMG_SERVER_MAX_EXTRA_HEADERS, VMG_BUF_WIPE);
    snprintf(r->peer, sizeof(r->peer), "%s", rp->peer ? rp->peer : "");
    rp->header_bytes = 0;
    rp->last_was_value = 1;
    rp->error_status = 0;
    if (rp->begun)
        rp->begun(rp->arg);
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
    struct vmg_reqparse *rp = parse_of(p);

    if (count_header_bytes(rp, n) < 0)
        return -1;
    if (vmg_buf_append(&rp->req->url, at, n) < 0)
        return fail(rp, HTTP_STATUS_INTERNAL_SERVER_ERROR);
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    struct vmg_reqparse *rp = parse_of(p);
    vmg_server_req *r = rp->req;

    if (count_header_bytes(rp, n) < 0)
        return -1;
    if (rp->last_was_value) {
        struct vmg_req_hdr *nh;
        if (r->nhdrs >= rp->max_headers)
            return fail(rp, HTTP_STATUS_REQUEST_HEADER_FIELDS_TOO_LARGE);
        nh = realloc(r->hdrs, (r->nhdrs + 1) * sizeof(*nh));
        if (!nh)
            return fail(rp, HTTP_STATUS_INTERNAL_SERVER_ERROR);
        r->hdrs = nh;
        vmg_buf_init(&r->hdrs[r->nhdrs].name, rp->max_header_bytes, VMG_BUF_WIPE);
        vmg_buf_init(&r->hdrs[r->nhdrs].value, rp->max_header_bytes, VMG_BUF_WIPE);
        r->nhdrs++;
        rp->last_was_value = 0;
    }
    if (vmg_buf_append(&r->hdrs[r->nhdrs - 1].name, at, n) < 0)
        return fail(rp, HTTP_STATUS_INTERNAL_SERVER_ERROR);
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    struct vmg_reqparse *rp = parse_of(p);

    if (count_header_bytes(rp, n) < 0)
        return -1;
    if (rp->req->nhdrs == 0)
        return -1;
    rp->last_was_value = 1;
    if (vmg_buf_append(&rp->req->hdrs[rp->req->nhdrs - 1].value, at, n) < 0)
        return fail(rp, HTTP_STATUS_INTERNAL_SERVER_ERROR);
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
    struct vmg_reqparse *rp = parse_of(p);
    vmg_server_req *r = rp->req;
    struct http_parser_url u;
    const char *url = vmg_buf_str(&r->url), *expect;

    /* Every header's value goes without trailing blanks. */
    for (size_t i = 0; i < r->nhdrs; i++) {
        struct vmg_buf *v = &r->hdrs[i].value;
        size_t n = vmg_buf_len(v);
        while (n > 0 && (vmg_buf_str(v)[n - 1] == ' ' || vmg_buf_str(v)[n - 1] == '\t'))
            n--;
        vmg_buf_truncate(v, n);
    }
    if (vmg_buf_len(&r->url) == 0)
        return fail(rp, HTTP_STATUS_BAD_REQUEST);
    http_parser_url_init(&u);
    if (http_parser_parse_url(url, vmg_buf_len(&r->url), p->method == HTTP_CONNECT, &u) != 0)
        return fail(rp, HTTP_STATUS_BAD_REQUEST);
    if (u.field_set & (1 << UF_PATH))
        r->path = dup_range(url + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len);
    else
        r->path = dup_range("/", 1);
    if (u.field_set & (1 << UF_QUERY))
        r->query = dup_range(url + u.field_data[UF_QUERY].off, u.field_data[UF_QUERY].len);
    else
        r->query = dup_range("", 0);
    if (!r->path || !r->query)
        return fail(rp, HTTP_STATUS_INTERNAL_SERVER_ERROR);
    r->method = http_method_str((enum http_method)p->method);
    r->head = p->method == HTTP_HEAD;
    r->keep_alive = http_should_keep_alive(p) && !p->upgrade;

    if ((p->flags & F_CONTENTLENGTH) && p->content_length > rp->max_body)
        return fail(rp, HTTP_STATUS_PAYLOAD_TOO_LARGE);
    expect = vmg_server_req_header(r, "Expect");
    if (rp->headers && rp->headers(rp->arg, expect && strcasecmp(expect, "100-continue") == 0 &&
                                                p->http_major == 1 && p->http_minor >= 1) < 0)
        return fail(rp, HTTP_STATUS_INTERNAL_SERVER_ERROR);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    struct vmg_reqparse *rp = parse_of(p);
    vmg_server_req *r = rp->req;

    if (n > rp->max_body - vmg_buf_len(&r->body))
        return fail(rp, HTTP_STATUS_PAYLOAD_TOO_LARGE);
    if (vmg_buf_append(&r->body, at, n) < 0)
        return fail(rp, HTTP_STATUS_INTERNAL_SERVER_ERROR);
    return 0;
}

static int on_message_complete(http_parser *p)
{
    struct vmg_reqparse *rp = parse_of(p);

    rp->req->complete = 1;
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

/* ---- the parse ---- */

void vmg_reqparse_init(struct vmg_reqparse *rp)
{
    memset(rp, 0, sizeof(*rp));
    http_parser_init(&rp->parser, HTTP_REQUEST);
    rp->parser.data = rp;
}

size_t vmg_reqparse_execute(struct vmg_reqparse *rp, const char *data, size_t n)
{
    if (HTTP_PARSER_ERRNO(&rp->parser) == HPE_PAUSED)
        http_parser_pause(&rp->parser, 0);
    return http_parser_execute(&rp->parser, &parser_settings, data, n);
}

int vmg_reqparse_status(const struct vmg_reqparse *rp)
{
    enum http_errno e = HTTP_PARSER_ERRNO(&rp->parser);

    if (e == HPE_OK || (e == HPE_PAUSED && rp->req && rp->req->complete))
        return 0;
    if (rp->error_status)
        return rp->error_status;
    return e == HPE_HEADER_OVERFLOW ? HTTP_STATUS_REQUEST_HEADER_FIELDS_TOO_LARGE
                                    : HTTP_STATUS_BAD_REQUEST;
}

vmg_server_req *vmg_reqparse_take(struct vmg_reqparse *rp)
{
    vmg_server_req *r = rp->req;

    rp->req = NULL;
    return r;
}

void vmg_reqparse_drop(struct vmg_reqparse *rp)
{
    vmg_req_free(rp->req);
    rp->req = NULL;
}

/* ---- responses ---- */

char *vmg_req_response(const vmg_server_req *r, int status, const char *content_type,
                       const void *body, size_t len, int keep, size_t *ret_len)
{
    char head[512];
    const char *extra = vmg_buf_str(&r->extra);
    size_t hlen, elen = vmg_buf_len(&r->extra), total;
    char *msg;
    int n;

    if (status < 100 || status > 599)
        status = 500;
    if (content_type && (strlen(content_type) > 200 || strpbrk(content_type, "\r\n")))
        content_type = NULL;
    if (!body)
        len = 0;
    n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\n%s%s%sContent-Length: %zu\r\n%s", status,
                 http_status_str((enum http_status)status), content_type ? "Content-Type: " : "",
                 content_type ? content_type : "", content_type ? "\r\n" : "", len,
                 keep ? "" : "Connection: close\r\n");
    hlen = n > 0 && (size_t)n < sizeof(head) ? (size_t)n : 0; /* always fits */
    if (r->head)
        len = 0;
    total = hlen + elen + 2 + len;
    msg = malloc(total);
    if (!msg)
        return NULL;
    memcpy(msg, head, hlen);
    if (elen)
        memcpy(msg + hlen, extra, elen);
    memcpy(msg + hlen + elen, "\r\n", 2);
    if (len)
        memcpy(msg + hlen + elen + 2, body, len);
    *ret_len = total;
    return msg;
}

/* ---- the request's accessors ---- */

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
    if (nl + vl + 4 > VMG_SERVER_MAX_EXTRA_HEADERS - vmg_buf_len(&r->extra))
        return VMG_ETOOBIG;
    /* Within the bound (checked above): only memory may fail, adding nothing. */
    return vmg_buf_append_fmt(&r->extra, "%s: %s\r\n", name, value) < 0 ? -ENOMEM : 0;
}

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
        if (strcasecmp(vmg_buf_str(&r->hdrs[i].name), name) == 0)
            return vmg_buf_str(&r->hdrs[i].value);
    return NULL;
}

const char *vmg_server_req_peer(const vmg_server_req *r)
{
    return r->peer;
}

const char *vmg_server_req_body(const vmg_server_req *r, size_t *ret_len)
{
    if (ret_len)
        *ret_len = vmg_buf_len(&r->body);
    return vmg_buf_str(&r->body);
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
