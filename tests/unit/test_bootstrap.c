/* test_bootstrap.c: a clone's cloud-init user data and metadata: the
 * metadata's encoding, the checks of the Secret's value, the guestinfo
 * entries, and the clone after the Secret over a fake world. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "controller/bootstrap.h"
#include "controller/outcome.h"
#include "controller/planner.h"
#include "lib/err.h"

/* b64d decodes s into out (NUL terminated) and returns its length. */
static int b64d(const char *s, char *out, size_t size)
{
    size_t len = strlen(s), pad = 0;
    int n;

    assert_true(len / 4 * 3 + 1 <= size);
    n = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)s, (int)len);
    assert_true(n >= 0);
    while (pad < len && s[len - 1 - pad] == '=')
        pad++;
    n -= (int)pad;
    out[n] = '\0';
    return n;
}

static void test_metadata(void **state)
{
    char buf[BOOTSTRAP_MAX_METADATA], json[BOOTSTRAP_MAX_METADATA];

    (void)state;
    assert_true(bootstrap_metadata("web-0", NULL, buf, sizeof(buf)) > 0);
    b64d(buf, json, sizeof(json));
    assert_string_equal(json, "{\"instance-id\":\"web-0\",\"local-hostname\":\"web-0\"}");
    assert_true(bootstrap_metadata("web-1", "4211-abcd", buf, sizeof(buf)) > 0);
    b64d(buf, json, sizeof(json));
    assert_string_equal(json, "{\"instance-id\":\"4211-abcd\",\"local-hostname\":\"web-1\"}");
    /* A name with a quote is JSON-escaped, not spliced. */
    assert_true(bootstrap_metadata("a\"b", "", buf, sizeof(buf)) > 0);
    b64d(buf, json, sizeof(json));
    assert_string_equal(json, "{\"instance-id\":\"a\\\"b\",\"local-hostname\":\"a\\\"b\"}");
    assert_int_equal(bootstrap_metadata("", NULL, buf, sizeof(buf)), -EINVAL);
    assert_int_equal(bootstrap_metadata(NULL, NULL, buf, sizeof(buf)), -EINVAL);
    assert_int_equal(bootstrap_metadata("web-0", NULL, buf, 8), -EINVAL);
}

static cJSON *secret_with(const char *key, const char *value)
{
    cJSON *s = cJSON_CreateObject(), *d = cJSON_AddObjectToObject(s, "data");

    assert_non_null(d);
    if (value)
        assert_non_null(cJSON_AddStringToObject(d, key, value));
    return s;
}

static void test_userdata(void **state)
{
    const char *ud = NULL;
    char msg[512];
    cJSON *s;
    char *big;
    size_t n;

    (void)state;
    /* "#cloud-config\n" */
    s = secret_with("user-data", "I2Nsb3VkLWNvbmZpZwo=");
    assert_int_equal(bootstrap_userdata(s, "ns", "init", "user-data", &ud, msg, sizeof(msg)), 0);
    assert_string_equal(ud, "I2Nsb3VkLWNvbmZpZwo=");
    /* Another key: missing, named with the Secret, without the content. */
    msg[0] = '\0';
    assert_int_equal(bootstrap_userdata(s, "ns", "init", "other", &ud, msg, sizeof(msg)),
                     VMG_ENOTFOUND);
    assert_non_null(strstr(msg, "ns/init"));
    assert_non_null(strstr(msg, "\"other\""));
    assert_null(strstr(msg, "I2Nsb3Vk"));
    cJSON_Delete(s);
    /* No data at all. */
    s = cJSON_CreateObject();
    assert_int_equal(bootstrap_userdata(s, "ns", "init", "user-data", &ud, msg, sizeof(msg)),
                     VMG_ENOTFOUND);
    cJSON_Delete(s);
    /* Not base64. */
    for (size_t i = 0; i < 4; i++) {
        static const char *const bad[] = {"abc", "ab=c", "a$bc", "a==="};
        s = secret_with("user-data", bad[i]);
        assert_int_equal(bootstrap_userdata(s, "ns", "init", "user-data", &ud, msg, sizeof(msg)),
                         VMG_EPARSE);
        cJSON_Delete(s);
    }
    /* Empty user data is allowed. */
    s = secret_with("user-data", "");
    assert_int_equal(bootstrap_userdata(s, "ns", "init", "user-data", &ud, msg, sizeof(msg)), 0);
    cJSON_Delete(s);
    /* 64 KiB exactly passes, one byte more is refused. */
    n = 4 * ((BOOTSTRAP_MAX_USERDATA + 2) / 3);
    big = malloc(n + 5);
    assert_non_null(big);
    memset(big, 'A', n);
    /* 65536 = 3 * 21845 + 1: the last group holds one byte, "AA==". */
    big[n - 2] = big[n - 1] = '=';
    big[n] = '\0';
    s = secret_with("user-data", big);
    assert_int_equal(bootstrap_userdata(s, "ns", "init", "user-data", &ud, msg, sizeof(msg)), 0);
    cJSON_Delete(s);
    big[n - 2] = 'A'; /* 65537 bytes */
    s = secret_with("user-data", big);
    assert_int_equal(bootstrap_userdata(s, "ns", "init", "user-data", &ud, msg, sizeof(msg)),
                     VMG_ETOOBIG);
    assert_non_null(strstr(msg, "64 KiB"));
    cJSON_Delete(s);
    memset(big, 'A', n + 4);
    big[n + 4] = '\0';
    s = secret_with("user-data", big);
    assert_int_equal(bootstrap_userdata(s, "ns", "init", "user-data", &ud, msg, sizeof(msg)),
                     VMG_ETOOBIG);
    cJSON_Delete(s);
    free(big);
}

static void test_guestinfo(void **state)
{
    struct bootstrap_guestinfo a, b;
    char json[BOOTSTRAP_MAX_METADATA];

    (void)state;
    assert_int_equal(bootstrap_guestinfo("I2Nsb3VkLWNvbmZpZwo=", "web-0",
                                         "3f0c1b9e-0d5e-4c2a-9a56-7b1e2f3a4b5c", &a),
                     0);
    assert_int_equal(bootstrap_guestinfo("I2Nsb3VkLWNvbmZpZwo=", "web-1",
                                         "3f0c1b9e-0d5e-4c2a-9a56-7b1e2f3a4b5c", &b),
                     0);
    assert_string_equal(a.kv[0].key, "guestinfo.userdata");
    assert_string_equal(a.kv[0].value, "I2Nsb3VkLWNvbmZpZwo=");
    /* The user data is the secret one; the metadata is not. */
    assert_true(a.kv[0].secret);
    for (size_t i = 1; i < BOOTSTRAP_N_KEYS; i++)
        assert_false(a.kv[i].secret);
    assert_string_equal(a.kv[1].key, "guestinfo.userdata.encoding");
    assert_string_equal(a.kv[1].value, "base64");
    assert_string_equal(a.kv[2].key, "guestinfo.metadata");
    assert_string_equal(a.kv[3].key, "guestinfo.metadata.encoding");
    assert_string_equal(a.kv[3].value, "base64");
    /* Each VM its own identity. */
    assert_string_not_equal(a.kv[2].value, b.kv[2].value);
    b64d(b.kv[2].value, json, sizeof(json));
    assert_string_equal(json, "{\"instance-id\":\"web-1.3f0c1b9e-0d5e-4c2a-9a56-7b1e2f3a4b5c\","
                              "\"local-hostname\":\"web-1\"}");
    /* web-0 of another group (another namespace): another instance. */
    assert_int_equal(bootstrap_guestinfo("I2Nsb3VkLWNvbmZpZwo=", "web-0", "9d1e", &b), 0);
    assert_string_not_equal(a.kv[2].value, b.kv[2].value);
    b64d(b.kv[2].value, json, sizeof(json));
    assert_string_equal(json, "{\"instance-id\":\"web-0.9d1e\",\"local-hostname\":\"web-0\"}");
    assert_int_equal(bootstrap_guestinfo(NULL, "web-0", "9d1e", &a), -EINVAL);
    assert_int_equal(bootstrap_guestinfo("I2Nsb3VkLWNvbmZpZwo=", "web-0", "", &a), -EINVAL);
    assert_int_equal(bootstrap_guestinfo("I2Nsb3VkLWNvbmZpZwo=", "web-0", NULL, &a), -EINVAL);
}

/* ---- bootstrap_clone over a fake world ---- */

struct fake {
    const struct vmgroup *g;
    int get_rc, clone_rc;
    unsigned gets, clones;
    char got_ns[64], got_name[64];
    rec_secret_cb scb;
    void *scbdata;
    size_t n_extra;
    char extra[BOOTSTRAP_N_KEYS][2][256];
    char vm[64];
    unsigned dones;
    int done_err;
    char done_fault[64], done_msg[512];
};

static struct fake F;

static const struct vmgroup *f_get_group(void *data, const char *key)
{
    (void)data;
    (void)key;
    return F.g;
}

static int f_get_secret(void *data, const char *ns, const char *name, rec_secret_cb cb,
                        void *cbdata)
{
    (void)data;
    F.gets++;
    snprintf(F.got_ns, sizeof(F.got_ns), "%s", ns);
    snprintf(F.got_name, sizeof(F.got_name), "%s", name);
    F.scb = cb;
    F.scbdata = cbdata;
    return F.get_rc;
}

static int f_clone(void *d, const struct vmgroup *g, const char *folder, const char *vm,
                   const char *t, int cpu, int mem, const struct rec_keyval *extra, size_t n_extra,
                   rec_done_cb cb, void *cbdata)
{
    (void)d;
    (void)g;
    (void)folder;
    (void)t;
    (void)cpu;
    (void)mem;
    (void)cb;
    (void)cbdata;
    F.clones++;
    F.n_extra = n_extra;
    snprintf(F.vm, sizeof(F.vm), "%s", vm);
    for (size_t i = 0; i < n_extra && i < BOOTSTRAP_N_KEYS; i++) {
        snprintf(F.extra[i][0], sizeof(F.extra[i][0]), "%s", extra[i].key);
        snprintf(F.extra[i][1], sizeof(F.extra[i][1]), "%s", extra[i].value);
    }
    return F.clone_rc;
}

static void f_done(void *cbdata, int err, const char *fault, const char *msg)
{
    (void)cbdata;
    F.dones++;
    F.done_err = err;
    snprintf(F.done_fault, sizeof(F.done_fault), "%s", fault ? fault : "");
    snprintf(F.done_msg, sizeof(F.done_msg), "%s", msg ? msg : "");
}

static const struct rec_world world = {
    .get_group = f_get_group,
    .get_secret = f_get_secret,
    .clone = f_clone,
};

static struct vmgroup *group_uid(const char *uid, const char *bootstrap)
{
    char json[1024];
    cJSON *o;
    struct vmgroup *g = NULL;

    snprintf(json, sizeof(json),
             "{\"metadata\":{\"name\":\"web\",\"namespace\":\"team-a\",\"uid\":\"%s\"},"
             "\"spec\":{\"cpu\":1,\"memory\":1,\"replicas\":2,\"template\":\"t\"%s}}",
             uid, bootstrap);
    o = cJSON_Parse(json);
    assert_non_null(o);
    assert_int_equal(vmgroup_from_json(o, &g, NULL, 0), 0);
    cJSON_Delete(o);
    return g;
}

static struct vmgroup *group(const char *bootstrap)
{
    return group_uid("u1", bootstrap);
}

static void start(const char *vm)
{
    assert_int_equal(bootstrap_clone(&world, F.g, "folder", vm, "t", 1, 1024, f_done, NULL), 0);
}

static void test_clone_plain(void **state)
{
    struct vmgroup *g = group("");

    (void)state;
    memset(&F, 0, sizeof(F));
    F.g = g;
    start("web-0");
    assert_int_equal(F.gets, 0);
    assert_int_equal(F.clones, 1);
    assert_int_equal(F.n_extra, 0);
    vmgroup_free(g);
}

static void test_clone_with_secret(void **state)
{
    struct vmgroup *g =
        group(",\"bootstrap\":{\"cloudInit\":{\"secretRef\":{\"name\":\"init\",\"key\":\"ud\"}}}");
    cJSON *s = secret_with("ud", "I2Nsb3VkLWNvbmZpZwo=");
    char meta0[256];

    (void)state;
    memset(&F, 0, sizeof(F));
    F.g = g;
    start("web-0");
    /* Nothing is cloned before the Secret is read. */
    assert_int_equal(F.gets, 1);
    assert_int_equal(F.clones, 0);
    assert_string_equal(F.got_ns, "team-a");
    assert_string_equal(F.got_name, "init");
    F.scb(F.scbdata, 0, NULL, s);
    assert_int_equal(F.clones, 1);
    assert_int_equal(F.dones, 0); /* the clone's own callback is the world's */
    assert_int_equal(F.n_extra, BOOTSTRAP_N_KEYS);
    assert_string_equal(F.extra[0][0], "guestinfo.userdata");
    assert_string_equal(F.extra[0][1], "I2Nsb3VkLWNvbmZpZwo=");
    assert_string_equal(F.extra[2][0], "guestinfo.metadata");
    snprintf(meta0, sizeof(meta0), "%s", F.extra[2][1]);
    start("web-1");
    F.scb(F.scbdata, 0, NULL, s);
    assert_int_equal(F.clones, 2);
    assert_string_equal(F.vm, "web-1");
    assert_string_not_equal(F.extra[2][1], meta0);
    cJSON_Delete(s);
    vmgroup_free(g);
}

/* Each failure ends the clone with a fault; those only a user mends block. */
static void test_clone_failures(void **state)
{
    static const char b[] = ",\"bootstrap\":{\"cloudInit\":{\"secretRef\":{\"name\":\"init\"}}}";
    struct vmgroup *g = group(b), *again = group_uid("u2", b);
    cJSON *other = secret_with("other", "I2Nsb3VkLWNvbmZpZwo=");
    cJSON *bad = secret_with("user-data", "not base64!");
    cJSON *good;
    static const struct {
        int err;
        bool use_other, use_bad;
        const char *fault;
        bool blocks;
        const char *in_msg;
    } cases[] = {
        {VMG_ENOTFOUND, false, false, "BootstrapSecretNotFound", true, "team-a/init"},
        {VMG_ENOTFOUND, false, false, "BootstrapSecretNotFound", true, "\"user-data\""},
        {VMG_EFORBIDDEN, false, false, "BootstrapSecretForbidden", true, "team-a/init"},
        {VMG_ETRANSPORT, false, false, "BootstrapSecretUnreadable", false, "team-a/init"},
        {0, true, false, "BootstrapKeyNotFound", true, "\"user-data\""},
        {0, false, true, "BootstrapUserDataInvalid", true, "not base64"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(&F, 0, sizeof(F));
        F.g = g;
        start("web-0");
        F.scb(F.scbdata, cases[i].err, "boom",
              cases[i].use_other ? other
              : cases[i].use_bad ? bad
                                 : NULL);
        assert_int_equal(F.clones, 0);
        assert_int_equal(F.dones, 1);
        assert_true(F.done_err < 0);
        assert_string_equal(F.done_fault, cases[i].fault);
        assert_true((outcome_bootstrap_block(F.done_fault) != NULL) == cases[i].blocks);
        if (!strstr(F.done_msg, cases[i].in_msg))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, F.done_msg, cases[i].in_msg);
    }
    /* The clone refused at once: reported through the callback. */
    memset(&F, 0, sizeof(F));
    F.g = g;
    F.clone_rc = -ENOMEM;
    start("web-0");
    good = secret_with("user-data", "I2Nsb3VkLWNvbmZpZwo=");
    F.scb(F.scbdata, 0, NULL, good);
    cJSON_Delete(good);
    assert_int_equal(F.dones, 1);
    assert_string_equal(F.done_fault, "BootstrapCloneNotStarted");
    /* The read refused at once: returned, no callback. */
    memset(&F, 0, sizeof(F));
    F.g = g;
    F.get_rc = -ENOMEM;
    assert_int_equal(bootstrap_clone(&world, g, "folder", "web-0", "t", 1, 1024, f_done, NULL),
                     -ENOMEM);
    assert_int_equal(F.dones, 0);
    /* The group gone while the Secret was read, or gone and made again
     * under its name (another UID, whose VM this is not, with the old
     * group's Secret): no clone, a failure that does not block. */
    for (int i = 0; i < 2; i++) {
        memset(&F, 0, sizeof(F));
        F.g = g;
        start("web-0");
        F.g = i == 0 ? NULL : again;
        good = secret_with("user-data", "I2Nsb3VkLWNvbmZpZwo=");
        F.scb(F.scbdata, 0, NULL, good);
        cJSON_Delete(good);
        assert_int_equal(F.clones, 0);
        assert_int_equal(F.dones, 1);
        assert_string_equal(F.done_fault, "BootstrapCloneNotStarted");
        assert_null(outcome_bootstrap_block(F.done_fault));
        assert_non_null(strstr(F.done_msg, i == 0 ? "the VmGroup is gone"
                                                  : "deleted, and this one made since"));
    }
    /* Canceled: no fault, VMG_ECANCELED. */
    memset(&F, 0, sizeof(F));
    F.g = g;
    start("web-0");
    F.scb(F.scbdata, VMG_ECANCELED, NULL, NULL);
    assert_int_equal(F.done_err, VMG_ECANCELED);
    assert_null(outcome_bootstrap_block(NULL));
    assert_null(outcome_bootstrap_block("DuplicateName"));
    cJSON_Delete(other);
    cJSON_Delete(bad);
    vmgroup_free(g);
    vmgroup_free(again);
}

/* A RUNNING group with a bootstrap says which Secret, and that a change of
 * it applies to VMs created afterwards; it never shows the content. */
static void test_planner_status(void **state)
{
    struct vmgroup *g = group(",\"bootstrap\":{\"cloudInit\":{\"secretRef\":{\"name\":\"init\"}}}");
    struct vmgroup *plain = group("");
    struct plan_vm vms[2] = {
        {.name = "web-0",
         .mark_uid = "u1",
         .template = "t",
         .powered_on = true,
         .num_cpu = 1,
         .memory_mb = 1024,
         .create_order = 1},
        {.name = "web-1",
         .mark_uid = "u1",
         .template = "t",
         .powered_on = true,
         .num_cpu = 1,
         .memory_mb = 1024,
         .create_order = 2},
    };
    struct planner_input in = {.vms = vms,
                               .n_vms = 2,
                               .folder = PLAN_FOLDER_PRESENT,
                               .now = "2024-05-01T10:00:00Z",
                               .max_inflight = 4};
    struct plan *p = NULL;
    const char *fin = VMGROUP_FINALIZER;

    (void)state;
    /* The finalizer is there: the group is in sync. */
    g->meta.finalizers = &fin;
    g->meta.n_finalizers = 1;
    plain->meta.finalizers = &fin;
    plain->meta.n_finalizers = 1;
    in.g = g;
    assert_int_equal(planner_plan(&in, &p), 0);
    assert_int_equal(p->status.phase, VMGROUP_PHASE_RUNNING);
    assert_non_null(strstr(p->status.last_message, "Secret \"init\""));
    assert_non_null(strstr(p->status.last_message, "applies to VMs created afterwards"));
    plan_free(p);
    in.g = plain;
    assert_int_equal(planner_plan(&in, &p), 0);
    assert_int_equal(p->status.phase, VMGROUP_PHASE_RUNNING);
    assert_null(strstr(p->status.last_message, "Secret"));
    plan_free(p);
    vmgroup_free(g);
    vmgroup_free(plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metadata),          cmocka_unit_test(test_userdata),
        cmocka_unit_test(test_guestinfo),         cmocka_unit_test(test_clone_plain),
        cmocka_unit_test(test_clone_with_secret), cmocka_unit_test(test_clone_failures),
        cmocka_unit_test(test_planner_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
