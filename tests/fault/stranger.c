/*
 * stranger - a stranger on the network, for issue 19's stranger test: runs a
 * job (CMD, e.g. hcomm-run ...) and, while it lives, finds every TCP port its
 * processes listen on (/proc/net/tcp{,6} and their fds) and, to each port:
 * opens SILENT connections that never speak, and connects RATE times a second
 * to send GARBAGE random bytes and hang up. Meanwhile it samples each of the
 * job's processes: open fds and resident memory, the peaks printed at the end.
 * Loopback only: it refuses ports on other addresses.
 *
 * Usage: stranger [-s SILENT] [-r RATE] [-g BYTES] [-t LIMIT_S] -- CMD ARGS...
 * Prints "stranger: ports P silent S garbage G peak_fds F peak_rss_kib R" and
 * exits with CMD's status (124 when LIMIT_S passed and it was killed).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PIDS 256
#define MAX_PORTS 256
#define TICK_NS 10000000L /* 10 ms */

typedef struct port {
    int    port;
    int    silent; /* connections opened and kept */
    double next_garbage;
} port_t;

static pid_t  g_pids[MAX_PIDS];
static int    g_npids;
static port_t g_ports[MAX_PORTS];
static int    g_nports;
static long   g_silent_total, g_garbage_total;
static long   g_peak_fds, g_peak_rss;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long read_ppid(pid_t pid)
{
    char  path[64], buf[512];
    FILE *f;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n]  = '\0';
    char *p = strrchr(buf, ')'); /* the name may hold spaces */
    long  ppid;
    return p != NULL && sscanf(p + 2, "%*c %ld", &ppid) == 1 ? ppid : -1;
}

/* The job: the child and every process below it. */
static void scan_pids(pid_t child)
{
    DIR           *d = opendir("/proc");
    struct dirent *e;
    g_npids           = 0;
    g_pids[g_npids++] = child;
    for (int grew = 1; grew && d != NULL;) {
        grew = 0;
        rewinddir(d);
        while ((e = readdir(d)) != NULL && g_npids < MAX_PIDS) {
            pid_t pid = (pid_t)atoi(e->d_name), in = 0;
            long  pp = pid > 0 ? read_ppid(pid) : -1;
            for (int i = 0; i < g_npids && pp > 0; i++)
                in |= g_pids[i] == pid;
            for (int i = 0; i < g_npids && pp > 0 && !in; i++)
                if (g_pids[i] == (pid_t)pp) {
                    g_pids[g_npids++] = pid;
                    grew              = 1;
                    break;
                }
        }
    }
    if (d != NULL)
        closedir(d);
}

/* Socket inodes of the job's fds (n of them), and the fd and memory peaks. */
static int job_inodes(unsigned long *ino, int max)
{
    int n = 0;
    for (int i = 0; i < g_npids; i++) {
        char           path[64], link[64];
        DIR           *d;
        struct dirent *e;
        long           fds = 0;
        snprintf(path, sizeof(path), "/proc/%d/fd", (int)g_pids[i]);
        if ((d = opendir(path)) == NULL)
            continue;
        while ((e = readdir(d)) != NULL) {
            char    full[320];
            ssize_t l;
            if (e->d_name[0] == '.')
                continue;
            fds++;
            snprintf(full, sizeof(full), "%s/%s", path, e->d_name);
            if ((l = readlink(full, link, sizeof(link) - 1)) <= 0)
                continue;
            link[l] = '\0';
            if (n < max && sscanf(link, "socket:[%lu]", &ino[n]) == 1)
                n++;
        }
        closedir(d);
        g_peak_fds = fds > g_peak_fds ? fds : g_peak_fds;
        snprintf(path, sizeof(path), "/proc/%d/status", (int)g_pids[i]);
        FILE *f = fopen(path, "r");
        char  line[256];
        long  kib;
        while (f != NULL && fgets(line, sizeof(line), f) != NULL)
            if (sscanf(line, "VmRSS: %ld", &kib) == 1 && kib > g_peak_rss)
                g_peak_rss = kib;
        if (f != NULL)
            fclose(f);
    }
    return n;
}

static void add_port(int port)
{
    for (int i = 0; i < g_nports; i++)
        if (g_ports[i].port == port)
            return;
    if (g_nports < MAX_PORTS)
        g_ports[g_nports++] = (port_t){.port = port, .next_garbage = now()};
}

/* Listening sockets (state 0A) on loopback whose inode is the job's. */
static void scan_ports(const char *table, const unsigned long *ino, int nino)
{
    FILE *f = fopen(table, "r");
    char  line[512];
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        char          local[64];
        unsigned      port, st;
        unsigned long inode;
        if (sscanf(line, " %*d: %63[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*s %*s %lu", local, &port,
                   &st, &inode) != 4 ||
            st != 0x0A)
            continue;
        /* 127.0.0.1 is 0100007F in the v4 table; the v6 loopback ends in 1 */
        int loop = strcmp(local, "0100007F") == 0 ||
                   strcmp(local, "00000000000000000000000001000000") == 0;
        for (int i = 0; i < nino && loop; i++)
            if (ino[i] == inode)
                add_port((int)port);
    }
    fclose(f);
}

static int dial(int port)
{
    struct sockaddr_in sa = {.sin_family      = AF_INET,
                             .sin_port        = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int                fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* This tick's share: silent connections (up to 500 a tick per port), and the
 * garbage due by now. */
static void harass(int silent, double rate, size_t gbytes)
{
    static unsigned char junk[4096];
    double               t = now();
    for (int i = 0; i < g_nports; i++) {
        port_t *p = &g_ports[i];
        for (int k = 0; k < 500 && p->silent < silent; k++) {
            if (dial(p->port) < 0) /* kept open: that is the point */
                break;
            p->silent++;
            g_silent_total++;
        }
        while (rate > 0 && p->next_garbage <= t) {
            p->next_garbage += 1.0 / rate;
            int fd = dial(p->port);
            if (fd < 0)
                continue;
            size_t len = gbytes < sizeof(junk) ? gbytes : sizeof(junk);
            (void)getrandom(junk, len, 0);
            /* connect may still be in flight: a short wait, then the bytes */
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
            (void)send(fd, junk, len, MSG_NOSIGNAL | MSG_DONTWAIT);
            close(fd);
            g_garbage_total++;
        }
    }
}

int main(int argc, char **argv)
{
    int    silent = 1000, opt;
    double rate = 200, limit = 300;
    size_t gbytes = 64;
    while ((opt = getopt(argc, argv, "s:r:g:t:")) != -1) {
        switch (opt) {
        case 's':
            silent = atoi(optarg);
            break;
        case 'r':
            rate = atof(optarg);
            break;
        case 'g':
            gbytes = (size_t)atol(optarg);
            break;
        case 't':
            limit = atof(optarg);
            break;
        default:
            fprintf(stderr, "usage: stranger [-s N] [-r RATE] [-g BYTES] [-t S] -- CMD...\n");
            return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "stranger: no command\n");
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) { /* room for the silent crowd */
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    pid_t child = fork();
    if (child == 0) {
        /* the job's fd limit stays what it was, and it inherits no socket of ours */
        execvp(argv[optind], argv + optind);
        perror("stranger: exec");
        _exit(127);
    }
    if (child < 0)
        return 2;
    double        end    = now() + limit;
    int           status = 0, done = 0;
    unsigned long ino[4096];
    for (long tick = 0; !done; tick++) {
        if (waitpid(child, &status, WNOHANG) == child)
            break;
        if (now() > end) {
            kill(-child, SIGKILL);
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            fprintf(stderr, "stranger: the job ran past %.0f s: killed\n", limit);
            status = 124 << 8;
            break;
        }
        if (tick % 5 == 0)
            scan_pids(child);
        int n = job_inodes(ino, (int)(sizeof(ino) / sizeof(ino[0])));
        scan_ports("/proc/net/tcp", ino, n);
        scan_ports("/proc/net/tcp6", ino, n);
        harass(silent, rate, gbytes);
        struct timespec ts = {0, TICK_NS};
        nanosleep(&ts, NULL);
    }
    printf("stranger: ports %d silent %ld garbage %ld peak_fds %ld peak_rss_kib %ld\n", g_nports,
           g_silent_total, g_garbage_total, g_peak_fds, g_peak_rss);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
