/* test_keytab.c: finding, adding and removing keys, including clusters
 * that wrap around the end of the table, growth and shrinking. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/keytab.h"

struct ent {
    int value;
    struct keytab_node node;
    char key[32];
};

static void add(struct keytab *t, struct ent *e, const char *key, uint64_t hash)
{
    snprintf(e->key, sizeof(e->key), "%s", key);
    e->node.key = e->key;
    e->node.hash = hash;
    assert_int_equal(keytab_reserve(t), 0);
    keytab_insert(t, &e->node);
}

static struct ent *find(const struct keytab *t, const char *key, uint64_t hash)
{
    struct keytab_node *n = keytab_find(t, key, hash);
    return n ? keytab_entry(n, struct ent, node) : NULL;
}

static void test_key_len(void **state)
{
    (void)state;
    assert_int_equal(keytab_key_len(NULL, 8), -EINVAL);
    assert_int_equal(keytab_key_len("", 8), -EINVAL);
    assert_int_equal(keytab_key_len("ns/name", 8), 7);
    assert_int_equal(keytab_key_len("ns/name1", 8), 8);
    assert_int_equal(keytab_key_len("ns/name12", 8), VMG_ETOOBIG);
}

/* Colliding keys at the last slot wrap around to the first ones; removing
 * any of them must leave the others findable. */
static void test_wrapping_cluster(void **state)
{
    struct keytab t;
    struct ent e[5];
    const char *keys[] = {"a", "b", "c", "d", "e"};

    (void)state;
    keytab_init(&t);
    assert_null(find(&t, "a", 15));
    for (int i = 0; i < 5; i++)
        add(&t, &e[i], keys[i], i < 4 ? 15 : 0); /* e's home slot is taken by the wrap */
    assert_int_equal(t.cap, 16);
    for (int i = 0; i < 5; i++)
        assert_ptr_equal(find(&t, keys[i], i < 4 ? 15 : 0), &e[i]);
    keytab_remove(&t, &e[0].node);
    keytab_remove(&t, &e[2].node);
    assert_null(find(&t, "a", 15));
    assert_null(find(&t, "c", 15));
    assert_ptr_equal(find(&t, "b", 15), &e[1]);
    assert_ptr_equal(find(&t, "d", 15), &e[3]);
    assert_ptr_equal(find(&t, "e", 0), &e[4]);
    assert_null(find(&t, "b", 14)); /* same key, other hash: not the same entry */
    assert_int_equal(t.count, 3);
    keytab_release(&t, NULL);
    assert_int_equal(t.count, 0);
}

static int freed;

static void free_ent(struct keytab_node *n)
{
    free(keytab_entry(n, struct ent, node));
    freed++;
}

static void test_grow_shrink_release(void **state)
{
    enum { N = 5000 };
    struct keytab t;
    struct ent **all = calloc(N, sizeof(*all));
    char k[32];

    (void)state;
    assert_non_null(all);
    keytab_init(&t);
    for (int i = 0; i < N; i++) {
        all[i] = calloc(1, sizeof(**all));
        assert_non_null(all[i]);
        snprintf(k, sizeof(k), "ns/g%d", i);
        all[i]->value = i;
        add(&t, all[i], k, keytab_hash(&t, k, strlen(k)));
    }
    assert_int_equal(t.count, N);
    size_t big = t.cap;
    assert_true(big >= N * 4 / 3);
    for (int i = 0; i < N; i += 2) {
        keytab_remove(&t, &all[i]->node);
        free(all[i]);
    }
    for (int i = 0; i < N; i++) {
        snprintf(k, sizeof(k), "ns/g%d", i);
        struct ent *e = find(&t, k, keytab_hash(&t, k, strlen(k)));
        uint64_t h = 0;
        struct keytab_node *n = keytab_lookup(&t, k, strlen(k), &h);
        assert_true(h == keytab_hash(&t, k, strlen(k)));
        assert_ptr_equal(n, e ? &e->node : NULL);
        if (i % 2)
            assert_true(e && e->value == i);
        else
            assert_null(e);
    }
    for (int i = 1; i < N - 100; i += 2) {
        keytab_remove(&t, &all[i]->node);
        free(all[i]);
    }
    assert_int_equal(t.count, 50);
    assert_true(t.cap < big); /* it shrank */
    freed = 0;
    keytab_release(&t, free_ent);
    assert_int_equal(freed, 50);
    free(all);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_len),
        cmocka_unit_test(test_wrapping_cluster),
        cmocka_unit_test(test_grow_shrink_release),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
