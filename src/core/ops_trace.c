/* ops_trace.c - HCOMM_TRACE_FILE: a Chrome trace (JSON that Perfetto and
 * chrome://tracing open) of every operation of the process's communicators,
 * one file per process, each communicator a track of its own.
 *
 * Nothing is formatted while operations run. The records of those that
 * ended are coded in a few bytes (ops_spill.c: kept in memory, then in
 * unlinked spill files), in number order, while an operation waits on its
 * peers or, failing that, once they are half a ring behind. At a flush point
 * (the communicator fails, is destroyed or aborted, or the process exits)
 * the records are formatted and appended, and the file ends in a whole
 * {"traceEvents":[...]} document again. A process killed between flush
 * points leaves the file as the last one wrote it. Where the TSC counts at
 * one rate whatever the CPU does (the kernel's clocksource, or an invariant
 * TSC under a hypervisor's clock, where CLOCK_MONOTONIC costs a serialised
 * TSC read and more), records are stamped in its ticks and turned into
 * CLOCK_MONOTONIC ns when formatted: each span between readings of both
 * clocks (every TRACE_ANCHOR_EVERY records coded, once a second while
 * operations end, and each flush) by the readings at its ends, so that a
 * jump of the TSC (a virtual machine restored elsewhere) spoils one span,
 * not the trace. Ticks read live (rank 0's slow-rank test) are turned by the
 * last reading and the rate over the readings before it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/params.h"
#include "core/ops.h"
#include "core/ops_spill.h"

#define TRACE_HALF_MIN 256u          /* records per half of a traced ring, at least */
#define TRACE_ANCHOR_EVERY 2048u     /* both clocks are read each time this many are coded */
#define TRACE_ANCHOR_NS 1000000000u  /* ... and when a record ends this long after the last */
#define TRACE_CLOCK_TRIES 5          /* a reading is the tightest of this many */
#define TRACE_OUT_BYTES (256u << 10) /* formatted bytes per write */
#define TRACE_EVENT_MAX 1024u        /* room one operation's events need */
#define TRACE_QUEUED_NS 1000u        /* a wait in the queue this long gets its own slice */

/* Both clocks at one moment, and the last record number then. */
typedef struct {
    uint64_t seq, tk, ns;
} trace_anchor_t;

#define TRACE_ANCHORS_MIN 16u
#define TRACE_SPAN_CHECKED_NS 1000000u /* a span this long is timed by its ends */
#define TRACE_SLOPE_TOLERANCE 0.02     /* ... when their rate is this near the nominal one */
#define TRACE_LIVE_BASELINE_NS 100000000u /* the live rate: over readings this far apart */

struct hc_trace {
    hc_op_rec_t       *ring;        /* the communicator's ring while it is traced */
    uint32_t           half;        /* records wait at most this many to be coded; an
                                       operation still running then is lost */
    hc_spill_t         spill;       /* records not formatted yet (ops_spill.h) */
    uint64_t           written;     /* records up to this number are in the trace */
    uint64_t           coded;       /* ... or coded in spill */
    uint64_t           ahead;       /* the highest number that ended */
    uint64_t           lost;        /* records a failed spill or read dropped, or gaps */
    /* ticks: both clocks at open, every TRACE_ANCHOR_EVERY records or TRACE_ANCHOR_NS since,
     * and at the flush (after a flush, its reading starts the list); the comm's lock held */
    trace_anchor_t *anchors;
    size_t          nanchors, cap;
    uint64_t        anchor_due; /* a record ending at this tick is followed by a reading */
    size_t          span;       /* formatting: the anchor that starts the record's span */
    double          span_slope; /* ... and its ns per tick */
    uint64_t        jumped;     /* formatting: a record in a span whose rate was off */
    /* the last anchor and the rate to it, for other threads (hc_trace_ticks_ns): odd ver
     * while written; the rate is the nominal one until readings span TRACE_LIVE_BASELINE_NS */
    uint64_t           base_ver, base_tk, base_ns;
    double             base_slope;
    int                tid;         /* the communicator's track */
    struct hcomm_comm *comm;
    struct hc_trace   *next; /* the live ones, for the exit flush */
};

/* The process's file, shared by its communicators. */
static struct {
    pthread_mutex_t  lock;
    int              fd;  /* -1: not opened yet; -2: could not be (tracing off) */
    off_t            end; /* where the last event ends: the trailer follows */
    int              pid; /* the process's track: its first traced communicator's rank */
    pid_t            owner;
    int              ntid;
    uint8_t          clock;         /* HC_OP_CLOCK_TICKS where the TSC keeps time, else _NS */
    double           ns_per_tick;   /* ticks: measured over 2 ms at open */
    uint64_t         anchor_ticks;  /* TRACE_ANCHOR_NS in ticks */
    char             dir[PATH_MAX]; /* spill files go beside the trace */
    struct hc_trace *live;
} tf = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

static const char trace_trailer[] = "\n]}\n";

/* Writes len bytes at off, whole; 0 or -1 (errno set). */
static int trace_pwrite(int fd, const char *p, size_t len, off_t off)
{
    while (len > 0) {
        ssize_t w = pwrite(fd, p, len, off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w, len -= (size_t)w, off += w;
    }
    return 0;
}

/* Appends out (events, each led by ",\n") and the trailer; tf.lock held. */
static void trace_append(const char *out, size_t len)
{
    if (tf.fd < 0)
        return;
    if (trace_pwrite(tf.fd, out, len, tf.end) != 0 ||
        trace_pwrite(tf.fd, trace_trailer, sizeof(trace_trailer) - 1, tf.end + (off_t)len) != 0) {
        hc_error(INIT, "HCOMM_TRACE_FILE: write failed: %s; tracing stops", strerror(errno));
        /* the file ends where the last whole event did: the trailer goes back
         * where it was (its blocks are the file's already), the rest is cut */
        off_t end = tf.end + (off_t)sizeof(trace_trailer) - 1;
        if (trace_pwrite(tf.fd, trace_trailer, sizeof(trace_trailer) - 1, tf.end) != 0 ||
            ftruncate(tf.fd, end) != 0)
            hc_error(INIT, "HCOMM_TRACE_FILE: cannot end the file: %s", strerror(errno));
        close(tf.fd);
        tf.fd = -2;
        return;
    }
    tf.end += (off_t)len;
}

/* Both clocks at one moment: the ticks read around the ns, averaged, in the
 * tightest of a few tries. A thread preempted between its reads would
 * otherwise be off by half the preemption, and a rate measured over 2 ms with
 * it up to 1% off: a traced rank's arrivals then drift 10 ms a second. */
static void trace_clocks(uint64_t *ns, uint64_t *tk)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < TRACE_CLOCK_TRIES; i++) {
        uint64_t a = hc_clock_ticks(), n = hc_clock_now_ns(), b = hc_clock_ticks();
        if (b >= a && b - a < best) {
            best = b - a;
            *ns  = n;
            *tk  = a + (b - a) / 2;
        }
    }
    if (best == UINT64_MAX) { /* the TSC went back each time: no midpoint to trust */
        *ns = hc_clock_now_ns();
        *tk = hc_clock_ticks();
    }
}

/* ticks as ns by the nominal rate from the anchor a. */
static uint64_t trace_from(uint64_t tk, uint64_t ns, double slope, uint64_t ticks)
{
    return ns + (uint64_t)(int64_t)((double)(int64_t)(ticks - tk) * slope);
}

/* ns per tick from anchor a to b; 0 where that is more than
 * TRACE_SLOPE_TOLERANCE off the rate measured at open (the TSC jumped). */
static double trace_rate(const trace_anchor_t *a, const trace_anchor_t *b)
{
    double slope = b->tk > a->tk ? (double)(b->ns - a->ns) / (double)(b->tk - a->tk) : 0;
    return slope > tf.ns_per_tick * (1 - TRACE_SLOPE_TOLERANCE) &&
                   slope < tf.ns_per_tick * (1 + TRACE_SLOPE_TOLERANCE)
               ? slope
               : 0;
}

/* The rate to publish with the last anchor: over the latest earlier one at
 * least TRACE_LIVE_BASELINE_NS before it, where that is near the nominal
 * rate; else the rate published before. */
static double trace_live_slope(const struct hc_trace *t)
{
    const trace_anchor_t *b = &t->anchors[t->nanchors - 1];
    for (size_t k = t->nanchors - 1; k-- > 0;) {
        const trace_anchor_t *a = &t->anchors[k];
        if (b->ns - a->ns < TRACE_LIVE_BASELINE_NS)
            continue;
        double slope = trace_rate(a, b);
        if (slope != 0)
            return slope;
        break;
    }
    return t->base_slope != 0 ? t->base_slope : tf.ns_per_tick;
}

/* Adds both clocks now, after record seq, to t's anchors and publishes
 * them; an anchor that finds no room is skipped (its span joins the next). */
static void trace_anchor(struct hc_trace *t, uint64_t seq)
{
    if (tf.clock != HC_OP_CLOCK_TICKS)
        return;
    if (t->nanchors == t->cap) {
        trace_anchor_t *a = realloc(t->anchors, 2 * t->cap * sizeof(*a));
        if (a == NULL)
            return;
        t->anchors = a;
        t->cap *= 2;
    }
    trace_anchor_t *a = &t->anchors[t->nanchors++];
    a->seq            = seq;
    trace_clocks(&a->ns, &a->tk);
    t->anchor_due = a->tk + tf.anchor_ticks;
    double slope  = trace_live_slope(t);
    __atomic_store_n(&t->base_ver, t->base_ver + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&t->base_tk, a->tk, __ATOMIC_RELAXED);
    __atomic_store_n(&t->base_ns, a->ns, __ATOMIC_RELAXED);
    __atomic_store(&t->base_slope, &slope, __ATOMIC_RELAXED);
    __atomic_store_n(&t->base_ver, t->base_ver + 1, __ATOMIC_RELEASE);
}

uint64_t hc_trace_ticks_ns(const struct hcomm_comm *c, uint64_t ticks)
{
    struct hc_trace *t = c->trace;
    if (t == NULL)
        return ticks;
    for (;;) { /* any thread: the last anchor, read whole */
        uint64_t v  = __atomic_load_n(&t->base_ver, __ATOMIC_ACQUIRE);
        uint64_t tk = __atomic_load_n(&t->base_tk, __ATOMIC_RELAXED);
        uint64_t ns = __atomic_load_n(&t->base_ns, __ATOMIC_RELAXED);
        double   slope;
        __atomic_load(&t->base_slope, &slope, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if ((v & 1) == 0 && __atomic_load_n(&t->base_ver, __ATOMIC_RELAXED) == v)
            return trace_from(tk, ns, slope, ticks);
    }
}

void hc_trace_rate_scale(double f)
{
    pthread_mutex_lock(&tf.lock);
    tf.ns_per_tick *= f;
    pthread_mutex_unlock(&tf.lock);
}

/* Formatting record seq (in order): the span it was stamped in, between the
 * anchor before it and the next (taken as coding passed it, or by the
 * flush). Timed by its ends where it is long enough and their rate near the
 * nominal one; else by the nominal rate from its start, and counted in
 * jumped when off. */
static void trace_span(struct hc_trace *t, uint64_t seq)
{
    if (tf.clock != HC_OP_CLOCK_TICKS)
        return;
    size_t k = t->span;
    while (k + 2 < t->nanchors && t->anchors[k + 1].seq < seq)
        k++;
    if (k == t->span && t->span_slope != 0)
        return;
    t->span                 = k;
    t->span_slope           = tf.ns_per_tick;
    const trace_anchor_t *a = &t->anchors[k];
    if (k + 1 >= t->nanchors)
        return;
    const trace_anchor_t *b = a + 1;
    if (b->ns - a->ns < TRACE_SPAN_CHECKED_NS)
        return;
    double slope = trace_rate(a, b);
    if (slope != 0)
        t->span_slope = slope;
    else
        t->jumped++;
}

static uint64_t trace_ns(const struct hc_trace *t, const hc_op_rec_t *r, uint64_t v)
{
    if (v == 0 || r->clock != HC_OP_CLOCK_TICKS)
        return v;
    const trace_anchor_t *a = &t->anchors[t->span];
    return trace_from(a->tk, a->ns, t->span_slope, v);
}

/* ns as microseconds with three decimals (Chrome's unit). */
static int trace_us(char *p, size_t room, uint64_t ns)
{
    return snprintf(p, room, "%llu.%03u", (unsigned long long)(ns / 1000u), (unsigned)(ns % 1000u));
}

/* One operation's events into p (at least TRACE_EVENT_MAX bytes); their length. */
static size_t trace_format(char *p, const struct hc_trace *t, const hc_op_rec_t *r)
{
    size_t      n = 0, room = TRACE_EVENT_MAX;
    const char *name  = hc_ops_coll_name(r);
    uint64_t    issue = trace_ns(t, r, r->t_issue), start = trace_ns(t, r, r->t_start);
    uint64_t    end  = trace_ns(t, r, r->t_end);
    uint64_t    ts   = start ? start : issue ? issue : end;
    uint64_t    wait = start && issue && start > issue ? start - issue : 0;
    int         tid  = t->tid;

#define TRACE_PUT(...) (n += (size_t)snprintf(p + n, room - n, __VA_ARGS__))
#define TRACE_TS(ns) (n += (size_t)trace_us(p + n, room - n, (ns)))
    if (wait >= TRACE_QUEUED_NS) { /* issue -> start, on an async track: waits overlap */
        for (int e = 0; e < 2; e++) {
            TRACE_PUT(",\n{\"name\":\"%s\",\"cat\":\"queued\",\"ph\":\"%c\",\"id\":\"%d.%llu\","
                      "\"pid\":%d,\"tid\":%d,\"ts\":",
                      name, e ? 'e' : 'b', tid, (unsigned long long)r->seq, tf.pid, tid);
            TRACE_TS(e ? start : issue);
            TRACE_PUT("}");
        }
    }
    TRACE_PUT(",\n{\"name\":\"%s\",\"cat\":\"op\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", name,
              tf.pid, tid);
    TRACE_TS(ts);
    TRACE_PUT(",\"dur\":");
    TRACE_TS(end > ts ? end - ts : 0);
    TRACE_PUT(",\"args\":{\"seq\":%llu,\"%s\":%llu,", (unsigned long long)r->seq,
              r->coll == HC_OP_GROUP ? "calls" : "count", (unsigned long long)r->count);
    if (r->coll != HC_OP_GROUP)
        TRACE_PUT("\"dtype\":\"%s\",", hcomm_dtype_name((hcomm_dtype_t)r->dtype));
    TRACE_PUT("\"bytes\":%llu,\"algorithm\":\"%s\",\"steps\":%u,\"sent\":%llu,",
              (unsigned long long)hc_op_bytes(r), hc_ops_algo_name(r), r->nsteps,
              (unsigned long long)r->sent);
    if (r->peer >= 0)
        TRACE_PUT("\"%s\":%d,",
                  r->coll == HC_COLL_SEND || r->coll == HC_COLL_RECV ? "peer" : "root", r->peer);
    TRACE_PUT("\"queued_us\":");
    TRACE_TS(wait);
    TRACE_PUT(",\"status\":\"%s\"}}", hcomm_status_name((hcomm_status_t)r->status));
#undef TRACE_PUT
#undef TRACE_TS
    return n < room ? n : room - 1;
}

/* Formats recs into out, writing it out as it fills; returns what is left in it. */
static size_t trace_format_all(char *out, size_t len, struct hc_trace *t, const hc_op_rec_t *recs,
                               size_t n)
{
    for (size_t i = 0; i < n; i++) {
        trace_span(t, recs[i].seq);
        if (recs[i].state == HC_OP_QUEUED) { /* a gap (hc_spill_gap) */
            t->lost++;
            continue;
        }
        if (len + TRACE_EVENT_MAX > TRACE_OUT_BYTES) {
            trace_append(out, len);
            len = 0;
        }
        len += trace_format(out + len, t, &recs[i]);
    }
    return len;
}

/* Codes t's records in number order, from the one after t->coded for as
 * long as they have ended, and up to force whether they have or not: a number
 * whose record is not in the ring then is lost (it never ended, or a later
 * one's took its place). */
static void trace_code(struct hc_trace *t, uint64_t force)
{
    uint32_t mask = 2 * t->half - 1;
    uint64_t last = t->ahead > force ? t->ahead : force; /* past it none ended: no need to look */
    for (uint64_t s = t->coded + 1; s <= last; s++) {
        const hc_op_rec_t *r   = &t->ring[s & mask];
        int                got = r->seq == s;
        if (!got && s > force)
            break;
        if ((got ? hc_spill_put(&t->spill, tf.dir, r) : hc_spill_gap(&t->spill, tf.dir)) != 0) {
            if (t->lost == 0)
                hc_error(INIT, "HCOMM_TRACE_FILE: cannot keep records in %s: %s; some are lost",
                         tf.dir, strerror(errno));
            t->lost += s - t->written; /* what was not formatted yet: the spill starts anew */
            t->written = s;
            hc_spill_reset(&t->spill);
        }
        t->coded = s;
        if ((s & (TRACE_ANCHOR_EVERY - 1)) == 0 ||
            (got && r->clock == HC_OP_CLOCK_TICKS && r->t_end >= t->anchor_due))
            trace_anchor(t, s);
    }
}

void hc_trace_end(struct hcomm_comm *c, uint64_t seq)
{
    struct hc_trace *t = c->trace;
    if (seq > t->ahead)
        t->ahead = seq;
    if (seq > t->coded + t->half) /* no wait came for that long */
        trace_code(t, seq - t->half);
}

void hc_trace_idle(struct hcomm_comm *c)
{
    struct hc_trace *t = c->trace;
    if (t->ahead > t->coded)
        trace_code(t, 0);
}

/* Formats and appends all of t's records that ended; tf.lock and the
 * communicator's lock held. */
static void trace_flush_locked(struct hc_trace *t)
{
    struct hcomm_comm *c    = t->comm;
    char              *out  = malloc(TRACE_OUT_BYTES);
    hc_op_rec_t       *recs = malloc((size_t)t->half * sizeof(*recs));
    size_t             len  = 0;
    uint64_t           last = c->ops_seq; /* the last that ended: the queue holds the rest */
    for (hcomm_request_t r = c->req_head; r != NULL; r = r->next)
        last--;
    if (out == NULL || recs == NULL) {
        hc_error(INIT, "HCOMM_TRACE_FILE: out of memory; records not written yet are lost");
        free(out);
        free(recs);
        return;
    }
    trace_code(t, last); /* its readings before the flush's, which ends the list */
    trace_anchor(t, last);
    t->span       = 0;
    t->span_slope = 0;
    for (uint64_t s = t->written + 1; s <= t->coded;) {
        long k = hc_spill_get(&t->spill, recs, t->half, &s);
        if (k <= 0) {
            hc_error(INIT, "HCOMM_TRACE_FILE: reading back kept records failed");
            t->lost += t->coded - s + 1;
            break;
        }
        len = trace_format_all(out, len, t, recs, (size_t)k);
    }
    t->written = t->coded;
    hc_spill_reset(&t->spill);
    if (t->nanchors > 1) { /* the flush's reading starts the next spans */
        t->anchors[0] = t->anchors[t->nanchors - 1];
        t->nanchors   = 1;
    }
    if (t->jumped > 0) {
        hc_warn(INIT,
                "HCOMM_TRACE_FILE: the TSC's rate was off in spans holding %llu operations (did "
                "it jump?); their times are the nominal rate's, from each span's start",
                (unsigned long long)t->jumped);
        t->jumped = 0;
    }
    if (t->lost > 0) { /* say so in the trace itself */
        len += (size_t)snprintf(out + len, TRACE_OUT_BYTES - len,
                                ",\n{\"name\":\"records lost\",\"ph\":\"i\",\"s\":\"t\",\"pid\":%d,"
                                "\"tid\":%d,\"ts\":0,\"args\":{\"lost\":%llu}}",
                                tf.pid, t->tid, (unsigned long long)t->lost);
        t->lost = 0;
    }
    trace_append(out, len);
    free(out);
    free(recs);
}

void hc_trace_flush(struct hcomm_comm *c)
{
    if (c->trace == NULL)
        return;
    pthread_mutex_lock(&tf.lock);
    trace_flush_locked(c->trace);
    pthread_mutex_unlock(&tf.lock);
}

/* At exit, the communicators never destroyed: one a stream's thread holds
 * right now is skipped rather than waited for. */
static void trace_atexit(void)
{
    if (getpid() != tf.owner) /* a child forked with the file open: not its file */
        return;
    pthread_mutex_lock(&tf.lock);
    for (struct hc_trace *t = tf.live; t != NULL; t = t->next) {
        struct hcomm_comm *c = t->comm;
        if (c->threaded && pthread_mutex_trylock(&c->lock) != 0)
            continue;
        trace_flush_locked(t);
        if (c->threaded)
            pthread_mutex_unlock(&c->lock);
    }
    pthread_mutex_unlock(&tf.lock);
}

/* pattern with %r, %h and %p expanded; without %r the rank goes before a
 * ".json" ending, or at the end. */
static void trace_path(const char *pattern, int rank, char *out, size_t size)
{
    char   host[256] = "host";
    size_t n = 0, plen = strlen(pattern);
    int    has_r = strstr(pattern, "%r") != NULL;
    size_t stem  = plen > 5 && strcmp(pattern + plen - 5, ".json") == 0 ? plen - 5 : plen;

    gethostname(host, sizeof(host) - 1);
#define TRACE_PATH_PUT(...) (n < size ? (n += (size_t)snprintf(out + n, size - n, __VA_ARGS__)) : 0)
    for (size_t i = 0; i <= plen; i++) {
        if (i == stem && !has_r)
            TRACE_PATH_PUT(".%d", rank);
        if (i == plen)
            break;
        char k = pattern[i] == '%' ? pattern[i + 1] : 0;
        if (k == 'r' || k == 'h' || k == 'p') {
            if (k == 'r')
                TRACE_PATH_PUT("%d", rank);
            else if (k == 'h')
                TRACE_PATH_PUT("%s", host);
            else
                TRACE_PATH_PUT("%d", (int)getpid());
            i++;
        } else {
            TRACE_PATH_PUT("%c", pattern[i]);
        }
    }
#undef TRACE_PATH_PUT
}

/* Opens the process's file for c's rank; tf.lock held. 0, or -1 (logged). */
static int trace_file_open(const char *pattern, int rank)
{
    char path[PATH_MAX], head[512], host[256] = "host";
    trace_path(pattern, rank, path, sizeof(path));
    tf.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (tf.fd < 0) {
        hc_error(INIT, "HCOMM_TRACE_FILE: cannot open %s: %s; no trace is written", path,
                 strerror(errno));
        tf.fd = -2;
        return -1;
    }
    snprintf(tf.dir, sizeof(tf.dir), "%s", path);
    char *slash = strrchr(tf.dir, '/');
    if (slash == NULL)
        snprintf(tf.dir, sizeof(tf.dir), ".");
    else
        *(slash == tf.dir ? slash + 1 : slash) = '\0';
    gethostname(host, sizeof(host) - 1);
    tf.pid   = rank;
    tf.owner = getpid();
    tf.end =
        snprintf(head, sizeof(head),
                 "{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,"
                 "\"args\":{\"name\":\"rank %d (%s, pid %d)\"}},\n{\"name\":"
                 "\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
                 rank, rank, host, (int)tf.owner, rank, rank);
    if (trace_pwrite(tf.fd, head, (size_t)tf.end, 0) != 0) {
        hc_error(INIT, "HCOMM_TRACE_FILE: cannot write %s: %s", path, strerror(errno));
        close(tf.fd);
        tf.fd = -2;
        return -1;
    }
    atexit(trace_atexit);
    hc_info(INIT, "tracing every operation to %s", path);
    return 0;
}

/* Whether the TSC's ticks are a clock: the kernel keeps time with them, or
 * the CPU says they count at one rate in every power state (constant_tsc and
 * nonstop_tsc), as under a hypervisor whose clock the kernel uses instead. */
static int trace_tsc_keeps_time(void)
{
#if defined(__x86_64__)
    char  line[4096] = "";
    FILE *f      = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    int   steady = 0;
    if (f != NULL) {
        steady = fgets(line, sizeof(line), f) != NULL && strncmp(line, "tsc", 3) == 0;
        fclose(f);
    }
    if (steady || (f = fopen("/proc/cpuinfo", "r")) == NULL)
        return steady;
    while (fgets(line, sizeof(line), f) != NULL) /* the first CPU's flags */
        if (strncmp(line, "flags", 5) == 0) {
            steady = strstr(line, " constant_tsc") != NULL && strstr(line, " nonstop_tsc") != NULL;
            break;
        }
    fclose(f);
    return steady;
#else
    return 0;
#endif
}

/* ns per tick of the TSC, over 2 ms; 0 when it does not move. */
static double trace_tsc_rate(void)
{
    uint64_t        ns0, tk0, ns1, tk1;
    struct timespec nap = {0, 2000000};
    trace_clocks(&ns0, &tk0);
    nanosleep(&nap, NULL);
    trace_clocks(&ns1, &tk1);
    return tk1 > tk0 && ns1 > ns0 ? (double)(ns1 - ns0) / (double)(tk1 - tk0) : 0;
}

/* t with c's ring, grown to two halves of at least TRACE_HALF_MIN; tf.lock held. */
static struct hc_trace *trace_new(struct hcomm_comm *c)
{
    struct hc_trace *t    = calloc(1, sizeof(*t));
    uint32_t         half = TRACE_HALF_MIN;
    while (half < c->ops_mask + 1)
        half <<= 1;
    if (t != NULL) {
        t->ring    = calloc(2 * (size_t)half, sizeof(*t->ring)); /* its pages, now */
        t->anchors = malloc(TRACE_ANCHORS_MIN * sizeof(*t->anchors));
        t->cap     = TRACE_ANCHORS_MIN;
    }
    if (t == NULL || t->ring == NULL || t->anchors == NULL ||
        hc_spill_init(&t->spill, half, 0) != 0) {
        if (t != NULL) {
            free(t->ring);
            free(t->anchors);
        }
        free(t);
        return NULL;
    }
    for (uint64_t s = c->ops_seq > c->ops_mask ? c->ops_seq - c->ops_mask : 1; s <= c->ops_seq; s++)
        t->ring[s & (2 * half - 1)] = c->ops_ring[s & c->ops_mask]; /* none yet at init */
    t->half    = half;
    t->written = t->coded = t->ahead = c->ops_seq;
    trace_anchor(t, c->ops_seq);
    t->tid  = ++tf.ntid;
    t->comm = c;
    return t;
}

void hc_trace_open(struct hcomm_comm *c)
{
    const char *pattern = hc_params_get()->trace_file;
    if (pattern == NULL || pattern[0] == '\0')
        return;
    pthread_mutex_lock(&tf.lock);
    if (tf.fd == -1 && trace_file_open(pattern, c->rank) == 0) {
        tf.ns_per_tick = trace_tsc_keeps_time() ? trace_tsc_rate() : 0;
        tf.clock       = tf.ns_per_tick > 0 ? HC_OP_CLOCK_TICKS : HC_OP_CLOCK_NS;
        tf.anchor_ticks = tf.ns_per_tick > 0 ? (uint64_t)(TRACE_ANCHOR_NS / tf.ns_per_tick) : 0;
    }
    struct hc_trace *t = tf.fd >= 0 ? trace_new(c) : NULL;
    if (t != NULL) {
        char meta[256];
        int  len = snprintf(meta, sizeof(meta),
                            ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                             "\"args\":{\"name\":\"communicator %d: rank %d of %d\"}}",
                            tf.pid, t->tid, t->tid, c->rank, c->nranks);
        trace_append(meta, (size_t)len);
        t->next = tf.live;
        tf.live = t;
        free(c->ops_ring);
        c->ops_ring  = t->ring;
        c->ops_mask  = 2 * t->half - 1;
        c->ops_clock = tf.clock;
        c->trace     = t;
    } else if (tf.fd >= 0) {
        hc_error(INIT, "HCOMM_TRACE_FILE: out of memory; communicator not traced");
    }
    pthread_mutex_unlock(&tf.lock);
}

void hc_trace_close(struct hcomm_comm *c)
{
    struct hc_trace *t = c->trace;
    if (t == NULL)
        return;
    pthread_mutex_lock(&tf.lock);
    trace_flush_locked(t);
    for (struct hc_trace **p = &tf.live; *p != NULL; p = &(*p)->next)
        if (*p == t) {
            *p = t->next;
            break;
        }
    pthread_mutex_unlock(&tf.lock);
    hc_spill_fini(&t->spill);
    free(t->anchors);
    /* the ring goes with the communicator (hc_ops_fini) */
    c->ops_clock = HC_OP_CLOCK_COARSE;
    c->trace     = NULL;
    free(t);
}
