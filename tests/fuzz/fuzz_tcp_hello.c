/* fuzz_tcp_hello.c - the tcp transport's hello (tcp.h: 32 bytes of fields and
 * a MAC over them and the receiver's nonce), as hc_tcp_hello_check reads it
 * from a connection that has sent its 64 bytes. Input: three bytes of the
 * receiver's state, then hellos, each a flags byte and 32 bytes of fields,
 * then (flags & 1 == 0) 32 bytes of MAC; with flags & 1 the harness makes the
 * MAC under the job key (flags & 2: over another nonce, a replay from another
 * listener), so that the fuzzer reaches the field checks.
 *   byte 0: the receiver's rank (1 + b % 8) and socket count (1 + b / 8 % 4)
 *   byte 1: HCOMM_TCP_STRIPE_MIN, of four; bits 2..: ranks already connected
 *   byte 2: which lower ranks have sockets claimed (each its socket 0, 2)
 * A hello the check accepts stays pending, so that the same socket again is a
 * duplicate. The answer must be the one tcp.h's rules give, checked here in
 * their order: magic and version, MAC, rank below the receiver's and socket
 * index below the count (refused, logged), count and stripe threshold as the
 * receiver's (HCOMM_ERR_INVALID_USAGE), not a duplicate. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "transport/tcp/tcp.h"

#define NRANKS 9
#define PENDING_MAX 64

static const uint8_t key[HC_AUTH_KEY_BYTES] = "fuzz job secret"; /* 15 + NUL */
static const uint8_t nonce[16]              = "receiver nonce!";
static const uint8_t other[16]              = "another nonce!!";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_logs_to_null();
    return 0;
}

static hc_tl_ctx_t   ctx;
static hc_tl_ep_t   *by_rank[NRANKS];
static int          *claimed[NRANKS]; /* nsocks entries each, as tcp_accept.c allocates them */
static hc_tcp_conn_t conns[PENDING_MAX];

/* What tcp.h's rules say of hello h. */
static int rule(const uint8_t *h, int *why_given)
{
    uint64_t       w0 = hc_tcp_get64(h), rank = hc_tcp_get64(h + 8), w2 = hc_tcp_get64(h + 16);
    uint32_t       idx = (uint32_t)w2, nsocks = (uint32_t)(w2 >> 32);
    hc_auth_part_t parts[2] = {{h, HC_TCP_HELLO_FIELDS}, {nonce, 16}};
    *why_given              = 1;
    if (w0 != (HC_TCP_MAGIC | (uint64_t)HC_TCP_VERSION << 32))
        return 0;
    if (!hc_auth_check(key, "hcomm tcp hello", parts, 2, h + HC_TCP_HELLO_FIELDS))
        return 0;
    *why_given = 0;
    if (rank >= (uint64_t)ctx.rank || idx >= nsocks)
        return 0;
    if (nsocks != (uint32_t)ctx.nsocks || hc_tcp_get64(h + 24) != ctx.stripe_min)
        return HCOMM_ERR_INVALID_USAGE;
    *why_given = 1;
    if (by_rank[rank] != NULL || (claimed[rank] != NULL && claimed[rank][idx] >= 0))
        return 0;
    for (int i = 0; i < ctx.nconns; i++)
        if (conns[i].rank == (int)rank && conns[i].idx == (int)idx)
            return 0;
    *why_given = 0;
    return 1;
}

static void receiver(const uint8_t *s)
{
    static const size_t smin[4] = {0, 1, 65536, SIZE_MAX};
    memset(&ctx, 0, sizeof(ctx));
    memcpy(ctx.cookie, key, sizeof(key));
    memcpy(ctx.nonce, nonce, sizeof(nonce));
    ctx.rank       = 1 + s[0] % 8;
    ctx.nranks     = NRANKS;
    ctx.nsocks     = 1 + s[0] / 8 % 4;
    ctx.stripe_min = smin[s[1] % 4];
    ctx.by_rank    = by_rank;
    ctx.claimed    = claimed;
    ctx.conns      = conns;
    ctx.conns_cap  = PENDING_MAX;
    ctx.listen_fd  = -1;
    for (int r = 0; r < NRANKS; r++) {
        by_rank[r] = r < ctx.rank && (s[1] >> (2 + r % 6) & 1) ? (hc_tl_ep_t *)&ctx : NULL;
        claimed[r] = NULL;
        if (r < ctx.rank && (s[2] >> r & 1)) {
            claimed[r] = malloc((size_t)ctx.nsocks * sizeof(int));
            FUZZ_ASSERT(claimed[r] != NULL);
            for (int i = 0; i < ctx.nsocks; i++)
                claimed[r][i] = i % 2 == 0 ? 100 + i : -1;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    receiver(data);
    for (size_t at = 3; at < size && ctx.nconns < PENDING_MAX;) {
        int           flags = data[at++];
        hc_tcp_conn_t c;
        memset(&c, 0, sizeof(c));
        c.fd = -1, c.rank = -1, c.idx = -1;
        memcpy(c.from, "fuzz", 5);
        size_t n = flags & 1 ? HC_TCP_HELLO_FIELDS : HC_TCP_HELLO_BYTES;
        n        = n < size - at ? n : size - at;
        memcpy(c.hello, data + at, n);
        at += n;
        if (flags & 1) {
            hc_auth_part_t parts[2] = {{c.hello, HC_TCP_HELLO_FIELDS},
                                       {flags & 2 ? other : nonce, 16}};
            FUZZ_ASSERT(
                hc_auth_mac(key, "hcomm tcp hello", parts, 2, c.hello + HC_TCP_HELLO_FIELDS) == 0);
        }
        c.got = HC_TCP_HELLO_BYTES;

        int         why_given, want = rule(c.hello, &why_given);
        const char *why = NULL;
        int         r   = hc_tcp_hello_check(&ctx, &c, &why);
        FUZZ_ASSERT(r == want);
        if (r == 0)
            FUZZ_ASSERT((why != NULL) == why_given);
        if (r != 1)
            continue;
        FUZZ_ASSERT(c.rank >= 0 && c.rank < ctx.rank && c.idx >= 0 && c.idx < ctx.nsocks);
        conns[ctx.nconns++] = c; /* pending, as conn_read leaves it */
    }
    for (int r = 0; r < NRANKS; r++)
        free(claimed[r]);
    return 0;
}
