/* vcenter.h: the fake vCenter of test_finder, test_ops and test_session: a
 * TLS server (lib/server) on a free loopback port with a self-signed
 * certificate, whose handler the test writes (it answers SOAP from
 * fixtures or by hand), and the vmg_http client that reaches it. */
#ifndef VMG_TEST_VCENTER_H
#define VMG_TEST_VCENTER_H

#include <stdint.h>

#include <uv.h>

#include "lib/http.h"
#include "lib/server.h"

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

#endif
