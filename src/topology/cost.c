/* cost.c - alpha-beta-gamma predictions for allreduce and alltoall
 * algorithms. A step that crosses nodes anywhere waits for the slowest link it
 * uses, so each algorithm is priced with the worst link class among the pairs
 * it talks to. */
#include "topology/cost.h"

#include <math.h>

static const char *const cost_names[HC_COST_ALGO_COUNT] = {
    "ring", "rd", "rabenseifner", "tree", "hier", "leader", "a2a_pairwise", "a2a_hier"};

const char *hc_cost_algo_name(hc_cost_algo_t a)
{
    return (unsigned)a < HC_COST_ALGO_COUNT ? cost_names[a] : "?";
}

/* Seconds-free helpers: alpha in us, bandwidths in GB/s = 1e3 bytes per us. */

static double wire_us(const hc_link_cost_t *l, double bytes)
{
    return bytes / (l->bw_gbps * 1e3);
}

/* A step's fixed cost on link l where nothing hides it: its alpha, but never
 * below the measured cost of a step with every rank busy (on a host with fewer
 * cores than ranks each step waits for its peers to be scheduled). */
static double floor_us(const hc_cluster_t *c, const hc_link_cost_t *l)
{
    return fmax(l->alpha_us, c->step_us);
}

/* steps dependent steps on link l that put wire_us of bytes on it, every rank
 * busy in each: each pays the link's alpha, but the whole never costs less
 * than steps floors (floor_us). The two overlap: while a rank's bytes are on
 * the wire its core serves the others.
 * Measured across namespaces (perf/RESULTS.md), rd's time follows
 * max(floor, alpha + wire) per round, not floor + wire. */
static double busy_us(const hc_cluster_t *c, const hc_link_cost_t *l, double steps,
                      double wire)
{
    return fmax(steps * c->step_us, steps * l->alpha_us + wire);
}

static double xfer_us(const hc_cluster_t *c, const hc_link_cost_t *l, double bytes)
{
    return busy_us(c, l, 1, wire_us(l, bytes));
}

/* The alltoall model adds the floor to the wire time instead: measured with
 * perf/a2a_bench.sh it picks the faster of pairwise and hier that way, where
 * busy_us's overlap let pairwise's n - 1 floors hide behind bytes that small
 * runs send within the tbf burst. */
static double a2a_steps_us(const hc_cluster_t *c, const hc_link_cost_t *l, double steps,
                           double wire)
{
    return steps * floor_us(c, l) + wire;
}

static double reduce_us(const hc_cluster_t *c, double bytes)
{
    return bytes / (c->reduce_gbps * 1e3);
}

/* Ranks of one node whose cross-node traffic shares the node's link at once,
 * when every rank of a node talks across nodes in the same step. */
static double link_share(const hc_cluster_t *c)
{
    return c->nnodes > 1 ? (double)c->nranks / c->nnodes : 1.0;
}

/* The slowest class a flat algorithm meets: the network if there are several
 * nodes, else cross-NUMA if ranks span NUMA domains, else same NUMA. */
static const hc_link_cost_t *worst_link(const hc_cluster_t *c)
{
    if (c->nnodes > 1)
        return &c->link[HC_LINK_CROSS_NODE];
    for (int r = 1; r < c->nranks; r++)
        if (c->numa_of[r] != c->numa_of[0])
            return &c->link[HC_LINK_CROSS_NUMA];
    return &c->link[c->nranks > 1 ? HC_LINK_SAME_NUMA : HC_LINK_SELF];
}

static double ring_us(const hc_cluster_t *c, double S, double chunk)
{
    int    n = c->nranks;
    double b = S / n;
    if (n == 1)
        return 0;
    /* 2(n-1) steps of one block; chunking adds per-chunk latency */
    double nchunks = fmax(1.0, ceil(b / chunk));
    const hc_link_cost_t *l = worst_link(c);
    return busy_us(c, l, 2.0 * (n - 1) + nchunks - 1, 2.0 * (n - 1) * wire_us(l, b)) +
           (n - 1) * reduce_us(c, b);
}

static int pow2(int n)
{
    return (n & (n - 1)) == 0;
}

/* rd's partner of rank r (-1: none) on n ranks, as algo_rd.c pairs them
 * (hc_fold in algorithms/algo_builders.h, which topology/ does not include): with
 * p the largest power of two <= n and rem = n - p, d = 0 is the fold (rank
 * 2i hands its data to 2i + 1 for i < rem), d > 0 the round at distance d
 * among the p that remain. */
static int rd_partner(int r, int n, int d)
{
    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    int rem = n - p;
    if (d == 0)
        return r < 2 * rem ? r ^ 1 : -1;
    if (r < 2 * rem && r % 2 == 0)
        return -1;
    int q = (r < 2 * rem ? r / 2 : r - rem) ^ d;
    return q < rem ? 2 * q + 1 : q + rem;
}

/* One rd step (rd_partner's d): the slowest link any pair uses, and in *share
 * the most ranks of one node whose partners are on other nodes (they share
 * the node's network link). */
static const hc_link_cost_t *round_link(const hc_cluster_t *c, int d, double *share)
{
    int cls = HC_LINK_SELF, most = 0;

    for (int nd = 0; nd < c->nnodes; nd++) {
        int off = 0;
        for (int i = c->node_first[nd]; i < c->node_first[nd + 1]; i++) {
            int r = c->node_ranks[i], q = rd_partner(r, c->nranks, d);
            if (q < 0)
                continue;
            if (c->node_of[q] != nd)
                off++;
            else if (c->numa_of[q] != c->numa_of[r] && cls < HC_LINK_CROSS_NUMA)
                cls = HC_LINK_CROSS_NUMA;
            else if (cls < HC_LINK_SAME_NUMA)
                cls = HC_LINK_SAME_NUMA;
        }
        most = off > most ? off : most;
    }
    *share = most > 0 ? most : 1;
    return &c->link[most > 0 ? HC_LINK_CROSS_NODE : cls];
}

/* One round of rd: every rank sends S; share ranks of a node send theirs over
 * its link. They start at different moments (each waits to be scheduled), so
 * one's latency hides behind another's bytes: the round takes a rank's own
 * transfer or the link's bytes, whichever is longer. */
static double rd_round_us(const hc_cluster_t *c, const hc_link_cost_t *l, double share, double S)
{
    return fmax(xfer_us(c, l, S), wire_us(l, share * S)) + reduce_us(c, S);
}

/* Rounds at distances 1, 2, 4, ...: each exchanges and reduces S. Only some
 * rounds cross nodes (partners of one node are often local), so each is priced
 * by its own link; so are the fold in (with a reduce) and out (without) when n
 * is not a power of two: with nodes of consecutive ranks the folded pairs
 * share a node. */
static double rd_us(const hc_cluster_t *c, double S)
{
    double t = 0, share;
    if (!pow2(c->nranks)) {
        const hc_link_cost_t *l = round_link(c, 0, &share);
        double fold = rd_round_us(c, l, share, S);
        t += 2.0 * fold - reduce_us(c, S);
    }
    for (int d = 1; d * 2 <= c->nranks; d *= 2) {
        const hc_link_cost_t *l = round_link(c, d, &share);
        t += rd_round_us(c, l, share, S);
    }
    return t;
}

/* Priced with the worst link in every round: measured across namespaces, its
 * rounds cost more than their bytes say, so the per-round pricing of rd_us
 * would favour it where it loses. */
static double rabenseifner_us(const hc_cluster_t *c, double S)
{
    int    n     = c->nranks;
    double steps = ceil(log2((double)n));
    const hc_link_cost_t *l = worst_link(c);
    if (n == 1)
        return 0;
    return busy_us(c, l, 2.0 * steps, link_share(c) * 2.0 * (n - 1) / n * wire_us(l, S)) +
           (double)(n - 1) / n * reduce_us(c, S);
}

/* Double binary trees across nodes, a chain inside each node. Inside one
 * node: the chain's steps, piece after piece. Across nodes the two trees share
 * every node's link and each fills the gaps of the other, so the time is the
 * larger of the latency path and the node's link bytes: 2 S out of a node
 * interior in one tree and a leaf in the other. The path runs up and down the
 * trees, each network edge at the step floor, each chain step at its alpha,
 * one more floor per further piece, and the first piece's bytes once (nothing
 * is forwarded before it arrives). Measured across namespaces (4 x 2 ranks,
 * 1 Gbit/s): 8 B to 2 KiB 57-128 us, the path; 4 KiB 95-133, the path and a
 * piece; 8 and 16 KiB 130 and 275 us, 2 S / bw. */
static double tree_us(const hc_cluster_t *c, double S, double chunk)
{
    int    N  = c->nnodes > 0 ? c->nnodes : 1, ppn = c->nranks / N;
    double dx = N > 1 ? ceil(log2((double)N + 1)) - 1 : 0; /* edges root -> leaf node */
    double dl = ppn > 1 ? ppn - 1 : 0;                         /* chain inside a node */
    double half = S / 2, nch = fmax(1.0, ceil(half / chunk)), piece = fmin(chunk, half);
    const hc_link_cost_t *x = worst_link(c), *lo = &c->link[HC_LINK_SAME_NUMA];
    if (c->nranks == 1)
        return 0;
    double reduce = (dx + dl + nch - 1) * reduce_us(c, piece);
    if (N == 1)
        return (2.0 * dl + nch - 1) * xfer_us(c, lo, piece) + reduce;
    double step = floor_us(c, x);
    double path = 2.0 * (dx * step + dl * lo->alpha_us) + (nch - 1) * step + wire_us(x, piece);
    return fmax(path, wire_us(x, 2.0 * S)) + reduce;
}

static double hier_us(const hc_cluster_t *c, double S, double chunk)
{
    int    N   = c->nnodes, p = c->nranks / (N > 0 ? N : 1);
    const hc_link_cost_t *lo = &c->link[HC_LINK_SAME_NUMA], *x = &c->link[HC_LINK_CROSS_NODE];
    double t = 0, b = S / p;
    if (p > 1) /* reduce-scatter and allgather inside the node */
        t += 2.0 * (p - 1) * xfer_us(c, lo, b) + (p - 1) * reduce_us(c, b);
    if (N > 1) { /* p rails run at once, each a ring over N nodes on b bytes */
        double nb = b / N, nch = fmax(1.0, ceil(nb / chunk));
        double steps = 2.0 * (N - 1) + nch - 1, wire = 2.0 * (N - 1) * wire_us(x, nb);
        /* the p rails share the node's link, each filling the others' gaps */
        t += fmax(busy_us(c, x, steps, wire), p * wire) + (N - 1) * reduce_us(c, nb);
    }
    return t;
}

/* Through the nodes' leaders: a binomial reduce and broadcast inside each node
 * and recursive doubling among the N leaders, one message per node and round.
 * Priced as the tree: the longer of the latency path (each chain step at the
 * local alpha, each round at the step floor, one more floor per further
 * piece, the first piece's bytes once) and the busiest leader's link bytes:
 * S per round, and once more where it folded another in (the result back).
 * Measured across namespaces (4 x 2 ranks, 1 Gbit/s): 8 B to 2 KiB 40-72 us
 * where rd took 58-106; 4 KiB 61 us, the tree 95-133; 8 KiB 133 us, as the
 * tree. */
static double leader_us(const hc_cluster_t *c, double S, double chunk)
{
    int    N = c->nnodes > 0 ? c->nnodes : 1, p = c->nranks / N;
    double piece = fmin(chunk, S), nch = fmax(1.0, ceil(S / chunk));
    double up = p > 1 ? ceil(log2((double)p)) : 0;
    double lg = N > 1 ? floor(log2((double)N)) : 0, rounds = lg + (pow2(N) ? 0 : 2);
    /* the busiest leader sends S per round, and folded in, the result back too */
    double sent = lg + (pow2(N) ? 0 : 1);
    const hc_link_cost_t *lo = &c->link[HC_LINK_SAME_NUMA], *x = worst_link(c);
    double chain = 2.0 * up * (lo->alpha_us + wire_us(lo, piece));
    double path  = chain + (rounds + nch - 1) * floor_us(c, x) + (rounds > 0) * wire_us(x, piece);
    return fmax(path, wire_us(x, sent * S)) + (up + rounds + nch - 1) * reduce_us(c, piece);
}

_Static_assert(HC_COST_ALGO_COUNT <= HC_CLUSTER_COST_SLOTS, "hc_cluster_t.small_us too short");

static double model_us(const hc_cluster_t *c, hc_cost_algo_t algo, double S, double chunk)
{
    switch (algo) {
    case HC_COST_RING: return ring_us(c, S, chunk);
    case HC_COST_RD: return rd_us(c, S);
    case HC_COST_RABENSEIFNER: return rabenseifner_us(c, S);
    case HC_COST_TREE: return tree_us(c, S, chunk);
    case HC_COST_HIER: return hier_us(c, S, chunk);
    case HC_COST_LEADER: return leader_us(c, S, chunk);
    default: return INFINITY;
    }
}

/* The model, but never below what the algorithm measured for 8 bytes at init
 * (time only grows with size): where ranks outnumber cores, which steps wait
 * to be scheduled depends on the layout more than any per-step price says. */
double hc_cost_allreduce_us(const hc_cluster_t *c, hc_cost_algo_t algo, size_t bytes,
                            size_t chunk_bytes)
{
    double S = (double)bytes, chunk = chunk_bytes ? (double)chunk_bytes : S;
    if (c->nranks <= 1 || bytes == 0)
        return 0;
    double t = model_us(c, algo, S, chunk);
    return (unsigned)algo < HC_COST_ALGO_COUNT ? fmax(t, c->small_us[algo]) : t;
}

/* Pairwise alltoall: n - 1 exchanges one after another; the p (N - 1) across
 * nodes each pay the network alpha, and the p ranks of a node cross at once,
 * sharing its link: p^2 (N - 1) blocks leave every node. */
static double a2a_pairwise_us(const hc_cluster_t *c, int N, int p, double B)
{
    const hc_link_cost_t *lo = &c->link[HC_LINK_SAME_NUMA], *x = &c->link[HC_LINK_CROSS_NODE];
    double t = a2a_steps_us(c, lo, p - 1, (p - 1) * wire_us(lo, B));
    if (N > 1)
        t += a2a_steps_us(c, x, (double)p * (N - 1), (double)p * p * (N - 1) * wire_us(x, B));
    return t;
}

/* Hierarchical alltoall: a forwarder sends ceil((N - 1) / p) messages of p^2
 * blocks, each paying the network alpha; the node's link carries the same
 * p^2 (N - 1) blocks as pairwise. Added to that, the local part: each rank
 * exchanges with its p - 1 node peers, gathers and scatters about
 * (N - 1) (p - 1) / p messages of p blocks, and copies each remote block about
 * twice (packs and unpacks of small pieces; priced at the local reduction
 * bandwidth, a memory-bound stream too). No overlap is assumed: one chunk
 * carries a whole node pair up to chunk_bytes / p^2 per peer. */
static double a2a_hier_us(const hc_cluster_t *c, int N, int p, double B)
{
    const hc_link_cost_t *lo = &c->link[HC_LINK_SAME_NUMA], *x = &c->link[HC_LINK_CROSS_NODE];
    double fwd = ceil((double)(N - 1) / p), msgs = (N - 1) * (p - 1.0) / p;
    double net = a2a_steps_us(c, x, fwd, (double)p * p * (N - 1) * wire_us(x, B));
    double lb  = (p - 1) * B + 2.0 * msgs * p * B; /* bytes over the node's own links */
    double loc = a2a_steps_us(c, lo, (p - 1) + 2.0 * msgs, wire_us(lo, lb)) +
                 (p > 1 ? 2.0 : 0.0) * (N - 1) * p * B / (c->reduce_gbps * 1e3);
    if (N == 1)
        return a2a_pairwise_us(c, N, p, B);
    return net + loc;
}

double hc_cost_alltoall_us(const hc_cluster_t *c, int hier, size_t bytes_per_peer)
{
    int N = c->nnodes > 0 ? c->nnodes : 1, p = c->nranks / N;
    if (c->nranks <= 1 || bytes_per_peer == 0)
        return 0;
    if (hier && !hc_cluster_nodes_equal(c))
        return INFINITY; /* not built on nodes of unequal size */
    if (p < 1)
        p = 1;
    return hier ? a2a_hier_us(c, N, p, (double)bytes_per_peer)
                : a2a_pairwise_us(c, N, p, (double)bytes_per_peer);
}

double hc_cost_us(const hc_cluster_t *c, hc_cost_algo_t algo, size_t bytes, size_t chunk_bytes)
{
    if (algo == HC_COST_A2A_PAIRWISE || algo == HC_COST_A2A_HIER)
        return hc_cost_alltoall_us(c, algo == HC_COST_A2A_HIER, bytes);
    return hc_cost_allreduce_us(c, algo, bytes, chunk_bytes);
}
