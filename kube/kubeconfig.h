/* kubeconfig.h: how a client finds and authenticates to the API server.
 *
 * kcfg_load() follows kubectl's rules. Where: the --kubeconfig path, else the
 * files in KUBECONFIG (':'-separated; missing files skipped; for clusters,
 * contexts and users the first file that defines a name wins, and
 * current-context comes from the first file that sets it), else
 * $HOME/.kube/config, else the in-cluster service account. When KUBECONFIG
 * is set but names no existing file, the home file is not consulted (as in
 * kubectl); the in-cluster config is. What: the current context (or the one
 * named in the options), its cluster, user and namespace ("default" when
 * unset). Relative file references (certificate-authority, client-certificate,
 * client-key, tokenFile, an exec command containing a '/') are resolved
 * against the folder of the kubeconfig file that defined the entry. The
 * "-data" fields win over their file counterparts, and token over tokenFile.
 * Every file is read into memory at load: later changes of the CA or of the
 * client certificate need a new kcfg; only bearer token files are re-read
 * (see kcfg_apply).
 *
 * The result is used with libcurl, per request:
 *
 *     struct curl_slist *h = NULL;
 *     if (kcfg_needs_refresh(c, time(NULL)))  // exec plugins only
 *         ... kcfg_exec_refresh(c, loop, done, data); send from done() ...
 *     curl_easy_setopt(easy, CURLOPT_URL, <kcfg_server(c) + "/api/v1/...">);
 *     kcfg_apply(c, easy, &h);                // TLS options, Authorization
 *     h = curl_slist_append(h, "Accept: application/json");
 *     curl_easy_setopt(easy, CURLOPT_HTTPHEADER, h);
 *     ... transfer; on HTTP 401: kcfg_invalidate(c), refresh if needed, retry once
 *     curl_slist_free_all(h);                 // after the transfer
 *
 * Secrets (tokens, keys) never appear in error messages, and the header list
 * holds one, so callers must not log it.
 *
 * Not thread-safe: a kcfg belongs to one thread (the loop's).
 */
#ifndef VMG_KUBECONFIG_H
#define VMG_KUBECONFIG_H

#include <stddef.h>
#include <time.h>

#include <curl/curl.h>
#include <uv.h>

typedef struct kcfg kcfg;

/* What kcfg_load needs from outside. Every field may be zero/NULL. */
struct kcfg_opts {
    /* --kubeconfig: one file, which must exist. NULL or "": not given. */
    const char *kubeconfig;
    /* --context: the context to use instead of current-context. */
    const char *context;
    /* The environment (KUBECONFIG, HOME, KUBERNETES_SERVICE_HOST/PORT).
     * NULL: getenv(3). Tests pass a table here. An exec plugin's child
     * process still inherits the real environment (environ). */
    const char *(*getenv)(void *env_data, const char *name);
    void *env_data;
    /* The service account folder holding token, ca.crt and namespace.
     * NULL: /var/run/secrets/kubernetes.io/serviceaccount. */
    const char *incluster_dir;
    /* How long an exec plugin may run before it is killed; 0: 30000. */
    unsigned exec_timeout_ms;
};

/* kcfg_load finds and reads the configuration. On success it stores a new
 * kcfg in *ret and returns 0. On failure it returns VMG_ECONFIG (bad or
 * incomplete configuration, missing file), VMG_EPARSE (malformed YAML),
 * -ENOMEM or another negative code, writes a one-line message to errbuf
 * naming what is wrong and where (e.g. `kubeconfig /x/config: context "dev"
 * names user "bob", which is not defined`), and leaves *ret alone. */
int kcfg_load(const struct kcfg_opts *opts, kcfg **ret, char *errbuf, size_t errlen);

/* kcfg_free releases c (NULL is fine). A running exec plugin is killed; its
 * refresh callbacks are still called once each, with VMG_ECANCELED, when the
 * loop has closed the process's handles, so the loop must keep running. */
void kcfg_free(kcfg *c);

/* kcfg_server is the base URL to prefix request paths with: scheme, host,
 * port and any path prefix of the cluster's server, without a trailing '/',
 * e.g. "https://10.0.0.1:6443". With tls-server-name set, its host is the
 * tls-server-name (see kcfg_apply for why). */
const char *kcfg_server(const kcfg *c);

/* kcfg_namespace is the context's namespace, or the service account's in a
 * cluster; "default" when unset. */
const char *kcfg_namespace(const kcfg *c);

/* kcfg_context is the context's name; "" for the in-cluster config. */
const char *kcfg_context(const kcfg *c);

/* kcfg_source says where the configuration came from, for logs: the
 * kubeconfig path(s), ':'-joined, or "in-cluster". */
const char *kcfg_source(const kcfg *c);

/* kcfg_in_cluster is 1 for the service account configuration, else 0. */
int kcfg_in_cluster(const kcfg *c);

/* kcfg_apply sets TLS and authentication on a fresh (or curl_easy_reset)
 * easy handle, for one request to kcfg_server(c):
 *   - CURLOPT_SSL_VERIFYPEER 1 and VERIFYHOST 2, or 0 and 0 only with
 *     insecure-skip-tls-verify;
 *   - CURLOPT_CAINFO_BLOB with the cluster's CA (PEM, copied by curl), when
 *     it has one; else curl's default trust store is used;
 *   - CURLOPT_SSLCERT_BLOB / CURLOPT_SSLKEY_BLOB (type PEM) with the client
 *     certificate and key: an exec plugin's when it gave one, else the user's;
 *   - tls-server-name: libcurl 7.88 has no option to set the SNI name, so
 *     kcfg_server() names the tls-server-name as host and kcfg_apply sets
 *     CURLOPT_CONNECT_TO "<tls-server-name>:<port>:<server host>:<port>":
 *     curl connects to the server's address but sends the tls-server-name
 *     as SNI and verifies the certificate against it. The Host header is
 *     then the tls-server-name too (the API server does not look at it).
 *     That list belongs to c, so c must outlive the transfer.
 *   - when a bearer token applies (exec plugin's, else token, else the
 *     tokenFile's or the in-cluster token file's), exactly one header
 *     "Authorization: Bearer <token>" is appended to *headers, which is not
 *     given to curl: the caller adds its own headers, sets
 *     CURLOPT_HTTPHEADER and frees the list after the transfer. Token files
 *     are stat()ed on each call and re-read when they changed (mtime, ctime,
 *     size or inode), so a rotated token is used by the next request; if the
 *     re-read fails, the previous token is kept.
 * Returns 0; -EAGAIN when an exec plugin is configured but has not given a
 * credential yet (call kcfg_exec_refresh first); -ENOMEM or -EINVAL when curl
 * refuses an option. *headers is changed only on success. */
int kcfg_apply(kcfg *c, CURL *easy, struct curl_slist **headers);

/* kcfg_has_exec is 1 when the user authenticates with an exec plugin. */
int kcfg_has_exec(const kcfg *c);

/* kcfg_needs_refresh is 1 when the exec plugin must be run before the next
 * request: no credential yet, the credential expires within 10 seconds of
 * now (wall-clock), or kcfg_invalidate() was called since it was fetched.
 * Always 0 without an exec plugin. */
int kcfg_needs_refresh(const kcfg *c, time_t now);

/* kcfg_credential_gen counts the credentials c has held: it moves when an
 * exec plugin gives one or a token file is read with a new token. c is
 * shared by clients: a 401 for a request sent under an older count is for
 * a credential already replaced, which kcfg_invalidate must not throw
 * away. */
unsigned long kcfg_credential_gen(const kcfg *c);

/* kcfg_invalidate tells c that the server refused its credential (HTTP 401):
 * the exec credential is marked for refresh and token files are re-read on
 * the next kcfg_apply. */
void kcfg_invalidate(kcfg *c);

/* kcfg_exec_refresh runs the exec plugin on loop with uv_spawn (args and env
 * from the kubeconfig added to the process's environment, and
 * KUBERNETES_EXEC_INFO holding the ExecCredential request), reads its
 * stdout (at most 1 MiB) and stderr, kills it (with its process group) after
 * the exec timeout, and parses the ExecCredential it printed. The loop is
 * never blocked. When the plugin is already running, the call joins it.
 * done(data, err, msg) is then called exactly once, from the loop: err 0 and
 * msg NULL when c holds the new credential; else a negative code
 * (-ENOENT and other spawn errors, -ETIMEDOUT, VMG_ETOOBIG, VMG_EAUTH for a
 * non-zero exit or a signal, VMG_EPARSE for bad output, VMG_ECANCELED when
 * kcfg_free came first) and a message naming the command and what happened
 * (exit status and the first line of stderr, bounded), valid during the
 * call. On failure the previous credential, if any, is kept.
 * Returns 0, or -EINVAL (no exec plugin, NULL arguments), -ENOMEM or
 * VMG_ECANCELED (after kcfg_exec_stop), in which case done is never
 * called. */
int kcfg_exec_refresh(kcfg *c, uv_loop_t *loop, void (*done)(void *data, int err, const char *msg),
                      void *data);

/* kcfg_exec_stop kills a running exec plugin as kcfg_free does (its
 * refresh callbacks are called with VMG_ECANCELED once the loop has
 * closed its handles) and makes kcfg_exec_refresh answer VMG_ECANCELED
 * from then on: a program that closes every handle left on its loop
 * before kcfg_free calls it first, while the loop still runs. */
void kcfg_exec_stop(kcfg *c);

#ifdef VMG_TESTING
/* What kcfg_apply would set, for unit tests. Pointers belong to c. */
struct kcfg_testing_view {
    const char *ca;
    size_t ca_len;
    const char *cert; /* the one kcfg_apply would use (exec's or user's) */
    size_t cert_len;
    const char *key;
    size_t key_len;
    int insecure;
    const char *tls_server_name;
    const char *connect_to; /* the CURLOPT_CONNECT_TO entry, or NULL */
    time_t expiry;          /* exec credential's expiry; 0: none */
};
void kcfg_testing_view(const kcfg *c, struct kcfg_testing_view *ret);

/* The RFC 3339 parser used for expirationTimestamp. */
int kcfg_testing_parse_time(const char *s, time_t *ret);

/* What an exec plugin printed, parsed as kcfg_exec_refresh does: the
 * ExecCredential in out[0..len) of the given apiVersion. Returns 0 and the
 * credential in *ret (free it with kcfg_testing_cred_clear), or the error
 * the refresh would report, with its message in msg. */
struct kcfg_testing_cred {
    char *token;
    char *cert;
    size_t cert_len;
    char *key;
    size_t key_len;
    time_t expiry;
};
int kcfg_testing_parse_cred(const char *out, size_t len, const char *api_version,
                            struct kcfg_testing_cred *ret, char *msg, size_t msglen);
void kcfg_testing_cred_clear(struct kcfg_testing_cred *cr);
#endif

#endif
