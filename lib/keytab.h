/* keytab.h: a table of entries found by a string key.
 *
 * The table holds pointers to entries that belong to the caller; each
 * entry embeds a struct keytab_node, whose key points at the entry's own
 * copy of its key. Open addressing with linear probing and backward-shift
 * deletion (no tombstones). Keys are hashed with FNV-1a from a per-table
 * seed and then mixed, so that names chosen to collide are harder to find;
 * the seed is not a keyed PRF.
 *
 * Adding is two steps so that a caller can fail before changing anything:
 * keytab_reserve (may fail with -ENOMEM), then keytab_insert (cannot fail). */
#ifndef VMG_KEYTAB_H
#define VMG_KEYTAB_H

#include <stddef.h>
#include <stdint.h>

struct keytab_node {
    uint64_t hash;
    const char *key;
};

struct keytab {
    struct keytab_node **slots; /* cap slots, NULL when empty; cap is 0 or a power of 2 */
    size_t cap;
    size_t count;
    uint64_t seed;
};

/* keytab_entry returns the entry of type that embeds node as member. */
#define keytab_entry(node, type, member) ((type *)(void *)((char *)(node)-offsetof(type, member)))

/* keytab_init makes an empty table with a fresh seed. */
void keytab_init(struct keytab *t);
/* keytab_release frees the table's slots, after passing each entry to
 * free_entry when that is not NULL. The table is empty afterwards. */
void keytab_release(struct keytab *t, void (*free_entry)(struct keytab_node *n));

/* keytab_key_len returns the length of key, or -EINVAL when it is NULL or
 * empty, or VMG_ETOOBIG when it is longer than max. */
long keytab_key_len(const char *key, size_t max);
/* keytab_hash hashes key (of len bytes) for t. */
uint64_t keytab_hash(const struct keytab *t, const char *key, size_t len);

/* keytab_find returns the node of key (hash h), or NULL. */
struct keytab_node *keytab_find(const struct keytab *t, const char *key, uint64_t h);
/* keytab_lookup hashes key (len bytes) and finds it; the hash goes to
 * *ret_hash (when not NULL), for a node to be inserted under it. */
struct keytab_node *keytab_lookup(const struct keytab *t, const char *key, size_t len,
                                  uint64_t *ret_hash);
/* keytab_reserve makes room for one more node: 0 or -ENOMEM. */
int keytab_reserve(struct keytab *t);
/* keytab_insert adds n, whose hash and key are set and whose key is not in
 * the table yet, after a successful keytab_reserve. */
void keytab_insert(struct keytab *t, struct keytab_node *n);
/* keytab_remove takes n out of the table; it shrinks when sparse. */
void keytab_remove(struct keytab *t, struct keytab_node *n);

#endif
