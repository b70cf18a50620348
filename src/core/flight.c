/* flight.c - the flight recorder's file and report lines (flight.h). */
#include "core/flight.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/hash.h"
#include "base/log.h"
#include "base/params.h"
#include "core/ops.h"

#define FLIGHT_REPORT_OPS 8 /* operations a report shows in the log */

uint64_t hc_flight_comm_id(hcomm_comm_t c)
{
    /* a hash of the secret with a label: equal on every rank, and no way back */
    return hc_hash_bytes(hc_hash_str(0, "hcomm flight"), c->cookie, sizeof(c->cookie));
}

static void flight_waiting(const hc_op_view_t *v, char *buf, size_t size)
{
    size_t len = 0;
    buf[0]     = '\0';
    for (int i = 0; i < v->nwaiting && len + 12 < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%d", i ? "," : "", v->waiting[i]);
    if (len == 0)
        snprintf(buf, size, "-");
}

static hc_op_view_t *flight_snapshot(hcomm_comm_t c, int *n)
{
    int           max = (int)c->ops_mask + 1 + 64; /* the ring and some of the queue */
    hc_op_view_t *v   = calloc((size_t)max, sizeof(*v));
    *n                = v != NULL ? hc_ops_snapshot(c, v, max) : 0;
    return v;
}

static void flight_put_op(FILE *f, const hc_op_view_t *v, int64_t to_real)
{
    const hc_op_rec_t *r = &v->rec;
    char               w[HC_OP_WAIT_MAX * 12];
    int64_t            t[3] = {(int64_t)r->t_issue, (int64_t)r->t_start, (int64_t)r->t_end};
    for (int i = 0; i < 3; i++)
        t[i] = t[i] != 0 ? t[i] + to_real : 0;
    flight_waiting(v, w, sizeof(w));
    fprintf(f,
            "op seq=%llu cseq=%llu coll=%s dtype=%s bytes=%llu algo=%s state=%s status=%s "
            "issue=%lld start=%lld end=%lld waiting=%s\n",
            (unsigned long long)r->seq, (unsigned long long)r->cseq, hc_ops_coll_name(r),
            r->coll == HC_OP_GROUP ? "-" : hcomm_dtype_name((hcomm_dtype_t)r->dtype),
            (unsigned long long)r->bytes, hc_ops_algo_name(r), hc_ops_state_name(r->state),
            r->status == HCOMM_IN_PROGRESS ? "-" : hcomm_status_str((hcomm_status_t)r->status),
            (long long)t[0], (long long)t[1], (long long)t[2], w);
}

void hc_flight_write(hcomm_comm_t c, const char *why)
{
    const char *dir = hc_params_get()->trace_dir;
    char        path[PATH_MAX], tmp[PATH_MAX + 8];
    int         n;
    if (dir == NULL || dir[0] == '\0')
        return;
    snprintf(path, sizeof(path), "%s/hcomm-flight-%016llx-r%d.txt", dir,
             (unsigned long long)hc_flight_comm_id(c), c->rank);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        hc_warn(COLL, "flight recorder: cannot write %s: %s", tmp, strerror(errno));
        return;
    }
    hc_op_view_t *v    = flight_snapshot(c, &n);
    int64_t       mono = (int64_t)hc_clock_ts_ns(CLOCK_MONOTONIC);
    int64_t       real = (int64_t)hc_clock_ts_ns(CLOCK_REALTIME);
    fprintf(f, "%s\n", HC_FLIGHT_MAGIC);
    fprintf(f, "comm id=%016llx rank=%d nranks=%d host=%s pid=%d reason=%s status=%s\n",
            (unsigned long long)hc_flight_comm_id(c), c->rank, c->nranks,
            c->peers[c->rank].hostname, (int)getpid(), why, hcomm_status_str(c->error));
    fprintf(f, "clock realtime_ns=%lld\n", (long long)real);
    fprintf(f, "verdict %s\n", c->verdict != NULL ? c->verdict : "-");
    for (int i = 0; i < n; i++)
        flight_put_op(f, &v[i], real - mono);
    free(v);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        hc_warn(COLL, "flight recorder: writing %s failed: %s", path, strerror(errno));
        unlink(tmp);
        return;
    }
    hc_info(COLL, "flight recorder: %d operations in %s", n, path);
}

void hc_flight_where_line(hcomm_comm_t c, const hc_rank_where_t *w, const char *why)
{
    char b[32];
    hc_verdict_bytes(w->c_bytes, b, sizeof(b));
    hc_warn(COLL,
            "state (%s): comm %016llx rank %d of %d: %llu operations issued, %llu ended; "
            "collective #%llu %s (%s)%s%s",
            why, (unsigned long long)hc_flight_comm_id(c), c->rank, c->nranks,
            (unsigned long long)w->seq, (unsigned long long)w->ended, (unsigned long long)w->ccount,
            w->ccount ? hc_coll_name((hc_coll_t)(w->c_desc & 0xff)) : "none", b,
            w->ended < w->seq ? ", one running" : ", idle",
            w->ended < w->seq && w->waiting >= 0 ? " (waiting for a rank)" : "");
}

void hc_flight_report(hcomm_comm_t c, const char *why)
{
    int           n;
    hc_op_view_t *v     = flight_snapshot(c, &n);
    int           first = n > FLIGHT_REPORT_OPS ? n - FLIGHT_REPORT_OPS : 0;
    hc_warn(COLL, "state (%s): comm %016llx rank %d of %d, host %s: the last %d operations%s", why,
            (unsigned long long)hc_flight_comm_id(c), c->rank, c->nranks,
            c->peers[c->rank].hostname, n - first, n == 0 ? " (none yet)" : ":");
    for (int i = first; i < n; i++) {
        const hc_op_rec_t *r = &v[i].rec;
        char               b[32], w[HC_OP_WAIT_MAX * 12];
        hc_verdict_bytes(r->bytes, b, sizeof(b));
        flight_waiting(&v[i], w, sizeof(w));
        hc_warn(COLL, "  #%llu %s (%s, %s) %s%s%s", (unsigned long long)r->seq, hc_ops_coll_name(r),
                b, hc_ops_algo_name(r), hc_ops_state_name(r->state),
                v[i].nwaiting ? ", waiting for ranks " : "", v[i].nwaiting ? w : "");
    }
    free(v);
    hc_flight_write(c, why);
}

void hc_flight_dump_requested(hcomm_comm_t c)
{
    if (__atomic_exchange_n(&c->dump_req, 0, __ATOMIC_RELAXED))
        hc_flight_report(c, "dump signal");
}
