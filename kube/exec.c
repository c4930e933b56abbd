/* exec.c: client-go exec credential plugins: the process run on the loop
 * (spawn, pipes, timeout, kill, the environment it is given) and the
 * ExecCredential it prints. See exec.h. */
#include "kube/exec.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>

#include "kube/cred.h"
#include "lib/buf.h"
#include "lib/err.h"
#include "lib/jsonwipe.h"
#include "lib/str.h"

extern char **environ;

#define MAX_EXEC_OUT (1u << 20) /* an exec plugin's stdout */
#define MAX_EXEC_ERR 4096       /* what is kept of its stderr */
#define EXEC_ERR_LINE 200       /* what of that a message shows */
/* After SIGKILL, or the plugin's exit, before giving up on the pipes. */
#define EXEC_GRACE_MS 2000

struct exec_waiter {
    struct exec_waiter *next;
    kexec_done_fn *done;
    void *data;
};

struct kexec {
    kexec_result_fn *result; /* NULL once kexec_cancel canceled the run */
    void *owner;
    uv_process_t proc;
    uv_pipe_t out;
    uv_pipe_t err;
    uv_timer_t timer;
    int open; /* handles not yet closed */
    char *command;
    char *api_version;
    char *install_hint;
    unsigned timeout_ms;
    struct vmg_buf out_buf; /* stdout, at most MAX_EXEC_OUT bytes */
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

__attribute__((format(printf, 4, 5))) static int fail(char *msg, size_t msglen, int code,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmg_vputf(msg, msglen, fmt, ap);
    va_end(ap);
    return code;
}

void kexec_cred_clear(struct kexec_cred *cr)
{
    kcred_free_str(cr->token);
    vmg_wipe_free(cr->cert, cr->cert_len);
    vmg_wipe_free(cr->key, cr->key_len);
    memset(cr, 0, sizeof(*cr));
}

static void exec_start_close(struct kexec *run);

static void exec_on_timer(uv_timer_t *t);

static void exec_kill(struct kexec *run)
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

static void exec_maybe_finish(struct kexec *run)
{
    if (run->exited && run->out_eof && run->err_eof)
        exec_start_close(run);
}

static void exec_on_timer(uv_timer_t *t)
{
    struct kexec *run = t->data;
    if (!run->killed && !run->exited) {
        run->timed_out = 1;
        exec_kill(run);
        return;
    }
    /* Killed, or exited, and the pipes still not closed: a process the
     * plugin left running holds them. What the plugin wrote is read. */
    exec_start_close(run);
}

static void exec_on_exit(uv_process_t *p, int64_t status, int sig)
{
    struct kexec *run = p->data;
    run->exited = 1;
    run->exit_status = status;
    run->term_signal = sig;
    exec_maybe_finish(run);
    /* A process the plugin started in the background (an agent, a cache)
     * may keep its stdout or stderr open for as long as it runs: the
     * plugin's output is in the pipes by now, so the run ends
     * EXEC_GRACE_MS after the exit, with what was read, not at the
     * timeout as a failure. That process is the plugin's and is left
     * alone. */
    if (!run->closing && !run->killed)
        uv_timer_start(&run->timer, exec_on_timer, EXEC_GRACE_MS, 0);
}

static void exec_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct kexec *run = h->data;
    (void)suggested;
    *buf = uv_buf_init(run->scratch, sizeof(run->scratch));
}

static void exec_read_out(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct kexec *run = s->data;
    if (n > 0) {
        int r = vmg_buf_append(&run->out_buf, buf->base, (size_t)n);
        if (r < 0) {
            if (r == VMG_ETOOBIG)
                run->too_big = 1;
            else
                run->read_err = r;
            run->out_eof = 1;
            uv_read_stop(s);
            exec_kill(run);
            exec_maybe_finish(run);
        }
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
    struct kexec *run = s->data;
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
static void first_line(const struct kexec *run, char *out, size_t outlen)
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

int kexec_parse_cred(const char *out, size_t len, const char *command, const char *api_version,
                     struct kexec_cred *cr, char *msg, size_t msglen)
{
    cJSON *j = json_parse_secret(out ? out : "", len);
    const cJSON *st, *v, *tok = NULL, *crt = NULL, *key = NULL, *exp;
    int r = 0, pr;

    memset(cr, 0, sizeof(*cr));
    if (!j || !cJSON_IsObject(j)) {
        r = fail(msg, msglen, VMG_EPARSE, "exec plugin \"%s\": output is not a JSON object",
                 command);
        goto out;
    }
    v = cJSON_GetObjectItemCaseSensitive(j, "kind");
    if (!cJSON_IsString(v) || strcmp(v->valuestring, "ExecCredential") != 0) {
        r = fail(msg, msglen, VMG_EPARSE, "exec plugin \"%s\": output is not an ExecCredential",
                 command);
        goto out;
    }
    v = cJSON_GetObjectItemCaseSensitive(j, "apiVersion");
    if (!cJSON_IsString(v) || strcmp(v->valuestring, api_version) != 0) {
        r = fail(msg, msglen, VMG_EPARSE,
                 "exec plugin \"%s\": output's apiVersion is not \"%s\", which the kubeconfig "
                 "asked for",
                 command, api_version);
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
                 command);
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
                 command);
        goto out;
    }
    if (!crt != !key) {
        r = fail(msg, msglen, VMG_EPARSE, "exec plugin \"%s\": output has %s without %s", command,
                 crt ? "clientCertificateData" : "clientKeyData",
                 crt ? "clientKeyData" : "clientCertificateData");
        goto out;
    }
    if (tok && !kcred_token_ok(tok->valuestring, strlen(tok->valuestring))) {
        r = fail(msg, msglen, VMG_EPARSE,
                 "exec plugin \"%s\": output's token holds control "
                 "characters",
                 command);
        goto out;
    }
    if (crt) {
        pr = kcred_check_pair(crt->valuestring, strlen(crt->valuestring), key->valuestring,
                              strlen(key->valuestring));
        if (pr < 0) {
            r = fail(msg, msglen, pr, "exec plugin \"%s\": out of memory", command);
            goto out;
        }
        if (pr != KCRED_PAIR_OK) {
            r = fail(msg, msglen, VMG_EPARSE,
                     "exec plugin \"%s\": output's client certificate and key are not a "
                     "matching PEM pair",
                     command);
            goto out;
        }
    }
    if (cJSON_IsString(exp) && exp->valuestring[0] &&
        kcred_parse_time(exp->valuestring, &cr->expiry) < 0) {
        r = fail(msg, msglen, VMG_EPARSE,
                 "exec plugin \"%s\": output's status.expirationTimestamp is not RFC 3339",
                 command);
        goto out;
    }
    if (tok && !(cr->token = strdup(tok->valuestring)))
        r = -ENOMEM;
    if (crt && r == 0) {
        cr->cert_len = strlen(crt->valuestring);
        cr->key_len = strlen(key->valuestring);
        cr->cert = kcred_dup(crt->valuestring, cr->cert_len);
        cr->key = kcred_dup(key->valuestring, cr->key_len);
        if (!cr->cert || !cr->key)
            r = -ENOMEM;
    }
    if (r < 0) {
        fail(msg, msglen, r, "exec plugin \"%s\": out of memory", command);
        kexec_cred_clear(cr);
    }
out:
    /* The whole tree, wiped: the credential's copies in it are there also
     * when the output was refused before they were looked at (a kind or
     * apiVersion not the one asked for), and a string may go on after a
     * NUL ("\u0000"). */
    json_wipe(j);
    cJSON_Delete(j);
    return r;
}

static void run_free(struct kexec *run)
{
    free(run->command);
    free(run->api_version);
    free(run->install_hint);
    free(run);
}

static void exec_complete(struct kexec *run)
{
    char msg[1024], line[EXEC_ERR_LINE + 1];
    struct kexec_cred cr = {0};
    struct exec_waiter *w, *next;
    int err = 0;

    msg[0] = '\0';
    first_line(run, line, sizeof(line));
    if (!run->result) {
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
        err = kexec_parse_cred(vmg_buf_str(&run->out_buf), vmg_buf_len(&run->out_buf), run->command,
                               run->api_version, &cr, msg, sizeof(msg));
    }
    if (run->result)
        run->result(run->owner, err, &cr);
    kexec_cred_clear(&cr);
    w = run->waiters;
    vmg_buf_free(&run->out_buf);
    OPENSSL_cleanse(run->scratch, sizeof(run->scratch));
    run_free(run);
    for (; w; w = next) {
        next = w->next;
        w->done(w->data, err, err ? msg : NULL);
        free(w);
    }
}

static void exec_on_close(uv_handle_t *h)
{
    struct kexec *run = h->data;
    if (--run->open == 0)
        exec_complete(run);
}

static void exec_start_close(struct kexec *run)
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
static char **exec_env(const struct kexec_spec *spec, const char *info)
{
    size_t n = 0, k = 0;
    char **env;
    for (char **p = environ; p && *p; p++)
        n++;
    env = calloc(n + spec->nenv + 2, sizeof(*env));
    if (!env)
        return NULL;
    for (char **p = environ; p && *p; p++) {
        int skip = !exec_env_kept(*p) || env_name_eq(*p, info);
        for (size_t i = 0; i < spec->nenv && !skip; i++)
            skip = env_name_eq(*p, spec->env[i]);
        if (!skip)
            env[k++] = *p;
    }
    for (size_t i = 0; i < spec->nenv; i++)
        env[k++] = spec->env[i];
    env[k++] = (char *)info;
    env[k] = NULL;
    return env;
}

static struct exec_waiter *waiter_new(kexec_done_fn *done, void *data)
{
    struct exec_waiter *w = calloc(1, sizeof(*w));
    if (w) {
        w->done = done;
        w->data = data;
    }
    return w;
}

int kexec_join(kexec *run, kexec_done_fn *done, void *data)
{
    struct exec_waiter *w = waiter_new(done, data);
    if (!w)
        return -ENOMEM;
    w->next = run->waiters;
    run->waiters = w;
    return 0;
}

int kexec_start(uv_loop_t *loop, const struct kexec_spec *spec, kexec_result_fn *result,
                void *owner, kexec_done_fn *done, void *data, kexec **ret)
{
    struct exec_waiter *w;
    struct kexec *run = NULL;
    char *info = NULL, **argv = NULL, **envp = NULL;
    uv_process_options_t po;
    uv_stdio_container_t stdio[3];
    size_t n;
    int r;

    w = waiter_new(done, data);
    if (!w)
        return -ENOMEM;
    run = calloc(1, sizeof(*run));
    argv = calloc(spec->nargs + 2, sizeof(*argv));
    if (!run || !argv) {
        r = -ENOMEM;
        goto fail;
    }
    n = strlen(spec->info) + sizeof("KUBERNETES_EXEC_INFO=");
    info = malloc(n);
    run->command = strdup(spec->command);
    run->api_version = strdup(spec->api_version);
    if (spec->install_hint)
        run->install_hint = strdup(spec->install_hint);
    if (!info || !run->command || !run->api_version || (spec->install_hint && !run->install_hint)) {
        r = -ENOMEM;
        goto fail;
    }
    snprintf(info, n, "KUBERNETES_EXEC_INFO=%s", spec->info);
    envp = exec_env(spec, info);
    if (!envp) {
        r = -ENOMEM;
        goto fail;
    }
    argv[0] = (char *)spec->command;
    for (size_t i = 0; i < spec->nargs; i++)
        argv[i + 1] = spec->args[i];

    run->result = result;
    run->owner = owner;
    run->waiters = w;
    run->timeout_ms = spec->timeout_ms;
    vmg_buf_init(&run->out_buf, MAX_EXEC_OUT, VMG_BUF_WIPE);
    /* From here on, everything ends in exec_complete(), which calls done. */
    uv_pipe_init(loop, &run->out, 0);
    uv_pipe_init(loop, &run->err, 0);
    uv_timer_init(loop, &run->timer);
    run->out.data = run->err.data = run->timer.data = run->proc.data = run;
    run->open = 4;
    *ret = run;

    memset(&po, 0, sizeof(po));
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[1].data.stream = (uv_stream_t *)&run->out;
    stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[2].data.stream = (uv_stream_t *)&run->err;
    po.exit_cb = exec_on_exit;
    po.file = spec->command;
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
    return 0;
fail:
    free(envp);
    free(argv);
    free(info);
    if (run)
        run_free(run);
    free(w);
    return r;
}

void kexec_cancel(kexec *run)
{
    run->result = NULL;
    exec_kill(run);
    exec_start_close(run);
}
