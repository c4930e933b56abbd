/* str.c: small string helpers. */
#include "lib/str.h"

#include <stdio.h>
#include <string.h>

void vmg_vputf(char *buf, size_t size, const char *fmt, va_list ap)
{
    if (!buf || size == 0)
        return;
    vsnprintf(buf, size, fmt, ap);
}

void vmg_putf(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vmg_vputf(buf, size, fmt, ap);
    va_end(ap);
}

bool vmg_streq(const char *a, const char *b)
{
    return strcmp(vmg_nz(a), vmg_nz(b)) == 0;
}
