/* ib_wire.c - encoding and checking what the ib transport sends (ib_wire.h). */
#include "transport/ib/ib_wire.h"

#include <endian.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "base/auth.h"

#define WHY(...) (snprintf(why, wl, __VA_ARGS__), HCOMM_ERR_PROTOCOL)

static void put16(uint8_t *p, uint16_t v)
{
    v = htole16(v);
    memcpy(p, &v, 2);
}
static void put32(uint8_t *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}
static void put64(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}
static uint16_t get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return le16toh(v);
}
static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return le32toh(v);
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return le64toh(v);
}

static int gid_zero(const uint8_t gid[16])
{
    static const uint8_t zero[16];
    return memcmp(gid, zero, 16) == 0;
}

/* The port of one rail: a known link layer, port, MTU, and an address for it
 * (a unicast LID on InfiniBand, a GID on Ethernet). */
static hcomm_status_t rail_check(int i, unsigned link, unsigned port, unsigned mtu, unsigned lid,
                                 const uint8_t gid[16], char *why, size_t wl)
{
    if (link != HC_IB_LINK_IB && link != HC_IB_LINK_ETH)
        return WHY("rail %d: link layer %u is neither InfiniBand (1) nor Ethernet (2)", i, link);
    if (port < 1 || port > 255)
        return WHY("rail %d: port %u out of 1..255", i, port);
    if (mtu < 1 || mtu > 5)
        return WHY("rail %d: MTU code %u out of 1..5 (256..4096 bytes)", i, mtu);
    if (link == HC_IB_LINK_IB && (lid == 0 || lid >= 0xc000))
        return WHY("rail %d: LID 0x%x is not a unicast LID", i, lid);
    if (link == HC_IB_LINK_ETH && gid_zero(gid))
        return WHY("rail %d: a RoCE port without a GID", i);
    return HCOMM_SUCCESS;
}

/* ---- the address blob ---- */

size_t hc_ib_addr_encode(const hc_ib_addr_t *a, uint8_t *buf, size_t cap)
{
    size_t len = HC_IB_ADDR_HDR + HC_IB_ADDR_RAIL * (size_t)a->nrails;
    if (a->nrails < 0 || a->nrails > HC_IB_MAX_RAILS || cap < len)
        return 0;
    memset(buf, 0, len);
    put32(buf, HC_IB_ADDR_MAGIC);
    put16(buf + 4, HC_IB_VERSION);
    put16(buf + 6, (uint16_t)a->nrails);
    put16(buf + 8, a->ipv6 ? 6 : 4);
    put16(buf + 10, a->port);
    memcpy(buf + 12, a->ip, 16);
    for (int i = 0; i < a->nrails; i++) {
        uint8_t                 *p = buf + HC_IB_ADDR_HDR + HC_IB_ADDR_RAIL * i;
        const hc_ib_addr_rail_t *r = &a->rail[i];
        p[0]                       = r->link;
        p[1]                       = r->port;
        p[2]                       = r->mtu;
        put16(p + 4, r->lid);
        put32(p + 8, r->mbps);
        memcpy(p + 16, r->gid, 16);
    }
    return len;
}

hcomm_status_t hc_ib_addr_decode(const uint8_t *buf, size_t len, hc_ib_addr_t *a, char *why,
                                 size_t wl)
{
    memset(a, 0, sizeof(*a));
    if (buf == NULL || len < HC_IB_ADDR_HDR)
        return WHY("address of %zu bytes, shorter than its %d-byte header", len, HC_IB_ADDR_HDR);
    if (get32(buf) != HC_IB_ADDR_MAGIC)
        return WHY("not an ib address (magic 0x%08x)", get32(buf));
    if (get16(buf + 4) != HC_IB_VERSION)
        return WHY("ib address version %u, this build speaks %u", get16(buf + 4), HC_IB_VERSION);
    unsigned n = get16(buf + 6), fam = get16(buf + 8);
    if (n < 1 || n > HC_IB_MAX_RAILS)
        return WHY("%u rails, want 1..%d", n, HC_IB_MAX_RAILS);
    if (len != HC_IB_ADDR_HDR + HC_IB_ADDR_RAIL * (size_t)n)
        return WHY("address of %zu bytes for %u rails, want %zu", len, n,
                   HC_IB_ADDR_HDR + HC_IB_ADDR_RAIL * (size_t)n);
    if ((fam != 4 && fam != 6) || get16(buf + 10) == 0)
        return WHY("side channel address family %u port %u", fam, get16(buf + 10));
    a->ipv6   = fam == 6;
    a->port   = get16(buf + 10);
    a->nrails = (int)n;
    memcpy(a->ip, buf + 12, 16);
    for (int i = 0; i < a->nrails; i++) {
        const uint8_t     *p = buf + HC_IB_ADDR_HDR + HC_IB_ADDR_RAIL * i;
        hc_ib_addr_rail_t *r = &a->rail[i];
        r->link              = p[0];
        r->port              = p[1];
        r->mtu               = p[2];
        r->lid               = get16(p + 4);
        r->mbps              = get32(p + 8);
        memcpy(r->gid, p + 16, 16);
        hcomm_status_t st = rail_check(i, r->link, r->port, r->mtu, r->lid, r->gid, why, wl);
        if (st != HCOMM_SUCCESS)
            return st;
    }
    return HCOMM_SUCCESS;
}

int hc_ib_addr_rails(const hc_ib_addr_t *a, const hc_ib_addr_t *b)
{
    int n = a->nrails < b->nrails ? a->nrails : b->nrails;
    for (int i = 0; i < n; i++)
        if (a->rail[i].link != b->rail[i].link)
            return 0;
    return n > 0 ? n : 0;
}

socklen_t hc_ib_addr_sockaddr(const hc_ib_addr_t *a, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (a->ipv6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        s6->sin6_family         = AF_INET6;
        s6->sin6_port           = htons(a->port);
        memcpy(&s6->sin6_addr, a->ip, 16);
        return sizeof(*s6);
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    s4->sin_family         = AF_INET;
    s4->sin_port           = htons(a->port);
    memcpy(&s4->sin_addr, a->ip, 4);
    return sizeof(*s4);
}

int hc_ib_addr_set_sockaddr(hc_ib_addr_t *a, const struct sockaddr *sa)
{
    memset(a->ip, 0, sizeof(a->ip));
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        a->ipv6                       = 1;
        a->port                       = ntohs(s6->sin6_port);
        memcpy(a->ip, &s6->sin6_addr, 16);
        return 0;
    }
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        a->ipv6                      = 0;
        a->port                      = ntohs(s4->sin_port);
        memcpy(a->ip, &s4->sin_addr, 4);
        return 0;
    }
    return -1;
}

/* ---- connection data ---- */

size_t hc_ib_conn_encode(const hc_ib_conn_t *c, uint8_t *buf, size_t cap)
{
    size_t len = HC_IB_CONN_FIXED + HC_IB_CONN_RAIL * (size_t)c->nrails;
    if (c->nrails > HC_IB_MAX_RAILS || cap < len)
        return 0;
    memset(buf, 0, len);
    put32(buf, HC_IB_CONN_MAGIC);
    put16(buf + 4, HC_IB_VERSION);
    put16(buf + 6, (uint16_t)c->kind);
    put32(buf + 8, (uint32_t)len);
    put32(buf + 12, c->rank);
    memcpy(buf + 16, c->tag, 16);
    put32(buf + 32, c->nrails);
    put32(buf + 36, c->nslots);
    put32(buf + 40, c->slot_size);
    put32(buf + 44, c->rkey);
    put64(buf + 48, c->slots_addr);
    put64(buf + 56, c->ctrl_addr);
    for (uint32_t i = 0; i < c->nrails; i++) {
        uint8_t                 *p = buf + HC_IB_CONN_FIXED + HC_IB_CONN_RAIL * i;
        const hc_ib_rail_conn_t *r = &c->rail[i];
        put32(p, r->qpn);
        put32(p + 4, r->psn);
        put16(p + 8, r->lid);
        p[10] = r->mtu;
        p[11] = r->link;
        p[12] = r->rd_dest;
        memcpy(p + 16, r->gid, 16);
    }
    return len;
}

size_t hc_ib_conn_peek(const uint8_t *hdr, char *why, size_t wl)
{
    uint32_t len = get32(hdr + 8);
    if (get32(hdr) != HC_IB_CONN_MAGIC) {
        snprintf(why, wl, "not an ib connection message (magic 0x%08x)", get32(hdr));
        return 0;
    }
    if (get16(hdr + 4) != HC_IB_VERSION) {
        snprintf(why, wl, "ib connection version %u, this build speaks %u", get16(hdr + 4),
                 HC_IB_VERSION);
        return 0;
    }
    if (len < HC_IB_CONN_FIXED + HC_IB_CONN_RAIL || len > HC_IB_CONN_MAX) {
        snprintf(why, wl, "ib connection message of %u bytes, want %d..%d", len,
                 HC_IB_CONN_FIXED + HC_IB_CONN_RAIL, HC_IB_CONN_MAX);
        return 0;
    }
    return len;
}

static hcomm_status_t conn_fixed(const uint8_t *buf, size_t len, hc_ib_conn_t *c, char *why,
                                 size_t wl)
{
    if (buf == NULL || len < HC_IB_CONN_HDR)
        return WHY("%zu bytes: no connection header", len);
    size_t total = hc_ib_conn_peek(buf, why, wl); /* at least one rail's worth */
    if (total == 0)
        return HCOMM_ERR_PROTOCOL;
    if (len != total)
        return WHY("connection message of %zu bytes, its header says %zu", len, total);
    c->kind = get16(buf + 6);
    c->rank = get32(buf + 12);
    memcpy(c->tag, buf + 16, 16);
    c->nrails     = get32(buf + 32);
    c->nslots     = get32(buf + 36);
    c->slot_size  = get32(buf + 40);
    c->rkey       = get32(buf + 44);
    c->slots_addr = get64(buf + 48);
    c->ctrl_addr  = get64(buf + 56);
    if (c->kind != HC_IB_CONN_HELLO && c->kind != HC_IB_CONN_REPLY)
        return WHY("connection message of kind %u", c->kind);
    if (c->nrails < 1 || c->nrails > HC_IB_MAX_RAILS)
        return WHY("%u rails, want 1..%d", c->nrails, HC_IB_MAX_RAILS);
    if (len != HC_IB_CONN_FIXED + HC_IB_CONN_RAIL * (size_t)c->nrails)
        return WHY("connection message of %zu bytes for %u rails", len, c->nrails);
    if (c->nslots < 1 || c->nslots > HC_IB_NSLOTS_MAX)
        return WHY("%u receive slots, want 1..%d", c->nslots, HC_IB_NSLOTS_MAX);
    if (c->slot_size < HC_IB_SLOT_MIN || c->slot_size > HC_IB_SLOT_MAX || c->slot_size % 64)
        return WHY("receive slots of %u bytes, want a multiple of 64 in %d..%u", c->slot_size,
                   HC_IB_SLOT_MIN, HC_IB_SLOT_MAX);
    if (c->slots_addr == 0 || c->ctrl_addr == 0 || c->ctrl_addr % 8)
        return WHY("slots at 0x%llx, credit words at 0x%llx", (unsigned long long)c->slots_addr,
                   (unsigned long long)c->ctrl_addr);
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_ib_conn_decode(const uint8_t *buf, size_t len, hc_ib_conn_t *c, char *why,
                                 size_t wl)
{
    memset(c, 0, sizeof(*c));
    hcomm_status_t st = conn_fixed(buf, len, c, why, wl);
    if (st != HCOMM_SUCCESS)
        return st;
    for (uint32_t i = 0; i < c->nrails; i++) {
        const uint8_t     *p = buf + HC_IB_CONN_FIXED + HC_IB_CONN_RAIL * i;
        hc_ib_rail_conn_t *r = &c->rail[i];
        r->qpn               = get32(p);
        r->psn               = get32(p + 4);
        r->lid               = get16(p + 8);
        r->mtu               = p[10];
        r->link              = p[11];
        r->rd_dest           = p[12];
        memcpy(r->gid, p + 16, 16);
        if (r->qpn < 2 || r->qpn > 0xffffff)
            return WHY("rail %u: QP number 0x%x out of 2..0xffffff", i, r->qpn);
        if (r->psn > 0xffffff)
            return WHY("rail %u: PSN 0x%x wider than 24 bits", i, r->psn);
        if (r->rd_dest == 0)
            return WHY("rail %u: takes no RDMA reads", i);
        st = rail_check((int)i, r->link, 1, r->mtu, r->lid, r->gid, why, wl);
        if (st != HCOMM_SUCCESS)
            return st;
    }
    return HCOMM_SUCCESS;
}

int hc_ib_conn_tag(const uint8_t key[16], uint32_t kind, uint32_t from, uint32_t to,
                   uint8_t tag[16])
{
    uint32_t       w[3] = {kind, from, to};
    hc_auth_part_t part = {w, sizeof(w)};
    return hc_auth_tag(key, "hcomm ib connection", &part, 1, tag);
}

hcomm_status_t hc_ib_conn_check(const hc_ib_conn_t *c, const uint8_t key[16], uint32_t kind,
                                uint32_t self, int peer, uint32_t nslots, uint32_t slot_size,
                                char *why, size_t wl)
{
    uint8_t tag[16];
    if (hc_ib_conn_tag(key, c->kind, c->rank, self, tag) != 0 ||
        !hc_auth_equal(tag, c->tag, sizeof(tag))) {
        snprintf(why, wl, "rank %u shows no proof of this communicator's key", c->rank);
        return HCOMM_ERR_AUTH;
    }
    if (c->kind != kind)
        return WHY("a %s from rank %u, want a %s", c->kind == HC_IB_CONN_HELLO ? "HELLO" : "REPLY",
                   c->rank, kind == HC_IB_CONN_HELLO ? "HELLO" : "REPLY");
    if (kind == HC_IB_CONN_HELLO && (c->rank >= self || (peer >= 0 && c->rank != (uint32_t)peer)))
        return WHY("a HELLO from rank %u, want one from a rank below %u", c->rank, self);
    if (kind == HC_IB_CONN_REPLY && (peer < 0 || c->rank != (uint32_t)peer || c->rank <= self))
        return WHY("a REPLY from rank %u, want one from rank %d", c->rank, peer);
    if (c->nslots != nslots || c->slot_size != slot_size)
        return WHY("rank %u has %u receive slots of %u bytes, this side %u of %u", c->rank,
                   c->nslots, c->slot_size, nslots, slot_size);
    return HCOMM_SUCCESS;
}

/* ---- rendezvous ---- */

size_t hc_ib_rts_encode(const hc_ib_rts_t *r, uint8_t *buf)
{
    memset(buf, 0, HC_IB_RTS_BYTES);
    put64(buf, r->len);
    put64(buf + 8, r->addr);
    put32(buf + 16, r->nrails);
    for (uint32_t i = 0; i < r->nrails && i < HC_IB_MAX_RAILS; i++)
        put32(buf + 24 + 4 * i, r->rkey[i]);
    return HC_IB_RTS_BYTES;
}

hcomm_status_t hc_ib_rts_decode(const uint8_t *buf, size_t len, hc_ib_rts_t *r, char *why,
                                size_t wl)
{
    memset(r, 0, sizeof(*r));
    if (len != HC_IB_RTS_BYTES)
        return WHY("rendezvous request of %zu bytes, want %d", len, HC_IB_RTS_BYTES);
    r->len    = get64(buf);
    r->addr   = get64(buf + 8);
    r->nrails = get32(buf + 16);
    if (r->nrails < 1 || r->nrails > HC_IB_MAX_RAILS)
        return WHY("rendezvous request over %u rails, want 1..%d", r->nrails, HC_IB_MAX_RAILS);
    if (r->len == 0 || r->addr == 0 || r->addr + r->len < r->addr)
        return WHY("rendezvous request for %llu bytes at 0x%llx", (unsigned long long)r->len,
                   (unsigned long long)r->addr);
    for (uint32_t i = 0; i < r->nrails; i++)
        r->rkey[i] = get32(buf + 24 + 4 * i);
    return HCOMM_SUCCESS;
}

/* ---- credit words ---- */

void hc_ib_ctrl_encode(uint8_t *buf, uint64_t freed, uint64_t rndv_done)
{
    put64(buf, freed);
    put64(buf + 8, rndv_done);
}

void hc_ib_ctrl_decode(const uint8_t *buf, uint64_t *freed, uint64_t *rndv_done)
{
    const uint64_t *w = (const uint64_t *)(const void *)buf;
    *freed            = le64toh(__atomic_load_n(&w[0], __ATOMIC_ACQUIRE));
    *rndv_done        = le64toh(__atomic_load_n(&w[1], __ATOMIC_ACQUIRE));
}
