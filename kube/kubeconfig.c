/* kubeconfig.c: kubectl's rules for finding the API server and the
 * credentials to use with it (kubeconfig files parsed with libyaml, or the
 * in-cluster service account), and their application to libcurl handles.
 * Exec credential plugins are configured here and run by exec.c; the
 * credential material itself (PEM, base64, tokens, wiping) is cred.c's. */
#include "kube/kubeconfig.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>
#include <yaml.h>

#include "kube/cred.h"
#include "kube/exec.h"
#include "kube/kfile.h"
#include "lib/b64.h"
#include "lib/buf.h"
#include "lib/err.h"

#define MAX_PEM_BYTES (1u << 20)    /* a CA bundle, certificate or key */
#define MAX_TOKEN_BYTES (64u << 10) /* a bearer token */
#define MAX_EXEC_ITEMS 256          /* exec args, exec env entries */
#define EXEC_TIMEOUT_MS 30000
#define REFRESH_MARGIN 10 /* seconds before expiry that count as expired */
#define INCLUSTER_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

#define EXEC_V1 "client.authentication.k8s.io/v1"
#define EXEC_V1BETA1 "client.authentication.k8s.io/v1beta1"

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

    int have;          /* a credential was fetched */
    unsigned long gen; /* credentials fetched */
    int invalid;
    struct kexec_cred cred;
    kexec *run;  /* the plugin running, if any */
    int stopped; /* kcfg_exec_stop: no run starts again */
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
    unsigned long token_gen; /* token file reads that changed the token */
    struct kcfg_exec *exec;
    unsigned exec_timeout_ms;
};

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
        r = kfile_fail(errbuf, errlen, VMG_ECONFIG, "%s: server of %s is not a valid URL", where,
                       what);
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
        r = kfile_fail(errbuf, errlen, VMG_ECONFIG, "%s: server of %s is not an http or https URL",
                       where, what);
        goto out;
    }
    {
        char *user = NULL;
        CURLUcode uc = curl_url_get(u, CURLUPART_USER, &user, 0);

        if (user) {
            vmg_wipe(user, strlen(user));
            curl_free(user);
        }
        if (uc != CURLUE_OK && uc != CURLUE_NO_USER) {
            r = -ENOMEM;
            goto out;
        }
        if (uc == CURLUE_OK) {
            /* The server's URL goes into logs: no credential in it. */
            r = kfile_fail(errbuf, errlen, VMG_ECONFIG,
                           "%s: server of %s holds a user name or password; give credentials as "
                           "the user's (token, client certificate, exec)",
                           where, what);
            goto out;
        }
    }
    strip_slashes(c->server);
    if (!tls_name || strcmp(scheme, "https") != 0) {
        c->url = strdup(c->server);
        r = c->url ? 0 : -ENOMEM;
        goto out;
    }
    if (curl_url_set(u, CURLUPART_HOST, tls_name, 0) != CURLUE_OK ||
        !(tls_host = url_part(u, CURLUPART_HOST, 0))) {
        r = kfile_fail(errbuf, errlen, VMG_ECONFIG,
                       "%s: tls-server-name of %s is not a valid host name", where, what);
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
    if (r < 0) {
        /* A refused URL may hold a password (any refusal, not only that
         * one): its copy is wiped. */
        kcred_free_str(c->server);
        c->server = NULL;
    }
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
    r = kfile_str(f, map, data_key, what, &data, errbuf, errlen);
    if (r < 0)
        goto out;
    if (data && data[0]) {
        r = vmg_b64_decode_alloc(data, strlen(data), ret, ret_len);
        if (r == VMG_EPARSE)
            r = kfile_fail(errbuf, errlen, VMG_ECONFIG,
                           "kubeconfig %s: %s of %s is not valid base64", f->path, data_key, what);
        goto out;
    }
    r = kfile_str(f, map, file_key, what, &path, errbuf, errlen);
    if (r < 0 || !path || !path[0])
        goto out;
    full = kfile_resolve(f->dir, path);
    if (!full) {
        r = -ENOMEM;
        goto out;
    }
    r = kcred_read_file(full, MAX_PEM_BYTES, ret, ret_len, NULL);
    if (r < 0 && r != -ENOMEM)
        r = kfile_fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s of %s: file %s: %s", f->path,
                       file_key, what, full, kfile_strerror(r));
out:
    kcred_free_str(data);
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
    r = kfile_str(f, body, "server", what, &server, errbuf, errlen);
    if (r < 0)
        goto out;
    if (!server || !server[0]) {
        r = kfile_fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: cluster \"%s\" has no server",
                       f->path, name);
        goto out;
    }
    r = kfile_str_set(f, body, "tls-server-name", what, &c->tls_server_name, errbuf, errlen);
    if (r < 0)
        goto out;
    r = set_server(c, server, c->tls_server_name, where, what, errbuf, errlen);
    if (r < 0)
        goto out;
    r = kfile_bool(f, body, "insecure-skip-tls-verify", what, &c->insecure, errbuf, errlen);
    if (r < 0)
        goto out;
    r = load_pem(f, body, "certificate-authority-data", "certificate-authority", what, &c->ca,
                 &c->ca_len, errbuf, errlen);
    if (r < 0)
        goto out;
    if (c->ca && c->insecure) {
        r = kfile_fail(errbuf, errlen, VMG_ECONFIG,
                       "kubeconfig %s: cluster \"%s\" sets both insecure-skip-tls-verify and a "
                       "certificate authority",
                       f->path, name);
        goto out;
    }
    if (c->ca) {
        n = kcred_pem_certs(c->ca, c->ca_len);
        if (n < 0) {
            r = n;
            goto out;
        }
        if (n == 0)
            r = kfile_fail(
                errbuf, errlen, VMG_ECONFIG,
                "kubeconfig %s: the certificate authority of cluster \"%s\" holds no PEM "
                "certificate",
                f->path, name);
    }
out:
    kcred_free_str(server); /* a URL may hold a password (refused above) */
    return r;
}

/* ---- the user ---- */

static int load_str_list(struct kfile *f, yaml_node_t *seq, const char *what, const char *key,
                         char ***ret, size_t *ret_n, char *errbuf, size_t errlen)
{
    size_t n;
    char **v;
    if (kfile_is_null(seq))
        return 0;
    if (seq->type != YAML_SEQUENCE_NODE)
        return kfile_fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s of %s is not a list",
                          f->path, key, what);
    n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n > MAX_EXEC_ITEMS)
        return kfile_fail(errbuf, errlen, VMG_ECONFIG,
                          "kubeconfig %s: %s of %s has more than %d items", f->path, key, what,
                          MAX_EXEC_ITEMS);
    v = calloc(n + 1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    *ret = v;
    for (size_t i = 0; i < n; i++) {
        int r = kfile_scalar_dup(kfile_node(f, seq->data.sequence.items.start[i]), &v[i]);
        if (r == -1)
            return kfile_fail(errbuf, errlen, VMG_ECONFIG,
                              "kubeconfig %s: %s[%zu] of %s is not a string", f->path, key, i,
                              what);
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
    if (kfile_is_null(seq))
        return 0;
    if (seq->type != YAML_SEQUENCE_NODE)
        return kfile_fail(errbuf, errlen, VMG_ECONFIG,
                          "kubeconfig %s: exec env of %s is not a list", f->path, what);
    n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n > MAX_EXEC_ITEMS)
        return kfile_fail(errbuf, errlen, VMG_ECONFIG,
                          "kubeconfig %s: exec env of %s has more than %d items", f->path, what,
                          MAX_EXEC_ITEMS);
    e->env = calloc(n + 1, sizeof(*e->env));
    if (!e->env)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = kfile_node(f, seq->data.sequence.items.start[i]);
        char *name = NULL, *value = NULL;
        size_t len;
        int r = -1;
        if (item && item->type == YAML_MAPPING_NODE) {
            r = kfile_scalar_dup(kfile_get(f, item, "name"), &name);
            if (r == 0)
                r = kfile_scalar_dup(kfile_get(f, item, "value"), &value);
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
        kcred_free_str(name); /* an env value may be a secret */
        kcred_free_str(value);
        if (r == -1 || r == -2)
            return kfile_fail(errbuf, errlen, VMG_ECONFIG,
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
        return kfile_fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: exec of %s is not a mapping",
                          f->path, what);
    e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    c->exec = e;
    r = kfile_str(f, ex, "apiVersion", what, &e->api_version, errbuf, errlen);
    if (r < 0)
        return r;
    if (!e->api_version)
        return kfile_fail(errbuf, errlen, VMG_ECONFIG,
                          "kubeconfig %s: exec of %s has no apiVersion", f->path, what);
    if (strcmp(e->api_version, EXEC_V1) != 0 && strcmp(e->api_version, EXEC_V1BETA1) != 0)
        return kfile_fail(
            errbuf, errlen, VMG_ECONFIG,
            "kubeconfig %s: exec of %s has apiVersion \"%.64s\"; supported are " EXEC_V1
            " and " EXEC_V1BETA1,
            f->path, what, e->api_version);
    r = kfile_str(f, ex, "command", what, &cmd, errbuf, errlen);
    if (r < 0)
        return r;
    if (!cmd || !cmd[0]) {
        free(cmd);
        return kfile_fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: exec of %s has no command",
                          f->path, what);
    }
    /* kubectl: a command with a path separator is relative to the file. */
    e->command = strchr(cmd, '/') ? kfile_resolve(f->dir, cmd) : strdup(cmd);
    free(cmd);
    if (!e->command)
        return -ENOMEM;
    r = load_str_list(f, kfile_get(f, ex, "args"), what, "exec args", &e->args, &e->nargs, errbuf,
                      errlen);
    if (r < 0)
        return r;
    r = load_exec_env(f, e, kfile_get(f, ex, "env"), what, errbuf, errlen);
    if (r < 0)
        return r;
    r = kfile_str(f, ex, "installHint", what, &e->install_hint, errbuf, errlen);
    if (r < 0)
        return r;
    return kfile_bool(f, ex, "provideClusterInfo", what, &e->provide_cluster_info, errbuf, errlen);
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
    r = kcred_read_file(c->token_file, MAX_TOKEN_BYTES, &buf, &len, &st);
    if (r < 0)
        return r;
    while (len > 0 && isspace((unsigned char)buf[len - 1]))
        buf[--len] = '\0';
    while (start < len && isspace((unsigned char)buf[start]))
        start++;
    if (!kcred_token_ok(buf + start, len - start)) {
        vmg_wipe_free(buf, len);
        return VMG_EPARSE;
    }
    if (start > 0) {
        /* The token's last start bytes stay behind its new end: wiped,
         * as kcred_free_str wipes only up to the NUL. */
        memmove(buf, buf + start, len - start + 1);
        vmg_wipe(buf + len - start + 1, start);
    }
    if (!c->file_token || strcmp(c->file_token, buf) != 0)
        c->token_gen++;
    kcred_free_str(c->file_token);
    c->file_token = buf;
    c->token_st = st;
    c->token_st_valid = 1;
    return 0;
}

static const char *token_strerror(int r)
{
    return r == VMG_EPARSE ? "empty or holds control characters" : kfile_strerror(r);
}

static int load_user(kcfg *c, struct kfile *f, yaml_node_t *body, const char *name, char *errbuf,
                     size_t errlen)
{
    char what[320];
    char *token_file = NULL;
    yaml_node_t *ex;
    int r, pr;

    snprintf(what, sizeof(what), "user \"%s\"", name);
    if (!kfile_is_null(kfile_get(f, body, "auth-provider"))) {
        r = kfile_fail(
            errbuf, errlen, VMG_ECONFIG,
            "kubeconfig %s: user \"%s\" uses auth-provider, which is not supported; use an "
            "exec credential plugin",
            f->path, name);
        goto out;
    }
    if (!kfile_is_null(kfile_get(f, body, "username")) ||
        !kfile_is_null(kfile_get(f, body, "password"))) {
        r = kfile_fail(errbuf, errlen, VMG_ECONFIG,
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
        r = kfile_fail(errbuf, errlen, VMG_ECONFIG,
                       "kubeconfig %s: user \"%s\" has a client %s but no %s", f->path, name,
                       c->cert ? "certificate" : "key",
                       c->cert ? "client-key" : "client-certificate");
        goto out;
    }
    if (c->cert) {
        pr = kcred_check_pair(c->cert, c->cert_len, c->key, c->key_len);
        if (pr < 0) {
            r = pr;
            goto out;
        }
        if (pr != KCRED_PAIR_OK) {
            r = kfile_fail(
                errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: %s of user \"%s\"", f->path,
                pr == KCRED_PAIR_BAD_CERT  ? "the client certificate is not a PEM certificate"
                : pr == KCRED_PAIR_BAD_KEY ? "the client key is not an unencrypted PEM private key"
                                           : "the client key does not match the client certificate",
                name);
            goto out;
        }
    }
    r = kfile_str_set(f, body, "token", what, &c->token, errbuf, errlen);
    if (r < 0)
        goto out;
    if (c->token && !kcred_token_ok(c->token, strlen(c->token))) {
        r = kfile_fail(errbuf, errlen, VMG_ECONFIG,
                       "kubeconfig %s: token of user \"%s\" holds control "
                       "characters",
                       f->path, name);
        goto out;
    }
    r = kfile_str(f, body, "tokenFile", what, &token_file, errbuf, errlen);
    if (r < 0)
        goto out;
    if (token_file && token_file[0] && !c->token) {
        c->token_file = kfile_resolve(f->dir, token_file);
        if (!c->token_file) {
            r = -ENOMEM;
            goto out;
        }
        r = refresh_file_token(c, 1);
        if (r < 0) {
            r = kfile_fail(errbuf, errlen, r == -ENOMEM ? r : VMG_ECONFIG,
                           "kubeconfig %s: tokenFile of user \"%s\": file %s: %s", f->path, name,
                           c->token_file, token_strerror(r));
            goto out;
        }
    }
    ex = kfile_get(f, body, "exec");
    if (!kfile_is_null(ex)) {
        if (c->token || c->token_file) {
            r = kfile_fail(errbuf, errlen, VMG_ECONFIG,
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

/* find_for_context finds the cluster or user (kind) called name that the
 * context ctx_name of file cf names, in the list "<kind>s" of the files.
 * Returns 1, or an error (VMG_ECONFIG when it is not defined). */
static int find_for_context(struct kset *s, const struct kfile *cf, const char *ctx_name,
                            const char *kind, const char *name, struct kfile **ret_f,
                            yaml_node_t **ret_body, char *errbuf, size_t errlen)
{
    char list[16];
    int r;

    snprintf(list, sizeof(list), "%ss", kind);
    r = kset_find(s, list, kind, name, ret_f, ret_body, errbuf, errlen);
    if (r == 0)
        r = kfile_fail(errbuf, errlen, VMG_ECONFIG,
                       "kubeconfig %s: context \"%s\" names %s \"%s\", which is not defined",
                       cf->path, ctx_name, kind, name);
    return r;
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
        r = kfile_str_set(&s->f[i], s->f[i].root, "current-context", "the file", &ctx_name, errbuf,
                          errlen);
        if (r < 0)
            return r;
    }
    if (!ctx_name)
        return kfile_fail(errbuf, errlen, VMG_ECONFIG,
                          "kubeconfig %s: current-context is not set and no context was given",
                          label);
    c->context = ctx_name;
    r = kset_find(s, "contexts", "context", ctx_name, &cf, &ctx, errbuf, errlen);
    if (r < 0)
        goto out;
    if (r == 0) {
        r = kfile_fail(errbuf, errlen, VMG_ECONFIG, "kubeconfig %s: context \"%s\" is not defined",
                       label, ctx_name);
        goto out;
    }
    snprintf(what, sizeof(what), "context \"%s\"", ctx_name);
    if ((r = kfile_str(cf, ctx, "cluster", what, &cluster, errbuf, errlen)) < 0 ||
        (r = kfile_str(cf, ctx, "user", what, &user, errbuf, errlen)) < 0 ||
        (r = kfile_str(cf, ctx, "namespace", what, &c->namespace, errbuf, errlen)) < 0)
        goto out;
    if (!cluster || !cluster[0]) {
        r = kfile_fail(errbuf, errlen, VMG_ECONFIG,
                       "kubeconfig %s: context \"%s\" names no cluster", cf->path, ctx_name);
        goto out;
    }
    r = find_for_context(s, cf, ctx_name, "cluster", cluster, &f, &body, errbuf, errlen);
    if (r < 0)
        goto out;
    r = load_cluster(c, f, body, cluster, errbuf, errlen);
    if (r < 0)
        goto out;
    if (user && user[0]) {
        r = find_for_context(s, cf, ctx_name, "user", user, &f, &body, errbuf, errlen);
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
        return kfile_fail(errbuf, errlen, VMG_ECONFIG,
                          "no kubeconfig found (%s) and not running in a cluster (%s unset)", tried,
                          host ? "KUBERNETES_SERVICE_PORT" : "KUBERNETES_SERVICE_HOST");
    errno = 0;
    p = strtol(port, &end, 10);
    if (errno || *end || p < 1 || p > 65535)
        return kfile_fail(errbuf, errlen, VMG_ECONFIG,
                          "in-cluster: KUBERNETES_SERVICE_PORT is not a port");
    if (strchr(host, '/') || strchr(host, '@') || strchr(host, '[') || strchr(host, ' '))
        return kfile_fail(errbuf, errlen, VMG_ECONFIG,
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
        r = kfile_fail(errbuf, errlen, r == -ENOMEM ? r : VMG_ECONFIG,
                       "in-cluster: token file %s: %s", c->token_file, token_strerror(r));
        goto out;
    }
    r = kcred_read_file(ca_path, MAX_PEM_BYTES, &c->ca, &c->ca_len, NULL);
    if (r < 0) {
        r = kfile_fail(errbuf, errlen, r == -ENOMEM ? r : VMG_ECONFIG, "in-cluster: file %s: %s",
                       ca_path, kfile_strerror(r));
        goto out;
    }
    r = kcred_pem_certs(c->ca, c->ca_len);
    if (r == 0)
        r = kfile_fail(errbuf, errlen, VMG_ECONFIG, "in-cluster: file %s holds no PEM certificate",
                       ca_path);
    if (r < 0)
        goto out;
    r = kcred_read_file(ns_path, 1024, &ns, &ns_len, NULL);
    if (r == 0) {
        while (ns_len > 0 && isspace((unsigned char)ns[ns_len - 1]))
            ns[--ns_len] = '\0';
        if (ns_len > 0) {
            c->namespace = ns;
            ns = NULL;
        }
    } else if (r != -ENOENT) {
        r = kfile_fail(errbuf, errlen, r == -ENOMEM ? r : VMG_ECONFIG, "in-cluster: file %s: %s",
                       ns_path, kfile_strerror(r));
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
        r = kset_add(s, opts->kubeconfig, 1, errbuf, errlen);
    } else if ((v = env_get(opts, "KUBECONFIG")) != NULL) {
        list = strdup(v);
        if (!list) {
            r = -ENOMEM;
            goto out;
        }
        for (char *p = strtok_r(list, ":", &save); p && r == 0; p = strtok_r(NULL, ":", &save))
            r = kset_add(s, p, 0, errbuf, errlen);
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
        r = kset_add(s, path, 0, errbuf, errlen);
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
    return e->cred.expiry != 0 && e->cred.expiry - now <= REFRESH_MARGIN;
}

unsigned long kcfg_credential_gen(const kcfg *c)
{
    return c ? c->token_gen + (c->exec ? c->exec->gen : 0) : 0;
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
        token = c->exec->cred.token;
        if (c->exec->cred.cert) {
            cert = c->exec->cred.cert;
            cert_len = c->exec->cred.cert_len;
            key = c->exec->cred.key;
            key_len = c->exec->cred.key_len;
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
    /* The CA given is the only one: curl's CA folder (the system's, in
     * the image) would add every public CA to it. */
    if (c->ca && (rc = curl_easy_setopt(easy, CURLOPT_CAPATH, NULL)) != CURLE_OK)
        return curl_err(rc);
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
        vmg_wipe_free(h, n);
        if (!l)
            return -ENOMEM;
        *headers = l;
    }
    return 0;
}

/* ---- exec credential plugins (run by exec.c) ---- */

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
            ok = (ca = vmg_b64_encode_alloc(c->ca, c->ca_len)) != NULL &&
                 cJSON_AddStringToObject(cl, "certificate-authority-data", ca);
    }
    if (ok)
        out = cJSON_PrintUnformatted(o);
    free(ca);
    cJSON_Delete(o);
    return out;
}

/* exec_result takes the credential of a run that ended, if it gave one. */
static void exec_result(void *owner, int err, struct kexec_cred *cr)
{
    struct kcfg_exec *e = owner;
    if (err == 0) {
        kexec_cred_clear(&e->cred);
        e->cred = *cr;
        e->have = 1;
        e->gen++;
        e->invalid = 0;
        memset(cr, 0, sizeof(*cr));
    }
    e->run = NULL;
}

int kcfg_exec_refresh(kcfg *c, uv_loop_t *loop, void (*done)(void *data, int err, const char *msg),
                      void *data)
{
    struct kcfg_exec *e;
    struct kexec_spec spec;
    char *json;
    int r;

    if (!c || !loop || !done || !c->exec)
        return -EINVAL;
    e = c->exec;
    if (e->stopped)
        return VMG_ECANCELED;
    if (e->run)
        return kexec_join(e->run, done, data);
    json = exec_info(c);
    if (!json)
        return -ENOMEM;
    spec = (struct kexec_spec){
        .command = e->command,
        .args = e->args,
        .nargs = e->nargs,
        .env = e->env,
        .nenv = e->nenv,
        .api_version = e->api_version,
        .install_hint = e->install_hint,
        .info = json,
        .timeout_ms = c->exec_timeout_ms,
    };
    r = kexec_start(loop, &spec, exec_result, e, done, data, &e->run);
    free(json);
    return r;
}

void kcfg_exec_stop(kcfg *c)
{
    struct kcfg_exec *e = c ? c->exec : NULL;

    if (!e)
        return;
    e->stopped = 1;
    if (e->run) {
        kexec_cancel(e->run);
        e->run = NULL;
    }
}

/* ---- kcfg_free ---- */

static void exec_free(struct kcfg_exec *e)
{
    if (!e)
        return;
    if (e->run)
        kexec_cancel(e->run);
    free(e->api_version);
    free(e->command);
    for (char **p = e->args; p && *p; p++)
        kcred_free_str(*p);
    free(e->args);
    for (char **p = e->env; p && *p; p++)
        kcred_free_str(*p);
    free(e->env);
    free(e->install_hint);
    kexec_cred_clear(&e->cred);
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
    vmg_wipe_free(c->key, c->key_len);
    kcred_free_str(c->token);
    free(c->token_file);
    kcred_free_str(c->file_token);
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
    if (c->exec && c->exec->have && c->exec->cred.cert) {
        ret->cert = c->exec->cred.cert;
        ret->cert_len = c->exec->cred.cert_len;
        ret->key = c->exec->cred.key;
        ret->key_len = c->exec->cred.key_len;
    }
    if (c->exec)
        ret->expiry = c->exec->cred.expiry;
    ret->insecure = c->insecure;
    ret->tls_server_name = c->tls_server_name;
    ret->connect_to = c->connect_to ? c->connect_to->data : NULL;
}

int kcfg_testing_parse_time(const char *s, time_t *ret)
{
    return kcred_parse_time(s, ret);
}

int kcfg_testing_parse_cred(const char *out, size_t len, const char *api_version,
                            struct kcfg_testing_cred *ret, char *msg, size_t msglen)
{
    struct kexec_cred cr;
    int r;

    memset(ret, 0, sizeof(*ret));
    r = kexec_parse_cred(out, len, "plugin", api_version, &cr, msg, msglen);
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
    kcred_free_str(cr->token);
    vmg_wipe_free(cr->cert, cr->cert_len);
    vmg_wipe_free(cr->key, cr->key_len);
    memset(cr, 0, sizeof(*cr));
}
#endif
