/* proc.h - whether a process on this host is gone, and where one of its
 * threads runs. kill(pid, 0) alone also
 * finds a zombie (dead, not yet reaped by its parent), so a peer whose
 * launcher was busy elsewhere looked alive until HCOMM_TIMEOUT. */
#ifndef HC_BASE_PROC_H
#define HC_BASE_PROC_H

#include <sys/types.h>

/* A pidfd for pid (readable once it has exited, zombie or not), or -1 where
 * the kernel has none or pid is not valid; close it with close(). */
int hc_proc_open(pid_t pid);

/* 1 when pid has exited: it is gone, a zombie, or its pidfd (>= 0, from
 * hc_proc_open) says so; 0 while it runs or cannot be told (pid <= 0). */
int hc_proc_gone(pid_t pid, int pidfd);

/* The CPU thread tid of process pid runs on, or last ran on; -1 when it
 * cannot be read (no such thread, no /proc). */
int hc_proc_cpu(pid_t pid, pid_t tid);

#endif
