/* test_authn.c: kube/authn: the /metrics checker against a small
 * HTTP server on loopback standing in for the API server's TokenReview and
 * SubjectAccessReview: one review for many checks of one token, the bound
 * on reviews (503 at once beyond it), a canceled check dropping its review,
 * caches that junk tokens cannot flush, and bodies that never carry what
 * the API server said. The e2e suite runs it against kube-apiserver. */
#include "tests/unit/unit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "kube/authn.h"
#include "kube/kube.h"
#include "kube/kubeconfig.h"
#include "lib/http.h"
#include "tests/unit/srv.h"

#define TR_PATH "/apis/authentication.k8s.io/v1/tokenreviews"
#define SAR_PATH "/apis/authorization.k8s.io/v1/subjectaccessreviews"

/* What the fake API server says of tokens: "good-*" are users allowed,
 * "nosar-*" users not allowed, "fail-*" make the TokenReview fail with a
 * Status that names the operator's service account; the rest are not
 * authenticated. */
static const char TR_FORBIDDEN[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"tokenreviews.authentication.k8s.io is forbidden: User "
    "\\\"system:serviceaccount:vmgroup-operator-system:vmgroup-operator-controller-manager\\\" "
    "cannot create resource \\\"tokenreviews\\\" in API group \\\"authentication.k8s.io\\\" at "
    "the cluster scope\",\"reason\":\"Forbidden\",\"details\":{\"group\":"
    "\"authentication.k8s.io\",\"kind\":\"tokenreviews\"},\"code\":403}";

struct t {
    uv_loop_t loop;
    struct srv srv;
    uv_timer_t dog;
    char dir[64];
    kcfg *cfg;
    vmg_http *http;
    kube_client *kc;
    authn *a;
    uint64_t now;
    bool hold;                        /* leave TokenReviews unanswered */
    bool deny;                        /* SubjectAccessReviews say no to everyone */
    struct sconn *held[SRV_MAX_REQS]; /* held connections, by request number */
    int n_tr, n_sar;
};

struct answer {
    int calls;
    int status;
    char msg[1200];
};

static uint64_t fake_now(void *data)
{
    return ((struct t *)data)->now;
}

/* token_of copies the token of a TokenReview body. */
static void token_of(const char *body, char *out, size_t len)
{
    cJSON *j = cJSON_Parse(body);
    const cJSON *tok = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "spec"), "token");

    snprintf(out, len, "%s", cJSON_IsString(tok) ? tok->valuestring : "");
    cJSON_Delete(j);
}

static void answer_tr(struct sconn *c, const char *tok)
{
    char body[1024];

    if (strncmp(tok, "fail-", 5) == 0) {
        srv_reply(c, 403, NULL, TR_FORBIDDEN);
        return;
    }
    if (strncmp(tok, "good-", 5) == 0 || strncmp(tok, "nosar-", 6) == 0)
        snprintf(body, sizeof(body),
                 "{\"kind\":\"TokenReview\",\"apiVersion\":\"authentication.k8s.io/v1\","
                 "\"spec\":{\"token\":\"%s\"},\"status\":{\"authenticated\":true,\"user\":"
                 "{\"username\":\"system:serviceaccount:mon:%s\",\"uid\":\"u1\",\"groups\":"
                 "[\"system:serviceaccounts\"]}}}",
                 tok, tok);
    else
        snprintf(body, sizeof(body),
                 "{\"kind\":\"TokenReview\",\"apiVersion\":\"authentication.k8s.io/v1\","
                 "\"spec\":{\"token\":\"%s\"},\"status\":{\"user\":{},\"error\":\"invalid "
                 "bearer token\"}}",
                 tok);
    srv_reply(c, 201, NULL, body);
}

static void handle(struct srv *s, int i, struct sconn *c)
{
    struct t *t = s->data;
    char tok[512];

    if (strcmp(s->reqs[i].target, TR_PATH) == 0) {
        t->n_tr++;
        if (t->hold) {
            t->held[i] = c;
            return;
        }
        token_of(s->reqs[i].body, tok, sizeof(tok));
        answer_tr(c, tok);
    } else if (strcmp(s->reqs[i].target, SAR_PATH) == 0) {
        t->n_sar++;
        srv_reply(c, 201, NULL,
                  !t->deny && strstr(s->reqs[i].body, "serviceaccount:mon:good-")
                      ? "{\"kind\":\"SubjectAccessReview\",\"status\":{\"allowed\":true}}"
                      : "{\"kind\":\"SubjectAccessReview\",\"status\":{\"allowed\":false}}");
    } else {
        srv_reply(c, 404, NULL, "{}");
    }
}

/* release answers the held TokenReview of request i. */
static void release(struct t *t, int i)
{
    char tok[512];

    assert_non_null(t->held[i]);
    token_of(t->srv.reqs[i].body, tok, sizeof(tok));
    answer_tr(t->held[i], tok);
    t->held[i] = NULL;
}

static int setup(void **state)
{
    struct t *t = calloc(1, sizeof(*t));
    struct kube_client_opts o = {.qps = -1, .retries = -1};
    int rc;

    if (!t)
        return -1;
    snprintf(t->dir, sizeof(t->dir), "/tmp/test_authn.XXXXXX");
    if (!mkdtemp(t->dir) || uv_loop_init(&t->loop) != 0) {
        free(t);
        return -1;
    }
    srv_start(&t->srv, &t->loop);
    t->srv.data = t;
    t->srv.handle = handle;
    uv_timer_init(&t->loop, &t->dog);
    t->cfg = unit_loopback_kcfg(t->dir, t->srv.port, "    token: op-token\n");
    t->http = vmg_http_new(&t->loop, &rc);
    assert_non_null(t->http);
    assert_int_equal(kube_client_new(&t->loop, t->http, t->cfg, &o, &t->kc), 0);
    t->now = 1000000;
    *state = t;
    return 0;
}

static void make_authn(struct t *t, struct authn_opts o)
{
    o.path = "/metrics";
    o.verb = "get";
    o.now_ms = fake_now;
    o.clock_data = t;
    assert_int_equal(authn_new(t->kc, &o, &t->a), 0);
}

static void on_kc_closed(void *data)
{
    struct t *t = data;

    vmg_http_close(t->http, NULL, NULL);
    t->http = NULL;
}

static int teardown(void **state)
{
    struct t *t = *state;

    authn_free(t->a);
    kube_client_close(t->kc, on_kc_closed, t);
    srv_stop(&t->srv);
    uv_close((uv_handle_t *)&t->dog, NULL);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    kcfg_free(t->cfg);
    assert_int_equal(uv_loop_close(&t->loop), 0);
    rmdir(t->dir);
    free(t);
    return 0;
}

static void on_answer(void *data, int status, const char *msg)
{
    struct answer *ans = data;

    ans->calls++;
    ans->status = status;
    snprintf(ans->msg, sizeof(ans->msg), "%s", msg ? msg : "");
}

static void watchdog(uv_timer_t *timer)
{
    (void)timer;
    fail_msg("the test made no progress for 10 s");
}

/* run_until runs the loop until *n reaches want. */
static void run_until(struct t *t, const int *n, int want)
{
    uv_timer_start(&t->dog, watchdog, 10000, 0);
    while (*n < want)
        uv_run(&t->loop, UV_RUN_ONCE);
    uv_timer_stop(&t->dog);
}

/* check runs one check of token to its end and returns its status. */
static int check(struct t *t, const char *token)
{
    char hdr[600];
    struct answer ans = {0};

    snprintf(hdr, sizeof(hdr), "Bearer %s", token);
    authn_check(t->a, hdr, on_answer, &ans);
    run_until(t, &ans.calls, 1);
    return ans.status;
}

/* ---- tests ---- */

static void test_allowed_denied_and_cached(void **state)
{
    struct t *t = *state;

    make_authn(t, (struct authn_opts){0});
    assert_int_equal(check(t, "good-1"), 200);
    assert_int_equal(check(t, "nosar-1"), 403);
    assert_int_equal(check(t, "junk-1"), 401);
    assert_int_equal(t->n_tr, 3);
    assert_int_equal(t->n_sar, 2);
    /* The SubjectAccessReview asks for the user, the path and the verb. */
    assert_non_null(strstr(t->srv.reqs[1].body, "\"user\":\"system:serviceaccount:mon:good-1\""));
    assert_non_null(strstr(t->srv.reqs[1].body, "\"path\":\"/metrics\""));
    /* Cached: no request more. */
    assert_int_equal(check(t, "good-1"), 200);
    assert_int_equal(check(t, "nosar-1"), 403);
    assert_int_equal(check(t, "junk-1"), 401);
    assert_int_equal(t->srv.n, 5);
    /* No header, no bearer, a token JSON would need to escape: no review. */
    {
        struct answer ans = {0};
        assert_null(authn_check(t->a, NULL, on_answer, &ans));
        assert_int_equal(ans.status, 401);
        assert_null(authn_check(t->a, "Basic eDp5", on_answer, &ans));
        assert_int_equal(ans.status, 401);
        assert_null(authn_check(t->a, "Bearer a\"b", on_answer, &ans));
        assert_int_equal(ans.status, 401);
        assert_int_equal(ans.calls, 3);
    }
    assert_int_equal(t->srv.n, 5);
}

static void test_singleflight(void **state)
{
    struct t *t = *state;
    struct answer ans[5] = {{0}};
    int done = 0;

    make_authn(t, (struct authn_opts){0});
    t->hold = true;
    for (int i = 0; i < 5; i++)
        assert_non_null(authn_check(t->a, "Bearer good-7", on_answer, &ans[i]));
    run_until(t, &t->n_tr, 1);
    /* Let the loop run a while: no second review of the same token. */
    for (int i = 0; i < 20; i++)
        uv_run(&t->loop, UV_RUN_NOWAIT);
    assert_int_equal(t->n_tr, 1);
    t->hold = false;
    release(t, 0);
    while (done < 5) {
        uv_run(&t->loop, UV_RUN_ONCE);
        done = 0;
        for (int i = 0; i < 5; i++)
            done += ans[i].calls;
    }
    for (int i = 0; i < 5; i++) {
        assert_int_equal(ans[i].calls, 1);
        assert_int_equal(ans[i].status, 200);
    }
    assert_int_equal(t->n_tr, 1);
    assert_int_equal(t->n_sar, 1);
}

static void test_full_lane_answers_503_at_once(void **state)
{
    struct t *t = *state;
    struct answer a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0};

    make_authn(t, (struct authn_opts){.max_inflight = 1, .max_queued = 1});
    t->hold = true;
    assert_non_null(authn_check(t->a, "Bearer good-1", on_answer, &a1)); /* under way */
    assert_non_null(authn_check(t->a, "Bearer good-2", on_answer, &a2)); /* waiting */
    assert_null(authn_check(t->a, "Bearer junk-3", on_answer, &a3));     /* no room */
    assert_int_equal(a3.calls, 1);
    assert_int_equal(a3.status, 503);
    /* A check of a token under review joins it, full or not. */
    assert_non_null(authn_check(t->a, "Bearer good-2", on_answer, &a4));
    run_until(t, &t->n_tr, 1);
    for (int i = 0; i < 20; i++)
        uv_run(&t->loop, UV_RUN_NOWAIT);
    assert_int_equal(t->n_tr, 1); /* one at a time */
    t->hold = false;
    release(t, 0);
    run_until(t, &a2.calls, 1);
    run_until(t, &a4.calls, 1);
    assert_int_equal(a1.status, 200);
    assert_int_equal(a2.status, 200);
    assert_int_equal(a4.status, 200);
    assert_int_equal(t->n_tr, 2);
    assert_int_equal(a3.calls, 1);
}

static void test_waiters_bounded(void **state)
{
    struct t *t = *state;
    struct answer ans[4] = {{0}};

    make_authn(t, (struct authn_opts){.max_waiters = 3});
    t->hold = true;
    for (int i = 0; i < 3; i++)
        assert_non_null(authn_check(t->a, "Bearer good-1", on_answer, &ans[i]));
    assert_null(authn_check(t->a, "Bearer good-1", on_answer, &ans[3]));
    assert_int_equal(ans[3].status, 503);
    run_until(t, &t->n_tr, 1);
    t->hold = false;
    release(t, 0);
    run_until(t, &ans[2].calls, 1);
    assert_int_equal(ans[0].status, 200);
}

static void test_cancel_drops_queued_review(void **state)
{
    struct t *t = *state;
    struct answer a1 = {0}, a2 = {0}, a3 = {0};
    authn_wait *w2;

    make_authn(t, (struct authn_opts){.max_inflight = 1, .max_queued = 4});
    t->hold = true;
    assert_non_null(authn_check(t->a, "Bearer good-1", on_answer, &a1));
    w2 = authn_check(t->a, "Bearer good-2", on_answer, &a2);
    assert_non_null(w2);
    run_until(t, &t->n_tr, 1);
    /* The client of the waiting check goes away. */
    authn_cancel(w2);
    assert_int_equal(a2.calls, 1);
    assert_int_equal(a2.status, 503);
    t->hold = false;
    release(t, 0);
    run_until(t, &a1.calls, 1);
    assert_int_equal(a1.status, 200);
    for (int i = 0; i < 50; i++)
        uv_run(&t->loop, UV_RUN_NOWAIT);
    /* good-2 was never reviewed: its room is free again. */
    assert_int_equal(t->n_tr, 1);
    assert_int_equal(a2.calls, 1);
    assert_int_equal(check(t, "good-3"), 200);
    assert_int_equal(t->n_tr, 2);
    (void)a3;
}

static void test_cancel_stops_review_under_way(void **state)
{
    struct t *t = *state;
    struct answer a1 = {0}, a2 = {0};
    authn_wait *w1, *w2;

    make_authn(t, (struct authn_opts){.max_inflight = 1, .max_queued = 1});
    t->hold = true;
    w1 = authn_check(t->a, "Bearer junk-1", on_answer, &a1);
    w2 = authn_check(t->a, "Bearer junk-1", on_answer, &a2);
    assert_non_null(w1);
    assert_non_null(w2);
    run_until(t, &t->n_tr, 1);
    /* One of two leaves: the review goes on for the other. */
    authn_cancel(w1);
    assert_int_equal(a1.status, 503);
    assert_int_equal(a2.calls, 0);
    /* The last leaves: the review stops, and its place is free at once. */
    authn_cancel(w2);
    assert_int_equal(a2.calls, 1);
    assert_int_equal(a2.status, 503);
    t->hold = false;
    assert_int_equal(check(t, "good-2"), 200);
    /* junk-1 was not cached by the canceled review. */
    assert_int_equal(check(t, "junk-1"), 401);
    assert_int_equal(t->n_tr, 3);
}

static void test_junk_does_not_evict_allowed(void **state)
{
    struct t *t = *state;
    char tok[32];
    int before;

    make_authn(t, (struct authn_opts){.max_entries = 4, .max_denied = 4});
    assert_int_equal(check(t, "good-1"), 200);
    assert_int_equal(check(t, "good-2"), 200);
    /* A flood of made-up tokens, each seen once: more than either cache. */
    for (int i = 0; i < 40; i++) {
        t->now += 10;
        snprintf(tok, sizeof(tok), "junk-%d", i);
        assert_int_equal(check(t, tok), 401);
    }
    before = t->srv.n;
    assert_int_equal(check(t, "good-1"), 200);
    assert_int_equal(check(t, "good-2"), 200);
    assert_int_equal(t->srv.n, before); /* both still cached */
    /* Until their time is up: then reviewed again. */
    t->now += 120001;
    assert_int_equal(check(t, "good-1"), 200);
    run_until(t, &t->n_sar, 3);
    assert_int_equal(t->srv.n, before + 2);
}

/* tr_of returns the number of the last TokenReview request of token, or -1. */
static int tr_of(struct t *t, const char *token)
{
    char tok[512];

    for (int i = t->srv.n - 1; i >= 0; i--) {
        if (strcmp(t->srv.reqs[i].target, TR_PATH) != 0)
            continue;
        token_of(t->srv.reqs[i].body, tok, sizeof(tok));
        if (strcmp(tok, token) == 0)
            return i;
    }
    return -1;
}

static void test_flood_keeps_allowed_scraper(void **state)
{
    struct t *t = *state;
    static struct answer junk[40];
    struct answer ans = {0}, more = {0};
    char hdr[64];
    int full = -1, i, refresh, srv_n;

    make_authn(t, (struct authn_opts){.max_inflight = 2, .max_queued = 4});
    assert_int_equal(check(t, "good-1"), 200);
    assert_int_equal(check(t, "good-2"), 200);
    /* A flood of made-up tokens whose reviews do not end fills the lane. */
    t->hold = true;
    memset(junk, 0, sizeof(junk));
    for (i = 0; i < 40 && full < 0; i++) {
        snprintf(hdr, sizeof(hdr), "Bearer junk-%d", i);
        if (!authn_check(t->a, hdr, on_answer, &junk[i]) && junk[i].status == 503)
            full = i;
    }
    assert_true(full > 0);
    run_until(t, &t->n_tr, 2 + 1);
    /* The scraper's allowed answer expires: it is still allowed, at once,
     * and its token is reviewed again in the place kept for that. */
    t->now += 120001;
    assert_null(authn_check(t->a, "Bearer good-1", on_answer, &ans));
    assert_int_equal(ans.calls, 1);
    assert_int_equal(ans.status, 200);
    /* The flood still finds the lane full. */
    assert_null(authn_check(t->a, "Bearer junk-99", on_answer, &more));
    assert_int_equal(more.status, 503);
    /* The API server answers again: the review of good-1 was sent before
     * those of the flood that waited (the fake API server takes one at a
     * time). */
    t->hold = false;
    release(t, tr_of(t, "junk-0"));
    run_until(t, &t->n_sar, 3);
    refresh = tr_of(t, "good-1");
    assert_true(refresh > 2);
    for (i = 1; i < full; i++) {
        snprintf(hdr, sizeof(hdr), "junk-%d", i);
        run_until(t, &junk[i].calls, 1);
        assert_int_equal(junk[i].status, 401);
        assert_true(tr_of(t, hdr) > refresh);
    }
    /* Renewed: allowed for a full time again, with no review. */
    t->now += 100000;
    srv_n = t->srv.n;
    assert_int_equal(check(t, "good-1"), 200);
    assert_int_equal(t->srv.n, srv_n);
    /* good-2 past its time, and its user no longer allowed: served while
     * the review runs, refused once it says no. */
    t->deny = true;
    assert_int_equal(check(t, "good-2"), 200);
    run_until(t, &t->n_sar, 4);
    /* (its answer may still be on its way back) */
    for (int k = 0; k < 5000 && (i = check(t, "good-2")) == 200; k++) {
        uv_run(&t->loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    assert_int_equal(i, 403);
    assert_int_equal(t->n_tr, 2 + 1 + (full - 1) + 1 + 1); /* one review each */
}

/* Linked with --wrap=calloc: the calloc_fails-th call from now fails. */
static int calloc_fails;
void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);

void *__wrap_calloc(size_t n, size_t size)
{
    if (calloc_fails > 0 && --calloc_fails == 0)
        return NULL;
    return __real_calloc(n, size);
}

/* A check that finds no memory to wait in leaves alone the review it
 * found under way (a re-check of a token whose allowed answer has since
 * run out): that review ends as it would have. */
static void test_no_memory_leaves_the_review_under_way(void **state)
{
    struct t *t = *state;
    struct answer ans = {0};
    int srv_n;

    make_authn(t, (struct authn_opts){0});
    assert_int_equal(check(t, "good-1"), 200);
    t->now += 120001;
    t->hold = true;
    assert_int_equal(check(t, "good-1"), 200); /* re-checked meanwhile */
    run_until(t, &t->n_tr, 2);
    t->hold = false;
    t->now += 120000; /* past the answer's grace: the re-check is waited for */
    calloc_fails = 1;
    assert_null(authn_check(t->a, "Bearer good-1", on_answer, &ans));
    calloc_fails = 0;
    assert_int_equal(ans.calls, 1);
    assert_int_equal(ans.status, 500);
    /* The re-check ends: good-1 is allowed again, with no review more. */
    release(t, tr_of(t, "good-1"));
    run_until(t, &t->n_sar, 2);
    for (int k = 0; k < 20; k++)
        uv_run(&t->loop, UV_RUN_NOWAIT);
    srv_n = t->srv.n;
    assert_int_equal(check(t, "good-1"), 200);
    assert_int_equal(t->srv.n, srv_n);
}

static void test_failure_is_500_and_body_is_generic(void **state)
{
    struct t *t = *state;
    struct answer ans = {0};
    const char *body;

    make_authn(t, (struct authn_opts){0});
    assert_non_null(authn_check(t->a, "Bearer fail-1", on_answer, &ans));
    run_until(t, &ans.calls, 1);
    assert_int_equal(ans.status, 500);
    /* The log learns what the API server said... */
    assert_non_null(strstr(ans.msg, "TokenReview failed"));
    assert_non_null(strstr(ans.msg, "vmgroup-operator-controller-manager"));
    /* ...the client does not. */
    body = authn_body(500);
    assert_string_equal(body, "Internal Server Error\n");
    assert_null(strstr(body, "serviceaccount"));
    assert_null(strstr(body, "tokenreviews"));
    assert_string_equal(authn_body(401), "Unauthorized\n");
    assert_string_equal(authn_body(403), "Forbidden\n");
    assert_string_equal(authn_body(503), "Service Unavailable\n");
    /* A failure is not cached: the next check reviews again. */
    ans.calls = 0;
    assert_non_null(authn_check(t->a, "Bearer fail-1", on_answer, &ans));
    run_until(t, &ans.calls, 1);
    assert_int_equal(t->n_tr, 2);
}

static void test_free_calls_back(void **state)
{
    struct t *t = *state;
    struct answer a1 = {0}, a2 = {0};

    make_authn(t, (struct authn_opts){.max_inflight = 1});
    t->hold = true;
    assert_non_null(authn_check(t->a, "Bearer good-1", on_answer, &a1));
    assert_non_null(authn_check(t->a, "Bearer good-2", on_answer, &a2));
    run_until(t, &t->n_tr, 1);
    authn_free(t->a);
    t->a = NULL;
    assert_int_equal(a1.calls, 1);
    assert_int_equal(a2.calls, 1);
    assert_int_equal(a1.status, 503);
    assert_int_equal(a2.status, 503);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_allowed_denied_and_cached, setup, teardown),
        cmocka_unit_test_setup_teardown(test_singleflight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_lane_answers_503_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_waiters_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_drops_queued_review, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_stops_review_under_way, setup, teardown),
        cmocka_unit_test_setup_teardown(test_junk_does_not_evict_allowed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flood_keeps_allowed_scraper, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_memory_leaves_the_review_under_way, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_failure_is_500_and_body_is_generic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_calls_back, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
