/* finder.c: inventory paths and container listings, each a small chain of
 * vs_call requests driven by one reply handler. */
#include "vsphere/finder.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/str.h"

#define TOKEN_MAX 512

enum fstep { F_LOGIN, F_PATH_ABS, F_PATH_CHILD, F_VIEW, F_RETRIEVE, F_GET };

struct vs_find {
    vs_session *s;
    enum fstep step;
    enum fstep first; /* the first step, once logged in */
    struct vim_moref container;
    vs_req *req;
    void *data;
    /* paths */
    char path[VS_PATH_MAX];
    size_t pos;
    struct vim_moref cur;
    vs_path_cb pcb;
    /* listings */
    enum vs_list_kind kind;
    struct vim_moref view;
    bool have_view;
    struct vs_found *found;
    size_t n, cap, max;
    vs_list_cb lcb;
    int walk_err;
};

/* ---- Builders ---- */

int vs_build_find_child(const struct vim_moref *search_index, const struct vim_moref *entity,
                        const char *name, char **ret_buf, size_t *ret_len)
{
    soap_req *req;
    int r;

    if (!search_index || !entity || !name || !*name || !ret_buf || !ret_len)
        return -EINVAL;
    req = soap_req_new("FindChild", search_index->type, search_index->value);
    if (!req)
        return -ENOMEM;
    soap_add_moref(soap_req_method(req), "entity", entity->type, entity->value);
    soap_add_text(soap_req_method(req), "name", name);
    r = soap_req_serialize(req, ret_buf, ret_len);
    soap_req_free(req);
    return r;
}

struct kind_spec {
    const char *types[2];
    size_t ntypes;
    const char *paths[4];
    size_t npaths;
};

static const struct kind_spec specs[] = {
    [VS_LIST_DATACENTERS] = {{"Datacenter"}, 1, {"name", "parent", "vmFolder", "hostFolder"}, 4},
    [VS_LIST_POOLS] = {{"ResourcePool", "ComputeResource"}, 2, {"name", "parent"}, 2},
    [VS_LIST_DATASTORES] = {{"Datastore"}, 1, {"name"}, 1},
    [VS_LIST_VMS] = {{"VirtualMachine"}, 1, {"name", "parent", "config.template"}, 3},
};

int vs_build_retrieve_view(const struct vim_moref *pc, const struct vim_moref *view,
                           enum vs_list_kind kind, char **ret_buf, size_t *ret_len)
{
    const struct kind_spec *k;
    soap_req *req;
    xmlNode *m, *spec, *os, *ts;
    int r;

    if (!pc || !view || (unsigned)kind > VS_LIST_VMS || !ret_buf || !ret_len)
        return -EINVAL;
    k = &specs[kind];
    req = soap_req_new("RetrievePropertiesEx", pc->type, pc->value);
    if (!req)
        return -ENOMEM;
    m = soap_req_method(req);
    spec = soap_add_text(m, "specSet", "");
    for (size_t t = 0; t < k->ntypes; t++) {
        xmlNode *ps = soap_add_text(spec, "propSet", "");
        soap_add_text(ps, "type", k->types[t]);
        soap_add_bool(ps, "all", false);
        for (size_t i = 0; i < k->npaths; i++)
            soap_add_text(ps, "pathSet", k->paths[i]);
    }
    os = soap_add_text(spec, "objectSet", "");
    soap_add_moref(os, "obj", view->type, view->value);
    soap_add_bool(os, "skip", true);
    ts = soap_add_typed(os, "selectSet", "TraversalSpec");
    soap_add_text(ts, "name", "traverseView");
    soap_add_text(ts, "type", "ContainerView");
    soap_add_text(ts, "path", "view");
    soap_add_bool(ts, "skip", false);
    soap_add_text(m, "options", "");
    r = soap_req_serialize(req, ret_buf, ret_len);
    soap_req_free(req);
    return r;
}

static void ignore_reply(void *data, const struct vs_reply *r)
{
    (void)data;
    (void)r;
}

int vs_fire_and_forget(vs_session *s, const char *method, char *buf, size_t len)
{
    return vs_call(s, method, buf, len, NULL, ignore_reply, NULL, NULL);
}

/* ---- The chain ---- */

static void on_reply(void *data, const struct vs_reply *r);
static int begin(vs_find *f);

static int send_req(vs_find *f, const char *method, char *buf, size_t len, bool large)
{
    struct vs_call_opts o = {.max_response = large ? VS_CALL_MAX_RESPONSE_LARGE : 0};

    return vs_call(f->s, method, buf, len, &o, on_reply, f, &f->req);
}

static void drop_view(vs_find *f)
{
    char *buf = NULL;
    size_t len = 0;

    if (!f->have_view)
        return;
    f->have_view = false;
    if (vim_req_destroy_view(&f->view, &buf, &len) == 0)
        (void)vs_fire_and_forget(f->s, "DestroyView", buf, len);
}

static void end_path(vs_find *f, int err, const char *msg, const struct vim_moref *ref)
{
    f->pcb(f->data, err, msg ? msg : (err ? vmg_strerror(err) : ""), err ? NULL : ref);
    free(f);
}

static void end_list(vs_find *f, int err, const char *msg)
{
    drop_view(f);
    f->lcb(f->data, err, msg ? msg : (err ? vmg_strerror(err) : ""), err ? NULL : f->found,
           err ? 0 : f->n);
    free(f->found);
    free(f);
}

static void end(vs_find *f, int err, const char *msg)
{
    if (f->pcb)
        end_path(f, err, msg, &f->cur);
    else
        end_list(f, err, msg);
}

/* next_child sends FindChild for the next component of a relative path,
 * or ends the walk. Returns 0 when a request is out or the walk ended. */
static void next_child(vs_find *f)
{
    const struct vim_service_content *sc = vs_session_content(f->s);
    char comp[VS_NAME_MAX], *buf = NULL;
    size_t len = 0, n;
    int r;

    while (f->path[f->pos] == '/')
        f->pos++;
    if (!f->path[f->pos]) {
        end_path(f, 0, NULL, &f->cur);
        return;
    }
    n = strcspn(f->path + f->pos, "/");
    if (n >= sizeof(comp)) {
        end_path(f, -EINVAL, "a path component is too long", NULL);
        return;
    }
    memcpy(comp, f->path + f->pos, n);
    comp[n] = '\0';
    f->pos += n;
    if (!sc) {
        end_path(f, VMG_ETRANSPORT, "not logged in to vCenter", NULL);
        return;
    }
    r = vs_build_find_child(&sc->search_index, &f->cur, comp, &buf, &len);
    if (r == 0)
        r = send_req(f, "FindChild", buf, len, false);
    if (r < 0)
        end_path(f, r, "could not send FindChild", NULL);
}

static int found_cb(void *arg, const struct vim_object_update *u)
{
    vs_find *f = arg;
    struct vs_found *x;

    if (f->n > 0 && strcmp(f->found[f->n - 1].ref.value, u->obj.value) == 0 &&
        strcmp(f->found[f->n - 1].ref.type, u->obj.type) == 0) {
        x = &f->found[f->n - 1];
    } else {
        if (f->n >= f->max)
            return VMG_ETOOBIG;
        if (f->n == f->cap) {
            size_t cap = f->cap ? f->cap * 2 : 16;
            struct vs_found *nf = realloc(f->found, cap * sizeof(*nf));
            if (!nf)
                return -ENOMEM;
            f->found = nf;
            f->cap = cap;
        }
        x = &f->found[f->n++];
        memset(x, 0, sizeof(*x));
        x->ref = u->obj;
    }
    for (size_t i = 0; i < u->n_changes; i++) {
        const struct vim_change *c = &u->changes[i];
        if (strcmp(c->name, "name") == 0 && c->kind == VIM_VAL_STRING)
            vmg_putf(x->name, sizeof(x->name), "%s", c->str);
        else if (c->kind == VIM_VAL_MOREF && strcmp(c->name, "parent") == 0)
            (void)vim_moref_set(&x->parent, c->ref_type, c->ref_value);
        else if (c->kind == VIM_VAL_MOREF && strcmp(c->name, "vmFolder") == 0)
            (void)vim_moref_set(&x->vm_folder, c->ref_type, c->ref_value);
        else if (c->kind == VIM_VAL_MOREF && strcmp(c->name, "hostFolder") == 0)
            (void)vim_moref_set(&x->host_folder, c->ref_type, c->ref_value);
        else if (c->kind == VIM_VAL_BOOL && strcmp(c->name, "config.template") == 0)
            x->is_template = c->b;
    }
    return 0;
}

static void on_reply(void *data, const struct vs_reply *r)
{
    vs_find *f = data;
    const struct vim_service_content *sc = vs_session_content(f->s);
    char msg[600], token[TOKEN_MAX], *buf = NULL;
    size_t len = 0;
    int e;

    f->req = NULL;
    if (r->err == VMG_EFAULT && strcmp(r->fault->type, "ManagedObjectNotFound") == 0) {
        end(f, VMG_ENOTFOUND, r->message);
        return;
    }
    if (r->err) {
        end(f, r->err, r->message);
        return;
    }
    switch (f->step) {
    case F_LOGIN:
        e = begin(f);
        if (e < 0)
            end(f, e, "could not send a request to vCenter");
        return;
    case F_PATH_ABS:
    case F_PATH_CHILD:
        e = vim_decode_moref(r->resp, &f->cur);
        if (e == VMG_ENOTFOUND) {
            vmg_putf(msg, sizeof(msg), "%s not found", f->path);
            end_path(f, VMG_ENOTFOUND, msg, NULL);
        } else if (e < 0) {
            end_path(f, e, "vCenter sent an unreadable answer to a search", NULL);
        } else if (f->step == F_PATH_ABS) {
            end_path(f, 0, NULL, &f->cur);
        } else {
            next_child(f);
        }
        return;
    case F_VIEW:
        if (vim_decode_moref(r->resp, &f->view) < 0 || !sc) {
            end_list(f, VMG_EPARSE, "vCenter sent an unreadable ContainerView");
            return;
        }
        f->have_view = true;
        f->step = F_RETRIEVE;
        e = vs_build_retrieve_view(&sc->property_collector, &f->view, f->kind, &buf, &len);
        if (e == 0)
            e = send_req(f, "RetrievePropertiesEx", buf, len, true);
        if (e < 0)
            end_list(f, e, "could not send RetrievePropertiesEx");
        return;
    case F_RETRIEVE:
    case F_GET:
        e = vim_decode_retrieve_result(r->resp, found_cb, f, token, sizeof(token));
        if (e < 0) {
            end_list(f, e,
                     e == VMG_ETOOBIG ? "too many objects in the listing"
                                      : "vCenter sent an unreadable RetrieveResult");
            return;
        }
        if (f->step == F_GET && f->n == 0) {
            end_list(f, VMG_ENOTFOUND, "the object was not found");
            return;
        }
        if (!token[0] || !sc) {
            end_list(f, 0, NULL);
            return;
        }
        e = vim_req_continue_retrieve_properties_ex(&sc->property_collector, token, &buf, &len);
        if (e == 0)
            e = send_req(f, "ContinueRetrievePropertiesEx", buf, len, true);
        if (e < 0)
            end_list(f, e, "could not send ContinueRetrievePropertiesEx");
        return;
    }
}

/* ---- Starting ---- */

/* first_component sends FindChild for the first component of a relative
 * path (next_child does the others, and may end the walk). */
static int first_component(vs_find *f, const struct vim_service_content *sc)
{
    char comp[VS_NAME_MAX], *buf = NULL;
    size_t len = 0, n;
    int r;

    while (f->path[f->pos] == '/')
        f->pos++;
    n = strcspn(f->path + f->pos, "/");
    if (n == 0 || n >= sizeof(comp))
        return -EINVAL;
    memcpy(comp, f->path + f->pos, n);
    comp[n] = '\0';
    f->pos += n;
    r = vs_build_find_child(&sc->search_index, &f->cur, comp, &buf, &len);
    return r < 0 ? r : send_req(f, "FindChild", buf, len, false);
}

/* begin sends the first request of f, or, before the session has logged
 * in (no ServiceContent yet), a CurrentTime that waits for the login.
 * Returns 0 or the error of sending (the callback is not called then). */
static int begin(vs_find *f)
{
    const struct vim_service_content *sc = vs_session_content(f->s);
    const struct kind_spec *k = &specs[f->kind];
    char *buf = NULL;
    size_t len = 0;
    int r;

    if (!sc) {
        f->step = F_LOGIN;
        r = vim_req_current_time(&buf, &len);
        return r < 0 ? r : send_req(f, "CurrentTime", buf, len, false);
    }
    f->step = f->first;
    switch (f->first) {
    case F_PATH_ABS: {
        const char *p = f->path;
        while (*p == '/')
            p++;
        if (!*p)
            return -EINVAL;
        r = vim_req_find_by_inventory_path(&sc->search_index, p, &buf, &len);
        return r < 0 ? r : send_req(f, "FindByInventoryPath", buf, len, false);
    }
    case F_PATH_CHILD:
        return first_component(f, sc);
    case F_VIEW:
        r = vim_req_create_container_view(&sc->view_manager, &f->container, k->types, k->ntypes,
                                          true, &buf, &len);
        return r < 0 ? r : send_req(f, "CreateContainerView", buf, len, false);
    case F_GET:
        r = vim_req_retrieve_properties_ex(&sc->property_collector, &f->container, k->paths,
                                           k->npaths, 0, &buf, &len);
        return r < 0 ? r : send_req(f, "RetrievePropertiesEx", buf, len, false);
    default:
        return -EINVAL;
    }
}

/* ---- Public ---- */

int vs_find_path(vs_session *s, const struct vim_moref *start, const char *path, vs_path_cb cb,
                 void *data, vs_find **ret)
{
    vs_find *f;
    const char *p = path;
    int r;

    if (!s || !path || !cb || strlen(path) >= VS_PATH_MAX || (path[0] != '/' && !start))
        return -EINVAL;
    while (*p == '/')
        p++;
    if (!*p)
        return -EINVAL;
    f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    f->s = s;
    f->pcb = cb;
    f->data = data;
    vmg_putf(f->path, sizeof(f->path), "%s", path);
    if (path[0] == '/') {
        f->first = F_PATH_ABS;
    } else {
        f->first = F_PATH_CHILD;
        f->cur = *start;
    }
    r = begin(f);
    if (r < 0) {
        free(f);
        return r;
    }
    if (ret)
        *ret = f;
    return 0;
}

static int list_start(vs_session *s, const struct vim_moref *ref, enum vs_list_kind kind,
                      size_t max, enum fstep first, vs_list_cb cb, void *data, vs_find **ret)
{
    vs_find *f;
    int r;

    if (!s || !ref || !cb || (unsigned)kind > VS_LIST_VMS)
        return -EINVAL;
    f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    f->s = s;
    f->kind = kind;
    f->max = max ? max : VS_FIND_MAX_DEFAULT;
    f->lcb = cb;
    f->data = data;
    f->first = first;
    f->container = *ref;
    r = begin(f);
    if (r < 0) {
        free(f);
        return r;
    }
    if (ret)
        *ret = f;
    return 0;
}

int vs_find_list(vs_session *s, const struct vim_moref *container, enum vs_list_kind kind,
                 size_t max, vs_list_cb cb, void *data, vs_find **ret)
{
    return list_start(s, container, kind, max, F_VIEW, cb, data, ret);
}

int vs_find_get(vs_session *s, const struct vim_moref *ref, enum vs_list_kind kind, vs_list_cb cb,
                void *data, vs_find **ret)
{
    return list_start(s, ref, kind, 1, F_GET, cb, data, ret);
}

void vs_find_cancel(vs_find *f)
{
    if (f && f->req)
        vs_req_cancel(f->req); /* on_reply ends f with VMG_ECANCELED */
}
