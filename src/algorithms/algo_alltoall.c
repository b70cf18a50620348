/* algo_alltoall.c - pairwise-exchange alltoall.
 *
 * At step j rank r exchanges with q = (j - r) mod n, whose partner at step j is
 * r again: r sends block q of SEND and receives into block q of RECV. Each
 * step's sends wait for the previous exchange's receive, which keeps about two
 * exchanges in flight instead of flooding every peer at once.
 *
 * In place, block q of RECV is block q of SEND: it is received into a TMP slot
 * and copied into place once the send of that block is done. Two block-sized
 * slots are used in turn; a slot is reused after its copy is done. */
#include <stdlib.h>

#include "algorithms/algo_builders.h"
#include "base/log.h"

hcomm_status_t hc_algo_pairwise_alltoall(const hc_algo_ctx_t *c, hc_sched_t *s)
{
    int    n = c->nranks, r = c->rank, in_place = c->args->in_place != 0, j = 0;
    size_t cnt = c->args->count, nc = hc_algo_nchunks(c, cnt);
    int   *dep; /* [k]: last receive of chunk k, [(1 + slot) * nc + k]: last copy out of slot */

    if (n == 1)
        return hc_algo_local_copy(c, s);
    if (nc == 0)
        return HCOMM_SUCCESS;
    dep = malloc(3 * nc * sizeof(*dep));
    if (dep == NULL)
        return HCOMM_ERR_NO_MEMORY;
    for (size_t k = 0; k < 3 * nc; k++)
        dep[k] = HC_STEP_NODEP;
    if (in_place)
        s->tmp_bytes = 2 * cnt * c->esize;
    hc_sched_copy(s, hc_algo_at(c, HC_BUF_RECV, (size_t)r * cnt),
                  hc_algo_at(c, HC_BUF_SEND, (size_t)r * cnt), cnt * c->esize, HC_STEP_NODEP,
                  HC_STEP_NODEP);
    for (int step = 0; step < n; step++) {
        int    q    = hc_algo_mod(step - r, n);
        size_t slot = (size_t)(j % 2);
        if (q == r)
            continue;
        for (size_t k = 0; k < nc; k++) {
            size_t     co       = (size_t)q * cnt + hc_algo_chunk_off(cnt, nc, k);
            size_t     bytes    = hc_algo_chunk_len(cnt, nc, k) * c->esize;
            int       *slot_dep = &dep[(1 + slot) * nc + k];
            hc_slice_t tmp = hc_algo_at(c, HC_BUF_TMP, slot * cnt + hc_algo_chunk_off(cnt, nc, k));
            int        sd =
                hc_sched_send(s, q, hc_algo_at(c, HC_BUF_SEND, co), bytes, dep[k], HC_STEP_NODEP);
            if (!in_place) {
                dep[k] = hc_sched_recv(s, q, hc_algo_at(c, HC_BUF_RECV, co), bytes, HC_STEP_NODEP,
                                       HC_STEP_NODEP);
                continue;
            }
            dep[k]    = hc_sched_recv(s, q, tmp, bytes, *slot_dep, HC_STEP_NODEP);
            *slot_dep = hc_sched_copy(s, hc_algo_at(c, HC_BUF_RECV, co), tmp, bytes, sd, dep[k]);
        }
        j++;
    }
    free(dep);
    return HCOMM_SUCCESS;
}

/* alltoallv, pairwise as above: at step j rank r exchanges with q = (j - r)
 * mod n, sending sendcounts[q] elements from sdispls[q] and receiving
 * recvcounts[q] into rdispls[q], cut in chunks. A step's sends wait for the
 * previous exchange's last receive (receives from one peer complete in order),
 * keeping about two exchanges in flight. Not in place. */
hcomm_status_t hc_algo_pairwise_alltoallv(const hc_algo_ctx_t *c, hc_sched_t *s)
{
    int           n = c->nranks, r = c->rank;
    const size_t *sc = c->args->v, *sd = sc + n, *rc = sd + n, *rd = rc + n;
    int           prev = HC_STEP_NODEP;

    if (sc[r] != rc[r]) {
        hc_error(ALGO, "alltoallv: rank %d sends itself %zu elements but expects %zu", r, sc[r],
                 rc[r]);
        return HCOMM_ERR_INVALID_ARG;
    }
    if (sc[r] != 0)
        hc_sched_copy(s, hc_algo_at(c, HC_BUF_RECV, rd[r]), hc_algo_at(c, HC_BUF_SEND, sd[r]),
                      sc[r] * c->esize, HC_STEP_NODEP, HC_STEP_NODEP);
    for (int step = 0; step < n; step++) {
        int q = hc_algo_mod(step - r, n), last = HC_STEP_NODEP;
        if (q == r)
            continue;
        /* pieces that make any disagreement on the pair's count fail the
         * receive (hc_algo_npieces); an empty block is one empty message */
        size_t ns = hc_algo_npieces(c, sc[q]), nr = hc_algo_npieces(c, rc[q]);
        for (size_t k = 0; k < ns; k++)
            hc_sched_send(s, q, hc_algo_at(c, HC_BUF_SEND, sd[q] + k * c->chunk_elems),
                          hc_algo_piece_len(c, sc[q], k) * c->esize, prev, HC_STEP_NODEP);
        for (size_t k = 0; k < nr; k++)
            last = hc_sched_recv(s, q, hc_algo_at(c, HC_BUF_RECV, rd[q] + k * c->chunk_elems),
                                 hc_algo_piece_len(c, rc[q], k) * c->esize, HC_STEP_NODEP,
                                 HC_STEP_NODEP);
        if (last != HC_STEP_NODEP)
            prev = last;
    }
    return HCOMM_SUCCESS;
}
