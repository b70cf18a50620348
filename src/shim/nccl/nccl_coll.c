/* nccl_coll.c - NCCL collectives, point to point and PreMulSum operators on
 * hcomm. Host buffers and a NULL stream only: each call completes before it
 * returns (or, in a group, by ncclGroupEnd). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_coll.h" /* hcomm's checks and issue, inline: no call layer */
#include "base/extent.h"
#include "base/log.h"
#include "base/reduce.h" /* the library's half / bfloat16 conversions */
#include "device/device.h" /* hc_mem_kind */
#include "nccl_shim.h"

/* Scaled copies made for PreMulSum inside a group live until its end: freed
 * by ncclGroupEnd, by the next checked call outside a group, or, for a group
 * of hcomm's own API, by the first PreMulSum call of a later group (temps are
 * from group temps_epoch), so that valid calls never look at them. */
typedef struct temp {
    struct temp *next;
} temp_t;
static __thread temp_t *temps __attribute__((tls_model("initial-exec")));
static __thread unsigned long temps_epoch;

void hc_nccl_temps_release(void)
{
    while (temps != NULL) {
        temp_t *t = temps;
        temps = t->next;
        free(t);
    }
}

/* The arguments that make an hcomm call (api/api_coll.h) blocking: no
 * stream, no request. */
#define HC_BLOCKING NULL, NULL, 0

/* Common argument checks; fills *hdt, and *hs with the hcomm stream a call on
 * a CUDA stream is queued on (nccl_stream.c; NULL without one: the call
 * blocks). The failure path never returns success, which the compiler is
 * told, so that a valid call keeps nothing across it. */
static inline ncclResult_t check(ncclComm_t comm, ncclDataType_t dt, cudaStream_t stream,
                                 hcomm_dtype_t *hdt, hcomm_stream_t *hs, const char *what)
{
    *hs = NULL;
    if (__builtin_expect(hc_nccl_args_ok(comm, dt), 1)) {
        *hdt = (hcomm_dtype_t)dt;
        if (__builtin_expect(stream == NULL, 1))
            return ncclSuccess;
        return hc_nccl_stream(comm, stream, hs, what);
    }
    *hdt             = HCOMM_UINT8;
    ncclResult_t res = hc_nccl_check_failed(comm, dt, what);
    if (res == ncclSuccess)
        __builtin_unreachable();
    return res;
}

/* A floating element as a double. */
static double load_float(ncclDataType_t dt, const void *p, size_t i)
{
    switch (dt) {
    case ncclFloat16: return hc_half_to_float(((const uint16_t *)p)[i]);
    case ncclFloat32: return ((const float *)p)[i];
    case ncclFloat64: return ((const double *)p)[i];
    default: return hc_bf16_to_float(((const uint16_t *)p)[i]);
    }
}

/* buf[i] *= the scalar at sp, in place and in dt's arithmetic: integers
 * multiply in their own width (wrapping, as on the device), never through a
 * double, which holds neither 2^53 + 1 nor what lies above 2^63. */
static void scale(ncclDataType_t dt, void *buf, size_t n, const void *sp)
{
#define HC_SCALE_INT_(T, U)                                                                        \
    do {                                                                                           \
        T s_;                                                                                      \
        memcpy(&s_, sp, sizeof(s_));                                                               \
        for (size_t i = 0; i < n; i++)                                                             \
            ((T *)buf)[i] = (T)(U)((U)((T *)buf)[i] * (U)s_);                                      \
    } while (0)
    switch (dt) {
    case ncclInt8:
        HC_SCALE_INT_(int8_t, uint32_t);
        return;
    case ncclUint8:
        HC_SCALE_INT_(uint8_t, uint32_t);
        return;
    case ncclInt32:
        HC_SCALE_INT_(int32_t, uint32_t);
        return;
    case ncclUint32:
        HC_SCALE_INT_(uint32_t, uint32_t);
        return;
    case ncclInt64:
        HC_SCALE_INT_(int64_t, uint64_t);
        return;
    case ncclUint64:
        HC_SCALE_INT_(uint64_t, uint64_t);
        return;
    default:
        break;
    }
#undef HC_SCALE_INT_
    double s = load_float(dt, sp, 0);
    for (size_t i = 0; i < n; i++) {
        switch (dt) {
        case ncclFloat16:
            ((uint16_t *)buf)[i] = hc_float_to_half((float)(load_float(dt, buf, i) * s));
            break;
        case ncclFloat32:
            ((float *)buf)[i] = (float)(((const float *)buf)[i] * s);
            break;
        case ncclFloat64:
            ((double *)buf)[i] = ((const double *)buf)[i] * s;
            break;
        default:
            ((uint16_t *)buf)[i] = hc_float_to_bf16((float)(load_float(dt, buf, i) * s));
            break;
        }
    }
}

/* For a PreMulSum op, *sendbuf becomes a scaled copy (freed by the caller
 * through hc_nccl_temps_release, or kept until the group ends). */
static ncclResult_t prepare_premul(ncclComm_t comm, ncclRedOp_t op, ncclDataType_t dt,
                                   size_t count, const void **sendbuf, hcomm_op_t *hop,
                                   const char *what)
{
    int k = (int)op - ncclNumOps;
    if (k < 0 || k >= HC_NCCL_MAX_PREMUL || !hc_nccl_ext(comm)->premul[k].used)
        return hc_nccl_fail(ncclInvalidArgument, "%s: invalid reduction op %d", what, (int)op);
    const hc_nccl_premul_t *pm = &hc_nccl_ext(comm)->premul[k];
    if (pm->dtype != dt)
        return hc_nccl_fail(ncclInvalidArgument, "%s: op %d was created for datatype %d, not %d",
                            what, (int)op, (int)pm->dtype, (int)dt);
    hcomm_dtype_t hdt = HCOMM_UINT8;
    if (hc_nccl_dtype(dt, &hdt) != ncclSuccess)
        return ncclInvalidArgument;
    size_t esize = hcomm_dtype_size(hdt);
    if (count > (SIZE_MAX - sizeof(temp_t) - 16) / esize)
        return hc_nccl_fail(ncclInvalidArgument, "%s: count %zu overflows", what, count);
    if (count > 0 && *sendbuf == NULL)
        return hc_nccl_fail(ncclInvalidArgument, "%s: sendbuff is NULL", what);
    if (temps != NULL && temps_epoch != hc_group_epoch())
        hc_nccl_temps_release(); /* their group has ended */
    temp_t *t = malloc(sizeof(temp_t) + count * esize + 16);
    if (t == NULL)
        return hc_nccl_fail(ncclSystemError, "%s: %s", what, strerror(ENOMEM));
    void *dst = (char *)t + 16 * ((sizeof(temp_t) + 15) / 16);
    /* device memory is copied out first, as the plain ops stage it */
    hcomm_status_t st = HCOMM_SUCCESS;
    if (count > 0 && hc_mem_kind(*sendbuf) != HC_MEM_HOST)
        st = hc_mem_copy(dst, *sendbuf, count * esize);
    else if (count > 0)
        memcpy(dst, *sendbuf, count * esize);
    if (st != HCOMM_SUCCESS) {
        free(t);
        return hc_nccl_status_fail(st, what);
    }
    scale(dt, dst, count, pm->residence == ncclScalarDevice ? pm->scalar_ptr : pm->scalar);
    t->next = temps;
    temps = t;
    temps_epoch = hc_group_epoch();
    *sendbuf = dst;
    *hop = HCOMM_SUM;
    return ncclSuccess;
}

/* Ends a call: outside a group, scaled copies are no longer needed. */
static ncclResult_t finish(hcomm_status_t st, const char *what)
{
    if (temps != NULL && !hc_group_active())
        hc_nccl_temps_release();
    return hc_nccl_enq_status(st, what);
}

/* The checks of a reducing collective, and its op (a PreMulSum op scales a
 * copy of sendbuff, which *sendbuff then points to). */
static inline ncclResult_t reducing(ncclComm_t comm, ncclDataType_t dt, ncclRedOp_t op,
                                    size_t count, cudaStream_t stream, const void **sendbuff,
                                    hcomm_dtype_t *hdt, hcomm_op_t *hop, hcomm_stream_t *hs,
                                    const char *what)
{
    ncclResult_t res = check(comm, dt, stream, hdt, hs, what);
    if (res != ncclSuccess)
        return res;
    if (__builtin_expect((unsigned)op < (unsigned)ncclNumOps, 1)) {
        *hop = (hcomm_op_t)op;
        return ncclSuccess;
    }
    if (*hs != NULL) /* the call returns once queued; the copy would be freed under it */
        return hc_nccl_fail(ncclInvalidUsage,
                            "%s: a PreMulSum op on a CUDA stream is not supported; pass a NULL "
                            "stream", what);
    return prepare_premul(comm, op, dt, count, sendbuff, hop, what);
}

ncclResult_t hcomm_nccl_RedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                             ncclScalarResidence_t residence, ncclComm_t comm)
{
    const char *what = "ncclRedOpCreatePreMulSum";
    hcomm_dtype_t hdt  = HCOMM_UINT8;
    ncclResult_t res = hc_nccl_check_comm(comm, what);
    if (res == ncclSuccess)
        res = hc_nccl_dtype(datatype, &hdt);
    if (res != ncclSuccess)
        return res;
    if (op == NULL || scalar == NULL ||
        (residence != ncclScalarDevice && residence != ncclScalarHostImmediate))
        return hc_nccl_fail(ncclInvalidArgument, "%s: invalid arguments", what);
    /* ncclScalarDevice names where it lives, not only when it is read: the
     * host reads it at each call, so it must be host memory */
    if (hc_mem_kind(scalar) != HC_MEM_HOST)
        return hc_nccl_fail(ncclInvalidUsage,
                            "%s: the scalar is device memory; hcomm reads it on the host (pass "
                            "host memory until hcomm's device-memory support arrives)",
                            what);
    for (int k = 0; k < HC_NCCL_MAX_PREMUL; k++) {
        hc_nccl_premul_t *pm = &hc_nccl_ext(comm)->premul[k];
        if (pm->used)
            continue;
        pm->used = 1;
        pm->dtype = datatype;
        pm->residence = residence;
        pm->scalar_ptr = scalar;
        memcpy(pm->scalar, scalar, hcomm_dtype_size(hdt));
        *op = (ncclRedOp_t)(ncclNumOps + k);
        return ncclSuccess;
    }
    return hc_nccl_fail(ncclInvalidUsage, "%s: more than %d operators alive on this communicator",
                        what, HC_NCCL_MAX_PREMUL);
}

ncclResult_t hcomm_nccl_RedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    ncclResult_t res = hc_nccl_check_comm(comm, "ncclRedOpDestroy");
    if (res != ncclSuccess)
        return res;
    int k = (int)op - ncclNumOps;
    if (k < 0 || k >= HC_NCCL_MAX_PREMUL || !hc_nccl_ext(comm)->premul[k].used)
        return hc_nccl_fail(ncclInvalidArgument, "ncclRedOpDestroy: op %d was not created by "
                                                 "ncclRedOpCreatePreMulSum", (int)op);
    hc_nccl_ext(comm)->premul[k].used = 0;
    return ncclSuccess;
}

/* The common reducing call: the checks pass, no stream, a built-in op. It
 * goes straight to hcomm (no frame, no finish) with NCCL's datatype and op,
 * which are hcomm's (nccl_shim.h). Anything else takes the full checks. */
static inline int plain_call(ncclComm_t comm, ncclDataType_t dt, ncclRedOp_t op,
                             cudaStream_t stream)
{
    return hc_nccl_args_fast(comm, dt) && stream == NULL && (unsigned)op < ncclNumOps;
}

static __attribute__((noinline)) ncclResult_t
allreduce_checked(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    const char *what = "ncclAllReduce";
    hcomm_dtype_t hdt;
    hcomm_op_t hop;
    hcomm_stream_t hs;
    ncclResult_t   res =
        reducing(comm, datatype, op, count, stream, &sendbuff, &hdt, &hop, &hs, what);
    if (res != ncclSuccess)
        return hc_nccl_enq(res);
    return finish(hc_api_allreduce(sendbuff, recvbuff, count, hdt, hop, hc_of(comm), hs, NULL, 0),
                  what);
}

ncclResult_t hcomm_nccl_AllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                  cudaStream_t stream)
{
    if (__builtin_expect(plain_call(comm, datatype, op, stream), 1))
        return hc_nccl_enq_status(hc_api_allreduce(sendbuff, recvbuff, count,
                                                   (hcomm_dtype_t)datatype, (hcomm_op_t)op,
                                                   hc_of(comm), HC_BLOCKING),
                                  "ncclAllReduce");
    return allreduce_checked(sendbuff, recvbuff, count, datatype, op, comm, stream);
}

static __attribute__((noinline)) ncclResult_t
reduce_checked(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
               ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    const char *what = "ncclReduce";
    hcomm_dtype_t hdt;
    hcomm_op_t hop;
    hcomm_stream_t hs;
    ncclResult_t   res =
        reducing(comm, datatype, op, count, stream, &sendbuff, &hdt, &hop, &hs, what);
    if (res != ncclSuccess)
        return hc_nccl_enq(res);
    return finish(
        hc_api_reduce(sendbuff, recvbuff, count, hdt, hop, root, hc_of(comm), hs, NULL, 0), what);
}

ncclResult_t hcomm_nccl_Reduce(const void *sendbuff, void *recvbuff, size_t count,
                               ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                               cudaStream_t stream)
{
    if (__builtin_expect(plain_call(comm, datatype, op, stream), 1))
        return hc_nccl_enq_status(hc_api_reduce(sendbuff, recvbuff, count, (hcomm_dtype_t)datatype,
                                                (hcomm_op_t)op, root, hc_of(comm), HC_BLOCKING),
                                  "ncclReduce");
    return reduce_checked(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

static __attribute__((noinline)) ncclResult_t
reduce_scatter_checked(const void *sendbuff, void *recvbuff, size_t recvcount,
                       ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                       cudaStream_t stream)
{
    const char *what = "ncclReduceScatter";
    hcomm_dtype_t hdt;
    hcomm_op_t hop;
    hcomm_stream_t hs = NULL;
    ncclResult_t res = hc_nccl_check_comm(comm, what);
    if (res == ncclSuccess && recvcount > SIZE_MAX / (size_t)hc_of(comm)->nranks)
        res = hc_nccl_fail(ncclInvalidArgument, "%s: recvcount %zu overflows", what, recvcount);
    if (res == ncclSuccess)
        res = reducing(comm, datatype, op, recvcount * (size_t)hc_of(comm)->nranks, stream,
                       &sendbuff, &hdt, &hop, &hs, what);
    if (res != ncclSuccess)
        return hc_nccl_enq(res);
    return finish(
        hc_api_reduce_scatter(sendbuff, recvbuff, recvcount, hdt, hop, hc_of(comm), hs, NULL, 0),
        what);
}

ncclResult_t hcomm_nccl_ReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream)
{
    if (__builtin_expect(plain_call(comm, datatype, op, stream), 1))
        return hc_nccl_enq_status(hc_api_reduce_scatter(sendbuff, recvbuff, recvcount,
                                                        (hcomm_dtype_t)datatype, (hcomm_op_t)op,
                                                        hc_of(comm), HC_BLOCKING),
                                  "ncclReduceScatter");
    return reduce_scatter_checked(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
}

ncclResult_t hcomm_nccl_Broadcast(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream)
{
    hcomm_dtype_t hdt;
    hcomm_stream_t hs;
    ncclResult_t   res = check(comm, datatype, stream, &hdt, &hs, "ncclBroadcast");
    if (res != ncclSuccess)
        return hc_nccl_enq(res);
    return hc_nccl_enq_status(
        hc_api_broadcast(sendbuff, recvbuff, count, hdt, root, hc_of(comm), hs, NULL, 0),
        "ncclBroadcast");
}

ncclResult_t hcomm_nccl_Bcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                              ncclComm_t comm, cudaStream_t stream)
{
    return hcomm_nccl_Broadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t hcomm_nccl_AllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    hcomm_dtype_t hdt;
    hcomm_stream_t hs;
    ncclResult_t   res = check(comm, datatype, stream, &hdt, &hs, "ncclAllGather");
    if (res != ncclSuccess)
        return hc_nccl_enq(res);
    return hc_nccl_enq_status(
        hc_api_allgather(sendbuff, recvbuff, sendcount, hdt, hc_of(comm), hs, NULL, 0),
        "ncclAllGather");
}

ncclResult_t hcomm_nccl_AlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                                 ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    hcomm_dtype_t hdt;
    hcomm_stream_t hs;
    ncclResult_t   res = check(comm, datatype, stream, &hdt, &hs, "ncclAlltoAll");
    if (res != ncclSuccess)
        return hc_nccl_enq(res);
    return hc_nccl_enq_status(
        hc_api_alltoall(sendbuff, recvbuff, count, hdt, hc_of(comm), hs, NULL, 0), "ncclAlltoAll");
}

ncclResult_t hcomm_nccl_Send(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                             ncclComm_t comm, cudaStream_t stream)
{
    hcomm_dtype_t hdt;
    hcomm_stream_t hs;
    ncclResult_t   res = check(comm, datatype, stream, &hdt, &hs, "ncclSend");
    if (res != ncclSuccess)
        return hc_nccl_enq(res);
    return hc_nccl_enq_status(
        hc_api_p2p(1, sendbuff, NULL, count, hdt, peer, hc_of(comm), hs, NULL, 0), "ncclSend");
}

ncclResult_t hcomm_nccl_Recv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                             ncclComm_t comm, cudaStream_t stream)
{
    hcomm_dtype_t hdt;
    hcomm_stream_t hs;
    ncclResult_t   res = check(comm, datatype, stream, &hdt, &hs, "ncclRecv");
    if (res != ncclSuccess)
        return hc_nccl_enq(res);
    return hc_nccl_enq_status(
        hc_api_p2p(0, NULL, recvbuff, count, hdt, peer, hc_of(comm), hs, NULL, 0), "ncclRecv");
}

/* Gather (gather != 0) or scatter as sends and receives in one hcomm group,
 * root's own block as a send to itself (a copy in the group, so that it
 * keeps the order of a CUDA stream too). */
static ncclResult_t rooted(int gather, const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
                           const char *what)
{
    hcomm_dtype_t hdt;
    hcomm_stream_t hs;
    ncclResult_t   res = check(comm, datatype, stream, &hdt, &hs, what);
    if (res != ncclSuccess)
        return res;
    hcomm_comm_t hc = hc_of(comm);
    size_t esize = hcomm_dtype_size(hdt);
    if (root < 0 || root >= hc->nranks)
        return hc_nccl_fail(ncclInvalidArgument, "%s: root %d out of range", what, root);
    if (count > SIZE_MAX / esize / (size_t)hc->nranks)
        return hc_nccl_fail(ncclInvalidArgument, "%s: count %zu overflows", what, count);
    size_t bytes = count * esize;
    if (count > 0 && (sendbuff == NULL && (gather || hc->rank == root)))
        return hc_nccl_fail(ncclInvalidArgument, "%s: sendbuff is NULL", what);
    if (count > 0 && (recvbuff == NULL && (!gather || hc->rank == root)))
        return hc_nccl_fail(ncclInvalidArgument, "%s: recvbuff is NULL", what);
    /* the root's buffers: its block of the whole one (in place) or disjoint */
    const char *block = gather ? sendbuff : recvbuff, *whole = gather ? recvbuff : sendbuff;
    if (hc->rank == root && count > 0 && block != whole + (size_t)root * bytes &&
        hc_extents_overlap(block, bytes, whole, (size_t)hc->nranks * bytes))
        return hc_nccl_fail(ncclInvalidArgument,
                            "%s: sendbuff and recvbuff overlap without being in place (%s)", what,
                            gather ? "sendbuff == recvbuff + root x count elements"
                                   : "recvbuff == sendbuff + root x count elements");
    hcomm_status_t st = hcomm_group_start();
    if (st != HCOMM_SUCCESS)
        return hc_nccl_status(st, what);
    if (hc->rank != root) {
        st = gather ? hcomm_send(sendbuff, count, hdt, root, hc, hs)
                    : hcomm_recv(recvbuff, count, hdt, root, hc, hs);
    } else {
        for (int p = 0; p < hc->nranks && st == HCOMM_SUCCESS; p++) {
            const char *sb = gather ? sendbuff : (const char *)sendbuff + (size_t)p * bytes;
            char       *rb = gather ? (char *)recvbuff + (size_t)p * bytes : recvbuff;
            if (p != root) {
                st = gather ? hcomm_recv(rb, count, hdt, p, hc, hs)
                            : hcomm_send(sb, count, hdt, p, hc, hs);
            } else if (sb != rb && bytes > 0) { /* in place, root's block is there already */
                st = hcomm_send(sb, count, hdt, p, hc, hs);
                if (st == HCOMM_SUCCESS)
                    st = hcomm_recv(rb, count, hdt, p, hc, hs);
            }
        }
    }
    hcomm_status_t est = hcomm_group_end(); /* always closes the group it opened */
    return hc_nccl_status(st != HCOMM_SUCCESS ? st : est, what);
}

ncclResult_t hcomm_nccl_Gather(const void *sendbuff, void *recvbuff, size_t count,
                               ncclDataType_t datatype, int root, ncclComm_t comm,
                               cudaStream_t stream)
{
    return hc_nccl_enq(
        rooted(1, sendbuff, recvbuff, count, datatype, root, comm, stream, "ncclGather"));
}

ncclResult_t hcomm_nccl_Scatter(const void *sendbuff, void *recvbuff, size_t count,
                                ncclDataType_t datatype, int root, ncclComm_t comm,
                                cudaStream_t stream)
{
    return hc_nccl_enq(
        rooted(0, sendbuff, recvbuff, count, datatype, root, comm, stream, "ncclScatter"));
}
