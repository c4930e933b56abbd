/* options.c: the manager's flags, described once in a table that drives
 * both parsing and --help. */
#include "lib/options.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "lib/err.h"

enum kind { K_STR, K_BOOL, K_INT, K_DOUBLE, K_DURATION, K_HELP, K_VERSION };

struct flag {
    const char *name;  /* without dashes */
    const char *alias; /* an older spelling, or NULL */
    enum kind kind;
    size_t off;
    long min, max; /* for K_INT */
    const char *help;
};

#define OFF(f) offsetof(struct vmg_options, f)

static const struct flag flags[] = {
    {"kubeconfig", NULL, K_STR, OFF(kubeconfig), 0, 0,
     "Path to a kubeconfig. Default: $KUBECONFIG, ~/.kube/config, then in-cluster."},
    {"context", NULL, K_STR, OFF(kube_context), 0, 0, "kubeconfig context to use."},
    {"watch-namespace", "namespace", K_STR, OFF(watch_namespace), 0, 0,
     "Manage only the VmGroups of this namespace (to shard); default: all namespaces."},
    {"kube-api-qps", NULL, K_DOUBLE, OFF(kube_qps), 0, 0,
     "Requests per second to the API server (client-side limit); Events have a limit of "
     "their own, as large."},
    {"kube-api-burst", NULL, K_INT, OFF(kube_burst), 1, 100000,
     "Burst of requests to the API server (and, apart, of Events)."},
    {"sync-period", NULL, K_DURATION, OFF(resync_ms), 0, 0,
     "How often every VmGroup is reconciled even without a change."},
    {"max-concurrent-reconciles", NULL, K_INT, OFF(max_concurrent_reconciles), 1, 1024,
     "VmGroups reconciled at once."},
    {"metrics-bind-address", "metrics-addr", K_STR, OFF(metrics_addr), 0, 0,
     "Address of the /metrics endpoint, e.g. :8443 or 127.0.0.1:8080; 0 disables it."},
    {"metrics-secure", NULL, K_BOOL, OFF(metrics_secure), 0, 0,
     "Serve metrics over HTTPS with Kubernetes authentication and authorization."},
    {"metrics-cert-dir", NULL, K_STR, OFF(metrics_cert_dir), 0, 0,
     "Folder with tls.crt and tls.key for metrics; default: a self-signed certificate."},
    {"health-probe-bind-address", NULL, K_STR, OFF(probe_addr), 0, 0,
     "Address of /healthz and /readyz; 0 disables them."},
    {"leader-elect", "enable-leader-election", K_BOOL, OFF(leader_elect), 0, 0,
     "Elect a leader with a Lease so that only one manager acts."},
    {"leader-election-namespace", NULL, K_STR, OFF(leader_election_namespace), 0, 0,
     "Namespace of the Lease; default: the namespace the manager runs in."},
    {"leader-election-id", NULL, K_STR, OFF(leader_election_id), 0, 0, "Name of the Lease."},
    {"leader-election-lease-duration", NULL, K_DURATION, OFF(lease_duration_ms), 0, 0,
     "How long a lease is valid without renewal."},
    {"leader-election-renew-deadline", NULL, K_DURATION, OFF(renew_deadline_ms), 0, 0,
     "How long the leader keeps trying to renew before it gives up."},
    {"leader-election-retry-period", NULL, K_DURATION, OFF(retry_period_ms), 0, 0,
     "How often candidates try to acquire or renew the lease."},
    {"insecure", NULL, K_BOOL, OFF(insecure), 0, 0,
     "Skip verification of vCenter's TLS certificate (not for production)."},
    {"vc-ca-file", NULL, K_STR, OFF(vc_ca_file), 0, 0,
     "CA bundle that vCenter's certificate must chain to; default: system roots."},
    {"vc-thumbprint", NULL, K_STR, OFF(vc_thumbprint), 0, 0,
     "Pin vCenter's certificate by its SHA-256 fingerprint instead of a CA."},
    {"datacenter", NULL, K_STR, OFF(datacenter), 0, 0,
     "Datacenter (name or path); default: the only one."},
    {"root-folder", NULL, K_STR, OFF(root_folder), 0, 0,
     "VM folder under which each VmGroup gets a folder of its own."},
    {"resource-pool", NULL, K_STR, OFF(resource_pool), 0, 0,
     "Resource pool for new VMs (name or path); default: the only one."},
    {"datastore", NULL, K_STR, OFF(datastore), 0, 0,
     "Datastore for new VMs; default: the template's."},
    {"vc-request-timeout", NULL, K_DURATION, OFF(vc_request_timeout_ms), 0, 0,
     "How long a vCenter request may take; a long poll gets this beyond its own wait, "
     "and this again (5 times at most) while vCenter answers a CurrentTime asked then."},
    {"vc-grace-period", NULL, K_DURATION, OFF(vc_grace_ms), 0, 0,
     "How long vCenter may be out of use (a session lost, vCenter out of reach, the "
     "watch rebuilt, the manager starting) before the VmGroups' status says so; 0: at once."},
    {"max-vcenter-tasks", NULL, K_INT, OFF(max_vcenter_tasks), 1, 1024,
     "vCenter tasks in flight at once; the rest wait."},
    {"max-group-tasks", NULL, K_INT, OFF(max_group_tasks), 1, 1024,
     "vCenter tasks in flight at once for one VmGroup."},
    {"max-instance-marks", NULL, K_INT, OFF(max_instance_marks), 0, 64,
     "Instance marks written at once, in all VmGroups, to VMs cloned before that mark "
     "existed; 0: none are written."},
    {"tagging", NULL, K_BOOL, OFF(tagging), 0, 0,
     "Tag every VM with its VmGroup through the vSphere Automation API."},
    {"v", NULL, K_INT, OFF(verbosity), 0, 10, "Log verbosity: 0 info, 1-10 more detail."},
    {"help", "h", K_HELP, 0, 0, 0, "Print this help and exit."},
    {"version", NULL, K_VERSION, 0, 0, 0, "Print the version and exit."},
};

void vmg_options_defaults(struct vmg_options *o)
{
    memset(o, 0, sizeof(*o));
    o->kube_qps = 20;
    o->kube_burst = 30;
    o->resync_ms = 10 * 60 * 1000;
    o->max_concurrent_reconciles = 4;
    o->metrics_addr = ":8443";
    o->metrics_secure = 1;
    o->probe_addr = ":8081";
    o->leader_election_id = "vmgroup-operator-leader";
    o->lease_duration_ms = 15000;
    o->renew_deadline_ms = 10000;
    o->retry_period_ms = 2000;
    o->root_folder = "vm-operator";
    o->max_vcenter_tasks = 8;
    o->vc_request_timeout_ms = 2 * 60 * 1000;
    o->vc_grace_ms = 30 * 1000;
    o->max_group_tasks = 4;
    o->max_instance_marks = 2;
    o->tagging = 1;
}

int vmg_parse_duration(const char *s, uint64_t *ret_ms)
{
    double total = 0;
    const char *p = s;

    if (!s || !*s)
        return -EINVAL;
    if (strcmp(s, "0") == 0) {
        *ret_ms = 0;
        return 0;
    }
    while (*p) {
        char *end;
        double v, unit;

        errno = 0;
        v = strtod(p, &end);
        if (end == p || errno || v < 0 || !isfinite(v))
            return -EINVAL;
        p = end;
        if (strncmp(p, "ms", 2) == 0) {
            unit = 1;
            p += 2;
        } else if (*p == 's') {
            unit = 1000;
            p++;
        } else if (*p == 'm') {
            unit = 60000;
            p++;
        } else if (*p == 'h') {
            unit = 3600000;
            p++;
        } else {
            return -EINVAL;
        }
        total += v * unit;
        if (total > 1e12)
            return -ERANGE;
    }
    *ret_ms = (uint64_t)llround(total);
    return 0;
}

static int parse_bool(const char *v, int *out)
{
    if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "t") || !strcmp(v, "True")) {
        *out = 1;
        return 0;
    }
    if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "f") || !strcmp(v, "False")) {
        *out = 0;
        return 0;
    }
    return -EINVAL;
}

static const struct flag *find_flag(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        const struct flag *f = &flags[i];
        if (strlen(f->name) == len && strncmp(f->name, name, len) == 0)
            return f;
        if (f->alias && strlen(f->alias) == len && strncmp(f->alias, name, len) == 0)
            return f;
    }
    return NULL;
}

static int set_value(struct vmg_options *o, const struct flag *f, const char *v, char *err,
                     size_t errlen)
{
    char *base = (char *)o;
    char *end;
    long n;
    double d;
    uint64_t ms;
    int b;

    switch (f->kind) {
    case K_STR:
        memcpy(base + f->off, &v, sizeof(v));
        return 0;
    case K_BOOL:
        if (parse_bool(v, &b) == 0) {
            memcpy(base + f->off, &b, sizeof(b));
            return 0;
        }
        snprintf(err, errlen, "invalid value \"%s\" for flag --%s: want true or false", v, f->name);
        return VMG_ECONFIG;
    case K_INT:
        errno = 0;
        n = strtol(v, &end, 10);
        if (errno || end == v || *end || n < f->min || n > f->max) {
            snprintf(err, errlen,
                     "invalid value \"%s\" for flag --%s: want an integer from %ld to %ld", v,
                     f->name, f->min, f->max);
            return VMG_ECONFIG;
        }
        b = (int)n;
        memcpy(base + f->off, &b, sizeof(b));
        return 0;
    case K_DOUBLE:
        errno = 0;
        d = strtod(v, &end);
        if (errno || end == v || *end || !(d > 0) || !isfinite(d)) {
            snprintf(err, errlen, "invalid value \"%s\" for flag --%s: want a positive number", v,
                     f->name);
            return VMG_ECONFIG;
        }
        memcpy(base + f->off, &d, sizeof(d));
        return 0;
    case K_DURATION:
        if (vmg_parse_duration(v, &ms) != 0) {
            snprintf(err, errlen, "invalid value \"%s\" for flag --%s: want a duration such as 15s",
                     v, f->name);
            return VMG_ECONFIG;
        }
        memcpy(base + f->off, &ms, sizeof(ms));
        return 0;
    case K_HELP:
    case K_VERSION:
        break;
    }
    return VMG_ECONFIG;
}

void vmg_options_usage(FILE *out)
{
    fprintf(out, "Usage: vmgroup-operator [flags]\n\n"
                 "Manages groups of vSphere VMs declared as VmGroup resources.\n"
                 "vCenter is given by the environment: VC_HOST (host, host:port or URL),\n"
                 "VC_USER and VC_PASS, or VC_PASS_FILE: a file holding the password,\n"
                 "watched, so that a changed password is logged in with at once.\n\nFlags:\n");
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        const struct flag *f = &flags[i];
        const char *arg = "";
        switch (f->kind) {
        case K_STR:
            arg = " string";
            break;
        case K_INT:
            arg = " int";
            break;
        case K_DOUBLE:
            arg = " float";
            break;
        case K_DURATION:
            arg = " duration";
            break;
        default:
            break;
        }
        fprintf(out, "  --%s%s%s%s\n        %s\n", f->name, arg, f->alias ? ", --" : "",
                f->alias ? f->alias : "", f->help);
    }
}

/* take_env_pass moves VC_PASS out of the process environment into
 * o->vc_pass_buf: the bytes of the variable's value are overwritten where
 * they are (for a variable the process was started with, that is the block
 * /proc/PID/environ shows) and the variable is removed, so that neither
 * that file nor a child process sees the password. */
/* wipe_env_pass overwrites the value of every VC_PASS entry of environ:
 * an environment may hold the name more than once (execve does not
 * refuse it), getenv sees only the first, and unsetenv drops the entries
 * but not the bytes of the ones the process was started with. */
static void wipe_env_pass(void)
{
    extern char **environ;

    for (char **p = environ; p && *p; p++)
        if (strncmp(*p, "VC_PASS=", 8) == 0)
            OPENSSL_cleanse(*p + 8, strlen(*p + 8));
}

static int take_env_pass(struct vmg_options *o, char *err, size_t errlen)
{
    char *v = getenv("VC_PASS");
    size_t n;

    o->vc_pass = NULL;
    if (!v)
        return 0;
    n = strlen(v);
    if (n >= sizeof(o->vc_pass_buf)) {
        wipe_env_pass();
        unsetenv("VC_PASS");
        snprintf(err, errlen, "VC_PASS is longer than %d bytes", VMG_SECRET_FILE_MAX);
        return VMG_ECONFIG;
    }
    memcpy(o->vc_pass_buf, v, n + 1);
    wipe_env_pass();
    if (unsetenv("VC_PASS") != 0) {
        OPENSSL_cleanse(o->vc_pass_buf, sizeof(o->vc_pass_buf));
        snprintf(err, errlen, "cannot remove VC_PASS from the environment");
        return VMG_ECONFIG;
    }
    o->vc_pass = o->vc_pass_buf;
    return 0;
}

int vmg_options_parse(struct vmg_options *o, int argc, char **argv,
                      const char *(*getenv_fn)(const char *name), char *err, size_t errlen)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *name, *eq, *val = NULL;
        const struct flag *f;
        size_t len;
        int r;

        if (a[0] != '-' || a[1] == '\0') {
            snprintf(err, errlen, "unexpected argument \"%s\" (flags start with --)", a);
            return VMG_ECONFIG;
        }
        name = a + (a[1] == '-' ? 2 : 1);
        eq = strchr(name, '=');
        len = eq ? (size_t)(eq - name) : strlen(name);
        f = find_flag(name, len);
        if (!f) {
            snprintf(err, errlen, "unknown flag: %.*s (see --help)", (int)(len + (name - a)), a);
            return VMG_ECONFIG;
        }
        if (f->kind == K_HELP) {
            vmg_options_usage(stdout);
            return 1;
        }
        if (f->kind == K_VERSION) {
            printf("vmgroup-operator %s\n", VMG_VERSION);
            return 1;
        }
        if (eq) {
            val = eq + 1;
        } else if (f->kind == K_BOOL) {
            val = "true";
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            snprintf(err, errlen, "flag needs an argument: --%s", f->name);
            return VMG_ECONFIG;
        }
        r = set_value(o, f, val, err, errlen);
        if (r)
            return r;
    }

    if (!getenv_fn) {
        int r = take_env_pass(o, err, errlen);
        if (r < 0)
            return r;
        getenv_fn = (const char *(*)(const char *))getenv;
    } else {
        o->vc_pass = getenv_fn("VC_PASS");
    }
    o->vc_host = getenv_fn("VC_HOST");
    o->vc_user = getenv_fn("VC_USER");
    o->vc_pass_file = getenv_fn("VC_PASS_FILE");
    if (o->vc_pass_file && !*o->vc_pass_file)
        o->vc_pass_file = NULL;
    if (o->vc_pass_file) {
        if (o->vc_pass && *o->vc_pass) {
            snprintf(err, errlen, "VC_PASS and VC_PASS_FILE are both set: set one");
            return VMG_ECONFIG;
        }
        int n = vmg_secret_file_read(o->vc_pass_file, o->vc_pass_buf, sizeof(o->vc_pass_buf), err,
                                     errlen);
        if (n < 0)
            return n;
        o->vc_pass = o->vc_pass_buf;
    }
    return 0;
}

int vmg_options_check(const struct vmg_options *o, char *err, size_t errlen)
{
    static const char *const names[] = {"VC_HOST", "VC_USER", "VC_PASS"};
    const char *vals[] = {o->vc_host, o->vc_user, o->vc_pass};

    for (int i = 0; i < 3; i++) {
        if (!vals[i] || !*vals[i]) {
            snprintf(err, errlen,
                     "%s is not set: the manager needs VC_HOST, VC_USER and VC_PASS or "
                     "VC_PASS_FILE (in a cluster, from the secret vc-creds)",
                     names[i]);
            return VMG_ECONFIG;
        }
    }
    if (o->leader_elect && !(o->lease_duration_ms > o->renew_deadline_ms &&
                             o->renew_deadline_ms > o->retry_period_ms && o->retry_period_ms > 0)) {
        snprintf(err, errlen,
                 "leader election needs lease duration > renew deadline > retry period > 0 "
                 "(have %llums, %llums, %llums)",
                 (unsigned long long)o->lease_duration_ms, (unsigned long long)o->renew_deadline_ms,
                 (unsigned long long)o->retry_period_ms);
        return VMG_ECONFIG;
    }
    if (o->vc_request_timeout_ms < 1000) {
        snprintf(err, errlen, "--vc-request-timeout must be at least 1s");
        return VMG_ECONFIG;
    }
    if (o->insecure && (o->vc_ca_file || o->vc_thumbprint)) {
        snprintf(err, errlen, "--insecure cannot be combined with --vc-ca-file or --vc-thumbprint");
        return VMG_ECONFIG;
    }
    return 0;
}
