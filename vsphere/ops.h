/* ops.h: the operations the operator runs in vCenter, as asynchronous jobs
 * with task tracking and a bound on how many run at once.
 *
 * Operations: CreateFolder (DuplicateName counts as success and gives the
 * folder that exists), CloneVM_Task (the template is found by name in the
 * datacenter's VM folder tree, or by inventory path within it, with
 * vs_find_template: it must be a VM template, and outside the placement's
 * root folder, where the groups' VMs live; the clone goes into the group's
 * folder with its CPUs, memory and the group's marks in extraConfig, on the
 * placement's pool and datastore, powered on),
 * PowerOnVM_Task, PowerOffVM_Task, ReconfigVM_Task (CPUs, memory) and
 * Destroy_Task (a VM, or a folder with what it holds).
 *
 * Each call returns at once; the callback runs once, later, with the
 * outcome. Completion of a task is learned from a PropertyCollector, not
 * by polling: the ops' own collector has one filter over a ListView of the
 * tasks in flight (vsphere/tasks.h), to which a task is added when it
 * starts and from which it is removed when it ends (one ModifyListView
 * for both), and its WaitForUpdatesEx long poll reports the ends: a task
 * that joins the view enters the filter, and the next long poll reports it
 * with its state, even one that ended already (vCenter and vcsim alike).
 * The tasks' states are read only as a safety net: every task when the
 * long poll has not answered 30 s past its maxWaitSeconds (or past the
 * call's timeout, if sooner); a task no long poll has reported since it
 * joined the view, at a quiet answer, or at the first answer 30 s or more
 * after it joined (a server that does not report tasks entering it, while
 * others keep the long poll answering); and a task reported, then nothing
 * of it for 5 minutes, at the next answer (a change the server lost). So on
 * a vCenter that answers its long polls, a task that ends within 5 minutes
 * of its last report is never read, and a longer one once each 5 minutes. A
 * completed operation costs about two requests: the method and its share
 * of the ModifyListView calls, plus its share of the long polls.
 *
 * At most max_inflight operations run at once (default 8); the others
 * wait in a FIFO queue of at most max_queued.
 *
 * With an inventory, what a successful operation did (the clone's VM as
 * its spec says, powered on; a power state; a size; an object gone; a
 * folder made) is put in its cache before the callback runs
 * (vs_inventory_assume), so that the next step need not wait for the
 * watch; vs_op_result.assumed says whether all of it holds there.
 */
#ifndef VMG_VS_OPS_H
#define VMG_VS_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "vsphere/inventory.h"
#include "vsphere/session.h"

#define VS_OPS_DEFAULT_MAX_INFLIGHT 8
#define VS_OPS_DEFAULT_MAX_QUEUED 10000
/* A resolved template is remembered this long; before each clone from it,
 * its config.template and parent are read again, and a template turned
 * into a VM or moved is resolved again (and so refused, or found anew). */
#define VS_OPS_TEMPLATE_TTL_MS (10 * 60 * 1000)
/* The most extraConfig entries a clone adds beside the marks, and the most
 * bytes of their keys and values together. */
#define VS_CLONE_MAX_EXTRA 8
#define VS_CLONE_MAX_EXTRA_BYTES (256 * 1024)

typedef struct vs_ops vs_ops;
typedef struct vs_op vs_op;

enum vs_op_kind {
    VS_OP_CREATE_FOLDER,
    VS_OP_CLONE,
    VS_OP_POWER_ON,
    VS_OP_POWER_OFF,
    VS_OP_RECONFIGURE,
    VS_OP_DESTROY,
};

/* The outcome of an operation, valid during the callback. */
struct vs_op_result {
    enum vs_op_kind kind;
    /* 0; VMG_EFAULT (the method or its task failed: fault_type and message
     * say how); VMG_ENOTFOUND (the template, or the object acted on, does
     * not exist; fault_type "ManagedObjectNotFound" for the latter);
     * VMG_EAMBIGUOUS (several templates of that name); VMG_ECONFIG (no
     * placement yet, or the template refused: a VM that is not a template,
     * one inside the root folder, a path outside the datacenter's VM
     * folder, something that is not a VM; message says which);
     * VMG_ECONFLICT (the name asked for is held by something else than
     * asked, fault_type "DuplicateName": no folder of that name for
     * CREATE_FOLDER, what is not a VM for CLONE; a folder to destroy that
     * holds objects); and the session's errors (VMG_EAUTH, VMG_ETRANSPORT,
     * ...), VMG_ECANCELED. */
    int err;
    const char *fault_type; /* "" unless a fault */
    const char *message;    /* "" on success; else one sentence */
    /* CLONE: the new VM, or, when it failed with DuplicateName, the object
     * vCenter says holds the name (when it says: existed); err is then
     * VMG_ECONFLICT when that object is not a VM;
     * CREATE_FOLDER: the folder (also when it existed); else NULL. */
    const struct vim_moref *result;
    const struct vim_moref *task; /* NULL when no task was started */
    bool existed; /* CREATE_FOLDER: it existed already; CLONE: result holds the name */
    /* On success, with an inventory: what the operation did is in the
     * inventory's cache already (vs_inventory_assume held all of it): the
     * VM powered on or off, resized, entered by the clone (with its spec's
     * name, folder, size and marks, powered on as the clone asked), gone;
     * the folder made, or gone. false: the watch will show it. */
    bool assumed;
};

typedef void (*vs_op_cb)(void *data, const struct vs_op_result *r);

enum vs_op_phase {
    VS_OP_QUEUED,  /* accepted, waiting for a slot */
    VS_OP_STARTED, /* holds a slot: its requests are being sent */
    VS_OP_TASK,    /* vCenter started its task (vs_op_task() tells which) */
    VS_OP_DONE,    /* finished; the slot is free (r is the result) */
};

/* Observes every operation's progress (metrics, logs, tests). r is the
 * result for VS_OP_DONE, else NULL. Must not call into vs_ops. */
typedef void (*vs_ops_observer)(void *data, const vs_op *op, enum vs_op_phase phase,
                                const struct vs_op_result *r);

/* What the task tracker notices of vCenter, for the log: its long poll
 * late with tasks to follow (so they are read), then answered; the end of
 * a task that a read found, the read sent and answered while the long poll
 * was not late (a change vCenter did not report). */
enum vs_tracker_event {
    VS_TRACKER_LATE,     /* no answer late_ms past wait_s: the tasks (tasks) are read */
    VS_TRACKER_ANSWERED, /* the long poll that was late answered, late_ms past wait_s */
    VS_TRACKER_MISSED,   /* a read found op's task ended, which no answer had reported */
};

struct vs_tracker_note {
    enum vs_tracker_event event;
    int wait_s;       /* the long poll's maxWaitSeconds */
    uint64_t late_ms; /* LATE, ANSWERED */
    size_t tasks;     /* LATE: how many are read */
    const vs_op *op;  /* MISSED (vs_op_kind, vs_op_target, vs_op_task) */
};

/* Told of each note; must not call into vs_ops. */
typedef void (*vs_tracker_cb)(void *data, const struct vs_tracker_note *n);

struct vs_ops_config {
    int max_inflight;       /* < 1: VS_OPS_DEFAULT_MAX_INFLIGHT */
    size_t max_queued;      /* 0: VS_OPS_DEFAULT_MAX_QUEUED */
    int task_wait_seconds;  /* maxWaitSeconds of the task long poll; 0: 60 */
    uint64_t slow_check_ms; /* a long poll unanswered this long past its maxWaitSeconds: read
                               every task's state; a task unreported this long after it
                               joined the view: read it at the next answer; 0: 30 s */
    uint64_t recheck_ms;    /* a task reported, then untold of this long: read it at the
                               next answer; 0: 5 min */
    /* The extraConfig keys of a clone's marks; copied. With an instance
     * key, each clone is given a random instanceUuid, written in that
     * mark too. */
    struct vs_mark_keys marks;
};

struct vs_clone_spec {
    const char *template_name;      /* name or inventory path of the template */
    const struct vim_moref *folder; /* the group's folder */
    const char *name;               /* the new VM's name */
    int num_cpus;                   /* 0: the template's */
    long long memory_mb;            /* 0: the template's */
    /* The values of the marks (keys: vs_ops_config.marks; a value given
     * for a mark without a key is -EINVAL); NULL: none. */
    const char *mark_uid;
    const char *mark_template;
    /* More extraConfig entries for the new VM, e.g. guestinfo.* keys;
     * NULL when n_extra is 0. At most VS_CLONE_MAX_EXTRA, with non-empty
     * keys of fewer than VS_NAME_MAX bytes other than the marks' keys, and
     * VS_CLONE_MAX_EXTRA_BYTES in all, at most one of them secret (it never
     * enters the request's XML tree). Copied; the copies are wiped when the
     * operation ends, since a value may be a secret (none is ever logged). */
    const struct vim_option *extra;
    size_t n_extra;
};

/* vs_ops_new makes the operations runner of session s. The placement of
 * clones comes from inv (when not NULL) or vs_ops_set_placement; the result
 * of each operation that succeeds is put in inv's cache at once
 * (vs_inventory_assume; vs_op_result.assumed). NULL with *ret_err on
 * failure. */
vs_ops *vs_ops_new(uv_loop_t *loop, vs_session *s, vs_inventory *inv,
                   const struct vs_ops_config *cfg, int *ret_err);

/* vs_ops_set_placement sets the placement (copied) used when inv has none. */
void vs_ops_set_placement(vs_ops *o, const struct vs_placement *p);
void vs_ops_set_observer(vs_ops *o, vs_ops_observer obs, void *data);
void vs_ops_set_tracker_cb(vs_ops *o, vs_tracker_cb cb, void *data);

/* Each of these queues an operation. Returns 0 and sets *ret (when not
 * NULL; valid until the callback returns), or -EINVAL, -ENOSPC (the queue
 * is full), -ENOMEM, -EIO (no random instanceUuid), VMG_ECANCELED
 * (closing); the callback is then never called. */
int vs_ops_create_folder(vs_ops *o, const struct vim_moref *parent, const char *name, vs_op_cb cb,
                         void *data, vs_op **ret);
int vs_ops_clone(vs_ops *o, const struct vs_clone_spec *spec, vs_op_cb cb, void *data, vs_op **ret);
int vs_ops_power_on(vs_ops *o, const struct vim_moref *vm, vs_op_cb cb, void *data, vs_op **ret);
int vs_ops_power_off(vs_ops *o, const struct vim_moref *vm, vs_op_cb cb, void *data, vs_op **ret);
int vs_ops_reconfigure(vs_ops *o, const struct vim_moref *vm, int num_cpus, long long memory_mb,
                       vs_op_cb cb, void *data, vs_op **ret);
/* vs_ops_mark_instance writes instance_uuid (a VM's own config.instanceUuid)
 * in vm's instance mark (vs_ops_config.marks.instance, which must be set),
 * by a ReconfigVM_Task that changes nothing else: for a VM cloned before
 * that mark. Its kind is VS_OP_RECONFIGURE. */
int vs_ops_mark_instance(vs_ops *o, const struct vim_moref *vm, const char *instance_uuid,
                         vs_op_cb cb, void *data, vs_op **ret);
int vs_ops_destroy(vs_ops *o, const struct vim_moref *entity, vs_op_cb cb, void *data, vs_op **ret);

/* vs_op_cancel stops following op: its callback runs now with
 * VMG_ECANCELED. A task already started in vCenter keeps running there. */
void vs_op_cancel(vs_op *op);

enum vs_op_kind vs_op_kind(const vs_op *op);
const char *vs_op_kind_name(enum vs_op_kind kind); /* "clone", "power-on", ... */
/* vs_op_target names what op acts on: the new VM's or folder's name, or
 * the moref value of the VM or entity. */
const char *vs_op_target(const vs_op *op);
/* vs_op_task is the task's moref value, "" before there is one. */
const char *vs_op_task(const vs_op *op);

size_t vs_ops_inflight(const vs_ops *o);
size_t vs_ops_queued(const vs_ops *o);

/* vs_ops_hold stops sending vCenter methods, for a manager handing its
 * lease over: queued operations, and running ones that have not sent their
 * method yet (a clone resolving its template, a folder read before its
 * destruction), end with VMG_ECANCELED, and new ones are refused with it.
 * Tasks already started are still followed to their end. */
void vs_ops_hold(vs_ops *o);

/* vs_ops_close fails every queued and running operation (callbacks run
 * with VMG_ECANCELED before this returns), then frees o once its timer is
 * closed and calls closed(data) when not NULL. NULL is fine. */
void vs_ops_close(vs_ops *o, void (*closed)(void *data), void *data);

#ifdef VMG_TESTING
/* vs_op_testing_assume applies to c what op, which succeeded with r (an
 * observer's VS_OP_DONE), did, as vs_inventory_assume would: 0 when op
 * cannot say, else vs_cache_assume's answer (not committed). */
int vs_op_testing_assume(const vs_op *op, const struct vs_op_result *r, vs_cache *c, uint64_t since,
                         uint64_t asked);
/* vs_op_testing_read_back is the VM that op, which ended with r, has the
 * inventory read back (vCenter did not find it, or it holds the name a
 * clone asked for), or NULL. */
const char *vs_op_testing_read_back(const vs_op *op, const struct vs_op_result *r);
#endif

#endif
