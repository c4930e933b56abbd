/* kfile.h: kubeconfig files as libyaml documents, for kubeconfig.c. A kset
 * holds the files KUBECONFIG (or --kubeconfig, or the home file) names, in
 * order, each read whole (at most 4 MiB) and parsed; lookups by name take
 * the first file that defines the name, as kubectl does. Every error is
 * VMG_ECONFIG, VMG_EPARSE or -ENOMEM with one line in errbuf that names the
 * file and the field, never a value that may be secret. */
#ifndef VMG_KUBE_KFILE_H
#define VMG_KUBE_KFILE_H

#include <stddef.h>

#include <yaml.h>

#define KSET_MAX_FILES 32 /* files in KUBECONFIG */

/* One kubeconfig file, parsed. */
struct kfile {
    char *path;
    char *dir; /* the folder relative references are resolved against */
    yaml_document_t doc;
    int has_doc;
    yaml_node_t *root; /* a mapping, or NULL for an empty file */
};

struct kset {
    struct kfile f[KSET_MAX_FILES];
    size_t n;
};

/* kfile_fail writes the message to errbuf (when errbuf and errlen allow)
 * and returns code: how every error of loading is reported. */
int kfile_fail(char *errbuf, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* kfile_strerror says what a kcred_read_file error means, for messages. */
const char *kfile_strerror(int r);

/* kfile_resolve is p when absolute (or dir is NULL), else dir/p (without
 * p's leading "./"); NULL when out of memory. */
char *kfile_resolve(const char *dir, const char *p);

/* kfile_node is the node id of f's document. */
yaml_node_t *kfile_node(struct kfile *f, int id);

/* kfile_is_null: absent, or a plain null scalar ("", "~", "null"). */
int kfile_is_null(const yaml_node_t *n);

/* kfile_get is the value under key in the mapping map, or NULL (also when
 * map is not a mapping). */
yaml_node_t *kfile_get(struct kfile *f, yaml_node_t *map, const char *key);

/* kfile_scalar_dup copies a string scalar into *ret; NULL and 0 for null;
 * -1 when n is not a scalar or holds a NUL; -ENOMEM. */
int kfile_scalar_dup(const yaml_node_t *n, char **ret);

/* kfile_str copies the string field key of map (NULL when unset);
 * kfile_bool reads a YAML 1.1 boolean (0 when unset). what names the map
 * in messages, e.g. `cluster "c1"`. */
int kfile_str(struct kfile *f, yaml_node_t *map, const char *key, const char *what, char **ret,
              char *errbuf, size_t errlen);
/* kfile_str_set is kfile_str where an empty string counts as unset. */
int kfile_str_set(struct kfile *f, yaml_node_t *map, const char *key, const char *what, char **ret,
                  char *errbuf, size_t errlen);
int kfile_bool(struct kfile *f, yaml_node_t *map, const char *key, const char *what, int *ret,
               char *errbuf, size_t errlen);

/* kset_add reads and parses path into s (a path already there is skipped).
 * A missing file is skipped (returning 0) unless required. */
int kset_add(struct kset *s, const char *path, int required, char *errbuf, size_t errlen);

/* kset_clear frees the files of s and empties it. */
void kset_clear(struct kset *s);

/* kset_find finds, in file order, the first entry of list (e.g.
 * "clusters") called name, and the mapping under its body key (e.g.
 * "cluster"; NULL when empty). Returns 1 when found, 0 when not, or an
 * error for a malformed list. */
int kset_find(struct kset *s, const char *list, const char *body_key, const char *name,
              struct kfile **ret_f, yaml_node_t **ret_body, char *errbuf, size_t errlen);

#endif
