/* health.c - rank 0's slow-rank detector (health.h). */
#include "core/health.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/grubbs.h"
#include "base/log.h"
#include "base/params.h"
#include "core/comm.h"

#define HEALTH_MIN_COMMON 16 /* collectives every rank entered, for a verdict */
#define HEALTH_STREAK 2      /* evaluations in a row that flag a rank before it is named */
#define HEALTH_TICKS_MIN 2   /* lateness of at least this many coarse clock ticks */

struct hc_health {
    pthread_mutex_t lock; /* the verdict: the watch thread writes, the program reads */
    int             nranks;
    hc_arrival_t   *arr; /* [nranks][HC_ARRIVALS], in cseq order */
    int            *narr;
    double         *offset; /* ns to subtract from a rank's times: rank 0's clock */
    double         *rtt;    /* of the exchange that gave the offset */
    double         *late;   /* mean lateness (ns), this evaluation */
    int            *streak, *named;
    double          tick_ns; /* the coarse clock's resolution */
    hc_links_t     *links;   /* the slow-link test (health_link.c) */
    hcomm_health_t  last;
};

int hc_arrivals_read(const hc_arrival_t *ring, hc_arrival_t *out)
{
    int n = 0;
    for (int i = 0; i < HC_ARRIVALS; i++) {
        const hc_arrival_t *a = &ring[i];
        uint64_t            s = __atomic_load_n(&a->cseq, __ATOMIC_ACQUIRE);
        uint64_t            t = __atomic_load_n(&a->t, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (s != 0 && __atomic_load_n(&a->cseq, __ATOMIC_RELAXED) == s)
            out[n++] = (hc_arrival_t){s, t};
    }
    /* the ring's slots are cseq modulo its size: rotate to cseq order */
    for (int i = 1; i < n; i++) {
        hc_arrival_t x = out[i];
        int          j = i;
        for (; j > 0 && out[j - 1].cseq > x.cseq; j--)
            out[j] = out[j - 1];
        out[j] = x;
    }
    return n;
}

static void *health_calloc(size_t n, size_t size, int *bad)
{
    void *p = calloc(n, size);
    *bad |= p == NULL;
    return p;
}

hcomm_status_t hc_health_create(struct hcomm_comm *c)
{
    hc_health_t *h = NULL;
    if (c->rank == 0 && c->nranks >= 3 && hc_params_get()->health) {
        struct timespec res;
        int             bad = 0, n = c->nranks;
        if ((h = calloc(1, sizeof(*h))) == NULL)
            return HCOMM_ERR_NO_MEMORY;
        h->nranks = n;
        h->arr    = health_calloc((size_t)n * HC_ARRIVALS, sizeof(*h->arr), &bad);
        h->narr   = health_calloc((size_t)n, sizeof(int), &bad);
        h->offset = health_calloc((size_t)n, sizeof(double), &bad);
        h->rtt    = health_calloc((size_t)n, sizeof(double), &bad);
        h->late   = health_calloc((size_t)n, sizeof(double), &bad);
        h->streak = health_calloc((size_t)n, sizeof(int), &bad);
        h->named  = health_calloc((size_t)n, sizeof(int), &bad);
        h->links  = hc_links_create(n);
        bad |= h->links == NULL;
        pthread_mutex_init(&h->lock, NULL);
        h->tick_ns = clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0
                         ? (double)res.tv_sec * 1e9 + (double)res.tv_nsec
                         : 4e6;
        c->health  = h; /* freed with comm even when incomplete */
        if (bad)
            return HCOMM_ERR_NO_MEMORY;
    }
    return HCOMM_SUCCESS;
}

void hc_health_begin(struct hcomm_comm *c)
{
    memset(c->health->narr, 0, (size_t)c->health->nranks * sizeof(int));
    hc_links_begin(c->health->links);
}

void hc_health_feed_links(struct hcomm_comm *c, int rank, const hc_link_report_t *l, int n)
{
    hc_links_feed(c->health->links, rank, l, n);
}

void hc_health_feed(struct hcomm_comm *c, int rank, const hc_arrival_t *a, int n, double offset_ns,
                    double rtt_ns)
{
    hc_health_t *h = c->health;
    memcpy(&h->arr[(size_t)rank * HC_ARRIVALS], a, (size_t)n * sizeof(*a));
    h->narr[rank] = n;
    /* the offset from the quickest exchange is the surest; a fresh one
     * replaces it when about as quick, so that drift is followed */
    if (h->rtt[rank] == 0 || rtt_ns < 1.5 * h->rtt[rank]) {
        h->offset[rank] = offset_ns;
        h->rtt[rank]    = rtt_ns;
    } else {
        h->rtt[rank] *= 1.1; /* an old best ages */
    }
}

/* rank's arrival at collective s in rank 0's clock, or NAN. */
static double health_at(const hc_health_t *h, int rank, uint64_t s)
{
    const hc_arrival_t *a = &h->arr[(size_t)rank * HC_ARRIVALS];
    int                 n = h->narr[rank];
    if (n == 0 || s < a[0].cseq || s > a[n - 1].cseq)
        return NAN;
    const hc_arrival_t *e = &a[s - a[0].cseq < (uint64_t)n ? s - a[0].cseq : 0];
    for (int i = 0; e->cseq != s && i < n; i++) /* a gap: search */
        e = &a[i];
    return e->cseq == s ? (double)e->t - h->offset[rank] : NAN;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The window: the last HCOMM_HEALTH_WINDOW collectives every rank reported. */
static int health_window(const hc_health_t *h, uint64_t *lo, uint64_t *hi)
{
    int w = hc_params_get()->health_window;
    *lo   = 1;
    *hi   = UINT64_MAX;
    for (int r = 0; r < h->nranks; r++) {
        const hc_arrival_t *a = &h->arr[(size_t)r * HC_ARRIVALS];
        if (h->narr[r] == 0)
            return 0;
        *lo = a[0].cseq > *lo ? a[0].cseq : *lo;
        *hi = a[h->narr[r] - 1].cseq < *hi ? a[h->narr[r] - 1].cseq : *hi;
    }
    if (w > HC_ARRIVALS)
        w = HC_ARRIVALS;
    if (*hi >= *lo && *hi - *lo + 1 > (uint64_t)w)
        *lo = *hi - (uint64_t)w + 1;
    return *hi >= *lo;
}

/* Mean lateness per rank over the window into h->late; the mean interval
 * between collectives (ns) into *interval; returns the collectives used. */
static int health_lateness(hc_health_t *h, uint64_t lo, uint64_t hi, double *interval)
{
    int     n = h->nranks, used = 0;
    double *t = malloc((size_t)n * 2 * sizeof(double)), prev = NAN, gaps = 0;
    int     ngaps = 0;
    if (t == NULL)
        return 0;
    memset(h->late, 0, (size_t)n * sizeof(double));
    for (uint64_t s = lo; s <= hi; s++) {
        int r = 0;
        for (; r < n && !isnan(t[r] = health_at(h, r, s)); r++)
            t[n + r] = t[r];
        if (r < n)
            continue;
        qsort(t + n, (size_t)n, sizeof(double), cmp_double);
        double med = t[n + n / 2];
        for (r = 0; r < n; r++)
            h->late[r] += t[r] - med;
        if (!isnan(prev))
            gaps += med - prev, ngaps++;
        prev = med, used++;
    }
    free(t);
    for (int r = 0; used > 0 && r < n; r++)
        h->late[r] /= used;
    *interval = ngaps > 0 ? gaps / ngaps : 0;
    return used;
}

/* The slow-rank part of the verdict into *v. */
static void health_judge_ranks(struct hcomm_comm *c, hcomm_health_t *v, uint64_t lo, uint64_t hi,
                               int used, double interval)
{
    const hc_params_t *p = hc_params_get();
    hc_health_t       *h = c->health;
    int                n = h->nranks, idx[HCOMM_HEALTH_MAX];
    double             score[HCOMM_HEALTH_MAX];
    int max_out = n / 2 < HCOMM_HEALTH_MAX ? n / 2 : HCOMM_HEALTH_MAX;
    int k       = hc_grubbs_outliers(h->late, n, p->health_alpha, max_out, 1, idx, score);
    /* an outlier must also matter: late by a share of the time between
     * collectives, and by more than the clock can tell apart */
    double floor_ns = fmax(p->health_min_late * interval, HEALTH_TICKS_MIN * h->tick_ns);
    int    flag[n > 0 ? n : 1];
    memset(flag, 0, sizeof(flag));
    for (int i = 0; i < k; i++)
        if (h->late[idx[i]] >= floor_ns)
            flag[idx[i]] = 1;
    v->evaluated    = 1;
    v->window_first = lo;
    v->window_last  = hi;
    v->ncollectives = used;
    v->interval_ms  = interval * 1e-6;
    v->nslow        = 0;
    for (int r = 0; r < n; r++) {
        int s        = h->streak[r]; /* > 0: evaluations in a row flagged; < 0: not */
        h->streak[r] = flag[r] ? (s > 0 ? s + 1 : 1) : (s < 0 ? s - 1 : -1);
        int was      = h->named[r];
        if (h->streak[r] >= HEALTH_STREAK)
            h->named[r] = 1;
        else if (h->streak[r] <= -HEALTH_STREAK)
            h->named[r] = 0;
        double sc = 0;
        for (int i = 0; i < k; i++)
            sc = idx[i] == r ? score[i] : sc;
        if (h->named[r] && !was)
            hc_warn(COLL,
                    "slow rank %d (host %s): it enters collectives %.1f ms after the median "
                    "rank, over #%llu-#%llu (%.0f%% of the %.1f ms between collectives; "
                    "Grubbs score %.2f)",
                    r, c->peers[r].hostname, h->late[r] * 1e-6, (unsigned long long)lo,
                    (unsigned long long)hi, interval > 0 ? 100 * h->late[r] / interval : 0,
                    interval * 1e-6, sc);
        else if (!h->named[r] && was)
            hc_warn(COLL, "rank %d (host %s) is no longer slow (%.1f ms late over #%llu-#%llu)", r,
                    c->peers[r].hostname, h->late[r] * 1e-6, (unsigned long long)lo,
                    (unsigned long long)hi);
        if (h->named[r] && v->nslow < HCOMM_HEALTH_MAX) {
            v->slow_rank[v->nslow]    = r;
            v->slow_late_ms[v->nslow] = h->late[r] * 1e-6;
            v->slow_score[v->nslow]   = sc;
            v->nslow++;
        }
    }
}

void hc_health_judge(struct hcomm_comm *c)
{
    hc_health_t   *h = c->health;
    uint64_t       lo, hi;
    double         interval = 0;
    int            used     = 0;
    hcomm_health_t v;
    pthread_mutex_lock(&h->lock);
    v = h->last;
    pthread_mutex_unlock(&h->lock);
    hc_links_judge(h->links, c, &v);
    if (health_window(h, &lo, &hi))
        used = health_lateness(h, lo, hi, &interval);
    if (used >= HEALTH_MIN_COMMON) /* else too few collectives yet: the ranks' verdict stands */
        health_judge_ranks(c, &v, lo, hi, used, interval);
    pthread_mutex_lock(&h->lock);
    h->last = v;
    pthread_mutex_unlock(&h->lock);
}

void hc_health_get(struct hcomm_comm *c, hcomm_health_t *out)
{
    hc_health_t *h = c->health;
    memset(out, 0, sizeof(*out));
    if (h == NULL)
        return;
    pthread_mutex_lock(&h->lock);
    *out = h->last;
    pthread_mutex_unlock(&h->lock);
}

void hc_health_free(struct hcomm_comm *c)
{
    hc_health_t *h = c->health;
    if (h == NULL)
        return;
    pthread_mutex_destroy(&h->lock);
    free(h->arr), free(h->narr), free(h->offset), free(h->rtt), free(h->late);
    free(h->streak), free(h->named);
    hc_links_free(h->links);
    free(h);
    c->health = NULL;
}
