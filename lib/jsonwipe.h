/* jsonwipe.h: wiping a parsed JSON document that held a secret (a Secret
 * object read from the API server) before it is freed. */
#ifndef VMG_JSONWIPE_H
#define VMG_JSONWIPE_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* json_wipe overwrites every string value and key of j, its siblings after
 * it and their children, whole: each string's block, not only up to its
 * first NUL, since a string parsed from "\u0000" goes on after it. For trees
 * that cJSON_Parse (or cJSON_Duplicate) built with cJSON's default hooks
 * (malloc), not trees of lib/jsonarena. NULL is fine. */
void json_wipe(cJSON *j);

/* json_parse_secret parses text[0..len) as cJSON_ParseWithLength does, but
 * every block cJSON frees on the way is wiped first: a text that turns out
 * malformed has its strings parsed so far freed by cJSON itself, before
 * json_wipe could see them. Wipe the tree returned (json_wipe) before
 * deleting it. Puts back the hooks of json_hooks_set after. */
cJSON *json_parse_secret(const char *text, size_t len);

/* json_hooks_set gives cJSON hooks (NULL: malloc and free) that
 * json_parse_secret puts back after its parse, and whose free_fn its own
 * free calls once it has wiped a block: a test's, to look at what is
 * freed. */
void json_hooks_set(const cJSON_Hooks *h);

#endif
