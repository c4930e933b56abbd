/* clock.h: the clocks that components take by default. Each component
 * takes its clock as a function and a data pointer, so that unit tests
 * can drive time; these are the real ones (data is unused). */
#ifndef VMG_CLOCK_H
#define VMG_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* vmg_clock_mono_ms: monotonic milliseconds, for timeouts and intervals. */
uint64_t vmg_clock_mono_ms(void *data);
/* vmg_clock_wall_us: microseconds since the epoch, for timestamps. */
int64_t vmg_clock_wall_us(void *data);

/* vmg_rfc3339 writes wall_us (microseconds since the epoch) as RFC 3339 in
 * whole seconds, UTC, as metav1.Time is written: "2026-11-22T08:00:00Z".
 * A time before the epoch is written as the epoch. */
void vmg_rfc3339(int64_t wall_us, char *buf, size_t len);

#endif
