/* fuzz_cookie.c: libFuzzer target for the session credentials vCenter
 * hands out: the header lines of a response as the HTTP client keeps them
 * (lib/http.c), the SOAP session cookie of a Login answer
 * (vmware_soap_session, vs_session_cookie) and the REST session id of a
 * POST /api/session answer (vs_rest_parse_string). Each input is a header
 * block, one line a header, then an empty line and the body.
 *
 * Both credentials are sent back in request headers (Cookie,
 * vmware-api-session-id): what is taken must hold no control character, so
 * that an answer cannot smuggle a header into the requests that follow.
 *
 * fuzz-sources: vsphere/endpoint.c
 * fuzz-sources: vsphere/rest_json.c vsphere/rest_tags.c
 * fuzz-sources: lib/jsonbound.c lib/jsonwipe.c
 * fuzz-sources: lib/http.c lib/err.c lib/log.c lib/str.c lib/secretfile.c lib/file.c
 * fuzz-sources: vsphere/session.c vsphere/rest.c vsphere/soap.c vsphere/vim.c
 * fuzz-sources: lib/buf.c lib/backoff.c lib/bucket.c lib/clock.c lib/b64.c
 * fuzz-seeds: tests/unit/fixtures/rest/session.json tests/unit/fixtures/rest/session_get.json
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/http.h"
#include "vsphere/rest.h"
#include "vsphere/session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void no_controls(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            abort();
}

static void check_cookie(const char *v)
{
    char cookie[512];
    size_t n;
    int r;

    memset(cookie, 'x', sizeof(cookie));
    r = vs_session_cookie(v, cookie, sizeof(cookie));
    if (r == 1 || r == VMG_EPARSE)
        return;
    if (r != 0)
        abort();
    n = strnlen(cookie, sizeof(cookie));
    if (n == sizeof(cookie) || strncmp(cookie, "vmware_soap_session=", 20) != 0 || n <= 20 ||
        strchr(cookie, ';') || cookie[n - 1] == ' ' || cookie[n - 1] == '\t')
        abort();
    no_controls(cookie);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char status[] = "HTTP/1.1 200 OK\r\n";
    const char *p = (const char *)data, *end = p + size, *body;
    char id[VS_REST_ID_MAX + 1];
    size_t body_len;
    vmg_http_xfer *x;
    int err = 0;

    if (size > 128 * 1024)
        return 0;
    x = vmg_http_testing_xfer(64 * 1024, NULL, NULL);
    if (!x)
        return 0;
    err = vmg_http_testing_header(x, status, sizeof(status) - 1);
    /* Header lines, each with its "\n" as curl hands it, up to an empty one. */
    while (p < end && err == 0) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        bool blank = n == 1 || (n == 2 && p[0] == '\r');

        /* curl (7.88 and later) fails a transfer whose header holds a NUL
         * byte before the header callback sees it. */
        if (memchr(p, '\0', n)) {
            vmg_http_testing_xfer_free(x);
            return 0;
        }
        err = vmg_http_testing_header(x, p, n);
        p += n;
        if (blank)
            break;
    }
    if (err == 0 && p < end)
        err = vmg_http_testing_body(x, 200, p, (size_t)(end - p));
    if (err == 0)
        err = vmg_http_testing_end(x, &body, &body_len);
    if (err != 0 && err != VMG_ETOOBIG)
        abort();
    if (err == 0) {
        const char *v;

        for (size_t i = 0; (v = vmg_http_xfer_header_nth(x, "set-cookie", i)) != NULL; i++) {
            if (i >= VMG_HTTP_MAX_HEADERS)
                abort();
            check_cookie(v);
        }
        /* Values come without their leading blanks (trailing ones are cut
         * at the line's end, which a NUL byte may hide from strlen). */
        if ((v = vmg_http_xfer_header(x, "content-type")) != NULL && (v[0] == ' ' || v[0] == '\t'))
            abort();
        if (vs_rest_parse_string(body, body_len, id, sizeof(id)) == 0) {
            if (!vs_rest_valid_id(id))
                abort();
            no_controls(id);
        }
    }
    /* The whole input as one Set-Cookie value, too. */
    if (size < 2048) {
        char v[2048];

        memcpy(v, data, size);
        v[size] = '\0';
        check_cookie(v);
    }
    vmg_http_testing_xfer_free(x);
    return 0;
}
