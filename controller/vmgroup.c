/* vmgroup.c: decoding a VmGroup from JSON into one compact allocation, and
 * encoding its status and finalizer patches. */
#include "controller/vmgroup.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/events.h"
#include "kube/informer.h"
#include "lib/err.h"
#include "lib/str.h"

/* Every string field of a VmGroup, at most: 4 metadata, the finalizers, the
 * template, the bootstrap Secret's name and key, lastMessage, selector and 4
 * per condition. */
#define MAX_STRINGS (4 + VMGROUP_MAX_FINALIZERS + 5 + 4 * VMGROUP_MAX_CONDITIONS)
#define MAX_LABEL_VALUE 63

static const char empty[] = "";

const char *vmgroup_phase_name(enum vmgroup_phase phase)
{
    switch (phase) {
    case VMGROUP_PHASE_PENDING:
        return "PENDING";
    case VMGROUP_PHASE_RUNNING:
        return "RUNNING";
    case VMGROUP_PHASE_ERROR:
        return "ERROR";
    case VMGROUP_PHASE_NONE:
        break;
    }
    return "";
}

const char *vmgroup_cond_status_name(enum vmgroup_cond_status status)
{
    switch (status) {
    case VMGROUP_COND_TRUE:
        return "True";
    case VMGROUP_COND_FALSE:
        return "False";
    case VMGROUP_COND_UNKNOWN:
        break;
    }
    return "Unknown";
}

/* as_integer reads item as an integer in [min, max]. Returns 0 or -EINVAL. */
static int as_integer(const cJSON *item, double min, double max, int64_t *out)
{
    double v;

    if (!cJSON_IsNumber(item))
        return -EINVAL;
    v = item->valuedouble;
    if (!isfinite(v) || v != floor(v) || v < min || v > max)
        return -EINVAL;
    *out = (int64_t)v;
    return 0;
}

/* as_string reads item as a string of at most max bytes. */
static int as_string(const cJSON *item, size_t max, const char **out)
{
    if (!cJSON_IsString(item) || !item->valuestring || strnlen(item->valuestring, max + 1) > max)
        return -EINVAL;
    *out = item->valuestring;
    return 0;
}

/* ---- status.vms's digest ---- */

#define FNV_OFFSET 14695981039346656037ULL
#define FNV_PRIME 1099511628211ULL

static uint64_t fnv_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * FNV_PRIME;
    return h;
}

/* fnv_field adds one field, length first, so that fields cannot run into
 * each other. */
static uint64_t fnv_field(uint64_t h, const char *s)
{
    uint64_t len = strlen(vmg_nz(s));

    h = fnv_bytes(h, &len, sizeof(len));
    return fnv_bytes(h, vmg_nz(s), (size_t)len);
}

static uint64_t vms_digest_more(uint64_t h, const struct vmgroup_vm *v)
{
    int64_t nums[3] = {v->cpu, v->memory_mb, v->n_ip};

    h = fnv_field(h, v->name);
    h = fnv_field(h, v->instance_uuid);
    h = fnv_field(h, v->power_state);
    h = fnv_field(h, v->template);
    h = fnv_field(h, v->state);
    h = fnv_bytes(h, nums, sizeof(nums));
    for (unsigned i = 0; i < v->n_ip && i < VMGROUP_VM_MAX_IPS; i++)
        h = fnv_field(h, v->ip[i]);
    return h;
}

uint64_t vmgroup_vms_digest(const struct vmgroup_vm *vms, unsigned n)
{
    uint64_t h = FNV_OFFSET;

    if (!vms || n == 0)
        return 0;
    for (unsigned i = 0; i < n; i++)
        h = vms_digest_more(h, &vms[i]);
    return h;
}

/* The decoding of one object, before it is packed: strings borrowed from
 * the cJSON tree. */
struct draft {
    struct vmgroup g;
    const char *finalizers[VMGROUP_MAX_FINALIZERS];
};

static int req_string(const cJSON *parent, const char *field, const char *path, size_t max,
                      bool nonempty, const char **out, char *err, size_t errlen)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(parent, field);

    if (!item) {
        vmg_putf(err, errlen, "%s%s: missing", path, field);
        return VMG_EPARSE;
    }
    if (as_string(item, max, out) < 0) {
        vmg_putf(err, errlen, "%s%s: want a string of at most %zu bytes", path, field, max);
        return VMG_EPARSE;
    }
    if (nonempty && !(*out)[0]) {
        vmg_putf(err, errlen, "%s%s: empty", path, field);
        return VMG_EPARSE;
    }
    return 0;
}

static int req_int32(const cJSON *parent, const char *field, const char *path, int32_t *out,
                     char *err, size_t errlen)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(parent, field);
    int64_t v;

    if (!item) {
        vmg_putf(err, errlen, "%s%s: missing", path, field);
        return VMG_EPARSE;
    }
    if (as_integer(item, INT32_MIN, INT32_MAX, &v) < 0) {
        vmg_putf(err, errlen, "%s%s: want a 32-bit integer", path, field);
        return VMG_EPARSE;
    }
    *out = (int32_t)v;
    return 0;
}

static int parse_metadata(const cJSON *meta, struct draft *d, char *err, size_t errlen)
{
    struct vmgroup_meta *m = &d->g.meta;
    const cJSON *item, *fin;
    int64_t gen;
    int r;

    if (!cJSON_IsObject(meta)) {
        vmg_putf(err, errlen, "metadata: %s", meta ? "want an object" : "missing");
        return VMG_EPARSE;
    }
    if ((r = req_string(meta, "name", "metadata.", VMGROUP_MAX_NAME, true, &m->name, err, errlen)) <
            0 ||
        (r = req_string(meta, "namespace", "metadata.", VMGROUP_MAX_NAMESPACE, true, &m->ns, err,
                        errlen)) < 0 ||
        (r = req_string(meta, "uid", "metadata.", VMGROUP_MAX_UID, true, &m->uid, err, errlen)) < 0)
        return r;
    item = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
    if (item && as_string(item, VMGROUP_MAX_RESOURCE_VERSION, &m->resource_version) < 0) {
        vmg_putf(err, errlen, "metadata.resourceVersion: want a string of at most %d bytes",
                 VMGROUP_MAX_RESOURCE_VERSION);
        return VMG_EPARSE;
    }
    item = cJSON_GetObjectItemCaseSensitive(meta, "generation");
    if (item) {
        if (as_integer(item, 0, 9007199254740992.0, &gen) < 0) {
            vmg_putf(err, errlen, "metadata.generation: want a non-negative integer");
            return VMG_EPARSE;
        }
        m->generation = gen;
    }
    item = cJSON_GetObjectItemCaseSensitive(meta, "deletionTimestamp");
    if (item && !cJSON_IsNull(item)) {
        if (!cJSON_IsString(item)) {
            vmg_putf(err, errlen, "metadata.deletionTimestamp: want a string");
            return VMG_EPARSE;
        }
        m->deleting = true;
    }
    item = cJSON_GetObjectItemCaseSensitive(meta, "finalizers");
    if (item && !cJSON_IsNull(item)) {
        if (!cJSON_IsArray(item)) {
            vmg_putf(err, errlen, "metadata.finalizers: want an array");
            return VMG_EPARSE;
        }
        cJSON_ArrayForEach(fin, item)
        {
            if (m->n_finalizers == VMGROUP_MAX_FINALIZERS) {
                vmg_putf(err, errlen, "metadata.finalizers: more than %d entries",
                         VMGROUP_MAX_FINALIZERS);
                return VMG_EPARSE;
            }
            if (as_string(fin, VMGROUP_MAX_FINALIZER, &d->finalizers[m->n_finalizers]) < 0) {
                vmg_putf(err, errlen, "metadata.finalizers[%u]: want a string of at most %d bytes",
                         m->n_finalizers, VMGROUP_MAX_FINALIZER);
                return VMG_EPARSE;
            }
            m->n_finalizers++;
        }
    }
    return 0;
}

bool vmgroup_secret_key_valid(const char *key)
{
    size_t n = 0;

    if (!key)
        return false;
    for (; key[n]; n++) {
        char ch = key[n];
        if (n >= VMGROUP_MAX_SECRET_KEY ||
            !((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '.' || ch == '_'))
            return false;
    }
    return n > 0;
}

bool vmgroup_secret_name_valid(const char *name)
{
    size_t n = 0;

    if (!name)
        return false;
    for (; name[n]; n++) {
        char ch = name[n];
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (n >= VMGROUP_MAX_SECRET_NAME || !(alnum || ch == '-' || ch == '.') ||
            (!alnum && (n == 0 || !name[n + 1])))
            return false;
    }
    return n > 0;
}

/* opt_object reads parent.field, an optional object: 0 and *out (NULL when
 * absent or null), or VMG_EPARSE. */
static int opt_object(const cJSON *parent, const char *field, const char *path, const cJSON **out,
                      char *err, size_t errlen)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(parent, field);

    *out = NULL;
    if (!item || cJSON_IsNull(item))
        return 0;
    if (!cJSON_IsObject(item)) {
        vmg_putf(err, errlen, "%s%s: want an object", path, field);
        return VMG_EPARSE;
    }
    *out = item;
    return 0;
}

/* parse_bootstrap reads spec.bootstrap, optional; with it, cloudInit and its
 * secretRef are required and secretRef.name too (the CRD says the same). */
static int parse_bootstrap(const cJSON *spec, struct vmgroup_bootstrap *b, char *err, size_t errlen)
{
    static const char path[] = "spec.bootstrap.cloudInit.secretRef.";
    const cJSON *boot, *ci, *ref, *key;
    int r;

    b->secret_name = empty;
    b->secret_key = VMGROUP_DEFAULT_SECRET_KEY;
    if ((r = opt_object(spec, "bootstrap", "spec.", &boot, err, errlen)) < 0 || !boot)
        return r;
    if ((r = opt_object(boot, "cloudInit", "spec.bootstrap.", &ci, err, errlen)) < 0)
        return r;
    if (!ci) {
        vmg_putf(err, errlen, "spec.bootstrap.cloudInit: missing");
        return VMG_EPARSE;
    }
    if ((r = opt_object(ci, "secretRef", "spec.bootstrap.cloudInit.", &ref, err, errlen)) < 0)
        return r;
    if (!ref) {
        vmg_putf(err, errlen, "spec.bootstrap.cloudInit.secretRef: missing");
        return VMG_EPARSE;
    }
    if ((r = req_string(ref, "name", path, VMGROUP_MAX_SECRET_NAME, true, &b->secret_name, err,
                        errlen)) < 0)
        return r;
    if (!vmgroup_secret_name_valid(b->secret_name)) {
        vmg_putf(err, errlen, "%sname: want a DNS subdomain (lowercase letters, digits, '-', '.')",
                 path);
        return VMG_EPARSE;
    }
    key = cJSON_GetObjectItemCaseSensitive(ref, "key");
    if (key && !cJSON_IsNull(key) &&
        (as_string(key, VMGROUP_MAX_SECRET_KEY, &b->secret_key) < 0 ||
         !vmgroup_secret_key_valid(b->secret_key))) {
        vmg_putf(err, errlen, "%skey: want 1 to %d characters of [-._a-zA-Z0-9]", path,
                 VMGROUP_MAX_SECRET_KEY);
        return VMG_EPARSE;
    }
    return 0;
}

static int parse_spec(const cJSON *spec, struct vmgroup_spec *s, char *err, size_t errlen)
{
    int r;

    if (!cJSON_IsObject(spec)) {
        vmg_putf(err, errlen, "spec: %s", spec ? "want an object" : "missing");
        return VMG_EPARSE;
    }
    if ((r = req_int32(spec, "cpu", "spec.", &s->cpu, err, errlen)) < 0 ||
        (r = req_int32(spec, "memory", "spec.", &s->memory, err, errlen)) < 0 ||
        (r = req_int32(spec, "replicas", "spec.", &s->replicas, err, errlen)) < 0 ||
        (r = req_string(spec, "template", "spec.", VMGROUP_MAX_TEMPLATE, false, &s->template, err,
                        errlen)) < 0 ||
        (r = parse_bootstrap(spec, &s->bootstrap, err, errlen)) < 0)
        return r;
    return 0;
}

/* status_string reads parent.field, a string of at most max bytes, into *out. */
static bool status_string(const cJSON *parent, const char *field, size_t max, const char **out)
{
    return as_string(cJSON_GetObjectItemCaseSensitive(parent, field), max, out) == 0;
}

static bool parse_condition(const cJSON *c, struct vmgroup_condition *out)
{
    const char *st = NULL;

    if (!cJSON_IsObject(c) || !status_string(c, "type", VMGROUP_MAX_COND_TYPE, &out->type) ||
        !out->type[0] || !status_string(c, "status", 16, &st) ||
        !status_string(c, "reason", VMGROUP_MAX_REASON, &out->reason) ||
        !status_string(c, "message", VMGROUP_MAX_MESSAGE, &out->message) ||
        !status_string(c, "lastTransitionTime", VMGROUP_MAX_TIME, &out->last_transition_time))
        return false;
    if (strcmp(st, "True") == 0)
        out->status = VMGROUP_COND_TRUE;
    else if (strcmp(st, "False") == 0)
        out->status = VMGROUP_COND_FALSE;
    else if (strcmp(st, "Unknown") == 0)
        out->status = VMGROUP_COND_UNKNOWN;
    else
        return false;
    return true;
}

/* opt_status_string reads parent.field, a string of at most max bytes, or
 * "" when absent. */
static bool opt_status_string(const cJSON *parent, const char *field, size_t max, const char **out)
{
    *out = empty;
    return !cJSON_GetObjectItemCaseSensitive(parent, field) ||
           status_string(parent, field, max, out);
}

static bool opt_status_int32(const cJSON *parent, const char *field, int32_t *out)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(parent, field);
    int64_t v = 0;

    if (item && as_integer(item, 0, INT32_MAX, &v) < 0)
        return false;
    *out = (int32_t)v;
    return true;
}

/* parse_vm reads one entry of status.vms, as vmgroup_status_to_json writes
 * it; false when it could not have been written so. */
static bool parse_vm(const cJSON *c, struct vmgroup_vm *out)
{
    const cJSON *ips, *ip;

    if (!cJSON_IsObject(c) || !status_string(c, "name", VMGROUP_MAX_VM_NAME, &out->name) ||
        !out->name[0] || !status_string(c, "state", VMGROUP_MAX_VM_WORD, &out->state) ||
        !opt_status_string(c, "instanceUUID", VMGROUP_MAX_VM_UUID, &out->instance_uuid) ||
        !opt_status_string(c, "powerState", VMGROUP_MAX_VM_WORD, &out->power_state) ||
        !opt_status_string(c, "template", VMGROUP_MAX_TEMPLATE, &out->template) ||
        !opt_status_int32(c, "cpu", &out->cpu) || !opt_status_int32(c, "memoryMB", &out->memory_mb))
        return false;
    ips = cJSON_GetObjectItemCaseSensitive(c, "ipAddresses");
    if (!ips)
        return true;
    if (!cJSON_IsArray(ips))
        return false;
    cJSON_ArrayForEach(ip, ips)
    {
        if (out->n_ip == VMGROUP_VM_MAX_IPS ||
            as_string(ip, VMGROUP_MAX_VM_IP, &out->ip[out->n_ip]) < 0)
            return false;
        out->n_ip++;
    }
    return out->n_ip > 0; /* an empty list is never written */
}

/* parse_vms reads status.vms and vmsOmitted into s's counts and digest.
 * Older statuses have neither: no entries then, which differs from what
 * the planner computes for a group with members, so it writes them once. */
static bool parse_vms(const cJSON *status, struct vmgroup_status *s)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(status, "vms"), *c;
    const cJSON *omitted = cJSON_GetObjectItemCaseSensitive(status, "vmsOmitted");
    struct vmgroup_vm vm;
    uint64_t h = FNV_OFFSET;
    int64_t v;
    bool ok = !item || cJSON_IsArray(item);

    if (item && ok) {
        cJSON_ArrayForEach(c, item)
        {
            memset(&vm, 0, sizeof(vm));
            if (s->n_vms == VMGROUP_MAX_STATUS_VMS || !parse_vm(c, &vm)) {
                ok = false;
                break;
            }
            h = vms_digest_more(h, &vm); /* as vmgroup_vms_digest goes */
            s->n_vms++;
        }
    }
    s->vms_digest = s->n_vms ? h : 0;
    if (omitted && as_integer(omitted, 0, INT32_MAX, &v) == 0)
        s->vms_omitted = (int32_t)v;
    else if (omitted)
        ok = false;
    return ok;
}

/* parse_status reads what it can of status; it never fails. */
static void parse_status(const cJSON *status, struct vmgroup_status *s)
{
    const cJSON *item, *c;
    const char *phase = NULL;
    int64_t v;

    s->incomplete = true;
    if (!cJSON_IsObject(status))
        return;
    bool ok = true, vms_ok = true;
    if (status_string(status, "phase", 16, &phase) && strcmp(phase, "PENDING") == 0)
        s->phase = VMGROUP_PHASE_PENDING;
    else if (phase && strcmp(phase, "RUNNING") == 0)
        s->phase = VMGROUP_PHASE_RUNNING;
    else if (phase && strcmp(phase, "ERROR") == 0)
        s->phase = VMGROUP_PHASE_ERROR;
    else
        ok = false;
    if (as_integer(cJSON_GetObjectItemCaseSensitive(status, "currentReplicas"), INT32_MIN,
                   INT32_MAX, &v) == 0)
        s->current_replicas = (int32_t)v;
    else
        ok = vms_ok = false;
    if (as_integer(cJSON_GetObjectItemCaseSensitive(status, "desiredReplicas"), INT32_MIN,
                   INT32_MAX, &v) == 0)
        s->desired_replicas = (int32_t)v;
    else
        ok = false;
    if (as_integer(cJSON_GetObjectItemCaseSensitive(status, "observedGeneration"), 0,
                   9007199254740992.0, &v) == 0)
        s->observed_generation = v;
    else
        ok = false;
    if (!status_string(status, "lastMessage", VMGROUP_MAX_MESSAGE, &s->last_message))
        ok = false;
    /* Older statuses have no selector: "" then, which differs from the one
     * the planner computes, so the controller writes it once. */
    if (cJSON_GetObjectItemCaseSensitive(status, "selector") &&
        !status_string(status, "selector", VMGROUP_MAX_SELECTOR, &s->selector))
        ok = false;
    item = cJSON_GetObjectItemCaseSensitive(status, "conditions");
    if (cJSON_IsArray(item)) {
        cJSON_ArrayForEach(c, item)
        {
            struct vmgroup_condition cond = {0};
            if (s->n_conditions == VMGROUP_MAX_CONDITIONS || !parse_condition(c, &cond)) {
                ok = false;
                continue;
            }
            s->conditions[s->n_conditions++] = cond;
        }
    } else {
        ok = false;
    }
    if (!parse_vms(status, s))
        ok = vms_ok = false;
    s->incomplete = !ok;
    s->vms_readable = vms_ok;
}

/* Packing: the draft's string fields, listed, then copied into the block
 * after the struct, each distinct content once. */
struct packer {
    const char **fields[MAX_STRINGS];
    size_t n;
};

static void pack_add(struct packer *p, const char **field)
{
    if (!*field)
        *field = empty;
    p->fields[p->n++] = field;
}

/* pack_find returns the index of an earlier field with the same content as
 * field i, or i. */
static size_t pack_find(const struct packer *p, size_t i, const char *const *orig)
{
    for (size_t j = 0; j < i; j++) {
        if (strcmp(orig[j], orig[i]) == 0)
            return j;
    }
    return i;
}

static int pack(struct draft *d, struct vmgroup **ret)
{
    struct packer p = {.n = 0};
    const char *orig[MAX_STRINGS];
    struct vmgroup *g;
    size_t size, fin_bytes;
    char *out;

    pack_add(&p, &d->g.meta.ns);
    pack_add(&p, &d->g.meta.name);
    pack_add(&p, &d->g.meta.uid);
    pack_add(&p, &d->g.meta.resource_version);
    for (unsigned i = 0; i < d->g.meta.n_finalizers; i++)
        pack_add(&p, &d->finalizers[i]);
    pack_add(&p, &d->g.spec.template);
    pack_add(&p, &d->g.spec.bootstrap.secret_name);
    pack_add(&p, &d->g.spec.bootstrap.secret_key);
    pack_add(&p, &d->g.status.last_message);
    pack_add(&p, &d->g.status.selector);
    for (unsigned i = 0; i < d->g.status.n_conditions; i++) {
        struct vmgroup_condition *c = &d->g.status.conditions[i];
        pack_add(&p, &c->type);
        pack_add(&p, &c->reason);
        pack_add(&p, &c->message);
        pack_add(&p, &c->last_transition_time);
    }
    for (unsigned i = d->g.status.n_conditions; i < VMGROUP_MAX_CONDITIONS; i++) {
        struct vmgroup_condition *c = &d->g.status.conditions[i];
        c->type = c->reason = c->message = c->last_transition_time = empty;
    }

    fin_bytes = d->g.meta.n_finalizers * sizeof(char *);
    size = sizeof(*g) + fin_bytes;
    for (size_t i = 0; i < p.n; i++) {
        orig[i] = *p.fields[i];
        if (orig[i][0] && pack_find(&p, i, orig) == i)
            size += strlen(orig[i]) + 1;
    }
    g = malloc(size);
    if (!g)
        return -ENOMEM;
    out = (char *)(g + 1) + fin_bytes;
    for (size_t i = 0; i < p.n; i++) {
        size_t j;
        if (!orig[i][0]) {
            *p.fields[i] = empty;
        } else if ((j = pack_find(&p, i, orig)) < i) {
            *p.fields[i] = *p.fields[j];
        } else {
            size_t len = strlen(orig[i]) + 1;
            memcpy(out, orig[i], len);
            *p.fields[i] = out;
            out += len;
        }
    }
    *g = d->g;
    if (fin_bytes) {
        memcpy(g + 1, d->finalizers, fin_bytes);
        g->meta.finalizers = (const char *const *)(g + 1);
    } else {
        g->meta.finalizers = NULL;
    }
    g->footprint = size;
    *ret = g;
    return 0;
}

int vmgroup_from_json(const cJSON *obj, struct vmgroup **ret, char *err, size_t errlen)
{
    struct draft d;
    const cJSON *kind;
    int r;

    memset(&d, 0, sizeof(d));
    if (!cJSON_IsObject(obj)) {
        vmg_putf(err, errlen, "VmGroup: want an object");
        return VMG_EPARSE;
    }
    kind = cJSON_GetObjectItemCaseSensitive(obj, "kind");
    if (kind && (!cJSON_IsString(kind) || strcmp(kind->valuestring, VMGROUP_KIND) != 0)) {
        vmg_putf(err, errlen, "kind: want \"%s\"", VMGROUP_KIND);
        return VMG_EPARSE;
    }
    r = parse_metadata(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), &d, err, errlen);
    if (r < 0)
        return r;
    r = parse_spec(cJSON_GetObjectItemCaseSensitive(obj, "spec"), &d.g.spec, err, errlen);
    if (r < 0)
        return r;
    parse_status(cJSON_GetObjectItemCaseSensitive(obj, "status"), &d.g.status);
    return pack(&d, ret);
}

void vmgroup_free(struct vmgroup *g)
{
    free(g);
}

bool vmgroup_has_finalizer(const struct vmgroup *g, const char *finalizer)
{
    if (!g || !finalizer)
        return false;
    for (unsigned i = 0; i < g->meta.n_finalizers; i++) {
        if (strcmp(g->meta.finalizers[i], finalizer) == 0)
            return true;
    }
    return false;
}

/* finalizer_list is g's finalizers, with VMGROUP_FINALIZER once (add) or
 * not at all, the others in order; or NULL (out of memory). */
static cJSON *finalizer_list(const struct vmgroup *g, bool add, bool want)
{
    cJSON *list = cJSON_CreateArray();
    bool have = false;

    if (!list)
        return NULL;
    for (unsigned i = 0; i < g->meta.n_finalizers; i++) {
        const char *f = g->meta.finalizers[i];
        cJSON *s;

        if (want && strcmp(f, VMGROUP_FINALIZER) == 0) {
            if (!add || have)
                continue;
            have = true;
        }
        s = cJSON_CreateString(f);
        if (!s || !cJSON_AddItemToArray(list, s)) {
            cJSON_Delete(s);
            cJSON_Delete(list);
            return NULL;
        }
    }
    if (want && add && !have) {
        cJSON *s = cJSON_CreateString(VMGROUP_FINALIZER);
        if (!s || !cJSON_AddItemToArray(list, s)) {
            cJSON_Delete(s);
            cJSON_Delete(list);
            return NULL;
        }
    }
    return list;
}

/* json_patch_op adds {"op":op,"path":path,"value":value} to ops, taking
 * value. */
static int json_patch_op(cJSON *ops, const char *op, const char *path, cJSON *value)
{
    cJSON *o = cJSON_CreateObject();

    if (!o || !cJSON_AddItemToArray(ops, o)) {
        cJSON_Delete(o);
        cJSON_Delete(value);
        return -ENOMEM;
    }
    if (!value || !cJSON_AddStringToObject(o, "op", op) ||
        !cJSON_AddStringToObject(o, "path", path) || !cJSON_AddItemToObject(o, "value", value)) {
        cJSON_Delete(value);
        return -ENOMEM;
    }
    return 0;
}

int vmgroup_finalizer_patch(const struct vmgroup *g, bool add, cJSON **ret)
{
    cJSON *patch, *meta, *list;

    if (g->meta.n_finalizers > 0) {
        /* The UID too: the same finalizers on an object made again under
         * the same name (restored from a backup, say) are not ours to
         * remove. */
        patch = cJSON_CreateArray();
        if (!patch ||
            json_patch_op(patch, "test", "/metadata/uid", cJSON_CreateString(g->meta.uid)) < 0 ||
            json_patch_op(patch, "test", "/metadata/finalizers", finalizer_list(g, add, false)) <
                0 ||
            json_patch_op(patch, "replace", "/metadata/finalizers", finalizer_list(g, add, true)) <
                0)
            goto fail;
        *ret = patch;
        return 0;
    }
    patch = cJSON_CreateObject();
    meta = cJSON_AddObjectToObject(patch, "metadata");
    list = finalizer_list(g, add, true);
    if (!meta || !list || !cJSON_AddItemToObject(meta, "finalizers", list)) {
        cJSON_Delete(list);
        goto fail;
    }
    if (g->meta.resource_version[0] &&
        !cJSON_AddStringToObject(meta, "resourceVersion", g->meta.resource_version))
        goto fail;
    *ret = patch;
    return 0;
fail:
    cJSON_Delete(patch);
    return -ENOMEM;
}

/* label_value tells whether s is a valid Kubernetes label value (not
 * empty). */
static bool label_value(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > MAX_LABEL_VALUE)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && ((i == 0 || i == n - 1) || (c != '-' && c != '_' && c != '.')))
            return false;
    }
    return true;
}

int vmgroup_selector(const struct vmgroup *g, char *buf, size_t size)
{
    int n;

    if (!g || !buf || !g->meta.uid || !label_value(g->meta.uid))
        return -EINVAL;
    n = snprintf(buf, size, "%s=%s", VMGROUP_SELECTOR_KEY, g->meta.uid);
    if (n < 0 || (size_t)n >= size)
        return -EINVAL;
    return n;
}

static bool add_opt_string(cJSON *o, const char *field, const char *v)
{
    return !vmg_nz(v)[0] || cJSON_AddStringToObject(o, field, v);
}

static bool add_opt_int(cJSON *o, const char *field, int32_t v)
{
    return v == 0 || cJSON_AddNumberToObject(o, field, v);
}

/* add_vm appends one entry of status.vms to list. 0 or -ENOMEM. */
static int add_vm(cJSON *list, const struct vmgroup_vm *v)
{
    cJSON *o = cJSON_CreateObject(), *ips;

    if (!o || !cJSON_AddItemToArray(list, o)) {
        cJSON_Delete(o);
        return -ENOMEM;
    }
    if (!cJSON_AddStringToObject(o, "name", vmg_nz(v->name)) ||
        !add_opt_string(o, "instanceUUID", v->instance_uuid) ||
        !add_opt_string(o, "powerState", v->power_state) || !add_opt_int(o, "cpu", v->cpu) ||
        !add_opt_int(o, "memoryMB", v->memory_mb) || !add_opt_string(o, "template", v->template) ||
        !cJSON_AddStringToObject(o, "state", vmg_nz(v->state)))
        return -ENOMEM;
    if (v->n_ip == 0)
        return 0;
    ips = cJSON_AddArrayToObject(o, "ipAddresses");
    if (!ips)
        return -ENOMEM;
    for (unsigned i = 0; i < v->n_ip && i < VMGROUP_VM_MAX_IPS; i++) {
        cJSON *ip = cJSON_CreateString(vmg_nz(v->ip[i]));
        if (!ip || !cJSON_AddItemToArray(ips, ip)) {
            cJSON_Delete(ip);
            return -ENOMEM;
        }
    }
    return 0;
}

int vmgroup_status_to_json(const struct vmgroup_status *s, const struct vmgroup_vm *vms,
                           cJSON **ret)
{
    cJSON *obj, *list;
    char gen[24];

    if (!s || (s->n_vms && !vms && !s->vms_kept))
        return -EINVAL;
    /* cJSON prints numbers beyond int's range with 15 significant digits;
     * the generation is written exactly, as raw text. */
    snprintf(gen, sizeof(gen), "%lld", (long long)s->observed_generation);
    obj = cJSON_CreateObject();
    if (!obj)
        return -ENOMEM;
    if (s->phase != VMGROUP_PHASE_NONE &&
        !cJSON_AddStringToObject(obj, "phase", vmgroup_phase_name(s->phase)))
        goto fail;
    if ((!s->vms_kept && !cJSON_AddNumberToObject(obj, "currentReplicas", s->current_replicas)) ||
        !cJSON_AddNumberToObject(obj, "desiredReplicas", s->desired_replicas) ||
        !cJSON_AddStringToObject(obj, "lastMessage", vmg_nz(s->last_message)) ||
        !cJSON_AddStringToObject(obj, "selector", vmg_nz(s->selector)) ||
        !cJSON_AddRawToObject(obj, "observedGeneration", gen))
        goto fail;
    if (!s->vms_kept) {
        if (!cJSON_AddNumberToObject(obj, "vmsOmitted", s->vms_omitted))
            goto fail;
        list = cJSON_AddArrayToObject(obj, "vms");
        if (!list)
            goto fail;
        for (unsigned i = 0; i < s->n_vms; i++)
            if (add_vm(list, &vms[i]) < 0)
                goto fail;
    }
    list = cJSON_AddArrayToObject(obj, "conditions");
    if (!list)
        goto fail;
    for (unsigned i = 0; i < s->n_conditions && i < VMGROUP_MAX_CONDITIONS; i++) {
        const struct vmgroup_condition *c = &s->conditions[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(list, o)) {
            cJSON_Delete(o);
            goto fail;
        }
        if (!cJSON_AddStringToObject(o, "type", vmg_nz(c->type)) ||
            !cJSON_AddStringToObject(o, "status", vmgroup_cond_status_name(c->status)) ||
            !cJSON_AddStringToObject(o, "reason", vmg_nz(c->reason)) ||
            !cJSON_AddStringToObject(o, "message", vmg_nz(c->message)) ||
            !cJSON_AddStringToObject(o, "lastTransitionTime", vmg_nz(c->last_transition_time)))
            goto fail;
    }
    *ret = obj;
    return 0;
fail:
    cJSON_Delete(obj);
    return -ENOMEM;
}

bool vmgroup_status_equal(const struct vmgroup_status *a, const struct vmgroup_status *b)
{
    if (!a || !b || a->incomplete || b->incomplete || a->phase != b->phase ||
        a->current_replicas != b->current_replicas || a->desired_replicas != b->desired_replicas ||
        a->observed_generation != b->observed_generation ||
        !vmg_streq(a->last_message, b->last_message) || !vmg_streq(a->selector, b->selector) ||
        a->n_vms != b->n_vms || a->vms_omitted != b->vms_omitted ||
        a->vms_digest != b->vms_digest || a->n_conditions != b->n_conditions)
        return false;
    for (unsigned i = 0; i < a->n_conditions && i < VMGROUP_MAX_CONDITIONS; i++) {
        const struct vmgroup_condition *x = &a->conditions[i], *y = &b->conditions[i];
        if (x->status != y->status || !vmg_streq(x->type, y->type) ||
            !vmg_streq(x->reason, y->reason) || !vmg_streq(x->message, y->message) ||
            !vmg_streq(x->last_transition_time, y->last_transition_time))
            return false;
    }
    return true;
}

uint64_t vmgroup_status_headline(const struct vmgroup_status *s)
{
    int64_t nums[3];
    uint64_t h = FNV_OFFSET;

    if (!s)
        return 0;
    nums[0] = s->phase;
    nums[1] = s->desired_replicas;
    nums[2] = s->observed_generation;
    h = fnv_bytes(h, nums, sizeof(nums));
    for (unsigned i = 0; i < s->n_conditions && i < VMGROUP_MAX_CONDITIONS; i++) {
        const struct vmgroup_condition *c = &s->conditions[i];
        int32_t st = c->status;

        h = fnv_field(h, c->type);
        h = fnv_bytes(h, &st, sizeof(st));
        h = fnv_field(h, c->reason);
    }
    return h;
}

const struct vmgroup_condition *vmgroup_condition_find(const struct vmgroup_status *s,
                                                       const char *type)
{
    if (!s || !type)
        return NULL;
    for (unsigned i = 0; i < s->n_conditions && i < VMGROUP_MAX_CONDITIONS; i++) {
        if (vmg_streq(s->conditions[i].type, type))
            return &s->conditions[i];
    }
    return NULL;
}

/* ---- the informer type and the Events' object ---- */

static int vg_decode(const cJSON *obj, void **ret, char *err, size_t errlen)
{
    struct vmgroup *g;
    int r = vmgroup_from_json(obj, &g, err, errlen);

    if (r < 0)
        return r;
    *ret = g;
    return 0;
}

static void vg_free(void *obj)
{
    vmgroup_free(obj);
}

static const char *vg_rv(const void *obj)
{
    return ((const struct vmgroup *)obj)->meta.resource_version;
}

static size_t vg_footprint(const void *obj)
{
    return ((const struct vmgroup *)obj)->footprint;
}

const struct informer_type vmgroup_informer_type = {
    .kind = VMGROUP_KIND,
    .decode = vg_decode,
    .free = vg_free,
    .resource_version = vg_rv,
    .footprint = vg_footprint,
};

void vmgroup_informer_opts(struct informer_opts *o)
{
    o->group = VMGROUP_GROUP;
    o->version = VMGROUP_VERSION;
    o->plural = VMGROUP_PLURAL;
    o->type = &vmgroup_informer_type;
}

void vmgroup_event_object(const struct vmgroup *g, struct events_object *ret)
{
    ret->api_version = VMGROUP_API_VERSION;
    ret->kind = VMGROUP_KIND;
    ret->ns = g->meta.ns;
    ret->name = g->meta.name;
    ret->uid = g->meta.uid;
    ret->resource_version = g->meta.resource_version;
}
