/* test_buf.c: the bounded buffer: appends and NUL, the bound, sticky
 * errors, in-place reads, steal, and that a VMG_BUF_WIPE buffer wipes every
 * block it gives back (seen through the free hook). */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/err.h"

/* What the free hook saw: how many blocks, bytes, and whether any byte
 * of a freed block was not zero. */
struct seen {
    size_t blocks;
    size_t bytes;
    size_t dirty_blocks;
};

static void hook(const void *p, size_t n, void *data)
{
    struct seen *s = data;
    const unsigned char *c = p;

    s->blocks++;
    s->bytes += n;
    for (size_t i = 0; i < n; i++) {
        if (c[i]) {
            s->dirty_blocks++;
            break;
        }
    }
}

static int teardown(void **state)
{
    (void)state;
    vmg_buf_testing_hook(NULL, NULL);
    return 0;
}

static void test_append_keeps_a_string(void **state)
{
    struct vmg_buf b;

    (void)state;
    vmg_buf_init(&b, 1024, 0);
    assert_string_equal(vmg_buf_str(&b), "");
    assert_int_equal(vmg_buf_len(&b), 0);
    assert_int_equal(vmg_buf_append(&b, "", 0), 0); /* nothing: no block yet */
    assert_null(b.data);
    assert_int_equal(vmg_buf_append_fmt(&b, "%s", ""), 0); /* an empty format, too */
    assert_null(b.data);
    assert_string_equal(vmg_buf_str(&b), "");
    assert_int_equal(vmg_buf_append(&b, "abc", 3), 0);
    assert_int_equal(vmg_buf_append_str(&b, "-de"), 0);
    assert_int_equal(vmg_buf_append_fmt(&b, "/%d/%s", 42, "x"), 0);
    assert_int_equal(vmg_buf_append(&b, NULL, 0), 0);
    assert_string_equal(vmg_buf_str(&b), "abc-de/42/x");
    assert_int_equal(vmg_buf_len(&b), 11);
    /* Binary content is kept whole, still followed by a NUL. */
    assert_int_equal(vmg_buf_append(&b, "\0z", 2), 0);
    assert_int_equal(vmg_buf_len(&b), 13);
    assert_memory_equal(b.data + 11, "\0z\0", 3);
    vmg_buf_truncate(&b, 3);
    assert_string_equal(vmg_buf_str(&b), "abc");
    vmg_buf_truncate(&b, 100); /* longer than held: nothing */
    assert_int_equal(vmg_buf_len(&b), 3);
    vmg_buf_reset(&b);
    assert_string_equal(vmg_buf_str(&b), "");
    assert_non_null(b.data); /* memory kept for reuse */
    vmg_buf_free(&b);
    assert_null(b.data);
    vmg_buf_free(NULL);
}

static void test_grows_past_many_blocks(void **state)
{
    struct vmg_buf b;
    char chunk[1000];

    (void)state;
    memset(chunk, 'q', sizeof(chunk));
    vmg_buf_init(&b, 1 << 20, 0);
    for (int i = 0; i < 100; i++)
        assert_int_equal(vmg_buf_append(&b, chunk, sizeof(chunk)), 0);
    assert_int_equal(vmg_buf_len(&b), 100000);
    assert_int_equal(b.data[99999], 'q');
    assert_int_equal(b.data[100000], '\0');
    /* Growth doubles: far fewer blocks than appends, and never past max + 1. */
    assert_true(b.alloc >= 100001 && b.alloc <= (1 << 20) + 1);
    vmg_buf_free(&b);
}

static void test_bound_is_exact_and_sticky(void **state)
{
    struct vmg_buf b;

    (void)state;
    vmg_buf_init(&b, 8, 0);
    assert_int_equal(vmg_buf_append(&b, "12345678", 8), 0); /* exactly max */
    assert_int_equal(b.alloc, 9);                           /* never beyond max + 1 */
    assert_int_equal(vmg_buf_append(&b, "9", 1), VMG_ETOOBIG);
    assert_int_equal(vmg_buf_err(&b), VMG_ETOOBIG);
    /* Sticky: later appends fail too and change nothing, even empty ones. */
    assert_int_equal(vmg_buf_append(&b, "", 0), VMG_ETOOBIG);
    assert_int_equal(vmg_buf_append_fmt(&b, "%d", 1), VMG_ETOOBIG);
    assert_int_equal(vmg_buf_reserve(&b, 0), VMG_ETOOBIG);
    assert_string_equal(vmg_buf_str(&b), "12345678");
    assert_null(vmg_buf_steal(&b, NULL));
    /* Reset forgets it. */
    vmg_buf_reset(&b);
    assert_int_equal(vmg_buf_err(&b), 0);
    assert_int_equal(vmg_buf_append_fmt(&b, "%s", "123456789"), VMG_ETOOBIG);
    assert_int_equal(vmg_buf_len(&b), 0); /* a failed append adds nothing */
    vmg_buf_reset(&b);
    /* A length that would overflow is refused, not wrapped. */
    assert_int_equal(vmg_buf_append(&b, "a", 1), 0);
    assert_int_equal(vmg_buf_reserve(&b, SIZE_MAX), VMG_ETOOBIG);
    vmg_buf_free(&b);
    /* A max too large to double is cut. */
    vmg_buf_init(&b, SIZE_MAX, 0);
    assert_true(b.max < SIZE_MAX / 2);
    assert_int_equal(vmg_buf_reserve(&b, SIZE_MAX - 1), VMG_ETOOBIG);
}

static void test_prepare_and_commit(void **state)
{
    struct vmg_buf b;
    size_t room = 0;
    char *p;

    (void)state;
    vmg_buf_init(&b, 10, 0);
    p = vmg_buf_prepare(&b, 4, &room);
    assert_non_null(p);
    assert_true(room >= 4 && room <= 10);
    memcpy(p, "abcd", 4);
    vmg_buf_commit(&b, 4);
    assert_string_equal(vmg_buf_str(&b), "abcd");
    /* Room is never more than the bound leaves. */
    p = vmg_buf_prepare(&b, 100, &room);
    assert_non_null(p);
    assert_int_equal(room, 6);
    memcpy(p, "efghij", 6);
    vmg_buf_commit(&b, 6);
    assert_string_equal(vmg_buf_str(&b), "abcdefghij");
    /* Full: no room at all is an error. */
    assert_null(vmg_buf_prepare(&b, 0, &room));
    assert_int_equal(vmg_buf_err(&b), VMG_ETOOBIG);
    vmg_buf_free(&b);
    /* want 0 asks for any room, at least a byte. */
    vmg_buf_init(&b, 1 << 20, 0);
    p = vmg_buf_prepare(&b, 0, &room);
    assert_non_null(p);
    assert_true(room >= 1 && room < (1 << 20));
    vmg_buf_commit(&b, 0);
    assert_string_equal(vmg_buf_str(&b), "");
    vmg_buf_free(&b);
}

static void test_steal(void **state)
{
    struct vmg_buf b;
    size_t len = 99;
    char *s;

    (void)state;
    vmg_buf_init(&b, 100, 0);
    s = vmg_buf_steal(&b, &len); /* empty: an empty string, not NULL */
    assert_non_null(s);
    assert_string_equal(s, "");
    assert_int_equal(len, 0);
    free(s);
    assert_int_equal(vmg_buf_append_str(&b, "token"), 0);
    s = vmg_buf_steal(&b, &len);
    assert_string_equal(s, "token");
    assert_int_equal(len, 5);
    assert_null(b.data);
    assert_int_equal(vmg_buf_len(&b), 0);
    free(s);
    /* The buffer is reusable, with its bound. */
    assert_int_equal(vmg_buf_append_str(&b, "again"), 0);
    assert_string_equal(vmg_buf_str(&b), "again");
    vmg_buf_free(&b);
}

static void test_wipe_on_growth_reset_and_free(void **state)
{
    struct seen seen = {0};
    struct vmg_buf b;
    char secret[300];

    (void)state;
    memset(secret, 's', sizeof(secret));
    vmg_buf_testing_hook(hook, &seen);
    vmg_buf_init(&b, 1 << 16, VMG_BUF_WIPE);
    assert_int_equal(vmg_buf_append(&b, secret, 200), 0);
    assert_int_equal(seen.blocks, 0);
    /* Growing moves the bytes and wipes the old block. */
    assert_int_equal(vmg_buf_append(&b, secret, 300), 0);
    assert_int_equal(seen.blocks, 1);
    assert_int_equal(seen.dirty_blocks, 0);
    assert_int_equal(vmg_buf_len(&b), 500);
    assert_int_equal(b.data[499], 's');
    /* Truncating and resetting wipe what they cut. */
    vmg_buf_truncate(&b, 10);
    for (size_t i = 10; i < 500; i++)
        assert_int_equal(b.data[i], '\0');
    vmg_buf_reset(&b);
    for (size_t i = 0; i < 500; i++)
        assert_int_equal(b.data[i], '\0');
    /* Freeing wipes the whole block. */
    assert_int_equal(vmg_buf_append_fmt(&b, "%s", "password"), 0);
    size_t alloc = b.alloc;
    vmg_buf_free(&b);
    assert_int_equal(seen.blocks, 2);
    assert_int_equal(seen.dirty_blocks, 0);
    assert_int_equal(seen.bytes, 256 + alloc);
}

static void test_no_wipe_without_the_flag(void **state)
{
    struct seen seen = {0};
    struct vmg_buf b;

    (void)state;
    vmg_buf_testing_hook(hook, &seen);
    vmg_buf_init(&b, 1 << 16, 0);
    assert_int_equal(vmg_buf_append_str(&b, "not a secret"), 0);
    vmg_buf_free(&b);
    /* The hook sees the block, content intact: the check above is real. */
    assert_int_equal(seen.blocks, 1);
    assert_int_equal(seen.dirty_blocks, 1);
}

static void test_wipe_helpers(void **state)
{
    char s[8] = "secret!";

    (void)state;
    vmg_wipe(s, sizeof(s));
    for (size_t i = 0; i < sizeof(s); i++)
        assert_int_equal(s[i], 0);
    vmg_wipe(NULL, 10);
    vmg_wipe_free(NULL, 10);
    char *p = strdup("x");
    assert_non_null(p);
    vmg_wipe_free(p, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_append_keeps_a_string, teardown),
        cmocka_unit_test_teardown(test_grows_past_many_blocks, teardown),
        cmocka_unit_test_teardown(test_bound_is_exact_and_sticky, teardown),
        cmocka_unit_test_teardown(test_prepare_and_commit, teardown),
        cmocka_unit_test_teardown(test_steal, teardown),
        cmocka_unit_test_teardown(test_wipe_on_growth_reset_and_free, teardown),
        cmocka_unit_test_teardown(test_no_wipe_without_the_flag, teardown),
        cmocka_unit_test_teardown(test_wipe_helpers, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
