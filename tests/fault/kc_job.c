/* kc_job.c - one kill-campaign trial seen from the parent, which is its
 * launcher and rendezvous root (no hcomm-run: it would bring every rank down
 * when the victim dies). It writes the topology file of a mixed trial, forks
 * the ranks, hands them the unique id through pipes, collects their reports
 * until every survivor has returned or is declared hung, lets them abort,
 * kills and reaps everything left, reads from each survivor's log whether it
 * had connected to the victim, and lists the job's objects in /dev/shm
 * (named from the id's cookie, as the library names them), which it then
 * removes as hcomm-run's sweep would. */
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "base/auth.h"
#include "bootstrap/bootstrap.h"
#include "kill_campaign.h"

typedef struct {
    const kc_trial_t *t;
    double            timeout;
    pid_t             pid[KC_MAX_RANKS];
    int               id_fd[KC_MAX_RANKS];
    int               exited[KC_MAX_RANKS];
    int               rep_fd;
    double            t_spawn, t_waitpid; /* t_waitpid: the parent saw the victim go */
} kc_job_t;

/* The running trial's ranks, for kc_job_kill_all. */
static volatile pid_t live_pids[KC_MAX_RANKS];

/* mixed: the ranks on virtual nodes of this host (docs/topology.md): shm
 * inside a node, tcp between nodes. */
static int write_topo(const kc_trial_t *t, const kc_cfg_t *cfg)
{
    char  path[320];
    FILE *f;

    snprintf(path, sizeof(path), "%s/topo.xml", cfg->dir);
    if ((f = fopen(path, "w")) == NULL)
        return -1;
    fprintf(f, "<?xml version=\"1.0\"?>\n<hcomm_topology version=\"1\">\n");
    for (int node = 0; node < t->nnodes; node++) {
        fprintf(f, "  <node id=\"%d\" host=\"virtual%d\">\n", node, node);
        for (int r = 0; r < t->nranks; r++)
            if (t->node[r] == node)
                fprintf(f, "    <rank id=\"%d\"/>\n", r);
        fprintf(f, "  </node>\n");
    }
    fprintf(f, "</hcomm_topology>\n");
    return fclose(f) == 0 ? 0 : -1;
}

static int spawn(kc_job_t *job, const kc_cfg_t *cfg)
{
    int rep[2];

    if (pipe(rep) != 0)
        return -1;
    fflush(NULL); /* the children must not repeat buffered output */
    job->t_spawn = kc_now();
    for (int r = 0; r < job->t->nranks; r++) {
        int p[2];
        if (pipe(p) != 0)
            return -1;
        job->pid[r] = fork();
        if (job->pid[r] < 0) {
            close(p[0]), close(p[1]);
            return -1;
        }
        if (job->pid[r] == 0) {
            signal(SIGALRM, SIG_DFL);
            alarm(0);
            close(p[1]);
            close(rep[0]);
            for (int q = 0; q < r; q++)
                close(job->id_fd[q]);
            _exit(kc_rank_main(job->t, cfg, r, p[0], rep[1]));
        }
        close(p[0]);
        job->id_fd[r] = p[1];
        live_pids[r]  = job->pid[r];
    }
    close(rep[1]);
    job->rep_fd = rep[0];
    return 0;
}

/* Reaps whatever exited or stopped; the victim's zombie must not linger. */
static void reap(kc_job_t *job, kc_outcome_t *out)
{
    int   status;
    pid_t p;

    while ((p = waitpid(-1, &status, WNOHANG | WUNTRACED)) > 0) {
        for (int r = 0; r < job->t->nranks; r++) {
            if (job->pid[r] != p)
                continue;
            if (r == job->t->victim && job->t_waitpid == 0)
                job->t_waitpid = kc_now();
            if (WIFSTOPPED(status))
                continue;
            job->exited[r] = 1;
            out->code[r]   = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
    }
}

static int survivors_done(const kc_job_t *job, const kc_outcome_t *out)
{
    for (int r = 0; r < job->t->nranks; r++)
        if (r != job->t->victim && !out->have[r] && !job->exited[r])
            return 0;
    return 1;
}

/* Until every survivor reported (or exited), or the hard limit: the bound
 * plus KC_HANG_S after the victim's signal, KC_START_S after the fork while
 * it has not signalled. */
static void collect(kc_job_t *job, kc_outcome_t *out)
{
    double t_sig = 0;

    for (;;) {
        reap(job, out);
        if (survivors_done(job, out))
            break;
        double ref = t_sig > 0 ? t_sig : job->t_waitpid;
        double limit =
            ref > 0 ? ref + job->timeout + KC_MARGIN_S + KC_HANG_S : job->t_spawn + KC_START_S;
        if (kc_now() > limit)
            break;
        struct pollfd pfd = {job->rep_fd, POLLIN, 0};
        if (poll(&pfd, 1, 20) <= 0)
            continue;
        kc_report_t r;
        if (kc_rw(job->rep_fd, &r, sizeof(r), 0) != 0) {
            kc_sleep_ms(20); /* every writer is gone: wait for the exits */
            continue;
        }
        if (r.rank < 0 || r.rank >= job->t->nranks)
            continue;
        if (r.phase == KC_SIGNAL)
            t_sig = r.t;
        else
            out->rep[r.rank] = r, out->have[r.rank] = 1;
    }
    out->t_victim = t_sig > 0 ? t_sig : job->t_waitpid;
}

static void kill_rank(kc_job_t *job, int r)
{
    kill(job->pid[r], SIGKILL);
    kill(job->pid[r], SIGCONT);
}

/* Kills the survivors that never returned, lets the others abort (up to 15 s),
 * then kills and reaps everything left, the victim included. */
static void finish(kc_job_t *job, kc_outcome_t *out)
{
    const kc_trial_t *t = job->t;
    double            end;
    int               left;

    for (int r = 0; r < t->nranks; r++) {
        if (r != t->victim && !out->have[r] && !job->exited[r]) {
            kill_rank(job, r);
            out->hung[r] = 1;
        }
    }
    for (int r = 0; r < t->nranks; r++) {
        /* a rank that already exited makes this fail (EPIPE): it is reaped below */
        if (r != t->victim && out->have[r])
            (void)kc_rw(job->id_fd[r], "g", 1, 1);
        close(job->id_fd[r]);
    }
    end = kc_now() + 15;
    do {
        reap(job, out);
        left = 0;
        for (int r = 0; r < t->nranks; r++)
            left += r != t->victim && !job->exited[r];
        if (left)
            kc_sleep_ms(20);
    } while (left && kc_now() < end);
    for (int r = 0; r < t->nranks; r++) {
        if (job->exited[r])
            continue;
        kill_rank(job, r);
        if (r != t->victim && out->have[r])
            out->hung[r] = 2;
    }
    end = kc_now() + 10;
    do {
        reap(job, out);
        left = 0;
        for (int r = 0; r < t->nranks; r++)
            left += !job->exited[r];
        if (left)
            kc_sleep_ms(10);
    } while (left && kc_now() < end);
    for (int r = 0; r < KC_MAX_RANKS; r++)
        live_pids[r] = 0;
    close(job->rep_fd);
}

/* Whether rank r's log says it connected to the victim (comm_transports.c:
 * "rank V connected over TL"). */
static int log_connected(const kc_cfg_t *cfg, int r, int victim)
{
    char  path[320], line[1024], needle[48];
    FILE *f;
    int   found = 0;

    snprintf(path, sizeof(path), "%s/r%d.log", cfg->dir, r);
    snprintf(needle, sizeof(needle), " rank %d connected over ", victim);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    while (!found && fgets(line, sizeof(line), f) != NULL)
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

/* The job's objects in /dev/shm: "/hcomm-<public name>-...", the public name
 * made from the id's cookie (base/auth.h) as the library and hcomm-run make
 * it. Counted and named in out, then removed as hcomm-run's sweep_shm would. */
static void shm_left(void *arg, const char *name)
{
    kc_outcome_t *out = arg;
    if (out->nleft < KC_MAX_LEFT)
        snprintf(out->left[out->nleft], sizeof(out->left[0]), "%.63s", name);
    out->nleft++;
}

static void shm_leftovers(const hcomm_unique_id_t *id, kc_outcome_t *out)
{
    hc_uid_t uid;
    memcpy(&uid, id, sizeof(uid));
    (void)hc_auth_shm_sweep(uid.cookie, shm_left, out);
}

int kc_job_run(const kc_trial_t *t, const kc_cfg_t *cfg, kc_outcome_t *out)
{
    kc_job_t          job;
    hcomm_unique_id_t id;
    hcomm_status_t    st = HCOMM_ERR_IO;

    memset(&job, 0, sizeof(job));
    memset(out, 0, sizeof(*out));
    job.t       = t;
    job.timeout = cfg->timeout;
    if ((t->transport == KC_MIXED && write_topo(t, cfg) != 0) || spawn(&job, cfg) != 0) {
        perror("kill_campaign: topology file, pipe or fork");
        out->setup_failed = 1;
        for (int r = 0; r < t->nranks; r++)
            if (job.pid[r] > 0)
                kill_rank(&job, r), waitpid(job.pid[r], NULL, 0);
        return -1;
    }
    st = hcomm_get_unique_id(&id);
    for (int r = 0; r < t->nranks; r++)
        if (st == HCOMM_SUCCESS && kc_rw(job.id_fd[r], &id, sizeof(id), 1) != 0)
            st = HCOMM_ERR_IO;
    if (st != HCOMM_SUCCESS) {
        printf("kill_campaign: unique id: %s\n", hcomm_status_name(st));
        out->setup_failed = 1;
    }
    collect(&job, out);
    finish(&job, out);
    for (int r = 0; r < t->nranks; r++)
        out->connected[r] = r != t->victim && log_connected(cfg, r, t->victim);
    if (st == HCOMM_SUCCESS)
        shm_leftovers(&id, out);
    return 0;
}

/* A failed trial's error lines, from every rank's log (at most 6 a rank). */
void kc_job_show_errors(const kc_trial_t *t, const kc_cfg_t *cfg)
{
    for (int r = 0; r < t->nranks; r++) {
        char  path[320], line[1024];
        int   n = 0;
        FILE *f;
        snprintf(path, sizeof(path), "%s/r%d.log", cfg->dir, r);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        while (n < 6 && fgets(line, sizeof(line), f) != NULL)
            if (strstr(line, " ERROR ") != NULL || strstr(line, " WARN ") != NULL)
                printf("    %s", line), n++;
        fclose(f);
    }
}

void kc_job_clean(const kc_cfg_t *cfg)
{
    char path[320];
    for (int r = 0; r < KC_MAX_RANKS; r++) {
        snprintf(path, sizeof(path), "%s/r%d.log", cfg->dir, r);
        (void)unlink(path);
    }
    snprintf(path, sizeof(path), "%s/topo.xml", cfg->dir);
    (void)unlink(path);
}

void kc_job_kill_all(void)
{
    for (int r = 0; r < KC_MAX_RANKS; r++)
        if (live_pids[r] > 0)
            kill(live_pids[r], SIGKILL), kill(live_pids[r], SIGCONT);
}
