/* test_b64.c: base64 as RFC 4648 writes it, with its bounds. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/b64.h"

/* RFC 4648, section 10, and bytes that are not text. */
static void test_vectors(void **state)
{
    static const struct {
        const char *in;
        size_t len;
        const char *out;
    } v[] = {
        {"", 0, ""},
        {"f", 1, "Zg=="},
        {"fo", 2, "Zm8="},
        {"foo", 3, "Zm9v"},
        {"foob", 4, "Zm9vYg=="},
        {"fooba", 5, "Zm9vYmE="},
        {"foobar", 6, "Zm9vYmFy"},
        {"\0\xff\xfe", 3, "AP/+"},
        {"user:pa ss\xc3\xa9", 12, "dXNlcjpwYSBzc8Op"},
    };
    char buf[64];

    (void)state;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char *a;
        memset(buf, 'x', sizeof(buf));
        assert_int_equal(vmg_b64_encode(v[i].in, v[i].len, buf, sizeof(buf)), strlen(v[i].out));
        assert_string_equal(buf, v[i].out);
        assert_int_equal(VMG_B64_LEN(v[i].len), strlen(v[i].out));
        a = vmg_b64_encode_alloc(v[i].in, v[i].len);
        assert_non_null(a);
        assert_string_equal(a, v[i].out);
        free(a);
    }
}

/* A buffer one byte short is refused and left as it was; the exact size
 * is enough. */
static void test_bounds(void **state)
{
    char buf[9];

    (void)state;
    memset(buf, 'x', sizeof(buf));
    assert_int_equal(vmg_b64_encode("foobar", 6, buf, 8), -ENOSPC);
    assert_memory_equal(buf, "xxxxxxxxx", 9);
    assert_int_equal(vmg_b64_encode("foobar", 6, buf, 9), 8);
    assert_string_equal(buf, "Zm9vYmFy");
    assert_int_equal(vmg_b64_encode("", 0, buf, 0), -ENOSPC);
    assert_int_equal(vmg_b64_encode(NULL, 1, buf, sizeof(buf)), -EINVAL);
    assert_int_equal(vmg_b64_encode("f", 1, NULL, 5), -EINVAL);
    assert_int_equal(vmg_b64_encode("f", (size_t)-1, buf, sizeof(buf)), -EINVAL);
    assert_null(vmg_b64_encode_alloc("f", (size_t)-1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
