/* test_rest.c: vsphere/rest, the vSphere Automation REST client.
 *
 * Shaping: tag names, ids, request bodies, and the decoding of responses
 * saved from vcsim (tests/unit/fixtures/rest/, see its README).
 *
 * Flows: the client against a scripted HTTP/1.1 server on loopback, on the
 * same libuv loop. Each test lists the exchanges it expects, in order: the
 * request (method, target, and body when it matters) and the canned answer.
 * A request that is not the next one expected is answered 500 and fails the
 * test; so does an expected request that never comes. A watchdog fails a
 * test that stops making progress; nothing sleeps.
 */
#include "tests/unit/unit.h"
#include "tests/unit/srv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <uv.h>

#include "lib/err.h"
#include "lib/http.h"
#include "lib/log.h"
#include "vsphere/rest.h"

#define SESSION_ID "492c0424-078e-4718-b847-184e79123d20"
#define CAT_ID "urn:vmomi:InventoryServiceCategory:5e13eb69-247e-4f3f-a774-40b3b0b6976a:GLOBAL"
#define OTHER_ID "urn:vmomi:InventoryServiceCategory:b4f9a3c9-3e97-4605-b65e-020f6e487f2f:GLOBAL"
#define TAG_ID "urn:vmomi:InventoryServiceTag:aba5bec4-fd86-4195-8ba7-9414d527a09c:GLOBAL"
#define USER "vcuser@vsphere.local"
#define PASS "s3cret-Pa55word"
/* base64("vcuser@vsphere.local:s3cret-Pa55word") */
#define BASIC_AUTH "Basic dmN1c2VyQHZzcGhlcmUubG9jYWw6czNjcmV0LVBhNTV3b3Jk"

#define P_SESSION "/rest/com/vmware/cis/session"
#define P_CATEGORY "/rest/com/vmware/cis/tagging/category"
#define P_TAG "/rest/com/vmware/cis/tagging/tag"
#define P_ASSOC "/rest/com/vmware/cis/tagging/tag-association"

#define BODY_CATEGORY                                                                              \
    "{\"create_spec\":{\"name\":\"vmgroup-operator\",\"description\":\"VmGroups of "               \
    "vmgroup-operator: one tag per group\",\"cardinality\":\"SINGLE\",\"associable_types\":["      \
    "\"VirtualMachine\"]}}"
#define BODY_TAG                                                                                   \
    "{\"create_spec\":{\"name\":\"ns1/g1\",\"description\":\"VMs of VmGroup "                      \
    "ns1/g1\",\"category_id\":\"" CAT_ID "\"}}"
/* A string literal and its length, for the decoders. */
#define S(lit) lit, strlen(lit)

#define BODY_LIST_TAGS "{\"category_id\":\"" CAT_ID "\"}"
#define BODY_VM41 "{\"object_id\":{\"type\":\"VirtualMachine\",\"id\":\"vm-41\"}}"

static char *load(const char *name, size_t *len)
{
    return unit_fixture("rest", name, len);
}

/* ---- shaping ---- */

static void test_valid_id(void **state)
{
    char long_id[VS_REST_ID_MAX + 2];

    (void)state;
    assert_true(vs_rest_valid_id(TAG_ID));
    assert_true(vs_rest_valid_id(SESSION_ID));
    assert_false(vs_rest_valid_id(NULL));
    assert_false(vs_rest_valid_id(""));
    assert_false(vs_rest_valid_id("a/b"));
    assert_false(vs_rest_valid_id("a?~action=x"));
    assert_false(vs_rest_valid_id("a b"));
    assert_false(vs_rest_valid_id("a%2f"));
    memset(long_id, 'a', sizeof(long_id));
    long_id[VS_REST_ID_MAX] = '\0';
    assert_true(vs_rest_valid_id(long_id));
    long_id[VS_REST_ID_MAX] = 'a';
    long_id[VS_REST_ID_MAX + 1] = '\0';
    assert_false(vs_rest_valid_id(long_id));
}

static void test_bodies(void **state)
{
    struct vs_rest_object vm = {"VirtualMachine", "vm-41"};
    char *s = NULL;

    (void)state;
    assert_int_equal(vs_rest_body_category("vmgroup-operator",
                                           "VmGroups of vmgroup-operator: one tag per group", false,
                                           &s),
                     0);
    assert_string_equal(s, BODY_CATEGORY);
    free(s);
    assert_int_equal(vs_rest_body_category("c", "d \"q\"", true, &s), 0);
    assert_string_equal(s,
                        "{\"create_spec\":{\"name\":\"c\",\"description\":\"d \\\"q\\\"\","
                        "\"cardinality\":\"MULTIPLE\",\"associable_types\":[\"VirtualMachine\"]}}");
    free(s);
    assert_int_equal(vs_rest_body_tag("ns1/g1", "VMs of VmGroup ns1/g1", CAT_ID, &s), 0);
    assert_string_equal(s, BODY_TAG);
    free(s);
    assert_int_equal(vs_rest_body_object(&vm, &s), 0);
    assert_string_equal(s, BODY_VM41);
    free(s);
    assert_int_equal(vs_rest_body_list_tags(CAT_ID, &s), 0);
    assert_string_equal(s, BODY_LIST_TAGS);
    free(s);

    s = NULL;
    assert_int_equal(vs_rest_body_category("", "d", false, &s), -EINVAL);
    assert_int_equal(vs_rest_body_tag("t", "d", "bad id", &s), -EINVAL);
    vm.id[0] = '\0';
    assert_int_equal(vs_rest_body_object(&vm, &s), -EINVAL);
    assert_null(s);
}

static void test_parse_fixtures(void **state)
{
    char id[VS_REST_ID_MAX + 1];
    struct vs_rest_category c;
    struct vs_rest_tag t;
    struct vs_rest_object *objs = NULL;
    char **ids = NULL;
    size_t len, n = 99;
    char *b;

    (void)state;
    b = load("session.json", &len);
    assert_int_equal(vs_rest_parse_string(b, len, id, sizeof(id)), 0);
    assert_string_equal(id, SESSION_ID);
    free(b);
    b = load("category_create.json", &len);
    assert_int_equal(vs_rest_parse_string(b, len, id, sizeof(id)), 0);
    assert_string_equal(id, CAT_ID);
    /* A buffer too small is refused, not cut. */
    assert_int_equal(vs_rest_parse_string(b, len, id, 10), VMG_EPARSE);
    free(b);

    b = load("category_list.json", &len);
    assert_int_equal(vs_rest_parse_ids(b, len, &ids, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(ids[0], OTHER_ID);
    assert_string_equal(ids[1], CAT_ID);
    vs_rest_ids_free(ids, n);
    free(b);
    b = load("category_list_empty.json", &len);
    assert_int_equal(vs_rest_parse_ids(b, len, &ids, &n), 0);
    assert_int_equal(n, 0);
    vs_rest_ids_free(ids, n);
    free(b);
    b = load("vcenter_list_empty.json", &len);
    assert_int_equal(vs_rest_parse_ids(b, len, &ids, &n), 0);
    assert_int_equal(n, 0);
    vs_rest_ids_free(ids, n);
    free(b);
    b = load("tag_list.json", &len);
    assert_int_equal(vs_rest_parse_ids(b, len, &ids, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(ids[0], TAG_ID);
    vs_rest_ids_free(ids, n);
    free(b);

    b = load("category_get_vmgroup-operator.json", &len);
    assert_int_equal(vs_rest_parse_category(b, len, &c), 0);
    assert_string_equal(c.id, CAT_ID);
    assert_string_equal(c.name, "vmgroup-operator");
    assert_string_equal(c.cardinality, "SINGLE");
    assert_true(c.vm_associable);
    free(b);
    b = load("category_get_other.json", &len);
    assert_int_equal(vs_rest_parse_category(b, len, &c), 0);
    assert_string_equal(c.name, "other");
    assert_string_equal(c.cardinality, "MULTIPLE");
    assert_false(c.vm_associable);
    free(b);
    /* No associable types means every type. */
    assert_int_equal(vs_rest_parse_category(S("{\"value\":{\"id\":\"c-1\",\"name\":\"n\","
                                              "\"associable_types\":[]}}"),
                                            &c),
                     0);
    assert_true(c.vm_associable);

    b = load("tag_get.json", &len);
    assert_int_equal(vs_rest_parse_tag(b, len, &t), 0);
    assert_string_equal(t.id, TAG_ID);
    assert_string_equal(t.name, "ns1/g1");
    assert_string_equal(t.category_id, CAT_ID);
    free(b);

    b = load("attached_objects.json", &len);
    assert_int_equal(vs_rest_parse_objects(b, len, &objs, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(objs[0].type, "VirtualMachine");
    assert_string_equal(objs[0].id, "vm-41");
    assert_string_equal(objs[1].id, "vm-44");
    free(objs);
    free(b);
    b = load("attached_objects_empty.json", &len);
    assert_int_equal(vs_rest_parse_objects(b, len, &objs, &n), 0);
    assert_int_equal(n, 0);
    free(objs);
    free(b);
}

static void test_parse_refuses(void **state)
{
    char id[VS_REST_ID_MAX + 1] = "untouched";
    struct vs_rest_category c;
    struct vs_rest_tag t;
    struct vs_rest_object *objs = NULL;
    char **ids = NULL;
    size_t n = 7;
    char big[600];

    (void)state;
    assert_int_equal(vs_rest_parse_string(S("not json"), id, sizeof(id)), VMG_EPARSE);
    assert_int_equal(vs_rest_parse_string(S("[\"x\"]"), id, sizeof(id)), VMG_EPARSE);
    assert_int_equal(vs_rest_parse_string(S("{\"value\":1}"), id, sizeof(id)), VMG_EPARSE);
    assert_int_equal(vs_rest_parse_string(S("{}"), id, sizeof(id)), VMG_EPARSE);
    /* An id that could change the URL it goes into. */
    assert_int_equal(vs_rest_parse_string(S("{\"value\":\"a/../b\"}"), id, sizeof(id)), VMG_EPARSE);
    assert_string_equal(id, "untouched");
    /* Length is honoured: the text is cut before its end. */
    assert_int_equal(vs_rest_parse_string("{\"value\":\"abc\"}", 10, id, sizeof(id)), VMG_EPARSE);
    snprintf(big, sizeof(big), "{\"value\":\"%0*d\"}", 300, 0);
    assert_int_equal(vs_rest_parse_string(big, strlen(big), id, sizeof(id)), VMG_EPARSE);

    assert_int_equal(vs_rest_parse_ids(S("{\"value\":\"x\"}"), &ids, &n), VMG_EPARSE);
    assert_int_equal(vs_rest_parse_ids(S("{\"value\":[\"a\",2]}"), &ids, &n), VMG_EPARSE);
    assert_int_equal(vs_rest_parse_ids(S("{\"value\":[\"a b\"]}"), &ids, &n), VMG_EPARSE);
    assert_null(ids);
    assert_int_equal(n, 7);
    assert_int_equal(vs_rest_parse_category(S("{\"value\":{\"name\":\"n\"}}"), &c), VMG_EPARSE);
    assert_int_equal(vs_rest_parse_category(S("{\"value\":{\"id\":\"c\",\"name\":\"n\","
                                              "\"associable_types\":\"VirtualMachine\"}}"),
                                            &c),
                     VMG_EPARSE);
    assert_int_equal(vs_rest_parse_tag(S("{\"value\":{\"id\":\"t\",\"name\":\"n\"}}"), &t),
                     VMG_EPARSE);
    assert_int_equal(
        vs_rest_parse_objects(S("{\"value\":[{\"type\":\"VirtualMachine\"}]}"), &objs, &n),
        VMG_EPARSE);
    assert_null(objs);
    assert_int_equal(vs_rest_parse_objects(NULL, 0, &objs, &n), VMG_EPARSE);
}

/* body_of_n makes {"value":[ITEM,ITEM,...]} with n items. */
static char *body_of_n(size_t n, const char *item)
{
    size_t il = strlen(item), len = 12 + n * (il + 1);
    char *b = malloc(len), *p = b;

    assert_non_null(b);
    memcpy(p, "{\"value\":[", 10);
    p += 10;
    for (size_t i = 0; i < n; i++) {
        memcpy(p, item, il);
        p += il;
        *p++ = i + 1 < n ? ',' : ']';
    }
    if (n == 0)
        *p++ = ']';
    *p++ = '}';
    *p = '\0';
    return b;
}

/* A body within the size bound that would make too many values once
 * parsed is refused unparsed; the largest good answers still pass. */
static void test_parse_bounds_values(void **state)
{
    struct vs_rest_object *objs = NULL;
    char **ids = NULL, *b;
    size_t n = 0;

    (void)state;
    b = body_of_n(VS_REST_MAX_IDS, "\"urn:vmomi:InventoryServiceTag:1:GLOBAL\"");
    assert_int_equal(vs_rest_parse_ids(b, strlen(b), &ids, &n), 0);
    assert_int_equal(n, VS_REST_MAX_IDS);
    vs_rest_ids_free(ids, n);
    free(b);
    b = body_of_n(VS_REST_MAX_IDS, "{\"type\":\"VirtualMachine\",\"id\":\"vm-1\"}");
    assert_int_equal(vs_rest_parse_objects(b, strlen(b), &objs, &n), 0);
    assert_int_equal(n, VS_REST_MAX_IDS);
    free(objs);
    free(b);

    /* 1.6 MB of text, a million values: refused before cJSON sees it. */
    ids = NULL;
    n = 7;
    b = body_of_n(800000, "0");
    assert_int_equal(vs_rest_parse_ids(b, strlen(b), &ids, &n), VMG_ETOOBIG);
    assert_null(ids);
    assert_int_equal(n, 7);
    assert_int_equal(vs_rest_parse_objects(b, strlen(b), &objs, &n), VMG_ETOOBIG);
    free(b);
}

static void test_parse_error(void **state)
{
    char type[64], msg[128];
    size_t len;
    char *b;

    (void)state;
    b = load("already_exists.json", &len);
    vs_rest_parse_error(b, len, type, sizeof(type), msg, sizeof(msg));
    assert_string_equal(type, "already_exists");
    assert_string_equal(msg, "");
    free(b);
    b = load("vcenter_already_exists.json", &len);
    vs_rest_parse_error(b, len, type, sizeof(type), msg, sizeof(msg));
    assert_string_equal(type, "already_exists");
    assert_string_equal(msg, "An object with the same name already exists.");
    free(b);
    vs_rest_parse_error("404 page not found\n", 19, type, sizeof(type), msg, sizeof(msg));
    assert_string_equal(type, "");
    assert_string_equal(msg, "");
    vs_rest_parse_error(NULL, 0, type, sizeof(type), msg, sizeof(msg));
    assert_string_equal(type, "");
    /* Cut to fit. */
    b = load("vcenter_already_exists.json", &len);
    vs_rest_parse_error(b, len, type, 4, msg, 6);
    assert_string_equal(type, "alr");
    assert_string_equal(msg, "An ob");
    free(b);
}

/* ---- a scripted HTTP/1.1 server ---- */

struct exch {
    const char *method;
    const char *target; /* path and query */
    const char *body;   /* the request body expected; NULL: not checked */
    int status;         /* 0: never answered */
    const char *resp;   /* the answer's body; "@name" loads a fixture */
};

struct seen {
    char method[16];
    char target[512];
    char session[300];
    char auth[300];
    char content_type[64];
    char *body;
};

#define MAX_SEEN 64

/* The server: tests/unit/srv.c, keep-alive, answering from the script. */
struct server {
    struct srv base; /* first: the handler gets it */
    int port;
    const struct exch *script;
    size_t n_script, next;
    struct seen seen[MAX_SEEN];
    size_t n_seen;
    int mismatches;
    char mismatch[512];
};

static void respond(struct sconn *c, int status, const char *body)
{
    char head[256];
    char *loaded = NULL;
    size_t len;

    if (body && body[0] == '@') {
        loaded = load(body + 1, &len);
        body = loaded;
    } else {
        body = body ? body : "";
        len = strlen(body);
    }
    snprintf(head, sizeof(head),
             "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
             status, len);
    srv_send(c, head, strlen(head), false);
    srv_send(c, body, len, false);
    free(loaded);
}

static void handle(struct srv *base, int i, struct sconn *c)
{
    struct server *s = (struct server *)base;
    const char *head = c->buf, *body = c->buf + c->head_len;
    size_t body_len = c->body_len;
    struct seen *sn;
    const struct exch *e;

    (void)i;
    assert_true(s->n_seen < MAX_SEEN);
    sn = &s->seen[s->n_seen++];
    assert_int_equal(sscanf(head, "%15s %511s", sn->method, sn->target), 2);
    srv_header_value(head, "vmware-api-session-id", sn->session, sizeof(sn->session));
    srv_header_value(head, "Authorization", sn->auth, sizeof(sn->auth));
    srv_header_value(head, "Content-Type", sn->content_type, sizeof(sn->content_type));
    sn->body = strndup(body, body_len);
    assert_non_null(sn->body);
    e = s->next < s->n_script ? &s->script[s->next] : NULL;
    if (!e || strcmp(e->method, sn->method) != 0 || strcmp(e->target, sn->target) != 0 ||
        (e->body && strcmp(e->body, sn->body) != 0)) {
        s->mismatches++;
        snprintf(s->mismatch, sizeof(s->mismatch), "request %zu: got %s %s %s, expected %s %s %s",
                 s->n_seen, sn->method, sn->target, sn->body, e ? e->method : "nothing",
                 e ? e->target : "", e && e->body ? e->body : "");
        respond(c, 500, "{}");
        return;
    }
    s->next++;
    uv_stop(base->loop);
    if (e->status)
        respond(c, e->status, e->resp);
}

/* ---- the fixture: a loop, the server, a vmg_http and a client ---- */

struct fx {
    uv_loop_t loop;
    struct server srv;
    vmg_http *http;
    vs_rest *rest;
    uv_timer_t watchdog;
    bool timed_out;
    int prepared;
    int released;       /* o.release calls: one per client client() made, once freed */
    int made_by_client; /* clients client() made */
    int closed_calls;
    int http_closed;
};

static void on_watchdog(uv_timer_t *t)
{
    struct fx *f = t->data;

    f->timed_out = true;
}

/* The loop of the running test: callbacks that a test waits for stop it,
 * so that uv_run returns to look at the count at once. */
static uv_loop_t *cur_loop;

#define run_until(f, c, w) run_until_(f, c, w, __LINE__)
static void run_until_(struct fx *f, const int *count, int want, int line)
{
    assert_int_equal(uv_timer_start(&f->watchdog, on_watchdog, 10000, 0), 0);
    while (*count < want && !f->timed_out)
        uv_run(&f->loop, UV_RUN_ONCE);
    uv_timer_stop(&f->watchdog);
    if (f->timed_out)
        fprintf(stderr, "# timed out at line %d: %d of %d (seen %zu, next %zu, %s)\n", line, *count,
                want, f->srv.n_seen, f->srv.next, f->srv.mismatch);
    assert_false(f->timed_out);
}

static void on_release(void *data)
{
    ((struct fx *)data)->released++;
}

static void prepare(void *data, CURL *easy)
{
    struct fx *f = data;

    f->prepared++;
    assert_int_equal(curl_easy_setopt(easy, CURLOPT_NOPROXY, "*"), CURLE_OK);
}

static vs_rest *client(struct fx *f, const char *base, const char *password, size_t max_body)
{
    char url[64];
    struct vs_rest_options o = {0};
    vs_rest *r;
    int err = 0;

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/", f->srv.port);
    o.base_url = base ? base : url;
    o.user = USER;
    o.password = password ? password : PASS;
    o.category = "vmgroup-operator";
    o.category_description = "VmGroups of vmgroup-operator: one tag per group";
    o.prepare = prepare;
    o.prepare_data = f;
    o.release = on_release;
    o.timeout_ms = 5000;
    o.max_body = max_body;
    r = vs_rest_new(&f->loop, f->http, &o, &err);
    assert_non_null(r);
    f->made_by_client++;
    return r;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    int err = 0;

    assert_non_null(f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    cur_loop = &f->loop;
    f->srv.base.handle = handle;
    f->srv.base.keep_alive = true;
    srv_start(&f->srv.base, &f->loop);
    f->srv.port = f->srv.base.port;
    f->http = vmg_http_new(&f->loop, &err);
    assert_non_null(f->http);
    assert_int_equal(uv_timer_init(&f->loop, &f->watchdog), 0);
    f->watchdog.data = f;
    f->rest = client(f, NULL, NULL, 0);
    *state = f;
    return 0;
}

static void on_rest_closed(void *data)
{
    struct fx *f = data;

    f->closed_calls++;
    uv_stop(&f->loop);
}

static void on_http_closed(void *data)
{
    struct fx *f = data;

    f->http_closed++;
}

static void script(struct fx *f, const struct exch *e, size_t n)
{
    f->srv.script = e;
    f->srv.n_script = n;
    f->srv.next = 0;
}

/* finish closes the client, lets the logout through (answering a DELETE
 * of the session when one is expected), and checks the script ran whole. */
static void finish_script(struct fx *f)
{
    assert_int_equal(f->srv.mismatches, 0);
    assert_int_equal(f->srv.next, f->srv.n_script);
}

static int teardown(void **state)
{
    struct fx *f = *state;

    if (f->rest) {
        /* Whatever the test left: a DELETE of the session, if any, is
         * answered by the catch-all below. */
        static const struct exch bye[] = {{"DELETE", P_SESSION, NULL, 200, ""}};

        script(f, bye, 1);
        vs_rest_close(f->rest, on_rest_closed, f);
        f->rest = NULL;
        run_until(f, &f->closed_calls, 1);
    }
    vmg_http_close(f->http, on_http_closed, f);
    srv_stop(&f->srv.base);
    uv_close((uv_handle_t *)&f->watchdog, NULL);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(f->http_closed, 1);
    assert_int_equal(f->closed_calls, 1);
    assert_int_equal(f->released, f->made_by_client);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    for (size_t i = 0; i < f->srv.n_seen; i++)
        free(f->srv.seen[i].body);
    free(f);
    vmg_log_clear_secrets();
    return 0;
}

/* ---- what an operation got ---- */

struct got {
    int calls;
    int err;
    char msg[VS_REST_MSG_MAX];
    char id[VS_REST_ID_MAX + 1];
    struct vs_rest_object objs[8];
    size_t n_objs;
};

static void on_result(void *data, const struct vs_rest_result *res)
{
    struct got *g = data;

    g->calls++;
    uv_stop(cur_loop);
    g->err = res->err;
    assert_non_null(res->msg);
    snprintf(g->msg, sizeof(g->msg), "%s", res->msg);
    snprintf(g->id, sizeof(g->id), "%s", res->id ? res->id : "");
    g->n_objs = res->n_objects;
    for (size_t i = 0; i < res->n_objects && i < 8; i++)
        g->objs[i] = res->objects[i];
    if (res->err == 0)
        assert_string_equal(res->msg, "");
    else
        assert_string_not_equal(res->msg, "");
}

/* ---- flows ---- */

static void test_ensure_creates_then_caches(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, "", 200, "@session.json"},
        {"POST", P_CATEGORY, BODY_CATEGORY, 200, "@category_create.json"},
        {"POST", P_TAG, BODY_TAG, 200, "@tag_create.json"},
    };
    struct got a = {0}, b = {0}, c = {0};

    script(f, ex, 3);
    assert_int_equal(vs_rest_ensure_tag(f->rest, "ns1/g1", "VMs of VmGroup ns1/g1", on_result, &a),
                     0);
    assert_int_equal(a.calls, 0);
    run_until(f, &a.calls, 1);
    assert_int_equal(a.err, 0);
    assert_string_equal(a.id, TAG_ID);
    finish_script(f);
    /* The login: basic auth, no session; then the session id on each call. */
    assert_string_equal(f->srv.seen[0].auth, BASIC_AUTH);
    assert_string_equal(f->srv.seen[0].session, "");
    assert_string_equal(f->srv.seen[1].session, SESSION_ID);
    assert_string_equal(f->srv.seen[1].auth, "");
    assert_string_equal(f->srv.seen[1].content_type, "application/json");
    assert_string_equal(f->srv.seen[2].session, SESSION_ID);
    assert_int_equal(f->prepared, 3);
    assert_int_equal(vs_rest_logins(f->rest), 1);

    /* Again: from memory, no request, and still never from inside the call. */
    assert_int_equal(vs_rest_ensure_tag(f->rest, "ns1/g1", "VMs of VmGroup ns1/g1", on_result, &b),
                     0);
    assert_int_equal(vs_rest_ensure_category(f->rest, on_result, &c), 0);
    assert_int_equal(b.calls + c.calls, 0);
    run_until(f, &c.calls, 1);
    run_until(f, &b.calls, 1);
    assert_string_equal(b.id, TAG_ID);
    assert_string_equal(c.id, CAT_ID);
    assert_int_equal(f->srv.n_seen, 3);
    assert_true(vs_rest_available(f->rest));
    assert_string_equal(vs_rest_disabled_reason(f->rest), "");
}

static void test_ensure_finds_existing(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, NULL, 200, "@session.json"},
        {"POST", P_CATEGORY, BODY_CATEGORY, 400, "@already_exists.json"},
        {"GET", P_CATEGORY, "", 200, "@category_list.json"},
        {"GET", P_CATEGORY "/id:" OTHER_ID, NULL, 200, "@category_get_other.json"},
        {"GET", P_CATEGORY "/id:" CAT_ID, NULL, 200, "@category_get_vmgroup-operator.json"},
        {"POST", P_TAG, BODY_TAG, 400, "@vcenter_already_exists.json"},
        {"POST", P_TAG "/id:" CAT_ID "?~action=list-tags-for-category", BODY_LIST_TAGS, 200,
         "@tag_list.json"},
        {"GET", P_TAG "/id:" TAG_ID, NULL, 200, "@tag_get.json"},
    };
    struct got a = {0};

    script(f, ex, 8);
    assert_int_equal(vs_rest_ensure_tag(f->rest, "ns1/g1", "VMs of VmGroup ns1/g1", on_result, &a),
                     0);
    run_until(f, &a.calls, 1);
    assert_int_equal(a.err, 0);
    assert_string_equal(a.id, TAG_ID);
    finish_script(f);
}

static void test_tags_read_are_remembered(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, NULL, 200, "@session.json"},
        {"POST", P_CATEGORY, NULL, 200, "@category_create.json"},
        {"POST", P_TAG, NULL, 400, "@already_exists.json"},
        {"POST", P_TAG "/id:" CAT_ID "?~action=list-tags-for-category", BODY_LIST_TAGS, 200,
         "{\"value\":[\"" TAG_ID "\",\"tag-g2\"]}"},
        {"GET", P_TAG "/id:" TAG_ID, NULL, 200, "@tag_get.json"},
        {"GET", P_TAG "/id:tag-g2", NULL, 200,
         "{\"value\":{\"id\":\"tag-g2\",\"name\":\"ns1/g2\",\"category_id\":\"" CAT_ID "\"}}"},
    };
    struct got a = {0}, b = {0};

    script(f, ex, 6);
    assert_int_equal(vs_rest_ensure_tag(f->rest, "ns1/g2", "VMs of VmGroup ns1/g2", on_result, &a),
                     0);
    run_until(f, &a.calls, 1);
    assert_int_equal(a.err, 0);
    assert_string_equal(a.id, "tag-g2");
    /* ns1/g1 was read on the way: no request for it. */
    assert_int_equal(vs_rest_ensure_tag(f->rest, "ns1/g1", "VMs of VmGroup ns1/g1", on_result, &b),
                     0);
    run_until(f, &b.calls, 1);
    assert_string_equal(b.id, TAG_ID);
    assert_int_equal(f->srv.n_seen, 6);
    finish_script(f);
}

static void test_attach_list_detach_delete(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, NULL, 200, "@session.json"},
        {"POST", P_CATEGORY, NULL, 200, "@category_create.json"},
        {"POST", P_TAG, NULL, 200, "@tag_create.json"},
        {"POST", P_ASSOC "/id:" TAG_ID "?~action=attach", BODY_VM41, 200, ""},
        {"POST", P_ASSOC "/id:" TAG_ID "?~action=list-attached-objects", "{}", 200,
         "@attached_objects.json"},
        {"POST", P_ASSOC "/id:" TAG_ID "?~action=detach", BODY_VM41, 200, ""},
        {"DELETE", P_TAG "/id:" TAG_ID, "", 200, ""},
        /* Deleting again: not remembered, looked up, absent: done. */
        {"POST", P_TAG "/id:" CAT_ID "?~action=list-tags-for-category", BODY_LIST_TAGS, 200,
         "@vcenter_list_empty.json"},
        /* Listing a tag that does not exist: no objects. */
        {"POST", P_TAG "/id:" CAT_ID "?~action=list-tags-for-category", BODY_LIST_TAGS, 200,
         "@category_list_empty.json"},
    };
    struct got a = {0}, l = {0}, d = {0}, del = {0}, del2 = {0}, l2 = {0};

    script(f, ex, 9);
    assert_int_equal(
        vs_rest_attach(f->rest, "ns1/g1", "VMs of VmGroup ns1/g1", "vm-41", on_result, &a), 0);
    run_until(f, &a.calls, 1);
    assert_int_equal(a.err, 0);
    assert_int_equal(vs_rest_list_attached(f->rest, "ns1/g1", on_result, &l), 0);
    run_until(f, &l.calls, 1);
    assert_int_equal(l.err, 0);
    assert_int_equal(l.n_objs, 2);
    assert_string_equal(l.objs[0].type, "VirtualMachine");
    assert_string_equal(l.objs[0].id, "vm-41");
    assert_string_equal(l.objs[1].id, "vm-44");
    assert_int_equal(vs_rest_detach(f->rest, "ns1/g1", "vm-41", on_result, &d), 0);
    run_until(f, &d.calls, 1);
    assert_int_equal(d.err, 0);
    assert_int_equal(vs_rest_delete_tag(f->rest, "ns1/g1", on_result, &del), 0);
    run_until(f, &del.calls, 1);
    assert_int_equal(del.err, 0);
    assert_int_equal(vs_rest_delete_tag(f->rest, "ns1/g1", on_result, &del2), 0);
    run_until(f, &del2.calls, 1);
    assert_int_equal(del2.err, 0);
    assert_int_equal(vs_rest_list_attached(f->rest, "ns1/g1", on_result, &l2), 0);
    run_until(f, &l2.calls, 1);
    assert_int_equal(l2.err, 0);
    assert_int_equal(l2.n_objs, 0);
    finish_script(f);
}

static void test_detach_without_category(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, NULL, 200, "@session.json"},
        {"GET", P_CATEGORY, NULL, 200, "@category_list.json"},
        {"GET", P_CATEGORY "/id:" OTHER_ID, NULL, 200, "@category_get_other.json"},
        {"GET", P_CATEGORY "/id:" CAT_ID, NULL, 404, "404 page not found\n"},
    };
    struct got d = {0};

    /* Nothing is made to detach: no category means nothing is attached. */
    script(f, ex, 4);
    assert_int_equal(vs_rest_detach(f->rest, "ns1/g1", "vm-41", on_result, &d), 0);
    run_until(f, &d.calls, 1);
    assert_int_equal(d.err, 0);
    finish_script(f);
}

#define NEW_CAT_ID "urn:vmomi:InventoryServiceCategory:0c5c1c4e-9d1e-4a55-8f3e-2b8d2f3d9a11:GLOBAL"
#define TAG2_ID "urn:vmomi:InventoryServiceTag:7d1f6f2a-5b0e-4c1d-9a53-6f7e8c9d0b12:GLOBAL"

/* The exchanges of a tag's deletion that finds the category remembered
 * gone (its tag list answers 404), looks it up again and finds it made
 * again outside under NEW_CAT_ID, holding the tag NAME as TAG2_ID. */
/* clang-format off */
#define EX_DELETE_IN_CATEGORY_MADE_AGAIN(name) \
    {"POST", P_TAG "/id:" CAT_ID "?~action=list-tags-for-category", BODY_LIST_TAGS, 404, \
     "404 page not found\n"}, \
    {"GET", P_CATEGORY, NULL, 200, "{\"value\":[\"" NEW_CAT_ID "\"]}"}, \
    {"GET", P_CATEGORY "/id:" NEW_CAT_ID, NULL, 200, \
     "{\"value\":{\"id\":\"" NEW_CAT_ID "\",\"name\":\"vmgroup-operator\"," \
     "\"description\":\"\",\"cardinality\":\"SINGLE\",\"associable_types\":[\"VirtualMachine\"]}}"}, \
    {"POST", P_TAG "/id:" NEW_CAT_ID "?~action=list-tags-for-category", \
     "{\"category_id\":\"" NEW_CAT_ID "\"}", 200, "{\"value\":[\"" TAG2_ID "\"]}"}, \
    {"GET", P_TAG "/id:" TAG2_ID, NULL, 200, \
     "{\"value\":{\"id\":\"" TAG2_ID "\",\"description\":\"\",\"name\":\"" name "\"," \
     "\"category_id\":\"" NEW_CAT_ID "\"}}"}, \
    {"DELETE", P_TAG "/id:" TAG2_ID, "", 200, ""}
/* clang-format on */

/* delete_after_ensure scripts ex (n exchanges), makes the tag ns1/g1 and
 * deletes the tag name: both succeed, with every exchange made. */
static void delete_after_ensure(struct fx *f, const struct exch *ex, size_t n, const char *name)
{
    struct got t = {0}, del = {0};

    script(f, ex, n);
    assert_int_equal(vs_rest_ensure_tag(f->rest, "ns1/g1", "VMs of VmGroup ns1/g1", on_result, &t),
                     0);
    run_until(f, &t.calls, 1);
    assert_int_equal(t.err, 0);
    assert_int_equal(vs_rest_delete_tag(f->rest, name, on_result, &del), 0);
    run_until(f, &del.calls, 1);
    assert_int_equal(del.err, 0);
    finish_script(f);
}

/* The category remembered was deleted and made again outside, under a new
 * id: deleting a tag looks the category up again, and deletes the tag in
 * the new one rather than saying there is nothing to delete. */
static void test_delete_finds_category_made_again(void **state)
{
    static const struct exch ex[] = {
        {"POST", P_SESSION, NULL, 200, "@session.json"},
        {"POST", P_CATEGORY, NULL, 200, "@category_create.json"},
        {"POST", P_TAG, NULL, 200, "@tag_create.json"},
        EX_DELETE_IN_CATEGORY_MADE_AGAIN("ns1/g2"),
    };

    delete_after_ensure(*state, ex, sizeof(ex) / sizeof(ex[0]), "ns1/g2");
}

/* The same after the remembered tag id answered 404 first (a restart used
 * already): the category is still looked up again once. */
static void test_delete_of_a_stale_tag_finds_category_made_again(void **state)
{
    static const struct exch ex[] = {
        {"POST", P_SESSION, NULL, 200, "@session.json"},
        {"POST", P_CATEGORY, NULL, 200, "@category_create.json"},
        {"POST", P_TAG, NULL, 200, "@tag_create.json"},
        {"DELETE", P_TAG "/id:" TAG_ID, "", 404, "404 page not found\n"},
        EX_DELETE_IN_CATEGORY_MADE_AGAIN("ns1/g1"),
    };

    delete_after_ensure(*state, ex, sizeof(ex) / sizeof(ex[0]), "ns1/g1");
}

#define BODY_INVALID                                                                               \
    "{\"type\":\"com.vmware.vapi.std.errors.invalid_argument\",\"value\":{\"messages\":[{"         \
    "\"default_message\":\"The name is not valid.\",\"id\":\"x\",\"args\":[]}]}}"

/* vCenter refuses a tag with invalid_argument, as it says a category is
 * gone: the category is looked up again once, and the second refusal ends
 * the op with vCenter's own message. */
static void test_tag_refused_after_lookup(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, NULL, 200, "@session.json"},
        {"POST", P_CATEGORY, NULL, 200, "@category_create.json"},
        {"POST", P_TAG, BODY_TAG, 400, BODY_INVALID},
        {"POST", P_CATEGORY, NULL, 400, "@already_exists.json"},
        {"GET", P_CATEGORY, NULL, 200, "{\"value\":[\"" CAT_ID "\"]}"},
        {"GET", P_CATEGORY "/id:" CAT_ID, NULL, 200, "@category_get_vmgroup-operator.json"},
        {"POST", P_TAG, BODY_TAG, 400, BODY_INVALID},
    };
    struct got t = {0};

    script(f, ex, 7);
    assert_int_equal(vs_rest_ensure_tag(f->rest, "ns1/g1", "VMs of VmGroup ns1/g1", on_result, &t),
                     0);
    run_until(f, &t.calls, 1);
    assert_int_equal(t.err, VMG_EHTTP);
    assert_non_null(strstr(t.msg, "invalid_argument: The name is not valid."));
    finish_script(f);
}

static void test_stale_tag_is_made_again(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, NULL, 200, "@session.json"},
        {"POST", P_CATEGORY, NULL, 200, "@category_create.json"},
        {"POST", P_TAG, NULL, 200, "{\"value\":\"tag-old\"}"},
        /* Deleted behind the client's back. */
        {"POST", P_ASSOC "/id:tag-old?~action=attach", BODY_VM41, 404, "404 page not found\n"},
        {"POST", P_TAG, BODY_TAG, 200, "@tag_create.json"},
        {"POST", P_ASSOC "/id:" TAG_ID "?~action=attach", BODY_VM41, 200, ""},
    };
    struct got t = {0}, a = {0};

    script(f, ex, 6);
    assert_int_equal(vs_rest_ensure_tag(f->rest, "ns1/g1", "VMs of VmGroup ns1/g1", on_result, &t),
                     0);
    run_until(f, &t.calls, 1);
    assert_string_equal(t.id, "tag-old");
    assert_int_equal(
        vs_rest_attach(f->rest, "ns1/g1", "VMs of VmGroup ns1/g1", "vm-41", on_result, &a), 0);
    run_until(f, &a.calls, 1);
    assert_int_equal(a.err, 0);
    finish_script(f);
}

static void test_relogin_on_401(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, NULL, 200, "@session.json"},
        {"POST", P_CATEGORY, BODY_CATEGORY, 401, ""},
        {"POST", P_SESSION, NULL, 200, "{\"value\":\"second-session\"}"},
        {"POST", P_CATEGORY, BODY_CATEGORY, 200, "@category_create.json"},
    };
    struct got c = {0};

    script(f, ex, 4);
    assert_int_equal(vs_rest_ensure_category(f->rest, on_result, &c), 0);
    run_until(f, &c.calls, 1);
    assert_int_equal(c.err, 0);
    assert_string_equal(c.id, CAT_ID);
    finish_script(f);
    assert_string_equal(f->srv.seen[1].session, SESSION_ID);
    assert_string_equal(f->srv.seen[2].auth, BASIC_AUTH);
    assert_string_equal(f->srv.seen[3].session, "second-session");
    assert_true(vs_rest_available(f->rest));
    assert_int_equal(vs_rest_logins(f->rest), 2);
}

static void test_401_after_relogin_disables(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, NULL, 200, "@session.json"},
        {"POST", P_SESSION "?~action=get", "", 401, ""},
        {"POST", P_SESSION, NULL, 200, "@session.json"},
        {"POST", P_SESSION "?~action=get", "", 401, ""},
    };
    struct got c = {0}, again = {0};

    script(f, ex, 4);
    assert_int_equal(vs_rest_login(f->rest, on_result, &c), 0);
    run_until(f, &c.calls, 1);
    assert_int_equal(c.err, VS_REST_EUNAVAILABLE);
    assert_non_null(strstr(c.msg, "tagging unavailable"));
    assert_non_null(strstr(c.msg, "401"));
    assert_false(vs_rest_available(f->rest));
    assert_non_null(strstr(vs_rest_disabled_reason(f->rest), "401"));
    finish_script(f);
    /* Sticky: refused at once, the callback never called. */
    assert_int_equal(vs_rest_ensure_category(f->rest, on_result, &again), VS_REST_EUNAVAILABLE);
    assert_int_equal(
        vs_rest_attach(f->rest, "a/b", "VMs of VmGroup a/b", "vm-1", on_result, &again),
        VS_REST_EUNAVAILABLE);
    /* Until reset. */
    vs_rest_reset(f->rest);
    assert_true(vs_rest_available(f->rest));
    assert_string_equal(vs_rest_disabled_reason(f->rest), "");
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(again.calls, 0);
}

static void test_login_checks_session(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, "", 200, "@session.json"},
        {"POST", P_SESSION "?~action=get", "", 200, "@session_get.json"},
    };
    struct got c = {0};

    script(f, ex, 2);
    assert_int_equal(vs_rest_login(f->rest, on_result, &c), 0);
    run_until(f, &c.calls, 1);
    assert_int_equal(c.err, 0);
    finish_script(f);
    assert_string_equal(f->srv.seen[1].session, SESSION_ID);
}

static void test_wrong_password(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, "", 401, ""},
    };
    struct got a = {0}, b = {0};

    script(f, ex, 1);
    /* Two ops wait for one login, and both learn of its refusal. */
    assert_int_equal(
        vs_rest_attach(f->rest, "ns1/g1", "VMs of VmGroup ns1/g1", "vm-1", on_result, &a), 0);
    assert_int_equal(vs_rest_ensure_category(f->rest, on_result, &b), 0);
    run_until(f, &a.calls, 1);
    run_until(f, &b.calls, 1);
    assert_int_equal(a.err, VS_REST_EUNAVAILABLE);
    assert_int_equal(b.err, VS_REST_EUNAVAILABLE);
    assert_non_null(strstr(a.msg, "wrong user name or password"));
    assert_non_null(strstr(a.msg, USER));
    assert_null(strstr(a.msg, PASS));
    assert_non_null(strstr(vs_rest_disabled_reason(f->rest), "HTTP 401"));
    assert_false(vs_rest_available(f->rest));
    finish_script(f);
}

static void test_no_endpoint(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", "/nowhere" P_SESSION, "", 404, "404 page not found\n"},
    };
    struct got a = {0};
    char base[64];

    vs_rest_close(f->rest, on_rest_closed, f);
    run_until(f, &f->closed_calls, 1);
    f->closed_calls = 0;
    snprintf(base, sizeof(base), "http://127.0.0.1:%d/nowhere", f->srv.port);
    f->rest = client(f, base, NULL, 0);
    script(f, ex, 1);
    assert_int_equal(vs_rest_ensure_tag(f->rest, "ns1/g1", "VMs of VmGroup ns1/g1", on_result, &a),
                     0);
    run_until(f, &a.calls, 1);
    assert_int_equal(a.err, VS_REST_EUNAVAILABLE);
    assert_non_null(strstr(a.msg, "no vSphere Automation REST endpoint"));
    assert_non_null(strstr(a.msg, "/nowhere/rest"));
    assert_non_null(strstr(a.msg, "404"));
    finish_script(f);
}

static void test_connection_refused(void **state)
{
    struct fx *f = *state;
    struct got a = {0};
    uv_tcp_t tmp;
    char base[64];
    int port;

    /* A port that was free a moment ago, and has nothing listening. */
    assert_int_equal(uv_tcp_init(&f->loop, &tmp), 0);
    port = srv_bind_loopback(&tmp);
    uv_close((uv_handle_t *)&tmp, NULL);
    vs_rest_close(f->rest, on_rest_closed, f);
    run_until(f, &f->closed_calls, 1);
    f->closed_calls = 0;
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", port);
    f->rest = client(f, base, NULL, 0);
    assert_int_equal(vs_rest_ensure_category(f->rest, on_result, &a), 0);
    run_until(f, &a.calls, 1);
    assert_int_equal(a.err, VS_REST_EUNAVAILABLE);
    assert_non_null(strstr(vs_rest_disabled_reason(f->rest), "cannot reach"));
    assert_false(vs_rest_available(f->rest));
    assert_int_equal(f->srv.n_seen, 0);
}

static void test_403_on_category_disables(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, NULL, 200, "@session.json"},
        {"POST", P_CATEGORY, NULL, 403, ""},
    };
    struct got a = {0};

    script(f, ex, 2);
    assert_int_equal(vs_rest_ensure_tag(f->rest, "ns1/g1", "VMs of VmGroup ns1/g1", on_result, &a),
                     0);
    run_until(f, &a.calls, 1);
    assert_int_equal(a.err, VS_REST_EUNAVAILABLE);
    assert_non_null(strstr(vs_rest_disabled_reason(f->rest), "403"));
    finish_script(f);
}

static void test_403_on_attach_is_not_sticky(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, NULL, 200, "@session.json"},
        {"POST", P_CATEGORY, NULL, 200, "@category_create.json"},
        {"POST", P_TAG, NULL, 200, "@tag_create.json"},
        {"POST", P_ASSOC "/id:" TAG_ID "?~action=attach", NULL, 403, ""},
    };
    struct got a = {0};

    script(f, ex, 4);
    assert_int_equal(
        vs_rest_attach(f->rest, "ns1/g1", "VMs of VmGroup ns1/g1", "vm-41", on_result, &a), 0);
    run_until(f, &a.calls, 1);
    assert_int_equal(a.err, VMG_EFORBIDDEN);
    assert_non_null(strstr(a.msg, "vm-41"));
    assert_true(vs_rest_available(f->rest));
    finish_script(f);
}

static void test_category_not_for_vms(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, NULL, 200, "@session.json"},
        {"POST", P_CATEGORY, NULL, 400, "@already_exists.json"},
        {"GET", P_CATEGORY, NULL, 200, "@category_list.json"},
        {"GET", P_CATEGORY "/id:" OTHER_ID, NULL, 200, "@category_get_other.json"},
    };
    struct vs_rest_options o = {0};
    struct got a = {0};
    char base[64];
    int err = 0;

    vs_rest_close(f->rest, on_rest_closed, f);
    run_until(f, &f->closed_calls, 1);
    f->closed_calls = 0;
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", f->srv.port);
    o.base_url = base;
    o.user = USER;
    o.password = PASS;
    o.category = "other";
    o.multiple = true;
    f->rest = vs_rest_new(&f->loop, f->http, &o, &err);
    assert_non_null(f->rest);
    script(f, ex, 4);
    assert_int_equal(vs_rest_ensure_category(f->rest, on_result, &a), 0);
    run_until(f, &a.calls, 1);
    assert_int_equal(a.err, VS_REST_EUNAVAILABLE);
    assert_non_null(strstr(a.msg, "cannot be attached to VMs"));
    finish_script(f);
    /* The category asked for was MULTIPLE. */
    assert_non_null(strstr(f->srv.seen[1].body, "\"MULTIPLE\""));
}

static void test_server_error_is_not_sticky(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, NULL, 200, "@session.json"},
        {"POST", P_CATEGORY, NULL, 503, "@vcenter_service_unavailable.json"},
        {"POST", P_CATEGORY, NULL, 200, "@category_create.json"},
    };
    struct got a = {0}, b = {0};

    script(f, ex, 3);
    assert_int_equal(vs_rest_ensure_category(f->rest, on_result, &a), 0);
    run_until(f, &a.calls, 1);
    assert_int_equal(a.err, VMG_EHTTP);
    assert_non_null(strstr(a.msg, "503"));
    assert_non_null(strstr(a.msg, "The tagging service is not running."));
    assert_true(vs_rest_available(f->rest));
    assert_int_equal(vs_rest_ensure_category(f->rest, on_result, &b), 0);
    run_until(f, &b.calls, 1);
    assert_int_equal(b.err, 0);
    finish_script(f);
}

static void test_response_too_big(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, NULL, 200, "@session.json"},
        {"POST", P_CATEGORY, NULL, 400, "@already_exists.json"},
        {"GET", P_CATEGORY, NULL, 200, "@category_list.json"},
    };
    struct got a = {0};

    vs_rest_close(f->rest, on_rest_closed, f);
    run_until(f, &f->closed_calls, 1);
    f->closed_calls = 0;
    f->rest = client(f, NULL, NULL, 100);
    script(f, ex, 3);
    assert_int_equal(vs_rest_ensure_category(f->rest, on_result, &a), 0);
    run_until(f, &a.calls, 1);
    assert_int_equal(a.err, VMG_ETOOBIG);
    assert_true(vs_rest_available(f->rest));
    finish_script(f);
}

static void test_close_cancels_and_logs_out(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, NULL, 200, "@session.json"},
        {"POST", P_CATEGORY, NULL, 0, NULL}, /* never answered */
        {"DELETE", P_SESSION, "", 200, ""},
    };
    struct got a = {0}, b = {0};

    script(f, ex, 3);
    assert_int_equal(vs_rest_ensure_category(f->rest, on_result, &a), 0);
    assert_int_equal(uv_timer_start(&f->watchdog, on_watchdog, 10000, 0), 0);
    while (f->srv.n_seen < 2 && !f->timed_out)
        uv_run(&f->loop, UV_RUN_ONCE);
    uv_timer_stop(&f->watchdog);
    assert_false(f->timed_out);
    assert_int_equal(a.calls, 0);
    /* One in flight, one not yet started. */
    assert_int_equal(vs_rest_ensure_tag(f->rest, "ns1/g1", "VMs of VmGroup ns1/g1", on_result, &b),
                     0);
    vs_rest_close(f->rest, on_rest_closed, f);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, VMG_ECANCELED);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.err, VMG_ECANCELED);
    f->rest = NULL;
    assert_int_equal(f->closed_calls, 0);
    run_until(f, &f->closed_calls, 1);
    finish_script(f);
    assert_string_equal(f->srv.seen[2].session, SESSION_ID);
}

/* Closing from a callback: the other op is canceled, nothing is used after
 * it is freed (ASan watches). */
struct closer {
    struct fx *f;
    int calls;
};

static void close_in_cb(void *data, const struct vs_rest_result *res)
{
    struct closer *c = data;

    (void)res;
    c->calls++;
    uv_stop(cur_loop);
    vs_rest_close(c->f->rest, on_rest_closed, c->f);
    c->f->rest = NULL;
}

static void test_close_from_callback(void **state)
{
    struct fx *f = *state;
    static const struct exch ex[] = {
        {"POST", P_SESSION, NULL, 401, ""},
    };
    struct closer c = {f, 0};
    struct got b = {0};

    script(f, ex, 1);
    assert_int_equal(vs_rest_ensure_category(f->rest, close_in_cb, &c), 0);
    assert_int_equal(vs_rest_ensure_tag(f->rest, "ns1/g1", "VMs of VmGroup ns1/g1", on_result, &b),
                     0);
    run_until(f, &c.calls, 1);
    run_until(f, &f->closed_calls, 1);
    assert_int_equal(b.calls, 1);
    assert_true(b.err == VMG_ECANCELED || b.err == VS_REST_EUNAVAILABLE);
    finish_script(f);
}

static void test_bad_arguments(void **state)
{
    struct fx *f = *state;
    struct vs_rest_options o = {0};
    struct got g = {0};
    char longname[300], bigdesc[VS_REST_DESCRIPTION_MAX + 2];
    int err = 0;

    memset(bigdesc, 'd', sizeof(bigdesc) - 1);
    bigdesc[sizeof(bigdesc) - 1] = '\0';

    assert_null(vs_rest_new(&f->loop, f->http, &o, &err));
    assert_int_equal(err, -EINVAL);
    o.base_url = "http://127.0.0.1:1";
    o.user = USER;
    o.password = PASS;
    err = 0;
    /* The category's name is the caller's, required. */
    assert_null(vs_rest_new(&f->loop, f->http, &o, &err));
    assert_int_equal(err, -EINVAL);
    o.category = "c";
    o.base_url = "ftp://x";
    err = 0;
    assert_null(vs_rest_new(&f->loop, f->http, &o, &err));
    assert_int_equal(err, -EINVAL);
    o.base_url = "https://vc.example:443";
    o.user = NULL;
    assert_null(vs_rest_new(&f->loop, f->http, &o, &err));
    o.user = USER;
    assert_null(vs_rest_new(NULL, f->http, &o, &err));
    assert_null(vs_rest_new(&f->loop, NULL, &o, &err));

    assert_int_equal(vs_rest_ensure_tag(f->rest, NULL, "d", on_result, &g), -EINVAL);
    assert_int_equal(vs_rest_ensure_tag(f->rest, "", "d", on_result, &g), -EINVAL);
    assert_int_equal(vs_rest_ensure_tag(f->rest, "a/b", "VMs of VmGroup a/b", NULL, &g), -EINVAL);
    assert_int_equal(vs_rest_attach(f->rest, "a/b", "VMs of VmGroup a/b", "", on_result, &g),
                     -EINVAL);
    assert_int_equal(vs_rest_attach(f->rest, "a/b", "VMs of VmGroup a/b", NULL, on_result, &g),
                     -EINVAL);
    memset(longname, 'a', sizeof(longname));
    longname[299] = '\0';
    assert_int_equal(vs_rest_delete_tag(f->rest, longname, on_result, &g), -EINVAL);
    /* The longest tag name is VS_REST_TAG_NAME_MAX bytes; a description at
     * most VS_REST_DESCRIPTION_MAX. */
    longname[VS_REST_TAG_NAME_MAX + 1] = '\0';
    assert_int_equal(vs_rest_list_attached(f->rest, longname, on_result, &g), -EINVAL);
    assert_int_equal(vs_rest_ensure_tag(f->rest, "a/b", bigdesc, on_result, &g), -EINVAL);
    assert_int_equal(vs_rest_login(NULL, on_result, &g), -EINVAL);
    vs_rest_close(NULL, NULL, NULL);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(g.calls, 0);
    assert_int_equal(f->srv.n_seen, 0);
}

static void test_password_registered_as_secret(void **state)
{
    struct fx *f = *state;
    char out[128];

    (void)f;
    vmg_log_redact(out, sizeof(out), "user " USER " password " PASS);
    assert_null(strstr(out, PASS));
    assert_non_null(strstr(out, "[REDACTED]"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_id),
        cmocka_unit_test(test_bodies),
        cmocka_unit_test(test_parse_fixtures),
        cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_parse_bounds_values),
        cmocka_unit_test(test_parse_error),
        cmocka_unit_test_setup_teardown(test_ensure_creates_then_caches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ensure_finds_existing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tags_read_are_remembered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_attach_list_detach_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_detach_without_category, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_finds_category_made_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tag_refused_after_lookup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_of_a_stale_tag_finds_category_made_again, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_stale_tag_is_made_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_relogin_on_401, setup, teardown),
        cmocka_unit_test_setup_teardown(test_401_after_relogin_disables, setup, teardown),
        cmocka_unit_test_setup_teardown(test_login_checks_session, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_password, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_endpoint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_403_on_category_disables, setup, teardown),
        cmocka_unit_test_setup_teardown(test_403_on_attach_is_not_sticky, setup, teardown),
        cmocka_unit_test_setup_teardown(test_category_not_for_vms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_error_is_not_sticky, setup, teardown),
        cmocka_unit_test_setup_teardown(test_response_too_big, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_cancels_and_logs_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_from_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_password_registered_as_secret, setup, teardown),
    };

    curl_global_init(CURL_GLOBAL_DEFAULT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
