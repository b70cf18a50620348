/* algo_select.c - which algorithm serves a collective, and building its schedule. */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "algorithms/algo_builders.h"
#include "base/log.h"

typedef hcomm_status_t (*algo_builder_t)(const hc_algo_ctx_t *c, hc_sched_t *s);

/* What each algorithm implements; NULL where it does not. */
static const algo_builder_t algo_builders[HC_COLL_COUNT][HC_ALGO_COUNT] = {
    [HC_COLL_ALLREDUCE] = {[HC_ALGO_RING]         = hc_algo_ring_allreduce,
                           [HC_ALGO_RD]           = hc_algo_rd_allreduce,
                           [HC_ALGO_RABENSEIFNER] = hc_algo_rabenseifner_allreduce},
    [HC_COLL_BROADCAST] = {[HC_ALGO_CHAIN] = hc_algo_chain_broadcast},
    [HC_COLL_REDUCE]    = {[HC_ALGO_CHAIN] = hc_algo_chain_reduce},
    [HC_COLL_ALLGATHER] =
        {[HC_ALGO_RING] = hc_algo_ring_allgather, [HC_ALGO_BRUCK] = hc_algo_bruck_allgather},
    [HC_COLL_REDUCE_SCATTER] = {[HC_ALGO_RING] = hc_algo_ring_reduce_scatter},
    [HC_COLL_ALLTOALL]       = {[HC_ALGO_PAIRWISE] = hc_algo_pairwise_alltoall},
    [HC_COLL_SEND]           = {[HC_ALGO_DIRECT] = hc_algo_direct_send},
    [HC_COLL_RECV]           = {[HC_ALGO_DIRECT] = hc_algo_direct_recv},
    [HC_COLL_BARRIER]        = {[HC_ALGO_DISSEM] = hc_algo_dissem_barrier},
    [HC_COLL_ALLTOALLV]      = {[HC_ALGO_PAIRWISE] = hc_algo_pairwise_alltoallv},
};

/* The algorithm of a collective that has only one (allreduce chooses by size). */
static const hc_algo_t algo_default[HC_COLL_COUNT] = {
    [HC_COLL_ALLREDUCE] = HC_ALGO_RING,      [HC_COLL_BROADCAST] = HC_ALGO_CHAIN,
    [HC_COLL_REDUCE] = HC_ALGO_CHAIN,        [HC_COLL_ALLGATHER] = HC_ALGO_RING,
    [HC_COLL_REDUCE_SCATTER] = HC_ALGO_RING, [HC_COLL_ALLTOALL] = HC_ALGO_PAIRWISE,
    [HC_COLL_SEND] = HC_ALGO_DIRECT,         [HC_COLL_RECV] = HC_ALGO_DIRECT,
    [HC_COLL_BARRIER] = HC_ALGO_DISSEM,      [HC_COLL_ALLTOALLV] = HC_ALGO_PAIRWISE,
};

static const char *const algo_names[HC_ALGO_COUNT] = {
    "auto", "ring", "rd", "chain", "pairwise", "direct", "dissem", "rabenseifner", "bruck",
    "tree", "hier", "leader"};

static const char *const coll_names[HC_COLL_COUNT] = {
    "allreduce", "broadcast", "reduce",  "allgather", "reduce_scatter",
    "alltoall",  "send",      "recv",    "barrier",   "alltoallv"};

const char *hc_algo_name(hc_algo_t algo)
{
    return (unsigned)algo < HC_ALGO_COUNT ? algo_names[algo] : "unknown";
}

const char *hc_coll_name(hc_coll_t coll)
{
    return (unsigned)coll < HC_COLL_COUNT ? coll_names[coll] : "unknown";
}

/* Does p[0..len) spell name (ignoring case)? */
static int algo_word_is(const char *p, size_t len, const char *name)
{
    return strlen(name) == len && strncasecmp(p, name, len) == 0;
}

static hc_algo_t algo_parse_n(const char *p, size_t len)
{
    while (len != 0 && (*p == ' ' || *p == '\t'))
        p++, len--;
    while (len != 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
        len--;
    for (int a = 0; a < HC_ALGO_COUNT; a++)
        if (algo_word_is(p, len, algo_names[a]))
            return (hc_algo_t)a;
    return HC_ALGO_COUNT;
}

hc_algo_t hc_algo_parse(const char *name)
{
    return name == NULL ? HC_ALGO_COUNT : algo_parse_n(name, strlen(name));
}

/* HCOMM_ALGO is read for every operation: say once that part of it is ignored. */
static void algo_warn_once(const char *spec, const char *p, size_t len)
{
    static atomic_flag warned = ATOMIC_FLAG_INIT;

    if (!atomic_flag_test_and_set(&warned))
        hc_warn(ALGO,
                "HCOMM_ALGO=%s: ignoring '%.*s' (names: ring, rd, chain, pairwise, "
                "direct, dissem, rabenseifner, bruck, tree, hier, leader; optionally COLL:NAME)",
                spec, (int)len, p);
}

int hc_algo_needs_plan(hc_coll_t coll, hc_algo_t algo)
{
    if (algo == HC_ALGO_TREE)
        return coll == HC_COLL_ALLREDUCE || coll == HC_COLL_BROADCAST || coll == HC_COLL_REDUCE;
    if (algo == HC_ALGO_LEADER)
        return coll == HC_COLL_ALLREDUCE;
    if (algo == HC_ALGO_HIER)
        return coll == HC_COLL_ALLREDUCE || coll == HC_COLL_BROADCAST ||
               coll == HC_COLL_REDUCE || coll == HC_COLL_ALLGATHER ||
               coll == HC_COLL_REDUCE_SCATTER || coll == HC_COLL_ALLTOALL;
    return 0;
}

static int algo_valid(hc_coll_t coll, hc_algo_t a)
{
    return algo_builders[coll][a] != NULL || hc_algo_needs_plan(coll, a);
}

/* The algorithm spec ("name" or "coll:name,...") forces for coll, or HC_ALGO_AUTO.
 * An entry naming coll wins over a bare name, which applies where it is valid. */
static hc_algo_t algo_forced(const char *spec, hc_coll_t coll)
{
    hc_algo_t bare = HC_ALGO_AUTO;

    for (const char *p = spec; p != NULL && *p != '\0';) {
        p += strspn(p, " \t");
        size_t      len   = strcspn(p, ",");
        const char *colon = memchr(p, ':', len);
        const char *name  = colon != NULL ? colon + 1 : p;
        hc_algo_t   a     = algo_parse_n(name, len - (size_t)(name - p));
        size_t      clen  = colon != NULL ? (size_t)(colon - p) : 0;
        int         known = colon == NULL;

        if (len == 0) { /* "a,,b" or a trailing comma */
            p += p[len] == ',';
            continue;
        }
        for (int k = 0; k < HC_COLL_COUNT && !known; k++)
            known = algo_word_is(p, clen, coll_names[k]);
        if (a == HC_ALGO_COUNT || !known)
            algo_warn_once(spec, p, len);
        else if (colon != NULL && algo_word_is(p, clen, coll_names[coll])) {
            if (a == HC_ALGO_AUTO || algo_valid(coll, a))
                return a;
            algo_warn_once(spec, p, len);
        } else if (colon == NULL && bare == HC_ALGO_AUTO && algo_valid(coll, a))
            bare = a;
        p += len + (p[len] == ',');
    }
    return bare;
}

hc_algo_t hc_algo_forced(const hc_coll_args_t *args, const hc_params_t *params)
{
    if ((unsigned)args->coll >= HC_COLL_COUNT)
        return HC_ALGO_AUTO;
    return algo_forced((params != NULL ? params : hc_params_get())->algo, args->coll);
}

hc_algo_t hc_algo_select(const hc_coll_args_t *args, int nranks, const hc_params_t *params)
{
    hc_algo_t forced;
    size_t    es;

    if ((unsigned)args->coll >= HC_COLL_COUNT)
        return HC_ALGO_COUNT;
    if (params == NULL)
        params = hc_params_get();
    forced = algo_forced(params->algo, args->coll);
    if (forced != HC_ALGO_AUTO)
        return forced;
    if (args->coll != HC_COLL_ALLREDUCE)
        return algo_default[args->coll];
    es = hcomm_dtype_size(args->dtype);
    if (es != 0 && args->count <= params->allreduce_rd_max / es)
        return HC_ALGO_RD;
    if (es != 0 && nranks >= 4 && (nranks & (nranks - 1)) == 0 &&
        args->count <= params->allreduce_rab_max / es)
        return HC_ALGO_RABENSEIFNER;
    return HC_ALGO_RING;
}

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
        hc_error(ALGO, "%s: rank %d, root/peer %d of %d ranks", coll_names[a->coll], rank, a->root,
                 nranks);
        return HCOMM_ERR_INVALID_RANK;
    }
    if (es == 0) {
        hc_error(ALGO, "%s: invalid datatype %d", coll_names[a->coll], (int)a->dtype);
        return HCOMM_ERR_INVALID_DTYPE;
    }
    if (reduces && (unsigned)a->op >= HCOMM_OP_COUNT) {
        hc_error(ALGO, "%s: invalid op %d", coll_names[a->coll], (int)a->op);
        return HCOMM_ERR_INVALID_OP;
    }
    /* the largest buffer (SEND or RECV of nranks blocks, or TMP) must fit */
    if (a->count > SIZE_MAX / es / (size_t)(nranks < 2 ? 2 : nranks)) {
        hc_error(ALGO, "%s: %zu elements overflow", coll_names[a->coll], a->count);
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
        hc_error(ALGO, "%s/%s: out of memory building the schedule", coll_names[c->args->coll],
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

hcomm_status_t hc_algo_build(const hc_coll_args_t *args, hc_algo_t algo, int nranks, int rank,
                             size_t chunk_bytes, hc_sched_t **sched_p)
{
    hc_algo_ctx_t  c;
    hc_sched_t    *s;
    hcomm_status_t status;

    if (args == NULL || sched_p == NULL) {
        hc_error(ALGO, "building a schedule: NULL argument");
        return HCOMM_ERR_INVALID_ARG;
    }
    status = hc_algo_ctx_init(&c, args, nranks, rank, chunk_bytes);
    if (status != HCOMM_SUCCESS)
        return status;
    if (algo == HC_ALGO_AUTO)
        algo = hc_algo_select(args, nranks, hc_params_get());
    if ((unsigned)algo >= HC_ALGO_COUNT || algo_builders[args->coll][algo] == NULL) {
        hc_error(ALGO, "algorithm %s does not implement %s", hc_algo_name(algo),
                 coll_names[args->coll]);
        return HCOMM_ERR_UNSUPPORTED;
    }
    s = hc_sched_create(nranks, rank);
    if (s == NULL)
        return HCOMM_ERR_NO_MEMORY;
    status = algo_builders[args->coll][algo](&c, s);
    return hc_algo_finish(&c, algo_names[algo], status, s, sched_p);
}
