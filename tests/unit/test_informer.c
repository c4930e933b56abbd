/* test_informer.c: kube/informer without a server: watch event
 * parsing (on lines captured from kube-apiserver v1.32), the relist diff
 * (old cache + new list -> exactly the adds, updates and deletes),
 * resourceVersion tracking from events and bookmarks, 410 ERROR events,
 * objects that cannot be decoded, events that cannot be applied for want
 * of memory, the table under many keys, the memory budget of a cached
 * VmGroup, and a pluggable object type. Listing and watching against a
 * real API server is the e2e suite's part. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <uv.h>

#include "kube/informer.h"
#include "kube/kube.h"
#include "kube/kubeconfig.h"
#include "lib/http.h"
#include "controller/vmgroup.h"
#include "lib/err.h"
#include "tests/unit/srv.h"

/* ---- lines from a real watch ---- */

static const char LINE_MODIFIED[] =
    "{\"type\":\"MODIFIED\",\"object\":{\"apiVersion\":\"vm.codeconnect.vmworld.com/v1alpha1\","
    "\"kind\":\"VmGroup\",\"metadata\":{\"annotations\":{\"kubectl.kubernetes.io/"
    "last-applied-configuration\":\"{\\\"apiVersion\\\":\\\"vm.codeconnect.vmworld.com/"
    "v1alpha1\\\",\\\"kind\\\":\\\"VmGroup\\\",\\\"metadata\\\":{\\\"annotations\\\":{},"
    "\\\"name\\\":\\\"a\\\",\\\"namespace\\\":\\\"t1\\\"},\\\"spec\\\":{\\\"cpu\\\":1,"
    "\\\"memory\\\":1,\\\"replicas\\\":1,\\\"template\\\":\\\"vm-operator-template\\\"}}\\n\"},"
    "\"creationTimestamp\":\"2026-11-22T02:14:49Z\",\"generation\":5,\"managedFields\":[{"
    "\"apiVersion\":\"vm.codeconnect.vmworld.com/v1alpha1\",\"fieldsType\":\"FieldsV1\","
    "\"fieldsV1\":{\"f:metadata\":{\"f:annotations\":{\".\":{},\"f:kubectl.kubernetes.io/"
    "last-applied-configuration\":{}}},\"f:spec\":{\".\":{},\"f:cpu\":{},\"f:memory\":{},"
    "\"f:template\":{}}},\"manager\":\"kubectl-client-side-apply\",\"operation\":\"Update\","
    "\"time\":\"2026-11-22T02:14:49Z\"},{\"apiVersion\":\"vm.codeconnect.vmworld.com/v1alpha1\","
    "\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:status\":{\".\":{},\"f:currentReplicas\":{},"
    "\"f:desiredReplicas\":{},\"f:lastMessage\":{},\"f:observedGeneration\":{},\"f:phase\":{}}},"
    "\"manager\":\"kubectl-patch\",\"operation\":\"Update\",\"subresource\":\"status\","
    "\"time\":\"2026-11-22T02:16:19Z\"}],\"name\":\"a\",\"namespace\":\"t1\","
    "\"resourceVersion\":\"241\",\"uid\":\"d4dda132-46f3-4dc2-b412-b3ab06f63516\"},\"spec\":{"
    "\"cpu\":1,\"memory\":1,\"replicas\":7,\"template\":\"vm-operator-template\"},\"status\":{"
    "\"currentReplicas\":7,\"desiredReplicas\":7,\"lastMessage\":\"ok\",\"observedGeneration\":2,"
    "\"phase\":\"RUNNING\"}}}";

static const char LINE_DELETED[] =
    "{\"type\":\"DELETED\",\"object\":{\"apiVersion\":\"vm.codeconnect.vmworld.com/v1alpha1\","
    "\"kind\":\"VmGroup\",\"metadata\":{\"creationTimestamp\":\"2026-11-22T02:14:49Z\","
    "\"generation\":5,\"name\":\"a\",\"namespace\":\"t1\",\"resourceVersion\":\"242\","
    "\"uid\":\"d4dda132-46f3-4dc2-b412-b3ab06f63516\"},\"spec\":{\"cpu\":1,\"memory\":1,"
    "\"replicas\":7,\"template\":\"vm-operator-template\"}}}";

static const char LINE_BOOKMARK[] =
    "{\"type\":\"BOOKMARK\",\"object\":{\"apiVersion\":\"vm.codeconnect.vmworld.com/v1alpha1\","
    "\"kind\":\"VmGroup\",\"metadata\":{\"resourceVersion\":\"242\"}}}";

static const char LINE_BOOKMARK_INITIAL_END[] =
    "{\"type\":\"BOOKMARK\",\"object\":{\"apiVersion\":\"vm.codeconnect.vmworld.com/v1alpha1\","
    "\"kind\":\"VmGroup\",\"metadata\":{\"annotations\":{\"k8s.io/initial-events-end\":\"true\"},"
    "\"resourceVersion\":\"242\"}}}";

static const char LINE_GONE[] =
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
    "\"status\":\"Failure\",\"message\":\"too old resource version: 228 (231)\","
    "\"reason\":\"Expired\",\"code\":410}}";

static const char LINE_INTERNAL_ERROR[] =
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
    "\"status\":\"Failure\",\"message\":\"etcd is sad\",\"reason\":\"InternalError\","
    "\"code\":500}}";

static void test_parse_event(void **state)
{
    struct informer_event ev;

    (void)state;
    assert_int_equal(informer_parse_event(LINE_MODIFIED, strlen(LINE_MODIFIED), &ev), 0);
    assert_int_equal(ev.type, INFORMER_EV_MODIFIED);
    assert_string_equal(ev.rv, "241");
    assert_string_equal(cJSON_GetObjectItem(ev.object, "kind")->valuestring, "VmGroup");
    informer_event_clear(&ev);
    assert_null(ev.root);

    assert_int_equal(informer_parse_event(LINE_DELETED, strlen(LINE_DELETED), &ev), 0);
    assert_int_equal(ev.type, INFORMER_EV_DELETED);
    assert_string_equal(ev.rv, "242");
    informer_event_clear(&ev);

    assert_int_equal(informer_parse_event(LINE_BOOKMARK, strlen(LINE_BOOKMARK), &ev), 0);
    assert_int_equal(ev.type, INFORMER_EV_BOOKMARK);
    assert_string_equal(ev.rv, "242");
    assert_false(ev.initial_end);
    informer_event_clear(&ev);

    assert_int_equal(
        informer_parse_event(LINE_BOOKMARK_INITIAL_END, strlen(LINE_BOOKMARK_INITIAL_END), &ev), 0);
    assert_int_equal(ev.type, INFORMER_EV_BOOKMARK);
    assert_true(ev.initial_end);
    informer_event_clear(&ev);

    assert_int_equal(informer_parse_event(LINE_GONE, strlen(LINE_GONE), &ev), 0);
    assert_int_equal(ev.type, INFORMER_EV_ERROR);
    assert_string_equal(ev.rv, "");
    assert_int_equal(ev.status.code, 410);
    assert_int_equal(ev.status.err, VMG_EGONE);
    assert_string_equal(ev.status.reason, "Expired");
    assert_string_equal(ev.status.message, "too old resource version: 228 (231)");
    informer_event_clear(&ev);

    /* Only the given length counts. */
    assert_int_equal(informer_parse_event(LINE_BOOKMARK, 20, &ev), VMG_EPARSE);
    assert_int_equal(informer_parse_event("", 0, &ev), VMG_EPARSE);
    assert_int_equal(informer_parse_event("not json", 8, &ev), VMG_EPARSE);
    assert_int_equal(informer_parse_event("{\"type\":\"ADDED\"}", 16, &ev), VMG_EPARSE);
    assert_int_equal(informer_parse_event("{\"type\":\"ADDED\",\"object\":[]}", 28, &ev),
                     VMG_EPARSE);
    assert_int_equal(informer_parse_event("{\"type\":\"RENAMED\",\"object\":{}}", 30, &ev),
                     VMG_EPARSE);
    assert_int_equal(informer_parse_event("{\"type\":1,\"object\":{}}", 22, &ev), VMG_EPARSE);
    informer_event_clear(NULL);
}

static void test_key_of(void **state)
{
    char buf[INFORMER_KEY_MAX + 1];
    cJSON *o = cJSON_Parse("{\"metadata\":{\"namespace\":\"ns\",\"name\":\"a\"}}");
    cJSON *c = cJSON_Parse("{\"metadata\":{\"name\":\"cluster-wide\"}}");
    cJSON *n = cJSON_Parse("{\"metadata\":{\"namespace\":\"ns\"}}");

    (void)state;
    assert_int_equal(informer_key_of(o, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "ns/a");
    assert_int_equal(informer_key_of(c, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "cluster-wide");
    assert_int_equal(informer_key_of(n, buf, sizeof(buf)), VMG_EPARSE);
    assert_int_equal(informer_key_of(o, buf, 4), VMG_EPARSE);
    cJSON_Delete(o);
    cJSON_Delete(c);
    cJSON_Delete(n);
}

/* ---- an informer without a client ---- */

#define MAX_LOG 64

struct t {
    uv_loop_t loop;
    struct informer *inf;
    char log[MAX_LOG][128];
    int n;
    int notes[INFORMER_NOTE_BAD_OBJECT + 1];
    char bad_key[INFORMER_KEY_MAX + 1];
    char listed_op[16];
    size_t listed[3]; /* the last LISTED note's added, updated, deleted */
    bool check_get;   /* handlers check informer_get against what they get */
};

static void logf_(struct t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void logf_(struct t *t, const char *fmt, ...)
{
    va_list ap;

    assert_true(t->n < MAX_LOG);
    va_start(ap, fmt);
    vsnprintf(t->log[t->n++], sizeof(t->log[0]), fmt, ap);
    va_end(ap);
}

static void on_add(void *data, const char *key, const void *obj)
{
    struct t *t = data;
    const struct vmgroup *g = obj;

    if (t->check_get)
        assert_ptr_equal(informer_get(t->inf, key), obj);
    logf_(t, "add %s %s r%d", key, g->meta.resource_version, g->spec.replicas);
}

static void on_update(void *data, const char *key, const void *old_obj, const void *new_obj)
{
    struct t *t = data;
    const struct vmgroup *o = old_obj, *g = new_obj;

    if (t->check_get)
        assert_ptr_equal(informer_get(t->inf, key), new_obj);
    logf_(t, "update %s %s->%s r%d", key, o->meta.resource_version, g->meta.resource_version,
          g->spec.replicas);
}

static void on_delete(void *data, const char *key, const void *old_obj)
{
    struct t *t = data;
    const struct vmgroup *o = old_obj;

    if (t->check_get)
        assert_null(informer_get(t->inf, key));
    logf_(t, "delete %s %s", key, o->meta.resource_version);
}

static void on_note(void *data, const struct informer_note *n)
{
    struct t *t = data;

    assert_non_null(n->op);
    assert_non_null(n->reason);
    assert_non_null(n->message);
    assert_non_null(n->rv);
    assert_non_null(n->key);
    t->notes[n->kind]++;
    if (n->kind == INFORMER_NOTE_BAD_OBJECT)
        snprintf(t->bad_key, sizeof(t->bad_key), "%s", n->key);
    if (n->kind == INFORMER_NOTE_LISTED) {
        snprintf(t->listed_op, sizeof(t->listed_op), "%s", n->op);
        t->listed[0] = n->added;
        t->listed[1] = n->updated;
        t->listed[2] = n->deleted;
    }
}

/* setup_type makes the informer of a test, of type (NULL: VmGroups). */
static int setup_type(void **state, const struct informer_type *type)
{
    struct t *t = calloc(1, sizeof(*t));
    struct informer_opts o = {
        .type = type,
        .handlers = {.on_add = on_add, .on_update = on_update, .on_delete = on_delete},
        .on_note = on_note,
    };

    if (!t || uv_loop_init(&t->loop) != 0)
        return -1;
    vmgroup_informer_opts(&o);
    if (type)
        o.type = type;
    o.handlers.data = t;
    o.note_data = t;
    if (informer_new(&t->loop, NULL, &o, &t->inf) != 0)
        return -1;
    t->check_get = true;
    *state = t;
    return 0;
}

static int setup(void **state)
{
    return setup_type(state, NULL);
}

/* setup_max2 is setup with room for two objects. */
static int setup_max2(void **state)
{
    struct t *t;
    struct informer_opts o = {
        .handlers = {.on_add = on_add, .on_update = on_update, .on_delete = on_delete},
        .on_note = on_note,
    };

    if (setup(state) != 0)
        return -1;
    t = *state;
    informer_close(t->inf, NULL, NULL);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    vmgroup_informer_opts(&o);
    o.max_objects = 2;
    o.handlers.data = t;
    o.note_data = t;
    return informer_new(&t->loop, NULL, &o, &t->inf);
}

static int teardown(void **state)
{
    struct t *t = *state;

    informer_close(t->inf, NULL, NULL);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&t->loop), 0);
    free(t);
    return 0;
}

/* vg_json is a VmGroup as the API server lists it, managedFields and all. */
static char *vg_json(const char *ns, const char *name, const char *rv, int replicas)
{
    char *s = malloc(2048);

    assert_non_null(s);
    snprintf(s, 2048,
             "{\"apiVersion\":\"vm.codeconnect.vmworld.com/v1alpha1\",\"kind\":\"VmGroup\","
             "\"metadata\":{\"creationTimestamp\":\"2026-11-22T02:14:49Z\",\"generation\":1,"
             "\"finalizers\":[\"vm.codeconnect.vmworld.com/finalizer\"],"
             "\"managedFields\":[{\"apiVersion\":\"vm.codeconnect.vmworld.com/v1alpha1\","
             "\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:spec\":{\".\":{},\"f:cpu\":{},"
             "\"f:memory\":{},\"f:replicas\":{},\"f:template\":{}}},\"manager\":\"kubectl\","
             "\"operation\":\"Update\",\"time\":\"2026-11-22T02:14:49Z\"}],"
             "\"name\":\"%s\",\"namespace\":\"%s\",\"resourceVersion\":\"%s\","
             "\"uid\":\"d4dda132-46f3-4dc2-b412-%012d\"},"
             "\"spec\":{\"cpu\":2,\"memory\":4,\"replicas\":%d,\"template\":"
             "\"vm-operator-template\"},\"status\":{\"phase\":\"RUNNING\","
             "\"currentReplicas\":%d,\"desiredReplicas\":%d,\"lastMessage\":\"All %d VMs are "
             "running.\",\"observedGeneration\":1,\"conditions\":[{\"type\":\"Ready\","
             "\"status\":\"True\",\"reason\":\"AllReplicasReady\",\"message\":\"All %d VMs are "
             "running.\",\"lastTransitionTime\":\"2026-11-22T02:15:49Z\"}]}}",
             name, ns, rv, replicas, replicas, replicas, replicas, replicas, replicas);
    return s;
}

/* page builds a list page of n VmGroups given as "ns/name@rv#replicas". */
static cJSON *page(const char *list_rv, const char *const *items, int n)
{
    cJSON *p = cJSON_CreateObject(), *meta, *arr;

    meta = cJSON_AddObjectToObject(p, "metadata");
    cJSON_AddStringToObject(meta, "resourceVersion", list_rv);
    arr = cJSON_AddArrayToObject(p, "items");
    for (int i = 0; i < n; i++) {
        char ns[64], name[128], rv[32];
        int replicas = 1;
        char *text;

        assert_true(sscanf(items[i], "%63[^/]/%127[^@]@%31[^#]#%d", ns, name, rv, &replicas) >= 3);
        text = vg_json(ns, name, rv, replicas);
        cJSON_AddItemToArray(arr, cJSON_Parse(text));
        free(text);
    }
    return p;
}

static void list(struct t *t, const char *list_rv, const char *const *items, int n, int per_page)
{
    informer_testing_list_begin(t->inf);
    for (int i = 0; i < n || (n == 0 && i == 0); i += per_page) {
        int m = n - i < per_page ? n - i : per_page;
        cJSON *p = page(list_rv, items + i, m);

        assert_int_equal(informer_testing_list_page(t->inf, p), 0);
        cJSON_Delete(p);
        if (n == 0)
            break;
    }
    informer_testing_list_end(t->inf);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

/* expect checks that the log holds exactly want, in any order, and
 * empties it. */
static void expect(struct t *t, const char *const *want, int n)
{
    char w[MAX_LOG][128];

    assert_true(n <= MAX_LOG);
    for (int i = 0; i < n; i++)
        snprintf(w[i], sizeof(w[i]), "%s", want[i]);
    qsort(w, (size_t)n, sizeof(w[0]), cmp_str);
    qsort(t->log, (size_t)t->n, sizeof(t->log[0]), cmp_str);
    for (int i = 0; i < t->n || i < n; i++) {
        if (i >= t->n || i >= n || strcmp(t->log[i], w[i]) != 0)
            fail_msg("notification %d: got \"%s\", want \"%s\"", i, i < t->n ? t->log[i] : "-",
                     i < n ? w[i] : "-");
    }
    t->n = 0;
}

static void test_relist_diff(void **state)
{
    struct t *t = *state;
    static const char *const first[] = {"ns1/a@10#1", "ns1/b@11#1", "ns2/c@12#1", "ns2/e@13#1"};
    static const char *const want1[] = {"add ns1/a 10 r1", "add ns1/b 11 r1", "add ns2/c 12 r1",
                                        "add ns2/e 13 r1"};
    /* a unchanged, b changed, c gone, d new, e changed, over three pages. */
    static const char *const second[] = {"ns1/a@10#1", "ns1/b@20#3", "ns1/d@21#2", "ns2/e@22#5"};
    static const char *const want2[] = {"add ns1/d 21 r2", "update ns1/b 11->20 r3",
                                        "update ns2/e 13->22 r5", "delete ns2/c 12"};
    static const char *const want3[] = {"delete ns1/a 10", "delete ns1/b 20", "delete ns1/d 21",
                                        "delete ns2/e 22"};
    const struct vmgroup *g;

    assert_false(informer_has_synced(t->inf));
    assert_string_equal(informer_resource_version(t->inf), "");
    list(t, "15", first, 4, 500);
    assert_true(informer_has_synced(t->inf));
    expect(t, want1, 4);
    assert_int_equal(informer_count(t->inf), 4);
    assert_string_equal(informer_resource_version(t->inf), "15");

    list(t, "30", second, 4, 2);
    expect(t, want2, 4);
    assert_int_equal(informer_count(t->inf), 4);
    assert_string_equal(informer_resource_version(t->inf), "30");
    assert_null(informer_get(t->inf, "ns2/c"));
    g = informer_get(t->inf, "ns1/b");
    assert_non_null(g);
    assert_string_equal(g->meta.resource_version, "20");
    assert_int_equal(g->spec.replicas, 3);
    assert_string_equal(g->meta.ns, "ns1");
    assert_string_equal(g->meta.name, "b");
    assert_true(vmgroup_has_finalizer(g, VMGROUP_FINALIZER));

    /* The same list again changes nothing. */
    list(t, "31", second, 4, 3);
    expect(t, NULL, 0);
    assert_string_equal(informer_resource_version(t->inf), "31");

    /* An empty list deletes everything. */
    list(t, "40", NULL, 0, 500);
    expect(t, want3, 4);
    assert_int_equal(informer_count(t->inf), 0);
}

static void test_relist_after_failed_list(void **state)
{
    struct t *t = *state;
    static const char *const first[] = {"n/a@1", "n/b@2", "n/c@3"};
    static const char *const part[] = {"n/a@1"};
    static const char *const full[] = {"n/a@1", "n/c@3"};
    static const char *const want[] = {"delete n/b 2"};
    cJSON *p;

    list(t, "5", first, 3, 500);
    t->n = 0;
    /* A list that sees a and then fails: nothing is deleted... */
    informer_testing_list_begin(t->inf);
    p = page("6", part, 1);
    assert_int_equal(informer_testing_list_page(t->inf, p), 0);
    cJSON_Delete(p);
    assert_int_equal(t->n, 0);
    assert_int_equal(informer_count(t->inf), 3);
    assert_string_equal(informer_resource_version(t->inf), "5");
    /* ...and the next complete list decides. */
    list(t, "7", full, 2, 1);
    expect(t, want, 1);
    assert_string_equal(informer_resource_version(t->inf), "7");
}

/* The room of max_objects is the new list's: objects the server has since
 * deleted, still in the cache until the list ends, take none of it. */
static void test_relist_at_the_bound(void **state)
{
    struct t *t = *state;
    static const char *const first[] = {"n/a@1", "n/b@2"};
    static const char *const now[] = {"n/c@3"};
    static const char *const three[] = {"n/a@1", "n/b@2", "n/c@3"};
    static const char *const want[] = {"add n/c 3 r1", "delete n/a 1", "delete n/b 2"};
    static const char *const want_full[] = {"add n/a 1 r1", "add n/b 2 r1", "delete n/c 3"};
    cJSON *p;

    list(t, "5", first, 2, 500);
    assert_int_equal(informer_count(t->inf), 2);
    t->n = 0;
    list(t, "9", now, 1, 500);
    expect(t, want, 3);
    assert_int_equal(informer_count(t->inf), 1);
    assert_non_null(informer_get(t->inf, "n/c"));
    /* A list of more than the room leaves out its last one, cached or
     * not. */
    t->n = 0;
    informer_testing_list_begin(t->inf);
    p = page("12", three, 3);
    assert_int_equal(informer_testing_list_page(t->inf, p), 0);
    cJSON_Delete(p);
    informer_testing_list_end(t->inf);
    expect(t, want_full, 3);
    assert_int_equal(informer_count(t->inf), 2);
}

static char *event_line(const char *type, const char *obj_json)
{
    size_t n = strlen(obj_json) + 64;
    char *s = malloc(n);

    assert_non_null(s);
    snprintf(s, n, "{\"type\":\"%s\",\"object\":%s}", type, obj_json);
    return s;
}

static void feed(struct t *t, const char *type, const char *ns, const char *name, const char *rv,
                 int replicas, int want)
{
    char *obj = vg_json(ns, name, rv, replicas);
    char *line = event_line(type, obj);

    assert_int_equal(informer_testing_watch_line(t->inf, line), want);
    free(line);
    free(obj);
}

static void test_resource_version_tracking(void **state)
{
    struct t *t = *state;
    static const char *const items[] = {"n/a@100"};
    static const char *const want[] = {"add n/b 101 r1",  "update n/a 100->102 r4",
                                       "delete n/b 101",  "add t1/a 241 r7",
                                       "delete t1/a 241", "update n/a 102->160 r1"};

    list(t, "100", items, 1, 500);
    t->n = 0;
    feed(t, "ADDED", "n", "b", "101", 1, 0);
    assert_string_equal(informer_resource_version(t->inf), "101");
    feed(t, "MODIFIED", "n", "a", "102", 4, 0);
    assert_string_equal(informer_resource_version(t->inf), "102");
    /* A bookmark moves the resourceVersion and notifies nothing. */
    assert_int_equal(informer_testing_watch_line(t->inf, LINE_BOOKMARK), 0);
    assert_string_equal(informer_resource_version(t->inf), "242");
    assert_int_equal(informer_testing_watch_line(t->inf, LINE_BOOKMARK_INITIAL_END), 0);
    feed(t, "DELETED", "n", "b", "150", 1, 0);
    assert_string_equal(informer_resource_version(t->inf), "150");
    /* Deleting an unknown key notifies nothing but moves the version. */
    feed(t, "DELETED", "n", "zz", "151", 1, 0);
    assert_string_equal(informer_resource_version(t->inf), "151");
    assert_int_equal(informer_testing_watch_line(t->inf, LINE_MODIFIED), 0);
    assert_string_equal(informer_resource_version(t->inf), "241");
    assert_int_equal(informer_testing_watch_line(t->inf, LINE_DELETED), 0);
    assert_string_equal(informer_resource_version(t->inf), "242");
    /* 410: the watch must end and the version stays (a relist replaces it). */
    assert_int_equal(informer_testing_watch_line(t->inf, LINE_GONE), VMG_EGONE);
    assert_string_equal(informer_resource_version(t->inf), "242");
    assert_int_equal(informer_testing_watch_line(t->inf, LINE_INTERNAL_ERROR), VMG_EHTTP);
    /* Not an event at all. */
    assert_int_equal(informer_testing_watch_line(t->inf, "{\"kind\":\"Status\"}"), VMG_EPARSE);
    /* An empty line is nothing. */
    assert_int_equal(informer_testing_watch_line(t->inf, ""), 0);
    /* A MODIFIED for the same version changes nothing; a newer one does. */
    feed(t, "MODIFIED", "n", "a", "102", 4, 0);
    feed(t, "MODIFIED", "n", "a", "160", 1, 0);
    expect(t, want, 6);
    assert_int_equal(informer_count(t->inf), 1);
}

static void test_stream_list_diff(void **state)
{
    struct t *t = *state;
    static const char *const items[] = {"n/a@1", "n/b@2", "n/c@3"};
    static const char *const want[] = {"update n/b 2->5 r2", "add n/d 6 r1", "delete n/c 3"};
    static const char *const want2[] = {"update n/a 1->30 r9"};
    char line[512];

    list(t, "15", items, 3, 500);
    assert_string_equal(t->listed_op, "list");
    t->n = 0;
    /* A streaming list: ADDED for each object, in any order... */
    informer_testing_stream_begin(t->inf);
    feed(t, "ADDED", "n", "d", "6", 1, 0);
    feed(t, "ADDED", "n", "a", "1", 1, 0);
    feed(t, "ADDED", "n", "b", "5", 2, 0);
    /* ...does not move the version, nor delete anything, until its end. */
    assert_string_equal(informer_resource_version(t->inf), "15");
    assert_non_null(informer_get(t->inf, "n/c"));
    assert_int_equal(informer_testing_watch_line(t->inf,
                                                 "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":"
                                                 "{\"resourceVersion\":\"18\"}}}"),
                     0);
    assert_string_equal(informer_resource_version(t->inf), "15");
    assert_int_equal(t->notes[INFORMER_NOTE_LISTED], 1);
    snprintf(line, sizeof(line),
             "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"annotations\":{"
             "\"k8s.io/initial-events-end\":\"true\"},\"resourceVersion\":\"20\"}}}");
    assert_int_equal(informer_testing_watch_line(t->inf, line), 0);
    expect(t, want, 3);
    assert_string_equal(informer_resource_version(t->inf), "20");
    assert_int_equal(t->notes[INFORMER_NOTE_LISTED], 2);
    assert_int_equal(t->notes[INFORMER_NOTE_SYNCED], 1); /* by the first list only */
    assert_int_equal(t->notes[INFORMER_NOTE_WATCHING], 1);
    assert_string_equal(t->listed_op, "stream");
    assert_int_equal(t->listed[0], 1);
    assert_int_equal(t->listed[1], 1);
    assert_int_equal(t->listed[2], 1);
    assert_true(informer_has_synced(t->inf));
    /* The same watch goes on as a plain watch. */
    feed(t, "MODIFIED", "n", "a", "30", 9, 0);
    assert_string_equal(informer_resource_version(t->inf), "30");
    expect(t, want2, 1);
}

static void test_bad_objects(void **state)
{
    struct t *t = *state;
    static const char *const items[] = {"n/a@1", "n/b@2"};
    static const char *const want[] = {"add n/a 1 r1", "add n/b 2 r1", "delete n/a 1"};
    cJSON *p = page("3", items, 2), *bad;
    char *text;

    /* A third item with a spec the decoder refuses. */
    bad = cJSON_Parse("{\"kind\":\"VmGroup\",\"metadata\":{\"name\":\"c\",\"namespace\":\"n\","
                      "\"uid\":\"u\",\"resourceVersion\":\"2\"},\"spec\":{\"cpu\":\"two\"}}");
    cJSON_AddItemToArray(cJSON_GetObjectItem(p, "items"), bad);
    cJSON_AddItemToArray(cJSON_GetObjectItem(p, "items"), cJSON_Parse("{\"metadata\":{}}"));
    informer_testing_list_begin(t->inf);
    assert_int_equal(informer_testing_list_page(t->inf, p), 0);
    informer_testing_list_end(t->inf);
    cJSON_Delete(p);
    assert_int_equal(informer_count(t->inf), 2);
    assert_int_equal(t->notes[INFORMER_NOTE_BAD_OBJECT], 2);
    assert_null(informer_get(t->inf, "n/c"));

    /* A cached object that turns undecodable is dropped (and reported). */
    text = event_line("MODIFIED", "{\"kind\":\"VmGroup\",\"metadata\":{\"name\":\"a\","
                                  "\"namespace\":\"n\",\"uid\":\"u\",\"resourceVersion\":\"9\"},"
                                  "\"spec\":{\"cpu\":1}}");
    assert_int_equal(informer_testing_watch_line(t->inf, text), 0);
    free(text);
    assert_string_equal(t->bad_key, "n/a");
    assert_int_equal(t->notes[INFORMER_NOTE_BAD_OBJECT], 3);
    assert_null(informer_get(t->inf, "n/a"));
    assert_string_equal(informer_resource_version(t->inf), "9");
    expect(t, want, 3);
}

/* VmGroups whose decoding runs out of memory while oom is set: memory
 * that runs out is no fault of the object's. */
static bool oom;
static struct informer_type oom_type;

static int oom_decode(const cJSON *obj, void **ret, char *err, size_t errlen)
{
    if (oom)
        return -ENOMEM;
    return vmgroup_informer_type.decode(obj, ret, err, errlen);
}

static int setup_oom(void **state)
{
    oom_type = vmgroup_informer_type;
    oom_type.decode = oom_decode;
    oom = false;
    return setup_type(state, &oom_type);
}

static void test_event_not_applied_for_want_of_memory(void **state)
{
    struct t *t = *state;
    static const char *const items[] = {"n/a@4"}, *const again[] = {"n/a@8"};
    static const char *const want[] = {"update n/a 4->6 r2", "add n/b 7 r1"};
    cJSON *p;

    list(t, "5", items, 1, 500);
    t->n = 0;
    /* Neither event is applied: each ends the watch, the version stays at
     * the last one applied (the next watch starts there and delivers them
     * again), and the cached object stays, without a delete. */
    oom = true;
    feed(t, "MODIFIED", "n", "a", "6", 2, -ENOMEM);
    assert_string_equal(informer_resource_version(t->inf), "5");
    feed(t, "ADDED", "n", "b", "7", 1, -ENOMEM);
    assert_string_equal(informer_resource_version(t->inf), "5");
    assert_non_null(informer_get(t->inf, "n/a"));
    assert_int_equal(informer_count(t->inf), 1);
    assert_int_equal(t->n, 0);
    assert_int_equal(t->notes[INFORMER_NOTE_BAD_OBJECT], 0);
    /* A list page stops the same way, its objects kept. */
    p = page("9", again, 1);
    informer_testing_list_begin(t->inf);
    assert_int_equal(informer_testing_list_page(t->inf, p), -ENOMEM);
    cJSON_Delete(p);
    assert_non_null(informer_get(t->inf, "n/a"));
    assert_int_equal(t->n, 0);
    /* The watch again, with memory: the same events apply. */
    oom = false;
    list(t, "5", items, 1, 500);
    t->n = 0;
    feed(t, "MODIFIED", "n", "a", "6", 2, 0);
    feed(t, "ADDED", "n", "b", "7", 1, 0);
    assert_string_equal(informer_resource_version(t->inf), "7");
    expect(t, want, 2);
    /* A streaming list's object stops it the same way. */
    oom = true;
    informer_testing_stream_begin(t->inf);
    feed(t, "ADDED", "n", "a", "8", 1, -ENOMEM);
    assert_non_null(informer_get(t->inf, "n/a"));
    assert_int_equal(informer_count(t->inf), 2);
    assert_int_equal(t->n, 0);
    assert_int_equal(t->notes[INFORMER_NOTE_BAD_OBJECT], 0);
}

static int count_cb(void *data, const char *key, const void *obj)
{
    int *n = data;
    const struct vmgroup *g = obj;
    char want[INFORMER_KEY_MAX + 1];

    snprintf(want, sizeof(want), "%s/%s", g->meta.ns, g->meta.name);
    assert_string_equal(key, want);
    (*n)++;
    return 0;
}

static int stop_cb(void *data, const char *key, const void *obj)
{
    int *n = data;

    (void)key;
    (void)obj;
    return ++(*n) == 3 ? 42 : 0;
}

static void test_many_keys_and_budget(void **state)
{
    struct t *t = *state;
    enum { N = 5000 };
    struct informer_stats st;
    cJSON *p = cJSON_CreateObject(), *arr;
    int n = 0;

    cJSON_AddObjectToObject(p, "metadata");
    cJSON_AddStringToObject(cJSON_GetObjectItem(p, "metadata"), "resourceVersion", "99999");
    arr = cJSON_AddArrayToObject(p, "items");
    for (int i = 0; i < N; i++) {
        char ns[32], name[64], rv[16];
        char *text;

        snprintf(ns, sizeof(ns), "team-%d", i % 37);
        snprintf(name, sizeof(name), "group-%05d-webservers", i);
        snprintf(rv, sizeof(rv), "%d", 1000 + i);
        text = vg_json(ns, name, rv, 3);
        cJSON_AddItemToArray(arr, cJSON_Parse(text));
        free(text);
    }
    /* In pages of 500 that borrow the items. */
    informer_testing_list_begin(t->inf);
    for (int i = 0; i < N; i += 500) {
        cJSON *pg = cJSON_CreateObject(), *items = cJSON_AddArrayToObject(pg, "items");

        cJSON_AddItemReferenceToObject(pg, "metadata", cJSON_GetObjectItem(p, "metadata"));
        for (int j = i; j < i + 500; j++)
            cJSON_AddItemReferenceToArray(items, cJSON_GetArrayItem(arr, j));
        assert_int_equal(informer_testing_list_page(t->inf, pg), 0);
        cJSON_Delete(pg);
    }
    informer_testing_list_end(t->inf);
    cJSON_Delete(p);
    assert_int_equal(informer_count(t->inf), N);
    for (int i = 0; i < N; i++) {
        char key[96];
        const struct vmgroup *g;

        snprintf(key, sizeof(key), "team-%d/group-%05d-webservers", i % 37, i);
        g = informer_get(t->inf, key);
        assert_non_null(g);
        assert_string_equal(g->meta.name, key + strlen(g->meta.ns) + 1);
    }
    assert_null(informer_get(t->inf, "team-0/group-99999-webservers"));
    assert_int_equal(informer_foreach(t->inf, count_cb, &n), 0);
    assert_int_equal(n, N);
    n = 0;
    assert_int_equal(informer_foreach(t->inf, stop_cb, &n), 42);
    informer_get_stats(t->inf, &st);
    assert_int_equal(st.objects, N);
    assert_int_equal(st.lists, 1);
    /* What the cache holds for a typical group, keys and table included. */
    if (st.bytes / N >= 1024)
        fail_msg("%zu bytes per cached VmGroup", st.bytes / N);
    print_message("# %zu bytes per cached VmGroup (objects, keys, table)\n", st.bytes / N);
}

/* A fixture without handlers, for bulk (the log holds MAX_LOG lines). */
static int setup_quiet(void **state)
{
    struct t *t = calloc(1, sizeof(*t));
    struct informer_opts o = {0};

    if (!t || uv_loop_init(&t->loop) != 0)
        return -1;
    vmgroup_informer_opts(&o);
    if (informer_new(&t->loop, NULL, &o, &t->inf) != 0)
        return -1;
    *state = t;
    return 0;
}

/* ---- a pluggable type: ConfigMaps reduced to their data's size ---- */

struct cm {
    int entries;
};

static int cm_decode(const cJSON *obj, void **ret, char *err, size_t errlen)
{
    struct cm *c = malloc(sizeof(*c));

    (void)err;
    (void)errlen;
    if (!c)
        return -ENOMEM;
    c->entries = cJSON_GetArraySize(cJSON_GetObjectItem(obj, "data"));
    *ret = c;
    return 0;
}

static void cm_free(void *obj)
{
    free(obj);
}

static int cm_updates;
static int cm_adds;

static void cm_on_add(void *data, const char *key, const void *obj)
{
    (void)data;
    (void)key;
    (void)obj;
    cm_adds++;
}

static void cm_on_update(void *data, const char *key, const void *old_obj, const void *new_obj)
{
    (void)data;
    (void)key;
    assert_ptr_not_equal(old_obj, new_obj);
    cm_updates++;
}

static void test_custom_type(void **state)
{
    uv_loop_t loop;
    struct informer *inf;
    static const struct informer_type cm_type = {
        .kind = "ConfigMap", .decode = cm_decode, .free = cm_free};
    struct informer_opts o = {.group = "",
                              .version = "v1",
                              .plural = "configmaps",
                              .ns = "kube-system",
                              .type = &cm_type,
                              .handlers = {.on_add = cm_on_add, .on_update = cm_on_update}};
    cJSON *p = cJSON_Parse("{\"metadata\":{\"resourceVersion\":\"5\"},\"items\":["
                           "{\"metadata\":{\"name\":\"x\",\"namespace\":\"kube-system\","
                           "\"resourceVersion\":\"4\"},\"data\":{\"a\":\"1\",\"b\":\"2\"}}]}");
    const struct cm *c;

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(informer_new(&loop, NULL, &o, &inf), 0);
    for (int i = 0; i < 2; i++) {
        informer_testing_list_begin(inf);
        assert_int_equal(informer_testing_list_page(inf, p), 0);
        informer_testing_list_end(inf);
    }
    c = informer_get(inf, "kube-system/x");
    assert_non_null(c);
    assert_int_equal(c->entries, 2);
    assert_int_equal(cm_adds, 1);
    /* Without resource_version, a relisted object counts as updated. */
    assert_int_equal(cm_updates, 1);
    assert_int_equal(informer_start(inf), -EINVAL); /* no client */
    cJSON_Delete(p);
    informer_close(inf, NULL, NULL);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_bad_options(void **state)
{
    uv_loop_t loop;
    struct informer *inf = NULL;
    struct informer_opts bad_ns = {.ns = "a/b"};
    struct informer_opts bad_range = {.watch_min_s = 600, .watch_max_s = 300};
    struct informer_opts bad_plural = {.version = "v1", .plural = "x y"};
    static const struct informer_type no_decode = {.kind = "X"};
    struct informer_opts bad_type = {.type = &no_decode};
    struct informer_opts no_plural = {0}, no_version = {0}, no_type = {0};

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    /* Each bad one is otherwise good: the VmGroups' collection and type. */
    vmgroup_informer_opts(&bad_ns);
    vmgroup_informer_opts(&bad_range);
    bad_plural.type = &vmgroup_informer_type;
    bad_type.version = "v1";
    bad_type.plural = "xs";
    /* The collection and the type have no defaults. */
    vmgroup_informer_opts(&no_plural);
    no_plural.plural = NULL;
    vmgroup_informer_opts(&no_version);
    no_version.version = NULL;
    vmgroup_informer_opts(&no_type);
    no_type.type = NULL;
    assert_int_equal(informer_new(&loop, NULL, &no_plural, &inf), -EINVAL);
    assert_int_equal(informer_new(&loop, NULL, &no_version, &inf), -EINVAL);
    assert_int_equal(informer_new(&loop, NULL, &no_type, &inf), -EINVAL);
    assert_int_equal(informer_new(&loop, NULL, &bad_ns, &inf), -EINVAL);
    assert_int_equal(informer_new(&loop, NULL, &bad_range, &inf), -EINVAL);
    assert_int_equal(informer_new(&loop, NULL, &bad_plural, &inf), -EINVAL);
    assert_int_equal(informer_new(&loop, NULL, &bad_type, &inf), -EINVAL);
    assert_int_equal(informer_new(NULL, NULL, NULL, &inf), -EINVAL);
    assert_null(inf);
    assert_int_equal(informer_rewatch(NULL), -EAGAIN);
    assert_null(informer_get(NULL, "a"));
    assert_int_equal(informer_count(NULL), 0);
    informer_close(NULL, NULL, NULL);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- the informer against a scripted server ----
 *
 * The state machine (streaming list, fallback to pages, watch restarts,
 * 410 relists) with a server that answers what a test scripts; the e2e
 * suite runs the same against kube-apiserver. */

struct st {
    uv_loop_t loop;
    uv_timer_t dog;
    struct srv srv;
    char dir[64];
    kcfg *cfg;
    vmg_http *http;
    kube_client *kc;
    struct informer *inf;
    char notes[32][160];
    uint64_t retry_ms[32]; /* each note's */
    int nnotes;
    int adds, updates, deletes;
    int step;                         /* the test's script position */
    enum informer_note_kind close_on; /* st_note closes the informer on it */
    bool inf_closed;
};

static void st_inf_closed_flag(void *data)
{
    ((struct st *)data)->inf_closed = true;
}

static void st_note(void *data, const struct informer_note *n)
{
    struct st *t = data;
    static const char *const kinds[] = {"",      "listed", "synced", "watching",
                                        "ended", "gone",   "error",  "bad"};

    assert_false(t->inf_closed);
    if (t->nnotes < 32)
        t->retry_ms[t->nnotes] = n->retry_ms;
    if (t->nnotes < 32)
        snprintf(t->notes[t->nnotes++], sizeof(t->notes[0]), "%s %s %ld a%zu u%zu d%zu rv=%s",
                 kinds[n->kind], n->op, n->status, n->added, n->updated, n->deleted, n->rv);
    if (t->close_on && n->kind == t->close_on) {
        t->close_on = 0;
        informer_close(t->inf, st_inf_closed_flag, t);
    }
}

static void st_add(void *data, const char *key, const void *obj)
{
    ((struct st *)data)->adds++;
}

static void st_update(void *data, const char *key, const void *o, const void *n)
{
    ((struct st *)data)->updates++;
}

static void st_delete(void *data, const char *key, const void *o)
{
    ((struct st *)data)->deletes++;
}

static void st_watchdog(uv_timer_t *timer)
{
    (void)timer;
    fail_msg("the test made no progress for 10 s");
}

/* st_start_ex starts an informer in mode against a server answering with
 * handle; its client gives up a watch silent for watch_stall_ms (0: none),
 * and its on_note closes it on close_on (0: never). */
/* st_new is st_start_ex with the client's options co, and the informer
 * made but not started. */
static struct st *st_new(srv_handler_fn handle, enum informer_list_mode mode,
                         const struct kube_client_opts *co, enum informer_note_kind close_on)
{
    struct st *t = calloc(1, sizeof(*t));
    struct informer_opts io = {
        .list_mode = mode,
        .page_size = 2,
        .backoff_base_ms = 10,
        .backoff_max_ms = 40,
        .handlers = {.on_add = st_add, .on_update = st_update, .on_delete = st_delete},
        .on_note = st_note};
    int e;

    assert_non_null(t);
    t->close_on = close_on;
    assert_int_equal(uv_loop_init(&t->loop), 0);
    uv_timer_init(&t->loop, &t->dog);
    srv_start(&t->srv, &t->loop);
    t->srv.handle = handle;
    t->srv.data = t;
    snprintf(t->dir, sizeof(t->dir), "/tmp/test_informer.XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    t->cfg = unit_loopback_kcfg(t->dir, t->srv.port, "    token: tok\n");
    t->http = vmg_http_new(&t->loop, &e);
    assert_non_null(t->http);
    assert_int_equal(kube_client_new(&t->loop, t->http, t->cfg, co, &t->kc), 0);
    io.handlers.data = t;
    io.note_data = t;
    vmgroup_informer_opts(&io);
    assert_int_equal(informer_new(&t->loop, t->kc, &io, &t->inf), 0);
    return t;
}

static struct st *st_start_ex(srv_handler_fn handle, enum informer_list_mode mode,
                              unsigned watch_stall_ms, enum informer_note_kind close_on)
{
    struct kube_client_opts co = {.qps = -1, .watch_stall_ms = watch_stall_ms};
    struct st *t = st_new(handle, mode, &co, close_on);

    assert_int_equal(informer_start(t->inf), 0);
    assert_int_equal(informer_start(t->inf), -EALREADY);
    return t;
}

static struct st *st_start(srv_handler_fn handle, enum informer_list_mode mode)
{
    return st_start_ex(handle, mode, 0, 0);
}

static void st_run_until_notes(struct st *t, int n)
{
    uv_timer_start(&t->dog, st_watchdog, 10000, 0);
    while (t->nnotes < n)
        uv_run(&t->loop, UV_RUN_ONCE);
    uv_timer_stop(&t->dog);
}

static void st_kc_closed(void *data)
{
    struct st *t = data;

    vmg_http_close(t->http, NULL, NULL);
}

static void st_inf_closed(void *data)
{
    struct st *t = data;

    kube_client_close(t->kc, st_kc_closed, t);
}

/* st_stop closes everything; with client_first, the client goes first
 * and the informer must stop by itself. */
static void st_stop(struct st *t, bool client_first)
{
    if (client_first) {
        int n = t->nnotes;

        kube_client_close(t->kc, st_kc_closed, t);
        assert_int_equal(t->nnotes, n + 1);
        assert_non_null(strstr(t->notes[n], "error watch"));
        assert_int_equal(informer_rewatch(t->inf), -EAGAIN);
        informer_close(t->inf, NULL, NULL);
    } else {
        informer_close(t->inf, st_inf_closed, t);
    }
    srv_stop(&t->srv);
    uv_close((uv_handle_t *)&t->dog, NULL);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    kcfg_free(t->cfg);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&t->loop), 0);
    rmdir(t->dir);
    free(t);
}

static void expect_notes(struct st *t, const char *const *want, int n)
{
    for (int i = 0; i < n; i++) {
        if (i >= t->nnotes || strcmp(t->notes[i], want[i]) != 0) {
            for (int j = 0; j < t->nnotes; j++)
                print_message("# note %d: %s\n", j, t->notes[j]);
            fail_msg("note %d: got \"%s\", want \"%s\"", i, i < t->nnotes ? t->notes[i] : "-",
                     want[i]);
        }
    }
}

static void send_obj_line(struct sconn *c, const char *type, const char *name, const char *rv,
                          bool close_after)
{
    char *obj = vg_json("n", name, rv, 1);
    char *line = event_line(type, obj);
    size_t n = strlen(line);
    char *withnl = malloc(n + 2);

    assert_non_null(withnl);
    memcpy(withnl, line, n);
    withnl[n] = '\n';
    withnl[n + 1] = '\0';
    srv_stream_send(c, withnl, close_after);
    free(withnl);
    free(line);
    free(obj);
}

static void list_page_reply(struct sconn *c, const char *rv, const char *cont,
                            const char *const *names, int n)
{
    cJSON *p = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(p, "metadata");
    cJSON *items = cJSON_AddArrayToObject(p, "items");
    char *text;

    cJSON_AddStringToObject(meta, "resourceVersion", rv);
    if (cont)
        cJSON_AddStringToObject(meta, "continue", cont);
    for (int i = 0; i < n; i++) {
        char *o = vg_json("n", names[i], "5", 1);

        cJSON_AddItemToArray(items, cJSON_Parse(o));
        free(o);
    }
    text = cJSON_PrintUnformatted(p);
    srv_reply(c, 200, NULL, text);
    cJSON_free(text);
    cJSON_Delete(p);
}

/* A server without streaming lists: 422 for sendInitialEvents; pages; a
 * watch that sends one event and ends; a second watch answered 410; then
 * a shorter list, and a watch left open. */
static void h_fallback(struct srv *s, int i, struct sconn *c)
{
    struct st *t = s->data;
    const char *target = s->reqs[i].target;
    static const char *const ab[] = {"a", "b"}, *const only_a[] = {"a"};

    if (strstr(target, "sendInitialEvents=true")) {
        srv_reply(c, 422, NULL,
                  "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"sendInitialEvents is "
                  "forbidden for watch unless the WatchList feature gate is enabled\",\"reason\":"
                  "\"Invalid\",\"code\":422}");
    } else if (!strstr(target, "watch=1")) {
        if (t->step < 2) /* the first list, in two pages */
            list_page_reply(c, "10", strstr(target, "continue=") ? NULL : "next",
                            strstr(target, "continue=") ? ab + 1 : ab, 1);
        else
            list_page_reply(c, "30", NULL, only_a, 1);
    } else if (strstr(target, "resourceVersion=10&")) {
        t->step = 1;
        srv_stream_start(c);
        send_obj_line(c, "ADDED", "c", "11", true);
    } else if (strstr(target, "resourceVersion=11&")) {
        t->step = 2;
        srv_reply(c, 410, NULL,
                  "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"too old resource "
                  "version: 11 (20)\",\"reason\":\"Expired\",\"code\":410}");
    } else {
        srv_stream_start(c);
        s->held = c;
    }
}

static void test_informer_falls_back_to_pages(void **state)
{
    struct st *t = st_start(h_fallback, INFORMER_LIST_AUTO);
    static const char *const want[] = {
        "error stream 422 a0 u0 d0 rv=",   "listed list 0 a2 u0 d0 rv=10",
        "synced list 0 a0 u0 d0 rv=10",    "watching watch 0 a0 u0 d0 rv=10",
        "ended watch 200 a0 u0 d0 rv=11",  "watching watch 0 a0 u0 d0 rv=11",
        "gone watch 410 a0 u0 d0 rv=11",   "listed list 0 a0 u0 d2 rv=30",
        "watching watch 0 a0 u0 d0 rv=30",
    };

    (void)state;
    st_run_until_notes(t, 9);
    expect_notes(t, want, 9);
    assert_int_equal(t->adds, 3);
    assert_int_equal(t->deletes, 2);
    assert_int_equal(informer_count(t->inf), 1);
    assert_non_null(informer_get(t->inf, "n/a"));
    /* The paged lists asked for pages of 2, and no stream after the 422. */
    {
        int streams = 0;

        for (int i = 0; i < t->srv.n; i++)
            if (strstr(t->srv.reqs[i].target, "sendInitialEvents"))
                streams++;
        assert_int_equal(streams, 1);
        assert_non_null(strstr(t->srv.reqs[1].target, "limit=2"));
    }
    /* A rewatch while watching cancels the watch and starts another. */
    assert_int_equal(informer_rewatch(t->inf), 0);
    st_run_until_notes(t, 10);
    assert_string_equal(t->notes[9], "watching watch 0 a0 u0 d0 rv=30");
    st_stop(t, false);
}

/* A server that takes status writes, lists a page and holds the watch. */
static void h_writes(struct srv *s, int i, struct sconn *c)
{
    static const char *const a[] = {"a"};

    if (strcmp(s->reqs[i].method, "PATCH") == 0) {
        srv_reply(c, 200, NULL, "{}");
    } else if (!strstr(s->reqs[i].target, "watch=1")) {
        list_page_reply(c, "10", NULL, a, 1);
    } else {
        srv_stream_start(c);
        s->held = c;
    }
}

static void write_done(void *data, const struct kube_result *res)
{
    assert_int_equal(res->err, 0);
    ((struct st *)data)->step++;
}

/* hurried_write queues a status write on the informer's client, hurried ahead of
 * the requests that are not (as the controller does with a headline). */
static void hurried_write(struct st *t)
{
    cJSON *patch = cJSON_Parse("{\"status\":{\"phase\":\"RUNNING\"}}");
    kube_req *req = NULL;

    assert_int_equal(kube_merge_patch_status(t->kc,
                                             "/apis/vm.codeconnect.vmworld.com/v1alpha1/"
                                             "namespaces/n/vmgroups/a",
                                             patch, write_done, t, &req),
                     0);
    assert_int_equal(kube_hurry(req), 0);
    cJSON_Delete(patch);
}

/* Writes hurried past the client's rate limit do not keep the informer's
 * list waiting for as long as they come: it goes after the writes hurried
 * before it, and before those hurried after it. */
static void test_informer_not_starved_by_hurried_writes(void **state)
{
    struct kube_client_opts co = {.qps = 20, .burst = 1};
    struct st *t = st_new(h_writes, INFORMER_LIST_PAGED, &co, 0);
    int list = -1, patches_before = 0;

    (void)state;
    for (int i = 0; i < 3; i++)
        hurried_write(t);
    assert_int_equal(informer_start(t->inf), 0);
    for (int i = 0; i < 3; i++)
        hurried_write(t);
    uv_timer_start(&t->dog, st_watchdog, 10000, 0);
    while (t->step < 6 || t->nnotes < 3)
        uv_run(&t->loop, UV_RUN_ONCE);
    uv_timer_stop(&t->dog);
    for (int i = 0; i < t->srv.n; i++) {
        if (strcmp(t->srv.reqs[i].method, "GET") == 0 && !strstr(t->srv.reqs[i].target, "watch=1"))
            list = i;
        else if (list < 0 && strcmp(t->srv.reqs[i].method, "PATCH") == 0)
            patches_before++;
    }
    assert_true(list >= 0);
    assert_int_equal(patches_before, 3);
    st_stop(t, false);
}

/* A server with streaming lists: the initial events, the end bookmark,
 * one change, then an ERROR 410 event; the relist streams again. */
static void h_stream(struct srv *s, int i, struct sconn *c)
{
    struct st *t = s->data;

    if (!strstr(s->reqs[i].target, "sendInitialEvents=true") ||
        !strstr(s->reqs[i].target, "resourceVersionMatch=NotOlderThan") ||
        strstr(s->reqs[i].target, "resourceVersion=")) {
        srv_reply(c, 400, NULL, "{}");
        return;
    }
    srv_stream_start(c);
    if (t->step++ == 0) {
        send_obj_line(c, "ADDED", "a", "5", false);
        send_obj_line(c, "ADDED", "b", "6", false);
        srv_stream_send(
            c,
            "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"annotations\":{\"k8s.io/"
            "initial-events-end\":\"true\"},\"resourceVersion\":\"7\"}}}\n",
            false);
        send_obj_line(c, "MODIFIED", "a", "8", false);
        srv_stream_send(c,
                        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,"
                        "\"reason\":\"Expired\",\"message\":\"too old\"}}\n",
                        false);
        s->held = c;
    } else {
        send_obj_line(c, "ADDED", "a", "8", false);
        srv_stream_send(
            c,
            "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"annotations\":{\"k8s.io/"
            "initial-events-end\":\"true\"},\"resourceVersion\":\"9\"}}}\n",
            false);
        s->held = c;
    }
}

static void test_informer_streams(void **state)
{
    struct st *t = st_start(h_stream, INFORMER_LIST_STREAM);
    static const char *const want[] = {
        "listed stream 0 a2 u0 d0 rv=7",  "synced stream 0 a0 u0 d0 rv=7",
        "watching watch 0 a0 u0 d0 rv=7", "gone watch 410 a0 u0 d0 rv=8",
        "listed stream 0 a0 u0 d1 rv=9",  "watching watch 0 a0 u0 d0 rv=9",
    };

    (void)state;
    st_run_until_notes(t, 6);
    expect_notes(t, want, 6);
    assert_int_equal(t->adds, 2);
    assert_int_equal(t->updates, 1);
    assert_int_equal(t->deletes, 1);
    assert_int_equal(informer_count(t->inf), 1);
    assert_string_equal(informer_resource_version(t->inf), "9");
    st_stop(t, true);
}

/* A streaming list, then silence on a connection held open: the stalled
 * watch must end and be watched again, from the list's version; the next
 * one is silent as well. */
static void h_stall(struct srv *s, int i, struct sconn *c)
{
    srv_stream_start(c);
    if (strstr(s->reqs[i].target, "sendInitialEvents=true")) {
        send_obj_line(c, "ADDED", "a", "5", false);
        srv_stream_send(
            c,
            "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"annotations\":{\"k8s.io/"
            "initial-events-end\":\"true\"},\"resourceVersion\":\"7\"}}}\n",
            false);
    }
    s->held = c;
}

static void test_informer_restarts_stalled_watch(void **state)
{
    struct st *t = st_start_ex(h_stall, INFORMER_LIST_STREAM, 1000, 0);
    static const char *const want[] = {
        "listed stream 0 a1 u0 d0 rv=7",
        "synced stream 0 a0 u0 d0 rv=7",
        "watching watch 0 a0 u0 d0 rv=7",
    };

    (void)state;
    st_run_until_notes(t, 5);
    expect_notes(t, want, 3);
    assert_non_null(strstr(t->notes[3], "error watch"));
    assert_non_null(strstr(t->notes[3], "rv=7"));
    assert_string_equal(t->notes[4], "watching watch 0 a0 u0 d0 rv=7");
    /* Watched again from the list's version; the cache stayed. */
    uv_timer_start(&t->dog, st_watchdog, 10000, 0);
    while (t->srv.n < 2)
        uv_run(&t->loop, UV_RUN_ONCE);
    uv_timer_stop(&t->dog);
    assert_non_null(strstr(t->srv.reqs[1].target, "resourceVersion=7&"));
    assert_null(strstr(t->srv.reqs[1].target, "sendInitialEvents"));
    assert_int_equal(informer_count(t->inf), 1);
    assert_int_equal(t->deletes, 0);
    st_stop(t, false);
}

/* A server that expires every watch at once: a paged list's watch is
 * answered 410, a streaming list's ends in an ERROR 410 event right after
 * the bookmark that ends its initial events. */
static void h_always_gone(struct srv *s, int i, struct sconn *c)
{
    static const char *const a[] = {"a"};
    const char *target = s->reqs[i].target;

    if (strstr(target, "sendInitialEvents=true")) {
        srv_stream_start(c);
        send_obj_line(c, "ADDED", "a", "5", false);
        srv_stream_send(
            c,
            "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"annotations\":{\"k8s.io/"
            "initial-events-end\":\"true\"},\"resourceVersion\":\"7\"}}}\n",
            false);
        srv_stream_send(c,
                        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,"
                        "\"reason\":\"Expired\",\"message\":\"too old\"}}\n",
                        false);
        s->held = c;
    } else if (strstr(target, "watch=1")) {
        srv_reply(c, 410, NULL,
                  "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"too old resource "
                  "version: 10 (20)\",\"reason\":\"Expired\",\"code\":410}");
    } else {
        list_page_reply(c, "10", NULL, a, 1);
    }
}

/* 410s back to back, each list between them a success: the first relist
 * goes at once, the next ones after a backoff that grows (10 ms, 20 ms, at
 * most 40 ms in these tests, less up to a quarter of jitter), as a
 * successful list does not reset it; before, it restarted from its base
 * at each list (about a full list a second with the defaults), or, when
 * streaming, the list's own bookmark counted as an event between and
 * every relist went at once. */
static void expect_gone_backoff(enum informer_list_mode mode)
{
    struct st *t = st_start(h_always_gone, mode);
    uint64_t retry[4];
    int n = 0;

    uv_timer_start(&t->dog, st_watchdog, 10000, 0);
    while (n < 4) {
        uv_run(&t->loop, UV_RUN_ONCE);
        n = 0;
        for (int i = 0; i < t->nnotes && n < 4; i++)
            if (strncmp(t->notes[i], "gone watch 410 ", 15) == 0)
                retry[n++] = t->retry_ms[i];
    }
    uv_timer_stop(&t->dog);
    assert_int_equal(retry[0], 0);
    assert_in_range(retry[1], 8, 10);
    assert_in_range(retry[2], 16, 20);
    assert_in_range(retry[3], 31, 40);
    assert_int_equal(informer_count(t->inf), 1);
    st_stop(t, false);
}

static void test_gone_back_to_back_paged(void **state)
{
    (void)state;
    expect_gone_backoff(INFORMER_LIST_PAGED);
}

static void test_gone_back_to_back_streamed(void **state)
{
    (void)state;
    expect_gone_backoff(INFORMER_LIST_STREAM);
}

/* st_after_close runs the loop for a while after the informer closed
 * itself from its on_note, then closes the client and the server. A
 * request the informer had sent after its close would reach the server,
 * and its callback would find the informer freed (ASan). */
static void st_set_flag(uv_timer_t *timer)
{
    *(bool *)timer->data = true;
}

static void st_after_close(struct st *t, int nnotes)
{
    uv_timer_t wait;
    bool waited = false;
    int reqs;

    uv_timer_start(&t->dog, st_watchdog, 10000, 0);
    while (!t->inf_closed)
        uv_run(&t->loop, UV_RUN_ONCE);
    uv_timer_stop(&t->dog);
    reqs = t->srv.n;
    uv_timer_init(&t->loop, &wait);
    wait.data = &waited;
    uv_timer_start(&wait, st_set_flag, 200, 0);
    while (!waited)
        uv_run(&t->loop, UV_RUN_ONCE);
    assert_int_equal(t->srv.n, reqs);
    assert_int_equal(t->nnotes, nnotes);
    uv_close((uv_handle_t *)&wait, NULL);
    kube_client_close(t->kc, st_kc_closed, t);
    srv_stop(&t->srv);
    uv_close((uv_handle_t *)&t->dog, NULL);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    kcfg_free(t->cfg);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&t->loop), 0);
    rmdir(t->dir);
    free(t);
}

/* An on_note handler may close the informer: on the 410 that would start
 * a relist, nothing may start after it. */
static void test_note_closes_on_gone(void **state)
{
    struct st *t = st_start_ex(h_stream, INFORMER_LIST_STREAM, 0, INFORMER_NOTE_GONE);
    static const char *const want[] = {
        "listed stream 0 a2 u0 d0 rv=7",
        "synced stream 0 a0 u0 d0 rv=7",
        "watching watch 0 a0 u0 d0 rv=7",
        "gone watch 410 a0 u0 d0 rv=8",
    };

    (void)state;
    st_run_until_notes(t, 4);
    expect_notes(t, want, 4);
    st_after_close(t, 4);
}

/* ...and on the end of a streaming list, in the middle of its watch: no
 * note after it (SYNCED, WATCHING were). */
static void test_note_closes_on_stream_end(void **state)
{
    struct st *t = st_start_ex(h_stream, INFORMER_LIST_STREAM, 0, INFORMER_NOTE_LISTED);
    static const char *const want[] = {"listed stream 0 a2 u0 d0 rv=7"};

    (void)state;
    st_run_until_notes(t, 1);
    expect_notes(t, want, 1);
    st_after_close(t, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_event),
        cmocka_unit_test(test_key_of),
        cmocka_unit_test_setup_teardown(test_relist_diff, setup, teardown),
        cmocka_unit_test_setup_teardown(test_relist_at_the_bound, setup_max2, teardown),
        cmocka_unit_test_setup_teardown(test_relist_after_failed_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resource_version_tracking, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_list_diff, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_objects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_event_not_applied_for_want_of_memory, setup_oom,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_many_keys_and_budget, setup_quiet, teardown),
        cmocka_unit_test(test_custom_type),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_informer_falls_back_to_pages),
        cmocka_unit_test(test_informer_streams),
        cmocka_unit_test(test_informer_not_starved_by_hurried_writes),
        cmocka_unit_test(test_informer_restarts_stalled_watch),
        cmocka_unit_test(test_gone_back_to_back_paged),
        cmocka_unit_test(test_gone_back_to_back_streamed),
        cmocka_unit_test(test_note_closes_on_gone),
        cmocka_unit_test(test_note_closes_on_stream_end),
    };

    int rc;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
