/* log.h: the operator's structured logging: one JSON object a line.
 *
 * Every line is a JSON object with "ts" (RFC 3339, UTC, milliseconds),
 * "level" ("error", "warn", "info" or "debug"), "logger", "msg", and
 * "namespace"/"name" when the line concerns one object; debug lines carry
 * their verbosity as "v". Extra string fields can be added with vmg_log_kv().
 *
 * A line is written with one write() call, is at most VMG_LOG_LINE_MAX bytes
 * (longer ones are cut, marked "...[truncated]" inside the cut string and
 * "truncated": true), and is always valid JSON: control characters are
 * escaped and invalid UTF-8 becomes U+FFFD.
 *
 * Secrets registered with vmg_log_add_secret() never reach the output: any
 * occurrence, in the message or in any field, becomes "[REDACTED]".
 *
 * The module keeps process-wide state (the fd, the verbosity, the secrets)
 * behind a mutex, so any thread may log. Unlike other library code, this
 * module is where logging happens; it reports nothing back (a failed write
 * is dropped).
 */
#ifndef VMG_LOG_H
#define VMG_LOG_H

#include <stddef.h>

/* Levels, most severe first. VMG_LOG_V(n) is verbosity n: V(0) is info,
 * V(1) is VMG_LOG_DEBUG, and so on; a debug line is written only when its
 * verbosity is at most the one given to vmg_log_setup(). */
enum {
    VMG_LOG_ERROR = 0,
    VMG_LOG_WARN = 1,
    VMG_LOG_INFO = 2,
    VMG_LOG_DEBUG = 3,
};
#define VMG_LOG_V(n) (VMG_LOG_INFO + (n))

/* Upper bound of one line, newline included. */
#define VMG_LOG_LINE_MAX 16384
/* Bounds of the secret registry. */
#define VMG_LOG_MAX_SECRETS 32
#define VMG_LOG_SECRET_MIN 4
#define VMG_LOG_SECRET_MAX 8192

/* vmg_log_setup sets the verbosity (negative counts as 0) and the file
 * descriptor lines go to (negative means 2, stderr; the fd is not owned).
 * Defaults: verbosity 0, fd 2. */
void vmg_log_setup(int verbosity, int fd);

/* vmg_log_enabled tells whether a line of level would be written, so that a
 * caller can skip costly preparation of a debug message. */
int vmg_log_enabled(int level);

/* vmg_logf writes one line. logger names the component ("informer",
 * "vsphere.session"); ns and name, when not NULL, name the object the line
 * is about. Any of logger, ns, name may be NULL. */
void vmg_logf(int level, const char *logger, const char *ns, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* vmg_log_kv writes one line with the message msg (not a format) followed by
 * string fields given as key, value pairs and ended by NULL, e.g.
 *   vmg_log_kv(VMG_LOG_INFO, "executor", ns, name, "clone started",
 *              "vm", vm_name, "task", task_id, NULL);
 * A NULL value is written as JSON null. A key that would repeat a standard
 * field ("ts", "level", "msg", ...) is written with a leading "_". At most
 * 32 pairs are used. */
void vmg_log_kv(int level, const char *logger, const char *ns, const char *name, const char *msg,
                ...) __attribute__((sentinel));

/* vmg_log_add_secret registers s (copied) as a value that must never be
 * written. Returns 0, also when s is already registered; -EINVAL when s is
 * NULL, shorter than VMG_LOG_SECRET_MIN bytes (too short to mask without
 * masking everything) or longer than VMG_LOG_SECRET_MAX; -ENOSPC when
 * VMG_LOG_MAX_SECRETS are registered; -ENOMEM. */
int vmg_log_add_secret(const char *s);

/* vmg_log_clear_secrets forgets every registered secret (for tests, and for
 * releasing the memory at exit). */
void vmg_log_clear_secrets(void);

/* vmg_log_redact copies src to dst (dstsize bytes, NUL-terminated, cut if
 * needed) with every registered secret replaced by "[REDACTED]", for text
 * that leaves the process by another path (events, status messages).
 * Returns the length written. */
size_t vmg_log_redact(char *dst, size_t dstsize, const char *src);

#define vmg_error(logger, ns, name, ...) vmg_logf(VMG_LOG_ERROR, logger, ns, name, __VA_ARGS__)
#define vmg_warn(logger, ns, name, ...) vmg_logf(VMG_LOG_WARN, logger, ns, name, __VA_ARGS__)
#define vmg_info(logger, ns, name, ...) vmg_logf(VMG_LOG_INFO, logger, ns, name, __VA_ARGS__)
/* vmg_log_v(n, ...) logs at verbosity n (see VMG_LOG_V); vmg_debug is
 * vmg_log_v(1, ...). Both are statements that skip evaluating their
 * arguments when the line would not be written. */
#define vmg_log_v(n, logger, ns, name, ...)                                                        \
    do {                                                                                           \
        if (vmg_log_enabled(VMG_LOG_V(n)))                                                         \
            vmg_logf(VMG_LOG_V(n), logger, ns, name, __VA_ARGS__);                                 \
    } while (0)
#define vmg_debug(logger, ns, name, ...) vmg_log_v(1, logger, ns, name, __VA_ARGS__)

#endif
