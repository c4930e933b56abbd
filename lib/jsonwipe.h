/* jsonwipe.h: wiping a parsed JSON document that held a secret (a Secret
 * object read from the API server) before it is freed. */
#ifndef VMG_JSONWIPE_H
#define VMG_JSONWIPE_H

#include <cjson/cJSON.h>

/* json_wipe overwrites every string value and key of j, its siblings after
 * it and their children, whole: each string's block, not only up to its
 * first NUL, since a string parsed from "\u0000" goes on after it. For trees
 * that cJSON_Parse (or cJSON_Duplicate) built with cJSON's default hooks
 * (malloc), not trees of lib/jsonarena. NULL is fine. */
void json_wipe(cJSON *j);

#endif
