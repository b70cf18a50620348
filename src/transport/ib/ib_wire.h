/* ib_wire.h - what the ib transport puts on the wire, encoded and checked
 * without a device (tests/unit/test_ib.c):
 *
 *   the address blob   each rank's, published at init through the bootstrap:
 *                      its side channel's IP and port, and per NIC (rail) the
 *                      link layer, port, MTU, LID, GID and speed;
 *   connection data    sent over the side channel when a pair connects: the
 *                      lower rank's HELLO, the higher rank's REPLY (QP
 *                      numbers, PSNs, the receive slots' and the credit
 *                      words' addresses and rkey, the cookie);
 *   a rendezvous RTS   in a receive slot: the length, address and per-rail
 *                      rkeys of a large message the receiver reads;
 *   immediate data     of each RDMA write into a slot: kind and length;
 *   the credit words   the receiver RDMA-writes into the sender's memory:
 *                      slots freed, rendezvous reads finished (both counts).
 *
 * Everything is little-endian at fixed offsets; decoders check magic,
 * version, sizes and ranges and refuse anything else with
 * HCOMM_ERR_PROTOCOL and a reason in why.
 */
#ifndef HC_TL_IB_WIRE_H
#define HC_TL_IB_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "hcomm.h"

#define HC_IB_MAX_RAILS 8 /* NICs one rank uses, one QP per peer on each */
#define HC_IB_VERSION 1u
#define HC_IB_LINK_IB 1  /* IBV_LINK_LAYER_INFINIBAND */
#define HC_IB_LINK_ETH 2 /* IBV_LINK_LAYER_ETHERNET: RoCE */

/* ---- the address blob ---- */

#define HC_IB_ADDR_MAGIC 0x61696368u /* "hcia" */
#define HC_IB_ADDR_HDR 32
#define HC_IB_ADDR_RAIL 32
#define HC_IB_ADDR_MAX (HC_IB_ADDR_HDR + HC_IB_ADDR_RAIL * HC_IB_MAX_RAILS)

typedef struct hc_ib_addr_rail {
    uint8_t  link, port, mtu; /* HC_IB_LINK_*, port number, ibv_mtu code */
    uint16_t lid;
    uint32_t mbps; /* link data rate, Mbit/s (0: unknown) */
    uint8_t  gid[16];
} hc_ib_addr_rail_t;

typedef struct hc_ib_addr {
    int               ipv6;   /* the side channel's address family */
    uint16_t          port;   /* its TCP port */
    uint8_t           ip[16]; /* 4 bytes for IPv4 */
    int               nrails;
    hc_ib_addr_rail_t rail[HC_IB_MAX_RAILS];
} hc_ib_addr_t;

/* Bytes written (HC_IB_ADDR_HDR + HC_IB_ADDR_RAIL * nrails), 0 if cap is short. */
size_t         hc_ib_addr_encode(const hc_ib_addr_t *a, uint8_t *buf, size_t cap);
hcomm_status_t hc_ib_addr_decode(const uint8_t *buf, size_t len, hc_ib_addr_t *a, char *why,
                                 size_t wl);
/* The rails a pair uses: rail i of one rank with rail i of the other, as many
 * as the rank with fewer has, all of them of one link layer pairwise; 0 when
 * they cannot talk. Symmetric: both ranks of a pair get the same answer. */
int hc_ib_addr_rails(const hc_ib_addr_t *a, const hc_ib_addr_t *b);
/* The side channel's socket address. */
socklen_t hc_ib_addr_sockaddr(const hc_ib_addr_t *a, struct sockaddr_storage *ss);
/* The other way: fills ipv6, port and ip from a bound socket address; -1
 * when it is neither IPv4 nor IPv6. */
int hc_ib_addr_set_sockaddr(hc_ib_addr_t *a, const struct sockaddr *sa);

/* ---- connection data ---- */

#define HC_IB_CONN_MAGIC 0x63696368u /* "hcic" */
#define HC_IB_CONN_HDR 12            /* magic, version, kind, length: what says how much follows */
#define HC_IB_CONN_FIXED 64
#define HC_IB_CONN_RAIL 32
#define HC_IB_CONN_MAX (HC_IB_CONN_FIXED + HC_IB_CONN_RAIL * HC_IB_MAX_RAILS)
#define HC_IB_NSLOTS_MAX 4096
#define HC_IB_SLOT_MIN 64
#define HC_IB_SLOT_MAX (1u << 20)

enum { HC_IB_CONN_HELLO = 1, HC_IB_CONN_REPLY = 2 };

typedef struct hc_ib_rail_conn {
    uint32_t qpn, psn; /* 24 bits each */
    uint16_t lid;
    uint8_t  mtu, link;
    uint8_t  rd_dest; /* RDMA reads it takes in flight as responder (>= 1) */
    uint8_t  gid[16];
} hc_ib_rail_conn_t;

typedef struct hc_ib_conn {
    uint32_t          kind; /* HC_IB_CONN_HELLO or _REPLY */
    uint32_t          rank; /* the sender's */
    uint8_t           tag[16]; /* hc_ib_conn_tag: proof of the key, which stays home */
    uint32_t          nrails;
    uint32_t          nslots, slot_size; /* the sender's receive slots */
    uint32_t          rkey;              /* of the slots and the credit words (rail 0) */
    uint64_t          slots_addr;        /* slot i at slots_addr + i * slot_size */
    uint64_t          ctrl_addr;         /* the credit words the peer writes */
    hc_ib_rail_conn_t rail[HC_IB_MAX_RAILS];
} hc_ib_conn_t;

size_t hc_ib_conn_encode(const hc_ib_conn_t *c, uint8_t *buf, size_t cap);
/* From the first HC_IB_CONN_HDR bytes of a message: its whole length, or 0
 * (why says) when they are not the start of one. */
size_t         hc_ib_conn_peek(const uint8_t *hdr, char *why, size_t wl);
hcomm_status_t hc_ib_conn_decode(const uint8_t *buf, size_t len, hc_ib_conn_t *c, char *why,
                                 size_t wl);
/* The tag of a message of kind from rank to rank `to`: a MAC under the
 * communicator's key. 0, or -1 (logged). */
int hc_ib_conn_tag(const uint8_t key[16], uint32_t kind, uint32_t from, uint32_t to,
                   uint8_t tag[16]);
/* Whether a decoded message is the one this rank (self) waits for: its tag
 * proves the communicator's key (else HCOMM_ERR_AUTH), then a HELLO from a rank
 * below self (peer < 0: any) or a REPLY from peer, with receive slots laid
 * out as this side's (nslots of slot_size: both sides index them alike)
 * (else HCOMM_ERR_PROTOCOL). */
hcomm_status_t hc_ib_conn_check(const hc_ib_conn_t *c, const uint8_t key[16], uint32_t kind,
                                uint32_t self, int peer, uint32_t nslots, uint32_t slot_size,
                                char *why, size_t wl);

/* ---- rendezvous ---- */

#define HC_IB_RTS_BYTES (24 + 4 * HC_IB_MAX_RAILS)

typedef struct hc_ib_rts {
    uint64_t len, addr; /* the message, in the sender's memory */
    uint32_t nrails;
    uint32_t rkey[HC_IB_MAX_RAILS]; /* of its registration on each rail */
} hc_ib_rts_t;

size_t         hc_ib_rts_encode(const hc_ib_rts_t *r, uint8_t *buf); /* HC_IB_RTS_BYTES */
hcomm_status_t hc_ib_rts_decode(const uint8_t *buf, size_t len, hc_ib_rts_t *r, char *why,
                                size_t wl);

/* ---- immediate data: kind in the top 2 bits, length in the other 30 ---- */

enum { HC_IB_IMM_EAGER = 0, HC_IB_IMM_RTS = 1 };
#define HC_IB_IMM_LEN_MAX ((1u << 30) - 1)

static inline uint32_t hc_ib_imm_make(unsigned kind, uint32_t len)
{
    return (uint32_t)kind << 30 | (len & HC_IB_IMM_LEN_MAX);
}
static inline unsigned hc_ib_imm_kind(uint32_t imm)
{
    return imm >> 30;
}
static inline uint32_t hc_ib_imm_len(uint32_t imm)
{
    return imm & HC_IB_IMM_LEN_MAX;
}

/* ---- the credit words: [0] slots freed, [1] rendezvous reads done ---- */

/* 8-aligned: decode loads each word atomically (the NIC writes them) */
#define HC_IB_CTRL_BYTES 16
void hc_ib_ctrl_encode(uint8_t *buf, uint64_t freed, uint64_t rndv_done);
void hc_ib_ctrl_decode(const uint8_t *buf, uint64_t *freed, uint64_t *rndv_done);

#endif
