/* strmap.h: a map from strings to pointers (chained hashing, FNV-1a),
 * growing as it fills. Keys are copied; values belong to the caller. */
#ifndef VMG_STRMAP_H
#define VMG_STRMAP_H

#include <stddef.h>

typedef struct strmap strmap;

strmap *strmap_new(void);
/* strmap_free frees the map and its keys (not the values). NULL is fine. */
void strmap_free(strmap *m);
/* strmap_free_all frees the values too, each with free(). NULL is fine. */
void strmap_free_all(strmap *m);
/* strmap_set maps key to value, replacing an old value. 0 or -ENOMEM. */
int strmap_set(strmap *m, const char *key, void *value);
void *strmap_get(const strmap *m, const char *key);
/* strmap_del removes key and returns its value, or NULL. */
void *strmap_del(strmap *m, const char *key);
size_t strmap_count(const strmap *m);
/* strmap_foreach calls fn for each entry until it returns nonzero, which
 * strmap_foreach then returns. fn must not change the map. */
int strmap_foreach(const strmap *m, int (*fn)(void *data, const char *key, void *value),
                   void *data);

#endif
