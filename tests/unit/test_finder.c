/* test_finder.c: finding the VM template a user names, against a fake
 * vCenter (lib/server over TLS on the same loop) that holds a small
 * inventory tree and answers FindChild, CreateContainerView and
 * RetrievePropertiesEx (paged) from it, the way vCenter does.
 *
 * The rule under test: a template is a VirtualMachine whose config.template
 * is true, found in the datacenter's VM folder tree and outside the
 * excluded folder (the operator's, where the groups' VMs live); a path is
 * confined to the datacenter's VM folder; anything else is refused with a
 * sentence that says what was found and why. vs_template_choose, the pure
 * decision over a listing, is tested by a table of its own. */
#include "tests/unit/unit.h"
#include "tests/unit/vcenter.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <uv.h>

#include "lib/err.h"
#include "lib/http.h"
#include "lib/server.h"
#include "lib/tlsgen.h"
#include "vsphere/finder.h"

#define PAGE 4 /* objects in one page of a listing */

/* ---- The inventory ---- */

struct obj {
    const char *type, *value, *name, *parent;
    bool tmpl;
};

/* /DC0/vm holds templates and plain VMs, in folders or not; vm-operator is
 * the operator's folder with a group's folder in it, and templates put
 * there; DC1 is another datacenter. Folders come after some of their VMs,
 * as a listing may send them. */
static const struct obj inv[] = {
    {"Datacenter", "datacenter-2", "DC0", "group-d1", false},
    {"Folder", "group-3", "vm", "datacenter-2", false},
    {"Folder", "group-4", "host", "datacenter-2", false},
    {"VirtualMachine", "vm-10", "tmpl", "group-3", true},
    {"VirtualMachine", "vm-11", "plain", "group-3", false},
    {"VirtualMachine", "vm-21", "deep", "group-20", true},
    {"VirtualMachine", "vm-22", "plain-deep", "group-20", false},
    {"Folder", "group-20", "lib", "group-3", false},
    {"Folder", "group-38", "vm-operator", "group-3", false},
    {"VirtualMachine", "vm-39", "in-root", "group-38", true},
    {"Folder", "group-41", "ns_web", "group-38", false},
    {"VirtualMachine", "vm-42", "web-0", "group-41", false},
    {"VirtualMachine", "vm-43", "stolen", "group-41", true},
    {"VirtualMachine", "vm-44", "deep", "group-41", true}, /* lib/deep's namesake, inside */
    {"Folder", "group-50", "a", "group-3", false},
    {"VirtualMachine", "vm-51", "twin", "group-50", true},
    {"Folder", "group-60", "b", "group-3", false},
    {"VirtualMachine", "vm-61", "twin", "group-60", true},
    {"VirtualMachine", "vm-62", "tmpl", "group-60", false}, /* a plain namesake of tmpl */
    {"Datacenter", "datacenter-100", "DC1", "group-d1", false},
    {"Folder", "group-101", "vm", "datacenter-100", false},
    {"VirtualMachine", "vm-102", "other-dc", "group-101", true},
};
#define NINV (sizeof(inv) / sizeof(inv[0]))

static const struct vim_moref vm_folder = {"Folder", "group-3"};
static const struct vim_moref root_folder = {"Folder", "group-38"};
#define LABEL "the operator's folder /DC0/vm/vm-operator"

static const struct obj *obj_by_value(const char *value)
{
    for (size_t i = 0; i < NINV; i++)
        if (strcmp(inv[i].value, value) == 0)
            return &inv[i];
    return NULL;
}

static bool below(const struct obj *o, const char *container)
{
    for (int depth = 0; o && depth < 16; depth++) {
        if (strcmp(o->parent, container) == 0)
            return true;
        o = obj_by_value(o->parent);
    }
    return false;
}

/* ---- The fake vCenter ---- */

struct fake {
    uv_loop_t loop;
    struct unit_vcenter vc; /* the fake vCenter and the client */
    vs_session *s;
    uv_timer_t guard;
    bool timed_out;
    char view_container[32];
    struct unit_calls calls;
    /* the lookup's outcome */
    bool done;
    int err;
    char msg[512];
    char ref[VS_REF_MAX];
};

static void reply_not_found(vmg_server_req *r)
{
    unit_soap_reply(r, 500,
                    "<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>not found"
                    "</faultstring><detail><ManagedObjectNotFoundFault xmlns=\"urn:vim25\" "
                    "xsi:type=\"ManagedObjectNotFound\"></ManagedObjectNotFoundFault></detail>"
                    "</soapenv:Fault>");
}

/* ref_value reads the value of the moref element tag ("<tag type=...>v</tag>"). */
static const char *ref_value(const char *body, const char *tag, char *buf, size_t size)
{
    char open[64], close[64], both[128];
    const char *gt;

    snprintf(open, sizeof(open), "<%s type=\"", tag);
    snprintf(close, sizeof(close), "</%s>", tag);
    unit_between(body, open, close, both, sizeof(both));
    gt = strchr(both, '>');
    snprintf(buf, size, "%s", gt ? gt + 1 : "");
    return buf;
}

/* obj_xml writes the properties of o a listing or a read returns. */
static int obj_xml(char *buf, size_t size, const struct obj *o)
{
    int n = snprintf(buf, size,
                     "<objects><obj type=\"%s\">%s</obj><propSet><name>name</name>"
                     "<val xsi:type=\"xsd:string\">%s</val></propSet><propSet><name>parent</name>"
                     "<val type=\"%s\" xsi:type=\"ManagedObjectReference\">%s</val></propSet>",
                     o->type, o->value, o->name,
                     obj_by_value(o->parent) ? obj_by_value(o->parent)->type : "Folder", o->parent);
    if (strcmp(o->type, "VirtualMachine") == 0)
        n += snprintf(buf + n, size - (size_t)n,
                      "<propSet><name>config.template</name><val xsi:type=\"xsd:boolean\">%s</val>"
                      "</propSet>",
                      o->tmpl ? "true" : "false");
    n += snprintf(buf + n, size - (size_t)n, "</objects>");
    return n;
}

/* list_page answers one page of the view's listing, from object from on. */
static void list_page(struct fake *f, vmg_server_req *r, size_t from)
{
    char objs[12000] = "", token[64] = "";
    int n = 0, count = 0;
    size_t i;

    for (i = from; i < NINV && count < PAGE; i++) {
        const struct obj *o = &inv[i];
        if ((strcmp(o->type, "VirtualMachine") != 0 && strcmp(o->type, "Folder") != 0) ||
            !below(o, f->view_container))
            continue;
        n += obj_xml(objs + n, sizeof(objs) - (size_t)n, o);
        count++;
    }
    if (i < NINV)
        snprintf(token, sizeof(token), "<token>tok-%zu</token>", i);
    unit_soap_reply(r, 200,
                    "<RetrievePropertiesExResponse xmlns=\"urn:vim25\"><returnval>%s%s</returnval>"
                    "</RetrievePropertiesExResponse>",
                    token, objs);
}

static void handler(void *data, vmg_server_req *r)
{
    struct fake *f = data;
    size_t len;
    const char *body = vmg_server_req_body(r, &len);
    char a[128], b[128], objs[4096];

    if (unit_soap_session(r, body))
        return;
    if (strstr(body, "<FindByInventoryPath>")) {
        unit_calls_add(&f->calls, "FindByInventoryPath",
                       unit_between(body, "<inventoryPath>", "<", a, sizeof(a)));
        unit_soap_reply(
            r, 200,
            "<FindByInventoryPathResponse xmlns=\"urn:vim25\"></FindByInventoryPathResponse>");
    } else if (strstr(body, "<FindChild>")) {
        const struct obj *hit = NULL;

        ref_value(body, "entity", a, sizeof(a));
        unit_between(body, "<name>", "</name>", b, sizeof(b));
        unit_calls_add(&f->calls, "FindChild", b);
        for (size_t i = 0; i < NINV && !hit; i++)
            if (strcmp(inv[i].parent, a) == 0 && strcmp(inv[i].name, b) == 0)
                hit = &inv[i];
        if (hit)
            unit_soap_reply(
                r, 200,
                "<FindChildResponse xmlns=\"urn:vim25\"><returnval type=\"%s\">%s</returnval>"
                "</FindChildResponse>",
                hit->type, hit->value);
        else
            unit_soap_reply(r, 200, "<FindChildResponse xmlns=\"urn:vim25\"></FindChildResponse>");
    } else if (strstr(body, "<CreateContainerView>")) {
        ref_value(body, "container", f->view_container, sizeof(f->view_container));
        unit_calls_add(&f->calls, "CreateContainerView", f->view_container);
        unit_soap_reply(
            r, 200,
            "<CreateContainerViewResponse xmlns=\"urn:vim25\"><returnval type=\"ContainerView\">"
            "view-1</returnval></CreateContainerViewResponse>");
    } else if (strstr(body, "<DestroyView>")) {
        unit_calls_add(&f->calls, "DestroyView", "");
        unit_soap_reply(r, 200, "<DestroyViewResponse xmlns=\"urn:vim25\"></DestroyViewResponse>");
    } else if (strstr(body, "<ContinueRetrievePropertiesEx>")) {
        unit_between(body, "<token>tok-", "</token>", a, sizeof(a));
        unit_calls_add(&f->calls, "ContinueRetrievePropertiesEx", a);
        list_page(f, r, (size_t)strtoul(a, NULL, 10));
    } else if (strstr(body, "<RetrievePropertiesEx>")) {
        const struct obj *o;

        ref_value(body, "obj", a, sizeof(a));
        if (strcmp(a, "view-1") == 0) {
            unit_calls_add(&f->calls, "RetrievePropertiesEx", "view");
            list_page(f, r, 0);
            return;
        }
        unit_calls_add(&f->calls, "RetrievePropertiesEx", a);
        o = obj_by_value(a);
        if (!o) {
            reply_not_found(r);
            return;
        }
        obj_xml(objs, sizeof(objs), o);
        unit_soap_reply(
            r, 200,
            "<RetrievePropertiesExResponse xmlns=\"urn:vim25\"><returnval>%s</returnval>"
            "</RetrievePropertiesExResponse>",
            objs);
    } else {
        vmg_server_respond(r, 404, "text/plain", "no", 2);
    }
}

/* ---- Set-up ---- */

static void on_guard(uv_timer_t *t)
{
    struct fake *f = t->data;

    f->timed_out = true;
    uv_stop(&f->loop);
}

static int setup(void **state)
{
    struct fake *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    unit_vcenter_start(&f->vc, &f->loop, "fake", handler, f, 60000);
    f->s = unit_vcenter_session(&f->vc, &f->loop, 0);
    uv_timer_init(&f->loop, &f->guard);
    f->guard.data = f;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fake *f = *state;

    vs_session_close(f->s, NULL, NULL);
    unit_vcenter_stop(&f->vc, &f->loop, &f->guard);
    free(f);
    return 0;
}

static void on_found(void *data, int err, const char *msg, const struct vim_moref *ref)
{
    struct fake *f = data;

    assert_false(f->done); /* once */
    f->done = true;
    f->err = err;
    snprintf(f->msg, sizeof(f->msg), "%s", msg ? msg : "(null)");
    snprintf(f->ref, sizeof(f->ref), "%s", ref ? ref->value : "");
    assert_true(err != 0 || ref != NULL);
}

/* lookup runs one vs_find_template to its end: the callback's outcome, or
 * what the call returned when it refused at once (then with done false). */
static int lookup(struct fake *f, const char *name, const struct vim_moref *exclude)
{
    struct vs_template_query q = {.name = name,
                                  .vm_folder = &vm_folder,
                                  .dc_path = "/DC0",
                                  .exclude = exclude,
                                  .exclude_label = LABEL};
    char err[512] = "";
    int e;

    f->done = false;
    f->calls.n = 0;
    f->msg[0] = f->ref[0] = '\0';
    e = vs_find_template(f->s, &q, on_found, f, NULL, err, sizeof(err));
    if (e < 0) {
        assert_false(f->done); /* never called when refused at once */
        f->err = e;
        snprintf(f->msg, sizeof(f->msg), "%s", err);
        return e;
    }
    uv_timer_start(&f->guard, on_guard, 10000, 0);
    while (!f->done && !f->timed_out)
        uv_run(&f->loop, UV_RUN_ONCE);
    /* A view made is destroyed, after the callback (nobody waits for it). */
    while (unit_calls_count(&f->calls, "DestroyView") <
               unit_calls_count(&f->calls, "CreateContainerView") &&
           !f->timed_out)
        uv_run(&f->loop, UV_RUN_ONCE);
    uv_timer_stop(&f->guard);
    if (f->timed_out)
        unit_calls_dump(&f->calls);
    assert_false(f->timed_out);
    return 0;
}

/* ---- The lookup, against the fake ---- */

struct tcase {
    const char *name;
    int err;
    const char *ref; /* err 0 */
    const char *msg; /* a part of the message, err != 0 */
    bool listed;     /* the VM folder tree was listed */
    bool at_once;    /* refused before asking vCenter */
};

static const struct tcase cases[] = {
    /* Names: right in the VM folder, or the one template in its tree. */
    {"tmpl", 0, "vm-10", NULL, false, false},
    {"deep", 0, "vm-21", NULL, true, false}, /* vm-44, its namesake, is inside */
    {"plain", VMG_ECONFIG, NULL, "template \"plain\" is a virtual machine, not a template", true,
     false},
    {"plain-deep", VMG_ECONFIG, NULL,
     "template \"plain-deep\" is a virtual machine, not a template", true, false},
    {"stolen", VMG_ECONFIG, NULL, "template \"stolen\" is inside " LABEL, true, false},
    {"in-root", VMG_ECONFIG, NULL, "template \"in-root\" is inside " LABEL, true, false},
    {"web-0", VMG_ECONFIG, NULL, "template \"web-0\" is inside " LABEL, true, false},
    {"twin", VMG_EAMBIGUOUS, NULL, "2 templates named \"twin\" in /DC0/vm", true, false},
    {"other-dc", VMG_ENOTFOUND, NULL, "template \"other-dc\" not found in /DC0/vm", true, false},
    {"nothing", VMG_ENOTFOUND, NULL, "template \"nothing\" not found in /DC0/vm", true, false},
    /* Paths below the VM folder, relative or absolute. */
    {"lib/deep", 0, "vm-21", NULL, false, false},
    {"/DC0/vm/lib/deep", 0, "vm-21", NULL, false, false},
    {"//DC0//vm/tmpl", 0, "vm-10", NULL, false, false},
    {"/DC0/vm/plain", VMG_ECONFIG, NULL,
     "template \"/DC0/vm/plain\" is a virtual machine, not a template", false, false},
    {"/DC0/vm/lib", VMG_ECONFIG, NULL, "template \"/DC0/vm/lib\" is a Folder, not a VM template",
     false, false},
    {"/DC0/vm/vm-operator/ns_web/stolen", VMG_ECONFIG, NULL,
     "template \"/DC0/vm/vm-operator/ns_web/stolen\" is inside " LABEL, false, false},
    {"vm-operator/in-root", VMG_ECONFIG, NULL, "template \"vm-operator/in-root\" is inside " LABEL,
     false, false},
    {"/DC0/vm/nothing", VMG_ENOTFOUND, NULL,
     "template \"/DC0/vm/nothing\" not found in datacenter DC0", false, false},
    {"lib/nothing", VMG_ENOTFOUND, NULL, "template \"lib/nothing\" not found in /DC0/vm", false,
     false},
    /* Paths that leave the datacenter's VM folder: refused as written. */
    {"/DC1/vm/other-dc", VMG_ECONFIG, NULL,
     "template \"/DC1/vm/other-dc\" is outside datacenter DC0: an inventory path must begin with "
     "/DC0/vm/",
     false, true},
    {"/DC0/host/x", VMG_ECONFIG, NULL, "is outside datacenter DC0", false, true},
    {"/DC0/vmx/tmpl", VMG_ECONFIG, NULL, "is outside datacenter DC0", false, true},
    {"/DC0", VMG_ECONFIG, NULL, "is outside datacenter DC0", false, true},
    {"/tmpl", VMG_ECONFIG, NULL, "is outside datacenter DC0", false, true},
    {"/DC0/vm", VMG_ECONFIG, NULL, "is the VM folder of datacenter DC0, not a template", false,
     true},
};

static void test_lookups(void **state)
{
    struct fake *f = *state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct tcase *c = &cases[i];
        int e = lookup(f, c->name, &root_folder);

        fprintf(stderr, "# %s: %d %s %s\n", c->name, f->err, f->ref, f->msg);
        assert_int_equal(e < 0, c->at_once);
        assert_int_equal(f->err, c->err);
        if (c->err == 0)
            assert_string_equal(f->ref, c->ref);
        else
            assert_non_null(strstr(f->msg, c->msg));
        assert_int_equal(unit_calls_count(&f->calls, "CreateContainerView") > 0, c->listed);
        /* Never searched from vCenter's root; a view made was destroyed. */
        assert_int_equal(unit_calls_count(&f->calls, "FindByInventoryPath"), 0);
        assert_int_equal(unit_calls_count(&f->calls, "DestroyView"),
                         unit_calls_count(&f->calls, "CreateContainerView"));
        if (c->at_once)
            assert_int_equal(f->calls.n, 0);
    }
}

/* A walk stops where it would enter the excluded folder: nothing inside
 * it is even looked at. */
static void test_walk_stops_at_the_excluded_folder(void **state)
{
    struct fake *f = *state;

    lookup(f, "/DC0/vm/vm-operator/ns_web/stolen", &root_folder);
    assert_int_equal(f->err, VMG_ECONFIG);
    assert_int_equal(unit_calls_count(&f->calls, "FindChild vm-operator"), 1);
    assert_int_equal(unit_calls_count(&f->calls, "FindChild ns_web"), 0);
    assert_int_equal(unit_calls_count(&f->calls, "FindChild stolen"), 0);
}

/* Without an excluded folder, the operator's folder is like any other. */
static void test_no_exclude(void **state)
{
    struct fake *f = *state;

    lookup(f, "stolen", NULL);
    assert_int_equal(f->err, 0);
    assert_string_equal(f->ref, "vm-43");
    lookup(f, "deep", NULL);
    assert_int_equal(f->err, VMG_EAMBIGUOUS);
}

/* When the excluded folder is the VM folder itself, nothing is outside it. */
static void test_exclude_is_the_vm_folder(void **state)
{
    struct fake *f = *state;

    lookup(f, "tmpl", &vm_folder);
    assert_int_equal(f->err, VMG_ECONFIG);
    assert_non_null(strstr(f->msg, "is inside " LABEL));
    assert_int_equal(unit_calls_count(&f->calls, "FindChild"), 0);
    assert_int_equal(lookup(f, "/DC0/vm/tmpl", &vm_folder), VMG_ECONFIG);
    assert_non_null(strstr(f->msg, "is inside " LABEL));
}

static void test_bad_arguments(void **state)
{
    struct fake *f = *state;
    struct vs_template_query q = {.name = "", .vm_folder = &vm_folder, .dc_path = "/DC0"};

    assert_int_equal(vs_find_template(f->s, &q, on_found, f, NULL, NULL, 0), -EINVAL);
    q.name = NULL;
    assert_int_equal(vs_find_template(f->s, &q, on_found, f, NULL, NULL, 0), -EINVAL);
    q.name = "tmpl";
    q.vm_folder = NULL;
    assert_int_equal(vs_find_template(f->s, &q, on_found, f, NULL, NULL, 0), -EINVAL);
    assert_false(f->done);
}

/* A template name longer than vCenter allows (a path of 1024 bytes or
 * more, or a component of 256 or more) is the group's configuration,
 * refused for good (VMG_ECONFIG, not retried) with a sentence that says
 * so and echoes the name cut short; nothing is asked of vCenter. */
static void test_name_too_long(void **state)
{
    struct fake *f = *state;
    struct vs_template_query q = {.vm_folder = &vm_folder, .dc_path = "/DC0"};
    char longname[VS_PATH_MAX + 8], longcomp[VS_NAME_MAX + 16], err[512];
    int before = f->calls.n;

    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    q.name = longname;
    err[0] = '\0';
    assert_int_equal(vs_find_template(f->s, &q, on_found, f, NULL, err, sizeof(err)), VMG_ECONFIG);
    assert_non_null(strstr(err, "has a name longer than vCenter allows"));
    assert_true(strlen(err) < 200);

    memcpy(longcomp, "dir/", 4);
    memset(longcomp + 4, 'b', sizeof(longcomp) - 5);
    longcomp[sizeof(longcomp) - 1] = '\0';
    q.name = longcomp;
    err[0] = '\0';
    assert_int_equal(vs_find_template(f->s, &q, on_found, f, NULL, err, sizeof(err)), VMG_ECONFIG);
    assert_non_null(strstr(err, "template \"dir/bbb"));
    assert_non_null(strstr(err, "has a name longer than vCenter allows"));
    assert_false(f->done);
    assert_int_equal(f->calls.n, before);
}

static void test_cancel(void **state)
{
    struct fake *f = *state;
    struct vs_template_query q = {.name = "deep", .vm_folder = &vm_folder, .dc_path = "/DC0"};
    vs_find *h = NULL;

    f->done = false;
    assert_int_equal(vs_find_template(f->s, &q, on_found, f, &h, NULL, 0), 0);
    assert_non_null(h);
    vs_find_cancel(h);
    assert_true(f->done);
    assert_int_equal(f->err, VMG_ECANCELED);
    assert_string_equal(f->ref, "");
}

/* ---- The decision over a listing, by a table ---- */

/* found_of makes the listing of the VM folder tree from inv, as the fake
 * sends it, into found; returns its length. */
static size_t found_of(struct vs_found *found)
{
    size_t n = 0;

    for (size_t i = 0; i < NINV; i++) {
        const struct obj *o = &inv[i];
        if ((strcmp(o->type, "VirtualMachine") != 0 && strcmp(o->type, "Folder") != 0) ||
            !below(o, vm_folder.value))
            continue;
        memset(&found[n], 0, sizeof(found[n]));
        assert_int_equal(vim_moref_set(&found[n].ref, o->type, o->value), 0);
        snprintf(found[n].name, sizeof(found[n].name), "%s", o->name);
        assert_int_equal(vim_moref_set(&found[n].parent, obj_by_value(o->parent)->type, o->parent),
                         0);
        found[n].is_template = o->tmpl;
        n++;
    }
    return n;
}

static void test_choose_table(void **state)
{
    static const struct {
        const char *name;
        int err;
        const char *ref_or_msg;
    } rows[] = {
        {"tmpl", 0, "vm-10"}, /* vm-62, its namesake, is no template */
        {"deep", 0, "vm-21"},
        {"twin", VMG_EAMBIGUOUS,
         "2 templates named \"twin\" in /DC0/vm: give the template's "
         "inventory path"},
        {"plain", VMG_ECONFIG, "template \"plain\" is a virtual machine, not a template"},
        {"stolen", VMG_ECONFIG,
         "template \"stolen\" is inside " LABEL "; a template must be outside it"},
        {"web-0", VMG_ECONFIG, "is inside " LABEL},
        {"other-dc", VMG_ENOTFOUND, "template \"other-dc\" not found in /DC0/vm or its subfolders"},
        {"vm-operator", VMG_ENOTFOUND, "not found"}, /* a folder is no VM */
    };
    struct vs_found found[NINV];
    size_t n = found_of(found);
    struct vs_template_query q = {.vm_folder = &vm_folder,
                                  .dc_path = "/DC0",
                                  .exclude = &root_folder,
                                  .exclude_label = LABEL};

    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct vim_moref ref = {"", ""};
        char msg[512] = "";
        int e;

        q.name = rows[i].name;
        e = vs_template_choose(&q, found, n, &ref, msg, sizeof(msg));
        fprintf(stderr, "# %s: %d %s %s\n", rows[i].name, e, ref.value, msg);
        assert_int_equal(e, rows[i].err);
        if (e == 0)
            assert_string_equal(ref.value, rows[i].ref_or_msg);
        else
            assert_non_null(strstr(msg, rows[i].ref_or_msg));
    }
}

/* Two plain VMs of the name; a VM whose parent is no folder (a vApp's); a
 * loop of folders; an empty listing. */
static void test_choose_odd_listings(void **state)
{
    struct vs_found found[4];
    struct vs_template_query q = {.name = "x",
                                  .vm_folder = &vm_folder,
                                  .dc_path = "/DC0",
                                  .exclude = &root_folder,
                                  .exclude_label = LABEL};
    struct vim_moref ref = {"", ""};
    char msg[512];

    (void)state;
    memset(found, 0, sizeof(found));
    for (int i = 0; i < 2; i++) {
        assert_int_equal(vim_moref_set(&found[i].ref, "VirtualMachine", i ? "vm-2" : "vm-1"), 0);
        snprintf(found[i].name, sizeof(found[i].name), "x");
        assert_int_equal(vim_moref_set(&found[i].parent, "Folder", "group-3"), 0);
    }
    assert_int_equal(vs_template_choose(&q, found, 2, &ref, msg, sizeof(msg)), VMG_ECONFIG);
    assert_non_null(strstr(msg, "template \"x\" names 2 virtual machines in /DC0/vm, none of them "
                                "a template"));

    /* A template in a vApp. */
    found[0].is_template = true;
    assert_int_equal(vim_moref_set(&found[0].parent, "VirtualApp", "resgroup-v1"), 0);
    assert_int_equal(vs_template_choose(&q, found, 1, &ref, msg, sizeof(msg)), VMG_ECONFIG);
    assert_non_null(strstr(msg, "not in a folder"));

    /* Folders that lead to each other, never to the VM folder. */
    assert_int_equal(vim_moref_set(&found[0].parent, "Folder", "group-8"), 0);
    assert_int_equal(vim_moref_set(&found[1].ref, "Folder", "group-8"), 0);
    snprintf(found[1].name, sizeof(found[1].name), "f8");
    assert_int_equal(vim_moref_set(&found[1].parent, "Folder", "group-9"), 0);
    memset(&found[2], 0, sizeof(found[2]));
    assert_int_equal(vim_moref_set(&found[2].ref, "Folder", "group-9"), 0);
    snprintf(found[2].name, sizeof(found[2].name), "f9");
    assert_int_equal(vim_moref_set(&found[2].parent, "Folder", "group-8"), 0);
    assert_int_equal(vs_template_choose(&q, found, 3, &ref, msg, sizeof(msg)), VMG_ECONFIG);
    assert_non_null(strstr(msg, "not in a folder"));

    assert_int_equal(vs_template_choose(&q, NULL, 0, &ref, msg, sizeof(msg)), VMG_ENOTFOUND);
    assert_string_equal(ref.value, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lookups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_walk_stops_at_the_excluded_folder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_exclude, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exclude_is_the_vm_folder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_name_too_long, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
        cmocka_unit_test(test_choose_table),
        cmocka_unit_test(test_choose_odd_listings),
    };
    int r;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    r = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return r;
}
