/* clock.c: the real clocks. */
#include "lib/clock.h"

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
