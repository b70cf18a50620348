/* tcp_sock.c - socket helpers of the tcp transport: options, clocks, the hello,
 * and the active side of connection set-up. */
#include "transport/tcp/tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

/* Options every data socket gets; failures only cost speed, so they are ignored. */
void hc_tcp_tune(int fd, int sockbuf)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (sockbuf > 0) {
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sockbuf, sizeof(sockbuf));
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof(sockbuf));
    }
}

void hc_tcp_addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    int  port                 = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
        port = ntohs(in->sin_port);
        snprintf(buf, len, "%s:%d", ip, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
        port = ntohs(in6->sin6_port);
        snprintf(buf, len, "[%s]:%d", ip, port);
    } else {
        snprintf(buf, len, "(family %d)", (int)sa->sa_family);
    }
}

hcomm_status_t hc_tcp_pfds_reserve(hc_tl_ctx_t *ctx, size_t n)
{
    if (n <= ctx->pfds_cap)
        return HCOMM_SUCCESS;
    size_t         cap = n < 16 ? 16 : n * 2;
    struct pollfd *p   = realloc(ctx->pfds, cap * sizeof(*p));
    if (p == NULL) {
        hc_error(NET, "out of memory for %zu poll entries", cap);
        return HCOMM_ERR_NO_MEMORY;
    }
    ctx->pfds     = p;
    ctx->pfds_cap = cap;
    return HCOMM_SUCCESS;
}

void hc_tcp_hello_encode(const hc_tl_ctx_t *ctx, int idx, uint8_t *out)
{
    hc_tcp_put64(out, HC_TCP_MAGIC | ((uint64_t)HC_TCP_VERSION << 32));
    memcpy(out + 8, ctx->cookie, 16);
    hc_tcp_put64(out + 24, (uint64_t)(uint32_t)ctx->rank);
    hc_tcp_put64(out + 32, (uint32_t)idx | ((uint64_t)(uint32_t)ctx->nsocks << 32));
    hc_tcp_put64(out + 40, ctx->stripe_min);
}

/* One nonblocking connect attempt; returns 0 or the errno that ended it. */
static int dial_once(int fd, const struct sockaddr *sa, socklen_t salen, uint64_t deadline)
{
    if (connect(fd, sa, salen) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return errno;
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int           n   = poll(&pfd, 1, hc_clock_ms_left_ns(deadline));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return ETIMEDOUT;
        break;
    }
    int       err = 0;
    socklen_t el  = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
        return errno;
    return err;
}

static int send_all(int fd, const uint8_t *buf, size_t len, uint64_t deadline)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return errno;
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        if (hc_clock_ms_left_ns(deadline) == 0)
            return ETIMEDOUT;
        if (poll(&pfd, 1, hc_clock_ms_left_ns(deadline)) < 0 && errno != EINTR)
            return errno;
    }
    return 0;
}

/* The active side: connects socket idx to peer's listener and says hello.
 * A refused connect (listener backlog full) is retried until the deadline. */
hcomm_status_t hc_tcp_dial(hc_tl_ctx_t *ctx, int peer, const struct sockaddr *sa,
                           socklen_t salen, int idx, uint64_t deadline, int *fd_p)
{
    char to[HC_TCP_ADDRSTR];
    int  fd, err;
    hc_tcp_addr_str(sa, to, sizeof(to));
    for (;;) {
        fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            err = errno;
            hc_error(NET, "peer %d: socket: %s", peer, strerror(err));
            return HCOMM_ERR_SYSTEM;
        }
        hc_tcp_tune(fd, ctx->sockbuf);
        err = dial_once(fd, sa, salen, deadline);
        if (err == 0)
            break;
        close(fd);
        if (err != ECONNREFUSED || hc_clock_ms_left_ns(deadline) == 0)
            goto err_dial;
        usleep(hc_clock_ms_left_ns(deadline) < 10 ? 1000 : 10000);
    }
    uint8_t hello[HC_TCP_HELLO_BYTES];
    hc_tcp_hello_encode(ctx, idx, hello);
    err = send_all(fd, hello, sizeof(hello), deadline);
    if (err != 0) {
        close(fd);
        goto err_dial;
    }
    *fd_p = fd;
    return HCOMM_SUCCESS;

err_dial:
    hc_error(NET, "peer %d: connect to %s (socket %d): %s", peer, to, idx, strerror(err));
    return err == ETIMEDOUT ? HCOMM_ERR_TIMEOUT : HCOMM_ERR_UNREACHABLE;
}
