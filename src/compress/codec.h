/* codec.h - gradient codecs with error feedback: their kernels (codec_onebit.c,
 * codec_topk.c, and base/cast.h for the casts), and the table that makes each
 * a compressed allreduce (codec_table.c). Every
 * encoder works on float32 values v = in + residual and leaves in residual
 * what the decoded message misses (v - decode(message)), so nothing a step
 * drops is lost: it is sent again, added to a later step's input. Where that
 * difference is not finite (v or a onebit scale was inf or NaN, or a cast
 * overflowed), every codec stores 0 instead (topk for a non-finite v it did
 * not send): one overflowing step, which loss scaling skips, must not poison
 * the residual for good.
 *
 * Wire formats (little-endian, as the host):
 *   onebit: per block of HC_ONEBIT_BLOCK values, one float32 scale (the mean
 *           absolute value of the block's v) followed by the block's sign bits,
 *           8 per byte, bit j of byte i = value 8i+j, 1 = negative; zero encodes
 *           as +1 (bit 0), and so does NaN (v < 0 is false). A value decodes
 *           as +scale or -scale. The last block may be short (its bit bytes
 *           are ceil(len/8)).
 *   topk:   k pairs {uint32 index, float32 value}, indexes ascending.
 *   fp16 / bf16: one uint16 per value (in the codec table: the value over the
 *           number of ranks, so the wire's sum is the average), rounded to
 *           nearest even. */
#ifndef HC_COMPRESS_CODEC_H
#define HC_COMPRESS_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "base/cast.h" /* the fp16 / bf16 codecs */
#include "hcomm_compress.h"

/* Values per onebit scale: 8 KiB of float32 input, so one scale adds 4 bytes
 * to 256 bytes of signs (31.5x smaller than float32) and a block stays in L1. */
#define HC_ONEBIT_BLOCK 2048

typedef struct hc_topk_pair {
    uint32_t index;
    float    value;
} hc_topk_pair_t;

/* Bytes of a onebit message of n values. */
size_t hc_onebit_bytes(size_t n);

/* Encodes v = in[i] + residual[i] (residual NULL: zero, and not updated) into
 * out (hc_onebit_bytes(n) bytes); residual becomes v - decoded. in and
 * residual must not overlap. */
void hc_onebit_encode(const float *in, float *residual, size_t n, uint8_t *out);

/* out[i] = decoded value i (add = 0) or out[i] += decoded value i (add = 1). */
void hc_onebit_decode(const uint8_t *msg, size_t n, float *out, int add);

/* Selects the k entries of v = in + residual with the largest magnitude
 * (exactly k, 0 <= k <= n; ties broken by lower index; NaN counts as larger
 * than inf), writes them to out with indexes ascending, and sets residual to v
 * with those k entries and every non-finite one zeroed. scratch: at least n
 * floats and n uint32 of work space (hc_topk_scratch_bytes), 8-byte aligned
 * (malloc's is). Expected O(n); deterministic. Returns 0, or -1 (nothing
 * written) when k > n or n > UINT32_MAX. */
size_t hc_topk_scratch_bytes(size_t n);
int    hc_topk_encode(const float *in, float *residual, size_t n, size_t k, void *scratch,
                      hc_topk_pair_t *out);

/* out[index] += value for each pair (out zeroed by the caller first where a
 * plain decode is wanted). Pairs with index >= n are ignored and counted in
 * the return value (a corrupt message), 0 otherwise. */
size_t hc_topk_decode_add(const hc_topk_pair_t *pairs, size_t k, float *out, size_t n);

/* ---- the codec table (codec_table.c) ---- */

struct hcomm_compress;
struct hc_compress_call;
struct hc_compress_model;

/* A compressed allreduce call is a short program: the codec's local steps
 * (encode, decode) between collectives on the state's message buffers. */
typedef enum {
    HC_CSTEP_LOCAL = 0, /* the codec's fn */
    HC_CSTEP_ALLTOALL,  /* msg_bytes of sendbuf to every rank, into recvbuf */
    HC_CSTEP_ALLGATHER, /* msg_bytes of sendbuf from every rank, into recvbuf */
    HC_CSTEP_ALLREDUCE, /* count elements of the codec's wire_dtype in sendbuf, summed */
    HC_CSTEP_AVERAGE,   /* the plain allreduce (avg) of the caller's buffers */
    HC_CSTEP_END
} hc_cstep_kind_t;

typedef struct hc_cstep {
    hc_cstep_kind_t kind;
    hcomm_status_t (*fn)(struct hc_compress_call *call); /* HC_CSTEP_LOCAL */
} hc_cstep_t;

/* What a state for count elements on nranks ranks holds, in bytes. */
typedef struct hc_codec_sizes {
    size_t msg_bytes;  /* one rank's message in an alltoall or allgather step */
    size_t send_bytes; /* the state's sendbuf, recvbuf and scratch */
    size_t recv_bytes;
    size_t scratch_bytes;
    size_t k; /* topk: pairs each rank sends */
} hc_codec_sizes_t;

typedef struct hc_codec {
    const char           *name; /* as hcomm_compress_parse reads it */
    hcomm_compress_kind_t kind;
    hcomm_dtype_t         wire_dtype; /* what an HC_CSTEP_ALLREDUCE sums */
    const hc_cstep_t     *steps;      /* the call's program, HC_CSTEP_END last */
    void (*size)(const hcomm_compress_config_t *cfg, size_t count, int nranks,
                 hc_codec_sizes_t *out);
    /* The call computed serially for every rank of m at once (compress_model.c). */
    hcomm_status_t (*model)(const struct hc_compress_model *m, const float *const *in,
                            float *out);
} hc_codec_t;

/* The codec of kind, or NULL when kind is not one. */
const hc_codec_t *hc_codec_of(hcomm_compress_kind_t kind);

#endif
