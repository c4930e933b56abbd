/* api.c: the Kubernetes API's conventions, apart from any client: the
 * paths of resources and their queries, Status objects and the error codes
 * they map to, and Retry-After. Declared in kube.h. */
#include "kube/kube.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "lib/err.h"

void kube_copy_str(char *dst, size_t size, const char *src)
{
    size_t n;

    if (!size)
        return;
    if (!src)
        src = "";
    n = strlen(src);
    if (n >= size) {
        n = size - 1;
        /* Do not cut a UTF-8 sequence in two. */
        while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80)
            n--;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
}

int kube_parse_retry_after(const char *value, time_t now, unsigned *ret_s)
{
    const char *p = value, *end;
    unsigned long long v = 0;
    size_t n;

    if (!value || !ret_s)
        return -EINVAL;
    while (*p == ' ' || *p == '\t')
        p++;
    end = p + strlen(p);
    while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    n = (size_t)(end - p);
    if (n == 0)
        return -EINVAL;
    if (isdigit((unsigned char)*p)) {
        for (const char *q = p; q < end; q++) {
            if (!isdigit((unsigned char)*q))
                return -EINVAL;
            if (v < 1000000)
                v = v * 10 + (unsigned)(*q - '0');
        }
        *ret_s = v > KUBE_RETRY_AFTER_MAX_S ? KUBE_RETRY_AFTER_MAX_S : (unsigned)v;
        return 0;
    }
    if (!isalpha((unsigned char)*p) || n > 64)
        return -EINVAL;
    {
        char buf[65];
        time_t t;

        memcpy(buf, p, n);
        buf[n] = '\0';
        t = curl_getdate(buf, NULL);
        if (t == -1)
            return -EINVAL;
        if (t <= now)
            *ret_s = 0;
        else if (t - now > KUBE_RETRY_AFTER_MAX_S)
            *ret_s = KUBE_RETRY_AFTER_MAX_S;
        else
            *ret_s = (unsigned)(t - now);
    }
    return 0;
}

/* ---- Status ---- */

struct reason_map {
    const char *reason;
    int code;
    int err;
};

static const struct reason_map reasons[] = {
    {"BadRequest", 400, -EINVAL},
    {"Unauthorized", 401, VMG_EAUTH},
    {"Forbidden", 403, VMG_EFORBIDDEN},
    {"NotFound", 404, VMG_ENOTFOUND},
    {"MethodNotAllowed", 405, -EOPNOTSUPP},
    {"NotAcceptable", 406, -EOPNOTSUPP},
    {"Conflict", 409, VMG_ECONFLICT},
    {"AlreadyExists", 409, VMG_ECONFLICT},
    {"Gone", 410, VMG_EGONE},
    {"Expired", 410, VMG_EGONE},
    {"RequestEntityTooLarge", 413, VMG_ETOOBIG},
    {"UnsupportedMediaType", 415, -EOPNOTSUPP},
    {"Invalid", 422, -EINVAL},
    {"TooManyRequests", 429, VMG_ETHROTTLED},
    {"InternalError", 500, VMG_EHTTP},
    {"ServerTimeout", 500, -ETIMEDOUT},
    {"ServiceUnavailable", 503, -EAGAIN},
    {"Timeout", 504, -ETIMEDOUT},
};

#define N_REASONS (sizeof(reasons) / sizeof(reasons[0]))

int kube_status_err(const char *reason, long code)
{
    if (reason && *reason) {
        for (size_t i = 0; i < N_REASONS; i++)
            if (strcmp(reasons[i].reason, reason) == 0)
                return reasons[i].err;
    }
    if (code >= 200 && code < 300)
        return 0;
    /* The first entry of a code is its usual reason. */
    for (size_t i = 0; i < N_REASONS; i++)
        if (reasons[i].code == code)
            return reasons[i].err;
    return VMG_EHTTP;
}

static const char *default_reason(long code)
{
    for (size_t i = 0; i < N_REASONS; i++)
        if (reasons[i].code == code)
            return reasons[i].reason;
    return "";
}

static const char *json_str(const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

    return cJSON_IsString(v) && v->valuestring ? v->valuestring : NULL;
}

int kube_status_decode(const cJSON *obj, long http_status, struct kube_status *ret)
{
    const char *kind, *st = NULL;

    memset(ret, 0, sizeof(*ret));
    ret->code = (int)http_status;
    kind = cJSON_IsObject(obj) ? json_str(obj, "kind") : NULL;
    if (kind && strcmp(kind, "Status") == 0) {
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "code");
        const cJSON *details = cJSON_GetObjectItemCaseSensitive(obj, "details");

        st = json_str(obj, "status");
        if (cJSON_IsNumber(code) && code->valuedouble >= 100 && code->valuedouble < 600)
            ret->code = (int)code->valuedouble;
        kube_copy_str(ret->reason, sizeof(ret->reason), json_str(obj, "reason"));
        kube_copy_str(ret->message, sizeof(ret->message), json_str(obj, "message"));
        if (cJSON_IsObject(details)) {
            const cJSON *causes = cJSON_GetObjectItemCaseSensitive(details, "causes");
            const cJSON *ra = cJSON_GetObjectItemCaseSensitive(details, "retryAfterSeconds");

            if (cJSON_IsArray(causes)) {
                int n = cJSON_GetArraySize(causes);
                const cJSON *first = cJSON_GetArrayItem(causes, 0);

                ret->n_causes = n > 0 ? (unsigned)n : 0;
                if (cJSON_IsObject(first))
                    kube_copy_str(ret->cause_field, sizeof(ret->cause_field),
                                  json_str(first, "field"));
            }
            if (cJSON_IsNumber(ra) && ra->valuedouble > 0)
                ret->retry_after_s = ra->valuedouble > KUBE_RETRY_AFTER_MAX_S
                                         ? KUBE_RETRY_AFTER_MAX_S
                                         : (unsigned)ra->valuedouble;
        }
    }
    if (!ret->reason[0])
        kube_copy_str(ret->reason, sizeof(ret->reason), default_reason(ret->code));
    if (st && strcmp(st, "Success") == 0)
        ret->err = 0;
    else
        ret->err = kube_status_err(ret->reason, ret->code);
    /* A Failure never counts as success, whatever its code says. */
    if (ret->err == 0 && ((st && strcmp(st, "Failure") == 0) || http_status >= 300))
        ret->err = VMG_EHTTP;
    return ret->err;
}

/* ---- paths ---- */

static bool segment_ok(const char *s)
{
    if (!s || !*s || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return false;
    for (const char *p = s; *p; p++) {
        unsigned char ch = (unsigned char)*p;

        if (!isalnum(ch) && ch != '.' && ch != '-' && ch != '_' && ch != ':')
            return false;
    }
    return true;
}

int kube_path(char *buf, size_t len, const char *group, const char *version, const char *ns,
              const char *plural, const char *name, const char *sub)
{
    int n;
    bool has_ns = ns && *ns, has_name = name && *name, has_sub = sub && *sub;
    bool core = !group || !*group;

    if (!buf || !segment_ok(version) || !segment_ok(plural) || (!core && !segment_ok(group)) ||
        (has_ns && !segment_ok(ns)) || (has_name && !segment_ok(name)) ||
        (has_sub && (!has_name || !segment_ok(sub))))
        return -EINVAL;
    n = snprintf(buf, len, "%s%s/%s%s%s/%s%s%s%s%s", core ? "/api" : "/apis/", core ? "" : group,
                 version, has_ns ? "/namespaces/" : "", has_ns ? ns : "", plural,
                 has_name ? "/" : "", has_name ? name : "", has_sub ? "/" : "", has_sub ? sub : "");
    if (n < 0 || (size_t)n >= len) {
        if (len)
            buf[0] = '\0';
        return VMG_ETOOBIG;
    }
    return n;
}

int kube_query_add(char *buf, size_t len, const char *key, const char *value)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n, start;

    if (!buf || !key || !value)
        return -EINVAL;
    n = start = strnlen(buf, len);
    if (n >= len)
        return VMG_ETOOBIG;
#define PUT(ch)                                                                                    \
    do {                                                                                           \
        if (n + 1 >= len)                                                                          \
            goto toobig;                                                                           \
        buf[n++] = (ch);                                                                           \
    } while (0)
    PUT(strchr(buf, '?') ? '&' : '?');
    for (const char *p = key; *p; p++)
        PUT(*p);
    PUT('=');
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            PUT((char)*p);
        } else {
            PUT('%');
            PUT(hex[*p >> 4]);
            PUT(hex[*p & 15]);
        }
    }
#undef PUT
    buf[n] = '\0';
    return (int)n;
toobig:
    buf[start] = '\0';
    return VMG_ETOOBIG;
}
