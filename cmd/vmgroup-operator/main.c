/* main.c: vmgroup-operator's entry point: flags and environment -> options
 * -> wiring of the manager on one libuv loop. Nothing else lives here. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "lib/err.h"
#include "lib/options.h"

struct app {
    uv_loop_t loop;
    uv_signal_t sigterm;
    uv_signal_t sigint;
    int stopping;
};

static void on_signal(uv_signal_t *h, int signum)
{
    struct app *app = h->data;

    if (app->stopping)
        return;
    app->stopping = 1;
    fprintf(stderr, "{\"level\":\"info\",\"logger\":\"manager\",\"msg\":\"received %s, stopping\"}\n",
            signum == SIGTERM ? "SIGTERM" : "SIGINT");
    uv_signal_stop(&app->sigterm);
    uv_signal_stop(&app->sigint);
}

static void on_close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

int main(int argc, char **argv)
{
    struct vmg_options opts;
    struct app app;
    char err[512];
    int r;

    vmg_options_defaults(&opts);
    r = vmg_options_parse(&opts, argc, argv, NULL, err, sizeof(err));
    if (r == 1)
        return 0;
    if (r < 0) {
        fprintf(stderr, "vmgroup-operator: %s\n", err);
        return 2;
    }
    r = vmg_options_check(&opts, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "vmgroup-operator: %s\n", err);
        return 2;
    }

    signal(SIGPIPE, SIG_IGN);
    memset(&app, 0, sizeof(app));
    if (uv_loop_init(&app.loop) != 0) {
        fprintf(stderr, "vmgroup-operator: cannot initialize the event loop\n");
        return 1;
    }
    uv_signal_init(&app.loop, &app.sigterm);
    uv_signal_init(&app.loop, &app.sigint);
    app.sigterm.data = app.sigint.data = &app;
    uv_signal_start(&app.sigterm, on_signal, SIGTERM);
    uv_signal_start(&app.sigint, on_signal, SIGINT);

    uv_run(&app.loop, UV_RUN_DEFAULT);

    uv_walk(&app.loop, on_close_walk, NULL);
    uv_run(&app.loop, UV_RUN_DEFAULT);
    uv_loop_close(&app.loop);
    return 0;
}
