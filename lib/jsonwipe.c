/* jsonwipe.c: see jsonwipe.h. */
#include "lib/jsonwipe.h"

#include <malloc.h>

#include "lib/buf.h"

void json_wipe(cJSON *j)
{
    for (; j; j = j->next) {
        /* A reference's strings are someone else's; parsing makes none. */
        if (j->valuestring && !(j->type & cJSON_IsReference))
            vmg_wipe(j->valuestring, malloc_usable_size(j->valuestring));
        if (j->string && !(j->type & cJSON_StringIsConst))
            vmg_wipe(j->string, malloc_usable_size(j->string));
        json_wipe(j->child);
    }
}
