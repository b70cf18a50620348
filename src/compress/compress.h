/* compress.h - the compression state behind hcomm_compress_t (compress.c) and
 * the compressed allreduce that uses it (algorithms/algo_compress.c). */
#ifndef HC_COMPRESS_H
#define HC_COMPRESS_H

#include "compress/codec.h"
#include "hcomm_compress.h"

struct hcomm_compress {
    hcomm_comm_t            comm;
    hcomm_compress_config_t cfg;
    size_t                  count;
    hcomm_dtype_t           dtype;
    int                     nranks, rank;
    size_t                  k;          /* topk: pairs each rank sends */
    size_t                  slot;       /* onebit: bytes of one chunk's message */
    float                  *worker_res; /* count: input minus what was sent */
    float                  *server_res; /* onebit: this rank's chunk */
    float                  *work;       /* count floats: converted input / output */
    float                  *avg;        /* onebit: this rank's chunk, averaged */
    void                   *sendbuf;    /* messages out: n slots / k pairs / count halves */
    void                   *recvbuf;    /* messages in: n slots / n x k pairs */
    void                   *scratch;    /* topk selection work space */
};

/* Rank j's chunk of the onebit tensor: hc_part_off/len over nranks. */
size_t hc_compress_chunk_off(const struct hcomm_compress *s, int j);
size_t hc_compress_chunk_len(const struct hcomm_compress *s, int j);

/* Runs the compressed allreduce of a checked call: blocking (stream NULL), or
 * queued on stream, its local steps as host functions between the
 * collectives, which take their places in the communicator's order now. */
hcomm_status_t hc_compress_run(struct hcomm_compress *s, const void *in, void *out,
                               hcomm_stream_t stream);

#endif
