/* shm_cpu.c - two local ranks stacked on one CPU while another CPU they may
 * use has none: the higher rank moves itself there once.
 *
 * Ranks started by a fork (hcomm-run, hcomm-perf --ranks, torchrun without
 * binding) may start on their parent's CPU and stay there together: measured
 * here in 3 of 12 two-rank launches on 2 CPUs, for 825 to more than 3000
 * small allreduces, each ~40 times slower, since a rank's wait keeps its CPU
 * from the peer it waits for. Each rank publishes the CPU it polls on in each
 * pair's segment; the highest rank of those stacked on one CPU sets its
 * affinity to a CPU of its mask where no connected peer polls, which
 * migrates it at once, and then restores its mask: nothing stays pinned, the
 * scheduler balances as before. At most once per HC_SHM_UNSTACK_MS. */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "transport/shm/shm.h"

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

/* Moves the calling thread off cpu to a CPU of its mask where no connected
 * peer polls; its mask is kept. Where this host has more ranks than the mask
 * has CPUs it stays: a move would only trade one stacking for another. */
static void cpu_move(hc_tl_ctx_t *ctx, int cpu, int peer)
{
    cpu_set_t mask, one;
    int       nlocal = 1;
    for (int r = 0; r < ctx->nranks; r++)
        nlocal += ctx->lower[r].local;
    if (sched_getaffinity(0, sizeof(mask), &mask) != 0 || nlocal > CPU_COUNT(&mask))
        return;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (c == cpu || !CPU_ISSET(c, &mask) || cpu_peers(ctx, c) != 0)
            continue;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        if (sched_setaffinity(0, sizeof(one), &one) != 0)
            return;
        if (sched_setaffinity(0, sizeof(mask), &mask) != 0)
            hc_warn(SHM, "restoring this thread's CPU mask after a move: %s", strerror(errno));
        ctx->n_unstack++;
        hc_debug(SHM, "rank %d shared CPU %d with rank %d: moved to CPU %d", ctx->rank, cpu, peer,
                 c);
        return;
    }
}

void hc_shm_cpu_check(hc_tl_ctx_t *ctx)
{
    int cpu = sched_getcpu();
    if (cpu < 0 || ctx->nlist == 0)
        return;
    /* of the ranks stacked here, the highest moves: one at a time */
    int stacked = -1, higher = 0;
    for (int i = 0; i < ctx->nlist; i++) {
        hc_tl_ep_t *ep = ctx->list[i];
        if (atomic_load_explicit(&ep->seg->cpu[ep->side], memory_order_relaxed) != cpu + 1)
            atomic_store_explicit(&ep->seg->cpu[ep->side], cpu + 1, memory_order_relaxed);
        if (ep->status != HCOMM_SUCCESS || ep->peer_gone ||
            atomic_load_explicit(&ep->seg->cpu[1 - ep->side], memory_order_relaxed) != cpu + 1)
            continue;
        if (ep->peer > ctx->rank)
            higher = 1;
        else
            stacked = ep->peer;
    }
    if (stacked < 0 || higher || !ctx->unstack)
        return;
    uint64_t now = hc_clock_coarse_ms();
    if (now < ctx->next_unstack_ms)
        return;
    ctx->next_unstack_ms = now + HC_SHM_UNSTACK_MS;
    cpu_move(ctx, cpu, stacked);
}
