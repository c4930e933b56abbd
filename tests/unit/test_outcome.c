/* test_outcome.c: what the end of an operation means (outcome_decide), one
 * table row each: every kind of operation against success, cancellation,
 * the faults that leave things as wanted, a VM gone meanwhile, a clone of
 * unknown end, a template that cannot be used and plain failures. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "controller/outcome.h"
#include "lib/err.h"

#define NOW OP_REQUEUE_NOW
#define BACKOFF OP_REQUEUE_BACKOFF
#define NONE OP_REQUEUE_NONE

/* A row: how an operation of kind ended, and what it must mean. The flags
 * are "await settle transient reread unblock", one letter each, '-' for
 * false: e.g. "as---" is await and settle. */
struct tcase {
    const char *name;
    enum plan_action_kind kind;
    int err;
    const char *fault;
    enum op_outcome outcome;
    const char *flags;
    enum op_event event;
    enum op_requeue requeue;
    const char *block_reason;
};

static const struct tcase cases[] = {
    /* Success: awaited in the cache, failures reset, a Normal event, planned again now;
     * only a clone ends a template block. */
    {"create folder ok", PLAN_CREATE_FOLDER, 0, NULL, OP_DONE, "as---", OP_EVENT_NORMAL, NOW, NULL},
    {"delete folder ok", PLAN_DESTROY_FOLDER, 0, NULL, OP_DONE, "as---", OP_EVENT_NORMAL, NOW,
     NULL},
    {"clone ok", PLAN_CLONE, 0, NULL, OP_DONE, "as--u", OP_EVENT_NORMAL, NOW, NULL},
    {"power on ok", PLAN_POWER_ON, 0, NULL, OP_DONE, "as---", OP_EVENT_NORMAL, NOW, NULL},
    {"power off ok", PLAN_POWER_OFF, 0, NULL, OP_DONE, "as---", OP_EVENT_NORMAL, NOW, NULL},
    {"reconfigure ok", PLAN_RECONFIGURE, 0, NULL, OP_DONE, "as---", OP_EVENT_NORMAL, NOW, NULL},
    {"delete VM ok", PLAN_DESTROY_VM, 0, NULL, OP_DONE, "as---", OP_EVENT_NORMAL, NOW, NULL},
    /* A mark is housekeeping: awaited, but no event, and the group's failures stay. */
    {"mark ok", PLAN_MARK, 0, NULL, OP_DONE, "a----", OP_EVENT_NONE, NOW, NULL},
    /* Shutting down: nothing, whatever the fault. */
    {"clone canceled", PLAN_CLONE, VMG_ECANCELED, NULL, OP_CANCELED, "-----", OP_EVENT_NONE, NONE,
     NULL},
    {"power on canceled", PLAN_POWER_ON, VMG_ECANCELED, "InvalidPowerState", OP_CANCELED, "-----",
     OP_EVENT_NONE, NONE, NULL},
    {"delete VM canceled", PLAN_DESTROY_VM, VMG_ECANCELED, NULL, OP_CANCELED, "-----",
     OP_EVENT_NONE, NONE, NULL},
    /* Failed, but as wanted: awaited, failures reset, no event. */
    {"clone name taken", PLAN_CLONE, VMG_EFAULT, "DuplicateName", OP_AS_WANTED, "as---",
     OP_EVENT_NONE, NOW, NULL},
    {"folder there", PLAN_CREATE_FOLDER, VMG_EFAULT, "DuplicateName", OP_AS_WANTED, "as---",
     OP_EVENT_NONE, NOW, NULL},
    {"already on", PLAN_POWER_ON, VMG_EFAULT, "InvalidPowerState", OP_AS_WANTED, "as---",
     OP_EVENT_NONE, NOW, NULL},
    {"already off", PLAN_POWER_OFF, VMG_EFAULT, "InvalidPowerState", OP_AS_WANTED, "as---",
     OP_EVENT_NONE, NOW, NULL},
    {"VM already gone", PLAN_DESTROY_VM, VMG_EFAULT, "ManagedObjectNotFound", OP_AS_WANTED, "as---",
     OP_EVENT_NONE, NOW, NULL},
    {"VM not found", PLAN_DESTROY_VM, VMG_ENOTFOUND, NULL, OP_AS_WANTED, "as---", OP_EVENT_NONE,
     NOW, NULL},
    {"folder already gone", PLAN_DESTROY_FOLDER, VMG_EFAULT, "ManagedObjectNotFound", OP_AS_WANTED,
     "as---", OP_EVENT_NONE, NOW, NULL},
    {"folder not found", PLAN_DESTROY_FOLDER, VMG_ENOTFOUND, NULL, OP_AS_WANTED, "as---",
     OP_EVENT_NONE, NOW, NULL},
    /* The same faults where they do not mean "as wanted": failures. */
    {"clone name held by what is not a VM", PLAN_CLONE, VMG_ECONFLICT, "DuplicateName", OP_FAILED,
     "--t--", OP_EVENT_WARNING, BACKOFF, NULL},
    {"folder name held by what is not a folder", PLAN_CREATE_FOLDER, VMG_ECONFLICT, "DuplicateName",
     OP_FAILED, "--t--", OP_EVENT_WARNING, BACKOFF, NULL},
    {"delete VM InvalidPowerState", PLAN_DESTROY_VM, VMG_EFAULT, "InvalidPowerState", OP_FAILED,
     "--t--", OP_EVENT_WARNING, BACKOFF, NULL},
    {"create folder not found", PLAN_CREATE_FOLDER, VMG_ENOTFOUND, NULL, OP_FAILED, "--t--",
     OP_EVENT_WARNING, BACKOFF, NULL},
    /* The VM went meanwhile: read again, planned again after the backoff,
     * which does not grow (not transient). */
    {"power on, VM gone", PLAN_POWER_ON, VMG_EFAULT, "ManagedObjectNotFound", OP_VM_GONE, "---r-",
     OP_EVENT_NONE, BACKOFF, NULL},
    {"power off, VM gone", PLAN_POWER_OFF, VMG_EFAULT, "ManagedObjectNotFound", OP_VM_GONE, "---r-",
     OP_EVENT_NONE, BACKOFF, NULL},
    {"reconfigure, VM gone", PLAN_RECONFIGURE, VMG_EFAULT, "ManagedObjectNotFound", OP_VM_GONE,
     "---r-", OP_EVENT_NONE, BACKOFF, NULL},
    {"clone, ManagedObjectNotFound", PLAN_CLONE, VMG_EFAULT, "ManagedObjectNotFound", OP_FAILED,
     "--t--", OP_EVENT_WARNING, BACKOFF, NULL},
    /* A clone of unknown end: awaited, and a transient failure meanwhile. */
    {"clone unknown", PLAN_CLONE, VMG_EUNKNOWN, NULL, OP_UNSURE, "a-t--", OP_EVENT_NONE, BACKOFF,
     NULL},
    {"clone transport", PLAN_CLONE, VMG_ETRANSPORT, NULL, OP_UNSURE, "a-t--", OP_EVENT_NONE,
     BACKOFF, NULL},
    {"clone transport with fault", PLAN_CLONE, VMG_ETRANSPORT, "SystemError", OP_FAILED, "--t--",
     OP_EVENT_WARNING, BACKOFF, NULL},
    {"power on transport", PLAN_POWER_ON, VMG_ETRANSPORT, NULL, OP_FAILED, "--t--",
     OP_EVENT_WARNING, BACKOFF, NULL},
    {"delete VM unknown", PLAN_DESTROY_VM, VMG_EUNKNOWN, NULL, OP_FAILED, "--t--", OP_EVENT_WARNING,
     BACKOFF, NULL},
    /* A template that cannot be used: a block with its reason, planned again now. */
    {"template missing", PLAN_CLONE, VMG_ENOTFOUND, NULL, OP_TEMPLATE, "-----", OP_EVENT_WARNING,
     NOW, "TemplateNotFound"},
    {"template ambiguous", PLAN_CLONE, VMG_EAMBIGUOUS, NULL, OP_TEMPLATE, "-----", OP_EVENT_WARNING,
     NOW, "TemplateAmbiguous"},
    {"template refused", PLAN_CLONE, VMG_ECONFIG, NULL, OP_TEMPLATE, "-----", OP_EVENT_WARNING, NOW,
     "TemplateRefused"},
    /* A bootstrap that cannot be used (controller/bootstrap.h): a block
     * with its own reason; its Secret unreadable otherwise: a failure. */
    {"bootstrap secret missing", PLAN_CLONE, VMG_ENOTFOUND, "BootstrapSecretNotFound", OP_TEMPLATE,
     "-----", OP_EVENT_WARNING, NOW, "BootstrapSecretNotFound"},
    {"bootstrap key missing", PLAN_CLONE, VMG_ENOTFOUND, "BootstrapKeyNotFound", OP_TEMPLATE,
     "-----", OP_EVENT_WARNING, NOW, "BootstrapKeyNotFound"},
    {"bootstrap forbidden", PLAN_CLONE, VMG_EFORBIDDEN, "BootstrapSecretForbidden", OP_TEMPLATE,
     "-----", OP_EVENT_WARNING, NOW, "BootstrapSecretForbidden"},
    {"bootstrap too large", PLAN_CLONE, VMG_ETOOBIG, "BootstrapUserDataTooLarge", OP_TEMPLATE,
     "-----", OP_EVENT_WARNING, NOW, "BootstrapUserDataTooLarge"},
    {"bootstrap unreadable", PLAN_CLONE, VMG_ETRANSPORT, "BootstrapSecretUnreadable", OP_FAILED,
     "--t--", OP_EVENT_WARNING, BACKOFF, NULL},
    {"clone not found with fault", PLAN_CLONE, VMG_ENOTFOUND, "InvalidArgument", OP_FAILED, "--t--",
     OP_EVENT_WARNING, BACKOFF, NULL},
    /* Anything else: a failure, with its Warning, after the backoff. */
    {"clone fault", PLAN_CLONE, VMG_EFAULT, "InsufficientResourcesFault", OP_FAILED, "--t--",
     OP_EVENT_WARNING, BACKOFF, NULL},
    {"power on forbidden", PLAN_POWER_ON, VMG_EFORBIDDEN, "NoPermission", OP_FAILED, "--t--",
     OP_EVENT_WARNING, BACKOFF, NULL},
    /* A reconfiguration refused for the size itself (its arguments, the
     * right to reconfigure): the group's resizes stop until the spec
     * changes, said once, planned again now (to power on the VM off for
     * it); any other fault is a failure tried again. */
    {"reconfigure refused", PLAN_RECONFIGURE, VMG_EFAULT, "InvalidArgument", OP_RESIZE_REFUSED,
     "-----", OP_EVENT_WARNING, NOW, NULL},
    {"reconfigure forbidden", PLAN_RECONFIGURE, VMG_EFORBIDDEN, "NoPermission", OP_RESIZE_REFUSED,
     "-----", OP_EVENT_WARNING, NOW, NULL},
    {"reconfigure size not supported", PLAN_RECONFIGURE, VMG_EFAULT, "NumVirtualCpusNotSupported",
     OP_RESIZE_REFUSED, "-----", OP_EVENT_WARNING, NOW, NULL},
    {"reconfigure DuplicateName", PLAN_RECONFIGURE, VMG_EFAULT, "DuplicateName", OP_FAILED, "--t--",
     OP_EVENT_WARNING, BACKOFF, NULL},
    {"reconfigure, host not answering", PLAN_RECONFIGURE, VMG_EFAULT, "HostCommunication",
     OP_FAILED, "--t--", OP_EVENT_WARNING, BACKOFF, NULL},
    {"reconfigure, resources short", PLAN_RECONFIGURE, VMG_EFAULT, "InsufficientResourcesFault",
     OP_FAILED, "--t--", OP_EVENT_WARNING, BACKOFF, NULL},
    {"reconfigure powered on meanwhile", PLAN_RECONFIGURE, VMG_EFAULT, "InvalidPowerState",
     OP_FAILED, "--t--", OP_EVENT_WARNING, BACKOFF, NULL},
    {"reconfigure busy", PLAN_RECONFIGURE, VMG_EFAULT, "TaskInProgress", OP_FAILED, "--t--",
     OP_EVENT_WARNING, BACKOFF, NULL},
    {"reconfigure transport", PLAN_RECONFIGURE, VMG_ETRANSPORT, NULL, OP_FAILED, "--t--",
     OP_EVENT_WARNING, BACKOFF, NULL},
    {"reconfigure fault", PLAN_RECONFIGURE, VMG_EFAULT, "InvalidState", OP_FAILED, "--t--",
     OP_EVENT_WARNING, BACKOFF, NULL},
    /* A folder that vsphere found holding objects right before its destroy:
     * no event (the planner's FolderKept says it), looked at again after the
     * backoff. */
    {"delete folder holding objects", PLAN_DESTROY_FOLDER, VMG_ECONFLICT, "", OP_HIDDEN, "-----",
     OP_EVENT_NONE, BACKOFF, NULL},
    {"delete folder holding objects, no fault", PLAN_DESTROY_FOLDER, VMG_ECONFLICT, NULL, OP_HIDDEN,
     "-----", OP_EVENT_NONE, BACKOFF, NULL},
    {"clone conflict is no folder's", PLAN_CLONE, VMG_ECONFLICT, "", OP_FAILED, "--t--",
     OP_EVENT_WARNING, BACKOFF, NULL},
    {"delete folder not empty", PLAN_DESTROY_FOLDER, VMG_EFAULT, "ResourceInUse", OP_FAILED,
     "--t--", OP_EVENT_WARNING, BACKOFF, NULL},
    {"delete VM no memory", PLAN_DESTROY_VM, -ENOMEM, NULL, OP_FAILED, "--t--", OP_EVENT_WARNING,
     BACKOFF, NULL},
    /* A mark that failed is said and tried again after the marks' own
     * backoff, without holding the group back (no transient); one whose VM
     * went is read again. */
    {"mark refused", PLAN_MARK, VMG_EFORBIDDEN, "NoPermission", OP_MARK_FAILED, "-----",
     OP_EVENT_WARNING, BACKOFF, NULL},
    {"mark transport", PLAN_MARK, VMG_ETRANSPORT, NULL, OP_MARK_FAILED, "-----", OP_EVENT_WARNING,
     BACKOFF, NULL},
    {"mark, VM busy", PLAN_MARK, VMG_EFAULT, "TaskInProgress", OP_MARK_FAILED, "-----",
     OP_EVENT_WARNING, BACKOFF, NULL},
    {"mark, VM gone", PLAN_MARK, VMG_EFAULT, "ManagedObjectNotFound", OP_VM_GONE, "---r-",
     OP_EVENT_NONE, BACKOFF, NULL},
    {"mark canceled", PLAN_MARK, VMG_ECANCELED, NULL, OP_CANCELED, "-----", OP_EVENT_NONE, NONE,
     NULL},
};

static void check(const struct tcase *c)
{
    struct op_decision d;
    char flags[6];

    memset(&d, 0x5a, sizeof(d)); /* every field is written */
    outcome_decide(c->kind, c->err, c->fault, &d);
    snprintf(flags, sizeof(flags), "%c%c%c%c%c", d.await ? 'a' : '-', d.settle ? 's' : '-',
             d.transient ? 't' : '-', d.reread ? 'r' : '-', d.unblock ? 'u' : '-');
    if (d.outcome != c->outcome)
        fail_msg("%s: outcome %d, want %d", c->name, d.outcome, c->outcome);
    if (strcmp(flags, c->flags) != 0)
        fail_msg("%s: flags %s, want %s", c->name, flags, c->flags);
    if (d.event != c->event)
        fail_msg("%s: event %d, want %d", c->name, d.event, c->event);
    if (d.requeue != c->requeue)
        fail_msg("%s: requeue %d, want %d", c->name, d.requeue, c->requeue);
    if (d.block != (c->outcome == OP_TEMPLATE ? PLAN_BLOCK_TEMPLATE : PLAN_BLOCK_NONE))
        fail_msg("%s: block %d", c->name, d.block);
    if (d.resize_refused != (c->outcome == OP_RESIZE_REFUSED))
        fail_msg("%s: resize_refused %d", c->name, d.resize_refused);
    if (d.hidden != (c->outcome == OP_HIDDEN))
        fail_msg("%s: hidden %d", c->name, d.hidden);
    if (d.mark_failed != (c->outcome == OP_MARK_FAILED))
        fail_msg("%s: mark_failed %d", c->name, d.mark_failed);
    if ((d.block_reason == NULL) != (c->block_reason == NULL) ||
        (d.block_reason && strcmp(d.block_reason, c->block_reason) != 0))
        fail_msg("%s: block reason %s, want %s", c->name, d.block_reason ? d.block_reason : "none",
                 c->block_reason ? c->block_reason : "none");
}

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check(&cases[i]);
}

/* Rules that hold for every kind of operation. */
static void test_every_kind(void **state)
{
    static const enum plan_action_kind kinds[] = {
        PLAN_CREATE_FOLDER, PLAN_DESTROY_FOLDER, PLAN_CLONE,      PLAN_POWER_ON,
        PLAN_POWER_OFF,     PLAN_RECONFIGURE,    PLAN_DESTROY_VM,
    };
    (void)state;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        struct op_decision d;

        /* Canceled means nothing, whatever else came with it. */
        outcome_decide(kinds[i], VMG_ECANCELED, "ManagedObjectNotFound", &d);
        assert_int_equal(d.outcome, OP_CANCELED);
        assert_int_equal(d.requeue, OP_REQUEUE_NONE);
        assert_false(d.await || d.settle || d.transient || d.reread || d.unblock);
        assert_int_equal(d.event, OP_EVENT_NONE);
        /* Success ignores a fault string that came with it. */
        outcome_decide(kinds[i], 0, "DuplicateName", &d);
        assert_int_equal(d.outcome, OP_DONE);
        /* A failure always plans again, and a transient one after the backoff. */
        outcome_decide(kinds[i], VMG_EHTTP, NULL, &d);
        assert_int_equal(d.outcome, OP_FAILED);
        assert_true(d.transient);
        assert_int_equal(d.requeue, OP_REQUEUE_BACKOFF);
        assert_null(d.block_reason);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_every_kind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
