/* algo_tree.c - pipelined tree reduce, broadcast and allreduce on a plan's
 * tree (topology/plan.h), and allreduce over a double tree.
 *
 * Chunk by chunk, a rank reduces its children's partial sums into its own and
 * passes the result to its parent; broadcast runs the other way. Allreduce
 * does both per chunk and keeps its partial sums in RECV, which every rank
 * has; reduce keeps them in TMP slots on non-root ranks, whose RECV is not
 * theirs to use. The root's result goes down unchanged, so all ranks end with
 * the same bits. Every rank emits its steps chunk by chunk, so the messages
 * between two ranks come in the same order on both sides, also when the two
 * trees of a double tree link the same pair. */
#include "algorithms/algo_builders.h"
#include "algorithms/algo_plan.h"
#include "base/log.h"

/* Chunks of its partial sum an interior rank of a reduce keeps in flight. */
#define TREE_SLOTS 8

static const int *tree_children(const hc_tree_t *t, int r)
{
    return &t->children[(size_t)r * HC_TREE_MAX_CHILDREN];
}

/* Checks what rank reads of t: its parent and children, linked both ways. */
static hcomm_status_t tree_check(const hc_tree_t *t, int rank)
{
    int n = t->nranks, p, nch, ok;

    if (t->parent == NULL || t->nchildren == NULL || t->children == NULL || n < 1 || rank < 0 ||
        rank >= n || t->root < 0 || t->root >= n) {
        hc_error(ALGO, "tree: rank %d, root %d of %d ranks, or no arrays", rank, t->root, n);
        return HCOMM_ERR_INVALID_ARG;
    }
    p   = t->parent[rank];
    nch = t->nchildren[rank];
    ok  = (p == -1) == (rank == t->root) && p >= -1 && p < n && nch >= 0 &&
         nch <= HC_TREE_MAX_CHILDREN;
    if (ok && p >= 0) {
        int found = 0;
        for (int i = 0; i < t->nchildren[p] && i < HC_TREE_MAX_CHILDREN; i++)
            found |= tree_children(t, p)[i] == rank;
        ok = found;
    }
    for (int i = 0; ok && i < nch; i++) {
        int ch = tree_children(t, rank)[i];
        ok     = ch >= 0 && ch < n && ch != rank && t->parent[ch] == rank;
    }
    if (!ok) {
        hc_error(ALGO, "tree: rank %d has an inconsistent parent %d or children", rank, p);
        return HCOMM_ERR_INVALID_ARG;
    }
    return HCOMM_SUCCESS;
}

/* Allreduce of elements [co, co + cl): children's sums into RECV, up to the
 * parent, the result back down (into RECV once the send up read it). */
static void tree_ar_chunk(const hc_algo_ctx_t *c, hc_sched_t *s, const hc_tree_t *t, size_t co,
                          size_t cl)
{
    const hc_coll_args_t *a = c->args;
    int                   r = c->rank, parent = t->parent[r], acc = HC_STEP_NODEP, down;
    const int            *ch    = tree_children(t, r);
    size_t                bytes = cl * c->esize;
    hc_slice_t snd = hc_algo_at(c, HC_BUF_SEND, co), rcv = hc_algo_at(c, HC_BUF_RECV, co);

    if (cl == 0)
        return;
    for (int i = 0; i < t->nchildren[r]; i++)
        acc = hc_sched_recv_reduce(s, ch[i], rcv, i == 0 ? snd : rcv, bytes, a->dtype, a->op, acc,
                                   HC_STEP_NODEP);
    down = acc;
    if (parent >= 0) {
        int up =
            hc_sched_send(s, parent, t->nchildren[r] > 0 ? rcv : snd, bytes, acc, HC_STEP_NODEP);
        int reads_recv = t->nchildren[r] > 0 || a->in_place;
        down = hc_sched_recv(s, parent, rcv, bytes, reads_recv ? up : HC_STEP_NODEP, HC_STEP_NODEP);
    }
    for (int i = 0; i < t->nchildren[r]; i++)
        hc_sched_send(s, ch[i], rcv, bytes, down, HC_STEP_NODEP);
}

static void tree_allreduce(const hc_algo_ctx_t *c, hc_sched_t *s, const hc_tree_t *t)
{
    size_t cnt = c->args->count, nc = hc_algo_nchunks(c, cnt);

    for (size_t k = 0; k < nc; k++)
        tree_ar_chunk(c, s, t, hc_algo_chunk_off(cnt, nc, k), hc_algo_chunk_len(cnt, nc, k));
    hc_algo_avg_div(c, s, cnt);
}

static void tree_broadcast(const hc_algo_ctx_t *c, hc_sched_t *s, const hc_tree_t *t)
{
    int        r = c->rank, parent = t->parent[r];
    const int *ch  = tree_children(t, r);
    size_t     cnt = c->args->count, nc = hc_algo_nchunks(c, cnt);

    if (parent < 0 && cnt != 0)
        hc_sched_copy(s, hc_algo_at(c, HC_BUF_RECV, 0), hc_algo_at(c, HC_BUF_SEND, 0),
                      cnt * c->esize, HC_STEP_NODEP, HC_STEP_NODEP);
    for (size_t k = 0; k < nc; k++) {
        size_t co = hc_algo_chunk_off(cnt, nc, k), bytes = hc_algo_chunk_len(cnt, nc, k) * c->esize;
        hc_slice_t from = hc_algo_at(c, parent < 0 ? HC_BUF_SEND : HC_BUF_RECV, co);
        int        rv   = HC_STEP_NODEP;
        if (parent >= 0)
            rv = hc_sched_recv(s, parent, from, bytes, HC_STEP_NODEP, HC_STEP_NODEP);
        for (int i = 0; i < t->nchildren[r]; i++)
            hc_sched_send(s, ch[i], from, bytes, rv, HC_STEP_NODEP);
    }
}

/* Reduce: the root sums into RECV, interior ranks into TMP slot k % slots once
 * the send that read the slot's previous chunk is done, leaves send SEND. */
static void tree_reduce(const hc_algo_ctx_t *c, hc_sched_t *s, const hc_tree_t *t)
{
    const hc_coll_args_t *a = c->args;
    int                   r = c->rank, parent = t->parent[r], nch = t->nchildren[r];
    const int            *ch  = tree_children(t, r);
    size_t                cnt = a->count, nc = hc_algo_nchunks(c, cnt);
    size_t                slots      = nc < TREE_SLOTS ? nc : TREE_SLOTS;
    size_t                slot_elems = nc == 0 ? 0 : hc_algo_chunk_len(cnt, nc, 0);
    int                   sent[TREE_SLOTS];

    if (parent >= 0 && nch > 0)
        s->tmp_bytes = slots * slot_elems * c->esize;
    for (size_t k = 0; k < nc; k++) {
        size_t co = hc_algo_chunk_off(cnt, nc, k), bytes = hc_algo_chunk_len(cnt, nc, k) * c->esize;
        hc_slice_t mine = hc_algo_at(c, HC_BUF_SEND, co);
        hc_slice_t acc  = parent < 0 ? hc_algo_at(c, HC_BUF_RECV, co)
                                     : hc_algo_at(c, HC_BUF_TMP, (k % slots) * slot_elems);
        int        last = k >= slots && parent >= 0 && nch > 0 ? sent[k % slots] : HC_STEP_NODEP;
        for (int i = 0; i < nch; i++)
            last = hc_sched_recv_reduce(s, ch[i], acc, i == 0 ? mine : acc, bytes, a->dtype, a->op,
                                        last, HC_STEP_NODEP);
        if (parent >= 0)
            sent[k % slots] =
                hc_sched_send(s, parent, nch > 0 ? acc : mine, bytes, last, HC_STEP_NODEP);
    }
    if (parent < 0)
        hc_algo_avg_div(c, s, cnt);
}

hcomm_status_t hc_algo_tree(const hc_coll_args_t *args, const hc_tree_t *tree, int rank,
                            size_t chunk_bytes, hc_sched_t **sched_p)
{
    hc_algo_ctx_t  c;
    hc_sched_t    *s;
    hcomm_status_t st;

    if (args == NULL || tree == NULL || sched_p == NULL) {
        hc_error(ALGO, "tree: NULL argument");
        return HCOMM_ERR_INVALID_ARG;
    }
    st = hc_algo_ctx_init(&c, args, tree->nranks, rank, chunk_bytes);
    if (st == HCOMM_SUCCESS)
        st = tree_check(tree, rank);
    if (st != HCOMM_SUCCESS)
        return st;
    if (args->coll != HC_COLL_ALLREDUCE && args->coll != HC_COLL_BROADCAST &&
        args->coll != HC_COLL_REDUCE) {
        hc_error(ALGO, "tree does not implement %s", hc_coll_name(args->coll));
        return HCOMM_ERR_UNSUPPORTED;
    }
    if (args->coll != HC_COLL_ALLREDUCE && args->root != tree->root) {
        hc_error(ALGO, "%s: root %d, tree rooted at %d", hc_coll_name(args->coll), args->root,
                 tree->root);
        return HCOMM_ERR_INVALID_ARG;
    }
    s = hc_sched_create(tree->nranks, rank);
    if (s == NULL)
        return HCOMM_ERR_NO_MEMORY;
    if (tree->nranks == 1)
        hc_algo_local_copy(&c, s);
    else if (args->coll == HC_COLL_ALLREDUCE)
        tree_allreduce(&c, s, tree);
    else if (args->coll == HC_COLL_BROADCAST)
        tree_broadcast(&c, s, tree);
    else
        tree_reduce(&c, s, tree);
    return hc_algo_finish(&c, "tree", HCOMM_SUCCESS, s, sched_p);
}

/* The first ceil(count / 2) elements go over trees[0], the rest over trees[1],
 * chunk k of both halves one after the other. */
hcomm_status_t hc_algo_double_tree(const hc_coll_args_t *args, const hc_tree_t trees[2], int rank,
                                   size_t chunk_bytes, hc_sched_t **sched_p)
{
    hc_algo_ctx_t  c;
    hc_sched_t    *s;
    hcomm_status_t st;
    size_t         len[2], nc;

    if (args == NULL || trees == NULL || sched_p == NULL) {
        hc_error(ALGO, "double tree: NULL argument");
        return HCOMM_ERR_INVALID_ARG;
    }
    if (args->coll != HC_COLL_ALLREDUCE || trees[0].nranks != trees[1].nranks) {
        hc_error(ALGO, "double tree: %s over trees of %d and %d ranks", hc_coll_name(args->coll),
                 trees[0].nranks, trees[1].nranks);
        return args->coll != HC_COLL_ALLREDUCE ? HCOMM_ERR_UNSUPPORTED : HCOMM_ERR_INVALID_ARG;
    }
    st = hc_algo_ctx_init(&c, args, trees[0].nranks, rank, chunk_bytes);
    for (int i = 0; i < 2 && st == HCOMM_SUCCESS; i++)
        st = tree_check(&trees[i], rank);
    if (st != HCOMM_SUCCESS)
        return st;
    s = hc_sched_create(trees[0].nranks, rank);
    if (s == NULL)
        return HCOMM_ERR_NO_MEMORY;
    if (trees[0].nranks == 1) {
        hc_algo_local_copy(&c, s);
        return hc_algo_finish(&c, "double_tree", HCOMM_SUCCESS, s, sched_p);
    }
    len[1] = args->count / 2;
    len[0] = args->count - len[1];
    nc     = hc_algo_nchunks(&c, len[0]);
    for (size_t k = 0; k < nc; k++)
        for (int i = 0; i < 2; i++)
            tree_ar_chunk(&c, s, &trees[i],
                          (i == 0 ? 0 : len[0]) + hc_algo_chunk_off(len[i], nc, k),
                          hc_algo_chunk_len(len[i], nc, k));
    hc_algo_avg_div(&c, s, args->count);
    return hc_algo_finish(&c, "double_tree", HCOMM_SUCCESS, s, sched_p);
}
