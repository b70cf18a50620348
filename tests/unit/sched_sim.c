/* sched_sim.c - the serial executor simulator of sched_sim.h. */
#include "sched_sim.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

enum { ST_WAIT = 0, ST_POSTED, ST_DONE };
enum { EV_POST, EV_EXEC, EV_TAKE, EV_DELIVER };
enum { F_TAKE_PUSHED = 1, F_TAKEN = 2, F_DELIVER_PUSHED = 4 };

char sim_err[768];

void sim_fail(const char *fmt, ...)
{
    va_list ap;
    if (sim_err[0] != '\0')
        return;
    va_start(ap, fmt);
    vsnprintf(sim_err, sizeof(sim_err), fmt, ap);
    va_end(ap);
}

size_t ref_esize(int dt)
{
    switch (dt) {
    case HCOMM_INT8:
        return 1;
    case HCOMM_INT32:
    case HCOMM_FLOAT32:
        return 4;
    case HCOMM_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

#define REF_LOOP(T, ACC)                                                                           \
    for (size_t i = 0; i < n; i++) {                                                               \
        T x = ((const T *)a)[i], y = ((const T *)b)[i], z;                                         \
        if (op == HCOMM_SUM || op == HCOMM_AVG)                                                    \
            z = (T)((ACC)x + (ACC)y);                                                              \
        else if (op == HCOMM_MIN)                                                                  \
            z = y < x ? y : x;                                                                     \
        else if (op == HCOMM_MAX)                                                                  \
            z = y > x ? y : x;                                                                     \
        else                                                                                       \
            return -1;                                                                             \
        ((T *)d)[i] = z;                                                                           \
    }                                                                                              \
    return 0

int ref_reduce(void *d, const void *a, const void *b, size_t n, int dt, int op)
{
    switch (dt) {
    case HCOMM_INT8:
        REF_LOOP(int8_t, uint8_t);
    case HCOMM_INT32:
        REF_LOOP(int32_t, uint32_t);
    case HCOMM_FLOAT32:
        REF_LOOP(float, float);
    case HCOMM_FLOAT64:
        REF_LOOP(double, double);
    default:
        return -1;
    }
}

void ref_div(void *d, size_t n, int dt, int div)
{
    for (size_t i = 0; i < n; i++) {
        switch (dt) {
        case HCOMM_INT8:
            ((int8_t *)d)[i] = (int8_t)(((int8_t *)d)[i] / div);
            break;
        case HCOMM_INT32:
            ((int32_t *)d)[i] /= div;
            break;
        case HCOMM_FLOAT32:
            ((float *)d)[i] /= (float)div;
            break;
        default:
            ((double *)d)[i] /= div;
            break;
        }
    }
}

static uint64_t sim_rand(sim_t *sm)
{
    sm->rng ^= sm->rng << 13;
    sm->rng ^= sm->rng >> 7;
    sm->rng ^= sm->rng << 17;
    return sm->rng;
}

static void sim_push(sim_t *sm, int rank, uint32_t step, int kind)
{
    if (sm->nev == sm->capev) {
        sm->capev = sm->capev ? 2 * sm->capev : 256;
        sm->ev    = realloc(sm->ev, sm->capev * sizeof(*sm->ev));
        assert_non_null(sm->ev);
    }
    sm->ev[sm->nev++] = (sim_ev_t){rank, kind, step};
}

int sim_msg_dir(int kind)
{
    return kind == HC_STEP_SEND ? 0 : kind == HC_STEP_RECV || kind == HC_STEP_RECV_REDUCE ? 1 : -1;
}

/* The slices a step uses: up to three, the write (dst) first. Returns the count. */
int sim_step_uses(const hc_step_t *st, hc_slice_t sl[3], int *has_write)
{
    *has_write = 1;
    switch (st->kind) {
    case HC_STEP_SEND:
        *has_write = 0;
        sl[0]      = st->src;
        return 1;
    case HC_STEP_RECV:
    case HC_STEP_DIV:
        sl[0] = st->dst;
        return 1;
    case HC_STEP_RECV_REDUCE:
    case HC_STEP_COPY:
        sl[0] = st->dst, sl[1] = st->src;
        return 2;
    case HC_STEP_REDUCE:
        sl[0] = st->dst, sl[1] = st->src, sl[2] = st->src2;
        return 3;
    default:
        return -1;
    }
}

/* The step (at rank p) matching message step i of rank r, or -1. */
static int64_t sim_match(const sim_t *sm, int r, uint32_t i)
{
    const hc_step_t  *st = &sm->rk[r].s->steps[i];
    const sim_rank_t *o  = &sm->rk[st->peer];
    int               d  = 1 - sim_msg_dir(st->kind);
    uint32_t          a = o->seqstart[d][r], b = o->seqstart[d][r + 1], k = sm->rk[r].seqno[i];
    return k < b - a ? (int64_t)o->seqlist[d][a + k] : -1;
}

/* Arena offsets of step i's slices; -1 out of bounds; 1 for a copy onto itself. */
static int sim_ranges(sim_t *sm, int r, uint32_t i, size_t off[3], int *nsl, int *has_write)
{
    sim_rank_t      *k  = &sm->rk[r];
    const hc_step_t *st = &k->s->steps[i];
    hc_slice_t       sl[3];

    *nsl = sim_step_uses(st, sl, has_write);
    if (*nsl < 0) {
        sim_fail(SIM_STEP_FMT ": invalid kind", SIM_STEP_ARGS(st));
        return -1;
    }
    for (int j = 0; j < *nsl; j++) {
        if (sl[j].buf >= k->s->nbufs || sl[j].buf >= SIM_MAXBUF ||
            (st->len != 0 &&
             (sl[j].off > k->bufsz[sl[j].buf] || st->len > k->bufsz[sl[j].buf] - sl[j].off))) {
            sim_fail(SIM_STEP_FMT ": slice %d (buf %u off %zu) out of bounds (size %zu)",
                     SIM_STEP_ARGS(st), j, sl[j].buf, sl[j].off,
                     sl[j].buf < SIM_MAXBUF ? k->bufsz[sl[j].buf] : 0);
            return -1;
        }
        off[j] = k->bufoff[sl[j].buf] + sl[j].off;
    }
    for (int j = 1; j < *nsl; j++) {
        if (off[j] != off[0] && off[j] < off[0] + st->len && off[0] < off[j] + st->len) {
            sim_fail(SIM_STEP_FMT ": source and destination overlap partially", SIM_STEP_ARGS(st));
            return -1;
        }
    }
    return st->kind == HC_STEP_COPY && off[0] == off[1] ? 1 : 0;
}

/* Checks and registers (begin) or releases (!begin) the bytes step i touches. */
static int sim_access(sim_t *sm, int r, uint32_t i, int begin)
{
    sim_rank_t      *k  = &sm->rk[r];
    const hc_step_t *st = &k->s->steps[i];
    size_t           off[3];
    int              nsl, w, rc = sim_ranges(sm, r, i, off, &nsl, &w);

    if (rc != 0)
        return rc;
    for (int j = 0; begin && j < nsl; j++) {
        for (size_t b = off[j]; b < off[j] + st->len; b++) {
            if (j >= w && !k->def[b]) {
                sim_fail(SIM_STEP_FMT ": reads byte %zu of slice %d, never written",
                         SIM_STEP_ARGS(st), b - off[j], j);
                return -1;
            }
            if (k->wr[b] || (j < w && k->rd[b])) {
                sim_fail(SIM_STEP_FMT ": race on byte %zu of slice %d with an unfinished step",
                         SIM_STEP_ARGS(st), b - off[j], j);
                return -1;
            }
        }
    }
    for (int j = 0; j < nsl; j++) {
        for (size_t b = off[j]; b < off[j] + st->len; b++) {
            if (j < w)
                k->wr[b] = (unsigned char)begin;
            else
                k->rd[b] = (uint16_t)(k->rd[b] + (begin ? 1 : -1));
        }
    }
    return 0;
}

static void sim_done(sim_t *sm, int r, uint32_t i, int release)
{
    sim_rank_t *k = &sm->rk[r];

    if (release)
        sim_access(sm, r, i, 0);
    k->state[i] = ST_DONE;
    for (int32_t j = k->dstart[i]; j < k->dstart[i + 1]; j++) {
        uint32_t d = (uint32_t)k->dlist[j];
        if (--k->pending[d] == 0 && k->s->steps[d].kind != HC_STEP_DIV)
            sim_push(sm, r, d, EV_POST);
    }
}

static void sim_try_deliver(sim_t *sm, int r, uint32_t i)
{
    sim_rank_t      *k  = &sm->rk[r];
    const hc_step_t *st = &k->s->steps[i];
    int64_t          j  = sim_match(sm, r, i);
    uint32_t         a  = k->seqstart[1][st->peer];

    if (k->state[i] != ST_POSTED || (k->flags[i] & F_DELIVER_PUSHED) || j < 0 ||
        !(sm->rk[st->peer].flags[j] & F_TAKEN))
        return;
    if (k->seqno[i] > 0 && k->state[k->seqlist[1][a + k->seqno[i] - 1]] != ST_DONE)
        return; /* FIFO: the previous message from this peer is not in yet */
    if (sm->rk[st->peer].s->steps[j].len != st->len) {
        sim_fail(SIM_STEP_FMT ": receives %zu bytes sent as %zu", SIM_STEP_ARGS(st), st->len,
                 sm->rk[st->peer].s->steps[j].len);
        return;
    }
    k->flags[i] |= F_DELIVER_PUSHED;
    sim_push(sm, r, i, EV_DELIVER);
}

static void sim_post(sim_t *sm, int r, uint32_t i)
{
    sim_rank_t      *k  = &sm->rk[r];
    const hc_step_t *st = &k->s->steps[i];
    int              rc;

    k->know[i] = 1u << r;
    for (int d = 0; d < 2; d++)
        if (st->dep[d] >= 0)
            k->know[i] |= k->know[st->dep[d]];
    rc = sim_access(sm, r, i, 1);
    if (rc < 0)
        return;
    k->state[i] = ST_POSTED;
    if (rc == 1) { /* a copy onto itself: skipped */
        sim_done(sm, r, i, 0);
        return;
    }
    if (sim_msg_dir(st->kind) < 0) {
        sim_push(sm, r, i, EV_EXEC);
        return;
    }
    if (k->order_next[i] >= 0 && --k->pending[k->order_next[i]] == 0)
        sim_push(sm, r, (uint32_t)k->order_next[i], EV_POST);
    int64_t j = sim_match(sm, r, i);
    if (st->kind == HC_STEP_SEND) {
        if (sm->eager || (j >= 0 && sm->rk[st->peer].state[j] != ST_WAIT)) {
            k->flags[i] |= F_TAKE_PUSHED;
            sim_push(sm, r, i, EV_TAKE);
        }
        return;
    }
    sim_rank_t *o = &sm->rk[st->peer];
    if (j >= 0 && o->state[j] == ST_POSTED && !(o->flags[j] & F_TAKE_PUSHED)) {
        o->flags[j] |= F_TAKE_PUSHED;
        sim_push(sm, st->peer, (uint32_t)j, EV_TAKE);
    }
    sim_try_deliver(sm, r, i);
}

static void sim_exec(sim_t *sm, int r, uint32_t i)
{
    sim_rank_t      *k  = &sm->rk[r];
    const hc_step_t *st = &k->s->steps[i];
    size_t           off[3], es = ref_esize(st->dtype);
    int              nsl, w;

    if (sim_ranges(sm, r, i, off, &nsl, &w) < 0)
        return;
    if (st->kind == HC_STEP_COPY)
        memmove(k->mem + off[0], k->mem + off[1], st->len);
    else if (es == 0 || st->len % es != 0 ||
             ref_reduce(k->mem + off[0], k->mem + off[1], k->mem + off[2], st->len / es, st->dtype,
                        st->op) != 0)
        sim_fail(SIM_STEP_FMT ": bad reduce (dtype %d op %d)", SIM_STEP_ARGS(st), st->dtype,
                 st->op);
    memset(k->def + off[0], 1, st->len);
    sim_done(sm, r, i, 1);
}

static void sim_take(sim_t *sm, int r, uint32_t i)
{
    sim_rank_t      *k  = &sm->rk[r];
    const hc_step_t *st = &k->s->steps[i];
    int64_t          j  = sim_match(sm, r, i);

    k->msg[i] = malloc(st->len + 1);
    assert_non_null(k->msg[i]);
    memcpy(k->msg[i], k->mem + k->bufoff[st->src.buf] + st->src.off, st->len);
    k->flags[i] |= F_TAKEN;
    sim_done(sm, r, i, 1);
    if (j >= 0)
        sim_try_deliver(sm, st->peer, (uint32_t)j);
}

/* Delivers a piece of the message (whole elements for a reduce). */
static void sim_deliver(sim_t *sm, int r, uint32_t i)
{
    sim_rank_t      *k  = &sm->rk[r];
    const hc_step_t *st = &k->s->steps[i];
    uint32_t         j  = (uint32_t)sim_match(sm, r, i);
    sim_rank_t      *o  = &sm->rk[st->peer];
    size_t es = st->kind == HC_STEP_RECV ? 1 : ref_esize(st->dtype), left = st->len - k->got[i];
    size_t piece = left;
    size_t d     = k->bufoff[st->dst.buf] + st->dst.off + k->got[i];

    if (es == 0 || st->len % es != 0) {
        sim_fail(SIM_STEP_FMT ": length not a whole number of elements", SIM_STEP_ARGS(st));
        return;
    }
    if (left > es && sim_rand(sm) % 2)
        piece = es * (1 + sim_rand(sm) % (left / es));
    if (st->kind == HC_STEP_RECV)
        memcpy(k->mem + d, o->msg[j] + k->got[i], piece);
    else if (ref_reduce(k->mem + d, k->mem + k->bufoff[st->src.buf] + st->src.off + k->got[i],
                        o->msg[j] + k->got[i], piece / es, st->dtype, st->op) != 0)
        sim_fail(SIM_STEP_FMT ": bad reduce (dtype %d op %d)", SIM_STEP_ARGS(st), st->dtype,
                 st->op);
    memset(k->def + d, 1, piece);
    k->got[i] += piece;
    if (k->got[i] < st->len) {
        sim_push(sm, r, i, EV_DELIVER);
        return;
    }
    k->know[i] |= o->know[j];
    free(o->msg[j]);
    o->msg[j] = NULL;
    sim_done(sm, r, i, 1);
    uint32_t a = k->seqstart[1][st->peer], b = k->seqstart[1][st->peer + 1];
    if (k->seqno[i] + 1 < b - a)
        sim_try_deliver(sm, r, k->seqlist[1][a + k->seqno[i] + 1]);
}

/* Builds the per-step tables of rank r: dependents, per-peer order, pseq check. */
static void sim_prepare_rank(sim_t *sm, int r)
{
    sim_rank_t       *k = &sm->rk[r];
    const hc_sched_t *s = k->s;
    uint32_t          n = s->nsteps, cnt[2][SIM_MAXR + 1] = {{0}};
    int32_t           last[2][SIM_MAXR];

    k->wr = calloc(k->memsize + 1, 1), k->rd = calloc(k->memsize + 1, sizeof(*k->rd));
    k->state = calloc(n + 1, 1), k->flags = calloc(n + 1, 1);
    k->pending = calloc(n + 1, 4), k->order_next = calloc(n + 1, 4);
    k->dstart = calloc(n + 2, 4), k->dlist = calloc(2 * n + 1, 4);
    k->seqno = calloc(n + 1, 4), k->know = calloc(n + 1, 4);
    k->msg = calloc(n + 1, sizeof(*k->msg)), k->got = calloc(n + 1, sizeof(*k->got));
    for (int d = 0; d < 2; d++) {
        k->seqstart[d] = calloc(SIM_MAXR + 2, 4), k->seqlist[d] = calloc(n + 1, 4);
        for (int p = 0; p < SIM_MAXR; p++)
            last[d][p] = -1;
    }
    assert_true(k->wr && k->rd && k->state && k->flags && k->pending && k->order_next &&
                k->dstart && k->dlist && k->seqno && k->know && k->msg && k->got && k->seqlist[0] &&
                k->seqlist[1]);
    for (uint32_t i = 0; i < n; i++) {
        const hc_step_t *st = &s->steps[i];
        int              d  = sim_msg_dir(st->kind);
        k->order_next[i]    = -1;
        for (int e = 0; e < 2; e++)
            if (st->dep[e] >= 0 && (uint32_t)st->dep[e] < i)
                k->dstart[st->dep[e] + 1]++, k->pending[i]++;
        if (d < 0)
            continue;
        if (st->peer < 0 || st->peer >= sm->n) {
            sim_fail(SIM_STEP_FMT ": peer out of range", SIM_STEP_ARGS(st));
            return;
        }
        k->seqno[i] = cnt[d][st->peer]++;
        if (st->pseq != k->seqno[i])
            sim_fail(SIM_STEP_FMT ": pseq %u, expected %u", SIM_STEP_ARGS(st), st->pseq,
                     k->seqno[i]);
        if (last[d][st->peer] >= 0)
            k->order_next[last[d][st->peer]] = (int32_t)i, k->pending[i]++;
        last[d][st->peer] = (int32_t)i;
    }
    for (int d = 0; d < 2; d++)
        for (int p = 0; p < SIM_MAXR; p++)
            k->seqstart[d][p + 1] = k->seqstart[d][p] + cnt[d][p];
    for (uint32_t i = 0; i < n; i++) {
        int d = sim_msg_dir(s->steps[i].kind);
        if (d >= 0)
            k->seqlist[d][k->seqstart[d][s->steps[i].peer] + k->seqno[i]] = i;
        k->dstart[i + 1] += k->dstart[i];
    }
    int32_t *cur = malloc((n + 1) * sizeof(*cur));
    assert_non_null(cur);
    memcpy(cur, k->dstart, (n + 1) * sizeof(*cur));
    for (uint32_t i = 0; i < n; i++) {
        for (int e = 0; e < 2; e++) {
            int32_t dp = s->steps[i].dep[e];
            if (dp >= 0 && (uint32_t)dp < i)
                k->dlist[cur[dp]++] = (int32_t)i;
            else if (dp != HC_STEP_NODEP)
                sim_fail("rank %d step %u: dependency %d does not point backwards", r, i, dp);
        }
    }
    free(cur);
}

void sim_begin(sim_t *sm, int n, int eager, uint64_t seed)
{
    memset(sm, 0, sizeof(*sm));
    sim_err[0] = '\0';
    sm->n = n, sm->eager = eager, sm->rng = seed | 1;
}

void sim_place(sim_rank_t *k, const hc_sched_t *s, const lay_t *l, size_t tmp_at)
{
    k->s       = s;
    k->memsize = tmp_at + s->tmp_bytes;
    k->mem     = malloc(k->memsize + 1);
    k->def     = calloc(k->memsize + 1, 1);
    assert_true(k->mem && k->def);
    memset(k->mem, 0xa5, k->memsize);
    k->bufoff[HC_BUF_SEND] = l->send_at, k->bufsz[HC_BUF_SEND] = l->sendsz;
    k->bufoff[HC_BUF_RECV] = l->recv_at, k->bufsz[HC_BUF_RECV] = l->recvsz;
    k->bufoff[HC_BUF_TMP] = tmp_at, k->bufsz[HC_BUF_TMP] = s->tmp_bytes;
}

void ref_store(void *buf, size_t i, int dt, long v)
{
    if (dt == HCOMM_INT8)
        ((int8_t *)buf)[i] = (int8_t)v;
    else if (dt == HCOMM_INT32)
        ((int32_t *)buf)[i] = (int32_t)v;
    else if (dt == HCOMM_FLOAT32)
        ((float *)buf)[i] = (float)v;
    else
        ((double *)buf)[i] = (double)v;
}

void ref_fill(void *buf, size_t n, int dt, int r, size_t first)
{
    for (size_t i = 0; i < n; i++)
        ref_store(buf, i, dt, (long)(((size_t)(r + 1) * 37 + (first + i) * 11) % 29) - 14);
}

void sim_end(sim_t *sm)
{
    hc_sched_t *scheds[SIM_MAXR];
    int         n = sm->n;
    for (int r = 0; r < n; r++)
        scheds[r] = (hc_sched_t *)sm->rk[r].s;
    sim_free(sm);
    for (int r = 0; r < n; r++)
        hc_sched_destroy(scheds[r]);
}

void sim_free(sim_t *sm)
{
    for (int r = 0; r < sm->n; r++) {
        sim_rank_t *k = &sm->rk[r];
        for (uint32_t i = 0; k->msg != NULL && i < k->s->nsteps; i++)
            free(k->msg[i]);
        free(k->mem), free(k->def), free(k->wr), free(k->rd), free(k->state), free(k->flags);
        free(k->pending), free(k->order_next), free(k->dstart), free(k->dlist), free(k->seqno);
        free(k->know), free(k->msg), free(k->got);
        free(k->seqstart[0]), free(k->seqstart[1]), free(k->seqlist[0]), free(k->seqlist[1]);
    }
    free(sm->ev);
    memset(sm, 0, sizeof(*sm));
}

/* Runs the DIV steps of rank r, after everything else: each byte at most once. */
static void sim_divs(sim_t *sm, int r)
{
    sim_rank_t *k = &sm->rk[r];

    for (uint32_t i = 0; i < k->s->nsteps && sim_err[0] == '\0'; i++) {
        const hc_step_t *st = &k->s->steps[i];
        size_t           off[3], es = ref_esize(st->dtype);
        int              nsl, w;
        if (st->kind != HC_STEP_DIV)
            continue;
        if (sim_ranges(sm, r, i, off, &nsl, &w) < 0)
            return;
        if (st->peer != sm->n || es == 0 || st->len % es != 0)
            sim_fail(SIM_STEP_FMT ": bad div", SIM_STEP_ARGS(st));
        for (size_t b = off[0]; b < off[0] + st->len; b++) {
            if (k->wr[b] || !k->def[b])
                sim_fail(SIM_STEP_FMT ": divides byte %zu twice or unwritten", SIM_STEP_ARGS(st),
                         b);
            k->wr[b] = 1;
        }
        if (sim_err[0] == '\0')
            ref_div(k->mem + off[0], st->len / es, st->dtype, st->peer);
    }
    memset(k->wr, 0, k->memsize);
}

/* Runs the schedules (rk[r].s, mem, def, bufoff, bufsz set by the caller).
 * Returns 0, or -1 with sim_err set. */
int sim_run(sim_t *sm)
{
    for (int r = 0; r < sm->n && sim_err[0] == '\0'; r++) {
        sim_prepare_rank(sm, r);
        for (uint32_t i = 0; i < sm->rk[r].s->nsteps; i++)
            if (sm->rk[r].pending[i] == 0 && sm->rk[r].s->steps[i].kind != HC_STEP_DIV)
                sim_push(sm, r, i, EV_POST);
    }
    while (sm->nev != 0 && sim_err[0] == '\0') {
        size_t   e  = (size_t)(sim_rand(sm) % sm->nev);
        sim_ev_t ev = sm->ev[e];
        sm->ev[e]   = sm->ev[--sm->nev];
        switch (ev.kind) {
        case EV_POST:
            sim_post(sm, ev.rank, ev.step);
            break;
        case EV_EXEC:
            sim_exec(sm, ev.rank, ev.step);
            break;
        case EV_TAKE:
            sim_take(sm, ev.rank, ev.step);
            break;
        default:
            sim_deliver(sm, ev.rank, ev.step);
            break;
        }
    }
    for (int r = 0; r < sm->n && sim_err[0] == '\0'; r++) {
        sim_rank_t *k = &sm->rk[r];
        for (uint32_t i = 0; i < k->s->nsteps && sim_err[0] == '\0'; i++) {
            const hc_step_t *st = &k->s->steps[i];
            if (st->kind != HC_STEP_DIV && k->state[i] != ST_DONE)
                sim_fail(SIM_STEP_FMT ": deadlock, step %s", SIM_STEP_ARGS(st),
                         k->state[i] == ST_POSTED ? "posted, never completed" : "never started");
            else if (st->kind == HC_STEP_SEND && sim_match(sm, r, i) < 0)
                sim_fail(SIM_STEP_FMT ": message nobody receives", SIM_STEP_ARGS(st));
        }
    }
    for (int r = 0; r < sm->n && sim_err[0] == '\0'; r++)
        sim_divs(sm, r);
    return sim_err[0] == '\0' ? 0 : -1;
}

/* Buffer sizes of one op on rank r and, in place, how SEND and RECV alias. */
lay_t sim_layout(const hc_coll_args_t *a, int n, int r)
{
    size_t blk = a->count * ref_esize(a->dtype), all = blk * (size_t)n;
    lay_t  l = {0, 0, 0, 0, 0};

    switch (a->coll) {
    case HC_COLL_ALLREDUCE:
        l.sendsz = l.recvsz = blk;
        break;
    case HC_COLL_BROADCAST:
        l.sendsz = r == a->root || a->in_place ? blk : 0; /* non-roots pass no sendbuf */
        l.recvsz = blk;
        break;
    case HC_COLL_REDUCE:
        l.sendsz = blk, l.recvsz = r == a->root ? blk : 0;
        break;
    case HC_COLL_ALLGATHER:
        l.sendsz = blk, l.recvsz = all;
        break;
    case HC_COLL_REDUCE_SCATTER:
        l.sendsz = all, l.recvsz = blk;
        break;
    case HC_COLL_ALLTOALL:
        l.sendsz = l.recvsz = all;
        break;
    case HC_COLL_SEND:
        l.sendsz = blk;
        break;
    case HC_COLL_RECV:
        l.recvsz = blk;
        break;
    default:
        break;
    }
    if (!a->in_place) {
        l.recv_at = l.sendsz;
        l.regsz   = l.sendsz + l.recvsz;
        return l;
    }
    l.regsz = l.sendsz > l.recvsz ? l.sendsz : l.recvsz;
    if (a->coll == HC_COLL_ALLGATHER)
        l.send_at = (size_t)r * blk;
    if (a->coll == HC_COLL_REDUCE_SCATTER)
        l.recv_at = (size_t)r * blk;
    return l;
}

/* Does rank r hold meaningful input in SEND for op a? */
int sim_has_input(const hc_coll_args_t *a, const lay_t *l, int r)
{
    return l->sendsz != 0 && !(a->coll == HC_COLL_BROADCAST && r != a->root);
}
