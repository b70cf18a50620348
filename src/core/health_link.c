/* health_link.c - which link is slow (health.h): each rank's per-peer
 * receive throughput, and rank 0's test over every rank's report. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grubbs.h"
#include "base/log.h"
#include "base/params.h"
#include "core/comm.h"
#include "core/health.h"

#define LINK_MIN_MSGS 8          /* messages timed since a link was last judged, to judge it */
#define LINK_SLOWER 2.0          /* a slow link is this many times below its class's median */
#define LINK_SHARED 3.0          /* ... or this many, where its ends are healthy elsewhere */
#define LINK_HEALTHY 0.75        /* a healthy link carries at least this share of its median */
#define LINK_STREAK 3            /* evaluations that flag a link before it is named */
#define LINK_TRACKED  64         /* flagged or named links rank 0 follows */
#define LINK_KEPT 8              /* evaluations a link's last rate stands in the median */

void hc_link_note(struct hcomm_comm *c, int peer, size_t len, uint64_t ns)
{
    if (c->links == NULL)
        return;
    hc_link_stat_t *l = &c->links[peer];
    if (l->n == 0)
        l->cls = (uint32_t)c->ep_tl[peer] * 2 +
                 (c->peers[peer].host_hash == c->peers[c->rank].host_hash);
    /* one writer: plain sums, published for the watch thread */
    __atomic_store_n(&l->bytes, l->bytes + len, __ATOMIC_RELAXED);
    __atomic_store_n(&l->ns, l->ns + ns, __ATOMIC_RELAXED);
    __atomic_store_n(&l->n, l->n + 1, __ATOMIC_RELEASE);
}

int hc_links_read(const struct hcomm_comm *c, hc_link_report_t *out)
{
    int k = 0;
    for (int p = 0; c->links != NULL && p < c->nranks && k < HC_LINKS_REPORTED; p++) {
        const hc_link_stat_t *l = &c->links[p];
        uint64_t              n = __atomic_load_n(&l->n, __ATOMIC_ACQUIRE);
        if (n > 0)
            out[k++] = (hc_link_report_t){.peer  = p,
                                          .cls   = l->cls,
                                          .n     = n,
                                          .bytes = __atomic_load_n(&l->bytes, __ATOMIC_RELAXED),
                                          .ns    = __atomic_load_n(&l->ns, __ATOMIC_RELAXED)};
    }
    return k;
}

/* ---- rank 0's test ---- */

typedef struct link_track {
    int src, dst;
    int    streak; /* > 0: evaluations that flagged it; < 0: in a row not slow */
    int    named;
    double score;        /* at its last flag */
    double rate, median; /* at its last measure */
} link_track_t;

/* A link judged this evaluation. */
typedef struct link_row {
    int      src, dst;
    uint32_t cls;
    double   rate;   /* bytes/s */
    double   median; /* of its class */
    double   score;
    double   gate; /* slow at or below median / gate */
    int      flag;
    int      fresh; /* measured this time; else its last rate, for the median only */
} link_row_t;

/* A rank's last report of a link, and the rate last measured from it. */
typedef struct link_prev {
    hc_link_report_t r;
    double           rate; /* 0: none yet */
    int              age;  /* evaluations since it was measured */
} link_prev_t;

struct hc_links {
    int               nranks;
    hc_link_report_t *rep; /* [nranks][HC_LINKS_REPORTED]: this evaluation's */
    int              *nrep;
    link_prev_t      *prev; /* [nranks][HC_LINKS_REPORTED]: what rep's sums are compared to */
    int              *nprev;
    link_track_t      track[LINK_TRACKED];
    int               ntrack;
};

hc_links_t *hc_links_create(int nranks)
{
    hc_links_t *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    l->nranks = nranks;
    l->rep    = calloc((size_t)nranks * HC_LINKS_REPORTED, sizeof(*l->rep));
    l->nrep   = calloc((size_t)nranks, sizeof(*l->nrep));
    l->prev   = calloc((size_t)nranks * HC_LINKS_REPORTED, sizeof(*l->prev));
    l->nprev  = calloc((size_t)nranks, sizeof(*l->nprev));
    if (l->rep == NULL || l->nrep == NULL || l->prev == NULL || l->nprev == NULL) {
        hc_links_free(l);
        return NULL;
    }
    return l;
}

void hc_links_begin(hc_links_t *l)
{
    memset(l->nrep, 0, (size_t)l->nranks * sizeof(*l->nrep));
}

void hc_links_feed(hc_links_t *l, int rank, const hc_link_report_t *r, int n)
{
    n = n < HC_LINKS_REPORTED ? n : HC_LINKS_REPORTED;
    memcpy(&l->rep[(size_t)rank * HC_LINKS_REPORTED], r, (size_t)n * sizeof(*r));
    l->nrep[rank] = n;
}

static int cmp_row(const void *a, const void *b)
{
    const link_row_t *x = a, *y = b;
    return x->cls != y->cls ? (x->cls < y->cls ? -1 : 1) : (x->rate < y->rate ? -1 : x->rate > y->rate);
}

/* rank's report of peer's link when it was last judged, or NULL. */
static link_prev_t *links_prev(hc_links_t *l, int rank, int peer)
{
    link_prev_t *p = &l->prev[(size_t)rank * HC_LINKS_REPORTED];
    for (int i = 0; i < l->nprev[rank]; i++)
        if (p[i].r.peer == peer)
            return &p[i];
    return NULL;
}

/* Every link with enough messages since it was last judged, its rate over
 * them, sorted by class, then rate; how many. A link's first report is only
 * where its count starts (a new TCP connection is in slow start). A link
 * that carried too few keeps counting from where it was, so that a slow one
 * is not skipped for being slow; meanwhile its last rate, up to LINK_KEPT
 * evaluations old, stands in its class's median: a slow link completes its
 * messages at other times than the fast ones, and alone it has no class to
 * be measured against. */
static int links_rows(hc_links_t *l, link_row_t **rows_p)
{
    int n = 0, k = 0;
    for (int r = 0; r < l->nranks; r++)
        n += l->nrep[r];
    link_row_t *rows = calloc(n > 0 ? (size_t)n : 1, sizeof(*rows));
    if ((*rows_p = rows) == NULL)
        return 0;
    for (int r = 0; r < l->nranks; r++) {
        const hc_link_report_t *cur = &l->rep[(size_t)r * HC_LINKS_REPORTED];
        for (int i = 0; i < l->nrep[r]; i++) {
            const hc_link_report_t *e = &cur[i];
            link_prev_t            *p = links_prev(l, r, e->peer);
            hc_link_report_t        d = *e;
            if (e->peer < 0 || e->peer >= l->nranks || e->cls / 2 >= (unsigned)hc_tl_table_len())
                continue; /* a corrupt report: not a link this build knows */
            if (p != NULL && (p->r.n > e->n || p->r.bytes > e->bytes || p->r.ns > e->ns)) {
                *p = (link_prev_t){.r = *e}; /* sums that went back: start again from here */
                continue;
            }
            if (p == NULL) {
                if (l->nprev[r] < HC_LINKS_REPORTED)
                    l->prev[(size_t)r * HC_LINKS_REPORTED + l->nprev[r]++] = (link_prev_t){.r = *e};
                continue;
            }
            link_row_t row = {.src = e->peer, .dst = r, .cls = e->cls, .gate = LINK_SLOWER};
            d.n -= p->r.n, d.bytes -= p->r.bytes, d.ns -= p->r.ns;
            if (d.n >= LINK_MIN_MSGS && d.ns > 0) {
                row.rate = (double)d.bytes / (double)d.ns * 1e9, row.fresh = 1;
                *p = (link_prev_t){.r = *e, .rate = row.rate};
            } else if (p->rate > 0 && ++p->age <= LINK_KEPT) {
                row.rate = p->rate;
            } else {
                continue;
            }
            rows[k++] = row;
        }
    }
    qsort(rows, (size_t)k, sizeof(*rows), cmp_row);
    return k;
}

/* Grubbs over one class's rows[0..m) (sorted by rate): a low outlier that is
 * also LINK_SLOWER below the median is flagged. */
static void links_test_class(link_row_t *rows, int m, double alpha)
{
    double score[HCOMM_HEALTH_MAX], *x = malloc((size_t)m * sizeof(*x)); /* up to 64 a rank */
    int    idx[HCOMM_HEALTH_MAX];
    if (x == NULL)
        return; /* not judged this time */
    double median = m % 2 ? rows[m / 2].rate : 0.5 * (rows[m / 2 - 1].rate + rows[m / 2].rate);
    /* Slow is high, and a rate's noise is a factor: the logarithm, negated.
     * A rate above the median is a receiver that came late and found its
     * data there, not a faster wire: held at the median, it does not widen
     * the spread that the slow ones are measured against. */
    for (int i = 0; i < m; i++) {
        x[i]           = -log(fmin(rows[i].rate, median));
        rows[i].median = median;
    }
    int max_out = m / 2 < HCOMM_HEALTH_MAX ? m / 2 : HCOMM_HEALTH_MAX;
    int k       = hc_grubbs_outliers(x, m, alpha, max_out, 1, idx, score);
    free(x);
    for (int i = 0; i < k; i++)
        if (rows[idx[i]].rate * LINK_SLOWER <= median) {
            rows[idx[i]].flag  = 1;
            rows[idx[i]].score = score[i];
        }
}

static int links_healthy(const link_row_t *r)
{
    return r->median > 0 && r->rate >= LINK_HEALTHY * r->median;
}

/* r is slow while its sender is healthy elsewhere (healthy: per sender, its
 * healthy links): a sign that r's receiver is slow on the way in. */
static int links_slow_in(const link_row_t *r, const int *healthy)
{
    return r->median > 0 && !links_healthy(r) && healthy[r->src] > 0;
}

/* A sender that feeds two peers at once (a pipelined schedule's next round
 * beside the last one's tail) gives each half its wire, and the receiver of
 * one reads half: a slow link to the test. A slow sender slows its other
 * links too, a slow receiver its other ways in. So a link whose sender sends
 * to another peer at a healthy rate, into a receiver with no other way in
 * slow by links_slow_in, must read LINK_SHARED below the median, beyond
 * what sharing with two peers explains, to be slow. */
static void links_hold_shared(const hc_links_t *l, link_row_t *rows, int n)
{
    int *healthy = calloc((size_t)l->nranks * 2, sizeof(int)); /* per sender */
    if (healthy == NULL)
        return;                         /* the plain gate for this evaluation */
    int *slow_in = healthy + l->nranks; /* per receiver */
    for (int i = 0; i < n; i++)
        healthy[rows[i].src] += links_healthy(&rows[i]);
    for (int i = 0; i < n; i++)
        slow_in[rows[i].dst] += links_slow_in(&rows[i], healthy);
    for (int i = 0; i < n; i++) {
        link_row_t *r              = &rows[i];
        int         sender_healthy = healthy[r->src] - links_healthy(r) > 0;
        int         receiver_slow  = slow_in[r->dst] - links_slow_in(r, healthy) > 0;
        if (r->median > 0 && sender_healthy && !receiver_slow)
            r->gate = LINK_SHARED;
        if (r->flag && r->rate * r->gate > r->median)
            r->flag = 0;
    }
    free(healthy);
}

static link_track_t *links_track(hc_links_t *l, int src, int dst, int add)
{
    for (int i = 0; i < l->ntrack; i++)
        if (l->track[i].src == src && l->track[i].dst == dst)
            return &l->track[i];
    if (!add || l->ntrack == LINK_TRACKED)
        return NULL;
    l->track[l->ntrack] = (link_track_t){.src = src, .dst = dst};
    return &l->track[l->ntrack++];
}

static void links_say(struct hcomm_comm *c, const link_track_t *t, const link_row_t *row)
{
    const hc_peer_info_t *s = &c->peers[t->src], *d = &c->peers[t->dst];
    if (t->named && row != NULL) {
        const char *tl    = hc_tl_table[row->cls / 2]->name;
        const char *where = row->cls % 2 ? "within a host" : "between hosts";
        hc_warn(COLL,
                "slow link %d -> %d (%s, host %s -> host %s): %.1f MB/s against a median of "
                "%.1f MB/s over the %s links %s (Grubbs score %.2f)",
                t->src, t->dst, tl, s->hostname, d->hostname, row->rate * 1e-6,
                row->median * 1e-6, tl, where, t->score);
    } else if (!t->named && row != NULL) {
        hc_warn(COLL, "link %d -> %d (host %s -> host %s) is no longer slow: %.1f MB/s, the median %.1f MB/s", t->src, t->dst,
                s->hostname, d->hostname, row->rate * 1e-6, row->median * 1e-6);
    }
}

/* Every link judged, on one debug line. */
static void links_log(const link_row_t *rows, int n)
{
    char line[1024];
    int  len = 0;
    for (int i = 0; i < n && len < (int)sizeof(line); i++)
        len += snprintf(line + len, sizeof(line) - (size_t)len, " %d->%d %.1f%s%s", rows[i].src,
                        rows[i].dst, rows[i].rate * 1e-6, rows[i].fresh ? "" : "~",
                        rows[i].flag ? "*" : "");
    hc_debug(COLL, "links (MB/s, ~ an earlier rate, * flagged):%s",
             n > 0 ? line : " none measured");
}

/* src -> dst's row when measured and tested this time, or NULL. */
static const link_row_t *links_measured(const link_row_t *rows, int n, int src, int dst)
{
    for (int i = 0; i < n; i++)
        if (rows[i].fresh && rows[i].median > 0 && rows[i].src == src && rows[i].dst == dst)
            return &rows[i];
    return NULL;
}

void hc_links_judge(hc_links_t *l, struct hcomm_comm *c, hcomm_health_t *v)
{
    link_row_t *rows;
    int         n = links_rows(l, &rows), judged = 0;
    if (rows == NULL)
        return;
    for (int a = 0, b; a < n; a = b) {
        int fresh = 0;
        for (b = a; b < n && rows[b].cls == rows[a].cls; b++)
            fresh += rows[b].fresh;
        if (b - a >= 3 && fresh > 0)
            links_test_class(rows + a, b - a, hc_params_get()->health_alpha), judged += b - a;
    }
    links_hold_shared(l, rows, n);
    if (HC_LOG_DEBUG <= hc_log_level() && (hc_log_subsys() & HC_SUBSYS(COLL)))
        links_log(rows, n);
    for (int i = 0; i < n; i++) /* an earlier rate was counted when it was measured */
        if (rows[i].flag && rows[i].fresh)
            (void)links_track(l, rows[i].src, rows[i].dst, 1);
    v->nlinks      = judged;
    v->nslow_links = 0;
    for (int i = 0; i < l->ntrack; i++) {
        link_track_t     *t   = &l->track[i];
        const link_row_t *row = links_measured(rows, n, t->src, t->dst);
        /* Grubbs flags it to count; it stays slow while well below the
         * median, so a small class's weak test does not make it flap; a
         * link that carried too little this time, or whose class was too
         * small to test, is no evidence either way */
        if (row != NULL)
            t->rate = row->rate, t->median = row->median;
        if (row != NULL && row->flag)
            t->streak = t->streak > 0 ? t->streak + 1 : 1, t->score = row->score;
        else if (row != NULL && row->rate * row->gate > row->median)
            t->streak = t->streak < 0 ? t->streak - 1 : -1;
        int was = t->named;
        if (t->streak >= LINK_STREAK)
            t->named = 1;
        else if (t->streak <= -LINK_STREAK)
            t->named = 0;
        if (t->named != was)
            links_say(c, t, row);
        if (t->named && v->nslow_links < HCOMM_HEALTH_MAX) {
            int k                       = v->nslow_links++;
            v->slow_link_src[k]         = t->src;
            v->slow_link_dst[k]         = t->dst;
            v->slow_link_gbps[k]        = t->rate * 1e-9;
            v->slow_link_median_gbps[k] = t->median * 1e-9;
            v->slow_link_score[k]       = t->score;
        }
    }
    /* follow only what is flagged or named */
    int k = 0;
    for (int i = 0; i < l->ntrack; i++)
        if (l->track[i].named || l->track[i].streak > 0)
            l->track[k++] = l->track[i];
    l->ntrack = k;
    free(rows);
}

void hc_links_free(hc_links_t *l)
{
    if (l == NULL)
        return;
    free(l->rep);
    free(l->nrep);
    free(l->prev);
    free(l->nprev);
    free(l);
}
