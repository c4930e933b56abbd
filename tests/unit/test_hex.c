/* test_hex.c: hex digits and random UUIDs. */
#include "tests/unit/unit.h"

#include <string.h>

#include "lib/hex.h"

static void test_hex(void **state)
{
    char out[16];

    (void)state;
    memset(out, 'x', sizeof(out));
    vmg_hex("", 0, out);
    assert_string_equal(out, "");
    vmg_hex("\x00\x01\x7f\x80\xab\xff", 6, out);
    assert_string_equal(out, "00017f80abff");
    assert_int_equal(out[13], 'x'); /* 2 * len + 1 written, no more */
}

/* Version 4, variant 10, lowercase, dashes where a UUID has them; two in a
 * row differ. */
static void test_uuid_random(void **state)
{
    char a[VMG_UUID_LEN + 2], b[VMG_UUID_LEN + 1];

    (void)state;
    memset(a, 'x', sizeof(a));
    assert_int_equal(vmg_uuid_random(a), 0);
    assert_int_equal(strlen(a), VMG_UUID_LEN);
    for (size_t i = 0; i < VMG_UUID_LEN; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23)
            assert_int_equal(a[i], '-');
        else
            assert_non_null(strchr("0123456789abcdef", a[i]));
    }
    assert_int_equal(a[14], '4');
    assert_non_null(strchr("89ab", a[19]));
    assert_int_equal(a[VMG_UUID_LEN + 1], 'x');
    assert_int_equal(vmg_uuid_random(b), 0);
    assert_string_not_equal(a, b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hex),
        cmocka_unit_test(test_uuid_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
