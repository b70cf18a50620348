/* api_alltoallv.c - hcomm_alltoallv (per-peer counts and displacements) and
 * hcomm_alltoallv_dynamic (only the senders know the counts: they are
 * exchanged first, as MoE token dispatch needs). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_coll.h"
#include "base/extent.h"
#include "base/log.h"
#include "core/comm.h"
#include "core/group.h"
#include "device/device.h"
#include "overlap/overlap.h"

/* Where one side's blocks lie, in elements from its buffer: [lo, hi) spans
 * them all (the empty blocks left out); total is their sum. */
typedef struct {
    size_t total, lo, hi;
} side_t;

/* Counts and displacements of one side: in range, and a buffer where data is. */
static hcomm_status_t side_check(const char *name, const char *what, const void *buf,
                                 const size_t *counts, const size_t *displs, int n, size_t es,
                                 side_t *side)
{
    *side = (side_t){0, SIZE_MAX, 0};
    if (counts == NULL || displs == NULL) {
        hc_error(COLL, "%s: NULL %s counts or displacements", name, what);
        return HCOMM_ERR_INVALID_ARG;
    }
    for (int p = 0; p < n; p++) {
        if (counts[p] > PTRDIFF_MAX / es || displs[p] > PTRDIFF_MAX / es - counts[p]) {
            hc_error(COLL, "%s: %s block of rank %d (%zu at %zu) overflows", name, what, p,
                     counts[p], displs[p]);
            return HCOMM_ERR_OVERFLOW;
        }
        if (counts[p] > PTRDIFF_MAX / es - side->total) {
            hc_error(COLL, "%s: %s blocks of %zu elements and more overflow", name, what,
                     side->total);
            return HCOMM_ERR_OVERFLOW;
        }
        side->total += counts[p];
        if (counts[p] != 0) {
            side->lo = displs[p] < side->lo ? displs[p] : side->lo;
            side->hi = displs[p] + counts[p] > side->hi ? displs[p] + counts[p] : side->hi;
        }
    }
    if (side->total != 0 && buf == NULL) {
        hc_error(COLL, "%s: NULL %sbuf with %zu elements", name, what, side->total);
        return HCOMM_ERR_NULL_BUFFER;
    }
    return HCOMM_SUCCESS;
}

typedef struct {
    size_t displ, count;
    int    rank;
} recv_block_t;

static int by_displ(const void *a, const void *b)
{
    size_t x = ((const recv_block_t *)a)->displ, y = ((const recv_block_t *)b)->displ;
    return x < y ? -1 : x > y;
}

/* No two receive blocks share an element: which one's data would be left is a
 * matter of timing (MPI calls it erroneous). Displacements rising with the
 * rank, the usual layout, are checked in one pass; others are sorted first. */
static hcomm_status_t recv_blocks_check(const char *name, const size_t *counts,
                                        const size_t *displs, int n)
{
    int           prev = -1, sorted = 1, m = 0;
    recv_block_t *b;
    for (int p = 0; p < n && sorted; p++) {
        if (counts[p] == 0)
            continue;
        sorted = prev < 0 || displs[p] >= displs[prev] + counts[prev];
        prev   = p;
    }
    if (sorted)
        return HCOMM_SUCCESS;
    if ((b = malloc((size_t)n * sizeof(*b))) == NULL) {
        hc_error(COLL, "%s: out of memory", name);
        return HCOMM_ERR_NO_MEMORY;
    }
    for (int p = 0; p < n; p++)
        if (counts[p] != 0)
            b[m++] = (recv_block_t){displs[p], counts[p], p};
    qsort(b, (size_t)m, sizeof(*b), by_displ);
    hcomm_status_t st = HCOMM_SUCCESS;
    for (int i = 1; i < m && st == HCOMM_SUCCESS; i++) {
        if (b[i].displ < b[i - 1].displ + b[i - 1].count) {
            hc_error(COLL,
                     "%s: the receive blocks of rank %d (%zu at %zu) and rank %d (%zu at %zu) "
                     "overlap",
                     name, b[i - 1].rank, b[i - 1].count, b[i - 1].displ, b[i].rank, b[i].count,
                     b[i].displ);
            st = HCOMM_ERR_INVALID_ARG;
        }
    }
    free(b);
    return st;
}

/* The blocks sent and those received share no byte (there is no in-place
 * alltoallv: the same buffer is refused whatever the blocks). */
static hcomm_status_t sides_check(const char *name, const void *sendbuf, const side_t *s,
                                  const void *recvbuf, const side_t *r, size_t es)
{
    if (sendbuf == recvbuf && s->total + r->total != 0) {
        hc_error(COLL, "%s: sendbuf and recvbuf are the same buffer (no in-place alltoallv)", name);
        return HCOMM_ERR_INVALID_ARG;
    }
    if (s->total == 0 || r->total == 0)
        return HCOMM_SUCCESS;
    const char *sp = (const char *)sendbuf + s->lo * es, *rp = (const char *)recvbuf + r->lo * es;
    size_t      sb = (s->hi - s->lo) * es, rb = (r->hi - r->lo) * es;
    if (hc_extents_overlap(sp, sb, rp, rb)) {
        hc_error(COLL,
                 "%s: the send blocks (%zu bytes at %p) and the receive blocks (%zu bytes at %p) "
                 "overlap; pass disjoint buffers",
                 name, sb, (const void *)sp, rb, (const void *)rp);
        return HCOMM_ERR_INVALID_ARG;
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                               void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                               hcomm_dtype_t dtype, hcomm_comm_t comm, hcomm_stream_t stream)
{
    const char    *name = "hcomm_alltoallv";
    hcomm_status_t st   = hc_comm_check(comm, name);
    size_t         es   = hcomm_dtype_size(dtype);
    side_t         ss, rs;

    if (st != HCOMM_SUCCESS)
        return st;
    if (es == 0) {
        hc_error(COLL, "%s: invalid datatype %d", name, (int)dtype);
        return HCOMM_ERR_INVALID_DTYPE;
    }
    st = side_check(name, "send", sendbuf, sendcounts, sdispls, comm->nranks, es, &ss);
    if (st == HCOMM_SUCCESS)
        st = side_check(name, "recv", recvbuf, recvcounts, rdispls, comm->nranks, es, &rs);
    if (st == HCOMM_SUCCESS)
        st = recv_blocks_check(name, recvcounts, rdispls, comm->nranks);
    if (st == HCOMM_SUCCESS)
        st = sides_check(name, sendbuf, &ss, recvbuf, &rs, es);
    if (st != HCOMM_SUCCESS)
        return st;
    if (stream != NULL && (st = hc_stream_check(stream, name)) != HCOMM_SUCCESS)
        return st;
    /* the schedule is built from the arrays before this call returns */
    size_t *v = malloc(4 * (size_t)comm->nranks * sizeof(*v));
    if (v == NULL) {
        hc_error(COLL, "%s: out of memory", name);
        return HCOMM_ERR_NO_MEMORY;
    }
    size_t n = (size_t)comm->nranks * sizeof(*v);
    memcpy(v, sendcounts, n);
    memcpy(v + comm->nranks, sdispls, n);
    memcpy(v + 2 * comm->nranks, recvcounts, n);
    memcpy(v + 3 * comm->nranks, rdispls, n);
    hc_coll_args_t a = {.coll = HC_COLL_ALLTOALLV, .count = rs.total, .dtype = dtype, .v = v};
    if (hc_group_active()) {
        hc_group_refuse(HCOMM_ERR_INVALID_USAGE, name);
        hc_error(COLL, "%s: not allowed inside a group", name);
        st = HCOMM_ERR_INVALID_USAGE;
    } else {
        st = hc_api_issue(comm, &a, sendbuf, recvbuf, NULL, stream);
    }
    free(v);
    return st;
}

/* The local side of a dynamic alltoallv, checked before the count exchange:
 * a fault found only after it would leave the peers in the data exchange. */
static hcomm_status_t dyn_local_check(const char *name, const void *sendbuf,
                                      const size_t *sendcounts, const size_t *sdispls,
                                      const void *recvbuf, size_t recv_capacity,
                                      const size_t *recvcounts, hcomm_dtype_t dtype, int n,
                                      hcomm_stream_t stream, side_t *ss)
{
    size_t es = hcomm_dtype_size(dtype);

    if (stream != NULL) {
        hc_error(COLL,
                 "%s: streams are not supported (the data's layout is known only after "
                 "the counts arrive); pass NULL",
                 name);
        return HCOMM_ERR_UNSUPPORTED;
    }
    if (es == 0) {
        hc_error(COLL, "%s: invalid datatype %d", name, (int)dtype);
        return HCOMM_ERR_INVALID_DTYPE;
    }
    if (sendcounts == NULL || recvcounts == NULL) {
        hc_error(COLL, "%s: NULL counts", name);
        return HCOMM_ERR_INVALID_ARG;
    }
    hcomm_status_t st = side_check(name, "send", sendbuf, sendcounts, sdispls, n, es, ss);
    if (st != HCOMM_SUCCESS)
        return st;
    if (recv_capacity > PTRDIFF_MAX / es) {
        hc_error(COLL, "%s: recv_capacity %zu overflows", name, recv_capacity);
        return HCOMM_ERR_OVERFLOW;
    }
    /* the inner alltoallv takes host memory only */
    if ((st = hc_mem_host_only(name, sendbuf, 1)) != HCOMM_SUCCESS)
        return st;
    return hc_mem_host_only(name, recvbuf, 1);
}

hcomm_status_t hcomm_alltoallv_dynamic(const void *sendbuf, const size_t *sendcounts,
                                       const size_t *sdispls, void *recvbuf, size_t recv_capacity,
                                       size_t *recvcounts, hcomm_dtype_t dtype, hcomm_comm_t comm,
                                       hcomm_stream_t stream)
{
    const char    *name = "hcomm_alltoallv_dynamic";
    hcomm_status_t st   = hc_comm_check(comm, name);

    if (st != HCOMM_SUCCESS)
        return st;
    if (hc_group_active()) {
        hc_group_refuse(HCOMM_ERR_INVALID_USAGE, name);
        hc_error(COLL, "%s: not allowed inside a group", name);
        return HCOMM_ERR_INVALID_USAGE;
    }
    int       n   = comm->nranks;
    uint64_t *out = malloc(2 * (size_t)n * sizeof(*out));
    size_t   *rd  = malloc(2 * (size_t)n * sizeof(*rd));
    if (out == NULL || rd == NULL) {
        free(out);
        free(rd);
        hc_error(COLL, "%s: out of memory", name);
        return HCOMM_ERR_NO_MEMORY;
    }
    /* a local fault still takes part in the exchanges (sending zero counts),
     * so that every rank fails together instead of waiting for this one */
    side_t         ss   = {0, 0, 0};
    hcomm_status_t mine = dyn_local_check(name, sendbuf, sendcounts, sdispls, recvbuf,
                                          recv_capacity, recvcounts, dtype, n, stream, &ss);
    uint64_t      *in = out + n, total = 0;
    size_t        *rc = rd + n;
    for (int p = 0; p < n; p++)
        out[p] = mine == HCOMM_SUCCESS ? sendcounts[p] : 0;
    st = hcomm_alltoall(out, in, 1, HCOMM_UINT64, comm, NULL);
    for (int p = 0; p < n && st == HCOMM_SUCCESS && mine == HCOMM_SUCCESS; p++) {
        if (in[p] > recv_capacity - total) {
            hc_error(COLL, "%s: rank %d sends %llu elements after %llu, recvbuf holds %zu", name, p,
                     (unsigned long long)in[p], (unsigned long long)total, recv_capacity);
            mine = HCOMM_ERR_OVERFLOW;
            break;
        }
        rd[p] = (size_t)total;
        rc[p] = (size_t)in[p];
        total += in[p];
    }
    if (st == HCOMM_SUCCESS && mine == HCOMM_SUCCESS && total != 0 && recvbuf == NULL) {
        hc_error(COLL, "%s: NULL recvbuf with %llu elements arriving", name,
                 (unsigned long long)total);
        mine = HCOMM_ERR_NULL_BUFFER;
    } else if (st == HCOMM_SUCCESS && mine == HCOMM_SUCCESS) {
        /* the blocks arrive packed from recvbuf's start */
        side_t rs = {(size_t)total, 0, (size_t)total};
        mine      = sides_check(name, sendbuf, &ss, recvbuf, &rs, hcomm_dtype_size(dtype));
    }
    /* every rank learns whether all can go on, so all stop together */
    int32_t ok = mine == HCOMM_SUCCESS;
    if (st == HCOMM_SUCCESS)
        st = hcomm_allreduce(&ok, &ok, 1, HCOMM_INT32, HCOMM_MIN, comm, NULL);
    if (st == HCOMM_SUCCESS && !ok)
        st = mine != HCOMM_SUCCESS ? mine : HCOMM_ERR_REMOTE;
    if (st == HCOMM_SUCCESS) {
        memcpy(recvcounts, rc, (size_t)n * sizeof(*rc));
        st = hcomm_alltoallv(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rd, dtype, comm,
                             NULL);
    }
    free(out);
    free(rd);
    return st;
}
