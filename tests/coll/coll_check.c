/*
 * coll_check - one rank of the multi-process correctness test. Run under
 * hcomm-run (or alone: one rank). For every collective x dtype x op x count x
 * in-place / out-of-place x root it checks the result against a serial
 * reference that every rank computes locally, that out-of-place calls leave the
 * send buffer untouched, and that nothing is written outside the buffers.
 * Then nonblocking variants, groups and comm_split (coll_extra.c).
 *
 * Usage: coll_check [--quick] [--max-count N] [--seed S] [--coll NAME]
 *                   [--dtype NAME] [--skip NAME]... [--no-extras] [--verbose]
 *        coll_check --late-peer SECONDS   (ct_run_late_peer alone)
 * Exit: 0 all passed, 1 a case failed, 2 usage or init failure.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_check.h"
#include "coll_data.h"

#define CT_BIG_COUNT (((size_t)1 << 20) + 3)

static const size_t full_counts[]  = {0, 1, 7, 1023, CT_BIG_COUNT};
static const size_t quick_counts[] = {0, 7, 1023};

uint64_t ct_case_seed(const ct_ctx_t *ctx, const ct_case_t *c)
{
    uint64_t s = ctx->seed * 0x100000001b3ull;
    s ^= ((uint64_t)c->coll << 56) ^ ((uint64_t)c->dt << 48) ^ ((uint64_t)c->op << 40);
    s ^= ((uint64_t)c->inplace << 39) ^ ((uint64_t)(unsigned)(c->root + 1) << 32);
    return s ^ (uint64_t)c->count;
}

void ct_call_failed(ct_ctx_t *ctx, const ct_run_t *run, const char *what, hcomm_status_t st)
{
    ct_report(run, "%s returned %s (%d): %s", what, hcomm_status_name(st), (int)st,
              hcomm_status_str(st));
    ctx->failed++;
    ctx->broken = 1;
}

void ct_run_case(ct_ctx_t *ctx, ct_case_t *c)
{
    ct_run_t       run;
    hcomm_status_t st;

    if (ctx->broken)
        return;
    c->seed = ct_case_seed(ctx, c);
    if (ct_prepare(&run, c, ctx->rank, ctx->nranks) != 0) {
        printf("FAIL rank %d: %s count=%zu: out of memory in the test\n", ctx->rank,
               ct_coll_name(c->coll), c->count);
        ctx->failed++;
        ctx->broken = 1;
        return;
    }
    if (ctx->verbose) {
        printf("rank %d: %s dtype=%d op=%d count=%zu inplace=%d root=%d\n", ctx->rank,
               ct_coll_name(c->coll), (int)c->dt, (int)c->op, c->count, c->inplace, c->root);
        fflush(stdout);
    }
    st = ct_issue(&run, ctx->comm);
    if (st != HCOMM_SUCCESS)
        ct_call_failed(ctx, &run, "the call", st);
    else if (ct_verify(&run) != 0)
        ctx->failed++;
    else
        ctx->passed++;
    ct_release(&run);
}

/* The 1M+3 count runs for a subset only: float32, int32 and bfloat16, sum. */
static int big_subset(const ct_case_t *c)
{
    int dt_ok = c->dt == HCOMM_FLOAT32 || c->dt == HCOMM_INT32 || c->dt == HCOMM_BFLOAT16;
    return dt_ok && (!ct_coll_reduces(c->coll) || c->op == HCOMM_SUM);
}

static void run_roots(ct_ctx_t *ctx, ct_case_t *c)
{
    int big  = c->count == CT_BIG_COUNT;
    int last = ctx->nranks - 1;

    if (!ct_coll_rooted(c->coll)) {
        c->root = -1;
        ct_run_case(ctx, c);
        return;
    }
    if (!ctx->quick && !big && last != 0) {
        c->root = 0;
        ct_run_case(ctx, c);
    }
    c->root = last;
    ct_run_case(ctx, c);
}

static void run_dtype(ct_ctx_t *ctx, ct_coll_t coll, hcomm_dtype_t dt)
{
    const size_t *counts  = ctx->quick ? quick_counts : full_counts;
    size_t        ncounts = ctx->quick ? sizeof(quick_counts) / sizeof(quick_counts[0])
                                       : sizeof(full_counts) / sizeof(full_counts[0]);
    int           nops    = ct_coll_reduces(coll) ? HCOMM_OP_COUNT : 1;

    for (int op = 0; op < nops; op++) {
        for (size_t k = 0; k < ncounts; k++) {
            for (int inplace = 0; inplace < (coll == CT_SENDRECV ? 1 : 2); inplace++) {
                ct_case_t c = {coll, dt, (hcomm_op_t)op, counts[k], inplace, -1, 0};
                if (c.count > ctx->max_count || (c.count == CT_BIG_COUNT && !big_subset(&c)))
                    continue;
                run_roots(ctx, &c);
            }
        }
    }
}

static void run_matrix(ct_ctx_t *ctx)
{
    for (int coll = 0; coll < CT_NCOLL; coll++) {
        if ((ctx->coll_filter >= 0 && coll != ctx->coll_filter) || (ctx->skip_mask >> coll) & 1)
            continue;
        if (coll == CT_BARRIER) {
            ct_case_t c = {CT_BARRIER, HCOMM_INT8, HCOMM_SUM, 0, 0, -1, 0};
            ct_run_case(ctx, &c);
            continue;
        }
        for (int dt = 0; dt < HCOMM_DTYPE_COUNT; dt++)
            if (ctx->dtype_filter < 0 || dt == ctx->dtype_filter)
                run_dtype(ctx, (ct_coll_t)coll, (hcomm_dtype_t)dt);
    }
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: coll_check [--quick] [--max-count N] [--seed S] [--coll NAME]\n"
               "                  [--dtype NAME] [--skip NAME]... [--no-extras] [--verbose]\n"
               "  --quick        reduced matrix (counts 0 7 1023, root nranks-1 only)\n"
               "  --max-count N  leave out counts above N (the 1M+3 one: --max-count 1023)\n"
               "  --coll, --dtype  only this collective / dtype (seeds do not change)\n"
               "  --skip NAME    leave out a collective (repeatable)\n"
               "  --late-peer S  only: an isend/irecv pair whose peer answers S s late\n"
               "Run under hcomm-run -n N; alone it runs as one rank.\n");
}

static int dtype_from_name(const char *name)
{
    for (int dt = 0; dt < HCOMM_DTYPE_COUNT; dt++) {
        const char *n = hcomm_dtype_name((hcomm_dtype_t)dt);
        if (n != NULL && strcmp(n, name) == 0)
            return dt;
    }
    return -1;
}

static int parse_args(ct_ctx_t *ctx, int argc, char **argv)
{
    static const struct option opts[] = {{"quick", no_argument, NULL, 'q'},
                                         {"max-count", required_argument, NULL, 'm'},
                                         {"seed", required_argument, NULL, 's'},
                                         {"coll", required_argument, NULL, 'c'},
                                         {"dtype", required_argument, NULL, 'd'},
                                         {"no-extras", no_argument, NULL, 'x'},
                                         {"verbose", no_argument, NULL, 'v'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"skip", required_argument, NULL, 'k'},
                                         {"late-peer", required_argument, NULL, 'l'},
                                         {NULL, 0, NULL, 0}};
    int       ch;
    ct_coll_t coll;

    while ((ch = getopt_long(argc, argv, "qm:s:c:d:xvhk:l:", opts, NULL)) != -1) {
        switch (ch) {
        case 'l':
            ctx->late_peer = strtod(optarg, NULL);
            if (ctx->late_peer <= 0)
                return -1;
            break;
        case 'q':
            ctx->quick = 1;
            break;
        case 'm':
            ctx->max_count = strtoull(optarg, NULL, 0);
            break;
        case 's':
            ctx->seed = strtoull(optarg, NULL, 0);
            break;
        case 'c':
            if (ct_coll_from_name(optarg, &coll) != 0)
                return -1;
            ctx->coll_filter = (int)coll;
            break;
        case 'd':
            ctx->dtype_filter = dtype_from_name(optarg);
            if (ctx->dtype_filter < 0)
                return -1;
            break;
        case 'k':
            if (ct_coll_from_name(optarg, &coll) != 0)
                return -1;
            ctx->skip_mask |= 1u << coll;
            break;
        case 'x':
            ctx->extras = 0;
            break;
        case 'v':
            ctx->verbose = 1;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            return -1;
        }
    }
    return optind == argc ? 0 : -1;
}

/* Under a launcher: hcomm_comm_init_env; alone: a one-rank communicator. */
static hcomm_status_t init_comm(ct_ctx_t *ctx)
{
    hcomm_status_t st;

    if (getenv("HCOMM_NRANKS") != NULL || getenv("HCOMM_ROOT") != NULL) {
        st = hcomm_comm_init_env(&ctx->comm);
    } else {
        hcomm_unique_id_t id;
        st = hcomm_get_unique_id(&id);
        if (st == HCOMM_SUCCESS)
            st = hcomm_comm_init(&ctx->comm, 1, &id, 0);
    }
    if (st != HCOMM_SUCCESS)
        return st;
    st = hcomm_comm_rank(ctx->comm, &ctx->rank);
    if (st == HCOMM_SUCCESS)
        st = hcomm_comm_size(ctx->comm, &ctx->nranks);
    return st;
}

static void print_tolerances(const ct_ctx_t *ctx)
{
    printf("coll_check: %d ranks; float results of sum/prod/min/max must be exact "
           "(integer-valued inputs); avg tolerance = nranks * eps * max(|expected|, 4) "
           "with eps float16 2^-11, bfloat16 2^-8, float32 2^-21, float64 2^-50 "
           "(here bfloat16 %g, float16 %g); integers exact\n",
           ctx->nranks, ctx->nranks * ct_tolerance_eps(HCOMM_BFLOAT16),
           ctx->nranks * ct_tolerance_eps(HCOMM_FLOAT16));
}

int main(int argc, char **argv)
{
    ct_ctx_t       ctx = {0};
    hcomm_status_t st;

    ctx.max_count   = (size_t)-1;
    ctx.seed        = 12345;
    ctx.extras      = 1;
    ctx.coll_filter = ctx.dtype_filter = -1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (parse_args(&ctx, argc, argv) != 0) {
        usage(stderr);
        return 2;
    }
    st = init_comm(&ctx);
    if (st != HCOMM_SUCCESS) {
        printf("coll_check: communicator init failed: %s (%d)\n", hcomm_status_name(st), st);
        return 2;
    }
    if (ctx.late_peer > 0) {
        ct_run_late_peer(&ctx);
        ctx.extras = 0;
    } else {
        if (ctx.rank == 0)
            print_tolerances(&ctx);
        run_matrix(&ctx);
    }
    if (ctx.extras && !ctx.broken && (ctx.coll_filter < 0 || ctx.coll_filter == CT_ALLREDUCE) &&
        (ctx.dtype_filter < 0 || ctx.dtype_filter == HCOMM_FLOAT32))
        ct_run_identical(&ctx);
    if (ctx.extras && ctx.coll_filter < 0 && ctx.dtype_filter < 0)
        ct_run_extras(&ctx);
    if (ctx.broken) {
        printf("coll_check: rank %d: stopped after a failed call (communicator unusable)\n",
               ctx.rank);
        st = hcomm_comm_abort(ctx.comm);
    } else {
        st = hcomm_comm_destroy(ctx.comm);
    }
    if (st != HCOMM_SUCCESS) {
        printf("FAIL rank %d: comm %s returned %s\n", ctx.rank, ctx.broken ? "abort" : "destroy",
               hcomm_status_name(st));
        ctx.failed++;
    }
    printf("coll_check: rank %d: %ld cases passed, %ld failed\n", ctx.rank, ctx.passed, ctx.failed);
    return ctx.failed ? 1 : 0;
}
