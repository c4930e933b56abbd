/* test_tls.c: the server's TLS context and a connection's engine, driven
 * in memory against an OpenSSL client: handshake, data both ways, the
 * peer's close_notify, a refused handshake, and a plaintext sink that
 * fails. lib/server's tests cover the same over sockets, and the reload. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <uv.h>

#include "lib/buf.h"
#include "lib/err.h"
#include "lib/tls.h"
#include "lib/tlsgen.h"

/* A server engine and an OpenSSL client, joined by two byte pipes. */
struct pair {
    vmg_tls *tls;
    vmg_tls_conn *tc;
    SSL_CTX *cctx;
    SSL *client;
    BIO *c_in;           /* what the server sent, for the client to read */
    BIO *c_out;          /* what the client wrote, for the server */
    struct vmg_buf sent; /* ciphertext the server handed to out */
    struct vmg_buf got;  /* plaintext the server handed to plain */
    int plain_fails;     /* plain returns this when not 0 */
    char *cert;
    char *key;
};

static int out_cb(void *arg, const char *p, size_t n)
{
    struct pair *pr = arg;
    return vmg_buf_append(&pr->sent, p, n);
}

static int plain_cb(void *arg, const char *p, size_t n)
{
    struct pair *pr = arg;
    if (pr->plain_fails)
        return pr->plain_fails;
    return vmg_buf_append(&pr->got, p, n);
}

static void pair_init(struct pair *pr)
{
    struct vmg_tls_opts o = {0};
    char errbuf[256] = "";

    memset(pr, 0, sizeof(*pr));
    assert_int_equal(vmg_tls_selfsigned("test", NULL, 0, &pr->cert, &pr->key), 0);
    o.cert_pem = pr->cert;
    o.key_pem = pr->key;
    o.errbuf = errbuf;
    o.errbuf_size = sizeof(errbuf);
    assert_int_equal(vmg_tls_new(uv_default_loop(), &o, &pr->tls), 0);
    assert_non_null(pr->tls);
    pr->tc = vmg_tls_conn_new(pr->tls);
    assert_non_null(pr->tc);
    vmg_buf_init(&pr->sent, 1 << 20, 0);
    vmg_buf_init(&pr->got, 1 << 20, VMG_BUF_WIPE);

    pr->cctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(pr->cctx);
    SSL_CTX_set_verify(pr->cctx, SSL_VERIFY_NONE, NULL);
    pr->client = SSL_new(pr->cctx);
    pr->c_in = BIO_new(BIO_s_mem());
    pr->c_out = BIO_new(BIO_s_mem());
    assert_non_null(pr->client);
    BIO_set_mem_eof_return(pr->c_in, -1);
    SSL_set_bio(pr->client, pr->c_in, pr->c_out);
    SSL_set_connect_state(pr->client);
}

static void pair_free(struct pair *pr)
{
    vmg_tls_conn_free(pr->tc);
    vmg_tls_close(pr->tls, NULL, NULL);
    SSL_free(pr->client);
    SSL_CTX_free(pr->cctx);
    vmg_buf_free(&pr->sent);
    vmg_buf_free(&pr->got);
    free(pr->cert);
    vmg_wipe_free(pr->key, strlen(pr->key));
    ERR_clear_error();
}

/* to_server feeds what the client wrote to the server; returns its code. */
static int to_server(struct pair *pr)
{
    char buf[32 * 1024];
    int n = BIO_read(pr->c_out, buf, sizeof(buf));
    return vmg_tls_conn_input(pr->tc, buf, n > 0 ? (size_t)n : 0, plain_cb, out_cb, pr);
}

/* to_client hands what the server sent to the client. */
static void to_client(struct pair *pr)
{
    size_t n = vmg_buf_len(&pr->sent);
    if (n > 0)
        assert_int_equal(BIO_write(pr->c_in, vmg_buf_str(&pr->sent), (int)n), (int)n);
    vmg_buf_reset(&pr->sent);
}

static void handshake(struct pair *pr)
{
    for (int i = 0; i < 10; i++) {
        int r = SSL_do_handshake(pr->client);
        if (r == 1)
            break;
        assert_int_equal(SSL_get_error(pr->client, r), SSL_ERROR_WANT_READ);
        assert_int_equal(to_server(pr), 0);
        to_client(pr);
    }
    assert_int_equal(SSL_is_init_finished(pr->client), 1);
    /* The server learns the handshake is over from the client's Finished. */
    assert_int_equal(to_server(pr), 0);
    to_client(pr);
}

static void test_plain_when_nothing_given(void **state)
{
    struct vmg_tls_opts o = {0};
    vmg_tls *t = (vmg_tls *)&o; /* overwritten */

    (void)state;
    assert_int_equal(vmg_tls_new(uv_default_loop(), &o, &t), 0);
    assert_null(t);
    assert_int_equal(vmg_tls_reloads(NULL), 0);
    vmg_tls_close(NULL, NULL, NULL);
}

static void closed_cb(void *data)
{
    (*(int *)data)++;
}

static void test_bad_material(void **state)
{
    struct vmg_tls_opts o = {0};
    char errbuf[256] = "";
    char *cert, *key, *cert2, *key2;
    vmg_tls *t = NULL;
    int closed = 0;

    (void)state;
    o.errbuf = errbuf;
    o.errbuf_size = sizeof(errbuf);
    assert_int_equal(vmg_tls_selfsigned("a", NULL, 0, &cert, &key), 0);
    assert_int_equal(vmg_tls_selfsigned("b", NULL, 0, &cert2, &key2), 0);
    o.cert_pem = cert;
    assert_int_equal(vmg_tls_new(uv_default_loop(), &o, &t), VMG_ECONFIG);
    assert_null(t);
    assert_non_null(strstr(errbuf, "both a certificate and a key"));
    o.key_pem = key2;
    assert_int_equal(vmg_tls_new(uv_default_loop(), &o, &t), VMG_ECONFIG);
    assert_non_null(strstr(errbuf, "TLS key"));
    o.cert_pem = NULL;
    o.key_pem = NULL;
    o.cert_file = "/nonexistent/tls.crt";
    o.key_file = "/nonexistent/tls.key";
    assert_int_equal(vmg_tls_new(uv_default_loop(), &o, &t), VMG_ECONFIG);
    assert_non_null(strstr(errbuf, "/nonexistent/tls.crt"));
    /* From text, a context closes at once: no handle to wait for. */
    o.cert_pem = cert;
    o.key_pem = key;
    assert_int_equal(vmg_tls_new(uv_default_loop(), &o, &t), 0);
    vmg_tls_watch(t, 10); /* nothing: not from files */
    vmg_tls_close(t, closed_cb, &closed);
    assert_int_equal(closed, 1);
    free(cert);
    free(cert2);
    vmg_wipe_free(key, strlen(key));
    vmg_wipe_free(key2, strlen(key2));
}

static void test_handshake_and_data(void **state)
{
    struct pair pr;
    char buf[64];
    int n;

    (void)state;
    pair_init(&pr);
    handshake(&pr);
    /* Client to server: plaintext comes out whole and in order. */
    assert_int_equal(SSL_write(pr.client, "GET / HTTP/1.1\r\n\r\n", 18), 18);
    assert_int_equal(to_server(&pr), 0);
    assert_string_equal(vmg_buf_str(&pr.got), "GET / HTTP/1.1\r\n\r\n");
    /* Server to client. */
    assert_int_equal(vmg_tls_conn_write(pr.tc, "HTTP/1.1 200 OK\r\n", 17, out_cb, &pr), 0);
    assert_true(vmg_buf_len(&pr.sent) > 17); /* ciphertext, with its overhead */
    assert_null(memmem(vmg_buf_str(&pr.sent), vmg_buf_len(&pr.sent), "200 OK", 6));
    to_client(&pr);
    n = SSL_read(pr.client, buf, sizeof(buf));
    assert_int_equal(n, 17);
    assert_memory_equal(buf, "HTTP/1.1 200 OK\r\n", 17);
    /* The server's close_notify reaches the client. */
    assert_int_equal(vmg_tls_conn_shutdown(pr.tc, out_cb, &pr), 0);
    to_client(&pr);
    assert_true(SSL_read(pr.client, buf, sizeof(buf)) <= 0);
    assert_int_equal(SSL_get_error(pr.client, -1) == SSL_ERROR_ZERO_RETURN ||
                         (SSL_get_shutdown(pr.client) & SSL_RECEIVED_SHUTDOWN),
                     1);
    pair_free(&pr);
}

static void test_peer_close_notify(void **state)
{
    struct pair pr;

    (void)state;
    pair_init(&pr);
    handshake(&pr);
    SSL_shutdown(pr.client);
    assert_int_equal(to_server(&pr), VMG_TLS_CLOSED);
    pair_free(&pr);
}

static void test_refused_handshake(void **state)
{
    struct pair pr;
    const char *http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";

    (void)state;
    pair_init(&pr);
    /* Plain HTTP to a TLS port: refused, with an alert to send. */
    assert_int_equal(vmg_tls_conn_input(pr.tc, http, strlen(http), plain_cb, out_cb, &pr),
                     VMG_TLS_REFUSED);
    assert_int_equal(vmg_buf_len(&pr.got), 0);
    /* Nothing to shut down before a handshake. */
    vmg_buf_reset(&pr.sent);
    assert_int_equal(vmg_tls_conn_shutdown(pr.tc, out_cb, &pr), 0);
    assert_int_equal(vmg_buf_len(&pr.sent), 0);
    pair_free(&pr);
}

static void test_sink_errors_stop_input(void **state)
{
    struct pair pr;

    (void)state;
    pair_init(&pr);
    handshake(&pr);
    pr.plain_fails = -ENOMEM;
    assert_int_equal(SSL_write(pr.client, "secret", 6), 6);
    assert_int_equal(to_server(&pr), -ENOMEM);
    /* An output that fails makes the write fail with its code. */
    vmg_buf_free(&pr.sent);
    vmg_buf_init(&pr.sent, 4, 0);
    assert_int_equal(vmg_tls_conn_write(pr.tc, "hello", 5, out_cb, &pr), VMG_ETOOBIG);
    pair_free(&pr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_when_nothing_given),
        cmocka_unit_test(test_bad_material),
        cmocka_unit_test(test_handshake_and_data),
        cmocka_unit_test(test_peer_close_notify),
        cmocka_unit_test(test_refused_handshake),
        cmocka_unit_test(test_sink_errors_stop_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
