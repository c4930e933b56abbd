/* ops_int.h: the insides of vs_ops, shared by vsphere/ops.c (the job
 * queue, templates, the methods) and vsphere/tasks.c (the task tracker).
 * Not for use outside those two files. */
#ifndef VMG_VS_OPS_INT_H
#define VMG_VS_OPS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "lib/queue.h"
#include "vsphere/ops.h"
#include "vsphere/soap.h"
#include "vsphere/vim.h"

#define MSG_MAX 768
#define TCACHE_N 32
#define TRACKER_BACKOFF_MIN_MS 500
#define TRACKER_BACKOFF_MAX_MS 30000
/* A task long poll unanswered this long past its maxWaitSeconds: read the
 * tracked tasks' states directly (a server may answer late: vcsim computes
 * each answer update by update, against every filter of the collector);
 * a task no answer has reported this long after it joined the view: read
 * it at the next answer. */
#define SLOW_POLL_CHECK_MS 30000
/* A task the long poll reported, then nothing of it for this long, is read
 * at the next answer: the last resort against a change the server lost. */
#define TASK_RECHECK_MS (5 * 60 * 1000)
/* A ModifyListView or CancelWaitForUpdates unanswered this long has
 * failed (were vcsim to deadlock after all, it costs seconds). */
#define VIEW_CALL_TIMEOUT_MS 5000
#define DEAD_MAX 1024   /* ended tasks waiting to leave the tracker's ListView */
#define MODIFY_BATCH 64 /* tasks added, and removed, by one ModifyListView */

enum ostep {
    O_QUEUED,
    O_TEMPLATE,   /* waiting for the template's resolution */
    O_TCHECK,     /* the template's config.template and parent, read again */
    O_EMPTY,      /* a folder's children, read before it is destroyed */
    O_CALL,       /* the method */
    O_FIND_CHILD, /* the folder that existed */
    O_CHECK1,     /* the task's state, read when the view did not find it */
    O_NEED_PC,    /* waiting to be added to the tracker's ListView */
    O_FILTER,     /* in the ModifyListView that adds it */
    O_CHECK2,     /* the task's state, read by the safety net (check_tracked) */
    O_TRACKED,    /* waiting for the long poll to report the end */
    O_REREGISTER, /* waiting for the tracker's backoff */
};

struct task_info {
    char state[16];
    bool has_fault;
    struct soap_fault fault;
    bool has_fault_object; /* the fault names an object (DuplicateName's) */
    struct vim_moref fault_object;
    bool has_result;
    struct vim_moref result;
};

struct tentry;

struct vs_op {
    vs_ops *o;
    struct lq link; /* in the queue or the in-flight list */
    bool queued, running;
    enum vs_op_kind kind;
    enum ostep step;
    struct vim_moref target; /* VM, entity, parent folder or group folder */
    char name[VS_NAME_MAX];  /* clone and folder name */
    char template_name[VS_PATH_MAX];
    char mark_uid[VS_MARK_MAX];
    char mark_template[VS_MARK_MAX];
    char instance_uuid[VS_UUID_LEN + 1]; /* a clone's chosen, or the mark a reconfigure
                                            writes; "" when neither */
    bool has_uid, has_tmark;
    /* The clone's other extraConfig entries, pointing into extra_mem (one
     * block of extra_size bytes, wiped before it is freed). */
    struct vim_option *extra;
    size_t n_extra;
    char *extra_mem;
    size_t extra_size;
    int num_cpus;
    long long memory_mb;
    struct vim_moref tmpl;
    bool retried; /* the clone was sent again after re-resolving */
    /* The parent folder the template had when it was resolved, which the
     * read before the clone must find again (unknown: the read records
     * it, for a template just resolved). */
    struct vim_moref tparent;
    bool have_tparent;
    struct tentry *twait;
    struct lq tlink; /* in the template entry's waiters (twait) */
    struct vim_moref task;
    bool have_task;
    bool have_filter;    /* in the tracker's ListView (or being added) */
    unsigned long epoch; /* the tracker epoch it was added in */
    struct task_info ti;
    bool tdone;          /* the long poll saw the end */
    bool tlate_read;     /* its last safety-net read went while the long poll was late */
    bool treported;      /* a long poll reported the task since it joined the view */
    uint64_t tracked_ms; /* when it joined, an answer last reported it or the safety net
                            last read it (uv_now) */
    uint64_t since;      /* the inventory's mark when the operation started */
    vs_req *req;
    bool finishing;
    vs_op_cb cb;
    void *data;
};

enum tstate { T_EMPTY, T_PENDING, T_READY };

struct tentry {
    vs_ops *o;
    enum tstate state;
    char name[VS_PATH_MAX];
    struct vim_moref ref;
    struct vim_moref parent; /* ref's, read right after the resolution */
    bool have_parent;
    uint64_t expires;
    vs_find *find;
    struct lq waiters; /* of vs_op (tlink), the newest first */
};

struct op_list {
    struct lq head;
    size_t n;
};

/* op_first is the first operation of l, op_after the one after op; NULL
 * at the end. */
static inline vs_op *op_first(const struct op_list *l)
{
    struct lq *n = lq_head(&l->head);

    return n ? lq_entry(n, vs_op, link) : NULL;
}

static inline vs_op *op_after(const struct op_list *l, const vs_op *op)
{
    struct lq *n = lq_next(&l->head, &op->link);

    return n ? lq_entry(n, vs_op, link) : NULL;
}

struct vs_ops {
    uv_loop_t *loop;
    vs_session *s;
    vs_inventory *inv;
    bool have_placement;
    struct vs_placement placement;
    size_t max_inflight, max_queued;
    int task_wait;
    uint64_t slow_check_ms;
    uint64_t recheck_ms;
    /* "" when none */
    struct vs_mark_names keys;
    vs_ops_observer obs;
    void *obs_data;

    struct op_list queue, running;
    bool pumping;
    struct tentry tcache[TCACHE_N];

    /* The task tracker: a collector, a ListView of the tasks in flight and
     * one filter over it (have_pc: all three made). */
    struct vim_moref pc, view;
    bool have_pc, creating_pc;
    int setup; /* what pc_req makes: the collector, the view, the filter */
    unsigned long pc_gen;
    unsigned long epoch;
    vs_req *pc_req;
    vs_req *wait_req;
    char version[sizeof(((struct vim_update_set *)0)->version)];
    unsigned failures;
    /* Ended tasks leave the view by ModifyListView (up to DEAD_MAX wait;
     * beyond, a task stays in the view until it is made anew). One
     * ModifyListView at a time, never while a long poll is out (tasks.c
     * send_modify). */
    struct vim_moref *dead;
    size_t ndead;
    vs_req *mod_req;
    unsigned long mod_epoch;
    vs_req *cancel_req;  /* CancelWaitForUpdates, to add tasks */
    bool wait_cancelled; /* CancelWaitForUpdates went for this long poll */
    unsigned long cancel_epoch;
    unsigned long wait_epoch;
    uv_timer_t timer;      /* the tracker's backoff */
    uv_timer_t kick;       /* starts queued operations from the loop */
    uv_timer_t slow;       /* reads the tasks' states while a long poll is slow */
    uint64_t wait_sent_ms; /* when the long poll out was sent (uv_now) */
    bool wait_late;        /* it is late: VS_TRACKER_LATE told */
    vs_tracker_cb tcb;
    void *tcb_data;
    int open_handles;

    bool held; /* vs_ops_hold: no method is sent any more */
    bool closing;
    void (*closed)(void *data);
    void *closed_data;
};

/* vs__op_method is the vSphere method of kind k. */
const char *vs__op_method(enum vs_op_kind k);

/* vs__op_finish ends op with r (kind and task filled in here), frees it and
 * lets the next queued operation start. */
void vs__op_finish(vs_op *op, struct vs_op_result *r);

/* vs__op_send sends method (body buf, len) as op's step. 0 or a negative
 * code. */
int vs__op_send(vs_op *op, enum ostep step, const char *method, char *buf, size_t len);

/* vs__op_send_read reads paths of obj (RetrievePropertiesEx on the
 * session's collector) as op's step. 0 or a negative code. */
int vs__op_send_read(vs_op *op, enum ostep step, const struct vim_moref *obj,
                     const char *const *paths, size_t n);

#endif
