/* ib_speed.h - what a port's attributes mean, without a device: the link's
 * bandwidth from its speed and width codes, MTU codes, GID kinds.
 * Device-free (tests/unit/test_ib.c). */
#ifndef HC_TL_IB_SPEED_H
#define HC_TL_IB_SPEED_H

#include <stdint.h>

/* Data bandwidth in GB/s (1e9 bytes/s, after line encoding) of a port whose
 * ibv_port_attr says active_speed and active_width; 0 for codes this table
 * does not know. speed is unsigned, not uint8_t: XDR (256) only exists in
 * rdma-core's active_speed_ex (v50 on), which Debian 12's rdma-core 44 lacks. */
double hc_ib_port_gbps(unsigned speed, unsigned width);
/* "EDR", "HDR", ..., or "?" */
const char *hc_ib_speed_name(unsigned speed);
/* Lanes of an active_width code, 0 when unknown. */
int hc_ib_width_lanes(unsigned width);
/* Bytes of an ibv_mtu code (1: 256 ... 5: 4096), 0 when invalid. */
int hc_ib_mtu_bytes(unsigned mtu);
/* Whether a GID is an IPv4-mapped IPv6 address (::ffff:a.b.c.d), what RoCE
 * v2 uses for an interface's IPv4 address. */
int hc_ib_gid_v4mapped(const uint8_t gid[16]);

#endif
