/* server_req.h: inside lib/server (not a public header): a connection's
 * HTTP/1.1 requests as http_parser's callbacks assemble them within the
 * server's limits, the request the handler reads (its accessors are in
 * server.h), and the text of its response. lib/server.c keeps the
 * connections, their I/O and timers; this part knows none of them.
 *
 * Every buffer that held request bytes is a wiped lib/buf (VMG_BUF_WIPE). */
#ifndef VMG_SERVER_REQ_H
#define VMG_SERVER_REQ_H

#include <stddef.h>

#include <http_parser.h>

#include "lib/buf.h"
#include "lib/server.h"

struct conn; /* lib/server.c's */

/* A request header: value without surrounding blanks. */
struct vmg_req_hdr {
    struct vmg_buf name;
    struct vmg_buf value;
};

struct vmg_server_req {
    struct conn *conn; /* NULL once the connection is gone */
    struct vmg_buf url;
    char *path;
    char *query;
    struct vmg_req_hdr *hdrs;
    size_t nhdrs;
    struct vmg_buf body;
    struct vmg_buf extra; /* extra response header lines */
    char peer[64];
    const char *method;
    int complete;
    int keep_alive;
    int head;
    void (*on_abort)(void *data, vmg_server_req *r);
    void *abort_data;
};

/* The requests of one connection, parsed one after the other. */
struct vmg_reqparse {
    http_parser parser;
    vmg_server_req *req; /* being parsed, or complete and not taken yet */
    int last_was_value;  /* header callbacks: the last one was a value */
    size_t header_bytes; /* of the request being parsed */
    int error_status;    /* a limit a callback hit: the status to answer */
    size_t max_header_bytes;
    size_t max_headers;
    size_t max_body;
    const char *peer; /* copied into each request */
    /* The connection's part: begun at a request's first byte; headers at
     * its headers' end, told whether the client waits for "100 Continue"
     * (a negative return answers 500). */
    void (*begun)(void *arg);
    int (*headers)(void *arg, int expect_continue);
    void *arg;
};

/* vmg_reqparse_init readies rp for a new connection; the limits, peer and
 * callbacks are set by the caller after it. */
void vmg_reqparse_init(struct vmg_reqparse *rp);

/* vmg_reqparse_execute parses up to n bytes of data and returns how many
 * it used. It stops after a complete request (rp->req->complete: take it
 * with vmg_reqparse_take) or at an error (vmg_reqparse_status). */
size_t vmg_reqparse_execute(struct vmg_reqparse *rp, const char *data, size_t n);

/* vmg_reqparse_status returns the status to answer when the parse failed
 * (400, 413, 431, 500), else 0. */
int vmg_reqparse_status(const struct vmg_reqparse *rp);

/* vmg_reqparse_take hands the complete request over to the caller. */
vmg_server_req *vmg_reqparse_take(struct vmg_reqparse *rp);

/* vmg_reqparse_drop frees the request being parsed, if any. */
void vmg_reqparse_drop(struct vmg_reqparse *rp);

/* vmg_req_free wipes and frees r; NULL is fine. */
void vmg_req_free(vmg_server_req *r);

/* vmg_req_response returns the whole response to r as a new buffer
 * (status line, headers, r's extra headers, body unless r is a HEAD
 * request) and its length in *ret_len, or NULL (out of memory). status out
 * of 100..599 is sent as 500; a content_type that is too long or holds CR
 * or LF is left out; keep 0 adds "Connection: close". The caller wipes it
 * before it frees it. */
char *vmg_req_response(const vmg_server_req *r, int status, const char *content_type,
                       const void *body, size_t len, int keep, size_t *ret_len);

#endif
