/* log.c: one JSON object a line, bounded, escaped and with secrets redacted.
 *
 * A line is assembled in a fixed buffer by escaping each string straight
 * into it; redaction happens in the same pass, on the raw text, so that a
 * secret is caught whatever escaping would make of it. The buffer keeps room
 * for the truncation marker and the closing of the object, so a cut line is
 * still one valid JSON object.
 */
#include "lib/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REDACTED "[REDACTED]"
#define CUT_MARK "...[truncated]"
#define TRUNC_FIELD ",\"truncated\":true"
/* Room kept at the end of a line: the cut mark, the quote closing the cut
 * string, the truncated field, "}" and "\n". */
#define LINE_RESERVE (sizeof(CUT_MARK) - 1 + 1 + sizeof(TRUNC_FIELD) - 1 + 2)
/* A formatted message is cut at this size before it is escaped; escaping and
 * the line bound cut it further. */
#define MSG_MAX (2 * VMG_LOG_LINE_MAX)
#define MAX_KV 32

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int log_fd = 2;
static atomic_int log_verbosity = 0;

/* The secrets, guarded by log_mu. */
static char *secrets[VMG_LOG_MAX_SECRETS];
static size_t secret_lens[VMG_LOG_MAX_SECRETS];
static size_t nsecrets;

void vmg_log_setup(int verbosity, int fd)
{
    atomic_store(&log_verbosity, verbosity < 0 ? 0 : verbosity);
    atomic_store(&log_fd, fd < 0 ? 2 : fd);
}

int vmg_log_enabled(int level)
{
    if (level <= VMG_LOG_INFO)
        return 1;
    return level - VMG_LOG_INFO <= atomic_load(&log_verbosity);
}

int vmg_log_add_secret(const char *s)
{
    size_t n;
    char *copy;
    int r = 0;

    if (!s)
        return -EINVAL;
    n = strnlen(s, VMG_LOG_SECRET_MAX + 1);
    if (n < VMG_LOG_SECRET_MIN || n > VMG_LOG_SECRET_MAX)
        return -EINVAL;
    pthread_mutex_lock(&log_mu);
    for (size_t i = 0; i < nsecrets; i++)
        if (secret_lens[i] == n && memcmp(secrets[i], s, n) == 0)
            goto out;
    if (nsecrets == VMG_LOG_MAX_SECRETS) {
        r = -ENOSPC;
        goto out;
    }
    copy = malloc(n + 1);
    if (!copy) {
        r = -ENOMEM;
        goto out;
    }
    memcpy(copy, s, n + 1);
    secrets[nsecrets] = copy;
    secret_lens[nsecrets] = n;
    nsecrets++;
out:
    pthread_mutex_unlock(&log_mu);
    return r;
}

void vmg_log_clear_secrets(void)
{
    pthread_mutex_lock(&log_mu);
    for (size_t i = 0; i < nsecrets; i++) {
        /* Wipe the copy before giving the memory back. */
        memset(secrets[i], 0, secret_lens[i]);
        free(secrets[i]);
        secrets[i] = NULL;
        secret_lens[i] = 0;
    }
    nsecrets = 0;
    pthread_mutex_unlock(&log_mu);
}

/* secret_at returns the length of raw text to hide at s[0..n), 0 when no
 * secret starts there. The longest match wins. When cut is set, the text
 * was cut at n, so a secret's prefix that reaches the cut counts as the
 * secret: its rest is lost, and its beginning must not show. Call with
 * log_mu held. */
static size_t secret_at(const char *s, size_t n, bool cut)
{
    size_t best = 0;

    for (size_t i = 0; i < nsecrets; i++) {
        size_t len = secret_lens[i];

        if (len <= best || secrets[i][0] != s[0])
            continue;
        if (len <= n) {
            if (memcmp(s, secrets[i], len) == 0)
                best = len;
        } else if (cut && memcmp(s, secrets[i], n) == 0) {
            best = n;
        }
    }
    return best;
}

/* A line under construction. cap is where content must stop; the bytes
 * from cap to the end of buf are LINE_RESERVE. */
struct line {
    char buf[VMG_LOG_LINE_MAX];
    size_t len;
    size_t cap;
    bool truncated;
};

/* put appends n bytes if they fit below cap; otherwise it marks the line
 * truncated and appends nothing. Returns false when it did not append. */
static bool put(struct line *l, const char *s, size_t n)
{
    if (l->truncated)
        return false;
    if (n > l->cap - l->len) {
        l->truncated = true;
        return false;
    }
    memcpy(l->buf + l->len, s, n);
    l->len += n;
    return true;
}

/* put_reserved appends into the reserved room, for the marks that end a
 * line; the reserve is sized for them. */
static void put_reserved(struct line *l, const char *s)
{
    size_t n = strlen(s);

    if (n > sizeof(l->buf) - l->len)
        n = sizeof(l->buf) - l->len;
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

/* utf8_len returns the length of the valid UTF-8 sequence that starts
 * s[0..n), or 0 when the bytes there are not one (overlong forms, encoded
 * surrogates and values above U+10FFFF are not). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

/* put_escaped appends the JSON string body of s[0..n) (without quotes),
 * replacing secrets and invalid UTF-8, stopping at a character boundary when
 * the line is full. cut tells that s was cut from a longer text. */
static bool put_escaped(struct line *l, const char *s, size_t n, bool cut)
{
    static const char hex[] = "0123456789abcdef";
    size_t i = 0;

    while (i < n) {
        const unsigned char c = (unsigned char)s[i];
        char tmp[8];
        const char *out = tmp;
        size_t outlen, adv = 1, hide;

        hide = nsecrets ? secret_at(s + i, n - i, cut) : 0;
        if (hide) {
            out = REDACTED;
            outlen = sizeof(REDACTED) - 1;
            adv = hide;
        } else if (c == '"' || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            outlen = 2;
        } else if (c == '\n' || c == '\r' || c == '\t') {
            tmp[0] = '\\';
            tmp[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
            outlen = 2;
        } else if (c < 0x20 || c == 0x7f) {
            memcpy(tmp, "\\u00", 4);
            tmp[4] = hex[c >> 4];
            tmp[5] = hex[c & 0xf];
            outlen = 6;
        } else {
            adv = utf8_len((const unsigned char *)s + i, n - i);
            if (adv) {
                out = s + i;
                outlen = adv;
            } else {
                out = "\xef\xbf\xbd"; /* U+FFFD for a byte that is not UTF-8 */
                outlen = 3;
                adv = 1;
            }
        }
        if (!put(l, out, outlen))
            return false;
        i += adv;
    }
    return true;
}

/* put_string appends a quoted JSON string; a string cut by the line bound
 * ends with CUT_MARK. */
static void put_string(struct line *l, const char *s, size_t n, bool cut)
{
    if (!put(l, "\"", 1))
        return;
    if (!put_escaped(l, s, n, cut))
        put_reserved(l, CUT_MARK);
    put_reserved(l, "\"");
}

/* put_field appends ,"key":"value" (or ,"key":null). A field whose key does
 * not fit is left out whole; a value that does not fit is cut. */
static void put_field(struct line *l, const char *key, const char *prefix, const char *val,
                      size_t vlen, bool cut)
{
    size_t start = l->len;

    if (l->truncated)
        return;
    if (!put(l, ",\"", 2) || !put(l, prefix, strlen(prefix)) ||
        !put_escaped(l, key, strlen(key), false) || !put(l, "\":", 2)) {
        l->len = start;
        return;
    }
    if (!val) {
        if (!put(l, "null", 4))
            l->len = start;
        return;
    }
    /* Keep the field only if at least its quotes and something of its value
     * fit; otherwise a dangling key would remain. */
    if (l->cap - l->len < 3) {
        l->len = start;
        l->truncated = true;
        return;
    }
    put_string(l, val, vlen, cut);
}

static const char *level_name(int level)
{
    switch (level) {
    case VMG_LOG_ERROR:
        return "error";
    case VMG_LOG_WARN:
        return "warn";
    case VMG_LOG_INFO:
        return "info";
    default:
        return "debug";
    }
}

/* is_reserved tells whether key is one of the fields every line has. */
static bool is_reserved(const char *key)
{
    static const char *const names[] = {"ts",   "level", "logger",    "msg",
                                        "name", "v",     "namespace", "truncated"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(key, names[i]) == 0)
            return true;
    return false;
}

static void write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);

        if (w < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        buf += w;
        n -= (size_t)w;
    }
}

/* emit assembles and writes one line. kv holds nkv key/value pairs. Call
 * with log_mu held. */
static void emit(struct line *l, int level, const char *logger, const char *ns, const char *name,
                 const char *msg, size_t msglen, bool msgcut, const char *const *kv, size_t nkv)
{
    struct timespec now;
    struct tm tm;
    char ts[64];
    int n;

    if (level < VMG_LOG_ERROR)
        level = VMG_LOG_ERROR;
    l->len = 0;
    l->cap = sizeof(l->buf) - LINE_RESERVE;
    l->truncated = false;

    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    n = (int)strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof(ts) - (size_t)n, ".%03ldZ", now.tv_nsec / 1000000L);

    put(l, "{\"ts\":\"", 7);
    put(l, ts, strlen(ts));
    put(l, "\",\"level\":\"", 11);
    put(l, level_name(level), strlen(level_name(level)));
    put(l, "\"", 1);
    if (level >= VMG_LOG_DEBUG) {
        char v[32];

        n = snprintf(v, sizeof(v), ",\"v\":%d", level - VMG_LOG_INFO);
        put(l, v, (size_t)n);
    }
    if (logger)
        put_field(l, "logger", "", logger, strlen(logger), false);
    if (ns)
        put_field(l, "namespace", "", ns, strlen(ns), false);
    if (name)
        put_field(l, "name", "", name, strlen(name), false);
    put_field(l, "msg", "", msg, msglen, msgcut);
    for (size_t i = 0; i < nkv; i++) {
        const char *k = kv[2 * i], *v = kv[2 * i + 1];

        put_field(l, k, is_reserved(k) ? "_" : "", v, v ? strlen(v) : 0, false);
    }
    if (l->truncated)
        put_reserved(l, TRUNC_FIELD);
    put_reserved(l, "}\n");
    write_all(atomic_load(&log_fd), l->buf, l->len);
}

void vmg_logf(int level, const char *logger, const char *ns, const char *name, const char *fmt, ...)
{
    struct line l;
    char msg[MSG_MAX];
    va_list ap;
    int n;
    size_t len;

    if (!vmg_log_enabled(level))
        return;
    if (fmt) {
        va_start(ap, fmt);
        n = vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
    } else {
        msg[0] = '\0';
        n = 0;
    }
    if (n < 0) {
        msg[0] = '\0';
        n = 0;
    }
    len = (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1;
    pthread_mutex_lock(&log_mu);
    emit(&l, level, logger, ns, name, msg, len, (size_t)n >= sizeof(msg), NULL, 0);
    pthread_mutex_unlock(&log_mu);
}

void vmg_log_kv(int level, const char *logger, const char *ns, const char *name, const char *msg,
                ...)
{
    struct line l;
    const char *kv[2 * MAX_KV];
    size_t nkv = 0;
    const char *k;
    va_list ap;

    if (!vmg_log_enabled(level))
        return;
    if (!msg)
        msg = "";
    va_start(ap, msg);
    while ((k = va_arg(ap, const char *)) != NULL) {
        const char *v = va_arg(ap, const char *);

        if (nkv < MAX_KV) {
            kv[2 * nkv] = k;
            kv[2 * nkv + 1] = v;
            nkv++;
        }
    }
    va_end(ap);
    pthread_mutex_lock(&log_mu);
    emit(&l, level, logger, ns, name, msg, strlen(msg), false, kv, nkv);
    pthread_mutex_unlock(&log_mu);
}

size_t vmg_log_redact(char *dst, size_t dstsize, const char *src)
{
    size_t n, i = 0, len = 0;

    if (!dst || dstsize == 0)
        return 0;
    if (!src)
        src = "";
    n = strlen(src);
    pthread_mutex_lock(&log_mu);
    while (i < n) {
        size_t hide = nsecrets ? secret_at(src + i, n - i, false) : 0;
        const char *out = hide ? REDACTED : src + i;
        size_t outlen = hide ? sizeof(REDACTED) - 1 : 1;

        if (outlen > dstsize - 1 - len)
            break;
        memcpy(dst + len, out, outlen);
        len += outlen;
        i += hide ? hide : 1;
    }
    pthread_mutex_unlock(&log_mu);
    dst[len] = '\0';
    return len;
}
