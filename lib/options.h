/* options.h: the manager's flags and environment, parsed into one struct.
 *
 * Flag names follow controller-runtime where one exists; the original Go
 * operator's spellings (--metrics-addr, --enable-leader-election, -insecure)
 * are accepted too. Values are given as --name=value or --name value; a
 * boolean flag alone means true. Durations take Go's units (ms, s, m, h).
 */
#ifndef VMG_OPTIONS_H
#define VMG_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/secretfile.h"

struct vmg_options {
    /* Kubernetes */
    const char *kubeconfig; /* NULL: KUBECONFIG, ~/.kube/config, in-cluster */
    const char *kube_context;
    const char *watch_namespace; /* NULL: VmGroups of all namespaces */
    double kube_qps;
    int kube_burst;
    uint64_t resync_ms;
    int max_concurrent_reconciles;

    /* serving; "0" disables an address */
    const char *metrics_addr;
    int metrics_secure;
    const char *metrics_cert_dir;
    const char *probe_addr;

    /* leader election */
    int leader_elect;
    const char *leader_election_namespace;
    const char *leader_election_id;
    uint64_t lease_duration_ms;
    uint64_t renew_deadline_ms;
    uint64_t retry_period_ms;

    /* vCenter: VC_HOST, VC_USER and VC_PASS come from the environment; or
     * the password from the file VC_PASS_FILE names (read into vc_pass_buf,
     * and watched by the manager, so that a rotated Secret is taken up). */
    const char *vc_host;
    const char *vc_user;
    const char *vc_pass;
    const char *vc_pass_file;
    char vc_pass_buf[VMG_SECRET_FILE_MAX + 1];
    int insecure;
    const char *vc_ca_file;
    const char *vc_thumbprint;
    const char *datacenter;
    const char *root_folder;
    const char *resource_pool;
    const char *datastore;
    int max_vcenter_tasks;
    uint64_t vc_request_timeout_ms;
    uint64_t vc_grace_ms; /* how long an outage of vCenter keeps the groups' status */
    int max_group_tasks;
    int max_instance_marks; /* 0: none written */
    int tagging;

    int verbosity;
};

/* vmg_options_defaults fills o with the defaults. */
void vmg_options_defaults(struct vmg_options *o);

/* vmg_options_parse parses argv over the defaults already in o, then reads
 * the VC_* variables through getenv_fn (getenv when NULL). Strings in o
 * point into argv or the environment. With getenv_fn NULL, VC_PASS is taken
 * out of the environment: copied into o->vc_pass_buf (wipe it when done),
 * its bytes overwritten in place and the variable removed, so that neither
 * /proc/PID/environ nor a child process shows it; a VC_PASS longer than
 * VMG_SECRET_FILE_MAX is refused. Returns 0 on success, 1 when --help or
 * --version was asked for (and written to stdout), or VMG_ECONFIG with a
 * message naming the flag or value at fault in err. */
int vmg_options_parse(struct vmg_options *o, int argc, char **argv,
                      const char *(*getenv_fn)(const char *name), char *err, size_t errlen);

/* vmg_options_check validates what a running manager needs beyond the
 * syntax: VC_HOST, VC_USER and VC_PASS present, leader-election timing.
 * Returns 0 or VMG_ECONFIG with a message in err. */
int vmg_options_check(const struct vmg_options *o, char *err, size_t errlen);

/* vmg_parse_duration parses "1h2m3.5s", "100ms", "15s" into milliseconds. */
int vmg_parse_duration(const char *s, uint64_t *ret_ms);

/* vmg_options_usage writes the --help text. */
void vmg_options_usage(FILE *out);

#endif
