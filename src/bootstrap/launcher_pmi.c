/* launcher_pmi.c - the unique id through a PMI-1 server on PMI_FD (MPICH's
 * hydra; Slurm's pmi2 plugin speaks it too): the simple text protocol, one
 * "cmd=... key=value ..." line each way, spoken here rather than through a
 * libpmi, of which each MPI ships its own. Every read and write waits in
 * poll() against one deadline. A server closes the connection at finalize,
 * and takes a process that exits without it for a failed one (hydra then
 * kills the job): so the connection stays open, for later communicators'
 * ids too, and finalizes at exit. A failed exchange leaves it unusable (a
 * reply may still be in flight). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "bootstrap/launcher.h"

#define PMI_LINE_MAX 2048

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int             state; /* 0 not yet, 1 ready, -1 unusable */
static char            kvsname[256];
static int             keylen_max = 32, vallen_max = 64;
static int             pmi_fd = -1;
static pid_t           pmi_pid; /* a forked child's exit must not finalize */

#define PMI_FINALIZE_SECS 10.0

static int wait_fd(int fd, short ev, double deadline)
{
    for (;;) {
        double left = deadline - hc_clock_now();
        if (left <= 0)
            return -1;
        struct pollfd p  = {.fd = fd, .events = ev};
        int           ms = left > 1e6 ? 1000000000 : (int)(left * 1e3) + 1;
        int           n  = poll(&p, 1, ms);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

static hcomm_status_t send_line(int fd, const char *line, double deadline)
{
    size_t len = strlen(line), done = 0;
    while (done < len) {
        if (wait_fd(fd, POLLOUT, deadline) != 0)
            return HCOMM_ERR_TIMEOUT;
        /* a launcher that hung up is an error here, not SIGPIPE */
        ssize_t n = send(fd, line + done, len - done, MSG_NOSIGNAL);
        if (n < 0 && errno == ENOTSOCK)
            n = write(fd, line + done, len - done);
        if (n < 0 && errno != EINTR && errno != EAGAIN)
            return HCOMM_ERR_IO;
        done += n > 0 ? (size_t)n : 0;
    }
    return HCOMM_SUCCESS;
}

/* One reply line, without its newline. Byte by byte: what follows the line
 * belongs to the next reply. */
static hcomm_status_t recv_line(int fd, char *buf, size_t len, double deadline)
{
    size_t n = 0;
    for (;;) {
        char c;
        if (wait_fd(fd, POLLIN, deadline) != 0)
            return HCOMM_ERR_TIMEOUT;
        ssize_t r = read(fd, &c, 1);
        if (r == 0)
            return HCOMM_ERR_REMOTE;
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return HCOMM_ERR_IO;
        }
        if (c == '\n')
            break;
        if (n + 1 >= len)
            return HCOMM_ERR_PROTOCOL;
        buf[n++] = c;
    }
    buf[n] = '\0';
    return HCOMM_SUCCESS;
}

/* The value of key in a reply line ("cmd=get_result rc=0 value=..."), or
 * NULL; out holds it. */
static const char *field(const char *line, const char *key, char *out, size_t len)
{
    size_t klen = strlen(key);
    for (const char *p = line; *p != '\0';) {
        p += strspn(p, " ");
        size_t tlen = strcspn(p, " ");
        if (tlen > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
            size_t vlen = tlen - klen - 1;
            if (vlen >= len)
                return NULL;
            memcpy(out, p + klen + 1, vlen);
            out[vlen] = '\0';
            return out;
        }
        p += tlen;
    }
    return NULL;
}

/* Sends req and reads the reply, which must be cmd=want with rc=0 where it
 * has an rc; the reply in reply. One log line on failure. */
static hcomm_status_t call(int fd, const char *req, const char *want, char *reply, size_t len,
                           double deadline)
{
    char           v[64];
    hcomm_status_t st = send_line(fd, req, deadline);
    if (st == HCOMM_SUCCESS)
        st = recv_line(fd, reply, len, deadline);
    if (st == HCOMM_SUCCESS && (field(reply, "cmd", v, sizeof(v)) == NULL || strcmp(v, want) != 0 ||
                                (field(reply, "rc", v, sizeof(v)) != NULL && strcmp(v, "0") != 0)))
        st = HCOMM_ERR_PROTOCOL;
    if (st != HCOMM_SUCCESS)
        hc_error(BOOT, "PMI-1 on fd %d: %.*s: %s%s%.200s", fd, (int)strcspn(req, " \n"), req,
                 hcomm_status_str(st), st == HCOMM_ERR_PROTOCOL ? ": the reply was " : "",
                 st == HCOMM_ERR_PROTOCOL ? reply : "");
    return st;
}

/* At exit: finalize, unless an exchange holds the connection (a thread
 * still in it: the server then sees a failed process, which it is). */
static void pmi_finalize(void)
{
    char r[PMI_LINE_MAX];
    if (getpid() != pmi_pid || pthread_mutex_trylock(&lock) != 0)
        return;
    if (state == 1)
        call(pmi_fd, "cmd=finalize\n", "finalize_ack", r, sizeof(r),
             hc_clock_now() + PMI_FINALIZE_SECS);
    state = -1;
    pthread_mutex_unlock(&lock);
}

static hcomm_status_t pmi_init(int fd, double deadline)
{
    char           r[PMI_LINE_MAX], v[32];
    hcomm_status_t st = call(fd, "cmd=init pmi_version=1 pmi_subversion=1\n", "response_to_init", r,
                             sizeof(r), deadline);
    if (st == HCOMM_SUCCESS)
        st = call(fd, "cmd=get_maxes\n", "maxes", r, sizeof(r), deadline);
    if (st == HCOMM_SUCCESS) {
        if (field(r, "keylen_max", v, sizeof(v)) != NULL)
            sscanf(v, "%d", &keylen_max);
        if (field(r, "vallen_max", v, sizeof(v)) != NULL)
            sscanf(v, "%d", &vallen_max);
        st = call(fd, "cmd=get_my_kvsname\n", "my_kvsname", r, sizeof(r), deadline);
    }
    if (st == HCOMM_SUCCESS && field(r, "kvsname", kvsname, sizeof(kvsname)) == NULL) {
        hc_error(BOOT, "PMI-1 on fd %d: no kvsname in \"%.200s\"", fd, r);
        st = HCOMM_ERR_PROTOCOL;
    }
    if (st == HCOMM_SUCCESS) {
        pmi_fd  = fd;
        pmi_pid = getpid();
        if (atexit(pmi_finalize) != 0)
            hc_warn(BOOT, "PMI-1: no finalize at exit (atexit failed): the launcher may take "
                          "this process's exit for a failure");
    }
    return st;
}

hcomm_status_t hc_launch_pmi_exchange(int fd, const char *key, char *val, size_t len, int publish,
                                      double timeout)
{
    char           req[PMI_LINE_MAX], r[PMI_LINE_MAX];
    double         deadline = hc_clock_now() + timeout;
    hcomm_status_t st       = HCOMM_SUCCESS;

    pthread_mutex_lock(&lock);
    if (state == 0)
        st = pmi_init(fd, deadline);
    else if (state < 0)
        st = HCOMM_ERR_INVALID_USAGE;
    if (st != HCOMM_SUCCESS) {
        if (state < 0)
            hc_error(BOOT, "PMI-1 on fd %d: unusable after an earlier failure", fd);
        goto out;
    }
    if ((int)strlen(key) >= keylen_max || (publish && (int)strlen(val) >= vallen_max)) {
        hc_error(BOOT,
                 "PMI-1: the server takes keys of %d and values of %d bytes, too short for "
                 "a unique id",
                 keylen_max, vallen_max);
        st = HCOMM_ERR_UNSUPPORTED;
        goto out;
    }
    if (publish) {
        snprintf(req, sizeof(req), "cmd=put kvsname=%s key=%s value=%s\n", kvsname, key, val);
        st = call(fd, req, "put_result", r, sizeof(r), deadline);
    }
    if (st == HCOMM_SUCCESS)
        st = call(fd, "cmd=barrier_in\n", "barrier_out", r, sizeof(r), deadline);
    if (st == HCOMM_SUCCESS && !publish) {
        snprintf(req, sizeof(req), "cmd=get kvsname=%s key=%s\n", kvsname, key);
        st = call(fd, req, "get_result", r, sizeof(r), deadline);
        if (st == HCOMM_SUCCESS && field(r, "value", val, len) == NULL) {
            hc_error(BOOT, "PMI-1: no value of %s in \"%.200s\"", key, r);
            st = HCOMM_ERR_PROTOCOL;
        }
    }
out:
    state = st == HCOMM_SUCCESS ? 1 : -1;
    pthread_mutex_unlock(&lock);
    return st;
}
