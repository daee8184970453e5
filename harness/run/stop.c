/* Stopping a run by signal (harness/run/stop.h). */
#include "harness/run/stop.h"

#include <signal.h>
#include <string.h>

volatile sig_atomic_t dt_stop_requested;

static void on_stop_signal(int sig) { dt_stop_requested = sig; }

void dt_stop_install_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL); /* a closed terminal: stop like SIGTERM, resumable */
}
