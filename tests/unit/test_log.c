/* test_log.c: log lines are single valid JSON objects with the right fields,
 * gated by verbosity, escaped, bounded, and never show a registered secret. */
#include "tests/unit/unit.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"

/* A capture: log lines go to a temporary file that the test reads back. */
struct capture {
    FILE *f;
    char *text; /* everything written, NUL-terminated */
    size_t len;
    cJSON *lines[1024];
    size_t nlines;
};

static void capture_start(struct capture *c, int verbosity)
{
    memset(c, 0, sizeof(*c));
    c->f = tmpfile();
    assert_non_null(c->f);
    vmg_log_setup(verbosity, fileno(c->f));
}

/* capture_read reads what was written, checks that it is lines of one JSON
 * object each, and parses them. */
static void capture_read(struct capture *c)
{
    long size;
    char *p, *end;

    assert_int_equal(fseek(c->f, 0, SEEK_END), 0);
    size = ftell(c->f);
    assert_true(size >= 0);
    rewind(c->f);
    c->text = malloc((size_t)size + 1);
    assert_non_null(c->text);
    assert_int_equal(fread(c->text, 1, (size_t)size, c->f), (size_t)size);
    c->text[size] = '\0';
    c->len = (size_t)size;
    /* Nothing is written after the last newline. */
    assert_true(size == 0 || c->text[size - 1] == '\n');
    for (p = c->text; p < c->text + size; p = end + 1) {
        cJSON *j;

        end = strchr(p, '\n');
        assert_non_null(end);
        assert_true((size_t)(end - p) + 1 <= VMG_LOG_LINE_MAX);
        j = cJSON_ParseWithLength(p, (size_t)(end - p));
        assert_non_null(j);
        assert_true(cJSON_IsObject(j));
        assert_true(c->nlines < sizeof(c->lines) / sizeof(c->lines[0]));
        c->lines[c->nlines++] = j;
    }
}

static void capture_end(struct capture *c)
{
    for (size_t i = 0; i < c->nlines; i++)
        cJSON_Delete(c->lines[i]);
    free(c->text);
    fclose(c->f);
    vmg_log_setup(0, 2);
    vmg_log_clear_secrets();
}

/* str returns line i's string field key, or NULL when absent or not a
 * string. */
static const char *str(const struct capture *c, size_t i, const char *key)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(c->lines[i], key);

    return cJSON_IsString(f) ? f->valuestring : NULL;
}

static void test_fields(void **state)
{
    struct capture c;
    const char *ts;
    const cJSON *v;

    (void)state;
    capture_start(&c, 0);
    vmg_info("informer", "ns1", "vg1", "synced %d objects", 42);
    vmg_logf(VMG_LOG_INFO, "main", NULL, NULL, "started");
    capture_read(&c);
    assert_int_equal(c.nlines, 2);
    assert_string_equal(str(&c, 0, "level"), "info");
    assert_string_equal(str(&c, 0, "logger"), "informer");
    assert_string_equal(str(&c, 0, "namespace"), "ns1");
    assert_string_equal(str(&c, 0, "name"), "vg1");
    assert_string_equal(str(&c, 0, "msg"), "synced 42 objects");
    /* ts: RFC 3339 in UTC with milliseconds, e.g. 2024-05-01T12:34:56.789Z. */
    ts = str(&c, 0, "ts");
    assert_non_null(ts);
    assert_int_equal(strlen(ts), 24);
    for (size_t i = 0; i < 24; i++) {
        const char *shape = "dddd-dd-ddTdd:dd:dd.dddZ";

        if (shape[i] == 'd')
            assert_true(ts[i] >= '0' && ts[i] <= '9');
        else
            assert_int_equal(ts[i], shape[i]);
    }
    /* Object fields appear only when given; info lines carry no "v". */
    assert_null(cJSON_GetObjectItemCaseSensitive(c.lines[1], "namespace"));
    assert_null(cJSON_GetObjectItemCaseSensitive(c.lines[1], "name"));
    assert_string_equal(str(&c, 1, "msg"), "started");
    v = cJSON_GetObjectItemCaseSensitive(c.lines[0], "v");
    assert_null(v);
    capture_end(&c);
}

static int evaluated;

static int side_effect(void)
{
    evaluated++;
    return 7;
}

static void test_levels_and_verbosity(void **state)
{
    struct capture c;

    (void)state;
    capture_start(&c, 0);
    vmg_error("a", NULL, NULL, "e");
    vmg_warn("a", NULL, NULL, "w");
    vmg_info("a", NULL, NULL, "i");
    vmg_log_v(0, "a", NULL, NULL, "v0");
    evaluated = 0;
    vmg_debug("a", NULL, NULL, "d %d", side_effect());
    vmg_log_v(2, "a", NULL, NULL, "v2 %d", side_effect());
    /* Arguments of a disabled line are not evaluated. */
    assert_int_equal(evaluated, 0);
    assert_true(vmg_log_enabled(VMG_LOG_INFO));
    assert_false(vmg_log_enabled(VMG_LOG_DEBUG));
    capture_read(&c);
    assert_int_equal(c.nlines, 4);
    assert_string_equal(str(&c, 0, "level"), "error");
    assert_string_equal(str(&c, 1, "level"), "warn");
    assert_string_equal(str(&c, 2, "level"), "info");
    assert_string_equal(str(&c, 3, "level"), "info");
    assert_string_equal(str(&c, 3, "msg"), "v0");
    capture_end(&c);

    capture_start(&c, 2);
    vmg_debug("a", NULL, NULL, "d %d", side_effect());
    vmg_log_v(2, "a", NULL, NULL, "v2");
    vmg_log_v(3, "a", NULL, NULL, "v3");
    vmg_logf(VMG_LOG_DEBUG, "a", NULL, NULL, "direct");
    assert_int_equal(evaluated, 1);
    assert_true(vmg_log_enabled(VMG_LOG_V(2)));
    assert_false(vmg_log_enabled(VMG_LOG_V(3)));
    capture_read(&c);
    assert_int_equal(c.nlines, 3);
    assert_string_equal(str(&c, 0, "level"), "debug");
    assert_string_equal(str(&c, 0, "msg"), "d 7");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(c.lines[0], "v")->valueint, 1);
    assert_string_equal(str(&c, 1, "msg"), "v2");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(c.lines[1], "v")->valueint, 2);
    assert_string_equal(str(&c, 2, "msg"), "direct");
    capture_end(&c);
}

static void test_escaping(void **state)
{
    struct capture c;

    (void)state;
    capture_start(&c, 0);
    vmg_info("a\"b", "n\ns", "x\\y", "%s", "q\"uote back\\slash\nnl\r\ttab\x01\x1f\x7f end");
    vmg_info("a", NULL, NULL, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    /* Invalid UTF-8: a stray continuation byte, a truncated sequence, an
     * overlong form, an encoded surrogate and 0xff. */
    vmg_info("a", NULL, NULL, "x\x80y\xc3z\xc0\xafw\xed\xa0\x80v\xff");
    capture_read(&c);
    /* Three lines: no raw newline escaped into the output. */
    assert_int_equal(c.nlines, 3);
    assert_string_equal(str(&c, 0, "logger"), "a\"b");
    assert_string_equal(str(&c, 0, "namespace"), "n\ns");
    assert_string_equal(str(&c, 0, "name"), "x\\y");
    assert_string_equal(str(&c, 0, "msg"), "q\"uote back\\slash\nnl\r\ttab\x01\x1f\x7f end");
    assert_non_null(strstr(c.text, "\\u0001\\u001f\\u007f"));
    assert_string_equal(str(&c, 1, "msg"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    assert_string_equal(str(&c, 2, "msg"), "x\xef\xbf\xbdy\xef\xbf\xbdz\xef\xbf\xbd\xef\xbf\xbdw"
                                           "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdv\xef\xbf\xbd");
    capture_end(&c);
}

static void test_kv(void **state)
{
    struct capture c;

    (void)state;
    capture_start(&c, 0);
    vmg_log_kv(VMG_LOG_WARN, "executor", "ns", "vg", "clone failed", "vm", "vg-0", "task",
               "task-1\"", "reason", NULL, "msg", "shadow", NULL);
    vmg_log_kv(VMG_LOG_DEBUG, "executor", NULL, NULL, "hidden", "k", "v", NULL);
    capture_read(&c);
    assert_int_equal(c.nlines, 1);
    assert_string_equal(str(&c, 0, "level"), "warn");
    assert_string_equal(str(&c, 0, "msg"), "clone failed");
    assert_string_equal(str(&c, 0, "vm"), "vg-0");
    assert_string_equal(str(&c, 0, "task"), "task-1\"");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(c.lines[0], "reason")));
    /* A field named like a standard one does not replace it. */
    assert_string_equal(str(&c, 0, "_msg"), "shadow");
    capture_end(&c);
}

static void test_redaction(void **state)
{
    struct capture c;
    const char *secret = "s3cr3t-Pa55";
    const char *quoted = "pa\"ss\nword";
    char buf[64];

    (void)state;
    capture_start(&c, 0);
    assert_int_equal(vmg_log_add_secret(secret), 0);
    assert_int_equal(vmg_log_add_secret(secret), 0); /* again: no error */
    assert_int_equal(vmg_log_add_secret(quoted), 0);
    assert_int_equal(vmg_log_add_secret("abc"), -EINVAL);
    assert_int_equal(vmg_log_add_secret(""), -EINVAL);
    assert_int_equal(vmg_log_add_secret(NULL), -EINVAL);

    vmg_info("login", NULL, NULL, "logging in with password %s and again %s!", secret, secret);
    vmg_info(secret, secret, secret, "fields");
    vmg_log_kv(VMG_LOG_ERROR, "x", NULL, NULL, "kv", secret, "key", "val", secret, "mixed",
               "Bearer s3cr3t-Pa55s3cr3t-Pa55", NULL);
    vmg_info("x", NULL, NULL, "quoted <%s>", quoted);
    /* Too short to be a secret: left alone. */
    vmg_info("x", NULL, NULL, "abc");
    capture_read(&c);
    assert_int_equal(c.nlines, 5);
    /* The secret appears nowhere, raw or escaped. */
    assert_null(strstr(c.text, "s3cr3t"));
    assert_null(strstr(c.text, "pa\\\"ss"));
    assert_null(strstr(c.text, "ss\\nword"));
    assert_string_equal(str(&c, 0, "msg"),
                        "logging in with password [REDACTED] and again [REDACTED]!");
    assert_string_equal(str(&c, 1, "logger"), "[REDACTED]");
    assert_string_equal(str(&c, 1, "namespace"), "[REDACTED]");
    assert_string_equal(str(&c, 1, "name"), "[REDACTED]");
    assert_string_equal(str(&c, 2, "[REDACTED]"), "key");
    assert_string_equal(str(&c, 2, "val"), "[REDACTED]");
    assert_string_equal(str(&c, 2, "mixed"), "Bearer [REDACTED][REDACTED]");
    assert_string_equal(str(&c, 3, "msg"), "quoted <[REDACTED]>");
    assert_string_equal(str(&c, 4, "msg"), "abc");

    /* The same redaction for text that leaves by other paths. */
    assert_int_equal(vmg_log_redact(buf, sizeof(buf), "pw=s3cr3t-Pa55."), 14);
    assert_string_equal(buf, "pw=[REDACTED].");
    /* Cut short, it never shows part of a secret. */
    vmg_log_redact(buf, 8, "pw=s3cr3t-Pa55.");
    assert_string_equal(buf, "pw=");
    capture_end(&c);

    /* Cleared secrets are no longer masked. */
    vmg_log_redact(buf, sizeof(buf), "s3cr3t-Pa55");
    assert_string_equal(buf, "s3cr3t-Pa55");
}

static void test_secret_limits(void **state)
{
    char s[VMG_LOG_SECRET_MAX + 2];
    int r = 0;

    (void)state;
    for (int i = 0; i < VMG_LOG_MAX_SECRETS; i++) {
        snprintf(s, sizeof(s), "secret-%d", i);
        assert_int_equal(vmg_log_add_secret(s), 0);
    }
    r = vmg_log_add_secret("one-too-many");
    assert_int_equal(r, -ENOSPC);
    vmg_log_clear_secrets();
    memset(s, 'x', sizeof(s) - 1);
    s[sizeof(s) - 1] = '\0';
    assert_int_equal(vmg_log_add_secret(s), -EINVAL);
    s[VMG_LOG_SECRET_MAX] = '\0';
    assert_int_equal(vmg_log_add_secret(s), 0);
    vmg_log_clear_secrets();
}

static void test_truncation(void **state)
{
    struct capture c;
    static char big[40000];
    static char sec[VMG_LOG_SECRET_MAX + 1];
    static char many[4 * VMG_LOG_SECRET_MAX + 100];
    const char *msg;
    size_t n;

    (void)state;
    capture_start(&c, 0);
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    vmg_info("x", "ns", "n", "%s", big);
    /* A field after a cut field is left out; the line stays valid. */
    vmg_log_kv(VMG_LOG_INFO, "x", NULL, NULL, "m", "first", big, "second", "b", NULL);
    /* Multi-byte characters and escapes are never cut in half. */
    for (size_t i = 0; i + 2 < sizeof(big); i += 2)
        memcpy(big + i, i % 4 ? "\xc3\xa9" : "\"\n", 2);
    vmg_info("x", NULL, NULL, "%s", big);
    /* A long secret repeated well past the line bound stays hidden. */
    memset(sec, 'k', sizeof(sec) - 1);
    sec[sizeof(sec) - 1] = '\0';
    assert_int_equal(vmg_log_add_secret(sec), 0);
    n = 0;
    for (int i = 0; i < 4; i++) {
        memcpy(many + n, sec, sizeof(sec) - 1);
        n += sizeof(sec) - 1;
        many[n++] = ' ';
    }
    many[n] = '\0';
    vmg_info("x", NULL, NULL, "%s%s", many, many);
    capture_read(&c);
    assert_int_equal(c.nlines, 4);

    msg = str(&c, 0, "msg");
    assert_non_null(msg);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c.lines[0], "truncated")));
    assert_true(strlen(msg) > VMG_LOG_LINE_MAX / 2);
    assert_string_equal(msg + strlen(msg) - strlen("...[truncated]"), "...[truncated]");
    assert_string_equal(str(&c, 0, "namespace"), "ns");

    assert_non_null(str(&c, 1, "first"));
    assert_null(cJSON_GetObjectItemCaseSensitive(c.lines[1], "second"));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c.lines[1], "truncated")));

    msg = str(&c, 2, "msg");
    assert_non_null(msg);
    n = strlen(msg) - strlen("...[truncated]");
    /* What precedes the mark is whole pairs of characters. */
    assert_true(n % 2 == 0);
    for (size_t i = 0; i < n; i += 2)
        assert_memory_equal(msg + i, i % 4 ? "\xc3\xa9" : "\"\n", 2);

    /* The message is cut at 2 * VMG_LOG_LINE_MAX - 1 bytes, inside the
     * fourth copy: that prefix is hidden too. */
    assert_string_equal(str(&c, 3, "msg"), "[REDACTED] [REDACTED] [REDACTED] [REDACTED]");
    assert_null(strstr(c.text, "kkkk"));
    capture_end(&c);
}

/* A secret cut by the message bound shows no prefix. */
static void test_cut_secret(void **state)
{
    struct capture c;
    static char pad[2 * VMG_LOG_LINE_MAX];
    const char *secret = "0123456789-secret-tail";

    (void)state;
    capture_start(&c, 0);
    assert_int_equal(vmg_log_add_secret(secret), 0);
    /* The formatted message is cut at 2 * VMG_LOG_LINE_MAX - 1 bytes; put
     * the secret across that cut, after redactions that shrink the text so
     * the cut falls within the line. */
    size_t n = 0;
    while (n + strlen(secret) < sizeof(pad) - 40) {
        memcpy(pad + n, secret, strlen(secret));
        n += strlen(secret);
    }
    while (n < sizeof(pad) - 1 - 6)
        pad[n++] = '.';
    pad[n] = '\0';
    vmg_info("x", NULL, NULL, "%s%s", pad, secret);
    capture_read(&c);
    assert_int_equal(c.nlines, 1);
    assert_null(strstr(c.text, "012345"));
    assert_non_null(strstr(c.text, "......[REDACTED]\""));
    capture_end(&c);
}

static void *log_many(void *arg)
{
    for (int i = 0; i < 200; i++)
        vmg_info("thread", NULL, NULL, "thread %d line %d %s", *(int *)arg, i,
                 "some padding to make lines longer than a few bytes");
    return NULL;
}

static void test_threads_do_not_interleave(void **state)
{
    struct capture c;
    pthread_t t[4];
    int ids[4] = {0, 1, 2, 3};

    (void)state;
    capture_start(&c, 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, log_many, &ids[i]), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    /* capture_read fails unless every line is one whole JSON object; the
     * 800 lines would not fit the capture, so only count them. */
    {
        long size;
        char *text, *p;
        size_t lines = 0;

        assert_int_equal(fseek(c.f, 0, SEEK_END), 0);
        size = ftell(c.f);
        rewind(c.f);
        text = malloc((size_t)size + 1);
        assert_non_null(text);
        assert_int_equal(fread(text, 1, (size_t)size, c.f), (size_t)size);
        text[size] = '\0';
        for (p = text; *p; p = strchr(p, '\n') + 1) {
            cJSON *j = cJSON_ParseWithLength(p, (size_t)(strchr(p, '\n') - p));

            assert_non_null(j);
            assert_string_equal(cJSON_GetObjectItem(j, "logger")->valuestring, "thread");
            cJSON_Delete(j);
            lines++;
        }
        assert_int_equal(lines, 800);
        free(text);
    }
    capture_end(&c);
}

/* A failed test leaves its secrets behind; start every test without any. */
static int forget_secrets(void **state)
{
    (void)state;
    vmg_log_clear_secrets();
    vmg_log_setup(0, 2);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_fields, forget_secrets),
        cmocka_unit_test_teardown(test_levels_and_verbosity, forget_secrets),
        cmocka_unit_test_teardown(test_escaping, forget_secrets),
        cmocka_unit_test_teardown(test_kv, forget_secrets),
        cmocka_unit_test_teardown(test_redaction, forget_secrets),
        cmocka_unit_test_teardown(test_secret_limits, forget_secrets),
        cmocka_unit_test_teardown(test_truncation, forget_secrets),
        cmocka_unit_test_teardown(test_cut_secret, forget_secrets),
        cmocka_unit_test_teardown(test_threads_do_not_interleave, forget_secrets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
