/*
 * launch.c - reaping local rank processes: signals are blocked and received
 * with sigtimedwait, so the waiting is synchronous, race-free and never busy.
 *
 * Copyright (c) 2026 The hcomm authors. SPDX-License-Identifier: BSD-3-Clause
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sigabbrev_np, getrandom */
#endif
#include "launch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

/* Longest single sleep: a safety net should a SIGCHLD ever go missing. */
#define LAUNCH_MAX_SLEEP_S 1.0

typedef struct {
    const pid_t *pids;
    char        *alive;
    int          n;
    int          nalive;
    int          status;      /* exit status to return */
    int          failed;      /* a failure (or timeout) was already reported */
    int          terminating; /* SIGTERM sent; SIGKILL due at kill_at */
    int          killed;      /* SIGKILL sent */
    double       kill_at;
    const char  *tag;
    int          keep_going; /* a failed rank leaves the others running */
} launch_state_t;

static void fill_sigset(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGCHLD);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
}

int launch_block_signals(sigset_t *old)
{
    sigset_t set;

    fill_sigset(&set);
    if (sigprocmask(SIG_BLOCK, &set, old) != 0)
        return -1;
    return 0;
}

void launch_child_restore(const sigset_t *old)
{
    sigprocmask(SIG_SETMASK, old, NULL);
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *signal_name(int sig, char *buf, size_t len)
{
    const char *abbrev = sigabbrev_np(sig);

    if (abbrev != NULL)
        snprintf(buf, len, "SIG%s", abbrev);
    else
        snprintf(buf, len, "%d", sig);
    return buf;
}

/* A rank that leads its own process group (hcomm-run's) is signalled with
 * everything it started, so a wrapper script's children do not outlive the
 * job; a live child's pid names no other group. */
static void signal_all(launch_state_t *s, int sig)
{
    for (int i = 0; i < s->n; i++) {
        if (s->alive[i] && kill(-s->pids[i], sig) != 0)
            kill(s->pids[i], sig);
    }
}

static void terminate_all(launch_state_t *s)
{
    if (s->terminating)
        return;
    s->terminating = 1;
    s->kill_at     = now_s() + LAUNCH_GRACE_S;
    signal_all(s, SIGTERM);
}

static void report_exit(launch_state_t *s, int rank, int wstatus)
{
    char name[32];

    if (WIFEXITED(wstatus)) {
        if (WEXITSTATUS(wstatus) == 0 || s->failed)
            return;
        s->status = WEXITSTATUS(wstatus);
        fprintf(stderr, "%s: rank %d exited with status %d\n", s->tag, rank, s->status);
    } else if (WIFSIGNALED(wstatus)) {
        if (s->failed)
            return;
        s->status = 128 + WTERMSIG(wstatus);
        fprintf(stderr, "%s: rank %d killed by signal %s\n", s->tag, rank,
                signal_name(WTERMSIG(wstatus), name, sizeof(name)));
    } else {
        return;
    }
    s->failed = 1;
    if (!s->keep_going)
        terminate_all(s);
}

/* Reaps every child that has exited; returns -1 when none are left to wait for. */
static int reap(launch_state_t *s)
{
    for (;;) {
        int   wstatus;
        pid_t pid = waitpid(-1, &wstatus, WNOHANG);

        if (pid == 0)
            return 0;
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            return -1; /* ECHILD: nothing left */
        }
        for (int i = 0; i < s->n; i++) {
            if (s->alive[i] && s->pids[i] == pid) {
                s->alive[i] = 0;
                s->nalive--;
                report_exit(s, i, wstatus);
                break;
            }
        }
    }
}

static double next_sleep(const launch_state_t *s, double deadline)
{
    double t       = now_s();
    double sleep_s = LAUNCH_MAX_SLEEP_S;

    if (deadline > 0 && !s->failed && deadline - t < sleep_s)
        sleep_s = deadline - t;
    if (s->terminating && !s->killed && s->kill_at - t < sleep_s)
        sleep_s = s->kill_at - t;
    return sleep_s > 0 ? sleep_s : 0;
}

static void wait_loop(launch_state_t *s, double deadline)
{
    sigset_t set;

    fill_sigset(&set);
    while (s->nalive > 0) {
        double          sl  = next_sleep(s, deadline);
        struct timespec ts  = {(time_t)sl, (long)((sl - (double)(time_t)sl) * 1e9)};
        int             sig = sigtimedwait(&set, NULL, &ts);

        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
            signal_all(s, sig);
        if (reap(s) < 0)
            break;
        if (deadline > 0 && !s->failed && now_s() >= deadline) {
            fprintf(stderr, "%s: timed out, killing %d rank(s)\n", s->tag, s->nalive);
            s->status = 124;
            s->failed = 1;
            terminate_all(s);
        }
        if (s->terminating && !s->killed && now_s() >= s->kill_at) {
            s->killed = 1;
            signal_all(s, SIGKILL);
        }
    }
}

static int run_wait(const pid_t *pids, int n, double timeout_s, const char *tag, int abort_now,
                    int keep_going)
{
    launch_state_t s        = {.pids = pids, .n = n, .tag = tag, .keep_going = keep_going};
    double         deadline = timeout_s > 0 ? now_s() + timeout_s : 0;

    s.alive = calloc((size_t)(n > 0 ? n : 1), 1);
    if (s.alive == NULL) {
        fprintf(stderr, "%s: out of memory\n", tag);
        abort_now = 1;
    }
    for (int i = 0; i < n && s.alive != NULL; i++) {
        s.alive[i] = pids[i] > 0;
        s.nalive += s.alive[i];
    }
    if (s.alive == NULL) {
        /* No bookkeeping possible: kill hard and reap whatever exits. */
        for (int i = 0; i < n; i++) {
            if (pids[i] > 0)
                kill(pids[i], SIGKILL);
        }
        while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
            ;
        return 1;
    }
    if (abort_now) {
        s.failed = 1;
        s.status = 1;
        terminate_all(&s);
    }
    wait_loop(&s, deadline);
    free(s.alive);
    return s.status;
}

int launch_wait(const pid_t *pids, int n, double timeout_s, const char *tag, int keep_going)
{
    return run_wait(pids, n, timeout_s, tag, 0, keep_going);
}

void launch_abort(const pid_t *pids, int n, const char *tag)
{
    run_wait(pids, n, 0, tag, 1, 0);
}
