/* test_clock.c: timestamps as the API server writes them. */
#include "tests/unit/unit.h"

#include <string.h>

#include "lib/clock.h"

static void test_rfc3339(void **state)
{
    char buf[32];

    (void)state;
    vmg_rfc3339(0, buf, sizeof(buf));
    assert_string_equal(buf, "1970-01-01T00:00:00Z");
    vmg_rfc3339(1795334400999999LL, buf, sizeof(buf)); /* microseconds are cut */
    assert_string_equal(buf, "2026-11-22T08:00:00Z");
    vmg_rfc3339(-1, buf, sizeof(buf));
    assert_string_equal(buf, "1970-01-01T00:00:00Z");
}

static void test_clocks_move(void **state)
{
    (void)state;
    uint64_t m = vmg_clock_mono_ms(NULL);
    int64_t w = vmg_clock_wall_us(NULL);
    assert_true(w > 1700000000LL * 1000000); /* after 2023 */
    assert_true(vmg_clock_mono_ms(NULL) >= m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc3339),
        cmocka_unit_test(test_clocks_move),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
