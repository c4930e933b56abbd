/* workqueue.c: a deduplicating, delaying, rate-limited queue of keys.
 *
 * Each distinct key the queue holds is one item, found through a
 * lib/keytab table. An item can be, at the same time:
 *   - dirty: it must be processed (again); it sits in the FIFO unless it is
 *     also processing, in which case wq_done() moves it into the FIFO;
 *   - processing: handed out and not done yet (a doubly linked list, for the
 *     time gauges);
 *   - waiting: in the min-heap of deadlines (heap_idx is its position).
 * An item in none of these states is freed. */
#include "kube/workqueue.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/keytab.h"
#include "lib/queue.h"

#define HEAP_MIN_CAP 16
#define NOT_WAITING SIZE_MAX

struct item {
    struct keytab_node node;
    struct lq qlink;   /* in the FIFO while queued */
    struct lq plink;   /* in the processing list while processing */
    uint64_t add_ms;   /* when it became dirty */
    uint64_t start_ms; /* when it was handed out */
    uint64_t ready_ms; /* its deadline while waiting */
    uint64_t seq;      /* orders equal deadlines by arrival */
    size_t heap_idx;   /* NOT_WAITING unless in the heap */
    bool dirty;
    bool processing;
    char key[]; /* NUL-terminated copy */
};

struct wq {
    uv_loop_t *loop;
    uv_timer_t timer; /* fires at the earliest deadline */
    uv_idle_t idle;   /* active while keys can be dispatched */
    char name[WQ_NAME_MAX + 1];

    wq_handler_fn handler;
    void *handler_data;
    size_t max_active;
    size_t max_keys;
    uint64_t (*now_ms)(void *data);
    void *clock_data;
    struct rl *limiter;
    bool own_limiter;
    void (*observe)(void *data, int kind, double seconds);
    void *observe_data;

    struct keytab items; /* struct item by key, at most max_keys */

    struct lq fifo; /* of item.qlink: the ready keys */
    size_t depth;

    struct lq processing; /* of item.plink, the latest first */
    size_t active;

    struct item **heap; /* waiting keys, earliest deadline first */
    size_t heap_len, heap_cap;
    uint64_t seq;

    uint64_t adds_total, retries_total, rejected_total;

    bool shut;
    bool closing;
    bool armed; /* the timer runs for armed_at */
    uint64_t armed_at;
    int pending_closes;
    void (*closed_cb)(void *data);
    void *closed_data;
};

static uint64_t loop_clock(void *data)
{
    return uv_now(data);
}

static uint64_t now(const struct wq *q)
{
    return q->now_ms(q->clock_data);
}

static void observe(struct wq *q, int kind, uint64_t from, uint64_t to)
{
    if (q->observe)
        q->observe(q->observe_data, kind, to > from ? (double)(to - from) / 1000.0 : 0.0);
}

/* lookup finds key (len bytes); its hash goes to *ret_hash, for new_item. */
static struct item *lookup(const struct wq *q, const char *key, size_t len, uint64_t *ret_hash)
{
    struct keytab_node *n = keytab_lookup(&q->items, key, len, ret_hash);
    return n ? keytab_entry(n, struct item, node) : NULL;
}

static void free_item(struct keytab_node *n)
{
    free(keytab_entry(n, struct item, node));
}

/* new_item adds an item for key (absent from the table) and returns it in
 * *ret. Fails with -ENOSPC at max_keys, or -ENOMEM, changing nothing. */
static int new_item(struct wq *q, const char *key, size_t len, uint64_t h, struct item **ret)
{
    if (q->items.count >= q->max_keys) {
        q->rejected_total++;
        return -ENOSPC;
    }
    int r = keytab_reserve(&q->items);
    if (r < 0)
        return r;
    struct item *it = calloc(1, sizeof(*it) + len + 1);
    if (!it)
        return -ENOMEM;
    it->heap_idx = NOT_WAITING;
    memcpy(it->key, key, len + 1);
    it->node.key = it->key;
    it->node.hash = h;
    keytab_insert(&q->items, &it->node);
    *ret = it;
    return 0;
}

/* maybe_free frees it once it is neither dirty, processing nor waiting. */
static void maybe_free(struct wq *q, struct item *it)
{
    if (it->dirty || it->processing || it->heap_idx != NOT_WAITING)
        return;
    keytab_remove(&q->items, &it->node);
    free(it);
}

/* ---- the heap of deadlines ---- */

static bool earlier(const struct item *a, const struct item *b)
{
    if (a->ready_ms != b->ready_ms)
        return a->ready_ms < b->ready_ms;
    return a->seq < b->seq;
}

static void heap_place(struct wq *q, size_t i, struct item *it)
{
    q->heap[i] = it;
    it->heap_idx = i;
}

static void sift_up(struct wq *q, size_t i)
{
    struct item *it = q->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!earlier(it, q->heap[parent]))
            break;
        heap_place(q, i, q->heap[parent]);
        i = parent;
    }
    heap_place(q, i, it);
}

static void sift_down(struct wq *q, size_t i)
{
    struct item *it = q->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= q->heap_len)
            break;
        if (c + 1 < q->heap_len && earlier(q->heap[c + 1], q->heap[c]))
            c++;
        if (!earlier(q->heap[c], it))
            break;
        heap_place(q, i, q->heap[c]);
        i = c;
    }
    heap_place(q, i, it);
}

/* heap_reserve makes room for one more waiting key. */
static int heap_reserve(struct wq *q)
{
    if (q->heap_len < q->heap_cap)
        return 0;
    size_t cap = q->heap_cap ? q->heap_cap * 2 : HEAP_MIN_CAP;
    struct item **heap = realloc(q->heap, cap * sizeof(*heap));
    if (!heap)
        return -ENOMEM;
    q->heap = heap;
    q->heap_cap = cap;
    return 0;
}

static struct item *heap_pop(struct wq *q)
{
    struct item *top = q->heap[0];
    q->heap_len--;
    if (q->heap_len > 0) {
        q->heap[0] = q->heap[q->heap_len];
        sift_down(q, 0);
    }
    top->heap_idx = NOT_WAITING;
    if (q->heap_cap > HEAP_MIN_CAP && q->heap_len < q->heap_cap / 4) {
        struct item **heap = realloc(q->heap, q->heap_cap / 2 * sizeof(*heap));
        if (heap) {
            q->heap = heap;
            q->heap_cap /= 2;
        }
    }
    return top;
}

/* ---- states ---- */

static void push_fifo(struct wq *q, struct item *it)
{
    lq_insert_tail(&q->fifo, &it->qlink);
    q->depth++;
}

/* mark_dirty records that it must be processed: into the FIFO now, or,
 * while it is processing, into the FIFO when it is done. */
static void mark_dirty(struct wq *q, struct item *it)
{
    it->dirty = true;
    it->add_ms = now(q);
    q->adds_total++;
    if (!it->processing)
        push_fifo(q, it);
}

/* take moves the FIFO's head to the processing set. */
static struct item *take(struct wq *q)
{
    struct item *it = lq_entry(lq_pop_head(&q->fifo), struct item, qlink);
    q->depth--;
    it->dirty = false;
    it->processing = true;
    it->start_ms = now(q);
    lq_insert_head(&q->processing, &it->plink);
    q->active++;
    observe(q, WQ_QUEUE_DURATION, it->add_ms, it->start_ms);
    return it;
}

static bool can_dispatch(const struct wq *q)
{
    return !q->shut && q->handler && !lq_empty(&q->fifo) && q->active < q->max_active;
}

static void on_idle(uv_idle_t *h);

/* schedule_dispatch makes the idle handle hand out keys on the next turn. */
static void schedule_dispatch(struct wq *q)
{
    if (can_dispatch(q))
        (void)uv_idle_start(&q->idle, on_idle); /* cannot fail on an initialized handle */
}

/* dispatch hands ready keys to the handler, at most as many as were ready
 * when it started, so a handler that re-adds keys cannot keep it going. */
static int dispatch(struct wq *q)
{
    int n = 0;
    for (size_t budget = q->depth; budget > 0 && can_dispatch(q); budget--) {
        struct item *it = take(q);
        n++;
        q->handler(q->handler_data, it->key); /* it may be freed from here on */
    }
    return n;
}

/* move_due queues every waiting key whose deadline has come. */
static void move_due(struct wq *q)
{
    uint64_t t = now(q);
    while (q->heap_len > 0 && q->heap[0]->ready_ms <= t) {
        struct item *it = heap_pop(q);
        if (!it->dirty)
            mark_dirty(q, it);
    }
}

static void on_timer(uv_timer_t *h);

/* arm_timer points the timer at the earliest deadline, if it is not already. */
static void arm_timer(struct wq *q)
{
    if (q->shut)
        return;
    if (q->heap_len == 0) {
        if (q->armed)
            (void)uv_timer_stop(&q->timer);
        q->armed = false;
        return;
    }
    uint64_t at = q->heap[0]->ready_ms;
    if (q->armed && q->armed_at == at)
        return;
    uint64_t t = now(q);
    (void)uv_timer_start(&q->timer, on_timer, at > t ? at - t : 0, 0);
    q->armed = true;
    q->armed_at = at;
}

static void on_timer(uv_timer_t *h)
{
    struct wq *q = h->data;
    q->armed = false;
    move_due(q);
    schedule_dispatch(q);
    arm_timer(q); /* again if the clock was behind the timer */
}

static void on_idle(uv_idle_t *h)
{
    struct wq *q = h->data;
    dispatch(q);
    if (!q->closing && !can_dispatch(q))
        (void)uv_idle_stop(&q->idle);
}

/* ---- the public calls ---- */

int wq_new(uv_loop_t *loop, const struct wq_options *o, struct wq **ret)
{
    static const struct wq_options zero;
    if (!o)
        o = &zero;
    if (!loop || !ret || (o->name && strlen(o->name) > WQ_NAME_MAX))
        return -EINVAL;
    struct wq *q = calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    q->loop = loop;
    lq_init(&q->fifo);
    lq_init(&q->processing);
    keytab_init(&q->items);
    if (o->name)
        memcpy(q->name, o->name, strlen(o->name) + 1);
    q->handler = o->handler;
    q->handler_data = o->handler_data;
    q->max_active = o->max_active ? o->max_active : 1;
    q->max_keys = o->max_keys ? o->max_keys : WQ_DEFAULT_MAX_KEYS;
    q->now_ms = o->now_ms ? o->now_ms : loop_clock;
    q->clock_data = o->now_ms ? o->clock_data : loop;
    q->observe = o->observe;
    q->observe_data = o->observe_data;
    q->limiter = o->limiter;
    if (!q->limiter) {
        struct rl_options ro;
        rl_options_init(&ro);
        ro.now_ms = q->now_ms;
        ro.clock_data = q->clock_data;
        int r = rl_new(&ro, &q->limiter);
        if (r < 0) {
            free(q);
            return r;
        }
        q->own_limiter = true;
    }
    /* Neither init can fail on a valid loop (they only link the handle in). */
    (void)uv_timer_init(loop, &q->timer);
    (void)uv_idle_init(loop, &q->idle);
    q->timer.data = q;
    q->idle.data = q;
    *ret = q;
    return 0;
}

int wq_add(struct wq *q, const char *key)
{
    if (q->shut)
        return -ESHUTDOWN;
    long len = keytab_key_len(key, WQ_KEY_MAX);
    if (len < 0)
        return (int)len;
    uint64_t h;
    struct item *it = lookup(q, key, (size_t)len, &h);
    if (!it) {
        int r = new_item(q, key, (size_t)len, h, &it);
        if (r < 0)
            return r;
    }
    if (it->dirty)
        return 0;
    mark_dirty(q, it);
    schedule_dispatch(q);
    return 0;
}

int wq_add_after(struct wq *q, const char *key, uint64_t delay_ms)
{
    if (q->shut)
        return -ESHUTDOWN;
    if (delay_ms == 0) {
        int r = wq_add(q, key);
        if (r == 0)
            q->retries_total++;
        return r;
    }
    long len = keytab_key_len(key, WQ_KEY_MAX);
    if (len < 0)
        return (int)len;
    uint64_t h;
    struct item *it = lookup(q, key, (size_t)len, &h);
    if (!it || it->heap_idx == NOT_WAITING) {
        int r = heap_reserve(q);
        if (r == 0 && !it)
            r = new_item(q, key, (size_t)len, h, &it);
        if (r < 0)
            return r;
    }
    uint64_t t = now(q);
    uint64_t at = delay_ms > UINT64_MAX - t ? UINT64_MAX : t + delay_ms;
    if (it->heap_idx == NOT_WAITING) {
        it->ready_ms = at;
        it->seq = q->seq++;
        heap_place(q, q->heap_len++, it);
        sift_up(q, it->heap_idx);
    } else if (at < it->ready_ms) {
        it->ready_ms = at;
        sift_up(q, it->heap_idx);
    }
    q->retries_total++;
    arm_timer(q);
    return 0;
}

int wq_add_rate_limited(struct wq *q, const char *key)
{
    if (q->shut)
        return -ESHUTDOWN;
    long len = keytab_key_len(key, WQ_KEY_MAX);
    if (len < 0)
        return (int)len;
    if (q->items.count >= q->max_keys && !lookup(q, key, (size_t)len, NULL)) {
        q->rejected_total++;
        return -ENOSPC;
    }
    uint64_t delay;
    int r = rl_when(q->limiter, key, &delay);
    if (r < 0)
        return r;
    return wq_add_after(q, key, delay);
}

void wq_forget(struct wq *q, const char *key)
{
    rl_forget(q->limiter, key);
}

uint32_t wq_num_requeues(const struct wq *q, const char *key)
{
    return rl_num_requeues(q->limiter, key);
}

int wq_done(struct wq *q, const char *key)
{
    long len = keytab_key_len(key, WQ_KEY_MAX);
    if (len < 0)
        return (int)len;
    struct item *it = lookup(q, key, (size_t)len, NULL);
    if (!it || !it->processing)
        return -ENOENT;
    lq_remove(&it->plink);
    it->processing = false;
    q->active--;
    observe(q, WQ_WORK_DURATION, it->start_ms, now(q));
    if (it->dirty)
        push_fifo(q, it);
    else
        maybe_free(q, it); /* key may point into it: not used below */
    schedule_dispatch(q);
    return 0;
}

int wq_get(struct wq *q, const char **ret_key)
{
    if (q->shut)
        return -ESHUTDOWN;
    move_due(q);
    arm_timer(q);
    if (lq_empty(&q->fifo) || q->active >= q->max_active)
        return -EAGAIN;
    *ret_key = take(q)->key;
    return 0;
}

int wq_poll(struct wq *q)
{
    if (q->shut)
        return 0;
    move_due(q);
    int n = dispatch(q);
    arm_timer(q);
    schedule_dispatch(q);
    return n;
}

void wq_shut_down(struct wq *q)
{
    if (q->shut)
        return;
    q->shut = true;
    q->armed = false;
    (void)uv_timer_stop(&q->timer);
    (void)uv_idle_stop(&q->idle);
}

int wq_shutting_down(const struct wq *q)
{
    return q->shut;
}

static void free_queue(struct wq *q)
{
    keytab_release(&q->items, free_item);
    free(q->heap);
    if (q->own_limiter)
        rl_free(q->limiter);
    free(q);
}

static void on_close(uv_handle_t *h)
{
    struct wq *q = h->data;
    if (--q->pending_closes > 0)
        return;
    void (*cb)(void *) = q->closed_cb;
    void *data = q->closed_data;
    free_queue(q);
    if (cb)
        cb(data);
}

int wq_close(struct wq *q, void (*closed_cb)(void *data), void *data)
{
    if (q->closing)
        return -EALREADY;
    wq_shut_down(q);
    q->closing = true;
    q->closed_cb = closed_cb;
    q->closed_data = data;
    q->pending_closes = 2;
    uv_close((uv_handle_t *)&q->timer, on_close);
    uv_close((uv_handle_t *)&q->idle, on_close);
    return 0;
}

void wq_get_stats(const struct wq *q, struct wq_stats *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->depth = q->depth;
    ret->waiting = q->heap_len;
    ret->active = q->active;
    ret->keys = q->items.count;
    ret->adds_total = q->adds_total;
    ret->retries_total = q->retries_total;
    ret->rejected_total = q->rejected_total;
    uint64_t t = now(q);
    uint64_t longest = 0;
    const struct lq *n;
    lq_foreach(n, &q->processing)
    {
        const struct item *it = lq_entry(n, struct item, plink);
        uint64_t ran = t > it->start_ms ? t - it->start_ms : 0;
        ret->unfinished_work_seconds += (double)ran / 1000.0;
        if (ran > longest)
            longest = ran;
    }
    ret->longest_running_processor_seconds = (double)longest / 1000.0;
}

const char *wq_name(const struct wq *q)
{
    return q->name;
}
