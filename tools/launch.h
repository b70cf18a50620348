/*
 * launch.h - starting and reaping a set of local rank processes; shared by
 * hcomm-run and hcomm-perf (which forks its ranks when run alone).
 *
 * Copyright (c) 2026 The hcomm authors. SPDX-License-Identifier: BSD-3-Clause
 */
#ifndef HCOMM_TOOLS_LAUNCH_H
#define HCOMM_TOOLS_LAUNCH_H

#include <signal.h>
#include <sys/types.h>

/* Grace between SIGTERM and SIGKILL when ranks are torn down. */
#define LAUNCH_GRACE_S 2.0

/*
 * Blocks SIGCHLD, SIGINT, SIGTERM and SIGHUP (saving the old mask in *old) so
 * that launch_wait receives them synchronously; call before the first fork.
 * Returns 0, or -1 with errno set.
 */
int launch_block_signals(sigset_t *old);

/* In a child right after fork: restores the mask saved by launch_block_signals. */
void launch_child_restore(const sigset_t *old);

/*
 * Waits until the n processes in pids (rank i = pids[i]; entries <= 0 are
 * ignored) have all exited. SIGINT/SIGTERM/SIGHUP received meanwhile are
 * forwarded to every live rank. The first rank to exit non-zero or die by a
 * signal is reported on stderr ("TAG: rank R exited with status S") and,
 * unless keep_going, the others get SIGTERM, then SIGKILL after
 * LAUNCH_GRACE_S. timeout_s > 0 tears everything down after that many
 * seconds.
 * Returns 0 when all exited 0, the first failure's status (128 + signo for a
 * signal), or 124 on timeout.
 */
int launch_wait(const pid_t *pids, int n, double timeout_s, const char *tag, int keep_going);

/* Tears down the n already started ranks (SIGTERM, grace, SIGKILL) and reaps them. */
void launch_abort(const pid_t *pids, int n, const char *tag);

#endif /* HCOMM_TOOLS_LAUNCH_H */
