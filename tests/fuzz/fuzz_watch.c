/* fuzz_watch.c: libFuzzer target for what the API server sends the
 * client: a watch stream, framed into lines by the HTTP client (lib/http.c)
 * from pieces cut as the network might cut them, each line decoded as a
 * watch event (informer_parse_event, its Status when an ERROR); a list
 * page decoded as the client does (json_arena_parse), its items' keys and
 * its Status; and an error body's Status and a Retry-After value.
 *
 * An input is two bytes, the HTTP status (an index into a table) and a
 * seed for the sizes of the pieces, then the body.
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

#include "kube/informer.h"
#include "kube/kube.h"
#include "lib/err.h"
#include "lib/http.h"
#include "lib/jsonarena.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The bound of one line (the client's is 16 MiB): small, to reach it. */
#define MAX_LINE 4096

struct framing {
    size_t lines, bytes;
};

static void fits(const char *s, size_t size)
{
    if (strnlen(s, size) == size)
        abort();
}

static void check_status(const struct kube_status *st, long http)
{
    fits(st->reason, sizeof(st->reason));
    fits(st->message, sizeof(st->message));
    fits(st->cause_field, sizeof(st->cause_field));
    if (st->err > 0 || (http >= 300 && st->err == 0))
        abort();
}

static int on_line(void *data, const char *line, size_t len)
{
    struct framing *f = data;
    struct informer_event ev;
    char key[INFORMER_KEY_MAX + 1];

    if (len > MAX_LINE || line[len] != '\0' || memchr(line, '\n', len))
        abort();
    f->lines++;
    f->bytes += len;
    if (informer_parse_event(line, len, &ev) != 0)
        return 0;
    if (ev.type < INFORMER_EV_ADDED || ev.type > INFORMER_EV_ERROR || !ev.object || !ev.rv)
        abort();
    if (ev.initial_end && ev.type != INFORMER_EV_BOOKMARK)
        abort();
    if (ev.type == INFORMER_EV_ERROR)
        check_status(&ev.status, 0);
    if (informer_key_of(ev.object, key, sizeof(key)) == 0 &&
        (!key[0] || strlen(key) > INFORMER_KEY_MAX))
        abort();
    informer_event_clear(&ev);
    return 0;
}

static void check_page(const char *body, size_t len, long http)
{
    struct json_arena *a = json_arena_new();
    struct kube_status st;
    char key[INFORMER_KEY_MAX + 1];
    const cJSON *page, *item;

    if (!a)
        return;
    page = json_arena_parse(a, body, len);
    kube_status_decode(page, http, &st);
    check_status(&st, http);
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(page, "items"))
    {
        if (informer_key_of(item, key, sizeof(key)) == 0 && !key[0])
            abort();
    }
    json_arena_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const long statuses[] = {200, 200, 200, 201, 410, 429, 500, 503, 401, 404};
    struct framing f = {0};
    const char *body, *p, *end;
    size_t body_len, newlines = 0;
    unsigned seed;
    long http;
    vmg_http_xfer *x;
    int err = 0;

    if (size < 2 || size > 256 * 1024)
        return 0;
    http = statuses[data[0] % (sizeof(statuses) / sizeof(statuses[0]))];
    seed = data[1];
    p = (const char *)data + 2;
    end = (const char *)data + size;

    x = vmg_http_testing_xfer(MAX_LINE, on_line, &f);
    if (!x)
        return 0;
    while (p < end && err == 0) {
        size_t n;

        seed = seed * 1103515245u + 12345u;
        n = 1 + (seed >> 16) % (seed & 1 ? 7 : 700);
        if (n > (size_t)(end - p))
            n = (size_t)(end - p);
        err = vmg_http_testing_body(x, http, p, n);
        p += n;
    }
    if (err == 0)
        err = vmg_http_testing_end(x, &body, &body_len);
    if (err != 0 && err != VMG_ETOOBIG)
        abort();
    for (const uint8_t *q = data + 2; q < data + size; q++)
        newlines += *q == '\n';
    if (http >= 200 && http < 300) {
        /* Streamed: every line went to on_line, nothing was kept. */
        if (err == 0 && (body_len != 0 || f.lines < newlines || f.lines > newlines + 1 ||
                         f.bytes + newlines > size - 2))
            abort();
    } else if (err == 0) {
        cJSON *obj;
        struct kube_status st;

        if (f.lines != 0 || body_len != size - 2 || memcmp(body, data + 2, body_len) != 0)
            abort();
        obj = cJSON_ParseWithLength(body, body_len);
        kube_status_decode(obj, http, &st);
        check_status(&st, http);
        cJSON_Delete(obj);
    }
    vmg_http_testing_xfer_free(x);

    /* The same bytes as a page of a list, and its first line as a
     * Retry-After value. */
    check_page((const char *)data + 2, size - 2, http);
    if (size < 512) {
        char v[512];
        const char *nl = memchr(data + 2, '\n', size - 2);
        size_t n = nl ? (size_t)(nl - (const char *)data) - 2 : size - 2;
        unsigned s = 0;

        memcpy(v, data + 2, n);
        v[n] = '\0';
        if (kube_parse_retry_after(v, 1700000000, &s) == 0 && s > KUBE_RETRY_AFTER_MAX_S)
            abort();
    }
    return 0;
}
