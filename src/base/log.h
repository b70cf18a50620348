/* log.h - the library's only output: leveled, per-subsystem log lines that carry
 * host, pid and rank. Configured by HCOMM_LOG_LEVEL, HCOMM_LOG_SUBSYS and
 * HCOMM_LOG_FILE (%h host, %p pid). */
#ifndef HC_BASE_LOG_H
#define HC_BASE_LOG_H

#include <stdarg.h>

typedef enum {
    HC_LOG_NONE = 0,
    HC_LOG_ERROR,
    HC_LOG_WARN,
    HC_LOG_INFO,
    HC_LOG_DEBUG,
    HC_LOG_TRACE
} hc_log_level_t;

/* Subsystems, a bit each, for HCOMM_LOG_SUBSYS=init,coll,... */
#define HC_LOG_SUBSYS_MAP(X)                                                         \
    X(INIT, "init") X(BOOT, "boot") X(COLL, "coll") X(P2P, "p2p") X(NET, "net")      \
    X(SHM, "shm") X(ALGO, "algo") X(EXEC, "exec") X(PARAM, "param") X(PERF, "perf")   \
    X(TOPO, "topo") X(COMPRESS, "compress") X(STREAM, "stream") X(MOE, "moe")

typedef enum {
#define HC_LOG_SUBSYS_ENUM_(id, str) HC_SUBSYS_##id##_BIT,
    HC_LOG_SUBSYS_MAP(HC_LOG_SUBSYS_ENUM_)
#undef HC_LOG_SUBSYS_ENUM_
    HC_SUBSYS_COUNT
} hc_log_subsys_bit_t;

#define HC_SUBSYS(id) (1u << HC_SUBSYS_##id##_BIT)

extern hc_log_level_t hc_log_level_g;
extern unsigned hc_log_subsys_g;

/* The level and subsystem mask, read as relaxed atomics: tests reconfigure
 * them (hc_params_reload) while the library's threads log. */
static inline hc_log_level_t hc_log_level(void)
{
    return __atomic_load_n(&hc_log_level_g, __ATOMIC_RELAXED);
}
static inline unsigned hc_log_subsys(void)
{
    return __atomic_load_n(&hc_log_subsys_g, __ATOMIC_RELAXED);
}

/* Sets the rank shown in log lines (the first communicator's rank). */
void hc_log_set_rank(int rank);
void hc_log_emit(hc_log_level_t level, unsigned subsys, const char *file, int line,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Logs when level is on and, below WARN, the subsystem's bit (HC_SUBSYS(NET),
 * or a mask given at run time by a helper of base/ that logs on behalf of its
 * caller): errors and warnings pass any HCOMM_LOG_SUBSYS, as NCCL's WARN does. */
#define hc_log_as(level, mask, ...)                                                                \
    do {                                                                                           \
        if ((level) <= hc_log_level() && ((level) <= HC_LOG_WARN || (hc_log_subsys() & (mask))))   \
            hc_log_emit(level, mask, __FILE__, __LINE__, __VA_ARGS__);                             \
    } while (0)
#define hc_log_(level, id, ...) hc_log_as(level, HC_SUBSYS(id), __VA_ARGS__)

/* hc_error(COLL, "peer %d: %s", peer, strerror(errno)); */
#define hc_error(id, ...) hc_log_(HC_LOG_ERROR, id, __VA_ARGS__)
#define hc_warn(id, ...)  hc_log_(HC_LOG_WARN, id, __VA_ARGS__)
#define hc_info(id, ...)  hc_log_(HC_LOG_INFO, id, __VA_ARGS__)
#define hc_debug(id, ...) hc_log_(HC_LOG_DEBUG, id, __VA_ARGS__)
#define hc_trace(id, ...) hc_log_(HC_LOG_TRACE, id, __VA_ARGS__)

#endif
