/* proc.c - whether a process on this host is gone, where a thread runs (proc.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "base/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int hc_proc_open(pid_t pid)
{
#ifdef SYS_pidfd_open
    if (pid > 0)
        return (int)syscall(SYS_pidfd_open, pid, 0);
#endif
    (void)pid;
    return -1;
}

/* What follows "pid (comm) " in the stat file at path (comm may hold spaces
 * and parentheses, so it ends at the last ')'): the fields from the state on,
 * in buf; NULL when it cannot be read. */
static const char *proc_stat(const char *path, char *buf, size_t size)
{
    ssize_t n;
    int     fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) /* no /proc here */
        return NULL;
    n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0)
        return NULL;
    buf[n]      = '\0';
    char *close = strrchr(buf, ')');
    return close != NULL && close[1] == ' ' ? close + 2 : NULL;
}

/* The state letter in /proc/<pid>/stat, or 0 when it cannot be read. */
static char proc_state(pid_t pid)
{
    char        path[32], buf[512];
    const char *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = proc_stat(path, buf, sizeof(buf));
    return f != NULL ? f[0] : 0; /* none: kill(2)'s answer stands */
}

int hc_proc_cpu(pid_t pid, pid_t tid)
{
    char        path[64], buf[1024];
    const char *f;
    int         cpu = -1;

    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    f = proc_stat(path, buf, sizeof(buf));
    /* the state is field 3 of proc(5)'s list, the processor field 39 */
    for (int field = 3; f != NULL && field < 39; field++) {
        f = strchr(f, ' ');
        f = f != NULL ? f + 1 : NULL;
    }
    if (f == NULL || sscanf(f, "%d", &cpu) != 1)
        return -1;
    return cpu;
}

int hc_proc_gone(pid_t pid, int pidfd)
{
    if (pidfd >= 0) {
        struct pollfd p = {.fd = pidfd, .events = POLLIN};
        return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
    }
    if (pid <= 0)
        return 0;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 1;
    char st = proc_state(pid);
    return st == 'Z' || st == 'X';
}
