/* buf.h: a bounded growable byte buffer, the project's one (as curl's
 * dynbuf): its most bytes are set when it is made, it is kept
 * NUL-terminated, and a failure is remembered.
 *
 * A buffer made with VMG_BUF_WIPE holds secrets (tokens, passwords, request
 * bytes): every byte it gave back to the allocator was wiped first, when
 * it grows (it moves to a new block rather than realloc, which could leave
 * a copy behind), when it is reset and when it is freed.
 *
 * Errors are sticky: after a failed call (VMG_ETOOBIG past the bound,
 * -ENOMEM), every call that adds returns the same error and changes
 * nothing, so that a writer may append many pieces and check once, with
 * vmg_buf_err(). The content before the failure stays until reset or
 * freed. */
#ifndef VMG_BUF_H
#define VMG_BUF_H

#include <stdarg.h>
#include <stddef.h>

#define VMG_BUF_WIPE 1u /* flag: the buffer holds secrets */

struct vmg_buf {
    char *data;     /* NULL until the first byte; then data[len] == '\0' */
    size_t len;     /* bytes held, without the NUL */
    size_t alloc;   /* bytes allocated at data */
    size_t max;     /* the most bytes held, without the NUL */
    int err;        /* the first failure, or 0 */
    unsigned flags; /* VMG_BUF_* */
};

/* vmg_buf_init makes b empty, holding at most max bytes (max is below
 * SIZE_MAX / 2; larger is cut to that). Nothing is allocated yet. */
void vmg_buf_init(struct vmg_buf *b, size_t max, unsigned flags);

/* vmg_buf_reserve makes room for n more bytes (and the NUL) so that the
 * next appends of up to n bytes do not allocate. 0, VMG_ETOOBIG when
 * len + n is above max, or -ENOMEM; either failure is sticky. */
int vmg_buf_reserve(struct vmg_buf *b, size_t n);

/* vmg_buf_append adds p[0..n); vmg_buf_append_str adds s; vmg_buf_append_fmt
 * adds what printf would write. 0 or the (sticky) error; a failed call adds
 * nothing. p must not point into b itself (growing may move it). */
int vmg_buf_append(struct vmg_buf *b, const void *p, size_t n);
int vmg_buf_append_str(struct vmg_buf *b, const char *s);
int vmg_buf_append_fmt(struct vmg_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int vmg_buf_append_vfmt(struct vmg_buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* vmg_buf_prepare returns where up to *ret_room bytes may be written in
 * place (read(2) into it), then vmg_buf_commit(b, n) adds the n written.
 * It grows the buffer as appends do, aiming at room for want bytes
 * (want 0: any); *ret_room is at least 1 and at most max - len. Returns
 * NULL with the (sticky) error when len is max already (VMG_ETOOBIG) or
 * memory is short. With VMG_BUF_WIPE, bytes written there and not
 * committed are the caller's to wipe. */
char *vmg_buf_prepare(struct vmg_buf *b, size_t want, size_t *ret_room);
/* vmg_buf_commit adds n bytes written at what vmg_buf_prepare returned
 * (n at most the room it gave). */
void vmg_buf_commit(struct vmg_buf *b, size_t n);

/* vmg_buf_str returns the content, NUL-terminated; "" while empty. */
const char *vmg_buf_str(const struct vmg_buf *b);
/* vmg_buf_len returns how many bytes b holds. */
size_t vmg_buf_len(const struct vmg_buf *b);
/* vmg_buf_err returns the sticky error, or 0. */
int vmg_buf_err(const struct vmg_buf *b);

/* vmg_buf_truncate cuts b to its first len bytes (no-op when it holds no
 * more); the cut bytes are wiped with VMG_BUF_WIPE. The error stays. */
void vmg_buf_truncate(struct vmg_buf *b, size_t len);
/* vmg_buf_reset empties b and forgets its error; memory is kept for
 * reuse (the old bytes wiped with VMG_BUF_WIPE). */
void vmg_buf_reset(struct vmg_buf *b);
/* vmg_buf_free gives the memory back (wiped with VMG_BUF_WIPE) and leaves
 * b empty, with no error, ready for reuse with the same max and flags.
 * NULL is fine. */
void vmg_buf_free(struct vmg_buf *b);

/* vmg_buf_steal hands the content to the caller: a NUL-terminated string
 * from malloc ("" when empty), its length to *ret_len when not NULL. b is
 * left empty, as after vmg_buf_free. NULL (and b untouched) on -ENOMEM or
 * when b has an error. A caller of a VMG_BUF_WIPE buffer wipes len + 1
 * bytes before freeing it: no byte of the secret lies beyond. */
char *vmg_buf_steal(struct vmg_buf *b, size_t *ret_len);

/* vmg_wipe overwrites p[0..n) with zeros in a way the compiler keeps;
 * vmg_wipe_free wipes then frees (p NULL is fine). */
void vmg_wipe(void *p, size_t n);
void vmg_wipe_free(void *p, size_t n);

/* For tests: hook(p, n, data) is called with every block a buffer is about
 * to free (after it is wiped, with VMG_BUF_WIPE) and its size; NULL turns
 * it off. Not thread-safe; never set outside tests. */
void vmg_buf_testing_hook(void (*hook)(const void *p, size_t n, void *data), void *data);

#endif
