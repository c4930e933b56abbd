/* test_jsonwipe.c: json_wipe leaves no byte of any string or key of a
 * parsed tree, past an escaped NUL too; json_parse_secret wipes what cJSON
 * frees of a malformed text. */
#include "tests/unit/unit.h"

#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "lib/jsonwipe.h"

/* zero tells whether every byte of the block of s is 0. */
static bool zero(const char *s)
{
    size_t n = malloc_usable_size((void *)s);

    for (size_t i = 0; i < n; i++)
        if (s[i])
            return false;
    return n > 0;
}

static void test_wipes_past_an_escaped_nul(void **state)
{
    cJSON *j = cJSON_Parse("{\"metadata\":{\"annotations\":{\"last-applied\":\"a\\u0000secret\"}},"
                           "\"data\":{\"user-data\":\"c2VjcmV0\"},\"list\":[\"x\",{\"k\":\"v\"}]}");
    cJSON *ann, *ud, *list;

    (void)state;
    assert_non_null(j);
    ann = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(j, "metadata"), "annotations"), "last-applied");
    ud = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "data"), "user-data");
    list = cJSON_GetObjectItem(j, "list");
    assert_non_null(ann);
    assert_non_null(ud);
    /* cJSON keeps the bytes after the NUL: a wipe up to strlen misses them. */
    assert_memory_equal(ann->valuestring, "a\0secret", 8);
    json_wipe(j);
    assert_true(zero(ann->valuestring));
    assert_true(zero(ann->string));
    assert_true(zero(ud->valuestring));
    assert_true(zero(ud->string));
    assert_true(zero(list->child->valuestring));
    assert_true(zero(list->child->next->child->string));
    assert_true(zero(list->child->next->child->valuestring));
    cJSON_Delete(j);
    json_wipe(NULL);
}

/* cJSON's free in this test: how many blocks it freed held looking. */
static const char *looking;
static int held;

static void hook_free(void *p)
{
    if (p && looking && memmem(p, malloc_usable_size(p), looking, strlen(looking)))
        held++;
    free(p);
}

/* Texts that cJSON gives up on after it has parsed a secret: each block it
 * frees is wiped before it reaches the free of the hooks given (which
 * json_parse_secret's own free calls, and which would be cJSON's own were
 * json_parse_secret's missing). */
static void test_malformed_secret_wiped(void **state)
{
    static const char *const texts[] = {
        "{\"status\":{\"token\":\"SECRET-TOKEN-1\"}",
        "{\"status\":{\"token\":\"SECRET-TOKEN-1\"},",
        "{\"a\":\"SECRET-TOKEN-1\",}",
        "{\"SECRET-TOKEN-1\":1,\"b\":\"x\\q\"}",
        "[\"SECRET-TOKEN-1\",\"x\\u00\"]",
    };
    cJSON_Hooks hooks = {.malloc_fn = malloc, .free_fn = hook_free};
    cJSON *j;

    (void)state;
    json_hooks_set(&hooks);
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        looking = "SECRET-TOKEN-1";
        held = 0;
        assert_null(json_parse_secret(texts[i], strlen(texts[i])));
        looking = NULL;
        if (held)
            fail_msg("text %zu: %d blocks freed holding the secret", i, held);
    }
    /* A text that parses: its tree is the caller's, to wipe. */
    j = json_parse_secret("{\"k\":\"v\"}", 9);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "k")->valuestring, "v");
    json_wipe(j);
    cJSON_Delete(j);
    json_hooks_set(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wipes_past_an_escaped_nul),
        cmocka_unit_test(test_malformed_secret_wiped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
