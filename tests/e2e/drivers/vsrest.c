/* vsrest: an e2e driver of vsphere/rest, the vSphere Automation REST client.
 *
 *   vsrest [--base URL] [--user U] [--password P] [--category NAME]
 *          [--multiple] [--insecure] [--ca-file PATH]
 *          CMD [ARGS] [+ CMD [ARGS]]...
 *
 * Defaults come from the test environment: base https://$VC_HOST, user
 * $VC_USER, password $VC_PASS, CA $VC_CA_FILE (--insecure skips TLS
 * verification instead). The TLS settings are applied by the prepare
 * callback, as the vCenter session module does for the manager. NS NAME
 * name a VmGroup: its tag and description are made by controller/naming,
 * as the manager does.
 *
 * Commands, run one after the other in one client (so the second sees what
 * the first remembered); each prints one JSON object a line on stdout:
 *   login                    {"cmd":"login","ok":true,"logins":1}
 *   ensure-category          {"cmd":..,"ok":true,"id":"urn:..."}
 *   ensure-tag NS NAME       {"cmd":..,"ok":true,"id":"urn:...","tag":"NS/NAME"}
 *   attach NS NAME VM        {"cmd":..,"ok":true}
 *   detach NS NAME VM
 *   list NS NAME             {"cmd":..,"ok":true,"objects":["VirtualMachine:vm-42",...]}
 *   delete-tag NS NAME
 *   tag-name NS NAME         {"cmd":..,"ok":true,"tag":"..."} (no I/O)
 *   wait                     prints {"cmd":"wait","ok":true}, then blocks until
 *                            a line comes on stdin (a test restarts vCenter
 *                            meanwhile; nothing else runs in the driver)
 * Every result of an operation carries "logins", vs_rest_logins().
 * A failure prints {"cmd":..,"ok":false,"code":N,"error":"<vmg_strerror>",
 * "msg":"...","available":false,"reason":"..."}. The exit status is 0 when
 * every command worked, 1 otherwise, 2 for a bad command line. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <uv.h>

#include "controller/naming.h"
#include "lib/err.h"
#include "lib/http.h"
#include "vsphere/rest.h"

struct cmd {
    const char *name;
    const char *args[3];
    int nargs;
};

#define MAX_CMDS 32

struct app {
    uv_loop_t loop;
    vmg_http *http;
    vs_rest *rest;
    const char *ca_file;
    bool insecure;
    struct cmd cmds[MAX_CMDS];
    int ncmds, next;
    int failed;
};

static void usage(void)
{
    fprintf(stderr, "usage: vsrest [--base URL] [--user U] [--password P] [--category NAME] "
                    "[--multiple] [--insecure] [--ca-file PATH] CMD [ARGS] [+ CMD [ARGS]]...\n");
}

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

static void print_failure(struct app *a, const char *cmd, int code, const char *msg)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "cmd", cmd);
    cJSON_AddBoolToObject(o, "ok", 0);
    cJSON_AddNumberToObject(o, "code", code);
    cJSON_AddStringToObject(o, "error", vmg_strerror(code));
    cJSON_AddStringToObject(o, "msg", msg ? msg : "");
    cJSON_AddBoolToObject(o, "available", vs_rest_available(a->rest));
    cJSON_AddStringToObject(o, "reason", vs_rest_disabled_reason(a->rest));
    print_json(o);
    a->failed = 1;
}

static void prepare(void *data, CURL *easy)
{
    struct app *a = data;

    if (a->insecure) {
        curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
    } else if (a->ca_file && a->ca_file[0]) {
        curl_easy_setopt(easy, CURLOPT_CAINFO, a->ca_file);
    }
}

static void run_next(struct app *a);

static void on_result(void *data, const struct vs_rest_result *res)
{
    struct app *a = data;
    const struct cmd *c = &a->cmds[a->next - 1];
    char tag[NAMING_BUF_SIZE];
    cJSON *o, *arr;

    if (res->err) {
        print_failure(a, c->name, res->err, res->msg);
        run_next(a);
        return;
    }
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "cmd", c->name);
    cJSON_AddBoolToObject(o, "ok", 1);
    cJSON_AddNumberToObject(o, "logins", (double)vs_rest_logins(a->rest));
    if (res->id)
        cJSON_AddStringToObject(o, "id", res->id);
    if (c->nargs >= 2 && naming_tag(c->args[0], c->args[1], tag, sizeof(tag)) > 0)
        cJSON_AddStringToObject(o, "tag", tag);
    if (strcmp(c->name, "list") == 0) {
        arr = cJSON_AddArrayToObject(o, "objects");
        for (size_t i = 0; i < res->n_objects; i++) {
            char s[sizeof(res->objects[i].type) + sizeof(res->objects[i].id) + 2];

            snprintf(s, sizeof(s), "%s:%s", res->objects[i].type, res->objects[i].id);
            cJSON_AddItemToArray(arr, cJSON_CreateString(s));
        }
    }
    print_json(o);
    run_next(a);
}

static void on_rest_closed(void *data)
{
    struct app *a = data;

    vmg_http_close(a->http, NULL, NULL);
    a->http = NULL;
}

/* run_next starts the next command, or closes everything after the last. */
static void run_next(struct app *a)
{
    while (a->next < a->ncmds) {
        const struct cmd *c = &a->cmds[a->next++];
        const char *const *v = c->args;
        char tag[NAMING_BUF_SIZE], desc[VS_REST_DESCRIPTION_MAX + 1];
        int err;

        /* A group's tag name and description; a name naming refuses is
         * passed on as "" so that the client refuses it (-EINVAL). */
        if (c->nargs < 2 || naming_tag(v[0], v[1], tag, sizeof(tag)) < 0)
            tag[0] = '\0';
        if (c->nargs < 2 || naming_tag_description(v[0], v[1], desc, sizeof(desc)) < 0)
            desc[0] = '\0';
        if (strcmp(c->name, "login") == 0) {
            err = vs_rest_login(a->rest, on_result, a);
        } else if (strcmp(c->name, "ensure-category") == 0) {
            err = vs_rest_ensure_category(a->rest, on_result, a);
        } else if (strcmp(c->name, "ensure-tag") == 0) {
            err = vs_rest_ensure_tag(a->rest, tag, desc, on_result, a);
        } else if (strcmp(c->name, "attach") == 0) {
            err = vs_rest_attach(a->rest, tag, desc, v[2], on_result, a);
        } else if (strcmp(c->name, "detach") == 0) {
            err = vs_rest_detach(a->rest, tag, v[2], on_result, a);
        } else if (strcmp(c->name, "list") == 0) {
            err = vs_rest_list_attached(a->rest, tag, on_result, a);
        } else if (strcmp(c->name, "delete-tag") == 0) {
            err = vs_rest_delete_tag(a->rest, tag, on_result, a);
        } else if (strcmp(c->name, "wait") == 0) {
            char line[64];
            cJSON *o = cJSON_CreateObject();

            cJSON_AddStringToObject(o, "cmd", c->name);
            cJSON_AddBoolToObject(o, "ok", 1);
            print_json(o);
            if (!fgets(line, sizeof(line), stdin))
                print_failure(a, c->name, -EIO, "no line on stdin");
            continue;
        } else { /* tag-name */
            cJSON *o = cJSON_CreateObject();

            err = naming_tag(v[0], v[1], tag, sizeof(tag));
            if (err < 0) {
                print_failure(a, c->name, err, "bad name");
                continue;
            }
            cJSON_AddStringToObject(o, "cmd", c->name);
            cJSON_AddBoolToObject(o, "ok", 1);
            cJSON_AddStringToObject(o, "tag", tag);
            print_json(o);
            continue;
        }
        if (err == 0)
            return; /* on_result goes on */
        print_failure(a, c->name, err,
                      err == VS_REST_EUNAVAILABLE ? "refused at once: tagging unavailable"
                                                  : "refused at once");
    }
    vs_rest_close(a->rest, on_rest_closed, a);
}

static int nargs_of(const char *name)
{
    static const struct {
        const char *name;
        int nargs;
    } known[] = {{"login", 0},      {"ensure-category", 0}, {"ensure-tag", 2},
                 {"attach", 3},     {"detach", 3},          {"list", 2},
                 {"delete-tag", 2}, {"tag-name", 2},        {"wait", 0}};

    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(known[i].name, name) == 0)
            return known[i].nargs;
    return -1;
}

int main(int argc, char **argv)
{
    static struct app a;
    struct vs_rest_options o = {0};
    char base[512];
    const char *host = getenv("VC_HOST");
    int i, err = 0, code = 2;

    signal(SIGPIPE, SIG_IGN);
    o.user = getenv("VC_USER");
    o.password = getenv("VC_PASS");
    o.category = NAMING_TAG_CATEGORY;
    o.category_description = NAMING_TAG_CATEGORY_DESCRIPTION;
    a.ca_file = getenv("VC_CA_FILE");
    base[0] = '\0';
    if (host)
        snprintf(base, sizeof(base), "https://%s", host);
    o.base_url = base;
    for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        const char *opt = argv[i];

        if (strcmp(opt, "--insecure") == 0) {
            a.insecure = true;
        } else if (strcmp(opt, "--multiple") == 0) {
            o.multiple = true;
        } else if (i + 1 < argc && strcmp(opt, "--base") == 0) {
            o.base_url = argv[++i];
        } else if (i + 1 < argc && strcmp(opt, "--user") == 0) {
            o.user = argv[++i];
        } else if (i + 1 < argc && strcmp(opt, "--password") == 0) {
            o.password = argv[++i];
        } else if (i + 1 < argc && strcmp(opt, "--category") == 0) {
            o.category = argv[++i];
        } else if (i + 1 < argc && strcmp(opt, "--ca-file") == 0) {
            a.ca_file = argv[++i];
        } else {
            usage();
            return 2;
        }
    }
    while (i < argc) {
        struct cmd *c;
        int n = nargs_of(argv[i]);

        if (n < 0 || a.ncmds == MAX_CMDS || i + n >= argc) {
            usage();
            return 2;
        }
        c = &a.cmds[a.ncmds++];
        c->name = argv[i];
        c->nargs = n;
        for (int k = 0; k < n; k++)
            c->args[k] = argv[i + 1 + k];
        i += 1 + n;
        if (i < argc) {
            if (strcmp(argv[i], "+") != 0) {
                usage();
                return 2;
            }
            i++;
        }
    }
    if (a.ncmds == 0 || !o.base_url[0] || !o.user || !o.password) {
        usage();
        return 2;
    }
    o.prepare = prepare;
    o.prepare_data = &a;
    o.timeout_ms = 20000;
    o.connect_timeout_ms = 5000;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    if (uv_loop_init(&a.loop) < 0)
        goto out_curl;
    a.http = vmg_http_new(&a.loop, &err);
    if (!a.http) {
        fprintf(stderr, "vsrest: %s\n", vmg_strerror(err));
        goto out_loop;
    }
    a.rest = vs_rest_new(&a.loop, a.http, &o, &err);
    if (!a.rest) {
        fprintf(stderr, "vsrest: %s\n", vmg_strerror(err));
        vmg_http_close(a.http, NULL, NULL);
        uv_run(&a.loop, UV_RUN_DEFAULT);
        goto out_loop;
    }
    run_next(&a);
    uv_run(&a.loop, UV_RUN_DEFAULT);
    code = a.failed ? 1 : 0;
out_loop:
    if (uv_loop_close(&a.loop) < 0) {
        fprintf(stderr, "vsrest: a handle was left open\n");
        code = 1;
    }
out_curl:
    curl_global_cleanup();
    return code;
}
