/* test_b64.c: base64 as RFC 4648 writes it, with its bounds, and read
 * back. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "lib/b64.h"
#include "lib/err.h"

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

/* Read back: RFC 4648's vectors, bytes that are not text, whitespace
 * anywhere (a kubeconfig's folded lines). */
static void test_decode(void **state)
{
    static const struct {
        const char *in, *out;
        size_t len;
    } v[] = {
        {"Zg==", "f", 1},
        {"Zm8=", "fo", 2},
        {"Zm9v", "foo", 3},
        {"Zm9vYg==", "foob", 4},
        {"Zm9vYmE=", "fooba", 5},
        {"Zm9vYmFy", "foobar", 6},
        {"AP/+", "\0\xff\xfe", 3},
        {" Zm9v\nYmFy\r\n", "foobar", 6},
        {"Zm\t9vYg =\n=", "foob", 4},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char *out = NULL;
        size_t n = 99;
        assert_int_equal(vmg_b64_decode_alloc(v[i].in, strlen(v[i].in), &out, &n), 0);
        assert_int_equal(n, v[i].len);
        assert_memory_equal(out, v[i].out, n);
        assert_int_equal(out[n], '\0');
        assert_int_equal(vmg_b64_decoded_len(v[i].in, strlen(v[i].in)),
                         strchr(v[i].in, ' ') || strchr(v[i].in, '\n') ? -1 : (long)n);
        free(out);
    }
}

/* Not base64: padding anywhere but at the end, more than two of it, a
 * character out of the alphabet, a length not a multiple of 4, nothing. */
static void test_decode_refuses(void **state)
{
    static const char *const bad[] = {
        "", " \n", "Zg=", "Zm9", "Z===", "=AAA", "Zg=a", "Zg==Zg==", "Zm9v!mFy", "Zm9v-_==",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *out = (char *)"untouched";
        size_t n = 7;
        assert_int_equal(vmg_b64_decode_alloc(bad[i], strlen(bad[i]), &out, &n), VMG_EPARSE);
        assert_string_equal(out, "untouched");
        assert_int_equal(n, 7);
        assert_int_equal(vmg_b64_decoded_len(bad[i], strlen(bad[i])), bad[i][0] ? -1 : 0);
    }
    assert_int_equal(vmg_b64_decode_alloc(NULL, 4, NULL, NULL), VMG_EPARSE);
}

/* OpenSSL's frees, looked at: no block it frees may hold the text decoded
 * (its context-based decoder kept the text's tail and freed it unwiped). */
static const char *looking;
static int held;

static void *m_alloc(size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    return malloc(n);
}

static void *m_realloc(void *p, size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    return realloc(p, n);
}

static void m_free(void *p, const char *file, int line)
{
    (void)file;
    (void)line;
    if (p && looking && memmem(p, malloc_usable_size(p), looking, strlen(looking)))
        held++;
    free(p);
}

static void test_decode_leaves_nothing(void **state)
{
    /* The base64 of a PEM key's line, as in client-key-data. */
    static const char text[] =
        "TUlJRXZnSUJBREFOQmdrcWhraUc5dzBCQVFFRkFBU0NCS2d3Z2dTa0FnRUFBb0lCQVFD";
    char *out = NULL;
    size_t n;

    (void)state;
    looking = "SUJBREFOQmdrcWhraUc5dzBCQVFFRkFB"; /* within its first 64 */
    held = 0;
    assert_int_equal(vmg_b64_decode_alloc(text, strlen(text), &out, &n), 0);
    assert_int_equal(n, 51);
    free(out);
    looking = NULL;
    assert_int_equal(held, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_decode_refuses),
        cmocka_unit_test(test_decode_leaves_nothing),
    };

    /* Before any allocation of OpenSSL's, or it refuses. */
    if (!CRYPTO_set_mem_functions(m_alloc, m_realloc, m_free))
        return 1;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
