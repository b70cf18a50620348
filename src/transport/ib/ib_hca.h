/* ib_hca.h - HCOMM_IB_HCA, the devices and ports the ib transport may use, as
 * NCCL_IB_HCA spells them: a comma list of device name prefixes ("mlx5"),
 * "=" before the list for exact names ("=mlx5_0,mlx5_1"), "^" before it (and
 * before "=") to exclude them instead ("^mlx5_2", "^=mlx5_2"), and ":PORT"
 * after a name to pick one port of it ("mlx5_0:1"). Empty: every device.
 * Device-free: no verbs here (tests/unit/test_ib.c). */
#ifndef HC_TL_IB_HCA_H
#define HC_TL_IB_HCA_H

#include <stddef.h>

#define HC_IB_HCA_MAX 32  /* names in one list */
#define HC_IB_NAME_MAX 64 /* IBV_SYSFS_NAME_MAX */

typedef struct hc_ib_hca_entry {
    char name[HC_IB_NAME_MAX];
    int  port; /* 1..255, or -1: any port */
} hc_ib_hca_entry_t;

typedef struct hc_ib_hca_filter {
    int               exclude; /* "^": the list names what is NOT used */
    int               exact;   /* "=": whole names, not prefixes */
    int               n;       /* 0: no list, every device */
    hc_ib_hca_entry_t e[HC_IB_HCA_MAX];
} hc_ib_hca_filter_t;

/* Parses spec (NULL or "" = every device). Empty items (",,") are skipped.
 * 0, or -1 with why (len bytes) saying what is wrong. */
int hc_ib_hca_parse(const char *spec, hc_ib_hca_filter_t *f, char *why, size_t len);
/* Whether port of device dev passes the filter. */
int hc_ib_hca_match(const hc_ib_hca_filter_t *f, const char *dev, int port);

#endif
