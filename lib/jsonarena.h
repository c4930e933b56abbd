/* jsonarena.h: parsing a big, short-lived JSON document (a page of a list)
 * into an arena. cJSON would give each node and string its own malloc
 * block, interleaved with what the reader of the page keeps (the cached
 * objects), and freeing the tree would leave the heap in holes that no
 * page can be given back from. Here the tree lives in a few blocks mapped
 * for it alone, and unmapped together.
 *
 * A tree from json_arena_parse is read-only: never cJSON_Delete it, add to
 * it or detach from it; json_arena_reset frees it (and every other tree of
 * the arena). Parsing swaps cJSON's allocation hooks for its duration, so
 * it must not run alongside other cJSON use (the project's one loop does
 * not). */
#ifndef VMG_JSONARENA_H
#define VMG_JSONARENA_H

#include <stddef.h>

#include <cjson/cJSON.h>

struct json_arena;

/* json_arena_new makes an empty arena; NULL on -ENOMEM. */
struct json_arena *json_arena_new(void);
/* json_arena_parse parses len bytes of text into a; NULL when it is not
 * JSON or memory ran out. */
cJSON *json_arena_parse(struct json_arena *a, const char *text, size_t len);
/* json_arena_reset frees every tree parsed into a; a stays usable. */
void json_arena_reset(struct json_arena *a);
/* json_arena_bytes tells how many bytes a holds mapped. */
size_t json_arena_bytes(const struct json_arena *a);
/* json_arena_free frees a and its trees. NULL is fine. */
void json_arena_free(struct json_arena *a);

#endif
