/* jsonbound.c: see jsonbound.h. */
#include "lib/jsonbound.h"

bool json_values_within(const char *text, size_t len, size_t max)
{
    size_t n = 1;
    bool in_string = false;

    if (!text)
        return true;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];

        if (in_string) {
            if (c == '\\')
                i++; /* the escaped character, a quote too */
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{' || c == ',') {
            if (++n > max)
                return false;
        }
    }
    return n <= max;
}
