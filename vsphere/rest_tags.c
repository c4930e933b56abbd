/* rest_tags.c: the tagging half of vs_rest (see rest.h and the state
 * machine described in rest.c): the tag ids remembered by name, and the
 * steps of an operation: find or make the category, then the tag, then
 * send the operation's own request, and read each answer. */
#include "vsphere/rest_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"

/* ---- cache of tag ids by tag name ---- */

static struct cache_ent *cache_find(vs_rest *r, const char *name)
{
    struct lq *l;

    lq_foreach(l, &r->cache)
    {
        struct cache_ent *e = lq_entry(l, struct cache_ent, link);
        if (strcmp(e->name, name) == 0)
            return e;
    }
    return NULL;
}

static bool cache_has_id(vs_rest *r, const char *id)
{
    struct lq *l;

    lq_foreach(l, &r->cache)
    {
        if (strcmp(lq_entry(l, struct cache_ent, link)->id, id) == 0)
            return true;
    }
    return false;
}

static void cache_unlink(vs_rest *r, struct cache_ent *e)
{
    lq_remove(&e->link);
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
    lq_insert_head(&r->cache, &e->link);
    r->n_cache++;
    if (r->n_cache > VS_REST_CACHE_MAX) {
        struct cache_ent *old = lq_entry(lq_tail(&r->cache), struct cache_ent, link);

        cache_unlink(r, old);
        free(old->name);
        free(old->id);
        free(old);
    }
}

void vs__rest_cache_clear(vs_rest *r)
{
    while (!lq_empty(&r->cache)) {
        struct cache_ent *e = lq_entry(lq_head(&r->cache), struct cache_ent, link);

        cache_unlink(r, e);
        free(e->name);
        free(e->id);
        free(e);
    }
}

/* ---- the steps of an op ---- */

static void http_failf(struct op *op, const struct vmg_http_result *res, const char *what)
{
    char type[64], msg[256];

    vs_rest_parse_error(res->body, res->body_len, type, sizeof(type), msg, sizeof(msg));
    vs__rest_op_failf(op, VMG_EHTTP, "vCenter answered HTTP %ld to %s%s%s%s%s", res->status, what,
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
        vs__rest_op_failf(op, VMG_ENOTFOUND, "tag %s vanished while being made", op->tag_name);
    else
        vs__rest_op_finish(op, 0, NULL);
}

/* op_restart redoes the lookup once an id turned out stale (404). */
static void op_restart(struct op *op, bool category)
{
    vs_rest *r = op->r;

    if (op->restarts >= MAX_RESTARTS) {
        vs__rest_op_failf(op, VMG_ENOTFOUND, "the tag %s or its category keeps vanishing",
                          op->tag_name);
        return;
    }
    op->restarts++;
    if (category)
        r->cat_id[0] = '\0';
    cache_drop(r, op->tag_name);
    op->tag_id[0] = '\0';
    op->from_cache = false;
    vs__rest_op_run(op);
}

static void take_ids(struct op *op, const struct vmg_http_result *res, enum step next)
{
    int err;

    vs_rest_ids_free(op->ids, op->n_ids);
    op->ids = NULL;
    op->n_ids = op->idx = 0;
    err = vs_rest_parse_ids(res->body, res->body_len, &op->ids, &op->n_ids);
    if (err < 0) {
        vs__rest_op_failf(op, err, "cannot read the list vCenter returned: %s", vmg_strerror(err));
        return;
    }
    op->step = next;
    vs__rest_op_run(op);
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
        vs__rest_op_run(op);
        return;
    }
    if (res->status != 200) {
        http_failf(op, res, "reading a tag category");
        return;
    }
    err = vs_rest_parse_category(res->body, res->body_len, &c);
    if (err < 0) {
        vs__rest_op_failf(op, err, "cannot read a tag category: %s", vmg_strerror(err));
        return;
    }
    if (strcmp(c.name, r->category) != 0) {
        op->idx++;
        vs__rest_op_run(op);
        return;
    }
    scan_done(op);
    if (!c.vm_associable) {
        vs__rest_disable(r, "the tag category %s exists but its tags cannot be attached to VMs",
                         r->category);
        vs__rest_op_unavailable(op);
        return;
    }
    memcpy(r->cat_id, c.id, sizeof(r->cat_id));
    op->step = ST_NONE;
    vs__rest_op_run(op);
}

static void on_tag_get(struct op *op, const struct vmg_http_result *res)
{
    vs_rest *r = op->r;
    struct vs_rest_tag t;
    int err;

    if (res->status == 404) {
        op->idx++;
        vs__rest_op_run(op);
        return;
    }
    if (res->status != 200) {
        http_failf(op, res, "reading a tag");
        return;
    }
    err = vs_rest_parse_tag(res->body, res->body_len, &t);
    if (err < 0) {
        vs__rest_op_failf(op, err, "cannot read a tag: %s", vmg_strerror(err));
        return;
    }
    /* Every tag read is remembered: one pass serves the other groups. */
    if (strcmp(t.category_id, r->cat_id) == 0)
        cache_put(r, t.name, t.id);
    if (strcmp(t.name, op->tag_name) != 0 || strcmp(t.category_id, r->cat_id) != 0) {
        op->idx++;
        vs__rest_op_run(op);
        return;
    }
    scan_done(op);
    memcpy(op->tag_id, t.id, sizeof(op->tag_id));
    op->step = ST_NONE;
    vs__rest_op_run(op);
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
        vs__rest_op_finish(op, 0, NULL);
        return;
    }
    if (res->status == 403 && (op->kind == OP_ATTACH || op->kind == OP_DETACH)) {
        vs__rest_op_failf(
            op, VMG_EFORBIDDEN,
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
            vs__rest_op_failf(op, err, "cannot read the objects of tag %s: %s", op->tag_name,
                              vmg_strerror(err));
            return;
        }
        vs__rest_op_finish_full(op, 0, NULL, NULL, objs, n);
        free(objs);
        return;
    case OP_DELETE:
        cache_drop(r, op->tag_name);
        vs__rest_op_finish(op, 0, NULL);
        return;
    default:
        vs__rest_op_finish(op, 0, NULL);
        return;
    }
}

/* on_response handles a response to op's request that is neither a
 * transport error nor a 401. */
void vs__rest_on_response(struct op *op, const struct vmg_http_result *res)
{
    vs_rest *r = op->r;
    char id[VS_REST_ID_MAX + 1];
    int err;

    if (res->status == 403 && op->step != ST_ACT) {
        vs__rest_disable(r, "vCenter refused the user %s access to tagging (HTTP 403 on %s %s)",
                         r->user, op->method, op->path);
        vs__rest_op_unavailable(op);
        return;
    }
    switch (op->step) {
    case ST_SESSION_GET:
        if (res->status != 200) {
            http_failf(op, res, "a session check");
            return;
        }
        vs__rest_op_finish(op, 0, NULL);
        return;
    case ST_CAT_CREATE:
        if (res->status == 200) {
            err = vs_rest_parse_string(res->body, res->body_len, id, sizeof(id));
            if (err < 0) {
                vs__rest_op_failf(op, err, "cannot read the id of the new tag category");
                return;
            }
            memcpy(r->cat_id, id, sizeof(r->cat_id));
            op->step = ST_NONE;
            vs__rest_op_run(op);
        } else if (res->status == 400 && is_error_type(res, "already_exists")) {
            if (r->cat_id[0])
                vs__rest_op_run(op); /* another op found it meanwhile */
            else
                vs__rest_op_send(op, ST_CAT_LIST, "GET", NULL, CATEGORY_PATH);
        } else if (res->status == 404) {
            vs__rest_disable(r, "vCenter has no tagging endpoint at %s%s (HTTP 404)", r->base,
                             CATEGORY_PATH);
            vs__rest_op_unavailable(op);
        } else {
            http_failf(op, res, "creating the tag category");
        }
        return;
    case ST_CAT_LIST:
        if (res->status == 404) {
            vs__rest_disable(r, "vCenter has no tagging endpoint at %s%s (HTTP 404)", r->base,
                             CATEGORY_PATH);
            vs__rest_op_unavailable(op);
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
                vs__rest_op_failf(op, err, "cannot read the id of the new tag %s", op->tag_name);
                return;
            }
            cache_put(r, op->tag_name, id);
            memcpy(op->tag_id, id, sizeof(op->tag_id));
            op->step = ST_NONE;
            vs__rest_op_run(op);
        } else if (res->status == 400 && is_error_type(res, "already_exists")) {
            vs__rest_send_list_tags(op);
        } else if (res->status == 404 ||
                   (res->status == 400 && is_error_type(res, "invalid_argument") &&
                    !op->cat_relooked)) {
            /* The remembered category is gone (vCenter says so with
             * invalid_argument too, which is also its answer to a tag it
             * refuses: only the first one sends the op looking again). */
            op->cat_relooked = true;
            op_restart(op, true);
        } else {
            http_failf(op, res, "creating a tag");
        }
        return;
    case ST_TAG_LIST:
        if (res->status == 404) {
            /* The remembered category is gone, or was made again outside
             * under a new id: one that only reads or removes looks it up
             * again once before it says there is nothing to do. */
            if (op->create || !op->cat_relooked) {
                op->cat_relooked = true;
                op_restart(op, true);
            } else {
                op_absent(op);
            }
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
    vs__rest_op_finish(op, -EINVAL, "internal error: a response without a request");
}

/* op_run makes the next step of op, whose last response (if any) was
 * handled. */
void vs__rest_op_run(struct op *op)
{
    vs_rest *r = op->r;
    struct cache_ent *e;
    char *body = NULL;
    int err;

    if (r->disabled) {
        vs__rest_op_unavailable(op);
        return;
    }
    if (op->kind == OP_LOGIN) {
        vs__rest_op_send(op, ST_SESSION_GET, "POST", NULL, SESSION_PATH "?~action=get");
        return;
    }
    /* The category. Another op may have learnt it meanwhile. */
    if (op->step == ST_CAT_GET && r->cat_id[0]) {
        scan_done(op);
        op->step = ST_NONE;
    }
    if (op->step == ST_CAT_GET) {
        if (op->idx < op->n_ids) {
            vs__rest_op_send(op, ST_CAT_GET, "GET", NULL, CATEGORY_PATH "/id:%s", op->ids[op->idx]);
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
            vs__rest_op_failf(op, VMG_ENOTFOUND, "the tag category %s keeps vanishing",
                              r->category);
            return;
        }
    }
    if (!r->cat_id[0]) {
        if (!op->create) {
            vs__rest_op_send(op, ST_CAT_LIST, "GET", NULL, CATEGORY_PATH);
            return;
        }
        err = vs_rest_body_category(r->category, r->category_desc, r->multiple, &body);
        if (err < 0) {
            vs__rest_op_finish(op, err, NULL);
            return;
        }
        vs__rest_op_send(op, ST_CAT_CREATE, "POST", body, CATEGORY_PATH);
        return;
    }
    if (op->kind == OP_CATEGORY) {
        vs__rest_op_finish_full(op, 0, NULL, r->cat_id, NULL, 0);
        return;
    }
    /* The tag. */
    if (op->step == ST_TAG_GET) {
        /* Ops looking for different tags at once read the same list: what
         * one learnt (into the cache) spares the others a GET. */
        while (op->idx < op->n_ids && !cache_find(r, op->tag_name)) {
            if (!cache_has_id(r, op->ids[op->idx])) {
                vs__rest_op_send(op, ST_TAG_GET, "GET", NULL, TAG_PATH "/id:%s", op->ids[op->idx]);
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
            vs__rest_op_failf(op, VMG_ENOTFOUND, "the tag %s keeps vanishing", op->tag_name);
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
                vs__rest_op_finish(op, err, NULL);
                return;
            }
            vs__rest_op_send(op, ST_TAG_CREATE, "POST", body, TAG_PATH);
            return;
        } else {
            vs__rest_send_list_tags(op);
            return;
        }
    }
    /* The op's own request. */
    switch (op->kind) {
    case OP_TAG:
        vs__rest_op_finish_full(op, 0, NULL, op->tag_id, NULL, 0);
        return;
    case OP_ATTACH:
    case OP_DETACH:
        err = vs_rest_body_object(&op->vm, &body);
        if (err < 0) {
            vs__rest_op_finish(op, err, NULL);
            return;
        }
        vs__rest_op_send(op, ST_ACT, "POST", body, ASSOC_PATH "/id:%s?~action=%s", op->tag_id,
                         op->kind == OP_ATTACH ? "attach" : "detach");
        return;
    case OP_LIST:
        /* vcsim wants a JSON body even for an operation without input. */
        body = strdup("{}");
        if (!body) {
            vs__rest_op_finish(op, -ENOMEM, NULL);
            return;
        }
        vs__rest_op_send(op, ST_ACT, "POST", body,
                         ASSOC_PATH "/id:%s?~action=list-attached-objects", op->tag_id);
        return;
    case OP_DELETE:
        vs__rest_op_send(op, ST_ACT, "DELETE", NULL, TAG_PATH "/id:%s", op->tag_id);
        return;
    default:
        vs__rest_op_finish(op, -EINVAL, "internal error: unknown operation");
        return;
    }
}
