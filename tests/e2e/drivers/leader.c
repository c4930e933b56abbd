/* leader.c (e2e driver): one leader-election candidate against the API
 * server of $KUBECONFIG, printing one JSON object a line on stdout:
 *   {"event":"new leader","identity":"..."}
 *   {"event":"started leading","identity":"..."}
 *   {"event":"stopped leading","reason":"...","message":"..."}  then exit 1
 *   {"event":"released","err":0}                                then exit 0
 * SIGTERM or SIGINT releases the Lease (leader_release) and exits 0.
 *
 *   leader --namespace NS --name NAME [--identity ID]
 *          [--lease-duration 3s] [--renew-deadline 2s] [--retry-period 500ms]
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <uv.h>

#include "kube/kube.h"
#include "kube/kubeconfig.h"
#include "kube/leader.h"
#include "lib/err.h"
#include "lib/http.h"
#include "lib/options.h"

struct app {
    uv_loop_t loop;
    uv_signal_t sigterm, sigint;
    kcfg *cfg;
    vmg_http *http;
    kube_client *kube;
    leader *le;
    int exit_code;
    int stopping;
};

/* Writes one JSON line: key/value string pairs ended by NULL. */
static void emit(const char *event, ...) __attribute__((sentinel));
static void emit(const char *event, ...)
{
    cJSON *o = cJSON_CreateObject();
    va_list ap;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    cJSON_AddStringToObject(o, "event", event);
    cJSON_AddNumberToObject(o, "ts_ms",
                            (double)ts.tv_sec * 1000.0 + (double)(ts.tv_nsec / 1000000));
    va_start(ap, event);
    for (;;) {
        const char *k = va_arg(ap, const char *);
        if (!k)
            break;
        cJSON_AddStringToObject(o, k, va_arg(ap, const char *));
    }
    va_end(ap);
    char *s = cJSON_PrintUnformatted(o);
    if (s)
        printf("%s\n", s);
    fflush(stdout);
    free(s);
    cJSON_Delete(o);
}

static void shutdown_all(struct app *app, int code)
{
    if (app->stopping)
        return;
    app->stopping = 1;
    app->exit_code = code;
    uv_close((uv_handle_t *)&app->sigterm, NULL);
    uv_close((uv_handle_t *)&app->sigint, NULL);
    leader_close(app->le, NULL, NULL);
    app->le = NULL;
    kube_client_close(app->kube, NULL, NULL);
    app->kube = NULL;
    vmg_http_close(app->http, NULL, NULL);
    app->http = NULL;
}

static void on_started(void *data)
{
    struct app *app = data;
    emit("started leading", "identity", leader_identity(app->le), NULL);
}

static void on_stopped(void *data, enum leader_stop_reason reason, const char *msg)
{
    struct app *app = data;
    const char *why = reason == LEADER_STOP_RENEW_DEADLINE ? "renew deadline"
                      : reason == LEADER_STOP_TAKEN        ? "taken"
                                                           : "released";
    emit("stopped leading", "reason", why, "message", msg, NULL);
    if (reason != LEADER_STOP_RELEASED)
        shutdown_all(app, 1);
}

static void on_new_leader(void *data, const char *id)
{
    emit("new leader", "identity", id, NULL);
}

static void on_released(void *data, int err)
{
    struct app *app = data;
    char e[16];
    snprintf(e, sizeof(e), "%d", err);
    emit("released", "err", e, "error", err ? vmg_strerror(err) : "", NULL);
    shutdown_all(app, err ? 1 : 0);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct app *app = h->data;
    if (app->stopping || !app->le)
        return;
    int r = leader_release(app->le, on_released, app);
    if (r < 0)
        shutdown_all(app, 1);
}

static int duration(const char *s, uint64_t *ret)
{
    if (vmg_parse_duration(s, ret) < 0) {
        fprintf(stderr, "leader: bad duration %s\n", s);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct app app;
    struct leader_options o;
    char err[512];
    int r;

    memset(&app, 0, sizeof(app));
    memset(&o, 0, sizeof(o));
    o.lease_duration_ms = 3000;
    o.renew_deadline_ms = 2000;
    o.retry_period_ms = 500;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (strcmp(k, "--namespace") == 0)
            o.ns = v;
        else if (strcmp(k, "--name") == 0)
            o.name = v;
        else if (strcmp(k, "--identity") == 0)
            o.identity = v;
        else if (strcmp(k, "--lease-duration") == 0   ? duration(v, &o.lease_duration_ms)
                 : strcmp(k, "--renew-deadline") == 0 ? duration(v, &o.renew_deadline_ms)
                 : strcmp(k, "--retry-period") == 0
                     ? duration(v, &o.retry_period_ms)
                     : (fprintf(stderr, "leader: unknown %s\n", k), -1))
            return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    uv_loop_init(&app.loop);

    struct kcfg_opts ko = {0};
    r = kcfg_load(&ko, &app.cfg, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "leader: %s\n", err);
        return 2;
    }
    const char *ns = NULL;
    r = leader_namespace(o.ns, app.cfg, &ns, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "leader: %s\n", err);
        kcfg_free(app.cfg);
        return 2;
    }
    o.ns = ns;
    app.http = vmg_http_new(&app.loop, &r);
    if (!app.http || kube_client_new(&app.loop, app.http, app.cfg, NULL, &app.kube) < 0) {
        fprintf(stderr, "leader: cannot make the client\n");
        return 1;
    }
    o.io = &leader_kube_io;
    o.io_ctx = app.kube;
    o.cb.on_started_leading = on_started;
    o.cb.on_stopped_leading = on_stopped;
    o.cb.on_new_leader = on_new_leader;
    o.cb.data = &app;
    r = leader_new(&app.loop, &o, &app.le, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "leader: %s (%s)\n", err, vmg_strerror(r));
        return 2;
    }
    emit("candidate", "identity", leader_identity(app.le), NULL);
    uv_signal_init(&app.loop, &app.sigterm);
    uv_signal_init(&app.loop, &app.sigint);
    app.sigterm.data = app.sigint.data = &app;
    uv_signal_start(&app.sigterm, on_signal, SIGTERM);
    uv_signal_start(&app.sigint, on_signal, SIGINT);
    leader_start(app.le);

    uv_run(&app.loop, UV_RUN_DEFAULT);
    r = uv_loop_close(&app.loop);
    if (r < 0)
        fprintf(stderr, "leader: loop not closed cleanly: %s\n", uv_strerror(r));
    kcfg_free(app.cfg);
    curl_global_cleanup();
    return app.exit_code;
}
