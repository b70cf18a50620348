/* tcp_dial.c - the active side of the tcp transport's connection set-up: the
 * hello each connection starts with, and the dial that sends it. */
#include "transport/tcp/tcp.h"

#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/sock.h"

hcomm_status_t hc_tcp_hello_encode(const hc_tl_ctx_t *ctx, int idx, const uint8_t *peer_nonce,
                                   uint8_t *out)
{
    hc_tcp_put64(out, HC_TCP_MAGIC | ((uint64_t)HC_TCP_VERSION << 32));
    hc_tcp_put64(out + 8, (uint64_t)(uint32_t)ctx->rank);
    hc_tcp_put64(out + 16, (uint32_t)idx | ((uint64_t)(uint32_t)ctx->nsocks << 32));
    hc_tcp_put64(out + 24, ctx->stripe_min);
    hc_auth_part_t parts[2] = {{out, HC_TCP_HELLO_FIELDS}, {peer_nonce, 16}};
    if (hc_auth_mac(ctx->cookie, "hcomm tcp hello", parts, 2, out + HC_TCP_HELLO_FIELDS) != 0)
        return HCOMM_ERR_SYSTEM;
    return HCOMM_SUCCESS;
}

/* Connects socket idx to peer's listener and says hello, before the
 * deadline. The listener was open before its address went out at init: a
 * refusal means the peer closed its transport (HCOMM_ERR_REMOTE at once). */
hcomm_status_t hc_tcp_dial(hc_tl_ctx_t *ctx, const hc_peer_info_t *peer, const struct sockaddr *sa,
                           socklen_t salen, int idx, double deadline, int *fd_p)
{
    hc_sock_peer_t who = {.subsys = HC_SUBSYS(NET), .rank = peer->rank, .listening = 1};
    uint8_t        hello[HC_TCP_HELLO_BYTES];
    int            fd;
    hcomm_status_t st = hc_tcp_hello_encode(ctx, idx, peer->nonce, hello);
    if (st != HCOMM_SUCCESS)
        return st;
    if ((st = hc_sock_connect(sa, salen, ctx->sockbuf, deadline, who, &fd)) != HCOMM_SUCCESS)
        return st;
    st = hc_sock_send_all(fd, hello, sizeof(hello), deadline, who);
    if (st != HCOMM_SUCCESS) {
        hc_error(NET, "peer %d: no hello on socket %d", peer->rank, idx);
        close(fd);
        return st;
    }
    *fd_p = fd;
    return HCOMM_SUCCESS;
}
