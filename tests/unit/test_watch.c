/* test_watch.c: the inventory's watch (vsphere/inventory.h) against a fake
 * vCenter (lib/server over TLS on the same loop) that answers the placement
 * by inventory paths, makes a collector and its filter, answers the first
 * long poll with a full state and holds the next ones until the test
 * answers them, or never answers them (with the CurrentTime the session
 * asks then unanswered too, as when vCenter stops answering: the long poll
 * is lost to the transport; or answered, as when vCenter is computing a
 * large answer: the long poll is waited for).
 *
 * What a user sees of it: a long poll lost once keeps the watch synced
 * (retrying, the cache served) and is sent again with the same version, so
 * no group's status flips; lost twice in a row, the watch is unsynced until
 * the long poll answers again, on the same collector; a collector gone
 * rebuilds the watch from a full state, whose difference is reported; a
 * session vCenter ended under a long poll rebuilds it with no unsynced
 * state between (the login was the whole outage), and says so, once more
 * when the session ends again under the rebuild's CreateFilter, while
 * sessions lost faster than a rebuild ends unsync it; a long poll that
 * answers late while vCenter is alive is waited for, with no retry and
 * nothing said; and
 * while the rest of a truncated UpdateSet is retried, what the operator's
 * own tasks did (a VM destroyed, one powered off) is not undone by that
 * older rest: the destroyed VM stays gone, and the other is read back. */
#include "tests/unit/unit.h"
#include "tests/unit/vcenter.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "lib/err.h"
#include "lib/http.h"
#include "lib/server.h"
#include "vsphere/inventory.h"

#define MAXSTATES 32

/* ---- The fake vCenter ---- */

struct state_copy {
    bool synced, retrying, rebuilding;
    uint64_t late_ms;
    int err;
    char message[128];
};

struct fake {
    uv_loop_t loop;
    struct unit_vcenter vc;
    vs_session *s;
    vs_inventory *inv;
    uv_timer_t guard;
    bool timed_out;

    /* behaviour */
    int mute;            /* the next long polls (with a version) never answered */
    bool silent;         /* CurrentTime never answered (vCenter stopped answering) */
    int times;           /* CurrentTime asked (under an overdue long poll) */
    bool collector_gone; /* long polls: ManagedObjectNotFound (the collector is gone) */
    /* The next filter_lost CreateFilter calls find the session ended
     * (NotAuthenticated), and each one's re-send after the login the old
     * session's collector gone (ManagedObjectNotFound). */
    int filter_lost;
    bool filter_resent;
    bool without_vm42;   /* a full state no longer holds vm-42 */
    const char *power43; /* what a read of vm-43 says (NULL: poweredOn) */
    int fail43;          /* the next reads of vm-43 fail (a SystemError fault) */
    /* state */
    int pc_gen; /* the collector is "pc-<gen>" */
    vmg_server_req *held;
    char held_version[128];
    /* what the server saw */
    struct unit_calls calls;
    /* what the client said */
    struct state_copy states[MAXSTATES];
    int nstates;
    int removed_42;     /* the cache reported vm-42 removed, of group ns_web */
    bool ever_unsynced; /* after the first synced state */
};

/* The inventory paths the placement gives (all absolute). */
static const struct {
    const char *path, *type, *value;
} paths[] = {
    {"DC0", "Datacenter", "datacenter-2"},
    {"DC0/vm/vm-operator", "Folder", "group-38"},
    {"DC0/host/C0/Resources", "ResourcePool", "resgroup-9"},
};

#define CHANGE(name, type, val)                                                                    \
    "<changeSet><name>" name "</name><op>assign</op><val xsi:type=\"" type "\">" val               \
    "</val></changeSet>"
#define PARENT(folder)                                                                             \
    "<changeSet><name>parent</name><op>assign</op><val type=\"Folder\" "                           \
    "xsi:type=\"ManagedObjectReference\">" folder "</val></changeSet>"
#define VM_ENTER(ref, name, power)                                                                 \
    "<objectSet><kind>enter</kind><obj type=\"VirtualMachine\">" ref                               \
    "</obj>" CHANGE("name", "xsd:string", name) PARENT("group-41")                                 \
        CHANGE("runtime.powerState", "VirtualMachinePowerState", power)                            \
            CHANGE("config.hardware.numCPU", "xsd:int", "1")                                       \
                CHANGE("config.hardware.memoryMB", "xsd:int", "512")                               \
                    CHANGE("config.template", "xsd:boolean", "false") "</objectSet>"
#define POWER(kind, ref, power)                                                                    \
    "<objectSet><kind>" kind "</kind><obj type=\"VirtualMachine\">" ref                            \
    "</obj>" CHANGE("runtime.powerState", "VirtualMachinePowerState", power) "</objectSet>"

/* A full state: the group folder ns_web with web-0 (vm-42, unless
 * without_vm42) and web-1 (vm-43) in it. */
static void full_state(struct fake *f, vmg_server_req *r)
{
    static const char folder[] =
        "<objectSet><kind>enter</kind><obj type=\"Folder\">group-41</obj>" CHANGE(
            "name", "xsd:string", "ns_web") PARENT("group-38") "</objectSet>";
    static const char web0[] = VM_ENTER("vm-42", "web-0", "poweredOn");
    static const char web1[] = VM_ENTER("vm-43", "web-1", "poweredOn");

    unit_soap_reply(
        r, 200,
        "<WaitForUpdatesExResponse xmlns=\"urn:vim25\"><returnval><version>1</version>"
        "<filterSet><filter type=\"PropertyFilter\">filter-%d</filter>%s%s%s</filterSet>"
        "</returnval></WaitForUpdatesExResponse>",
        f->pc_gen, folder, f->without_vm42 ? "" : web0, web1);
}

/* collector_gone answers that the collector f made last is gone. */
static void collector_gone(const struct fake *f, vmg_server_req *r)
{
    unit_soap_reply(r, 500,
                    "<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>gone"
                    "</faultstring><detail><ManagedObjectNotFoundFault xmlns=\"urn:vim25\" "
                    "xsi:type=\"ManagedObjectNotFound\"><obj type=\"PropertyCollector\">pc-%d"
                    "</obj></ManagedObjectNotFoundFault></detail></soapenv:Fault>",
                    f->pc_gen);
}

static void on_abort(void *data, vmg_server_req *r)
{
    struct fake *f = data;

    if (f->held == r)
        f->held = NULL;
    vmg_server_respond(r, 500, "text/plain", "gone", 4);
}

static void handler(void *data, vmg_server_req *r)
{
    struct fake *f = data;
    size_t len;
    const char *body = vmg_server_req_body(r, &len);
    char a[128];

    if (strstr(body, "<CurrentTime>")) {
        f->times++;
        if (f->silent) {
            vmg_server_req_on_abort(r, on_abort, f); /* the client's timeout ends it */
            return;
        }
    }
    if (unit_soap_session(r, body))
        return;
    if (strstr(body, "<FindByInventoryPath>")) {
        unit_between(body, "<inventoryPath>", "<", a, sizeof(a));
        unit_calls_add(&f->calls, "FindByInventoryPath", a);
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
            if (strcmp(paths[i].path, a) == 0) {
                unit_soap_reply(
                    r, 200,
                    "<FindByInventoryPathResponse xmlns=\"urn:vim25\"><returnval type=\"%s\">%s"
                    "</returnval></FindByInventoryPathResponse>",
                    paths[i].type, paths[i].value);
                return;
            }
        unit_soap_reply(
            r, 200,
            "<FindByInventoryPathResponse xmlns=\"urn:vim25\"></FindByInventoryPathResponse>");
    } else if (strstr(body, "<RetrievePropertiesEx>") && strstr(body, "datacenter-2")) {
        unit_calls_add(&f->calls, "RetrievePropertiesEx", "datacenter-2");
        unit_soap_reply(r, 200,
                        "<RetrievePropertiesExResponse xmlns=\"urn:vim25\"><returnval><objects>"
                        "<obj type=\"Datacenter\">datacenter-2</obj>"
                        "<propSet><name>name</name><val xsi:type=\"xsd:string\">DC0</val></propSet>"
                        "<propSet><name>parent</name><val type=\"Folder\" "
                        "xsi:type=\"ManagedObjectReference\">group-d1</val></propSet>"
                        "<propSet><name>vmFolder</name><val type=\"Folder\" "
                        "xsi:type=\"ManagedObjectReference\">group-3</val></propSet>"
                        "<propSet><name>hostFolder</name><val type=\"Folder\" "
                        "xsi:type=\"ManagedObjectReference\">group-4</val></propSet>"
                        "</objects></returnval></RetrievePropertiesExResponse>");
    } else if (strstr(body, "<RetrievePropertiesEx>") && strstr(body, ">vm-43<")) {
        unit_calls_add(&f->calls, "RetrievePropertiesEx", "vm-43");
        if (f->fail43 > 0) {
            f->fail43--;
            unit_soap_reply(r, 500,
                            "<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>"
                            "busy</faultstring><detail><SystemErrorFault xmlns=\"urn:vim25\" "
                            "xsi:type=\"SystemError\"><reason>busy</reason></SystemErrorFault>"
                            "</detail></soapenv:Fault>");
            return;
        }
        unit_soap_reply(
            r, 200,
            "<RetrievePropertiesExResponse xmlns=\"urn:vim25\"><returnval><objects>"
            "<obj type=\"VirtualMachine\">vm-43</obj>"
            "<propSet><name>name</name><val xsi:type=\"xsd:string\">web-1</val></propSet>"
            "<propSet><name>parent</name><val type=\"Folder\" "
            "xsi:type=\"ManagedObjectReference\">group-41</val></propSet>"
            "<propSet><name>runtime.powerState</name>"
            "<val xsi:type=\"VirtualMachinePowerState\">%s</val></propSet>"
            "</objects></returnval></RetrievePropertiesExResponse>",
            f->power43 ? f->power43 : "poweredOn");
    } else if (strstr(body, "<CreatePropertyCollector>")) {
        f->pc_gen++;
        unit_calls_add(&f->calls, "CreatePropertyCollector", "");
        unit_soap_reply(
            r, 200,
            "<CreatePropertyCollectorResponse xmlns=\"urn:vim25\"><returnval "
            "type=\"PropertyCollector\">pc-%d</returnval></CreatePropertyCollectorResponse>",
            f->pc_gen);
    } else if (strstr(body, "<DestroyPropertyCollector>")) {
        unit_calls_add(&f->calls, "DestroyPropertyCollector", "");
        unit_soap_reply(r, 200,
                        "<DestroyPropertyCollectorResponse xmlns=\"urn:vim25\">"
                        "</DestroyPropertyCollectorResponse>");
    } else if (strstr(body, "<CreateFilter>")) {
        unit_calls_add(&f->calls, "CreateFilter", "");
        if (f->filter_resent) {
            f->filter_resent = false;
            collector_gone(f, r);
            return;
        }
        if (f->filter_lost > 0) {
            f->filter_lost--;
            f->filter_resent = true;
            unit_soap_fixture(r, 500, "fault_not_authenticated.resp.xml");
            return;
        }
        unit_soap_reply(
            r, 200,
            "<CreateFilterResponse xmlns=\"urn:vim25\"><returnval type=\"PropertyFilter\">"
            "filter-%d</returnval></CreateFilterResponse>",
            f->pc_gen);
    } else if (strstr(body, "<WaitForUpdatesEx>")) {
        unit_between(body, "<version>", "</version>", a, sizeof(a));
        unit_calls_add(&f->calls, "WaitForUpdatesEx", a[0] ? a : "-");
        if (f->collector_gone) {
            collector_gone(f, r);
            f->collector_gone = false;
            return;
        }
        if (!a[0]) {
            full_state(f, r);
            return;
        }
        assert_null(f->held);
        vmg_server_req_on_abort(r, on_abort, f);
        if (f->mute > 0) {
            f->mute--; /* never answered: the client's timeout ends it */
            return;
        }
        f->held = r;
        snprintf(f->held_version, sizeof(f->held_version), "%s", a);
    } else {
        unit_between(body, "<soapenv:Body><", ">", a, sizeof(a));
        unit_calls_add(&f->calls, "unexpected", a);
        vmg_server_respond(r, 404, "text/plain", "no", 2);
    }
}

/* answer answers the held long poll with version and the objectSets in
 * sets (a truncated set when truncated). */
static void answer(struct fake *f, const char *version, const char *sets, bool truncated)
{
    assert_non_null(f->held);
    unit_soap_reply(f->held, 200,
                    "<WaitForUpdatesExResponse xmlns=\"urn:vim25\"><returnval><version>%s</version>"
                    "<filterSet><filter type=\"PropertyFilter\">filter-%d</filter>%s</filterSet>%s"
                    "</returnval></WaitForUpdatesExResponse>",
                    version, f->pc_gen, sets, truncated ? "<truncated>true</truncated>" : "");
    f->held = NULL;
}

/* ---- Set-up ---- */

static void on_state(void *data, const struct vs_inventory_status *st)
{
    struct fake *f = data;

    for (int i = 0; i < f->nstates; i++)
        if (f->states[i].synced && !st->synced)
            f->ever_unsynced = true;
    if (f->nstates < MAXSTATES) {
        struct state_copy *c = &f->states[f->nstates++];
        *c =
            (struct state_copy){st->synced, st->retrying, st->rebuilding, st->late_ms, st->err, ""};
        snprintf(c->message, sizeof(c->message), "%s", st->message ? st->message : "");
    }
}

static void on_change(void *data, const struct vs_cache_event *ev)
{
    struct fake *f = data;

    if (ev->change == VS_CHANGE_REMOVED && strcmp(ev->obj->ref, "vm-42") == 0 && ev->group &&
        strcmp(ev->group, "ns_web") == 0)
        f->removed_42++;
}

static void on_guard(uv_timer_t *t)
{
    struct fake *f = t->data;

    f->timed_out = true;
    uv_stop(&f->loop);
}

static void setup(struct fake *f)
{
    struct vs_inventory_config cfg = {
        .placement = {.datacenter = "/DC0",
                      .root_folder = "/DC0/vm/vm-operator",
                      .resource_pool = "/DC0/host/C0/Resources"},
        .max_wait_seconds = 1,
        .marks = {"example.owner.uid", "example.owner.template"},
        .backoff_min_ms = 20,
        .backoff_max_ms = 40,
    };
    int e = 0;

    memset(f, 0, sizeof(*f));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    unit_vcenter_start(&f->vc, &f->loop, "fake", handler, f, 60000);
    /* Calls time out after 1 s: a long poll maxWaitSeconds + 1 s after it
     * was sent (a loaded machine must not time out the login or the
     * placement). */
    f->s = unit_vcenter_session(&f->vc, &f->loop, 1000);
    f->inv = vs_inventory_new(&f->loop, f->s, &cfg, on_change, f, &e);
    assert_non_null(f->inv);
    vs_inventory_set_state_cb(f->inv, on_state, f);
    uv_timer_init(&f->loop, &f->guard);
    f->guard.data = f;
    assert_int_equal(vs_inventory_start(f->inv), 0);
}

static void teardown(struct fake *f)
{
    vs_inventory_close(f->inv, NULL, NULL);
    vs_session_close(f->s, NULL, NULL);
    unit_vcenter_stop(&f->vc, &f->loop, &f->guard);
    for (int i = 0; i < f->calls.n; i++)
        assert_string_not_equal(f->calls.at[i], "unexpected");
}

/* spin runs the loop until cond(f) holds, failing after 10 s. */
static void spin(struct fake *f, bool (*cond)(const struct fake *f))
{
    uv_timer_start(&f->guard, on_guard, 10000, 0);
    while (!cond(f) && !f->timed_out)
        uv_run(&f->loop, UV_RUN_ONCE);
    uv_timer_stop(&f->guard);
    if (f->timed_out)
        unit_calls_dump(&f->calls);
    assert_false(f->timed_out);
}

static const struct state_copy *last_state(const struct fake *f)
{
    static const struct state_copy none = {0};

    return f->nstates ? &f->states[f->nstates - 1] : &none;
}

static bool held(const struct fake *f)
{
    return f->held != NULL;
}

static bool retrying(const struct fake *f)
{
    return last_state(f)->retrying;
}

static bool unsynced(const struct fake *f)
{
    return f->nstates > 0 && !last_state(f)->synced && last_state(f)->err != 0;
}

static bool synced(const struct fake *f)
{
    return last_state(f)->synced && !last_state(f)->retrying;
}

static bool read_43(const struct fake *f)
{
    return unit_calls_count(&f->calls, "RetrievePropertiesEx vm-43") > 0 && f->held != NULL;
}

static int want_reads; /* reads_43's count */

/* reads_43: vm-43 read want_reads times, the long poll out again. */
static bool reads_43(const struct fake *f)
{
    return unit_calls_count(&f->calls, "RetrievePropertiesEx vm-43") >= want_reads &&
           f->held != NULL;
}

/* rebuilds_said counts the states that started saying a synced rebuild
 * for why. */
static int rebuilds_said(const struct fake *f, const char *why)
{
    int n = 0;

    for (int i = 0; i < f->nstates; i++)
        if (f->states[i].synced && f->states[i].rebuilding &&
            strcmp(f->states[i].message, why) == 0 && (i == 0 || !f->states[i - 1].rebuilding))
            n++;
    return n;
}

/* power_of: vm_ref's power state in the cache ("poweredOn"); "" when it is
 * not there. */
static const char *power_of(const struct fake *f, const char *vm_ref)
{
    const struct vs_obj *o = vs_cache_get(vs_inventory_cache(f->inv), vm_ref);

    return o ? o->power_state : "";
}

/* end_session: vCenter ends the session under the held long poll, which is
 * refused (NotAuthenticated); sent again after the login, it names the
 * ended session's collector (ManagedObjectNotFound). The next filter_lost
 * CreateFilter calls meet the same. */
static void end_session(struct fake *f, int filter_lost)
{
    f->collector_gone = true;
    f->filter_lost = filter_lost;
    unit_soap_fixture(f->held, 500, "fault_not_authenticated.resp.xml");
    f->held = NULL;
}

/* start runs the watch to its first held long poll, after the full state. */
static void start(struct fake *f)
{
    spin(f, held);
    assert_true(synced(f));
    assert_string_equal(f->held_version, "1");
}

/* ---- Tests ---- */

/* The watch reads the placement, makes its collector and filter, reads the
 * full state and follows the changes, each long poll asking with the
 * version of the last answer. */
static void test_sync_and_follow(void **state)
{
    struct fake f;
    struct vim_moref folder;

    (void)state;
    setup(&f);
    start(&f);
    assert_int_equal(unit_calls_count(&f.calls, "CreatePropertyCollector"), 1);
    assert_int_equal(unit_calls_count(&f.calls, "CreateFilter"), 1);
    assert_int_equal(unit_calls_count(&f.calls, "WaitForUpdatesEx -"), 1);
    assert_int_equal(vs_inventory_folder(f.inv, "ns_web", &folder), 0);
    assert_string_equal(folder.value, "group-41");
    assert_string_equal(power_of(&f, "vm-42"), "poweredOn");

    answer(&f, "2", POWER("modify", "vm-42", "poweredOff"), false);
    spin(&f, held);
    assert_string_equal(f.held_version, "2");
    assert_string_equal(power_of(&f, "vm-42"), "poweredOff");
    assert_false(f.ever_unsynced);
    teardown(&f);
}

/* A long poll that answers after its timeout, with vCenter answering the
 * CurrentTime asked meanwhile (computing a large answer): waited for, not
 * sent again, the watch synced all along and never saying it retries, but
 * saying that the long poll is late and how late, and when it answered;
 * the late answer is applied. */
static bool said_late_twice(const struct fake *f)
{
    int n = 0;

    for (int i = 0; i < f->nstates; i++)
        n += f->states[i].late_ms != 0;
    return n >= 2;
}

static void test_late_long_poll_of_a_live_vcenter_is_kept(void **state)
{
    struct fake f;

    (void)state;
    setup(&f);
    start(&f);
    spin(&f, said_late_twice); /* 3 s and more: the timeout is 2 s */
    assert_true(f.times >= 2);
    answer(&f, "2", POWER("modify", "vm-42", "poweredOff"), false);
    spin(&f, held);
    assert_true(synced(&f));
    assert_string_equal(f.held_version, "2");
    assert_string_equal(power_of(&f, "vm-42"), "poweredOff");
    assert_int_equal(unit_calls_count(&f.calls, "WaitForUpdatesEx 1"), 1);
    for (int i = 0; i < f.nstates; i++)
        assert_false(f.states[i].retrying);
    assert_false(f.ever_unsynced);
    /* Late twice (one report per CurrentTime answered), each time longer
     * and past the 2 s timeout, then not late once answered. */
    {
        uint64_t last = 0;
        int late = 0;
        for (int i = 0; i < f.nstates; i++) {
            if (!f.states[i].late_ms)
                continue;
            assert_true(f.states[i].synced);
            assert_true(f.states[i].late_ms >= 2000);
            assert_true(f.states[i].late_ms > last);
            last = f.states[i].late_ms;
            late++;
        }
        assert_true(late >= 2 && late <= f.times);
    }
    assert_true(last_state(&f)->synced);
    assert_int_equal(last_state(&f)->late_ms, 0);
    teardown(&f);
}

/* A long poll lost once (vCenter answers neither it nor the CurrentTime
 * asked once it is overdue, and the client gives it up): the watch stays synced,
 * says it is retrying and why, serves its cache, and sends the same long
 * poll again (the same version, the same collector); its answer is applied
 * and the watch is plainly synced again. No group would see "not synced". */
static void test_one_lost_long_poll_is_retried(void **state)
{
    struct fake f;
    struct vim_moref folder;
    const struct vs_obj *vms[4];

    (void)state;
    setup(&f);
    f.mute = 1;
    f.silent = true;
    spin(&f, retrying);
    f.silent = false;
    assert_true(f.times >= 1);
    assert_true(last_state(&f)->synced);
    assert_int_equal(last_state(&f)->err, VMG_ETRANSPORT);
    assert_int_equal(vs_inventory_folder(f.inv, "ns_web", &folder), 0);
    assert_int_equal(vs_inventory_folder_vms(f.inv, "ns_web", vms, 4, NULL), 2);

    spin(&f, held);
    assert_string_equal(f.held_version, "1");
    assert_int_equal(unit_calls_count(&f.calls, "WaitForUpdatesEx 1"), 2);
    answer(&f, "2", POWER("modify", "vm-42", "poweredOff"), false);
    spin(&f, held);
    assert_true(synced(&f));
    assert_string_equal(power_of(&f, "vm-42"), "poweredOff");
    assert_string_equal(f.held_version, "2");
    assert_false(f.ever_unsynced);
    assert_int_equal(unit_calls_count(&f.calls, "CreatePropertyCollector"), 1);
    assert_int_equal(unit_calls_count(&f.calls, "CreateFilter"), 1);
    assert_int_equal(unit_calls_count(&f.calls, "WaitForUpdatesEx -"), 1);
    teardown(&f);
}

/* Lost twice in a row: not synced (the cache is not served), with the
 * transport's error; the long poll is tried again on the same collector
 * with the same version, and its answer makes the watch synced again, with
 * no rebuild. */
static void test_two_lost_long_polls_unsync(void **state)
{
    struct fake f;
    struct vim_moref folder;

    (void)state;
    setup(&f);
    f.mute = 2;
    f.silent = true;
    spin(&f, retrying);
    spin(&f, unsynced);
    f.silent = false;
    assert_int_equal(last_state(&f)->err, VMG_ETRANSPORT);
    assert_false(last_state(&f)->retrying);
    assert_int_equal(vs_inventory_folder(f.inv, "ns_web", &folder), -EAGAIN);

    spin(&f, held);
    assert_string_equal(f.held_version, "1");
    answer(&f, "2", POWER("modify", "vm-43", "poweredOff"), false);
    spin(&f, held);
    assert_true(synced(&f));
    assert_string_equal(power_of(&f, "vm-43"), "poweredOff");
    assert_int_equal(vs_inventory_folder(f.inv, "ns_web", &folder), 0);
    assert_int_equal(unit_calls_count(&f.calls, "WaitForUpdatesEx 1"), 3);
    assert_int_equal(unit_calls_count(&f.calls, "CreateFilter"), 1);
    teardown(&f);
}

/* vCenter answers a long poll that the collector is gone: the watch is
 * rebuilt (a new collector and filter, a full state), and what vanished
 * meanwhile leaves the cache and is reported, once, for its group. */
static void test_collector_gone_rebuilds(void **state)
{
    struct fake f;

    (void)state;
    setup(&f);
    start(&f);
    f.collector_gone = true;
    f.without_vm42 = true;
    answer(&f, "2", "", false); /* nothing new; the next long poll is refused */
    spin(&f, held);
    assert_true(synced(&f));
    assert_int_equal(unit_calls_count(&f.calls, "CreatePropertyCollector"), 2);
    assert_int_equal(unit_calls_count(&f.calls, "CreateFilter"), 2);
    assert_int_equal(unit_calls_count(&f.calls, "WaitForUpdatesEx -"), 2);
    assert_string_equal(power_of(&f, "vm-42"), "");
    assert_int_equal(f.removed_42, 1);
    assert_string_equal(power_of(&f, "vm-43"), "poweredOn");
    teardown(&f);
}

/* vCenter ends the session while a long poll is out (NotAuthenticated): the
 * session logs in again and sends the long poll once more, which names the
 * old session's collector (ManagedObjectNotFound). The watch is rebuilt on
 * the new session from a full state, and stays synced throughout, as when
 * an answer finds the session renewed: the outage was the login alone. */
static void test_session_renewed_rebuilds_without_unsyncing(void **state)
{
    struct fake f;

    (void)state;
    setup(&f);
    start(&f);
    f.without_vm42 = true; /* destroyed meanwhile: the full state says so */
    end_session(&f, 0);
    spin(&f, held);
    assert_true(synced(&f));
    assert_false(f.ever_unsynced);
    assert_int_equal(vs_session_generation(f.s), 2); /* logged in again */
    /* The long poll refused, sent again on the new session, and the new
     * watch's (held). */
    assert_int_equal(unit_calls_count(&f.calls, "WaitForUpdatesEx 1"), 3);
    assert_int_equal(unit_calls_count(&f.calls, "CreatePropertyCollector"), 2);
    assert_int_equal(unit_calls_count(&f.calls, "CreateFilter"), 2);
    assert_int_equal(unit_calls_count(&f.calls, "WaitForUpdatesEx -"), 2);
    /* The old collector went with the old session: not destroyed. */
    assert_int_equal(unit_calls_count(&f.calls, "DestroyPropertyCollector"), 0);
    assert_string_equal(power_of(&f, "vm-42"), "");
    assert_int_equal(f.removed_42, 1);
    assert_string_equal(power_of(&f, "vm-43"), "poweredOn");
    /* The state said the rebuild and why, then its end. */
    assert_int_equal(rebuilds_said(&f, "the vCenter session was renewed"), 1);
    assert_false(last_state(&f)->rebuilding);
    assert_string_equal(last_state(&f)->message, "");
    teardown(&f);
}

/* The session is lost again while the rebuild's CreateFilter is out: sent
 * again after the login, it names the collector of the session before.
 * The watch rebuilds once more on the newest session, still synced: two
 * renewals in a row cost no unsynced state. */
static void test_session_renewed_during_rebuild_stays_synced(void **state)
{
    struct fake f;

    (void)state;
    setup(&f);
    start(&f);
    end_session(&f, 1);
    spin(&f, held);
    assert_true(synced(&f));
    assert_false(f.ever_unsynced);
    assert_int_equal(vs_session_generation(f.s), 3);
    /* The first build's; the rebuild's, lost and sent again; the second
     * rebuild's. */
    assert_int_equal(unit_calls_count(&f.calls, "CreatePropertyCollector"), 3);
    assert_int_equal(unit_calls_count(&f.calls, "CreateFilter"), 4);
    assert_int_equal(unit_calls_count(&f.calls, "WaitForUpdatesEx -"), 2);
    assert_string_equal(f.held_version, "1");
    assert_int_equal(rebuilds_said(&f, "the vCenter session was renewed"), 1);
    assert_false(last_state(&f)->rebuilding);
    teardown(&f);
}

/* Sessions lost faster than a rebuild can end: after the second renewal
 * in one rebuild the watch is unsynced (its cache could grow stale while
 * rebuilds never end), and comes back after the backoff. */
static void test_sessions_lost_faster_than_a_build_unsync(void **state)
{
    struct fake f;

    (void)state;
    setup(&f);
    start(&f);
    end_session(&f, 2);
    spin(&f, unsynced);
    assert_true(f.ever_unsynced);
    assert_int_equal(last_state(&f)->err, VMG_EFAULT);
    assert_false(last_state(&f)->rebuilding);
    spin(&f, held);
    assert_true(synced(&f));
    assert_int_equal(vs_session_generation(f.s), 4);
    assert_int_equal(unit_calls_count(&f.calls, "CreateFilter"), 6);
    teardown(&f);
}

/* The rest of a truncated UpdateSet is lost and retried; meanwhile a task
 * of the operator destroys vm-42 and another powers vm-43 off. The rest,
 * when it comes, may be older than both (it was computed with the set's
 * first part): it does not bring vm-42 back. */
static void test_truncated_rest_retried_keeps_what_tasks_did(void **state)
{
    struct fake f;
    struct vim_object_update u = {0};
    struct vim_change ch = {0};
    uint64_t mark;

    (void)state;
    setup(&f);
    start(&f);
    answer(&f, "2", POWER("modify", "vm-43", "poweredOn"), true);
    spin(&f, held);
    assert_string_equal(f.held_version, "2"); /* the rest */
    /* The rest is never answered, nor is the CurrentTime asked then: the
     * client gives it up (on_abort answers the request then). */
    f.held = NULL;
    f.silent = true;
    spin(&f, retrying);
    f.silent = false;

    /* While the retry waits: vm-42 destroyed, vm-43 powered off. */
    mark = vs_inventory_mark(f.inv);
    assert_int_equal(vim_moref_set(&u.obj, "VirtualMachine", "vm-42"), 0);
    u.kind = VIM_LEAVE;
    assert_int_equal(vs_inventory_assume(f.inv, &u, mark), 1);
    assert_string_equal(power_of(&f, "vm-42"), "");
    assert_int_equal(vim_moref_set(&u.obj, "VirtualMachine", "vm-43"), 0);
    u.kind = VIM_MODIFY;
    ch.name = "runtime.powerState";
    ch.kind = VIM_VAL_ENUM;
    ch.str = "poweredOff";
    u.changes = &ch;
    u.n_changes = 1;
    assert_int_equal(vs_inventory_assume(f.inv, &u, mark), 1);
    f.power43 = "poweredOff"; /* what vCenter says of it from now on */

    spin(&f, held);
    assert_string_equal(f.held_version, "2"); /* the rest again */
    answer(&f, "3", POWER("modify", "vm-42", "poweredOn") POWER("modify", "vm-43", "poweredOn"),
           false);
    spin(&f, held);
    assert_string_equal(f.held_version, "3");
    assert_string_equal(power_of(&f, "vm-42"), ""); /* destroyed stays destroyed */
    assert_int_equal(f.removed_42, 1);              /* reported once, when assumed */
    /* The rest said vm-43 on, which it may have said before the task: the
     * assumption holds, and a read of vm-43 decides, sent once the next
     * long poll has answered (vCenter's stream has had its say). */
    assert_string_equal(power_of(&f, "vm-43"), "poweredOff");
    answer(&f, "4", "", false);
    spin(&f, read_43);
    assert_string_equal(power_of(&f, "vm-43"), "poweredOff");
    assert_false(f.ever_unsynced);
    teardown(&f);
}

static const char *power_of(const struct fake *f, const char *vm_ref);

static bool queued_43(const struct fake *f)
{
    return vs_inventory_testing_position(f->inv, "vm-43") != SIZE_MAX;
}

static bool off_43(const struct fake *f)
{
    return strcmp(power_of(f, "vm-43"), "poweredOff") == 0;
}

/* read_fails: vm-43's n-th read out and its failure known: it is queued
 * again, not sent before a long poll answers. */
static void read_fails(struct fake *f, int n)
{
    want_reads = n;
    spin(f, reads_43);
    spin(f, queued_43);
    assert_int_equal(unit_calls_count(&f->calls, "RetrievePropertiesEx vm-43"), n);
}

/* A read of a VM that fails (vCenter busy) is not lost: it is sent again
 * once the next long poll has answered, and its answer is the VM's state;
 * one that keeps failing is given up after three reads. */
static void test_failed_read_sent_again(void **state)
{
    struct fake f;

    (void)state;
    setup(&f);
    start(&f);
    f.fail43 = 2;
    f.power43 = "poweredOff"; /* powered off by hand, the watch not saying so */
    assert_int_equal(vs_inventory_reread(f.inv, "vm-43"), 0);
    read_fails(&f, 1);
    answer(&f, "2", "", false);
    read_fails(&f, 2);
    assert_string_equal(power_of(&f, "vm-43"), "poweredOn");
    answer(&f, "3", "", false);
    want_reads = 3;
    spin(&f, reads_43);
    spin(&f, off_43);

    /* Failing for good: three reads, then none. */
    f.fail43 = 100;
    f.power43 = "poweredOn";
    assert_int_equal(vs_inventory_reread(f.inv, "vm-43"), 0);
    read_fails(&f, 4);
    answer(&f, "4", "", false);
    read_fails(&f, 5);
    answer(&f, "5", "", false);
    want_reads = 6;
    spin(&f, reads_43);
    answer(&f, "6", "", false);
    spin(&f, held);
    answer(&f, "7", "", false);
    spin(&f, held);
    assert_int_equal(unit_calls_count(&f.calls, "RetrievePropertiesEx vm-43"), 6);
    assert_string_equal(power_of(&f, "vm-43"), "poweredOff");
    assert_false(f.ever_unsynced);
    teardown(&f);
}

/* A read asked for anew (an operation found the VM's state unexpected)
 * while a failed one waits for its long poll is not held with it: it is
 * sent at once. */
static void test_read_asked_again_is_not_held(void **state)
{
    struct fake f;

    (void)state;
    setup(&f);
    start(&f);
    f.fail43 = 1;
    f.power43 = "poweredOff";
    assert_int_equal(vs_inventory_reread(f.inv, "vm-43"), 0);
    read_fails(&f, 1);
    assert_false(vs_inventory_testing_due(f.inv, "vm-43"));
    assert_int_equal(vs_inventory_reread(f.inv, "vm-43"), 0);
    want_reads = 2;
    spin(&f, reads_43);
    spin(&f, off_43);
    assert_string_equal(f.held_version, "1"); /* no long poll answered meanwhile */
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sync_and_follow),
        cmocka_unit_test(test_late_long_poll_of_a_live_vcenter_is_kept),
        cmocka_unit_test(test_one_lost_long_poll_is_retried),
        cmocka_unit_test(test_two_lost_long_polls_unsync),
        cmocka_unit_test(test_collector_gone_rebuilds),
        cmocka_unit_test(test_session_renewed_rebuilds_without_unsyncing),
        cmocka_unit_test(test_session_renewed_during_rebuild_stays_synced),
        cmocka_unit_test(test_sessions_lost_faster_than_a_build_unsync),
        cmocka_unit_test(test_truncated_rest_retried_keeps_what_tasks_did),
        cmocka_unit_test(test_failed_read_sent_again),
        cmocka_unit_test(test_read_asked_again_is_not_held),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
