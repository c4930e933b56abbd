/* planner.c: from a VmGroup and what vCenter shows of it, the next actions
 * and the status to report (see planner.h for the rules). */
#include "controller/planner.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "controller/naming.h"
#include "lib/err.h"
#include "lib/str.h"

#define COND_READY "Ready"
#define COND_PROGRESSING "Progressing"
#define COND_DEGRADED "Degraded"
#define MAX_LISTED_NAMES 3 /* foreign VMs named in a message */
#define MAX_REASON 64
#define CHUNK_SIZE 4096

/* The plan's memory: strings in chunks, freed together. */
struct chunk {
    struct chunk *next;
    size_t used, cap;
    char data[];
};

struct plan_mem {
    struct chunk *chunks;
    size_t cap_actions;
    struct vmgroup_vm *vms; /* the status's entries */
};

static char *mem_alloc(struct plan_mem *m, size_t n)
{
    struct chunk *c = m->chunks;

    if (!c || c->cap - c->used < n) {
        size_t cap = n > CHUNK_SIZE ? n : CHUNK_SIZE;
        c = malloc(sizeof(*c) + cap);
        if (!c)
            return NULL;
        c->next = m->chunks;
        c->used = 0;
        c->cap = cap;
        m->chunks = c;
    }
    c->used += n;
    return c->data + c->used - n;
}

static const char *mem_strdup(struct plan_mem *m, const char *s)
{
    size_t len = strlen(s) + 1;
    char *d = mem_alloc(m, len);

    if (d)
        memcpy(d, s, len);
    return d;
}

void plan_free(struct plan *p)
{
    if (!p)
        return;
    if (p->mem) {
        struct chunk *c = p->mem->chunks;
        while (c) {
            struct chunk *next = c->next;
            free(c);
            c = next;
        }
        free(p->mem->vms);
        free(p->mem);
    }
    free(p->actions);
    free(p);
}

/* A status message, bounded as the API keeps it. */
struct msg {
    char buf[VMGROUP_MAX_MESSAGE + 1];
    size_t len;
};

static void msg_add(struct msg *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void msg_add(struct msg *m, const char *fmt, ...)
{
    va_list ap;
    int r;

    if (m->len >= VMGROUP_MAX_MESSAGE)
        return;
    va_start(ap, fmt);
    r = vsnprintf(m->buf + m->len, sizeof(m->buf) - m->len, fmt, ap);
    va_end(ap);
    if (r < 0)
        return;
    m->len += (size_t)r < sizeof(m->buf) - m->len ? (size_t)r : sizeof(m->buf) - m->len - 1;
}

/* utf8_len returns the length of the valid UTF-8 sequence at s (at most n
 * bytes), or 0 if it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len;
    unsigned cp;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2;
        cp = s[0] & 0x1f;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        len = 3;
        cp = s[0] & 0x0f;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

/* utf8_fix replaces every byte of s[0 .. len) that is not valid UTF-8
 * (such as a sequence cut by a bound) by '?', so that the API server stores
 * exactly what was sent (it would put U+FFFD instead) and the next
 * comparison sees it unchanged. */
static void utf8_fix(unsigned char *s, size_t len)
{
    for (size_t i = 0; i < len;) {
        size_t n = utf8_len(s + i, len - i);
        if (n == 0) {
            s[i++] = '?';
            continue;
        }
        i += n;
    }
}

/* msg_str returns m's text, made valid UTF-8 (utf8_fix). */
static const char *msg_str(struct msg *m)
{
    utf8_fix((unsigned char *)m->buf, m->len);
    m->buf[m->len] = '\0';
    return m->buf;
}

/* A member of the group: a VM carrying its mark, or a clone in flight that
 * vCenter does not show yet (vm NULL). */
struct member {
    const struct plan_vm *vm;
    const char *name;
    int slot;
    uint64_t order;
    bool creating; /* its clone is in flight */
    bool remove;   /* to be powered off and destroyed */
};

struct ctx {
    const struct planner_input *in;
    const struct vmgroup *g;
    struct plan *p;
    struct member *members;
    size_t n_members;
    size_t *by_priority; /* member indices, the first to remove first */
    const struct plan_vm **foreign;
    size_t n_foreign;
    int *used_slots; /* sorted, distinct: slots taken by a VM name or a clone */
    size_t n_used_slots;
    size_t n_clones; /* distinct clones in flight */
    int budget;      /* vCenter operations that may still start */
    int replicas;
    int memory_mb;
    bool has_finalizer;
    const char *transient;
    /* What the status will say. */
    enum vmgroup_phase phase;
    const char *reason; /* of the situation: Progressing's reason */
    struct msg message;
    const char *degraded_reason; /* NULL: not degraded */
    struct msg degraded_message;
    bool remove_finalizer;
};

static int add_action(struct ctx *c, const struct plan_action *a)
{
    struct plan *p = c->p;

    if (p->n_actions == p->mem->cap_actions) {
        size_t cap = p->mem->cap_actions ? 2 * p->mem->cap_actions : 8;
        struct plan_action *na = realloc(p->actions, cap * sizeof(*na));
        if (!na)
            return -ENOMEM;
        p->actions = na;
        p->mem->cap_actions = cap;
    }
    p->actions[p->n_actions++] = *a;
    return 0;
}

static int add_simple(struct ctx *c, enum plan_action_kind kind)
{
    struct plan_action a = {.kind = kind, .slot = -1};
    return add_action(c, &a);
}

/* add_vm_action plans kind on member m, naming it and its id. */
static int add_vm_action(struct ctx *c, enum plan_action_kind kind, const struct member *m)
{
    struct plan_action a = {.kind = kind, .slot = -1, .vm = mem_strdup(c->p->mem, m->name)};

    if (!a.vm)
        return -ENOMEM;
    if (m->vm->ref && !(a.vm_ref = mem_strdup(c->p->mem, m->vm->ref)))
        return -ENOMEM;
    if (kind == PLAN_RECONFIGURE) {
        a.cpu = c->g->spec.cpu;
        a.memory_mb = c->memory_mb;
    }
    if (kind == PLAN_MARK && !(a.instance_uuid = mem_strdup(c->p->mem, m->vm->instance_uuid)))
        return -ENOMEM;
    c->budget--;
    return add_action(c, &a);
}

static int add_event(struct ctx *c, enum plan_event_type type, const char *reason,
                     const char *message)
{
    struct plan_action a = {.kind = PLAN_EVENT, .slot = -1, .event_type = type};

    a.reason = mem_strdup(c->p->mem, reason);
    a.message = mem_strdup(c->p->mem, message);
    if (!a.reason || !a.message)
        return -ENOMEM;
    return add_action(c, &a);
}

/* is_mine: vm is marked as the group's, and is the VM that was marked,
 * not a copy someone made of it (vSphere's clone copies extraConfig, the
 * marks with it, and gives the copy an instanceUuid of its own). */
static bool is_mine(const struct ctx *c, const struct plan_vm *vm)
{
    if (!vm->mark_uid || strcmp(vm->mark_uid, c->g->meta.uid) != 0)
        return false;
    return !vm->mark_instance || (vm->mark_instance[0] && vm->instance_uuid &&
                                  strcasecmp(vm->mark_instance, vm->instance_uuid) == 0);
}

static bool wrong_size(const struct ctx *c, const struct plan_vm *vm)
{
    return vm->num_cpu != c->g->spec.cpu || vm->memory_mb != c->memory_mb;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static bool slot_used(const struct ctx *c, int slot)
{
    return bsearch(&slot, c->used_slots, c->n_used_slots, sizeof(int), cmp_int) != NULL;
}

/* removal_class: 0 being created or failed, 1 powered off, 2 the rest. */
static int removal_class(const struct member *m)
{
    if (!m->vm || m->creating || m->vm->failed)
        return 0;
    return m->vm->powered_on ? 2 : 1;
}

static int cmp_priority(const void *a, const void *b, void *data)
{
    const struct member *members = data;
    const struct member *x = &members[*(const size_t *)a];
    const struct member *y = &members[*(const size_t *)b];
    int cx = removal_class(x), cy = removal_class(y);

    if (cx != cy)
        return cx - cy;
    /* Highest slot first (a member without one before any), so that the
     * names left are the lowest, as a StatefulSet leaves them. */
    if (x->slot != y->slot)
        return (unsigned)x->slot > (unsigned)y->slot ? -1 : 1;
    if (x->order != y->order)
        return x->order > y->order ? -1 : 1; /* newest first */
    return -strcmp(x->name, y->name);
}

/* cmp_member orders members by slot (those without one last), then name,
 * so that the plan does not depend on the order of the inventory. */
static int cmp_member(const void *a, const void *b)
{
    const struct member *x = a, *y = b;

    if (x->slot != y->slot)
        return (unsigned)x->slot < (unsigned)y->slot ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_foreign(const void *a, const void *b)
{
    const struct plan_vm *x = *(const struct plan_vm *const *)a;
    const struct plan_vm *y = *(const struct plan_vm *const *)b;

    if (!x->name || !y->name)
        return !x->name - !y->name;
    return strcmp(x->name, y->name);
}

/* name_slot: the slot of one of the group's VM names (web-3: 3), else negative. */
static int name_slot(const struct ctx *c, const char *name)
{
    return name ? naming_vm_slot(c->g->meta.ns, c->g->meta.name, name) : -EINVAL;
}

static void add_member(struct ctx *c, const struct plan_vm *vm, int slot, const int *clones,
                       size_t n_clones)
{
    struct member *m = &c->members[c->n_members++];

    m->vm = vm;
    m->name = vm->name;
    m->slot = slot >= 0 ? slot : -1;
    m->order = vm->create_order;
    m->creating = slot >= 0 && bsearch(&slot, clones, n_clones, sizeof(int), cmp_int);
}

/* MOVED_NO_SLOT: moved_slot's answer for a member outside the folder that
 * holds no slot (see there). */
#define MOVED_NO_SLOT (-2)

/* moved_slot: the slot of in->vms[i] when it is a VM of the group found
 * outside its folder by its marks (moved out by hand), MOVED_NO_SLOT when
 * it is one without a slot, else -1; slots[j] is the slot of in->vms[j]'s
 * name (negative: none). A VM whose instance mark says its instanceUuid
 * is the group's (is_mine): it holds its name's slot when that slot is
 * not taken in the folder (the first n_folder_slots of c->used_slots) and
 * it is the oldest such VM of the slot, else it is a member without one
 * (renamed, say), as a VM renamed in the folder is; a template (failed)
 * is left alone. A VM cloned before the instance mark counts only as a
 * moved replica looks: one of the group's names, not a template, its slot
 * free, the oldest of that slot: a copy someone made of such a VM (the
 * marks travel with a clone: a template, "web-0-debug", another "web-0")
 * is not the group's, neither counted nor acted on, nor reported. */
static int moved_slot(const struct ctx *c, const int *slots, size_t i, size_t n_folder_slots)
{
    const struct planner_input *in = c->in;
    const struct plan_vm *vm = &in->vms[i];
    int slot = slots[i], lost = vm->mark_instance ? MOVED_NO_SLOT : -1;

    if (!vm->elsewhere || !vm->name || !is_mine(c, vm) || vm->failed)
        return -1;
    if (slot < 0)
        return lost;
    for (size_t k = 0; k < n_folder_slots; k++)
        if (c->used_slots[k] == slot)
            return lost;
    for (size_t j = 0; j < in->n_vms; j++) {
        const struct plan_vm *o = &in->vms[j];
        if (j == i || !o->elsewhere || !o->name || !is_mine(c, o) || o->failed || slots[j] != slot)
            continue;
        if (o->create_order < vm->create_order || (o->create_order == vm->create_order && j < i))
            return lost;
    }
    return slot;
}

/* classify splits the observed VMs into members and foreign VMs and lists
 * the slots that are taken. */
static int classify(struct ctx *c)
{
    const struct planner_input *in = c->in;
    const struct vmgroup *g = c->g;
    size_t n_all = in->n_vms + in->n_clones_inflight;
    size_t n_slots = n_all + in->n_folder_other_names;
    int *clones = NULL, *vm_slots = NULL;
    size_t n_clones = 0, n_folder_slots;
    int r = -ENOMEM;

    c->members = calloc(n_all ? n_all : 1, sizeof(*c->members));
    c->by_priority = calloc(n_all ? n_all : 1, sizeof(*c->by_priority));
    c->foreign = calloc(in->n_vms ? in->n_vms : 1, sizeof(*c->foreign));
    c->used_slots = calloc(n_slots ? n_slots : 1, sizeof(*c->used_slots));
    clones = calloc(in->n_clones_inflight ? in->n_clones_inflight : 1, sizeof(*clones));
    vm_slots = calloc(in->n_vms ? in->n_vms : 1, sizeof(*vm_slots));
    if (!c->members || !c->by_priority || !c->foreign || !c->used_slots || !clones || !vm_slots)
        goto out;

    for (size_t i = 0; i < in->n_clones_inflight; i++) {
        if (in->clones_inflight[i] >= 0)
            clones[n_clones++] = in->clones_inflight[i];
    }
    qsort(clones, n_clones, sizeof(*clones), cmp_int);
    {
        size_t k = 0;
        for (size_t i = 0; i < n_clones; i++) {
            if (k == 0 || clones[k - 1] != clones[i])
                clones[k++] = clones[i];
        }
        n_clones = k;
    }
    c->n_clones = n_clones;

    for (size_t i = 0; i < in->n_vms; i++) {
        const struct plan_vm *vm = &in->vms[i];
        int slot = name_slot(c, vm->name);
        vm_slots[i] = slot;
        if (vm->elsewhere)
            continue; /* below */
        if (slot >= 0)
            c->used_slots[c->n_used_slots++] = slot;
        if (!vm->name || !is_mine(c, vm)) {
            c->foreign[c->n_foreign++] = vm;
            continue;
        }
        add_member(c, vm, slot, clones, n_clones);
    }
    n_folder_slots = c->n_used_slots;
    for (size_t i = 0; i < in->n_vms; i++) {
        int slot = moved_slot(c, vm_slots, i, n_folder_slots);
        if (slot == -1)
            continue;
        if (slot >= 0)
            c->used_slots[c->n_used_slots++] = slot;
        add_member(c, &in->vms[i], slot, clones, n_clones);
    }
    for (size_t i = 0; i < in->n_folder_other_names; i++) {
        int slot = name_slot(c, in->folder_other_names[i]);
        if (slot >= 0)
            c->used_slots[c->n_used_slots++] = slot;
    }
    for (size_t i = 0; i < n_clones; i++) {
        bool seen = false;
        for (size_t j = 0; j < c->n_members && !seen; j++)
            seen = c->members[j].vm && c->members[j].slot == clones[i];
        c->used_slots[c->n_used_slots++] = clones[i];
        if (seen)
            continue;
        char name[NAMING_BUF_SIZE];
        r = naming_vm(g->meta.ns, g->meta.name, clones[i], name, sizeof(name));
        if (r < 0)
            goto out;
        struct member *m = &c->members[c->n_members++];
        m->name = mem_strdup(c->p->mem, name);
        if (!m->name) {
            r = -ENOMEM;
            goto out;
        }
        m->slot = clones[i];
        m->order = UINT64_MAX;
        m->creating = true;
    }
    qsort(c->used_slots, c->n_used_slots, sizeof(int), cmp_int);
    {
        size_t k = 0;
        for (size_t i = 0; i < c->n_used_slots; i++) {
            if (k == 0 || c->used_slots[k - 1] != c->used_slots[i])
                c->used_slots[k++] = c->used_slots[i];
        }
        c->n_used_slots = k;
    }
    qsort(c->members, c->n_members, sizeof(*c->members), cmp_member);
    qsort(c->foreign, c->n_foreign, sizeof(*c->foreign), cmp_foreign);
    for (size_t i = 0; i < c->n_members; i++)
        c->by_priority[i] = i;
    qsort_r(c->by_priority, c->n_members, sizeof(size_t), cmp_priority, c->members);
    r = 0;
out:
    free(clones);
    free(vm_slots);
    return r;
}

/* op_busy: an operation in flight on vm makes it unavailable (and the
 * group wait for it); its instance mark does not. */
static bool op_busy(const struct plan_vm *vm)
{
    return vm->inflight && !vm->marking;
}

/* count_inflight returns the group's vCenter operations in flight, but
 * its instance marks: the caller bounds those in all groups, and they
 * must not hold the group's own work back. */
static long count_inflight(const struct ctx *c)
{
    long n = (long)c->n_clones + (c->in->folder_inflight ? 1 : 0);

    for (size_t i = 0; i < c->n_members; i++) {
        const struct member *m = &c->members[i];
        if (m->vm && op_busy(m->vm) && !m->creating)
            n++;
    }
    return n;
}

static bool busy(const struct member *m)
{
    return !m->vm || m->creating || m->vm->inflight;
}

static const char *plural(long n)
{
    return n == 1 ? "" : "s";
}

/* describe_foreign fills the Degraded message about foreign VMs and other
 * objects in the folder, and appends the short form to the status message
 * when append is true. */
static void describe_foreign(struct ctx *c, bool append)
{
    struct msg *d = &c->degraded_message;
    size_t n = c->n_foreign;

    if (n > 0) {
        msg_add(d, "folder \"%s\" holds %zu VM%s this VmGroup did not create (", c->p->folder, n,
                plural((long)n));
        for (size_t i = 0; i < n && i < MAX_LISTED_NAMES; i++)
            msg_add(d, "%s\"%s\"", i ? ", " : "", c->foreign[i]->name ? c->foreign[i]->name : "?");
        msg_add(d, "%s), left alone", n > MAX_LISTED_NAMES ? ", ..." : "");
        if (append)
            msg_add(&c->message,
                    "; %zu VM%s in the folder %s not created by this VmGroup and %s "
                    "left alone",
                    n, plural((long)n), n == 1 ? "was" : "were", n == 1 ? "is" : "are");
    } else if (c->in->folder_other_objects > 0) {
        msg_add(d, "folder \"%s\" holds %zu object%s this VmGroup did not create, left alone",
                c->p->folder, c->in->folder_other_objects,
                plural((long)c->in->folder_other_objects));
    }
}

static void set_situation(struct ctx *c, enum vmgroup_phase phase, const char *reason)
{
    c->phase = phase;
    c->reason = reason;
}

/* valid_reason tells whether s is CamelCase as conditions and events want. */
static bool valid_reason(const char *s)
{
    size_t n = 0;

    if (!s || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
        return false;
    for (; s[n]; n++) {
        char ch = s[n];
        if (n >= MAX_REASON ||
            !((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')))
            return false;
    }
    return true;
}

/* blocked sets the ERROR situation of a blocking error. */
static void blocked(struct ctx *c)
{
    const struct planner_input *in = c->in;
    const char *reason = in->block_reason;

    if (!valid_reason(reason))
        reason = in->block == PLAN_BLOCK_TEMPLATE    ? "TemplateNotFound"
                 : in->block == PLAN_BLOCK_PLACEMENT ? "InvalidPlacement"
                                                     : "Blocked";
    set_situation(c, VMGROUP_PHASE_ERROR, reason);
    if (in->block_message && in->block_message[0])
        msg_add(&c->message, "%s", in->block_message);
    else if (in->block == PLAN_BLOCK_TEMPLATE)
        msg_add(&c->message, "template \"%s\" cannot be used", c->g->spec.template);
    else
        msg_add(&c->message, "the VmGroup is blocked by an error in vCenter");
    c->degraded_reason = reason;
    msg_add(&c->degraded_message, "%s", c->message.buf);
}

/* spec_error writes what is wrong with the spec into m, or returns false. */
static bool spec_error(const struct vmgroup_spec *s, struct msg *m)
{
    if (s->cpu < VMGROUP_CPU_MIN || s->cpu > VMGROUP_CPU_MAX)
        msg_add(m, "spec.cpu %d is outside %d..%d", (int)s->cpu, VMGROUP_CPU_MIN, VMGROUP_CPU_MAX);
    else if (s->memory < VMGROUP_MEMORY_MIN || s->memory > VMGROUP_MEMORY_MAX)
        msg_add(m, "spec.memory %d GiB is outside %d..%d", (int)s->memory, VMGROUP_MEMORY_MIN,
                VMGROUP_MEMORY_MAX);
    else if (s->replicas < 0)
        msg_add(m, "spec.replicas %d is negative", (int)s->replicas);
    else if (s->replicas > VMGROUP_REPLICAS_MAX)
        msg_add(m, "spec.replicas %d is above %d, the most VMs one group can hold",
                (int)s->replicas, VMGROUP_REPLICAS_MAX);
    else if (!s->template[0])
        msg_add(m, "spec.template is empty");
    else
        return false;
    return true;
}

/* plan_removals powers off, then destroys, the members marked remove, first
 * things first, within the budget. */
static int plan_removals(struct ctx *c)
{
    for (size_t k = 0; k < c->n_members && c->budget > 0; k++) {
        const struct member *m = &c->members[c->by_priority[k]];
        int r;
        if (!m->remove || busy(m))
            continue;
        r = add_vm_action(c, m->vm->powered_on ? PLAN_POWER_OFF : PLAN_DESTROY_VM, m);
        if (r < 0)
            return r;
    }
    return 0;
}

/* first_by_slot returns the member that pred picks with the lowest slot
 * (then name), or NULL. */
static const struct member *first_by_slot(const struct ctx *c,
                                          bool (*pred)(const struct ctx *, const struct member *))
{
    const struct member *best = NULL;

    for (size_t i = 0; i < c->n_members; i++) {
        const struct member *m = &c->members[i];
        if (!pred(c, m))
            continue;
        if (!best || (unsigned)m->slot < (unsigned)best->slot ||
            (m->slot == best->slot && strcmp(m->name, best->name) < 0))
            best = m;
    }
    return best;
}

/* A kept member: one that exists, is not being created and stays. */
static bool kept(const struct member *m)
{
    return m->vm && !m->creating && !m->remove;
}

static bool pred_needs_power_on(const struct ctx *c, const struct member *m)
{
    /* One off for its resize waits for it, unless vCenter refused the size. */
    return kept(m) && !m->vm->powered_on && (!wrong_size(c, m->vm) || c->in->resize_refused);
}

static bool pred_wrong_size(const struct ctx *c, const struct member *m)
{
    return kept(m) && wrong_size(c, m->vm);
}

/* One to power off for its turn: not while its mark is in flight. */
static bool pred_wrong_size_idle(const struct ctx *c, const struct member *m)
{
    return pred_wrong_size(c, m) && !m->vm->inflight;
}

/* The member in the middle of its reconfiguration: already off or busy. */
static bool pred_reconfiguring(const struct ctx *c, const struct member *m)
{
    return pred_wrong_size(c, m) && (!m->vm->powered_on || op_busy(m->vm));
}

static bool pred_unavailable(const struct ctx *c, const struct member *m)
{
    return m->vm && !m->remove && !m->creating &&
           (!m->vm->powered_on || op_busy(m->vm) || m->vm->failed);
}

static bool pred_busy_vm(const struct ctx *c, const struct member *m)
{
    return m->vm && !m->creating && op_busy(m->vm);
}

/* pred_needs_mark: a member cloned before the instance mark that is the
 * VM the group cloned (in the folder, holding its slot's name, which no
 * other VM there can hold), settled, and whose instanceUuid is known. */
static bool pred_needs_mark(const struct ctx *c, const struct member *m)
{
    const struct plan_vm *vm = m->vm;

    return kept(m) && m->slot >= 0 && !vm->elsewhere && !vm->mark_instance && !vm->failed &&
           !vm->inflight && vm->powered_on && !wrong_size(c, vm) && vm->instance_uuid &&
           vm->instance_uuid[0];
}

/* plan_marks marks the members pred_needs_mark picks, with what budget
 * the other actions left: first those whose mark has not failed lately,
 * lowest slot first, then the others, the least recent failure first, so
 * that a VM vCenter keeps refusing (on a host out of reach, say) holds
 * back neither the others nor another that failed once. */
static int plan_marks(struct ctx *c)
{
    uint64_t last = 0;

    for (size_t i = 0; i < c->n_members && c->budget > 0; i++) {
        const struct member *m = &c->members[i];
        int r;
        if (!pred_needs_mark(c, m) || m->vm->mark_failure_seq)
            continue;
        r = add_vm_action(c, PLAN_MARK, m);
        if (r < 0)
            return r;
    }
    while (c->budget > 0) {
        const struct member *next = NULL;
        int r;
        for (size_t i = 0; i < c->n_members; i++) {
            const struct member *m = &c->members[i];
            uint64_t seq = m->vm ? m->vm->mark_failure_seq : 0;
            if (seq > last && (!next || seq < next->vm->mark_failure_seq) && pred_needs_mark(c, m))
                next = m;
        }
        if (!next)
            break;
        last = next->vm->mark_failure_seq;
        r = add_vm_action(c, PLAN_MARK, next);
        if (r < 0)
            return r;
    }
    return 0;
}

static bool pred_failed(const struct ctx *c, const struct member *m)
{
    return m->vm && m->vm->failed;
}

static int plan_power_on(struct ctx *c)
{
    for (size_t i = 0; i < c->n_members && c->budget > 0; i++) {
        const struct member *m = &c->members[i];
        if (pred_needs_power_on(c, m) && !m->vm->inflight) {
            int r = add_vm_action(c, PLAN_POWER_ON, m);
            if (r < 0)
                return r;
        }
    }
    return 0;
}

/* plan_reconfigure: members already off are reconfigured; one that is on is
 * powered off to start its turn only when every other kept member is
 * available, so at most one member is down for it at a time. */
static int plan_reconfigure(struct ctx *c)
{
    const struct member *next;
    int r;

    for (size_t i = 0; i < c->n_members && c->budget > 0; i++) {
        const struct member *m = &c->members[i];
        if (pred_wrong_size(c, m) && !m->vm->powered_on && !m->vm->inflight) {
            r = add_vm_action(c, PLAN_RECONFIGURE, m);
            if (r < 0)
                return r;
        }
    }
    if (c->budget <= 0 || first_by_slot(c, pred_unavailable) || first_by_slot(c, pred_failed))
        return 0;
    next = first_by_slot(c, pred_wrong_size_idle);
    return next ? add_vm_action(c, PLAN_POWER_OFF, next) : 0;
}

static int plan_clones(struct ctx *c, long deficit)
{
    char name[NAMING_BUF_SIZE];
    int slot = 0, r;

    for (long k = 0; k < deficit && c->budget > 0; k++) {
        while (slot < INT_MAX && slot_used(c, slot))
            slot++;
        if (slot_used(c, slot))
            break;
        r = naming_vm(c->g->meta.ns, c->g->meta.name, slot, name, sizeof(name));
        if (r < 0)
            return r;
        struct plan_action a = {
            .kind = PLAN_CLONE,
            .slot = slot,
            .vm = mem_strdup(c->p->mem, name),
            .template = mem_strdup(c->p->mem, c->g->spec.template),
            .cpu = c->g->spec.cpu,
            .memory_mb = c->memory_mb,
        };
        if (!a.vm || !a.template)
            return -ENOMEM;
        r = add_action(c, &a);
        if (r < 0)
            return r;
        c->budget--;
        slot++;
    }
    return 0;
}

/* plan_live plans a group that is not being deleted. */
static int plan_live(struct ctx *c)
{
    const struct planner_input *in = c->in;
    const struct vmgroup *g = c->g;
    struct msg spec_msg = {.len = 0};
    bool bad_spec = spec_error(&g->spec, &spec_msg);
    long members = (long)c->n_members, excess, deficit;
    long n_failed = 0, n_creating = 0, kept_n = 0, sized = 0;
    const struct member *m;
    bool can_act;
    int r;

    c->replicas = g->spec.replicas > 0 ? g->spec.replicas : 0;
    excess = members - c->replicas;
    deficit = c->replicas - members;
    /* The first excess members by priority go, and every failed one. */
    for (size_t k = 0; k < c->n_members; k++) {
        struct member *x = &c->members[c->by_priority[k]];
        x->remove = (long)k < excess || (x->vm && x->vm->failed);
    }
    for (size_t i = 0; i < c->n_members; i++) {
        const struct member *x = &c->members[i];
        n_failed += x->vm && x->vm->failed;
        n_creating += x->creating;
        if (kept(x)) {
            kept_n++;
            sized += !wrong_size(c, x->vm);
        }
    }

    if (!c->has_finalizer) {
        r = add_simple(c, PLAN_ADD_FINALIZER);
        if (r < 0)
            return r;
    }
    can_act = !bad_spec && (in->block == PLAN_BLOCK_NONE || in->block == PLAN_BLOCK_TEMPLATE) &&
              !c->transient && c->has_finalizer && in->folder != PLAN_FOLDER_UNKNOWN;
    if (can_act && in->folder == PLAN_FOLDER_ABSENT) {
        if (!in->folder_inflight && c->budget > 0) {
            r = add_simple(c, PLAN_CREATE_FOLDER);
            if (r < 0)
                return r;
            c->budget--;
        }
    } else if (can_act) {
        if ((r = plan_removals(c)) < 0 || (r = plan_power_on(c)) < 0 ||
            (!in->resize_refused && (r = plan_reconfigure(c)) < 0))
            return r;
        if (in->block != PLAN_BLOCK_TEMPLATE && deficit > 0 && (r = plan_clones(c, deficit)) < 0)
            return r;
        if (!in->marks_paused && (r = plan_marks(c)) < 0)
            return r;
    }

    /* What the status says: the first thing that applies. */
    if (bad_spec) {
        set_situation(c, VMGROUP_PHASE_ERROR, "InvalidSpec");
        msg_add(&c->message, "%s", spec_msg.buf);
        c->degraded_reason = "InvalidSpec";
        msg_add(&c->degraded_message, "%s", spec_msg.buf);
    } else if (in->block != PLAN_BLOCK_NONE) {
        blocked(c);
    } else if (in->resize_refused) {
        set_situation(c, VMGROUP_PHASE_ERROR, "ResizeRefused");
        msg_add(&c->message, "%s", in->resize_refused);
        c->degraded_reason = "ResizeRefused";
        msg_add(&c->degraded_message, "%s", in->resize_refused);
    } else if (c->transient) {
        set_situation(c, VMGROUP_PHASE_PENDING, "Retrying");
        msg_add(&c->message, "%s", c->transient);
        c->degraded_reason = "TransientError";
        msg_add(&c->degraded_message, "%s", c->transient);
    } else if (!c->has_finalizer) {
        set_situation(c, VMGROUP_PHASE_PENDING, "AddingFinalizer");
        msg_add(&c->message, "adding finalizer %s", VMGROUP_FINALIZER);
    } else if (in->folder == PLAN_FOLDER_UNKNOWN) {
        set_situation(c, VMGROUP_PHASE_PENDING, "WaitingForInventory");
        msg_add(&c->message, "waiting for the vCenter inventory");
    } else if (in->folder == PLAN_FOLDER_ABSENT) {
        set_situation(c, VMGROUP_PHASE_PENDING, "CreatingFolder");
        msg_add(&c->message, "creating folder \"%s\"", c->p->folder);
    } else if (n_failed > 0) {
        m = first_by_slot(c, pred_failed);
        set_situation(c, VMGROUP_PHASE_PENDING, "ReplacingFailedVMs");
        msg_add(&c->message, "replacing failed VM \"%s\"", m->name);
        if (n_failed > 1)
            msg_add(&c->message, " (%ld failed)", n_failed);
    } else if (excess > 0) {
        m = &c->members[c->by_priority[0]];
        set_situation(c, VMGROUP_PHASE_PENDING, "ScalingDown");
        msg_add(&c->message, "scaling down from %ld to %d VMs, removing \"%s\"", members,
                c->replicas, m->name);
    } else if (deficit > 0 || n_creating > 0) {
        long exist = members - n_creating, todo = c->replicas - exist;
        set_situation(c, VMGROUP_PHASE_PENDING, "ScalingUp");
        msg_add(&c->message, "creating %ld VM%s (%ld of %d exist)", todo, plural(todo), exist,
                c->replicas);
    } else if ((m = first_by_slot(c, pred_needs_power_on))) {
        set_situation(c, VMGROUP_PHASE_PENDING, "PoweringOn");
        msg_add(&c->message, "powering on VM \"%s\"", m->name);
    } else if ((m = first_by_slot(c, pred_reconfiguring)) ||
               (m = first_by_slot(c, pred_wrong_size_idle)) ||
               (m = first_by_slot(c, pred_wrong_size))) {
        set_situation(c, VMGROUP_PHASE_PENDING, "Reconfiguring");
        msg_add(&c->message, "reconfiguring VM \"%s\" to %d CPU%s and %d GiB (%ld of %ld done)",
                m->name, (int)g->spec.cpu, plural(g->spec.cpu), (int)g->spec.memory, sized, kept_n);
    } else if ((m = first_by_slot(c, pred_busy_vm))) {
        set_situation(c, VMGROUP_PHASE_PENDING, "WaitingForTasks");
        msg_add(&c->message, "waiting for the operation on VM \"%s\" to finish", m->name);
    } else {
        set_situation(c, VMGROUP_PHASE_RUNNING, "UpToDate");
        if (c->replicas == 0)
            msg_add(&c->message, "no VMs requested");
        else
            msg_add(&c->message, "all %d VM%s running", c->replicas, plural(c->replicas));
        if (c->p->old_template > 0)
            msg_add(&c->message, ", %d cloned from a template other than \"%s\"",
                    c->p->old_template, g->spec.template);
        /* The Secret is read at each clone: whether a VM got its latest
         * version cannot be seen afterwards, so the rule is said. */
        if (c->replicas > 0 && g->spec.bootstrap.secret_name[0])
            msg_add(&c->message,
                    ", bootstrapped from Secret \"%s\" as it was when each was created (a change "
                    "applies to VMs created afterwards)",
                    g->spec.bootstrap.secret_name);
    }
    if (!c->degraded_reason && (c->n_foreign > 0 || in->folder_other_objects > 0)) {
        c->degraded_reason = "ForeignVMs";
        describe_foreign(c, c->phase == VMGROUP_PHASE_RUNNING);
    }
    return 0;
}

/* plan_delete plans a group being deleted that still has our finalizer. */
static int plan_delete(struct ctx *c)
{
    const struct planner_input *in = c->in;
    /* What blocks creating VMs does not block removing them. */
    bool block = in->block != PLAN_BLOCK_NONE && in->block != PLAN_BLOCK_TEMPLATE;
    bool can_act = !block && !c->transient && in->folder != PLAN_FOLDER_UNKNOWN;
    bool others = c->n_foreign > 0 || in->folder_other_objects > 0;
    bool kept = others || in->folder_hidden_objects;
    int r;

    for (size_t i = 0; i < c->n_members; i++)
        c->members[i].remove = true;
    if (can_act && (r = plan_removals(c)) < 0)
        return r;

    if (block) {
        blocked(c);
        return 0;
    }
    if (c->transient) {
        set_situation(c, VMGROUP_PHASE_PENDING, "Retrying");
        msg_add(&c->message, "%s", c->transient);
        c->degraded_reason = "TransientError";
        msg_add(&c->degraded_message, "%s", c->transient);
        return 0;
    }
    set_situation(c, VMGROUP_PHASE_PENDING, "Deleting");
    if (in->folder == PLAN_FOLDER_UNKNOWN) {
        msg_add(&c->message, "waiting for the vCenter inventory");
    } else if (c->n_members > 0) {
        msg_add(&c->message, "deleting: %zu VM%s left to remove", c->n_members,
                plural((long)c->n_members));
    } else if (in->vms_partial) {
        /* The group's VMs may be among those not listed: the finalizer
         * waits until they are. */
        msg_add(&c->message,
                "deleting: more VMs than can be listed, in folder \"%s\" or marked as this "
                "group's elsewhere",
                c->p->folder);
    } else if (in->folder_inflight) {
        /* The finalizer waits for the folder's task: a folder being created
         * would be left behind once the task made it, and a destroy's
         * outcome is reported on the group. */
        msg_add(&c->message, "deleting folder \"%s\"", c->p->folder);
    } else if (in->folder == PLAN_FOLDER_PRESENT && !kept) {
        msg_add(&c->message, "deleting folder \"%s\"", c->p->folder);
        if (c->budget > 0) {
            r = add_simple(c, PLAN_DESTROY_FOLDER);
            if (r < 0)
                return r;
            c->budget--;
        }
    } else {
        if (in->folder == PLAN_FOLDER_PRESENT) {
            struct msg w = {.len = 0};
            msg_add(&w, "folder \"%s\" kept: it holds ", c->p->folder);
            if (c->n_foreign > 0)
                msg_add(&w, "%zu VM%s", c->n_foreign, plural((long)c->n_foreign));
            if (c->n_foreign > 0 && in->folder_other_objects > 0)
                msg_add(&w, " and ");
            if (in->folder_other_objects > 0)
                msg_add(&w, "%zu other object%s", in->folder_other_objects,
                        plural((long)in->folder_other_objects));
            if (!others)
                msg_add(&w, "objects other than VMs and folders (a vApp, say)");
            msg_add(&w, " not created by this VmGroup");
            r = add_event(c, PLAN_EVENT_WARNING, "FolderKept", msg_str(&w));
            if (r < 0)
                return r;
        }
        r = add_simple(c, PLAN_REMOVE_FINALIZER);
        if (r < 0)
            return r;
        c->remove_finalizer = true;
        msg_add(&c->message, "deleted");
    }
    if (others) {
        c->degraded_reason = "ForeignVMs";
        describe_foreign(c, false);
    }
    return 0;
}

/* set_condition fills condition i, keeping the old lastTransitionTime when
 * the status did not change. Every string is copied into the plan. */
static int set_condition(struct ctx *c, unsigned i, const char *type,
                         enum vmgroup_cond_status status, const char *reason, const char *message)
{
    const struct vmgroup_condition *old = vmgroup_condition_find(&c->g->status, type);
    struct vmgroup_condition *n = &c->p->status.conditions[i];
    const char *ltt = old && old->status == status && vmg_nz(old->last_transition_time)[0]
                          ? old->last_transition_time
                          : c->in->now;

    n->type = type; /* a constant */
    n->status = status;
    n->reason = mem_strdup(c->p->mem, reason);
    n->message = message; /* already the plan's */
    n->last_transition_time = mem_strdup(c->p->mem, ltt);
    return n->reason && n->last_transition_time ? 0 : -ENOMEM;
}

/* vm_state says what this plan does or waits for with member m. */
static const char *vm_state(const struct ctx *c, const struct member *m)
{
    if (!m->vm || m->creating)
        return VMGROUP_VM_CREATING;
    if (m->remove)
        return VMGROUP_VM_REMOVING;
    if (wrong_size(c, m->vm))
        return VMGROUP_VM_RESIZING;
    return m->vm->powered_on ? VMGROUP_VM_READY : VMGROUP_VM_STARTING;
}

static int cmp_member_name(const void *a, const void *b, void *data)
{
    const struct member *members = data;

    return strcmp(members[*(const size_t *)a].name, members[*(const size_t *)b].name);
}

/* dup_nz copies s ("" for NULL) into m, made valid UTF-8 (utf8_fix): what
 * vCenter names may be cut in the middle of a character, or worse. */
static const char *dup_nz(struct plan_mem *m, const char *s)
{
    size_t len = s ? strlen(s) : 0;
    char *d = mem_alloc(m, len + 1);

    if (!d)
        return NULL;
    if (len)
        memcpy(d, s, len);
    d[len] = '\0';
    utf8_fix((unsigned char *)d, len);
    return d;
}

/* status_vms fills status.vms: the first VMGROUP_MAX_STATUS_VMS members by
 * name, and the count of the others. */
static int status_vms(struct ctx *c)
{
    struct plan *p = c->p;
    struct vmgroup_status *s = &p->status;
    size_t *order = calloc(c->n_members ? c->n_members : 1, sizeof(*order));
    size_t n = c->n_members < VMGROUP_MAX_STATUS_VMS ? c->n_members : VMGROUP_MAX_STATUS_VMS;
    struct vmgroup_vm *vms = calloc(n ? n : 1, sizeof(*vms));
    int r = -ENOMEM;

    if (!order || !vms)
        goto out;
    for (size_t i = 0; i < c->n_members; i++)
        order[i] = i;
    qsort_r(order, c->n_members, sizeof(*order), cmp_member_name, c->members);
    for (size_t i = 0; i < n; i++) {
        const struct member *m = &c->members[order[i]];
        const struct plan_vm *vm = m->vm;
        struct vmgroup_vm *v = &vms[i];
        v->name = dup_nz(p->mem, m->name);
        v->state = vm_state(c, m); /* a constant */
        v->instance_uuid = dup_nz(p->mem, vm ? vm->instance_uuid : NULL);
        v->power_state = dup_nz(p->mem, vm ? vm->power_state : NULL);
        v->template = dup_nz(p->mem, vm ? vm->template : NULL);
        if (!v->name || !v->instance_uuid || !v->power_state || !v->template)
            goto out;
        if (!vm)
            continue;
        v->cpu = vm->num_cpu > 0 ? vm->num_cpu : 0;
        v->memory_mb = vm->memory_mb > 0 ? vm->memory_mb : 0;
        for (unsigned k = 0; k < vm->n_ip && k < VMGROUP_VM_MAX_IPS; k++) {
            if (!vm->ip[k] || !vm->ip[k][0])
                continue;
            v->ip[v->n_ip] = mem_strdup(p->mem, vm->ip[k]);
            if (!v->ip[v->n_ip++])
                goto out;
        }
    }
    p->mem->vms = vms;
    p->vms = vms;
    s->n_vms = (uint16_t)n;
    s->vms_omitted = (int32_t)(c->n_members - n);
    s->vms_digest = vmgroup_vms_digest(vms, (unsigned)n);
    vms = NULL;
    r = 0;
out:
    free(order);
    free(vms);
    return r;
}

/* finish fills the plan's status from the situation, compares it with the
 * group's, and adds the events of conditions that changed. */
static int finish(struct ctx *c)
{
    struct plan *p = c->p;
    struct vmgroup_status *s = &p->status;
    const struct vmgroup_status *old = &c->g->status;
    const char *message, *degraded_message = NULL;
    const struct vmgroup_condition *od, *orr, *nd;
    const struct plan_announced *an = c->in->announced;
    const char *deg_reason, *deg_message;
    bool was_ready, was_degraded, keep;
    char selector[VMGROUP_MAX_SELECTOR + 1];
    int r;

    message = mem_strdup(p->mem, msg_str(&c->message));
    if (c->degraded_reason)
        degraded_message = mem_strdup(p->mem, msg_str(&c->degraded_message));
    if (!message || (c->degraded_reason && !degraded_message))
        return -ENOMEM;

    /* vCenter out of use: the VMs the status names are the last known,
     * and stay; saying none would say they are gone. So from a status that
     * lacks other fields (another tool's, an older operator's) too, when
     * its replicas and VMs were read whole. */
    keep = c->in->folder == PLAN_FOLDER_UNKNOWN && old->phase != VMGROUP_PHASE_NONE &&
           old->vms_readable;
    s->phase = c->phase;
    s->current_replicas = keep ? old->current_replicas : p->current;
    s->desired_replicas = c->g->meta.deleting ? 0 : c->g->spec.replicas;
    s->observed_generation = c->g->meta.generation;
    s->last_message = message;
    /* A UID that is no label value (never one from the API server) gives
     * "": an autoscaler then says that the selector is missing. */
    if (vmgroup_selector(c->g, selector, sizeof(selector)) < 0)
        selector[0] = '\0';
    s->selector = mem_strdup(p->mem, selector);
    if (!s->selector)
        return -ENOMEM;
    s->incomplete = false;
    if (keep) {
        s->vms_kept = true;
        s->n_vms = old->n_vms;
        s->vms_omitted = old->vms_omitted;
        s->vms_digest = old->vms_digest;
    } else if ((r = status_vms(c)) < 0) {
        return r;
    }
    s->n_conditions = 3;
    if (c->phase == VMGROUP_PHASE_RUNNING)
        r = set_condition(c, 0, COND_READY, VMGROUP_COND_TRUE, "AllReplicasRunning", message);
    else
        r = set_condition(c, 0, COND_READY, VMGROUP_COND_FALSE, c->reason, message);
    if (r < 0)
        return r;
    if (c->phase == VMGROUP_PHASE_PENDING)
        r = set_condition(c, 1, COND_PROGRESSING, VMGROUP_COND_TRUE, c->reason, message);
    else
        r = set_condition(c, 1, COND_PROGRESSING, VMGROUP_COND_FALSE,
                          c->phase == VMGROUP_PHASE_ERROR ? "Blocked" : "UpToDate", message);
    if (r < 0)
        return r;
    if (c->degraded_reason)
        r = set_condition(c, 2, COND_DEGRADED, VMGROUP_COND_TRUE, c->degraded_reason,
                          degraded_message);
    else
        r = set_condition(c, 2, COND_DEGRADED, VMGROUP_COND_FALSE, "AsExpected",
                          "nothing needs attention");
    if (r < 0)
        return r;

    /* The object goes away with its finalizer: no status to write then. */
    p->status_changed = !c->remove_finalizer && !vmgroup_status_equal(s, old);
    nd = &s->conditions[2];
    p->announced.ready = s->conditions[0].status == VMGROUP_COND_TRUE;
    if (nd->status == VMGROUP_COND_TRUE) {
        p->announced.degraded_reason = nd->reason ? nd->reason : "";
        p->announced.degraded_message = nd->message ? nd->message : "";
    }
    if (c->remove_finalizer)
        return 0;
    p->announced_valid = true;

    /* The conditions' events, for what changed since the last plan's
     * conditions or, for the first plan, since the object's status. */
    if (an) {
        was_ready = an->ready;
        was_degraded = an->degraded_reason != NULL;
        deg_reason = an->degraded_reason;
        deg_message = an->degraded_message;
    } else {
        if (!p->status_changed)
            return 0;
        orr = vmgroup_condition_find(old, COND_READY);
        od = vmgroup_condition_find(old, COND_DEGRADED);
        was_ready = orr && orr->status == VMGROUP_COND_TRUE;
        was_degraded = od && od->status == VMGROUP_COND_TRUE;
        deg_reason = od ? od->reason : NULL;
        deg_message = od ? od->message : NULL;
    }
    if (nd->status == VMGROUP_COND_TRUE && (!was_degraded || !vmg_streq(deg_reason, nd->reason) ||
                                            !vmg_streq(deg_message, nd->message))) {
        r = add_event(c, PLAN_EVENT_WARNING, nd->reason, nd->message);
        if (r < 0)
            return r;
    }
    if (s->conditions[0].status == VMGROUP_COND_TRUE && !was_ready) {
        r = add_event(c, PLAN_EVENT_NORMAL, "Ready", message);
        if (r < 0)
            return r;
    }
    return 0;
}

static int check_input(const struct planner_input *in)
{
    const struct vmgroup *g = in ? in->g : NULL;

    if (!g || !in->now || (in->n_vms && !in->vms) ||
        (in->n_clones_inflight && !in->clones_inflight) || !g->meta.ns || !g->meta.name ||
        !g->meta.uid || !g->spec.template)
        return -EINVAL;
    return 0;
}

/* copy_status makes p->status a copy of s with strings of the plan's own. */
static int copy_status(struct plan *p, const struct vmgroup_status *s)
{
    p->status = *s;
    p->status.last_message = mem_strdup(p->mem, vmg_nz(s->last_message));
    p->status.selector = mem_strdup(p->mem, vmg_nz(s->selector));
    if (!p->status.last_message || !p->status.selector)
        return -ENOMEM;
    for (unsigned i = 0; i < s->n_conditions && i < VMGROUP_MAX_CONDITIONS; i++) {
        const struct vmgroup_condition *o = &s->conditions[i];
        struct vmgroup_condition *n = &p->status.conditions[i];
        n->type = mem_strdup(p->mem, vmg_nz(o->type));
        n->reason = mem_strdup(p->mem, vmg_nz(o->reason));
        n->message = mem_strdup(p->mem, vmg_nz(o->message));
        n->last_transition_time = mem_strdup(p->mem, vmg_nz(o->last_transition_time));
        if (!n->type || !n->reason || !n->message || !n->last_transition_time)
            return -ENOMEM;
    }
    return 0;
}

int planner_plan(const struct planner_input *in, struct plan **ret)
{
    struct ctx c;
    struct plan *p;
    char folder[NAMING_BUF_SIZE];
    long inflight, max_inflight;
    int r;

    r = check_input(in);
    if (r < 0)
        return r;
    memset(&c, 0, sizeof(c));
    p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->mem = calloc(1, sizeof(*p->mem));
    if (!p->mem) {
        r = -ENOMEM;
        goto out;
    }
    c.in = in;
    c.g = in->g;
    c.p = p;
    c.memory_mb = in->g->spec.memory > 0 && in->g->spec.memory <= INT32_MAX / 1024
                      ? in->g->spec.memory * 1024
                      : 0;
    c.has_finalizer = vmgroup_has_finalizer(in->g, VMGROUP_FINALIZER);
    c.transient = in->transient_message && in->transient_message[0] ? in->transient_message : NULL;

    r = naming_folder(c.g->meta.ns, c.g->meta.name, folder, sizeof(folder));
    if (r < 0)
        goto out;
    p->folder = mem_strdup(p->mem, folder);
    if (!p->folder) {
        r = -ENOMEM;
        goto out;
    }
    r = classify(&c);
    if (r < 0)
        goto out;
    for (size_t i = 0; i < c.n_members; i++) {
        const struct plan_vm *vm = c.members[i].vm;
        if (!vm)
            continue;
        p->current++;
        if (vm->template && strcmp(vm->template, c.g->spec.template) != 0)
            p->old_template++;
    }
    p->foreign = (int)c.n_foreign;
    inflight = count_inflight(&c);
    max_inflight = in->max_inflight > 0 ? in->max_inflight : 1;
    c.budget = inflight >= max_inflight ? 0 : (int)(max_inflight - inflight);

    if (c.g->meta.deleting) {
        if (!c.has_finalizer) {
            /* Not ours to clean up (or already done): nothing to do. */
            r = copy_status(p, &c.g->status);
            if (r < 0)
                goto out;
            goto done;
        }
        r = plan_delete(&c);
    } else {
        r = plan_live(&c);
    }
    if (r < 0)
        goto out;
    r = finish(&c);
    if (r < 0)
        goto out;
done:
    *ret = p;
    p = NULL;
    r = 0;
out:
    free(c.members);
    free(c.by_priority);
    free(c.foreign);
    free(c.used_slots);
    plan_free(p);
    return r;
}

const char *plan_action_kind_name(enum plan_action_kind kind)
{
    switch (kind) {
    case PLAN_ADD_FINALIZER:
        return "add-finalizer";
    case PLAN_CREATE_FOLDER:
        return "create-folder";
    case PLAN_CLONE:
        return "clone";
    case PLAN_POWER_ON:
        return "power-on";
    case PLAN_POWER_OFF:
        return "power-off";
    case PLAN_RECONFIGURE:
        return "reconfigure";
    case PLAN_DESTROY_VM:
        return "destroy";
    case PLAN_MARK:
        return "mark";
    case PLAN_DESTROY_FOLDER:
        return "destroy-folder";
    case PLAN_REMOVE_FINALIZER:
        return "remove-finalizer";
    case PLAN_EVENT:
        return "event";
    }
    return "?";
}

int plan_describe(const struct plan *p, char *buf, size_t size)
{
    size_t len = 0;

    if (!p || (!buf && size))
        return -EINVAL;
    if (size)
        buf[0] = '\0';
    for (size_t i = 0; i < p->n_actions; i++) {
        const struct plan_action *a = &p->actions[i];
        const char *arg1 = "", *arg2 = "";
        int r;
        if (a->kind == PLAN_EVENT) {
            arg1 = a->event_type == PLAN_EVENT_WARNING ? "Warning" : "Normal";
            arg2 = a->reason;
        } else if (a->vm) {
            arg1 = a->vm;
        }
        r = snprintf(len < size ? buf + len : NULL, len < size ? size - len : 0, "%s%s%s%s%s%s",
                     i ? "; " : "", plan_action_kind_name(a->kind), arg1[0] ? " " : "", arg1,
                     arg2[0] ? " " : "", arg2);
        if (r < 0)
            return -EINVAL;
        len += (size_t)r;
    }
    return len > INT32_MAX ? -EINVAL : (int)len;
}
