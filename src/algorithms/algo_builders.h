/* algo_builders.h - what the schedule builders share (private to algorithms/).
 *
 * Builders add steps without checking each return: a schedule that ran out of
 * memory remembers it and hc_algo_build learns of it from hc_sched_finalize.
 * They return a status only for their own allocations. Zero-length pieces send
 * no message: both ends compute the same lengths, so they skip the same ones. */
#ifndef HC_ALGO_BUILDERS_H
#define HC_ALGO_BUILDERS_H

#include "algorithms/algo.h"
#include "base/slice.h"

typedef struct hc_algo_ctx {
    const hc_coll_args_t *args;
    int                   nranks, rank;
    size_t                esize;       /* bytes per element */
    size_t                chunk_elems; /* elements per message at most, >= 1 */
} hc_algo_ctx_t;

/* Number of chunks a piece of max_elems elements is cut into. */
static inline size_t hc_algo_nchunks(const hc_algo_ctx_t *c, size_t max_elems)
{
    return max_elems / c->chunk_elems + (max_elems % c->chunk_elems != 0);
}

/* Chunk k of nc near-equal chunks of len elements: offset and length in elements.
 * Pieces of at most max_elems elements cut into hc_algo_nchunks(max_elems) chunks
 * are never longer than chunk_elems. */
static inline size_t hc_algo_chunk_off(size_t len, size_t nc, size_t k)
{
    return len / nc * k + (k < len % nc ? k : len % nc);
}
static inline size_t hc_algo_chunk_len(size_t len, size_t nc, size_t k)
{
    return len / nc + (k < len % nc);
}

/* A block whose count each side gives on its own (alltoallv) goes in pieces
 * of chunk_elems and one short last piece, empty when the count is a multiple
 * of it: counts that differ then differ in some piece's length, which fails
 * the receive, where near-equal chunks could match a prefix and leave the
 * rest for a later operation (messages carry no operation number). */
static inline size_t hc_algo_npieces(const hc_algo_ctx_t *c, size_t len)
{
    return len / c->chunk_elems + 1;
}
static inline size_t hc_algo_piece_len(const hc_algo_ctx_t *c, size_t len, size_t k)
{
    return k + 1 < hc_algo_npieces(c, len) ? c->chunk_elems : len - k * c->chunk_elems;
}

/* A slice at element offset elem of buffer buf. */
static inline hc_slice_t hc_algo_at(const hc_algo_ctx_t *c, uint32_t buf, size_t elem)
{
    return hc_slice(buf, elem * c->esize);
}

static inline int hc_algo_mod(int a, int n)
{
    return ((a % n) + n) % n;
}

/* Recursive doubling on n ranks folds when n is not a power of two: with p the
 * largest power of two <= n and rem = n - p, rank 2i (i < rem) hands its data
 * to 2i + 1 and gets the result back; the p ranks that remain exchange,
 * numbered 0 .. p - 1 (rd, Rabenseifner, the leaders' allreduce). */
typedef struct hc_fold {
    int p, rem;
} hc_fold_t;

static inline hc_fold_t hc_fold(int n)
{
    hc_fold_t f = {1, 0};
    while (f.p * 2 <= n)
        f.p *= 2;
    f.rem = n - f.p;
    return f;
}

/* Does rank r hand its data away (and take no part in the exchange)? */
static inline int hc_fold_out(hc_fold_t f, int r)
{
    return r < 2 * f.rem && r % 2 == 0;
}

/* r's number among the p that exchange (r not folded out). */
static inline int hc_fold_index(hc_fold_t f, int r)
{
    return r < 2 * f.rem ? r / 2 : r - f.rem;
}

/* The rank numbered nr among the p that exchange. */
static inline int hc_fold_rank(hc_fold_t f, int nr)
{
    return nr < f.rem ? 2 * nr + 1 : nr + f.rem;
}

/* A builder that follows no plan: adds c's steps to s. */
typedef hcomm_status_t (*hc_algo_steps_fn)(const hc_algo_ctx_t *c, hc_sched_t *s);

/* Validates args for nranks ranks and fills c (chunks of at most chunk_bytes,
 * 0: unchunked); logs and returns the error otherwise. */
hcomm_status_t hc_algo_ctx_init(hc_algo_ctx_t *c, const hc_coll_args_t *args, int nranks, int rank,
                                size_t chunk_bytes);
/* Ends a build: status is the builder's; finalizes s and hands it out, or
 * destroys it (logging an out-of-memory build of algorithm algo). */
hcomm_status_t hc_algo_finish(const hc_algo_ctx_t *c, const char *algo, hcomm_status_t status,
                              hc_sched_t *s, hc_sched_t **sched_p);

/* Builds with steps (algo names it in messages): context, schedule, finish. */
hcomm_status_t hc_algo_build_steps(const hc_coll_args_t *args, hc_algo_steps_fn steps,
                                   const char *algo, int nranks, int rank, size_t chunk_bytes,
                                   hc_sched_t **sched_p);

/* One rank: every collective is a copy of SEND to RECV (DIV by 1 skipped). */
hcomm_status_t hc_algo_local_copy(const hc_algo_ctx_t *c, hc_sched_t *s);
/* The one DIV of an avg over elems elements of RECV, when op is HCOMM_AVG. */
void hc_algo_avg_div(const hc_algo_ctx_t *c, hc_sched_t *s, size_t elems);

hcomm_status_t hc_algo_ring_allreduce(const hc_algo_ctx_t *c, hc_sched_t *s);
hcomm_status_t hc_algo_ring_allgather(const hc_algo_ctx_t *c, hc_sched_t *s);
hcomm_status_t hc_algo_ring_reduce_scatter(const hc_algo_ctx_t *c, hc_sched_t *s);
hcomm_status_t hc_algo_rd_allreduce(const hc_algo_ctx_t *c, hc_sched_t *s);
hcomm_status_t hc_algo_rabenseifner_allreduce(const hc_algo_ctx_t *c, hc_sched_t *s);
hcomm_status_t hc_algo_bruck_allgather(const hc_algo_ctx_t *c, hc_sched_t *s);
hcomm_status_t hc_algo_chain_broadcast(const hc_algo_ctx_t *c, hc_sched_t *s);
hcomm_status_t hc_algo_chain_reduce(const hc_algo_ctx_t *c, hc_sched_t *s);
hcomm_status_t hc_algo_pairwise_alltoall(const hc_algo_ctx_t *c, hc_sched_t *s);
hcomm_status_t hc_algo_pairwise_alltoallv(const hc_algo_ctx_t *c, hc_sched_t *s);
hcomm_status_t hc_algo_direct_send(const hc_algo_ctx_t *c, hc_sched_t *s);
hcomm_status_t hc_algo_direct_recv(const hc_algo_ctx_t *c, hc_sched_t *s);
hcomm_status_t hc_algo_dissem_barrier(const hc_algo_ctx_t *c, hc_sched_t *s);

#endif
