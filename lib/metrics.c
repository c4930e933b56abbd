/* metrics.c: the Prometheus registry and its text exposition (see metrics.h). */
#include "lib/metrics.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/err.h"

/* One child: the series of one label-value tuple. */
struct child {
    struct child *hnext; /* next in the hash chain */
    uint32_t hash;
    char **values; /* nlabels strings */
    double value;  /* counter or gauge */
    double (*fn)(void *data);
    void *fn_data;
    uint64_t *counts; /* histogram: per bucket, not cumulative; last is +Inf */
    double sum;
    uint64_t count;
};

struct vmg_metric {
    vmg_metrics *reg;
    enum vmg_metric_type type;
    char *name;
    char *help;
    size_t nlabels;
    char **labels;
    double *buckets; /* histogram: finite upper bounds */
    size_t nbuckets;
    struct child **table; /* hash table of children */
    size_t tsize;         /* a power of two */
    size_t nchildren;
};

struct collector {
    vmg_metrics_collector fn;
    void *data;
};

enum { P_CPU, P_OPEN_FDS, P_MAX_FDS, P_VMEM, P_RSS, P_START, P_COUNT };

struct vmg_metrics {
    struct vmg_metric **fams; /* sorted by name */
    size_t nfams;
    size_t cap;
    struct collector *colls;
    size_t ncolls;
    size_t max_series;
    struct vmg_metric *dropped;
    int process;
    struct vmg_metric *proc[P_COUNT];
};

/* ---- validation ---- */

static int valid_name(const char *s, int metric)
{
    size_t n;

    if (!s || !*s)
        return 0;
    n = strlen(s);
    if (n > VMG_METRICS_MAX_NAME)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                 (metric && c == ':') || (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return 0;
    }
    if (!metric && s[0] == '_' && s[1] == '_')
        return 0;
    return 1;
}

/* valid_utf8 tells whether s[0..n) is well-formed UTF-8 (no overlongs,
 * surrogates or code points above U+10FFFF) without NUL bytes. */
static int valid_utf8(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;

    while (i < n) {
        unsigned c = s[i];
        size_t len;
        uint32_t cp;

        if (c == 0)
            return 0;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (n - i < len)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

static int valid_values(const struct vmg_metric *m, const char *const *lv)
{
    if (m->nlabels == 0)
        return 1;
    if (!lv)
        return 0;
    for (size_t i = 0; i < m->nlabels; i++) {
        size_t n;
        if (!lv[i])
            return 0;
        n = strnlen(lv[i], VMG_METRICS_MAX_VALUE + 1);
        if (n > VMG_METRICS_MAX_VALUE || !valid_utf8(lv[i], n))
            return 0;
    }
    return 1;
}

/* ---- families ---- */

/* find_index returns the position of name in reg->fams, or where it would
 * be inserted with *found = 0. */
static size_t find_index(const vmg_metrics *reg, const char *name, int *found)
{
    size_t lo = 0, hi = reg->nfams;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(reg->fams[mid]->name, name);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = 0;
    return lo;
}

static struct vmg_metric *find_family(const vmg_metrics *reg, const char *name)
{
    int found;
    size_t i = find_index(reg, name, &found);
    return found ? reg->fams[i] : NULL;
}

static const char *const hist_suffixes[] = {"_bucket", "_sum", "_count"};

/* name_taken tells whether registering name (a histogram when hist) would
 * clash with a family or with the series names of a histogram. */
static int name_taken(const vmg_metrics *reg, const char *name, int hist)
{
    size_t n = strlen(name);

    if (find_family(reg, name))
        return 1;
    for (size_t i = 0; i < 3; i++) {
        const char *suf = hist_suffixes[i];
        size_t sn = strlen(suf);
        char buf[VMG_METRICS_MAX_NAME + 16];

        if (n > sn && strcmp(name + n - sn, suf) == 0) {
            const struct vmg_metric *base;
            snprintf(buf, sizeof(buf), "%.*s", (int)(n - sn), name);
            base = find_family(reg, buf);
            if (base && base->type == VMG_METRIC_HISTOGRAM)
                return 1;
        }
        if (hist) {
            snprintf(buf, sizeof(buf), "%s%s", name, suf);
            if (find_family(reg, buf))
                return 1;
        }
    }
    return 0;
}

static void child_free(struct child *c, size_t nlabels)
{
    if (!c)
        return;
    if (c->values) {
        for (size_t i = 0; i < nlabels; i++)
            free(c->values[i]);
        free(c->values);
    }
    free(c->counts);
    free(c);
}

static void family_free(struct vmg_metric *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->tsize; i++) {
        struct child *c = m->table[i];
        while (c) {
            struct child *next = c->hnext;
            child_free(c, m->nlabels);
            c = next;
        }
    }
    free(m->table);
    if (m->labels) {
        for (size_t i = 0; i < m->nlabels; i++)
            free(m->labels[i]);
        free(m->labels);
    }
    free(m->buckets);
    free(m->name);
    free(m->help);
    free(m);
}

static uint32_t hash_values(const struct vmg_metric *m, const char *const *lv)
{
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < m->nlabels; i++) {
        for (const unsigned char *p = (const unsigned char *)lv[i]; *p; p++) {
            h ^= *p;
            h *= 16777619u;
        }
        h ^= 0xff; /* a separator no UTF-8 string holds */
        h *= 16777619u;
    }
    return h;
}

static int values_equal(const struct vmg_metric *m, char *const *a, const char *const *b)
{
    for (size_t i = 0; i < m->nlabels; i++)
        if (strcmp(a[i], b[i]) != 0)
            return 0;
    return 1;
}

static struct child *find_child(const struct vmg_metric *m, const char *const *lv, uint32_t h)
{
    if (m->tsize == 0)
        return NULL;
    for (struct child *c = m->table[h & (m->tsize - 1)]; c; c = c->hnext)
        if (c->hash == h && values_equal(m, c->values, lv))
            return c;
    return NULL;
}

static int grow_table(struct vmg_metric *m)
{
    size_t nsize = m->tsize ? m->tsize * 2 : 16;
    struct child **nt = calloc(nsize, sizeof(*nt));

    if (!nt)
        return -ENOMEM;
    for (size_t i = 0; i < m->tsize; i++) {
        struct child *c = m->table[i];
        while (c) {
            struct child *next = c->hnext;
            size_t b = c->hash & (nsize - 1);
            c->hnext = nt[b];
            nt[b] = c;
            c = next;
        }
    }
    free(m->table);
    m->table = nt;
    m->tsize = nsize;
    return 0;
}

static void count_dropped(vmg_metrics *reg);

/* get_child finds or makes the child of lv. Returns 0 and *ret, or -EINVAL,
 * -ENOSPC (counted as dropped) or -ENOMEM. */
static int get_child(struct vmg_metric *m, const char *const *lv, struct child **ret)
{
    static const char *const none[1] = {NULL};
    uint32_t h;
    struct child *c;

    if (!valid_values(m, lv))
        return -EINVAL;
    if (m->nlabels == 0)
        lv = none;
    h = hash_values(m, lv);
    c = find_child(m, lv, h);
    if (c) {
        *ret = c;
        return 0;
    }
    if (m->nchildren >= m->reg->max_series) {
        count_dropped(m->reg);
        return -ENOSPC;
    }
    if (m->nchildren + 1 > m->tsize * 3 / 4 && grow_table(m) < 0)
        return -ENOMEM;
    c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->hash = h;
    if (m->nlabels > 0) {
        c->values = calloc(m->nlabels, sizeof(*c->values));
        if (!c->values)
            goto nomem;
        for (size_t i = 0; i < m->nlabels; i++) {
            c->values[i] = strdup(lv[i]);
            if (!c->values[i])
                goto nomem;
        }
    }
    if (m->type == VMG_METRIC_HISTOGRAM) {
        c->counts = calloc(m->nbuckets + 1, sizeof(*c->counts));
        if (!c->counts)
            goto nomem;
    }
    c->hnext = m->table[h & (m->tsize - 1)];
    m->table[h & (m->tsize - 1)] = c;
    m->nchildren++;
    *ret = c;
    return 0;
nomem:
    child_free(c, m->nlabels);
    return -ENOMEM;
}

static void count_dropped(vmg_metrics *reg)
{
    struct child *c;

    if (reg->dropped && get_child(reg->dropped, NULL, &c) == 0)
        c->value += 1;
}

static struct vmg_metric *family_new(vmg_metrics *reg, enum vmg_metric_type type, const char *name,
                                     const char *help, const double *buckets, size_t nbuckets,
                                     size_t nlabels, const char *const *label_names)
{
    struct vmg_metric *m = NULL;
    size_t pos, hn;
    int found;

    if (!reg || !valid_name(name, 1) || !help || nlabels > VMG_METRICS_MAX_LABELS ||
        (nlabels > 0 && !label_names))
        return NULL;
    hn = strnlen(help, VMG_METRICS_MAX_HELP + 1);
    if (hn > VMG_METRICS_MAX_HELP || !valid_utf8(help, hn))
        return NULL;
    for (size_t i = 0; i < nlabels; i++) {
        if (!valid_name(label_names[i], 0))
            return NULL;
        if (type == VMG_METRIC_HISTOGRAM && strcmp(label_names[i], "le") == 0)
            return NULL;
        for (size_t k = 0; k < i; k++)
            if (strcmp(label_names[i], label_names[k]) == 0)
                return NULL;
    }
    if (type == VMG_METRIC_HISTOGRAM) {
        if (nbuckets > 0 && isinf(buckets[nbuckets - 1]) && buckets[nbuckets - 1] > 0)
            nbuckets--;
        if (nbuckets > VMG_METRICS_MAX_BUCKETS || (nbuckets > 0 && !buckets))
            return NULL;
        for (size_t i = 0; i < nbuckets; i++) {
            if (!isfinite(buckets[i]) || (i > 0 && !(buckets[i] > buckets[i - 1])))
                return NULL;
        }
    }
    if (reg->nfams >= VMG_METRICS_MAX_FAMILIES ||
        name_taken(reg, name, type == VMG_METRIC_HISTOGRAM))
        return NULL;

    m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->reg = reg;
    m->type = type;
    m->name = strdup(name);
    m->help = strdup(help);
    if (!m->name || !m->help)
        goto fail;
    if (nlabels > 0) {
        m->labels = calloc(nlabels, sizeof(*m->labels));
        if (!m->labels)
            goto fail;
        m->nlabels = nlabels;
        for (size_t i = 0; i < nlabels; i++) {
            m->labels[i] = strdup(label_names[i]);
            if (!m->labels[i])
                goto fail;
        }
    }
    if (nbuckets > 0) {
        m->buckets = malloc(nbuckets * sizeof(*m->buckets));
        if (!m->buckets)
            goto fail;
        memcpy(m->buckets, buckets, nbuckets * sizeof(*m->buckets));
    }
    m->nbuckets = nbuckets;
    if (grow_table(m) < 0)
        goto fail;
    /* A family without labels has its one series from the start, at 0. */
    if (nlabels == 0) {
        struct child *c;
        if (get_child(m, NULL, &c) < 0)
            goto fail;
    }
    if (reg->nfams == reg->cap) {
        size_t ncap = reg->cap ? reg->cap * 2 : 16;
        struct vmg_metric **nf = realloc(reg->fams, ncap * sizeof(*nf));
        if (!nf)
            goto fail;
        reg->fams = nf;
        reg->cap = ncap;
    }
    pos = find_index(reg, name, &found);
    memmove(reg->fams + pos + 1, reg->fams + pos, (reg->nfams - pos) * sizeof(*reg->fams));
    reg->fams[pos] = m;
    reg->nfams++;
    return m;
fail:
    family_free(m);
    return NULL;
}

struct vmg_metric *vmg_counter_new(vmg_metrics *reg, const char *name, const char *help,
                                   size_t nlabels, const char *const *label_names)
{
    return family_new(reg, VMG_METRIC_COUNTER, name, help, NULL, 0, nlabels, label_names);
}

struct vmg_metric *vmg_gauge_new(vmg_metrics *reg, const char *name, const char *help,
                                 size_t nlabels, const char *const *label_names)
{
    return family_new(reg, VMG_METRIC_GAUGE, name, help, NULL, 0, nlabels, label_names);
}

struct vmg_metric *vmg_histogram_new(vmg_metrics *reg, const char *name, const char *help,
                                     const double *buckets, size_t nbuckets, size_t nlabels,
                                     const char *const *label_names)
{
    return family_new(reg, VMG_METRIC_HISTOGRAM, name, help, buckets, nbuckets, nlabels,
                      label_names);
}

void vmg_metrics_unregister(vmg_metrics *reg, struct vmg_metric *m)
{
    size_t i;
    int found;

    if (!reg || !m || m->reg != reg)
        return;
    i = find_index(reg, m->name, &found);
    if (!found || reg->fams[i] != m)
        return;
    memmove(reg->fams + i, reg->fams + i + 1, (reg->nfams - i - 1) * sizeof(*reg->fams));
    reg->nfams--;
    if (reg->dropped == m)
        reg->dropped = NULL;
    for (size_t k = 0; k < P_COUNT; k++)
        if (reg->proc[k] == m)
            reg->proc[k] = NULL;
    family_free(m);
}

vmg_metrics *vmg_metrics_new(void)
{
    vmg_metrics *reg = calloc(1, sizeof(*reg));

    if (!reg)
        return NULL;
    reg->max_series = VMG_METRICS_MAX_SERIES;
    reg->dropped = vmg_counter_new(
        reg, VMG_METRICS_DROPPED_NAME,
        "Label sets dropped because their metric family held its maximum number of series.", 0,
        NULL);
    if (!reg->dropped) {
        vmg_metrics_free(reg);
        return NULL;
    }
    return reg;
}

void vmg_metrics_free(vmg_metrics *reg)
{
    if (!reg)
        return;
    for (size_t i = 0; i < reg->nfams; i++)
        family_free(reg->fams[i]);
    free(reg->fams);
    free(reg->colls);
    free(reg);
}

void vmg_metrics_set_max_series(vmg_metrics *reg, size_t max)
{
    if (reg)
        reg->max_series = max ? max : 1;
}

/* ---- updates ---- */

static int update(struct vmg_metric *m, int type, const char *const *lv, struct child **ret)
{
    if (!m)
        return -EINVAL;
    if (type >= 0 && (int)m->type != type)
        return -EINVAL;
    return get_child(m, lv, ret);
}

int vmg_counter_add(struct vmg_metric *m, double v, const char *const *label_values)
{
    struct child *c;
    int r;

    if (isnan(v) || v < 0)
        return -EINVAL;
    r = update(m, VMG_METRIC_COUNTER, label_values, &c);
    if (r < 0)
        return r;
    if (c->fn) {
        c->value = c->fn(c->fn_data);
        c->fn = NULL;
        c->fn_data = NULL;
    }
    c->value += v;
    return 0;
}

int vmg_counter_inc(struct vmg_metric *m, const char *const *label_values)
{
    return vmg_counter_add(m, 1, label_values);
}

static int set_value(struct vmg_metric *m, int type, double v, const char *const *lv)
{
    struct child *c;
    int r;

    if (isnan(v))
        return -EINVAL;
    r = update(m, type, lv, &c);
    if (r < 0)
        return r;
    c->fn = NULL;
    c->fn_data = NULL;
    c->value = v;
    return 0;
}

int vmg_counter_set(struct vmg_metric *m, double v, const char *const *label_values)
{
    if (v < 0)
        return -EINVAL;
    return set_value(m, VMG_METRIC_COUNTER, v, label_values);
}

int vmg_gauge_set(struct vmg_metric *m, double v, const char *const *label_values)
{
    return set_value(m, VMG_METRIC_GAUGE, v, label_values);
}

int vmg_gauge_add(struct vmg_metric *m, double v, const char *const *label_values)
{
    struct child *c;
    int r;

    if (isnan(v))
        return -EINVAL;
    r = update(m, VMG_METRIC_GAUGE, label_values, &c);
    if (r < 0)
        return r;
    if (c->fn) {
        c->value = c->fn(c->fn_data);
        c->fn = NULL;
        c->fn_data = NULL;
    }
    c->value += v;
    return 0;
}

int vmg_histogram_observe(struct vmg_metric *m, double v, const char *const *label_values)
{
    struct child *c;
    size_t b = 0;
    int r;

    if (isnan(v))
        return -EINVAL;
    r = update(m, VMG_METRIC_HISTOGRAM, label_values, &c);
    if (r < 0)
        return r;
    while (b < m->nbuckets && v > m->buckets[b])
        b++;
    c->counts[b]++;
    c->count++;
    c->sum += v;
    return 0;
}

int vmg_metric_set_fn(struct vmg_metric *m, const char *const *label_values,
                      double (*fn)(void *data), void *data)
{
    struct child *c;
    int r;

    if (!m || !fn || m->type == VMG_METRIC_HISTOGRAM)
        return -EINVAL;
    r = get_child(m, label_values, &c);
    if (r < 0)
        return r;
    c->fn = fn;
    c->fn_data = data;
    return 0;
}

static int matches(const struct vmg_metric *m, char *const *values, const char *const *pattern)
{
    if (!pattern)
        return 1;
    for (size_t i = 0; i < m->nlabels; i++)
        if (pattern[i] && strcmp(values[i], pattern[i]) != 0)
            return 0;
    return 1;
}

int vmg_metric_remove(struct vmg_metric *m, const char *const *pattern)
{
    int removed = 0;

    if (!m)
        return -EINVAL;
    for (size_t i = 0; i < m->tsize; i++) {
        struct child **pp = &m->table[i];
        while (*pp) {
            struct child *c = *pp;
            if (matches(m, c->values, pattern)) {
                *pp = c->hnext;
                child_free(c, m->nlabels);
                m->nchildren--;
                removed++;
            } else {
                pp = &c->hnext;
            }
        }
    }
    return removed;
}

size_t vmg_metric_series(const struct vmg_metric *m)
{
    return m ? m->nchildren : 0;
}

int vmg_metric_value(const struct vmg_metric *m, const char *const *label_values, double *ret_value)
{
    static const char *const none[1] = {NULL};
    const struct child *c;

    if (!m || !ret_value || !valid_values(m, label_values))
        return -EINVAL;
    if (m->nlabels == 0)
        label_values = none;
    c = find_child(m, label_values, hash_values(m, label_values));
    if (!c)
        return -ENOENT;
    if (m->type == VMG_METRIC_HISTOGRAM)
        *ret_value = (double)c->count;
    else
        *ret_value = c->fn ? c->fn(c->fn_data) : c->value;
    return 0;
}

/* ---- collectors ---- */

int vmg_metrics_add_collector(vmg_metrics *reg, vmg_metrics_collector fn, void *data)
{
    struct collector *nc;

    if (!reg || !fn)
        return -EINVAL;
    for (size_t i = 0; i < reg->ncolls; i++)
        if (reg->colls[i].fn == fn && reg->colls[i].data == data)
            return -EEXIST;
    if (reg->ncolls >= VMG_METRICS_MAX_FAMILIES)
        return -ENOSPC;
    nc = realloc(reg->colls, (reg->ncolls + 1) * sizeof(*nc));
    if (!nc)
        return -ENOMEM;
    reg->colls = nc;
    reg->colls[reg->ncolls].fn = fn;
    reg->colls[reg->ncolls].data = data;
    reg->ncolls++;
    return 0;
}

int vmg_metrics_remove_collector(vmg_metrics *reg, vmg_metrics_collector fn, void *data)
{
    if (!reg)
        return -EINVAL;
    for (size_t i = 0; i < reg->ncolls; i++) {
        if (reg->colls[i].fn == fn && reg->colls[i].data == data) {
            memmove(reg->colls + i, reg->colls + i + 1,
                    (reg->ncolls - i - 1) * sizeof(*reg->colls));
            reg->ncolls--;
            return 0;
        }
    }
    return -ENOENT;
}

/* ---- process metrics ---- */

/* read_small reads a /proc file whole into buf (NUL-terminated). Returns the
 * length or -1. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "re");
    size_t n;

    if (!f)
        return -1;
    n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (ssize_t)n;
}

static int parse_u64(const char *s, unsigned long long *ret)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -EINVAL;
    *ret = v;
    return 0;
}

static double boot_time(void)
{
    char buf[16384];
    const char *p;
    unsigned long long v;

    if (read_small("/proc/stat", buf, sizeof(buf)) < 0)
        return -1;
    p = strstr(buf, "\nbtime ");
    if (!p || parse_u64(p + 7, &v) < 0)
        return -1;
    return (double)v;
}

static void process_stat(vmg_metrics *reg)
{
    char buf[4096];
    const char *tok[24];
    size_t ntok = 0;
    char *p, *save = NULL;
    unsigned long long utime, stime, start, vsize, rss;
    long ticks = sysconf(_SC_CLK_TCK);
    long page = sysconf(_SC_PAGESIZE);
    double btime;

    if (ticks <= 0 || page <= 0 || read_small("/proc/self/stat", buf, sizeof(buf)) < 0)
        return;
    /* The command name, in parentheses, may hold spaces: fields start after
     * the last ')'. tok[k] is field k + 3 of proc(5). */
    p = strrchr(buf, ')');
    if (!p)
        return;
    for (char *t = strtok_r(p + 1, " \n", &save); t && ntok < 24; t = strtok_r(NULL, " \n", &save))
        tok[ntok++] = t;
    if (ntok < 22 || parse_u64(tok[11], &utime) < 0 || parse_u64(tok[12], &stime) < 0 ||
        parse_u64(tok[19], &start) < 0 || parse_u64(tok[20], &vsize) < 0 ||
        parse_u64(tok[21], &rss) < 0)
        return;
    vmg_counter_set(reg->proc[P_CPU], (double)(utime + stime) / (double)ticks, NULL);
    vmg_gauge_set(reg->proc[P_VMEM], (double)vsize, NULL);
    vmg_gauge_set(reg->proc[P_RSS], (double)rss * (double)page, NULL);
    btime = boot_time();
    if (btime >= 0)
        vmg_gauge_set(reg->proc[P_START], btime + (double)start / (double)ticks, NULL);
}

static void process_fds(vmg_metrics *reg)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    double n = 0;
    struct rlimit rl;

    if (d) {
        while ((e = readdir(d)) != NULL)
            if (e->d_name[0] != '.')
                n++;
        closedir(d);
        vmg_gauge_set(reg->proc[P_OPEN_FDS], n, NULL);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        vmg_gauge_set(reg->proc[P_MAX_FDS], (double)rl.rlim_cur, NULL);
}

static void process_collect(void *data, vmg_metrics *reg)
{
    (void)data;
    process_stat(reg);
    process_fds(reg);
}

int vmg_metrics_add_process(vmg_metrics *reg)
{
    static const struct {
        const char *name;
        const char *help;
        int counter;
    } defs[P_COUNT] = {
        [P_CPU] = {"process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                   1},
        [P_OPEN_FDS] = {"process_open_fds", "Number of open file descriptors.", 0},
        [P_MAX_FDS] = {"process_max_fds", "Maximum number of open file descriptors.", 0},
        [P_VMEM] = {"process_virtual_memory_bytes", "Virtual memory size in bytes.", 0},
        [P_RSS] = {"process_resident_memory_bytes", "Resident memory size in bytes.", 0},
        [P_START] = {"process_start_time_seconds",
                     "Start time of the process since unix epoch in seconds.", 0},
    };
    int r;

    if (!reg)
        return -EINVAL;
    if (reg->process)
        return -EEXIST;
    for (size_t i = 0; i < P_COUNT; i++)
        if (find_family(reg, defs[i].name))
            return -EEXIST;
    for (size_t i = 0; i < P_COUNT; i++) {
        reg->proc[i] = defs[i].counter ? vmg_counter_new(reg, defs[i].name, defs[i].help, 0, NULL)
                                       : vmg_gauge_new(reg, defs[i].name, defs[i].help, 0, NULL);
        if (!reg->proc[i]) {
            r = -ENOMEM;
            goto fail;
        }
    }
    r = vmg_metrics_add_collector(reg, process_collect, NULL);
    if (r < 0)
        goto fail;
    reg->process = 1;
    return 0;
fail:
    for (size_t i = 0; i < P_COUNT; i++)
        vmg_metrics_unregister(reg, reg->proc[i]);
    return r;
}

/* ---- exposition ---- */

/* sb_escaped appends s with backslash, newline and (when quote) the double
 * quote escaped, as label values and (without quote) help texts need. */
static void sb_escaped(struct vmg_buf *b, const char *s, int quote)
{
    const char *run = s;

    for (; *s; s++) {
        const char *esc = NULL;
        if (*s == '\\')
            esc = "\\\\";
        else if (*s == '\n')
            esc = "\\n";
        else if (quote && *s == '"')
            esc = "\\\"";
        if (esc) {
            vmg_buf_append(b, run, (size_t)(s - run));
            vmg_buf_append_str(b, esc);
            run = s + 1;
        }
    }
    vmg_buf_append(b, run, (size_t)(s - run));
}

/* fmt_double writes v the shortest way that reads back exactly. */
static void fmt_double(char *buf, size_t size, double v)
{
    if (isnan(v)) {
        snprintf(buf, size, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, size, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    if (v == 0) {
        snprintf(buf, size, "0");
        return;
    }
    if (v == trunc(v) && fabs(v) < 1e15) {
        snprintf(buf, size, "%.0f", v);
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

static void sb_double(struct vmg_buf *b, double v)
{
    char buf[40];
    fmt_double(buf, sizeof(buf), v);
    vmg_buf_append_str(b, buf);
}

static void sb_u64(struct vmg_buf *b, uint64_t v)
{
    vmg_buf_append_fmt(b, "%" PRIu64, v);
}

/* sb_labels writes {a="x",b="y"[,le="..."]}, or nothing when empty. */
static void sb_labels(struct vmg_buf *b, const struct vmg_metric *m, const struct child *c,
                      const char *le)
{
    int any = 0;

    if (m->nlabels == 0 && !le)
        return;
    vmg_buf_append_str(b, "{");
    for (size_t i = 0; i < m->nlabels; i++) {
        if (any)
            vmg_buf_append_str(b, ",");
        vmg_buf_append_str(b, m->labels[i]);
        vmg_buf_append_str(b, "=\"");
        sb_escaped(b, c->values[i], 1);
        vmg_buf_append_str(b, "\"");
        any = 1;
    }
    if (le) {
        if (any)
            vmg_buf_append_str(b, ",");
        vmg_buf_append_str(b, "le=\"");
        vmg_buf_append_str(b, le);
        vmg_buf_append_str(b, "\"");
    }
    vmg_buf_append_str(b, "}");
}

static int cmp_children(const void *a, const void *b, void *arg)
{
    const struct child *x = *(const struct child *const *)a;
    const struct child *y = *(const struct child *const *)b;
    const struct vmg_metric *m = arg;

    for (size_t i = 0; i < m->nlabels; i++) {
        int c = strcmp(x->values[i], y->values[i]);
        if (c)
            return c;
    }
    return 0;
}

static void render_child(struct vmg_buf *b, const struct vmg_metric *m, const struct child *c)
{
    if (m->type != VMG_METRIC_HISTOGRAM) {
        vmg_buf_append_str(b, m->name);
        sb_labels(b, m, c, NULL);
        vmg_buf_append_str(b, " ");
        sb_double(b, c->fn ? c->fn(c->fn_data) : c->value);
        vmg_buf_append_str(b, "\n");
        return;
    }
    uint64_t cum = 0;
    for (size_t i = 0; i <= m->nbuckets; i++) {
        char le[40];
        if (i < m->nbuckets)
            fmt_double(le, sizeof(le), m->buckets[i]);
        else
            snprintf(le, sizeof(le), "+Inf");
        cum += c->counts[i];
        vmg_buf_append_str(b, m->name);
        vmg_buf_append_str(b, "_bucket");
        sb_labels(b, m, c, le);
        vmg_buf_append_str(b, " ");
        sb_u64(b, cum);
        vmg_buf_append_str(b, "\n");
    }
    vmg_buf_append_str(b, m->name);
    vmg_buf_append_str(b, "_sum");
    sb_labels(b, m, c, NULL);
    vmg_buf_append_str(b, " ");
    sb_double(b, c->sum);
    vmg_buf_append_str(b, "\n");
    vmg_buf_append_str(b, m->name);
    vmg_buf_append_str(b, "_count");
    sb_labels(b, m, c, NULL);
    vmg_buf_append_str(b, " ");
    sb_u64(b, c->count);
    vmg_buf_append_str(b, "\n");
}

static int render_family(struct vmg_buf *b, const struct vmg_metric *m)
{
    static const char *const types[] = {"counter", "gauge", "histogram"};
    struct child **list;
    size_t n = 0;

    if (m->nchildren == 0)
        return 0;
    list = malloc(m->nchildren * sizeof(*list));
    if (!list)
        return -ENOMEM;
    for (size_t i = 0; i < m->tsize; i++)
        for (struct child *c = m->table[i]; c; c = c->hnext)
            list[n++] = c;
    qsort_r(list, n, sizeof(*list), cmp_children, (void *)m);

    vmg_buf_append_str(b, "# HELP ");
    vmg_buf_append_str(b, m->name);
    vmg_buf_append_str(b, " ");
    sb_escaped(b, m->help, 0);
    vmg_buf_append_str(b, "\n# TYPE ");
    vmg_buf_append_str(b, m->name);
    vmg_buf_append_str(b, " ");
    vmg_buf_append_str(b, types[m->type]);
    vmg_buf_append_str(b, "\n");
    for (size_t i = 0; i < n; i++)
        render_child(b, m, list[i]);
    free(list);
    return 0;
}

int vmg_metrics_render(vmg_metrics *reg, char **ret_buf, size_t *ret_len)
{
    struct vmg_buf b;
    int r = 0;

    if (!reg || !ret_buf || !ret_len)
        return -EINVAL;
    vmg_buf_init(&b, VMG_METRICS_MAX_RENDER, 0);
    for (size_t i = 0; i < reg->ncolls; i++)
        reg->colls[i].fn(reg->colls[i].data, reg);
    for (size_t i = 0; i < reg->nfams && r == 0; i++) {
        r = render_family(&b, reg->fams[i]);
        if (r == 0)
            r = vmg_buf_err(&b);
    }
    /* An empty exposition is "". */
    if (r == 0 && (*ret_buf = vmg_buf_steal(&b, ret_len)) == NULL)
        r = -ENOMEM;
    vmg_buf_free(&b);
    return r;
}
