/* bootstrap_socket.c - addresses, interface choice, and deadline-bounded socket
 * I/O for the bootstrap. Sockets are non-blocking; waits go through poll. */
#include "bootstrap/bootstrap_socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

_Static_assert(sizeof(hc_bootstrap_wire_addr_t) == 24, "wire address layout");
_Static_assert(sizeof(hc_bootstrap_hello_t) == 52, "hello layout");
_Static_assert(sizeof(hc_bootstrap_reply_t) == 52, "reply layout");
_Static_assert(sizeof(hc_bootstrap_ring_hello_t) == 24, "ring hello layout");

#define PEER_STRLEN 24

int hc_bootstrap_cookie_eq(const uint8_t *a, const uint8_t *b)
{
    uint8_t diff = 0;
    for (int i = 0; i < 16; i++)
        diff |= (uint8_t)(a[i] ^ b[i]);
    return diff == 0;
}

static const char *peer_str(int peer, char buf[PEER_STRLEN])
{
    if (peer < 0)
        return "the root";
    snprintf(buf, PEER_STRLEN, "rank %d", peer);
    return buf;
}

static hcomm_status_t errno_status(int err)
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

static hcomm_status_t sock_fail(const char *what, int peer, int err)
{
    char pb[PEER_STRLEN];
    hc_error(BOOT, "%s, %s: %s", what, peer_str(peer, pb), strerror(err));
    return errno_status(err);
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

static void set_nodelay(int fd)
{
    int one = 1;
    /* Best effort: only latency depends on it. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

hcomm_status_t hc_bootstrap_parse_addr(const char *host_port, struct sockaddr_storage *ss,
                                       socklen_t *len)
{
    char        host[256];
    const char *host_s, *port_s;
    size_t      hlen;
    if (host_port == NULL)
        return HCOMM_ERR_INVALID_ARG;
    if (host_port[0] == '[') {
        const char *close_b = strchr(host_port, ']');
        if (close_b == NULL || close_b[1] != ':')
            goto err_syntax;
        host_s = host_port + 1;
        hlen   = (size_t)(close_b - host_s);
        port_s = close_b + 2;
    } else {
        const char *colon = strrchr(host_port, ':');
        if (colon == NULL || memchr(host_port, ':', (size_t)(colon - host_port)) != NULL)
            goto err_syntax;
        host_s = host_port;
        hlen   = (size_t)(colon - host_port);
        port_s = colon + 1;
    }
    if (hlen >= sizeof(host))
        goto err_syntax;
    memcpy(host, host_s, hlen);
    host[hlen] = '\0';

    char *end;
    errno     = 0;
    long port = strtol(port_s, &end, 10);
    if (port_s[0] < '0' || port_s[0] > '9' || *end != '\0' || errno != 0 || port > 65535)
        goto err_syntax;

    struct addrinfo  hints = {.ai_family   = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM,
                              .ai_flags    = AI_NUMERICSERV | AI_PASSIVE};
    struct addrinfo *res, *pick = NULL;
    int              gai = getaddrinfo(hlen ? host : NULL, "0", &hints, &res);
    if (gai != 0) {
        hc_error(BOOT, "cannot resolve %s: %s", host_port, gai_strerror(gai));
        return HCOMM_ERR_UNREACHABLE;
    }
    for (struct addrinfo *a = res; a != NULL; a = a->ai_next)
        if (pick == NULL || (a->ai_family == AF_INET && pick->ai_family != AF_INET))
            if (a->ai_family == AF_INET || a->ai_family == AF_INET6)
                pick = a;
    if (pick == NULL || pick->ai_addrlen > sizeof(*ss)) {
        freeaddrinfo(res);
        goto err_syntax;
    }
    memset(ss, 0, sizeof(*ss));
    memcpy(ss, pick->ai_addr, pick->ai_addrlen);
    *len = (socklen_t)pick->ai_addrlen;
    freeaddrinfo(res);
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    return HCOMM_SUCCESS;

err_syntax:
    hc_error(BOOT, "invalid address \"%s\": expected host:port or [ipv6]:port", host_port);
    return HCOMM_ERR_INVALID_ARG;
}

void hc_bootstrap_ip_str(const struct sockaddr *sa, char *buf, size_t size)
{
    const void *ip = NULL;
    if (sa->sa_family == AF_INET)
        ip = &((const struct sockaddr_in *)sa)->sin_addr;
    else if (sa->sa_family == AF_INET6)
        ip = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (ip == NULL || inet_ntop(sa->sa_family, ip, buf, (socklen_t)size) == NULL)
        snprintf(buf, size, "?");
}

void hc_bootstrap_addr_str(const struct sockaddr *sa, char *buf, size_t size)
{
    char ip[INET6_ADDRSTRLEN];
    hc_bootstrap_ip_str(sa, ip, sizeof(ip));
    if (sa->sa_family == AF_INET)
        snprintf(buf, size, "%s:%u", ip, ntohs(((const struct sockaddr_in *)sa)->sin_port));
    else if (sa->sa_family == AF_INET6)
        snprintf(buf, size, "[%s]:%u", ip, ntohs(((const struct sockaddr_in6 *)sa)->sin6_port));
    else
        snprintf(buf, size, "?");
}

hcomm_status_t hc_bootstrap_addr_to_wire(const struct sockaddr *sa, hc_bootstrap_wire_addr_t *w)
{
    memset(w, 0, sizeof(*w));
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        w->family                    = 4;
        w->port                      = in->sin_port;
        memcpy(w->ip, &in->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        w->family                      = 6;
        w->port                        = in6->sin6_port;
        w->scope_id                    = htonl(in6->sin6_scope_id);
        memcpy(w->ip, &in6->sin6_addr, 16);
    } else {
        hc_error(BOOT, "unsupported address family %d", (int)sa->sa_family);
        return HCOMM_ERR_INVALID_ARG;
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_bootstrap_addr_from_wire(const hc_bootstrap_wire_addr_t *w,
                                           struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof(*ss));
    if (w->family == 4) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family         = AF_INET;
        in->sin_port           = w->port;
        memcpy(&in->sin_addr, w->ip, 4);
        *len = sizeof(*in);
    } else if (w->family == 6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        in6->sin6_family         = AF_INET6;
        in6->sin6_port           = w->port;
        in6->sin6_scope_id       = ntohl(w->scope_id);
        memcpy(&in6->sin6_addr, w->ip, 16);
        *len = sizeof(*in6);
    } else {
        return HCOMM_ERR_PROTOCOL;
    }
    return HCOMM_SUCCESS;
}

/* Whether interface name matches the comma list of prefixes in list, or of
 * exact names when the list starts with '=' (NCCL_SOCKET_IFNAME's syntax). */
static int if_listed(const char *list, const char *name)
{
    int         exact = list[0] == '=';
    const char *p     = list + exact;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        if (n > 0 && strncmp(name, p, n) == 0 && (!exact || name[n] == '\0'))
            return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

static int if_usable(const struct ifaddrs *ifa, int family, const char *spec)
{
    if (ifa->ifa_addr == NULL || ifa->ifa_addr->sa_family != family || !(ifa->ifa_flags & IFF_UP))
        return 0;
    /* Link-local IPv6 needs a scope that peers cannot share. */
    if (family == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr))
        return 0;
    if (spec[0] == '\0' || spec[0] == '^') {
        if (ifa->ifa_flags & IFF_LOOPBACK)
            return 0;
        return spec[0] == '\0' || !if_listed(spec + 1, ifa->ifa_name);
    }
    return if_listed(spec, ifa->ifa_name);
}

hcomm_status_t hc_bootstrap_if_addr(const char *spec, struct sockaddr_storage *ss, socklen_t *len)
{
    struct ifaddrs *ifs;
    if (spec == NULL)
        spec = "";
    if (getifaddrs(&ifs) != 0)
        return sock_fail("getifaddrs", -1, errno);
    const struct ifaddrs *pick = NULL;
    for (int pass = 0; pass < 2 && pick == NULL; pass++)
        for (const struct ifaddrs *ifa = ifs; ifa != NULL && pick == NULL; ifa = ifa->ifa_next)
            if (if_usable(ifa, pass == 0 ? AF_INET : AF_INET6, spec))
                pick = ifa;

    memset(ss, 0, sizeof(*ss));
    if (pick != NULL) {
        *len = pick->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                    : sizeof(struct sockaddr_in6);
        memcpy(ss, pick->ifa_addr, *len);
        hc_debug(BOOT, "bootstrap interface %s", pick->ifa_name);
    }
    freeifaddrs(ifs);
    if (pick == NULL && spec[0] != '\0' && spec[0] != '^') {
        hc_error(BOOT, "no interface that is up matches HCOMM_SOCKET_IFNAME=%s", spec);
        return HCOMM_ERR_UNREACHABLE;
    }
    if (pick == NULL) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family         = AF_INET;
        in->sin_addr.s_addr    = htonl(INADDR_LOOPBACK);
        *len                   = sizeof(*in);
    }
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = 0;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_bootstrap_listen(const struct sockaddr *sa, socklen_t len, int *fd_p,
                                   struct sockaddr_storage *bound, socklen_t *bound_len)
{
    char        as[HC_BOOTSTRAP_ADDRSTRLEN];
    const char *what;
    int         one = 1;
    int         fd  = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        what = "socket";
        goto err;
    }
    what = "setsockopt(SO_REUSEADDR)";
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
        goto err_close;
    what = "bind";
    if (bind(fd, sa, len) != 0)
        goto err_close;
    what = "listen";
    if (listen(fd, SOMAXCONN) != 0)
        goto err_close;
    what              = "getsockname";
    socklen_t blen    = sizeof(*bound);
    if (getsockname(fd, (struct sockaddr *)bound, &blen) != 0)
        goto err_close;
    *bound_len = blen;
    *fd_p      = fd;
    return HCOMM_SUCCESS;

err_close : {
    int e = errno;
    close(fd);
    errno = e;
}
err : {
    int e = errno;
    hc_bootstrap_addr_str(sa, as, sizeof(as));
    hc_error(BOOT, "bootstrap listener on %s: %s: %s", as, what, strerror(e));
    return errno_status(e);
}
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

static void sleep_until(double t)
{
    double left = t - hc_clock_now();
    if (left <= 0)
        return;
    struct timespec ts = {.tv_sec  = (time_t)left,
                          .tv_nsec = (long)((left - (double)(time_t)left) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

hcomm_status_t hc_bootstrap_connect(const struct sockaddr *sa, socklen_t len, double deadline,
                                    int peer, int *fd_p)
{
    char   as[HC_BOOTSTRAP_ADDRSTRLEN], pb[PEER_STRLEN];
    double backoff = 0.01;
    int    err, last = ETIMEDOUT;
    hc_bootstrap_addr_str(sa, as, sizeof(as));
    for (;;) {
        int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return sock_fail("bootstrap socket", peer, errno);
        err = connect_once(fd, sa, len, deadline);
        if (err == 0) {
            set_nodelay(fd);
            *fd_p = fd;
            return HCOMM_SUCCESS;
        }
        close(fd);
        last = err > 0 ? err : last;
        /* The peer may not listen yet (rank 0 starting the root, say). */
        int retry = err == ECONNREFUSED || err == EAGAIN || err == ETIMEDOUT;
        if (err < 0 || (retry && hc_clock_now() + backoff >= deadline)) {
            hc_error(BOOT, "connect to %s at %s: timed out (last: %s)", peer_str(peer, pb), as,
                     strerror(last));
            return HCOMM_ERR_TIMEOUT;
        }
        if (!retry) {
            hc_error(BOOT, "connect to %s at %s: %s", peer_str(peer, pb), as, strerror(err));
            return errno_status(err);
        }
        sleep_until(hc_clock_now() + backoff);
        backoff = backoff * 2 < 0.5 ? backoff * 2 : 0.5;
    }
}

hcomm_status_t hc_bootstrap_accept(int lfd, double deadline, int peer, int *fd_p,
                                   struct sockaddr_storage *peer_addr)
{
    char pb[PEER_STRLEN];
    for (;;) {
        int err = wait_fd(lfd, POLLIN, deadline);
        if (err == ETIMEDOUT) {
            hc_error(BOOT, "bootstrap accept: timed out waiting for %s", peer_str(peer, pb));
            return HCOMM_ERR_TIMEOUT;
        }
        if (err != 0)
            return sock_fail("bootstrap accept (poll)", peer, err);
        socklen_t alen = sizeof(*peer_addr);
        int fd = accept4(lfd, (struct sockaddr *)peer_addr, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            set_nodelay(fd);
            *fd_p = fd;
            return HCOMM_SUCCESS;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
            return sock_fail("bootstrap accept", peer, errno);
    }
}

hcomm_status_t hc_bootstrap_send_all(int fd, const void *buf, size_t len, double deadline, int peer)
{
    const char *p = buf;
    char        pb[PEER_STRLEN];
    size_t      off = 0;
    while (off < len) {
        ssize_t n = send(fd, p + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return sock_fail("bootstrap send", peer, errno);
        int err = wait_fd(fd, POLLOUT, deadline);
        if (err == ETIMEDOUT) {
            hc_error(BOOT, "bootstrap send to %s: timed out", peer_str(peer, pb));
            return HCOMM_ERR_TIMEOUT;
        }
        if (err != 0)
            return sock_fail("bootstrap send (poll)", peer, err);
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_bootstrap_recv_all(int fd, void *buf, size_t len, double deadline, int peer)
{
    char  *p = buf;
    char   pb[PEER_STRLEN];
    size_t off = 0;
    while (off < len) {
        ssize_t n = recv(fd, p + off, len - off, MSG_DONTWAIT);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n == 0) {
            hc_error(BOOT, "bootstrap receive: %s closed the connection", peer_str(peer, pb));
            return HCOMM_ERR_REMOTE;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return sock_fail("bootstrap receive", peer, errno);
        int err = wait_fd(fd, POLLIN, deadline);
        if (err == ETIMEDOUT) {
            hc_error(BOOT, "bootstrap receive from %s: timed out", peer_str(peer, pb));
            return HCOMM_ERR_TIMEOUT;
        }
        if (err != 0)
            return sock_fail("bootstrap receive (poll)", peer, err);
    }
    return HCOMM_SUCCESS;
}

/* Moves what the socket takes now: 1 on progress, 0 when it would block, or
 * a negative status (logged). */
static int step_io(int send_side, int fd, char *p, size_t *off, size_t len, int peer)
{
    char    pb[PEER_STRLEN];
    ssize_t n = send_side ? send(fd, p + *off, len - *off, MSG_NOSIGNAL | MSG_DONTWAIT)
                          : recv(fd, p + *off, len - *off, MSG_DONTWAIT);
    if (n > 0) {
        *off += (size_t)n;
        return 1;
    }
    if (n == 0 && !send_side) {
        hc_error(BOOT, "bootstrap receive: %s closed the connection", peer_str(peer, pb));
        return HCOMM_ERR_REMOTE;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return sock_fail(send_side ? "bootstrap send" : "bootstrap receive", peer, errno);
    return 0;
}

hcomm_status_t hc_bootstrap_exchange(int sfd, const void *sbuf, int speer, int rfd, void *rbuf,
                                     int rpeer, size_t len, double timeout)
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
        struct pollfd pfd[2];
        nfds_t        n = 0;
        if (soff < len)
            pfd[n++] = (struct pollfd){.fd = sfd, .events = POLLOUT};
        if (roff < len)
            pfd[n++] = (struct pollfd){.fd = rfd, .events = POLLIN};
        int ms = hc_clock_ms_left(deadline);
        if (ms < 0 || (r = poll(pfd, n, ms)) == 0) {
            int peer = roff < len ? rpeer : speer;
            hc_error(BOOT, "bootstrap allgather: no progress with %s for %.1f s",
                     peer_str(peer, pb), timeout);
            return HCOMM_ERR_TIMEOUT;
        }
        if (r < 0 && errno != EINTR)
            return sock_fail("bootstrap allgather (poll)", roff < len ? rpeer : speer, errno);
    }
    return HCOMM_SUCCESS;
}
