/* vcenter.c: the unit tests' fake vCenter (see vcenter.h). */
#include "tests/unit/vcenter.h"
#include "tests/unit/unit.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

vs_session *unit_vcenter_session(struct unit_vcenter *vc, uv_loop_t *loop, uint64_t call_timeout_ms)
{
    struct vs_session_config cfg = {0};
    vs_session *s;
    char err[256];
    int e = 0;

    cfg.host = vc->host;
    cfg.user = "u";
    cfg.password = "secret-pw";
    cfg.insecure = true;
    cfg.keepalive_ms = UINT64_MAX;
    cfg.call_timeout_ms = call_timeout_ms;
    s = vs_session_new(loop, vc->http, &cfg, &e, err, sizeof(err));
    assert_non_null(s);
    return s;
}

void unit_vcenter_stop(struct unit_vcenter *vc, uv_loop_t *loop, uv_timer_t *guard)
{
    unit_vcenter_close(vc);
    uv_close((uv_handle_t *)guard, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(loop), 0);
    unit_vcenter_free(vc);
}

#define ENV_HEAD                                                                                   \
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><soapenv:Envelope "                                 \
    "xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" "                                 \
    "xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\" "                                              \
    "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"><soapenv:Body>"
#define ENV_TAIL "</soapenv:Body></soapenv:Envelope>"

void unit_soap_reply(vmg_server_req *r, int status, const char *fmt, ...)
{
    char body[16384];
    int n = snprintf(body, sizeof(body), "%s", ENV_HEAD);
    va_list ap;

    va_start(ap, fmt);
    n += vsnprintf(body + n, sizeof(body) - (size_t)n, fmt, ap);
    va_end(ap);
    assert_true((size_t)n < sizeof(body));
    n += snprintf(body + n, sizeof(body) - (size_t)n, "%s", ENV_TAIL);
    assert_true((size_t)n < sizeof(body));
    vmg_server_respond(r, status, "text/xml; charset=utf-8", body, (size_t)n);
}

void unit_soap_fixture(vmg_server_req *r, int status, const char *name)
{
    size_t len;
    char *body = unit_fixture("soap", name, &len);

    vmg_server_respond(r, status, "text/xml; charset=utf-8", body, len);
    free(body);
}

bool unit_soap_session(vmg_server_req *r, const char *body)
{
    if (strstr(body, "<RetrieveServiceContent>")) {
        unit_soap_fixture(r, 200, "service_content.resp.xml");
    } else if (strstr(body, "<Login>")) {
        vmg_server_req_add_header(r, "Set-Cookie", "vmware_soap_session=s1; Path=/");
        unit_soap_fixture(r, 200, "login.resp.xml");
    } else if (strstr(body, "<Logout>")) {
        unit_soap_fixture(r, 200, "logout.resp.xml");
    } else if (strstr(body, "<CurrentTime>")) {
        unit_soap_fixture(r, 200, "current_time.resp.xml");
    } else {
        return false;
    }
    return true;
}

const char *unit_between(const char *body, const char *a, const char *b, char *buf, size_t size)
{
    const char *p = strstr(body, a), *q;

    buf[0] = '\0';
    if (!p)
        return buf;
    p += strlen(a);
    q = strstr(p, b);
    if (!q || (size_t)(q - p) >= size)
        return buf;
    memcpy(buf, p, (size_t)(q - p));
    buf[q - p] = '\0';
    return buf;
}

void unit_calls_add(struct unit_calls *c, const char *method, const char *detail)
{
    if (c->n < UNIT_CALLS_MAX)
        snprintf(c->at[c->n++], sizeof(c->at[0]), "%s %s", method, detail);
}

int unit_calls_count(const struct unit_calls *c, const char *what)
{
    size_t n = strlen(what);
    int count = 0;

    for (int i = 0; i < c->n; i++)
        count += strncmp(c->at[i], what, n) == 0 && (c->at[i][n] == '\0' || c->at[i][n] == ' ');
    return count;
}

void unit_calls_dump(const struct unit_calls *c)
{
    for (int i = 0; i < c->n; i++)
        fprintf(stderr, "# call %d: %s\n", i, c->at[i]);
}
