/* vsdrv: drives the vCenter side (vsphere/session, inventory, ops) against
 * a real vCenter (the e2e environment's vcsim) and prints one JSON object
 * a line per event, for tests/e2e/30-vsphere.bats and tests/bench/vs_clone.sh.
 *
 *   vsdrv [options] login              log in, print state changes; exit 0 when
 *                                      ready, 1 after --attempts failed logins
 *   vsdrv [options] placement          resolve and print the placement
 *   vsdrv [options] mkfolder NAME      create a group folder under the root
 *   vsdrv [options] clone FOLDER VM    clone --template into FOLDER
 *   vsdrv [options] poweron|poweroff|destroy PATH    PATH relative to the root
 *   vsdrv [options] reconfigure PATH   with --cpu / --mem
 *   vsdrv [options] watch              watch the root folder, print changes
 *   vsdrv [options] relogin FILE       log in, print the session key, wait
 *                                      for FILE to exist, then make a call
 *   vsdrv [options] clones FOLDER N    N clones at once (bounded by --max-tasks)
 *   vsdrv [options] idle SECONDS       watch, and count requests while idle
 *
 * Options: --ca-file F, --thumbprint T, --insecure, --password P (instead of
 * VC_PASS), --datacenter, --root-folder, --resource-pool, --datastore,
 * --template T, --cpu N, --mem MB, --uid U, --max-tasks N, --attempts N,
 * --deadline S (exit 3 when reached), --backoff-max MS, --refused-retry MS
 * (the wait after refused credentials), --max-wait S (the
 * watch's long poll), --call-timeout MS (a long poll may take max-wait and
 * this). VC_HOST, VC_USER,
 * VC_PASS come from the environment.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <uv.h>

#include "controller/naming.h"
#include "lib/err.h"
#include "lib/http.h"
#include "vsphere/inventory.h"
#include "vsphere/ops.h"
#include "vsphere/session.h"

#define MAX_METHODS 64

struct method_count {
    char name[64];
    unsigned long n;
};

struct app {
    uv_loop_t *loop;
    vmg_http *http;
    vs_session *s;
    vs_inventory *inv;
    vs_ops *ops;
    uv_signal_t sigterm, sigint;
    uv_timer_t deadline, poll;
    int exit_code;
    bool closing;

    /* options */
    const char *ca_file, *thumbprint, *password, *template_name, *uid;
    bool insecure;
    struct vs_placement_config pcfg;
    int cpu, max_tasks, attempts;
    long long mem;
    double deadline_s;
    uint64_t backoff_max, refused_retry;
    int max_wait;          /* --max-wait: the watch's maxWaitSeconds (0: default) */
    uint64_t call_timeout; /* --call-timeout: ms a call may take (0: default) */
    size_t max_objects;

    /* the command */
    const char *cmd;
    const char *arg1, *arg2;
    struct vs_placement placement;
    struct vim_moref target;

    /* counters */
    struct method_count methods[MAX_METHODS];
    size_t nmethods;
    unsigned long requests;
    unsigned long requests_mark;
    int inflight, max_inflight;
    int clones_total, clones_done, clones_ok;
    uint64_t t0;
    bool idle_started;
};

static struct app A;

static double dbl(const char *v);

static void emit(cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);

    if (s) {
        printf("%s\n", s);
        fflush(stdout);
        free(s);
    }
    cJSON_Delete(o);
}

static cJSON *event(const char *name)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "event", name);
    return o;
}

static const char *err_name(int err)
{
    switch (err) {
    case 0:
        return "";
    case VMG_EAUTH:
        return "EAUTH";
    case VMG_ENOTFOUND:
        return "ENOTFOUND";
    case VMG_EAMBIGUOUS:
        return "EAMBIGUOUS";
    case VMG_EFAULT:
        return "EFAULT";
    case VMG_ETRANSPORT:
        return "ETRANSPORT";
    case VMG_ECONFIG:
        return "ECONFIG";
    case VMG_ECANCELED:
        return "ECANCELED";
    default:
        return "OTHER";
    }
}

static void add_err(cJSON *o, int err, const char *msg)
{
    cJSON_AddNumberToObject(o, "err", err);
    cJSON_AddStringToObject(o, "error", err_name(err));
    cJSON_AddStringToObject(o, "message", msg ? msg : "");
}

/* ---- Shutdown ---- */

static void on_http_closed(void *data)
{
    (void)data;
}

static void on_session_closed(void *data)
{
    struct app *a = data;

    vmg_http_close(a->http, on_http_closed, NULL);
    a->http = NULL;
}

static void shutdown_app(struct app *a, int code)
{
    if (a->closing)
        return;
    a->closing = true;
    a->exit_code = code;
    vs_ops_close(a->ops, NULL, NULL);
    a->ops = NULL;
    vs_inventory_close(a->inv, NULL, NULL);
    a->inv = NULL;
    uv_close((uv_handle_t *)&a->sigterm, NULL);
    uv_close((uv_handle_t *)&a->sigint, NULL);
    uv_close((uv_handle_t *)&a->deadline, NULL);
    uv_close((uv_handle_t *)&a->poll, NULL);
    vs_session_close(a->s, on_session_closed, a);
    a->s = NULL;
}

static void on_signal(uv_signal_t *h, int signum)
{
    (void)signum;
    shutdown_app(h->data, 0);
}

static void on_deadline(uv_timer_t *t)
{
    cJSON *o = event("deadline");

    emit(o);
    shutdown_app(t->data, 3);
}

/* ---- Counters ---- */

static void observer(void *data, const char *method, int err, const char *fault_type,
                     double seconds)
{
    struct app *a = data;
    size_t i;

    if (getenv("VSDRV_TRACE"))
        fprintf(stderr, "vsdrv: %llu %s err=%d fault=%s %.3fs\n",
                (unsigned long long)uv_now(a->loop), method, err, fault_type, seconds);
    a->requests++;
    for (i = 0; i < a->nmethods; i++)
        if (strcmp(a->methods[i].name, method) == 0)
            break;
    if (i == a->nmethods && a->nmethods < MAX_METHODS)
        snprintf(a->methods[a->nmethods++].name, sizeof(a->methods[0].name), "%s", method);
    if (i < a->nmethods)
        a->methods[i].n++;
}

static cJSON *methods_json(const struct app *a)
{
    cJSON *m = cJSON_CreateObject();

    for (size_t i = 0; i < a->nmethods; i++)
        cJSON_AddNumberToObject(m, a->methods[i].name, (double)a->methods[i].n);
    return m;
}

static void reset_methods(struct app *a)
{
    memset(a->methods, 0, sizeof(a->methods));
    a->nmethods = 0;
    a->requests_mark = a->requests;
}

/* ---- Session ---- */

static void on_state(void *data, const struct vs_session_status *st)
{
    struct app *a = data;
    cJSON *o = event("state");

    cJSON_AddStringToObject(o, "state", vs_state_name(st->state));
    add_err(o, st->err, st->message);
    cJSON_AddNumberToObject(o, "attempts", st->attempts);
    cJSON_AddNumberToObject(o, "retry_in_ms", (double)st->retry_in_ms);
    cJSON_AddNumberToObject(o, "logins", (double)st->logins);
    emit(o);
    if (strcmp(a->cmd, "login") == 0) {
        if (st->state == VS_STATE_READY)
            shutdown_app(a, 0);
        else if (st->state == VS_STATE_BACKOFF && a->attempts > 0 &&
                 st->attempts >= (unsigned)a->attempts)
            shutdown_app(a, 1);
    }
}

/* ---- Ops ---- */

static void print_op(const char *kind, const struct vs_op_result *r)
{
    cJSON *o = event("op");

    cJSON_AddStringToObject(o, "kind", kind);
    add_err(o, r->err, r->message);
    cJSON_AddStringToObject(o, "fault", r->fault_type);
    cJSON_AddStringToObject(o, "result", r->result ? r->result->value : "");
    cJSON_AddStringToObject(o, "task", r->task ? r->task->value : "");
    cJSON_AddBoolToObject(o, "existed", r->existed);
    emit(o);
}

static void on_op_done(void *data, const struct vs_op_result *r)
{
    struct app *a = data;

    print_op(vs_op_kind_name(r->kind), r);
    shutdown_app(a, r->err ? 1 : 0);
}

static void ops_observer(void *data, const vs_op *op, enum vs_op_phase phase,
                         const struct vs_op_result *r)
{
    struct app *a = data;

    if (getenv("VSDRV_TRACE"))
        fprintf(stderr, "vsdrv: %llu op %s %s phase %d task %s\n",
                (unsigned long long)uv_now(a->loop), vs_op_kind_name(vs_op_kind(op)),
                vs_op_target(op), (int)phase, vs_op_task(op));
    (void)r;
    if (phase == VS_OP_STARTED) {
        if (++a->inflight > a->max_inflight)
            a->max_inflight = a->inflight;
    } else if (phase == VS_OP_DONE && !a->closing) {
        a->inflight--;
    }
}

static void on_clone_done(void *data, const struct vs_op_result *r)
{
    struct app *a = data;

    if (a->closing)
        return;
    a->clones_done++;
    if (r->err == 0)
        a->clones_ok++;
    else
        print_op("clone", r);
    if (a->clones_done == a->clones_total) {
        cJSON *o = event("clones");
        double secs = (double)(uv_now(a->loop) - a->t0) / 1000.0;
        cJSON_AddNumberToObject(o, "count", a->clones_total);
        cJSON_AddNumberToObject(o, "ok", a->clones_ok);
        cJSON_AddNumberToObject(o, "max_tasks", a->max_tasks);
        cJSON_AddNumberToObject(o, "max_inflight", a->max_inflight);
        cJSON_AddNumberToObject(o, "seconds", secs);
        cJSON_AddNumberToObject(o, "requests", (double)(a->requests - a->requests_mark));
        cJSON_AddItemToObject(o, "methods", methods_json(a));
        emit(o);
        shutdown_app(a, a->clones_ok == a->clones_total ? 0 : 1);
    }
}

static void run_clones(struct app *a)
{
    char name[VS_NAME_MAX];
    int e;

    a->t0 = uv_now(a->loop);
    reset_methods(a);
    for (int i = 0; i < a->clones_total; i++) {
        struct vs_clone_spec spec = {
            .template_name = a->template_name,
            .folder = &a->target,
            .name = name,
            .num_cpus = a->cpu,
            .memory_mb = a->mem,
            .mark_uid = a->uid,
            .mark_template = a->template_name,
        };
        snprintf(name, sizeof(name), "%s-%d", a->arg1, i);
        e = vs_ops_clone(a->ops, &spec, on_clone_done, a, NULL);
        if (e < 0) {
            fprintf(stderr, "vsdrv: clone %s: %s\n", name, vmg_strerror(e));
            shutdown_app(a, 2);
            return;
        }
    }
}

static int make_ops(struct app *a)
{
    struct vs_ops_config cfg = {
        .max_inflight = a->max_tasks,
        .marks = {NAMING_MARK_UID_KEY, NAMING_MARK_TEMPLATE_KEY, NAMING_MARK_INSTANCE_KEY},
    };
    int e;

    a->ops = vs_ops_new(a->loop, a->s, NULL, &cfg, &e);
    if (!a->ops)
        return e;
    vs_ops_set_placement(a->ops, &a->placement);
    vs_ops_set_observer(a->ops, ops_observer, a);
    return 0;
}

/* run_op runs the one operation of the command, target resolved. */
static void run_op(struct app *a)
{
    int e = 0;

    if (make_ops(a) < 0) {
        shutdown_app(a, 2);
        return;
    }
    if (strcmp(a->cmd, "mkfolder") == 0) {
        e = vs_ops_create_folder(a->ops, &a->placement.root_folder, a->arg1, on_op_done, a, NULL);
    } else if (strcmp(a->cmd, "clone") == 0) {
        struct vs_clone_spec spec = {
            .template_name = a->template_name,
            .folder = &a->target,
            .name = a->arg2,
            .num_cpus = a->cpu,
            .memory_mb = a->mem,
            .mark_uid = a->uid,
            .mark_template = a->template_name,
        };
        e = vs_ops_clone(a->ops, &spec, on_op_done, a, NULL);
    } else if (strcmp(a->cmd, "poweron") == 0) {
        e = vs_ops_power_on(a->ops, &a->target, on_op_done, a, NULL);
    } else if (strcmp(a->cmd, "poweroff") == 0) {
        e = vs_ops_power_off(a->ops, &a->target, on_op_done, a, NULL);
    } else if (strcmp(a->cmd, "reconfigure") == 0) {
        e = vs_ops_reconfigure(a->ops, &a->target, a->cpu, a->mem, on_op_done, a, NULL);
    } else if (strcmp(a->cmd, "destroy") == 0) {
        e = vs_ops_destroy(a->ops, &a->target, on_op_done, a, NULL);
    } else if (strcmp(a->cmd, "clones") == 0) {
        run_clones(a);
        return;
    }
    if (e < 0) {
        fprintf(stderr, "vsdrv: %s: %s\n", a->cmd, vmg_strerror(e));
        shutdown_app(a, 2);
    }
}

static void on_target(void *data, int err, const char *msg, const struct vim_moref *ref)
{
    struct app *a = data;

    if (err) {
        cJSON *o = event("target");
        add_err(o, err, msg);
        emit(o);
        shutdown_app(a, 1);
        return;
    }
    a->target = *ref;
    run_op(a);
}

static void on_placement(void *data, int err, const char *msg, const struct vs_placement *p)
{
    struct app *a = data;
    cJSON *o = event("placement");
    const char *path = NULL;
    int e;

    add_err(o, err, msg);
    if (!err) {
        a->placement = *p;
        cJSON_AddStringToObject(o, "datacenter", p->datacenter_path);
        cJSON_AddStringToObject(o, "root", p->root_path);
        cJSON_AddStringToObject(o, "root_ref", p->root_folder.value);
        cJSON_AddStringToObject(o, "pool", p->pool_path);
        cJSON_AddStringToObject(o, "datastore", p->has_datastore ? p->datastore_name : "");
    }
    emit(o);
    if (err || strcmp(a->cmd, "placement") == 0) {
        shutdown_app(a, err ? 1 : 0);
        return;
    }
    if (strcmp(a->cmd, "mkfolder") == 0) {
        run_op(a);
        return;
    }
    path = a->arg1; /* clone FOLDER, clones FOLDER, or PATH */
    e = vs_find_path(a->s, &p->root_folder, path, on_target, a, NULL);
    if (e < 0) {
        fprintf(stderr, "vsdrv: finding %s: %s\n", path, vmg_strerror(e));
        shutdown_app(a, 2);
    }
}

/* first_call waits for the login, then resolves the placement. */
static void on_first_call(void *data, const struct vs_reply *r)
{
    struct app *a = data;
    int e;

    if (a->closing)
        return;
    if (r->err) {
        cJSON *o = event("call");
        add_err(o, r->err, r->message);
        emit(o);
        shutdown_app(a, 1);
        return;
    }
    e = vs_placement_resolve(a->s, &a->pcfg, on_placement, a, NULL);
    if (e < 0) {
        fprintf(stderr, "vsdrv: resolve: %s\n", vmg_strerror(e));
        shutdown_app(a, 2);
    }
}

static int first_call(struct app *a, vs_call_cb cb)
{
    char *buf = NULL;
    size_t len = 0;
    int e = vim_req_current_time(&buf, &len);

    return e < 0 ? e : vs_call(a->s, "CurrentTime", buf, len, NULL, cb, a, NULL);
}

/* ---- Watch ---- */

static const char *change_name(enum vs_change c)
{
    return c == VS_CHANGE_ADDED ? "added" : c == VS_CHANGE_UPDATED ? "updated" : "removed";
}

static void on_change(void *data, const struct vs_cache_event *ev)
{
    struct app *a = data;
    const struct vs_obj *ob = ev->obj;
    cJSON *o;

    if (strcmp(a->cmd, "watch") != 0)
        return;
    o = event("change");
    cJSON_AddStringToObject(o, "change", change_name(ev->change));
    cJSON_AddStringToObject(o, "kind", ob->kind == VS_OBJ_VM ? "vm" : "folder");
    cJSON_AddStringToObject(o, "ref", ob->ref);
    cJSON_AddStringToObject(o, "name", ob->name);
    cJSON_AddStringToObject(o, "parent", ob->parent);
    cJSON_AddStringToObject(o, "group", ev->group ? ev->group : "");
    cJSON_AddStringToObject(o, "old_group", ev->old_group ? ev->old_group : "");
    if (ob->kind == VS_OBJ_VM) {
        cJSON_AddStringToObject(o, "power", ob->power_state);
        cJSON_AddNumberToObject(o, "cpu", ob->num_cpu);
        cJSON_AddNumberToObject(o, "mem", (double)ob->memory_mb);
        cJSON_AddStringToObject(o, "uid", ob->has_mark_uid ? ob->mark_uid : "");
    }
    emit(o);
}

static void on_idle_end(uv_timer_t *t)
{
    struct app *a = t->data;
    cJSON *o = event("idle");

    cJSON_AddNumberToObject(o, "seconds", dbl(a->arg1));
    cJSON_AddNumberToObject(o, "requests", (double)(a->requests - a->requests_mark));
    cJSON_AddItemToObject(o, "methods", methods_json(a));
    emit(o);
    shutdown_app(a, 0);
}

static void on_inv_state(void *data, const struct vs_inventory_status *st)
{
    struct app *a = data;
    cJSON *o = event(st->late_ms    ? "late"
                     : st->retrying ? "retrying"
                     : st->synced   ? "synced"
                                    : "unsynced");

    add_err(o, st->err, st->message);
    cJSON_AddNumberToObject(o, "late_ms", (double)st->late_ms);
    cJSON_AddNumberToObject(o, "objects", (double)st->objects);
    cJSON_AddNumberToObject(o, "rebuilds", (double)st->rebuilds);
    cJSON_AddNumberToObject(o, "failures", st->failures);
    cJSON_AddNumberToObject(o, "retry_in_ms", (double)st->retry_in_ms);
    emit(o);
    if (st->synced && strcmp(a->cmd, "idle") == 0 && !a->idle_started) {
        a->idle_started = true;
        reset_methods(a);
        uv_timer_start(&a->poll, on_idle_end, (uint64_t)(dbl(a->arg1) * 1000), 0);
    }
}

/* ---- Re-login ---- */

static void on_relogin_reply(void *data, const struct vs_reply *r)
{
    struct app *a = data;
    struct vs_session_stats st;
    cJSON *o = event("call");

    vs_session_stats(a->s, &st);
    add_err(o, r->err, r->message);
    cJSON_AddNumberToObject(o, "logins", (double)st.logins);
    emit(o);
    shutdown_app(a, r->err ? 1 : 0);
}

static void on_poll_file(uv_timer_t *t)
{
    struct app *a = t->data;
    int e;

    if (access(a->arg1, F_OK) != 0)
        return;
    uv_timer_stop(t);
    e = first_call(a, on_relogin_reply);
    if (e < 0)
        shutdown_app(a, 2);
}

static void on_relogin_first(void *data, const struct vs_reply *r)
{
    struct app *a = data;
    char key[128];
    cJSON *o;

    if (r->err) {
        o = event("call");
        add_err(o, r->err, r->message);
        emit(o);
        shutdown_app(a, 1);
        return;
    }
    vs_session_key(a->s, key, sizeof(key));
    o = event("key");
    cJSON_AddStringToObject(o, "key", key);
    emit(o);
    uv_timer_start(&a->poll, on_poll_file, 100, 100);
}

/* ---- Main ---- */

/* num parses a whole number option value; exits on a bad one. */
static long long num(const char *v)
{
    char *end;
    long long n;

    errno = 0;
    n = strtoll(v, &end, 10);
    if (errno || end == v || *end) {
        fprintf(stderr, "vsdrv: not a number: %s\n", v);
        exit(2);
    }
    return n;
}

static double dbl(const char *v)
{
    char *end;
    double d = strtod(v, &end);

    if (end == v || *end) {
        fprintf(stderr, "vsdrv: not a number: %s\n", v);
        exit(2);
    }
    return d;
}

static int usage(void)
{
    fprintf(stderr, "usage: vsdrv [options] login|placement|mkfolder|clone|poweron|poweroff|"
                    "reconfigure|destroy|watch|relogin|clones|idle [args]\n");
    return 2;
}

static int parse(struct app *a, int argc, char **argv)
{
    int i;

    a->template_name = "vm-operator-template";
    a->max_tasks = 8;
    for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(f, "--insecure") == 0) {
            a->insecure = true;
            continue;
        }
        if (!v)
            return usage();
        i++;
        if (strcmp(f, "--ca-file") == 0)
            a->ca_file = v;
        else if (strcmp(f, "--thumbprint") == 0)
            a->thumbprint = v;
        else if (strcmp(f, "--password") == 0)
            a->password = v;
        else if (strcmp(f, "--datacenter") == 0)
            a->pcfg.datacenter = v;
        else if (strcmp(f, "--root-folder") == 0)
            a->pcfg.root_folder = v;
        else if (strcmp(f, "--resource-pool") == 0)
            a->pcfg.resource_pool = v;
        else if (strcmp(f, "--datastore") == 0)
            a->pcfg.datastore = v;
        else if (strcmp(f, "--template") == 0)
            a->template_name = v;
        else if (strcmp(f, "--uid") == 0)
            a->uid = v;
        else if (strcmp(f, "--cpu") == 0)
            a->cpu = (int)num(v);
        else if (strcmp(f, "--mem") == 0)
            a->mem = num(v);
        else if (strcmp(f, "--max-tasks") == 0)
            a->max_tasks = (int)num(v);
        else if (strcmp(f, "--attempts") == 0)
            a->attempts = (int)num(v);
        else if (strcmp(f, "--deadline") == 0)
            a->deadline_s = dbl(v);
        else if (strcmp(f, "--backoff-max") == 0)
            a->backoff_max = (uint64_t)num(v);
        else if (strcmp(f, "--refused-retry") == 0)
            a->refused_retry = (uint64_t)num(v);
        else if (strcmp(f, "--max-objects") == 0)
            a->max_objects = (size_t)num(v);
        else if (strcmp(f, "--max-wait") == 0)
            a->max_wait = (int)num(v);
        else if (strcmp(f, "--call-timeout") == 0)
            a->call_timeout = (uint64_t)num(v);
        else
            return usage();
    }
    if (i >= argc)
        return usage();
    a->cmd = argv[i++];
    a->arg1 = i < argc ? argv[i++] : NULL;
    a->arg2 = i < argc ? argv[i++] : NULL;
    return 0;
}

int main(int argc, char **argv)
{
    struct app *a = &A;
    struct vs_session_config cfg = {0};
    char err[512];
    int e;

    if (parse(a, argc, argv) != 0)
        return 2;
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    a->loop = uv_default_loop();
    a->http = vmg_http_new(a->loop, &e);
    if (!a->http)
        return 2;
    cfg.host = getenv("VC_HOST");
    cfg.user = getenv("VC_USER");
    cfg.password = a->password ? a->password : getenv("VC_PASS");
    cfg.ca_file = a->ca_file;
    cfg.thumbprint = a->thumbprint;
    cfg.insecure = a->insecure;
    cfg.backoff_max_ms = a->backoff_max;
    cfg.refused_retry_ms = a->refused_retry;
    cfg.call_timeout_ms = a->call_timeout;
    a->s = vs_session_new(a->loop, a->http, &cfg, &e, err, sizeof(err));
    if (!a->s) {
        cJSON *o = event("config");
        add_err(o, e, err);
        emit(o);
        vmg_http_close(a->http, NULL, NULL);
        uv_run(a->loop, UV_RUN_DEFAULT);
        return 2;
    }
    vs_session_set_state_cb(a->s, on_state, a);
    vs_session_set_observer(a->s, observer, a);
    uv_signal_init(a->loop, &a->sigterm);
    uv_signal_init(a->loop, &a->sigint);
    uv_timer_init(a->loop, &a->deadline);
    uv_timer_init(a->loop, &a->poll);
    a->sigterm.data = a->sigint.data = a->deadline.data = a->poll.data = a;
    uv_signal_start(&a->sigterm, on_signal, SIGTERM);
    uv_signal_start(&a->sigint, on_signal, SIGINT);
    if (a->deadline_s > 0)
        uv_timer_start(&a->deadline, on_deadline, (uint64_t)(a->deadline_s * 1000), 0);

    e = 0;
    if (strcmp(a->cmd, "login") == 0) {
        e = vs_session_start(a->s);
    } else if (strcmp(a->cmd, "placement") == 0 || strcmp(a->cmd, "mkfolder") == 0 ||
               strcmp(a->cmd, "poweron") == 0 || strcmp(a->cmd, "poweroff") == 0 ||
               strcmp(a->cmd, "destroy") == 0 || strcmp(a->cmd, "reconfigure") == 0) {
        if (strcmp(a->cmd, "placement") != 0 && !a->arg1)
            return usage();
        e = first_call(a, on_first_call);
    } else if (strcmp(a->cmd, "clone") == 0) {
        if (!a->arg1 || !a->arg2)
            return usage();
        e = first_call(a, on_first_call);
    } else if (strcmp(a->cmd, "clones") == 0) {
        if (!a->arg1 || !a->arg2)
            return usage();
        a->clones_total = (int)num(a->arg2);
        e = first_call(a, on_first_call);
    } else if (strcmp(a->cmd, "watch") == 0 || strcmp(a->cmd, "idle") == 0) {
        struct vs_inventory_config icfg = {
            .placement = a->pcfg,
            .backoff_max_ms = a->backoff_max,
            .max_objects = a->max_objects,
            .max_wait_seconds = a->max_wait,
            .marks = {NAMING_MARK_UID_KEY, NAMING_MARK_TEMPLATE_KEY, NAMING_MARK_INSTANCE_KEY},
        };
        if (strcmp(a->cmd, "idle") == 0 && !a->arg1)
            return usage();
        a->inv = vs_inventory_new(a->loop, a->s, &icfg, on_change, a, &e);
        if (a->inv) {
            vs_inventory_set_state_cb(a->inv, on_inv_state, a);
            e = vs_inventory_start(a->inv);
        }
    } else if (strcmp(a->cmd, "relogin") == 0) {
        if (!a->arg1)
            return usage();
        e = first_call(a, on_relogin_first);
    } else {
        return usage();
    }
    if (e < 0) {
        fprintf(stderr, "vsdrv: %s: %s\n", a->cmd, vmg_strerror(e));
        shutdown_app(a, 2);
    }
    uv_run(a->loop, UV_RUN_DEFAULT);
    uv_loop_close(a->loop);
    curl_global_cleanup();
    return a->exit_code;
}
