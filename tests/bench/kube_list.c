/* kube_list: the benchmark of kube/kube and kube/informer
 * (tests/bench/kube_list.sh runs it).
 *
 *   kube_list create --kubeconfig PATH --namespace NS --count N
 *       creates VmGroups bench-00000.. in NS through the client (many at
 *       once), each with a status as the operator writes it (but no
 *       finalizer, so that deleting the namespace needs no operator); prints
 *       "created=N seconds=S".
 *   kube_list measure --kubeconfig PATH [--namespace NS] [--list-mode auto|paged|stream]
 *       a process holding only an informer: prints "idle_kib=K
 *       idle_anon_kib=A" (VmRSS, and its anonymous part, once the client
 *       and informer exist, before listing), then lists
 *       and watches the VmGroups and, once synced, prints "count=N
 *       seconds=S after_kib=K cache_bytes=B".
 *
 * Built without sanitizers, since it measures memory. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <uv.h>

#include "kube/informer.h"
#include "kube/kube.h"
#include "kube/kubeconfig.h"
#include "controller/vmgroup.h"
#include "lib/err.h"
#include "lib/http.h"
#include "tests/bench/status_kib.h"

#define WINDOW 64 /* requests in flight while creating */

struct app {
    uv_loop_t *loop;
    kcfg *cfg;
    vmg_http *http;
    kube_client *kc;
    struct informer *inf;
    const char *ns;
    long count;
    long next, done, failed;
    uint64_t t0, synced_ms;
    uv_timer_t settle;
    bool stopping;
    int rc;
};

static long rss_kib(void)
{
    return status_kib("VmRSS");
}

static void on_kc_closed(void *data)
{
    struct app *a = data;

    vmg_http_close(a->http, NULL, NULL);
}

static void on_inf_closed(void *data)
{
    struct app *a = data;

    kube_client_close(a->kc, on_kc_closed, a);
}

static void finish(struct app *a)
{
    if (a->stopping)
        return;
    a->stopping = true;
    if (a->inf)
        informer_close(a->inf, on_inf_closed, a);
    else
        on_inf_closed(a);
}

/* ---- create ---- */

static void create_next(struct app *a);

static void on_status_done(void *data, const struct kube_result *res)
{
    struct app *a = data;

    if (res->err) {
        a->failed++;
        fprintf(stderr, "kube_list: status of %s: %s\n", res->path, res->message);
    }
    a->done++;
    create_next(a);
}

static void on_created(void *data, const struct kube_result *res)
{
    struct app *a = data;
    char path[KUBE_PATH_MAX];
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(res->body, "metadata");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");
    struct vmgroup_status st = {.phase = VMGROUP_PHASE_RUNNING,
                                .current_replicas = 2,
                                .desired_replicas = 2,
                                .observed_generation = 1,
                                .last_message = "All 2 VMs are running.",
                                .n_conditions = 1};
    cJSON *patch = NULL, *status = NULL;

    if (res->err && res->err != VMG_ECONFLICT) {
        a->failed++;
        fprintf(stderr, "kube_list: create: %s\n", res->message);
        goto next;
    }
    if (res->err) /* there from an earlier run */
        goto next;
    /* Then the status, as the operator writes it. */
    st.conditions[0] = (struct vmgroup_condition){.type = "Ready",
                                                  .status = VMGROUP_COND_TRUE,
                                                  .reason = "AllReplicasReady",
                                                  .message = "All 2 VMs are running.",
                                                  .last_transition_time = "2026-01-01T00:00:00Z"};
    patch = cJSON_CreateObject();
    if (!patch || !cJSON_IsString(name) || vmgroup_status_to_json(&st, NULL, &status) < 0)
        goto fail;
    if (!cJSON_AddItemToObject(patch, "status", status)) {
        cJSON_Delete(status);
        goto fail;
    }
    if (kube_path(path, sizeof(path), VMGROUP_GROUP, VMGROUP_VERSION, a->ns, VMGROUP_PLURAL,
                  name->valuestring, NULL) < 0 ||
        kube_merge_patch_status(a->kc, path, patch, on_status_done, a, NULL) < 0)
        goto fail;
    cJSON_Delete(patch);
    return;
fail:
    a->failed++;
    fprintf(stderr, "kube_list: cannot patch the status\n");
next:
    cJSON_Delete(patch);
    a->done++;
    create_next(a);
}

static void create_next(struct app *a)
{
    char path[KUBE_PATH_MAX], body[1024];

    if (a->done == a->count) {
        uint64_t ms = uv_now(a->loop) - a->t0;

        printf("created=%ld failed=%ld seconds=%.2f\n", a->count - a->failed, a->failed,
               (double)ms / 1000.0);
        fflush(stdout);
        a->rc = a->failed ? 1 : 0;
        a->done++; /* once */
        finish(a);
        return;
    }
    if (a->next >= a->count)
        return;
    if (kube_path(path, sizeof(path), VMGROUP_GROUP, VMGROUP_VERSION, a->ns, VMGROUP_PLURAL, NULL,
                  NULL) < 0)
        abort();
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"%s\",\"kind\":\"%s\",\"metadata\":{\"name\":\"bench-%05ld\","
             "\"labels\":{\"app\":\"bench\"}},"
             "\"spec\":{\"cpu\":2,\"memory\":4,\"template\":\"vm-operator-template\","
             "\"replicas\":2}}",
             VMGROUP_API_VERSION, VMGROUP_KIND, a->next);
    a->next++;
    if (kube_request(a->kc, "POST", path, "application/json", body, on_created, a) < 0) {
        a->failed++;
        a->done++;
    }
}

/* ---- measure ---- */

/* on_settled measures once the loop has freed the last page. */
static void on_settled(uv_timer_t *t)
{
    struct app *a = t->data;
    struct informer_stats st;

    informer_get_stats(a->inf, &st);
    printf("count=%zu seconds=%.2f after_kib=%ld cache_bytes=%zu\n", st.objects,
           (double)a->synced_ms / 1000.0, rss_kib(), st.bytes);
    fflush(stdout);
    a->rc = 0;
    uv_close((uv_handle_t *)t, NULL);
    finish(a);
}

static void on_note(void *data, const struct informer_note *n)
{
    struct app *a = data;

    if (n->kind == INFORMER_NOTE_SYNCED) {
        uv_update_time(a->loop);
        a->synced_ms = uv_now(a->loop) - a->t0;
        uv_timer_init(a->loop, &a->settle);
        a->settle.data = a;
        uv_timer_start(&a->settle, on_settled, 0, 0);
    } else if (n->kind == INFORMER_NOTE_ERROR) {
        fprintf(stderr, "kube_list: %s: %s\n", n->op, n->message);
        a->rc = 1;
        finish(a);
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: kube_list create|measure --kubeconfig PATH [--namespace NS] "
                    "[--count N]\n");
    return 2;
}

int main(int argc, char **argv)
{
    struct app a = {.rc = 1};
    struct kcfg_opts ko = {0};
    struct kube_client_opts co = {0};
    struct informer_opts io = {0};
    char errbuf[512];
    bool create;
    int r;

    if (argc < 2)
        return usage();
    if (strcmp(argv[1], "create") == 0)
        create = true;
    else if (strcmp(argv[1], "measure") == 0)
        create = false;
    else
        return usage();
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--kubeconfig") == 0) {
            ko.kubeconfig = argv[i + 1];
        } else if (strcmp(argv[i], "--namespace") == 0) {
            a.ns = argv[i + 1];
        } else if (strcmp(argv[i], "--list-mode") == 0) {
            if (strcmp(argv[i + 1], "paged") == 0)
                io.list_mode = INFORMER_LIST_PAGED;
            else if (strcmp(argv[i + 1], "stream") == 0)
                io.list_mode = INFORMER_LIST_STREAM;
            else if (strcmp(argv[i + 1], "auto") != 0)
                return usage();
        } else if (strcmp(argv[i], "--count") == 0) {
            char *end;

            errno = 0;
            a.count = strtol(argv[i + 1], &end, 10);
            if (errno || *end || a.count <= 0 || a.count > 100000)
                return usage();
        } else {
            return usage();
        }
    }
    if (create && (!a.ns || a.count <= 0))
        return usage();
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    r = kcfg_load(&ko, &a.cfg, errbuf, sizeof(errbuf));
    if (r < 0) {
        fprintf(stderr, "kube_list: %s\n", errbuf);
        return 1;
    }
    a.loop = uv_default_loop();
    a.http = vmg_http_new(a.loop, &r);
    if (!a.http)
        return 1;
    if (create) {
        co.qps = 2000;
        co.burst = WINDOW;
        co.max_queued = 2 * WINDOW;
    }
    r = kube_client_new(a.loop, a.http, a.cfg, &co, &a.kc);
    if (r < 0)
        return 1;
    uv_update_time(a.loop);
    a.t0 = uv_now(a.loop);
    if (create) {
        for (int i = 0; i < WINDOW; i++)
            create_next(&a);
    } else {
        io.ns = a.ns;
        io.on_note = on_note;
        io.note_data = &a;
        vmgroup_informer_opts(&io);
        r = informer_new(a.loop, a.kc, &io, &a.inf);
        if (r < 0)
            return 1;
        printf("idle_kib=%ld idle_anon_kib=%ld\n", rss_kib(), status_kib("RssAnon"));
        fflush(stdout);
        uv_update_time(a.loop);
        a.t0 = uv_now(a.loop);
        if (informer_start(a.inf) < 0)
            return 1;
    }
    uv_run(a.loop, UV_RUN_DEFAULT);
    kcfg_free(a.cfg);
    uv_run(a.loop, UV_RUN_DEFAULT);
    uv_loop_close(a.loop);
    curl_global_cleanup();
    return a.rc;
}
