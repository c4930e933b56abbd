/* tasks.c: the task tracker of vs_ops (see tasks.h, and the steps in
 * ops.c): the tracker's collector has one filter, over a ListView of the
 * running tasks; a task is added to the view when it starts (ModifyListView,
 * batched) and removed when it has ended; one long poll reports their ends.
 * The view never changes while a long poll is out (send_modify): tasks to
 * add cancel it. A collector of an older session, or a long poll or
 * ModifyListView that failed, is dropped with its view and every task
 * registers again after a backoff (joining the new view, whose long poll
 * reports its state).
 *
 * One filter rather than one per task: vcsim (v0.56) re-collects every
 * filter of a collector, once per filter, for each change anywhere in
 * vCenter (F x F collects per change with F tasks in flight); a real
 * vCenter keeps one filter instead of one made and destroyed per task. */
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
            ti->has_fault_object =
                ti->has_fault && vim_fault_object(c->node, &ti->fault_object) == 0;
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
        if (op->kind == VS_OP_CLONE && op->ti.has_fault_object &&
            strcmp(op->ti.fault.type, "DuplicateName") == 0) {
            r.result = &op->ti.fault_object;
            r.existed = true;
            if (strcmp(op->ti.fault_object.type, "VirtualMachine") != 0) {
                /* Not the VM asked for, cloned before: something else. */
                r.err = VMG_ECONFLICT;
                vmg_putf(msg, sizeof(msg), "clone %s: a %s (%s) holds that name in the folder",
                         op->name, op->ti.fault_object.type, op->ti.fault_object.value);
            }
        }
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

/* retrack: following op's task failed (it could not be added to the
 * view, the collector could not be made, its state not read). The task
 * runs on in vCenter, so op stays in flight and registers again after the
 * tracker's backoff. */
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

/* first_in returns the first running operation at step, or NULL. */
static vs_op *first_in(const vs_ops *o, enum ostep step)
{
    for (vs_op *op = op_first(&o->running); op; op = op_after(&o->running, op))
        if (op->step == step)
            return op;
    return NULL;
}

static bool ready(const vs_ops *o)
{
    return o->have_pc && o->pc_gen == vs_session_generation(o->s);
}

/* drop_collector forgets the tracker's collector, its view and filter:
 * the tasks they followed, or that were being added, go to step next
 * (O_NEED_PC: to register now; O_REREGISTER: after the backoff). */
static void drop_collector(vs_ops *o, enum ostep next)
{
    vs_req *q;

    o->have_pc = false;
    o->epoch++;
    o->version[0] = '\0';
    o->ndead = 0;
    for (vs_op *op = op_first(&o->running); op; op = op_after(&o->running, op))
        if (op->step == O_TRACKED || op->step == O_FILTER) {
            op->have_filter = false;
            op->step = next;
        }
    /* Their long poll and change are moot; their replies, stale. */
    if ((q = o->wait_req) != NULL) {
        o->wait_req = NULL;
        vs_req_cancel(q);
    }
    if ((q = o->mod_req) != NULL) {
        o->mod_req = NULL;
        vs_req_cancel(q);
    }
}

/* destroy_collector asks vCenter to destroy the collector (with its
 * filter) and the view, without waiting; the tracker forgets them. */
static void destroy_collector(vs_ops *o)
{
    char *buf = NULL;
    size_t len = 0;

    if (o->pc_gen != vs_session_generation(o->s))
        return; /* gone with their session */
    if (o->view.value[0] && vim_req_destroy_view(&o->view, &buf, &len) == 0)
        (void)vs_fire_and_forget(o->s, "DestroyView", buf, len);
    if (o->pc.value[0] && vim_req_destroy_property_collector(&o->pc, &buf, &len) == 0)
        (void)vs_fire_and_forget(o->s, "DestroyPropertyCollector", buf, len);
    o->view.value[0] = '\0';
    o->pc.value[0] = '\0';
}

/* ---- Adding and removing tasks: ModifyListView ---- */

static void on_modify_reply(void *data, const struct vs_reply *r);

static void on_cancel_reply(void *data, const struct vs_reply *r);

/* cancel_wait asks vCenter to end the long poll (CancelWaitForUpdates),
 * so that tasks may be added to the view. Its RequestCanceled is expected;
 * the ModifyListView goes once both it and the cancel have answered. (When
 * the cancel cannot go, the tasks wait for the long poll's answer; when
 * vCenter refuses it, the collector is taken for lost.) */
static void cancel_wait(vs_ops *o)
{
    struct vs_call_opts opts = {.timeout_ms = VIEW_CALL_TIMEOUT_MS};
    char *buf = NULL;
    size_t len = 0;

    if (o->wait_cancelled || o->cancel_req)
        return;
    if (vim_req_cancel_wait_for_updates(&o->pc, &buf, &len) < 0 ||
        vs_call(o->s, "CancelWaitForUpdates", buf, len, &opts, on_cancel_reply, o, &o->cancel_req) <
            0) {
        o->cancel_req = NULL;
        return;
    }
    o->wait_cancelled = true;
    o->cancel_epoch = o->epoch;
}

static void on_cancel_reply(void *data, const struct vs_reply *r)
{
    vs_ops *o = data;

    o->cancel_req = NULL;
    if (o->closing)
        return;
    if (r->err && o->cancel_epoch == o->epoch && ready(o)) {
        vs__tracker_reset(o);
        return;
    }
    vs__tracker_kick(o);
}

/* send_modify adds the tasks of the operations at O_NEED_PC to the view
 * and removes ended ones (MODIFY_BATCH of each at most), in one
 * ModifyListView, one at a time and never while a long poll is out:
 * vcsim (v0.56) takes the view's lock and then the filter's when the view
 * changes, and the filter's and then the view's when a long poll
 * collects, on every tick while it waits (the ContainerView deadlock of
 * inventory.c's build_filter); a long poll still out may be collecting
 * at any time. Tasks to add while a long poll is out cancel it
 * (cancel_wait); the change goes when it has answered, and the next long
 * poll asks with the same version. Removals wait for the long poll's
 * answer. Returns true when one went. */
static bool send_modify(vs_ops *o)
{
    struct vim_moref add[MODIFY_BATCH];
    struct vs_call_opts opts = {.timeout_ms = VIEW_CALL_TIMEOUT_MS};
    size_t nadd = 0, nrem = 0;
    char *buf = NULL;
    size_t len = 0;
    int e;

    if (!ready(o) || o->mod_req || o->closing)
        return false;
    if (o->wait_req || o->cancel_req) {
        if (o->wait_req && first_in(o, O_NEED_PC))
            cancel_wait(o);
        return false;
    }
    for (vs_op *op = op_first(&o->running); op && nadd < MODIFY_BATCH;
         op = op_after(&o->running, op))
        if (op->step == O_NEED_PC)
            add[nadd++] = op->task;
    nrem = o->ndead < MODIFY_BATCH ? o->ndead : MODIFY_BATCH;
    if (nadd == 0 && nrem == 0)
        return false;
    e = vim_req_modify_list_view(&o->view, add, nadd, nrem ? &o->dead[o->ndead - nrem] : NULL, nrem,
                                 &buf, &len);
    if (e == 0)
        e = vs_call(o->s, "ModifyListView", buf, len, &opts, on_modify_reply, o, &o->mod_req);
    if (e < 0) {
        o->mod_req = NULL;
        for (vs_op *op; (op = first_in(o, O_NEED_PC)) != NULL;)
            vs__tracker_retrack(op);
        return false;
    }
    o->ndead -= nrem;
    o->mod_epoch = o->epoch;
    for (vs_op *op = op_first(&o->running); op && nadd > 0; op = op_after(&o->running, op))
        if (op->step == O_NEED_PC) {
            op->step = O_FILTER;
            op->epoch = o->epoch;
            op->have_filter = true;
            op->treported = false;
            op->tracked_ms = uv_now(o->loop);
            nadd--;
        }
    return true;
}

/* not_found: vCenter did not find a task added to the view; its state
 * says (and ends the operation when vCenter no longer knows it). */
static int not_found(void *arg, const struct vim_moref *ref)
{
    vs_ops *o = arg;

    for (vs_op *op = op_first(&o->running); op; op = op_after(&o->running, op))
        if (op->step == O_FILTER && op->have_task && strcmp(op->task.value, ref->value) == 0 &&
            strcmp(op->task.type, ref->type) == 0) {
            op->have_filter = false;
            vs__tracker_check(op, O_CHECK1);
            return 0;
        }
    return 0;
}

static void register_waiting(vs_ops *o);

static void on_modify_reply(void *data, const struct vs_reply *r)
{
    vs_ops *o = data;

    o->mod_req = NULL;
    if (o->closing)
        return;
    if (o->mod_epoch != o->epoch) {
        /* The view was dropped meanwhile: its tasks register anew. */
        vs__tracker_kick(o);
        return;
    }
    if (r->err || vim_decode_morefs(r->resp, not_found, o) < 0) {
        if (o->pc_gen != vs_session_generation(o->s)) {
            /* The view went with an old session: register now, on a new
             * collector. */
            drop_collector(o, O_NEED_PC);
            register_waiting(o);
        } else {
            vs__tracker_reset(o);
        }
        return;
    }
    /* A task the view now has is reported by the next long poll with its
     * state, as an object that enters the filter (vCenter and vcsim alike),
     * whether it ended already or not: no read is needed. A server that
     * did not report it is caught by the safety net, a read of it when a
     * long poll answers quiet, or when the long poll is overdue, or when
     * no answer has reported it for slow_check_ms (check_tracked). An end
     * already seen (a task that was in the view before) is final. */
    for (vs_op *op; (op = first_in(o, O_FILTER)) != NULL;) {
        if (!op->tdone) {
            op->step = O_TRACKED;
            continue;
        }
        vs__tracker_complete(op);
        if (o->closing)
            return;
    }
    vs__tracker_kick(o);
}

/* ---- Making the collector, the view and the filter ---- */

enum { SETUP_PC, SETUP_VIEW, SETUP_FILTER };

static void on_setup_reply(void *data, const struct vs_reply *r);

/* setup_send sends the request of the setup step; false when it could
 * not be sent. */
static bool setup_send(vs_ops *o, int step)
{
    const struct vim_service_content *sc = vs_session_content(o->s);
    const char *method = "CreatePropertyCollector";
    char *buf = NULL;
    size_t len = 0;
    int e = VMG_ETRANSPORT;

    o->setup = step;
    if (sc && step == SETUP_PC) {
        e = vim_req_create_property_collector(&sc->property_collector, &buf, &len);
    } else if (sc && step == SETUP_VIEW) {
        method = "CreateListView";
        e = vim_req_create_list_view(&sc->view_manager, NULL, 0, &buf, &len);
    } else if (step == SETUP_FILTER) {
        method = "CreateFilter";
        e = vim_req_create_filter_task_view(&o->pc, &o->view, &buf, &len);
    }
    if (e == 0)
        e = vs_call(o->s, method, buf, len, NULL, on_setup_reply, o, &o->pc_req);
    if (e < 0) {
        o->pc_req = NULL;
        return false;
    }
    o->creating_pc = true;
    return true;
}

/* setup_failed: the tasks waiting for the collector wait for the backoff;
 * what was made of it is destroyed. */
static void setup_failed(vs_ops *o)
{
    o->creating_pc = false;
    destroy_collector(o);
    for (vs_op *op; (op = first_in(o, O_NEED_PC)) != NULL;)
        vs__tracker_retrack(op);
}

/* register_waiting adds the tasks of the operations at O_NEED_PC to the
 * tracker's view, making the collector, the view and the filter first when
 * there are none (or they belong to an older session). */
static void register_waiting(vs_ops *o)
{
    if (ready(o)) {
        if (!send_modify(o))
            vs__tracker_kick(o);
        return;
    }
    if (o->creating_pc || !first_in(o, O_NEED_PC))
        return;
    if (o->have_pc) {
        /* A collector of an older session: gone with it, and so are its
         * view and filter; the tasks they followed register now. */
        drop_collector(o, O_NEED_PC);
    }
    o->pc.value[0] = '\0';
    o->view.value[0] = '\0';
    if (!setup_send(o, SETUP_PC))
        setup_failed(o);
}

/* need_pc registers op's task with the tracker. */
void vs__tracker_need_pc(vs_op *op)
{
    op->have_filter = false;
    op->step = O_NEED_PC;
    register_waiting(op->o);
}

static void on_setup_reply(void *data, const struct vs_reply *r)
{
    vs_ops *o = data;
    struct vim_moref ref;

    o->pc_req = NULL;
    o->creating_pc = false;
    if (o->closing)
        return;
    if (r->err || vim_decode_moref(r->resp, &ref) < 0 ||
        (o->setup != SETUP_PC && o->pc_gen != vs_session_generation(o->s))) {
        setup_failed(o); /* the view and the filter go with the collector's session */
        return;
    }
    switch (o->setup) {
    case SETUP_PC:
        o->pc = ref;
        o->pc_gen = vs_session_generation(o->s);
        if (!setup_send(o, SETUP_VIEW))
            setup_failed(o);
        return;
    case SETUP_VIEW:
        o->view = ref;
        if (!setup_send(o, SETUP_FILTER))
            setup_failed(o);
        return;
    default:
        break;
    }
    o->have_pc = true;
    o->epoch++;
    o->version[0] = '\0';
    o->ndead = 0;
    register_waiting(o);
}

/* vs__tracker_release: op ends; its task leaves the view with the next
 * ModifyListView. */
void vs__tracker_release(vs_op *op)
{
    vs_ops *o = op->o;

    if (op->have_filter && op->epoch == o->epoch && ready(o) && !o->closing &&
        o->ndead < DEAD_MAX && (o->dead || (o->dead = calloc(DEAD_MAX, sizeof(*o->dead))) != NULL))
        o->dead[o->ndead++] = op->task;
    op->have_filter = false;
}

/* ---- The tracker's long poll ---- */

static void note(const vs_ops *o, enum vs_tracker_event event, uint64_t late_ms, size_t tasks,
                 const vs_op *op)
{
    struct vs_tracker_note n = {event, o->task_wait, late_ms, tasks, op};

    if (o->tcb)
        o->tcb(o->tcb_data, &n);
}

/* late_ms: how long the long poll out is past its maxWaitSeconds. */
static uint64_t late_ms(const vs_ops *o)
{
    uint64_t due = o->wait_sent_ms + (uint64_t)o->task_wait * 1000;
    uint64_t now = uv_now(o->loop);

    return now > due ? now - due : 0;
}

void vs__tracker_missed(const vs_op *op)
{
    /* Not while the long poll is late, nor for a read sent then (the late
     * long poll may have answered or failed since), nor for a task of a
     * collector since dropped: vCenter was not asked to report it. */
    if (!op->o->wait_late && !op->tlate_read && op->epoch == op->o->epoch)
        note(op->o, VS_TRACKER_MISSED, 0, 0, op);
}

static void on_wait_reply(void *data, const struct vs_reply *r);
static void on_slow(uv_timer_t *t);

static bool any_tracked(const vs_ops *o)
{
    for (const vs_op *op = op_first(&o->running); op; op = op_after(&o->running, op))
        if (op->have_filter && op->epoch == o->epoch)
            return true;
    return false;
}

void vs__tracker_kick(vs_ops *o)
{
    char *buf = NULL;
    size_t len = 0;
    struct vs_call_opts opts = vs_long_poll_opts(o->s, o->task_wait);
    uint64_t first;

    if (o->wait_req || o->cancel_req || o->closing || o->mod_req)
        return;
    if (o->have_pc && o->pc_gen != vs_session_generation(o->s)) {
        /* The collector went with an old session (a long poll of it may
         * still answer): register now, on a new one. */
        drop_collector(o, O_NEED_PC);
        register_waiting(o);
        return;
    }
    if (!ready(o))
        return;
    /* Tasks join and leave the view between long polls. */
    if (send_modify(o) || !any_tracked(o))
        return;
    if (vim_req_wait_for_updates_ex(&o->pc, o->version, o->task_wait, 100, &buf, &len) < 0 ||
        vs_call(o->s, "WaitForUpdatesEx", buf, len, &opts, on_wait_reply, o, &o->wait_req) < 0) {
        o->wait_req = NULL;
        vs__tracker_reset(o);
        return;
    }
    o->wait_cancelled = false;
    o->wait_epoch = o->epoch;
    o->wait_sent_ms = uv_now(o->loop);
    o->wait_late = false; /* (a late long poll dropped with its collector says no more) */
    /* Silence within maxWaitSeconds is no news; beyond, vCenter is late
     * (by the call's own timeout at the latest, which may be shorter). */
    first = (uint64_t)o->task_wait * 1000 + o->slow_check_ms;
    if (opts.timeout_ms && opts.timeout_ms < first)
        first = opts.timeout_ms;
    uv_timer_start(&o->slow, on_slow, first, o->slow_check_ms);
}

static int wait_cb(void *arg, const struct vim_object_update *u)
{
    vs_ops *o = arg;

    if (u->kind == VIM_LEAVE)
        return 0; /* a task left the view: it ended, and was removed */
    for (vs_op *op = op_first(&o->running); op; op = op_after(&o->running, op))
        if (op->have_task && strcmp(op->task.value, u->obj.value) == 0) {
            op->treported = true;
            op->tracked_ms = uv_now(o->loop);
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
        if (op->step == O_REREGISTER)
            op->step = O_NEED_PC;
    register_waiting(o);
}

/* What check_tracked reads. */
enum check {
    CHECK_DUE,        /* the tasks due (due_for) */
    CHECK_UNREPORTED, /* those and every task no answer has reported (a quiet answer) */
    CHECK_ALL,        /* every task the long poll follows (it is overdue) */
};

/* due_for: how long a task may go untold of (no answer reporting it, no
 * read) before the safety net reads it: one never reported since it joined
 * the view (a server that does not report tasks entering it) is read after
 * slow_check_ms; one reported, only after recheck_ms, against a change the
 * server lost, since the long poll that reported it reports its end. */
static uint64_t due_for(const vs_ops *o, const vs_op *op)
{
    return op->treported ? o->recheck_ms : o->slow_check_ms;
}

/* first_due: the first task the long poll follows that what says to read. */
static vs_op *first_due(const vs_ops *o, uint64_t now, enum check what)
{
    for (vs_op *op = op_first(&o->running); op; op = op_after(&o->running, op))
        if (op->step == O_TRACKED &&
            (what == CHECK_ALL || (what == CHECK_UNREPORTED && !op->treported) ||
             now - op->tracked_ms >= due_for(o, op)))
            return op;
    return NULL;
}

/* check_tracked reads the state of the tasks the long poll follows that
 * what says to read: every one (the long poll is overdue), those never
 * reported (the long poll answered quiet: a server that does not report a
 * task entering the view; vCenter and vcsim do), or those untold of for
 * their due_for (at each answer: the long poll answers, kept busy by other
 * tasks). Each read finishes its operation if the task ended, else leaves
 * it to the long poll. A long poll that answers, quiet or not, no later
 * than its maxWaitSeconds has no task it reported read before recheck_ms:
 * on vCenter, a task running for minutes costs the long polls alone. */
static void check_tracked(vs_ops *o, enum check what)
{
    uint64_t now = uv_now(o->loop);

    for (vs_op *op; (op = first_due(o, now, what)) != NULL;) {
        op->tracked_ms = now;
        op->tlate_read = what == CHECK_ALL;
        vs__tracker_check(op, O_CHECK2);
    }
}

/* on_slow: the long poll has not answered slow_check_ms past its
 * maxWaitSeconds (then every slow_check_ms). */
static void on_slow(uv_timer_t *t)
{
    vs_ops *o = t->data;

    size_t n = 0;

    if (o->closing || !o->wait_req) {
        uv_timer_stop(t);
        return;
    }
    for (const vs_op *op = op_first(&o->running); op; op = op_after(&o->running, op))
        n += op->step == O_TRACKED;
    if (n == 0)
        return; /* nothing to read, nothing to say (a late read ended the last) */
    o->wait_late = true;
    note(o, VS_TRACKER_LATE, late_ms(o), n, NULL);
    check_tracked(o, CHECK_ALL);
}

/* vs__tracker_reset forgets the collector, asking vCenter to destroy it
 * and the view: the tasks it followed register again on a new one after a
 * backoff. */
void vs__tracker_reset(vs_ops *o)
{
    if (o->have_pc)
        destroy_collector(o);
    drop_collector(o, O_REREGISTER);
    tracker_backoff(o);
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
    if (o->wait_late) {
        /* An answer, or a cancellation answered: vCenter is back. */
        o->wait_late = false;
        if (!r->err || vs_reply_fault_is(r, "RequestCanceled"))
            note(o, VS_TRACKER_ANSWERED, late_ms(o), 0, NULL);
    }
    if (o->wait_epoch != o->epoch) {
        vs__tracker_kick(o); /* a long poll of a dropped collector */
        return;
    }
    if (o->wait_cancelled && vs_reply_fault_is(r, "RequestCanceled")) {
        check_tracked(o, CHECK_DUE);
        vs__tracker_kick(o); /* cancelled to add tasks: the same version next */
        return;
    }
    if (r->err) {
        vs__tracker_reset(o);
        return;
    }
    e = vim_decode_update_set(r->resp, wait_cb, o, &us);
    if (e < 0) {
        vs__tracker_reset(o);
        return;
    }
    o->failures = 0;
    if (e == 1)
        vmg_putf(o->version, sizeof(o->version), "%s", us.version);
    /* The safety net against an end the server did not report: after a
     * quiet answer the tasks no answer has reported, and the overdue ones. */
    check_tracked(o, e == 0 ? CHECK_UNREPORTED : CHECK_DUE);
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
