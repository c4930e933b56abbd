/* test_kube.c: kube/kube: the decoding of the API's Status errors (on
 * bodies captured from a real kube-apiserver v1.32), Retry-After, backoff,
 * the token bucket and paths; then the request machinery (retry rules,
 * 401 handling with token files and exec plugins, pagination, watch
 * streams and their stalls, keepalive, cancellation, rate limiting)
 * against a small HTTP/1.1 server on loopback, on the same libuv loop,
 * since a real API server will not answer 429 or 503 on demand. The e2e
 * suite covers the real server. */
#include "tests/unit/unit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <uv.h>

#include "kube/kube.h"
#include "kube/kubeconfig.h"
#include "lib/bucket.h"
#include "lib/err.h"
#include "lib/http.h"
#include "tests/unit/srv.h"

/* ---- Status bodies, as kube-apiserver v1.32 sends them ---- */

static const char ST_NOT_FOUND[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"vmgroups.vm.codeconnect.vmworld.com \\\"nope\\\" not found\","
    "\"reason\":\"NotFound\",\"details\":{\"name\":\"nope\",\"group\":"
    "\"vm.codeconnect.vmworld.com\",\"kind\":\"vmgroups\"},\"code\":404}";

static const char ST_ALREADY_EXISTS[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"vmgroups.vm.codeconnect.vmworld.com \\\"a\\\" already exists\","
    "\"reason\":\"AlreadyExists\",\"details\":{\"name\":\"a\",\"group\":"
    "\"vm.codeconnect.vmworld.com\",\"kind\":\"vmgroups\"},\"code\":409}";

static const char ST_CONFLICT[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"Operation cannot be fulfilled on vmgroups.vm.codeconnect.vmworld.com "
    "\\\"a\\\": the object has been modified; please apply your changes to the latest "
    "version and try again\",\"reason\":\"Conflict\",\"details\":{\"name\":\"a\","
    "\"group\":\"vm.codeconnect.vmworld.com\",\"kind\":\"vmgroups\"},\"code\":409}";

static const char ST_INVALID[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"VmGroup.vm.codeconnect.vmworld.com \\\"b\\\" is invalid: [spec.cpu: "
    "Invalid value: 9: spec.cpu in body should be less than or equal to 4, spec.memory: "
    "Invalid value: 0: spec.memory in body should be greater than or equal to 1]\","
    "\"reason\":\"Invalid\",\"details\":{\"name\":\"b\",\"group\":"
    "\"vm.codeconnect.vmworld.com\",\"kind\":\"VmGroup\",\"causes\":[{\"reason\":"
    "\"FieldValueInvalid\",\"message\":\"Invalid value: 9: spec.cpu in body should be less "
    "than or equal to 4\",\"field\":\"spec.cpu\"},{\"reason\":\"FieldValueInvalid\","
    "\"message\":\"Invalid value: 0: spec.memory in body should be greater than or equal "
    "to 1\",\"field\":\"spec.memory\"}]},\"code\":422}";

static const char ST_FORBIDDEN[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"vmgroups.vm.codeconnect.vmworld.com is forbidden: User "
    "\\\"system:serviceaccount:t1:nobody\\\" cannot list resource \\\"vmgroups\\\" in API "
    "group \\\"vm.codeconnect.vmworld.com\\\" in the namespace \\\"t1\\\"\","
    "\"reason\":\"Forbidden\",\"details\":{\"group\":\"vm.codeconnect.vmworld.com\","
    "\"kind\":\"vmgroups\"},\"code\":403}";

static const char ST_UNAUTHORIZED[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}";

static const char ST_EXPIRED_CONTINUE[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{\"continue\":"
    "\"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0IjoiYVx1MDAwMCJ9\"},\"status\":"
    "\"Failure\",\"message\":\"The provided continue parameter is too old to display a "
    "consistent list result. You can start a new list without the continue parameter, or "
    "use the continue token in this response to retrieve the remainder of the results.\","
    "\"reason\":\"Expired\",\"code\":410}";

static const char ST_GONE_WATCH[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"too old resource version: 5 (231)\",\"reason\":\"Expired\",\"code\":410}";

static const char ST_GONE[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"the resource is gone\",\"reason\":\"Gone\",\"code\":410}";

static const char ST_TOO_MANY[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"Too many requests, please try again later.\",\"reason\":"
    "\"TooManyRequests\",\"details\":{\"retryAfterSeconds\":1},\"code\":429}";

static const char ST_BAD_REQUEST[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"the object provided is unrecognized (must be of type VmGroup): couldn't "
    "get version/kind; json parse error: invalid character 'b' looking for beginning of "
    "object key string ({bad)\",\"reason\":\"BadRequest\",\"code\":400}";

static const char ST_UNAVAILABLE[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"the request has been made before all known HTTP paths have been "
    "installed, please try again\",\"reason\":\"ServiceUnavailable\",\"details\":"
    "{\"retryAfterSeconds\":5},\"code\":503}";

static const char ST_SUCCESS[] = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                                 "\"status\":\"Success\",\"details\":{\"name\":\"a\"}}";

static void check_status(const char *body, long http, int err, int code, const char *reason,
                         const char *msg_part, unsigned causes, const char *field,
                         unsigned retry_after)
{
    cJSON *j = body ? cJSON_Parse(body) : NULL;
    struct kube_status st;

    if (body)
        assert_non_null(j);
    assert_int_equal(kube_status_decode(j, http, &st), err);
    assert_int_equal(st.err, err);
    assert_int_equal(st.code, code);
    assert_string_equal(st.reason, reason);
    if (msg_part && !strstr(st.message, msg_part))
        fail_msg("message \"%s\" lacks \"%s\"", st.message, msg_part);
    assert_int_equal(st.n_causes, causes);
    assert_string_equal(st.cause_field, field);
    assert_int_equal(st.retry_after_s, retry_after);
    cJSON_Delete(j);
}

static void test_status_decode(void **state)
{
    (void)state;
    check_status(ST_NOT_FOUND, 404, VMG_ENOTFOUND, 404, "NotFound", "\"nope\" not found", 0, "", 0);
    check_status(ST_ALREADY_EXISTS, 409, VMG_ECONFLICT, 409, "AlreadyExists", "already exists", 0,
                 "", 0);
    check_status(ST_CONFLICT, 409, VMG_ECONFLICT, 409, "Conflict", "has been modified", 0, "", 0);
    check_status(ST_INVALID, 422, -EINVAL, 422, "Invalid", "spec.cpu: Invalid value: 9", 2,
                 "spec.cpu", 0);
    check_status(ST_FORBIDDEN, 403, VMG_EFORBIDDEN, 403, "Forbidden", "cannot list resource", 0, "",
                 0);
    check_status(ST_UNAUTHORIZED, 401, VMG_EAUTH, 401, "Unauthorized", "Unauthorized", 0, "", 0);
    check_status(ST_EXPIRED_CONTINUE, 410, VMG_EGONE, 410, "Expired", "continue parameter", 0, "",
                 0);
    check_status(ST_GONE_WATCH, 200, VMG_EGONE, 410, "Expired", "too old resource version", 0, "",
                 0);
    check_status(ST_GONE, 410, VMG_EGONE, 410, "Gone", "gone", 0, "", 0);
    check_status(ST_TOO_MANY, 429, VMG_ETHROTTLED, 429, "TooManyRequests", "Too many", 0, "", 1);
    check_status(ST_BAD_REQUEST, 400, -EINVAL, 400, "BadRequest", "unrecognized", 0, "", 0);
    check_status(ST_UNAVAILABLE, 503, -EAGAIN, 503, "ServiceUnavailable", "try again", 0, "", 5);
    check_status(ST_SUCCESS, 200, 0, 200, "", NULL, 0, "", 0);
}

static void test_status_without_status_body(void **state)
{
    (void)state;
    /* No body, or a body that is not a Status: the HTTP status decides. */
    check_status(NULL, 404, VMG_ENOTFOUND, 404, "NotFound", "", 0, "", 0);
    check_status(NULL, 503, -EAGAIN, 503, "ServiceUnavailable", "", 0, "", 0);
    check_status(NULL, 502, VMG_EHTTP, 502, "", "", 0, "", 0);
    check_status("{\"kind\":\"VmGroup\",\"code\":404,\"reason\":\"NotFound\"}", 500, VMG_EHTTP, 500,
                 "InternalError", "", 0, "", 0);
    check_status("[1,2]", 409, VMG_ECONFLICT, 409, "Conflict", "", 0, "", 0);
    /* A Failure never maps to success, whatever its code. */
    check_status("{\"kind\":\"Status\",\"status\":\"Failure\",\"code\":200}", 200, VMG_EHTTP, 200,
                 "", "", 0, "", 0);
    /* Wrong types are ignored, not trusted. */
    check_status("{\"kind\":\"Status\",\"status\":\"Failure\",\"code\":\"404\",\"reason\":7,"
                 "\"message\":null,\"details\":{\"causes\":{}}}",
                 403, VMG_EFORBIDDEN, 403, "Forbidden", "", 0, "", 0);
}

static void test_status_long_message_is_cut(void **state)
{
    char *body = malloc(KUBE_MESSAGE_MAX * 3);
    cJSON *j;
    struct kube_status st;
    size_t n;

    (void)state;
    assert_non_null(body);
    n = (size_t)snprintf(body, KUBE_MESSAGE_MAX * 3, "{\"kind\":\"Status\",\"message\":\"");
    /* Two-byte UTF-8 characters, so that a cut could fall inside one. */
    for (size_t i = 0; i < KUBE_MESSAGE_MAX; i++) {
        body[n++] = (char)0xC3;
        body[n++] = (char)0xA9;
    }
    snprintf(body + n, KUBE_MESSAGE_MAX * 3 - n, "\",\"code\":409,\"reason\":\"Conflict\"}");
    j = cJSON_Parse(body);
    assert_non_null(j);
    assert_int_equal(kube_status_decode(j, 409, &st), VMG_ECONFLICT);
    n = strlen(st.message);
    assert_true(n < KUBE_MESSAGE_MAX);
    assert_true(n % 2 == 0);
    assert_int_equal((unsigned char)st.message[n - 1], 0xA9);
    cJSON_Delete(j);
    free(body);
}

static void test_status_err_map(void **state)
{
    (void)state;
    assert_int_equal(kube_status_err("NotFound", 0), VMG_ENOTFOUND);
    assert_int_equal(kube_status_err("AlreadyExists", 409), VMG_ECONFLICT);
    assert_int_equal(kube_status_err("Conflict", 409), VMG_ECONFLICT);
    assert_int_equal(kube_status_err("Expired", 410), VMG_EGONE);
    assert_int_equal(kube_status_err("Gone", 0), VMG_EGONE);
    assert_int_equal(kube_status_err("TooManyRequests", 429), VMG_ETHROTTLED);
    assert_int_equal(kube_status_err("Invalid", 422), -EINVAL);
    assert_int_equal(kube_status_err("RequestEntityTooLarge", 413), VMG_ETOOBIG);
    assert_int_equal(kube_status_err("UnsupportedMediaType", 415), -EOPNOTSUPP);
    assert_int_equal(kube_status_err("Timeout", 504), -ETIMEDOUT);
    assert_int_equal(kube_status_err("ServerTimeout", 500), -ETIMEDOUT);
    assert_int_equal(kube_status_err("InternalError", 500), VMG_EHTTP);
    /* An unknown reason falls back on the code. */
    assert_int_equal(kube_status_err("SomethingNew", 404), VMG_ENOTFOUND);
    assert_int_equal(kube_status_err(NULL, 429), VMG_ETHROTTLED);
    assert_int_equal(kube_status_err("", 410), VMG_EGONE);
    assert_int_equal(kube_status_err("", 418), VMG_EHTTP);
    assert_int_equal(kube_status_err(NULL, 204), 0);
    /* The reason wins over the code. */
    assert_int_equal(kube_status_err("Forbidden", 404), VMG_EFORBIDDEN);
}

static void test_retry_after(void **state)
{
    unsigned s = 99;
    time_t now = 1700000000; /* 2023-11-14T22:13:20Z */

    (void)state;
    assert_int_equal(kube_parse_retry_after("3", now, &s), 0);
    assert_int_equal(s, 3);
    assert_int_equal(kube_parse_retry_after(" 0 ", now, &s), 0);
    assert_int_equal(s, 0);
    assert_int_equal(kube_parse_retry_after("120", now, &s), 0);
    assert_int_equal(s, KUBE_RETRY_AFTER_MAX_S);
    assert_int_equal(kube_parse_retry_after("99999999999999999999999", now, &s), 0);
    assert_int_equal(s, KUBE_RETRY_AFTER_MAX_S);
    assert_int_equal(kube_parse_retry_after("Tue, 14 Nov 2023 22:13:30 GMT", now, &s), 0);
    assert_int_equal(s, 10);
    assert_int_equal(kube_parse_retry_after("Tue, 14 Nov 2023 22:00:00 GMT", now, &s), 0);
    assert_int_equal(s, 0);
    assert_int_equal(kube_parse_retry_after("Wed, 15 Nov 2023 22:13:20 GMT", now, &s), 0);
    assert_int_equal(s, KUBE_RETRY_AFTER_MAX_S);
    s = 7;
    assert_int_equal(kube_parse_retry_after("", now, &s), -EINVAL);
    assert_int_equal(kube_parse_retry_after("-1", now, &s), -EINVAL);
    assert_int_equal(kube_parse_retry_after("1.5", now, &s), -EINVAL);
    assert_int_equal(kube_parse_retry_after("3s", now, &s), -EINVAL);
    assert_int_equal(kube_parse_retry_after("soon", now, &s), -EINVAL);
    assert_int_equal(kube_parse_retry_after(NULL, now, &s), -EINVAL);
    assert_int_equal(s, 7);
}

static void test_backoff_bounds(void **state)
{
    (void)state;
    /* No jitter: base, doubling, capped. */
    assert_int_equal(kube_backoff_ms(800, 30000, 0, 0, 12345), 800);
    assert_int_equal(kube_backoff_ms(800, 30000, 1, 0, 12345), 1600);
    assert_int_equal(kube_backoff_ms(800, 30000, 5, 0, 12345), 25600);
    assert_int_equal(kube_backoff_ms(800, 30000, 6, 0, 12345), 30000);
    assert_int_equal(kube_backoff_ms(800, 30000, 1000, 0, 0), 30000);
    assert_int_equal(kube_backoff_ms(1, UINT64_MAX, 200, 0, 0), UINT64_MAX);
    /* Jitter takes off at most jitter * d, never adds. */
    for (unsigned a = 0; a < 10; a++) {
        uint64_t d = kube_backoff_ms(800, 30000, a, 0, 0);
        uint64_t lo = kube_backoff_ms(800, 30000, a, 0.25, UINT32_MAX);
        uint64_t hi = kube_backoff_ms(800, 30000, a, 0.25, 0);
        uint64_t mid = kube_backoff_ms(800, 30000, a, 0.25, UINT32_MAX / 2);

        assert_int_equal(hi, d);
        assert_true(lo >= d - d / 4 && lo < d);
        assert_true(mid > lo && mid < hi);
        assert_true(lo <= 30000);
    }
    /* A jitter out of [0, 1] is clamped. */
    assert_int_equal(kube_backoff_ms(1000, 1000, 0, 5, UINT32_MAX), 1);
    assert_int_equal(kube_backoff_ms(1000, 1000, 0, -1, UINT32_MAX), 1000);
}

/* The client's token bucket is lib/bucket's: the figures it must keep. */
static void test_bucket(void **state)
{
    struct vmg_bucket b;

    (void)state;
    vmg_bucket_init(&b, 20, 3, 1000);
    /* The burst at once... */
    assert_int_equal(vmg_bucket_take(&b, 1000), 0);
    assert_int_equal(vmg_bucket_take(&b, 1000), 0);
    assert_int_equal(vmg_bucket_take(&b, 1000), 0);
    /* ...then one token every 50 ms. */
    assert_in_range(vmg_bucket_take(&b, 1000), 50, 51);
    assert_in_range(vmg_bucket_take(&b, 1030), 20, 21);
    assert_int_equal(vmg_bucket_take(&b, 1050), 0);
    assert_in_range(vmg_bucket_take(&b, 1050), 50, 51);
    /* Idle time refills up to the burst only. */
    assert_int_equal(vmg_bucket_take(&b, 100000), 0);
    assert_int_equal(vmg_bucket_take(&b, 100000), 0);
    assert_int_equal(vmg_bucket_take(&b, 100000), 0);
    assert_true(vmg_bucket_take(&b, 100000) > 0);
    /* A clock going back takes nothing away. */
    assert_true(vmg_bucket_take(&b, 90000) > 0);
    /* No limit. */
    vmg_bucket_init(&b, -1, 1, 0);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(vmg_bucket_take(&b, 0), 0);
}

static void test_paths(void **state)
{
    char buf[256];

    (void)state;
    assert_int_equal(kube_path(buf, sizeof(buf), "vm.codeconnect.vmworld.com", "v1alpha1", NULL,
                               "vmgroups", NULL, NULL),
                     50);
    assert_string_equal(buf, "/apis/vm.codeconnect.vmworld.com/v1alpha1/vmgroups");
    assert_true(kube_path(buf, sizeof(buf), "vm.codeconnect.vmworld.com", "v1alpha1", "ns1",
                          "vmgroups", "g-1", "status") > 0);
    assert_string_equal(buf,
                        "/apis/vm.codeconnect.vmworld.com/v1alpha1/namespaces/ns1/vmgroups/g-1/"
                        "status");
    assert_true(kube_path(buf, sizeof(buf), "", "v1", "ns1", "events", NULL, NULL) > 0);
    assert_string_equal(buf, "/api/v1/namespaces/ns1/events");
    assert_true(kube_path(buf, sizeof(buf), NULL, "v1", "", "namespaces", "kube-system", NULL) > 0);
    assert_string_equal(buf, "/api/v1/namespaces/kube-system");
    assert_true(kube_path(buf, sizeof(buf), "rbac.authorization.k8s.io", "v1", NULL, "clusterroles",
                          "system:aggregate-to-view", NULL) > 0);
    assert_string_equal(buf,
                        "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:aggregate-to-view");
    /* Segments that would escape the path. */
    snprintf(buf, sizeof(buf), "x");
    assert_int_equal(kube_path(buf, sizeof(buf), "", "v1", "ns", "pods", "a/b", NULL), -EINVAL);
    assert_int_equal(kube_path(buf, sizeof(buf), "", "v1", "..", "pods", NULL, NULL), -EINVAL);
    assert_int_equal(kube_path(buf, sizeof(buf), "", "v1", "ns", "pods", "a?b", NULL), -EINVAL);
    assert_int_equal(kube_path(buf, sizeof(buf), "", "v1", "ns", "pods", "a%2f", NULL), -EINVAL);
    assert_int_equal(kube_path(buf, sizeof(buf), "", "", "ns", "pods", NULL, NULL), -EINVAL);
    assert_int_equal(kube_path(buf, sizeof(buf), "", "v1", "ns", "pods", NULL, "status"), -EINVAL);
    assert_string_equal(buf, "x");
    assert_int_equal(kube_path(buf, 10, "", "v1", "ns", "pods", NULL, NULL), VMG_ETOOBIG);
}

static void test_query(void **state)
{
    char buf[64] = "/api/v1/pods";

    (void)state;
    assert_int_equal(kube_query_add(buf, sizeof(buf), "limit", "500"), 22);
    assert_string_equal(buf, "/api/v1/pods?limit=500");
    assert_true(kube_query_add(buf, sizeof(buf), "continue", "a+b/c=") > 0);
    assert_string_equal(buf, "/api/v1/pods?limit=500&continue=a%2Bb%2Fc%3D");
    assert_int_equal(kube_query_add(buf, sizeof(buf), "labelSelector", "app in (x,y),tier!=db"),
                     VMG_ETOOBIG);
    assert_string_equal(buf, "/api/v1/pods?limit=500&continue=a%2Bb%2Fc%3D");
}

/* ---- the fixture: loop, server, kubeconfig, http, client ---- */

struct rec {
    int calls;
    int err;
    long status;
    int code;
    unsigned attempts;
    char reason[64];
    char message[1024];
    cJSON *body;
};

struct t {
    uv_loop_t loop;
    uv_timer_t dog; /* fails a test that stops making progress */
    struct srv srv;
    char dir[64];
    kcfg *cfg;
    vmg_http *http;
    kube_client *kc;
    int observed;
    long observed_status[SRV_MAX_REQS];
    char observed_method[SRV_MAX_REQS][8];
    char observed_host[64];
    uint64_t start_ms;
    /* Per-test state for handlers. */
    int lines;
    char line[4][256];
};

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

static void observe(void *data, const char *method, const char *host, long status, int err,
                    double seconds)
{
    struct t *t = data;

    (void)err;
    (void)seconds;
    if (t->observed < SRV_MAX_REQS) {
        t->observed_status[t->observed] = status;
        snprintf(t->observed_method[t->observed], sizeof(t->observed_method[0]), "%s", method);
    }
    snprintf(t->observed_host, sizeof(t->observed_host), "%s", host);
    t->observed++;
}

static int setup(void **state)
{
    struct t *t = calloc(1, sizeof(*t));

    if (!t)
        return -1;
    snprintf(t->dir, sizeof(t->dir), "/tmp/test_kube.XXXXXX");
    if (!mkdtemp(t->dir) || uv_loop_init(&t->loop) != 0) {
        free(t);
        return -1;
    }
    srv_start(&t->srv, &t->loop);
    t->srv.data = t;
    uv_timer_init(&t->loop, &t->dog);
    *state = t;
    return 0;
}

/* user_yaml is the kubeconfig's user entry (indented by 4). */
static void load_config(struct t *t, const char *user_yaml)
{
    t->cfg = unit_loopback_kcfg(t->dir, t->srv.port, user_yaml);
}

static void client(struct t *t, const char *user_yaml, const struct kube_client_opts *opts)
{
    struct kube_client_opts o = {0};
    int err;

    load_config(t, user_yaml ? user_yaml : "    token: test-token-1234\n");
    t->http = vmg_http_new(&t->loop, &err);
    assert_non_null(t->http);
    if (opts)
        o = *opts;
    if (!o.backoff_base_ms)
        o.backoff_base_ms = 5;
    if (!o.backoff_max_ms)
        o.backoff_max_ms = 20;
    if (o.qps == 0)
        o.qps = -1;
    o.observe = observe;
    o.observe_data = t;
    assert_int_equal(kube_client_new(&t->loop, t->http, t->cfg, &o, &t->kc), 0);
    t->start_ms = uv_now(&t->loop);
}

static void on_kc_closed(void *data)
{
    struct t *t = data;

    vmg_http_close(t->http, NULL, NULL);
    t->http = NULL;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int teardown(void **state)
{
    struct t *t = *state;

    if (t->kc)
        kube_client_close(t->kc, on_kc_closed, t);
    else if (t->http)
        vmg_http_close(t->http, NULL, NULL);
    srv_stop(&t->srv);
    uv_close((uv_handle_t *)&t->dog, NULL);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    kcfg_free(t->cfg);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&t->loop), 0);
    nftw(t->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    free(t);
    return 0;
}

static void on_result(void *data, const struct kube_result *res)
{
    struct rec *r = data;

    r->calls++;
    r->err = res->err;
    r->status = res->status;
    r->code = res->code;
    r->attempts = res->attempts;
    snprintf(r->reason, sizeof(r->reason), "%s", res->reason);
    snprintf(r->message, sizeof(r->message), "%s", res->message);
    assert_non_null(res->raw);
    assert_non_null(res->method);
    assert_non_null(res->path);
    cJSON_Delete(r->body);
    r->body = kube_result_take_body(res);
    assert_null(res->body);
}

static void watchdog(uv_timer_t *timer)
{
    (void)timer;
    fail_msg("the test made no progress for 10 s");
}

/* run_until runs the loop until *calls reaches n. */
static void run_until(struct t *t, const int *calls, int n)
{
    uv_timer_start(&t->dog, watchdog, 10000, 0);
    while (*calls < n)
        uv_run(&t->loop, UV_RUN_ONCE);
    uv_timer_stop(&t->dog);
}

static void rec_clear(struct rec *r)
{
    cJSON_Delete(r->body);
    r->body = NULL;
}

/* ---- handlers ---- */

static void h_ok_object(struct srv *s, int i, struct sconn *c)
{
    (void)s;
    (void)i;
    srv_reply(c, 200, NULL, "{\"kind\":\"VmGroup\",\"metadata\":{\"name\":\"a\"}}");
}

static void h_not_found(struct srv *s, int i, struct sconn *c)
{
    (void)s;
    (void)i;
    srv_reply(c, 404, NULL, ST_NOT_FOUND);
}

static void test_get_ok(void **state)
{
    struct t *t = *state;
    struct rec r = {0};
    const cJSON *meta;

    client(t, NULL, NULL);
    t->srv.handle = h_ok_object;
    assert_int_equal(kube_get(t->kc, "/apis/g/v1/namespaces/n/things/a", on_result, &r), 0);
    assert_int_equal(r.calls, 0); /* never from inside the call */
    assert_int_equal(kube_client_pending(t->kc), 1);
    run_until(t, &r.calls, 1);
    assert_int_equal(r.err, 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.attempts, 1);
    meta = cJSON_GetObjectItem(r.body, "metadata");
    assert_string_equal(cJSON_GetObjectItem(meta, "name")->valuestring, "a");
    assert_int_equal(t->srv.n, 1);
    assert_string_equal(t->srv.reqs[0].method, "GET");
    assert_string_equal(t->srv.reqs[0].target, "/apis/g/v1/namespaces/n/things/a");
    assert_string_equal(t->srv.reqs[0].auth, "Bearer test-token-1234");
    assert_string_equal(t->srv.reqs[0].accept, "application/json");
    assert_memory_equal(t->srv.reqs[0].ua, "vmgroup-operator/", 17);
    assert_true(strlen(t->srv.reqs[0].ua) > 17);
    assert_int_equal(t->observed, 1);
    assert_int_equal(t->observed_status[0], 200);
    assert_string_equal(t->observed_method[0], "GET");
    snprintf(t->line[0], sizeof(t->line[0]), "127.0.0.1:%d", t->srv.port);
    assert_string_equal(t->observed_host, t->line[0]);
    assert_string_equal(kube_client_host(t->kc), t->line[0]);
    assert_int_equal(kube_client_pending(t->kc), 0);
    rec_clear(&r);
}

static void test_error_status_not_retried(void **state)
{
    struct t *t = *state;
    struct rec r = {0};

    client(t, NULL, NULL);
    t->srv.handle = h_not_found;
    assert_int_equal(kube_get(t->kc, "/api/v1/namespaces/n/pods/nope", on_result, &r), 0);
    run_until(t, &r.calls, 1);
    assert_int_equal(r.err, VMG_ENOTFOUND);
    assert_int_equal(r.status, 404);
    assert_int_equal(r.code, 404);
    assert_string_equal(r.reason, "NotFound");
    assert_string_equal(r.message, "vmgroups.vm.codeconnect.vmworld.com \"nope\" not found");
    assert_non_null(r.body); /* the Status */
    assert_int_equal(r.attempts, 1);
    assert_int_equal(t->srv.n, 1);
    rec_clear(&r);
}

static void h_429_then_ok(struct srv *s, int i, struct sconn *c)
{
    (void)s;
    if (i == 0)
        srv_reply(c, 429, "Retry-After: 1\r\n", ST_TOO_MANY);
    else
        h_ok_object(s, i, c);
}

static void test_429_honours_retry_after(void **state)
{
    struct t *t = *state;
    struct rec r = {0};
    uint64_t took;

    client(t, NULL, NULL);
    t->srv.handle = h_429_then_ok;
    /* Even a POST: the server did not act on a 429. */
    assert_int_equal(kube_request(t->kc, "POST", "/api/v1/namespaces/n/configmaps",
                                  "application/json", "{}", on_result, &r),
                     0);
    run_until(t, &r.calls, 1);
    uv_update_time(&t->loop);
    took = uv_now(&t->loop) - t->start_ms;
    assert_int_equal(r.err, 0);
    assert_int_equal(r.attempts, 2);
    assert_int_equal(t->srv.n, 2);
    /* Retry-After: 1 second, not the 5 ms backoff. */
    assert_true(took >= 950);
    assert_true(took < 5000);
    assert_int_equal(t->observed, 2);
    assert_int_equal(t->observed_status[0], 429);
    rec_clear(&r);
}

static void h_always_429(struct srv *s, int i, struct sconn *c)
{
    (void)s;
    (void)i;
    srv_reply(c, 429, "Retry-After: 0\r\n", ST_TOO_MANY);
}

static void test_429_bounded(void **state)
{
    struct t *t = *state;
    struct rec r = {0};
    struct kube_client_opts o = {.retries = 3};

    client(t, NULL, &o);
    t->srv.handle = h_always_429;
    assert_int_equal(kube_get(t->kc, "/api/v1/pods", on_result, &r), 0);
    run_until(t, &r.calls, 1);
    assert_int_equal(r.err, VMG_ETHROTTLED);
    assert_int_equal(r.attempts, 4);
    assert_int_equal(t->srv.n, 4);
    rec_clear(&r);
}

static void h_503_twice(struct srv *s, int i, struct sconn *c)
{
    (void)s;
    if (i < 2)
        srv_reply(c, 503, NULL, "{\"kind\":\"Status\",\"status\":\"Failure\",\"code\":503}");
    else
        h_ok_object(s, i, c);
}

static void test_5xx_idempotent_retried(void **state)
{
    struct t *t = *state;
    struct rec r = {0};

    client(t, NULL, NULL);
    t->srv.handle = h_503_twice;
    assert_int_equal(kube_request(t->kc, "PUT", "/api/v1/namespaces/n/configmaps/a",
                                  "application/json", "{}", on_result, &r),
                     0);
    run_until(t, &r.calls, 1);
    assert_int_equal(r.err, 0);
    assert_int_equal(r.attempts, 3);
    assert_string_equal(t->srv.reqs[2].method, "PUT");
    assert_string_equal(t->srv.reqs[2].body, "{}");
    rec_clear(&r);
}

static void test_5xx_post_and_patch_not_retried(void **state)
{
    struct t *t = *state;
    struct rec r1 = {0}, r2 = {0};
    cJSON *obj = cJSON_Parse("{\"a\":1}");

    client(t, NULL, NULL);
    t->srv.handle = h_503_twice;
    assert_int_equal(kube_create(t->kc, "/api/v1/namespaces/n/configmaps", obj, on_result, &r1), 0);
    run_until(t, &r1.calls, 1);
    assert_int_equal(r1.err, -EAGAIN);
    assert_int_equal(r1.status, 503);
    assert_int_equal(r1.attempts, 1);
    assert_int_equal(
        kube_merge_patch(t->kc, "/api/v1/namespaces/n/configmaps/a", obj, on_result, &r2, NULL), 0);
    run_until(t, &r2.calls, 1);
    assert_int_equal(r2.err, -EAGAIN);
    assert_int_equal(r2.attempts, 1);
    assert_int_equal(t->srv.n, 2);
    cJSON_Delete(obj);
    rec_clear(&r1);
    rec_clear(&r2);
}

static void h_500_retry_after_then_ok(struct srv *s, int i, struct sconn *c)
{
    (void)s;
    if (i == 0)
        srv_reply(c, 500, "Retry-After: 0\r\n",
                  "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"InternalError\","
                  "\"code\":500}");
    else
        srv_reply(c, 201, NULL, "{\"kind\":\"ConfigMap\"}");
}

static void test_5xx_with_retry_after_retried_for_post(void **state)
{
    struct t *t = *state;
    struct rec r = {0};
    cJSON *obj = cJSON_Parse("{\"kind\":\"ConfigMap\"}");

    client(t, NULL, NULL);
    t->srv.handle = h_500_retry_after_then_ok;
    assert_int_equal(kube_create(t->kc, "/api/v1/namespaces/n/configmaps", obj, on_result, &r), 0);
    run_until(t, &r.calls, 1);
    assert_int_equal(r.err, 0);
    assert_int_equal(r.status, 201);
    assert_int_equal(r.attempts, 2);
    cJSON_Delete(obj);
    rec_clear(&r);
}

static void h_always_500(struct srv *s, int i, struct sconn *c)
{
    (void)s;
    (void)i;
    srv_reply(c, 500, NULL, "not json at all");
}

static void test_retries_bounded(void **state)
{
    struct t *t = *state;
    struct rec r = {0};
    struct kube_client_opts o = {.retries = 2};

    client(t, NULL, &o);
    t->srv.handle = h_always_500;
    assert_int_equal(kube_get(t->kc, "/api/v1/pods", on_result, &r), 0);
    run_until(t, &r.calls, 1);
    assert_int_equal(r.err, VMG_EHTTP);
    assert_int_equal(r.code, 500);
    assert_string_equal(r.reason, "InternalError");
    assert_string_equal(r.message, "HTTP status 500");
    assert_null(r.body);
    assert_int_equal(r.attempts, 3);
    assert_int_equal(t->srv.n, 3);
    rec_clear(&r);
}

static void test_connection_refused(void **state)
{
    struct t *t = *state;
    struct rec r1 = {0}, r2 = {0};
    struct kube_client_opts o = {.retries = 2};
    cJSON *obj = cJSON_Parse("{}");

    client(t, NULL, &o);
    /* Nothing listens any more: a POST that was never sent is retried too. */
    uv_close((uv_handle_t *)&t->srv.lis, NULL);
    uv_run(&t->loop, UV_RUN_NOWAIT);
    assert_int_equal(kube_create(t->kc, "/api/v1/namespaces/n/configmaps", obj, on_result, &r1), 0);
    assert_int_equal(kube_get(t->kc, "/api/v1/pods", on_result, &r2), 0);
    run_until(t, &r1.calls, 1);
    run_until(t, &r2.calls, 1);
    assert_int_equal(r1.err, VMG_ETRANSPORT);
    assert_int_equal(r1.attempts, 3);
    assert_int_equal(r1.status, 0);
    assert_true(r1.message[0] != '\0');
    assert_int_equal(r2.err, VMG_ETRANSPORT);
    assert_int_equal(r2.attempts, 3);
    assert_int_equal(t->observed, 6);
    assert_int_equal(t->observed_status[0], 0);
    cJSON_Delete(obj);
}

static void h_hang_then_close(struct srv *s, int i, struct sconn *c)
{
    (void)i;
    /* The request was received: the server drops the connection. */
    (void)s;
    srv_conn_close(c);
}

static void test_post_sent_then_dropped_not_retried(void **state)
{
    struct t *t = *state;
    struct rec r1 = {0}, r2 = {0};
    cJSON *obj = cJSON_Parse("{}");

    client(t, NULL, NULL);
    t->srv.handle = h_hang_then_close;
    assert_int_equal(kube_create(t->kc, "/api/v1/namespaces/n/configmaps", obj, on_result, &r1), 0);
    run_until(t, &r1.calls, 1);
    assert_int_equal(r1.err, VMG_ETRANSPORT);
    assert_int_equal(r1.attempts, 1);
    /* A GET is retried. */
    assert_int_equal(kube_get(t->kc, "/api/v1/pods", on_result, &r2), 0);
    run_until(t, &r2.calls, 1);
    assert_int_equal(r2.err, VMG_ETRANSPORT);
    assert_int_equal(r2.attempts, 1 + KUBE_DEFAULT_RETRIES);
    cJSON_Delete(obj);
}

/* ---- 401 ---- */

static void h_401_unless_new(struct srv *s, int i, struct sconn *c)
{
    struct t *t = s->data;

    if (strcmp(s->reqs[i].auth, "Bearer new-token") == 0) {
        h_ok_object(s, i, c);
        return;
    }
    /* The token is rotated on disk while the client holds the old one. */
    if (i == 0) {
        char path[128];

        snprintf(path, sizeof(path), "%s/token", t->dir);
        write_file(path, "new-token\n");
    }
    srv_reply(c, 401, NULL, ST_UNAUTHORIZED);
}

static void test_401_rereads_token_file(void **state)
{
    struct t *t = *state;
    struct rec r = {0};
    char path[128], user[256];

    snprintf(path, sizeof(path), "%s/token", t->dir);
    write_file(path, "old\n");
    snprintf(user, sizeof(user), "    tokenFile: %s\n", path);
    client(t, user, NULL);
    t->srv.handle = h_401_unless_new;
    assert_int_equal(kube_get(t->kc, "/api/v1/pods", on_result, &r), 0);
    run_until(t, &r.calls, 1);
    assert_int_equal(r.err, 0);
    assert_int_equal(r.attempts, 2);
    assert_string_equal(t->srv.reqs[0].auth, "Bearer old");
    assert_string_equal(t->srv.reqs[1].auth, "Bearer new-token");
    rec_clear(&r);
}

static void h_always_401(struct srv *s, int i, struct sconn *c)
{
    (void)s;
    (void)i;
    srv_reply(c, 401, NULL, ST_UNAUTHORIZED);
}

static void test_401_retried_once(void **state)
{
    struct t *t = *state;
    struct rec r = {0};

    client(t, NULL, NULL);
    t->srv.handle = h_always_401;
    assert_int_equal(kube_request(t->kc, "POST", "/api/v1/namespaces/n/configmaps",
                                  "application/json", "{}", on_result, &r),
                     0);
    run_until(t, &r.calls, 1);
    assert_int_equal(r.err, VMG_EAUTH);
    assert_string_equal(r.reason, "Unauthorized");
    assert_int_equal(r.attempts, 2);
    assert_int_equal(t->srv.n, 2);
    rec_clear(&r);
}

static void h_exec_token(struct srv *s, int i, struct sconn *c)
{
    if (strcmp(s->reqs[i].auth, "Bearer tok-2") == 0)
        h_ok_object(s, i, c);
    else
        srv_reply(c, 401, NULL, ST_UNAUTHORIZED);
}

/* counting_plugin_client makes t's client with an exec plugin that hands
 * out tok-1, tok-2, ..., counting its runs in a file (plugin_runs). */
static void counting_plugin_client(struct t *t)
{
    char script[160], user[512], text[512], count[160];

    snprintf(count, sizeof(count), "%s/runs", t->dir);
    snprintf(script, sizeof(script), "%s/plugin.sh", t->dir);
    snprintf(text, sizeof(text),
             "#!/bin/sh\nn=$(cat %s 2>/dev/null || echo 0)\nn=$((n+1))\necho $n > %s\n"
             "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
             "\"ExecCredential\",\"status\":{\"token\":\"tok-%%s\"}}' $n\n",
             count, count);
    write_file(script, text);
    assert_int_equal(chmod(script, 0755), 0);
    snprintf(user, sizeof(user),
             "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
             "      command: %s\n      interactiveMode: Never\n",
             script);
    client(t, user, NULL);
}

/* plugin_runs is how many times counting_plugin_client's plugin ran. */
static int plugin_runs(struct t *t)
{
    char count[160];
    FILE *f;
    int n = 0;

    snprintf(count, sizeof(count), "%s/runs", t->dir);
    f = fopen(count, "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%d", &n), 1);
    fclose(f);
    return n;
}

static void test_exec_plugin_refresh(void **state)
{
    struct t *t = *state;
    struct rec r1 = {0}, r2 = {0};
    int n;

    counting_plugin_client(t);
    t->srv.handle = h_exec_token;
    /* Two requests queue behind one plugin run; tok-1 is refused, the
     * client invalidates it and runs the plugin again. */
    assert_int_equal(kube_get(t->kc, "/api/v1/pods", on_result, &r1), 0);
    assert_int_equal(kube_get(t->kc, "/api/v1/pods", on_result, &r2), 0);
    run_until(t, &r1.calls, 1);
    run_until(t, &r2.calls, 1);
    assert_int_equal(r1.err, 0);
    assert_int_equal(r2.err, 0);
    assert_int_equal(t->srv.n, 4);
    assert_string_equal(t->srv.reqs[0].auth, "Bearer tok-1");
    assert_string_equal(t->srv.reqs[1].auth, "Bearer tok-1");
    assert_string_equal(t->srv.reqs[2].auth, "Bearer tok-2");
    assert_string_equal(t->srv.reqs[3].auth, "Bearer tok-2");
    n = plugin_runs(t);
    assert_true(n >= 2 && n <= 3);
    rec_clear(&r1);
    rec_clear(&r2);
}

/* Two clients on one configuration (the manager has four): /a's 401 for
 * tok-1 is answered at once, /b's is held until /a came back with tok-2. */
static struct sconn *held_b;

static void h_two_clients(struct srv *s, int i, struct sconn *c)
{
    bool b = strcmp(s->reqs[i].target, "/api/v1/b") == 0;

    if (strcmp(s->reqs[i].auth, "Bearer tok-1") == 0) {
        if (b)
            held_b = c;
        else
            srv_reply(c, 401, NULL, ST_UNAUTHORIZED);
        return;
    }
    h_ok_object(s, i, c);
    if (!b && held_b) {
        srv_reply(held_b, 401, NULL, ST_UNAUTHORIZED);
        held_b = NULL;
    }
}

/* A 401 for a credential another client of the same configuration has
 * already replaced keeps the new one: the request is sent again with it,
 * and the plugin is not run once more (each client counted only its own
 * refreshes, so the late 401 threw the new credential away). */
static void test_exec_credential_shared_by_clients(void **state)
{
    struct t *t = *state;
    struct kube_client_opts co = {.qps = -1, .backoff_base_ms = 5, .backoff_max_ms = 20};
    struct rec ra = {0}, rb = {0};
    kube_client *kb = NULL;
    vmg_http *hb; /* its own: curl would have /a wait behind /b, held */
    int bs = 0, e;

    counting_plugin_client(t);
    hb = vmg_http_new(&t->loop, &e);
    assert_non_null(hb);
    assert_int_equal(kube_client_new(&t->loop, hb, t->cfg, &co, &kb), 0);
    held_b = NULL;
    t->srv.handle = h_two_clients;
    assert_int_equal(kube_get(t->kc, "/api/v1/a", on_result, &ra), 0);
    assert_int_equal(kube_get(kb, "/api/v1/b", on_result, &rb), 0);
    run_until(t, &ra.calls, 1);
    run_until(t, &rb.calls, 1);
    assert_int_equal(ra.err, 0);
    if (rb.err != 0)
        fail_msg("b: %d %s", rb.err, rb.message);
    for (int i = 0; i < t->srv.n; i++)
        if (strcmp(t->srv.reqs[i].target, "/api/v1/b") == 0 && bs++ == 1)
            assert_string_equal(t->srv.reqs[i].auth, "Bearer tok-2");
    assert_int_equal(bs, 2);
    assert_int_equal(plugin_runs(t), 2);
    kube_client_close(kb, NULL, NULL);
    vmg_http_close(hb, NULL, NULL);
    rec_clear(&ra);
    rec_clear(&rb);
}

static void test_exec_plugin_failure(void **state)
{
    struct t *t = *state;
    struct rec r = {0};
    char script[160], user[512];

    snprintf(script, sizeof(script), "%s/plugin.sh", t->dir);
    write_file(script, "#!/bin/sh\necho 'no login' >&2\nexit 3\n");
    assert_int_equal(chmod(script, 0755), 0);
    snprintf(user, sizeof(user),
             "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
             "      command: %s\n      interactiveMode: Never\n",
             script);
    client(t, user, NULL);
    t->srv.handle = h_ok_object;
    assert_int_equal(kube_get(t->kc, "/api/v1/pods", on_result, &r), 0);
    run_until(t, &r.calls, 1);
    assert_int_equal(r.err, VMG_EAUTH);
    assert_non_null(strstr(r.message, "no login"));
    assert_int_equal(t->srv.n, 0);
}

/* ---- lists ---- */

static void h_pages(struct srv *s, int i, struct sconn *c)
{
    const char *target = s->reqs[i].target;

    if (!strstr(target, "continue=")) {
        srv_reply(
            c, 200, NULL,
            "{\"kind\":\"VmGroupList\",\"metadata\":{\"resourceVersion\":\"77\","
            "\"continue\":\"tok+1=\",\"remainingItemCount\":3},\"items\":[{\"n\":1},{\"n\":2}]}");
    } else if (strstr(target, "continue=tok%2B1%3D")) {
        srv_reply(c, 200, NULL,
                  "{\"kind\":\"VmGroupList\",\"metadata\":{\"resourceVersion\":\"77\","
                  "\"continue\":\"tok2\"},\"items\":[{\"n\":3},{\"n\":4}]}");
    } else if (strstr(target, "continue=tok2")) {
        srv_reply(c, 200, NULL,
                  "{\"kind\":\"VmGroupList\",\"metadata\":{\"resourceVersion\":\"77\"},"
                  "\"items\":[{\"n\":5}]}");
    } else {
        srv_reply(c, 400, NULL, ST_BAD_REQUEST);
    }
}

static void test_list_gathers_pages(void **state)
{
    struct t *t = *state;
    struct rec r = {0};
    const cJSON *items, *meta, *it;
    int n = 0;

    client(t, NULL, NULL);
    t->srv.handle = h_pages;
    assert_int_equal(
        kube_list(t->kc, "/apis/g/v1/things?labelSelector=a%3Db", 2, NULL, on_result, &r, NULL), 0);
    run_until(t, &r.calls, 1);
    assert_int_equal(r.err, 0);
    assert_int_equal(r.attempts, 3);
    assert_string_equal(t->srv.reqs[0].target, "/apis/g/v1/things?labelSelector=a%3Db&limit=2");
    assert_string_equal(t->srv.reqs[1].target,
                        "/apis/g/v1/things?labelSelector=a%3Db&limit=2&continue=tok%2B1%3D");
    items = cJSON_GetObjectItem(r.body, "items");
    cJSON_ArrayForEach(it, items)
    {
        n++;
        assert_int_equal(cJSON_GetObjectItem(it, "n")->valueint, n);
    }
    assert_int_equal(n, 5);
    meta = cJSON_GetObjectItem(r.body, "metadata");
    assert_string_equal(cJSON_GetObjectItem(meta, "resourceVersion")->valuestring, "77");
    assert_null(cJSON_GetObjectItem(meta, "continue"));
    assert_null(cJSON_GetObjectItem(meta, "remainingItemCount"));
    rec_clear(&r);
}

struct pages {
    struct rec r;
    int calls;
    int stop_at;
    int last_items;
};

static int on_page_stop(void *data, const cJSON *page)
{
    struct pages *p = data;

    p->calls++;
    p->last_items = cJSON_GetArraySize(cJSON_GetObjectItem(page, "items"));
    return p->calls == p->stop_at ? 1 : 0;
}

static void on_pages_result(void *data, const struct kube_result *res)
{
    struct pages *p = data;

    on_result(&p->r, res);
}

static void test_list_page_callback_stops(void **state)
{
    struct t *t = *state;
    struct pages all = {.stop_at = 0}, stop = {.stop_at = 2};

    client(t, NULL, NULL);
    t->srv.handle = h_pages;
    assert_int_equal(
        kube_list(t->kc, "/apis/g/v1/things", 2, on_page_stop, on_pages_result, &all, NULL), 0);
    run_until(t, &all.r.calls, 1);
    assert_int_equal(all.r.err, 0);
    assert_int_equal(all.calls, 3);
    assert_int_equal(all.last_items, 1);
    /* The result holds the last page. */
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(all.r.body, "items")), 1);

    assert_int_equal(
        kube_list(t->kc, "/apis/g/v1/things", 2, on_page_stop, on_pages_result, &stop, NULL), 0);
    run_until(t, &stop.r.calls, 1);
    assert_int_equal(stop.r.err, VMG_ECANCELED);
    assert_int_equal(stop.calls, 2);
    assert_int_equal(t->srv.n, 5);
    rec_clear(&all.r);
    rec_clear(&stop.r);
}

static void h_expired_continue(struct srv *s, int i, struct sconn *c)
{
    if (i == 0)
        h_pages(s, i, c);
    else
        srv_reply(c, 410, NULL, ST_EXPIRED_CONTINUE);
}

static void test_list_expired_continue(void **state)
{
    struct t *t = *state;
    struct rec r = {0};

    client(t, NULL, NULL);
    t->srv.handle = h_expired_continue;
    assert_int_equal(kube_list(t->kc, "/apis/g/v1/things", 2, NULL, on_result, &r, NULL), 0);
    run_until(t, &r.calls, 1);
    assert_int_equal(r.err, VMG_EGONE);
    assert_string_equal(r.reason, "Expired");
    assert_int_equal(r.attempts, 2);
    rec_clear(&r);
}

/* ---- watches ---- */

static int on_watch_line(void *data, const char *line, size_t len)
{
    struct t *t = data;

    assert_int_equal(strlen(line), len);
    if (t->lines < 4)
        snprintf(t->line[t->lines], sizeof(t->line[0]), "%s", line);
    t->lines++;
    return 0;
}

struct wctx {
    struct t *t;
    struct rec r;
};

static int on_wline(void *data, const char *line, size_t len)
{
    struct wctx *w = data;

    return on_watch_line(w->t, line, len);
}

static void on_wdone(void *data, const struct kube_result *res)
{
    struct wctx *w = data;

    on_result(&w->r, res);
}

static void h_watch(struct srv *s, int i, struct sconn *c)
{
    (void)s;
    (void)i;
    if (strstr(s->reqs[i].target, "resourceVersion=1&")) {
        srv_reply(c, 410, NULL, ST_GONE_WATCH);
        return;
    }
    srv_stream_start(c);
    srv_stream_send(c, "{\"type\":\"ADDED\",\"object\":{\"n\":1}}\n", false);
    srv_stream_send(c, "{\"type\":\"MODIFIED\",\"object\":{\"n\":1}}\r\n", false);
    srv_stream_send(c, "{\"type\":\"BOOKMARK\",\"object\":{\"n\":1}}\n", true);
}

static void test_watch_streams_lines(void **state)
{
    struct t *t = *state;
    struct wctx w = {.t = t}, gone = {.t = t};

    client(t, NULL, NULL);
    t->srv.handle = h_watch;
    assert_int_equal(kube_watch(t->kc, "/apis/g/v1/things?watch=1&resourceVersion=7&x=y", 60000,
                                on_wline, on_wdone, &w, NULL),
                     0);
    run_until(t, &w.r.calls, 1);
    assert_int_equal(w.r.err, 0);
    assert_int_equal(w.r.status, 200);
    assert_null(w.r.body);
    assert_int_equal(t->lines, 3);
    assert_string_equal(t->line[0], "{\"type\":\"ADDED\",\"object\":{\"n\":1}}");
    assert_string_equal(t->line[1], "{\"type\":\"MODIFIED\",\"object\":{\"n\":1}}");

    /* An HTTP error is buffered and decoded, not streamed; never retried. */
    assert_int_equal(kube_watch(t->kc, "/apis/g/v1/things?watch=1&resourceVersion=1&x=y", 60000,
                                on_wline, on_wdone, &gone, NULL),
                     0);
    run_until(t, &gone.r.calls, 1);
    assert_int_equal(gone.r.err, VMG_EGONE);
    assert_int_equal(gone.r.code, 410);
    assert_int_equal(gone.r.attempts, 1);
    assert_int_equal(t->lines, 3);
    rec_clear(&w.r);
    rec_clear(&gone.r);
}

static void h_watch_429_503(struct srv *s, int i, struct sconn *c)
{
    if (strstr(s->reqs[i].target, "fail=503")) {
        srv_reply(c, 503, "Retry-After: 0\r\n", ST_UNAVAILABLE);
    } else if (i == 0) {
        srv_reply(c, 429, "Retry-After: 0\r\n",
                  "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"storage is "
                  "(re)initializing\",\"reason\":\"TooManyRequests\",\"details\":"
                  "{\"retryAfterSeconds\":1},\"code\":429}");
    } else {
        h_watch(s, i, c);
    }
}

static void test_watch_retry_rules(void **state)
{
    struct t *t = *state;
    struct wctx w = {.t = t}, down = {.t = t};

    client(t, NULL, NULL);
    t->srv.handle = h_watch_429_503;
    /* 429 (a watch cache initializing): retried, then it streams. */
    assert_int_equal(
        kube_watch(t->kc, "/w?watch=1&resourceVersion=7&x=y", 60000, on_wline, on_wdone, &w, NULL),
        0);
    run_until(t, &w.r.calls, 1);
    assert_int_equal(w.r.err, 0);
    assert_int_equal(w.r.attempts, 2);
    assert_int_equal(t->lines, 3);
    /* 503, even with Retry-After: the caller's to handle. */
    assert_int_equal(
        kube_watch(t->kc, "/w?watch=1&fail=503", 60000, on_wline, on_wdone, &down, NULL), 0);
    run_until(t, &down.r.calls, 1);
    assert_int_equal(down.r.err, -EAGAIN);
    assert_int_equal(down.r.attempts, 1);
    rec_clear(&w.r);
    rec_clear(&down.r);
}

static void test_watch_connection_refused_not_retried(void **state)
{
    struct t *t = *state;
    struct wctx w = {.t = t};

    client(t, NULL, NULL);
    uv_close((uv_handle_t *)&t->srv.lis, NULL);
    uv_run(&t->loop, UV_RUN_NOWAIT);
    assert_int_equal(kube_watch(t->kc, "/w?watch=1", 60000, on_wline, on_wdone, &w, NULL), 0);
    run_until(t, &w.r.calls, 1);
    assert_int_equal(w.r.err, VMG_ETRANSPORT);
    assert_int_equal(w.r.attempts, 1);
}

static int on_wline_stop(void *data, const char *line, size_t len)
{
    struct wctx *w = data;

    (void)line;
    (void)len;
    w->t->lines++;
    return VMG_EGONE;
}

static void h_watch_open(struct srv *s, int i, struct sconn *c)
{
    (void)s;
    (void)i;
    srv_stream_start(c);
    srv_stream_send(c, "{\"type\":\"ERROR\",\"object\":{}}\n", false);
    s->held = c; /* stays open */
}

static void test_watch_line_callback_ends_it(void **state)
{
    struct t *t = *state;
    struct wctx w = {.t = t};

    client(t, NULL, NULL);
    t->srv.handle = h_watch_open;
    assert_int_equal(kube_watch(t->kc, "/w?watch=1", 60000, on_wline_stop, on_wdone, &w, NULL), 0);
    run_until(t, &w.r.calls, 1);
    assert_int_equal(w.r.err, VMG_EGONE);
    assert_int_equal(w.r.attempts, 1);
    assert_int_equal(t->lines, 1);
}

/* A watch answered with its headers and then nothing, the connection
 * held open: what a stalled server looks like from the client. */
static void h_watch_silent(struct srv *s, int i, struct sconn *c)
{
    (void)i;
    srv_stream_start(c);
    s->held = c;
}

static void test_watch_stall_ends_it(void **state)
{
    struct t *t = *state;
    struct kube_client_opts o = {.watch_stall_ms = 1000};
    struct wctx w = {.t = t};
    uint64_t took;

    client(t, NULL, &o);
    t->srv.handle = h_watch_silent;
    assert_int_equal(kube_watch(t->kc, "/w?watch=1", 60000, on_wline, on_wdone, &w, NULL), 0);
    run_until(t, &w.r.calls, 1);
    took = uv_now(&t->loop) - t->start_ms;
    /* Ended by the stall limit (1 s, checked each second), long before
     * the stream's 60 s, as a transport error its caller retries. */
    assert_int_equal(w.r.err, VMG_ETRANSPORT);
    assert_int_equal(w.r.attempts, 1);
    assert_int_equal(t->lines, 0);
    assert_true(took >= 900 && took < 8000);
    assert_non_null(strstr(w.r.message, "too slow"));
}

/* client_socket finds, among this process's descriptors, the client's end
 * of the connection the server accepted as c. */
static int client_socket(struct sconn *c)
{
    struct sockaddr_storage peer;
    int len = sizeof(peer);

    assert_int_equal(uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&peer, &len), 0);
    for (int fd = 3; fd < 4096; fd++) {
        struct sockaddr_storage name;
        socklen_t nlen = sizeof(name);

        if (getsockname(fd, (struct sockaddr *)&name, &nlen) == 0 && name.ss_family == AF_INET &&
            ((struct sockaddr_in *)&name)->sin_port == ((struct sockaddr_in *)&peer)->sin_port)
            return fd;
    }
    fail_msg("the client's socket is not among the descriptors");
    return -1;
}

static int tcp_opt(int fd, int level, int name)
{
    int v = -1;
    socklen_t len = sizeof(v);

    assert_int_equal(getsockopt(fd, level, name, &v, &len), 0);
    return v;
}

/* Every connection to the API server probes its peer when idle, so that a
 * watch on a connection whose peer vanished silently fails in about a
 * minute, where the kernel's defaults (and curl's 60 s idle and interval)
 * took about ten. */
static void test_connections_keepalive(void **state)
{
    struct t *t = *state;
    struct wctx w = {.t = t};
    kube_req *q = NULL;
    int fd;

    client(t, NULL, NULL);
    t->srv.handle = h_watch_silent;
    assert_int_equal(kube_watch(t->kc, "/w?watch=1", 60000, on_wline, on_wdone, &w, &q), 0);
    uv_timer_start(&t->dog, watchdog, 10000, 0);
    while (!t->srv.held)
        uv_run(&t->loop, UV_RUN_ONCE);
    uv_timer_stop(&t->dog);
    fd = client_socket(t->srv.held);
    assert_int_equal(tcp_opt(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
    assert_int_equal(tcp_opt(fd, IPPROTO_TCP, TCP_KEEPIDLE), KUBE_KEEPALIVE_IDLE_S);
    assert_int_equal(tcp_opt(fd, IPPROTO_TCP, TCP_KEEPINTVL), KUBE_KEEPALIVE_INTERVAL_S);
    assert_int_equal(tcp_opt(fd, IPPROTO_TCP, TCP_KEEPCNT), KUBE_KEEPALIVE_PROBES);
    assert_int_equal(tcp_opt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 60000);
    assert_int_equal(KUBE_KEEPALIVE_IDLE_S + KUBE_KEEPALIVE_INTERVAL_S * KUBE_KEEPALIVE_PROBES, 60);
    /* Without a stall limit (the default), the silent watch goes on. */
    assert_int_equal(w.r.calls, 0);
    kube_cancel(q);
    assert_int_equal(w.r.calls, 1);
    assert_int_equal(w.r.err, VMG_ECANCELED);
}

/* ---- cancel, close, rate ---- */

static void h_hold(struct srv *s, int i, struct sconn *c)
{
    (void)i;
    s->held = c;
}

static void test_cancel(void **state)
{
    struct t *t = *state;
    struct rec r1 = {0}, r2 = {0};
    kube_req *q1 = NULL, *q2 = NULL;

    client(t, NULL, NULL);
    t->srv.handle = h_hold;
    assert_int_equal(kube_request_ex(t->kc, "GET", "/a", NULL, NULL, 0, NULL, on_result, &r1, &q1),
                     0);
    assert_int_equal(kube_request_ex(t->kc, "GET", "/b", NULL, NULL, 0, NULL, on_result, &r2, &q2),
                     0);
    /* Canceled while queued. */
    kube_cancel(q2);
    assert_int_equal(r2.calls, 1);
    assert_int_equal(r2.err, VMG_ECANCELED);
    /* Canceled in flight, once the server holds it. */
    while (t->srv.n < 1)
        uv_run(&t->loop, UV_RUN_ONCE);
    assert_int_equal(r1.calls, 0);
    kube_cancel(q1);
    assert_int_equal(r1.calls, 1);
    assert_int_equal(r1.err, VMG_ECANCELED);
    assert_int_equal(kube_client_pending(t->kc), 0);
    assert_int_equal(t->srv.n, 1);
}

struct closer {
    struct t *t;
    int calls, err, late;
};

static void on_close_result(void *data, const struct kube_result *res)
{
    struct closer *c = data;

    c->calls++;
    c->err = res->err;
    /* A callback run by the close may not start anything new. */
    c->late = kube_get(c->t->kc, "/late", on_close_result, c);
}

static void test_close_cancels_everything(void **state)
{
    struct t *t = *state;
    struct closer a = {.t = t}, b = {.t = t}, c = {.t = t};
    struct kube_client_opts o = {.qps = 1, .burst = 1};

    client(t, NULL, &o);
    t->srv.handle = h_hold;
    assert_int_equal(kube_get(t->kc, "/a", on_close_result, &a), 0);
    assert_int_equal(kube_get(t->kc, "/b", on_close_result, &b), 0);
    assert_int_equal(kube_get(t->kc, "/c", on_close_result, &c), 0);
    while (t->srv.n < 1)
        uv_run(&t->loop, UV_RUN_ONCE);
    /* a is in flight; b and c wait for tokens. */
    kube_client_close(t->kc, on_kc_closed, t);
    assert_int_equal(a.calls + b.calls + c.calls, 3);
    assert_int_equal(a.err, VMG_ECANCELED);
    assert_int_equal(b.err, VMG_ECANCELED);
    assert_int_equal(c.err, VMG_ECANCELED);
    assert_int_equal(a.late, VMG_ECANCELED);
    t->kc = NULL;
    uv_run(&t->loop, UV_RUN_NOWAIT);
}

static void test_qps(void **state)
{
    struct t *t = *state;
    struct rec r[4] = {{0}};
    struct kube_client_opts o = {.qps = 20, .burst = 1};
    uint64_t took;

    client(t, NULL, &o);
    t->srv.handle = h_ok_object;
    for (int i = 0; i < 4; i++)
        assert_int_equal(kube_get(t->kc, "/x", on_result, &r[i]), 0);
    for (int i = 0; i < 4; i++)
        run_until(t, &r[i].calls, 1);
    uv_update_time(&t->loop);
    took = uv_now(&t->loop) - t->start_ms;
    /* One at once, then one every 50 ms. */
    assert_true(took >= 145);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(r[i].err, 0);
        rec_clear(&r[i]);
    }
}

static void test_bad_arguments(void **state)
{
    struct t *t = *state;
    struct rec r = {0};
    struct kube_client_opts o = {.max_queued = 2};
    char longpath[KUBE_PATH_MAX + 2];

    client(t, NULL, &o);
    t->srv.handle = h_hold;
    memset(longpath, 'a', sizeof(longpath) - 1);
    longpath[0] = '/';
    longpath[sizeof(longpath) - 1] = '\0';
    assert_int_equal(kube_get(t->kc, "relative", on_result, &r), -EINVAL);
    assert_int_equal(kube_get(t->kc, longpath, on_result, &r), -EINVAL);
    assert_int_equal(kube_request(t->kc, "get", "/x", NULL, NULL, on_result, &r), -EINVAL);
    assert_int_equal(kube_request(t->kc, "GET", "/x", NULL, NULL, NULL, &r), -EINVAL);
    assert_int_equal(kube_json_patch(t->kc, "/x", NULL, on_result, &r, NULL), -EINVAL);
    assert_int_equal(kube_watch(t->kc, "/x", 1000, NULL, on_result, &r, NULL), -EINVAL);
    assert_int_equal(kube_get(t->kc, "/1", on_result, &r), 0);
    assert_int_equal(kube_get(t->kc, "/2", on_result, &r), 0);
    assert_int_equal(kube_get(t->kc, "/3", on_result, &r), -ENOSPC);
    assert_int_equal(r.calls, 0);
    assert_int_equal(kube_client_new(NULL, t->http, t->cfg, NULL, &t->kc), -EINVAL);
}

/* ---- verbs ---- */

static void h_echo(struct srv *s, int i, struct sconn *c)
{
    (void)s;
    (void)i;
    srv_reply(c, 200, NULL, "{}");
}

static void test_verbs(void **state)
{
    struct t *t = *state;
    struct rec r[7] = {{0}};
    cJSON *obj = cJSON_Parse("{\"kind\":\"VmGroup\",\"metadata\":{\"name\":\"a\"}}");
    cJSON *ops = cJSON_Parse("[{\"op\":\"remove\",\"path\":\"/metadata/finalizers/0\"}]");
    cJSON *opts = cJSON_Parse("{\"propagationPolicy\":\"Background\"}");
    const char *p = "/apis/g/v1/namespaces/n/things/a";
    struct {
        const char *method, *target, *ctype, *body;
    } want[7] = {
        {"POST", "/apis/g/v1/namespaces/n/things", "application/json",
         "{\"kind\":\"VmGroup\",\"metadata\":{\"name\":\"a\"}}"},
        {"PUT", "/apis/g/v1/namespaces/n/things/a", "application/json",
         "{\"kind\":\"VmGroup\",\"metadata\":{\"name\":\"a\"}}"},
        {"PATCH", "/apis/g/v1/namespaces/n/things/a", "application/merge-patch+json",
         "{\"kind\":\"VmGroup\",\"metadata\":{\"name\":\"a\"}}"},
        {"PATCH", "/apis/g/v1/namespaces/n/things/a", "application/json-patch+json",
         "[{\"op\":\"remove\",\"path\":\"/metadata/finalizers/0\"}]"},
        {"DELETE", "/apis/g/v1/namespaces/n/things/a", "application/json",
         "{\"propagationPolicy\":\"Background\"}"},
        {"PUT", "/apis/g/v1/namespaces/n/things/a/status", "application/json",
         "{\"kind\":\"VmGroup\",\"metadata\":{\"name\":\"a\"}}"},
        {"PATCH", "/apis/g/v1/namespaces/n/things/a/status", "application/merge-patch+json",
         "{\"kind\":\"VmGroup\",\"metadata\":{\"name\":\"a\"}}"},
    };

    client(t, NULL, NULL);
    t->srv.handle = h_echo;
    assert_int_equal(kube_create(t->kc, "/apis/g/v1/namespaces/n/things", obj, on_result, &r[0]),
                     0);
    assert_int_equal(kube_update(t->kc, p, obj, on_result, &r[1]), 0);
    assert_int_equal(kube_merge_patch(t->kc, p, obj, on_result, &r[2], NULL), 0);
    assert_int_equal(kube_json_patch(t->kc, p, ops, on_result, &r[3], NULL), 0);
    assert_int_equal(kube_delete(t->kc, p, opts, on_result, &r[4]), 0);
    assert_int_equal(kube_update_status(t->kc, p, obj, on_result, &r[5]), 0);
    assert_int_equal(kube_merge_patch_status(t->kc, p, obj, on_result, &r[6], NULL), 0);
    for (int i = 0; i < 7; i++)
        run_until(t, &r[i].calls, 1);
    assert_int_equal(t->srv.n, 7);
    for (int i = 0; i < 7; i++) {
        bool found = false;

        assert_int_equal(r[i].err, 0);
        /* Connections may be served in any order: match by content. */
        for (int j = 0; j < 7 && !found; j++) {
            const struct sreq *q = &t->srv.reqs[j];

            found = strcmp(q->method, want[i].method) == 0 &&
                    strcmp(q->target, want[i].target) == 0 &&
                    strcmp(q->ctype, want[i].ctype) == 0 && strcmp(q->body, want[i].body) == 0;
        }
        if (!found)
            fail_msg("no request %s %s (%s) %s", want[i].method, want[i].target, want[i].ctype,
                     want[i].body);
        rec_clear(&r[i]);
    }
    cJSON_Delete(obj);
    cJSON_Delete(ops);
    cJSON_Delete(opts);
}

/* A write waiting for the rate limit goes with the body it was given last
 * (kube_rebody), or not at all (kube_unsend: its callback runs, canceled);
 * hurried requests go before those not hurried, in the order they were
 * hurried. Nothing is sent before the loop runs. */
static void test_rebody_unsend_and_hurry_before_sending(void **state)
{
    struct t *t = *state;
    struct rec r[5] = {{0}};
    struct kube_client_opts o = {.qps = 100, .burst = 1};
    cJSON *b[5], *v = cJSON_Parse("{\"n\":9}");
    kube_req *q[5] = {NULL};
    char text[32];

    client(t, NULL, &o);
    t->srv.handle = h_echo;
    for (int i = 0; i < 5; i++) {
        snprintf(text, sizeof(text), "{\"n\":%d}", i);
        b[i] = cJSON_Parse(text);
        assert_int_equal(kube_merge_patch(t->kc, "/x", b[i], on_result, &r[i], &q[i]), 0);
    }
    assert_int_equal(kube_hurry(q[3]), 0);
    assert_int_equal(kube_hurry(q[2]), 0);
    assert_int_equal(kube_hurry(q[3]), 0); /* once is enough */
    assert_int_equal(kube_rebody(q[2], v), 0);
    assert_int_equal(kube_unsend(q[4]), 0);
    assert_int_equal(r[4].calls, 1);
    assert_int_equal(r[4].err, VMG_ECANCELED);
    for (int i = 0; i < 4; i++)
        run_until(t, &r[i].calls, 1);
    assert_int_equal(t->srv.n, 4);
    assert_string_equal(t->srv.reqs[0].body, "{\"n\":3}");
    assert_string_equal(t->srv.reqs[1].body, "{\"n\":9}");
    assert_string_equal(t->srv.reqs[2].body, "{\"n\":0}");
    assert_string_equal(t->srv.reqs[3].body, "{\"n\":1}");
    for (int i = 0; i < 5; i++) {
        assert_int_equal(r[i].err, i == 4 ? VMG_ECANCELED : 0);
        rec_clear(&r[i]);
        cJSON_Delete(b[i]);
    }
    assert_int_equal(kube_rebody(NULL, v), -EINVAL);
    assert_int_equal(kube_unsend(NULL), -EINVAL);
    assert_int_equal(kube_hurry(NULL), -EINVAL);
    cJSON_Delete(v);
}

/* Once out, a request is neither changed, moved nor dropped. */
static void test_sent_requests_are_left_alone(void **state)
{
    struct t *t = *state;
    struct rec r = {0};
    cJSON *v = cJSON_Parse("{\"n\":1}");
    kube_req *q = NULL;

    client(t, NULL, NULL);
    t->srv.handle = h_hold;
    assert_int_equal(kube_merge_patch(t->kc, "/x", v, on_result, &r, &q), 0);
    while (t->srv.n < 1)
        uv_run(&t->loop, UV_RUN_ONCE);
    assert_int_equal(kube_rebody(q, v), -EBUSY);
    assert_int_equal(kube_hurry(q), -EBUSY);
    assert_int_equal(kube_unsend(q), -EBUSY);
    assert_int_equal(r.calls, 0);
    kube_cancel(q);
    assert_int_equal(r.calls, 1);
    rec_clear(&r);
    cJSON_Delete(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_decode),
        cmocka_unit_test(test_status_without_status_body),
        cmocka_unit_test(test_status_long_message_is_cut),
        cmocka_unit_test(test_status_err_map),
        cmocka_unit_test(test_retry_after),
        cmocka_unit_test(test_backoff_bounds),
        cmocka_unit_test(test_bucket),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_query),
        cmocka_unit_test_setup_teardown(test_get_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_status_not_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_429_honours_retry_after, setup, teardown),
        cmocka_unit_test_setup_teardown(test_429_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_5xx_idempotent_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_5xx_post_and_patch_not_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_5xx_with_retry_after_retried_for_post, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_retries_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_post_sent_then_dropped_not_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_401_rereads_token_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_401_retried_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_plugin_refresh, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_credential_shared_by_clients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_plugin_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_gathers_pages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_page_callback_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_expired_continue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_streams_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_line_callback_ends_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_retry_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_connection_refused_not_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_stall_ends_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connections_keepalive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_cancels_everything, setup, teardown),
        cmocka_unit_test_setup_teardown(test_qps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rebody_unsend_and_hurry_before_sending, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sent_requests_are_left_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verbs, setup, teardown),
    };

    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
