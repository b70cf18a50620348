/*
 * kill_peer - a rank dies (SIGKILL) or hangs (SIGSTOP) in the middle of an
 * allreduce; every survivor must get a negative status, not hang.
 *
 * No launcher: hcomm-run would kill the other ranks when one dies. The parent
 * forks N ranks, creates the unique id (it is the rendezvous root) and hands it
 * to them through pipes. The ranks loop a 16 MiB allreduce; at the start of its
 * k-th one the victim starts a thread that signals the victim's own process a
 * few milliseconds later. Survivors report status and the duration of the
 * failing call through a pipe, wait for the parent's go, then abort. The parent
 * reaps the victim at once (so its pid vanishes), asserts the bounds and checks
 * that /dev/shm holds nothing of the job afterwards (its objects' names carry
 * the public name of its secret, so tests running beside it do not count).
 *
 * Bounds (T = HCOMM_TIMEOUT, default 3 here), measured from when the parent saw
 * the victim die or stop to each survivor's failure: kill: the victim's ring
 * neighbours within 5 s (death is visible: vanished pid, closed socket), the
 * others within T + 5 s; stop: every survivor between 0.9 T and T + 5 s (a
 * stopped peer is not dead), at least one with HCOMM_ERR_TIMEOUT (the others
 * may see that one's closed connections instead).
 *
 * Usage: kill_peer [-n NRANKS] [-m kill|stop] [-k ITER] [-v VICTIM] [-d DELAY_MS]
 * The transport comes from HCOMM_TRANSPORT. Exit 0 pass, 1 fail, 77 skip.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/auth.h"
#include "bootstrap/bootstrap.h"
#include "hcomm.h"

#define KP_MAX_RANKS 16
#define KP_ELEMS (4u << 20) /* 16 MiB of float32 */
#define KP_VISIBLE_S 5.0
#define KP_SLACK_S 5.0
#define KP_MAX_SHM 256
#define KP_EARLY_FRAC 0.9 /* stop: nobody may fail before this fraction of HCOMM_TIMEOUT */

enum { PH_FAILED = 0, PH_INIT = 1, PH_NEVER = 2 };

typedef struct {
    int    rank, phase, status, iter;
    double elapsed; /* duration of the failing call */
    double t_fail;  /* when it failed (CLOCK_MONOTONIC is one clock for all processes) */
} kp_report_t;

typedef struct {
    int    nranks, victim, kill_iter, delay_ms, stop;
    double timeout;
} kp_opts_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int rw_full(int fd, void *buf, size_t len, int writing)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = writing ? write(fd, (char *)buf + done, len - done)
                            : read(fd, (char *)buf + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return 0;
}

/* ---- the ranks ---- */

static int victim_signal;
static int victim_delay_ms;

static void *victim_thread(void *arg)
{
    (void)arg;
    sleep_ms(victim_delay_ms);
    kill(getpid(), victim_signal);
    return NULL;
}

static void report(int fd, int rank, int phase, hcomm_status_t st, int iter, double el)
{
    kp_report_t r = {rank, phase, (int)st, iter, el, now_s()};
    if (rw_full(fd, &r, sizeof(r), 1) != 0)
        _exit(3);
}

/* Returns the child's exit code: 0 when its own end of the test went right. */
static int rank_main(const kp_opts_t *o, int rank, int id_fd, int rep_fd)
{
    hcomm_unique_id_t id;
    hcomm_comm_t      comm;
    hcomm_status_t    st;
    float *send = malloc(KP_ELEMS * sizeof(float)), *recv = malloc(KP_ELEMS * sizeof(float));
    double deadline;
    char   go;

    if (send == NULL || recv == NULL || rw_full(id_fd, &id, sizeof(id), 0) != 0)
        return 2;
    for (size_t i = 0; i < KP_ELEMS; i++)
        send[i] = (float)(i % 7);
    st = hcomm_comm_init(&comm, o->nranks, &id, rank);
    if (st != HCOMM_SUCCESS) {
        report(rep_fd, rank, PH_INIT, st, 0, 0);
        return 1;
    }
    deadline = now_s() + o->timeout + 25;
    for (int it = 0; now_s() < deadline; it++) {
        if (rank == o->victim && it == o->kill_iter) {
            pthread_t t;
            if (pthread_create(&t, NULL, victim_thread, NULL) != 0)
                kill(getpid(), victim_signal);
        }
        double t0 = now_s();
        st        = hcomm_allreduce(send, recv, KP_ELEMS, HCOMM_FLOAT32, HCOMM_SUM, comm, NULL);
        if (st != HCOMM_SUCCESS) {
            report(rep_fd, rank, PH_FAILED, st, it, now_s() - t0);
            break;
        }
    }
    if (st == HCOMM_SUCCESS)
        report(rep_fd, rank, PH_NEVER, st, 0, 0);
    if (rw_full(id_fd, &go, 1, 0) != 0)
        return 4;
    int bad = hcomm_comm_get_error(comm) >= 0; /* the error must be sticky */
    st      = hcomm_comm_abort(comm);
    return bad ? 5 : st != HCOMM_SUCCESS ? 6 : 0;
}

/* ---- the parent ---- */

#define KP_ALARM_S 100 /* the whole run; then every rank is killed */

static pid_t alarm_pids[KP_MAX_RANKS];
static int   alarm_npids;

static void on_alarm(int sig)
{
    static const char msg[] = "kill_peer: FAIL: the run took too long; killing every rank\n";
    (void)sig;
    for (int r = 0; r < alarm_npids; r++) {
        if (alarm_pids[r] > 0) {
            kill(alarm_pids[r], SIGKILL);
            kill(alarm_pids[r], SIGCONT);
        }
    }
    if (write(1, msg, sizeof(msg) - 1) < 0)
        _exit(1);
    _exit(1);
}

typedef struct {
    pid_t       pid[KP_MAX_RANKS];
    int         id_fd[KP_MAX_RANKS];
    int         rep_fd;
    int         exited[KP_MAX_RANKS], code[KP_MAX_RANKS];
    kp_report_t rep[KP_MAX_RANKS];
    int         have[KP_MAX_RANKS];
    double      victim_gone; /* when the parent saw the victim die or stop */
} kp_job_t;

static char kp_prefix[32] = "hcomm-"; /* "hcomm-<public name>-" once the id exists */

/* The job's objects: "hcomm-<the public name of its cookie>-..." */
static void shm_prefix(const hcomm_unique_id_t *id)
{
    hc_uid_t uid;
    char     pub[17];
    memcpy(&uid, id->internal, sizeof(uid));
    if (hc_auth_public_name(uid.cookie, HC_AUTH_SHM_NAMES, pub, sizeof(pub)) == 0)
        snprintf(kp_prefix, sizeof(kp_prefix), "hcomm-%s-", pub);
}

static int shm_list(char names[][64], int max)
{
    DIR           *d = opendir("/dev/shm");
    struct dirent *e;
    int            n = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL && n < max) {
        if (strncmp(e->d_name, kp_prefix, strlen(kp_prefix)) == 0)
            snprintf(names[n++], 64, "%.63s", e->d_name);
    }
    closedir(d);
    return n;
}

static int spawn(const kp_opts_t *o, kp_job_t *job)
{
    int rep[2];

    if (pipe(rep) != 0)
        return -1;
    for (int r = 0; r < o->nranks; r++) {
        int p[2];
        if (pipe(p) != 0)
            return -1;
        job->pid[r] = fork();
        if (job->pid[r] < 0)
            return -1;
        if (job->pid[r] == 0) {
            close(p[1]);
            close(rep[0]);
            for (int q = 0; q < r; q++)
                close(job->id_fd[q]);
            _exit(rank_main(o, r, p[0], rep[1]));
        }
        close(p[0]);
        job->id_fd[r] = p[1];
        alarm_pids[r] = job->pid[r];
        alarm_npids   = r + 1;
    }
    close(rep[1]);
    job->rep_fd = rep[0];
    return 0;
}

/* Reaps whatever exited or stopped; the victim's zombie must not linger. */
static void reap(const kp_opts_t *o, kp_job_t *job)
{
    int   status;
    pid_t p;

    while ((p = waitpid(-1, &status, WNOHANG | WUNTRACED)) > 0) {
        for (int r = 0; r < o->nranks; r++) {
            if (job->pid[r] != p)
                continue;
            if (WIFSTOPPED(status)) {
                if (r == o->victim && job->victim_gone == 0)
                    job->victim_gone = now_s();
                continue;
            }
            job->exited[r] = 1;
            job->code[r]   = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            if (r == o->victim && job->victim_gone == 0)
                job->victim_gone = now_s();
        }
    }
}

static int survivors_reported(const kp_opts_t *o, const kp_job_t *job)
{
    for (int r = 0; r < o->nranks; r++)
        if (r != o->victim && !job->have[r] && !job->exited[r])
            return 0;
    return 1;
}

static void collect(const kp_opts_t *o, kp_job_t *job, double deadline)
{
    while (!survivors_reported(o, job) && now_s() < deadline) {
        struct pollfd pfd = {job->rep_fd, POLLIN, 0};
        reap(o, job);
        if (poll(&pfd, 1, 20) <= 0)
            continue;
        kp_report_t r;
        if (rw_full(job->rep_fd, &r, sizeof(r), 0) != 0)
            break;
        if (r.rank >= 0 && r.rank < o->nranks) {
            job->rep[r.rank]  = r;
            job->have[r.rank] = 1;
        }
    }
}

/* Lets the survivors abort, waits for them, then kills whatever is left. */
static void finish(const kp_opts_t *o, kp_job_t *job)
{
    double end = now_s() + 20;
    int    left;

    for (int r = 0; r < o->nranks; r++) {
        /* a rank that already exited makes this fail (EPIPE): it is reaped below */
        if (r != o->victim)
            (void)rw_full(job->id_fd[r], "g", 1, 1);
        close(job->id_fd[r]);
    }
    do {
        reap(o, job);
        left = 0;
        for (int r = 0; r < o->nranks; r++)
            left += r != o->victim && !job->exited[r];
        if (left)
            sleep_ms(20);
    } while (left && now_s() < end);
    for (int r = 0; r < o->nranks; r++) {
        if (!job->exited[r]) {
            kill(job->pid[r], SIGKILL);
            kill(job->pid[r], SIGCONT);
            if (r != o->victim)
                job->code[r] = -1; /* hung in abort */
            waitpid(job->pid[r], NULL, 0);
            job->exited[r] = 1;
        }
    }
    close(job->rep_fd);
}

static int neighbour(const kp_opts_t *o, int r)
{
    return r == (o->victim + 1) % o->nranks || r == (o->victim + o->nranks - 1) % o->nranks;
}

/* Seconds from the victim's death or stop (as the parent saw it) to rank r's failure. */
static double since_victim(const kp_job_t *job, int r)
{
    return job->rep[r].t_fail - job->victim_gone;
}

static int check_rank(const kp_opts_t *o, const kp_job_t *job, int r)
{
    const kp_report_t *p = &job->rep[r];
    double limit         = (!o->stop && neighbour(o, r)) ? KP_VISIBLE_S : o->timeout + KP_SLACK_S;
    double since         = since_victim(job, r);
    int    ok            = 1;

    if (!job->have[r]) {
        printf("  rank %d: FAIL: no report (hung or died; exit code %d)\n", r, job->code[r]);
        return 0;
    }
    printf("  rank %d: %s %.2f s after the %s (call took %.2f s, iteration %d)%s", r,
           p->phase == PH_FAILED ? hcomm_status_name((hcomm_status_t)p->status) : "-", since,
           o->stop ? "stop" : "kill", p->elapsed, p->iter, neighbour(o, r) ? " neighbour" : "");
    if (p->phase == PH_INIT)
        printf(": FAIL: comm_init failed with %s", hcomm_status_name((hcomm_status_t)p->status)),
            ok = 0;
    else if (p->phase == PH_NEVER)
        printf(": FAIL: every call succeeded"), ok = 0;
    else if (p->status >= 0)
        printf(": FAIL: non-negative status"), ok = 0;
    else if (since > limit)
        printf(": FAIL: later than %.1f s", limit), ok = 0;
    else if (o->stop && since < o->timeout * KP_EARLY_FRAC)
        printf(": FAIL: before HCOMM_TIMEOUT (a stopped peer is not a dead one)"), ok = 0;
    if (job->code[r] != 0)
        printf(": FAIL: exit code %d (4 no go, 5 error not sticky, 6 abort failed, -1 hung)",
               job->code[r]),
            ok = 0;
    printf("\n");
    return ok;
}

/* stop: the first to notice must time out; others may see its close (REMOTE). */
static int check_stop_cause(const kp_opts_t *o, const kp_job_t *job)
{
    for (int r = 0; r < o->nranks; r++)
        if (r != o->victim && job->have[r] && job->rep[r].status == HCOMM_ERR_TIMEOUT)
            return 1;
    printf("  FAIL: no survivor failed with HCOMM_ERR_TIMEOUT\n");
    return 0;
}

static int listed(char names[][64], int n, const char *name)
{
    for (int j = 0; j < n; j++)
        if (strcmp(names[j], name) == 0)
            return 1;
    return 0;
}

/* A new hcomm-* file that is still there 2 s later is a leak; one that goes
 * away belonged to a test running beside this one (files live only until every
 * peer mapped them). */
static int check_shm(char before[][64], int nbefore)
{
    static char after[KP_MAX_SHM][64], later[KP_MAX_SHM][64];
    int         nafter = shm_list(after, KP_MAX_SHM), ok = 1, fresh = 0;

    for (int i = 0; i < nafter; i++)
        fresh += !listed(before, nbefore, after[i]);
    for (int k = 0; k < 2 && fresh > 0; k++) {
        sleep_ms(1000);
        int nlater = shm_list(later, KP_MAX_SHM);
        for (int i = 0; i < nafter; i++) {
            if (after[i][0] != '\0' && !listed(later, nlater, after[i]))
                after[i][0] = '\0'; /* gone: not ours */
        }
    }
    for (int i = 0; i < nafter; i++) {
        if (after[i][0] != '\0' && !listed(before, nbefore, after[i])) {
            printf("  FAIL: /dev/shm/%s left behind\n", after[i]);
            ok = 0;
        }
    }
    return ok;
}

static int run(const kp_opts_t *o)
{
    static char       before[KP_MAX_SHM][64];
    kp_job_t          job;
    hcomm_unique_id_t id;
    hcomm_status_t    st;
    int               nbefore = shm_list(before, KP_MAX_SHM), ok = 1;

    memset(&job, 0, sizeof(job));
    if (spawn(o, &job) != 0) {
        perror("kill_peer: pipe/fork");
        return 1;
    }
    st = hcomm_get_unique_id(&id);
    if (st == HCOMM_SUCCESS)
        shm_prefix(&id);
    for (int r = 0; r < o->nranks; r++)
        if (st == HCOMM_SUCCESS && rw_full(job.id_fd[r], &id, sizeof(id), 1) != 0)
            st = HCOMM_ERR_IO;
    if (st != HCOMM_SUCCESS)
        printf("kill_peer: unique id: %s\n", hcomm_status_name(st));
    signal(SIGPIPE, SIG_IGN); /* the parent only: a rank may be gone */
    signal(SIGALRM, on_alarm);
    alarm(KP_ALARM_S);
    collect(o, &job, now_s() + o->timeout + 35);
    finish(o, &job);
    for (int r = 0; r < o->nranks; r++)
        if (r != o->victim)
            ok &= check_rank(o, &job, r);
    if (job.victim_gone == 0)
        printf("  FAIL: the victim (rank %d) never died or stopped\n", o->victim), ok = 0;
    else if (o->stop)
        ok &= check_stop_cause(o, &job);
    alarm(0);
    if (nbefore >= 0)
        ok &= check_shm(before, nbefore);
    else
        printf("  no /dev/shm here: leak check skipped\n");
    return ok && st == HCOMM_SUCCESS ? 0 : 1;
}

static int parse(int argc, char **argv, kp_opts_t *o)
{
    int         ch;
    const char *t = getenv("HCOMM_TIMEOUT");

    o->nranks = 4, o->victim = -1, o->kill_iter = 2, o->delay_ms = 5, o->stop = 0;
    while ((ch = getopt(argc, argv, "n:m:k:v:d:")) != -1) {
        switch (ch) {
        case 'n':
            o->nranks = atoi(optarg);
            break;
        case 'm':
            o->stop = strcmp(optarg, "stop") == 0;
            break;
        case 'k':
            o->kill_iter = atoi(optarg);
            break;
        case 'v':
            o->victim = atoi(optarg);
            break;
        case 'd':
            o->delay_ms = atoi(optarg);
            break;
        default:
            return -1;
        }
    }
    if (o->victim < 0)
        o->victim = o->nranks - 1;
    if (t == NULL || *t == '\0') {
        setenv("HCOMM_TIMEOUT", "3", 1);
        t = "3";
    }
    o->timeout = atof(t);
    return o->nranks >= 2 && o->nranks <= KP_MAX_RANKS && o->victim < o->nranks && o->timeout > 0
               ? 0
               : -1;
}

int main(int argc, char **argv)
{
    kp_opts_t   o;
    const char *tr = getenv("HCOMM_TRANSPORT");
    int         rc;

    if (parse(argc, argv, &o) != 0) {
        fprintf(stderr, "Usage: kill_peer [-n 2..16] [-m kill|stop] [-k ITER] [-v VICTIM] "
                        "[-d DELAY_MS]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    unsetenv("HCOMM_RANK"), unsetenv("HCOMM_NRANKS"), unsetenv("HCOMM_ROOT");
    victim_signal   = o.stop ? SIGSTOP : SIGKILL;
    victim_delay_ms = o.delay_ms;
    printf("kill_peer: %d ranks, transport %s, rank %d %s in allreduce %d (+%d ms), "
           "HCOMM_TIMEOUT=%g\n",
           o.nranks, tr ? tr : "auto", o.victim, o.stop ? "stops (SIGSTOP)" : "dies (SIGKILL)",
           o.kill_iter, o.delay_ms, o.timeout);
    rc = run(&o);
    printf("kill_peer: %s\n", rc == 0 ? "PASS" : "FAIL");
    return rc;
}
