/* authn.h: who may read /metrics, decided the kube-rbac-proxy way: the
 * request's bearer token is authenticated with a TokenReview and the user it
 * names is authorized with a SubjectAccessReview (non-resource URL, verb
 * get). Answers are cached briefly, allowed and denied for different times,
 * keyed by a hash of the token (never the token itself).
 *
 * Reviews cost the controller nothing: they go through a kube client of
 * their own (the caller makes it, with a small rate of its own), at most
 * max_inflight at a time and max_queued more waiting; a check that would
 * need a review beyond that is answered 503 at once. Checks of the same
 * token while its review runs share that review. A check whose caller went
 * away is canceled (authn_cancel), and a review nobody waits for any more
 * is dropped, or stopped when it is under way. Allowed and denied answers
 * live in two caches of their own, so that a flood of bad tokens can only
 * push out other bad tokens; failures are not cached at all. An allowed
 * token past its time is still allowed for as long again while one review
 * asks again (a denial ends it at once); of max_inflight places (two or
 * more), one is kept for these reviews, so that a flood of unknown tokens
 * cannot keep a scraper out. */
#ifndef VMG_AUTHN_H
#define VMG_AUTHN_H

#include <stdint.h>

#include "kube/kube.h"

typedef struct authn authn;
typedef struct authn_wait authn_wait; /* one check waiting for a review */

#define AUTHN_MAX_TOKEN 16384 /* bytes of a bearer token; longer ones are 401 */

struct authn_opts {
    const char *path;               /* the non-resource URL to authorize, e.g. "/metrics" */
    const char *verb;               /* e.g. "get" */
    uint64_t allow_ttl_ms;          /* 0: 2 minutes */
    uint64_t deny_ttl_ms;           /* 0: 30 seconds */
    unsigned max_entries;           /* allowed tokens remembered; 0: 1024 */
    unsigned max_denied;            /* denied tokens remembered; 0: 1024 */
    unsigned max_inflight;          /* reviews under way at once; 0: 4 */
    unsigned max_queued;            /* reviews waiting for a turn; 0: 16 */
    unsigned max_waiters;           /* checks waiting for reviews, in all; 0: 256 */
    uint64_t (*now_ms)(void *data); /* NULL: the monotonic clock */
    void *clock_data;
};

/* The decision: 200 allowed, 401 no or bad token, 403 not allowed, 503 no
 * room for one more review (or the check was canceled), 500 the reviews
 * could not be made. msg says why, for the log only: it may hold what the
 * API server said (a service account, a role), which the caller must not
 * hand to the client; authn_body() gives what the client may read. */
typedef void (*authn_cb)(void *data, int http_status, const char *msg);

/* authn_new makes the checker; its reviews go through kc, which must
 * outlive it and which should be a client of its own (see above).
 * Returns 0, -EINVAL or -ENOMEM. */
int authn_new(kube_client *kc, const struct authn_opts *o, authn **ret);

/* authn_check decides for the value of an Authorization header (may be
 * NULL). cb runs exactly once. When the answer is known at once (cached,
 * malformed, no room) cb runs before authn_check returns, which then
 * returns NULL; otherwise it returns a handle, valid until cb runs, for
 * authn_cancel. */
authn_wait *authn_check(authn *a, const char *authorization, authn_cb cb, void *data);

/* authn_cancel gives up a check: its callback runs now, with 503, and the
 * review it waited for is dropped (or stopped, when under way) if no other
 * check waits for it. */
void authn_cancel(authn_wait *w);

/* authn_body is the body to answer a client with for status: a fixed text
 * that says nothing of why. */
const char *authn_body(int status);

/* authn_free cancels every review and calls every check still waiting
 * back with 503, then frees a. NULL is fine. */
void authn_free(authn *a);

#endif
