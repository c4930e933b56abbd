/* clock.c: the real clocks. */
#include "lib/clock.h"

#include <stdio.h>
#include <time.h>

#include <uv.h>

uint64_t vmg_clock_mono_ms(void *data)
{
    (void)data;
    return uv_hrtime() / 1000000u;
}

int64_t vmg_clock_wall_us(void *data)
{
    struct timespec ts;

    (void)data;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void vmg_rfc3339(int64_t wall_us, char *buf, size_t len)
{
    struct tm tm;
    time_t secs = (time_t)(wall_us / 1000000);

    if (wall_us < 0 || !gmtime_r(&secs, &tm)) {
        snprintf(buf, len, "1970-01-01T00:00:00Z");
        return;
    }
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}
