/* bootstrap.c: a clone's cloud-init user data and metadata, read from a
 * Secret and shaped as guestinfo extraConfig entries (see bootstrap.h). */
#include "controller/bootstrap.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/outcome.h"
#include "lib/b64.h"
#include "lib/buf.h"
#include "lib/err.h"
#include "lib/str.h"

/* The base64 of BOOTSTRAP_MAX_USERDATA bytes. */
#define MAX_USERDATA_B64 VMG_B64_LEN(BOOTSTRAP_MAX_USERDATA)
#define MSG_MAX 512

int bootstrap_metadata(const char *vm, const char *instance_id, char *buf, size_t size)
{
    cJSON *o;
    char *json;
    size_t len;
    long n;

    if (!vm || !*vm || !buf)
        return -EINVAL;
    o = cJSON_CreateObject();
    if (!o ||
        !cJSON_AddStringToObject(o, "instance-id",
                                 instance_id && *instance_id ? instance_id : vm) ||
        !cJSON_AddStringToObject(o, "local-hostname", vm)) {
        cJSON_Delete(o);
        return -ENOMEM;
    }
    json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!json)
        return -ENOMEM;
    len = strlen(json);
    n = vmg_b64_encode(json, len, buf, size);
    free(json);
    return n < 0 ? -EINVAL : (int)n;
}

static int too_big(const char *ns, const char *name, const char *key, char *msg, size_t msglen)
{
    vmg_putf(msg, msglen,
             "Secret %s/%s key \"%s\" holds more than %d KiB of user data, the most a VM's "
             "extraConfig takes",
             ns, name, key, BOOTSTRAP_MAX_USERDATA / 1024);
    return VMG_ETOOBIG;
}

int bootstrap_userdata(const cJSON *secret, const char *ns, const char *name, const char *key,
                       const char **ret, char *msg, size_t msglen)
{
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(secret, "data");
    const cJSON *v = cJSON_IsObject(data) ? cJSON_GetObjectItemCaseSensitive(data, key) : NULL;
    size_t len;
    long n;

    if (!v) {
        vmg_putf(msg, msglen, "Secret %s/%s has no key \"%s\" for the cloud-init user data", ns,
                 name, key);
        return VMG_ENOTFOUND;
    }
    if (!cJSON_IsString(v) || !v->valuestring) {
        vmg_putf(msg, msglen, "Secret %s/%s key \"%s\": want a string", ns, name, key);
        return VMG_EPARSE;
    }
    len = strnlen(v->valuestring, MAX_USERDATA_B64 + 1);
    if (len > MAX_USERDATA_B64) {
        return too_big(ns, name, key, msg, msglen);
    }
    n = vmg_b64_decoded_len(v->valuestring, len);
    if (n < 0) {
        vmg_putf(msg, msglen, "Secret %s/%s key \"%s\" is not base64", ns, name, key);
        return VMG_EPARSE;
    }
    if (n > BOOTSTRAP_MAX_USERDATA) {
        return too_big(ns, name, key, msg, msglen);
    }
    *ret = v->valuestring;
    return 0;
}

int bootstrap_guestinfo(const char *userdata_b64, const char *vm, const char *uid,
                        struct bootstrap_guestinfo *ret)
{
    char id[VMGROUP_MAX_NAME + VMGROUP_MAX_UID + 2];
    int n;

    if (!userdata_b64 || !vm || !uid || !*uid || !ret)
        return -EINVAL;
    n = snprintf(id, sizeof(id), "%s.%s", vm, uid);
    if (n < 0 || (size_t)n >= sizeof(id))
        return -EINVAL;
    n = bootstrap_metadata(vm, id, ret->metadata, sizeof(ret->metadata));
    if (n < 0)
        return n;
    ret->kv[0] =
        (struct rec_keyval){.key = "guestinfo.userdata", .value = userdata_b64, .secret = true};
    ret->kv[1] = (struct rec_keyval){.key = "guestinfo.userdata.encoding", .value = "base64"};
    ret->kv[2] = (struct rec_keyval){.key = "guestinfo.metadata", .value = ret->metadata};
    ret->kv[3] = (struct rec_keyval){.key = "guestinfo.metadata.encoding", .value = "base64"};
    return 0;
}

/* ---- the clone, after the Secret ---- */

struct bctx {
    int (*clone)(void *data, const struct vmgroup *g, const char *folder, const char *vm,
                 const char *template_, int cpu, int memory_mb, const struct rec_keyval *extra,
                 size_t n_extra, rec_done_cb cb, void *cbdata);
    void *vcdata;
    const struct vmgroup *(*get_group)(void *data, const char *key);
    void *data;
    char key[VMGROUP_MAX_NAMESPACE + VMGROUP_MAX_NAME + 2];
    char uid[VMGROUP_MAX_UID + 1];
    char ns[VMGROUP_MAX_NAMESPACE + 1];
    char secret[VMGROUP_MAX_SECRET_NAME + 1];
    char secret_key[VMGROUP_MAX_SECRET_KEY + 1];
    char folder[VMGROUP_MAX_NAME + 1];
    char vm[VMGROUP_MAX_NAME + 1];
    char template_[VMGROUP_MAX_TEMPLATE + 1];
    int cpu, memory_mb;
    rec_done_cb cb;
    void *cbdata;
};

static const char *read_fault(int err)
{
    return err == VMG_ENOTFOUND    ? OUTCOME_BOOTSTRAP_SECRET_NOT_FOUND
           : err == VMG_EFORBIDDEN ? OUTCOME_BOOTSTRAP_FORBIDDEN
           : err == VMG_ECANCELED  ? NULL
                                   : OUTCOME_BOOTSTRAP_UNREADABLE;
}

static void on_secret(void *cbdata, int err, const char *msg, const cJSON *secret)
{
    struct bctx *c = cbdata;
    struct bootstrap_guestinfo gi;
    const struct vmgroup *g;
    const char *ud = NULL, *fault = NULL;
    char text[MSG_MAX] = "";
    int rc = err;

    if (err == VMG_ECANCELED) {
        vmg_putf(text, sizeof(text), "canceled");
    } else if (err == VMG_ENOTFOUND) {
        vmg_putf(text, sizeof(text),
                 "Secret %s/%s (key \"%s\") of the cloud-init user data not found", c->ns,
                 c->secret, c->secret_key);
    } else if (err == VMG_EFORBIDDEN) {
        vmg_putf(text, sizeof(text),
                 "the operator may not read Secret %s/%s of the cloud-init user data (forbidden)",
                 c->ns, c->secret);
    } else if (err < 0) {
        vmg_putf(text, sizeof(text), "reading Secret %s/%s: %s", c->ns, c->secret,
                 msg && *msg ? msg : vmg_strerror(err));
    } else if ((rc = bootstrap_userdata(secret, c->ns, c->secret, c->secret_key, &ud, text,
                                        sizeof(text))) < 0) {
        fault = rc == VMG_ENOTFOUND ? OUTCOME_BOOTSTRAP_KEY_NOT_FOUND
                : rc == VMG_ETOOBIG ? OUTCOME_BOOTSTRAP_TOO_BIG
                : rc == -ENOMEM     ? OUTCOME_BOOTSTRAP_UNREADABLE
                                    : OUTCOME_BOOTSTRAP_INVALID;
    } else if (!(g = c->get_group(c->data, c->key)) || !vmg_streq(g->meta.uid, c->uid)) {
        /* The group went meanwhile: a failure (not a cancel), so that the
         * reconciler plans the key again, and forgets the group or plans
         * the new one of its name (whose VM this is not). */
        rc = VMG_ENOTFOUND;
        fault = OUTCOME_BOOTSTRAP_NOT_STARTED;
        vmg_putf(text, sizeof(text), "%s",
                 g ? "the VmGroup it was for was deleted, and this one made since"
                   : "the VmGroup is gone");
    } else if ((rc = bootstrap_guestinfo(ud, c->vm, c->uid, &gi)) < 0 ||
               (rc = c->clone(c->vcdata, g, c->folder, c->vm, c->template_, c->cpu, c->memory_mb,
                              gi.kv, BOOTSTRAP_N_KEYS, c->cb, c->cbdata)) < 0) {
        fault = OUTCOME_BOOTSTRAP_NOT_STARTED;
        vmg_putf(text, sizeof(text), "cannot start the clone: %s", vmg_strerror(rc));
    }
    if (rc < 0) {
        if (!fault)
            fault = read_fault(rc);
        c->cb(c->cbdata, rc, fault, text);
    }
    /* The clone copied what it needs; the Secret is wiped by its reader. */
    vmg_wipe(&gi, sizeof(gi));
    free(c);
}

/* copy copies src into dst, of size bytes, when it fits. */
static bool copy(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);

    if (n >= size)
        return false;
    memcpy(dst, src, n + 1);
    return true;
}

int bootstrap_clone(const struct rec_world *w, const struct vmgroup *g, const char *folder,
                    const char *vm, const char *template_, int cpu, int memory_mb, rec_done_cb cb,
                    void *cbdata)
{
    const struct vmgroup_bootstrap *b;
    struct bctx *c;
    int rc;

    if (!w || !g || !folder || !vm || !template_ || !cb)
        return -EINVAL;
    b = &g->spec.bootstrap;
    if (!b->secret_name[0])
        return w->clone(w->vcdata, g, folder, vm, template_, cpu, memory_mb, NULL, 0, cb, cbdata);
    if (!w->get_secret || !w->get_group)
        return -EOPNOTSUPP;
    c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->clone = w->clone;
    c->vcdata = w->vcdata;
    c->get_group = w->get_group;
    c->data = w->data;
    if (!g->meta.uid || !copy(c->ns, sizeof(c->ns), g->meta.ns) ||
        !copy(c->uid, sizeof(c->uid), g->meta.uid) ||
        !copy(c->secret, sizeof(c->secret), b->secret_name) ||
        !copy(c->secret_key, sizeof(c->secret_key), b->secret_key) ||
        !copy(c->folder, sizeof(c->folder), folder) || !copy(c->vm, sizeof(c->vm), vm) ||
        !copy(c->template_, sizeof(c->template_), template_) ||
        strlen(g->meta.ns) + strlen(g->meta.name) + 2 > sizeof(c->key)) {
        free(c);
        return -EINVAL;
    }
    vmg_putf(c->key, sizeof(c->key), "%s/%s", g->meta.ns, g->meta.name);
    c->cpu = cpu;
    c->memory_mb = memory_mb;
    c->cb = cb;
    c->cbdata = cbdata;
    rc = w->get_secret(w->data, g->meta.ns, b->secret_name, on_secret, c);
    if (rc < 0)
        free(c);
    return rc;
}
