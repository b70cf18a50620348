/* sock.c - listeners, connects and deadline-bounded I/O on non-blocking TCP
 * sockets. Every wait is a poll() up to the caller's deadline. */
#include "base/sock.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"

#define PEER_STRLEN 32

/* "rank 3", or the peer's name. */
static const char *peer_str(hc_sock_peer_t p, char buf[PEER_STRLEN])
{
    if (p.rank < 0)
        return p.name != NULL ? p.name : "the peer";
    snprintf(buf, PEER_STRLEN, "rank %d", p.rank);
    return buf;
}

hcomm_status_t hc_sock_status(int err)
{
    switch (err) {
    case ECONNRESET:
    case EPIPE:
    case ECONNABORTED:
    case ENOTCONN:
        return HCOMM_ERR_REMOTE;
    case ETIMEDOUT:
        return HCOMM_ERR_TIMEOUT;
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ECONNREFUSED:
        return HCOMM_ERR_UNREACHABLE;
    case ENOMEM:
    case ENOBUFS:
        return HCOMM_ERR_NO_MEMORY;
    default:
        return HCOMM_ERR_SYSTEM;
    }
}

static hcomm_status_t sock_fail(const char *what, hc_sock_peer_t p, int err)
{
    char pb[PEER_STRLEN];
    hc_log_as(HC_LOG_ERROR, p.subsys, "%s, %s: %s", what, peer_str(p, pb), strerror(err));
    return hc_sock_status(err);
}

static hcomm_status_t sock_timeout(const char *what, hc_sock_peer_t p)
{
    char pb[PEER_STRLEN];
    hc_log_as(HC_LOG_ERROR, p.subsys, "%s, %s: timed out", what, peer_str(p, pb));
    return HCOMM_ERR_TIMEOUT;
}

/* Waits for events on fd; 0 when ready, ETIMEDOUT at the deadline, else errno. */
static int wait_fd(int fd, short events, double deadline)
{
    for (;;) {
        int ms = hc_clock_ms_left(deadline);
        if (ms < 0)
            return ETIMEDOUT;
        struct pollfd pfd = {.fd = fd, .events = events};
        int           r   = poll(&pfd, 1, ms);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return errno;
    }
}

void hc_sock_tune(int fd, int sockbuf)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (sockbuf > 0) {
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sockbuf, sizeof(sockbuf));
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof(sockbuf));
    }
}

hcomm_status_t hc_sock_listen(const struct sockaddr *sa, socklen_t len, int sockbuf,
                              unsigned subsys, int *fd_p, struct sockaddr_storage *bound,
                              socklen_t *bound_len)
{
    char        as[HC_SOCK_ADDRSTRLEN];
    const char *what = "socket";
    int         one  = 1, err;
    int         fd   = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto err;
    hc_sock_tune(fd, sockbuf);
    socklen_t blen = sizeof(*bound);
    what           = "setsockopt(SO_REUSEADDR)";
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
        goto err_close;
    what = "bind";
    if (bind(fd, sa, len) != 0)
        goto err_close;
    what = "listen";
    if (listen(fd, SOMAXCONN) != 0)
        goto err_close;
    what = "getsockname";
    if (getsockname(fd, (struct sockaddr *)bound, &blen) != 0)
        goto err_close;
    *bound_len = blen;
    *fd_p      = fd;
    return HCOMM_SUCCESS;

err_close:
    err = errno;
    close(fd);
    errno = err;
err:
    err = errno;
    hc_sock_addr_str(sa, as, sizeof(as));
    hc_log_as(HC_LOG_ERROR, subsys, "listener on %s: %s: %s", as, what, strerror(err));
    return hc_sock_status(err);
}

/* One attempt: 0 when connected, -1 at the deadline, else the errno. */
static int connect_once(int fd, const struct sockaddr *sa, socklen_t len, double deadline)
{
    if (connect(fd, sa, len) == 0)
        return 0;
    if (errno != EINPROGRESS && errno != EINTR)
        return errno;
    int err = wait_fd(fd, POLLOUT, deadline);
    if (err == ETIMEDOUT)
        return -1;
    if (err != 0)
        return err;
    socklen_t elen = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
        return errno;
    return err;
}

static void sleep_for(double seconds)
{
    struct timespec ts = {.tv_sec  = (time_t)seconds,
                          .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

hcomm_status_t hc_sock_connect(const struct sockaddr *sa, socklen_t len, int sockbuf,
                               double deadline, hc_sock_peer_t peer, int *fd_p)
{
    char   as[HC_SOCK_ADDRSTRLEN], pb[PEER_STRLEN];
    double pause = 0.001; /* doubles up to 0.25 s: a backlog clears fast, a root starts slowly */
    int    err, last = ETIMEDOUT;
    hc_sock_addr_str(sa, as, sizeof(as));
    for (;;) {
        int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return sock_fail("socket", peer, errno);
        hc_sock_tune(fd, sockbuf);
        err = connect_once(fd, sa, len, deadline);
        if (err == 0) {
            *fd_p = fd;
            return HCOMM_SUCCESS;
        }
        close(fd);
        last = err > 0 ? err : last;
        /* A transport's peer listens from before its address was published:
         * a refusal is its listener closed, and retrying it until the deadline
         * only kept this rank (inside a blocking dial) from noticing other
         * peers' deaths for HCOMM_TIMEOUT (the kill campaign saw it). A reset
         * is the same listener closed with this connection in its backlog. */
        if ((err == ECONNREFUSED || err == ECONNRESET) && peer.listening) {
            hc_log_level_t level = peer.quiet_close ? HC_LOG_DEBUG : HC_LOG_ERROR;
            hc_log_as(level, peer.subsys,
                      "connect to %s at %s: refused: it closed its listener (failed, was "
                      "destroyed or died)",
                      peer_str(peer, pb), as);
            return HCOMM_ERR_REMOTE;
        }
        int retry = err == ECONNREFUSED || err == EAGAIN || err == ETIMEDOUT;
        if (err < 0 || (retry && hc_clock_now() + pause >= deadline)) {
            hc_log_as(HC_LOG_ERROR, peer.subsys, "connect to %s at %s: timed out (last: %s)",
                      peer_str(peer, pb), as, strerror(last));
            return HCOMM_ERR_TIMEOUT;
        }
        if (!retry) {
            hc_log_as(HC_LOG_ERROR, peer.subsys, "connect to %s at %s: %s", peer_str(peer, pb),
                      as, strerror(err));
            return hc_sock_status(err);
        }
        sleep_for(pause);
        pause = pause * 2 < 0.25 ? pause * 2 : 0.25;
    }
}

/* A connect to a listening peer that failed with err, logged once. */
static hcomm_status_t connect_fail(hc_sock_peer_t peer, int err)
{
    char           pb[PEER_STRLEN];
    hc_log_level_t level = peer.quiet_close ? HC_LOG_DEBUG : HC_LOG_ERROR;
    if ((err == ECONNREFUSED || err == ECONNRESET) && peer.listening) {
        hc_log_as(level, peer.subsys,
                  "connect to %s: refused: it closed its listener (failed, was destroyed or died)",
                  peer_str(peer, pb));
        return HCOMM_ERR_REMOTE;
    }
    hc_log_as(level, peer.subsys, "connect to %s: %s", peer_str(peer, pb), strerror(err));
    return hc_sock_status(err);
}

hcomm_status_t hc_sock_connect_start(const struct sockaddr *sa, socklen_t len, int sockbuf,
                                     hc_sock_peer_t peer, int *fd_p)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return sock_fail("socket", peer, errno);
    hc_sock_tune(fd, sockbuf);
    if (connect(fd, sa, len) == 0) {
        *fd_p = fd;
        return HCOMM_SUCCESS;
    }
    if (errno == EINPROGRESS || errno == EINTR) { /* EINTR: it goes on all the same */
        *fd_p = fd;
        return HCOMM_IN_PROGRESS;
    }
    int err = errno;
    close(fd);
    return connect_fail(peer, err);
}

hcomm_status_t hc_sock_connect_end(int fd, hc_sock_peer_t peer)
{
    int       err  = 0;
    socklen_t elen = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
        err = errno;
    return err == 0 ? HCOMM_SUCCESS : connect_fail(peer, err);
}

hcomm_status_t hc_sock_accept(int lfd, double deadline, hc_sock_peer_t peer, int *fd_p,
                              struct sockaddr_storage *peer_addr)
{
    for (;;) {
        int err = wait_fd(lfd, POLLIN, deadline);
        if (err == ETIMEDOUT)
            return sock_timeout("accept", peer);
        if (err != 0)
            return sock_fail("accept (poll)", peer, err);
        socklen_t alen = sizeof(*peer_addr);
        int fd = accept4(lfd, (struct sockaddr *)peer_addr, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            hc_sock_tune(fd, 0);
            *fd_p = fd;
            return HCOMM_SUCCESS;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
            return sock_fail("accept", peer, errno);
    }
}

/* Moves what the socket takes now: 1 on progress, 0 when it would block, or
 * a negative status (logged). */
static int step_io(int send_side, int fd, char *p, size_t *off, size_t len, hc_sock_peer_t peer)
{
    char    pb[PEER_STRLEN];
    ssize_t n = send_side ? send(fd, p + *off, len - *off, MSG_NOSIGNAL | MSG_DONTWAIT)
                          : recv(fd, p + *off, len - *off, MSG_DONTWAIT);
    if (n > 0) {
        *off += (size_t)n;
        return 1;
    }
    if (n == 0 && !send_side) {
        hc_log_level_t level = peer.quiet_close ? HC_LOG_DEBUG : HC_LOG_ERROR;
        hc_log_as(level, peer.subsys, "receive: %s closed the connection", peer_str(peer, pb));
        return HCOMM_ERR_REMOTE;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return sock_fail(send_side ? "send" : "receive", peer, errno);
    return 0;
}

/* All len bytes one way, waiting in poll() up to the deadline. */
static hcomm_status_t sock_all(int send_side, int fd, void *buf, size_t len, double deadline,
                               hc_sock_peer_t peer)
{
    const char *what = send_side ? "send" : "receive";
    size_t      off  = 0;
    while (off < len) {
        int r = step_io(send_side, fd, buf, &off, len, peer);
        if (r < 0)
            return (hcomm_status_t)r;
        if (r > 0)
            continue;
        int err = wait_fd(fd, send_side ? POLLOUT : POLLIN, deadline);
        if (err == ETIMEDOUT)
            return sock_timeout(what, peer);
        if (err != 0)
            return sock_fail(what, peer, err);
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_sock_send_all(int fd, const void *buf, size_t len, double deadline,
                                hc_sock_peer_t peer)
{
    return sock_all(1, fd, (void *)(uintptr_t)buf, len, deadline, peer);
}

hcomm_status_t hc_sock_recv_all(int fd, void *buf, size_t len, double deadline,
                                hc_sock_peer_t peer)
{
    return sock_all(0, fd, buf, len, deadline, peer);
}

/* fd carries nothing our way: readable, its peer closed or reset it. */
static int sock_closed(int fd)
{
    char    b;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

hcomm_status_t hc_sock_exchange(int sfd, const void *sbuf, hc_sock_peer_t speer, int rfd,
                                void *rbuf, hc_sock_peer_t rpeer, size_t len, double timeout,
                                int more)
{
    size_t soff = 0, roff = 0;
    double deadline = hc_clock_now() + timeout;
    char   pb[PEER_STRLEN];
    while (soff < len || roff < len) {
        int progress = 0, r;
        if (soff < len) {
            if ((r = step_io(1, sfd, (char *)(uintptr_t)sbuf, &soff, len, speer)) < 0)
                return (hcomm_status_t)r;
            progress |= r;
        }
        if (roff < len) {
            if ((r = step_io(0, rfd, rbuf, &roff, len, rpeer)) < 0)
                return (hcomm_status_t)r;
            progress |= r;
        }
        if (progress) {
            deadline = hc_clock_now() + timeout;
            continue;
        }
        /* more: sfd's peer waits for more of ours, so it closed sfd only if
         * it failed or died. A receive from rfd alone would see that at the
         * deadline, and a ring's failure would travel a rank per timeout. */
        int           watch = more && sfd != rfd;
        struct pollfd pfd[2];
        nfds_t        n = 0;
        if (soff < len || watch)
            pfd[n++] = (struct pollfd){
                .fd = sfd, .events = (short)((soff < len ? POLLOUT : 0) | (watch ? POLLIN : 0))};
        if (roff < len)
            pfd[n++] = (struct pollfd){.fd = rfd, .events = POLLIN};
        hc_sock_peer_t stuck = roff < len ? rpeer : speer;
        int            ms    = hc_clock_ms_left(deadline);
        if (ms < 0 || (r = poll(pfd, n, ms)) == 0) {
            hc_log_as(HC_LOG_ERROR, stuck.subsys, "exchange: no progress with %s for %.1f s",
                      peer_str(stuck, pb), timeout);
            return HCOMM_ERR_TIMEOUT;
        }
        if (r < 0 && errno != EINTR)
            return sock_fail("exchange (poll)", stuck, errno);
        if (watch && (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) && sock_closed(sfd)) {
            hc_log_as(HC_LOG_ERROR, speer.subsys, "exchange: %s closed the connection",
                      peer_str(speer, pb));
            return HCOMM_ERR_REMOTE;
        }
    }
    return HCOMM_SUCCESS;
}
