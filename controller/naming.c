/* naming.c: folder, VM and tag names of VmGroups (see naming.h for the rules). */
#include "controller/naming.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "lib/hex.h"

/* The bytes a Kubernetes object name may hold (DNS subdomain); a namespace
 * (RFC 1123 label) holds the same minus '.'. */
static bool name_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

static bool valid_name(const char *s, bool allow_dot)
{
    if (!s[0])
        return false;
    for (const char *p = s; *p; p++) {
        if (!name_byte((unsigned char)*p) || (!allow_dot && *p == '.'))
            return false;
    }
    return true;
}

/* pair_hash writes the first hexlen hex digits (hexlen <= 64) of
 * SHA-256(ns NUL name) and a NUL into out. Returns 0 or -EIO. */
static int pair_hash(const char *ns, const char *name, size_t hexlen, char *out)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    char digits[2 * EVP_MAX_MD_SIZE + 1];
    unsigned int mdlen = 0;
    int ret = -EIO;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();

    if (!ctx)
        return -EIO;
    if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
        EVP_DigestUpdate(ctx, ns, strlen(ns) + 1) != 1 || /* the NUL separates */
        EVP_DigestUpdate(ctx, name, strlen(name)) != 1 ||
        EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen * 2 < hexlen)
        goto out;
    vmg_hex(md, mdlen, digits);
    memcpy(out, digits, hexlen);
    out[hexlen] = '\0';
    ret = 0;
out:
    EVP_MD_CTX_free(ctx);
    return ret;
}

/* append_sanitized appends at most max bytes of s to buf at *len, with
 * upper case letters lowered and every other byte outside [a-z0-9.-] (and
 * '/' when keep_slash) replaced by '-'. */
static void append_sanitized(char *buf, size_t *len, const char *s, size_t max, bool keep_slash)
{
    for (size_t i = 0; i < max && s[i]; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        buf[(*len)++] = (name_byte((unsigned char)c) || (keep_slash && c == '/')) ? c : '-';
    }
    buf[*len] = '\0';
}

/* pair_name writes the name of the pair (ns, name) into buf: "<ns><sep><name>"
 * when both are valid Kubernetes names and it fits in NAMING_MAX_LEN, else
 * the pair sanitized (keeping '/' when keep_slash), cut to fit, then mark
 * and hashlen hex digits of the pair's hash. Returns its length, -EINVAL
 * or -EIO. The callers checked the arguments. */
static int pair_name(const char *ns, const char *name, char sep, const char *mark, bool keep_slash,
                     size_t hashlen, char *buf, size_t size)
{
    char hash[65];
    size_t len = 0, nslen = strlen(ns), namelen = strlen(name);
    const size_t prefix_max = NAMING_MAX_LEN - strlen(mark) - hashlen;
    int r;

    if (valid_name(ns, false) && valid_name(name, true) && nslen + 1 + namelen <= NAMING_MAX_LEN) {
        r = snprintf(buf, size, "%s%c%s", ns, sep, name);
        return (r < 0 || (size_t)r >= size) ? -EINVAL : r;
    }
    r = pair_hash(ns, name, hashlen, hash);
    if (r < 0)
        return r;
    buf[0] = '\0';
    append_sanitized(buf, &len, ns, prefix_max, keep_slash);
    if (len < prefix_max) {
        buf[len++] = sep;
        buf[len] = '\0';
        append_sanitized(buf, &len, name, prefix_max - len, keep_slash);
    }
    r = snprintf(buf + len, size - len, "%s%s", mark, hash);
    return (r < 0 || (size_t)r >= size - len) ? -EINVAL : (int)len + r;
}

int naming_folder(const char *ns, const char *name, char *buf, size_t size)
{
    if (!ns || !name || !buf || size < NAMING_BUF_SIZE)
        return -EINVAL;
    return pair_name(ns, name, '_', "__", false, NAMING_FOLDER_HASH_LEN, buf, size);
}

int naming_vm(const char *ns, const char *name, int slot, char *buf, size_t size)
{
    char hash[NAMING_VM_HASH_LEN + 1];
    char suffix[16];
    size_t len = 0, namelen, prefix_max;
    int r, slen;

    if (!ns || !name || !buf || slot < 0 || size < NAMING_BUF_SIZE)
        return -EINVAL;
    slen = snprintf(suffix, sizeof(suffix), "-%d", slot);
    if (slen < 0 || (size_t)slen >= sizeof(suffix))
        return -EINVAL;
    namelen = strlen(name);
    if (valid_name(name, true) && namelen + (size_t)slen <= NAMING_MAX_LEN) {
        r = snprintf(buf, size, "%s%s", name, suffix);
        return (r < 0 || (size_t)r >= size) ? -EINVAL : r;
    }
    r = pair_hash(ns, name, NAMING_VM_HASH_LEN, hash);
    if (r < 0)
        return r;
    prefix_max = NAMING_MAX_LEN - 1 - NAMING_VM_HASH_LEN - (size_t)slen;
    buf[0] = '\0';
    append_sanitized(buf, &len, name, prefix_max, false);
    /* A cut that ends in '-' or '.' reads badly before "-<hash>"; drop them. */
    while (len > 1 && (buf[len - 1] == '-' || buf[len - 1] == '.'))
        buf[--len] = '\0';
    r = snprintf(buf + len, size - len, "-%s%s", hash, suffix);
    return (r < 0 || (size_t)r >= size - len) ? -EINVAL : (int)len + r;
}

int naming_vm_slot(const char *ns, const char *name, const char *vm_name)
{
    char want[NAMING_BUF_SIZE];
    const char *dash, *p;
    long long slot = 0;

    if (!ns || !name || !vm_name || strnlen(vm_name, NAMING_BUF_SIZE) > NAMING_MAX_LEN)
        return -EINVAL;
    dash = strrchr(vm_name, '-');
    if (!dash || !dash[1] || (dash[1] == '0' && dash[2]))
        return -EINVAL;
    for (p = dash + 1; *p; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        slot = slot * 10 + (*p - '0');
        if (slot > INT_MAX)
            return -EINVAL;
    }
    if (naming_vm(ns, name, (int)slot, want, sizeof(want)) < 0 || strcmp(want, vm_name) != 0)
        return -EINVAL;
    return (int)slot;
}

int naming_tag(const char *ns, const char *name, char *buf, size_t size)
{
    if (!ns || !name || !buf || size < NAMING_BUF_SIZE || !ns[0] || !name[0] ||
        strlen(ns) > NAMING_K8S_NAME_MAX || strlen(name) > NAMING_K8S_NAME_MAX)
        return -EINVAL;
    return pair_name(ns, name, '/', "~", true, NAMING_TAG_HASH_LEN, buf, size);
}

int naming_tag_description(const char *ns, const char *name, char *buf, size_t size)
{
    int r;

    if (!ns || !name || !buf || size == 0)
        return -EINVAL;
    r = snprintf(buf, size, "VMs of VmGroup %s/%s", ns, name);
    return (r < 0 || (size_t)r >= size) ? -EINVAL : r;
}
