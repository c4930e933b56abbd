/* test_metrics.c: the metrics registry and its text exposition. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/err.h"
#include "lib/metrics.h"

/* The registry's own counter, in every exposition. */
#define DROPPED_TEXT(n)                                                                            \
    "# HELP vmgroup_metrics_dropped_series_total Label sets dropped because their metric "         \
    "family held its maximum number of series.\n"                                                  \
    "# TYPE vmgroup_metrics_dropped_series_total counter\n"                                        \
    "vmgroup_metrics_dropped_series_total " n "\n"

static char *render(vmg_metrics *reg)
{
    char *buf = NULL;
    size_t len = 0;

    assert_int_equal(vmg_metrics_render(reg, &buf, &len), 0);
    assert_non_null(buf);
    assert_int_equal(strlen(buf), len);
    return buf;
}

static void assert_renders(vmg_metrics *reg, const char *want)
{
    char *got = render(reg);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "# got:\n%s# want:\n%s", got, want);
    assert_string_equal(got, want);
    free(got);
}

/* promtool_check validates text with `promtool check metrics` when promtool
 * is on PATH; it must pass without any remark. Returns 0 when checked, 1
 * when promtool is absent. */
static int promtool_check(const char *text)
{
    char path[] = "/tmp/test_metrics_XXXXXX";
    char cmd[256], out[4096];
    size_t n = 0, len = strlen(text);
    FILE *f;
    int fd, rc;

    if (system("command -v promtool >/dev/null 2>&1") != 0)
        return 1;
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
    f = popen(cmd, "r");
    assert_non_null(f);
    n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    rc = pclose(f);
    unlink(path);
    if (rc != 0 || n != 0)
        fprintf(stderr, "# promtool (status %d) said: %s\n", rc, out);
    assert_int_equal(rc, 0);
    assert_int_equal(n, 0);
    return 0;
}

static void test_empty_registry(void **state)
{
    vmg_metrics *reg = vmg_metrics_new();
    (void)state;
    assert_non_null(reg);
    assert_renders(reg, DROPPED_TEXT("0"));
    vmg_metrics_free(reg);
    vmg_metrics_free(NULL);
}

static void test_counters_and_gauges(void **state)
{
    vmg_metrics *reg = vmg_metrics_new();
    struct vmg_metric *c, *g, *plain;
    (void)state;

    c = vmg_counter_new(reg, "controller_runtime_reconcile_total", "Total reconciliations.", 2,
                        (const char *[]){"controller", "result"});
    g = vmg_gauge_new(reg, "vmgroup_replicas", "Replicas per group.", 2,
                      (const char *[]){"namespace", "name"});
    plain = vmg_gauge_new(reg, "a_plain_value", "No labels.", 0, NULL);
    assert_non_null(c);
    assert_non_null(g);
    assert_non_null(plain);

    assert_int_equal(vmg_counter_inc(c, (const char *[]){"vmgroup", "success"}), 0);
    assert_int_equal(vmg_counter_add(c, 2.5, (const char *[]){"vmgroup", "success"}), 0);
    assert_int_equal(vmg_counter_add(c, 1, (const char *[]){"vmgroup", "error"}), 0);
    assert_int_equal(vmg_gauge_set(g, 3, (const char *[]){"ns2", "b"}), 0);
    assert_int_equal(vmg_gauge_set(g, 7, (const char *[]){"ns1", "a"}), 0);
    assert_int_equal(vmg_gauge_add(g, -2, (const char *[]){"ns1", "a"}), 0);
    assert_int_equal(vmg_gauge_set(plain, 0.1, NULL), 0);

    assert_renders(reg, "# HELP a_plain_value No labels.\n"
                        "# TYPE a_plain_value gauge\n"
                        "a_plain_value 0.1\n"
                        "# HELP controller_runtime_reconcile_total Total reconciliations.\n"
                        "# TYPE controller_runtime_reconcile_total counter\n"
                        "controller_runtime_reconcile_total{controller=\"vmgroup\",result="
                        "\"error\"} 1\n"
                        "controller_runtime_reconcile_total{controller=\"vmgroup\",result="
                        "\"success\"} 3.5\n" DROPPED_TEXT("0") /* sorts before _replicas */
                   "# HELP vmgroup_replicas Replicas per group.\n"
                   "# TYPE vmgroup_replicas gauge\n"
                   "vmgroup_replicas{namespace=\"ns1\",name=\"a\"} 5\n"
                   "vmgroup_replicas{namespace=\"ns2\",name=\"b\"} 3\n");

    double v = 0;
    assert_int_equal(vmg_metric_value(c, (const char *[]){"vmgroup", "success"}, &v), 0);
    assert_true(v == 3.5);
    assert_int_equal(vmg_metric_value(c, (const char *[]){"vmgroup", "x"}, &v), -ENOENT);
    assert_int_equal(vmg_metric_series(c), 2);

    char *text = render(reg);
    promtool_check(text);
    free(text);
    vmg_metrics_free(reg);
}

static void test_histogram(void **state)
{
    vmg_metrics *reg = vmg_metrics_new();
    const double buckets[] = {0.005, 0.1, 1, 2.5};
    struct vmg_metric *h;
    (void)state;

    h = vmg_histogram_new(reg, "rest_client_request_duration_seconds", "Request latency.", buckets,
                          4, 1, (const char *[]){"verb"});
    assert_non_null(h);
    assert_int_equal(vmg_histogram_observe(h, 0.005, (const char *[]){"GET"}), 0); /* le is <= */
    assert_int_equal(vmg_histogram_observe(h, 0.05, (const char *[]){"GET"}), 0);
    assert_int_equal(vmg_histogram_observe(h, 2, (const char *[]){"GET"}), 0);
    assert_int_equal(vmg_histogram_observe(h, 30, (const char *[]){"GET"}), 0);
    assert_int_equal(vmg_histogram_observe(h, 0.25, (const char *[]){"PUT"}), 0);
    assert_int_equal(vmg_histogram_observe(h, NAN, (const char *[]){"PUT"}), -EINVAL);

    assert_renders(
        reg, "# HELP rest_client_request_duration_seconds Request latency.\n"
             "# TYPE rest_client_request_duration_seconds histogram\n"
             "rest_client_request_duration_seconds_bucket{verb=\"GET\",le=\"0.005\"} 1\n"
             "rest_client_request_duration_seconds_bucket{verb=\"GET\",le=\"0.1\"} 2\n"
             "rest_client_request_duration_seconds_bucket{verb=\"GET\",le=\"1\"} 2\n"
             "rest_client_request_duration_seconds_bucket{verb=\"GET\",le=\"2.5\"} 3\n"
             "rest_client_request_duration_seconds_bucket{verb=\"GET\",le=\"+Inf\"} 4\n"
             "rest_client_request_duration_seconds_sum{verb=\"GET\"} 32.055\n"
             "rest_client_request_duration_seconds_count{verb=\"GET\"} 4\n"
             "rest_client_request_duration_seconds_bucket{verb=\"PUT\",le=\"0.005\"} 0\n"
             "rest_client_request_duration_seconds_bucket{verb=\"PUT\",le=\"0.1\"} 0\n"
             "rest_client_request_duration_seconds_bucket{verb=\"PUT\",le=\"1\"} 1\n"
             "rest_client_request_duration_seconds_bucket{verb=\"PUT\",le=\"2.5\"} 1\n"
             "rest_client_request_duration_seconds_bucket{verb=\"PUT\",le=\"+Inf\"} 1\n"
             "rest_client_request_duration_seconds_sum{verb=\"PUT\"} 0.25\n"
             "rest_client_request_duration_seconds_count{verb=\"PUT\"} 1\n" DROPPED_TEXT("0"));

    /* A histogram without labels exists, at zero, from the start; a last
     * +Inf bound is the implicit one. */
    const double b2[] = {1, INFINITY};
    struct vmg_metric *h2 = vmg_histogram_new(reg, "a_seconds", "A.", b2, 2, 0, NULL);
    assert_non_null(h2);
    char *text = render(reg);
    assert_non_null(strstr(text, "# TYPE a_seconds histogram\n"
                                 "a_seconds_bucket{le=\"1\"} 0\n"
                                 "a_seconds_bucket{le=\"+Inf\"} 0\n"
                                 "a_seconds_sum 0\n"
                                 "a_seconds_count 0\n"));
    promtool_check(text);
    free(text);
    vmg_metrics_free(reg);
}

static void test_escaping(void **state)
{
    vmg_metrics *reg = vmg_metrics_new();
    struct vmg_metric *g;
    (void)state;

    g = vmg_gauge_new(reg, "esc", "Help with \\ and\nnewline and \"quotes\".", 1,
                      (const char *[]){"v"});
    assert_non_null(g);
    assert_int_equal(vmg_gauge_set(g, 1, (const char *[]){"back\\slash \"q\"\nnl \xc3\xa9"}), 0);
    assert_renders(reg, "# HELP esc Help with \\\\ and\\nnewline and \"quotes\".\n"
                        "# TYPE esc gauge\n"
                        "esc{v=\"back\\\\slash \\\"q\\\"\\nnl \xc3\xa9\"} 1\n" DROPPED_TEXT("0"));
    char *text = render(reg);
    promtool_check(text);
    free(text);

    /* Invalid UTF-8 and values over the bound are refused. */
    assert_int_equal(vmg_gauge_set(g, 1, (const char *[]){"\xff"}), -EINVAL);
    assert_int_equal(vmg_gauge_set(g, 1, (const char *[]){"\xc0\x80"}), -EINVAL);
    assert_int_equal(vmg_gauge_set(g, 1, (const char *[]){"\xed\xa0\x80"}), -EINVAL);
    assert_int_equal(vmg_gauge_set(g, 1, (const char *[]){NULL}), -EINVAL);
    assert_int_equal(vmg_gauge_set(g, 1, NULL), -EINVAL);
    char *big = malloc(VMG_METRICS_MAX_VALUE + 2);
    memset(big, 'x', VMG_METRICS_MAX_VALUE + 1);
    big[VMG_METRICS_MAX_VALUE + 1] = '\0';
    assert_int_equal(vmg_gauge_set(g, 1, (const char *[]){big}), -EINVAL);
    big[VMG_METRICS_MAX_VALUE] = '\0';
    assert_int_equal(vmg_gauge_set(g, 1, (const char *[]){big}), 0);
    free(big);
    assert_int_equal(vmg_metric_series(g), 2);
    vmg_metrics_free(reg);
}

static void test_numbers(void **state)
{
    vmg_metrics *reg = vmg_metrics_new();
    struct vmg_metric *g = vmg_gauge_new(reg, "n", "Numbers.", 1, (const char *[]){"k"});
    (void)state;

    assert_int_equal(vmg_gauge_set(g, 1e-9, (const char *[]){"a"}), 0);
    assert_int_equal(vmg_gauge_set(g, 123456789012, (const char *[]){"b"}), 0);
    assert_int_equal(vmg_gauge_set(g, -0.3, (const char *[]){"c"}), 0);
    assert_int_equal(vmg_gauge_set(g, INFINITY, (const char *[]){"d"}), 0);
    assert_int_equal(vmg_gauge_set(g, -INFINITY, (const char *[]){"e"}), 0);
    assert_int_equal(vmg_gauge_set(g, 1e300, (const char *[]){"f"}), 0);
    assert_int_equal(vmg_gauge_set(g, -0.0, (const char *[]){"g"}), 0);
    assert_int_equal(vmg_gauge_set(g, NAN, (const char *[]){"h"}), -EINVAL);
    assert_renders(reg, "# HELP n Numbers.\n"
                        "# TYPE n gauge\n"
                        "n{k=\"a\"} 1e-09\n"
                        "n{k=\"b\"} 123456789012\n"
                        "n{k=\"c\"} -0.3\n"
                        "n{k=\"d\"} +Inf\n"
                        "n{k=\"e\"} -Inf\n"
                        "n{k=\"f\"} 1e+300\n"
                        "n{k=\"g\"} 0\n" DROPPED_TEXT("0"));
    vmg_metrics_free(reg);
}

static void test_registration_rules(void **state)
{
    vmg_metrics *reg = vmg_metrics_new();
    const double good[] = {1, 2};
    const double bad[] = {2, 1};
    (void)state;

    assert_null(vmg_counter_new(reg, "", "x", 0, NULL));
    assert_null(vmg_counter_new(reg, "9lives_total", "x", 0, NULL));
    assert_null(vmg_counter_new(reg, "has-dash_total", "x", 0, NULL));
    assert_null(vmg_counter_new(reg, "x_total", NULL, 0, NULL));
    assert_null(vmg_counter_new(reg, "x_total", "bad \xff help", 0, NULL));
    assert_null(vmg_counter_new(reg, "x_total", "x", 1, (const char *[]){"__reserved"}));
    assert_null(vmg_counter_new(reg, "x_total", "x", 1, (const char *[]){"a:b"}));
    assert_null(vmg_counter_new(reg, "x_total", "x", 2, (const char *[]){"a", "a"}));
    assert_null(vmg_counter_new(reg, "x_total", "x", 1, NULL));
    assert_null(vmg_histogram_new(reg, "h", "x", good, 2, 1, (const char *[]){"le"}));
    assert_null(vmg_histogram_new(reg, "h", "x", bad, 2, 0, NULL));
    assert_null(vmg_histogram_new(reg, "h", "x", (const double[]){NAN}, 1, 0, NULL));
    assert_non_null(vmg_counter_new(reg, "ns:x_total", "colons are fine in names", 0, NULL));

    /* Names are unique, and a histogram owns its series names. */
    assert_non_null(vmg_histogram_new(reg, "h", "x", good, 2, 1, (const char *[]){"le2"}));
    assert_null(vmg_gauge_new(reg, "h", "x", 0, NULL));
    assert_null(vmg_gauge_new(reg, "h_count", "x", 0, NULL));
    assert_null(vmg_gauge_new(reg, "h_bucket", "x", 0, NULL));
    assert_non_null(vmg_gauge_new(reg, "g_sum", "x", 0, NULL));
    assert_null(vmg_histogram_new(reg, "g", "x", good, 2, 0, NULL));
    assert_null(vmg_gauge_new(reg, VMG_METRICS_DROPPED_NAME, "x", 0, NULL));

    /* Wrong types and bad values on a family. */
    struct vmg_metric *c = vmg_counter_new(reg, "c_total", "x", 0, NULL);
    assert_int_equal(vmg_counter_add(c, -1, NULL), -EINVAL);
    assert_int_equal(vmg_counter_add(c, NAN, NULL), -EINVAL);
    assert_int_equal(vmg_counter_set(c, -1, NULL), -EINVAL);
    assert_int_equal(vmg_gauge_set(c, 1, NULL), -EINVAL);
    assert_int_equal(vmg_histogram_observe(c, 1, NULL), -EINVAL);
    assert_int_equal(vmg_counter_add(NULL, 1, NULL), -EINVAL);
    assert_int_equal(vmg_gauge_set(NULL, 1, NULL), -EINVAL);
    assert_int_equal(vmg_metric_remove(NULL, NULL), -EINVAL);
    assert_int_equal(vmg_metric_series(NULL), 0);

    /* Unregistering frees the name for reuse. */
    struct vmg_metric *g = vmg_gauge_new(reg, "temp", "x", 0, NULL);
    assert_non_null(g);
    vmg_metrics_unregister(reg, g);
    assert_non_null(vmg_gauge_new(reg, "temp", "again", 0, NULL));
    vmg_metrics_free(reg);
}

static void test_series_bound(void **state)
{
    vmg_metrics *reg = vmg_metrics_new();
    struct vmg_metric *g = vmg_gauge_new(reg, "g", "G.", 1, (const char *[]){"k"});
    (void)state;

    vmg_metrics_set_max_series(reg, 3);
    assert_int_equal(vmg_gauge_set(g, 1, (const char *[]){"a"}), 0);
    assert_int_equal(vmg_gauge_set(g, 2, (const char *[]){"b"}), 0);
    assert_int_equal(vmg_gauge_set(g, 3, (const char *[]){"c"}), 0);
    assert_int_equal(vmg_gauge_set(g, 4, (const char *[]){"d"}), -ENOSPC);
    assert_int_equal(vmg_gauge_add(g, 4, (const char *[]){"e"}), -ENOSPC);
    /* Existing series still update. */
    assert_int_equal(vmg_gauge_set(g, 9, (const char *[]){"a"}), 0);
    assert_int_equal(vmg_metric_series(g), 3);
    assert_renders(reg, "# HELP g G.\n"
                        "# TYPE g gauge\n"
                        "g{k=\"a\"} 9\n"
                        "g{k=\"b\"} 2\n"
                        "g{k=\"c\"} 3\n" DROPPED_TEXT("2"));
    /* Deleting one makes room for another. */
    assert_int_equal(vmg_metric_remove(g, (const char *[]){"b"}), 1);
    assert_int_equal(vmg_gauge_set(g, 4, (const char *[]){"d"}), 0);
    vmg_metrics_free(reg);

    /* The default bound holds many series in the hash table. */
    reg = vmg_metrics_new();
    g = vmg_gauge_new(reg, "g", "G.", 1, (const char *[]){"k"});
    for (int i = 0; i < VMG_METRICS_MAX_SERIES + 5; i++) {
        char k[16];
        snprintf(k, sizeof(k), "%d", i);
        assert_int_equal(vmg_gauge_set(g, i, (const char *[]){k}),
                         i < VMG_METRICS_MAX_SERIES ? 0 : -ENOSPC);
    }
    double v;
    assert_int_equal(vmg_metric_value(g, (const char *[]){"4321"}, &v), 0);
    assert_true(v == 4321);
    assert_int_equal(vmg_metric_series(g), VMG_METRICS_MAX_SERIES);
    vmg_metrics_free(reg);
}

static void test_remove(void **state)
{
    vmg_metrics *reg = vmg_metrics_new();
    struct vmg_metric *g =
        vmg_gauge_new(reg, "vmgroup_condition", "C.", 3, (const char *[]){"ns", "name", "type"});
    (void)state;

    vmg_gauge_set(g, 1, (const char *[]){"a", "g1", "Ready"});
    vmg_gauge_set(g, 0, (const char *[]){"a", "g1", "Degraded"});
    vmg_gauge_set(g, 1, (const char *[]){"a", "g2", "Ready"});
    vmg_gauge_set(g, 1, (const char *[]){"b", "g1", "Ready"});

    assert_int_equal(vmg_metric_remove(g, (const char *[]){"a", "g1", "Missing"}), 0);
    assert_int_equal(vmg_metric_remove(g, (const char *[]){"a", "g2", "Ready"}), 1);
    /* A group's deletion: every series of (a, g1), whatever its type. */
    assert_int_equal(vmg_metric_remove(g, (const char *[]){"a", "g1", NULL}), 2);
    assert_renders(reg,
                   "# HELP vmgroup_condition C.\n"
                   "# TYPE vmgroup_condition gauge\n"
                   "vmgroup_condition{ns=\"b\",name=\"g1\",type=\"Ready\"} 1\n" DROPPED_TEXT("0"));
    /* Without series the family is left out. */
    assert_int_equal(vmg_metric_remove(g, NULL), 1);
    assert_renders(reg, DROPPED_TEXT("0"));
    vmg_metrics_free(reg);
}

static double read_counter(void *data)
{
    return *(double *)data;
}

static void bump_collector(void *data, vmg_metrics *reg)
{
    struct vmg_metric *g = data;
    (void)reg;
    vmg_gauge_add(g, 1, NULL);
}

static void test_functions_and_collectors(void **state)
{
    vmg_metrics *reg = vmg_metrics_new();
    struct vmg_metric *g =
        vmg_gauge_new(reg, "workqueue_unfinished_work_seconds", "U.", 1, (const char *[]){"name"});
    struct vmg_metric *scrapes = vmg_gauge_new(reg, "scrapes", "S.", 0, NULL);
    double work = 1.5;
    (void)state;

    assert_int_equal(vmg_metric_set_fn(g, (const char *[]){"vmgroup"}, read_counter, &work), 0);
    assert_int_equal(vmg_metrics_add_collector(reg, bump_collector, scrapes), 0);
    assert_int_equal(vmg_metrics_add_collector(reg, bump_collector, scrapes), -EEXIST);

    char *t1 = render(reg);
    assert_non_null(strstr(t1, "\nworkqueue_unfinished_work_seconds{name=\"vmgroup\"} 1.5\n"));
    assert_non_null(strstr(t1, "\nscrapes 1\n"));
    free(t1);
    work = 4;
    char *t2 = render(reg);
    assert_non_null(strstr(t2, "\nworkqueue_unfinished_work_seconds{name=\"vmgroup\"} 4\n"));
    assert_non_null(strstr(t2, "\nscrapes 2\n"));
    free(t2);

    /* Setting a value replaces the function; removing the collector stops it. */
    assert_int_equal(vmg_gauge_set(g, 7, (const char *[]){"vmgroup"}), 0);
    work = 100;
    assert_int_equal(vmg_metrics_remove_collector(reg, bump_collector, scrapes), 0);
    assert_int_equal(vmg_metrics_remove_collector(reg, bump_collector, scrapes), -ENOENT);
    char *t3 = render(reg);
    assert_non_null(strstr(t3, "\nworkqueue_unfinished_work_seconds{name=\"vmgroup\"} 7\n"));
    assert_non_null(strstr(t3, "\nscrapes 2\n"));
    free(t3);
    assert_int_equal(vmg_metric_set_fn(NULL, NULL, read_counter, &work), -EINVAL);
    vmg_metrics_free(reg);
}

/* value_of finds "name value\n" in text and returns the value. */
static double value_of(const char *text, const char *name)
{
    char key[128];
    const char *p;

    snprintf(key, sizeof(key), "\n%s ", name);
    p = strstr(text, key);
    assert_non_null(p);
    return strtod(p + strlen(key), NULL);
}

static void test_process_metrics(void **state)
{
    vmg_metrics *reg = vmg_metrics_new();
    (void)state;

    assert_int_equal(vmg_metrics_add_process(reg), 0);
    assert_int_equal(vmg_metrics_add_process(reg), -EEXIST);
    assert_null(vmg_gauge_new(reg, "process_open_fds", "x", 0, NULL));

    /* Burn a little CPU so that the counter is above zero. */
    volatile double x = 0;
    clock_t c0 = clock();
    while (clock() - c0 < CLOCKS_PER_SEC / 20)
        x += 1;

    char *text = render(reg);
    double rss = value_of(text, "process_resident_memory_bytes");
    double vmem = value_of(text, "process_virtual_memory_bytes");
    double cpu = value_of(text, "process_cpu_seconds_total");
    double fds = value_of(text, "process_open_fds");
    double maxfds = value_of(text, "process_max_fds");
    double start = value_of(text, "process_start_time_seconds");
    double now = (double)time(NULL);

    assert_true(rss > 1e6 && rss < 64e9);
    assert_true(vmem >= rss);
    assert_true(cpu > 0 && cpu < 3600);
    assert_true(fds >= 3 && fds <= maxfds);
    /* This test started within the last hour, and not in the future. */
    assert_true(start > now - 3600 && start <= now + 1);
    assert_non_null(strstr(text, "# TYPE process_cpu_seconds_total counter\n"));
    assert_non_null(strstr(text, "# TYPE process_resident_memory_bytes gauge\n"));
    promtool_check(text);
    free(text);
    vmg_metrics_free(reg);
}

static void test_promtool_everything(void **state)
{
    vmg_metrics *reg = vmg_metrics_new();
    const double b[] = {0.1, 1};
    (void)state;

    vmg_metrics_add_process(reg);
    struct vmg_metric *c = vmg_counter_new(reg, "vmgroup_clones_total", "Clones started.", 1,
                                           (const char *[]){"result"});
    struct vmg_metric *h = vmg_histogram_new(reg, "vmgroup_task_duration_seconds",
                                             "Task durations.", b, 2, 1, (const char *[]){"kind"});
    struct vmg_metric *g =
        vmg_gauge_new(reg, "workqueue_depth", "Depth of the queue.", 1, (const char *[]){"name"});
    vmg_counter_inc(c, (const char *[]){"ok"});
    vmg_histogram_observe(h, 0.5, (const char *[]){"clone"});
    vmg_gauge_set(g, 2, (const char *[]){"vmgroup"});
    char *text = render(reg);
    int absent = promtool_check(text);
    free(text);
    vmg_metrics_free(reg);
    if (absent)
        skip();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_registry),
        cmocka_unit_test(test_counters_and_gauges),
        cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_registration_rules),
        cmocka_unit_test(test_series_bound),
        cmocka_unit_test(test_remove),
        cmocka_unit_test(test_functions_and_collectors),
        cmocka_unit_test(test_process_metrics),
        cmocka_unit_test(test_promtool_everything),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
