/* hcomm-topo: shows the topology hcomm discovers (or a topology file, or a
 * synthetic cluster), the plans built on it (rings, trees, node and rail
 * groups), the cost model's predicted allreduce and alltoall times per
 * algorithm, and what a communicator's selection pipeline chooses and why. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "algorithms/select.h"
#include "base/params.h"
#include "topology/cost.h"
#include "topology/plan.h"
#include "topology/topo.h"
#include "transport/transport.h"

typedef struct topo_opts {
    const char *file;
    int         nranks;
    int         nodes, ppn, nics, round_robin;
    int         nrings, dot, quiet, transports_only;
    const char *dump;
    size_t      minb, maxb;
} topo_opts_t;

static void usage(FILE *f)
{
    fprintf(
        f,
        "Usage: hcomm-topo [options]\n"
        "Shows the cluster model, the plans hcomm builds on it, the cost model's\n"
        "predicted allreduce and alltoall times, and the algorithm a communicator on\n"
        "this model selects (HCOMM_ALGO and HCOMM_TUNING_FILE apply, as in a job).\n"
        "Without --topo or --synthetic: this host, as hwloc sees it (one rank, or\n"
        "--ranks N ranks on this host).\n"
        "  --topo FILE           load a topology file (HCOMM_TOPO_FILE format, docs/topology.md)\n"
        "  --ranks N             ranks in the file (needed with --topo), or on this host (default "
        "1)\n"
        "  --synthetic NxP[xK]   N nodes of P ranks with K NICs each (default K = 1)\n"
        "  --round-robin         synthetic placement: rank r on node r %% N\n"
        "  --rings K             build K rings (default 2)\n"
        "  --dot                 write the rings and trees as Graphviz instead\n"
        "  --dump FILE           also write the model as a topology file\n"
        "  --quiet               plans: summaries only, no member lists\n"
        "  --transports          only which transports open on this host and which\n"
        "                        one a pair of ranks would use\n"
        "  -b SIZE, -e SIZE      predicted sizes, doubling (default 8 to 64M)\n"
        "  -h, --help            this help\n");
}

/* A whole decimal number in lo..hi into *out; -1 (and *out untouched) if not. */
static int parse_num(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno  = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_opts(int argc, char **argv, topo_opts_t *o)
{
    static const struct option lo[] = {
        {"topo", required_argument, NULL, 'T'},   {"ranks", required_argument, NULL, 'n'},
        {"synthetic", required_argument, NULL, 'S'}, {"round-robin", no_argument, NULL, 'R'},
        {"rings", required_argument, NULL, 'k'},  {"dot", no_argument, NULL, 'D'},
        {"quiet", no_argument, NULL, 'q'},        {"help", no_argument, NULL, 'h'},
        {"dump", required_argument, NULL, 'U'},   {"transports", no_argument, NULL, 't'},
        {NULL, 0, NULL, 0}};
    int c;
    *o = (topo_opts_t){.nrings = 2, .minb = 8, .maxb = (size_t)64 << 20, .nics = 1};
    while ((c = getopt_long(argc, argv, "b:e:h", lo, NULL)) != -1) {
        switch (c) {
        case 'T': o->file = optarg; break;
        case 'n':
            if (parse_num(optarg, 1, 1 << 24, &o->nranks) != 0) {
                fprintf(stderr, "hcomm-topo: --ranks wants 1 to %d, got %s\n", 1 << 24, optarg);
                return 2;
            }
            break;
        case 'S': {
            int used = 0, got = sscanf(optarg, "%dx%dx%d%n", &o->nodes, &o->ppn, &o->nics, &used);
            if (got < 3) /* NxP alone */
                got = sscanf(optarg, "%dx%d%n", &o->nodes, &o->ppn, &used);
            if (got < 2 || optarg[used] != '\0' || o->nodes < 1 || o->ppn < 1 || o->nics < 1) {
                fprintf(stderr, "hcomm-topo: --synthetic wants NODESxPPN[xNICS], got %s\n", optarg);
                return 2;
            }
            break;
        }
        case 'R': o->round_robin = 1; break;
        case 'k':
            if (parse_num(optarg, 1, 64, &o->nrings) != 0) {
                fprintf(stderr, "hcomm-topo: --rings wants 1 to 64, got %s\n", optarg);
                return 2;
            }
            break;
        case 'D': o->dot = 1; break;
        case 'q': o->quiet = 1; break;
        case 'U': o->dump = optarg; break;
        case 't': o->transports_only = 1; break;
        case 'b':
        case 'e':
            if (hc_params_parse_size(optarg, c == 'b' ? &o->minb : &o->maxb) != 0) {
                fprintf(stderr, "hcomm-topo: bad size %s\n", optarg);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 1;
        default: usage(stderr); return 2;
        }
    }
    if (o->nrings < 1 || o->minb == 0 || o->maxb < o->minb) {
        fprintf(stderr, "hcomm-topo: --rings must be >= 1 and 0 < -b <= -e\n");
        return 2;
    }
    if (o->file != NULL && o->nranks < 1) {
        fprintf(stderr, "hcomm-topo: --topo needs --ranks N, the ranks the file places\n");
        return 2;
    }
    return 0;
}

/* The model to show: a file, a synthetic cluster, or this host. */
static hcomm_status_t make_cluster(const topo_opts_t *o, hc_cluster_t **c)
{
    if (o->file != NULL)
        return hc_cluster_load(o->file, o->nranks, c);
    if (o->nodes > 0)
        return hc_cluster_synthetic(o->nodes, o->ppn, o->nics, o->round_robin, c);
    int n = o->nranks > 0 ? o->nranks : 1;
    hc_rank_topo_t *r = calloc((size_t)n, sizeof(*r));
    if (r == NULL)
        return HCOMM_ERR_NO_MEMORY;
    int            owner;
    hcomm_status_t st = hc_topo_discover(&r[0], NULL, 0.0, &owner);
    for (int i = 1; i < n && st == HCOMM_SUCCESS; i++)
        r[i] = r[0];
    if (st == HCOMM_SUCCESS)
        st = hc_cluster_build(r, n, c);
    free(r);
    return st;
}

static void print_host(const hc_rank_topo_t *t)
{
    printf("host %s: %d NUMA node(s), bound to CPUs %s (%d) on NUMA %d\n", t->hostname, t->nnuma,
           t->cpuset, t->ncpus, t->numa);
    for (int i = 0; i < t->nnics; i++)
        printf("  nic %-10s %6.2f GB/s  numa %d\n", t->nics[i].name, t->nics[i].speed_gbps,
               t->nics[i].numa);
    for (int i = 0; i < t->ngpus; i++)
        printf("  gpu %s\n", t->gpus[i]);
}

static void print_model(const hc_cluster_t *c, const topo_opts_t *o)
{
    static const char *const cls[HC_LINK_CLASS_COUNT] = {"self", "same_numa", "cross_numa",
                                                         "cross_node"};
    printf("# cluster: %d ranks on %d nodes\n", c->nranks, c->nnodes);
    for (int k = 1; k < HC_LINK_CLASS_COUNT; k++)
        printf("#   link %-10s alpha %7.2f us  bw %7.2f GB/s\n", cls[k], c->link[k].alpha_us,
               c->link[k].bw_gbps);
    printf("#   reduce %.2f GB/s\n", c->reduce_gbps);
    if (c->ranks != NULL)
        print_host(&c->ranks[0]);
    for (int n = 0; n < c->nnodes && !o->quiet; n++) {
        printf("node %d:", n);
        for (int i = c->node_first[n]; i < c->node_first[n + 1]; i++)
            printf(" %d", c->node_ranks[i]);
        printf("\n");
    }
}

static void print_list(const char *what, int idx, const int *v, int n, int quiet)
{
    printf("%s %d (%d ranks)%s", what, idx, n, quiet ? "\n" : ":");
    for (int i = 0; i < n && !quiet; i++)
        printf(" %d", v[i]);
    if (!quiet)
        printf("\n");
}

static void print_tree(const hc_tree_t *t, int idx, int quiet)
{
    printf("tree %d: root %d", idx, t->root);
    if (quiet) {
        printf("\n");
        return;
    }
    for (int r = 0; r < t->nranks; r++) {
        if (t->nchildren[r] == 0)
            continue;
        printf("  %d->", r);
        for (int k = 0; k < t->nchildren[r]; k++)
            printf("%s%d", k ? "," : "", t->children[r * HC_TREE_MAX_CHILDREN + k]);
    }
    printf("\n");
}

static void print_dot(const hc_rings_t *rings, const hc_tree_t trees[2])
{
    static const char *const colors[] = {"blue", "red", "darkgreen", "orange"};
    printf("digraph hcomm {\n  node [shape=circle];\n");
    for (int k = 0; k < rings->nrings; k++)
        for (int i = 0; i < rings->nranks; i++)
            printf("  %d -> %d [color=%s, label=\"ring%d\"];\n", rings->order[k * rings->nranks + i],
                   rings->order[k * rings->nranks + (i + 1) % rings->nranks], colors[k % 4], k);
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < trees[t].nranks; r++)
            for (int k = 0; k < trees[t].nchildren[r]; k++)
                printf("  %d -> %d [style=dashed, color=%s, label=\"tree%d\"];\n", r,
                       trees[t].children[r * HC_TREE_MAX_CHILDREN + k], t ? "gray40" : "black", t);
    printf("}\n");
}

/* Per size: the cost model's time for each algorithm it prices for coll ("-"
 * where the plans cannot serve it), and the selection pipeline's choice. */
static void print_choices(const hc_plans_t *p, hc_coll_t coll, const topo_opts_t *o)
{
    hc_select_ctx_t sc    = {.nranks = p->cluster->nranks, .plans = p};
    size_t          chunk = hc_params_get()->chunk_bytes;
    printf("# %s: predicted time (us) per algorithm, chunk %zu bytes; the choice and its stage\n"
           "#%11s", hc_coll_name(coll), chunk, coll == HC_COLL_ALLTOALL ? "peer bytes" : "bytes");
    for (int a = 1; a < HC_ALGO_COUNT; a++)
        if (hc_algo_cost(coll, (hc_algo_t)a) != HC_COST_NONE)
            printf(" %12s", hc_algo_name((hc_algo_t)a));
    printf(" %12s %10s\n", "chosen", "by");
    for (size_t b = o->minb; b <= o->maxb; b = b > SIZE_MAX / 2 ? SIZE_MAX : b * 2) {
        hc_coll_args_t args = {.coll = coll, .count = b, .dtype = HCOMM_UINT8, .op = HCOMM_SUM};
        printf(" %11zu", b);
        for (int a = 1; a < HC_ALGO_COUNT; a++) {
            hc_cost_algo_t cost = hc_algo_cost(coll, (hc_algo_t)a);
            if (cost == HC_COST_NONE)
                continue;
            if (hc_algo_serves(coll, (hc_algo_t)a, p))
                printf(" %12.2f", hc_cost_us(p->cluster, cost, b, chunk));
            else
                printf(" %12s", "-");
        }
        hc_choice_t c = hc_select(&sc, &args);
        printf(" %12s %10s\n", hc_algo_name(c.algo), hc_chosen_by_name(c.by));
        if (b == SIZE_MAX) /* -e near 2^64: the doubling ends there, not at 0 */
            break;
    }
}

/* Which transports of this build open here, and the choice a job makes for a
 * pair inside a host and between hosts, assuming every rank opens what this
 * host opens (a job logs each rank's real choice at info level). */
static void print_transports(void)
{
    const hc_params_t *pa     = hc_params_get();
    hc_peer_info_t     self   = {.pid = (int32_t)getpid()};
    hc_tl_params_t     tp     = {.rank = 0, .nranks = 2, .bind_ip = "127.0.0.1", .timeout = 1.0,
                                 .self = &self, .params = pa,
                                 .fabric_only = hc_tl_fabric_only(pa)};
    uint32_t           usable = 0;
    self.host_hash = hc_topo_host_identity(self.hostname, sizeof(self.hostname));
    printf("# transports of this build (HCOMM_TRANSPORT=%s, HCOMM_NET=%s)\n", pa->transport,
           pa->net);
    for (int t = 0; hc_tl_table[t] != NULL; t++) {
        hc_tl_ctx_t   *ctx = NULL;
        hcomm_status_t st  = hc_tl_table[t]->init(&ctx, &tp);
        if (st == HCOMM_SUCCESS) {
            usable |= 1u << t;
            hc_tl_table[t]->fini(ctx);
            printf("transport %-4s opens here\n", hc_tl_table[t]->name);
        } else {
            printf("transport %-4s does not open here: %s (HCOMM_LOG_LEVEL=info says why)\n",
                   hc_tl_table[t]->name, hcomm_status_str(st));
        }
    }
    int forced = hc_tl_forced(pa->transport);
    for (int same = 1; same >= 0 && forced != -2; same--) {
        int t = hc_tl_choose(forced, pa->net, usable, same);
        printf("pair %-12s %s\n", same ? "inside_host" : "across_hosts",
               t >= 0 ? hc_tl_table[t]->name : "none: no transport reaches");
    }
}

int main(int argc, char **argv)
{
    topo_opts_t     o;
    hc_cluster_t   *c     = NULL;
    hc_plans_t      plans = {0};
    struct timespec t0, t1;

    int rc = parse_opts(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    if (o.transports_only) {
        print_transports();
        return 0;
    }
    hcomm_status_t st = make_cluster(&o, &c);
    if (st != HCOMM_SUCCESS) {
        fprintf(stderr, "hcomm-topo: no cluster model: %s\n", hcomm_status_str(st));
        return 1;
    }
    if (o.dump != NULL) {
        FILE *f = fopen(o.dump, "w");
        if (f == NULL || hc_cluster_dump(c, f) != HCOMM_SUCCESS) {
            fprintf(stderr, "hcomm-topo: cannot write %s\n", o.dump);
            rc = 1;
        }
        if (f != NULL)
            fclose(f);
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    st = hc_plans_build(c, o.nrings, &plans); /* takes c over */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (st != HCOMM_SUCCESS) {
        fprintf(stderr, "hcomm-topo: planning failed: %s\n", hcomm_status_str(st));
        return 1;
    }
    if (o.dot) {
        print_dot(&plans.rings, plans.trees);
    } else {
        const hc_hier_t *h = &plans.hier;
        print_model(plans.cluster, &o);
        printf("# plans built in %.3f s\n", (double)(t1.tv_sec - t0.tv_sec) +
                                              1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
        for (int k = 0; k < plans.rings.nrings; k++)
            print_list("ring", k, &plans.rings.order[k * plans.rings.nranks], plans.rings.nranks,
                       o.quiet);
        print_tree(&plans.trees[0], 0, o.quiet);
        print_tree(&plans.trees[1], 1, o.quiet);
        for (int l = 0; l < h->nrails; l++)
            print_list("rail", l, &h->rail_ranks[h->rail_first[l]],
                       h->rail_first[l + 1] - h->rail_first[l], o.quiet);
        print_choices(&plans, HC_COLL_ALLREDUCE, &o);
        print_choices(&plans, HC_COLL_ALLTOALL, &o);
        print_transports();
    }
    hc_plans_free(&plans);
    return rc;
}
