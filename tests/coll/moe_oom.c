/*
 * moe_oom - a rank out of memory in hcomm_moe_dispatch, once the counts are
 * exchanged, must not leave its peers waiting until the timeout. Run under
 * hcomm-run -n N (N >= 2): moe_oom rows|layout. Every expert lives on rank 1,
 * every token picks all 8 of them; a warm-up dispatch first, then rank 1
 * makes malloc fail from a size its received rows (rows) or its expert rows
 * (layout, 8 per row) need, and every rank dispatches 512 tokens. Rank 1 must
 * get HCOMM_ERR_NO_MEMORY, the others an error from the dispatch or the
 * combine after it, all within LIMIT_S (the communicator's timeout: 30 s).
 * Rank 1 keeps its communicator LIMIT_S + 1 s after its failure, as a
 * program that goes on would: its peers must not need it gone.
 * The failing malloc is this program's own (glibc's __libc_malloc behind it);
 * without glibc or under a sanitizer, which has its own, it exits 77.
 * Exit: 0 passed, 1 failed, 2 init failure, 77 skipped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hcomm_moe.h"
#include "test_comm.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#endif
#if defined(__GLIBC__) && !defined(SANITIZED)
#define CAN_FAIL_MALLOC 1
#endif

#define VICTIM 1
#define K 8
#define HIDDEN 1024
#define TOKENS 512
#define LIMIT_S 5.0

static size_t g_fail_from; /* malloc of this many bytes or more fails; 0: none */
static int    g_nfailed;

#ifdef CAN_FAIL_MALLOC
extern void *__libc_malloc(size_t size);

/* Overrides libc's malloc for the whole process, libhcomm included. */
void *malloc(size_t size)
{
    size_t from = __atomic_load_n(&g_fail_from, __ATOMIC_RELAXED);
    if (from != 0 && size >= from) {
        __atomic_add_fetch(&g_nfailed, 1, __ATOMIC_RELAXED);
        errno = ENOMEM;
        return NULL;
    }
    return __libc_malloc(size);
}
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* T tokens of this rank, each to all K experts. */
static hcomm_status_t dispatch(hcomm_moe_t moe, size_t T, hcomm_moe_recv_t *rv)
{
    float   *x   = calloc(T * HIDDEN + 1, sizeof(float));
    int32_t *ids = malloc((T * K + 1) * sizeof(int32_t));
    float   *w   = malloc((T * K + 1) * sizeof(float));

    if (x == NULL || ids == NULL || w == NULL) {
        free(x), free(ids), free(w);
        return HCOMM_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < T * K; i++) {
        ids[i] = (int32_t)(i % K);
        w[i]   = 1.0f / K;
    }
    hcomm_status_t st = hcomm_moe_dispatch(moe, x, T, ids, w, rv);
    free(x), free(ids), free(w);
    return st;
}

int main(int argc, char **argv)
{
    hcomm_comm_t     comm = NULL;
    hcomm_moe_t      moe  = NULL;
    hcomm_moe_recv_t rv;
    int              rank = 0, n = 1, layout = argc > 1 && strcmp(argv[1], "layout") == 0;
    int32_t          place[K] = {VICTIM, VICTIM, VICTIM, VICTIM, VICTIM, VICTIM, VICTIM, VICTIM};

#ifndef CAN_FAIL_MALLOC
    printf("moe_oom: SKIP: cannot make malloc fail here (not glibc, or a sanitizer's malloc)\n");
    return 77;
#endif
    if (test_comm_init(&comm, &rank, &n) != HCOMM_SUCCESS || n < 2) {
        fprintf(stderr, "moe_oom: init failed (or fewer than 2 ranks)\n");
        return 2;
    }
    hcomm_moe_config_t cfg = {K, place, K, HIDDEN, HCOMM_FLOAT32};
    hcomm_status_t     st  = hcomm_comm_set_timeout(comm, 30);
    if (st == HCOMM_SUCCESS)
        st = hcomm_moe_create(comm, &cfg, &moe);
    if (st == HCOMM_SUCCESS)
        st = dispatch(moe, 4, &rv); /* connects every pair, sizes the small buffers */
    if (st != HCOMM_SUCCESS) {
        fprintf(stderr, "moe_oom rank %d: warm-up: %s\n", rank, hcomm_status_name(st));
        return 2;
    }
    /* rank 1 receives n x TOKENS rows: rows of 4 + 8 K + 4 HIDDEN bytes, and
     * K expert rows of 4 HIDDEN bytes per row */
    size_t rows = (size_t)n * TOKENS * (4 + 8 * K + 4 * HIDDEN);
    if (rank == VICTIM)
        __atomic_store_n(&g_fail_from, layout ? 2 * rows : rows / 2, __ATOMIC_RELAXED);
    double t0 = now();
    st        = dispatch(moe, TOKENS, &rv);
    __atomic_store_n(&g_fail_from, 0, __ATOMIC_RELAXED);
    const char *where = "dispatch";
    if (st == HCOMM_SUCCESS && rank != VICTIM) { /* a rank whose dispatch passed combines */
        where     = "combine";
        void *out = malloc((size_t)TOKENS * HIDDEN * sizeof(float));
        st        = out != NULL ? hcomm_moe_combine(moe, rv.tokens, out) : HCOMM_ERR_NO_MEMORY;
        free(out);
    }
    double dt = now() - t0;
    int    ok = rank == VICTIM ? st == HCOMM_ERR_NO_MEMORY && g_nfailed > 0 : st != HCOMM_SUCCESS;
    ok        = ok && dt < LIMIT_S;
    printf("moe_oom rank %d (%s): %s %s after %.2f s (%d mallocs failed): %s\n", rank,
           layout ? "layout" : "rows", where, hcomm_status_name(st), dt, g_nfailed,
           ok ? "ok" : "FAIL");
    if (rank == VICTIM)
        nanosleep(&(struct timespec){(time_t)LIMIT_S + 1, 0}, NULL);
    hcomm_moe_destroy(moe);
    if (hcomm_comm_get_error(comm) != HCOMM_SUCCESS)
        hcomm_comm_abort(comm);
    else
        hcomm_comm_destroy(comm);
    return !ok;
}
