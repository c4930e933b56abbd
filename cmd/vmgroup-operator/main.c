/* main.c: vmgroup-operator's entry point: flags and environment -> options
 * -> the manager (controller/manager.c). Nothing else lives here. */
#include <errno.h>
#include <stdio.h>

#include <openssl/crypto.h>

#include "controller/manager.h"
#include "lib/err.h"
#include "lib/options.h"
#include "lib/wipealloc.h"

int main(int argc, char **argv)
{
    struct vmg_options opts;
    char err[512];
    int r, code;

    /* First: OpenSSL takes its allocator only before it has allocated. */
    r = vmg_wipe_allocators(NULL);
    if (r < 0)
        fprintf(stderr, "vmgroup-operator: warning: %s does not wipe what it frees: %s\n",
                r == -EBUSY ? "OpenSSL (nor libcurl)" : "libcurl", vmg_strerror(r));
    vmg_options_defaults(&opts);
    /* VC_PASS leaves the environment here: the password lives in opts. */
    r = vmg_options_parse(&opts, argc, argv, NULL, err, sizeof(err));
    if (r == 0)
        r = vmg_options_check(&opts, err, sizeof(err));
    if (r == 1) {
        code = 0;
    } else if (r < 0) {
        fprintf(stderr, "vmgroup-operator: %s\n", err);
        code = 2;
    } else {
        code = manager_run(&opts);
    }
    OPENSSL_cleanse(opts.vc_pass_buf, sizeof(opts.vc_pass_buf));
    return code;
}
