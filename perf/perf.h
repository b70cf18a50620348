/*
 * perf.h - hcomm-perf, an nccl-tests style benchmark written against the public
 * API only: arguments, collectives, data checks and the timing loop.
 *
 * Copyright (c) 2026 The hcomm authors. SPDX-License-Identifier: BSD-3-Clause
 */
#ifndef HCOMM_PERF_H
#define HCOMM_PERF_H

#include <stddef.h>
#include <stdint.h>

#include "hcomm.h"
#include "hcomm_compress.h"

#define PERF_TAG "hcomm-perf"
#define PERF_ALIGN 64
/* "no reduction": the op column shows "none" */
#define PERF_OP_NONE HCOMM_OP_COUNT

typedef enum {
    PERF_ALL_REDUCE = 0,
    PERF_ALL_GATHER,
    PERF_REDUCE_SCATTER,
    PERF_BROADCAST,
    PERF_REDUCE,
    PERF_ALLTOALL,
    PERF_SENDRECV,
    PERF_ALLTOALLV,    /* random per-peer counts from --seed (perf_coll.c) */
    PERF_MOE_DISPATCH, /* hcomm_moe.h, perf_moe.c */
    PERF_MOE_COMBINE,
    PERF_COLL_COUNT
} perf_coll_t;

typedef struct {
    perf_coll_t   coll;
    int           fork_ranks; /* --ranks: processes to fork when run alone */
    int                     ranks_given, per_proc_given;
    int                     per_proc;   /* nccl-tests' -t x -g: ranks one process would drive */
    size_t        minbytes;   /* -b */
    size_t        maxbytes;   /* -e */
    size_t        stepbytes;  /* -i */
    size_t        stepfactor; /* -f; 1: add stepbytes */
    int           iters;      /* -n */
    int           warmup;     /* -w */
    int           check;      /* -c */
    int           root;       /* -r */
    int           blocking;   /* -z */
    int           average;    /* -a: 0 rank 0, 1 avg, 2 min, 3 max */
    int           agg;        /* -m */
    int           cycles;     /* -N; 0 = until killed */
    int           ndtypes;
    hcomm_dtype_t dtypes[HCOMM_DTYPE_COUNT];
    int           nops;
    int           ops[HCOMM_OP_COUNT]; /* hcomm_op_t, or PERF_OP_NONE */
    const char   *tune_file;  /* --tune[=FILE]: sweep algorithms, write a tuning file */
    int           compressed; /* -C given: all_reduce through hcomm_allreduce_compressed */
    hcomm_compress_config_t compress;
    int           dtype_given; /* -d given (MoE defaults to bfloat16) */
    uint64_t      seed;        /* --seed: alltoallv counts, MoE routing */
    size_t        moe_tokens;  /* --tokens: per rank */
    size_t        moe_hidden;  /* --hidden */
    int           moe_topk;    /* --topk */
    int           moe_experts; /* --experts, spread evenly over the ranks */
} perf_args_t;

/* One rank's benchmark state. */
typedef struct {
    const perf_args_t *args;
    hcomm_comm_t       comm;
    int                rank;
    int                nranks;
    void              *sbuf;
    void              *rbuf;
    size_t             bufbytes;
    hcomm_dtype_t      dtype; /* current */
    int                op;    /* current: hcomm_op_t or PERF_OP_NONE */
    uint64_t           wrong_total;
    hcomm_compress_t   cstate; /* -C: the state of the current size */
    double             bw_sum;
    int                bw_count;
    size_t            *a2av; /* alltoallv of the current size: 6 x nranks, perf_coll.c */
} perf_ctx_t;

/* Element counts of one size: param is the count argument of the call. */
typedef struct {
    size_t param;
    size_t send_elems;
    size_t recv_elems;
} perf_counts_t;

/* perf_args.c: returns 0, or the exit status to use (0 after --help, 2 on bad usage). */
int perf_args_parse(int argc, char **argv, perf_args_t *a, int *done);

/* hcomm-perf --tune: reruns this program once per candidate algorithm and chunk
 * size, keeps the fastest per size, writes a->tune_file. */
int perf_tune(int argc, char **argv, const perf_args_t *a);

/* perf_coll.c */
const char *perf_coll_name(perf_coll_t coll);
int         perf_coll_has_op(perf_coll_t coll);
int         perf_coll_has_root(perf_coll_t coll);
int         perf_coll_has_inplace(perf_coll_t coll);
double      perf_coll_bus_factor(perf_coll_t coll, int nranks);
/* Counts of the largest operation that fits in bytes per buffer. */
void perf_coll_counts(perf_coll_t coll, size_t bytes, size_t wsize, int nranks, perf_counts_t *c);
/* Counts of the operation whose count argument is param. */
void perf_coll_elems(perf_coll_t coll, size_t param, int nranks, perf_counts_t *c);
/* Send and receive pointers of the current collective, out of place or in place. */
void perf_coll_buffers(const perf_ctx_t *ctx, size_t param, int inplace, void **sb, void **rb);
/* alltoallv: the counts of a size; 0 or -1 (out of memory). */
int perf_coll_a2av_prepare(perf_ctx_t *ctx, size_t param);
/* Element offset, in rank p's send buffer, of the block p sends this rank. */
size_t perf_coll_a2av_src_off(const perf_ctx_t *ctx, int p);
/* One operation; blocking when req is NULL (or always, for sendrecv: *req stays NULL). */
hcomm_status_t perf_coll_start(const perf_ctx_t *ctx, size_t param, int inplace,
                               hcomm_request_t *req);

/* perf_check.c */
void     perf_check_fill(const perf_ctx_t *ctx, size_t param, int inplace);
uint64_t perf_check_count(const perf_ctx_t *ctx, size_t param, int inplace);
void     perf_check_fill_zero(const perf_ctx_t *ctx);
/* Element i of a float16, bfloat16 or float32 buffer, and a store rounding
 * to nearest even (the checks of perf_moe.c). */
double perf_check_load_float(const void *buf, hcomm_dtype_t dt, size_t i);
void   perf_check_store_float(void *buf, hcomm_dtype_t dt, size_t i, double v);

/* perf_compress.c (-C): a state per size, one call, the plain allreduce's
 * bytes for the ratio, and a check against the serial model. */
hcomm_status_t perf_compress_prepare(perf_ctx_t *ctx, size_t count);
hcomm_status_t perf_compress_start(const perf_ctx_t *ctx, size_t count, int inplace);
void           perf_compress_fill(const perf_ctx_t *ctx, size_t count, int inplace);
hcomm_status_t perf_compress_plain_bytes(perf_ctx_t *ctx, size_t count, uint64_t *bytes);
hcomm_status_t perf_compress_check(perf_ctx_t *ctx, size_t count, int inplace, uint64_t *wrong);

/* perf_moe.c: moe_dispatch / moe_combine, run instead of the size sweep. */
int perf_moe_run(perf_ctx_t *ctx);

/* perf_bench.c: the whole run on one rank; returns the rank's exit status. */
int perf_bench_run(perf_ctx_t *ctx);
/* Reports a failed call on stderr, aborts the communicator; returns 1. */
int perf_fail(perf_ctx_t *ctx, const char *what, hcomm_status_t st);

#endif /* HCOMM_PERF_H */
