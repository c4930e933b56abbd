/* events.c (e2e driver): records Events about one VmGroup with
 * kube/events.c over kube/kube.c against the API server of
 * $KUBECONFIG, waits until they are written, and prints the recorder's
 * counters as one JSON line on stdout.
 *
 *   events --namespace NS --name VG --reason R --message M
 *          [--type Normal|Warning] [--times N] [--interval-ms MS] [--vary]
 *
 * The event is recorded N times (default 1), MS apart (default 0: all at
 * once); with --vary, the i-th message ends with " #i", so each is a
 * different event. Exits 0 when the run went as asked (dropped events
 * included), 1 on an error.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <uv.h>

#include "kube/events.h"
#include "kube/kube.h"
#include "kube/kubeconfig.h"
#include "controller/vmgroup.h"
#include "lib/err.h"
#include "lib/http.h"

struct app {
    uv_loop_t loop;
    uv_timer_t timer;
    kcfg *cfg;
    vmg_http *http;
    kube_client *kube;
    events *ev;
    struct vmgroup *g;
    const char *ns, *name, *reason, *message;
    enum events_type type;
    long times, interval_ms, done;
    int vary;
    int exit_code;
};

static void finish(struct app *app, int code)
{
    app->exit_code = code;
    uv_close((uv_handle_t *)&app->timer, NULL);
    events_close(app->ev, NULL, NULL);
    app->ev = NULL;
    kube_client_close(app->kube, NULL, NULL);
    app->kube = NULL;
    vmg_http_close(app->http, NULL, NULL);
    app->http = NULL;
}

static void flushed(void *data)
{
    struct app *app = data;
    struct events_stats st;
    events_get_stats(app->ev, &st);
    printf("{\"recorded\":%llu,\"aggregated\":%llu,\"created\":%llu,\"patched\":%llu,"
           "\"retries\":%llu,\"rate_limited\":%llu,\"queue_full\":%llu,\"failed\":%llu}\n",
           (unsigned long long)st.recorded, (unsigned long long)st.aggregated,
           (unsigned long long)st.created, (unsigned long long)st.patched,
           (unsigned long long)st.retries, (unsigned long long)st.rate_limited,
           (unsigned long long)st.queue_full, (unsigned long long)st.failed);
    fflush(stdout);
    finish(app, st.failed ? 1 : 0);
}

/* Records one event; when all are recorded, waits for the writes. */
static void record_next(uv_timer_t *t)
{
    struct app *app = t->data;
    struct events_object obj;
    vmgroup_event_object(app->g, &obj);
    do {
        char msg[2048];
        if (app->vary)
            snprintf(msg, sizeof(msg), "%s #%ld", app->message, app->done + 1);
        else
            snprintf(msg, sizeof(msg), "%s", app->message);
        int r = events_record(app->ev, &obj, app->type, app->reason, msg);
        if (r < 0 && r != VMG_ETHROTTLED) {
            fprintf(stderr, "events: record: %s\n", vmg_strerror(r));
            finish(app, 1);
            return;
        }
        app->done++;
    } while (app->interval_ms == 0 && app->done < app->times);
    if (app->done < app->times) {
        uv_timer_start(&app->timer, record_next, (uint64_t)app->interval_ms, 0);
        return;
    }
    events_flush(app->ev, flushed, app);
}

static void got_group(void *data, const struct kube_result *res)
{
    struct app *app = data;
    char err[256];
    if (res->err) {
        fprintf(stderr, "events: get %s/%s: %s: %s\n", app->ns, app->name, vmg_strerror(res->err),
                res->message);
        finish(app, 1);
        return;
    }
    if (vmgroup_from_json(res->body, &app->g, err, sizeof(err)) < 0) {
        fprintf(stderr, "events: %s\n", err);
        finish(app, 1);
        return;
    }
    uv_timer_start(&app->timer, record_next, 0, 0);
}

int main(int argc, char **argv)
{
    struct app app;
    char err[512], path[KUBE_PATH_MAX];
    int r;

    memset(&app, 0, sizeof(app));
    app.times = 1;
    app.message = "";
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(k, "--vary") == 0) {
            app.vary = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "events: %s needs a value\n", k);
            return 2;
        }
        i++;
        if (strcmp(k, "--namespace") == 0)
            app.ns = v;
        else if (strcmp(k, "--name") == 0)
            app.name = v;
        else if (strcmp(k, "--reason") == 0)
            app.reason = v;
        else if (strcmp(k, "--message") == 0)
            app.message = v;
        else if (strcmp(k, "--type") == 0)
            app.type = strcmp(v, "Warning") == 0 ? EVENTS_WARNING : EVENTS_NORMAL;
        else if (strcmp(k, "--times") == 0)
            app.times = strtol(v, NULL, 10);
        else if (strcmp(k, "--interval-ms") == 0)
            app.interval_ms = strtol(v, NULL, 10);
        else {
            fprintf(stderr, "events: unknown %s\n", k);
            return 2;
        }
    }
    if (!app.ns || !app.name || !app.reason || app.times < 1 || app.times > 100000 ||
        app.interval_ms < 0) {
        fprintf(stderr, "events: --namespace, --name and --reason are required\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    uv_loop_init(&app.loop);
    struct kcfg_opts ko = {0};
    r = kcfg_load(&ko, &app.cfg, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "events: %s\n", err);
        return 2;
    }
    app.http = vmg_http_new(&app.loop, &r);
    if (!app.http || kube_client_new(&app.loop, app.http, app.cfg, NULL, &app.kube) < 0) {
        fprintf(stderr, "events: cannot make the client\n");
        return 1;
    }
    struct events_options eo = {
        .io = &events_kube_io, .io_ctx = app.kube, .instance = "e2e-driver"};
    r = events_new(&app.loop, &eo, &app.ev);
    if (r < 0) {
        fprintf(stderr, "events: %s\n", vmg_strerror(r));
        return 1;
    }
    uv_timer_init(&app.loop, &app.timer);
    app.timer.data = &app;
    r = kube_path(path, sizeof(path), VMGROUP_GROUP, VMGROUP_VERSION, app.ns, VMGROUP_PLURAL,
                  app.name, NULL);
    if (r < 0 || kube_get(app.kube, path, got_group, &app) < 0) {
        fprintf(stderr, "events: cannot get the VmGroup\n");
        finish(&app, 1);
    }
    uv_run(&app.loop, UV_RUN_DEFAULT);
    uv_loop_close(&app.loop);
    vmgroup_free(app.g);
    kcfg_free(app.cfg);
    curl_global_cleanup();
    return app.exit_code;
}
