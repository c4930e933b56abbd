/* fuzz_exec_cred.c: libFuzzer target for what an exec credential plugin
 * prints, parsed as kcfg_exec_refresh does (ExecCredential JSON, its token,
 * its PEM client certificate and key, its RFC 3339 expiry). A credential
 * that parses must be usable (a printable token, or a certificate with its
 * key); one that does not must say why without quoting the token or key.
 *
 * fuzz-sources: kube/kubeconfig.c lib/err.c
 * fuzz-sources: kube/cred.c kube/exec.c lib/jsonwipe.c kube/kfile.c lib/str.c lib/file.c
 * fuzz-sources: lib/buf.c lib/backoff.c lib/bucket.c lib/clock.c lib/b64.c
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "kube/kubeconfig.h"
#include "lib/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define API "client.authentication.k8s.io/v1"

/* secret_of returns status[name] of the input when it is a string that
 * cannot appear in a message by chance: one with a byte that none of the
 * messages' own words (nor the command or apiVersion they name) holds. */
static const char *secret_of(const cJSON *j, const char *name)
{
    const cJSON *v =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "status"), name);
    return cJSON_IsString(v) && strpbrk(v->valuestring, "#|@!%^*~$") ? v->valuestring : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kcfg_testing_cred cr;
    char msg[1024];
    char *out;
    int r;

    if (size > (1u << 20))
        return 0;
    /* The plugin's output as the refresh holds it: NUL-terminated. */
    out = malloc(size + 1);
    if (!out)
        return 0;
    memcpy(out, data, size);
    out[size] = '\0';
    msg[0] = '\0';
    r = kcfg_testing_parse_cred(out, size, API, &cr, msg, sizeof(msg));
    if (r == 0) {
        if (!cr.token && !cr.cert)
            abort();
        if (!cr.cert != !cr.key || (cr.cert && (!cr.cert_len || !cr.key_len)))
            abort();
        if (cr.token) {
            if (!cr.token[0])
                abort();
            for (const char *p = cr.token; *p; p++)
                if ((unsigned char)*p < 0x20 || *p == 0x7f)
                    abort();
        }
        kcfg_testing_cred_clear(&cr);
    } else {
        cJSON *j = cJSON_ParseWithLength(out, size);
        const char *tok = secret_of(j, "token"), *key = secret_of(j, "clientKeyData");

        if (r != VMG_EPARSE && r != -ENOMEM)
            abort();
        if (!msg[0] || cr.token || cr.cert || cr.key)
            abort();
        if ((tok && strstr(msg, tok)) || (key && strstr(msg, key)))
            abort();
        cJSON_Delete(j);
    }
    free(out);
    return 0;
}
