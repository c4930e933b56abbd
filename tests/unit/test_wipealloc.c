/* test_wipealloc.c: what OpenSSL and libcurl free is wiped first. The
 * allocators are given first thing in main, with a free that looks at
 * each block it is handed. */
#include "tests/unit/unit.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "lib/tlsgen.h"
#include "lib/wipealloc.h"

/* While looking is set: the blocks handed to look_free, and how many of
 * them held looking[0..looking_len). */
static const void *looking;
static size_t looking_len;
static int handed, held;

static void look_free(void *p)
{
    if (looking) {
        handed++;
        if (memmem(p, malloc_usable_size(p), looking, looking_len))
            held++;
    }
    free(p);
}

static void look_for(const void *p, size_t len)
{
    looking = p;
    looking_len = len;
    handed = held = 0;
}

/* A client key given to libcurl as a blob is copied by libcurl (and the
 * request's headers too): the copies are wiped when the handle goes. */
static void test_curl_copies_wiped(void **state)
{
    static const char key[] = "-----BEGIN PRIVATE KEY-----\nSECRET-KEY-BYTES-0123456789\n";
    struct curl_blob blob = {.data = (void *)key, .len = sizeof(key) - 1, .flags = CURL_BLOB_COPY};
    struct curl_slist *h;
    CURL *e;

    (void)state;
    e = curl_easy_init(); /* libcurl and OpenSSL set up before looking */
    assert_non_null(e);
    look_for("SECRET-KEY-BYTES", 16); /* at libcurl's frees alone */
    assert_int_equal(curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &blob), CURLE_OK);
    h = curl_slist_append(NULL, "Authorization: Bearer SECRET-KEY-BYTES-token");
    assert_non_null(h);
    curl_slist_free_all(h);
    curl_easy_cleanup(e);
    assert_true(handed > 0);
    assert_int_equal(held, 0);
    looking = NULL;
}

/* A private key read from PEM and freed: none of OpenSSL's copies of its
 * secret (the scalar of an EC key) stays in a block freed unwiped. */
static void test_openssl_copies_wiped(void **state)
{
    const char *const sans[] = {"a.example"};
    char *cert = NULL, *pem = NULL;
    unsigned char priv[32];
    BIGNUM *d = NULL;
    EVP_PKEY *k;
    BIO *b;

    (void)state;
    assert_int_equal(vmg_tls_selfsigned("a.example", sans, 1, &cert, &pem), 0);
    b = BIO_new_mem_buf(pem, -1);
    assert_non_null(b);
    k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
    assert_non_null(k);
    BIO_free(b);
    assert_int_equal(EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_PRIV_KEY, &d), 1);
    assert_int_equal(BN_bn2binpad(d, priv, sizeof(priv)), sizeof(priv));
    BN_clear_free(d);
    EVP_PKEY_free(k);
    /* Again, looking: read, used (a signature), freed. */
    look_for(priv, sizeof(priv));
    b = BIO_new_mem_buf(pem, -1);
    k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
    assert_non_null(k);
    {
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        unsigned char sig[128];
        size_t siglen = sizeof(sig);
        assert_int_equal(EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k), 1);
        assert_int_equal(EVP_DigestSign(md, sig, &siglen, (const unsigned char *)"x", 1), 1);
        EVP_MD_CTX_free(md);
    }
    EVP_PKEY_free(k);
    BIO_free(b);
    assert_true(handed > 0);
    assert_int_equal(held, 0);
    looking = NULL;
    explicit_bzero(priv, sizeof(priv));
    explicit_bzero(pem, strlen(pem));
    free(pem);
    free(cert);
}

/* A realloc that moves the block wipes the old one; the content moves. */
static void test_realloc_wipes_the_old_block(void **state)
{
    char *p = OPENSSL_malloc(32), *q;

    (void)state;
    assert_non_null(p);
    memcpy(p, "SECRET-REALLOC-0123456789abcdef", 32);
    look_for("SECRET-REALLOC", 14);
    q = OPENSSL_realloc(p, 1 << 20);
    assert_non_null(q);
    assert_memory_equal(q, "SECRET-REALLOC-0123456789abcdef", 32);
    assert_int_equal(handed, 1);
    assert_int_equal(held, 0);
    looking = NULL;
    OPENSSL_clear_free(q, 1 << 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_curl_copies_wiped),
        cmocka_unit_test(test_openssl_copies_wiped),
        cmocka_unit_test(test_realloc_wipes_the_old_block),
    };

    if (vmg_wipe_allocators(look_free) != 0)
        return 1;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
