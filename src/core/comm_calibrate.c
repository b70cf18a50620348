/* comm_calibrate.c - measures the cross-node link at init (when the ranks span
 * nodes and no topology file gave the costs): rank 0 and the first rank of
 * another node ping-pong a small message and two large ones; then every rank
 * times an 8-byte allreduce with each algorithm the cost model weighs: rd's
 * gives the cost of a step with all ranks busy, and each is a floor on its
 * algorithm's predicted time.
 * Every rank takes rank 0's figures into its cluster model, where the cost
 * model and selection read them. */
#include <math.h>
#include <stdlib.h>

#include "algorithms/algo.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/params.h"
#include "core/comm.h"
#include "topology/cost.h"

#define CAL_SMALL_ROUNDS 20
#define CAL_MID_BYTES    ((size_t)1 << 19)
#define CAL_BIG_BYTES    ((size_t)1 << 20)
#define CAL_BIG_ROUNDS   3
#define CAL_STEP_ROUNDS  10
#define CAL_STEP_BATCHES 3

/* One blocking call of the measurement, issued inside core (comm is not yet
 * handed out, and its arguments are known good). */
static hcomm_status_t cal_run(hcomm_comm_t comm, hc_coll_t coll, size_t count, hcomm_dtype_t dt,
                              hcomm_op_t op, int peer, const void *sendbuf, void *recvbuf)
{
    hc_coll_args_t a = {.coll = coll, .count = count, .dtype = dt, .op = op, .root = peer,
                        .in_place = sendbuf == recvbuf};
    return hc_coll_issue(comm, &a, sendbuf, recvbuf, NULL);
}

/* Round trips of bytes between rank 0 and peer; returns seconds per round trip. */
static hcomm_status_t cal_pingpong(hcomm_comm_t comm, int peer, void *buf, size_t bytes,
                                   int rounds, double *rtt)
{
    hcomm_status_t st = HCOMM_SUCCESS;
    double         t0 = 0;
    for (int i = -1; i < rounds && st == HCOMM_SUCCESS; i++) { /* round -1 warms up */
        if (i == 0)
            t0 = hc_clock_now();
        /* rank 0 sends first, its peer answers */
        for (int k = 0; k < 2 && st == HCOMM_SUCCESS; k++) {
            int send = (k == 0) == (comm->rank == 0);
            st       = cal_run(comm, send ? HC_COLL_SEND : HC_COLL_RECV, bytes, HCOMM_UINT8,
                               HCOMM_SUM, comm->rank == 0 ? peer : 0, send ? buf : NULL,
                               send ? NULL : buf);
        }
    }
    *rtt = (hc_clock_now() - t0) / rounds;
    return st;
}

/* Seconds of an 8-byte allreduce with algo forced: CAL_STEP_BATCHES batches
 * of CAL_STEP_ROUNDS back to back, the fastest batch's mean (what a loop of
 * calls pays; the fastest single call read 3-22 us a round across launches of
 * one layout where the batches read 17-38 and followed the launch's speed). */
static hcomm_status_t cal_batch(hcomm_comm_t comm, hc_algo_t algo, double *sec)
{
    float          in[2] = {0, 0}, out[2];
    double         best  = INFINITY;
    hcomm_status_t st;

    comm->timing = algo;
    st = cal_run(comm, HC_COLL_ALLREDUCE, 2, HCOMM_FLOAT32, HCOMM_SUM, 0, in, out); /* warm up */
    for (int b = 0; b < CAL_STEP_BATCHES && st == HCOMM_SUCCESS; b++) {
        double t0 = hc_clock_now();
        for (int i = 0; i < CAL_STEP_ROUNDS && st == HCOMM_SUCCESS; i++)
            st = cal_run(comm, HC_COLL_ALLREDUCE, 2, HCOMM_FLOAT32, HCOMM_SUM, 0, in, out);
        best = fmin(best, (hc_clock_now() - t0) / CAL_STEP_ROUNDS);
    }
    comm->timing = HC_ALGO_AUTO;
    *sec = st == HCOMM_SUCCESS ? best : 0;
    return st;
}

/* Every algorithm the cost model weighs (the ring aside: it never wins small)
 * times its 8-byte allreduce; rd's per round is also the step floor: each of
 * its rounds needs every rank, so where ranks outnumber cores it includes
 * their waits to be scheduled, which the ping-pong (two ranks busy, the others
 * asleep) does not see. The slowest rank's figures go to every rank. */
static hcomm_status_t cal_small(hcomm_comm_t comm)
{
    double         t[HC_COST_ALGO_COUNT] = {0}, slowest[HC_COST_ALGO_COUNT];
    hcomm_status_t st = HCOMM_SUCCESS;
    int            n = comm->nranks, rounds = 0;
    while ((2 << rounds) <= n) /* rounds among the largest power of two <= n */
        rounds++;
    if ((n & (n - 1)) != 0)
        rounds += 2; /* fold in and out */
    for (int al = 1; al < HC_ALGO_COUNT && st == HCOMM_SUCCESS; al++) {
        hc_cost_algo_t cost = hc_algo_cost(HC_COLL_ALLREDUCE, (hc_algo_t)al);
        if (cost != HC_COST_NONE && cost != HC_COST_RING &&
            hc_algo_serves(HC_COLL_ALLREDUCE, (hc_algo_t)al, &comm->plans))
            st = cal_batch(comm, (hc_algo_t)al, &t[cost]);
    }
    comm->timing = HC_ALGO_RD; /* the same schedule on every rank, whatever the model says */
    if (st == HCOMM_SUCCESS)
        st = cal_run(comm, HC_COLL_ALLREDUCE, HC_COST_ALGO_COUNT, HCOMM_FLOAT64, HCOMM_MAX, 0, t,
                     slowest);
    comm->timing = HC_ALGO_AUTO;
    hc_comm_cache_clear(comm); /* selection may pick another for these sizes now */
    if (st != HCOMM_SUCCESS)
        return st;
    hc_cluster_t *cl = comm->plans.cluster;
    cl->step_us      = rounds > 0 ? slowest[HC_COST_RD] * 1e6 / rounds : 0;
    for (int a = 0; a < HC_COST_ALGO_COUNT; a++)
        cl->small_us[a] = slowest[a] * 1e6;
    hc_info(INIT, "a step with every rank busy: %.1f us", cl->step_us);
    hc_info(INIT, "8-byte allreduce measured (us): rd %.1f rabenseifner %.1f tree %.1f hier %.1f "
            "leader %.1f", cl->small_us[HC_COST_RD], cl->small_us[HC_COST_RABENSEIFNER],
            cl->small_us[HC_COST_TREE], cl->small_us[HC_COST_HIER], cl->small_us[HC_COST_LEADER]);
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_comm_calibrate(hcomm_comm_t comm)
{
    const hc_cluster_t *cl = comm->plans.cluster;
    if (cl == NULL || cl->nnodes < 2 || hc_params_get()->topo_file[0] != '\0' ||
        !hc_params_get()->calibrate)
        return HCOMM_SUCCESS;
    int peer = cl->node_ranks[cl->node_first[1]]; /* first rank of node 1 */
    double link[2] = {0, 0};                      /* alpha us, bandwidth GB/s */
    hcomm_status_t st = HCOMM_SUCCESS;
    if (comm->rank == 0 || comm->rank == peer) {
        void *buf = calloc(1, CAL_BIG_BYTES);
        double small, mid = 0, big = 0;
        int    other = comm->rank == 0 ? peer : 0;
        if (buf == NULL)
            return HCOMM_ERR_NO_MEMORY;
        st = cal_pingpong(comm, other, buf, 8, CAL_SMALL_ROUNDS, &small);
        if (st == HCOMM_SUCCESS)
            st = cal_pingpong(comm, other, buf, CAL_MID_BYTES, CAL_BIG_ROUNDS, &mid);
        if (st == HCOMM_SUCCESS)
            st = cal_pingpong(comm, other, buf, CAL_BIG_BYTES, CAL_BIG_ROUNDS, &big);
        free(buf);
        /* the slope between two large sizes: a burst the link lets through at
         * once (tbf's bucket, a switch's buffer) is in both and cancels; the
         * slope from 8 bytes counted 256 KB of tbf burst as 30% more bandwidth */
        if (st == HCOMM_SUCCESS && big > mid) {
            link[0] = small / 2 * 1e6;
            link[1] = (double)(CAL_BIG_BYTES - CAL_MID_BYTES) / ((big - mid) / 2) / 1e9;
        }
    }
    /* rank 0's figures to everyone over the bootstrap ring, whose waits sleep in
     * poll(): ranks that take no part leave the CPUs to the two that measure.
     * Everyone takes part, so a failure above cannot leave a rank waiting. */
    double *all = calloc((size_t)comm->nranks * 2, sizeof(double));
    if (all == NULL)
        return HCOMM_ERR_NO_MEMORY;
    all[2 * comm->rank]     = link[0];
    all[2 * comm->rank + 1] = link[1];
    hcomm_status_t bst = hc_bootstrap_allgather(comm->bs, all, 2 * sizeof(double));
    link[0] = all[0], link[1] = all[1];
    free(all);
    if (st == HCOMM_SUCCESS)
        st = bst;
    if (st == HCOMM_SUCCESS && link[1] > 0) {
        comm->plans.cluster->link[HC_LINK_CROSS_NODE].alpha_us = link[0];
        comm->plans.cluster->link[HC_LINK_CROSS_NODE].bw_gbps  = link[1];
        hc_info(INIT, "cross-node link measured: %.1f us, %.3f GB/s", link[0], link[1]);
    }
    /* every rank knows rank 0's figures now, so all take this step or none */
    if (st == HCOMM_SUCCESS && link[1] > 0)
        st = cal_small(comm);
    return st;
}
