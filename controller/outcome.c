/* outcome.c: what the end of a vCenter operation means (see outcome.h). */
#include "controller/outcome.h"

#include <string.h>

#include "lib/err.h"

static bool fault_is(const char *fault, const char *name)
{
    return fault && strcmp(fault, name) == 0;
}

/* as_wanted tells whether a failed operation left things as wanted anyway:
 * a clone re-issued after a restart that collides by name, a folder already
 * there, a VM already gone or already in the asked power state. */
static bool as_wanted(enum plan_action_kind k, int err, const char *fault)
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

static enum op_outcome classify(enum plan_action_kind k, int err, const char *fault)
{
    if (err == VMG_ECANCELED)
        return OP_CANCELED;
    if (err == 0)
        return OP_DONE;
    if (as_wanted(k, err, fault))
        return OP_AS_WANTED;
    if ((k == PLAN_POWER_ON || k == PLAN_POWER_OFF || k == PLAN_RECONFIGURE) &&
        fault_is(fault, "ManagedObjectNotFound"))
        return OP_VM_GONE;
    if (k == PLAN_CLONE && !fault && (err == VMG_EUNKNOWN || err == VMG_ETRANSPORT))
        return OP_UNSURE;
    if (k == PLAN_CLONE && !fault &&
        (err == VMG_ENOTFOUND || err == VMG_EAMBIGUOUS || err == VMG_ECONFIG))
        return OP_TEMPLATE;
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
        ret->settle = true;
        ret->event = OP_EVENT_NORMAL;
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
    case OP_UNSURE:
        /* In flight until the inventory shows the VM or the wait is over,
         * so that a lower free slot is not cloned meanwhile. */
        ret->await = true;
        ret->transient = true;
        ret->requeue = OP_REQUEUE_BACKOFF;
        break;
    case OP_TEMPLATE:
        /* A template missing, ambiguous, or refused (not a template, inside
         * the operator's folder, outside the datacenter). */
        ret->event = OP_EVENT_WARNING;
        ret->requeue = OP_REQUEUE_NOW;
        ret->block_reason = err == VMG_ENOTFOUND    ? "TemplateNotFound"
                            : err == VMG_EAMBIGUOUS ? "TemplateAmbiguous"
                                                    : "TemplateRefused";
        break;
    case OP_FAILED:
        ret->transient = true;
        ret->event = OP_EVENT_WARNING;
        ret->requeue = OP_REQUEUE_BACKOFF;
        break;
    }
}
