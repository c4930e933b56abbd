/* kubeconfig.c: kubectl's rules for finding the API server and the
 * credentials to use with it (kubeconfig files parsed with libyaml, or the
 * in-cluster service account), and their application to libcurl handles,
 * including exec credential plugins run on the loop. */
#include "kube/kubeconfig.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <yaml.h>

#include "lib/err.h"

extern char **environ;

#define MAX_CONFIG_BYTES (4u << 20) /* one kubeconfig file */
#define MAX_FILES 32                /* files in KUBECONFIG */
#define MAX_PEM_BYTES (1u << 20)    /* a CA bundle, certificate or key */
#define MAX_TOKEN_BYTES (64u << 10) /* a bearer token */
#define MAX_EXEC_ITEMS 256          /* exec args, exec env entries */
#define MAX_EXEC_OUT (1u << 20)     /* an exec plugin's stdout */
#define MAX_EXEC_ERR 4096           /* what is kept of its stderr */
#define EXEC_ERR_LINE 200           /* what of that a message shows */
#define EXEC_TIMEOUT_MS 30000
#define EXEC_GRACE_MS 2000 /* after SIGKILL, before giving up on the pipes */
#define REFRESH_MARGIN 10  /* seconds before expiry that count as expired */
#define INCLUSTER_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

#define EXEC_V1 "client.authentication.k8s.io/v1"
#define EXEC_V1BETA1 "client.authentication.k8s.io/v1beta1"

struct exec_run;

/* The exec plugin's configuration and the credential it last gave. */
struct kcfg_exec {
    char *api_version;
    char *command;
    char **args;
    size_t nargs;
    char **env; /* "NAME=VALUE" */
    size_t nenv;
    char *install_hint;
    int provide_cluster_info;

    int have; /* a credential was fetched */
    int invalid;
    char *token;
    char *cert;
    size_t cert_len;
    char *key;
    size_t key_len;
    time_t expiry; /* 0: none */
    struct exec_run *run;
};

struct kcfg {
    char *source;
    char *context;
    char *namespace;
    char *server; /* as configured, normalized */
    char *url;    /* what requests use: host replaced by tls-server-name */
    char *tls_server_name;
    struct curl_slist *connect_to;
    int insecure;
    int in_cluster;
    char *ca;
    size_t ca_len;
    char *cert;
    size_t cert_len;
    char *key;
    size_t key_len;
    char *token;      /* static token */
    char *token_file; /* tokenFile or the in-cluster token */
    char *file_token;
    struct stat token_st;
    int token_st_valid;
    struct kcfg_exec *exec;
    unsigned exec_timeout_ms;
};

/* One kubeconfig file, parsed. */
struct kfile {
    char *path;
    char *dir;
    yaml_document_t doc;
    int has_doc;
    yaml_node_t *root; /* a mapping, or NULL for an empty file */
};

struct kset {
    struct kfile f[MAX_FILES];
    size_t n;
};

__attribute__((format(printf, 4, 5))) static int fail(char *errbuf, size_t errlen, int code,
                                                      const char *fmt, ...)
{
    if (errbuf && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

static void free_secret(char *p, size_t len)
{
    if (p) {
        OPENSSL_cleanse(p, len);
        free(p);
    }
}

static void free_secret_str(char *p)
{
    if (p)
        free_secret(p, strlen(p));
}

static char *dup_mem(const char *s, size_t len)
{
    char *p = malloc(len + 1);
    if (!p)
        return NULL;
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

/* ---- files ---- */

/* read_file reads all of path (at most max bytes) into a new NUL-terminated
 * buffer. The file's status, taken before reading, goes to *ret_st when
 * ret_st is not NULL. Returns 0, a negated errno or VMG_ETOOBIG. */
static int read_file(const char *path, size_t max, char **ret, size_t *ret_len, struct stat *ret_st)
{
    struct stat st;
    char *buf = NULL;
    size_t len = 0, cap;
    int r = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        r = -errno;
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        r = -EISDIR;
        goto out;
    }
    cap = st.st_size > 0 && (size_t)st.st_size < max ? (size_t)st.st_size + 1 : 4096;
    buf = malloc(cap + 1);
    if (!buf) {
        r = -ENOMEM;
        goto out;
    }
    for (;;) {
        ssize_t n;
        if (len == cap) {
            char *nb;
            if (cap > max) {
                r = VMG_ETOOBIG;
                goto out;
            }
            cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            nb = realloc(buf, cap + 1);
            if (!nb) {
                r = -ENOMEM;
                goto out;
            }
            buf = nb;
        }
        n = read(fd, buf + len, cap - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (len > max) {
        r = VMG_ETOOBIG;
        goto out;
    }
    buf[len] = '\0';
    *ret = buf;
    *ret_len = len;
    if (ret_st)
        *ret_st = st;
    buf = NULL;
out:
    free_secret(buf, len);
    close(fd);
    return r;
}

static const char *file_strerror(int r)
{
    return r == VMG_ETOOBIG ? "file too large" : vmg_strerror(r);
}

/* dir_of is the folder of path ("." when it has none). */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return dup_mem(path, (size_t)(slash - path));
}

/* resolve is p when absolute, else dir/p (without p's leading "./"). */
static char *resolve(const char *dir, const char *p)
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

/* ---- base64 and PEM (OpenSSL) ---- */

/* b64_decode decodes standard, padded base64 (what kubectl accepts);
 * whitespace is ignored. Returns 0, VMG_EPARSE or -ENOMEM. */
static int b64_decode(const char *in, size_t inlen, char **ret, size_t *ret_len)
{
    EVP_ENCODE_CTX *ctx;
    unsigned char *out;
    int n = 0, m = 0, r = 0;
    size_t sig = 0;

    for (size_t i = 0; i < inlen; i++)
        if (!isspace((unsigned char)in[i]))
            sig++;
    if (sig == 0 || sig % 4 != 0)
        return VMG_EPARSE;
    if (inlen > INT_MAX / 2)
        return VMG_EPARSE;
    out = malloc(inlen + 1);
    ctx = EVP_ENCODE_CTX_new();
    if (!out || !ctx) {
        r = -ENOMEM;
        goto out;
    }
    EVP_DecodeInit(ctx);
    if (EVP_DecodeUpdate(ctx, out, &n, (const unsigned char *)in, (int)inlen) < 0 ||
        EVP_DecodeFinal(ctx, out + n, &m) != 1) {
        r = VMG_EPARSE;
        goto out;
    }
    out[n + m] = '\0';
    *ret = (char *)out;
    *ret_len = (size_t)(n + m);
    out = NULL;
out:
    EVP_ENCODE_CTX_free(ctx);
    free_secret((char *)out, inlen + 1);
    return r;
}

static char *b64_encode(const char *in, size_t len)
{
    size_t n = 4 * ((len + 2) / 3) + 1;
    char *out;
    if (len > INT_MAX / 2)
        return NULL;
    out = malloc(n);
    if (out)
        EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)in, (int)len);
    return out;
}

/* A pass phrase callback that refuses: never prompt on a terminal. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return -1;
}

/* pem_certs counts the PEM certificates in pem (0 when none parses). */
static int pem_certs(const char *pem, size_t len)
{
    int n = 0;
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    X509 *x;
    if (!b)
        return -ENOMEM;
    while ((x = PEM_read_bio_X509(b, NULL, no_passphrase, NULL)) != NULL) {
        X509_free(x);
        n++;
    }
    BIO_free(b);
    ERR_clear_error();
    return n;
}

enum { PAIR_OK, PAIR_BAD_CERT, PAIR_BAD_KEY, PAIR_MISMATCH };

/* check_pair says whether cert and key are PEM and belong together. */
static int check_pair(const char *cert, size_t cert_len, const char *key, size_t key_len)
{
    int r = PAIR_OK;
    X509 *x = NULL;
    EVP_PKEY *k = NULL;
    BIO *cb = BIO_new_mem_buf(cert, (int)cert_len);
    BIO *kb = BIO_new_mem_buf(key, (int)key_len);
    if (!cb || !kb) {
        r = -ENOMEM;
        goto out;
    }
    x = PEM_read_bio_X509(cb, NULL, no_passphrase, NULL);
    if (!x) {
        r = PAIR_BAD_CERT;
        goto out;
    }
    k = PEM_read_bio_PrivateKey(kb, NULL, no_passphrase, NULL);
    if (!k) {
        r = PAIR_BAD_KEY;
        goto out;
    }
    if (X509_check_private_key(x, k) != 1)
        r = PAIR_MISMATCH;
out:
    EVP_PKEY_free(k);
    X509_free(x);
    BIO_free(kb);
    BIO_free(cb);
    ERR_clear_error();
    return r;
}

/* token_ok: a token must be non-empty and printable, as it goes in a header. */
static int token_ok(const char *t, size_t len)
{
    if (len == 0)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)t[i];
        if (ch < 0x20 || ch == 0x7f)
            return 0;
    }
    return 1;
}

/* ---- RFC 3339 ---- */

static int digits(const char *s, int n, int *ret)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *ret = v;
    return 0;
}

/* parse_time parses "2006-01-02T15:04:05[.frac](Z|+hh:mm|-hh:mm)". */
static int parse_time(const char *s, time_t *ret)
{
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int Y, M, D, h, m, sec, oh = 0, om = 0, sign = 0;
    struct tm tm = {0};
    time_t t;
    size_t len = strlen(s);

    if (len < 20 || digits(s, 4, &Y) || s[4] != '-' || digits(s + 5, 2, &M) || s[7] != '-' ||
        digits(s + 8, 2, &D) || (s[10] != 'T' && s[10] != 't') || digits(s + 11, 2, &h) ||
        s[13] != ':' || digits(s + 14, 2, &m) || s[16] != ':' || digits(s + 17, 2, &sec))
        return VMG_EPARSE;
    s += 19;
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9')
            return VMG_EPARSE;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'Z' || *s == 'z') {
        s++;
    } else if (*s == '+' || *s == '-') {
        sign = *s == '+' ? 1 : -1;
        if (digits(s + 1, 2, &oh) || s[3] != ':' || digits(s + 4, 2, &om) || oh > 23 || om > 59)
            return VMG_EPARSE;
        s += 6;
    } else {
        return VMG_EPARSE;
    }
    if (*s != '\0' || M < 1 || M > 12 || D < 1 || D > mdays[M - 1] || h > 23 || m > 59 || sec > 60)
        return VMG_EPARSE;
    tm.tm_year = Y - 1900;
    tm.tm_mon = M - 1;
    tm.tm_mday = D;
    tm.tm_hour = h;
    tm.tm_min = m;
    tm.tm_sec = sec;
    t = timegm(&tm);
    if (t == (time_t)-1 && !(Y == 1969 && M == 12 && D == 31))
        return VMG_EPARSE;
    *ret = t - sign * (oh * 3600 + om * 60);
    return 0;
}

/* ---- YAML (libyaml's document API) ---- */

static yaml_node_t *node(struct kfile *f, int id)
{
    return yaml_document_get_node(&f->doc, id);
}

static int scalar_is(const yaml_node_t *n, const char *s)
{
    size_t len = strlen(s);
    return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == len &&
           memcmp(n->data.scalar.value, s, len) == 0;
}

/* is_null: absent, or a plain null scalar ("", "~", "null"). */
static int is_null(const yaml_node_t *n)
{
    if (!n)
        return 1;
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    return scalar_is(n, "") || scalar_is(n, "~") || scalar_is(n, "null") || scalar_is(n, "Null") ||
           scalar_is(n, "NULL");
}

static yaml_node_t *map_get(struct kfile *f, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++)
        if (scalar_is(node(f, p->key), key))
            return node(f, p->value);
    return NULL;
}

/* scalar_dup copies a string scalar; NULL and 0 for null; -1 when n is not
 * a scalar or holds a NUL. */
static int scalar_dup(const yaml_node_t *n, char **ret)
{
    const char *v;
    size_t len;
    *ret = NULL;
    if (is_null(n))
        return 0;
    if (n->type != YAML_SCALAR_NODE)
        return -1;
    v = (const char *)n->data.scalar.value;
    len = n->data.scalar.length;
    if (memchr(v, '\0', len))
        return -1;
    *ret = dup_mem(v, len);
    return *ret ? 0 : -ENOMEM;
}

/* field_str copies the string field key of map (NULL when unset). what
 * names the map in messages, e.g. `cluster "c1"`. */
static int field_str(struct kfile *f, yaml_node_t *map, const char *key, const char *what,
                     char **ret, char *errbuf, size_t errlen)
{
    int r = scalar_dup(map_get(f, map, key), ret);
    if (r == -1)
        return fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s of %s is not a string", f->path,
                    key, what);
    return r;
}

static int field_bool(struct kfile *f, yaml_node_t *map, const char *key, const char *what,
                      int *ret, char *errbuf, size_t errlen)
{
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On"};
    static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off"};
    yaml_node_t *n = map_get(f, map, key);
    *ret = 0;
    if (is_null(n))
        return 0;
    if (n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
            if (scalar_is(n, yes[i])) {
                *ret = 1;
                return 0;
            }
            if (scalar_is(n, no[i]))
                return 0;
        }
    }
    return fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s of %s is not a boolean", f->path,
                key, what);
}

static int load_kfile(struct kfile *f, const char *buf, size_t len, char *errbuf, size_t errlen)
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
            r = fail(errbuf, errlen, VMG_EPARSE,
                     "kubeconfig %s: YAML error at line %zu column %zu: %s%s%s", f->path,
                     p.problem_mark.line + 1, p.problem_mark.column + 1,
                     p.problem ? p.problem : "invalid YAML", p.context ? " " : "",
                     p.context ? p.context : "");
        goto out;
    }
    f->has_doc = 1;
    f->root = yaml_document_get_root_node(&f->doc);
    if (is_null(f->root))
        f->root = NULL;
    else if (f->root->type != YAML_MAPPING_NODE)
        r = fail(errbuf, errlen, VMG_EPARSE, "kubeconfig %s: not a YAML mapping", f->path);
out:
    yaml_parser_delete(&p);
    return r;
}

/* add_file reads and parses path into s. A missing file is skipped
 * (returning 0) unless required. */
static int add_file(struct kset *s, const char *path, int required, char *errbuf, size_t errlen)
{
    struct kfile *f;
    char *buf = NULL;
    size_t len = 0;
    int r;

    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->f[i].path, path) == 0)
            return 0;
    if (s->n == MAX_FILES)
        return fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig: more than %d files", MAX_FILES);
    r = read_file(path, MAX_CONFIG_BYTES, &buf, &len, NULL);
    if (r == -ENOENT && !required)
        return 0;
    if (r < 0)
        return fail(errbuf, errlen, r == -ENOMEM ? r : VMG_ECONFIG, "kubeconfig %s: %s", path,
                    file_strerror(r));
    f = &s->f[s->n];
    memset(f, 0, sizeof(*f));
    f->path = strdup(path);
    f->dir = dir_of(path);
    s->n++;
    if (!f->path || !f->dir)
        r = -ENOMEM;
    else
        r = load_kfile(f, buf, len, errbuf, errlen);
    free_secret(buf, len);
    return r;
}

static void kset_clear(struct kset *s)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->f[i].has_doc)
            yaml_document_delete(&s->f[i].doc);
        free(s->f[i].path);
        free(s->f[i].dir);
    }
    s->n = 0;
}

/* find_named finds, in file order, the first entry of list (e.g.
 * "clusters") called name, and the mapping under its body key (e.g.
 * "cluster"; NULL when empty). Returns 1 when found, 0 when not, or an
 * error for a malformed list. */
static int find_named(struct kset *s, const char *list, const char *body_key, const char *name,
                      struct kfile **ret_f, yaml_node_t **ret_body, char *errbuf, size_t errlen)
{
    for (size_t i = 0; i < s->n; i++) {
        struct kfile *f = &s->f[i];
        yaml_node_t *seq = map_get(f, f->root, list);
        size_t k = 0;
        if (is_null(seq))
            continue;
        if (seq->type != YAML_SEQUENCE_NODE)
            return fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s is not a list", f->path,
                        list);
        for (yaml_node_item_t *it = seq->data.sequence.items.start;
             it < seq->data.sequence.items.top; it++, k++) {
            yaml_node_t *item = node(f, *it), *nm, *body;
            if (!item || item->type != YAML_MAPPING_NODE)
                return fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s[%zu] is not a mapping",
                            f->path, list, k);
            nm = map_get(f, item, "name");
            if (is_null(nm) || nm->type != YAML_SCALAR_NODE)
                return fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s[%zu] has no name",
                            f->path, list, k);
            if (!scalar_is(nm, name))
                continue;
            body = map_get(f, item, body_key);
            if (!is_null(body) && body->type != YAML_MAPPING_NODE)
                return fail(errbuf, errlen, VMG_ECONFIG,
                            "kubeconfig %s: %s of %s[%zu] (\"%s\") is not a mapping", f->path,
                            body_key, list, k, name);
            *ret_f = f;
            *ret_body = is_null(body) ? NULL : body;
            return 1;
        }
    }
    return 0;
}

/* ---- the cluster ---- */

static char *url_part(CURLU *u, CURLUPart part, unsigned flags)
{
    char *v = NULL, *out;
    if (curl_url_get(u, part, &v, flags) != CURLUE_OK)
        return NULL;
    out = strdup(v);
    curl_free(v);
    return out;
}

static void strip_slashes(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '/')
        s[--n] = '\0';
}

/* set_server normalizes server (kubectl assumes https when there is no
 * scheme) into c->server, and derives c->url and c->connect_to from
 * tls_name. what and where name the cluster in messages. */
static int set_server(kcfg *c, const char *server, const char *tls_name, const char *where,
                      const char *what, char *errbuf, size_t errlen)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *tls_host = NULL;
    int r = 0;
    size_t n;

    if (!u)
        return -ENOMEM;
    if (curl_url_set(u, CURLUPART_URL, server, CURLU_DEFAULT_SCHEME | CURLU_NON_SUPPORT_SCHEME) !=
        CURLUE_OK) {
        r = fail(errbuf, errlen, VMG_ECONFIG, "%s: server of %s is not a valid URL", where, what);
        goto out;
    }
    scheme = url_part(u, CURLUPART_SCHEME, 0);
    host = url_part(u, CURLUPART_HOST, 0);
    port = url_part(u, CURLUPART_PORT, CURLU_DEFAULT_PORT);
    c->server = url_part(u, CURLUPART_URL, 0);
    if (!scheme || !host || !port || !c->server) {
        r = -ENOMEM;
        goto out;
    }
    if (strcmp(scheme, "https") != 0 && strcmp(scheme, "http") != 0) {
        r = fail(errbuf, errlen, VMG_ECONFIG, "%s: server of %s is not an http or https URL", where,
                 what);
        goto out;
    }
    strip_slashes(c->server);
    if (!tls_name || strcmp(scheme, "https") != 0) {
        c->url = strdup(c->server);
        r = c->url ? 0 : -ENOMEM;
        goto out;
    }
    if (curl_url_set(u, CURLUPART_HOST, tls_name, 0) != CURLUE_OK ||
        !(tls_host = url_part(u, CURLUPART_HOST, 0))) {
        r = fail(errbuf, errlen, VMG_ECONFIG, "%s: tls-server-name of %s is not a valid host name",
                 where, what);
        goto out;
    }
    c->url = url_part(u, CURLUPART_URL, 0);
    if (!c->url) {
        r = -ENOMEM;
        goto out;
    }
    strip_slashes(c->url);
    n = strlen(tls_host) + strlen(host) + 2 * strlen(port) + 4;
    {
        char *entry = malloc(n);
        struct curl_slist *l;
        if (!entry) {
            r = -ENOMEM;
            goto out;
        }
        snprintf(entry, n, "%s:%s:%s:%s", tls_host, port, host, port);
        l = curl_slist_append(NULL, entry);
        free(entry);
        if (!l) {
            r = -ENOMEM;
            goto out;
        }
        c->connect_to = l;
    }
out:
    free(tls_host);
    free(port);
    free(host);
    free(scheme);
    curl_url_cleanup(u);
    return r;
}

/* load_pem reads the bytes of the data field (base64) of map or, when it
 * is unset, of the file its file field names (resolved against the
 * kubeconfig's folder). *ret is NULL when neither is set. */
static int load_pem(struct kfile *f, yaml_node_t *map, const char *data_key, const char *file_key,
                    const char *what, char **ret, size_t *ret_len, char *errbuf, size_t errlen)
{
    char *data = NULL, *path = NULL, *full = NULL;
    int r;

    *ret = NULL;
    *ret_len = 0;
    r = field_str(f, map, data_key, what, &data, errbuf, errlen);
    if (r < 0)
        goto out;
    if (data && data[0]) {
        r = b64_decode(data, strlen(data), ret, ret_len);
        if (r == VMG_EPARSE)
            r = fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s of %s is not valid base64",
                     f->path, data_key, what);
        goto out;
    }
    r = field_str(f, map, file_key, what, &path, errbuf, errlen);
    if (r < 0 || !path || !path[0])
        goto out;
    full = resolve(f->dir, path);
    if (!full) {
        r = -ENOMEM;
        goto out;
    }
    r = read_file(full, MAX_PEM_BYTES, ret, ret_len, NULL);
    if (r < 0 && r != -ENOMEM)
        r = fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s of %s: file %s: %s", f->path,
                 file_key, what, full, file_strerror(r));
out:
    free_secret_str(data);
    free(path);
    free(full);
    return r;
}

static int load_cluster(kcfg *c, struct kfile *f, yaml_node_t *body, const char *name, char *errbuf,
                        size_t errlen)
{
    char what[320], where[PATH_MAX + 16];
    char *server = NULL;
    int r, n;

    snprintf(what, sizeof(what), "cluster \"%s\"", name);
    snprintf(where, sizeof(where), "kubeconfig %s", f->path);
    r = field_str(f, body, "server", what, &server, errbuf, errlen);
    if (r < 0)
        goto out;
    if (!server || !server[0]) {
        r = fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: cluster \"%s\" has no server",
                 f->path, name);
        goto out;
    }
    r = field_str(f, body, "tls-server-name", what, &c->tls_server_name, errbuf, errlen);
    if (r < 0)
        goto out;
    if (c->tls_server_name && !c->tls_server_name[0]) {
        free(c->tls_server_name);
        c->tls_server_name = NULL;
    }
    r = set_server(c, server, c->tls_server_name, where, what, errbuf, errlen);
    if (r < 0)
        goto out;
    r = field_bool(f, body, "insecure-skip-tls-verify", what, &c->insecure, errbuf, errlen);
    if (r < 0)
        goto out;
    r = load_pem(f, body, "certificate-authority-data", "certificate-authority", what, &c->ca,
                 &c->ca_len, errbuf, errlen);
    if (r < 0)
        goto out;
    if (c->ca && c->insecure) {
        r = fail(errbuf, errlen, VMG_ECONFIG,
                 "kubeconfig %s: cluster \"%s\" sets both insecure-skip-tls-verify and a "
                 "certificate authority",
                 f->path, name);
        goto out;
    }
    if (c->ca) {
        n = pem_certs(c->ca, c->ca_len);
        if (n < 0) {
            r = n;
            goto out;
        }
        if (n == 0)
            r = fail(errbuf, errlen, VMG_ECONFIG,
                     "kubeconfig %s: the certificate authority of cluster \"%s\" holds no PEM "
                     "certificate",
                     f->path, name);
    }
out:
    free(server);
    return r;
}

/* ---- the user ---- */

static int load_str_list(struct kfile *f, yaml_node_t *seq, const char *what, const char *key,
                         char ***ret, size_t *ret_n, char *errbuf, size_t errlen)
{
    size_t n;
    char **v;
    if (is_null(seq))
        return 0;
    if (seq->type != YAML_SEQUENCE_NODE)
        return fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s of %s is not a list", f->path,
                    key, what);
    n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n > MAX_EXEC_ITEMS)
        return fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s of %s has more than %d items",
                    f->path, key, what, MAX_EXEC_ITEMS);
    v = calloc(n + 1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    *ret = v;
    for (size_t i = 0; i < n; i++) {
        int r = scalar_dup(node(f, seq->data.sequence.items.start[i]), &v[i]);
        if (r == -1)
            return fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s[%zu] of %s is not a string",
                        f->path, key, i, what);
        if (r < 0)
            return r;
        if (!v[i] && !(v[i] = strdup("")))
            return -ENOMEM;
        *ret_n = i + 1;
    }
    return 0;
}

static int load_exec_env(struct kfile *f, struct kcfg_exec *e, yaml_node_t *seq, const char *what,
                         char *errbuf, size_t errlen)
{
    size_t n;
    if (is_null(seq))
        return 0;
    if (seq->type != YAML_SEQUENCE_NODE)
        return fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: exec env of %s is not a list",
                    f->path, what);
    n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n > MAX_EXEC_ITEMS)
        return fail(errbuf, errlen, VMG_ECONFIG,
                    "kubeconfig %s: exec env of %s has more than %d items", f->path, what,
                    MAX_EXEC_ITEMS);
    e->env = calloc(n + 1, sizeof(*e->env));
    if (!e->env)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = node(f, seq->data.sequence.items.start[i]);
        char *name = NULL, *value = NULL;
        size_t len;
        int r = -1;
        if (item && item->type == YAML_MAPPING_NODE) {
            r = scalar_dup(map_get(f, item, "name"), &name);
            if (r == 0)
                r = scalar_dup(map_get(f, item, "value"), &value);
        }
        if (r == 0 && (!name || !name[0] || strchr(name, '=')))
            r = -2;
        if (r == 0) {
            len = strlen(name) + (value ? strlen(value) : 0) + 2;
            e->env[i] = malloc(len);
            if (e->env[i]) {
                snprintf(e->env[i], len, "%s=%s", name, value ? value : "");
                e->nenv = i + 1;
            } else {
                r = -ENOMEM;
            }
        }
        free(name);
        free(value);
        if (r == -1 || r == -2)
            return fail(errbuf, errlen, VMG_ECONFIG,
                        "kubeconfig %s: exec env[%zu] of %s needs a name and a string value",
                        f->path, i, what);
        if (r < 0)
            return r;
    }
    return 0;
}

static int load_exec(kcfg *c, struct kfile *f, yaml_node_t *ex, const char *what, char *errbuf,
                     size_t errlen)
{
    struct kcfg_exec *e;
    char *cmd = NULL;
    int r;

    if (ex->type != YAML_MAPPING_NODE)
        return fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: exec of %s is not a mapping",
                    f->path, what);
    e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    c->exec = e;
    r = field_str(f, ex, "apiVersion", what, &e->api_version, errbuf, errlen);
    if (r < 0)
        return r;
    if (!e->api_version)
        return fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: exec of %s has no apiVersion",
                    f->path, what);
    if (strcmp(e->api_version, EXEC_V1) != 0 && strcmp(e->api_version, EXEC_V1BETA1) != 0)
        return fail(errbuf, errlen, VMG_ECONFIG,
                    "kubeconfig %s: exec of %s has apiVersion \"%.64s\"; supported are " EXEC_V1
                    " and " EXEC_V1BETA1,
                    f->path, what, e->api_version);
    r = field_str(f, ex, "command", what, &cmd, errbuf, errlen);
    if (r < 0)
        return r;
    if (!cmd || !cmd[0]) {
        free(cmd);
        return fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: exec of %s has no command",
                    f->path, what);
    }
    /* kubectl: a command with a path separator is relative to the file. */
    e->command = strchr(cmd, '/') ? resolve(f->dir, cmd) : strdup(cmd);
    free(cmd);
    if (!e->command)
        return -ENOMEM;
    r = load_str_list(f, map_get(f, ex, "args"), what, "exec args", &e->args, &e->nargs, errbuf,
                      errlen);
    if (r < 0)
        return r;
    r = load_exec_env(f, e, map_get(f, ex, "env"), what, errbuf, errlen);
    if (r < 0)
        return r;
    r = field_str(f, ex, "installHint", what, &e->install_hint, errbuf, errlen);
    if (r < 0)
        return r;
    return field_bool(f, ex, "provideClusterInfo", what, &e->provide_cluster_info, errbuf, errlen);
}

/* refresh_file_token (re)reads c->token_file when it changed since the last
 * read, or always with force. On failure the old token is kept. */
static int refresh_file_token(kcfg *c, int force)
{
    struct stat st;
    char *buf = NULL;
    size_t len = 0, start = 0;
    int r;

    if (stat(c->token_file, &st) < 0)
        return -errno;
    if (!force && c->token_st_valid && st.st_dev == c->token_st.st_dev &&
        st.st_ino == c->token_st.st_ino && st.st_size == c->token_st.st_size &&
        st.st_mtim.tv_sec == c->token_st.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == c->token_st.st_mtim.tv_nsec &&
        st.st_ctim.tv_sec == c->token_st.st_ctim.tv_sec &&
        st.st_ctim.tv_nsec == c->token_st.st_ctim.tv_nsec)
        return 0;
    r = read_file(c->token_file, MAX_TOKEN_BYTES, &buf, &len, &st);
    if (r < 0)
        return r;
    while (len > 0 && isspace((unsigned char)buf[len - 1]))
        buf[--len] = '\0';
    while (start < len && isspace((unsigned char)buf[start]))
        start++;
    if (!token_ok(buf + start, len - start)) {
        free_secret(buf, len);
        return VMG_EPARSE;
    }
    if (start > 0)
        memmove(buf, buf + start, len - start + 1);
    free_secret_str(c->file_token);
    c->file_token = buf;
    c->token_st = st;
    c->token_st_valid = 1;
    return 0;
}

static const char *token_strerror(int r)
{
    return r == VMG_EPARSE ? "empty or holds control characters" : file_strerror(r);
}

static int load_user(kcfg *c, struct kfile *f, yaml_node_t *body, const char *name, char *errbuf,
                     size_t errlen)
{
    char what[320];
    char *token_file = NULL;
    yaml_node_t *ex;
    int r, pr;

    snprintf(what, sizeof(what), "user \"%s\"", name);
    if (!is_null(map_get(f, body, "auth-provider"))) {
        r = fail(errbuf, errlen, VMG_ECONFIG,
                 "kubeconfig %s: user \"%s\" uses auth-provider, which is not supported; use an "
                 "exec credential plugin",
                 f->path, name);
        goto out;
    }
    if (!is_null(map_get(f, body, "username")) || !is_null(map_get(f, body, "password"))) {
        r = fail(errbuf, errlen, VMG_ECONFIG,
                 "kubeconfig %s: user \"%s\" uses username/password (basic authentication), "
                 "which is not supported",
                 f->path, name);
        goto out;
    }
    r = load_pem(f, body, "client-certificate-data", "client-certificate", what, &c->cert,
                 &c->cert_len, errbuf, errlen);
    if (r < 0)
        goto out;
    r = load_pem(f, body, "client-key-data", "client-key", what, &c->key, &c->key_len, errbuf,
                 errlen);
    if (r < 0)
        goto out;
    if (!c->cert != !c->key) {
        r = fail(errbuf, errlen, VMG_ECONFIG,
                 "kubeconfig %s: user \"%s\" has a client %s but no %s", f->path, name,
                 c->cert ? "certificate" : "key", c->cert ? "client-key" : "client-certificate");
        goto out;
    }
    if (c->cert) {
        pr = check_pair(c->cert, c->cert_len, c->key, c->key_len);
        if (pr < 0) {
            r = pr;
            goto out;
        }
        if (pr != PAIR_OK) {
            r = fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s of user \"%s\"", f->path,
                     pr == PAIR_BAD_CERT  ? "the client certificate is not a PEM certificate"
                     : pr == PAIR_BAD_KEY ? "the client key is not an unencrypted PEM private key"
                                          : "the client key does not match the client certificate",
                     name);
            goto out;
        }
    }
    r = field_str(f, body, "token", what, &c->token, errbuf, errlen);
    if (r < 0)
        goto out;
    if (c->token && !c->token[0]) {
        free(c->token);
        c->token = NULL;
    }
    if (c->token && !token_ok(c->token, strlen(c->token))) {
        r = fail(errbuf, errlen, VMG_ECONFIG,
                 "kubeconfig %s: token of user \"%s\" holds control "
                 "characters",
                 f->path, name);
        goto out;
    }
    r = field_str(f, body, "tokenFile", what, &token_file, errbuf, errlen);
    if (r < 0)
        goto out;
    if (token_file && token_file[0] && !c->token) {
        c->token_file = resolve(f->dir, token_file);
        if (!c->token_file) {
            r = -ENOMEM;
            goto out;
        }
        r = refresh_file_token(c, 1);
        if (r < 0) {
            r = fail(errbuf, errlen, r == -ENOMEM ? r : VMG_ECONFIG,
                     "kubeconfig %s: tokenFile of user \"%s\": file %s: %s", f->path, name,
                     c->token_file, token_strerror(r));
            goto out;
        }
    }
    ex = map_get(f, body, "exec");
    if (!is_null(ex)) {
        if (c->token || c->token_file) {
            r = fail(errbuf, errlen, VMG_ECONFIG,
                     "kubeconfig %s: user \"%s\" sets both exec and token/tokenFile; use one",
                     f->path, name);
            goto out;
        }
        r = load_exec(c, f, ex, what, errbuf, errlen);
    }
out:
    free(token_file);
    return r;
}

/* ---- where the configuration comes from ---- */

static char *join_paths(const struct kset *s)
{
    size_t n = 1;
    char *out;
    for (size_t i = 0; i < s->n; i++)
        n += strlen(s->f[i].path) + 1;
    out = malloc(n);
    if (!out)
        return NULL;
    out[0] = '\0';
    for (size_t i = 0, at = 0; i < s->n; i++)
        at += (size_t)snprintf(out + at, n - at, "%s%s", i ? ":" : "", s->f[i].path);
    return out;
}

static int load_from_files(kcfg *c, struct kset *s, const char *want, char *errbuf, size_t errlen)
{
    struct kfile *cf, *f;
    yaml_node_t *ctx, *body;
    char *ctx_name = NULL, *cluster = NULL, *user = NULL, *label;
    char what[320];
    int r;

    c->source = join_paths(s);
    if (!c->source)
        return -ENOMEM;
    label = c->source;
    if (want && want[0]) {
        ctx_name = strdup(want);
        if (!ctx_name)
            return -ENOMEM;
    }
    for (size_t i = 0; i < s->n && !ctx_name; i++) {
        r = field_str(&s->f[i], s->f[i].root, "current-context", "the file", &ctx_name, errbuf,
                      errlen);
        if (r < 0)
            return r;
        if (ctx_name && !ctx_name[0]) {
            free(ctx_name);
            ctx_name = NULL;
        }
    }
    if (!ctx_name)
        return fail(errbuf, errlen, VMG_ECONFIG,
                    "kubeconfig %s: current-context is not set and no context was given", label);
    c->context = ctx_name;
    r = find_named(s, "contexts", "context", ctx_name, &cf, &ctx, errbuf, errlen);
    if (r < 0)
        goto out;
    if (r == 0) {
        r = fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: context \"%s\" is not defined", label,
                 ctx_name);
        goto out;
    }
    snprintf(what, sizeof(what), "context \"%s\"", ctx_name);
    if ((r = field_str(cf, ctx, "cluster", what, &cluster, errbuf, errlen)) < 0 ||
        (r = field_str(cf, ctx, "user", what, &user, errbuf, errlen)) < 0 ||
        (r = field_str(cf, ctx, "namespace", what, &c->namespace, errbuf, errlen)) < 0)
        goto out;
    if (!cluster || !cluster[0]) {
        r = fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: context \"%s\" names no cluster",
                 cf->path, ctx_name);
        goto out;
    }
    r = find_named(s, "clusters", "cluster", cluster, &f, &body, errbuf, errlen);
    if (r == 0)
        r = fail(errbuf, errlen, VMG_ECONFIG,
                 "kubeconfig %s: context \"%s\" names cluster \"%s\", which is not defined",
                 cf->path, ctx_name, cluster);
    if (r < 0)
        goto out;
    r = load_cluster(c, f, body, cluster, errbuf, errlen);
    if (r < 0)
        goto out;
    if (user && user[0]) {
        r = find_named(s, "users", "user", user, &f, &body, errbuf, errlen);
        if (r == 0)
            r = fail(errbuf, errlen, VMG_ECONFIG,
                     "kubeconfig %s: context \"%s\" names user \"%s\", which is not defined",
                     cf->path, ctx_name, user);
        if (r < 0)
            goto out;
        r = load_user(c, f, body, user, errbuf, errlen);
    }
out:
    free(cluster);
    free(user);
    return r < 0 ? r : 0;
}

static const char *env_get(const struct kcfg_opts *o, const char *name)
{
    const char *v = o->getenv ? o->getenv(o->env_data, name) : getenv(name);
    return v && v[0] ? v : NULL;
}

static int load_in_cluster(kcfg *c, const struct kcfg_opts *o, const char *tried, char *errbuf,
                           size_t errlen)
{
    const char *host = env_get(o, "KUBERNETES_SERVICE_HOST");
    const char *port = env_get(o, "KUBERNETES_SERVICE_PORT");
    const char *dir = o->incluster_dir ? o->incluster_dir : INCLUSTER_DIR;
    char *end, *ns = NULL, *ca_path = NULL, *ns_path = NULL;
    size_t n, ns_len = 0;
    long p;
    int r;

    if (!host || !port)
        return fail(errbuf, errlen, VMG_ECONFIG,
                    "no kubeconfig found (%s) and not running in a cluster (%s unset)", tried,
                    host ? "KUBERNETES_SERVICE_PORT" : "KUBERNETES_SERVICE_HOST");
    errno = 0;
    p = strtol(port, &end, 10);
    if (errno || *end || p < 1 || p > 65535)
        return fail(errbuf, errlen, VMG_ECONFIG,
                    "in-cluster: KUBERNETES_SERVICE_PORT is not a port");
    if (strchr(host, '/') || strchr(host, '@') || strchr(host, '[') || strchr(host, ' '))
        return fail(errbuf, errlen, VMG_ECONFIG,
                    "in-cluster: KUBERNETES_SERVICE_HOST is not a host name or address");
    c->in_cluster = 1;
    n = strlen(host) + 32;
    c->server = malloc(n);
    c->source = strdup("in-cluster");
    c->context = strdup("");
    if (!c->server || !c->source || !c->context)
        return -ENOMEM;
    snprintf(c->server, n, strchr(host, ':') ? "https://[%s]:%ld" : "https://%s:%ld", host, p);
    c->url = strdup(c->server);
    n = strlen(dir) + 16;
    c->token_file = malloc(n);
    ca_path = malloc(n);
    ns_path = malloc(n);
    if (!c->url || !c->token_file || !ca_path || !ns_path) {
        r = -ENOMEM;
        goto out;
    }
    snprintf(c->token_file, n, "%s/token", dir);
    snprintf(ca_path, n, "%s/ca.crt", dir);
    snprintf(ns_path, n, "%s/namespace", dir);
    r = refresh_file_token(c, 1);
    if (r < 0) {
        r = fail(errbuf, errlen, r == -ENOMEM ? r : VMG_ECONFIG, "in-cluster: token file %s: %s",
                 c->token_file, token_strerror(r));
        goto out;
    }
    r = read_file(ca_path, MAX_PEM_BYTES, &c->ca, &c->ca_len, NULL);
    if (r < 0) {
        r = fail(errbuf, errlen, r == -ENOMEM ? r : VMG_ECONFIG, "in-cluster: file %s: %s", ca_path,
                 file_strerror(r));
        goto out;
    }
    r = pem_certs(c->ca, c->ca_len);
    if (r == 0)
        r = fail(errbuf, errlen, VMG_ECONFIG, "in-cluster: file %s holds no PEM certificate",
                 ca_path);
    if (r < 0)
        goto out;
    r = read_file(ns_path, 1024, &ns, &ns_len, NULL);
    if (r == 0) {
        while (ns_len > 0 && isspace((unsigned char)ns[ns_len - 1]))
            ns[--ns_len] = '\0';
        if (ns_len > 0) {
            c->namespace = ns;
            ns = NULL;
        }
    } else if (r != -ENOENT) {
        r = fail(errbuf, errlen, r == -ENOMEM ? r : VMG_ECONFIG, "in-cluster: file %s: %s", ns_path,
                 file_strerror(r));
        goto out;
    }
    r = 0;
out:
    free(ns);
    free(ca_path);
    free(ns_path);
    return r;
}

int kcfg_load(const struct kcfg_opts *opts, kcfg **ret, char *errbuf, size_t errlen)
{
    static const struct kcfg_opts none;
    struct kset *s = NULL;
    kcfg *c = NULL;
    char *list = NULL, *path = NULL, *save = NULL;
    const char *v, *tried = "tried --kubeconfig, KUBECONFIG, ~/.kube/config";
    char tried_buf[512];
    int r = 0;

    if (errbuf && errlen > 0)
        errbuf[0] = '\0';
    if (!ret)
        return -EINVAL;
    if (!opts)
        opts = &none;
    s = calloc(1, sizeof(*s));
    c = calloc(1, sizeof(*c));
    if (!s || !c) {
        r = -ENOMEM;
        goto out;
    }
    c->exec_timeout_ms = opts->exec_timeout_ms ? opts->exec_timeout_ms : EXEC_TIMEOUT_MS;
    if (opts->kubeconfig && opts->kubeconfig[0]) {
        r = add_file(s, opts->kubeconfig, 1, errbuf, errlen);
    } else if ((v = env_get(opts, "KUBECONFIG")) != NULL) {
        list = strdup(v);
        if (!list) {
            r = -ENOMEM;
            goto out;
        }
        for (char *p = strtok_r(list, ":", &save); p && r == 0; p = strtok_r(NULL, ":", &save))
            r = add_file(s, p, 0, errbuf, errlen);
        snprintf(tried_buf, sizeof(tried_buf), "none of the files in KUBECONFIG=%.400s exists", v);
        tried = tried_buf;
    } else if ((v = env_get(opts, "HOME")) != NULL) {
        size_t n = strlen(v) + sizeof("/.kube/config");
        path = malloc(n);
        if (!path) {
            r = -ENOMEM;
            goto out;
        }
        snprintf(path, n, "%s/.kube/config", v);
        r = add_file(s, path, 0, errbuf, errlen);
    }
    if (r < 0)
        goto out;
    if (s->n > 0)
        r = load_from_files(c, s, opts->context, errbuf, errlen);
    else
        r = load_in_cluster(c, opts, tried, errbuf, errlen);
    if (r < 0)
        goto out;
    if (!c->namespace) {
        c->namespace = strdup("default");
        if (!c->namespace) {
            r = -ENOMEM;
            goto out;
        }
    }
    *ret = c;
    c = NULL;
out:
    if (r == -ENOMEM && errbuf && errlen > 0)
        snprintf(errbuf, errlen, "kubeconfig: out of memory");
    if (s)
        kset_clear(s);
    free(s);
    free(list);
    free(path);
    kcfg_free(c);
    return r;
}

/* ---- accessors ---- */

const char *kcfg_server(const kcfg *c)
{
    return c->url;
}

const char *kcfg_namespace(const kcfg *c)
{
    return c->namespace;
}

const char *kcfg_context(const kcfg *c)
{
    return c->context;
}

const char *kcfg_source(const kcfg *c)
{
    return c->source;
}

int kcfg_in_cluster(const kcfg *c)
{
    return c->in_cluster;
}

int kcfg_has_exec(const kcfg *c)
{
    return c && c->exec;
}

int kcfg_needs_refresh(const kcfg *c, time_t now)
{
    const struct kcfg_exec *e = c ? c->exec : NULL;
    if (!e)
        return 0;
    if (!e->have || e->invalid)
        return 1;
    return e->expiry != 0 && e->expiry - now <= REFRESH_MARGIN;
}

void kcfg_invalidate(kcfg *c)
{
    if (!c)
        return;
    c->token_st_valid = 0;
    if (c->exec)
        c->exec->invalid = 1;
}

/* ---- kcfg_apply ---- */

static int curl_err(CURLcode rc)
{
    return rc == CURLE_OUT_OF_MEMORY ? -ENOMEM : -EINVAL;
}

static int set_blob(CURL *easy, CURLoption opt, const char *p, size_t len)
{
    struct curl_blob b = {.data = (void *)p, .len = len, .flags = CURL_BLOB_COPY};
    CURLcode rc = curl_easy_setopt(easy, opt, &b);
    return rc == CURLE_OK ? 0 : curl_err(rc);
}

int kcfg_apply(kcfg *c, CURL *easy, struct curl_slist **headers)
{
    const char *token = NULL, *cert, *key;
    size_t cert_len, key_len;
    CURLcode rc;
    int r;

    if (!c || !easy || !headers)
        return -EINVAL;
    cert = c->cert;
    cert_len = c->cert_len;
    key = c->key;
    key_len = c->key_len;
    if (c->exec) {
        if (!c->exec->have)
            return -EAGAIN;
        token = c->exec->token;
        if (c->exec->cert) {
            cert = c->exec->cert;
            cert_len = c->exec->cert_len;
            key = c->exec->key;
            key_len = c->exec->key_len;
        }
    } else if (c->token) {
        token = c->token;
    } else if (c->token_file) {
        (void)refresh_file_token(c, 0); /* on failure, keep the token we have */
        token = c->file_token;
    }

    rc = curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, c->insecure ? 0L : 1L);
    if (rc == CURLE_OK)
        rc = curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, c->insecure ? 0L : 2L);
    if (rc == CURLE_OK && c->connect_to)
        rc = curl_easy_setopt(easy, CURLOPT_CONNECT_TO, c->connect_to);
    if (rc == CURLE_OK && cert)
        rc = curl_easy_setopt(easy, CURLOPT_SSLCERTTYPE, "PEM");
    if (rc == CURLE_OK && key)
        rc = curl_easy_setopt(easy, CURLOPT_SSLKEYTYPE, "PEM");
    if (rc != CURLE_OK)
        return curl_err(rc);
    if (c->ca && (r = set_blob(easy, CURLOPT_CAINFO_BLOB, c->ca, c->ca_len)) < 0)
        return r;
    if (cert && (r = set_blob(easy, CURLOPT_SSLCERT_BLOB, cert, cert_len)) < 0)
        return r;
    if (key && (r = set_blob(easy, CURLOPT_SSLKEY_BLOB, key, key_len)) < 0)
        return r;
    if (token) {
        size_t n = strlen(token) + sizeof("Authorization: Bearer ");
        char *h = malloc(n);
        struct curl_slist *l;
        if (!h)
            return -ENOMEM;
        snprintf(h, n, "Authorization: Bearer %s", token);
        l = curl_slist_append(*headers, h);
        free_secret(h, n);
        if (!l)
            return -ENOMEM;
        *headers = l;
    }
    return 0;
}

/* ---- exec credential plugins ---- */

struct exec_waiter {
    struct exec_waiter *next;
    void (*done)(void *data, int err, const char *msg);
    void *data;
};

struct exec_run {
    kcfg *c; /* NULL once kcfg_free canceled the run */
    uv_process_t proc;
    uv_pipe_t out;
    uv_pipe_t err;
    uv_timer_t timer;
    int open; /* handles not yet closed */
    char *command;
    char *api_version;
    char *install_hint;
    unsigned timeout_ms;
    char *out_buf;
    size_t out_len, out_cap;
    char err_buf[MAX_EXEC_ERR];
    size_t err_len;
    char scratch[65536];
    int spawn_err, read_err;
    int spawned, exited, out_eof, err_eof, killed, closing;
    int timed_out, too_big;
    int64_t exit_status;
    int term_signal;
    struct exec_waiter *waiters;
};

struct exec_cred {
    char *token;
    char *cert;
    size_t cert_len;
    char *key;
    size_t key_len;
    time_t expiry;
};

static void cred_clear(struct exec_cred *cr)
{
    free_secret_str(cr->token);
    free_secret(cr->cert, cr->cert_len);
    free_secret(cr->key, cr->key_len);
    memset(cr, 0, sizeof(*cr));
}

static void exec_start_close(struct exec_run *run);

static void exec_on_timer(uv_timer_t *t);

static void exec_kill(struct exec_run *run)
{
    if (run->killed)
        return;
    run->killed = 1;
    /* The plugin leads its own process group: kill its children too, so
     * nothing keeps the pipes open. Not after it exited: the id is free. */
    if (run->spawned && !run->exited)
        uv_kill(-run->proc.pid, SIGKILL);
    if (!run->closing)
        uv_timer_start(&run->timer, exec_on_timer, EXEC_GRACE_MS, 0);
}

static void exec_maybe_finish(struct exec_run *run)
{
    if (run->exited && run->out_eof && run->err_eof)
        exec_start_close(run);
}

static void exec_on_timer(uv_timer_t *t)
{
    struct exec_run *run = t->data;
    if (!run->killed) {
        run->timed_out = 1;
        exec_kill(run);
        return;
    }
    exec_start_close(run); /* killed, and the pipes still not closed */
}

static void exec_on_exit(uv_process_t *p, int64_t status, int sig)
{
    struct exec_run *run = p->data;
    run->exited = 1;
    run->exit_status = status;
    run->term_signal = sig;
    exec_maybe_finish(run);
}

static void exec_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct exec_run *run = h->data;
    (void)suggested;
    *buf = uv_buf_init(run->scratch, sizeof(run->scratch));
}

static void exec_read_out(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct exec_run *run = s->data;
    if (n > 0) {
        size_t need = run->out_len + (size_t)n;
        if (need > MAX_EXEC_OUT) {
            run->too_big = 1;
            run->out_eof = 1;
            uv_read_stop(s);
            exec_kill(run);
            exec_maybe_finish(run);
            return;
        }
        if (need + 1 > run->out_cap) {
            size_t cap = run->out_cap ? run->out_cap : 4096;
            char *nb;
            while (cap < need + 1)
                cap *= 2;
            nb = realloc(run->out_buf, cap);
            if (!nb) {
                run->read_err = -ENOMEM;
                run->out_eof = 1;
                uv_read_stop(s);
                exec_kill(run);
                exec_maybe_finish(run);
                return;
            }
            run->out_buf = nb;
            run->out_cap = cap;
        }
        memcpy(run->out_buf + run->out_len, buf->base, (size_t)n);
        run->out_len = need;
        run->out_buf[need] = '\0';
    } else if (n < 0) {
        if (n != UV_EOF)
            run->read_err = (int)n;
        run->out_eof = 1;
        uv_read_stop(s);
        exec_maybe_finish(run);
    }
}

static void exec_read_err(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct exec_run *run = s->data;
    if (n > 0) {
        size_t room = sizeof(run->err_buf) - 1 - run->err_len;
        size_t k = (size_t)n < room ? (size_t)n : room;
        memcpy(run->err_buf + run->err_len, buf->base, k);
        run->err_len += k;
        run->err_buf[run->err_len] = '\0';
    } else if (n < 0) {
        run->err_eof = 1;
        uv_read_stop(s);
        exec_maybe_finish(run);
    }
}

/* first_line copies the first non-empty line of stderr, bounded, with
 * control characters replaced. */
static void first_line(const struct exec_run *run, char *out, size_t outlen)
{
    const char *p = run->err_buf;
    size_t n = 0;
    while (*p == '\n' || *p == '\r' || *p == ' ' || *p == '\t')
        p++;
    while (p[n] && p[n] != '\n' && p[n] != '\r' && n < EXEC_ERR_LINE && n + 1 < outlen) {
        unsigned char ch = (unsigned char)p[n];
        out[n] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
        n++;
    }
    out[n] = '\0';
}

static int parse_cred(const struct exec_run *run, struct exec_cred *cr, char *msg, size_t msglen)
{
    cJSON *j = cJSON_ParseWithLength(run->out_buf ? run->out_buf : "", run->out_len);
    const cJSON *st, *v, *tok = NULL, *crt = NULL, *key = NULL, *exp;
    int r = 0, pr;

    memset(cr, 0, sizeof(*cr));
    if (!j || !cJSON_IsObject(j)) {
        r = fail(msg, msglen, VMG_EPARSE, "exec plugin \"%s\": output is not a JSON object",
                 run->command);
        goto out;
    }
    v = cJSON_GetObjectItemCaseSensitive(j, "kind");
    if (!cJSON_IsString(v) || strcmp(v->valuestring, "ExecCredential") != 0) {
        r = fail(msg, msglen, VMG_EPARSE, "exec plugin \"%s\": output is not an ExecCredential",
                 run->command);
        goto out;
    }
    v = cJSON_GetObjectItemCaseSensitive(j, "apiVersion");
    if (!cJSON_IsString(v) || strcmp(v->valuestring, run->api_version) != 0) {
        r = fail(msg, msglen, VMG_EPARSE,
                 "exec plugin \"%s\": output's apiVersion is not \"%s\", which the kubeconfig "
                 "asked for",
                 run->command, run->api_version);
        goto out;
    }
    st = cJSON_GetObjectItemCaseSensitive(j, "status");
    tok = cJSON_GetObjectItemCaseSensitive(st, "token");
    crt = cJSON_GetObjectItemCaseSensitive(st, "clientCertificateData");
    key = cJSON_GetObjectItemCaseSensitive(st, "clientKeyData");
    exp = cJSON_GetObjectItemCaseSensitive(st, "expirationTimestamp");
    if (!cJSON_IsObject(st) || (tok && !cJSON_IsString(tok)) || (crt && !cJSON_IsString(crt)) ||
        (key && !cJSON_IsString(key)) || (exp && !cJSON_IsString(exp) && !cJSON_IsNull(exp))) {
        r = fail(msg, msglen, VMG_EPARSE,
                 "exec plugin \"%s\": output's status is missing or has fields of the wrong type",
                 run->command);
        goto out;
    }
    if (tok && !tok->valuestring[0])
        tok = NULL;
    if (crt && !crt->valuestring[0])
        crt = NULL;
    if (key && !key->valuestring[0])
        key = NULL;
    if (!tok && !crt) {
        r = fail(msg, msglen, VMG_EPARSE,
                 "exec plugin \"%s\": output has neither status.token nor "
                 "status.clientCertificateData",
                 run->command);
        goto out;
    }
    if (!crt != !key) {
        r = fail(msg, msglen, VMG_EPARSE, "exec plugin \"%s\": output has %s without %s",
                 run->command, crt ? "clientCertificateData" : "clientKeyData",
                 crt ? "clientKeyData" : "clientCertificateData");
        goto out;
    }
    if (tok && !token_ok(tok->valuestring, strlen(tok->valuestring))) {
        r = fail(msg, msglen, VMG_EPARSE,
                 "exec plugin \"%s\": output's token holds control "
                 "characters",
                 run->command);
        goto out;
    }
    if (crt) {
        pr = check_pair(crt->valuestring, strlen(crt->valuestring), key->valuestring,
                        strlen(key->valuestring));
        if (pr < 0) {
            r = fail(msg, msglen, pr, "exec plugin \"%s\": out of memory", run->command);
            goto out;
        }
        if (pr != PAIR_OK) {
            r = fail(msg, msglen, VMG_EPARSE,
                     "exec plugin \"%s\": output's client certificate and key are not a "
                     "matching PEM pair",
                     run->command);
            goto out;
        }
    }
    if (cJSON_IsString(exp) && exp->valuestring[0] &&
        parse_time(exp->valuestring, &cr->expiry) < 0) {
        r = fail(msg, msglen, VMG_EPARSE,
                 "exec plugin \"%s\": output's status.expirationTimestamp is not RFC 3339",
                 run->command);
        goto out;
    }
    if (tok && !(cr->token = strdup(tok->valuestring)))
        r = -ENOMEM;
    if (crt && r == 0) {
        cr->cert_len = strlen(crt->valuestring);
        cr->key_len = strlen(key->valuestring);
        cr->cert = dup_mem(crt->valuestring, cr->cert_len);
        cr->key = dup_mem(key->valuestring, cr->key_len);
        if (!cr->cert || !cr->key)
            r = -ENOMEM;
    }
    if (r < 0) {
        fail(msg, msglen, r, "exec plugin \"%s\": out of memory", run->command);
        cred_clear(cr);
    }
out:
    if (j) {
        /* Wipe the credential's copies inside the parsed tree. */
        if (tok && cJSON_IsString(tok))
            OPENSSL_cleanse(tok->valuestring, strlen(tok->valuestring));
        if (key && cJSON_IsString(key))
            OPENSSL_cleanse(key->valuestring, strlen(key->valuestring));
        cJSON_Delete(j);
    }
    return r;
}

static void exec_install(struct kcfg_exec *e, struct exec_cred *cr)
{
    free_secret_str(e->token);
    free_secret(e->cert, e->cert_len);
    free_secret(e->key, e->key_len);
    e->token = cr->token;
    e->cert = cr->cert;
    e->cert_len = cr->cert_len;
    e->key = cr->key;
    e->key_len = cr->key_len;
    e->expiry = cr->expiry;
    e->have = 1;
    e->invalid = 0;
    memset(cr, 0, sizeof(*cr));
}

static void exec_complete(struct exec_run *run)
{
    char msg[1024], line[EXEC_ERR_LINE + 1];
    struct exec_cred cr = {0};
    struct exec_waiter *w, *next;
    int err = 0;

    msg[0] = '\0';
    first_line(run, line, sizeof(line));
    if (!run->c) {
        err = fail(msg, sizeof(msg), VMG_ECANCELED, "exec plugin \"%s\": canceled", run->command);
    } else if (run->spawn_err) {
        if (run->spawn_err == UV_ENOENT)
            err = fail(msg, sizeof(msg), run->spawn_err, "exec plugin \"%s\": not found%s%.600s",
                       run->command, run->install_hint ? "; " : "",
                       run->install_hint ? run->install_hint : "");
        else
            err = fail(msg, sizeof(msg), run->spawn_err, "exec plugin \"%s\": cannot start: %s",
                       run->command, uv_strerror(run->spawn_err));
    } else if (run->too_big) {
        err = fail(msg, sizeof(msg), VMG_ETOOBIG,
                   "exec plugin \"%s\": wrote more than %u bytes; killed", run->command,
                   MAX_EXEC_OUT);
    } else if (run->timed_out || !run->exited) {
        err = fail(msg, sizeof(msg), -ETIMEDOUT,
                   "exec plugin \"%s\": did not finish within %u ms; killed", run->command,
                   run->timeout_ms);
    } else if (run->term_signal) {
        err = fail(msg, sizeof(msg), VMG_EAUTH, "exec plugin \"%s\": killed by signal %d%s%s",
                   run->command, run->term_signal, line[0] ? ": " : "", line);
    } else if (run->exit_status != 0) {
        err = fail(msg, sizeof(msg), VMG_EAUTH, "exec plugin \"%s\": exit status %lld%s%s",
                   run->command, (long long)run->exit_status, line[0] ? ": " : "", line);
    } else if (run->read_err) {
        err = fail(msg, sizeof(msg), run->read_err, "exec plugin \"%s\": reading its output: %s",
                   run->command, vmg_strerror(run->read_err));
    } else {
        err = parse_cred(run, &cr, msg, sizeof(msg));
    }
    if (run->c) {
        if (err == 0)
            exec_install(run->c->exec, &cr);
        run->c->exec->run = NULL;
    }
    cred_clear(&cr);
    w = run->waiters;
    free_secret(run->out_buf, run->out_cap);
    OPENSSL_cleanse(run->scratch, sizeof(run->scratch));
    free(run->command);
    free(run->api_version);
    free(run->install_hint);
    free(run);
    for (; w; w = next) {
        next = w->next;
        w->done(w->data, err, err ? msg : NULL);
        free(w);
    }
}

static void exec_on_close(uv_handle_t *h)
{
    struct exec_run *run = h->data;
    if (--run->open == 0)
        exec_complete(run);
}

static void exec_start_close(struct exec_run *run)
{
    if (run->closing)
        return;
    run->closing = 1;
    uv_timer_stop(&run->timer);
    uv_read_stop((uv_stream_t *)&run->out);
    uv_read_stop((uv_stream_t *)&run->err);
    uv_close((uv_handle_t *)&run->timer, exec_on_close);
    uv_close((uv_handle_t *)&run->out, exec_on_close);
    uv_close((uv_handle_t *)&run->err, exec_on_close);
    uv_close((uv_handle_t *)&run->proc, exec_on_close);
}

/* exec_info is the ExecCredential request for KUBERNETES_EXEC_INFO. */
static char *exec_info(const kcfg *c)
{
    const struct kcfg_exec *e = c->exec;
    cJSON *o = cJSON_CreateObject(), *spec = NULL, *cl = NULL;
    char *out = NULL, *ca = NULL;
    int ok;

    if (!o)
        return NULL;
    ok = cJSON_AddStringToObject(o, "apiVersion", e->api_version) &&
         cJSON_AddStringToObject(o, "kind", "ExecCredential") &&
         (spec = cJSON_AddObjectToObject(o, "spec")) != NULL &&
         cJSON_AddFalseToObject(spec, "interactive");
    if (ok && e->provide_cluster_info) {
        ok = (cl = cJSON_AddObjectToObject(spec, "cluster")) != NULL &&
             cJSON_AddStringToObject(cl, "server", c->server) &&
             cJSON_AddBoolToObject(cl, "insecure-skip-tls-verify", c->insecure);
        if (ok && c->tls_server_name)
            ok = cJSON_AddStringToObject(cl, "tls-server-name", c->tls_server_name) != NULL;
        if (ok && c->ca)
            ok = (ca = b64_encode(c->ca, c->ca_len)) != NULL &&
                 cJSON_AddStringToObject(cl, "certificate-authority-data", ca);
    }
    if (ok)
        out = cJSON_PrintUnformatted(o);
    free(ca);
    cJSON_Delete(o);
    return out;
}

static int env_name_eq(const char *a, const char *b)
{
    size_t n = strcspn(b, "=");
    return strncmp(a, b, n) == 0 && a[n] == '=';
}

/* The variables of ours a plugin is given. client-go hands a plugin its
 * whole environment (os.Environ()); this manager holds its own secrets
 * there (VC_*, never passed), so only what plugins use passes: what a
 * program needs to run and find its files, language, time zone and
 * proxy, and what the common cloud plugins read (aws-iam-authenticator
 * and aws eks: AWS_*; kubelogin: AZURE_*; gke-gcloud-auth-plugin:
 * GOOGLE_APPLICATION_CREDENTIALS, CLOUDSDK_*), which a Deployment sets
 * for them. */
static const char *const exec_env_keep[] = {
    "PATH",        "HOME",      "USER",       "LOGNAME",       "LANG",
    "LANGUAGE",    "TZ",        "TMPDIR",     "SSL_CERT_FILE", "SSL_CERT_DIR",
    "NO_PROXY",    "no_proxy",  "HTTP_PROXY", "http_proxy",    "HTTPS_PROXY",
    "https_proxy", "ALL_PROXY", "all_proxy",  "KUBECONFIG",    "GOOGLE_APPLICATION_CREDENTIALS",
};
static const char *const exec_env_keep_prefix[] = {"LC_", "XDG_", "AWS_", "AZURE_", "CLOUDSDK_"};

static int exec_env_kept(const char *entry)
{
    for (size_t i = 0; i < sizeof(exec_env_keep_prefix) / sizeof(exec_env_keep_prefix[0]); i++)
        if (strncmp(entry, exec_env_keep_prefix[i], strlen(exec_env_keep_prefix[i])) == 0)
            return 1;
    for (size_t i = 0; i < sizeof(exec_env_keep) / sizeof(exec_env_keep[0]); i++)
        if (env_name_eq(entry, exec_env_keep[i]))
            return 1;
    return 0;
}

/* exec_env builds the child's environment: the few of ours that
 * exec_env_keep lists, minus the names the kubeconfig sets, plus those,
 * plus info. The strings are borrowed. */
static char **exec_env(const struct kcfg_exec *e, const char *info)
{
    size_t n = 0, k = 0;
    char **env;
    for (char **p = environ; p && *p; p++)
        n++;
    env = calloc(n + e->nenv + 2, sizeof(*env));
    if (!env)
        return NULL;
    for (char **p = environ; p && *p; p++) {
        int skip = !exec_env_kept(*p) || env_name_eq(*p, info);
        for (size_t i = 0; i < e->nenv && !skip; i++)
            skip = env_name_eq(*p, e->env[i]);
        if (!skip)
            env[k++] = *p;
    }
    for (size_t i = 0; i < e->nenv; i++)
        env[k++] = e->env[i];
    env[k++] = (char *)info;
    env[k] = NULL;
    return env;
}

int kcfg_exec_refresh(kcfg *c, uv_loop_t *loop, void (*done)(void *data, int err, const char *msg),
                      void *data)
{
    struct kcfg_exec *e;
    struct exec_waiter *w;
    struct exec_run *run = NULL;
    char *json = NULL, *info = NULL, **argv = NULL, **envp = NULL;
    uv_process_options_t po;
    uv_stdio_container_t stdio[3];
    size_t n;
    int r;

    if (!c || !loop || !done || !c->exec)
        return -EINVAL;
    e = c->exec;
    w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->done = done;
    w->data = data;
    if (e->run) {
        w->next = e->run->waiters;
        e->run->waiters = w;
        return 0;
    }
    run = calloc(1, sizeof(*run));
    json = exec_info(c);
    argv = calloc(e->nargs + 2, sizeof(*argv));
    if (!run || !json || !argv) {
        r = -ENOMEM;
        goto fail;
    }
    n = strlen(json) + sizeof("KUBERNETES_EXEC_INFO=");
    info = malloc(n);
    run->command = strdup(e->command);
    run->api_version = strdup(e->api_version);
    if (e->install_hint)
        run->install_hint = strdup(e->install_hint);
    if (!info || !run->command || !run->api_version || (e->install_hint && !run->install_hint)) {
        r = -ENOMEM;
        goto fail;
    }
    snprintf(info, n, "KUBERNETES_EXEC_INFO=%s", json);
    envp = exec_env(e, info);
    if (!envp) {
        r = -ENOMEM;
        goto fail;
    }
    argv[0] = e->command;
    for (size_t i = 0; i < e->nargs; i++)
        argv[i + 1] = e->args[i];

    run->c = c;
    run->waiters = w;
    run->timeout_ms = c->exec_timeout_ms;
    /* From here on, everything ends in exec_complete(), which calls done. */
    uv_pipe_init(loop, &run->out, 0);
    uv_pipe_init(loop, &run->err, 0);
    uv_timer_init(loop, &run->timer);
    run->out.data = run->err.data = run->timer.data = run->proc.data = run;
    run->open = 4;
    e->run = run;

    memset(&po, 0, sizeof(po));
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[1].data.stream = (uv_stream_t *)&run->out;
    stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[2].data.stream = (uv_stream_t *)&run->err;
    po.exit_cb = exec_on_exit;
    po.file = e->command;
    po.args = argv;
    po.env = envp;
    po.flags = UV_PROCESS_DETACHED; /* its own process group, killed whole */
    po.stdio_count = 3;
    po.stdio = stdio;
    r = uv_spawn(loop, &run->proc, &po);
    /* uv_spawn initializes the handle even when it fails. */
    run->proc.data = run;
    if (r < 0) {
        run->spawn_err = r;
        exec_start_close(run);
    } else {
        run->spawned = 1;
        if (uv_read_start((uv_stream_t *)&run->out, exec_alloc, exec_read_out) < 0)
            run->out_eof = 1;
        if (uv_read_start((uv_stream_t *)&run->err, exec_alloc, exec_read_err) < 0)
            run->err_eof = 1;
        uv_timer_start(&run->timer, exec_on_timer, run->timeout_ms, 0);
        exec_maybe_finish(run);
    }
    free(envp);
    free(argv);
    free(info);
    free(json);
    return 0;
fail:
    free(envp);
    free(argv);
    free(info);
    free(json);
    if (run) {
        free(run->command);
        free(run->api_version);
        free(run->install_hint);
        free(run);
    }
    free(w);
    return r;
}

/* ---- kcfg_free ---- */

static void exec_free(struct kcfg_exec *e)
{
    if (!e)
        return;
    if (e->run) {
        struct exec_run *run = e->run;
        run->c = NULL;
        exec_kill(run);
        exec_start_close(run);
    }
    free(e->api_version);
    free(e->command);
    for (char **p = e->args; p && *p; p++)
        free_secret_str(*p);
    free(e->args);
    for (char **p = e->env; p && *p; p++)
        free_secret_str(*p);
    free(e->env);
    free(e->install_hint);
    free_secret_str(e->token);
    free_secret(e->cert, e->cert_len);
    free_secret(e->key, e->key_len);
    free(e);
}

void kcfg_free(kcfg *c)
{
    if (!c)
        return;
    exec_free(c->exec);
    free(c->source);
    free(c->context);
    free(c->namespace);
    free(c->server);
    free(c->url);
    free(c->tls_server_name);
    curl_slist_free_all(c->connect_to);
    free(c->ca);
    free(c->cert);
    free_secret(c->key, c->key_len);
    free_secret_str(c->token);
    free(c->token_file);
    free_secret_str(c->file_token);
    free(c);
}

#ifdef VMG_TESTING
void kcfg_testing_view(const kcfg *c, struct kcfg_testing_view *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->ca = c->ca;
    ret->ca_len = c->ca_len;
    ret->cert = c->cert;
    ret->cert_len = c->cert_len;
    ret->key = c->key;
    ret->key_len = c->key_len;
    if (c->exec && c->exec->have && c->exec->cert) {
        ret->cert = c->exec->cert;
        ret->cert_len = c->exec->cert_len;
        ret->key = c->exec->key;
        ret->key_len = c->exec->key_len;
    }
    if (c->exec)
        ret->expiry = c->exec->expiry;
    ret->insecure = c->insecure;
    ret->tls_server_name = c->tls_server_name;
    ret->connect_to = c->connect_to ? c->connect_to->data : NULL;
}

int kcfg_testing_parse_time(const char *s, time_t *ret)
{
    return parse_time(s, ret);
}

int kcfg_testing_parse_cred(const char *out, size_t len, const char *api_version,
                            struct kcfg_testing_cred *ret, char *msg, size_t msglen)
{
    struct exec_run *run = calloc(1, sizeof(*run));
    struct exec_cred cr;
    int r;

    memset(ret, 0, sizeof(*ret));
    if (!run)
        return -ENOMEM;
    run->command = (char *)"plugin";
    run->api_version = (char *)api_version;
    run->out_buf = (char *)out;
    run->out_len = len;
    r = parse_cred(run, &cr, msg, msglen);
    free(run);
    if (r < 0)
        return r;
    ret->token = cr.token;
    ret->cert = cr.cert;
    ret->cert_len = cr.cert_len;
    ret->key = cr.key;
    ret->key_len = cr.key_len;
    ret->expiry = cr.expiry;
    return 0;
}

void kcfg_testing_cred_clear(struct kcfg_testing_cred *cr)
{
    free_secret_str(cr->token);
    free_secret(cr->cert, cr->cert_len);
    free_secret(cr->key, cr->key_len);
    memset(cr, 0, sizeof(*cr));
}
#endif
