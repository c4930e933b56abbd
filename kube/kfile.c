/* kfile.c: kubeconfig files as libyaml documents: reading them (bounded),
 * typed access to their fields, and the lookup of a named cluster, context
 * or user across the files KUBECONFIG lists. kubectl's rules for what to
 * do with them are kubeconfig.c's. */
#include "kube/kfile.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/cred.h"
#include "lib/buf.h"
#include "lib/err.h"
#include "lib/str.h"

#define KFILE_MAX_BYTES (4u << 20) /* one kubeconfig file */

int kfile_fail(char *errbuf, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmg_vputf(errbuf, errlen, fmt, ap);
    va_end(ap);
    return code;
}

/* ---- files ---- */

const char *kfile_strerror(int r)
{
    return r == VMG_ETOOBIG ? "file too large" : vmg_strerror(r);
}

/* kfile_dir_of is the folder of path ("." when it has none). */
static char *kfile_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return kcred_dup(path, (size_t)(slash - path));
}

/* kfile_resolve is p when absolute, else dir/p (without p's leading "./"). */
char *kfile_resolve(const char *dir, const char *p)
{
    size_t n;
    char *out;
    if (p[0] == '/' || !dir)
        return strdup(p);
    while (p[0] == '.' && p[1] == '/') {
        p += 2;
        while (*p == '/')
            p++;
    }
    n = strlen(dir) + strlen(p) + 2;
    out = malloc(n);
    if (out)
        snprintf(out, n, "%s/%s", dir, p);
    return out;
}

/* ---- YAML (libyaml's document API) ---- */

yaml_node_t *kfile_node(struct kfile *f, int id)
{
    return yaml_document_get_node(&f->doc, id);
}

static int kfile_scalar_is(const yaml_node_t *n, const char *s)
{
    size_t len = strlen(s);
    return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == len &&
           memcmp(n->data.scalar.value, s, len) == 0;
}

/* kfile_is_null: absent, or a plain null scalar ("", "~", "null"). */
int kfile_is_null(const yaml_node_t *n)
{
    if (!n)
        return 1;
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    return kfile_scalar_is(n, "") || kfile_scalar_is(n, "~") || kfile_scalar_is(n, "null") ||
           kfile_scalar_is(n, "Null") || kfile_scalar_is(n, "NULL");
}

yaml_node_t *kfile_get(struct kfile *f, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++)
        if (kfile_scalar_is(kfile_node(f, p->key), key))
            return kfile_node(f, p->value);
    return NULL;
}

/* kfile_scalar_dup copies a string scalar; NULL and 0 for null; -1 when n is not
 * a scalar or holds a NUL. */
int kfile_scalar_dup(const yaml_node_t *n, char **ret)
{
    const char *v;
    size_t len;
    *ret = NULL;
    if (kfile_is_null(n))
        return 0;
    if (n->type != YAML_SCALAR_NODE)
        return -1;
    v = (const char *)n->data.scalar.value;
    len = n->data.scalar.length;
    if (memchr(v, '\0', len))
        return -1;
    *ret = kcred_dup(v, len);
    return *ret ? 0 : -ENOMEM;
}

/* kfile_str copies the string field key of map (NULL when unset). what
 * names the map in messages, e.g. `cluster "c1"`. */
int kfile_str(struct kfile *f, yaml_node_t *map, const char *key, const char *what, char **ret,
              char *errbuf, size_t errlen)
{
    int r = kfile_scalar_dup(kfile_get(f, map, key), ret);
    if (r == -1)
        return kfile_fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s of %s is not a string",
                          f->path, key, what);
    return r;
}

int kfile_str_set(struct kfile *f, yaml_node_t *map, const char *key, const char *what, char **ret,
                  char *errbuf, size_t errlen)
{
    int r = kfile_str(f, map, key, what, ret, errbuf, errlen);
    if (r == 0 && *ret && !(*ret)[0]) {
        free(*ret);
        *ret = NULL;
    }
    return r;
}

int kfile_bool(struct kfile *f, yaml_node_t *map, const char *key, const char *what, int *ret,
               char *errbuf, size_t errlen)
{
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On"};
    static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off"};
    yaml_node_t *n = kfile_get(f, map, key);
    *ret = 0;
    if (kfile_is_null(n))
        return 0;
    if (n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
            if (kfile_scalar_is(n, yes[i])) {
                *ret = 1;
                return 0;
            }
            if (kfile_scalar_is(n, no[i]))
                return 0;
        }
    }
    return kfile_fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s of %s is not a boolean",
                      f->path, key, what);
}

/* A kubeconfig holds tokens and keys: libyaml's copies of it are wiped
 * before libyaml frees them. The parser's: its working and raw buffers
 * (the input, decoded), and the scalars of tokens not yet loaded (a
 * document that failed). The document's: every scalar's value, when the
 * file is done with. What libyaml's own realloc gave back while a buffer
 * grew is beyond reach (libyaml takes no allocator). */
static void kfile_wipe_parser(yaml_parser_t *p)
{
    if (p->buffer.start)
        vmg_wipe(p->buffer.start, (size_t)(p->buffer.end - p->buffer.start));
    if (p->raw_buffer.start)
        vmg_wipe(p->raw_buffer.start, (size_t)(p->raw_buffer.end - p->raw_buffer.start));
    for (yaml_token_t *t = p->tokens.head; t && t != p->tokens.tail; t++)
        if (t->type == YAML_SCALAR_TOKEN && t->data.scalar.value)
            vmg_wipe(t->data.scalar.value, t->data.scalar.length);
}

static void kfile_wipe_document(yaml_document_t *d)
{
    for (yaml_node_t *n = d->nodes.start; n && n < d->nodes.top; n++)
        if (n->type == YAML_SCALAR_NODE && n->data.scalar.value)
            vmg_wipe(n->data.scalar.value, n->data.scalar.length);
}

static int kfile_parse(struct kfile *f, const char *buf, size_t len, char *errbuf, size_t errlen)
{
    yaml_parser_t p;
    int r = 0;
    if (!yaml_parser_initialize(&p))
        return -ENOMEM;
    yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&p, &f->doc)) {
        if (p.error == YAML_MEMORY_ERROR)
            r = -ENOMEM;
        else
            r = kfile_fail(errbuf, errlen, VMG_EPARSE,
                           "kubeconfig %s: YAML error at line %zu column %zu: %s%s%s", f->path,
                           p.problem_mark.line + 1, p.problem_mark.column + 1,
                           p.problem ? p.problem : "invalid YAML", p.context ? " " : "",
                           p.context ? p.context : "");
        goto out;
    }
    f->has_doc = 1;
    f->root = yaml_document_get_root_node(&f->doc);
    if (kfile_is_null(f->root))
        f->root = NULL;
    else if (f->root->type != YAML_MAPPING_NODE)
        r = kfile_fail(errbuf, errlen, VMG_EPARSE, "kubeconfig %s: not a YAML mapping", f->path);
out:
    kfile_wipe_parser(&p);
    yaml_parser_delete(&p);
    return r;
}

/* kset_add reads and parses path into s. A missing file is skipped
 * (returning 0) unless required. */
int kset_add(struct kset *s, const char *path, int required, char *errbuf, size_t errlen)
{
    struct kfile *f;
    char *buf = NULL;
    size_t len = 0;
    int r;

    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->f[i].path, path) == 0)
            return 0;
    if (s->n == KSET_MAX_FILES)
        return kfile_fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig: more than %d files",
                          KSET_MAX_FILES);
    r = kcred_read_file(path, KFILE_MAX_BYTES, &buf, &len, NULL);
    if (r == -ENOENT && !required)
        return 0;
    if (r < 0)
        return kfile_fail(errbuf, errlen, r == -ENOMEM ? r : VMG_ECONFIG, "kubeconfig %s: %s", path,
                          kfile_strerror(r));
    f = &s->f[s->n];
    memset(f, 0, sizeof(*f));
    f->path = strdup(path);
    f->dir = kfile_dir_of(path);
    s->n++;
    if (!f->path || !f->dir)
        r = -ENOMEM;
    else
        r = kfile_parse(f, buf, len, errbuf, errlen);
    vmg_wipe_free(buf, len);
    return r;
}

void kset_clear(struct kset *s)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->f[i].has_doc) {
            kfile_wipe_document(&s->f[i].doc);
            yaml_document_delete(&s->f[i].doc);
        }
        free(s->f[i].path);
        free(s->f[i].dir);
    }
    s->n = 0;
}

/* kset_find finds, in file order, the first entry of list (e.g.
 * "clusters") called name, and the mapping under its body key (e.g.
 * "cluster"; NULL when empty). Returns 1 when found, 0 when not, or an
 * error for a malformed list. */
int kset_find(struct kset *s, const char *list, const char *body_key, const char *name,
              struct kfile **ret_f, yaml_node_t **ret_body, char *errbuf, size_t errlen)
{
    for (size_t i = 0; i < s->n; i++) {
        struct kfile *f = &s->f[i];
        yaml_node_t *seq = kfile_get(f, f->root, list);
        size_t k = 0;
        if (kfile_is_null(seq))
            continue;
        if (seq->type != YAML_SEQUENCE_NODE)
            return kfile_fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s is not a list",
                              f->path, list);
        for (yaml_node_item_t *it = seq->data.sequence.items.start;
             it < seq->data.sequence.items.top; it++, k++) {
            yaml_node_t *item = kfile_node(f, *it), *nm, *body;
            if (!item || item->type != YAML_MAPPING_NODE)
                return kfile_fail(errbuf, errlen, VMG_ECONFIG,
                                  "kubeconfig %s: %s[%zu] is not a mapping", f->path, list, k);
            nm = kfile_get(f, item, "name");
            if (kfile_is_null(nm) || nm->type != YAML_SCALAR_NODE)
                return kfile_fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s[%zu] has no name",
                                  f->path, list, k);
            if (!kfile_scalar_is(nm, name))
                continue;
            body = kfile_get(f, item, body_key);
            if (!kfile_is_null(body) && body->type != YAML_MAPPING_NODE)
                return kfile_fail(errbuf, errlen, VMG_ECONFIG,
                                  "kubeconfig %s: %s of %s[%zu] (\"%s\") is not a mapping", f->path,
                                  body_key, list, k, name);
            *ret_f = f;
            *ret_body = kfile_is_null(body) ? NULL : body;
            return 1;
        }
    }
    return 0;
}
