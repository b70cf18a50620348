/* compress.h - the compression state behind hcomm_compress_t (compress.c),
 * one call of the compressed allreduce, and the runner of a codec's program
 * (compress_run.c). */
#ifndef HC_COMPRESS_H
#define HC_COMPRESS_H

#include "compress/codec.h"
#include "hcomm_compress.h"

struct hcomm_compress {
    hcomm_comm_t            comm;
    uint64_t                comm_serial; /* hc_comm_serial(comm): not one at its address later */
    hcomm_compress_config_t cfg;
    const hc_codec_t       *codec;
    size_t                  count;
    hcomm_dtype_t           dtype;
    int                     nranks, rank;
    size_t                  k;          /* topk: pairs each rank sends */
    size_t                  msg_bytes;  /* one rank's message in an alltoall or allgather */
    float                  *worker_res; /* count: input minus what was sent */
    float                  *server_res; /* onebit: this rank's chunk */
    float                  *work;       /* count floats: converted input / output */
    float                  *avg;        /* onebit: this rank's chunk, averaged */
    void                   *sendbuf;    /* messages out */
    void                   *recvbuf;    /* messages in */
    void                   *scratch;    /* topk selection work space */
    int                     refs; /* atomic: the creator's, and one per call queued on a stream */
};

/* One call's buffers: the steps of a call queued on a stream run later, maybe
 * after the next call on the same state was issued, or after the state was
 * destroyed. On a stream the call is allocated before anything is queued,
 * holds a reference to the state, and is freed by whoever drops its last
 * reference: each queued local step holds one, the issuing call another, so a
 * call that could queue only some steps neither leaks it nor frees it early. */
typedef struct hc_compress_call {
    struct hcomm_compress *s;
    const void            *in;
    void                  *out;
    const hc_cstep_t      *next; /* stream: where the next local step is */
    int                    refs; /* stream: atomic */
    hcomm_status_t         failed; /* stream: a step failed or was skipped; the rest do nothing */
} hc_compress_call_t;

/* Drops a reference to s; the last one frees it. A call queued on a stream
 * holds one, so destroying the state before the stream ran it is safe. */
void hc_compress_unref(struct hcomm_compress *s);

/* Rank j's chunk of the onebit tensor: hc_part_off/len over nranks. */
size_t hc_compress_chunk_off(const struct hcomm_compress *s, int j);
size_t hc_compress_chunk_len(const struct hcomm_compress *s, int j);

/* Runs the compressed allreduce of a checked call: blocking (stream NULL), or
 * queued on stream, its local steps as host functions between the
 * collectives, which take their places in the communicator's order now. */
hcomm_status_t hc_compress_run(struct hcomm_compress *s, const void *in, void *out,
                               hcomm_stream_t stream);

#endif
