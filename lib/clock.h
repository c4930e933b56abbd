/* clock.h: the clocks that components take by default. Each component
 * takes its clock as a function and a data pointer, so that unit tests
 * can drive time; these are the real ones (data is unused). */
#ifndef VMG_CLOCK_H
#define VMG_CLOCK_H

#include <stdint.h>

/* vmg_clock_mono_ms: monotonic milliseconds, for timeouts and intervals. */
uint64_t vmg_clock_mono_ms(void *data);
/* vmg_clock_wall_us: microseconds since the epoch, for timestamps. */
int64_t vmg_clock_wall_us(void *data);

#endif
