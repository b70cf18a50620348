/*
 * hcomm_moe.h - mixture-of-experts token dispatch and combine (expert
 * parallelism), in the manner of DeepEP's normal kernels and Megatron's
 * all-to-all token dispatcher, on the CPU.
 *
 * A handle fixes, on one communicator, the placement of E experts on its
 * ranks, the top-k of the router, the hidden size H and the token dtype.
 * Each layer:
 *
 *   hcomm_moe_dispatch(moe, tokens, T, topk_ids, topk_weights, &recv);
 *   ... run local expert l on rows [recv.expert_offset[l], + recv.expert_count[l])
 *       of recv.tokens, writing its outputs in the same rows of expert_out ...
 *   hcomm_moe_combine(moe, expert_out, out);
 *
 * Dispatch sends every token ONCE to each rank that holds at least one of its
 * experts, however many of its experts that rank holds (deduplication: one
 * copy per (token, rank) pair, not per (token, expert) pair), together with
 * its index and, for every top-k slot whose expert lives there, the local
 * expert and the gate weight. The counts are exchanged first (two uint64 per
 * peer, hcomm_alltoall: rows and (row, expert) pairs), then every rank
 * allocates what it will receive, then the rows move in one hcomm_alltoallv. The
 * receiver expands them into groups by local expert: a token with two experts
 * on this rank appears in both groups.
 *
 * Combine sends one row per (token, rank) pair back: the expert side first
 * sums, in float32 and in top-k slot order, weight x expert output over the
 * token's experts it holds, rounds that partial sum to the dtype and sends it;
 * the token's owner adds the partial sums in float32 in rank order and rounds
 * once: out[t] = sum over slots j of topk_weights[t][j] x output of expert
 * topk_ids[t][j] (0 for a token without experts). The order is fixed, so the
 * result is deterministic, bit for bit; with float16 or bfloat16 it carries
 * two roundings (the partial sums and the result).
 *
 * Tokens routed to the caller's own rank are copied locally (alltoallv's self
 * block): they never touch a transport.
 *
 * Calls are collective over the communicator and blocking (no stream, not
 * inside a group); one thread at a time per handle.
 *
 * Copyright (c) 2026 The hcomm authors. SPDX-License-Identifier: BSD-3-Clause
 */
#ifndef HCOMM_MOE_H
#define HCOMM_MOE_H

#include "hcomm.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Largest top-k a handle accepts. */
#define HCOMM_MOE_MAX_TOPK 64

typedef struct hcomm_moe *hcomm_moe_t;

typedef struct {
    /** E >= 1: experts are numbered 0 .. E-1. */
    int num_experts;
    /** E entries: the rank holding expert e. NULL: contiguous, even blocks,
     * expert e on rank e * nranks / E (integer division). A rank's local
     * experts are its experts in ascending id order: local index 0, 1, ... */
    const int32_t *expert_rank;
    /** k in 1 .. HCOMM_MOE_MAX_TOPK: entries per token in topk_ids/weights. */
    int topk;
    /** H >= 1: elements per token row. */
    size_t hidden;
    /** HCOMM_FLOAT32, HCOMM_BFLOAT16 or HCOMM_FLOAT16. */
    hcomm_dtype_t dtype;
} hcomm_moe_config_t;

/*
 * Creates a handle; collective. Every rank must pass the same configuration
 * (checked: an allreduce of its digest); the placement array is copied.
 * Errors on every rank: the local reason where the configuration is invalid
 * (HCOMM_ERR_INVALID_ARG, HCOMM_ERR_INVALID_DTYPE, HCOMM_ERR_INVALID_RANK for
 * a placement outside the communicator), HCOMM_ERR_REMOTE on the others; HCOMM_ERR_INVALID_ARG
 * everywhere when valid configurations differ.
 */
hcomm_status_t hcomm_moe_create(hcomm_comm_t comm, const hcomm_moe_config_t *config,
                                hcomm_moe_t *moe);

/** Frees the handle and its buffers (the layouts it returned). NULL is allowed. */
void hcomm_moe_destroy(hcomm_moe_t moe);

/*
 * What a rank received, grouped by local expert. Every pointer is owned by the
 * handle and valid until the next dispatch on it or its destruction. Rows of
 * one group come in order of source rank, then source token index (then
 * slot, if a token named the same expert twice).
 */
typedef struct {
    int            num_local_experts; /* L: experts this rank holds */
    const int32_t *local_expert_ids;  /* [L]: global id of local expert l */
    const size_t  *expert_count;      /* [L]: rows of local expert l */
    const size_t  *expert_offset;     /* [L]: its first row; groups are contiguous */
    size_t         num_rows;          /* (token, expert) pairs received: sum of counts */
    size_t         num_recv_tokens;   /* (token, rank) pairs received: distinct rows moved */
    const void    *tokens;            /* num_rows x hidden elements of dtype */
    const int32_t *src_rank;          /* [num_rows]: the token's owner */
    const int32_t *src_index;         /* [num_rows]: its index among the owner's tokens */
    const int32_t *topk_slot;         /* [num_rows]: j, the top-k slot that chose this expert */
    const float   *weight;            /* [num_rows]: topk_weights[src_index][j] on the owner */
} hcomm_moe_recv_t;

/*
 * Dispatches this rank's num_tokens tokens (row-major num_tokens x hidden of
 * dtype; num_tokens may be 0, buffers may then be NULL). topk_ids: num_tokens
 * x topk expert ids, -1 = no expert in that slot; topk_weights: num_tokens x
 * topk gate weights. The caller's arrays are read before the call returns. On
 * success *recv describes what this rank received.
 * A bad input (NULL buffer: HCOMM_ERR_NULL_BUFFER; an id outside -1 .. E-1:
 * HCOMM_ERR_INVALID_ARG) is reported through the count exchange: that rank
 * returns its reason, every other rank HCOMM_ERR_REMOTE, no data moves, and
 * the communicator stays usable. A failed dispatch leaves no layout behind
 * (combine then returns HCOMM_ERR_INVALID_USAGE). Running out of memory for
 * what it receives, once the counts are known, makes a rank return
 * HCOMM_ERR_NO_MEMORY and fail the communicator before any row moves: the
 * others get HCOMM_ERR_REMOTE at once (no timeout), and the communicator
 * must then be destroyed or aborted. Inside a group: HCOMM_ERR_INVALID_USAGE.
 */
hcomm_status_t hcomm_moe_dispatch(hcomm_moe_t moe, const void *tokens, size_t num_tokens,
                                  const int32_t *topk_ids, const float *topk_weights,
                                  hcomm_moe_recv_t *recv);

/*
 * Combines after the last successful dispatch. expert_out: that dispatch's
 * num_rows x hidden elements of dtype, row i the output of the expert of row
 * i (it may be recv->tokens itself). out: num_tokens x hidden of dtype (that
 * dispatch's num_tokens), written on return. One row per (token, rank) pair
 * crosses the network. Argument errors are local (as for any collective: the
 * other ranks then wait until HCOMM_TIMEOUT). May be repeated for the same
 * dispatch.
 */
hcomm_status_t hcomm_moe_combine(hcomm_moe_t moe, const void *expert_out, void *out);

/** Counters of the last dispatch and combine on a handle. */
typedef struct {
    size_t   num_tokens;                /* tokens of the last dispatch */
    uint64_t token_expert_pairs;        /* its valid (token, slot) entries, self included */
    uint64_t token_rank_pairs;          /* token copies it dispatched: one per (token, rank) pair */
    uint64_t remote_token_expert_pairs; /* those on other ranks */
    uint64_t remote_token_rank_pairs;   /* copies that crossed a transport */
    uint64_t recv_token_rank_pairs;     /* rows this rank received (= recv.num_recv_tokens) */
    size_t   row_bytes;                 /* bytes of one dispatched copy: 4 + 8 x topk of metadata,
                                           then hidden x dtype size */
    /* Payload bytes handed to transports (hcomm_comm_bytes_sent), measured: */
    uint64_t dispatch_bytes; /* by the last dispatch, its count exchange included */
    uint64_t combine_bytes;  /* by the last combine */
    /* What the same calls would send with one copy per (token, expert) pair:
     * dispatch: the count exchange + remote (token, expert) pairs x (hidden x
     * dtype size + 12 bytes: index, expert, weight); combine: the rows of
     * the layout that came from other ranks x hidden x dtype size (expert
     * outputs sent back one by one, not summed per rank first). Summed over
     * the ranks, each nodedup / measured pair covers the same traffic. */
    uint64_t dispatch_bytes_nodedup;
    uint64_t combine_bytes_nodedup;
} hcomm_moe_stats_t;

/** Fills *stats (all zero before the first dispatch). */
hcomm_status_t hcomm_moe_get_stats(hcomm_moe_t moe, hcomm_moe_stats_t *stats);

#ifdef __cplusplus
}
#endif
#endif /* HCOMM_MOE_H */
