/* hcomm_trace.c - hcomm-trace: merges a job's flight recorder files
 * (HCOMM_TRACE_DIR, core/flight.h) and prints, per communicator, the verdict
 * the live ranks printed: which operation did not finish and which ranks had
 * not reached it when the first rank gave up on it.
 *   hcomm-trace DIR|FILE...
 * Exit status: 0 when it printed a verdict for every communicator found, 1
 * when a communicator's files show no operation that failed or is pending,
 * 2 on bad input. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "algorithms/algo.h"
#include "core/flight.h"
#include "core/verdict.h"
#include "hcomm.h"

typedef struct op {
    uint64_t seq, cseq, bytes;
    int64_t  issue, end;
    int      coll, timed_out, pending;
    int      dtype;
    int32_t  waiting;
} op_t;

typedef struct rankfile {
    uint64_t comm;
    int      rank, nranks;
    char     host[64];
    char     verdict[1024];
    int64_t  written; /* when the file was written (CLOCK_REALTIME ns) */
    op_t    *ops;
    int      nops;
} rankfile_t;

static rankfile_t *files;
static int         nfiles;

static int coll_by_name(const char *s)
{
    if (strcmp(s, "group") == 0)
        return HC_OP_GROUP;
    for (int c = 0; c < HC_COLL_COUNT; c++)
        if (strcmp(s, hc_coll_name((hc_coll_t)c)) == 0)
            return c;
    return -1;
}

static int dtype_by_name(const char *s)
{
    for (int d = 0; d < HCOMM_DTYPE_COUNT; d++)
        if (strcmp(s, hcomm_dtype_name((hcomm_dtype_t)d)) == 0)
            return d;
    return 0;
}

/* The value after " key=" in line, copied into out; 0, or -1 if absent. */
static int field(const char *line, const char *key, char *out, size_t size)
{
    char pat[32];
    snprintf(pat, sizeof(pat), " %s=", key);
    const char *p = strstr(line, pat);
    if (p == NULL)
        return -1;
    p += strlen(pat);
    size_t n = strcspn(p, " \n");
    if (n >= size)
        n = size - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

static int parse_op(const char *line, op_t *o)
{
    char                     v[11][64];
    static const char *const keys[] = {"seq",   "cseq",   "coll",    "bytes", "issue", "end",
                                       "state", "status", "waiting", "dtype", "start"};
    for (int i = 0; i < 11; i++)
        if (field(line, keys[i], v[i], sizeof(v[i])) != 0)
            return -1;
    o->seq   = strtoull(v[0], NULL, 10);
    o->cseq  = strtoull(v[1], NULL, 10);
    o->coll  = coll_by_name(v[2]);
    o->bytes = strtoull(v[3], NULL, 10);
    o->issue = strtoll(v[4], NULL, 10);
    if (o->issue == 0) /* not stamped (no trace, no profiler): its start is */
        o->issue = strtoll(v[10], NULL, 10);
    o->end       = strtoll(v[5], NULL, 10);
    o->pending   = strcmp(v[6], "queued") == 0 || strcmp(v[6], "running") == 0;
    o->timed_out = strcmp(v[7], hcomm_status_str(HCOMM_ERR_TIMEOUT)) == 0;
    o->waiting   = v[8][0] == '-' ? -1 : atoi(v[8]);
    o->dtype     = dtype_by_name(v[9]);
    return o->coll < 0 ? -1 : 0;
}

/* A communicator larger than any job: a file that says so is not one. */
#define HC_TRACE_MAX_RANKS (1 << 24)

/* A decimal field in 0..max, or -1. */
static int flight_int(const char *v, long max)
{
    char *end;
    errno  = 0;
    long x = strtol(v, &end, 10);
    return errno == 0 && end != v && *end == '\0' && x >= 0 && x <= max ? (int)x : -1;
}

static int read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char  line[2048], v[64];
    if (f == NULL) {
        fprintf(stderr, "hcomm-trace: %s: %s\n", path, strerror(errno));
        return -1;
    }
    rankfile_t rf;
    memset(&rf, 0, sizeof(rf));
    int ok = fgets(line, sizeof(line), f) != NULL && strncmp(line, HC_FLIGHT_MAGIC, 14) == 0;
    while (ok && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "comm ", 5) == 0) {
            ok        = field(line, "id", v, sizeof(v)) == 0;
            rf.comm   = strtoull(v, NULL, 16);
            ok        = ok && field(line, "rank", v, sizeof(v)) == 0;
            rf.rank   = flight_int(v, HC_TRACE_MAX_RANKS - 1);
            ok        = ok && field(line, "nranks", v, sizeof(v)) == 0;
            rf.nranks = flight_int(v, HC_TRACE_MAX_RANKS);
            if (field(line, "host", rf.host, sizeof(rf.host)) != 0)
                rf.host[0] = '\0';
        } else if (strncmp(line, "clock ", 6) == 0) {
            ok         = field(line, "realtime_ns", v, sizeof(v)) == 0;
            rf.written = strtoll(v, NULL, 10);
        } else if (strncmp(line, "verdict ", 8) == 0) {
            snprintf(rf.verdict, sizeof(rf.verdict), "%.1000s", line + 8);
            rf.verdict[strcspn(rf.verdict, "\n")] = '\0';
        } else if (strncmp(line, "op ", 3) == 0) {
            op_t *p = realloc(rf.ops, (size_t)(rf.nops + 1) * sizeof(*p));
            ok      = p != NULL;
            if (ok && parse_op(line, &p[rf.nops]) == 0)
                rf.nops++;
            if (ok)
                rf.ops = p;
        }
    }
    fclose(f);
    if (!ok || rf.nranks <= 0 || rf.rank < 0 || rf.rank >= rf.nranks) {
        fprintf(stderr, "hcomm-trace: %s is not a flight recorder file\n", path);
        free(rf.ops);
        return -1;
    }
    rankfile_t *p = realloc(files, (size_t)(nfiles + 1) * sizeof(*p));
    if (p == NULL)
        return -1;
    files           = p;
    files[nfiles++] = rf;
    return 0;
}

static int read_path(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "hcomm-trace: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(sb.st_mode))
        return read_file(path);
    DIR *d = opendir(path);
    if (d == NULL)
        return -1;
    struct dirent *e;
    int            rc = 0;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "hcomm-flight-", 13) != 0 || n < 4 ||
            strcmp(e->d_name + n - 4, ".txt") != 0)
            continue;
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
        rc |= read_file(p);
    }
    closedir(d);
    return rc;
}

/* An operation's number for comparing ranks: a collective's is alike on all. */
static uint64_t op_key(const op_t *o)
{
    return o->cseq != 0 ? o->cseq : o->seq;
}

/* The operation that did not finish: the lowest-numbered one that a rank's
 * file shows timed out or still pending; *when: the first time a rank gave up
 * on it (its end, or when its file was written). */
static const op_t *stuck_op(uint64_t comm, int64_t *when)
{
    const op_t *best = NULL;
    for (int i = 0; i < nfiles; i++)
        for (int j = 0; files[i].comm == comm && j < files[i].nops; j++) {
            const op_t *o = &files[i].ops[j];
            if ((o->timed_out || o->pending) && (best == NULL || op_key(o) < op_key(best)))
                best = o;
        }
    *when = INT64_MAX;
    for (int i = 0; best != NULL && i < nfiles; i++)
        for (int j = 0; files[i].comm == comm && j < files[i].nops; j++) {
            const op_t *o = &files[i].ops[j];
            if ((o->timed_out || o->pending) && op_key(o) == op_key(best) &&
                o->cseq == best->cseq) {
                int64_t t = o->timed_out && o->end != 0 ? o->end : files[i].written;
                *when     = t < *when ? t : *when;
            }
        }
    return best;
}

/* Where rf's rank was at time when: what it had issued and ended by then. */
static void where_at(const rankfile_t *rf, int64_t when, hc_rank_where_t *w)
{
    memset(w, 0, sizeof(*w));
    w->known   = 1;
    w->waiting = -1;
    for (int j = 0; j < rf->nops; j++) {
        const op_t *o = &rf->ops[j];
        if (o->issue > when)
            continue;
        if (o->seq > w->seq)
            w->seq = o->seq, w->waiting = o->pending || o->end > when ? o->waiting : -1;
        if (o->cseq > w->ccount)
            w->ccount = o->cseq, w->c_bytes = o->bytes,
            w->c_desc = (uint32_t)o->coll | (uint32_t)o->dtype << 8;
        if (o->end != 0 && o->end <= when && o->seq > w->ended)
            w->ended = o->seq;
    }
}

static int verdict(uint64_t comm)
{
    int64_t     when   = 0;
    int         nranks = 0;
    const op_t *o      = stuck_op(comm, &when);
    for (int i = 0; i < nfiles; i++)
        if (files[i].comm == comm && files[i].nranks > nranks)
            nranks = files[i].nranks;
    printf("comm %016" PRIx64 ": %d ranks, files from", comm, nranks);
    for (int i = 0; i < nfiles; i++)
        if (files[i].comm == comm)
            printf(" %d", files[i].rank);
    printf("\n");
    if (o == NULL) {
        printf("  every operation in the files ended\n");
        return 1;
    }
    hc_rank_where_t *where = calloc((size_t)nranks, sizeof(*where));
    const char     **hosts = calloc((size_t)nranks, sizeof(*hosts));
    char             line[2048];
    if (where == NULL || hosts == NULL)
        return 2;
    for (int i = 0; i < nfiles; i++)
        if (files[i].comm == comm && files[i].rank < nranks) {
            where_at(&files[i], when, &where[files[i].rank]);
            hosts[files[i].rank] = files[i].host;
        }
    hc_verdict_op_t op = {
        .coll = (uint8_t)o->coll, .seq = o->seq, .cseq = o->cseq, .bytes = o->bytes, .peer = -1};
    hc_verdict_format(&op, where, hosts, nranks, 1, line, sizeof(line));
    printf("  verdict: %s\n", line);
    for (int i = 0; i < nfiles; i++)
        if (files[i].comm == comm && strcmp(files[i].verdict, "-") != 0 && files[i].verdict[0])
            printf("  rank %d said: %s\n", files[i].rank, files[i].verdict);
    free(where), free(hosts);
    return 0;
}

int main(int argc, char **argv)
{
    int rc = 0;
    int help = argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0);
    if (argc < 2 || help) {
        fprintf(help ? stdout : stderr, "usage: hcomm-trace DIR|FILE...  (HCOMM_TRACE_DIR's "
                                        "flight recorder files; docs/resilience.md)\n");
        return help ? 0 : 2;
    }
    for (int i = 1; i < argc; i++)
        if (read_path(argv[i]) != 0)
            rc = 2;
    if (nfiles == 0) {
        fprintf(stderr, "hcomm-trace: no flight recorder files\n");
        return 2;
    }
    for (int i = 0; i < nfiles; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = files[j].comm == files[i].comm;
        if (!seen) {
            int r = verdict(files[i].comm);
            rc    = rc > r ? rc : r;
        }
    }
    return rc;
}
