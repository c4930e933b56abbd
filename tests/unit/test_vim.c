/* test_vim.c: a replay of a session recorded against a real vcsim
 * (hack/record-soap-fixtures). Each step builds its request from
 * what earlier responses said, exactly as a client would, and checks that
 * the bytes are those vcsim accepted; then it decodes vcsim's answer. Later
 * tests cover the decoders' bounds and the builders' argument checks.
 * Tests run from the repository root. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "vsphere/soap.h"
#include "vsphere/vim.h"

#define MAX_RESP (1u << 20)
#define UID "1b4e28ba-2fa1-11d2-883f-0016d3cca427"

static char *load(const char *name, size_t *len)
{
    return unit_fixture("soap", name, len);
}

/* expect_req: a builder returned r and *bufp; it must be the request of
 * fixture step, byte for byte. Frees *bufp. (Pointers, since the builder
 * call is an argument too and fills them.) */
static void expect_req(const char *step, int r, char **bufp, size_t *lenp)
{
    char *buf = *bufp;
    size_t len = *lenp;

    char name[128];
    size_t want_len;
    char *want;

    assert_int_equal(r, 0);
    snprintf(name, sizeof(name), "%s.req.xml", step);
    want = load(name, &want_len);
    if (len != want_len || memcmp(buf, want, len) != 0)
        fail_msg("%s: the builder made\n%s\nbut vcsim was sent\n%s", step, buf, want);
    free(want);
    soap_buf_free(buf, len);
    *bufp = NULL;
    *lenp = 0;
}

static int parse_resp(const char *step, soap_resp **ret, struct soap_fault *fault)
{
    char name[128];
    size_t len;
    char *buf;
    int r;

    snprintf(name, sizeof(name), "%s.resp.xml", step);
    buf = load(name, &len);
    r = soap_parse(buf, len, MAX_RESP, ret, fault);
    free(buf);
    return r;
}

static soap_resp *resp_of(const char *step)
{
    soap_resp *resp = NULL;
    struct soap_fault f = {"", ""};
    int r = parse_resp(step, &resp, &f);
    if (r != 0)
        fail_msg("%s: %s (%s: %s)", step, vmg_strerror(r), f.type, f.message);
    return resp;
}

static struct vim_moref moref_of(const char *step)
{
    soap_resp *resp = resp_of(step);
    struct vim_moref ref;
    assert_int_equal(vim_decode_moref(resp, &ref), 0);
    soap_resp_free(resp);
    return ref;
}

static void expect_fault(const char *step, const char *type)
{
    soap_resp *resp = NULL;
    struct soap_fault f;
    assert_int_equal(parse_resp(step, &resp, &f), VMG_EFAULT);
    assert_string_equal(f.type, type);
}

static struct vim_service_content service_content(void)
{
    soap_resp *resp = resp_of("service_content");
    struct vim_service_content sc;
    assert_int_equal(vim_decode_service_content(resp, &sc), 0);
    soap_resp_free(resp);
    return sc;
}

static void assert_ref(const struct vim_moref *ref, const char *type, const char *value)
{
    assert_string_equal(ref->type, type);
    assert_string_equal(ref->value, value);
}

static void assert_same_ref(const struct vim_moref *a, const struct vim_moref *b)
{
    assert_ref(a, b->type, b->value);
}

/* ---- Recording what the UpdateSet decoder delivers ---- */

struct rec_change {
    char name[64];
    enum vim_op op;
    enum vim_val kind;
    char xsi_type[64];
    char str[128];
    long long num;
    bool b;
    struct vim_moref ref;
    char options[512]; /* "k=v;k=v;" */
    struct soap_fault fault;
};

struct rec_obj {
    struct vim_moref filter;
    enum vim_kind kind;
    struct vim_moref obj;
    size_t n;
    struct rec_change ch[VIM_CHANGES_PER_CALL];
};

struct rec {
    size_t n, calls;
    int fail_at; /* the call that returns -ECANCELED; 0: none */
    struct rec_obj obj[16];
};

static int record_cb(void *arg, const struct vim_object_update *u)
{
    struct rec *rec = arg;
    struct rec_obj *o;

    rec->calls++;
    if (rec->fail_at && (int)rec->calls == rec->fail_at)
        return -ECANCELED;
    assert_true(rec->n < 16);
    assert_true(u->n_changes <= VIM_CHANGES_PER_CALL);
    o = &rec->obj[rec->n++];
    o->filter = u->filter;
    o->kind = u->kind;
    o->obj = u->obj;
    o->n = u->n_changes;
    for (size_t i = 0; i < u->n_changes; i++) {
        const struct vim_change *c = &u->changes[i];
        struct rec_change *r = &o->ch[i];
        snprintf(r->name, sizeof(r->name), "%s", c->name);
        r->op = c->op;
        r->kind = c->kind;
        snprintf(r->xsi_type, sizeof(r->xsi_type), "%s", c->xsi_type ? c->xsi_type : "");
        if (c->str)
            snprintf(r->str, sizeof(r->str), "%s", c->str);
        r->num = c->num;
        r->b = c->b;
        if (c->kind == VIM_VAL_MOREF)
            assert_int_equal(vim_moref_set(&r->ref, c->ref_type, c->ref_value), 0);
        if (c->kind == VIM_VAL_OPTIONS) {
            const char *k, *v;
            size_t len = 0;
            for (const xmlNode *opt = vim_option_next(c->node, NULL, &k, &v); opt;
                 opt = vim_option_next(c->node, opt, &k, &v)) {
                assert_non_null(k);
                assert_non_null(v);
                len += (size_t)snprintf(r->options + len, sizeof(r->options) - len, "%s=%s;", k, v);
                assert_true(len < sizeof(r->options));
            }
        }
        if (c->kind == VIM_VAL_FAULT)
            assert_int_equal(soap_method_fault(c->node, &r->fault), 0);
    }
    return 0;
}

/* updates decodes the WaitForUpdatesEx response of step into a new rec. */
static struct rec *updates(const char *step, int *ret, struct vim_update_set *us)
{
    soap_resp *resp = resp_of(step);
    struct rec *rec = calloc(1, sizeof(*rec));

    assert_non_null(rec);
    *ret = vim_decode_update_set(resp, record_cb, rec, us);
    soap_resp_free(resp);
    return rec;
}

static struct rec_obj *find_obj(struct rec *rec, const char *type, const char *value,
                                enum vim_kind kind)
{
    for (size_t i = 0; i < rec->n; i++)
        if (strcmp(rec->obj[i].obj.type, type) == 0 && strcmp(rec->obj[i].obj.value, value) == 0 &&
            rec->obj[i].kind == kind)
            return &rec->obj[i];
    fail_msg("no %d of %s:%s", kind, type, value);
    return NULL;
}

static struct rec_change *find_change(struct rec_obj *o, const char *name)
{
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->ch[i].name, name) == 0)
            return &o->ch[i];
    fail_msg("no change %s of %s:%s", name, o->obj.type, o->obj.value);
    return NULL;
}

/* version_of: the version an UpdateSet fixture carries. */
static void version_of(const char *step, char *buf, size_t size)
{
    struct vim_update_set us;
    int r;
    struct rec *rec = updates(step, &r, &us);
    assert_int_equal(r, 1);
    snprintf(buf, size, "%s", us.version);
    free(rec);
}

/* ---- The recorded session ---- */

static void test_service_content(void **state)
{
    struct vim_service_content sc;
    char *buf = NULL, action[64];
    size_t len = 0;

    (void)state;
    expect_req("service_content", vim_req_retrieve_service_content(&buf, &len), &buf, &len);
    sc = service_content();
    assert_ref(&sc.root_folder, "Folder", "group-d1");
    assert_ref(&sc.property_collector, "PropertyCollector", "propertyCollector");
    assert_ref(&sc.view_manager, "ViewManager", "ViewManager");
    assert_ref(&sc.search_index, "SearchIndex", "SearchIndex");
    assert_ref(&sc.session_manager, "SessionManager", "SessionManager");
    assert_string_equal(sc.api_version, "6.5");
    assert_string_equal(sc.api_type, "VirtualCenter");
    assert_int_equal(strlen(sc.instance_uuid), 36);
    assert_int_equal(soap_action(action, sizeof(action), sc.api_version), 13);
    assert_string_equal(action, "urn:vim25/6.5");
}

static void test_login_logout(void **state)
{
    struct vim_service_content sc = service_content();
    struct vim_user_session us;
    soap_resp *resp;
    char *buf = NULL, now[64];
    size_t len = 0;

    (void)state;
    /* Before login, nothing but the ServiceContent is served. */
    expect_req("fault_not_authenticated", vim_req_current_time(&buf, &len), &buf, &len);
    expect_fault("fault_not_authenticated", "NotAuthenticated");

    expect_req("fault_invalid_login",
               vim_req_login(&sc.session_manager, "user", "wrongpw", &buf, &len), &buf, &len);
    expect_fault("fault_invalid_login", "InvalidLogin");

    expect_req("login", vim_req_login(&sc.session_manager, "user", "secretpw", &buf, &len), &buf,
               &len);
    resp = resp_of("login");
    assert_int_equal(vim_decode_user_session(resp, &us), 0);
    assert_string_equal(us.user_name, "user");
    assert_int_equal(strlen(us.key), 36);
    soap_resp_free(resp);

    expect_req("current_time", vim_req_current_time(&buf, &len), &buf, &len);
    resp = resp_of("current_time");
    assert_int_equal(vim_decode_text(resp, now, sizeof(now)), 0);
    assert_true(strlen(now) >= 20 && now[4] == '-' && now[10] == 'T');
    assert_int_equal(vim_decode_text(resp, now, 10), VMG_ETOOBIG);
    soap_resp_free(resp);

    expect_req("logout", vim_req_logout(&sc.session_manager, &buf, &len), &buf, &len);
    resp = resp_of("logout");
    assert_int_equal(vim_decode_text(resp, now, sizeof(now)), VMG_ENOTFOUND);
    soap_resp_free(resp);
    expect_req("fault_after_logout", vim_req_current_time(&buf, &len), &buf, &len);
    expect_fault("fault_after_logout", "NotAuthenticated");
}

static void test_find_by_inventory_path(void **state)
{
    struct vim_service_content sc = service_content();
    struct vim_moref ref;
    soap_resp *resp;
    char *buf = NULL;
    size_t len = 0;

    (void)state;
    expect_req("find_template",
               vim_req_find_by_inventory_path(&sc.search_index, "DC0/vm/tmpl", &buf, &len), &buf,
               &len);
    ref = moref_of("find_template");
    assert_ref(&ref, "VirtualMachine", "vm-40");

    expect_req("find_missing",
               vim_req_find_by_inventory_path(&sc.search_index, "DC0/vm/no-such-vm", &buf, &len),
               &buf, &len);
    resp = resp_of("find_missing");
    memset(&ref, 'x', sizeof(ref));
    assert_int_equal(vim_decode_moref(resp, &ref), VMG_ENOTFOUND);
    assert_int_equal(ref.type[0], 'x');
    soap_resp_free(resp);

    expect_req("find_vm_folder",
               vim_req_find_by_inventory_path(&sc.search_index, "DC0/vm", &buf, &len), &buf, &len);
    ref = moref_of("find_vm_folder");
    assert_ref(&ref, "Folder", "group-2");
    expect_req(
        "find_pool",
        vim_req_find_by_inventory_path(&sc.search_index, "DC0/host/DC0_C0/Resources", &buf, &len),
        &buf, &len);
    ref = moref_of("find_pool");
    assert_string_equal(ref.type, "ResourcePool");
    expect_req(
        "find_datastore",
        vim_req_find_by_inventory_path(&sc.search_index, "DC0/datastore/LocalDS_0", &buf, &len),
        &buf, &len);
    ref = moref_of("find_datastore");
    assert_string_equal(ref.type, "Datastore");
}

static void test_folders_and_faults(void **state)
{
    struct vim_moref vmf = moref_of("find_vm_folder"), folder, bogus;
    char *buf = NULL;
    size_t len = 0;

    (void)state;
    /* The name needs escaping; vcsim took it and reports it back as is
     * (see test_wait_initial). */
    expect_req("create_folder", vim_req_create_folder(&vmf, "vg-default-web <&>", &buf, &len), &buf,
               &len);
    folder = moref_of("create_folder");
    assert_string_equal(folder.type, "Folder");
    expect_req("fault_duplicate_name",
               vim_req_create_folder(&vmf, "vg-default-web <&>", &buf, &len), &buf, &len);
    expect_fault("fault_duplicate_name", "DuplicateName");

    assert_int_equal(vim_moref_set(&bogus, "VirtualMachine", "vm-999"), 0);
    expect_req("fault_managed_object_not_found", vim_req_power_on(&bogus, &buf, &len), &buf, &len);
    expect_fault("fault_managed_object_not_found", "ManagedObjectNotFound");

    expect_req("destroy_folder", vim_req_destroy(&folder, &buf, &len), &buf, &len);
    struct vim_moref task = moref_of("destroy_folder");
    assert_string_equal(task.type, "Task");
}

static void test_collectors_views_filters(void **state)
{
    struct vim_service_content sc = service_content();
    struct vim_moref vmf = moref_of("find_vm_folder"), pc, tpc, ppc, view, filter;
    static const char *const types[] = {"VirtualMachine", "Folder"};
    char *buf = NULL;
    size_t len = 0;

    (void)state;
    expect_req("create_property_collector",
               vim_req_create_property_collector(&sc.property_collector, &buf, &len), &buf, &len);
    pc = moref_of("create_property_collector");
    assert_string_equal(pc.type, "PropertyCollector");
    assert_string_not_equal(pc.value, sc.property_collector.value);

    expect_req("create_container_view",
               vim_req_create_container_view(&sc.view_manager, &vmf, types, 2, true, &buf, &len),
               &buf, &len);
    view = moref_of("create_container_view");
    assert_string_equal(view.type, "ContainerView");

    expect_req("create_filter_view", vim_req_create_filter_view(&pc, &view, &buf, &len), &buf,
               &len);
    filter = moref_of("create_filter_view");
    assert_string_equal(filter.type, "PropertyFilter");

    expect_req("create_paged_collector",
               vim_req_create_property_collector(&sc.property_collector, &buf, &len), &buf, &len);
    ppc = moref_of("create_paged_collector");
    expect_req("create_filter_paged", vim_req_create_filter_view(&ppc, &view, &buf, &len), &buf,
               &len);
    expect_req("destroy_paged_collector", vim_req_destroy_property_collector(&ppc, &buf, &len),
               &buf, &len);

    expect_req("create_task_collector",
               vim_req_create_property_collector(&sc.property_collector, &buf, &len), &buf, &len);
    tpc = moref_of("create_task_collector");
    expect_req("destroy_task_collector", vim_req_destroy_property_collector(&tpc, &buf, &len), &buf,
               &len);
    expect_req("destroy_view", vim_req_destroy_view(&view, &buf, &len), &buf, &len);
}

static void test_wait_initial(void **state)
{
    struct vim_moref pc = moref_of("create_property_collector");
    struct vim_moref filter = moref_of("create_filter_view");
    struct vim_moref vmf = moref_of("find_vm_folder"), folder = moref_of("create_folder");
    struct vim_moref tmpl = moref_of("find_template");
    struct vim_update_set us;
    struct rec_obj *o;
    struct rec_change *c;
    char *buf = NULL;
    size_t len = 0;
    int r;

    (void)state;
    expect_req("wait_initial", vim_req_wait_for_updates_ex(&pc, "", 0, 0, &buf, &len), &buf, &len);
    struct rec *rec = updates("wait_initial", &r, &us);
    assert_int_equal(r, 1);
    assert_string_equal(us.version, "-");
    assert_false(us.truncated);
    assert_int_equal(rec->n, 2);

    o = find_obj(rec, "VirtualMachine", tmpl.value, VIM_ENTER);
    assert_same_ref(&o->filter, &filter);
    assert_int_equal(o->n, vim_vm_paths_n);
    c = find_change(o, "name");
    assert_int_equal(c->op, VIM_OP_ASSIGN);
    assert_int_equal(c->kind, VIM_VAL_STRING);
    assert_string_equal(c->str, "tmpl");
    c = find_change(o, "parent");
    assert_int_equal(c->kind, VIM_VAL_MOREF);
    assert_same_ref(&c->ref, &vmf);
    c = find_change(o, "runtime.powerState");
    assert_int_equal(c->kind, VIM_VAL_ENUM);
    assert_string_equal(c->xsi_type, "VirtualMachinePowerState");
    assert_string_equal(c->str, "poweredOff");
    c = find_change(o, "config.hardware.numCPU");
    assert_int_equal(c->kind, VIM_VAL_INT);
    assert_int_equal(c->num, 1);
    c = find_change(o, "config.hardware.memoryMB");
    assert_int_equal(c->kind, VIM_VAL_INT);
    assert_int_equal(c->num, 512);
    c = find_change(o, "config.template");
    assert_int_equal(c->kind, VIM_VAL_BOOL);
    assert_true(c->b);
    c = find_change(o, "config.instanceUuid");
    assert_int_equal(c->kind, VIM_VAL_STRING);
    assert_int_equal(strlen(c->str), 36);
    c = find_change(o, "config.extraConfig");
    assert_int_equal(c->kind, VIM_VAL_OPTIONS);
    assert_string_equal(c->options, "govcsim=TRUE;");
    /* No guest yet: no address. */
    c = find_change(o, "guest.ipAddress");
    assert_int_equal(c->kind, VIM_VAL_NONE);

    o = find_obj(rec, "Folder", folder.value, VIM_ENTER);
    assert_int_equal(o->n, vim_folder_paths_n);
    assert_string_equal(find_change(o, "name")->str, "vg-default-web <&>");
    assert_same_ref(&find_change(o, "parent")->ref, &vmf);
    free(rec);
}

static void test_wait_truncated(void **state)
{
    struct vim_moref ppc = moref_of("create_paged_collector");
    struct vim_update_set us;
    char *buf = NULL, version[64];
    size_t len = 0;
    int r;

    (void)state;
    expect_req("wait_truncated", vim_req_wait_for_updates_ex(&ppc, "", 0, 1, &buf, &len), &buf,
               &len);
    struct rec *rec = updates("wait_truncated", &r, &us);
    assert_int_equal(r, 1);
    assert_true(us.truncated);
    assert_int_equal(rec->n, 1);
    free(rec);
    version_of("wait_truncated", version, sizeof(version));
    expect_req("wait_truncated_rest", vim_req_wait_for_updates_ex(&ppc, version, 0, 1, &buf, &len),
               &buf, &len);
    rec = updates("wait_truncated_rest", &r, &us);
    assert_int_equal(r, 1);
    assert_int_equal(rec->n, 1);
    assert_int_equal(rec->obj[0].kind, VIM_ENTER);
    assert_string_equal(rec->obj[0].obj.type, "Folder");
    free(rec);
}

static void test_retrieve_properties(void **state)
{
    struct vim_service_content sc = service_content();
    struct vim_moref tmpl = moref_of("find_template");
    static const char *const paths[] = {"name", "config.hardware.numCPU", "config.extraConfig"};
    struct rec *rec = calloc(1, sizeof(*rec));
    soap_resp *resp;
    char *buf = NULL, token[64];
    size_t len = 0;

    (void)state;
    assert_non_null(rec);
    expect_req(
        "retrieve_properties",
        vim_req_retrieve_properties_ex(&sc.property_collector, &tmpl, paths, 3, 0, &buf, &len),
        &buf, &len);
    resp = resp_of("retrieve_properties");
    assert_int_equal(vim_decode_retrieve_result(resp, record_cb, rec, token, sizeof(token)), 1);
    assert_string_equal(token, "");
    assert_int_equal(rec->n, 1);
    assert_int_equal(rec->obj[0].kind, VIM_ENTER);
    assert_same_ref(&rec->obj[0].obj, &tmpl);
    assert_string_equal(rec->obj[0].filter.type, "");
    assert_int_equal(rec->obj[0].n, 3);
    assert_string_equal(find_change(&rec->obj[0], "name")->str, "tmpl");
    assert_int_equal(find_change(&rec->obj[0], "config.hardware.numCPU")->num, 1);
    assert_string_equal(find_change(&rec->obj[0], "config.extraConfig")->options, "govcsim=TRUE;");
    soap_resp_free(resp);
    free(rec);
}

/* The VM the clone made, from the task's info.result. */
static struct vim_moref cloned_vm(void)
{
    struct vim_update_set us;
    struct vim_moref vm;
    int r;
    struct rec *rec = updates("wait_task_success", &r, &us);
    assert_int_equal(r, 1);
    vm = find_change(&rec->obj[0], "info.result")->ref;
    free(rec);
    return vm;
}

static void test_clone(void **state)
{
    struct vim_moref tmpl = moref_of("find_template"), folder = moref_of("create_folder");
    struct vim_moref pool = moref_of("find_pool"), ds = moref_of("find_datastore");
    struct vim_moref pc = moref_of("create_property_collector");
    struct vim_moref tpc = moref_of("create_task_collector");
    struct vim_option extra[] = {{"vmgroup.uid", UID, false}, {"vmgroup.slot", "0", false}};
    struct vim_config cfg = {.num_cpus = 2, .memory_mb = 2048, .extra_config = extra, .n_extra = 2};
    struct vim_moref task, vm;
    struct vim_update_set us;
    struct rec_obj *o;
    struct rec_change *c;
    char *buf = NULL, version[64];
    size_t len = 0;
    int r;

    (void)state;
    expect_req("clone_vm",
               vim_req_clone_vm(&tmpl, &folder, "vg-default-web-0", &pool, &ds, &cfg, &buf, &len),
               &buf, &len);
    task = moref_of("clone_vm");
    assert_ref(&task, "Task", "task-42");

    /* The task, followed by a filter of its own, succeeded with the VM. */
    expect_req("create_filter_task", vim_req_create_filter_task(&tpc, &task, &buf, &len), &buf,
               &len);
    expect_req("wait_task_success", vim_req_wait_for_updates_ex(&tpc, "", 0, 0, &buf, &len), &buf,
               &len);
    struct rec *rec = updates("wait_task_success", &r, &us);
    assert_int_equal(r, 1);
    o = find_obj(rec, "Task", task.value, VIM_ENTER);
    struct vim_moref tfilter = moref_of("create_filter_task");
    assert_same_ref(&o->filter, &tfilter);
    c = find_change(o, "info.state");
    assert_int_equal(c->kind, VIM_VAL_ENUM);
    assert_string_equal(c->xsi_type, "TaskInfoState");
    assert_string_equal(c->str, "success");
    assert_int_equal(find_change(o, "info.error")->kind, VIM_VAL_NONE);
    c = find_change(o, "info.result");
    assert_int_equal(c->kind, VIM_VAL_MOREF);
    assert_string_equal(c->ref.type, "VirtualMachine");
    vm = c->ref;
    free(rec);

    /* The inventory watch saw the clone, sized and marked as asked. */
    version_of("wait_initial", version, sizeof(version));
    expect_req("wait_clone", vim_req_wait_for_updates_ex(&pc, version, 10, 0, &buf, &len), &buf,
               &len);
    rec = updates("wait_clone", &r, &us);
    assert_int_equal(r, 1);
    o = find_obj(rec, "VirtualMachine", vm.value, VIM_ENTER);
    assert_string_equal(find_change(o, "name")->str, "vg-default-web-0");
    assert_same_ref(&find_change(o, "parent")->ref, &folder);
    assert_string_equal(find_change(o, "runtime.powerState")->str, "poweredOn");
    assert_int_equal(find_change(o, "config.hardware.numCPU")->num, 2);
    assert_int_equal(find_change(o, "config.hardware.memoryMB")->num, 2048);
    assert_false(find_change(o, "config.template")->b);
    assert_string_equal(find_change(o, "config.extraConfig")->options,
                        "govcsim=TRUE;vmgroup.uid=" UID ";vmgroup.slot=0;");
    /* vcsim repeats the enter of objects it already sent, then modifies. */
    find_obj(rec, "VirtualMachine", tmpl.value, VIM_ENTER);
    o = find_obj(rec, "VirtualMachine", vm.value, VIM_MODIFY);
    assert_true(o->n >= 1);
    free(rec);

    expect_req("destroy_property_filter", vim_req_destroy_property_filter(&tfilter, &buf, &len),
               &buf, &len);
    soap_resp *resp = resp_of("destroy_property_filter");
    assert_null(soap_resp_returnval(resp));
    soap_resp_free(resp);
}

/* A clone given an instanceUuid asks for it in the config spec, before
 * the size (the schema's order); without one, vCenter chooses. */
static void test_clone_instance_uuid(void **state)
{
    struct vim_moref tmpl, folder, pool;
    struct vim_option mark = {"vm.example/iu", "8d4b1e2a-3c5f-4a6b-9c7d-0e1f2a3b4c5d", false};
    struct vim_config cfg = {
        .instance_uuid = mark.value, .num_cpus = 2, .extra_config = &mark, .n_extra = 1};
    char *buf = NULL, *iu, *cpus;
    size_t len = 0;

    (void)state;
    assert_int_equal(vim_moref_set(&tmpl, "VirtualMachine", "vm-1"), 0);
    assert_int_equal(vim_moref_set(&folder, "Folder", "group-1"), 0);
    assert_int_equal(vim_moref_set(&pool, "ResourcePool", "resgroup-1"), 0);
    assert_int_equal(vim_req_clone_vm(&tmpl, &folder, "web-0", &pool, NULL, &cfg, &buf, &len), 0);
    iu = strstr(buf, "<instanceUuid>8d4b1e2a-3c5f-4a6b-9c7d-0e1f2a3b4c5d</instanceUuid>");
    cpus = strstr(buf, "<numCPUs>2</numCPUs>");
    assert_non_null(iu);
    assert_non_null(cpus);
    assert_true(iu < cpus);
    assert_non_null(strstr(buf, "<key>vm.example/iu</key>"));
    soap_buf_free(buf, len);

    cfg.instance_uuid = NULL;
    assert_int_equal(vim_req_clone_vm(&tmpl, &folder, "web-0", &pool, NULL, &cfg, &buf, &len), 0);
    assert_null(strstr(buf, "instanceUuid"));
    soap_buf_free(buf, len);
    buf = NULL;
    cfg.instance_uuid = "";
    assert_int_equal(vim_req_clone_vm(&tmpl, &folder, "web-0", &pool, NULL, &cfg, &buf, &len),
                     -EINVAL);
    assert_null(buf);
}

static void test_clone_duplicate_name(void **state)
{
    struct vim_moref tmpl = moref_of("find_template"), folder = moref_of("create_folder");
    struct vim_moref pool = moref_of("find_pool");
    struct vim_moref tpc = moref_of("create_task_collector");
    struct vim_option extra[] = {{"vmgroup.uid", UID, false}, {"vmgroup.slot", "0", false}};
    struct vim_config cfg = {.num_cpus = 2, .memory_mb = 2048, .extra_config = extra, .n_extra = 2};
    struct vim_moref task, filter;
    struct vim_update_set us;
    struct rec_obj *o;
    struct rec_change *c;
    char *buf = NULL;
    size_t len = 0;
    int r;

    (void)state;
    /* Re-issued, the same clone collides instead of duplicating. */
    expect_req("clone_vm_again",
               vim_req_clone_vm(&tmpl, &folder, "vg-default-web-0", &pool, NULL, &cfg, &buf, &len),
               &buf, &len);
    task = moref_of("clone_vm_again");
    expect_req("create_filter_task_again", vim_req_create_filter_task(&tpc, &task, &buf, &len),
               &buf, &len);
    expect_req("wait_task_duplicate", vim_req_wait_for_updates_ex(&tpc, "", 0, 0, &buf, &len), &buf,
               &len);
    struct rec *rec = updates("wait_task_duplicate", &r, &us);
    assert_int_equal(r, 1);
    assert_int_equal(rec->n, 1);
    o = find_obj(rec, "Task", task.value, VIM_ENTER);
    assert_string_equal(find_change(o, "info.state")->str, "error");
    c = find_change(o, "info.error");
    assert_int_equal(c->kind, VIM_VAL_FAULT);
    assert_string_equal(c->xsi_type, "LocalizedMethodFault");
    assert_string_equal(c->fault.type, "DuplicateName");
    assert_int_equal(find_change(o, "info.result")->kind, VIM_VAL_NONE);
    free(rec);
    filter = moref_of("create_filter_task_again");
    expect_req("destroy_filter_again", vim_req_destroy_property_filter(&filter, &buf, &len), &buf,
               &len);
}

static void test_power_and_task_error(void **state)
{
    struct vim_moref vm = cloned_vm(), pc = moref_of("create_property_collector");
    struct vim_moref tpc = moref_of("create_task_collector"), task;
    struct vim_update_set us;
    struct rec_obj *o;
    struct rec_change *c;
    char *buf = NULL, version[64];
    size_t len = 0;
    int r;

    (void)state;
    expect_req("power_off", vim_req_power_off(&vm, &buf, &len), &buf, &len);
    assert_string_equal(moref_of("power_off").type, "Task");
    version_of("wait_clone", version, sizeof(version));
    expect_req("wait_power_off", vim_req_wait_for_updates_ex(&pc, version, 10, 0, &buf, &len), &buf,
               &len);
    struct rec *rec = updates("wait_power_off", &r, &us);
    assert_int_equal(r, 1);
    assert_int_equal(rec->n, 1);
    o = find_obj(rec, "VirtualMachine", vm.value, VIM_MODIFY);
    assert_int_equal(o->n, 1);
    assert_string_equal(find_change(o, "runtime.powerState")->str, "poweredOff");
    free(rec);

    /* Powering off what is off: the task fails with InvalidPowerState. */
    expect_req("power_off_again", vim_req_power_off(&vm, &buf, &len), &buf, &len);
    task = moref_of("power_off_again");
    expect_req("create_filter_task_error", vim_req_create_filter_task(&tpc, &task, &buf, &len),
               &buf, &len);
    expect_req("wait_task_error", vim_req_wait_for_updates_ex(&tpc, "", 0, 0, &buf, &len), &buf,
               &len);
    rec = updates("wait_task_error", &r, &us);
    assert_int_equal(r, 1);
    o = find_obj(rec, "Task", task.value, VIM_ENTER);
    assert_string_equal(find_change(o, "info.state")->str, "error");
    c = find_change(o, "info.error");
    assert_int_equal(c->kind, VIM_VAL_FAULT);
    assert_string_equal(c->fault.type, "InvalidPowerState");
    assert_string_equal(c->fault.message, "*types.InvalidPowerState");
    free(rec);

    version_of("wait_reconfigure", version, sizeof(version));
    expect_req("power_on", vim_req_power_on(&vm, &buf, &len), &buf, &len);
    expect_req("wait_power_on", vim_req_wait_for_updates_ex(&pc, version, 10, 0, &buf, &len), &buf,
               &len);
    rec = updates("wait_power_on", &r, &us);
    assert_int_equal(r, 1);
    o = find_obj(rec, "VirtualMachine", vm.value, VIM_MODIFY);
    assert_string_equal(find_change(o, "runtime.powerState")->str, "poweredOn");
    free(rec);
    version_of("wait_power_on", version, sizeof(version));
    expect_req("power_off_quiet", vim_req_power_off(&vm, &buf, &len), &buf, &len);
    expect_req("wait_power_off_quiet", vim_req_wait_for_updates_ex(&pc, version, 10, 0, &buf, &len),
               &buf, &len);
}

static void test_reconfigure(void **state)
{
    struct vim_service_content sc = service_content();
    struct vim_moref vm = cloned_vm(), pc = moref_of("create_property_collector");
    struct vim_option extra[] = {{"vmgroup.note", "resized", false}};
    struct vim_config cfg = {.num_cpus = 4, .memory_mb = 4096, .extra_config = extra, .n_extra = 1};
    struct vim_update_set us;
    struct rec_obj *o;
    char *buf = NULL, version[64], token[8];
    size_t len = 0;
    int r;

    (void)state;
    expect_req("reconfigure", vim_req_reconfigure(&vm, &cfg, &buf, &len), &buf, &len);
    assert_string_equal(moref_of("reconfigure").type, "Task");
    version_of("wait_power_off", version, sizeof(version));
    expect_req("wait_reconfigure", vim_req_wait_for_updates_ex(&pc, version, 10, 0, &buf, &len),
               &buf, &len);
    struct rec *rec = updates("wait_reconfigure", &r, &us);
    assert_int_equal(r, 1);
    o = find_obj(rec, "VirtualMachine", vm.value, VIM_MODIFY);
    assert_string_equal(find_change(o, "config.extraConfig")->options,
                        "govcsim=TRUE;vmgroup.uid=" UID ";vmgroup.slot=0;vmgroup.note=resized;");
    free(rec);

    /* vcsim does not stream the new size; a read shows it. */
    static const char *const paths[] = {"name", "config.hardware.numCPU",
                                        "config.hardware.memoryMB", "config.extraConfig"};
    expect_req("retrieve_after_reconfigure",
               vim_req_retrieve_properties_ex(&sc.property_collector, &vm, paths, 4, 0, &buf, &len),
               &buf, &len);
    rec = calloc(1, sizeof(*rec));
    assert_non_null(rec);
    soap_resp *resp = resp_of("retrieve_after_reconfigure");
    assert_int_equal(vim_decode_retrieve_result(resp, record_cb, rec, token, sizeof(token)), 1);
    assert_int_equal(find_change(&rec->obj[0], "config.hardware.numCPU")->num, 4);
    assert_int_equal(find_change(&rec->obj[0], "config.hardware.memoryMB")->num, 4096);
    soap_resp_free(resp);
    free(rec);
}

static void test_destroy_and_leave(void **state)
{
    struct vim_moref vm = cloned_vm(), pc = moref_of("create_property_collector"), task;
    struct vim_update_set us;
    char *buf = NULL, version[64];
    size_t len = 0;
    int r;

    (void)state;
    expect_req("destroy_vm", vim_req_destroy(&vm, &buf, &len), &buf, &len);
    task = moref_of("destroy_vm");
    version_of("wait_power_off_quiet", version, sizeof(version));
    expect_req("wait_leave", vim_req_wait_for_updates_ex(&pc, version, 10, 0, &buf, &len), &buf,
               &len);
    struct rec *rec = updates("wait_leave", &r, &us);
    assert_int_equal(r, 1);
    assert_int_equal(rec->n, 1);
    assert_int_equal(rec->obj[0].kind, VIM_LEAVE);
    assert_same_ref(&rec->obj[0].obj, &vm);
    assert_int_equal(rec->obj[0].n, 0);
    free(rec);

    /* Nothing more happened: the wait ended without an UpdateSet. */
    version_of("wait_leave", version, sizeof(version));
    expect_req("wait_timeout", vim_req_wait_for_updates_ex(&pc, version, 1, 0, &buf, &len), &buf,
               &len);
    memset(&us, 'x', sizeof(us));
    rec = updates("wait_timeout", &r, &us);
    assert_int_equal(r, 0);
    assert_int_equal(rec->calls, 0);
    assert_int_equal(us.version[0], 'x');
    free(rec);

    /* A finished task cannot be canceled. */
    expect_req("fault_invalid_state", vim_req_cancel_task(&task, &buf, &len), &buf, &len);
    expect_fault("fault_invalid_state", "InvalidState");
}

/* ---- Decoder bounds ---- */

#define ENV_OPEN                                                                                   \
    "<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" "               \
    "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "                                     \
    "xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\"><soapenv:Body>"
#define ENV_CLOSE "</soapenv:Body></soapenv:Envelope>"
#define WAIT_OPEN ENV_OPEN "<WaitForUpdatesExResponse xmlns=\"urn:vim25\"><returnval>"
#define WAIT_CLOSE "</returnval></WaitForUpdatesExResponse>" ENV_CLOSE
#define FILTER_OPEN "<filterSet><filter type=\"PropertyFilter\">f1</filter>"

static soap_resp *parse_str(const char *doc)
{
    soap_resp *resp = NULL;
    assert_int_equal(soap_parse(doc, strlen(doc), MAX_RESP, &resp, NULL), 0);
    return resp;
}

static int decode_str(const char *doc, struct rec *rec, struct vim_update_set *us)
{
    soap_resp *resp = parse_str(doc);
    int r = vim_decode_update_set(resp, record_cb, rec, us);
    soap_resp_free(resp);
    return r;
}

/* An object with more changes than one call carries comes in batches, the
 * later ones as modify, and nothing is lost. */
static void test_changes_in_batches(void **state)
{
    char doc[16384];
    size_t n = 0;
    struct rec *rec = calloc(1, sizeof(*rec));
    struct vim_update_set us;

    (void)state;
    assert_non_null(rec);
    n += (size_t)snprintf(doc + n, sizeof(doc) - n,
                          WAIT_OPEN "<version>7</version>" FILTER_OPEN
                                    "<objectSet><kind>enter</kind><obj "
                                    "type=\"VirtualMachine\">vm-1</obj>");
    for (int i = 0; i < 2 * VIM_CHANGES_PER_CALL + 1; i++)
        n += (size_t)snprintf(doc + n, sizeof(doc) - n,
                              "<changeSet><name>p%d</name><op>assign</op><val "
                              "xsi:type=\"xsd:int\">%d</val></changeSet>",
                              i, i);
    n += (size_t)snprintf(doc + n, sizeof(doc) - n,
                          "</objectSet></filterSet><truncated>true</truncated>" WAIT_CLOSE);
    assert_true(n < sizeof(doc));
    assert_int_equal(decode_str(doc, rec, &us), 1);
    assert_string_equal(us.version, "7");
    assert_true(us.truncated);
    assert_int_equal(rec->n, 3);
    assert_int_equal(rec->obj[0].kind, VIM_ENTER);
    assert_int_equal(rec->obj[1].kind, VIM_MODIFY);
    assert_int_equal(rec->obj[2].kind, VIM_MODIFY);
    assert_int_equal(rec->obj[0].n, VIM_CHANGES_PER_CALL);
    assert_int_equal(rec->obj[1].n, VIM_CHANGES_PER_CALL);
    assert_int_equal(rec->obj[2].n, 1);
    assert_int_equal(rec->obj[2].ch[0].num, 2 * VIM_CHANGES_PER_CALL);
    assert_ref(&rec->obj[2].filter, "PropertyFilter", "f1");

    /* A callback's error stops the walk and comes back; no version. */
    memset(rec, 0, sizeof(*rec));
    rec->fail_at = 2;
    memset(&us, 'x', sizeof(us));
    assert_int_equal(decode_str(doc, rec, &us), -ECANCELED);
    assert_int_equal(rec->calls, 2);
    assert_int_equal(us.version[0], 'x');
    free(rec);
}

static void test_change_kinds(void **state)
{
    struct rec *rec = calloc(1, sizeof(*rec));
    struct vim_update_set us;
    struct rec_obj *o;

    (void)state;
    assert_non_null(rec);
    assert_int_equal(
        decode_str(WAIT_OPEN
                   "<version>8</version>" FILTER_OPEN
                   "<objectSet><kind>modify</kind><obj type=\"Folder\">group-1</obj>"
                   "<changeSet><name>a</name><op>remove</op></changeSet>"
                   "<changeSet><name>b</name><op>indirectRemove</op></changeSet>"
                   "<changeSet><name>c</name><op>add</op><val xsi:type=\"xsd:long\">"
                   "-5000000000</val></changeSet>"
                   "<changeSet><name>d</name><op>assign</op><val>untyped</val></changeSet>"
                   "<changeSet><name>e</name><op>assign</op><val xsi:type=\"VirtualHardware\">"
                   "<numCPU>1</numCPU></val></changeSet>"
                   "<changeSet><name>f</name><op>assign</op><val xsi:type=\"xsd:dateTime\">"
                   "2024-01-01T00:00:00Z</val></changeSet>"
                   "<changeSet><name>g</name><op>assign</op><val xsi:type=\"xsd:boolean\">"
                   "1</val></changeSet>"
                   "</objectSet><objectSet><kind>leave</kind><obj type=\"Folder\">group-2</obj>"
                   "</objectSet></filterSet>" WAIT_CLOSE,
                   rec, &us),
        1);
    assert_false(us.truncated);
    assert_int_equal(rec->n, 2);
    o = &rec->obj[0];
    assert_int_equal(o->kind, VIM_MODIFY);
    assert_int_equal(o->ch[0].op, VIM_OP_REMOVE);
    assert_int_equal(o->ch[0].kind, VIM_VAL_NONE);
    assert_int_equal(o->ch[1].op, VIM_OP_INDIRECT_REMOVE);
    assert_int_equal(o->ch[2].op, VIM_OP_ADD);
    assert_int_equal(o->ch[2].kind, VIM_VAL_INT);
    assert_int_equal(o->ch[2].num, -5000000000LL);
    assert_int_equal(o->ch[3].kind, VIM_VAL_STRING);
    assert_string_equal(o->ch[3].str, "untyped");
    assert_int_equal(o->ch[4].kind, VIM_VAL_OTHER);
    assert_string_equal(o->ch[4].xsi_type, "VirtualHardware");
    assert_int_equal(o->ch[5].kind, VIM_VAL_ENUM);
    assert_string_equal(o->ch[5].str, "2024-01-01T00:00:00Z");
    assert_int_equal(o->ch[6].kind, VIM_VAL_BOOL);
    assert_true(o->ch[6].b);
    assert_int_equal(rec->obj[1].kind, VIM_LEAVE);
    free(rec);
}

/* Anything malformed is refused before a single callback runs for it. */
static void test_malformed_update_sets(void **state)
{
    static const char *docs[] = {
        /* no version */
        WAIT_OPEN FILTER_OPEN "</filterSet>" WAIT_CLOSE,
        /* unknown kind */
        WAIT_OPEN "<version>1</version>" FILTER_OPEN
                  "<objectSet><kind>explode</kind><obj type=\"A\">a</obj></objectSet>"
                  "</filterSet>" WAIT_CLOSE,
        /* obj without type */
        WAIT_OPEN "<version>1</version>" FILTER_OPEN
                  "<objectSet><kind>enter</kind><obj>a</obj></objectSet></filterSet>" WAIT_CLOSE,
        /* filter without a moref */
        WAIT_OPEN "<version>1</version><filterSet><objectSet><kind>enter</kind>"
                  "<obj type=\"A\">a</obj></objectSet></filterSet>" WAIT_CLOSE,
        /* unknown op */
        WAIT_OPEN "<version>1</version>" FILTER_OPEN
                  "<objectSet><kind>enter</kind><obj type=\"A\">a</obj><changeSet><name>n</name>"
                  "<op>zap</op></changeSet></objectSet></filterSet>" WAIT_CLOSE,
        /* change without a name */
        WAIT_OPEN "<version>1</version>" FILTER_OPEN
                  "<objectSet><kind>enter</kind><obj type=\"A\">a</obj><changeSet>"
                  "<op>assign</op></changeSet></objectSet></filterSet>" WAIT_CLOSE,
        /* an int that is not one */
        WAIT_OPEN "<version>1</version>" FILTER_OPEN
                  "<objectSet><kind>enter</kind><obj type=\"A\">a</obj><changeSet><name>n</name>"
                  "<op>assign</op><val xsi:type=\"xsd:int\">x</val></changeSet></objectSet>"
                  "</filterSet>" WAIT_CLOSE,
        /* a moref value without type */
        WAIT_OPEN "<version>1</version>" FILTER_OPEN
                  "<objectSet><kind>enter</kind><obj type=\"A\">a</obj><changeSet><name>n</name>"
                  "<op>assign</op><val xsi:type=\"ManagedObjectReference\">x</val></changeSet>"
                  "</objectSet></filterSet>" WAIT_CLOSE,
        /* a fault without its fault */
        WAIT_OPEN "<version>1</version>" FILTER_OPEN
                  "<objectSet><kind>enter</kind><obj type=\"A\">a</obj><changeSet><name>n</name>"
                  "<op>assign</op><val xsi:type=\"LocalizedMethodFault\"><localizedMessage>x"
                  "</localizedMessage></val></changeSet></objectSet></filterSet>" WAIT_CLOSE,
        /* a string that is structured */
        WAIT_OPEN "<version>1</version>" FILTER_OPEN
                  "<objectSet><kind>enter</kind><obj type=\"A\">a</obj><changeSet><name>n</name>"
                  "<op>assign</op><val xsi:type=\"xsd:string\"><b/></val></changeSet>"
                  "</objectSet></filterSet>" WAIT_CLOSE,
        /* truncated not a boolean */
        WAIT_OPEN "<version>1</version><truncated>maybe</truncated>" WAIT_CLOSE,
        /* a moref value too long to keep */
        WAIT_OPEN "<version>1</version>" FILTER_OPEN "<objectSet><kind>enter</kind><obj type=\"A\">"
                  "0123456789012345678901234567890123456789012345678901234567890123456789"
                  "0123456789012345678901234567890123456789012345678901234567890123456789"
                  "</obj></objectSet></filterSet>" WAIT_CLOSE,
    };
    struct vim_update_set us;

    (void)state;
    /* A good object followed by a bad one: still nothing delivered. */
    struct rec *rec0 = calloc(1, sizeof(*rec0));
    assert_non_null(rec0);
    assert_int_equal(decode_str(WAIT_OPEN "<version>1</version>" FILTER_OPEN
                                          "<objectSet><kind>enter</kind><obj type=\"A\">a</obj>"
                                          "</objectSet><objectSet><kind>enter</kind><obj>b</obj>"
                                          "</objectSet></filterSet>" WAIT_CLOSE,
                                rec0, &us),
                     VMG_EPARSE);
    assert_int_equal(rec0->calls, 0);
    free(rec0);
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        struct rec *rec = calloc(1, sizeof(*rec));
        assert_non_null(rec);
        int r = decode_str(docs[i], rec, &us);
        if (r != VMG_EPARSE)
            fail_msg("document %zu: %d", i, r);
        assert_int_equal(rec->calls, 0);
        free(rec);
    }
}

static void test_decoders_refuse_other_responses(void **state)
{
    struct vim_service_content sc;
    struct vim_user_session us;
    struct vim_moref ref;
    struct vim_update_set set;
    char token[8];
    soap_resp *login = resp_of("login"), *sc_resp = resp_of("service_content");
    soap_resp *ret = resp_of("retrieve_properties");

    (void)state;
    assert_int_equal(vim_decode_service_content(login, &sc), VMG_EPARSE);
    assert_int_equal(vim_decode_user_session(sc_resp, &us), VMG_EPARSE);
    assert_int_equal(vim_decode_moref(login, &ref), VMG_EPARSE);
    assert_int_equal(vim_decode_update_set(login, record_cb, NULL, &set), VMG_EPARSE);
    assert_int_equal(vim_decode_update_set(NULL, record_cb, NULL, &set), -EINVAL);
    /* A token too long for the buffer. */
    soap_resp *tok = parse_str(ENV_OPEN "<RetrievePropertiesExResponse xmlns=\"urn:vim25\">"
                                        "<returnval><token>123456789</token></returnval>"
                                        "</RetrievePropertiesExResponse>" ENV_CLOSE);
    assert_int_equal(vim_decode_retrieve_result(tok, record_cb, NULL, token, sizeof(token)),
                     VMG_ETOOBIG);
    soap_resp_free(tok);
    assert_int_equal(vim_decode_retrieve_result(ret, record_cb, NULL, token, 0), -EINVAL);
    soap_resp_free(login);
    soap_resp_free(sc_resp);
    soap_resp_free(ret);
}

/* ---- Builder arguments ---- */

static void test_builders_check_arguments(void **state)
{
    struct vim_moref vm, empty, pool;
    struct vim_option bad_key[] = {{"", "v", false}};
    struct vim_option bad_val[] = {{"k", "\x01", false}};
    struct vim_config cfg = {.num_cpus = 1, .memory_mb = 1024};
    char *buf = NULL;
    size_t len = 0;

    (void)state;
    memset(&empty, 0, sizeof(empty));
    assert_int_equal(vim_moref_set(&vm, "VirtualMachine", "vm-1"), 0);
    assert_int_equal(vim_moref_set(&pool, "ResourcePool", "resgroup-1"), 0);
    assert_int_equal(vim_moref_set(&vm, "", "x"), -EINVAL);
    assert_int_equal(vim_moref_set(&vm, "T",
                                   "0123456789012345678901234567890123456789012345678901234567890"
                                   "123456789012345678901234567890123456789012345678901234567890"
                                   "12345678"),
                     -EINVAL);
    assert_ref(&vm, "VirtualMachine", "vm-1");

    assert_int_equal(vim_req_power_on(&empty, &buf, &len), -EINVAL);
    assert_int_equal(vim_req_power_on(NULL, &buf, &len), -EINVAL);
    assert_int_equal(vim_req_power_on(&vm, NULL, &len), -EINVAL);
    assert_int_equal(vim_req_login(&vm, "", "pw", &buf, &len), -EINVAL);
    assert_int_equal(vim_req_login(&vm, "u", NULL, &buf, &len), -EINVAL);
    assert_int_equal(vim_req_login(&vm, "u", "bad\x01", &buf, &len), -EINVAL);
    assert_int_equal(vim_req_find_by_inventory_path(&vm, "", &buf, &len), -EINVAL);
    assert_int_equal(vim_req_create_folder(&vm, "bad\xff", &buf, &len), -EINVAL);
    assert_int_equal(vim_req_clone_vm(&vm, &vm, "", &pool, NULL, &cfg, &buf, &len), -EINVAL);
    assert_int_equal(vim_req_clone_vm(&vm, &vm, "x", &empty, NULL, &cfg, &buf, &len), -EINVAL);
    assert_int_equal(vim_req_clone_vm(&vm, &vm, "x", &pool, &empty, &cfg, &buf, &len), -EINVAL);
    cfg.extra_config = bad_key;
    cfg.n_extra = 1;
    assert_int_equal(vim_req_clone_vm(&vm, &vm, "x", &pool, NULL, &cfg, &buf, &len), -EINVAL);
    cfg.extra_config = bad_val;
    assert_int_equal(vim_req_reconfigure(&vm, &cfg, &buf, &len), -EINVAL);
    cfg.extra_config = NULL;
    assert_int_equal(vim_req_reconfigure(&vm, &cfg, &buf, &len), -EINVAL);
    cfg.n_extra = 0;
    cfg.num_cpus = -1;
    assert_int_equal(vim_req_reconfigure(&vm, &cfg, &buf, &len), -EINVAL);
    assert_int_equal(vim_req_reconfigure(&vm, NULL, &buf, &len), -EINVAL);
    assert_int_equal(vim_req_continue_retrieve_properties_ex(&vm, "", &buf, &len), -EINVAL);
    const char *const bad_types[] = {"VirtualMachine", ""};
    assert_int_equal(vim_req_create_container_view(&vm, &vm, bad_types, 2, true, &buf, &len),
                     -EINVAL);
    assert_int_equal(vim_req_retrieve_properties_ex(&vm, &vm, bad_types, 2, 0, &buf, &len),
                     -EINVAL);
    assert_null(buf);
    assert_int_equal(len, 0);
}

static int count_of(const char *s, const char *what)
{
    int n = 0;

    for (const char *p = s; (p = strstr(p, what)) != NULL; p++)
        n++;
    return n;
}

/* ListView requests: an empty view, tasks added and removed; an invalid
 * reference anywhere refuses the whole request; a long list is whole. */
static void test_list_view_requests(void **state)
{
    enum { HUGE_N = 5000 };
    struct vim_moref vmgr, view, empty, t[3];
    struct vim_moref *many = calloc(HUGE_N, sizeof(*many));
    char *buf = NULL;
    size_t len = 0;

    (void)state;
    assert_non_null(many);
    memset(&empty, 0, sizeof(empty));
    vim_moref_set(&vmgr, "ViewManager", "ViewManager");
    vim_moref_set(&view, "ListView", "session[1]list-1");
    vim_moref_set(&t[0], "Task", "task-1");
    vim_moref_set(&t[1], "Task", "task-2");
    vim_moref_set(&t[2], "Task", "task-3");

    assert_int_equal(vim_req_create_list_view(&vmgr, NULL, 0, &buf, &len), 0);
    assert_non_null(strstr(buf, "<CreateListView><_this type=\"ViewManager\">"
                                "ViewManager</_this></CreateListView>"));
    soap_buf_free(buf, len);
    assert_int_equal(vim_req_create_list_view(&vmgr, t, 2, &buf, &len), 0);
    assert_non_null(strstr(buf, "<obj type=\"Task\">task-1</obj><obj type=\"Task\">task-2</obj>"));
    soap_buf_free(buf, len);

    assert_int_equal(vim_req_modify_list_view(&view, t, 2, &t[2], 1, &buf, &len), 0);
    assert_non_null(strstr(buf, "<_this type=\"ListView\">session[1]list-1</_this>"
                                "<add type=\"Task\">task-1</add><add type=\"Task\">task-2</add>"
                                "<remove type=\"Task\">task-3</remove>"));
    soap_buf_free(buf, len);
    assert_int_equal(vim_req_modify_list_view(&view, NULL, 0, t, 1, &buf, &len), 0);
    assert_null(strstr(buf, "<add"));
    assert_non_null(strstr(buf, "<remove type=\"Task\">task-1</remove>"));
    soap_buf_free(buf, len);
    buf = NULL;
    len = 0;

    /* Refused: an invalid reference (the view, one added or removed, the
     * view manager), a count without a list. */
    t[1] = empty;
    assert_int_equal(vim_req_modify_list_view(&view, t, 2, NULL, 0, &buf, &len), -EINVAL);
    assert_int_equal(vim_req_modify_list_view(&view, NULL, 0, t, 2, &buf, &len), -EINVAL);
    assert_int_equal(vim_req_modify_list_view(&empty, t, 1, NULL, 0, &buf, &len), -EINVAL);
    assert_int_equal(vim_req_modify_list_view(&view, NULL, 1, NULL, 0, &buf, &len), -EINVAL);
    assert_int_equal(vim_req_modify_list_view(&view, NULL, 0, NULL, 1, &buf, &len), -EINVAL);
    assert_int_equal(vim_req_modify_list_view(NULL, t, 1, NULL, 0, &buf, &len), -EINVAL);
    assert_int_equal(vim_req_modify_list_view(&view, t, 1, NULL, 0, NULL, &len), -EINVAL);
    assert_int_equal(vim_req_create_list_view(&vmgr, t, 2, &buf, &len), -EINVAL);
    assert_int_equal(vim_req_create_list_view(&empty, NULL, 0, &buf, &len), -EINVAL);
    assert_int_equal(vim_req_create_list_view(&vmgr, NULL, 1, &buf, &len), -EINVAL);
    assert_null(buf);
    assert_int_equal(len, 0);

    for (int i = 0; i < HUGE_N; i++) {
        char v[24];
        snprintf(v, sizeof(v), "task-%d", i);
        assert_int_equal(vim_moref_set(&many[i], "Task", v), 0);
    }
    assert_int_equal(vim_req_modify_list_view(&view, many, HUGE_N, many, HUGE_N, &buf, &len), 0);
    assert_int_equal(count_of(buf, "<add type=\"Task\">"), HUGE_N);
    assert_int_equal(count_of(buf, "<remove type=\"Task\">"), HUGE_N);
    assert_non_null(strstr(buf, "<add type=\"Task\">task-4999</add>"));
    soap_buf_free(buf, len);
    assert_int_equal(vim_req_create_list_view(&vmgr, many, HUGE_N, &buf, &len), 0);
    assert_int_equal(count_of(buf, "<obj type=\"Task\">"), HUGE_N);
    soap_buf_free(buf, len);
    free(many);
}

struct morefs_rec {
    int n;
    char last[256];
    int fail_at; /* cb returns -EIO at this call (1-based), 0: never */
};

static int morefs_cb(void *arg, const struct vim_moref *ref)
{
    struct morefs_rec *m = arg;

    m->n++;
    snprintf(m->last, sizeof(m->last), "%s:%s", ref->type, ref->value);
    return m->n == m->fail_at ? -EIO : 0;
}

#define MODIFY_OPEN ENV_OPEN "<ModifyListViewResponse xmlns=\"urn:vim25\">"
#define MODIFY_CLOSE "</ModifyListViewResponse>" ENV_CLOSE

static int morefs_str(const char *doc, struct morefs_rec *m)
{
    soap_resp *resp = parse_str(doc);
    int r = vim_decode_morefs(resp, morefs_cb, m);

    soap_resp_free(resp);
    return r;
}

/* ModifyListView's objects not found: none, some; a malformed entry
 * anywhere refuses the whole list before cb sees any; a long list. */
static void test_decode_morefs(void **state)
{
    enum { HUGE_N = 5000 };
    static const char *const bad[] = {
        MODIFY_OPEN "<returnval>task-1</returnval>" MODIFY_CLOSE, /* no type */
        MODIFY_OPEN "<returnval type=\"Task\"></returnval>" MODIFY_CLOSE,
        MODIFY_OPEN "<returnval type=\"\">task-1</returnval>" MODIFY_CLOSE,
        MODIFY_OPEN "<returnval type=\"Task\">task-1</returnval>"
                    "<returnval type=\"Task\"><x>task-2</x></returnval>" MODIFY_CLOSE,
        MODIFY_OPEN "<returnval type=\"Task\">task-1</returnval><returnval type=\"Task\">"
                    "0123456789012345678901234567890123456789012345678901234567890123456789"
                    "0123456789012345678901234567890123456789012345678901234567890123456789"
                    "</returnval>" MODIFY_CLOSE,
    };
    struct morefs_rec m = {0};
    char *doc;
    size_t n = 0, size = 64 + (size_t)HUGE_N * 64;

    (void)state;
    assert_int_equal(morefs_str(MODIFY_OPEN MODIFY_CLOSE, &m), 0);
    assert_int_equal(morefs_str(MODIFY_OPEN
                                "<returnval type=\"Task\">task-1</returnval>"
                                "<returnval type=\"Task\">task-9</returnval>" MODIFY_CLOSE,
                                &m),
                     2);
    assert_int_equal(m.n, 2);
    assert_string_equal(m.last, "Task:task-9");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&m, 0, sizeof(m));
        assert_int_equal(morefs_str(bad[i], &m), VMG_EPARSE);
        assert_int_equal(m.n, 0);
    }
    memset(&m, 0, sizeof(m));
    m.fail_at = 1;
    assert_int_equal(morefs_str(MODIFY_OPEN
                                "<returnval type=\"Task\">task-1</returnval>"
                                "<returnval type=\"Task\">task-2</returnval>" MODIFY_CLOSE,
                                &m),
                     -EIO);
    assert_int_equal(m.n, 1);
    assert_int_equal(vim_decode_morefs(NULL, morefs_cb, &m), VMG_EPARSE);

    doc = malloc(size);
    assert_non_null(doc);
    n += (size_t)snprintf(doc + n, size - n, "%s", MODIFY_OPEN);
    for (int i = 0; i < HUGE_N; i++)
        n += (size_t)snprintf(doc + n, size - n, "<returnval type=\"Task\">task-%d</returnval>", i);
    n += (size_t)snprintf(doc + n, size - n, "%s", MODIFY_CLOSE);
    assert_true(n < size);
    memset(&m, 0, sizeof(m));
    assert_int_equal(morefs_str(doc, &m), HUGE_N);
    assert_string_equal(m.last, "Task:task-4999");
    free(doc);
}

/* The optional parts of requests: a clone without config, a reconfigure of
 * the size only, a retrieve of all properties, paging. */
static void test_builder_options(void **state)
{
    struct vim_moref vm, folder, pool, pc;
    struct vim_config size = {.num_cpus = 3, .memory_mb = 0};
    char *buf = NULL;
    size_t len = 0;

    (void)state;
    vim_moref_set(&vm, "VirtualMachine", "vm-1");
    vim_moref_set(&folder, "Folder", "group-1");
    vim_moref_set(&pool, "ResourcePool", "resgroup-1");
    vim_moref_set(&pc, "PropertyCollector", "propertyCollector");
    assert_int_equal(vim_req_clone_vm(&vm, &folder, "x", &pool, NULL, NULL, &buf, &len), 0);
    assert_non_null(strstr(buf, "<spec><location><pool type=\"ResourcePool\">resgroup-1</pool>"
                                "</location><template>false</template><powerOn>true</powerOn>"
                                "</spec>"));
    soap_buf_free(buf, len);
    assert_int_equal(vim_req_reconfigure(&vm, &size, &buf, &len), 0);
    assert_non_null(strstr(buf, "<spec xsi:type=\"VirtualMachineConfigSpec\"><numCPUs>3</numCPUs>"
                                "</spec>"));
    soap_buf_free(buf, len);
    assert_int_equal(vim_req_retrieve_properties_ex(&pc, &vm, NULL, 0, 100, &buf, &len), 0);
    assert_non_null(strstr(buf, "<propSet><type>VirtualMachine</type><all>true</all></propSet>"));
    assert_non_null(strstr(buf, "<options><maxObjects>100</maxObjects></options>"));
    soap_buf_free(buf, len);
    assert_int_equal(vim_req_continue_retrieve_properties_ex(&pc, "tok<1>", &buf, &len), 0);
    assert_non_null(strstr(buf, "<token>tok&lt;1&gt;</token>"));
    soap_buf_free(buf, len);
    assert_int_equal(vim_req_wait_for_updates_ex(&pc, "12", -1, 500, &buf, &len), 0);
    assert_non_null(strstr(buf, "<version>12</version><options><maxObjectUpdates>500"
                                "</maxObjectUpdates></options>"));
    soap_buf_free(buf, len);
}

/* A watch reads of a VM's extraConfig only the marks' entries, never the
 * whole (a guest's user data would come back with every update); a key
 * that cannot be indexed keeps the whole. */
static void test_vm_paths_with_marks(void **state)
{
    const char *keys[VIM_MARKS] = {"vm.example/uid", "vm.example/template", NULL};
    const char *three[VIM_MARKS] = {"vm.example/uid", "vm.example/template", "vm.example/iu"};
    const char *odd[VIM_MARKS] = {"vm.example/uid", NULL, "bad\"key"};
    const char *none[VIM_MARKS] = {"", NULL, ""};
    char marks[VIM_MARKS][VIM_MARK_PATH_MAX];
    const char *paths[16];
    size_t n, i;
    bool whole = false;

    (void)state;
    n = vim_vm_paths_with_marks(keys, marks, paths, 16);
    assert_int_equal(n, vim_vm_paths_n + 1);
    for (i = 0; i < n; i++)
        whole |= strcmp(paths[i], "config.extraConfig") == 0;
    assert_false(whole);
    assert_string_equal(paths[n - 2], "config.extraConfig[\"vm.example/uid\"]");
    assert_string_equal(paths[n - 1], "config.extraConfig[\"vm.example/template\"]");
    n = vim_vm_paths_with_marks(three, marks, paths, 16);
    assert_int_equal(n, vim_vm_paths_n + 2);
    assert_string_equal(paths[n - 3], "config.extraConfig[\"vm.example/uid\"]");
    assert_string_equal(paths[n - 1], "config.extraConfig[\"vm.example/iu\"]");
    assert_string_equal(paths[0], "name");

    n = vim_vm_paths_with_marks(odd, marks, paths, 16);
    assert_int_equal(n, vim_vm_paths_n);
    assert_string_equal(paths[n - 1], "config.extraConfig");

    n = vim_vm_paths_with_marks(none, marks, paths, 16); /* no marks: no extraConfig */
    assert_int_equal(n, vim_vm_paths_n - 1);
    for (i = 0; i < n; i++)
        assert_null(strstr(paths[i], "extraConfig"));
    assert_int_equal(vim_vm_paths_with_marks(keys, marks, paths, 3), 3); /* room bounds it */
}

/* A read of one VM asks what the watch does and guest.net, which the watch
 * does not (read, not watched: it is large); the request carries it. */
static void test_vm_read_paths(void **state)
{
    const char *keys[VIM_MARKS] = {"vm.example/uid", "vm.example/template", NULL};
    char marks[VIM_MARKS][VIM_MARK_PATH_MAX];
    const char *paths[17];
    struct vim_moref pc, vm;
    char *buf = NULL;
    size_t n, len = 0;

    (void)state;
    for (size_t i = 0; i < vim_vm_paths_n; i++)
        assert_string_not_equal(vim_vm_paths[i], "guest.net");
    n = vim_vm_read_paths(keys, marks, paths, 17);
    assert_int_equal(n, vim_vm_paths_n + 2);
    assert_string_equal(paths[n - 1], "guest.net");
    assert_string_equal(paths[n - 2], "config.extraConfig[\"vm.example/template\"]");
    for (size_t i = 0; i + 1 < n; i++)
        assert_string_not_equal(paths[i], "guest.net");
    assert_int_equal(vim_vm_read_paths(keys, marks, paths, 3), 3); /* room bounds it */
    assert_string_equal(paths[2], "guest.net");
    assert_int_equal(vim_vm_read_paths(keys, marks, paths, 0), 0);

    n = vim_vm_read_paths(keys, marks, paths, 17);
    assert_int_equal(vim_moref_set(&pc, "PropertyCollector", "propertyCollector"), 0);
    assert_int_equal(vim_moref_set(&vm, "VirtualMachine", "vm-42"), 0);
    assert_int_equal(vim_req_retrieve_properties_ex(&pc, &vm, paths, n, 0, &buf, &len), 0);
    assert_non_null(strstr(buf, "<pathSet>guest.ipAddress</pathSet>"));
    assert_non_null(strstr(buf, "<pathSet>guest.net</pathSet>"));
    soap_buf_free(buf, len);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_service_content),
        cmocka_unit_test(test_login_logout),
        cmocka_unit_test(test_find_by_inventory_path),
        cmocka_unit_test(test_folders_and_faults),
        cmocka_unit_test(test_collectors_views_filters),
        cmocka_unit_test(test_wait_initial),
        cmocka_unit_test(test_wait_truncated),
        cmocka_unit_test(test_retrieve_properties),
        cmocka_unit_test(test_clone),
        cmocka_unit_test(test_clone_instance_uuid),
        cmocka_unit_test(test_clone_duplicate_name),
        cmocka_unit_test(test_power_and_task_error),
        cmocka_unit_test(test_reconfigure),
        cmocka_unit_test(test_destroy_and_leave),
        cmocka_unit_test(test_changes_in_batches),
        cmocka_unit_test(test_change_kinds),
        cmocka_unit_test(test_malformed_update_sets),
        cmocka_unit_test(test_decoders_refuse_other_responses),
        cmocka_unit_test(test_builders_check_arguments),
        cmocka_unit_test(test_builder_options),
        cmocka_unit_test(test_list_view_requests),
        cmocka_unit_test(test_decode_morefs),
        cmocka_unit_test(test_vm_paths_with_marks),
        cmocka_unit_test(test_vm_read_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
