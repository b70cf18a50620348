/* sched.c - building, checking and merging schedules.
 *
 * A schedule that failed to grow drops its steps (steps == NULL) and stays
 * failed: builders may add steps without checking each return, and learn of
 * the failure from hc_sched_finalize. */
#include "algorithms/sched.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"

#define SCHED_INIT_CAP 16
#define SCHED_TMP_ALIGN 64 /* each merged op's scratch starts on a cache line */

hc_sched_t *hc_sched_create(int nranks, int rank)
{
    hc_sched_t *s;

    if (nranks < 1 || rank < 0 || rank >= nranks) {
        hc_error(ALGO, "schedule for rank %d of %d ranks: invalid rank", rank, nranks);
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        goto err_nomem;
    s->steps = malloc(SCHED_INIT_CAP * sizeof(*s->steps));
    if (s->steps == NULL)
        goto err_free;
    s->cap    = SCHED_INIT_CAP;
    s->nbufs  = HC_BUF_PER_OP;
    s->nranks = nranks;
    s->rank   = rank;
    return s;

err_free:
    free(s);
err_nomem:
    hc_error(ALGO, "out of memory creating a schedule");
    return NULL;
}

void hc_sched_destroy(hc_sched_t *s)
{
    if (s == NULL)
        return;
    free(s->steps);
    free(s->peers);
    free(s);
}

/* Makes room for n more steps; on failure the schedule becomes failed. */
static int sched_reserve(hc_sched_t *s, uint32_t n)
{
    if (s->steps == NULL)
        return -1;
    if (n <= s->cap - s->nsteps)
        return 0;
    if (n > (uint32_t)INT32_MAX - s->nsteps)
        goto err_fail;
    uint64_t cap = (uint64_t)s->cap * 2;
    if (cap < (uint64_t)s->nsteps + n)
        cap = (uint64_t)s->nsteps + n;
    if (cap > (uint64_t)INT32_MAX)
        cap = INT32_MAX;
    hc_step_t *p = realloc(s->steps, (size_t)cap * sizeof(*p));
    if (p == NULL)
        goto err_fail;
    s->steps = p;
    s->cap   = (uint32_t)cap;
    return 0;

err_fail:
    hc_error(ALGO, "out of memory growing a schedule of %u steps by %u", s->nsteps, n);
    free(s->steps);
    s->steps  = NULL;
    s->nsteps = 0;
    s->cap    = 0;
    return -1;
}

int hc_sched_add(hc_sched_t *s, const hc_step_t *step)
{
    if (sched_reserve(s, 1) != 0)
        return -1;
    s->steps[s->nsteps]      = *step;
    s->steps[s->nsteps].pseq = 0;
    return (int)s->nsteps++;
}

static int sched_put(hc_sched_t *s, hc_step_kind_t kind, int peer, hc_slice_t dst, hc_slice_t src,
                     hc_slice_t src2, size_t len, hcomm_dtype_t dt, hcomm_op_t op, int dep0,
                     int dep1)
{
    hc_step_t st;

    memset(&st, 0, sizeof(st));
    st.kind   = (uint8_t)kind;
    st.dtype  = (uint8_t)dt;
    st.op     = (uint8_t)op;
    st.peer   = peer;
    st.len    = len;
    st.dst    = dst;
    st.src    = src;
    st.src2   = src2;
    st.dep[0] = dep0;
    st.dep[1] = dep1;
    return hc_sched_add(s, &st);
}

static const hc_slice_t sched_none = {0, 0};

int hc_sched_send(hc_sched_t *s, int peer, hc_slice_t src, size_t len, int dep0, int dep1)
{
    return sched_put(s, HC_STEP_SEND, peer, sched_none, src, sched_none, len, HCOMM_INT8, HCOMM_SUM,
                     dep0, dep1);
}

int hc_sched_recv(hc_sched_t *s, int peer, hc_slice_t dst, size_t len, int dep0, int dep1)
{
    return sched_put(s, HC_STEP_RECV, peer, dst, sched_none, sched_none, len, HCOMM_INT8, HCOMM_SUM,
                     dep0, dep1);
}

int hc_sched_recv_reduce(hc_sched_t *s, int peer, hc_slice_t dst, hc_slice_t src, size_t len,
                         hcomm_dtype_t dt, hcomm_op_t op, int dep0, int dep1)
{
    return sched_put(s, HC_STEP_RECV_REDUCE, peer, dst, src, sched_none, len, dt, op, dep0, dep1);
}

int hc_sched_copy(hc_sched_t *s, hc_slice_t dst, hc_slice_t src, size_t len, int dep0, int dep1)
{
    return sched_put(s, HC_STEP_COPY, -1, dst, src, sched_none, len, HCOMM_INT8, HCOMM_SUM, dep0,
                     dep1);
}

int hc_sched_reduce(hc_sched_t *s, hc_slice_t dst, hc_slice_t src, hc_slice_t src2, size_t len,
                    hcomm_dtype_t dt, hcomm_op_t op, int dep0, int dep1)
{
    return sched_put(s, HC_STEP_REDUCE, -1, dst, src, src2, len, dt, op, dep0, dep1);
}

int hc_sched_div(hc_sched_t *s, hc_slice_t dst, size_t len, hcomm_dtype_t dt, int divisor)
{
    return sched_put(s, HC_STEP_DIV, divisor, dst, sched_none, sched_none, len, dt, HCOMM_AVG,
                     HC_STEP_NODEP, HC_STEP_NODEP);
}

static int sched_is_msg(const hc_step_t *st)
{
    return st->kind == HC_STEP_SEND || st->kind == HC_STEP_RECV || st->kind == HC_STEP_RECV_REDUCE;
}

/* Checks one step: kind, deps backwards, peer, buffers. Logs what is wrong. */
static int sched_check_step(const hc_sched_t *s, uint32_t i)
{
    const hc_step_t *st = &s->steps[i];

    if (st->kind >= HC_STEP_KIND_COUNT) {
        hc_error(ALGO, "schedule step %u: invalid kind %u", i, st->kind);
        return -1;
    }
    for (int d = 0; d < 2; d++) {
        if (st->dep[d] < HC_STEP_NODEP || (st->dep[d] >= 0 && (uint32_t)st->dep[d] >= i)) {
            hc_error(ALGO, "schedule step %u: dependency %d does not point backwards", i,
                     st->dep[d]);
            return -1;
        }
    }
    if (sched_is_msg(st) && (st->peer < 0 || st->peer >= s->nranks)) {
        hc_error(ALGO, "schedule step %u: peer rank %d out of range", i, st->peer);
        return -1;
    }
    if (st->kind == HC_STEP_DIV && st->peer < 1) {
        hc_error(ALGO, "schedule step %u: divisor %d", i, st->peer);
        return -1;
    }
    if (st->src.buf >= s->nbufs || st->src2.buf >= s->nbufs || st->dst.buf >= s->nbufs) {
        hc_error(ALGO, "schedule step %u: buffer index out of range", i);
        return -1;
    }
    return 0;
}

/* The peers the schedule exchanges messages with (cnt: its messages per peer
 * and direction), for the executor to connect them all when it starts. */
static hcomm_status_t sched_list_peers(hc_sched_t *s, const uint32_t *cnt)
{
    uint32_t n = 0;
    for (int p = 0; p < s->nranks; p++)
        n += p != s->rank && cnt[2 * p] + cnt[2 * p + 1] != 0;
    int32_t *peers = n != 0 ? malloc(n * sizeof(*peers)) : NULL;
    if (n != 0 && peers == NULL) {
        hc_error(ALGO, "out of memory listing a schedule's %u peers", n);
        return HCOMM_ERR_NO_MEMORY;
    }
    n = 0;
    for (int p = 0; p < s->nranks; p++)
        if (p != s->rank && cnt[2 * p] + cnt[2 * p + 1] != 0)
            peers[n++] = p;
    free(s->peers);
    s->peers  = peers;
    s->npeers = n;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_sched_finalize(hc_sched_t *s)
{
    uint32_t *cnt;

    if (s->steps == NULL)
        return HCOMM_ERR_NO_MEMORY;
    cnt = calloc(2 * (size_t)s->nranks, sizeof(*cnt));
    if (cnt == NULL) {
        hc_error(ALGO, "out of memory finalizing a schedule of %u steps", s->nsteps);
        return HCOMM_ERR_NO_MEMORY;
    }
    s->ndiv = 0;
    for (uint32_t i = 0; i < s->nsteps; i++) {
        hc_step_t *st = &s->steps[i];
        if (sched_check_step(s, i) != 0) {
            free(cnt);
            return HCOMM_ERR_INVALID_ARG;
        }
        s->ndiv += (st->kind == HC_STEP_DIV);
        if (sched_is_msg(st))
            st->pseq = cnt[2 * st->peer + (st->kind != HC_STEP_SEND)]++;
    }
    hcomm_status_t status = sched_list_peers(s, cnt);
    free(cnt);
    return status;
}

/* Every TMP slice of the merged schedule addresses one scratch area of
 * dst->tmp_bytes: the appended op's TMP offsets are shifted past dst's. */
hcomm_status_t hc_sched_append(hc_sched_t *dst, const hc_sched_t *src)
{
    size_t   base = 0;
    uint32_t off  = dst->nsteps;

    if (dst->nranks != src->nranks || dst->rank != src->rank) {
        hc_error(ALGO, "appending a schedule of rank %d/%d to one of rank %d/%d", src->rank,
                 src->nranks, dst->rank, dst->nranks);
        return HCOMM_ERR_INVALID_ARG;
    }
    if (src->steps == NULL || sched_reserve(dst, src->nsteps) != 0)
        return HCOMM_ERR_NO_MEMORY;
    if (src->tmp_bytes != 0) {
        base = (dst->tmp_bytes + SCHED_TMP_ALIGN - 1) / SCHED_TMP_ALIGN * SCHED_TMP_ALIGN;
        if (base < dst->tmp_bytes || src->tmp_bytes > SIZE_MAX - base) {
            hc_error(ALGO, "merged schedule scratch size overflows");
            return HCOMM_ERR_OVERFLOW;
        }
    }
    for (uint32_t i = 0; i < src->nsteps; i++) {
        hc_step_t   st    = src->steps[i];
        hc_slice_t *sl[3] = {&st.src, &st.src2, &st.dst};
        for (int k = 0; k < 3; k++) {
            if (sl[k]->buf % HC_BUF_PER_OP == HC_BUF_TMP)
                sl[k]->off += base;
            sl[k]->buf += dst->nbufs;
        }
        for (int d = 0; d < 2; d++)
            if (st.dep[d] >= 0)
                st.dep[d] += (int32_t)off;
        dst->steps[dst->nsteps++] = st;
    }
    dst->nbufs += src->nbufs;
    if (src->tmp_bytes != 0)
        dst->tmp_bytes = base + src->tmp_bytes;
    return hc_sched_finalize(dst);
}
