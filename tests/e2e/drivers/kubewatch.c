/* kubewatch: an e2e driver of kube/kube and kube/informer.
 *
 *   kubewatch [--kubeconfig PATH] [--context NAME] [--namespace NS]
 *             [--page-size N] [--watch-seconds N] [--resync-ms N] [--qps Q]
 *             [--list-mode auto|paged|stream] [--list-once] [-v N]
 *
 * Lists and watches the VmGroups (of one namespace, or all) through an
 * informer and prints one JSON object a line on stdout for every
 * notification and every note of the informer:
 *   {"event":"add","key":"ns/name","rv":"12","replicas":1,...}
 *   {"event":"update","key":...,"old_rv":"12","rv":"13",...}
 *   {"event":"delete","key":...,"rv":"13"}
 *   {"event":"listed"|"synced"|"watching"|"watch_ended"|"gone"|"error"|"bad_object",...}
 * SIGUSR1 prints the cache: {"event":"dump","count":N,"rv":..,"items":["ns/name@rv",...]}
 * (sorted); SIGUSR2 restarts the watch from the informer's resourceVersion;
 * SIGTERM or SIGINT closes everything and exits 0.
 *
 * With --list-once it lists once through the client instead (no informer)
 * and prints {"event":"list","err":"...","code":N,"reason":..,"attempts":N,
 * "count":N}, exiting 0 on success and 3 on an error. */
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
#include "lib/log.h"

struct app {
    uv_loop_t *loop;
    kcfg *cfg;
    vmg_http *http;
    kube_client *kc;
    struct informer *inf;
    uv_signal_t sig[4];
    int exit_code;
    bool stopping;
    unsigned long requests;
};

static void print_json(cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);

    if (s) {
        fputs(s, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        cJSON_free(s);
    }
    cJSON_Delete(o);
}

static cJSON *event(const char *name)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "event", name);
    return o;
}

static void add_group(cJSON *o, const struct vmgroup *g)
{
    cJSON_AddStringToObject(o, "rv", g->meta.resource_version);
    cJSON_AddNumberToObject(o, "replicas", g->spec.replicas);
    cJSON_AddNumberToObject(o, "cpu", g->spec.cpu);
    cJSON_AddNumberToObject(o, "memory", g->spec.memory);
    cJSON_AddStringToObject(o, "template", g->spec.template);
}

static void on_add(void *data, const char *key, const void *obj)
{
    cJSON *o = event("add");

    cJSON_AddStringToObject(o, "key", key);
    add_group(o, obj);
    print_json(o);
}

static void on_update(void *data, const char *key, const void *old_obj, const void *new_obj)
{
    const struct vmgroup *old = old_obj;
    cJSON *o = event(old_obj == new_obj ? "resync" : "update");

    cJSON_AddStringToObject(o, "key", key);
    cJSON_AddStringToObject(o, "old_rv", old->meta.resource_version);
    add_group(o, new_obj);
    print_json(o);
}

static void on_delete(void *data, const char *key, const void *old_obj)
{
    const struct vmgroup *g = old_obj;
    cJSON *o = event("delete");

    cJSON_AddStringToObject(o, "key", key);
    cJSON_AddStringToObject(o, "rv", g->meta.resource_version);
    print_json(o);
}

static const char *note_name(enum informer_note_kind k)
{
    switch (k) {
    case INFORMER_NOTE_LISTED:
        return "listed";
    case INFORMER_NOTE_SYNCED:
        return "synced";
    case INFORMER_NOTE_WATCHING:
        return "watching";
    case INFORMER_NOTE_WATCH_ENDED:
        return "watch_ended";
    case INFORMER_NOTE_GONE:
        return "gone";
    case INFORMER_NOTE_ERROR:
        return "error";
    case INFORMER_NOTE_BAD_OBJECT:
        return "bad_object";
    }
    return "?";
}

static void on_note(void *data, const struct informer_note *n)
{
    cJSON *o = event(note_name(n->kind));

    cJSON_AddStringToObject(o, "op", n->op);
    cJSON_AddStringToObject(o, "rv", n->rv);
    if (n->err) {
        cJSON_AddStringToObject(o, "err", vmg_strerror(n->err));
        cJSON_AddNumberToObject(o, "code", (double)n->status);
        cJSON_AddStringToObject(o, "reason", n->reason);
        cJSON_AddStringToObject(o, "message", n->message);
    }
    if (n->kind == INFORMER_NOTE_LISTED || n->kind == INFORMER_NOTE_SYNCED) {
        cJSON_AddNumberToObject(o, "count", (double)n->count);
        cJSON_AddNumberToObject(o, "added", (double)n->added);
        cJSON_AddNumberToObject(o, "updated", (double)n->updated);
        cJSON_AddNumberToObject(o, "deleted", (double)n->deleted);
    }
    if (n->kind == INFORMER_NOTE_ERROR)
        cJSON_AddNumberToObject(o, "retry_ms", (double)n->retry_ms);
    if (n->key[0])
        cJSON_AddStringToObject(o, "key", n->key);
    print_json(o);
    if (n->kind == INFORMER_NOTE_GONE || n->kind == INFORMER_NOTE_ERROR)
        vmg_warn("kubewatch", NULL, NULL, "%s %s: %s (%s)", note_name(n->kind), n->op, n->message,
                 n->reason);
}

struct dump {
    char **items;
    size_t n, cap;
};

static int collect(void *data, const char *key, const void *obj)
{
    struct dump *d = data;
    const struct vmgroup *g = obj;
    size_t len = strlen(key) + strlen(g->meta.resource_version) + 2;

    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 64;
        char **p = realloc(d->items, cap * sizeof(*p));

        if (!p)
            return -ENOMEM;
        d->items = p;
        d->cap = cap;
    }
    d->items[d->n] = malloc(len);
    if (!d->items[d->n])
        return -ENOMEM;
    snprintf(d->items[d->n], len, "%s@%s", key, g->meta.resource_version);
    d->n++;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void dump(struct app *a)
{
    struct dump d = {0};
    cJSON *o = event("dump"), *arr;

    informer_foreach(a->inf, collect, &d);
    if (d.n > 0)
        qsort(d.items, d.n, sizeof(*d.items), cmp_str);
    cJSON_AddNumberToObject(o, "count", (double)informer_count(a->inf));
    cJSON_AddBoolToObject(o, "synced", informer_has_synced(a->inf));
    cJSON_AddStringToObject(o, "rv", informer_resource_version(a->inf));
    cJSON_AddNumberToObject(o, "requests", (double)a->requests);
    arr = cJSON_AddArrayToObject(o, "items");
    for (size_t i = 0; i < d.n; i++) {
        cJSON_AddItemToArray(arr, cJSON_CreateString(d.items[i]));
        free(d.items[i]);
    }
    free(d.items);
    print_json(o);
}

static void on_http_closed(void *data)
{
    struct app *a = data;

    for (int i = 0; i < 4; i++)
        uv_close((uv_handle_t *)&a->sig[i], NULL);
}

static void on_kc_closed(void *data)
{
    struct app *a = data;

    vmg_http_close(a->http, on_http_closed, a);
}

static void on_inf_closed(void *data)
{
    struct app *a = data;

    kube_client_close(a->kc, on_kc_closed, a);
}

static void stop(struct app *a, int code)
{
    if (a->stopping)
        return;
    a->stopping = true;
    a->exit_code = code;
    if (a->inf)
        informer_close(a->inf, on_inf_closed, a);
    else
        on_inf_closed(a);
}

static void on_signal(uv_signal_t *s, int signum)
{
    struct app *a = s->data;

    if (signum == SIGUSR1 && a->inf) {
        dump(a);
    } else if (signum == SIGUSR2 && a->inf) {
        int r = informer_rewatch(a->inf);
        cJSON *o = event("rewatch");

        cJSON_AddStringToObject(o, "result", r < 0 ? vmg_strerror(r) : "ok");
        print_json(o);
    } else if (signum == SIGTERM || signum == SIGINT) {
        stop(a, 0);
    }
}

static void on_observe(void *data, const char *method, const char *host, long status, int err,
                       double seconds)
{
    struct app *a = data;

    a->requests++;
    vmg_debug("kubewatch", NULL, NULL, "%s %s: %ld %s (%.3f s)", method, host, status,
              err ? vmg_strerror(err) : "", seconds);
}

static void on_list_once(void *data, const struct kube_result *res)
{
    struct app *a = data;
    cJSON *o = event("list");
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(res->body, "items");

    cJSON_AddStringToObject(o, "err", res->err ? vmg_strerror(res->err) : "");
    cJSON_AddNumberToObject(o, "status", (double)res->status);
    cJSON_AddNumberToObject(o, "code", res->code);
    cJSON_AddStringToObject(o, "reason", res->reason);
    cJSON_AddStringToObject(o, "message", res->message);
    cJSON_AddNumberToObject(o, "attempts", res->attempts);
    cJSON_AddNumberToObject(o, "count", cJSON_IsArray(items) ? cJSON_GetArraySize(items) : 0);
    print_json(o);
    stop(a, res->err ? 3 : 0);
}

static int usage(void)
{
    fprintf(stderr, "usage: kubewatch [--kubeconfig PATH] [--context NAME] [--namespace NS] "
                    "[--page-size N] [--watch-seconds N] [--resync-ms N] [--qps Q] "
                    "[--list-mode auto|paged|stream] [--list-once] [-v N]\n");
    return 2;
}

static int num(const char *s, long max, long *ret)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > max)
        return -1;
    *ret = v;
    return 0;
}

int main(int argc, char **argv)
{
    struct app a = {0};
    struct kcfg_opts ko = {0};
    struct kube_client_opts co = {0};
    struct informer_opts io = {0};
    const char *ns = NULL;
    bool list_once = false;
    enum informer_list_mode mode = INFORMER_LIST_AUTO;
    long page = 0, watch_s = 0, resync = 0, verbosity = 0, qps = 0;
    char errbuf[512];
    int r, signums[4] = {SIGUSR1, SIGUSR2, SIGTERM, SIGINT};

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(arg, "--list-once") == 0) {
            list_once = true;
            continue;
        }
        if (!val)
            return usage();
        i++;
        if (strcmp(arg, "--kubeconfig") == 0)
            ko.kubeconfig = val;
        else if (strcmp(arg, "--context") == 0)
            ko.context = val;
        else if (strcmp(arg, "--namespace") == 0)
            ns = val;
        else if (strcmp(arg, "--list-mode") == 0 && strcmp(val, "auto") == 0)
            mode = INFORMER_LIST_AUTO;
        else if (strcmp(arg, "--list-mode") == 0 && strcmp(val, "paged") == 0)
            mode = INFORMER_LIST_PAGED;
        else if (strcmp(arg, "--list-mode") == 0 && strcmp(val, "stream") == 0)
            mode = INFORMER_LIST_STREAM;
        else if (strcmp(arg, "--page-size") == 0 && num(val, 100000, &page) == 0)
            ;
        else if (strcmp(arg, "--watch-seconds") == 0 && num(val, 3600, &watch_s) == 0)
            ;
        else if (strcmp(arg, "--resync-ms") == 0 && num(val, 3600000, &resync) == 0)
            ;
        else if (strcmp(arg, "--qps") == 0 && num(val, 100000, &qps) == 0)
            ;
        else if (strcmp(arg, "-v") == 0 && num(val, 10, &verbosity) == 0)
            ;
        else
            return usage();
    }
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    vmg_log_setup((int)verbosity, 2);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    r = kcfg_load(&ko, &a.cfg, errbuf, sizeof(errbuf));
    if (r < 0) {
        vmg_error("kubewatch", NULL, NULL, "%s", errbuf);
        curl_global_cleanup();
        return 1;
    }
    a.loop = uv_default_loop();
    a.http = vmg_http_new(a.loop, &r);
    if (!a.http)
        goto fail;
    co.observe = on_observe;
    co.observe_data = &a;
    if (qps)
        co.qps = (double)qps;
    r = kube_client_new(a.loop, a.http, a.cfg, &co, &a.kc);
    if (r < 0)
        goto fail;
    for (int i = 0; i < 4; i++) {
        uv_signal_init(a.loop, &a.sig[i]);
        a.sig[i].data = &a;
        uv_signal_start(&a.sig[i], on_signal, signums[i]);
    }
    if (list_once) {
        char path[KUBE_PATH_MAX];

        r = kube_path(path, sizeof(path), VMGROUP_GROUP, VMGROUP_VERSION, ns, VMGROUP_PLURAL, NULL,
                      NULL);
        if (r >= 0)
            r = kube_list(a.kc, path, (unsigned)page, NULL, on_list_once, &a, NULL);
    } else {
        io.ns = ns;
        io.list_mode = mode;
        io.page_size = (unsigned)page;
        io.watch_min_s = (unsigned)watch_s;
        io.watch_max_s = (unsigned)watch_s;
        io.resync_ms = (uint64_t)resync;
        io.handlers.on_add = on_add;
        io.handlers.on_update = on_update;
        io.handlers.on_delete = on_delete;
        io.on_note = on_note;
        vmgroup_informer_opts(&io);
        r = informer_new(a.loop, a.kc, &io, &a.inf);
        if (r >= 0)
            r = informer_start(a.inf);
    }
    if (r < 0) {
        vmg_error("kubewatch", NULL, NULL, "cannot start: %s", vmg_strerror(r));
        stop(&a, 1);
    }
    uv_run(a.loop, UV_RUN_DEFAULT);
    kcfg_free(a.cfg);
    uv_run(a.loop, UV_RUN_DEFAULT);
    uv_loop_close(a.loop);
    curl_global_cleanup();
    return a.exit_code;
fail:
    vmg_error("kubewatch", NULL, NULL, "cannot start: %s", vmg_strerror(r));
    vmg_http_close(a.http, NULL, NULL);
    uv_run(a.loop, UV_RUN_DEFAULT);
    kcfg_free(a.cfg);
    uv_run(a.loop, UV_RUN_DEFAULT);
    uv_loop_close(a.loop);
    curl_global_cleanup();
    return 1;
}
