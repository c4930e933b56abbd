/* vmgroup.h: the VmGroup custom resource (vm.codeconnect.vmworld.com/v1alpha1)
 * as the controller holds it, and its JSON decoding and encoding; its
 * informer type and its Events' object reference (for kube/informer.h and
 * kube/events.h).
 *
 * A decoded VmGroup keeps only what the controller needs (no managedFields,
 * labels, annotations...), in one allocation: the struct, then its
 * finalizer array, then its strings, with equal strings stored once. A
 * typical object takes well under 1 KiB, so a cache can hold many.
 * Decoded objects are read-only; every string pointer is non-NULL ("" when
 * the field was absent) and lives as long as the object.
 */
#ifndef VMG_VMGROUP_H
#define VMG_VMGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct events_object;
struct informer_opts;
struct informer_type;

#define VMGROUP_GROUP "vm.codeconnect.vmworld.com"
#define VMGROUP_VERSION "v1alpha1"
#define VMGROUP_API_VERSION VMGROUP_GROUP "/" VMGROUP_VERSION
#define VMGROUP_KIND "VmGroup"
#define VMGROUP_PLURAL "vmgroups"
#define VMGROUP_FINALIZER "vm.codeconnect.vmworld.com/finalizer"

/* The spec's valid ranges (the CRD's schema enforces them too). */
#define VMGROUP_CPU_MIN 1
#define VMGROUP_CPU_MAX 4
#define VMGROUP_MEMORY_MIN 1 /* GiB */
#define VMGROUP_MEMORY_MAX 8
/* The most VMs one group manages. The CRD allows any int32 (the API is
 * kept as it was); the planner reports more as an error and acts on none. */
#define VMGROUP_REPLICAS_MAX 4096

/* Bounds on what is decoded, in bytes without the NUL. Metadata or spec
 * beyond them is rejected; status beyond them is dropped (see below). */
#define VMGROUP_MAX_NAMESPACE 63
#define VMGROUP_MAX_NAME 253
#define VMGROUP_MAX_UID 128
#define VMGROUP_MAX_RESOURCE_VERSION 128
#define VMGROUP_MAX_TEMPLATE 1024
#define VMGROUP_MAX_FINALIZERS 32
#define VMGROUP_MAX_FINALIZER 316
#define VMGROUP_MAX_MESSAGE 1023 /* lastMessage and condition messages */
#define VMGROUP_MAX_COND_TYPE 64
#define VMGROUP_MAX_REASON 128
#define VMGROUP_MAX_TIME 64
#define VMGROUP_MAX_CONDITIONS 4
#define VMGROUP_MAX_SELECTOR 256 /* status.selector */
/* status.vms lists at most this many members, the first by name; the rest
 * are counted in status.vmsOmitted. */
#define VMGROUP_MAX_STATUS_VMS 64
#define VMGROUP_VM_MAX_IPS 4        /* addresses of one entry of status.vms */
#define VMGROUP_MAX_VM_NAME 255     /* bytes of a VM's name in status.vms */
#define VMGROUP_MAX_VM_UUID 63      /* of its instanceUUID */
#define VMGROUP_MAX_VM_IP 45        /* of an address (an IPv6 literal) */
#define VMGROUP_MAX_VM_WORD 31      /* of its powerState and state */
#define VMGROUP_MAX_SECRET_NAME 253 /* spec.bootstrap.cloudInit.secretRef.name */
#define VMGROUP_MAX_SECRET_KEY 253  /* and .key */
/* The key of the Secret read when secretRef.key is absent. */
#define VMGROUP_DEFAULT_SECRET_KEY "user-data"

/* status.selector, the label selector of the scale subresource (what a
 * HorizontalPodAutoscaler reads): "<VMGROUP_SELECTOR_KEY>=<metadata.uid>".
 * It names the group by the UID its VMs carry as their mark (naming.h); a
 * UID is always a valid label value, where a name may be too long for one.
 * Nothing in the cluster carries this label: an autoscaler needs a selector
 * to accept the target, and metrics that count pods find none. */
#define VMGROUP_SELECTOR_KEY VMGROUP_GROUP "/vmgroup-uid"

enum vmgroup_phase {
    VMGROUP_PHASE_NONE = 0, /* no phase written yet */
    VMGROUP_PHASE_PENDING,
    VMGROUP_PHASE_RUNNING,
    VMGROUP_PHASE_ERROR,
};

enum vmgroup_cond_status {
    VMGROUP_COND_UNKNOWN = 0,
    VMGROUP_COND_TRUE,
    VMGROUP_COND_FALSE,
};

/* One entry of status.conditions, in the Kubernetes condition shape. */
struct vmgroup_condition {
    const char *type;                 /* "Ready", "Progressing", "Degraded" */
    const char *reason;               /* CamelCase */
    const char *message;              /* one sentence */
    const char *last_transition_time; /* RFC 3339 */
    enum vmgroup_cond_status status;
};

/* The states of an entry of status.vms, what the operator intends to do
 * with that member (its powerState says whether it runs), also while it
 * cannot act (blocked, vCenter failing, its budget of operations spent: the
 * phase and conditions say so):
 *   Creating  its clone is in flight (no instanceUUID while vCenter shows
 *             no VM yet; a new VM's comes with vCenter's watch, which can
 *             follow the clone's end)
 *   Removing  it is being powered off and destroyed (scale-down, failed,
 *             the group deleted)
 *   Resizing  its CPU or memory differs from the spec: it is being (or
 *             waits to be) powered off, reconfigured and powered on
 *   Starting  it is off or suspended and is being powered on
 *   Ready     powered on, sized as the spec says, nothing to do */
#define VMGROUP_VM_CREATING "Creating"
#define VMGROUP_VM_REMOVING "Removing"
#define VMGROUP_VM_RESIZING "Resizing"
#define VMGROUP_VM_STARTING "Starting"
#define VMGROUP_VM_READY "Ready"

/* One entry of status.vms: a member of the group. Strings "" (and numbers
 * 0) when unknown; those are left out of the JSON. */
struct vmgroup_vm {
    const char *name;
    const char *instance_uuid; /* config.instanceUuid */
    const char *power_state;   /* poweredOn, poweredOff, suspended */
    const char *template;      /* the template it was cloned from (its mark) */
    const char *state;         /* VMGROUP_VM_* */
    unsigned n_ip;
    const char *ip[VMGROUP_VM_MAX_IPS]; /* the guest's addresses, IPv4 first */
    int32_t cpu;
    int32_t memory_mb;
};

struct vmgroup_status {
    enum vmgroup_phase phase;
    int32_t current_replicas;    /* VMs of this group that exist */
    int32_t desired_replicas;    /* spec.replicas as last acted on */
    int32_t vms_omitted;         /* status.vmsOmitted (see n_vms) */
    int64_t observed_generation; /* metadata.generation this status describes */
    const char *last_message;
    const char *selector; /* see VMGROUP_SELECTOR_KEY; "" when absent */
    /* status.vms, sorted by name, at most VMGROUP_MAX_STATUS_VMS entries,
     * and vms_omitted, the members left out beyond. A status keeps only
     * their count and vms_digest, which is all that comparing needs; the
     * entries to write are the caller's (the planner's, struct plan). */
    uint64_t vms_digest; /* vmgroup_vms_digest of the entries */
    /* True when the stored status lacked a field that vmgroup_status_to_json
     * writes, or held one that could not be read or kept (wrong type, out of
     * bounds, too many conditions). Such a status never equals a complete
     * one, so the controller rewrites it. */
    bool incomplete;
    /* The stored currentReplicas, and vms and vmsOmitted when there, were
     * read whole: what vms_kept may keep, even from an incomplete status. */
    bool vms_readable;
    /* Set by the controller when it does not know the VMs (vCenter out of
     * use): currentReplicas, vms and vmsOmitted are not written, and the
     * object's stay, together; current_replicas, n_vms, vms_omitted and
     * vms_digest are the object's. */
    bool vms_kept;
    uint16_t n_vms;
    unsigned n_conditions;
    struct vmgroup_condition conditions[VMGROUP_MAX_CONDITIONS];
};

struct vmgroup_meta {
    const char *ns;
    const char *name;
    const char *uid;
    const char *resource_version;
    int64_t generation;
    bool deleting; /* metadata.deletionTimestamp is set */
    unsigned n_finalizers;
    const char *const *finalizers;
};

/* spec.bootstrap.cloudInit.secretRef: the Secret, in the VmGroup's
 * namespace, whose key holds the cloud-init user data of every clone. */
struct vmgroup_bootstrap {
    const char *secret_name; /* "" when the spec asks for no bootstrap */
    const char *secret_key;  /* VMGROUP_DEFAULT_SECRET_KEY when absent */
};

struct vmgroup_spec {
    int32_t cpu;    /* CPUs per VM */
    int32_t memory; /* GiB per VM */
    int32_t replicas;
    const char *template; /* name or inventory path of a VM template */
    struct vmgroup_bootstrap bootstrap;
};

struct vmgroup {
    struct vmgroup_meta meta;
    struct vmgroup_spec spec;
    struct vmgroup_status status;
    size_t footprint; /* bytes of the one allocation holding this object */
};

/* vmgroup_from_json decodes a VmGroup from obj (an item of a list, or the
 * object of a watch event). Metadata and spec must hold what the CRD
 * requires, with the right types: metadata.name, namespace, uid (strings),
 * optional resourceVersion, generation, deletionTimestamp, finalizers;
 * spec.cpu, memory, replicas (int32) and template (string; "" is accepted
 * here and reported by the planner, as are out-of-range numbers); optional
 * spec.bootstrap.cloudInit.secretRef, whose name is then required and whose
 * key, when given, must pass vmgroup_secret_key_valid (and the name
 * vmgroup_secret_name_valid). A "kind"
 * other than VmGroup is refused. The status is read leniently: a missing or
 * unreadable field is left zero/"" and marks the status incomplete.
 * Returns 0 and *ret (free with vmgroup_free), VMG_EPARSE with a message
 * naming the field in err (when err is not NULL), or -ENOMEM. */
int vmgroup_from_json(const cJSON *obj, struct vmgroup **ret, char *err, size_t errlen);

/* vmgroup_secret_name_valid tells whether name may name a Secret: a DNS
 * subdomain, 1 to VMGROUP_MAX_SECRET_NAME bytes of [a-z0-9.-], alphanumeric
 * at both ends. */
bool vmgroup_secret_name_valid(const char *name);

/* vmgroup_secret_key_valid tells whether key may name a Secret's key: 1 to
 * VMGROUP_MAX_SECRET_KEY bytes of [-._a-zA-Z0-9] (the API server's rule). */
bool vmgroup_secret_key_valid(const char *key);

/* vmgroup_free frees g; NULL is fine. */
void vmgroup_free(struct vmgroup *g);

/* vmgroup_has_finalizer tells whether g's metadata.finalizers holds
 * finalizer. */
bool vmgroup_has_finalizer(const struct vmgroup *g, const char *finalizer);

/* vmgroup_finalizer_patch builds the patch that adds (add true) or removes
 * VMGROUP_FINALIZER, keeping the other finalizers in order. When g has
 * finalizers, a JSON patch that tests them and the UID, so that the API
 * server refuses it (422, a conflict) if another writer changed them since
 * g was read, or the object is another one of the same name, whatever else
 * changed (our own status writes do not conflict with it):
 *   [{"op":"test","path":"/metadata/uid","value":"<uid>"},
 *    {"op":"test","path":"/metadata/finalizers","value":[<g's>]},
 *    {"op":"replace","path":"/metadata/finalizers","value":[...]}]
 * Else (a test cannot say "absent") a JSON merge patch with g's
 * resourceVersion (omitted when g has none), refused with a conflict if
 * the object changed at all:
 *   {"metadata":{"finalizers":[...],"resourceVersion":"<rv>"}}
 * Returns 0 and *ret (free with cJSON_Delete), or -ENOMEM. */
int vmgroup_finalizer_patch(const struct vmgroup *g, bool add, cJSON **ret);

/* vmgroup_selector writes g's status.selector into buf (NUL terminated).
 * Returns its length, or -EINVAL when an argument is NULL, g's UID is not a
 * valid label value (1 to 63 bytes of [A-Za-z0-9_.-], alphanumeric at both
 * ends; the API server's UIDs always are) or buf is too small. */
int vmgroup_selector(const struct vmgroup *g, char *buf, size_t size);

/* vmgroup_status_to_json encodes s as the value of "status": every field is
 * written (phase omitted only when NONE), conditions in order, and vms[0
 * .. s->n_vms) as status.vms with each entry's unknown fields left out;
 * with s->vms_kept, currentReplicas, vmsOmitted and vms are left out (and
 * vms is not read). Returns 0 and *ret (free with cJSON_Delete), -EINVAL
 * for a NULL s or a NULL vms when s->n_vms is not 0 and the VMs are not
 * kept, or -ENOMEM. */
int vmgroup_status_to_json(const struct vmgroup_status *s, const struct vmgroup_vm *vms,
                           cJSON **ret);

/* vmgroup_vms_digest hashes n entries of status.vms (FNV-1a over every
 * field as written), so that a decoded status compares with a computed one
 * without keeping its entries. 0 for no entries. */
uint64_t vmgroup_vms_digest(const struct vmgroup_vm *vms, unsigned n);

/* vmgroup_status_equal tells whether a and b would be written the same and
 * neither is incomplete. NULL strings compare equal to "". */
bool vmgroup_status_equal(const struct vmgroup_status *a, const struct vmgroup_status *b);

/* vmgroup_status_headline digests what s says of the group as a whole: its
 * phase, the replicas desired, the generation observed, each condition's
 * type, status and reason, in order; not the messages, the replicas that
 * exist so far, nor the VMs' entries, which say how far it has come. What
 * waits for a phase or a condition (`kubectl wait --for=condition=Ready`)
 * sees no difference between two statuses of the same digest. */
uint64_t vmgroup_status_headline(const struct vmgroup_status *s);

/* vmgroup_condition_find returns the condition of s with that type, or NULL. */
const struct vmgroup_condition *vmgroup_condition_find(const struct vmgroup_status *s,
                                                       const char *type);

/* vmgroup_phase_name returns "PENDING", "RUNNING", "ERROR", or "" for NONE. */
const char *vmgroup_phase_name(enum vmgroup_phase phase);

/* vmgroup_cond_status_name returns "True", "False" or "Unknown". */
const char *vmgroup_cond_status_name(enum vmgroup_cond_status status);

/* VmGroups as struct vmgroup, for an informer (kube/informer.h). */
extern const struct informer_type vmgroup_informer_type;

/* vmgroup_informer_opts points o at the VmGroups of the cluster: group,
 * version, plural and type (vmgroup_informer_type); the rest of o is kept. */
void vmgroup_informer_opts(struct informer_opts *o);

/* vmgroup_event_object fills *ret with g's reference for an Event
 * (kube/events.h), pointers into g. */
void vmgroup_event_object(const struct vmgroup *g, struct events_object *ret);

#endif
