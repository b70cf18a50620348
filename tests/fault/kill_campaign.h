/* kill_campaign.h - what the kill campaign's parts share (kill_campaign.c: the
 * trials and the verdicts; kc_job.c: one trial's processes, seen from the
 * parent; kc_rank.c: one rank of a trial). */
#ifndef HC_TESTS_KILL_CAMPAIGN_H
#define HC_TESTS_KILL_CAMPAIGN_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "hcomm.h"

#define KC_MAX_RANKS 8
#define KC_MAX_LEFT 16    /* leftover names kept per trial */
#define KC_VISIBLE_S 2.0  /* kill, seen by a survivor connected to the victim */
#define KC_MARGIN_S 2.0   /* beyond HCOMM_TIMEOUT for the others, and for stop */
#define KC_EARLY_FRAC 0.9 /* stop: nobody may fail before this fraction of HCOMM_TIMEOUT */
#define KC_HANG_S 10.0    /* past the bound: a survivor that has not returned hangs */
#define KC_START_S 30.0   /* from the fork until the victim's signal */

typedef enum {
    KC_ALLREDUCE,
    KC_ALLTOALL,
    KC_BROADCAST,
    KC_COMPRESSED,
    KC_MOE,
    KC_STREAM,
    KC_NCOLL
} kc_coll_t;
typedef enum { KC_SHM, KC_TCP, KC_MIXED, KC_NTRANSPORT } kc_transport_t;

/* One trial, drawn from (seed, index) alone. */
typedef struct {
    uint64_t       seed; /* the campaign's */
    int            index;
    kc_coll_t      coll;
    kc_transport_t transport;
    int            nranks, victim, stop; /* stop: SIGSTOP, else SIGKILL */
    int            iter, delay_ms;       /* the victim signals itself delay_ms into call iter */
    size_t         count;                /* elements (alltoall: per peer; moe: tokens) */
    int            variant;              /* broadcast: root; compressed: codec; moe: hidden */
    int            nnodes;               /* mixed: virtual nodes */
    int            node[KC_MAX_RANKS];   /* mixed: each rank's node */
} kc_trial_t;

/* What a rank tells the parent through the report pipe. */
enum { KC_FAILED = 0, KC_INIT = 1, KC_NEVER = 2, KC_SIGNAL = 3 };
typedef struct {
    int    rank, phase, status, iter;
    double elapsed; /* duration of the failing call */
    double t;       /* when it failed or signalled (CLOCK_MONOTONIC: one clock for all) */
} kc_report_t;

/* The campaign's settings every trial shares. */
typedef struct {
    double timeout;         /* HCOMM_TIMEOUT */
    char   dir[256];        /* scratch: topology files, the ranks' logs */
    int    coll, transport; /* --coll, --transport: -1 when drawn */
} kc_cfg_t;

/* One trial as the parent saw it. */
typedef struct {
    kc_report_t rep[KC_MAX_RANKS];
    int         have[KC_MAX_RANKS];
    int         code[KC_MAX_RANKS];      /* exit code, 128 + signal, -1: killed by the parent */
    int         connected[KC_MAX_RANKS]; /* its log says it connected to the victim */
    double      t_victim;                /* the victim's signal (its report, else waitpid) */
    int         hung[KC_MAX_RANKS];      /* killed by the parent: 1 no report, 2 stuck after */
    int         nleft;                   /* the job's objects in /dev/shm once all are reaped */
    char        left[KC_MAX_LEFT][64];
    int         setup_failed; /* fork, pipe or id: the trial never ran */
} kc_outcome_t;

/* kc_job.c: runs one trial's processes to the end; every process is reaped and
 * the job's /dev/shm objects are counted (then removed, as hcomm-run does). */
int kc_job_run(const kc_trial_t *t, const kc_cfg_t *cfg, kc_outcome_t *out);

/* A failed trial's error and warning lines from the ranks' logs; the logs and
 * topology file removed; every rank of the running trial killed (from a
 * signal handler: async-signal-safe). */
void kc_job_show_errors(const kc_trial_t *t, const kc_cfg_t *cfg);
void kc_job_clean(const kc_cfg_t *cfg);
void kc_job_kill_all(void);

/* kc_rank.c: one rank of the trial; returns its exit code. */
int kc_rank_main(const kc_trial_t *t, const kc_cfg_t *cfg, int rank, int id_fd, int rep_fd);

const char *kc_coll_name(kc_coll_t c);
const char *kc_transport_name(kc_transport_t t);

static inline double kc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void kc_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Reads or writes all len bytes; -1 on error or end of file. */
static inline int kc_rw(int fd, void *buf, size_t len, int writing)
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

#endif
