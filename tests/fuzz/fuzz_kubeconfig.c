/* fuzz_kubeconfig.c: libFuzzer target for kubeconfig files (YAML, the
 * base64 "-data" fields, PEM certificates and keys, server URLs). Each
 * input is written as the --kubeconfig file, in a folder that also holds
 * the unit fixtures' ca.crt, client.crt, client.key and token, so that
 * relative references resolve; a configuration that loads must give a
 * usable server URL and namespace and apply to a curl handle, and one that
 * does not must say why. Exec plugins are never run.
 *
 * Inputs that could name a device or a kernel file (/dev/stdin or
 * /proc/kmsg would block the run) are skipped: those holding "/dev",
 * "/proc", "/sys" or "/run" (a relative path resolves under the folder, in
 * /tmp), or a YAML escape that could spell them (hex, or an escaped line
 * break that joins two lines).
 *
 * fuzz-sources: kube/kubeconfig.c lib/err.c
 * fuzz-sources: kube/cred.c kube/exec.c lib/jsonwipe.c kube/kfile.c lib/str.c lib/file.c
 * fuzz-sources: lib/buf.c lib/backoff.c lib/bucket.c lib/clock.c lib/b64.c
 * fuzz-seeds: tests/unit/fixtures/kubeconfig/relative.yaml
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "kube/kubeconfig.h"
#include "lib/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];
static char path[128];

static const char *no_env(void *data, const char *name)
{
    (void)data;
    (void)name;
    return NULL;
}

static void copy_fixture(const char *name)
{
    char src[256], dst[256], buf[8192];
    FILE *in, *out;
    size_t n;

    snprintf(src, sizeof(src), "tests/unit/fixtures/kubeconfig/%s", name);
    snprintf(dst, sizeof(dst), "%s/%s", dir, name);
    in = fopen(src, "rb");
    if (!in)
        return;
    out = fopen(dst, "wb");
    if (out) {
        while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
            fwrite(buf, 1, n, out);
        fclose(out);
    }
    fclose(in);
}

static void cleanup(void)
{
    static const char *const files[] = {"ca.crt", "client.crt", "client.key", "token", "config"};
    char p[256];

    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

static int setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/fuzz-kubeconfig-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    copy_fixture("ca.crt");
    copy_fixture("client.crt");
    copy_fixture("client.key");
    copy_fixture("token");
    snprintf(path, sizeof(path), "%s/config", dir);
    atexit(cleanup);
    return 0;
}

static int risky(const uint8_t *data, size_t size)
{
    static const char *const words[] = {"/dev", "/proc", "/sys", "/run", "\\x",
                                        "\\u",  "\\U",   "\\\n", "\\\r"};

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (memmem(data, size, words[i], strlen(words[i])))
            return 1;
    return 0;
}

static void check_loaded(kcfg *c)
{
    struct kcfg_testing_view v;
    struct curl_slist *h = NULL;
    const char *srv = kcfg_server(c);
    CURL *easy;
    int r;

    if (strncmp(srv, "https://", 8) != 0 && strncmp(srv, "http://", 7) != 0)
        abort();
    for (const char *p = srv; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            abort();
    if (srv[strlen(srv) - 1] == '/' || !kcfg_namespace(c)[0] || !kcfg_source(c)[0])
        abort();
    kcfg_testing_view(c, &v);
    if (!v.cert != !v.key)
        abort();
    easy = curl_easy_init();
    if (!easy)
        return;
    r = kcfg_apply(c, easy, &h);
    if (r == -EAGAIN && !kcfg_has_exec(c))
        abort();
    if (r == 0 && h) {
        if (strncmp(h->data, "Authorization: Bearer ", 22) != 0 || h->next)
            abort();
        for (const char *p = h->data; *p; p++)
            if ((unsigned char)*p < ' ' || *p == 0x7f)
                abort();
    }
    curl_slist_free_all(h);
    curl_easy_cleanup(easy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    struct kcfg_opts o = {.kubeconfig = path, .getenv = no_env, .exec_timeout_ms = 1};
    char err[512];
    kcfg *c = NULL;
    FILE *f;
    int r;

    if (!ready) {
        if (setup() < 0)
            abort();
        ready = 1;
    }
    if (size > 256 * 1024 || risky(data, size))
        return 0;
    f = fopen(path, "wb");
    if (!f)
        abort();
    if (size && fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);
    o.incluster_dir = dir;
    err[0] = '\0';
    r = kcfg_load(&o, &c, err, sizeof(err));
    if (r == 0) {
        if (!c)
            abort();
        check_loaded(c);
        kcfg_free(c);
    } else {
        if (c || !err[0])
            abort();
        if (r != VMG_ECONFIG && r != VMG_EPARSE && r != -ENOMEM && r != VMG_ETOOBIG)
            abort();
    }
    return 0;
}
