/* test_jsonbound.c: json_values_within bounds the values cJSON makes of a
 * text from above, and counts nothing inside strings. */
#include "tests/unit/unit.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "lib/jsonbound.h"

/* count is the number of values of the tree j. */
static size_t count(const cJSON *j)
{
    size_t n = 0;

    for (; j; j = j->next)
        n += 1 + count(j->child);
    return n;
}

/* The least max json_values_within accepts text with. */
static size_t bound_of(const char *text)
{
    size_t max = 1;

    while (!json_values_within(text, strlen(text), max))
        max++;
    return max;
}

static void test_bounds_what_cjson_makes(void **state)
{
    static const char *const texts[] = {
        "0",
        "\"s\"",
        "[]",
        "{}",
        "[0,1,2]",
        "{\"a\":1,\"b\":[true,false,null],\"c\":{\"d\":{}}}",
        "[[],[[]],{\"x\":[1,{\"y\":2}]}]",
        "{\"value\":[\"urn:1\",\"urn:2\",\"urn:3\"]}",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        cJSON *j = cJSON_Parse(texts[i]);

        assert_non_null(j);
        assert_true(bound_of(texts[i]) >= count(j));
        /* Tight where no container is empty. */
        if (!strstr(texts[i], "[]") && !strstr(texts[i], "{}"))
            assert_int_equal(bound_of(texts[i]), count(j));
        cJSON_Delete(j);
    }
}

static void test_strings_count_nothing(void **state)
{
    /* Brackets, commas and escaped quotes inside strings are text. */
    const char *t = "{\"k,[{\":\"v,,[[{{\\\",]}\",\"e\":\"\\\\\",\"f\":1}";
    cJSON *j = cJSON_Parse(t);

    (void)state;
    assert_non_null(j);
    assert_int_equal(count(j), 4);
    assert_int_equal(bound_of(t), 4);
    cJSON_Delete(j);
    /* A string left open counts nothing after its quote. */
    assert_true(json_values_within("[\"a,b,c,d", 9, 2));
    assert_true(json_values_within(NULL, 0, 1));
}

static void test_refuses_a_flood(void **state)
{
    size_t n = 1000000, len = 2 * n + 1;
    char *t = malloc(len + 1);

    (void)state;
    assert_non_null(t);
    t[0] = '[';
    for (size_t i = 0; i < n; i++) {
        t[1 + 2 * i] = '0';
        t[2 + 2 * i] = ',';
    }
    t[len - 1] = ']';
    t[len] = '\0';
    /* A million elements: refused below a million, accepted above. */
    assert_false(json_values_within(t, len, 1000));
    assert_false(json_values_within(t, len, n));
    assert_true(json_values_within(t, len, n + 1));
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds_what_cjson_makes),
        cmocka_unit_test(test_strings_count_nothing),
        cmocka_unit_test(test_refuses_a_flood),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
