/* reconciler.c: the VmGroup sync function (gather the caches -> plan -> act
 * -> decide when to look again) and the bookkeeping of the operations it
 * starts. What an operation's end means is decided in outcome.c; this file
 * applies it. */
#include "controller/reconciler.h"

#include <errno.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "controller/bootstrap.h"
#include "controller/naming.h"
#include "controller/outcome.h"
#include "lib/backoff.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/queue.h"
#include "lib/str.h"
#include "lib/strmap.h"

#define LOGGER "reconciler"
#define MSG_MAX 512
#define AWAIT_MS 30000 /* longest wait for the inventory to show a finished operation */
#define BACKOFF_BASE_MS 1000
#define BACKOFF_CAP_MS 300000

struct gstate;

/* One operation in flight for a group. */
struct op {
    struct op *next;
    struct gstate *gs;
    reconciler *r;
    enum plan_action_kind kind;
    int slot;
    char vm[96];
    char ref[128];      /* the VM's id (plan_action.vm_ref); "": look it up by name */
    int cpu, memory_mb; /* RECONFIGURE: what was asked */
    char mark[64];      /* MARK: the instanceUuid written */
    int64_t gen;        /* the generation of the spec it was planned from */
    unsigned object;    /* the gstate.object it was planned for */
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
    char *uid; /* of the object last planned: what is learned below is its */
    /* Counts the objects the key has named (forget_another_object): an
     * operation planned for an earlier one teaches this one nothing. */
    unsigned object;
    char folder[96];
    struct op *ops;
    size_t n_ops;
    bool meta_inflight;
    bool status_inflight;
    bool status_dirty;  /* a newer status waited for the write in flight */
    void *status_write; /* the world's handle of the status write in flight */

    enum plan_block block;    /* learned from a failed operation */
    const char *block_reason; /* its CamelCase reason (static), NULL: the planner's */
    char *block_msg;
    int64_t block_gen;
    uint64_t block_at;
    /* vCenter refused the size of the spec of generation resize_gen (its
     * message; NULL: none): resizes stop until the spec changes. */
    char *resize_msg;
    int64_t resize_gen;

    unsigned folder_hidden; /* destroys that found objects in the folder that
                               the inventory does not show (OP_HIDDEN) */
    uint64_t hidden_until;  /* the folder's next destroy waits until then */
    /* Instance marks (PLAN_MARK) that failed in a row, and when the next
     * may start: a mark has a backoff of its own. */
    unsigned mark_failures;
    uint64_t marks_until;
    /* The VMs whose mark failed and was not seen since, by id (struct
     * failed_mark; NULL until the first): the planner marks the others
     * first, then these, the least recent failure first. */
    strmap *marks_failed;
    uint64_t marks_failed_seq; /* the last failed_mark.seq or .sweep given */
    /* In reconciler.marks_line while a mark of it waits for room
     * (rec_options.max_marks); marks_woken: taken off it, room kept for
     * it until its next pass. */
    struct lq marks_link;
    bool marks_woken;
    char *transient;          /* why the last step failed */
    uint64_t transient_until; /* shown (and vCenter left alone) until then */
    unsigned failures;        /* consecutive, for the backoff */

    /* The last status written, as a keyed hash of its JSON text and the
     * text's length (0: none), and the resourceVersion of the object it was
     * planned from: enough to skip the same write, without keeping a copy
     * of the text (status.vms makes it kilobytes) for every group. */
    uint64_t written_sum;
    size_t written_len;
    char *written_rv;
    uint64_t written_headline; /* its vmgroup_status_headline, when written_len */
    /* A finalizer write (meta_kind: PLAN_ADD_FINALIZER or
     * PLAN_REMOVE_FINALIZER) that succeeded, awaited in the cache until
     * meta_until (0: none; UINT64_MAX while in flight): versions the cache
     * shows before it (another write's, say) still look as if it had to be
     * made again. */
    enum plan_action_kind meta_kind;
    uint64_t meta_until;
    /* The conditions of the last plan (planner.h struct plan_announced) of
     * the object with UID announced_uid, from which the next plan's events
     * are computed (have_announced): Ready as last written, Degraded as
     * last planned (its events went out then, written or not). */
    bool have_announced;
    bool announced_ready;
    char *announced_uid, *announced_reason, *announced_message;
};

struct reconciler {
    struct rec_world w;
    struct rec_options o;
    struct wq *q;
    strmap *groups; /* key -> struct gstate */
    size_t inflight;
    /* Instance marks in flight; the groups whose marks wait for room, first
     * come first served (gstate.marks_link), and the room kept for those
     * woken (marks_woken) until their pass. */
    size_t marks_inflight, marks_reserved;
    struct lq marks_line;
    uint64_t (*clock)(void *);
    /* SipHash-2-4 under a key drawn at start, so that nobody who can choose
     * a status (names, templates) can choose two with the same sum. */
    EVP_MAC_CTX *sum_ctx;
    unsigned char sum_key[16];
};

/* What one pass asks of the queue for its key. reconcile() decides it;
 * only reconciler_handle() acts on it (apply_result). */
enum rec_outcome {
    REC_DONE = 0,      /* success: the key's backoff is reset */
    REC_REQUEUE_AFTER, /* look again after after_ms */
    REC_ERROR,         /* failed: retried with the queue's rate limiter */
};

struct rec_result {
    enum rec_outcome outcome;
    uint64_t after_ms; /* REC_REQUEUE_AFTER: when to look again */
    bool forget;       /* REC_REQUEUE_AFTER: the key's backoff is reset as well */
    /* Besides the outcome, applied before it: a finalizer write that could
     * not start is retried with the rate limiter; a finalizer written and
     * not yet in the cache is looked at when the wait is over (0: none). */
    bool write_failed;
    uint64_t meta_wait_ms;
    /* After it: the next deadline of an operation awaited in the cache (0: none). */
    uint64_t await_ms;
};

static const char *result_label(const struct rec_result *res)
{
    switch (res->outcome) {
    case REC_REQUEUE_AFTER:
        return "requeue_after";
    case REC_ERROR:
        return "error";
    default:
        return "success";
    }
}

static struct gstate *gs_find(reconciler *r, const char *key)
{
    return strmap_get(r->groups, key);
}

/* A VM whose mark failed (gstate.marks_failed). */
struct failed_mark {
    uint64_t seq;   /* of its last failure in its group: larger is more recent */
    uint64_t sweep; /* the last prune_failed_marks that found it listed */
};

/* failed_mark_seq: the seq of the last mark failure of the VM of id ref,
 * or 0 when its mark has not failed. */
static uint64_t failed_mark_seq(const struct gstate *gs, const char *ref)
{
    const struct failed_mark *fm =
        gs->marks_failed && ref && ref[0] ? strmap_get(gs->marks_failed, ref) : NULL;

    return fm ? fm->seq : 0;
}

/* note_failed_mark notes that the mark of the VM of id ref failed, as the
 * group's most recent failure; out of memory, or without an id, it is not
 * noted (it is then marked in its turn, as before any failure). Bounded by
 * the group's VMs: prune_failed_marks forgets those no longer listed. */
static void note_failed_mark(struct gstate *gs, const char *ref)
{
    struct failed_mark *fm;

    if (!ref || !ref[0])
        return;
    if (!gs->marks_failed && !(gs->marks_failed = strmap_new()))
        return;
    fm = strmap_get(gs->marks_failed, ref);
    if (!fm) {
        if (strmap_count(gs->marks_failed) >= VMGROUP_REPLICAS_MAX ||
            !(fm = calloc(1, sizeof(*fm))))
            return;
        if (strmap_set(gs->marks_failed, ref, fm) < 0) {
            free(fm);
            return;
        }
    }
    fm->seq = ++gs->marks_failed_seq;
}

static void forget_failed_mark(struct gstate *gs, const char *ref)
{
    if (gs->marks_failed && ref && ref[0])
        free(strmap_del(gs->marks_failed, ref));
}

/* forget_failed_marks forgets every VM whose mark failed. */
static void forget_failed_marks(struct gstate *gs)
{
    strmap_free_all(gs->marks_failed);
    gs->marks_failed = NULL;
}

struct prune {
    uint64_t sweep;
    char **gone;
    size_t n;
};

static int unlisted(void *data, const char *key, void *value)
{
    struct prune *p = data;
    const struct failed_mark *fm = value;

    if (fm->sweep != p->sweep && (p->gone[p->n] = strdup(key)) != NULL)
        p->n++;
    return 0;
}

/* prune_failed_marks forgets the VMs whose mark failed that are marked
 * now (the mark given up on showed later, or one said failed was
 * written), and, when f is the whole listing of the group's VMs, those it
 * no longer shows (gone from the folder and from the group's marks). */
static void prune_failed_marks(struct gstate *gs, const struct rec_folder *f)
{
    struct prune p = {0};
    size_t n = gs->marks_failed ? strmap_count(gs->marks_failed) : 0;

    if (!n)
        return;
    p.sweep = ++gs->marks_failed_seq;
    for (size_t j = 0; j < f->n_vms; j++) {
        const struct plan_vm *v = &f->vms[j];
        struct failed_mark *fm = v->ref ? strmap_get(gs->marks_failed, v->ref) : NULL;
        if (fm && v->mark_instance)
            forget_failed_mark(gs, v->ref);
        else if (fm)
            fm->sweep = p.sweep;
    }
    if (f->state != PLAN_FOLDER_PRESENT || f->truncated)
        return;
    n = strmap_count(gs->marks_failed);
    if (!n || !(p.gone = calloc(n, sizeof(*p.gone))))
        return;
    (void)strmap_foreach(gs->marks_failed, unlisted, &p);
    for (size_t i = 0; i < p.n; i++) {
        forget_failed_mark(gs, p.gone[i]);
        free(p.gone[i]);
    }
    free(p.gone);
}

static void gs_free(struct gstate *gs)
{
    free(gs->key);
    free(gs->ns);
    free(gs->name);
    free(gs->uid);
    free(gs->block_msg);
    free(gs->resize_msg);
    free(gs->transient);
    free(gs->written_rv);
    free(gs->announced_uid);
    free(gs->announced_reason);
    free(gs->announced_message);
    forget_failed_marks(gs);
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

/* drop_status_write drops the status write of gs in flight if it is not
 * sent yet (its callback runs before this returns); one sent goes on. */
static void drop_status_write(reconciler *r, struct gstate *gs)
{
    if (gs->status_inflight && gs->status_write && r->w.unwrite)
        (void)r->w.unwrite(r->w.data, gs->status_write);
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
    /* A status write that waits for the client's rate limit would only
     * find the object gone. */
    drop_status_write(r, gs);
    if (gs->ops || gs->meta_inflight || gs->status_inflight)
        return;
    lq_remove(&gs->marks_link);
    if (gs->marks_woken)
        r->marks_reserved--;
    strmap_del(r->groups, gs->key);
    gs_free(gs);
}

static void set_str(char **dst, const char *s)
{
    free(*dst);
    *dst = s ? strdup(s) : NULL;
}

/* clear_block ends the block the group learned (a template, say). */
static void clear_block(struct gstate *gs)
{
    gs->block = PLAN_BLOCK_NONE;
    gs->block_reason = NULL;
    set_str(&gs->block_msg, NULL);
}

/* ---- the operations, one row a kind ---- */

static void op_done(void *cbdata, int err, const char *fault, const char *msg);

static int start_create_folder(reconciler *r, struct op *op, const struct vmgroup *g,
                               const struct plan_action *a)
{
    (void)g;
    (void)a;
    return r->w.create_folder(r->w.vcdata, op->gs->folder, op_done, op);
}

static int start_destroy_folder(reconciler *r, struct op *op, const struct vmgroup *g,
                                const struct plan_action *a)
{
    (void)g;
    (void)a;
    return r->w.destroy_folder(r->w.vcdata, op->gs->folder, op_done, op);
}

static int start_clone(reconciler *r, struct op *op, const struct vmgroup *g,
                       const struct plan_action *a)
{
    /* With the bootstrap's Secret read first, when the group has one. */
    return bootstrap_clone(&r->w, g, op->gs->folder, a->vm, a->template, a->cpu, a->memory_mb,
                           op_done, op);
}

/* ref_of: the id of op's VM, NULL when it is to be looked up by name. */
static const char *ref_of(const struct op *op)
{
    return op->ref[0] ? op->ref : NULL;
}

static int start_power(reconciler *r, struct op *op, const struct vmgroup *g,
                       const struct plan_action *a)
{
    (void)g;
    return r->w.power(r->w.vcdata, op->gs->folder, a->vm, ref_of(op), a->kind == PLAN_POWER_ON,
                      op_done, op);
}

static int start_reconfigure(reconciler *r, struct op *op, const struct vmgroup *g,
                             const struct plan_action *a)
{
    (void)g;
    return r->w.reconfigure(r->w.vcdata, op->gs->folder, a->vm, ref_of(op), a->cpu, a->memory_mb,
                            op_done, op);
}

static int start_mark(reconciler *r, struct op *op, const struct vmgroup *g,
                      const struct plan_action *a)
{
    (void)g;
    if (!r->w.mark_instance || !a->instance_uuid)
        return -EINVAL;
    return r->w.mark_instance(r->w.vcdata, op->gs->folder, a->vm, ref_of(op), a->instance_uuid,
                              op_done, op);
}

static int start_destroy_vm(reconciler *r, struct op *op, const struct vmgroup *g,
                            const struct plan_action *a)
{
    (void)g;
    return r->w.destroy_vm(r->w.vcdata, op->gs->folder, a->vm, ref_of(op), op_done, op);
}

/* The seen_ functions tell whether the inventory shows what op did; v is
 * op's VM as the folder f holds it, or NULL. */

static bool seen_folder_present(const struct op *op, const struct rec_folder *f,
                                const struct plan_vm *v)
{
    (void)op;
    (void)v;
    return f->state == PLAN_FOLDER_PRESENT;
}

static bool seen_folder_absent(const struct op *op, const struct rec_folder *f,
                               const struct plan_vm *v)
{
    (void)op;
    (void)v;
    return f->state == PLAN_FOLDER_ABSENT;
}

static bool seen_vm_present(const struct op *op, const struct rec_folder *f,
                            const struct plan_vm *v)
{
    (void)op;
    (void)f;
    return v != NULL;
}

static bool seen_vm_absent(const struct op *op, const struct rec_folder *f, const struct plan_vm *v)
{
    (void)op;
    return f->state != PLAN_FOLDER_UNKNOWN && v == NULL;
}

static bool seen_on(const struct op *op, const struct rec_folder *f, const struct plan_vm *v)
{
    (void)op;
    (void)f;
    return !v || v->powered_on;
}

static bool seen_off(const struct op *op, const struct rec_folder *f, const struct plan_vm *v)
{
    (void)op;
    (void)f;
    return !v || !v->powered_on;
}

static bool seen_sized(const struct op *op, const struct rec_folder *f, const struct plan_vm *v)
{
    (void)f;
    return !v || (v->num_cpu == op->cpu && v->memory_mb == op->memory_mb);
}

static bool seen_marked(const struct op *op, const struct rec_folder *f, const struct plan_vm *v)
{
    (void)f;
    return !v || (v->mark_instance && strcasecmp(v->mark_instance, op->mark) == 0);
}

/* What the reconciler knows of each kind of vCenter operation: how logs and
 * events name it ("Failed to <verb> web-0", "<done> web-0", the events'
 * reasons), how it is started, and how the inventory shows it done. */
struct op_kind {
    const char *verb;
    const char *done;
    const char *ok_reason, *fail_reason;
    int (*start)(reconciler *r, struct op *op, const struct vmgroup *g,
                 const struct plan_action *a);
    bool (*seen)(const struct op *op, const struct rec_folder *f, const struct plan_vm *v);
};

static const struct op_kind op_kinds[] = {
    [PLAN_CREATE_FOLDER] = {"create folder", "Created folder", "FolderCreated",
                            "FolderCreateFailed", start_create_folder, seen_folder_present},
    [PLAN_DESTROY_FOLDER] = {"delete folder", "Deleted folder", "FolderDeleted",
                             "FolderDeleteFailed", start_destroy_folder, seen_folder_absent},
    [PLAN_CLONE] = {"create VM", "Created VM", "Created", "CreateFailed", start_clone,
                    seen_vm_present},
    [PLAN_POWER_ON] = {"power on VM", "Powered on VM", "PoweredOn", "PowerOnFailed", start_power,
                       seen_on},
    [PLAN_POWER_OFF] = {"power off VM", "Powered off VM", "PoweredOff", "PowerOffFailed",
                        start_power, seen_off},
    [PLAN_RECONFIGURE] = {"reconfigure VM", "Reconfigured VM", "Reconfigured", "ReconfigureFailed",
                          start_reconfigure, seen_sized},
    [PLAN_DESTROY_VM] = {"delete VM", "Deleted VM", "Deleted", "DeleteFailed", start_destroy_vm,
                         seen_vm_absent},
    [PLAN_MARK] = {"write the instance mark of VM", "Wrote the instance mark of VM", "Marked",
                   "MarkFailed", start_mark, seen_marked},
};

/* kind_of returns the row of k; a kind that is no vCenter operation (a
 * finalizer write, an event) gets a row that starts nothing. */
static const struct op_kind *kind_of(enum plan_action_kind k)
{
    static const struct op_kind none = {"act on", "Done", "Done", "Failed", NULL, NULL};

    if ((size_t)k < sizeof(op_kinds) / sizeof(op_kinds[0]) && op_kinds[k].start)
        return &op_kinds[k];
    return &none;
}

/* backoff_ms: a group's wait after its failures-th failure in a row: 1 s,
 * doubling, at most 5 min. */
static uint64_t backoff_ms(unsigned failures)
{
    return vmg_backoff_ms(BACKOFF_BASE_MS, BACKOFF_CAP_MS, failures ? failures - 1 : 0);
}

static void note_transient(reconciler *r, struct gstate *gs, const char *msg)
{
    gs->failures++;
    set_str(&gs->transient, msg);
    gs->transient_until = r->clock(NULL) + backoff_ms(gs->failures);
}

/* mark_failed: the mark of the VM of id ref failed: the group's marks
 * wait for their backoff, and the VM's come after the others'. */
static void mark_failed(reconciler *r, struct gstate *gs, const char *ref)
{
    gs->mark_failures++;
    gs->marks_until = r->clock(NULL) + backoff_ms(gs->mark_failures);
    note_failed_mark(gs, ref);
}

/* How a key goes back to the queue. */
enum requeue {
    REQUEUE_NOW,          /* at once */
    REQUEUE_AFTER,        /* after a delay */
    REQUEUE_RATE_LIMITED, /* after the queue's rate limiter's delay, one more failure */
};

/* requeue puts key back in the queue: the only place, with apply_result's
 * wq_forget, where the reconciler adds to the queue. */
static void requeue(reconciler *r, const char *key, enum requeue how, uint64_t after_ms)
{
    switch (how) {
    case REQUEUE_NOW:
        wq_add(r->q, key);
        break;
    case REQUEUE_AFTER:
        wq_add_after(r->q, key, after_ms);
        break;
    case REQUEUE_RATE_LIMITED:
        wq_add_rate_limited(r->q, key);
        break;
    }
}

/* marks_cap: how many marks may be in flight in all groups. */
static size_t marks_cap(const reconciler *r)
{
    return r->o.max_marks > 0 ? (size_t)r->o.max_marks : 0;
}

/* marks_room tells whether gs may start a mark now: there is room that
 * no group woken before it keeps, and no group waits ahead of it. */
static bool marks_room(const reconciler *r, const struct gstate *gs)
{
    size_t kept = r->marks_reserved - (gs->marks_woken ? 1 : 0);

    if (r->marks_inflight + kept >= marks_cap(r))
        return false;
    return gs->marks_woken || lq_empty(&r->marks_line);
}

/* marks_release gives back the room kept for gs, if any. */
static void marks_release(reconciler *r, struct gstate *gs)
{
    if (gs->marks_woken) {
        gs->marks_woken = false;
        r->marks_reserved--;
    }
}

/* wake_marks plans again the groups first in line, as many as there is
 * room for marks, keeping that room for them until their pass. */
static void wake_marks(reconciler *r)
{
    while (!lq_empty(&r->marks_line) && r->marks_inflight + r->marks_reserved < marks_cap(r)) {
        struct gstate *gs = lq_entry(lq_pop_head(&r->marks_line), struct gstate, marks_link);
        gs->marks_woken = true;
        r->marks_reserved++;
        requeue(r, gs->key, REQUEUE_NOW, 0);
    }
}

/* op_done applies what the end of op means (outcome_decide): the one
 * place that logs it, says it in an event, changes the group's state and
 * plans the group again. */
static void op_done(void *cbdata, int err, const char *fault, const char *msg)
{
    struct op *op = cbdata;
    struct gstate *gs = op->gs;
    reconciler *r = op->r;
    const struct vmgroup *g = r->w.get_group(r->w.data, gs->key);
    const char *what = op->vm[0] ? op->vm : gs->folder;
    const char *why = msg && *msg ? msg : vmg_strerror(err);
    struct op **pp = &gs->ops;
    const struct op_kind *k = kind_of(op->kind);
    struct op_decision d;
    char text[MSG_MAX] = "";
    bool event, ours;

    r->inflight--;
    if (op->kind == PLAN_MARK)
        r->marks_inflight--;
    outcome_decide(op->kind, err, fault, &d);
    /* The key may name the new object before a pass has counted it. */
    ours = op->object == gs->object && (!g || vmg_streq(g->meta.uid, gs->uid));
    if (!ours) {
        /* Planned for the object the key named before: said in the log,
         * and the VM is awaited as before, but nothing of it is learned
         * or said of this one. */
        d.settle = d.transient = d.hidden = d.unblock = false;
        d.resize_refused = d.mark_failed = false;
        d.block = PLAN_BLOCK_NONE;
        d.block_reason = NULL;
        d.event = OP_EVENT_NONE;
    }
    event = g && d.event != OP_EVENT_NONE;

    /* What is said about it, in the log and in an event. */
    switch (d.outcome) {
    case OP_CANCELED:
        break; /* shutting down: nothing to report */
    case OP_DONE:
        snprintf(text, sizeof(text), "%s %s", k->done, what);
        vmg_logf(VMG_LOG_INFO, LOGGER, gs->ns, gs->name, "%s", text);
        break;
    case OP_AS_WANTED:
        vmg_log_v(1, LOGGER, gs->ns, gs->name, "%s %s: %s (already as wanted)", k->verb, what,
                  fault ? fault : "");
        break;
    case OP_VM_GONE:
        vmg_logf(VMG_LOG_INFO, LOGGER, gs->ns, gs->name,
                 "%s %s: the VM is gone from vCenter (ManagedObjectNotFound); planning again",
                 k->verb, op->vm);
        break;
    case OP_UNSURE:
        snprintf(text, sizeof(text), "creating VM %s: %s; waiting to see it in the inventory",
                 op->vm, why);
        vmg_logf(VMG_LOG_WARN, LOGGER, gs->ns, gs->name, "%s", text);
        break;
    case OP_HIDDEN:
        vmg_logf(VMG_LOG_INFO, LOGGER, gs->ns, gs->name, "%s %s: %s", k->verb, what, why);
        break;
    case OP_RESIZE_REFUSED:
        snprintf(text, sizeof(text),
                 "vCenter refused to reconfigure VM %s: %s; the VMs keep their size until the "
                 "spec changes",
                 op->vm, why);
        vmg_logf(VMG_LOG_WARN, LOGGER, gs->ns, gs->name, "%s", text);
        break;
    case OP_TEMPLATE:
        snprintf(text, sizeof(text), "%s", msg && *msg ? msg : "template not found");
        vmg_logf(VMG_LOG_WARN, LOGGER, gs->ns, gs->name, "cannot create VM %s: %s", op->vm, text);
        /* Said once, not at every retry of the same block. */
        event = event && (gs->block != PLAN_BLOCK_TEMPLATE || !gs->block_msg ||
                          strcmp(gs->block_msg, text) != 0);
        break;
    case OP_MARK_FAILED:
    case OP_FAILED:
        snprintf(text, sizeof(text), "Failed to %s %s: %s", k->verb, what, why);
        vmg_logf(VMG_LOG_WARN, LOGGER, gs->ns, gs->name, "%s", text);
        break;
    }
    if (event)
        r->w.event(r->w.data, g, d.event == OP_EVENT_WARNING,
                   d.resize_refused             ? "ResizeRefused"
                   : d.block_reason             ? d.block_reason
                   : d.event == OP_EVENT_NORMAL ? k->ok_reason
                                                : k->fail_reason,
                   text);

    /* The group's state. */
    if (d.reread && r->w.reread)
        (void)r->w.reread(r->w.vcdata, gs->folder, op->vm, ref_of(op));
    if (d.transient)
        note_transient(r, gs, text);
    if (d.settle)
        gs->failures = 0;
    if (d.hidden) {
        /* Looked at again after the backoff, whatever plans the group
         * meanwhile: the inventory may show the objects by then. */
        gs->folder_hidden++;
        gs->failures++;
        gs->hidden_until = r->clock(NULL) + backoff_ms(gs->failures);
    }
    if (d.unblock && gs->block == PLAN_BLOCK_TEMPLATE) {
        clear_block(gs);
    }
    /* Learned of the spec the operation was planned from: a spec changed
     * since is not blocked by what was refused of the one before. */
    if (d.block != PLAN_BLOCK_NONE) {
        gs->block = d.block;
        gs->block_reason = d.block_reason;
        set_str(&gs->block_msg, text);
        gs->block_gen = op->gen;
        gs->block_at = r->clock(NULL);
    }
    if (d.resize_refused) {
        set_str(&gs->resize_msg, text);
        gs->resize_gen = op->gen;
    }
    if (d.mark_failed)
        mark_failed(r, gs, op->ref);
    if (d.await) {
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

    /* The requeue; at once when the object is gone: the pass drops the group. */
    if (d.requeue == OP_REQUEUE_BACKOFF && g)
        requeue(r, gs->key, REQUEUE_AFTER,
                backoff_ms(d.mark_failed ? gs->mark_failures : gs->failures));
    else if (d.requeue != OP_REQUEUE_NONE)
        requeue(r, gs->key, REQUEUE_NOW, 0);
    if (d.outcome != OP_CANCELED)
        wake_marks(r);
}

static int start_op(reconciler *r, struct gstate *gs, const struct vmgroup *g,
                    const struct plan_action *a)
{
    const struct op_kind *k = kind_of(a->kind);
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
    if (a->vm_ref && strlen(a->vm_ref) < sizeof(op->ref))
        memcpy(op->ref, a->vm_ref, strlen(a->vm_ref) + 1);
    op->cpu = a->cpu;
    op->memory_mb = a->memory_mb;
    if (a->instance_uuid)
        snprintf(op->mark, sizeof(op->mark), "%s", a->instance_uuid);
    op->gen = g->meta.generation;
    op->object = gs->object;

    rc = k->start ? k->start(r, op, g, a) : -EINVAL;
    if (rc < 0) {
        free(op);
        return rc;
    }
    op->next = gs->ops;
    gs->ops = op;
    gs->n_ops++;
    r->inflight++;
    if (a->kind == PLAN_MARK)
        r->marks_inflight++;
    if (a->kind != PLAN_CLONE || op->vm[0])
        vmg_log_v(1, LOGGER, gs->ns, gs->name, "started: %s %s", k->verb,
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
    requeue(r, gs->key, REQUEUE_NOW, 0);
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
    if (status) {
        gs->status_inflight = false;
        gs->status_write = NULL;
    } else {
        gs->meta_inflight = false;
    }
    if (err != VMG_ECANCELED && gone_after(r, gs))
        return;
    if (err == 0) {
        if (!status)
            gs->meta_until = r->clock(NULL) + AWAIT_MS;
        /* The watch brings the new object and re-enqueues the key; a status
         * computed while this write was in flight needs a pass of its own. */
        if (status && gs->status_dirty) {
            gs->status_dirty = false;
            requeue(r, gs->key, REQUEUE_NOW, 0);
        }
        return;
    }
    /* Forget what was written so that the next pass writes again; one
     * dropped before it was sent (or as the client closed) is all this. */
    if (status)
        gs->written_len = 0;
    else
        gs->meta_until = 0;
    if (err == VMG_ECANCELED)
        return;
    if (err == VMG_ENOTFOUND) {
        requeue(r, gs->key, REQUEUE_NOW, 0);
        return;
    }
    if (err == VMG_ECONFLICT) {
        vmg_log_v(1, LOGGER, gs->ns, gs->name, "write conflicted, retrying with the latest object");
        requeue(r, gs->key, REQUEUE_RATE_LIMITED, 0);
        return;
    }
    vmg_logf(VMG_LOG_WARN, LOGGER, gs->ns, gs->name, "writing the VmGroup failed: %s",
             msg && *msg ? msg : vmg_strerror(err));
    requeue(r, gs->key, REQUEUE_RATE_LIMITED, 0);
}

static int start_write(reconciler *r, struct gstate *gs, const struct vmgroup *g, bool status,
                       const cJSON *body)
{
    struct write_ctx *c = calloc(1, sizeof(*c));
    void *h = NULL;
    int rc;

    if (!c)
        return -ENOMEM;
    c->r = r;
    c->gs = gs;
    c->status = status;
    rc = status ? r->w.patch_status(r->w.data, g, body, write_done, c, &h)
                : r->w.patch_meta(r->w.data, g, body, write_done, c, &h);
    if (rc < 0) {
        free(c);
        return rc;
    }
    if (status) {
        gs->status_write = h;
        gs->status_inflight = true;
    } else {
        /* A finalizer write comes before everything else of its group:
         * ahead of the status writes that wait for the client's rate limit. */
        if (h && r->w.hurry)
            (void)r->w.hurry(r->w.data, h);
        gs->meta_inflight = true;
    }
    return 0;
}

/* is_op_vm says whether v is the VM of op: the same id when both have
 * one (a VM moved out of the folder may share its name with one in it),
 * else the same name. */
static bool is_op_vm(const struct op *op, const struct plan_vm *v)
{
    if (!op->vm[0])
        return false;
    if (op->ref[0] && v->ref)
        return strcmp(op->ref, v->ref) == 0;
    return v->name && strcmp(op->vm, v->name) == 0;
}

/* vm_ops sets v's inflight when an operation on it is in flight, and its
 * marking when every such operation is its instance mark. */
static void vm_ops(const struct gstate *gs, struct plan_vm *v)
{
    bool any = false, marks = true;

    for (const struct op *op = gs->ops; op; op = op->next) {
        if (is_op_vm(op, v)) {
            any = true;
            marks = marks && op->kind == PLAN_MARK;
        }
    }
    if (any) {
        v->marking = marks && !v->inflight;
        v->inflight = true;
    }
}

static const struct plan_vm *find_vm(const struct rec_folder *f, const struct op *op)
{
    for (size_t i = 0; i < f->n_vms; i++)
        if (is_op_vm(op, &f->vms[i]))
            return &f->vms[i];
    return NULL;
}

/* seen tells whether the inventory now shows what op did. */
static bool seen(const struct op *op, const struct rec_folder *f)
{
    const struct op_kind *k = kind_of(op->kind);

    return !k->seen || k->seen(op, f, find_vm(f, op));
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
            if (op->kind == PLAN_MARK && op->object == gs->object && find_vm(f, op)) {
                gs->mark_failures = 0; /* seen on the VM, not a VM gone */
                forget_failed_mark(gs, op->ref);
            }
            *pp = op->next;
            gs->n_ops--;
            free(op);
            continue;
        }
        if (op->awaiting && t >= op->deadline && !op->reread && op->vm[0] && r->w.reread &&
            r->w.reread(r->w.vcdata, gs->folder, op->vm, ref_of(op)) == 0) {
            /* The watch may lag or have missed the change: read the VM
             * itself, and wait once more before acting on the cache. */
            vmg_log_v(1, LOGGER, gs->ns, gs->name,
                      "the inventory did not show the end of %s %s in time; reading it again",
                      kind_of(op->kind)->verb, op->vm);
            op->reread = true;
            op->deadline = t + AWAIT_MS;
        }
        if (op->awaiting && t >= op->deadline) {
            vmg_log_v(1, LOGGER, gs->ns, gs->name,
                      "the inventory did not show the end of %s %s in time; planning again",
                      kind_of(op->kind)->verb, op->vm[0] ? op->vm : gs->folder);
            /* A mark vCenter took that the inventory does not show: the
             * next waits for the marks' backoff, lest it be written again
             * each minute. (Not while the inventory is out of use: it
             * shows nothing then; nor for a mark of the object the key
             * named before.) */
            if (op->kind == PLAN_MARK && op->object == gs->object &&
                f->state != PLAN_FOLDER_UNKNOWN) {
                vmg_logf(VMG_LOG_WARN, LOGGER, gs->ns, gs->name,
                         "the inventory does not show the instance mark written on VM %s; "
                         "writing it again after a backoff",
                         op->vm);
                mark_failed(r, gs, op->ref);
            }
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

/* status_sum puts the 64-bit keyed hash of the n bytes at text in *ret;
 * -1 when it cannot (the write is then never skipped). */
static int status_sum(reconciler *r, const char *text, size_t n, uint64_t *ret)
{
    size_t size = sizeof(*ret);
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &size),
        OSSL_PARAM_construct_end(),
    };
    unsigned char out[16];
    size_t outl = 0;

    if (!r->sum_ctx || EVP_MAC_init(r->sum_ctx, r->sum_key, sizeof(r->sum_key), params) != 1 ||
        EVP_MAC_update(r->sum_ctx, (const unsigned char *)text, n) != 1 ||
        EVP_MAC_final(r->sum_ctx, out, &outl, sizeof(out)) != 1 || outl != sizeof(*ret))
        return -1;
    memcpy(ret, out, sizeof(*ret));
    return 0;
}

/* write_status writes p's status unless the same was written over the same
 * object (the cache has not shown it yet). While a write is in flight, one
 * not sent yet (it waits for the client's rate limit) carries this status
 * instead of the one it had, so that a group whose status changes faster
 * than writes can go out writes its latest once; one sent makes the key be
 * planned again when it ends. Returns whether the status is written or
 * being written. */
static bool write_status(reconciler *r, struct gstate *gs, const struct vmgroup *g,
                         const struct plan *p)
{
    cJSON *st = NULL;
    char *text;
    uint64_t sum = 0, headline;
    size_t len;
    bool summed, started;

    if (gs->status_inflight && (!gs->status_write || !r->w.restatus)) {
        gs->status_dirty = true;
        return false;
    }
    if (vmgroup_status_to_json(&p->status, p->vms, &st) < 0)
        return false;
    text = cJSON_PrintUnformatted(st);
    if (!text) {
        cJSON_Delete(st);
        return false;
    }
    len = strlen(text);
    summed = status_sum(r, text, len, &sum) == 0;
    free(text);
    /* The cache may not have seen our last write yet: do not write the same
     * status twice over the same object. */
    if (summed && gs->written_len == len && gs->written_sum == sum && gs->written_rv &&
        strcmp(gs->written_rv, g->meta.resource_version) == 0) {
        cJSON_Delete(st);
        return true;
    }
    if (gs->status_inflight) {
        started = r->w.restatus(r->w.data, gs->status_write, st) == 0;
        if (!started)
            gs->status_dirty = true; /* out already: planned again when it ends */
    } else {
        started = start_write(r, gs, g, true, st) == 0;
    }
    /* A status that changes what the group says as a whole (its phase,
     * its conditions) goes before the writes that only say how far it has
     * come (the replicas made so far, a VM's address or UUID): compared
     * with the last status written, which the cache may not show yet. */
    headline = vmgroup_status_headline(&p->status);
    if (started && r->w.hurry &&
        headline != (gs->written_len ? gs->written_headline : vmgroup_status_headline(&g->status)))
        (void)r->w.hurry(r->w.data, gs->status_write);
    if (started) {
        gs->written_sum = sum;
        gs->written_len = summed ? len : 0;
        gs->written_headline = headline;
        set_str(&gs->written_rv, g->meta.resource_version);
    }
    cJSON_Delete(st);
    return started;
}

/* What one pass gathers for the planner, and keeps until the plan is made. */
struct pass {
    struct planner_input in;
    struct rec_folder f;
    struct plan_vm *vms; /* f's VMs, marked when an operation on them is in flight */
    int *slots;          /* the slots of the clones in flight */
    char vmsg[MSG_MAX];  /* why vCenter cannot be used, or the folder's block */
    bool vc_down;        /* vcenter_ready said vCenter cannot be used (vr) */
    char now[64];
    int vr;                          /* 0 when vCenter is usable, else why not */
    bool transient_now;              /* the planner is told of a transient failure */
    struct plan_announced announced; /* in.announced, from gs */
    uint64_t await_ms;               /* the next deadline of an awaited operation (0: none) */
};

/* placement_invalid: vcenter_ready's codes for a placement that names
 * nothing usable (see struct rec_world), which only new flags mend. */
static bool placement_invalid(int vr)
{
    return vr == VMG_ENOTFOUND || vr == VMG_EAMBIGUOUS || vr == VMG_ECONFIG;
}

/* forget_another_object: the group's key names another object than the
 * one planned last (deleted and made again between two passes): what was
 * learned of that one (blocks, a refused size, a folder's hidden objects,
 * failures) is not the new one's, nor is what its operations still in
 * flight will teach (op_done, sweep: gstate.object). */
static void forget_another_object(struct gstate *gs, const struct vmgroup *g)
{
    const char *uid = g->meta.uid ? g->meta.uid : "";

    if (gs->uid && strcmp(gs->uid, uid) == 0)
        return;
    if (gs->uid) {
        clear_block(gs);
        set_str(&gs->resize_msg, NULL);
        set_str(&gs->transient, NULL);
        gs->folder_hidden = 0;
        gs->hidden_until = 0;
        gs->failures = 0;
        gs->mark_failures = 0;
        gs->marks_until = 0;
        forget_failed_marks(gs);
        gs->object++;
    }
    set_str(&gs->uid, uid);
}

/* gather reads the caches for the group of gs (object g) at time t and fills
 * ps->in for the planner; ps->vms and ps->slots are the caller's to free,
 * whatever it returns (0, or -ENOMEM). */
static int gather(reconciler *r, struct gstate *gs, const struct vmgroup *g, uint64_t t,
                  struct pass *ps)
{
    struct planner_input *in = &ps->in;
    struct rec_folder *f = &ps->f;
    size_t ns = 0;
    int rc;

    memset(ps, 0, sizeof(*ps));
    forget_another_object(gs, g);
    f->state = PLAN_FOLDER_UNKNOWN;
    ps->vr = r->w.vcenter_ready(r->w.vcdata, ps->vmsg, sizeof(ps->vmsg));
    ps->vc_down = ps->vr < 0;
    if (ps->vr == 0) {
        rc = r->w.folder(r->w.vcdata, gs->folder, g->meta.uid, f);
        if (rc < 0) {
            snprintf(ps->vmsg, sizeof(ps->vmsg), "Cannot read the inventory: %s", vmg_strerror(rc));
            ps->vr = rc;
        }
    }

    if (f->n_vms > VMGROUP_REPLICAS_MAX) {
        f->n_vms = VMGROUP_REPLICAS_MAX;
        f->truncated = true;
    }
    ps->await_ms = sweep(r, gs, f, t);
    ps->vms = f->n_vms ? calloc(f->n_vms, sizeof(*ps->vms)) : NULL;
    ps->slots = gs->n_ops ? calloc(gs->n_ops, sizeof(*ps->slots)) : NULL;
    if ((f->n_vms && !ps->vms) || (gs->n_ops && !ps->slots))
        return -ENOMEM;
    prune_failed_marks(gs, f);
    for (size_t i = 0; i < f->n_vms; i++) {
        ps->vms[i] = f->vms[i];
        vm_ops(gs, &ps->vms[i]);
        ps->vms[i].mark_failure_seq = failed_mark_seq(gs, ps->vms[i].ref);
    }
    for (const struct op *op = gs->ops; op; op = op->next) {
        if (op->kind == PLAN_CLONE)
            ps->slots[ns++] = op->slot;
        if (op->kind == PLAN_CREATE_FOLDER || op->kind == PLAN_DESTROY_FOLDER)
            in->folder_inflight = true;
    }
    if (gs->folder_hidden == 1 && t < gs->hidden_until)
        in->folder_inflight = true; /* its destroy waits (OP_HIDDEN) */

    /* A learned block holds until the spec changes, and is retried now and
     * then; a refused size (resize_msg, below) only at a change: each try
     * powers a VM off. */
    if (gs->block != PLAN_BLOCK_NONE &&
        (gs->block_gen != g->meta.generation || t - gs->block_at >= r->o.blocked_retry_ms)) {
        clear_block(gs);
    }
    if (gs->transient && t >= gs->transient_until)
        set_str(&gs->transient, NULL);

    r->w.now(r->w.data, ps->now, sizeof(ps->now));
    in->g = g;
    in->vms = ps->vms;
    in->n_vms = f->n_vms;
    in->vms_partial = f->truncated;
    in->folder = f->state;
    in->folder_other_objects = f->other_objects;
    in->folder_other_names = f->other_names;
    in->n_folder_other_names = f->n_other_names;
    /* Twice: once could be VMs the inventory has yet to show. */
    in->folder_hidden_objects = gs->folder_hidden >= 2;
    in->clones_inflight = ps->slots;
    in->n_clones_inflight = ns;
    in->block = gs->block;
    in->block_reason = gs->block_reason;
    in->block_message = gs->block_msg;
    if (gs->resize_msg && gs->resize_gen != g->meta.generation)
        set_str(&gs->resize_msg, NULL);
    in->resize_refused = gs->resize_msg;
    if (f->truncated && !g->meta.deleting) {
        /* A partial view could make a live group clone over VMs it does
         * not see; a deleting one only removes what it sees, and sees more
         * as they go. */
        snprintf(ps->vmsg, sizeof(ps->vmsg),
                 "folder %s holds more than %d VMs, the most one group can manage: nothing is "
                 "done until it holds fewer",
                 gs->folder, VMGROUP_REPLICAS_MAX);
        in->block = PLAN_BLOCK_OTHER;
        in->block_reason = "TooManyVMs";
        in->block_message = ps->vmsg;
    } else if (placement_invalid(ps->vr)) {
        in->block = PLAN_BLOCK_PLACEMENT;
        in->block_reason = NULL;
        in->block_message = ps->vmsg;
    } else if (ps->vr < 0) {
        in->transient_message = ps->vmsg;
        ps->transient_now = true;
    } else if (gs->transient) {
        in->transient_message = gs->transient;
        ps->transient_now = true;
    }
    in->now = ps->now;
    in->max_inflight = r->o.max_group_tasks;
    in->marks_paused = !r->w.mark_instance || r->o.max_marks < 0 || t < gs->marks_until;
    if (gs->have_announced && vmg_streq(gs->announced_uid, g->meta.uid)) {
        ps->announced.ready = gs->announced_ready;
        ps->announced.degraded_reason = gs->announced_reason;
        ps->announced.degraded_message = gs->announced_message;
        in->announced = &ps->announced;
    }
    return 0;
}

/* note_announced keeps the conditions of plan p, made over object g (see
 * struct gstate); written: its status is what the API server has or will
 * have (written, being written, or no change); a Ready False that is not
 * is not kept, so that a Ready that went False and True again without a
 * status written in between is not announced again (a True is kept: its
 * event went out). When memory runs out, or the
 * plan is the group's last, nothing is kept, and the next plan compares
 * with the object's status. */
static void note_announced(struct gstate *gs, const struct vmgroup *g, const struct plan *p,
                           bool written)
{
    const struct plan_announced *a = &p->announced;
    bool same = gs->have_announced && vmg_streq(gs->announced_uid, g->meta.uid);

    if (!p->announced_valid) {
        gs->have_announced = false;
        return;
    }
    if (written || a->ready || !same)
        gs->announced_ready = a->ready;
    if (same && !a->degraded_reason == !gs->announced_reason &&
        vmg_streq(a->degraded_reason, gs->announced_reason) &&
        vmg_streq(a->degraded_message, gs->announced_message))
        return;
    free(gs->announced_reason);
    free(gs->announced_message);
    gs->announced_reason = gs->announced_message = NULL;
    gs->have_announced = false;
    if (!same) {
        free(gs->announced_uid);
        gs->announced_uid = g->meta.uid ? strdup(g->meta.uid) : NULL;
        if (!gs->announced_uid)
            return;
    }
    if (a->degraded_reason) {
        gs->announced_reason = strdup(a->degraded_reason);
        gs->announced_message = strdup(a->degraded_message ? a->degraded_message : "");
        if (!gs->announced_reason || !gs->announced_message) {
            free(gs->announced_reason);
            free(gs->announced_message);
            gs->announced_reason = gs->announced_message = NULL;
            return;
        }
    }
    gs->have_announced = true;
}

/* write_finalizer starts the finalizer write a (PLAN_ADD_FINALIZER or
 * PLAN_REMOVE_FINALIZER) unless a write is in flight or the one made is not
 * in the cache yet; returns whether it started. */
static bool write_finalizer(reconciler *r, struct gstate *gs, const struct vmgroup *g,
                            const struct plan_action *a, uint64_t t, struct rec_result *res)
{
    cJSON *patch = NULL;
    bool started = false;

    /* A patch made against this version of the object (a merge patch with
     * its resourceVersion, when it has no finalizers) would conflict with
     * a status write in flight; one that tests the finalizers would not.
     * When that write ends, the key is planned again. */
    if (gs->status_inflight && g->meta.n_finalizers == 0) {
        gs->status_dirty = true;
        return false;
    }
    if (gs->meta_inflight)
        return false;
    if (gs->meta_kind == a->kind && t < gs->meta_until) {
        /* Written, and not in the cache yet: the write would only be made
         * again (or conflict). Look again when the wait is over. */
        res->meta_wait_ms = gs->meta_until - t;
        return false;
    }
    /* The object goes away with its last finalizer: a status write that
     * waits for the client's rate limit is dropped rather than sent first.
     * (With another writer's finalizer left, the object stays: it goes.) */
    if (a->kind == PLAN_REMOVE_FINALIZER && g->meta.n_finalizers == 1)
        drop_status_write(r, gs);
    if (vmgroup_finalizer_patch(g, a->kind == PLAN_ADD_FINALIZER, &patch) == 0) {
        if (start_write(r, gs, g, false, patch) < 0) {
            res->write_failed = true;
        } else {
            gs->meta_kind = a->kind;
            started = true;
            gs->meta_until = UINT64_MAX; /* set when the write succeeds */
            if (a->kind == PLAN_REMOVE_FINALIZER)
                vmg_logf(VMG_LOG_INFO, LOGGER, g->meta.ns, g->meta.name,
                         "removing the finalizer: vCenter is clean");
        }
    }
    cJSON_Delete(patch);
    return started;
}

/* act starts the actions of p for the group of gs (object g) at time t:
 * finalizer and status writes, events, vCenter operations. Returns whether
 * p's status is what the API server has or will have (see write_status). */
static bool act(reconciler *r, struct gstate *gs, const struct vmgroup *g, const struct plan *p,
                uint64_t t, struct rec_result *res)
{
    bool meta_started = false, removing = false, mark_refused = false;
    int rc;

    for (size_t i = 0; i < p->n_actions; i++) {
        const struct plan_action *a = &p->actions[i];

        switch (a->kind) {
        case PLAN_ADD_FINALIZER:
        case PLAN_REMOVE_FINALIZER:
            removing = removing || a->kind == PLAN_REMOVE_FINALIZER;
            if (write_finalizer(r, gs, g, a, t, res))
                meta_started = true;
            break;
        case PLAN_EVENT:
            r->w.event(r->w.data, g, a->event_type == PLAN_EVENT_WARNING, a->reason, a->message);
            break;
        default:
            if (a->kind == PLAN_MARK && !marks_room(r, gs)) {
                /* In line: woken when there is room (wake_marks). */
                marks_release(r, gs);
                if (!lq_linked(&gs->marks_link))
                    lq_insert_tail(&r->marks_line, &gs->marks_link);
                break;
            }
            if (a->kind == PLAN_MARK)
                marks_release(r, gs); /* its room is now its mark's */
            rc = start_op(r, gs, g, a);
            if (rc < 0) {
                char text[MSG_MAX];
                snprintf(text, sizeof(text), "Cannot %s %s: %s", kind_of(a->kind)->verb,
                         a->vm ? a->vm : gs->folder, vmg_strerror(rc));
                vmg_logf(VMG_LOG_WARN, LOGGER, g->meta.ns, g->meta.name, "%s", text);
                if (a->kind == PLAN_MARK) {
                    mark_refused = true; /* one backoff step for the pass */
                    note_failed_mark(gs, a->vm_ref);
                } else
                    note_transient(r, gs, text);
            }
            break;
        }
    }

    if (mark_refused)
        mark_failed(r, gs, NULL);

    /* Not with a finalizer write, for the same reason: the status goes
     * with the next pass, on the object that write makes (if any: removing
     * the last finalizer of a deleted group removes it). */
    if (!p->status_changed) {
        /* The object says what the plan says: a write that still waits
         * for the client's rate limit says something older (e.g. vCenter
         * out of use, and back meanwhile). Not when the plan removes our
         * finalizer: it plans no status then (write_finalizer decides). */
        if (!removing)
            drop_status_write(r, gs);
        return true;
    }
    return !meta_started && write_status(r, gs, g, p);
}

/* decide says when the group of gs is to be planned again, after a pass
 * (ps) that ran its plan at time t. */
static void decide(const reconciler *r, const struct gstate *gs, const struct pass *ps, uint64_t t,
                   struct rec_result *res)
{
    if (ps->vr < 0) {
        res->outcome = REC_ERROR;
    } else if (gs->transient) {
        uint64_t left = gs->transient_until > t ? gs->transient_until - t : 1;
        res->outcome = REC_REQUEUE_AFTER;
        res->after_ms = ps->transient_now ? left : backoff_ms(gs->failures);
    } else if (gs->block != PLAN_BLOCK_NONE) {
        res->outcome = REC_REQUEUE_AFTER;
        res->after_ms = r->o.blocked_retry_ms;
        res->forget = true;
    } else if (gs->marks_until > t) {
        /* A mark failed: tried again when its backoff is over. */
        res->outcome = REC_REQUEUE_AFTER;
        res->after_ms = gs->marks_until - t;
        res->forget = true;
    } else {
        res->outcome = REC_DONE;
    }
    res->await_ms = ps->await_ms;
}

/* hold tells whether the pass (ps) of g is to do nothing because vCenter
 * is out of use for less than the grace period (rec_options.vc_grace_ms),
 * and then sets *res to look again when the grace ends; vCenter back in
 * use looks at every group sooner. A session lost, a watch rebuilt, a
 * vCenter restarted or a manager restarted is most often over in seconds:
 * without the grace, each group's status would say PENDING and then what
 * it said before, two writes a group and a false alarm for whoever
 * watches Ready. Nothing could be done in vCenter meanwhile anyway.
 * Not held: what no waiting mends (a refused login, a placement that
 * names nothing); a group with no status yet (there is nothing to keep,
 * and the first word is better than none), or whose spec changed since
 * its status (its owner waits for an answer: an invalid spec, the new
 * replicas); and a live group without our finalizer, which is added
 * without vCenter, lest the group be deleted with VMs left behind. */
static bool hold(const reconciler *r, const struct vmgroup *g, const struct pass *ps,
                 struct rec_result *res)
{
    uint64_t down;

    if (!ps->vc_down || !r->o.vc_grace_ms || !r->w.vcenter_down_ms || ps->vr == VMG_EAUTH ||
        placement_invalid(ps->vr) || g->status.phase == VMGROUP_PHASE_NONE ||
        g->status.observed_generation != g->meta.generation ||
        (!g->meta.deleting && !vmgroup_has_finalizer(g, VMGROUP_FINALIZER)))
        return false;
    down = r->w.vcenter_down_ms(r->w.vcdata);
    if (down >= r->o.vc_grace_ms)
        return false;
    res->outcome = REC_REQUEUE_AFTER;
    res->after_ms = r->o.vc_grace_ms - down;
    res->await_ms = ps->await_ms;
    return true;
}

/* reconcile plans key once and starts what the plan says; it touches no
 * queue but says in *res what the queue should do with key. */
static void reconcile(reconciler *r, const char *key, struct rec_result *res)
{
    const struct vmgroup *g = r->w.get_group(r->w.data, key);
    struct gstate *gs = gs_find(r, key);
    struct pass ps;
    struct plan *p = NULL;
    char desc[512];
    uint64_t t = r->clock(NULL);
    bool written;
    int rc;

    memset(res, 0, sizeof(*res));
    if (!g) {
        if (gs) {
            gs_drop(r, gs);
            if (r->w.forgotten)
                r->w.forgotten(r->w.hookdata, key);
        }
        res->outcome = REC_DONE;
        return;
    }
    if (!gs)
        gs = gs_get(r, key);
    if (!gs) {
        vmg_logf(VMG_LOG_ERROR, LOGGER, g->meta.ns, g->meta.name, "out of memory");
        res->outcome = REC_ERROR;
        return;
    }
    /* The cache shows the finalizer write awaited: nothing to wait for. */
    if (gs->meta_until && !gs->meta_inflight &&
        vmgroup_has_finalizer(g, VMGROUP_FINALIZER) == (gs->meta_kind == PLAN_ADD_FINALIZER))
        gs->meta_until = 0;

    rc = gather(r, gs, g, t, &ps);
    if (rc < 0) {
        vmg_logf(VMG_LOG_ERROR, LOGGER, g->meta.ns, g->meta.name, "out of memory");
        res->outcome = REC_ERROR;
        goto out;
    }
    if (hold(r, g, &ps, res)) {
        vmg_log_v(1, LOGGER, g->meta.ns, g->meta.name,
                  "vCenter out of use (%s): status kept, looking again in %llu ms", ps.vmsg,
                  (unsigned long long)res->after_ms);
        goto out;
    }
    rc = planner_plan(&ps.in, &p);
    if (rc < 0) {
        vmg_logf(VMG_LOG_ERROR, LOGGER, g->meta.ns, g->meta.name, "planning failed: %s",
                 vmg_strerror(rc));
        res->outcome = REC_ERROR;
        goto out;
    }
    if (r->w.observed)
        r->w.observed(r->w.hookdata, g, p);
    if (p->n_actions && plan_describe(p, desc, sizeof(desc)) >= 0)
        vmg_log_v(1, LOGGER, g->meta.ns, g->meta.name, "plan: %s", desc);
    written = act(r, gs, g, p, t, res);
    note_announced(gs, g, p, written);
    decide(r, gs, &ps, t, res);
out:
    plan_free(p);
    free(ps.vms);
    free(ps.slots);
}

/* apply_result does with key what one pass of it asked: the one place where
 * the outcome of a reconcile reaches the queue. */
static void apply_result(reconciler *r, const char *key, const struct rec_result *res)
{
    if (res->meta_wait_ms)
        requeue(r, key, REQUEUE_AFTER, res->meta_wait_ms);
    if (res->write_failed)
        requeue(r, key, REQUEUE_RATE_LIMITED, 0);
    switch (res->outcome) {
    case REC_DONE:
        wq_forget(r->q, key);
        break;
    case REC_REQUEUE_AFTER:
        requeue(r, key, REQUEUE_AFTER, res->after_ms);
        if (res->forget)
            wq_forget(r->q, key);
        break;
    case REC_ERROR:
        requeue(r, key, REQUEUE_RATE_LIMITED, 0);
        break;
    }
    if (res->await_ms)
        requeue(r, key, REQUEUE_AFTER, res->await_ms);
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
        uint64_t t0 = vmg_clock_mono_ms(NULL);
        struct rec_result res;

        reconcile(r, k, &res);
        apply_result(r, k, &res);
        /* Room kept for it and not used (no mark to start any more) goes
         * to the next in line. */
        {
            struct gstate *gs = gs_find(r, k);
            if (gs)
                marks_release(r, gs);
        }
        wake_marks(r);
        if (r->w.reconciled)
            r->w.reconciled(r->w.hookdata, k, result_label(&res),
                            (double)(vmg_clock_mono_ms(NULL) - t0) / 1000.0);
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
    if (r->o.max_marks == 0)
        r->o.max_marks = REC_DEFAULT_MAX_MARKS;
    else if (r->o.max_marks < 0)
        r->o.max_marks = REC_NO_MARKS;
    r->q = q;
    r->clock = r->o.clock ? r->o.clock : vmg_clock_mono_ms;
    r->groups = strmap_new();
    lq_init(&r->marks_line);
    if (!r->groups) {
        free(r);
        return -ENOMEM;
    }
    /* Without a MAC or a key, every status is written (sum_ctx NULL). */
    if (RAND_bytes(r->sum_key, sizeof(r->sum_key)) == 1) {
        EVP_MAC *mac = EVP_MAC_fetch(NULL, "SIPHASH", NULL);

        r->sum_ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
        EVP_MAC_free(mac);
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
    EVP_MAC_CTX_free(r->sum_ctx);
    OPENSSL_cleanse(r->sum_key, sizeof(r->sum_key));
    free(r);
}
