/* http.h: every HTTP transfer of the process, through one libcurl multi
 * handle driven by a libuv loop.
 *
 * The caller configures a curl easy handle (URL, method, TLS, timeouts)
 * and hands it, with the request's headers and body, to vmg_http_start();
 * this module runs it on the
 * loop without ever blocking, buffers the response body up to a bound (or
 * hands over a streamed body line by line, for Kubernetes watches), keeps
 * the headers of the final response, and calls the caller back once with
 * the result. The program calls curl_global_init() once before using it.
 *
 * Callbacks run on the loop's thread. A done callback may start new
 * transfers, cancel others, or close the vmg_http; so may a line callback.
 * This module sets no timeouts: the caller sets CURLOPT_CONNECTTIMEOUT and
 * CURLOPT_TIMEOUT (or a low-speed limit, for watches) as each request
 * needs.
 *
 * A response body may hold a secret (a TokenReview's answer repeats the
 * token it reviewed): every buffer this module kept a body or a line in is
 * wiped before it is freed, a grown one included.
 */
#ifndef VMG_HTTP_H
#define VMG_HTTP_H

#include <stddef.h>

#include <curl/curl.h>
#include <uv.h>

/* Bounds on the response headers kept per transfer: a response with more
 * headers, or more bytes of them, fails with VMG_ETOOBIG. */
#define VMG_HTTP_MAX_HEADERS 100
#define VMG_HTTP_MAX_HEADER_BYTES (64 * 1024)

/* Connections kept open once their transfers are done (curl's connection
 * cache, CURLMOPT_MAXCONNECTS), for all hosts together: beyond it, the
 * oldest idle one is closed. Without it curl keeps up to 4 per transfer
 * ever running at once. An idle connection is also not reused after
 * curl's CURLOPT_MAXAGE_CONN (118 s by default) and is then closed.
 * The Kubernetes clients and the vCenter client share this number, and
 * a reconcile pass or a relist can run more than 16 transfers at once:
 * 32 keeps such a burst's connections for the next one instead of
 * closing and reopening them (TLS handshakes). Still bounded: each idle
 * TLS connection costs tens of KiB. */
#define VMG_HTTP_MAX_IDLE_CONNS 32

typedef struct vmg_http vmg_http;           /* one CURLM bound to one uv loop */
typedef struct vmg_http_xfer vmg_http_xfer; /* one transfer in flight */

struct vmg_http_result {
    /* 0; VMG_ETRANSPORT (connection, TLS, timeout), VMG_ETOOBIG (body, line
     * or headers above their bound), VMG_ECANCELED, -ENOMEM, or the negative
     * code a line callback returned. An HTTP error status is not an error
     * here: look at status. */
    int err;
    long status;      /* HTTP status of the final response, 0 if none */
    const char *body; /* NUL-terminated, body_len bytes; never NULL */
    size_t body_len;
    const char *errmsg;  /* what went wrong when err != 0, else "" */
    double seconds;      /* from vmg_http_start to completion */
    vmg_http_xfer *xfer; /* for vmg_http_xfer_header() and the easy handle */
};

/* done is called exactly once per started transfer. res and everything it
 * points to are valid only during the call; the easy handle is cleaned up
 * after it returns. */
typedef void (*vmg_http_done_cb)(void *data, const struct vmg_http_result *res);
/* A line callback gets one line of a streamed body, without its "\n" (nor a
 * "\r" before it), NUL-terminated. Returning nonzero aborts the transfer:
 * done then gets the returned code as err when it is negative, else
 * VMG_ECANCELED. */
typedef int (*vmg_http_line_cb)(void *data, const char *line, size_t len);
/* An observer learns of every finished transfer, before its done callback:
 * the method, the host of the last URL, the status (0 if none), the err of
 * the result and the seconds it took. It must not call into this module. */
typedef void (*vmg_http_observer)(void *data, const char *method, const char *host, long status,
                                  int err, double seconds);

/* vmg_http_headers_free wipes each header of h (which may carry a session
 * id or a token) and frees the list, as curl_slist_free_all does. NULL is
 * fine. This module wipes the response headers and body it kept once the
 * done callback has returned. */
void vmg_http_headers_free(struct curl_slist *h);

/* vmg_http_new makes a multi handle bound to loop. Returns NULL and sets
 * *ret_err (-ENOMEM, VMG_ETRANSPORT when curl refuses) on failure. */
vmg_http *vmg_http_new(uv_loop_t *loop, int *ret_err);

/* What a request sends besides what its easy handle says: its header list
 * and its body. curl reads both from memory it does not own for as long as
 * it runs the transfer, which can outlast the done callback (a transfer
 * cancelled from inside another's callback stays in curl until curl
 * returns): so the transfer owns them, and wipes them (a header may carry
 * a token, a body a password) once curl has let go of it. */
struct vmg_http_send {
    struct curl_slist *headers; /* taken over in every case; NULL: none */
    const char *body;           /* copied; NULL: no body set */
    size_t body_len;
};

/* vmg_http_start runs the transfer easy, which it takes over in every case:
 * the caller must not touch easy afterwards except through the result. The
 * caller has set the URL, method (a body makes the request a POST unless
 * CUSTOMREQUEST names another), TLS and timeouts; this function sets
 * CURLOPT_HTTPHEADER and POSTFIELDS from send (which may be NULL: no
 * headers, no body), and WRITEFUNCTION,
 * HEADERFUNCTION, PRIVATE, ERRORBUFFER and NOSIGNAL (and their data), which
 * the caller must not set nor rely on.
 *
 * max_body (> 0) bounds the buffered body; with on_line != NULL the body of
 * a 2xx response is streamed instead: each line (ended by "\n") goes to
 * on_line as it arrives, max_body bounds one line, and a last line without
 * "\n" is handed over when the transfer ends cleanly. The body of a non-2xx
 * response to a streaming transfer is buffered as usual, so that the caller
 * can read the error.
 *
 * done is called later, from the loop, never from inside vmg_http_start.
 * Returns 0 and sets *ret_xfer (when not NULL) to a handle valid until done
 * returns; on failure returns a negative code (-EINVAL, -ENOMEM,
 * VMG_ECANCELED when h is closing, VMG_ETRANSPORT when curl refuses),
 * cleans easy up and never calls done. */
int vmg_http_start(vmg_http *h, CURL *easy, const struct vmg_http_send *send, size_t max_body,
                   vmg_http_line_cb on_line, vmg_http_done_cb done, void *data,
                   vmg_http_xfer **ret_xfer);

/* vmg_http_cancel stops a transfer whose done has not run yet: its done
 * runs, with err VMG_ECANCELED, before vmg_http_cancel returns (so the
 * caller may free what data points to right after). Calling it from that
 * transfer's own done is a no-op. */
void vmg_http_cancel(vmg_http_xfer *x);

/* vmg_http_xfer_header returns the value of the response header name
 * (case-insensitive) of the final response (after redirects and interim
 * 1xx responses), or NULL; the first one when it repeats, and
 * vmg_http_xfer_header_nth(x, name, n) the n-th (from 0). Valid in the
 * transfer's line and done callbacks. */
const char *vmg_http_xfer_header(const vmg_http_xfer *x, const char *name);
const char *vmg_http_xfer_header_nth(const vmg_http_xfer *x, const char *name, size_t n);

/* vmg_http_xfer_easy returns the transfer's easy handle, for curl_easy_getinfo
 * in the callbacks. */
CURL *vmg_http_xfer_easy(const vmg_http_xfer *x);

/* vmg_http_set_observer sets (or, with obs NULL, clears) the observer. */
void vmg_http_set_observer(vmg_http *h, vmg_http_observer obs, void *data);

/* vmg_http_active returns the number of transfers whose done has not run. */
size_t vmg_http_active(const vmg_http *h);

/* vmg_http_close cancels every transfer (each done runs, with
 * VMG_ECANCELED, before vmg_http_close returns), then closes the libuv
 * handles and frees h in their close callbacks, after which closed(data)
 * runs, when closed is not NULL. h must not be used after this call, other
 * than by the done callbacks it runs (where vmg_http_start() then fails with
 * VMG_ECANCELED). h may be NULL (then closed is not called). */
void vmg_http_close(vmg_http *h, void (*closed)(void *data), void *data);

#ifdef VMG_TESTING
/* A transfer that is never sent, for unit tests and fuzzers: they feed it
 * what curl would (header lines as curl hands them, with their CRLF, and
 * the body in pieces) and read what the callbacks made of it, without a
 * server. max_body and on_line as for vmg_http_start. */
vmg_http_xfer *vmg_http_testing_xfer(size_t max_body, vmg_http_line_cb on_line, void *data);
/* header feeds one header line; body feeds body bytes of a response of
 * the given status. Both return 0, or the error the transfer would end
 * with (VMG_ETOOBIG, -ENOMEM, a line callback's code, VMG_ECANCELED). */
int vmg_http_testing_header(vmg_http_xfer *x, const char *line, size_t len);
int vmg_http_testing_body(vmg_http_xfer *x, long status, const char *buf, size_t len);
/* end ends the transfer cleanly (a last line without "\n" is delivered)
 * and returns the err done would get; *ret_body and *ret_len are the
 * buffered body ("" when streamed). */
int vmg_http_testing_end(vmg_http_xfer *x, const char **ret_body, size_t *ret_len);
void vmg_http_testing_xfer_free(vmg_http_xfer *x);
#endif

#endif
