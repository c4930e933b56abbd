/* test_kubeworld.c: the reconciler's Kubernetes side (kubeworld) against a
 * small HTTP server on loopback: the status and finalizer patches reach the
 * group's paths as merge patches, the status wrapped in {"status": ...};
 * an API error reaches the reconciler's callback with its reason; a
 * bootstrap's Secret is one GET; with no
 * informer every group is gone and with no recorder events are dropped. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "controller/kubeworld.h"
#include "controller/vmgroup.h"
#include "kube/kubeconfig.h"
#include "lib/err.h"
#include "lib/http.h"
#include "tests/unit/srv.h"

#define GROUP_PATH "/apis/" VMGROUP_GROUP "/" VMGROUP_VERSION "/namespaces/ns/vmgroups/web"

static const char CONFLICT[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"Operation cannot be fulfilled on vmgroups.vm.codeconnect.vmworld.com "
    "\\\"web\\\": the object has been modified; please apply your changes to the latest "
    "version and try again\",\"reason\":\"Conflict\",\"details\":{\"name\":\"web\"},"
    "\"code\":409}";

struct t {
    uv_loop_t loop;
    struct srv srv;
    char dir[64];
    kcfg *cfg;
    vmg_http *http;
    struct kubeworld kw;
    struct rec_world rw;
    struct vmgroup *g;
    int status;         /* what the server answers */
    int done, err;      /* the callback's calls and last error */
    char reason[64];    /* and fault (the Status reason) */
    char user_data[64]; /* what get_secret's callback saw of data.user-data */
};

static const char SECRET[] =
    "{\"kind\":\"Secret\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"init\","
    "\"namespace\":\"ns\"},\"data\":{\"user-data\":\"I2Nsb3VkLWNvbmZpZwo=\"},\"type\":\"Opaque\"}";

static const char NOT_FOUND[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"secrets \\\"init\\\" not found\",\"reason\":\"NotFound\","
    "\"details\":{\"name\":\"init\",\"kind\":\"secrets\"},\"code\":404}";

/* What kube-apiserver answers when a JSON patch's "test" fails. */
static const char INVALID[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"the server rejected our request due to an error in our request\","
    "\"reason\":\"Invalid\",\"details\":{},\"code\":422}";

/* What it answers when a patch leaves the object invalid. */
static const char INVALID_FIELD[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"VmGroup.vm.codeconnect.vmworld.com \\\"web\\\" is invalid: "
    "metadata.finalizers[0]: Invalid value\",\"reason\":\"Invalid\",\"details\":{\"name\":"
    "\"web\",\"kind\":\"VmGroup\",\"causes\":[{\"reason\":\"FieldValueInvalid\","
    "\"field\":\"metadata.finalizers[0]\"}]},\"code\":422}";

static void handle(struct srv *s, int i, struct sconn *c)
{
    struct t *t = s->data;

    (void)i;
    if (t->status == 404)
        srv_reply(c, 404, "Content-Type: application/json\r\n", NOT_FOUND);
    else if (t->status == 1)
        srv_reply(c, 200, "Content-Type: application/json\r\n", SECRET);
    else if (t->status == 409)
        srv_reply(c, 409, "Content-Type: application/json\r\n", CONFLICT);
    else if (t->status == 422)
        srv_reply(c, 422, "Content-Type: application/json\r\n", INVALID);
    else if (t->status == 423)
        srv_reply(c, 422, "Content-Type: application/json\r\n", INVALID_FIELD);
    else
        srv_reply(c, 200, "Content-Type: application/json\r\n", "{}");
}

static void on_done(void *cbdata, int err, const char *fault, const char *msg)
{
    struct t *t = cbdata;

    (void)msg;
    t->done++;
    t->err = err;
    snprintf(t->reason, sizeof(t->reason), "%s", fault ? fault : "");
}

static struct vmgroup *make_group(void)
{
    const char *json = "{\"metadata\":{\"name\":\"web\",\"namespace\":\"ns\",\"uid\":\"u-1\","
                       "\"resourceVersion\":\"7\",\"generation\":1},"
                       "\"spec\":{\"cpu\":1,\"memory\":1,\"replicas\":1,\"template\":\"t\"}}";
    cJSON *obj = cJSON_Parse(json);
    struct vmgroup *g = NULL;
    char err[256] = "";

    assert_non_null(obj);
    if (vmgroup_from_json(obj, &g, err, sizeof(err)) != 0)
        fail_msg("vmgroup_from_json: %s", err);
    cJSON_Delete(obj);
    return g;
}

/* The environment (KUBECONFIG, in-cluster variables) plays no part. */
static int setup(void **state)
{
    struct t *t = calloc(1, sizeof(*t));
    struct kube_client_opts o = {.qps = -1};
    int rc;

    assert_non_null(t);
    snprintf(t->dir, sizeof(t->dir), "/tmp/test_kubeworld.XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    assert_int_equal(uv_loop_init(&t->loop), 0);
    t->srv.handle = handle;
    t->srv.data = t;
    srv_start(&t->srv, &t->loop);

    t->cfg = unit_loopback_kcfg(t->dir, t->srv.port, "    token: tok\n");
    t->http = vmg_http_new(&t->loop, &rc);
    assert_non_null(t->http);
    assert_int_equal(kube_client_new(&t->loop, t->http, t->cfg, &o, &t->kw.kc), 0);
    kubeworld_fill(&t->kw, &t->rw);
    t->g = make_group();
    *state = t;
    return 0;
}

static void kc_closed(void *data)
{
    struct t *t = data;

    vmg_http_close(t->http, NULL, NULL);
}

static int teardown(void **state)
{
    struct t *t = *state;

    kube_client_close(t->kw.kc, kc_closed, t);
    srv_stop(&t->srv);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    kcfg_free(t->cfg);
    assert_int_equal(uv_loop_close(&t->loop), 0);
    rmdir(t->dir);
    vmgroup_free(t->g);
    free(t);
    return 0;
}

static void wait_done(struct t *t)
{
    while (!t->done)
        uv_run(&t->loop, UV_RUN_ONCE);
}

static void on_secret(void *cbdata, int err, const char *msg, const cJSON *secret)
{
    struct t *t = cbdata;
    const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(secret, "data"), "user-data");

    (void)msg;
    t->done++;
    t->err = err;
    snprintf(t->user_data, sizeof(t->user_data), "%s", cJSON_IsString(v) ? v->valuestring : "");
}

/* A bootstrap's Secret: one GET of the core path, the object handed over;
 * NotFound as VMG_ENOTFOUND; a name that is no path segment refused. */
static void test_get_secret(void **state)
{
    struct t *t = *state;

    t->status = 1;
    assert_int_equal(t->rw.get_secret(t->rw.data, "ns", "init", on_secret, t), 0);
    wait_done(t);
    assert_int_equal(t->err, 0);
    assert_string_equal(t->user_data, "I2Nsb3VkLWNvbmZpZwo=");
    assert_int_equal(t->srv.n, 1);
    assert_string_equal(t->srv.reqs[0].method, "GET");
    assert_string_equal(t->srv.reqs[0].target, "/api/v1/namespaces/ns/secrets/init");
    t->done = 0;
    t->status = 404;
    assert_int_equal(t->rw.get_secret(t->rw.data, "ns", "init", on_secret, t), 0);
    wait_done(t);
    assert_int_equal(t->err, VMG_ENOTFOUND);
    assert_string_equal(t->user_data, "");
    assert_int_equal(t->rw.get_secret(t->rw.data, "ns", "a/b", on_secret, t), -EINVAL);
    /* Not the namespace's list of Secrets. */
    assert_int_equal(t->rw.get_secret(t->rw.data, "ns", "", on_secret, t), -EINVAL);
    assert_int_equal(t->rw.get_secret(t->rw.data, "", "init", on_secret, t), -EINVAL);
    assert_int_equal(t->srv.n, 2);
}

/* The members kubeworld fills, and only those: the vCenter ones are
 * vcworld's, the hooks the manager's. */
static void test_fills_the_kubernetes_members(void **state)
{
    struct t *t = *state;

    assert_ptr_equal(t->rw.data, &t->kw);
    assert_non_null(t->rw.get_group);
    assert_non_null(t->rw.now);
    assert_non_null(t->rw.patch_status);
    assert_non_null(t->rw.patch_meta);
    assert_non_null(t->rw.restatus);
    assert_non_null(t->rw.hurry);
    assert_non_null(t->rw.unwrite);
    assert_non_null(t->rw.event);
    assert_non_null(t->rw.get_secret);
    assert_null(t->rw.vcdata);
    assert_null(t->rw.vcenter_ready);
    assert_null(t->rw.clone);
    assert_null(t->rw.observed);
}

static void test_status_patch(void **state)
{
    struct t *t = *state;
    cJSON *st = cJSON_Parse("{\"phase\":\"RUNNING\",\"currentReplicas\":1}");
    cJSON *body;

    assert_int_equal(t->rw.patch_status(t->rw.data, t->g, st, on_done, t, NULL), 0);
    wait_done(t);
    assert_int_equal(t->err, 0);
    assert_int_equal(t->srv.n, 1);
    assert_string_equal(t->srv.reqs[0].method, "PATCH");
    assert_string_equal(t->srv.reqs[0].target, GROUP_PATH "/status");
    assert_string_equal(t->srv.reqs[0].ctype, "application/merge-patch+json");
    body = cJSON_Parse(t->srv.reqs[0].body);
    assert_non_null(body);
    /* The status given, under "status"; the caller's JSON is not consumed. */
    assert_true(cJSON_Compare(cJSON_GetObjectItem(body, "status"), st, true));
    assert_int_equal(cJSON_GetArraySize(body), 1);
    cJSON_Delete(body);
    cJSON_Delete(st);
}

static void test_meta_patch_and_conflict(void **state)
{
    struct t *t = *state;
    cJSON *patch = cJSON_Parse("{\"metadata\":{\"finalizers\":[\"x\"],\"resourceVersion\":\"7\"}}");
    cJSON *body;

    t->status = 409;
    assert_int_equal(t->rw.patch_meta(t->rw.data, t->g, patch, on_done, t, NULL), 0);
    wait_done(t);
    assert_int_equal(t->err, VMG_ECONFLICT);
    assert_string_equal(t->reason, "Conflict");
    assert_int_equal(t->srv.n, 1);
    assert_string_equal(t->srv.reqs[0].method, "PATCH");
    assert_string_equal(t->srv.reqs[0].target, GROUP_PATH);
    body = cJSON_Parse(t->srv.reqs[0].body);
    assert_true(cJSON_Compare(body, patch, true));
    cJSON_Delete(body);
    cJSON_Delete(patch);
}

/* A status write not sent yet goes with the status given last, wrapped as
 * the first was; one dropped is called back canceled and never sent. */
static void test_status_write_waiting_takes_a_newer_status_or_none(void **state)
{
    struct t *t = *state;
    cJSON *a = cJSON_Parse("{\"phase\":\"PENDING\"}");
    cJSON *b = cJSON_Parse("{\"phase\":\"RUNNING\"}");
    void *h1 = NULL, *h2 = NULL;
    cJSON *body;

    /* Nothing is sent before the loop runs. */
    assert_int_equal(t->rw.patch_status(t->rw.data, t->g, a, on_done, t, &h1), 0);
    assert_int_equal(t->rw.patch_status(t->rw.data, t->g, a, on_done, t, &h2), 0);
    assert_int_equal(t->rw.restatus(t->rw.data, h1, b), 0);
    assert_int_equal(t->rw.hurry(t->rw.data, h1), 0);
    assert_int_equal(t->rw.unwrite(t->rw.data, h2), 0);
    assert_int_equal(t->done, 1);
    assert_int_equal(t->err, VMG_ECANCELED);
    t->done = 0;
    wait_done(t);
    assert_int_equal(t->err, 0);
    assert_int_equal(t->srv.n, 1);
    assert_string_equal(t->srv.reqs[0].target, GROUP_PATH "/status");
    body = cJSON_Parse(t->srv.reqs[0].body);
    assert_true(cJSON_Compare(cJSON_GetObjectItem(body, "status"), b, true));
    cJSON_Delete(body);
    cJSON_Delete(a);
    cJSON_Delete(b);
}

/* A JSON patch (the finalizers tested, then replaced) goes as one; the 422
 * of a failed test is a conflict, as a merge patch's 409 is; a 422 of a
 * merge patch is not. */
static void test_json_patch_test_failed_is_a_conflict(void **state)
{
    struct t *t = *state;
    cJSON *ops =
        cJSON_Parse("[{\"op\":\"test\",\"path\":\"/metadata/finalizers\",\"value\":[\"x\"]},"
                    "{\"op\":\"replace\",\"path\":\"/metadata/finalizers\",\"value\":[]}]");
    cJSON *merge = cJSON_Parse("{\"metadata\":{\"finalizers\":[\"x\"]}}");
    cJSON *body;

    t->status = 422;
    assert_int_equal(t->rw.patch_meta(t->rw.data, t->g, ops, on_done, t, NULL), 0);
    wait_done(t);
    assert_int_equal(t->err, VMG_ECONFLICT);
    assert_int_equal(t->srv.n, 1);
    assert_string_equal(t->srv.reqs[0].method, "PATCH");
    assert_string_equal(t->srv.reqs[0].target, GROUP_PATH);
    assert_string_equal(t->srv.reqs[0].ctype, "application/json-patch+json");
    body = cJSON_Parse(t->srv.reqs[0].body);
    assert_true(cJSON_Compare(body, ops, true));
    cJSON_Delete(body);
    t->done = 0;
    assert_int_equal(t->rw.patch_meta(t->rw.data, t->g, merge, on_done, t, NULL), 0);
    wait_done(t);
    assert_int_not_equal(t->err, 0);
    assert_int_not_equal(t->err, VMG_ECONFLICT);
    assert_string_equal(t->srv.reqs[1].ctype, "application/merge-patch+json");
    /* A JSON patch refused for what it would make of the object is no
     * conflict: trying it again on a newer object changes nothing. */
    t->done = 0;
    t->status = 423;
    assert_int_equal(t->rw.patch_meta(t->rw.data, t->g, ops, on_done, t, NULL), 0);
    wait_done(t);
    assert_int_not_equal(t->err, 0);
    assert_int_not_equal(t->err, VMG_ECONFLICT);
    cJSON_Delete(ops);
    cJSON_Delete(merge);
}

/* Without an informer (closed, or not made yet) no group exists; without a
 * recorder an event goes nowhere; the clock writes RFC 3339. */
static void test_without_informer_or_recorder(void **state)
{
    struct t *t = *state;
    char now[64] = "";

    assert_null(t->rw.get_group(t->rw.data, "ns/web"));
    t->rw.event(t->rw.data, t->g, true, "Reason", "message");
    kubeworld_forget_group(&t->kw, "ns", "web");
    t->rw.now(t->rw.data, now, sizeof(now));
    assert_int_equal(strlen(now) >= 20, 1);
    assert_int_equal(now[4], '-');
    assert_int_equal(now[10], 'T');
    assert_int_equal(t->srv.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fills_the_kubernetes_members, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_patch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_patch_test_failed_is_a_conflict, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_write_waiting_takes_a_newer_status_or_none,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_meta_patch_and_conflict, setup, teardown),
        cmocka_unit_test_setup_teardown(test_without_informer_or_recorder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_get_secret, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
