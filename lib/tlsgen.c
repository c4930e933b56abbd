/* tlsgen.c: self-signed certificates with OpenSSL 3 (see tlsgen.h). */
#include "lib/tlsgen.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "lib/err.h"

static int valid_dns_name(const char *s)
{
    size_t n;

    if (!s)
        return 0;
    n = strnlen(s, VMG_TLS_MAX_DNS_NAME + 1);
    if (n == 0 || n > VMG_TLS_MAX_DNS_NAME)
        return 0;
    if (s[0] == '*') {
        if (s[1] != '.' || n < 3)
            return 0;
        s += 2;
    }
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

/* bio_string copies the contents of a memory BIO into a new string. */
static char *bio_string(BIO *b)
{
    char *data = NULL;
    long n = BIO_get_mem_data(b, &data);
    char *s;

    if (n < 0 || !data)
        return NULL;
    s = malloc((size_t)n + 1);
    if (!s)
        return NULL;
    memcpy(s, data, (size_t)n);
    s[n] = '\0';
    return s;
}

static int add_ip(GENERAL_NAMES *gens, const unsigned char *addr, int len)
{
    GENERAL_NAME *gn = GENERAL_NAME_new();
    ASN1_OCTET_STRING *ip = ASN1_OCTET_STRING_new();

    if (!gn || !ip || !ASN1_OCTET_STRING_set(ip, addr, len))
        goto fail;
    GENERAL_NAME_set0_value(gn, GEN_IPADD, ip);
    ip = NULL;
    if (!sk_GENERAL_NAME_push(gens, gn))
        goto fail;
    return 0;
fail:
    ASN1_OCTET_STRING_free(ip);
    GENERAL_NAME_free(gn);
    return -ENOMEM;
}

static int add_dns(GENERAL_NAMES *gens, const char *name)
{
    GENERAL_NAME *gn = GENERAL_NAME_new();
    ASN1_IA5STRING *s = ASN1_IA5STRING_new();

    if (!gn || !s || !ASN1_STRING_set(s, name, (int)strlen(name)))
        goto fail;
    GENERAL_NAME_set0_value(gn, GEN_DNS, s);
    s = NULL;
    if (!sk_GENERAL_NAME_push(gens, gn))
        goto fail;
    return 0;
fail:
    ASN1_IA5STRING_free(s);
    GENERAL_NAME_free(gn);
    return -ENOMEM;
}

/* add_ext adds an extension given in OpenSSL's configuration syntax, with
 * the certificate as its own issuer. */
static int add_ext(X509 *cert, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509_EXTENSION *ext;
    int ok;

    X509V3_set_ctx(&ctx, cert, cert, NULL, NULL, 0);
    ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext)
        return VMG_ETRANSPORT;
    ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : -ENOMEM;
}

int vmg_tls_selfsigned(const char *cn, const char *const *dns_sans, size_t n_dns,
                       char **ret_cert_pem, char **ret_key_pem)
{
    static const unsigned char v4[4] = {127, 0, 0, 1};
    static const unsigned char v6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    EVP_PKEY *pkey = NULL;
    X509 *cert = NULL;
    X509_NAME *subj;
    GENERAL_NAMES *gens = NULL;
    BIGNUM *serial = NULL;
    BIO *cb = NULL, *kb = NULL;
    char *cert_pem = NULL, *key_pem = NULL;
    size_t cn_len;
    int r = VMG_ETRANSPORT;

    if (!cn || !ret_cert_pem || !ret_key_pem || n_dns > VMG_TLS_MAX_SANS ||
        (n_dns > 0 && !dns_sans))
        return -EINVAL;
    cn_len = strnlen(cn, 65);
    if (cn_len == 0 || cn_len > 64)
        return -EINVAL;
    for (size_t i = 0; i < n_dns; i++)
        if (!valid_dns_name(dns_sans[i]))
            return -EINVAL;

    pkey = EVP_EC_gen("P-256");
    cert = X509_new();
    gens = sk_GENERAL_NAME_new_null();
    serial = BN_new();
    if (!pkey || !cert || !gens || !serial)
        goto out;

    /* A random positive 127-bit serial number. */
    if (!BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) ||
        !BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert)))
        goto out;
    if (!X509_set_version(cert, X509_VERSION_3) ||
        !X509_gmtime_adj(X509_getm_notBefore(cert), -3600) ||
        !X509_gmtime_adj(X509_getm_notAfter(cert), 365L * 24 * 3600) ||
        !X509_set_pubkey(cert, pkey))
        goto out;
    subj = X509_get_subject_name(cert);
    if (!X509_NAME_add_entry_by_txt(subj, "CN", MBSTRING_UTF8, (const unsigned char *)cn,
                                    (int)cn_len, -1, 0) ||
        !X509_set_issuer_name(cert, subj))
        goto out;

    for (size_t i = 0; i < n_dns; i++)
        if ((r = add_dns(gens, dns_sans[i])) < 0)
            goto out;
    if ((r = add_ip(gens, v4, sizeof(v4))) < 0 || (r = add_ip(gens, v6, sizeof(v6))) < 0)
        goto out;
    r = VMG_ETRANSPORT;
    if (!X509_add1_ext_i2d(cert, NID_subject_alt_name, gens, 0, 0))
        goto out;
    if (add_ext(cert, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
        add_ext(cert, NID_key_usage, "critical,digitalSignature,keyEncipherment") < 0 ||
        add_ext(cert, NID_ext_key_usage, "serverAuth") < 0 ||
        add_ext(cert, NID_subject_key_identifier, "hash") < 0 ||
        add_ext(cert, NID_authority_key_identifier, "keyid:always") < 0)
        goto out;
    if (!X509_sign(cert, pkey, EVP_sha256()))
        goto out;

    cb = BIO_new(BIO_s_mem());
    kb = BIO_new(BIO_s_secmem()); /* wiped when freed */
    if (!cb || !kb || !PEM_write_bio_X509(cb, cert) ||
        !PEM_write_bio_PrivateKey(kb, pkey, NULL, NULL, 0, NULL, NULL))
        goto out;
    r = -ENOMEM;
    cert_pem = bio_string(cb);
    key_pem = bio_string(kb);
    if (!cert_pem || !key_pem)
        goto out;
    *ret_cert_pem = cert_pem;
    *ret_key_pem = key_pem;
    cert_pem = key_pem = NULL;
    r = 0;
out:
    free(cert_pem);
    if (key_pem) {
        OPENSSL_cleanse(key_pem, strlen(key_pem));
        free(key_pem);
    }
    BIO_free(cb);
    BIO_free(kb);
    BN_free(serial);
    GENERAL_NAMES_free(gens);
    X509_free(cert);
    EVP_PKEY_free(pkey);
    return r;
}
