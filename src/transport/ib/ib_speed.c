/* ib_speed.c - port attribute codes to numbers (see ib_speed.h). */
#include "transport/ib/ib_speed.h"

#include <stddef.h>
#include <string.h>

/* Per lane, Gbit/s of data: the signalling rate less its encoding (8b/10b up
 * to QDR, 64b/66b from FDR10; HDR and up are quoted as data rates). */
static const struct {
    unsigned    code;
    double      gbit;
    const char *name;
} speeds[] = {
    {1, 2.0, "SDR"},    /* 2.5 Gbaud, 8b/10b */
    {2, 4.0, "DDR"},    /* 5 */
    {4, 8.0, "QDR"},    /* 10 */
    {8, 10.0, "FDR10"}, /* 10.3125, 64b/66b */
    {16, 13.64, "FDR"}, /* 14.0625, 64b/66b */
    {32, 25.0, "EDR"},  /* 25.78125, 64b/66b */
    {64, 50.0, "HDR"},  {128, 100.0, "NDR"}, {256, 200.0, "XDR"},
};

int hc_ib_width_lanes(unsigned width)
{
    switch (width) {
    case 1:
        return 1;
    case 2:
        return 4;
    case 4:
        return 8;
    case 8:
        return 12;
    case 16:
        return 2;
    default:
        return 0;
    }
}

double hc_ib_port_gbps(unsigned speed, unsigned width)
{
    for (size_t i = 0; i < sizeof(speeds) / sizeof(speeds[0]); i++)
        if (speeds[i].code == speed)
            return speeds[i].gbit * hc_ib_width_lanes(width) / 8.0;
    return 0.0;
}

const char *hc_ib_speed_name(unsigned speed)
{
    for (size_t i = 0; i < sizeof(speeds) / sizeof(speeds[0]); i++)
        if (speeds[i].code == speed)
            return speeds[i].name;
    return "?";
}

int hc_ib_mtu_bytes(unsigned mtu)
{
    return mtu >= 1 && mtu <= 5 ? 128 << mtu : 0;
}

int hc_ib_gid_v4mapped(const uint8_t gid[16])
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(gid, prefix, sizeof(prefix)) == 0;
}
