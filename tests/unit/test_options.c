/* test_options.c: the manager's flags: names, old spellings, values,
 * errors naming the flag, and the checks a running manager needs. */
#include "tests/unit/unit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/err.h"
#include "lib/options.h"

static const char *env_full(const char *name)
{
    if (!strcmp(name, "VC_HOST"))
        return "vc.example.com";
    if (!strcmp(name, "VC_USER"))
        return "admin";
    if (!strcmp(name, "VC_PASS"))
        return "s3cret";
    return NULL;
}

static const char *env_none(const char *name)
{
    (void)name;
    return NULL;
}

static int parse(struct vmg_options *o, char *err, size_t errlen, int argc, char **argv)
{
    vmg_options_defaults(o);
    return vmg_options_parse(o, argc, argv, env_full, err, errlen);
}

static void test_defaults(void **state)
{
    struct vmg_options o;
    char err[256];
    char *argv[] = {"m"};

    (void)state;
    assert_int_equal(parse(&o, err, sizeof(err), 1, argv), 0);
    assert_string_equal(o.metrics_addr, ":8443");
    assert_string_equal(o.probe_addr, ":8081");
    assert_int_equal(o.metrics_secure, 1);
    assert_int_equal(o.leader_elect, 0);
    assert_int_equal(o.insecure, 0);
    assert_int_equal(o.lease_duration_ms, 15000);
    assert_int_equal(o.renew_deadline_ms, 10000);
    assert_int_equal(o.retry_period_ms, 2000);
    assert_int_equal(o.max_vcenter_tasks, 8);
    assert_int_equal(o.max_instance_marks, 2);
    assert_string_equal(o.root_folder, "vm-operator");
    assert_string_equal(o.vc_host, "vc.example.com");
    assert_int_equal(vmg_options_check(&o, err, sizeof(err)), 0);
}

static void test_controller_runtime_names_and_values(void **state)
{
    struct vmg_options o;
    char err[256];
    char *argv[] = {"m",
                    "--kubeconfig=/k",
                    "--metrics-bind-address",
                    "127.0.0.1:9000",
                    "--health-probe-bind-address=0",
                    "--leader-elect",
                    "--leader-election-namespace=ops",
                    "--insecure=false",
                    "--datacenter=DC1",
                    "--root-folder",
                    "/DC1/vm/groups",
                    "--resource-pool=pool1",
                    "--leader-election-lease-duration=1m",
                    "--leader-election-renew-deadline=30s",
                    "--leader-election-retry-period=1500ms",
                    "--max-instance-marks=0",
                    "-v=3"};

    (void)state;
    assert_int_equal(parse(&o, err, sizeof(err), (int)(sizeof(argv) / sizeof(argv[0])), argv), 0);
    assert_string_equal(o.kubeconfig, "/k");
    assert_string_equal(o.metrics_addr, "127.0.0.1:9000");
    assert_string_equal(o.probe_addr, "0");
    assert_int_equal(o.leader_elect, 1);
    assert_string_equal(o.leader_election_namespace, "ops");
    assert_int_equal(o.insecure, 0);
    assert_string_equal(o.datacenter, "DC1");
    assert_string_equal(o.root_folder, "/DC1/vm/groups");
    assert_string_equal(o.resource_pool, "pool1");
    assert_int_equal(o.lease_duration_ms, 60000);
    assert_int_equal(o.renew_deadline_ms, 30000);
    assert_int_equal(o.retry_period_ms, 1500);
    assert_int_equal(o.max_instance_marks, 0);
    assert_int_equal(o.verbosity, 3);
}

static void test_original_spellings(void **state)
{
    struct vmg_options o;
    char err[256];
    char *argv[] = {"m", "--metrics-addr=127.0.0.1:8080", "--enable-leader-election", "-insecure"};

    (void)state;
    assert_int_equal(parse(&o, err, sizeof(err), 4, argv), 0);
    assert_string_equal(o.metrics_addr, "127.0.0.1:8080");
    assert_int_equal(o.leader_elect, 1);
    assert_int_equal(o.insecure, 1);
}

static void expect_error(char **argv, int argc, const char *needle)
{
    struct vmg_options o;
    char err[256] = "";

    assert_int_equal(parse(&o, err, sizeof(err), argc, argv), VMG_ECONFIG);
    if (!strstr(err, needle))
        fail_msg("error \"%s\" does not name \"%s\"", err, needle);
}

static void test_errors_name_the_flag(void **state)
{
    char *a1[] = {"m", "--no-such-flag=1"};
    char *a2[] = {"m", "--max-vcenter-tasks=0"};
    char *a3[] = {"m", "--max-vcenter-tasks=abc"};
    char *a4[] = {"m", "--leader-elect=maybe"};
    char *a5[] = {"m", "--leader-election-lease-duration=15"};
    char *a6[] = {"m", "--kubeconfig"};
    char *a7[] = {"m", "stray"};
    char *a8[] = {"m", "--kube-api-qps=-1"};
    char *a9[] = {"m", "--max-instance-marks=65"};
    char *a10[] = {"m", "--max-instance-marks=-1"};

    (void)state;
    expect_error(a1, 2, "--no-such-flag");
    expect_error(a2, 2, "--max-vcenter-tasks");
    expect_error(a3, 2, "\"abc\"");
    expect_error(a4, 2, "--leader-elect");
    expect_error(a5, 2, "--leader-election-lease-duration");
    expect_error(a6, 2, "--kubeconfig");
    expect_error(a7, 2, "stray");
    expect_error(a8, 2, "--kube-api-qps");
    expect_error(a9, 2, "--max-instance-marks");
    expect_error(a10, 2, "--max-instance-marks");
}

static void test_check(void **state)
{
    struct vmg_options o;
    char err[256];
    char *argv[] = {"m", "--leader-elect", "--leader-election-renew-deadline=20s"};
    char *argv2[] = {"m", "--insecure", "--vc-ca-file=/ca.pem"};
    char *argv3[] = {"m", "--vc-request-timeout=10ms"};

    (void)state;
    vmg_options_defaults(&o);
    assert_int_equal(vmg_options_parse(&o, 1, argv, env_none, err, sizeof(err)), 0);
    assert_int_equal(vmg_options_check(&o, err, sizeof(err)), VMG_ECONFIG);
    assert_non_null(strstr(err, "VC_HOST"));

    assert_int_equal(parse(&o, err, sizeof(err), 3, argv), 0);
    assert_int_equal(vmg_options_check(&o, err, sizeof(err)), VMG_ECONFIG);
    assert_non_null(strstr(err, "lease duration > renew deadline > retry period"));

    assert_int_equal(parse(&o, err, sizeof(err), 3, argv2), 0);
    assert_int_equal(vmg_options_check(&o, err, sizeof(err)), VMG_ECONFIG);
    assert_non_null(strstr(err, "--insecure"));

    assert_int_equal(parse(&o, err, sizeof(err), 2, argv3), 0);
    assert_int_equal(vmg_options_check(&o, err, sizeof(err)), VMG_ECONFIG);
    assert_non_null(strstr(err, "--vc-request-timeout"));
}

/* The environment of test_pass_file: VC_PASS_FILE names pass_file_path;
 * VC_PASS is set too when pass_also is. */
static char pass_file_path[64];
static bool pass_also;

static const char *env_pass_file(const char *name)
{
    if (!strcmp(name, "VC_PASS_FILE"))
        return pass_file_path;
    if (!strcmp(name, "VC_PASS"))
        return pass_also ? "s3cret" : NULL;
    return env_full(name);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static void test_pass_file(void **state)
{
    struct vmg_options o;
    char err[256];
    char *argv[] = {"m"};
    int fd;

    (void)state;
    snprintf(pass_file_path, sizeof(pass_file_path), "/tmp/vmg-test-pass.XXXXXX");
    fd = mkstemp(pass_file_path);
    assert_true(fd >= 0);
    close(fd);

    /* From the file, without the newline an editor or echo adds. */
    write_file(pass_file_path, "from-the-file\n");
    vmg_options_defaults(&o);
    assert_int_equal(vmg_options_parse(&o, 1, argv, env_pass_file, err, sizeof(err)), 0);
    assert_string_equal(o.vc_pass, "from-the-file");
    assert_string_equal(o.vc_pass_file, pass_file_path);
    assert_int_equal(vmg_options_check(&o, err, sizeof(err)), 0);

    /* Not both. */
    pass_also = true;
    vmg_options_defaults(&o);
    assert_int_equal(vmg_options_parse(&o, 1, argv, env_pass_file, err, sizeof(err)), VMG_ECONFIG);
    assert_non_null(strstr(err, "VC_PASS and VC_PASS_FILE"));
    pass_also = false;

    /* An empty file, and a missing one, are named. */
    write_file(pass_file_path, "\n");
    vmg_options_defaults(&o);
    assert_int_equal(vmg_options_parse(&o, 1, argv, env_pass_file, err, sizeof(err)), VMG_ECONFIG);
    assert_non_null(strstr(err, pass_file_path));
    assert_non_null(strstr(err, "empty"));
    unlink(pass_file_path);
    vmg_options_defaults(&o);
    assert_int_equal(vmg_options_parse(&o, 1, argv, env_pass_file, err, sizeof(err)), VMG_ECONFIG);
    assert_non_null(strstr(err, pass_file_path));
}

/* With the real environment, VC_PASS is taken out of it: the password is
 * kept in the options, the variable is gone, and the bytes that held its
 * value (what /proc/PID/environ shows, for a variable the process was
 * started with) no longer hold it. */
static void test_pass_leaves_environment(void **state)
{
    extern char **environ;
    struct vmg_options o;
    char err[256], big[VMG_SECRET_FILE_MAX + 2];
    char *argv[] = {"m"};
    char *held;

    (void)state;
    assert_int_equal(setenv("VC_HOST", "vc.example.com", 1), 0);
    assert_int_equal(setenv("VC_USER", "admin", 1), 0);
    assert_int_equal(setenv("VC_PASS", "env-s3cret", 1), 0);
    unsetenv("VC_PASS_FILE");
    held = getenv("VC_PASS");
    assert_non_null(held);

    vmg_options_defaults(&o);
    assert_int_equal(vmg_options_parse(&o, 1, argv, NULL, err, sizeof(err)), 0);
    assert_string_equal(o.vc_pass, "env-s3cret");
    assert_int_equal(vmg_options_check(&o, err, sizeof(err)), 0);
    assert_null(getenv("VC_PASS"));
    for (char **p = environ; *p; p++)
        assert_true(strncmp(*p, "VC_PASS=", 8) != 0);
    /* glibc keeps the memory of a setenv'd string: it must be wiped. */
    assert_null(strstr(held, "s3cret"));
    assert_int_equal(held[0], '\0');

    /* Longer than the bound: refused, and still removed and wiped. */
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(setenv("VC_PASS", big, 1), 0);
    held = getenv("VC_PASS");
    vmg_options_defaults(&o);
    assert_int_equal(vmg_options_parse(&o, 1, argv, NULL, err, sizeof(err)), VMG_ECONFIG);
    assert_non_null(strstr(err, "VC_PASS is longer"));
    assert_null(getenv("VC_PASS"));
    assert_int_equal(held[0], '\0');
    unsetenv("VC_HOST");
    unsetenv("VC_USER");
}

/* An environment that holds VC_PASS twice (execve allows it; getenv
 * returns the first): every copy's value is wiped, not only the first. */
static void test_pass_twice_in_environment(void **state)
{
    extern char **environ;
    char **saved = environ;
    char host[] = "VC_HOST=vc.example.com", user[] = "VC_USER=admin";
    char pass1[] = "VC_PASS=first-s3cret", pass2[] = "VC_PASS=second-s3cret";
    char *env[] = {host, pass1, user, pass2, NULL};
    struct vmg_options o;
    char err[256];
    char *argv[] = {"m"};
    int rc;

    (void)state;
    environ = env;
    vmg_options_defaults(&o);
    rc = vmg_options_parse(&o, 1, argv, NULL, err, sizeof(err));
    environ = saved;
    assert_int_equal(rc, 0);
    assert_string_equal(o.vc_pass, "first-s3cret");
    assert_null(strstr(pass1 + 8, "s3cret"));
    assert_null(strstr(pass2 + 8, "s3cret"));
    assert_int_equal(pass2[8], '\0');
    for (size_t i = 0; env[i]; i++)
        assert_true(strncmp(env[i], "VC_PASS=", 8) != 0);
}

static void test_durations(void **state)
{
    uint64_t ms;

    (void)state;
    assert_int_equal(vmg_parse_duration("15s", &ms), 0);
    assert_int_equal(ms, 15000);
    assert_int_equal(vmg_parse_duration("1h2m3.5s", &ms), 0);
    assert_int_equal(ms, 3723500);
    assert_int_equal(vmg_parse_duration("250ms", &ms), 0);
    assert_int_equal(ms, 250);
    assert_int_equal(vmg_parse_duration("0", &ms), 0);
    assert_int_equal(ms, 0);
    assert_true(vmg_parse_duration("15", &ms) < 0);
    assert_true(vmg_parse_duration("", &ms) < 0);
    assert_true(vmg_parse_duration("-1s", &ms) < 0);
    assert_true(vmg_parse_duration("1d", &ms) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_controller_runtime_names_and_values),
        cmocka_unit_test(test_original_spellings),
        cmocka_unit_test(test_errors_name_the_flag),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_pass_file),
        cmocka_unit_test(test_pass_leaves_environment),
        cmocka_unit_test(test_pass_twice_in_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
