/* jsonarena.c: cJSON trees in mmap'd blocks, freed together. */
#include "lib/jsonarena.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define BLOCK_SIZE (256u * 1024u) /* a block mapped at a time */
#define ALIGN 16u

struct block {
    struct block *next;
    size_t size; /* mapped, header included */
    size_t used; /* from the block's start, header included */
};

struct json_arena {
    struct block *head; /* the block allocated from; big ones go behind it */
    size_t bytes;
};

/* The arena the hooks allocate from, while json_arena_parse runs. */
static struct json_arena *current;

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

static struct block *map_block(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct block *b;

    if (p == MAP_FAILED)
        return NULL;
    b = p;
    b->next = NULL;
    b->size = size;
    b->used = round_up(sizeof(*b), ALIGN);
    return b;
}

static void *arena_alloc(size_t n)
{
    struct json_arena *a = current;
    struct block *b;
    size_t need;
    void *p;

    if (!a || n > SIZE_MAX / 2)
        return NULL;
    need = round_up(n ? n : 1, ALIGN);
    b = a->head;
    if (!b || b->size - b->used < need) {
        size_t hdr = round_up(sizeof(*b), ALIGN);

        if (need > BLOCK_SIZE / 4) {
            /* A big string gets a block of its own, behind the head. */
            b = map_block(round_up(hdr + need, 4096));
            if (!b)
                return NULL;
            if (a->head) {
                b->next = a->head->next;
                a->head->next = b;
            } else {
                a->head = b;
            }
        } else {
            b = map_block(BLOCK_SIZE);
            if (!b)
                return NULL;
            b->next = a->head;
            a->head = b;
        }
        a->bytes += b->size;
    }
    p = (char *)b + b->used;
    b->used += need;
    return p;
}

static void arena_free_one(void *p)
{
    (void)p; /* freed with the arena */
}

struct json_arena *json_arena_new(void)
{
    return calloc(1, sizeof(struct json_arena));
}

cJSON *json_arena_parse(struct json_arena *a, const char *text, size_t len)
{
    cJSON_Hooks hooks = {.malloc_fn = arena_alloc, .free_fn = arena_free_one};
    cJSON *tree;

    if (!a || !text)
        return NULL;
    current = a;
    cJSON_InitHooks(&hooks);
    tree = cJSON_ParseWithLength(text, len);
    cJSON_InitHooks(NULL); /* malloc, free and realloc again */
    current = NULL;
    return tree;
}

void json_arena_reset(struct json_arena *a)
{
    struct block *b, *next;

    if (!a)
        return;
    for (b = a->head; b; b = next) {
        next = b->next;
        munmap(b, b->size);
    }
    a->head = NULL;
    a->bytes = 0;
}

size_t json_arena_bytes(const struct json_arena *a)
{
    return a ? a->bytes : 0;
}

void json_arena_free(struct json_arena *a)
{
    json_arena_reset(a);
    free(a);
}
