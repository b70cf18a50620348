/* params_agree.c - the settings every rank of a communicator must share, and
 * a digest of each for init to compare (params.h). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/hash.h"
#include "base/log.h"
#include "base/params.h"

typedef enum { AG_INT, AG_SIZE, AG_STR, AG_FILE } agreed_kind_t;

typedef struct {
    const char   *name; /* without HCOMM_ */
    agreed_kind_t kind;
    size_t        offset;
} agreed_t;

#define AG(NAME, KIND, FIELD) {#NAME, AG_##KIND, offsetof(hc_params_t, FIELD)}

/* Each shapes the schedules, the choice of transport per pair, or what the
 * peers of a pair expect on the wire; ranks that differ build plans that
 * never match and hang. (HCOMM_SHM_RING_BYTES may differ: a pair uses its
 * creator's.) */
static const agreed_t agreed[] = {
    AG(TRANSPORT, STR, transport),
    AG(NET, STR, net),
    AG(ALGO, STR, algo),
    AG(CHUNK_BYTES, SIZE, chunk_bytes),
    AG(ALLREDUCE_RD_MAX, SIZE, allreduce_rd_max),
    AG(ALLREDUCE_RAB_MAX, SIZE, allreduce_rab_max),
    AG(TCP_NSOCKS, INT, tcp_nsocks),
    AG(TCP_STRIPE_MIN, SIZE, tcp_stripe_min),
    AG(TOPO_FILE, FILE, topo_file),
    AG(TUNING_FILE, FILE, tuning_file),
    AG(CALIBRATE, INT, calibrate),
    AG(RINGS, INT, rings),
    AG(RING_ORDER, STR, ring_order),
    AG(BUCKET_BYTES, SIZE, bucket_bytes),
    AG(WARMUP, INT, warmup),
};
#define NAGREED ((int)(sizeof(agreed) / sizeof(agreed[0])))
_Static_assert(sizeof(agreed) / sizeof(agreed[0]) <= HC_PARAMS_AGREED_MAX,
               "raise HC_PARAMS_AGREED_MAX");

/* A file's bytes, so that the same file under another path agrees and
 * another file under the same path does not; the path when unreadable. -1
 * (logged) past HC_PARAMS_FILE_MAX bytes: read without a cap, a path such as
 * /dev/zero held init for ever. */
static int file_digest(const char *name, const char *path, uint64_t *out)
{
    uint64_t h = HC_HASH_FNV_SEED;
    char     buf[4096];
    size_t   n, total = 0;
    FILE    *f = path[0] != '\0' ? fopen(path, "rb") : NULL;

    if (f == NULL) {
        *out = hc_hash_str(hc_hash_str(h, "path:"), path);
        return 0;
    }
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
        total += n;
        if (total > HC_PARAMS_FILE_MAX) {
            fclose(f);
            hc_error(PARAM, "HCOMM_%s=%s: the file is larger than %u MiB", name, path,
                     HC_PARAMS_FILE_MAX >> 20);
            return -1;
        }
        h = hc_hash_bytes(h, buf, n);
    }
    fclose(f);
    *out = h;
    return 0;
}

int hc_params_agreed_digests(const hc_params_t *p, uint64_t *out, int max)
{
    char val[HC_PARAMS_VALUE_MAX];

    for (int i = 0; i < NAGREED && i < max; i++) {
        if (agreed[i].kind == AG_FILE) {
            const char *path = *(const char *const *)((const char *)p + agreed[i].offset);
            if (file_digest(agreed[i].name, path, &out[i]) != 0)
                return -1;
            continue;
        }
        if (agreed[i].kind == AG_STR) { /* whole: the shown value is cut at its buffer */
            const char *v = *(const char *const *)((const char *)p + agreed[i].offset);
            out[i]        = hc_hash_str(HC_HASH_FNV_SEED ^ 0x5354, v != NULL ? v : "");
            continue;
        }
        hc_params_agreed_value(p, i, val, sizeof(val));
        out[i] = hc_hash_str(HC_HASH_FNV_SEED, val);
    }
    return NAGREED < max ? NAGREED : max;
}

const char *hc_params_agreed_name(int i)
{
    return i >= 0 && i < NAGREED ? agreed[i].name : "?";
}

int hc_params_agreed_index(const char *name)
{
    for (int i = 0; i < NAGREED; i++)
        if (strcmp(agreed[i].name, name) == 0)
            return i;
    return -1;
}

void hc_params_agreed_value(const hc_params_t *p, int i, char *buf, size_t len)
{
    const void *field = (const char *)p + (i >= 0 && i < NAGREED ? agreed[i].offset : 0);

    if (i < 0 || i >= NAGREED) {
        snprintf(buf, len, "?");
        return;
    }
    switch (agreed[i].kind) {
    case AG_INT:
        snprintf(buf, len, "%d", *(const int *)field);
        break;
    case AG_SIZE: /* parsed, so that 256K and 262144 agree */
        snprintf(buf, len, "%zu", *(const size_t *)field);
        break;
    case AG_STR:
    case AG_FILE:
        snprintf(buf, len, "\"%s\"", *(const char *const *)field);
        break;
    }
}
