/* leader.h: leader election on a coordination.k8s.io/v1 Lease, so that of
 * several replicas of the manager only one reconciles.
 *
 * The semantics are client-go's leaderelection with a LeaseLock:
 *   - a candidate reads the Lease every RetryPeriod (with a jitter of up to
 *     1.2 RetryPeriod more) and takes it when it is absent (create), held by
 *     nobody, held by this candidate, or expired, by an update carrying the
 *     resourceVersion it read (optimistic concurrency: a conflict means
 *     another candidate won);
 *   - expiry is judged on this process's own monotonic clock: a record is
 *     expired when leaseDurationSeconds have passed since this process last
 *     saw it change, whatever the timestamps written in it (so clock skew
 *     between machines does not matter);
 *   - the leader reads and renews every RetryPeriod; when no renewal has
 *     succeeded for RenewDeadline (counted from the sending of the last
 *     successful one), leadership is lost. Unlike client-go, a leader that
 *     reads a Lease held by another, unexpired identity gives up at once;
 *   - leaseTransitions counts changes of holder; acquireTime and renewTime
 *     are written as MicroTime ("2006-01-02T15:04:05.000000Z"), acquireTime
 *     kept while the holder stays the same;
 *   - leader_release() (client-go's ReleaseOnCancel) writes the Lease with
 *     no holder and leaseDurationSeconds 1, so another candidate takes over
 *     at its next try instead of waiting for expiry.
 * A candidate that has seen another holder also wakes at the moment that
 * holder's lease expires, rather than up to a jittered period later.
 *
 * Lost leadership is final: on_stopped_leading is called once and the
 * elector stops; the manager stops reconciling at once and exits non-zero
 * (a new process starts as a new candidate).
 *
 * I/O: the Lease is read and written through struct leader_io, which the
 * manager wires to the Kubernetes client (leader_kube_io) and the unit tests
 * to a fake. Time comes from injected clocks. Everything runs on one libuv
 * loop; nothing blocks. Not thread-safe.
 */
#ifndef VMG_LEADER_H
#define VMG_LEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <uv.h>

#include "kube/kubeconfig.h"

#define LEADER_DEFAULT_LEASE_DURATION_MS 15000u
#define LEADER_DEFAULT_RENEW_DEADLINE_MS 10000u
#define LEADER_DEFAULT_RETRY_PERIOD_MS 2000u
#define LEADER_JITTER_FACTOR 1.2 /* a candidate waits RetryPeriod * (1 + [0, 1.2)) */

#define LEADER_MAX_NAME 253     /* Lease name and namespace, bytes */
#define LEADER_MAX_IDENTITY 253 /* holderIdentity, bytes */
#define LEADER_MAX_TIME 40      /* a MicroTime string as read back, bytes */
#define LEADER_MAX_RV 128       /* resourceVersion, bytes */
#define LEADER_MICROTIME_LEN 27 /* "2006-01-02T15:04:05.000000Z" */

/* The spec of a Lease, as this module reads and writes it. Strings are ""
 * when absent. */
struct leader_record {
    char holder[LEADER_MAX_IDENTITY + 1];
    int64_t lease_duration_s;
    char acquire_time[LEADER_MAX_TIME + 1];
    char renew_time[LEADER_MAX_TIME + 1];
    int64_t transitions;
    char resource_version[LEADER_MAX_RV + 1]; /* metadata.resourceVersion */
};

/* Why leadership ended (on_stopped_leading). */
enum leader_stop_reason {
    LEADER_STOP_RENEW_DEADLINE = 1, /* no renewal succeeded within RenewDeadline */
    LEADER_STOP_TAKEN = 2,          /* the Lease was seen held by another identity */
    LEADER_STOP_RELEASED = 3,       /* leader_release() was called */
};

/* I/O on one Lease. Each call starts an asynchronous request and returns 0
 * (and an opaque handle in *ret_req), or a negative code, in which case done
 * is never called. Otherwise done is called exactly once, later (never
 * from inside the call), with err 0 and the Lease the API server returned,
 * or a negative code (VMG_ENOTFOUND, VMG_ECONFLICT, VMG_ECANCELED, ...) and
 * a message; obj and msg are valid only during the call. cancel makes done
 * come (with VMG_ECANCELED) soon, possibly before cancel returns. timeout_ms
 * bounds the request. body is not consumed. */
typedef void (*leader_io_done)(void *data, int err, const cJSON *obj, const char *msg);
struct leader_io {
    int (*get)(void *ctx, const char *ns, const char *name, uint64_t timeout_ms,
               leader_io_done done, void *data, void **ret_req);
    int (*create)(void *ctx, const char *ns, const cJSON *body, uint64_t timeout_ms,
                  leader_io_done done, void *data, void **ret_req);
    int (*update)(void *ctx, const char *ns, const char *name, const cJSON *body,
                  uint64_t timeout_ms, leader_io_done done, void *data, void **ret_req);
    void (*cancel)(void *ctx, void *req);
};

/* leader_kube_io reads and writes the Lease through the Kubernetes client:
 * io_ctx is a kube_client (kube/kube.h). Its requests carry the
 * elector's timeouts and are not retried by the client (the elector
 * retries on its own schedule). The client should be one of the elector's
 * own, so that the controller's requests never queue a renewal behind
 * them in the client's rate limiter. */
extern const struct leader_io leader_kube_io;

struct leader_callbacks {
    /* This process now holds the Lease; reconciling may start. */
    void (*on_started_leading)(void *data);
    /* Leadership ended (see the reasons); called once, only after
     * on_started_leading. msg is one sentence, valid during the call. The
     * callback may call leader_close(). */
    void (*on_stopped_leading)(void *data, enum leader_stop_reason reason, const char *msg);
    /* The observed holder changed (this process included); optional. */
    void (*on_new_leader)(void *data, const char *identity);
    void *data;
};

struct leader_options {
    const char *ns;             /* the Lease's namespace; required (see leader_namespace) */
    const char *name;           /* the Lease's name; required */
    const char *identity;       /* NULL: leader_make_identity() */
    uint64_t lease_duration_ms; /* 0: the default; whole seconds are written */
    uint64_t renew_deadline_ms;
    uint64_t retry_period_ms;
    /* Monotonic clock in ms for expiry, deadlines and tries; NULL: the
     * loop's (uv_hrtime). */
    uint64_t (*now_ms)(void *data);
    /* Wall clock in microseconds since the epoch, for the timestamps
     * written; NULL: CLOCK_REALTIME. */
    int64_t (*wall_us)(void *data);
    void *clock_data;
    /* A number in [0, 1) for the jitter; NULL: random(). */
    double (*rand01)(void *data);
    const struct leader_io *io; /* required; see leader_kube_io() */
    void *io_ctx;
    struct leader_callbacks cb;
};

typedef struct leader leader;

/* leader_check_timing validates the durations like client-go: lease >
 * renew > retry > 0, and the lease at least one second (it is written in
 * whole seconds). Returns 0 or VMG_ECONFIG with a message in err. */
int leader_check_timing(uint64_t lease_duration_ms, uint64_t renew_deadline_ms,
                        uint64_t retry_period_ms, char *err, size_t errlen);

/* leader_namespace picks the Lease's namespace: flag_ns when not NULL or
 * "", else the service account's namespace when cfg is the in-cluster
 * configuration. Otherwise returns VMG_ECONFIG with a message asking for
 * --leader-election-namespace. On success *ret points into flag_ns or cfg. */
int leader_namespace(const char *flag_ns, const kcfg *cfg, const char **ret, char *err,
                     size_t errlen);

/* leader_make_identity writes "<hostname>_<random UUID>" to buf, cut so that
 * it fits LEADER_MAX_IDENTITY. Returns 0, -EINVAL (buf smaller than 64
 * bytes) or -EIO (no random bytes). */
int leader_make_identity(char *buf, size_t len);

/* leader_new makes an elector (not started). Returns 0 and *ret, or
 * -EINVAL (missing namespace, name, io or loop, bad identity), VMG_ECONFIG
 * (bad timing; message in err) or -ENOMEM. */
int leader_new(uv_loop_t *loop, const struct leader_options *o, leader **ret, char *err,
               size_t errlen);

/* leader_start begins trying to acquire the Lease, at once. Returns 0 or
 * -EALREADY (started before) or -ESHUTDOWN (closing). */
int leader_start(leader *le);

/* leader_is_leader tells whether this process holds the Lease now (and has
 * not reached its renew deadline). */
bool leader_is_leader(const leader *le);

/* leader_status_value is leader_is_leader as 1.0 or 0.0, with the signature
 * of vmg_metric_set_fn, for the leader_election_master_status gauge. */
double leader_status_value(void *le);

/* leader_identity returns this candidate's identity. */
const char *leader_identity(const leader *le);

/* leader_observed copies the last Lease record read or written, and
 * returns false when none was seen yet. */
bool leader_observed(const leader *le, struct leader_record *ret);

/* leader_release gives the Lease up on a clean shutdown: tries stop, a
 * request in flight is canceled, on_stopped_leading(LEADER_STOP_RELEASED)
 * is called when leading, and the Lease, when held, is written with no
 * holder and leaseDurationSeconds 1 (re-read and retried on a conflict, a
 * few times). done(data, err) is called once, later, from the loop (unless
 * leader_close() comes first): err 0 when the Lease was released or not
 * held, else why the write failed. Returns 0, or -EALREADY (released
 * before) or -ESHUTDOWN (closing), and then done is not called. */
int leader_release(leader *le, void (*done)(void *data, int err), void *data);

/* leader_close stops the elector without releasing (a request in flight is
 * canceled, no callback other than closed runs), closes its timer and
 * frees it in the close callback, then calls closed(data) when not NULL.
 * le must not be used afterwards. NULL is fine. */
void leader_close(leader *le, void (*closed)(void *data), void *data);

/* leader_poll runs what is due on the elector's clock (the timer does it on
 * a running loop): a try, a renewal, the renew deadline, a request's
 * timeout. For tests with a fake clock. */
void leader_poll(leader *le);

/* Lease JSON, for the io implementations and tests. */

/* leader_record_from_json reads obj (a Lease) into *ret. Missing spec
 * fields are zero/""; a wrong type, a string above its bound or a kind
 * other than Lease is VMG_EPARSE. Returns 0 or VMG_EPARSE. */
int leader_record_from_json(const cJSON *obj, struct leader_record *ret);

/* leader_record_to_json makes the Lease ns/name holding r: apiVersion,
 * kind, metadata (name, namespace, resourceVersion when r has one) and
 * spec (holderIdentity, leaseDurationSeconds, acquireTime, renewTime,
 * leaseTransitions; empty strings omitted). Returns 0 and *ret (free with
 * cJSON_Delete), or -ENOMEM. */
int leader_record_to_json(const char *ns, const char *name, const struct leader_record *r,
                          cJSON **ret);

/* leader_microtime formats wall_us as "2006-01-02T15:04:05.000000Z" into buf
 * (at least LEADER_MICROTIME_LEN + 1 bytes). Returns 0 or -EINVAL. */
int leader_microtime(int64_t wall_us, char *buf, size_t len);

#endif
