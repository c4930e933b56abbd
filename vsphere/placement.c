/* placement.c: placement resolution (see inventory.h): a chain of finder
 * lookups from the datacenter to the root folder, the resource pool and
 * the datastore: the datacenter and the pool named or the only one there,
 * the datastore only when named (see inventory.h). */
#include "vsphere/inventory.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/str.h"

#define MSG_MAX 768
#define CANDIDATES_SHOWN 5

static char *dup_opt(const char *s)
{
    return s && *s ? strdup(s) : NULL;
}

enum rstep {
    RS_LOGIN,
    RS_DC_PATH,
    RS_DC_GET,
    RS_DC_LIST,
    RS_ROOT,
    RS_POOL_PATH,
    RS_POOL_LIST,
    RS_DS_PATH,
    RS_DS_LIST,
};

struct vs_resolver {
    vs_session *s;
    char *dc, *root, *pool, *ds;
    enum rstep step;
    vs_find *find;
    vs_req *req; /* RS_LOGIN */
    struct vs_placement p;
    vs_placement_cb cb;
    void *data;
};

static void resolver_free(vs_resolver *r)
{
    free(r->dc);
    free(r->root);
    free(r->pool);
    free(r->ds);
    free(r);
}

static void r_end(vs_resolver *r, int err, const char *msg)
{
    r->find = NULL;
    r->cb(r->data, err, err ? msg : "", err ? NULL : &r->p);
    resolver_free(r);
}

static void on_r_path(void *data, int err, const char *msg, const struct vim_moref *ref);
static void on_r_list(void *data, int err, const char *msg, const struct vs_found *found, size_t n);

/* r_start_* send the next lookup; on a synchronous failure they end r. */
static void r_fail_send(vs_resolver *r, int e, const char *what)
{
    char msg[MSG_MAX];

    vmg_putf(msg, sizeof(msg), "could not look up the %s in vCenter: %s", what, vmg_strerror(e));
    r_end(r, e, msg);
}

static void r_start_ds(vs_resolver *r);

static void r_done_or_ds(vs_resolver *r)
{
    if (r->ds)
        r_start_ds(r);
    else
        r_end(r, 0, NULL);
}

static void r_start_ds(vs_resolver *r)
{
    int e;

    if (r->ds[0] == '/') {
        r->step = RS_DS_PATH;
        e = vs_find_path(r->s, NULL, r->ds, on_r_path, r, &r->find);
    } else {
        r->step = RS_DS_LIST;
        e = vs_find_list(r->s, &r->p.datacenter, VS_LIST_DATASTORES, 0, on_r_list, r, &r->find);
    }
    if (e < 0)
        r_fail_send(r, e, "datastore");
}

static void r_start_pool(vs_resolver *r)
{
    int e;

    if (r->pool && r->pool[0] == '/') {
        r->step = RS_POOL_PATH;
        e = vs_find_path(r->s, NULL, r->pool, on_r_path, r, &r->find);
    } else {
        r->step = RS_POOL_LIST;
        e = vs_find_list(r->s, &r->p.host_folder, VS_LIST_POOLS, 0, on_r_list, r, &r->find);
    }
    if (e < 0)
        r_fail_send(r, e, "resource pool");
}

static void r_start_root(vs_resolver *r)
{
    const char *root = r->root ? r->root : VS_DEFAULT_ROOT_FOLDER;
    int e;

    if (root[0] == '/')
        vmg_putf(r->p.root_path, sizeof(r->p.root_path), "%s", root);
    else
        vmg_putf(r->p.root_path, sizeof(r->p.root_path), "%s/vm/%s", r->p.datacenter_path, root);
    r->step = RS_ROOT;
    e = vs_find_path(r->s, root[0] == '/' ? NULL : &r->p.vm_folder, root, on_r_path, r, &r->find);
    if (e < 0)
        r_fail_send(r, e, "root folder");
}

/* take_dc fills the datacenter part of the placement. */
static void take_dc(vs_resolver *r, const struct vs_found *f, const char *path)
{
    r->p.datacenter = f->ref;
    vmg_putf(r->p.datacenter_name, sizeof(r->p.datacenter_name), "%s", f->name);
    r->p.vm_folder = f->vm_folder;
    r->p.host_folder = f->host_folder;
    if (path) {
        const char *p = path;
        while (*p == '/')
            p++;
        vmg_putf(r->p.datacenter_path, sizeof(r->p.datacenter_path), "/%s", p);
    } else {
        const struct vim_service_content *sc = vs_session_content(r->s);
        /* A datacenter inside folders is named by its name alone. */
        if (sc && strcmp(f->parent.value, sc->root_folder.value) == 0)
            vmg_putf(r->p.datacenter_path, sizeof(r->p.datacenter_path), "/%s", f->name);
        else
            vmg_putf(r->p.datacenter_path, sizeof(r->p.datacenter_path), "%s", f->name);
    }
}

/* list_names writes "a, b, c" (at most CANDIDATES_SHOWN, then ", ...")
 * of the names (or paths) given by name_of. */
static void list_names(char *buf, size_t size, size_t n,
                       const char *(*name_of)(const void *ctx, size_t i), const void *ctx)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < n && used + 1 < size; i++) {
        const char *sep = i ? ", " : "";
        if (i == CANDIDATES_SHOWN) {
            vmg_putf(buf + used, size - used, ", ...");
            return;
        }
        vmg_putf(buf + used, size - used, "%s%s", sep, name_of(ctx, i));
        used += strlen(buf + used);
    }
}

static const char *found_name(const void *ctx, size_t i)
{
    return ((const struct vs_found *)ctx)[i].name;
}

static void choose_dc(vs_resolver *r, const struct vs_found *found, size_t n)
{
    char msg[MSG_MAX], names[400];
    size_t match = SIZE_MAX, count = 0;

    list_names(names, sizeof(names), n, found_name, found);
    if (n == 0) {
        vmg_putf(msg, sizeof(msg), "no datacenter found in vCenter at %s", vs_session_url(r->s));
        r_end(r, VMG_ENOTFOUND, msg);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (!r->dc || strcmp(found[i].name, r->dc) == 0) {
            count++;
            if (match == SIZE_MAX)
                match = i;
        }
    if (r->dc && count == 0) {
        vmg_putf(msg, sizeof(msg), "datacenter \"%s\" not found (found: %s)", r->dc, names);
        r_end(r, VMG_ENOTFOUND, msg);
        return;
    }
    if (count > 1) {
        if (r->dc)
            vmg_putf(msg, sizeof(msg),
                     "%zu datacenters are named \"%s\": name one by its inventory path with "
                     "--datacenter",
                     count, r->dc);
        else
            vmg_putf(msg, sizeof(msg), "%zu datacenters found (%s): choose one with --datacenter",
                     count, names);
        r_end(r, VMG_EAMBIGUOUS, msg);
        return;
    }
    take_dc(r, &found[match], NULL);
    r_start_root(r);
}

/* The relative path of pool i below the host folder: the names of its
 * ancestors found in the listing. */
struct pool_paths {
    const struct vs_found *found;
    size_t n;
    char (*paths)[VS_PATH_MAX];
    size_t *idx; /* pools only: indexes into found */
};

static const struct vs_found *find_ref(const struct vs_found *found, size_t n, const char *ref)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(found[i].ref.value, ref) == 0)
            return &found[i];
    return NULL;
}

static void pool_path(const struct vs_found *found, size_t n, const struct vs_found *f, char *buf,
                      size_t size)
{
    const struct vs_found *chain[32];
    size_t depth = 0, used = 0;

    for (const struct vs_found *cur = f; cur && depth < 32;
         cur = cur->parent.value[0] ? find_ref(found, n, cur->parent.value) : NULL)
        chain[depth++] = cur;
    buf[0] = '\0';
    while (depth > 0 && used + 1 < size) {
        const struct vs_found *c = chain[--depth];
        vmg_putf(buf + used, size - used, "%s%s", used ? "/" : "", c->name);
        used += strlen(buf + used);
    }
}

static const char *pp_name(const void *ctx, size_t i)
{
    const struct pool_paths *pp = ctx;
    return pp->paths[i];
}

static void choose_pool(vs_resolver *r, const struct vs_found *found, size_t n)
{
    struct pool_paths pp = {.found = found, .n = n};
    char msg[MSG_MAX], names[400];
    size_t npools = 0, match = SIZE_MAX, count = 0;

    pp.paths = calloc(n ? n : 1, sizeof(*pp.paths));
    pp.idx = calloc(n ? n : 1, sizeof(*pp.idx));
    if (!pp.paths || !pp.idx) {
        free(pp.paths);
        free(pp.idx);
        r_end(r, -ENOMEM, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(found[i].ref.type, "ResourcePool") != 0)
            continue;
        pool_path(found, n, &found[i], pp.paths[npools], sizeof(pp.paths[npools]));
        pp.idx[npools++] = i;
    }
    list_names(names, sizeof(names), npools, pp_name, &pp);
    for (size_t i = 0; i < npools; i++) {
        const char *path = pp.paths[i], *name = found[pp.idx[i]].name;
        size_t pl = strlen(path), ol = r->pool ? strlen(r->pool) : 0;
        bool ok = !r->pool || strcmp(name, r->pool) == 0 || strcmp(path, r->pool) == 0 ||
                  (pl > ol && path[pl - ol - 1] == '/' && strcmp(path + pl - ol, r->pool) == 0);
        if (ok) {
            count++;
            if (match == SIZE_MAX)
                match = i;
        }
    }
    if (npools == 0) {
        vmg_putf(msg, sizeof(msg), "no resource pool found in datacenter %s", r->p.datacenter_path);
        r_end(r, VMG_ENOTFOUND, msg);
    } else if (count == 0) {
        vmg_putf(msg, sizeof(msg), "resource pool \"%s\" not found in %s/host (found: %s)", r->pool,
                 r->p.datacenter_path, names);
        r_end(r, VMG_ENOTFOUND, msg);
    } else if (count > 1) {
        if (r->pool)
            vmg_putf(msg, sizeof(msg),
                     "%zu resource pools match \"%s\" in %s/host (%s): give its path with "
                     "--resource-pool",
                     count, r->pool, r->p.datacenter_path, names);
        else
            vmg_putf(msg, sizeof(msg),
                     "%zu resource pools found in %s/host (%s): choose one with --resource-pool",
                     count, r->p.datacenter_path, names);
        r_end(r, VMG_EAMBIGUOUS, msg);
    } else {
        r->p.pool = found[pp.idx[match]].ref;
        vmg_putf(r->p.pool_path, sizeof(r->p.pool_path), "%s/host/%s", r->p.datacenter_path,
                 pp.paths[match]);
        free(pp.paths);
        free(pp.idx);
        r_done_or_ds(r);
        return;
    }
    free(pp.paths);
    free(pp.idx);
}

static void choose_ds(vs_resolver *r, const struct vs_found *found, size_t n)
{
    char msg[MSG_MAX], names[400];
    size_t match = SIZE_MAX, count = 0;

    list_names(names, sizeof(names), n, found_name, found);
    for (size_t i = 0; i < n; i++)
        if (strcmp(found[i].name, r->ds) == 0) {
            count++;
            if (match == SIZE_MAX)
                match = i;
        }
    if (count == 0) {
        vmg_putf(msg, sizeof(msg), "datastore \"%s\" not found in datacenter %s (found: %s)", r->ds,
                 r->p.datacenter_path, names);
        r_end(r, VMG_ENOTFOUND, msg);
        return;
    }
    if (count > 1) {
        vmg_putf(msg, sizeof(msg),
                 "%zu datastores are named \"%s\" in datacenter %s: give its inventory path", count,
                 r->ds, r->p.datacenter_path);
        r_end(r, VMG_EAMBIGUOUS, msg);
        return;
    }
    r->p.has_datastore = true;
    r->p.datastore = found[match].ref;
    vmg_putf(r->p.datastore_name, sizeof(r->p.datastore_name), "%s", found[match].name);
    r_end(r, 0, NULL);
}

static void on_r_list(void *data, int err, const char *msg, const struct vs_found *found, size_t n)
{
    vs_resolver *r = data;
    char m[MSG_MAX];

    r->find = NULL;
    if (err) {
        if (r->step == RS_DC_GET && err == VMG_ENOTFOUND) {
            vmg_putf(m, sizeof(m), "datacenter \"%s\" not found", r->dc);
            r_end(r, err, m);
            return;
        }
        r_end(r, err, msg);
        return;
    }
    switch (r->step) {
    case RS_DC_GET:
        if (n != 1 || strcmp(found[0].ref.type, "Datacenter") != 0) {
            vmg_putf(m, sizeof(m), "\"%s\" is a %s, not a datacenter", r->dc,
                     n ? found[0].ref.type : "?");
            r_end(r, VMG_ECONFIG, m);
            return;
        }
        take_dc(r, &found[0], r->dc);
        r_start_root(r);
        return;
    case RS_DC_LIST:
        choose_dc(r, found, n);
        return;
    case RS_POOL_LIST:
        choose_pool(r, found, n);
        return;
    case RS_DS_LIST:
        choose_ds(r, found, n);
        return;
    default:
        r_end(r, -EINVAL, "internal error: unexpected listing");
        return;
    }
}

static void on_r_path(void *data, int err, const char *msg, const struct vim_moref *ref)
{
    vs_resolver *r = data;
    char m[MSG_MAX];
    int e;

    r->find = NULL;
    if (err == VMG_ENOTFOUND) {
        switch (r->step) {
        case RS_DC_PATH:
            vmg_putf(m, sizeof(m), "datacenter \"%s\" not found", r->dc);
            break;
        case RS_ROOT:
            if (r->root && r->root[0] == '/')
                vmg_putf(m, sizeof(m), "root folder \"%s\" not found", r->root);
            else
                vmg_putf(m, sizeof(m), "root folder \"%s\" not found in %s/vm",
                         r->root ? r->root : VS_DEFAULT_ROOT_FOLDER, r->p.datacenter_path);
            break;
        case RS_POOL_PATH:
            vmg_putf(m, sizeof(m), "resource pool \"%s\" not found", r->pool);
            break;
        default:
            vmg_putf(m, sizeof(m), "datastore \"%s\" not found", r->ds);
            break;
        }
        r_end(r, err, m);
        return;
    }
    if (err) {
        r_end(r, err, msg);
        return;
    }
    switch (r->step) {
    case RS_DC_PATH:
        r->step = RS_DC_GET;
        e = vs_find_get(r->s, ref, VS_LIST_DATACENTERS, on_r_list, r, &r->find);
        if (e < 0)
            r_fail_send(r, e, "datacenter");
        return;
    case RS_ROOT:
        if (strcmp(ref->type, "Folder") != 0) {
            vmg_putf(m, sizeof(m), "root folder %s is a %s, not a folder", r->p.root_path,
                     ref->type);
            r_end(r, VMG_ECONFIG, m);
            return;
        }
        r->p.root_folder = *ref;
        r_start_pool(r);
        return;
    case RS_POOL_PATH:
        if (strcmp(ref->type, "ResourcePool") != 0) {
            vmg_putf(m, sizeof(m), "resource pool %s is a %s, not a resource pool", r->pool,
                     ref->type);
            r_end(r, VMG_ECONFIG, m);
            return;
        }
        r->p.pool = *ref;
        vmg_putf(r->p.pool_path, sizeof(r->p.pool_path), "%s", r->pool);
        r_done_or_ds(r);
        return;
    case RS_DS_PATH:
        if (strcmp(ref->type, "Datastore") != 0) {
            vmg_putf(m, sizeof(m), "datastore %s is a %s, not a datastore", r->ds, ref->type);
            r_end(r, VMG_ECONFIG, m);
            return;
        }
        r->p.has_datastore = true;
        r->p.datastore = *ref;
        {
            const char *slash = strrchr(r->ds, '/');
            vmg_putf(r->p.datastore_name, sizeof(r->p.datastore_name), "%s",
                     slash ? slash + 1 : r->ds);
        }
        r_end(r, 0, NULL);
        return;
    default:
        r_end(r, -EINVAL, "internal error: unexpected path");
        return;
    }
}

/* r_begin starts with the datacenter, or before the session has logged
 * in, with a CurrentTime that waits for the login. */
static void on_r_login(void *data, const struct vs_reply *rep);

static int r_begin(vs_resolver *r)
{
    const struct vim_service_content *sc = vs_session_content(r->s);
    char *buf = NULL;
    size_t len = 0;
    int e;

    if (!sc) {
        r->step = RS_LOGIN;
        e = vim_req_current_time(&buf, &len);
        return e < 0 ? e : vs_call(r->s, "CurrentTime", buf, len, NULL, on_r_login, r, &r->req);
    }
    if (r->dc && strchr(r->dc, '/')) {
        char path[VS_PATH_MAX];
        vmg_putf(path, sizeof(path), "/%s", r->dc + (r->dc[0] == '/'));
        r->step = RS_DC_PATH;
        return vs_find_path(r->s, NULL, path, on_r_path, r, &r->find);
    }
    r->step = RS_DC_LIST;
    return vs_find_list(r->s, &sc->root_folder, VS_LIST_DATACENTERS, 0, on_r_list, r, &r->find);
}

static void on_r_login(void *data, const struct vs_reply *rep)
{
    vs_resolver *r = data;
    int e;

    r->req = NULL;
    if (rep->err) {
        r_end(r, rep->err, rep->message);
        return;
    }
    e = r_begin(r);
    if (e < 0)
        r_fail_send(r, e, "datacenter");
}

int vs_placement_resolve(vs_session *s, const struct vs_placement_config *cfg, vs_placement_cb cb,
                         void *data, vs_resolver **ret)
{
    vs_resolver *r;
    int e;

    if (!s || !cfg || !cb)
        return -EINVAL;
    r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->s = s;
    r->cb = cb;
    r->data = data;
    r->dc = dup_opt(cfg->datacenter);
    r->root = dup_opt(cfg->root_folder);
    r->pool = dup_opt(cfg->resource_pool);
    r->ds = dup_opt(cfg->datastore);
    if ((cfg->datacenter && *cfg->datacenter && !r->dc) ||
        (cfg->root_folder && *cfg->root_folder && !r->root) ||
        (cfg->resource_pool && *cfg->resource_pool && !r->pool) ||
        (cfg->datastore && *cfg->datastore && !r->ds)) {
        resolver_free(r);
        return -ENOMEM;
    }
    e = r_begin(r);
    if (e < 0) {
        resolver_free(r);
        return e;
    }
    if (ret)
        *ret = r;
    return 0;
}

void vs_resolver_cancel(vs_resolver *r)
{
    if (r && r->find)
        vs_find_cancel(r->find); /* its callback ends r */
    else if (r && r->req)
        vs_req_cancel(r->req);
}
