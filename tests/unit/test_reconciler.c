/* test_reconciler.c: the executor's bookkeeping around the planner, with a
 * fake world: operations in flight are not started twice, completions
 * re-enqueue, a collision by name is not an error, a missing template blocks
 * with its message, vCenter being down shows in status, and a group in sync
 * costs nothing. */
#include "tests/unit/unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "controller/naming.h"
#include "controller/reconciler.h"
#include "lib/err.h"

#define MAXCALLS 64

struct call {
    char what[32];
    char vm[96];
    char ref[64]; /* the VM's id the call was given; "" when none */
    rec_done_cb cb;
    void *cbdata;
    bool done;
};

struct fake {
    struct vmgroup *g;
    struct plan_vm vms[16];
    char names[16][96];
    size_t n_vms;
    /* A second group, ns/db, in folder ns_db: NULL but for the tests that
     * need two. */
    struct vmgroup *g2;
    struct plan_vm vms2[4];
    size_t n_vms2;
    enum plan_folder_state folder;
    bool truncated;    /* the folder holds more VMs than it shows */
    int ready;         /* 0 or a negative code */
    uint64_t down_ms;  /* how long vCenter has not been usable */
    char result[32];   /* the last pass's outcome (the reconciled hook) */
    char stored[4096]; /* the status the API server has (written_status) */
    struct call calls[MAXCALLS];
    size_t n_calls;
    char last_status[2048];
    size_t events;
    char last_event[256];
    size_t ready_events, foreign_events; /* of reason Ready, ForeignVMs */
    uint64_t now_ms;                     /* the reconciler's clock */
    int rereads;                         /* VMs asked to be read again */
    int marks_refused;                   /* marks to refuse before starting any */
    char reread_vm[96];
    char reread_ref[64];
    char folder_uid[64];  /* the uid the last folder call asked for */
    char marked_uuid[64]; /* the instanceUuid the last mark wrote */
    /* Status writes wait for the client's rate limit (restatus and unwrite
     * take them) rather than being out at once. */
    bool status_queued;
    size_t restatuses, unwrites;
    size_t hurried_status, hurried_meta; /* writes sent ahead (hurry) */
};

static struct fake F;

static const struct vmgroup *f_get(void *d, const char *key)
{
    (void)d;
    return strcmp(key, "ns/db") == 0 ? F.g2 : F.g;
}

static int f_ready(void *d, char *msg, size_t len)
{
    (void)d;
    if (F.ready == VMG_ENOTFOUND)
        snprintf(msg, len, "resource pool \"nope\" not found in datacenter \"DC0\"");
    else if (F.ready)
        snprintf(msg, len, "Cannot reach vCenter at vc.test: connection refused");
    return F.ready;
}

static uint64_t f_down_ms(void *d)
{
    (void)d;
    return F.down_ms;
}

static void f_reconciled(void *d, const char *key, const char *result, double seconds)
{
    (void)d;
    (void)key;
    (void)seconds;
    snprintf(F.result, sizeof(F.result), "%s", result);
}

static int f_folder(void *d, const char *folder, const char *uid, struct rec_folder *ret)
{
    (void)d;
    (void)folder;
    snprintf(F.folder_uid, sizeof(F.folder_uid), "%s", uid ? uid : "");
    ret->state = F.folder;
    ret->vms = strcmp(folder, "ns_db") == 0 ? F.vms2 : F.vms;
    ret->n_vms = strcmp(folder, "ns_db") == 0 ? F.n_vms2 : F.n_vms;
    ret->other_objects = 0;
    ret->truncated = F.truncated;
    return 0;
}

static void f_now(void *d, char *buf, size_t len)
{
    (void)d;
    snprintf(buf, len, "2026-11-22T00:00:00Z");
}

static struct call *record(const char *what, const char *vm, rec_done_cb cb, void *cbdata)
{
    struct call *c;
    assert_true(F.n_calls < MAXCALLS);
    c = &F.calls[F.n_calls++];
    snprintf(c->what, sizeof(c->what), "%s", what);
    snprintf(c->vm, sizeof(c->vm), "%s", vm ? vm : "");
    c->cb = cb;
    c->cbdata = cbdata;
    c->done = false;
    return c;
}

static int f_patch_status(void *d, const struct vmgroup *g, const cJSON *st, rec_done_cb cb,
                          void *cbdata, void **ret)
{
    char *s = cJSON_PrintUnformatted(st);
    struct call *c;
    (void)d;
    (void)g;
    snprintf(F.last_status, sizeof(F.last_status), "%s", s);
    free(s);
    c = record("status", NULL, cb, cbdata);
    if (ret)
        *ret = c;
    return 0;
}

static int f_restatus(void *d, void *write, const cJSON *st)
{
    struct call *c = write;
    char *s;
    (void)d;
    assert_false(c->done);
    if (!F.status_queued)
        return -EBUSY;
    s = cJSON_PrintUnformatted(st);
    snprintf(F.last_status, sizeof(F.last_status), "%s", s);
    free(s);
    F.restatuses++;
    return 0;
}

static int f_unwrite(void *d, void *write)
{
    struct call *c = write;
    (void)d;
    assert_false(c->done);
    if (!F.status_queued)
        return -EBUSY;
    F.unwrites++;
    c->done = true;
    c->cb(c->cbdata, VMG_ECANCELED, NULL, NULL);
    return 0;
}

static int f_patch_meta(void *d, const struct vmgroup *g, const cJSON *p, rec_done_cb cb,
                        void *cbdata, void **ret)
{
    struct call *c;
    (void)d;
    (void)g;
    (void)p;
    c = record("meta", NULL, cb, cbdata);
    if (ret)
        *ret = c;
    return 0;
}

static int f_hurry(void *d, void *write)
{
    struct call *c = write;
    (void)d;
    assert_false(c->done);
    if (strcmp(c->what, "meta") == 0)
        F.hurried_meta++;
    else if (F.status_queued)
        F.hurried_status++;
    else
        return -EBUSY;
    return 0;
}

static void f_event(void *d, const struct vmgroup *g, bool warning, const char *reason,
                    const char *message)
{
    (void)d;
    (void)g;
    F.events++;
    F.ready_events += strcmp(reason, "Ready") == 0;
    F.foreign_events += strcmp(reason, "ForeignVMs") == 0;
    snprintf(F.last_event, sizeof(F.last_event), "%s %s: %s", warning ? "Warning" : "Normal",
             reason, message);
}

static int f_create_folder(void *d, const char *folder, rec_done_cb cb, void *cbdata)
{
    (void)d;
    record("create-folder", folder, cb, cbdata);
    return 0;
}

static int f_destroy_folder(void *d, const char *folder, rec_done_cb cb, void *cbdata)
{
    (void)d;
    record("destroy-folder", folder, cb, cbdata);
    return 0;
}

static int f_clone(void *d, const struct vmgroup *g, const char *folder, const char *vm,
                   const char *t, int cpu, int mem, const struct rec_keyval *extra, size_t n_extra,
                   rec_done_cb cb, void *cbdata)
{
    (void)d;
    (void)extra;
    (void)n_extra;
    (void)g;
    (void)folder;
    (void)t;
    (void)cpu;
    (void)mem;
    record("clone", vm, cb, cbdata);
    return 0;
}

/* record_vm records an operation on a VM, with the id it was given. */
static void record_vm(const char *what, const char *vm, const char *ref, rec_done_cb cb,
                      void *cbdata)
{
    struct call *c = record(what, vm, cb, cbdata);
    snprintf(c->ref, sizeof(c->ref), "%s", ref ? ref : "");
}

static int f_power(void *d, const char *folder, const char *vm, const char *ref, bool on,
                   rec_done_cb cb, void *cbdata)
{
    (void)d;
    (void)folder;
    record_vm(on ? "power-on" : "power-off", vm, ref, cb, cbdata);
    return 0;
}

static int f_reconfigure(void *d, const char *folder, const char *vm, const char *ref, int cpu,
                         int mem, rec_done_cb cb, void *cbdata)
{
    (void)d;
    (void)folder;
    (void)cpu;
    (void)mem;
    record_vm("reconfigure", vm, ref, cb, cbdata);
    return 0;
}

static int f_destroy_vm(void *d, const char *folder, const char *vm, const char *ref,
                        rec_done_cb cb, void *cbdata)
{
    (void)d;
    (void)folder;
    record_vm("destroy", vm, ref, cb, cbdata);
    return 0;
}

static int f_mark_instance(void *d, const char *folder, const char *vm, const char *ref,
                           const char *instance_uuid, rec_done_cb cb, void *cbdata)
{
    (void)d;
    (void)folder;
    if (F.marks_refused > 0) {
        F.marks_refused--;
        return -EIO;
    }
    record_vm("mark", vm, ref, cb, cbdata);
    snprintf(F.marked_uuid, sizeof(F.marked_uuid), "%s", instance_uuid);
    return 0;
}

static int f_reread(void *d, const char *folder, const char *vm, const char *ref)
{
    (void)d;
    (void)folder;
    F.rereads++;
    snprintf(F.reread_vm, sizeof(F.reread_vm), "%s", vm);
    snprintf(F.reread_ref, sizeof(F.reread_ref), "%s", ref ? ref : "");
    return 0;
}

static uint64_t f_clock(void *d)
{
    (void)d;
    return F.now_ms;
}

static const struct rec_world world = {
    .get_group = f_get,
    .vcenter_ready = f_ready,
    .vcenter_down_ms = f_down_ms,
    .folder = f_folder,
    .now = f_now,
    .patch_status = f_patch_status,
    .patch_meta = f_patch_meta,
    .restatus = f_restatus,
    .hurry = f_hurry,
    .unwrite = f_unwrite,
    .event = f_event,
    .create_folder = f_create_folder,
    .destroy_folder = f_destroy_folder,
    .clone = f_clone,
    .power = f_power,
    .reconfigure = f_reconfigure,
    .destroy_vm = f_destroy_vm,
    .mark_instance = f_mark_instance,
    .reread = f_reread,
    .reconciled = f_reconciled,
};

static void set_group(const char *json)
{
    cJSON *o = cJSON_Parse(json);
    char err[256];
    assert_non_null(o);
    vmgroup_free(F.g);
    F.g = NULL;
    assert_int_equal(vmgroup_from_json(o, &F.g, err, sizeof(err)), 0);
    cJSON_Delete(o);
}

#define GROUP(rv, finalizer, replicas, status)                                                     \
    "{\"apiVersion\":\"vm.codeconnect.vmworld.com/v1alpha1\",\"kind\":\"VmGroup\","                \
    "\"metadata\":{\"namespace\":\"ns\",\"name\":\"web\",\"uid\":\"u-1\",\"resourceVersion\":"     \
    "\"" rv "\",\"generation\":1" finalizer "},"                                                   \
    "\"spec\":{\"cpu\":2,\"memory\":2,\"template\":\"tmpl\",\"replicas\":" #replicas "}" status    \
    "}"

#define FIN ",\"finalizers\":[\"vm.codeconnect.vmworld.com/finalizer\"]"
#define FIN_AND_OTHER                                                                              \
    ",\"finalizers\":[\"other.example/x\",\"vm.codeconnect.vmworld.com/finalizer\"]"
#define DELETED ",\"deletionTimestamp\":\"2026-11-22T00:00:00Z\""

/* set_group_made_again sets the group to json (a GROUP(...)) as the
 * object made again under the same name: another UID, u-2. */
static void set_group_made_again(const char *json)
{
    char buf[4096];
    char *u;

    snprintf(buf, sizeof(buf), "%s", json);
    u = strstr(buf, "\"u-1\"");
    assert_non_null(u);
    u[3] = '2';
    set_group(buf);
}

static void add_vm(int slot, bool on)
{
    struct plan_vm *v = &F.vms[F.n_vms];
    naming_vm("ns", "web", slot, F.names[F.n_vms], sizeof(F.names[0]));
    v->name = F.names[F.n_vms];
    v->mark_uid = "u-1";
    v->template = "tmpl";
    v->powered_on = on;
    v->num_cpu = 2;
    v->memory_mb = 2048;
    v->create_order = (uint64_t)slot + 1;
    F.n_vms++;
}

struct env {
    uv_loop_t loop;
    struct wq *q;
    reconciler *r;
};

/* pass runs one reconcile of ns/web through the queue, as a worker would. */
static void pass(struct env *e)
{
    const char *k = NULL;
    assert_int_equal(wq_add(e->q, "ns/web"), 0);
    assert_int_equal(wq_get(e->q, &k), 0);
    reconciler_handle(e->r, k);
}

/* gone: the watch brought the group's deletion (or the finalizer's removal
 * let the API server delete it). */
static void gone(void)
{
    vmgroup_free(F.g);
    F.g = NULL;
}

/* drain takes every key queued and lets it go, unreconciled. */
static void drain(struct env *e)
{
    const char *k = NULL;
    while (wq_get(e->q, &k) == 0)
        wq_done(e->q, k);
}

/* queued runs the key queued by a completion, as a worker would. */
static void queued(struct env *e)
{
    const char *k = NULL;
    assert_int_equal(wq_get(e->q, &k), 0);
    reconciler_handle(e->r, k);
}

static size_t count(const char *what)
{
    size_t n = 0;
    for (size_t i = 0; i < F.n_calls; i++)
        n += strcmp(F.calls[i].what, what) == 0;
    return n;
}

/* last_call: the last call of what made (the test fails if none). */
static const struct call *last_call(const char *what)
{
    for (size_t i = F.n_calls; i > 0; i--)
        if (strcmp(F.calls[i - 1].what, what) == 0)
            return &F.calls[i - 1];
    fail_msg("no %s", what);
    return NULL;
}

static void complete(const char *what, int err, const char *fault, const char *msg)
{
    for (size_t i = 0; i < F.n_calls; i++) {
        struct call *c = &F.calls[i];
        if (!c->done && strcmp(c->what, what) == 0) {
            c->done = true;
            c->cb(c->cbdata, err, fault, msg);
            return;
        }
    }
    fail_msg("no pending %s", what);
}

/* settle_status completes status writes in flight, as the API server would. */
static void settle_status(void)
{
    for (size_t i = 0; i < F.n_calls; i++)
        if (!F.calls[i].done && strcmp(F.calls[i].what, "status") == 0) {
            F.calls[i].done = true;
            F.calls[i].cb(F.calls[i].cbdata, 0, NULL, NULL);
        }
}

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof(*e));
    struct wq_options qo = {.name = "test"};
    struct rec_options ro = {
        .max_group_tasks = 4, .blocked_retry_ms = 600000, .vc_grace_ms = 30000, .clock = f_clock};

    memset(&F, 0, sizeof(F));
    F.folder = PLAN_FOLDER_PRESENT;
    uv_loop_init(&e->loop);
    assert_int_equal(wq_new(&e->loop, &qo, &e->q), 0);
    assert_int_equal(reconciler_new(&world, &ro, e->q, &e->r), 0);
    *state = e;
    return 0;
}

static void closed(void *d)
{
    (void)d;
}

static int teardown(void **state)
{
    struct env *e = *state;
    /* Complete what is still pending, as a shutdown cancels it. */
    for (size_t i = 0; i < F.n_calls; i++)
        if (!F.calls[i].done) {
            F.calls[i].done = true;
            F.calls[i].cb(F.calls[i].cbdata, VMG_ECANCELED, NULL, NULL);
        }
    reconciler_free(e->r);
    wq_close(e->q, closed, NULL);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&e->loop), 0);
    vmgroup_free(F.g);
    vmgroup_free(F.g2);
    free(e);
    return 0;
}

static void test_finalizer_first(void **state)
{
    struct env *e = *state;
    set_group(GROUP("1", "", 3, ""));
    pass(e);
    assert_int_equal(count("meta"), 1);
    assert_int_equal(F.hurried_meta, 1); /* ahead of the status writes waiting */
    assert_int_equal(count("clone"), 0);
    assert_int_equal(count("create-folder"), 0);
    /* Again before the write completes: not written twice. */
    pass(e);
    assert_int_equal(count("meta"), 1);
}

/* A finalizer written is not written again while the cache has not shown
 * it, even when a newer version comes first (another write's); it is when
 * the write failed, when the wait is over, or when the cache showed it and
 * then lost it again. */
static void test_finalizer_written_once_per_object_version(void **state)
{
    struct env *e = *state;
    set_group(GROUP("1", "", 0, ""));
    pass(e);
    assert_int_equal(count("meta"), 1);
    complete("meta", 0, NULL, NULL);
    pass(e);                          /* the watch has not brought the written object yet */
    set_group(GROUP("2", "", 0, "")); /* the version a status write made */
    pass(e);
    assert_int_equal(count("meta"), 1);
    settle_status();
    F.now_ms += 30000; /* never shown: written again */
    pass(e);
    assert_int_equal(count("meta"), 2);
    complete("meta", VMG_ETRANSPORT, NULL, "connection reset");
    settle_status();
    pass(e);
    assert_int_equal(count("meta"), 3);
    complete("meta", 0, NULL, NULL);
    set_group(GROUP("4", FIN, 0, ""));
    pass(e);
    set_group(GROUP("5", "", 0, "")); /* someone took it off after the cache showed it */
    settle_status();
    pass(e);
    assert_int_equal(count("meta"), 4);
    complete("meta", 0, NULL, NULL);

    /* The same for removing it once vCenter is clean. */
    F.folder = PLAN_FOLDER_ABSENT;
    set_group(GROUP("7", FIN DELETED, 0, ""));
    settle_status();
    pass(e);
    assert_int_equal(count("meta"), 5);
    complete("meta", 0, NULL, NULL);
    settle_status();
    set_group(GROUP("8", FIN DELETED, 0, ""));
    pass(e);
    assert_int_equal(count("meta"), 5);
}

/* A finalizer patch made against one version of the object (a merge patch
 * with its resourceVersion: the object has no finalizer yet) would conflict
 * with a status write in flight: it waits for it. One that tests the
 * finalizers (removing ours) does not: it goes while a status write is out,
 * and drops one that is not sent yet. */
static void test_finalizer_and_status_writes_do_not_cross(void **state)
{
    struct env *e = *state;
    const char *k = NULL;

    F.folder = PLAN_FOLDER_UNKNOWN; /* no folder task either while live */
    set_group(GROUP("1", FIN, 0, ""));
    pass(e);
    assert_int_equal(count("status"), 1);
    /* Taken off by hand while that status write is out: put back once it
     * ended, the end of that write planning the group again. */
    set_group(GROUP("2", "", 0, ""));
    pass(e);
    assert_int_equal(count("meta"), 0);
    assert_int_equal(wq_get(e->q, &k), -EAGAIN);
    settle_status();
    queued(e);
    assert_int_equal(count("meta"), 1);
    complete("meta", 0, NULL, NULL);

    /* Deleted while a status write is out: the finalizer goes at once. */
    set_group(GROUP("3", FIN, 1, ""));
    pass(e);
    assert_int_equal(count("status"), 2);
    F.folder = PLAN_FOLDER_ABSENT;
    set_group(GROUP("4", FIN DELETED, 1, ""));
    pass(e);
    assert_int_equal(count("meta"), 2);
    complete("meta", 0, NULL, NULL);
    settle_status();
    gone();
    pass(e);
    assert_int_equal(reconciler_groups(e->r), 0);
}

/* A group deleted while a status write of it waits for the client's rate
 * limit: the finalizer's removal drops that write (the object goes with the
 * finalizer) instead of queueing behind it; so does the object's going. */
static void test_finalizer_removal_drops_a_status_not_sent(void **state)
{
    struct env *e = *state;

    F.status_queued = true;
    set_group(GROUP("1", FIN, 1, ""));
    add_vm(0, true);
    pass(e);
    assert_int_equal(count("status"), 1);
    F.folder = PLAN_FOLDER_ABSENT;
    F.n_vms = 0;
    set_group(GROUP("2", FIN DELETED, 1, ""));
    pass(e);
    assert_int_equal(F.unwrites, 1);
    assert_int_equal(count("meta"), 1);
    assert_int_equal(count("status"), 1);
    complete("meta", 0, NULL, NULL);
    gone();
    pass(e);
    assert_int_equal(reconciler_groups(e->r), 0);

    /* Gone (its finalizer taken off by hand) with a status write queued. */
    F.folder = PLAN_FOLDER_PRESENT;
    set_group(GROUP("5", FIN, 1, ""));
    add_vm(0, true);
    pass(e);
    assert_int_equal(count("status"), 2);
    gone();
    pass(e);
    assert_int_equal(F.unwrites, 2);
    assert_int_equal(reconciler_groups(e->r), 0);

    /* Another writer's finalizer keeps the object: the status write goes. */
    set_group(GROUP("7", FIN_AND_OTHER, 1, ""));
    pass(e);
    assert_int_equal(count("status"), 3);
    F.folder = PLAN_FOLDER_ABSENT;
    F.n_vms = 0;
    set_group(GROUP("8", FIN_AND_OTHER DELETED, 1, ""));
    pass(e);
    assert_int_equal(count("meta"), 2);
    assert_int_equal(F.unwrites, 2);
}

/* A status write that changes what the group says as a whole (phase,
 * conditions) goes ahead of the writes waiting for the client's
 * rate limit; one that only says more of a VM (a guest's address) waits its
 * turn. */
static void test_headline_goes_ahead_of_details(void **state)
{
    struct env *e = *state;
    char json[4096];

    F.status_queued = true;
    set_group(GROUP("10", FIN, 1, ""));
    add_vm(0, true);
    pass(e);
    assert_int_equal(count("status"), 1);
    assert_non_null(strstr(F.last_status, "RUNNING"));
    assert_int_equal(F.hurried_status, 1);
    settle_status();
    /* The cache shows that status; then a guest reports an address. */
    snprintf(json, sizeof(json), GROUP("11", FIN, 1, ",\"status\":%s"), F.last_status);
    set_group(json);
    F.vms[0].ip[0] = "10.0.0.5";
    F.vms[0].n_ip = 1;
    pass(e);
    assert_int_equal(count("status"), 2);
    assert_non_null(strstr(F.last_status, "10.0.0.5"));
    assert_int_equal(F.hurried_status, 1);
    settle_status();
    /* Powered off behind our back: no longer RUNNING. */
    snprintf(json, sizeof(json), GROUP("12", FIN, 1, ",\"status\":%s"), F.last_status);
    set_group(json);
    F.vms[0].powered_on = false;
    pass(e);
    assert_int_equal(count("status"), 3);
    assert_null(strstr(F.last_status, "RUNNING"));
    assert_int_equal(F.hurried_status, 2);
}

/* How far a group has come (a replica made) is no headline: it waits its
 * turn, even while the cache has not shown the last status written (what
 * the API server will hold is what counts). */
static void test_progress_waits_its_turn(void **state)
{
    struct env *e = *state;

    F.status_queued = true;
    set_group(GROUP("10", FIN, 3, ""));
    pass(e);
    assert_int_equal(count("status"), 1);
    assert_non_null(strstr(F.last_status, "PENDING"));
    assert_int_equal(F.hurried_status, 1);
    settle_status();
    /* The cache still shows no status; a clone's VM is there. */
    add_vm(0, true);
    complete("clone", 0, NULL, NULL);
    pass(e);
    assert_int_equal(count("status"), 2);
    assert_non_null(strstr(F.last_status, "\"currentReplicas\":1"));
    assert_int_equal(F.hurried_status, 1);
}

/* A status write that waits for the client's rate limit carries the newest
 * status when it goes: a group whose status changes faster than writes go
 * out writes once, not once per change; once sent, the next status waits
 * for its end. */
static void test_status_not_sent_yet_carries_the_newest(void **state)
{
    struct env *e = *state;
    const char *k = NULL;

    F.status_queued = true;
    set_group(GROUP("10", FIN, 3, ""));
    add_vm(0, true);
    pass(e);
    assert_int_equal(count("status"), 1);
    assert_int_equal(count("clone"), 2);
    assert_non_null(strstr(F.last_status, "\"currentReplicas\":1"));
    add_vm(1, true);
    complete("clone", 0, NULL, NULL);
    pass(e);
    add_vm(2, true);
    complete("clone", 0, NULL, NULL);
    pass(e);
    assert_int_equal(count("status"), 1);
    assert_int_equal(F.restatuses, 2);
    assert_non_null(strstr(F.last_status, "RUNNING"));
    /* Nothing newer to write when it ends. */
    drain(e);
    settle_status();
    assert_int_equal(wq_get(e->q, &k), -EAGAIN);
    pass(e);
    assert_int_equal(count("status"), 1);
    /* Out already: the newer status goes after it. */
    F.status_queued = false;
    F.vms[0].powered_on = false;
    pass(e);
    assert_int_equal(count("status"), 2);
    F.vms[0].powered_on = true;
    F.vms[1].powered_on = false;
    pass(e);
    assert_int_equal(count("status"), 2);
    drain(e);
    settle_status();
    queued(e);
    assert_int_equal(count("status"), 3);
}

/* A group deleted while its folder is being created keeps its finalizer
 * until that task ends: removed at once, it would leave behind the folder
 * the task then made. */
static void test_deleted_while_its_folder_is_created(void **state)
{
    struct env *e = *state;

    F.folder = PLAN_FOLDER_ABSENT;
    set_group(GROUP("1", FIN, 2, ""));
    pass(e);
    assert_int_equal(count("create-folder"), 1);
    settle_status();
    set_group(GROUP("2", FIN DELETED, 2, ""));
    pass(e);
    settle_status();
    assert_int_equal(count("meta"), 0);
    /* The task made the folder: the folder goes, then the finalizer. */
    F.folder = PLAN_FOLDER_PRESENT;
    complete("create-folder", 0, NULL, NULL);
    pass(e);
    settle_status();
    assert_int_equal(count("destroy-folder"), 1);
    assert_int_equal(count("meta"), 0);
    complete("destroy-folder", 0, NULL, NULL);
    F.folder = PLAN_FOLDER_ABSENT;
    pass(e);
    assert_int_equal(count("meta"), 1);
}

/* A destroy of a deleted group's folder that finds it holding objects the
 * inventory does not show (a vApp): no failure said, looked at again after
 * the backoff (not before, whatever plans the group meanwhile); a second
 * such answer keeps the folder and lets the group go, where it was tried
 * again forever. */
static void test_folder_holding_hidden_objects_is_kept(void **state)
{
    static const char held[] = "destroy folder ns_web: the folder holds 1 object now; it is not "
                               "destroyed";
    struct env *e = *state;

    set_group(GROUP("1", FIN DELETED, 2, ""));
    pass(e);
    settle_status();
    assert_int_equal(count("destroy-folder"), 1);
    complete("destroy-folder", VMG_ECONFLICT, "", held);
    assert_int_equal(F.events, 0);
    drain(e);
    pass(e);
    settle_status();
    assert_int_equal(count("destroy-folder"), 1);
    F.now_ms += 2000;
    pass(e);
    settle_status();
    assert_int_equal(count("destroy-folder"), 2);
    assert_int_equal(count("meta"), 0);
    complete("destroy-folder", VMG_ECONFLICT, "", held);
    drain(e);
    pass(e);
    assert_int_equal(count("destroy-folder"), 2);
    assert_int_equal(count("meta"), 1);
    assert_string_equal(F.last_event,
                        "Warning FolderKept: folder \"ns_web\" kept: it holds objects "
                        "other than VMs and folders (a vApp, say) not created by "
                        "this VmGroup");
}

/* vCenter refuses the spec's size for a VM powered off to be resized: the
 * VM is powered on again with its old size, no other VM goes off for the
 * size, and the group says so until its spec changes, when it is tried
 * again; it stayed off for good before. */
static void test_refused_size_powers_the_vm_on_again(void **state)
{
    static const char refused[] = "A specified parameter was not correct: numCPUs";
    struct env *e = *state;

    set_group(GROUP("1", FIN, 2, ""));
    add_vm(0, true);
    add_vm(1, true);
    F.vms[0].num_cpu = F.vms[1].num_cpu = 1;
    pass(e);
    settle_status();
    assert_int_equal(count("power-off"), 1);
    complete("power-off", 0, NULL, NULL);
    F.vms[0].powered_on = false;
    pass(e);
    settle_status();
    assert_int_equal(count("reconfigure"), 1);
    complete("reconfigure", VMG_EFAULT, "InvalidArgument", refused);
    assert_non_null(
        strstr(F.last_event, "Warning ResizeRefused: vCenter refused to reconfigure VM"));
    drain(e);
    pass(e);
    settle_status();
    assert_int_equal(count("power-on"), 1);
    assert_string_equal(last_call("power-on")->vm, F.names[0]);
    complete("power-on", 0, NULL, NULL);
    F.vms[0].powered_on = true;
    drain(e);
    pass(e);
    settle_status();
    assert_int_equal(count("power-off"), 1);
    assert_int_equal(count("reconfigure"), 1);
    assert_non_null(strstr(F.last_status, "ResizeRefused"));
    assert_non_null(strstr(F.last_status, refused));
    /* A new spec (its generation): tried again. */
    set_group("{\"apiVersion\":\"vm.codeconnect.vmworld.com/v1alpha1\",\"kind\":\"VmGroup\","
              "\"metadata\":{\"namespace\":\"ns\",\"name\":\"web\",\"uid\":\"u-1\","
              "\"resourceVersion\":\"2\",\"generation\":2" FIN "},"
              "\"spec\":{\"cpu\":2,\"memory\":2,\"template\":\"tmpl\",\"replicas\":2}}");
    drain(e);
    pass(e);
    assert_int_equal(count("power-off"), 2);
}

#define GROUP_GEN2_CPU3                                                                            \
    "{\"apiVersion\":\"vm.codeconnect.vmworld.com/v1alpha1\",\"kind\":\"VmGroup\","                \
    "\"metadata\":{\"namespace\":\"ns\",\"name\":\"web\",\"uid\":\"u-1\","                         \
    "\"resourceVersion\":\"2\",\"generation\":2" FIN "},"                                          \
    "\"spec\":{\"cpu\":3,\"memory\":2,\"template\":\"tmpl\",\"replicas\":2}}"

/* off_for_resize: the group (JSON) has web-0 off and web-1 on, both with 1
 * CPU where its spec says 2; one pass reconfigures web-0. */
static void off_for_resize(struct env *e, const char *group)
{
    set_group(group);
    add_vm(0, false);
    add_vm(1, true);
    F.vms[0].num_cpu = F.vms[1].num_cpu = 1;
    pass(e);
    settle_status();
    assert_int_equal(count("reconfigure"), 1);
}

/* A refusal of the size of a spec changed meanwhile does not stop the
 * resize to the new one. */
static void test_refusal_of_an_older_spec_blocks_not_the_new(void **state)
{
    struct env *e = *state;

    off_for_resize(e, GROUP("1", FIN, 2, ""));
    set_group(GROUP_GEN2_CPU3);
    complete("reconfigure", VMG_EFAULT, "InvalidArgument", "A specified parameter was not correct");
    drain(e);
    pass(e);
    settle_status();
    assert_int_equal(count("reconfigure"), 2);
    assert_int_equal(count("power-on"), 0);
}

/* A missing template (clones blocked) and a refused size together: the VM
 * off for its resize is powered on and stays on; neither block undoes the
 * other. */
static void test_refused_size_and_missing_template_together(void **state)
{
    struct env *e = *state;

    off_for_resize(e, GROUP("1", FIN, 3, ""));
    assert_int_equal(count("clone"), 1);
    complete("reconfigure", VMG_EFAULT, "InvalidArgument", "A specified parameter was not correct");
    complete("clone", VMG_ENOTFOUND, NULL, "template \"tmpl\" not found in datacenter \"DC0\"");
    drain(e);
    pass(e);
    settle_status();
    assert_int_equal(count("power-on"), 1);
    complete("power-on", 0, NULL, NULL);
    F.vms[0].powered_on = true;
    for (int i = 0; i < 3; i++) {
        drain(e);
        pass(e);
        settle_status();
    }
    assert_int_equal(count("power-off"), 0);
    assert_int_equal(count("reconfigure"), 1);
    assert_int_equal(count("clone"), 1);
}

/* The object goes (its finalizer removed) before the answer to the write
 * that removed it: the group's state goes once that answer came. */
static void test_state_dropped_when_gone_during_the_finalizer_write(void **state)
{
    struct env *e = *state;

    F.folder = PLAN_FOLDER_ABSENT;
    set_group(GROUP("1", FIN DELETED, 0, ""));
    pass(e);
    assert_int_equal(count("meta"), 1);
    gone();
    pass(e);
    assert_int_equal(reconciler_groups(e->r), 1); /* the write is in flight */
    complete("meta", 0, NULL, NULL);
    queued(e);
    assert_int_equal(reconciler_groups(e->r), 0);
}

/* The same when the object goes (its finalizer taken off by hand) while a
 * vCenter operation is in flight: nothing waits for the inventory to show
 * the operation's end any more. */
static void test_state_dropped_when_gone_during_an_operation(void **state)
{
    struct env *e = *state;

    set_group(GROUP("1", FIN, 1, ""));
    pass(e);
    assert_int_equal(count("clone"), 1);
    settle_status();
    gone();
    pass(e);
    assert_int_equal(reconciler_groups(e->r), 1);
    complete("clone", 0, NULL, NULL);
    queued(e);
    assert_int_equal(reconciler_groups(e->r), 0);
    assert_int_equal(reconciler_inflight(e->r), 0);
}

/* A clone whose outcome is unknown (its answer lost, or its task forgotten
 * by vCenter) may have made the VM: it still counts until the inventory
 * shows the VM, and no second clone is started meanwhile. */
static void test_clone_with_unknown_outcome_still_counts(void **state)
{
    struct env *e = *state;

    set_group(GROUP("1", FIN, 1, ""));
    pass(e);
    assert_int_equal(count("clone"), 1);
    settle_status();
    complete("clone", VMG_ETRANSPORT, NULL, "connection reset by peer");
    F.now_ms += 5000; /* past the retry's backoff */
    settle_status();
    pass(e);
    assert_int_equal(count("clone"), 1);
    add_vm(0, true); /* it was made */
    pass(e);
    settle_status();
    pass(e);
    assert_int_equal(count("clone"), 1);
    assert_non_null(strstr(F.last_status, "RUNNING"));
}

/* A VM destroyed out of band while an operation on it runs: the operation
 * fails with ManagedObjectNotFound. That is no failure to back off from:
 * the VM is read again, and however often it happens the group is planned
 * again within about a second. */
static void test_vm_gone_under_an_operation_does_not_back_off(void **state)
{
    struct env *e = *state;

    add_vm(0, false);
    set_group(GROUP("1", FIN, 1, ""));
    for (int i = 0; i < 6; i++) {
        F.now_ms += 1500;
        settle_status();
        pass(e);
        assert_int_equal(count("power-on"), i + 1);
        complete("power-on", VMG_EFAULT, "ManagedObjectNotFound", "managed object not found");
    }
    assert_int_equal(F.rereads, 6);
    assert_string_equal(F.reread_vm, F.names[0]);
    assert_int_equal(F.events, 0); /* not reported as a failure */
}

static void test_clones_not_started_twice(void **state)
{
    struct env *e = *state;
    set_group(GROUP("2", FIN, 3, ""));
    pass(e);
    assert_int_equal(count("clone"), 3);
    pass(e);
    pass(e);
    assert_int_equal(count("clone"), 3);
    assert_int_equal(reconciler_inflight(e->r), 3);
    /* One clone collides by name (re-issued after a restart): not an error. */
    complete("clone", VMG_EFAULT, "DuplicateName", "The name 'web-0' already exists.");
    assert_int_equal(reconciler_inflight(e->r), 2);
    assert_int_equal(F.events, 0);
    add_vm(0, true);
    pass(e);
    assert_int_equal(count("clone"), 3);
}

static void test_missing_template_blocks_with_message(void **state)
{
    struct env *e = *state;
    set_group(GROUP("3", FIN, 1, ""));
    pass(e);
    assert_int_equal(count("clone"), 1);
    complete("clone", VMG_ENOTFOUND, NULL, "template \"tmpl\" not found in datacenter \"DC0\"");
    assert_non_null(strstr(F.last_event, "TemplateNotFound"));
    settle_status();
    pass(e);
    assert_int_equal(count("clone"), 1);
    assert_non_null(strstr(F.last_status, "\"phase\":\"ERROR\""));
    assert_non_null(strstr(F.last_status, "template \\\"tmpl\\\" not found"));
}

/* A group deleted and made again under the same name between two passes
 * (a new UID, the same generation): what was learned of the old one (its
 * template block) is not the new one's, which clones at once. */
static void test_group_made_again_learns_anew(void **state)
{
    struct env *e = *state;

    set_group(GROUP("3", FIN, 1, ""));
    pass(e);
    complete("clone", VMG_ENOTFOUND, NULL, "template \"tmpl\" not found in datacenter \"DC0\"");
    settle_status();
    drain(e);
    pass(e);
    assert_int_equal(count("clone"), 1);
    set_group_made_again(GROUP("9", FIN, 1, ""));
    drain(e);
    pass(e);
    assert_int_equal(count("clone"), 2);
}

/* So too when the old object's clone ends after the new one's first pass:
 * its missing template blocks the old one, not the new, which clones. */
static void test_old_objects_clone_blocks_not_the_new(void **state)
{
    struct env *e = *state;
    size_t events;

    set_group(GROUP("3", FIN, 1, ""));
    pass(e);
    set_group_made_again(GROUP("9", FIN, 1, ""));
    drain(e);
    pass(e);
    settle_status();
    events = F.events;
    assert_int_equal(count("clone"), 1);
    complete("clone", VMG_ENOTFOUND, NULL, "template \"tmpl\" not found in datacenter \"DC0\"");
    assert_int_equal(F.events, events);
    drain(e);
    pass(e);
    settle_status();
    assert_int_equal(count("clone"), 2);
    assert_null(strstr(F.last_status, "not found"));
}

/* And when it ends before the new object's first pass (the cache already
 * names the new object): no event on it either. */
static void test_old_objects_clone_ends_before_the_new_is_planned(void **state)
{
    struct env *e = *state;
    size_t events;

    set_group(GROUP("3", FIN, 1, ""));
    pass(e);
    settle_status();
    set_group_made_again(GROUP("9", FIN, 1, ""));
    events = F.events;
    complete("clone", VMG_ENOTFOUND, NULL, "template \"tmpl\" not found in datacenter \"DC0\"");
    assert_int_equal(F.events, events);
    drain(e);
    pass(e);
    assert_int_equal(count("clone"), 2);
}

/* A template refused by the vCenter side (not a template, inside the
 * operator's folder, outside the datacenter) blocks like a missing one,
 * under a reason that says so, and no further clone is tried. */
static void test_refused_template_blocks_with_its_reason(void **state)
{
    struct env *e = *state;
    set_group(GROUP("3", FIN, 2, ""));
    pass(e);
    assert_int_equal(count("clone"), 2);
    complete("clone", VMG_ECONFIG, NULL,
             "clone web-0: template \"tmpl\" is a virtual machine, not a template");
    complete("clone", VMG_ECONFIG, NULL,
             "clone web-1: template \"tmpl\" is a virtual machine, not a template");
    assert_non_null(strstr(F.last_event, "TemplateRefused"));
    settle_status();
    pass(e);
    pass(e);
    assert_int_equal(count("clone"), 2);
    assert_non_null(strstr(F.last_status, "\"phase\":\"ERROR\""));
    assert_non_null(strstr(F.last_status, "is a virtual machine, not a template"));
    assert_non_null(strstr(F.last_status, "\"reason\":\"TemplateRefused\""));
    assert_null(strstr(F.last_status, "TemplateNotFound"));
}

static void test_vcenter_down_shows_in_status(void **state)
{
    struct env *e = *state;
    F.ready = VMG_ETRANSPORT;
    set_group(GROUP("4", FIN, 2, ""));
    pass(e);
    assert_int_equal(count("clone"), 0);
    assert_int_equal(count("create-folder"), 0);
    assert_non_null(strstr(F.last_status, "\"phase\":\"PENDING\""));
    assert_non_null(strstr(F.last_status, "connection refused"));
}

/* stored_group feeds the status last written back as the group's, over
 * resourceVersion rv and generation gen, with our finalizer or not, as the
 * watch would bring it: merged into the one stored (a JSON merge patch
 * keeps what it leaves out). */
static void stored_group(const char *rv, int gen, bool fin, int replicas)
{
    cJSON *st = cJSON_Parse(F.stored[0] ? F.stored : "{}"), *patch = cJSON_Parse(F.last_status);
    char json[8192], *text;

    assert_non_null(st);
    assert_non_null(patch);
    for (cJSON *f = patch->child; f; f = f->next) {
        cJSON_DeleteItemFromObject(st, f->string);
        assert_true(cJSON_AddItemToObject(st, f->string, cJSON_Duplicate(f, true)));
    }
    text = cJSON_PrintUnformatted(st);
    assert_non_null(text);
    snprintf(F.stored, sizeof(F.stored), "%s", text);
    free(text);
    cJSON_Delete(st);
    cJSON_Delete(patch);
    snprintf(json, sizeof(json),
             "{\"apiVersion\":\"vm.codeconnect.vmworld.com/v1alpha1\",\"kind\":\"VmGroup\","
             "\"metadata\":{\"namespace\":\"ns\",\"name\":\"web\",\"uid\":\"u-1\","
             "\"resourceVersion\":\"%s\",\"generation\":%d%s},"
             "\"spec\":{\"cpu\":2,\"memory\":2,\"template\":\"tmpl\",\"replicas\":%d},"
             "\"status\":%s}",
             rv, gen, fin ? FIN : "", replicas, F.stored);
    set_group(json);
}

static void written_status(const char *rv, int replicas)
{
    stored_group(rv, 1, true, replicas);
}

/* running_then_down: the group of 2 VMs is RUNNING, as stored; then
 * vCenter is out of use since down_ms and the cache is being rebuilt. */
static void running_then_down(struct env *e, uint64_t down_ms)
{
    set_group(GROUP("6", FIN, 2, ""));
    add_vm(0, true);
    add_vm(1, true);
    pass(e);
    assert_non_null(strstr(F.last_status, "\"phase\":\"RUNNING\""));
    complete("status", 0, NULL, NULL);
    written_status("7", 2);
    F.ready = VMG_ETRANSPORT;
    F.n_vms = 0;
    F.folder = PLAN_FOLDER_UNKNOWN;
    F.down_ms = down_ms;
}

/* waiting_ms runs the loop until the key waiting for a deadline is queued,
 * and returns how long that took (or more than max_ms when it was not). */
static uint64_t waiting_ms(struct env *e, uint64_t max_ms)
{
    struct wq_stats st;
    uint64_t t0;

    wq_get_stats(e->q, &st);
    assert_int_equal(st.waiting, 1);
    assert_int_equal(st.depth, 0);
    uv_update_time(&e->loop);
    t0 = uv_now(&e->loop);
    while (uv_now(&e->loop) - t0 <= max_ms) {
        wq_get_stats(e->q, &st);
        if (st.depth == 1)
            return uv_now(&e->loop) - t0;
        uv_run(&e->loop, UV_RUN_NOWAIT);
        uv_sleep(1);
        uv_update_time(&e->loop);
    }
    return max_ms + 1;
}

/* vcenter_back: vCenter is usable again, with the 2 VMs of
 * running_then_down; one pass. */
static void vcenter_back(struct env *e)
{
    F.ready = 0;
    F.down_ms = 0;
    F.folder = PLAN_FOLDER_PRESENT;
    add_vm(0, true);
    add_vm(1, true);
    pass(e);
}

/* A short outage of vCenter (a session lost, the watch rebuilt, the
 * manager restarted) leaves a group's status as it is: nothing is written
 * or done, and the group is looked at again when the grace ends. Past the
 * grace, the status says vCenter is out of use; vCenter back, the group is
 * RUNNING again. */
static void test_short_vcenter_outage_keeps_the_status(void **state)
{
    struct env *e = *state;
    size_t before, events;

    running_then_down(e, 100);
    before = F.n_calls;
    events = F.events;
    pass(e);
    assert_int_equal(F.n_calls, before);
    assert_string_equal(F.result, "requeue_after");
    assert_true(waiting_ms(e, 200) > 200); /* 29.9 s */
    drain(e);
    /* Looked at again when the grace ends, not a whole grace later. */
    F.down_ms = 29950;
    pass(e);
    assert_int_equal(F.n_calls, before);
    assert_true(waiting_ms(e, 5000) <= 1000);
    assert_int_equal(F.events, events);
    drain(e);

    /* The grace is over: the status says so, and keeps the VMs it named,
     * the last known (the patch leaves status.vms as it is). */
    F.down_ms = 30000;
    pass(e);
    assert_int_equal(count("status"), 2);
    assert_non_null(strstr(F.last_status, "\"phase\":\"PENDING\""));
    assert_non_null(strstr(F.last_status, "connection refused"));
    assert_null(strstr(F.last_status, "\"currentReplicas"));
    assert_null(strstr(F.last_status, "\"vms"));
    assert_int_equal(count("clone"), 0);
    complete("status", 0, NULL, NULL);
    written_status("8", 2);
    assert_non_null(strstr(F.g->status.last_message, "connection refused"));
    assert_int_equal(F.g->status.current_replicas, 2);
    assert_int_equal(F.g->status.n_vms, 2);
    /* Written once: the status stored is the one planned. */
    pass(e);
    pass(e);
    assert_int_equal(count("status"), 2);

    /* vCenter is back with the same VMs. */
    vcenter_back(e);
    assert_int_equal(count("status"), 3);
    assert_non_null(strstr(F.last_status, "\"phase\":\"RUNNING\""));
    assert_int_equal(count("clone"), 0);
}

/* A login that failed with a fault other than a refusal (a vCenter still
 * starting answers SystemError) is held as any outage: the session says
 * VMG_EFAULT for it and VMG_EAUTH only for refused credentials, which
 * vcworld passes on (the reconciler's side of it; e2e 55-faults has the
 * whole chain against vcsim). */
static void test_outage_held_for_a_login_that_failed_otherwise(void **state)
{
    struct env *e = *state;
    size_t before;

    running_then_down(e, 100);
    F.ready = VMG_EFAULT;
    before = F.n_calls;
    pass(e);
    assert_int_equal(F.n_calls, before);
    assert_string_equal(F.result, "requeue_after");
    drain(e);
}

/* What no waiting mends is said at once, and so is the first word of a
 * new group: a refused login, a placement naming nothing, no status yet. */
static void test_what_waiting_does_not_mend_is_said_at_once(void **state)
{
    struct env *e = *state;

    F.ready = VMG_ETRANSPORT;
    F.down_ms = 100;
    set_group(GROUP("4", FIN, 2, ""));
    pass(e);
    assert_int_equal(count("status"), 1);
    assert_non_null(strstr(F.last_status, "connection refused"));
    complete("status", 0, NULL, NULL);

    written_status("5", 2);
    F.ready = VMG_EAUTH;
    pass(e);
    assert_int_equal(count("status"), 1); /* the same sentence */
    assert_string_equal(F.result, "error");

    F.ready = VMG_ENOTFOUND;
    pass(e);
    assert_int_equal(count("status"), 2);
    assert_non_null(strstr(F.last_status, "\"phase\":\"ERROR\""));
}

/* Within the grace, a group whose owner changed its spec is answered at
 * once (the new replicas, vCenter out of use), and a live group that lost
 * our finalizer gets it back (it needs no vCenter). */
static void test_outage_held_but_for_a_new_spec_or_a_lost_finalizer(void **state)
{
    struct env *e = *state;

    running_then_down(e, 100);
    stored_group("8", 2, true, 3);
    pass(e);
    assert_int_equal(count("status"), 2);
    assert_non_null(strstr(F.last_status, "\"desiredReplicas\":3"));
    assert_non_null(strstr(F.last_status, "connection refused"));
    assert_null(strstr(F.last_status, "\"vms"));
    assert_int_equal(count("clone"), 0);
    complete("status", 0, NULL, NULL);

    stored_group("9", 2, false, 3);
    pass(e);
    assert_int_equal(count("meta"), 1);
}

/* A status that waits for the client's rate limit and says vCenter is out
 * of use is dropped when vCenter is back and the object says what the
 * plan says: no false PENDING goes out after the outage. */
static void test_outage_status_not_sent_is_dropped_when_vcenter_is_back(void **state)
{
    struct env *e = *state;

    running_then_down(e, 30000);
    F.status_queued = true;
    pass(e);
    assert_int_equal(count("status"), 2);
    assert_non_null(strstr(F.last_status, "connection refused"));

    vcenter_back(e);
    assert_int_equal(F.unwrites, 1);
    assert_int_equal(count("status"), 2);
}

/* A folder holding more VMs than a group can manage is seen only in part:
 * a live group does nothing (it could clone over VMs it does not see) and
 * says why; a deleting one goes on removing what it sees, and keeps its
 * finalizer while it may not see all of its VMs. */
static void test_folder_beyond_the_limit_blocks_a_live_group(void **state)
{
    struct env *e = *state;
    F.truncated = true;
    add_vm(0, false);
    set_group(GROUP("10", FIN, 3, ""));
    pass(e);
    assert_int_equal(count("clone"), 0);
    assert_int_equal(count("power-on"), 0);
    assert_non_null(strstr(F.last_status, "\"phase\":\"ERROR\""));
    assert_non_null(strstr(F.last_status, "holds more than 4096 VMs"));
    assert_non_null(strstr(F.last_event, "TooManyVMs"));

    set_group(GROUP("11", FIN DELETED, 3, ""));
    pass(e);
    assert_true(count("power-off") + count("destroy") >= 1);

    /* All it sees is someone else's VM: its own may be among the rest. */
    F.n_vms = 0;
    add_vm(5, false);
    F.vms[0].mark_uid = "someone-else";
    set_group(GROUP("12", FIN DELETED, 3, ""));
    pass(e);
    assert_int_equal(count("meta"), 0);
    F.truncated = false;
    set_group(GROUP("13", FIN DELETED, 3, ""));
    pass(e);
    assert_int_equal(count("meta"), 1);
}

static void test_invalid_placement_is_an_error(void **state)
{
    struct env *e = *state;
    F.ready = VMG_ENOTFOUND;
    set_group(GROUP("9", FIN, 2, ""));
    pass(e);
    assert_int_equal(count("clone"), 0);
    assert_int_equal(count("create-folder"), 0);
    assert_non_null(strstr(F.last_status, "\"phase\":\"ERROR\""));
    assert_non_null(strstr(F.last_status, "resource pool \\\"nope\\\" not found"));
}

static void test_status_computed_during_a_write_is_written_after_it(void **state)
{
    struct env *e = *state;
    const char *k = NULL;

    F.ready = VMG_ETRANSPORT;
    set_group(GROUP("10", FIN, 1, ""));
    add_vm(0, true);
    pass(e);
    assert_int_equal(count("status"), 1);
    assert_non_null(strstr(F.last_status, "PENDING"));
    /* vCenter is back while the first write is in flight: one at a time. */
    F.ready = 0;
    pass(e);
    assert_int_equal(count("status"), 1);
    /* When the write ends, the key comes back, even if no watch event does. */
    drain(e);
    complete("status", 0, NULL, NULL);
    assert_int_equal(wq_get(e->q, &k), 0);
    assert_string_equal(k, "ns/web");
    reconciler_handle(e->r, k);
    assert_int_equal(count("status"), 2);
    assert_non_null(strstr(F.last_status, "RUNNING"));
}

/* Until the cache shows a written status, the same status over the same
 * object is not written again; another one is. */
static void test_status_written_once_per_object_version(void **state)
{
    struct env *e = *state;

    set_group(GROUP("10", FIN, 2, ""));
    add_vm(0, true);
    add_vm(1, true);
    pass(e);
    assert_int_equal(count("status"), 1);
    complete("status", 0, NULL, NULL);
    pass(e); /* the watch has not brought the written status yet */
    pass(e);
    assert_int_equal(count("status"), 1);
    /* A guest reports an address: the same object, another status. */
    F.vms[0].ip[0] = "10.0.0.5";
    F.vms[0].n_ip = 1;
    pass(e);
    assert_int_equal(count("status"), 2);
    assert_non_null(strstr(F.last_status, "10.0.0.5"));
    complete("status", 0, NULL, NULL);
    pass(e);
    assert_int_equal(count("status"), 2);
    /* A write that failed is forgotten: the same status is written again. */
    F.vms[0].n_ip = 0;
    pass(e);
    assert_int_equal(count("status"), 3);
    complete("status", VMG_ETRANSPORT, NULL, NULL);
    pass(e);
    assert_int_equal(count("status"), 4);
}

static void test_failure_is_reported_and_retried_later(void **state)
{
    struct env *e = *state;
    set_group(GROUP("5", FIN, 1, ""));
    pass(e);
    complete("clone", VMG_EFAULT, "InsufficientResourcesFault", "Insufficient resources.");
    assert_non_null(strstr(F.last_event, "Warning CreateFailed"));
    /* Within the backoff, nothing is tried again, and status says why. */
    settle_status();
    pass(e);
    assert_int_equal(count("clone"), 1);
    assert_non_null(strstr(F.last_status, "Insufficient resources"));
}

static void test_in_sync_costs_nothing(void **state)
{
    struct env *e = *state;
    size_t before;

    set_group(GROUP("6", FIN, 2, ""));
    add_vm(0, true);
    add_vm(1, true);
    pass(e);
    /* The first pass writes RUNNING; feed it back as the stored status. */
    assert_int_equal(count("status"), 1);
    assert_non_null(strstr(F.last_status, "\"phase\":\"RUNNING\""));
    {
        char json[4096];
        snprintf(json, sizeof(json), GROUP("7", FIN, 2, ",\"status\":%s"), F.last_status);
        set_group(json);
    }
    complete("status", 0, NULL, NULL);
    before = F.n_calls;
    pass(e);
    pass(e);
    assert_int_equal(F.n_calls, before);
}

/* status.vms follows the inventory: an address that a guest reports is one
 * status write, and then nothing more; a VM being removed says so. */
static void test_status_vms_follow_the_inventory(void **state)
{
    struct env *e = *state;
    char json[4096];
    size_t before;

    set_group(GROUP("6", FIN, 2, ""));
    add_vm(0, true);
    add_vm(1, true);
    F.vms[0].instance_uuid = F.vms[0].mark_instance = "5000-0";
    F.vms[0].power_state = "poweredOn";
    pass(e);
    assert_int_equal(count("status"), 1);
    assert_non_null(strstr(F.last_status, "\"vms\":[{\"name\":\"web-0\",\"instanceUUID\":"
                                          "\"5000-0\",\"powerState\":\"poweredOn\""));
    assert_null(strstr(F.last_status, "ipAddresses"));
    snprintf(json, sizeof(json), GROUP("7", FIN, 2, ",\"status\":%s"), F.last_status);
    set_group(json);
    complete("status", 0, NULL, NULL);
    before = F.n_calls;
    pass(e);
    assert_int_equal(F.n_calls, before);

    /* The guest reports its address: one write, with it. */
    F.vms[0].ip[0] = "10.0.0.5";
    F.vms[0].n_ip = 1;
    pass(e);
    assert_int_equal(count("status"), 2);
    assert_non_null(strstr(F.last_status, "\"ipAddresses\":[\"10.0.0.5\"]"));
    snprintf(json, sizeof(json), GROUP("8", FIN, 2, ",\"status\":%s"), F.last_status);
    set_group(json);
    complete("status", 0, NULL, NULL);
    before = F.n_calls;
    pass(e);
    pass(e);
    assert_int_equal(F.n_calls, before);

    /* Scaled down: the VM that goes is Removing while it is powered off. */
    set_group(GROUP("9", FIN, 1, ""));
    pass(e);
    assert_int_equal(count("power-off"), 1);
    assert_non_null(strstr(F.last_status, "\"state\":\"Removing\""));
}

static void test_power_off_then_destroy_on_scale_down(void **state)
{
    struct env *e = *state;
    set_group(GROUP("8", FIN, 1, ""));
    add_vm(0, true);
    add_vm(1, true);
    pass(e);
    assert_int_equal(count("power-off"), 1);
    assert_int_equal(count("destroy"), 0);
    pass(e);
    assert_int_equal(count("power-off"), 1);
    complete("power-off", 0, NULL, NULL);
    F.vms[1].powered_on = false;
    pass(e);
    assert_int_equal(count("destroy"), 1);
    assert_string_equal(F.calls[F.n_calls - 1].what, "destroy");
}

/* A change of Ready or Degraded is announced once, though the cache goes on
 * showing the object the status was planned from for several passes (the
 * watch is behind the write); a new change over that object is announced. */
static void test_conditions_announced_once_while_the_cache_lags(void **state)
{
    struct env *e = *state;
    char json[4096];

    set_group(GROUP("10", FIN, 2, ""));
    add_vm(0, true);
    add_vm(1, true);
    F.vms[F.n_vms] = F.vms[1];
    snprintf(F.names[F.n_vms], sizeof(F.names[0]), "stranger");
    F.vms[F.n_vms].name = F.names[F.n_vms];
    F.vms[F.n_vms].mark_uid = NULL;
    F.n_vms++;
    pass(e);
    assert_int_equal(count("status"), 1);
    assert_non_null(strstr(F.last_status, "\"phase\":\"RUNNING\""));
    assert_int_equal(F.ready_events, 1);
    assert_int_equal(F.foreign_events, 1);
    complete("status", 0, NULL, NULL);
    pass(e);
    pass(e);
    assert_int_equal(F.ready_events, 1);
    assert_int_equal(F.foreign_events, 1);
    /* The cache shows an older write of ours first (the status is written
     * again over it): not news either. */
    set_group(GROUP("10a", FIN, 2,
                    ",\"status\":{\"phase\":\"PENDING\",\"conditions\":[{\"type\":\"Ready\","
                    "\"status\":\"False\",\"reason\":\"Creating\",\"message\":\"creating\","
                    "\"lastTransitionTime\":\"2026-11-22T00:00:00Z\"}]}"));
    pass(e);
    assert_int_equal(count("status"), 2);
    complete("status", 0, NULL, NULL);
    assert_int_equal(F.ready_events, 1);
    assert_int_equal(F.foreign_events, 1);
    /* Another status over the same object: its conditions are old news. */
    F.vms[0].ip[0] = "10.0.0.5";
    F.vms[0].n_ip = 1;
    pass(e);
    assert_int_equal(count("status"), 3);
    assert_int_equal(F.ready_events, 1);
    assert_int_equal(F.foreign_events, 1);
    complete("status", 0, NULL, NULL);
    /* Another stranger: Degraded says something new. */
    F.vms[F.n_vms] = F.vms[F.n_vms - 1];
    snprintf(F.names[F.n_vms], sizeof(F.names[0]), "intruder");
    F.vms[F.n_vms].name = F.names[F.n_vms];
    F.n_vms++;
    pass(e);
    pass(e);
    assert_int_equal(count("status"), 4);
    assert_int_equal(F.ready_events, 1);
    assert_int_equal(F.foreign_events, 2);
    complete("status", 0, NULL, NULL);
    /* The cache shows the write. */
    snprintf(json, sizeof(json), GROUP("11", FIN, 2, ",\"status\":%s"), F.last_status);
    set_group(json);
    pass(e);
    assert_int_equal(count("status"), 4);
    assert_int_equal(F.ready_events, 1);
    assert_int_equal(F.foreign_events, 2);
    /* A VM is powered off by hand and on again: Ready went False, and True
     * again is news. */
    F.vms[1].powered_on = false;
    pass(e);
    assert_int_equal(count("status"), 5);
    assert_null(strstr(F.last_status, "\"phase\":\"RUNNING\""));
    pass(e);
    assert_int_equal(F.ready_events, 1);
    assert_int_equal(F.foreign_events, 2);
    settle_status();
    snprintf(json, sizeof(json), GROUP("12", FIN, 2, ",\"status\":%s"), F.last_status);
    set_group(json);
    F.vms[1].powered_on = true;
    complete("power-on", 0, NULL, NULL);
    pass(e);
    assert_int_equal(count("status"), 6);
    assert_non_null(strstr(F.last_status, "\"phase\":\"RUNNING\""));
    assert_int_equal(F.ready_events, 2);
    assert_int_equal(F.foreign_events, 2);
}

/* A Ready that goes False and True again while no status could be written
 * (a write in flight) was never seen False: no second Ready event. */
static void test_ready_not_announced_again_without_a_false_written(void **state)
{
    struct env *e = *state;
    char json[4096];

    set_group(GROUP("10", FIN, 2, ""));
    add_vm(0, true);
    add_vm(1, true);
    pass(e);
    assert_int_equal(F.ready_events, 1);
    complete("status", 0, NULL, NULL);
    snprintf(json, sizeof(json), GROUP("11", FIN, 2, ",\"status\":%s"), F.last_status);
    set_group(json);
    /* A guest reports an address: a status write, left in flight. */
    F.vms[0].ip[0] = "10.0.0.5";
    F.vms[0].n_ip = 1;
    pass(e);
    assert_int_equal(count("status"), 2);
    /* Meanwhile a VM goes off and on again. */
    F.vms[1].powered_on = false;
    pass(e);
    F.vms[1].powered_on = true;
    complete("power-on", 0, NULL, NULL);
    pass(e);
    assert_int_equal(count("status"), 2);
    assert_int_equal(F.ready_events, 1);
}

/* A group deleted and made again under the same name is another group: its
 * conditions are announced anew, even if its reconciler state was kept. */
static void test_conditions_announced_for_a_group_made_again(void **state)
{
    struct env *e = *state;

    set_group(GROUP("10", FIN, 0, ""));
    add_vm(0, true);
    F.vms[0].mark_uid = NULL; /* a stranger in the folder */
    pass(e);
    assert_int_equal(F.foreign_events, 1);
    settle_status();
    pass(e);
    assert_int_equal(F.foreign_events, 1);
    set_group_made_again(GROUP("20", FIN, 0, ""));
    pass(e);
    assert_int_equal(F.foreign_events, 2);
}

/* A finished power-on that the inventory never shows (the watch lags or
 * missed it): the VM is read again first; the operation is planned again
 * only if the read does not show it either. */
static void test_unseen_operation_reads_the_vm_before_acting_again(void **state)
{
    struct env *e = *state;

    F.now_ms = 1000;
    set_group(GROUP("9", FIN, 1, ""));
    add_vm(0, false);
    pass(e);
    assert_int_equal(count("power-on"), 1);
    complete("power-on", 0, NULL, NULL);
    pass(e);
    assert_int_equal(count("power-on"), 1);
    assert_int_equal(F.rereads, 0);

    F.now_ms += 31000; /* past the first deadline: read, do not act */
    pass(e);
    assert_int_equal(F.rereads, 1);
    assert_string_equal(F.reread_vm, F.names[0]);
    assert_int_equal(count("power-on"), 1);
    pass(e);
    assert_int_equal(F.rereads, 1);

    F.now_ms += 31000; /* the read did not show it either: act again */
    pass(e);
    assert_int_equal(F.rereads, 1);
    assert_int_equal(count("power-on"), 2);

    /* This time the read shows the VM on: nothing more is done. */
    complete("power-on", 0, NULL, NULL);
    F.now_ms += 31000;
    pass(e);
    assert_int_equal(F.rereads, 2);
    F.vms[0].powered_on = true;
    pass(e);
    F.now_ms += 31000;
    pass(e);
    assert_int_equal(count("power-on"), 2);
    assert_int_equal(F.rereads, 2);
}

/* A VM of the group moved out of its folder by hand (the folder call lists
 * it after the folder's own, by the group's uid) is acted on by its id,
 * though its name is that of a VM in the folder: scaled to 1 of the two
 * web-0, the newer (vm-9, elsewhere) is powered off, seen off by its id
 * (the folder's web-0 stays on), and destroyed by its id. */
static void test_vm_moved_out_is_acted_on_by_its_id(void **state)
{
    struct env *e = *state;

    set_group(GROUP("8", FIN, 1, ""));
    add_vm(0, true);
    F.vms[0].ref = "vm-1";
    add_vm(0, true);
    F.vms[1].ref = "vm-9";
    F.vms[1].create_order = 9;
    pass(e);
    assert_string_equal(F.folder_uid, "u-1");
    assert_int_equal(count("power-off"), 1);
    assert_string_equal(last_call("power-off")->vm, F.names[0]);
    assert_string_equal(last_call("power-off")->ref, "vm-9");
    complete("power-off", 0, NULL, NULL);
    F.vms[1].powered_on = false;
    pass(e);
    assert_int_equal(count("destroy"), 1);
    assert_string_equal(last_call("destroy")->ref, "vm-9");
    assert_int_equal(count("power-off"), 1);
}

/* legacy_members: web-0 cloned before the instance mark, web-1 with it;
 * one pass starts web-0's mark, by its id, with its own instanceUuid, and
 * the group is RUNNING. */
static void legacy_members(struct env *e)
{
    set_group(GROUP("1", FIN, 2, ""));
    add_vm(0, true);
    add_vm(1, true);
    F.vms[0].ref = "vm-10";
    F.vms[0].instance_uuid = "5000-a";
    F.vms[1].instance_uuid = F.vms[1].mark_instance = "5000-b";
    pass(e);
    settle_status();
    assert_int_equal(count("mark"), 1);
    assert_string_equal(last_call("mark")->vm, F.names[0]);
    assert_string_equal(last_call("mark")->ref, "vm-10");
    assert_string_equal(F.marked_uuid, "5000-a");
    assert_non_null(strstr(F.last_status, "\"phase\":\"RUNNING\""));
}

/* A member cloned before the instance mark gets it once, quietly: the
 * group stays RUNNING while it is in flight (no status write for it), no
 * event says it, and once the inventory shows the mark nothing more is
 * done. */
static void test_legacy_member_marked_once_quietly(void **state)
{
    struct env *e = *state;
    size_t events, statuses;

    legacy_members(e);
    events = F.events;
    statuses = count("status");
    pass(e);
    settle_status();
    assert_int_equal(count("mark"), 1);
    assert_int_equal(count("status"), statuses);
    complete("mark", 0, NULL, NULL);
    assert_int_equal(F.events, events);
    F.vms[0].mark_instance = "5000-a";
    drain(e);
    pass(e);
    settle_status();
    assert_int_equal(count("mark"), 1);
    assert_int_equal(count("status"), statuses);
    assert_int_equal(F.events, events);
    /* Seen, the mark is no longer awaited: web-0 can be acted on. */
    F.vms[0].num_cpu = 1;
    drain(e);
    pass(e);
    assert_int_equal(count("power-off"), 1);
    assert_string_equal(last_call("power-off")->vm, F.names[0]);
}

/* A mark that failed is said in a Warning event, and tried again after a
 * backoff of its own; the group is not held back nor said to be retrying. */
static void test_failed_mark_waits_its_backoff(void **state)
{
    struct env *e = *state;

    legacy_members(e);
    complete("mark", VMG_EFORBIDDEN, "NoPermission",
             "Permission to perform this operation was denied");
    assert_non_null(
        strstr(F.last_event, "Warning MarkFailed: Failed to write the instance mark of VM"));
    assert_non_null(strstr(F.last_event, "Permission to perform this operation was denied"));
    drain(e);
    pass(e);
    settle_status();
    assert_int_equal(count("mark"), 1);
    assert_non_null(strstr(F.last_status, "\"phase\":\"RUNNING\""));
    assert_null(strstr(F.last_status, "Retrying"));
    F.now_ms += 1000;
    drain(e);
    pass(e);
    settle_status();
    assert_int_equal(count("mark"), 2);
    /* A second failure doubles the wait. */
    complete("mark", VMG_EFAULT, "TaskInProgress",
             "The operation is not allowed in the current state");
    F.now_ms += 1000;
    drain(e);
    pass(e);
    assert_int_equal(count("mark"), 2);
    F.now_ms += 1000;
    drain(e);
    pass(e);
    assert_int_equal(count("mark"), 3);
}

/* A mark vCenter took but the inventory never shows is not written again
 * each minute: it waits for the marks' backoff, as a failed one does. */
static void test_unseen_mark_waits_its_backoff(void **state)
{
    struct env *e = *state;

    legacy_members(e);
    complete("mark", 0, NULL, NULL);
    F.now_ms += 30000; /* the first deadline: the VM is read again */
    drain(e);
    pass(e);
    assert_int_equal(F.rereads, 1);
    F.now_ms += 30000; /* the second: given up */
    drain(e);
    pass(e);
    settle_status();
    assert_int_equal(count("mark"), 1);
    F.now_ms += 1000;
    drain(e);
    pass(e);
    assert_int_equal(count("mark"), 2);
    /* Seen this time (whatever the case of its hex digits): no longer
     * awaited, web-0 can be acted on. */
    complete("mark", 0, NULL, NULL);
    F.vms[0].mark_instance = "5000-A";
    F.vms[0].num_cpu = 1;
    drain(e);
    pass(e);
    assert_int_equal(count("mark"), 2);
    assert_int_equal(count("power-off"), 1);
    assert_string_equal(last_call("power-off")->vm, F.names[0]);
}

/* made_again_with_members: legacy_members, then the object deleted with
 * its finalizer removed by hand and made again under the same name, the
 * VMs adopted by it (marked with its UID), while web-0's mark, planned for
 * the old object, is in flight. */
static void made_again_with_members(struct env *e)
{
    legacy_members(e);
    set_group_made_again(GROUP("20", FIN, 2, ""));
    F.vms[0].mark_uid = F.vms[1].mark_uid = "u-2";
    drain(e);
    pass(e);
    settle_status();
    assert_int_equal(count("mark"), 1);
}

/* The end of a mark planned for the object the key named before teaches
 * the new object nothing: no MarkFailed event on it, and its own marks do
 * not wait for the old one's backoff. */
static void test_old_objects_mark_teaches_the_new_nothing(void **state)
{
    struct env *e = *state;
    size_t events;

    made_again_with_members(e);
    events = F.events;
    complete("mark", VMG_EFORBIDDEN, "NoPermission",
             "Permission to perform this operation was denied");
    assert_int_equal(F.events, events);
    drain(e);
    pass(e);
    assert_int_equal(count("mark"), 2);
    assert_string_equal(last_call("mark")->ref, "vm-10");
}

/* Nor does the old object's mark that the inventory never shows. */
static void test_old_objects_unseen_mark_teaches_the_new_nothing(void **state)
{
    struct env *e = *state;

    made_again_with_members(e);
    complete("mark", 0, NULL, NULL);
    F.now_ms += 30000; /* the first deadline: the VM is read again */
    drain(e);
    pass(e);
    F.now_ms += 30000; /* the second: given up, and marked again at once */
    drain(e);
    pass(e);
    assert_int_equal(count("mark"), 2);
}

/* A resize waits for a mark in flight on the VM it would power off. */
static void test_resize_waits_for_a_mark_in_flight(void **state)
{
    struct env *e = *state;

    legacy_members(e);
    F.vms[0].num_cpu = 1; /* seen smaller meanwhile */
    drain(e);
    pass(e);
    settle_status();
    assert_int_equal(count("power-off"), 0);
    complete("mark", 0, NULL, NULL);
    F.vms[0].mark_instance = "5000-a";
    drain(e);
    pass(e);
    settle_status();
    assert_int_equal(count("power-off"), 1);
    assert_string_equal(last_call("power-off")->vm, F.names[0]);
}

/* handle_queued runs every key queued, once each, as workers would, and
 * returns their names in the order run ("ns/db ns/web"). */
static const char *handle_queued(struct env *e, reconciler *r)
{
    static char order[128];
    const char *k = NULL;

    order[0] = '\0';
    while (wq_get(e->q, &k) == 0) {
        snprintf(order + strlen(order), sizeof(order) - strlen(order), "%s%s", order[0] ? " " : "",
                 k);
        reconciler_handle(r, k);
    }
    return order;
}

/* Marks are housekeeping: at most rec_options.max_marks in flight in all
 * groups, first come first served: a group whose mark found no room is
 * planned again when there is room (not only at its next change), and
 * that room is kept for it, not taken by the group whose mark just ended. */
static void test_marks_bounded_across_groups(void **state)
{
    struct env *e = *state;
    struct rec_options ro = {.max_group_tasks = 4, .max_marks = 1, .clock = f_clock};
    reconciler *r = NULL;
    cJSON *o;
    char err[256];

    assert_int_equal(reconciler_new(&world, &ro, e->q, &r), 0);
    set_group(GROUP("1", FIN, 2, ""));
    add_vm(0, true);
    add_vm(1, true);
    F.vms[0].instance_uuid = "5000-a";
    F.vms[1].instance_uuid = F.vms[1].mark_instance = "5000-b";
    o = cJSON_Parse("{\"apiVersion\":\"vm.codeconnect.vmworld.com/v1alpha1\",\"kind\":\"VmGroup\","
                    "\"metadata\":{\"namespace\":\"ns\",\"name\":\"db\",\"uid\":\"u-2\","
                    "\"resourceVersion\":\"1\",\"generation\":1" FIN "},"
                    "\"spec\":{\"cpu\":2,\"memory\":2,\"template\":\"tmpl\",\"replicas\":2}}");
    assert_non_null(o);
    assert_int_equal(vmgroup_from_json(o, &F.g2, err, sizeof(err)), 0);
    cJSON_Delete(o);
    for (int i = 0; i < 2; i++) {
        F.vms2[i] = F.vms[i];
        F.vms2[i].name = i ? "db-1" : "db-0";
        F.vms2[i].mark_uid = "u-2";
    }
    F.vms2[0].instance_uuid = "5000-c";
    F.vms2[1].instance_uuid = F.vms2[1].mark_instance = "5000-d";
    F.n_vms2 = 2;

    /* db's mark starts; web's finds no room, and waits in line. */
    assert_int_equal(wq_add(e->q, "ns/db"), 0);
    assert_string_equal(handle_queued(e, r), "ns/db");
    assert_int_equal(wq_add(e->q, "ns/web"), 0);
    assert_string_equal(handle_queued(e, r), "ns/web");
    assert_int_equal(count("mark"), 1);
    assert_string_equal(last_call("mark")->vm, "db-0");
    settle_status();
    drain(e);

    /* db's mark ends, and db-1 has lost its mark meanwhile: db is planned
     * again first (its operation ended), but the room is web's, next in
     * line; db waits behind it. */
    complete("mark", 0, NULL, NULL);
    F.vms2[0].mark_instance = "5000-c";
    F.vms2[1].mark_instance = NULL;
    assert_string_equal(handle_queued(e, r), "ns/db ns/web");
    assert_int_equal(count("mark"), 2);
    assert_string_equal(last_call("mark")->vm, F.names[0]);
    assert_string_equal(F.marked_uuid, "5000-a");
    settle_status();

    /* web's ends: db's turn. */
    complete("mark", 0, NULL, NULL);
    F.vms[0].mark_instance = "5000-a";
    (void)handle_queued(e, r);
    assert_int_equal(count("mark"), 3);
    assert_string_equal(last_call("mark")->vm, "db-1");
    assert_string_equal(F.marked_uuid, "5000-d");
    settle_status();
    complete("mark", 0, NULL, NULL);
    drain(e);
    reconciler_free(r);
}

/* pass_with runs a pass of web with reconciler r. */
static void pass_with(struct env *e, reconciler *r)
{
    assert_int_equal(wq_add(e->q, "ns/web"), 0);
    (void)handle_queued(e, r);
}

/* three_legacy: web-0, web-1 and web-2 (vm-10, vm-11, vm-12), all cloned
 * before the instance mark, and a reconciler with room for one mark. */
static reconciler *three_legacy(struct env *e)
{
    struct rec_options ro = {.max_group_tasks = 4, .max_marks = 1, .clock = f_clock};
    static const char *refs[] = {"vm-10", "vm-11", "vm-12"};
    static const char *uuids[] = {"5000-a", "5000-b", "5000-c"};
    reconciler *r = NULL;

    assert_int_equal(reconciler_new(&world, &ro, e->q, &r), 0);
    set_group(GROUP("1", FIN, 3, ""));
    for (int i = 0; i < 3; i++) {
        add_vm(i, true);
        F.vms[i].ref = refs[i];
        F.vms[i].instance_uuid = uuids[i];
    }
    return r;
}

/* mark_next: a pass of web with r starts the mark of the VM of id ref. */
static void mark_next(struct env *e, reconciler *r, const char *ref)
{
    size_t n = count("mark");

    pass_with(e, r);
    assert_int_equal(count("mark"), n + 1);
    assert_string_equal(last_call("mark")->ref, ref);
}

/* done_with ends the mark in flight, and r. */
static void done_with(struct env *e, reconciler *r)
{
    complete("mark", 0, NULL, NULL);
    settle_status();
    drain(e);
    reconciler_free(r);
}

/* A VM whose mark vCenter keeps refusing (on a host out of reach, say)
 * does not hold back the marks of the group's other VMs: with room for one
 * mark, the next goes to another VM, and the refused one is tried again
 * once no other waits. */
static void test_refused_mark_goes_last(void **state)
{
    struct env *e = *state;
    reconciler *r = three_legacy(e);

    mark_next(e, r, "vm-10");
    settle_status();
    complete("mark", VMG_EFAULT, "HostNotConnected", "The host is not connected");

    /* After the backoff: web-1, not web-0 again. */
    F.now_ms += 1000;
    mark_next(e, r, "vm-11");
    complete("mark", 0, NULL, NULL);
    F.vms[1].mark_instance = "5000-b";

    /* Seen: no backoff, and web-2 before web-0. */
    mark_next(e, r, "vm-12");
    complete("mark", 0, NULL, NULL);
    F.vms[2].mark_instance = "5000-c";

    /* No other waits: web-0 is tried again. */
    mark_next(e, r, "vm-10");
    complete("mark", 0, NULL, NULL);
    F.vms[0].mark_instance = "5000-a";
    pass_with(e, r);

    /* Seen on web-0, its failure is forgotten: should web-0 and web-1 lose
     * their marks, web-0 is marked first again. */
    F.vms[0].mark_instance = F.vms[1].mark_instance = NULL;
    mark_next(e, r, "vm-10");
    done_with(e, r);
}

/* VMs whose marks failed are tried in turn, the least recent failure
 * first: one whose host is gone for good does not hold back another that
 * failed once. */
static void test_failed_marks_tried_in_turn(void **state)
{
    struct env *e = *state;
    reconciler *r = three_legacy(e);

    mark_next(e, r, "vm-10");
    complete("mark", VMG_EFAULT, "HostNotConnected", "The host is not connected");
    F.now_ms += 1000;
    mark_next(e, r, "vm-11");
    complete("mark", VMG_EFAULT, "TaskInProgress", "Another task is in progress");
    F.now_ms += 2000;
    mark_next(e, r, "vm-12");
    complete("mark", 0, NULL, NULL);
    F.vms[2].mark_instance = "5000-c";
    mark_next(e, r, "vm-10");
    complete("mark", VMG_EFAULT, "HostNotConnected", "The host is not connected");
    F.now_ms += 1000;
    mark_next(e, r, "vm-11");
    done_with(e, r);
}

/* So is a VM whose mark the inventory never showed. (A mark that ended
 * holds no room while it is awaited: web-1's starts meanwhile.) */
static void test_unseen_mark_goes_last(void **state)
{
    struct env *e = *state;
    reconciler *r = three_legacy(e);

    mark_next(e, r, "vm-10");
    complete("mark", 0, NULL, NULL);
    F.now_ms += 30000; /* web-0 read again */
    mark_next(e, r, "vm-11");
    complete("mark", 0, NULL, NULL);
    F.vms[1].mark_instance = "5000-b";
    F.now_ms += 30000; /* web-0 given up, web-1 seen */
    pass_with(e, r);
    assert_int_equal(count("mark"), 2);
    F.now_ms += 1000;
    mark_next(e, r, "vm-12");
    done_with(e, r);
}

/* And one whose mark could not be started: the next pass's goes to the
 * VM not yet tried. */
static void test_unstarted_mark_goes_last(void **state)
{
    struct env *e = *state;
    reconciler *r = three_legacy(e);

    F.marks_refused = 1; /* web-0's; web-1's starts in the same pass */
    mark_next(e, r, "vm-11");
    assert_int_equal(F.marks_refused, 0);
    complete("mark", 0, NULL, NULL);
    F.vms[1].mark_instance = "5000-b";
    F.now_ms += 1000;
    mark_next(e, r, "vm-12");
    done_with(e, r);
}

/* A VM whose mark failed but shows later (written after all) has its
 * failure forgotten: should it lose the mark, it is marked in its turn. */
static void test_failed_mark_forgotten_once_shown(void **state)
{
    struct env *e = *state;
    reconciler *r = three_legacy(e);

    mark_next(e, r, "vm-10");
    complete("mark", VMG_EFAULT, "TaskInProgress", "Another task is in progress");
    F.vms[0].mark_instance = "5000-a"; /* written after all */
    F.now_ms += 1000;
    mark_next(e, r, "vm-11");
    complete("mark", 0, NULL, NULL);
    F.vms[1].mark_instance = "5000-b";
    F.vms[0].mark_instance = NULL; /* removed by hand */
    mark_next(e, r, "vm-10");
    done_with(e, r);
}

/* So is that of a VM the listing of the group's VMs no longer shows (moved
 * out of the root folder, say): back, it is marked in its turn. */
static void test_failed_mark_forgotten_once_unlisted(void **state)
{
    struct env *e = *state;
    reconciler *r = three_legacy(e);
    struct plan_vm web0, web2;

    mark_next(e, r, "vm-10");
    complete("mark", VMG_EFAULT, "TaskInProgress", "Another task is in progress");
    web0 = F.vms[0];
    web2 = F.vms[2];
    F.vms[0] = web2; /* web-0 not listed */
    F.n_vms = 2;
    F.now_ms += 1000;
    mark_next(e, r, "vm-11");
    complete("mark", 0, NULL, NULL);
    F.vms[1].mark_instance = "5000-b";
    /* Meanwhile a clone was planned for the missing web-0; it ends, and
     * the listing shows web-0 itself again (moved back), still unmarked:
     * this fake world's clone adds no VM. */
    assert_int_equal(count("clone"), 1);
    complete("clone", 0, NULL, NULL);
    F.vms[0] = web0;
    F.vms[2] = web2;
    F.n_vms = 3;
    mark_next(e, r, "vm-10");
    done_with(e, r);
}

/* Told to write no marks (--max-instance-marks=0), the reconciler leaves
 * a member cloned before the mark as it is: the group is RUNNING with it,
 * and nothing is done in vCenter. */
static void test_no_marks_when_told(void **state)
{
    struct env *e = *state;
    struct rec_options ro = {.max_group_tasks = 4, .max_marks = REC_NO_MARKS, .clock = f_clock};
    reconciler *r = NULL;

    assert_int_equal(reconciler_new(&world, &ro, e->q, &r), 0);
    set_group(GROUP("1", FIN, 2, ""));
    add_vm(0, true);
    add_vm(1, true);
    F.vms[0].instance_uuid = "5000-a";
    F.vms[1].instance_uuid = F.vms[1].mark_instance = "5000-b";
    for (int i = 0; i < 3; i++) {
        assert_int_equal(wq_add(e->q, "ns/web"), 0);
        (void)handle_queued(e, r);
        settle_status();
        F.now_ms += 300000;
    }
    assert_int_equal(count("mark"), 0);
    assert_non_null(strstr(F.last_status, "\"phase\":\"RUNNING\""));
    assert_non_null(strstr(F.last_status, "\"currentReplicas\":2"));
    drain(e);
    reconciler_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_finalizer_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_finalizer_written_once_per_object_version, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_finalizer_and_status_writes_do_not_cross, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_finalizer_removal_drops_a_status_not_sent, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_status_not_sent_yet_carries_the_newest, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_headline_goes_ahead_of_details, setup, teardown),
        cmocka_unit_test_setup_teardown(test_progress_waits_its_turn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deleted_while_its_folder_is_created, setup, teardown),
        cmocka_unit_test_setup_teardown(test_folder_holding_hidden_objects_is_kept, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_refused_size_powers_the_vm_on_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusal_of_an_older_spec_blocks_not_the_new, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_refused_size_and_missing_template_together, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_state_dropped_when_gone_during_the_finalizer_write,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_dropped_when_gone_during_an_operation, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_clone_with_unknown_outcome_still_counts, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_vm_gone_under_an_operation_does_not_back_off, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_clones_not_started_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_template_blocks_with_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_made_again_learns_anew, setup, teardown),
        cmocka_unit_test_setup_teardown(test_old_objects_clone_blocks_not_the_new, setup, teardown),
        cmocka_unit_test_setup_teardown(test_old_objects_clone_ends_before_the_new_is_planned,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_template_blocks_with_its_reason, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_vcenter_down_shows_in_status, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_placement_is_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_vcenter_outage_keeps_the_status, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_outage_held_for_a_login_that_failed_otherwise, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_what_waiting_does_not_mend_is_said_at_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_outage_held_but_for_a_new_spec_or_a_lost_finalizer,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_outage_status_not_sent_is_dropped_when_vcenter_is_back,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_folder_beyond_the_limit_blocks_a_live_group, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_status_computed_during_a_write_is_written_after_it,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_failure_is_reported_and_retried_later, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_in_sync_costs_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_written_once_per_object_version, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_status_vms_follow_the_inventory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_power_off_then_destroy_on_scale_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conditions_announced_once_while_the_cache_lags, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ready_not_announced_again_without_a_false_written,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_conditions_announced_for_a_group_made_again, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_vm_moved_out_is_acted_on_by_its_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unseen_operation_reads_the_vm_before_acting_again,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_legacy_member_marked_once_quietly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_mark_waits_its_backoff, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resize_waits_for_a_mark_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unseen_mark_waits_its_backoff, setup, teardown),
        cmocka_unit_test_setup_teardown(test_old_objects_mark_teaches_the_new_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_old_objects_unseen_mark_teaches_the_new_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_marks_bounded_across_groups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_marks_when_told, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_mark_goes_last, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_marks_tried_in_turn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unseen_mark_goes_last, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unstarted_mark_goes_last, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_mark_forgotten_once_shown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_mark_forgotten_once_unlisted, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
