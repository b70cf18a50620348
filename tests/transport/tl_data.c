/* tl_data.c - message contents for the transport suite: a pattern where each
 * byte depends on its offset, the sender, the receiver and the message's index
 * (a byte delivered at the wrong place, from the wrong peer or in the wrong
 * order shows), a sink that checks its pieces as they come, and the exchange
 * of a list of sizes between every pair of ranks. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tl_suite.h"

#define GUARD 0xa5

uint64_t hc_tlt_seed(int src, int dst, int idx)
{
    return ((uint64_t)(uint32_t)src << 48 | (uint64_t)(uint32_t)dst << 32 | (uint32_t)idx) *
               0x9e3779b97f4a7c15ull +
           1;
}

/* Eight bytes of the pattern: those at offsets 8w .. 8w + 7, in the host's
 * byte order (both ends of a message run on this host). */
static inline uint64_t pat_word(uint64_t seed, uint64_t w)
{
    uint64_t x = seed ^ (w * 0xbf58476d1ce4e5b9ull);

    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 29);
}

/* Compares (check) or writes the pattern over n bytes at message offset off:
 * the index of the first wrong byte, or n. Whole words where aligned: 64 MiB
 * messages are checked byte for byte many times per run. */
static size_t pat_apply(uint8_t *p, size_t off, size_t n, uint64_t seed, int check)
{
    size_t i = 0;

    while (i < n) {
        size_t   pos = off + i;
        uint64_t w   = pat_word(seed, pos >> 3);
        uint8_t  b[8];

        memcpy(b, &w, 8);
        if ((pos & 7) == 0 && n - i >= 8 && (!check || memcmp(p + i, b, 8) == 0)) {
            if (!check)
                memcpy(p + i, b, 8);
            i += 8;
            continue;
        }
        for (size_t k = pos & 7; k < 8 && i < n; k++, i++) {
            if (!check)
                p[i] = b[k];
            else if (p[i] != b[k])
                return i;
        }
    }
    return n;
}

void hc_tlt_fill(uint8_t *p, size_t off, size_t n, uint64_t seed)
{
    pat_apply(p, off, n, seed, 0);
}

size_t hc_tlt_check(const uint8_t *p, size_t off, size_t n, uint64_t seed)
{
    return pat_apply((uint8_t *)(uintptr_t)p, off, n, seed, 1);
}

/* Big buffers in huge pages where the kernel lends them: faulting in 4 KiB
 * pages took most of the suite's time on a virtual machine. */
#define HUGE_MIN (2 * HC_TLT_MIB)

void *hc_tlt_alloc(size_t n)
{
    void *p;

    if (n < HUGE_MIN)
        return malloc(n);
    p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, n, MADV_HUGEPAGE); /* best effort */
#endif
    return p;
}

void hc_tlt_free(void *p, size_t n)
{
    if (p == NULL)
        return;
    if (n < HUGE_MIN)
        free(p);
    else
        munmap(p, n);
}

void hc_tlt_sink_fn(void *arg, size_t off, const void *data, size_t len)
{
    hc_tlt_sink_t *s = arg;
    size_t         bad;

    if (off != s->next || len == 0)
        hc_tlt_fail(__FILE__, __LINE__, "sink piece at %zu of %zu bytes, want one at %zu", off, len,
                    s->next);
    bad = hc_tlt_check(data, off, len, s->seed);
    if (bad != len)
        hc_tlt_fail(__FILE__, __LINE__, "sink piece at %zu: byte %zu is wrong", off, off + bad);
    s->next += len;
    s->pieces++;
}

/* The buffers and requests of one exchange: message k of peer q is q * n + k. */
typedef struct xchg {
    int            n, nmsg;
    unsigned       peers;
    int            mode;
    const size_t  *sizes;
    hc_tl_req_t   *sreq, *rreq;
    uint8_t      **sbuf, **rbuf;
    hc_tlt_sink_t *sink;
} xchg_t;

static int xchg_with(const hc_tlt_env_t *env, const xchg_t *x, int q)
{
    return q != env->rank && (x->peers & (1u << q));
}

static int xchg_sink(const xchg_t *x, int i)
{
    return x->mode == HC_TLT_SINK || (x->mode == HC_TLT_MIXED && i % 2 == 0);
}

static void xchg_alloc(xchg_t *x, int nranks, int n)
{
    x->n    = n;
    x->nmsg = nranks * n;
    x->sreq = calloc((size_t)x->nmsg, sizeof(*x->sreq));
    x->rreq = calloc((size_t)x->nmsg, sizeof(*x->rreq));
    x->sbuf = calloc((size_t)x->nmsg, sizeof(*x->sbuf));
    x->rbuf = calloc((size_t)x->nmsg, sizeof(*x->rbuf));
    x->sink = calloc((size_t)x->nmsg, sizeof(*x->sink));
    HC_TLT_CHK(x->sreq && x->rreq && x->sbuf && x->rbuf && x->sink);
}

static void xchg_free(xchg_t *x)
{
    for (int k = 0; k < x->nmsg; k++) {
        hc_tlt_free(x->sbuf[k], x->sizes[k % x->n] + 1);
        hc_tlt_free(x->rbuf[k], x->sizes[k % x->n] + 1);
    }
    free(x->sink);
    free(x->rbuf);
    free(x->sbuf);
    free(x->rreq);
    free(x->sreq);
}

static void xchg_post(hc_tlt_env_t *env, xchg_t *x, const size_t *sizes)
{
    for (int q = 0; q < env->nranks; q++) {
        for (int i = 0; xchg_with(env, x, q) && i < x->n; i++) {
            int    k   = q * x->n + i;
            size_t len = sizes[i];
            x->sbuf[k] = hc_tlt_alloc(len + 1);
            HC_TLT_CHK(x->sbuf[k] != NULL);
            hc_tlt_fill(x->sbuf[k], 0, len, hc_tlt_seed(env->rank, q, i));
            x->sink[k].seed = hc_tlt_seed(q, env->rank, i);
            if (!xchg_sink(x, i)) {
                x->rbuf[k] = hc_tlt_alloc(len + 1);
                HC_TLT_CHK(x->rbuf[k] != NULL);
                x->rbuf[k][len] = GUARD; /* the rest stays untouched until the transport writes */
            }
            HC_TLT_CHK_ST(env->ops->isend(env->eps[q], x->sbuf[k], len, &x->sreq[k]),
                          HCOMM_SUCCESS);
            HC_TLT_CHK_ST(env->ops->irecv(env->eps[q], x->rbuf[k], len,
                                          xchg_sink(x, i) ? hc_tlt_sink_fn : NULL, &x->sink[k],
                                          &x->rreq[k]),
                          HCOMM_SUCCESS);
        }
    }
}

/* Waits for every request of the exchange (the self slots are never posted). */
static void xchg_wait(hc_tlt_env_t *env, xchg_t *x)
{
    for (int q = 0; q < env->nranks; q++) {
        if (!xchg_with(env, x, q))
            continue;
        hc_tlt_wait_ok(env, &x->sreq[q * x->n], x->n, 60);
        hc_tlt_wait_ok(env, &x->rreq[q * x->n], x->n, 60);
    }
}

void hc_tlt_exchange(hc_tlt_env_t *env, unsigned peers, const size_t *sizes, int n, int mode)
{
    xchg_t x;

    xchg_alloc(&x, env->nranks, n);
    x.peers = peers;
    x.mode  = mode;
    x.sizes = sizes;
    xchg_post(env, &x, sizes);
    xchg_wait(env, &x);
    for (int q = 0; q < env->nranks; q++) {
        for (int i = 0; xchg_with(env, &x, q) && i < n; i++) {
            int    k   = q * n + i;
            size_t len = sizes[i], bad;
            if (x.sreq[k].done != len || x.rreq[k].done != len)
                hc_tlt_fail(__FILE__, __LINE__, "message %d with %d: %zu bytes, done %zu/%zu", i, q,
                            len, x.sreq[k].done, x.rreq[k].done);
            if (xchg_sink(&x, i)) {
                HC_TLT_CHK(x.sink[k].next == len);
                continue;
            }
            bad = hc_tlt_check(x.rbuf[k], 0, len, x.sink[k].seed);
            if (bad != len)
                hc_tlt_fail(__FILE__, __LINE__, "message %d of %zu bytes from %d: byte %zu wrong",
                            i, len, q, bad);
            HC_TLT_CHK(x.rbuf[k][len] == GUARD); /* nothing written past the end */
        }
    }
    xchg_free(&x);
}
