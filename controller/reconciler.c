/* reconciler.c: the VmGroup sync function (read caches -> plan -> act) and
 * the bookkeeping of the operations it starts. */
#include "controller/reconciler.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/bootstrap.h"
#include "controller/naming.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/strmap.h"

#define LOGGER "reconciler"
#define MSG_MAX 512
#define AWAIT_MS 30000 /* longest wait for the inventory to show a finished operation */

struct gstate;

/* One operation in flight for a group. */
struct op {
    struct op *next;
    struct gstate *gs;
    reconciler *r;
    enum plan_action_kind kind;
    int slot;
    char vm[96];
    int cpu, memory_mb; /* RECONFIGURE: what was asked */
    /* Done in vCenter but not yet seen in the inventory cache: it still
     * counts as in flight, so that nothing is done twice meanwhile
     * (client-go's "expectations"), until seen or until the deadline. */
    bool awaiting;
    bool reread; /* the VM was read again when the first deadline passed */
    uint64_t deadline;
};

/* What the reconciler remembers of a group between passes: only what the
 * caches cannot tell (operations in flight, errors learned from them). */
struct gstate {
    char *key;
    char *ns, *name;
    char folder[96];
    struct op *ops;
    size_t n_ops;
    bool meta_inflight;
    bool status_inflight;
    bool status_dirty; /* a newer status waited for the write in flight */

    enum plan_block block;    /* learned from a failed operation */
    const char *block_reason; /* its CamelCase reason (static), NULL: the planner's */
    char *block_msg;
    int64_t block_gen;
    uint64_t block_at;

    char *transient;          /* why the last step failed */
    uint64_t transient_until; /* shown (and vCenter left alone) until then */
    unsigned failures;        /* consecutive, for the backoff */

    char *written_status; /* the last status written, and the resourceVersion */
    char *written_rv;     /* of the object it was planned from */
    /* A finalizer write (meta_kind: PLAN_ADD_FINALIZER or
     * PLAN_REMOVE_FINALIZER) that succeeded, awaited in the cache until
     * meta_until (0: none; UINT64_MAX while in flight): versions the cache
     * shows before it (another write's, say) still look as if it had to be
     * made again. */
    enum plan_action_kind meta_kind;
    uint64_t meta_until;
};

struct reconciler {
    struct rec_world w;
    struct rec_options o;
    struct wq *q;
    strmap *groups; /* key -> struct gstate */
    size_t inflight;
    uint64_t (*clock)(void *);
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct gstate *gs_find(reconciler *r, const char *key)
{
    return strmap_get(r->groups, key);
}

static void gs_free(struct gstate *gs)
{
    free(gs->key);
    free(gs->ns);
    free(gs->name);
    free(gs->block_msg);
    free(gs->transient);
    free(gs->written_status);
    free(gs->written_rv);
    free(gs);
}

static struct gstate *gs_get(reconciler *r, const char *key)
{
    struct gstate *gs = gs_find(r, key);
    const char *slash;

    if (gs)
        return gs;
    slash = strchr(key, '/');
    if (!slash)
        return NULL;
    gs = calloc(1, sizeof(*gs));
    if (!gs)
        return NULL;
    gs->key = strdup(key);
    gs->ns = strndup(key, (size_t)(slash - key));
    gs->name = strdup(slash + 1);
    if (!gs->key || !gs->ns || !gs->name ||
        naming_folder(gs->ns, gs->name, gs->folder, sizeof(gs->folder)) < 0) {
        free(gs->key);
        free(gs->ns);
        free(gs->name);
        free(gs);
        return NULL;
    }
    if (strmap_set(r->groups, key, gs) < 0) {
        gs_free(gs);
        return NULL;
    }
    return gs;
}

/* gs_drop forgets a group whose object is gone. Operations that ended and
 * only await the inventory go with it; one still in flight, or a write,
 * keeps it until that ends and plans the key again (the object is gone:
 * see gone_after). */
static void gs_drop(reconciler *r, struct gstate *gs)
{
    struct op **pp = &gs->ops;

    while (*pp) {
        struct op *op = *pp;
        if (op->awaiting) {
            *pp = op->next;
            gs->n_ops--;
            free(op);
        } else {
            pp = &op->next;
        }
    }
    if (gs->ops || gs->meta_inflight || gs->status_inflight)
        return;
    strmap_del(r->groups, gs->key);
    gs_free(gs);
}

static void set_str(char **dst, const char *s)
{
    free(*dst);
    *dst = s ? strdup(s) : NULL;
}

static const char *kind_event_reason(enum plan_action_kind k, bool ok)
{
    switch (k) {
    case PLAN_CREATE_FOLDER:
        return ok ? "FolderCreated" : "FolderCreateFailed";
    case PLAN_DESTROY_FOLDER:
        return ok ? "FolderDeleted" : "FolderDeleteFailed";
    case PLAN_CLONE:
        return ok ? "Created" : "CreateFailed";
    case PLAN_POWER_ON:
        return ok ? "PoweredOn" : "PowerOnFailed";
    case PLAN_POWER_OFF:
        return ok ? "PoweredOff" : "PowerOffFailed";
    case PLAN_RECONFIGURE:
        return ok ? "Reconfigured" : "ReconfigureFailed";
    case PLAN_DESTROY_VM:
        return ok ? "Deleted" : "DeleteFailed";
    default:
        return ok ? "Done" : "Failed";
    }
}

static const char *kind_verb(enum plan_action_kind k)
{
    switch (k) {
    case PLAN_CREATE_FOLDER:
        return "create folder";
    case PLAN_DESTROY_FOLDER:
        return "delete folder";
    case PLAN_CLONE:
        return "create VM";
    case PLAN_POWER_ON:
        return "power on VM";
    case PLAN_POWER_OFF:
        return "power off VM";
    case PLAN_RECONFIGURE:
        return "reconfigure VM";
    case PLAN_DESTROY_VM:
        return "delete VM";
    default:
        return "act on";
    }
}

static bool fault_is(const char *fault, const char *name)
{
    return fault && strcmp(fault, name) == 0;
}

/* benign tells whether a failed operation left things as wanted anyway: a
 * clone re-issued after a restart that collides by name, a folder already
 * there, a VM already gone or already in the asked power state. */
static bool benign(enum plan_action_kind k, int err, const char *fault)
{
    switch (k) {
    case PLAN_CLONE:
    case PLAN_CREATE_FOLDER:
        return fault_is(fault, "DuplicateName");
    case PLAN_POWER_ON:
    case PLAN_POWER_OFF:
        return fault_is(fault, "InvalidPowerState");
    case PLAN_DESTROY_VM:
    case PLAN_DESTROY_FOLDER:
        return fault_is(fault, "ManagedObjectNotFound") || err == VMG_ENOTFOUND;
    default:
        return false;
    }
}

/* template_reason names why a clone's template cannot be used: missing,
 * ambiguous, or refused (not a template, inside the operator's folder,
 * outside the datacenter). */
static const char *template_reason(int err)
{
    return err == VMG_ENOTFOUND    ? "TemplateNotFound"
           : err == VMG_EAMBIGUOUS ? "TemplateAmbiguous"
                                   : "TemplateRefused";
}

static uint64_t backoff_ms(unsigned failures)
{
    uint64_t d = 1000;
    for (unsigned i = 1; i < failures && d < 300000; i++)
        d *= 2;
    return d > 300000 ? 300000 : d;
}

static void note_transient(reconciler *r, struct gstate *gs, const char *msg)
{
    gs->failures++;
    set_str(&gs->transient, msg);
    gs->transient_until = r->clock(NULL) + backoff_ms(gs->failures);
}

static uint64_t clock_default(void *data)
{
    (void)data;
    return now_ms();
}

static void op_done(void *cbdata, int err, const char *fault, const char *msg)
{
    struct op *op = cbdata;
    struct gstate *gs = op->gs;
    reconciler *r = op->r;
    const struct vmgroup *g = r->w.get_group(r->w.data, gs->key);
    struct op **pp = &gs->ops;
    char text[MSG_MAX];
    bool retry_later = false;

    bool keep = false;

    r->inflight--;
    if (err == VMG_ECANCELED) {
        /* Shutting down: nothing to report. */
    } else if (err == 0 || benign(op->kind, err, fault)) {
        if (err == 0) {
            if (op->kind == PLAN_CREATE_FOLDER || op->kind == PLAN_DESTROY_FOLDER)
                snprintf(text, sizeof(text), "%s folder %s",
                         op->kind == PLAN_CREATE_FOLDER ? "Created" : "Deleted", gs->folder);
            else
                snprintf(text, sizeof(text), "%s %s",
                         op->kind == PLAN_CLONE         ? "Created VM"
                         : op->kind == PLAN_POWER_ON    ? "Powered on VM"
                         : op->kind == PLAN_POWER_OFF   ? "Powered off VM"
                         : op->kind == PLAN_RECONFIGURE ? "Reconfigured VM"
                                                        : "Deleted VM",
                         op->vm);
            vmg_logf(VMG_LOG_INFO, LOGGER, gs->ns, gs->name, "%s", text);
            if (g)
                r->w.event(r->w.data, g, false, kind_event_reason(op->kind, true), text);
        } else {
            vmg_log_v(1, LOGGER, gs->ns, gs->name, "%s %s: %s (already as wanted)",
                      kind_verb(op->kind), op->vm[0] ? op->vm : gs->folder, fault ? fault : "");
        }
        gs->failures = 0;
        keep = true;
        if (op->kind == PLAN_CLONE && gs->block == PLAN_BLOCK_TEMPLATE && err == 0) {
            gs->block = PLAN_BLOCK_NONE;
            gs->block_reason = NULL;
            set_str(&gs->block_msg, NULL);
        }
    } else if ((op->kind == PLAN_POWER_ON || op->kind == PLAN_POWER_OFF ||
                op->kind == PLAN_RECONFIGURE) &&
               fault_is(fault, "ManagedObjectNotFound")) {
        /* The VM went meanwhile (destroyed out of band): nothing failed
         * that waiting would mend, so the group's backoff does not grow.
         * The VM is read again, and the group planned again shortly. */
        vmg_logf(VMG_LOG_INFO, LOGGER, gs->ns, gs->name,
                 "%s %s: the VM is gone from vCenter (ManagedObjectNotFound); planning again",
                 kind_verb(op->kind), op->vm);
        if (r->w.reread)
            (void)r->w.reread(r->w.vcdata, gs->folder, op->vm);
        retry_later = true;
    } else if (op->kind == PLAN_CLONE && !fault && (err == VMG_EUNKNOWN || err == VMG_ETRANSPORT)) {
        /* The clone may be under way or done (the request reached vCenter
         * and its answer was lost, or vCenter forgot the task): it counts
         * as in flight until the inventory shows the VM or the wait is
         * over, so that a lower free slot is not cloned meanwhile. */
        snprintf(text, sizeof(text), "creating VM %s: %s; waiting to see it in the inventory",
                 op->vm, msg && *msg ? msg : vmg_strerror(err));
        vmg_logf(VMG_LOG_WARN, LOGGER, gs->ns, gs->name, "%s", text);
        note_transient(r, gs, text);
        keep = true;
        retry_later = true;
    } else if (op->kind == PLAN_CLONE &&
               (bootstrap_block_reason(fault) ||
                (!fault &&
                 (err == VMG_ENOTFOUND || err == VMG_EAMBIGUOUS || err == VMG_ECONFIG)))) {
        /* The template, or the bootstrap's Secret, cannot be used: no
         * clone until the spec or the Secret changes. */
        const char *reason =
            bootstrap_block_reason(fault) ? bootstrap_block_reason(fault) : template_reason(err);

        snprintf(text, sizeof(text), "%s", msg && *msg ? msg : "template not found");
        vmg_logf(VMG_LOG_WARN, LOGGER, gs->ns, gs->name, "cannot create VM %s: %s", op->vm, text);
        if (g && (gs->block != PLAN_BLOCK_TEMPLATE || !gs->block_msg ||
                  strcmp(gs->block_msg, text) != 0))
            r->w.event(r->w.data, g, true, reason, text);
        gs->block = PLAN_BLOCK_TEMPLATE;
        gs->block_reason = reason;
        set_str(&gs->block_msg, text);
        gs->block_gen = g ? g->meta.generation : 0;
        gs->block_at = r->clock(NULL);
    } else {
        snprintf(text, sizeof(text), "Failed to %s %s: %s", kind_verb(op->kind),
                 op->vm[0] ? op->vm : gs->folder, msg && *msg ? msg : vmg_strerror(err));
        vmg_logf(VMG_LOG_WARN, LOGGER, gs->ns, gs->name, "%s", text);
        if (g)
            r->w.event(r->w.data, g, true, kind_event_reason(op->kind, false), text);
        note_transient(r, gs, text);
        retry_later = true;
    }
    if (keep && err != VMG_ECANCELED) {
        op->awaiting = true;
        op->deadline = r->clock(NULL) + AWAIT_MS;
    } else {
        while (*pp && *pp != op)
            pp = &(*pp)->next;
        if (*pp)
            *pp = op->next;
        gs->n_ops--;
        free(op);
    }

    if (err == VMG_ECANCELED)
        return;
    if (!g)
        wq_add(r->q, gs->key); /* the object is gone: the pass drops the group */
    else if (retry_later)
        wq_add_after(r->q, gs->key, backoff_ms(gs->failures));
    else
        wq_add(r->q, gs->key);
}

static int start_op(reconciler *r, struct gstate *gs, const struct vmgroup *g,
                    const struct plan_action *a)
{
    struct op *op = calloc(1, sizeof(*op));
    int rc;

    if (!op)
        return -ENOMEM;
    op->gs = gs;
    op->r = r;
    op->kind = a->kind;
    op->slot = a->slot;
    if (a->vm)
        snprintf(op->vm, sizeof(op->vm), "%s", a->vm);
    op->cpu = a->cpu;
    op->memory_mb = a->memory_mb;

    switch (a->kind) {
    case PLAN_CREATE_FOLDER:
        rc = r->w.create_folder(r->w.vcdata, gs->folder, op_done, op);
        break;
    case PLAN_DESTROY_FOLDER:
        rc = r->w.destroy_folder(r->w.vcdata, gs->folder, op_done, op);
        break;
    case PLAN_CLONE:
        rc = bootstrap_clone(&r->w, g, gs->folder, a->vm, a->template, a->cpu, a->memory_mb,
                             op_done, op);
        break;
    case PLAN_POWER_ON:
    case PLAN_POWER_OFF:
        rc = r->w.power(r->w.vcdata, gs->folder, a->vm, a->kind == PLAN_POWER_ON, op_done, op);
        break;
    case PLAN_RECONFIGURE:
        rc = r->w.reconfigure(r->w.vcdata, gs->folder, a->vm, a->cpu, a->memory_mb, op_done, op);
        break;
    case PLAN_DESTROY_VM:
        rc = r->w.destroy_vm(r->w.vcdata, gs->folder, a->vm, op_done, op);
        break;
    default:
        rc = -EINVAL;
        break;
    }
    if (rc < 0) {
        free(op);
        return rc;
    }
    op->next = gs->ops;
    gs->ops = op;
    gs->n_ops++;
    r->inflight++;
    if (a->kind != PLAN_CLONE || op->vm[0])
        vmg_log_v(1, LOGGER, gs->ns, gs->name, "started: %s %s", kind_verb(a->kind),
                  op->vm[0] ? op->vm : gs->folder);
    return 0;
}

struct write_ctx {
    reconciler *r;
    struct gstate *gs;
    bool status;
};

/* gone_after: after a write of a group whose object is gone from the cache
 * (its finalizer removed, or deleted by hand meanwhile), plan the key again
 * so that the group's state is dropped; the watch's deletion came while the
 * write was in flight and could not drop it then. */
static bool gone_after(reconciler *r, struct gstate *gs)
{
    if (r->w.get_group(r->w.data, gs->key))
        return false;
    wq_add(r->q, gs->key);
    return true;
}

static void write_done(void *cbdata, int err, const char *fault, const char *msg)
{
    struct write_ctx *c = cbdata;
    reconciler *r = c->r;
    struct gstate *gs = c->gs;
    bool status = c->status;

    (void)fault;
    free(c);
    if (status)
        gs->status_inflight = false;
    else
        gs->meta_inflight = false;
    if (err == VMG_ECANCELED)
        return;
    if (gone_after(r, gs))
        return;
    if (err == 0) {
        if (!status)
            gs->meta_until = r->clock(NULL) + AWAIT_MS;
        /* The watch brings the new object and re-enqueues the key; a status
         * computed while this write was in flight needs a pass of its own. */
        if (status && gs->status_dirty) {
            gs->status_dirty = false;
            wq_add(r->q, gs->key);
        }
        return;
    }
    /* Forget what was written so that the next pass writes again. */
    if (status)
        set_str(&gs->written_status, NULL);
    else
        gs->meta_until = 0;
    if (err == VMG_ENOTFOUND) {
        wq_add(r->q, gs->key);
        return;
    }
    if (err == VMG_ECONFLICT) {
        vmg_log_v(1, LOGGER, gs->ns, gs->name, "write conflicted, retrying with the latest object");
        wq_add_rate_limited(r->q, gs->key);
        return;
    }
    vmg_logf(VMG_LOG_WARN, LOGGER, gs->ns, gs->name, "writing the VmGroup failed: %s",
             msg && *msg ? msg : vmg_strerror(err));
    wq_add_rate_limited(r->q, gs->key);
}

static int start_write(reconciler *r, struct gstate *gs, const struct vmgroup *g, bool status,
                       const cJSON *body)
{
    struct write_ctx *c = calloc(1, sizeof(*c));
    int rc;

    if (!c)
        return -ENOMEM;
    c->r = r;
    c->gs = gs;
    c->status = status;
    rc = status ? r->w.patch_status(r->w.data, g, body, write_done, c)
                : r->w.patch_meta(r->w.data, g, body, write_done, c);
    if (rc < 0) {
        free(c);
        return rc;
    }
    if (status)
        gs->status_inflight = true;
    else
        gs->meta_inflight = true;
    return 0;
}

static bool has_vm_op(const struct gstate *gs, const char *vm)
{
    for (const struct op *op = gs->ops; op; op = op->next)
        if (op->vm[0] && strcmp(op->vm, vm) == 0)
            return true;
    return false;
}

static const struct plan_vm *find_vm(const struct rec_folder *f, const char *name)
{
    for (size_t i = 0; i < f->n_vms; i++)
        if (f->vms[i].name && strcmp(f->vms[i].name, name) == 0)
            return &f->vms[i];
    return NULL;
}

/* seen tells whether the inventory now shows what op did. */
static bool seen(const struct op *op, const struct rec_folder *f)
{
    const struct plan_vm *v = op->vm[0] ? find_vm(f, op->vm) : NULL;

    switch (op->kind) {
    case PLAN_CREATE_FOLDER:
        return f->state == PLAN_FOLDER_PRESENT;
    case PLAN_DESTROY_FOLDER:
        return f->state == PLAN_FOLDER_ABSENT;
    case PLAN_CLONE:
        return v != NULL;
    case PLAN_DESTROY_VM:
        return f->state != PLAN_FOLDER_UNKNOWN && v == NULL;
    case PLAN_POWER_ON:
        return !v || v->powered_on;
    case PLAN_POWER_OFF:
        return !v || !v->powered_on;
    case PLAN_RECONFIGURE:
        return !v || (v->num_cpu == op->cpu && v->memory_mb == op->memory_mb);
    default:
        return true;
    }
}

/* sweep drops the finished operations that the inventory now shows, or
 * that waited too long; returns the time to the next deadline (0: none). */
static uint64_t sweep(reconciler *r, struct gstate *gs, const struct rec_folder *f, uint64_t t)
{
    struct op **pp = &gs->ops;
    uint64_t next = 0;

    while (*pp) {
        struct op *op = *pp;
        if (op->awaiting && (f->state == PLAN_FOLDER_UNKNOWN ? false : seen(op, f))) {
            *pp = op->next;
            gs->n_ops--;
            free(op);
            continue;
        }
        if (op->awaiting && t >= op->deadline && !op->reread && op->vm[0] && r->w.reread &&
            r->w.reread(r->w.vcdata, gs->folder, op->vm) == 0) {
            /* The watch may lag or have missed the change: read the VM
             * itself, and wait once more before acting on the cache. */
            vmg_log_v(1, LOGGER, gs->ns, gs->name,
                      "the inventory did not show the end of %s %s in time; reading it again",
                      kind_verb(op->kind), op->vm);
            op->reread = true;
            op->deadline = t + AWAIT_MS;
        }
        if (op->awaiting && t >= op->deadline) {
            vmg_log_v(1, LOGGER, gs->ns, gs->name,
                      "the inventory did not show the end of %s %s in time; planning again",
                      kind_verb(op->kind), op->vm[0] ? op->vm : gs->folder);
            *pp = op->next;
            gs->n_ops--;
            free(op);
            continue;
        }
        if (op->awaiting && (next == 0 || op->deadline - t < next))
            next = op->deadline - t;
        pp = &op->next;
    }
    return next;
}

static void write_status(reconciler *r, struct gstate *gs, const struct vmgroup *g,
                         const struct plan *p)
{
    cJSON *st = NULL;
    char *text;

    if (gs->status_inflight) {
        /* One write at a time; when it ends, the key is planned again. */
        gs->status_dirty = true;
        return;
    }
    if (vmgroup_status_to_json(&p->status, &st) < 0)
        return;
    text = cJSON_PrintUnformatted(st);
    if (!text) {
        cJSON_Delete(st);
        return;
    }
    /* The cache may not have seen our last write yet: do not write the same
     * status twice over the same object. */
    if (gs->written_status && gs->written_rv && strcmp(gs->written_status, text) == 0 &&
        strcmp(gs->written_rv, g->meta.resource_version) == 0) {
        free(text);
        cJSON_Delete(st);
        return;
    }
    if (start_write(r, gs, g, true, st) == 0) {
        free(gs->written_status);
        gs->written_status = text;
        set_str(&gs->written_rv, g->meta.resource_version);
    } else {
        free(text);
    }
    cJSON_Delete(st);
}

static const char *reconcile(reconciler *r, const char *key)
{
    const struct vmgroup *g = r->w.get_group(r->w.data, key);
    struct gstate *gs = gs_find(r, key);
    struct planner_input in;
    struct rec_folder f;
    struct plan_vm *vms = NULL;
    int *slots = NULL;
    struct plan *p = NULL;
    char vmsg[MSG_MAX] = "", now[64] = "", desc[512];
    uint64_t t = r->clock(NULL);
    int vr, rc;
    size_t n = 0, ns = 0;
    bool transient_now = false, blocked = false, meta_started = false;
    const char *result = "success";
    uint64_t await_ms = 0;

    if (!g) {
        if (gs) {
            gs_drop(r, gs);
            if (r->w.forgotten)
                r->w.forgotten(r->w.data, key);
        }
        wq_forget(r->q, key);
        return result;
    }
    if (!gs)
        gs = gs_get(r, key);
    if (!gs) {
        vmg_logf(VMG_LOG_ERROR, LOGGER, g->meta.ns, g->meta.name, "out of memory");
        wq_add_rate_limited(r->q, key);
        return "error";
    }
    /* The cache shows the finalizer write awaited: nothing to wait for. */
    if (gs->meta_until && !gs->meta_inflight &&
        vmgroup_has_finalizer(g, VMGROUP_FINALIZER) == (gs->meta_kind == PLAN_ADD_FINALIZER))
        gs->meta_until = 0;

    memset(&in, 0, sizeof(in));
    memset(&f, 0, sizeof(f));
    f.state = PLAN_FOLDER_UNKNOWN;
    vr = r->w.vcenter_ready(r->w.vcdata, vmsg, sizeof(vmsg));
    if (vr == 0) {
        rc = r->w.folder(r->w.vcdata, gs->folder, &f);
        if (rc < 0) {
            snprintf(vmsg, sizeof(vmsg), "Cannot read the inventory: %s", vmg_strerror(rc));
            vr = rc;
        }
    }

    if (f.n_vms > VMGROUP_REPLICAS_MAX) {
        f.n_vms = VMGROUP_REPLICAS_MAX;
        f.truncated = true;
    }
    await_ms = sweep(r, gs, &f, t);
    vms = f.n_vms ? calloc(f.n_vms, sizeof(*vms)) : NULL;
    slots = gs->n_ops ? calloc(gs->n_ops, sizeof(*slots)) : NULL;
    if ((f.n_vms && !vms) || (gs->n_ops && !slots))
        goto oom;
    for (size_t i = 0; i < f.n_vms; i++) {
        vms[i] = f.vms[i];
        if (has_vm_op(gs, vms[i].name))
            vms[i].inflight = true;
    }
    n = f.n_vms;
    for (const struct op *op = gs->ops; op; op = op->next) {
        if (op->kind == PLAN_CLONE)
            slots[ns++] = op->slot;
        if (op->kind == PLAN_CREATE_FOLDER || op->kind == PLAN_DESTROY_FOLDER)
            in.folder_inflight = true;
    }

    /* A learned block holds until the spec changes, and is retried now and then. */
    if (gs->block != PLAN_BLOCK_NONE &&
        (gs->block_gen != g->meta.generation || t - gs->block_at >= r->o.blocked_retry_ms)) {
        gs->block = PLAN_BLOCK_NONE;
        gs->block_reason = NULL;
        set_str(&gs->block_msg, NULL);
    }
    if (gs->transient && t >= gs->transient_until)
        set_str(&gs->transient, NULL);

    r->w.now(r->w.data, now, sizeof(now));
    in.g = g;
    in.vms = vms;
    in.n_vms = n;
    in.folder = f.state;
    in.folder_other_objects = f.other_objects;
    in.clones_inflight = slots;
    in.n_clones_inflight = ns;
    in.block = gs->block;
    in.block_reason = gs->block_reason;
    in.block_message = gs->block_msg;
    if (f.truncated && !g->meta.deleting) {
        /* A partial view could make a live group clone over VMs it does
         * not see; a deleting one only removes what it sees, and sees more
         * as they go. */
        snprintf(vmsg, sizeof(vmsg),
                 "folder %s holds more than %d VMs, the most one group can manage: nothing is "
                 "done until it holds fewer",
                 gs->folder, VMGROUP_REPLICAS_MAX);
        in.block = PLAN_BLOCK_OTHER;
        in.block_reason = "TooManyVMs";
        in.block_message = vmsg;
    } else if (vr == VMG_ENOTFOUND || vr == VMG_EAMBIGUOUS || vr == VMG_ECONFIG) {
        in.block = PLAN_BLOCK_PLACEMENT;
        in.block_reason = NULL;
        in.block_message = vmsg;
    } else if (vr < 0) {
        in.transient_message = vmsg;
        transient_now = true;
    } else if (gs->transient) {
        in.transient_message = gs->transient;
        transient_now = true;
    }
    in.now = now;
    in.max_inflight = r->o.max_group_tasks;

    rc = planner_plan(&in, &p);
    if (rc < 0) {
        vmg_logf(VMG_LOG_ERROR, LOGGER, g->meta.ns, g->meta.name, "planning failed: %s",
                 vmg_strerror(rc));
        wq_add_rate_limited(r->q, key);
        result = "error";
        goto out;
    }
    if (r->w.observed)
        r->w.observed(r->w.data, g, p);
    if (p->n_actions && plan_describe(p, desc, sizeof(desc)) >= 0)
        vmg_log_v(1, LOGGER, g->meta.ns, g->meta.name, "plan: %s", desc);

    for (size_t i = 0; i < p->n_actions; i++) {
        const struct plan_action *a = &p->actions[i];
        cJSON *patch = NULL;

        switch (a->kind) {
        case PLAN_ADD_FINALIZER:
        case PLAN_REMOVE_FINALIZER:
            /* The finalizer patch is made against this version of the
             * object: a status write in flight would make it conflict.
             * When that write ends, the key is planned again. */
            if (gs->status_inflight)
                gs->status_dirty = true;
            if (gs->meta_inflight || gs->status_inflight)
                break;
            if (gs->meta_kind == a->kind && t < gs->meta_until) {
                /* Written, and not in the cache yet: the write would only
                 * be made again (or conflict). Look again when the wait
                 * is over. */
                wq_add_after(r->q, key, gs->meta_until - t);
                break;
            }
            if (vmgroup_finalizer_patch(g, a->kind == PLAN_ADD_FINALIZER, &patch) == 0) {
                if (start_write(r, gs, g, false, patch) < 0) {
                    wq_add_rate_limited(r->q, key);
                } else {
                    gs->meta_kind = a->kind;
                    meta_started = true;
                    gs->meta_until = UINT64_MAX; /* set when the write succeeds */
                    if (a->kind == PLAN_REMOVE_FINALIZER)
                        vmg_logf(VMG_LOG_INFO, LOGGER, g->meta.ns, g->meta.name,
                                 "removing the finalizer: vCenter is clean");
                }
            }
            cJSON_Delete(patch);
            break;
        case PLAN_EVENT:
            r->w.event(r->w.data, g, a->event_type == PLAN_EVENT_WARNING, a->reason, a->message);
            break;
        default:
            rc = start_op(r, gs, g, a);
            if (rc < 0) {
                char text[MSG_MAX];
                snprintf(text, sizeof(text), "Cannot %s %s: %s", kind_verb(a->kind),
                         a->vm ? a->vm : gs->folder, vmg_strerror(rc));
                vmg_logf(VMG_LOG_WARN, LOGGER, g->meta.ns, g->meta.name, "%s", text);
                note_transient(r, gs, text);
            }
            break;
        }
    }

    /* Not with a finalizer write, for the same reason: the status goes
     * with the next pass, on the object that write makes (if any: removing
     * the last finalizer of a deleted group removes it). */
    if (p->status_changed && !meta_started)
        write_status(r, gs, g, p);

    blocked = gs->block != PLAN_BLOCK_NONE;
    if (vr < 0) {
        wq_add_rate_limited(r->q, key);
        result = "error";
    } else if (gs->transient) {
        uint64_t left = gs->transient_until > t ? gs->transient_until - t : 1;
        wq_add_after(r->q, key, transient_now ? left : backoff_ms(gs->failures));
        result = "requeue_after";
    } else if (blocked) {
        wq_add_after(r->q, key, r->o.blocked_retry_ms);
        wq_forget(r->q, key);
        result = "requeue_after";
    } else {
        wq_forget(r->q, key);
    }
    if (await_ms)
        wq_add_after(r->q, key, await_ms);
    goto out;

oom:
    vmg_logf(VMG_LOG_ERROR, LOGGER, g->meta.ns, g->meta.name, "out of memory");
    wq_add_rate_limited(r->q, key);
    result = "error";
out:
    plan_free(p);
    free(vms);
    free(slots);
    return result;
}

void reconciler_handle(void *data, const char *key)
{
    reconciler *r = data;
    char *k = strdup(key); /* wq_done may free the queue's copy */

    if (!k) {
        wq_done(r->q, key);
        return;
    }
    {
        uint64_t t0 = now_ms();
        const char *result = reconcile(r, k);
        if (r->w.reconciled)
            r->w.reconciled(r->w.data, k, result, (double)(now_ms() - t0) / 1000.0);
    }
    wq_done(r->q, k);
    free(k);
}

int reconciler_new(const struct rec_world *world, const struct rec_options *opts, struct wq *q,
                   reconciler **ret)
{
    reconciler *r;

    if (!world || !q || !ret)
        return -EINVAL;
    r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->w = *world;
    if (opts)
        r->o = *opts;
    if (r->o.max_group_tasks < 1)
        r->o.max_group_tasks = 4;
    if (r->o.blocked_retry_ms == 0)
        r->o.blocked_retry_ms = 60000;
    r->q = q;
    r->clock = r->o.clock ? r->o.clock : clock_default;
    r->groups = strmap_new();
    if (!r->groups) {
        free(r);
        return -ENOMEM;
    }
    *ret = r;
    return 0;
}

size_t reconciler_inflight(const reconciler *r)
{
    return r ? r->inflight : 0;
}

size_t reconciler_groups(const reconciler *r)
{
    return r ? strmap_count(r->groups) : 0;
}

static int free_group(void *data, const char *key, void *value)
{
    struct gstate *gs = value;
    struct op *op = gs->ops, *next;

    (void)data;
    (void)key;
    for (; op; op = next) {
        next = op->next;
        free(op);
    }
    gs_free(gs);
    return 0;
}

void reconciler_free(reconciler *r)
{
    if (!r)
        return;
    strmap_foreach(r->groups, free_group, NULL);
    strmap_free(r->groups);
    free(r);
}
