/* tasks.c: the task tracker of vs_ops (see tasks.h, and the steps in
 * ops.c): each running task gets a filter on the tracker's collector; one
 * long poll reports their ends. A collector of an older session, or a long
 * poll that failed, is dropped and every task registers again (reading its
 * state again), after a backoff. */
#include "vsphere/tasks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/str.h"

bool vs__task_ended(const struct task_info *ti)
{
    return strcmp(ti->state, "success") == 0 || strcmp(ti->state, "error") == 0;
}

void vs__task_apply(struct task_info *ti, const struct vim_object_update *u)
{
    /* An end is final. (vcsim may report an older change after the end,
     * when a filter is created while the task runs.) */
    if (vs__task_ended(ti))
        return;
    for (size_t i = 0; i < u->n_changes; i++) {
        const struct vim_change *c = &u->changes[i];
        if (strcmp(c->name, "info.state") == 0) {
            vmg_putf(ti->state, sizeof(ti->state), "%s",
                     (c->kind == VIM_VAL_ENUM || c->kind == VIM_VAL_STRING) && c->str ? c->str
                                                                                      : "");
        } else if (strcmp(c->name, "info.error") == 0) {
            ti->has_fault = c->kind == VIM_VAL_FAULT && soap_method_fault(c->node, &ti->fault) == 0;
        } else if (strcmp(c->name, "info.result") == 0) {
            ti->has_result = c->kind == VIM_VAL_MOREF &&
                             vim_moref_set(&ti->result, c->ref_type, c->ref_value) == 0;
        }
    }
}

void vs__tracker_complete(vs_op *op)
{
    struct vs_op_result r = {0};
    char msg[MSG_MAX];

    if (strcmp(op->ti.state, "success") == 0) {
        if (op->kind == VS_OP_CLONE && op->ti.has_result)
            r.result = &op->ti.result;
        vs__op_finish(op, &r);
        return;
    }
    r.err = VMG_EFAULT;
    if (op->ti.has_fault) {
        r.fault_type = op->ti.fault.type;
        vmg_putf(msg, sizeof(msg), "%s %s: %s failed: %s: %s", vs_op_kind_name(op->kind),
                 vs_op_target(op), vs__op_method(op->kind), op->ti.fault.type,
                 op->ti.fault.message);
    } else {
        r.fault_type = "";
        vmg_putf(msg, sizeof(msg), "%s %s: %s failed", vs_op_kind_name(op->kind), vs_op_target(op),
                 vs__op_method(op->kind));
    }
    r.message = msg;
    vs__op_finish(op, &r);
}

static void on_timer(uv_timer_t *t);

/* tracker_backoff schedules the registration of the operations at
 * O_REREGISTER, after the tracker's backoff. */
static void tracker_backoff(vs_ops *o)
{
    o->failures++;
    if (!uv_is_active((uv_handle_t *)&o->timer))
        uv_timer_start(&o->timer, on_timer,
                       vs_backoff_ms(o->failures, TRACKER_BACKOFF_MIN_MS, TRACKER_BACKOFF_MAX_MS),
                       0);
}

/* retrack: following op's task failed (its filter or the collector could
 * not be made, its state not read). The task runs on in vCenter, so op
 * stays in flight and registers again after the tracker's backoff. */
void vs__tracker_retrack(vs_op *op)
{
    op->have_filter = false;
    op->step = O_REREGISTER;
    tracker_backoff(op->o);
}

void vs__tracker_check(vs_op *op, enum ostep step)
{
    if (vs__op_send_read(op, step, &op->task, vim_task_paths, vim_task_paths_n) < 0)
        vs__tracker_retrack(op);
}

static void send_filter(vs_op *op)
{
    vs_ops *o = op->o;
    char *buf = NULL;
    size_t len = 0;
    int e;

    op->epoch = o->epoch;
    e = vim_req_create_filter_task(&o->pc, &op->task, &buf, &len);
    if (e == 0)
        e = vs__op_send(op, O_FILTER, "CreateFilter", buf, len);
    if (e < 0)
        vs__tracker_retrack(op);
}

static void on_pc_reply(void *data, const struct vs_reply *r);

/* first_in returns the first running operation at step, or NULL. */
static vs_op *first_in(const vs_ops *o, enum ostep step)
{
    for (vs_op *op = op_first(&o->running); op; op = op_after(&o->running, op))
        if (op->step == step)
            return op;
    return NULL;
}

/* drop_collector forgets the tracker's collector and its filters: the
 * tasks it followed go to step next (O_NEED_PC: to register now;
 * O_REREGISTER: after the backoff). */
static void drop_collector(vs_ops *o, enum ostep next)
{
    o->have_pc = false;
    o->epoch++;
    o->version[0] = '\0';
    o->ndead = 0;
    for (vs_op *op = op_first(&o->running); op; op = op_after(&o->running, op))
        if (op->step == O_TRACKED) {
            op->have_filter = false;
            op->step = next;
        }
}

/* register_waiting registers the tasks of the operations at O_NEED_PC with
 * the tracker, making its collector first when there is none (or it
 * belongs to an older session). */
static void register_waiting(vs_ops *o)
{
    const struct vim_service_content *sc = vs_session_content(o->s);
    char *buf = NULL;
    size_t len = 0;
    int e;

    if (o->have_pc && o->pc_gen == vs_session_generation(o->s)) {
        /* send_filter moves each on (or back to O_REREGISTER). */
        for (vs_op *op; (op = first_in(o, O_NEED_PC)) != NULL;)
            send_filter(op);
        return;
    }
    if (o->creating_pc)
        return;
    if (o->have_pc) {
        /* A collector of an older session: gone with it, and so are the
         * filters of the tasks it followed, which register now. */
        drop_collector(o, O_NEED_PC);
    }
    e = sc ? vim_req_create_property_collector(&sc->property_collector, &buf, &len)
           : VMG_ETRANSPORT;
    if (e == 0)
        e = vs_call(o->s, "CreatePropertyCollector", buf, len, NULL, on_pc_reply, o, &o->pc_req);
    if (e < 0) {
        for (vs_op *op; (op = first_in(o, O_NEED_PC)) != NULL;)
            vs__tracker_retrack(op);
        return;
    }
    o->creating_pc = true;
}

/* need_pc registers op's task with the tracker. */
void vs__tracker_need_pc(vs_op *op)
{
    op->have_filter = false;
    op->step = O_NEED_PC;
    register_waiting(op->o);
}

static void on_pc_reply(void *data, const struct vs_reply *r)
{
    vs_ops *o = data;

    o->pc_req = NULL;
    o->creating_pc = false;
    if (o->closing)
        return;
    if (r->err == 0 && vim_decode_moref(r->resp, &o->pc) == 0) {
        o->have_pc = true;
        o->pc_gen = vs_session_generation(o->s);
        o->epoch++;
        o->version[0] = '\0';
        o->ndead = 0;
        register_waiting(o);
        return;
    }
    /* The tasks run on: their operations wait for a collector. */
    for (vs_op *op; (op = first_in(o, O_NEED_PC)) != NULL;)
        vs__tracker_retrack(op);
}

/* ---- The tracker's long poll ---- */

static void on_wait_reply(void *data, const struct vs_reply *r);
static void on_slow(uv_timer_t *t);
static void tracker_reset(vs_ops *o);

static bool any_tracked(const vs_ops *o)
{
    for (const vs_op *op = op_first(&o->running); op; op = op_after(&o->running, op))
        if (op->have_filter && op->epoch == o->epoch)
            return true;
    return false;
}

static void on_destroyed(void *data, const struct vs_reply *r)
{
    struct dslot *d = data;
    vs_ops *o = d->o;

    (void)r;
    d->req = NULL;
    o->ndestroying--;
    if (!o->closing && o->ndestroying == 0)
        vs__tracker_kick(o);
}

/* destroy_dead sends the pending DestroyPropertyFilter calls (a batch at
 * most) when no long poll runs. Returns true while some are in flight. */
static bool destroy_dead(vs_ops *o)
{
    char *buf = NULL;
    size_t len = 0;

    if (o->ndestroying > 0)
        return true;
    if (o->wait_req || o->ndead == 0)
        return false;
    if (!o->have_pc || o->pc_gen != vs_session_generation(o->s)) {
        o->ndead = 0; /* they went with their collector */
        return false;
    }
    for (size_t i = 0; i < DESTROY_BATCH && o->ndead > 0; i++) {
        struct dslot *d = &o->dslots[i];
        d->o = o;
        o->ndead--;
        if (vim_req_destroy_property_filter(&o->dead[o->ndead], &buf, &len) < 0 ||
            vs_call(o->s, "DestroyPropertyFilter", buf, len, NULL, on_destroyed, d, &d->req) < 0) {
            d->req = NULL;
            continue;
        }
        o->ndestroying++;
    }
    return o->ndestroying > 0;
}

void vs__tracker_kick(vs_ops *o)
{
    char *buf = NULL;
    size_t len = 0;
    struct vs_call_opts opts = {.max_response = VS_CALL_MAX_RESPONSE_LARGE,
                                .timeout_ms = (uint64_t)o->task_wait * 1000 +
                                              vs_session_call_timeout_ms(o->s)};

    if (o->wait_req || o->closing || destroy_dead(o))
        return;
    if (!o->have_pc || !any_tracked(o))
        return;
    if (vim_req_wait_for_updates_ex(&o->pc, o->version, o->task_wait, 100, &buf, &len) < 0 ||
        vs_call(o->s, "WaitForUpdatesEx", buf, len, &opts, on_wait_reply, o, &o->wait_req) < 0)
        tracker_reset(o);
    else
        uv_timer_start(&o->slow, on_slow, o->slow_check_ms, o->slow_check_ms);
}

static int wait_cb(void *arg, const struct vim_object_update *u)
{
    vs_ops *o = arg;

    for (vs_op *op = op_first(&o->running); op; op = op_after(&o->running, op))
        if (op->have_task && strcmp(op->task.value, u->obj.value) == 0) {
            vs__task_apply(&op->ti, u);
            if (vs__task_ended(&op->ti))
                op->tdone = true;
        }
    return 0;
}

static void on_timer(uv_timer_t *t)
{
    vs_ops *o = t->data;

    if (o->closing)
        return;
    /* All at once: one that fails again goes back to O_REREGISTER, to wait
     * for the next backoff rather than loop here. */
    for (vs_op *op = op_first(&o->running); op; op = op_after(&o->running, op))
        if (op->step == O_REREGISTER) {
            op->pc_tries = 0;
            op->step = O_NEED_PC;
        }
    register_waiting(o);
}

/* check_tracked reads the state of every task the long poll follows: each
 * read finishes its operation if the task ended, else leaves it to the
 * long poll. */
static void check_tracked(vs_ops *o)
{
    for (vs_op *op; (op = first_in(o, O_TRACKED)) != NULL;)
        vs__tracker_check(op, O_CHECK2);
}

/* on_slow: the long poll has not answered for SLOW_POLL_CHECK_MS. */
static void on_slow(uv_timer_t *t)
{
    vs_ops *o = t->data;

    if (o->closing || !o->wait_req) {
        uv_timer_stop(t);
        return;
    }
    check_tracked(o);
}

/* forget_collector drops the tracker's collector: the tasks it followed
 * register again on a new one after a backoff. */
void vs__tracker_forget_collector(vs_ops *o)
{
    drop_collector(o, O_REREGISTER);
    tracker_backoff(o);
}

/* tracker_reset forgets the collector after its long poll failed, asking
 * vCenter to destroy it. */
static void tracker_reset(vs_ops *o)
{
    char *buf = NULL;
    size_t len = 0;

    if (o->have_pc && o->pc_gen == vs_session_generation(o->s) &&
        vim_req_destroy_property_collector(&o->pc, &buf, &len) == 0)
        (void)vs_fire_and_forget(o->s, "DestroyPropertyCollector", buf, len);
    vs__tracker_forget_collector(o);
}

static void on_wait_reply(void *data, const struct vs_reply *r)
{
    vs_ops *o = data;
    struct vim_update_set us;
    int e;

    o->wait_req = NULL;
    uv_timer_stop(&o->slow);
    if (o->closing)
        return;
    if (r->err) {
        tracker_reset(o);
        return;
    }
    e = vim_decode_update_set(r->resp, wait_cb, o, &us);
    if (e < 0) {
        tracker_reset(o);
        return;
    }
    o->failures = 0;
    if (e == 1)
        vmg_putf(o->version, sizeof(o->version), "%s", us.version);
    if (e == 0) {
        /* A quiet long poll: a safety net against an end the server did
         * not report. */
        check_tracked(o);
    }
    /* Finish what ended; each finish may change the list, so look again. */
    for (;;) {
        vs_op *op = op_first(&o->running);
        while (op && !(op->tdone && (op->step == O_TRACKED || op->step == O_CHECK2)))
            op = op_after(&o->running, op);
        if (!op)
            break;
        vs__tracker_complete(op);
        if (o->closing)
            return;
    }
    vs__tracker_kick(o);
}
