/* coll_identical.c - every rank ends an allreduce with the same bits. Data
 * parallel training keeps its replicas equal only if the averaged gradients
 * agree to the last bit, so the check uses inputs whose sums round (random
 * fractions), where a different order of additions on two ranks shows: each
 * rank hashes its result and the hashes are compared over an allgather.
 * Runs under whatever HCOMM_ALGO selects, chunked and not. */
#include <stdio.h>
#include <stdlib.h>

#include "coll_check.h"

static uint64_t fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t             h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Fractions in [-1, 1) from a per-rank xorshift stream. */
static void fill(float *x, size_t n, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = (float)((double)(s >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
    }
}

static int identical_once(ct_ctx_t *ctx, size_t count, hcomm_op_t op, int in_place)
{
    float    *in = malloc(count * sizeof(float)), *out = malloc(count * sizeof(float));
    uint64_t *all = calloc((size_t)ctx->nranks, sizeof(uint64_t)), mine;
    int       ok  = in != NULL && out != NULL && all != NULL;

    if (ok) {
        fill(in, count, ctx->seed ^ ((uint64_t)ctx->rank << 32) ^ count);
        hcomm_status_t st =
            hcomm_allreduce(in, in_place ? in : out, count, HCOMM_FLOAT32, op, ctx->comm, NULL);
        mine = fnv1a(in_place ? in : out, count * sizeof(float));
        if (st == HCOMM_SUCCESS)
            st = hcomm_allgather(&mine, all, 1, HCOMM_UINT64, ctx->comm, NULL);
        if (st != HCOMM_SUCCESS) {
            printf("FAIL rank %d: identical: allreduce or allgather returned %s\n", ctx->rank,
                   hcomm_status_name(st));
            ctx->broken = 1;
            ok          = 0;
        }
        for (int r = 0; ok && r < ctx->nranks; r++)
            if (all[r] != all[0]) {
                printf("FAIL rank %d: allreduce %s of %zu floats%s: rank %d's result differs "
                       "from rank 0's in its bits\n",
                       ctx->rank, hcomm_op_name(op), count, in_place ? " in place" : "", r);
                ok = 0;
            }
    }
    free(in), free(out), free(all);
    return ok;
}

void ct_run_identical(ct_ctx_t *ctx)
{
    /* 1 element to more than one 256 KiB chunk */
    static const size_t counts[] = {1, 7, 1000, 70001};

    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]) && !ctx->broken; i++)
        for (int v = 0; v < 2 && !ctx->broken; v++) {
            if (identical_once(ctx, counts[i], v ? HCOMM_AVG : HCOMM_SUM, v))
                ctx->passed++;
            else
                ctx->failed++;
        }
}
