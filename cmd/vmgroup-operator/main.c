/* main.c: vmgroup-operator's entry point: flags and environment -> options
 * -> the manager (controller/manager.c). Nothing else lives here. */
#include <stdio.h>

#include "controller/manager.h"
#include "lib/err.h"
#include "lib/options.h"

int main(int argc, char **argv)
{
    struct vmg_options opts;
    char err[512];
    int r;

    vmg_options_defaults(&opts);
    r = vmg_options_parse(&opts, argc, argv, NULL, err, sizeof(err));
    if (r == 1)
        return 0;
    if (r == 0)
        r = vmg_options_check(&opts, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "vmgroup-operator: %s\n", err);
        return 2;
    }
    return manager_run(&opts);
}
