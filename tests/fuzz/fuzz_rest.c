/* fuzz_rest.c: libFuzzer target for the vCenter REST (vAPI) answers the
 * tagging client decodes: a session id, id lists, a category, a tag, the
 * objects a tag is attached to, and error bodies. Each input goes to every
 * decoder, as a body that is not NUL-terminated. What decodes must hold
 * ids that may go in a URL and strings that fit their fields; what does
 * not must leave the outputs alone.
 *
 * fuzz-sources: vsphere/rest_json.c vsphere/rest_tags.c
 * fuzz-sources: lib/jsonbound.c lib/jsonwipe.c
 * fuzz-sources: vsphere/rest.c lib/http.c lib/err.c lib/log.c lib/secretfile.c lib/str.c lib/file.c
 * fuzz-sources: lib/buf.c lib/backoff.c lib/bucket.c lib/clock.c lib/b64.c
 * fuzz-seeds: tests/unit/fixtures/rest/*.json
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "vsphere/rest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fits(const char *s, size_t size)
{
    if (strnlen(s, size) == size)
        abort();
}

static void result(int r)
{
    if (r != 0 && r != VMG_EPARSE && r != -ENOMEM)
        abort();
}

static void check_id(const char *id)
{
    if (!vs_rest_valid_id(id))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct vs_rest_category cat, cat0;
    struct vs_rest_tag tag, tag0;
    struct vs_rest_object *objs = NULL;
    char **ids = NULL, id[VS_REST_ID_MAX + 1], small[8], type[64], msg[VS_REST_MSG_MAX];
    size_t n = 7;
    char *body;
    int r;

    if (size > (1u << 20))
        return 0;
    /* Exactly size bytes: a decoder that reads past them is caught. */
    body = malloc(size ? size : 1);
    if (!body)
        return 0;
    memcpy(body, data, size);

    memset(id, 'x', sizeof(id));
    r = vs_rest_parse_string(body, size, id, sizeof(id));
    result(r);
    if (r == 0) {
        fits(id, sizeof(id));
        check_id(id);
    } else if (id[0] != 'x') {
        abort();
    }
    memset(small, 'x', sizeof(small));
    r = vs_rest_parse_string(body, size, small, sizeof(small));
    result(r);
    if (r == 0)
        fits(small, sizeof(small));

    r = vs_rest_parse_ids(body, size, &ids, &n);
    result(r);
    if (r == 0) {
        if (n > VS_REST_MAX_IDS || (n && !ids))
            abort();
        for (size_t i = 0; i < n; i++)
            check_id(ids[i]);
        vs_rest_ids_free(ids, n);
    } else if (ids || n != 7) {
        abort();
    }

    memset(&cat0, 'c', sizeof(cat0));
    cat = cat0;
    r = vs_rest_parse_category(body, size, &cat);
    result(r);
    if (r == 0) {
        check_id(cat.id);
        fits(cat.name, sizeof(cat.name));
        fits(cat.cardinality, sizeof(cat.cardinality));
    } else if (memcmp(&cat, &cat0, sizeof(cat)) != 0) {
        abort();
    }

    memset(&tag0, 't', sizeof(tag0));
    tag = tag0;
    r = vs_rest_parse_tag(body, size, &tag);
    result(r);
    if (r == 0) {
        /* The category id is only compared with the client's own. */
        check_id(tag.id);
        fits(tag.category_id, sizeof(tag.category_id));
        fits(tag.name, sizeof(tag.name));
    } else if (memcmp(&tag, &tag0, sizeof(tag)) != 0) {
        abort();
    }

    n = 7;
    r = vs_rest_parse_objects(body, size, &objs, &n);
    result(r);
    if (r == 0) {
        if (n > VS_REST_MAX_IDS || (n && !objs))
            abort();
        for (size_t i = 0; i < n; i++) {
            fits(objs[i].type, sizeof(objs[i].type));
            fits(objs[i].id, sizeof(objs[i].id));
        }
        free(objs);
    } else if (objs || n != 7) {
        abort();
    }

    memset(type, 'x', sizeof(type));
    memset(msg, 'x', sizeof(msg));
    vs_rest_parse_error(body, size, type, sizeof(type), msg, sizeof(msg));
    fits(type, sizeof(type));
    fits(msg, sizeof(msg));
    vs_rest_parse_error(body, size, small, sizeof(small), small, 1);
    fits(small, sizeof(small));

    free(body);
    return 0;
}
