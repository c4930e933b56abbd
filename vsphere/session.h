/* session.h: one logged-in session with a vCenter, and the calls made in it.
 *
 * The session turns VC_HOST into the SDK URL (https://host:port/sdk), sets
 * up TLS (verified against the system roots, a CA file, or a pinned SHA-256
 * certificate fingerprint; or not verified at all when insecure), logs in
 * with a user name and password (RetrieveServiceContent, then Login, whose
 * vmware_soap_session cookie every later call carries), and sends vim25
 * SOAP calls through lib/http on the libuv loop, never blocking.
 *
 * Login: at most one login is in flight; calls made meanwhile wait behind
 * it, and are sent once it succeeds. A failed login (the credentials
 * refused, e.g. a wrong password: VMG_EAUTH; vCenter unreachable:
 * VMG_ETRANSPORT; another fault, such as a SystemError from a vCenter
 * still starting: VMG_EFAULT in the state, VMG_ETRANSPORT for the calls,
 * whose fault it is not) fails the calls that
 * waited for it and schedules the next try after an exponential backoff
 * (1 s, 2 s, 4 s ... 60 s by default): the session never gives up, and the
 * state callback tells the caller each time, for readiness and status.
 * A call refused with the fault NotAuthenticated (the session expired, was
 * terminated, or vCenter restarted) logs in again and is sent once more.
 *
 * Keep-alive: when no call has been in flight for keepalive_ms (a
 * WaitForUpdatesEx long poll counts as activity), the session sends
 * CurrentTime, which keeps it alive at vCenter and finds out early when it
 * is not.
 *
 * Patience: a long poll (vs_long_poll_opts) that has not answered by its
 * timeout is not given up while vCenter is alive: the session asks vCenter
 * CurrentTime then (one request for all the long polls due; a long poll
 * falling due while one is out waits for that one's answer), and when
 * vCenter answers (a fault too), the long poll gets another call timeout
 * (its caller told so by vs_call_opts.kept, for its log), and so on up to
 * its patience, when it fails as timed out. When the
 * CurrentTime fails (no answer within VS_PROBE_TIMEOUT_MS, or the call
 * timeout if shorter; an HTTP error; an unreadable answer), the long poll
 * fails at once with VMG_ETRANSPORT, saying "no answer in N s, nor to a
 * CurrentTime then (why)". vCenter computes a large UpdateSet for as long
 * as it takes, and a long poll given up is computed again from the start;
 * vcsim even loses the first part of such an answer. CurrentTime goes on
 * another connection: one dropped on the way (a NAT forgetting it) is
 * found by TCP keep-alive probes, every 15 s after 30 s of silence.
 *
 * TLS pinning: the thumbprint is the SHA-256 fingerprint of the server's
 * leaf certificate (as `openssl x509 -noout -fingerprint -sha256` prints
 * it, "AA:BB:..."; colons optional, any case). It is checked by an OpenSSL
 * certificate-verification callback installed through
 * CURLOPT_SSL_CTX_FUNCTION; the chain and the host name are not checked
 * then, since the fingerprint names the one certificate accepted.
 *
 * Not thread-safe: every call is made on the loop's thread. Callbacks run
 * on the loop, never from inside the function that was given them.
 */
#ifndef VMG_VS_SESSION_H
#define VMG_VS_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <curl/curl.h>
#include <uv.h>

#include "lib/err.h"
#include "lib/http.h"
#include "vsphere/soap.h"
#include "vsphere/vim.h"

/* Bounds and defaults. */
#define VS_URL_MAX 1024                        /* bytes of the SDK URL */
#define VS_CALL_MAX_RESPONSE (4u << 20)        /* default bound of a response */
#define VS_CALL_MAX_RESPONSE_LARGE (32u << 20) /* for property collector results */
#define VS_DEFAULT_CONNECT_TIMEOUT_MS 10000
#define VS_DEFAULT_CALL_TIMEOUT_MS 120000
#define VS_DEFAULT_KEEPALIVE_MS (5 * 60 * 1000)
#define VS_DEFAULT_BACKOFF_MIN_MS 1000
#define VS_DEFAULT_BACKOFF_MAX_MS 60000
/* After vCenter refused the credentials, the same password is tried again
 * no sooner than this: vSphere SSO's default lockout policy locks an
 * account after 5 failed logins within 180 s, which the backoff above (1,
 * 2, 4, 8 s ...) reached in 15 s, locking out a service account that
 * people may share; one try in 5 minutes stays below any such policy. A
 * new password (vs_session_set_password) is tried at once. */
#define VS_DEFAULT_REFUSED_RETRY_MS (5 * 60 * 1000)
#define VS_DEFAULT_MAX_WAITING 4096 /* calls waiting for a login */
#define VS_PROBE_TIMEOUT_MS 30000   /* a CurrentTime asked under a long poll */
#define VS_LONG_POLL_PATIENCE 5     /* call timeouts a live vCenter gets beyond a long poll's */
#define VS_SHA256_LEN 32

typedef struct vs_session vs_session;
typedef struct vs_req vs_req;

struct vs_session_config {
    const char *host;     /* VC_HOST: host, host:port, or https://host[:port][/path] */
    const char *user;     /* VC_USER */
    const char *password; /* VC_PASS; registered with vmg_log_add_secret() */
    /* TLS: a thumbprint, when given, is the whole check (and wins over the
     * others); else insecure skips verification; else the chain and host
     * name are verified against ca_file, or the system roots. */
    const char *ca_file;    /* PEM bundle to verify vCenter against; NULL: system roots */
    const char *thumbprint; /* SHA-256 fingerprint of vCenter's certificate; NULL: none */
    bool insecure;          /* no TLS verification at all (the caller warns) */
    /* 0 means the default for each of these. */
    uint64_t connect_timeout_ms;
    uint64_t call_timeout_ms;
    uint64_t keepalive_ms; /* UINT64_MAX: never */
    uint64_t backoff_min_ms;
    uint64_t backoff_max_ms;
    uint64_t refused_retry_ms; /* see VS_DEFAULT_REFUSED_RETRY_MS */
    size_t max_waiting;
    const char *user_agent; /* NULL: "vmgroup-operator" */
};

enum vs_state {
    VS_STATE_IDLE = 0,   /* not started: no login tried yet */
    VS_STATE_CONNECTING, /* a login is in flight */
    VS_STATE_READY,      /* logged in */
    VS_STATE_BACKOFF,    /* the last login failed; the next starts after retry_in_ms */
    VS_STATE_CLOSED,     /* vs_session_close was called */
};

/* What the state callback is told. Strings are valid during the call. */
struct vs_session_status {
    enum vs_state state;
    int err;              /* why the last login failed (0 after a success) */
    const char *message;  /* one sentence saying so; "" when err is 0 */
    unsigned attempts;    /* failed logins in a row */
    uint64_t retry_in_ms; /* BACKOFF: delay before the next login */
    unsigned long logins; /* successful logins so far */
};

typedef void (*vs_state_cb)(void *data, const struct vs_session_status *st);

/* The outcome of one call, valid during the callback only. */
struct vs_reply {
    /* 0; VMG_EFAULT (fault says which); VMG_EAUTH (the login this call
     * waited for was refused), VMG_ETRANSPORT (vCenter unreachable, or the
     * login this call waited for failed otherwise), VMG_EHTTP (an HTTP error
     * without a SOAP fault), VMG_EPARSE, VMG_ETOOBIG, VMG_ECANCELED,
     * -ENOMEM. */
    int err;
    const char *message;            /* "" when err is 0, else one sentence */
    const struct soap_fault *fault; /* when err is VMG_EFAULT, else NULL */
    const soap_resp *resp;          /* when err is 0, else NULL */
    long status;                    /* HTTP status, 0 if none */
};

/* vs_waited_err is the error the calls waiting for a login get when it
 * failed with login_err: a fault answering the login is not the call's own
 * (VMG_EFAULT promises the caller a fault to read), so it is
 * VMG_ETRANSPORT ("not logged in", as when no session exists). */
static inline int vs_waited_err(int login_err)
{
    return login_err == VMG_EFAULT ? VMG_ETRANSPORT : login_err;
}

/* vs_reply_fault_is says whether the call failed with a fault of type
 * (VMG_EFAULT), without reading a fault that is not there. */
static inline bool vs_reply_fault_is(const struct vs_reply *r, const char *type)
{
    return r->err == VMG_EFAULT && r->fault && strcmp(r->fault->type, type) == 0;
}

typedef void (*vs_call_cb)(void *data, const struct vs_reply *reply);

/* Called after every finished request (logins, keep-alives and retries
 * included): the method, the result (0 or the error; fault_type "" unless
 * err is VMG_EFAULT) and how long it took. For metrics; it must not call
 * into the session. */
typedef void (*vs_observer)(void *data, const char *method, int err, const char *fault_type,
                            double seconds);

/* Told, with the call's data, each time a patient call past its timeout is
 * kept because vCenter answered the CurrentTime asked then: waited_ms since
 * it was sent. For the caller's log; it may cancel calls, but must not
 * close the session. */
typedef void (*vs_kept_cb)(void *data, uint64_t waited_ms);

struct vs_call_opts {
    size_t max_response; /* 0: VS_CALL_MAX_RESPONSE */
    uint64_t timeout_ms; /* 0: the session's call_timeout_ms */
    /* 0: none. Else (more than the timeout) the call is kept beyond its
     * timeout while vCenter answers a CurrentTime, up to patience_ms after
     * it was sent (see "Patience" above). */
    uint64_t patience_ms;
    vs_kept_cb kept; /* NULL, or told when the call is kept (patient calls) */
};

struct vs_session_stats {
    unsigned long requests;       /* requests finished, of any kind */
    unsigned long logins;         /* successful logins */
    unsigned long login_failures; /* failed logins */
    unsigned long keepalives;     /* CurrentTime calls made to keep the session */
    unsigned long probes;         /* CurrentTime calls asked under overdue long polls */
    size_t active;                /* requests in flight */
    size_t waiting;               /* calls waiting for a login */
};

/* ---- Pure helpers (no I/O) ---- */

/* vs_url_build turns a VC_HOST value into the SDK URL: "host" gives
 * "https://host:443/sdk", "host:port" "https://host:port/sdk", an https
 * URL keeps its port and path (default 443 and "/sdk"); IPv6 literals go in
 * brackets. Returns 0, or VMG_ECONFIG with a sentence in err (a scheme
 * other than https, user info in the URL (an '@' anywhere), a bad port,
 * an empty or invalid host, or a result longer than size). */
int vs_url_build(const char *host, char *buf, size_t size, char *err, size_t errlen);

/* vs_session_cookie reads one Set-Cookie value of a Login response: when
 * it sets the session cookie, vmware_soap_session, it writes
 * "vmware_soap_session=<value>" (attributes and trailing blanks cut) to buf
 * and returns 0; another cookie gives 1 (buf untouched); a session cookie
 * without a value, with a control character in it, or that does not fit
 * in size gives VMG_EPARSE. */
int vs_session_cookie(const char *set_cookie, char *buf, size_t size);

/* vs_thumbprint_parse reads a SHA-256 fingerprint, 64 hex digits with or
 * without ':' between bytes, any case. Returns 0 and fills out, or
 * VMG_ECONFIG with a sentence in err (a SHA-1 thumbprint is named as
 * such). */
int vs_thumbprint_parse(const char *s, unsigned char out[VS_SHA256_LEN], char *err, size_t errlen);

/* vs_backoff_ms is the delay before login attempt number failures + 1,
 * after failures >= 1 failed attempts: min doubled failures - 1 times,
 * at most max (lib/backoff's vmg_backoff_ms, counted in failures). */
uint64_t vs_backoff_ms(unsigned failures, uint64_t min_ms, uint64_t max_ms);

/* vs_state_name names a state ("ready", "backoff", ...). */
const char *vs_state_name(enum vs_state st);

/* ---- The session ---- */

/* vs_session_new checks cfg (the URL, the CA file is readable, the
 * thumbprint parses, user and password present) and makes an idle session
 * that sends its requests through http (not owned; it must outlive the
 * session). Strings are copied. Returns NULL and sets *ret_err
 * (VMG_ECONFIG, with a sentence in err, or -ENOMEM) on failure. */
vs_session *vs_session_new(uv_loop_t *loop, vmg_http *http, const struct vs_session_config *cfg,
                           int *ret_err, char *err, size_t errlen);

/* vs_session_set_state_cb sets the callback told of every state change
 * and of every failed login. */
void vs_session_set_state_cb(vs_session *s, vs_state_cb cb, void *data);
void vs_session_set_observer(vs_session *s, vs_observer obs, void *data);

/* vs_session_start begins the first login, when none was tried yet (a call
 * also does). Returns 0, or VMG_ECANCELED after close. */
int vs_session_start(vs_session *s);

/* vs_session_set_password replaces the password used by the next logins
 * (a rotated secret) and registers it with vmg_log_add_secret(). A session
 * waiting to retry a failed login tries again at once. 0; 1 when it is the
 * password in use (nothing is done); -EINVAL (NULL or empty) or -ENOMEM
 * (the old password is kept). */
int vs_session_set_password(vs_session *s, const char *password);

/* vs_call sends the SOAP envelope buf (len bytes, made by a vim_req_*
 * builder) in the session, logging in first when needed. method names it
 * for metrics ("CloneVM_Task"). The session takes buf over in every case
 * and wipes and frees it (soap_buf_free) when done. cb is called once,
 * later, with the reply; *ret_call (when not NULL) is valid until then.
 * Returns 0, or -EINVAL, -ENOSPC (too many calls wait for a login),
 * VMG_ECANCELED (the session is closing), -ENOMEM; cb is then never
 * called. */
int vs_call(vs_session *s, const char *method, char *buf, size_t len,
            const struct vs_call_opts *opts, vs_call_cb cb, void *data, vs_req **ret_call);

/* vs_req_cancel stops a call whose callback has not run: it runs now,
 * with VMG_ECANCELED, before vs_req_cancel returns. A no-op from inside
 * the call's own callback. */
void vs_req_cancel(vs_req *c);

/* vs_session_content is the ServiceContent read at the last login, or NULL
 * before the first. Valid until the next login completes. */
const struct vim_service_content *vs_session_content(const vs_session *s);

/* vs_session_call_timeout_ms is how long a call may take (the
 * configuration's call_timeout_ms); a long poll is given this much beyond
 * its own wait. */
uint64_t vs_session_call_timeout_ms(const vs_session *s);

/* vs_long_poll_opts are the options of a WaitForUpdatesEx with
 * maxWaitSeconds max_wait_seconds: a large response, a timeout of the wait
 * plus the call timeout, and a patience of VS_LONG_POLL_PATIENCE call
 * timeouts more (13 minutes with the defaults and a 60 s wait). */
struct vs_call_opts vs_long_poll_opts(const vs_session *s, int max_wait_seconds);

/* vs_session_generation counts successful logins: objects made in the
 * session (views, collectors, filters) belong to one generation. */
unsigned long vs_session_generation(const vs_session *s);

enum vs_state vs_session_state(const vs_session *s);
const char *vs_session_url(const vs_session *s);
const char *vs_session_user(const vs_session *s);

/* vs_session_key copies the current session's key (as `govc session.ls`
 * shows it) into buf; "" when not logged in. */
void vs_session_key(const vs_session *s, char *buf, size_t size);

void vs_session_stats(const vs_session *s, struct vs_session_stats *ret);

/* vs_session_prepare_tls applies the session's TLS trust (CA file, pinned
 * thumbprint, or none with insecure) to another client's easy handle, e.g.
 * the vSphere Automation REST client's; data is the session. */
void vs_session_prepare_tls(void *data, CURL *easy);

/* vs_session_close fails the calls waiting for a login and cancels those in
 * flight (their callbacks run with VMG_ECANCELED before this returns), logs
 * out when logged in (bounded by a few seconds), then frees the session
 * once its libuv handles are closed and no reference holds it, and calls
 * closed(data) when not NULL. s must not be used after this call but by
 * vs_session_prepare_tls and vs_session_unref of a reference's holder;
 * NULL is fine. */
void vs_session_close(vs_session *s, void (*closed)(void *data), void *data);

/* vs_session_ref keeps s's memory past vs_session_close until the matching
 * vs_session_unref: for a client whose transfers vs_session_prepare_tls
 * prepares, and which may outlive the session's close (the REST client's
 * logout). vs_session_unref takes a void * to serve as such a client's
 * release callback. NULL is fine for both. */
void vs_session_ref(vs_session *s);
void vs_session_unref(void *s);

#endif
