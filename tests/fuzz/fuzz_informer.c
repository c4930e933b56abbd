/* fuzz_informer.c: libFuzzer target for applying what the API server sends
 * to the informer's cache of VmGroups: list pages, then watch events
 * (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR), and streaming lists.
 *
 * An input is lines: "#LIST" starts a list, whose pages are the lines up to
 * "#END"; "#STREAM" starts a streaming list (its events are the watch lines
 * that follow, up to the BOOKMARK that ends them); any other line is a
 * watch line. After each step the cache must agree with what the handlers
 * were told (adds minus deletes is the count; a handler sees the cache
 * already changed), with its figures, and with itself (every key found).
 *
 * fuzz-sources: kube/informer.c kube/kube.c controller/vmgroup.c
 * fuzz-sources: kube/api.c
 * fuzz-sources: kube/kubeconfig.c lib/jsonarena.c lib/http.c lib/err.c lib/str.c
 * fuzz-sources: kube/cred.c kube/exec.c lib/jsonwipe.c kube/kfile.c lib/file.c
 * fuzz-sources: lib/buf.c lib/backoff.c lib/bucket.c lib/clock.c lib/b64.c
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "kube/informer.h"
#include "controller/vmgroup.h"
#include "lib/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct model {
    struct informer *inf;
    size_t adds, deletes, walked;
};

static void on_add(void *data, const char *key, const void *obj)
{
    struct model *m = data;

    if (!obj || informer_get(m->inf, key) != obj)
        abort();
    m->adds++;
}

static void on_update(void *data, const char *key, const void *old_obj, const void *new_obj)
{
    struct model *m = data;

    if (!old_obj || !new_obj || informer_get(m->inf, key) != new_obj)
        abort();
}

static void on_delete(void *data, const char *key, const void *old_obj)
{
    struct model *m = data;

    if (!old_obj || informer_get(m->inf, key) != NULL)
        abort();
    m->deletes++;
}

static void on_note(void *data, const struct informer_note *n)
{
    if (!n->op || !n->reason || !n->message || !n->rv || !n->key)
        abort();
}

static int walk(void *data, const char *key, const void *obj)
{
    struct model *m = data;
    const struct vmgroup *g = obj;

    if (!key[0] || strlen(key) > INFORMER_KEY_MAX || informer_get(m->inf, key) != obj || !g)
        abort();
    m->walked++;
    return 0;
}

static void check(struct model *m)
{
    struct informer_stats st;
    size_t n = informer_count(m->inf);

    if (m->adds - m->deletes != n)
        abort();
    informer_get_stats(m->inf, &st);
    if (st.objects != n)
        abort();
    m->walked = 0;
    informer_foreach(m->inf, walk, m);
    if (m->walked != n || strlen(informer_resource_version(m->inf)) > INFORMER_RV_MAX)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct model m = {0};
    struct informer_opts o = {
        .handlers = {.on_add = on_add, .on_update = on_update, .on_delete = on_delete, .data = &m},
        .on_note = on_note,
        .max_objects = 64,
    };
    uv_loop_t loop;
    char *text, *line, *save = NULL;
    int listing = 0;

    if (size > 256 * 1024)
        return 0;
    text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    vmgroup_informer_opts(&o);
    if (uv_loop_init(&loop) != 0 || informer_new(&loop, NULL, &o, &m.inf) != 0)
        abort();
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strcmp(line, "#LIST") == 0) {
            informer_testing_list_begin(m.inf);
            listing = 1;
        } else if (strcmp(line, "#END") == 0) {
            if (listing)
                informer_testing_list_end(m.inf);
            listing = 0;
        } else if (strcmp(line, "#STREAM") == 0) {
            if (listing)
                informer_testing_list_end(m.inf);
            listing = 0;
            informer_testing_stream_begin(m.inf);
        } else if (listing) {
            cJSON *page = cJSON_Parse(line);
            int r = informer_testing_list_page(m.inf, page);

            if (r != 0 && r != -ENOMEM)
                abort();
            cJSON_Delete(page);
        } else {
            int r = informer_testing_watch_line(m.inf, line);

            if (r > 0)
                abort();
        }
        check(&m);
    }
    if (listing) {
        informer_testing_list_end(m.inf);
        check(&m);
    }
    informer_close(m.inf, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&loop) != 0)
        abort();
    free(text);
    return 0;
}
