/* test_queue.c: the intrusive list: order, removal anywhere, sorted
 * insertion, taking a list aside, and links that are in no list. */
#include "tests/unit/unit.h"

#include <stdlib.h>
#include <string.h>

#include "lib/queue.h"

struct item {
    int v;
    struct lq link;  /* in one list */
    struct lq other; /* in a second one at the same time */
};

/* order writes the values of q, head to tail, into out (at most n). */
static size_t order(const struct lq *q, int *out, size_t n)
{
    const struct lq *p;
    size_t i = 0;

    lq_foreach(p, q)
    {
        if (i < n)
            out[i] = lq_entry(p, struct item, link)->v;
        i++;
    }
    return i;
}

static void test_empty(void **state)
{
    struct lq q = LQ_INIT(q);
    struct lq h;

    (void)state;
    assert_true(lq_empty(&q));
    assert_null(lq_head(&q));
    assert_null(lq_tail(&q));
    assert_null(lq_pop_head(&q));
    assert_int_equal(lq_count(&q), 0);
    lq_init(&h);
    assert_true(lq_empty(&h));
}

static void test_fifo_order(void **state)
{
    struct lq q;
    struct item it[5];
    int got[5];

    (void)state;
    lq_init(&q);
    for (int i = 0; i < 5; i++) {
        it[i].v = i;
        lq_insert_tail(&q, &it[i].link);
    }
    assert_int_equal(order(&q, got, 5), 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(got[i], i);
    assert_ptr_equal(lq_head(&q), &it[0].link);
    assert_ptr_equal(lq_tail(&q), &it[4].link);
    assert_ptr_equal(lq_next(&q, &it[1].link), &it[2].link);
    assert_null(lq_next(&q, &it[4].link));
    assert_ptr_equal(lq_prev(&q, &it[1].link), &it[0].link);
    assert_null(lq_prev(&q, &it[0].link));
    /* Popping gives them back in the order they came. */
    for (int i = 0; i < 5; i++) {
        struct lq *n = lq_pop_head(&q);
        assert_non_null(n);
        assert_int_equal(lq_entry(n, struct item, link)->v, i);
        assert_false(lq_linked(n));
    }
    assert_true(lq_empty(&q));
}

static void test_insert_head_and_reverse(void **state)
{
    struct lq q = LQ_INIT(q);
    struct item it[3];
    struct lq *p;
    int i = 0;

    (void)state;
    for (int k = 0; k < 3; k++) {
        it[k].v = k;
        lq_insert_head(&q, &it[k].link); /* most recent first, as an LRU */
    }
    lq_foreach_reverse(p, &q)
    {
        assert_int_equal(lq_entry(p, struct item, link)->v, i);
        i++;
    }
    assert_int_equal(i, 3);
    assert_ptr_equal(lq_head(&q), &it[2].link);
    /* Touching an element moves it to the front. */
    lq_remove(&it[0].link);
    lq_insert_head(&q, &it[0].link);
    assert_ptr_equal(lq_head(&q), &it[0].link);
    assert_ptr_equal(lq_tail(&q), &it[1].link);
}

static void test_remove_anywhere(void **state)
{
    struct lq q = LQ_INIT(q);
    struct item it[5];
    int got[5];

    (void)state;
    for (int i = 0; i < 5; i++) {
        it[i].v = i;
        lq_insert_tail(&q, &it[i].link);
    }
    lq_remove(&it[0].link); /* the first */
    lq_remove(&it[2].link); /* the middle */
    lq_remove(&it[4].link); /* the last */
    assert_int_equal(order(&q, got, 5), 2);
    assert_int_equal(got[0], 1);
    assert_int_equal(got[1], 3);
    assert_ptr_equal(lq_tail(&q), &it[3].link);
    /* Removing twice, or what is in no list, changes nothing. */
    lq_remove(&it[2].link);
    assert_false(lq_linked(&it[2].link));
    assert_int_equal(lq_count(&q), 2);
    lq_remove(&it[1].link);
    lq_remove(&it[3].link);
    assert_true(lq_empty(&q));
}

static void test_zeroed_link_is_unlinked(void **state)
{
    struct item *it = calloc(1, sizeof(*it));

    (void)state;
    assert_non_null(it);
    assert_false(lq_linked(&it->link));
    lq_remove(&it->link); /* no crash, and now a proper unlinked link */
    assert_false(lq_linked(&it->link));
    assert_ptr_equal(it->link.next, &it->link);
    free(it);
}

/* insert_sorted inserts n by value, after equal values (stable), walking
 * from the tail, as the kube client's delayed list does. */
static void insert_sorted(struct lq *q, struct item *n)
{
    struct lq *p = q->prev;

    while (p != q && lq_entry(p, struct item, link)->v > n->v)
        p = p->prev;
    lq_insert_after(p, &n->link);
}

static void test_sorted_insertion(void **state)
{
    const int vals[] = {5, 1, 4, 1, 9, 0, 5};
    struct lq q = LQ_INIT(q);
    struct item it[7];
    int got[7];

    (void)state;
    for (int i = 0; i < 7; i++) {
        it[i].v = vals[i];
        insert_sorted(&q, &it[i]);
    }
    assert_int_equal(order(&q, got, 7), 7);
    for (int i = 1; i < 7; i++)
        assert_true(got[i - 1] <= got[i]);
    /* Equal values keep their order of arrival. */
    assert_ptr_equal(lq_next(&q, &it[1].link), &it[3].link);
    assert_ptr_equal(lq_next(&q, &it[0].link), &it[6].link);
    /* insert_before the head is the tail. */
    struct item last = {.v = 100};
    lq_insert_before(&q, &last.link);
    assert_ptr_equal(lq_tail(&q), &last.link);
}

static void test_foreach_safe_frees(void **state)
{
    struct lq q = LQ_INIT(q);
    struct lq *p, *tmp;
    int got[10];

    (void)state;
    for (int i = 0; i < 10; i++) {
        struct item *it = calloc(1, sizeof(*it));
        assert_non_null(it);
        it->v = i;
        lq_insert_tail(&q, &it->link);
    }
    /* Drop the odd ones while walking: ASan sees any use after free. */
    lq_foreach_safe(p, tmp, &q)
    {
        struct item *it = lq_entry(p, struct item, link);
        if (it->v % 2) {
            lq_remove(p);
            free(it);
        }
    }
    assert_int_equal(order(&q, got, 10), 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(got[i], 2 * i);
    lq_foreach_safe(p, tmp, &q)
    {
        lq_remove(p);
        free(lq_entry(p, struct item, link));
    }
    assert_true(lq_empty(&q));
}

static void test_move_and_concat(void **state)
{
    struct lq a = LQ_INIT(a), b = LQ_INIT(b), aside;
    struct item it[6];
    int got[6];

    (void)state;
    for (int i = 0; i < 6; i++) {
        it[i].v = i;
        lq_insert_tail(i < 3 ? &a : &b, &it[i].link);
    }
    /* Taking a aside empties it; what is added to a meanwhile stays there. */
    lq_move(&a, &aside);
    assert_true(lq_empty(&a));
    assert_int_equal(order(&aside, got, 6), 3);
    assert_int_equal(got[0], 0);
    assert_int_equal(got[2], 2);
    lq_remove(&it[5].link);
    lq_insert_tail(&a, &it[5].link);
    assert_int_equal(lq_count(&a), 1);
    /* Concatenation keeps both orders. */
    lq_concat(&aside, &b);
    assert_true(lq_empty(&b));
    assert_int_equal(order(&aside, got, 6), 5);
    const int want[] = {0, 1, 2, 3, 4};
    assert_memory_equal(got, want, sizeof(want));
    lq_concat(&aside, &b); /* an empty one: nothing */
    assert_int_equal(lq_count(&aside), 5);
    assert_ptr_equal(lq_tail(&aside), &it[4].link);
    /* An empty list moved gives an empty list. */
    lq_move(&b, &a);
    assert_true(lq_empty(&a));
}

static void test_two_lists_at_once(void **state)
{
    struct lq all = LQ_INIT(all), even = LQ_INIT(even);
    struct item it[4];
    struct lq *p;
    int sum = 0;

    (void)state;
    for (int i = 0; i < 4; i++) {
        it[i].v = i;
        lq_init(&it[i].other);
        lq_insert_tail(&all, &it[i].link);
        if (i % 2 == 0)
            lq_insert_tail(&even, &it[i].other);
    }
    lq_remove(&it[2].link); /* out of one list, still in the other */
    assert_true(lq_linked(&it[2].other));
    assert_false(lq_linked(&it[1].other));
    lq_foreach(p, &even) sum += lq_entry(p, struct item, other)->v;
    assert_int_equal(sum, 2);
    assert_int_equal(lq_count(&all), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_fifo_order),
        cmocka_unit_test(test_insert_head_and_reverse),
        cmocka_unit_test(test_remove_anywhere),
        cmocka_unit_test(test_zeroed_link_is_unlinked),
        cmocka_unit_test(test_sorted_insertion),
        cmocka_unit_test(test_foreach_safe_frees),
        cmocka_unit_test(test_move_and_concat),
        cmocka_unit_test(test_two_lists_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
