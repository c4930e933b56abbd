/* authn.c: TokenReview + SubjectAccessReview for /metrics, in a lane of
 * their own (bounded reviews in flight and waiting, one review per token),
 * with two small caches of decisions keyed by the token's SHA-256. */
#include "kube/authn.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "lib/clock.h"
#include "lib/buf.h"
#include "lib/err.h"
#include "lib/hex.h"
#include "lib/queue.h"

#define TR_PATH "/apis/authentication.k8s.io/v1/tokenreviews"
#define SAR_PATH "/apis/authorization.k8s.io/v1/subjectaccessreviews"
#define REVIEW_TIMEOUT_MS 10000u

struct entry {
    char key[65];
    int status;
    uint64_t expires;
    uint64_t used;
};

/* One cache of one kind of answer, bounded, least recently used out. An
 * entry past its ttl is kept grace more, to be served while it is
 * reviewed again (see cache_stale). */
struct cache {
    struct entry *e;
    unsigned n, max;
    uint64_t ttl, grace;
};

struct review;

struct authn_wait {
    struct lq link; /* in its review's waiters */
    struct review *rv;
    authn_cb cb;
    void *data;
};

/* One review of one token, shared by every check of that token. */
struct review {
    struct lq link; /* in a->queued or a->active */
    authn *a;
    char key[65];
    char *token; /* while queued: a copy, wiped when sent or dropped */
    size_t token_len;
    bool active;
    bool refresh; /* of an allowed token past its time: nobody waits */
    kube_req *req;
    struct lq waiters; /* of authn_wait.link, the latest first */
};

struct authn {
    kube_client *kc;
    struct authn_opts o;
    char path[256];
    char verb[32];
    struct cache allowed, denied;
    struct lq active, queued; /* of review.link, in order */
    unsigned n_active, n_queued, n_waiters;
    bool freeing;
};

static uint64_t now(authn *a)
{
    return a->o.now_ms(a->o.clock_data);
}

/* ---- the caches ---- */

static int cache_init(struct cache *c, unsigned max, uint64_t ttl, uint64_t grace)
{
    c->e = calloc(max, sizeof(*c->e));
    c->max = max;
    c->ttl = ttl;
    c->grace = grace;
    return c->e ? 0 : -ENOMEM;
}

static struct entry *cache_find(struct cache *c, const char *key, uint64_t t)
{
    for (unsigned i = 0; i < c->n; i++) {
        struct entry *e = &c->e[i];
        if (strcmp(e->key, key) == 0) {
            if (e->expires <= t)
                return NULL;
            e->used = t;
            return e;
        }
    }
    return NULL;
}

/* cache_stale returns key's entry when it is past its time but within its
 * grace, or NULL. */
static struct entry *cache_stale(struct cache *c, const char *key, uint64_t t)
{
    for (unsigned i = 0; i < c->n; i++) {
        struct entry *e = &c->e[i];
        if (strcmp(e->key, key) == 0)
            return e->expires <= t && t - e->expires < c->grace ? e : NULL;
    }
    return NULL;
}

static void cache_del(struct cache *c, const char *key)
{
    for (unsigned i = 0; i < c->n; i++)
        if (strcmp(c->e[i].key, key) == 0) {
            memset(&c->e[i], 0, sizeof(c->e[i])); /* a free slot: no key, expired */
            return;
        }
}

static void cache_put(struct cache *c, const char *key, int status, uint64_t t)
{
    struct entry *e = NULL;

    for (unsigned i = 0; i < c->n && !e; i++)
        if (strcmp(c->e[i].key, key) == 0 || c->e[i].expires + c->grace <= t)
            e = &c->e[i];
    if (!e && c->n < c->max)
        e = &c->e[c->n++];
    if (!e) {
        e = &c->e[0];
        for (unsigned i = 1; i < c->n; i++)
            if (c->e[i].used < e->used)
                e = &c->e[i];
    }
    snprintf(e->key, sizeof(e->key), "%s", key);
    e->status = status;
    e->used = t;
    e->expires = t + c->ttl;
}

/* ---- life ---- */

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
    if (!a->o.max_denied)
        a->o.max_denied = 1024;
    if (!a->o.max_inflight)
        a->o.max_inflight = 4;
    if (!a->o.max_queued)
        a->o.max_queued = 16;
    if (!a->o.max_waiters)
        a->o.max_waiters = 256;
    if (!a->o.now_ms)
        a->o.now_ms = vmg_clock_mono_ms;
    lq_init(&a->active);
    lq_init(&a->queued);
    /* An allowed token past its time is still served for as long again
     * while its review runs (see authn_check). */
    if (cache_init(&a->allowed, a->o.max_entries, a->o.allow_ttl_ms, a->o.allow_ttl_ms) < 0 ||
        cache_init(&a->denied, a->o.max_denied, a->o.deny_ttl_ms, 0) < 0) {
        free(a->allowed.e);
        free(a);
        return -ENOMEM;
    }
    *ret = a;
    return 0;
}

/* ---- reviews ---- */

/* first_review is the first review of list, or NULL. */
static struct review *first_review(const struct lq *list)
{
    struct lq *n = lq_head(list);
    return n ? lq_entry(n, struct review, link) : NULL;
}

static void rv_unlink(struct review *rv)
{
    authn *a = rv->a;

    lq_remove(&rv->link);
    if (rv->active)
        a->n_active--;
    else
        a->n_queued--;
}

static void drop_token(struct review *rv)
{
    vmg_wipe_free(rv->token, rv->token_len);
    rv->token = NULL;
}

/* wipe_json wipes every string of a tree (a TokenReview's answer echoes
 * the token) before it is freed. */
static void wipe_json(cJSON *j)
{
    for (; j; j = j->next) {
        if (j->valuestring)
            OPENSSL_cleanse(j->valuestring, strlen(j->valuestring));
        if (j->string && !(j->type & cJSON_StringIsConst))
            OPENSSL_cleanse(j->string, strlen(j->string));
        wipe_json(j->child);
    }
}

static void pump(authn *a);

/* finish ends rv: it leaves its list, the answer is cached when cache,
 * every waiter is called back, rv is freed and the next review starts. */
static void finish(struct review *rv, int status, const char *msg, bool cache)
{
    authn *a = rv->a;
    struct authn_wait *w;
    struct lq list, *n;

    lq_move(&rv->waiters, &list); /* taken aside: rv is gone before they are called */
    rv_unlink(rv);
    drop_token(rv);
    if (cache && status != 200)
        cache_del(&a->allowed, rv->key); /* no longer allowed, grace or not */
    if (cache)
        cache_put(status == 200 ? &a->allowed : &a->denied, rv->key, status, now(a));
    while ((n = lq_pop_head(&list)) != NULL) {
        w = lq_entry(n, struct authn_wait, link);
        a->n_waiters--;
        w->cb(w->data, status, msg);
        free(w);
    }
    free(rv);
    pump(a);
}

static int post(struct review *rv, const char *path, const char *body, size_t len, kube_cb cb)
{
    struct kube_req_opts ro = {.timeout_ms = REVIEW_TIMEOUT_MS};

    rv->req = NULL;
    return kube_request_ex(rv->a->kc, "POST", path, "application/json", body, len, &ro, cb, rv,
                           &rv->req);
}

/* review_msg writes why a review failed, for the log. */
static void review_msg(char *buf, size_t size, const char *what, const struct kube_result *res)
{
    snprintf(buf, size, "%s failed: %s", what,
             res->message && *res->message ? res->message : vmg_strerror(res->err));
}

/* take_body takes a review's answer out of the result, to be wiped. */
static cJSON *take_body(const struct kube_result *res)
{
    return res->err ? NULL : kube_result_take_body(res);
}

static void sar_done(void *data, const struct kube_result *res)
{
    struct review *rv = data;
    cJSON *body = take_body(res);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(body, "status");
    bool allowed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "allowed"));
    char msg[KUBE_MESSAGE_MAX + 64];

    rv->req = NULL;
    wipe_json(body);
    cJSON_Delete(body);
    if (res->err) {
        review_msg(msg, sizeof(msg), "SubjectAccessReview", res);
        finish(rv, res->err == VMG_ECANCELED ? 503 : 500, msg, false);
    } else if (allowed) {
        finish(rv, 200, "allowed", true);
    } else {
        finish(rv, 403, "Forbidden", true);
    }
}

/* sar_body builds the SubjectAccessReview of the user a TokenReview
 * names; NULL when out of memory. */
static char *sar_body(authn *a, const cJSON *user)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(user, "username");
    const cJSON *uid = cJSON_GetObjectItemCaseSensitive(user, "uid");
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(user, "groups");
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(user, "extra");
    cJSON *sar = cJSON_CreateObject(), *spec, *attrs;
    char *text = NULL;

    spec = cJSON_AddObjectToObject(sar, "spec");
    attrs = cJSON_AddObjectToObject(spec, "nonResourceAttributes");
    if (!spec || !attrs || !cJSON_AddStringToObject(sar, "apiVersion", "authorization.k8s.io/v1") ||
        !cJSON_AddStringToObject(sar, "kind", "SubjectAccessReview") ||
        !cJSON_AddStringToObject(spec, "user", name->valuestring) ||
        !cJSON_AddStringToObject(attrs, "path", a->path) ||
        !cJSON_AddStringToObject(attrs, "verb", a->verb))
        goto out;
    if (cJSON_IsString(uid) && !cJSON_AddStringToObject(spec, "uid", uid->valuestring))
        goto out;
    if (cJSON_IsArray(groups) && !cJSON_AddItemToObject(spec, "groups", cJSON_Duplicate(groups, 1)))
        goto out;
    if (cJSON_IsObject(extra) && !cJSON_AddItemToObject(spec, "extra", cJSON_Duplicate(extra, 1)))
        goto out;
    text = cJSON_PrintUnformatted(sar);
out:
    cJSON_Delete(sar);
    return text;
}

static void tr_done(void *data, const struct kube_result *res)
{
    struct review *rv = data;
    cJSON *body = take_body(res);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(body, "status");
    const cJSON *user = cJSON_GetObjectItemCaseSensitive(st, "user");
    bool known = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "authenticated")) &&
                 cJSON_IsString(cJSON_GetObjectItemCaseSensitive(user, "username"));
    char msg[KUBE_MESSAGE_MAX + 64], *sar = known ? sar_body(rv->a, user) : NULL;
    int rc;

    rv->req = NULL;
    wipe_json(body);
    cJSON_Delete(body);
    if (res->err) {
        review_msg(msg, sizeof(msg), "TokenReview", res);
        finish(rv, res->err == VMG_ECANCELED ? 503 : 500, msg, false);
    } else if (!known) {
        finish(rv, 401, "Unauthorized", true);
    } else if (!sar) {
        finish(rv, 500, "out of memory", false);
    } else {
        rc = post(rv, SAR_PATH, sar, strlen(sar), sar_done);
        if (rc < 0) {
            snprintf(msg, sizeof(msg), "SubjectAccessReview failed: %s", vmg_strerror(rc));
            finish(rv, rc == -ENOSPC ? 503 : 500, msg, false);
        }
    }
    free(sar);
}

/* start sends rv's TokenReview; rv moves to the active list. Returns 0, or
 * a negative code when rv could not be sent: then rv is finished (its
 * waiters called back) and freed. */
static int start(struct review *rv)
{
    authn *a = rv->a;
    static const char head[] = "{\"apiVersion\":\"authentication.k8s.io/"
                               "v1\",\"kind\":\"TokenReview\",\"spec\":{\"token\":\"";
    static const char tail[] = "\"}}";
    size_t len = sizeof(head) - 1 + rv->token_len + sizeof(tail) - 1;
    char *body = malloc(len + 1), msg[128];
    int rc = -ENOMEM;

    rv_unlink(rv);
    rv->active = true;
    a->n_active++;
    lq_insert_tail(&a->active, &rv->link);
    /* The token holds no character JSON must escape (see token_ok): it
     * goes in as it is, into a buffer made to measure, wiped after. */
    if (body) {
        memcpy(body, head, sizeof(head) - 1);
        memcpy(body + sizeof(head) - 1, rv->token, rv->token_len);
        memcpy(body + sizeof(head) - 1 + rv->token_len, tail, sizeof(tail));
        rc = post(rv, TR_PATH, body, len, tr_done);
        vmg_wipe_free(body, len);
    }
    drop_token(rv);
    if (rc < 0) {
        snprintf(msg, sizeof(msg), "TokenReview failed: %s", vmg_strerror(rc));
        finish(rv, rc == -ENOSPC ? 503 : 500, msg, false);
    }
    return rc < 0 ? rc : 0;
}

/* may_start: there is room for rv under way. One of the places (of two
 * or more) is kept for refreshes, so that a flood of unknown tokens
 * cannot keep a known one from being reviewed again. */
static bool may_start(const authn *a, const struct review *rv)
{
    unsigned reserved = a->o.max_inflight >= 2 && !rv->refresh ? 1 : 0;

    return a->n_active + reserved < a->o.max_inflight;
}

/* pump starts waiting reviews while there is room, in order, refreshes
 * first when only the kept place is free. */
static void pump(authn *a)
{
    while (!a->freeing && !lq_empty(&a->queued)) {
        struct review *rv = NULL;
        struct lq *n;
        lq_foreach(n, &a->queued)
        {
            if (may_start(a, lq_entry(n, struct review, link))) {
                rv = lq_entry(n, struct review, link);
                break;
            }
        }
        if (!rv)
            break;
        start(rv);
    }
}

/* new_review queues a review of tok; NULL when out of memory. */
static struct review *new_review(authn *a, const char *key, const char *tok, size_t len,
                                 bool refresh)
{
    struct review *rv = calloc(1, sizeof(*rv));

    if (rv)
        rv->token = malloc(len + 1);
    if (!rv || !rv->token) {
        free(rv);
        return NULL;
    }
    rv->a = a;
    rv->refresh = refresh;
    memcpy(rv->key, key, sizeof(rv->key));
    memcpy(rv->token, tok, len);
    rv->token[len] = '\0';
    rv->token_len = len;
    lq_init(&rv->waiters);
    a->n_queued++;
    lq_insert_tail(&a->queued, &rv->link);
    return rv;
}

/* token_ok: a bearer token is visible ASCII without the two characters
 * JSON must escape (RFC 6750's b64token and every token Kubernetes issues
 * fit); anything else is no token. */
static bool token_ok(const char *tok, size_t len)
{
    if (len == 0 || len > AUTHN_MAX_TOKEN)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)tok[i];
        if (ch < 0x21 || ch > 0x7e || ch == '"' || ch == '\\')
            return false;
    }
    return true;
}

static int hash_token(const char *tok, size_t len, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;

    if (!EVP_Digest(tok, len, md, &n, EVP_sha256(), NULL) || n != 32)
        return -EIO;
    vmg_hex(md, n, out);
    return 0;
}

static struct review *find_review(const struct lq *list, const char *key)
{
    const struct lq *n;
    lq_foreach(n, list)
    {
        struct review *rv = lq_entry(n, struct review, link);
        if (strcmp(rv->key, key) == 0)
            return rv;
    }
    return NULL;
}

authn_wait *authn_check(authn *a, const char *authorization, authn_cb cb, void *data)
{
    const char *tok;
    size_t len;
    char key[65];
    uint64_t t;
    struct review *rv;
    struct authn_wait *w;
    struct entry *e;
    bool made;

    if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0) {
        cb(data, 401, "Unauthorized");
        return NULL;
    }
    tok = authorization + 7;
    while (*tok == ' ')
        tok++;
    len = strlen(tok);
    while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t'))
        len--;
    if (!token_ok(tok, len) || hash_token(tok, len, key) < 0) {
        cb(data, 401, "Unauthorized");
        return NULL;
    }
    t = now(a);
    if (cache_find(&a->allowed, key, t)) {
        cb(data, 200, "allowed");
        return NULL;
    }
    if (cache_stale(&a->allowed, key, t)) {
        /* Allowed a while ago: still allowed while one review (with its
         * own place, whatever the flood) asks again; a denial ends it. */
        if (!find_review(&a->active, key) && !find_review(&a->queued, key) &&
            new_review(a, key, tok, len, true))
            pump(a);
        cb(data, 200, "allowed");
        return NULL;
    }
    e = cache_find(&a->denied, key, t);
    if (e) {
        cb(data, e->status, e->status == 403 ? "Forbidden" : "Unauthorized");
        return NULL;
    }
    if (a->n_waiters >= a->o.max_waiters) {
        cb(data, 503, "too many scrapes waiting for a review");
        return NULL;
    }
    rv = find_review(&a->active, key);
    if (!rv)
        rv = find_review(&a->queued, key);
    made = !rv;
    if (!rv) {
        struct review probe = {.refresh = false};
        if (!may_start(a, &probe) && a->n_queued >= a->o.max_queued) {
            cb(data, 503, "too many token reviews under way");
            return NULL;
        }
        rv = new_review(a, key, tok, len, false);
        if (!rv) {
            cb(data, 500, "out of memory");
            return NULL;
        }
    }
    w = calloc(1, sizeof(*w));
    if (!w) {
        /* Only a review made here, not yet sent, goes with it; one found
         * (a re-check under way, say) is left to end. */
        if (made) {
            rv_unlink(rv);
            drop_token(rv);
            free(rv);
        }
        cb(data, 500, "out of memory");
        return NULL;
    }
    w->rv = rv;
    w->cb = cb;
    w->data = data;
    lq_insert_head(&rv->waiters, &w->link);
    a->n_waiters++;
    /* A review that cannot be sent calls w back now: w is no handle then. */
    if (!rv->active && may_start(a, rv) && start(rv) < 0)
        return NULL;
    return w;
}

void authn_cancel(authn_wait *w)
{
    struct review *rv;
    authn *a;

    if (!w)
        return;
    rv = w->rv;
    a = rv->a;
    lq_remove(&w->link);
    a->n_waiters--;
    w->cb(w->data, 503, "canceled: the client went away");
    free(w);
    if (!lq_empty(&rv->waiters))
        return;
    /* Nobody waits for rv any more. */
    if (rv->active && rv->req) {
        kube_cancel(rv->req); /* its callback finishes rv */
        return;
    }
    if (!rv->active) {
        rv_unlink(rv);
        drop_token(rv);
        free(rv);
    }
}

const char *authn_body(int status)
{
    switch (status) {
    case 200:
        return "ok\n";
    case 401:
        return "Unauthorized\n";
    case 403:
        return "Forbidden\n";
    case 503:
        return "Service Unavailable\n";
    default:
        return "Internal Server Error\n";
    }
}

void authn_free(authn *a)
{
    if (!a)
        return;
    a->freeing = true;
    while (!lq_empty(&a->queued))
        finish(first_review(&a->queued), 503, "shutting down", false);
    while (!lq_empty(&a->active)) {
        struct review *rv = first_review(&a->active);
        if (rv->req)
            kube_cancel(rv->req); /* runs its callback, which finishes rv */
        if (first_review(&a->active) == rv)
            finish(rv, 503, "shutting down", false);
    }
    free(a->allowed.e);
    free(a->denied.e);
    free(a);
}
