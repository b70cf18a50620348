/* ops_spill.c - a trace's records on disk until they are formatted (see
 * ops_spill.h). A record packs into 32 bytes when its times come from a
 * precise clock and its spans, count and bytes sent fit 32 bits, its peer 16
 * and its status 8; otherwise a packed marker stands in its place and the
 * whole record goes to the second file. The files are unlinked at once: a
 * killed process leaves nothing behind. */
#include "core/ops_spill.h"

#include "hcomm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define SPILL_FULL 0xfeu /* the packed coll of a record kept whole */

typedef struct {
    uint64_t start;     /* t_start, in the record's clock */
    uint32_t wait, dur; /* t_start - t_issue, t_end - t_start */
    uint32_t count, sent;
    int16_t  peer;
    uint16_t nsteps;
    uint8_t  coll;  /* or SPILL_FULL */
    uint8_t  dtype; /* and the clock in the high four bits */
    uint8_t  algo;
    int8_t   status;
} spill_small_t;

_Static_assert(sizeof(spill_small_t) == 32, "a packed record is 32 bytes");

int hc_spill_init(hc_spill_t *s, uint32_t cap)
{
    *s      = (hc_spill_t){.fd_small = -1, .fd_full = -1, .cap = cap};
    s->pack = malloc((size_t)cap * sizeof(spill_small_t));
    s->full = malloc((size_t)cap * sizeof(hc_op_rec_t));
    if (s->pack == NULL || s->full == NULL) {
        hc_spill_fini(s);
        return -1;
    }
    return 0;
}

void hc_spill_fini(hc_spill_t *s)
{
    if (s->fd_small >= 0)
        close(s->fd_small);
    if (s->fd_full >= 0)
        close(s->fd_full);
    free(s->pack);
    free(s->full);
    s->pack = s->full = NULL;
    s->fd_small = s->fd_full = -1;
}

static int spill_open(const char *dir)
{
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0)
        return fd;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/.hcomm-trace-XXXXXX", dir);
    fd = mkstemp(path);
    if (fd >= 0)
        unlink(path);
    return fd;
}

static int spill_write(int fd, const void *p, size_t len, off_t off)
{
    const char *b = p;
    while (len > 0) {
        ssize_t w = pwrite(fd, b, len, off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w, len -= (size_t)w, off += w;
    }
    return 0;
}

/* Packs r into p; 0, or -1 when it does not fit. */
static int spill_pack(const hc_op_rec_t *r, spill_small_t *p)
{
    uint64_t wait = r->t_start - r->t_issue, dur = r->t_end - r->t_start;
    if (r->clock == HC_OP_CLOCK_COARSE || r->t_issue == 0 || r->t_start < r->t_issue ||
        r->t_end < r->t_start || wait > UINT32_MAX || dur > UINT32_MAX || r->count > UINT32_MAX ||
        r->sent > UINT32_MAX || r->peer < INT16_MIN || r->peer > INT16_MAX ||
        r->nsteps > UINT16_MAX || r->status < INT8_MIN || r->status > INT8_MAX ||
        r->coll >= SPILL_FULL || r->dtype > 15 || r->clock > 15)
        return -1;
    *p = (spill_small_t){.start  = r->t_start,
                         .wait   = (uint32_t)wait,
                         .dur    = (uint32_t)dur,
                         .count  = (uint32_t)r->count,
                         .sent   = (uint32_t)r->sent,
                         .peer   = (int16_t)r->peer,
                         .nsteps = (uint16_t)r->nsteps,
                         .coll   = r->coll,
                         .dtype  = (uint8_t)(r->dtype | r->clock << 4),
                         .algo   = r->algo,
                         .status = (int8_t)r->status};
    return 0;
}

static void spill_unpack(const spill_small_t *p, uint64_t seq, hc_op_rec_t *r)
{
    *r = (hc_op_rec_t){.seq     = seq,
                       .t_issue = p->start - p->wait,
                       .t_start = p->start,
                       .t_end   = p->start + p->dur,
                       .count   = p->count,
                       .bytes   = p->count * hcomm_dtype_size((hcomm_dtype_t)(p->dtype & 15u)),
                       .sent    = p->sent,
                       .peer    = p->peer,
                       .status  = p->status,
                       .nsteps  = p->nsteps,
                       .coll    = p->coll,
                       .dtype   = p->dtype & 15u,
                       .algo    = p->algo,
                       .state   = p->status == 0 ? HC_OP_DONE : HC_OP_FAILED,
                       .clock   = p->dtype >> 4};
}

int hc_spill_put(hc_spill_t *s, const char *dir, const hc_op_rec_t *ring, uint32_t mask,
                 uint64_t lo, uint64_t hi)
{
    spill_small_t *pack = s->pack;
    size_t         n = 0, nfull = 0;
    if (hi < lo)
        return 0;
    if (hi - lo + 1 > s->cap) {
        errno = EINVAL;
        return -1;
    }
    if (s->fd_small < 0 && (s->fd_small = spill_open(dir)) < 0)
        return -1;
    for (uint64_t q = lo; q <= hi; q++, n++) {
        const hc_op_rec_t *r = &ring[q & mask];
        if (spill_pack(r, &pack[n]) != 0) {
            pack[n]          = (spill_small_t){.coll = SPILL_FULL};
            s->full[nfull++] = *r;
        }
    }
    if (nfull > 0 && s->fd_full < 0 && (s->fd_full = spill_open(dir)) < 0)
        return -1;
    if (spill_write(s->fd_small, pack, n * sizeof(*pack), (off_t)(s->nsmall * sizeof(*pack))) !=
            0 ||
        (nfull > 0 && spill_write(s->fd_full, s->full, nfull * sizeof(*s->full),
                                  (off_t)(s->nfull * sizeof(*s->full))) != 0))
        return -1;
    s->nsmall += n;
    s->nfull += nfull;
    return 0;
}

long hc_spill_get(hc_spill_t *s, hc_op_rec_t *out, size_t max, uint64_t *seq)
{
    spill_small_t *pack = s->pack;
    size_t         k    = s->nsmall - s->rd_small < max ? (size_t)(s->nsmall - s->rd_small) : max;
    k                   = k < s->cap ? k : s->cap;
    if (k == 0)
        return 0;
    if (pread(s->fd_small, pack, k * sizeof(*pack), (off_t)(s->rd_small * sizeof(*pack))) !=
        (ssize_t)(k * sizeof(*pack)))
        return -1;
    for (size_t i = 0; i < k; i++, (*seq)++) {
        if (pack[i].coll != SPILL_FULL) {
            spill_unpack(&pack[i], *seq, &out[i]);
            continue;
        }
        if (s->rd_full >= s->nfull ||
            pread(s->fd_full, &out[i], sizeof(out[i]), (off_t)(s->rd_full * sizeof(out[i]))) !=
                (ssize_t)sizeof(out[i]))
            return -1;
        s->rd_full++;
    }
    s->rd_small += k;
    return (long)k;
}

void hc_spill_reset(hc_spill_t *s)
{
    int rc = 0;
    if (s->fd_small >= 0)
        rc |= ftruncate(s->fd_small, 0);
    if (s->fd_full >= 0)
        rc |= ftruncate(s->fd_full, 0);
    (void)rc; /* a failed truncation leaves bytes only past what later puts write */
    s->nsmall = s->nfull = s->rd_small = s->rd_full = 0;
}
