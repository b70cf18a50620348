/* algo_ctx.c - what every schedule builder shares: the argument checks, the
 * context, the end of a build, the one-rank copy and the avg's division. */
#include <stdint.h>

#include "algorithms/algo_builders.h"
#include "base/log.h"

hcomm_status_t hc_algo_local_copy(const hc_algo_ctx_t *c, hc_sched_t *s)
{
    if (c->args->coll != HC_COLL_BARRIER && c->args->count != 0)
        hc_sched_copy(s, hc_slice(HC_BUF_RECV, 0), hc_slice(HC_BUF_SEND, 0),
                      c->args->count * c->esize, HC_STEP_NODEP, HC_STEP_NODEP);
    return HCOMM_SUCCESS;
}

void hc_algo_avg_div(const hc_algo_ctx_t *c, hc_sched_t *s, size_t elems)
{
    if (c->args->op == HCOMM_AVG && elems != 0 && c->nranks > 1)
        hc_sched_div(s, hc_slice(HC_BUF_RECV, 0), elems * c->esize, c->args->dtype, c->nranks);
}

/* Validates args for nranks ranks; sets *esize (1 for a barrier). */
static hcomm_status_t algo_check_args(const hc_coll_args_t *a, int nranks, int rank, size_t *esize)
{
    int reduces = a->coll == HC_COLL_ALLREDUCE || a->coll == HC_COLL_REDUCE ||
                  a->coll == HC_COLL_REDUCE_SCATTER;
    int rooted = a->coll == HC_COLL_BROADCAST || a->coll == HC_COLL_REDUCE ||
                 a->coll == HC_COLL_SEND || a->coll == HC_COLL_RECV;
    size_t es = a->coll == HC_COLL_BARRIER ? 1 : hcomm_dtype_size(a->dtype);

    if ((unsigned)a->coll >= HC_COLL_COUNT) {
        hc_error(ALGO, "invalid collective %d", (int)a->coll);
        return HCOMM_ERR_INVALID_ARG;
    }
    if (nranks < 1 || rank < 0 || rank >= nranks ||
        (rooted && (a->root < 0 || a->root >= nranks))) {
        hc_error(ALGO, "%s: rank %d, root/peer %d of %d ranks", hc_coll_name(a->coll), rank,
                 a->root, nranks);
        return HCOMM_ERR_INVALID_RANK;
    }
    if (es == 0) {
        hc_error(ALGO, "%s: invalid datatype %d", hc_coll_name(a->coll), (int)a->dtype);
        return HCOMM_ERR_INVALID_DTYPE;
    }
    if (reduces && (unsigned)a->op >= HCOMM_OP_COUNT) {
        hc_error(ALGO, "%s: invalid op %d", hc_coll_name(a->coll), (int)a->op);
        return HCOMM_ERR_INVALID_OP;
    }
    /* the largest buffer (SEND or RECV of nranks blocks, or TMP) must fit */
    if (a->count > SIZE_MAX / es / (size_t)(nranks < 2 ? 2 : nranks)) {
        hc_error(ALGO, "%s: %zu elements overflow", hc_coll_name(a->coll), a->count);
        return HCOMM_ERR_OVERFLOW;
    }
    *esize = es;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_algo_ctx_init(hc_algo_ctx_t *c, const hc_coll_args_t *args, int nranks, int rank,
                                size_t chunk_bytes)
{
    hcomm_status_t status;

    c->args   = args;
    c->nranks = nranks;
    c->rank   = rank;
    status    = algo_check_args(args, nranks, rank, &c->esize);
    if (status != HCOMM_SUCCESS)
        return status;
    /* chunk_bytes 0: no pipelining */
    c->chunk_elems = chunk_bytes == 0 ? SIZE_MAX : chunk_bytes / c->esize;
    if (c->chunk_elems == 0)
        c->chunk_elems = 1;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_algo_finish(const hc_algo_ctx_t *c, const char *algo, hcomm_status_t status,
                              hc_sched_t *s, hc_sched_t **sched_p)
{
    if (status == HCOMM_ERR_NO_MEMORY)
        hc_error(ALGO, "%s/%s: out of memory building the schedule", hc_coll_name(c->args->coll),
                 algo);
    if (status == HCOMM_SUCCESS)
        status = hc_sched_finalize(s);
    if (status != HCOMM_SUCCESS) {
        hc_sched_destroy(s);
        return status;
    }
    *sched_p = s;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_algo_build_steps(const hc_coll_args_t *args, hc_algo_steps_fn steps,
                                   const char *algo, int nranks, int rank, size_t chunk_bytes,
                                   hc_sched_t **sched_p)
{
    hc_algo_ctx_t  c;
    hcomm_status_t status = hc_algo_ctx_init(&c, args, nranks, rank, chunk_bytes);
    if (status != HCOMM_SUCCESS)
        return status;
    hc_sched_t *s = hc_sched_create(nranks, rank);
    if (s == NULL)
        return HCOMM_ERR_NO_MEMORY;
    return hc_algo_finish(&c, algo, steps(&c, s), s, sched_p);
}
