/* nccl_abi_check.c - prints the ABI facts of whichever nccl.h it is compiled
 * against: sizes, struct offsets, enum values, initializer contents. Built
 * once against NVIDIA's header and once against hcomm's; run_shim.sh diffs the
 * two outputs, so any difference fails the check. */
#include <stddef.h>
#include <stdio.h>

#include "nccl.h"

#define SIZE(t) printf("sizeof(%s) = %zu\n", #t, sizeof(t))
#define OFF(t, f) printf("offsetof(%s, %s) = %zu\n", #t, #f, offsetof(t, f))
#define VAL(e) printf("%s = %lld\n", #e, (long long)(e))

int main(void)
{
    SIZE(ncclUniqueId); SIZE(ncclConfig_t); SIZE(ncclSimInfo_t); SIZE(ncclResult_t);
    SIZE(ncclRedOp_t); SIZE(ncclDataType_t); SIZE(ncclScalarResidence_t); SIZE(ncclComm_t);
    SIZE(ncclWindow_t); SIZE(cudaStream_t);
    OFF(ncclConfig_t, size); OFF(ncclConfig_t, magic); OFF(ncclConfig_t, version);
    OFF(ncclConfig_t, blocking); OFF(ncclConfig_t, cgaClusterSize); OFF(ncclConfig_t, minCTAs);
    OFF(ncclConfig_t, maxCTAs); OFF(ncclConfig_t, netName); OFF(ncclConfig_t, splitShare);
    OFF(ncclConfig_t, trafficClass); OFF(ncclConfig_t, commName);
    OFF(ncclConfig_t, collnetEnable); OFF(ncclConfig_t, CTAPolicy);
    OFF(ncclConfig_t, shrinkShare); OFF(ncclConfig_t, nvlsCTAs);
    OFF(ncclConfig_t, nChannelsPerNetPeer); OFF(ncclConfig_t, nvlinkCentricSched);
    OFF(ncclSimInfo_t, size); OFF(ncclSimInfo_t, magic); OFF(ncclSimInfo_t, version);
    OFF(ncclSimInfo_t, estimatedTime);
    VAL(NCCL_MAJOR); VAL(NCCL_MINOR); VAL(NCCL_UNIQUE_ID_BYTES); VAL(NCCL_VERSION(2, 28, 3));
    VAL(ncclSuccess); VAL(ncclUnhandledCudaError); VAL(ncclSystemError); VAL(ncclInternalError);
    VAL(ncclInvalidArgument); VAL(ncclInvalidUsage); VAL(ncclRemoteError); VAL(ncclInProgress);
    VAL(ncclNumResults);
    VAL(ncclSum); VAL(ncclProd); VAL(ncclMax); VAL(ncclMin); VAL(ncclAvg); VAL(ncclNumOps);
    VAL(ncclMaxRedOp);
    VAL(ncclInt8); VAL(ncclChar); VAL(ncclUint8); VAL(ncclInt32); VAL(ncclInt); VAL(ncclUint32);
    VAL(ncclInt64); VAL(ncclUint64); VAL(ncclFloat16); VAL(ncclHalf); VAL(ncclFloat32);
    VAL(ncclFloat); VAL(ncclFloat64); VAL(ncclDouble); VAL(ncclBfloat16); VAL(ncclFloat8e4m3);
    VAL(ncclFloat8e5m2); VAL(ncclNumTypes);
    VAL(ncclScalarDevice); VAL(ncclScalarHostImmediate);
    VAL(NCCL_CONFIG_UNDEF_INT); VAL(NCCL_SPLIT_NOCOLOR); VAL(NCCL_WIN_DEFAULT);
    VAL(NCCL_WIN_COLL_SYMMETRIC); VAL(NCCL_WIN_REQUIRED_ALIGNMENT); VAL(NCCL_CTA_POLICY_DEFAULT);
    VAL(NCCL_CTA_POLICY_EFFICIENCY); VAL(NCCL_CTA_POLICY_ZERO); VAL(NCCL_SHRINK_DEFAULT);
    VAL(NCCL_SHRINK_ABORT); VAL(NCCL_REVOKE_DEFAULT);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    VAL(cfg.size); VAL(cfg.magic); VAL(cfg.version / 100); VAL(cfg.blocking); VAL(cfg.minCTAs);
    VAL(cfg.netName == NULL); VAL(cfg.nvlinkCentricSched);
    VAL(sim.size); VAL(sim.magic); VAL(sim.version / 100); VAL(sim.estimatedTime);
    return 0;
}
