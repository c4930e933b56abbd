/* test_secretfile.c: a secret read from a file, as a mounted Secret. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/err.h"
#include "lib/log.h"
#include "lib/secretfile.h"

static char path[64];

static int setup(void **state)
{
    int fd;

    (void)state;
    snprintf(path, sizeof(path), "/tmp/vmg-test-secret.XXXXXX");
    fd = mkstemp(path);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    return 0;
}

static void put_bytes(const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void test_one_newline_dropped(void **state)
{
    char buf[64], err[256];

    (void)state;
    put_bytes("pw", 2);
    assert_int_equal(vmg_secret_file_read(path, buf, sizeof(buf), err, sizeof(err)), 2);
    assert_string_equal(buf, "pw");
    put_bytes("pw\r\n", 4);
    assert_int_equal(vmg_secret_file_read(path, buf, sizeof(buf), err, sizeof(err)), 2);
    assert_string_equal(buf, "pw");
    /* Only one: the rest is the password's. */
    put_bytes(" pw \n\n", 6);
    assert_int_equal(vmg_secret_file_read(path, buf, sizeof(buf), err, sizeof(err)), 5);
    assert_string_equal(buf, " pw \n");
}

static void test_refused_and_named(void **state)
{
    char buf[8], err[256], big[VMG_SECRET_FILE_MAX + 10];

    (void)state;
    put_bytes("", 0);
    assert_int_equal(vmg_secret_file_read(path, buf, sizeof(buf), err, sizeof(err)), VMG_ECONFIG);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "empty"));
    put_bytes("a\0b", 3);
    assert_int_equal(vmg_secret_file_read(path, buf, sizeof(buf), err, sizeof(err)), VMG_ECONFIG);
    assert_non_null(strstr(err, "NUL"));
    put_bytes("12345678", 8); /* does not fit buf */
    assert_int_equal(vmg_secret_file_read(path, buf, sizeof(buf), err, sizeof(err)), VMG_ECONFIG);
    assert_null(strstr(err, "12345678")); /* the content is never in the message */
    memset(big, 'x', sizeof(big));
    put_bytes(big, sizeof(big));
    {
        char large[VMG_SECRET_FILE_MAX + 100];
        assert_int_equal(vmg_secret_file_read(path, large, sizeof(large), err, sizeof(err)),
                         VMG_ECONFIG);
        assert_non_null(strstr(err, "more than 1024 bytes"));
    }
    assert_int_equal(
        vmg_secret_file_read("/nonexistent/vc-pass", buf, sizeof(buf), err, sizeof(err)),
        VMG_ECONFIG);
    assert_non_null(strstr(err, "/nonexistent/vc-pass"));
}

/* A FIFO is refused at once (opening it waited for a writer: the start,
 * or the loop when a rotated VC_PASS_FILE is read again, hung). */
static void test_fifo_refused(void **state)
{
    char buf[64], err[256], fifo[80];

    (void)state;
    snprintf(fifo, sizeof(fifo), "%s.fifo", path);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(vmg_secret_file_read(fifo, buf, sizeof(buf), err, sizeof(err)), VMG_ECONFIG);
    assert_non_null(strstr(err, fifo));
    assert_non_null(strstr(err, "not a regular file"));
    unlink(fifo);
}

static void test_replace(void **state)
{
    char *slot = NULL;

    (void)state;
    assert_int_equal(vmg_secret_replace(&slot, ""), -EINVAL);
    assert_null(slot);
    assert_int_equal(vmg_secret_replace(&slot, "first-pw"), 0);
    assert_string_equal(slot, "first-pw");
    assert_int_equal(vmg_secret_replace(&slot, NULL), -EINVAL);
    assert_string_equal(slot, "first-pw");
    assert_int_equal(vmg_secret_replace(&slot, "second-pw"), 0);
    assert_string_equal(slot, "second-pw");
    {
        /* The same again: nothing is done. */
        char *before = slot;
        assert_int_equal(vmg_secret_replace(&slot, "second-pw"), 1);
        assert_ptr_equal(slot, before);
    }
    /* Both are masked from now on. */
    {
        char out[128];
        vmg_log_redact(out, sizeof(out), "a first-pw b second-pw");
        assert_string_equal(out, "a [REDACTED] b [REDACTED]");
    }
    free(slot);
    vmg_log_clear_secrets();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_newline_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_and_named, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo_refused, setup, teardown),
        cmocka_unit_test(test_replace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
