/* test_session.c: the vCenter session: VC_HOST forms, thumbprints, the
 * backoff schedule, and the session's behaviour against a fake vCenter (a
 * lib/server HTTPS server on the same loop answering with the SOAP
 * fixtures recorded from vcsim): login and cookie, a wrong password and
 * the retries, re-login after NotAuthenticated (once per call, one login
 * for many calls), keep-alive, logout, the TLS modes (CA file, pinned
 * thumbprint, system roots refused), and a long poll's patience: kept past
 * its timeout while vCenter answers CurrentTime (its caller told so),
 * given up when it does not, not given up for a CurrentTime that could not
 * be sent, given up at its patience in any case, and none when no longer
 * than the timeout. */
#include "tests/unit/unit.h"
#include "tests/unit/vcenter.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <uv.h>

#include "lib/err.h"
#include "lib/http.h"
#include "lib/server.h"
#include "lib/tlsgen.h"
#include "vsphere/session.h"

static char *load(const char *name, size_t *len)
{
    return unit_fixture("soap", name, len);
}

/* The next easy_init_failures requests cannot be started: curl_easy_init
 * fails, as it would out of memory (linked with --wrap=curl_easy_init). */
static int easy_init_failures;

CURL *__real_curl_easy_init(void);
CURL *__wrap_curl_easy_init(void);

CURL *__wrap_curl_easy_init(void)
{
    if (easy_init_failures > 0) {
        easy_init_failures--;
        return NULL;
    }
    return __real_curl_easy_init();
}

/* ---- Pure helpers ---- */

static void url_ok(const char *in, const char *want)
{
    char buf[VS_URL_MAX], err[256];

    assert_int_equal(vs_url_build(in, buf, sizeof(buf), err, sizeof(err)), 0);
    assert_string_equal(buf, want);
}

static void url_bad(const char *in, const char *needle)
{
    char buf[VS_URL_MAX], err[256] = "";

    assert_int_equal(vs_url_build(in, buf, sizeof(buf), err, sizeof(err)), VMG_ECONFIG);
    if (needle && !strstr(err, needle))
        fail_msg("error for \"%s\" is \"%s\", lacks \"%s\"", in ? in : "(null)", err, needle);
}

static void test_url_forms(void **state)
{
    (void)state;
    url_ok("vc.example.com", "https://vc.example.com:443/sdk");
    url_ok("vc.example.com:8443", "https://vc.example.com:8443/sdk");
    url_ok("127.0.0.1:37266", "https://127.0.0.1:37266/sdk");
    url_ok("https://vc.example.com", "https://vc.example.com:443/sdk");
    url_ok("https://vc.example.com/", "https://vc.example.com:443/sdk");
    url_ok("HTTPS://vc.example.com:9443/sdk", "https://vc.example.com:9443/sdk");
    url_ok("https://vc:1/custom/sdk", "https://vc:1/custom/sdk");
    url_ok("vc.example.com/sdk", "https://vc.example.com:443/sdk");
    url_ok("[::1]:8443", "https://[::1]:8443/sdk");
    url_ok("[fe80::1]", "https://[fe80::1]:443/sdk");
    url_ok("fe80::1", "https://[fe80::1]:443/sdk");
    url_ok("https://[::1]/sdk", "https://[::1]:443/sdk");
    url_ok("[fe80::1%252]:8443", "https://[fe80::1%252]:8443/sdk");
    url_ok("fe80::1%3", "https://[fe80::1%3]:443/sdk");
    /* An '@' in the path of a URL (a proxy's route) is no user name. */
    url_ok("https://proxy/vc@prod/sdk", "https://proxy:443/vc@prod/sdk");
    url_ok("https://proxy:8443/a@b", "https://proxy:8443/a@b");

    url_bad(NULL, "empty");
    url_bad("", "no host");
    url_bad("http://vc.example.com", "only https");
    url_bad("ftp://vc", "only https");
    url_bad("https://user:pw@vc.example.com", "VC_USER");
    url_bad("https://user@vc.example.com/a@b", "VC_USER");
    url_bad("user@vc.example.com", "VC_USER");
    url_bad("vc.example.com:0", "port");
    url_bad("vc.example.com:65536", "port");
    url_bad("vc.example.com:12x", "port");
    url_bad("vc.example.com:", "port");
    url_bad(":443", "no host");
    url_bad("vc example", "blank");
    url_bad("vc\x01", "control");
    url_bad("v$c", "invalid host");
    url_bad("[::1", "IPv6");
    url_bad("[::1]x", "IPv6");
    /* IPv6 characters that make no IPv6 address (curl would refuse the
     * URL at every login instead). */
    url_bad("63:38:AA:2E:EB:40:C3:50:A3:61:47:D8:55:D3:97:49", "IPv6");
    url_bad("[1:2:3:4:5:6:7:8:9]:443", "IPv6");
    url_bad("[:::]", "IPv6");
    url_bad("[fe80::1%2512345678901234567]", "IPv6");
    url_bad("[fe80::1%1:2]", "IPv6");
    url_bad("[fe80::1%]", "IPv6");
    url_bad("https://vc/sdk?x=1", "query");
}

/* Whatever is wrong with VC_HOST, the error never repeats user
 * information given in it, which may hold a password. */
static void test_url_errors_hide_user_information(void **state)
{
    static const char *const hosts[] = {
        "https://user:s3cret@vc.example.com",
        "http://user:s3cret@vc.example.com",
        "user:s3cret@vc.example.com:99999",
        "https://u:s3cret@vc/sdk?x=1",
        "u:s3cret@@vc",
        "https://u:s3cret@vc example",
        /* A scheme without its colon: the rest would be the URL's path,
         * sent in every request line and logged. */
        "https//user:s3cret@vc.example.com",
        "vc.example.com/user:s3cret@sdk",
    };
    char buf[VS_URL_MAX], err[256];

    (void)state;
    for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
        err[0] = '\0';
        assert_int_equal(vs_url_build(hosts[i], buf, sizeof(buf), err, sizeof(err)), VMG_ECONFIG);
        if (strstr(err, "s3cret") || !strstr(err, "***@"))
            fail_msg("error for \"%s\" is \"%s\"", hosts[i], err);
    }
}

static void test_url_too_long(void **state)
{
    char host[2000], buf[64], err[128];

    (void)state;
    memset(host, 'a', sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    assert_int_equal(vs_url_build(host, buf, sizeof(buf), err, sizeof(err)), VMG_ECONFIG);
    assert_non_null(strstr(err, "too long"));
    assert_int_equal(vs_url_build("vc.example.com", buf, 10, err, sizeof(err)), VMG_ECONFIG);
}

/* The session cookie goes back to vCenter in a Cookie header: one that
 * holds a control character (a CR would end that header line for some
 * servers) is refused, not sent. */
static void test_cookie_with_control_characters(void **state)
{
    static const char *const bad[] = {
        "vmware_soap_session=abc\rX-Injected: 1",
        "vmware_soap_session=\"52ab\"\x01; Path=/",
        "vmware_soap_session=a\tb; HttpOnly",
        "vmware_soap_session=ab\x7f",
    };
    char cookie[512];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cookie[0] = '\0';
        if (vs_session_cookie(bad[i], cookie, sizeof(cookie)) != VMG_EPARSE)
            fail_msg("cookie %zu was taken: \"%s\"", i, cookie);
    }
    assert_int_equal(vs_session_cookie(" vmware_soap_session=\"52ab\" ; Path=/; HttpOnly", cookie,
                                       sizeof(cookie)),
                     0);
    assert_string_equal(cookie, "vmware_soap_session=\"52ab\"");
    assert_int_equal(vs_session_cookie("other=1", cookie, sizeof(cookie)), 1);
    assert_int_equal(vs_session_cookie("vmware_soap_session=; Path=/", cookie, sizeof(cookie)),
                     VMG_EPARSE);
}

static void test_thumbprints(void **state)
{
    unsigned char out[VS_SHA256_LEN], want[VS_SHA256_LEN];
    char err[512];
    const char *colons = "63:38:AA:2E:EB:40:C3:50:A3:61:47:D8:55:D3:97:49:3A:9E:86:7D:3D:12:57:40:"
                         "99:33:E1:A0:E6:86:38:AD";
    const char *plain = "6338aa2eeb40c350a36147d855d397493a9e867d3d1257409933e1a0e68638ad";

    (void)state;
    for (size_t i = 0; i < VS_SHA256_LEN; i++)
        want[i] = 0;
    assert_int_equal(vs_thumbprint_parse(colons, out, err, sizeof(err)), 0);
    assert_int_equal(out[0], 0x63);
    assert_int_equal(out[31], 0xad);
    memcpy(want, out, sizeof(want));
    memset(out, 0, sizeof(out));
    assert_int_equal(vs_thumbprint_parse(plain, out, err, sizeof(err)), 0);
    assert_memory_equal(out, want, sizeof(want));

    /* SHA-1 is named as such. */
    assert_int_equal(vs_thumbprint_parse("6C:52:5A:AD:01:36:60:92:06:D4:01:48:2A:43:65:4E:27:"
                                         "28:35:2D",
                                         out, err, sizeof(err)),
                     VMG_ECONFIG);
    assert_non_null(strstr(err, "SHA-1"));
    /* Malformed ones. */
    const char *bad[] = {"",
                         "zz",
                         "63:38:AA",
                         "6:338:AA:2E",
                         "63::38",
                         ":63",
                         "63:",
                         "6338aa2eeb40c350a36147d855d397493a9e867d3d1257409933e1a0e68638ad00",
                         "6338aa2eeb40c350a36147d855d397493a9e867d3d1257409933e1a0e68638a"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memcpy(out, want, sizeof(out));
        assert_int_equal(vs_thumbprint_parse(bad[i], out, err, sizeof(err)), VMG_ECONFIG);
        assert_memory_equal(out, want, sizeof(out)); /* untouched */
    }
    assert_int_equal(vs_thumbprint_parse(NULL, out, err, sizeof(err)), VMG_ECONFIG);
}

static void test_backoff_schedule(void **state)
{
    const uint64_t want[] = {1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000};

    (void)state;
    for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        assert_int_equal(vs_backoff_ms(i + 1, 1000, 60000), want[i]);
    assert_int_equal(vs_backoff_ms(0, 1000, 60000), 1000);
    assert_int_equal(vs_backoff_ms(1000000, 1000, 60000), 60000);
    assert_int_equal(vs_backoff_ms(UINT32_MAX, 1000, 60000), 60000);
    assert_int_equal(vs_backoff_ms(3, 10, 25), 25);
    assert_string_equal(vs_state_name(VS_STATE_BACKOFF), "backoff");
    assert_string_equal(vs_state_name(VS_STATE_READY), "ready");
}

/* ---- A fake vCenter ---- */

#define MAX_STATES 64

struct fake {
    uv_loop_t loop;
    struct unit_vcenter vc; /* the fake vCenter and the client */
    vs_session *s;
    char ca_path[64];
    /* behaviour */
    bool wrong_password;
    bool always_not_auth;    /* CurrentTime refused even with the cookie */
    const char *login_fault; /* Login answered with this fault type, when set */
    int session_no;          /* the valid cookie is "sess-<n>" */
    bool silent;             /* CurrentTime is never answered */
    vmg_server_req *poll;    /* the WaitForUpdatesEx held, until answered */
    vmg_server_req *time;    /* the CurrentTime held (silent) */
    int polls, silent_times;
    /* what the server saw */
    int contents, logins, logouts, current_times, refused;
    char last_action[128];
    /* what the client saw */
    enum vs_state states[MAX_STATES];
    uint64_t retry[MAX_STATES];
    int state_errs[MAX_STATES];
    char last_msg[512];
    size_t nstates;
    int replies, reply_err[16];
    int kept;             /* times a long poll was said kept */
    uint64_t kept_ms[16]; /* how long it had waited then */
    char reply_fault[16][64];
    char reply_msg[16][512];
    int closed;
    bool timed_out;
    uv_timer_t guard;
};

static void respond_fixture(vmg_server_req *r, int status, const char *name)
{
    size_t len;
    char *body = load(name, &len);

    vmg_server_respond(r, status, "text/xml; charset=utf-8", body, len);
    free(body);
}

/* respond_login_fault answers with a SOAP fault of the given type, its
 * message naming the type and echoing the password (as an impostor could:
 * none of it may reach the session's messages). */
static void respond_login_fault(vmg_server_req *r, const char *type)
{
    char body[2048];
    int n = snprintf(body, sizeof(body),
                     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
                     "<soapenv:Envelope "
                     "xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" "
                     "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\">"
                     "<soapenv:Body><soapenv:Fault><faultcode>ServerFaultCode</faultcode>"
                     "<faultstring>%s happened, x%.500dsecret-pw</faultstring><detail>"
                     "<%sFault xmlns=\"urn:vim25\" xsi:type=\"%s\"></%sFault>"
                     "</detail></soapenv:Fault></soapenv:Body></soapenv:Envelope>",
                     type, 0, type, type, type);

    assert_true(n > 0 && (size_t)n < sizeof(body));
    vmg_server_respond(r, 500, "text/xml; charset=utf-8", body, (size_t)n);
}

/* on_held_abort answers a held request whose client left. */
static void on_held_abort(void *data, vmg_server_req *r)
{
    struct fake *f = data;

    if (f->poll == r)
        f->poll = NULL;
    if (f->time == r)
        f->time = NULL;
    vmg_server_respond(r, 500, "text/plain", "gone", 4);
}

static void fake_handler(void *data, vmg_server_req *r)
{
    struct fake *f = data;
    size_t len;
    const char *body = vmg_server_req_body(r, &len);
    const char *cookie = vmg_server_req_header(r, "Cookie");
    const char *action = vmg_server_req_header(r, "SOAPAction");
    char want[64];

    snprintf(f->last_action, sizeof(f->last_action), "%s", action ? action : "");
    snprintf(want, sizeof(want), "vmware_soap_session=sess-%d", f->session_no);
    if (strstr(body, "<RetrieveServiceContent>")) {
        f->contents++;
        respond_fixture(r, 200, "service_content.resp.xml");
    } else if (strstr(body, "<Login>")) {
        f->logins++;
        if (f->login_fault) {
            respond_login_fault(r, f->login_fault);
            return;
        }
        if (f->wrong_password || !strstr(body, "<password>secret-pw</password>")) {
            respond_fixture(r, 500, "fault_invalid_login.resp.xml");
            return;
        }
        f->session_no++;
        snprintf(want, sizeof(want), "vmware_soap_session=sess-%d; Path=/; HttpOnly",
                 f->session_no);
        vmg_server_req_add_header(r, "Set-Cookie", "other=1");
        vmg_server_req_add_header(r, "Set-Cookie", want);
        respond_fixture(r, 200, "login.resp.xml");
    } else if (strstr(body, "<Logout>")) {
        f->logouts++;
        respond_fixture(r, 200, "logout.resp.xml");
    } else if (strstr(body, "<WaitForUpdatesEx>")) {
        f->polls++;
        assert_null(f->poll);
        f->poll = r; /* the test answers it, or the client gives it up */
        vmg_server_req_on_abort(r, on_held_abort, f);
    } else if (strstr(body, "<CurrentTime>") && f->silent) {
        f->silent_times++;
        assert_null(f->time);
        f->time = r;
        vmg_server_req_on_abort(r, on_held_abort, f);
    } else if (strstr(body, "<CurrentTime>")) {
        f->current_times++;
        if (f->always_not_auth || !cookie || strcmp(cookie, want) != 0) {
            f->refused++;
            respond_fixture(r, 500, "fault_not_authenticated.resp.xml");
            return;
        }
        respond_fixture(r, 200, "current_time.resp.xml");
    } else {
        vmg_server_respond(r, 404, "text/plain", "no", 2);
    }
}

static void on_state(void *data, const struct vs_session_status *st)
{
    struct fake *f = data;

    if (f->nstates < MAX_STATES) {
        f->states[f->nstates] = st->state;
        f->retry[f->nstates] = st->retry_in_ms;
        f->state_errs[f->nstates] = st->err;
        f->nstates++;
    }
    snprintf(f->last_msg, sizeof(f->last_msg), "%s", st->message);
}

static void on_guard(uv_timer_t *t)
{
    struct fake *f = t->data;

    f->timed_out = true;
    uv_stop(&f->loop);
}

static void fake_setup(struct fake *f)
{
    FILE *cf;

    memset(f, 0, sizeof(*f));
    easy_init_failures = 0; /* none left over by a test that failed */
    assert_int_equal(uv_loop_init(&f->loop), 0);
    unit_vcenter_start(&f->vc, &f->loop, "fake-vcenter", fake_handler, f, 0);
    snprintf(f->ca_path, sizeof(f->ca_path), "/tmp/test_session_ca.%d.pem", (int)getpid());
    cf = fopen(f->ca_path, "w");
    assert_non_null(cf);
    fputs(f->vc.cert_pem, cf);
    fclose(cf);
    uv_timer_init(&f->loop, &f->guard);
    f->guard.data = f;
}

static void fake_session(struct fake *f, struct vs_session_config *cfg)
{
    char err[256];
    int e = 0;

    cfg->host = f->vc.host;
    if (!cfg->user)
        cfg->user = "vcuser@vsphere.local";
    if (!cfg->password)
        cfg->password = "secret-pw";
    if (!cfg->backoff_min_ms)
        cfg->backoff_min_ms = 10;
    if (!cfg->backoff_max_ms)
        cfg->backoff_max_ms = 40;
    f->s = vs_session_new(&f->loop, f->vc.http, cfg, &e, err, sizeof(err));
    if (!f->s)
        fail_msg("vs_session_new: %d %s", e, err);
    vs_session_set_state_cb(f->s, on_state, f);
}

/* run_to runs the loop until the count *n reaches want, failing after
 * 10 s. */
static void run_to(struct fake *f, const int *n, int want)
{
    uv_timer_start(&f->guard, on_guard, 10000, 0);
    while (*n < want && !f->timed_out)
        uv_run(&f->loop, UV_RUN_ONCE);
    uv_timer_stop(&f->guard);
    assert_false(f->timed_out);
}

/* run_until runs the loop until *flag (a count, from 0) holds. */
static void run_until(struct fake *f, const int *flag)
{
    run_to(f, flag, 1);
}

/* log_in starts the session and runs the loop until it is logged in,
 * failing after 10 s. */
static void log_in(struct fake *f)
{
    assert_int_equal(vs_session_start(f->s), 0);
    uv_timer_start(&f->guard, on_guard, 10000, 0);
    while (vs_session_state(f->s) != VS_STATE_READY && !f->timed_out)
        uv_run(&f->loop, UV_RUN_ONCE);
    uv_timer_stop(&f->guard);
    assert_false(f->timed_out);
}

static void on_session_closed(void *data)
{
    struct fake *f = data;

    f->closed = 1;
}

static void fake_teardown(struct fake *f)
{
    if (f->s) {
        vs_session_close(f->s, on_session_closed, f);
        f->s = NULL;
        uv_timer_start(&f->guard, on_guard, 10000, 0);
        while (!f->closed && !f->timed_out)
            uv_run(&f->loop, UV_RUN_ONCE);
        uv_timer_stop(&f->guard);
        assert_false(f->timed_out);
    }
    unit_vcenter_close(&f->vc);
    uv_close((uv_handle_t *)&f->guard, NULL);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    unlink(f->ca_path);
    unit_vcenter_free(&f->vc);
}

static void on_reply(void *data, const struct vs_reply *r)
{
    struct fake *f = data;
    int i = f->replies;

    if (i < 16) {
        f->reply_err[i] = r->err;
        snprintf(f->reply_fault[i], sizeof(f->reply_fault[i]), "%s",
                 r->fault ? r->fault->type : "");
        snprintf(f->reply_msg[i], sizeof(f->reply_msg[i]), "%s", r->message);
        if (r->err == 0) {
            char t[64];
            assert_int_equal(vim_decode_text(r->resp, t, sizeof(t)), 0);
            assert_true(strlen(t) > 10); /* a dateTime */
        } else {
            assert_true(strlen(r->message) > 0);
            assert_null(r->resp);
            /* VMG_EFAULT promises a fault to read (callers read its type). */
            if (r->err == VMG_EFAULT)
                assert_non_null(r->fault);
        }
    }
    f->replies++;
}

/* call_time_with sends a CurrentTime answered to cb(data); *ret the call. */
static void call_time_with(struct fake *f, vs_call_cb cb, void *data, vs_req **ret)
{
    char *buf = NULL;
    size_t len = 0;

    assert_int_equal(vim_req_current_time(&buf, &len), 0);
    assert_int_equal(vs_call(f->s, "CurrentTime", buf, len, NULL, cb, data, ret), 0);
}

static void call_time(struct fake *f)
{
    call_time_with(f, on_reply, f, NULL);
}

/* ---- Session tests ---- */

static void test_login_and_cookie(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {0};
    struct vs_session_stats st;
    char key[128];
    int want = 1;

    (void)state;
    fake_setup(&f);
    cfg.ca_file = f.ca_path;
    fake_session(&f, &cfg);
    assert_int_equal(vs_session_state(f.s), VS_STATE_IDLE);
    assert_null(vs_session_content(f.s));
    call_time(&f); /* the call waits behind the login it starts, from the loop */
    vs_session_stats(f.s, &st);
    assert_int_equal(st.waiting, 1);
    assert_int_equal(vs_session_state(f.s), VS_STATE_IDLE);
    uv_run(&f.loop, UV_RUN_NOWAIT);
    assert_int_equal(vs_session_state(f.s), VS_STATE_CONNECTING);
    run_until(&f, &f.replies);
    assert_int_equal(f.reply_err[0], 0);
    assert_int_equal(f.contents, 1);
    assert_int_equal(f.logins, 1);
    assert_int_equal(f.refused, 0); /* the cookie was sent */
    assert_int_equal(vs_session_state(f.s), VS_STATE_READY);
    assert_int_equal(vs_session_generation(f.s), 1);
    assert_non_null(vs_session_content(f.s));
    assert_string_equal(vs_session_content(f.s)->api_version, "6.5");
    /* SOAPAction follows the server's apiVersion. */
    assert_string_equal(f.last_action, "urn:vim25/6.5");
    vs_session_key(f.s, key, sizeof(key));
    assert_true(strlen(key) > 0);
    assert_int_equal(f.nstates, 2);
    assert_int_equal(f.states[0], VS_STATE_CONNECTING);
    assert_int_equal(f.states[1], VS_STATE_READY);
    /* A second call goes straight out with the same session. */
    call_time(&f);
    want = 2;
    while (f.replies < want)
        uv_run(&f.loop, UV_RUN_ONCE);
    assert_int_equal(f.reply_err[1], 0);
    assert_int_equal(f.logins, 1);
    vs_session_stats(f.s, &st);
    assert_int_equal(st.logins, 1);
    assert_int_equal(st.requests, 4);
    fake_teardown(&f);
    assert_int_equal(f.logouts, 1); /* a clean close logs out */
}

/* login_refused starts a session with a wrong password and one call, and
 * runs until the call fails. */
static void login_refused(struct fake *f, struct vs_session_config *cfg)
{
    cfg->password = "not-the-password";
    fake_setup(f);
    cfg->ca_file = f->ca_path;
    fake_session(f, cfg);
    call_time(f);
    run_until(f, &f->replies);
    assert_int_equal(f->reply_err[0], VMG_EAUTH);
}

static void test_wrong_password_retries(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {.refused_retry_ms = 30};
    struct vs_session_stats st;
    int backoffs = 0;

    (void)state;
    login_refused(&f, &cfg);
    assert_string_equal(f.reply_msg[0], "vCenter refused the login for user vcuser@vsphere.local: "
                                        "incorrect user name or password");
    assert_string_equal(f.last_msg, f.reply_msg[0]);
    /* It keeps trying, with the backoff doubling up to its maximum, and
     * never sooner than refused_retry_ms. */
    uv_timer_start(&f.guard, on_guard, 10000, 0);
    while (!f.timed_out) {
        backoffs = 0;
        for (size_t i = 0; i < f.nstates; i++)
            backoffs += f.states[i] == VS_STATE_BACKOFF;
        if (backoffs >= 5)
            break;
        uv_run(&f.loop, UV_RUN_ONCE);
    }
    uv_timer_stop(&f.guard);
    assert_false(f.timed_out);
    {
        const uint64_t want[] = {30, 30, 40, 40, 40};
        size_t k = 0;
        for (size_t i = 0; i < f.nstates; i++) {
            if (f.states[i] != VS_STATE_BACKOFF)
                continue;
            assert_int_equal(f.state_errs[i], VMG_EAUTH);
            assert_int_equal(f.retry[i], want[k]);
            k++;
            /* each backoff follows a login attempt */
            assert_int_equal(f.states[i - 1], VS_STATE_CONNECTING);
        }
        assert_int_equal(k, 5);
    }
    assert_true(f.logins >= 5);
    vs_session_stats(f.s, &st);
    assert_int_equal(st.logins, 0);
    assert_true(st.login_failures >= 5);
    fake_teardown(&f);
    assert_int_equal(f.logouts, 0); /* never logged in */
}

/* login_fault_gives starts a session whose Login vCenter answers with a
 * fault of the given type, and checks the error and sentence of the
 * session's state and of the call that waited for it (VMG_ETRANSPORT for a
 * VMG_EFAULT state: the login's fault is not the call's). */
static void login_fault_gives(const char *type, int want_err, const char *want_msg)
{
    int call_err = want_err == VMG_EFAULT ? VMG_ETRANSPORT : want_err;
    struct fake f;
    struct vs_session_config cfg = {0};

    fake_setup(&f);
    f.login_fault = type;
    cfg.ca_file = f.ca_path;
    fake_session(&f, &cfg);
    call_time(&f);
    run_until(&f, &f.replies);
    assert_int_equal(f.reply_err[0], call_err);
    assert_string_equal(f.reply_fault[0], "");
    assert_string_equal(f.reply_msg[0], want_msg);
    assert_null(strstr(f.reply_msg[0], "secret"));
    assert_int_equal(vs_session_state(f.s), VS_STATE_BACKOFF);
    assert_int_equal(f.state_errs[f.nstates - 1], want_err);
    assert_string_equal(f.last_msg, want_msg);
    /* Refused credentials are tried again after minutes (an account
     * lockout is near); a failing vCenter after the usual backoff. */
    assert_int_equal(f.retry[f.nstates - 1],
                     want_err == VMG_EAUTH ? VS_DEFAULT_REFUSED_RETRY_MS : 10);
    fake_teardown(&f);
}

/* Only the faults that refuse the credentials are VMG_EAUTH, which the
 * controller says at once and a person must mend; a vCenter failing a
 * login for another reason (a SystemError while its services start) is a
 * transient failure, which a short outage's grace holds. */
static void test_login_faults_that_refuse_and_that_pass(void **state)
{
    (void)state;
    login_fault_gives("PasswordExpired", VMG_EAUTH,
                      "vCenter refused the login for user vcuser@vsphere.local: "
                      "PasswordExpired");
    login_fault_gives("NoPermission", VMG_EAUTH,
                      "vCenter refused the login for user vcuser@vsphere.local: NoPermission");
    login_fault_gives("SystemError", VMG_EFAULT, "vCenter Login failed: SystemError");
    login_fault_gives("RequestCanceled", VMG_EFAULT, "vCenter Login failed: RequestCanceled");
    login_fault_gives("InvalidLocale", VMG_EFAULT, "vCenter Login failed: InvalidLocale");
    /* A type vim25 does not name is not repeated either. */
    login_fault_gives("secret", VMG_EFAULT, "vCenter Login failed: an unknown fault");
}

/* A rotated password (vs_session_set_password) is used at once by a
 * session waiting to retry a failed login, not after its backoff. */
static void test_new_password_logs_in_at_once(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {.backoff_min_ms = 600000, .backoff_max_ms = 600000};
    struct vs_session_stats st;

    (void)state;
    login_refused(&f, &cfg);
    assert_int_equal(vs_session_state(f.s), VS_STATE_BACKOFF);
    assert_int_equal(vs_session_set_password(f.s, ""), -EINVAL);
    assert_int_equal(vs_session_set_password(f.s, "secret-pw"), 0);
    call_time(&f);
    run_to(&f, &f.replies, 2);
    assert_int_equal(f.reply_err[1], 0);
    assert_int_equal(vs_session_state(f.s), VS_STATE_READY);
    /* The password in use again: nothing is done. */
    assert_int_equal(vs_session_set_password(f.s, "secret-pw"), 1);
    assert_int_equal(vs_session_state(f.s), VS_STATE_READY);
    vs_session_stats(f.s, &st);
    assert_int_equal(st.logins, 1);
    fake_teardown(&f);
}

/* A password rotated while a login with the old one is in flight: that
 * login's refusal is for the old password, and the new one is tried after
 * the shortest backoff, not after the minutes a refused password waits. */
static void test_new_password_during_a_login(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {.password = "not-the-password"};

    (void)state;
    fake_setup(&f);
    cfg.ca_file = f.ca_path;
    fake_session(&f, &cfg);
    call_time(&f);
    /* The Login with the old password has reached vCenter; its answer has
     * not reached the session yet. */
    run_until(&f, &f.logins);
    assert_int_equal(vs_session_state(f.s), VS_STATE_CONNECTING);
    assert_int_equal(vs_session_set_password(f.s, "secret-pw"), 0);
    run_until(&f, &f.replies);
    assert_int_equal(f.reply_err[0], VMG_EAUTH);
    assert_int_equal(f.retry[f.nstates - 1], 10);
    call_time(&f);
    run_to(&f, &f.replies, 2);
    assert_int_equal(f.reply_err[1], 0);
    assert_int_equal(vs_session_state(f.s), VS_STATE_READY);
    fake_teardown(&f);
}

static void test_relogin_after_not_authenticated(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {.insecure = true};
    int want;

    (void)state;
    fake_setup(&f);
    fake_session(&f, &cfg);
    call_time(&f);
    run_until(&f, &f.replies);
    assert_int_equal(f.reply_err[0], 0);
    /* The server forgets the session (terminated, expired, restarted):
     * three calls at once are refused, one login follows, all succeed. */
    f.session_no += 100;
    call_time(&f);
    call_time(&f);
    call_time(&f);
    want = 4;
    run_to(&f, &f.replies, want);
    for (int i = 1; i < 4; i++)
        assert_int_equal(f.reply_err[i], 0);
    assert_int_equal(f.logins, 2);
    assert_int_equal(f.refused, 3);
    assert_int_equal(vs_session_generation(f.s), 2);
    fake_teardown(&f);
}

static void test_not_authenticated_twice_fails(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {.insecure = true};

    (void)state;
    fake_setup(&f);
    f.always_not_auth = true;
    fake_session(&f, &cfg);
    call_time(&f);
    run_until(&f, &f.replies);
    /* Sent, refused, logged in again, sent once more, refused: reported. */
    assert_int_equal(f.reply_err[0], VMG_EFAULT);
    assert_string_equal(f.reply_fault[0], "NotAuthenticated");
    assert_int_equal(f.current_times, 2);
    assert_int_equal(f.logins, 2);
    fake_teardown(&f);
}

/* on_reply_again answers a call and, while chaining, sends the next at
 * once, as busy callers do. */
static bool chaining;

static void on_reply_again(void *data, const struct vs_reply *r)
{
    struct fake *f = data;

    on_reply(f, r);
    if (chaining && f->replies < 1000)
        call_time_with(f, on_reply_again, f, NULL);
}

/* A vCenter that takes every login and then says NotAuthenticated to every
 * call is not logged in to once per call: after two sessions in a row
 * refused at once, the next login waits for the backoff, growing. */
static void test_not_authenticated_logins_back_off(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {.insecure = true, .backoff_min_ms = 100, .backoff_max_ms = 400};
    uv_timer_t window;

    (void)state;
    fake_setup(&f);
    f.always_not_auth = true;
    fake_session(&f, &cfg);
    chaining = true;
    call_time_with(&f, on_reply_again, &f, NULL);
    /* One second of calls, each sent as the one before is answered. */
    uv_timer_init(&f.loop, &window);
    window.data = &f;
    uv_timer_start(&window, on_guard, 1000, 0);
    while (!f.timed_out)
        uv_run(&f.loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&window, NULL);
    f.timed_out = false;
    chaining = false;
    /* Two logins, then one after 100, 200, 400 ms...: a handful, where one
     * per call made hundreds. */
    assert_true(f.replies >= 3);
    assert_true(f.logins <= 6);
    assert_string_equal(f.reply_fault[1], "NotAuthenticated");
    fake_teardown(&f);
}

static void test_keepalive_when_idle(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {.insecure = true, .keepalive_ms = 30};
    struct vs_session_stats st;
    int two = 0;

    (void)state;
    fake_setup(&f);
    fake_session(&f, &cfg);
    assert_int_equal(vs_session_start(f.s), 0);
    /* Logged in and idle: CurrentTime is sent by the session itself. */
    run_to(&f, &f.current_times, 2);
    two = f.current_times;
    assert_int_equal(two, 2);
    assert_int_equal(f.replies, 0);
    vs_session_stats(f.s, &st);
    assert_true(st.keepalives >= 2);
    assert_int_equal(f.refused, 0);
    fake_teardown(&f);
}

static void on_kept(void *data, uint64_t waited_ms)
{
    struct fake *f = data;

    if (f->kept < 16)
        f->kept_ms[f->kept] = waited_ms;
    f->kept++;
}

/* long_poll_for sends a WaitForUpdatesEx with the options of a long poll
 * of no wait (its timeout is the call timeout), told when it is kept, and
 * a patience of patience_ms (0: the long poll's) and returns them. */
static struct vs_call_opts long_poll_for(struct fake *f, uint64_t patience_ms)
{
    struct vim_moref pc;
    struct vs_call_opts o = vs_long_poll_opts(f->s, 0);
    char *buf = NULL;
    size_t len = 0;

    o.kept = on_kept;
    if (patience_ms)
        o.patience_ms = patience_ms;
    assert_int_equal(vim_moref_set(&pc, "PropertyCollector", "pc-1"), 0);
    assert_int_equal(vim_req_wait_for_updates_ex(&pc, "1", 0, 100, &buf, &len), 0);
    assert_int_equal(vs_call(f->s, "WaitForUpdatesEx", buf, len, &o, on_reply, f, NULL), 0);
    return o;
}

static struct vs_call_opts long_poll(struct fake *f)
{
    return long_poll_for(f, 0);
}

/* answer_poll answers the long poll held (with any body: the caller reads
 * nothing of it). */
static void answer_poll(struct fake *f)
{
    assert_non_null(f->poll);
    respond_fixture(f->poll, 200, "current_time.resp.xml");
    f->poll = NULL;
}

/* A long poll past its timeout while vCenter answers CurrentTime: still
 * waited for (vCenter computes its answer), its caller told each time with
 * how long it has waited, and its late answer is the caller's; it was sent
 * once. */
static void test_long_poll_kept_while_vcenter_answers(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {.insecure = true, .call_timeout_ms = 200};
    struct vs_session_stats st;
    struct vs_call_opts o;

    (void)state;
    fake_setup(&f);
    fake_session(&f, &cfg);
    o = long_poll(&f);
    assert_int_equal(o.timeout_ms, 200);
    assert_int_equal(o.patience_ms, 200 * (1 + VS_LONG_POLL_PATIENCE));
    /* Kept three times: 600 ms and more, three times the timeout. */
    uv_timer_start(&f.guard, on_guard, 10000, 0);
    while (f.kept < 3 && f.replies == 0 && !f.timed_out)
        uv_run(&f.loop, UV_RUN_ONCE);
    uv_timer_stop(&f.guard);
    assert_false(f.timed_out);
    assert_int_equal(f.replies, 0);
    for (int i = 0; i < 3; i++)
        assert_true(f.kept_ms[i] >= 200 * (uint64_t)(i + 1));
    answer_poll(&f);
    run_until(&f, &f.replies);
    assert_int_equal(f.reply_err[0], 0);
    assert_int_equal(f.polls, 1);
    vs_session_stats(f.s, &st);
    assert_true(st.probes >= 3);
    assert_int_equal(f.current_times, (int)st.probes);
    assert_true(f.kept >= 3 && f.kept <= (int)st.probes);
    assert_int_equal(st.keepalives, 0);
    assert_int_equal(f.refused, 0);
    fake_teardown(&f);
}

/* A long poll past its timeout when vCenter answers nothing: given up once
 * the CurrentTime asked then is not answered either (not at its patience),
 * and the caller is told so. */
static void test_long_poll_given_up_when_vcenter_is_silent(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {.insecure = true, .call_timeout_ms = 200};
    struct vs_session_stats st;

    (void)state;
    fake_setup(&f);
    f.silent = true;
    fake_session(&f, &cfg);
    (void)long_poll(&f);
    run_until(&f, &f.replies);
    assert_int_equal(f.reply_err[0], VMG_ETRANSPORT);
    assert_non_null(strstr(f.reply_msg[0], "vCenter WaitForUpdatesEx failed: "));
    assert_non_null(strstr(f.reply_msg[0], "nor to a CurrentTime then (vCenter CurrentTime "
                                           "failed: "));
    assert_int_equal(f.polls, 1);
    assert_int_equal(f.silent_times, 1);
    assert_int_equal(f.kept, 0);
    vs_session_stats(f.s, &st);
    assert_int_equal(st.probes, 1);
    /* The session goes on: a call after it is answered. */
    f.silent = false;
    call_time(&f);
    run_to(&f, &f.replies, 2);
    assert_int_equal(f.reply_err[1], 0);
    fake_teardown(&f);
}

/* A long poll that never answers, with vCenter answering CurrentTime all
 * along (a connection lost without a word, a vCenter stuck on it): given
 * up at its patience, as timed out. */
static void test_long_poll_patience_has_an_end(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {.insecure = true, .call_timeout_ms = 200};
    struct vs_session_stats st;
    struct vs_call_opts o;
    uint64_t t0;

    (void)state;
    fake_setup(&f);
    fake_session(&f, &cfg);
    log_in(&f);
    uv_update_time(&f.loop);
    t0 = uv_now(&f.loop);
    o = long_poll(&f);
    run_until(&f, &f.replies);
    assert_int_equal(f.reply_err[0], VMG_ETRANSPORT);
    assert_null(strstr(f.reply_msg[0], "CurrentTime"));
    assert_non_null(strstr(f.reply_msg[0], "imed out"));
    assert_true(uv_now(&f.loop) - t0 >= o.patience_ms);
    vs_session_stats(f.s, &st);
    assert_true(st.probes >= 2);
    assert_int_equal(f.current_times, (int)st.probes);
    assert_int_equal(f.polls, 1);
    fake_teardown(&f);
}

/* A long poll past its timeout when the CurrentTime cannot be started (a
 * local failure, not vCenter's): not given up for it; the CurrentTime is
 * asked again a second later, and once vCenter answers it the long poll is
 * kept. */
static void test_long_poll_kept_when_a_current_time_cannot_be_sent(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {.insecure = true, .call_timeout_ms = 200};
    struct vs_session_stats st;

    (void)state;
    fake_setup(&f);
    fake_session(&f, &cfg);
    log_in(&f);
    (void)long_poll_for(&f, 5000);
    easy_init_failures = 1; /* the first CurrentTime's */
    run_to(&f, &f.kept, 1);
    assert_int_equal(easy_init_failures, 0);
    assert_int_equal(f.replies, 0);
    /* The timeout, then the second's wait before the one sent. */
    assert_true(f.kept_ms[0] >= 200 + 1000);
    vs_session_stats(f.s, &st);
    assert_int_equal(st.probes, 1);
    assert_int_equal(f.current_times, 1);
    answer_poll(&f);
    run_until(&f, &f.replies);
    assert_int_equal(f.reply_err[0], 0);
    assert_int_equal(f.polls, 1);
    fake_teardown(&f);
}

/* A patience no longer than the call's timeout is none: the call fails at
 * its timeout, as timed out, with no CurrentTime asked. */
static void test_patience_within_the_timeout_is_none(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {.insecure = true, .call_timeout_ms = 200};
    struct vs_call_opts o = {.patience_ms = 200, .kept = on_kept};
    struct vs_session_stats st;
    struct vim_moref pc;
    char *buf = NULL;
    size_t len = 0;

    (void)state;
    fake_setup(&f);
    fake_session(&f, &cfg);
    assert_int_equal(vim_moref_set(&pc, "PropertyCollector", "pc-1"), 0);
    assert_int_equal(vim_req_wait_for_updates_ex(&pc, "1", 0, 100, &buf, &len), 0);
    assert_int_equal(vs_call(f.s, "WaitForUpdatesEx", buf, len, &o, on_reply, &f, NULL), 0);
    run_until(&f, &f.replies);
    assert_int_equal(f.reply_err[0], VMG_ETRANSPORT);
    assert_non_null(strstr(f.reply_msg[0], "imed out"));
    assert_null(strstr(f.reply_msg[0], "CurrentTime"));
    vs_session_stats(f.s, &st);
    assert_int_equal(st.probes, 0);
    assert_int_equal(f.current_times, 0);
    assert_int_equal(f.kept, 0);
    fake_teardown(&f);
}

static void test_tls_modes(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {0};
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char tp[128], bad[128];
    BIO *bio;
    X509 *x;

    (void)state;
    /* System roots: the self-signed certificate is refused. */
    fake_setup(&f);
    fake_session(&f, &cfg);
    call_time(&f);
    run_until(&f, &f.replies);
    assert_int_equal(f.reply_err[0], VMG_ETRANSPORT);
    assert_non_null(strstr(f.reply_msg[0], "certificate"));
    assert_int_equal(f.contents, 0);

    /* The thumbprint of that certificate: accepted. */
    bio = BIO_new_mem_buf(f.vc.cert_pem, -1);
    x = PEM_read_bio_X509(bio, NULL, NULL, NULL);
    assert_non_null(x);
    assert_int_equal(X509_digest(x, EVP_sha256(), md, &mdlen), 1);
    X509_free(x);
    BIO_free(bio);
    assert_int_equal(mdlen, 32);
    for (unsigned i = 0; i < mdlen; i++)
        snprintf(tp + 3 * i, sizeof(tp) - 3 * i, "%02X%s", md[i], i + 1 < mdlen ? ":" : "");
    vs_session_close(f.s, NULL, NULL);
    f.s = NULL;
    f.replies = 0;
    cfg = (struct vs_session_config){.thumbprint = tp};
    fake_session(&f, &cfg);
    call_time(&f);
    run_until(&f, &f.replies);
    assert_int_equal(f.reply_err[0], 0);

    /* Another thumbprint: refused. */
    vs_session_close(f.s, NULL, NULL);
    f.s = NULL;
    f.replies = 0;
    snprintf(bad, sizeof(bad), "%s", tp);
    bad[0] = bad[0] == '0' ? '1' : '0';
    cfg = (struct vs_session_config){.thumbprint = bad};
    fake_session(&f, &cfg);
    call_time(&f);
    run_until(&f, &f.replies);
    assert_int_equal(f.reply_err[0], VMG_ETRANSPORT);
    fake_teardown(&f);
}

struct perform {
    CURL *e;
    CURLcode rc;
    volatile int done;
};

static void *perform(void *arg)
{
    struct perform *p = arg;

    p->rc = curl_easy_perform(p->e);
    p->done = 1;
    return NULL;
}

static size_t discard(char *p, size_t size, size_t n, void *u)
{
    (void)p;
    (void)u;
    return size * n;
}

/* With --vc-ca-file, that CA is the only one trusted, by the session's
 * requests and by those it prepares (the REST client's): a vCenter whose
 * certificate another CA signed fails, even one in the system's CA folder
 * (here a folder of the test's, holding the fake vCenter's). */
static void test_ca_file_replaces_the_system_trust(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {0};
    const char *const sans[] = {"other.test"};
    char *other = NULL, *other_key = NULL, capath[64], hashed[128], other_path[64], url[300];
    struct perform p = {0};
    pthread_t th;
    FILE *fp;
    BIO *b;
    X509 *x;

    (void)state;
    fake_setup(&f);
    snprintf(capath, sizeof(capath), "/tmp/test_session_capath.%d", (int)getpid());
    assert_int_equal(mkdir(capath, 0700), 0);
    b = BIO_new_mem_buf(f.vc.cert_pem, -1);
    x = PEM_read_bio_X509(b, NULL, NULL, NULL);
    assert_non_null(x);
    snprintf(hashed, sizeof(hashed), "%s/%08lx.0", capath, X509_subject_name_hash(x));
    X509_free(x);
    BIO_free(b);
    fp = fopen(hashed, "w");
    assert_non_null(fp);
    fputs(f.vc.cert_pem, fp);
    fclose(fp);
    assert_int_equal(vmg_tls_selfsigned("other.test", sans, 1, &other, &other_key), 0);
    snprintf(other_path, sizeof(other_path), "/tmp/test_session_other.%d.pem", (int)getpid());
    fp = fopen(other_path, "w");
    assert_non_null(fp);
    fputs(other, fp);
    fclose(fp);
    cfg.ca_file = other_path;
    fake_session(&f, &cfg);

    p.e = curl_easy_init();
    assert_non_null(p.e);
    snprintf(url, sizeof(url), "https://%s/sdk", f.vc.host);
    curl_easy_setopt(p.e, CURLOPT_URL, url);
    curl_easy_setopt(p.e, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(p.e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(p.e, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(p.e, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(p.e, CURLOPT_CAPATH, capath);
    vs_session_prepare_tls(f.s, p.e);
    /* The fake vCenter answers on this loop: curl blocks in a thread. */
    assert_int_equal(pthread_create(&th, NULL, perform, &p), 0);
    for (int i = 0; i < 10000 && !p.done; i++) {
        uv_run(&f.loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    pthread_join(th, NULL);
    curl_easy_cleanup(p.e);
    assert_int_equal(p.rc, CURLE_PEER_FAILED_VERIFICATION);
    unlink(hashed);
    rmdir(capath);
    unlink(other_path);
    free(other);
    free(other_key);
    fake_teardown(&f);
}

static void on_count(void *data)
{
    (*(int *)data)++;
}

/* A reference keeps a closed session's memory for the client it prepares
 * transfers for (the REST client's logout at close, after the session's
 * own): prepared after the close, read from the session's trust; the
 * session's closed callback comes with the last reference. */
static void test_reference_outlives_close(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {0};
    CURL *e;
    int closed_calls = 0;

    (void)state;
    fake_setup(&f);
    cfg.ca_file = f.ca_path;
    fake_session(&f, &cfg);
    call_time(&f);
    run_until(&f, &f.replies); /* logged in */
    vs_session_ref(f.s);
    vs_session_close(f.s, on_count, &closed_calls);
    for (int i = 0; i < 200; i++) {
        uv_run(&f.loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    assert_int_equal(f.logouts, 1);
    assert_int_equal(closed_calls, 0);
    e = curl_easy_init();
    assert_non_null(e);
    vs_session_prepare_tls(f.s, e); /* ASan: the session is still there */
    curl_easy_cleanup(e);
    vs_session_unref(f.s);
    assert_int_equal(closed_calls, 1);
    f.s = NULL;
    fake_teardown(&f);
}

static void test_config_errors(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {0};
    char err[256];
    int e = 0;

    (void)state;
    fake_setup(&f);
    cfg.host = f.vc.host;
    cfg.user = "u";
    cfg.password = "secret-pw";
    cfg.ca_file = "/nonexistent/ca.pem";
    assert_null(vs_session_new(&f.loop, f.vc.http, &cfg, &e, err, sizeof(err)));
    assert_int_equal(e, VMG_ECONFIG);
    assert_non_null(strstr(err, "/nonexistent/ca.pem"));
    cfg.ca_file = NULL;
    cfg.thumbprint = "12:34";
    assert_null(vs_session_new(&f.loop, f.vc.http, &cfg, &e, err, sizeof(err)));
    assert_int_equal(e, VMG_ECONFIG);
    cfg.thumbprint = NULL;
    cfg.password = "";
    assert_null(vs_session_new(&f.loop, f.vc.http, &cfg, &e, err, sizeof(err)));
    assert_non_null(strstr(err, "VC_PASS"));
    cfg.password = "secret-pw";
    cfg.user = NULL;
    assert_null(vs_session_new(&f.loop, f.vc.http, &cfg, &e, err, sizeof(err)));
    assert_non_null(strstr(err, "VC_USER"));
    cfg.user = "u";
    cfg.host = "http://plain";
    assert_null(vs_session_new(&f.loop, f.vc.http, &cfg, &e, err, sizeof(err)));
    assert_non_null(strstr(err, "https"));
    fake_teardown(&f);
}

static void test_close_cancels_waiting_calls(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {.insecure = true};
    (void)state;
    fake_setup(&f);
    fake_session(&f, &cfg);
    call_time(&f);
    call_time(&f);
    /* Closed before the login completes: both calls end, canceled, before
     * the close returns; new calls are refused. */
    vs_session_close(f.s, on_session_closed, &f);
    assert_int_equal(f.replies, 2);
    assert_int_equal(f.reply_err[0], VMG_ECANCELED);
    assert_int_equal(f.reply_err[1], VMG_ECANCELED);
    f.s = NULL;
    run_until(&f, &f.closed);
    fake_teardown(&f);
}

/* Two calls wait for a login that fails; the first's callback cancels the
 * second (as the task tracker does when it drops its collector), whose
 * callback runs then, inside vs_req_cancel, once. The cancel did nothing
 * before: the failed login's loop had taken both out of the queue. */
struct two {
    struct fake *f;
    vs_req *second;
    int first_calls, second_calls, second_err;
    bool in_cancel, second_in_cancel;
};

static void on_second(void *data, const struct vs_reply *r)
{
    struct two *t = data;

    t->second_calls++;
    t->second_err = r->err;
    t->second_in_cancel = t->in_cancel;
}

static void on_first_cancels_second(void *data, const struct vs_reply *r)
{
    struct two *t = data;

    (void)r;
    t->first_calls++;
    t->in_cancel = true;
    vs_req_cancel(t->second);
    t->in_cancel = false;
}

static void test_cancel_while_a_failed_login_fails_the_calls(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {.password = "not-the-password"};
    struct two t = {.f = &f};

    (void)state;
    fake_setup(&f);
    cfg.ca_file = f.ca_path;
    fake_session(&f, &cfg);
    call_time_with(&f, on_first_cancels_second, &t, NULL);
    call_time_with(&f, on_second, &t, &t.second);
    run_until(&f, &t.first_calls);
    assert_int_equal(t.second_calls, 1);
    assert_true(t.second_in_cancel);
    assert_int_equal(t.second_err, VMG_ECANCELED);
    assert_int_equal(vs_session_state(f.s), VS_STATE_BACKOFF);
    fake_teardown(&f);
    assert_int_equal(t.first_calls, 1);
    assert_int_equal(t.second_calls, 1);
}

/* The first call of a session starts its login; a login that cannot even
 * start (here: its first request cannot be made) fails that call later, from the
 * loop, as vs_call promises, with the call handed back still valid until
 * then. It failed the call inside vs_call, which then handed back the
 * freed call. */
static void on_reply_flag(void *data, const struct vs_reply *r)
{
    struct two *t = data;

    t->first_calls++;
    t->second_err = r->err;
    t->second = NULL; /* as callers forget their call */
}

static void test_first_call_never_answered_inside_vs_call(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {.backoff_min_ms = 60000, .backoff_max_ms = 60000};
    struct two t = {.f = &f};

    (void)state;
    fake_setup(&f);
    cfg.ca_file = f.ca_path;
    fake_session(&f, &cfg);
    easy_init_failures = 1; /* the login's RetrieveServiceContent */
    call_time_with(&f, on_reply_flag, &t, &t.second);
    assert_int_equal(t.first_calls, 0);
    assert_non_null(t.second);
    /* (Nothing else wakes the loop: the failure comes from a timer.) */
    for (int k = 0; k < 100 && !t.first_calls; k++)
        uv_run(&f.loop, UV_RUN_NOWAIT);
    assert_int_equal(t.first_calls, 1);
    assert_null(t.second);
    assert_true(t.second_err < 0);
    assert_int_equal(vs_session_state(f.s), VS_STATE_BACKOFF);
    fake_teardown(&f);
    assert_int_equal(t.first_calls, 1);
}

static void test_cancel_one_call(void **state)
{
    struct fake f;
    struct vs_session_config cfg = {.insecure = true};
    char *buf = NULL;
    size_t len = 0;
    vs_req *q = NULL;

    (void)state;
    fake_setup(&f);
    fake_session(&f, &cfg);
    call_time_with(&f, on_reply, &f, &q);
    vs_req_cancel(q);
    assert_int_equal(f.replies, 1);
    assert_int_equal(f.reply_err[0], VMG_ECANCELED);
    call_time(&f);
    run_to(&f, &f.replies, 2);
    assert_int_equal(f.reply_err[1], 0);
    /* Bad arguments: refused, the buffer freed. */
    assert_int_equal(vs_call(f.s, "X", NULL, 0, NULL, on_reply, &f, NULL), -EINVAL);
    assert_int_equal(vim_req_current_time(&buf, &len), 0);
    assert_int_equal(vs_call(f.s, "X", buf, len, NULL, NULL, &f, NULL), -EINVAL);
    fake_teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_forms),
        cmocka_unit_test(test_url_errors_hide_user_information),
        cmocka_unit_test(test_url_too_long),
        cmocka_unit_test(test_cookie_with_control_characters),
        cmocka_unit_test(test_thumbprints),
        cmocka_unit_test(test_backoff_schedule),
        cmocka_unit_test(test_login_and_cookie),
        cmocka_unit_test(test_wrong_password_retries),
        cmocka_unit_test(test_login_faults_that_refuse_and_that_pass),
        cmocka_unit_test(test_new_password_logs_in_at_once),
        cmocka_unit_test(test_new_password_during_a_login),
        cmocka_unit_test(test_relogin_after_not_authenticated),
        cmocka_unit_test(test_not_authenticated_twice_fails),
        cmocka_unit_test(test_not_authenticated_logins_back_off),
        cmocka_unit_test(test_keepalive_when_idle),
        cmocka_unit_test(test_long_poll_kept_while_vcenter_answers),
        cmocka_unit_test(test_long_poll_kept_when_a_current_time_cannot_be_sent),
        cmocka_unit_test(test_patience_within_the_timeout_is_none),
        cmocka_unit_test(test_long_poll_given_up_when_vcenter_is_silent),
        cmocka_unit_test(test_long_poll_patience_has_an_end),
        cmocka_unit_test(test_tls_modes),
        cmocka_unit_test(test_ca_file_replaces_the_system_trust),
        cmocka_unit_test(test_reference_outlives_close),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_close_cancels_waiting_calls),
        cmocka_unit_test(test_cancel_one_call),
        cmocka_unit_test(test_cancel_while_a_failed_login_fails_the_calls),
        cmocka_unit_test(test_first_call_never_answered_inside_vs_call),
    };
    int r;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    r = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return r;
}
