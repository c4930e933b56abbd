/* finder.c: inventory paths, container listings and template lookups, each
 * a small chain of vs_call requests driven by one reply handler. */
#include "vsphere/finder.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/str.h"

#define TOKEN_MAX 512
#define MSG_MAX 768

enum fstep {
    F_LOGIN,
    F_PATH_ABS,
    F_PATH_CHILD,
    F_VIEW,
    F_RETRIEVE,
    F_GET,
    F_T_CHILD, /* a template: FindChild, for the next component or the name */
    F_T_GET,   /* a template: the VM found, read */
};

/* What a template lookup is doing. */
enum tmode {
    T_NONE,
    T_WALK, /* a path, one component at a time from the VM folder */
    T_NAME, /* a name: the VM folder's child of that name, read */
    T_LIST, /* a name: the VM folder tree, listed */
};

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
    /* templates */
    enum tmode tmode;
    vs_path_cb tcb;
    struct vim_moref vm_folder;
    struct vim_moref exclude;
    bool have_exclude;
    char dc_path[VS_PATH_MAX];
    char exclude_label[VS_PATH_MAX + 128];
    char name[VS_PATH_MAX]; /* as the caller gave it, for messages */
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

/* What a kind lists: its types, and the properties read of each (paths[0]
 * also for vs_find_get). */
struct kind_spec {
    const char *types[2];
    size_t ntypes;
    const char *paths[2][4];
    size_t npaths[2];
};

static const struct kind_spec specs[] = {
    [VS_LIST_DATACENTERS] = {{"Datacenter"},
                             1,
                             {{"name", "parent", "vmFolder", "hostFolder"}},
                             {4}},
    [VS_LIST_POOLS] = {{"ResourcePool", "ComputeResource"},
                       2,
                       {{"name", "parent"}, {"name", "parent"}},
                       {2, 2}},
    [VS_LIST_DATASTORES] = {{"Datastore"}, 1, {{"name"}}, {1}},
    [VS_LIST_VMS] = {{"VirtualMachine"}, 1, {{"name", "parent", "config.template"}}, {3}},
    [VS_LIST_VM_TREE] = {{"VirtualMachine", "Folder"},
                         2,
                         {{"name", "parent", "config.template"}, {"name", "parent"}},
                         {3, 2}},
};

int vs_build_retrieve_view(const struct vim_moref *pc, const struct vim_moref *view,
                           enum vs_list_kind kind, char **ret_buf, size_t *ret_len)
{
    const struct kind_spec *k;
    soap_req *req;
    xmlNode *m, *spec, *os, *ts;
    int r;

    if (!pc || !view || (unsigned)kind > VS_LIST_VM_TREE || !ret_buf || !ret_len)
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
        for (size_t i = 0; i < k->npaths[t]; i++)
            soap_add_text(ps, "pathSet", k->paths[t][i]);
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

static void t_listed(vs_find *f, int err, const char *msg);

static void end_list(vs_find *f, int err, const char *msg)
{
    if (f->tmode != T_NONE) {
        t_listed(f, err, msg);
        return;
    }
    drop_view(f);
    f->lcb(f->data, err, msg ? msg : (err ? vmg_strerror(err) : ""), err ? NULL : f->found,
           err ? 0 : f->n);
    free(f->found);
    free(f);
}

static void end_template(vs_find *f, int err, const char *msg);

static void end(vs_find *f, int err, const char *msg)
{
    if (f->tmode != T_NONE)
        end_template(f, err, msg);
    else if (f->pcb)
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

static void t_on_child(vs_find *f, const struct vs_reply *r);
static void t_on_get(vs_find *f, const struct vs_reply *r);

static void on_reply(void *data, const struct vs_reply *r)
{
    vs_find *f = data;
    const struct vim_service_content *sc = vs_session_content(f->s);
    char msg[600], token[TOKEN_MAX], *buf = NULL;
    size_t len = 0;
    int e;

    f->req = NULL;
    if (vs_reply_fault_is(r, "ManagedObjectNotFound")) {
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
    case F_T_CHILD:
        t_on_child(f, r);
        return;
    case F_T_GET:
        t_on_get(f, r);
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

static int t_child(vs_find *f, const struct vim_service_content *sc);

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
        r = vim_req_retrieve_properties_ex(&sc->property_collector, &f->container, k->paths[0],
                                           k->npaths[0], 0, &buf, &len);
        return r < 0 ? r : send_req(f, "RetrievePropertiesEx", buf, len, false);
    case F_T_CHILD:
        return t_child(f, sc);
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

    if (!s || !ref || !cb || (unsigned)kind > VS_LIST_VM_TREE)
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

/* ---- Templates ---- */

static bool same_ref(const struct vim_moref *a, const struct vim_moref *b)
{
    return strcmp(a->value, b->value) == 0 && strcmp(a->type, b->type) == 0;
}

/* dc_name is the last component of a datacenter's path ("/F/DC0": "DC0"). */
static const char *dc_name(const char *dc_path)
{
    const char *p = strrchr(dc_path, '/');
    return p && p[1] ? p + 1 : dc_path;
}

/* not_found says that name is not in the datacenter, the way it was looked
 * for: an absolute path, a path below the VM folder, or a name anywhere in
 * the VM folder tree. */
static void not_found(const char *name, const char *dc_path, char *m, size_t len)
{
    if (name[0] == '/')
        vmg_putf(m, len, "template \"%s\" not found in datacenter %s", name, dc_name(dc_path));
    else if (strchr(name, '/'))
        vmg_putf(m, len, "template \"%s\" not found in %s/vm", name, dc_path);
    else
        vmg_putf(m, len, "template \"%s\" not found in %s/vm or its subfolders", name, dc_path);
}

static void inside(const char *name, const char *label, char *m, size_t len)
{
    vmg_putf(m, len, "template \"%s\" is inside %s; a template must be outside it", name, label);
}

static void not_template(const char *name, char *m, size_t len)
{
    vmg_putf(m, len, "template \"%s\" is a virtual machine, not a template", name);
}

/* next_comp finds the next component of the path at *p (empty ones are
 * skipped): false at the end, else true with it in [*c, *c + *n), and *p
 * moved past it. */
static bool next_comp(const char **p, const char **c, size_t *n)
{
    while (**p == '/')
        (*p)++;
    if (!**p)
        return false;
    *c = *p;
    *n = strcspn(*p, "/");
    *p += *n;
    return true;
}

/* rel_path confines q->name to the datacenter's VM folder: a relative path
 * or a name is already below it; an absolute one must begin with dc_path
 * and "vm", and *ret is then what follows. VMG_ECONFIG, with a sentence in
 * m, for anything else. */
static int rel_path(const struct vs_template_query *q, const char **ret, char *m, size_t len)
{
    const char *p = q->name, *d = q->dc_path, *c, *dc;
    size_t n, dn;

    if (q->name[0] != '/') {
        *ret = q->name;
        return 0;
    }
    while (next_comp(&d, &dc, &dn))
        if (!next_comp(&p, &c, &n) || n != dn || memcmp(c, dc, n) != 0)
            goto outside;
    if (!next_comp(&p, &c, &n) || n != 2 || memcmp(c, "vm", 2) != 0)
        goto outside;
    while (*p == '/')
        p++;
    if (!*p) {
        vmg_putf(m, len, "template \"%s\" is the VM folder of datacenter %s, not a template",
                 q->name, dc_name(q->dc_path));
        return VMG_ECONFIG;
    }
    *ret = p;
    return 0;

outside:
    vmg_putf(m, len,
             "template \"%s\" is outside datacenter %s: an inventory path must begin with %s/vm/",
             q->name, dc_name(q->dc_path), q->dc_path);
    return VMG_ECONFIG;
}

static void end_template(vs_find *f, int err, const char *msg)
{
    char m[MSG_MAX];

    drop_view(f);
    if (err == VMG_ENOTFOUND) {
        /* However vCenter said it (no answer, a fault), in the user's words. */
        not_found(f->name, f->dc_path, m, sizeof(m));
        msg = m;
    }
    f->tcb(f->data, err, msg ? msg : (err ? vmg_strerror(err) : ""), err ? NULL : &f->cur);
    free(f->found);
    free(f);
}

static bool at_end(const vs_find *f)
{
    const char *p = f->path + f->pos;

    while (*p == '/')
        p++;
    return !*p;
}

/* t_child sends FindChild below f->cur for the next component of f->path
 * (the walk checked there is one). */
static int t_child(vs_find *f, const struct vim_service_content *sc)
{
    const char *p = f->path + f->pos, *c;
    char comp[VS_NAME_MAX], *buf = NULL;
    size_t len = 0, n;
    int r;

    if (!next_comp(&p, &c, &n) || n >= sizeof(comp))
        return -EINVAL;
    memcpy(comp, c, n);
    comp[n] = '\0';
    f->pos = (size_t)(p - f->path);
    f->step = F_T_CHILD;
    r = vs_build_find_child(&sc->search_index, &f->cur, comp, &buf, &len);
    return r < 0 ? r : send_req(f, "FindChild", buf, len, false);
}

/* t_list lists the VM folder tree, for a name that is not a template right
 * in the VM folder; vs_template_choose decides when it is read. */
static void t_list(vs_find *f)
{
    int e;

    f->tmode = T_LIST;
    f->kind = VS_LIST_VM_TREE;
    f->container = f->vm_folder;
    f->first = F_VIEW;
    f->n = 0;
    f->max = VS_FIND_MAX_DEFAULT;
    e = begin(f);
    if (e < 0)
        end_template(f, e, "could not send a request to vCenter");
}

/* t_found reads the object a walk or a name led to, if it is a VM. */
static void t_found(vs_find *f)
{
    const struct vim_service_content *sc = vs_session_content(f->s);
    const struct kind_spec *k = &specs[VS_LIST_VMS];
    char m[MSG_MAX], *buf = NULL;
    size_t len = 0;
    int e;

    if (strcmp(f->cur.type, "VirtualMachine") != 0) {
        if (f->tmode == T_NAME) {
            t_list(f);
            return;
        }
        vmg_putf(m, sizeof(m), "template \"%s\" is a %s, not a VM template", f->name, f->cur.type);
        end_template(f, VMG_ECONFIG, m);
        return;
    }
    if (!sc) {
        end_template(f, VMG_ETRANSPORT, "not logged in to vCenter");
        return;
    }
    f->step = F_T_GET;
    f->n = 0;
    f->max = 1;
    e = vim_req_retrieve_properties_ex(&sc->property_collector, &f->cur, k->paths[0], k->npaths[0],
                                       0, &buf, &len);
    if (e == 0)
        e = send_req(f, "RetrievePropertiesEx", buf, len, false);
    if (e < 0)
        end_template(f, e, "could not send RetrievePropertiesEx");
}

static void t_on_child(vs_find *f, const struct vs_reply *r)
{
    const struct vim_service_content *sc = vs_session_content(f->s);
    char m[MSG_MAX];
    int e = vim_decode_moref(r->resp, &f->cur);

    if (e == VMG_ENOTFOUND && f->tmode == T_NAME) {
        t_list(f);
        return;
    }
    if (e < 0) {
        end_template(f, e,
                     e == VMG_ENOTFOUND ? NULL : "vCenter sent an unreadable answer to a search");
        return;
    }
    if (f->tmode == T_NAME || at_end(f)) {
        t_found(f);
        return;
    }
    /* A folder on the way: the walk goes no further into exclude. */
    if (f->have_exclude && same_ref(&f->cur, &f->exclude)) {
        inside(f->name, f->exclude_label, m, sizeof(m));
        end_template(f, VMG_ECONFIG, m);
        return;
    }
    e = sc ? t_child(f, sc) : VMG_ETRANSPORT;
    if (e < 0)
        end_template(f, e, "could not send FindChild");
}

static void t_on_get(vs_find *f, const struct vs_reply *r)
{
    char token[TOKEN_MAX], m[MSG_MAX];
    int e = vim_decode_retrieve_result(r->resp, found_cb, f, token, sizeof(token));

    if (e < 0) {
        end_template(f, e, "vCenter sent an unreadable RetrieveResult");
        return;
    }
    if (f->n == 1 && f->found[0].is_template) {
        end_template(f, 0, NULL);
        return;
    }
    if (f->tmode == T_NAME) {
        /* A plain VM (or one gone meanwhile): a template of that name may
         * be further down. */
        t_list(f);
        return;
    }
    if (f->n == 0) {
        end_template(f, VMG_ENOTFOUND, NULL);
        return;
    }
    not_template(f->name, m, sizeof(m));
    end_template(f, VMG_ECONFIG, m);
}

static void t_listed(vs_find *f, int err, const char *msg)
{
    struct vs_template_query q = {.name = f->name,
                                  .vm_folder = &f->vm_folder,
                                  .dc_path = f->dc_path,
                                  .exclude = f->have_exclude ? &f->exclude : NULL,
                                  .exclude_label = f->exclude_label};
    char m[MSG_MAX];

    if (err) {
        end_template(f, err, msg);
        return;
    }
    err = vs_template_choose(&q, f->found, f->n, &f->cur, m, sizeof(m));
    end_template(f, err, err ? m : NULL);
}

static int cmp_found(const void *a, const void *b)
{
    const struct vs_found *x = *(const struct vs_found *const *)a;
    const struct vs_found *y = *(const struct vs_found *const *)b;

    return strcmp(x->ref.value, y->ref.value);
}

/* folder_in finds the folder ref among the n sorted folders. */
static const struct vs_found *folder_in(const struct vs_found *const *folders, size_t n,
                                        const struct vim_moref *ref)
{
    size_t lo = 0, hi = n;

    if (strcmp(ref->type, "Folder") != 0)
        return NULL;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(folders[mid]->ref.value, ref->value);
        if (c == 0)
            return folders[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

enum place { P_OUTSIDE, P_INSIDE, P_UNKNOWN };

/* place_of follows vm's parents up to the VM folder: inside exclude when
 * it is on the way (or is the VM folder), unknown when the chain breaks (a
 * vApp's VM has no parent folder) or loops. */
static enum place place_of(const struct vs_template_query *q, const struct vs_found *const *folders,
                           size_t n, const struct vs_found *vm)
{
    const struct vim_moref *p = &vm->parent;

    for (size_t depth = 0; depth <= n; depth++) {
        const struct vs_found *up;

        if (q->exclude && same_ref(p, q->exclude))
            return P_INSIDE;
        if (same_ref(p, q->vm_folder))
            return P_OUTSIDE;
        up = folder_in(folders, n, p);
        if (!up)
            return P_UNKNOWN;
        p = &up->parent;
    }
    return P_UNKNOWN;
}

int vs_template_choose(const struct vs_template_query *q, const struct vs_found *found, size_t n,
                       struct vim_moref *ret_ref, char *msg, size_t msglen)
{
    const struct vs_found **folders = NULL;
    const struct vs_found *pick = NULL;
    size_t nf = 0, templates = 0, vms = 0, in = 0, unknown = 0;

    if (!q || !q->name || !q->vm_folder || !q->dc_path || (n && !found) || !ret_ref)
        return -EINVAL;
    if (n) {
        folders = malloc(n * sizeof(*folders));
        if (!folders)
            return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        if (strcmp(found[i].ref.type, "Folder") == 0)
            folders[nf++] = &found[i];
    if (nf > 1)
        qsort(folders, nf, sizeof(*folders), cmp_found);
    for (size_t i = 0; i < n; i++) {
        const struct vs_found *x = &found[i];

        if (strcmp(x->ref.type, "VirtualMachine") != 0 || strcmp(x->name, q->name) != 0)
            continue;
        switch (place_of(q, folders, nf, x)) {
        case P_INSIDE:
            in++;
            break;
        case P_UNKNOWN:
            unknown++;
            break;
        case P_OUTSIDE:
            if (x->is_template && templates++ == 0)
                pick = x;
            else if (!x->is_template)
                vms++;
            break;
        }
    }
    free(folders);

    if (templates == 1) {
        *ret_ref = pick->ref;
        return 0;
    }
    if (templates > 1) {
        vmg_putf(msg, msglen,
                 "%zu templates named \"%s\" in %s/vm: give the template's inventory path",
                 templates, q->name, q->dc_path);
        return VMG_EAMBIGUOUS;
    }
    if (vms == 1) {
        not_template(q->name, msg, msglen);
        return VMG_ECONFIG;
    }
    if (vms > 1) {
        vmg_putf(msg, msglen,
                 "template \"%s\" names %zu virtual machines in %s/vm, none of them a template",
                 q->name, vms, q->dc_path);
        return VMG_ECONFIG;
    }
    if (in) {
        inside(q->name, q->exclude_label ? q->exclude_label : "an excluded folder", msg, msglen);
        return VMG_ECONFIG;
    }
    if (unknown) {
        vmg_putf(msg, msglen,
                 "template \"%s\" is in %s/vm but not in a folder (in a vApp, say): only "
                 "templates in folders are used",
                 q->name, q->dc_path);
        return VMG_ECONFIG;
    }
    not_found(q->name, q->dc_path, msg, msglen);
    return VMG_ENOTFOUND;
}

/* too_long says that name, or one of its components, is longer than
 * vCenter's names and paths are (the name is echoed cut short). */
static void too_long(const char *name, char *m, size_t len)
{
    vmg_putf(m, len, "template \"%.64s%s\" has a name longer than vCenter allows", name,
             strlen(name) > 64 ? "..." : "");
}

int vs_find_template(vs_session *s, const struct vs_template_query *q, vs_path_cb cb, void *data,
                     vs_find **ret, char *err, size_t errlen)
{
    const char *rel = NULL, *p, *c;
    size_t n;
    vs_find *f;
    int r;

    if (!s || !q || !q->name || !*q->name || !q->vm_folder || !q->dc_path || !cb ||
        strlen(q->dc_path) >= VS_PATH_MAX)
        return -EINVAL;
    /* Too long a name is the group's spec, which no retry mends. */
    if (strlen(q->name) >= VS_PATH_MAX) {
        too_long(q->name, err, errlen);
        return VMG_ECONFIG;
    }
    r = rel_path(q, &rel, err, errlen);
    if (r < 0)
        return r;
    for (p = rel; next_comp(&p, &c, &n);)
        if (n >= VS_NAME_MAX) {
            too_long(q->name, err, errlen);
            return VMG_ECONFIG;
        }
    if (strchr(q->name, '/') && q->exclude && same_ref(q->vm_folder, q->exclude)) {
        /* Everything below the VM folder is inside exclude. */
        inside(q->name, q->exclude_label ? q->exclude_label : "an excluded folder", err, errlen);
        return VMG_ECONFIG;
    }
    f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    f->s = s;
    f->tcb = cb;
    f->data = data;
    f->vm_folder = *q->vm_folder;
    f->cur = *q->vm_folder;
    if (q->exclude) {
        f->exclude = *q->exclude;
        f->have_exclude = true;
    }
    vmg_putf(f->dc_path, sizeof(f->dc_path), "%s", q->dc_path);
    vmg_putf(f->exclude_label, sizeof(f->exclude_label), "%s",
             q->exclude_label ? q->exclude_label : "an excluded folder");
    vmg_putf(f->name, sizeof(f->name), "%s", q->name);
    vmg_putf(f->path, sizeof(f->path), "%s", rel);
    f->tmode = strchr(q->name, '/') ? T_WALK : T_NAME;
    if (f->tmode == T_NAME && f->have_exclude && same_ref(&f->vm_folder, &f->exclude)) {
        f->tmode = T_LIST; /* no child of the VM folder is outside exclude */
        f->kind = VS_LIST_VM_TREE;
        f->container = f->vm_folder;
        f->max = VS_FIND_MAX_DEFAULT;
        f->first = F_VIEW;
    } else {
        f->first = F_T_CHILD;
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
