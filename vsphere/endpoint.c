/* endpoint.c: where the vCenter is and how its certificate is known (see
 * session.h, "Pure helpers"): VC_HOST made into the SDK URL, checked byte
 * by byte so that what reaches curl is a URL it takes as meant, and the
 * SHA-256 thumbprint read. No I/O. */
#include "vsphere/session.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "lib/err.h"
#include "lib/str.h"

static bool host_char_ok(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_';
}

static bool v6_char_ok(char c)
{
    return isxdigit((unsigned char)c) || c == ':' || c == '.' || c == '%';
}

/* v6_addr_ok tells whether s[0..n) is an IPv6 address, with an optional
 * zone after it: '%' (or "%25", its escape) and 1 to 15 hex digits (curl
 * refuses longer ones; v6_char_ok lets no interface name through). */
static bool v6_addr_ok(const char *s, size_t n)
{
    char addr[INET6_ADDRSTRLEN + 1];
    struct in6_addr a;
    const char *zone = memchr(s, '%', n), *end = s + n;
    size_t alen = zone ? (size_t)(zone - s) : n;

    for (size_t i = 0; i < n; i++)
        if (!v6_char_ok(s[i]))
            return false;
    if (zone) {
        zone++;
        if (end - zone > 2 && zone[0] == '2' && zone[1] == '5')
            zone += 2;
        if (zone == end || end - zone > 15)
            return false;
        for (const char *p = zone; p < end; p++)
            if (!isxdigit((unsigned char)*p))
                return false;
    }
    if (alen == 0 || alen >= sizeof(addr))
        return false;
    memcpy(addr, s, alen);
    addr[alen] = '\0';
    return inet_pton(AF_INET6, addr, &a) == 1;
}

/* show_host writes host for messages, with any user information before an
 * '@' (which may hold a password) replaced by "***". */
static void show_host(const char *host, char *out, size_t size)
{
    const char *at = strrchr(host, '@'), *scheme = strstr(host, "://");

    if (!at) {
        vmg_putf(out, size, "%.200s", host);
        return;
    }
    if (scheme && scheme < at)
        vmg_putf(out, size, "%.*s***%.200s", (int)(scheme + 3 - host), host, at);
    else
        vmg_putf(out, size, "***%.200s", at);
}

int vs_url_build(const char *host, char *buf, size_t size, char *err, size_t errlen)
{
    const char *rest, *slash, *auth_end, *colon = NULL, *path = "/sdk";
    char hostpart[300], shown[256];
    size_t auth_len, path_len = 4;
    long port = 443;
    int n;

    if (!host || !buf || size == 0) {
        vmg_putf(err, errlen, "VC_HOST is empty");
        return VMG_ECONFIG;
    }
    show_host(host, shown, sizeof(shown));
    for (const char *p = host; *p; p++)
        if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f) {
            vmg_putf(err, errlen, "VC_HOST \"%s\" holds a blank or a control character", shown);
            return VMG_ECONFIG;
        }
    rest = strstr(host, "://");
    if (rest) {
        if ((size_t)(rest - host) != 5 || strncasecmp(host, "https", 5) != 0) {
            vmg_putf(err, errlen, "VC_HOST \"%s\": only https URLs are supported", shown);
            return VMG_ECONFIG;
        }
        rest += 3;
    } else {
        rest = host;
    }
    slash = strchr(rest, '/');
    auth_end = slash ? slash : rest + strlen(rest);
    auth_len = (size_t)(auth_end - rest);
    /* User information: in the authority, or anywhere when no "://" is
     * given: after a mistyped scheme ("https//user:pw@vc") it would land
     * in the path, sent and logged with the URL. The path of a URL with
     * its scheme may hold an '@' ("https://proxy/vc@prod/sdk"). */
    if (memchr(rest, '@', auth_len) || (rest == host && strchr(rest, '@'))) {
        vmg_putf(err, errlen,
                 "VC_HOST \"%s\" holds a user name; give it in VC_USER and VC_PASS instead", shown);
        return VMG_ECONFIG;
    }
    if (slash && strcmp(slash, "/") != 0) {
        path = slash;
        path_len = strlen(slash);
        if (strpbrk(path, "?#")) {
            vmg_putf(err, errlen, "VC_HOST \"%s\": a query or fragment is not allowed", shown);
            return VMG_ECONFIG;
        }
    }
    if (auth_len == 0) {
        vmg_putf(err, errlen, "VC_HOST \"%s\" names no host", shown);
        return VMG_ECONFIG;
    }
    if (rest[0] == '[') {
        const char *close = memchr(rest, ']', auth_len);
        if (!close || !v6_addr_ok(rest + 1, (size_t)(close - rest - 1))) {
            vmg_putf(err, errlen, "VC_HOST \"%s\": bad IPv6 address", shown);
            return VMG_ECONFIG;
        }
        if (close + 1 < auth_end) {
            if (close[1] != ':') {
                vmg_putf(err, errlen, "VC_HOST \"%s\": bad text after the IPv6 address", shown);
                return VMG_ECONFIG;
            }
            colon = close + 1;
        }
        if ((size_t)(close + 1 - rest) >= sizeof(hostpart))
            goto toolong;
        memcpy(hostpart, rest, (size_t)(close + 1 - rest));
        hostpart[close + 1 - rest] = '\0';
    } else {
        const char *c1 = memchr(rest, ':', auth_len);
        bool v6 = c1 && memchr(c1 + 1, ':', (size_t)(auth_end - c1 - 1));
        if (v6) {
            /* A bare IPv6 address: no port can follow it unambiguously. */
            if (!v6_addr_ok(rest, auth_len)) {
                vmg_putf(err, errlen, "VC_HOST \"%s\": bad IPv6 address", shown);
                return VMG_ECONFIG;
            }
            if (auth_len + 2 >= sizeof(hostpart))
                goto toolong;
            hostpart[0] = '[';
            memcpy(hostpart + 1, rest, auth_len);
            hostpart[auth_len + 1] = ']';
            hostpart[auth_len + 2] = '\0';
        } else {
            size_t hl = c1 ? (size_t)(c1 - rest) : auth_len;
            colon = c1;
            if (hl == 0) {
                vmg_putf(err, errlen, "VC_HOST \"%s\" names no host", shown);
                return VMG_ECONFIG;
            }
            for (size_t i = 0; i < hl; i++)
                if (!host_char_ok(rest[i])) {
                    vmg_putf(err, errlen, "VC_HOST \"%s\": invalid host name", shown);
                    return VMG_ECONFIG;
                }
            if (hl >= sizeof(hostpart))
                goto toolong;
            memcpy(hostpart, rest, hl);
            hostpart[hl] = '\0';
        }
    }
    if (colon) {
        const char *p = colon + 1;
        size_t digits = (size_t)(auth_end - p);
        port = 0;
        if (digits == 0 || digits > 5) {
            vmg_putf(err, errlen, "VC_HOST \"%s\": bad port", shown);
            return VMG_ECONFIG;
        }
        for (; p < auth_end; p++) {
            if (!isdigit((unsigned char)*p)) {
                vmg_putf(err, errlen, "VC_HOST \"%s\": bad port", shown);
                return VMG_ECONFIG;
            }
            port = port * 10 + (*p - '0');
        }
        if (port < 1 || port > 65535) {
            vmg_putf(err, errlen, "VC_HOST \"%s\": port out of range", shown);
            return VMG_ECONFIG;
        }
    }
    n = snprintf(buf, size, "https://%s:%ld%.*s", hostpart, port, (int)path_len, path);
    if (n < 0 || (size_t)n >= size)
        goto toolong;
    return 0;
toolong:
    buf[0] = '\0';
    vmg_putf(err, errlen, "VC_HOST \"%.100s...\" is too long", shown);
    return VMG_ECONFIG;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int vs_thumbprint_parse(const char *s, unsigned char out[VS_SHA256_LEN], char *err, size_t errlen)
{
    unsigned char tmp[64];
    size_t nbytes = 0, digits = 0;
    int hi = 0;

    if (!s || !out || !*s) {
        vmg_putf(err, errlen, "the vCenter thumbprint is empty");
        return VMG_ECONFIG;
    }
    for (const char *p = s; *p; p++) {
        int v = hexval(*p);
        if (*p == ':') {
            /* A separator only between whole bytes, never doubled. */
            if (digits % 2 != 0 || p == s || p[-1] == ':' || !p[1])
                goto bad;
            continue;
        }
        if (v < 0 || nbytes >= sizeof(tmp))
            goto bad;
        if (digits++ % 2 == 0)
            hi = v;
        else
            tmp[nbytes++] = (unsigned char)(hi << 4 | v);
    }
    if (digits % 2 != 0)
        goto bad;
    if (nbytes == 20) {
        vmg_putf(err, errlen,
                 "the vCenter thumbprint \"%.120s\" is a SHA-1 fingerprint; give the SHA-256 "
                 "fingerprint of the certificate (openssl x509 -noout -fingerprint -sha256)",
                 s);
        return VMG_ECONFIG;
    }
    if (nbytes != VS_SHA256_LEN)
        goto bad;
    memcpy(out, tmp, VS_SHA256_LEN);
    return 0;
bad:
    vmg_putf(err, errlen,
             "the vCenter thumbprint \"%.120s\" is not a SHA-256 fingerprint (64 hex digits, "
             "optionally as AA:BB:...)",
             s);
    return VMG_ECONFIG;
}
