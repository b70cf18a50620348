/* fuzz_boot_client.c - the client's side of the bootstrap's gate
 * (hc_gate_client_step): a rank that said hello to the root, or to its ring
 * successor, reads the server's challenge from a socketpair. Input: a flags
 * byte, a split byte, then the server's bytes or what the harness makes of
 * them.
 *   flags & 1:        the hello is the root's (52 bytes) or the ring's (24)
 *   flags >> 1 & 3:   0: the rest is the challenge as sent;
 *                     1: the harness answers as a real server, with a MAC
 *                        under the job key (the rest: its nonce, then more bytes);
 *                     2: the same with the client's label (a MAC of the other
 *                        role); 3: over a hello that differs in one byte
 *   flags & 8:        the server hangs up after its last byte
 *   flags & 16:       the peer is a rank (the ring), else the root
 *   split:            bytes per write (1 + split % 64); steps between writes
 * The result must be what the bytes deserve: HCOMM_SUCCESS (and a proof that
 * verifies as the client's) exactly when the first 52 bytes are a challenge
 * whose MAC verifies as the server's over the hello the client sent;
 * HCOMM_ERR_AUTH for other complete ones; HCOMM_IN_PROGRESS before, and
 * HCOMM_ERR_REMOTE when the server hung up first. */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/auth.h"
#include "base/clock.h"
#include "bootstrap/bootstrap_gate.h"
#include "bootstrap/bootstrap_wire.h"
#include "fuzz.h"

static const uint8_t key[HC_AUTH_KEY_BYTES] = "fuzz job secret"; /* 15 + NUL */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_logs_to_null();
    return 0;
}

static void chal_mac(const char *label, const uint8_t *hello, size_t len, const uint8_t *nonce,
                     uint8_t *mac)
{
    hc_auth_part_t parts[2] = {{hello, len}, {nonce, HC_AUTH_NONCE_BYTES}};
    FUZZ_ASSERT(hc_auth_mac(key, label, parts, 2, mac) == 0);
}

static int chal_ok(const hc_gate_challenge_t *ch, const uint8_t *hello, size_t len)
{
    hc_auth_part_t parts[2] = {{hello, len}, {ch->nonce, HC_AUTH_NONCE_BYTES}};
    return ntohl(ch->magic) == HC_GATE_CHALLENGE_MAGIC &&
           hc_auth_check(key, HC_GATE_LABEL_SERVER, parts, 2, ch->mac);
}

/* What the server sends, in out (room for 52 + size bytes): its length. */
static size_t server_bytes(int mode, const uint8_t *hello, size_t hlen, const uint8_t *data,
                           size_t size, uint8_t *out)
{
    if (mode == 0) {
        memcpy(out, data, size);
        return size;
    }
    hc_gate_challenge_t ch;
    uint8_t             other[HC_GATE_HELLO_MAX];
    memset(&ch, 0, sizeof(ch));
    ch.magic = htonl(HC_GATE_CHALLENGE_MAGIC);
    size_t n = size < sizeof(ch.nonce) ? size : sizeof(ch.nonce);
    memcpy(ch.nonce, data, n);
    memcpy(other, hello, hlen);
    if (mode == 3)
        other[(size > n ? data[n] : 0) % hlen] ^= 1;
    chal_mac(mode == 2 ? HC_GATE_LABEL_CLIENT : HC_GATE_LABEL_SERVER, other, hlen, ch.nonce,
             ch.mac);
    memcpy(out, &ch, sizeof(ch));
    memcpy(out + sizeof(ch), data + n, size - n);
    return sizeof(ch) + size - n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t out[sizeof(hc_gate_challenge_t) + (1 << 20)];
    int            sv[2];
    if (size < 2 || size - 2 > (1 << 20))
        return 0;
    int    flags = data[0], piece = 1 + data[1] % 64, mode = flags >> 1 & 3;
    size_t hlen = flags & 1 ? sizeof(hc_bootstrap_hello_t) : sizeof(hc_bootstrap_ring_hello_t);
    hc_sock_peer_t peer = hc_bootstrap_peer(flags & 16 ? 3 : -1);
    FUZZ_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);

    /* the client says hello; the server reads it */
    uint8_t          hello[HC_GATE_HELLO_MAX], heard[HC_GATE_HELLO_MAX];
    hc_gate_client_t cl;
    double           deadline = hc_clock_now() + 10.0;
    memset(hello, 0x5a, sizeof(hello));
    uint32_t magic = htonl(flags & 1 ? HC_BOOTSTRAP_HELLO_MAGIC : HC_BOOTSTRAP_RING_MAGIC);
    memcpy(hello, &magic, sizeof(magic));
    FUZZ_ASSERT(hc_gate_client_start(&cl, sv[0], hello, hlen, deadline, peer) == HCOMM_SUCCESS);
    FUZZ_ASSERT(recv(sv[1], heard, hlen, 0) == (ssize_t)hlen);

    size_t         len = server_bytes(mode, heard, hlen, data + 2, size - 2, out);
    hcomm_status_t st  = HCOMM_IN_PROGRESS;
    size_t         at  = 0;
    while (at < len && st == HCOMM_IN_PROGRESS) {
        size_t n = len - at < (size_t)piece ? len - at : (size_t)piece;
        FUZZ_ASSERT(send(sv[1], out + at, n, MSG_NOSIGNAL) == (ssize_t)n);
        at += n;
        st = hc_gate_client_step(&cl, key, deadline, peer);
        FUZZ_ASSERT(st == HCOMM_IN_PROGRESS || at >= sizeof(hc_gate_challenge_t));
    }
    if (flags & 8) {
        close(sv[1]);
        sv[1] = -1;
        for (int k = 0; k < 2 && st == HCOMM_IN_PROGRESS; k++)
            st = hc_gate_client_step(&cl, key, deadline, peer);
    }

    if (len < sizeof(hc_gate_challenge_t)) {
        FUZZ_ASSERT(st == (flags & 8 ? HCOMM_ERR_REMOTE : HCOMM_IN_PROGRESS));
    } else if (chal_ok((const hc_gate_challenge_t *)out, heard, hlen)) {
        FUZZ_ASSERT(st == HCOMM_SUCCESS && mode != 2 && mode != 3);
        /* the proof: the client's MAC over the same hello and the server's nonce */
        hc_gate_proof_t proof;
        const uint8_t  *nonce    = ((const hc_gate_challenge_t *)out)->nonce;
        hc_auth_part_t  parts[2] = {{heard, hlen}, {nonce, HC_AUTH_NONCE_BYTES}};
        if (sv[1] >= 0) {
            FUZZ_ASSERT(recv(sv[1], &proof, sizeof(proof), MSG_DONTWAIT) == sizeof(proof));
            FUZZ_ASSERT(hc_auth_check(key, HC_GATE_LABEL_CLIENT, parts, 2, proof.mac));
        }
    } else {
        FUZZ_ASSERT(st == HCOMM_ERR_AUTH && mode != 1);
    }
    close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    return 0;
}
