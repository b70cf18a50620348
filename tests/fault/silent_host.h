/* silent_host.h - a rank that plays a crashed or partitioned host: it stops
 * (SIGSTOP), and a filler process fills the accept queue of each of its TCP
 * listeners, so that its kernel drops the SYNs of every new connection, as a
 * host that is gone never answers them. Loopback only: the listeners are the
 * rank's own, found in /proc. */
#ifndef HC_TEST_SILENT_HOST_H
#define HC_TEST_SILENT_HOST_H

/* The calling rank goes silent: it starts the filler (argv0 run as
 * "argv0 fill PID DIR WAIT") and stops. The filler touches DIR/filled once new
 * SYNs are dropped, holds the queues full until WAIT files DIR/done.* exist
 * (or 60 s passed, or the rank is gone), then lets them go and continues the
 * rank; this returns then. A filler that could not touches DIR/unfilled and
 * continues the rank at once ("silent_host: cannot: ..." where this machine's
 * open-file limit is too low: a SKIP). */
void silent_host_go(const char *argv0, const char *dir, int wait);

/* The filler's main, for argv[1] == "fill": 0, or 1 when it could not. */
int silent_host_fill(int argc, char **argv);

/* Waits up to secs for DIR/filled: 1 when it came, 0 otherwise. */
int silent_host_wait_filled(const char *dir, double secs);

/* Touches DIR/done.RANK: this rank no longer needs the silence. */
void silent_host_done(const char *dir, int rank);

#endif
