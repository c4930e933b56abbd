/* authn.h: who may read /metrics, decided the kube-rbac-proxy way: the
 * request's bearer token is authenticated with a TokenReview and the user it
 * names is authorized with a SubjectAccessReview (non-resource URL, verb
 * get). Answers are cached briefly, allowed and denied for different times,
 * keyed by a hash of the token (never the token itself). */
#ifndef VMG_AUTHN_H
#define VMG_AUTHN_H

#include <stdint.h>

#include "controller/kube.h"

typedef struct authn authn;

struct authn_opts {
    const char *path;               /* the non-resource URL to authorize, e.g. "/metrics" */
    const char *verb;               /* e.g. "get" */
    uint64_t allow_ttl_ms;          /* 0: 2 minutes */
    uint64_t deny_ttl_ms;           /* 0: 30 seconds */
    unsigned max_entries;           /* 0: 1024 */
    uint64_t (*now_ms)(void *data); /* NULL: the monotonic clock */
    void *clock_data;
};

/* The decision: 200 allowed, 401 no or bad token, 403 not allowed, 500 the
 * reviews could not be made (then msg says why). */
typedef void (*authn_cb)(void *data, int http_status, const char *msg);

int authn_new(kube_client *kc, const struct authn_opts *o, authn **ret);

/* authn_check decides for the value of an Authorization header (may be
 * NULL). cb runs exactly once, maybe before authn_check returns (cached or
 * malformed), maybe later. */
void authn_check(authn *a, const char *authorization, authn_cb cb, void *data);

/* authn_free cancels reviews in flight (their callbacks run with 500) and
 * frees a. NULL is fine. */
void authn_free(authn *a);

#endif
