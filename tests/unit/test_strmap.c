/* test_strmap.c: set, get, replace, delete, growth, iteration. */
#include "tests/unit/unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/strmap.h"

static int count_fn(void *data, const char *key, void *value)
{
    (void)key;
    (void)value;
    (*(size_t *)data)++;
    return 0;
}

static void test_basics(void **state)
{
    strmap *m = strmap_new();
    int a = 1, b = 2;

    (void)state;
    assert_non_null(m);
    assert_null(strmap_get(m, "x"));
    assert_int_equal(strmap_set(m, "x", &a), 0);
    assert_ptr_equal(strmap_get(m, "x"), &a);
    assert_int_equal(strmap_set(m, "x", &b), 0);
    assert_ptr_equal(strmap_get(m, "x"), &b);
    assert_int_equal(strmap_count(m), 1);
    assert_ptr_equal(strmap_del(m, "x"), &b);
    assert_null(strmap_del(m, "x"));
    assert_int_equal(strmap_count(m), 0);
    strmap_free(m);
}

static void test_many(void **state)
{
    strmap *m = strmap_new();
    char k[32];
    size_t n = 0;

    (void)state;
    for (int i = 0; i < 20000; i++) {
        snprintf(k, sizeof(k), "ns-%d/name", i);
        assert_int_equal(strmap_set(m, k, (void *)(intptr_t)(i + 1)), 0);
    }
    assert_int_equal(strmap_count(m), 20000);
    for (int i = 0; i < 20000; i += 7) {
        snprintf(k, sizeof(k), "ns-%d/name", i);
        assert_int_equal((intptr_t)strmap_get(m, k), i + 1);
    }
    assert_int_equal(strmap_foreach(m, count_fn, &n), 0);
    assert_int_equal(n, 20000);
    strmap_free(m);
}

/* strmap_free_all frees the values as well (ASan reports a leak
 * otherwise); NULL is fine. */
static void test_free_all(void **state)
{
    strmap *m = strmap_new();

    (void)state;
    assert_non_null(m);
    for (int i = 0; i < 100; i++) {
        char k[16], *v;
        snprintf(k, sizeof(k), "k%d", i);
        v = strdup(k);
        assert_non_null(v);
        assert_int_equal(strmap_set(m, k, v), 0);
    }
    strmap_free_all(m);
    strmap_free_all(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basics),
        cmocka_unit_test(test_free_all),
        cmocka_unit_test(test_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
