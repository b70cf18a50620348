/*
 * hcomm_run.c - hcomm-run, the local launcher: starts N ranks of a program with
 * HCOMM_RANK, HCOMM_NRANKS, HCOMM_ROOT and HCOMM_COOKIE set, forwards signals,
 * brings every rank down when one fails, and removes what killed ranks left
 * of the job in /dev/shm.
 *
 * Copyright (c) 2026 The hcomm authors. SPDX-License-Identifier: BSD-3-Clause
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sigabbrev_np, getrandom */
#endif
#include "launch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/auth.h"

#define TAG "hcomm-run"
#define MAX_RANKS 4096

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: hcomm-run -n N [--timeout SEC] [--nccl] [-k] PROGRAM [ARGS...]\n"
            "Starts N ranks of PROGRAM on this host, each with the environment of\n"
            "hcomm-run plus:\n"
            "  HCOMM_RANK    the rank, 0 .. N-1\n"
            "  HCOMM_NRANKS  N\n"
            "  HCOMM_ROOT    127.0.0.1:PORT, where rank 0 listens\n"
            "  HCOMM_ROOT_FD rank 0 only: the socket listening there, bound by hcomm-run\n"
            "  HCOMM_COOKIE  32 random hex digits, the job's secret\n"
            "Options:\n"
            "  -n, --np N         number of ranks (required, 1 .. %d)\n"
            "  -t, --timeout SEC  kill every rank after SEC seconds and exit 124\n"
            "      --nccl         run a program built for NCCL on hcomm's libnccl.so.2:\n"
            "                     puts %s first on LD_LIBRARY_PATH\n"
            "  -k, --keep-going   a rank that fails leaves the others running (jobs\n"
            "                     that survive a failure: hcomm_comm_shrink)\n"
            "  -h, --help         show this help\n"
            "SIGINT, SIGTERM and SIGHUP are forwarded to every rank. When a rank exits\n"
            "non-zero or dies by a signal, the others get SIGTERM, then SIGKILL %.0f s\n"
            "later (with -k they go on), and hcomm-run exits with that rank's status\n"
            "(128 + signal number for a signal). Exit status: 0 when every rank exited 0; 124 on "
            "timeout;\n"
            "127 when PROGRAM cannot be executed; 2 on bad usage.\n",
            MAX_RANKS, HCOMM_NCCL_LIBDIR, LAUNCH_GRACE_S);
}

typedef struct {
    int    nranks;
    int    nccl; /* --nccl: hcomm's libnccl.so.2 first on the library path */
    double timeout_s;
    int    keep_going; /* -k: a failed rank does not bring the others down */
    char **argv; /* program and its arguments, NULL-terminated */
} run_opts_t;

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    long  v;

    errno = 0;
    v     = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_opts(int argc, char **argv, run_opts_t *o)
{
    static const struct option longopts[] = {
        {"np", required_argument, NULL, 'n'}, {"timeout", required_argument, NULL, 't'},
        {"nccl", no_argument, NULL, 'N'},     {"keep-going", no_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},     {NULL, 0, NULL, 0},
    };
    int   c;
    long  v;
    char *end;

    o->nranks    = 0;
    o->nccl      = 0;
    o->timeout_s  = 0;
    o->keep_going = 0;
    /* '+': stop at the program name, its options are its own. */
    while ((c = getopt_long(argc, argv, "+n:t:kh", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (parse_int(optarg, 1, MAX_RANKS, &v) != 0) {
                fprintf(stderr, TAG ": -n needs a rank count in 1 .. %d, not '%s'\n", MAX_RANKS,
                        optarg);
                return 2;
            }
            o->nranks = (int)v;
            break;
        case 't':
            errno        = 0;
            o->timeout_s = strtod(optarg, &end);
            if (errno != 0 || end == optarg || *end != '\0' || !(o->timeout_s > 0)) {
                fprintf(stderr, TAG ": --timeout needs a positive number of seconds, not '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'N':
            o->nccl = 1;
            break;
        case 'k':
            o->keep_going = 1;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            fprintf(stderr, TAG ": try 'hcomm-run --help'\n");
            return 2;
        }
    }
    if (o->nranks == 0 || optind >= argc) {
        fprintf(stderr, TAG ": %s\n", o->nranks == 0 ? "-n N is required" : "no program given");
        fprintf(stderr, "Usage: hcomm-run -n N [--timeout SEC] [--nccl] [-k] PROGRAM [ARGS...]\n");
        return 2;
    }
    o->argv = argv + optind;
    return 0;
}

/* The root's socket, listening on a free port of 127.0.0.1 and handed to rank
 * 0 as HCOMM_ROOT_FD: a port chosen by bind-and-close could be taken by
 * another process before rank 0 bound it. Close-on-exec, so that only rank 0,
 * which clears the flag, inherits it. */
static int root_socket(int *port)
{
    struct sockaddr_in sa  = {.sin_family = AF_INET};
    socklen_t          len = sizeof(sa);
    int                fd  = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        fprintf(stderr, TAG ": socket: %s\n", strerror(errno));
        return -1;
    }
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        fprintf(stderr, TAG ": cannot listen on a free port of 127.0.0.1: %s\n", strerror(errno));
        close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

static int make_cookie(char *hex, size_t len, uint8_t raw[16])
{
    size_t got = 0;

    if (len < 2 * 16 + 1)
        return -1;
    while (got < 16) {
        ssize_t r = getrandom(raw + got, 16 - got, 0);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            fprintf(stderr, TAG ": getrandom: %s\n", strerror(errno));
            return -1;
        }
        got += (size_t)r;
    }
    for (size_t i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

/* libfabric's shm provider names a rank's region "<pid>:<n>:<n>" in /dev/shm
 * and removes it when the endpoint closes: 1 for such a name of one of the
 * ranks' processes (ours: a rank's pid is not reused before we reap it). */
static int rank_region(const char *name, const pid_t *pids, int n)
{
    char *end;
    long  pid = strtol(name, &end, 10);

    if (end == name || *end != ':' || strchr(end + 1, ':') == NULL)
        return 0;
    for (int r = 0; r < n; r++)
        if (pids[r] > 0 && pids[r] == pid)
            return 1;
    return 0;
}

/* Once every rank has exited: the job's objects in /dev/shm, which a rank
 * killed before it could unlink them left, go. hcomm's names carry the public
 * name of the job's secret (docs/security.md), so no other job's match; a
 * fabric library's regions carry the rank's pid. */
static void sweep_shm(const uint8_t cookie[16], const pid_t *pids, int nranks)
{
    int            n = hc_auth_shm_sweep(cookie, NULL, NULL);
    DIR           *d = opendir("/dev/shm");
    struct dirent *e;

    while (d != NULL && (e = readdir(d)) != NULL)
        if (rank_region(e->d_name, pids, nranks))
            n += unlinkat(dirfd(d), e->d_name, 0) == 0;
    if (d != NULL)
        closedir(d);
    if (n > 0)
        fprintf(stderr, TAG ": removed %d object(s) the job left in /dev/shm\n", n);
}

/* The job's variables (its secret in raw); the root's listening socket in *root_fd. */
static int set_job_env(int nranks, int *root_fd, uint8_t raw[16])
{
    char root[64], cookie[33], num[16];
    int  port;

    if (make_cookie(cookie, sizeof(cookie), raw) != 0 || (*root_fd = root_socket(&port)) < 0)
        return -1;
    snprintf(root, sizeof(root), "127.0.0.1:%d", port);
    snprintf(num, sizeof(num), "%d", nranks);
    if (setenv("HCOMM_ROOT", root, 1) != 0 || setenv("HCOMM_COOKIE", cookie, 1) != 0 ||
        setenv("HCOMM_NRANKS", num, 1) != 0) {
        fprintf(stderr, TAG ": setenv: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

/* --nccl: hcomm's drop-in directory ahead of whatever LD_LIBRARY_PATH holds,
 * so that the ranks load hcomm's libnccl.so.2 and not another NCCL. */
static int set_nccl_env(void)
{
    const char *old = getenv("LD_LIBRARY_PATH");
    char        path[PATH_MAX * 2];
    int         n = snprintf(path, sizeof(path), "%s%s%s", HCOMM_NCCL_LIBDIR,
                             old != NULL && *old != '\0' ? ":" : "", old != NULL ? old : "");
    if (n < 0 || (size_t)n >= sizeof(path) || setenv("LD_LIBRARY_PATH", path, 1) != 0) {
        fprintf(stderr, TAG ": cannot set LD_LIBRARY_PATH for --nccl\n");
        return -1;
    }
    return 0;
}

/* Whether execvp would find an executable file for prog (checked up front so a
 * typo gives one clear message instead of N failing ranks). */
static int findable(const char *prog)
{
    const char *path = getenv("PATH");
    char        buf[PATH_MAX];
    struct stat st;

    if (strchr(prog, '/') != NULL)
        return access(prog, X_OK) == 0 && stat(prog, &st) == 0 && S_ISREG(st.st_mode);
    if (path == NULL)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path != '\0') {
        size_t dlen = strcspn(path, ":");
        /* An empty PATH entry means the current directory. */
        int n = dlen ? snprintf(buf, sizeof(buf), "%.*s/%s", (int)dlen, path, prog)
                     : snprintf(buf, sizeof(buf), "./%s", prog);

        if (n > 0 && (size_t)n < sizeof(buf) && access(buf, X_OK) == 0 && stat(buf, &st) == 0 &&
            S_ISREG(st.st_mode))
            return 1;
        path += dlen + (path[dlen] == ':');
    }
    return 0;
}

static void exec_rank(int rank, char **argv, const sigset_t *oldmask, int root_fd, pid_t launcher)
{
    char num[16], fd[16];

    launch_child_restore(oldmask);
    /* its own group, so the launcher's signals reach what it starts; out of
     * the launcher's group, so it dies with a launcher that was killed */
    (void)setpgid(0, 0);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher)
        _exit(127);
    snprintf(num, sizeof(num), "%d", rank);
    snprintf(fd, sizeof(fd), "%d", root_fd);
    if (rank == 0 && (fcntl(root_fd, F_SETFD, 0) != 0 || setenv("HCOMM_ROOT_FD", fd, 1) != 0)) {
        fprintf(stderr, TAG ": rank 0: cannot hand over the root socket: %s\n", strerror(errno));
        _exit(127);
    }
    if (setenv("HCOMM_RANK", num, 1) != 0) {
        fprintf(stderr, TAG ": rank %d: setenv: %s\n", rank, strerror(errno));
        _exit(127);
    }
    execvp(argv[0], argv);
    fprintf(stderr, TAG ": rank %d: cannot execute '%s': %s\n", rank, argv[0], strerror(errno));
    _exit(127);
}

int main(int argc, char **argv)
{
    run_opts_t o;
    sigset_t   oldmask;
    pid_t     *pids;
    int        root_fd = -1;
    uint8_t    cookie[16];
    int        rc = parse_opts(argc, argv, &o);

    if (rc != 0)
        return rc;
    if (!findable(o.argv[0])) {
        fprintf(stderr, TAG ": cannot execute '%s': %s\n", o.argv[0],
                strchr(o.argv[0], '/') ? "no such executable file" : "not found in PATH");
        return 127;
    }
    if (set_job_env(o.nranks, &root_fd, cookie) != 0 || (o.nccl && set_nccl_env() != 0))
        return 1;
    pids = calloc((size_t)o.nranks, sizeof(*pids));
    if (pids == NULL) {
        fprintf(stderr, TAG ": out of memory\n");
        return 1;
    }
    if (launch_block_signals(&oldmask) != 0) {
        fprintf(stderr, TAG ": sigprocmask: %s\n", strerror(errno));
        free(pids);
        return 1;
    }
    fflush(NULL);
    pid_t launcher = getpid();
    for (int r = 0; r < o.nranks; r++) {
        pids[r] = fork();
        if (pids[r] == 0)
            exec_rank(r, o.argv, &oldmask, root_fd, launcher);
        if (pids[r] > 0)
            (void)setpgid(pids[r], pids[r]); /* no window for a signal before the child's */
        if (pids[r] < 0) {
            fprintf(stderr, TAG ": fork of rank %d: %s\n", r, strerror(errno));
            launch_abort(pids, r, TAG);
            free(pids);
            return 1;
        }
    }
    close(root_fd); /* rank 0 has it */
    rc = launch_wait(pids, o.nranks, o.timeout_s, TAG, o.keep_going);
    sweep_shm(cookie, pids, o.nranks);
    free(pids);
    return rc;
}
