/* ops_spill.c - a trace's records until they are formatted (see
 * ops_spill.h). A record is coded against the one coded before it: a header
 * byte, its start's difference from that one's, its wait and its length, all
 * as varints (7 bits a byte), then what it does (collective, datatype,
 * algorithm, count, bytes, ...) only where that differs; or, for a blocking
 * call like the one before, in 5 bytes. A record the code does not carry
 * (one stamped by the coarse clock, one that never started) is a header byte
 * alone here and goes whole to the second store. Both are gathered in memory
 * and go to unlinked files in blocks, the coded ones once their memory
 * (SPILL_MEM_BYTES by default) fills: a killed process leaves nothing behind. */
#include "core/ops_spill.h"

#include "hcomm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SPILL_FULL 0x01u /* header: the record is in the second file */
#define SPILL_DESC 0x02u /* header: what it does follows (else as the one before) */
#define SPILL_GAP 0x04u  /* header alone: no record has this number */
/* header: a blocking call like the one before, whose start is less than 2^16
 * ticks (or ns) after that one's and which lasted less: two 16-bit numbers
 * follow, little-endian, and nothing else */
#define SPILL_SHORT 0x08u
/* What a record does, from count to clock, lies in one run of bytes; the
 * short form's test compares it whole with the one before's. */
#define SPILL_WHAT_AT offsetof(hc_op_rec_t, count)
#define SPILL_WHAT_LEN (offsetof(hc_op_rec_t, clock) + 1 - SPILL_WHAT_AT)
_Static_assert(SPILL_WHAT_LEN == sizeof(hc_spill_what_t), "what a record does: no padding");
/* header 1, three times 10, coll, dtype and clock, algo 3, status and peer
 * 5 each, nsteps 5, count, bytes and sent 10 each */
#define SPILL_CODE_MAX 79u
/* Coded bytes gathered in memory before they go to the file by default (over
 * 6 million like blocking calls): reserved, and given pages as it fills, huge
 * ones where the kernel allows. Writing them as they came, to an ext4 file,
 * cost 2-4% of an 8-byte allreduce on 2 ranks (a rank that writes holds up
 * its peer; perf/RESULTS.md); memory costs a page fault now and then. */
#define SPILL_MEM_BYTES (32u << 20)
#define SPILL_FULL_BUF 256u /* whole records gathered per write */

int hc_spill_init(hc_spill_t *s, uint32_t cap, size_t mem_bytes)
{
    *s = (hc_spill_t){
        .fd_small = -1, .fd_full = -1, .cap = cap, .mem = mem_bytes ? mem_bytes : SPILL_MEM_BYTES};
    if ((size_t)cap * SPILL_CODE_MAX > s->mem)
        return -1;
    void *mem = mmap(NULL, s->mem, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED)
        return -1;
    (void)madvise(mem, s->mem, MADV_HUGEPAGE); /* fewer faults where allowed */
    s->code = mem;
    s->full = malloc(SPILL_FULL_BUF * sizeof(hc_op_rec_t));
    s->rbuf = malloc((size_t)cap * SPILL_CODE_MAX);
    if (s->full == NULL || s->rbuf == NULL) {
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
    if (s->code != NULL)
        munmap(s->code, s->mem);
    free(s->full);
    free(s->rbuf);
    s->code     = NULL;
    s->full     = NULL;
    s->rbuf     = NULL;
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

static size_t spill_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    for (; v >= 0x80u; v >>= 7)
        p[n++] = (uint8_t)(v | 0x80u);
    p[n++] = (uint8_t)v;
    return n;
}

/* Signed values as varints: 0, -1, 1, -2, ... as 0, 1, 2, 3, ... */
static uint64_t spill_zig(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t spill_unzig(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1u);
}

/* Whether the code carries r whole (but for op and cseq). */
static int spill_codable(const hc_op_rec_t *r)
{
    return r->clock != HC_OP_CLOCK_COARSE && r->clock <= 15 && r->t_issue != 0 &&
           r->t_start >= r->t_issue && r->t_end >= r->t_start && r->dtype <= 15 &&
           r->state == (r->status == HCOMM_SUCCESS ? HC_OP_DONE : HC_OP_FAILED);
}

static int spill_same(const hc_op_rec_t *r, const hc_spill_prev_t *p)
{
    return r->count == p->count && r->bytes == p->bytes && r->sent == p->sent &&
           r->peer == p->peer && r->status == p->status && r->nsteps == p->nsteps &&
           r->coll == p->coll && r->dtype == p->dtype && r->algo == p->algo && r->clock == p->clock;
}

/* Codes r against *p into out, and makes it the one before; its length. */
static size_t spill_code(const hc_op_rec_t *r, hc_spill_prev_t *p, uint8_t *out)
{
    size_t n = 1;
    /* no coded record has the coarse clock: there, p is no record yet */
    int desc = !spill_same(r, p) || p->clock == HC_OP_CLOCK_COARSE;
    out[0]   = desc ? SPILL_DESC : 0;
    n += spill_varint(out + n, spill_zig((int64_t)(r->t_start - p->start)));
    n += spill_varint(out + n, r->t_start - r->t_issue);
    n += spill_varint(out + n, r->t_end - r->t_start);
    p->start = r->t_start;
    if (!desc)
        return n;
    out[n++] = r->coll;
    out[n++] = (uint8_t)(r->dtype | r->clock << 4);
    out[n++] = r->algo;
    n += spill_varint(out + n, spill_zig(r->status));
    n += spill_varint(out + n, spill_zig(r->peer));
    n += spill_varint(out + n, r->nsteps);
    n += spill_varint(out + n, r->count);
    n += spill_varint(out + n, r->bytes);
    n += spill_varint(out + n, r->sent);
    *p = (hc_spill_prev_t){.start  = r->t_start,
                           .count  = r->count,
                           .bytes  = r->bytes,
                           .sent   = r->sent,
                           .peer   = r->peer,
                           .status = r->status,
                           .nsteps = r->nsteps,
                           .coll   = r->coll,
                           .dtype  = r->dtype,
                           .algo   = r->algo,
                           .clock  = r->clock};
    return n;
}

/* Writes what is gathered; 0, or -1 (errno set). */
static int spill_drain(hc_spill_t *s)
{
    if (s->fill > 0) {
        if (spill_write(s->fd_small, s->code, s->fill, (off_t)s->wr_bytes) != 0)
            return -1;
        s->wr_bytes += s->fill;
        s->fill = 0;
    }
    if (s->nfull_buf > 0) {
        if (spill_write(s->fd_full, s->full, s->nfull_buf * sizeof(*s->full),
                        (off_t)((s->nfull - s->nfull_buf) * sizeof(*s->full))) != 0)
            return -1;
        s->nfull_buf = 0;
    }
    return 0;
}

/* Makes the files at the first put; 0, or -1 (errno set). */
static int spill_ready(hc_spill_t *s, const char *dir, int full)
{
    if (s->fd_small < 0 && (s->fd_small = spill_open(dir)) < 0)
        return -1;
    return full && s->fd_full < 0 && (s->fd_full = spill_open(dir)) < 0 ? -1 : 0;
}

static void spill_put16(uint8_t *p, uint64_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

int hc_spill_put(hc_spill_t *s, const char *dir, const hc_op_rec_t *r)
{
    uint64_t       dstart = r->t_start - s->put_prev.start, dur = r->t_end - r->t_start;
    const uint8_t *what = (const uint8_t *)r + SPILL_WHAT_AT;
    if (s->what_ok && r->t_issue == r->t_start && r->t_start != 0 && dstart < 65536 &&
        dur < 65536 && memcmp(what, s->what.bytes, SPILL_WHAT_LEN) == 0) {
        uint8_t *p = s->code + s->fill; /* the short form: most of a run of like calls */
        p[0]       = SPILL_SHORT;
        spill_put16(p + 1, dstart);
        spill_put16(p + 3, dur);
        s->fill += 5;
        s->nsmall++;
        s->put_prev.start = r->t_start;
        return s->fill > s->mem - SPILL_CODE_MAX ? spill_drain(s) : 0;
    }
    int codable = spill_codable(r);
    if (spill_ready(s, dir, !codable) != 0)
        return -1;
    if (codable) {
        s->fill += spill_code(r, &s->put_prev, s->code + s->fill);
        memcpy(s->what.bytes, what, SPILL_WHAT_LEN);
        s->what_ok = 1;
    } else {
        s->code[s->fill++]      = SPILL_FULL;
        s->full[s->nfull_buf++] = *r;
        s->nfull++;
    }
    s->nsmall++;
    return s->fill > s->mem - SPILL_CODE_MAX || s->nfull_buf == SPILL_FULL_BUF ? spill_drain(s) : 0;
}

int hc_spill_gap(hc_spill_t *s, const char *dir)
{
    if (spill_ready(s, dir, 0) != 0)
        return -1;
    s->code[s->fill++] = SPILL_GAP;
    s->nsmall++;
    return s->fill > s->mem - SPILL_CODE_MAX ? spill_drain(s) : 0;
}

/* Reads a varint from *p, not past end; 0, or -1 where it runs over. */
static int spill_read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7fu) << shift;
        if ((b & 0x80u) == 0) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* What the record coded at *p (its header read already) does, where it
 * says, into prev; 0, or -1 where it is cut short. */
static int spill_decode_what(const uint8_t **p, const uint8_t *end, hc_spill_prev_t *prev)
{
    uint64_t status, peer, nsteps;
    if (end - *p < 3)
        return -1;
    prev->coll  = (*p)[0];
    prev->dtype = (*p)[1] & 15u;
    prev->clock = (*p)[1] >> 4;
    prev->algo  = (*p)[2];
    *p += 3;
    if (spill_read_varint(p, end, &status) != 0 || spill_read_varint(p, end, &peer) != 0 ||
        spill_read_varint(p, end, &nsteps) != 0 || spill_read_varint(p, end, &prev->count) != 0 ||
        spill_read_varint(p, end, &prev->bytes) != 0 || spill_read_varint(p, end, &prev->sent) != 0)
        return -1;
    prev->status = (int32_t)spill_unzig(status);
    prev->peer   = (int32_t)spill_unzig(peer);
    prev->nsteps = (uint32_t)nsteps;
    return 0;
}

/* Decodes the coded record at *p (not past end) against *prev into r; 0, or
 * -1 where it is cut short. */
static int spill_decode(const uint8_t **p, const uint8_t *end, hc_spill_prev_t *prev,
                        hc_op_rec_t *r, uint64_t seq)
{
    uint8_t  h = *(*p)++;
    uint64_t dstart, wait = 0, dur;
    if (h == SPILL_GAP) {
        *r = (hc_op_rec_t){.seq = seq, .state = HC_OP_QUEUED};
        return 0;
    }
    if (h == SPILL_SHORT) {
        if (end - *p < 4)
            return -1;
        dstart = (uint64_t)(*p)[0] | (uint64_t)(*p)[1] << 8;
        dur    = (uint64_t)(*p)[2] | (uint64_t)(*p)[3] << 8;
        *p += 4;
        prev->start += dstart;
    } else {
        if (spill_read_varint(p, end, &dstart) != 0 || spill_read_varint(p, end, &wait) != 0 ||
            spill_read_varint(p, end, &dur) != 0)
            return -1;
        prev->start += (uint64_t)spill_unzig(dstart);
        if ((h & SPILL_DESC) && spill_decode_what(p, end, prev) != 0)
            return -1;
    }
    *r = (hc_op_rec_t){.seq     = seq,
                       .t_issue = prev->start - wait,
                       .t_start = prev->start,
                       .t_end   = prev->start + dur,
                       .count   = prev->count,
                       .bytes   = prev->bytes,
                       .sent    = prev->sent,
                       .peer    = prev->peer,
                       .status  = prev->status,
                       .nsteps  = prev->nsteps,
                       .coll    = prev->coll,
                       .dtype   = prev->dtype,
                       .algo    = prev->algo,
                       .state   = prev->status == HCOMM_SUCCESS ? HC_OP_DONE : HC_OP_FAILED,
                       .clock   = prev->clock};
    return 0;
}

/* Whole record j (of all kept whole) into r: from the file, or from memory
 * where it was not written yet; 0, or -1. */
static int spill_get_full(const hc_spill_t *s, uint64_t j, hc_op_rec_t *r)
{
    uint64_t written = s->nfull - s->nfull_buf;
    if (j >= s->nfull)
        return -1;
    if (j >= written) {
        *r = s->full[j - written];
        return 0;
    }
    ssize_t got = pread(s->fd_full, r, sizeof(*r), (off_t)(j * sizeof(*r)));
    return got == (ssize_t)sizeof(*r) ? 0 : -1;
}

long hc_spill_get(hc_spill_t *s, hc_op_rec_t *out, size_t max, uint64_t *seq)
{
    size_t k = s->nsmall - s->rd_small < max ? (size_t)(s->nsmall - s->rd_small) : max;
    k        = k < s->cap ? k : s->cap;
    if (k == 0)
        return 0;
    /* the coded records: the file's, then those in memory (a drain writes whole
     * records: the file ends where one does) */
    const uint8_t *p, *end;
    if (s->rd_bytes < s->wr_bytes) {
        /* k records fill at most this: a read that ends in the middle of one is short */
        size_t len = (size_t)(s->wr_bytes - s->rd_bytes);
        len        = len < k * SPILL_CODE_MAX ? len : k * SPILL_CODE_MAX;
        if (pread(s->fd_small, s->rbuf, len, (off_t)s->rd_bytes) != (ssize_t)len)
            return -1;
        p = s->rbuf, end = s->rbuf + len;
    } else {
        p = s->code + (s->rd_bytes - s->wr_bytes), end = s->code + s->fill;
    }
    const uint8_t *from = p;
    size_t         i    = 0;
    for (; i < k && p < end; i++, (*seq)++) {
        if (*p != SPILL_FULL) {
            if ((*p != SPILL_GAP && *p != SPILL_SHORT && (*p & ~SPILL_DESC) != 0) ||
                spill_decode(&p, end, &s->get_prev, &out[i], *seq) != 0)
                return -1;
            continue;
        }
        p++;
        if (spill_get_full(s, s->rd_full, &out[i]) != 0)
            return -1;
        s->rd_full++;
    }
    if (i == 0) /* records counted that no byte holds */
        return -1;
    s->rd_bytes += (uint64_t)(p - from);
    s->rd_small += i;
    return (long)i;
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
    s->wr_bytes = s->rd_bytes = s->fill = s->nfull_buf = 0;
    s->put_prev = s->get_prev = (hc_spill_prev_t){0};
    s->what_ok                = 0;
}
