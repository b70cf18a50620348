/* coll_case.c - buffers, calls and verification of one coll_check case. */
#include "coll_case.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_data.h"

#define CT_GUARD 64
#define CT_GUARD_BYTE 0xa5

static const char *const coll_names[CT_NCOLL] = {
    "allreduce",      "broadcast", "reduce",   "allgather",
    "reduce_scatter", "alltoall",  "sendrecv", "barrier",
};

static const char *const dtype_names[HCOMM_DTYPE_COUNT] = {
    [HCOMM_INT8] = "int8",       [HCOMM_UINT8] = "uint8",       [HCOMM_INT32] = "int32",
    [HCOMM_UINT32] = "uint32",   [HCOMM_INT64] = "int64",       [HCOMM_UINT64] = "uint64",
    [HCOMM_FLOAT16] = "float16", [HCOMM_BFLOAT16] = "bfloat16", [HCOMM_FLOAT32] = "float32",
    [HCOMM_FLOAT64] = "float64",
};

static const char *const op_names[HCOMM_OP_COUNT] = {[HCOMM_SUM] = "sum", [HCOMM_PROD] = "prod",
                                                     [HCOMM_MIN] = "min", [HCOMM_MAX] = "max",
                                                     [HCOMM_AVG] = "avg"};

const char *ct_coll_name(ct_coll_t coll)
{
    return (unsigned)coll < CT_NCOLL ? coll_names[coll] : "?";
}

int ct_coll_from_name(const char *name, ct_coll_t *coll)
{
    for (int i = 0; i < CT_NCOLL; i++) {
        if (strcmp(name, coll_names[i]) == 0) {
            *coll = (ct_coll_t)i;
            return 0;
        }
    }
    return -1;
}

int ct_coll_reduces(ct_coll_t coll)
{
    return coll == CT_ALLREDUCE || coll == CT_REDUCE || coll == CT_REDUCE_SCATTER;
}

int ct_coll_rooted(ct_coll_t coll)
{
    return coll == CT_BROADCAST || coll == CT_REDUCE;
}

void ct_report(const ct_run_t *run, const char *fmt, ...)
{
    const ct_case_t *c = &run->c;
    char             reason[512];
    va_list          ap;

    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    printf("FAIL rank %d: %s%s dtype=%s op=%s count=%zu inplace=%d root=%d: %s\n", run->rank,
           run->label ? run->label : "", ct_coll_name(c->coll),
           (unsigned)c->dt < HCOMM_DTYPE_COUNT ? dtype_names[c->dt] : "?",
           ct_coll_reduces(c->coll) ? op_names[c->op] : "-", c->count, c->inplace, c->root, reason);
    fflush(stdout);
}

static void *gbuf_alloc(ct_gbuf_t *g, size_t bytes, int fill)
{
    g->base = malloc(bytes + 2 * CT_GUARD);
    if (g->base == NULL)
        return NULL;
    g->bytes = bytes;
    memset(g->base, CT_GUARD_BYTE, CT_GUARD);
    memset(g->base + CT_GUARD, fill, bytes);
    memset(g->base + CT_GUARD + bytes, CT_GUARD_BYTE, CT_GUARD);
    return g->base + CT_GUARD;
}

/* 0 if intact, else 1 and *off = the first bad byte's offset from the payload. */
static int gbuf_bad_guard(const ct_gbuf_t *g, long *off)
{
    for (size_t i = 0; i < CT_GUARD; i++) {
        if (g->base[i] != CT_GUARD_BYTE) {
            *off = (long)i - CT_GUARD;
            return 1;
        }
        if (g->base[CT_GUARD + g->bytes + i] != CT_GUARD_BYTE) {
            *off = (long)(g->bytes + i);
            return 1;
        }
    }
    return 0;
}

static void sizes_of(const ct_case_t *c, int nranks, size_t *sc, size_t *rc)
{
    size_t n = (size_t)nranks;
    switch (c->coll) {
    case CT_ALLGATHER:
        *sc = c->count;
        *rc = n * c->count;
        break;
    case CT_REDUCE_SCATTER:
        *sc = n * c->count;
        *rc = c->count;
        break;
    case CT_ALLTOALL:
        *sc = *rc = n * c->count;
        break;
    case CT_BARRIER:
        *sc = *rc = 0;
        break;
    default:
        *sc = *rc = c->count;
        break;
    }
}

static int keep_copy(ct_run_t *run, int i, size_t bytes)
{
    run->send_bytes[i] = bytes;
    run->send_copy[i]  = malloc(bytes ? bytes : 1);
    if (run->send_copy[i] == NULL)
        return -1;
    memcpy(run->send_copy[i], run->send[i], bytes);
    return 0;
}

static int prepare_inplace(ct_run_t *run, size_t sc, size_t rc, int fill)
{
    const ct_case_t *c  = &run->c;
    size_t           es = ct_size(c->dt), n = (size_t)run->nranks, r = (size_t)run->rank;
    size_t           elems = sc > rc ? sc : rc;
    unsigned char   *b     = gbuf_alloc(&run->g[0], elems * es, fill);

    if (b == NULL)
        return -1;
    run->send[0] = run->recv[0] = b;
    if (c->coll == CT_ALLGATHER) {
        run->send[0] = b + r * c->count * es;
        ct_fill(run->send[0], c->count, c->dt, c->op, run->rank, 0, c->seed);
    } else if (c->coll == CT_REDUCE_SCATTER) {
        run->recv[0] = b + r * c->count * es;
        ct_fill(b, n * c->count, c->dt, c->op, run->rank, 0, c->seed);
    } else if (c->coll != CT_BROADCAST || run->rank == c->root) {
        ct_fill(b, sc, c->dt, c->op, run->rank, 0, c->seed);
    }
    return 0;
}

static int prepare_outofplace(ct_run_t *run, size_t sc, size_t rc, int fill)
{
    const ct_case_t *c     = &run->c;
    size_t           es    = ct_size(c->dt);
    int              nsend = c->coll == CT_SENDRECV ? 2 : 1;

    for (int i = 0; i < nsend; i++) {
        run->send[i] = gbuf_alloc(&run->g[i], sc * es, fill);
        if (run->send[i] == NULL)
            return -1;
        ct_fill(run->send[i], sc, c->dt, c->op, run->rank, 0, c->seed + (uint64_t)i);
        if (keep_copy(run, i, sc * es) != 0)
            return -1;
    }
    for (int i = 0; i < nsend; i++) {
        /* reduce: non-root ranks pass NULL (allowed) when root is 0 */
        if (c->coll == CT_REDUCE && run->rank != c->root && c->root == 0)
            continue;
        run->recv[i] = gbuf_alloc(&run->g[2 + i], rc * es, fill);
        if (run->recv[i] == NULL)
            return -1;
    }
    return 0;
}

int ct_prepare(ct_run_t *run, const ct_case_t *c, int rank, int nranks)
{
    size_t sc, rc;
    int    fill = 0x80 | (int)((c->seed * 37) & 0x7f);

    memset(run, 0, sizeof(*run));
    run->c      = *c;
    run->rank   = rank;
    run->nranks = nranks;
    run->label  = "";
    if (c->coll == CT_BARRIER)
        return 0;
    sizes_of(c, nranks, &sc, &rc);
    if ((c->inplace ? prepare_inplace(run, sc, rc, fill) : prepare_outofplace(run, sc, rc, fill)) !=
        0) {
        ct_release(run);
        return -1;
    }
    return 0;
}

static hcomm_status_t issue_ring(ct_run_t *run, hcomm_comm_t comm)
{
    const ct_case_t *c    = &run->c;
    int              next = (run->rank + 1) % run->nranks;
    int              prev = (run->rank + run->nranks - 1) % run->nranks;
    hcomm_status_t   st[4], end;

    /* Order matters where next == prev: the n-th send matches the n-th recv. */
    hcomm_group_start();
    st[0] = hcomm_send(run->send[0], c->count, c->dt, next, comm, NULL);
    st[1] = hcomm_send(run->send[1], c->count, c->dt, prev, comm, NULL);
    st[2] = hcomm_recv(run->recv[0], c->count, c->dt, prev, comm, NULL);
    st[3] = hcomm_recv(run->recv[1], c->count, c->dt, next, comm, NULL);
    end   = hcomm_group_end();
    for (int i = 0; i < 4; i++)
        if (st[i] != HCOMM_SUCCESS)
            return st[i];
    return end;
}

hcomm_status_t ct_issue(ct_run_t *run, hcomm_comm_t comm)
{
    const ct_case_t *c = &run->c;
    void            *s = run->send[0], *r = run->recv[0];

    switch (c->coll) {
    case CT_ALLREDUCE:
        return hcomm_allreduce(s, r, c->count, c->dt, c->op, comm, NULL);
    case CT_BROADCAST:
        return hcomm_broadcast(s, r, c->count, c->dt, c->root, comm, NULL);
    case CT_REDUCE:
        return hcomm_reduce(s, r, c->count, c->dt, c->op, c->root, comm, NULL);
    case CT_ALLGATHER:
        return hcomm_allgather(s, r, c->count, c->dt, comm, NULL);
    case CT_REDUCE_SCATTER:
        return hcomm_reduce_scatter(s, r, c->count, c->dt, c->op, comm, NULL);
    case CT_ALLTOALL:
        return hcomm_alltoall(s, r, c->count, c->dt, comm, NULL);
    case CT_SENDRECV:
        return issue_ring(run, comm);
    case CT_BARRIER:
        return hcomm_barrier(comm, NULL);
    default:
        return HCOMM_ERR_INVALID_ARG;
    }
}

hcomm_status_t ct_issue_nb(ct_run_t *run, hcomm_comm_t comm)
{
    const ct_case_t *c = &run->c;
    void            *s = run->send[0], *r = run->recv[0];
    hcomm_request_t *q = &run->req;

    switch (c->coll) {
    case CT_ALLREDUCE:
        return hcomm_iallreduce(s, r, c->count, c->dt, c->op, comm, q);
    case CT_BROADCAST:
        return hcomm_ibroadcast(s, r, c->count, c->dt, c->root, comm, q);
    case CT_REDUCE:
        return hcomm_ireduce(s, r, c->count, c->dt, c->op, c->root, comm, q);
    case CT_ALLGATHER:
        return hcomm_iallgather(s, r, c->count, c->dt, comm, q);
    case CT_REDUCE_SCATTER:
        return hcomm_ireduce_scatter(s, r, c->count, c->dt, c->op, comm, q);
    case CT_ALLTOALL:
        return hcomm_ialltoall(s, r, c->count, c->dt, comm, q);
    case CT_BARRIER:
        return hcomm_ibarrier(comm, q);
    default:
        return HCOMM_ERR_INVALID_ARG;
    }
}

/* The expected element i of result buffer `which` (sendrecv: 0 from prev, 1 from next). */
static ct_val_t expected_at(const ct_run_t *run, int which, size_t i)
{
    const ct_case_t *c = &run->c;
    int              n = run->nranks, r = run->rank;
    size_t           cnt = c->count;

    switch (c->coll) {
    case CT_ALLREDUCE:
    case CT_REDUCE:
        return ct_reduce_ref(c->dt, c->op, n, i, c->seed);
    case CT_REDUCE_SCATTER:
        return ct_reduce_ref(c->dt, c->op, n, (size_t)r * cnt + i, c->seed);
    case CT_BROADCAST:
        return ct_input(c->dt, c->op, c->root, i, c->seed);
    case CT_ALLGATHER:
        return ct_input(c->dt, c->op, (int)(i / cnt), i % cnt, c->seed);
    case CT_ALLTOALL:
        return ct_input(c->dt, c->op, (int)(i / cnt), (size_t)r * cnt + i % cnt, c->seed);
    case CT_SENDRECV:
        if (which == 0)
            return ct_input(c->dt, c->op, (r + n - 1) % n, i, c->seed);
        return ct_input(c->dt, c->op, (r + 1) % n, i, c->seed + 1);
    default: {
        ct_val_t zero = {0, 0.0};
        return zero;
    }
    }
}

static int check_result(ct_run_t *run, int which, size_t elems)
{
    const ct_case_t *c       = &run->c;
    int              reduces = ct_coll_reduces(c->coll);

    for (size_t i = 0; i < elems; i++) {
        ct_val_t got = ct_load(run->recv[which], i, c->dt);
        ct_val_t exp = expected_at(run, which, i);
        double   tol = reduces ? ct_tolerance(c->dt, c->op, run->nranks, exp) : 0.0;
        if (!ct_equal(c->dt, got, exp, tol)) {
            char gs[64], es[64];
            ct_format(gs, sizeof(gs), c->dt, got);
            ct_format(es, sizeof(es), c->dt, exp);
            ct_report(run, "%sindex %zu got %s expected %s (tolerance %g)",
                      which ? "recv-from-next " : "", i, gs, es, tol);
            return 1;
        }
    }
    return 0;
}

static int check_buffers(ct_run_t *run)
{
    static const char *const gname[4] = {"send", "send[1]", "recv", "recv[1]"};
    size_t                   es       = ct_size(run->c.dt);

    for (int i = 0; i < 4; i++) {
        long bad = 0;
        if (run->g[i].base != NULL && gbuf_bad_guard(&run->g[i], &bad)) {
            ct_report(run, "guard byte at offset %ld of %s buffer (%zu bytes) overwritten", bad,
                      run->c.inplace ? "the in-place" : gname[i], run->g[i].bytes);
            return 1;
        }
    }
    for (int i = 0; i < 2; i++) {
        if (run->send_copy[i] == NULL ||
            memcmp(run->send_copy[i], run->send[i], run->send_bytes[i]) == 0)
            continue;
        size_t off = 0;
        while (((unsigned char *)run->send_copy[i])[off] == ((unsigned char *)run->send[i])[off])
            off++;
        ct_report(run, "out-of-place call modified %s buffer at element %zu", gname[i], off / es);
        return 1;
    }
    return 0;
}

int ct_verify(ct_run_t *run)
{
    const ct_case_t *c = &run->c;
    size_t           sc, rc;

    if (c->coll == CT_BARRIER)
        return 0;
    if (check_buffers(run) != 0)
        return 1;
    sizes_of(c, run->nranks, &sc, &rc);
    if (c->coll == CT_REDUCE && run->rank != c->root)
        return 0; /* only root's recvbuf is defined */
    if (check_result(run, 0, rc) != 0)
        return 1;
    if (c->coll == CT_SENDRECV && check_result(run, 1, rc) != 0)
        return 1;
    return 0;
}

void ct_release(ct_run_t *run)
{
    for (int i = 3; i >= 0; i--) {
        free(run->g[i].base);
        run->g[i].base = NULL;
    }
    for (int i = 1; i >= 0; i--) {
        free(run->send_copy[i]);
        run->send_copy[i] = NULL;
    }
}
