/*
 * hcomm_compress.h - compressed gradient all-reduce with error feedback
 * (docs/compression.md).
 *
 * A compression state belongs to one tensor (one gradient, or one bucket of
 * them) on one communicator: it holds the residuals that error feedback
 * carries from one step to the next, so what a step's compression drops is
 * sent later instead of lost. Create it once, use it every step, reset it when
 * the tensor's meaning changes (a new model), destroy it at the end.
 */
#ifndef HCOMM_COMPRESS_H
#define HCOMM_COMPRESS_H

#include <stddef.h>

#include "hcomm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    HCOMM_COMPRESS_NONE = 0, /* the plain allreduce (AVG), for comparison */
    HCOMM_COMPRESS_ONEBIT,   /* signs + one scale per 2048 values, two phases (1-bit Adam) */
    HCOMM_COMPRESS_TOPK,     /* the ratio x count largest magnitudes, sparse allgather */
    HCOMM_COMPRESS_FP16,     /* float16 cast on the ordinary allreduce */
    HCOMM_COMPRESS_BF16,     /* bfloat16 cast on the ordinary allreduce */
    HCOMM_COMPRESS_COUNT
} hcomm_compress_kind_t;

typedef struct {
    hcomm_compress_kind_t kind;
    double                ratio; /* topk: share of entries sent, 0 < ratio <= 1 */
} hcomm_compress_config_t;

typedef struct hcomm_compress *hcomm_compress_t;

/** Parses "none", "onebit", "topk:RATIO" (e.g. topk:0.01), "fp16" or "bf16". */
hcomm_status_t hcomm_compress_parse(const char *spec, hcomm_compress_config_t *config);

/** The spec of a config, as hcomm_compress_parse reads it back to the same
 * config ("topk:0.01"; the ratio in the fewest digits that give its double). */
const char *hcomm_compress_name(const hcomm_compress_config_t *config, char *buf, size_t len);

/*
 * Creates the state for a tensor of count elements of dtype (float32, float16
 * or bfloat16; residuals are kept in float32) all-reduced on comm. Local: no
 * communication. HCOMM_ERR_INVALID_ARG for a bad ratio or kind,
 * HCOMM_ERR_INVALID_DTYPE for another dtype.
 */
hcomm_status_t hcomm_compress_create(hcomm_comm_t comm, const hcomm_compress_config_t *config,
                                     size_t count, hcomm_dtype_t dtype, hcomm_compress_t *state);

/*
 * Zeroes the residuals (as a new state would have them). Not ordered with
 * calls queued on a stream, which read and write them when they run: call it
 * after hcomm_stream_synchronize of the stream the state's calls use.
 */
hcomm_status_t hcomm_compress_reset(hcomm_compress_t state);

/*
 * Frees the state; NULL is allowed. Calls already queued on a stream keep
 * what they use: the memory goes when the last of them has run.
 */
void hcomm_compress_destroy(hcomm_compress_t state);

/*
 * recvbuf = the average over ranks of the compressed, error-compensated
 * sendbuf, on every rank (all ranks get the same values). count and dtype must
 * be those the state was created with and comm its communicator (otherwise
 * HCOMM_ERR_INVALID_ARG). In place (recvbuf == sendbuf) is allowed, otherwise the
 * buffers must not overlap (HCOMM_ERR_INVALID_ARG). Collective;
 * stream as for hcomm_allreduce. A state serves one call at a time: calls
 * queued on one stream run in turn; do not share a state between streams.
 * Ranks whose states disagree (another count or ratio) may fail in a local
 * step, after the collectives: that fails comm on the rank that saw it
 * (HCOMM_ERR_PROTOCOL; on a stream, at hcomm_stream_synchronize and
 * hcomm_comm_get_error), and the others at their next operation with it;
 * their own call may have returned success. After
 * a failed call the residuals hold that call's input: reset the state before
 * a retry.
 */
hcomm_status_t hcomm_allreduce_compressed(const void *sendbuf, void *recvbuf, size_t count,
                                          hcomm_dtype_t dtype, hcomm_compress_t state,
                                          hcomm_comm_t comm, hcomm_stream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* HCOMM_COMPRESS_H */
