/* fixture.c: reading whole files for the unit tests (see unit.h). */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *unit_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    if (!f)
        fail_msg("cannot open %s: %s", path, strerror(errno));
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

char *unit_fixture(const char *dir, const char *name, size_t *len)
{
    char path[512];
    size_t n;
    char *buf;

    assert_true((size_t)snprintf(path, sizeof(path), UNIT_FIXTURES "%s/%s", dir, name) <
                sizeof(path));
    buf = unit_read_file(path, &n);
    if (n == 0)
        fail_msg("fixture %s is empty", path);
    if (len)
        *len = n;
    return buf;
}
