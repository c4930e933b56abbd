/* test_jsonwipe.c: json_wipe leaves no byte of any string or key of a
 * parsed tree, past an escaped NUL too. */
#include "tests/unit/unit.h"

#include <malloc.h>
#include <stdbool.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wipes_past_an_escaped_nul),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
