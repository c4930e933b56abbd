/*
 * pause: the pod sandbox of the tests' one-node cluster. It holds the pod's
 * namespaces and does nothing else: it reaps the children that end up with
 * it (it is the pod's PID 1 when the pod shares its process namespace) and
 * exits at SIGINT or SIGTERM. Built static, it is the only file of the
 * image that hack/env/images/build makes from it.
 */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig)
{
    (void)sig;
    _exit(0);
}

static void on_child(int sig)
{
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void)
{
    struct sigaction stop = {.sa_handler = on_stop};
    struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};

    sigemptyset(&stop.sa_mask);
    sigemptyset(&child.sa_mask);
    if (sigaction(SIGINT, &stop, NULL) != 0 || sigaction(SIGTERM, &stop, NULL) != 0 ||
        sigaction(SIGCHLD, &child, NULL) != 0) {
        perror("pause: sigaction");
        return 1;
    }
    for (;;)
        pause();
}
