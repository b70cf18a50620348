/* launcher.c - which launcher started this process, and how its ranks agree
 * on a unique id (launcher.h; docs/launchers.md). */
#include "bootstrap/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/params.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_root.h"

/* A launcher's variable, NULL when unset or empty. */
static const char *env(const char *name)
{
    const char *v = hc_params_foreign(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* s as a decimal integer in [min, max] and nothing else: 0, or -1. */
static int parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    if (s == NULL || s[0] < '0' || s[0] > '9')
        return -1;
    errno  = 0;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || errno != 0 || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Rank and size from one launcher's pair of variables. */
static hcomm_status_t rank_size(hc_launch_t *l, const char *rvar, const char *nvar)
{
    const char *r = env(rvar), *n = env(nvar);
    long        rank, size;
    if (parse_long(n, 1, HC_BOOTSTRAP_MAX_RANKS, &size) != 0 ||
        parse_long(r, 0, size - 1, &rank) != 0) {
        hc_error(BOOT, "%s launch: %s=%s and %s=%s are not a rank below a size of 1 to %d", l->name,
                 rvar, r ? r : "", nvar, n ? n : "", HC_BOOTSTRAP_MAX_RANKS);
        return HCOMM_ERR_INVALID_ARG;
    }
    l->rank   = (int)rank;
    l->nranks = (int)size;
    return HCOMM_SUCCESS;
}

static void local_rank(hc_launch_t *l, const char *var)
{
    long v;
    if (parse_long(env(var), 0, 1L << 24, &v) == 0)
        l->local_rank = (int)v;
}

int hc_launch_hostlist_first(const char *list, char *out, size_t len)
{
    size_t n = 0;
    if (list == NULL || len == 0)
        return -1;
    for (const char *p = list; *p != '\0' && *p != ',';) {
        if (*p == '[') { /* a range: its first number, zero padding kept */
            size_t k = strspn(p + 1, "0123456789");
            if (k == 0 || (p[1 + k] != ',' && p[1 + k] != '-' && p[1 + k] != ']'))
                return -1;
            if (n + k >= len)
                return -1;
            memcpy(out + n, p + 1, k);
            n += k;
            const char *close = strchr(p, ']');
            if (close == NULL)
                return -1;
            p = close + 1;
            continue;
        }
        if (*p == ']' || *p == ' ' || n + 1 >= len)
            return -1;
        out[n++] = *p++;
    }
    if (n == 0)
        return -1;
    out[n] = '\0';
    return 0;
}

int hc_launch_slurm_port(unsigned long job, unsigned long step)
{
    return HC_LAUNCH_SLURM_PORT_BASE +
           (int)((job % HC_LAUNCH_SLURM_PORT_SPAN * HC_LAUNCH_SLURM_PORT_STRIDE + step) %
                 HC_LAUNCH_SLURM_PORT_SPAN);
}

/* Slurm's step ids at and above this are its batch, extern and interactive
 * steps: a batch script's shell is no task of a parallel step. */
#define SLURM_STEP_SPECIAL 0xfffffff0ul

static int slurm_task_step(void)
{
    long step;
    return parse_long(env("SLURM_STEP_ID"), 0, 0x7fffffffL, &step) == 0 &&
           (unsigned long)step < SLURM_STEP_SPECIAL;
}

/* srun without a PMI plugin: the root on the step's first host, on a port
 * from the job and step ids. */
static void slurm_root(hc_launch_t *l)
{
    const char *list = env("SLURM_STEP_NODELIST"), *job = env("SLURM_JOB_ID");
    char        host[256];
    long        j, s;
    l->root_from = "Slurm: the first host of SLURM_STEP_NODELIST, a port from SLURM_JOB_ID and "
                   "SLURM_STEP_ID";
    if (list == NULL) {
        list         = env("SLURM_JOB_NODELIST");
        l->root_from = "Slurm: the first host of SLURM_JOB_NODELIST, a port from SLURM_JOB_ID "
                       "and SLURM_STEP_ID";
    }
    if (list == NULL || hc_launch_hostlist_first(list, host, sizeof(host)) != 0) {
        l->root_from = "SLURM_STEP_NODELIST and SLURM_JOB_NODELIST are unset or malformed";
        return;
    }
    if (job == NULL)
        job = env("SLURM_JOBID");
    if (parse_long(job, 0, 0x7fffffffL, &j) != 0 ||
        parse_long(env("SLURM_STEP_ID"), 0, 0x7fffffffL, &s) != 0) {
        l->root_from = "SLURM_JOB_ID is unset or malformed";
        return;
    }
    snprintf(l->root, sizeof(l->root), "%s:%d", host, hc_launch_slurm_port(j, s));
}

/* torchrun: its agent's store holds MASTER_PORT, so the root takes the next. */
static void torchrun_root(hc_launch_t *l)
{
    const char *addr = env("MASTER_ADDR");
    long        port;
    if (parse_long(env("MASTER_PORT"), 1, 65534, &port) != 0) {
        l->root_from = "MASTER_PORT is not a port below 65535";
        return;
    }
    int v6 = strchr(addr, ':') != NULL && addr[0] != '[';
    if ((size_t)snprintf(l->root, sizeof(l->root), v6 ? "[%s]:%ld" : "%s:%ld", addr, port + 1) >=
        sizeof(l->root)) {
        l->root[0]   = '\0';
        l->root_from = "MASTER_ADDR is too long";
        return;
    }
    l->root_from = "torchrun: MASTER_ADDR:MASTER_PORT+1";
}

/* The variables each launcher needs, in the order they are tried. */
static const char *const launch_vars[][5] = {
    {"HCOMM_RANK", "HCOMM_NRANKS", NULL},
    {"PMIX_RANK", "PMIX_NAMESPACE", NULL},
    {"PMI_RANK", "PMI_SIZE", NULL},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_ID", NULL},
    {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", NULL},
};
#define NLAUNCH (sizeof(launch_vars) / sizeof(launch_vars[0]))

static int all_set(const char *const *vars)
{
    for (; *vars != NULL; vars++)
        if (env(*vars) == NULL)
            return 0;
    return 1;
}

static hcomm_status_t detect_slurm(hc_launch_t *l)
{
    l->kind = HC_LAUNCH_SLURM, l->name = "Slurm", l->vars = "SLURM_PROCID, SLURM_NTASKS";
    l->kvs = 0;
    local_rank(l, "SLURM_LOCALID");
    slurm_root(l);
    return rank_size(l, "SLURM_PROCID", "SLURM_NTASKS");
}

static hcomm_status_t detect_pmix(hc_launch_t *l)
{
    l->kind = HC_LAUNCH_PMIX, l->name = "PMIx", l->kvs = 1;
    l->vars = "PMIx (rank and job size from its server)";
    local_rank(l, "OMPI_COMM_WORLD_LOCAL_RANK");
    if (hc_launch_pmix_size(&l->rank, &l->nranks) == HCOMM_SUCCESS)
        return HCOMM_SUCCESS;
    /* no PMIx to talk to: Open MPI's own pair still gives rank and size */
    if (env("OMPI_COMM_WORLD_RANK") != NULL && env("OMPI_COMM_WORLD_SIZE") != NULL) {
        l->name = "Open MPI", l->kvs = 0;
        l->vars      = "OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE";
        l->root_from = "PMIx is unusable here (logged above)";
        return rank_size(l, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
    }
    /* srun --mpi=pmix whose server this process cannot reach: Slurm's own */
    if (all_set(launch_vars[3]) && slurm_task_step())
        return detect_slurm(l);
    hc_error(BOOT, "PMIx launch (PMIX_RANK, PMIX_NAMESPACE) but its server cannot be asked the "
                   "job's size (logged above), and no other variable of that launcher gives it");
    return HCOMM_ERR_INVALID_USAGE;
}

static hcomm_status_t detect_pmi(hc_launch_t *l)
{
    long fd;
    l->kind = HC_LAUNCH_PMI, l->name = "PMI-1", l->vars = "PMI_RANK, PMI_SIZE";
    hcomm_status_t st = rank_size(l, "PMI_RANK", "PMI_SIZE");
    if (st != HCOMM_SUCCESS)
        return st;
    local_rank(l, "MPI_LOCALRANKID");
    if (parse_long(env("PMI_FD"), 0, 1L << 20, &fd) == 0 && fcntl((int)fd, F_GETFD) != -1) {
        l->pmi_fd = (int)fd;
        l->kvs    = 1;
    } else {
        l->root_from = "no usable PMI_FD: only the PMI-1 wire protocol on PMI_FD is spoken";
    }
    return HCOMM_SUCCESS;
}

/* One line: every set of variables looked for, and those set in part. */
static void log_none(void)
{
    char   part[256] = "";
    size_t n         = 0;
    for (size_t i = 0; i < NLAUNCH; i++)
        for (const char *const *v = launch_vars[i]; *v != NULL; v++)
            if (env(*v) != NULL && n < sizeof(part))
                n += (size_t)snprintf(part + n, sizeof(part) - n, "%s%s", n ? ", " : "", *v);
    hc_error(BOOT,
             "no launcher found: looked for HCOMM_RANK and HCOMM_NRANKS (hcomm-run), PMIX_RANK "
             "and PMIX_NAMESPACE (PMIx: Open MPI's mpirun, srun --mpi=pmix), PMI_RANK and "
             "PMI_SIZE (PMI-1: MPICH's mpirun), SLURM_PROCID, SLURM_NTASKS and SLURM_STEP_ID "
             "(srun), RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (torchrun)%s%s%s",
             n ? "; set without the rest of their launcher's: " : "", part,
             n ? " (rank and size come from one launcher, never two)" : "");
}

static hcomm_status_t detect_torchrun(hc_launch_t *l)
{
    l->kind = HC_LAUNCH_TORCHRUN, l->name = "torchrun", l->vars = "RANK, WORLD_SIZE";
    local_rank(l, "LOCAL_RANK");
    torchrun_root(l);
    return rank_size(l, "RANK", "WORLD_SIZE");
}

static hcomm_status_t detect(int hrank, int hnranks, hc_launch_t *l)
{
    if (env("HCOMM_RANK") != NULL || env("HCOMM_NRANKS") != NULL) {
        l->kind = HC_LAUNCH_HCOMM, l->name = "hcomm-run", l->vars = "HCOMM_RANK, HCOMM_NRANKS";
        if (hnranks < 1 || hnranks > HC_BOOTSTRAP_MAX_RANKS || hrank < 0 || hrank >= hnranks) {
            const char *r = env("HCOMM_RANK"), *n = env("HCOMM_NRANKS"); /* as given */
            hc_error(BOOT,
                     "HCOMM_RANK=%s and HCOMM_NRANKS=%s: set both, a rank below a size "
                     "of 1 to %d",
                     r ? r : "(unset)", n ? n : "(unset)", HC_BOOTSTRAP_MAX_RANKS);
            return HCOMM_ERR_INVALID_ARG;
        }
        l->rank = hrank, l->nranks = hnranks;
        l->root_from = "HCOMM_RANK and HCOMM_NRANKS need HCOMM_ROOT beside them (hcomm-run "
                       "sets all three)";
        return HCOMM_SUCCESS;
    }
    /* torchrun's agent (TORCHELASTIC_RUN_ID) run by srun or mpirun, one per
     * node: its workers inherit the outer launcher's variables too, and
     * the innermost launcher is the one that counts */
    if (all_set(launch_vars[4]) && env("TORCHELASTIC_RUN_ID") != NULL)
        return detect_torchrun(l);
    if (all_set(launch_vars[1]))
        return detect_pmix(l);
    if (all_set(launch_vars[2]))
        return detect_pmi(l);
    if (all_set(launch_vars[3]) && slurm_task_step())
        return detect_slurm(l);
    if (all_set(launch_vars[4]))
        return detect_torchrun(l);
    log_none();
    return HCOMM_ERR_INVALID_USAGE;
}

hcomm_status_t hc_launch_detect(int hrank, int hnranks, hc_launch_t *l)
{
    memset(l, 0, sizeof(*l));
    l->local_rank     = -1;
    l->pmi_fd         = -1;
    l->root_from      = "";
    hcomm_status_t st = detect(hrank, hnranks, l);
    if (st == HCOMM_SUCCESS)
        hc_info(BOOT, "launcher %s: rank %d of %d (local rank %d: -1 unknown) from %s; %s%s%s",
                l->name, l->rank, l->nranks, l->local_rank, l->vars,
                l->kvs ? "the unique id travels through it" : "root ",
                l->kvs ? "" : (l->root[0] ? l->root : "not derived"),
                l->kvs || !l->root[0] ? "" : " unless HCOMM_ROOT is set");
    return st;
}

static void hex_encode(const uint8_t *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i]     = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int hex_decode(const char *s, uint8_t *b, size_t n)
{
    if (strlen(s) != 2 * n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        b[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

static hcomm_status_t exchange(const hc_launch_t *l, const char *key, char *val, size_t len,
                               double timeout)
{
    if (l->kind == HC_LAUNCH_PMIX)
        return hc_launch_pmix_exchange(key, val, len, l->rank == 0, timeout);
    return hc_launch_pmi_exchange(l->pmi_fd, key, val, len, l->rank == 0, timeout);
}

void hc_launch_release(hc_launch_t *l)
{
    if (l->kind == HC_LAUNCH_PMIX && l->kvs)
        hc_launch_pmix_release();
    l->kvs = 0;
}

#define ROOT_FAILED "failed"

hcomm_status_t hc_launch_share_id(const hc_launch_t *l, const char *bind_addr, double timeout,
                                  hcomm_unique_id_t *id)
{
    static unsigned   seq; /* every rank calls as often: the n-th call's key */
    char              key[32], val[2 * HCOMM_UNIQUE_ID_BYTES + 1];
    uint8_t           cookie[16];
    hcomm_unique_id_t mine;
    hcomm_status_t    st = HCOMM_SUCCESS, xst;

    snprintf(key, sizeof(key), "hcomm-uid-%u", __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
    if (l->rank == 0) {
        st = hc_bootstrap_random(cookie, sizeof(cookie));
        if (st == HCOMM_SUCCESS)
            st = hc_bootstrap_root_start(bind_addr, cookie, &mine);
        /* the others wait in the fence: tell them rather than let them time out */
        if (st == HCOMM_SUCCESS)
            hex_encode((const uint8_t *)&mine, sizeof(mine), val);
        else
            snprintf(val, sizeof(val), ROOT_FAILED);
    }
    xst = exchange(l, key, val, sizeof(val), timeout);
    if (st != HCOMM_SUCCESS || xst != HCOMM_SUCCESS)
        return st != HCOMM_SUCCESS ? st : xst;
    if (l->rank == 0) {
        *id = mine;
    } else if (strcmp(val, ROOT_FAILED) == 0) {
        hc_error(BOOT, "%s: rank 0 could not start the rendezvous root (its log says why)",
                 l->name);
        return HCOMM_ERR_REMOTE;
    } else if (hex_decode(val, (uint8_t *)id, sizeof(*id)) != 0) {
        hc_error(BOOT, "%s: the unique id under %s is not %zu hex digits", l->name, key,
                 2 * sizeof(*id));
        return HCOMM_ERR_PROTOCOL;
    }
    hc_debug(BOOT, "%s: unique id shared as %s", l->name, key);
    return HCOMM_SUCCESS;
}

#ifndef HC_HAVE_PMIX
hcomm_status_t hc_launch_pmix_size(int *rank, int *nranks)
{
    (void)rank, (void)nranks;
    hc_info(BOOT, "PMIx: this build has none (configure found no pmix.h: libpmix-dev)");
    return HCOMM_ERR_UNSUPPORTED;
}

void hc_launch_pmix_release(void)
{
}

hcomm_status_t hc_launch_pmix_exchange(const char *key, char *val, size_t len, int publish,
                                       double timeout)
{
    (void)key, (void)val, (void)len, (void)publish, (void)timeout;
    return HCOMM_ERR_UNSUPPORTED;
}
#endif
