/* verdict.c - the one line that names who a stuck operation waits for. */
#include "core/verdict.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algo.h"

#define VERDICT_NAMED_MAX 8 /* ranks named one by one; the rest are counted */

typedef struct out {
    char  *buf;
    size_t size, len;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_t *o, const char *fmt, ...)
{
    if (o->len + 1 >= o->size)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->buf + o->len, o->size - o->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len = o->len + (size_t)n < o->size ? o->len + (size_t)n : o->size - 1;
}

void hc_verdict_bytes(uint64_t bytes, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int                      u       = 0;
    double                   v       = (double)bytes;
    while (v >= 1024 && u < 4 && (bytes % 1024 == 0 || v >= 10240))
        v /= 1024, bytes /= 1024, u++;
    snprintf(buf, size, v == (double)(uint64_t)v ? "%.0f %s" : "%.1f %s", v, units[u]);
}

static const char *coll_name(unsigned coll)
{
    return coll == HC_OP_GROUP ? "group" : coll < HC_COLL_COUNT ? hc_coll_name(coll) : "?";
}

static void put_rank(out_t *o, int r, const char *const *hosts)
{
    if (hosts != NULL && hosts[r] != NULL && hosts[r][0] != '\0')
        put(o, "rank %d (host %s)", r, hosts[r]);
    else
        put(o, "rank %d", r);
}

/* "is at #41 broadcast (done)": where a rank that has not reached op is. */
static void put_where(out_t *o, const hc_rank_where_t *w)
{
    if (w->ccount == 0)
        put(o, " has issued no collective");
    else
        put(o, " is at #%llu %s", (unsigned long long)w->ccount, coll_name(w->c_desc & 0xff));
    if (w->ended >= w->seq)
        put(o, " (done: in the program, not in hcomm)");
    else if (w->waiting >= 0)
        put(o, " (running, waiting for rank %d)", w->waiting);
    else
        put(o, " (running)");
}

static void put_silent(out_t *o, const hc_rank_where_t *w, int offline)
{
    put(o, offline   ? " left no record (stopped or dead)"
           : w->left ? " has left (aborted or destroyed the communicator, or exited)"
                     : " does not answer (stopped or dead)");
}

/* "; rank 3 (host h2) is at ...": one rank the verdict names. */
static void put_suspect(out_t *o, int more, int r, const hc_rank_where_t *w,
                        const char *const *hosts, int offline)
{
    put(o, more ? "; " : "");
    put_rank(o, r, hosts);
    if (w->known)
        put_where(o, w);
    else
        put_silent(o, w, offline);
}

/* "ranks 0-2, 4-7": the ranks marked in sel. */
static void put_ranges(out_t *o, const unsigned char *sel, int nranks)
{
    int n = 0, first = 1;
    for (int r = 0; r < nranks; r++)
        n += sel[r];
    put(o, n == 1 ? "rank " : "ranks ");
    for (int r = 0; r < nranks; r++) {
        if (!sel[r])
            continue;
        int e = r;
        while (e + 1 < nranks && sel[e + 1])
            e++;
        put(o, first ? "%d" : ", %d", r);
        if (e > r)
            put(o, e == r + 1 ? ", %d" : "-%d", e);
        first = 0, r = e;
    }
}

/* A collective: the ranks that have not reached it, and those that are
 * silent; then those that left (a rank that gave up on it first, usually). */
static int verdict_coll(out_t *o, const hc_verdict_op_t *op, const hc_rank_where_t *where,
                        const char *const *hosts, int nranks, int offline, unsigned char *waiting)
{
    int named = 0, causes = 0, left = 0;
    for (int r = 0; r < nranks; r++) {
        const hc_rank_where_t *w = &where[r];
        int cause                = (!w->known && !w->left) || (w->known && w->ccount < op->cseq);
        waiting[r]               = w->known && !cause;
        left += w->left;
        if (!cause)
            continue;
        if (causes++ > 0 && named >= VERDICT_NAMED_MAX)
            continue;
        put_suspect(o, causes > 1, r, w, hosts, offline);
        named++;
    }
    if (causes > named)
        put(o, "; and %d more ranks", causes - named);
    for (int r = 0, n = 0; r < nranks && left > 0; r++)
        if (where[r].left && n++ < VERDICT_NAMED_MAX) {
            put_suspect(o, named + n > 1, r, &where[r], hosts, offline);
        }
    if (causes > 0 || left > 0)
        return causes;
    /* everyone is in it: name whom the ranks still in it wait for */
    put(o, "every rank reached it; the data path stalls:");
    for (int r = 0; r < nranks && named < VERDICT_NAMED_MAX; r++)
        if (where[r].waiting >= 0 && where[r].ended < where[r].seq) {
            put(o, "%s rank %d waits for rank %d", named ? "," : "", r, where[r].waiting);
            named++, causes++;
        }
    if (named == 0)
        put(o, " no rank says whom it waits for");
    return causes;
}

/* A send, receive or group: its peer, or the ranks that are silent or idle. */
static int verdict_p2p(out_t *o, const hc_verdict_op_t *op, const hc_rank_where_t *where,
                       const char *const *hosts, int nranks, int offline)
{
    int causes = 0;
    for (int r = 0; r < nranks; r++) {
        const hc_rank_where_t *w = &where[r];
        if (op->peer >= 0 ? r != op->peer : w->known && w->ended < w->seq)
            continue; /* a group: only the silent and the idle are suspects */
        if (causes++ >= VERDICT_NAMED_MAX)
            continue;
        put_suspect(o, causes > 1, r, w, hosts, offline);
    }
    if (causes == 0)
        put(o, "every rank is inside an operation");
    return causes;
}

int hc_verdict_format(const hc_verdict_op_t *op, const hc_rank_where_t *where,
                      const char *const *hosts, int nranks, int offline, char *buf, size_t size)
{
    out_t o = {buf, size, 0};
    char  b[32];

    if (size == 0)
        return 0;
    buf[0] = '\0';
    hc_verdict_bytes(op->bytes, b, sizeof(b));
    put(&o, "%s #%llu (%s", coll_name(op->coll),
        (unsigned long long)(op->cseq ? op->cseq : op->seq), b);
    if (op->peer >= 0 && (op->coll == HC_COLL_SEND || op->coll == HC_COLL_RECV))
        put(&o, op->coll == HC_COLL_SEND ? " to rank %d" : " from rank %d", op->peer);
    put(&o, "): ");
    if (op->cseq == 0)
        return verdict_p2p(&o, op, where, hosts, nranks, offline);
    /* on the heap: a communicator of a million ranks is a megabyte */
    unsigned char *waiting = calloc((size_t)(nranks > 0 ? nranks : 1), 1);
    if (waiting == NULL) {
        put(&o, "(out of memory for the verdict)");
        return 0;
    }
    int causes = verdict_coll(&o, op, where, hosts, nranks, offline, waiting);
    int n      = 0;
    for (int r = 0; r < nranks; r++)
        n += waiting[r];
    if (n > 0 && n < nranks) {
        put(&o, "; ");
        put_ranges(&o, waiting, nranks);
        put(&o, " waiting");
    }
    free(waiting);
    return causes;
}
