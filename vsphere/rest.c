/* rest.c: the vSphere Automation REST client: session and tagging (see
 * rest.h for the contract).
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

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>

#include "lib/err.h"
#include "lib/log.h"
#include "lib/secretfile.h"

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

/* ---- shaping: ids, bodies, responses ---- */

bool vs_rest_valid_id(const char *id)
{
    size_t n = 0;

    if (!id || !id[0])
        return false;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++, n++) {
        unsigned char c = *p;

        if (n >= VS_REST_ID_MAX)
            return false;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == ':' || c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* print_free prints root as compact JSON into *ret and frees root. */
static int print_free(cJSON *root, char **ret)
{
    char *s = cJSON_PrintUnformatted(root);

    cJSON_Delete(root);
    if (!s)
        return -ENOMEM;
    *ret = s;
    return 0;
}

int vs_rest_body_category(const char *name, const char *description, bool multiple, char **ret)
{
    cJSON *root, *spec, *types;

    if (!name || !name[0] || !description || !ret)
        return -EINVAL;
    root = cJSON_CreateObject();
    spec = cJSON_AddObjectToObject(root, "create_spec");
    if (!spec || !cJSON_AddStringToObject(spec, "name", name) ||
        !cJSON_AddStringToObject(spec, "description", description) ||
        !cJSON_AddStringToObject(spec, "cardinality", multiple ? "MULTIPLE" : "SINGLE"))
        goto fail;
    types = cJSON_AddArrayToObject(spec, "associable_types");
    if (!types || !cJSON_AddItemToArray(types, cJSON_CreateString("VirtualMachine")))
        goto fail;
    return print_free(root, ret);
fail:
    cJSON_Delete(root);
    return -ENOMEM;
}

int vs_rest_body_tag(const char *name, const char *description, const char *category_id, char **ret)
{
    cJSON *root, *spec;

    if (!name || !name[0] || !description || !ret || !vs_rest_valid_id(category_id))
        return -EINVAL;
    root = cJSON_CreateObject();
    spec = cJSON_AddObjectToObject(root, "create_spec");
    if (!spec || !cJSON_AddStringToObject(spec, "name", name) ||
        !cJSON_AddStringToObject(spec, "description", description) ||
        !cJSON_AddStringToObject(spec, "category_id", category_id)) {
        cJSON_Delete(root);
        return -ENOMEM;
    }
    return print_free(root, ret);
}

int vs_rest_body_list_tags(const char *category_id, char **ret)
{
    cJSON *root;

    if (!ret || !vs_rest_valid_id(category_id))
        return -EINVAL;
    root = cJSON_CreateObject();
    if (!cJSON_AddStringToObject(root, "category_id", category_id)) {
        cJSON_Delete(root);
        return -ENOMEM;
    }
    return print_free(root, ret);
}

int vs_rest_body_object(const struct vs_rest_object *obj, char **ret)
{
    cJSON *root, *o;

    if (!obj || !ret || !obj->type[0] || !obj->id[0] ||
        !memchr(obj->type, '\0', sizeof(obj->type)) || !memchr(obj->id, '\0', sizeof(obj->id)))
        return -EINVAL;
    root = cJSON_CreateObject();
    o = cJSON_AddObjectToObject(root, "object_id");
    if (!o || !cJSON_AddStringToObject(o, "type", obj->type) ||
        !cJSON_AddStringToObject(o, "id", obj->id)) {
        cJSON_Delete(root);
        return -ENOMEM;
    }
    return print_free(root, ret);
}

/* parse_value parses body and returns its "value" member through
 * *ret_value (NULL when absent), and the root to free through *ret_root. */
static int parse_value(const char *body, size_t len, cJSON **ret_root, cJSON **ret_value)
{
    cJSON *root;

    if (!body)
        return VMG_EPARSE;
    root = cJSON_ParseWithLength(body, len);
    if (!root)
        return VMG_EPARSE;
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return VMG_EPARSE;
    }
    *ret_root = root;
    *ret_value = cJSON_GetObjectItemCaseSensitive(root, "value");
    return 0;
}

/* copy_str copies a JSON string into buf; VMG_EPARSE when item is not a
 * string or does not fit. */
static int copy_str(const cJSON *item, char *buf, size_t size)
{
    size_t n;

    if (!cJSON_IsString(item) || !item->valuestring)
        return VMG_EPARSE;
    n = strlen(item->valuestring);
    if (n >= size)
        return VMG_EPARSE;
    memcpy(buf, item->valuestring, n + 1);
    return 0;
}

int vs_rest_parse_string(const char *body, size_t len, char *buf, size_t size)
{
    cJSON *root = NULL, *value = NULL;
    char tmp[VS_REST_ID_MAX + 1];
    int r;

    if (!buf || size == 0)
        return -EINVAL;
    r = parse_value(body, len, &root, &value);
    if (r < 0)
        return r;
    r = copy_str(value, tmp, sizeof(tmp) < size ? sizeof(tmp) : size);
    if (r == 0 && !vs_rest_valid_id(tmp))
        r = VMG_EPARSE;
    if (r == 0)
        memcpy(buf, tmp, strlen(tmp) + 1);
    cJSON_Delete(root);
    return r;
}

void vs_rest_ids_free(char **ids, size_t n)
{
    if (!ids)
        return;
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
}

int vs_rest_parse_ids(const char *body, size_t len, char ***ret, size_t *ret_n)
{
    cJSON *root = NULL, *value = NULL, *item;
    char **ids = NULL;
    size_t n = 0, cap;
    int r;

    if (!ret || !ret_n)
        return -EINVAL;
    r = parse_value(body, len, &root, &value);
    if (r < 0)
        return r;
    if (!value || cJSON_IsNull(value))
        goto done;
    if (!cJSON_IsArray(value)) {
        r = VMG_EPARSE;
        goto out;
    }
    cap = (size_t)cJSON_GetArraySize(value);
    if (cap > VS_REST_MAX_IDS) {
        r = VMG_EPARSE;
        goto out;
    }
    if (cap > 0) {
        ids = calloc(cap, sizeof(*ids));
        if (!ids) {
            r = -ENOMEM;
            goto out;
        }
    }
    cJSON_ArrayForEach(item, value)
    {
        if (!cJSON_IsString(item) || !vs_rest_valid_id(item->valuestring)) {
            r = VMG_EPARSE;
            goto out;
        }
        ids[n] = strdup(item->valuestring);
        if (!ids[n]) {
            r = -ENOMEM;
            goto out;
        }
        n++;
    }
done:
    *ret = ids;
    *ret_n = n;
    ids = NULL;
    n = 0;
    r = 0;
out:
    vs_rest_ids_free(ids, n);
    cJSON_Delete(root);
    return r;
}

int vs_rest_parse_category(const char *body, size_t len, struct vs_rest_category *ret)
{
    cJSON *root = NULL, *value = NULL, *types, *t;
    struct vs_rest_category c;
    int r;

    if (!ret)
        return -EINVAL;
    memset(&c, 0, sizeof(c));
    r = parse_value(body, len, &root, &value);
    if (r < 0)
        return r;
    r = VMG_EPARSE;
    if (!cJSON_IsObject(value) ||
        copy_str(cJSON_GetObjectItemCaseSensitive(value, "id"), c.id, sizeof(c.id)) < 0 ||
        !vs_rest_valid_id(c.id) ||
        copy_str(cJSON_GetObjectItemCaseSensitive(value, "name"), c.name, sizeof(c.name)) < 0)
        goto out;
    t = cJSON_GetObjectItemCaseSensitive(value, "cardinality");
    if (t && copy_str(t, c.cardinality, sizeof(c.cardinality)) < 0)
        goto out;
    types = cJSON_GetObjectItemCaseSensitive(value, "associable_types");
    if (types && !cJSON_IsNull(types) && !cJSON_IsArray(types))
        goto out;
    c.vm_associable = !types || cJSON_GetArraySize(types) == 0;
    cJSON_ArrayForEach(t, types)
    {
        if (cJSON_IsString(t) && strcmp(t->valuestring, "VirtualMachine") == 0)
            c.vm_associable = true;
    }
    *ret = c;
    r = 0;
out:
    cJSON_Delete(root);
    return r;
}

int vs_rest_parse_tag(const char *body, size_t len, struct vs_rest_tag *ret)
{
    cJSON *root = NULL, *value = NULL;
    struct vs_rest_tag t;
    int r;

    if (!ret)
        return -EINVAL;
    memset(&t, 0, sizeof(t));
    r = parse_value(body, len, &root, &value);
    if (r < 0)
        return r;
    r = VMG_EPARSE;
    if (!cJSON_IsObject(value) ||
        copy_str(cJSON_GetObjectItemCaseSensitive(value, "id"), t.id, sizeof(t.id)) < 0 ||
        !vs_rest_valid_id(t.id) ||
        copy_str(cJSON_GetObjectItemCaseSensitive(value, "name"), t.name, sizeof(t.name)) < 0 ||
        copy_str(cJSON_GetObjectItemCaseSensitive(value, "category_id"), t.category_id,
                 sizeof(t.category_id)) < 0)
        goto out;
    *ret = t;
    r = 0;
out:
    cJSON_Delete(root);
    return r;
}

int vs_rest_parse_objects(const char *body, size_t len, struct vs_rest_object **ret, size_t *ret_n)
{
    cJSON *root = NULL, *value = NULL, *item;
    struct vs_rest_object *objs = NULL;
    size_t n = 0, cap;
    int r;

    if (!ret || !ret_n)
        return -EINVAL;
    r = parse_value(body, len, &root, &value);
    if (r < 0)
        return r;
    if (!value || cJSON_IsNull(value))
        goto done;
    r = VMG_EPARSE;
    if (!cJSON_IsArray(value))
        goto out;
    cap = (size_t)cJSON_GetArraySize(value);
    if (cap > VS_REST_MAX_IDS)
        goto out;
    if (cap > 0) {
        objs = calloc(cap, sizeof(*objs));
        if (!objs) {
            r = -ENOMEM;
            goto out;
        }
    }
    cJSON_ArrayForEach(item, value)
    {
        if (!cJSON_IsObject(item) ||
            copy_str(cJSON_GetObjectItemCaseSensitive(item, "type"), objs[n].type,
                     sizeof(objs[n].type)) < 0 ||
            copy_str(cJSON_GetObjectItemCaseSensitive(item, "id"), objs[n].id, sizeof(objs[n].id)) <
                0)
            goto out;
        n++;
    }
done:
    *ret = objs;
    *ret_n = n;
    objs = NULL;
    r = 0;
out:
    free(objs);
    cJSON_Delete(root);
    return r;
}

/* cut_copy copies s into buf, cut to fit. */
static void cut_copy(char *buf, size_t size, const char *s)
{
    if (size == 0)
        return;
    snprintf(buf, size, "%s", s ? s : "");
}

void vs_rest_parse_error(const char *body, size_t len, char *type, size_t tsize, char *msg,
                         size_t msize)
{
    cJSON *root, *t, *value, *msgs, *m;
    const char *last;

    cut_copy(type, tsize, "");
    cut_copy(msg, msize, "");
    if (!body || len == 0)
        return;
    root = cJSON_ParseWithLength(body, len);
    if (!root)
        return;
    t = cJSON_GetObjectItemCaseSensitive(root, "type");
    if (cJSON_IsString(t)) {
        last = strrchr(t->valuestring, '.');
        cut_copy(type, tsize, last ? last + 1 : t->valuestring);
    }
    /* /api errors put error_type and messages at the top. */
    t = cJSON_GetObjectItemCaseSensitive(root, "error_type");
    if (cJSON_IsString(t) && type && tsize > 0 && !type[0])
        cut_copy(type, tsize, t->valuestring);
    value = cJSON_GetObjectItemCaseSensitive(root, "value");
    msgs = cJSON_GetObjectItemCaseSensitive(cJSON_IsObject(value) ? value : root, "messages");
    m = cJSON_IsArray(msgs) ? cJSON_GetArrayItem(msgs, 0) : NULL;
    if (cJSON_IsObject(m)) {
        t = cJSON_GetObjectItemCaseSensitive(m, "default_message");
        if (cJSON_IsString(t))
            cut_copy(msg, msize, t->valuestring);
    } else if (cJSON_IsString(m)) {
        cut_copy(msg, msize, m->valuestring);
    }
    cJSON_Delete(root);
}

/* ---- the client ---- */

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
    struct curl_slist *hdrs;
    vmg_http_xfer *xfer;
    unsigned gen; /* the session generation the request carried */
};

struct op {
    vs_rest *r;
    struct op *prev, *next; /* in r->ops: every op not finished */
    struct op *qnext;       /* in r->runq or r->sendq */
    enum op_kind kind;
    bool create;     /* make the category and tag when missing */
    bool queued;     /* in runq or sendq */
    bool from_cache; /* tag_id came from memory (may be stale) */
    int restarts;    /* lookups redone after a 404 */
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
    struct cache_ent *prev, *next; /* newest first */
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
    struct cache_ent *cache, *cache_tail;
    size_t n_cache;

    struct op *ops;
    size_t n_ops;
    struct op *runq, *runq_tail;
    size_t n_runq;
    struct op *sendq, *sendq_tail;
    int inflight;
    int pumping;
    bool pump_again;

    bool closing;
    void (*closed)(void *data);
    void *closed_data;
};

static void pump(vs_rest *r);
static void op_run(struct op *op);

/* ---- cache of tag ids by tag name ---- */

static struct cache_ent *cache_find(vs_rest *r, const char *name)
{
    for (struct cache_ent *e = r->cache; e; e = e->next)
        if (strcmp(e->name, name) == 0)
            return e;
    return NULL;
}

static bool cache_has_id(vs_rest *r, const char *id)
{
    for (struct cache_ent *e = r->cache; e; e = e->next)
        if (strcmp(e->id, id) == 0)
            return true;
    return false;
}

static void cache_unlink(vs_rest *r, struct cache_ent *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        r->cache = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        r->cache_tail = e->prev;
    r->n_cache--;
}

static void cache_drop(vs_rest *r, const char *name)
{
    struct cache_ent *e = cache_find(r, name);

    if (!e)
        return;
    cache_unlink(r, e);
    free(e->name);
    free(e->id);
    free(e);
}

/* cache_put remembers name -> id; a failed allocation only forgets. */
static void cache_put(vs_rest *r, const char *name, const char *id)
{
    struct cache_ent *e;

    cache_drop(r, name);
    e = calloc(1, sizeof(*e));
    if (!e)
        return;
    e->name = strdup(name);
    e->id = strdup(id);
    if (!e->name || !e->id) {
        free(e->name);
        free(e->id);
        free(e);
        return;
    }
    e->next = r->cache;
    if (r->cache)
        r->cache->prev = e;
    else
        r->cache_tail = e;
    r->cache = e;
    r->n_cache++;
    if (r->n_cache > VS_REST_CACHE_MAX) {
        struct cache_ent *old = r->cache_tail;

        cache_unlink(r, old);
        free(old->name);
        free(old->id);
        free(old);
    }
}

static void cache_clear(vs_rest *r)
{
    while (r->cache) {
        struct cache_ent *e = r->cache;

        cache_unlink(r, e);
        free(e->name);
        free(e->id);
        free(e);
    }
}

/* ---- the sticky unavailable state ---- */

static void disable(vs_rest *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void disable(vs_rest *r, const char *fmt, ...)
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
    vs_rest *r = op->r;

    if (op->prev)
        op->prev->next = op->next;
    else
        r->ops = op->next;
    if (op->next)
        op->next->prev = op->prev;
    op->prev = op->next = NULL;
    r->n_ops--;
}

/* queue_remove takes op out of a queue; false when it was not there. */
static bool queue_remove(struct op **head, struct op **tail, struct op *op)
{
    struct op *prev = NULL;

    for (struct op *o = *head; o; prev = o, o = o->qnext) {
        if (o != op)
            continue;
        if (prev)
            prev->qnext = o->qnext;
        else
            *head = o->qnext;
        if (*tail == o)
            *tail = prev;
        o->qnext = NULL;
        return true;
    }
    return false;
}

static void queue_push(struct op **head, struct op **tail, struct op *op)
{
    op->qnext = NULL;
    if (*tail)
        (*tail)->qnext = op;
    else
        *head = op;
    *tail = op;
}

static struct op *queue_pop(struct op **head, struct op **tail)
{
    struct op *op = *head;

    if (!op)
        return NULL;
    *head = op->qnext;
    if (!*head)
        *tail = NULL;
    op->qnext = NULL;
    return op;
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
static void op_finish_full(struct op *op, int err, const char *msg, const char *id,
                           const struct vs_rest_object *objs, size_t n)
{
    vs_rest *r = op->r;
    struct vs_rest_result res = {.err = err, .msg = err ? (msg ? msg : vmg_strerror(err)) : ""};

    if (op->queued) {
        if (queue_remove(&r->runq, &r->runq_tail, op))
            r->n_runq--;
        else
            (void)queue_remove(&r->sendq, &r->sendq_tail, op);
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

static void op_finish(struct op *op, int err, const char *msg)
{
    op_finish_full(op, err, msg, NULL, NULL, 0);
}

static void op_failf(struct op *op, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void op_failf(struct op *op, int err, const char *fmt, ...)
{
    char msg[VS_REST_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    op_finish(op, err, msg);
}

static void op_unavailable(struct op *op)
{
    op_failf(op, VS_REST_EUNAVAILABLE, "tagging unavailable: %s", op->r->reason);
}

/* ---- requests ---- */

static void on_xfer_done(void *data, const struct vmg_http_result *res);

/* make_easy makes an easy handle for method on url with the session
 * header (when session is not NULL) and a JSON body (when body is not
 * NULL). Returns NULL on failure; *hdrs gets the header list to free after
 * the transfer. */
static CURL *make_easy(vs_rest *r, const char *method, const char *url, const char *session,
                       const char *body, long timeout_ms, struct curl_slist **hdrs)
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
        curl_easy_setopt(easy, CURLOPT_HTTPHEADER, h) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, r->connect_timeout_ms) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK)
        goto fail;
    if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0 &&
        curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method) != CURLE_OK)
        goto fail;
    if (strcmp(method, "POST") == 0 &&
        (curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, body ? (long)strlen(body) : 0L) !=
             CURLE_OK ||
         curl_easy_setopt(easy, CURLOPT_COPYPOSTFIELDS, body ? body : "") != CURLE_OK))
        goto fail;
    *hdrs = h;
    return easy;
fail:
    vmg_http_headers_free(h);
    curl_easy_cleanup(easy);
    return NULL;
}

/* start_xfer prepares and starts easy for x. Returns 0 or a negative code;
 * on failure easy is cleaned up and x freed. */
static int start_xfer(vs_rest *r, struct xctx *x, CURL *easy)
{
    int err;

    if (r->prepare)
        r->prepare(r->prepare_data, easy);
    err = vmg_http_start(r->http, easy, r->max_body, NULL, on_xfer_done, x, &x->xfer);
    if (err < 0) {
        vmg_http_headers_free(x->hdrs);
        free(x);
    }
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
    CURL *easy;
    int err;

    x = calloc(1, sizeof(*x));
    if (!x) {
        op_finish(op, -ENOMEM, NULL);
        return;
    }
    x->r = r;
    x->op = op;
    x->kind = X_OP;
    x->gen = r->gen;
    url_of(r, op->path, url, sizeof(url));
    easy = make_easy(r, op->method, url, r->session, op->body, r->timeout_ms, &x->hdrs);
    if (!easy) {
        free(x);
        op_finish(op, -ENOMEM, NULL);
        return;
    }
    op->x = x;
    r->inflight++;
    err = start_xfer(r, x, easy);
    if (err < 0) {
        op->x = NULL;
        r->inflight--;
        op_failf(op, err, "cannot start a vCenter REST request: %s", vmg_strerror(err));
    }
}

/* op_send sets op's request and queues it to be sent. body is taken over
 * (may be NULL). */
static void op_send(struct op *op, enum step step, const char *method, char *body, const char *fmt,
                    ...) __attribute__((format(printf, 5, 6)));

static void op_send(struct op *op, enum step step, const char *method, char *body, const char *fmt,
                    ...)
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
        op_finish(op, -EINVAL, "request path too long");
        return;
    }
    op->queued = true;
    queue_push(&r->sendq, &r->sendq_tail, op);
    pump(r);
}

/* send_list_tags asks for the ids of the category's tags; the body repeats
 * the category id, as vCenter's own clients send it. */
static void send_list_tags(struct op *op)
{
    vs_rest *r = op->r;
    char *body = NULL;
    int err = vs_rest_body_list_tags(r->cat_id, &body);

    if (err < 0) {
        op_finish(op, err, NULL);
        return;
    }
    op_send(op, ST_TAG_LIST, "POST", body, TAG_PATH "/id:%s?~action=list-tags-for-category",
            r->cat_id);
}

static void fail_sendq(vs_rest *r, int err, const char *msg)
{
    struct op *op;

    while ((op = queue_pop(&r->sendq, &r->sendq_tail))) {
        op->queued = false;
        if (err == VS_REST_EUNAVAILABLE)
            op_unavailable(op);
        else
            op_finish(op, err, msg);
    }
}

static void start_login(vs_rest *r)
{
    char url[BASE_URL_MAX + PATH_MAX_LEN + 8];
    struct xctx *x;
    CURL *easy;
    int err = -ENOMEM;

    x = calloc(1, sizeof(*x));
    if (!x)
        goto fail;
    x->r = r;
    x->kind = X_LOGIN;
    url_of(r, SESSION_PATH, url, sizeof(url));
    easy = make_easy(r, "POST", url, NULL, NULL, r->timeout_ms, &x->hdrs);
    if (!easy) {
        free(x);
        goto fail;
    }
    /* Ask for no cookie: the id travels in the header only. The list
     * keeps its head when appended to. */
    if (!curl_slist_append(x->hdrs, "vmware-use-header-authn: true") ||
        curl_easy_setopt(easy, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_USERNAME, r->user) != CURLE_OK ||
        curl_easy_setopt(easy, CURLOPT_PASSWORD, r->password) != CURLE_OK) {
        vmg_http_headers_free(x->hdrs);
        curl_easy_cleanup(easy);
        free(x);
        goto fail;
    }
    r->login = x;
    err = start_xfer(r, x, easy);
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
            if (r->sendq && !r->login)
                start_login(r);
        } else {
            while (r->inflight < r->max_inflight && !r->closing && r->session[0] &&
                   (op = queue_pop(&r->sendq, &r->sendq_tail))) {
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
        struct op *op = queue_pop(&r->runq, &r->runq_tail);

        if (!op)
            break;
        r->n_runq--;
        op->queued = false;
        op_run(op);
    }
    if (r->runq && !r->closing)
        (void)uv_timer_start(&r->kick, on_kick, 0, 0);
}

/* ---- the steps of an op ---- */

static void http_failf(struct op *op, const struct vmg_http_result *res, const char *what)
{
    char type[64], msg[256];

    vs_rest_parse_error(res->body, res->body_len, type, sizeof(type), msg, sizeof(msg));
    op_failf(op, VMG_EHTTP, "vCenter answered HTTP %ld to %s%s%s%s%s", res->status, what,
             type[0] ? ": " : "", type, msg[0] ? ": " : "", msg);
}

static bool is_error_type(const struct vmg_http_result *res, const char *want)
{
    char type[64];

    vs_rest_parse_error(res->body, res->body_len, type, sizeof(type), NULL, 0);
    return strcmp(type, want) == 0;
}

/* op_absent finishes an op that needs no tag when there is none. */
static void op_absent(struct op *op)
{
    if (op->kind == OP_ATTACH || op->kind == OP_TAG || op->kind == OP_CATEGORY)
        op_failf(op, VMG_ENOTFOUND, "tag %s vanished while being made", op->tag_name);
    else
        op_finish(op, 0, NULL);
}

/* op_restart redoes the lookup once an id turned out stale (404). */
static void op_restart(struct op *op, bool category)
{
    vs_rest *r = op->r;

    if (op->restarts >= MAX_RESTARTS) {
        op_failf(op, VMG_ENOTFOUND, "the tag %s or its category keeps vanishing", op->tag_name);
        return;
    }
    op->restarts++;
    if (category)
        r->cat_id[0] = '\0';
    cache_drop(r, op->tag_name);
    op->tag_id[0] = '\0';
    op->from_cache = false;
    op_run(op);
}

static void take_ids(struct op *op, const struct vmg_http_result *res, enum step next)
{
    int err;

    vs_rest_ids_free(op->ids, op->n_ids);
    op->ids = NULL;
    op->n_ids = op->idx = 0;
    err = vs_rest_parse_ids(res->body, res->body_len, &op->ids, &op->n_ids);
    if (err < 0) {
        op_failf(op, err, "cannot read the list vCenter returned: %s", vmg_strerror(err));
        return;
    }
    op->step = next;
    op_run(op);
}

static void scan_done(struct op *op)
{
    vs_rest_ids_free(op->ids, op->n_ids);
    op->ids = NULL;
    op->n_ids = op->idx = 0;
}

static void on_cat_get(struct op *op, const struct vmg_http_result *res)
{
    vs_rest *r = op->r;
    struct vs_rest_category c;
    int err;

    if (res->status == 404) {
        op->idx++;
        op_run(op);
        return;
    }
    if (res->status != 200) {
        http_failf(op, res, "reading a tag category");
        return;
    }
    err = vs_rest_parse_category(res->body, res->body_len, &c);
    if (err < 0) {
        op_failf(op, err, "cannot read a tag category: %s", vmg_strerror(err));
        return;
    }
    if (strcmp(c.name, r->category) != 0) {
        op->idx++;
        op_run(op);
        return;
    }
    scan_done(op);
    if (!c.vm_associable) {
        disable(r, "the tag category %s exists but its tags cannot be attached to VMs",
                r->category);
        op_unavailable(op);
        return;
    }
    memcpy(r->cat_id, c.id, sizeof(r->cat_id));
    op->step = ST_NONE;
    op_run(op);
}

static void on_tag_get(struct op *op, const struct vmg_http_result *res)
{
    vs_rest *r = op->r;
    struct vs_rest_tag t;
    int err;

    if (res->status == 404) {
        op->idx++;
        op_run(op);
        return;
    }
    if (res->status != 200) {
        http_failf(op, res, "reading a tag");
        return;
    }
    err = vs_rest_parse_tag(res->body, res->body_len, &t);
    if (err < 0) {
        op_failf(op, err, "cannot read a tag: %s", vmg_strerror(err));
        return;
    }
    /* Every tag read is remembered: one pass serves the other groups. */
    if (strcmp(t.category_id, r->cat_id) == 0)
        cache_put(r, t.name, t.id);
    if (strcmp(t.name, op->tag_name) != 0 || strcmp(t.category_id, r->cat_id) != 0) {
        op->idx++;
        op_run(op);
        return;
    }
    scan_done(op);
    memcpy(op->tag_id, t.id, sizeof(op->tag_id));
    op->step = ST_NONE;
    op_run(op);
}

static void on_act(struct op *op, const struct vmg_http_result *res)
{
    vs_rest *r = op->r;
    struct vs_rest_object *objs = NULL;
    size_t n = 0;
    int err;

    if (res->status == 404) {
        /* The tag is gone. A remembered id may be stale: look again. */
        if (op->from_cache || op->kind == OP_ATTACH) {
            op_restart(op, false);
            return;
        }
        cache_drop(r, op->tag_name);
        op_finish(op, 0, NULL);
        return;
    }
    if (res->status == 403 && (op->kind == OP_ATTACH || op->kind == OP_DETACH)) {
        op_failf(op, VMG_EFORBIDDEN,
                 "vCenter refused to %s tag %s %s VM %s (HTTP 403): the VM is gone, or the user "
                 "may not tag it",
                 op->kind == OP_ATTACH ? "attach" : "detach", op->tag_name,
                 op->kind == OP_ATTACH ? "to" : "from", op->vm.id);
        return;
    }
    if (res->status < 200 || res->status > 299) {
        http_failf(op, res,
                   op->kind == OP_ATTACH   ? "attaching a tag"
                   : op->kind == OP_DETACH ? "detaching a tag"
                   : op->kind == OP_LIST   ? "listing the objects of a tag"
                                           : "deleting a tag");
        return;
    }
    switch (op->kind) {
    case OP_LIST:
        err = vs_rest_parse_objects(res->body, res->body_len, &objs, &n);
        if (err < 0) {
            op_failf(op, err, "cannot read the objects of tag %s: %s", op->tag_name,
                     vmg_strerror(err));
            return;
        }
        op_finish_full(op, 0, NULL, NULL, objs, n);
        free(objs);
        return;
    case OP_DELETE:
        cache_drop(r, op->tag_name);
        op_finish(op, 0, NULL);
        return;
    default:
        op_finish(op, 0, NULL);
        return;
    }
}

/* on_response handles a response to op's request that is neither a
 * transport error nor a 401. */
static void on_response(struct op *op, const struct vmg_http_result *res)
{
    vs_rest *r = op->r;
    char id[VS_REST_ID_MAX + 1];
    int err;

    if (res->status == 403 && op->step != ST_ACT) {
        disable(r, "vCenter refused the user %s access to tagging (HTTP 403 on %s %s)", r->user,
                op->method, op->path);
        op_unavailable(op);
        return;
    }
    switch (op->step) {
    case ST_SESSION_GET:
        if (res->status != 200) {
            http_failf(op, res, "a session check");
            return;
        }
        op_finish(op, 0, NULL);
        return;
    case ST_CAT_CREATE:
        if (res->status == 200) {
            err = vs_rest_parse_string(res->body, res->body_len, id, sizeof(id));
            if (err < 0) {
                op_failf(op, err, "cannot read the id of the new tag category");
                return;
            }
            memcpy(r->cat_id, id, sizeof(r->cat_id));
            op->step = ST_NONE;
            op_run(op);
        } else if (res->status == 400 && is_error_type(res, "already_exists")) {
            if (r->cat_id[0])
                op_run(op); /* another op found it meanwhile */
            else
                op_send(op, ST_CAT_LIST, "GET", NULL, CATEGORY_PATH);
        } else if (res->status == 404) {
            disable(r, "vCenter has no tagging endpoint at %s%s (HTTP 404)", r->base,
                    CATEGORY_PATH);
            op_unavailable(op);
        } else {
            http_failf(op, res, "creating the tag category");
        }
        return;
    case ST_CAT_LIST:
        if (res->status == 404) {
            disable(r, "vCenter has no tagging endpoint at %s%s (HTTP 404)", r->base,
                    CATEGORY_PATH);
            op_unavailable(op);
        } else if (res->status != 200) {
            http_failf(op, res, "listing tag categories");
        } else {
            take_ids(op, res, ST_CAT_GET);
        }
        return;
    case ST_CAT_GET:
        on_cat_get(op, res);
        return;
    case ST_TAG_CREATE:
        if (res->status == 200) {
            err = vs_rest_parse_string(res->body, res->body_len, id, sizeof(id));
            if (err < 0) {
                op_failf(op, err, "cannot read the id of the new tag %s", op->tag_name);
                return;
            }
            cache_put(r, op->tag_name, id);
            memcpy(op->tag_id, id, sizeof(op->tag_id));
            op->step = ST_NONE;
            op_run(op);
        } else if (res->status == 400 && is_error_type(res, "already_exists")) {
            send_list_tags(op);
        } else if (res->status == 404 ||
                   (res->status == 400 && is_error_type(res, "invalid_argument"))) {
            /* The remembered category is gone. */
            op_restart(op, true);
        } else {
            http_failf(op, res, "creating a tag");
        }
        return;
    case ST_TAG_LIST:
        if (res->status == 404) {
            if (op->create)
                op_restart(op, true);
            else
                op_absent(op);
        } else if (res->status != 200) {
            http_failf(op, res, "listing the tags of the category");
        } else {
            take_ids(op, res, ST_TAG_GET);
        }
        return;
    case ST_TAG_GET:
        on_tag_get(op, res);
        return;
    case ST_ACT:
        on_act(op, res);
        return;
    case ST_NONE:
        break;
    }
    op_finish(op, -EINVAL, "internal error: a response without a request");
}

/* op_run makes the next step of op, whose last response (if any) was
 * handled. */
static void op_run(struct op *op)
{
    vs_rest *r = op->r;
    struct cache_ent *e;
    char *body = NULL;
    int err;

    if (r->disabled) {
        op_unavailable(op);
        return;
    }
    if (op->kind == OP_LOGIN) {
        op_send(op, ST_SESSION_GET, "POST", NULL, SESSION_PATH "?~action=get");
        return;
    }
    /* The category. Another op may have learnt it meanwhile. */
    if (op->step == ST_CAT_GET && r->cat_id[0]) {
        scan_done(op);
        op->step = ST_NONE;
    }
    if (op->step == ST_CAT_GET) {
        if (op->idx < op->n_ids) {
            op_send(op, ST_CAT_GET, "GET", NULL, CATEGORY_PATH "/id:%s", op->ids[op->idx]);
            return;
        }
        scan_done(op);
        op->step = ST_NONE;
        if (!op->create) {
            op_absent(op);
            return;
        }
        /* It said "already exists" but is not listed: it was deleted
         * meanwhile. Make it again. */
        if (op->restarts++ >= MAX_RESTARTS) {
            op_failf(op, VMG_ENOTFOUND, "the tag category %s keeps vanishing", r->category);
            return;
        }
    }
    if (!r->cat_id[0]) {
        if (!op->create) {
            op_send(op, ST_CAT_LIST, "GET", NULL, CATEGORY_PATH);
            return;
        }
        err = vs_rest_body_category(r->category, r->category_desc, r->multiple, &body);
        if (err < 0) {
            op_finish(op, err, NULL);
            return;
        }
        op_send(op, ST_CAT_CREATE, "POST", body, CATEGORY_PATH);
        return;
    }
    if (op->kind == OP_CATEGORY) {
        op_finish_full(op, 0, NULL, r->cat_id, NULL, 0);
        return;
    }
    /* The tag. */
    if (op->step == ST_TAG_GET) {
        /* Ops looking for different tags at once read the same list: what
         * one learnt (into the cache) spares the others a GET. */
        while (op->idx < op->n_ids && !cache_find(r, op->tag_name)) {
            if (!cache_has_id(r, op->ids[op->idx])) {
                op_send(op, ST_TAG_GET, "GET", NULL, TAG_PATH "/id:%s", op->ids[op->idx]);
                return;
            }
            op->idx++;
        }
        scan_done(op);
        op->step = ST_NONE;
        if (cache_find(r, op->tag_name)) {
            /* Found by another op's reading: go on below. */
        } else if (!op->create) {
            op_absent(op);
            return;
        } else if (op->restarts++ >= MAX_RESTARTS) {
            op_failf(op, VMG_ENOTFOUND, "the tag %s keeps vanishing", op->tag_name);
            return;
        }
    }
    if (!op->tag_id[0]) {
        e = cache_find(r, op->tag_name);
        if (e) {
            snprintf(op->tag_id, sizeof(op->tag_id), "%s", e->id);
            op->from_cache = true;
        } else if (op->create) {
            err =
                vs_rest_body_tag(op->tag_name, op->tag_desc ? op->tag_desc : "", r->cat_id, &body);
            if (err < 0) {
                op_finish(op, err, NULL);
                return;
            }
            op_send(op, ST_TAG_CREATE, "POST", body, TAG_PATH);
            return;
        } else {
            send_list_tags(op);
            return;
        }
    }
    /* The op's own request. */
    switch (op->kind) {
    case OP_TAG:
        op_finish_full(op, 0, NULL, op->tag_id, NULL, 0);
        return;
    case OP_ATTACH:
    case OP_DETACH:
        err = vs_rest_body_object(&op->vm, &body);
        if (err < 0) {
            op_finish(op, err, NULL);
            return;
        }
        op_send(op, ST_ACT, "POST", body, ASSOC_PATH "/id:%s?~action=%s", op->tag_id,
                op->kind == OP_ATTACH ? "attach" : "detach");
        return;
    case OP_LIST:
        /* vcsim wants a JSON body even for an operation without input. */
        body = strdup("{}");
        if (!body) {
            op_finish(op, -ENOMEM, NULL);
            return;
        }
        op_send(op, ST_ACT, "POST", body, ASSOC_PATH "/id:%s?~action=list-attached-objects",
                op->tag_id);
        return;
    case OP_DELETE:
        op_send(op, ST_ACT, "DELETE", NULL, TAG_PATH "/id:%s", op->tag_id);
        return;
    default:
        op_finish(op, -EINVAL, "internal error: unknown operation");
        return;
    }
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
            disable(r, "cannot reach the vCenter REST API at %s: %s", r->base, res->errmsg);
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
            disable(r, "the answer of %s%s to a login is not a session id", r->base, SESSION_PATH);
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
        disable(r,
                "vCenter refused the REST login of user %s (HTTP 401): wrong user name or "
                "password",
                r->user);
        break;
    case 403:
        disable(r, "vCenter refused the user %s the REST API (HTTP 403)", r->user);
        break;
    case 404:
    case 405:
    case 501:
        disable(r, "no vSphere Automation REST endpoint at %s (HTTP %ld to POST %s)", r->base,
                res->status, SESSION_PATH);
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

    vmg_http_headers_free(x->hdrs);
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
        op_failf(op, res->err, "vCenter REST %s %s: %s", op->method, op->path, res->errmsg);
    } else if (res->status == 401) {
        if (gen == r->gen)
            r->session[0] = '\0';
        if (!op->retried) {
            /* Expired or lost (vCenter restarted): log in, send again. */
            op->retried = true;
            op->queued = true;
            queue_push(&r->sendq, &r->sendq_tail, op);
        } else {
            disable(r, "vCenter answered HTTP 401 to %s %s right after a new login", op->method,
                    op->path);
            op_unavailable(op);
        }
    } else {
        on_response(op, res);
    }
    pump(r);
}

/* ---- life cycle ---- */

static void on_kick_closed(uv_handle_t *h)
{
    vs_rest *r = h->data;
    void (*closed)(void *) = r->closed;
    void *closed_data = r->closed_data;

    cache_clear(r);
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
    struct xctx *x;
    CURL *easy;

    if (!r || r->closing)
        return;
    r->closing = true;
    r->closed = closed;
    r->closed_data = data;
    (void)uv_timer_stop(&r->kick);
    /* Each step removes the head op: a canceled transfer finishes it. */
    while (r->ops) {
        struct op *op = r->ops;

        if (op->x)
            vmg_http_cancel(op->x->xfer);
        else
            op_finish(op, VMG_ECANCELED, "the vCenter REST client was closed");
    }
    r->runq = r->runq_tail = NULL;
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
    easy = make_easy(r, "DELETE", url, r->session, NULL, LOGOUT_TIMEOUT_MS, &x->hdrs);
    r->session[0] = '\0';
    if (!easy) {
        free(x);
        teardown(r);
        return;
    }
    r->logout = x;
    if (start_xfer(r, x, easy) < 0) {
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
    op->next = r->ops;
    if (r->ops)
        r->ops->prev = op;
    r->ops = op;
    r->n_ops++;
    op->queued = true;
    queue_push(&r->runq, &r->runq_tail, op);
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
