/* rest_int.h: the insides of vs_rest, shared by vsphere/rest.c (session,
 * send queue, transfers, life cycle) and vsphere/rest_tags.c (the tag id
 * cache and the steps of an operation). Not for use outside them. */
#ifndef VMG_VS_REST_INT_H
#define VMG_VS_REST_INT_H

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>
#include <uv.h>

#include "lib/http.h"
#include "lib/queue.h"
#include "vsphere/rest.h"

#define DEFAULT_TIMEOUT_MS 30000L
#define DEFAULT_CONNECT_TIMEOUT_MS 10000L
#define DEFAULT_MAX_BODY (4u * 1024 * 1024)
#define DEFAULT_MAX_INFLIGHT 4
#define LOGOUT_TIMEOUT_MS 5000L
#define BASE_URL_MAX 1024
#define PATH_MAX_LEN 768
#define MAX_RESTARTS 2

#define SESSION_PATH "/com/vmware/cis/session"
#define CATEGORY_PATH "/com/vmware/cis/tagging/category"
#define TAG_PATH "/com/vmware/cis/tagging/tag"
#define ASSOC_PATH "/com/vmware/cis/tagging/tag-association"
#define SESSION_HEADER "vmware-api-session-id"

enum op_kind { OP_LOGIN, OP_CATEGORY, OP_TAG, OP_ATTACH, OP_DETACH, OP_LIST, OP_DELETE };

/* The request of an op that is in flight or waiting to be sent. */
enum step {
    ST_NONE,
    ST_SESSION_GET, /* POST session?~action=get */
    ST_CAT_CREATE,  /* POST category */
    ST_CAT_LIST,    /* GET category */
    ST_CAT_GET,     /* GET category/id:ids[idx] */
    ST_TAG_CREATE,  /* POST tag */
    ST_TAG_LIST,    /* POST tag/id:C?~action=list-tags-for-category */
    ST_TAG_GET,     /* GET tag/id:ids[idx] */
    ST_ACT,         /* the op's own request */
};

enum xkind { X_OP, X_LOGIN, X_LOGOUT };

struct xctx {
    vs_rest *r;
    struct op *op; /* X_OP */
    enum xkind kind;
    vmg_http_xfer *xfer;
    unsigned gen; /* the session generation the request carried */
};

struct op {
    vs_rest *r;
    struct lq link;  /* in r->ops: every op not finished */
    struct lq qlink; /* in r->runq or r->sendq */
    enum op_kind kind;
    bool create;       /* make the category and tag when missing */
    bool queued;       /* in runq or sendq */
    bool in_runq;      /* queued in runq (else in sendq) */
    bool from_cache;   /* tag_id came from memory (may be stale) */
    int restarts;      /* lookups redone after a 404 */
    bool cat_relooked; /* the category looked up again for an answer that may
                          say it is gone (a tag list 404, a tag refused) */
    vs_rest_cb cb;
    void *data;
    char tag_name[VS_REST_TAG_NAME_MAX + 1];
    char *tag_desc; /* the description of a tag made; NULL: "" */
    struct vs_rest_object vm;
    char tag_id[VS_REST_ID_MAX + 1];
    char **ids; /* a list being read, one GET at a time */
    size_t n_ids, idx;
    /* The current request, kept to resend it after a new login. */
    enum step step;
    const char *method;
    char path[PATH_MAX_LEN];
    char *body;
    bool retried; /* resent once after a 401 */
    struct xctx *x;
};

struct cache_ent {
    struct lq link; /* in r->cache, newest first */
    char *name;
    char *id;
};

struct vs_rest {
    uv_loop_t *loop;
    vmg_http *http;
    uv_timer_t kick; /* starts queued ops from the loop */
    char *base;      /* base URL + "/rest", no trailing '/' */
    char *user;
    char *password;
    void (*prepare)(void *data, CURL *easy);
    void *prepare_data;
    void (*release)(void *data);
    char *category;
    char *category_desc;
    bool multiple;
    long timeout_ms, connect_timeout_ms;
    size_t max_body;
    int max_inflight;

    char session[VS_REST_ID_MAX + 1]; /* "" when none */
    unsigned gen;                     /* bumped at every new session */
    unsigned long logins;             /* logins that gave a session */
    bool ever_logged_in;
    struct xctx *login, *logout;

    bool disabled;
    char reason[VS_REST_MSG_MAX];
    char cat_id[VS_REST_ID_MAX + 1]; /* "" until known */
    struct lq cache;                 /* of struct cache_ent */
    size_t n_cache;

    struct lq ops; /* newest first */
    size_t n_ops;
    struct lq runq; /* FIFO: ops to start from the loop */
    size_t n_runq;
    struct lq sendq; /* FIFO: ops whose request waits for a session or a slot */
    int inflight;
    int pumping;
    bool pump_again;

    bool closing;
    void (*closed)(void *data);
    void *closed_data;
};

/* vs__rest_cache_clear forgets every tag id. */
void vs__rest_cache_clear(vs_rest *r);

/* vs__rest_on_response moves op on after the answer res to its request. */
void vs__rest_on_response(struct op *op, const struct vmg_http_result *res);

/* vs__rest_op_run runs op's next step: a lookup, a creation, or its own
 * request (or finishes it). */
void vs__rest_op_run(struct op *op);

/* vs__rest_disable makes r unavailable, with the reason fmt. */
void vs__rest_disable(vs_rest *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* vs__rest_op_finish_full unlinks op, calls its callback with the result
 * and frees it. */
void vs__rest_op_finish_full(struct op *op, int err, const char *msg, const char *id,
                             const struct vs_rest_object *objs, size_t n);

/* vs__rest_op_finish: vs__rest_op_finish_full without a result. */
void vs__rest_op_finish(struct op *op, int err, const char *msg);

/* vs__rest_op_failf finishes op with err and the message fmt. */
void vs__rest_op_failf(struct op *op, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* vs__rest_op_unavailable finishes op with VS_REST_EUNAVAILABLE. */
void vs__rest_op_unavailable(struct op *op);

/* vs__rest_op_send queues op's request (method, body owned from then on,
 * path fmt) as its step. */
void vs__rest_op_send(struct op *op, enum step step, const char *method, char *body,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* vs__rest_send_list_tags lists the tags of the category as op's step. */
void vs__rest_send_list_tags(struct op *op);

#endif
