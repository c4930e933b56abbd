/* test_vmgroup.c: decoding VmGroups from the API server's JSON, encoding
 * their status, and the finalizer patch. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/vmgroup.h"
#include "lib/err.h"

/* What a watch event carries for a VmGroup, managedFields and all. */
static const char realistic[] =
    "{\"apiVersion\":\"vm.codeconnect.vmworld.com/v1alpha1\",\"kind\":\"VmGroup\","
    "\"metadata\":{\"annotations\":{\"kubectl.kubernetes.io/last-applied-configuration\":"
    "\"{\\\"apiVersion\\\":\\\"vm.codeconnect.vmworld.com/"
    "v1alpha1\\\",\\\"kind\\\":\\\"VmGroup\\\","
    "\\\"metadata\\\":{\\\"annotations\\\":{},\\\"name\\\":\\\"web\\\",\\\"namespace\\\":"
    "\\\"default\\\"},\\\"spec\\\":{\\\"cpu\\\":2,\\\"memory\\\":4,\\\"replicas\\\":3,"
    "\\\"template\\\":\\\"ubuntu-22.04\\\"}}\\n\"},"
    "\"creationTimestamp\":\"2024-05-01T10:00:00Z\",\"finalizers\":"
    "[\"vm.codeconnect.vmworld.com/finalizer\"],\"generation\":4,"
    "\"labels\":{\"app\":\"web\",\"tier\":\"frontend\"},"
    "\"managedFields\":[{\"apiVersion\":\"vm.codeconnect.vmworld.com/v1alpha1\","
    "\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{\"f:annotations\":{\".\":{},"
    "\"f:kubectl.kubernetes.io/last-applied-configuration\":{}}},\"f:spec\":{\".\":{},"
    "\"f:cpu\":{},\"f:memory\":{},\"f:replicas\":{},\"f:template\":{}}},\"manager\":"
    "\"kubectl-client-side-apply\",\"operation\":\"Update\",\"time\":\"2024-05-01T10:00:00Z\"},"
    "{\"apiVersion\":\"vm.codeconnect.vmworld.com/v1alpha1\",\"fieldsType\":\"FieldsV1\","
    "\"fieldsV1\":{\"f:status\":{\".\":{},\"f:conditions\":{},\"f:currentReplicas\":{},"
    "\"f:desiredReplicas\":{},\"f:lastMessage\":{},\"f:observedGeneration\":{},\"f:phase\":{}}},"
    "\"manager\":\"vmgroup-operator\",\"operation\":\"Update\",\"subresource\":\"status\","
    "\"time\":\"2024-05-01T10:05:00Z\"}],"
    "\"name\":\"web\",\"namespace\":\"default\",\"resourceVersion\":\"123456\","
    "\"uid\":\"6f1c2a6e-3b7d-4a52-9b1e-0c8f4d2a9e11\"},"
    "\"spec\":{\"cpu\":2,\"memory\":4,\"replicas\":3,\"template\":\"ubuntu-22.04\"},"
    "\"status\":{\"phase\":\"RUNNING\",\"currentReplicas\":3,\"desiredReplicas\":3,"
    "\"lastMessage\":\"all 3 VMs running\",\"observedGeneration\":4,\"conditions\":["
    "{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"AllReplicasRunning\","
    "\"message\":\"all 3 VMs running\",\"lastTransitionTime\":\"2024-05-01T10:05:00Z\"},"
    "{\"type\":\"Progressing\",\"status\":\"False\",\"reason\":\"UpToDate\","
    "\"message\":\"all 3 VMs running\",\"lastTransitionTime\":\"2024-05-01T10:05:00Z\"},"
    "{\"type\":\"Degraded\",\"status\":\"False\",\"reason\":\"AsExpected\","
    "\"message\":\"nothing needs attention\",\"lastTransitionTime\":\"2024-05-01T10:00:00Z\"}]}}";

static int decode(const char *json, struct vmgroup **ret, char *err, size_t errlen)
{
    cJSON *obj = cJSON_Parse(json);
    int r;

    assert_non_null(obj);
    r = vmgroup_from_json(obj, ret, err, errlen);
    cJSON_Delete(obj);
    return r;
}

static void test_realistic(void **state)
{
    struct vmgroup *g = NULL;
    char err[256] = "";
    const struct vmgroup_condition *c;

    (void)state;
    assert_int_equal(decode(realistic, &g, err, sizeof(err)), 0);
    /* The tree is gone: everything lives in g. */
    assert_string_equal(g->meta.ns, "default");
    assert_string_equal(g->meta.name, "web");
    assert_string_equal(g->meta.uid, "6f1c2a6e-3b7d-4a52-9b1e-0c8f4d2a9e11");
    assert_string_equal(g->meta.resource_version, "123456");
    assert_int_equal(g->meta.generation, 4);
    assert_false(g->meta.deleting);
    assert_int_equal(g->meta.n_finalizers, 1);
    assert_true(vmgroup_has_finalizer(g, VMGROUP_FINALIZER));
    assert_false(vmgroup_has_finalizer(g, "other/finalizer"));
    assert_int_equal(g->spec.cpu, 2);
    assert_int_equal(g->spec.memory, 4);
    assert_int_equal(g->spec.replicas, 3);
    assert_string_equal(g->spec.template, "ubuntu-22.04");
    assert_int_equal(g->status.phase, VMGROUP_PHASE_RUNNING);
    assert_int_equal(g->status.current_replicas, 3);
    assert_int_equal(g->status.desired_replicas, 3);
    assert_int_equal(g->status.observed_generation, 4);
    assert_string_equal(g->status.last_message, "all 3 VMs running");
    assert_false(g->status.incomplete);
    assert_int_equal(g->status.n_conditions, 3);
    c = vmgroup_condition_find(&g->status, "Progressing");
    assert_non_null(c);
    assert_int_equal(c->status, VMGROUP_COND_FALSE);
    assert_string_equal(c->reason, "UpToDate");
    assert_string_equal(c->last_transition_time, "2024-05-01T10:05:00Z");
    assert_null(vmgroup_condition_find(&g->status, "Available"));
    /* managedFields, annotations and labels are not kept: the whole object
     * is well below the 1 KiB budget, and below a third of its JSON. */
    assert_true(g->footprint < 1024);
    assert_true(g->footprint < strlen(realistic) / 3);
    vmgroup_free(g);
}

static void test_deleting_and_minimal(void **state)
{
    struct vmgroup *g = NULL;
    char err[256] = "";

    (void)state;
    assert_int_equal(decode("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\","
                            "\"deletionTimestamp\":\"2024-05-01T10:00:00Z\",\"finalizers\":"
                            "[\"x/y\",\"vm.codeconnect.vmworld.com/finalizer\"]},"
                            "\"spec\":{\"cpu\":1,\"memory\":1,\"replicas\":0,\"template\":\"\"}}",
                            &g, err, sizeof(err)),
                     0);
    assert_true(g->meta.deleting);
    assert_string_equal(g->meta.resource_version, "");
    assert_int_equal(g->meta.generation, 0);
    assert_int_equal(g->meta.n_finalizers, 2);
    assert_string_equal(g->meta.finalizers[0], "x/y");
    assert_true(vmgroup_has_finalizer(g, VMGROUP_FINALIZER));
    assert_string_equal(g->spec.template, "");
    /* No status yet: zero, incomplete, strings "". */
    assert_true(g->status.incomplete);
    assert_int_equal(g->status.phase, VMGROUP_PHASE_NONE);
    assert_string_equal(g->status.last_message, "");
    assert_int_equal(g->status.n_conditions, 0);
    vmgroup_free(g);

    /* A null deletionTimestamp is no deletion. */
    assert_int_equal(decode("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\","
                            "\"deletionTimestamp\":null,\"finalizers\":null},"
                            "\"spec\":{\"cpu\":1,\"memory\":1,\"replicas\":0,\"template\":\"t\"}}",
                            &g, err, sizeof(err)),
                     0);
    assert_false(g->meta.deleting);
    assert_int_equal(g->meta.n_finalizers, 0);
    assert_false(vmgroup_has_finalizer(g, VMGROUP_FINALIZER));
    vmgroup_free(g);
    vmgroup_free(NULL);
}

/* Each bad input is refused with VMG_EPARSE and a message naming the field. */
static void test_rejected(void **state)
{
    static const struct {
        const char *json;
        const char *field; /* expected in the message */
    } cases[] = {
        {"[]", "VmGroup"},
        {"{\"kind\":\"Pod\",\"metadata\":{},\"spec\":{}}", "kind"},
        {"{\"spec\":{}}", "metadata: missing"},
        {"{\"metadata\":[],\"spec\":{}}", "metadata: want an object"},
        {"{\"metadata\":{\"namespace\":\"n\",\"uid\":\"u\"},\"spec\":{}}",
         "metadata.name: missing"},
        {"{\"metadata\":{\"name\":7,\"namespace\":\"n\",\"uid\":\"u\"},\"spec\":{}}",
         "metadata.name: want a string"},
        {"{\"metadata\":{\"name\":\"\",\"namespace\":\"n\",\"uid\":\"u\"},\"spec\":{}}",
         "metadata.name: empty"},
        {"{\"metadata\":{\"name\":\"a\",\"uid\":\"u\"},\"spec\":{}}", "metadata.namespace"},
        {"{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\"},\"spec\":{}}", "metadata.uid"},
        {"{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\",\"generation\":\"1\"},"
         "\"spec\":{}}",
         "metadata.generation"},
        {"{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\",\"generation\":-1},"
         "\"spec\":{}}",
         "metadata.generation"},
        {"{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\",\"resourceVersion\":5},"
         "\"spec\":{}}",
         "metadata.resourceVersion"},
        {"{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\",\"finalizers\":\"x\"},"
         "\"spec\":{}}",
         "metadata.finalizers: want an array"},
        {"{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\",\"finalizers\":[1]},"
         "\"spec\":{}}",
         "metadata.finalizers[0]"},
        {"{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\","
         "\"deletionTimestamp\":1},\"spec\":{}}",
         "metadata.deletionTimestamp"},
        {"{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\"}}", "spec: missing"},
        {"{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\"},\"spec\":"
         "{\"memory\":1,\"replicas\":1,\"template\":\"t\"}}",
         "spec.cpu: missing"},
        {"{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\"},\"spec\":"
         "{\"cpu\":\"2\",\"memory\":1,\"replicas\":1,\"template\":\"t\"}}",
         "spec.cpu: want a 32-bit integer"},
        {"{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\"},\"spec\":"
         "{\"cpu\":2.5,\"memory\":1,\"replicas\":1,\"template\":\"t\"}}",
         "spec.cpu"},
        {"{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\"},\"spec\":"
         "{\"cpu\":1,\"memory\":1,\"replicas\":4294967296,\"template\":\"t\"}}",
         "spec.replicas"},
        {"{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\"},\"spec\":"
         "{\"cpu\":1,\"memory\":true,\"replicas\":1,\"template\":\"t\"}}",
         "spec.memory"},
        {"{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\"},\"spec\":"
         "{\"cpu\":1,\"memory\":1,\"replicas\":1,\"template\":[\"t\"]}}",
         "spec.template"},
        {"{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\"},\"spec\":"
         "{\"cpu\":1,\"memory\":1,\"replicas\":1}}",
         "spec.template: missing"},
    };
    char err[256];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct vmgroup *g = NULL;
        err[0] = '\0';
        int r = decode(cases[i].json, &g, err, sizeof(err));
        if (r != VMG_EPARSE || !strstr(err, cases[i].field))
            fail_msg("case %zu: r=%d err=\"%s\", want \"%s\"", i, r, err, cases[i].field);
        assert_null(g); /* no output on failure */
    }
    /* NULL err is fine. */
    struct vmgroup *g = NULL;
    cJSON *obj = cJSON_Parse("{}");
    assert_int_equal(vmgroup_from_json(obj, &g, NULL, 0), VMG_EPARSE);
    cJSON_Delete(obj);
}

/* Bounds: a name over 253 bytes is refused; too many finalizers too. */
static void test_bounds(void **state)
{
    char *json = malloc(8192), name[300], err[256] = "";
    struct vmgroup *g = NULL;
    size_t len;

    (void)state;
    assert_non_null(json);
    memset(name, 'a', 254);
    name[254] = '\0';
    snprintf(json, 8192,
             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"n\",\"uid\":\"u\"},\"spec\":"
             "{\"cpu\":1,\"memory\":1,\"replicas\":1,\"template\":\"t\"}}",
             name);
    assert_int_equal(decode(json, &g, err, sizeof(err)), VMG_EPARSE);
    assert_non_null(strstr(err, "metadata.name"));
    name[253] = '\0';
    snprintf(json, 8192,
             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"n\",\"uid\":\"u\"},\"spec\":"
             "{\"cpu\":1,\"memory\":1,\"replicas\":1,\"template\":\"t\"}}",
             name);
    assert_int_equal(decode(json, &g, err, sizeof(err)), 0);
    assert_int_equal(strlen(g->meta.name), 253);
    vmgroup_free(g);
    g = NULL;

    len = (size_t)snprintf(json, 8192,
                           "{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\","
                           "\"uid\":\"u\",\"finalizers\":[");
    for (int i = 0; i <= VMGROUP_MAX_FINALIZERS; i++)
        len += (size_t)snprintf(json + len, 8192 - len, "%s\"f/%d\"", i ? "," : "", i);
    snprintf(json + len, 8192 - len,
             "]},\"spec\":{\"cpu\":1,\"memory\":1,\"replicas\":1,\"template\":\"t\"}}");
    assert_int_equal(decode(json, &g, err, sizeof(err)), VMG_EPARSE);
    assert_non_null(strstr(err, "metadata.finalizers"));
    free(json);
}

/* A status that cannot be read is not an error: it is marked incomplete so
 * the controller rewrites it. */
static void test_status_lenient(void **state)
{
    static const char *statuses[] = {
        "\"status\":\"bad\"",
        "\"status\":{}",
        "\"status\":{\"phase\":\"WEIRD\",\"currentReplicas\":1,\"desiredReplicas\":1,"
        "\"lastMessage\":\"m\",\"observedGeneration\":1,\"conditions\":[]}",
        "\"status\":{\"phase\":\"RUNNING\",\"currentReplicas\":\"1\",\"desiredReplicas\":1,"
        "\"lastMessage\":\"m\",\"observedGeneration\":1,\"conditions\":[]}",
        "\"status\":{\"phase\":\"RUNNING\",\"currentReplicas\":1,\"desiredReplicas\":1,"
        "\"lastMessage\":\"m\",\"observedGeneration\":1,\"conditions\":[{\"type\":\"Ready\"}]}",
        "\"status\":{\"phase\":\"RUNNING\",\"currentReplicas\":1,\"desiredReplicas\":1,"
        "\"lastMessage\":\"m\",\"observedGeneration\":1}",
        "\"status\":{\"phase\":\"RUNNING\",\"currentReplicas\":1,\"desiredReplicas\":1,"
        "\"lastMessage\":\"m\",\"observedGeneration\":1,\"conditions\":[{\"type\":\"A\","
        "\"status\":\"Maybe\",\"reason\":\"R\",\"message\":\"m\",\"lastTransitionTime\":\"t\"}]}",
    };
    char json[1024], err[256];

    (void)state;
    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        struct vmgroup *g = NULL;
        snprintf(json, sizeof(json),
                 "{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\"},\"spec\":"
                 "{\"cpu\":1,\"memory\":1,\"replicas\":1,\"template\":\"t\"},%s}",
                 statuses[i]);
        assert_int_equal(decode(json, &g, err, sizeof(err)), 0);
        if (!g->status.incomplete)
            fail_msg("status %zu should be incomplete", i);
        assert_false(vmgroup_status_equal(&g->status, &g->status));
        vmgroup_free(g);
    }
}

/* Encoding a status and decoding it again gives the same status. */
static void test_status_round_trip(void **state)
{
    struct vmgroup_status s = {
        .phase = VMGROUP_PHASE_PENDING,
        .current_replicas = 2,
        .desired_replicas = 5,
        .observed_generation = 9007199254740991LL,
        .last_message = "creating 3 VMs (2 of 5 exist) \xc3\xa9\"quoted\"\n",
        .n_conditions = 3,
        .conditions =
            {
                {"Ready", "ScalingUp", "m1", "2024-05-01T10:00:00Z", VMGROUP_COND_FALSE},
                {"Progressing", "ScalingUp", "m1", "2024-05-01T10:00:01Z", VMGROUP_COND_TRUE},
                {"Degraded", "AsExpected", "", "2024-05-01T10:00:02Z", VMGROUP_COND_UNKNOWN},
            },
    };
    cJSON *js = NULL, *obj;
    struct vmgroup *g = NULL;
    char err[256] = "";

    (void)state;
    assert_int_equal(vmgroup_status_to_json(&s, NULL, &js), 0);
    assert_string_equal(cJSON_GetObjectItem(js, "phase")->valuestring, "PENDING");
    assert_string_equal(cJSON_GetObjectItem(js, "observedGeneration")->valuestring,
                        "9007199254740991");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(js, "conditions")), 3);
    obj = cJSON_Parse("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\"},"
                      "\"spec\":{\"cpu\":1,\"memory\":1,\"replicas\":1,\"template\":\"t\"}}");
    assert_non_null(obj);
    /* Through text, as it travels. */
    char *text = cJSON_PrintUnformatted(js);
    cJSON_Delete(js);
    assert_non_null(text);
    cJSON_AddItemToObject(obj, "status", cJSON_Parse(text));
    free(text);
    assert_int_equal(vmgroup_from_json(obj, &g, err, sizeof(err)), 0);
    cJSON_Delete(obj);
    assert_false(g->status.incomplete);
    assert_true(vmgroup_status_equal(&s, &g->status));
    assert_string_equal(g->status.last_message, s.last_message);

    /* Any one difference makes them unequal. */
    struct vmgroup_status t = g->status;
    t.current_replicas = 3;
    assert_false(vmgroup_status_equal(&s, &t));
    t = g->status;
    t.conditions[1].last_transition_time = "2024-05-01T10:00:09Z";
    assert_false(vmgroup_status_equal(&s, &t));
    t = g->status;
    t.conditions[2].status = VMGROUP_COND_TRUE;
    assert_false(vmgroup_status_equal(&s, &t));
    t = g->status;
    t.n_conditions = 2;
    assert_false(vmgroup_status_equal(&s, &t));
    t = g->status;
    t.last_message = "other";
    assert_false(vmgroup_status_equal(&s, &t));
    t = g->status;
    t.phase = VMGROUP_PHASE_RUNNING;
    assert_false(vmgroup_status_equal(&s, &t));
    vmgroup_free(g);
    assert_int_equal(vmgroup_status_to_json(NULL, NULL, &js), -EINVAL);
}

/* sel_decode decodes a group with that UID and a complete status, extra
 * (JSON members, "" for none) added to the status. */
static void sel_decode(const char *uid, const char *extra, struct vmgroup **g)
{
    char json[1024], err[256];

    snprintf(json, sizeof(json),
             "{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"%s\"},"
             "\"spec\":{\"cpu\":1,\"memory\":1,\"replicas\":1,\"template\":\"t\"},"
             "\"status\":{\"phase\":\"RUNNING\",\"currentReplicas\":1,\"desiredReplicas\":1,"
             "\"lastMessage\":\"m\",\"observedGeneration\":1,\"conditions\":[]%s}}",
             uid, extra);
    assert_int_equal(decode(json, g, err, sizeof(err)), 0);
}

/* status.selector: absent is "" (complete); read back as written; a wrong
 * type or beyond the bound is incomplete. vmgroup_selector refuses a UID
 * that is no label value. */
static void test_selector(void **state)
{
    static const char *bad[] = {"-a", "a-", "a b", "a/b",
                                "0123456789012345678901234567890123456789012345678901234567890123"};
    char buf[VMGROUP_MAX_SELECTOR + 1], big[VMGROUP_MAX_SELECTOR + 32];
    struct vmgroup *g = NULL;

    (void)state;
    sel_decode("u", "", &g);
    assert_false(g->status.incomplete);
    assert_string_equal(g->status.selector, "");
    assert_int_equal(vmgroup_selector(g, buf, sizeof(buf)), (int)strlen(VMGROUP_SELECTOR_KEY "=u"));
    assert_string_equal(buf, "vm.codeconnect.vmworld.com/vmgroup-uid=u");
    assert_int_equal(vmgroup_selector(g, buf, 10), -EINVAL);
    assert_int_equal(vmgroup_selector(NULL, buf, sizeof(buf)), -EINVAL);
    vmgroup_free(g);

    sel_decode("6f1c2a6e-3b7d-4a52-9b1e-0c8f4d2a9e11",
               ",\"selector\":\"vm.codeconnect.vmworld.com/vmgroup-uid=x\"", &g);
    assert_false(g->status.incomplete);
    assert_string_equal(g->status.selector, "vm.codeconnect.vmworld.com/vmgroup-uid=x");
    struct vmgroup_status t = g->status;
    t.selector = "";
    assert_false(vmgroup_status_equal(&g->status, &t));
    assert_int_equal(vmgroup_selector(g, buf, sizeof(buf)), 75);
    assert_string_equal(
        buf, "vm.codeconnect.vmworld.com/vmgroup-uid=6f1c2a6e-3b7d-4a52-9b1e-0c8f4d2a9e11");
    vmgroup_free(g);

    sel_decode("u", ",\"selector\":7", &g);
    assert_true(g->status.incomplete);
    vmgroup_free(g);
    memcpy(big, ",\"selector\":\"", 13);
    memset(big + 13, 'x', sizeof(big) - 15);
    big[sizeof(big) - 2] = '"';
    big[sizeof(big) - 1] = '\0';
    sel_decode("u", big, &g);
    assert_true(g->status.incomplete);
    vmgroup_free(g);

    /* UIDs that are no label value (an empty one is refused by decoding):
     * too long, bad bytes or ends. */
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sel_decode(bad[i], "", &g);
        if (vmgroup_selector(g, buf, sizeof(buf)) != -EINVAL)
            fail_msg("uid \"%s\" should be refused", bad[i]);
        vmgroup_free(g);
    }
}

static void test_finalizer_patch(void **state)
{
    struct vmgroup *g = NULL;
    char err[256] = "", *text;
    cJSON *patch = NULL;

    (void)state;
    /* No finalizer yet: a merge patch that holds the version read. */
    assert_int_equal(decode("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\","
                            "\"resourceVersion\":\"42\"},"
                            "\"spec\":{\"cpu\":1,\"memory\":1,\"replicas\":0,\"template\":\"t\"}}",
                            &g, err, sizeof(err)),
                     0);
    assert_int_equal(vmgroup_finalizer_patch(g, true, &patch), 0);
    text = cJSON_PrintUnformatted(patch);
    assert_string_equal(text, "{\"metadata\":{\"finalizers\":["
                              "\"vm.codeconnect.vmworld.com/finalizer\"],"
                              "\"resourceVersion\":\"42\"}}");
    free(text);
    cJSON_Delete(patch);
    vmgroup_free(g);

    /* With finalizers: a JSON patch that tests them, not the version. */
    assert_int_equal(decode("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\","
                            "\"resourceVersion\":\"42\",\"finalizers\":[\"x/y\"]},"
                            "\"spec\":{\"cpu\":1,\"memory\":1,\"replicas\":0,\"template\":\"t\"}}",
                            &g, err, sizeof(err)),
                     0);
    assert_int_equal(vmgroup_finalizer_patch(g, true, &patch), 0);
    text = cJSON_PrintUnformatted(patch);
    assert_string_equal(text, "[{\"op\":\"test\",\"path\":\"/metadata/uid\",\"value\":\"u\"},"
                              "{\"op\":\"test\",\"path\":\"/metadata/finalizers\","
                              "\"value\":[\"x/y\"]},"
                              "{\"op\":\"replace\",\"path\":\"/metadata/finalizers\","
                              "\"value\":[\"x/y\",\"vm.codeconnect.vmworld.com/finalizer\"]}]");
    free(text);
    cJSON_Delete(patch);
    vmgroup_free(g);

    assert_int_equal(decode("{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\","
                            "\"finalizers\":[\"vm.codeconnect.vmworld.com/finalizer\",\"x/y\"]},"
                            "\"spec\":{\"cpu\":1,\"memory\":1,\"replicas\":0,\"template\":\"t\"}}",
                            &g, err, sizeof(err)),
                     0);
    assert_int_equal(vmgroup_finalizer_patch(g, false, &patch), 0);
    text = cJSON_PrintUnformatted(patch);
    assert_string_equal(text, "[{\"op\":\"test\",\"path\":\"/metadata/uid\",\"value\":\"u\"},"
                              "{\"op\":\"test\",\"path\":\"/metadata/finalizers\","
                              "\"value\":[\"vm.codeconnect.vmworld.com/finalizer\",\"x/y\"]},"
                              "{\"op\":\"replace\",\"path\":\"/metadata/finalizers\","
                              "\"value\":[\"x/y\"]}]");
    free(text);
    cJSON_Delete(patch);
    /* Adding when present keeps one copy. */
    assert_int_equal(vmgroup_finalizer_patch(g, true, &patch), 0);
    text = cJSON_PrintUnformatted(cJSON_GetArrayItem(patch, 2));
    assert_string_equal(text, "{\"op\":\"replace\",\"path\":\"/metadata/finalizers\","
                              "\"value\":[\"vm.codeconnect.vmworld.com/finalizer\",\"x/y\"]}");
    free(text);
    cJSON_Delete(patch);
    vmgroup_free(g);
}

#define BOOT_HEAD                                                                                  \
    "{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\"},\"spec\":"                   \
    "{\"cpu\":1,\"memory\":1,\"replicas\":1,\"template\":\"t\""

/* spec.bootstrap.cloudInit.secretRef: absent, with its key defaulted, with
 * a key; and each malformed form refused naming the field. */
static void test_bootstrap(void **state)
{
    static const struct {
        const char *json;
        const char *field;
    } bad[] = {
        {BOOT_HEAD ",\"bootstrap\":[]}}", "spec.bootstrap: want an object"},
        {BOOT_HEAD ",\"bootstrap\":{}}}", "spec.bootstrap.cloudInit: missing"},
        {BOOT_HEAD ",\"bootstrap\":{\"cloudInit\":7}}}", "spec.bootstrap.cloudInit: want"},
        {BOOT_HEAD ",\"bootstrap\":{\"cloudInit\":{}}}}", "cloudInit.secretRef: missing"},
        {BOOT_HEAD ",\"bootstrap\":{\"cloudInit\":{\"secretRef\":{}}}}}",
         "secretRef.name: missing"},
        {BOOT_HEAD ",\"bootstrap\":{\"cloudInit\":{\"secretRef\":{\"name\":\"\"}}}}}",
         "secretRef.name: empty"},
        {BOOT_HEAD ",\"bootstrap\":{\"cloudInit\":{\"secretRef\":{\"name\":\"../x\"}}}}}",
         "secretRef.name: want a DNS subdomain"},
        {BOOT_HEAD ",\"bootstrap\":{\"cloudInit\":{\"secretRef\":{\"name\":\"Ab\"}}}}}",
         "secretRef.name: want a DNS subdomain"},
        {BOOT_HEAD ",\"bootstrap\":{\"cloudInit\":{\"secretRef\":{\"name\":\"a\",\"key\":\"\"}}}}}",
         "secretRef.key"},
        {BOOT_HEAD
         ",\"bootstrap\":{\"cloudInit\":{\"secretRef\":{\"name\":\"a\",\"key\":\"a/b\"}}}}}",
         "secretRef.key"},
        {BOOT_HEAD ",\"bootstrap\":{\"cloudInit\":{\"secretRef\":{\"name\":\"a\",\"key\":1}}}}}",
         "secretRef.key"},
    };
    struct vmgroup *g = NULL;
    char err[256] = "";

    (void)state;
    assert_int_equal(decode(BOOT_HEAD "}}", &g, err, sizeof(err)), 0);
    assert_string_equal(g->spec.bootstrap.secret_name, "");
    vmgroup_free(g);
    assert_int_equal(decode(BOOT_HEAD ",\"bootstrap\":null}}", &g, err, sizeof(err)), 0);
    assert_string_equal(g->spec.bootstrap.secret_name, "");
    vmgroup_free(g);
    assert_int_equal(
        decode(BOOT_HEAD ",\"bootstrap\":{\"cloudInit\":{\"secretRef\":{\"name\":\"web-init\"}}}}}",
               &g, err, sizeof(err)),
        0);
    assert_string_equal(g->spec.bootstrap.secret_name, "web-init");
    assert_string_equal(g->spec.bootstrap.secret_key, VMGROUP_DEFAULT_SECRET_KEY);
    vmgroup_free(g);
    assert_int_equal(decode(BOOT_HEAD ",\"bootstrap\":{\"cloudInit\":{\"secretRef\":"
                                      "{\"name\":\"a.b-c\",\"key\":\"cloud_init.yaml\"}}}}}",
                            &g, err, sizeof(err)),
                     0);
    assert_string_equal(g->spec.bootstrap.secret_name, "a.b-c");
    assert_string_equal(g->spec.bootstrap.secret_key, "cloud_init.yaml");
    vmgroup_free(g);

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        g = NULL;
        err[0] = '\0';
        int r = decode(bad[i].json, &g, err, sizeof(err));
        if (r != VMG_EPARSE || !strstr(err, bad[i].field))
            fail_msg("case %zu: r=%d err=\"%s\", want \"%s\"", i, r, err, bad[i].field);
        assert_null(g);
    }
    assert_true(vmgroup_secret_name_valid("a"));
    assert_false(vmgroup_secret_name_valid("a-"));
    assert_false(vmgroup_secret_name_valid(".a"));
    assert_false(vmgroup_secret_name_valid(NULL));
    assert_true(vmgroup_secret_key_valid(".dot"));
    assert_false(vmgroup_secret_key_valid("a b"));
}

/* vms_decode decodes a group whose complete status has vms (JSON text) and
 * the other fields given in extra. */
static struct vmgroup *vms_decode(const char *vms, const char *extra)
{
    size_t size = strlen(vms) + strlen(extra) + 512;
    char *json = malloc(size), err[256];
    struct vmgroup *g = NULL;

    assert_non_null(json);
    snprintf(json, size,
             "{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"uid\":\"u\"},"
             "\"spec\":{\"cpu\":1,\"memory\":1,\"replicas\":1,\"template\":\"t\"},"
             "\"status\":{\"phase\":\"RUNNING\",\"currentReplicas\":1,\"desiredReplicas\":1,"
             "\"lastMessage\":\"m\",\"observedGeneration\":1,\"conditions\":[],\"vms\":%s%s}}",
             vms, extra);
    assert_int_equal(decode(json, &g, err, sizeof(err)), 0);
    free(json);
    return g;
}

/* status.vms: written and read back the same, whatever the order of the
 * keys; kept as a count and a digest only; anything it could not have
 * written (wrong types, too long, too many entries or addresses, an empty
 * address list) is incomplete, never an error. */
static void test_status_vms(void **state)
{
    static const struct vmgroup_vm vms[] = {
        {.name = "web-0",
         .instance_uuid = "5000-a",
         .power_state = "poweredOn",
         .template = "tmpl",
         .state = VMGROUP_VM_READY,
         .n_ip = 2,
         .ip = {"10.0.0.5", "2001:db8::5"},
         .cpu = 2,
         .memory_mb = 4096},
        {.name = "web-1", .state = VMGROUP_VM_CREATING},
    };
    struct vmgroup_status s = {.phase = VMGROUP_PHASE_RUNNING,
                               .last_message = "m",
                               .current_replicas = 1,
                               .desired_replicas = 1,
                               .observed_generation = 1,
                               .n_vms = 2,
                               .vms_omitted = 3,
                               .vms_digest = vmgroup_vms_digest(vms, 2)};
    static const char *const bad[] = {
        "[1]",
        "{}",
        "[{\"state\":\"Ready\"}]",
        "[{\"name\":\"\",\"state\":\"Ready\"}]",
        "[{\"name\":\"a\"}]",
        "[{\"name\":\"a\",\"state\":\"Ready\",\"cpu\":-1}]",
        "[{\"name\":\"a\",\"state\":\"Ready\",\"cpu\":1.5}]",
        "[{\"name\":\"a\",\"state\":\"Ready\",\"memoryMB\":\"1\"}]",
        "[{\"name\":\"a\",\"state\":\"Ready\",\"ipAddresses\":[]}]",
        "[{\"name\":\"a\",\"state\":\"Ready\",\"ipAddresses\":\"1.2.3.4\"}]",
        "[{\"name\":\"a\",\"state\":\"Ready\",\"ipAddresses\":[1]}]",
        "[{\"name\":\"a\",\"state\":\"Ready\",\"ipAddresses\":[\"1.1.1.1\",\"1.1.1.2\","
        "\"1.1.1.3\",\"1.1.1.4\",\"1.1.1.5\"]}]",
        "[{\"name\":\"a\",\"state\":\"Ready\",\"ipAddresses\":[\"1234567890123456789012345678901"
        "234567890123456\"]}]",
        "[{\"name\":\"a\",\"state\":\"Ready\",\"powerState\":\"poweredOnpoweredOnpoweredOnpoweredOn"
        "\"}]",
    };
    cJSON *js = NULL;
    struct vmgroup *g;
    char *text, *big;
    size_t n;

    (void)state;
    assert_int_equal(vmgroup_status_to_json(&s, vms, &js), 0);
    text = cJSON_PrintUnformatted(cJSON_GetObjectItem(js, "vms"));
    assert_string_equal(text, "[{\"name\":\"web-0\",\"instanceUUID\":\"5000-a\",\"powerState\":"
                              "\"poweredOn\",\"cpu\":2,\"memoryMB\":4096,\"template\":\"tmpl\","
                              "\"state\":\"Ready\",\"ipAddresses\":[\"10.0.0.5\",\"2001:db8::5\"]},"
                              "{\"name\":\"web-1\",\"state\":\"Creating\"}]");
    free(text);
    assert_int_equal(cJSON_GetObjectItem(js, "vmsOmitted")->valueint, 3);
    cJSON_Delete(js);
    /* The keys in another order (the API server sorts them) read the same. */
    g = vms_decode("[{\"cpu\":2,\"instanceUUID\":\"5000-a\",\"ipAddresses\":[\"10.0.0.5\","
                   "\"2001:db8::5\"],\"memoryMB\":4096,\"name\":\"web-0\",\"powerState\":"
                   "\"poweredOn\",\"state\":\"Ready\",\"template\":\"tmpl\"},"
                   "{\"name\":\"web-1\",\"state\":\"Creating\"}]",
                   ",\"vmsOmitted\":3");
    assert_false(g->status.incomplete);
    assert_int_equal(g->status.n_vms, 2);
    assert_true(vmgroup_status_equal(&s, &g->status));
    /* Any difference in an entry, or in the count of the others, shows. */
    s.vms_omitted = 2;
    assert_false(vmgroup_status_equal(&s, &g->status));
    s.vms_omitted = 3;
    s.vms_digest = vmgroup_vms_digest(vms, 1);
    s.n_vms = 1;
    assert_false(vmgroup_status_equal(&s, &g->status));
    vmgroup_free(g);
    {
        struct vmgroup_vm v2[2] = {vms[0], vms[1]};
        v2[0].ip[1] = "2001:db8::6";
        assert_true(vmgroup_vms_digest(v2, 2) != vmgroup_vms_digest(vms, 2));
        v2[0].ip[1] = vms[0].ip[1];
        v2[1].state = VMGROUP_VM_READY;
        assert_true(vmgroup_vms_digest(v2, 2) != vmgroup_vms_digest(vms, 2));
        /* Fields cannot run into each other. */
        v2[1] = (struct vmgroup_vm){.name = "ab", .instance_uuid = "c", .state = "x"};
        struct vmgroup_vm v3 = {.name = "a", .instance_uuid = "bc", .state = "x"};
        assert_true(vmgroup_vms_digest(&v2[1], 1) != vmgroup_vms_digest(&v3, 1));
    }
    assert_int_equal(vmgroup_vms_digest(NULL, 0), 0);

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        g = vms_decode(bad[i], ",\"vmsOmitted\":0");
        if (!g->status.incomplete)
            fail_msg("vms %s should be incomplete", bad[i]);
        vmgroup_free(g);
    }
    g = vms_decode("[]", ",\"vmsOmitted\":-1");
    assert_true(g->status.incomplete);
    vmgroup_free(g);
    g = vms_decode("[]", "");
    assert_false(g->status.incomplete);
    assert_int_equal(g->status.n_vms, 0);
    vmgroup_free(g);
    /* More entries than are ever written. */
    n = (VMGROUP_MAX_STATUS_VMS + 1) * 32 + 3;
    big = malloc(n);
    assert_non_null(big);
    big[0] = '[';
    size_t len = 1;
    for (int i = 0; i <= VMGROUP_MAX_STATUS_VMS; i++)
        len += (size_t)snprintf(big + len, n - len, "%s{\"name\":\"v%d\",\"state\":\"Ready\"}",
                                i ? "," : "", i);
    snprintf(big + len, n - len, "]");
    g = vms_decode(big, ",\"vmsOmitted\":0");
    assert_true(g->status.incomplete);
    vmgroup_free(g);
    free(big);
    /* A status with its entries not kept is not written. */
    assert_int_equal(vmgroup_status_to_json(&s, NULL, &js), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_realistic),       cmocka_unit_test(test_deleting_and_minimal),
        cmocka_unit_test(test_rejected),        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_status_lenient),  cmocka_unit_test(test_status_round_trip),
        cmocka_unit_test(test_finalizer_patch), cmocka_unit_test(test_selector),
        cmocka_unit_test(test_bootstrap),       cmocka_unit_test(test_status_vms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
