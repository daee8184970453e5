/* A run stops between steps: SIGINT, SIGTERM and SIGHUP (a closed terminal) set a flag that
 * the training loop, the overhead protocol, the matrix and the benchmark read before each
 * step; the replica then writes its checkpoint and manifest ("interrupted", resumable). */
#ifndef DT_RUN_STOP_H
#define DT_RUN_STOP_H

#include <signal.h>

/* The signal that asked to stop, 0 while none has (written by the handler: the one type
 * a handler may write and the loop read, sig_atomic_t). */
extern volatile sig_atomic_t dt_stop_requested;
/* Install the handlers (once per process; a second call is harmless). */
void dt_stop_install_handlers(void);

#endif
