/* tcp_dial.c - the active side of the tcp transport's connection set-up: the
 * hello each connection starts with, and the dial that sends it. */
#include "transport/tcp/tcp.h"

#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/sock.h"

void hc_tcp_hello_encode(const hc_tl_ctx_t *ctx, int idx, uint8_t *out)
{
    hc_tcp_put64(out, HC_TCP_MAGIC | ((uint64_t)HC_TCP_VERSION << 32));
    memcpy(out + 8, ctx->cookie, 16);
    hc_tcp_put64(out + 24, (uint64_t)(uint32_t)ctx->rank);
    hc_tcp_put64(out + 32, (uint32_t)idx | ((uint64_t)(uint32_t)ctx->nsocks << 32));
    hc_tcp_put64(out + 40, ctx->stripe_min);
}

/* Connects socket idx to peer's listener (retrying while it refuses: a full
 * backlog) and says hello, before the deadline. */
hcomm_status_t hc_tcp_dial(hc_tl_ctx_t *ctx, int peer, const struct sockaddr *sa,
                           socklen_t salen, int idx, double deadline, int *fd_p)
{
    hc_sock_peer_t who = {HC_SUBSYS(NET), peer, NULL};
    uint8_t        hello[HC_TCP_HELLO_BYTES];
    int            fd;
    hcomm_status_t st = hc_sock_connect(sa, salen, ctx->sockbuf, deadline, who, &fd);
    if (st != HCOMM_SUCCESS)
        return st;
    hc_tcp_hello_encode(ctx, idx, hello);
    st = hc_sock_send_all(fd, hello, sizeof(hello), deadline, who);
    if (st != HCOMM_SUCCESS) {
        hc_error(NET, "peer %d: no hello on socket %d", peer, idx);
        close(fd);
        return st;
    }
    *fd_p = fd;
    return HCOMM_SUCCESS;
}
