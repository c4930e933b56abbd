/* planner.h: the pure function at the heart of the operator: given a VmGroup,
 * the VMs observed in vCenter for it and the operations already in flight,
 * it returns the actions to take next and the status to report.
 *
 * Pure: no I/O, no clock ("now" is an input), no globals, no logging. The
 * same input always gives the same plan, so a missed event, a restart or a
 * relist changes nothing (level-based). The caller (the reconciler) runs the
 * actions, writes the status when status_changed, and calls again when
 * something changes; the planner never retries by itself.
 *
 * The rules, in short (the tests in tests/unit/test_planner.c spell them out):
 *   - Only VMs whose mark is the group's UID are the group's ("members",
 *     together with clones in flight). Others in its folder are foreign:
 *     never acted on, reported in the status (Degraded=True, reason
 *     ForeignVMs) and, when that report appears or changes, in a Warning
 *     event. A VM outside the folder (plan_vm.elsewhere) is a member only
 *     as a replica moved out by hand looks: one of the group's names, not
 *     a template, its slot free in the folder, the oldest of its slot;
 *     then it is counted, kept, removed and deleted with the group, each
 *     action naming it and giving its id (plan_action.vm_ref), so that it
 *     is neither made again nor left behind. Any other (a copy someone
 *     made of a replica: the mark travels with a clone) is left alone and
 *     not reported.
 *   - A live group first gets the finalizer (nothing happens in vCenter in
 *     that pass), then its folder, then members up to spec.replicas: a clone
 *     is planned only while members (marked VMs + clones in flight) are
 *     fewer than replicas, into the lowest free slots (a slot is free when no
 *     VM in the folder has its name and no clone of it is in flight).
 *   - Failed members are removed (and replaced once gone). Members beyond
 *     replicas are removed in this order: being created or failed, then
 *     powered off, then the rest; within each, the highest slot first (a
 *     member whose name has no slot before any), so that scaling a group of
 *     dense slots down to n leaves slots 0 .. n-1, as a StatefulSet does.
 *     Removing a VM is POWER_OFF, then DESTROY_VM in a later pass once it
 *     is off.
 *   - Members that are off are powered on. Members sized other than spec are
 *     reconfigured one at a time: POWER_OFF, RECONFIGURE, POWER_ON, and the
 *     next starts only when no other member is unavailable (off, busy or
 *     failed); members already off are reconfigured without waiting.
 *   - A template change applies to clones made from then on; the status
 *     counts members cloned from another template (plan_vm.template).
 *     A bootstrap Secret (spec.bootstrap) is read at each clone, so its
 *     change too applies to clones made from then on; a RUNNING status
 *     says so, naming the Secret (never its content).
 *   - A member cloned before the instance mark (plan_vm.mark_instance
 *     NULL) that holds a slot in the folder, is sized as declared, powered
 *     on and has a known instanceUuid, gets that mark (PLAN_MARK, after
 *     everything else, within the budget, unless in->marks_paused; those
 *     whose mark failed, plan_vm.mark_failure_seq, last): names
 *     are unique in a folder, so that VM is the one the group cloned, and
 *     the mark puts it under the instance rule, by which a copy of it is
 *     no member. A mark in flight (plan_vm.marking) holds other actions on
 *     the VM back, as any operation does, but not its status: the VM stays
 *     Ready and the group RUNNING.
 *   - No action is planned on a VM with an operation in flight, and at most
 *     max_inflight vCenter operations of the group are in flight at once
 *     (those in flight count; the finalizer, events and marks in flight do
 *     not: the caller bounds marks in all groups).
 *   - Deletion (with our finalizer present): members are powered off and
 *     destroyed, then the folder is destroyed when it holds nothing else,
 *     then, once no task on the folder is in flight (one creating it would
 *     leave it behind), the finalizer is removed. A folder that holds VMs or objects the
 *     group did not create is kept, with a Warning event, and the finalizer
 *     is removed. Without our finalizer a deleted group gets an empty plan.
 *   - A blocking error (the caller tells) gives phase ERROR with its message;
 *     a transient error gives PENDING with its message and no vCenter action
 *     (the caller requeues with backoff); otherwise PENDING while anything is
 *     in progress and RUNNING when every replica exists, is sized as declared
 *     and powered on, with nothing in flight.
 *   - status.selector is vmgroup_selector's, whatever the situation (an
 *     autoscaler reads it through the scale subresource, at 0 replicas too).
 *   - status.vms lists the members (never foreign VMs), clones in flight
 *     included, sorted by name, the first VMGROUP_MAX_STATUS_VMS of them
 *     (vmsOmitted counts the rest), each with what the inventory shows of
 *     it and its state (VMGROUP_VM_*): Creating, Removing, Resizing,
 *     Starting or Ready, by what this plan does or waits for.
 *   - In sync: no action, and the status computed equals the current one
 *     (status_changed false), so the caller does nothing at all.
 */
#ifndef VMG_PLANNER_H
#define VMG_PLANNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "controller/vmgroup.h"

/* A VM observed in the group's folder (or elsewhere, carrying its mark). */
struct plan_vm {
    const char *name;          /* the planner reads its slot from it (naming_vm_slot) */
    const char *ref;           /* vCenter's id of it (a moref value); NULL when unknown */
    const char *mark_uid;      /* the VmGroup UID it is marked with; NULL if unmarked */
    const char *template;      /* the template it was cloned from (its mark); NULL if unknown */
    const char *instance_uuid; /* NULL or "" when unknown */
    /* The instanceUuid its clone gave it (its mark); NULL for a VM cloned
     * before that mark. A VM whose instanceUuid differs (or is unknown, or
     * the mark empty) is a copy of a member (vSphere copies the marks into
     * a copy), not a member. */
    const char *mark_instance;
    const char *power_state;            /* poweredOn, poweredOff, suspended; NULL or "" unknown */
    const char *ip[VMGROUP_VM_MAX_IPS]; /* the guest's addresses, IPv4 first */
    unsigned n_ip;
    bool powered_on;
    int num_cpu;
    int memory_mb;
    uint64_t create_order; /* larger is newer (e.g. creation time in ms) */
    bool inflight;         /* an operation on it is in flight */
    bool marking;          /* and that operation is its instance mark (PLAN_MARK):
                              it waits for it, the status does not */
    bool failed;           /* unusable, to be replaced (e.g. its clone failed half-way,
                              or it is inaccessible or orphaned) */
    bool elsewhere;        /* not in the group's folder: found by its mark */
    /* 0: its instance mark has not failed lately (the caller's word); else
     * when its last failure came among the group's VMs' (larger is more
     * recent, each VM's its own). Marks go to the others first, then the
     * least recent failure first. */
    uint64_t mark_failure_seq;
};

enum plan_folder_state {
    PLAN_FOLDER_UNKNOWN = 0, /* the inventory has not been read yet: wait */
    PLAN_FOLDER_ABSENT,
    PLAN_FOLDER_PRESENT,
};

/* Errors that only a user's change can clear. */
enum plan_block {
    PLAN_BLOCK_NONE = 0,
    PLAN_BLOCK_TEMPLATE,  /* the template is missing or unusable: no clone is planned */
    PLAN_BLOCK_PLACEMENT, /* datacenter, root folder, pool or datastore invalid: no vCenter action
                           */
    PLAN_BLOCK_OTHER,     /* anything else (e.g. permission denied): no vCenter action */
};

/* The Ready and Degraded conditions of a planned status. */
struct plan_announced {
    bool ready;                  /* Ready was True */
    const char *degraded_reason; /* NULL: Degraded was not True */
    const char *degraded_message;
};

struct planner_input {
    const struct vmgroup *g;
    const struct plan_vm *vms; /* every VM in the group's folder, and any other VM marked
                                  with the group's UID */
    size_t n_vms;
    bool vms_partial; /* vms[] is not all of them: more than VMGROUP_REPLICAS_MAX */
    enum plan_folder_state folder;
    bool folder_inflight;        /* creating or destroying the folder is in flight */
    size_t folder_other_objects; /* objects in the folder that are not VMs (folders, vApps) */
    /* A destroy of the folder found it holding objects the inventory does
     * not show (it watches VMs and folders only: a vApp, say). */
    bool folder_hidden_objects;
    /* vCenter refused the spec's size for a member (its message), NULL if
     * not: no member is resized, and those powered off for it are powered
     * on again. Apart from block: a template block may hold too. */
    const char *resize_refused;
    /* The names of some or all of those objects: one with a VM's name
     * takes that VM's slot, as a foreign VM does (vCenter refuses a second
     * child of the same name). */
    const char *const *folder_other_names;
    size_t n_folder_other_names;
    const int *clones_inflight; /* slots whose clone is in flight (duplicates ignored) */
    size_t n_clones_inflight;
    enum plan_block block;
    const char *block_reason;  /* CamelCase; NULL: TemplateNotFound, InvalidPlacement, Blocked */
    const char *block_message; /* one sentence naming the object at fault, e.g.
                                  template "foo" not found in datacenter "DC0" */
    const char *transient_message; /* NULL or "" when none; else why the last step failed */
    const char *now;               /* RFC 3339, for conditions that change */
    int max_inflight;              /* vCenter operations of this group in flight; < 1 means 1 */
    /* No PLAN_MARK: a mark failed lately (the caller tries again after a
     * backoff), or the caller cannot or is told not to write marks. */
    bool marks_paused;
    /* NULL, or the conditions of the last plan of this group (its
     * .announced): the events of conditions (Ready, Degraded) are sent for
     * changes from these, not from g's status, which lags behind the
     * statuses written (the cache shows a write a moment later, and maybe
     * an older write first): a change is announced once. */
    const struct plan_announced *announced;
};

enum plan_action_kind {
    PLAN_ADD_FINALIZER = 0,
    PLAN_CREATE_FOLDER,
    PLAN_CLONE,
    PLAN_POWER_ON,
    PLAN_POWER_OFF,
    PLAN_RECONFIGURE,
    PLAN_DESTROY_VM,
    PLAN_MARK,
    PLAN_DESTROY_FOLDER,
    PLAN_REMOVE_FINALIZER,
    PLAN_EVENT,
};

enum plan_event_type {
    PLAN_EVENT_NORMAL = 0,
    PLAN_EVENT_WARNING,
};

struct plan_action {
    enum plan_action_kind kind;
    const char *vm;                  /* CLONE (the new VM), POWER_ON/OFF, RECONFIGURE,
                                        DESTROY_VM, MARK */
    const char *vm_ref;              /* POWER_ON/OFF, RECONFIGURE, DESTROY_VM, MARK: its
                                        plan_vm.ref */
    int slot;                        /* CLONE */
    const char *template;            /* CLONE: spec.template */
    int cpu;                         /* CLONE, RECONFIGURE */
    int memory_mb;                   /* CLONE, RECONFIGURE: spec.memory * 1024 */
    const char *instance_uuid;       /* MARK: the VM's instanceUuid, its mark to be */
    enum plan_event_type event_type; /* EVENT */
    const char *reason;              /* EVENT: CamelCase */
    const char *message;             /* EVENT */
};

struct plan_mem;

/* A plan; every string in it belongs to the plan. */
struct plan {
    const char *folder; /* the group's folder name (naming_folder) */
    struct plan_action *actions;
    size_t n_actions;
    struct vmgroup_status status; /* what status should say */
    const struct vmgroup_vm *vms; /* its status.vms, status.n_vms entries */
    bool status_changed;          /* status differs from g->status: write it */
    int current;                  /* VMs marked with the group's UID */
    int foreign;                  /* VMs in the folder that are not the group's */
    int old_template;             /* members cloned from another template than spec's */
    struct plan_mem *mem;         /* private */
    /* The Ready and Degraded of status, from which the next plan's events
     * are to be computed (strings owned by the plan); announced_valid is
     * false for a plan that removes the finalizer or plans nothing of a
     * group being deleted: the group goes away. */
    struct plan_announced announced;
    bool announced_valid;
};

/* planner_plan computes the plan for in. Returns 0 and *ret (free with
 * plan_free), -EINVAL for a NULL g or now, or NULL arrays with non-zero
 * counts, -ENOMEM, or -EIO if hashing a name failed. */
int planner_plan(const struct planner_input *in, struct plan **ret);

/* plan_free frees p; NULL is fine. */
void plan_free(struct plan *p);

/* plan_action_kind_name returns a short name of kind, e.g. "clone". */
const char *plan_action_kind_name(enum plan_action_kind kind);

/* plan_describe writes the actions of p into buf as one line for logs and
 * tests, e.g. "add-finalizer; clone web-0; power-off web-3" ("" for none),
 * truncated to fit. Returns the length it needed (like snprintf), or -EINVAL. */
int plan_describe(const struct plan *p, char *buf, size_t size);

#endif
