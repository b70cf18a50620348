/* nccl_stream.c - NCCL calls on a CUDA stream: each CUDA stream a
 * communicator's calls name gets an hcomm stream bound to it
 * (hcomm_stream_create_cuda), made at its first call and destroyed with the
 * communicator. The call is queued on it and returns: it starts after the
 * CUDA work queued before it, and later CUDA work waits for it. Device
 * buffers are staged through host memory by the core (core/stage.h). */
#include "base/log.h"
#include "hcomm_stream.h"
#include "nccl_shim.h"
#include "overlap/overlap.h" /* hc_cuda_stream_id */

ncclResult_t hc_nccl_stream(ncclComm_t comm, cudaStream_t stream, hcomm_stream_t *hs,
                            const char *what)
{
    unsigned long long id = 0;
    const char *why = NULL;
    if (hc_cuda_stream_id(stream, &id, &why) != 0)
        return hc_nccl_fail(ncclInvalidUsage, "%s: CUDA stream %p is not usable: %s", what,
                            (void *)stream, why);
    hc_nccl_ext_t *ext = hc_nccl_ext(comm);
    hc_nccl_stream_t *slot = NULL;
    for (int i = 0; i < ext->nstreams && slot == NULL; i++)
        if (ext->streams[i].cuda == (void *)stream)
            slot = &ext->streams[i];
    if (slot != NULL && slot->id == id) {
        *hs = slot->hs;
        return ncclSuccess;
    }
    if (slot != NULL) { /* the handle of a destroyed CUDA stream, reused */
        hcomm_status_t st = hcomm_stream_destroy(slot->hs);
        *slot = ext->streams[--ext->nstreams];
        slot = NULL;
        if (st != HCOMM_SUCCESS)
            hc_info(COLL, "nccl shim: %s: the stream of a destroyed CUDA stream had failed (%s)",
                    what, hcomm_status_name(st));
    }
    if (ext->nstreams == HC_NCCL_MAX_STREAMS)
        return hc_nccl_fail(ncclInvalidUsage,
                            "%s: more than %d CUDA streams on one communicator", what,
                            HC_NCCL_MAX_STREAMS);
    hcomm_stream_t created = NULL;
    ncclResult_t res = hc_nccl_status(hcomm_stream_create_cuda((void *)stream, &created), what);
    if (res != ncclSuccess)
        return res;
    ext->streams[ext->nstreams++] = (hc_nccl_stream_t){(void *)stream, id, created};
    *hs = created;
    return ncclSuccess;
}

void hc_nccl_streams_destroy(ncclComm_t comm)
{
    hc_nccl_ext_t *ext = hc_nccl_ext(comm);
    while (ext->nstreams > 0) {
        hcomm_status_t st = hcomm_stream_destroy(ext->streams[--ext->nstreams].hs);
        if (st != HCOMM_SUCCESS)
            hc_info(COLL, "nccl shim: a CUDA stream's work had failed (%s)",
                    hcomm_status_name(st));
    }
}
