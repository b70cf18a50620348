/* silent_host.c - see silent_host.h. */
#include "silent_host.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_LISTENERS 16
#define MAX_SOCKS     (MAX_LISTENERS * 4400)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void touch(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f != NULL)
        fclose(f);
}

static int exists(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

void silent_host_go(const char *argv0, const char *dir, int wait)
{
    char pid[32], n[32];
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    snprintf(n, sizeof(n), "%d", wait);
    if (fork() == 0) { /* exec at once: the parent has threads */
        execl("/proc/self/exe", argv0, "fill", pid, dir, n, (char *)NULL);
        _exit(127);
    }
    raise(SIGSTOP);
}

int silent_host_wait_filled(const char *dir, double secs)
{
    for (double end = now() + secs; now() < end; usleep(20000))
        if (exists(dir, "filled") || exists(dir, "unfilled"))
            break;
    return exists(dir, "filled");
}

void silent_host_done(const char *dir, int rank)
{
    char name[32];
    snprintf(name, sizeof(name), "done.%d", rank);
    touch(dir, name);
}

static int stopped(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len]      = '\0';
    const char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' && p[2] == 'T';
}

/* Whether socket inode ino is one of pid's fds. */
static int owns(int pid, unsigned long ino)
{
    char path[64], link[64], want[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", pid);
    snprintf(want, sizeof(want), "socket:[%lu]", ino);
    DIR *d = opendir(path);
    int  found = 0;
    for (struct dirent *e; d != NULL && !found && (e = readdir(d)) != NULL;) {
        char    fd[340];
        ssize_t n;
        snprintf(fd, sizeof(fd), "%s/%s", path, e->d_name);
        if ((n = readlink(fd, link, sizeof(link) - 1)) > 0) {
            link[n] = '\0';
            found   = strcmp(link, want) == 0;
        }
    }
    if (d != NULL)
        closedir(d);
    return found;
}

/* pid's listening TCP sockets (a wildcard as loopback) into ss: how many. */
static int listeners(int pid, struct sockaddr_storage *ss, int max)
{
    int n = 0;
    for (int v6 = 0; v6 <= 1; v6++) {
        char path[64], line[512], addr[64];
        snprintf(path, sizeof(path), "/proc/%d/net/tcp%s", pid, v6 ? "6" : "");
        FILE *f = fopen(path, "r");
        for (unsigned port, st; f != NULL && n < max && fgets(line, sizeof(line), f);) {
            unsigned long ino;
            if (sscanf(line, " %*d: %63[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*s %*s %lu", addr, &port,
                       &st, &ino) != 4 ||
                st != 0x0A || !owns(pid, ino))
                continue;
            memset(&ss[n], 0, sizeof(ss[n]));
            if (!v6) {
                struct sockaddr_in *a = (struct sockaddr_in *)&ss[n];
                a->sin_family         = AF_INET;
                a->sin_port           = htons((uint16_t)port);
                a->sin_addr.s_addr    = (uint32_t)strtoul(addr, NULL, 16); /* as the kernel's */
                if (a->sin_addr.s_addr == 0)
                    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            } else {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss[n];
                a->sin6_family         = AF_INET6;
                a->sin6_port           = htons((uint16_t)port);
                for (int w = 0; w < 4; w++) {
                    char word[9];
                    memcpy(word, addr + 8 * w, 8), word[8] = '\0';
                    uint32_t v = (uint32_t)strtoul(word, NULL, 16);
                    memcpy(&a->sin6_addr.s6_addr[4 * w], &v, 4);
                }
                if (IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr))
                    a->sin6_addr = in6addr_loopback;
            }
            n++;
        }
        if (f != NULL)
            fclose(f);
    }
    return n;
}

/* A connect to sa that does not complete in 0.3 s: its SYN was dropped. */
static int drops_syns(const struct sockaddr_storage *sa)
{
    int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return 0;
    int r = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
    if (r != 0 && errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        r               = poll(&p, 1, 300) == 0 ? 1 : 0;
    } else
        r = 0;
    close(fd);
    return r;
}

static int backlog(void)
{
    int   v = 4096; /* SOMAXCONN, hcomm's listen() backlog */
    FILE *f = fopen("/proc/sys/net/core/somaxconn", "r");
    if (f != NULL) {
        int s;
        if (fscanf(f, "%d", &s) == 1 && s < v)
            v = s;
        fclose(f);
    }
    return v;
}

/* Connects to sa until its accept queue is full: 0, or -1. */
static int fill(const struct sockaddr_storage *sa, int *socks, int *n)
{
    int batch = backlog() + 1; /* the queue is full above the backlog */
    for (int tries = 0; tries < 4; tries++, batch = 64) {
        for (int i = 0; i < batch && *n < MAX_SOCKS; i++) {
            int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
            if (fd < 0)
                return -1;
            if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0 &&
                errno != EINPROGRESS) {
                close(fd);
                return -1;
            }
            socks[(*n)++] = fd;
        }
        usleep(300000); /* the handshakes, on loopback */
        if (drops_syns(sa))
            return 0;
    }
    return -1;
}

int silent_host_fill(int argc, char **argv)
{
    if (argc < 5)
        return 1;
    int                     pid = atoi(argv[2]), wait = atoi(argv[4]), n = 0, nl = 0, ok = 1;
    const char             *dir = argv[3];
    struct sockaddr_storage ls[MAX_LISTENERS];
    struct rlimit           rl;
    int                    *socks = calloc(MAX_SOCKS, sizeof(*socks));
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    for (double end = now() + 10; !stopped(pid) && now() < end;)
        usleep(10000);
    ok = socks != NULL && stopped(pid) && (nl = listeners(pid, ls, MAX_LISTENERS)) > 0;
    long need = (long)nl * (backlog() + 1 + 3 * 64) + 64;
    if (ok && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (long)rl.rlim_cur < need) { /* a SKIP, not a failure: this machine cannot */
        fprintf(stderr, "silent_host: cannot: the open-file limit %ld is under the %ld needed\n",
                (long)rl.rlim_cur, need);
        ok = 0;
    } else {
        for (int i = 0; ok && i < nl; i++)
            ok = fill(&ls[i], socks, &n) == 0;
        fprintf(stderr, "silent_host: rank pid %d: %s (%d connections)\n", pid,
                ok ? "its listeners drop new SYNs" : "COULD NOT fill its listeners", n);
    }
    touch(dir, ok ? "filled" : "unfilled");
    for (double end = now() + 60; ok && now() < end && kill(pid, 0) == 0; usleep(50000)) {
        DIR *d    = opendir(dir);
        int  done = 0;
        for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
            done += strncmp(e->d_name, "done.", 5) == 0;
        if (d != NULL)
            closedir(d);
        if (done >= wait)
            break;
    }
    for (int i = 0; i < n; i++)
        close(socks[i]);
    free(socks);
    kill(pid, SIGCONT);
    return ok ? 0 : 1;
}
