/* lib_floor: the least memory any program linked like the manager holds
 * (tests/bench/kube_list.sh runs it). It links the same libraries (the
 * Makefile's PKG_LIBS), initialises them, makes one HTTPS request to each
 * server the manager talks to, with the same TLS set-up, and parses one
 * small XML and one small JSON document; then it prints
 *
 *   rss_kib=K anon_kib=A file_kib=F
 *
 * from /proc/self/status. None of the operator's code is in it, so the
 * figures are a floor that the operator's own memory adds to.
 *
 *   lib_floor URL CA_FILE [CERT_FILE KEY_FILE] [-- URL CA_FILE ...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <libxml/parser.h>
#include <openssl/ssl.h>
#include <uv.h>
#include <yaml.h>

#include "tests/bench/status_kib.h"

static size_t discard(char *p, size_t size, size_t n, void *data)
{
    (void)p;
    (void)data;
    return size * n;
}

/* get makes one request; any HTTP answer will do, since the TLS handshake
 * and the transfer are what load and touch the libraries' code. */
static int get(const char *url, const char *ca, const char *cert, const char *key)
{
    CURL *c = curl_easy_init();
    CURLcode rc;

    if (!c)
        return -1;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CAINFO, ca);
    if (cert && key) {
        curl_easy_setopt(c, CURLOPT_SSLCERT, cert);
        curl_easy_setopt(c, CURLOPT_SSLKEY, key);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) {
        fprintf(stderr, "lib_floor: %s: %s\n", url, curl_easy_strerror(rc));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const char xml[] = "<Envelope><Body><x>1</x></Body></Envelope>";
    uv_loop_t loop;
    yaml_parser_t yp;
    xmlDocPtr doc;
    cJSON *json;
    int i = 1;

    if (argc < 3) {
        fprintf(stderr, "usage: lib_floor URL CA_FILE [CERT_FILE KEY_FILE] [-- URL CA_FILE ...]\n");
        return 2;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !OPENSSL_init_ssl(0, NULL) ||
        uv_loop_init(&loop) != 0 || !yaml_parser_initialize(&yp))
        return 1;
    xmlInitParser();
    while (i + 1 < argc) {
        const char *url = argv[i], *ca = argv[i + 1], *cert = NULL, *key = NULL;

        i += 2;
        if (i + 1 < argc && strcmp(argv[i], "--") != 0) {
            cert = argv[i];
            key = argv[i + 1];
            i += 2;
        }
        if (i < argc && strcmp(argv[i], "--") == 0)
            i++;
        if (get(url, ca, cert, key) != 0)
            return 1;
    }
    doc = xmlReadMemory(xml, sizeof(xml) - 1, "floor.xml", NULL, XML_PARSE_NONET);
    json = cJSON_Parse("{\"kind\":\"VmGroup\",\"spec\":{\"replicas\":1}}");
    if (!doc || !json)
        return 1;
    xmlFreeDoc(doc);
    cJSON_Delete(json);
    yaml_parser_delete(&yp);
    uv_run(&loop, UV_RUN_NOWAIT);
    printf("rss_kib=%ld anon_kib=%ld file_kib=%ld\n", status_kib("VmRSS"), status_kib("RssAnon"),
           status_kib("RssFile"));
    uv_loop_close(&loop);
    curl_global_cleanup();
    return 0;
}
