/* vcenter.h: the fake vCenter of test_finder, test_ops, test_session and
 * test_watch: a TLS server (lib/server) on a free loopback port with a
 * self-signed certificate, whose handler the test writes (it answers SOAP
 * from fixtures or by hand, with the helpers below), and the vmg_http
 * client that reaches it. */
#ifndef VMG_TEST_VCENTER_H
#define VMG_TEST_VCENTER_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "lib/http.h"
#include "lib/server.h"
#include "vsphere/session.h"

struct unit_vcenter {
    vmg_server *srv;
    vmg_http *http;
    char *cert_pem, *key_pem; /* the server's certificate (CN cn, DNS localhost) */
    char host[64];            /* "127.0.0.1:PORT", a vs_session_config's host */
};

/* unit_vcenter_start starts the server on loop, handler(data) answering
 * every request (request_timeout_ms 0: the server's default), and the
 * client; a failure fails the test. */
void unit_vcenter_start(struct unit_vcenter *vc, uv_loop_t *loop, const char *cn,
                        vmg_server_handler handler, void *data, uint64_t request_timeout_ms);
/* unit_vcenter_close closes the client and the server; the caller then
 * runs the loop until their handles are closed, and calls
 * unit_vcenter_free. */
void unit_vcenter_close(struct unit_vcenter *vc);
void unit_vcenter_free(struct unit_vcenter *vc);

/* unit_vcenter_session makes a session with the fake (user "u", password
 * "secret-pw", no TLS check, no keepalive; calls time out after
 * call_timeout_ms, 0: the default); a failure fails the test. */
vs_session *unit_vcenter_session(struct unit_vcenter *vc, uv_loop_t *loop,
                                 uint64_t call_timeout_ms);
/* unit_vcenter_stop closes the client, the server and the test's guard
 * timer, runs loop until every handle is closed, closes loop and frees vc
 * (the caller closed its session and what used it first). */
void unit_vcenter_stop(struct unit_vcenter *vc, uv_loop_t *loop, uv_timer_t *guard);

/* What a fake saw: "Method detail" per request, in order (the first
 * UNIT_CALLS_MAX; text beyond 63 bytes is cut). */
#define UNIT_CALLS_MAX 256
struct unit_calls {
    char at[UNIT_CALLS_MAX][64];
    int n;
};

void unit_calls_add(struct unit_calls *c, const char *method, const char *detail);
/* unit_calls_count counts the calls that are what ("Method detail"), or
 * of the method what with any detail. */
int unit_calls_count(const struct unit_calls *c, const char *what);
/* unit_calls_dump writes them to stderr, "# call N: ..." (for a test that
 * timed out). */
void unit_calls_dump(const struct unit_calls *c);

/* unit_soap_reply answers r with status and a SOAP envelope around the
 * body fmt makes (16 KiB at most, or the test fails). */
void unit_soap_reply(vmg_server_req *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* unit_soap_fixture answers r with status and the fixture soap/name. */
void unit_soap_fixture(vmg_server_req *r, int status, const char *name);
/* unit_soap_session answers a request of the session (RetrieveServiceContent,
 * Login with the cookie vmware_soap_session=s1, Logout, CurrentTime) from
 * the fixtures: true when body is one. */
bool unit_soap_session(vmg_server_req *r, const char *body);
/* unit_between copies the text between the first a in body and the next b
 * into buf, and returns buf ("" when either is missing or it does not fit):
 * what a fake reads of a request. */
const char *unit_between(const char *body, const char *a, const char *b, char *buf, size_t size);

#endif
