/* test_inventory.c: the inventory cache (vsphere/invcache) fed with
 * UpdateSets as vCenter sends them (decoded by vim_decode_update_set):
 * events and their group folders, lookups, marks from extraConfig,
 * removals, moves and renames, the diff of a resync after the watch was
 * rebuilt, the bound on objects, and a finished task's result assumed
 * before the watch shows it: never rolling back a newer state, nor rolled
 * back by an older answer, which, when it says otherwise, makes the cache
 * ask for the object to be read back. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "vsphere/invcache.h"
#include "vsphere/inventory.h"
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
#define MARK_INSTANCE_KEY "example.owner.instance"
static const struct vs_mark_keys marks = {MARK_UID_KEY, MARK_TEMPLATE_KEY, MARK_INSTANCE_KEY};

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

/* ch_extra adds the change of one key of extraConfig (an indexed
 * property) to the string value. */
static void ch_extra(struct sb *b, const char *key, const char *value)
{
    sb_add(b,
           "<changeSet><name>config.extraConfig[\"%s\"]</name><op>assign</op>"
           "<val xsi:type=\"OptionValue\"><key>%s</key><value xsi:type=\"xsd:string\">%s</value>"
           "</val></changeSet>",
           key, key, value);
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
    char old_mark[VS_MARK_MAX]; /* "-": none */
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
    snprintf(x->old_mark, sizeof(x->old_mark), "%s", e->old_mark_uid ? e->old_mark_uid : "-");
    if (e->group)
        assert_non_null(e->group_ref);
}

/* The number of the request the next feed answers (vs_cache_apply_from);
 * UINT64_MAX (newer than anything) unless a test says otherwise. */
static uint64_t feed_asked = UINT64_MAX;
/* The objects the cache asked to read back (VS_CACHE_READ_BACK) and still
 * wants read when the answer is all applied (vs_cache_disputed), in order,
 * as the inventory reads them. */
static char read_backs[8][VS_REF_MAX];
static size_t n_read_backs;

static int apply_cb(void *arg, const struct vim_object_update *u)
{
    int e = vs_cache_apply_from(arg, u, feed_asked);

    if (e == VS_CACHE_READ_BACK) {
        for (size_t i = 0; i < n_read_backs; i++)
            if (strcmp(read_backs[i], u->obj.value) == 0)
                return 0;
        assert_true(n_read_backs < 8);
        snprintf(read_backs[n_read_backs++], VS_REF_MAX, "%s", u->obj.value);
        return 0;
    }
    return e;
}

/* settle_read_backs drops the read-backs that the rest of an answer made
 * needless, as the inventory does before it sends one. */
static void settle_read_backs(const vs_cache *c, size_t from)
{
    size_t k = from;

    for (size_t i = from; i < n_read_backs; i++)
        if (vs_cache_disputed(c, read_backs[i]))
            memmove(read_backs[k++], read_backs[i], VS_REF_MAX);
    n_read_backs = k;
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

/* remark appends a modification of the VM ref's marks: uid (and template
 * "tmpl-1"), or none when uid is NULL. */
static void remark(struct sb *b, const char *ref, const char *uid)
{
    obj_start(b, "modify", "VirtualMachine", ref);
    ch_marks(b, uid, uid ? "tmpl-1" : NULL);
    sb_add(b, "</objectSet>");
}

/* vs_cache_marked follows each VM's uid mark, wherever the VM is: moved to
 * another folder it stays listed; its mark changed, it moves to the other
 * list; its mark removed, or the VM gone, it leaves. The event of a batch
 * that changed the mark (a removal's too) says the mark the VM had before
 * the batch: its owner lost it. */
static void test_marked_follows_the_mark(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    const struct vs_obj *list[4];
    struct sb b;

    (void)state;
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-11");
    ch_parent(&b, "group-b");
    sb_add(&b, "</objectSet>");
    r.n = 0;
    assert_int_equal(feed(c, &b), 1);
    assert_int_equal(vs_cache_marked(c, "uid-a", list, 4), 1);
    assert_string_equal(list[0]->ref, "vm-11");
    assert_string_equal(list[0]->parent, "group-b");
    assert_string_equal(find_ev(&r, "vm-11")->old_mark, "-");

    /* Changed twice in one batch: the mark before the batch. */
    begin(&b);
    remark(&b, "vm-11", "uid-x");
    remark(&b, "vm-11", "uid-c");
    vm(&b, "enter", "vm-20", "b-1", "group-a", "poweredOn", 1, 1024, "uid-c");
    r.n = 0;
    assert_int_equal(feed(c, &b), 2);
    assert_int_equal(vs_cache_marked(c, "uid-a", list, 4), 0);
    assert_int_equal(vs_cache_marked(c, "uid-c", list, 4), 2);
    assert_int_equal(vs_cache_marked(c, "uid-c", list, 1), 2); /* counts beyond max */
    assert_string_equal(find_ev(&r, "vm-11")->old_mark, "uid-a");
    assert_string_equal(find_ev(&r, "vm-20")->old_mark, "-");

    begin(&b);
    remark(&b, "vm-11", NULL);
    r.n = 0;
    assert_int_equal(feed(c, &b), 1);
    assert_int_equal(vs_cache_marked(c, "uid-c", list, 4), 1);
    assert_string_equal(list[0]->ref, "vm-20");
    assert_string_equal(find_ev(&r, "vm-11")->old_mark, "uid-c");

    /* Unmarked before the batch: no old mark, however the batch went. */
    begin(&b);
    remark(&b, "vm-11", "uid-x");
    remark(&b, "vm-11", "uid-c");
    r.n = 0;
    assert_int_equal(feed(c, &b), 1);
    assert_string_equal(find_ev(&r, "vm-11")->old_mark, "-");

    /* Its mark changed, then the VM gone, in one batch: the removal says
     * the mark it had (the object, the last one). */
    begin(&b);
    remark(&b, "vm-11", "uid-s");
    leave(&b, "VirtualMachine", "vm-11");
    r.n = 0;
    assert_int_equal(feed(c, &b), 1);
    assert_int_equal(find_ev(&r, "vm-11")->change, VS_CHANGE_REMOVED);
    assert_string_equal(find_ev(&r, "vm-11")->old_mark, "uid-c");

    /* Marked again as it was within one batch: no change of mark. */
    begin(&b);
    remark(&b, "vm-20", "uid-y");
    remark(&b, "vm-20", "uid-c");
    r.n = 0;
    (void)feed(c, &b);
    assert_true(!find_ev(&r, "vm-20") || strcmp(find_ev(&r, "vm-20")->old_mark, "-") == 0);

    begin(&b);
    leave(&b, "VirtualMachine", "vm-20");
    assert_int_equal(feed(c, &b), 1);
    assert_int_equal(vs_cache_marked(c, "uid-c", list, 4), 0);
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
    ch_extra(&b, MARK_UID_KEY, "uid-x");
    ch_extra(&b, "other.key", "zz");
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

    /* The instance mark, alone, is a change of the VM. */
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-12");
    ch_extra(&b, MARK_INSTANCE_KEY, "5000-uuid");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    assert_true(vs_cache_get(c, "vm-12")->has_mark_instance);
    assert_string_equal(vs_cache_get(c, "vm-12")->mark_instance, "5000-uuid");
    /* The whole extraConfig, without it (a watch that cannot index a key),
     * removes it; with it, sets it. */
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-12");
    ch_marks(&b, "uid-x", NULL);
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    assert_false(vs_cache_get(c, "vm-12")->has_mark_instance);
    assert_true(vs_cache_get(c, "vm-12")->has_mark_uid);
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-12");
    sb_add(&b, "<changeSet><name>config.extraConfig</name><op>assign</op>"
               "<val xsi:type=\"ArrayOfOptionValue\">"
               "<OptionValue xsi:type=\"OptionValue\"><key>" MARK_INSTANCE_KEY "</key>"
               "<value xsi:type=\"xsd:string\">5000-other</value></OptionValue></val></changeSet>");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    assert_string_equal(vs_cache_get(c, "vm-12")->mark_instance, "5000-other");
    assert_false(vs_cache_get(c, "vm-12")->has_mark_uid);
    /* A value longer than an instanceUuid can be is kept as none matches:
     * cut to fit, it could match. */
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-12");
    ch_extra(&b, MARK_INSTANCE_KEY,
             "5000-uuid-and-then-something-much-longer-than-any-instance-uuid-is");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    assert_true(vs_cache_get(c, "vm-12")->has_mark_instance);
    assert_string_equal(vs_cache_get(c, "vm-12")->mark_instance, "");
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

/* guest_net adds a guest.net change of n NICs whose addresses are the
 * comma-separated lists of nics[]. */
static void guest_net(struct sb *b, const char *const *nics, size_t n)
{
    sb_add(b, "<changeSet><name>guest.net</name><op>assign</op>"
              "<val xsi:type=\"ArrayOfGuestNicInfo\">");
    for (size_t i = 0; i < n; i++) {
        const char *p = nics[i];
        sb_add(b, "<GuestNicInfo><network>VM Network</network>"
                  "<macAddress>00:50:56:00:00:01</macAddress><connected>true</connected>");
        while (p && *p) {
            size_t len = strcspn(p, ",");
            sb_add(b, "<ipAddress>%.*s</ipAddress>", (int)len, p);
            p += len + (p[len] == ',');
        }
        sb_add(b, "<deviceConfigId>4000</deviceConfigId></GuestNicInfo>");
    }
    sb_add(b, "</val></changeSet>");
}

/* expect_ips checks all the addresses of ref, comma-separated, and that
 * its primary one is primary. */
static void expect_ips(const vs_cache *c, const char *ref, const char *want, const char *primary)
{
    const struct vs_obj *o = vs_cache_get(c, ref);
    char got[VS_IP_MAX * (VS_IP_LEN + 1)] = "", one[VS_IP_LEN];
    size_t len = 0;

    assert_non_null(o);
    assert_true(o->n_ip <= VS_IP_MAX);
    for (unsigned i = 0; vs_obj_ip_at(o, i, one); i++)
        len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%s", i ? "," : "", one);
    assert_false(vs_obj_ip_at(o, o->n_ip, one));
    assert_string_equal(one, "");
    assert_string_equal(got, want);
    vs_obj_ip(o, one);
    assert_string_equal(one, primary);
}

/* net_update feeds, for vm-11, guest.net of nics[0..n) (after
 * guest.ipAddress = ip unless NULL, or before it when net_first) and returns
 * the events. */
static size_t net_update(vs_cache *c, const char *ip, bool net_first, const char *const *nics,
                         size_t n)
{
    struct sb b;

    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-11");
    if (net_first)
        guest_net(&b, nics, n);
    if (ip)
        ch_str(&b, "guest.ipAddress", "xsd:string", ip);
    if (!net_first)
        guest_net(&b, nics, n);
    sb_add(&b, "</objectSet>");
    return feed(c, &b);
}

/* guest.net, read when the primary address changes: its addresses with
 * the primary one, IPv4 first, the primary first within its family and
 * always kept, distinct, valid literals only (as the primary), at most
 * VS_IP_MAX, at most 32 NICs and 64 addresses looked at; kept while the
 * primary is the same, dropped when it changes, none without one. */
static void test_guest_net(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;
    static char huge[8192];
    static const char *const two[] = {"fe80::250:56ff:fe00:1,2001:db8::5,10.0.0.5",
                                      "192.168.1.2,2001:db8::5"};
    static const char *const hostile[] = {
        "not-an-ip,10.0.0.5%eth0,300.1.1.1,10.0.0.5 ,1.2.3,0x0a000001,127.0.0.1,0.0.0.0,"
        "169.254.1.1,::1,::,fe80::1%eth0,255.255.255.255,::ffff:127.0.0.1,::ffff:169.254.1.1,"
        "10.0.0.99\n,,10.0.0.7",
        "2001:db8::1"};
    const char *nics[40];
    char lists[40][64];

    (void)state;
    /* No primary: guest.net alone gives nothing. */
    assert_int_equal(net_update(c, NULL, false, two, 2), 0);
    expect_ips(c, "vm-11", "", "");
    /* Several NICs, IPv6 and IPv4 mixed: IPv4 first, the primary first,
     * no duplicate, no link-local; the same again is no event. */
    r.n = 0;
    assert_int_equal(net_update(c, "10.0.0.5", false, two, 2), 1);
    expect(&r, "vm-11", VS_CHANGE_UPDATED, "ns_a", "-");
    expect_ips(c, "vm-11", "10.0.0.5,192.168.1.2,2001:db8::5", "10.0.0.5");
    assert_int_equal(net_update(c, "10.0.0.5", false, two, 2), 0);
    /* The primary said again (a resync's full state) keeps the others. */
    begin(&b);
    obj_start(&b, "enter", "VirtualMachine", "vm-11");
    ch_str(&b, "name", "xsd:string", "a-0");
    ch_parent(&b, "group-a");
    ch_str(&b, "runtime.powerState", "VirtualMachinePowerState", "poweredOn");
    ch_str(&b, "config.hardware.numCPU", "xsd:int", "2");
    ch_str(&b, "config.hardware.memoryMB", "xsd:int", "2048");
    ch_str(&b, "config.template", "xsd:boolean", "false");
    ch_str(&b, "config.instanceUuid", "xsd:string", "5000-uuid");
    ch_marks(&b, "uid-a", "tmpl-1");
    ch_str(&b, "guest.ipAddress", "xsd:string", "10.0.0.5");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 0);
    expect_ips(c, "vm-11", "10.0.0.5,192.168.1.2,2001:db8::5", "10.0.0.5");
    /* A new primary alone (the watch): the others are dropped until read. */
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-11");
    ch_str(&b, "guest.ipAddress", "xsd:string", "192.168.1.2");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    expect_ips(c, "vm-11", "192.168.1.2", "192.168.1.2");
    /* An IPv6 primary, guest.net before it in the update: IPv4 first, the
     * primary first of the IPv6 ones. */
    assert_int_equal(net_update(c, "2001:db8:0:0::9", true,
                                (const char *const[]){"2001:db8::1,10.0.0.6,2001:db8::9"}, 1),
                     1);
    expect_ips(c, "vm-11", "10.0.0.6,2001:db8::9,2001:db8::1", "2001:db8::9");
    /* More IPv4 addresses than room: the IPv6 primary keeps its place. */
    assert_int_equal(
        net_update(c, NULL, false,
                   (const char *const[]){"10.0.0.1,10.0.0.2", "10.0.0.3,10.0.0.4,10.0.0.5"}, 2),
        1);
    expect_ips(c, "vm-11", "10.0.0.1,10.0.0.2,10.0.0.3,2001:db8::9", "2001:db8::9");
    /* Garbage: only the valid ones. */
    assert_int_equal(net_update(c, "10.0.0.5", false, hostile, 2), 1);
    expect_ips(c, "vm-11", "10.0.0.5,10.0.0.7,2001:db8::1", "10.0.0.5");
    /* A huge value, and guest.net of the wrong shape: the primary alone. */
    memset(huge, '1', sizeof(huge) - 1);
    assert_int_equal(net_update(c, NULL, false, (const char *const[]){huge}, 1), 1);
    expect_ips(c, "vm-11", "10.0.0.5", "10.0.0.5");
    assert_int_equal(net_update(c, NULL, false, two, 2), 1);
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-11");
    ch_str(&b, "guest.net", "xsd:string", "10.0.0.1");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    expect_ips(c, "vm-11", "10.0.0.5", "10.0.0.5");
    /* Too many: 64 addresses looked at (the 65th is not), and 32 NICs. */
    for (int i = 0; i < 40; i++) {
        snprintf(lists[i], sizeof(lists[i]), "x,x,x,x,x,x,x,x");
        nics[i] = lists[i];
    }
    snprintf(lists[8], sizeof(lists[8]), "10.1.0.1"); /* the 65th address */
    assert_int_equal(net_update(c, NULL, false, nics, 9), 0);
    expect_ips(c, "vm-11", "10.0.0.5", "10.0.0.5");
    snprintf(lists[7], sizeof(lists[7]), "x,x,x,x,x,x,x,10.1.0.2"); /* the 64th */
    assert_int_equal(net_update(c, NULL, false, nics, 9), 1);
    expect_ips(c, "vm-11", "10.0.0.5,10.1.0.2", "10.0.0.5");
    for (int i = 0; i < 40; i++) {
        snprintf(lists[i], sizeof(lists[i]), "10.2.0.%d", i + 1);
        nics[i] = i < 32 ? "" : lists[i]; /* 32 empty NICs first */
    }
    assert_int_equal(net_update(c, NULL, false, nics, 40), 1);
    expect_ips(c, "vm-11", "10.0.0.5", "10.0.0.5");
    /* Unset guest.net: the primary alone; an empty primary: none, and
     * guest.net then adds none. */
    assert_int_equal(net_update(c, NULL, false, two, 2), 1);
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-11");
    sb_add(&b, "<changeSet><name>guest.net</name><op>assign</op></changeSet>");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    expect_ips(c, "vm-11", "10.0.0.5", "10.0.0.5");
    assert_int_equal(net_update(c, NULL, false, two, 2), 1);
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-11");
    sb_add(&b, "<changeSet><name>guest.ipAddress</name><op>assign</op></changeSet>");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed(c, &b), 1);
    expect_ips(c, "vm-11", "", "");
    assert_int_equal(net_update(c, NULL, false, two, 2), 0);
    expect_ips(c, "vm-11", "", "");
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
    assert_null(
        vs_cache_new("group-1", 0, &(struct vs_mark_keys){longref, NULL, NULL}, NULL, NULL));
    assert_null(
        vs_cache_new("group-1", 0, &(struct vs_mark_keys){NULL, NULL, longref}, NULL, NULL));
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

/* ---- Assumed changes ---- */

/* assume applies one change of ref (a VM) as a task's result and commits:
 * returns vs_cache_assume's answer. */
static int assume(vs_cache *c, enum vim_kind kind, const char *ref, const struct vim_change *ch,
                  size_t n, uint64_t since, uint64_t asked)
{
    struct vim_object_update u = {.kind = kind, .changes = ch, .n_changes = n};
    int r;

    assert_int_equal(vim_moref_set(&u.obj, "VirtualMachine", ref), 0);
    r = vs_cache_assume(c, &u, since, asked);
    vs_cache_commit(c);
    return r;
}

static int assume_power(vs_cache *c, const char *ref, const char *state, uint64_t since,
                        uint64_t asked)
{
    struct vim_change ch = {.name = "runtime.powerState", .kind = VIM_VAL_ENUM, .str = state};

    return assume(c, VIM_MODIFY, ref, &ch, 1, since, asked);
}

/* feed_from feeds b as the answer to request asked; the read-backs it asks
 * for are added to read_backs. */
static size_t feed_from(vs_cache *c, struct sb *b, uint64_t asked)
{
    size_t n, from = n_read_backs;

    feed_asked = asked;
    n = feed(c, b);
    feed_asked = UINT64_MAX;
    settle_read_backs(c, from);
    return n;
}

/* stream_power feeds a change of ref's power state answering request asked. */
static size_t stream_power(vs_cache *c, const char *ref, const char *state, uint64_t asked)
{
    struct sb b;

    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", ref);
    ch_str(&b, "runtime.powerState", "VirtualMachinePowerState", state);
    sb_add(&b, "</objectSet>");
    return feed_from(c, &b, asked);
}

static void read_backs_reset(void)
{
    n_read_backs = 0;
}

/* An assumed power-off shows at once, reported as any change; an answer to
 * a request sent before it (asked <= 5) that says the same, or changes only
 * the rest, applies without a read-back; the first answer to a later
 * request is newer and overrides. */
static void test_assume_seen_at_once_and_overridden_later(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    uint64_t since = vs_cache_mark(c);
    struct sb b;

    (void)state;
    read_backs_reset();
    r.n = 0;
    assert_int_equal(assume_power(c, "vm-11", "poweredOff", since, 5), 1);
    assert_int_equal(r.n, 1);
    expect(&r, "vm-11", VS_CHANGE_UPDATED, "ns_a", "-");
    assert_false(vs_cache_get(c, "vm-11")->powered_on);
    assert_string_equal(vs_cache_get(c, "vm-11")->power_state, "poweredOff");

    /* Older answers: the same power state and a new name. */
    r.n = 0;
    begin(&b);
    vm(&b, "modify", "vm-11", "a-0-renamed", "group-a", "poweredOff", 2, 2048, "uid-a");
    assert_int_equal(feed_from(c, &b, 5), 1);
    assert_false(vs_cache_get(c, "vm-11")->powered_on);
    assert_string_equal(vs_cache_get(c, "vm-11")->name, "a-0-renamed");
    assert_int_equal(n_read_backs, 0);

    /* Newer: someone powered it on again after the task. */
    r.n = 0;
    assert_int_equal(stream_power(c, "vm-11", "poweredOn", 6), 1);
    assert_true(vs_cache_get(c, "vm-11")->powered_on);
    /* The assumption is over: any later answer applies. */
    assert_int_equal(stream_power(c, "vm-11", "poweredOff", 6), 1);
    assert_false(vs_cache_get(c, "vm-11")->powered_on);
    assert_int_equal(stream_power(c, "vm-11", "poweredOn", 2), 1);
    assert_true(vs_cache_get(c, "vm-11")->powered_on);
    assert_int_equal(n_read_backs, 0);
    vs_cache_free(c);
}

/* An older answer that says another value for a pinned property does not
 * change it, but asks for one read-back of that object (not for a
 * property it did not pin: the size here); the read-back, a request sent
 * after the pin, wins, here confirming the assumption (the older answer
 * was computed before the task ended). */
static void test_assume_older_answer_read_back(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;

    (void)state;
    read_backs_reset();
    assert_int_equal(assume_power(c, "vm-12", "poweredOn", vs_cache_mark(c), 5), 1);
    assert_true(vs_cache_get(c, "vm-12")->powered_on);

    r.n = 0;
    begin(&b);
    vm(&b, "modify", "vm-12", "stray", "group-a", "poweredOff", 4, 1024, NULL);
    assert_int_equal(feed_from(c, &b, 4), 1); /* the CPUs changed */
    assert_true(vs_cache_get(c, "vm-12")->powered_on);
    assert_int_equal(vs_cache_get(c, "vm-12")->num_cpu, 4);
    assert_int_equal(n_read_backs, 1);
    assert_string_equal(read_backs[0], "vm-12");

    /* The read-back answers (request 6): on, as assumed. */
    r.n = 0;
    begin(&b);
    vm(&b, "enter", "vm-12", "stray", "group-a", "poweredOn", 4, 1024, NULL);
    assert_int_equal(feed_from(c, &b, 6), 0);
    assert_true(vs_cache_get(c, "vm-12")->powered_on);
    assert_int_equal(n_read_backs, 1);
    /* The pin is over: the next change the stream shows applies. */
    assert_int_equal(stream_power(c, "vm-12", "poweredOff", 7), 1);
    assert_false(vs_cache_get(c, "vm-12")->powered_on);
    assert_int_equal(n_read_backs, 1);
    vs_cache_free(c);
}

/* One older answer that says off, then on (vcsim's stream: the clone's VM
 * entered before its power-on, then the power-on) ends agreeing with the
 * assumption: no read-back. */
static void test_assume_older_answer_settles_itself(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;

    (void)state;
    read_backs_reset();
    assert_int_equal(assume_power(c, "vm-12", "poweredOn", vs_cache_mark(c), 5), 1);
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-12");
    ch_str(&b, "runtime.powerState", "VirtualMachinePowerState", "poweredOff");
    sb_add(&b, "</objectSet>");
    obj_start(&b, "modify", "VirtualMachine", "vm-12");
    ch_str(&b, "runtime.powerState", "VirtualMachinePowerState", "poweredOn");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed_from(c, &b, 5), 0);
    assert_true(vs_cache_get(c, "vm-12")->powered_on);
    assert_false(vs_cache_disputed(c, "vm-12"));
    assert_int_equal(n_read_backs, 0);
    vs_cache_free(c);
}

/* The out-of-band change: a long poll (request 5) is out when a power-on
 * ends and is assumed; someone powers the VM off by hand; the long poll
 * answers with that power-off, which vCenter's stream never repeats. The
 * cache keeps "on" from the older answer but reads the VM back, and the
 * read-back's "off" wins: the cache ends with the truth. */
static void test_assume_out_of_band_power_off(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);

    (void)state;
    read_backs_reset();
    assert_int_equal(assume_power(c, "vm-12", "poweredOn", vs_cache_mark(c), 5), 1);
    assert_int_equal(stream_power(c, "vm-12", "poweredOff", 5), 0);
    assert_int_equal(n_read_backs, 1);
    assert_string_equal(read_backs[0], "vm-12");

    r.n = 0;
    assert_int_equal(stream_power(c, "vm-12", "poweredOff", 6), 1);
    expect(&r, "vm-12", VS_CHANGE_UPDATED, "ns_a", "-");
    assert_false(vs_cache_get(c, "vm-12")->powered_on);
    assert_string_equal(vs_cache_get(c, "vm-12")->power_state, "poweredOff");
    assert_int_equal(n_read_backs, 1);
    vs_cache_free(c);
}

/* A newer answer that mentions the VM but not the disputed property (the
 * CPUs changed) does not end the dispute: the power state stays pinned and
 * disputed until the read-back, whose "off" wins. */
static void test_assume_dispute_outlives_other_changes(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;

    (void)state;
    read_backs_reset();
    assert_int_equal(assume_power(c, "vm-12", "poweredOn", vs_cache_mark(c), 5), 1);
    assert_int_equal(stream_power(c, "vm-12", "poweredOff", 5), 0);
    assert_int_equal(n_read_backs, 1);
    assert_true(vs_cache_disputed(c, "vm-12"));

    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-12");
    ch_str(&b, "config.hardware.numCPU", "xsd:int", "4");
    sb_add(&b, "</objectSet>");
    assert_int_equal(feed_from(c, &b, 6), 1);
    assert_int_equal(vs_cache_get(c, "vm-12")->num_cpu, 4);
    assert_true(vs_cache_get(c, "vm-12")->powered_on);
    assert_true(vs_cache_disputed(c, "vm-12"));

    /* The read-back (request 7) answers: off. */
    r.n = 0;
    begin(&b);
    vm(&b, "enter", "vm-12", "stray", "group-a", "poweredOff", 4, 1024, NULL);
    assert_int_equal(feed_from(c, &b, 7), 1);
    assert_false(vs_cache_get(c, "vm-12")->powered_on);
    assert_false(vs_cache_disputed(c, "vm-12"));
    vs_cache_free(c);
}

/* An assumption made while a resync's full state is out does not keep an
 * object that full state lacks (deleted by hand meanwhile): no ghost. */
static void test_assume_during_resync(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;

    (void)state;
    read_backs_reset();
    vs_cache_begin_resync(c);
    assert_int_equal(assume_power(c, "vm-12", "poweredOn", vs_cache_mark(c), 5), 1);
    r.n = 0;
    begin(&b);
    vm(&b, "enter", "vm-11", "a-0", "group-a", "poweredOn", 2, 2048, "uid-a");
    vm(&b, "enter", "vm-13", "b-0", "group-b", "poweredOn", 1, 1024, "uid-b");
    vm(&b, "enter", "vm-14", "deep", "group-s", "poweredOn", 1, 1024, NULL);
    vm(&b, "enter", "vm-15", "loose", "group-1", "poweredOn", 1, 1024, NULL);
    folder(&b, "enter", "group-s", "sub", "group-a");
    folder(&b, "enter", "group-a", "ns_a", "group-1");
    folder(&b, "enter", "group-b", "ns_b", "group-1");
    assert_int_equal(feed_from(c, &b, 6), 0);
    assert_int_equal(vs_cache_end_resync(c), 1);
    expect(&r, "vm-12", VS_CHANGE_REMOVED, "ns_a", "-");
    assert_null(vs_cache_get(c, "vm-12"));
    vs_cache_free(c);
}

/* A power state the watch reported after the operation started may be
 * newer than the task's result: the assumption leaves it (0), unless it
 * says the same. The CPUs and memory are assumed apart from the power
 * state, and from each other. */
static void test_assume_does_not_overwrite_newer(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    uint64_t since = vs_cache_mark(c);
    struct vim_change size[2] = {
        {.name = "config.hardware.numCPU", .kind = VIM_VAL_INT, .num = 4},
        {.name = "config.hardware.memoryMB", .kind = VIM_VAL_INT, .num = 4096},
    };
    struct sb b;

    (void)state;
    read_backs_reset();
    /* vm-11: powered off by the task, then on again by someone, which the
     * watch showed before the task's end was learned. */
    assert_int_equal(stream_power(c, "vm-11", "poweredOff", 3), 1);
    assert_int_equal(stream_power(c, "vm-11", "poweredOn", 4), 1);
    r.n = 0;
    assert_int_equal(assume_power(c, "vm-11", "poweredOff", since, 4), 0);
    assert_int_equal(r.n, 0);
    assert_true(vs_cache_get(c, "vm-11")->powered_on);
    /* Its CPUs were not reported since: they are assumed, and pinned
     * alone: an older answer with another memory size changes that. */
    assert_int_equal(assume(c, VIM_MODIFY, "vm-11", size, 1, since, 4), 1);
    assert_int_equal(vs_cache_get(c, "vm-11")->num_cpu, 4);
    begin(&b);
    vm(&b, "modify", "vm-11", "a-0", "group-a", "poweredOn", 4, 8192, "uid-a");
    assert_int_equal(feed_from(c, &b, 3), 1);
    assert_int_equal(vs_cache_get(c, "vm-11")->num_cpu, 4);
    assert_int_equal(vs_cache_get(c, "vm-11")->memory_mb, 8192);
    assert_int_equal(n_read_backs, 0);

    /* vm-13: the watch showed the same end first: nothing lost. */
    assert_int_equal(stream_power(c, "vm-13", "poweredOff", 4), 1);
    assert_int_equal(assume_power(c, "vm-13", "poweredOff", since, 4), 1);
    assert_false(vs_cache_get(c, "vm-13")->powered_on);

    /* An object the cache does not know is left to the watch. */
    assert_int_equal(assume_power(c, "vm-77", "poweredOn", since, 4), 0);
    assert_null(vs_cache_get(c, "vm-77"));
    vs_cache_free(c);
}

/* A destroyed VM goes at once; an older answer that still shows it does
 * not bring it back (a destroyed VM never comes back), until
 * vs_cache_settle says no such answer can come. */
static void test_assume_gone(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;

    (void)state;
    read_backs_reset();
    r.n = 0;
    assert_int_equal(assume(c, VIM_LEAVE, "vm-11", NULL, 0, vs_cache_mark(c), 7), 1);
    assert_int_equal(r.n, 1);
    expect(&r, "vm-11", VS_CHANGE_REMOVED, "ns_a", "-");
    assert_null(vs_cache_get(c, "vm-11"));
    assert_int_equal(vs_cache_children(c, "group-a", true, NULL, 0), 1);

    r.n = 0;
    begin(&b);
    vm(&b, "enter", "vm-11", "a-0", "group-a", "poweredOn", 2, 2048, "uid-a");
    assert_int_equal(feed_from(c, &b, 7), 0);
    assert_int_equal(stream_power(c, "vm-11", "poweredOff", 6), 0);
    assert_null(vs_cache_get(c, "vm-11"));
    assert_int_equal(vs_cache_marked(c, "uid-a", NULL, 0), 0);
    /* Ignored, but read back once: a server may give a moref again. */
    assert_int_equal(n_read_backs, 1);
    assert_string_equal(read_backs[0], "vm-11");

    /* The read-back (8) says it went: settled, nothing more to read. */
    begin(&b);
    leave(&b, "VirtualMachine", "vm-11");
    assert_int_equal(feed_from(c, &b, 8), 0);
    assert_null(vs_cache_get(c, "vm-11"));
    assert_false(vs_cache_disputed(c, "vm-11"));

    /* Settled: a later answer is believed (this is only the rule at
     * work). */
    assert_int_equal(assume(c, VIM_LEAVE, "vm-12", NULL, 0, vs_cache_mark(c), 9), 1);
    vs_cache_settle(c, 10);
    begin(&b);
    vm(&b, "enter", "vm-12", "stray", "group-a", "poweredOff", 1, 1024, NULL);
    assert_int_equal(feed_from(c, &b, 9), 1);
    assert_non_null(vs_cache_get(c, "vm-12"));
    vs_cache_free(c);
}

/* clone_result: what a clone of a-1 into ns_a with 2 CPUs, 2 GiB and the
 * marks did, as vsphere/ops builds it. */
static const struct vim_change clone_result[] = {
    {.name = "name", .kind = VIM_VAL_STRING, .str = "a-1"},
    {.name = "parent", .kind = VIM_VAL_MOREF, .ref_type = "Folder", .ref_value = "group-a"},
    {.name = "runtime.powerState", .kind = VIM_VAL_ENUM, .str = "poweredOn"},
    {.name = "config.hardware.numCPU", .kind = VIM_VAL_INT, .num = 2},
    {.name = "config.hardware.memoryMB", .kind = VIM_VAL_INT, .num = 2048},
    {.name = "config.extraConfig[\"" MARK_UID_KEY "\"]", .kind = VIM_VAL_STRING, .str = "uid-a"},
    {.name = "config.extraConfig[\"" MARK_TEMPLATE_KEY "\"]",
     .kind = VIM_VAL_STRING,
     .str = "tmpl-1"},
};

/* A clone's VM enters from the task's result with the name, folder, size,
 * marks and power state of its spec. An older answer's ENTER from before
 * the clone powered it on (vcsim ends the clone's task first) adds what it
 * knows, keeps the power state and asks for a read-back, whose answer
 * wins, even when it is still off (vcsim powering on): the stream's later
 * update then says on, and is not kept out by any pin. */
static void test_assume_clone(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    uint64_t since = vs_cache_mark(c);
    const struct vs_obj *o, *list[8];
    struct sb b;

    (void)state;
    read_backs_reset();
    r.n = 0;
    assert_int_equal(assume(c, VIM_ENTER, "vm-20", clone_result, 7, since, 3), 1);
    assert_int_equal(r.n, 1);
    expect(&r, "vm-20", VS_CHANGE_ADDED, "ns_a", "-");
    o = vs_cache_get(c, "vm-20");
    assert_string_equal(o->name, "a-1");
    assert_true(o->powered_on);
    assert_int_equal(o->num_cpu, 2);
    assert_int_equal(o->memory_mb, 2048);
    assert_true(o->has_mark_uid);
    assert_string_equal(o->mark_template, "tmpl-1");
    assert_int_equal(o->create_order, 20);
    assert_int_equal(vs_cache_marked(c, "uid-a", list, 8), 2);
    assert_int_equal(vs_cache_children(c, "group-a", true, NULL, 0), 3);

    begin(&b);
    vm(&b, "enter", "vm-20", "a-1", "group-a", "poweredOff", 2, 2048, "uid-a");
    assert_int_equal(feed_from(c, &b, 3), 1); /* the instance UUID is new */
    o = vs_cache_get(c, "vm-20");
    assert_true(o->powered_on);
    assert_string_equal(o->instance_uuid, "5000-uuid");
    assert_string_equal(o->mark_uid, "uid-a");
    assert_int_equal(n_read_backs, 1);
    assert_string_equal(read_backs[0], "vm-20");
    /* The read-back (4) finds it still off; the stream (5) then on. */
    assert_int_equal(stream_power(c, "vm-20", "poweredOff", 4), 1);
    assert_false(vs_cache_get(c, "vm-20")->powered_on);
    assert_int_equal(stream_power(c, "vm-20", "poweredOn", 5), 1);
    assert_true(vs_cache_get(c, "vm-20")->powered_on);
    assert_int_equal(n_read_backs, 1);

    /* vm-21, vm-22: the watch entered them (off) before the clone's end was
     * known: most likely before the power-on (vcsim's order), so the clone's
     * result holds, merged into what the watch said, and the power state is
     * disputed until the stream shows the power-on (vm-21) or a read says
     * off (vm-22, powered off by hand). */
    begin(&b);
    vm(&b, "enter", "vm-21", "a-2", "group-a", "poweredOff", 2, 2048, "uid-a");
    vm(&b, "enter", "vm-22", "a-3", "group-a", "poweredOff", 2, 2048, "uid-a");
    assert_int_equal(feed_from(c, &b, 4), 2);
    assert_int_equal(assume(c, VIM_ENTER, "vm-21", clone_result + 2, 1, since, 5), 1);
    assert_int_equal(assume(c, VIM_ENTER, "vm-22", clone_result + 2, 1, since, 5), 1);
    o = vs_cache_get(c, "vm-21");
    assert_true(o->powered_on);
    assert_string_equal(o->name, "a-2");
    assert_string_equal(o->instance_uuid, "5000-uuid"); /* merged, not replaced */
    assert_true(vs_cache_disputed(c, "vm-21"));
    assert_true(vs_cache_disputed(c, "vm-22"));
    assert_int_equal(stream_power(c, "vm-21", "poweredOn", 5), 0);
    assert_false(vs_cache_disputed(c, "vm-21"));
    assert_int_equal(stream_power(c, "vm-22", "poweredOff", 6), 1);
    assert_false(vs_cache_get(c, "vm-22")->powered_on);
    assert_false(vs_cache_disputed(c, "vm-22"));
    assert_int_equal(n_read_backs, 1);
    vs_cache_free(c);
}

/* An assumed instance mark (vsphere/ops' mark of a VM cloned before it)
 * is pinned as the power state is: an older answer whose extraConfig
 * lacks it (computed before the task ended) does not clear it, and asks
 * for a read-back; a newer answer that lacks it does. */
static void test_assume_instance_mark_pinned(void **state)
{
    static const struct vim_change mark = {.name = "config.extraConfig[\"" MARK_INSTANCE_KEY "\"]",
                                           .kind = VIM_VAL_STRING,
                                           .str = "5000-uuid"};
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;

    (void)state;
    read_backs_reset();
    assert_false(vs_cache_get(c, "vm-11")->has_mark_instance);
    assert_int_equal(assume(c, VIM_MODIFY, "vm-11", &mark, 1, vs_cache_mark(c), 5), 1);
    assert_true(vs_cache_get(c, "vm-11")->has_mark_instance);
    assert_string_equal(vs_cache_get(c, "vm-11")->mark_instance, "5000-uuid");

    /* Older: the whole extraConfig, without the mark. */
    begin(&b);
    vm(&b, "modify", "vm-11", "a-0", "group-a", "poweredOn", 2, 2048, "uid-a");
    (void)feed_from(c, &b, 5);
    assert_true(vs_cache_get(c, "vm-11")->has_mark_instance);
    assert_string_equal(vs_cache_get(c, "vm-11")->mark_instance, "5000-uuid");
    assert_int_equal(n_read_backs, 1);
    assert_string_equal(read_backs[0], "vm-11");

    /* Newer (the read-back): it holds no mark, someone removed it. */
    begin(&b);
    vm(&b, "modify", "vm-11", "a-0", "group-a", "poweredOn", 2, 2048, "uid-a");
    (void)feed_from(c, &b, 6);
    assert_false(vs_cache_get(c, "vm-11")->has_mark_instance);
    assert_false(vs_cache_disputed(c, "vm-11"));
    vs_cache_free(c);
}

/* A clone's marks (uid and template), which decide its group, are pinned
 * as its power state is: an older answer whose extraConfig lacks them
 * (computed while vCenter was still making the VM) does not make the VM a
 * stranger in its folder, which its group would replace by another clone,
 * and asks for a read-back; a newer answer that lacks them is believed. */
static void test_assume_clone_marks_pinned(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    const struct vs_obj *o;
    struct sb b;

    (void)state;
    read_backs_reset();
    assert_int_equal(assume(c, VIM_ENTER, "vm-20", clone_result, 7, vs_cache_mark(c), 3), 1);
    assert_int_equal(vs_cache_marked(c, "uid-a", NULL, 0), 2);

    /* Older: the whole VM, its extraConfig without the marks. */
    begin(&b);
    vm(&b, "enter", "vm-20", "a-1", "group-a", "poweredOn", 2, 2048, NULL);
    (void)feed_from(c, &b, 3);
    o = vs_cache_get(c, "vm-20");
    assert_true(o->has_mark_uid);
    assert_string_equal(o->mark_uid, "uid-a");
    assert_string_equal(o->mark_template, "tmpl-1");
    assert_int_equal(vs_cache_marked(c, "uid-a", NULL, 0), 2);
    assert_true(vs_cache_disputed(c, "vm-20"));
    assert_int_equal(n_read_backs, 1);
    assert_string_equal(read_backs[0], "vm-20");

    /* Newer, but of the template mark alone: the uid mark stays pinned
     * and disputed, each mark apart. */
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-20");
    ch_extra(&b, MARK_TEMPLATE_KEY, "tmpl-2");
    sb_add(&b, "</objectSet>");
    (void)feed_from(c, &b, 4);
    o = vs_cache_get(c, "vm-20");
    assert_string_equal(o->mark_template, "tmpl-2");
    assert_string_equal(o->mark_uid, "uid-a");
    assert_true(vs_cache_disputed(c, "vm-20"));

    /* Newer (the read-back): no marks, someone removed them. */
    begin(&b);
    vm(&b, "enter", "vm-20", "a-1", "group-a", "poweredOn", 2, 2048, NULL);
    (void)feed_from(c, &b, 5);
    o = vs_cache_get(c, "vm-20");
    assert_false(o->has_mark_uid);
    assert_false(o->has_mark_template);
    assert_int_equal(vs_cache_marked(c, "uid-a", NULL, 0), 1);
    assert_false(vs_cache_disputed(c, "vm-20"));
    vs_cache_free(c);
}

/* A clone destroyed by hand right after its task ended: the long poll sent
 * before the clone's end was learned answers with the VM gone (or entered
 * and gone). The removal is believed whatever the answer's age: no ghost
 * stays in the cache, and nothing need be read back. */
static void test_assume_clone_destroyed_by_hand(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;

    (void)state;
    read_backs_reset();
    assert_int_equal(assume(c, VIM_ENTER, "vm-20", clone_result, 7, vs_cache_mark(c), 3), 1);
    assert_non_null(vs_cache_get(c, "vm-20"));
    r.n = 0;
    begin(&b);
    leave(&b, "VirtualMachine", "vm-20");
    assert_int_equal(feed_from(c, &b, 3), 1);
    expect(&r, "vm-20", VS_CHANGE_REMOVED, "ns_a", "-");
    assert_null(vs_cache_get(c, "vm-20"));
    assert_int_equal(vs_cache_marked(c, "uid-a", NULL, 0), 1);

    /* And a power-on assumed while the answer was out: the same. */
    assert_int_equal(assume_power(c, "vm-12", "poweredOn", vs_cache_mark(c), 4), 1);
    begin(&b);
    leave(&b, "VirtualMachine", "vm-12");
    assert_int_equal(feed_from(c, &b, 4), 1);
    assert_null(vs_cache_get(c, "vm-12"));
    assert_int_equal(vs_cache_children(c, "group-a", true, NULL, 0), 1);
    assert_int_equal(n_read_backs, 0);
    vs_cache_free(c);
}

/* vcsim, restarted, gives morefs again: a VM assumed gone whose moref an
 * older answer shows is read back, the tomb outliving vs_cache_settle
 * until the read says; a VM the operator itself clones with such a moref
 * is simply entered. */
static void test_assume_gone_moref_given_again(void **state)
{
    struct rec r;
    vs_cache *c = setup(&r);
    struct sb b;

    (void)state;
    read_backs_reset();
    assert_int_equal(assume(c, VIM_LEAVE, "vm-11", NULL, 0, vs_cache_mark(c), 7), 1);
    assert_int_equal(assume(c, VIM_LEAVE, "vm-12", NULL, 0, vs_cache_mark(c), 7), 1);
    begin(&b);
    vm(&b, "enter", "vm-11", "other", "group-b", "poweredOn", 1, 1024, NULL);
    assert_int_equal(feed_from(c, &b, 6), 0);
    assert_null(vs_cache_get(c, "vm-11"));
    assert_int_equal(n_read_backs, 1);
    vs_cache_settle(c, 9);
    assert_true(vs_cache_disputed(c, "vm-11"));
    begin(&b);
    vm(&b, "enter", "vm-11", "other", "group-b", "poweredOn", 1, 1024, NULL);
    assert_int_equal(feed_from(c, &b, 9), 1); /* the read-back */
    assert_string_equal(vs_cache_get(c, "vm-11")->name, "other");
    assert_false(vs_cache_disputed(c, "vm-11"));

    /* vm-12, given again to the operator's own clone. */
    r.n = 0;
    assert_int_equal(assume(c, VIM_ENTER, "vm-12", clone_result, 2, vs_cache_mark(c), 8), 1);
    expect(&r, "vm-12", VS_CHANGE_ADDED, "ns_a", "-");
    begin(&b);
    vm(&b, "enter", "vm-12", "a-1", "group-a", "poweredOn", 2, 2048, "uid-a");
    assert_int_equal(feed_from(c, &b, 7), 1);
    assert_string_equal(vs_cache_get(c, "vm-12")->mark_uid, "uid-a");
    assert_int_equal(n_read_backs, 1);
    vs_cache_free(c);
}

/* inv_open makes a watch on loop with the default configuration whose
 * session is never used (nothing is sent); inv_close closes it and loop. */
static vs_inventory *inv_open(uv_loop_t *loop)
{
    static int dummy;
    struct vs_inventory_config cfg = {0};
    vs_inventory *inv;
    int e = 0;

    assert_int_equal(uv_loop_init(loop), 0);
    inv = vs_inventory_new(loop, (vs_session *)&dummy, &cfg, NULL, NULL, &e);
    assert_non_null(inv);
    return inv;
}

static void inv_close(vs_inventory *inv, uv_loop_t *loop)
{
    vs_inventory_close(inv, NULL, NULL);
    assert_int_equal(uv_run(loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(loop), 0);
}

/* queue_n queues reads of vm-FROM to vm-(FROM+N-1) with queue, each of
 * which says want. */
static void queue_n(vs_inventory *inv, int from, int n,
                    bool (*queue)(vs_inventory *inv, const char *vm_ref), bool want)
{
    char ref[32];

    for (int i = from; i < from + n; i++) {
        snprintf(ref, sizeof(ref), "vm-%d", i);
        assert_true(queue(inv, ref) == want);
    }
}

/* A dispute that cannot be queued (the read-back queue is full) is not
 * lost: the watch is to be rebuilt, whose full state decides. The session
 * is never used: nothing is sent. */
static void test_dispute_queue_full_rebuilds(void **state)
{
    uv_loop_t loop;
    vs_inventory *inv;

    (void)state;
    inv = inv_open(&loop);
    queue_n(inv, 0, 1024, vs_inventory_testing_dispute, false);
    assert_false(vs_inventory_testing_dispute(inv, "vm-0")); /* queued already */
    assert_true(vs_inventory_testing_dispute(inv, "vm-1024"));
    inv_close(inv, &loop);
}

/* Reads sent again after they failed are best-effort: with the queue full
 * of them (a storm of failures), a dispute's read takes the place of the
 * last one instead of being lost (which rebuilds the watch), and another
 * failed read is not queued in another's place. */
static void test_failed_reads_give_way_to_a_dispute(void **state)
{
    uv_loop_t loop;
    vs_inventory *inv;

    (void)state;
    inv = inv_open(&loop);
    queue_n(inv, 0, 1024, vs_inventory_testing_read_failed, true);
    assert_false(vs_inventory_testing_read_failed(inv, "vm-3000"));
    assert_int_equal(vs_inventory_testing_position(inv, "vm-1023"), 1023);
    assert_false(vs_inventory_testing_dispute(inv, "vm-2000")); /* not lost */
    assert_int_equal(vs_inventory_testing_kind(inv, "vm-2000"), 1);
    assert_int_equal(vs_inventory_testing_position(inv, "vm-1023"), SIZE_MAX);
    assert_int_equal(vs_inventory_testing_position(inv, "vm-1022"), 1022);
    /* Disputes only, now: the next one cannot be queued. */
    queue_n(inv, 4000, 1023, vs_inventory_testing_dispute, false);
    assert_int_equal(vs_inventory_testing_position(inv, "vm-0"), SIZE_MAX);
    assert_true(vs_inventory_testing_dispute(inv, "vm-5100"));
    inv_close(inv, &loop);
}

/* inv_feed applies the UpdateSet in b as the inventory's watch does (and
 * frees its text), as part of a full state when full. */
static void inv_feed_full(vs_inventory *inv, struct sb *b, bool full)
{
    soap_resp *resp = NULL;

    sb_add(b, "</filterSet></returnval></WaitForUpdatesExResponse></soapenv:Body>"
              "</soapenv:Envelope>");
    assert_int_equal(soap_parse(b->p, b->n, 64u << 20, &resp, NULL), 0);
    assert_int_equal(vs_inventory_testing_watch(inv, resp, "group-1", full), 0);
    soap_resp_free(resp);
    free(b->p);
    b->p = NULL;
}

static void inv_feed(vs_inventory *inv, struct sb *b)
{
    inv_feed_full(inv, b, false);
}

/* inv_ip feeds guest.ipAddress = ip (NULL: unset) of vm_ref, kind "enter"
 * or "modify", with guest.net when net. */
static void inv_ip(vs_inventory *inv, const char *kind, const char *vm_ref, const char *ip,
                   bool net)
{
    struct sb b;

    begin(&b);
    obj_start(&b, kind, "VirtualMachine", vm_ref);
    ch_str(&b, "name", "xsd:string", vm_ref);
    ch_parent(&b, "group-a");
    if (ip)
        ch_str(&b, "guest.ipAddress", "xsd:string", ip);
    else if (strcmp(kind, "modify") == 0)
        sb_add(&b, "<changeSet><name>guest.ipAddress</name><op>assign</op></changeSet>");
    if (net)
        guest_net(&b, (const char *const[]){"10.9.0.1"}, 1);
    sb_add(&b, "</objectSet>");
    inv_feed(inv, &b);
}

/* The watch's guest.ipAddress: a VM that enters with one, or whose one
 * changes, is read once (the read asks for guest.net, which the watch does
 * not); the same address again (a resync), an empty one, an update that
 * carries guest.net, another property or a folder is not. The session is
 * never used: the reads are only queued (and taken off the queue here). */
static void test_guest_change_queues_one_read(void **state)
{
    uv_loop_t loop;
    vs_inventory *inv;
    const char *const *paths;
    size_t n;
    struct sb b;
    char ip[VS_IP_LEN];

    (void)state;
    inv = inv_open(&loop);
    n = vs_inventory_testing_read_paths(inv, &paths);
    assert_true(n > 0);
    assert_string_equal(paths[n - 1], "guest.net");
    begin(&b);
    folder(&b, "enter", "group-a", "ns_a", "group-1");
    inv_feed(inv, &b);
    inv_ip(inv, "enter", "vm-1", "10.0.0.1", false);
    inv_ip(inv, "enter", "vm-2", NULL, false);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-1"), 1);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-1"), 0); /* taken */
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-2"), 0);
    assert_int_equal(vs_inventory_testing_queued(inv, "group-a"), 0);
    /* A change: one read, however many changes before it is sent. */
    inv_ip(inv, "modify", "vm-2", "10.0.0.2", false);
    inv_ip(inv, "modify", "vm-2", "10.0.0.3", false);
    inv_ip(inv, "modify", "vm-2", "2001:db8::3", false);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-2"), 1);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-2"), 0);
    /* The same again, an update of something else: no read. */
    inv_ip(inv, "modify", "vm-2", "2001:db8:0::3", false);
    inv_ip(inv, "enter", "vm-2", "2001:db8::3", false);
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-2");
    ch_str(&b, "runtime.powerState", "VirtualMachinePowerState", "poweredOff");
    sb_add(&b, "</objectSet>");
    inv_feed(inv, &b);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-2"), 0);
    /* Empty, garbage: no address, no read. */
    inv_ip(inv, "modify", "vm-2", NULL, false);
    inv_ip(inv, "modify", "vm-2", "fe80::1", false);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-2"), 0);
    vs_obj_ip(vs_cache_get(vs_inventory_testing_cache(inv), "vm-2"), ip);
    assert_string_equal(ip, "");
    /* An update with guest.net (what a read brings) needs no read. */
    inv_ip(inv, "modify", "vm-2", "10.0.0.4", true);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-2"), 0);
    assert_int_equal(vs_cache_get(vs_inventory_testing_cache(inv), "vm-2")->n_ip, 2);
    /* A full state (the watch rebuilt) reads every VM with an address
     * again, keeping what it has meanwhile: a change of the others alone
     * is seen then. */
    begin(&b);
    obj_start(&b, "enter", "VirtualMachine", "vm-2");
    ch_str(&b, "guest.ipAddress", "xsd:string", "10.0.0.4");
    sb_add(&b, "</objectSet>");
    obj_start(&b, "enter", "VirtualMachine", "vm-1");
    sb_add(&b, "</objectSet>");
    inv_feed_full(inv, &b, true);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-2"), 1);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-1"), 0);
    assert_int_equal(vs_cache_get(vs_inventory_testing_cache(inv), "vm-2")->n_ip, 2);
    /* The reads for guests' addresses go after the others: a dispute, or a
     * reconfiguration's read, is not kept waiting behind them. */
    inv_ip(inv, "modify", "vm-2", "10.0.0.5", false);
    inv_ip(inv, "enter", "vm-4", "10.0.0.8", false);
    assert_false(vs_inventory_testing_dispute(inv, "vm-3"));
    assert_int_equal(vs_inventory_testing_position(inv, "vm-3"), 0);
    assert_int_equal(vs_inventory_testing_position(inv, "vm-2"), 1);
    assert_int_equal(vs_inventory_testing_position(inv, "vm-4"), 2);
    /* A VM queued for its guest alone, then disputed: one read, moved up,
     * that waits for its long poll as a dispute does and is sent even if
     * the dispute settles (the guest's addresses are still wanted). */
    assert_int_equal(vs_inventory_testing_kind(inv, "vm-4"), 4);
    assert_false(vs_inventory_testing_dispute(inv, "vm-4"));
    assert_int_equal(vs_inventory_testing_position(inv, "vm-4"), 1);
    assert_int_equal(vs_inventory_testing_position(inv, "vm-2"), 2);
    assert_int_equal(vs_inventory_testing_kind(inv, "vm-4"), 1 | 2);
    /* Disputed first, then its guest's address changes: still a dispute,
     * now wanted whatever it settles to. */
    assert_int_equal(vs_inventory_testing_kind(inv, "vm-3"), 1);
    inv_ip(inv, "modify", "vm-3", "10.0.0.9", false);
    assert_int_equal(vs_inventory_testing_kind(inv, "vm-3"), 1 | 2);
    assert_int_equal(vs_inventory_testing_position(inv, "vm-3"), 0);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-3"), 1);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-2"), 1);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-4"), 1);
    /* At most half the queue waits for guests' addresses. */
    for (int i = 0; i < 600; i++) {
        char ref[32], addr[32];
        snprintf(ref, sizeof(ref), "vm-%d", 100 + i);
        snprintf(addr, sizeof(addr), "10.1.%d.%d", i / 200, i % 200 + 1);
        inv_ip(inv, "enter", ref, addr, false);
    }
    n = 0;
    for (int i = 0; i < 600; i++) {
        char ref[32];
        snprintf(ref, sizeof(ref), "vm-%d", 100 + i);
        n += vs_inventory_testing_queued(inv, ref);
    }
    assert_int_equal(n, 512);
    /* A full queue: a dispute takes the place of the last read only for a
     * guest instead of being lost (which would rebuild the watch). */
    for (int i = 0; i < 512; i++) {
        char ref[32], addr[32];
        snprintf(ref, sizeof(ref), "vm-%d", 2000 + i);
        snprintf(addr, sizeof(addr), "10.2.%d.%d", i / 200, i % 200 + 1);
        inv_ip(inv, "enter", ref, addr, false);
    }
    for (int i = 0; i < 512; i++) {
        char ref[32];
        snprintf(ref, sizeof(ref), "vm-%d", 5000 + i);
        assert_false(vs_inventory_testing_dispute(inv, ref));
    }
    assert_false(vs_inventory_testing_dispute(inv, "vm-6000"));
    assert_int_equal(vs_inventory_testing_kind(inv, "vm-6000"), 1);
    assert_int_equal(vs_inventory_testing_kind(inv, "vm-2511"), -1); /* the last guest read */
    assert_int_equal(vs_inventory_testing_kind(inv, "vm-2510"), 4);
    inv_close(inv, &loop);
}

/* inv_read_answer applies a read's answer of vm_ref: its name and, when
 * parent is not NULL, its parent folder. */
static void inv_read_answer(vs_inventory *inv, const char *vm_ref, const char *parent)
{
    struct sb b = {0};
    soap_resp *resp = NULL;

    sb_add(&b,
           "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
           "<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" "
           "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"><soapenv:Body>"
           "<RetrievePropertiesExResponse xmlns=\"urn:vim25\"><returnval><objects>"
           "<obj type=\"VirtualMachine\">%s</obj><propSet><name>name</name>"
           "<val xsi:type=\"xsd:string\">%s</val></propSet>",
           vm_ref, vm_ref);
    if (parent)
        sb_add(&b,
               "<propSet><name>parent</name><val type=\"Folder\" "
               "xsi:type=\"ManagedObjectReference\">%s</val></propSet>",
               parent);
    sb_add(&b, "</objects></returnval></RetrievePropertiesExResponse></soapenv:Body>"
               "</soapenv:Envelope>");
    assert_int_equal(soap_parse(b.p, b.n, 64u << 20, &resp, NULL), 0);
    assert_int_equal(vs_inventory_testing_read_answer(inv, resp), 0);
    soap_resp_free(resp);
    free(b.p);
}

/* inv_leave feeds the watch's leave of vm_ref. */
static void inv_leave(vs_inventory *inv, const char *vm_ref)
{
    struct sb b;

    begin(&b);
    obj_start(&b, "leave", "VirtualMachine", vm_ref);
    sb_add(&b, "</objectSet>");
    inv_feed(inv, &b);
}

/* A VM the watch says left (deleted, or moved out of the root folder) is
 * not brought back by a read: its queued reads go, the answer of the one
 * out (computed before, maybe) is dropped, and a read's answer of a VM
 * the cache does not hold, under a folder the watch does not cover, is
 * too. A clone's VM read before the watch shows it still enters. */
static void test_read_brings_back_no_vm_that_left(void **state)
{
    const vs_cache *c;
    uv_loop_t loop;
    vs_inventory *inv;
    struct sb b;

    (void)state;
    inv = inv_open(&loop);
    begin(&b);
    folder(&b, "enter", "group-a", "ns_a", "group-1");
    inv_feed(inv, &b);
    c = vs_inventory_testing_cache(inv);
    inv_ip(inv, "enter", "vm-1", "10.0.0.1", false);
    inv_ip(inv, "enter", "vm-2", "10.0.0.2", false);
    assert_int_equal(vs_inventory_testing_position(inv, "vm-1"), 0);
    /* Queued, then gone: the read goes with it. */
    inv_leave(inv, "vm-1");
    assert_null(vs_cache_get(c, "vm-1"));
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-1"), 0);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-2"), 1);
    /* Out, then gone: its answer does not bring it back. */
    assert_int_equal(vs_inventory_testing_read_sent(inv, "vm-2"), 0);
    inv_leave(inv, "vm-2");
    inv_read_answer(inv, "vm-2", "group-a");
    assert_null(vs_cache_get(c, "vm-2"));
    /* Read after it left, now under a folder out of the watch's sight. */
    assert_int_equal(vs_inventory_testing_read_sent(inv, "vm-1"), 0);
    inv_read_answer(inv, "vm-1", "group-elsewhere");
    assert_null(vs_cache_get(c, "vm-1"));
    /* A clone's VM, read before the watch shows it: in the group's folder,
     * or under the root folder itself. */
    assert_int_equal(vs_inventory_testing_read_sent(inv, "vm-3"), 0);
    inv_read_answer(inv, "vm-3", "group-a");
    assert_non_null(vs_cache_get(c, "vm-3"));
    assert_int_equal(vs_inventory_testing_read_sent(inv, "vm-4"), 0);
    inv_read_answer(inv, "vm-4", "group-1");
    assert_non_null(vs_cache_get(c, "vm-4"));
    /* A VM the cache holds follows what the read says. */
    assert_int_equal(vs_inventory_testing_read_sent(inv, "vm-3"), 0);
    inv_read_answer(inv, "vm-3", "group-1");
    assert_string_equal(vs_cache_get(c, "vm-3")->parent, "group-1");
    inv_close(inv, &loop);
}

/* inv_version feeds an update of vm_ref (kind "enter" or "modify") with
 * config.changeVersion = version (NULL: none), and its CPUs when cpu > 0. */
static void inv_version(vs_inventory *inv, const char *kind, const char *vm_ref,
                        const char *version, int cpu)
{
    struct sb b;
    char n[16];

    begin(&b);
    obj_start(&b, kind, "VirtualMachine", vm_ref);
    if (strcmp(kind, "enter") == 0) {
        ch_str(&b, "name", "xsd:string", vm_ref);
        ch_parent(&b, "group-a");
    }
    if (cpu > 0) {
        snprintf(n, sizeof(n), "%d", cpu);
        ch_str(&b, "config.hardware.numCPU", "xsd:int", n);
    }
    if (version)
        ch_str(&b, "config.changeVersion", "xsd:string", version);
    sb_add(&b, "</objectSet>");
    inv_feed(inv, &b);
}

/* A reconfiguration announced by config.changeVersion alone (vcsim's way)
 * has the VM read once, for its values; a late announcement of the
 * version the cache holds the values of already (a lagging stream sends a
 * clone's after the full state, or the read, that showed the VM with it)
 * has it read no more: it was a read of every VM when the operator was
 * otherwise idle. The session is never used: the reads are only queued. */
static void test_change_version_read_once(void **state)
{
    uv_loop_t loop;
    vs_inventory *inv;
    const char *const *paths;
    size_t n;
    struct sb b;
    bool asked = false;

    (void)state;
    inv = inv_open(&loop);
    /* A read asks for the version, so that its answer tells which values
     * it brought; guest.net stays last. */
    n = vs_inventory_testing_read_paths(inv, &paths);
    for (size_t i = 0; i < n; i++)
        asked = asked || strcmp(paths[i], "config.changeVersion") == 0;
    assert_true(asked);
    assert_string_equal(paths[n - 1], "guest.net");
    begin(&b);
    folder(&b, "enter", "group-a", "ns_a", "group-1");
    inv_feed(inv, &b);
    /* Shown with version 1, then version 1 announced late: no read. */
    inv_version(inv, "enter", "vm-1", "1", 2);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-1"), 0);
    inv_version(inv, "modify", "vm-1", "1", 0);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-1"), 0);
    /* Version 2 alone: one read; until its answer, version 2 again asks
     * again (queued once). */
    inv_version(inv, "modify", "vm-1", "2", 0);
    inv_version(inv, "modify", "vm-1", "2", 0);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-1"), 1);
    /* The read's answer (all of the VM, version 2 with it): version 2
     * said late asks for none. */
    inv_version(inv, "enter", "vm-1", "2", 4);
    inv_version(inv, "modify", "vm-1", "2", 0);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-1"), 0);
    assert_int_equal(vs_cache_get(vs_inventory_testing_cache(inv), "vm-1")->num_cpu, 4);
    /* A version with the values in the same update: no read, then or
     * when it is said again. */
    inv_version(inv, "modify", "vm-1", "3", 8);
    inv_version(inv, "modify", "vm-1", "3", 0);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-1"), 0);
    /* An older version said late is not the one held: read. */
    inv_version(inv, "modify", "vm-1", "2", 0);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-1"), 1);
    /* Shown without a version (none known): any version alone reads. */
    inv_version(inv, "enter", "vm-1", NULL, 2);
    inv_version(inv, "modify", "vm-1", "3", 0);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-1"), 1);
    /* Not known at all: read. */
    inv_version(inv, "modify", "vm-9", "1", 0);
    assert_int_equal(vs_inventory_testing_queued(inv, "vm-9"), 1);
    inv_close(inv, &loop);
}

/* inv_poll applies the UpdateSet in b as the answer of the inventory's
 * next long poll (and frees its text); truncated: the rest of the set
 * comes in the next. */
static void inv_poll(vs_inventory *inv, struct sb *b, bool truncated)
{
    soap_resp *resp = NULL;

    sb_add(b,
           "</filterSet>%s</returnval></WaitForUpdatesExResponse></soapenv:Body>"
           "</soapenv:Envelope>",
           truncated ? "<truncated>true</truncated>" : "");
    assert_int_equal(soap_parse(b->p, b->n, 64u << 20, &resp, NULL), 0);
    assert_int_equal(vs_inventory_testing_poll(inv, resp), 0);
    soap_resp_free(resp);
    free(b->p);
    b->p = NULL;
}

static void power(struct sb *b, const char *ref, const char *state)
{
    obj_start(b, "modify", "VirtualMachine", ref);
    ch_str(b, "runtime.powerState", "VirtualMachinePowerState", state);
    sb_add(b, "</objectSet>");
}

/* A dispute's read waits for the whole UpdateSet of the next long poll,
 * not its first part: vcsim pages a lagging stream's backlog, a VM's
 * older state in one page and its later change, which settles the
 * dispute, in the next one (a read of each such VM while the operator was
 * otherwise idle). The session is never used: nothing is sent. */
static void test_dispute_waits_for_the_whole_set(void **state)
{
    struct vim_change on = {.name = "runtime.powerState", .kind = VIM_VAL_ENUM, .str = "poweredOn"};
    struct vim_object_update u = {.kind = VIM_MODIFY, .changes = &on, .n_changes = 1};
    uv_loop_t loop;
    vs_inventory *inv;
    struct sb b;

    (void)state;
    inv = inv_open(&loop);
    begin(&b);
    folder(&b, "enter", "group-a", "ns_a", "group-1");
    inv_feed(inv, &b);
    /* A long poll's first page shows two VMs off; both are powered on (the
     * tasks' results, assumed while that poll's set is still coming), and
     * its second page says off: disputed, each read once the next long
     * poll has answered. */
    begin(&b);
    vm(&b, "enter", "vm-1", "g-0", "group-a", "poweredOff", 1, 1024, "uid-a");
    vm(&b, "enter", "vm-2", "g-1", "group-a", "poweredOff", 1, 1024, "uid-a");
    inv_poll(inv, &b, true);
    for (int i = 1; i <= 2; i++) {
        assert_int_equal(vim_moref_set(&u.obj, "VirtualMachine", i == 1 ? "vm-1" : "vm-2"), 0);
        assert_int_equal(vs_inventory_assume(inv, &u, vs_inventory_mark(inv)), 1);
    }
    begin(&b);
    power(&b, "vm-1", "poweredOff");
    power(&b, "vm-2", "poweredOff");
    inv_poll(inv, &b, false);
    assert_false(vs_inventory_testing_due(inv, "vm-1"));
    assert_false(vs_inventory_testing_due(inv, "vm-2"));
    /* The next long poll's first page says nothing of them: not yet. */
    begin(&b);
    folder(&b, "modify", "group-a", "ns_a2", "group-1");
    inv_poll(inv, &b, true);
    assert_false(vs_inventory_testing_due(inv, "vm-1"));
    assert_false(vs_inventory_testing_due(inv, "vm-2"));
    /* Its second page shows vm-1 on: settled, no read; vm-2's is due. */
    begin(&b);
    power(&b, "vm-1", "poweredOn");
    inv_poll(inv, &b, false);
    assert_false(vs_inventory_testing_due(inv, "vm-1"));
    assert_true(vs_cache_get(vs_inventory_testing_cache(inv), "vm-1")->powered_on);
    assert_true(vs_inventory_testing_due(inv, "vm-2"));
    assert_true(vs_cache_get(vs_inventory_testing_cache(inv), "vm-2")->powered_on);
    inv_close(inv, &loop);
}

/* An older answer that disputes a VM's assumed power state and announces a
 * new configuration without its values: when a newer answer settles the
 * dispute, the VM is still read, for the configuration (powered off by
 * hand, resized, powered on again). The session is never used. */
static void test_dispute_keeps_a_configuration_read(void **state)
{
    struct vim_change on = {.name = "runtime.powerState", .kind = VIM_VAL_ENUM, .str = "poweredOn"};
    struct vim_object_update u = {.kind = VIM_MODIFY, .changes = &on, .n_changes = 1};
    uv_loop_t loop;
    vs_inventory *inv;
    struct sb b;

    (void)state;
    inv = inv_open(&loop);
    begin(&b);
    folder(&b, "enter", "group-a", "ns_a", "group-1");
    inv_feed(inv, &b);
    /* A long poll's first page; the power-on is assumed while its second
     * page is still to come: off, and a new version. */
    begin(&b);
    vm(&b, "enter", "vm-1", "g-0", "group-a", "poweredOff", 1, 1024, "uid-a");
    inv_poll(inv, &b, true);
    assert_int_equal(vim_moref_set(&u.obj, "VirtualMachine", "vm-1"), 0);
    assert_int_equal(vs_inventory_assume(inv, &u, vs_inventory_mark(inv)), 1);
    begin(&b);
    obj_start(&b, "modify", "VirtualMachine", "vm-1");
    ch_str(&b, "runtime.powerState", "VirtualMachinePowerState", "poweredOff");
    ch_str(&b, "config.changeVersion", "xsd:string", "7");
    sb_add(&b, "</objectSet>");
    inv_poll(inv, &b, false);
    /* The next one: on again, which settles the power state. */
    begin(&b);
    power(&b, "vm-1", "poweredOn");
    inv_poll(inv, &b, false);
    assert_true(vs_cache_get(vs_inventory_testing_cache(inv), "vm-1")->powered_on);
    assert_true(vs_inventory_testing_due(inv, "vm-1"));
    inv_close(inv, &loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_initial_state),
        cmocka_unit_test(test_modify_reports_once),
        cmocka_unit_test(test_leave_and_enter_in_one_set),
        cmocka_unit_test(test_marked_follows_the_mark),
        cmocka_unit_test(test_removals_keep_groups),
        cmocka_unit_test(test_move_and_rename),
        cmocka_unit_test(test_resync_reports_the_difference),
        cmocka_unit_test(test_enter_resets_missing_properties),
        cmocka_unit_test(test_single_extra_config_entries),
        cmocka_unit_test(test_guest_addresses),
        cmocka_unit_test(test_guest_net),
        cmocka_unit_test(test_long_name_cut_at_a_character),
        cmocka_unit_test(test_bounds_and_orders),
        cmocka_unit_test(test_many_objects),
        cmocka_unit_test(test_assume_seen_at_once_and_overridden_later),
        cmocka_unit_test(test_assume_older_answer_read_back),
        cmocka_unit_test(test_assume_older_answer_settles_itself),
        cmocka_unit_test(test_assume_out_of_band_power_off),
        cmocka_unit_test(test_assume_dispute_outlives_other_changes),
        cmocka_unit_test(test_assume_during_resync),
        cmocka_unit_test(test_assume_does_not_overwrite_newer),
        cmocka_unit_test(test_assume_gone),
        cmocka_unit_test(test_assume_gone_moref_given_again),
        cmocka_unit_test(test_assume_clone),
        cmocka_unit_test(test_assume_instance_mark_pinned),
        cmocka_unit_test(test_assume_clone_marks_pinned),
        cmocka_unit_test(test_assume_clone_destroyed_by_hand),
        cmocka_unit_test(test_dispute_queue_full_rebuilds),
        cmocka_unit_test(test_failed_reads_give_way_to_a_dispute),
        cmocka_unit_test(test_guest_change_queues_one_read),
        cmocka_unit_test(test_read_brings_back_no_vm_that_left),
        cmocka_unit_test(test_change_version_read_once),
        cmocka_unit_test(test_dispute_waits_for_the_whole_set),
        cmocka_unit_test(test_dispute_keeps_a_configuration_read),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
