/* tests/bench/status_kib.h: one "Name: N kB" line of /proc/self/status,
 * for the benchmark programs that report their own memory. */
#ifndef VMG_BENCH_STATUS_KIB_H
#define VMG_BENCH_STATUS_KIB_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* status_kib gives the value of the line NAME (VmRSS, RssAnon, ...) in
 * KiB, or -1 when it cannot be read. */
static inline long status_kib(const char *name)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t n = strlen(name);
    long v = -1;

    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, name, n) == 0 && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

#endif
