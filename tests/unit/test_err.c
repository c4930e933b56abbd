/* test_err.c: every error code has its own description. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <string.h>

#include "lib/err.h"

static void test_codes_are_named(void **state)
{
    (void)state;
    assert_string_equal(vmg_strerror(VMG_ENOTFOUND), "not found");
    assert_string_equal(vmg_strerror(VMG_EGONE), "resource version too old");
    assert_string_equal(vmg_strerror(-ENOMEM), strerror(ENOMEM));
    assert_string_equal(vmg_strerror(-999999), "unknown error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codes_are_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
