/* test_kubeconfig.c: kubectl's rules for finding and reading the
 * configuration, what kcfg_apply sets on a curl handle (checked in part by
 * real TLS handshakes with a server on loopback), and exec credential plugins
 * run on a real uv loop. Kubeconfigs are written at test time into a mkdtemp
 * folder; certificates, keys and the plugin script come from
 * tests/unit/fixtures/kubeconfig/. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <uv.h>

#include "kube/kube.h"
#include "kube/kubeconfig.h"
#include "lib/http.h"
#include "lib/b64.h"
#include "lib/err.h"
#include "lib/jsonwipe.h"
#include "lib/tlsgen.h"

#define FIXTURES "tests/unit/fixtures/kubeconfig"

/* ---- per-test state: a temporary folder and a fake environment ---- */

struct t {
    char dir[64];
    char fx[PATH_MAX]; /* absolute path of the fixtures */
    char err[1024];
    const char *env_k[8];
    char *env_v[8];
    size_t nenv;
    struct kcfg_opts o;
};

static const char *t_getenv(void *data, const char *name)
{
    struct t *t = data;
    for (size_t i = 0; i < t->nenv; i++)
        if (strcmp(t->env_k[i], name) == 0)
            return t->env_v[i];
    return NULL;
}

static void t_setenv(struct t *t, const char *k, const char *v)
{
    for (size_t i = 0; i < t->nenv; i++) {
        if (strcmp(t->env_k[i], k) == 0) {
            free(t->env_v[i]);
            t->env_v[i] = strdup(v);
            return;
        }
    }
    assert_true(t->nenv < 8);
    t->env_k[t->nenv] = k;
    t->env_v[t->nenv] = strdup(v);
    assert_non_null(t->env_v[t->nenv]);
    t->nenv++;
}

static int setup(void **state)
{
    struct t *t = calloc(1, sizeof(*t));
    if (!t)
        return -1;
    snprintf(t->dir, sizeof(t->dir), "/tmp/test_kcfg.XXXXXX");
    if (!mkdtemp(t->dir) || !realpath(FIXTURES, t->fx)) {
        free(t);
        return -1;
    }
    t->o.getenv = t_getenv;
    t->o.env_data = t;
    *state = t;
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int teardown(void **state)
{
    struct t *t = *state;
    nftw(t->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    for (size_t i = 0; i < t->nenv; i++)
        free(t->env_v[i]);
    free(t);
    return 0;
}

/* tpath: dir/name, in a buffer of the caller's. */
static const char *tpath(struct t *t, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", t->dir, name);
    return buf;
}

static void write_at(const char *path, const char *content)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(content, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* twrite writes name in the test folder; returns its path (static buffer
 * rotation: valid for the next 3 calls). */
static const char *twrite(struct t *t, const char *name, const char *content)
{
    static char bufs[4][PATH_MAX];
    static int k;
    char *b = bufs[k++ % 4];
    tpath(t, name, b, PATH_MAX);
    write_at(b, content);
    return b;
}

static char *fixture(struct t *t, const char *name, size_t *len)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/%s", t->fx, name);
    return unit_read_file(p, len);
}

/* fixture_b64 is the base64 of a fixture, as kubectl writes "-data". */
static char *fixture_b64(struct t *t, const char *name)
{
    size_t len;
    char *raw = fixture(t, name, &len);
    char *out = malloc(4 * ((len + 2) / 3) + 1);
    assert_non_null(out);
    EVP_EncodeBlock((unsigned char *)out, (unsigned char *)raw, (int)len);
    free(raw);
    return out;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, f);
    assert_true(vasprintf(&s, f, ap) >= 0);
    va_end(ap);
    return s;
}

/* kc is a one-context kubeconfig: context "dev" -> cluster "c1" (with the
 * given extra lines), user "bob" (with the given lines). */
static char *kc(const char *cluster_lines, const char *user_lines)
{
    return fmt("apiVersion: v1\nkind: Config\ncurrent-context: dev\n"
               "clusters:\n- name: c1\n  cluster:\n    server: https://127.0.0.1:6443\n%s"
               "contexts:\n- name: dev\n  context:\n    cluster: c1\n    user: bob\n"
               "users:\n- name: bob\n  user:\n%s",
               cluster_lines, user_lines);
}

/* kc2 is kc() taking ownership of its (malloc'd or NULL) arguments. */
static char *kc2(char *cluster_lines, char *user_lines)
{
    char *s = kc(cluster_lines ? cluster_lines : "", user_lines ? user_lines : "");
    free(cluster_lines);
    free(user_lines);
    return s;
}

/* load_text writes text as "config" and loads it with --kubeconfig. */
static int load_text(struct t *t, const char *text, kcfg **ret)
{
    t->o.kubeconfig = twrite(t, "config", text);
    t->err[0] = '\0';
    return kcfg_load(&t->o, ret, t->err, sizeof(t->err));
}

static kcfg *load_ok(struct t *t, const char *text)
{
    kcfg *c = NULL;
    int r = load_text(t, text, &c);
    if (r != 0)
        fail_msg("kcfg_load: %d: %s", r, t->err);
    assert_non_null(c);
    return c;
}

/* auth_header applies c to a fresh handle and returns the Authorization
 * header it added (NULL when none), checking it added at most one. */
static char *auth_header(kcfg *c)
{
    CURL *e = curl_easy_init();
    struct curl_slist *h = NULL;
    char *out = NULL;
    int n = 0;
    assert_non_null(e);
    assert_int_equal(kcfg_apply(c, e, &h), 0);
    for (struct curl_slist *p = h; p; p = p->next) {
        n++;
        if (strncmp(p->data, "Authorization: ", 15) == 0)
            out = strdup(p->data);
    }
    assert_true(n <= 1);
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    return out;
}

static void assert_auth(kcfg *c, const char *want)
{
    char *h = auth_header(c);
    if (!want) {
        assert_null(h);
        return;
    }
    assert_non_null(h);
    assert_string_equal(h, want);
    free(h);
}

static void assert_has(const char *msg, const char *want)
{
    if (!strstr(msg, want))
        fail_msg("message \"%s\" lacks \"%s\"", msg, want);
}

static void assert_mem(const char *got, size_t got_len, const char *want, size_t want_len)
{
    assert_non_null(got);
    assert_int_equal(got_len, want_len);
    assert_memory_equal(got, want, want_len);
}

/* ---- what a kubeconfig says ---- */

static void test_relative_paths_fixture(void **state)
{
    struct t *t = *state;
    char path[PATH_MAX + 64];
    struct kcfg_testing_view v;
    size_t ca_len, cert_len, key_len;
    char *ca = fixture(t, "ca.crt", &ca_len), *cert = fixture(t, "client.crt", &cert_len);
    char *key = fixture(t, "client.key", &key_len);
    kcfg *c = NULL;
    int r;

    /* The kubeconfig is named relative to the working directory and its
     * references relative to its folder. */
    snprintf(path, sizeof(path), "%s/relative.yaml", FIXTURES);
    t->o.kubeconfig = path;
    r = kcfg_load(&t->o, &c, t->err, sizeof(t->err));
    if (r)
        fail_msg("%s", t->err);
    assert_string_equal(kcfg_server(c), "https://127.0.0.1:6443");
    assert_string_equal(kcfg_context(c), "fixture");
    assert_string_equal(kcfg_namespace(c), "fixture-ns");
    assert_string_equal(kcfg_source(c), path);
    assert_int_equal(kcfg_in_cluster(c), 0);
    assert_int_equal(kcfg_has_exec(c), 0);
    kcfg_testing_view(c, &v);
    assert_mem(v.ca, v.ca_len, ca, ca_len);
    assert_mem(v.cert, v.cert_len, cert, cert_len);
    assert_mem(v.key, v.key_len, key, key_len);
    assert_int_equal(v.insecure, 0);
    assert_null(v.connect_to);
    assert_auth(c, "Authorization: Bearer fixture-token");
    kcfg_free(c);
    free(ca);
    free(cert);
    free(key);
}

static void test_data_fields(void **state)
{
    struct t *t = *state;
    char *ca64 = fixture_b64(t, "ca.crt"), *crt64 = fixture_b64(t, "client.crt");
    char *key64 = fixture_b64(t, "client.key");
    size_t ca_len, cert_len, key_len;
    char *ca = fixture(t, "ca.crt", &ca_len), *cert = fixture(t, "client.crt", &cert_len);
    char *key = fixture(t, "client.key", &key_len);
    /* Data wins over a file, even a missing one; token over tokenFile. */
    char *cl =
        fmt("    certificate-authority-data: %s\n    certificate-authority: /nonexistent\n", ca64);
    char *us = fmt("    client-certificate-data: %s\n    client-key-data: %s\n"
                   "    client-certificate: /nonexistent\n    token: tok-123\n"
                   "    tokenFile: /nonexistent\n",
                   crt64, key64);
    char *text = kc(cl, us);
    struct kcfg_testing_view v;
    kcfg *c = load_ok(t, text);

    kcfg_testing_view(c, &v);
    assert_mem(v.ca, v.ca_len, ca, ca_len);
    assert_mem(v.cert, v.cert_len, cert, cert_len);
    assert_mem(v.key, v.key_len, key, key_len);
    assert_auth(c, "Authorization: Bearer tok-123");
    assert_string_equal(kcfg_namespace(c), "default");
    kcfg_free(c);
    free(text);
    free(cl);
    free(us);
    free(ca64);
    free(crt64);
    free(key64);
    free(ca);
    free(cert);
    free(key);
}

static void test_no_user_no_auth(void **state)
{
    struct t *t = *state;
    kcfg *c = load_ok(t, "current-context: x\n"
                         "clusters: [{name: c, cluster: {server: 'https://k.example:443/'}}]\n"
                         "contexts: [{name: x, context: {cluster: c, namespace: ns1}}]\n");
    struct kcfg_testing_view v;
    assert_string_equal(kcfg_server(c), "https://k.example:443");
    assert_string_equal(kcfg_namespace(c), "ns1");
    kcfg_testing_view(c, &v);
    assert_null(v.ca);
    assert_null(v.cert);
    assert_auth(c, NULL);
    kcfg_free(c);
}

static void test_server_forms(void **state)
{
    struct t *t = *state;
    static const struct {
        const char *server, *want;
    } cases[] = {
        {"10.0.0.1:6443", "https://10.0.0.1:6443"}, /* kubectl assumes https */
        {"https://k.example/prefix/", "https://k.example/prefix"},
        {"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
        {"https://[fd00::1]:6443", "https://[fd00::1]:6443"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *text = fmt("current-context: x\n"
                         "clusters: [{name: c, cluster: {server: '%s'}}]\n"
                         "contexts: [{name: x, context: {cluster: c}}]\n",
                         cases[i].server);
        kcfg *c = load_ok(t, text);
        assert_string_equal(kcfg_server(c), cases[i].want);
        kcfg_free(c);
        free(text);
    }
}

static void test_token_file_rotation(void **state)
{
    struct t *t = *state;
    char tok[PATH_MAX];
    struct timespec ts[2];
    char *us, *text;
    kcfg *c;

    tpath(t, "token", tok, sizeof(tok));
    write_at(tok, "first-token\n");
    us = fmt("    tokenFile: %s\n", tok);
    text = kc("", us);
    c = load_ok(t, text);
    assert_auth(c, "Authorization: Bearer first-token");
    assert_auth(c, "Authorization: Bearer first-token");

    /* Rewrite it (same length) with a later mtime: the next apply sees it. */
    write_at(tok, "other-token\n");
    ts[0].tv_sec = ts[1].tv_sec = time(NULL) + 100;
    ts[0].tv_nsec = ts[1].tv_nsec = 0;
    assert_int_equal(utimensat(AT_FDCWD, tok, ts, 0), 0);
    assert_auth(c, "Authorization: Bearer other-token");

    /* Replaced by rename, as the kubelet does: a new inode. */
    twrite(t, "token.new", "third-token");
    {
        char nw[PATH_MAX];
        assert_int_equal(rename(tpath(t, "token.new", nw, sizeof(nw)), tok), 0);
    }
    assert_auth(c, "Authorization: Bearer third-token");

    /* A failed re-read keeps the last good token. */
    assert_int_equal(unlink(tok), 0);
    assert_auth(c, "Authorization: Bearer third-token");
    write_at(tok, "fourth-token");
    assert_auth(c, "Authorization: Bearer fourth-token");
    kcfg_free(c);
    free(us);
    free(text);
}

static void test_insecure_and_tls_server_name(void **state)
{
    struct t *t = *state;
    struct kcfg_testing_view v;
    kcfg *c;
    char *ca64 = fixture_b64(t, "ca.crt");
    char *cl = fmt("    tls-server-name: kube.test\n    certificate-authority-data: %s\n", ca64);
    char *text = kc(cl, "    token: x\n");

    c = load_ok(t, text);
    kcfg_testing_view(c, &v);
    assert_int_equal(v.insecure, 0);
    assert_string_equal(v.tls_server_name, "kube.test");
    assert_string_equal(kcfg_server(c), "https://kube.test:6443");
    assert_string_equal(v.connect_to, "kube.test:6443:127.0.0.1:6443");
    kcfg_free(c);
    free(text);

    text = fmt("current-context: x\n"
               "clusters: [{name: c, cluster: {server: 'https://[fd00::1]', "
               "tls-server-name: kube.test, insecure-skip-tls-verify: false}}]\n"
               "contexts: [{name: x, context: {cluster: c}}]\n");
    c = load_ok(t, text);
    kcfg_testing_view(c, &v);
    assert_string_equal(kcfg_server(c), "https://kube.test");
    assert_string_equal(v.connect_to, "kube.test:443:[fd00::1]:443");
    kcfg_free(c);
    free(text);

    text = kc("    insecure-skip-tls-verify: true\n", "");
    c = load_ok(t, text);
    kcfg_testing_view(c, &v);
    assert_int_equal(v.insecure, 1);
    assert_null(v.ca);
    assert_null(v.connect_to);
    kcfg_free(c);
    free(text);
    free(cl);
    free(ca64);
}

/* ---- where the configuration comes from ---- */

static void test_kubeconfig_merge(void **state)
{
    struct t *t = *state;
    char a[PATH_MAX], b[PATH_MAX], miss[PATH_MAX];
    char *list;
    kcfg *c = NULL;
    int r;

    /* a: no current-context; its context and cluster win over b's. */
    write_at(tpath(t, "a", a, sizeof(a)),
             "clusters:\n- name: c1\n  cluster:\n    server: https://a.example:1\n"
             "contexts:\n- name: dev\n  context:\n    cluster: c1\n    user: u\n"
             "    namespace: from-a\n");
    /* b: sets current-context; its user is the only one. */
    write_at(tpath(t, "b", b, sizeof(b)),
             "current-context: dev\n"
             "clusters:\n- name: c1\n  cluster:\n    server: https://b.example:2\n"
             "- name: c2\n  cluster:\n    server: https://b.example:3\n"
             "contexts:\n- name: dev\n  context:\n    cluster: c2\n    namespace: from-b\n"
             "- name: other\n  context:\n    cluster: c2\n"
             "users:\n- name: u\n  user:\n    token: token-b\n");
    tpath(t, "missing", miss, sizeof(miss));
    list = fmt("%s::%s:%s", miss, a, b);
    t_setenv(t, "KUBECONFIG", list);
    r = kcfg_load(&t->o, &c, t->err, sizeof(t->err));
    if (r)
        fail_msg("%s", t->err);
    assert_string_equal(kcfg_context(c), "dev");
    assert_string_equal(kcfg_server(c), "https://a.example:1");
    assert_string_equal(kcfg_namespace(c), "from-a");
    assert_auth(c, "Authorization: Bearer token-b");
    {
        char *src = fmt("%s:%s", a, b);
        assert_string_equal(kcfg_source(c), src);
        free(src);
    }
    kcfg_free(c);

    /* A context only b defines, chosen by name. */
    t->o.context = "other";
    c = NULL;
    assert_int_equal(kcfg_load(&t->o, &c, t->err, sizeof(t->err)), 0);
    assert_string_equal(kcfg_server(c), "https://b.example:3");
    assert_string_equal(kcfg_namespace(c), "default");
    assert_auth(c, NULL);
    kcfg_free(c);
    t->o.context = NULL;

    /* The first file that sets current-context wins. */
    write_at(a, "current-context: other\n");
    c = NULL;
    assert_int_equal(kcfg_load(&t->o, &c, t->err, sizeof(t->err)), 0);
    assert_string_equal(kcfg_context(c), "other");
    kcfg_free(c);
    free(list);
}

static void test_precedence(void **state)
{
    struct t *t = *state;
    char home[PATH_MAX], kdir[PATH_MAX + 8], hconf[PATH_MAX + 16];
    const char *expl, *env;
    kcfg *c = NULL;
    int r;

    tpath(t, "home", home, sizeof(home));
    snprintf(kdir, sizeof(kdir), "%s/.kube", home);
    snprintf(hconf, sizeof(hconf), "%s/config", kdir);
    assert_int_equal(mkdir(home, 0700), 0);
    assert_int_equal(mkdir(kdir, 0700), 0);
#define ONE(host)                                                                                  \
    "current-context: x\nclusters: [{name: c, cluster: {server: 'https://" host "'}}]\n"           \
    "contexts: [{name: x, context: {cluster: c}}]\n"
    write_at(hconf, ONE("home"));
    env = twrite(t, "envconf", ONE("env"));
    char envpath[PATH_MAX];
    snprintf(envpath, sizeof(envpath), "%s", env);
    expl = twrite(t, "explicit", ONE("explicit"));
    t_setenv(t, "HOME", home);
    t_setenv(t, "KUBECONFIG", envpath);
    /* in-cluster is available too, and is last */
    t_setenv(t, "KUBERNETES_SERVICE_HOST", "10.96.0.1");
    t_setenv(t, "KUBERNETES_SERVICE_PORT", "443");

    t->o.kubeconfig = expl;
    assert_int_equal(kcfg_load(&t->o, &c, t->err, sizeof(t->err)), 0);
    assert_string_equal(kcfg_server(c), "https://explicit");
    kcfg_free(c);

    t->o.kubeconfig = NULL;
    assert_int_equal(kcfg_load(&t->o, &c, t->err, sizeof(t->err)), 0);
    assert_string_equal(kcfg_server(c), "https://env");
    kcfg_free(c);

    t_setenv(t, "KUBECONFIG", "");
    assert_int_equal(kcfg_load(&t->o, &c, t->err, sizeof(t->err)), 0);
    assert_string_equal(kcfg_server(c), "https://home");
    kcfg_free(c);

    /* No home file: in-cluster, which here lacks its token file. */
    assert_int_equal(unlink(hconf), 0);
    t->o.incluster_dir = t->dir;
    c = NULL;
    r = kcfg_load(&t->o, &c, t->err, sizeof(t->err));
    assert_int_equal(r, VMG_ECONFIG);
    assert_null(c);
    assert_has(t->err, "in-cluster: token file");

    /* Nothing at all. */
    t_setenv(t, "KUBERNETES_SERVICE_HOST", "");
    r = kcfg_load(&t->o, &c, t->err, sizeof(t->err));
    assert_int_equal(r, VMG_ECONFIG);
    assert_string_equal(t->err,
                        "no kubeconfig found (tried --kubeconfig, KUBECONFIG, ~/.kube/config) and "
                        "not running in a cluster (KUBERNETES_SERVICE_HOST unset)");

    /* KUBECONFIG naming only missing files does not fall back to HOME. */
    write_at(hconf, ONE("home"));
    t_setenv(t, "KUBECONFIG", "/nonexistent/a:/nonexistent/b");
    r = kcfg_load(&t->o, &c, t->err, sizeof(t->err));
    assert_int_equal(r, VMG_ECONFIG);
    assert_has(t->err, "no kubeconfig found (none of the files in "
                       "KUBECONFIG=/nonexistent/a:/nonexistent/b exists)");

    /* An explicit path must exist. */
    t->o.kubeconfig = "/nonexistent/config";
    r = kcfg_load(&t->o, &c, t->err, sizeof(t->err));
    assert_int_equal(r, VMG_ECONFIG);
    assert_string_equal(t->err, "kubeconfig /nonexistent/config: No such file or directory");
    assert_null(c);
#undef ONE
}

static void test_in_cluster(void **state)
{
    struct t *t = *state;
    size_t ca_len;
    char *ca = fixture(t, "ca.crt", &ca_len);
    char tok[PATH_MAX];
    struct kcfg_testing_view v;
    struct timespec ts[2];
    kcfg *c = NULL;
    int r;

    twrite(t, "ca.crt", ca);
    write_at(tpath(t, "token", tok, sizeof(tok)), "sa-token-1\n");
    twrite(t, "namespace", "operators\n");
    t_setenv(t, "KUBERNETES_SERVICE_HOST", "10.96.0.1");
    t_setenv(t, "KUBERNETES_SERVICE_PORT", "443");
    t->o.incluster_dir = t->dir;
    r = kcfg_load(&t->o, &c, t->err, sizeof(t->err));
    if (r)
        fail_msg("%s", t->err);
    assert_int_equal(kcfg_in_cluster(c), 1);
    assert_string_equal(kcfg_server(c), "https://10.96.0.1:443");
    assert_string_equal(kcfg_namespace(c), "operators");
    assert_string_equal(kcfg_context(c), "");
    assert_string_equal(kcfg_source(c), "in-cluster");
    kcfg_testing_view(c, &v);
    assert_mem(v.ca, v.ca_len, ca, ca_len);
    assert_null(v.cert);
    assert_auth(c, "Authorization: Bearer sa-token-1");

    /* The kubelet rotates the token. */
    write_at(tok, "sa-token-2\n");
    ts[0].tv_sec = ts[1].tv_sec = time(NULL) + 50;
    ts[0].tv_nsec = ts[1].tv_nsec = 0;
    assert_int_equal(utimensat(AT_FDCWD, tok, ts, 0), 0);
    assert_auth(c, "Authorization: Bearer sa-token-2");
    kcfg_free(c);

    /* IPv6 service address; no namespace file. */
    {
        char ns[PATH_MAX];
        assert_int_equal(unlink(tpath(t, "namespace", ns, sizeof(ns))), 0);
    }
    t_setenv(t, "KUBERNETES_SERVICE_HOST", "fd00:10:96::1");
    t_setenv(t, "KUBERNETES_SERVICE_PORT", "6443");
    c = NULL;
    assert_int_equal(kcfg_load(&t->o, &c, t->err, sizeof(t->err)), 0);
    assert_string_equal(kcfg_server(c), "https://[fd00:10:96::1]:6443");
    assert_string_equal(kcfg_namespace(c), "default");
    kcfg_free(c);

    /* Missing pieces. */
    t_setenv(t, "KUBERNETES_SERVICE_PORT", "");
    r = kcfg_load(&t->o, &c, t->err, sizeof(t->err));
    assert_int_equal(r, VMG_ECONFIG);
    assert_has(t->err, "(KUBERNETES_SERVICE_PORT unset)");
    t_setenv(t, "KUBERNETES_SERVICE_PORT", "443");
    {
        char p[PATH_MAX];
        assert_int_equal(unlink(tpath(t, "ca.crt", p, sizeof(p))), 0);
        r = kcfg_load(&t->o, &c, t->err, sizeof(t->err));
        assert_int_equal(r, VMG_ECONFIG);
        char *want = fmt("in-cluster: file %s: No such file or directory", p);
        assert_string_equal(t->err, want);
        free(want);
    }
    free(ca);
}

/* ---- bad kubeconfigs ---- */

static void test_bad_configs(void **state)
{
    struct t *t = *state;
    char *ca64 = fixture_b64(t, "ca.crt"), *crt64 = fixture_b64(t, "client.crt");
    char *skey64 = fixture_b64(t, "server.key");
    /* '@' in want stands for the test folder. */
    struct {
        char *text;
        int code;
        const char *want;
    } cases[] = {
        {fmt("current-context: dev\nclusters: [{name: c1, cluster: {server: 'https://x'}}]\n"
             "contexts: [{name: dev, context: {cluster: c1, user: bob}}]\nusers: []\n"),
         VMG_ECONFIG,
         "kubeconfig @/config: context \"dev\" names user \"bob\", which is not defined"},
        {fmt("current-context: dev\nclusters: [{name: c1, cluster: {insecure-skip-tls-verify: "
             "true}}]\ncontexts: [{name: dev, context: {cluster: c1}}]\n"),
         VMG_ECONFIG, "kubeconfig @/config: cluster \"c1\" has no server"},
        {kc("    certificate-authority-data: 'bm90!!base64'\n", ""), VMG_ECONFIG,
         "kubeconfig @/config: certificate-authority-data of cluster \"c1\" is not valid base64"},
        {kc("    certificate-authority-data: aGVsbG8\n", ""), VMG_ECONFIG,
         "certificate-authority-data of cluster \"c1\" is not valid base64"},
        {kc("    certificate-authority-data: aGVsbG8=\n", ""), VMG_ECONFIG,
         "the certificate authority of cluster \"c1\" holds no PEM certificate"},
        {kc("    certificate-authority: ca-missing.crt\n", ""), VMG_ECONFIG,
         "kubeconfig @/config: certificate-authority of cluster \"c1\": file "
         "@/ca-missing.crt: No such file or directory"},
        {fmt("clusters: []\n"), VMG_ECONFIG,
         "kubeconfig @/config: current-context is not set and no context was given"},
        {fmt("current-context: nope\ncontexts: []\n"), VMG_ECONFIG,
         "kubeconfig @/config: context \"nope\" is not defined"},
        {fmt("current-context: dev\ncontexts: [{name: dev, context: {cluster: c9}}]\n"),
         VMG_ECONFIG, "context \"dev\" names cluster \"c9\", which is not defined"},
        {fmt("current-context: dev\ncontexts: [{name: dev, context: {user: u}}]\n"), VMG_ECONFIG,
         "context \"dev\" names no cluster"},
        {fmt("current-context: dev\nclusters: [\n  {name: c1\n"), VMG_EPARSE,
         "kubeconfig @/config: YAML error at line"},
        {fmt("- just\n- a list\n"), VMG_EPARSE, "kubeconfig @/config: not a YAML mapping"},
        {fmt("current-context: dev\nclusters: {c1: {}}\n"
             "contexts: [{name: dev, context: {cluster: c1}}]\n"),
         VMG_ECONFIG, "kubeconfig @/config: clusters is not a list"},
        {fmt("current-context: dev\ncontexts: [{context: {cluster: c1}}]\n"), VMG_ECONFIG,
         "kubeconfig @/config: contexts[0] has no name"},
        {kc2(NULL, fmt("    client-certificate-data: %s\n", crt64)), VMG_ECONFIG,
         "user \"bob\" has a client certificate but no client-key"},
        {kc2(NULL,
             fmt("    client-certificate-data: %s\n    client-key-data: %s\n", crt64, skey64)),
         VMG_ECONFIG, "the client key does not match the client certificate of user \"bob\""},
        {kc2(NULL, fmt("    client-certificate-data: %s\n    client-key-data: %s\n", crt64, crt64)),
         VMG_ECONFIG, "the client key is not an unencrypted PEM private key of user \"bob\""},
        {kc2(NULL, fmt("    auth-provider: {name: gcp}\n")), VMG_ECONFIG,
         "user \"bob\" uses auth-provider, which is not supported"},
        {kc2(NULL, fmt("    username: admin\n    password: pw\n")), VMG_ECONFIG,
         "user \"bob\" uses username/password"},
        {kc2(NULL, fmt("    exec:\n      apiVersion: client.authentication.k8s.io/v1alpha1\n"
                       "      command: x\n")),
         VMG_ECONFIG,
         "exec of user \"bob\" has apiVersion \"client.authentication.k8s.io/v1alpha1\"; "
         "supported are"},
        {kc2(NULL, fmt("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n")),
         VMG_ECONFIG, "kubeconfig @/config: exec of user \"bob\" has no command"},
        {kc2(NULL, fmt("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                       "      command: x\n      env: [{value: v}]\n")),
         VMG_ECONFIG, "exec env[0] of user \"bob\" needs a name"},
        {kc2(NULL, fmt("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                       "      command: x\n      args: [a, [b]]\n")),
         VMG_ECONFIG, "exec args[1] of user \"bob\" is not a string"},
        {kc2(NULL,
             fmt("    token: t\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                 "      command: x\n")),
         VMG_ECONFIG, "user \"bob\" sets both exec and token/tokenFile"},
        {kc2(fmt("    insecure-skip-tls-verify: true\n    certificate-authority-data: %s\n", ca64),
             NULL),
         VMG_ECONFIG,
         "cluster \"c1\" sets both insecure-skip-tls-verify and a certificate authority"},
        {kc("    insecure-skip-tls-verify: maybe\n", ""), VMG_ECONFIG,
         "insecure-skip-tls-verify of cluster \"c1\" is not a boolean"},
        {kc("    tls-server-name: [a]\n", ""), VMG_ECONFIG,
         "tls-server-name of cluster \"c1\" is not a string"},
        {kc2(NULL, fmt("    tokenFile: nope\n")), VMG_ECONFIG,
         "kubeconfig @/config: tokenFile of user \"bob\": file @/nope: No such file or directory"},
        {fmt("current-context: dev\nclusters: [{name: c1, cluster: {server: 'ftp://x'}}]\n"
             "contexts: [{name: dev, context: {cluster: c1}}]\n"),
         VMG_ECONFIG, "server of cluster \"c1\" is not an http or https URL"},
        {fmt("current-context: dev\nclusters: [{name: c1, cluster: {server: "
             "'https://admin:pw-s3cret@kube.test:6443'}}]\n"
             "contexts: [{name: dev, context: {cluster: c1}}]\n"),
         VMG_ECONFIG, "server of cluster \"c1\" holds a user name or password"},
        {fmt("current-context: dev\nclusters: [{name: c1, cluster: {server: "
             "'https://admin@kube.test'}}]\n"
             "contexts: [{name: dev, context: {cluster: c1}}]\n"),
         VMG_ECONFIG, "server of cluster \"c1\" holds a user name or password"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char want[1024];
        size_t k = 0;
        kcfg *c = NULL;
        int r;
        for (const char *p = cases[i].want; *p && k + PATH_MAX < sizeof(want); p++) {
            if (*p == '@')
                k += (size_t)snprintf(want + k, sizeof(want) - k, "%s", t->dir);
            else
                want[k++] = *p;
        }
        want[k] = '\0';
        r = load_text(t, cases[i].text, &c);
        if (r != cases[i].code)
            fail_msg("case %zu: got %d (%s), want %d", i, r, t->err, cases[i].code);
        assert_null(c);
        assert_has(t->err, want);
        assert_null(strstr(t->err, "s3cret"));
        free(cases[i].text);
    }
    free(ca64);
    free(crt64);
    free(skey64);
}

static void test_no_secrets_in_messages(void **state)
{
    struct t *t = *state;
    kcfg *c = NULL;
    char tok[PATH_MAX];
    char *text;
    int r;

    text = kc("", "    token: \"SECRET-TOKEN\\x01\"\n");
    r = load_text(t, text, &c);
    free(text);
    assert_int_equal(r, VMG_ECONFIG);
    assert_has(t->err, "token of user \"bob\" holds control characters");
    assert_null(strstr(t->err, "SECRET"));

    text = kc("", "    client-certificate-data: bm90\n    client-key-data: "
                  "'SECRET-KEY-MATERIAL!!'\n");
    r = load_text(t, text, &c);
    free(text);
    assert_int_equal(r, VMG_ECONFIG);
    assert_has(t->err, "client-key-data of user \"bob\" is not valid base64");
    assert_null(strstr(t->err, "SECRET"));

    write_at(tpath(t, "tok", tok, sizeof(tok)), "SECRET\x02TOKEN\n");
    text = kc("", "    tokenFile: tok\n");
    r = load_text(t, text, &c);
    free(text);
    assert_int_equal(r, VMG_ECONFIG);
    assert_has(t->err, "tokenFile of user \"bob\": file");
    assert_has(t->err, "empty or holds control characters");
    assert_null(strstr(t->err, "SECRET"));
}

/* cJSON's blocks, looked at as they are freed: none may still hold the
 * secret a test put in a plugin's output. */
static const char *secret_looked_for;
static int secret_blocks;

static void free_looking(void *p)
{
    if (p && memmem(p, malloc_usable_size(p), secret_looked_for, strlen(secret_looked_for)))
        secret_blocks++;
    free(p);
}

/* What a plugin printed is wiped whole before it is freed: also when it is
 * refused before its token was looked at (an apiVersion or a kind not the
 * one asked for), past a NUL in a string ("\u0000"), and when it is not
 * JSON after the token (cJSON frees what it parsed itself). */
static void test_exec_output_wiped(void **state)
{
    cJSON_Hooks hooks = {malloc, free_looking};
#define V1 "\"apiVersion\":\"client.authentication.k8s.io/v1\","
    static const char *const outputs[] = {
        "{" V1 "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"SECRET-TOKEN-1\"}}",
        "{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\","
        "\"status\":{\"token\":\"SECRET-TOKEN-1\"}}",
        "{" V1 "\"kind\":\"Other\",\"status\":{\"token\":\"SECRET-TOKEN-1\"}}",
        "{" V1 "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"x\\u0000SECRET-TOKEN-1\"}}",
        "{" V1 "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"SECRET-TOKEN-1\"}",
        "{" V1 "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"SECRET-TOKEN-1\",}}",
        "{" V1 "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"SECRET-TOKEN-1\\q\"}}",
    };
#undef V1

    (void)state;
    secret_looked_for = "SECRET-TOKEN-1";
    json_hooks_set(&hooks);
    for (size_t i = 0; i < sizeof(outputs) / sizeof(outputs[0]); i++) {
        struct kcfg_testing_cred cr;
        char msg[256];

        (void)kcfg_testing_parse_cred(outputs[i], strlen(outputs[i]),
                                      "client.authentication.k8s.io/v1", &cr, msg, sizeof(msg));
        kcfg_testing_cred_clear(&cr);
        if (secret_blocks)
            fail_msg("output %zu: freed holding the token", i);
    }
    json_hooks_set(NULL);
}

/* A FIFO named where a file is expected (a tokenFile, a certificate
 * authority) is refused at once: opening it waited for a writer, forever
 * at the start, and a token file read again would have stopped the
 * loop. */
static void test_fifo_refused(void **state)
{
    struct t *t = *state;
    char fifo[PATH_MAX];
    static const char *const texts[][2] = {
        {"", "    tokenFile: fifo\n"},
        {"    certificate-authority: fifo\n", ""},
    };

    tpath(t, "fifo", fifo, sizeof(fifo));
    assert_int_equal(mkfifo(fifo, 0600), 0);
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        char *text = kc(texts[i][0], texts[i][1]);
        kcfg *c = NULL;

        assert_int_equal(load_text(t, text, &c), VMG_ECONFIG);
        assert_null(c);
        assert_has(t->err, fifo);
        assert_has(t->err, "not a regular file");
        free(text);
    }
    unlink(fifo);
}

/* ---- exec credential plugins ---- */

struct done_rec {
    int calls;
    int err;
    char msg[1024];
};

static void on_done(void *data, int err, const char *msg)
{
    struct done_rec *d = data;
    d->calls++;
    d->err = err;
    snprintf(d->msg, sizeof(d->msg), "%s", msg ? msg : "(null)");
    if (err == 0)
        assert_null(msg);
}

/* exec_setup copies the plugin into the test folder (so the fixture's
 * mode does not matter) and loads a kubeconfig that runs it. */
static kcfg *exec_load(struct t *t, const char *api, const char *args, const char *extra)
{
    char *script = fixture(t, "exec-plugin.sh", NULL);
    char plugin[PATH_MAX], info[PATH_MAX];
    char *ca64 = fixture_b64(t, "ca.crt");
    char *cl = fmt("    certificate-authority-data: %s\n    tls-server-name: kube.test\n", ca64);
    char *us = fmt("    exec:\n      apiVersion: %s\n      command: ./plugin.sh\n"
                   "      args: %s\n      provideClusterInfo: true\n"
                   "      interactiveMode: Never\n"
                   "      env:\n      - name: PLUGIN_TOKEN\n        value: abc\n"
                   "      - name: INFO_OUT\n        value: %s\n%s",
                   api, args, tpath(t, "info.json", info, sizeof(info)), extra);
    char *text = kc(cl, us);
    kcfg *c;

    write_at(tpath(t, "plugin.sh", plugin, sizeof(plugin)), script);
    assert_int_equal(chmod(plugin, 0755), 0);
    c = load_ok(t, text);
    free(text);
    free(us);
    free(cl);
    free(ca64);
    free(script);
    return c;
}

/* run_refresh runs one refresh to completion on a fresh loop. */
static void run_refresh(kcfg *c, struct done_rec *d)
{
    uv_loop_t loop;
    memset(d, 0, sizeof(*d));
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(kcfg_exec_refresh(c, &loop, on_done, d), 0);
    assert_int_equal(d->calls, 0); /* never from inside the call */
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(d->calls, 1);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_exec_token(void **state)
{
    struct t *t = *state;
    struct tm tm = {
        .tm_year = 130, .tm_mon = 0, .tm_mday = 2, .tm_hour = 3, .tm_min = 4, .tm_sec = 5};
    time_t expiry = timegm(&tm);
    char info[PATH_MAX];
    struct done_rec d;
    struct kcfg_testing_view v;
    CURL *e = curl_easy_init();
    struct curl_slist *h = NULL;
    kcfg *c =
        exec_load(t, "client.authentication.k8s.io/v1", "[token, '2030-01-02T03:04:05Z']", "");

    assert_int_equal(kcfg_has_exec(c), 1);
    assert_int_equal(kcfg_needs_refresh(c, 0), 1);
    assert_int_equal(kcfg_apply(c, e, &h), -EAGAIN);
    assert_null(h);

    run_refresh(c, &d);
    if (d.err)
        fail_msg("%s", d.msg);
    kcfg_testing_view(c, &v);
    assert_int_equal(v.expiry, expiry);
    assert_int_equal(kcfg_needs_refresh(c, expiry - 3600), 0);
    assert_int_equal(kcfg_needs_refresh(c, expiry - 5), 1);
    assert_auth(c, "Authorization: Bearer exec-abc");

    /* What the plugin was told. */
    {
        char *js = unit_read_file(tpath(t, "info.json", info, sizeof(info)), NULL);
        cJSON *j = cJSON_Parse(js), *spec, *cl;
        char *ca64 = fixture_b64(t, "ca.crt");
        assert_non_null(j);
        assert_string_equal(cJSON_GetObjectItem(j, "apiVersion")->valuestring,
                            "client.authentication.k8s.io/v1");
        assert_string_equal(cJSON_GetObjectItem(j, "kind")->valuestring, "ExecCredential");
        spec = cJSON_GetObjectItem(j, "spec");
        assert_true(cJSON_IsFalse(cJSON_GetObjectItem(spec, "interactive")));
        cl = cJSON_GetObjectItem(spec, "cluster");
        assert_string_equal(cJSON_GetObjectItem(cl, "server")->valuestring,
                            "https://127.0.0.1:6443");
        assert_string_equal(cJSON_GetObjectItem(cl, "tls-server-name")->valuestring, "kube.test");
        assert_string_equal(cJSON_GetObjectItem(cl, "certificate-authority-data")->valuestring,
                            ca64);
        cJSON_Delete(j);
        free(js);
        free(ca64);
    }

    /* A 401 invalidates it. */
    kcfg_invalidate(c);
    assert_int_equal(kcfg_needs_refresh(c, expiry - 3600), 1);
    run_refresh(c, &d);
    assert_int_equal(d.err, 0);
    assert_int_equal(kcfg_needs_refresh(c, expiry - 3600), 0);
    curl_easy_cleanup(e);
    kcfg_free(c);
}

/* has_line tells whether the text of lines holds line, whole. */
static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);

    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, line, n) == 0 && (p[n] == '\n' || p[n] == '\0'))
            return 1;
    return 0;
}

/* The plugin gets the variables the kubeconfig lists and the usual ones
 * (PATH, LC_*, ...), those the common cloud plugins read (AWS_*, AZURE_*,
 * GOOGLE_APPLICATION_CREDENTIALS, CLOUDSDK_*, XDG_*, ALL_PROXY), and none
 * of the manager's secrets: not VC_PASS or VC_USER, not anything else of
 * ours it does not need. The kubeconfig's value wins. */
static void test_exec_environment(void **state)
{
    struct t *t = *state;
    struct done_rec d;
    char envpath[PATH_MAX];
    char *extra = fmt("      - name: ENV_OUT\n        value: %s\n"
                      "      - name: TZ\n        value: Europe/Paris\n",
                      tpath(t, "env.txt", envpath, sizeof(envpath)));
    kcfg *c = exec_load(t, "client.authentication.k8s.io/v1", "[token, '-']", extra);
    char *env;

    assert_int_equal(setenv("VC_PASS", "exec-s3cret", 1), 0);
    assert_int_equal(setenv("VC_USER", "administrator@vsphere.local", 1), 0);
    assert_int_equal(setenv("SOME_API_TOKEN", "tok-s3cret", 1), 0);
    assert_int_equal(setenv("LC_VMG_TEST", "kept", 1), 0);
    assert_int_equal(setenv("TZ", "UTC", 1), 0);
    assert_int_equal(setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/r", 1), 0);
    assert_int_equal(setenv("AZURE_CLIENT_ID", "az-client", 1), 0);
    assert_int_equal(setenv("GOOGLE_APPLICATION_CREDENTIALS", "/var/gcp.json", 1), 0);
    assert_int_equal(setenv("CLOUDSDK_CONFIG", "/var/gcloud", 1), 0);
    assert_int_equal(setenv("XDG_CONFIG_HOME", "/var/xdg", 1), 0);
    assert_int_equal(setenv("ALL_PROXY", "socks5://proxy:1080", 1), 0);
    run_refresh(c, &d);
    unsetenv("AWS_ROLE_ARN");
    unsetenv("AZURE_CLIENT_ID");
    unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
    unsetenv("CLOUDSDK_CONFIG");
    unsetenv("XDG_CONFIG_HOME");
    unsetenv("ALL_PROXY");
    unsetenv("VC_PASS");
    unsetenv("VC_USER");
    unsetenv("SOME_API_TOKEN");
    unsetenv("LC_VMG_TEST");
    unsetenv("TZ");
    if (d.err)
        fail_msg("%s", d.msg);
    env = unit_read_file(envpath, NULL);
    assert_null(strstr(env, "s3cret"));
    assert_null(strstr(env, "VC_"));
    assert_null(strstr(env, "SOME_API_TOKEN"));
    assert_true(strncmp(env, "PATH=", 5) == 0 || strstr(env, "\nPATH=") != NULL);
    assert_non_null(strstr(env, "PLUGIN_TOKEN=abc\n"));
    assert_non_null(strstr(env, "LC_VMG_TEST=kept\n"));
    assert_true(has_line(env, "AWS_ROLE_ARN=arn:aws:iam::1:role/r"));
    assert_true(has_line(env, "AZURE_CLIENT_ID=az-client"));
    assert_true(has_line(env, "GOOGLE_APPLICATION_CREDENTIALS=/var/gcp.json"));
    assert_true(has_line(env, "CLOUDSDK_CONFIG=/var/gcloud"));
    assert_true(has_line(env, "XDG_CONFIG_HOME=/var/xdg"));
    assert_true(has_line(env, "ALL_PROXY=socks5://proxy:1080"));
    assert_non_null(strstr(env, "KUBERNETES_EXEC_INFO={"));
    assert_non_null(strstr(env, "TZ=Europe/Paris\n"));
    assert_null(strstr(env, "TZ=UTC"));
    free(env);
    free(extra);
    kcfg_free(c);
}

/* Linked with --wrap=free: while freed_watch is set, the blocks freed
 * that held it are counted. */
static const char *freed_watch;
static int freed_held;
void __real_free(void *p);
void __wrap_free(void *p);

void __wrap_free(void *p)
{
    if (p && freed_watch && memmem(p, malloc_usable_size(p), freed_watch, strlen(freed_watch)))
        freed_held++;
    __real_free(p);
}

/* An exec env value (a cloud's secret key, say) is wiped when the
 * kubeconfig is read and when it is freed. */
static void test_exec_env_value_wiped(void **state)
{
    struct t *t = *state;
    char *text = kc("", "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                        "      command: ./plugin.sh\n      interactiveMode: Never\n"
                        "      env:\n      - name: AWS_SECRET_ACCESS_KEY\n"
                        "        value: ENV-SECRET-VALUE\n");
    kcfg *c = NULL;

    freed_watch = "ENV-SECRET-VALUE";
    freed_held = 0;
    assert_int_equal(load_text(t, text, &c), 0);
    kcfg_free(c);
    freed_watch = NULL;
    free(text);
    assert_int_equal(freed_held, 0);
}

/* A server URL refused (for its scheme, its credentials) leaves no copy of
 * the password it held in freed memory. */
static void test_refused_server_url_wiped(void **state)
{
    struct t *t = *state;
    static const char *const servers[] = {"ftp://admin:pw-s3cret@kube.test",
                                          "https://admin:pw-s3cret@kube.test:6443"};

    for (size_t i = 0; i < sizeof(servers) / sizeof(servers[0]); i++) {
        char *text = fmt("current-context: dev\nclusters: [{name: c1, cluster: {server: '%s'}}]\n"
                         "contexts: [{name: dev, context: {cluster: c1}}]\n",
                         servers[i]);
        kcfg *c = NULL;

        freed_watch = "pw-s3cret";
        freed_held = 0;
        assert_int_equal(load_text(t, text, &c), VMG_ECONFIG);
        freed_watch = NULL;
        free(text);
        if (freed_held)
            fail_msg("server %zu: %d blocks freed holding the password", i, freed_held);
    }
}

static void test_exec_no_expiry_and_join(void **state)
{
    struct t *t = *state;
    struct done_rec d1 = {0}, d2 = {0};
    uv_loop_t loop;
    kcfg *c = exec_load(t, "client.authentication.k8s.io/v1", "[token, '-']", "");

    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(kcfg_exec_refresh(c, &loop, on_done, &d1), 0);
    assert_int_equal(kcfg_exec_refresh(c, &loop, on_done, &d2), 0);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(d1.calls, 1);
    assert_int_equal(d2.calls, 1);
    assert_int_equal(d1.err, 0);
    assert_int_equal(d2.err, 0);
    assert_int_equal(uv_loop_close(&loop), 0);
    assert_int_equal(kcfg_needs_refresh(c, time(NULL) + 10 * 365 * 86400), 0);
    kcfg_free(c);
}

static void test_exec_client_cert(void **state)
{
    struct t *t = *state;
    struct done_rec d;
    struct kcfg_testing_view v;
    size_t cert_len, key_len;
    char *cert = fixture(t, "client.crt", &cert_len), *key = fixture(t, "client.key", &key_len);
    char *args = fmt("[cert, '%s']", t->fx);
    kcfg *c = exec_load(t, "client.authentication.k8s.io/v1", args, "");

    run_refresh(c, &d);
    if (d.err)
        fail_msg("%s", d.msg);
    kcfg_testing_view(c, &v);
    assert_mem(v.cert, v.cert_len, cert, cert_len);
    assert_mem(v.key, v.key_len, key, key_len);
    assert_int_equal(v.expiry, 0);
    assert_auth(c, NULL);
    kcfg_free(c);
    free(args);
    free(cert);
    free(key);
}

static void test_exec_failures(void **state)
{
    struct t *t = *state;
    char cmd[PATH_MAX];
    static const struct {
        const char *api, *args, *extra;
        unsigned timeout_ms;
        int err;
        const char *want, *not_want;
    } cases[] = {
        {"client.authentication.k8s.io/v1", "[fail]", "", 0, VMG_EAUTH,
         "plugin.sh\": exit status 3: login required: run sso-login first", "second line"},
        {"client.authentication.k8s.io/v1", "[sleep]", "", 200, -ETIMEDOUT,
         "plugin.sh\": did not finish within 200 ms; killed", NULL},
        {"client.authentication.k8s.io/v1", "[garbage]", "", 0, VMG_EPARSE,
         "plugin.sh\": output is not a JSON object", NULL},
        {"client.authentication.k8s.io/v1", "[big]", "", 0, VMG_ETOOBIG,
         "plugin.sh\": wrote more than 1048576 bytes; killed", NULL},
        {"client.authentication.k8s.io/v1", "[token, 'yesterday']", "", 0, VMG_EPARSE,
         "status.expirationTimestamp is not RFC 3339", "exec-abc"},
        {"client.authentication.k8s.io/v1beta1", "[token, '-']", "", 0, VMG_EPARSE,
         "output's apiVersion is not \"client.authentication.k8s.io/v1beta1\"", "exec-abc"},
    };
    tpath(t, "plugin.sh", cmd, sizeof(cmd));
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct done_rec d;
        kcfg *c;
        t->o.exec_timeout_ms = cases[i].timeout_ms;
        c = exec_load(t, cases[i].api, cases[i].args, cases[i].extra);
        run_refresh(c, &d);
        if (d.err != cases[i].err)
            fail_msg("case %zu: got %d (%s)", i, d.err, d.msg);
        assert_has(d.msg, cmd); /* names the command */
        assert_has(d.msg, cases[i].want);
        if (cases[i].not_want)
            assert_null(strstr(d.msg, cases[i].not_want));
        assert_int_equal(kcfg_needs_refresh(c, 0), 1);
        kcfg_free(c);
    }
}

/* A plugin that leaves a process running that holds its stdout and
 * stderr (an agent it starts) has printed its credential all the same: it
 * is taken 2 s after the plugin's exit (EXEC_GRACE_MS), not refused as
 * "did not finish" at the timeout; the process is left alone. */
static void test_exec_plugin_leaves_a_process(void **state)
{
    struct t *t = *state;
    char info[PATH_MAX], pidf[PATH_MAX + 8];
    struct done_rec d;
    uint64_t start;
    FILE *f;
    int pid = 0;
    kcfg *c;

    t->o.exec_timeout_ms = 20000;
    c = exec_load(t, "client.authentication.k8s.io/v1", "[linger]", "");
    start = uv_hrtime();
    run_refresh(c, &d);
    if (d.err != 0)
        fail_msg("refresh failed: %s", d.msg);
    assert_true(uv_hrtime() - start < 10000ull * 1000000);
    assert_auth(c, "Authorization: Bearer exec-abc");
    snprintf(pidf, sizeof(pidf), "%s.linger", tpath(t, "info.json", info, sizeof(info)));
    f = fopen(pidf, "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%d", &pid), 1);
    fclose(f);
    assert_int_equal(kill(pid, 0), 0); /* still running: left alone */
    kill(pid, SIGKILL);
    unlink(pidf);
    kcfg_free(c);
}

static void test_exec_not_found(void **state)
{
    struct t *t = *state;
    char *us = fmt("    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n"
                   "      command: bin/missing-plugin\n"
                   "      installHint: 'install it with: apt install missing-plugin'\n");
    char *text = kc("", us);
    kcfg *c = load_ok(t, text);
    struct done_rec d;
    char *want = fmt("exec plugin \"%s/bin/missing-plugin\": not found; install it with: apt "
                     "install missing-plugin",
                     t->dir);

    run_refresh(c, &d);
    assert_int_equal(d.err, -ENOENT);
    assert_string_equal(d.msg, want);
    kcfg_free(c);
    free(want);
    free(text);
    free(us);
}

static void test_exec_canceled_by_free(void **state)
{
    struct t *t = *state;
    struct done_rec d = {0};
    uv_loop_t loop;
    kcfg *c = exec_load(t, "client.authentication.k8s.io/v1", "[sleep]", "");

    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(kcfg_exec_refresh(c, &loop, on_done, &d), 0);
    kcfg_free(c);
    assert_int_equal(d.calls, 0);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.err, VMG_ECANCELED);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void close_any(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* A program that stops closes every handle left on its loop (the manager
 * does, after a stop that took too long), and frees the configuration only
 * once the loop is closed: kcfg_exec_stop, first, lets a plugin still
 * running close its own handles and call its callbacks; a refresh after
 * it starts nothing. Before, the handles closed under the run made
 * kcfg_free close them again (libuv aborts on that). */
static void test_exec_stopped_before_the_loop_closes(void **state)
{
    struct t *t = *state;
    struct done_rec d = {0}, late = {0};
    uv_loop_t loop;
    kcfg *c = exec_load(t, "client.authentication.k8s.io/v1", "[sleep]", "");

    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(kcfg_exec_refresh(c, &loop, on_done, &d), 0);
    kcfg_exec_stop(c);
    kcfg_exec_stop(c); /* again: nothing more */
    assert_int_equal(kcfg_exec_refresh(c, &loop, on_done, &late), VMG_ECANCELED);
    uv_walk(&loop, close_any, NULL);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.err, VMG_ECANCELED);
    assert_int_equal(late.calls, 0);
    kcfg_free(c);
    kcfg_exec_stop(NULL);
}

static void test_exec_refresh_without_exec(void **state)
{
    struct t *t = *state;
    struct done_rec d = {0};
    uv_loop_t loop;
    char *text = kc("", "    token: x\n");
    kcfg *c = load_ok(t, text);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(kcfg_exec_refresh(c, &loop, on_done, &d), -EINVAL);
    assert_int_equal(kcfg_needs_refresh(c, 0), 0);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(d.calls, 0);
    assert_int_equal(uv_loop_close(&loop), 0);
    kcfg_free(c);
    free(text);
}

static void test_parse_time(void **state)
{
    static const struct {
        const char *s;
        int ok;
        time_t want;
    } cases[] = {
        {"1970-01-01T00:00:00Z", 1, 0},
        {"2030-01-02T03:04:05Z", 1, 1893553445},
        {"2030-01-02T03:04:05.123456789Z", 1, 1893553445},
        {"2030-01-02T05:04:05+02:00", 1, 1893553445},
        {"2030-01-01T23:04:05-04:00", 1, 1893553445},
        {"2030-01-02t03:04:05z", 1, 1893553445},
        {"2030-01-02 03:04:05Z", 0, 0},
        {"2030-01-02T03:04:05", 0, 0},
        {"2030-13-02T03:04:05Z", 0, 0},
        {"2030-01-02T03:04:05.Z", 0, 0},
        {"2030-01-02T03:04:05Zjunk", 0, 0},
        {"tomorrow", 0, 0},
        {"", 0, 0},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        time_t got = 42;
        int r = kcfg_testing_parse_time(cases[i].s, &got);
        if (cases[i].ok) {
            if (r != 0)
                fail_msg("%s: %d", cases[i].s, r);
            assert_int_equal(got, cases[i].want);
        } else {
            if (r == 0)
                fail_msg("%s accepted", cases[i].s);
        }
    }
}

/* ---- real TLS handshakes on loopback ---- */

struct srv {
    int lfd;
    int port;
    SSL_CTX *ctx;
    pthread_t th;
    int handshake_ok;
    char sni[256];
    char auth[512];
    char client_cn[128];
};

static int srv_sni(SSL *ssl, int *alert, void *arg)
{
    struct srv *s = arg;
    const char *n = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    (void)alert;
    snprintf(s->sni, sizeof(s->sni), "%s", n ? n : "");
    return SSL_TLSEXT_ERR_OK;
}

static void *srv_main(void *arg)
{
    struct srv *s = arg;
    char req[8192];
    size_t len = 0;
    int fd = accept(s->lfd, NULL, NULL);
    SSL *ssl;
    X509 *peer;
    if (fd < 0)
        return NULL;
    ssl = SSL_new(s->ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) == 1) {
        s->handshake_ok = 1;
        peer = SSL_get1_peer_certificate(ssl);
        if (peer) {
            X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, s->client_cn,
                                      sizeof(s->client_cn));
            X509_free(peer);
        }
        while (len < sizeof(req) - 1) {
            int n = SSL_read(ssl, req + len, (int)(sizeof(req) - 1 - len));
            if (n <= 0)
                break;
            len += (size_t)n;
            req[len] = '\0';
            if (strstr(req, "\r\n\r\n"))
                break;
        }
        req[len] = '\0';
        {
            const char *a = strstr(req, "\r\nAuthorization: ");
            if (a) {
                size_t n = strcspn(a + 2, "\r");
                snprintf(s->auth, sizeof(s->auth), "%.*s", (int)n, a + 2);
            }
        }
        static const char resp[] =
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
        SSL_write(ssl, resp, (int)sizeof(resp) - 1);
        SSL_shutdown(ssl);
    }
    SSL_free(ssl);
    close(fd);
    return NULL;
}

static void srv_start(struct t *t, struct srv *s, int want_client_cert)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t alen = sizeof(a);
    char p[PATH_MAX + 64];

    memset(s, 0, sizeof(*s));
    s->ctx = SSL_CTX_new(TLS_server_method());
    assert_non_null(s->ctx);
    snprintf(p, sizeof(p), "%s/server.crt", t->fx);
    assert_int_equal(SSL_CTX_use_certificate_chain_file(s->ctx, p), 1);
    snprintf(p, sizeof(p), "%s/server.key", t->fx);
    assert_int_equal(SSL_CTX_use_PrivateKey_file(s->ctx, p, SSL_FILETYPE_PEM), 1);
    SSL_CTX_set_tlsext_servername_callback(s->ctx, srv_sni);
    SSL_CTX_set_tlsext_servername_arg(s->ctx, s);
    if (want_client_cert) {
        snprintf(p, sizeof(p), "%s/ca.crt", t->fx);
        assert_int_equal(SSL_CTX_load_verify_locations(s->ctx, p, NULL), 1);
        SSL_CTX_set_verify(s->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s->lfd >= 0);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(s->lfd, 4), 0);
    assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &alen), 0);
    s->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&s->th, NULL, srv_main, s), 0);
}

static void srv_stop(struct srv *s)
{
    shutdown(s->lfd, SHUT_RDWR); /* wakes accept() if nobody connected */
    pthread_join(s->th, NULL);
    close(s->lfd);
    SSL_CTX_free(s->ctx);
}

static size_t discard(char *p, size_t size, size_t n, void *u)
{
    (void)p;
    (void)u;
    return size * n;
}

/* get_from sends GET /version through c, with capath as curl's CA folder
 * before c applies (NULL: curl's own); returns curl's result. */
static CURLcode get_from(kcfg *c, const char *capath)
{
    CURL *e = curl_easy_init();
    struct curl_slist *h = NULL;
    char *url = fmt("%s/version", kcfg_server(c));
    CURLcode rc;
    assert_non_null(e);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    if (capath)
        curl_easy_setopt(e, CURLOPT_CAPATH, capath);
    assert_int_equal(kcfg_apply(c, e, &h), 0);
    h = curl_slist_append(h, "Accept: application/json");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    rc = curl_easy_perform(e);
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    free(url);
    return rc;
}

static CURLcode get(kcfg *c)
{
    return get_from(c, NULL);
}

/* The CA a kubeconfig names is the only one trusted: a server whose
 * certificate another CA signed fails, even one in the system's CA
 * folder (here a folder of the test's, holding the server's CA). */
static void test_ca_replaces_the_system_trust(void **state)
{
    struct t *t = *state;
    const char *const sans[] = {"other.test"};
    char *other = NULL, *other_key = NULL, *other64, *text, *ca;
    char capath[PATH_MAX], hashed[PATH_MAX + 16];
    struct srv s;
    X509 *x;
    BIO *b;
    kcfg *c;
    CURLcode rc;

    /* The folder, as c_rehash makes it: <subject hash>.0. */
    snprintf(capath, sizeof(capath), "%s/capath", t->dir);
    assert_int_equal(mkdir(capath, 0700), 0);
    ca = fixture(t, "ca.crt", NULL);
    b = BIO_new_mem_buf(ca, -1);
    x = PEM_read_bio_X509(b, NULL, NULL, NULL);
    assert_non_null(x);
    snprintf(hashed, sizeof(hashed), "%s/%08lx.0", capath, X509_subject_name_hash(x));
    write_at(hashed, ca);
    X509_free(x);
    BIO_free(b);
    /* A CA of its own, that signed nothing the server has. */
    assert_int_equal(vmg_tls_selfsigned("other.test", sans, 1, &other, &other_key), 0);
    other64 = vmg_b64_encode_alloc(other, strlen(other));
    assert_non_null(other64);

    srv_start(t, &s, 0);
    text = fmt("current-context: dev\n"
               "clusters: [{name: c1, cluster: {server: 'https://127.0.0.1:%d', "
               "tls-server-name: kube.test, certificate-authority-data: %s}}]\n"
               "contexts: [{name: dev, context: {cluster: c1, user: bob}}]\n"
               "users: [{name: bob, user: {token: t}}]\n",
               s.port, other64);
    c = load_ok(t, text);
    rc = get_from(c, capath);
    srv_stop(&s);
    assert_int_equal(rc, CURLE_PEER_FAILED_VERIFICATION);
    assert_string_equal(s.auth, ""); /* the token never went */
    kcfg_free(c);
    free(text);
    free(other64);
    free(other);
    free(other_key);
    free(ca);
    unlink(hashed);
    rmdir(capath);
}

static void test_tls_handshake_with_server_name_and_client_cert(void **state)
{
    struct t *t = *state;
    struct srv s;
    char *ca64 = fixture_b64(t, "ca.crt"), *crt64 = fixture_b64(t, "client.crt");
    char *key64 = fixture_b64(t, "client.key");
    char *text, *cluster, *user;
    kcfg *c;
    CURLcode rc;

    srv_start(t, &s, 1);
    cluster = fmt("{server: 'https://127.0.0.1:%d', tls-server-name: kube.test, "
                  "certificate-authority-data: %s}",
                  s.port, ca64);
    user = fmt("{client-certificate-data: %s, client-key-data: %s, token: tls-tok}", crt64, key64);
    text = fmt("current-context: dev\n"
               "clusters: [{name: c1, cluster: %s}]\n"
               "contexts: [{name: dev, context: {cluster: c1, user: bob}}]\n"
               "users: [{name: bob, user: %s}]\n",
               cluster, user);
    c = load_ok(t, text);
    rc = get(c);
    srv_stop(&s);
    if (rc != CURLE_OK)
        fail_msg("curl: %s", curl_easy_strerror(rc));
    assert_int_equal(s.handshake_ok, 1);
    assert_string_equal(s.sni, "kube.test");
    assert_string_equal(s.client_cn, "kcfg-test-client");
    assert_string_equal(s.auth, "Authorization: Bearer tls-tok");
    kcfg_free(c);
    free(text);
    free(cluster);
    free(user);
    free(ca64);
    free(crt64);
    free(key64);
}

static void test_tls_verification(void **state)
{
    struct t *t = *state;
    struct srv s;
    char *ca64 = fixture_b64(t, "ca.crt");
    char *text;
    kcfg *c;
    CURLcode rc;

    /* Without tls-server-name the certificate (for kube.test) does not
     * match 127.0.0.1: verification is on. */
    srv_start(t, &s, 0);
    text = fmt("current-context: dev\n"
               "clusters: [{name: c1, cluster: {server: 'https://127.0.0.1:%d', "
               "certificate-authority-data: %s}}]\n"
               "contexts: [{name: dev, context: {cluster: c1}}]\n",
               s.port, ca64);
    c = load_ok(t, text);
    rc = get(c);
    srv_stop(&s);
    assert_int_equal(rc, CURLE_PEER_FAILED_VERIFICATION);
    kcfg_free(c);
    free(text);

    /* Neither without the CA: the server is unknown to the system store. */
    srv_start(t, &s, 0);
    text = fmt("current-context: dev\n"
               "clusters: [{name: c1, cluster: {server: 'https://127.0.0.1:%d', "
               "tls-server-name: kube.test}}]\n"
               "contexts: [{name: dev, context: {cluster: c1}}]\n",
               s.port);
    c = load_ok(t, text);
    rc = get(c);
    srv_stop(&s);
    assert_int_equal(rc, CURLE_PEER_FAILED_VERIFICATION);
    kcfg_free(c);
    free(text);

    /* insecure-skip-tls-verify accepts it. */
    srv_start(t, &s, 0);
    text = fmt("current-context: dev\n"
               "clusters: [{name: c1, cluster: {server: 'https://127.0.0.1:%d', "
               "insecure-skip-tls-verify: true}}]\n"
               "contexts: [{name: dev, context: {cluster: c1}}]\n",
               s.port);
    c = load_ok(t, text);
    rc = get(c);
    srv_stop(&s);
    if (rc != CURLE_OK)
        fail_msg("curl: %s", curl_easy_strerror(rc));
    assert_string_equal(s.sni, ""); /* no SNI for an IP address */
    assert_string_equal(s.auth, "");
    kcfg_free(c);
    free(text);
    free(ca64);
}

struct refused {
    int calls, err;
    char msg[512];
};

static void on_refused(void *data, const struct kube_result *res)
{
    struct refused *r = data;

    r->calls++;
    r->err = res->err;
    snprintf(r->msg, sizeof(r->msg), "%s", res->message);
}

/* A server certificate refused for its name fails the request at once:
 * trying again cannot help. Retried, each try would wait for a handshake
 * the server no longer answers here (it takes one connection), and the
 * error would come after five timeouts. */
static void test_refused_name_not_retried(void **state)
{
    struct t *t = *state;
    struct kube_client_opts co = {.qps = -1, .timeout_ms = 3000, .backoff_base_ms = 10};
    struct refused r = {0};
    char *ca64 = fixture_b64(t, "ca.crt");
    kube_client *kc = NULL;
    vmg_http *http;
    uv_loop_t loop;
    uint64_t start;
    struct srv s;
    char *text;
    kcfg *c;
    int e;

    srv_start(t, &s, 0);
    text = fmt("current-context: dev\n"
               "clusters: [{name: c1, cluster: {server: 'https://127.0.0.1:%d', "
               "certificate-authority-data: %s}}]\n"
               "contexts: [{name: dev, context: {cluster: c1}}]\n",
               s.port, ca64);
    c = load_ok(t, text);
    assert_int_equal(uv_loop_init(&loop), 0);
    http = vmg_http_new(&loop, &e);
    assert_non_null(http);
    assert_int_equal(kube_client_new(&loop, http, c, &co, &kc), 0);
    start = uv_hrtime();
    assert_int_equal(kube_get(kc, "/version", on_refused, &r), 0);
    while (r.calls == 0)
        uv_run(&loop, UV_RUN_ONCE);
    assert_true(uv_hrtime() - start < 2500ull * 1000000);
    assert_int_equal(r.err, VMG_ETRANSPORT);
    assert_has(r.msg, "127.0.0.1");
    kube_client_close(kc, NULL, NULL);
    vmg_http_close(http, NULL, NULL);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
    srv_stop(&s);
    kcfg_free(c);
    free(text);
    free(ca64);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_relative_paths_fixture, setup, teardown),
        cmocka_unit_test_setup_teardown(test_data_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_user_no_auth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_forms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_file_rotation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_insecure_and_tls_server_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kubeconfig_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_precedence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_cluster, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_configs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_secrets_in_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_environment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_env_value_wiped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_server_url_wiped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_no_expiry_and_join, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_client_cert, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_canceled_by_free, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_stopped_before_the_loop_closes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo_refused, setup, teardown),
        cmocka_unit_test(test_exec_output_wiped),
        cmocka_unit_test_setup_teardown(test_refused_name_not_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_plugin_leaves_a_process, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_refresh_without_exec, setup, teardown),
        cmocka_unit_test(test_parse_time),
        cmocka_unit_test_setup_teardown(test_ca_replaces_the_system_trust, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_handshake_with_server_name_and_client_cert, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_tls_verification, setup, teardown),
    };
    int r;
    /* The TLS server thread may write to a connection curl already closed. */
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    r = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return r;
}
