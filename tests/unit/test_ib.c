/* test_ib.c - the ib transport's device-free logic, run without an RDMA
 * device: HCOMM_IB_HCA parsing and matching, the speed/width table, the
 * address blob, connection data and RTS encoders and their checks (malformed
 * input refused with HCOMM_ERR_PROTOCOL and a reason), credit and slot
 * bookkeeping, chunking, work request ids; the registration cache over a
 * fake register function is test_ib_rcache.c's. The verbs side is the
 * conformance suite's (tests/transport, variant "ib"), where a device is. */
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "transport/ib/ib_flow.h"
#include "transport/ib/ib_hca.h"
#include "transport/ib/ib_speed.h"
#include "transport/ib/ib_wire.h"

#include "test_ib_rcache.h" /* the registration cache's cases */

/* ---- HCOMM_IB_HCA ---- */

static hc_ib_hca_filter_t parse_ok(const char *spec)
{
    hc_ib_hca_filter_t f;
    char               why[256] = "";
    if (hc_ib_hca_parse(spec, &f, why, sizeof(why)) != 0)
        fail_msg("'%s' refused: %s", spec, why);
    return f;
}

static void test_hca_empty(void **state)
{
    (void)state;
    hc_ib_hca_filter_t f = parse_ok(NULL);
    assert_int_equal(f.n, 0);
    assert_true(hc_ib_hca_match(&f, "mlx5_0", 1));
    f = parse_ok("");
    assert_true(hc_ib_hca_match(&f, "rxe0", 2));
}

static void test_hca_prefix_exact(void **state)
{
    (void)state;
    hc_ib_hca_filter_t f = parse_ok("mlx5");
    assert_true(hc_ib_hca_match(&f, "mlx5_0", 1));
    assert_true(hc_ib_hca_match(&f, "mlx5_13", 2));
    assert_false(hc_ib_hca_match(&f, "mlx4_0", 1));
    f = parse_ok("=mlx5_1");
    assert_true(f.exact);
    assert_true(hc_ib_hca_match(&f, "mlx5_1", 1));
    assert_false(hc_ib_hca_match(&f, "mlx5_10", 1));
    f = parse_ok(",mlx5_1,,rxe,"); /* empty items skipped */
    assert_int_equal(f.n, 2);
    assert_true(hc_ib_hca_match(&f, "rxe0", 1));
}

static void test_hca_exclude(void **state)
{
    (void)state;
    hc_ib_hca_filter_t f = parse_ok("^mlx5_0");
    assert_true(f.exclude && !f.exact);
    assert_false(hc_ib_hca_match(&f, "mlx5_0", 1));
    assert_false(hc_ib_hca_match(&f, "mlx5_01", 1)); /* a prefix */
    assert_true(hc_ib_hca_match(&f, "mlx5_1", 1));
    f = parse_ok("^=mlx5_0");
    assert_true(f.exclude && f.exact);
    assert_false(hc_ib_hca_match(&f, "mlx5_0", 1));
    assert_true(hc_ib_hca_match(&f, "mlx5_01", 1));
    f = parse_ok("^mlx5_0:2");
    assert_true(hc_ib_hca_match(&f, "mlx5_0", 1));
    assert_false(hc_ib_hca_match(&f, "mlx5_0", 2));
}

static void test_hca_ports(void **state)
{
    (void)state;
    hc_ib_hca_filter_t f = parse_ok("mlx5_0:1,mlx5_1");
    assert_int_equal(f.e[0].port, 1);
    assert_int_equal(f.e[1].port, -1);
    assert_true(hc_ib_hca_match(&f, "mlx5_0", 1));
    assert_false(hc_ib_hca_match(&f, "mlx5_0", 2));
    assert_true(hc_ib_hca_match(&f, "mlx5_1", 2));
    f = parse_ok("=mlx5_0:255");
    assert_true(hc_ib_hca_match(&f, "mlx5_0", 255));
}

/* The forms NCCL's documentation gives, as written there. */
static void test_hca_nccl_forms(void **state)
{
    (void)state;
    hc_ib_hca_filter_t f = parse_ok("mlx5_0:1,mlx5_1");
    assert_int_equal(f.n, 2);
    assert_true(hc_ib_hca_match(&f, "mlx5_0", 1));
    assert_false(hc_ib_hca_match(&f, "mlx5_0", 2));
    assert_true(hc_ib_hca_match(&f, "mlx5_1", 1) && hc_ib_hca_match(&f, "mlx5_1", 2));
    assert_true(hc_ib_hca_match(&f, "mlx5_10", 1)); /* a prefix, without "=" */
    assert_false(hc_ib_hca_match(&f, "mlx5_2", 1));
    f = parse_ok("^mlx5_2");
    assert_false(hc_ib_hca_match(&f, "mlx5_2", 1));
    assert_true(hc_ib_hca_match(&f, "mlx5_0", 1) && hc_ib_hca_match(&f, "mlx5_1", 2));
    f = parse_ok("=mlx5_0");
    assert_true(hc_ib_hca_match(&f, "mlx5_0", 1) && hc_ib_hca_match(&f, "mlx5_0", 2));
    assert_false(hc_ib_hca_match(&f, "mlx5_00", 1));
    assert_false(hc_ib_hca_match(&f, "mlx5_1", 1));
}

static void test_hca_bad(void **state)
{
    static const char *bad[] = {"mlx5_0:0", "mlx5_0:256", "mlx5_0:x",    "mlx5_0:", ":1",
                                "^",        "^=",         "=",           ",,",      "mlx 5",
                                "mlx5/0",   "mlx5_0:1:2", "mlx5_0:99999"};
    char               longname[100], many[400];
    hc_ib_hca_filter_t f;
    char               why[256];
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = '\0';
        if (hc_ib_hca_parse(bad[i], &f, why, sizeof(why)) != -1)
            fail_msg("'%s' was taken", bad[i]);
        assert_true(why[0] != '\0');
    }
    memset(longname, 'a', 64);
    longname[64] = '\0';
    assert_int_equal(hc_ib_hca_parse(longname, &f, why, sizeof(why)), -1);
    longname[63] = '\0';
    assert_int_equal(hc_ib_hca_parse(longname, &f, why, sizeof(why)), 0);
    many[0] = '\0';
    for (int i = 0; i <= HC_IB_HCA_MAX; i++)
        strcat(many, "d,");
    assert_int_equal(hc_ib_hca_parse(many, &f, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "more than"));
}

/* ---- port codes ---- */

static void test_speed_table(void **state)
{
    (void)state;
    /* active_width 2 is 4x: the usual link */
    assert_true(hc_ib_port_gbps(1, 1) == 0.25); /* SDR 1x: 2 Gbit/s */
    assert_true(hc_ib_port_gbps(4, 2) == 4.0);  /* QDR 4x: 32 Gbit/s */
    assert_true(hc_ib_port_gbps(8, 2) == 5.0);  /* FDR10 4x: 40 */
    assert_true(hc_ib_port_gbps(16, 2) > 6.8 && hc_ib_port_gbps(16, 2) < 6.83); /* FDR 4x */
    assert_true(hc_ib_port_gbps(32, 2) == 12.5);   /* EDR 4x: 100 Gbit/s */
    assert_true(hc_ib_port_gbps(64, 2) == 25.0);   /* HDR 4x: 200 */
    assert_true(hc_ib_port_gbps(64, 16) == 12.5);  /* HDR 2x: 100 */
    assert_true(hc_ib_port_gbps(128, 2) == 50.0);  /* NDR 4x: 400 */
    assert_true(hc_ib_port_gbps(128, 1) == 12.5);  /* NDR 1x */
    assert_true(hc_ib_port_gbps(256, 2) == 100.0); /* XDR 4x (active_speed_ex only) */
    assert_true(hc_ib_port_gbps(32, 8) == 37.5);   /* EDR 12x */
    assert_true(hc_ib_port_gbps(32, 4) == 25.0);   /* EDR 8x */
    assert_true(hc_ib_port_gbps(3, 2) == 0.0);     /* unknown speed */
    assert_true(hc_ib_port_gbps(32, 3) == 0.0);    /* unknown width */
    assert_true(hc_ib_port_gbps(0, 0) == 0.0);
    assert_string_equal(hc_ib_speed_name(32), "EDR");
    assert_string_equal(hc_ib_speed_name(128), "NDR");
    assert_string_equal(hc_ib_speed_name(5), "?");
    assert_int_equal(hc_ib_width_lanes(8), 12);
}

static void test_mtu_gid(void **state)
{
    static const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
    static const uint8_t ll[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
    (void)state;
    assert_int_equal(hc_ib_mtu_bytes(1), 256);
    assert_int_equal(hc_ib_mtu_bytes(3), 1024);
    assert_int_equal(hc_ib_mtu_bytes(5), 4096);
    assert_int_equal(hc_ib_mtu_bytes(0), 0);
    assert_int_equal(hc_ib_mtu_bytes(6), 0);
    assert_true(hc_ib_gid_v4mapped(v4));
    assert_false(hc_ib_gid_v4mapped(ll));
}

/* ---- the address blob ---- */

static hc_ib_addr_t sample_addr(int nrails)
{
    hc_ib_addr_t a;
    memset(&a, 0, sizeof(a));
    a.port  = 40123;
    a.ip[0] = 10, a.ip[3] = 7;
    a.nrails = nrails;
    for (int i = 0; i < nrails; i++) {
        a.rail[i].link = i % 2 ? HC_IB_LINK_ETH : HC_IB_LINK_IB;
        a.rail[i].port = (uint8_t)(1 + i);
        a.rail[i].mtu  = 5;
        a.rail[i].lid  = (uint16_t)(0x10 + i);
        a.rail[i].mbps = 200000;
        memset(a.rail[i].gid, 0x20 + i, 16);
    }
    return a;
}

static void expect_refused(hcomm_status_t st, const char *why, const char *what)
{
    if (st != HCOMM_ERR_PROTOCOL)
        fail_msg("%s: taken (status %d)", what, (int)st);
    if (why[0] == '\0')
        fail_msg("%s: refused without a reason", what);
}

static void test_addr_roundtrip(void **state)
{
    uint8_t      buf[HC_IB_ADDR_MAX];
    char         why[256];
    hc_ib_addr_t a = sample_addr(3), b;
    (void)state;
    size_t n = hc_ib_addr_encode(&a, buf, sizeof(buf));
    assert_int_equal(n, HC_IB_ADDR_HDR + 3 * HC_IB_ADDR_RAIL);
    assert_int_equal(hc_ib_addr_encode(&a, buf, n - 1), 0);
    assert_int_equal(hc_ib_addr_decode(buf, n, &b, why, sizeof(why)), HCOMM_SUCCESS);
    assert_memory_equal(&a, &b, sizeof(a));
    assert_true(n <= 1024); /* HC_TL_ADDR_MAX */
    a = sample_addr(HC_IB_MAX_RAILS);
    assert_int_equal(hc_ib_addr_encode(&a, buf, sizeof(buf)), HC_IB_ADDR_MAX);
}

/* A change to an encoded message: n bytes at off. */
typedef struct patch {
    const char *what;
    size_t      off, n;
    uint8_t     v[16];
} patch_t;

/* The sample address (rail 0 InfiniBand at 32, rail 1 RoCE at 64), spoiled. */
static const patch_t addr_patches[] = {
    {"magic", 0, 1, {0}},
    {"version", 4, 1, {2}},
    {"0 rails", 6, 1, {0}},
    {"9 rails", 6, 1, {9}},
    {"rails past the end", 6, 1, {3}},
    {"family", 8, 1, {5}},
    {"port 0", 10, 2, {0, 0}},
    {"link layer", 32, 1, {3}},
    {"port number", 33, 1, {0}},
    {"MTU code", 34, 1, {6}},
    {"LID 0", 36, 2, {0, 0}},
    {"multicast LID", 36, 2, {0x00, 0xc0}},
    {"RoCE without GID", 64 + 16, 16, {0}},
};

static void test_addr_bad(void **state)
{
    uint8_t      buf[HC_IB_ADDR_MAX];
    char         why[256] = "";
    hc_ib_addr_t a        = sample_addr(2), b;
    size_t       n        = hc_ib_addr_encode(&a, buf, sizeof(buf));
    (void)state;
    expect_refused(hc_ib_addr_decode(NULL, 0, &b, why, sizeof(why)), why, "nothing");
    expect_refused(hc_ib_addr_decode(buf, HC_IB_ADDR_HDR - 1, &b, why, sizeof(why)), why,
                   "shorter than a header");
    expect_refused(hc_ib_addr_decode(buf, n - 1, &b, why, sizeof(why)), why, "a rail cut");
    for (size_t i = 0; i < sizeof(addr_patches) / sizeof(addr_patches[0]); i++) {
        const patch_t *p = &addr_patches[i];
        hc_ib_addr_encode(&a, buf, sizeof(buf));
        memcpy(buf + p->off, p->v, p->n);
        why[0] = '\0';
        expect_refused(hc_ib_addr_decode(buf, n, &b, why, sizeof(why)), why, p->what);
    }
}

static void test_addr_rails(void **state)
{
    hc_ib_addr_t a = sample_addr(3), b = sample_addr(2), c = sample_addr(2), z = sample_addr(0);
    (void)state;
    assert_int_equal(hc_ib_addr_rails(&a, &b), 2);
    assert_int_equal(hc_ib_addr_rails(&b, &a), 2);
    c.rail[1].link = HC_IB_LINK_IB; /* rail 1: InfiniBand here, RoCE there */
    assert_int_equal(hc_ib_addr_rails(&a, &c), 0);
    assert_int_equal(hc_ib_addr_rails(&c, &a), 0);
    assert_int_equal(hc_ib_addr_rails(&a, &z), 0);
}

static void test_addr_sockaddr(void **state)
{
    struct sockaddr_storage ss;
    hc_ib_addr_t            a = sample_addr(1), b = sample_addr(1);
    (void)state;
    socklen_t len = hc_ib_addr_sockaddr(&a, &ss);
    assert_int_equal(ss.ss_family, AF_INET);
    assert_int_equal(hc_ib_addr_set_sockaddr(&b, (struct sockaddr *)&ss), 0);
    assert_int_equal(b.port, 40123);
    assert_memory_equal(a.ip, b.ip, 16);
    a.ipv6 = 1;
    memset(a.ip, 0, 16);
    a.ip[15] = 1; /* ::1 */
    len      = hc_ib_addr_sockaddr(&a, &ss);
    assert_int_equal(ss.ss_family, AF_INET6);
    assert_true(len > sizeof(struct sockaddr_in));
    assert_int_equal(hc_ib_addr_set_sockaddr(&b, (struct sockaddr *)&ss), 0);
    assert_true(b.ipv6);
    assert_memory_equal(a.ip, b.ip, 16);
    ss.ss_family = AF_UNIX;
    assert_int_equal(hc_ib_addr_set_sockaddr(&b, (struct sockaddr *)&ss), -1);
}

/* ---- connection data ---- */

static hc_ib_conn_t sample_conn(int nrails)
{
    hc_ib_conn_t c;
    memset(&c, 0, sizeof(c));
    c.kind = HC_IB_CONN_HELLO;
    c.rank = 3;
    memset(c.tag, 0xc5, 16);
    c.nrails     = (uint32_t)nrails;
    c.nslots     = 32;
    c.slot_size  = 16384;
    c.rkey       = 0x1234abcd;
    c.slots_addr = 0x7f0000001000ull;
    c.ctrl_addr  = 0x7f0000000000ull;
    for (int i = 0; i < nrails; i++) {
        c.rail[i].qpn     = 0x100 + (uint32_t)i;
        c.rail[i].psn     = 0xabcdef;
        c.rail[i].lid     = (uint16_t)(7 + i);
        c.rail[i].mtu     = 4;
        c.rail[i].link    = HC_IB_LINK_IB;
        c.rail[i].rd_dest = 16;
        memset(c.rail[i].gid, i == 0 ? 0xfe : 0, 16); /* InfiniBand needs none */
    }
    return c;
}

static void test_conn_roundtrip(void **state)
{
    uint8_t      buf[HC_IB_CONN_MAX];
    char         why[256];
    hc_ib_conn_t a = sample_conn(2), b;
    (void)state;
    size_t n = hc_ib_conn_encode(&a, buf, sizeof(buf));
    assert_int_equal(n, HC_IB_CONN_FIXED + 2 * HC_IB_CONN_RAIL);
    assert_int_equal(hc_ib_conn_peek(buf, why, sizeof(why)), n);
    assert_int_equal(hc_ib_conn_decode(buf, n, &b, why, sizeof(why)), HCOMM_SUCCESS);
    assert_memory_equal(&a, &b, sizeof(a));
    a      = sample_conn(HC_IB_MAX_RAILS);
    a.kind = HC_IB_CONN_REPLY;
    n      = hc_ib_conn_encode(&a, buf, sizeof(buf));
    assert_int_equal(n, HC_IB_CONN_MAX);
    assert_int_equal(hc_ib_conn_decode(buf, n, &b, why, sizeof(why)), HCOMM_SUCCESS);
    assert_memory_equal(&a, &b, sizeof(a));
    assert_int_equal(hc_ib_conn_encode(&a, buf, n - 1), 0);
}

/* The sample HELLO (fixed part, rail 0 at 64, rail 1 at 96), spoiled. */
static const patch_t conn_patches[] = {
    {"kind", 6, 1, {3}},
    {"no slots", 36, 4, {0, 0, 0, 0}},
    {"too many slots", 36, 4, {0x01, 0x10, 0, 0}},           /* 4097 */
    {"slot size not a multiple of 64", 40, 4, {0xe8, 0x03}}, /* 1000 */
    {"slot size 0", 40, 4, {0, 0, 0, 0}},
    {"slot size too big", 40, 4, {0x40, 0, 0x10, 0}}, /* 1 MiB + 64 */
    {"slots at 0", 48, 8, {0}},
    {"credit words unaligned", 56, 1, {4}},
    {"QP number wider than 24 bits", 64, 4, {0, 0, 0, 1}},
    {"QP 1", 96, 4, {1, 0, 0, 0}},
    {"PSN wider than 24 bits", 68, 4, {0, 0, 0, 1}},
    {"LID 0", 72, 2, {0, 0}},
    {"link layer 0", 75, 1, {0}},
    {"MTU 0", 96 + 10, 1, {0}},
    {"RoCE without GID", 96 + 11, 1, {HC_IB_LINK_ETH}}, /* rail 1's GID is zero */
    {"takes no reads", 96 + 12, 1, {0}},
    {"3 rails in the bytes of 2", 32, 1, {3}},
    {"0 rails", 32, 1, {0}},
    {"length field", 8, 1, {HC_IB_CONN_FIXED + 3 * HC_IB_CONN_RAIL}},
};

static void test_conn_bad(void **state)
{
    uint8_t      buf[HC_IB_CONN_MAX + 8] = {0};
    char         why[256]                = "";
    hc_ib_conn_t c                       = sample_conn(2), d;
    size_t       n                       = hc_ib_conn_encode(&c, buf, sizeof(buf));
    (void)state;
    for (size_t i = 0; i < sizeof(conn_patches) / sizeof(conn_patches[0]); i++) {
        const patch_t *p = &conn_patches[i];
        hc_ib_conn_encode(&c, buf, sizeof(buf));
        memcpy(buf + p->off, p->v, p->n);
        why[0] = '\0';
        expect_refused(hc_ib_conn_decode(buf, n, &d, why, sizeof(why)), why, p->what);
    }
    hc_ib_conn_encode(&c, buf, sizeof(buf));
    expect_refused(hc_ib_conn_decode(buf, n - 1, &d, why, sizeof(why)), why, "cut short");
    expect_refused(hc_ib_conn_decode(buf, n + 4, &d, why, sizeof(why)), why, "longer");
    expect_refused(hc_ib_conn_decode(buf, HC_IB_CONN_HDR, &d, why, sizeof(why)), why, "header");
    expect_refused(hc_ib_conn_decode(buf, 4, &d, why, sizeof(why)), why, "< header");
    expect_refused(hc_ib_conn_decode(NULL, 0, &d, why, sizeof(why)), why, "nothing");
    /* what the reader learns from the first HC_IB_CONN_HDR bytes */
    assert_int_equal(hc_ib_conn_peek(buf, why, sizeof(why)), n);
    buf[0] ^= 0xff; /* magic */
    assert_int_equal(hc_ib_conn_peek(buf, why, sizeof(why)), 0);
    expect_refused(hc_ib_conn_decode(buf, n, &d, why, sizeof(why)), why, "magic");
    hc_ib_conn_encode(&c, buf, sizeof(buf));
    buf[4] = 9; /* version */
    assert_int_equal(hc_ib_conn_peek(buf, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "version 9"));
    hc_ib_conn_encode(&c, buf, sizeof(buf));
    buf[8] = 0xff, buf[9] = 0xff; /* announces 65535 bytes */
    assert_int_equal(hc_ib_conn_peek(buf, why, sizeof(why)), 0);
    buf[8] = 8, buf[9] = 0; /* announces 8 */
    assert_int_equal(hc_ib_conn_peek(buf, why, sizeof(why)), 0);
}

static void retag(hc_ib_conn_t *d, const uint8_t *key, uint32_t to)
{
    assert_int_equal(hc_ib_conn_tag(key, d->kind, d->rank, to, d->tag), 0);
}

/* What a decoded HELLO or REPLY must also be: this communicator's, of the
 * kind awaited, from the rank awaited, with this side's slot layout. */
static void test_conn_check(void **state)
{
    static const uint8_t mine[16] = {0xc5, 0xc5, 0xc5, 0xc5, 0xc5, 0xc5, 0xc5, 0xc5,
                                     0xc5, 0xc5, 0xc5, 0xc5, 0xc5, 0xc5, 0xc5, 0xc5};
    uint8_t              buf[HC_IB_CONN_MAX];
    char                 why[256] = "";
    hc_ib_conn_t         c        = sample_conn(1), d; /* a HELLO from rank 3 */
    (void)state;
    /* The tag binds kind, sender and receiver: CHECK retags d for self, so
     * that the other rules are what is tested. */
#define RAW_CHECK(K, S, P) hc_ib_conn_check(&d, mine, K, S, P, 32, 16384, why, sizeof(why))
#define CHECK(K, S, P) (retag(&d, mine, (uint32_t)(S)), RAW_CHECK(K, S, P))
    /* through the wire first: the tag survives encoding */
    assert_int_equal(hc_ib_conn_tag(mine, HC_IB_CONN_HELLO, 3, 4, c.tag), 0);
    assert_int_equal(
        hc_ib_conn_decode(buf, hc_ib_conn_encode(&c, buf, sizeof(buf)), &d, why, sizeof(why)),
        HCOMM_SUCCESS);
    assert_int_equal(RAW_CHECK(HC_IB_CONN_HELLO, 4, -1), HCOMM_SUCCESS);
    /* meant for rank 4, shown to rank 9: refused, as a replay */
    assert_int_equal(RAW_CHECK(HC_IB_CONN_HELLO, 9, 3), HCOMM_ERR_AUTH);
    assert_int_equal(CHECK(HC_IB_CONN_HELLO, 9, 3), HCOMM_SUCCESS);
    /* a tag one bit off (another key's): refused as such */
    assert_int_equal(hc_ib_conn_tag(mine, HC_IB_CONN_HELLO, 3, 4, c.tag), 0);
    hc_ib_conn_encode(&c, buf, sizeof(buf));
    buf[16 + 15] ^= 1;
    assert_int_equal(
        hc_ib_conn_decode(buf, HC_IB_CONN_FIXED + HC_IB_CONN_RAIL, &d, why, sizeof(why)),
        HCOMM_SUCCESS); /* well formed ... */
    why[0] = '\0';
    assert_int_equal(RAW_CHECK(HC_IB_CONN_HELLO, 4, -1), HCOMM_ERR_AUTH); /* ... but not ours */
    assert_non_null(strstr(why, "proof"));
    why[0] = '\0';
    expect_refused(CHECK(HC_IB_CONN_HELLO, 3, -1), why, "HELLO from self");
    why[0] = '\0';
    expect_refused(CHECK(HC_IB_CONN_HELLO, 2, -1), why, "HELLO from a higher rank");
    why[0] = '\0';
    expect_refused(CHECK(HC_IB_CONN_HELLO, 9, 4), why, "HELLO from another rank");
    why[0] = '\0';
    expect_refused(CHECK(HC_IB_CONN_REPLY, 1, 3), why, "a HELLO where a REPLY is due");
    d.kind = HC_IB_CONN_REPLY;
    assert_int_equal(CHECK(HC_IB_CONN_REPLY, 1, 3), HCOMM_SUCCESS);
    why[0] = '\0';
    expect_refused(CHECK(HC_IB_CONN_REPLY, 1, 2), why, "REPLY from another rank");
    why[0] = '\0';
    expect_refused(CHECK(HC_IB_CONN_REPLY, 5, 3), why, "REPLY from a lower rank");
    why[0] = '\0';
    expect_refused(CHECK(HC_IB_CONN_HELLO, 9, -1), why, "a REPLY where a HELLO is due");
    d.nslots = 64;
    why[0]   = '\0';
    expect_refused(CHECK(HC_IB_CONN_REPLY, 1, 3), why, "another slot count");
    d.nslots = 32, d.slot_size = 8192;
    why[0] = '\0';
    expect_refused(CHECK(HC_IB_CONN_REPLY, 1, 3), why, "another slot size");
#undef CHECK
#undef RAW_CHECK
}

/* ---- rendezvous, immediate data, credit words ---- */

static void test_rts(void **state)
{
    uint8_t     buf[HC_IB_RTS_BYTES + 4];
    char        why[256] = "";
    hc_ib_rts_t r        = {.len    = 64ull << 20,
                            .addr   = 0x7f1234560000ull,
                            .nrails = 2,
                            .rkey   = {0x11, 0x22}},
                s;
    (void)state;
    assert_int_equal(hc_ib_rts_encode(&r, buf), HC_IB_RTS_BYTES);
    assert_int_equal(hc_ib_rts_decode(buf, HC_IB_RTS_BYTES, &s, why, sizeof(why)), HCOMM_SUCCESS);
    assert_memory_equal(&r, &s, sizeof(r));
    expect_refused(hc_ib_rts_decode(buf, HC_IB_RTS_BYTES - 1, &s, why, sizeof(why)), why, "short");
    r.nrails = 0;
    hc_ib_rts_encode(&r, buf);
    expect_refused(hc_ib_rts_decode(buf, HC_IB_RTS_BYTES, &s, why, sizeof(why)), why, "0 rails");
    r.nrails = HC_IB_MAX_RAILS + 1;
    hc_ib_rts_encode(&r, buf);
    expect_refused(hc_ib_rts_decode(buf, HC_IB_RTS_BYTES, &s, why, sizeof(why)), why, "9 rails");
    r.nrails = 1, r.len = 0;
    hc_ib_rts_encode(&r, buf);
    expect_refused(hc_ib_rts_decode(buf, HC_IB_RTS_BYTES, &s, why, sizeof(why)), why, "empty");
    r.len = 10, r.addr = 0;
    hc_ib_rts_encode(&r, buf);
    expect_refused(hc_ib_rts_decode(buf, HC_IB_RTS_BYTES, &s, why, sizeof(why)), why, "NULL");
    r.addr = UINT64_MAX - 4;
    hc_ib_rts_encode(&r, buf);
    expect_refused(hc_ib_rts_decode(buf, HC_IB_RTS_BYTES, &s, why, sizeof(why)), why, "wraps");
}

/* Random corruption of every encoded kind: each decoder either refuses with
 * a reason or hands back values inside the ranges it promises; never reads
 * past the length it is given (valgrind, ASan). */
static void test_wire_corrupt(void **state)
{
    uint8_t      buf[HC_IB_CONN_MAX], clean[HC_IB_CONN_MAX];
    char         why[256];
    uint64_t     seed = 42;
    hc_ib_conn_t c    = sample_conn(3), d;
    hc_ib_addr_t a    = sample_addr(3), b;
    hc_ib_rts_t  r    = {.len = 1 << 20, .addr = 0x1000, .nrails = 2, .rkey = {1, 2}}, q;
    (void)state;
    for (int kind = 0; kind < 3; kind++) {
        size_t n = kind == 0   ? hc_ib_conn_encode(&c, clean, sizeof(clean))
                   : kind == 1 ? hc_ib_addr_encode(&a, clean, sizeof(clean))
                               : hc_ib_rts_encode(&r, clean);
        for (int it = 0; it < 20000; it++) {
            memcpy(buf, clean, n);
            size_t len = n;
            for (int k = 0; k < 1 + it % 4; k++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                buf[(seed >> 33) % n] ^= (uint8_t)(1u << (seed >> 29 & 7));
            }
            if (it % 7 == 0)
                len = (seed >> 40) % (n + 1); /* and cut short */
            uint8_t *exact = malloc(len > 0 ? len : 1);
            assert_non_null(exact);
            memcpy(exact, buf, len); /* what lies past len is not its to read */
            why[0]            = '\0';
            hcomm_status_t st = kind == 0   ? hc_ib_conn_decode(exact, len, &d, why, sizeof(why))
                                : kind == 1 ? hc_ib_addr_decode(exact, len, &b, why, sizeof(why))
                                            : hc_ib_rts_decode(exact, len, &q, why, sizeof(why));
            free(exact);
            if (st != HCOMM_SUCCESS) {
                assert_int_equal(st, HCOMM_ERR_PROTOCOL);
                assert_true(why[0] != '\0');
            } else if (kind == 0) {
                assert_true(d.nrails >= 1 && d.nrails <= HC_IB_MAX_RAILS);
                assert_int_equal(len, HC_IB_CONN_FIXED + HC_IB_CONN_RAIL * d.nrails);
                for (uint32_t i = 0; i < d.nrails; i++)
                    assert_true(d.rail[i].qpn <= 0xffffff && d.rail[i].psn <= 0xffffff);
            } else if (kind == 1) {
                assert_true(b.nrails >= 1 && b.nrails <= HC_IB_MAX_RAILS);
                assert_int_equal(len, HC_IB_ADDR_HDR + HC_IB_ADDR_RAIL * (size_t)b.nrails);
            } else {
                assert_true(q.nrails >= 1 && q.nrails <= HC_IB_MAX_RAILS && q.len > 0);
            }
        }
    }
}

static void test_imm_ctrl(void **state)
{
    uint64_t w[2], freed, done;
    (void)state;
    uint32_t imm = hc_ib_imm_make(HC_IB_IMM_RTS, HC_IB_RTS_BYTES);
    assert_int_equal(hc_ib_imm_kind(imm), HC_IB_IMM_RTS);
    assert_int_equal(hc_ib_imm_len(imm), HC_IB_RTS_BYTES);
    imm = hc_ib_imm_make(HC_IB_IMM_EAGER, HC_IB_IMM_LEN_MAX);
    assert_int_equal(hc_ib_imm_kind(imm), HC_IB_IMM_EAGER);
    assert_int_equal(hc_ib_imm_len(imm), HC_IB_IMM_LEN_MAX);
    assert_int_equal(hc_ib_imm_len(hc_ib_imm_make(HC_IB_IMM_EAGER, 0)), 0);
    hc_ib_ctrl_encode((uint8_t *)w, 123456789012ull, 42);
    hc_ib_ctrl_decode((const uint8_t *)w, &freed, &done);
    assert_true(freed == 123456789012ull && done == 42);
}

/* ---- credits and slots ---- */

static void test_txflow(void **state)
{
    hc_ib_txflow_t f;
    (void)state;
    hc_ib_txflow_init(&f, 4);
    for (uint32_t k = 0; k < 4; k++) {
        assert_true(hc_ib_txflow_can_post(&f));
        assert_int_equal(hc_ib_txflow_post(&f), k);
    }
    assert_false(hc_ib_txflow_can_post(&f)); /* no credit, no staging slot */
    for (int k = 0; k < 4; k++)
        assert_int_equal(hc_ib_txflow_complete(&f), 0);
    assert_int_equal(hc_ib_txflow_complete(&f), -1); /* none outstanding */
    assert_false(hc_ib_txflow_can_post(&f));         /* staging free, no credit */
    assert_int_equal(hc_ib_txflow_credit(&f, 1), 0);
    assert_true(hc_ib_txflow_can_post(&f));
    assert_int_equal(hc_ib_txflow_post(&f), 0); /* wraps */
    assert_false(hc_ib_txflow_can_post(&f));
    assert_int_equal(hc_ib_txflow_credit(&f, 5), 0); /* the peer freed all it got */
    for (uint32_t k = 1; k < 4; k++)
        assert_int_equal(hc_ib_txflow_post(&f), k);
    assert_false(hc_ib_txflow_can_post(&f)); /* 8 written, 4 of them completed */
    assert_int_equal(hc_ib_txflow_credit(&f, 8), 0);
    assert_false(hc_ib_txflow_can_post(&f)); /* credits back, staging still in flight */
    assert_int_equal(hc_ib_txflow_complete(&f), 0);
    assert_true(hc_ib_txflow_can_post(&f));
    assert_int_equal(hc_ib_txflow_credit(&f, 7), -1); /* goes back */
    assert_int_equal(hc_ib_txflow_credit(&f, 9), -1); /* more than written */
    assert_int_equal(hc_ib_txflow_credit(&f, 8), 0);  /* the same again */
    assert_int_equal(f.freed, 8);
}

static void test_rxring(void **state)
{
    hc_ib_rxring_t r;
    (void)state;
    hc_ib_rxring_init(&r, 3);
    assert_int_equal(hc_ib_rxring_head(&r), -1);
    assert_int_equal(hc_ib_rxring_consume(&r), -1);
    for (int k = 0; k < 3; k++)
        assert_int_equal(hc_ib_rxring_arrive(&r), k);
    assert_int_equal(hc_ib_rxring_arrive(&r), -1); /* a write without a credit */
    assert_int_equal(hc_ib_rxring_pending(&r), 3);
    assert_int_equal(hc_ib_rxring_head(&r), 0);
    assert_int_equal(hc_ib_rxring_consume(&r), 0);
    assert_int_equal(hc_ib_rxring_head(&r), 1);
    assert_int_equal(hc_ib_rxring_arrive(&r), 0); /* wraps into the freed slot */
    for (int k = 0; k < 3; k++)
        assert_int_equal(hc_ib_rxring_consume(&r), 0);
    assert_int_equal(hc_ib_rxring_head(&r), -1);
    assert_int_equal(r.consumed, 4);
}

/* A sender and a receiver over a ring of 5 slots, for 1000 messages, in
 * uneven steps: the slot each message is written to is the one the
 * receiver finds it in, no write ever lands without a credit, and every
 * credit comes back. */
static void test_flow_pair(void **state)
{
    hc_ib_txflow_t tx;
    hc_ib_rxring_t rx;
    uint64_t       seq[5], sent = 0, got = 0, inflight = 0, seed = 12345;
    (void)state;
    hc_ib_txflow_init(&tx, 5);
    hc_ib_rxring_init(&rx, 5);
    while (got < 1000) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        switch (seed >> 62) {
        case 0: /* the sender posts what it may */
            while (sent < 1000 && hc_ib_txflow_can_post(&tx)) {
                uint32_t slot = hc_ib_txflow_post(&tx);
                assert_true(slot < 5);
                seq[slot] = sent++;
                inflight++;
            }
            break;
        case 1: /* writes land (the receiver polls them) and complete locally */
            while (inflight > 0) {
                int slot = hc_ib_rxring_arrive(&rx);
                assert_true(slot >= 0); /* never without a credit */
                assert_int_equal(hc_ib_txflow_complete(&tx), 0);
                inflight--;
            }
            break;
        case 2: /* the receiver takes one in order */
            if (hc_ib_rxring_head(&rx) >= 0) {
                assert_int_equal(seq[hc_ib_rxring_head(&rx)], got);
                assert_int_equal(hc_ib_rxring_consume(&rx), 0);
                got++;
            }
            break;
        default: /* ... and reports its count */
            assert_int_equal(hc_ib_txflow_credit(&tx, rx.consumed), 0);
            break;
        }
        assert_true(tx.posted - tx.freed <= 5);
    }
    assert_int_equal(hc_ib_txflow_credit(&tx, rx.consumed), 0);
    assert_int_equal(tx.freed, 1000);
    assert_int_equal(hc_ib_rxring_pending(&rx), 0);
}

static void test_rndv_chunks(void **state)
{
    uint64_t off;
    (void)state;
    assert_false(hc_ib_rndv_done(0, 0, 1)); /* read, but its RTS write not completed */
    assert_false(hc_ib_rndv_done(0, 1, 0));
    assert_true(hc_ib_rndv_done(0, 1, 1));
    assert_false(hc_ib_rndv_done(1, 5, 1));
    assert_int_equal(hc_ib_rndv_fin_check(2, 2, 3), 0);
    assert_int_equal(hc_ib_rndv_fin_check(2, 3, 3), 0);
    assert_int_equal(hc_ib_rndv_fin_check(2, 1, 3), -1);
    assert_int_equal(hc_ib_rndv_fin_check(2, 4, 3), -1);

    const uint64_t c = 512 << 10;
    assert_int_equal(hc_ib_chunks(1, c), 1);
    assert_int_equal(hc_ib_chunks(c, c), 1);
    assert_int_equal(hc_ib_chunks(c + 1, c), 2);
    assert_int_equal(hc_ib_chunks(64ull << 20, c), 128);
    assert_int_equal(hc_ib_chunk_span(c + 1, c, 0, &off), c);
    assert_int_equal(off, 0);
    assert_int_equal(hc_ib_chunk_span(c + 1, c, 1, &off), 1);
    assert_int_equal(off, c);
    assert_int_equal(hc_ib_chunk_span(c + 1, c, 2, &off), 0);
    /* every byte exactly once, whatever the rails */
    uint64_t len = 3 * c + 12345, sum = 0;
    for (uint64_t j = 0; j < hc_ib_chunks(len, c); j++) {
        uint64_t n = hc_ib_chunk_span(len, c, j, &off);
        assert_int_equal(off, sum);
        sum += n;
    }
    assert_int_equal(sum, len);
}

static void test_wr_id(void **state)
{
    (void)state;
    uint64_t id = hc_ib_wr_id(HC_IB_EP_ID_MAX, HC_IB_WR_READ, 7, 0xffffffffu);
    assert_int_equal(hc_ib_wr_ep(id), HC_IB_EP_ID_MAX);
    assert_int_equal(hc_ib_wr_kind(id), HC_IB_WR_READ);
    assert_int_equal(hc_ib_wr_rail(id), 7);
    assert_int_equal(hc_ib_wr_chunk(id), 0xffffffffu);
    id = hc_ib_wr_id(5, HC_IB_WR_RECV, 0, 0);
    assert_int_equal(hc_ib_wr_ep(id), 5);
    assert_int_equal(hc_ib_wr_kind(id), HC_IB_WR_RECV);
    assert_int_equal(hc_ib_wr_rail(id), 0);
    assert_int_equal(hc_ib_wr_chunk(id), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hca_empty),
        cmocka_unit_test(test_hca_prefix_exact),
        cmocka_unit_test(test_hca_exclude),
        cmocka_unit_test(test_hca_ports),
        cmocka_unit_test(test_hca_nccl_forms),
        cmocka_unit_test(test_hca_bad),
        cmocka_unit_test(test_speed_table),
        cmocka_unit_test(test_mtu_gid),
        cmocka_unit_test(test_addr_roundtrip),
        cmocka_unit_test(test_addr_bad),
        cmocka_unit_test(test_addr_rails),
        cmocka_unit_test(test_addr_sockaddr),
        cmocka_unit_test(test_conn_roundtrip),
        cmocka_unit_test(test_conn_bad),
        cmocka_unit_test(test_conn_check),
        cmocka_unit_test(test_rts),
        cmocka_unit_test(test_wire_corrupt),
        cmocka_unit_test(test_imm_ctrl),
        cmocka_unit_test(test_txflow),
        cmocka_unit_test(test_rxring),
        cmocka_unit_test(test_flow_pair),
        cmocka_unit_test(test_rndv_chunks),
        cmocka_unit_test(test_wr_id),
        cmocka_unit_test(test_rcache_hit_miss),
        cmocka_unit_test(test_rcache_overlap),
        cmocka_unit_test(test_rcache_lru),
        cmocka_unit_test(test_rcache_in_use),
        cmocka_unit_test(test_rcache_bytes),
        cmocka_unit_test(test_rcache_invalidate),
        cmocka_unit_test(test_rcache_reg_fails),
        cmocka_unit_test(test_rcache_keep_none),
        cmocka_unit_test(test_rcache_fini_in_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
