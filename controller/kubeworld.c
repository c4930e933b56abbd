/* kubeworld.c: the Kubernetes half of the reconciler's world (see
 * kubeworld.h). */
#include "controller/kubeworld.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "controller/vmgroup.h"
#include "lib/buf.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/jsonwipe.h"
#include "lib/str.h"

static const struct vmgroup *w_get_group(void *data, const char *key)
{
    struct kubeworld *kw = data;
    return informer_get(kw->inf, key);
}

static void w_now(void *data, char *buf, size_t len)
{
    vmg_rfc3339(vmg_clock_wall_us(data), buf, len);
}

struct write {
    rec_done_cb cb;
    void *cbdata;
    kube_req *req;
    bool json_patch; /* a JSON patch: a failed "test" is a conflict */
};

/* test_failed tells whether res is kube-apiserver's answer to a JSON patch
 * whose "test" found another value (the object changed since it was read):
 * 422 Invalid with nothing in its details, where a patch that leaves the
 * object invalid names the object and the fields at fault. */
static bool test_failed(const struct kube_result *res)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(res->body, "details");

    return res->code == 422 && vmg_streq(res->reason, "Invalid") &&
           (!d || (cJSON_IsObject(d) && !d->child));
}

static void write_done(void *data, const struct kube_result *res)
{
    struct write *w = data;
    int err = res->err;

    if (w->json_patch && test_failed(res))
        err = VMG_ECONFLICT;
    w->cb(w->cbdata, err, res->reason, res->message);
    free(w);
}

static int group_path(const struct vmgroup *g, char *buf, size_t len)
{
    return kube_path(buf, len, VMGROUP_GROUP, VMGROUP_VERSION, g->meta.ns, VMGROUP_PLURAL,
                     g->meta.name, NULL);
}

/* status_patch wraps a status in the merge patch that writes it. */
static cJSON *status_patch(const cJSON *status)
{
    cJSON *patch = cJSON_CreateObject();

    if (!patch || !cJSON_AddItemToObject(patch, "status", cJSON_Duplicate(status, 1))) {
        cJSON_Delete(patch);
        return NULL;
    }
    return patch;
}

static int w_patch(struct kubeworld *kw, const struct vmgroup *g, const cJSON *body, bool status,
                   rec_done_cb cb, void *cbdata, void **ret)
{
    char path[KUBE_PATH_MAX];
    struct write *w;
    int rc = group_path(g, path, sizeof(path));

    if (rc < 0)
        return rc;
    w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->cb = cb;
    w->cbdata = cbdata;
    if (status) {
        cJSON *patch = status_patch(body);

        if (!patch) {
            free(w);
            return -ENOMEM;
        }
        rc = kube_merge_patch_status(kw->kc, path, patch, write_done, w, &w->req);
        cJSON_Delete(patch);
    } else if (cJSON_IsArray(body)) {
        w->json_patch = true;
        rc = kube_json_patch(kw->kc, path, body, write_done, w, &w->req);
    } else {
        rc = kube_merge_patch(kw->kc, path, body, write_done, w, &w->req);
    }
    if (rc < 0) {
        free(w);
        return rc;
    }
    if (ret)
        *ret = w;
    return 0;
}

static int w_patch_status(void *data, const struct vmgroup *g, const cJSON *status, rec_done_cb cb,
                          void *cbdata, void **ret)
{
    return w_patch(data, g, status, true, cb, cbdata, ret);
}

static int w_patch_meta(void *data, const struct vmgroup *g, const cJSON *patch, rec_done_cb cb,
                        void *cbdata, void **ret)
{
    return w_patch(data, g, patch, false, cb, cbdata, ret);
}

static int w_restatus(void *data, void *write, const cJSON *status)
{
    struct write *w = write;
    cJSON *patch;
    int rc;

    (void)data;
    if (!w || !w->req)
        return -EINVAL;
    patch = status_patch(status);
    if (!patch)
        return -ENOMEM;
    rc = kube_rebody(w->req, patch);
    cJSON_Delete(patch);
    return rc;
}

static int w_hurry(void *data, void *write)
{
    struct write *w = write;

    (void)data;
    return kube_hurry(w ? w->req : NULL);
}

static int w_unwrite(void *data, void *write)
{
    struct write *w = write;

    (void)data;
    return kube_unsend(w ? w->req : NULL);
}

static void w_event(void *data, const struct vmgroup *g, bool warning, const char *reason,
                    const char *message)
{
    struct kubeworld *kw = data;
    struct events_object obj;

    if (!kw->ev)
        return;
    vmgroup_event_object(g, &obj);
    events_record(kw->ev, &obj, warning ? EVENTS_WARNING : EVENTS_NORMAL, reason, message);
}

struct secret_get {
    rec_secret_cb cb;
    void *cbdata;
};

static void secret_got(void *data, const struct kube_result *res)
{
    struct secret_get *c = data;
    cJSON *body = res->err == 0 ? kube_result_take_body(res) : NULL;

    if (res->err < 0)
        c->cb(c->cbdata, res->err, res->message, NULL);
    else if (!cJSON_IsObject(body))
        c->cb(c->cbdata, VMG_EPARSE, "the API server's answer is not an object", NULL);
    else
        c->cb(c->cbdata, 0, NULL, body);
    json_wipe(body);
    cJSON_Delete(body);
    free(c);
}

/* w_get_secret GETs /api/v1/namespaces/<ns>/secrets/<name> for a clone's
 * bootstrap (controller/bootstrap.h); the body is wiped before it is freed
 * (the client wipes its buffer of the response). */
static int w_get_secret(void *data, const char *ns, const char *name, rec_secret_cb cb,
                        void *cbdata)
{
    struct kubeworld *kw = data;
    char path[KUBE_PATH_MAX];
    struct secret_get *c;
    int rc;

    /* An empty name would be the path of the namespace's list of Secrets. */
    if (!kw->kc || !cb || !ns || !*ns || !name || !*name ||
        kube_path(path, sizeof(path), "", "v1", ns, "secrets", name, NULL) < 0)
        return -EINVAL;
    c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->cb = cb;
    c->cbdata = cbdata;
    rc = kube_get(kw->kc, path, secret_got, c);
    if (rc < 0)
        free(c);
    return rc;
}

void kubeworld_fill(struct kubeworld *kw, struct rec_world *rw)
{
    rw->data = kw;
    rw->get_group = w_get_group;
    rw->now = w_now;
    rw->patch_status = w_patch_status;
    rw->patch_meta = w_patch_meta;
    rw->restatus = w_restatus;
    rw->hurry = w_hurry;
    rw->unwrite = w_unwrite;
    rw->event = w_event;
    rw->get_secret = w_get_secret;
}

void kubeworld_forget_group(struct kubeworld *kw, const char *ns, const char *name)
{
    events_forget(kw->ev, ns, name);
}
