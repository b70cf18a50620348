/* fuzz_tcp_rx.c - the tcp transport's receiving side (tcp_rx.c) on a real
 * endpoint: up to 4 receives posted on an endpoint of 1 to 4 sockets
 * (socketpairs), whose other ends carry what the input says, then hang up.
 * hc_tcp_progress runs (with its liveness check every round) while the
 * harness writes, as much as each socket takes.
 *   byte 0: sockets (1 + b % 4), HCOMM_TCP_STRIPE_MIN (b / 4 % 4: 0, 1, 64K,
 *           none), and which receives go to a sink (bits 4..7)
 *   byte 1: receives (1 + b % 4); then 3 bytes per receive for its length
 *           (b0 % 4: 0..255, 0..64K, 0..256K in 4-byte steps, or one of 8
 *           edges of the striping, up to 4 MiB)
 *   then operations, one byte each: socket op % 4 (of the count), what op / 4
 *   % 4, an argument a = op / 16:
 *     0 1 + next byte raw bytes    1 the 8-byte header of receive a
 *     2 (1 + next byte) << (a % 13) filler bytes
 *     3 receive a, whole as the sender sends it (header and striped shares
 *       on every socket), the op's socket ignored
 * The outcome must be what tcp.h's format gives for the same bytes, read by a
 * reference decoder here: the receives whose header and payload are all there
 * complete with exactly those bytes (a sink sees them once, in order); the
 * first that is not fails, with HCOMM_ERR_PROTOCOL for a header whose length
 * is not the receive's and HCOMM_ERR_REMOTE for bytes that never came, and
 * every later one with it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "transport/tcp/tcp.h"

#define MAXR 4
#define STREAM_MAX (12u << 20) /* bytes all sockets carry, in all */
#define SOCKS 4
#define LEN_MAX ((4u << 20) + 5) /* the longest receive */

typedef struct stream {
    uint8_t *p; /* STREAM_MAX bytes */
    size_t   len, sent;
    int      wfd; /* the sending end; -1 once it hung up */
} stream_t;

typedef struct rx {
    size_t      len;
    int         sink;
    uint8_t    *buf;  /* what arrived (the receive's buffer, or the sink's copy) */
    uint8_t    *want; /* what the reference decoder read (LEN_MAX bytes) */
    size_t      next; /* the sink: the offset it expects next */
    hc_tl_req_t req;
} rx_t;

/* The harness's own buffers stay from input to input: pages mapped afresh
 * for megabytes per input made it ten times slower. The receive buffers are
 * allocated to size, so that ASan sees a write past one. */
#define PATTERN (1u << 20)
static uint8_t     pattern[PATTERN + 4096];
static uint8_t     stream_bytes[SOCKS][STREAM_MAX];
static uint8_t     want_bytes[MAXR][LEN_MAX];
static hc_tl_ctx_t ctx;
static hc_tl_ep_t *eps[1];
static stream_t    st[SOCKS];
static rx_t        rx[MAXR];
static int         nsocks, nrx;
static size_t      total;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_logs_to_null();
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < sizeof(pattern); i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        pattern[i] = (uint8_t)x;
    }
    return 0;
}

static int put(int s, const void *p, size_t n)
{
    stream_t *x = &st[s];
    if (n == 0)
        return 0;
    if (n > STREAM_MAX - total)
        return -1;
    if (p != NULL)
        memcpy(x->p + x->len, p, n);
    else /* filler: random bytes, from where the stream's length says */
        for (size_t k = 0; k < n; k += PATTERN) {
            size_t m = n - k < PATTERN ? n - k : PATTERN;
            memcpy(x->p + x->len + k, pattern + (x->len + k + (size_t)s * 17) % 4096, m);
        }
    x->len += n;
    total += n;
    return 0;
}

static void put_header(int s, size_t len)
{
    uint8_t h[HC_TCP_HDR_BYTES];
    hc_tcp_put64(h, len);
    (void)put(s, h, sizeof(h));
}

/* Receive i as the sender sends it: header on socket 0, then the payload
 * there, or chunk j on socket j % nsocks. */
static void put_message(size_t len)
{
    put_header(0, len);
    if (!(nsocks > 1 && len > 0 && len >= ctx.stripe_min)) {
        (void)put(0, NULL, len);
        return;
    }
    size_t c = hc_tcp_chunk(len, nsocks);
    for (size_t j = 0; j * c < len; j++)
        (void)put((int)(j % (size_t)nsocks), NULL, len - j * c < c ? len - j * c : c);
}

static size_t length(const uint8_t *b)
{
    /* past n MiB, socket 0 carries chunk n too (chunks are at most 1 MiB) */
    static const size_t edge[8] = {
        0, 1, 65535, 65536, 65537, (1u << 20) + 1, (2u << 20) + 3, (4u << 20) + 5};
    switch (b[0] % 4) {
    case 0:
        return b[1];
    case 1:
        return (size_t)b[1] | (size_t)b[2] << 8;
    case 2:
        return ((size_t)b[1] | (size_t)b[2] << 8) << 2;
    default:
        return edge[b[1] % 8];
    }
}

/* Parses the input into the receives and the streams; 0, or -1 to skip it. */
static int parse(const uint8_t *data, size_t size)
{
    static const size_t smin[4] = {0, 1, 65536, SIZE_MAX};
    if (size < 2)
        return -1;
    nsocks           = 1 + data[0] % SOCKS;
    ctx.stripe_min   = smin[data[0] / 4 % 4];
    nrx              = 1 + data[1] % MAXR;
    const uint8_t *p = data + 2, *end = data + size;
    if ((size_t)(end - p) < 3u * (size_t)nrx)
        return -1;
    for (int i = 0; i < nrx; i++, p += 3) {
        rx[i].len  = length(p);
        rx[i].sink = data[0] >> (4 + i) & 1;
    }
    while (p < end) {
        int op = *p++, s = op % 4 % nsocks, a = op / 16;
        switch (op / 4 % 4) {
        case 0: {
            size_t n = p < end ? 1 + (size_t)*p++ : 0;
            n        = n < (size_t)(end - p) ? n : (size_t)(end - p);
            if (put(s, p, n) != 0)
                return -1;
            p += n;
            break;
        }
        case 1:
            put_header(s, rx[a % nrx].len);
            break;
        case 2:
            if (p < end && put(s, NULL, (1 + (size_t)*p++) << (a % 13)) != 0)
                return -1;
            break;
        default:
            put_message(rx[a % nrx].len);
        }
    }
    return 0;
}

/* The reference decoder: how many receives complete, and the status of the
 * first that does not. */
static int reference(hcomm_status_t *fail)
{
    size_t pos[SOCKS] = {0};
    for (int i = 0; i < nrx; i++) {
        size_t len = rx[i].len;
        if (st[0].len - pos[0] < HC_TCP_HDR_BYTES) {
            *fail = HCOMM_ERR_REMOTE;
            return i;
        }
        if (hc_tcp_get64(st[0].p + pos[0]) != len) {
            *fail = HCOMM_ERR_PROTOCOL;
            return i;
        }
        pos[0] += HC_TCP_HDR_BYTES;
        int    striped = nsocks > 1 && len > 0 && len >= ctx.stripe_min;
        size_t c       = striped ? hc_tcp_chunk(len, nsocks) : len;
        rx[i].want     = want_bytes[i];
        for (size_t j = 0; j * c < len; j++) {
            int    s = (int)(j % (size_t)nsocks);
            size_t m = len - j * c < c ? len - j * c : c;
            if (st[s].len - pos[s] < m) {
                *fail = HCOMM_ERR_REMOTE;
                return i;
            }
            memcpy(rx[i].want + j * c, st[s].p + pos[s], m);
            pos[s] += m;
        }
    }
    return nrx;
}

static void sink(void *arg, size_t offset, const void *p, size_t n)
{
    rx_t *r = arg;
    FUZZ_ASSERT(offset == r->next && n <= r->len - offset); /* once, in order */
    memcpy(r->buf + offset, p, n);
    r->next += n;
}

static int all_done(void)
{
    for (int i = 0; i < nrx; i++)
        if (rx[i].req.status == HCOMM_IN_PROGRESS)
            return 0;
    return 1;
}

/* Writes what each socket takes; hangs up those that sent all. */
static void pump(void)
{
    for (int s = 0; s < nsocks; s++) {
        stream_t *x = &st[s];
        if (x->wfd < 0)
            continue;
        if (x->sent < x->len) {
            ssize_t n = send(x->wfd, x->p + x->sent, x->len - x->sent, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n > 0)
                x->sent += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
                x->sent = x->len; /* the endpoint failed and closed its end */
        }
        if (x->sent == x->len) {
            close(x->wfd);
            x->wfd = -1;
        }
    }
}

static int senders_left(void)
{
    int n = 0;
    for (int s = 0; s < nsocks; s++)
        n += st[s].wfd >= 0;
    return n;
}

static void run(void)
{
    int fds[SOCKS];
    for (int s = 0; s < nsocks; s++) {
        int sv[2];
        FUZZ_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        fds[s]    = sv[0];
        st[s].wfd = sv[1];
    }
    ctx.nsocks = nsocks;
    ctx.eps    = eps;
    FUZZ_ASSERT(hc_tcp_pfds_reserve(&ctx, (size_t)nsocks) == HCOMM_SUCCESS);
    FUZZ_ASSERT(hc_tcp_ep_create(&ctx, 1, fds, &eps[0]) == HCOMM_SUCCESS);
    ctx.neps = 1;
    for (int i = 0; i < nrx; i++) {
        rx_t *r = &rx[i];
        r->buf  = malloc(r->len ? r->len : 1);
        FUZZ_ASSERT(r->buf != NULL);
        FUZZ_ASSERT(hc_tcp_irecv(eps[0], r->sink ? NULL : r->buf, r->len, r->sink ? sink : NULL, r,
                                 &r->req) == HCOMM_SUCCESS);
    }
    /* once every sender hung up, each round moves data or ends a receive */
    for (int after = 0; !all_done(); after += senders_left() == 0) {
        FUZZ_ASSERT(after < 100000); /* a receive neither completed nor failed */
        pump();
        ctx.next_check_ns = 0; /* the liveness check too, every round */
        (void)hc_tcp_progress(&ctx);
    }
}

static void check(void)
{
    hcomm_status_t fail = HCOMM_SUCCESS;
    int            ok   = reference(&fail);
    for (int i = 0; i < nrx; i++) {
        rx_t *r = &rx[i];
        if (i >= ok) {
            FUZZ_ASSERT(r->req.status == fail);
            continue;
        }
        FUZZ_ASSERT(r->req.status == HCOMM_SUCCESS);
        FUZZ_ASSERT(!r->sink || r->next == r->len);
        FUZZ_ASSERT(memcmp(r->buf, r->want, r->len) == 0);
    }
}

static void clean(void)
{
    if (eps[0] != NULL)
        hc_tcp_ep_destroy(eps[0]);
    eps[0] = NULL;
    free(ctx.pfds);
    for (int s = 0; s < SOCKS; s++)
        if (st[s].wfd >= 0)
            close(st[s].wfd);
    for (int i = 0; i < MAXR; i++)
        free(rx[i].buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memset(&ctx, 0, sizeof(ctx));
    memset(st, 0, sizeof(st));
    memset(rx, 0, sizeof(rx));
    for (int s = 0; s < SOCKS; s++) {
        st[s].wfd = -1;
        st[s].p   = stream_bytes[s];
    }
    total = 0;
    if (parse(data, size) == 0) {
        run();
        check();
    }
    clean();
    return 0;
}
