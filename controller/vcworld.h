/* vcworld.h: the vCenter side as the VmGroup controller sees it: one
 * session, the placement resolved from the flags, the inventory cache of the
 * root folder (watched, not polled), VM and folder operations with their
 * tasks tracked to completion, and tagging. It adapts the vsphere/ modules
 * to the reconciler's world (controller/reconciler.h). */
#ifndef VMG_VCWORLD_H
#define VMG_VCWORLD_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "controller/reconciler.h"
#include "lib/http.h"
#include "lib/metrics.h"
#include "lib/options.h"

typedef struct vcworld vcworld;

struct vcworld_hooks {
    /* Something changed in the folder named folder (a group's folder under
     * the root folder), or, with folder NULL, possibly everywhere (after a
     * reconnect or the first sync): re-enqueue the groups concerned. */
    void (*changed)(void *data, const char *folder);
    /* Optional: a VM marked with the uid of a group changed, was added or
     * removed, wherever it is (one moved out of its group's folder too):
     * re-enqueue that group. */
    void (*marked)(void *data, const char *uid);
    /* Readiness changed: ready, or not with a sentence saying why. */
    void (*state)(void *data, bool ready, const char *msg);
    void *data;
};

/* vcworld_new checks the options (VC_HOST's form, the CA file, the
 * thumbprint) and makes the world; nothing is sent before vcworld_start.
 * metrics may be NULL. Returns 0, or VMG_ECONFIG with a message in err. */
int vcworld_new(uv_loop_t *loop, vmg_http *http, const struct vmg_options *o, vmg_metrics *metrics,
                const struct vcworld_hooks *hooks, vcworld **ret, char *err, size_t errlen);

/* vcworld_start logs in (retrying with backoff), resolves the placement and
 * starts watching the inventory. */
int vcworld_start(vcworld *w);

/* vcworld_ready: 0 when the session is up and the inventory synced, else a
 * negative code and one sentence in msg: VMG_ENOTFOUND, VMG_EAMBIGUOUS or
 * VMG_ECONFIG when the placement (datacenter, root folder, pool, datastore)
 * cannot be resolved, which only a change of the flags can fix. */
int vcworld_ready(vcworld *w, char *msg, size_t len);

/* vcworld_down_ms: how long (ms) vCenter has not been ready, since the last
 * time it was or since w was made; 0 while it is ready. */
uint64_t vcworld_down_ms(vcworld *w);

/* vcworld_fill sets the vCenter members of *rw (folder, operations,
 * readiness) with data w; the caller sets the Kubernetes ones. */
void vcworld_fill(vcworld *w, struct rec_world *rw);

/* vcworld_tag_group_deleted drops the tag of a deleted group, if tagging is
 * on. */
void vcworld_forget_group(vcworld *w, const char *ns, const char *name);

/* vcworld_hold starts no vCenter task any more (vs_ops_hold). */
void vcworld_hold(vcworld *w);

/* vcworld_close cancels what is in flight (their callbacks run with
 * VMG_ECANCELED), logs out, and frees w; closed runs when all is done. */
void vcworld_close(vcworld *w, void (*closed)(void *data), void *data);

#ifdef VMG_TESTING
/* Whether msg names vCenter's user (user), URL (url, as the session built
 * it) or VC_HOST (vc_host): such a message is not shown to tenants. */
bool vcworld_testing_names_vcenter(const char *msg, const char *user, const char *url,
                                   const char *vc_host);
struct vs_inventory_status;
struct vs_placement;
/* What a change of the inventory watch's state tells the log: 1 and the
 * line (at *level), or 0. */
int vcworld_testing_inventory_line(const struct vs_inventory_status *was, bool was_synced,
                                   const struct vs_inventory_status *st,
                                   const struct vs_placement *p, int *level, char *line, size_t n);
struct vs_tracker_note;
/* What a note of the task tracker tells the log (at *level). */
void vcworld_testing_tracker_line(const struct vs_tracker_note *t, const char *kind,
                                  const char *target, const char *task, int *level, char *line,
                                  size_t n);
#endif

#endif
