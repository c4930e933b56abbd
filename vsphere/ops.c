/* ops.c: vCenter operations as jobs: a FIFO queue, a bound on jobs in
 * flight, a cache of resolved templates, and a task tracker (one
 * PropertyCollector with one filter over a ListView of the running tasks,
 * and its long poll).
 *
 * The task tracker is in tasks.c. An operation's steps, each one request:
 *   [template resolution, shared by clones of the same template]
 *   [a folder to destroy: its children, read; refused unless it has none]
 *   -> the method (CreateFolder, CloneVM_Task, ...)
 *   -> (DuplicateName on CreateFolder: FindChild, done)
 *   -> ModifyListView adding the task to the tracker's view (the
 *      collector, the view and its filter made first when needed)
 *   -> read the task's state again; done if it ended
 *   -> the tracker's WaitForUpdatesEx reports the end.
 * If the tracker's long poll fails (a new session, vCenter restarting), the
 * collector is made anew and every task is registered again, which reads
 * its state again, so no end is missed. Once a task exists, only its own
 * state ends the operation: a failure to follow it (the collector or
 * the view refused, vCenter unreachable) registers it again after the
 * tracker's backoff, and a task vCenter no longer knows ends the operation
 * with VMG_EUNKNOWN, never with a failure or success that was not seen.
 */
#include "vsphere/ops.h"

#include "vsphere/tasks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/err.h"
#include "lib/hex.h"
#include "lib/str.h"

const char *vs__op_method(enum vs_op_kind k)
{
    switch (k) {
    case VS_OP_CREATE_FOLDER:
        return "CreateFolder";
    case VS_OP_CLONE:
        return "CloneVM_Task";
    case VS_OP_POWER_ON:
        return "PowerOnVM_Task";
    case VS_OP_POWER_OFF:
        return "PowerOffVM_Task";
    case VS_OP_RECONFIGURE:
        return "ReconfigVM_Task";
    case VS_OP_DESTROY:
        return "Destroy_Task";
    }
    return "?";
}

const char *vs_op_kind_name(enum vs_op_kind k)
{
    switch (k) {
    case VS_OP_CREATE_FOLDER:
        return "create-folder";
    case VS_OP_CLONE:
        return "clone";
    case VS_OP_POWER_ON:
        return "power-on";
    case VS_OP_POWER_OFF:
        return "power-off";
    case VS_OP_RECONFIGURE:
        return "reconfigure";
    case VS_OP_DESTROY:
        return "destroy";
    }
    return "?";
}

/* ---- Lists ---- */

static void l_push(struct op_list *l, vs_op *op)
{
    lq_insert_tail(&l->head, &op->link);
    l->n++;
}

static void l_remove(struct op_list *l, vs_op *op)
{
    lq_remove(&op->link);
    l->n--;
}

/* ---- Finishing ---- */

static void pump(vs_ops *o);

static void twait_remove(vs_op *op)
{
    if (!op->twait)
        return;
    lq_remove(&op->tlink);
    op->twait = NULL;
}

/* A name vCenter shows as given: it escapes '%', '/' and '\\'. */
static bool plain_name(const char *name)
{
    return !strpbrk(name, "%/\\");
}

/* What an operation did, as an update of the inventory (vs_cache_assume):
 * u's strings are op's or the struct's own. */
struct assumed {
    struct vim_object_update u;
    struct vim_change ch[8];
    char uid_path[VS_NAME_MAX + 32], tmpl_path[VS_NAME_MAX + 32], inst_path[VS_NAME_MAX + 32];
};

/* build_assumed writes to *a what op, which succeeded with r, did; false
 * when it cannot be told (a clone without its VM, a name vCenter escapes). */
static bool build_assumed(const vs_op *op, const struct vs_op_result *r, struct assumed *a)
{
    struct vim_change *ch;
    size_t n = 0;

    memset(a, 0, sizeof(*a));
    ch = a->ch;
    a->u.kind = VIM_MODIFY;
    a->u.obj = op->target;
    a->u.changes = ch;
    switch (op->kind) {
    case VS_OP_CREATE_FOLDER:
    case VS_OP_CLONE:
        if (!r->result || !plain_name(op->name))
            return false;
        a->u.kind = VIM_ENTER;
        a->u.obj = *r->result;
        ch[n++] = (struct vim_change){.name = "name", .kind = VIM_VAL_STRING, .str = op->name};
        ch[n++] = (struct vim_change){.name = "parent",
                                      .kind = VIM_VAL_MOREF,
                                      .ref_type = op->target.type,
                                      .ref_value = op->target.value};
        if (op->kind == VS_OP_CREATE_FOLDER)
            break;
        /* The clone asked for the VM powered on (vim_req_clone_vm): vCenter
         * ends the task once it is (vcsim just before). */
        ch[n++] = (struct vim_change){
            .name = "runtime.powerState", .kind = VIM_VAL_ENUM, .str = "poweredOn"};
        ch[n++] = (struct vim_change){.name = "config.template", .kind = VIM_VAL_BOOL, .b = false};
        if (op->has_uid) {
            vmg_putf(a->uid_path, sizeof(a->uid_path), "config.extraConfig[\"%s\"]",
                     op->o->keys.uid);
            ch[n++] = (struct vim_change){
                .name = a->uid_path, .kind = VIM_VAL_STRING, .str = op->mark_uid};
        }
        if (op->has_tmark) {
            vmg_putf(a->tmpl_path, sizeof(a->tmpl_path), "config.extraConfig[\"%s\"]",
                     op->o->keys.template_key);
            ch[n++] = (struct vim_change){
                .name = a->tmpl_path, .kind = VIM_VAL_STRING, .str = op->mark_template};
        }
        /* Not the instanceUuid asked for, nor its mark: vCenter gives
         * another when a VM has it, and only its word tells an owner's VM
         * from a copy (an assumption is not read back for them). */
        /* And the size asked, as a reconfiguration's: */
        /* fall through */
    case VS_OP_RECONFIGURE:
        if (op->kind == VS_OP_RECONFIGURE && op->instance_uuid[0]) {
            /* The instance mark written (vs_ops_mark_instance): the value
             * asked for is the one vCenter keeps. */
            vmg_putf(a->inst_path, sizeof(a->inst_path), "config.extraConfig[\"%s\"]",
                     op->o->keys.instance);
            ch[n++] = (struct vim_change){
                .name = a->inst_path, .kind = VIM_VAL_STRING, .str = op->instance_uuid};
        }
        if (op->num_cpus > 0)
            ch[n++] = (struct vim_change){
                .name = "config.hardware.numCPU", .kind = VIM_VAL_INT, .num = op->num_cpus};
        if (op->memory_mb > 0)
            ch[n++] = (struct vim_change){
                .name = "config.hardware.memoryMB", .kind = VIM_VAL_INT, .num = op->memory_mb};
        break;
    case VS_OP_POWER_ON:
    case VS_OP_POWER_OFF:
        ch[n++] =
            (struct vim_change){.name = "runtime.powerState",
                                .kind = VIM_VAL_ENUM,
                                .str = op->kind == VS_OP_POWER_ON ? "poweredOn" : "poweredOff"};
        break;
    case VS_OP_DESTROY:
        a->u.kind = VIM_LEAVE;
        break;
    }
    a->u.n_changes = n;
    return true;
}

/* assume puts what op did, which succeeded with r, in the inventory's
 * cache at once (vs_inventory_assume), and says in r whether all of it
 * holds there. */
static void assume(vs_op *op, struct vs_op_result *r)
{
    struct assumed a;

    if (build_assumed(op, r, &a))
        r->assumed = vs_inventory_assume(op->o->inv, &a.u, op->since) == 1;
}

/* read_back: the VM whose entry in the inventory's cache the end of op,
 * r, puts in doubt, to be read again from vCenter; else NULL:
 * - the VM op acted on, when vCenter said it does not exist
 *   (ManagedObjectNotFound, VMG_ENOTFOUND): the cache may still hold it (a
 *   VM deleted by hand, an assumption gone wrong), and nothing else would
 *   ever change that;
 * - the VM that holds the name a clone asked for (DuplicateName names it):
 *   the cache may not show it yet (a watch that lags, or lost the change),
 *   and an owner that does not see it would clone it again. */
static const char *read_back(const vs_op *op, const struct vs_op_result *r)
{
    if (r->err == VMG_ENOTFOUND && strcmp(op->target.type, "VirtualMachine") == 0)
        return op->target.value;
    if (op->kind == VS_OP_CLONE && r->err && r->existed && r->result &&
        strcmp(r->result->type, "VirtualMachine") == 0)
        return r->result->value;
    return NULL;
}

#ifdef VMG_TESTING
const char *vs_op_testing_read_back(const vs_op *op, const struct vs_op_result *r)
{
    return read_back(op, r);
}

int vs_op_testing_assume(const vs_op *op, const struct vs_op_result *r, vs_cache *c, uint64_t since,
                         uint64_t asked)
{
    struct assumed a;

    return build_assumed(op, r, &a) ? vs_cache_assume(c, &a.u, since, asked) : 0;
}
#endif

/* op_free frees op, its extraConfig copy wiped first. */
static void op_free(vs_op *op)
{
    vmg_wipe_free(op->extra_mem, op->extra_size);
    free(op->extra);
    free(op);
}

void vs__op_finish(vs_op *op, struct vs_op_result *r)
{
    vs_ops *o = op->o;

    op->finishing = true;
    if (op->req) {
        vs_req *q = op->req;
        op->req = NULL;
        vs_req_cancel(q);
    }
    twait_remove(op);
    vs__tracker_release(op);
    if (op->queued) {
        l_remove(&o->queue, op);
        op->queued = false;
    } else if (op->running) {
        l_remove(&o->running, op);
        op->running = false;
    }
    r->kind = op->kind;
    r->task = op->have_task ? &op->task : NULL;
    r->assumed = false;
    if (r->err == 0 && o->inv && !o->closing)
        assume(op, r);
    else if (read_back(op, r) && o->inv && !o->closing)
        (void)vs_inventory_reread(o->inv, read_back(op, r)); /* its answer mends the cache */
    if (!r->fault_type)
        r->fault_type = "";
    if (!r->message)
        r->message = "";
    if (o->obs)
        o->obs(o->obs_data, op, VS_OP_DONE, r);
    op->cb(op->data, r);
    op_free(op);
    if (!o->closing)
        pump(o);
}

static void finish_err(vs_op *op, int err, const char *fault_type, const char *msg)
{
    struct vs_op_result r = {.err = err, .fault_type = fault_type, .message = msg};

    vs__op_finish(op, &r);
}

/* fail_call ends op after its request failed. */
static void fail_call(vs_op *op, const struct vs_reply *rep)
{
    char msg[MSG_MAX];
    bool monf = vs_reply_fault_is(rep, "ManagedObjectNotFound");

    vmg_putf(msg, sizeof(msg), "%s %s: %s", vs_op_kind_name(op->kind), vs_op_target(op),
             rep->message);
    finish_err(op, monf ? VMG_ENOTFOUND : rep->err,
               rep->err == VMG_EFAULT && rep->fault ? rep->fault->type : "", msg);
}

static void on_op_reply(void *data, const struct vs_reply *r);

int vs__op_send(vs_op *op, enum ostep step, const char *method, char *buf, size_t len)
{
    op->step = step;
    return vs_call(op->o->s, method, buf, len, NULL, on_op_reply, op, &op->req);
}

static void send_failed(vs_op *op, int e, const char *what)
{
    char msg[MSG_MAX];

    vmg_putf(msg, sizeof(msg), "%s %s: could not send %s: %s", vs_op_kind_name(op->kind),
             vs_op_target(op), what, vmg_strerror(e));
    finish_err(op, e, "", msg);
}

/* finish_unknown ends op whose task vCenter no longer knows (it restarted,
 * or purged the task): what the task did cannot be learned from it. */
static void finish_unknown(vs_op *op, const struct vs_reply *r)
{
    char msg[MSG_MAX];

    vmg_putf(msg, sizeof(msg),
             "%s %s: vCenter no longer knows task %s (%s); its outcome is unknown",
             vs_op_kind_name(op->kind), vs_op_target(op), op->task.value, r->message);
    finish_err(op, VMG_EUNKNOWN, "", msg);
}

/* send_read reads paths of obj (RetrievePropertiesEx on the session's
 * collector) as op's step. 0 or a negative code. */
int vs__op_send_read(vs_op *op, enum ostep step, const struct vim_moref *obj,
                     const char *const *paths, size_t n)
{
    const struct vim_service_content *sc = vs_session_content(op->o->s);
    char *buf = NULL;
    size_t len = 0;
    int e = VMG_ETRANSPORT;

    if (sc)
        e = vim_req_retrieve_properties_ex(&sc->property_collector, obj, paths, n, 0, &buf, &len);
    if (e == 0)
        e = vs__op_send(op, step, "RetrievePropertiesEx", buf, len);
    return e;
}

static void on_kick(uv_timer_t *t)
{
    pump(t->data);
}

/* ---- Templates ---- */

static void tentry_done(struct tentry *t, int err, const char *msg);
static void send_clone(vs_op *op);

static const struct vs_placement *placement(const vs_ops *o)
{
    const struct vs_placement *p = o->inv ? vs_inventory_placement(o->inv) : NULL;

    return p ? p : (o->have_placement ? &o->placement : NULL);
}

static void on_template(void *data, int err, const char *msg, const struct vim_moref *ref)
{
    struct tentry *t = data;

    t->find = NULL;
    if (err == 0)
        t->ref = *ref;
    tentry_done(t, err, msg);
}

static void check_template(vs_op *op);

static void tentry_done(struct tentry *t, int err, const char *msg)
{
    vs_ops *o = t->o;
    struct lq waiters, *l;

    lq_move(&t->waiters, &waiters);
    t->find = NULL;
    if (err == 0) {
        t->state = T_READY;
        t->have_parent = false;
        t->expires = uv_now(o->loop) + VS_OPS_TEMPLATE_TTL_MS;
    } else {
        t->state = T_EMPTY;
    }
    lq_foreach(l, &waiters) lq_entry(l, vs_op, tlink)->twait = NULL;
    while ((l = lq_pop_head(&waiters)) != NULL) {
        vs_op *op = lq_entry(l, vs_op, tlink);
        if (err) {
            char m[MSG_MAX];
            vmg_putf(m, sizeof(m), "clone %s: %s", op->name, msg);
            finish_err(op, err, "", m);
        } else {
            op->tmpl = t->ref;
            op->have_tparent = t->have_parent;
            op->tparent = t->parent;
            check_template(op);
        }
    }
}

static struct tentry *tentry_for(vs_ops *o, const char *name)
{
    struct tentry *pick = NULL;
    uint64_t now = uv_now(o->loop);

    for (size_t i = 0; i < TCACHE_N; i++) {
        struct tentry *t = &o->tcache[i];
        if (t->state != T_EMPTY && strcmp(t->name, name) == 0) {
            if (t->state == T_READY && t->expires <= now)
                t->state = T_EMPTY;
            else
                return t;
        }
    }
    for (size_t i = 0; i < TCACHE_N; i++) {
        struct tentry *t = &o->tcache[i];
        if (t->state == T_EMPTY)
            return t;
        if (t->state == T_READY && (!pick || t->expires < pick->expires))
            pick = t;
    }
    if (pick)
        pick->state = T_EMPTY;
    return pick;
}

/* resolve_template gets op's template from the cache, or joins or starts
 * its resolution. */
static void resolve_template(vs_op *op)
{
    vs_ops *o = op->o;
    const struct vs_placement *p = placement(o);
    struct tentry *t = tentry_for(o, op->template_name);
    struct vs_template_query q = {0};
    char m[MSG_MAX], label[VS_PATH_MAX + 64];
    int e;

    if (!t || !p) {
        finish_err(op, t ? VMG_ECONFIG : -EBUSY, "",
                   t ? "the placement is not known yet"
                     : "too many templates are being looked up at once");
        return;
    }
    if (t->state == T_READY) {
        op->tmpl = t->ref;
        op->have_tparent = t->have_parent;
        op->tparent = t->parent;
        check_template(op);
        return;
    }
    op->step = O_TEMPLATE;
    op->twait = t;
    lq_insert_head(&t->waiters, &op->tlink);
    if (t->state == T_PENDING)
        return;
    t->o = o;
    t->state = T_PENDING;
    vmg_putf(t->name, sizeof(t->name), "%s", op->template_name);
    /* A template of the datacenter, never a VM of the groups' folders. */
    vmg_putf(label, sizeof(label), "the operator's folder %s, where the groups' VMs live",
             p->root_path);
    q.name = t->name;
    q.vm_folder = &p->vm_folder;
    q.dc_path = p->datacenter_path;
    q.exclude = p->root_folder.value[0] ? &p->root_folder : NULL;
    q.exclude_label = label;
    m[0] = '\0';
    e = vs_find_template(o->s, &q, on_template, t, &t->find, m, sizeof(m));
    if (e < 0) {
        if (!m[0])
            vmg_putf(m, sizeof(m), "could not look up template \"%s\": %s", t->name,
                     vmg_strerror(e));
        tentry_done(t, e, m);
    }
}

static void forget_template(vs_ops *o, const char *name)
{
    for (size_t i = 0; i < TCACHE_N; i++)
        if (o->tcache[i].state == T_READY && strcmp(o->tcache[i].name, name) == 0)
            o->tcache[i].state = T_EMPTY;
}

static bool refuse_held(vs_op *op)
{
    if (!op->o->held)
        return false;
    finish_err(op, VMG_ECANCELED, "", "the operation was canceled before it started");
    return true;
}

static void send_clone(vs_op *op)
{
    const struct vs_placement *p = placement(op->o);
    struct vim_option extra[3 + VS_CLONE_MAX_EXTRA];
    struct vim_config cfg = {.num_cpus = op->num_cpus, .memory_mb = op->memory_mb};
    char *buf = NULL;
    size_t len = 0;
    int e;

    if (refuse_held(op))
        return;
    if (!p) {
        finish_err(op, VMG_ECONFIG, "", "the placement is not known yet");
        return;
    }
    if (op->has_uid)
        extra[cfg.n_extra++] = (struct vim_option){.key = op->o->keys.uid, .value = op->mark_uid};
    if (op->has_tmark)
        extra[cfg.n_extra++] =
            (struct vim_option){.key = op->o->keys.template_key, .value = op->mark_template};
    if (op->instance_uuid[0]) {
        extra[cfg.n_extra++] =
            (struct vim_option){.key = op->o->keys.instance, .value = op->instance_uuid};
        cfg.instance_uuid = op->instance_uuid;
    }
    for (size_t i = 0; i < op->n_extra; i++)
        extra[cfg.n_extra++] = op->extra[i];
    cfg.extra_config = cfg.n_extra ? extra : NULL;
    e = vim_req_clone_vm(&op->tmpl, &op->target, op->name, &p->pool,
                         p->has_datastore ? &p->datastore : NULL, &cfg, &buf, &len);
    if (e == 0)
        e = vs__op_send(op, O_CALL, "CloneVM_Task", buf, len);
    if (e < 0)
        send_failed(op, e, "CloneVM_Task");
}

/* The template's properties that the resolution checked and an admin
 * may change afterwards: converted to a VM, or moved (into the operator's
 * root folder, say). */
static const char *const template_check_paths[] = {"config.template", "parent"};

/* check_template reads op->tmpl's config.template and parent before each
 * clone: a template the cache names is cloned only while it is still a
 * template in the folder it was resolved in. */
static void check_template(vs_op *op)
{
    int e;

    if (refuse_held(op))
        return;
    e = vs__op_send_read(op, O_TCHECK, &op->tmpl, template_check_paths, 2);
    if (e < 0)
        send_failed(op, e, "RetrievePropertiesEx");
}

static bool same_ref(const struct vim_moref *a, const struct vim_moref *b)
{
    return strcmp(a->value, b->value) == 0 && strcmp(a->type, b->type) == 0;
}

struct tcheck {
    bool is_template, have_parent;
    struct vim_moref parent;
};

static int tcheck_cb(void *arg, const struct vim_object_update *u)
{
    struct tcheck *x = arg;

    for (size_t i = 0; i < u->n_changes; i++) {
        const struct vim_change *c = &u->changes[i];
        if (c->kind == VIM_VAL_BOOL && strcmp(c->name, "config.template") == 0)
            x->is_template = c->b;
        else if (c->kind == VIM_VAL_MOREF && strcmp(c->name, "parent") == 0)
            x->have_parent = vim_moref_set(&x->parent, c->ref_type, c->ref_value) == 0;
    }
    return 0;
}

/* on_template_checked clones when the template is unchanged. Otherwise
 * the cache entry goes and the template is resolved again, once: that
 * refuses it as a first resolution would (a VM, in the root folder), or
 * finds the template that now bears the name. */
static void on_template_checked(vs_op *op, const struct vs_reply *r)
{
    struct tcheck x = {0};
    char token[512], msg[MSG_MAX];
    int e;

    if (r->err && !vs_reply_fault_is(r, "ManagedObjectNotFound")) {
        fail_call(op, r);
        return;
    }
    if (!r->err) {
        e = vim_decode_retrieve_result(r->resp, tcheck_cb, &x, token, sizeof(token));
        if (e < 0) {
            vmg_putf(msg, sizeof(msg),
                     "clone %s: vCenter sent an unreadable answer about "
                     "template \"%s\"",
                     op->name, op->template_name);
            finish_err(op, e, "", msg);
            return;
        }
    }
    if (!r->err && x.is_template && x.have_parent &&
        (!op->have_tparent || same_ref(&x.parent, &op->tparent))) {
        if (!op->have_tparent) {
            /* Just resolved: what later clones of the cache must find. */
            for (size_t i = 0; i < TCACHE_N; i++) {
                struct tentry *t = &op->o->tcache[i];
                if (t->state == T_READY && strcmp(t->name, op->template_name) == 0 &&
                    same_ref(&t->ref, &op->tmpl) && !t->have_parent) {
                    t->parent = x.parent;
                    t->have_parent = true;
                }
            }
        }
        send_clone(op);
        return;
    }
    forget_template(op->o, op->template_name);
    if (op->retried) {
        vmg_putf(msg, sizeof(msg), "clone %s: template \"%s\" changed while it was being looked up",
                 op->name, op->template_name);
        finish_err(op, -EAGAIN, "", msg);
        return;
    }
    op->retried = true;
    resolve_template(op);
}

/* ---- Starting ---- */

static const char *const folder_child_paths[] = {"childEntity"};

/* check_empty reads a folder's children before it is destroyed:
 * Destroy_Task on a folder destroys all it holds, and a folder its caller
 * saw empty may hold a VM by now (moved in, or not yet in its cache). */
static void check_empty(vs_op *op)
{
    int e = vs__op_send_read(op, O_EMPTY, &op->target, folder_child_paths, 1);

    if (e < 0)
        send_failed(op, e, "RetrievePropertiesEx");
}

/* count_children counts the entries of childEntity (an array of
 * references, or one). */
static int count_children(void *arg, const struct vim_object_update *u)
{
    size_t *n = arg;

    for (size_t i = 0; i < u->n_changes; i++) {
        const struct vim_change *c = &u->changes[i];
        if (strcmp(c->name, "childEntity") != 0)
            continue;
        if (c->kind == VIM_VAL_MOREF) {
            (*n)++;
        } else if (c->node) {
            for (const xmlNode *k = c->node->children; k; k = k->next)
                *n += k->type == XML_ELEMENT_NODE;
        }
    }
    return 0;
}

static void send_method(vs_op *op);

static void start(vs_op *op)
{
    const struct vs_placement *p;

    op->since = vs_inventory_mark(op->o->inv);
    if (op->o->obs)
        op->o->obs(op->o->obs_data, op, VS_OP_STARTED, NULL);
    if (op->kind == VS_OP_CLONE) {
        p = placement(op->o);
        if (!p) {
            finish_err(op, VMG_ECONFIG, "",
                       "the placement (datacenter, root folder, resource pool) is not known yet");
            return;
        }
        resolve_template(op);
        return;
    }
    if (op->kind == VS_OP_DESTROY && strcmp(op->target.type, "Folder") == 0) {
        check_empty(op);
        return;
    }
    send_method(op);
}

/* send_method sends the operation's method (a clone's: send_clone). */
static void send_method(vs_op *op)
{
    const char *method = vs__op_method(op->kind);
    struct vim_config cfg = {.num_cpus = op->num_cpus, .memory_mb = op->memory_mb};
    struct vim_option mark = {.key = op->o->keys.instance, .value = op->instance_uuid};
    char *buf = NULL;
    size_t len = 0;
    int e = VMG_EPARSE;

    if (refuse_held(op))
        return;
    switch (op->kind) {
    case VS_OP_CLONE:
        send_clone(op);
        return;
    case VS_OP_CREATE_FOLDER:
        e = vim_req_create_folder(&op->target, op->name, &buf, &len);
        break;
    case VS_OP_POWER_ON:
        e = vim_req_power_on(&op->target, &buf, &len);
        break;
    case VS_OP_POWER_OFF:
        e = vim_req_power_off(&op->target, &buf, &len);
        break;
    case VS_OP_RECONFIGURE:
        if (op->instance_uuid[0]) { /* the mark only: the VM's instanceUuid is left as it is */
            cfg.extra_config = &mark;
            cfg.n_extra = 1;
        }
        e = vim_req_reconfigure(&op->target, &cfg, &buf, &len);
        break;
    case VS_OP_DESTROY:
        e = vim_req_destroy(&op->target, &buf, &len);
        break;
    }
    if (e == 0)
        e = vs__op_send(op, O_CALL, method, buf, len);
    if (e < 0)
        send_failed(op, e, method);
}

static void pump(vs_ops *o)
{
    if (o->pumping)
        return;
    o->pumping = true;
    while (!o->closing && !o->held && o->running.n < o->max_inflight && o->queue.n > 0) {
        vs_op *op = op_first(&o->queue);
        l_remove(&o->queue, op);
        op->queued = false;
        op->running = true;
        l_push(&o->running, op);
        start(op);
    }
    o->pumping = false;
}

/* ---- Replies ---- */

static int check_cb(void *arg, const struct vim_object_update *u)
{
    vs__task_apply(arg, u);
    return 0;
}

static void on_op_reply(void *data, const struct vs_reply *r)
{
    vs_op *op = data;
    vs_ops *o = op->o;
    const struct vim_service_content *sc = vs_session_content(o->s);
    struct vs_op_result res = {0};
    struct vim_moref ref;
    char token[512], msg[MSG_MAX], *buf = NULL;
    size_t len = 0;
    int e;

    op->req = NULL;
    if (op->finishing)
        return;
    switch (op->step) {
    case O_TCHECK:
        on_template_checked(op, r);
        return;
    case O_EMPTY: {
        size_t n = 0;

        if (r->err) {
            fail_call(op, r); /* ManagedObjectNotFound: already gone */
            return;
        }
        e = vim_decode_retrieve_result(r->resp, count_children, &n, token, sizeof(token));
        if (e < 0) {
            vmg_putf(msg, sizeof(msg), "destroy %s: unreadable children of the folder",
                     vs_op_target(op));
            finish_err(op, e, "", msg);
            return;
        }
        if (n > 0) {
            vmg_putf(msg, sizeof(msg),
                     "destroy %s: the folder holds %zu object%s now; it is not destroyed",
                     vs_op_target(op), n, n == 1 ? "" : "s");
            finish_err(op, VMG_ECONFLICT, "", msg);
            return;
        }
        send_method(op);
        return;
    }
    case O_CALL:
        if (op->kind == VS_OP_CREATE_FOLDER && vs_reply_fault_is(r, "DuplicateName") && sc) {
            e = vs_build_find_child(&sc->search_index, &op->target, op->name, &buf, &len);
            if (e == 0)
                e = vs__op_send(op, O_FIND_CHILD, "FindChild", buf, len);
            if (e < 0)
                send_failed(op, e, "FindChild");
            return;
        }
        if (op->kind == VS_OP_CLONE && !op->retried &&
            vs_reply_fault_is(r, "ManagedObjectNotFound")) {
            /* The cached template may be gone (replaced): look it up again. */
            op->retried = true;
            forget_template(o, op->template_name);
            resolve_template(op);
            return;
        }
        if (r->err) {
            fail_call(op, r);
            return;
        }
        if (vim_decode_moref(r->resp, &ref) < 0) {
            vmg_putf(msg, sizeof(msg), "%s %s: vCenter sent an unreadable answer to %s",
                     vs_op_kind_name(op->kind), vs_op_target(op), vs__op_method(op->kind));
            finish_err(op, VMG_EPARSE, "", msg);
            return;
        }
        if (op->kind == VS_OP_CREATE_FOLDER) {
            res.result = &ref;
            vs__op_finish(op, &res);
            return;
        }
        op->task = ref;
        op->have_task = true;
        if (o->obs)
            o->obs(o->obs_data, op, VS_OP_TASK, NULL);
        vs__tracker_need_pc(op);
        return;
    case O_FIND_CHILD:
        if (r->err) {
            fail_call(op, r);
            return;
        }
        e = vim_decode_moref(r->resp, &ref);
        if (e < 0) {
            vmg_putf(msg, sizeof(msg),
                     "create-folder %s: vCenter says the name exists but no child has it",
                     op->name);
            finish_err(op, e == VMG_ENOTFOUND ? VMG_ECONFLICT : e, "DuplicateName", msg);
            return;
        }
        if (strcmp(ref.type, "Folder") != 0) {
            vmg_putf(msg, sizeof(msg), "create-folder %s: a %s (%s) holds that name", op->name,
                     ref.type, ref.value);
            finish_err(op, VMG_ECONFLICT, "DuplicateName", msg);
            return;
        }
        res.result = &ref;
        res.existed = true;
        vs__op_finish(op, &res);
        return;
    case O_CHECK1:
    case O_CHECK2:
        if (vs_reply_fault_is(r, "ManagedObjectNotFound")) {
            finish_unknown(op, r); /* the task is gone: vCenter restarted */
            return;
        }
        if (r->err) {
            if (op->step == O_CHECK2 && op->epoch != o->epoch) {
                vs__tracker_need_pc(op); /* the filter went with a replaced collector */
                return;
            }
            if (op->step == O_CHECK2 && op->tdone) {
                vs__tracker_complete(op); /* the filter reported the end */
                return;
            }
            if (op->step == O_CHECK2) {
                /* The filter reports the end anyway. */
                op->step = O_TRACKED;
                vs__tracker_kick(o);
                return;
            }
            vs__tracker_retrack(op);
            return;
        }
        e = vim_decode_retrieve_result(r->resp, check_cb, &op->ti, token, sizeof(token));
        if (e < 0 && op->step == O_CHECK1) {
            vs__tracker_retrack(op);
            return;
        }
        if (vs__task_ended(&op->ti)) {
            if (op->step == O_CHECK2 && !op->tdone)
                vs__tracker_missed(op);
            vs__tracker_complete(op);
            return;
        }
        if (op->step == O_CHECK1) {
            /* The task runs and the view did not find it: the view is
             * taken for broken, destroyed with its collector (and their
             * long poll dropped), and new ones are made after the
             * backoff. */
            if (o->have_pc && op->epoch == o->epoch)
                vs__tracker_reset(o);
            vs__tracker_retrack(op);
            return;
        }
        if (op->epoch != o->epoch) {
            vs__tracker_need_pc(op);
        } else {
            op->step = O_TRACKED;
            vs__tracker_kick(o);
        }
        return;
    default:
        return;
    }
}

/* ---- Public ---- */

vs_ops *vs_ops_new(uv_loop_t *loop, vs_session *s, vs_inventory *inv,
                   const struct vs_ops_config *cfg, int *ret_err)
{
    vs_ops *o;

    if (!loop || !s || (cfg && !vs_mark_keys_fit(&cfg->marks))) {
        if (ret_err)
            *ret_err = -EINVAL;
        return NULL;
    }
    o = calloc(1, sizeof(*o));
    if (!o) {
        if (ret_err)
            *ret_err = -ENOMEM;
        return NULL;
    }
    lq_init(&o->queue.head);
    lq_init(&o->running.head);
    for (size_t i = 0; i < TCACHE_N; i++)
        lq_init(&o->tcache[i].waiters);
    o->loop = loop;
    o->s = s;
    o->inv = inv;
    o->max_inflight =
        cfg && cfg->max_inflight > 0 ? (size_t)cfg->max_inflight : VS_OPS_DEFAULT_MAX_INFLIGHT;
    o->max_queued = cfg && cfg->max_queued ? cfg->max_queued : VS_OPS_DEFAULT_MAX_QUEUED;
    o->task_wait = cfg && cfg->task_wait_seconds > 0 ? cfg->task_wait_seconds : 60;
    o->slow_check_ms = cfg && cfg->slow_check_ms > 0 ? cfg->slow_check_ms : SLOW_POLL_CHECK_MS;
    o->recheck_ms = cfg && cfg->recheck_ms > 0 ? cfg->recheck_ms : TASK_RECHECK_MS;
    vs_mark_names_set(&o->keys, cfg ? &cfg->marks : NULL);
    uv_timer_init(loop, &o->timer);
    uv_timer_init(loop, &o->kick);
    uv_timer_init(loop, &o->slow);
    o->timer.data = o;
    o->kick.data = o;
    o->slow.data = o;
    o->open_handles = 3;
    return o;
}

void vs_ops_set_placement(vs_ops *o, const struct vs_placement *p)
{
    if (!o)
        return;
    o->have_placement = p != NULL;
    if (p)
        o->placement = *p;
}

void vs_ops_set_observer(vs_ops *o, vs_ops_observer obs, void *data)
{
    if (!o)
        return;
    o->obs = obs;
    o->obs_data = data;
}

void vs_ops_set_tracker_cb(vs_ops *o, vs_tracker_cb cb, void *data)
{
    if (!o)
        return;
    o->tcb = cb;
    o->tcb_data = data;
}

static bool ref_ok(const struct vim_moref *r)
{
    return r && r->type[0] && r->value[0] && memchr(r->type, 0, sizeof(r->type)) &&
           memchr(r->value, 0, sizeof(r->value));
}

static bool fits(const char *s, size_t size)
{
    return s && strlen(s) < size;
}

static vs_op *op_new(vs_ops *o, enum vs_op_kind kind, const struct vim_moref *target, vs_op_cb cb,
                     void *data, int *err)
{
    vs_op *op;

    *err = -EINVAL;
    if (!o || !cb || !ref_ok(target))
        return NULL;
    *err = VMG_ECANCELED;
    if (o->closing || o->held)
        return NULL;
    *err = -ENOSPC;
    if (o->queue.n >= o->max_queued)
        return NULL;
    *err = -ENOMEM;
    op = calloc(1, sizeof(*op));
    if (!op)
        return NULL;
    op->o = o;
    op->kind = kind;
    op->target = *target;
    op->cb = cb;
    op->data = data;
    *err = 0;
    return op;
}

static int submit(vs_op *op, vs_op **ret)
{
    vs_ops *o = op->o;

    op->queued = true;
    op->step = O_QUEUED;
    l_push(&o->queue, op);
    if (ret)
        *ret = op;
    if (o->obs)
        o->obs(o->obs_data, op, VS_OP_QUEUED, NULL);
    /* Start from the loop, never from inside this call: a start that
     * fails at once would otherwise call cb before we return. */
    if (o->running.n < o->max_inflight)
        uv_timer_start(&o->kick, on_kick, 0, 0);
    return 0;
}

int vs_ops_create_folder(vs_ops *o, const struct vim_moref *parent, const char *name, vs_op_cb cb,
                         void *data, vs_op **ret)
{
    vs_op *op;
    int e;

    if (!name || !*name || !fits(name, VS_NAME_MAX))
        return -EINVAL;
    op = op_new(o, VS_OP_CREATE_FOLDER, parent, cb, data, &e);
    if (!op)
        return e;
    vmg_putf(op->name, sizeof(op->name), "%s", name);
    return submit(op, ret);
}

/* extra_ok checks a clone's other extraConfig entries (vs_clone_spec) and
 * sets *size to the bytes a copy of them takes. */
static bool extra_ok(const vs_ops *o, const struct vs_clone_spec *spec, size_t *size)
{
    size_t secrets = 0;

    *size = 0;
    if (spec->n_extra > VS_CLONE_MAX_EXTRA || (spec->n_extra && !spec->extra))
        return false;
    for (size_t i = 0; i < spec->n_extra; i++) {
        const struct vim_option *x = &spec->extra[i];
        if (!x->key || !*x->key || !fits(x->key, VS_NAME_MAX) || !x->value ||
            (o && (strcmp(x->key, o->keys.uid) == 0 || strcmp(x->key, o->keys.template_key) == 0 ||
                   strcmp(x->key, o->keys.instance) == 0)))
            return false;
        *size += strlen(x->key) + 1 + strnlen(x->value, VS_CLONE_MAX_EXTRA_BYTES + 1) + 1;
        secrets += x->secret;
        if (*size > VS_CLONE_MAX_EXTRA_BYTES || secrets > 1)
            return false;
    }
    return true;
}

/* copy_extra copies spec's other extraConfig entries into op. */
static int copy_extra(vs_op *op, const struct vs_clone_spec *spec, size_t size)
{
    char *p;

    if (!spec->n_extra)
        return 0;
    op->extra = calloc(spec->n_extra, sizeof(*op->extra));
    op->extra_mem = malloc(size);
    if (!op->extra || !op->extra_mem)
        return -ENOMEM;
    op->extra_size = size;
    p = op->extra_mem;
    for (size_t i = 0; i < spec->n_extra; i++) {
        size_t k = strlen(spec->extra[i].key) + 1, v = strlen(spec->extra[i].value) + 1;
        memcpy(p, spec->extra[i].key, k);
        op->extra[i].key = p;
        p += k;
        memcpy(p, spec->extra[i].value, v);
        op->extra[i].value = p;
        op->extra[i].secret = spec->extra[i].secret;
        p += v;
    }
    op->n_extra = spec->n_extra;
    return 0;
}

int vs_ops_clone(vs_ops *o, const struct vs_clone_spec *spec, vs_op_cb cb, void *data, vs_op **ret)
{
    size_t extra_size = 0;
    vs_op *op;
    int e;

    if (!spec || !spec->name || !*spec->name || !fits(spec->name, VS_NAME_MAX) ||
        !spec->template_name || !*spec->template_name || !fits(spec->template_name, VS_PATH_MAX) ||
        spec->num_cpus < 0 || spec->memory_mb < 0 ||
        (spec->mark_uid && (!fits(spec->mark_uid, VS_MARK_MAX) || !o || !o->keys.uid[0])) ||
        (spec->mark_template &&
         (!fits(spec->mark_template, VS_MARK_MAX) || !o || !o->keys.template_key[0])) ||
        !extra_ok(o, spec, &extra_size))
        return -EINVAL;
    op = op_new(o, VS_OP_CLONE, spec->folder, cb, data, &e);
    if (!op)
        return e;
    if (copy_extra(op, spec, extra_size) < 0) {
        op_free(op);
        return -ENOMEM;
    }
    vmg_putf(op->name, sizeof(op->name), "%s", spec->name);
    vmg_putf(op->template_name, sizeof(op->template_name), "%s", spec->template_name);
    op->num_cpus = spec->num_cpus;
    op->memory_mb = spec->memory_mb;
    if (spec->mark_uid) {
        op->has_uid = true;
        vmg_putf(op->mark_uid, sizeof(op->mark_uid), "%s", spec->mark_uid);
    }
    if (spec->mark_template) {
        op->has_tmark = true;
        vmg_putf(op->mark_template, sizeof(op->mark_template), "%s", spec->mark_template);
    }
    if (o->keys.instance[0] && vmg_uuid_random(op->instance_uuid) < 0) {
        op_free(op);
        return -EIO;
    }
    return submit(op, ret);
}

static int simple(vs_ops *o, enum vs_op_kind kind, const struct vim_moref *ref, vs_op_cb cb,
                  void *data, vs_op **ret)
{
    int e;
    vs_op *op = op_new(o, kind, ref, cb, data, &e);

    if (!op)
        return e;
    return submit(op, ret);
}

int vs_ops_power_on(vs_ops *o, const struct vim_moref *vm, vs_op_cb cb, void *data, vs_op **ret)
{
    return simple(o, VS_OP_POWER_ON, vm, cb, data, ret);
}

int vs_ops_power_off(vs_ops *o, const struct vim_moref *vm, vs_op_cb cb, void *data, vs_op **ret)
{
    return simple(o, VS_OP_POWER_OFF, vm, cb, data, ret);
}

int vs_ops_reconfigure(vs_ops *o, const struct vim_moref *vm, int num_cpus, long long memory_mb,
                       vs_op_cb cb, void *data, vs_op **ret)
{
    vs_op *op;
    int e;

    if (num_cpus < 0 || memory_mb < 0 || (num_cpus == 0 && memory_mb == 0))
        return -EINVAL;
    op = op_new(o, VS_OP_RECONFIGURE, vm, cb, data, &e);
    if (!op)
        return e;
    op->num_cpus = num_cpus;
    op->memory_mb = memory_mb;
    return submit(op, ret);
}

int vs_ops_mark_instance(vs_ops *o, const struct vim_moref *vm, const char *instance_uuid,
                         vs_op_cb cb, void *data, vs_op **ret)
{
    vs_op *op;
    int e;

    if (!o || !o->keys.instance[0] || !instance_uuid || !instance_uuid[0] ||
        !fits(instance_uuid, VS_UUID_LEN + 1))
        return -EINVAL;
    op = op_new(o, VS_OP_RECONFIGURE, vm, cb, data, &e);
    if (!op)
        return e;
    vmg_putf(op->instance_uuid, sizeof(op->instance_uuid), "%s", instance_uuid);
    return submit(op, ret);
}

int vs_ops_destroy(vs_ops *o, const struct vim_moref *entity, vs_op_cb cb, void *data, vs_op **ret)
{
    return simple(o, VS_OP_DESTROY, entity, cb, data, ret);
}

void vs_op_cancel(vs_op *op)
{
    if (!op || op->finishing)
        return;
    finish_err(op, VMG_ECANCELED, "", "the operation was canceled");
}

enum vs_op_kind vs_op_kind(const vs_op *op)
{
    return op->kind;
}

const char *vs_op_target(const vs_op *op)
{
    if (!op)
        return "";
    return op->kind == VS_OP_CLONE || op->kind == VS_OP_CREATE_FOLDER ? op->name : op->target.value;
}

const char *vs_op_task(const vs_op *op)
{
    return op && op->have_task ? op->task.value : "";
}

size_t vs_ops_inflight(const vs_ops *o)
{
    return o ? o->running.n : 0;
}

size_t vs_ops_queued(const vs_ops *o)
{
    return o ? o->queue.n : 0;
}

static void on_closed(uv_handle_t *h)
{
    vs_ops *o = h->data;
    void (*closed)(void *) = o->closed;
    void *closed_data = o->closed_data;

    if (--o->open_handles > 0)
        return;
    free(o->dead);
    free(o);
    if (closed)
        closed(closed_data);
}

void vs_ops_hold(vs_ops *o)
{
    if (!o || o->held || o->closing)
        return;
    o->held = true;
    while (o->queue.n > 0)
        finish_err(op_first(&o->queue), VMG_ECANCELED, "",
                   "the operation was canceled before it started");
}

void vs_ops_close(vs_ops *o, void (*closed)(void *data), void *data)
{
    if (!o || o->closing)
        return;
    o->closing = true;
    o->closed = closed;
    o->closed_data = data;
    uv_timer_stop(&o->timer);
    uv_timer_stop(&o->kick);
    uv_timer_stop(&o->slow);
    if (o->wait_req)
        vs_req_cancel(o->wait_req);
    if (o->pc_req)
        vs_req_cancel(o->pc_req);
    if (o->mod_req)
        vs_req_cancel(o->mod_req);
    if (o->cancel_req)
        vs_req_cancel(o->cancel_req);
    for (size_t i = 0; i < TCACHE_N; i++)
        if (o->tcache[i].state == T_PENDING && o->tcache[i].find)
            vs_find_cancel(o->tcache[i].find); /* fails its waiters */
    while (o->running.n > 0)
        finish_err(op_first(&o->running), VMG_ECANCELED, "", "the operation was canceled");
    while (o->queue.n > 0)
        finish_err(op_first(&o->queue), VMG_ECANCELED, "", "the operation was canceled");
    uv_close((uv_handle_t *)&o->timer, on_closed);
    uv_close((uv_handle_t *)&o->kick, on_closed);
    uv_close((uv_handle_t *)&o->slow, on_closed);
}
