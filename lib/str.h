/* str.h: small string helpers that every part of the project uses. */
#ifndef VMG_STR_H
#define VMG_STR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* vmg_putf formats into buf, of size bytes, and cuts what does not fit:
 * messages, names and paths live in bounded buffers on purpose. Nothing
 * is written when buf is NULL or size is 0. */
void vmg_putf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void vmg_vputf(char *buf, size_t size, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* vmg_nz returns s, or "" for NULL. */
static inline const char *vmg_nz(const char *s)
{
    return s ? s : "";
}

/* vmg_streq tells whether a and b hold the same string, NULL being "". */
bool vmg_streq(const char *a, const char *b);

#endif
