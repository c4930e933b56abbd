/* metrics.h: a registry of Prometheus metrics and its text exposition.
 *
 * A registry holds metric families: counters, gauges and histograms, each
 * with a name, a help text and a fixed list of label names. A family has one
 * child (series) per tuple of label values, made on first use; label values
 * are given as an array of nlabels strings in the order of the label names,
 * e.g. vmg_counter_add(m, 1, (const char *[]){"vmgroup", "success"}); a
 * family without labels takes NULL. A family holds at most a bounded number
 * of children (VMG_METRICS_MAX_SERIES by default); a new label tuple beyond
 * that is dropped, the call returns -ENOSPC and the registry's own counter
 * vmgroup_metrics_dropped_series_total counts it.
 *
 * vmg_metrics_render() writes the text format 0.0.4: "# HELP" and "# TYPE"
 * lines, families sorted by name and children by label values, label
 * values escaped, histograms as cumulative _bucket{le=...} series ending in
 * le="+Inf", then _sum and _count. Output is deterministic.
 *
 * Values computed at scrape time: a child may be given a function
 * (vmg_metric_set_fn) that returns its value on every render, and a
 * collector (vmg_metrics_add_collector) runs at the start of each render
 * and may set values. vmg_metrics_add_process() registers the process_*
 * metrics, read from /proc/self at render time.
 *
 * Not thread-safe: every call is made on one thread (the loop's). Families
 * belong to the registry and are freed with it; a struct vmg_metric pointer
 * is valid until vmg_metrics_free() or vmg_metrics_unregister(). Every
 * function taking a family accepts NULL and then returns -EINVAL, so that a
 * failed registration does not crash its users.
 */
#ifndef VMG_METRICS_H
#define VMG_METRICS_H

#include <stddef.h>

/* Bounds. */
#define VMG_METRICS_MAX_SERIES 10000       /* children per family, by default */
#define VMG_METRICS_MAX_FAMILIES 4096      /* families per registry */
#define VMG_METRICS_MAX_LABELS 16          /* label names per family */
#define VMG_METRICS_MAX_BUCKETS 64         /* histogram buckets, +Inf excluded */
#define VMG_METRICS_MAX_NAME 200           /* bytes of a metric or label name */
#define VMG_METRICS_MAX_HELP 1024          /* bytes of a help text */
#define VMG_METRICS_MAX_VALUE 1024         /* bytes of one label value */
#define VMG_METRICS_MAX_RENDER (64u << 20) /* bytes of one exposition */

/* The registry's own counter of dropped label sets. */
#define VMG_METRICS_DROPPED_NAME "vmgroup_metrics_dropped_series_total"

typedef struct vmg_metrics vmg_metrics;
struct vmg_metric; /* one family */

enum vmg_metric_type {
    VMG_METRIC_COUNTER = 0,
    VMG_METRIC_GAUGE = 1,
    VMG_METRIC_HISTOGRAM = 2,
};

/* vmg_metrics_new makes an empty registry (holding only its dropped-series
 * counter). Returns NULL when out of memory. */
vmg_metrics *vmg_metrics_new(void);

/* vmg_metrics_free frees the registry and all its families. NULL is fine. */
void vmg_metrics_free(vmg_metrics *reg);

/* vmg_metrics_set_max_series changes the bound on children per family (at
 * least 1); existing children beyond a lower bound are kept. */
void vmg_metrics_set_max_series(vmg_metrics *reg, size_t max);

/* Registration. name must match [a-zA-Z_:][a-zA-Z0-9_:]*, label names
 * [a-zA-Z_][a-zA-Z0-9_]* not beginning with "__" (and not "le" for a
 * histogram), all distinct; help is valid UTF-8. A counter's name should
 * end in "_total". Each returns the new family, or NULL when a name is
 * invalid, already taken (a histogram also takes name_bucket, name_sum and
 * name_count), a bound is exceeded, or memory runs out. Strings are copied. */
struct vmg_metric *vmg_counter_new(vmg_metrics *reg, const char *name, const char *help,
                                   size_t nlabels, const char *const *label_names);
struct vmg_metric *vmg_gauge_new(vmg_metrics *reg, const char *name, const char *help,
                                 size_t nlabels, const char *const *label_names);
/* buckets are the finite upper bounds, strictly increasing (a last +Inf is
 * ignored; +Inf is always added). nbuckets may be 0. */
struct vmg_metric *vmg_histogram_new(vmg_metrics *reg, const char *name, const char *help,
                                     const double *buckets, size_t nbuckets, size_t nlabels,
                                     const char *const *label_names);

/* vmg_metrics_unregister removes family m from reg and frees it. */
void vmg_metrics_unregister(vmg_metrics *reg, struct vmg_metric *m);

/* Updates. label_values holds one valid UTF-8 string of at most
 * VMG_METRICS_MAX_VALUE bytes per label name (NULL when there are none).
 * Each returns 0, -EINVAL (NULL family, wrong type, a bad label value, a
 * NaN, a negative counter increment), -ENOSPC (a new child beyond the
 * bound, dropped and counted) or -ENOMEM. Setting a value replaces a
 * child's function (vmg_metric_set_fn). */
int vmg_counter_add(struct vmg_metric *m, double v, const char *const *label_values);
int vmg_counter_inc(struct vmg_metric *m, const char *const *label_values);
/* vmg_counter_set mirrors a count kept elsewhere (v >= 0), for collectors. */
int vmg_counter_set(struct vmg_metric *m, double v, const char *const *label_values);
int vmg_gauge_set(struct vmg_metric *m, double v, const char *const *label_values);
int vmg_gauge_add(struct vmg_metric *m, double v, const char *const *label_values);
/* vmg_histogram_observe counts v (not NaN) in its bucket, the sum and the
 * count. */
int vmg_histogram_observe(struct vmg_metric *m, double v, const char *const *label_values);

/* vmg_metric_set_fn makes the child's value fn(data), computed at each
 * render (a counter's function must not decrease). For counters and
 * gauges. The child keeps data until it is removed, set, or the family
 * freed: remove it before data goes away. */
int vmg_metric_set_fn(struct vmg_metric *m, const char *const *label_values,
                      double (*fn)(void *data), void *data);

/* vmg_metric_remove deletes the children whose label values match pattern:
 * one entry per label name, NULL matching any value (so a pattern of all
 * NULL, or a NULL pattern, deletes every child). Returns the number of
 * children deleted, or -EINVAL. */
int vmg_metric_remove(struct vmg_metric *m, const char *const *pattern);

/* vmg_metric_series returns the number of children of m (0 for NULL). */
size_t vmg_metric_series(const struct vmg_metric *m);

/* vmg_metric_value reads the value of a counter's or gauge's child (its
 * function's value if it has one), or a histogram child's count. Returns 0,
 * or -ENOENT when there is no such child, or -EINVAL. For tests and
 * collectors. */
int vmg_metric_value(const struct vmg_metric *m, const char *const *label_values,
                     double *ret_value);

/* A collector runs at the start of every render, in the order added; it
 * may update any family but must not register, unregister or render. */
typedef void (*vmg_metrics_collector)(void *data, vmg_metrics *reg);

/* vmg_metrics_add_collector adds fn(data). Returns 0, -EINVAL, -EEXIST
 * (the same fn and data already added), -ENOSPC (more collectors than
 * VMG_METRICS_MAX_FAMILIES) or -ENOMEM. */
int vmg_metrics_add_collector(vmg_metrics *reg, vmg_metrics_collector fn, void *data);
/* vmg_metrics_remove_collector removes fn(data); returns 0 or -ENOENT. */
int vmg_metrics_remove_collector(vmg_metrics *reg, vmg_metrics_collector fn, void *data);

/* vmg_metrics_add_process registers process_cpu_seconds_total,
 * process_open_fds, process_max_fds, process_virtual_memory_bytes,
 * process_resident_memory_bytes and process_start_time_seconds, read from
 * /proc/self (and /proc/stat's btime) at each render. Returns 0, -EEXIST
 * when they are registered already, or -ENOMEM. */
int vmg_metrics_add_process(vmg_metrics *reg);

/* vmg_metrics_render runs the collectors and writes the exposition to a new
 * NUL-terminated buffer *ret_buf of *ret_len bytes (free() it). Returns 0,
 * -EINVAL, VMG_ETOOBIG (above VMG_METRICS_MAX_RENDER) or -ENOMEM. */
int vmg_metrics_render(vmg_metrics *reg, char **ret_buf, size_t *ret_len);

/* The content type of the exposition, for the Content-Type header. */
#define VMG_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif
