/* srv.c: the unit tests' loopback HTTP/1.1 server (see srv.h). */
#include "tests/unit/srv.h"
#include "tests/unit/unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <arpa/inet.h>

struct wbuf {
    uv_write_t w;
    struct sconn *c;
    bool close_after;
    char data[];
};

static void sconn_closed(uv_handle_t *h)
{
    struct sconn *c = h->data;

    lq_remove(&c->link);
    free(c);
}

void srv_conn_close(struct sconn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    if (c->s->held == c)
        c->s->held = NULL;
    if (c->s->on_close)
        c->s->on_close(c->s, c);
    uv_close((uv_handle_t *)&c->tcp, sconn_closed);
}

static void on_wrote(uv_write_t *w, int status)
{
    struct wbuf *b = (struct wbuf *)w;

    if (status < 0 || b->close_after)
        srv_conn_close(b->c);
    free(b);
}

void srv_send(struct sconn *c, const char *data, size_t len, bool close_after)
{
    struct wbuf *b;
    uv_buf_t ub;

    if (c->closing)
        return;
    b = malloc(sizeof(*b) + len + 1);
    assert_non_null(b);
    memcpy(b->data, data, len);
    b->c = c;
    b->close_after = close_after;
    ub = uv_buf_init(b->data, (unsigned)len);
    if (uv_write(&b->w, (uv_stream_t *)&c->tcp, &ub, 1, on_wrote) < 0) {
        free(b);
        srv_conn_close(c);
    }
}

/* reply answers with status, extra headers (each ending "\r\n") and body,
 * then closes the connection. */
void srv_reply(struct sconn *c, int status, const char *headers, const char *body)
{
    char head[1024];
    int n;

    c->answered = true;
    n = snprintf(head, sizeof(head),
                 "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                 "Connection: close\r\n%s\r\n",
                 status, strlen(body), headers ? headers : "");
    assert_true(n > 0 && (size_t)n < sizeof(head));
    srv_send(c, head, (size_t)n, false);
    srv_send(c, body, strlen(body), true);
}

/* stream_start answers 200 with a body of unknown length: lines follow
 * with stream_send; stream_end closes. */
void srv_stream_start(struct sconn *c)
{
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               "Connection: close\r\n\r\n";

    c->answered = true;
    srv_send(c, head, sizeof(head) - 1, false);
}

void srv_stream_send(struct sconn *c, const char *text, bool close_after)
{
    srv_send(c, text, strlen(text), close_after);
}

void srv_header_value(const char *head, const char *name, char *out, size_t len)
{
    size_t nlen = strlen(name);

    out[0] = '\0';
    for (const char *p = strstr(head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;

        if (strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
            const char *v = line + nlen + 1, *e = strstr(v, "\r\n");

            while (*v == ' ')
                v++;
            snprintf(out, len, "%.*s", (int)(e ? e - v : (long)strlen(v)), v);
            return;
        }
    }
}

static void salloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct sconn *c = h->data;

    (void)suggested;
    buf->base = c->buf + c->len;
    buf->len = sizeof(c->buf) - 1 - c->len;
}

static void sread(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct sconn *c = st->data;
    struct srv *s = c->s;
    char *end, cl[32];
    size_t head_len, body_len, used;
    struct sreq *q;
    int i;

    (void)buf;
    if (nread < 0) {
        srv_conn_close(c);
        return;
    }
    c->len += (size_t)nread;
    c->buf[c->len] = '\0';
    while (!c->closing && !(c->answered && !s->keep_alive)) {
        if (!(end = strstr(c->buf, "\r\n\r\n")))
            return;
        head_len = (size_t)(end + 4 - c->buf);
        *end = '\0';
        srv_header_value(c->buf, "Content-Length", cl, sizeof(cl));
        body_len = cl[0] ? (size_t)strtoul(cl, NULL, 10) : 0;
        if (c->len < head_len + body_len) {
            *end = '\r';
            return;
        }
        assert_true(s->keep_alive || s->n < SRV_MAX_REQS);
        i = s->n++;
        q = srv_req(s, i);
        memset(q, 0, sizeof(*q));
        assert_int_equal(sscanf(c->buf, "%15s %1023s", q->method, q->target), 2);
        srv_header_value(c->buf, "User-Agent", q->ua, sizeof(q->ua));
        srv_header_value(c->buf, "Authorization", q->auth, sizeof(q->auth));
        srv_header_value(c->buf, "Content-Type", q->ctype, sizeof(q->ctype));
        srv_header_value(c->buf, "Accept", q->accept, sizeof(q->accept));
        snprintf(q->body, sizeof(q->body), "%.*s", (int)body_len, c->buf + head_len);
        c->head_len = head_len;
        c->body_len = body_len;
        c->answered = true;
        s->handle(s, i, c);
        if (!s->keep_alive)
            return;
        used = head_len + body_len;
        memmove(c->buf, c->buf + used, c->len - used + 1);
        c->len -= used;
    }
}

static void on_conn(uv_stream_t *lis, int status)
{
    struct srv *s = lis->data;
    struct sconn *c = calloc(1, sizeof(*c));

    assert_int_equal(status, 0);
    assert_non_null(c);
    c->s = s;
    s->accepted++;
    assert_int_equal(uv_tcp_init(s->loop, &c->tcp), 0);
    c->tcp.data = c;
    lq_insert_head(&s->conns, &c->link);
    assert_int_equal(uv_accept(lis, (uv_stream_t *)&c->tcp), 0);
    /* Head and body often go in two writes: without this, Nagle and
     * delayed ACKs hold the body back 40 ms. */
    assert_int_equal(uv_tcp_nodelay(&c->tcp, 1), 0);
    assert_int_equal(uv_read_start((uv_stream_t *)&c->tcp, salloc, sread), 0);
}

int srv_bind_loopback(uv_tcp_t *tcp)
{
    struct sockaddr_in addr;
    struct sockaddr_storage name;
    int len = sizeof(name);

    assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &addr), 0);
    assert_int_equal(uv_tcp_bind(tcp, (const struct sockaddr *)&addr, 0), 0);
    assert_int_equal(uv_tcp_getsockname(tcp, (struct sockaddr *)&name, &len), 0);
    return ntohs(((struct sockaddr_in *)&name)->sin_port);
}

void srv_start(struct srv *s, uv_loop_t *loop)
{
    s->loop = loop;
    lq_init(&s->conns);
    assert_int_equal(uv_tcp_init(loop, &s->lis), 0);
    s->lis.data = s;
    s->port = srv_bind_loopback(&s->lis);
    assert_int_equal(uv_listen((uv_stream_t *)&s->lis, 64, on_conn), 0);
}

void srv_stop(struct srv *s)
{
    struct lq *q;

    if (!uv_is_closing((uv_handle_t *)&s->lis))
        uv_close((uv_handle_t *)&s->lis, NULL);
    lq_foreach(q, &s->conns) srv_conn_close(lq_entry(q, struct sconn, link));
}
