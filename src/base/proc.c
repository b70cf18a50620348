/* proc.c - whether a process on this host is gone (proc.h). */
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

/* The state letter in /proc/<pid>/stat ("pid (comm) S ..."; comm may hold
 * spaces and parentheses, so it is found after the last ')'), or 0 when it
 * cannot be read. */
static char proc_state(pid_t pid)
{
    char    path[32], buf[512];
    ssize_t n;
    int     fd;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) /* no /proc here: kill(2)'s answer stands */
        return 0;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n]      = '\0';
    char *close = strrchr(buf, ')');
    return close != NULL && close[1] == ' ' ? close[2] : 0;
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
