/* test_jsonarena.c: trees parsed into an arena read like any other, are
 * freed together, and leave cJSON's own allocation as it was. */
#include "tests/unit/unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/jsonarena.h"

static void test_parse_read_reset(void **state)
{
    struct json_arena *a = json_arena_new();
    const char *text =
        "{\"kind\":\"VmGroupList\",\"items\":[{\"n\":1},{\"n\":2}],\"s\":\"x\\u00e9\"}";
    cJSON *t, *items, *it;
    int sum = 0;

    (void)state;
    assert_non_null(a);
    t = json_arena_parse(a, text, strlen(text));
    assert_non_null(t);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(t, "kind")), "VmGroupList");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(t, "s")), "x\xc3\xa9");
    items = cJSON_GetObjectItem(t, "items");
    cJSON_ArrayForEach(it, items) sum += cJSON_GetObjectItem(it, "n")->valueint;
    assert_int_equal(sum, 3);
    assert_true(json_arena_bytes(a) > 0);
    json_arena_reset(a);
    assert_int_equal(json_arena_bytes(a), 0);
    /* Not JSON: NULL, and the arena is still usable. */
    assert_null(json_arena_parse(a, "{\"a\":", 5));
    t = json_arena_parse(a, "[1,2,3]", 7);
    assert_int_equal(cJSON_GetArraySize(t), 3);
    json_arena_free(a);
    json_arena_free(NULL);
}

/* After a parse, cJSON allocates with malloc again: a tree made and
 * deleted the usual way is fine (ASan would see a wrong free). */
static void test_hooks_restored(void **state)
{
    struct json_arena *a = json_arena_new();
    cJSON *o;
    char *s;

    (void)state;
    assert_non_null(json_arena_parse(a, "{}", 2));
    o = cJSON_CreateObject();
    assert_non_null(o);
    assert_non_null(cJSON_AddStringToObject(o, "k", "v"));
    s = cJSON_PrintUnformatted(o);
    assert_string_equal(s, "{\"k\":\"v\"}");
    free(s);
    cJSON_Delete(o);
    json_arena_free(a);
}

/* Many pages, with strings bigger than a block: all of it is held in the
 * arena until a reset, and given back then. */
static void test_big_pages(void **state)
{
    struct json_arena *a = json_arena_new();
    size_t n = 300 * 1024;
    char *text = malloc(n + 16);
    cJSON *t;

    (void)state;
    assert_non_null(text);
    text[0] = '"';
    memset(text + 1, 'a', n);
    text[n + 1] = '"';
    for (int round = 0; round < 3; round++) {
        t = json_arena_parse(a, text, n + 2);
        assert_non_null(t);
        assert_int_equal(strlen(cJSON_GetStringValue(t)), n);
        assert_true(json_arena_bytes(a) >= n);
        json_arena_reset(a);
    }
    {
        /* Thousands of small nodes over several blocks. */
        size_t cap = 4u << 20, len = 0;
        char *arr = malloc(cap);
        assert_non_null(arr);
        arr[len++] = '[';
        for (int i = 0; i < 50000; i++)
            len += (size_t)snprintf(arr + len, cap - len, "%s{\"i\":%d}", i ? "," : "", i);
        arr[len++] = ']';
        t = json_arena_parse(a, arr, len);
        assert_int_equal(cJSON_GetArraySize(t), 50000);
        assert_int_equal(cJSON_GetArrayItem(t, 49999)->child->valueint, 49999);
        assert_true(json_arena_bytes(a) > 256u * 1024u);
        free(arr);
    }
    json_arena_free(a);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_read_reset),
        cmocka_unit_test(test_hooks_restored),
        cmocka_unit_test(test_big_pages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
