/* test_planner.c: the planner's rules, one table row each, then the quiet
 * in-sync case, and a simulation that drives the planner against a small
 * fake vCenter (operations take one round to finish) through a whole life:
 * create, scale up, resize, change template, scale down, repair, delete,
 * checking at every step that it never over-creates, never takes down more
 * than one replica for a resize, and never touches a VM it did not create. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/naming.h"
#include "controller/planner.h"
#include "controller/vmgroup.h"

#define UID "uid-web"
#define OTHER "uid-other"
#define NOW "2024-05-01T12:00:00Z"
#define LATER "2024-05-01T13:00:00Z"

/* make_group builds the JSON the API server would send and decodes it. */
static struct vmgroup *make_group(int cpu, int memory, int replicas, const char *tmpl, bool fin,
                                  bool deleting, const cJSON *status)
{
    cJSON *obj = cJSON_CreateObject(), *meta, *spec, *fins;
    struct vmgroup *g = NULL;
    char err[256] = "";

    meta = cJSON_AddObjectToObject(obj, "metadata");
    cJSON_AddStringToObject(meta, "name", "web");
    cJSON_AddStringToObject(meta, "namespace", "default");
    cJSON_AddStringToObject(meta, "uid", UID);
    cJSON_AddStringToObject(meta, "resourceVersion", "7");
    cJSON_AddNumberToObject(meta, "generation", 3);
    if (deleting)
        cJSON_AddStringToObject(meta, "deletionTimestamp", "2024-05-01T11:00:00Z");
    fins = cJSON_AddArrayToObject(meta, "finalizers");
    cJSON_AddItemToArray(fins, cJSON_CreateString("other.example.com/keep"));
    if (fin)
        cJSON_AddItemToArray(fins, cJSON_CreateString(VMGROUP_FINALIZER));
    spec = cJSON_AddObjectToObject(obj, "spec");
    cJSON_AddNumberToObject(spec, "cpu", cpu);
    cJSON_AddNumberToObject(spec, "memory", memory);
    cJSON_AddNumberToObject(spec, "replicas", replicas);
    cJSON_AddStringToObject(spec, "template", tmpl);
    if (status)
        cJSON_AddItemToObject(obj, "status", cJSON_Duplicate(status, true));
    if (vmgroup_from_json(obj, &g, err, sizeof(err)) != 0)
        fail_msg("make_group: %s", err);
    cJSON_Delete(obj);
    return g;
}

/* A VM in a table row; zero fields mean "as the spec wants": marked with the
 * group's UID, cloned from its template, sized as declared, on. */
struct tvm {
    const char *name;
    const char *mark; /* NULL: UID; "": unmarked */
    const char *tmpl; /* NULL: the spec's */
    bool off;
    int cpu;     /* 0: spec */
    int mem_gib; /* 0: spec */
    uint64_t order;
    bool inflight;
    bool failed;
    const char *ref;   /* vCenter's id; NULL: none */
    bool elsewhere;    /* outside the group's folder, found by its mark */
    const char *iu;    /* its instanceUuid; NULL: none known */
    const char *imark; /* its instance mark; NULL: none (cloned before that mark) */
    bool marking;      /* its instance mark is in flight (and nothing else) */
    uint64_t mark_seq; /* its instance mark failed lately: when (larger is more recent) */
};

enum { F_PRESENT = 0, F_ABSENT, F_UNKNOWN };

struct tcase {
    const char *title;
    int cpu, memory, replicas; /* 0 cpu/memory: 2 and 4 */
    const char *tmpl;          /* NULL: "tmpl-a" */
    bool no_finalizer, deleting;
    bool partial; /* the VMs listed are not all the folder holds */
    struct tvm vms[8];
    int clones[4];
    size_t n_clones;
    int folder; /* F_* */
    bool folder_inflight;
    size_t other_objects;
    const char *others[4]; /* the names of objects that are not VMs (counted too) */
    bool hidden;           /* a destroy found objects the inventory does not show */
    const char *resize_refused;
    enum plan_block block;
    const char *block_reason;
    const char *block_message;
    const char *transient;
    int limit; /* 0: 10 */
    bool marks_paused;
    /* Expected. */
    const char *actions;
    enum vmgroup_phase phase;
    const char *message; /* the whole lastMessage */
    int current;
};

static const struct tcase cases[] = {
    /* Create. */
    {.title = "new group: the finalizer comes before anything in vCenter",
     .replicas = 3,
     .no_finalizer = true,
     .folder = F_ABSENT,
     .actions = "add-finalizer",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "adding finalizer vm.codeconnect.vmworld.com/finalizer"},
    {.title = "folder missing: create it first",
     .replicas = 3,
     .folder = F_ABSENT,
     .actions = "create-folder",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating folder \"default_web\""},
    {.title = "folder creation in flight: wait",
     .replicas = 3,
     .folder = F_ABSENT,
     .folder_inflight = true,
     .actions = "",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating folder \"default_web\""},
    {.title = "inventory not read yet: wait",
     .replicas = 3,
     .folder = F_UNKNOWN,
     .actions = "",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "waiting for the vCenter inventory"},
    {.title = "empty folder: clone every replica",
     .replicas = 3,
     .actions = "clone web-0; clone web-1; clone web-2",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 3 VMs (0 of 3 exist)"},
    {.title = "the per-group limit bounds clones",
     .replicas = 3,
     .limit = 2,
     .actions = "clone web-0; clone web-1",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 3 VMs (0 of 3 exist)"},
    {.title = "clones in flight count: only the missing one",
     .replicas = 3,
     .clones = {0, 1},
     .n_clones = 2,
     .actions = "clone web-2",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 3 VMs (0 of 3 exist)"},
    {.title = "never more than replicas: all clones in flight",
     .replicas = 3,
     .clones = {2, 0, 1, 1},
     .n_clones = 4,
     .actions = "",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 3 VMs (0 of 3 exist)"},
    {.title = "a clone in flight already visible is not counted twice",
     .replicas = 2,
     .vms = {{"web-0"}, {"web-1", .off = true, .inflight = true}},
     .clones = {1},
     .n_clones = 1,
     .actions = "",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 1 VM (1 of 2 exist)",
     .current = 2},
    {.title = "lowest free slots",
     .replicas = 4,
     .vms = {{"web-0", .order = 1}, {"web-2", .order = 2}},
     .actions = "clone web-1; clone web-3",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 2 VMs (2 of 4 exist)",
     .current = 2},
    {.title = "a slot whose name a foreign VM holds is skipped",
     .replicas = 2,
     .vms = {{"web-0"}, {"web-1", .mark = ""}},
     .actions = "clone web-2; event Warning ForeignVMs",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 1 VM (1 of 2 exist)",
     .current = 1},
    {.title = "a slot whose name another kind of object holds is skipped",
     .replicas = 2,
     .vms = {{"web-0"}},
     .others = {"web-1", "web-x"},
     .actions = "clone web-2; event Warning ForeignVMs",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 1 VM (1 of 2 exist)",
     .current = 1},
    {.title = "in sync from scratch: no vCenter action, Ready event",
     .replicas = 3,
     .vms = {{"web-0"}, {"web-1"}, {"web-2"}},
     .actions = "event Normal Ready",
     .phase = VMGROUP_PHASE_RUNNING,
     .message = "all 3 VMs running",
     .current = 3},
    {.title = "zero replicas, nothing there: running",
     .replicas = 0,
     .actions = "event Normal Ready",
     .phase = VMGROUP_PHASE_RUNNING,
     .message = "no VMs requested"},

    /* Scale down. */
    {.title = "scale down removes the highest slot, not the newest, powering it off first",
     .replicas = 2,
     .vms = {{"web-0", .order = 1}, {"web-1", .order = 3}, {"web-2", .order = 2}},
     .actions = "power-off web-2",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "scaling down from 3 to 2 VMs, removing \"web-2\"",
     .current = 3},
    {.title = "scale down 5 to 2 leaves web-0 and web-1, whatever their age",
     .replicas = 2,
     .vms = {{"web-0", .order = 5},
             {"web-1", .order = 4},
             {"web-2", .order = 1},
             {"web-3", .order = 3},
             {"web-4", .order = 2}},
     .actions = "power-off web-4; power-off web-3; power-off web-2",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "scaling down from 5 to 2 VMs, removing \"web-4\"",
     .current = 5},
    {.title = "scale down: the highest slots go first within the limit",
     .replicas = 1,
     .limit = 2,
     .vms = {{"web-0", .order = 4},
             {"web-1", .order = 3},
             {"web-2", .order = 2},
             {"web-3", .order = 1}},
     .actions = "power-off web-3; power-off web-2",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "scaling down from 4 to 1 VMs, removing \"web-3\""},
    {.title = "scale down: a powered-off low slot goes before a running high slot",
     .replicas = 2,
     .vms = {{"web-0", .order = 1}, {"web-1", .order = 2, .off = true}, {"web-2", .order = 3}},
     .actions = "destroy web-1",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "scaling down from 3 to 2 VMs, removing \"web-1\""},
    {.title = "scale down: of two powered-off VMs the higher slot goes",
     .replicas = 2,
     .vms = {{"web-0", .order = 3, .off = true},
             {"web-1", .order = 2},
             {"web-2", .order = 1, .off = true}},
     .actions = "destroy web-2; power-on web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "scaling down from 3 to 2 VMs, removing \"web-2\""},
    {.title = "scale down: a member whose name has no slot goes before any slot",
     .replicas = 2,
     .vms = {{"web-0", .order = 1}, {"web-1", .order = 2}, {"web-renamed", .order = 0}},
     .actions = "power-off web-renamed",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "scaling down from 3 to 2 VMs, removing \"web-renamed\"",
     .current = 3},
    {.title = "scale up after a scale down: a gap is filled from the lowest free slot",
     .replicas = 3,
     .vms = {{"web-1", .order = 1}, {"web-3", .order = 2}},
     .actions = "clone web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 1 VM (2 of 3 exist)",
     .current = 2},
    {.title = "scale down: a powered-off VM goes before a newer running one",
     .replicas = 2,
     .vms = {{"web-0", .order = 1, .off = true}, {"web-1", .order = 2}, {"web-2", .order = 3}},
     .actions = "destroy web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "scaling down from 3 to 2 VMs, removing \"web-0\""},
    {.title = "scale down: a VM being created goes first (and is waited for)",
     .replicas = 3,
     .vms = {{"web-0", .order = 1}, {"web-1", .order = 2}, {"web-2", .order = 3}},
     .clones = {3},
     .n_clones = 1,
     .actions = "",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "scaling down from 4 to 3 VMs, removing \"web-3\""},
    {.title = "scale down: a failed VM goes before powered-off ones",
     .replicas = 2,
     .vms = {{"web-0", .order = 1, .off = true},
             {"web-1", .order = 2, .failed = true, .off = true},
             {"web-2", .order = 3}},
     .actions = "destroy web-1; power-on web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "replacing failed VM \"web-1\""},
    {.title = "scale to zero: power off all, newest first",
     .replicas = 0,
     .vms = {{"web-0", .order = 1}, {"web-1", .order = 2}, {"web-2", .order = 3}},
     .actions = "power-off web-2; power-off web-1; power-off web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "scaling down from 3 to 0 VMs, removing \"web-2\""},
    {.title = "scale to zero: destroy those that are off, wait for the busy one",
     .replicas = 0,
     .vms = {{"web-0", .order = 1, .off = true},
             {"web-1", .order = 2, .inflight = true},
             {"web-2", .order = 3, .off = true}},
     .actions = "destroy web-2; destroy web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "scaling down from 3 to 0 VMs, removing \"web-2\""},
    {.title = "scale down within the limit, counting what is in flight",
     .replicas = 0,
     .limit = 2,
     .vms = {{"web-0", .order = 1}, {"web-1", .order = 2, .inflight = true}, {"web-2", .order = 3}},
     .actions = "power-off web-2",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "scaling down from 3 to 0 VMs, removing \"web-2\""},

    /* Repair. */
    {.title = "a VM powered off out of band is powered on",
     .replicas = 2,
     .vms = {{"web-0"}, {"web-1", .off = true}},
     .actions = "power-on web-1",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "powering on VM \"web-1\""},
    {.title = "a VM with an operation in flight is left alone",
     .replicas = 2,
     .vms = {{"web-0"}, {"web-1", .off = true, .inflight = true}},
     .actions = "",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "powering on VM \"web-1\""},
    {.title = "a VM destroyed out of band is cloned again in its slot",
     .replicas = 3,
     .vms = {{"web-0"}, {"web-2"}},
     .actions = "clone web-1",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 1 VM (2 of 3 exist)"},
    {.title = "a failed VM is powered off, then destroyed, before its replacement",
     .replicas = 2,
     .vms = {{"web-0"}, {"web-1", .failed = true}},
     .actions = "power-off web-1",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "replacing failed VM \"web-1\"",
     .current = 2},
    {.title = "a failed VM that is off is destroyed",
     .replicas = 2,
     .vms = {{"web-0"}, {"web-1", .failed = true, .off = true}},
     .actions = "destroy web-1",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "replacing failed VM \"web-1\""},
    {.title = "a renamed VM of ours still counts",
     .replicas = 2,
     .vms = {{"web-0"}, {"renamed-by-hand"}},
     .actions = "event Normal Ready",
     .phase = VMGROUP_PHASE_RUNNING,
     .message = "all 2 VMs running",
     .current = 2},
    {.title = "a busy VM that is otherwise right: wait",
     .replicas = 1,
     .vms = {{"web-0", .inflight = true}},
     .actions = "",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "waiting for the operation on VM \"web-0\" to finish"},

    /* Resize, one at a time. */
    {.title = "resize: power off the first VM only",
     .replicas = 3,
     .vms = {{"web-0", .cpu = 1, .mem_gib = 2},
             {"web-1", .cpu = 1, .mem_gib = 2},
             {"web-2", .cpu = 1, .mem_gib = 2}},
     .actions = "power-off web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "reconfiguring VM \"web-0\" to 2 CPUs and 4 GiB (0 of 3 done)"},
    {.title = "resize: power-off in flight, the others wait",
     .replicas = 3,
     .vms = {{"web-0", .cpu = 1, .mem_gib = 2, .inflight = true},
             {"web-1", .cpu = 1, .mem_gib = 2},
             {"web-2", .cpu = 1, .mem_gib = 2}},
     .actions = "",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "reconfiguring VM \"web-0\" to 2 CPUs and 4 GiB (0 of 3 done)"},
    {.title = "resize: reconfigure the VM that is off",
     .replicas = 3,
     .vms = {{"web-0", .cpu = 1, .mem_gib = 2, .off = true},
             {"web-1", .cpu = 1, .mem_gib = 2},
             {"web-2", .cpu = 1, .mem_gib = 2}},
     .actions = "reconfigure web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "reconfiguring VM \"web-0\" to 2 CPUs and 4 GiB (0 of 3 done)"},
    {.title = "resize: power the resized VM on before the next",
     .replicas = 3,
     .vms = {{"web-0", .off = true},
             {"web-1", .cpu = 1, .mem_gib = 2},
             {"web-2", .cpu = 1, .mem_gib = 2}},
     .actions = "power-on web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "powering on VM \"web-0\""},
    {.title = "resize: the next starts once the previous is back",
     .replicas = 3,
     .vms = {{"web-0"}, {"web-1", .cpu = 1, .mem_gib = 2}, {"web-2", .cpu = 1, .mem_gib = 2}},
     .actions = "power-off web-1",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "reconfiguring VM \"web-1\" to 2 CPUs and 4 GiB (1 of 3 done)"},
    {.title = "resize: not while the previous is still powering on",
     .replicas = 3,
     .vms = {{"web-0", .inflight = true},
             {"web-1", .cpu = 1, .mem_gib = 2},
             {"web-2", .cpu = 1, .mem_gib = 2}},
     .actions = "",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "reconfiguring VM \"web-1\" to 2 CPUs and 4 GiB (1 of 3 done)"},
    {.title = "resize: VMs already off are reconfigured without waiting",
     .replicas = 3,
     .vms = {{"web-0", .cpu = 1, .off = true}, {"web-1", .cpu = 1, .off = true}, {"web-2"}},
     .actions = "reconfigure web-0; reconfigure web-1",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "reconfiguring VM \"web-0\" to 2 CPUs and 4 GiB (1 of 3 done)"},
    {.title = "resize: memory alone counts too",
     .replicas = 1,
     .vms = {{"web-0", .mem_gib = 8}},
     .actions = "power-off web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "reconfiguring VM \"web-0\" to 2 CPUs and 4 GiB (0 of 1 done)"},
    {.title = "resize waits while a replica is down for another reason",
     .replicas = 2,
     .vms = {{"web-0", .cpu = 1}, {"web-1", .off = true, .inflight = true}},
     .actions = "",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "powering on VM \"web-1\""},

    /* Template change. */
    {.title = "template change: existing VMs stay, the status counts them",
     .replicas = 2,
     .tmpl = "tmpl-b",
     .vms = {{"web-0", .tmpl = "tmpl-a"}, {"web-1", .tmpl = "tmpl-b"}},
     .actions = "event Normal Ready",
     .phase = VMGROUP_PHASE_RUNNING,
     .message = "all 2 VMs running, 1 cloned from a template other than \"tmpl-b\""},
    {.title = "template change: new VMs come from the new template",
     .replicas = 3,
     .tmpl = "tmpl-b",
     .vms = {{"web-0", .tmpl = "tmpl-a"}, {"web-1", .tmpl = "tmpl-a"}},
     .actions = "clone web-2",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 1 VM (2 of 3 exist)"},

    /* Never steal. */
    {.title = "foreign VMs are left alone and reported",
     .replicas = 1,
     .vms = {{"web-0"},
             {"bob", .mark = "", .off = true, .cpu = 1},
             {"web-7", .mark = OTHER, .off = true, .failed = true}},
     .actions = "event Warning ForeignVMs; event Normal Ready",
     .phase = VMGROUP_PHASE_RUNNING,
     .message = "all 1 VM running; 2 VMs in the folder were not created by this VmGroup and are "
                "left alone",
     .current = 1},
    {.title = "another group's VMs are not counted, nor destroyed on scale-down",
     .replicas = 1,
     .vms = {{"web-0", .mark = OTHER, .order = 9},
             {"web-1", .mark = OTHER, .order = 8},
             {"web-2", .order = 1},
             {"web-3", .order = 2}},
     .actions = "power-off web-3; event Warning ForeignVMs",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "scaling down from 2 to 1 VMs, removing \"web-3\"",
     .current = 2},
    {.title = "a copy of a member in the folder (the marks copied, not the instanceUuid) is "
              "foreign: not counted, not destroyed on scale-down",
     .replicas = 1,
     .vms = {{"web-0", .iu = "5000-a", .imark = "5000-a"},
             {"web-1", .iu = "5000-b", .imark = "5000-b", .order = 2},
             {"web-1-debug", .iu = "5000-c", .imark = "5000-b", .order = 3},
             {"web-2", .iu = "5000-d", .imark = "5000-a", .order = 4}},
     .actions = "power-off web-1; event Warning ForeignVMs",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "scaling down from 2 to 1 VMs, removing \"web-1\"",
     .current = 2},
    {.title = "the instanceUuid matches its mark whatever the case of its hex digits",
     .replicas = 1,
     .vms = {{"web-0", .iu = "5000-ABC", .imark = "5000-abc"}},
     .actions = "event Normal Ready",
     .phase = VMGROUP_PHASE_RUNNING,
     .message = "all 1 VM running",
     .current = 1},
    {.title = "an empty instance mark is no match for an unknown (empty) instanceUuid",
     .replicas = 1,
     .vms = {{"web-0", .iu = "", .imark = ""}},
     .actions = "clone web-1; event Warning ForeignVMs",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 1 VM (0 of 1 exist)",
     .current = 0},
    {.title = "an instance mark without a known instanceUuid is not taken for a member",
     .replicas = 1,
     .vms = {{"web-0", .imark = "5000-a"}},
     .actions = "clone web-1; event Warning ForeignVMs",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 1 VM (0 of 1 exist)",
     .current = 0},

    /* The instance mark of members cloned before it. */
    {.title = "a member cloned before the instance mark gets it, and the group is running",
     .replicas = 2,
     .vms = {{"web-0", .iu = "5000-a"}, {"web-1", .iu = "5000-b", .imark = "5000-b"}},
     .actions = "mark web-0; event Normal Ready",
     .phase = VMGROUP_PHASE_RUNNING,
     .message = "all 2 VMs running",
     .current = 2},
    {.title = "members whose mark failed lately are marked after the others, the least recent "
              "failure first",
     .replicas = 4,
     .limit = 3,
     .vms = {{"web-0", .iu = "5000-a", .mark_seq = 20},
             {"web-1", .iu = "5000-b", .mark_seq = 31},
             {"web-2", .iu = "5000-c", .mark_seq = 7},
             {"web-3", .iu = "5000-d"}},
     .actions = "mark web-3; mark web-2; mark web-0; event Normal Ready",
     .phase = VMGROUP_PHASE_RUNNING,
     .message = "all 4 VMs running",
     .current = 4},
    {.title = "a mark in flight keeps the VM ready and the group running",
     .replicas = 2,
     .vms = {{"web-0", .iu = "5000-a", .marking = true},
             {"web-1", .iu = "5000-b", .imark = "5000-b"}},
     .actions = "event Normal Ready",
     .phase = VMGROUP_PHASE_RUNNING,
     .message = "all 2 VMs running",
     .current = 2},
    {.title = "marks come after the other actions, within the limit, lowest slot first",
     .replicas = 4,
     .limit = 3,
     .vms = {{"web-0", .iu = "5000-a"},
             {"web-1", .iu = "5000-b", .off = true},
             {"web-2", .iu = "5000-c"},
             {"web-3", .iu = "5000-d"}},
     .actions = "power-on web-1; mark web-0; mark web-2",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "powering on VM \"web-1\""},
    {.title = "no mark for a VM without a slot, outside the folder, or of unknown instanceUuid",
     .replicas = 4,
     .vms = {{"web-x", .iu = "5000-a"},
             {"web-1", .iu = "5000-b", .elsewhere = true},
             {"web-2", .iu = ""},
             {"web-3"}},
     .actions = "event Normal Ready",
     .phase = VMGROUP_PHASE_RUNNING,
     .message = "all 4 VMs running",
     .current = 4},
    {.title = "no mark for a member sized otherwise: it is resized first",
     .replicas = 1,
     .cpu = 2,
     .vms = {{"web-0", .iu = "5000-a", .cpu = 1}},
     .actions = "power-off web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "reconfiguring VM \"web-0\" to 2 CPUs and 4 GiB (0 of 1 done)"},
    {.title = "no mark for a member powered off: it is powered on first",
     .replicas = 1,
     .vms = {{"web-0", .iu = "5000-a", .off = true}},
     .actions = "power-on web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "powering on VM \"web-0\""},
    {.title = "no mark for a failed member: it is replaced",
     .replicas = 1,
     .vms = {{"web-0", .iu = "5000-a", .failed = true}},
     .actions = "power-off web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "replacing failed VM \"web-0\""},
    {.title = "no mark for a member with an operation in flight",
     .replicas = 1,
     .vms = {{"web-0", .iu = "5000-a", .inflight = true}},
     .actions = "",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "waiting for the operation on VM \"web-0\" to finish"},
    {.title = "no mark for a member going on scale-down; the one kept gets it",
     .replicas = 1,
     .vms = {{"web-0", .iu = "5000-a"}, {"web-1", .iu = "5000-b"}},
     .actions = "power-off web-1; mark web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "scaling down from 2 to 1 VMs, removing \"web-1\""},
    {.title = "no mark while marks are paused (one failed lately)",
     .replicas = 1,
     .marks_paused = true,
     .vms = {{"web-0", .iu = "5000-a"}},
     .actions = "event Normal Ready",
     .phase = VMGROUP_PHASE_RUNNING,
     .message = "all 1 VM running",
     .current = 1},
    {.title = "a resize does not power off the VM whose mark is in flight: another goes first",
     .replicas = 2,
     .cpu = 4,
     .vms = {{"web-0", .iu = "5000-a", .cpu = 2, .marking = true},
             {"web-1", .iu = "5000-b", .imark = "5000-b", .cpu = 2}},
     .actions = "power-off web-1",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "reconfiguring VM \"web-1\" to 4 CPUs and 4 GiB (0 of 2 done)",
     .current = 2},
    {.title = "a mark in flight holds none of the group's limit",
     .replicas = 2,
     .limit = 1,
     .vms = {{"web-0", .iu = "5000-a", .marking = true}},
     .actions = "clone web-1",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 1 VM (1 of 2 exist)",
     .current = 1},
    {.title = "a group being deleted marks nothing",
     .replicas = 1,
     .deleting = true,
     .vms = {{"web-0", .iu = "5000-a"}},
     .actions = "power-off web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleting: 1 VM left to remove"},
    {.title = "another group's VMs do not fill this group's replicas",
     .replicas = 2,
     .vms = {{"web-0", .mark = OTHER}, {"web-1", .mark = OTHER}},
     .actions = "clone web-2; clone web-3; event Warning ForeignVMs",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 2 VMs (0 of 2 exist)",
     .current = 0},

    /* Limits. */
    {.title = "the limit counts operations in flight on VMs",
     .replicas = 4,
     .limit = 2,
     .vms = {{"web-0", .off = true, .inflight = true}, {"web-1", .off = true, .inflight = true}},
     .actions = "",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 2 VMs (2 of 4 exist)"},
    {.title = "the limit counts clones in flight",
     .replicas = 4,
     .limit = 3,
     .vms = {{"web-0", .off = true}},
     .clones = {1, 2},
     .n_clones = 2,
     .actions = "power-on web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 3 VMs (1 of 4 exist)"},
    {.title = "a limit below 1 means 1",
     .replicas = 2,
     .limit = -5,
     .actions = "clone web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 2 VMs (0 of 2 exist)"},

    /* Delete. */
    {.title = "delete: power off the group's VMs, not the others",
     .deleting = true,
     .replicas = 2,
     .vms = {{"web-0", .order = 1}, {"web-1", .order = 2}, {"bob", .mark = ""}},
     .actions = "power-off web-1; power-off web-0; event Warning ForeignVMs",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleting: 2 VMs left to remove",
     .current = 2},
    {.title = "delete: destroy those that are off",
     .deleting = true,
     .replicas = 2,
     .vms = {{"web-0", .off = true}, {"web-1", .inflight = true}},
     .actions = "destroy web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleting: 2 VMs left to remove"},
    {.title = "delete: wait for clones in flight",
     .deleting = true,
     .replicas = 2,
     .clones = {0},
     .n_clones = 1,
     .actions = "",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleting: 1 VM left to remove"},
    {.title = "delete: the folder goes once empty",
     .deleting = true,
     .replicas = 2,
     .actions = "destroy-folder",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleting folder \"default_web\""},
    {.title = "delete: the finalizer waits for the folder's creation in flight",
     .deleting = true,
     .replicas = 2,
     .folder = F_ABSENT,
     .folder_inflight = true,
     .actions = "",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleting folder \"default_web\""},
    {.title = "delete: and for its destruction in flight",
     .deleting = true,
     .replicas = 2,
     .folder_inflight = true,
     .actions = "",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleting folder \"default_web\""},
    {.title = "delete: then the finalizer",
     .deleting = true,
     .replicas = 2,
     .folder = F_ABSENT,
     .actions = "remove-finalizer",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleted"},
    {.title = "delete: members outside the folder (moved, or the folder renamed) go first",
     .deleting = true,
     .replicas = 2,
     .folder = F_ABSENT,
     .vms = {{"web-0", .ref = "vm-9", .elsewhere = true},
             {"web-1", .ref = "vm-10", .off = true, .elsewhere = true}},
     .actions = "destroy web-1; power-off web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleting: 2 VMs left to remove"},
    {.title = "delete: copies of its VMs outside the folder (marked too) are left alone",
     .deleting = true,
     .replicas = 2,
     .folder = F_ABSENT,
     .vms = {{"golden", .elsewhere = true, .failed = true},
             {"web-0-debug", .elsewhere = true},
             {"web-0", .elsewhere = true, .failed = true}},
     .actions = "remove-finalizer",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleted"},
    {.title = "a member moved out of the folder counts: its slot is not cloned again",
     .replicas = 2,
     .vms = {{"web-0"}, {"web-1", .ref = "vm-9", .elsewhere = true}},
     .actions = "event Normal Ready",
     .phase = VMGROUP_PHASE_RUNNING,
     .message = "all 2 VMs running",
     .current = 2},
    {.title = "copies outside the folder are not members: a template, another name, a slot taken",
     .replicas = 1,
     .vms = {{"web-0"},
             {"golden", .elsewhere = true, .failed = true},
             {"web-0-debug", .elsewhere = true},
             {"web-0", .order = 9, .elsewhere = true}},
     .actions = "event Normal Ready",
     .phase = VMGROUP_PHASE_RUNNING,
     .message = "all 1 VM running",
     .current = 1},
    {.title = "a copy outside the folder that kept a member's name is not taken for it once the "
              "member is gone",
     .replicas = 1,
     .vms = {{"web-0", .elsewhere = true, .iu = "5000-b", .imark = "5000-a"}},
     .actions = "clone web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 1 VM (0 of 1 exist)"},
    {.title = "a member moved out and renamed (its instanceUuid its mark's) counts, without a slot",
     .replicas = 1,
     .vms = {{"keep-me", .elsewhere = true, .iu = "5000-a", .imark = "5000-a"}},
     .actions = "event Normal Ready",
     .phase = VMGROUP_PHASE_RUNNING,
     .message = "all 1 VM running",
     .current = 1},
    {.title = "a member moved out whose name a copy holds in the folder counts, without a slot",
     .replicas = 2,
     .vms = {{"web-0", .iu = "5000-a", .imark = "5000-a"},
             {"web-1", .iu = "5000-c", .imark = "5000-b", .order = 5},
             {"web-1", .elsewhere = true, .iu = "5000-b", .imark = "5000-b", .order = 3}},
     .actions = "event Warning ForeignVMs; event Normal Ready",
     .phase = VMGROUP_PHASE_RUNNING,
     .message = "all 2 VMs running; 1 VM in the folder was not created by this VmGroup and is left "
                "alone",
     .current = 2},
    {.title = "a member moved out and made a template is left alone",
     .replicas = 1,
     .vms = {{"web-0", .elsewhere = true, .failed = true, .iu = "5000-a", .imark = "5000-a"}},
     .actions = "clone web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 1 VM (0 of 1 exist)"},
    {.title = "delete: a copy outside the folder that kept a member's name is left alone",
     .deleting = true,
     .replicas = 1,
     .folder = F_ABSENT,
     .vms = {{"web-0", .elsewhere = true, .iu = "5000-b", .imark = "5000-a"}},
     .actions = "remove-finalizer",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleted"},
    {.title = "delete: a copy of a member in the folder keeps the folder",
     .deleting = true,
     .replicas = 1,
     .vms = {{"web-0-debug", .off = true, .iu = "5000-b", .imark = "5000-a"}},
     .actions = "event Warning FolderKept; remove-finalizer",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleted"},
    {.title = "of two VMs of one slot outside the folder, the older is the member",
     .replicas = 1,
     .vms = {{"web-0", .order = 9, .elsewhere = true, .off = true},
             {"web-0", .order = 5, .elsewhere = true}},
     .actions = "event Normal Ready",
     .phase = VMGROUP_PHASE_RUNNING,
     .message = "all 1 VM running",
     .current = 1},

    {.title = "delete: a folder with foreign VMs is kept, with a warning",
     .deleting = true,
     .replicas = 2,
     .vms = {{"bob", .mark = ""}, {"web-0", .mark = OTHER}},
     .actions = "event Warning FolderKept; remove-finalizer",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleted"},
    {.title = "delete: a folder seen in part keeps the finalizer, whatever VMs are seen",
     .deleting = true,
     .replicas = 2,
     .partial = true,
     .vms = {{"bob", .mark = ""}, {"web-0", .mark = OTHER}},
     .actions = "event Warning ForeignVMs",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleting: more VMs than can be listed, in folder \"default_web\" or marked as "
                "this group's elsewhere"},
    {.title = "delete: a folder with other objects is kept",
     .deleting = true,
     .replicas = 2,
     .other_objects = 1,
     .actions = "event Warning FolderKept; remove-finalizer",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleted"},
    {.title = "delete: a folder that destroys found holding objects not shown is kept",
     .deleting = true,
     .replicas = 2,
     .hidden = true,
     .actions = "event Warning FolderKept; remove-finalizer",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleted"},
    {.title = "delete: nothing while the inventory is unknown",
     .deleting = true,
     .replicas = 2,
     .folder = F_UNKNOWN,
     .actions = "",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "waiting for the vCenter inventory"},
    {.title = "delete: nothing to do without our finalizer",
     .deleting = true,
     .no_finalizer = true,
     .replicas = 2,
     .vms = {{"web-0"}},
     .actions = "",
     .phase = VMGROUP_PHASE_NONE,
     .message = ""},
    {.title = "delete: a template error does not stop it",
     .deleting = true,
     .replicas = 2,
     .vms = {{"web-0"}},
     .block = PLAN_BLOCK_TEMPLATE,
     .block_message = "template \"foo\" not found in datacenter \"DC0\"",
     .actions = "power-off web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleting: 1 VM left to remove"},
    {.title = "delete: a placement error does",
     .deleting = true,
     .replicas = 2,
     .vms = {{"web-0"}},
     .block = PLAN_BLOCK_PLACEMENT,
     .block_message = "datacenter \"DC9\" not found",
     .actions = "event Warning InvalidPlacement",
     .phase = VMGROUP_PHASE_ERROR,
     .message = "datacenter \"DC9\" not found"},

    /* Errors. */
    {.title = "template not found: ERROR naming it, no clone",
     .replicas = 2,
     .tmpl = "foo",
     .block = PLAN_BLOCK_TEMPLATE,
     .block_message = "template \"foo\" not found in datacenter \"DC0\"",
     .actions = "event Warning TemplateNotFound",
     .phase = VMGROUP_PHASE_ERROR,
     .message = "template \"foo\" not found in datacenter \"DC0\""},
    {.title = "template refused (a plain VM): ERROR saying why, no clone",
     .replicas = 2,
     .vms = {{"web-0"}},
     .tmpl = "plain",
     .block = PLAN_BLOCK_TEMPLATE,
     .block_reason = "TemplateRefused",
     .block_message = "template \"plain\" is a virtual machine, not a template",
     .actions = "event Warning TemplateRefused",
     .phase = VMGROUP_PHASE_ERROR,
     .message = "template \"plain\" is a virtual machine, not a template"},
    {.title = "template not found: existing VMs are still repaired",
     .replicas = 2,
     .vms = {{"web-0", .off = true}},
     .block = PLAN_BLOCK_TEMPLATE,
     .actions = "power-on web-0; event Warning TemplateNotFound",
     .phase = VMGROUP_PHASE_ERROR,
     .message = "template \"tmpl-a\" cannot be used"},
    {.title = "size refused: the VM off for its resize is powered on again, none goes off",
     .replicas = 3,
     .vms = {{"web-0", .cpu = 1, .mem_gib = 2, .off = true},
             {"web-1", .cpu = 1, .mem_gib = 2},
             {"web-2", .cpu = 1, .mem_gib = 2}},
     .resize_refused = "vCenter refused to reconfigure VM web-0: A specified parameter was not "
                       "correct: numCPUs",
     .actions = "power-on web-0; event Warning ResizeRefused",
     .phase = VMGROUP_PHASE_ERROR,
     .message = "vCenter refused to reconfigure VM web-0: A specified parameter was not correct: "
                "numCPUs"},
    {.title = "size refused: the VMs keep their size, missing ones are still made",
     .replicas = 3,
     .vms = {{"web-0", .cpu = 1, .mem_gib = 2}, {"web-1", .cpu = 1, .mem_gib = 2}},
     .resize_refused = "refused",
     .actions = "clone web-2; event Warning ResizeRefused",
     .phase = VMGROUP_PHASE_ERROR,
     .message = "refused"},
    {.title = "size refused and template missing: the VM is powered on, none goes off",
     .replicas = 3,
     .vms = {{"web-0", .cpu = 1, .mem_gib = 2, .off = true}, {"web-1", .cpu = 1, .mem_gib = 2}},
     .resize_refused = "refused",
     .block = PLAN_BLOCK_TEMPLATE,
     .actions = "power-on web-0; event Warning TemplateNotFound",
     .phase = VMGROUP_PHASE_ERROR,
     .message = "template \"tmpl-a\" cannot be used"},
    {.title = "size refused: a deleted group's VMs still go",
     .deleting = true,
     .replicas = 2,
     .vms = {{"web-0", .cpu = 1, .mem_gib = 2}, {"web-1", .cpu = 1, .mem_gib = 2, .off = true}},
     .resize_refused = "refused",
     .actions = "destroy web-1; power-off web-0",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "deleting: 2 VMs left to remove"},
    {.title = "invalid placement: ERROR, nothing in vCenter",
     .replicas = 2,
     .vms = {{"web-0", .off = true}},
     .block = PLAN_BLOCK_PLACEMENT,
     .block_message = "resource pool \"pool9\" not found",
     .actions = "event Warning InvalidPlacement",
     .phase = VMGROUP_PHASE_ERROR,
     .message = "resource pool \"pool9\" not found"},
    {.title = "invalid spec: ERROR naming the field",
     .replicas = 2,
     .cpu = 9,
     .actions = "event Warning InvalidSpec",
     .phase = VMGROUP_PHASE_ERROR,
     .message = "spec.cpu 9 is outside 1..4"},
    {.title = "replicas above the most one group holds: ERROR, nothing done",
     .replicas = 4097,
     .vms = {{"web-0", .off = true}},
     .actions = "event Warning InvalidSpec",
     .phase = VMGROUP_PHASE_ERROR,
     .message = "spec.replicas 4097 is above 4096, the most VMs one group can hold"},
    {.title = "replicas at the most one group holds: cloning",
     .replicas = 4096,
     .vms = {{"web-0"}},
     .actions = "clone web-1; clone web-2; clone web-3; clone web-4; clone web-5; clone web-6; "
                "clone web-7; clone web-8; clone web-9; clone web-10",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "creating 4095 VMs (1 of 4096 exist)"},
    {.title = "empty template: ERROR",
     .replicas = 2,
     .tmpl = "",
     .actions = "event Warning InvalidSpec",
     .phase = VMGROUP_PHASE_ERROR,
     .message = "spec.template is empty"},
    {.title = "transient error: PENDING with the reason, no vCenter action",
     .replicas = 2,
     .transient = "cloning VM \"web-1\" failed: connection reset by peer",
     .actions = "event Warning TransientError",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "cloning VM \"web-1\" failed: connection reset by peer"},
    {.title = "transient error: the finalizer is still added",
     .replicas = 2,
     .no_finalizer = true,
     .transient = "vCenter session expired",
     .actions = "add-finalizer; event Warning TransientError",
     .phase = VMGROUP_PHASE_PENDING,
     .message = "vCenter session expired"},
};

struct built {
    struct vmgroup *g;
    struct plan_vm vms[8];
    struct planner_input in;
};

static void build(const struct tcase *tc, struct built *b, const cJSON *status)
{
    memset(b, 0, sizeof(*b));
    b->g = make_group(tc->cpu ? tc->cpu : 2, tc->memory ? tc->memory : 4, tc->replicas,
                      tc->tmpl ? tc->tmpl : "tmpl-a", !tc->no_finalizer, tc->deleting, status);
    size_t n = 0, n_others = 0;
    while (n_others < 4 && tc->others[n_others])
        n_others++;
    for (; n < 8 && tc->vms[n].name; n++) {
        const struct tvm *t = &tc->vms[n];
        b->vms[n] = (struct plan_vm){
            .name = t->name,
            .mark_uid = !t->mark     ? UID
                        : t->mark[0] ? t->mark
                                     : NULL,
            .template = t->tmpl ? t->tmpl : b->g->spec.template,
            .powered_on = !t->off,
            .num_cpu = t->cpu ? t->cpu : b->g->spec.cpu,
            .memory_mb = (t->mem_gib ? t->mem_gib : b->g->spec.memory) * 1024,
            .create_order = t->order,
            .inflight = t->inflight || t->marking,
            .marking = t->marking,
            .mark_failure_seq = t->mark_seq,
            .failed = t->failed,
            .ref = t->ref,
            .elsewhere = t->elsewhere,
            .instance_uuid = t->iu,
            .mark_instance = t->imark,
        };
    }
    b->in = (struct planner_input){
        .g = b->g,
        .vms = b->vms,
        .n_vms = n,
        .vms_partial = tc->partial,
        .folder = tc->folder == F_ABSENT    ? PLAN_FOLDER_ABSENT
                  : tc->folder == F_UNKNOWN ? PLAN_FOLDER_UNKNOWN
                                            : PLAN_FOLDER_PRESENT,
        .folder_inflight = tc->folder_inflight,
        .folder_other_objects = tc->other_objects + n_others,
        .folder_other_names = tc->others,
        .n_folder_other_names = n_others,
        .folder_hidden_objects = tc->hidden,
        .resize_refused = tc->resize_refused,
        .clones_inflight = tc->clones,
        .n_clones_inflight = tc->n_clones,
        .block = tc->block,
        .block_reason = tc->block_reason,
        .block_message = tc->block_message,
        .transient_message = tc->transient,
        .now = NOW,
        .max_inflight = tc->limit ? tc->limit : 10,
        .marks_paused = tc->marks_paused,
    };
}

static void test_table(void **state)
{
    char desc[2048];
    int failures = 0;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct tcase *tc = &cases[i];
        struct built b;
        struct plan *p = NULL;
        build(tc, &b, NULL);
        assert_int_equal(planner_plan(&b.in, &p), 0);
        assert_true(plan_describe(p, desc, sizeof(desc)) >= 0);
        if (strcmp(desc, tc->actions) != 0) {
            print_error("case %zu \"%s\": actions \"%s\", want \"%s\"\n", i, tc->title, desc,
                        tc->actions);
            failures++;
        }
        if (p->status.phase != tc->phase) {
            print_error("case %zu \"%s\": phase %s, want %s\n", i, tc->title,
                        vmgroup_phase_name(p->status.phase), vmgroup_phase_name(tc->phase));
            failures++;
        }
        if (strcmp(p->status.last_message, tc->message) != 0) {
            print_error("case %zu \"%s\": message \"%s\", want \"%s\"\n", i, tc->title,
                        p->status.last_message, tc->message);
            failures++;
        }
        if (tc->current && p->status.current_replicas != tc->current) {
            print_error("case %zu \"%s\": currentReplicas %d, want %d\n", i, tc->title,
                        (int)p->status.current_replicas, tc->current);
            failures++;
        }
        /* Status basics that hold in every case but one. */
        if (!(tc->deleting && tc->no_finalizer)) {
            assert_int_equal(p->status.n_conditions, 3);
            assert_int_equal(p->status.observed_generation, 3);
            assert_int_equal(p->status.desired_replicas, tc->deleting ? 0 : tc->replicas);
            assert_true(p->status_changed || strstr(desc, "remove-finalizer"));
        } else {
            assert_false(p->status_changed);
        }
        plan_free(p);
        vmgroup_free(b.g);
    }
    if (failures)
        fail_msg("%d mismatches", failures);
}

/* The order in which vCenter lists the VMs and clones changes nothing. */
static void test_order_independent(void **state)
{
    char d1[2048], d2[2048];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct built b;
        struct plan *p1 = NULL, *p2 = NULL;
        build(&cases[i], &b, NULL);
        assert_int_equal(planner_plan(&b.in, &p1), 0);
        /* Reverse the VMs and the clones. */
        for (size_t k = 0; k < b.in.n_vms / 2; k++) {
            struct plan_vm t = b.vms[k];
            b.vms[k] = b.vms[b.in.n_vms - 1 - k];
            b.vms[b.in.n_vms - 1 - k] = t;
        }
        int clones[4];
        for (size_t k = 0; k < b.in.n_clones_inflight; k++)
            clones[k] = cases[i].clones[b.in.n_clones_inflight - 1 - k];
        b.in.clones_inflight = clones;
        assert_int_equal(planner_plan(&b.in, &p2), 0);
        plan_describe(p1, d1, sizeof(d1));
        plan_describe(p2, d2, sizeof(d2));
        if (strcmp(d1, d2) != 0 || !(vmgroup_status_equal(&p1->status, &p2->status) ||
                                     (cases[i].deleting && cases[i].no_finalizer)))
            fail_msg("case %zu \"%s\": \"%s\" vs \"%s\"", i, cases[i].title, d1, d2);
        plan_free(p1);
        plan_free(p2);
        vmgroup_free(b.g);
    }
}

/* The actions carry what the executor needs. */
static void test_action_fields(void **state)
{
    static const struct tcase clone_case = {
        .replicas = 2, .memory = 3, .cpu = 1, .tmpl = "lib/ubuntu", .vms = {{"web-1"}}};
    static const struct tcase reconf_case = {
        .replicas = 1, .memory = 8, .cpu = 4, .vms = {{"web-0", .mem_gib = 2, .off = true}}};
    static const struct tcase moved_case = {
        .replicas = 1,
        .vms = {{"web-0", .ref = "vm-3"}, {"web-1", .ref = "vm-10", .elsewhere = true}}};
    static const struct tcase mark_case = {.replicas = 1,
                                           .vms = {{"web-0", .ref = "vm-7", .iu = "5000-7"}}};
    struct built b;
    struct plan *p = NULL;

    (void)state;
    build(&clone_case, &b, NULL);
    assert_int_equal(planner_plan(&b.in, &p), 0);
    assert_string_equal(p->folder, "default_web");
    assert_int_equal(p->n_actions, 1);
    assert_int_equal(p->actions[0].kind, PLAN_CLONE);
    assert_int_equal(p->actions[0].slot, 0);
    assert_string_equal(p->actions[0].vm, "web-0");
    assert_string_equal(p->actions[0].template, "lib/ubuntu");
    assert_int_equal(p->actions[0].cpu, 1);
    assert_int_equal(p->actions[0].memory_mb, 3072);
    assert_null(p->actions[0].vm_ref); /* a clone's VM has none yet */
    plan_free(p);
    vmgroup_free(b.g);

    /* An action on a VM names it and gives its id, wherever it is. */
    build(&moved_case, &b, NULL);
    assert_int_equal(planner_plan(&b.in, &p), 0);
    assert_int_equal(p->n_actions, 1);
    assert_int_equal(p->actions[0].kind, PLAN_POWER_OFF);
    assert_string_equal(p->actions[0].vm, "web-1");
    assert_string_equal(p->actions[0].vm_ref, "vm-10");
    plan_free(p);
    vmgroup_free(b.g);

    build(&reconf_case, &b, NULL);
    assert_int_equal(planner_plan(&b.in, &p), 0);
    assert_int_equal(p->n_actions, 1);
    assert_int_equal(p->actions[0].kind, PLAN_RECONFIGURE);
    assert_string_equal(p->actions[0].vm, "web-0");
    assert_int_equal(p->actions[0].cpu, 4);
    assert_int_equal(p->actions[0].memory_mb, 8192);
    plan_free(p);
    vmgroup_free(b.g);

    /* A mark carries the VM's own instanceUuid. */
    build(&mark_case, &b, NULL);
    assert_int_equal(planner_plan(&b.in, &p), 0);
    assert_true(p->n_actions >= 1);
    assert_int_equal(p->actions[0].kind, PLAN_MARK);
    assert_string_equal(p->actions[0].vm, "web-0");
    assert_string_equal(p->actions[0].vm_ref, "vm-7");
    assert_string_equal(p->actions[0].instance_uuid, "5000-7");
    plan_free(p);
    vmgroup_free(b.g);
}

/* The Warning events carry the reason and the sentence; the foreign VMs are
 * named in Degraded. */
static void test_events_and_degraded(void **state)
{
    static const struct tcase kept = {
        .deleting = true, .replicas = 1, .vms = {{"bob", .mark = ""}, {"alice", .mark = ""}}};
    static const struct tcase foreign = {
        .replicas = 1, .vms = {{"web-0"}, {"bob", .mark = ""}, {"web-9", .mark = OTHER}}};
    static const struct tcase hidden = {.deleting = true, .replicas = 1, .hidden = true};
    struct built b;
    struct plan *p = NULL;
    const struct vmgroup_condition *d;

    (void)state;
    build(&kept, &b, NULL);
    assert_int_equal(planner_plan(&b.in, &p), 0);
    assert_int_equal(p->n_actions, 2);
    assert_int_equal(p->actions[0].kind, PLAN_EVENT);
    assert_int_equal(p->actions[0].event_type, PLAN_EVENT_WARNING);
    assert_string_equal(p->actions[0].reason, "FolderKept");
    assert_string_equal(p->actions[0].message,
                        "folder \"default_web\" kept: it holds 2 VMs not created by this VmGroup");
    assert_int_equal(p->actions[1].kind, PLAN_REMOVE_FINALIZER);
    plan_free(p);
    vmgroup_free(b.g);

    build(&hidden, &b, NULL);
    assert_int_equal(planner_plan(&b.in, &p), 0);
    assert_int_equal(p->n_actions, 2);
    assert_string_equal(p->actions[0].reason, "FolderKept");
    assert_string_equal(p->actions[0].message,
                        "folder \"default_web\" kept: it holds objects other than VMs and folders "
                        "(a vApp, say) not created by this VmGroup");
    assert_int_equal(p->actions[1].kind, PLAN_REMOVE_FINALIZER);
    plan_free(p);
    vmgroup_free(b.g);

    build(&foreign, &b, NULL);
    assert_int_equal(planner_plan(&b.in, &p), 0);
    assert_int_equal(p->foreign, 2);
    d = vmgroup_condition_find(&p->status, "Degraded");
    assert_non_null(d);
    assert_int_equal(d->status, VMGROUP_COND_TRUE);
    assert_string_equal(d->reason, "ForeignVMs");
    assert_string_equal(d->message, "folder \"default_web\" holds 2 VMs this VmGroup did not "
                                    "create (\"bob\", \"web-9\"), left alone");
    assert_int_equal(vmgroup_condition_find(&p->status, "Ready")->status, VMGROUP_COND_TRUE);
    plan_free(p);
    vmgroup_free(b.g);
}

/* plan_once plans tc against a group whose status is status. */
static struct plan *plan_once(const struct tcase *tc, const cJSON *status, const char *now)
{
    struct built b;
    struct plan *p = NULL;

    build(tc, &b, status);
    b.in.now = now;
    assert_int_equal(planner_plan(&b.in, &p), 0);
    vmgroup_free(b.g);
    return p;
}

static cJSON *status_json(const struct plan *p)
{
    cJSON *js = NULL;
    assert_int_equal(vmgroup_status_to_json(&p->status, p->vms, &js), 0);
    /* Through text, as the API server returns it. */
    char *text = cJSON_PrintUnformatted(js);
    cJSON_Delete(js);
    js = cJSON_Parse(text);
    free(text);
    assert_non_null(js);
    return js;
}

/* A group in sync, whose status is what the planner wrote: no action, no
 * write, and the conditions keep their transition times. */
static void test_quiet_in_sync(void **state)
{
    static const struct tcase ok = {
        .replicas = 3,
        .tmpl = "tmpl-b",
        .vms = {{"web-0", .tmpl = "tmpl-a"}, {"web-1"}, {"web-2"}, {"bob", .mark = ""}}};
    struct plan *p1, *p2;
    cJSON *st;

    (void)state;
    p1 = plan_once(&ok, NULL, NOW);
    assert_true(p1->status_changed);
    assert_int_equal(p1->status.phase, VMGROUP_PHASE_RUNNING);
    st = status_json(p1);
    p2 = plan_once(&ok, st, LATER);
    assert_int_equal(p2->n_actions, 0);
    assert_false(p2->status_changed);
    assert_true(vmgroup_status_equal(&p1->status, &p2->status));
    for (unsigned i = 0; i < 3; i++)
        assert_string_equal(p2->status.conditions[i].last_transition_time, NOW);
    plan_free(p1);
    plan_free(p2);
    cJSON_Delete(st);
}

/* status.selector names the group by its UID; a status written before it
 * existed is rewritten once, and then no more. */
static void test_selector(void **state)
{
    static const struct tcase ok = {.replicas = 1, .vms = {{"web-0"}}};
    static const struct tcase zero = {.replicas = 0};
    struct plan *p1, *p2, *p3;
    cJSON *st;

    (void)state;
    p1 = plan_once(&ok, NULL, NOW);
    assert_string_equal(p1->status.selector, "vm.codeconnect.vmworld.com/vmgroup-uid=" UID);
    st = status_json(p1);
    assert_string_equal(cJSON_GetObjectItem(st, "selector")->valuestring,
                        "vm.codeconnect.vmworld.com/vmgroup-uid=" UID);
    p2 = plan_once(&ok, st, LATER);
    assert_false(p2->status_changed);
    /* A status without the field, otherwise in sync: written once. */
    cJSON_DeleteItemFromObject(st, "selector");
    p3 = plan_once(&ok, st, LATER);
    assert_true(p3->status_changed);
    assert_int_equal(p3->n_actions, 0);
    assert_string_equal(p3->status.selector, p1->status.selector);
    plan_free(p1);
    plan_free(p2);
    plan_free(p3);
    cJSON_Delete(st);
    /* Scaled to zero, the selector stays (an autoscaler may scale from 0). */
    p1 = plan_once(&zero, NULL, NOW);
    assert_string_equal(p1->status.selector, "vm.codeconnect.vmworld.com/vmgroup-uid=" UID);
    plan_free(p1);
}

/* vms_desc writes status.vms as "name:state ..." */
static const char *vms_desc(const struct plan *p, char *buf, size_t size)
{
    size_t len = 0;

    buf[0] = '\0';
    for (unsigned i = 0; i < p->status.n_vms && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s:%s", i ? " " : "", p->vms[i].name,
                                p->vms[i].state);
    return buf;
}

/* plan_guests plans tc with every VM given an instance UUID (its mark's),
 * a power state as its powered_on says, and the addresses of ips (NULL:
 * none) for the first VM. */
static struct plan *plan_guests(const struct tcase *tc, const cJSON *status, const char *ip)
{
    static char uuids[8][40];
    struct built b;
    struct plan *p = NULL;

    build(tc, &b, status);
    for (size_t i = 0; i < b.in.n_vms; i++) {
        snprintf(uuids[i], sizeof(uuids[i]), "5000-%zu", i);
        b.vms[i].instance_uuid = b.vms[i].mark_instance = uuids[i];
        b.vms[i].power_state = b.vms[i].powered_on ? "poweredOn" : "poweredOff";
    }
    if (ip && b.in.n_vms) {
        b.vms[0].ip[0] = ip;
        b.vms[0].ip[1] = "2001:db8::1";
        b.vms[0].n_ip = 2;
    }
    assert_int_equal(planner_plan(&b.in, &p), 0);
    vmgroup_free(b.g);
    return p;
}

/* status.vms: the members by name (foreign VMs never), each with its state
 * by what the plan does; what the inventory shows of each. */
static void test_status_vms(void **state)
{
    static const struct {
        struct tcase tc;
        const char *want;
    } rows[] = {
        {{.replicas = 4,
          .vms = {{"web-0"}, {"web-1", .off = true}, {"web-2", .cpu = 1}, {"bob", .mark = ""}},
          .clones = {3},
          .n_clones = 1},
         "web-0:Ready web-1:Starting web-2:Resizing web-3:Creating"},
        {{.replicas = 1, .vms = {{"web-10"}, {"web-1"}, {"web-0"}}},
         "web-0:Ready web-1:Removing web-10:Removing"},
        {{.replicas = 2, .vms = {{"web-0"}, {"web-1", .failed = true}, {"x", .mark = OTHER}}},
         "web-0:Ready web-1:Removing"},
        {{.replicas = 2, .deleting = true, .vms = {{"web-0"}, {"web-1", .off = true}}},
         "web-0:Removing web-1:Removing"},
        {{.replicas = 2, .vms = {{"web-0", .inflight = true}}, .clones = {0}, .n_clones = 1},
         "web-0:Creating"},
        {{.replicas = 0, .vms = {{"bob", .mark = ""}}}, ""},
        /* What the operator intends, also while it cannot act: vCenter
         * failing, the group blocked, no operation left in the budget. */
        {{.replicas = 3,
          .vms = {{"web-0", .off = true}, {"web-1", .cpu = 1}, {"web-2"}, {"web-3", .off = true}},
          .transient = "vCenter session expired"},
         "web-0:Starting web-1:Resizing web-2:Ready web-3:Removing"},
        {{.replicas = 3,
          .vms = {{"web-0", .off = true}, {"web-1", .cpu = 1}, {"web-2"}, {"web-3", .off = true}},
          .block = PLAN_BLOCK_OTHER,
          .block_reason = "PermissionDenied",
          .block_message = "no"},
         "web-0:Starting web-1:Resizing web-2:Ready web-3:Removing"},
        {{.replicas = 3,
          .vms = {{"web-0", .off = true}, {"web-1", .cpu = 1}, {"web-2"}, {"web-3", .off = true}},
          .limit = 1},
         "web-0:Starting web-1:Resizing web-2:Ready web-3:Removing"},
    };
    char got[512];

    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct plan *p = plan_guests(&rows[i].tc, NULL, NULL);
        if (strcmp(vms_desc(p, got, sizeof(got)), rows[i].want) != 0)
            fail_msg("row %zu: vms \"%s\", want \"%s\"", i, got, rows[i].want);
        assert_int_equal(p->status.vms_omitted, 0);
        plan_free(p);
    }

    /* The fields of an entry, as written. */
    struct plan *p = plan_guests(&rows[0].tc, NULL, "10.0.0.5");
    cJSON *st = status_json(p), *vms = cJSON_GetObjectItem(st, "vms"), *e;
    char *text;
    assert_int_equal(cJSON_GetArraySize(vms), 4);
    e = cJSON_GetArrayItem(vms, 0);
    text = cJSON_PrintUnformatted(e);
    assert_string_equal(text,
                        "{\"name\":\"web-0\",\"instanceUUID\":\"5000-0\",\"powerState\":"
                        "\"poweredOn\",\"cpu\":2,\"memoryMB\":4096,\"template\":\"tmpl-a\","
                        "\"state\":\"Ready\",\"ipAddresses\":[\"10.0.0.5\",\"2001:db8::1\"]}");
    free(text);
    e = cJSON_GetArrayItem(vms, 3); /* a clone vCenter does not show yet */
    text = cJSON_PrintUnformatted(e);
    assert_string_equal(text, "{\"name\":\"web-3\",\"state\":\"Creating\"}");
    free(text);
    assert_int_equal(cJSON_GetObjectItem(st, "vmsOmitted")->valueint, 0);
    plan_free(p);

    /* Written back: quiet; an address that changes, or appears, is a write. */
    p = plan_guests(&rows[0].tc, st, "10.0.0.5");
    assert_false(p->status_changed);
    plan_free(p);
    p = plan_guests(&rows[0].tc, st, "10.0.0.6");
    assert_true(p->status_changed);
    plan_free(p);
    p = plan_guests(&rows[0].tc, st, NULL);
    assert_true(p->status_changed);
    plan_free(p);
    /* A status from before status.vms: written once. */
    cJSON_DeleteItemFromObject(st, "vms");
    cJSON_DeleteItemFromObject(st, "vmsOmitted");
    p = plan_guests(&rows[0].tc, st, "10.0.0.5");
    assert_true(p->status_changed);
    plan_free(p);
    cJSON_Delete(st);
}

/* vCenter out of use: the VMs and replicas a stored status names stay (the
 * status written leaves them out), also when the status lacks fields of
 * its own (written by another tool, or an older operator), as long as its
 * replicas and VMs read whole; not when they do not. */
static void test_outage_keeps_vms_of_incomplete_status(void **state)
{
    static const struct tcase running = {.replicas = 2, .vms = {{"web-0"}, {"web-1"}}};
    static const struct tcase down = {.replicas = 2, .folder = F_UNKNOWN};
    struct plan *p = plan_guests(&running, NULL, NULL);
    cJSON *st = status_json(p), *js, *broken;

    (void)state;
    plan_free(p);
    cJSON_DeleteItemFromObject(st, "conditions");
    p = plan_guests(&down, st, NULL);
    assert_true(p->status.vms_kept);
    assert_int_equal(p->status.current_replicas, 2);
    assert_int_equal(p->status.n_vms, 2);
    assert_true(p->status_changed); /* the conditions are written */
    js = status_json(p);
    assert_null(cJSON_GetObjectItem(js, "currentReplicas"));
    assert_null(cJSON_GetObjectItem(js, "vms"));
    assert_non_null(cJSON_GetObjectItem(js, "conditions"));
    cJSON_Delete(js);
    plan_free(p);

    /* A VM entry that cannot be read: the VMs are not known, not kept. */
    broken = cJSON_Duplicate(st, true);
    cJSON_AddItemToArray(cJSON_GetObjectItem(broken, "vms"), cJSON_CreateNumber(7));
    p = plan_guests(&down, broken, NULL);
    assert_false(p->status.vms_kept);
    assert_int_equal(p->status.current_replicas, 0);
    plan_free(p);
    cJSON_Delete(broken);
    /* Nor without currentReplicas. */
    cJSON_DeleteItemFromObject(st, "currentReplicas");
    p = plan_guests(&down, st, NULL);
    assert_false(p->status.vms_kept);
    plan_free(p);
    cJSON_Delete(st);
}

/* What vCenter shows is written as valid UTF-8, broken bytes as '?', so
 * that what the API server stores compares equal: written once. */
static void test_status_vms_utf8(void **state)
{
    static const struct tcase tc = {.replicas = 1, .vms = {{"web-0"}}};
    struct built b;
    struct plan *p = NULL;
    cJSON *st = NULL;
    char *text;

    (void)state;
    for (int k = 0; k < 2; k++) {
        build(&tc, &b, k ? st : NULL);
        b.vms[0].instance_uuid = "50\xff-0";
        b.vms[0].power_state = "poweredOn";
        b.vms[0].template = "tmpl-\xc3\xa9\xf0\x9f\x98"; /* é, and a cut U+1F600 */
        assert_int_equal(planner_plan(&b.in, &p), 0);
        vmgroup_free(b.g);
        if (k == 1) {
            assert_false(p->status_changed);
            plan_free(p);
            break;
        }
        st = status_json(p);
        text = cJSON_PrintUnformatted(cJSON_GetArrayItem(cJSON_GetObjectItem(st, "vms"), 0));
        assert_non_null(strstr(text, "\"instanceUUID\":\"50?-0\""));
        assert_non_null(strstr(text, "\"template\":\"tmpl-\xc3\xa9???\""));
        free(text);
        plan_free(p);
    }
    cJSON_Delete(st);
}

/* status.vms is bounded: the first VMGROUP_MAX_STATUS_VMS members by name,
 * the others counted in vmsOmitted. */
static void test_status_vms_bound(void **state)
{
    enum { N = VMGROUP_MAX_STATUS_VMS + 6 };
    static char names[N][16];
    static struct plan_vm vms[N];
    struct vmgroup *g = make_group(2, 4, N, "tmpl-a", true, false, NULL);
    struct planner_input in = {.g = g,
                               .vms = vms,
                               .n_vms = N,
                               .folder = PLAN_FOLDER_PRESENT,
                               .now = NOW,
                               .max_inflight = 10};
    struct plan *p = NULL, *p2 = NULL;
    cJSON *st;

    (void)state;
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "web-%d", N - 1 - i);
        vms[i] = (struct plan_vm){.name = names[i],
                                  .mark_uid = UID,
                                  .template = "tmpl-a",
                                  .powered_on = true,
                                  .num_cpu = 2,
                                  .memory_mb = 4096,
                                  .power_state = "poweredOn"};
    }
    assert_int_equal(planner_plan(&in, &p), 0);
    assert_int_equal(p->status.n_vms, VMGROUP_MAX_STATUS_VMS);
    assert_int_equal(p->status.vms_omitted, 6);
    for (unsigned i = 1; i < p->status.n_vms; i++)
        assert_true(strcmp(p->vms[i - 1].name, p->vms[i].name) < 0);
    assert_string_equal(p->vms[0].name, "web-0");
    assert_string_equal(p->vms[1].name, "web-1");
    assert_string_equal(p->vms[2].name, "web-10");
    st = status_json(p);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(st, "vms")), VMGROUP_MAX_STATUS_VMS);
    assert_int_equal(cJSON_GetObjectItem(st, "vmsOmitted")->valueint, 6);
    vmgroup_free(g);
    g = make_group(2, 4, N, "tmpl-a", true, false, st);
    in.g = g;
    assert_int_equal(planner_plan(&in, &p2), 0);
    assert_false(p2->status_changed);
    assert_int_equal(p2->n_actions, 0);
    plan_free(p);
    plan_free(p2);
    cJSON_Delete(st);
    vmgroup_free(g);
}

/* lastTransitionTime changes only with the condition's status. */
static void test_transition_times(void **state)
{
    static const struct tcase three = {.replicas = 3};
    static const struct tcase two = {.replicas = 3, .vms = {{"web-0"}}};
    static const struct tcase done = {.replicas = 1, .vms = {{"web-0"}}};
    struct plan *p1, *p2, *p3;
    cJSON *s1, *s2;

    (void)state;
    p1 = plan_once(&three, NULL, NOW);
    s1 = status_json(p1);
    /* Still progressing, another message: times kept, status rewritten. */
    p2 = plan_once(&two, s1, LATER);
    assert_true(p2->status_changed);
    assert_string_equal(p2->status.last_message, "creating 2 VMs (1 of 3 exist)");
    s2 = status_json(p2);
    assert_string_equal(vmgroup_condition_find(&p2->status, "Progressing")->last_transition_time,
                        NOW);
    /* Ready flips: its time and Progressing's move; Degraded's stays. */
    p3 = plan_once(&done, s2, LATER);
    assert_true(p3->status_changed);
    assert_string_equal(vmgroup_condition_find(&p3->status, "Ready")->last_transition_time, LATER);
    assert_string_equal(vmgroup_condition_find(&p3->status, "Progressing")->last_transition_time,
                        LATER);
    assert_string_equal(vmgroup_condition_find(&p3->status, "Degraded")->last_transition_time, NOW);
    assert_int_equal(p3->n_actions, 1); /* event Normal Ready */
    assert_string_equal(p3->actions[0].reason, "Ready");
    plan_free(p1);
    plan_free(p2);
    plan_free(p3);
    cJSON_Delete(s1);
    cJSON_Delete(s2);
}

/* A message from vCenter with invalid UTF-8 or beyond the bound is made
 * safe, so that what is written reads back equal. */
static void test_message_sanitized(void **state)
{
    char big[3000];
    struct tcase tc = {.replicas = 1, .transient = "bad \xff\xfe bytes \xc3"};
    struct plan *p;
    cJSON *st;

    (void)state;
    p = plan_once(&tc, NULL, NOW);
    assert_string_equal(p->status.last_message, "bad ?? bytes ?");
    plan_free(p);

    memset(big, 'x', sizeof(big) - 3);
    big[sizeof(big) - 3] = '\xc3';
    big[sizeof(big) - 2] = '\xa9';
    big[sizeof(big) - 1] = '\0';
    big[VMGROUP_MAX_MESSAGE - 1] = '\xc3'; /* cut in the middle of a sequence */
    big[VMGROUP_MAX_MESSAGE] = '\xa9';
    tc.transient = big;
    p = plan_once(&tc, NULL, NOW);
    assert_int_equal(strlen(p->status.last_message), VMGROUP_MAX_MESSAGE);
    assert_int_equal(p->status.last_message[VMGROUP_MAX_MESSAGE - 1], '?');
    st = status_json(p);
    plan_free(p);
    p = plan_once(&tc, st, LATER);
    assert_false(p->status_changed);
    assert_int_equal(p->n_actions, 0);
    plan_free(p);
    cJSON_Delete(st);
}

static void test_bad_input(void **state)
{
    struct planner_input in = {.now = NOW};
    struct plan *p = NULL;
    char buf[8];

    (void)state;
    assert_int_equal(planner_plan(&in, &p), -EINVAL);
    assert_int_equal(planner_plan(NULL, &p), -EINVAL);
    assert_null(p);
    static const struct tcase tc = {.replicas = 1};
    struct built b;
    build(&tc, &b, NULL);
    b.in.now = NULL;
    assert_int_equal(planner_plan(&b.in, &p), -EINVAL);
    b.in.now = NOW;
    b.in.n_vms = 2;
    b.in.vms = NULL;
    assert_int_equal(planner_plan(&b.in, &p), -EINVAL);
    vmgroup_free(b.g);
    assert_null(p);
    /* plan_describe truncates and reports the length it needed. */
    build(&(struct tcase){.replicas = 3}, &b, NULL);
    assert_int_equal(planner_plan(&b.in, &p), 0);
    assert_int_equal(plan_describe(p, buf, sizeof(buf)),
                     (int)strlen("clone web-0; clone web-1; clone web-2"));
    assert_string_equal(buf, "clone w");
    assert_int_equal(plan_describe(p, NULL, 0), 37);
    plan_free(p);
    plan_free(NULL);
    vmgroup_free(b.g);
}

/* ---- The simulation ---- */

#define SIM_MAX_VMS 32

struct sim_vm {
    char name[NAMING_BUF_SIZE];
    char mark[32]; /* "" unmarked */
    char tmpl[32];
    char iu[40];    /* its instanceUuid */
    char imark[40]; /* its instance mark; "" none (cloned before that mark) */
    bool on;
    int cpu, mem_mb;
    uint64_t order;
    enum plan_action_kind op; /* in flight when op_on */
    bool op_on;
    bool failed;
};

struct sim {
    struct sim_vm vms[SIM_MAX_VMS];
    size_t n;
    struct {
        int slot;
        char tmpl[32];
        int cpu, mem_mb;
    } clones[SIM_MAX_VMS];
    size_t n_clones;
    bool folder, folder_op;
    bool finalizer, deleting, gone;
    cJSON *status;
    uint64_t order;
    /* the spec */
    int cpu, memory, replicas;
    const char *tmpl;
    /* Actions started this round, finished at the end of the next. */
    struct plan_action started[64];
    char started_vm[64][NAMING_BUF_SIZE];
    size_t n_started;
    /* Invariant bookkeeping. */
    int ceiling;       /* members may not exceed this */
    bool had_inflight; /* the last round planned with operations in flight */
    bool rolling;      /* a resize is under way from a fully available group */
    int foreign_seen;
    int foreign_events; /* Warning ForeignVMs events planned */
};

static struct sim_vm *sim_find(struct sim *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++) {
        if (strcmp(s->vms[i].name, name) == 0)
            return &s->vms[i];
    }
    return NULL;
}

static void sim_remove(struct sim *s, struct sim_vm *v)
{
    *v = s->vms[--s->n];
}

static void sim_add_vm(struct sim *s, const char *name, const char *mark, const char *tmpl, bool on,
                       int cpu, int mem_mb)
{
    struct sim_vm *v = &s->vms[s->n++];

    assert_true(s->n <= SIM_MAX_VMS);
    memset(v, 0, sizeof(*v));
    snprintf(v->name, sizeof(v->name), "%s", name);
    snprintf(v->mark, sizeof(v->mark), "%s", mark);
    snprintf(v->tmpl, sizeof(v->tmpl), "%s", tmpl);
    v->on = on;
    v->cpu = cpu;
    v->mem_mb = mem_mb;
    v->order = ++s->order;
    snprintf(v->iu, sizeof(v->iu), "5000-%llu", (unsigned long long)v->order);
}

/* sim_finish completes the operations started in the previous round. */
static void sim_finish(struct sim *s)
{
    for (size_t i = 0; i < s->n_started; i++) {
        const struct plan_action *a = &s->started[i];
        const char *name = s->started_vm[i];
        struct sim_vm *v = sim_find(s, name);
        switch (a->kind) {
        case PLAN_CREATE_FOLDER:
            s->folder = true;
            s->folder_op = false;
            break;
        case PLAN_DESTROY_FOLDER:
            assert_int_equal(s->n, (size_t)0); /* never destroy a folder with VMs in it */
            s->folder = false;
            s->folder_op = false;
            break;
        case PLAN_CLONE:
            for (size_t k = 0; k < s->n_clones; k++) {
                if (s->clones[k].slot != a->slot)
                    continue;
                assert_null(sim_find(s, name)); /* DuplicateName would be a bug here */
                sim_add_vm(s, name, UID, s->clones[k].tmpl, true, s->clones[k].cpu,
                           s->clones[k].mem_mb);
                memcpy(s->vms[s->n - 1].imark, s->vms[s->n - 1].iu, sizeof(s->vms[0].iu));
                s->clones[k] = s->clones[--s->n_clones];
                break;
            }
            break;
        case PLAN_POWER_ON:
            v->on = true;
            v->op_on = false;
            break;
        case PLAN_POWER_OFF:
            v->on = false;
            v->op_on = false;
            break;
        case PLAN_RECONFIGURE:
            assert_false(v->on);
            v->cpu = a->cpu;
            v->mem_mb = a->memory_mb;
            v->op_on = false;
            break;
        case PLAN_DESTROY_VM:
            assert_false(v->on); /* powered off first */
            sim_remove(s, v);
            break;
        case PLAN_MARK:
            memcpy(v->imark, v->iu, sizeof(v->iu));
            v->op_on = false;
            break;
        default:
            break;
        }
    }
    s->n_started = 0;
}

static int sim_members(const struct sim *s)
{
    int n = (int)s->n_clones;
    for (size_t i = 0; i < s->n; i++)
        n += strcmp(s->vms[i].mark, UID) == 0;
    return n;
}

static int sim_unavailable(const struct sim *s)
{
    int n = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct sim_vm *v = &s->vms[i];
        n += strcmp(v->mark, UID) == 0 && (!v->on || (v->op_on && v->op != PLAN_MARK));
    }
    return n;
}

/* sim_round plans once, checks the invariants, finishes the previous
 * round's operations and starts this round's. Returns the plan's number of
 * actions other than events, or -1 once the object is gone. */
static int sim_round(struct sim *s, const char *now)
{
    struct plan_vm vms[SIM_MAX_VMS];
    int clones[SIM_MAX_VMS];
    struct vmgroup *g;
    struct plan *p = NULL;
    int acts = 0;

    if (s->gone)
        return -1;
    g = make_group(s->cpu, s->memory, s->replicas, s->tmpl, s->finalizer, s->deleting, s->status);
    for (size_t i = 0; i < s->n; i++) {
        const struct sim_vm *v = &s->vms[i];
        vms[i] = (struct plan_vm){.name = v->name,
                                  .mark_uid = v->mark[0] ? v->mark : NULL,
                                  .template = v->tmpl,
                                  .powered_on = v->on,
                                  .num_cpu = v->cpu,
                                  .memory_mb = v->mem_mb,
                                  .create_order = v->order,
                                  .inflight = v->op_on,
                                  .marking = v->op_on && v->op == PLAN_MARK,
                                  .failed = v->failed,
                                  .instance_uuid = v->iu,
                                  .mark_instance = v->imark[0] ? v->imark : NULL};
    }
    for (size_t i = 0; i < s->n_clones; i++)
        clones[i] = s->clones[i].slot;
    struct planner_input in = {
        .g = g,
        .vms = vms,
        .n_vms = s->n,
        .folder = s->folder ? PLAN_FOLDER_PRESENT : PLAN_FOLDER_ABSENT,
        .folder_inflight = s->folder_op,
        .clones_inflight = clones,
        .n_clones_inflight = s->n_clones,
        .now = now,
        .max_inflight = 3,
    };
    assert_int_equal(planner_plan(&in, &p), 0);
    s->had_inflight = s->n_started > 0 || s->n_clones > 0 || s->folder_op;

    /* Never more members than allowed; never a second replica down for a
     * resize; never beyond the limit. */
    int planned_clones = 0, started_ops = 0;
    for (size_t i = 0; i < p->n_actions; i++) {
        planned_clones += p->actions[i].kind == PLAN_CLONE;
        started_ops += p->actions[i].kind != PLAN_EVENT &&
                       p->actions[i].kind != PLAN_ADD_FINALIZER &&
                       p->actions[i].kind != PLAN_REMOVE_FINALIZER;
    }
    assert_true(sim_members(s) + planned_clones <= s->ceiling);
    int inflight = (int)s->n_clones + (s->folder_op ? 1 : 0);
    for (size_t i = 0; i < s->n; i++)
        inflight += s->vms[i].op_on && s->vms[i].op != PLAN_MARK; /* marks in flight hold none */
    assert_true(inflight + started_ops <= 3 || started_ops == 0);
    s->foreign_seen = p->foreign;

    if (p->status_changed) {
        cJSON_Delete(s->status);
        s->status = status_json(p);
    }
    sim_finish(s);
    for (size_t i = 0; i < p->n_actions; i++) {
        const struct plan_action *a = &p->actions[i];
        struct sim_vm *v = a->vm ? sim_find(s, a->vm) : NULL;
        if (a->kind == PLAN_EVENT) {
            s->foreign_events += strcmp(a->reason, "ForeignVMs") == 0;
            continue;
        }
        acts++;
        switch (a->kind) {
        case PLAN_ADD_FINALIZER:
            s->finalizer = true;
            continue;
        case PLAN_REMOVE_FINALIZER:
            s->finalizer = false;
            s->gone = true;
            continue;
        case PLAN_CREATE_FOLDER:
        case PLAN_DESTROY_FOLDER:
            s->folder_op = true;
            break;
        case PLAN_CLONE:
            s->clones[s->n_clones].slot = a->slot;
            snprintf(s->clones[s->n_clones].tmpl, sizeof(s->clones[0].tmpl), "%s", a->template);
            s->clones[s->n_clones].cpu = a->cpu;
            s->clones[s->n_clones].mem_mb = a->memory_mb;
            s->n_clones++;
            break;
        default:
            /* Only the group's own VMs, and never one that is busy. */
            assert_non_null(v);
            assert_string_equal(v->mark, UID);
            assert_false(v->op_on);
            if (a->kind == PLAN_MARK) /* with its own instanceUuid */
                assert_string_equal(a->instance_uuid, v->iu);
            v->op_on = true;
            v->op = a->kind;
            break;
        }
        s->started[s->n_started] = *a;
        snprintf(s->started_vm[s->n_started], NAMING_BUF_SIZE, "%s", a->vm ? a->vm : "");
        s->n_started++;
    }
    if (s->rolling)
        assert_true(sim_unavailable(s) <= 1);
    plan_free(p);
    vmgroup_free(g);
    return acts;
}

/* sim_settle runs rounds until a round plans nothing and nothing is in
 * flight; fails if that takes more than max rounds. Returns the rounds. */
static int sim_settle(struct sim *s, int max)
{
    for (int round = 1; round <= max; round++) {
        int acts = sim_round(s, round % 2 ? NOW : LATER);
        if (acts < 0 || (acts == 0 && !s->had_inflight))
            return round;
    }
    fail_msg("no steady state after %d rounds", max);
    return max;
}

static const char *sim_phase(const struct sim *s)
{
    return cJSON_GetObjectItem(s->status, "phase")->valuestring;
}

static void test_simulation(void **state)
{
    struct sim *s = calloc(1, sizeof(*s));
    struct sim_vm *v;

    (void)state;
    assert_non_null(s);
    s->cpu = 1;
    s->memory = 2;
    s->replicas = 5;
    s->tmpl = "tmpl-a";
    s->ceiling = 5;

    /* Create: finalizer, folder, five clones (three at a time), running. */
    sim_settle(s, 20);
    assert_true(s->finalizer);
    assert_true(s->folder);
    assert_int_equal(sim_members(s), 5);
    assert_string_equal(sim_phase(s), "RUNNING");
    for (int k = 0; k < 5; k++) {
        char name[NAMING_BUF_SIZE];
        naming_vm("default", "web", k, name, sizeof(name));
        assert_non_null(sim_find(s, name));
    }
    /* In sync: another round does nothing and writes nothing. */
    cJSON *before = cJSON_Duplicate(s->status, true);
    assert_int_equal(sim_round(s, "2024-05-02T00:00:00Z"), 0);
    assert_true(cJSON_Compare(before, s->status, true));
    cJSON_Delete(before);

    /* Cloned before the instance mark (an upgrade): each VM gets it, while
     * the group stays RUNNING, with nothing else done. */
    for (size_t i = 0; i < s->n; i++)
        s->vms[i].imark[0] = '\0';
    for (int round = 0;; round++) {
        int acts = sim_round(s, NOW);
        assert_true(round < 10);
        assert_string_equal(sim_phase(s), "RUNNING");
        if (acts == 0 && !s->had_inflight)
            break;
    }
    for (size_t i = 0; i < s->n; i++)
        assert_string_equal(s->vms[i].imark, s->vms[i].iu);
    /* Three of them again, to be marked during the resize below. */
    for (size_t i = 0; i < 3; i++)
        s->vms[i].imark[0] = '\0';

    /* Someone drops a VM of their own in the folder, and another group's VM
     * lands there too. */
    sim_add_vm(s, "bob", "", "x", false, 1, 1024);
    sim_add_vm(s, "web-5", OTHER, "x", true, 4, 8192);

    /* Resize: one replica down at a time. */
    s->cpu = 2;
    s->memory = 4;
    s->rolling = true;
    sim_settle(s, 60);
    s->rolling = false;
    for (size_t i = 0; i < s->n; i++) {
        if (strcmp(s->vms[i].mark, UID) == 0) {
            assert_int_equal(s->vms[i].cpu, 2);
            assert_int_equal(s->vms[i].mem_mb, 4096);
            assert_true(s->vms[i].on);
            assert_string_equal(s->vms[i].imark, s->vms[i].iu);
        }
    }
    assert_string_equal(sim_phase(s), "RUNNING");
    assert_int_equal(s->foreign_seen, 2);

    /* Template change, then scale up: the new ones come from the new one. */
    s->tmpl = "tmpl-b";
    s->replicas = 7;
    s->ceiling = 7;
    sim_settle(s, 20);
    int newer = 0;
    for (size_t i = 0; i < s->n; i++)
        newer += strcmp(s->vms[i].mark, UID) == 0 && strcmp(s->vms[i].tmpl, "tmpl-b") == 0;
    assert_int_equal(newer, 2);
    assert_int_equal(sim_members(s), 7);
    assert_non_null(strstr(cJSON_GetObjectItem(s->status, "lastMessage")->valuestring,
                           "5 cloned from a template other than \"tmpl-b\""));

    /* Out of band: one destroyed, one powered off, one resized, one failed. */
    sim_remove(s, sim_find(s, "web-1"));
    sim_find(s, "web-2")->on = false;
    v = sim_find(s, "web-3");
    v->cpu = 1;
    sim_find(s, "web-4")->failed = true;
    s->rolling = false;
    sim_settle(s, 40);
    assert_int_equal(sim_members(s), 7);
    assert_string_equal(sim_phase(s), "RUNNING");
    assert_int_equal(sim_find(s, "web-3")->cpu, 2);
    assert_false(sim_find(s, "web-4")->failed); /* replaced */

    /* Scale down to 2, then to 0: never a clone, and the survivors are the
     * lowest slots, web-0 and web-1, though web-1 is now the newest. */
    s->replicas = 2;
    s->ceiling = sim_members(s);
    sim_settle(s, 40);
    assert_int_equal(sim_members(s), 2);
    assert_non_null(sim_find(s, "web-0"));
    assert_non_null(sim_find(s, "web-1"));
    s->replicas = 0;
    s->ceiling = 2;
    sim_settle(s, 20);
    assert_int_equal(sim_members(s), 0);
    assert_string_equal(sim_phase(s), "RUNNING");

    /* The foreign VMs were reported once, however the inventory changed. */
    assert_int_equal(s->foreign_events, 1);

    /* Back to 3, then delete: VMs, then the folder is kept for the foreign
     * VMs, then the finalizer goes; the foreign VMs survive. */
    s->replicas = 3;
    s->ceiling = 3;
    sim_settle(s, 20);
    assert_int_equal(sim_members(s), 3);
    s->deleting = true;
    s->ceiling = 3;
    sim_settle(s, 30);
    assert_true(s->gone);
    assert_false(s->finalizer);
    assert_int_equal(sim_members(s), 0);
    assert_true(s->folder);
    assert_int_equal(s->n, 2);
    assert_non_null(sim_find(s, "bob"));
    assert_non_null(sim_find(s, "web-5"));

    cJSON_Delete(s->status);
    free(s);
}

/* Deleting a group whose folder holds only its own VMs removes the folder. */
static void test_simulation_delete_all(void **state)
{
    struct sim *s = calloc(1, sizeof(*s));

    (void)state;
    assert_non_null(s);
    s->cpu = 1;
    s->memory = 1;
    s->replicas = 4;
    s->tmpl = "t";
    s->ceiling = 4;
    sim_settle(s, 20);
    assert_int_equal(sim_members(s), 4);
    /* Scale down and delete at once. */
    s->replicas = 1;
    s->deleting = true;
    sim_settle(s, 30);
    assert_true(s->gone);
    assert_false(s->folder);
    assert_int_equal(s->n, 0);
    cJSON_Delete(s->status);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_order_independent),
        cmocka_unit_test(test_action_fields),
        cmocka_unit_test(test_events_and_degraded),
        cmocka_unit_test(test_quiet_in_sync),
        cmocka_unit_test(test_selector),
        cmocka_unit_test(test_status_vms),
        cmocka_unit_test(test_outage_keeps_vms_of_incomplete_status),
        cmocka_unit_test(test_status_vms_utf8),
        cmocka_unit_test(test_status_vms_bound),
        cmocka_unit_test(test_transition_times),
        cmocka_unit_test(test_message_sanitized),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_simulation),
        cmocka_unit_test(test_simulation_delete_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
