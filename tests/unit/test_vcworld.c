/* test_vcworld.c: what of vCenter's identity a message may not show to
 * tenants (vcworld's names_vcenter): the user in any of the forms vCenter
 * and its directory write it, the URL and the host. */
#include "tests/unit/unit.h"

#include <stdbool.h>

#include "controller/vcworld.h"

#define URL "https://vc.example.com:443/sdk"

static bool names(const char *msg, const char *user)
{
    return vcworld_testing_names_vcenter(msg, user, URL, "vc.example.com");
}

static void test_user_url_and_host(void **state)
{
    (void)state;
    assert_true(
        names("login as administrator@vsphere.local failed", "administrator@vsphere.local"));
    assert_true(names("POST " URL ": 503", "svc@corp"));
    assert_true(names("Failed to connect to vc.example.com port 443", "svc@corp"));
    assert_false(names("template \"web\" not found in /DC0/vm", "administrator@vsphere.local"));
    assert_false(names("", "administrator@vsphere.local"));
    assert_false(names(NULL, "administrator@vsphere.local"));
}

/* vCenter and its identity sources write one user several ways: the name
 * alone, DOMAIN\name, another case. Each is recognised. */
static void test_user_other_forms(void **state)
{
    (void)state;
    assert_true(names("Cannot complete login due to an incorrect user name or password "
                      "(Administrator)",
                      "administrator@vsphere.local"));
    assert_true(
        names("permission denied for VSPHERE.LOCAL\\Administrator", "administrator@vsphere.local"));
    assert_true(names("user ADMINISTRATOR@VSPHERE.LOCAL is locked", "administrator@vsphere.local"));
    assert_true(names("user svc-vmg@corp.example has no privilege", "CORP\\svc-vmg"));
    assert_true(names("login of corp\\SVC-VMG refused", "CORP\\svc-vmg"));
    assert_true(names("host VC.EXAMPLE.COM refused", "svc@corp"));
    /* A name part of fewer than 3 characters is too common to look for. */
    assert_false(names("a bad template in /DC0/vm", "ab@corp"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_user_url_and_host),
        cmocka_unit_test(test_user_other_forms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
