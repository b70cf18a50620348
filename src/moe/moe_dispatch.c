/* moe_dispatch.c - hcomm_moe_dispatch: one row per (token, rank) pair,
 * counts exchanged first (hcomm_alltoall: rows and (row, expert) pairs per
 * peer), rows moved by one hcomm_alltoallv (its self block is a local copy),
 * then expanded into groups by local expert. A rank with bad input says so in
 * the count exchange, so every rank stops before any data moves. After the
 * exchange every rank moves rows: one that cannot (out of memory for what it
 * receives, allocated before the rows move) fails the communicator, so its
 * peers get HCOMM_ERR_REMOTE at once instead of waiting until HCOMM_TIMEOUT. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "core/group.h"
#include "core/handles.h"
#include "device/device.h"
#include "moe/moe.h"

#define BAD_INPUT UINT64_MAX /* in the count exchange: "my input is bad" */

static hcomm_status_t check_input(const hcomm_moe_t m, const void *tokens, size_t T,
                                  const int32_t *ids, const float *w, const hcomm_moe_recv_t *rv)
{
    const char *name = "hcomm_moe_dispatch";
    size_t      k    = (size_t)m->topk;

    if (rv == NULL) {
        hc_error(MOE, "%s: NULL recv", name);
        return HCOMM_ERR_INVALID_ARG;
    }
    if (T > INT32_MAX || T > SIZE_MAX / m->row_bytes / k) {
        hc_error(MOE, "%s: %zu tokens overflow", name, T);
        return HCOMM_ERR_OVERFLOW;
    }
    if (T != 0 && (tokens == NULL || ids == NULL || w == NULL)) {
        hc_error(MOE, "%s: NULL %s with %zu tokens", name,
                 tokens == NULL ? "tokens"
                 : ids == NULL  ? "topk_ids"
                                : "topk_weights",
                 T);
        return HCOMM_ERR_NULL_BUFFER;
    }
    /* read here on the host: a router's outputs left on the device would
     * crash the loop below (the refusal goes through the count exchange) */
    hcomm_status_t st = HCOMM_SUCCESS;
    if (T != 0 && ((st = hc_mem_host_only(name, tokens, T * m->row_bytes)) != HCOMM_SUCCESS ||
                   (st = hc_mem_host_only(name, ids, T * k * sizeof(*ids))) != HCOMM_SUCCESS ||
                   (st = hc_mem_host_only(name, w, T * k * sizeof(*w))) != HCOMM_SUCCESS))
        return st;
    for (size_t i = 0; i < T * k; i++) {
        if (ids[i] < -1 || ids[i] >= m->nexperts) {
            hc_error(MOE, "%s: token %zu slot %zu: expert %d, not in -1 .. %d", name, i / k, i % k,
                     (int)ids[i], m->nexperts - 1);
            return HCOMM_ERR_INVALID_ARG;
        }
    }
    return HCOMM_SUCCESS;
}

/* Rows and (row, expert) pairs per destination rank, and the pair counters. */
static void count_rows(hcomm_moe_t m, size_t T, const int32_t *ids)
{
    int      n = m->nranks, k = m->topk;
    uint64_t te = 0, rte = 0;

    for (int p = 0; p < n; p++) {
        m->scount[p]          = 0;
        m->mark[p]            = SIZE_MAX;
        m->cnt_out[2 * p + 1] = 0;
    }
    for (size_t t = 0; t < T; t++) {
        for (int j = 0; j < k; j++) {
            int32_t e = ids[t * (size_t)k + (size_t)j];
            if (e < 0)
                continue;
            int p = m->expert_rank[e];
            te++;
            m->cnt_out[2 * p + 1]++; /* (row, expert) pairs: p's expert rows */
            rte += p != m->rank;
            if (m->mark[p] != t) {
                m->mark[p] = t;
                m->scount[p]++;
            }
        }
    }
    m->nsend = 0;
    for (int p = 0; p < n; p++) {
        m->sdispl[p] = m->nsend;
        m->nsend += m->scount[p];
    }
    m->stats.num_tokens                = T;
    m->stats.token_expert_pairs        = te;
    m->stats.remote_token_expert_pairs = rte;
    m->stats.token_rank_pairs          = m->nsend;
    m->stats.remote_token_rank_pairs   = m->nsend - m->scount[m->rank];
}

/* A new row for token t: its index, no local experts yet, its data. */
static void start_row(const hcomm_moe_t m, char *row, size_t t, const void *tokens)
{
    int32_t idx = (int32_t)t, none = -1;
    float   zero = 0;

    memcpy(row, &idx, 4);
    for (int j = 0; j < m->topk; j++) {
        memcpy(row + hc_moe_local_off(j), &none, 4);
        memcpy(row + hc_moe_weight_off(m, j), &zero, 4);
    }
    memcpy(row + m->hdr_bytes, (const char *)tokens + t * m->tok_bytes, m->tok_bytes);
}

static hcomm_status_t pack(hcomm_moe_t m, const void *tokens, size_t T, const int32_t *ids,
                           const float *w)
{
    int n = m->nranks, k = m->topk;

    count_rows(m, T, ids);
    if (hc_moe_grow(&m->sbuf, m->nsend * m->row_bytes, "dispatch rows") != 0 ||
        hc_moe_grow(&m->send_tok, m->nsend * sizeof(int32_t), "dispatch rows") != 0)
        return HCOMM_ERR_NO_MEMORY;
    int32_t *send_tok = m->send_tok.p;
    char    *sbuf     = m->sbuf.p;
    for (int p = 0; p < n; p++) {
        m->mark[p]   = SIZE_MAX;
        m->row_of[p] = m->sdispl[p]; /* next free row of p */
    }
    /* row_of[p] - 1 is token t's row for p once mark[p] == t */
    for (size_t t = 0; t < T; t++) {
        for (int j = 0; j < k; j++) {
            size_t  i = t * (size_t)k + (size_t)j;
            int32_t e = ids[i];
            if (e < 0)
                continue;
            int p = m->expert_rank[e];
            if (m->mark[p] != t) {
                m->mark[p]             = t;
                send_tok[m->row_of[p]] = (int32_t)t;
                start_row(m, sbuf + m->row_of[p]++ * m->row_bytes, t, tokens);
            }
            char *row = sbuf + (m->row_of[p] - 1) * m->row_bytes;
            memcpy(row + hc_moe_local_off(j), &m->expert_local[e], 4);
            memcpy(row + hc_moe_weight_off(m, j), &w[i], 4);
        }
    }
    return HCOMM_SUCCESS;
}

/* What the peers announced: rows, and expert rows (nrows), checked. */
static hcomm_status_t recv_sizes(hcomm_moe_t m)
{
    size_t rb = m->row_bytes, k = (size_t)m->topk;

    m->nrecv = m->nrows = 0;
    for (int p = 0; p < m->nranks; p++) {
        uint64_t rows = m->cnt_in[2 * p], pairs = m->cnt_in[2 * p + 1];
        if (rows > (SIZE_MAX / rb - m->nrecv) / 2 || pairs < rows || pairs > rows * k) {
            hc_error(MOE, "hcomm_moe_dispatch: rank %d sends %llu rows of %llu expert rows: %s", p,
                     (unsigned long long)rows, (unsigned long long)pairs,
                     pairs < rows || pairs > rows * k ? "inconsistent" : "overflows");
            return pairs < rows || pairs > rows * k ? HCOMM_ERR_PROTOCOL : HCOMM_ERR_OVERFLOW;
        }
        m->rcount[p] = (size_t)rows;
        m->rdispl[p] = m->nrecv;
        m->nrecv += m->rcount[p];
        m->nrows += (size_t)pairs; /* <= nrecv x k: no overflow */
    }
    if (m->nrows > SIZE_MAX / m->tok_bytes) {
        hc_error(MOE, "hcomm_moe_dispatch: %zu expert rows overflow", m->nrows);
        return HCOMM_ERR_OVERFLOW;
    }
    return HCOMM_SUCCESS;
}

/* Everything the received rows need, before they move. */
static hcomm_status_t grow_recv(hcomm_moe_t m)
{
    size_t r = m->nrows;

    if (hc_moe_grow(&m->rbuf, m->nrecv * m->row_bytes, "received rows") ||
        hc_moe_grow(&m->tokens, r * m->tok_bytes, "expert rows") ||
        hc_moe_grow(&m->src_rank, r * 4, "expert rows") ||
        hc_moe_grow(&m->src_index, r * 4, "expert rows") ||
        hc_moe_grow(&m->slot, r * 4, "expert rows") ||
        hc_moe_grow(&m->weight, r * 4, "expert rows") ||
        hc_moe_grow(&m->rowmap, m->nrecv * (size_t)m->topk * sizeof(size_t), "row map"))
        return HCOMM_ERR_NO_MEMORY;
    return HCOMM_SUCCESS;
}

static hcomm_status_t move_rows(hcomm_moe_t m)
{
    size_t rb = m->row_bytes;

    for (int p = 0; p < m->nranks; p++) {
        m->bytes[0][p] = m->scount[p] * rb;
        m->bytes[1][p] = m->sdispl[p] * rb;
        m->bytes[2][p] = m->rcount[p] * rb;
        m->bytes[3][p] = m->rdispl[p] * rb;
    }
    return hcomm_alltoallv(m->sbuf.p, m->bytes[0], m->bytes[1], m->rbuf.p, m->bytes[2], m->bytes[3],
                           HCOMM_UINT8, m->comm, NULL);
}

/* Rows per local expert; a local index out of range, or another total than
 * the counts announced, means the peers' placements differ, which
 * hcomm_moe_create rules out. */
static hcomm_status_t count_local(hcomm_moe_t m)
{
    const char *rbuf = m->rbuf.p;
    int         L = m->nlocal, k = m->topk;

    for (int l = 0; l <= L; l++)
        m->lcount[l] = 0;
    for (size_t i = 0; i < m->nrecv; i++) {
        for (int j = 0; j < k; j++) {
            int32_t l;
            memcpy(&l, rbuf + i * m->row_bytes + hc_moe_local_off(j), 4);
            if (l < -1 || l >= L) {
                hc_error(MOE, "hcomm_moe_dispatch: received row %zu names local expert %d of %d",
                         i, (int)l, L);
                return HCOMM_ERR_PROTOCOL;
            }
            if (l >= 0)
                m->lcount[l]++;
        }
    }
    size_t rows = 0;
    for (int l = 0; l < L; l++) {
        m->loff[l] = m->lcur[l] = rows;
        rows += m->lcount[l];
    }
    if (rows != m->nrows) {
        hc_error(MOE, "hcomm_moe_dispatch: received %zu expert rows, the counts said %zu", rows,
                 m->nrows);
        return HCOMM_ERR_PROTOCOL;
    }
    return HCOMM_SUCCESS;
}

/* Expands the received rows into the groups, in (rank, token, slot) order. */
static hcomm_status_t unpack(hcomm_moe_t m)
{
    const char    *rbuf = m->rbuf.p;
    int            k    = m->topk;
    size_t        *map, self_rows = 0;
    hcomm_status_t st = count_local(m);

    if (st != HCOMM_SUCCESS)
        return st;
    map = m->rowmap.p;
    for (int p = 0; p < m->nranks; p++) {
        for (size_t i = m->rdispl[p]; i < m->rdispl[p] + m->rcount[p]; i++) {
            const char *row = rbuf + i * m->row_bytes;
            for (int j = 0; j < k; j++) {
                int32_t l, j32 = j;
                memcpy(&l, row + hc_moe_local_off(j), 4);
                map[i * (size_t)k + (size_t)j] = l < 0 ? SIZE_MAX : m->lcur[l];
                if (l < 0)
                    continue;
                size_t pos = m->lcur[l]++;
                self_rows += p == m->rank;
                memcpy((char *)m->tokens.p + pos * m->tok_bytes, row + m->hdr_bytes, m->tok_bytes);
                ((int32_t *)m->src_rank.p)[pos] = p;
                memcpy((int32_t *)m->src_index.p + pos, row, 4);
                ((int32_t *)m->slot.p)[pos] = j32;
                memcpy((float *)m->weight.p + pos, row + hc_moe_weight_off(m, j), 4);
            }
        }
    }
    m->stats.recv_token_rank_pairs = m->nrecv;
    m->stats.combine_bytes_nodedup = (m->nrows - self_rows) * m->tok_bytes;
    return HCOMM_SUCCESS;
}

/* A failure after the count exchange: the peers move rows (and then
 * combine) with this rank; failing the communicator closes its connections,
 * so they get HCOMM_ERR_REMOTE at once rather than HCOMM_ERR_TIMEOUT. */
static hcomm_status_t fail_comm(hcomm_moe_t m, hcomm_status_t st)
{
    if (hcomm_comm_get_error(m->comm) == HCOMM_SUCCESS) {
        hc_error(MOE, "hcomm_moe_dispatch: %s after the count exchange: failing the communicator",
                 hcomm_status_name(st));
        hc_comm_set_failed(m->comm, st);
    }
    return st;
}

static void fill_recv(const hcomm_moe_t m, hcomm_moe_recv_t *rv)
{
    rv->num_local_experts = m->nlocal;
    rv->local_expert_ids  = m->local_ids;
    rv->expert_count      = m->lcount;
    rv->expert_offset     = m->loff;
    rv->num_rows          = m->nrows;
    rv->num_recv_tokens   = m->nrecv;
    rv->tokens            = m->tokens.p;
    rv->src_rank          = m->src_rank.p;
    rv->src_index         = m->src_index.p;
    rv->topk_slot         = m->slot.p;
    rv->weight            = m->weight.p;
}

hcomm_status_t hcomm_moe_dispatch(hcomm_moe_t moe, const void *tokens, size_t num_tokens,
                                  const int32_t *topk_ids, const float *topk_weights,
                                  hcomm_moe_recv_t *recv)
{
    hcomm_status_t st, lst;
    uint64_t       b0 = 0, b1 = 0;

    if (moe == NULL) {
        hc_error(MOE, "hcomm_moe_dispatch: NULL handle");
        return HCOMM_ERR_INVALID_ARG;
    }
    moe->have_layout = 0;
    if (hc_group_active()) { /* the count exchange would only be queued */
        hc_group_refuse(HCOMM_ERR_INVALID_USAGE, "hcomm_moe_dispatch");
        hc_error(MOE, "hcomm_moe_dispatch: not allowed inside a group");
        return HCOMM_ERR_INVALID_USAGE;
    }
    st = hcomm_comm_bytes_sent(moe->comm, &b0);
    if (st != HCOMM_SUCCESS)
        return st;
    lst = check_input(moe, tokens, num_tokens, topk_ids, topk_weights, recv);
    if (lst == HCOMM_SUCCESS)
        lst = pack(moe, tokens, num_tokens, topk_ids, topk_weights);
    for (int p = 0; lst != HCOMM_SUCCESS && p < moe->nranks; p++)
        moe->cnt_out[2 * p] = moe->cnt_out[2 * p + 1] = BAD_INPUT;
    for (int p = 0; lst == HCOMM_SUCCESS && p < moe->nranks; p++)
        moe->cnt_out[2 * p] = moe->scount[p]; /* count_rows set the pairs */
    st = hcomm_alltoall(moe->cnt_out, moe->cnt_in, 2, HCOMM_UINT64, moe->comm, NULL);
    if (st != HCOMM_SUCCESS || lst != HCOMM_SUCCESS)
        return st != HCOMM_SUCCESS ? st : lst;
    for (int p = 0; p < moe->nranks; p++) {
        if (moe->cnt_in[2 * p] == BAD_INPUT) {
            hc_error(MOE,
                     "hcomm_moe_dispatch: rank %d could not dispatch (bad input or out of "
                     "memory); no data moved",
                     p);
            return HCOMM_ERR_REMOTE;
        }
    }
    st = recv_sizes(moe);
    if (st == HCOMM_SUCCESS)
        st = grow_recv(moe);
    if (st == HCOMM_SUCCESS)
        st = move_rows(moe);
    if (st == HCOMM_SUCCESS)
        st = unpack(moe);
    if (st == HCOMM_SUCCESS)
        st = hcomm_comm_bytes_sent(moe->comm, &b1);
    if (st != HCOMM_SUCCESS)
        return fail_comm(moe, st);
    hcomm_moe_stats_t *s      = &moe->stats;
    s->dispatch_bytes         = b1 - b0;
    s->dispatch_bytes_nodedup = s->dispatch_bytes - s->remote_token_rank_pairs * moe->row_bytes +
                                s->remote_token_expert_pairs * (moe->tok_bytes + 12);
    moe->ntokens     = num_tokens;
    moe->have_layout = 1;
    fill_recv(moe, recv);
    return HCOMM_SUCCESS;
}
