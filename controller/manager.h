/* manager.h: the wiring of the operator: from the options to a running
 * controller on one libuv loop, and back down on SIGTERM.
 *
 * kube-apiserver --list/watch--> informer --+
 *                                           +--> workqueue --> reconciler
 * vCenter --WaitForUpdatesEx--> inventory --+        (planner -> actions)
 *
 * Plus the metrics and probe endpoints, leader election and events.
 */
#ifndef VMG_MANAGER_H
#define VMG_MANAGER_H

#include "lib/options.h"

/* manager_run runs the operator until SIGTERM or SIGINT (exit status 0), a
 * lost leadership (1) or a start-up failure (1, after logging why). */
int manager_run(const struct vmg_options *o);

#endif
