/* tasks.h: the task tracker of vs_ops: one PropertyCollector of the
 * client's own with one filter over a ListView of the running tasks, and
 * its long poll (WaitForUpdatesEx), which reports each task's end. Internal to
 * vsphere/ops.c and vsphere/tasks.c. */
#ifndef VMG_VS_TASKS_H
#define VMG_VS_TASKS_H

#include <stdbool.h>

#include "vsphere/ops_int.h"

/* vs__task_ended: the task's state is "success" or "error". */
bool vs__task_ended(const struct task_info *ti);

/* vs__task_apply records the changes of u (info.state, info.error,
 * info.result) in ti; an end, once seen, is final. */
void vs__task_apply(struct task_info *ti, const struct vim_object_update *u);

/* vs__tracker_complete ends op from its task's end. */
void vs__tracker_complete(vs_op *op);

/* vs__tracker_need_pc registers op's task with the tracker. */
void vs__tracker_need_pc(vs_op *op);

/* vs__tracker_check reads the state of op's task as its step (after a
 * failure to send, op registers again after the tracker's backoff). */
void vs__tracker_check(vs_op *op, enum ostep step);

/* vs__tracker_retrack: following op's task failed; op stays in flight and
 * registers again after the tracker's backoff. */
void vs__tracker_retrack(vs_op *op);

/* vs__tracker_release: op ends; its task leaves the tracker's view. */
void vs__tracker_release(vs_op *op);

/* vs__tracker_missed tells the tracker's callback that a safety net's read
 * found op's task ended, unreported (unless the long poll is late). */
void vs__tracker_missed(const vs_op *op);

/* vs__tracker_kick starts the long poll when tasks are tracked and none
 * runs (adding waiting tasks to the view and removing ended ones first). */
void vs__tracker_kick(vs_ops *o);

/* vs__tracker_reset drops the tracker's collector, its filter and view,
 * asking vCenter to destroy them: the tasks they followed register again
 * on new ones after the tracker's backoff. */
void vs__tracker_reset(vs_ops *o);

#endif
