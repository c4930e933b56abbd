/* authn.c: TokenReview + SubjectAccessReview for /metrics, with a small
 * cache of decisions keyed by the token's SHA-256. */
#include "controller/authn.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "lib/err.h"

#define MAX_TOKEN 16384

struct entry {
    char key[65];
    int status;
    uint64_t expires;
    uint64_t used;
};

struct pending {
    struct pending *next, **pprev;
    authn *a;
    kube_req *req;
    char key[65];
    authn_cb cb;
    void *data;
};

struct authn {
    kube_client *kc;
    struct authn_opts o;
    char path[256];
    char verb[32];
    struct entry *cache;
    unsigned n_cache;
    struct pending *pending;
};

static uint64_t mono_ms(void *data)
{
    struct timespec ts;
    (void)data;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int authn_new(kube_client *kc, const struct authn_opts *o, authn **ret)
{
    authn *a;

    if (!kc || !o || !o->path || !o->verb || !ret)
        return -EINVAL;
    a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->kc = kc;
    a->o = *o;
    snprintf(a->path, sizeof(a->path), "%s", o->path);
    snprintf(a->verb, sizeof(a->verb), "%s", o->verb);
    a->o.path = a->path;
    a->o.verb = a->verb;
    if (!a->o.allow_ttl_ms)
        a->o.allow_ttl_ms = 120000;
    if (!a->o.deny_ttl_ms)
        a->o.deny_ttl_ms = 30000;
    if (!a->o.max_entries)
        a->o.max_entries = 1024;
    if (!a->o.now_ms)
        a->o.now_ms = mono_ms;
    a->cache = calloc(a->o.max_entries, sizeof(*a->cache));
    if (!a->cache) {
        free(a);
        return -ENOMEM;
    }
    *ret = a;
    return 0;
}

static uint64_t now(authn *a)
{
    return a->o.now_ms(a->o.clock_data);
}

static int hash_token(const char *tok, size_t len, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;

    if (!EVP_Digest(tok, len, md, &n, EVP_sha256(), NULL) || n != 32)
        return -EIO;
    for (unsigned i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    return 0;
}

static struct entry *cache_find(authn *a, const char *key)
{
    uint64_t t = now(a);
    for (unsigned i = 0; i < a->n_cache; i++) {
        struct entry *e = &a->cache[i];
        if (strcmp(e->key, key) == 0) {
            if (e->expires <= t)
                return NULL;
            e->used = t;
            return e;
        }
    }
    return NULL;
}

static void cache_put(authn *a, const char *key, int status)
{
    uint64_t t = now(a);
    struct entry *e = NULL;

    for (unsigned i = 0; i < a->n_cache && !e; i++)
        if (strcmp(a->cache[i].key, key) == 0 || a->cache[i].expires <= t)
            e = &a->cache[i];
    if (!e && a->n_cache < a->o.max_entries)
        e = &a->cache[a->n_cache++];
    if (!e) {
        e = &a->cache[0];
        for (unsigned i = 1; i < a->n_cache; i++)
            if (a->cache[i].used < e->used)
                e = &a->cache[i];
    }
    snprintf(e->key, sizeof(e->key), "%s", key);
    e->status = status;
    e->used = t;
    e->expires = t + (status == 200 ? a->o.allow_ttl_ms : a->o.deny_ttl_ms);
}

static void pending_unlink(struct pending *p)
{
    *p->pprev = p->next;
    if (p->next)
        p->next->pprev = p->pprev;
}

static void finish(struct pending *p, int status, const char *msg, bool cache)
{
    if (cache)
        cache_put(p->a, p->key, status);
    pending_unlink(p);
    p->cb(p->data, status, msg);
    free(p);
}

static int post(struct pending *p, const char *path, cJSON *body, kube_cb cb)
{
    char *text = cJSON_PrintUnformatted(body);
    int rc;

    cJSON_Delete(body);
    if (!text)
        return -ENOMEM;
    p->req = NULL;
    rc = kube_request_ex(p->a->kc, "POST", path, "application/json", text, strlen(text), NULL, cb,
                         p, &p->req);
    /* The body carries the token: wipe our copy. */
    memset(text, 0, strlen(text));
    free(text);
    return rc;
}

static void sar_done(void *data, const struct kube_result *res)
{
    struct pending *p = data;
    const cJSON *st, *allowed;
    char msg[256];

    p->req = NULL;
    if (res->err) {
        snprintf(msg, sizeof(msg), "SubjectAccessReview failed: %s",
                 res->message && *res->message ? res->message : vmg_strerror(res->err));
        finish(p, 500, msg, false);
        return;
    }
    st = cJSON_GetObjectItemCaseSensitive(res->body, "status");
    allowed = cJSON_GetObjectItemCaseSensitive(st, "allowed");
    if (cJSON_IsTrue(allowed))
        finish(p, 200, "allowed", true);
    else
        finish(p, 403, "Forbidden", true);
}

static void tr_done(void *data, const struct kube_result *res)
{
    struct pending *p = data;
    const cJSON *st, *user, *groups, *extra, *uid, *name;
    cJSON *sar = NULL, *spec, *attrs;
    char msg[256];
    int rc;

    p->req = NULL;
    if (res->err) {
        snprintf(msg, sizeof(msg), "TokenReview failed: %s",
                 res->message && *res->message ? res->message : vmg_strerror(res->err));
        finish(p, 500, msg, false);
        return;
    }
    st = cJSON_GetObjectItemCaseSensitive(res->body, "status");
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "authenticated"))) {
        finish(p, 401, "Unauthorized", true);
        return;
    }
    user = cJSON_GetObjectItemCaseSensitive(st, "user");
    name = cJSON_GetObjectItemCaseSensitive(user, "username");
    if (!cJSON_IsString(name)) {
        finish(p, 401, "Unauthorized", true);
        return;
    }
    uid = cJSON_GetObjectItemCaseSensitive(user, "uid");
    groups = cJSON_GetObjectItemCaseSensitive(user, "groups");
    extra = cJSON_GetObjectItemCaseSensitive(user, "extra");

    sar = cJSON_CreateObject();
    spec = cJSON_AddObjectToObject(sar, "spec");
    attrs = cJSON_AddObjectToObject(spec, "nonResourceAttributes");
    if (!spec || !attrs || !cJSON_AddStringToObject(sar, "apiVersion", "authorization.k8s.io/v1") ||
        !cJSON_AddStringToObject(sar, "kind", "SubjectAccessReview") ||
        !cJSON_AddStringToObject(spec, "user", name->valuestring) ||
        !cJSON_AddStringToObject(attrs, "path", p->a->path) ||
        !cJSON_AddStringToObject(attrs, "verb", p->a->verb))
        goto oom;
    if (cJSON_IsString(uid) && !cJSON_AddStringToObject(spec, "uid", uid->valuestring))
        goto oom;
    if (cJSON_IsArray(groups) && !cJSON_AddItemToObject(spec, "groups", cJSON_Duplicate(groups, 1)))
        goto oom;
    if (cJSON_IsObject(extra) && !cJSON_AddItemToObject(spec, "extra", cJSON_Duplicate(extra, 1)))
        goto oom;
    rc = post(p, "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar, sar_done);
    if (rc < 0) {
        snprintf(msg, sizeof(msg), "SubjectAccessReview failed: %s", vmg_strerror(rc));
        finish(p, 500, msg, false);
    }
    return;
oom:
    cJSON_Delete(sar);
    finish(p, 500, "out of memory", false);
}

void authn_check(authn *a, const char *authorization, authn_cb cb, void *data)
{
    const char *tok;
    size_t len;
    char key[65];
    struct entry *e;
    struct pending *p;
    cJSON *tr, *spec;
    int rc;

    if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0) {
        cb(data, 401, "Unauthorized");
        return;
    }
    tok = authorization + 7;
    while (*tok == ' ')
        tok++;
    len = strlen(tok);
    while (len && isspace((unsigned char)tok[len - 1]))
        len--;
    if (len == 0 || len > MAX_TOKEN || hash_token(tok, len, key) < 0) {
        cb(data, 401, "Unauthorized");
        return;
    }
    e = cache_find(a, key);
    if (e) {
        cb(data, e->status,
           e->status == 200   ? "allowed"
           : e->status == 401 ? "Unauthorized"
                              : "Forbidden");
        return;
    }
    p = calloc(1, sizeof(*p));
    if (!p) {
        cb(data, 500, "out of memory");
        return;
    }
    p->a = a;
    p->cb = cb;
    p->data = data;
    snprintf(p->key, sizeof(p->key), "%s", key);
    p->next = a->pending;
    if (p->next)
        p->next->pprev = &p->next;
    p->pprev = &a->pending;
    a->pending = p;

    tr = cJSON_CreateObject();
    spec = cJSON_AddObjectToObject(tr, "spec");
    if (!spec || !cJSON_AddStringToObject(tr, "apiVersion", "authentication.k8s.io/v1") ||
        !cJSON_AddStringToObject(tr, "kind", "TokenReview")) {
        cJSON_Delete(tr);
        finish(p, 500, "out of memory", false);
        return;
    }
    {
        char *t = strndup(tok, len);
        cJSON *s = t ? cJSON_CreateString(t) : NULL;
        if (t) {
            memset(t, 0, len);
            free(t);
        }
        if (!s || !cJSON_AddItemToObject(spec, "token", s)) {
            cJSON_Delete(s);
            cJSON_Delete(tr);
            finish(p, 500, "out of memory", false);
            return;
        }
    }
    rc = post(p, "/apis/authentication.k8s.io/v1/tokenreviews", tr, tr_done);
    if (rc < 0) {
        char msg[128];
        snprintf(msg, sizeof(msg), "TokenReview failed: %s", vmg_strerror(rc));
        finish(p, 500, msg, false);
    }
}

void authn_free(authn *a)
{
    if (!a)
        return;
    while (a->pending) {
        struct pending *p = a->pending;
        if (p->req) {
            kube_cancel(p->req); /* runs its callback, which finishes p */
            if (a->pending == p)
                finish(p, 500, "shutting down", false);
        } else {
            finish(p, 500, "shutting down", false);
        }
    }
    free(a->cache);
    free(a);
}
