/* queue.h: the project's one intrusive doubly linked list (a queue, a FIFO,
 * an LRU order), in the spirit of libuv's queue.
 *
 * A list is a struct lq head; each element embeds a struct lq link and is
 * found back from it with lq_entry(). The list is circular through its
 * head, so no operation needs a special case for the first or last element,
 * and every operation but lq_count is O(1). The list owns nothing: it never
 * allocates or frees, and an element may sit in several lists through
 * several links.
 *
 * A head must be made empty with lq_init (or LQ_INIT) before use. A link
 * that is in no list is "unlinked": lq_init, lq_remove and lq_pop_head
 * leave it so, and a zeroed link (from calloc) counts as unlinked too, so
 * lq_remove and lq_linked are safe on it. */
#ifndef VMG_QUEUE_H
#define VMG_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

struct lq {
    struct lq *next;
    struct lq *prev;
};

/* LQ_INIT(name) initializes a static or automatic head that is empty:
 * `struct lq q = LQ_INIT(q);`. */
#define LQ_INIT(name)                                                                              \
    {                                                                                              \
        &(name), &(name)                                                                           \
    }

/* lq_entry returns the element of type that embeds link as member. */
#define lq_entry(link, type, member) ((type *)(void *)((char *)(link)-offsetof(type, member)))

/* lq_foreach walks q from head to tail, pos being each link in turn; the
 * body must not remove pos (use lq_foreach_safe). */
#define lq_foreach(pos, q) for ((pos) = (q)->next; (pos) != (q); (pos) = (pos)->next)

/* lq_foreach_reverse walks q from tail to head. */
#define lq_foreach_reverse(pos, q) for ((pos) = (q)->prev; (pos) != (q); (pos) = (pos)->prev)

/* lq_foreach_safe walks q from head to tail; the body may remove (and free)
 * pos, but no other element of q. */
#define lq_foreach_safe(pos, tmp, q)                                                               \
    for ((pos) = (q)->next, (tmp) = (pos)->next; (pos) != (q); (pos) = (tmp), (tmp) = (pos)->next)

/* lq_init makes q an empty head, or an unlinked link. */
static inline void lq_init(struct lq *q)
{
    q->next = q;
    q->prev = q;
}

/* lq_empty says whether the list q holds no element. */
static inline bool lq_empty(const struct lq *q)
{
    return q->next == q;
}

/* lq_linked says whether the link n is in a list. */
static inline bool lq_linked(const struct lq *n)
{
    return n->next != NULL && n->next != n;
}

/* lq_head returns the first link of q, or NULL when q is empty. */
static inline struct lq *lq_head(const struct lq *q)
{
    return q->next == q ? NULL : q->next;
}

/* lq_tail returns the last link of q, or NULL when q is empty. */
static inline struct lq *lq_tail(const struct lq *q)
{
    return q->prev == q ? NULL : q->prev;
}

/* lq_next returns the link after n in q, or NULL when n is the last. */
static inline struct lq *lq_next(const struct lq *q, const struct lq *n)
{
    return n->next == q ? NULL : n->next;
}

/* lq_prev returns the link before n in q, or NULL when n is the first. */
static inline struct lq *lq_prev(const struct lq *q, const struct lq *n)
{
    return n->prev == q ? NULL : n->prev;
}

/* lq_insert_after links n (unlinked) right after pos, which is a link in a
 * list or the list's head (then n becomes the first). */
static inline void lq_insert_after(struct lq *pos, struct lq *n)
{
    n->prev = pos;
    n->next = pos->next;
    pos->next->prev = n;
    pos->next = n;
}

/* lq_insert_before links n (unlinked) right before pos, which is a link in
 * a list or the list's head (then n becomes the last). */
static inline void lq_insert_before(struct lq *pos, struct lq *n)
{
    lq_insert_after(pos->prev, n);
}

/* lq_insert_head makes n (unlinked) the first element of q. */
static inline void lq_insert_head(struct lq *q, struct lq *n)
{
    lq_insert_after(q, n);
}

/* lq_insert_tail makes n (unlinked) the last element of q. */
static inline void lq_insert_tail(struct lq *q, struct lq *n)
{
    lq_insert_before(q, n);
}

/* lq_remove takes n out of its list and leaves it unlinked; an unlinked n
 * is left as it is (made an unlinked link if it was zeroed). */
static inline void lq_remove(struct lq *n)
{
    if (lq_linked(n)) {
        n->prev->next = n->next;
        n->next->prev = n->prev;
    }
    lq_init(n);
}

/* lq_pop_head removes the first link of q and returns it (unlinked), or
 * NULL when q is empty. */
static inline struct lq *lq_pop_head(struct lq *q)
{
    struct lq *n = lq_head(q);

    if (n)
        lq_remove(n);
    return n;
}

/* lq_concat moves every element of from, in order, to the tail of to;
 * from is empty afterwards. */
static inline void lq_concat(struct lq *to, struct lq *from)
{
    if (lq_empty(from))
        return;
    from->next->prev = to->prev;
    to->prev->next = from->next;
    from->prev->next = to;
    to->prev = from->prev;
    lq_init(from);
}

/* lq_move makes to (its old elements dropped, not unlinked: it must be
 * empty or uninitialized) hold every element of from, in order; from is
 * empty afterwards. It lets a caller take a list's elements aside, e.g. to
 * run callbacks that may add to the original list. */
static inline void lq_move(struct lq *from, struct lq *to)
{
    lq_init(to);
    lq_concat(to, from);
}

/* lq_count counts the elements of q; O(n), for tests and assertions. */
static inline size_t lq_count(const struct lq *q)
{
    size_t n = 0;

    for (const struct lq *p = q->next; p != q; p = p->next)
        n++;
    return n;
}

#endif
