/* inventory.h: where the operator's VMs live in vCenter (placement) and a
 * live, watched copy of what is there (the inventory cache).
 *
 * Placement: the datacenter (default: the only one), the root folder of
 * the groups (default "vm-operator" in the datacenter's VM folder; a name,
 * a path relative to that folder, or an absolute inventory path), the
 * resource pool (default: the only one in the datacenter; a name, a path
 * relative to the datacenter's host folder such as "DC0_C0/Resources", or
 * an absolute path) and the datastore (optional; default: the template's).
 * Errors name what was looked for and where: VMG_ENOTFOUND, VMG_EAMBIGUOUS
 * (naming the candidates), VMG_ECONFIG (a path names another kind of
 * object).
 *
 * Watch: a PropertyCollector of the inventory's own with one filter over
 * every VirtualMachine and Folder below the root folder (a recursive
 * traversal of Folder.childEntity; see build_filter in inventory.c for why
 * not a ContainerView) reading names, parents, power state, CPUs, memory,
 * template flag, instance UUID and extraConfig (reduced to the group marks
 * when stored), and one WaitForUpdatesEx long poll after another
 * (maxWaitSeconds 60 by default, at most 100 objects a response) feeding
 * the cache (vsphere/invcache.h), whose commits call the change callback
 * with the group folder of each changed object. A group in sync costs no
 * request beyond the outstanding long poll. A VM whose config.changeVersion
 * changes without its CPU or memory in the same update (vcsim announces a
 * reconfiguration so) is read once more, unless the cache holds that
 * version's values already (a lagging stream announces it late, after a
 * full state or a read that showed it; see vs_cache_config_read). So is a
 * VM whose guest's primary address (guest.ipAddress) shows up or changes,
 * or that a full state shows with one: a read of a VM asks for guest.net
 * too, every NIC's addresses, which is not watched (such reads go after
 * the others, and take at most half the read queue). A task that ended successfully
 * puts its result in the cache at once (vs_inventory_assume, from
 * vsphere/ops), ahead of the watch, which may lag; an older answer of the
 * watch that says otherwise has the VM read once more, and that read
 * decides (the order rule is in invcache.h).
 *
 * Recovery: a lost session (the session logs in again; the collector and
 * filter of the old session are gone) or a fault rebuilds the watch
 * from the placement on (the first rebuild at once, later ones after an
 * exponential backoff); a transport error (vCenter unreachable, or
 * restarting) retries the long poll after the backoff, and rebuilds when
 * vCenter answers that the collector is gone. A rebuild reads the full
 * state again and reports only the difference from the cache, removals of
 * objects that vanished meanwhile included. The state callback reports
 * synced / not synced with the reason, for readiness. A synced watch
 * stays synced through one transport failure of its long poll, which is
 * retried with the same version (nothing is lost) while the cache is
 * served; only a second failure in a row makes it unsynced. A lost
 * session does not make it unsynced either: the rebuild on the new
 * session serves the cache meanwhile, whether an answer or the fault of
 * the old collector (to the long poll or to the rebuild's CreateFilter)
 * tells it of the new session, and the state callback reports the
 * rebuild's start (rebuilding) and end.
 */
#ifndef VMG_VS_INVENTORY_H
#define VMG_VS_INVENTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "vsphere/finder.h"
#include "vsphere/invcache.h"
#include "vsphere/session.h"

#define VS_DEFAULT_ROOT_FOLDER "vm-operator"
#define VS_DEFAULT_MAX_WAIT_SECONDS 60
#define VS_DEFAULT_MAX_OBJECT_UPDATES 100

struct vs_placement_config {
    const char *datacenter;    /* NULL or "": the only one */
    const char *root_folder;   /* NULL or "": VS_DEFAULT_ROOT_FOLDER */
    const char *resource_pool; /* NULL or "": the only one in the datacenter */
    const char *datastore;     /* NULL or "": the template's */
};

struct vs_placement {
    struct vim_moref datacenter;
    char datacenter_name[VS_NAME_MAX];
    char datacenter_path[VS_PATH_MAX]; /* "/DC0" */
    struct vim_moref vm_folder;        /* the datacenter's VM folder */
    struct vim_moref host_folder;
    struct vim_moref root_folder;
    char root_path[VS_PATH_MAX]; /* "/DC0/vm/vm-operator" */
    struct vim_moref pool;
    char pool_path[VS_PATH_MAX]; /* "/DC0/host/DC0_C0/Resources" */
    bool has_datastore;
    struct vim_moref datastore;
    char datastore_name[VS_NAME_MAX];
};

typedef struct vs_resolver vs_resolver;

/* err 0: p is the placement (valid during the call); else msg says what
 * is missing or ambiguous, and where it was looked for. */
typedef void (*vs_placement_cb)(void *data, int err, const char *msg, const struct vs_placement *p);

/* vs_placement_resolve finds the placement cfg names (strings are copied).
 * Returns 0, or -EINVAL / -ENOMEM (cb never called then). */
int vs_placement_resolve(vs_session *s, const struct vs_placement_config *cfg, vs_placement_cb cb,
                         void *data, vs_resolver **ret);

/* vs_resolver_cancel ends a resolution early: cb runs now with
 * VMG_ECANCELED. */
void vs_resolver_cancel(vs_resolver *r);

/* ---- The watch ---- */

typedef struct vs_inventory vs_inventory;

struct vs_inventory_config {
    struct vs_placement_config placement;
    int max_wait_seconds;      /* 0: VS_DEFAULT_MAX_WAIT_SECONDS */
    int max_object_updates;    /* 0: VS_DEFAULT_MAX_OBJECT_UPDATES */
    size_t max_objects;        /* 0: VS_CACHE_DEFAULT_MAX */
    struct vs_mark_keys marks; /* the marks the cache keeps (invcache.h); copied */
    uint64_t backoff_min_ms;   /* 0: 1 s */
    uint64_t backoff_max_ms;   /* 0: 60 s */
};

struct vs_inventory_status {
    bool synced; /* the cache holds vCenter's current state */
    /* Synced, but the long poll failed (err and message say how) and is
     * tried once more with the same version after retry_in_ms, the cache
     * served meanwhile; a second failure makes the watch unsynced. */
    bool retrying;
    /* Synced, and the watch is being rebuilt (message says why: a renewed
     * session, say), its cache served meanwhile; reported again, not
     * rebuilding, once the new full state has come. */
    bool rebuilding;
    /* The long poll in flight is past its timeout and kept, vCenter
     * answering meanwhile (computing a large answer: session.h,
     * "Patience"): how long it has waited, reported each time it is kept;
     * 0 when it is not late, reported again once it answers with the
     * watch synced (an answer that leaves it unsynced, a page of a first
     * sync, is not reported by itself). */
    uint64_t late_ms;
    int err;              /* why not, when not (0 while starting) */
    const char *message;  /* "" or one sentence */
    unsigned failures;    /* in a row */
    uint64_t retry_in_ms; /* when the next try starts, after a failure */
    unsigned long rebuilds;
    size_t objects;
};

typedef void (*vs_inventory_state_cb)(void *data, const struct vs_inventory_status *st);

/* vs_inventory_new makes a watch (not started) in session s; on_change
 * (may be NULL) gets every change of the cache (see invcache.h; it must
 * not call vs_inventory_close or change the cache). Strings of cfg are
 * copied. NULL with *ret_err (-EINVAL, -ENOMEM) on failure. */
vs_inventory *vs_inventory_new(uv_loop_t *loop, vs_session *s,
                               const struct vs_inventory_config *cfg, vs_cache_cb on_change,
                               void *data, int *ret_err);

void vs_inventory_set_state_cb(vs_inventory *inv, vs_inventory_state_cb cb, void *data);

/* vs_inventory_start resolves the placement and starts watching. Returns
 * 0, or VMG_ECANCELED after close. Failures are reported by the state
 * callback and retried. */
int vs_inventory_start(vs_inventory *inv);

/* The placement found at the last (re)build; NULL before the first. */
const struct vs_placement *vs_inventory_placement(const vs_inventory *inv);

/* The cache, for lookups (NULL before the placement is known). */
const vs_cache *vs_inventory_cache(const vs_inventory *inv);

/* vs_inventory_reread reads the VM vm_ref from vCenter and puts what it
 * reads in the cache (on_change reports it; a VM found gone leaves it): for
 * when an operation ended and the watch has not shown it yet. Returns 0 once
 * queued, -EAGAIN while the watch is not synced, -ENOSPC when too many wait. */
int vs_inventory_reread(vs_inventory *inv, const char *vm_ref);

/* vs_inventory_mark is the cache's mark (vs_cache_mark; 0 before there is
 * a cache): take it when an operation starts, for vs_inventory_assume. */
uint64_t vs_inventory_mark(const vs_inventory *inv);

/* vs_inventory_assume puts u, what a task that ended successfully did (a
 * VM powered on, resized, entered by a clone, gone), in the cache at once
 * and commits (on_change reports it), instead of waiting for the watch to
 * show it; since is vs_inventory_mark taken when the operation started.
 * The watch's later answers override it; older ones, still in flight, do
 * not, but when they say otherwise the VM is read again and that read
 * decides; it does not overwrite what the watch said after since (see
 * "Assumed changes" in invcache.h). Returns 1 when all of u holds, 0 when
 * some or all of it was left for the watch to say, -EAGAIN while the watch
 * is not synced or reads its full state again (a resync: read the VM back
 * with vs_inventory_reread), -EINVAL, -ENOSPC or -ENOMEM. */
int vs_inventory_assume(vs_inventory *inv, const struct vim_object_update *u, uint64_t since);

bool vs_inventory_synced(const vs_inventory *inv);

/* vs_inventory_folder finds the group folder called name directly under
 * the root folder: 0 and *ret, VMG_ENOTFOUND, or -EAGAIN while the cache
 * has not synced (its answer would not be trustworthy). */
int vs_inventory_folder(const vs_inventory *inv, const char *name, struct vim_moref *ret);

/* vs_inventory_folder_vms fills out[0..max) with the VMs directly in the
 * group folder called name and returns how many there are (possibly more
 * than max); VMG_ENOTFOUND when there is no such folder, -EAGAIN while not
 * synced. The pointers are valid until the loop runs again (the next
 * update changes the cache). Objects in it that are not VMs (subfolders)
 * are counted in *ret_others when ret_others is not NULL. */
int vs_inventory_folder_vms(const vs_inventory *inv, const char *name, const struct vs_obj **out,
                            size_t max, size_t *ret_others);

/* vs_inventory_close stops the watch (no callback runs after this
 * returns), then frees it once its timer is closed and calls closed(data)
 * when not NULL. The collector is left to the session's logout. NULL is
 * fine. */
void vs_inventory_close(vs_inventory *inv, void (*closed)(void *data), void *data);

#ifdef VMG_TESTING
/* vs_inventory_testing_dispute queues a read of vm_ref to settle a
 * dispute, as an answer older than an assumption does; true when the watch
 * is to be rebuilt at its next answer instead (the queue is full). */
bool vs_inventory_testing_dispute(vs_inventory *inv, const char *vm_ref);
/* vs_inventory_testing_watch applies resp, a WaitForUpdatesEx answer, as
 * the watch does (the cache is made first, of root_ref, when there is
 * none), as part of a full state when full (not ending it), and commits
 * it; nothing is sent. */
int vs_inventory_testing_watch(vs_inventory *inv, const soap_resp *resp, const char *root_ref,
                               bool full);
/* vs_inventory_testing_poll applies resp as the answer of the next long
 * poll (numbered as the watch numbers them, the rest of a truncated set
 * keeping its number) to the cache made by vs_inventory_testing_watch,
 * and marks the watch synced; nothing is sent. */
int vs_inventory_testing_poll(vs_inventory *inv, const soap_resp *resp);
/* vs_inventory_testing_read_failed: a read of vm_ref, not for a dispute,
 * was sent and failed; true when it is queued to be sent again. */
bool vs_inventory_testing_read_failed(vs_inventory *inv, const char *vm_ref);
/* vs_inventory_testing_read_sent numbers a read of vm_ref as sent now (as
 * the one out); vs_inventory_testing_read_answer applies resp, a
 * RetrievePropertiesEx answer, as that read's answer; nothing is sent. */
int vs_inventory_testing_read_sent(vs_inventory *inv, const char *vm_ref);
int vs_inventory_testing_read_answer(vs_inventory *inv, const soap_resp *resp);
/* vs_inventory_testing_due: whether the read of vm_ref queued would be
 * sent now (a dispute's waits for its long poll, and one settled is
 * dropped). */
bool vs_inventory_testing_due(const vs_inventory *inv, const char *vm_ref);
/* The number of reads of vm_ref queued (not sent), taken off the queue
 * (as if sent); what a read of a VM asks for; the cache. */
size_t vs_inventory_testing_queued(vs_inventory *inv, const char *vm_ref);
/* Where the read of vm_ref is in the queue (0 first), SIZE_MAX when none. */
size_t vs_inventory_testing_position(const vs_inventory *inv, const char *vm_ref);
/* What the read of vm_ref queued is for: 1 a dispute, 2 wanted even when
 * its dispute settles, 4 only the guest's addresses (or-ed); -1 when none. */
int vs_inventory_testing_kind(const vs_inventory *inv, const char *vm_ref);
size_t vs_inventory_testing_read_paths(const vs_inventory *inv, const char *const **paths);
const vs_cache *vs_inventory_testing_cache(const vs_inventory *inv);
#endif

#endif
