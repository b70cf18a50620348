/*
 * perf_args.c - hcomm-perf's command line, with nccl-tests' flags and meanings.
 *
 * Copyright (c) 2026 The hcomm authors. SPDX-License-Identifier: BSD-3-Clause
 */
#include "perf.h"
#include "perf_size.h"

#include "hcomm_moe.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PERF_MAX_FORK_RANKS 1024
/* codes of the long-only options */
enum { OPT_SEED = 1000, OPT_TOKENS, OPT_HIDDEN, OPT_TOPK, OPT_EXPERTS };

static void usage(FILE *f)
{
    fprintf(
        f,
        "Usage: hcomm-perf COLL [--ranks N] [options]\n"
        "COLL: all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv,\n"
        "      alltoallv, moe_dispatch, moe_combine\n"
        "Flags as nccl-tests:\n"
        "  -b, --minbytes SIZE      smallest size (default 8; K, M, G suffixes: 1024-based)\n"
        "  -e, --maxbytes SIZE      largest size (default 64M)\n"
        "  -i, --stepbytes SIZE     increment between sizes when the factor is 1 (default 1M);\n"
        "                           -i without -f implies -f 1\n"
        "  -f, --stepfactor F       multiply the size by F at each step (default 2)\n"
        "  -n, --iters N            timed iterations per size (default 20)\n"
        "  -w, --warmup_iters N     untimed iterations per size (default 5)\n"
        "  -c, --check 0|1          check the results: one extra run per size (default 1)\n"
        "  -o, --op OP              sum, prod, min, max, avg or all (default sum)\n"
        "  -d, --datatype TYPE      int8, uint8, int32, uint32, int64, uint64, half|float16,\n"
        "                           bfloat16, float|float32, double|float64 or all (default "
        "float)\n"
        "  -r, --root R             root rank of broadcast and reduce (default 0)\n"
        "  -z, --blocking 0|1       1: blocking calls; 0: nonblocking calls completed with\n"
        "                           hcomm_wait, several in flight (default 0)\n"
        "  -a, --average 0|1|2|3    time reported: 0 rank 0's, 1 average, 2 minimum, 3 maximum\n"
        "                           over the ranks (default 1)\n"
        "  -m, --agg_iters N        operations per timed iteration, aggregated in one\n"
        "                           hcomm_group_start/end (default 1)\n"
        "  -N, --run_cycles N       repeat the whole sweep N times; 0: until killed (default 1)\n"
        "  -t, --nthreads N         nccl-tests' threads per process and GPUs per thread: here\n"
        "  -g, --ngpus N            each rank is a process, so started alone hcomm-perf forks\n"
        "                           t x g ranks (as --ranks); under a launcher both must be 1\n"
        "  -p, --parallel_init 0|1  accepted; ranks always initialise in parallel here\n"
        "Own options:\n"
        "      --ranks N            ranks to fork when started alone (default 2)\n"
        "      --params             list every HCOMM_* variable: value, default, meaning\n"
        "  -C, --compress SPEC      all_reduce only: hcomm_allreduce_compressed with onebit,\n"
        "                           topk:RATIO, fp16, bf16 or none (float input, blocking);\n"
        "                           adds the bytes each rank sent per call and the ratio to\n"
        "                           a plain float allreduce; checks against a serial model\n"
        "      --tune[=FILE]        run the sweep once per algorithm and chunk size, keep the\n"
        "                           fastest per size and write FILE (default hcomm_tuning.txt);\n"
        "                           use it with HCOMM_TUNING_FILE=FILE (alone mode only)\n"
        "      --seed N             alltoallv counts and MoE routing come from N (default 1)\n"
        "      --trace FILE         write a Chrome trace of every operation, one file per\n"
        "                           rank (HCOMM_TRACE_FILE: %%r rank, %%h host, %%p pid; without\n"
        "                           %%r the rank goes before .json); open it in Perfetto\n"
        "alltoallv: blocking, -m 1; each rank sends exactly size bytes, cut into random\n"
        "  uneven blocks (zeros too) arranged so that each rank also receives size bytes;\n"
        "  the size column is the bytes each rank sends; busbw = algbw x (n-1)/n.\n"
        "moe_dispatch, moe_combine (hcomm_moe.h): one row per -d type (float, bfloat16, half;\n"
        "  default bfloat16) instead of the size sweep; blocking, -m 1. Each rank routes\n"
        "  --tokens T (default 1024) of --hidden H (default 4096) elements to --topk K\n"
        "  (default 8) distinct experts drawn at random from --experts E (default 64),\n"
        "  spread evenly over the ranks. GB/s as DeepEP: token bytes a rank received\n"
        "  (dispatch) or sent back (combine), one copy per (token, rank) pair, / time,\n"
        "  averaged over the ranks; dedup = 1 - (token, rank) / (token, expert) pairs; the\n"
        "  bytes all ranks handed to transports per call, measured, and what one copy per\n"
        "  (token, expert) pair would have needed. combine times hcomm_moe_combine after\n"
        "  one dispatch, with identity experts.\n"
        "  -h, --help               show this help\n"
        "Process model: under hcomm-run, MPICH's mpirun, srun or torchrun the ranks are the\n"
        "launched processes (hcomm_comm_init_env, docs/launchers.md); under Open MPI's mpirun,\n"
        "MPI bootstraps the communicator when hcomm-perf was built with MPI (else PMIx does);\n"
        "alone, it forks --ranks processes on this host.\n"
        "Columns: size (B) and count (elements) as nccl-tests (all_gather, reduce_scatter and\n"
        "alltoall: size is the whole buffer, count the per-rank count), then time (us), algbw\n"
        "= size / time and busbw (GB/s) and #wrong elements, out of place and in place.\n"
        "sendrecv has no in-place run. Exit status: 0 ok, 1 wrong results or a failed call,\n"
        "2 bad usage.\n");
}

static int parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    long  v;

    errno = 0;
    v     = strtol(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static const struct {
    const char   *name;
    hcomm_dtype_t dt;
} dtype_names[] = {
    {"int8", HCOMM_INT8},         {"uint8", HCOMM_UINT8},     {"int32", HCOMM_INT32},
    {"int", HCOMM_INT32},         {"uint32", HCOMM_UINT32},   {"int64", HCOMM_INT64},
    {"uint64", HCOMM_UINT64},     {"half", HCOMM_FLOAT16},    {"float16", HCOMM_FLOAT16},
    {"bfloat16", HCOMM_BFLOAT16}, {"float", HCOMM_FLOAT32},   {"float32", HCOMM_FLOAT32},
    {"double", HCOMM_FLOAT64},    {"float64", HCOMM_FLOAT64},
};

static int parse_dtype(const char *s, perf_args_t *a)
{
    if (strcasecmp(s, "all") == 0) {
        a->ndtypes = HCOMM_DTYPE_COUNT;
        for (int i = 0; i < HCOMM_DTYPE_COUNT; i++)
            a->dtypes[i] = (hcomm_dtype_t)i;
        return 0;
    }
    for (size_t i = 0; i < sizeof(dtype_names) / sizeof(dtype_names[0]); i++) {
        if (strcasecmp(s, dtype_names[i].name) == 0) {
            a->ndtypes   = 1;
            a->dtypes[0] = dtype_names[i].dt;
            return 0;
        }
    }
    return -1;
}

static int parse_op(const char *s, perf_args_t *a)
{
    static const hcomm_op_t  all[]   = {HCOMM_SUM, HCOMM_PROD, HCOMM_MAX, HCOMM_MIN, HCOMM_AVG};
    static const char *const names[HCOMM_OP_COUNT] = {[HCOMM_SUM] = "sum", [HCOMM_PROD] = "prod",
                                                      [HCOMM_MIN] = "min", [HCOMM_MAX] = "max",
                                                      [HCOMM_AVG] = "avg"};

    if (strcasecmp(s, "all") == 0) {
        a->nops = (int)(sizeof(all) / sizeof(all[0]));
        for (int i = 0; i < a->nops; i++)
            a->ops[i] = all[i];
        return 0;
    }
    for (int i = 0; i < HCOMM_OP_COUNT; i++) {
        if (strcasecmp(s, names[i]) == 0) {
            a->nops   = 1;
            a->ops[0] = i; /* names[] is indexed by hcomm_op_t */
            return 0;
        }
    }
    return -1;
}

static int parse_coll(const char *s, perf_coll_t *coll)
{
    for (int c = 0; c < PERF_COLL_COUNT; c++) {
        if (strcmp(s, perf_coll_name((perf_coll_t)c)) == 0) {
            *coll = (perf_coll_t)c;
            return 0;
        }
    }
    return -1;
}

static void set_defaults(perf_args_t *a)
{
    memset(a, 0, sizeof(*a));
    a->fork_ranks = 2;
    a->per_proc    = 1;
    a->minbytes   = 8;
    a->maxbytes   = (size_t)64 << 20;
    a->stepbytes  = (size_t)1 << 20;
    a->stepfactor = 2;
    a->iters      = 20;
    a->warmup     = 5;
    a->check      = 1;
    a->blocking   = 0;
    a->average    = 1;
    a->agg        = 1;
    a->cycles     = 1;
    a->ndtypes    = 1;
    a->dtypes[0]  = HCOMM_FLOAT32;
    a->nops       = 1;
    a->ops[0]     = HCOMM_SUM;
    a->seed        = 1;
    a->moe_tokens  = 1024;
    a->moe_hidden  = 4096;
    a->moe_topk    = 8;
    a->moe_experts = 64;
}

/* The long-only options; 0 or -1 (bad value). */
static int apply_moe_opt(int c, const char *v, perf_args_t *a)
{
    size_t z;

    switch (c) {
    case OPT_SEED:
        if (perf_parse_size(v, &z) != 0)
            return -1;
        a->seed = (uint64_t)z;
        return 0;
    case OPT_TOKENS:
        return perf_parse_size(v, &a->moe_tokens) != 0 || a->moe_tokens == 0 ? -1 : 0;
    case OPT_HIDDEN:
        return perf_parse_size(v, &a->moe_hidden) != 0 || a->moe_hidden == 0 ? -1 : 0;
    case OPT_TOPK:
        return parse_int(v, 1, HCOMM_MOE_MAX_TOPK, &a->moe_topk);
    case OPT_EXPERTS:
        return parse_int(v, 1, 1 << 20, &a->moe_experts);
    default:
        return -1;
    }
}

/* Applies one option; returns 0 or -1 (bad value). */
static int apply_opt(int c, const char *v, perf_args_t *a, int *factor_given)
{
    int f;

    switch (c) {
    case 'b':
        return perf_parse_size(v, &a->minbytes);
    case 'e':
        return perf_parse_size(v, &a->maxbytes);
    case 'i':
        return perf_parse_size(v, &a->stepbytes) != 0 || a->stepbytes == 0 ? -1 : 0;
    case 'f':
        *factor_given = 1;
        if (parse_int(v, 1, 1 << 20, &f) != 0)
            return -1;
        a->stepfactor = (size_t)f;
        return 0;
    case 'n':
        return parse_int(v, 1, 1 << 30, &a->iters);
    case 'w':
        return parse_int(v, 0, 1 << 30, &a->warmup);
    case 'c':
        return parse_int(v, 0, 1, &a->check);
    case 'o':
        return parse_op(v, a);
    case 'd':
        a->dtype_given = 1;
        return parse_dtype(v, a);
    case 'r':
        return parse_int(v, 0, 1 << 30, &a->root);
    case 'z':
        return parse_int(v, 0, 1, &a->blocking);
    case 'a':
        return parse_int(v, 0, 3, &a->average);
    case 'm':
        return parse_int(v, 1, 1 << 20, &a->agg);
    case 'N':
        return parse_int(v, 0, 1 << 30, &a->cycles);
    case 'R':
        a->ranks_given = 1;
        return parse_int(v, 1, PERF_MAX_FORK_RANKS, &a->fork_ranks);
    case 't':
    case 'g': {
        int n;
        if (parse_int(v, 1, PERF_MAX_FORK_RANKS, &n) != 0 || n > PERF_MAX_FORK_RANKS / a->per_proc)
            return -1;
        a->per_proc *= n;
        a->per_proc_given = 1;
        return 0;
    }
    case 'p': /* parallel init: each rank is a process here, so it always is */
        return parse_int(v, 0, 1, &f);
    case 'C':
        a->compressed = 1;
        return hcomm_compress_parse(v, &a->compress) == HCOMM_SUCCESS ? 0 : -1;
    default:
        return apply_moe_opt(c, v, a);
    }
}

static int is_moe(perf_coll_t c)
{
    return c == PERF_MOE_DISPATCH || c == PERF_MOE_COMBINE;
}

/* alltoallv and MoE: blocking calls outside groups; MoE: float types. */
static int check_coll_limits(perf_args_t *a)
{
    if (a->coll != PERF_ALLTOALLV && !is_moe(a->coll))
        return 0;
    if (a->agg != 1) {
        fprintf(stderr, PERF_TAG ": %s: -m 1 only (not allowed inside a group)\n",
                perf_coll_name(a->coll));
        return -1;
    }
    a->blocking = 1; /* no nonblocking variant */
    if (!is_moe(a->coll))
        return 0;
    if (!a->dtype_given) {
        a->ndtypes   = 1;
        a->dtypes[0] = HCOMM_BFLOAT16;
    }
    if (a->ndtypes == HCOMM_DTYPE_COUNT) { /* -d all: the three token types */
        a->ndtypes   = 3;
        a->dtypes[0] = HCOMM_FLOAT32;
        a->dtypes[1] = HCOMM_BFLOAT16;
        a->dtypes[2] = HCOMM_FLOAT16;
    }
    for (int d = 0; d < a->ndtypes; d++) {
        if (a->dtypes[d] != HCOMM_FLOAT32 && a->dtypes[d] != HCOMM_BFLOAT16 &&
            a->dtypes[d] != HCOMM_FLOAT16) {
            fprintf(stderr, PERF_TAG ": %s: -d float, bfloat16, half or all\n",
                    perf_coll_name(a->coll));
            return -1;
        }
    }
    if (a->moe_topk > a->moe_experts) {
        fprintf(stderr, PERF_TAG ": --topk %d is more than --experts %d\n", a->moe_topk,
                a->moe_experts);
        return -1;
    }
    /* the largest buffer a rank allocates: tokens x hidden x 4 bytes, and each
     * of its tokens routed to topk experts, 4 bytes each (ids, weights) */
    size_t rows = a->moe_tokens, cols = a->moe_hidden, k = (size_t)a->moe_topk;
    if (rows > SIZE_MAX / 4 / cols || rows > SIZE_MAX / 4 / (k ? k : 1)) {
        fprintf(stderr, PERF_TAG ": --tokens %zu x --hidden %zu (or x --topk %d) is too large\n",
                rows, cols, a->moe_topk);
        return -1;
    }
    return 0;
}

static int finish(int argc, char **argv, perf_args_t *a, int step_given, int factor_given)
{
    if (optind != argc - 1) {
        fprintf(stderr, PERF_TAG ": %s\nUsage: hcomm-perf COLL [--ranks N] [options]\n",
                optind >= argc ? "no collective given" : "more than one collective given");
        return 2;
    }
    if (parse_coll(argv[optind], &a->coll) != 0) {
        fprintf(stderr, PERF_TAG ": unknown collective '%s'; try 'hcomm-perf --help'\n",
                argv[optind]);
        return 2;
    }
    if (step_given && !factor_given)
        a->stepfactor = 1;
    if (a->per_proc_given) {
        if (a->ranks_given && a->per_proc != a->fork_ranks) {
            fprintf(stderr, PERF_TAG ": -t x -g (%d ranks) disagrees with --ranks %d\n",
                    a->per_proc, a->fork_ranks);
            return 2;
        }
        a->fork_ranks = a->per_proc;
    }
    if (a->minbytes > a->maxbytes) {
        fprintf(stderr, PERF_TAG ": -b %zu is larger than -e %zu\n", a->minbytes, a->maxbytes);
        return 2;
    }
    if (a->stepfactor == 1 && a->stepbytes == 0) {
        fprintf(stderr, PERF_TAG ": -i must be positive when -f is 1\n");
        return 2;
    }
    if (a->compressed && (a->coll != PERF_ALL_REDUCE || a->ndtypes != 1 ||
                          a->dtypes[0] != HCOMM_FLOAT32 || a->agg != 1)) {
        fprintf(stderr, PERF_TAG ": -C works on all_reduce of float (-d float), -m 1\n");
        return 2;
    }
    if (a->tune_file != NULL && (a->ndtypes != 1 || a->nops != 1 || a->cycles != 1)) {
        /* one sweep of sizes per candidate: that is what a tuning line holds */
        fprintf(stderr, PERF_TAG ": --tune takes one datatype, one op and -N 1\n");
        return 2;
    }
    if (check_coll_limits(a) != 0)
        return 2;
    if (a->compressed) { /* the call averages: show it */
        a->nops   = 1;
        a->ops[0] = HCOMM_AVG;
        a->blocking = 1;
    }
    if (!perf_coll_has_op(a->coll)) {
        a->nops   = 1;
        a->ops[0] = PERF_OP_NONE;
    }
    return 0;
}

int perf_args_parse(int argc, char **argv, perf_args_t *a, int *done)
{
    static const struct option longopts[] = {
        {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},
        {"stepbytes", required_argument, NULL, 'i'},
        {"stepfactor", required_argument, NULL, 'f'},
        {"iters", required_argument, NULL, 'n'},
        {"warmup_iters", required_argument, NULL, 'w'},
        {"check", required_argument, NULL, 'c'},
        {"op", required_argument, NULL, 'o'},
        {"datatype", required_argument, NULL, 'd'},
        {"root", required_argument, NULL, 'r'},
        {"blocking", required_argument, NULL, 'z'},
        {"average", required_argument, NULL, 'a'},
        {"agg_iters", required_argument, NULL, 'm'},
        {"run_cycles", required_argument, NULL, 'N'},
        {"ranks", required_argument, NULL, 'R'},
        {"nthreads", required_argument, NULL, 't'},
        {"ngpus", required_argument, NULL, 'g'},
        {"parallel_init", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {"params", no_argument, NULL, 'P'},
        {"tune", optional_argument, NULL, 'T'},
        {"compress", required_argument, NULL, 'C'},
        {"seed", required_argument, NULL, OPT_SEED},
        {"trace", required_argument, NULL, 'X'},
        {"tokens", required_argument, NULL, OPT_TOKENS},
        {"hidden", required_argument, NULL, OPT_HIDDEN},
        {"topk", required_argument, NULL, OPT_TOPK},
        {"experts", required_argument, NULL, OPT_EXPERTS},
        {NULL, 0, NULL, 0},
    };
    int c, idx, step_given = 0, factor_given = 0;

    set_defaults(a);
    *done = 0;
    while ((c = getopt_long(argc, argv, "b:e:i:f:n:w:c:o:d:r:z:a:m:N:C:t:g:p:h", longopts, &idx)) !=
           -1) {
        if (c == 'h' || c == 'P') {
            if (c == 'h')
                usage(stdout);
            else
                hcomm_params_print(stdout);
            *done = 1;
            return 0;
        }
        if (c == '?' || c == ':') {
            fprintf(stderr, PERF_TAG ": try 'hcomm-perf --help'\n");
            return 2;
        }
        if (c == 'T') {
            a->tune_file = optarg != NULL ? optarg : "hcomm_tuning.txt";
            continue;
        }
        if (c == 'X') { /* read when the first communicator is made; forked ranks inherit it */
            if (optarg[0] == '\0' || setenv("HCOMM_TRACE_FILE", optarg, 1) != 0) {
                fprintf(stderr, PERF_TAG ": bad value '%s' for --trace\n", optarg);
                return 2;
            }
            continue;
        }
        step_given |= c == 'i';
        if (apply_opt(c, optarg, a, &factor_given) != 0) {
            char name[16];

            if (c >= OPT_SEED)
                snprintf(name, sizeof(name), "--%s", longopts[idx].name);
            else
                snprintf(name, sizeof(name), c == 'R' ? "--ranks" : "-%c", c);
            fprintf(stderr, PERF_TAG ": bad value '%s' for %s; try 'hcomm-perf --help'\n", optarg,
                    name);
            return 2;
        }
    }
    return finish(argc, argv, a, step_given, factor_given);
}
