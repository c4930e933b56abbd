/* unit.h: what every unit test includes: cmocka and its prerequisites.
 * Each tests/unit/test_<module>.c is one program, linked with the whole
 * library built under ASan and UBSan, and run by tests/run with TAP output. */
#ifndef VMG_UNIT_H
#define VMG_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#endif
