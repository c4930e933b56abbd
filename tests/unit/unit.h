/* unit.h: what every unit test includes: cmocka and its prerequisites, and
 * the fixture loader (fixture.c) and the loopback kubeconfig (kubecfg.c) of
 * the support library (libunit.a).
 * Each tests/unit/test_<module>.c is one program, linked with the whole
 * library built under ASan and UBSan, and run by tests/run with TAP output. */
#ifndef VMG_UNIT_H
#define VMG_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kube/kubeconfig.h"

/* Where the fixtures are, from the repository root (tests run there). */
#define UNIT_FIXTURES "tests/unit/fixtures/"

/* unit_read_file reads all of path into a NUL-terminated buffer the caller
 * frees, its length in *len (when len is not NULL). A file that cannot be
 * read fails the test, naming it. */
char *unit_read_file(const char *path, size_t *len);
/* unit_fixture reads the fixture UNIT_FIXTURES DIR/NAME the same way
 * (dir "soap", "rest", "kubeconfig"); an empty fixture fails the test. */
char *unit_fixture(const char *dir, const char *name, size_t *len);

/* unit_loopback_kcfg loads a kubeconfig, written in dir and removed again,
 * whose one context points at http://127.0.0.1:port with user_yaml as its
 * user entry (indented by 4, e.g. "    token: tok\n"); the environment is
 * not read. A configuration that does not load fails the test. */
kcfg *unit_loopback_kcfg(const char *dir, int port, const char *user_yaml);

#endif
