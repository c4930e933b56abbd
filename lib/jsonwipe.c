/* jsonwipe.c: see jsonwipe.h. */
#include "lib/jsonwipe.h"

#include <malloc.h>
#include <stdlib.h>

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

/* The hooks in place outside json_parse_secret. */
static cJSON_Hooks outer = {.malloc_fn = malloc, .free_fn = free};

static void wiping_free(void *p)
{
    if (p)
        vmg_wipe(p, malloc_usable_size(p));
    outer.free_fn(p);
}

cJSON *json_parse_secret(const char *text, size_t len)
{
    cJSON_Hooks hooks = {.malloc_fn = outer.malloc_fn, .free_fn = wiping_free};
    cJSON *tree;

    cJSON_InitHooks(&hooks);
    tree = cJSON_ParseWithLength(text, len);
    cJSON_InitHooks(&outer); /* malloc and free: realloc too again */
    return tree;
}

void json_hooks_set(const cJSON_Hooks *h)
{
    outer = h ? *h : (cJSON_Hooks){.malloc_fn = malloc, .free_fn = free};
    if (!outer.malloc_fn)
        outer.malloc_fn = malloc; /* as cJSON takes a NULL hook */
    if (!outer.free_fn)
        outer.free_fn = free;
    cJSON_InitHooks(&outer);
}
