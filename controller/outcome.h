/* outcome.h: what the end of a vCenter operation means for its group.
 *
 * outcome_decide() looks only at the operation's kind and how it ended (the
 * error code and vCenter's fault type) and says what happened and what is
 * to be done about it; it does nothing itself. The reconciler applies the
 * decision in one place (logs, events, the group's state, the requeue), and
 * the unit tests cover the decisions by tables (tests/unit/test_outcome.c).
 */
#ifndef VMG_OUTCOME_H
#define VMG_OUTCOME_H

#include <stdbool.h>

#include "controller/planner.h"

enum op_outcome {
    OP_CANCELED = 0,   /* the operator is stopping: nothing to report or retry */
    OP_DONE,           /* the operation succeeded */
    OP_AS_WANTED,      /* it failed but left things as wanted: a folder or a clone
                          that is there already (DuplicateName), a VM already in the
                          power state asked (InvalidPowerState), a VM or folder
                          already gone (ManagedObjectNotFound, VMG_ENOTFOUND) */
    OP_VM_GONE,        /* the VM went meanwhile (ManagedObjectNotFound on a power
                          change or a reconfiguration): nothing that waiting mends */
    OP_UNSURE,         /* a clone whose end cannot be known (VMG_EUNKNOWN, or
                          VMG_ETRANSPORT with no fault): it may be under way or done */
    OP_HIDDEN,         /* a folder destroy that found the folder holding objects
                          (VMG_ECONFLICT, no fault: vsphere's check before the
                          destroy) the inventory does not show (yet, or a vApp,
                          which it does not watch): twice, and the folder is kept */
    OP_RESIZE_REFUSED, /* a reconfiguration vCenter refused with a fault that
                          trying again does not mend (InvalidArgument,
                          NoPermission, ...): the group's resizes stop until
                          its spec changes */
    OP_TEMPLATE,       /* a clone whose template cannot be used (VMG_ENOTFOUND,
                          VMG_EAMBIGUOUS, VMG_ECONFIG with no fault), or whose
                          bootstrap cannot (a fault outcome_bootstrap_block
                          knows): the group blocks */
    OP_MARK_FAILED,    /* an instance mark (PLAN_MARK) that failed otherwise: the
                          group's marks wait for their own backoff; the group is
                          not held back (a member without the mark is still the
                          group's) */
    OP_FAILED,         /* any other failure */
};

/* When the group's key is planned again. */
enum op_requeue {
    OP_REQUEUE_NONE = 0, /* not at all (shutting down) */
    OP_REQUEUE_NOW,      /* at once */
    OP_REQUEUE_BACKOFF,  /* after the group's backoff (its consecutive failures) */
};

/* The event said about it. */
enum op_event {
    OP_EVENT_NONE = 0,
    OP_EVENT_NORMAL,  /* it worked */
    OP_EVENT_WARNING, /* it failed */
};

struct op_decision {
    enum op_outcome outcome;
    /* The operation still counts as in flight until the inventory shows
     * what it did (or a deadline passes), so that nothing is done twice. */
    bool await;
    bool settle;         /* the group's consecutive failures are reset */
    bool transient;      /* a transient failure: the backoff grows, the status says why */
    bool reread;         /* the VM is read again from vCenter */
    bool unblock;        /* a clone that worked: a template block learned before ends */
    bool hidden;         /* the group's folder held objects the inventory does not show */
    bool resize_refused; /* the spec's size was refused (OP_RESIZE_REFUSED) */
    bool mark_failed;    /* OP_MARK_FAILED: the requeue is after the marks' backoff */
    /* The event said about it. An OP_TEMPLATE warning is said only when
     * the block is new or its message changed. */
    enum op_event event;
    enum op_requeue requeue;
    /* OP_TEMPLATE: the block the group takes (PLAN_BLOCK_TEMPLATE), and its
     * CamelCase reason (static); else PLAN_BLOCK_NONE and NULL. */
    enum plan_block block;
    const char *block_reason;
};

/* The faults a clone ends with when its bootstrap (controller/bootstrap.h)
 * fails before vCenter is asked. The first five only a change of the
 * Secret or the spec mends: the group blocks on them, with the fault as
 * the reason; the last two are failures, retried. */
#define OUTCOME_BOOTSTRAP_SECRET_NOT_FOUND "BootstrapSecretNotFound"
#define OUTCOME_BOOTSTRAP_KEY_NOT_FOUND "BootstrapKeyNotFound"
#define OUTCOME_BOOTSTRAP_FORBIDDEN "BootstrapSecretForbidden"
#define OUTCOME_BOOTSTRAP_INVALID "BootstrapUserDataInvalid"
#define OUTCOME_BOOTSTRAP_TOO_BIG "BootstrapUserDataTooLarge"
#define OUTCOME_BOOTSTRAP_UNREADABLE "BootstrapSecretUnreadable"
#define OUTCOME_BOOTSTRAP_NOT_STARTED "BootstrapCloneNotStarted"

/* outcome_bootstrap_block returns the CamelCase reason (static) of a
 * bootstrap fault the group blocks on, else NULL (fault NULL too). */
const char *outcome_bootstrap_block(const char *fault);

/* outcome_decide writes to *ret what the end (err 0 or a negative code;
 * fault vCenter's fault type or NULL) of an operation of kind means. It reads
 * nothing else and never fails. */
void outcome_decide(enum plan_action_kind kind, int err, const char *fault,
                    struct op_decision *ret);

#endif
