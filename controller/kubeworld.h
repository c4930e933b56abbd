/* kubeworld.h: the Kubernetes side as the VmGroup controller sees it: the
 * informer's cache of VmGroups, the status and metadata patches of a group,
 * the events about it, and the wall clock for its conditions. It adapts the
 * kube/ modules to the reconciler's world (controller/reconciler.h), as
 * vcworld does the vsphere/ ones. */
#ifndef VMG_KUBEWORLD_H
#define VMG_KUBEWORLD_H

#include "controller/reconciler.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "kube/kube.h"

/* The handles the world uses; the caller makes, owns and closes them, and
 * sets a member to NULL when it closes that handle: a NULL informer holds
 * no group, NULL events say nothing. The struct must outlive the
 * reconciler it is given to. */
struct kubeworld {
    kube_client *kc;      /* the writes */
    struct informer *inf; /* the cache of VmGroups */
    events *ev;           /* the events recorder */
};

/* kubeworld_fill sets the Kubernetes members of *rw (get_group, now,
 * patch_status, patch_meta, event, get_secret) with data kw; vcworld_fill sets the
 * vCenter ones. */
void kubeworld_fill(struct kubeworld *kw, struct rec_world *rw);

/* kubeworld_forget_group drops what the events recorder keeps of the group
 * ns/name (gone for good). */
void kubeworld_forget_group(struct kubeworld *kw, const char *ns, const char *name);

#endif
