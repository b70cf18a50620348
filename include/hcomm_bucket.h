/*
 * hcomm_bucket.h - gradient buckets: all-reduce a model's gradients while the
 * backward pass still produces them, as PyTorch DDP and Horovod do
 * (docs/streams.md).
 *
 * Register the gradient tensors once, in the order the backward pass usually
 * produces them (last layer first). They are cut, in that order, into buckets:
 * the first of at most 1 MiB (so communication starts early; HCOMM_BUCKET_BYTES
 * when smaller), the others of at most HCOMM_BUCKET_BYTES (default 25 MiB); a
 * tensor larger than a bucket gets one of its own (empty tensors may join it).
 * Each step, mark every tensor ready as soon as its gradient is final: it is
 * packed into its bucket's fusion buffer at once, and a bucket whose tensors
 * are all ready is all-reduced (average over ranks) on the stream given at
 * creation, buckets always in bucket order, so every rank issues the same
 * operations in the same order whatever order its tensors became ready in.
 * hcomm_buckets_wait returns when every result is unpacked into its tensor.
 */
#ifndef HCOMM_BUCKET_H
#define HCOMM_BUCKET_H

#include "hcomm.h"
#include "hcomm_compress.h"
#include "hcomm_stream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hcomm_buckets *hcomm_buckets_t;

/*
 * Registers ntensors tensors (tensors[i]: counts[i] elements of dtype) on
 * comm. The buckets' allreduces run on stream (required; the caller's thread
 * only packs). compress: NULL or kind NONE for the plain average, else each
 * bucket is all-reduced with hcomm_allreduce_compressed through a compression
 * state of its own (float32, float16 or bfloat16 tensors). A tensor belongs
 * to the buckets from its hcomm_buckets_ready to hcomm_buckets_wait (its
 * result is written into it in between). Local: no communication.
 */
hcomm_status_t hcomm_buckets_create(hcomm_comm_t comm, int ntensors, void *const *tensors,
                                    const size_t *counts, hcomm_dtype_t dtype,
                                    const hcomm_compress_config_t *compress,
                                    hcomm_stream_t stream, hcomm_buckets_t *buckets);

/** Tensor index's gradient is final for this step: packs and launches every
 * bucket that became complete (in bucket order). Marking one twice in a step
 * is HCOMM_ERR_INVALID_USAGE. */
hcomm_status_t hcomm_buckets_ready(hcomm_buckets_t buckets, int index);

/** Waits until every bucket of the step is all-reduced and unpacked into its
 * tensors (all tensors must have been marked ready), then starts a new step.
 * Returns the first error of the step. */
hcomm_status_t hcomm_buckets_wait(hcomm_buckets_t buckets);

/** Number of buckets and the tensors [first, last) of bucket b, for reports. */
hcomm_status_t hcomm_buckets_layout(hcomm_buckets_t buckets, int b, int *nbuckets, int *first,
                                    int *last);

/** Waits for a launched step, then frees. NULL is allowed. Any later call
 * with the handle (or one never created) gets HCOMM_ERR_INVALID_ARG (destroy:
 * a log line). */
void hcomm_buckets_destroy(hcomm_buckets_t buckets);

#ifdef __cplusplus
}
#endif
#endif /* HCOMM_BUCKET_H */
