/* vcworld.c: the vCenter half of the reconciler's world, over the vsphere/
 * modules: session, inventory watch, operations, tagging. */
#include "controller/vcworld.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "controller/naming.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/secretfile.h"
#include "lib/str.h"
#include "vsphere/inventory.h"
#include "vsphere/ops.h"
#include "vsphere/rest.h"
#include "vsphere/session.h"

#define LOGGER "vcenter"
#define MAX_FOLDER_VMS VMGROUP_REPLICAS_MAX
/* The most objects other than VMs in a group's folder whose names the
 * planner hears of, to skip: as many as its VMs (a clone of a name held
 * beyond these fails with DuplicateName, which vsphere says is a
 * conflict). The arrays' pages are touched only as far as a folder
 * fills them. */
#define MAX_FOLDER_OTHERS MAX_FOLDER_VMS
#define PASS_POLL_MS 5000                              /* how often VC_PASS_FILE is looked at */
#define BAD_PASSWORD "incorrect user name or password" /* vsphere/session.c's words */

struct vcworld {
    uv_loop_t *loop;
    const struct vmg_options *o;
    struct vcworld_hooks hooks;
    vs_session *s;
    vs_inventory *inv;
    vs_ops *ops;
    vs_rest *rest;
    bool rest_warned;
    bool was_synced;
    bool ready;
    uint64_t down_since; /* uv_now() when it last stopped being ready, or its making */
    char why[640];

    struct vs_session_status sst;
    char sst_msg[512];
    struct vs_inventory_status ist;
    char ist_msg[512];

    /* The VMs of the last folder asked for, valid until the next call. */
    const struct vs_obj *objs[MAX_FOLDER_VMS];
    const struct vs_obj *marked[MAX_FOLDER_VMS]; /* w_folder's VMs marked with a group's uid */
    struct plan_vm vms[MAX_FOLDER_VMS];
    char ips[MAX_FOLDER_VMS][VS_IP_MAX][VS_IP_LEN]; /* their guest addresses, as text */
    const struct vs_obj *others[MAX_FOLDER_OTHERS]; /* the folder's other children */
    const char *other_names[MAX_FOLDER_OTHERS];

    vmg_metrics *metrics;
    struct vmg_metric *m_requests, *m_logins, *m_tasks, *m_task_seconds;
    struct vmg_metric *m_ready, *m_outages;

    /* VC_PASS_FILE, watched: a rotated secret is logged in with at once. */
    uv_fs_poll_t pass_poll;
    bool pass_polling;

    int closing;
    void (*closed)(void *);
    void *closed_data;
};

/* ---- state ---- */

/* placement_err: the inventory cannot start because the placement flags
 * name nothing usable, or it cannot be held: what it says names the flags'
 * paths, which the group's owner may read (it is how they learn why). */
static bool placement_err(int err)
{
    return err == VMG_ENOTFOUND || err == VMG_EAMBIGUOUS || err == VMG_ECONFIG ||
           err == VMG_ETOOBIG;
}

/* has_ci tells whether msg holds the n bytes of s, in any case. */
static bool has_ci(const char *msg, const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (; *msg; msg++)
        if (strncasecmp(msg, s, n) == 0)
            return true;
    return false;
}

/* names_vc tells whether msg names vCenter's user, URL or host, which a
 * tenant is not told (curl's messages name the host alone: "Failed to
 * connect to HOST port ..."), in any case. The user is looked for as
 * given and by its name alone (of 3 characters or more): vCenter and its
 * identity sources write "name@domain" as "name", "DOMAIN\name" or in
 * another case, and "DOMAIN\name" as "name@domain". */
static bool names_vc(const char *msg, const char *user, const char *url, const char *vc_host)
{
    const char *h;
    size_t n;

    if (!msg || !*msg)
        return false;
    if ((url && has_ci(msg, url, strlen(url))) || (user && has_ci(msg, user, strlen(user))) ||
        (vc_host && has_ci(msg, vc_host, strlen(vc_host))))
        return true;
    if (user) {
        const char *bs = strrchr(user, '\\'), *name = bs ? bs + 1 : user;
        size_t len = strcspn(name, "@");
        if (len >= 3 && has_ci(msg, name, len))
            return true;
    }
    /* The host of the URL: between "://" and the port or path. */
    h = url ? strstr(url, "://") : NULL;
    if (!h)
        return false;
    h += 3;
    n = *h == '[' ? strcspn(h, "]") + 1 : strcspn(h, ":/");
    return has_ci(msg, h, n);
}

static bool names_vcenter(const vcworld *w, const char *msg)
{
    return names_vc(msg, w->o->vc_user, w->s ? vs_session_url(w->s) : NULL, w->o->vc_host);
}

#ifdef VMG_TESTING
bool vcworld_testing_names_vcenter(const char *msg, const char *user, const char *url,
                                   const char *vc_host)
{
    return names_vc(msg, user, url, vc_host);
}
#endif

/* login_trouble says, in words fit for tenants, why the session's last
 * login failed (the session in backoff). */
static const char *login_trouble(const vcworld *w)
{
    return w->sst.err == VMG_EAUTH        ? "vCenter refused the operator's login"
           : w->sst.err == VMG_ETRANSPORT ? "vCenter cannot be reached"
                                          : "vCenter login failed";
}

/* update_ready decides readiness and the sentence that says why not. The
 * sentence reaches groups' status and events, which tenants read: it
 * never quotes the session's or a transport's error, which name vCenter's
 * user and URL; those are logged (on_session_state, on_inventory_state). */
static void update_ready(vcworld *w)
{
    bool r = false;

    if (w->sst.state != VS_STATE_READY) {
        switch (w->sst.state) {
        case VS_STATE_BACKOFF:
            /* The session's own words for a wrong password (it names the
             * user before them) are kept: they say what to fix. */
            snprintf(w->why, sizeof(w->why), "%s%s; see the operator's log (retrying in %llu s)",
                     login_trouble(w),
                     w->sst.err == VMG_EAUTH && strstr(w->sst_msg, BAD_PASSWORD) ? ": " BAD_PASSWORD
                                                                                 : "",
                     (unsigned long long)(w->sst.retry_in_ms / 1000));
            break;
        case VS_STATE_CONNECTING:
            snprintf(w->why, sizeof(w->why), "logging in to vCenter");
            break;
        default:
            snprintf(w->why, sizeof(w->why), "not connected to vCenter");
            break;
        }
    } else if (!w->ist.synced) {
        if (placement_err(w->ist.err) && w->ist_msg[0] && !names_vcenter(w, w->ist_msg))
            snprintf(w->why, sizeof(w->why), "%s", w->ist_msg);
        else if (w->ist.err && w->ist.err != -EAGAIN)
            snprintf(w->why, sizeof(w->why),
                     "reading vCenter's inventory failed; see the operator's log");
        else
            snprintf(w->why, sizeof(w->why), "reading vCenter's inventory");
    } else {
        r = true;
        w->why[0] = '\0';
    }
    if (r != w->ready) {
        w->ready = r;
        if (!r) {
            w->down_since = uv_now(w->loop);
            /* Counted even when the grace hides it from every group: a
             * flapping vCenter shows here, and in the log, alone. */
            if (w->m_outages)
                vmg_counter_inc(w->m_outages, (const char *[]){NULL});
        }
        if (w->hooks.state)
            w->hooks.state(w->hooks.data, r, w->why);
    } else if (!r && w->hooks.state) {
        /* Still not ready, maybe for a new reason: let the groups say so. */
        w->hooks.state(w->hooks.data, r, w->why);
    }
}

static void on_session_state(void *data, const struct vs_session_status *st)
{
    vcworld *w = data;
    const char *name[] = {NULL};

    w->sst = *st;
    snprintf(w->sst_msg, sizeof(w->sst_msg), "%s", st->message ? st->message : "");
    w->sst.message = w->sst_msg;
    if (st->state == VS_STATE_READY) {
        vmg_logf(VMG_LOG_INFO, LOGGER, NULL, NULL, "logged in to %s as %s", vs_session_url(w->s),
                 vs_session_user(w->s));
        if (w->m_logins)
            vmg_counter_set(w->m_logins, (double)st->logins, name);
        if (w->rest && !vs_rest_available(w->rest))
            vs_rest_reset(w->rest);
    } else if (st->state == VS_STATE_BACKOFF) {
        vmg_logf(VMG_LOG_WARN, LOGGER, NULL, NULL, "%s; retrying in %llu ms", w->sst_msg,
                 (unsigned long long)st->retry_in_ms);
    }
    update_ready(w);
}

/* inventory_line says what a change of the inventory watch's state, from
 * was (then synced or not: was_synced) to st, tells the log: a line at
 * *level in line, or 0 when nothing. p is the placement, for the first
 * sync. */
static int inventory_line(const struct vs_inventory_status *was, bool was_synced,
                          const struct vs_inventory_status *st, const struct vs_placement *p,
                          int *level, char *line, size_t n)
{
    const char *msg = st->message ? st->message : "";

    *level = VMG_LOG_INFO;
    if (st->late_ms) {
        /* Not a failure: vCenter is computing a large answer. */
        *level = VMG_LOG_WARN;
        vmg_putf(line, n,
                 "inventory: vCenter has not answered the long poll in %llu s, but answers "
                 "CurrentTime: waiting for it (vCenter is computing the changes), %s",
                 (unsigned long long)(st->late_ms / 1000),
                 st->synced ? "the last state served meanwhile" : "not synced until it answers");
    } else if (st->retrying) {
        /* Still synced: the groups go on, and only the log says it. */
        *level = VMG_LOG_WARN;
        vmg_putf(line, n,
                 "inventory: %s; trying the same long poll again in %llu ms, the last state "
                 "served meanwhile",
                 msg, (unsigned long long)st->retry_in_ms);
    } else if (st->synced && was_synced && was->retrying) {
        vmg_putf(line, n, "inventory: the long poll answered again");
    } else if (st->synced && st->rebuilding && !was->rebuilding) {
        vmg_putf(line, n, "inventory: %s; rebuilding the watch, the last state served meanwhile",
                 msg);
    } else if (st->synced && was_synced && was->rebuilding && !st->rebuilding) {
        vmg_putf(line, n, "inventory: watch rebuilt (%zu objects)", st->objects);
    } else if (st->synced && was_synced && was->late_ms) {
        vmg_putf(line, n, "inventory: the long poll answered, late");
    } else if (st->synced && !was_synced && p) {
        vmg_putf(line, n, "watching %s (%zu objects); new VMs go to pool %s", p->root_path,
                 st->objects, p->pool_path);
    } else if (!st->synced && st->err) {
        *level = VMG_LOG_WARN;
        vmg_putf(line, n, "inventory: %s", msg);
    } else {
        return 0;
    }
    return 1;
}

#ifdef VMG_TESTING
int vcworld_testing_inventory_line(const struct vs_inventory_status *was, bool was_synced,
                                   const struct vs_inventory_status *st,
                                   const struct vs_placement *p, int *level, char *line, size_t n)
{
    return inventory_line(was, was_synced, st, p, level, line, n);
}
#endif

static void on_inventory_state(void *data, const struct vs_inventory_status *st)
{
    vcworld *w = data;
    struct vs_inventory_status was = w->ist;
    bool was_synced = w->was_synced;
    char line[1024];
    int level;

    w->ist = *st;
    snprintf(w->ist_msg, sizeof(w->ist_msg), "%s", st->message ? st->message : "");
    w->ist.message = w->ist_msg;
    if (inventory_line(&was, was_synced, &w->ist, vs_inventory_placement(w->inv), &level, line,
                       sizeof(line)))
        vmg_logf(level, LOGGER, NULL, NULL, "%s", line);
    w->was_synced = st->synced;
    update_ready(w);
    /* Newly synced: every group looks again. (A long poll retried and
     * answered brings its changes as any other.) */
    if (st->synced && !was_synced && w->hooks.changed)
        w->hooks.changed(w->hooks.data, NULL);
}

/* tracker_line says what a note of the task tracker tells the log, at
 * *level in line; kind, target and task name the operation of a MISSED
 * note. */
static void tracker_line(const struct vs_tracker_note *t, const char *kind, const char *target,
                         const char *task, int *level, char *line, size_t n)
{
    *level = VMG_LOG_WARN;
    switch (t->event) {
    case VS_TRACKER_LATE:
        vmg_putf(line, n,
                 "tasks: vCenter has not answered the task long poll %llu s past its %d s wait; "
                 "reading the states of the %zu tasks it follows meanwhile",
                 (unsigned long long)(t->late_ms / 1000), t->wait_s, t->tasks);
        return;
    case VS_TRACKER_ANSWERED:
        *level = VMG_LOG_INFO;
        vmg_putf(line, n, "tasks: the task long poll answered, %llu s past its %d s wait",
                 (unsigned long long)(t->late_ms / 1000), t->wait_s);
        return;
    case VS_TRACKER_MISSED:
    default:
        vmg_putf(line, n,
                 "tasks: %s %s: vCenter did not report the end of %s to the task long poll; a "
                 "read found it",
                 kind, target, task);
        return;
    }
}

#ifdef VMG_TESTING
void vcworld_testing_tracker_line(const struct vs_tracker_note *t, const char *kind,
                                  const char *target, const char *task, int *level, char *line,
                                  size_t n)
{
    tracker_line(t, kind, target, task, level, line, n);
}
#endif

static void on_tracker(void *data, const struct vs_tracker_note *t)
{
    char line[1024];
    int level;

    (void)data;
    if (t->op)
        tracker_line(t, vs_op_kind_name(vs_op_kind(t->op)), vs_op_target(t->op), vs_op_task(t->op),
                     &level, line, sizeof(line));
    else
        tracker_line(t, "", "", "", &level, line, sizeof(line));
    vmg_logf(level, LOGGER, NULL, NULL, "%s", line);
}

static void on_change(void *data, const struct vs_cache_event *ev)
{
    vcworld *w = data;
    const struct vs_obj *o = ev->obj;

    if (w->hooks.changed && ev->group)
        w->hooks.changed(w->hooks.data, ev->group);
    if (w->hooks.changed && ev->old_group)
        w->hooks.changed(w->hooks.data, ev->old_group);
    /* Its group's, wherever it is; and the group it was marked with. */
    if (w->hooks.marked && o && o->kind == VS_OBJ_VM && o->has_mark_uid && o->mark_uid[0])
        w->hooks.marked(w->hooks.data, o->mark_uid);
    if (w->hooks.marked && ev->old_mark_uid && ev->old_mark_uid[0])
        w->hooks.marked(w->hooks.data, ev->old_mark_uid);
}

/* ---- metrics ---- */

static void on_request(void *data, const char *method, int err, const char *fault_type,
                       double seconds)
{
    vcworld *w = data;
    const char *result = err == 0 ? "success" : err == VMG_EFAULT ? "fault" : "error";
    (void)fault_type;
    (void)seconds;
    vmg_counter_inc(w->m_requests, (const char *[]){method, result});
}

static double tasks_inflight(void *data)
{
    vcworld *w = data;
    return w->ops ? (double)vs_ops_inflight(w->ops) : 0;
}

static double vcenter_ready(void *data)
{
    char why[8];
    return vcworld_ready(data, why, sizeof(why)) == 0 ? 1 : 0;
}

static int metrics_setup(vcworld *w)
{
    static const char *const req[] = {"method", "result"};
    static const char *const kind[] = {"operation"};
    static const double buckets[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
    const char *none[] = {NULL};

    if (!w->metrics)
        return 0;
    w->m_requests = vmg_counter_new(w->metrics, "vmgroup_vcenter_requests_total",
                                    "vCenter API requests, by method and result", 2, req);
    w->m_logins = vmg_counter_new(w->metrics, "vmgroup_vcenter_logins_total",
                                  "Successful vCenter logins", 0, NULL);
    w->m_tasks = vmg_gauge_new(w->metrics, "vmgroup_vcenter_tasks_inflight",
                               "vCenter tasks in flight", 0, NULL);
    w->m_task_seconds = vmg_histogram_new(w->metrics, "vmgroup_vcenter_task_duration_seconds",
                                          "Time from queuing a vCenter operation to its end",
                                          buckets, sizeof(buckets) / sizeof(buckets[0]), 1, kind);
    w->m_ready = vmg_gauge_new(w->metrics, "vmgroup_vcenter_ready",
                               "1 while the vCenter session is up and its inventory read "
                               "(the vcenter check of /readyz), else 0",
                               0, NULL);
    w->m_outages =
        vmg_counter_new(w->metrics, "vmgroup_vcenter_outages_total",
                        "Times vCenter stopped being ready, held by the grace or not", 0, NULL);
    if (!w->m_requests || !w->m_logins || !w->m_tasks || !w->m_task_seconds || !w->m_ready ||
        !w->m_outages)
        return -ENOMEM;
    vmg_counter_add(w->m_logins, 0, none);
    vmg_counter_add(w->m_outages, 0, none);
    vmg_metric_set_fn(w->m_tasks, none, tasks_inflight, w);
    vmg_metric_set_fn(w->m_ready, none, vcenter_ready, w);
    return 0;
}

/* ---- life ---- */

int vcworld_new(uv_loop_t *loop, vmg_http *http, const struct vmg_options *o, vmg_metrics *metrics,
                const struct vcworld_hooks *hooks, vcworld **ret, char *err, size_t errlen)
{
    struct vs_session_config sc = {0};
    struct vs_inventory_config ic = {0};
    struct vs_ops_config oc = {0};
    vcworld *w;
    int rc = 0;

    w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->loop = loop;
    w->o = o;
    w->hooks = *hooks;
    w->down_since = uv_now(loop);
    w->metrics = metrics;
    rc = metrics_setup(w);
    if (rc < 0)
        goto fail;

    sc.host = o->vc_host;
    sc.user = o->vc_user;
    sc.password = o->vc_pass;
    sc.ca_file = o->vc_ca_file;
    sc.thumbprint = o->vc_thumbprint;
    sc.insecure = o->insecure;
    sc.user_agent = "vmgroup-operator/" VMG_VERSION;
    sc.call_timeout_ms = o->vc_request_timeout_ms;
    w->s = vs_session_new(loop, http, &sc, &rc, err, errlen);
    if (!w->s) {
        if (rc == 0)
            rc = VMG_ECONFIG;
        goto fail;
    }
    vs_session_set_state_cb(w->s, on_session_state, w);
    if (w->m_requests)
        vs_session_set_observer(w->s, on_request, w);

    ic.placement.datacenter = o->datacenter;
    ic.placement.root_folder = o->root_folder;
    ic.placement.resource_pool = o->resource_pool;
    ic.placement.datastore = o->datastore;
    ic.marks = (struct vs_mark_keys){NAMING_MARK_UID_KEY, NAMING_MARK_TEMPLATE_KEY,
                                     NAMING_MARK_INSTANCE_KEY};
    w->inv = vs_inventory_new(loop, w->s, &ic, on_change, w, &rc);
    if (!w->inv) {
        snprintf(err, errlen, "cannot set up the inventory watch: %s", vmg_strerror(rc));
        goto fail;
    }
    vs_inventory_set_state_cb(w->inv, on_inventory_state, w);

    oc.max_inflight = o->max_vcenter_tasks;
    oc.marks = ic.marks;
    w->ops = vs_ops_new(loop, w->s, w->inv, &oc, &rc);
    if (!w->ops) {
        snprintf(err, errlen, "cannot set up vCenter operations: %s", vmg_strerror(rc));
        goto fail;
    }
    vs_ops_set_tracker_cb(w->ops, on_tracker, w);

    if (o->tagging) {
        struct vs_rest_options ro = {0};
        char base[VS_URL_MAX];
        const char *url = vs_session_url(w->s);
        const char *sdk = strstr(url, "/sdk");

        snprintf(base, sizeof(base), "%.*s", sdk ? (int)(sdk - url) : (int)strlen(url), url);
        ro.base_url = base;
        ro.user = o->vc_user;
        ro.password = o->vc_pass;
        ro.prepare = vs_session_prepare_tls;
        ro.prepare_data = w->s;
        ro.release = vs_session_unref; /* the session's memory outlives its close */
        ro.category = NAMING_TAG_CATEGORY;
        ro.category_description = NAMING_TAG_CATEGORY_DESCRIPTION;
        vs_session_ref(w->s);
        w->rest = vs_rest_new(loop, http, &ro, &rc);
        if (!w->rest) {
            vs_session_unref(w->s);
            vmg_logf(VMG_LOG_WARN, LOGGER, NULL, NULL,
                     "tagging is off: cannot set up the vSphere Automation API client: %s",
                     vmg_strerror(rc));
        }
    }
    *ret = w;
    return 0;

fail:
    if (err && errlen && !err[0])
        snprintf(err, errlen, "vCenter: %s", vmg_strerror(rc));
    if (w->ops)
        vs_ops_close(w->ops, NULL, NULL);
    if (w->inv)
        vs_inventory_close(w->inv, NULL, NULL);
    if (w->s)
        vs_session_close(w->s, NULL, NULL);
    free(w);
    return rc < 0 ? rc : VMG_ECONFIG;
}

/* on_pass_file reads VC_PASS_FILE again when it changed (kubelet swaps a
 * mounted Secret's files when the Secret is updated), and logs in with the
 * new password. A file that is gone or unreadable for a moment (between two
 * swaps) keeps the password in use. */
static void on_pass_file(uv_fs_poll_t *h, int status, const uv_stat_t *prev, const uv_stat_t *curr)
{
    vcworld *w = h->data;
    char buf[VMG_SECRET_FILE_MAX + 1], err[512];
    int n, rs, rr;

    (void)prev;
    (void)curr;
    if (status < 0 || w->closing)
        return;
    n = vmg_secret_file_read(w->o->vc_pass_file, buf, sizeof(buf), err, sizeof(err));
    if (n < 0) {
        vmg_logf(VMG_LOG_WARN, LOGGER, NULL, NULL,
                 "VC_PASS_FILE changed but %s; keeping the password in use", err);
    } else {
        /* Each client compares with the password it holds: a file touched
         * but not changed changes nothing. */
        rs = vs_session_set_password(w->s, buf);
        rr = w->rest ? vs_rest_set_password(w->rest, buf) : 1;
        if (rs < 0 || rr < 0)
            vmg_logf(VMG_LOG_ERROR, LOGGER, NULL, NULL,
                     "cannot take the new vCenter password: out of memory");
        else if (rs == 0 || rr == 0)
            vmg_logf(VMG_LOG_INFO, LOGGER, NULL, NULL,
                     "the vCenter password in %s changed; logging in with it from now on",
                     w->o->vc_pass_file);
    }
    OPENSSL_cleanse(buf, sizeof(buf));
}

int vcworld_start(vcworld *w)
{
    int rc;

    if (w->o->vc_pass_file && !w->pass_polling) {
        rc = uv_fs_poll_init(w->loop, &w->pass_poll);
        if (rc == 0) {
            w->pass_poll.data = w;
            rc = uv_fs_poll_start(&w->pass_poll, on_pass_file, w->o->vc_pass_file, PASS_POLL_MS);
            w->pass_polling = true;
        }
        if (rc < 0)
            vmg_logf(VMG_LOG_WARN, LOGGER, NULL, NULL,
                     "cannot watch VC_PASS_FILE %s: %s; a changed password needs a restart",
                     w->o->vc_pass_file, uv_strerror(rc));
    }
    rc = vs_session_start(w->s);
    if (rc < 0 && rc != -EALREADY)
        return rc;
    rc = vs_inventory_start(w->inv);
    return rc == -EALREADY ? 0 : rc;
}

int vcworld_ready(vcworld *w, char *msg, size_t len)
{
    if (!w) {
        snprintf(msg, len, "vCenter is not set up");
        return VMG_ETRANSPORT;
    }
    if (w->ready && vs_session_state(w->s) == VS_STATE_READY && vs_inventory_synced(w->inv))
        return 0;
    snprintf(msg, len, "%s", w->why[0] ? w->why : "connecting to vCenter");
    if (w->sst.state == VS_STATE_READY && !w->ist.synced &&
        (w->ist.err == VMG_ENOTFOUND || w->ist.err == VMG_EAMBIGUOUS || w->ist.err == VMG_ECONFIG))
        return w->ist.err; /* the placement flags name nothing usable */
    return w->sst.err ? w->sst.err : VMG_ETRANSPORT;
}

uint64_t vcworld_down_ms(vcworld *w)
{
    uint64_t now;

    if (!w)
        return UINT64_MAX;
    if (w->ready)
        return 0;
    now = uv_now(w->loop);
    return now > w->down_since ? now - w->down_since : 0;
}

/* ---- the world ---- */

static int w_ready(void *data, char *msg, size_t len)
{
    return vcworld_ready(data, msg, len);
}

static uint64_t w_down_ms(void *data)
{
    return vcworld_down_ms(data);
}

/* put_vm describes the VM o of the cache as the planner sees it, in
 * w->vms[i]. */
static void put_vm(vcworld *w, size_t i, const struct vs_obj *o)
{
    struct plan_vm *v = &w->vms[i];

    memset(v, 0, sizeof(*v));
    v->name = o->name;
    v->ref = o->ref;
    v->mark_uid = o->has_mark_uid ? o->mark_uid : NULL;
    v->template = o->has_mark_template ? o->mark_template : NULL;
    v->mark_instance = o->has_mark_instance ? o->mark_instance : NULL;
    v->instance_uuid = o->instance_uuid;
    v->power_state = o->power_state;
    for (unsigned k = 0; k < VS_IP_MAX && v->n_ip < VMGROUP_VM_MAX_IPS; k++)
        if (vs_obj_ip_at(o, k, w->ips[i][k]))
            v->ip[v->n_ip++] = w->ips[i][k];
    v->powered_on = o->powered_on;
    v->num_cpu = o->num_cpu;
    v->memory_mb = (int)o->memory_mb;
    v->create_order = o->create_order;
    /* A half-made or broken VM: no name or no power state yet. */
    v->failed = o->is_template;
}

/* w_folder lists the VMs of the group's folder, then those marked with
 * the group's uid elsewhere under the root folder (plan_vm.elsewhere):
 * moved out by hand, or left in a folder renamed, they are the group's
 * still; the planner tells them from copies someone made of its VMs. */
static int w_folder(void *data, const char *folder, const char *uid, struct rec_folder *ret)
{
    vcworld *w = data;
    const vs_cache *c = vs_inventory_cache(w->inv);
    const struct vs_obj *f;
    size_t n = 0, n_in, m; /* VMs listed, of them in the folder, marked */

    memset(ret, 0, sizeof(*ret));
    if (!c || !vs_inventory_synced(w->inv)) {
        ret->state = PLAN_FOLDER_UNKNOWN;
        return 0;
    }
    f = vs_cache_folder(c, folder);
    ret->state = f ? PLAN_FOLDER_PRESENT : PLAN_FOLDER_ABSENT;
    if (f) {
        n = vs_cache_children(c, f->ref, true, w->objs, MAX_FOLDER_VMS);
        if (n > MAX_FOLDER_VMS) {
            n = MAX_FOLDER_VMS;
            ret->truncated = true;
        }
        ret->other_objects = vs_cache_children(c, f->ref, false, w->others, MAX_FOLDER_OTHERS);
        ret->n_other_names =
            ret->other_objects < MAX_FOLDER_OTHERS ? ret->other_objects : MAX_FOLDER_OTHERS;
        for (size_t i = 0; i < ret->n_other_names; i++)
            w->other_names[i] = w->others[i]->name;
        ret->other_names = w->other_names;
    }
    n_in = n;
    m = uid && uid[0] ? vs_cache_marked(c, uid, w->marked, MAX_FOLDER_VMS) : 0;
    if (m > MAX_FOLDER_VMS) {
        m = MAX_FOLDER_VMS;
        ret->truncated = true;
    }
    for (size_t i = 0; i < m; i++) {
        if (f && strcmp(w->marked[i]->parent, f->ref) == 0)
            continue; /* listed above */
        if (n == MAX_FOLDER_VMS) {
            ret->truncated = true;
            break;
        }
        w->objs[n++] = w->marked[i];
    }
    for (size_t i = 0; i < n; i++) {
        put_vm(w, i, w->objs[i]);
        w->vms[i].elsewhere = i >= n_in;
    }
    ret->vms = w->vms;
    ret->n_vms = n;
    return 0;
}

struct opctx {
    vcworld *w;
    uint64_t queued_ms; /* for vmgroup_vcenter_task_duration_seconds */
    rec_done_cb cb;
    void *cbdata;
    char ns[128], name[256];
    bool tag;
    char vm_ref[VS_REF_MAX]; /* the VM acted on (read back when its result is not assumed) */
};

static void tag_done(void *data, const struct vs_rest_result *res)
{
    struct opctx *c = data;
    vcworld *w = c->w;

    if (res->err && res->err != VMG_ECANCELED) {
        if (!vs_rest_available(w->rest)) {
            if (!w->rest_warned) {
                vmg_logf(VMG_LOG_WARN, LOGGER, NULL, NULL,
                         "tagging is unavailable, VMs are managed without tags: %s",
                         vs_rest_disabled_reason(w->rest));
                w->rest_warned = true;
            }
        } else {
            vmg_logf(VMG_LOG_WARN, LOGGER, c->ns, c->name, "tagging a VM failed: %s", res->msg);
        }
    }
    free(c);
}

/* waited_for_login says whether an operation failed because the login its
 * call waited for failed: the session fails those calls once in backoff
 * (it tells vcworld first), with vs_waited_err() of the login's error. New
 * calls wait while the session is not ready; a call sent before, failing
 * with that error during the backoff, is said the same way, as the
 * group's readiness says it too. */
static bool waited_for_login(const vcworld *w, int err, const char *fault)
{
    return !fault && w->sst.state == VS_STATE_BACKOFF && err == vs_waited_err(w->sst.err);
}

/* tenant_msg is what an operation's failure says to the group (status,
 * events): vCenter's own answers (a fault, an object not found) as they
 * are; a failure of the session or the transport, whose message names
 * vCenter's user or URL, and any message that names them, only by its
 * kind, the message going to the log. */
static const char *tenant_msg(const struct opctx *c, int err, const char *fault, const char *msg,
                              char *buf, size_t size)
{
    if ((err == 0 || err == VMG_ECANCELED || fault || err == VMG_ENOTFOUND ||
         err == VMG_EAMBIGUOUS || err == VMG_ECONFIG || err == VMG_ECONFLICT) &&
        !names_vcenter(c->w, msg))
        return msg;
    vmg_logf(VMG_LOG_WARN, LOGGER, c->ns[0] ? c->ns : NULL, c->name[0] ? c->name : NULL,
             "a vCenter operation failed: %s", msg && *msg ? msg : vmg_strerror(err));
    snprintf(buf, size, "%s; see the operator's log",
             waited_for_login(c->w, err, fault) ? login_trouble(c->w) : vmg_strerror(err));
    return buf;
}

static void op_done(void *data, const struct vs_op_result *r)
{
    struct opctx *c = data;
    const char *fault = r->fault_type && r->fault_type[0] ? r->fault_type : NULL;
    char msg[128];

    if (c->w->m_task_seconds && r->err != VMG_ECANCELED)
        vmg_histogram_observe(c->w->m_task_seconds,
                              (double)(uv_now(c->w->loop) - c->queued_ms) / 1000.0,
                              (const char *[]){vs_op_kind_name(r->kind)});
    /* What the operation did is in the cache already when vs_ops could
     * assume it (r->assumed). Otherwise (the watch said something else of
     * the VM since the operation started) the VM is read back at once, not
     * only learned from the watch, which can lag (vcsim's by minutes under
     * load): until the cache shows it, the reconciler waits, then plans
     * again. */
    if (r->err == 0 && !r->assumed) {
        const char *vm = r->kind == VS_OP_CLONE && r->result ? r->result->value : c->vm_ref;
        if (vm[0])
            (void)vs_inventory_reread(c->w->inv, vm);
    }
    c->cb(c->cbdata, r->err, fault, tenant_msg(c, r->err, fault, r->message, msg, sizeof(msg)));
    if (c->tag && r->err == 0 && r->result && c->w->rest && vs_rest_available(c->w->rest)) {
        char tag[NAMING_BUF_SIZE], desc[VS_REST_DESCRIPTION_MAX + 1];

        if (naming_tag(c->ns, c->name, tag, sizeof(tag)) >= 0 &&
            naming_tag_description(c->ns, c->name, desc, sizeof(desc)) >= 0 &&
            vs_rest_attach(c->w->rest, tag, desc, r->result->value, tag_done, c) == 0)
            return;
    }
    free(c);
}

static struct opctx *ctx_new(vcworld *w, rec_done_cb cb, void *cbdata)
{
    struct opctx *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->w = w;
    c->queued_ms = uv_now(w->loop);
    c->cb = cb;
    c->cbdata = cbdata;
    return c;
}

static int finish_start(struct opctx *c, int rc)
{
    if (rc < 0)
        free(c);
    return rc;
}

static int find_folder(vcworld *w, const char *folder, struct vim_moref *ret)
{
    int rc = vs_inventory_folder(w->inv, folder, ret);
    return rc < 0 ? rc : 0;
}

static int find_vm(vcworld *w, const char *folder, const char *vm, struct vim_moref *ret)
{
    const vs_cache *c = vs_inventory_cache(w->inv);
    const struct vs_obj *f = c ? vs_cache_folder(c, folder) : NULL;
    size_t n;

    if (!f)
        return VMG_ENOTFOUND;
    n = vs_cache_children(c, f->ref, true, w->objs, MAX_FOLDER_VMS);
    if (n > MAX_FOLDER_VMS)
        n = MAX_FOLDER_VMS;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(w->objs[i]->name, vm) == 0) {
            snprintf(ret->type, sizeof(ret->type), "VirtualMachine");
            snprintf(ret->value, sizeof(ret->value), "%s", w->objs[i]->ref);
            return 0;
        }
    }
    return VMG_ENOTFOUND;
}

static int w_create_folder(void *data, const char *folder, rec_done_cb cb, void *cbdata)
{
    vcworld *w = data;
    const struct vs_placement *p = vs_inventory_placement(w->inv);
    struct opctx *c;

    if (!p)
        return VMG_ECONFIG;
    c = ctx_new(w, cb, cbdata);
    if (!c)
        return -ENOMEM;
    return finish_start(c, vs_ops_create_folder(w->ops, &p->root_folder, folder, op_done, c, NULL));
}

static int w_destroy_folder(void *data, const char *folder, rec_done_cb cb, void *cbdata)
{
    vcworld *w = data;
    struct vim_moref ref;
    struct opctx *c;
    int rc = find_folder(w, folder, &ref);

    if (rc < 0)
        return rc;
    c = ctx_new(w, cb, cbdata);
    if (!c)
        return -ENOMEM;
    return finish_start(c, vs_ops_destroy(w->ops, &ref, op_done, c, NULL));
}

static int w_clone(void *data, const struct vmgroup *g, const char *folder, const char *vm,
                   const char *template_, int cpu, int memory_mb, const struct rec_keyval *extra,
                   size_t n_extra, rec_done_cb cb, void *cbdata)
{
    vcworld *w = data;
    struct vim_moref ref;
    struct vs_clone_spec spec = {0};
    struct vim_option opts[VS_CLONE_MAX_EXTRA];
    struct opctx *c;
    int rc;

    if (n_extra > VS_CLONE_MAX_EXTRA || (n_extra && !extra))
        return -EINVAL;
    rc = find_folder(w, folder, &ref);
    if (rc < 0)
        return rc;
    c = ctx_new(w, cb, cbdata);
    if (!c)
        return -ENOMEM;
    snprintf(c->ns, sizeof(c->ns), "%s", g->meta.ns);
    snprintf(c->name, sizeof(c->name), "%s", g->meta.name);
    c->tag = w->rest != NULL;
    spec.template_name = template_;
    spec.folder = &ref;
    spec.name = vm;
    spec.num_cpus = cpu;
    spec.memory_mb = memory_mb;
    spec.mark_uid = g->meta.uid;
    spec.mark_template = template_;
    for (size_t i = 0; i < n_extra; i++)
        opts[i] = (struct vim_option){extra[i].key, extra[i].value, extra[i].secret};
    spec.extra = n_extra ? opts : NULL;
    spec.n_extra = n_extra;
    return finish_start(c, vs_ops_clone(w->ops, &spec, op_done, c, NULL));
}

/* vm_ref puts the VM in ref: the one whose moref value is id when there
 * is one, else the one named vm in folder. */
static int vm_ref(vcworld *w, const char *folder, const char *vm, const char *id,
                  struct vim_moref *ref)
{
    if (!id || !id[0])
        return find_vm(w, folder, vm, ref);
    if (strlen(id) >= sizeof(ref->value))
        return -EINVAL;
    snprintf(ref->type, sizeof(ref->type), "VirtualMachine");
    snprintf(ref->value, sizeof(ref->value), "%s", id);
    return 0;
}

/* vm_op finds the VM (vm_ref) and makes the context of an operation on it. */
static int vm_op(vcworld *w, const char *folder, const char *vm, const char *id, rec_done_cb cb,
                 void *cbdata, struct vim_moref *ref, struct opctx **ret)
{
    int rc = vm_ref(w, folder, vm, id, ref);

    if (rc < 0)
        return rc;
    *ret = ctx_new(w, cb, cbdata);
    if (!*ret)
        return -ENOMEM;
    snprintf((*ret)->vm_ref, sizeof((*ret)->vm_ref), "%s", ref->value);
    return 0;
}

static int w_power(void *data, const char *folder, const char *vm, const char *id, bool on,
                   rec_done_cb cb, void *cbdata)
{
    struct vim_moref ref;
    struct opctx *c = NULL;
    int rc = vm_op(data, folder, vm, id, cb, cbdata, &ref, &c);

    if (rc < 0)
        return rc;
    return finish_start(c, on ? vs_ops_power_on(c->w->ops, &ref, op_done, c, NULL)
                              : vs_ops_power_off(c->w->ops, &ref, op_done, c, NULL));
}

static int w_reconfigure(void *data, const char *folder, const char *vm, const char *id, int cpu,
                         int memory_mb, rec_done_cb cb, void *cbdata)
{
    struct vim_moref ref;
    struct opctx *c = NULL;
    int rc = vm_op(data, folder, vm, id, cb, cbdata, &ref, &c);

    if (rc < 0)
        return rc;
    return finish_start(c, vs_ops_reconfigure(c->w->ops, &ref, cpu, memory_mb, op_done, c, NULL));
}

static int w_mark_instance(void *data, const char *folder, const char *vm, const char *id,
                           const char *instance_uuid, rec_done_cb cb, void *cbdata)
{
    struct vim_moref ref;
    struct opctx *c = NULL;
    int rc = vm_op(data, folder, vm, id, cb, cbdata, &ref, &c);

    if (rc < 0)
        return rc;
    return finish_start(c, vs_ops_mark_instance(c->w->ops, &ref, instance_uuid, op_done, c, NULL));
}

static int w_reread(void *data, const char *folder, const char *vm, const char *id)
{
    vcworld *w = data;
    struct vim_moref ref;
    int rc = vm_ref(w, folder, vm, id, &ref);

    return rc < 0 ? rc : vs_inventory_reread(w->inv, ref.value);
}

static int w_destroy_vm(void *data, const char *folder, const char *vm, const char *id,
                        rec_done_cb cb, void *cbdata)
{
    struct vim_moref ref;
    struct opctx *c = NULL;
    int rc = vm_op(data, folder, vm, id, cb, cbdata, &ref, &c);

    if (rc < 0)
        return rc;
    return finish_start(c, vs_ops_destroy(c->w->ops, &ref, op_done, c, NULL));
}

void vcworld_fill(vcworld *w, struct rec_world *rw)
{
    rw->vcdata = w;
    rw->vcenter_ready = w_ready;
    rw->vcenter_down_ms = w_down_ms;
    rw->folder = w_folder;
    rw->create_folder = w_create_folder;
    rw->destroy_folder = w_destroy_folder;
    rw->clone = w_clone;
    rw->power = w_power;
    rw->reconfigure = w_reconfigure;
    rw->destroy_vm = w_destroy_vm;
    rw->reread = w_reread;
    rw->mark_instance = w_mark_instance;
}

static void untag_done(void *data, const struct vs_rest_result *res)
{
    (void)data;
    (void)res;
}

void vcworld_forget_group(vcworld *w, const char *ns, const char *name)
{
    char tag[NAMING_BUF_SIZE];

    if (!w || !w->rest || !vs_rest_available(w->rest))
        return;
    if (naming_tag(ns, name, tag, sizeof(tag)) >= 0)
        vs_rest_delete_tag(w->rest, tag, untag_done, NULL);
}

/* ---- close ---- */

static void closed_one(void *data);

static void pass_poll_closed(uv_handle_t *h)
{
    closed_one(h->data);
}

static void closed_one(void *data)
{
    vcworld *w = data;
    if (--w->closing == 0) {
        void (*cb)(void *) = w->closed;
        void *d = w->closed_data;
        free(w);
        if (cb)
            cb(d);
    }
}

void vcworld_hold(vcworld *w)
{
    if (w)
        vs_ops_hold(w->ops);
}

void vcworld_close(vcworld *w, void (*closed)(void *data), void *data)
{
    if (!w) {
        if (closed)
            closed(data);
        return;
    }
    w->closed = closed;
    w->closed_data = data;
    w->closing = 1;
    if (w->pass_polling) {
        w->closing++;
        uv_close((uv_handle_t *)&w->pass_poll, pass_poll_closed);
        w->pass_polling = false;
    }
    if (w->ops) {
        w->closing++;
        vs_ops_close(w->ops, closed_one, w);
        w->ops = NULL;
    }
    if (w->rest) {
        w->closing++;
        vs_rest_close(w->rest, closed_one, w);
        w->rest = NULL;
    }
    if (w->inv) {
        w->closing++;
        vs_inventory_close(w->inv, closed_one, w);
        w->inv = NULL;
    }
    /* Its memory stays until the REST client's logout, whose TLS check
     * reads it, has ended (the client's reference). */
    if (w->s) {
        w->closing++;
        vs_session_close(w->s, closed_one, w); /* logs out */
        w->s = NULL;
    }
    closed_one(w);
}
