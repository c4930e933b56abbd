/* reconciler.h: the VmGroup controller's sync function and executor.
 *
 * For one key ("namespace/name") taken from the workqueue, the reconciler
 * reads the latest cached VmGroup and the VMs the inventory cache holds for
 * its folder, asks the pure planner what to do, and starts the actions: vCenter
 * operations, finalizer and status writes, events. It records each operation
 * as in flight until its completion callback, and completions only re-enqueue
 * the key: the next pass plans again from the caches (level-based).
 *
 * All I/O goes through struct rec_world, which the manager wires to
 * kubeworld (the VmGroups' cache, their writes and events) and vcworld (the
 * vCenter session, the inventory, the operations); the unit tests wire it to
 * a fake. Everything runs on one libuv loop; nothing blocks.
 */
#ifndef VMG_RECONCILER_H
#define VMG_RECONCILER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "controller/planner.h"
#include "controller/vmgroup.h"
#include "kube/workqueue.h"

/* Completion of an asynchronous operation of the world: err is 0 or a
 * negative code; fault is vCenter's fault type when there is one (e.g.
 * "DuplicateName"), else NULL; msg is one sentence for users, or NULL. */
typedef void (*rec_done_cb)(void *cbdata, int err, const char *fault, const char *msg);

/* An extraConfig entry of a clone (e.g. guestinfo.userdata). No value is
 * ever logged; a secret one (at most one a clone) is also kept out of the
 * request's XML tree and wiped (vsphere/ops.h). */
struct rec_keyval {
    const char *key;
    const char *value;
    bool secret;
};

/* The answer to get_secret: err 0 and the Secret object as the API server
 * gave it (borrowed for the call; wiped and freed after it), or a negative
 * code (VMG_ENOTFOUND, VMG_EFORBIDDEN, ...) and one sentence in msg. */
typedef void (*rec_secret_cb)(void *cbdata, int err, const char *msg, const cJSON *secret);

/* The VMs of one folder as the inventory cache holds them. Strings belong to
 * the world and stay valid until control returns to the loop. */
struct rec_folder {
    enum plan_folder_state state;
    const struct plan_vm *vms;
    size_t n_vms;
    size_t other_objects;           /* children that are not VMs */
    const char *const *other_names; /* the names of some or all of them */
    size_t n_other_names;
    bool truncated; /* the folder holds more VMs than vms[] (VMGROUP_REPLICAS_MAX) */
};

struct rec_world {
    void *data;     /* for the Kubernetes members */
    void *vcdata;   /* for the vCenter members: vcenter_ready, folder and the operations */
    void *hookdata; /* for the optional hooks: observed, reconciled, forgotten */
    /* The cached VmGroup of key, or NULL when it is gone. Read-only. */
    const struct vmgroup *(*get_group)(void *data, const char *key);
    /* 0 when vCenter is usable (session up, inventory synced); else a
     * negative code and one sentence in msg, e.g. why the login failed.
     * VMG_ENOTFOUND, VMG_EAMBIGUOUS and VMG_ECONFIG mean the placement is
     * invalid: the groups show ERROR instead of PENDING. */
    int (*vcenter_ready)(void *data, char *msg, size_t msglen);
    /* Optional: how long (ms) vCenter has not been usable, since it last
     * was or since the start; 0 while it is. With it, an outage shorter
     * than rec_options.vc_grace_ms leaves the groups' status as it is. */
    uint64_t (*vcenter_down_ms)(void *data);
    /* The VMs in the folder named folder under the root folder, then the
     * VMs marked with uid elsewhere under it (plan_vm.elsewhere: moved out
     * of the folder by hand, or copies of the group's VMs, which the
     * planner tells apart), each with its plan_vm.ref. */
    int (*folder)(void *data, const char *folder, const char *uid, struct rec_folder *ret);
    /* "now" in RFC 3339, for condition transitions. */
    void (*now)(void *data, char *buf, size_t len);

    /* Kubernetes writes; what they are given is not consumed. Each calls cb
     * exactly once, later, unless it returns a negative code. A write's
     * handle is stored in *ret (may be NULL), valid until its callback
     * runs. patch is a JSON merge patch (an object) or a JSON patch (an
     * array of operations; a failed "test" answers VMG_ECONFLICT). */
    int (*patch_status)(void *data, const struct vmgroup *g, const cJSON *status, rec_done_cb cb,
                        void *cbdata, void **ret);
    int (*patch_meta)(void *data, const struct vmgroup *g, const cJSON *patch, rec_done_cb cb,
                      void *cbdata, void **ret);
    /* Optional, for a write not sent yet (it waits for the client's rate
     * limit): restatus gives a status write status instead; hurry sends a
     * write before the writes not hurried (after those hurried before it);
     * unwrite drops a write (its callback runs with VMG_ECANCELED before
     * unwrite returns). Each returns -EBUSY once the write is out. */
    int (*restatus)(void *data, void *write, const cJSON *status);
    int (*hurry)(void *data, void *write);
    int (*unwrite)(void *data, void *write);
    void (*event)(void *data, const struct vmgroup *g, bool warning, const char *reason,
                  const char *message);
    /* Optional: GET the Secret name of namespace ns (for a clone's
     * bootstrap, controller/bootstrap.h). Calls cb exactly once, later,
     * unless it returns a negative code. */
    int (*get_secret)(void *data, const char *ns, const char *name, rec_secret_cb cb, void *cbdata);

    /* vCenter operations; each calls cb exactly once, later, unless it
     * returns a negative code (then cb is never called). */
    int (*create_folder)(void *data, const char *folder, rec_done_cb cb, void *cbdata);
    int (*destroy_folder)(void *data, const char *folder, rec_done_cb cb, void *cbdata);
    /* extra: more extraConfig entries of the new VM (n_extra of them; NULL
     * when none), copied before it returns. */
    int (*clone)(void *data, const struct vmgroup *g, const char *folder, const char *vm,
                 const char *template_, int cpu, int memory_mb, const struct rec_keyval *extra,
                 size_t n_extra, rec_done_cb cb, void *cbdata);
    /* The operations on a VM name it (vm, in folder) and give its ref
     * (plan_vm.ref, NULL when unknown): a VM with a ref is acted on by it,
     * wherever it is; one without is looked up by name in folder. */
    int (*power)(void *data, const char *folder, const char *vm, const char *ref, bool on,
                 rec_done_cb cb, void *cbdata);
    int (*reconfigure)(void *data, const char *folder, const char *vm, const char *ref, int cpu,
                       int memory_mb, rec_done_cb cb, void *cbdata);
    int (*destroy_vm)(void *data, const char *folder, const char *vm, const char *ref,
                      rec_done_cb cb, void *cbdata);
    /* Optional: write instance_uuid (the VM's own instanceUuid) into the
     * VM's instance mark, changing nothing else (PLAN_MARK). Without it no
     * mark is planned. */
    int (*mark_instance)(void *data, const char *folder, const char *vm, const char *ref,
                         const char *instance_uuid, rec_done_cb cb, void *cbdata);
    /* Optional: read the VM vm of folder (or ref) again from vCenter,
     * because an operation on it ended but the cache has not shown that
     * in time. Returns 0 when the read is under way (the cache reports
     * what it reads like any change), else a negative code. */
    int (*reread)(void *data, const char *folder, const char *vm, const char *ref);

    /* Optional: called after each plan, for metrics (current, desired...). */
    void (*observed)(void *data, const struct vmgroup *g, const struct plan *p);
    /* Optional: one reconcile finished: result is controller-runtime's word
     * ("success", "error", "requeue_after"), seconds how long it took. */
    void (*reconciled)(void *data, const char *key, const char *result, double seconds);
    /* Optional: the group is gone for good (finalizer removed, object deleted). */
    void (*forgotten)(void *data, const char *key);
};

struct rec_options {
    int max_group_tasks;       /* vCenter operations in flight per group */
    uint64_t blocked_retry_ms; /* how often a blocked group (e.g. missing template) is retried */
    uint64_t vc_grace_ms;      /* see hold() in reconciler.c; 0: an outage is said at once */
    /* Instance marks (PLAN_MARK) in flight in all groups at once: they are
     * housekeeping, and must not fill vCenter's queue ahead of the work
     * users wait for. 0: REC_DEFAULT_MAX_MARKS; REC_NO_MARKS: none are
     * written (the VMs without the mark keep the rule from before it). */
    int max_marks;
    uint64_t (*clock)(void *data); /* milliseconds, monotonic; NULL: the system's (tests set it) */
};

#define REC_DEFAULT_MAX_MARKS 2
#define REC_NO_MARKS (-1)

typedef struct reconciler reconciler;

/* reconciler_new makes a reconciler over world (copied) that takes keys from
 * q; the caller points q's handler at reconciler_handle. */
int reconciler_new(const struct rec_world *world, const struct rec_options *opts, struct wq *q,
                   reconciler **ret);

/* reconciler_handle is the workqueue handler: it reconciles key, applies
 * the pass's outcome to the queue (forget, requeue after a delay, or
 * rate-limited) and calls wq_done for it before returning (the work it
 * starts completes later and re-enqueues the key). data is the reconciler. */
void reconciler_handle(void *data, const char *key);

/* reconciler_inflight returns the operations in flight, in all groups. */
size_t reconciler_inflight(const reconciler *r);

/* reconciler_groups returns the groups whose state it keeps: those seen
 * and not yet known gone with nothing of theirs in flight. */
size_t reconciler_groups(const reconciler *r);

/* reconciler_free frees r. Operations still in flight must have completed
 * (or been canceled, which completes them) before. NULL is fine. */
void reconciler_free(reconciler *r);

#endif
