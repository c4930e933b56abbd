/* test_vcworld.c: what of vCenter's identity a message may not show to
 * tenants (vcworld's names_vcenter): the user in any of the forms vCenter
 * and its directory write it, the URL and the host; and what the log says
 * of the inventory watch's changes of state (inventory_line) and of the
 * task tracker's notes (tracker_line). */
#include "tests/unit/unit.h"

#include <stdbool.h>

#include "controller/vcworld.h"
#include "lib/log.h"
#include "vsphere/inventory.h"
#include "vsphere/ops.h"

#define URL "https://vc.example.com:443/sdk"

static bool names(const char *msg, const char *user)
{
    return vcworld_testing_names_vcenter(msg, user, URL, "vc.example.com");
}

static void test_user_url_and_host(void **state)
{
    (void)state;
    assert_true(
        names("login as administrator@vsphere.local failed", "administrator@vsphere.local"));
    assert_true(names("POST " URL ": 503", "svc@corp"));
    assert_true(names("Failed to connect to vc.example.com port 443", "svc@corp"));
    assert_false(names("template \"web\" not found in /DC0/vm", "administrator@vsphere.local"));
    assert_false(names("", "administrator@vsphere.local"));
    assert_false(names(NULL, "administrator@vsphere.local"));
}

/* vCenter and its identity sources write one user several ways: the name
 * alone, DOMAIN\name, another case. Each is recognised. */
static void test_user_other_forms(void **state)
{
    (void)state;
    assert_true(names("Cannot complete login due to an incorrect user name or password "
                      "(Administrator)",
                      "administrator@vsphere.local"));
    assert_true(
        names("permission denied for VSPHERE.LOCAL\\Administrator", "administrator@vsphere.local"));
    assert_true(names("user ADMINISTRATOR@VSPHERE.LOCAL is locked", "administrator@vsphere.local"));
    assert_true(names("user svc-vmg@corp.example has no privilege", "CORP\\svc-vmg"));
    assert_true(names("login of corp\\SVC-VMG refused", "CORP\\svc-vmg"));
    assert_true(names("host VC.EXAMPLE.COM refused", "svc@corp"));
    /* A name part of fewer than 3 characters is too common to look for. */
    assert_false(names("a bad template in /DC0/vm", "ab@corp"));
}

/* line_of returns what the log says of the change from was to st, ""
 * for nothing, and the level in *level. */
static const char *line_of(const struct vs_inventory_status *was, bool was_synced,
                           const struct vs_inventory_status *st, int *level)
{
    static char line[1024];
    static const struct vs_placement p = {.root_path = "/DC0/vm/vm-operator",
                                          .pool_path = "/DC0/host/DC0_C0/Resources"};

    line[0] = '\0';
    *level = -1;
    if (!vcworld_testing_inventory_line(was, was_synced, st, &p, level, line, sizeof(line)))
        line[0] = '\0';
    return line;
}

/* A long poll kept past its timeout (vCenter answering CurrentTime): a
 * warning each time, saying how long and that the last state is served
 * (or that the watch is not synced yet); one line when it answers; none
 * for an answer on time. */
static void test_late_long_poll_lines(void **state)
{
    struct vs_inventory_status synced = {.synced = true, .message = "", .objects = 7};
    struct vs_inventory_status late = synced, starting = {.message = ""};
    int level;

    (void)state;
    late.late_ms = 185400;
    assert_string_equal(line_of(&synced, true, &late, &level),
                        "inventory: vCenter has not answered the long poll in 185 s, but answers "
                        "CurrentTime: waiting for it (vCenter is computing the changes), the last "
                        "state served meanwhile");
    assert_int_equal(level, VMG_LOG_WARN);
    assert_string_equal(line_of(&late, true, &synced, &level),
                        "inventory: the long poll answered, late");
    assert_int_equal(level, VMG_LOG_INFO);
    assert_string_equal(line_of(&synced, true, &synced, &level), "");

    /* The first full state late: not synced until it answers; once it
     * has, the watch says what it watches. */
    starting.late_ms = 61000;
    assert_non_null(
        strstr(line_of(&(struct vs_inventory_status){.message = ""}, false, &starting, &level),
               "in 61 s, but answers CurrentTime: waiting for it (vCenter is "
               "computing the changes), not synced until it answers"));
    assert_string_equal(line_of(&starting, false, &synced, &level),
                        "watching /DC0/vm/vm-operator (7 objects); new VMs go to pool "
                        "/DC0/host/DC0_C0/Resources");
}

/* A long poll lost and retried; a rebuild; an unsynced watch: each said
 * once, at its level. */
static void test_retry_rebuild_and_failure_lines(void **state)
{
    struct vs_inventory_status synced = {.synced = true, .message = "", .objects = 7};
    struct vs_inventory_status retrying = {.synced = true,
                                           .retrying = true,
                                           .err = -10004,
                                           .message = "vCenter WaitForUpdatesEx failed: timed out",
                                           .retry_in_ms = 500};
    struct vs_inventory_status rebuilding = {
        .synced = true, .rebuilding = true, .message = "the vCenter session was renewed"};
    struct vs_inventory_status down = {.err = -10004, .message = "connection refused"};
    int level;

    (void)state;
    assert_string_equal(line_of(&synced, true, &retrying, &level),
                        "inventory: vCenter WaitForUpdatesEx failed: timed out; trying the same "
                        "long poll again in 500 ms, the last state served meanwhile");
    assert_int_equal(level, VMG_LOG_WARN);
    assert_string_equal(line_of(&retrying, true, &synced, &level),
                        "inventory: the long poll answered again");
    assert_string_equal(line_of(&synced, true, &rebuilding, &level),
                        "inventory: the vCenter session was renewed; rebuilding the watch, the "
                        "last state served meanwhile");
    assert_int_equal(level, VMG_LOG_INFO);
    assert_string_equal(line_of(&rebuilding, true, &rebuilding, &level), "");
    assert_string_equal(line_of(&rebuilding, true, &synced, &level),
                        "inventory: watch rebuilt (7 objects)");
    assert_string_equal(line_of(&retrying, true, &down, &level), "inventory: connection refused");
    assert_int_equal(level, VMG_LOG_WARN);
}

/* tracker_of returns what the log says of note t, and its level. */
static const char *tracker_of(const struct vs_tracker_note *t, int *level)
{
    static char line[1024];

    vcworld_testing_tracker_line(t, "clone", "web-0", "task-12", level, line, sizeof(line));
    return line;
}

/* The task tracker's long poll late (a warning each time, saying how late
 * and how many tasks are read), answered (one line), and an end vCenter
 * did not report (a warning naming the operation and its task). */
static void test_tracker_lines(void **state)
{
    struct vs_tracker_note late = {VS_TRACKER_LATE, 60, 30500, 3, NULL};
    struct vs_tracker_note answered = {VS_TRACKER_ANSWERED, 60, 42900, 0, NULL};
    struct vs_tracker_note missed = {VS_TRACKER_MISSED, 60, 0, 0, NULL};
    int level;

    (void)state;
    assert_string_equal(tracker_of(&late, &level),
                        "tasks: vCenter has not answered the task long poll 30 s past its 60 s "
                        "wait; reading the states of the 3 tasks it follows meanwhile");
    assert_int_equal(level, VMG_LOG_WARN);
    assert_string_equal(tracker_of(&answered, &level),
                        "tasks: the task long poll answered, 42 s past its 60 s wait");
    assert_int_equal(level, VMG_LOG_INFO);
    assert_string_equal(tracker_of(&missed, &level),
                        "tasks: clone web-0: vCenter did not report the end of task-12 to the task "
                        "long poll; a read found it");
    assert_int_equal(level, VMG_LOG_WARN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_user_url_and_host),
        cmocka_unit_test(test_user_other_forms),
        cmocka_unit_test(test_late_long_poll_lines),
        cmocka_unit_test(test_retry_rebuild_and_failure_lines),
        cmocka_unit_test(test_tracker_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
