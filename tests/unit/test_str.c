/* test_str.c: bounded formatting and NULL-safe comparison. */
#include "tests/unit/unit.h"

#include <string.h>

#include "lib/str.h"

static void test_putf_cuts_what_does_not_fit(void **state)
{
    char buf[8];

    (void)state;
    memset(buf, 'x', sizeof(buf));
    vmg_putf(buf, sizeof(buf), "%s-%d", "abc", 42);
    assert_string_equal(buf, "abc-42");
    vmg_putf(buf, sizeof(buf), "%s", "a name that is far too long");
    assert_string_equal(buf, "a name ");
    assert_int_equal(strlen(buf), sizeof(buf) - 1);
}

static void test_putf_without_a_buffer(void **state)
{
    char buf[4] = "abc";

    (void)state;
    vmg_putf(NULL, 16, "%s", "nowhere");
    vmg_putf(buf, 0, "%s", "nothing");
    assert_string_equal(buf, "abc");
}

static void test_streq_counts_null_as_empty(void **state)
{
    (void)state;
    assert_true(vmg_streq(NULL, NULL));
    assert_true(vmg_streq(NULL, ""));
    assert_true(vmg_streq("a", "a"));
    assert_false(vmg_streq("a", NULL));
    assert_false(vmg_streq("a", "b"));
    assert_string_equal(vmg_nz(NULL), "");
    assert_string_equal(vmg_nz("x"), "x");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_putf_cuts_what_does_not_fit),
        cmocka_unit_test(test_putf_without_a_buffer),
        cmocka_unit_test(test_streq_counts_null_as_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
