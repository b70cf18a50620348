/*
 * elastic_train.c - data-parallel training that loses a rank, shrinks, and
 * later takes a new process in.
 *
 * The model: linear regression y = x . w* + noise, D weights, trained by SGD.
 * Each rank owns a shard of the data (at start, shard = its rank) generated
 * from (seed, shard) alone, so a run is reproducible and a newcomer can
 * rebuild a lost shard. Every step each rank computes the gradient of a
 * minibatch of its shard; one allreduce SUMs the gradients (and losses) and
 * every rank divides by the *current* number of ranks: after a shrink or a
 * grow the average is over the ranks that are there.
 *
 * --kill-at K: the last rank of the job raises SIGKILL at step K. The others'
 * allreduce fails; they shrink (hcomm_comm_shrink agrees on who is alive),
 * abort the failed communicator and redo the step without the lost shard.
 * --grow-at G: at step G, if fewer ranks are left than the job started with,
 * rank 0 starts new processes (fork + exec of this program with --join FD)
 * that take the lost shards; all grow the communicator (hcomm_comm_grow) and
 * rank 0 broadcasts the step and the weights so the newcomers start in sync.
 *
 * Launch (-k: a rank that dies leaves the others running):
 *   tools/hcomm-run -k -n 4 examples/elastic_train 60 --kill-at 20 --grow-at 30
 * Rank 0 prints "elastic: step S: N ranks, loss L" every 10 steps, one line per
 * shrink or grow, and "elastic: done: ..." at the end; every rank prints its
 * own final line. Exit 0 when the model is within THRESH of w*, every rank
 * holds the same weights bit for bit, and they are those of rank 0's serial
 * replay of the run (which shards took part in which step) up to rounding.
 */
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hcomm.h"

#define D 64      /* weights */
#define SHARD 512 /* samples per shard */
#define BATCH 32  /* samples per rank per step */
#define LR 0.3f   /* the Hessian is about I: 0.7^60 of the start error is left */
#define NOISE 0.1 /* standard deviation of the label noise */
#define SEED 20261202u
/* |w - w*| at the end: a clean 4-rank run of 60 steps ends at 0.043, one that
 * lost a rank at step 20 at 0.048 (the floor of SGD with a constant step and
 * of the label noise). |w*| is about 8 and each step keeps about 0.7 of the
 * error, so a run 10 steps short of converged is still at 0.2. */
#define THRESH 0.1
/* max |w - w_serial| (replay()): 1.2e-7 in the clean, kill and grow runs
 * (rounding); dividing by 4 instead of 3 after the kill ends 3.4e-3 off, a
 * newcomer 1e-3 off in one weight at step 30 2.8e-4. SGD forgets (0.7 a
 * step): the replay sees mistakes of the last 20 steps or so. */
#define REPLAY_TOL 1e-4

#define CHECK(call)                                                                                \
    do {                                                                                           \
        hcomm_status_t st_ = (call);                                                               \
        if (st_ != HCOMM_SUCCESS) {                                                                \
            fprintf(stderr, "elastic: rank %d: %s failed: %s\n", g_rank, #call,                    \
                    hcomm_status_name(st_));                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int      g_rank = -1, g_shard;
static uint64_t g_members; /* the shards in the communicator, one bit each (<= 64) */

/* What a newcomer reads from its pipe: it has no hcomm-run environment of its
 * own (it inherited rank 0's), so everything it needs comes here. */
typedef struct {
    int32_t           rank, nranks, shard, steps;
    hcomm_unique_id_t id; /* carries the new job's secret: a pipe, not argv */
} join_msg_t;

/* ---- random numbers (splitmix64), keyed so (seed, a, b) streams are independent */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
static uint64_t rng_key(uint64_t a, uint64_t b)
{
    return mix64(mix64(SEED ^ mix64(a)) ^ b);
}
static uint64_t rng_next(uint64_t *s)
{
    return mix64(*s += 0x9e3779b97f4a7c15ULL);
}
static double rng_normal(uint64_t *s)
{
    double u = (double)(rng_next(s) >> 11) * 0x1p-53, v = (double)(rng_next(s) >> 11) * 0x1p-53;
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

/* w* and shard s's samples: functions of the seed alone, the same anywhere. */
static void make_data(int shard, float *wstar, float *x, float *y)
{
    uint64_t s = rng_key(UINT64_MAX, 0);
    for (int i = 0; i < D; i++)
        wstar[i] = (float)rng_normal(&s);
    s = rng_key((uint64_t)shard, 1);
    for (int j = 0; j < SHARD; j++) {
        double dot = 0;
        for (int i = 0; i < D; i++)
            dot += wstar[i] * (x[j * D + i] = (float)rng_normal(&s));
        y[j] = (float)(dot + NOISE * rng_normal(&s));
    }
}

/* g[0..D) = gradient of the mean squared error over one minibatch, g[D] = its
 * loss. The minibatch depends on (shard, step) only: a redone step sees the
 * same samples, and a newcomer the ones the lost rank would have seen. */
static void gradient(const float *w, const float *x, const float *y, int shard, int step, float *g)
{
    uint64_t s    = rng_key((uint64_t)shard, 2 + (uint64_t)step);
    double   loss = 0;
    memset(g, 0, (D + 1) * sizeof(*g));
    for (int b = 0; b < BATCH; b++) {
        int          j  = (int)(rng_next(&s) % SHARD);
        const float *xj = x + j * D;
        double       r  = -y[j];
        for (int i = 0; i < D; i++)
            r += w[i] * xj[i];
        for (int i = 0; i < D; i++)
            g[i] += (float)(r * xj[i] / BATCH);
        loss += 0.5 * r * r / BATCH;
    }
    g[D] = (float)loss;
}

/* After a failed allreduce: the survivors shrink, abort the old communicator
 * and agree on the step to redo. A rank dying in the middle of an allreduce
 * can let it finish on some ranks and fail on others; those that finished
 * are one step ahead, so everyone goes back to the lowest step (a rank
 * ahead undoes its last update from wprev). Returns that step. */
static int recover(hcomm_comm_t *comm, hcomm_status_t why, int step, float *w, const float *wprev)
{
    int          mine[3] = {g_rank, step, g_shard}, all[3 * 64], old_size, size, redo = step;
    uint64_t     was = 0;
    hcomm_comm_t nc;
    CHECK(hcomm_comm_size(*comm, &old_size));
    CHECK(hcomm_comm_shrink(*comm, NULL, 0, &nc)); /* NULL, 0: the dead find themselves */
    hcomm_comm_abort(*comm);
    *comm = nc;
    CHECK(hcomm_comm_rank(nc, &g_rank));
    CHECK(hcomm_comm_size(nc, &size));
    CHECK(hcomm_allgather(mine, all, 3, HCOMM_INT32, nc, NULL));
    g_members = 0;
    for (int r = 0; r < size; r++) {
        was |= 1ull << all[3 * r];
        redo = all[3 * r + 1] < redo ? all[3 * r + 1] : redo;
        g_members |= 1ull << all[3 * r + 2];
    }
    if (redo < step)
        memcpy(w, wprev, D * sizeof(*w));
    if (g_rank == 0) { /* the lost: the old ranks nobody was */
        char lost[256] = "", *p = lost;
        for (int r = 0; r < old_size; r++)
            if (!(was >> r & 1))
                p += sprintf(p, "%s%d", p == lost ? "" : ",", r);
        printf("elastic: step %d: rank %s lost (%s); %d ranks go on\n", redo, lost,
               hcomm_status_name(why), size);
    }
    return redo;
}

/* Rank 0's step and weights to every rank (the newcomers know neither). */
static void sync_model(hcomm_comm_t comm, int *step, float *w)
{
    struct {
        int32_t step;
        float   w[D];
    } m;
    m.step = *step;
    memcpy(m.w, w, sizeof(m.w));
    CHECK(hcomm_broadcast(&m, &m, sizeof(m), HCOMM_UINT8, 0, comm, NULL));
    *step = m.step;
    memcpy(w, m.w, sizeof(m.w));
}

/* Starts a newcomer: this same program with --join FD, the read end of a pipe
 * that gets msg. exec, not a bare fork: a forked copy of a process with
 * hcomm's threads and connections could not start afresh. */
static pid_t spawn(const join_msg_t *msg)
{
    int   fds[2];
    char  fdarg[16];
    pid_t pid;
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    snprintf(fdarg, sizeof(fdarg), "%d", fds[0]);
    char *argv[] = {"elastic_train", "--join", fdarg, NULL};
    if ((pid = fork()) == 0) {
        fcntl(fds[0], F_SETFD, 0); /* this end only survives the exec */
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    /* written while this end is still open: no SIGPIPE if the child is gone */
    if (pid > 0 && write(fds[1], msg, sizeof(*msg)) != (ssize_t)sizeof(*msg))
        pid = -1;
    close(fds[0]);
    close(fds[1]);
    return pid;
}

/* Back to n0 ranks: rank 0 makes the id and starts one newcomer per missing
 * shard (every member knows which: g_members), then everyone grows. */
static void grow(hcomm_comm_t *comm, int n0, int steps, pid_t *kids, int *nkids)
{
    int               size;
    hcomm_unique_id_t id;
    hcomm_comm_t      nc;
    CHECK(hcomm_comm_size(*comm, &size));
    if (g_rank == 0) {
        CHECK(hcomm_get_unique_id(&id)); /* rank 0 is the new rendezvous root */
        for (int s = 0, r = size; s < n0; s++) {
            if (g_members >> s & 1)
                continue;
            join_msg_t msg = {.rank = r, .nranks = n0, .shard = s, .steps = steps, .id = id};
            if ((kids[*nkids] = spawn(&msg)) < 0) {
                perror("elastic: spawn");
                exit(1);
            }
            printf("elastic: rank 0 starts pid %d as rank %d for shard %d\n", (int)kids[(*nkids)++],
                   r++, s);
        }
    }
    CHECK(hcomm_broadcast(&id, &id, sizeof(id), HCOMM_UINT8, 0, *comm, NULL));
    CHECK(hcomm_comm_grow(*comm, n0, &id, -1, &nc)); /* members keep their ranks */
    CHECK(hcomm_comm_destroy(*comm));
    *comm     = nc;
    g_members = UINT64_MAX >> (64 - n0);
}

/* Rank 0 replays the whole run serially: the shards are functions of the
 * seed, and hist[step] says which of them took part in each step, so the
 * ranks' weights must be these up to rounding (the allreduce adds in another
 * order). This checks the rescaled mean, the redone step and the newcomer's
 * start, which convergence alone would not. Returns max |w - w_serial|. */
static double replay(int n0, int steps, const uint64_t *hist, const float *w)
{
    size_t n = (size_t)n0 * SHARD;
    float *x = malloc(n * D * sizeof(float)), *y = malloc(n * sizeof(float));
    float  wstar[D], g[D + 1], sum[D], wr[D] = {0};
    double diff = 0;
    if (x == NULL || y == NULL)
        exit(1);
    for (int s = 0; s < n0; s++)
        make_data(s, wstar, x + (size_t)s * SHARD * D, y + (size_t)s * SHARD);
    for (int step = 0; step < steps; step++) {
        int k = 0;
        memset(sum, 0, sizeof(sum));
        for (int s = 0; s < n0; s++) {
            if (!(hist[step] >> s & 1))
                continue;
            gradient(wr, x + (size_t)s * SHARD * D, y + (size_t)s * SHARD, s, step, g);
            for (int i = 0; i < D; i++)
                sum[i] += g[i];
            k++;
        }
        for (int i = 0; i < D; i++)
            wr[i] -= LR * sum[i] / (float)k;
    }
    for (int i = 0; i < D; i++)
        diff = fmax(diff, fabs(wr[i] - w[i]));
    free(x);
    free(y);
    return diff;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"kill-at", required_argument, NULL, 'k'},
        {"grow-at", required_argument, NULL, 'g'},
        {"join", required_argument, NULL, 'j'}, /* internal: a newcomer's pipe */
        {NULL, 0, NULL, 0}};
    int          steps = 60, kill_at = -1, grow_at = -1, join_fd = -1, c;
    int          size, n0, step = 0, nkids = 0;
    pid_t        kids[64];
    hcomm_comm_t comm;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == 'k' || c == 'g' || c == 'j')
            *(c == 'k' ? &kill_at : c == 'g' ? &grow_at : &join_fd) = atoi(optarg);
        else
            return 2;
    }
    if (optind < argc)
        steps = atoi(argv[optind]);
    setvbuf(stdout, NULL, _IOLBF, 0); /* ranks share the output: whole lines */

    if (join_fd >= 0) { /* a newcomer: never hcomm_comm_init_env (rank 0's env) */
        join_msg_t m;
        if (read(join_fd, &m, sizeof(m)) != (ssize_t)sizeof(m))
            return 1;
        close(join_fd);
        g_rank = m.rank, n0 = m.nranks, g_shard = m.shard, steps = m.steps;
        CHECK(hcomm_comm_grow(NULL, m.nranks, &m.id, m.rank, &comm));
    } else {
        CHECK(hcomm_comm_init_env(&comm));
        CHECK(hcomm_comm_rank(comm, &g_rank));
        CHECK(hcomm_comm_size(comm, &n0));
        g_shard = g_rank;
    }
    if (n0 > 64 || steps < 1) {
        fprintf(stderr, "elastic: at most 64 ranks (a shard set is a uint64_t), 1 step or more\n");
        return 2;
    }
    g_members      = UINT64_MAX >> (64 - n0);
    uint64_t *hist = calloc((size_t)steps, sizeof(*hist)); /* g_members at each step */
    float    *x = malloc(SHARD * D * sizeof(float)), *y = malloc(SHARD * sizeof(float));
    float     wstar[D], w[D] = {0}, wprev[D] = {0}, g[D + 1], sum[D + 1];
    if (hist == NULL || x == NULL || y == NULL)
        return 1;
    make_data(g_shard, wstar, x, y);
    if (join_fd >= 0) {
        sync_model(comm, &step, w);
        printf("elastic: rank %d (new, shard %d) joins at step %d\n", g_rank, g_shard, step);
    }

    while (step < steps) {
        if (step == kill_at && join_fd < 0 && g_shard == n0 - 1)
            raise(SIGKILL); /* as abrupt as a lost node: no goodbye */
        CHECK(hcomm_comm_size(comm, &size));
        if (step == grow_at && size < n0) {
            grow(&comm, n0, steps, kids, &nkids);
            sync_model(comm, &step, w);
            CHECK(hcomm_comm_size(comm, &size));
            if (g_rank == 0)
                printf("elastic: step %d: grown to %d ranks\n", step, size);
        }
        gradient(w, x, y, g_shard, step, g);
        /* out of place: a failed allreduce leaves sum undefined, g intact */
        hcomm_status_t st = hcomm_allreduce(g, sum, D + 1, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL);
        if (st != HCOMM_SUCCESS) {
            step = recover(&comm, st, step, w, wprev);
            continue;
        }
        memcpy(wprev, w, sizeof(w));
        for (int i = 0; i < D; i++)
            w[i] -= LR * sum[i] / (float)size; /* the mean over the ranks there now */
        hist[step] = g_members;
        if (g_rank == 0 && (step % 10 == 0 || step == steps - 1))
            printf("elastic: step %d: %d ranks, loss %.6f\n", step, size, sum[D] / size);
        step++;
    }

    /* The end: each rank's loss over its shard and distance to w*; whether
     * every rank holds rank 0's weights bit for bit, and rank 0's replay. */
    double loss = 0, err = 0, off = 0;
    for (int j = 0; j < SHARD; j++) {
        double r = -y[j];
        for (int i = 0; i < D; i++)
            r += w[i] * x[j * D + i];
        loss += 0.5 * r * r / SHARD;
    }
    for (int i = 0; i < D; i++)
        err += (w[i] - wstar[i]) * (w[i] - wstar[i]);
    err = sqrt(err);
    printf("elastic: rank %d (shard %d): loss %.6f, |w - w*| = %.6f\n", g_rank, g_shard, loss, err);
    float   ref[D], total = (float)loss;
    int32_t bad[2] = {0, 0}; /* ranks whose weights differ; replay off */
    CHECK(hcomm_broadcast(w, ref, D, HCOMM_FLOAT32, 0, comm, NULL));
    bad[0] = memcmp(ref, w, sizeof(w)) != 0;
    if (g_rank == 0 && join_fd < 0) /* (a newcomer has no history) */
        bad[1] = (off = replay(n0, steps, hist, w)) > REPLAY_TOL;
    CHECK(hcomm_allreduce(bad, bad, 2, HCOMM_INT32, HCOMM_SUM, comm, NULL));
    CHECK(hcomm_allreduce(&total, &total, 1, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL));
    CHECK(hcomm_comm_size(comm, &size));
    int ok = bad[0] == 0 && bad[1] == 0 && err < THRESH;
    if (g_rank == 0)
        printf("elastic: done: %d steps, final size %d, loss %.6f, |w - w*| = %.6f, replay off by "
               "%.1e, %s\n",
               steps, size, total / size, err, off,
               bad[0]   ? "weights DIFFER"
               : bad[1] ? "serial replay DIFFERS"
               : ok     ? "weights identical, converged"
                        : "NOT converged");
    CHECK(hcomm_comm_destroy(comm));
    for (int k = 0; k < nkids; k++) { /* reap the newcomers rank 0 started */
        int ws;
        if (waitpid(kids[k], &ws, 0) != kids[k] || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
            printf("elastic: newcomer pid %d failed\n", (int)kids[k]);
            ok = 0;
        }
    }
    free(hist);
    free(x);
    free(y);
    return ok ? 0 : 1;
}
