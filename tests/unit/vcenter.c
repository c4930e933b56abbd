/* vcenter.c: the unit tests' fake vCenter (see vcenter.h). */
#include "tests/unit/vcenter.h"
#include "tests/unit/unit.h"

#include <stdio.h>
#include <stdlib.h>

#include "lib/tlsgen.h"

void unit_vcenter_start(struct unit_vcenter *vc, uv_loop_t *loop, const char *cn,
                        vmg_server_handler handler, void *data, uint64_t request_timeout_ms)
{
    static const char *const sans[] = {"localhost"};
    struct vmg_server_opts o = {0};
    int e = 0;

    assert_int_equal(vmg_tls_selfsigned(cn, sans, 1, &vc->cert_pem, &vc->key_pem), 0);
    o.addr = "127.0.0.1:0";
    o.cert_pem = vc->cert_pem;
    o.key_pem = vc->key_pem;
    o.handler = handler;
    o.data = data;
    o.request_timeout_ms = request_timeout_ms;
    vc->srv = vmg_server_new(loop, &o, &e);
    assert_non_null(vc->srv);
    snprintf(vc->host, sizeof(vc->host), "127.0.0.1:%d", vmg_server_port(vc->srv));
    vc->http = vmg_http_new(loop, &e);
    assert_non_null(vc->http);
}

void unit_vcenter_close(struct unit_vcenter *vc)
{
    vmg_http_close(vc->http, NULL, NULL);
    vmg_server_close(vc->srv, NULL, NULL);
}

void unit_vcenter_free(struct unit_vcenter *vc)
{
    free(vc->cert_pem);
    free(vc->key_pem);
}
