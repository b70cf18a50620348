/* tl_shm_only.c - what only the shared-memory transport has: the single-copy
 * (process_vm_readv) path beside the ring copy, small rings, segments in
 * /dev/shm (left by a crashed run, or by this suite). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/auth.h"
#include "base/log.h"
#include "tl_suite.h"
#include "transport/shm/shm.h"

#define MIB HC_TLT_MIB
#define KIB ((size_t)1 << 10)

/* "hcomm-" and the public name the cookie gives: every segment of a world. */
static void seg_prefix(const uint8_t *cookie, char *buf)
{
    strcpy(buf, "hcomm-");
    assert_int_equal(hc_auth_public_name(cookie, HC_AUTH_SHM_NAMES, buf + 6, 17), 0);
}

int hc_tlt_shm_leftovers(const uint8_t *cookie)
{
    char           prefix[32];
    int            n = 0;
    DIR           *d = opendir("/dev/shm");
    struct dirent *e;

    if (d == NULL)
        return 0;
    seg_prefix(cookie, prefix);
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            fprintf(stderr, "left in /dev/shm: %s\n", e->d_name);
            n++;
        }
    closedir(d);
    return n;
}

const char *hc_tlt_shm_unusable(void)
{
    static char why[128];
    char        name[64];
    int         fd;

    snprintf(name, sizeof(name), "/hcomm-probe-%d", (int)getpid());
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        snprintf(why, sizeof(why), "cannot create %s in /dev/shm: %s", name, strerror(errno));
        return why;
    }
    close(fd);
    shm_unlink(name);
    return NULL;
}

static hc_params_t shm_params(const hc_tlt_variant_t *v, size_t ring, size_t cma_min)
{
    hc_params_t prm    = hc_tlt_params(v);
    prm.shm_ring_bytes = ring;
    prm.shm_cma_min    = cma_min;
    return prm;
}

/* Sizes around the ring's (every exchange at once, every pair). */
static int body_ring_sizes(hc_tlt_env_t *env, void *arg)
{
    size_t ring    = env->ctx->ring_bytes;
    size_t sizes[] = {0, 1, 63, 64, 65, 4096, ring - 1, ring, ring + 1, 8 * MIB + 3};

    (void)arg;
    hc_tlt_exchange(env, HC_TLT_ALL, sizes, 10, HC_TLT_PLAIN);
    hc_tlt_exchange(env, HC_TLT_ALL, sizes, 10, HC_TLT_SINK);
    return 0;
}

static void case_small_ring(const hc_tlt_variant_t *v)
{
    hc_params_t    copy = shm_params(v, 1, 0); /* rounds up to 64 KiB; copies only */
    hc_params_t    cma  = shm_params(v, 64 * KIB, 4 * KIB);
    hc_tlt_world_t w2   = {.nranks = 2, .params = &copy, .body = body_ring_sizes};
    hc_tlt_world_t w3   = {.nranks = 3, .params = &cma, .body = body_ring_sizes};

    hc_tlt_expect(v, &w2);
    hc_tlt_expect(v, &w3);
}

/* Small and medium messages in bursts and one at a time on a 64 KiB ring: the
 * sender rewinds to the ring's start many times, also while the receiver is
 * still reading the messages before the rewind, and every message arrives. */
static int body_rewind(hc_tlt_env_t *env, void *arg)
{
    const size_t burst[] = {8, 2048, 0, 40, 41, 9000, 15000, 64, 1};
    const size_t one[]   = {3000};
    hc_tl_ep_t  *ep      = env->eps[1 - env->rank];

    (void)arg;
    for (int round = 0; round < 100; round++) {
        hc_tlt_exchange(env, HC_TLT_ALL, burst, 9, round % 2 ? HC_TLT_MIXED : HC_TLT_PLAIN);
        for (int i = 0; i < 5; i++)
            hc_tlt_exchange(env, HC_TLT_ALL, one, 1, HC_TLT_PLAIN);
    }
    HC_TLT_CHK(ep->n_rewind >= 50);
    return 0;
}

static void case_rewind(const hc_tlt_variant_t *v)
{
    hc_params_t    prm = shm_params(v, 64 * KIB, 0);
    hc_tlt_world_t w   = {.nranks = 2, .params = &prm, .body = body_rewind};
    hc_tlt_expect(v, &w);
}

/* The rest of a ring is touched in one go by the first message past the pages
 * touched at connect. Small messages alone never get there. */
static int body_warm_small(hc_tlt_env_t *env, void *arg)
{
    const size_t one[] = {2048};
    hc_tl_ep_t  *ep    = env->eps[1 - env->rank];

    (void)arg;
    for (int i = 0; i < 200; i++)
        hc_tlt_exchange(env, HC_TLT_ALL, one, 1, HC_TLT_PLAIN);
    HC_TLT_CHK(ep->n_rewind > 0);
    HC_TLT_CHK(ep->tx.cold == 2 * HC_SHM_HOT_BYTES && ep->rx.cold == 2 * HC_SHM_HOT_BYTES);
    return 0;
}

/* On a fresh pair, four messages that the receiver has not read fill the ring
 * to 24 KiB (no rewind: nothing is read), and a fifth reaches past 32 KiB: the
 * sender's touching of the rest must spare the four. */
#define WARM_N 5
static int body_warm_queued(hc_tlt_env_t *env, void *arg)
{
    const size_t len[WARM_N] = {6000, 6000, 6000, 6000, 60000};
    hc_tl_ep_t  *ep          = env->eps[1 - env->rank];
    hc_tl_req_t  reqs[WARM_N];
    uint8_t     *buf[WARM_N];

    (void)arg;
    for (int i = 0; i < WARM_N; i++)
        buf[i] = hc_tlt_alloc(len[i]);
    if (env->rank == 0) {
        for (int i = 0; i < WARM_N; i++) {
            hc_tlt_fill(buf[i], 0, len[i], hc_tlt_seed(0, 1, i));
            HC_TLT_CHK_ST(env->ops->isend(ep, buf[i], len[i], &reqs[i]), HCOMM_SUCCESS);
        }
        hc_tlt_wait_ok(env, reqs, WARM_N, 10); /* all written: the ring holds them */
        HC_TLT_CHK(ep->n_rewind == 0 && ep->tx.cold == ep->tx.size);
        hc_tlt_post(env, 0, 1);
    } else {
        HC_TLT_CHK(hc_tlt_await(env, 0, 0, 10) == 1);
        for (int i = 0; i < WARM_N; i++)
            HC_TLT_CHK_ST(env->ops->irecv(ep, buf[i], len[i], NULL, NULL, &reqs[i]), HCOMM_SUCCESS);
        hc_tlt_wait_ok(env, reqs, WARM_N, 10);
        for (int i = 0; i < WARM_N; i++)
            HC_TLT_CHK(hc_tlt_check(buf[i], 0, len[i], hc_tlt_seed(0, 1, i)) == len[i]);
        HC_TLT_CHK(ep->rx.cold == ep->rx.size);
    }
    for (int i = 0; i < WARM_N; i++)
        hc_tlt_free(buf[i], len[i]);
    return 0;
}

static void case_warm(const hc_tlt_variant_t *v)
{
    hc_params_t    prm    = shm_params(v, HC_TLT_MIB, 0);
    hc_tlt_world_t small  = {.nranks = 2, .params = &prm, .body = body_warm_small};
    hc_tlt_world_t queued = {.nranks = 2, .params = &prm, .body = body_warm_queued};
    hc_tlt_expect(v, &small);
    hc_tlt_expect(v, &queued);
}

/* 8 MiB both ways (and through a sink); arg: single copy must (1) or must not
 * (0) carry them. */
static int body_path(hc_tlt_env_t *env, void *arg)
{
    int          want_cma = *(const int *)arg;
    int          peer     = 1 - env->rank;
    hc_tl_ep_t  *ep       = env->eps[peer];
    const size_t sizes[]  = {8 * MIB + 3};

    hc_tlt_sync(env); /* both probes done: cma_ok is final */
    if (want_cma && atomic_load(&ep->tx.ctl->cma_ok) != HC_SHM_CMA_YES) {
        printf("[shm] skipped: process_vm_readv between the ranks is not permitted here\n");
        return HC_TLT_SKIP;
    }
    hc_tlt_exchange(env, HC_TLT_ALL, sizes, 1, HC_TLT_PLAIN);
    hc_tlt_exchange(env, HC_TLT_ALL, sizes, 1, HC_TLT_SINK);
    if (want_cma)
        HC_TLT_CHK(ep->n_cma_tx == 2 && ep->n_cma_rx == 2);
    else
        HC_TLT_CHK(ep->n_cma_tx + ep->n_cma_rx == 0);
    return 0;
}

static void case_cma_path(const hc_tlt_variant_t *v)
{
    hc_params_t    prm = shm_params(v, 2 * MIB, 256 * KIB);
    int            yes = 1;
    hc_tlt_world_t w   = {.nranks = 2, .params = &prm, .body = body_path, .arg = &yes};
    hc_tlt_expect(v, &w);
}

static void case_copy_path(const hc_tlt_variant_t *v)
{
    hc_params_t    prm = shm_params(v, 2 * MIB, 0);
    int            no  = 0;
    hc_tlt_world_t w   = {.nranks = 2, .params = &prm, .body = body_path, .arg = &no};
    hc_tlt_expect(v, &w);
}

/* Rank 0 closes while rank 1 reads its 64 MiB by single copy, then
 * overwrites the buffer before rank 1 reads on: the receive fails (REMOTE)
 * or got every byte as sent, never success with other bytes. */
static int body_cma_close(hc_tlt_env_t *env, void *arg)
{
    const size_t n    = 64 * MIB;
    hc_tl_ep_t  *ep   = env->eps[1 - env->rank];
    uint8_t     *buf  = hc_tlt_alloc(n);
    uint64_t     seed = hc_tlt_seed(0, 1, 0);
    hc_tl_req_t  r;
    double       t0;
    (void)arg;
    HC_TLT_CHK(buf != NULL);
    hc_tlt_sync(env);
    if (atomic_load(&ep->tx.ctl->cma_ok) != HC_SHM_CMA_YES) {
        printf("[shm] skipped: process_vm_readv between the ranks is not permitted here\n");
        hc_tlt_free(buf, n);
        return HC_TLT_SKIP;
    }
    if (env->rank == 0) {
        hc_tlt_fill(buf, 0, n, seed);
        HC_TLT_CHK_ST(env->ops->isend(ep, buf, n, &r), HCOMM_SUCCESS);
        for (int i = 0; i < 16; i++) /* the descriptor out; the reads need no more */
            (void)env->ops->progress(env->ctx);
        hc_tlt_await(env, 1, 0, 30); /* rank 1 started reading */
        env->ops->fini(env->ctx);    /* the send abandoned: the buffer is ours */
        env->ctx = NULL;
        memset(buf, 0xee, n);
        hc_tlt_post(env, 0, 1);
        hc_tlt_await(env, 1, 1, 30);
    } else {
        HC_TLT_CHK_ST(env->ops->irecv(ep, buf, n, NULL, NULL, &r), HCOMM_SUCCESS);
        for (t0 = hc_tlt_now(); r.done == 0 && r.status == HCOMM_IN_PROGRESS;)
            if (env->ops->progress(env->ctx) < 0 || hc_tlt_now() - t0 > 20)
                hc_tlt_fail(__FILE__, __LINE__, "no byte of the message came");
        HC_TLT_CHK(r.done < n); /* a read to go on with */
        hc_tlt_post(env, 0, 1);
        hc_tlt_await(env, 0, 0, 30);
        (void)hc_tlt_wait(env, &r, 1, 20);
        if (r.status == HCOMM_SUCCESS)
            HC_TLT_CHK(hc_tlt_check(buf, 0, n, seed) == n);
        else
            HC_TLT_CHK_ST(r.status, HCOMM_ERR_REMOTE);
        hc_tlt_post(env, 1, 1);
    }
    hc_tlt_free(buf, n);
    return 0;
}

static void case_cma_close(const hc_tlt_variant_t *v)
{
    hc_params_t    prm = shm_params(v, 2 * MIB, 256 * KIB);
    hc_tlt_world_t w   = {.nranks = 2, .params = &prm, .body = body_cma_close};
    hc_tlt_expect(v, &w);
}

/* A message of at most HC_SHM_WHOLE_MAX bytes is found by its header's stamp,
 * not by the ring's head: rank 0 puts head back where it was before each send
 * once the send is written, and rank 1, receiving only after all are sent,
 * still gets every one right. */
static int body_stamps(hc_tlt_env_t *env, void *arg)
{
    const size_t sizes[] = {0, 8, 40, 41, 1000, 4096, HC_SHM_WHOLE_MAX - 1, HC_SHM_WHOLE_MAX};
    enum { N = sizeof(sizes) / sizeof(sizes[0]) };
    hc_tl_ep_t *ep = env->eps[1 - env->rank];
    uint8_t    *buf[N];
    hc_tl_req_t req[N];

    (void)arg;
    hc_tlt_sync(env);
    for (int i = 0; i < N; i++) {
        buf[i] = hc_tlt_alloc(HC_SHM_WHOLE_MAX);
        HC_TLT_CHK(buf[i] != NULL);
    }
    if (env->rank == 0) {
        uint64_t head = atomic_load(&ep->tx.ctl->head);
        for (int i = 0; i < N; i++) {
            hc_tlt_fill(buf[i], 0, sizes[i], hc_tlt_seed(0, 1, i));
            HC_TLT_CHK_ST(env->ops->isend(ep, buf[i], sizes[i], &req[i]), HCOMM_SUCCESS);
            hc_tlt_wait_ok(env, &req[i], 1, 10);
            atomic_store(&ep->tx.ctl->head, head);
        }
        hc_tlt_post(env, 0, 1);
        hc_tlt_await(env, 1, 0, 30);
    } else {
        hc_tlt_await(env, 0, 0, 30);
        for (int i = 0; i < N; i++)
            HC_TLT_CHK_ST(env->ops->irecv(ep, buf[i], sizes[i], NULL, NULL, &req[i]),
                          HCOMM_SUCCESS);
        hc_tlt_wait_ok(env, req, N, 10);
        for (int i = 0; i < N; i++)
            HC_TLT_CHK(hc_tlt_check(buf[i], 0, sizes[i], hc_tlt_seed(0, 1, i)) == sizes[i]);
        hc_tlt_post(env, 0, 1);
    }
    for (int i = 0; i < N; i++)
        hc_tlt_free(buf[i], HC_SHM_WHOLE_MAX);
    return 0;
}

static void case_stamps(const hc_tlt_variant_t *v)
{
    hc_params_t    prm = shm_params(v, 1 * MIB, 0);
    hc_tlt_world_t w   = {.nranks = 2, .params = &prm, .body = body_stamps};
    hc_tlt_expect(v, &w);
}

/* ---- inside one process: two contexts play both ranks ---- */

static void local_info(hc_peer_info_t *info)
{
    memset(info, 0, 2 * sizeof(*info));
    for (int r = 0; r < 2; r++) {
        strcpy(info[r].hostname, "localhost");
        info[r].host_hash = 0x5eedull;
        info[r].pid       = getpid();
        info[r].rank      = r;
        assert_int_equal(getrandom(info[r].nonce, sizeof(info[r].nonce), 0),
                         (ssize_t)sizeof(info[r].nonce));
    }
}

/* The name of the pair's segment, as rank 0 makes it. */
static void local_seg_name(const uint8_t *cookie, const hc_peer_info_t *info, char *name)
{
    char pub[17];
    assert_int_equal(hc_auth_public_name(cookie, HC_AUTH_SHM_NAMES, pub, sizeof(pub)), 0);
    hc_shm_seg_name(pub, info[0].nonce, 0, 1, name);
}

static hc_tl_ctx_t *local_ctx(int rank, const uint8_t *cookie, double timeout,
                              const hc_params_t *prm, const hc_peer_info_t *info)
{
    hc_tl_params_t tp = {
        .rank = rank, .nranks = 2, .timeout = timeout, .self = &info[rank], .params = prm};
    hc_tl_ctx_t *ctx = NULL;

    memcpy(tp.cookie, cookie, sizeof(tp.cookie));
    assert_int_equal(hc_tl_shm_ops.init(&ctx, &tp), HCOMM_SUCCESS);
    return ctx;
}

/* The segment rank 0 made for the pair, spoiled by how: 0 flips a bit of
 * its tag (a forger's, not made with the secret), 1 lets others write it
 * (another user's is refused alike). Rank 1's open is refused, exactly. */
static void open_spoiled(const hc_tlt_variant_t *v, int how)
{
    hc_params_t    prm = shm_params(v, 64 * KIB, 256 * KIB);
    hc_peer_info_t info[2];
    uint8_t        cookie[16];
    char           name[64], path[80];
    hc_tl_ctx_t   *a, *b;
    hc_tl_ep_t    *ea, *eb;

    local_info(info);
    assert_int_equal(getrandom(cookie, sizeof(cookie), 0), (ssize_t)sizeof(cookie));
    a = local_ctx(0, cookie, 1, &prm, info);
    b = local_ctx(1, cookie, 1, &prm, info);
    assert_int_equal(hc_tl_shm_ops.connect(a, &info[1], NULL, 0, &ea), HCOMM_SUCCESS);
    local_seg_name(cookie, info, name);
    if (how == 0) {
        int fd = shm_open(name, O_RDWR, 0);
        assert_true(fd >= 0);
        hc_shm_seg_t *seg = mmap(NULL, HC_SHM_HDR_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        assert_true(seg != MAP_FAILED);
        seg->tag[7] ^= 1;
        munmap(seg, HC_SHM_HDR_BYTES);
    } else {
        snprintf(path, sizeof(path), "/dev/shm%s", name);
        assert_int_equal(chmod(path, 0666), 0);
    }
    assert_int_equal(hc_tl_shm_ops.connect(b, &info[0], NULL, 0, &eb), HCOMM_ERR_AUTH);
    hc_tl_shm_ops.fini(b);
    hc_tl_shm_ops.fini(a); /* the peer never attached: a removes the name */
    assert_int_equal(hc_tlt_shm_leftovers(cookie), 0);
}

static void case_cookie_auth(const hc_tlt_variant_t *v)
{
    open_spoiled(v, 0);
}

static void case_open_mode(const hc_tlt_variant_t *v)
{
    open_spoiled(v, 1);
}

/* A segment found under the pair's name, not made by the lower rank (a
 * forger's, or left by a crash), is replaced. */
static void case_stale_segment(const hc_tlt_variant_t *v)
{
    hc_params_t    prm = shm_params(v, 64 * KIB, 4096);
    hc_peer_info_t info[2];
    uint8_t        cookie[16], *s, *r;
    char           name[64];
    size_t         len = MIB + 5;
    hc_tl_ctx_t   *a, *b;
    hc_tl_ep_t    *ea, *eb;
    hc_tl_req_t    reqs[2];
    double         deadline;
    int            fd;

    local_info(info);
    assert_int_equal(getrandom(cookie, sizeof(cookie), 0), (ssize_t)sizeof(cookie));
    local_seg_name(cookie, info, name);
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 8192), 0);
    close(fd);

    a = local_ctx(0, cookie, 2, &prm, info);
    b = local_ctx(1, cookie, 2, &prm, info);
    assert_int_equal(hc_tl_shm_ops.connect(a, &info[1], NULL, 0, &ea), HCOMM_SUCCESS);
    assert_int_equal(hc_tl_shm_ops.connect(b, &info[0], NULL, 0, &eb), HCOMM_SUCCESS);
    assert_int_equal(hc_tlt_shm_leftovers(cookie), 0); /* b unlinked the name once mapped */
    s = malloc(len);
    r = malloc(len);
    assert_true(s != NULL && r != NULL);
    hc_tlt_fill(s, 0, len, hc_tlt_seed(0, 1, 9));
    assert_int_equal(hc_tl_shm_ops.isend(ea, s, len, &reqs[0]), HCOMM_SUCCESS);
    assert_int_equal(hc_tl_shm_ops.irecv(eb, r, len, NULL, NULL, &reqs[1]), HCOMM_SUCCESS);
    deadline = hc_tlt_now() + 10;
    while ((reqs[0].status == HCOMM_IN_PROGRESS || reqs[1].status == HCOMM_IN_PROGRESS) &&
           hc_tlt_now() < deadline) {
        hc_tl_shm_ops.progress(a);
        hc_tl_shm_ops.progress(b);
    }
    assert_int_equal(reqs[0].status, HCOMM_SUCCESS);
    assert_int_equal(reqs[1].status, HCOMM_SUCCESS);
    assert_true(hc_tlt_check(r, 0, len, hc_tlt_seed(0, 1, 9)) == len);
    hc_tl_shm_ops.fini(b);
    hc_tl_shm_ops.fini(a);
    free(s);
    free(r);
    assert_int_equal(hc_tlt_shm_leftovers(cookie), 0);
}

/* Progresses ctx until req completes or secs pass. */
static void local_wait(hc_tl_ctx_t *ctx, hc_tl_req_t *req, double secs)
{
    double deadline = hc_tlt_now() + secs;
    while (req->status == HCOMM_IN_PROGRESS && hc_tlt_now() < deadline)
        hc_tl_shm_ops.progress(ctx);
}

/* A higher rank that closes without ever connecting marks the segment the
 * lower rank made for it closed: the lower rank's send, which waits for the
 * peer to map the segment, fails at once instead of at its 30 s timeout. */
static void case_closed_unopened(const hc_tlt_variant_t *v)
{
    hc_params_t    prm = shm_params(v, 64 * KIB, 0);
    hc_peer_info_t info[2];
    uint8_t        cookie[16], msg[100] = {0};
    hc_tl_ctx_t   *a, *b;
    hc_tl_ep_t    *ea;
    hc_tl_req_t    req;
    double         t0;

    local_info(info);
    assert_int_equal(getrandom(cookie, sizeof(cookie), 0), (ssize_t)sizeof(cookie));
    a = local_ctx(0, cookie, 30, &prm, info);
    b = local_ctx(1, cookie, 30, &prm, info);
    assert_true(hc_tl_shm_ops.reachable(b, &info[1], &info[0], NULL, 0));
    assert_int_equal(hc_tl_shm_ops.connect(a, &info[1], NULL, 0, &ea), HCOMM_SUCCESS);
    assert_int_equal(hc_tl_shm_ops.isend(ea, msg, sizeof(msg), &req), HCOMM_SUCCESS);
    local_wait(a, &req, 0.2);
    assert_int_equal(req.status, HCOMM_IN_PROGRESS); /* b has not mapped it */
    t0 = hc_tlt_now();
    hc_tl_shm_ops.fini(b);
    assert_int_equal(hc_tlt_shm_leftovers(cookie), 0); /* b removed the name */
    local_wait(a, &req, 5);
    assert_int_equal(req.status, HCOMM_ERR_REMOTE);
    assert_true(hc_tlt_now() - t0 < 5);
    hc_tl_shm_ops.fini(a);
}

/* Two communicators of the same ranks with one key (hcomm_comm_init_env twice
 * with one HCOMM_COOKIE) keep to their own segments: before their names
 * carried the lower rank's nonce, the second's creator took the first's
 * unopened segment for a stale one and replaced it, and the first's opener
 * then mapped the second's. */
static void case_same_key_comms(const hc_tlt_variant_t *v)
{
    hc_params_t    prm = shm_params(v, 64 * KIB, 0);
    hc_peer_info_t info[2][2];
    uint8_t        cookie[16], s[2][64], r[2][64];
    hc_tl_ctx_t   *lo[2], *hi[2];
    hc_tl_ep_t    *elo[2], *ehi[2];
    hc_tl_req_t    reqs[2][2];

    assert_int_equal(getrandom(cookie, sizeof(cookie), 0), (ssize_t)sizeof(cookie));
    for (int c = 0; c < 2; c++) {
        local_info(info[c]);
        lo[c] = local_ctx(0, cookie, 5, &prm, info[c]);
        hi[c] = local_ctx(1, cookie, 5, &prm, info[c]);
        assert_int_equal(hc_tl_shm_ops.connect(lo[c], &info[c][1], NULL, 0, &elo[c]),
                         HCOMM_SUCCESS);
    }
    for (int c = 0; c < 2; c++) {
        assert_int_equal(hc_tl_shm_ops.connect(hi[c], &info[c][0], NULL, 0, &ehi[c]),
                         HCOMM_SUCCESS);
        memset(s[c], 'a' + c, sizeof(s[c]));
        assert_int_equal(hc_tl_shm_ops.isend(elo[c], s[c], sizeof(s[c]), &reqs[c][0]),
                         HCOMM_SUCCESS);
        assert_int_equal(hc_tl_shm_ops.irecv(ehi[c], r[c], sizeof(r[c]), NULL, NULL, &reqs[c][1]),
                         HCOMM_SUCCESS);
    }
    for (int c = 0; c < 2; c++) {
        double deadline = hc_tlt_now() + 5;
        while ((reqs[c][0].status == HCOMM_IN_PROGRESS || reqs[c][1].status == HCOMM_IN_PROGRESS) &&
               hc_tlt_now() < deadline) {
            hc_tl_shm_ops.progress(lo[c]);
            hc_tl_shm_ops.progress(hi[c]);
        }
        assert_int_equal(reqs[c][0].status, HCOMM_SUCCESS);
        assert_int_equal(reqs[c][1].status, HCOMM_SUCCESS);
        assert_memory_equal(r[c], s[c], sizeof(s[c]));
    }
    for (int c = 0; c < 2; c++) {
        hc_tl_shm_ops.fini(hi[c]);
        hc_tl_shm_ops.fini(lo[c]);
    }
    assert_int_equal(hc_tlt_shm_leftovers(cookie), 0);
}

static volatile int shm_flip_stop;

/* A lower rank that rewrites its segment's ring size, as fast as it can. */
static void *shm_flip_ring(void *arg)
{
    hc_shm_seg_t *seg = arg;
    for (uint64_t i = 0; !__atomic_load_n(&shm_flip_stop, __ATOMIC_RELAXED); i++)
        __atomic_store_n(&seg->ring_bytes, (i & 1) ? (uint64_t)1 << 30 : 64 * KIB,
                         __ATOMIC_RELAXED);
    return NULL;
}

/* The higher rank's rings are the size of the mapping it checked, whatever
 * the header says later: it read the header's size again after the check,
 * so a peer that changed it between the two (a bug in it, or memory gone
 * bad) made it warm and use rings past its mapping (SIGSEGV in
 * hc_shm_ring_warm within a few hundred pairs). */
static void case_ring_size_changes(const hc_tlt_variant_t *v)
{
    hc_params_t    prm = shm_params(v, 64 * KIB, 0);
    hc_peer_info_t info[2];
    uint8_t        cookie[16];
    int            connected = 0;

    assert_int_equal(getrandom(cookie, sizeof(cookie), 0), (ssize_t)sizeof(cookie));
    hc_log_level_t level = hc_log_level_g; /* each refused size logs a line */
    hc_log_level_g       = HC_LOG_NONE;
    for (int pair = 0; pair < 1000; pair++) {
        hc_tl_ep_t *ea, *eb = NULL;
        pthread_t   flipper;
        local_info(info);
        hc_tl_ctx_t *a = local_ctx(0, cookie, 5, &prm, info);
        hc_tl_ctx_t *b = local_ctx(1, cookie, 5, &prm, info);
        assert_int_equal(hc_tl_shm_ops.connect(a, &info[1], NULL, 0, &ea), HCOMM_SUCCESS);
        shm_flip_stop = 0;
        assert_int_equal(pthread_create(&flipper, NULL, shm_flip_ring, ea->seg), 0);
        hcomm_status_t st       = HCOMM_IN_PROGRESS;
        double         deadline = hc_tlt_now() + 5;
        while (st != HCOMM_SUCCESS && hc_tlt_now() < deadline) {
            st = hc_tl_shm_ops.connect(b, &info[0], NULL, 0, &eb);
            assert_true(st == HCOMM_SUCCESS || st == HCOMM_ERR_PROTOCOL || st == HCOMM_IN_PROGRESS);
        }
        __atomic_store_n(&shm_flip_stop, 1, __ATOMIC_RELAXED);
        assert_int_equal(pthread_join(flipper, NULL), 0);
        ea->seg->ring_bytes = 64 * KIB;
        if (st == HCOMM_SUCCESS) {
            connected++;
            assert_int_equal(eb->rx.size, 64 * KIB);
            assert_int_equal(eb->tx.size, 64 * KIB);
        }
        hc_tl_shm_ops.fini(b);
        hc_tl_shm_ops.fini(a);
    }
    hc_log_level_g = level;
    assert_true(connected > 0);
    assert_int_equal(hc_tlt_shm_leftovers(cookie), 0);
}

const hc_tlt_case_t hc_tlt_shm_cases[] = {
    {"shm_small_ring", case_small_ring},
    {"shm_cma_path", case_cma_path},
    {"shm_copy_path", case_copy_path},
    {"shm_cma_close", case_cma_close},
    {"shm_cookie_auth", case_cookie_auth},
    {"shm_open_mode", case_open_mode},
    {"shm_stale_segment", case_stale_segment},
    {"shm_rewind", case_rewind},
    {"shm_warm", case_warm},
    {"shm_closed_unopened", case_closed_unopened},
    {"shm_same_key_comms", case_same_key_comms},
    {"shm_ring_size_changes", case_ring_size_changes},
    {"shm_stamps", case_stamps},
    {NULL, NULL},
};
