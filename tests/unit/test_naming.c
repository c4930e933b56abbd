/* test_naming.c: folder names are injective and bounded; VM names are
 * bounded, readable, deterministic and parse back to their slot; tag names
 * are injective and bounded. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/naming.h"

static void make_str(char *buf, size_t len, char fill)
{
    memset(buf, fill, len);
    buf[len] = '\0';
}

static void assert_vcenter_safe(const char *s)
{
    assert_true(strlen(s) > 0);
    assert_true(strlen(s) <= NAMING_MAX_LEN);
    assert_null(strchr(s, '%'));
    assert_null(strchr(s, '/'));
    assert_null(strchr(s, '\\'));
}

static void test_folder_plain(void **state)
{
    char buf[NAMING_BUF_SIZE];

    (void)state;
    assert_int_equal(naming_folder("default", "web", buf, sizeof(buf)), 11);
    assert_string_equal(buf, "default_web");
    assert_int_equal(naming_folder("team-a", "db.prod", buf, sizeof(buf)), 14);
    assert_string_equal(buf, "team-a_db.prod");
}

/* Every folder name of a set of tricky pairs is distinct, bounded and safe. */
static void test_folder_injective(void **state)
{
    static char long63a[64], long63b[64], long253a[254], long253b[254], long253c[254];
    static char fit79[80];
    const char *pairs[][2] = {
        {"a-b", "c"},
        {"a", "b-c"},
        {"a", "b_c"}, /* not a Kubernetes name: hashed form */
        {"a_b", "c"},
        {"a", "b"},
        {"ab", ""},
        {"", "ab"},
        {"a.b", "c"},
        {"a", "b.c"},
        {"a", "b__0123456789abcdef"},
        {"x", "%2f"},
        {"x", "/"},
        {"x", "\\"},
        {"x", "-"},
        {"X", "y"},
        {"x", "Y"},
        {long63a, long253a},
        {long63a, long253b}, /* differs only at the end */
        {long63b, long253a},
        {long63a, long253c},
        {"ns", fit79},
        {"n", fit79},
    };
    size_t n = sizeof(pairs) / sizeof(pairs[0]);
    char names[sizeof(pairs) / sizeof(pairs[0])][NAMING_BUF_SIZE];

    (void)state;
    make_str(long63a, 63, 'a');
    make_str(long63b, 63, 'a');
    long63b[62] = 'b';
    make_str(long253a, 253, 'n');
    make_str(long253b, 253, 'n');
    long253b[252] = 'm';
    make_str(long253c, 253, 'n');
    long253c[100] = '.';
    make_str(fit79, 78, 'f'); /* "ns_" + 78 = 81 > 80; "n_" + 78 = 80 fits */

    for (size_t i = 0; i < n; i++) {
        int r = naming_folder(pairs[i][0], pairs[i][1], names[i], NAMING_BUF_SIZE);
        assert_true(r > 0);
        assert_int_equal((size_t)r, strlen(names[i]));
        assert_vcenter_safe(names[i]);
        for (size_t j = 0; j < i; j++) {
            if (strcmp(names[i], names[j]) == 0)
                fail_msg("pairs %zu and %zu share folder \"%s\"", j, i, names[i]);
        }
    }
    /* The long ones are cut and hashed, starting with the namespace. */
    assert_int_equal(strlen(names[16]), NAMING_MAX_LEN);
    assert_memory_equal(names[16], long63a, 62);
    assert_non_null(strstr(names[16], "__"));
    assert_string_equal(
        names[21],
        "n_ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff");
    /* Deterministic. */
    char again[NAMING_BUF_SIZE];
    assert_true(naming_folder(long63a, long253b, again, sizeof(again)) > 0);
    assert_string_equal(again, names[17]);
}

/* A brute force over short names made of the troublesome characters. */
static void test_folder_injective_exhaustive(void **state)
{
    const char alphabet[] = "a-._";
    const size_t k = sizeof(alphabet) - 1;
    char(*names)[NAMING_BUF_SIZE];
    size_t count = 0;

    (void)state;
    /* All (ns, name) with ns, name of length 1..2 over the alphabet. */
    size_t max = (k + k * k) * (k + k * k);
    names = calloc(max, sizeof(*names));
    assert_non_null(names);
    for (size_t a = 0; a < k + k * k; a++) {
        char ns[3] = {0}, nm[3] = {0};
        ns[0] = alphabet[a < k ? a : (a - k) / k];
        if (a >= k)
            ns[1] = alphabet[(a - k) % k];
        for (size_t b = 0; b < k + k * k; b++) {
            memset(nm, 0, sizeof(nm));
            nm[0] = alphabet[b < k ? b : (b - k) / k];
            if (b >= k)
                nm[1] = alphabet[(b - k) % k];
            assert_true(naming_folder(ns, nm, names[count], NAMING_BUF_SIZE) > 0);
            count++;
        }
    }
    assert_int_equal(count, max);
    for (size_t i = 0; i < count; i++) {
        for (size_t j = i + 1; j < count; j++) {
            if (strcmp(names[i], names[j]) == 0)
                fail_msg("collision on \"%s\"", names[i]);
        }
    }
    free(names);
}

static void test_folder_bad_args(void **state)
{
    char buf[NAMING_BUF_SIZE];

    (void)state;
    assert_int_equal(naming_folder(NULL, "a", buf, sizeof(buf)), -EINVAL);
    assert_int_equal(naming_folder("a", NULL, buf, sizeof(buf)), -EINVAL);
    assert_int_equal(naming_folder("a", "b", buf, NAMING_MAX_LEN), -EINVAL);
}

static void test_vm_names(void **state)
{
    char buf[NAMING_BUF_SIZE], buf2[NAMING_BUF_SIZE], name[254];

    (void)state;
    assert_int_equal(naming_vm("default", "web", 0, buf, sizeof(buf)), 5);
    assert_string_equal(buf, "web-0");
    assert_true(naming_vm("default", "web", 12, buf, sizeof(buf)) > 0);
    assert_string_equal(buf, "web-12");

    /* Long names are cut, keep their beginning, and stay distinct per slot
     * and per group even when the groups differ after the cut. */
    make_str(name, 253, 'w');
    for (int slot = 0; slot < 1000; slot += 7) {
        assert_true(naming_vm("ns", name, slot, buf, sizeof(buf)) > 0);
        assert_vcenter_safe(buf);
        assert_memory_equal(buf, name, 40);
        assert_int_equal(naming_vm_slot("ns", name, buf), slot);
    }
    assert_true(naming_vm("ns", name, INT_MAX, buf, sizeof(buf)) > 0);
    assert_vcenter_safe(buf);
    assert_int_equal(naming_vm_slot("ns", name, buf), INT_MAX);

    char other[254];
    make_str(other, 253, 'w');
    other[200] = 'x';
    assert_true(naming_vm("ns", name, 1, buf, sizeof(buf)) > 0);
    assert_true(naming_vm("ns", other, 1, buf2, sizeof(buf2)) > 0);
    assert_string_not_equal(buf, buf2);
    /* An 78-byte name fits with a one-digit slot, not with two. */
    make_str(name, 78, 'v');
    assert_int_equal(naming_vm("ns", name, 9, buf, sizeof(buf)), 80);
    assert_memory_equal(buf, name, 78);
    assert_true(naming_vm("ns", name, 10, buf, sizeof(buf)) > 0);
    assert_true(strlen(buf) <= NAMING_MAX_LEN);
    assert_int_equal(naming_vm_slot("ns", name, buf), 10);
    /* Characters vCenter escapes never appear. */
    assert_true(naming_vm("ns", "a%b/c\\d", 3, buf, sizeof(buf)) > 0);
    assert_vcenter_safe(buf);
    assert_int_equal(buf[0], 'a');
    assert_int_equal(naming_vm_slot("ns", "a%b/c\\d", buf), 3);
}

static void test_vm_slot_parse(void **state)
{
    char buf[NAMING_BUF_SIZE];

    (void)state;
    for (int slot = 0; slot < 200; slot++) {
        assert_true(naming_vm("default", "web", slot, buf, sizeof(buf)) > 0);
        assert_int_equal(naming_vm_slot("default", "web", buf), slot);
    }
    assert_int_equal(naming_vm_slot("default", "web", "web-01"), -EINVAL);
    assert_int_equal(naming_vm_slot("default", "web", "web-"), -EINVAL);
    assert_int_equal(naming_vm_slot("default", "web", "web"), -EINVAL);
    assert_int_equal(naming_vm_slot("default", "web", "web-1x"), -EINVAL);
    assert_int_equal(naming_vm_slot("default", "web", "web--1"), -EINVAL);
    assert_int_equal(naming_vm_slot("default", "web", "webx-1"), -EINVAL);
    assert_int_equal(naming_vm_slot("default", "web", "db-1"), -EINVAL);
    assert_int_equal(naming_vm_slot("default", "web", "web-99999999999"), -EINVAL);
    assert_int_equal(naming_vm_slot("default", "web", "web-2147483648"), -EINVAL);
    /* Another group's replica is not ours, even when the names nest. */
    assert_int_equal(naming_vm_slot("default", "web", "web-a-1"), -EINVAL);
    assert_int_equal(naming_vm_slot("default", "web-a", "web-a-1"), 1);
    assert_int_equal(naming_vm_slot("default", "web", NULL), -EINVAL);
    assert_int_equal(naming_vm("default", "web", -1, buf, sizeof(buf)), -EINVAL);
}

static void test_tag_name_plain(void **state)
{
    char buf[NAMING_BUF_SIZE];

    (void)state;
    assert_int_equal(naming_tag("ns1", "g1", buf, sizeof(buf)), 6);
    assert_string_equal(buf, "ns1/g1");
    assert_int_equal(naming_tag("team-a", "web.front-1", buf, sizeof(buf)), 18);
    assert_string_equal(buf, "team-a/web.front-1");
}

static bool is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return s[n] == '\0';
}

static void test_tag_name_hashed(void **state)
{
    char a[NAMING_BUF_SIZE], b[NAMING_BUF_SIZE], name[254];
    int n;

    (void)state;
    /* Exactly the limit is plain; one more is hashed. */
    memset(name, 'x', sizeof(name));
    name[NAMING_MAX_LEN - 3] = '\0'; /* "ns/" + 77 = 80 */
    assert_int_equal(naming_tag("ns", name, a, sizeof(a)), NAMING_MAX_LEN);
    assert_null(strchr(a, '~'));
    name[NAMING_MAX_LEN - 3] = 'x';
    name[NAMING_MAX_LEN - 2] = '\0';
    n = naming_tag("ns", name, a, sizeof(a));
    assert_int_equal(n, NAMING_MAX_LEN);
    assert_int_equal(a[n - NAMING_TAG_HASH_LEN - 1], '~');
    assert_true(is_hex(a + n - NAMING_TAG_HASH_LEN, NAMING_TAG_HASH_LEN));
    assert_memory_equal(a, "ns/xxx", 6);

    /* Names Kubernetes would refuse are sanitized and hashed. */
    n = naming_tag("NS", "A b", a, sizeof(a));
    assert_int_equal(n, (int)strlen("ns/a-b~") + NAMING_TAG_HASH_LEN);
    assert_memory_equal(a, "ns/a-b~", 7);
    /* ... and the pairs that would collide after sanitizing do not. */
    assert_true(naming_tag("ns", "a-b", b, sizeof(b)) > 0);
    assert_string_equal(b, "ns/a-b");
    assert_true(naming_tag("ns", "A-b", b, sizeof(b)) > 0);
    assert_string_not_equal(a, b);
    /* A '/' in a part cannot make two pairs meet. */
    assert_true(naming_tag("a", "b/c", a, sizeof(a)) > 0);
    assert_true(naming_tag("a/b", "c", b, sizeof(b)) > 0);
    assert_string_not_equal(a, b);
    assert_non_null(strchr(a, '~'));
    /* Deterministic. */
    assert_true(naming_tag("a/b", "c", a, sizeof(a)) > 0);
    assert_string_equal(a, b);
    /* Long parts: bounded, and different pairs with one prefix differ. */
    memset(name, 'y', 253);
    name[253] = '\0';
    assert_int_equal(naming_tag("ns", name, a, sizeof(a)), NAMING_MAX_LEN);
    name[252] = 'z';
    assert_int_equal(naming_tag("ns", name, b, sizeof(b)), NAMING_MAX_LEN);
    assert_string_not_equal(a, b);
    assert_memory_equal(a, b, NAMING_MAX_LEN - NAMING_TAG_HASH_LEN);
}

static void test_tag_name_bad_args(void **state)
{
    char buf[NAMING_BUF_SIZE], name[NAMING_K8S_NAME_MAX + 2];

    (void)state;
    assert_int_equal(naming_tag(NULL, "a", buf, sizeof(buf)), -EINVAL);
    assert_int_equal(naming_tag("a", NULL, buf, sizeof(buf)), -EINVAL);
    assert_int_equal(naming_tag("", "a", buf, sizeof(buf)), -EINVAL);
    assert_int_equal(naming_tag("a", "", buf, sizeof(buf)), -EINVAL);
    assert_int_equal(naming_tag("a", "b", buf, NAMING_MAX_LEN), -EINVAL);
    /* Longer than any Kubernetes name (the REST client's old bound). */
    make_str(name, sizeof(name) - 1, 'a');
    assert_int_equal(naming_tag("a", name, buf, sizeof(buf)), -EINVAL);
    assert_int_equal(naming_tag(name, "a", buf, sizeof(buf)), -EINVAL);
}

static void test_tag_description(void **state)
{
    char buf[64];

    (void)state;
    assert_int_equal(naming_tag_description("ns1", "g1", buf, sizeof(buf)), 21);
    assert_string_equal(buf, "VMs of VmGroup ns1/g1");
    assert_int_equal(naming_tag_description("ns1", "g1", buf, 21), -EINVAL);
    assert_int_equal(naming_tag_description(NULL, "g1", buf, sizeof(buf)), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_folder_plain),
        cmocka_unit_test(test_folder_injective),
        cmocka_unit_test(test_folder_injective_exhaustive),
        cmocka_unit_test(test_folder_bad_args),
        cmocka_unit_test(test_vm_names),
        cmocka_unit_test(test_vm_slot_parse),
        cmocka_unit_test(test_tag_name_plain),
        cmocka_unit_test(test_tag_name_hashed),
        cmocka_unit_test(test_tag_name_bad_args),
        cmocka_unit_test(test_tag_description),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
