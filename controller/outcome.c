/* outcome.c: what the end of a vCenter operation means (see outcome.h). */
#include "controller/outcome.h"

#include <string.h>

#include "lib/err.h"

static bool fault_is(const char *fault, const char *name)
{
    return fault && strcmp(fault, name) == 0;
}

/* What vCenter's answers mean for each kind of operation. */
struct kind_rules {
    /* The fault that says it is as wanted already: the folder or a clone
     * re-issued after a restart is there (DuplicateName; with
     * VMG_ECONFLICT, something else holds the name), the VM is in the
     * asked power state (InvalidPowerState), the VM or folder is gone. */
    const char *as_wanted_fault;
    bool not_found_as_wanted; /* VMG_ENOTFOUND says so too (deletions) */
    bool vm_may_go;           /* ManagedObjectNotFound: the VM went meanwhile */
};

static const struct kind_rules rules[] = {
    [PLAN_CREATE_FOLDER] = {"DuplicateName", false, false},
    [PLAN_CLONE] = {"DuplicateName", false, false},
    [PLAN_POWER_ON] = {"InvalidPowerState", false, true},
    [PLAN_POWER_OFF] = {"InvalidPowerState", false, true},
    [PLAN_RECONFIGURE] = {NULL, false, true},
    [PLAN_DESTROY_VM] = {"ManagedObjectNotFound", true, false},
    [PLAN_MARK] = {NULL, false, true},
    [PLAN_DESTROY_FOLDER] = {"ManagedObjectNotFound", true, false},
};

/* Faults of a reconfiguration that refuse the size itself, which trying
 * again does not mend: the arguments (a CPU count its cores per socket do
 * not divide, a size the VM's hardware version or host does not support),
 * or the right to reconfigure. Any other fault (a host not answering, the
 * VM busy, resources short for now) is a failure tried again after the
 * backoff. */
static const char *const refusing_faults[] = {
    "InvalidArgument",
    "InvalidProperty",
    "InvalidDeviceSpec",
    "NotSupported",
    "NoPermission",
    "DeviceUnsupportedForVmVersion",
    "NumVirtualCpusNotSupported",
    "NumVirtualCpusIncompatible",
    "NumVirtualCoresPerSocketNotSupported",
    "MemorySizeNotSupported",
    "MemorySizeNotRecommended",
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* listed returns the entry of list[0..n) that fault names, or NULL. */
static const char *listed(const char *fault, const char *const *list, size_t n)
{
    for (size_t i = 0; fault && i < n; i++)
        if (strcmp(fault, list[i]) == 0)
            return list[i];
    return NULL;
}

static const char *const bootstrap_blocks[] = {
    OUTCOME_BOOTSTRAP_SECRET_NOT_FOUND, OUTCOME_BOOTSTRAP_KEY_NOT_FOUND,
    OUTCOME_BOOTSTRAP_FORBIDDEN, OUTCOME_BOOTSTRAP_INVALID, OUTCOME_BOOTSTRAP_TOO_BIG};

const char *outcome_bootstrap_block(const char *fault)
{
    return listed(fault, bootstrap_blocks, N_OF(bootstrap_blocks));
}

static enum op_outcome classify(enum plan_action_kind k, int err, const char *fault)
{
    static const struct kind_rules none;
    const struct kind_rules *kr = (size_t)k < sizeof(rules) / sizeof(rules[0]) ? &rules[k] : &none;

    if (err == VMG_ECANCELED)
        return OP_CANCELED;
    if (err == 0)
        return OP_DONE;
    if ((kr->as_wanted_fault && fault_is(fault, kr->as_wanted_fault) && err != VMG_ECONFLICT) ||
        (kr->not_found_as_wanted && err == VMG_ENOTFOUND))
        return OP_AS_WANTED;
    if (kr->vm_may_go && fault_is(fault, "ManagedObjectNotFound"))
        return OP_VM_GONE;
    if (k == PLAN_DESTROY_FOLDER && err == VMG_ECONFLICT && (!fault || !*fault))
        return OP_HIDDEN;
    if (k == PLAN_RECONFIGURE && listed(fault, refusing_faults, N_OF(refusing_faults)))
        return OP_RESIZE_REFUSED;
    if (k == PLAN_CLONE && outcome_bootstrap_block(fault))
        return OP_TEMPLATE;
    if (k == PLAN_CLONE && !fault && (err == VMG_EUNKNOWN || err == VMG_ETRANSPORT))
        return OP_UNSURE;
    if (k == PLAN_CLONE && !fault &&
        (err == VMG_ENOTFOUND || err == VMG_EAMBIGUOUS || err == VMG_ECONFIG))
        return OP_TEMPLATE;
    if (k == PLAN_MARK)
        return OP_MARK_FAILED;
    return OP_FAILED;
}

void outcome_decide(enum plan_action_kind kind, int err, const char *fault, struct op_decision *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->outcome = classify(kind, err, fault);
    switch (ret->outcome) {
    case OP_CANCELED:
        break;
    case OP_DONE:
        ret->await = true;
        /* A mark is housekeeping: neither an event nor the end of the
         * group's failures (a clone failing meanwhile keeps its backoff). */
        ret->settle = kind != PLAN_MARK;
        ret->event = kind != PLAN_MARK ? OP_EVENT_NORMAL : OP_EVENT_NONE;
        ret->requeue = OP_REQUEUE_NOW;
        ret->unblock = kind == PLAN_CLONE;
        break;
    case OP_AS_WANTED:
        ret->await = true;
        ret->settle = true;
        ret->requeue = OP_REQUEUE_NOW;
        break;
    case OP_VM_GONE:
        /* The group's backoff does not grow; the group is planned again
         * shortly, once the VM has been read again. */
        ret->reread = true;
        ret->requeue = OP_REQUEUE_BACKOFF;
        break;
    case OP_HIDDEN:
        /* Destroying the folder would destroy them. They may be VMs the
         * inventory is about to show: the group is planned again after its
         * backoff, and a second such answer keeps the folder, as one
         * holding objects the inventory shows is kept. */
        ret->hidden = true;
        ret->requeue = OP_REQUEUE_BACKOFF;
        break;
    case OP_UNSURE:
        /* In flight until the inventory shows the VM or the wait is over,
         * so that a lower free slot is not cloned meanwhile. */
        ret->await = true;
        ret->transient = true;
        ret->requeue = OP_REQUEUE_BACKOFF;
        break;
    case OP_RESIZE_REFUSED:
        /* Tried again, the VM would be powered off for nothing each time:
         * the group keeps its VMs' size (and powers on the one off for
         * it) until its spec changes. */
        ret->event = OP_EVENT_WARNING;
        ret->requeue = OP_REQUEUE_NOW;
        ret->resize_refused = true;
        break;
    case OP_TEMPLATE:
        /* A template missing, ambiguous, or refused (not a template, inside
         * the operator's folder, outside the datacenter); or the bootstrap's
         * Secret or key missing, forbidden, or its user data unusable. */
        ret->event = OP_EVENT_WARNING;
        ret->requeue = OP_REQUEUE_NOW;
        ret->block = PLAN_BLOCK_TEMPLATE;
        ret->block_reason = outcome_bootstrap_block(fault) ? outcome_bootstrap_block(fault)
                            : err == VMG_ENOTFOUND         ? "TemplateNotFound"
                            : err == VMG_EAMBIGUOUS        ? "TemplateAmbiguous"
                                                           : "TemplateRefused";
        break;
    case OP_MARK_FAILED:
        /* Said, and tried again after the marks' backoff; the status does
         * not change for it, nor does anything else wait. */
        ret->mark_failed = true;
        ret->event = OP_EVENT_WARNING;
        ret->requeue = OP_REQUEUE_BACKOFF;
        break;
    case OP_FAILED:
        ret->transient = true;
        ret->event = OP_EVENT_WARNING;
        ret->requeue = OP_REQUEUE_BACKOFF;
        break;
    }
}
