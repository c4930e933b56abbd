/* jsonbound.h: how many values a JSON text can make, counted before it is
 * parsed.
 *
 * A parsed value costs cJSON some 64 bytes and more, while "[0,0,0,...]"
 * spends 2 bytes of text on each: a body within its size bound can still
 * cost thirty times that bound once parsed. A reader that knows how many
 * values a good answer holds refuses the others before parsing them. */
#ifndef VMG_JSONBOUND_H
#define VMG_JSONBOUND_H

#include <stdbool.h>
#include <stddef.h>

/* json_values_within tells whether the len bytes of text can make at most
 * max values (objects, arrays, members and elements, scalars): it counts
 * an upper bound (one, plus each "[", "{" and "," outside strings) and
 * stops as soon as it passes max. It does not validate: a text it accepts
 * may still fail to parse. */
bool json_values_within(const char *text, size_t len, size_t max);

#endif
