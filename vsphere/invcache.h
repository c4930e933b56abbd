/* invcache.h: the inventory cache: the VMs and folders under the operator's
 * root folder, by managed object reference, as the PropertyCollector
 * reports them (vsphere/inventory feeds it).
 *
 * Pure: no I/O, no clock. Updates are applied one ObjectUpdate at a time
 * (vs_cache_apply) and take effect together at vs_cache_commit, which then
 * reports each object that changed, once, with the group folder (the
 * folder directly under the root) that holds it now and, when it moved or
 * the folder was renamed, the one that held it before. A resync (after the
 * watch was rebuilt) is bracketed by vs_cache_begin_resync and
 * vs_cache_end_resync: objects the new full state did not mention are
 * removed then, and reported so; objects that did not change are not
 * reported at all.
 *
 * Only two extraConfig entries are kept: the marks whose keys the caller
 * names (struct vs_mark_keys).
 *
 * A VM's guest addresses: the primary one, guest.ipAddress (watched), and
 * the ipAddress lists of guest.net (not watched: the inventory reads it
 * once when the primary appears or changes, see vs_cache_guest_read, and
 * at a full state), kept in binary when inet_pton
 * reads them and written back with inet_ntop (vs_obj_ip, vs_obj_ip_at):
 * at most VS_IP_MAX distinct ones, IPv4 first, the primary first within its
 * family and always kept; loopback, link-local, unspecified and broadcast
 * addresses (also IPv4-mapped) and anything else (names, zones, garbage,
 * long strings) are dropped; at most 32 NICs and 64 addresses of guest.net
 * are looked at. guest.net's are kept only while the primary is the one
 * they were read with: a new primary drops them (until the read), an empty
 * one leaves no address at all. An update's guest.net is applied after its
 * other properties, whatever their order.
 *
 * Pointers to objects returned by lookups stay valid until the next
 * vs_cache_commit or vs_cache_end_resync.
 */
#ifndef VMG_VS_INVCACHE_H
#define VMG_VS_INVCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/hex.h"
#include "vsphere/vim.h"

#define VS_REF_MAX 128  /* bytes of a moref value, NUL included */
#define VS_NAME_MAX 256 /* bytes of a name (escaped by vCenter), NUL included */
#define VS_MARK_MAX 256 /* bytes of a mark's value, NUL included */
#define VS_UUID_LEN VMG_UUID_LEN
#define VS_CACHE_DEFAULT_MAX 200000
/* The guest addresses kept of a VM, and the room of one in text (an IPv6
 * literal's INET6_ADDRSTRLEN, NUL included). */
#define VS_IP_MAX 4
#define VS_IP_LEN 46

/* A guest address: family 4 or 6 and the address in network order (4 or
 * 16 bytes of a), family 0 when none. */
struct vs_ip {
    unsigned char family;
    unsigned char a[16];
};

enum vs_obj_kind { VS_OBJ_VM, VS_OBJ_FOLDER };

/* The extraConfig keys of the marks an owner leaves on the VMs it clones
 * (vs_clone_spec) and reads back from the cache (vs_obj.mark_uid,
 * mark_template, mark_instance): the identity of the owner, the template
 * a VM was cloned from, and the instanceUuid chosen for it at its clone.
 * vSphere copies extraConfig into a copy of a VM, but not its
 * instanceUuid: a VM whose instance mark differs from its instanceUuid is
 * a copy of the VM marked. The keys are the caller's policy; each is
 * shorter than VS_NAME_MAX bytes, NULL or "" when that mark is not used. */
struct vs_mark_keys {
    const char *uid;
    const char *template_key;
    const char *instance;
};

/* vs_mark_keys_fit: each key of m is NULL or shorter than VS_NAME_MAX
 * bytes, as every holder of a copy needs. */
bool vs_mark_keys_fit(const struct vs_mark_keys *m);

/* A copy of the mark keys, as the cache, the inventory and vs_ops each
 * hold one: "" for a mark not used. */
struct vs_mark_names {
    char uid[VS_NAME_MAX];
    char template_key[VS_NAME_MAX];
    char instance[VS_NAME_MAX];
};

/* vs_mark_names_set copies m (NULL: no marks), which fits, into n. */
void vs_mark_names_set(struct vs_mark_names *n, const struct vs_mark_keys *m);

/* vs_mark_names_keys: the keys n holds, as a struct vs_mark_keys of n's
 * strings. */
struct vs_mark_keys vs_mark_names_keys(const struct vs_mark_names *n);

/* One cached object. Strings are NUL-terminated, cut to fit. */
struct vs_obj {
    enum vs_obj_kind kind;
    char ref[VS_REF_MAX];    /* moref value, e.g. "vm-42" */
    char name[VS_NAME_MAX];  /* "" until known */
    char parent[VS_REF_MAX]; /* parent's moref value; "" when unknown */
    /* VMs only. */
    char power_state[16]; /* "poweredOn", "poweredOff", "suspended"; "" unknown */
    bool powered_on;
    int num_cpu;         /* 0 when unknown */
    long long memory_mb; /* 0 when unknown */
    bool is_template;
    char instance_uuid[64];
    /* The guest's addresses (see above), ip[0..n_ip), the primary one at
     * ip[ip_primary]; family 0 beyond n_ip. */
    struct vs_ip ip[VS_IP_MAX];
    unsigned char n_ip;
    unsigned char ip_primary;
    bool has_mark_uid;
    char mark_uid[VS_MARK_MAX];
    bool has_mark_template;
    char mark_template[VS_MARK_MAX];
    bool has_mark_instance;
    char mark_instance[64]; /* "" when longer than an instanceUuid can be */
    /* Larger is newer: the number in the moref ("vm-42" -> 42), which
     * vCenter hands out in increasing order. */
    uint64_t create_order;
};

enum vs_change { VS_CHANGE_ADDED, VS_CHANGE_UPDATED, VS_CHANGE_REMOVED };

/* What a commit reports for one object. Valid during the callback. */
struct vs_cache_event {
    enum vs_change change;
    const struct vs_obj *obj; /* REMOVED: its last state */
    /* The group folder holding obj (obj itself when it is a folder directly
     * under the root), or NULL when none (outside the root, or its
     * ancestors are not known). */
    const char *group;
    const char *group_ref;
    /* UPDATED: the group before the change, when it differs (a move, or a
     * renamed group folder); else NULL. */
    const char *old_group;
    const char *old_group_ref;
    /* UPDATED or REMOVED, a VM: its uid mark before the batch, when the
     * batch removed or replaced it (its owner's view of it changed,
     * wherever it is; obj holds the new mark, or the last); else NULL. */
    const char *old_mark_uid;
};

typedef void (*vs_cache_cb)(void *data, const struct vs_cache_event *ev);

typedef struct vs_cache vs_cache;

/* vs_cache_new makes an empty cache of the objects below root_ref (the
 * root folder's moref value), holding at most max_objects (0: the
 * default), keeping the marks of keys marks (copied; NULL: none). cb (may
 * be NULL) is told of changes at each commit. NULL when out of memory,
 * root_ref is empty or too long, or a mark key is too long. */
vs_cache *vs_cache_new(const char *root_ref, size_t max_objects, const struct vs_mark_keys *marks,
                       vs_cache_cb cb, void *data);
void vs_cache_free(vs_cache *c);

/* vs_cache_set_root changes the root (all objects are kept; groups are
 * computed against the new root from then on). -EINVAL for a bad ref. */
int vs_cache_set_root(vs_cache *c, const char *root_ref);
const char *vs_cache_root(const vs_cache *c);

/* vs_cache_apply applies one ObjectUpdate of VirtualMachine or Folder
 * (others are ignored). Returns 0, or -ENOSPC when a new object would
 * exceed max_objects (it is dropped; the rest still applies). */
int vs_cache_apply(vs_cache *c, const struct vim_object_update *u);

/* vs_cache_commit reports what the updates applied since the last commit
 * changed, then forgets removed objects. Returns the number of events. */
size_t vs_cache_commit(vs_cache *c);

/* ---- Assumed changes ----
 *
 * A task that ended tells what it did before the watch shows it (vCenter's
 * stream can lag by seconds, vcsim's by a minute under load): a successful
 * power-on is a powered-on VM, a destroy a VM gone. vs_cache_assume applies
 * such a result like an update; the caller commits, so the change is
 * reported as any other.
 *
 * vCenter's answers carry no time, so the cache orders them and the
 * assumptions by two numbers the caller keeps:
 *
 * - asked: each request whose answer brings updates (the long poll, a read
 *   of an object) is numbered when it is sent, in increasing order; its
 *   answer describes vCenter at or after that moment. An assumption made
 *   while requests up to asked were out pins each property it set (the
 *   power state, the CPUs, the memory, the instance mark, and a clone's
 *   uid and template marks, which decide its group: each apart) at
 *   asked. An answer to a request numbered asked or less may describe
 *   vCenter before the task ended, or after it: it changes the object's
 *   other properties but leaves the pinned ones, and when it says another
 *   value for one of them, vs_cache_apply_from returns
 *   VS_CACHE_READ_BACK: the caller reads the object again with a new
 *   request (numbered after the pin), whose answer says which is true
 *   and overrides the assumption, so that a change made by hand just
 *   after the task is not lost. Any answer to a later request overrides
 *   it too. An object assumed gone stays gone for answers up to
 *   asked (the cache remembers it until vs_cache_settle says no such answer
 *   can come): a destroyed VM never comes back. A removal in any answer is
 *   believed, for the same reason.
 * - since: vs_cache_mark taken when the operation started. A property that
 *   an update changed after that may be newer than the task's result (the
 *   VM powered on again by someone else): the assumption leaves it as it
 *   is, and says so (returns 0); the caller reads the object back then.
 *   Not for a new object (VIM_ENTER, a clone's VM): what the watch said of
 *   it is most likely from before the task's end (vcsim ends a clone before
 *   the power-on it asked for), so the result is assumed and pinned, and
 *   disputed where the watch said otherwise (vs_cache_disputed): the caller
 *   reads it back once the stream has had a chance to show the change.
 */

/* vs_cache_mark is the number of updates applied so far (see above). */
uint64_t vs_cache_mark(const vs_cache *c);

/* What vs_cache_apply_from returns when the update said another value for
 * a pinned property: read the object back. */
#define VS_CACHE_READ_BACK 1

/* vs_cache_apply_from is vs_cache_apply for an update answering the request
 * numbered asked: 0, VS_CACHE_READ_BACK, or vs_cache_apply's errors.
 * vs_cache_apply(c, u) is vs_cache_apply_from(c, u, UINT64_MAX), newer than
 * any assumption. */
int vs_cache_apply_from(vs_cache *c, const struct vim_object_update *u, uint64_t asked);

/* vs_cache_disputed tells whether the last older answer about a pinned
 * property of ref said another value than the assumption (an answer may
 * say off, then on, of a VM: only what it said last counts), and no newer
 * answer has decided since: whether the read-back VS_CACHE_READ_BACK asked
 * for is still needed. */
bool vs_cache_disputed(const vs_cache *c, const char *ref);

/* vs_cache_assume applies u (VIM_ENTER of a new VM or folder, VIM_MODIFY of
 * runtime.powerState or the size, VIM_LEAVE) as the result of an operation
 * started at mark since, while requests up to asked were out. Returns 1
 * when all of u holds now, 0 when the cache kept some of it for a newer
 * update, -ENOSPC, -ENOMEM or -EINVAL. Not committed. */
int vs_cache_assume(vs_cache *c, const struct vim_object_update *u, uint64_t since, uint64_t asked);

/* vs_cache_settle: no answer to a request numbered below floor can come any
 * more; the objects remembered as assumed gone before it are forgotten. */
void vs_cache_settle(vs_cache *c, uint64_t floor);

/* vs_cache_begin_resync starts a full state: every object is marked unseen
 * until an update mentions it. vs_cache_end_resync removes (and reports,
 * with the other pending changes) the ones still unseen. */
void vs_cache_begin_resync(vs_cache *c);
size_t vs_cache_end_resync(vs_cache *c);

/* ---- Lookups ---- */

size_t vs_cache_size(const vs_cache *c);
const struct vs_obj *vs_cache_get(const vs_cache *c, const char *ref);

/* vs_cache_folder finds the folder named name directly under the root
 * (the first one, should there be several); NULL when none. */
const struct vs_obj *vs_cache_folder(const vs_cache *c, const char *name);

/* vs_cache_children fills out[0..max) with the direct children of the
 * object folder_ref that are VMs (vms true) or that are not (vms false),
 * and returns how many there are (which may exceed max). */
size_t vs_cache_children(const vs_cache *c, const char *folder_ref, bool vms,
                         const struct vs_obj **out, size_t max);

/* vs_cache_marked fills out with the VMs whose uid mark is uid, and returns
 * how many there are. */
size_t vs_cache_marked(const vs_cache *c, const char *uid, const struct vs_obj **out, size_t max);

/* vs_cache_group writes the group folder of obj (see vs_cache_event) and
 * returns it, or NULL. */
const struct vs_obj *vs_cache_group(const vs_cache *c, const struct vs_obj *obj);

/* vs_obj_ip writes the primary guest address of o (see above) to out and
 * returns true; false, out "", when it has none. vs_obj_ip_at writes the
 * i-th of its addresses (IPv4 first); false, out "", beyond o->n_ip. */
bool vs_obj_ip(const struct vs_obj *o, char out[VS_IP_LEN]);
bool vs_obj_ip_at(const struct vs_obj *o, unsigned i, char out[VS_IP_LEN]);

/* vs_obj_primary copies the primary guest address of o (family 0: none,
 * or o NULL). */
void vs_obj_primary(const struct vs_obj *o, struct vs_ip *out);

/* vs_cache_guest_read tells whether the VM of u, whose primary guest
 * address was *before (vs_obj_primary before u was applied; family 0 when
 * it was not in the cache) now has a primary address, another one, and u
 * did not carry guest.net: then its guest.net is to be read, once (the
 * read's answer carries guest.net, so it asks for no other read). */
bool vs_cache_guest_read(const vs_cache *c, const struct vim_object_update *u,
                         const struct vs_ip *before);

/* vs_cache_config_read tells whether u, an update of a VM already applied,
 * announces a configuration (config.changeVersion) without its hardware
 * values (config.hardware.*), as vcsim announces a reconfiguration: then
 * the VM is to be read again, for the values. Not when the version is the
 * one the cached values came with (an ENTER, the watch's or a read's, or
 * an update that carried the hardware too): a late announcement of a
 * configuration the cache holds already, as a server whose stream lags
 * sends after the full state that showed the VM. While an assumption pins
 * the VM's size, no version is known, and a version with hardware values
 * is read too (the values may have been kept out). */
bool vs_cache_config_read(const vs_cache *c, const struct vim_object_update *u);

/* vs_create_order reads the number at the end of a moref value ("vm-42" ->
 * 42); 0 when there is none. */
uint64_t vs_create_order(const char *ref);

#endif
