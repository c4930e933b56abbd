/* manager.c: builds the operator from its options, runs it on one libuv
 * loop, and takes it down in order. */
#include "controller/manager.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <uv.h>

#include "kube/authn.h"
#include "kube/events.h"
#include "kube/informer.h"
#include "kube/kube.h"
#include "kube/kubeconfig.h"
#include "kube/leader.h"
#include "controller/kubeworld.h"
#include "controller/naming.h"
#include "controller/reconciler.h"
#include "controller/vcworld.h"
#include "controller/vmgroup.h"
#include "kube/workqueue.h"
#include "lib/err.h"
#include "lib/http.h"
#include "lib/log.h"
#include "lib/metrics.h"
#include "lib/server.h"
#include "lib/strmap.h"
#include "lib/tlsgen.h"

#define LOGGER "manager"
#define CONTROLLER "vmgroup"
#define LEASE_WAIT_MS 200  /* a key met past the renew deadline waits this long */
#define TRIM_EVERY_MS 5000 /* how often free heap pages are given back (on_trim) */
/* The rate of the metrics' reviews (a review is two requests); a scraper's
 * answer is cached for minutes, so this is room for many scrapers. */
#define AUTH_QPS 5.0
#define AUTH_BURST 10u

struct mgr {
    const struct vmg_options *o;
    uv_loop_t loop;
    uv_signal_t sigterm, sigint;
    uv_timer_t stop_timer;
    uv_timer_t trim_timer;
    int exit_code;
    bool stopping;
    bool leading;

    vmg_http *http;
    kcfg *cfg;
    struct kubeworld kw;  /* the controller's requests, the VmGroups' cache, events */
    kube_client *kc_ev;   /* the Events' own, with a limit of its own (see setup) */
    kube_client *kc_le;   /* the elector's own, never queued behind the controller's */
    kube_client *kc_auth; /* the metrics' TokenReviews and SubjectAccessReviews, apart */
    struct wq *q;
    reconciler *rec;
    leader *le;
    vcworld *vc;
    bool vc_ready;
    char vc_msg[512];
    strmap *folders; /* folder name -> key ("ns/name"), for inventory changes */
    strmap *uids;    /* a group's uid -> key, for the changes of its VMs anywhere */

    vmg_metrics *metrics;
    struct vmg_metric *m_reconcile_total, *m_reconcile_errors, *m_reconcile_time, *m_workers;
    struct vmg_metric *m_wq_depth, *m_wq_adds, *m_wq_queue_dur, *m_wq_work_dur, *m_wq_retries;
    struct vmg_metric *m_wq_unfinished, *m_wq_longest, *m_rest, *m_leader;
    struct vmg_metric *m_current, *m_desired;
    struct vmg_metric *m_events_dropped;
    struct vmg_metric *m_http_closed, *m_hs_delayed;
    struct vmg_metric *m_events_cached;
    vmg_server *probe_srv, *metrics_srv;
    authn *auth;
    char *cert_pem, *key_pem;

    int closing; /* handles still to close */
};

/* ---- metrics ---- */

static const double time_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                      1,     2.5,  5,     10,   30,  60};

static double wq_stat(struct mgr *m, int which)
{
    struct wq_stats st;
    if (!m->q)
        return 0;
    wq_get_stats(m->q, &st);
    switch (which) {
    case 0:
        return (double)st.depth;
    case 1:
        return (double)st.active;
    case 2:
        return st.unfinished_work_seconds;
    default:
        return st.longest_running_processor_seconds;
    }
}

/* Entries of the event recorder's caches: back to 0 once every group is
 * gone (a soak's check that churn leaves nothing behind). */
static double f_events_cached(void *d)
{
    struct mgr *m = d;
    struct events_stats st;

    if (!m->kw.ev)
        return 0;
    events_get_stats(m->kw.ev, &st);
    return (double)(st.cached + st.buckets);
}

static double f_depth(void *d)
{
    return wq_stat(d, 0);
}
static double f_active(void *d)
{
    return wq_stat(d, 1);
}
static double f_unfinished(void *d)
{
    return wq_stat(d, 2);
}
static double f_longest(void *d)
{
    return wq_stat(d, 3);
}
static double f_leader(void *d)
{
    struct mgr *m = d;
    return m->leading ? 1 : 0;
}

static void wq_observe(void *data, int kind, double seconds)
{
    struct mgr *m = data;
    const char *lv[] = {CONTROLLER};
    vmg_histogram_observe(kind == WQ_QUEUE_DURATION ? m->m_wq_queue_dur : m->m_wq_work_dur, seconds,
                          lv);
}

static void rest_observe(void *data, const char *method, const char *host, long status, int err,
                         double seconds)
{
    struct mgr *m = data;
    char code[24];
    (void)err;
    (void)seconds;
    if (status > 0)
        snprintf(code, sizeof(code), "%ld", status);
    else
        snprintf(code, sizeof(code), "<error>");
    vmg_counter_inc(m->m_rest, (const char *[]){code, method, host});
}

static int metrics_setup(struct mgr *m)
{
    static const char *const ctl[] = {"controller"};
    static const char *const ctl_res[] = {"controller", "result"};
    static const char *const name[] = {"name"};
    static const char *const rest[] = {"code", "method", "host"};
    static const char *const grp[] = {"namespace", "name"};
    static const char *const srv_reason[] = {"server", "reason"};
    static const char *const srv[] = {"server"};
    const char *lv[] = {CONTROLLER};

    m->metrics = vmg_metrics_new();
    if (!m->metrics)
        return -ENOMEM;
    vmg_metrics_add_process(m->metrics);
    m->m_reconcile_total =
        vmg_counter_new(m->metrics, "controller_runtime_reconcile_total",
                        "Total number of reconciliations per controller", 2, ctl_res);
    m->m_reconcile_errors =
        vmg_counter_new(m->metrics, "controller_runtime_reconcile_errors_total",
                        "Total number of reconciliation errors per controller", 1, ctl);
    m->m_reconcile_time =
        vmg_histogram_new(m->metrics, "controller_runtime_reconcile_time_seconds",
                          "Length of time per reconciliation per controller", time_buckets,
                          sizeof(time_buckets) / sizeof(time_buckets[0]), 1, ctl);
    m->m_workers = vmg_gauge_new(m->metrics, "controller_runtime_active_workers",
                                 "Number of currently used workers per controller", 1, ctl);
    m->m_wq_depth =
        vmg_gauge_new(m->metrics, "workqueue_depth", "Current depth of workqueue", 1, name);
    m->m_wq_adds = vmg_counter_new(m->metrics, "workqueue_adds_total",
                                   "Total number of adds handled by workqueue", 1, name);
    m->m_wq_queue_dur =
        vmg_histogram_new(m->metrics, "workqueue_queue_duration_seconds",
                          "How long in seconds an item stays in workqueue before being requested",
                          time_buckets, sizeof(time_buckets) / sizeof(time_buckets[0]), 1, name);
    m->m_wq_work_dur =
        vmg_histogram_new(m->metrics, "workqueue_work_duration_seconds",
                          "How long in seconds processing an item from workqueue takes",
                          time_buckets, sizeof(time_buckets) / sizeof(time_buckets[0]), 1, name);
    m->m_wq_retries = vmg_counter_new(m->metrics, "workqueue_retries_total",
                                      "Total number of retries handled by workqueue", 1, name);
    m->m_wq_unfinished = vmg_gauge_new(
        m->metrics, "workqueue_unfinished_work_seconds",
        "How many seconds of work has been done that is in progress and hasn't been observed "
        "by work_duration",
        1, name);
    m->m_wq_longest = vmg_gauge_new(
        m->metrics, "workqueue_longest_running_processor_seconds",
        "How many seconds has the longest running processor for workqueue been running", 1, name);
    m->m_rest = vmg_counter_new(m->metrics, "rest_client_requests_total",
                                "Number of HTTP requests, partitioned by status code, method, and "
                                "host",
                                3, rest);
    m->m_leader = vmg_gauge_new(m->metrics, "leader_election_master_status",
                                "Gauge of if the reporting system is master of the relevant lease, "
                                "0 indicates backup, 1 indicates master",
                                1, name);
    m->m_current = vmg_gauge_new(m->metrics, "vmgroup_current_replicas",
                                 "VMs of the VmGroup that exist in vCenter", 2, grp);
    m->m_desired = vmg_gauge_new(m->metrics, "vmgroup_desired_replicas",
                                 "spec.replicas of the VmGroup", 2, grp);
    m->m_events_dropped = vmg_counter_new(m->metrics, "vmgroup_events_dropped_total",
                                          "Kubernetes events dropped by the rate limit", 0, NULL);
    m->m_http_closed = vmg_counter_new(
        m->metrics, "vmgroup_http_connections_closed_total",
        "Connections the probe and metrics servers closed to keep within their limits: at "
        "accept, over an address's TLS handshake rate (throttled) or with no slot to free "
        "(refused); or to free a slot for a new one (evicted)",
        2, srv_reason);
    m->m_hs_delayed = vmg_counter_new(m->metrics, "vmgroup_http_tls_handshakes_delayed_total",
                                      "TLS handshakes that waited for the server's rate of "
                                      "handshakes",
                                      1, srv);
    if (!m->m_reconcile_total || !m->m_reconcile_errors || !m->m_reconcile_time || !m->m_workers ||
        !m->m_wq_depth || !m->m_wq_adds || !m->m_wq_queue_dur || !m->m_wq_work_dur ||
        !m->m_wq_retries || !m->m_wq_unfinished || !m->m_wq_longest || !m->m_rest || !m->m_leader ||
        !m->m_current || !m->m_desired || !m->m_events_dropped || !m->m_http_closed ||
        !m->m_hs_delayed)
        return -ENOMEM;
    m->m_events_cached = vmg_gauge_new(m->metrics, "vmgroup_events_cache_entries",
                                       "Entries the event recorder remembers (aggregation and "
                                       "rate limit), for the groups that exist",
                                       0, NULL);
    if (!m->m_events_cached || vmg_metric_set_fn(m->m_events_cached, NULL, f_events_cached, m) < 0)
        return -ENOMEM;
    vmg_metric_set_fn(m->m_workers, lv, f_active, m);
    vmg_metric_set_fn(m->m_wq_depth, lv, f_depth, m);
    vmg_metric_set_fn(m->m_wq_unfinished, lv, f_unfinished, m);
    vmg_metric_set_fn(m->m_wq_longest, lv, f_longest, m);
    vmg_counter_add(m->m_reconcile_errors, 0, lv);
    /* controller-runtime shows every result from the start, at 0. */
    for (size_t i = 0; i < 3; i++)
        vmg_counter_add(
            m->m_reconcile_total, 0,
            (const char *[]){CONTROLLER, (const char *[]){"success", "error", "requeue_after"}[i]});
    vmg_counter_add(m->m_wq_adds, 0, lv);
    vmg_counter_add(m->m_wq_retries, 0, lv);
    vmg_metric_set_fn(m->m_leader, (const char *[]){m->o->leader_election_id}, f_leader, m);
    return 0;
}

/* The queue's add and retry counters, sampled at scrape time. */
static void wq_collect(void *data, vmg_metrics *reg)
{
    struct mgr *m = data;
    struct wq_stats st;
    const char *lv[] = {CONTROLLER};

    (void)reg;
    if (!m->q)
        return;
    wq_get_stats(m->q, &st);
    vmg_counter_set(m->m_wq_adds, (double)st.adds_total, lv);
    vmg_counter_set(m->m_wq_retries, (double)st.retries_total, lv);
}

/* What the probe and metrics servers' limits closed, sampled at scrape
 * time: a flood shows there, not in the log. */
static void server_collect(void *data, vmg_metrics *reg)
{
    struct mgr *m = data;
    const struct {
        const char *name;
        const vmg_server *s;
    } srv[] = {{"probes", m->probe_srv}, {"metrics", m->metrics_srv}};
    struct vmg_server_stats st;

    (void)reg;
    for (size_t i = 0; i < sizeof(srv) / sizeof(srv[0]); i++) {
        if (!srv[i].s)
            continue;
        vmg_server_get_stats(srv[i].s, &st);
        vmg_counter_set(m->m_http_closed, (double)st.throttled,
                        (const char *[]){srv[i].name, "throttled"});
        vmg_counter_set(m->m_http_closed, (double)st.refused,
                        (const char *[]){srv[i].name, "refused"});
        vmg_counter_set(m->m_http_closed, (double)st.evicted,
                        (const char *[]){srv[i].name, "evicted"});
        if (srv[i].s == m->metrics_srv && m->o->metrics_secure)
            vmg_counter_set(m->m_hs_delayed, (double)st.delayed, (const char *[]){srv[i].name});
    }
}

/* ---- HTTP endpoints ---- */

static void respond_text(vmg_server_req *req, int status, const char *text)
{
    vmg_server_respond(req, status, "text/plain; charset=utf-8", text, strlen(text));
}

/* read_only answers 405 to a method other than GET and HEAD, and says
 * whether req may go on: the probes and /metrics are read, and a POST
 * to /metrics is neither reviewed (a TokenReview and an access review it
 * would cost) nor served as if it were a get. */
static bool read_only(vmg_server_req *req)
{
    const char *method = vmg_server_req_method(req);

    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
        return true;
    (void)vmg_server_req_add_header(req, "Allow", "GET, HEAD");
    respond_text(req, 405, "method not allowed\n");
    return false;
}

/* ready writes the names of the readiness checks that fail ("shutdown",
 * "cache", "vcenter"), comma-separated, into failed; true when none does.
 * /readyz answers anyone who can reach the port: it names the checks and
 * nothing more; why vCenter fails (its user, URL, the error) is logged. */
static bool ready(struct mgr *m, char *failed, size_t len)
{
    char why[640];
    size_t n = 0;

    failed[0] = '\0';
#define FAILED(name)                                                                               \
    do {                                                                                           \
        int k_ = snprintf(failed + n, len - n, "%s%s", n ? ", " : "", name);                       \
        if (k_ > 0 && (size_t)k_ < len - n)                                                        \
            n += (size_t)k_;                                                                       \
    } while (0)
    if (m->stopping)
        FAILED("shutdown");
    if (!m->kw.inf || !informer_has_synced(m->kw.inf))
        FAILED("cache");
    if (vcworld_ready(m->vc, why, sizeof(why)) < 0)
        FAILED("vcenter");
#undef FAILED
    return n == 0;
}

static void probe_handler(void *data, vmg_server_req *req)
{
    struct mgr *m = data;
    const char *path = vmg_server_req_path(req);
    char failed[64], body[128];

    if (!read_only(req))
        return;
    if (strcmp(path, "/healthz") == 0 || strcmp(path, "/livez") == 0) {
        respond_text(req, 200, "ok\n");
    } else if (strcmp(path, "/readyz") == 0) {
        if (ready(m, failed, sizeof(failed))) {
            respond_text(req, 200, "ok\n");
        } else {
            snprintf(body, sizeof(body), "not ready: %s\n", failed);
            respond_text(req, 503, body);
        }
    } else {
        respond_text(req, 404, "not found\n");
    }
}

static void serve_metrics(struct mgr *m, vmg_server_req *req)
{
    char *buf = NULL;
    size_t len = 0;

    if (vmg_metrics_render(m->metrics, &buf, &len) < 0) {
        respond_text(req, 500, "cannot render metrics\n");
        return;
    }
    vmg_server_respond(req, 200, VMG_METRICS_CONTENT_TYPE, buf, len);
    free(buf);
}

struct metrics_req {
    struct mgr *m;
    vmg_server_req *req;
    authn_wait *wait;
};

static void metrics_authorized(void *data, int status, const char *msg)
{
    struct metrics_req *mr = data;

    if (status == 200) {
        serve_metrics(mr->m, mr->req);
    } else {
        /* msg may quote the API server (a service account, a role): it
         * goes to the log, the client reads a fixed text. */
        if (status == 500)
            vmg_logf(VMG_LOG_WARN, "metrics", NULL, NULL, "cannot authorize a scrape: %s", msg);
        if (status == 503)
            (void)vmg_server_req_add_header(mr->req, "Retry-After", "1");
        respond_text(mr->req, status, authn_body(status));
    }
    free(mr);
}

/* The client went away: its review is dropped unless others wait for it. */
static void metrics_aborted(void *data, vmg_server_req *req)
{
    struct metrics_req *mr = data;

    (void)req;
    authn_cancel(mr->wait); /* calls metrics_authorized, which frees mr */
}

static void metrics_handler(void *data, vmg_server_req *req)
{
    struct mgr *m = data;
    struct metrics_req *mr;
    authn_wait *wait;

    if (strcmp(vmg_server_req_path(req), "/metrics") != 0) {
        respond_text(req, 404, "not found\n");
        return;
    }
    if (!read_only(req))
        return;
    if (!m->auth) {
        serve_metrics(m, req);
        return;
    }
    mr = calloc(1, sizeof(*mr));
    if (!mr) {
        respond_text(req, 500, authn_body(500));
        return;
    }
    mr->m = m;
    mr->req = req;
    /* NULL: answered already (cached, malformed, overloaded), and
     * metrics_authorized has freed mr: it must not be touched then. */
    wait =
        authn_check(m->auth, vmg_server_req_header(req, "Authorization"), metrics_authorized, mr);
    if (wait) {
        mr->wait = wait;
        vmg_server_req_on_abort(req, metrics_aborted, mr);
    }
}

/* metrics_cert_reloaded logs what became of a changed --metrics-cert-dir. */
static void metrics_cert_reloaded(void *data, int status, const char *msg)
{
    struct mgr *m = data;

    if (status == 0)
        vmg_logf(VMG_LOG_INFO, LOGGER, NULL, NULL,
                 "the metrics certificate in %s changed; new connections get it",
                 m->o->metrics_cert_dir);
    else
        vmg_logf(VMG_LOG_WARN, LOGGER, NULL, NULL,
                 "the metrics certificate in %s changed but %s; keeping the certificate in use",
                 m->o->metrics_cert_dir, msg && *msg ? msg : vmg_strerror(status));
}

/* The probe and metrics servers each have limits of their own, so that a
 * flood of one cannot starve the other. The probe server answers the
 * kubelet: tiny requests and answers, new connections, one peer; a peer
 * that holds idle connections gives them up to a new one. The metrics
 * server answers a few scrapers, whose answers are larger. */
static int servers_start(struct mgr *m)
{
    const struct vmg_options *o = m->o;
    char err[256] = "";
    int rc = 0;

    if (o->probe_addr && strcmp(o->probe_addr, "0") != 0) {
        struct vmg_server_opts so = {.addr = o->probe_addr,
                                     .handler = probe_handler,
                                     .data = m,
                                     .max_conns = 32,
                                     .max_conns_per_peer = 8,
                                     .max_header_bytes = 8 * 1024,
                                     .max_body = 1024,
                                     .max_pending_output = 16 * 1024,
                                     .max_buffered = 1024 * 1024,
                                     .idle_timeout_ms = 15000,
                                     /* A probe's request comes in one packet. */
                                     .header_timeout_ms = 2000,
                                     .max_conn_age_ms = 5 * 60 * 1000,
                                     .errbuf = err,
                                     .errbuf_size = sizeof(err)};
        m->probe_srv = vmg_server_new(&m->loop, &so, &rc);
        if (!m->probe_srv) {
            vmg_logf(VMG_LOG_ERROR, LOGGER, NULL, NULL,
                     "cannot serve probes on --health-probe-bind-address %s: %s", o->probe_addr,
                     err[0] ? err : vmg_strerror(rc));
            return rc ? rc : -EINVAL;
        }
        vmg_logf(VMG_LOG_INFO, LOGGER, NULL, NULL, "serving /healthz and /readyz on %s",
                 o->probe_addr);
    }
    if (o->metrics_addr && strcmp(o->metrics_addr, "0") != 0) {
        struct vmg_server_opts so = {.addr = o->metrics_addr,
                                     .handler = metrics_handler,
                                     .data = m,
                                     .max_conns = 64,
                                     .max_conns_per_peer = 16,
                                     .max_body = 4096,
                                     .max_pending_output = 64 * 1024,
                                     .max_buffered = 4 * 1024 * 1024,
                                     .header_timeout_ms = 5000,
                                     .tls_reloaded = metrics_cert_reloaded,
                                     .errbuf = err,
                                     .errbuf_size = sizeof(err)};
        if (o->metrics_secure) {
            struct authn_opts ao = {.path = "/metrics", .verb = "get"};
            if (o->metrics_cert_dir) {
                static char cert[4096], key[4096];
                snprintf(cert, sizeof(cert), "%s/tls.crt", o->metrics_cert_dir);
                snprintf(key, sizeof(key), "%s/tls.key", o->metrics_cert_dir);
                so.cert_file = cert;
                so.key_file = key;
            } else {
                const char *sans[] = {"localhost"};
                rc = vmg_tls_selfsigned("vmgroup-operator-metrics", sans, 1, &m->cert_pem,
                                        &m->key_pem);
                if (rc < 0) {
                    vmg_logf(VMG_LOG_ERROR, LOGGER, NULL, NULL,
                             "cannot make a self-signed certificate for metrics: %s",
                             vmg_strerror(rc));
                    return rc;
                }
                so.cert_pem = m->cert_pem;
                so.key_pem = m->key_pem;
            }
            /* Reviews go through a client of their own, with a rate of
             * their own: a flood of scrapes with made-up tokens waits
             * there (or is refused), never in the controller's queue. */
            struct kube_client_opts ako = {.qps = AUTH_QPS,
                                           .burst = AUTH_BURST,
                                           .retries = 1,
                                           .max_queued = 64,
                                           .observe = rest_observe,
                                           .observe_data = m};
            rc = kube_client_new(&m->loop, m->http, m->cfg, &ako, &m->kc_auth);
            if (rc < 0)
                return rc;
            rc = authn_new(m->kc_auth, &ao, &m->auth);
            if (rc < 0)
                return rc;
        }
        m->metrics_srv = vmg_server_new(&m->loop, &so, &rc);
        if (!m->metrics_srv) {
            vmg_logf(VMG_LOG_ERROR, LOGGER, NULL, NULL,
                     "cannot serve metrics on --metrics-bind-address %s: %s", o->metrics_addr,
                     err[0] ? err : vmg_strerror(rc));
            return rc ? rc : -EINVAL;
        }
        vmg_logf(VMG_LOG_INFO, LOGGER, NULL, NULL, "serving /metrics on %s (%s)", o->metrics_addr,
                 o->metrics_secure ? "HTTPS, TokenReview and SubjectAccessReview"
                                   : "plain HTTP, no authentication");
    }
    return 0;
}

/* ---- the reconciler's hooks: metrics ---- */

static void event_dropped(void *data, enum events_drop why, const struct events_object *obj,
                          const char *reason)
{
    struct mgr *m = data;
    (void)why;
    (void)obj;
    (void)reason;
    vmg_counter_inc(m->m_events_dropped, NULL);
}

static void w_observed(void *data, const struct vmgroup *g, const struct plan *p)
{
    struct mgr *m = data;
    const char *lv[] = {g->meta.ns, g->meta.name};
    vmg_gauge_set(m->m_current, p->current, lv);
    vmg_gauge_set(m->m_desired, g->spec.replicas, lv);
}

static void w_reconciled(void *data, const char *key, const char *result, double seconds)
{
    struct mgr *m = data;
    const char *lv[] = {CONTROLLER};
    (void)key;
    vmg_counter_inc(m->m_reconcile_total, (const char *[]){CONTROLLER, result});
    if (strcmp(result, "error") == 0)
        vmg_counter_inc(m->m_reconcile_errors, lv);
    vmg_histogram_observe(m->m_reconcile_time, seconds, lv);
}

/* key_split copies the namespace of key (ns/name) into ns and returns its
 * name, or NULL when key is not of that form. */
static const char *key_split(const char *key, char *ns, size_t size)
{
    const char *slash = strchr(key, '/');

    if (!slash || (size_t)(slash - key) >= size)
        return NULL;
    memcpy(ns, key, (size_t)(slash - key));
    ns[slash - key] = '\0';
    return slash + 1;
}

static void w_forgotten(void *data, const char *key)
{
    struct mgr *m = data;
    char ns[128];
    const char *name = key_split(key, ns, sizeof(ns));

    if (!name)
        return;
    vmg_metric_remove(m->m_current, (const char *[]){ns, name});
    vmg_metric_remove(m->m_desired, (const char *[]){ns, name});
    vcworld_forget_group(m->vc, ns, name);
    kubeworld_forget_group(&m->kw, ns, name);
}

/* ---- informer -> queue ---- */

/* key_folder writes the vCenter folder of the group of key (ns/name). */
static int key_folder(const char *key, char *folder, size_t size)
{
    char ns[128];
    const char *name = key_split(key, ns, sizeof(ns));

    return !name || naming_folder(ns, name, folder, size) < 0 ? -EINVAL : 0;
}

/* forget_folder: the group is gone from the API; its folder's changes
 * need not find its key any more (a group made again is remembered anew). */
static void forget_folder(struct mgr *m, const char *key)
{
    char folder[NAMING_BUF_SIZE];

    if (key_folder(key, folder, sizeof(folder)) == 0)
        free(strmap_del(m->folders, folder));
}

static void remember_folder(struct mgr *m, const char *key)
{
    char folder[NAMING_BUF_SIZE];
    char *copy;

    if (key_folder(key, folder, sizeof(folder)) < 0)
        return;
    if (strmap_get(m->folders, folder))
        return;
    copy = strdup(key);
    if (copy && strmap_set(m->folders, folder, copy) < 0)
        free(copy);
}

/* remember_uid: the changes of VMs marked with the uid of g (of key) find
 * its key, wherever the VMs are. */
static void remember_uid(struct mgr *m, const char *key, const struct vmgroup *g)
{
    char *copy;

    if (!g || !g->meta.uid || !g->meta.uid[0] || strmap_get(m->uids, g->meta.uid))
        return;
    copy = strdup(key);
    if (copy && strmap_set(m->uids, g->meta.uid, copy) < 0)
        free(copy);
}

static void forget_uid(struct mgr *m, const struct vmgroup *g)
{
    if (g && g->meta.uid)
        free(strmap_del(m->uids, g->meta.uid));
}

static void enqueue(struct mgr *m, const char *key)
{
    if (m->q && m->leading && !m->stopping)
        wq_add(m->q, key);
}

static void on_add(void *data, const char *key, const void *obj)
{
    struct mgr *m = data;
    remember_folder(m, key);
    remember_uid(m, key, obj);
    enqueue(m, key);
}

static void on_update(void *data, const char *key, const void *old_obj, const void *new_obj)
{
    struct mgr *m = data;
    const struct vmgroup *was = old_obj, *is = new_obj;

    /* The same name made again (a relist can show it as an update). */
    if (was && is && was->meta.uid && is->meta.uid && strcmp(was->meta.uid, is->meta.uid) != 0)
        forget_uid(m, was);
    remember_uid(m, key, is);
    enqueue(m, key);
}

static void on_delete(void *data, const char *key, const void *old_obj)
{
    forget_folder(data, key);
    forget_uid(data, old_obj);
    enqueue(data, key);
}

static void on_note(void *data, const struct informer_note *n)
{
    (void)data;
    switch (n->kind) {
    case INFORMER_NOTE_SYNCED:
        vmg_logf(VMG_LOG_INFO, "informer", NULL, NULL, "VmGroup cache synced: %zu objects",
                 n->count);
        break;
    case INFORMER_NOTE_GONE:
        if (n->retry_ms == 0)
            vmg_logf(VMG_LOG_INFO, "informer", NULL, NULL,
                     "resourceVersion %s expired (410); listing again", n->rv);
        else
            vmg_logf(VMG_LOG_WARN, "informer", NULL, NULL,
                     "resourceVersion %s expired (410) again, with no event since the last "
                     "list; listing again in %llu ms",
                     n->rv, (unsigned long long)n->retry_ms);
        break;
    case INFORMER_NOTE_ERROR:
        vmg_logf(VMG_LOG_WARN, "informer", NULL, NULL,
                 "%s of VmGroups failed: %s; retry in %llu ms", n->op,
                 n->message[0] ? n->message : vmg_strerror(n->err),
                 (unsigned long long)n->retry_ms);
        break;
    case INFORMER_NOTE_BAD_OBJECT:
        vmg_logf(VMG_LOG_WARN, "informer", NULL, NULL, "VmGroup %s left out: %s", n->key,
                 n->message);
        break;
    default:
        break;
    }
}

static int enqueue_one(void *data, const char *key, const void *obj)
{
    (void)obj;
    enqueue(data, key);
    return 0;
}

static void enqueue_all(struct mgr *m)
{
    if (m->kw.inf)
        informer_foreach(m->kw.inf, enqueue_one, m);
}

/* ---- vCenter -> queue ---- */

static void vc_changed(void *data, const char *folder)
{
    struct mgr *m = data;
    const char *key;

    if (!folder) {
        enqueue_all(m);
        return;
    }
    key = strmap_get(m->folders, folder);
    if (key)
        enqueue(m, key);
}

static void vc_marked(void *data, const char *uid)
{
    struct mgr *m = data;
    const char *key = strmap_get(m->uids, uid);

    if (key)
        enqueue(m, key);
}

static void vc_state(void *data, bool is_ready, const char *msg)
{
    struct mgr *m = data;

    if (is_ready != m->vc_ready)
        vmg_logf(is_ready ? VMG_LOG_INFO : VMG_LOG_WARN, "vcenter", NULL, NULL, "%s",
                 is_ready ? "vCenter is ready" : msg);
    m->vc_ready = is_ready;
    snprintf(m->vc_msg, sizeof(m->vc_msg), "%s", msg ? msg : "");
    /* Either way the groups' status should say so. */
    enqueue_all(m);
}

/* ---- leading ---- */

static void start_reconciling(struct mgr *m)
{
    if (m->leading || m->stopping)
        return;
    m->leading = true;
    vmg_logf(VMG_LOG_INFO, LOGGER, NULL, NULL, "reconciling VmGroups with %d workers",
             m->o->max_concurrent_reconciles);
    if (!m->o->max_instance_marks)
        vmg_logf(VMG_LOG_INFO, LOGGER, NULL, NULL,
                 "writing no instance marks (--max-instance-marks=0): VMs cloned before that "
                 "mark keep the rule from before it");
    enqueue_all(m);
}

static void begin_stop(struct mgr *m, int code);

static void le_started(void *data)
{
    struct mgr *m = data;
    vmg_logf(VMG_LOG_INFO, "leader", NULL, NULL, "became the leader (%s)", leader_identity(m->le));
    start_reconciling(m);
}

static void le_stopped(void *data, enum leader_stop_reason reason, const char *msg)
{
    struct mgr *m = data;

    m->leading = false;
    if (m->q)
        wq_shut_down(m->q);
    if (reason == LEADER_STOP_RELEASED)
        return;
    vmg_logf(VMG_LOG_ERROR, "leader", NULL, NULL, "lost leadership: %s; exiting", msg);
    begin_stop(m, 1);
}

static void le_new_leader(void *data, const char *identity)
{
    (void)data;
    vmg_logf(VMG_LOG_INFO, "leader", NULL, NULL, "the leader is now %s",
             identity && *identity ? identity : "nobody");
}

/* ---- shutdown ---- */

static void closed_one(void *data)
{
    struct mgr *m = data;
    if (--m->closing == 0)
        uv_stop(&m->loop);
}

static void close_all(struct mgr *m)
{
    m->closing = 1; /* this function's own hold, dropped at the end */
    if (m->q) {
        wq_shut_down(m->q);
    }
    if (m->probe_srv) {
        m->closing++;
        vmg_server_close(m->probe_srv, closed_one, m);
        m->probe_srv = NULL;
    }
    if (m->metrics_srv) {
        m->closing++;
        vmg_server_close(m->metrics_srv, closed_one, m);
        m->metrics_srv = NULL;
    }
    authn_free(m->auth);
    m->auth = NULL;
    if (m->kw.inf) {
        m->closing++;
        informer_close(m->kw.inf, closed_one, m);
        m->kw.inf = NULL;
    }
    if (m->le) {
        m->closing++;
        leader_close(m->le, closed_one, m);
        m->le = NULL;
    }
    if (m->vc) {
        m->closing++;
        vcworld_close(m->vc, closed_one, m); /* completes operations in flight: canceled */
        m->vc = NULL;
    }
    if (m->kw.ev) {
        m->closing++;
        events_close(m->kw.ev, closed_one, m);
        m->kw.ev = NULL;
    }
    if (m->q) {
        m->closing++;
        wq_close(m->q, closed_one, m);
        m->q = NULL;
    }
    if (m->kw.kc) {
        m->closing++;
        kube_client_close(m->kw.kc, closed_one, m);
        m->kw.kc = NULL;
    }
    if (m->kc_ev) {
        m->closing++;
        kube_client_close(m->kc_ev, closed_one, m);
        m->kc_ev = NULL;
    }
    if (m->kc_le) {
        m->closing++;
        kube_client_close(m->kc_le, closed_one, m);
        m->kc_le = NULL;
    }
    if (m->kc_auth) {
        m->closing++;
        kube_client_close(m->kc_auth, closed_one, m);
        m->kc_auth = NULL;
    }
    closed_one(m);
}

static void released(void *data, int err)
{
    struct mgr *m = data;
    if (err)
        vmg_logf(VMG_LOG_WARN, "leader", NULL, NULL, "releasing the lease failed: %s",
                 vmg_strerror(err));
    else
        vmg_logf(VMG_LOG_INFO, "leader", NULL, NULL, "released the lease");
    close_all(m);
}

static void begin_stop(struct mgr *m, int code)
{
    if (m->stopping)
        return;
    m->stopping = true;
    m->exit_code = code;
    uv_signal_stop(&m->sigterm);
    uv_signal_stop(&m->sigint);
    if (m->q)
        wq_shut_down(m->q);
    /* A clean stop hands the lease over at once, and starts no vCenter
     * task from then on: the next leader may already be acting. */
    if (code == 0 && m->le && leader_is_leader(m->le)) {
        vcworld_hold(m->vc);
        if (leader_release(m->le, released, m) == 0)
            return;
    }
    close_all(m);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct mgr *m = h->data;
    vmg_logf(VMG_LOG_INFO, LOGGER, NULL, NULL, "received %s, shutting down",
             signum == SIGTERM ? "SIGTERM" : "SIGINT");
    begin_stop(m, 0);
}

static void on_stop_timer(uv_timer_t *t)
{
    struct mgr *m = t->data;
    vmg_logf(VMG_LOG_WARN, LOGGER, NULL, NULL, "shutdown took too long; exiting now");
    uv_stop(&m->loop);
}

/* on_trim gives the allocator's free pages back to the system. Work comes
 * in bursts (a batch of groups: responses, parse trees, connections' TLS
 * buffers, several MiB at once); what they leave free stays resident in
 * glibc's heap, pinned by a few long-lived blocks above it, so that without
 * this the resident memory climbs in steps under churn while the live heap
 * does not (see tests/bench/churn.sh). */
static void on_trim(uv_timer_t *t)
{
    (void)t;
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* ---- start ---- */

/* The queue's handler: keys go to the reconciler only while leading. */
static void handle_key(void *data, const char *key)
{
    struct mgr *m = data;
    if (!m->rec || !m->leading || m->stopping) {
        wq_done(m->q, key);
        return;
    }
    /* Past the renew deadline (a long run of keys in one turn of the loop
     * can get there before the leader's timer runs): wait for the renewal,
     * or for the lease's loss, which stops the manager. key is the queue's
     * own copy, freed by wq_done: it is put off first. */
    if (m->le && !leader_is_leader(m->le)) {
        wq_add_after(m->q, key, LEASE_WAIT_MS);
        wq_done(m->q, key);
        return;
    }
    reconciler_handle(m->rec, key);
}

static int setup(struct mgr *m)
{
    const struct vmg_options *o = m->o;
    struct kcfg_opts ko = {.kubeconfig = o->kubeconfig, .context = o->kube_context};
    struct kube_client_opts kco = {.qps = o->kube_qps,
                                   .burst = (unsigned)o->kube_burst,
                                   .observe = rest_observe,
                                   .observe_data = m};
    struct informer_opts io = {0};
    struct wq_options qo = {0};
    struct rec_options ro = {.max_group_tasks = o->max_group_tasks,
                             .vc_grace_ms = o->vc_grace_ms,
                             .max_marks =
                                 o->max_instance_marks ? o->max_instance_marks : REC_NO_MARKS};
    struct rec_world rw = {0};
    struct vcworld_hooks vh = {
        .changed = vc_changed, .marked = vc_marked, .state = vc_state, .data = m};
    struct events_options eo = {0};
    char err[512] = "";
    int rc;

    rc = metrics_setup(m);
    if (rc < 0)
        return rc;
    m->folders = strmap_new();
    m->uids = strmap_new();
    if (!m->folders || !m->uids)
        return -ENOMEM;
    m->http = vmg_http_new(&m->loop, &rc);
    if (!m->http)
        return rc;

    rc = kcfg_load(&ko, &m->cfg, err, sizeof(err));
    if (rc < 0) {
        vmg_logf(VMG_LOG_ERROR, LOGGER, NULL, NULL, "%s", err);
        return rc;
    }
    vmg_logf(VMG_LOG_INFO, LOGGER, NULL, NULL, "API server %s (from %s)", kcfg_server(m->cfg),
             kcfg_source(m->cfg));
    rc = kube_client_new(&m->loop, m->http, m->cfg, &kco, &m->kw.kc);
    if (rc < 0)
        return rc;

    rc = vcworld_new(&m->loop, m->http, o, m->metrics, &vh, &m->vc, err, sizeof(err));
    if (rc < 0) {
        vmg_logf(VMG_LOG_ERROR, LOGGER, NULL, NULL, "%s", err);
        return rc;
    }

    /* Events go through a client of their own, with the same limit, as
     * client-go's event broadcaster has its own clientset: a convergence's
     * or a deletion's events (a few per VM) never queue the finalizers and
     * statuses behind them, and its writes are at most twice the limit. */
    rc = kube_client_new(&m->loop, m->http, m->cfg, &kco, &m->kc_ev);
    if (rc < 0)
        return rc;
    eo.io = &events_kube_io;
    eo.io_ctx = m->kc_ev;
    eo.on_drop = event_dropped;
    eo.drop_data = m;
    rc = events_new(&m->loop, &eo, &m->kw.ev);
    if (rc < 0)
        return rc;

    qo.name = CONTROLLER;
    qo.handler = handle_key;
    qo.handler_data = m;
    qo.max_active = (size_t)o->max_concurrent_reconciles;
    qo.observe = wq_observe;
    qo.observe_data = m;
    rc = wq_new(&m->loop, &qo, &m->q);
    if (rc < 0)
        return rc;
    vmg_metrics_add_collector(m->metrics, wq_collect, m);
    vmg_metrics_add_collector(m->metrics, server_collect, m);

    kubeworld_fill(&m->kw, &rw);
    vcworld_fill(m->vc, &rw);
    rw.hookdata = m;
    rw.observed = w_observed;
    rw.reconciled = w_reconciled;
    rw.forgotten = w_forgotten;
    rc = reconciler_new(&rw, &ro, m->q, &m->rec);
    if (rc < 0)
        return rc;

    io.handlers.on_add = on_add;
    io.handlers.on_update = on_update;
    io.handlers.on_delete = on_delete;
    io.handlers.data = m;
    io.on_note = on_note;
    io.note_data = m;
    io.resync_ms = o->resync_ms;
    io.ns = o->watch_namespace;
    vmgroup_informer_opts(&io);
    rc = informer_new(&m->loop, m->kw.kc, &io, &m->kw.inf);
    if (rc < 0)
        return rc;

    if (o->leader_elect) {
        struct leader_options lo = {0};
        struct kube_client_opts lko = {.qps = -1, .observe = rest_observe, .observe_data = m};
        const char *ns = NULL;

        rc = leader_namespace(o->leader_election_namespace, m->cfg, &ns, err, sizeof(err));
        if (rc < 0) {
            vmg_logf(VMG_LOG_ERROR, LOGGER, NULL, NULL, "%s", err);
            return rc;
        }
        rc = kube_client_new(&m->loop, m->http, m->cfg, &lko, &m->kc_le);
        if (rc < 0)
            return rc;
        lo.ns = ns;
        lo.name = o->leader_election_id;
        lo.lease_duration_ms = o->lease_duration_ms;
        lo.renew_deadline_ms = o->renew_deadline_ms;
        lo.retry_period_ms = o->retry_period_ms;
        lo.io = &leader_kube_io;
        lo.io_ctx = m->kc_le;
        lo.cb.on_started_leading = le_started;
        lo.cb.on_stopped_leading = le_stopped;
        lo.cb.on_new_leader = le_new_leader;
        lo.cb.data = m;
        rc = leader_new(&m->loop, &lo, &m->le, err, sizeof(err));
        if (rc < 0) {
            vmg_logf(VMG_LOG_ERROR, LOGGER, NULL, NULL, "%s", err);
            return rc;
        }
    }

    rc = servers_start(m);
    if (rc < 0)
        return rc;
    rc = informer_start(m->kw.inf);
    if (rc < 0)
        return rc;
    rc = vcworld_start(m->vc);
    if (rc < 0)
        return rc;
    if (m->le) {
        vmg_logf(VMG_LOG_INFO, "leader", NULL, NULL, "waiting to lead (lease %s)",
                 o->leader_election_id);
        rc = leader_start(m->le);
        if (rc < 0)
            return rc;
    } else {
        start_reconciling(m);
    }
    return 0;
}

int manager_run(const struct vmg_options *o)
{
    struct mgr *m = calloc(1, sizeof(*m));
    int rc, code;

    if (!m)
        return 1;
    m->o = o;
    vmg_log_setup(o->verbosity, 2);
    if (o->vc_pass)
        vmg_log_add_secret(o->vc_pass);
    signal(SIGPIPE, SIG_IGN);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        free(m);
        return 1;
    }
    if (uv_loop_init(&m->loop) != 0) {
        free(m);
        return 1;
    }
    uv_signal_init(&m->loop, &m->sigterm);
    uv_signal_init(&m->loop, &m->sigint);
    m->sigterm.data = m->sigint.data = m;
    uv_signal_start(&m->sigterm, on_signal, SIGTERM);
    uv_signal_start(&m->sigint, on_signal, SIGINT);
    /* Unreferenced: it never keeps the loop running. */
    uv_timer_init(&m->loop, &m->trim_timer);
    uv_timer_start(&m->trim_timer, on_trim, TRIM_EVERY_MS, TRIM_EVERY_MS);
    uv_unref((uv_handle_t *)&m->trim_timer);

    vmg_logf(VMG_LOG_INFO, LOGGER, NULL, NULL, "vmgroup-operator %s starting", VMG_VERSION);
    if (o->insecure)
        vmg_logf(VMG_LOG_WARN, LOGGER, NULL, NULL,
                 "--insecure: vCenter's TLS certificate is NOT verified");

    rc = setup(m);
    if (rc < 0) {
        vmg_logf(VMG_LOG_ERROR, LOGGER, NULL, NULL, "start-up failed: %s", vmg_strerror(rc));
        begin_stop(m, 1);
    }
    uv_run(&m->loop, UV_RUN_DEFAULT);

    /* Whatever is left (a stop that took too long): close it and drain. */
    if (m->closing > 0) {
        uv_timer_init(&m->loop, &m->stop_timer);
        m->stop_timer.data = m;
        uv_timer_start(&m->stop_timer, on_stop_timer, 10000, 0);
        uv_run(&m->loop, UV_RUN_DEFAULT);
    }
    reconciler_free(m->rec);
    m->rec = NULL;
    if (m->http) {
        vmg_http_close(m->http, NULL, NULL);
        m->http = NULL;
    }
    /* An exec plugin still running (a refresh when the stop came) closes
     * its own handles, which close_walk would otherwise close under it. */
    kcfg_exec_stop(m->cfg);
    uv_walk(&m->loop, close_walk, NULL);
    uv_run(&m->loop, UV_RUN_DEFAULT);
    uv_loop_close(&m->loop);
    kcfg_free(m->cfg);
    strmap_free_all(m->folders);
    strmap_free_all(m->uids);
    vmg_metrics_free(m->metrics);
    free(m->cert_pem);
    free(m->key_pem);
    code = m->exit_code;
    free(m);
    curl_global_cleanup();
    vmg_logf(VMG_LOG_INFO, LOGGER, NULL, NULL, "stopped");
    return code;
}
