/* unit.h: what every unit test includes: cmocka and its prerequisites, and
 * the fixture loader (fixture.c) of the support library (libunit.a).
 * Each tests/unit/test_<module>.c is one program, linked with the whole
 * library built under ASan and UBSan, and run by tests/run with TAP output. */
#ifndef VMG_UNIT_H
#define VMG_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* Where the fixtures are, from the repository root (tests run there). */
#define UNIT_FIXTURES "tests/unit/fixtures/"

/* unit_read_file reads all of path into a NUL-terminated buffer the caller
 * frees, its length in *len (when len is not NULL). A file that cannot be
 * read fails the test, naming it. */
char *unit_read_file(const char *path, size_t *len);
/* unit_fixture reads the fixture UNIT_FIXTURES DIR/NAME the same way
 * (dir "soap", "rest", "kubeconfig"); an empty fixture fails the test. */
char *unit_fixture(const char *dir, const char *name, size_t *len);

#endif
