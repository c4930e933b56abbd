/* fuzz_url.c: libFuzzer target for the URLs the operator builds from what
 * it is given: VC_HOST into the SDK URL (vs_url_build), the certificate
 * pin (vs_thumbprint_parse), Kubernetes API paths and percent-escaped
 * query values (kube_path, kube_query_add; a resourceVersion from the
 * server goes into the watch URL so), and the vCenter tag name of a group
 * and the ids put in REST URLs (naming_tag, vs_rest_valid_id).
 *
 * An input is up to eight fields, one a line: VC_HOST, then group,
 * version, namespace, plural, name, subresource, and a query value. What
 * is built must parse back (curl's URL parser for the SDK URL; decoding
 * for a query value), hold no byte that would change the request, and an
 * error must not repeat a password given in VC_HOST.
 *
 * fuzz-sources: vsphere/endpoint.c
 * fuzz-sources: vsphere/session.c vsphere/rest.c vsphere/rest_json.c vsphere/rest_tags.c
 * fuzz-sources: lib/jsonbound.c
 * fuzz-sources: vsphere/soap.c vsphere/vim.c controller/naming.c lib/hex.c
 * fuzz-sources: kube/kube.c lib/jsonarena.c lib/http.c lib/err.c lib/log.c lib/str.c
 * fuzz-sources: kube/api.c
 * fuzz-sources: lib/secretfile.c kube/kubeconfig.c lib/file.c
 * fuzz-sources: kube/cred.c kube/exec.c lib/jsonwipe.c kube/kfile.c
 * fuzz-sources: lib/buf.c lib/backoff.c lib/bucket.c lib/clock.c lib/b64.c
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "controller/naming.h"
#include "kube/kube.h"
#include "lib/err.h"
#include "vsphere/rest.h"
#include "vsphere/session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FIELDS 8

static void printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s <= ' ' || (unsigned char)*s >= 0x7f)
            abort();
}

static void check_sdk_url(const char *host)
{
    char url[VS_URL_MAX], err[256], *part = NULL;
    const char *scheme = strstr(host, "://"), *at = strrchr(host, '@');
    CURLU *u;
    int r;

    err[0] = '\0';
    r = vs_url_build(host, url, sizeof(url), err, sizeof(err));
    if (r != 0) {
        if (r != VMG_ECONFIG || !err[0])
            abort();
        /* User information (before the last '@') may hold a password:
         * the error may show it only where VC_HOST shows it with the user
         * information masked ("***") and quoted, e.g. the same text after
         * the '@', or the mask's '*' followed by a host and the closing
         * quote that end the secret. */
        if (at) {
            const char *from = scheme && scheme < at ? scheme + 3 : host;
            size_t n = (size_t)(at - from);
            size_t mlen = strlen(host) + 6;
            char secret[256], *masked = malloc(mlen);

            if (masked && n >= 4 && n < sizeof(secret)) {
                memcpy(secret, from, n);
                secret[n] = '\0';
                snprintf(masked, mlen, "\"%.*s***%s\"", (int)(from - host), host, at);
                if (strpbrk(secret, "!$%&=") && !strstr(masked, secret) && strstr(err, secret))
                    abort();
            }
            free(masked);
        }
        return;
    }
    /* No user information: no '@' in the authority (the path may hold
     * one when VC_HOST's scheme was given). */
    if (strncmp(url, "https://", 8) != 0 || strpbrk(url, "?#") ||
        memchr(url + 8, '@', strcspn(url + 8, "/")) || (!scheme && strchr(url, '@')))
        abort();
    printable(url);
    u = curl_url();
    if (!u)
        return;
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
        abort();
    if (curl_url_get(u, CURLUPART_PORT, &part, 0) != CURLUE_OK || strtol(part, NULL, 10) < 1 ||
        strtol(part, NULL, 10) > 65535)
        abort();
    curl_free(part);
    if (curl_url_get(u, CURLUPART_HOST, &part, 0) != CURLUE_OK || !part[0])
        abort();
    curl_free(part);
    part = NULL;
    if (curl_url_get(u, CURLUPART_USER, &part, 0) != CURLUE_NO_USER)
        abort();
    curl_url_cleanup(u);
}

static void check_thumbprint(const char *s)
{
    unsigned char out[VS_SHA256_LEN];
    char err[512];
    size_t hex = 0;

    err[0] = '\0';
    if (vs_thumbprint_parse(s, out, err, sizeof(err)) != 0) {
        if (!err[0])
            abort();
        return;
    }
    for (; *s; s++)
        if (isxdigit((unsigned char)*s))
            hex++;
        else if (*s != ':')
            abort();
    if (hex != 2 * VS_SHA256_LEN)
        abort();
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void check_query(const char *value)
{
    char buf[1024] = "/api/v1/pods?watch=1";
    size_t start = strlen(buf) + strlen("&resourceVersion=");
    const char *v = value;
    int n = kube_query_add(buf, sizeof(buf), "resourceVersion", value);

    if (n < 0) {
        if (n != VMG_ETOOBIG || strcmp(buf, "/api/v1/pods?watch=1") != 0)
            abort();
        return;
    }
    if ((size_t)n != strlen(buf) || strncmp(buf, "/api/v1/pods?watch=1&resourceVersion=", start))
        abort();
    /* Only unreserved bytes and escapes, which decode back to the value. */
    for (const char *p = buf + start; *p; v++) {
        if (*p == '%') {
            int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
            if (lo < 0 || (unsigned char)*v != hi * 16 + lo)
                abort();
            p += 3;
        } else {
            if (!isalnum((unsigned char)*p) && !strchr("-._~", *p))
                abort();
            if (*p != *v)
                abort();
            p++;
        }
    }
    if (*v)
        abort();
}

static void check_path(char *const f[FIELDS])
{
    char buf[512];
    int n = kube_path(buf, sizeof(buf), f[1], f[2], f[3], f[4], f[5], f[6]);

    if (n < 0) {
        if (n != -EINVAL && n != VMG_ETOOBIG)
            abort();
        return;
    }
    if ((size_t)n != strlen(buf) || strncmp(buf, "/api", 4) != 0 || strstr(buf, "//") ||
        strstr(buf, "/../") || strstr(buf, "/./"))
        abort();
    for (const char *p = buf; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("/.-_:", *p))
            abort();
}

static void check_tag(const char *ns, const char *name)
{
    char a[NAMING_BUF_SIZE], b[NAMING_BUF_SIZE];
    int n = naming_tag(ns, name, a, sizeof(a));

    if (n < 0) {
        if (n != -EINVAL || (ns[0] && name[0] && strlen(ns) <= NAMING_K8S_NAME_MAX &&
                             strlen(name) <= NAMING_K8S_NAME_MAX))
            abort();
        return;
    }
    if ((size_t)n != strlen(a) || n > NAMING_MAX_LEN || n > VS_REST_TAG_NAME_MAX)
        abort();
    for (const char *p = a; *p; p++)
        if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p) && !strchr("./~-", *p))
            abort();
    /* The plain form splits back into the pair. */
    if (!strchr(a, '~')) {
        size_t nl = strlen(ns);
        if (strncmp(a, ns, nl) != 0 || a[nl] != '/' || strcmp(a + nl + 1, name) != 0)
            abort();
    }
    if (naming_tag(ns, name, b, sizeof(b)) != n || strcmp(a, b) != 0)
        abort();
    if (vs_rest_valid_id(name)) {
        for (const char *p = name; *p; p++)
            if (!isalnum((unsigned char)*p) && !strchr(":._-", *p))
                abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy, *f[FIELDS], *p;
    size_t k = 0;

    if (size > 4096)
        return 0;
    copy = malloc(size + 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    copy[size] = '\0';
    for (p = copy; k < FIELDS; k++) {
        char *nl = strchr(p, '\n');

        f[k] = p;
        if (nl) {
            *nl = '\0';
            p = nl + 1;
        } else {
            p += strlen(p);
        }
    }
    check_sdk_url(f[0]);
    check_thumbprint(f[0]);
    check_query(f[7]);
    check_query(f[0]);
    check_path(f);
    check_tag(f[3], f[5]);
    free(copy);
    return 0;
}
