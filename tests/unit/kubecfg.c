/* kubecfg.c: a kubeconfig for a loopback API server, for the unit tests of
 * kube/ and controller/ (see unit.h). */
#include "tests/unit/unit.h"

#include <stdio.h>
#include <unistd.h>

static const char *no_env(void *data, const char *name)
{
    (void)data;
    (void)name;
    return NULL;
}

kcfg *unit_loopback_kcfg(const char *dir, int port, const char *user_yaml)
{
    struct kcfg_opts o = {.getenv = no_env};
    char path[256], text[4096], err[512] = "";
    kcfg *c = NULL;
    FILE *f;

    assert_true((size_t)snprintf(path, sizeof(path), "%s/config", dir) < sizeof(path));
    assert_true((size_t)snprintf(text, sizeof(text),
                                 "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                                 "    server: http://127.0.0.1:%d\nusers:\n- name: u\n  user:\n%s"
                                 "contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n"
                                 "current-context: x\n",
                                 port, user_yaml) < sizeof(text));
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    o.kubeconfig = path;
    if (kcfg_load(&o, &c, err, sizeof(err)) != 0)
        fail_msg("kcfg_load: %s", err);
    unlink(path);
    return c;
}
