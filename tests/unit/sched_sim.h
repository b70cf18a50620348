/* sched_sim.h - a serial simulator of the executor (src/core/exec.c) for schedule
 * tests: it runs every rank's schedule over real buffers and reports, in
 * sim_err, the first thing that went wrong.
 *
 * Semantics: a step starts once its dependencies are done and, for a send or
 * receive, once the earlier steps to or from the same peer started; messages
 * between a pair are FIFO and matched by order; a send completes when its data
 * is taken, which needs the matching receive posted (or, in eager runs, happens
 * at once); receives are delivered in pieces; DIV steps run last. Among the
 * ready events one is picked at random (seeded), so runs explore different
 * interleavings. It fails on deadlock, length mismatch, messages nobody
 * receives, out-of-bounds slices, reads of bytes nobody wrote, and races: a
 * step starting to write bytes that an unfinished step reads or writes, or to
 * read bytes an unfinished step writes. */
#ifndef HC_TEST_SCHED_SIM_H
#define HC_TEST_SCHED_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "algorithms/algo.h"
#include "algorithms/sched.h"
#include "algorithms/select.h"

#define SIM_MAXR 16 /* ranks (at most 32: per-step rank bitmasks) */
#define SIM_MAXBUF (3 * HC_BUF_PER_OP)

typedef struct sim_ev {
    int      rank, kind;
    uint32_t step;
} sim_ev_t;

/* The caller sets s, mem, def (1 per written byte), memsize, bufoff and bufsz
 * (where each buffer index lies in mem; aliasing buffers overlap). */
typedef struct sim_rank {
    const hc_sched_t *s;
    unsigned char    *mem, *def, *wr; /* bytes; defined; an unfinished step writes */
    uint16_t         *rd;             /* unfinished steps reading each byte */
    size_t            memsize, bufoff[SIM_MAXBUF], bufsz[SIM_MAXBUF];
    uint8_t          *state, *flags;
    int32_t          *pending, *order_next, *dstart, *dlist;
    uint32_t         *seqno, *seqstart[2], *seqlist[2];
    uint32_t         *know; /* per step: ranks it has news from (barriers) */
    unsigned char   **msg;
    size_t           *got;
} sim_rank_t;

typedef struct sim {
    int        n, eager;
    uint64_t   rng; /* nonzero seed */
    sim_rank_t rk[SIM_MAXR];
    sim_ev_t  *ev;
    size_t     nev, capev;
} sim_t;

extern char sim_err[768];

void sim_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Starts a simulation of n ranks: clears sim_err and sm, seeds the interleaving. */
void sim_begin(sim_t *sm, int n, int eager, uint64_t seed);
/* Runs the schedules; 0, or -1 with sim_err set. */
int sim_run(sim_t *sm);
/* Frees what sim_run allocated and mem/def (malloc'd by the caller). */
void sim_free(sim_t *sm);
/* sim_free, then destroys the schedules the ranks ran (built by the test). */
void sim_end(sim_t *sm);

/* Message direction of a step kind: 0 send, 1 receive, -1 local. */
int sim_msg_dir(int kind);
/* The slices a step uses, the written one (if any) first; returns the count. */
int sim_step_uses(const hc_step_t *st, hc_slice_t sl[3], int *has_write);

/* Where one op's buffers lie in a rank's memory: sizes, and in place how SEND
 * and RECV alias (offsets into one region of regsz bytes). */
typedef struct lay {
    size_t sendsz, recvsz, regsz, send_at, recv_at;
} lay_t;

/* The layout of op a on rank r of n, as include/hcomm.h defines the buffers. */
lay_t sim_layout(const hc_coll_args_t *a, int n, int r);
/* Does rank r hold meaningful input in SEND for op a? */
int   sim_has_input(const hc_coll_args_t *a, const lay_t *l, int r);
/* Gives rank k schedule s and one allocation holding its op's region (layout
 * l) and, from tmp_at on, the schedule's TMP; bytes start undefined (0xa5). */
void  sim_place(sim_rank_t *k, const hc_sched_t *s, const lay_t *l, size_t tmp_at);

/* Reference arithmetic for int8, int32, float32, float64 and sum, min, max,
 * avg (as sum): what the executor's kernels must agree with. */
size_t ref_esize(int dtype);
/* buf[i] = v in dtype (int8, int32, float32, float64). */
void   ref_store(void *buf, size_t i, int dtype, long v);
/* Rank r's input elements first.. first + n - 1: small integers, exact in
 * every type, so that sums in any order agree. */
void   ref_fill(void *buf, size_t n, int dtype, int r, size_t first);
int    ref_reduce(void *d, const void *a, const void *b, size_t n, int dtype, int op);
void   ref_div(void *d, size_t n, int dtype, int div);

#define SIM_STEP_FMT "rank %d step %u (kind %d peer %d len %zu)"
#define SIM_STEP_ARGS(st) r, i, (st)->kind, (st)->peer, (st)->len

/* Selection's choice for a communicator without plans (the size rule, or
 * what params force), as the tests ask it. */
static inline hc_algo_t sim_select(const hc_coll_args_t *a, int nranks, const hc_params_t *p)
{
    hc_select_ctx_t sc = {.nranks = nranks, .params = p};
    return hc_select(&sc, a).algo;
}

#endif
