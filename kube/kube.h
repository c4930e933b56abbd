/* kube.h: the Kubernetes API client: asynchronous REST requests to the API
 * server on the libuv loop, with client-side rate limiting, retries and the
 * decoding of the API's Status errors.
 *
 * A request's body may carry a secret: the client's copy is wiped before it
 * is freed (and lib/http wipes the response's buffer).
 *
 * Every request goes through one vmg_http (lib/http.h) and is authenticated
 * with one kcfg (kube/kubeconfig.h). A request is queued, waits for a
 * token of the client's bucket (qps, burst), for a running exec credential
 * plugin if the credential must be refreshed, is sent, and is retried when
 * that is safe (see "Retries" below). Its callback runs exactly once, from
 * the loop, never from inside the call that started it.
 *
 * Retries (bounded by opts.retries, delays from opts.backoff_*, with jitter):
 *   - 429 Too Many Requests: any verb (the server did not act on it), after
 *     the Retry-After seconds when given, else after the backoff.
 *   - 5xx with a Retry-After header: any verb (the API server sends it only
 *     when the request may be repeated). 5xx without it: only the idempotent
 *     verbs GET, HEAD, PUT and DELETE (a PUT carries a resourceVersion or is
 *     a full replacement; a replayed DELETE may answer NotFound, which
 *     callers treat as done). POST and PATCH are not retried: their first
 *     attempt may have taken effect.
 *   - Connection failures (refused, reset, timeout): idempotent verbs
 *     always; POST and PATCH only when curl sent no byte of the request. A
 *     server certificate that fails verification is not retried.
 *   - 401 Unauthorized: kcfg_invalidate(), then once more (a fresh exec
 *     credential or a re-read token file may be accepted), any verb.
 *   - A streamed request (watch) only on 429, and never once a line has been
 *     delivered: connection failures and 5xx are its caller's to handle.
 * Other errors (403, 404, 409, 410, 422...) are returned at once.
 *
 * Dead connections: a watch is a response that may carry nothing for
 * minutes, so a connection whose peer vanished without a FIN or RST (the
 * API server's node died, a NAT or firewall dropped the flow) would leave
 * it waiting until its timeout_ms. Every connection of the client
 * therefore has TCP keepalive probes after KUBE_KEEPALIVE_IDLE_S idle
 * seconds, every KUBE_KEEPALIVE_INTERVAL_S, KUBE_KEEPALIVE_PROBES of them,
 * and a TCP_USER_TIMEOUT of as long in total (for data sent and never
 * acknowledged, when no probe goes out): a dead connection fails in about
 * a minute, with VMG_ETRANSPORT, and its watches end so (the caller
 * watches again). The kernel answers the probes, so this costs the server
 * nothing and a healthy watch never fails of it, however quiet.
 * opts.watch_stall_ms adds an end-to-end limit (no byte of a watch for
 * that long) for callers whose watches are known to carry traffic; it is
 * off by default because kube-apiserver may rightly send a watch nothing
 * at all (see watch_stall_ms).
 *
 * Not thread-safe: everything runs on the loop's thread.
 */
#ifndef VMG_KUBE_H
#define VMG_KUBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "kube/kubeconfig.h"
#include "lib/http.h"

/* The program's name, the default User-Agent's first word; the build names
 * the program (-DKUBE_AGENT=...). */
#ifndef KUBE_AGENT
#define KUBE_AGENT "kube-c"
#endif

#define KUBE_DEFAULT_QPS 20.0
#define KUBE_DEFAULT_BURST 30u
#define KUBE_DEFAULT_MAX_RESPONSE (16u * 1024 * 1024)
#define KUBE_DEFAULT_TIMEOUT_MS 30000u
#define KUBE_DEFAULT_CONNECT_TIMEOUT_MS 10000u
#define KUBE_DEFAULT_RETRIES 5
#define KUBE_DEFAULT_BACKOFF_BASE_MS 250u
#define KUBE_DEFAULT_BACKOFF_MAX_MS 8000u
#define KUBE_DEFAULT_MAX_QUEUED 10000u
#define KUBE_RETRY_AFTER_MAX_S 60u /* a longer Retry-After is cut to this */
#define KUBE_LIST_MAX_TOTAL (8u * KUBE_DEFAULT_MAX_RESPONSE) /* all pages, accumulated */
/* TCP keepalive of every connection (see "Dead connections" above): a
 * peer that answers nothing is given up after IDLE + INTERVAL * PROBES
 * seconds (60 s), which is also the connections' TCP_USER_TIMEOUT. */
#define KUBE_KEEPALIVE_IDLE_S 30
#define KUBE_KEEPALIVE_INTERVAL_S 10
#define KUBE_KEEPALIVE_PROBES 3

#define KUBE_PATH_MAX 2048
#define KUBE_REASON_MAX 64
#define KUBE_MESSAGE_MAX 1024
#define KUBE_FIELD_MAX 256

typedef struct kube_client kube_client;
typedef struct kube_req kube_req; /* one request (or paginated list) until its callback */

struct kube_result;

/* A request's callback; res and everything it points to are valid only
 * during the call (see kube_result_take_body). */
typedef void (*kube_cb)(void *data, const struct kube_result *res);
/* A streamed request's line callback (watch events, one JSON object a
 * line); returning nonzero ends the request, whose callback then gets that
 * code as err when it is negative, else VMG_ECANCELED. */
typedef int (*kube_line_cb)(void *data, const char *line, size_t len);
/* A list's page callback gets each page (a List object: metadata and items)
 * as it arrives; returning nonzero stops the list as above. */
typedef int (*kube_page_cb)(void *data, const cJSON *page);
/* Called after every HTTP exchange (each attempt and each page counts), for
 * rest_client_requests_total{code,method,host}: status is 0 when there was
 * no response, err the transport error (0 when a response came). */
typedef void (*kube_observer)(void *data, const char *method, const char *host, long status,
                              int err, double seconds);

/* The options; all-zero means the defaults given above. */
struct kube_client_opts {
    double qps;                  /* tokens a second; 0: KUBE_DEFAULT_QPS; negative: no limit */
    unsigned burst;              /* bucket size; 0: KUBE_DEFAULT_BURST */
    const char *user_agent;      /* copied; NULL: KUBE_AGENT "/" VMG_VERSION */
    size_t max_response;         /* bound of one response body (or watch line); 0: 16 MiB */
    unsigned timeout_ms;         /* whole request, watches excepted; 0: 30 s */
    unsigned connect_timeout_ms; /* 0: 10 s */
    int retries;                 /* retries after the first attempt; 0: 5; negative: none */
    unsigned backoff_base_ms;    /* first retry delay; 0: 250 ms */
    unsigned backoff_max_ms;     /* its cap; 0: 8 s */
    size_t max_queued;           /* requests not yet called back; 0: 10000 */
    kube_observer observe;       /* may be NULL */
    void *observe_data;
    /* A watch (a streamed request) that receives no byte of its body for
     * this long, from its start or its last byte, ends with VMG_ETRANSPORT
     * ("Operation too slow"), up to 5 s later (curl averages the speed over
     * 5 s); rounded up to whole seconds. 0: no limit, the
     * default: kube-apiserver (v1.32) sends a watch its BOOKMARKs (about
     * once a minute) only once its watch cache has moved past the
     * resourceVersion the watch started from, by a change to the
     * collection or by etcd's progress notifications (every 10 minutes by
     * default), so a watch of a collection nothing changes may rightly stay
     * silent until its timeoutSeconds. Dead connections are found by TCP
     * keepalive instead. */
    unsigned watch_stall_ms;
};

/* What a request came to. */
struct kube_result {
    /* 0, or: the code of the API's Status (kube_status_err) for an HTTP
     * error; VMG_ETRANSPORT, VMG_ETOOBIG, VMG_EPARSE (a 2xx body that is not
     * JSON), VMG_ECANCELED, -ENOMEM, or what a line/page callback or an exec
     * plugin refresh returned. */
    int err;
    long status;     /* HTTP status of the last response, 0 when none */
    cJSON *body;     /* the parsed JSON body (object, list, or the error's Status), or NULL */
    const char *raw; /* the body as received, NUL-terminated, never NULL ("" when streamed) */
    size_t raw_len;
    /* From the Status of an error response; made up from the HTTP status or
     * the transport error when there is none; 0/"" on success. */
    int code;               /* Status.code, else the HTTP status */
    const char *reason;     /* "NotFound", "AlreadyExists", "Conflict", ... */
    const char *message;    /* Status.message, or what went wrong */
    unsigned retry_after_s; /* the last response's Retry-After, 0 if none */
    unsigned attempts;      /* HTTP exchanges made for this request */
    const char *method;
    const char *path;   /* as given (for a list: without limit/continue) */
    bool body_borrowed; /* internal: body is a list page in an arena */
};

/* kube_result_take_body hands the body over to the caller (free it with
 * cJSON_Delete); res->body is then NULL. Returns NULL when there is none
 * (or, for a list's last page, when a copy of it cannot be made). */
cJSON *kube_result_take_body(const struct kube_result *res);

/* ---- the client ---- */

/* kube_client_new makes a client on loop, sending through http with cfg's
 * server and credentials; both are borrowed and must outlive the client
 * (until its close callback). opts may be NULL. Returns 0 and *ret, or
 * -EINVAL (NULL argument, bad options) or -ENOMEM. */
int kube_client_new(uv_loop_t *loop, vmg_http *http, kcfg *cfg, const struct kube_client_opts *opts,
                    kube_client **ret);

/* kube_client_close cancels every request (each callback runs, with
 * VMG_ECANCELED, before this returns), then frees c once the loop has
 * closed its timer and calls closed(data) when not NULL. New requests fail
 * with VMG_ECANCELED meanwhile. A running exec plugin is left to finish
 * (or to kcfg_free) without c. NULL is fine. */
void kube_client_close(kube_client *c, void (*closed)(void *data), void *data);

/* kube_client_host is the "host" label of c's requests ("127.0.0.1:6443"). */
const char *kube_client_host(const kube_client *c);

/* kube_client_pending counts the requests not yet called back. */
size_t kube_client_pending(const kube_client *c);

/* ---- requests ----
 *
 * path is the request's path and query, from the root of kcfg_server()
 * ("/apis/g/v/namespaces/ns/plural/name?x=y"), at most KUBE_PATH_MAX bytes;
 * bodies are copied. Each returns 0 and, when ret_req is not NULL, a
 * handle valid until the callback returns; or -EINVAL, -ENOMEM, -ENOSPC
 * (max_queued reached) or VMG_ECANCELED (closing), and then never calls
 * cb. */

/* The options of one request; all-zero means the client's. */
struct kube_req_opts {
    unsigned timeout_ms;  /* 0: the client's; for a stream, the whole stream */
    int retries;          /* 0: the client's; negative: none */
    kube_line_cb on_line; /* stream the 2xx body line by line (watch) */
};

int kube_request_ex(kube_client *c, const char *method, const char *path, const char *content_type,
                    const char *body, size_t body_len, const struct kube_req_opts *o, kube_cb cb,
                    void *data, kube_req **ret_req);

/* kube_send_once sends obj (NULL: no body) encoded as JSON of content_type,
 * tried once (no retries: for callers that retry on their own, as leader
 * and events do) within timeout_ms (0 counts as 1 ms; more than UINT32_MAX
 * is cut to it). */
int kube_send_once(kube_client *c, const char *method, const char *path, const char *content_type,
                   const cJSON *obj, uint64_t timeout_ms, kube_cb cb, void *data,
                   kube_req **ret_req);

/* kube_request is kube_request_ex with a NUL-terminated body (or NULL) and
 * default options. */
int kube_request(kube_client *c, const char *method, const char *path, const char *content_type,
                 const char *body, kube_cb cb, void *data);

int kube_get(kube_client *c, const char *path, kube_cb cb, void *data);
/* POST obj to the collection path. */
int kube_create(kube_client *c, const char *path, const cJSON *obj, kube_cb cb, void *data);
/* PUT obj (with its metadata.resourceVersion for optimistic concurrency). */
int kube_update(kube_client *c, const char *path, const cJSON *obj, kube_cb cb, void *data);
/* PATCH with application/merge-patch+json. ret_req (may be NULL): as
 * kube_request_ex's, for kube_rebody, kube_hurry and kube_unsend. */
int kube_merge_patch(kube_client *c, const char *path, const cJSON *patch, kube_cb cb, void *data,
                     kube_req **ret_req);
/* PATCH with application/json-patch+json; ops is the array of operations. */
int kube_json_patch(kube_client *c, const char *path, const cJSON *ops, kube_cb cb, void *data,
                    kube_req **ret_req);
/* DELETE, with DeleteOptions (may be NULL: none). */
int kube_delete(kube_client *c, const char *path, const cJSON *options, kube_cb cb, void *data);
/* The status subresource: path names the object; "/status" is appended. */
int kube_update_status(kube_client *c, const char *path, const cJSON *obj, kube_cb cb, void *data);
int kube_merge_patch_status(kube_client *c, const char *path, const cJSON *patch, kube_cb cb,
                            void *data, kube_req **ret_req);

/* kube_rebody gives r, a request with a body that is not sent yet (it
 * waits for the rate limit, or for a retry), obj encoded as its body
 * instead: a writer that has a newer version of what it writes sends that,
 * once, rather than queue a write per version. -EBUSY once r is out, and
 * after its callback r may no longer be used. */
int kube_rebody(kube_req *r, const cJSON *obj);

/* kube_hurry sends r, a request not sent yet (as kube_rebody), before
 * the requests waiting for the rate limit that were not hurried, after
 * those that were: what its writer knows to matter more than the rest
 * (an object's phase or conditions, a finalizer) does not wait
 * behind the rest. -EBUSY once r is out. */
int kube_hurry(kube_req *r);

/* kube_unsend drops r when it is not sent yet (as kube_rebody): its
 * callback runs with VMG_ECANCELED before kube_unsend returns 0. -EBUSY
 * once r is out: it goes on. */
int kube_unsend(kube_req *r);

/* kube_list GETs a collection in pages of limit items (0: 500), following
 * metadata.continue. With on_page, each page goes to on_page and the
 * result's body is the last page; without it, the items of all pages are
 * gathered into the result's body, one List whose metadata is the first
 * page's (at most KUBE_LIST_MAX_TOTAL bytes of pages, else VMG_ETOOBIG).
 * All pages are one snapshot, at the first page's resourceVersion. An
 * expired continue token ends the list with VMG_EGONE (list again). */
int kube_list(kube_client *c, const char *path, unsigned limit, kube_page_cb on_page, kube_cb cb,
              void *data, kube_req **ret_req);

/* kube_watch GETs path (which must hold watch=1 and its other parameters)
 * as a stream: each line (one watch event) goes to on_line; cb runs when
 * the stream ends: err 0 when the server closed it, else an error (an HTTP
 * error's Status, e.g. VMG_EGONE for 410). timeout_ms bounds the whole
 * stream (set it above the request's timeoutSeconds); a dead connection
 * ends it with VMG_ETRANSPORT in about a minute, and so does a stall, with
 * opts.watch_stall_ms. Retried only on 429 before the stream begins
 * (kube-apiserver answers so while its watch cache initializes). */
int kube_watch(kube_client *c, const char *path, unsigned timeout_ms, kube_line_cb on_line,
               kube_cb cb, void *data, kube_req **ret_req);

/* kube_cancel stops a request whose callback has not run: its callback
 * runs, with VMG_ECANCELED, before kube_cancel returns. From inside the
 * request's own page callback it stops the list after that page; from its
 * own callback it does nothing. */
void kube_cancel(kube_req *r);

/* ---- paths ---- */

/* kube_copy_str copies src (NULL: "") into dst, of size bytes, cut where
 * it does not fit but never inside a UTF-8 sequence. */
void kube_copy_str(char *dst, size_t size, const char *src);

/* kube_path writes the path of a resource to buf:
 *   group "" (core):  /api/<version>[/namespaces/<ns>]/<plural>[/<name>[/<sub>]]
 *   else:             /apis/<group>/<version>[/namespaces/<ns>]/<plural>[/<name>[/<sub>]]
 * ns, name and sub may be NULL or "" (ns: all namespaces, or a cluster-
 * scoped resource). Every segment must be a non-empty run of [a-zA-Z0-9.-_:]
 * (names of Kubernetes objects are). Returns the length, or -EINVAL (bad
 * segment) or VMG_ETOOBIG (buf too small), writing nothing then. */
int kube_path(char *buf, size_t len, const char *group, const char *version, const char *ns,
              const char *plural, const char *name, const char *sub);

/* kube_query_add appends "?key=value" (or "&key=value" when buf already
 * holds a '?') with value percent-encoded. Returns the new length, or
 * VMG_ETOOBIG (buf unchanged). */
int kube_query_add(char *buf, size_t len, const char *key, const char *value);

/* ---- the API's Status errors ---- */

struct kube_status {
    int err;                          /* the code kube_status_err gives; 0 for status "Success" */
    int code;                         /* Status.code, else the HTTP status */
    char reason[KUBE_REASON_MAX];     /* Status.reason, else the HTTP status's usual reason */
    char message[KUBE_MESSAGE_MAX];   /* Status.message (cut), else "" */
    unsigned n_causes;                /* details.causes */
    char cause_field[KUBE_FIELD_MAX]; /* the first cause's field, or "" */
    unsigned retry_after_s;           /* details.retryAfterSeconds, 0 if none */
};

/* kube_status_decode reads a Status (obj may be NULL or not a Status: then
 * only the HTTP status counts) into *ret. Returns ret->err. */
int kube_status_decode(const cJSON *obj, long http_status, struct kube_status *ret);

/* kube_status_err maps a Status reason (may be NULL or "") and code to an
 * error: NotFound -> VMG_ENOTFOUND; AlreadyExists, Conflict ->
 * VMG_ECONFLICT; Forbidden -> VMG_EFORBIDDEN; Unauthorized -> VMG_EAUTH;
 * Gone, Expired -> VMG_EGONE; TooManyRequests -> VMG_ETHROTTLED; Invalid,
 * BadRequest -> -EINVAL; RequestEntityTooLarge -> VMG_ETOOBIG;
 * MethodNotAllowed, NotAcceptable, UnsupportedMediaType -> -EOPNOTSUPP;
 * Timeout, ServerTimeout -> -ETIMEDOUT; ServiceUnavailable -> -EAGAIN; an
 * unknown reason by the code the same way (404, 409, 403, 401, 410, 429,
 * 422/400, 413, 405/406/415, 504, 503); else VMG_EHTTP; code 2xx with no
 * reason: 0. */
int kube_status_err(const char *reason, long code);

/* kube_parse_retry_after reads a Retry-After value: delay-seconds, or an
 * HTTP date (then the seconds from now, 0 when past), cut to
 * KUBE_RETRY_AFTER_MAX_S. Returns 0 and *ret_s, or -EINVAL. */
int kube_parse_retry_after(const char *value, time_t now, unsigned *ret_s);

/* kube_backoff_ms is the delay before retry number attempt (0 for the first
 * retry): d = min(base_ms << attempt, max_ms), less a random part of at
 * most jitter * d (jitter in [0, 1], rnd uniform over uint32_t): the result
 * is in [d * (1 - jitter), d]. */
uint64_t kube_backoff_ms(uint64_t base_ms, uint64_t max_ms, unsigned attempt, double jitter,
                         uint32_t rnd);

#endif
