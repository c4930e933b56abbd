/* test_inventory.c: the inventory cache (vsphere/invcache) fed with
 * UpdateSets as vCenter sends them (decoded by vim_decode_update_set):
 * events and their group folders, lookups, marks from extraConfig,
 * removals, moves and renames, the diff of a resync after the watch was
 * rebuilt, and the bound on objects. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "vsphere/invcache.h"
#include "vsphere/soap.h"
#include "vsphere/vim.h"

/* ---- UpdateSets as text ---- */

struct sb {
    char *p;
    size_t n, cap;
};

/* The mark keys the caller gives the cache (the operator's are in
 * controller/naming.h). */
#define MARK_UID_KEY "example.owner.uid"
#define MARK_TEMPLATE_KEY "example.owner.template"
static const struct vs_mark_keys marks = {MARK_UID_KEY, MARK_TEMPLATE_KEY};

static void sb_add(struct sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(struct sb *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        assert_true(n >= 0);
        if (b->p && b->n + (size_t)n < b->cap) {
            b->n += (size_t)n;
            return;
        }
        b->cap = (b->cap + (size_t)n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
}

static void begin(struct sb *b)
{
    memset(b, 0, sizeof(*b));
    sb_add(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
              "<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" "
              "xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\" "
              "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"><soapenv:Body>"
              "<WaitForUpdatesExResponse xmlns=\"urn:vim25\"><returnval><version>7</version>"
              "<filterSet><filter type=\"PropertyFilter\">f-1</filter>");
}

static void obj_start(struct sb *b, const char *kind, const char *type, const char *ref)
{
    sb_add(b, "<objectSet><kind>%s</kind><obj type=\"%s\">%s</obj>", kind, type, ref);
}

static void ch_str(struct sb *b, const char *name, const char *xsi, const char *v)
{
    sb_add(b, "<changeSet><name>%s</name><op>assign</op><val xsi:type=\"%s\">%s</val></changeSet>",
           name, xsi, v);
}

static void ch_parent(struct sb *b, const char *parent)
{
    sb_add(b,
           "<changeSet><name>parent</name><op>assign</op><val type=\"Folder\" "
           "xsi:type=\"ManagedObjectReference\">%s</val></changeSet>",
           parent);
}

static void ch_marks(struct sb *b, const char *uid, const char *tmpl)
{
    sb_add(b, "<changeSet><name>config.extraConfig</name><op>assign</op>"
              "<val xsi:type=\"ArrayOfOptionValue\">"
              "<OptionValue xsi:type=\"OptionValue\"><key>govcsim</key>"
              "<value xsi:type=\"xsd:string\">TRUE</value></OptionValue>");
    if (uid)
        sb_add(b,
               "<OptionValue xsi:type=\"OptionValue\"><key>" MARK_UID_KEY "</key>"
               "<value xsi:type=\"xsd:string\">%s</value></OptionValue>",
               uid);
    if (tmpl)
        sb_add(b,
               "<OptionValue xsi:type=\"OptionValue\"><key>" MARK_TEMPLATE_KEY "</key>"
               "<value xsi:type=\"xsd:string\">%s</value></OptionValue>",
               tmpl);
    sb_add(b, "</val></changeSet>");
}

/* vm adds a whole VM (kind "enter" or "modify"). */
static void vm(struct sb *b, const char *kind, const char *ref, const char *name,
               const char *parent, const char *power, int cpu, int mem, const char *uid)
{
    char n[32];

    obj_start(b, kind, "VirtualMachine", ref);
    ch_str(b, "name", "xsd:string", name);
    ch_parent(b, parent);
    ch_str(b, "runtime.powerState", "VirtualMachinePowerState", power);
    snprintf(n, sizeof(n), "%d", cpu);
    ch_str(b, "config.hardware.numCPU", "xsd:int", n);
    snprintf(n, sizeof(n), "%d", mem);
    ch_str(b, "config.hardware.memoryMB", "xsd:int", n);
    ch_str(b, "config.template", "xsd:boolean", "false");
    ch_str(b, "config.instanceUuid", "xsd:string", "5000-uuid");
    ch_marks(b, uid, uid ? "tmpl-1" : NULL);
    sb_add(b, "</objectSet>");
}

static void folder(struct sb *b, const char *kind, const char *ref, const char *name,
                   const char *parent)
{
    obj_start(b, kind, "Folder", ref);
    ch_str(b, "name", "xsd:string", name);
    ch_parent(b, parent);
    sb_add(b, "</objectSet>");
}

static void leave(struct sb *b, const char *type, const char *ref)
{
    obj_start(b, "leave", type, ref);
    sb_add(b, "</objectSet>");
}

/* ---- Feeding and recording ---- */

#define MAXEV 64

struct ev {
    enum vs_change change;
    char ref[VS_REF_MAX];
    char name[VS_NAME_MAX];
    char group[VS_NAME_MAX];
    char old_group[VS_NAME_MAX];
};

struct rec {
    struct ev ev[MAXEV];
    size_t n;
};

static void on_event(void *data, const struct vs_cache_event *e)
{
    struct rec *r = data;
    struct ev *x;

    assert_true(r->n < MAXEV);
    x = &r->ev[r->n++];
    x->change = e->change;
    snprintf(x->ref, sizeof(x->ref), "%s", e->obj->ref);
    snprintf(x->name, sizeof(x->name), "%s", e->obj->name);
    snprintf(x->group, sizeof(x->group), "%s", e->group ? e->group : "-");
    snprintf(x->old_group, sizeof(x->old_group), "%s", e->old_group ? e->old_group : "-");
    if (e->group)
        assert_non_null(e->group_ref);
}

static int apply_cb(void *arg, const struct vim_object_update *u)
{
    return vs_cache_apply(arg, u);
}

/* feed applies the UpdateSet in b (and frees its text); returns the last
 * vs_cache_apply error, or 0. */
static int feed_nocommit(vs_cache *c, struct sb *b)
{
    struct vim_update_set us;
    soap_resp *resp = NULL;
    int r;

    sb_add(b, "</filterSet></returnval></WaitForUpdatesExResponse></soapenv:Body>"
              "</soapenv:Envelope>");
    assert_int_equal(soap_parse(b->p, b->n, 64u << 20, &resp, NULL), 0);
    r = vim_decode_update_set(resp, apply_cb, c, &us);
    soap_resp_free(resp);
    free(b->p);
    b->p = NULL;
    return r < 0 ? r : 0;
}

static size_t feed(vs_cache *c, struct sb *b)
{
    assert_int_equal(feed_nocommit(c, b), 0);
    return vs_cache_commit(c);
}

static const struct ev *find_ev(const struct rec *r, const char *ref)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->ev[i].ref, ref) == 0)
            return &r->ev[i];
    return NULL;
}

static void expect(const struct rec *r, const char *ref, enum vs_change ch, const char *group,
                   const char *old_group)
{
    const struct ev *e = find_ev(r, ref);

    if (!e)
        fail_msg("no event for %s", ref);
    assert_int_equal(e->change, ch);
    assert_string_equal(e->group, group);
    assert_string_equal(e->old_group, old_group);
}

/* The inventory of most tests: root group-1, group folders ns_a (with a
 * subfolder and VMs) and ns_b, and a VM directly under the root. VMs come
 * before their folders, as the PropertyCollector may send them. */
static vs_cache *setup(struct rec *r)
{
    vs_cache *c = vs_cache_new("group-1", 0, &marks, on_event, r);
    struct sb b;

    assert_non_null(c);
    memset(r, 0, sizeof(*r));
    begin(&b);
    vm(&b, "enter", "vm-11", "a-0", "group-a", "poweredOn", 2, 2048, "uid-a");
    vm(&b, "enter", "vm-12", "stray", "group-a", "poweredOff", 1, 1024, NULL);
    vm(&b, "enter", "vm-13", "b-0", "group-b", "poweredOn", 1, 1024, "uid-b");
    vm(&b, "enter", "vm-14", "deep", "group-s", "poweredOn", 1, 1024, NULL);
    vm(&b, "enter", "vm-15", "loose", "group-1", "poweredOn", 1, 1024, NULL);
    folder(&b, "enter", "group-s", "sub", "group-a");
    folder(&b, "enter", "group-a", "ns_a", "group-1");
    folder(&b, "enter", "group-b", "ns_b", "group-1");
    assert_int_equal(feed(c, &b), 8);
    return c;
}

static void test_initial_state(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    const struct vs_obj *o, *list[8];

    (void)state;
    assert_int_equal(r.n, 8);
    expect(&r, "vm-11", VS_CHANGE_ADDED, "ns_a", "-");
    expect(&r, "vm-12", VS_CHANGE_ADDED, "ns_a", "-");
    expect(&r, "vm-13", VS_CHANGE_ADDED, "ns_b", "-");
    expect(&r, "vm-14", VS_CHANGE_ADDED, "ns_a", "-"); /* nested: its group is ns_a */
    expect(&r, "vm-15", VS_CHANGE_ADDED, "-", "-");    /* in no group */
    expect(&r, "group-a", VS_CHANGE_ADDED, "ns_a", "-");
    expect(&r, "group-s", VS_CHANGE_ADDED, "ns_a", "-");
    expect(&r, "group-b", VS_CHANGE_ADDED, "ns_b", "-");
    assert_int_equal(vs_cache_size(c), 8);

    o = vs_cache_get(c, "vm-11");
    assert_non_null(o);
    assert_int_equal(o->kind, VS_OBJ_VM);
    assert_string_equal(o->name, "a-0");
    assert_string_equal(o->parent, "group-a");
    assert_true(o->powered_on);
    assert_string_equal(o->power_state, "poweredOn");
    assert_int_equal(o->num_cpu, 2);
    assert_int_equal(o->memory_mb, 2048);
    assert_false(o->is_template);
    assert_string_equal(o->instance_uuid, "5000-uuid");
    assert_true(o->has_mark_uid);
    assert_string_equal(o->mark_uid, "uid-a");
    assert_true(o->has_mark_template);
    assert_string_equal(o->mark_template, "tmpl-1");
    assert_int_equal(o->create_order, 11);
    o = vs_cache_get(c, "vm-12");
    assert_false(o->has_mark_uid);
    assert_false(o->powered_on);
    assert_null(vs_cache_get(c, "vm-99"));

    o = vs_cache_folder(c, "ns_a");
    assert_non_null(o);
    assert_string_equal(o->ref, "group-a");
    assert_null(vs_cache_folder(c, "sub")); /* not directly under the root */
    assert_null(vs_cache_folder(c, "nope"));
    assert_int_equal(vs_cache_children(c, "group-a", true, list, 8), 2);
    assert_true((strcmp(list[0]->ref, "vm-11") == 0 && strcmp(list[1]->ref, "vm-12") == 0) ||
                (strcmp(list[0]->ref, "vm-12") == 0 && strcmp(list[1]->ref, "vm-11") == 0));
    assert_int_equal(vs_cache_children(c, "group-a", false, list, 8), 1);
    assert_string_equal(list[0]->ref, "group-s");
    assert_int_equal(vs_cache_children(c, "group-a", true, list, 1), 2); /* counts beyond max */
    assert_int_equal(vs_cache_children(c, "group-b", true, NULL, 0), 1);
    assert_int_equal(vs_cache_children(c, "group-zz", true, list, 8), 0);
    assert_int_equal(vs_cache_marked(c, "uid-a", list, 8), 1);
    assert_string_equal(list[0]->ref, "vm-11");
    assert_int_equal(vs_cache_marked(c, "uid-zz", list, 8), 0);
    assert_string_equal(vs_cache_group(c, vs_cache_get(c, "vm-14"))->name, "ns_a");
    vs_cache_free(c);
}

static void test_modify_reports_once(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;

    (void)state;
    r.n = 0;
    /* A power change: one event, the rest of the VM kept. */
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-11");
    ch_str(&b, "runtime.powerState", "VirtualMachinePowerState", "poweredOff");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    expect(&r, "vm-11", VS_CHANGE_UPDATED, "ns_a", "-");
    assert_false(vs_cache_get(c, "vm-11")->powered_on);
    assert_int_equal(vs_cache_get(c, "vm-11")->num_cpu, 2);
    assert_string_equal(vs_cache_get(c, "vm-11")->mark_uid, "uid-a");
    /* The same value again, or a property the cache does not keep: none. */
    r.n = 0;
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-11");
    ch_str(&b, "runtime.powerState", "VirtualMachinePowerState", "poweredOff");
    ch_str(&b, "config.changeVersion", "xsd:string", "2024-01-01");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 0);
    assert_int_equal(r.n, 0);
    /* A reconfiguration and a mark removed, in one update: one event. */
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-11");
    ch_str(&b, "config.hardware.numCPU", "xsd:int", "4");
    ch_str(&b, "config.hardware.memoryMB", "xsd:int", "8192");
    ch_marks(&b, NULL, NULL);
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    assert_int_equal(vs_cache_get(c, "vm-11")->num_cpu, 4);
    assert_int_equal(vs_cache_get(c, "vm-11")->memory_mb, 8192);
    assert_false(vs_cache_get(c, "vm-11")->has_mark_uid);
    assert_false(vs_cache_get(c, "vm-11")->has_mark_template);
    vs_cache_free(c);
}

/* An object that leaves and comes back changed in one update set is one
 * update, reported once: the commit ends (it was linked twice on the list
 * of changes, a cycle that reported it without end). */
static void test_leave_and_enter_in_one_set(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;

    (void)state;
    r.n = 0;
    begin(&b);
    leave(&b, "VirtualMachine", "vm-11");
    vm(&b, "enter", "vm-11", "a-0", "group-a", "poweredOff", 2, 2048, "uid-a");
    assert_int_equal(feed(c, &b), 1);
    expect(&r, "vm-11", VS_CHANGE_UPDATED, "ns_a", "-");
    assert_false(vs_cache_get(c, "vm-11")->powered_on);
    assert_int_equal(vs_cache_size(c), 8);
    vs_cache_free(c);
}

static void test_removals_keep_groups(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;

    (void)state;
    r.n = 0;
    /* A group folder destroyed with its contents: each removal still
     * names the group, whatever the order. */
    begin(&b);
    leave(&b, "Folder", "group-a");
    leave(&b, "Folder", "group-s");
    leave(&b, "VirtualMachine", "vm-11");
    leave(&b, "VirtualMachine", "vm-12");
    leave(&b, "VirtualMachine", "vm-14");
    leave(&b, "VirtualMachine", "vm-404"); /* unknown: ignored */
    assert_int_equal(feed(c, &b), 5);
    expect(&r, "group-a", VS_CHANGE_REMOVED, "ns_a", "-");
    expect(&r, "group-s", VS_CHANGE_REMOVED, "ns_a", "-");
    expect(&r, "vm-11", VS_CHANGE_REMOVED, "ns_a", "-");
    expect(&r, "vm-12", VS_CHANGE_REMOVED, "ns_a", "-");
    expect(&r, "vm-14", VS_CHANGE_REMOVED, "ns_a", "-");
    assert_int_equal(vs_cache_size(c), 3);
    assert_null(vs_cache_get(c, "vm-11"));
    assert_null(vs_cache_folder(c, "ns_a"));
    assert_int_equal(vs_cache_children(c, "group-a", true, NULL, 0), 0);
    assert_int_equal(vs_cache_marked(c, "uid-a", NULL, 0), 0);
    /* Added and removed within one batch: nothing to report. */
    r.n = 0;
    begin(&b);
    vm(&b, "enter", "vm-20", "brief", "group-b", "poweredOn", 1, 1024, NULL);
    leave(&b, "VirtualMachine", "vm-20");
    assert_int_equal(feed(c, &b), 0);
    assert_null(vs_cache_get(c, "vm-20"));
    vs_cache_free(c);
}

static void test_move_and_rename(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;
    const struct vs_obj *list[4];

    (void)state;
    r.n = 0;
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-13");
    ch_parent(&b, "group-a");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    expect(&r, "vm-13", VS_CHANGE_UPDATED, "ns_a", "ns_b");
    assert_int_equal(vs_cache_children(c, "group-a", true, list, 4), 3);
    assert_int_equal(vs_cache_children(c, "group-b", true, list, 4), 0);
    /* A renamed group folder: the folder's event names both. */
    r.n = 0;
    begin(&b);
    obj_start(&b, "modify", "Folder", "group-b");
    ch_str(&b, "name", "xsd:string", "ns_c");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    expect(&r, "group-b", VS_CHANGE_UPDATED, "ns_c", "ns_b");
    assert_null(vs_cache_folder(c, "ns_b"));
    assert_non_null(vs_cache_folder(c, "ns_c"));
    /* A VM moved out of every group. */
    r.n = 0;
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-11");
    ch_parent(&b, "group-elsewhere");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    expect(&r, "vm-11", VS_CHANGE_UPDATED, "-", "ns_a");
    vs_cache_free(c);
}

static void test_resync_reports_the_difference(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;

    (void)state;
    /* The watch is rebuilt (a new session, or vCenter restarted): the full
     * state comes again, in two pages. Meanwhile vm-12 was resized, vm-13
     * and ns_b were deleted, and vm-16 was created. */
    r.n = 0;
    vs_cache_begin_resync(c);
    begin(&b);
    vm(&b, "enter", "vm-11", "a-0", "group-a", "poweredOn", 2, 2048, "uid-a");
    vm(&b, "enter", "vm-12", "stray", "group-a", "poweredOff", 2, 1024, NULL);
    folder(&b, "enter", "group-a", "ns_a", "group-1");
    assert_int_equal(feed(c, &b), 1); /* vm-12's change */
    begin(&b);
    folder(&b, "enter", "group-s", "sub", "group-a");
    vm(&b, "enter", "vm-14", "deep", "group-s", "poweredOn", 1, 1024, NULL);
    vm(&b, "enter", "vm-15", "loose", "group-1", "poweredOn", 1, 1024, NULL);
    vm(&b, "enter", "vm-16", "a-1", "group-a", "poweredOn", 2, 2048, "uid-a");
    assert_int_equal(feed(c, &b), 1); /* vm-16 */
    assert_int_equal(vs_cache_end_resync(c), 2);
    assert_int_equal(r.n, 4);
    expect(&r, "vm-12", VS_CHANGE_UPDATED, "ns_a", "-");
    expect(&r, "vm-16", VS_CHANGE_ADDED, "ns_a", "-");
    expect(&r, "vm-13", VS_CHANGE_REMOVED, "ns_b", "-");
    expect(&r, "group-b", VS_CHANGE_REMOVED, "ns_b", "-");
    assert_null(find_ev(&r, "vm-11")); /* unchanged: not reported */
    assert_null(find_ev(&r, "group-a"));
    assert_int_equal(vs_cache_size(c), 7);
    /* A resync that sees everything removes nothing. */
    r.n = 0;
    vs_cache_begin_resync(c);
    begin(&b);
    vm(&b, "enter", "vm-11", "a-0", "group-a", "poweredOn", 2, 2048, "uid-a");
    vm(&b, "enter", "vm-12", "stray", "group-a", "poweredOff", 2, 1024, NULL);
    folder(&b, "enter", "group-a", "ns_a", "group-1");
    folder(&b, "enter", "group-s", "sub", "group-a");
    vm(&b, "enter", "vm-14", "deep", "group-s", "poweredOn", 1, 1024, NULL);
    vm(&b, "enter", "vm-15", "loose", "group-1", "poweredOn", 1, 1024, NULL);
    vm(&b, "enter", "vm-16", "a-1", "group-a", "poweredOn", 2, 2048, "uid-a");
    assert_int_equal(feed(c, &b), 0);
    assert_int_equal(vs_cache_end_resync(c), 0);
    assert_int_equal(r.n, 0);
    vs_cache_free(c);
}

static void test_enter_resets_missing_properties(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;
    const struct vs_obj *o;

    (void)state;
    /* An enter without config (a VM being created, or inaccessible):
     * what it does not carry is unknown, not kept. */
    r.n = 0;
    begin(&b);
    obj_start(&b, "enter", "VirtualMachine", "vm-11");
    ch_str(&b, "name", "xsd:string", "a-0");
    ch_parent(&b, "group-a");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    o = vs_cache_get(c, "vm-11");
    assert_int_equal(o->num_cpu, 0);
    assert_int_equal(o->memory_mb, 0);
    assert_false(o->has_mark_uid);
    assert_string_equal(o->power_state, "");
    vs_cache_free(c);
}

static void test_single_extra_config_entries(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;

    (void)state;
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-12");
    sb_add(&b, "<changeSet><name>config.extraConfig[\"" MARK_UID_KEY "\"]</name>"
               "<op>assign</op><val xsi:type=\"OptionValue\"><key>" MARK_UID_KEY "</key>"
               "<value xsi:type=\"xsd:string\">uid-x</value></val></changeSet>");
    sb_add(&b, "<changeSet><name>config.extraConfig[\"other.key\"]</name>"
               "<op>assign</op><val xsi:type=\"OptionValue\"><key>other.key</key>"
               "<value xsi:type=\"xsd:string\">zz</value></val></changeSet>");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    assert_true(vs_cache_get(c, "vm-12")->has_mark_uid);
    assert_string_equal(vs_cache_get(c, "vm-12")->mark_uid, "uid-x");
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-12");
    sb_add(&b, "<changeSet><name>config.extraConfig[\"" MARK_UID_KEY "\"]</name>"
               "<op>remove</op></changeSet>");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    assert_false(vs_cache_get(c, "vm-12")->has_mark_uid);
    vs_cache_free(c);
}

static void expect_ip(const vs_cache *c, const char *ref, const char *want)
{
    const struct vs_obj *o = vs_cache_get(c, ref);
    char got[VS_IP_LEN];

    assert_non_null(o);
    assert_int_equal(vs_obj_ip(o, got), want[0] != '\0');
    assert_string_equal(got, want);
}

/* set_ip feeds guest.ipAddress = ip for vm-11 and returns the events. */
static int set_ip(vs_cache *c, const char *ip)
{
    struct sb b;

    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-11");
    ch_str(&b, "guest.ipAddress", "xsd:string", ip);
    sb_add(&b, "</objectSet>");
    return feed(c, &b);
}

/* The guest's address: guest.ipAddress, a valid literal only, written back
 * as inet_ntop does; a change of it is one UPDATED event, the same again
 * none; guest.net is not read. */
static void test_guest_addresses(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;
    char huge[8192];
    static const char *const hostile[] = {"not-an-ip",
                                          "10.0.0.5%eth0",
                                          "300.1.1.1",
                                          "10.0.0.5 ",
                                          "1.2.3",
                                          "0x0a000001",
                                          "127.0.0.1",
                                          "0.0.0.0",
                                          "169.254.1.1",
                                          "::1",
                                          "::",
                                          "fe80::1%eth0",
                                          "fe80::1",
                                          "10.0.0.99\n",
                                          "",
                                          "255.255.255.255",
                                          "::ffff:127.0.0.1",
                                          "::ffff:169.254.3.4",
                                          "::ffff:0.0.0.0",
                                          "::ffff:255.255.255.255",
                                          "::ffff:7f00:1"};

    (void)state;
    expect_ip(c, "vm-11", "");
    r.n = 0;
    assert_int_equal(set_ip(c, "10.0.0.5"), 1);
    expect(&r, "vm-11", VS_CHANGE_UPDATED, "ns_a", "-");
    expect_ip(c, "vm-11", "10.0.0.5");
    assert_int_equal(set_ip(c, "10.0.0.5"), 0);
    /* IPv6, written back compressed; the same address spelt otherwise is
     * no change. */
    assert_int_equal(set_ip(c, "2001:db8:0:0::9"), 1);
    expect_ip(c, "vm-11", "2001:db8::9");
    assert_int_equal(set_ip(c, "2001:0db8::0009"), 0);
    /* An IPv4-mapped address is kept as such when it is worth reporting;
     * 255.255.255.254 is not the broadcast. */
    assert_int_equal(set_ip(c, "::ffff:10.0.0.6"), 1);
    expect_ip(c, "vm-11", "::ffff:10.0.0.6");
    assert_int_equal(set_ip(c, "255.255.255.254"), 1);
    expect_ip(c, "vm-11", "255.255.255.254");
    /* Hostile values: nothing kept. */
    for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
        assert_int_equal(set_ip(c, "10.0.0.7"), 1);
        assert_int_equal(set_ip(c, hostile[i]), 1);
        expect_ip(c, "vm-11", "");
    }
    memset(huge, '1', sizeof(huge) - 1);
    huge[sizeof(huge) - 1] = '\0';
    assert_int_equal(set_ip(c, "10.0.0.7"), 1);
    assert_int_equal(set_ip(c, huge), 1);
    expect_ip(c, "vm-11", "");
    /* guest.net is not read: no change, no event. */
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-11");
    sb_add(&b, "<changeSet><name>guest.net</name><op>assign</op>"
               "<val xsi:type=\"ArrayOfGuestNicInfo\"><GuestNicInfo>"
               "<ipAddress>10.0.0.8</ipAddress></GuestNicInfo></val></changeSet>");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 0);
    expect_ip(c, "vm-11", "");
    /* Unset (the guest stopped): gone; folders ignore the path. */
    assert_int_equal(set_ip(c, "10.0.0.7"), 1);
    r.n = 0;
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-11");
    sb_add(&b, "<changeSet><name>guest.ipAddress</name><op>assign</op></changeSet>");
    sb_add(&b, "</objectSet>");
    obj_start(&b, "modify", "Folder", "group-a");
    ch_str(&b, "guest.ipAddress", "xsd:string", "10.0.0.1");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    expect_ip(c, "vm-11", "");
    vs_cache_free(c);
}

/* A name longer than VS_NAME_MAX is cut at the start of a character: 80
 * four-byte characters keep 63, never three bytes of the 64th. */
static void test_long_name_cut_at_a_character(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;
    char name[80 * 4 + 1], want[63 * 4 + 1];

    (void)state;
    for (int i = 0; i < 80; i++)
        memcpy(name + 4 * i, "\xf0\x9f\x98\x80", 4); /* U+1F600 */
    name[sizeof(name) - 1] = '\0';
    memcpy(want, name, sizeof(want) - 1);
    want[sizeof(want) - 1] = '\0';
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-11");
    ch_str(&b, "name", "xsd:string", name);
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    assert_string_equal(vs_cache_get(c, "vm-11")->name, want);
    vs_cache_free(c);
}

static void test_bounds_and_orders(void **state)
{
    struct rec r = {0};
    vs_cache *c = vs_cache_new("group-1", 2, &marks, on_event, &r);
    struct sb b;
    char longref[300];

    (void)state;
    assert_non_null(c);
    begin(&b);
    folder(&b, "enter", "group-a", "ns_a", "group-1");
    vm(&b, "enter", "vm-1", "x", "group-a", "poweredOn", 1, 1, NULL);
    vm(&b, "enter", "vm-2", "y", "group-a", "poweredOn", 1, 1, NULL);
    obj_start(&b, "enter", "Datastore", "ds-1"); /* not cached */
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed_nocommit(c, &b), -ENOSPC);
    assert_int_equal(vs_cache_commit(c), 2);
    assert_int_equal(vs_cache_size(c), 2);
    assert_null(vs_cache_get(c, "vm-2"));
    assert_null(vs_cache_get(c, "ds-1"));
    vs_cache_free(c);

    assert_int_equal(vs_create_order("vm-42"), 42);
    assert_int_equal(vs_create_order("group-v3"), 3);
    assert_int_equal(vs_create_order("vm-"), 0);
    assert_int_equal(vs_create_order("abc"), 0);
    assert_int_equal(vs_create_order("vm-99999999999999999999999"), UINT64_MAX);
    assert_int_equal(vs_create_order(NULL), 0);

    memset(longref, 'r', sizeof(longref) - 1);
    longref[sizeof(longref) - 1] = '\0';
    assert_null(vs_cache_new("", 0, NULL, NULL, NULL));
    assert_null(vs_cache_new(longref, 0, NULL, NULL, NULL));
    assert_null(vs_cache_new("group-1", 0, &(struct vs_mark_keys){longref, NULL}, NULL, NULL));
    c = vs_cache_new("group-1", 0, NULL, NULL, NULL);
    assert_int_equal(vs_cache_set_root(c, longref), -EINVAL);
    assert_int_equal(vs_cache_set_root(c, "group-2"), 0);
    assert_string_equal(vs_cache_root(c), "group-2");
    assert_int_equal(vs_cache_apply(c, NULL), -EINVAL);
    vs_cache_free(c);
    vs_cache_free(NULL);
}

static void test_many_objects(void **state)
{
    struct rec r = {0};
    vs_cache *c = vs_cache_new("group-1", 0, &marks, NULL, &r);
    struct sb b;
    char ref[32], name[32];
    const struct vs_obj *one[1];

    (void)state;
    /* Enough to make the tables grow several times (and within the
     * parser's bound on nodes). */
    begin(&b);
    folder(&b, "enter", "group-a", "ns_a", "group-1");
    for (int i = 0; i < 2000; i++) {
        snprintf(ref, sizeof(ref), "vm-%d", i + 100);
        snprintf(name, sizeof(name), "vm%d", i);
        vm(&b, "enter", ref, name, i % 2 ? "group-a" : "group-1", "poweredOn", 1, 1, "u");
    }
    assert_int_equal(feed(c, &b), 2001);
    assert_int_equal(vs_cache_size(c), 2001);
    assert_int_equal(vs_cache_children(c, "group-a", true, one, 1), 1000);
    assert_int_equal(vs_cache_marked(c, "u", NULL, 0), 2000);
    assert_string_equal(vs_cache_get(c, "vm-2099")->name, "vm1999");
    vs_cache_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_initial_state),
        cmocka_unit_test(test_modify_reports_once),
        cmocka_unit_test(test_leave_and_enter_in_one_set),
        cmocka_unit_test(test_removals_keep_groups),
        cmocka_unit_test(test_move_and_rename),
        cmocka_unit_test(test_resync_reports_the_difference),
        cmocka_unit_test(test_enter_resets_missing_properties),
        cmocka_unit_test(test_single_extra_config_entries),
        cmocka_unit_test(test_guest_addresses),
        cmocka_unit_test(test_long_name_cut_at_a_character),
        cmocka_unit_test(test_bounds_and_orders),
        cmocka_unit_test(test_many_objects),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
