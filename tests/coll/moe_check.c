/*
 * moe_check - one rank of the expert-parallel test, under hcomm-run (or alone:
 * one rank). Every rank generates every rank's inputs from a seed and checks
 * its own results against a serial reference:
 *  - hcomm_alltoallv: random uneven counts with zeros, a rank that receives
 *    nothing, scattered displacements, gaps left untouched, and exactly the
 *    remote blocks' bytes handed to transports (the self block is a copy);
 *  - hcomm_alltoallv_dynamic: the counts it returns, packed data, a
 *    capacity overflow that every rank reports while no data moves, and bad
 *    arguments on one rank that every rank reports at once (no timeout);
 *  - hcomm_moe_dispatch / combine: random routings, k = 1..4, float32,
 *    bfloat16, float16, experts sharing ranks, -1 ids, repeated ids, every
 *    token to one expert, a rank that holds no expert, T = 0, placements
 *    contiguous and shuffled; the expert layout and metadata exactly; the
 *    combine bit for bit against the documented summation order and within
 *    a rounding bound of the exact sum; pair counters and bytes on the wire;
 *  - bad arguments: each a clear status on every rank.
 * Exit: 0 all passed, 1 a case failed, 2 init failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hcomm_moe.h"
#include "test_comm.h"

static int      g_rank, g_nranks, g_failed, g_cases;
static uint64_t g_cx_bytes; /* what an alltoall of two uint64 per peer sends */

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        printf("FAIL rank %d: ", g_rank);                                                          \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        g_failed++;                                                                                \
    } while (0)

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t h4(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return mix(mix(mix(mix(a) ^ b) ^ c) ^ d);
}

static void expect(const char *what, hcomm_status_t got, hcomm_status_t want)
{
    g_cases++;
    if (got != want)
        FAIL("%s returned %s, expected %s", what, hcomm_status_name(got), hcomm_status_name(want));
}

static uint64_t bytes_now(hcomm_comm_t comm)
{
    uint64_t b = 0;
    hcomm_comm_bytes_sent(comm, &b);
    return b;
}

/* ---- alltoallv ---------------------------------------------------------- */

/* cnt[r * n + p]: elements r sends p; zeros often; nobody sends to quiet. */
static void a2av_matrix(uint64_t seed, int quiet, size_t *cnt)
{
    int n = g_nranks;
    for (int r = 0; r < n; r++)
        for (int p = 0; p < n; p++) {
            uint64_t h     = h4(seed, (uint64_t)r, (uint64_t)p, 1);
            cnt[r * n + p] = p == quiet || h % 4 == 0 ? 0 : (size_t)(h >> 8) % 3000;
        }
}

static unsigned char a2av_byte(int from, int to, size_t byte)
{
    return (unsigned char)h4((uint64_t)from, (uint64_t)to, byte, 2);
}

static void a2av_case(hcomm_comm_t comm, uint64_t seed, int quiet, hcomm_dtype_t dt)
{
    int     n = g_nranks, r = g_rank;
    size_t  es = hcomm_dtype_size(dt), *cnt = malloc((size_t)n * n * sizeof(size_t));
    size_t *v = malloc(4 * (size_t)n * sizeof(size_t)), ns = 0, nr = 0;
    size_t *sc = v, *sd = v + n, *rc = v + 2 * n, *rd = v + 3 * n;

    g_cases++;
    a2av_matrix(seed, quiet, cnt);
    for (int p = n - 1; p >= 0; p--) { /* blocks in reverse rank order, a gap after each */
        sc[p] = cnt[r * n + p];
        sd[p] = ns;
        ns += sc[p] + 1;
    }
    for (int p = 0; p < n; p++) { /* in rank order, two apart */
        rc[p] = cnt[p * n + r];
        rd[p] = nr + 2;
        nr += rc[p] + 2;
    }
    unsigned char *sb = malloc(ns * es), *rb = malloc(nr * es);
    memset(sb, 0xa5, ns * es);
    memset(rb, 0x5a, nr * es);
    for (int p = 0; p < n; p++)
        for (size_t b = 0; b < sc[p] * es; b++)
            sb[sd[p] * es + b] = a2av_byte(r, p, b);
    uint64_t       b0 = bytes_now(comm), remote = 0;
    hcomm_status_t st = hcomm_alltoallv(sb, sc, sd, rb, rc, rd, dt, comm, NULL);
    for (int p = 0; p < n; p++)
        remote += p == r ? 0 : sc[p] * es;
    if (st != HCOMM_SUCCESS) {
        FAIL("alltoallv seed %llu %s: %s", (unsigned long long)seed, hcomm_dtype_name(dt),
             hcomm_status_name(st));
    } else if (bytes_now(comm) - b0 != remote) {
        FAIL("alltoallv seed %llu: %llu bytes sent, remote blocks hold %llu (self not local?)",
             (unsigned long long)seed, (unsigned long long)(bytes_now(comm) - b0),
             (unsigned long long)remote);
    } else {
        size_t bad = 0, q = 0;
        for (int p = 0; p < n; p++) {
            for (; q < rd[p] * es; q++) /* the gap before block p */
                bad += rb[q] != 0x5a;
            for (size_t b = 0; b < rc[p] * es; b++, q++)
                bad += rb[q] != a2av_byte(p, r, b);
        }
        if (bad)
            FAIL("alltoallv seed %llu %s: %zu bytes differ", (unsigned long long)seed,
                 hcomm_dtype_name(dt), bad);
    }
    free(sb);
    free(rb);
    free(v);
    free(cnt);
}

/* alltoallv_dynamic: packed in rank order; with short_rank's capacity one
 * element short, every rank fails and nothing lands. */
static void dyn_case(hcomm_comm_t comm, uint64_t seed, int short_rank)
{
    int     n = g_nranks, r = g_rank;
    size_t *cnt = malloc((size_t)n * n * sizeof(size_t)), *sc = malloc(3 * (size_t)n * 8);
    size_t *sd = sc + n, *got = sc + 2 * n, ns = 0, nr = 0;

    g_cases++;
    a2av_matrix(seed, -1, cnt);
    if (short_rank >= 0 && cnt[short_rank] == 0)
        cnt[short_rank] = 5; /* rank 0 sends short_rank something */
    for (int p = 0; p < n; p++) {
        sc[p] = cnt[r * n + p];
        sd[p] = ns;
        ns += sc[p];
        nr += cnt[p * n + r];
    }
    size_t    cap = r == short_rank ? nr - 1 : nr;
    uint32_t *sb = malloc(ns * 4 + 4), *rb = malloc(nr * 4 + 4);
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < sc[p]; i++)
            sb[sd[p] + i] = (uint32_t)h4((uint64_t)r, (uint64_t)p, i, 3);
    memset(rb, 0x77, nr * 4 + 4);
    hcomm_status_t st = hcomm_alltoallv_dynamic(sb, sc, sd, rb, cap, got, HCOMM_UINT32, comm, NULL);
    hcomm_status_t want = short_rank < 0    ? HCOMM_SUCCESS
                          : r == short_rank ? HCOMM_ERR_OVERFLOW
                                            : HCOMM_ERR_REMOTE;
    if (st != want) {
        FAIL("alltoallv_dynamic seed %llu short %d: %s, expected %s", (unsigned long long)seed,
             short_rank, hcomm_status_name(st), hcomm_status_name(want));
    } else if (st != HCOMM_SUCCESS) {
        for (size_t i = 0; i < nr + 1; i++)
            if (rb[i] != 0x77777777u) {
                FAIL("alltoallv_dynamic overflow: data landed at element %zu", i);
                break;
            }
    } else {
        size_t q = 0, bad = 0;
        for (int p = 0; p < n; p++) {
            bad += got[p] != cnt[p * n + r];
            for (size_t i = 0; i < cnt[p * n + r]; i++, q++)
                bad += rb[q] != (uint32_t)h4((uint64_t)p, (uint64_t)r, i, 3);
        }
        if (bad)
            FAIL("alltoallv_dynamic seed %llu: %zu counts or elements differ",
                 (unsigned long long)seed, bad);
    }
    free(sb);
    free(rb);
    free(sc);
    free(cnt);
}

/* alltoallv_dynamic with bad arguments on rank bad only: that rank gets want,
 * every other rank HCOMM_ERR_REMOTE, all well within HCOMM_TIMEOUT (60 s in
 * run_moe.sh; a peer left waiting would take that long). */
static void dyn_bad_case(hcomm_comm_t comm, int bad, int what)
{
    static const char *names[] = {"NULL sdispls", "NULL sendbuf", "count overflows",
                                  "invalid dtype", "NULL recvbuf"};
    int                n = g_nranks, me = g_rank == bad;
    size_t            *sc = malloc(3 * (size_t)n * sizeof(size_t)), *sd = sc + n, *got = sc + 2 * n;
    uint32_t          *sb = malloc((size_t)n * 4), *rb = malloc((size_t)n * 4 + 4);
    const void        *sbuf = sb;
    void              *rbuf = rb;
    const size_t      *sdp  = sd;
    hcomm_dtype_t      dt   = HCOMM_UINT32;
    hcomm_status_t     want = HCOMM_ERR_REMOTE;
    struct timespec    t0, t1;

    g_cases++;
    for (int p = 0; p < n; p++)
        sc[p] = 1, sd[p] = (size_t)p, sb[p] = (uint32_t)(g_rank * n + p);
    memset(rb, 0x77, (size_t)n * 4 + 4);
    if (me && what == 0)
        sdp = NULL, want = HCOMM_ERR_INVALID_ARG;
    if (me && what == 1)
        sbuf = NULL, want = HCOMM_ERR_NULL_BUFFER;
    if (me && what == 2)
        sc[n - 1] = SIZE_MAX / 2, want = HCOMM_ERR_OVERFLOW;
    if (me && what == 3)
        dt = (hcomm_dtype_t)99, want = HCOMM_ERR_INVALID_DTYPE;
    if (me && what == 4)
        rbuf = NULL, want = HCOMM_ERR_NULL_BUFFER; /* known only after the counts arrive */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hcomm_status_t st =
        hcomm_alltoallv_dynamic(sbuf, sc, sdp, rbuf, (size_t)n, got, dt, comm, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (st != want)
        FAIL("alltoallv_dynamic, %s on rank %d: %s, expected %s", names[what], bad,
             hcomm_status_name(st), hcomm_status_name(want));
    else if (s > 10.0)
        FAIL("alltoallv_dynamic, %s on rank %d: took %.1f s", names[what], bad, s);
    for (int i = 0; i < n + 1; i++)
        if (rb[i] != 0x77777777u) {
            FAIL("alltoallv_dynamic, %s on rank %d: data landed at element %d", names[what], bad,
                 i);
            break;
        }
    free(sb);
    free(rb);
    free(sc);
}

/* ---- half precision, independent of the library ------------------------- */

static float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Round to nearest even at bit `drop` of a float's bits. */
static uint32_t rne(uint32_t x, int drop)
{
    uint32_t half = 1u << (drop - 1), rest = x & ((1u << drop) - 1);
    x >>= drop;
    return rest > half || (rest == half && (x & 1)) ? x + 1 : x;
}

static uint16_t to_bf16(float f)
{
    return (uint16_t)rne(f_bits(f), 16);
}

static uint16_t to_f16(float f) /* finite values below 65520 */
{
    uint32_t x = f_bits(f), sign = (x >> 16) & 0x8000u;
    float    a = fabsf(f);
    if (a < 0x1p-14f) /* subnormal: a multiple of 2^-24 */
        return (uint16_t)(sign | (uint32_t)lrintf(a * 0x1p24f));
    return (uint16_t)(sign | rne((x & 0x7fffffffu) - (112u << 23), 13));
}

static float from_f16(uint16_t h)
{
    uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float    v = e == 0 ? (float)m * 0x1p-24f : bits_f(((e + 112) << 23) | (m << 13));
    return h & 0x8000 ? -v : v;
}

static float load(const void *b, hcomm_dtype_t dt, size_t i)
{
    if (dt == HCOMM_FLOAT32)
        return ((const float *)b)[i];
    uint16_t h = ((const uint16_t *)b)[i];
    return dt == HCOMM_BFLOAT16 ? bits_f((uint32_t)h << 16) : from_f16(h);
}

static void store(void *b, hcomm_dtype_t dt, size_t i, float v)
{
    if (dt == HCOMM_FLOAT32)
        ((float *)b)[i] = v;
    else
        ((uint16_t *)b)[i] = dt == HCOMM_BFLOAT16 ? to_bf16(v) : to_f16(v);
}

static float round_dt(hcomm_dtype_t dt, float v)
{
    uint16_t h[2];
    store(h, dt, 0, v);
    return dt == HCOMM_FLOAT32 ? v : load(h, dt, 0);
}

/* ---- MoE ---------------------------------------------------------------- */

enum { ROUTE_RANDOM, ROUTE_ONE_EXPERT, ROUTE_HOLES, ROUTE_REPEAT, ROUTE_NONE_ON_LAST };
enum { PLACE_CONTIG, PLACE_SHUFFLED, PLACE_NOT_LAST };

typedef struct {
    const char   *name;
    int           E, k, route, place, empty_rank; /* empty_rank: T = 0 there (-1 none) */
    size_t        H;
    hcomm_dtype_t dt;
    uint64_t      seed;
} moe_case_t;

typedef struct { /* one rank's inputs */
    size_t   T;
    void    *x;   /* T x H of dt */
    int32_t *ids; /* T x k */
    float   *w;
} moe_in_t;

static int *g_place; /* [E]: the placement of the current case */

static void make_placement(const moe_case_t *c, int32_t *pl)
{
    int n = g_nranks;
    for (int e = 0; e < c->E; e++)
        pl[e] = (int32_t)((int64_t)e * n / c->E);
    if (c->place == PLACE_SHUFFLED)
        for (int e = c->E - 1; e > 0; e--) {
            int     o   = (int)(h4(c->seed, (uint64_t)e, 0, 4) % (uint64_t)(e + 1));
            int32_t tmp = pl[e];
            pl[e]       = pl[o];
            pl[o]       = tmp;
        }
    if (c->place == PLACE_NOT_LAST)
        for (int e = 0; e < c->E; e++)
            pl[e] = n > 1 ? (int32_t)(e % (n - 1)) : 0;
}

/* Rank q's tokens, ids and weights: the same on every rank. */
static void make_input(const moe_case_t *c, int q, moe_in_t *in)
{
    size_t H = c->H, k = (size_t)c->k;
    in->T   = q == c->empty_rank ? 0 : 1 + (size_t)(h4(c->seed, (uint64_t)q, 0, 5) % 40);
    in->x   = malloc(in->T * H * 4 + 4);
    in->ids = malloc(in->T * k * 4 + 4);
    in->w   = malloc(in->T * k * 4 + 4);
    for (size_t t = 0; t < in->T; t++) {
        for (size_t h = 0; h < H; h++) /* multiples of 1/8 in -4 .. 4: exact in every dtype */
            store(in->x, c->dt, t * H + h,
                  (float)((int)(h4(c->seed, (uint64_t)q, t, 6 + h) % 65) - 32) / 8.0f);
        for (size_t j = 0; j < k; j++) {
            uint64_t h = h4(c->seed, (uint64_t)q, t, 1000 + j);
            int32_t  e = (int32_t)(h % (uint64_t)c->E);
            for (size_t i = 0; c->route != ROUTE_REPEAT && k <= (size_t)c->E && i < j; i++)
                if (in->ids[t * k + i] == e) { /* distinct experts: take the next free one */
                    e = (e + 1) % c->E;
                    i = (size_t)-1;
                }
            if (c->route == ROUTE_ONE_EXPERT)
                e = j == 0 ? c->E - 1 : -1;
            if (c->route == ROUTE_HOLES && (h >> 32) % 4 == 0)
                e = -1;
            if (c->route == ROUTE_NONE_ON_LAST && q == g_nranks - 1)
                e = -1;
            in->ids[t * k + j] = e;
            in->w[t * k + j]   = (float)(1 + (h >> 40) % 997) / 1000.0f;
        }
    }
}

static void free_input(moe_in_t *in)
{
    free(in->x);
    free(in->ids);
    free(in->w);
}

/* The stand-in expert: y = x * (0.5 + (e % 5) / 4) + (e % 3 - 1), rounded. */
static float expert_fn(hcomm_dtype_t dt, int e, float x)
{
    return round_dt(dt, x * (0.5f + 0.25f * (float)(e % 5)) + (float)(e % 3 - 1));
}

/* Checks the layout this rank received against all ranks' inputs. */
static int check_layout(const moe_case_t *c, const moe_in_t *in, const hcomm_moe_recv_t *rv)
{
    size_t H = c->H, k = (size_t)c->k, es = hcomm_dtype_size(c->dt), pos = 0, pairs = 0;
    int    l = 0;

    for (int q = 0; q < g_nranks; q++)
        for (size_t t = 0; t < in[q].T; t++)
            for (size_t j = 0; j < k; j++)
                if (in[q].ids[t * k + j] >= 0 && g_place[in[q].ids[t * k + j]] == g_rank) {
                    pairs++; /* a (token, rank) pair: its first slot here */
                    break;
                }
    if (rv->num_recv_tokens != pairs)
        return printf("FAIL rank %d: %s: %zu tokens received, expected %zu\n", g_rank, c->name,
                      rv->num_recv_tokens, pairs),
               1;
    for (int e = 0; e < c->E; e++) {
        if (g_place[e] != g_rank)
            continue;
        if (l >= rv->num_local_experts || rv->local_expert_ids[l] != e ||
            rv->expert_offset[l] != pos)
            return printf("FAIL rank %d: %s: local expert %d is not expert %d at row %zu\n", g_rank,
                          c->name, l, e, pos),
                   1;
        for (int q = 0; q < g_nranks; q++)
            for (size_t t = 0; t < in[q].T; t++)
                for (size_t j = 0; j < k; j++) {
                    if (in[q].ids[t * k + j] != e)
                        continue;
                    if (pos >= rv->num_rows || rv->src_rank[pos] != q ||
                        rv->src_index[pos] != (int32_t)t || rv->topk_slot[pos] != (int32_t)j ||
                        f_bits(rv->weight[pos]) != f_bits(in[q].w[t * k + j]) ||
                        memcmp((const char *)rv->tokens + pos * H * es,
                               (const char *)in[q].x + t * H * es, H * es) != 0)
                        return printf("FAIL rank %d: %s: expert %d row %zu is not token %zu of "
                                      "rank %d slot %zu\n",
                                      g_rank, c->name, e, pos, t, q, j),
                               1;
                    pos++;
                }
        if (rv->expert_count[l] != pos - rv->expert_offset[l])
            return printf("FAIL rank %d: %s: expert %d has %zu rows, expected %zu\n", g_rank,
                          c->name, e, rv->expert_count[l], pos - rv->expert_offset[l]),
                   1;
        l++;
    }
    if (l != rv->num_local_experts || pos != rv->num_rows)
        return printf("FAIL rank %d: %s: %d local experts, %zu rows; expected %d, %zu\n", g_rank,
                      c->name, rv->num_local_experts, rv->num_rows, l, pos),
               1;
    return 0;
}

/* out[t] as the header defines it: per rank in rank order a float32 partial
 * sum in slot order, rounded; those summed in float32; rounded. Also the
 * exact sum (double) and its magnitude for the rounding bound. */
static void ref_token(const moe_case_t *c, const moe_in_t *me, size_t t, size_t h, float *bits,
                      double *exact, double *mag)
{
    size_t k = (size_t)c->k;
    float  x = load(me->x, c->dt, t * c->H + h), acc = 0;

    *exact = *mag = 0;
    for (int p = 0; p < g_nranks; p++) {
        float part = 0;
        int   any  = 0;
        for (size_t j = 0; j < k; j++) {
            int e = me->ids[t * k + j];
            if (e < 0 || g_place[e] != p)
                continue;
            float y = expert_fn(c->dt, e, x);
            part += me->w[t * k + j] * y;
            any = 1;
            *exact += (double)me->w[t * k + j] * y;
            *mag += fabs((double)me->w[t * k + j] * y);
        }
        if (any)
            acc += round_dt(c->dt, part);
    }
    *bits = round_dt(c->dt, acc);
}

static int check_combine(const moe_case_t *c, const moe_in_t *me, const void *out)
{
    double tol = c->dt == HCOMM_FLOAT32 ? 1e-6 : c->dt == HCOMM_BFLOAT16 ? 3.0 / 256 : 3.0 / 2048;
    size_t bad = 0, far = 0;

    for (size_t t = 0; t < me->T; t++)
        for (size_t h = 0; h < c->H; h++) {
            float  want, got = load(out, c->dt, t * c->H + h);
            double exact, mag;
            ref_token(c, me, t, h, &want, &exact, &mag);
            bad += f_bits(got) != f_bits(want);
            far += !(fabs((double)got - exact) <= tol * mag + 1e-6);
        }
    if (bad || far)
        return printf("FAIL rank %d: %s: combine: %zu elements differ from the reference, %zu "
                      "beyond the rounding bound\n",
                      g_rank, c->name, bad, far),
               1;
    return 0;
}

/* Pair counters and bytes on the wire against all ranks' inputs. */
static int check_stats(const moe_case_t *c, const moe_in_t *in, const hcomm_moe_stats_t *s)
{
    size_t          k = (size_t)c->k, tb = c->H * hcomm_dtype_size(c->dt);
    uint64_t        te = 0, rte = 0, tr = 0, rtr = 0, back = 0, back_nodedup = 0;
    int            *seen = calloc((size_t)g_nranks, sizeof(int));
    const moe_in_t *me   = &in[g_rank];

    for (size_t t = 0; t < me->T; t++) {
        memset(seen, 0, (size_t)g_nranks * sizeof(int));
        for (size_t j = 0; j < k; j++) {
            int e = me->ids[t * k + j];
            if (e < 0)
                continue;
            te++;
            rte += g_place[e] != g_rank;
            if (!seen[g_place[e]]++) {
                tr++;
                rtr += g_place[e] != g_rank;
            }
        }
    }
    free(seen);
    for (int q = 0; q < g_nranks; q++) { /* what goes back from here in the combine */
        for (size_t t = 0; q != g_rank && t < in[q].T; t++) {
            uint64_t here = 0;
            for (size_t j = 0; j < k; j++)
                here += in[q].ids[t * k + j] >= 0 && g_place[in[q].ids[t * k + j]] == g_rank;
            back += here ? tb : 0;
            back_nodedup += here * tb;
        }
    }
    uint64_t want_d = g_cx_bytes + rtr * s->row_bytes;
    if (s->num_tokens != me->T || s->token_expert_pairs != te || s->token_rank_pairs != tr ||
        s->remote_token_expert_pairs != rte || s->remote_token_rank_pairs != rtr ||
        s->row_bytes != 4 + 8 * k + tb || s->dispatch_bytes != want_d || s->combine_bytes != back ||
        s->combine_bytes_nodedup != back_nodedup ||
        s->dispatch_bytes_nodedup != g_cx_bytes + rte * (tb + 12))
        return printf("FAIL rank %d: %s: stats: pairs %llu/%llu remote %llu/%llu bytes %llu/%llu;"
                      " expected %llu/%llu %llu/%llu %llu/%llu\n",
                      g_rank, c->name, (unsigned long long)s->token_expert_pairs,
                      (unsigned long long)s->token_rank_pairs,
                      (unsigned long long)s->remote_token_expert_pairs,
                      (unsigned long long)s->remote_token_rank_pairs,
                      (unsigned long long)s->dispatch_bytes, (unsigned long long)s->combine_bytes,
                      (unsigned long long)te, (unsigned long long)tr, (unsigned long long)rte,
                      (unsigned long long)rtr, (unsigned long long)want_d,
                      (unsigned long long)back),
               1;
    return 0;
}

/* Every row through its stand-in expert. */
static void *run_experts(const moe_case_t *c, const hcomm_moe_recv_t *rv)
{
    size_t H = c->H, es = hcomm_dtype_size(c->dt);
    void  *y = malloc(rv->num_rows * H * es + 4);

    for (int l = 0; l < rv->num_local_experts; l++)
        for (size_t i = rv->expert_offset[l]; i < rv->expert_offset[l] + rv->expert_count[l]; i++)
            for (size_t h = 0; h < H; h++)
                store(
                    y, c->dt, i * H + h,
                    expert_fn(c->dt, rv->local_expert_ids[l], load(rv->tokens, c->dt, i * H + h)));
    return y;
}

static void moe_case(hcomm_comm_t comm, const moe_case_t *c)
{
    int32_t           *pl  = malloc((size_t)c->E * sizeof(int32_t));
    moe_in_t          *in  = calloc((size_t)g_nranks, sizeof(moe_in_t));
    hcomm_moe_t        moe = NULL;
    hcomm_moe_recv_t   rv;
    hcomm_moe_stats_t  s;
    hcomm_moe_config_t cfg = {c->E, c->place == PLACE_CONTIG ? NULL : pl, c->k, c->H, c->dt};
    hcomm_status_t     st;

    g_cases++;
    make_placement(c, pl);
    g_place = pl;
    for (int q = 0; q < g_nranks; q++)
        make_input(c, q, &in[q]);
    moe_in_t *me  = &in[g_rank];
    void     *out = malloc(me->T * c->H * 4 + 4), *y = NULL;
    st = hcomm_moe_create(comm, &cfg, &moe);
    if (st == HCOMM_SUCCESS)
        st = hcomm_moe_dispatch(moe, me->x, me->T, me->ids, me->w, &rv);
    if (st != HCOMM_SUCCESS) {
        FAIL("%s: create/dispatch: %s", c->name, hcomm_status_name(st));
        goto out;
    }
    /* a wrong layout still goes through the combine: the peers must not wait */
    g_failed += check_layout(c, in, &rv);
    y = run_experts(c, &rv);
    for (int rep = 0; rep < 2 && st == HCOMM_SUCCESS; rep++) { /* repeatable */
        memset(out, 0xee, me->T * c->H * 4 + 4);
        st = hcomm_moe_combine(moe, y, out);
        if (st != HCOMM_SUCCESS)
            FAIL("%s: combine: %s", c->name, hcomm_status_name(st));
        else /* both runs even after a mismatch: the peers run both */
            g_failed += check_combine(c, me, out);
    }
    if (st == HCOMM_SUCCESS &&
        (hcomm_moe_get_stats(moe, &s) != HCOMM_SUCCESS || check_stats(c, in, &s) != 0))
        g_failed++;
    if (st == HCOMM_SUCCESS && g_rank == 0 && s.token_expert_pairs > 0)
        printf("  %-30s rank 0: %4llu (token,expert) %4llu (token,rank) pairs, dedup %.2f\n",
               c->name, (unsigned long long)s.token_expert_pairs,
               (unsigned long long)s.token_rank_pairs,
               1.0 - (double)s.token_rank_pairs / (double)s.token_expert_pairs);
out:
    hcomm_moe_destroy(moe);
    for (int q = 0; q < g_nranks; q++)
        free_input(&in[q]);
    free(in);
    free(out);
    free(y);
    free(pl);
}

/* ---- bad arguments ------------------------------------------------------ */

static void bad_create(hcomm_comm_t comm)
{
    int32_t            pl[4]  = {0, 0, 0, g_nranks};
    hcomm_moe_config_t ok     = {4, NULL, 2, 8, HCOMM_FLOAT32}, c;
    hcomm_moe_t        moe    = NULL;
    hcomm_status_t     remote = g_nranks > 1 ? HCOMM_ERR_REMOTE : HCOMM_ERR_INVALID_ARG;

    c = ok, c.num_experts = 0;
    expect("create: 0 experts", hcomm_moe_create(comm, &c, &moe), HCOMM_ERR_INVALID_ARG);
    c = ok, c.topk = HCOMM_MOE_MAX_TOPK + 1;
    expect("create: top-k too large", hcomm_moe_create(comm, &c, &moe), HCOMM_ERR_INVALID_ARG);
    c = ok, c.dtype = HCOMM_INT32;
    expect("create: int32 tokens", hcomm_moe_create(comm, &c, &moe), HCOMM_ERR_INVALID_DTYPE);
    c = ok, c.expert_rank = pl;
    expect("create: expert on rank nranks", hcomm_moe_create(comm, &c, &moe),
           HCOMM_ERR_INVALID_RANK);
    expect("create: NULL config", hcomm_moe_create(comm, NULL, &moe), HCOMM_ERR_INVALID_ARG);
    c = ok, c.hidden = g_rank == 0 ? 0 : 8;
    expect("create: hidden 0 on rank 0 only", hcomm_moe_create(comm, &c, &moe),
           g_rank == 0 ? HCOMM_ERR_INVALID_ARG : remote);
    if (g_nranks > 1) {
        c = ok, c.hidden = g_rank == 0 ? 16 : 8;
        expect("create: hidden differs between ranks", hcomm_moe_create(comm, &c, &moe),
               HCOMM_ERR_INVALID_ARG);
    }
    expect("create: NULL comm", hcomm_moe_create(NULL, &ok, &moe), HCOMM_ERR_INVALID_COMM);
    if (moe != NULL)
        FAIL("a failed create set the handle");
}

static void bad_calls(hcomm_comm_t comm)
{
    hcomm_moe_config_t cfg = {4, NULL, 2, 8, HCOMM_FLOAT32};
    hcomm_moe_t        moe = NULL;
    hcomm_moe_recv_t   rv;
    hcomm_moe_stats_t  s;
    float              x[3 * 8], w[6] = {1, 1, 1, 1, 1, 1}, out[3 * 8];
    int32_t            ids[6] = {0, 1, 2, 3, -1, 0}, bad[6] = {0, 1, 2, 4, -1, 0};
    int32_t            neg[6] = {0, -2, 1, 2, 3, 0};
    int                last   = g_nranks - 1;
    hcomm_status_t     remote = g_nranks > 1 ? HCOMM_ERR_REMOTE : HCOMM_ERR_INVALID_ARG;

    for (int i = 0; i < 3 * 8; i++)
        x[i] = (float)(i % 8 + 1);
    expect("create", hcomm_moe_create(comm, &cfg, &moe), HCOMM_SUCCESS);
    if (moe == NULL)
        return;
    expect("combine before any dispatch", hcomm_moe_combine(moe, x, out), HCOMM_ERR_INVALID_USAGE);
    expect("dispatch: expert id 4 of 4", hcomm_moe_dispatch(moe, x, 3, bad, w, &rv),
           HCOMM_ERR_INVALID_ARG);
    expect("dispatch: id -2 on the last rank only",
           hcomm_moe_dispatch(moe, x, 3, g_rank == last ? neg : ids, w, &rv),
           g_rank == last ? HCOMM_ERR_INVALID_ARG : remote);
    expect("dispatch: NULL tokens", hcomm_moe_dispatch(moe, NULL, 3, ids, w, &rv),
           HCOMM_ERR_NULL_BUFFER);
    expect("dispatch: NULL weights on rank 0 only",
           hcomm_moe_dispatch(moe, x, 3, ids, g_rank == 0 ? NULL : w, &rv),
           g_rank == 0    ? HCOMM_ERR_NULL_BUFFER
           : g_nranks > 1 ? HCOMM_ERR_REMOTE
                          : HCOMM_ERR_NULL_BUFFER);
    expect("dispatch: NULL ids", hcomm_moe_dispatch(moe, x, 3, NULL, w, &rv),
           HCOMM_ERR_NULL_BUFFER);
    expect("dispatch: NULL recv", hcomm_moe_dispatch(moe, x, 3, ids, w, NULL),
           HCOMM_ERR_INVALID_ARG);
    expect("combine after a failed dispatch", hcomm_moe_combine(moe, x, out),
           HCOMM_ERR_INVALID_USAGE);
    expect("group start", hcomm_group_start(), HCOMM_SUCCESS);
    expect("dispatch inside a group", hcomm_moe_dispatch(moe, x, 3, ids, w, &rv),
           HCOMM_ERR_INVALID_USAGE);
    expect("combine inside a group", hcomm_moe_combine(moe, x, out), HCOMM_ERR_INVALID_USAGE);
    /* a call refused inside a group fails the group (as in NCCL) */
    expect("group end after refused calls", hcomm_group_end(), HCOMM_ERR_INVALID_USAGE);
    expect("dispatch: NULL handle", hcomm_moe_dispatch(NULL, x, 3, ids, w, &rv),
           HCOMM_ERR_INVALID_ARG);
    expect("combine: NULL handle", hcomm_moe_combine(NULL, x, out), HCOMM_ERR_INVALID_ARG);
    expect("stats: NULL stats", hcomm_moe_get_stats(moe, NULL), HCOMM_ERR_INVALID_ARG);
    expect("dispatch: NULL buffers with no tokens",
           hcomm_moe_dispatch(moe, NULL, 0, NULL, NULL, &rv), HCOMM_SUCCESS);
    expect("dispatch after the errors", hcomm_moe_dispatch(moe, x, 3, ids, w, &rv), HCOMM_SUCCESS);
    expect("combine: NULL out", hcomm_moe_combine(moe, rv.tokens, NULL), HCOMM_ERR_NULL_BUFFER);
    expect("combine after the errors", hcomm_moe_combine(moe, rv.tokens, out), HCOMM_SUCCESS);
    expect("stats", hcomm_moe_get_stats(moe, &s), HCOMM_SUCCESS);
    /* identity experts, weights 1: out[t] = x[t] x (valid slots of t), and
     * ids give tokens 0 and 1 two slots, token 2 one (-1 is skipped); small
     * integers, so the float32 sums are exact */
    for (int i = 0; i < 3 * 8; i++)
        if (out[i] != (float)((i % 8 + 1) * (i < 16 ? 2 : 1))) {
            FAIL("combine after the errors: out[%d] = %g, expected %d", i, (double)out[i],
                 (i % 8 + 1) * (i < 16 ? 2 : 1));
            break;
        }
    hcomm_moe_destroy(moe);
    hcomm_moe_destroy(NULL);
}

static void moe_cases(hcomm_comm_t comm)
{
    static const hcomm_dtype_t dts[] = {HCOMM_FLOAT32, HCOMM_BFLOAT16, HCOMM_FLOAT16};
    int                        n     = g_nranks;
    char                       name[64];

    for (int k = 1; k <= 4; k++)
        for (int d = 0; d < 3; d++) {
            snprintf(name, sizeof(name), "random k=%d %s", k, hcomm_dtype_name(dts[d]));
            moe_case_t c = {name,        2 * n + 3,    k,
                            ROUTE_HOLES, PLACE_CONTIG, d == 1 ? n - 1 : -1,
                            33,          dts[d],       (uint64_t)(100 + 10 * k + d)};
            moe_case(comm, &c);
        }
    moe_case_t more[] = {
        {"every token to one expert", n + 2, 2, ROUTE_ONE_EXPERT, PLACE_CONTIG, -1, 24,
         HCOMM_FLOAT32, 7},
        {"no expert on the last rank", 2 * n + 2, 3, ROUTE_RANDOM, PLACE_NOT_LAST, 0, 17,
         HCOMM_BFLOAT16, 8},
        {"4 experts per rank, k=4", 4 * n, 4, ROUTE_RANDOM, PLACE_CONTIG, -1, 16, HCOMM_FLOAT32, 9},
        {"shuffled placement", 3 * n, 2, ROUTE_RANDOM, PLACE_SHUFFLED, -1, 20, HCOMM_FLOAT16, 10},
        {"repeated expert ids", n + 1, 3, ROUTE_REPEAT, PLACE_CONTIG, -1, 9, HCOMM_FLOAT32, 11},
        {"last rank routes nothing", 2 * n, 2, ROUTE_NONE_ON_LAST, PLACE_CONTIG, -1, 12,
         HCOMM_BFLOAT16, 12},
        {"hidden 3000 bf16", 2 * n, 2, ROUTE_RANDOM, PLACE_CONTIG, -1, 3000, HCOMM_BFLOAT16, 13},
        {"one expert in all", 1, 1, ROUTE_RANDOM, PLACE_CONTIG, -1, 5, HCOMM_FLOAT32, 14},
    };
    for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++)
        moe_case(comm, &more[i]);
}

int main(void)
{
    hcomm_comm_t   comm = NULL;
    hcomm_status_t st   = test_comm_init(&comm, &g_rank, &g_nranks);

    if (st != HCOMM_SUCCESS) {
        fprintf(stderr, "moe_check: init failed: %s\n", hcomm_status_str(st));
        return 2;
    }
    if (g_rank == 0)
        printf("moe_check: %d ranks\n", g_nranks);
    for (uint64_t seed = 1; seed <= 4; seed++) {
        a2av_case(comm, seed, -1, seed % 2 ? HCOMM_INT32 : HCOMM_FLOAT64);
        a2av_case(comm, seed, (int)(seed % (uint64_t)g_nranks), HCOMM_UINT8);
        dyn_case(comm, seed, -1);
    }
    a2av_case(comm, 9, 0, HCOMM_BFLOAT16);
    dyn_case(comm, 5, g_nranks - 1);
    dyn_case(comm, 6, -1); /* still usable after the overflow */
    for (int what = 0; what < 5; what++)
        dyn_bad_case(comm, (what + 1) % g_nranks, what);
    dyn_case(comm, 7, -1); /* and after the bad arguments */
    /* the count exchange of a dispatch: an alltoall of two uint64 per peer */
    uint64_t c8[4 * 64] = {0}, b0 = bytes_now(comm);
    if (g_nranks <= 64 &&
        hcomm_alltoall(c8, c8 + 128, 2, HCOMM_UINT64, comm, NULL) == HCOMM_SUCCESS)
        g_cx_bytes = bytes_now(comm) - b0;
    moe_cases(comm);
    bad_create(comm);
    bad_calls(comm);
    printf("moe_check rank %d: %d cases, %d failed\n", g_rank, g_cases, g_failed);
    hcomm_comm_destroy(comm);
    return g_failed != 0;
}
