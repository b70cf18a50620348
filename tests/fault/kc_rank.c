/* kc_rank.c - one rank of a kill-campaign trial: takes the trial's
 * environment, joins the communicator, loops the trial's collective until a
 * call fails (the victim signals itself at its moment instead), reports, waits
 * for the parent's go, then checks that the error stuck and aborts. */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/params.h"
#include "hcomm_compress.h"
#include "hcomm_moe.h"
#include "hcomm_stream.h"
#include "kill_campaign.h"

#define KC_MOE_TOPK 2

static const char *const codecs[] = {"onebit", "topk:0.1", "fp16", "bf16"};

typedef struct {
    const kc_trial_t *t;
    hcomm_comm_t      comm;
    int               rank, n;
    float            *send, *recv, *out, *w;
    int32_t          *ids;
    hcomm_compress_t  cst;
    hcomm_moe_t       moe;
    hcomm_stream_t    stream;
} kc_ctx_t;

/* The trial's transport and a debug log (the parent reads which peers this
 * rank connected to), read again here: the parent's copy is older. */
static void rank_env(const kc_trial_t *t, const kc_cfg_t *cfg, int rank)
{
    char path[320];

    unsetenv("HCOMM_TOPO_FILE");
    if (t->transport == KC_MIXED) {
        snprintf(path, sizeof(path), "%s/topo.xml", cfg->dir);
        unsetenv("HCOMM_TRANSPORT");
        setenv("HCOMM_TOPO_FILE", path, 1);
        setenv("HCOMM_NET", "tcp", 1);
    } else {
        setenv("HCOMM_TRANSPORT", t->transport == KC_SHM ? "shm" : "tcp", 1);
    }
    snprintf(path, sizeof(path), "%s/r%d.log", cfg->dir, rank);
    setenv("HCOMM_LOG_FILE", path, 1);
    setenv("HCOMM_LOG_LEVEL", "debug", 1);
    hc_params_reload();
}

static size_t buf_elems(const kc_trial_t *t)
{
    switch (t->coll) {
    case KC_ALLTOALL:
        return t->count * (size_t)t->nranks;
    case KC_MOE:
        return t->count * (size_t)t->variant; /* tokens x hidden */
    default:
        return t->count;
    }
}

static hcomm_status_t op_setup(kc_ctx_t *c)
{
    const kc_trial_t *t = c->t;
    size_t            n = buf_elems(t);

    c->send = malloc(n * sizeof(float));
    c->recv = malloc(n * sizeof(float));
    if (c->send == NULL || c->recv == NULL)
        return HCOMM_ERR_NO_MEMORY;
    for (size_t i = 0; i < n; i++)
        c->send[i] = (float)((i + (size_t)c->rank) % 13);
    if (t->coll == KC_COMPRESSED) {
        hcomm_compress_config_t cfg;
        hcomm_status_t          st = hcomm_compress_parse(codecs[t->variant % 4], &cfg);
        return st != HCOMM_SUCCESS
                   ? st
                   : hcomm_compress_create(c->comm, &cfg, t->count, HCOMM_FLOAT32, &c->cst);
    }
    if (t->coll == KC_STREAM)
        return hcomm_stream_create(&c->stream);
    if (t->coll != KC_MOE)
        return HCOMM_SUCCESS;
    /* 2 experts a rank, top-2 routing drawn per token from the rank and index */
    hcomm_moe_config_t cfg = {2 * c->n, NULL, KC_MOE_TOPK, (size_t)t->variant, HCOMM_FLOAT32};
    c->ids                 = malloc(t->count * KC_MOE_TOPK * sizeof(*c->ids));
    c->w                   = malloc(t->count * KC_MOE_TOPK * sizeof(*c->w));
    c->out                 = malloc(n * sizeof(float));
    if (c->ids == NULL || c->w == NULL || c->out == NULL)
        return HCOMM_ERR_NO_MEMORY;
    for (size_t i = 0; i < t->count * KC_MOE_TOPK; i++) {
        c->ids[i] = (int32_t)((i * 7 + (size_t)c->rank * 3 + i / 5) % (size_t)(2 * c->n));
        c->w[i]   = 0.5f;
    }
    return hcomm_moe_create(c->comm, &cfg, &c->moe);
}

static hcomm_status_t op_run(kc_ctx_t *c)
{
    const kc_trial_t *t = c->t;
    hcomm_moe_recv_t  rv;
    hcomm_status_t    st;

    switch (t->coll) {
    case KC_ALLREDUCE:
        return hcomm_allreduce(c->send, c->recv, t->count, HCOMM_FLOAT32, HCOMM_SUM, c->comm, NULL);
    case KC_ALLTOALL:
        return hcomm_alltoall(c->send, c->recv, t->count, HCOMM_FLOAT32, c->comm, NULL);
    case KC_BROADCAST:
        return hcomm_broadcast(c->send, c->recv, t->count, HCOMM_FLOAT32, t->variant, c->comm,
                               NULL);
    case KC_COMPRESSED:
        return hcomm_allreduce_compressed(c->send, c->recv, t->count, HCOMM_FLOAT32, c->cst,
                                          c->comm, NULL);
    case KC_MOE:
        st = hcomm_moe_dispatch(c->moe, c->send, t->count, c->ids, c->w, &rv);
        return st != HCOMM_SUCCESS ? st : hcomm_moe_combine(c->moe, rv.tokens, c->out);
    case KC_STREAM:
        st = hcomm_allreduce(c->send, c->recv, t->count, HCOMM_FLOAT32, HCOMM_SUM, c->comm,
                             c->stream);
        return st != HCOMM_SUCCESS ? st : hcomm_stream_synchronize(c->stream);
    default:
        return HCOMM_ERR_INVALID_ARG;
    }
}

/* 0, or 7 when the stream's destroy did not return an error after a failure
 * (the stream's error is sticky) or left the stream alive (it may only when
 * its thread is stuck in a task; here its task has ended, as the
 * communicator failed it). */
static int op_teardown(kc_ctx_t *c, hcomm_status_t failed)
{
    int bad = 0;
    if (c->stream != NULL) {
        hcomm_status_t st = hcomm_stream_destroy(c->stream);
        bad               = (failed != HCOMM_SUCCESS && st >= 0) ||
              hcomm_stream_query(c->stream) != HCOMM_ERR_INVALID_ARG; /* freed: not a stream */
    }
    hcomm_compress_destroy(c->cst);
    hcomm_moe_destroy(c->moe);
    free(c->send), free(c->recv), free(c->out), free(c->w), free(c->ids);
    return bad ? 7 : 0;
}

static void report(int fd, int rank, int phase, hcomm_status_t st, int iter, double el)
{
    kc_report_t r = {rank, phase, (int)st, iter, el, kc_now()};
    if (kc_rw(fd, &r, sizeof(r), 1) != 0)
        _exit(3);
}

/* The victim's moment: delay_ms into call iter, this thread signals the
 * process (SIGSTOP stops every thread), after telling the parent when. */
typedef struct {
    const kc_trial_t *t;
    int               rep_fd;
} kc_killer_t;

static void *killer(void *arg)
{
    const kc_killer_t *k = arg;
    kc_sleep_ms(k->t->delay_ms);
    report(k->rep_fd, k->t->victim, KC_SIGNAL, HCOMM_SUCCESS, k->t->iter, 0);
    kill(getpid(), k->t->stop ? SIGSTOP : SIGKILL);
    return NULL;
}

/* Waits (bounded) for the parent's go: a byte, or the pipe closed. */
static int wait_go(int id_fd)
{
    struct pollfd pfd = {id_fd, POLLIN, 0};
    char          go;
    return poll(&pfd, 1, 120 * 1000) == 1 && kc_rw(id_fd, &go, 1, 0) == 0 ? 0 : -1;
}

int kc_rank_main(const kc_trial_t *t, const kc_cfg_t *cfg, int rank, int id_fd, int rep_fd)
{
    static kc_killer_t k;
    hcomm_unique_id_t  id;
    kc_ctx_t           c = {.t = t, .rank = rank, .n = t->nranks};
    hcomm_status_t     st;
    double             deadline;

    rank_env(t, cfg, rank);
    if (kc_rw(id_fd, &id, sizeof(id), 0) != 0)
        return 2;
    st = hcomm_comm_init(&c.comm, t->nranks, &id, rank);
    if (st != HCOMM_SUCCESS) {
        report(rep_fd, rank, KC_INIT, st, 0, 0);
        return 1;
    }
    st = op_setup(&c);
    if (st != HCOMM_SUCCESS) {
        report(rep_fd, rank, KC_INIT, st, 0, 0);
        return 1;
    }
    /* past the parent's limit: it decides what hangs */
    deadline = kc_now() + KC_START_S + cfg->timeout + KC_MARGIN_S + KC_HANG_S + 30;
    for (int it = 0; kc_now() < deadline; it++) {
        if (rank == t->victim && it == t->iter) {
            pthread_t th;
            k.t = t, k.rep_fd = rep_fd;
            if (pthread_create(&th, NULL, killer, &k) != 0)
                killer(&k);
        }
        double t0 = kc_now();
        st        = op_run(&c);
        if (st != HCOMM_SUCCESS) {
            report(rep_fd, rank, KC_FAILED, st, it, kc_now() - t0);
            break;
        }
    }
    if (st == HCOMM_SUCCESS)
        report(rep_fd, rank, KC_NEVER, st, 0, 0);
    if (wait_go(id_fd) != 0)
        return 4;
    /* first the stream: its synchronize may time out a moment before the
     * request it waits for does (both after HCOMM_TIMEOUT), and destroy waits
     * for that request, which fails the communicator */
    int td  = op_teardown(&c, st);
    int bad = hcomm_comm_get_error(c.comm) >= 0; /* the error must be sticky */
    st      = hcomm_comm_abort(c.comm);
    return bad ? 5 : td ? td : st != HCOMM_SUCCESS ? 6 : 0;
}
