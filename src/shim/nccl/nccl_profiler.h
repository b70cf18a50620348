/* nccl_profiler.h - the binary interface of an NCCL profiler plugin as NCCL
 * 2.28 loads it: the symbol ncclProfiler_v5 in libnccl-profiler.so, a struct
 * of functions, the event descriptor they take and the event type bits. The
 * layout is NCCL's (plugins/profiler in NVIDIA's repository documents it);
 * the names are hcomm's, so that nothing clashes with NVIDIA's headers. */
#ifndef HC_SHIM_NCCL_PROFILER_H
#define HC_SHIM_NCCL_PROFILER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ncclProfileGroup ... ncclProfileKernelLaunch: a plugin's eActivationMask */
enum {
    HC_NPROF_GROUP         = 1 << 0,
    HC_NPROF_COLL          = 1 << 1,
    HC_NPROF_P2P           = 1 << 2,
    HC_NPROF_PROXY_OP      = 1 << 3,
    HC_NPROF_PROXY_STEP    = 1 << 4,
    HC_NPROF_PROXY_CTRL    = 1 << 5,
    HC_NPROF_KERNEL_CH     = 1 << 6,
    HC_NPROF_NET_PLUGIN    = 1 << 7,
    HC_NPROF_GROUP_API     = 1 << 8,
    HC_NPROF_COLL_API      = 1 << 9,
    HC_NPROF_P2P_API       = 1 << 10,
    HC_NPROF_KERNEL_LAUNCH = 1 << 11,
};

/* ncclDebugLogLevel and ncclDebugLogger_t: the logger init hands a plugin */
enum {
    HC_NLOG_NONE = 0,
    HC_NLOG_VERSION,
    HC_NLOG_WARN,
    HC_NLOG_INFO,
    HC_NLOG_ABORT,
    HC_NLOG_TRACE
};
typedef void (*hc_nprof_logger_t)(int level, unsigned long flags, const char *file, int line,
                                  const char *fmt, ...);

/* ncclProfilerEventDescr_v5_t */
typedef struct {
    uint64_t type; /* one HC_NPROF_* bit */
    void    *parentObj;
    int      rank;
    union {
        struct {
            int graphCaptured;
            int groupDepth; /* 1: a group NCCL made for one call; more: the user's */
        } groupApi;
        struct {
            const char *func;
            size_t      count;
            const char *datatype;
            int         root;
            void       *stream;
            bool        graphCaptured;
        } collApi;
        struct {
            const char *func;
            size_t      count;
            const char *datatype;
            void       *stream;
            bool        graphCaptured;
        } p2pApi;
        struct {
            void *stream;
        } kernelLaunch;
        struct {
            uint64_t    seqNumber;
            const char *func;
            const void *sendBuff;
            void       *recvBuff;
            size_t      count;
            int         root;
            const char *datatype;
            uint8_t     nChannels;
            uint8_t     nWarps;
            const char *algo;
            const char *proto;
            void       *parentGroup;
        } coll;
        struct {
            const char *func;
            void       *buff;
            const char *datatype;
            size_t      count;
            int         peer;
            uint8_t     nChannels;
            void       *parentGroup;
        } p2p;
        struct { /* proxy, kernel and net events: hcomm emits none */
            pid_t   pid;
            uint8_t channelId;
            int     peer, nSteps, chunkSize, isSend;
        } proxyOp;
        struct {
            int64_t id;
            void   *data;
        } netPlugin;
    };
} hc_nprof_descr_t;

/* ncclProfiler_v5_t; results are ncclResult_t (0: ncclSuccess) */
typedef struct {
    const char *name;
    int (*init)(void **context, uint64_t commId, int *eActivationMask, const char *commName,
                int nNodes, int nranks, int rank, hc_nprof_logger_t logfn);
    int (*startEvent)(void *context, void **eHandle, hc_nprof_descr_t *eDescr);
    int (*stopEvent)(void *eHandle);
    int (*recordEventState)(void *eHandle, int eState, void *eStateArgs);
    int (*finalize)(void *context);
} hc_nprof_v5_t;

#endif
