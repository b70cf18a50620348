/* shm_cpu.c - two local ranks stacked on one CPU while another CPU of their
 * mask has none: the higher one moves there.
 *
 * Ranks started by a fork (hcomm-run, hcomm-perf --ranks, torchrun without
 * binding) may start on their parent's CPU and stay there together: 2 ranks
 * on 2 CPUs did in a fifth of the launches here, for 825 to more than 3000
 * small allreduces, each ~40 times slower, since a rank's wait keeps its CPU
 * from the peer it waits for (perf/RESULTS.md). Each rank publishes the CPU
 * it polls on in each pair's segment; where the host has no more ranks than
 * the mask has CPUs, the highest rank of those stacked on one CPU moves to a
 * CPU where no connected peer polls, at most once per HC_SHM_UNSTACK_MS,
 * once it has seen them stacked for HC_SHM_STACKED_NS and the kernel agrees
 * that the peer's polling thread is on this CPU: a peer publishes its CPU
 * only while it polls, so one busy elsewhere (hcomm-perf's ranks touching
 * their buffers) may have been moved off the CPU it published; a move on
 * that stacked the two for the next 100 ms (32 KiB allreduces 6x slower in
 * 1 to 7 of 14 launches of `hcomm-perf --ranks 2 -b 32K -e 32M`, perf/RESULTS.md).
 * A move sets the thread's affinity to the one CPU, which migrates it at once,
 * and gives the mask back: nothing stays pinned, and the scheduler balances
 * as before. */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/proc.h"
#include "transport/shm/shm.h"

static __thread pid_t cpu_tid; /* gettid() is a system call: once per thread */

/* Connected peers that last polled on cpu (published values are cpu + 1). */
static int cpu_peers(const hc_tl_ctx_t *ctx, int cpu)
{
    int n = 0;
    for (int i = 0; i < ctx->nlist; i++) {
        const hc_tl_ep_t *ep = ctx->list[i];
        n += atomic_load_explicit(&ep->seg->cpu[1 - ep->side], memory_order_relaxed) ==
             (int32_t)cpu + 1;
    }
    return n;
}

/* Moves the calling thread to target and gives it its mask back. */
static void cpu_move_to(hc_tl_ctx_t *ctx, const cpu_set_t *mask, int cpu, int target, int peer)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(target, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0)
        return;
    if (sched_setaffinity(0, sizeof(*mask), mask) != 0)
        hc_warn(SHM, "restoring this thread's CPU mask after a move: %s", strerror(errno));
    ctx->n_unstack++;
    hc_debug(SHM, "rank %d shared CPU %d with rank %d: moved to CPU %d", ctx->rank, cpu, peer,
             target);
}

void hc_shm_cpu_check(hc_tl_ctx_t *ctx)
{
    int cpu = sched_getcpu();
    if (cpu < 0 || ctx->nlist == 0)
        return;
    if (cpu_tid == 0)
        cpu_tid = gettid();
    int         stacked = -1, higher = 0;
    hc_tl_ep_t *with = NULL;
    for (int i = 0; i < ctx->nlist; i++) {
        hc_tl_ep_t *ep = ctx->list[i];
        if (atomic_load_explicit(&ep->seg->cpu[ep->side], memory_order_relaxed) != cpu + 1 ||
            atomic_load_explicit(&ep->seg->tid[ep->side], memory_order_relaxed) != cpu_tid) {
            atomic_store_explicit(&ep->seg->tid[ep->side], cpu_tid, memory_order_relaxed);
            atomic_store_explicit(&ep->seg->cpu[ep->side], cpu + 1, memory_order_relaxed);
        }
        if (ep->status != HCOMM_SUCCESS || ep->peer_gone ||
            atomic_load_explicit(&ep->seg->cpu[1 - ep->side], memory_order_relaxed) != cpu + 1)
            continue;
        if (ep->peer > ctx->rank)
            higher = 1;
        else
            stacked = ep->peer, with = ep;
    }
    if (!ctx->unstack)
        return;
    uint64_t  now = hc_clock_coarse_ms();
    cpu_set_t mask;
    if (stacked < 0 || higher) {
        ctx->stacked_ns = 0;
        return;
    }
    uint64_t ns = hc_clock_now_ns();
    if (ctx->stacked_ns == 0)
        ctx->stacked_ns = ns;
    if (ns - ctx->stacked_ns < HC_SHM_STACKED_NS || now < ctx->next_unstack_ms)
        return;
    ctx->stacked_ns = 0;
    int32_t tid     = atomic_load_explicit(&with->seg->tid[1 - with->side], memory_order_relaxed);
    int     at      = tid > 0 ? hc_proc_cpu(with->peer_pid, tid) : -1;
    if (at >= 0 && at != cpu) { /* published before the scheduler moved it */
        ctx->next_unstack_ms = now + HC_SHM_UNSTACK_RECHECK_MS;
        return;
    }
    ctx->next_unstack_ms = now + HC_SHM_UNSTACK_MS;
    if (ctx->nlocal == 0) { /* the host's ranks: all known once init chose transports */
        ctx->nlocal = 1;
        for (int r = 0; r < ctx->nranks; r++)
            ctx->nlocal += ctx->lower[r].local;
    }
    if (sched_getaffinity(0, sizeof(mask), &mask) != 0)
        return;
    /* with more ranks than CPUs a move only trades one stacking for another:
     * evening the ranks per CPU in turns measured no faster (perf/RESULTS.md) */
    if (ctx->nlocal > CPU_COUNT(&mask))
        return;
    /* of the ranks stacked here, the highest moves to a CPU where no peer polls */
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (c != cpu && CPU_ISSET(c, &mask) && cpu_peers(ctx, c) == 0) {
            cpu_move_to(ctx, &mask, cpu, c, stacked);
            return;
        }
}
