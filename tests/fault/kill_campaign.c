/*
 * kill_campaign - random kill and stop trials over collectives, transports and
 * rank counts (issue 19 item 14). Each trial forks 2 to 8 ranks (kc_job.c: the
 * parent is the launcher and the rendezvous root; kc_rank.c: the ranks), which
 * loop one collective: allreduce, alltoall, broadcast, the compressed
 * allreduce (onebit, topk, fp16 or bf16), MoE dispatch and combine, or an
 * allreduce enqueued on a stream and synchronized; over shm, tcp, or both
 * (mixed: a topology file puts the ranks on 2 to 4 virtual nodes, shm inside a
 * node, tcp between nodes). A random victim, delay_ms into its call number
 * iter, sends itself SIGKILL or SIGSTOP. Every survivor must return an error
 * within its bound, nothing may hang, and /dev/shm must hold nothing of the
 * job once every process is reaped.
 *
 * Bounds, from the victim's signal (it reports the time just before sending
 * it; CLOCK_MONOTONIC is one clock for all processes) to a survivor's failed
 * call returning; T = HCOMM_TIMEOUT (3 s here):
 *
 * - kill, a survivor connected to the victim (its debug log has the
 *   library's line "rank V connected over shm|tcp"): 2 s (KC_VISIBLE_S). The
 *   death is visible to it: shm progress checks each connected peer's pid,
 *   zombies included (base/proc.c), tcp sees the socket close, and a
 *   connection still to be made finds the victim gone (shm: its pid; tcp: a
 *   refused dial). Where its current request no longer needs the victim, it
 *   waits on peers that do; they fail within the same bound and close their
 *   transports, which it sees at once (shm's closed flag, tcp's hang-up).
 *   Measured: well under 0.5 s; 2 s leaves room for a loaded 2-core machine.
 * - kill, other survivors, and every survivor of a stop: T + 2 s
 *   (KC_MARGIN_S). Such a survivor waits on live peers; either their failure
 *   reaches it as closed connections or its request times out T after its
 *   last progress (e.g. a rank waiting for the segment of a lower peer that
 *   failed before making it: that peer is alive, so only the timeout ends
 *   the wait). No live rank progresses for long after the victim's signal:
 *   one collective's remaining work needs the victim within far less than
 *   2 s, so that last progress is within the margin of the signal.
 * - stop: nobody before 0.9 T (a stopped peer is alive: declaring it dead
 *   early would be wrong), and at least one survivor with HCOMM_ERR_TIMEOUT
 *   (the others may see that one's closed connections instead: REMOTE).
 *
 * A survivor that has not returned KC_HANG_S (10 s) past its bound is hung:
 * the parent kills it. So is one stuck in the teardown after its report
 * (stream destroy, abort: 15 s). Every survivor must also find its error
 * sticky (hcomm_comm_get_error) and abort cleanly.
 *
 * Leftovers: after each trial the parent lists /dev/shm for the job's names,
 * "hcomm-<public name>-" (hc_auth_public_name of the id's cookie), counts
 * them (what the library left: a leftover fails the trial) and removes them
 * as hcomm-run's sweep does, so a failure leaves nothing behind.
 *
 * Usage: kill_campaign [--seed S] [--trials N] [--trial K] [--timeout T]
 *                      [--coll NAME] [--transport shm|tcp|mixed]
 * A trial's parameters depend on (seed, K) alone: `--seed S --trials N`
 * repeats a run and `--seed S --trial K` reruns its trial K (the moment of
 * a signal, and so the outcome, varies with the machine's timing). --coll and
 * --transport replace the drawn value; only what depends on them changes.
 * Exit 0 when every trial passed, 1 otherwise, 2 on bad usage.
 */
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kill_campaign.h"

static const char *const coll_names[]      = {"allreduce",  "alltoall", "broadcast",
                                              "compressed", "moe",      "stream"};
static const char *const transport_names[] = {"shm", "tcp", "mixed"};
static const char *const codec_names[]     = {"onebit", "topk:0.1", "fp16", "bf16"};

const char *kc_coll_name(kc_coll_t c)
{
    return c < KC_NCOLL ? coll_names[c] : "?";
}

const char *kc_transport_name(kc_transport_t t)
{
    return t < KC_NTRANSPORT ? transport_names[t] : "?";
}

/* ---- drawing a trial ---- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int pick(uint64_t *s, int n)
{
    return (int)(splitmix(s) % (uint64_t)n);
}

static void draw_nodes(kc_trial_t *t, uint64_t *s)
{
    int perm[KC_MAX_RANKS], most = t->nranks - 1 < 4 ? t->nranks - 1 : 4;

    /* 2 .. min(n - 1, 4) nodes: at least one holds two ranks (an shm pair) */
    t->nnodes = 2 + pick(s, most - 1);
    for (int r = 0; r < t->nranks; r++)
        perm[r] = r;
    for (int r = t->nranks - 1; r > 0; r--) {
        int j = pick(s, r + 1), x = perm[r];
        perm[r] = perm[j], perm[j] = x;
    }
    for (int i = 0; i < t->nranks; i++)
        t->node[perm[i]] = i < t->nnodes ? i : pick(s, t->nnodes);
}

/* Trial index of a campaign: the same (seed, index) draws the same trial. The
 * command line's --coll and --transport replace what is drawn for them; only
 * what depends on them changes (sizes, nodes; 2 ranks are never mixed). */
static void draw(uint64_t seed, int index, int coll, int transport, kc_trial_t *t)
{
    static const size_t counts[] = {256, 16384, 262144, 1048576}; /* float32: 1 KiB .. 4 MiB */
    static const size_t a2a[]    = {16, 1024, 16384, 131072};     /* per peer */
    static const size_t comp[]   = {2048, 65536, 1048576};
    static const size_t tokens[] = {4, 64, 512};
    static const int    hidden[] = {16, 128, 512};
    uint64_t            s        = seed ^ (0xd1b54a32d192ed03ull * (uint64_t)index);
    int                 c, x, two;

    memset(t, 0, sizeof(*t));
    splitmix(&s);
    t->seed      = seed;
    t->index     = index;
    c            = pick(&s, KC_NCOLL);
    x            = pick(&s, KC_NTRANSPORT);
    t->coll      = (kc_coll_t)(coll >= 0 ? coll : c);
    t->transport = (kc_transport_t)(transport >= 0 ? transport : x);
    t->nranks    = 3 + pick(&s, KC_MAX_RANKS - 2);
    two          = pick(&s, 7) == 0; /* 2 ranks: one trial in 7, but for mixed */
    if (two && t->transport != KC_MIXED)
        t->nranks = 2;
    t->victim   = pick(&s, t->nranks);
    t->stop     = pick(&s, 2);
    t->iter     = pick(&s, 4);
    t->delay_ms = pick(&s, 30);
    if (pick(&s, 4) == 0)
        t->delay_ms = 0;
    if (t->transport == KC_MIXED)
        draw_nodes(t, &s);
    switch (t->coll) {
    case KC_ALLTOALL:
        t->count = a2a[pick(&s, 4)];
        break;
    case KC_COMPRESSED:
        t->count   = comp[pick(&s, 3)];
        t->variant = pick(&s, 4);
        break;
    case KC_MOE:
        t->count   = tokens[pick(&s, 3)];
        t->variant = hidden[pick(&s, 3)];
        break;
    case KC_BROADCAST:
        t->count   = counts[pick(&s, 4)];
        t->variant = pick(&s, t->nranks); /* the root: may be the victim */
        break;
    default:
        t->count = counts[pick(&s, 4)];
    }
}

/* ---- judging a trial ---- */

enum { F_HANG = 1, F_LATE = 2, F_EARLY = 4, F_LEFT = 8, F_OTHER = 16 };

typedef struct {
    int trials, passed, failed, hang, late, early, left_trials, left_objects, other;
} kc_tally_t;

/* A line being built; what does not fit is cut. */
typedef struct {
    char   buf[1536];
    size_t n;
} kc_text_t;

static void add(kc_text_t *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(kc_text_t *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(x->buf + x->n, sizeof(x->buf) - x->n, fmt, ap);
    va_end(ap);
    if (w > 0)
        x->n = x->n + (size_t)w < sizeof(x->buf) ? x->n + (size_t)w : sizeof(x->buf) - 1;
}

static const char *short_status(int st)
{
    return st == HCOMM_ERR_REMOTE    ? "R"
           : st == HCOMM_ERR_TIMEOUT ? "T"
                                     : hcomm_status_name((hcomm_status_t)st);
}

static void describe(const kc_trial_t *t, kc_text_t *x)
{
    add(x, "trial %d seed %llu %s", t->index, (unsigned long long)t->seed, kc_coll_name(t->coll));
    if (t->coll == KC_COMPRESSED)
        add(x, "(%s)", codec_names[t->variant]);
    else if (t->coll == KC_BROADCAST)
        add(x, "(root %d)", t->variant);
    else if (t->coll == KC_MOE)
        add(x, "(hidden %d)", t->variant);
    add(x, " %s", kc_transport_name(t->transport));
    for (int r = 0; t->transport == KC_MIXED && r < t->nranks; r++) /* each rank's node */
        add(x, "%s%d%s", r ? "," : "[", t->node[r], r == t->nranks - 1 ? "]" : "");
    add(x, " n=%d victim=%d %s @%d+%dms count=%zu", t->nranks, t->victim,
        t->stop ? "SIGSTOP" : "SIGKILL", t->iter, t->delay_ms, t->count);
}

static const char *exit_reason(int code)
{
    switch (code) {
    case 2:
        return "no unique id";
    case 3:
        return "report pipe";
    case 4:
        return "no go from the parent";
    case 5:
        return "the error was not sticky";
    case 6:
        return "abort failed";
    case 7:
        return "stream destroy: no error, or the stream not freed";
    default:
        return code > 128 ? "killed by a signal" : "?";
    }
}

/* One survivor: its time into line, its faults into why; returns F_* bits. */
static int judge_rank(const kc_trial_t *t, double T, const kc_outcome_t *o, int r, kc_text_t *line,
                      kc_text_t *why)
{
    const kc_report_t *p     = &o->rep[r];
    double             since = p->t - o->t_victim;
    double             limit = (!t->stop && o->connected[r]) ? KC_VISIBLE_S : T + KC_MARGIN_S;
    const char        *fault = NULL;
    int                f     = 0;

    if (o->hung[r] == 1 || !o->have[r]) {
        add(line, " %d:-", r);
        if (o->hung[r] == 1)
            add(why, " rank %d hung in its call (killed);", r), f = F_HANG;
        else
            add(why, " rank %d exited without a report (exit %d);", r, o->code[r]), f = F_OTHER;
        return f;
    }
    add(line, " %d:%.2f%s%s", r, since, p->phase == KC_FAILED ? short_status(p->status) : "?",
        o->connected[r] ? "*" : "");
    if (p->phase == KC_INIT)
        fault = "init or setup failed", f = F_OTHER;
    else if (p->phase == KC_NEVER)
        fault = "every call succeeded", f = F_OTHER;
    else if (p->status >= 0)
        fault = "non-negative status", f = F_OTHER;
    else if (since > limit)
        fault = "late", f = F_LATE;
    else if (t->stop && since < T * KC_EARLY_FRAC)
        fault = "before HCOMM_TIMEOUT (a stopped peer is alive)", f = F_EARLY;
    if (fault != NULL)
        add(why, " rank %d: %s (%s after %.2f s, bound %.1f s);", r, fault,
            hcomm_status_name((hcomm_status_t)p->status), since, limit);
    if (o->hung[r] == 2)
        add(why, " rank %d hung after its report (killed);", r), f |= F_HANG;
    else if (o->code[r] != 0)
        add(why, " rank %d: exit %d (%s);", r, o->code[r], exit_reason(o->code[r])), f |= F_OTHER;
    return f;
}

static int judge(const kc_trial_t *t, const kc_cfg_t *cfg, const kc_outcome_t *o, kc_tally_t *k)
{
    kc_text_t desc = {.n = 0}, line = {.n = 0}, why = {.n = 0};
    int       f = 0, timeouts = 0;

    describe(t, &desc);
    for (int r = 0; r < t->nranks; r++) {
        if (r == t->victim)
            continue;
        f |= judge_rank(t, cfg->timeout, o, r, &line, &why);
        timeouts += o->have[r] && o->rep[r].status == HCOMM_ERR_TIMEOUT;
    }
    if (o->setup_failed)
        add(&why, " setup failed;"), f |= F_OTHER;
    else if (o->t_victim == 0)
        add(&why, " the victim never signalled;"), f |= F_OTHER;
    else if (t->stop && timeouts == 0)
        add(&why, " stop: no survivor timed out;"), f |= F_OTHER;
    if (o->nleft > 0) {
        add(&why, " %d object(s) of the job left in /dev/shm (then removed):", o->nleft);
        for (int i = 0; i < o->nleft && i < KC_MAX_LEFT; i++)
            add(&why, " %s", o->left[i]);
        k->left_objects += o->nleft;
        f |= F_LEFT;
    }
    k->hang += !!(f & F_HANG), k->late += !!(f & F_LATE), k->early += !!(f & F_EARLY);
    k->left_trials += !!(f & F_LEFT), k->other += !!(f & F_OTHER);
    printf("%s: %s%s\n", desc.buf, f ? "FAIL" : "PASS", line.buf);
    if (f) {
        printf("  why:%s\n  rerun: kill_campaign --seed %llu --trial %d%s%s%s%s\n", why.buf,
               (unsigned long long)t->seed, t->index, cfg->coll >= 0 ? " --coll " : "",
               cfg->coll >= 0 ? coll_names[cfg->coll] : "",
               cfg->transport >= 0 ? " --transport " : "",
               cfg->transport >= 0 ? transport_names[cfg->transport] : "");
        kc_job_show_errors(t, cfg);
    }
    return f != 0;
}

/* ---- the campaign ---- */

static kc_cfg_t cfg;
static char     clean_paths[KC_MAX_RANKS + 1][320];

static void remove_scratch(void)
{
    for (int i = 0; i <= KC_MAX_RANKS; i++)
        (void)unlink(clean_paths[i]);
    (void)rmdir(cfg.dir);
}

static void on_signal(int sig)
{
    static const char msg[] = "kill_campaign: interrupted or past the trial's limit: "
                              "killing every rank\n";
    kc_job_kill_all();
    remove_scratch();
    if (write(1, msg, sizeof(msg) - 1) < 0)
        _exit(1);
    _exit(sig == SIGALRM ? 1 : 128 + sig);
}

static int setup(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(cfg.dir, sizeof(cfg.dir), "%s/hcomm-kc.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(cfg.dir) == NULL) {
        perror("kill_campaign: mkdtemp");
        return -1;
    }
    for (int r = 0; r < KC_MAX_RANKS; r++)
        snprintf(clean_paths[r], sizeof(clean_paths[r]), "%s/r%d.log", cfg.dir, r);
    snprintf(clean_paths[KC_MAX_RANKS], sizeof(clean_paths[0]), "%s/topo.xml", cfg.dir);
    /* the parent's own parameters, read at its first hcomm call; each rank
     * adds its trial's (kc_rank.c). Loopback only: the root and tcp listen there. */
    unsetenv("HCOMM_RANK"), unsetenv("HCOMM_NRANKS"), unsetenv("HCOMM_ROOT");
    unsetenv("HCOMM_COOKIE"), unsetenv("HCOMM_ROOT_FD"), unsetenv("HCOMM_LOG_FILE");
    unsetenv("HCOMM_TRANSPORT"), unsetenv("HCOMM_TOPO_FILE");
    char t[32];
    snprintf(t, sizeof(t), "%g", cfg.timeout);
    setenv("HCOMM_TIMEOUT", t, 1);
    setenv("HCOMM_SOCKET_IFNAME", "lo", 1);
    signal(SIGPIPE, SIG_IGN); /* the parent only: a rank may be gone */
    signal(SIGALRM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    return 0;
}

static int find_name(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -2;
}

static void usage(void)
{
    fprintf(stderr, "Usage: kill_campaign [--seed S] [--trials N] [--trial K] [--timeout T]\n"
                    "                     [--coll allreduce|alltoall|broadcast|compressed|moe|"
                    "stream]\n"
                    "                     [--transport shm|tcp|mixed]\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"seed", 1, NULL, 's'},  {"trials", 1, NULL, 'n'},
                                         {"trial", 1, NULL, 'k'}, {"timeout", 1, NULL, 't'},
                                         {"coll", 1, NULL, 'c'},  {"transport", 1, NULL, 'x'},
                                         {"help", 0, NULL, 'h'},  {NULL, 0, NULL, 0}};
    uint64_t                   seed   = 0;
    int         have_seed = 0, ntrials = 30, only = -1, coll = -1, transport = -1, ch;
    kc_tally_t  k     = {0};
    const char *env_t = getenv("HCOMM_TIMEOUT");

    cfg.timeout = env_t != NULL && *env_t != '\0' ? atof(env_t) : 3;
    while ((ch = getopt_long(argc, argv, "s:n:k:t:c:x:h", opts, NULL)) != -1) {
        switch (ch) {
        case 's':
            seed = strtoull(optarg, NULL, 0), have_seed = 1;
            break;
        case 'n':
            ntrials = atoi(optarg);
            break;
        case 'k':
            only = atoi(optarg);
            break;
        case 't':
            cfg.timeout = atof(optarg);
            break;
        case 'c':
            coll = find_name(coll_names, KC_NCOLL, optarg);
            break;
        case 'x':
            transport = find_name(transport_names, KC_NTRANSPORT, optarg);
            break;
        default:
            usage();
            return ch == 'h' ? 0 : 2;
        }
    }
    cfg.coll = coll, cfg.transport = transport;
    if (optind != argc || ntrials < 1 || coll == -2 || transport == -2 || !(cfg.timeout > 0) ||
        (only != -1 && only < 1)) {
        usage();
        return 2;
    }
    if (!have_seed)
        seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (setup() != 0)
        return 1;
    printf("kill_campaign: seed %llu, %d trial(s), HCOMM_TIMEOUT=%g; bounds from the signal: "
           "kill %.0f s for a survivor connected to the victim (*), else T + %.0f s; stop "
           "%.1f T .. T + %.0f s\n",
           (unsigned long long)seed, only > 0 ? 1 : ntrials, cfg.timeout, KC_VISIBLE_S, KC_MARGIN_S,
           KC_EARLY_FRAC, KC_MARGIN_S);
    printf("kill_campaign: a survivor is rank:seconds status (R remote, T timeout)\n");
    double t0 = kc_now();
    for (int i = only > 0 ? only : 1; i <= (only > 0 ? only : ntrials); i++) {
        kc_trial_t   t;
        kc_outcome_t o;
        draw(seed, i, cfg.coll, cfg.transport, &t);
        alarm((unsigned)(KC_START_S + cfg.timeout + KC_MARGIN_S + KC_HANG_S + 60));
        kc_job_run(&t, &cfg, &o);
        alarm(0);
        k.trials++;
        if (judge(&t, &cfg, &o, &k))
            k.failed++;
        else
            k.passed++;
        kc_job_clean(&cfg);
    }
    remove_scratch();
    printf("kill_campaign: %d trials, seed %llu, %.0f s: %d passed, %d failed; hangs %d, "
           "leftovers %d (objects the library left in /dev/shm, in %d trials, before the "
           "parent removed them as hcomm-run does), late %d, early %d, other %d\n",
           k.trials, (unsigned long long)seed, kc_now() - t0, k.passed, k.failed, k.hang,
           k.left_objects, k.left_trials, k.late, k.early, k.other);
    return k.failed == 0 ? 0 : 1;
}
