/* launcher.h - who started this process, for hcomm_comm_init_env: rank and
 * size from one launcher's own variables (never one launcher's rank with
 * another's size), and the way its ranks agree on a unique id: through the
 * launcher's key-value store where it has one (PMIx, PMI-1), else a root
 * address derived from its variables (Slurm, torchrun). docs/launchers.md is
 * the user's page. Every read of the environment goes through
 * hc_params_foreign. */
#ifndef HC_BOOTSTRAP_LAUNCHER_H
#define HC_BOOTSTRAP_LAUNCHER_H

#include <stddef.h>

#include "hcomm.h"

typedef enum {
    HC_LAUNCH_HCOMM,    /* hcomm-run, or by hand: HCOMM_RANK, HCOMM_NRANKS */
    HC_LAUNCH_PMIX,     /* a PMIx server: Open MPI's mpirun, srun --mpi=pmix */
    HC_LAUNCH_PMI,      /* PMI-1 on PMI_FD: MPICH's mpirun (hydra), srun --mpi=pmi2 */
    HC_LAUNCH_SLURM,    /* srun without a PMI plugin */
    HC_LAUNCH_TORCHRUN, /* torchrun (torch.distributed.run) */
} hc_launch_kind_t;

#define HC_LAUNCH_ROOT_MAX 280 /* "host:port", host up to 255 bytes */

typedef struct hc_launch {
    hc_launch_kind_t kind;
    const char      *name; /* "torchrun", for the log */
    const char      *vars; /* the variables rank and size came from */
    int              rank, nranks;
    int              local_rank;               /* -1 where the launcher does not say */
    int              kvs;                      /* 1: the id travels through the launcher */
    char             root[HC_LAUNCH_ROOT_MAX]; /* derived root, "" where none */
    const char      *root_from;                /* how root was derived (or why not), for messages */
    int              pmi_fd;                   /* PMI-1: the launcher's socket (PMI_FD), else -1 */
} hc_launch_t;

/* Finds the launcher, in this order: HCOMM_RANK/HCOMM_NRANKS (hcomm_rank and
 * hcomm_nranks, the parsed parameters: -1 when unset), PMIx, PMI-1, Slurm,
 * torchrun. 0; or HCOMM_ERR_INVALID_USAGE (none found: the line names every
 * set of variables looked for) or HCOMM_ERR_INVALID_ARG (a value that is not
 * a rank or a size), with one log line. PMIx is asked for the job's size,
 * which connects to its server. */
hcomm_status_t hc_launch_detect(int hcomm_rank, int hcomm_nranks, hc_launch_t *l);

/* Agrees on a unique id through the launcher's store (l->kvs): rank 0 starts
 * a root on bind_addr (NULL: chosen as hcomm_get_unique_id does) with a fresh
 * secret and publishes the id; the others wait for it, at most timeout
 * seconds. Every rank of the job must call it, as many times. */
hcomm_status_t hc_launch_share_id(const hc_launch_t *l, const char *bind_addr, double timeout,
                                  hcomm_unique_id_t *id);

/* The first host name of a Slurm hostlist ("node[07-09,12],gpu1" gives
 * "node07"): 0, or -1 when list is malformed or the name longer than len-1. */
int hc_launch_hostlist_first(const char *list, char *out, size_t len);

/* The root's port for a Slurm job step: HC_LAUNCH_SLURM_PORT_BASE plus
 * (job * HC_LAUNCH_SLURM_PORT_STRIDE + step) modulo HC_LAUNCH_SLURM_PORT_SPAN.
 * The stride is prime to the span (64 was not: jobs 625 apart shared every
 * port) and spreads neighbours: jobs less than 100 apart never share a port
 * while their steps differ by less than 98. */
#define HC_LAUNCH_SLURM_PORT_STRIDE 8317
#define HC_LAUNCH_SLURM_PORT_BASE 20000
#define HC_LAUNCH_SLURM_PORT_SPAN 10000
int hc_launch_slurm_port(unsigned long job, unsigned long step);

/* Lets go of what detection opened (a PMIx connection); call it once per
 * successful hc_launch_detect, after hc_launch_share_id. */
void hc_launch_release(hc_launch_t *l);

/* The key-value stores, one file each: publish (rank 0) puts val under key,
 * then all meet in a fence; the others then get key into val (len bytes,
 * NUL-terminated). Bounded by timeout seconds; one log line on failure. */
hcomm_status_t hc_launch_pmix_size(int *rank, int *nranks); /* connects */
void           hc_launch_pmix_release(void);                /* disconnects */
hcomm_status_t hc_launch_pmix_exchange(const char *key, char *val, size_t len, int publish,
                                       double timeout);
hcomm_status_t hc_launch_pmi_exchange(int fd, const char *key, char *val, size_t len, int publish,
                                      double timeout);

#endif
