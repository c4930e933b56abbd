/* test_ops.c: vCenter operations against a fake vCenter (lib/server over
 * TLS on the same loop) that runs tasks the test ends when it wants, keeps
 * PropertyCollectors, a ListView of tasks with one filter over it, and holds
 * WaitForUpdatesEx until there is something to report: the bound on
 * operations in flight and the FIFO queue, task success and failure learned
 * from the long poll, tasks added to and removed from the view, a task that
 * ended before it was in the view (reported as it enters, or read by the
 * safety net where a server does not report it: at a long poll that
 * answers empty, or one that does not answer, or when other tasks keep
 * the long poll answering), a task the
 * view does not find, the collector or the view lost, CreateFolder's
 * and a clone's DuplicateName (what holds the name, a VM read back),
 * clones with their spec and marks, a missing template,
 * cancelation and close, and what a successful operation did, as the
 * inventory's cache assumes it. */
#include "tests/unit/unit.h"
#include "tests/unit/vcenter.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <uv.h>

#include "lib/err.h"
#include "lib/http.h"
#include "lib/server.h"
#include "lib/tlsgen.h"
#include "vsphere/ops.h"

/* The mark keys the caller gives (the operator's are in controller/naming.h). */
#define MARK_UID_KEY "example.owner.uid"
#define MARK_TEMPLATE_KEY "example.owner.template"
#define MARK_INSTANCE_KEY "example.owner.instance"

#define MAXT 32
#define MAXDONE 32
#define DESTROY_HELD_MAX 8
#define MAX_NOTES 32

struct task {
    char state[16]; /* running, success, error */
    char fault[64];
    char fault_object[64]; /* "Type value": the object the fault names, "" none */
    char result[32];
    int filter;        /* in the tracker's view (its filter's number), 0 when not */
    int filter_pc;     /* the collector (pc_gen) of that view */
    bool left;         /* removed from the view since */
    char reported[16]; /* the state the long poll last reported */
    char read[16];     /* the state a RetrievePropertiesEx last answered */
    uint64_t read_ms;  /* when (uv_now), 0 before the first */
    uint64_t read_gap; /* the shortest time between two reads of it (UINT64_MAX: < 2 reads) */
};

struct fake {
    uv_loop_t loop;
    struct unit_vcenter vc; /* the fake vCenter and the client */
    vs_session *s;
    vs_ops *ops;
    vs_cache *cache;    /* when set, each success's result is assumed in it */
    int assumed;        /* vs_op_testing_assume's answers, summed */
    char read_back[32]; /* the last VM read back (vs_op_testing_read_back) */
    uv_timer_t guard;
    bool timed_out;

    /* behaviour */
    bool instant;                /* tasks end as they are made */
    bool quiet_new_filters;      /* a task added to the view is not reported */
    bool mute_polls;             /* the long poll never answers (vcsim under load) */
    bool folder_exists;          /* CreateFolder: DuplicateName */
    bool template_missing;       /* FindChild and the VM listing find nothing */
    bool template_plain;         /* "tmpl" is a VM, not a template */
    const char *template_parent; /* the folder vm-40 is in (NULL: group-3) */
    bool stale_after_end;        /* like vcsim: an older "running" follows the end */
    int folder_children;         /* childEntity of a folder read before Destroy_Task */
    bool hold_modifies;          /* ModifyListView is not answered until released */
    bool lost_tasks;             /* tasks are gone: not found by the view nor read */
    int view_misses;             /* tasks added to the view answered as not found */
    bool initial_at_once;        /* like vcsim: a long poll with no version answers at once */
    int empty_answers;   /* long polls with nothing to report answered empty at once, as when
                            their maxWaitSeconds ends */
    int unauth_tasks;    /* task methods answered NotAuthenticated (a lost session) */
    int unauth_reads;    /* task reads answered NotAuthenticated (a new session; the
                            collector of the old one still answers its long poll) */
    bool queued_first;   /* tasks are made queued, not running */
    int unauth_modifies; /* ModifyListView answered NotAuthenticated (the session and
                            its collector and view lost) */
    const char *gone_vm; /* task methods on it: ManagedObjectNotFound */
    vmg_server_req *held_modifies[DESTROY_HELD_MAX];
    int nheld_modifies;
    int pc_faults; /* CreatePropertyCollector fails this many times */
    /* state */
    struct task tasks[MAXT];
    int ntasks;
    int nfilters;
    int pc_gen; /* the collector is "pc-<gen>" */
    vmg_server_req *held;
    int version;
    /* what the server saw */
    struct unit_calls calls;
    int removed;         /* tasks removed from the view */
    int unsafe_modifies; /* ModifyListView calls while a long poll is held: vcsim's
                            long poll collects on every tick, and may deadlock */
    int cancels;         /* long polls ended by CancelWaitForUpdates */
    int asked_version;   /* the version the last long poll asked with (-1: none) */
    bool resync;         /* the view changed: its tasks enter again (vcsim) */
    char clone_body[8192];
    char reconfig_body[8192]; /* the last ReconfigVM_Task's */
    /* what the client saw */
    struct vs_op_result_copy {
        int err;
        char fault[64];
        char message[512];
        char result[VS_REF_MAX];
        char task[VS_REF_MAX];
        bool existed;
        int tag;
    } done[MAXDONE];
    int ndone;
    int inflight, max_inflight;
    struct vs_tracker_note notes[MAX_NOTES]; /* what the tracker told (op: NULL) */
    char note_task[MAX_NOTES][VS_REF_MAX];   /* the task of a MISSED note */
    char note_op[MAX_NOTES][64];             /* its kind and target ("power-on vm-3") */
    int nnotes;
    bool notes_lost;           /* told more than MAX_NOTES (teardown fails the test) */
    bool hold_reads;           /* the next task read is held (held_read) */
    vmg_server_req *held_read; /* a task read held (hold_reads) */
};

/* ---- Responses ---- */

static void reply_fault(vmg_server_req *r, const char *type)
{
    unit_soap_reply(r, 500,
                    "<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>%s "
                    "happened</faultstring><detail><%sFault xmlns=\"urn:vim25\" xsi:type=\"%s\">"
                    "</%sFault></detail></soapenv:Fault>",
                    type, type, type, type);
}

/* reply_empty answers a long poll with nothing, as vCenter does when its
 * maxWaitSeconds ends with no change. */
static void reply_empty(vmg_server_req *r)
{
    unit_soap_reply(r, 200,
                    "<WaitForUpdatesExResponse xmlns=\"urn:vim25\"></WaitForUpdatesExResponse>");
}

static int task_of(const char *body)
{
    char id[32];

    unit_between(body, "type=\"Task\">task-", "<", id, sizeof(id));
    return id[0] ? (int)strtol(id, NULL, 10) : -1;
}

/* task_xml writes the changes of task t. */
static int task_xml(char *buf, size_t size, const struct task *t)
{
    int n = snprintf(buf, size,
                     "<changeSet><name>info.state</name><op>assign</op>"
                     "<val xsi:type=\"TaskInfoState\">%s</val></changeSet>",
                     t->state);
    if (strcmp(t->state, "error") == 0) {
        char type[32] = "", value[32] = "", object[128] = "";
        if (sscanf(t->fault_object, "%31s %31s", type, value) == 2)
            snprintf(object, sizeof(object), "<name>web-0</name><object type=\"%s\">%s</object>",
                     type, value);
        n += snprintf(buf + n, size - (size_t)n,
                      "<changeSet><name>info.error</name><op>assign</op>"
                      "<val xsi:type=\"LocalizedMethodFault\"><fault xsi:type=\"%s\">%s</fault>"
                      "<localizedMessage>the %s message</localizedMessage></val></changeSet>",
                      t->fault, object, t->fault);
    }
    if (t->result[0])
        n += snprintf(buf + n, size - (size_t)n,
                      "<changeSet><name>info.result</name><op>assign</op>"
                      "<val type=\"VirtualMachine\" xsi:type=\"ManagedObjectReference\">%s</val>"
                      "</changeSet>",
                      t->result);
    return n;
}

/* try_wait answers the held long poll when a filter has news. */
static void try_wait(struct fake *f)
{
    char sets[12000];
    int n = 0;

    if (!f->held || f->mute_polls)
        return;
    if (f->resync) {
        /* vcsim: the filter's first collect after its view changed enters
         * every task of the view again. */
        f->resync = false;
        for (int i = 0; i < f->ntasks && !f->quiet_new_filters; i++)
            f->tasks[i].reported[0] = '\0';
    }
    for (int i = 0; i < f->ntasks; i++) {
        struct task *t = &f->tasks[i];
        if (!t->filter || t->left || t->filter_pc != f->pc_gen ||
            strcmp(t->state, t->reported) == 0)
            continue;
        n += snprintf(sets + n, sizeof(sets) - (size_t)n,
                      "<filterSet><filter type=\"PropertyFilter\">filter-%d</filter><objectSet>"
                      "<kind>%s</kind><obj type=\"Task\">task-%d</obj>",
                      t->filter, t->reported[0] ? "modify" : "enter", i);
        n += task_xml(sets + n, sizeof(sets) - (size_t)n, t);
        n += snprintf(sets + n, sizeof(sets) - (size_t)n, "</objectSet>");
        if (f->stale_after_end && strcmp(t->state, "running") != 0)
            n += snprintf(sets + n, sizeof(sets) - (size_t)n,
                          "<objectSet><kind>modify</kind><obj type=\"Task\">task-%d</obj>"
                          "<changeSet><name>info.state</name><op>assign</op>"
                          "<val xsi:type=\"TaskInfoState\">running</val></changeSet></objectSet>",
                          i);
        n += snprintf(sets + n, sizeof(sets) - (size_t)n, "</filterSet>");
        memcpy(t->reported, t->state, sizeof(t->reported));
    }
    if (n == 0)
        return;
    f->version++;
    unit_soap_reply(
        f->held, 200,
        "<WaitForUpdatesExResponse xmlns=\"urn:vim25\"><returnval><version>%d</version>%s"
        "</returnval></WaitForUpdatesExResponse>",
        f->version, sets);
    f->held = NULL;
}

static void on_abort(void *data, vmg_server_req *r)
{
    struct fake *f = data;

    if (f->held == r)
        f->held = NULL;
    for (int i = 0; i < f->nheld_modifies; i++)
        if (f->held_modifies[i] == r)
            f->held_modifies[i] = NULL;
    vmg_server_respond(r, 500, "text/plain", "gone", 4);
}

/* calls_of counts the calls the server saw that are what ("Method target"),
 * or a method what named with any target. */
static bool stale_pc(const struct fake *f, const char *body)
{
    char pc[32], want[32];

    unit_between(body, "<_this type=\"PropertyCollector\">", "<", pc, sizeof(pc));
    snprintf(want, sizeof(want), "pc-%d", f->pc_gen);
    return pc[0] && strcmp(pc, "propertyCollector") != 0 && strcmp(pc, want) != 0;
}

static void handler(void *data, vmg_server_req *r)
{
    static const char *const task_methods[] = {"PowerOnVM_Task", "PowerOffVM_Task",
                                               "ReconfigVM_Task", "Destroy_Task", "CloneVM_Task"};
    struct fake *f = data;
    size_t len;
    const char *body = vmg_server_req_body(r, &len);
    char tag[64], target[64], buf[4096];

    if (unit_soap_session(r, body))
        return;
    unit_between(body, "<_this type=\"", "</_this>", target, sizeof(target));
    {
        char *gt = strchr(target, '>');
        if (gt)
            memmove(target, gt + 1, strlen(gt));
    }
    for (size_t i = 0; i < sizeof(task_methods) / sizeof(task_methods[0]); i++) {
        snprintf(tag, sizeof(tag), "<%s>", task_methods[i]);
        if (!strstr(body, tag))
            continue;
        if (f->unauth_tasks > 0) {
            f->unauth_tasks--;
            unit_calls_add(&f->calls, "NotAuthenticated", task_methods[i]);
            reply_fault(r, "NotAuthenticated");
            return;
        }
        unit_calls_add(&f->calls, task_methods[i], target);
        if (f->gone_vm && strcmp(target, f->gone_vm) == 0) {
            reply_fault(r, "ManagedObjectNotFound");
            return;
        }
        if (i == 4)
            snprintf(f->clone_body, sizeof(f->clone_body), "%s", body);
        if (i == 2)
            snprintf(f->reconfig_body, sizeof(f->reconfig_body), "%s", body);
        assert_true(f->ntasks < MAXT);
        struct task *t = &f->tasks[f->ntasks];
        memset(t, 0, sizeof(*t));
        t->read_gap = UINT64_MAX;
        snprintf(t->state, sizeof(t->state), "%s",
                 f->instant        ? "success"
                 : f->queued_first ? "queued"
                                   : "running");
        if (i == 4)
            snprintf(t->result, sizeof(t->result), "vm-9%d", f->ntasks);
        unit_soap_reply(
            r, 200,
            "<%sResponse xmlns=\"urn:vim25\"><returnval type=\"Task\">task-%d</returnval>"
            "</%sResponse>",
            task_methods[i], f->ntasks, task_methods[i]);
        f->ntasks++;
        return;
    }
    if (strstr(body, "<CreateFolder>")) {
        unit_calls_add(&f->calls, "CreateFolder", target);
        if (f->folder_exists)
            unit_soap_fixture(r, 500, "fault_duplicate_name.resp.xml");
        else
            unit_soap_reply(
                r, 200,
                "<CreateFolderResponse xmlns=\"urn:vim25\"><returnval type=\"Folder\">group-77"
                "</returnval></CreateFolderResponse>");
        return;
    }
    if (strstr(body, "<FindChild>")) {
        unit_between(body, "<name>", "</name>", tag, sizeof(tag));
        unit_calls_add(&f->calls, "FindChild", tag);
        if (strcmp(tag, "web") == 0)
            unit_soap_reply(
                r, 200,
                "<FindChildResponse xmlns=\"urn:vim25\"><returnval type=\"Folder\">group-41"
                "</returnval></FindChildResponse>");
        else if (strcmp(tag, "tmpl") == 0 && !f->template_missing)
            unit_soap_reply(
                r, 200,
                "<FindChildResponse xmlns=\"urn:vim25\"><returnval type=\"VirtualMachine\">"
                "vm-40</returnval></FindChildResponse>");
        else
            unit_soap_reply(r, 200, "<FindChildResponse xmlns=\"urn:vim25\"></FindChildResponse>");
        return;
    }
    if (strstr(body, "<CreateContainerView>")) {
        unit_calls_add(&f->calls, "CreateContainerView", target);
        unit_soap_reply(
            r, 200,
            "<CreateContainerViewResponse xmlns=\"urn:vim25\"><returnval type=\"ContainerView\">"
            "view-1</returnval></CreateContainerViewResponse>");
        return;
    }
    if (strstr(body, "<DestroyView>")) {
        unit_calls_add(&f->calls, "DestroyView", target);
        unit_soap_reply(r, 200, "<DestroyViewResponse xmlns=\"urn:vim25\"></DestroyViewResponse>");
        return;
    }
    if (strstr(body, "<CreatePropertyCollector>")) {
        unit_calls_add(&f->calls, "CreatePropertyCollector", target);
        if (f->pc_faults > 0) {
            f->pc_faults--;
            reply_fault(r, "SystemError");
            return;
        }
        unit_soap_reply(
            r, 200,
            "<CreatePropertyCollectorResponse xmlns=\"urn:vim25\"><returnval "
            "type=\"PropertyCollector\">pc-%d</returnval></CreatePropertyCollectorResponse>",
            f->pc_gen);
        return;
    }
    if (strstr(body, "<CreateListView>")) {
        unit_calls_add(&f->calls, "CreateListView", target);
        unit_soap_reply(r, 200,
                        "<CreateListViewResponse xmlns=\"urn:vim25\"><returnval type=\"ListView\">"
                        "list-%d</returnval></CreateListViewResponse>",
                        f->pc_gen);
        return;
    }
    if (strstr(body, "<CreateFilter>")) {
        unit_calls_add(&f->calls, "CreateFilter", target);
        /* One filter over the view: its Tasks' states, the view skipped. */
        assert_non_null(strstr(body, "<type>Task</type>"));
        assert_non_null(strstr(body, "<pathSet>info.state</pathSet>"));
        assert_non_null(strstr(body, "<type>ListView</type><path>view</path>"));
        snprintf(tag, sizeof(tag), "type=\"ListView\">list-%d</obj><skip>true</skip>", f->pc_gen);
        if (stale_pc(f, body) || !strstr(body, tag)) {
            reply_fault(r, "ManagedObjectNotFound");
            return;
        }
        unit_soap_reply(
            r, 200,
            "<CreateFilterResponse xmlns=\"urn:vim25\"><returnval type=\"PropertyFilter\">"
            "filter-%d</returnval></CreateFilterResponse>",
            ++f->nfilters);
        return;
    }
    if (strstr(body, "<ModifyListView>")) {
        char missing[1024];
        int n = 0;

        unit_calls_add(&f->calls, "ModifyListView", target);
        if (f->unauth_modifies > 0) {
            f->unauth_modifies--;
            f->pc_gen++; /* the collector and its view went with the session */
            reply_fault(r, "NotAuthenticated");
            return;
        }
        snprintf(tag, sizeof(tag), "list-%d", f->pc_gen);
        if (strcmp(target, tag) != 0) {
            reply_fault(r, "ManagedObjectNotFound");
            return;
        }
        if (f->held)
            f->unsafe_modifies++;
        for (const char *p = body; (p = strstr(p, "<remove type=\"Task\">task-")) != NULL; p++) {
            int id = (int)strtol(p + 25, NULL, 10);
            if (id >= 0 && id < f->ntasks && f->tasks[id].filter && !f->tasks[id].left) {
                f->tasks[id].left = true;
                f->removed++;
            }
        }
        for (const char *p = body; (p = strstr(p, "<add type=\"Task\">task-")) != NULL; p++) {
            int id = (int)strtol(p + 22, NULL, 10);
            if (id < 0 || id >= f->ntasks || f->lost_tasks || f->view_misses > 0) {
                f->view_misses -= f->view_misses > 0;
                n += snprintf(missing + n, sizeof(missing) - (size_t)n,
                              "<returnval type=\"Task\">task-%d</returnval>", id);
                continue;
            }
            f->tasks[id].filter = 1;
            f->tasks[id].filter_pc = f->pc_gen;
            f->tasks[id].left = false;
            if (f->quiet_new_filters)
                memcpy(f->tasks[id].reported, f->tasks[id].state, sizeof(f->tasks[id].reported));
            else
                f->tasks[id].reported[0] = '\0';
        }
        f->resync = true;
        if (f->hold_modifies && f->nheld_modifies < DESTROY_HELD_MAX) {
            f->held_modifies[f->nheld_modifies++] = r;
            vmg_server_req_on_abort(r, on_abort, f);
            return;
        }
        unit_soap_reply(r, 200,
                        "<ModifyListViewResponse xmlns=\"urn:vim25\">%s</ModifyListViewResponse>",
                        n ? missing : "");
        try_wait(f);
        return;
    }
    if (strstr(body, "<CancelWaitForUpdates>")) {
        unit_calls_add(&f->calls, "CancelWaitForUpdates", target);
        if (stale_pc(f, body)) {
            reply_fault(r, "ManagedObjectNotFound");
            return;
        }
        if (f->held) {
            reply_fault(f->held, "RequestCanceled");
            f->held = NULL;
            f->cancels++;
        }
        unit_soap_reply(
            r, 200,
            "<CancelWaitForUpdatesResponse xmlns=\"urn:vim25\"></CancelWaitForUpdatesResponse>");
        return;
    }
    if (strstr(body, "<DestroyPropertyCollector>")) {
        unit_calls_add(&f->calls, "DestroyPropertyCollector", target);
        unit_soap_reply(r, 200,
                        "<DestroyPropertyCollectorResponse xmlns=\"urn:vim25\">"
                        "</DestroyPropertyCollectorResponse>");
        return;
    }
    if (strstr(body, "<RetrievePropertiesEx>")) {
        int id = task_of(body);
        if (strstr(body, "ContainerView")) {
            unit_calls_add(&f->calls, "RetrievePropertiesEx", "view");
            unit_soap_reply(
                r, 200,
                "<RetrievePropertiesExResponse xmlns=\"urn:vim25\"><returnval><objects>"
                "<obj type=\"VirtualMachine\">vm-40</obj><propSet><name>name</name>"
                "<val xsi:type=\"xsd:string\">%s</val></propSet><propSet><name>parent</name>"
                "<val type=\"Folder\" xsi:type=\"ManagedObjectReference\">group-3</val>"
                "</propSet><propSet><name>config.template</name>"
                "<val xsi:type=\"xsd:boolean\">%s</val></propSet></objects>"
                "</returnval></RetrievePropertiesExResponse>",
                f->template_missing ? "other" : "tmpl", f->template_plain ? "false" : "true");
            return;
        }
        if (strstr(body, "<obj type=\"VirtualMachine\">vm-40</obj>")) {
            unit_calls_add(&f->calls, "RetrievePropertiesEx", "vm");
            unit_soap_reply(
                r, 200,
                "<RetrievePropertiesExResponse xmlns=\"urn:vim25\"><returnval><objects>"
                "<obj type=\"VirtualMachine\">vm-40</obj><propSet><name>name</name>"
                "<val xsi:type=\"xsd:string\">tmpl</val></propSet><propSet><name>parent</name>"
                "<val type=\"Folder\" xsi:type=\"ManagedObjectReference\">%s</val>"
                "</propSet><propSet><name>config.template</name>"
                "<val xsi:type=\"xsd:boolean\">%s</val></propSet></objects>"
                "</returnval></RetrievePropertiesExResponse>",
                f->template_parent ? f->template_parent : "group-3",
                f->template_plain ? "false" : "true");
            return;
        }
        if (strstr(body, "type=\"Folder\">")) {
            char kids[512];
            int n = 0;

            unit_calls_add(&f->calls, "RetrievePropertiesEx", "folder");
            for (int i = 0; i < f->folder_children; i++)
                n += snprintf(kids + n, sizeof(kids) - (size_t)n,
                              "<ManagedObjectReference type=\"VirtualMachine\">vm-7%d"
                              "</ManagedObjectReference>",
                              i);
            unit_soap_reply(
                r, 200,
                "<RetrievePropertiesExResponse xmlns=\"urn:vim25\"><returnval><objects>"
                "<obj type=\"Folder\">group-50</obj><propSet><name>childEntity</name>"
                "<val xsi:type=\"ArrayOfManagedObjectReference\">%s</val></propSet></objects>"
                "</returnval></RetrievePropertiesExResponse>",
                n ? kids : "");
            return;
        }
        if (f->unauth_reads > 0) {
            f->unauth_reads--;
            unit_calls_add(&f->calls, "NotAuthenticated", "RetrievePropertiesEx");
            reply_fault(r, "NotAuthenticated");
            return;
        }
        if (f->hold_reads && !f->held_read) {
            f->held_read = r; /* release_read answers it */
            return;
        }
        unit_calls_add(&f->calls, "RetrievePropertiesEx", "task");
        if (id < 0 || id >= f->ntasks || f->lost_tasks) {
            reply_fault(r, "ManagedObjectNotFound");
            return;
        }
        task_xml(buf, sizeof(buf), &f->tasks[id]);
        memcpy(f->tasks[id].read, f->tasks[id].state, sizeof(f->tasks[id].read));
        {
            struct task *t = &f->tasks[id];
            uint64_t now = uv_now(&f->loop);
            if (t->read_ms && now - t->read_ms < t->read_gap)
                t->read_gap = now - t->read_ms;
            t->read_ms = now;
        }
        /* A RetrieveResult holds propSets, not changeSets. */
        for (char *p; (p = strstr(buf, "changeSet>")) != NULL;)
            memcpy(p, "propSet>  ", 10);
        for (char *p; (p = strstr(buf, "<op>assign</op>")) != NULL;)
            memmove(p, p + 15, strlen(p + 15) + 1);
        unit_soap_reply(r, 200,
                        "<RetrievePropertiesExResponse xmlns=\"urn:vim25\"><returnval><objects>"
                        "<obj type=\"Task\">task-%d</obj>%s</objects></returnval>"
                        "</RetrievePropertiesExResponse>",
                        id, buf);
        return;
    }
    if (strstr(body, "<WaitForUpdatesEx>")) {
        unit_calls_add(&f->calls, "WaitForUpdatesEx", target);
        f->asked_version = unit_between(body, "<version>", "<", tag, sizeof(tag))[0]
                               ? (int)strtol(tag, NULL, 10)
                               : -1;
        if (stale_pc(f, body)) {
            reply_fault(r, "ManagedObjectNotFound");
            return;
        }
        assert_null(f->held); /* one long poll at a time */
        f->held = r;
        vmg_server_req_on_abort(r, on_abort, f);
        try_wait(f);
        if (f->held == r && f->empty_answers > 0) {
            f->empty_answers--;
            f->held = NULL;
            reply_empty(r);
            return;
        }
        if (f->held == r && f->initial_at_once && !strstr(body, "<version>")) {
            f->held = NULL;
            unit_soap_reply(
                r, 200,
                "<WaitForUpdatesExResponse xmlns=\"urn:vim25\"><returnval><version>%d</version>"
                "</returnval></WaitForUpdatesExResponse>",
                ++f->version);
        }
        return;
    }
    vmg_server_respond(r, 404, "text/plain", "no", 2);
}

/* ---- Set-up ---- */

static void on_guard_nop(uv_timer_t *t)
{
    (void)t;
}

static void on_guard(uv_timer_t *t)
{
    struct fake *f = t->data;

    f->timed_out = true;
    uv_stop(&f->loop);
}

static const struct vs_placement placement = {
    .datacenter = {"Datacenter", "datacenter-2"},
    .datacenter_path = "/DC0",
    .vm_folder = {"Folder", "group-3"},
    .root_folder = {"Folder", "group-38"},
    .pool = {"ResourcePool", "resgroup-9"},
};

static void observer(void *data, const vs_op *op, enum vs_op_phase phase,
                     const struct vs_op_result *r)
{
    struct fake *f = data;

    if (phase == VS_OP_DONE && f->cache && r->err == 0) {
        /* Nothing said of the object since the operation started. */
        f->assumed += vs_op_testing_assume(op, r, f->cache, UINT64_MAX, 1);
        vs_cache_commit(f->cache);
    }
    if (phase == VS_OP_DONE && vs_op_testing_read_back(op, r))
        snprintf(f->read_back, sizeof(f->read_back), "%s", vs_op_testing_read_back(op, r));
    if (phase == VS_OP_STARTED && ++f->inflight > f->max_inflight)
        f->max_inflight = f->inflight;
    if (phase == VS_OP_DONE && f->inflight > 0)
        f->inflight--;
}

static void on_note(void *data, const struct vs_tracker_note *n)
{
    struct fake *f = data;

    if (f->nnotes >= MAX_NOTES) {
        f->notes_lost = true;
        return;
    }
    f->notes[f->nnotes] = *n;
    f->notes[f->nnotes].op = NULL;
    snprintf(f->note_task[f->nnotes], sizeof(f->note_task[0]), "%s",
             n->op ? vs_op_task(n->op) : "");
    if (n->op)
        snprintf(f->note_op[f->nnotes], sizeof(f->note_op[0]), "%s %s",
                 vs_op_kind_name(vs_op_kind(n->op)), vs_op_target(n->op));
    else
        f->note_op[f->nnotes][0] = '\0';
    f->nnotes++;
}

/* count_notes: how many notes of event the tracker told. */
static int count_notes(const struct fake *f, enum vs_tracker_event event)
{
    int n = 0;

    for (int i = 0; i < f->nnotes; i++)
        n += f->notes[i].event == event;
    return n;
}

static uint64_t setup_slow_ms;    /* the next setup's slow_check_ms (0: the default) */
static uint64_t setup_recheck_ms; /* the next setup's recheck_ms (0: the default) */
static int setup_task_wait;       /* the next setup's task_wait_seconds (0: the default) */
static uint64_t setup_call_ms;    /* the next setup's session call timeout (0: the default) */

static void setup(struct fake *f, int max_inflight, size_t max_queued)
{
    struct vs_ops_config ocfg = {.max_inflight = max_inflight,
                                 .max_queued = max_queued,
                                 .task_wait_seconds = setup_task_wait,
                                 .slow_check_ms = setup_slow_ms,
                                 .recheck_ms = setup_recheck_ms,
                                 .marks = {MARK_UID_KEY, MARK_TEMPLATE_KEY, MARK_INSTANCE_KEY}};
    int e = 0;

    memset(f, 0, sizeof(*f));
    f->pc_gen = 1;
    assert_int_equal(uv_loop_init(&f->loop), 0);
    unit_vcenter_start(&f->vc, &f->loop, "fake", handler, f, 60000);
    f->s = unit_vcenter_session(&f->vc, &f->loop, setup_call_ms);
    f->ops = vs_ops_new(&f->loop, f->s, NULL, &ocfg, &e);
    assert_non_null(f->ops);
    vs_ops_set_placement(f->ops, &placement);
    vs_ops_set_observer(f->ops, observer, f);
    vs_ops_set_tracker_cb(f->ops, on_note, f);
    uv_timer_init(&f->loop, &f->guard);
    f->guard.data = f;
}

/* setup_timed sets up with the tracker's times: task_wait seconds of
 * maxWaitSeconds, slow_ms and recheck_ms (0: the defaults). */
static void setup_timed(struct fake *f, int task_wait, uint64_t slow_ms, uint64_t recheck_ms)
{
    setup_task_wait = task_wait;
    setup_slow_ms = slow_ms;
    setup_recheck_ms = recheck_ms;
    setup(f, 8, 0);
    setup_task_wait = 0;
    setup_slow_ms = 0;
    setup_recheck_ms = 0;
}

static void teardown(struct fake *f)
{
    assert_false(f->notes_lost);
    vs_ops_close(f->ops, NULL, NULL);
    vs_session_close(f->s, NULL, NULL);
    unit_vcenter_stop(&f->vc, &f->loop, &f->guard);
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

static int want_done, want_tasks, want_held_tasks;

static bool done_enough(const struct fake *f)
{
    return f->ndone >= want_done;
}

/* tracked: want_tasks tasks exist, want_held_tasks of them joined the
 * view and the server told their state (the long poll reported it or a
 * read answered it; a task that left the view had ended), and the long
 * poll is held: nothing more happens until a task ends. */
static bool tracked(const struct fake *f)
{
    int known = 0;

    for (int i = 0; i < f->ntasks; i++) {
        const struct task *t = &f->tasks[i];
        known += t->filter != 0 &&
                 (t->left || strcmp(t->state, t->reported) == 0 || strcmp(t->state, t->read) == 0);
    }
    return f->ntasks >= want_tasks && known >= want_held_tasks && f->held != NULL;
}

/* A callback context: the fake and a tag. */
struct ctx {
    struct fake *f;
    int tag;
};

static void on_done(void *data, const struct vs_op_result *r)
{
    const struct ctx *x = data;
    struct fake *f = x->f;
    struct vs_op_result_copy *c;

    assert_true(f->ndone < MAXDONE);
    c = &f->done[f->ndone++];
    c->err = r->err;
    c->tag = x->tag;
    snprintf(c->fault, sizeof(c->fault), "%s", r->fault_type);
    snprintf(c->message, sizeof(c->message), "%s", r->message);
    snprintf(c->result, sizeof(c->result), "%s", r->result ? r->result->value : "");
    snprintf(c->task, sizeof(c->task), "%s", r->task ? r->task->value : "");
    c->existed = r->existed;
    if (r->err == 0)
        assert_string_equal(r->message, "");
    else
        assert_true(strlen(r->message) > 0);
}

static void end_task(struct fake *f, int id, const char *state, const char *fault)
{
    snprintf(f->tasks[id].state, sizeof(f->tasks[id].state), "%s", state);
    snprintf(f->tasks[id].fault, sizeof(f->tasks[id].fault), "%s", fault ? fault : "");
    try_wait(f);
}

static struct vim_moref vmref(int i)
{
    struct vim_moref r;
    char v[16];

    snprintf(v, sizeof(v), "vm-%d", i);
    assert_int_equal(vim_moref_set(&r, "VirtualMachine", v), 0);
    return r;
}

/* power_on starts the power-on of vm-(i+1) with context c[i] (tag i). */
static void power_on(struct fake *f, struct ctx *c, int i)
{
    struct vim_moref vm = vmref(i + 1);

    c[i] = (struct ctx){f, i};
    assert_int_equal(vs_ops_power_on(f->ops, &vm, on_done, &c[i], NULL), 0);
}

/* ---- Tests ---- */

static void test_bound_and_fifo(void **state)
{
    struct fake f;
    struct ctx c[5];

    (void)state;
    setup(&f, 2, 0);
    for (int i = 0; i < 5; i++) {
        struct vim_moref vm = vmref(i + 1);
        c[i] = (struct ctx){&f, i};
        assert_int_equal(vs_ops_power_on(f.ops, &vm, on_done, &c[i], NULL), 0);
    }
    assert_int_equal(vs_ops_queued(f.ops), 5); /* started from the loop, not here */
    assert_int_equal(vs_ops_inflight(f.ops), 0);
    want_tasks = 2;
    want_held_tasks = 2;
    spin(&f, tracked);
    assert_int_equal(vs_ops_inflight(f.ops), 2);
    assert_int_equal(vs_ops_queued(f.ops), 3);
    assert_int_equal(f.ntasks, 2);
    assert_int_equal(f.ndone, 0);
    /* Each end lets the next one in, in order. */
    for (int k = 0; k < 5; k++) {
        end_task(&f, k, "success", NULL);
        want_done = k + 1;
        spin(&f, done_enough);
        assert_int_equal(f.done[k].err, 0);
        assert_int_equal(f.done[k].tag, k);
        if (k + 2 < 5) {
            want_tasks = k + 3;
            want_held_tasks = k + 3;
            spin(&f, tracked);
        }
        assert_true(vs_ops_inflight(f.ops) <= 2);
    }
    assert_int_equal(f.max_inflight, 2);
    {
        int n = 0;
        for (int i = 0; i < f.calls.n; i++)
            if (strncmp(f.calls.at[i], "PowerOnVM_Task ", 15) == 0) {
                char want[32];
                snprintf(want, sizeof(want), "PowerOnVM_Task vm-%d", n + 1);
                assert_string_equal(f.calls.at[i], want);
                n++;
            }
        assert_int_equal(n, 5);
    }
    /* One collector, one view and one filter served all; every task left
     * the view, and no ModifyListView risked vcsim's lock order. */
    assert_int_equal(unit_calls_count(&f.calls, "CreatePropertyCollector"), 1);
    assert_int_equal(unit_calls_count(&f.calls, "CreateListView"), 1);
    assert_int_equal(unit_calls_count(&f.calls, "CreateFilter"), 1);
    want_done = 0;
    uv_run(&f.loop, UV_RUN_NOWAIT);
    teardown(&f);
    assert_true(f.removed >= 4);
    assert_int_equal(f.unsafe_modifies, 0);
}

static void test_task_error(void **state)
{
    struct fake f;
    struct ctx c = {0};
    struct vim_moref vm = vmref(7);

    (void)state;
    setup(&f, 8, 0);
    c.f = &f;
    assert_int_equal(vs_ops_power_off(f.ops, &vm, on_done, &c, NULL), 0);
    want_tasks = 1;
    want_held_tasks = 1;
    spin(&f, tracked);
    end_task(&f, 0, "error", "InvalidPowerState");
    want_done = 1;
    spin(&f, done_enough);
    assert_int_equal(f.done[0].err, VMG_EFAULT);
    assert_string_equal(f.done[0].fault, "InvalidPowerState");
    assert_non_null(strstr(f.done[0].message, "the InvalidPowerState message"));
    assert_non_null(strstr(f.done[0].message, "PowerOffVM_Task"));
    assert_string_equal(f.done[0].task, "task-0");
    teardown(&f);
}

static bool made_pcs3(const struct fake *f)
{
    return unit_calls_count(&f->calls, "CreatePropertyCollector") >= 3 && f->held != NULL;
}

static bool is_done1(const struct fake *f)
{
    return f->ndone >= 1;
}

/* destroy_ended destroys vm-3 through a task that has ended before it
 * joins the view, on a server that reports a task entering the view
 * (quiet false) or not, whose first long poll answers empty (empty: its
 * maxWaitSeconds ended) or waits, and checks that it ends in success after
 * exactly reads reads of the task. */
static void destroy_ended(bool quiet, bool empty, int reads)
{
    struct fake f;
    struct ctx c = {0};
    struct vim_moref vm = vmref(3);

    /* The safety net soon (1 s of maxWaitSeconds, then 200 ms), or not in
     * 10 s. */
    if (quiet && !empty)
        setup_timed(&f, 1, 200, 0);
    else
        setup(&f, 8, 0);
    f.instant = true;
    f.quiet_new_filters = quiet;
    f.empty_answers = empty ? 1 : 0;
    c.f = &f;
    assert_int_equal(vs_ops_destroy(f.ops, &vm, on_done, &c, NULL), 0);
    spin(&f, is_done1);
    assert_int_equal(f.done[0].err, 0);
    assert_int_equal(unit_calls_count(&f.calls, "RetrievePropertiesEx task"), reads);
    teardown(&f);
}

static void test_task_ended_before_filter(void **state)
{
    (void)state;
    /* The view's change enters the task into the filter, and the next
     * long poll reports it with its state (vCenter and vcsim alike): no
     * read of the task is needed. */
    destroy_ended(false, false, 0);
    /* A server that does not report a task entering the view: the long
     * poll stays quiet, and the safety net reads the task. */
    destroy_ended(true, false, 1);
    /* The same server, its long poll answering empty (maxWaitSeconds
     * ended): the quiet answer has the task read at once, before the
     * safety net's time (not within 10 s here). */
    destroy_ended(true, true, 1);
}

/* run_for runs the loop for ms milliseconds. */
static void run_for(struct fake *f, uint64_t ms)
{
    uint64_t end = uv_now(&f->loop) + ms;
    uv_timer_t t;

    uv_timer_init(&f->loop, &t);
    uv_timer_start(&t, on_guard_nop, ms, 0);
    while (uv_now(&f->loop) < end)
        uv_run(&f->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&f->loop, UV_RUN_NOWAIT);
}

/* done_tag: the operation tagged tag has finished. */
static bool done_tag(const struct fake *f, int tag)
{
    for (int i = 0; i < f->ndone; i++)
        if (f->done[i].tag == tag)
            return true;
    return false;
}

/* A server that does not report a task entering the view, whose long poll
 * other tasks keep answering (one ends every 100 ms, within the safety
 * net's 300 ms of the one before, so that the long poll is never slow nor
 * quiet): the task that ended before it joined the view is read once no
 * answer has reported it for the safety net's time, while the others
 * still run, not when they are all done; and a task still unreported is
 * read again only after another safety net's time, not at each answer. */
static void test_unreported_task_read_while_others_answer(void **state)
{
    struct fake f;
    struct ctx c[8];
    struct vim_moref vm = vmref(20);
    int done_at = 0; /* how many of the others had ended when it finished */

    (void)state;
    setup_timed(&f, 0, 300, 0);
    f.quiet_new_filters = true;
    f.instant = true;
    c[0] = (struct ctx){&f, 0};
    assert_int_equal(vs_ops_destroy(f.ops, &vm, on_done, &c[0], NULL), 0);
    want_tasks = 1;
    want_held_tasks = 0;
    spin(&f, tracked); /* its task made, ended, and in the view */
    f.instant = false;
    for (int i = 1; i < 8; i++)
        power_on(&f, c, i);
    want_tasks = 8;
    want_held_tasks = 0;
    spin(&f, tracked);
    for (int i = 1; i < 8; i++) {
        run_for(&f, 100);
        if (!done_at && done_tag(&f, 0))
            done_at = i;
        end_task(&f, i, "success", NULL);
    }
    run_for(&f, 50);
    assert_true(done_at > 0 && done_at < 7); /* before the last one ended */
    assert_string_equal(f.tasks[0].read, "success");
    want_done = 8;
    spin(&f, done_enough);
    for (int i = 0; i < f.ndone; i++)
        assert_int_equal(f.done[i].err, 0);
    /* The others, unreported while they ran, were read too, each at most
     * once per safety net's time (the long poll answered every 100 ms). */
    for (int i = 0; i < 8; i++)
        assert_true(f.tasks[i].read_gap >= 250);
    teardown(&f);
}

/* end_in_success ends the one operation's task in success and waits for
 * the operation to finish so. */
static void end_in_success(struct fake *f)
{
    end_task(f, 0, "success", NULL);
    spin(f, is_done1);
    assert_int_equal(f->done[0].err, 0);
}

/* ends_in_success waits for the one operation started to be tracked, ends
 * its task in success and waits for the operation to finish so. */
static void ends_in_success(struct fake *f)
{
    want_tasks = 1;
    want_held_tasks = 1;
    spin(f, tracked);
    end_in_success(f);
}

static void test_quiet_filter_then_end(void **state)
{
    struct fake f;
    struct ctx c = {0};
    struct vim_moref vm = vmref(3);

    (void)state;
    /* The same server, the task ending later: the long poll reports it. */
    setup(&f, 8, 0);
    f.quiet_new_filters = true;
    c.f = &f;
    assert_int_equal(vs_ops_reconfigure(f.ops, &vm, 2, 2048, on_done, &c, NULL), 0);
    ends_in_success(&f);
    teardown(&f);
}

/* power_on_tracked starts the power-on of vm-3 (context c) and waits until
 * its task is in the view and, if reported, the long poll reported it. */
static void power_on_tracked(struct fake *f, struct ctx *c, bool reported)
{
    struct vim_moref vm = vmref(3);

    *c = (struct ctx){f, 0};
    assert_int_equal(vs_ops_power_on(f->ops, &vm, on_done, c, NULL), 0);
    want_tasks = 1;
    want_held_tasks = reported ? 1 : 0;
    spin(f, tracked);
}

/* late_power_on sets up a tracker whose long poll never answers (1 s of
 * maxWaitSeconds, a safety net of 200 ms), and starts the power-on of
 * vm-3, its task in the view. */
static void late_power_on(struct fake *f, struct ctx *c)
{
    setup_timed(f, 1, 200, 0);
    f->mute_polls = true;
    power_on_tracked(f, c, false);
}

/* read_once_late: with the long poll muted (wait_s 1), the one task is
 * not read for quiet_ms, then, ended in success, is read once the long
 * poll is late: said late first, and its end, found so, is no miss. */
static void read_once_late(struct fake *f, uint64_t quiet_ms)
{
    run_for(f, quiet_ms);
    assert_int_equal(unit_calls_count(&f->calls, "RetrievePropertiesEx task"), 0);
    assert_int_equal(f->nnotes, 0);
    end_in_success(f);
    assert_true(unit_calls_count(&f->calls, "RetrievePropertiesEx task") >= 1);
    assert_true(f->nnotes >= 1);
    assert_int_equal(count_notes(f, VS_TRACKER_MISSED), 0);
    assert_int_equal(f->notes[0].event, VS_TRACKER_LATE);
    assert_int_equal(f->notes[0].wait_s, 1);
}

static void test_slow_long_poll_reads_the_tasks(void **state)
{
    struct fake f;
    struct ctx c;

    (void)state;
    /* The long poll never answers: the task's end is read directly, once
     * the long poll is late (200 ms past its maxWaitSeconds of 1 s), not
     * before: silence within maxWaitSeconds is no news. */
    late_power_on(&f, &c);
    read_once_late(&f, 700);
    assert_true(f.notes[0].late_ms >= 200);
    assert_int_equal(f.notes[0].tasks, 1);
    teardown(&f);
}

/* A call timeout shorter than the safety net's slow_check_ms: the long
 * poll is late from its call's timeout on (maxWaitSeconds 1 s plus 300 ms),
 * not from slow_check_ms (60 s) past its wait. */
static void test_late_by_the_call_timeout(void **state)
{
    struct fake f;
    struct ctx c;

    (void)state;
    setup_call_ms = 300;
    setup_timed(&f, 1, 60000, 0);
    setup_call_ms = 0;
    f.mute_polls = true;
    power_on_tracked(&f, &c, false);
    read_once_late(&f, 900);
    assert_true(f.notes[0].late_ms >= 250 && f.notes[0].late_ms < 5000);
    teardown(&f);
}

/* late: the tracker said its long poll is late. */
static bool late(const struct fake *f)
{
    return count_notes(f, VS_TRACKER_LATE) > 0;
}

/* A long poll late, then answering (the task's end): said late, again
 * at each safety net's time, then answered once, with how late. */
static void test_late_long_poll_answers(void **state)
{
    struct fake f;
    struct ctx c;

    (void)state;
    late_power_on(&f, &c);
    spin(&f, late);
    f.mute_polls = false;
    run_for(&f, 300);
    end_in_success(&f);
    /* Late, said again each 200 ms while late, then answered, once. */
    assert_true(count_notes(&f, VS_TRACKER_LATE) >= 2);
    assert_int_equal(count_notes(&f, VS_TRACKER_ANSWERED), 1);
    assert_int_equal(f.notes[f.nnotes - 1].event, VS_TRACKER_ANSWERED);
    assert_true(f.notes[f.nnotes - 1].late_ms >= 400);
    assert_int_equal(count_notes(&f, VS_TRACKER_MISSED), 0);
    teardown(&f);
}

/* answer_empty answers the held long poll with nothing (reply_empty). */
static void answer_empty(struct fake *f)
{
    vmg_server_req *r = f->held;

    assert_non_null(r);
    f->held = NULL;
    reply_empty(r);
}

/* held: a long poll is out. */
static bool held(const struct fake *f)
{
    return f->held != NULL;
}

/* read_held: a task read is held (hold_reads). */
static bool read_held(const struct fake *f)
{
    return f->held_read != NULL;
}

/* release_read answers the task read held, with the task's state now. */
static void release_read(struct fake *f)
{
    vmg_server_req *r = f->held_read;

    assert_non_null(r);
    f->held_read = NULL;
    f->hold_reads = false;
    handler(f, r);
}

/* A read sent while the long poll was late answers after that long poll
 * answered (quiet), the task ended meanwhile: the next long poll was never
 * given the chance to report the end, so no miss is said. */
static void test_late_read_after_the_answer_is_no_miss(void **state)
{
    struct fake f;
    struct ctx c;

    (void)state;
    late_power_on(&f, &c);
    f.hold_reads = true;
    spin(&f, read_held);
    assert_int_equal(count_notes(&f, VS_TRACKER_LATE), 1);
    answer_empty(&f);
    spin(&f, held); /* the next long poll is out */
    f.mute_polls = false;
    snprintf(f.tasks[0].state, sizeof(f.tasks[0].state), "success");
    release_read(&f);
    spin(&f, is_done1);
    assert_int_equal(f.done[0].err, 0);
    assert_int_equal(count_notes(&f, VS_TRACKER_ANSWERED), 1);
    assert_int_equal(count_notes(&f, VS_TRACKER_MISSED), 0);
    teardown(&f);
}

/* A read sent while the long poll was late answers after that long poll
 * failed: the task's end is found, and no miss is said of a long poll that
 * failed. */
static void test_late_read_after_a_failure_is_no_miss(void **state)
{
    struct fake f;
    struct ctx c;
    vmg_server_req *r;

    (void)state;
    late_power_on(&f, &c);
    f.hold_reads = true;
    spin(&f, read_held);
    r = f.held;
    f.held = NULL;
    vmg_server_respond(r, 500, "text/plain", "gone", 4);
    run_for(&f, 50);
    snprintf(f.tasks[0].state, sizeof(f.tasks[0].state), "success");
    release_read(&f);
    spin(&f, is_done1);
    assert_int_equal(f.done[0].err, 0);
    assert_int_equal(count_notes(&f, VS_TRACKER_MISSED), 0);
    teardown(&f);
}

/* The only task ended by a late read, the long poll still out and late:
 * nothing more is said (no "0 tasks" read each slow_check_ms). */
static void test_late_with_no_tasks_says_nothing(void **state)
{
    struct fake f;
    struct ctx c;

    (void)state;
    late_power_on(&f, &c);
    end_in_success(&f);
    assert_int_equal(count_notes(&f, VS_TRACKER_LATE), 1);
    run_for(&f, 1000); /* five more safety-net times */
    assert_non_null(f.held);
    assert_int_equal(count_notes(&f, VS_TRACKER_LATE), 1);
    teardown(&f);
}

/* A task that runs for long on a server that reports it and answers its
 * long polls (empty, each maxWaitSeconds) is never read: the long polls
 * alone follow it to its end. */
static void test_long_task_costs_only_long_polls(void **state)
{
    struct fake f;
    struct ctx c;

    (void)state;
    setup(&f, 8, 0);
    power_on_tracked(&f, &c, true);
    assert_string_equal(f.tasks[0].reported, "running");
    for (int i = 0; i < 5; i++) {
        answer_empty(&f);
        spin(&f, held);
    }
    end_task(&f, 0, "success", NULL);
    spin(&f, is_done1);
    assert_int_equal(f.done[0].err, 0);
    assert_int_equal(unit_calls_count(&f.calls, "RetrievePropertiesEx task"), 0);
    assert_true(unit_calls_count(&f.calls, "WaitForUpdatesEx") >= 7);
    teardown(&f);
}

/* The same server, and a change it lost: a task reported running, then
 * untold of for recheck_ms (400 ms here) while the long poll answers every
 * 100 ms, is read, at most once per recheck_ms; its end, read, finishes
 * the operation although no long poll reports it. */
static void test_reported_task_read_after_recheck(void **state)
{
    struct fake f;
    struct ctx c;

    (void)state;
    setup_timed(&f, 0, 0, 400);
    power_on_tracked(&f, &c, true);
    for (int i = 0; i < 12; i++) {
        run_for(&f, 100);
        spin(&f, held);
        answer_empty(&f);
    }
    spin(&f, held);
    assert_true(unit_calls_count(&f.calls, "RetrievePropertiesEx task") >= 2);
    assert_true(f.tasks[0].read_gap >= 300);
    /* The end, lost: no long poll reports it; a read finds it. */
    snprintf(f.tasks[0].state, sizeof(f.tasks[0].state), "success");
    snprintf(f.tasks[0].reported, sizeof(f.tasks[0].reported), "success");
    for (int i = 0; i < 10 && f.ndone == 0; i++) {
        run_for(&f, 100);
        if (f.held)
            answer_empty(&f);
    }
    spin(&f, is_done1);
    assert_int_equal(f.done[0].err, 0);
    /* Said: vCenter did not report that end. */
    assert_int_equal(f.nnotes, 1);
    assert_int_equal(f.notes[0].event, VS_TRACKER_MISSED);
    assert_string_equal(f.note_task[0], "task-0");
    assert_string_equal(f.note_op[0], "power-on vm-3"); /* what the log names */
    teardown(&f);
}

/* recheck_ms counts from the last report: a task reported queued, then
 * running 300 ms later, is not read 400 ms after it joined (recheck_ms 600,
 * the long poll answering every 100 ms meanwhile). */
static void test_recheck_counts_from_the_last_report(void **state)
{
    struct fake f;
    struct ctx c;

    (void)state;
    setup_timed(&f, 0, 0, 600);
    f.queued_first = true;
    power_on_tracked(&f, &c, true);
    run_for(&f, 300);
    end_task(&f, 0, "running", NULL);
    spin(&f, held);
    assert_string_equal(f.tasks[0].reported, "running");
    for (int i = 0; i < 4; i++) {
        run_for(&f, 100);
        spin(&f, held);
        answer_empty(&f);
    }
    spin(&f, held);
    assert_int_equal(unit_calls_count(&f.calls, "RetrievePropertiesEx task"), 0);
    end_in_success(&f);
    teardown(&f);
}

/* made_pcs2_tracked: a second collector was made, and task 0 is in its
 * view with the long poll held. */
static bool made_pcs2_tracked(const struct fake *f)
{
    return unit_calls_count(&f->calls, "CreatePropertyCollector") >= 2 && f->ntasks >= 1 &&
           f->tasks[0].filter_pc == f->pc_gen && f->tasks[0].filter && f->held != NULL;
}

/* A new session while the long poll is out (a read answered
 * NotAuthenticated, the collector gone with the session), and that long
 * poll then answers: the tracker makes a new collector and view at once,
 * not waiting on the old one, and the task's end is reported. */
static void test_new_session_during_a_long_poll(void **state)
{
    struct fake f;
    struct ctx c;

    (void)state;
    setup_timed(&f, 0, 0, 300);
    power_on_tracked(&f, &c, true);
    f.unauth_reads = 1;
    for (int i = 0; i < 20 && f.unauth_reads > 0; i++) {
        run_for(&f, 100);
        if (f.held)
            answer_empty(&f);
    }
    assert_int_equal(f.unauth_reads, 0);
    spin(&f, held);
    answer_empty(&f); /* the long poll on the old session's collector */
    spin(&f, made_pcs2_tracked);
    assert_int_equal(f.ndone, 0);
    end_in_success(&f);
    teardown(&f);
}

static void test_stale_state_after_end(void **state)
{
    struct fake f;
    struct ctx c = {0};
    struct vim_moref vm = vmref(3);

    (void)state;
    /* An end is final, whatever comes after it in the same UpdateSet. */
    setup(&f, 8, 0);
    f.stale_after_end = true;
    c.f = &f;
    assert_int_equal(vs_ops_power_on(f.ops, &vm, on_done, &c, NULL), 0);
    ends_in_success(&f);
    teardown(&f);
}

static void test_collector_lost(void **state)
{
    struct fake f;
    struct ctx c = {0};
    struct vim_moref vm = vmref(5);
    vmg_server_req *held;

    (void)state;
    /* The tracker's collector vanishes (a new session, a restart) while a
     * task runs, and the task ends meanwhile: the tasks are registered
     * again on a new collector, whose first read sees the end. */
    setup(&f, 8, 0);
    c.f = &f;
    assert_int_equal(vs_ops_power_on(f.ops, &vm, on_done, &c, NULL), 0);
    want_tasks = 1;
    want_held_tasks = 1;
    spin(&f, tracked);
    f.pc_gen = 2;
    f.tasks[0].filter = 0;
    snprintf(f.tasks[0].state, sizeof(f.tasks[0].state), "success");
    held = f.held;
    f.held = NULL;
    reply_fault(held, "ManagedObjectNotFound");
    spin(&f, is_done1);
    assert_int_equal(f.done[0].err, 0);
    assert_int_equal(unit_calls_count(&f.calls, "CreatePropertyCollector"), 2);
    teardown(&f);
}

/* The collector cannot be made again after the long poll failed: the
 * task runs on in vCenter, so the operation stays in flight and its task is
 * registered after the backoff; its own end is what the caller learns. */
static void test_tracking_failure_keeps_the_operation(void **state)
{
    struct fake f;
    struct ctx c = {0};
    struct vim_moref vm = vmref(5);
    vmg_server_req *held;

    (void)state;
    setup(&f, 8, 0);
    c.f = &f;
    assert_int_equal(vs_ops_power_on(f.ops, &vm, on_done, &c, NULL), 0);
    want_tasks = 1;
    want_held_tasks = 1;
    spin(&f, tracked);
    f.pc_gen = 2;
    f.pc_faults = 1;
    f.tasks[0].filter = 0;
    held = f.held;
    f.held = NULL;
    reply_fault(held, "ManagedObjectNotFound");
    spin(&f, made_pcs3);
    assert_int_equal(f.ndone, 0); /* not ended by the failure to follow it */
    end_task(&f, 0, "success", NULL);
    spin(&f, is_done1);
    assert_int_equal(f.done[0].err, 0);
    assert_int_equal(unit_calls_count(&f.calls, "CreatePropertyCollector"), 3);
    teardown(&f);
}

/* A folder is destroyed only when vCenter shows it empty right before:
 * Destroy_Task would destroy the VMs in it too. */
static void test_destroy_folder_only_when_empty(void **state)
{
    struct fake f;
    struct ctx c = {0};
    struct vim_moref folder;

    (void)state;
    assert_int_equal(vim_moref_set(&folder, "Folder", "group-50"), 0);
    setup(&f, 8, 0);
    f.instant = true;
    c.f = &f;
    /* Logged in first, as the inventory has the manager. */
    assert_int_equal(vs_ops_create_folder(f.ops, &placement.root_folder, "x", on_done, &c, NULL),
                     0);
    spin(&f, is_done1);
    f.folder_children = 1;
    assert_int_equal(vs_ops_destroy(f.ops, &folder, on_done, &c, NULL), 0);
    want_done = 2;
    spin(&f, done_enough);
    assert_int_equal(f.done[1].err, VMG_ECONFLICT);
    assert_non_null(strstr(f.done[1].message, "holds 1 object"));
    f.folder_children = 0;
    assert_int_equal(vs_ops_destroy(f.ops, &folder, on_done, &c, NULL), 0);
    want_done = 3;
    spin(&f, done_enough);
    assert_int_equal(f.done[2].err, 0);
    assert_int_equal(unit_calls_count(&f.calls, "Destroy_Task group-50"), 1);
    teardown(&f);
}

/* Held (the manager hands its lease over): what waits in the queue ends
 * canceled and nothing new is accepted, while a task already started is
 * still followed to its end. */
static void test_hold_starts_nothing_more(void **state)
{
    struct fake f;
    struct ctx c[3];
    struct vim_moref vm;

    (void)state;
    setup(&f, 1, 0);
    for (int i = 0; i < 3; i++) {
        vm = vmref(i + 1);
        c[i] = (struct ctx){&f, i};
        assert_int_equal(vs_ops_power_on(f.ops, &vm, on_done, &c[i], NULL), 0);
    }
    want_tasks = 1;
    want_held_tasks = 1;
    spin(&f, tracked);
    vs_ops_hold(f.ops);
    assert_int_equal(f.ndone, 2);
    assert_int_equal(f.done[0].err, VMG_ECANCELED);
    assert_int_equal(f.done[1].err, VMG_ECANCELED);
    vm = vmref(9);
    assert_int_equal(vs_ops_power_on(f.ops, &vm, on_done, &c[0], NULL), VMG_ECANCELED);
    end_task(&f, 0, "success", NULL);
    want_done = 3;
    spin(&f, done_enough);
    assert_int_equal(f.done[2].err, 0);
    assert_int_equal(f.done[2].tag, 0);
    assert_int_equal(unit_calls_count(&f.calls, "PowerOnVM_Task"), 1);
    teardown(&f);
}

/* three_tasks_filtered: the third task is in the view, and the request
 * that put it there was answered. */
static bool three_tasks_filtered(const struct fake *f)
{
    return f->ntasks >= 3 && f->tasks[2].filter != 0;
}

static bool modify_held(const struct fake *f)
{
    return f->nheld_modifies > 0;
}

static bool both_done(const struct fake *f)
{
    return f->ndone >= 3;
}

/* A new session replaces the tracker's collector while a task is tracked
 * on the old one and no long poll is out (the task that ended is being
 * removed from the view): the task registers again on the new collector,
 * and its end is reported. */
static void test_tracked_task_follows_a_new_session(void **state)
{
    struct fake f;
    struct ctx c[3];
    struct vim_moref vm;

    (void)state;
    setup(&f, 8, 0);
    for (int i = 0; i < 2; i++) {
        vm = vmref(i + 1);
        c[i] = (struct ctx){&f, i};
        assert_int_equal(vs_ops_power_on(f.ops, &vm, on_done, &c[i], NULL), 0);
    }
    want_tasks = 2;
    want_held_tasks = 2;
    spin(&f, tracked);
    /* B ends; its removal from the view hangs, so no long poll goes out. */
    f.hold_modifies = true;
    end_task(&f, 1, "success", NULL);
    spin(&f, modify_held);
    assert_int_equal(f.ndone, 1);
    /* The session is lost: C's method is refused, the session logs in
     * again, and C is tracked on a new collector. */
    f.unauth_tasks = 1;
    f.pc_gen = 2; /* the old collector went with the session */
    vm = vmref(3);
    c[2] = (struct ctx){&f, 2};
    assert_int_equal(vs_ops_power_on(f.ops, &vm, on_done, &c[2], NULL), 0);
    want_tasks = 3;
    want_held_tasks = 0;
    f.hold_modifies = false;
    spin(&f, three_tasks_filtered);
    for (int i = 0; i < f.nheld_modifies; i++)
        if (f.held_modifies[i])
            unit_soap_reply(
                f.held_modifies[i], 200,
                "<ModifyListViewResponse xmlns=\"urn:vim25\"></ModifyListViewResponse>");
    f.nheld_modifies = 0;
    end_task(&f, 0, "success", NULL);
    end_task(&f, 2, "success", NULL);
    spin(&f, both_done);
    assert_int_equal(f.done[1].err, 0);
    assert_int_equal(f.done[2].err, 0);
    teardown(&f);
}

static bool task0_left(const struct fake *f)
{
    return f->ntasks >= 1 && f->tasks[0].left;
}

static bool both_left(const struct fake *f)
{
    return f->ntasks >= 2 && f->tasks[0].left && f->tasks[1].left && f->ndone >= 2;
}

/* Tasks join the one view when they start and leave it once ended; the
 * others stay in it. One collector, one view and one filter serve all. */
static void test_view_add_remove(void **state)
{
    struct fake f;
    struct ctx c[2];

    (void)state;
    setup(&f, 8, 0);
    power_on(&f, c, 0);
    power_on(&f, c, 1);
    want_tasks = 2;
    want_held_tasks = 2;
    spin(&f, tracked);
    assert_false(f.tasks[0].left);
    assert_false(f.tasks[1].left);
    end_task(&f, 0, "success", NULL);
    spin(&f, task0_left);
    assert_int_equal(f.ndone, 1);
    assert_false(f.tasks[1].left); /* still followed */
    end_task(&f, 1, "success", NULL);
    spin(&f, both_left);
    assert_int_equal(f.done[0].err, 0);
    assert_int_equal(f.done[1].err, 0);
    assert_int_equal(f.removed, 2);
    assert_int_equal(unit_calls_count(&f.calls, "CreatePropertyCollector"), 1);
    assert_int_equal(unit_calls_count(&f.calls, "CreateListView"), 1);
    assert_int_equal(unit_calls_count(&f.calls, "CreateFilter"), 1);
    assert_int_equal(f.unsafe_modifies, 0);
    teardown(&f);
}

/* A task vCenter no longer knows, added to the view: the view does not
 * find it, nor does the read that follows; the outcome is unknown. */
static void test_task_the_view_does_not_find(void **state)
{
    struct fake f;
    struct ctx c = {0};
    struct vim_moref vm = vmref(4);

    (void)state;
    setup(&f, 8, 0);
    f.lost_tasks = true;
    c.f = &f;
    assert_int_equal(vs_ops_power_off(f.ops, &vm, on_done, &c, NULL), 0);
    spin(&f, is_done1);
    assert_int_equal(f.done[0].err, VMG_EUNKNOWN);
    assert_int_equal(unit_calls_count(&f.calls, "RetrievePropertiesEx task"), 1);
    teardown(&f);
}

/* The view refuses a task that vCenter still runs (its read says so): the
 * view is taken for broken, destroyed with its collector, and the tracker
 * is made anew after the backoff, where the task is followed to its end. */
static void test_view_refuses_a_running_task(void **state)
{
    struct fake f;
    struct ctx c = {0};
    struct vim_moref vm = vmref(4);

    (void)state;
    setup(&f, 8, 0);
    f.view_misses = 1;
    c.f = &f;
    assert_int_equal(vs_ops_power_on(f.ops, &vm, on_done, &c, NULL), 0);
    spin(&f, made_pcs2_tracked);
    assert_int_equal(f.ndone, 0);
    assert_int_equal(unit_calls_count(&f.calls, "DestroyPropertyCollector pc-1"), 1);
    assert_int_equal(unit_calls_count(&f.calls, "DestroyView list-1"), 1);
    end_task(&f, 0, "success", NULL);
    spin(&f, is_done1);
    assert_int_equal(f.done[0].err, 0);
    teardown(&f);
}

static bool two_on_new_view(const struct fake *f)
{
    return f->ntasks >= 2 && f->tasks[0].filter_pc == 2 && f->tasks[1].filter_pc == 2 &&
           f->tasks[0].filter && f->tasks[1].filter && f->held != NULL;
}

/* The view and the collector vanish while a task is followed (vCenter
 * restarted its services): the next ModifyListView finds no view; the
 * tracker is made anew, with every task in flight in the new view. */
static void test_view_lost(void **state)
{
    struct fake f;
    struct ctx c[2];

    (void)state;
    setup(&f, 8, 0);
    power_on(&f, c, 0);
    want_tasks = 1;
    want_held_tasks = 1;
    spin(&f, tracked);
    f.pc_gen = 2; /* pc-1 and list-1 are gone */
    power_on(&f, c, 1);
    spin(&f, two_on_new_view);
    assert_int_equal(f.ndone, 0);
    assert_int_equal(unit_calls_count(&f.calls, "CreateListView"), 2);
    assert_int_equal(unit_calls_count(&f.calls, "CreateFilter"), 2);
    end_task(&f, 0, "success", NULL);
    end_task(&f, 1, "error", "InvalidPowerState");
    want_done = 2;
    spin(&f, done_enough);
    assert_int_equal(f.done[0].err, 0);
    assert_int_equal(f.done[1].err, VMG_EFAULT);
    assert_string_equal(f.done[1].fault, "InvalidPowerState");
    teardown(&f);
}

/* A new session while a ModifyListView is out (answered NotAuthenticated;
 * sent again after the login, it finds no view): the tracker makes a new
 * collector and view at once, and the task's end is reported. */
static void test_new_session_during_a_view_change(void **state)
{
    struct fake f;
    struct ctx c[2];

    (void)state;
    setup(&f, 8, 0);
    f.unauth_modifies = 1;
    power_on(&f, c, 0);
    spin(&f, made_pcs2_tracked);
    assert_int_equal(f.ndone, 0);
    end_task(&f, 0, "success", NULL);
    spin(&f, is_done1);
    assert_int_equal(f.done[0].err, 0);
    power_on(&f, c, 1);
    want_tasks = 2;
    want_held_tasks = 2;
    spin(&f, tracked);
    end_task(&f, 1, "success", NULL);
    want_done = 2;
    spin(&f, done_enough);
    assert_int_equal(f.done[1].err, 0);
    assert_int_equal(unit_calls_count(&f.calls, "CreatePropertyCollector"), 2);
    teardown(&f);
}

static bool tasks3(const struct fake *f)
{
    return f->ntasks >= 3;
}

static bool tasks2(const struct fake *f)
{
    return f->ntasks >= 2;
}

static bool bc_tracked(const struct fake *f)
{
    return f->ndone >= 1 && f->tasks[1].filter && f->tasks[2].filter && f->held != NULL;
}

/* vcsim's lock order: a change of the view while a long poll is out can
 * deadlock vcsim (the long poll collects on every tick). Tasks that start
 * while a long poll is out (here one that reports nothing: the view's
 * tasks run on) cancel it and join the view once it has answered, never by
 * a change during it. */
static void test_view_changes_wait_for_the_long_poll(void **state)
{
    struct fake f;
    struct ctx c[3];
    int version;

    (void)state;
    setup(&f, 8, 0);
    f.quiet_new_filters = true;
    f.initial_at_once = true;
    power_on(&f, c, 0);
    want_tasks = 1;
    want_held_tasks = 1;
    spin(&f, tracked);
    version = f.asked_version;
    assert_true(version > 0);
    power_on(&f, c, 1);
    spin(&f, tasks2);
    power_on(&f, c, 2);
    spin(&f, tasks3);
    for (int i = 0; i < 30; i++)
        uv_run(&f.loop, UV_RUN_NOWAIT), usleep(50000);
    assert_int_equal(f.unsafe_modifies, 0);
    assert_true(f.tasks[1].filter && f.tasks[2].filter);
    assert_true(f.cancels >= 1);
    assert_non_null(f.held); /* polling again, the cancel no failure */
    assert_int_equal(f.asked_version, version);
    assert_int_equal(unit_calls_count(&f.calls, "CreatePropertyCollector"), 1);
    end_task(&f, 0, "success", NULL);
    spin(&f, bc_tracked);
    assert_int_equal(f.unsafe_modifies, 0);
    end_task(&f, 1, "success", NULL);
    end_task(&f, 2, "success", NULL);
    want_done = 3;
    spin(&f, done_enough);
    assert_int_equal(f.done[1].err, 0);
    assert_int_equal(f.done[2].err, 0);
    teardown(&f);
}

static void test_create_folder(void **state)
{
    struct fake f;
    struct ctx c = {0};

    (void)state;
    setup(&f, 8, 0);
    c.f = &f;
    assert_int_equal(vs_ops_create_folder(f.ops, &placement.root_folder, "web", on_done, &c, NULL),
                     0);
    spin(&f, is_done1);
    assert_int_equal(f.done[0].err, 0);
    assert_string_equal(f.done[0].result, "group-77");
    assert_false(f.done[0].existed);
    assert_string_equal(f.done[0].task, "");
    /* It exists: DuplicateName is success, with the folder that exists. */
    f.folder_exists = true;
    assert_int_equal(vs_ops_create_folder(f.ops, &placement.root_folder, "web", on_done, &c, NULL),
                     0);
    want_done = 2;
    spin(&f, done_enough);
    assert_int_equal(f.done[1].err, 0);
    assert_string_equal(f.done[1].result, "group-41");
    assert_true(f.done[1].existed);
    /* A VM holds the name: not a folder that exists, a conflict. */
    assert_int_equal(vs_ops_create_folder(f.ops, &placement.root_folder, "tmpl", on_done, &c, NULL),
                     0);
    want_done = 3;
    spin(&f, done_enough);
    assert_int_equal(f.done[2].err, VMG_ECONFLICT);
    assert_string_equal(f.done[2].fault, "DuplicateName");
    assert_string_equal(f.done[2].result, "");
    assert_non_null(strstr(f.done[2].message, "a VirtualMachine (vm-40) holds that name"));
    teardown(&f);
}

/* The mark keys are the caller's: without them, a clone that asks for
 * marks is refused; a key too long is refused at vs_ops_new. */
static void test_marks_are_inputs(void **state)
{
    struct fake f;
    struct ctx c = {0};
    struct vim_moref folder;
    struct vs_ops_config bare = {0};
    struct vs_ops_config longer = {0};
    struct vs_clone_spec spec = {
        .template_name = "tmpl", .folder = &folder, .name = "web-0", .mark_uid = "uid-123"};
    char longkey[VS_NAME_MAX + 1];
    vs_ops *o;
    int e = 0;

    (void)state;
    setup(&f, 8, 0);
    assert_int_equal(vim_moref_set(&folder, "Folder", "group-41"), 0);
    c.f = &f;
    o = vs_ops_new(&f.loop, f.s, NULL, &bare, &e);
    assert_non_null(o);
    assert_int_equal(vs_ops_clone(o, &spec, on_done, &c, NULL), -EINVAL);
    spec.mark_uid = NULL;
    spec.mark_template = "tmpl";
    assert_int_equal(vs_ops_clone(o, &spec, on_done, &c, NULL), -EINVAL);
    vs_ops_close(o, NULL, NULL);
    memset(longkey, 'k', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    longer.marks.uid = longkey;
    assert_null(vs_ops_new(&f.loop, f.s, NULL, &longer, &e));
    assert_int_equal(e, -EINVAL);
    assert_int_equal(f.ndone, 0);
    teardown(&f);
}

/* web0 is the clone of test_clone: web-0 into folder, 2 CPUs, 2 GiB,
 * both marks. */
static struct vs_clone_spec web0(const struct vim_moref *folder)
{
    return (struct vs_clone_spec){.template_name = "tmpl",
                                  .folder = folder,
                                  .name = "web-0",
                                  .num_cpus = 2,
                                  .memory_mb = 2048,
                                  .mark_uid = "uid-123",
                                  .mark_template = "tmpl"};
}

/* clone_instance_uuid checks that the clone request body asks for an
 * instanceUuid, a version 4 UUID, and writes the same in the instance
 * mark; copies it into uuid. */
static void clone_instance_uuid(const char *body, char uuid[VS_UUID_LEN + 1])
{
    static const char open[] = "<instanceUuid>";
    const char *p = strstr(body, open), *mark;
    char want[256];

    assert_non_null(p);
    p += strlen(open);
    assert_int_equal(strspn(p, "0123456789abcdef-"), VS_UUID_LEN);
    assert_true(p[VS_UUID_LEN] == '<');
    memcpy(uuid, p, VS_UUID_LEN);
    uuid[VS_UUID_LEN] = '\0';
    for (int i = 0; i < VS_UUID_LEN; i++)
        assert_true((uuid[i] == '-') == (i == 8 || i == 13 || i == 18 || i == 23));
    assert_true(uuid[14] == '4');
    assert_non_null(strchr("89ab", uuid[19]));
    assert_true(p < strstr(body, "<numCPUs>")); /* the schema's order */
    mark = strstr(body, "<key>" MARK_INSTANCE_KEY "</key>");
    assert_non_null(mark);
    snprintf(want, sizeof(want), "<value xsi:type=\"xsd:string\">%s</value>", uuid);
    assert_non_null(strstr(mark, want));
}

static void test_clone(void **state)
{
    struct fake f;
    struct ctx c = {0};
    struct vim_moref folder;
    struct vs_clone_spec spec = web0(&folder);
    char first[VS_UUID_LEN + 1], second[VS_UUID_LEN + 1];

    (void)state;
    setup(&f, 8, 0);
    assert_int_equal(vim_moref_set(&folder, "Folder", "group-41"), 0);
    c.f = &f;
    assert_int_equal(vs_ops_clone(f.ops, &spec, on_done, &c, NULL), 0);
    want_tasks = 1;
    want_held_tasks = 1;
    spin(&f, tracked);
    assert_non_null(strstr(f.clone_body, "<_this type=\"VirtualMachine\">vm-40</_this>"));
    assert_non_null(strstr(f.clone_body, "<folder type=\"Folder\">group-41</folder>"));
    assert_non_null(strstr(f.clone_body, "<name>web-0</name>"));
    assert_non_null(strstr(f.clone_body, "<pool type=\"ResourcePool\">resgroup-9</pool>"));
    assert_non_null(strstr(f.clone_body, "<numCPUs>2</numCPUs>"));
    assert_non_null(strstr(f.clone_body, "<memoryMB>2048</memoryMB>"));
    assert_non_null(strstr(f.clone_body, "<key>" MARK_UID_KEY "</key>"));
    assert_non_null(strstr(f.clone_body, ">uid-123</value>"));
    assert_non_null(strstr(f.clone_body, "<key>" MARK_TEMPLATE_KEY "</key>"));
    assert_non_null(strstr(f.clone_body, "<powerOn>true</powerOn>"));
    assert_null(strstr(f.clone_body, "<datastore"));
    /* A random instanceUuid, asked for and written in the instance mark. */
    clone_instance_uuid(f.clone_body, first);
    end_task(&f, 0, "success", NULL);
    spin(&f, is_done1);
    assert_int_equal(f.done[0].err, 0);
    assert_string_equal(f.done[0].result, "vm-90");
    /* A second clone of the same template does not look it up again. */
    spec.name = "web-1";
    assert_int_equal(vs_ops_clone(f.ops, &spec, on_done, &c, NULL), 0);
    want_tasks = 2;
    want_held_tasks = 2;
    spin(&f, tracked);
    assert_int_equal(unit_calls_count(&f.calls, "FindChild tmpl"), 1);
    clone_instance_uuid(f.clone_body, second);
    assert_string_not_equal(first, second);
    end_task(&f, 1, "success", NULL);
    want_done = 2;
    spin(&f, done_enough);
    teardown(&f);
}

/* A clone's other extraConfig entries go into its spec after the marks,
 * escaped; too many, an empty key, or a mark's key are refused. */
static void test_clone_extra(void **state)
{
    struct fake f;
    struct ctx c = {0};
    struct vim_moref folder;
    struct vim_option extra[VS_CLONE_MAX_EXTRA + 1];
    struct vs_clone_spec spec = {.template_name = "tmpl",
                                 .folder = &folder,
                                 .name = "web-0",
                                 .mark_uid = "uid-123",
                                 .extra = extra,
                                 .n_extra = 2};

    (void)state;
    setup(&f, 8, 0);
    assert_int_equal(vim_moref_set(&folder, "Folder", "group-41"), 0);
    c.f = &f;
    for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++)
        extra[i] = (struct vim_option){.key = "guestinfo.x", .value = "v"};
    extra[0] = (struct vim_option){
        .key = "guestinfo.userdata", .value = "I2Nsb3VkLWNvbmZpZwo=", .secret = true};
    extra[1] = (struct vim_option){.key = "guestinfo.note", .value = "a<b&c", .secret = true};
    /* One secret a clone at most. */
    assert_int_equal(vs_ops_clone(f.ops, &spec, on_done, &c, NULL), -EINVAL);
    extra[1].secret = false;
    spec.n_extra = VS_CLONE_MAX_EXTRA + 1;
    assert_int_equal(vs_ops_clone(f.ops, &spec, on_done, &c, NULL), -EINVAL);
    spec.n_extra = 2;
    extra[1].key = "";
    assert_int_equal(vs_ops_clone(f.ops, &spec, on_done, &c, NULL), -EINVAL);
    extra[1].key = MARK_UID_KEY;
    assert_int_equal(vs_ops_clone(f.ops, &spec, on_done, &c, NULL), -EINVAL);
    extra[1].key = MARK_INSTANCE_KEY;
    assert_int_equal(vs_ops_clone(f.ops, &spec, on_done, &c, NULL), -EINVAL);
    extra[1].key = "guestinfo.note";
    spec.extra = NULL;
    assert_int_equal(vs_ops_clone(f.ops, &spec, on_done, &c, NULL), -EINVAL);
    spec.extra = extra;
    assert_int_equal(vs_ops_clone(f.ops, &spec, on_done, &c, NULL), 0);
    /* Copied: the caller's strings may go at once. */
    extra[0].value = "gone";
    want_tasks = 1;
    want_held_tasks = 1;
    spin(&f, tracked);
    assert_non_null(strstr(f.clone_body, "<key>" MARK_UID_KEY "</key>"));
    assert_non_null(strstr(f.clone_body, "<key>guestinfo.userdata</key>"));
    /* The secret one is spliced in at serialization, typed like the others. */
    assert_non_null(
        strstr(f.clone_body, "<value xsi:type=\"xsd:string\">I2Nsb3VkLWNvbmZpZwo=</value>"));
    assert_null(strstr(f.clone_body, "<!--"));
    assert_non_null(strstr(f.clone_body, ">a&lt;b&amp;c</value>"));
    assert_null(strstr(f.clone_body, "gone"));
    end_task(&f, 0, "success", NULL);
    spin(&f, is_done1);
    assert_int_equal(f.done[0].err, 0);
    teardown(&f);
}

/* run_one starts nothing itself: it waits for the n-th task, ends it with
 * state (and fault), and waits for the n-th end. */
static void run_one(struct fake *f, int n, const char *state, const char *fault)
{
    want_tasks = n;
    want_held_tasks = n;
    spin(f, tracked);
    end_task(f, n - 1, state, fault);
    want_done = n;
    spin(f, done_enough);
}

/* A successful operation carries what it did, put in the inventory's cache
 * as vs_inventory_assume would: the clone's VM with the name, folder, size
 * and marks of its spec, powered on; a power-off, a new size, an instance
 * mark, a VM gone. A failed one changes nothing. */
static void test_results_assumed(void **state)
{
    static const struct vs_mark_keys keys = {MARK_UID_KEY, MARK_TEMPLATE_KEY, MARK_INSTANCE_KEY};
    struct fake f;
    struct ctx c = {0};
    struct vim_moref folder, vm;
    struct vs_clone_spec spec = web0(&folder);
    const struct vs_obj *o;

    (void)state;
    setup(&f, 8, 0);
    f.cache = vs_cache_new("group-38", 0, &keys, NULL, NULL);
    assert_non_null(f.cache);
    assert_int_equal(vim_moref_set(&folder, "Folder", "group-41"), 0);
    c.f = &f;
    assert_int_equal(vs_ops_clone(f.ops, &spec, on_done, &c, NULL), 0);
    run_one(&f, 1, "success", NULL);
    assert_int_equal(f.done[0].err, 0);
    assert_int_equal(f.assumed, 1);
    o = vs_cache_get(f.cache, "vm-90");
    assert_non_null(o);
    assert_string_equal(o->name, "web-0");
    assert_string_equal(o->parent, "group-41");
    assert_true(o->powered_on);
    assert_int_equal(o->num_cpu, 2);
    assert_int_equal(o->memory_mb, 2048);
    assert_false(o->is_template);
    assert_true(o->has_mark_uid);
    assert_string_equal(o->mark_uid, "uid-123");
    assert_true(o->has_mark_template);
    assert_string_equal(o->mark_template, "tmpl");
    /* Not the instanceUuid asked for, nor its mark: vCenter's word decides
     * whether the VM has it (the watch's). */
    assert_non_null(strstr(f.clone_body, "<instanceUuid>"));
    assert_string_equal(o->instance_uuid, "");
    assert_false(o->has_mark_instance);

    vm = vmref(90);
    assert_int_equal(vs_ops_power_off(f.ops, &vm, on_done, &c, NULL), 0);
    run_one(&f, 2, "success", NULL);
    assert_int_equal(f.assumed, 2);
    assert_false(vs_cache_get(f.cache, "vm-90")->powered_on);
    assert_string_equal(vs_cache_get(f.cache, "vm-90")->power_state, "poweredOff");

    assert_int_equal(vs_ops_power_on(f.ops, &vm, on_done, &c, NULL), 0);
    run_one(&f, 3, "error", "InvalidPowerState");
    assert_int_equal(f.done[2].err, VMG_EFAULT);
    assert_int_equal(f.assumed, 2);
    assert_false(vs_cache_get(f.cache, "vm-90")->powered_on);

    assert_int_equal(vs_ops_reconfigure(f.ops, &vm, 4, 0, on_done, &c, NULL), 0);
    run_one(&f, 4, "success", NULL);
    assert_int_equal(f.assumed, 3);
    assert_int_equal(vs_cache_get(f.cache, "vm-90")->num_cpu, 4);
    assert_int_equal(vs_cache_get(f.cache, "vm-90")->memory_mb, 2048); /* not asked */

    /* The instance mark of a VM cloned before it: the mark alone, its
     * value the VM's own instanceUuid, which is left as it is. */
    assert_int_equal(vs_ops_mark_instance(f.ops, &vm, "", on_done, &c, NULL), -EINVAL);
    assert_int_equal(vs_ops_mark_instance(f.ops, &vm, "4213abcd-0000-0000-0000-0000000000001",
                                          on_done, &c, NULL),
                     -EINVAL); /* longer than a UUID */
    assert_int_equal(
        vs_ops_mark_instance(f.ops, &vm, "4213abcd-0000-0000-0000-000000000001", on_done, &c, NULL),
        0);
    run_one(&f, 5, "success", NULL);
    assert_non_null(strstr(f.reconfig_body, "<key>" MARK_INSTANCE_KEY "</key>"));
    assert_non_null(strstr(f.reconfig_body, ">4213abcd-0000-0000-0000-000000000001</value>"));
    assert_null(strstr(f.reconfig_body, "<instanceUuid>"));
    assert_null(strstr(f.reconfig_body, "<numCPUs>"));
    assert_null(strstr(f.reconfig_body, "<memoryMB>"));
    assert_int_equal(f.assumed, 4);
    o = vs_cache_get(f.cache, "vm-90");
    assert_true(o->has_mark_instance);
    assert_string_equal(o->mark_instance, "4213abcd-0000-0000-0000-000000000001");
    assert_int_equal(o->num_cpu, 4);

    assert_int_equal(vs_ops_destroy(f.ops, &vm, on_done, &c, NULL), 0);
    run_one(&f, 6, "success", NULL);
    assert_int_equal(f.assumed, 5);
    assert_null(vs_cache_get(f.cache, "vm-90"));
    teardown(&f);
    vs_cache_free(f.cache);
}

/* A VM operation vCenter answers ManagedObjectNotFound has the VM read
 * back: the cache may still hold it, and nothing else would remove it. A
 * failure of another kind does not. */
static void test_vanished_vm_read_back(void **state)
{
    struct fake f;
    struct ctx c = {0};
    struct vim_moref vm = vmref(7);

    (void)state;
    setup(&f, 8, 0);
    c.f = &f;
    f.gone_vm = "vm-7";
    assert_int_equal(vs_ops_power_on(f.ops, &vm, on_done, &c, NULL), 0);
    want_done = 1;
    spin(&f, done_enough);
    assert_int_equal(f.done[0].err, VMG_ENOTFOUND);
    assert_string_equal(f.read_back, "vm-7");

    f.read_back[0] = '\0';
    vm = vmref(8);
    assert_int_equal(vs_ops_power_on(f.ops, &vm, on_done, &c, NULL), 0);
    want_tasks = 1;
    want_held_tasks = 1;
    spin(&f, tracked);
    end_task(&f, 0, "error", "InvalidPowerState");
    want_done = 2;
    spin(&f, done_enough);
    assert_int_equal(f.done[1].err, VMG_EFAULT);
    assert_string_equal(f.read_back, "");
    teardown(&f);
}

/* A clone that fails with DuplicateName names the object that holds the
 * name: a VM is read back (the cache may not show it, and the owner would
 * clone it again); anything else is a conflict, said with what it is;
 * without the object, the fault alone. */
static void test_clone_duplicate_name_names_the_holder(void **state)
{
    static const struct {
        const char *object, *result, *read_back;
        bool existed;
        int err;
        const char *message;
    } rows[] = {
        {"VirtualMachine vm-77", "vm-77", "vm-77", true, VMG_EFAULT, "the DuplicateName message"},
        {"Folder group-v9", "group-v9", "", true, VMG_ECONFLICT,
         "clone web-0: a Folder (group-v9) holds that name in the folder"},
        {"", "", "", false, VMG_EFAULT, "the DuplicateName message"},
    };
    struct fake f;
    struct ctx c = {0};
    struct vim_moref folder;
    struct vs_clone_spec spec = web0(&folder);

    (void)state;
    setup(&f, 8, 0);
    assert_int_equal(vim_moref_set(&folder, "Folder", "group-41"), 0);
    c.f = &f;
    for (int i = 0; i < 3; i++) {
        f.read_back[0] = '\0';
        assert_int_equal(vs_ops_clone(f.ops, &spec, on_done, &c, NULL), 0);
        want_tasks = i + 1;
        want_held_tasks = 1;
        spin(&f, tracked);
        snprintf(f.tasks[i].fault_object, sizeof(f.tasks[i].fault_object), "%s", rows[i].object);
        end_task(&f, i, "error", "DuplicateName");
        want_done = i + 1;
        spin(&f, done_enough);
        assert_int_equal(f.done[i].err, rows[i].err);
        assert_non_null(strstr(f.done[i].message, rows[i].message));
        assert_string_equal(f.done[i].fault, "DuplicateName");
        assert_string_equal(f.done[i].result, rows[i].result);
        assert_int_equal(f.done[i].existed, rows[i].existed);
        assert_string_equal(f.read_back, rows[i].read_back);
    }
    teardown(&f);
}

static void test_clone_template_missing(void **state)
{
    struct fake f;
    struct ctx c = {0};
    struct vim_moref folder;
    struct vs_clone_spec spec = {.template_name = "tmpl", .folder = &folder, .name = "web-0"};

    (void)state;
    setup(&f, 8, 0);
    f.template_missing = true;
    assert_int_equal(vim_moref_set(&folder, "Folder", "group-41"), 0);
    c.f = &f;
    assert_int_equal(vs_ops_clone(f.ops, &spec, on_done, &c, NULL), 0);
    spin(&f, is_done1);
    assert_int_equal(f.done[0].err, VMG_ENOTFOUND);
    assert_non_null(strstr(f.done[0].message, "template \"tmpl\" not found in /DC0/vm"));
    assert_int_equal(f.ntasks, 0); /* no clone was tried */
    teardown(&f);
}

/* A VM that is not a template is never cloned, whether the VM folder holds
 * it or a listing finds it. */
static void test_clone_from_a_plain_vm_refused(void **state)
{
    struct fake f;
    struct ctx c = {0};
    struct vim_moref folder;
    struct vs_clone_spec spec = {.template_name = "tmpl", .folder = &folder, .name = "web-0"};

    (void)state;
    setup(&f, 8, 0);
    f.template_plain = true;
    assert_int_equal(vim_moref_set(&folder, "Folder", "group-41"), 0);
    c.f = &f;
    assert_int_equal(vs_ops_clone(f.ops, &spec, on_done, &c, NULL), 0);
    spin(&f, is_done1);
    assert_int_equal(f.done[0].err, VMG_ECONFIG);
    assert_non_null(
        strstr(f.done[0].message, "template \"tmpl\" is a virtual machine, not a template"));
    assert_int_equal(f.ntasks, 0);
    assert_int_equal(unit_calls_count(&f.calls, "CloneVM_Task"), 0);
    teardown(&f);
}

/* clone_one clones spec to its end (its task succeeds), as the n-th
 * operation done. */
static void clone_one(struct fake *f, struct ctx *c, struct vs_clone_spec *spec, int n)
{
    assert_int_equal(vs_ops_clone(f->ops, spec, on_done, c, NULL), 0);
    want_tasks = n;
    want_held_tasks = n;
    spin(f, tracked);
    end_task(f, n - 1, "success", NULL);
    want_done = n;
    spin(f, done_enough);
    assert_int_equal(f->done[n - 1].err, 0);
}

/* A template resolved once and then turned into a VM (to patch it, say)
 * is not cloned from the cache: the next clone is refused as the first
 * resolution would refuse it, and no CloneVM_Task is sent. */
static void test_cached_template_turned_into_a_vm_refused(void **state)
{
    struct fake f;
    struct ctx c = {0};
    struct vim_moref folder;
    struct vs_clone_spec spec = {.template_name = "tmpl", .folder = &folder, .name = "web-0"};

    (void)state;
    setup(&f, 8, 0);
    assert_int_equal(vim_moref_set(&folder, "Folder", "group-41"), 0);
    c.f = &f;
    clone_one(&f, &c, &spec, 1);
    assert_int_equal(unit_calls_count(&f.calls, "CloneVM_Task"), 1);

    f.template_plain = true;
    spec.name = "web-1";
    assert_int_equal(vs_ops_clone(f.ops, &spec, on_done, &c, NULL), 0);
    want_done = 2;
    spin(&f, done_enough);
    assert_int_equal(f.done[1].err, VMG_ECONFIG);
    assert_non_null(
        strstr(f.done[1].message, "template \"tmpl\" is a virtual machine, not a template"));
    assert_int_equal(unit_calls_count(&f.calls, "CloneVM_Task"), 1);
    assert_int_equal(f.ntasks, 1);
    teardown(&f);
}

/* A cached template moved to another folder (the operator's root folder,
 * say) is looked up again before it is cloned from. */
static void test_cached_template_moved_looked_up_again(void **state)
{
    struct fake f;
    struct ctx c = {0};
    struct vim_moref folder;
    struct vs_clone_spec spec = {.template_name = "tmpl", .folder = &folder, .name = "web-0"};

    (void)state;
    setup(&f, 8, 0);
    assert_int_equal(vim_moref_set(&folder, "Folder", "group-41"), 0);
    c.f = &f;
    clone_one(&f, &c, &spec, 1);
    assert_int_equal(unit_calls_count(&f.calls, "FindChild tmpl"), 1);
    /* Unmoved: the cache serves. */
    spec.name = "web-1";
    clone_one(&f, &c, &spec, 2);
    assert_int_equal(unit_calls_count(&f.calls, "FindChild tmpl"), 1);
    /* Moved: looked up again. */
    f.template_parent = "group-38";
    spec.name = "web-2";
    clone_one(&f, &c, &spec, 3);
    assert_int_equal(unit_calls_count(&f.calls, "FindChild tmpl"), 2);
    teardown(&f);
}

/* An inventory path is confined to the datacenter's VM folder: refused as
 * written, without asking vCenter. */
static void test_clone_path_outside_the_datacenter_refused(void **state)
{
    static const char *const paths[] = {"/DC1/vm/tmpl", "/DC0/host/tmpl", "/tmpl", "/DC0"};
    struct fake f;
    struct ctx c = {0};
    struct vim_moref folder;
    struct vs_clone_spec spec = {.folder = &folder, .name = "web-0"};

    (void)state;
    setup(&f, 8, 0);
    assert_int_equal(vim_moref_set(&folder, "Folder", "group-41"), 0);
    c.f = &f;
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        spec.template_name = paths[i];
        assert_int_equal(vs_ops_clone(f.ops, &spec, on_done, &c, NULL), 0);
        /* It ends from the loop's next turn (spin would then wait for I/O
         * that never comes). */
        assert_int_equal(f.ndone, (int)i);
        uv_run(&f.loop, UV_RUN_NOWAIT);
        assert_int_equal(f.ndone, (int)i + 1);
        assert_int_equal(f.done[i].err, VMG_ECONFIG);
        assert_non_null(strstr(f.done[i].message, "is outside datacenter DC0"));
    }
    assert_int_equal(unit_calls_count(&f.calls, "FindChild"), 0);
    assert_int_equal(f.ntasks, 0);
    teardown(&f);
}

static void test_queue_bound_and_close(void **state)
{
    struct fake f;
    struct ctx c[4];
    vs_op *op = NULL;

    (void)state;
    setup(&f, 1, 3);
    for (int i = 0; i < 3; i++) {
        struct vim_moref vm = vmref(i);
        c[i] = (struct ctx){&f, i};
        assert_int_equal(vs_ops_power_on(f.ops, &vm, on_done, &c[i], i == 2 ? &op : NULL), 0);
    }
    {
        struct vim_moref vm = vmref(9);
        c[3] = (struct ctx){&f, 3};
        assert_int_equal(vs_ops_power_on(f.ops, &vm, on_done, &c[3], NULL), -ENOSPC);
        assert_int_equal(vs_ops_power_on(f.ops, NULL, on_done, &c[3], NULL), -EINVAL);
        assert_int_equal(vs_ops_reconfigure(f.ops, &vm, 0, 0, on_done, &c[3], NULL), -EINVAL);
    }
    assert_string_equal(vs_op_kind_name(vs_op_kind(op)), "power-on");
    assert_string_equal(vs_op_target(op), "vm-2");
    /* A queued operation canceled: its callback runs now. */
    vs_op_cancel(op);
    assert_int_equal(f.ndone, 1);
    assert_int_equal(f.done[0].err, VMG_ECANCELED);
    assert_int_equal(f.done[0].tag, 2);
    want_tasks = 1;
    want_held_tasks = 1;
    spin(&f, tracked);
    assert_int_equal(vs_ops_inflight(f.ops), 1);
    assert_int_equal(vs_ops_queued(f.ops), 1);
    /* Closing ends the running one and the queued one, now. */
    vs_ops_close(f.ops, NULL, NULL);
    assert_int_equal(f.ndone, 3);
    assert_int_equal(f.done[1].err, VMG_ECANCELED);
    assert_int_equal(f.done[2].err, VMG_ECANCELED);
    f.ops = NULL;
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound_and_fifo),
        cmocka_unit_test(test_task_error),
        cmocka_unit_test(test_task_ended_before_filter),
        cmocka_unit_test(test_quiet_filter_then_end),
        cmocka_unit_test(test_unreported_task_read_while_others_answer),
        cmocka_unit_test(test_stale_state_after_end),
        cmocka_unit_test(test_slow_long_poll_reads_the_tasks),
        cmocka_unit_test(test_late_long_poll_answers),
        cmocka_unit_test(test_late_by_the_call_timeout),
        cmocka_unit_test(test_late_read_after_the_answer_is_no_miss),
        cmocka_unit_test(test_late_read_after_a_failure_is_no_miss),
        cmocka_unit_test(test_late_with_no_tasks_says_nothing),
        cmocka_unit_test(test_long_task_costs_only_long_polls),
        cmocka_unit_test(test_reported_task_read_after_recheck),
        cmocka_unit_test(test_recheck_counts_from_the_last_report),
        cmocka_unit_test(test_new_session_during_a_long_poll),
        cmocka_unit_test(test_collector_lost),
        cmocka_unit_test(test_tracking_failure_keeps_the_operation),
        cmocka_unit_test(test_destroy_folder_only_when_empty),
        cmocka_unit_test(test_hold_starts_nothing_more),
        cmocka_unit_test(test_tracked_task_follows_a_new_session),
        cmocka_unit_test(test_view_add_remove),
        cmocka_unit_test(test_task_the_view_does_not_find),
        cmocka_unit_test(test_view_refuses_a_running_task),
        cmocka_unit_test(test_view_lost),
        cmocka_unit_test(test_new_session_during_a_view_change),
        cmocka_unit_test(test_view_changes_wait_for_the_long_poll),
        cmocka_unit_test(test_create_folder),
        cmocka_unit_test(test_clone),
        cmocka_unit_test(test_results_assumed),
        cmocka_unit_test(test_clone_extra),
        cmocka_unit_test(test_marks_are_inputs),
        cmocka_unit_test(test_vanished_vm_read_back),
        cmocka_unit_test(test_clone_duplicate_name_names_the_holder),
        cmocka_unit_test(test_clone_template_missing),
        cmocka_unit_test(test_clone_from_a_plain_vm_refused),
        cmocka_unit_test(test_cached_template_turned_into_a_vm_refused),
        cmocka_unit_test(test_cached_template_moved_looked_up_again),
        cmocka_unit_test(test_clone_path_outside_the_datacenter_refused),
        cmocka_unit_test(test_queue_bound_and_close),
    };
    int r;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    r = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return r;
}
