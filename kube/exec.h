/* exec.h: client-go exec credential plugins, run on the loop. A run spawns
 * the plugin (in its own process group, with a filtered environment and
 * KUBERNETES_EXEC_INFO), reads its stdout (bounded) and stderr, kills it
 * after a timeout and parses the ExecCredential it printed: once it has
 * exited and both pipes have closed, or 2 s after its exit when a process
 * it left running still holds them (that process is left alone). kubeconfig.c
 * says what to run and keeps the credential; it reaches this file only
 * through kcfg_exec_refresh.
 *
 * The plugin's environment is not ours: only the variables a plugin needs
 * (PATH, HOME, locale, proxies, the common cloud plugins' AWS_*, AZURE_*,
 * CLOUDSDK_*, ...) pass, then the kubeconfig's env entries, then
 * KUBERNETES_EXEC_INFO. Every byte the plugin writes is hostile: its output
 * is bounded, and a token or key never appears in a message. */
#ifndef VMG_KUBE_EXEC_H
#define VMG_KUBE_EXEC_H

#include <stddef.h>
#include <time.h>

#include <uv.h>

/* A credential an exec plugin gave. Every pointer is owned (NULL when
 * absent); kexec_cred_clear wipes and frees them and zeroes the struct. */
struct kexec_cred {
    char *token;
    char *cert;
    size_t cert_len;
    char *key;
    size_t key_len;
    time_t expiry; /* 0: none */
};
void kexec_cred_clear(struct kexec_cred *cr);

/* What to run. Everything is borrowed for the duration of kexec_start. */
struct kexec_spec {
    const char *command;
    char *const *args; /* nargs arguments after the command */
    size_t nargs;
    char *const *env; /* "NAME=VALUE" from the kubeconfig */
    size_t nenv;
    const char *api_version;  /* the ExecCredential's apiVersion to expect */
    const char *install_hint; /* added to "not found"; may be NULL */
    const char *info;         /* KUBERNETES_EXEC_INFO's value (JSON) */
    unsigned timeout_ms;
};

typedef struct kexec kexec;

/* A waiter: called once, from the loop, when the run is over: err 0 and msg
 * NULL when the credential was handed to the owner; else a negative code
 * (-ENOENT and other spawn errors, -ETIMEDOUT, VMG_ETOOBIG, VMG_EAUTH for a
 * non-zero exit or a signal, VMG_EPARSE for bad output, VMG_ECANCELED after
 * kexec_cancel) and a message naming the command and what happened (exit
 * status and the first line of stderr, bounded), valid during the call. */
typedef void kexec_done_fn(void *data, int err, const char *msg);

/* The owner's callback: called once when the run is over and before any
 * waiter, unless the run was canceled. With err 0, cred holds the new
 * credential; the callback takes what it keeps (and zeroes those fields);
 * what it leaves is wiped. The run is gone when the waiters are called. */
typedef void kexec_result_fn(void *owner, int err, struct kexec_cred *cred);

/* kexec_start spawns spec's plugin on loop. done(data, ...) is the first
 * waiter. Returns 0 and the run in *ret (until result is called), or
 * -ENOMEM, in which case neither callback is ever called. A failed spawn is
 * not a failed call: it is reported to the waiters. */
int kexec_start(uv_loop_t *loop, const struct kexec_spec *spec, kexec_result_fn *result,
                void *owner, kexec_done_fn *done, void *data, kexec **ret);

/* kexec_join adds a waiter to a run that has not ended. Returns 0, or
 * -ENOMEM (done is then never called). */
int kexec_join(kexec *run, kexec_done_fn *done, void *data);

/* kexec_cancel kills the plugin (with its process group) and closes the
 * run: result is not called; the waiters are, with VMG_ECANCELED, when the
 * loop has closed the process's handles, so the loop must keep running. */
void kexec_cancel(kexec *run);

/* kexec_parse_cred parses what a plugin printed, out[0..len): an
 * ExecCredential of api_version holding a printable token or a matching PEM
 * client certificate and key, and maybe an RFC 3339 expiry. Returns 0 and
 * the credential in *ret, or VMG_EPARSE or -ENOMEM with a message naming
 * command (never the token or key) in msg. *ret is zeroed on failure. */
int kexec_parse_cred(const char *out, size_t len, const char *command, const char *api_version,
                     struct kexec_cred *ret, char *msg, size_t msglen);

#endif
