/* comm.c - a communicator's life: created (bootstrap, transports, plans,
 * connections), registered while live, failed, freed. The public calls are
 * api/api_comm.c. */
#include "core/comm.h"
#include "core/comm_card.h"
#include "core/exec.h"
#include "core/flight.h"
#include "core/ops.h"
#include "core/stage.h"
#include "core/watch.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "algorithms/select.h"
#include "base/auth.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/params.h"

/* ---- registry of live communicators ---- */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static hcomm_comm_t   *registry;
static size_t          registry_len, registry_cap;
/* Bumped by every add and remove: a thread that validated a comm at the same
 * generation skips the locked search (the hot path of every call). */
unsigned long                               hc_registry_gen = 1; /* __atomic_* only */
__thread hcomm_comm_t hc_registry_last      HC_TLS_FAST;
__thread unsigned long hc_registry_last_gen HC_TLS_FAST;

static int registry_add(hcomm_comm_t c)
{
    int rc = 0;
    pthread_mutex_lock(&registry_lock);
    if (registry_len == registry_cap) {
        size_t cap = registry_cap ? 2 * registry_cap : 16;
        void  *p   = realloc(registry, cap * sizeof(*registry));
        if (p == NULL)
            rc = -1;
        else
            registry = p, registry_cap = cap;
    }
    if (rc == 0)
        registry[registry_len++] = c;
    __atomic_fetch_add(&hc_registry_gen, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&registry_lock);
    return rc;
}

static void registry_remove(hcomm_comm_t c)
{
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < registry_len; i++)
        if (registry[i] == c) {
            registry[i] = registry[--registry_len];
            break;
        }
    __atomic_fetch_add(&hc_registry_gen, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&registry_lock);
}

/* Under registry_lock. */
static int registry_has(hcomm_comm_t comm)
{
    for (size_t i = 0; i < registry_len; i++)
        if (registry[i] == comm)
            return 1;
    return 0;
}

int hc_comm_is_live_search(hcomm_comm_t comm)
{
    if (comm == NULL)
        return 0;
    pthread_mutex_lock(&registry_lock);
    int live = registry_has(comm);
    if (live) {
        hc_registry_last     = comm;
        hc_registry_last_gen = __atomic_load_n(&hc_registry_gen, __ATOMIC_SEQ_CST);
    }
    pthread_mutex_unlock(&registry_lock);
    return live;
}

int hc_comm_hold_if_live(hcomm_comm_t comm)
{
    if (comm == NULL)
        return 0;
    pthread_mutex_lock(&registry_lock);
    int live = registry_has(comm);
    if (live) /* before destroy's unregistering, which then waits for it */
        __atomic_add_fetch(&comm->held, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&registry_lock);
    return live;
}

hcomm_status_t hc_comm_check(hcomm_comm_t comm, const char *what)
{
    if (!hc_comm_is_live(comm)) {
        hc_error(COLL, "%s: communicator %p is NULL, destroyed or aborted", what, (void *)comm);
        return HCOMM_ERR_INVALID_COMM;
    }
    if (comm->error != HCOMM_SUCCESS || __atomic_load_n(&comm->revoked, __ATOMIC_RELAXED)) {
        hcomm_status_t st = comm->error != HCOMM_SUCCESS ? comm->error : HCOMM_ERR_REVOKED;
        hc_error(COLL, "%s: communicator failed earlier (%s); destroy or abort it", what,
                 hcomm_status_str(st));
        return st;
    }
    return HCOMM_SUCCESS;
}

void hc_comm_fail(hcomm_comm_t comm, hcomm_status_t status)
{
    if (comm->error != HCOMM_SUCCESS)
        return;
    __atomic_store_n(&comm->error, status, __ATOMIC_RELAXED); /* the watch thread reads it */
    hc_comm_tl_close(comm);
    /* what ran until now reaches the trace file, whatever happens next; a
     * flight recorder (hc_ops_snapshot) would be written here too */
    if (comm->trace != NULL)
        hc_trace_flush(comm);
    hc_flight_write(comm, hcomm_status_str(status));
}

void hc_comm_set_failed(hcomm_comm_t comm, hcomm_status_t status)
{
    hc_comm_lock(comm);
    hc_comm_fail(comm, status);
    hc_comm_unlock(comm);
}

hcomm_status_t hc_comm_root_start(hcomm_comm_t comm, hcomm_unique_id_t *id)
{
    uint8_t     cookie[16];
    char        bind[80];
    const char *ip = hc_bootstrap_local_ip(comm->bs);
    snprintf(bind, sizeof(bind), strchr(ip, ':') ? "[%s]:0" : "%s:0", ip);
    hcomm_status_t st = hc_bootstrap_random(cookie, sizeof(cookie));
    return st != HCOMM_SUCCESS ? st : hc_bootstrap_root_start(bind, cookie, id);
}

int hc_comm_rank(hcomm_comm_t comm)
{
    return comm->rank;
}

int hc_comm_nranks(hcomm_comm_t comm)
{
    return comm->nranks;
}

uint64_t hc_comm_serial(hcomm_comm_t comm)
{
    return comm->serial;
}

/* ---- peer information ---- */

/* Same host_hash = same kernel, /dev/shm, network and process-id namespaces. */
static void comm_self_info(hc_peer_info_t *self, int rank)
{
    memset(self, 0, sizeof(*self));
    self->host_hash = hc_topo_host_identity(self->hostname, sizeof(self->hostname));
    self->pid       = (int32_t)getpid();
    self->rank      = rank;
    /* A fresh challenge for the hellos of this communicator's connections to
     * us: a zero one (getrandom failed, logged) still authenticates, only
     * without freshness. */
    (void)hc_auth_random(self->nonce, sizeof(self->nonce));
}

/* More local ranks than CPUs: a spinning rank would hold the core the rank it
 * waits for needs, so waits yield at once (as MPI's yield-when-idle). */
static void comm_set_spin(hcomm_comm_t c)
{
    cpu_set_t set;
    int       ncpu = 0, local = 0;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        ncpu = CPU_COUNT(&set);
    /* by hostname, not host_hash: ranks in other network namespaces or on
     * virtual nodes of this host still share its CPUs */
    for (int r = 0; r < c->nranks && c->peers != NULL; r++)
        local += strcmp(c->peers[r].hostname, c->peers[c->rank].hostname) == 0;
    c->spin = c->pollable ? hc_params_get()->spin_count_net : hc_params_get()->spin_count;
    if (ncpu > 0 && local > ncpu) {
        c->spin = 0;
        hc_info(INIT, "%d local ranks on %d CPUs: waits yield the CPU", local, ncpu);
    }
}

/* Where this host's discovery is shared among the communicator's ranks on it. */
static void comm_topo_share_name(hcomm_comm_t c, const hc_peer_info_t *self, char *name,
                                 size_t size)
{
    char pub[17];
    if (hc_auth_public_name(c->cookie, HC_AUTH_SHM_NAMES, pub, sizeof(pub)) != 0)
        snprintf(pub, sizeof(pub), "%d", (int)getpid()); /* no sharing, still no clash */
    snprintf(name, size, "/hcomm-%s-topo-%016llx", pub, (unsigned long long)self->host_hash);
}

/* This rank's place in its host; without discovery the model still knows the
 * host. *owner: this rank published the host's record (removed after init). */
static void comm_self_topo(hcomm_comm_t c, comm_card_t *card, const char *share, int *owner)
{
    if (hc_topo_discover(&card->topo, share, c->timeout, owner) == HCOMM_SUCCESS)
        return;
    hc_warn(INIT, "topology discovery failed: this rank is modelled by host only");
    memset(&card->topo, 0, sizeof(card->topo));
    snprintf(card->topo.hostname, sizeof(card->topo.hostname), "%s", card->info.hostname);
    card->topo.numa = -1;
}

/* The model and plans from every rank's discovery (or the topology file),
 * which may re-home peers onto virtual nodes before transports are picked. */
static hcomm_status_t comm_topo_from_cards(hcomm_comm_t c, comm_card_t *cards)
{
    hc_rank_topo_t *all   = calloc((size_t)c->nranks, sizeof(*all));
    hc_peer_info_t *infos = calloc((size_t)c->nranks, sizeof(*infos));
    hcomm_status_t  st    = HCOMM_ERR_NO_MEMORY;
    if (all != NULL && infos != NULL) {
        for (int r = 0; r < c->nranks; r++) {
            if (c->parent != NULL)
                cards[r].info.host_hash = c->parent->host_ids[r];
            all[r]           = cards[r].topo;
            all[r].host_hash = cards[r].info.host_hash; /* one identity for both */
            infos[r]         = cards[r].info;
        }
        st = hc_comm_topo_setup(c, all, infos);
        for (int r = 0; r < c->nranks && st == HCOMM_SUCCESS; r++)
            cards[r].info.host_hash = infos[r].host_hash;
    }
    free(all);
    free(infos);
    return st;
}

/* Ranks that differ in a setting that shapes schedules would hang in their
 * first collective: every rank names the first such setting (against rank 0)
 * and all fail alike, since all see the same cards. */
static hcomm_status_t comm_check_agreed(hcomm_comm_t c, const comm_card_t *cards)
{
    const comm_card_t *me = &cards[c->rank];
    char               val[HC_PARAMS_VALUE_MAX];

    for (int r = 1; r < c->nranks; r++)
        if (cards[r].nagreed != cards[0].nagreed) {
            hc_error(INIT,
                     "ranks 0 and %d run different hcomm builds (%d and %d shared "
                     "settings)",
                     r, (int)cards[0].nagreed, (int)cards[r].nagreed);
            return HCOMM_ERR_INVALID_ARG;
        }
    for (int i = 0; i < me->nagreed; i++)
        for (int r = 1; r < c->nranks; r++) {
            if (cards[r].agreed[i] == cards[0].agreed[i])
                continue;
            hc_params_agreed_value(hc_params_get(), i, val, sizeof(val));
            hc_error(INIT,
                     "HCOMM_%s differs between rank 0 and rank %d (here, rank %d: %s); "
                     "every rank must set it alike",
                     hc_params_agreed_name(i), r, c->rank, val);
            return HCOMM_ERR_INVALID_ARG;
        }
    return HCOMM_SUCCESS;
}

static hcomm_status_t comm_watch_start(hcomm_comm_t c, const comm_card_t *cards)
{
    hc_bootstrap_wire_addr_t *addrs = calloc((size_t)c->nranks, sizeof(*addrs));
    if (addrs == NULL)
        return HCOMM_ERR_NO_MEMORY;
    for (int r = 0; r < c->nranks; r++)
        addrs[r] = cards[r].watch;
    hcomm_status_t st = hc_watch_start(c, addrs);
    free(addrs);
    return st;
}

static hcomm_status_t comm_setup(hcomm_comm_t c, const hcomm_unique_id_t *id)
{
    double         t[7];
    char           share[64];
    int            share_owner = 0;
    t[6]                       = hc_clock_now();
    hcomm_status_t st = hc_bootstrap_init(id, c->nranks, c->rank, c->timeout, &c->bs);
    if (st != HCOMM_SUCCESS)
        return st;
    memcpy(c->cookie, hc_bootstrap_cookie(c->bs), sizeof(c->cookie));

    comm_card_t *cards = calloc((size_t)c->nranks, sizeof(*cards));
    c->peers           = calloc((size_t)c->nranks, sizeof(*c->peers));
    c->links           = calloc((size_t)c->nranks, sizeof(*c->links));
    if (cards == NULL || c->peers == NULL || c->links == NULL) {
        free(cards);
        return HCOMM_ERR_NO_MEMORY;
    }
    t[0] = hc_clock_now();
    comm_self_info(&cards[c->rank].info, c->rank);
    comm_topo_share_name(c, &cards[c->rank].info, share, sizeof(share));
    comm_self_topo(c, &cards[c->rank], share, &share_owner);
    t[1] = hc_clock_now();
    st   = hc_comm_tl_open(c, &cards[c->rank]);
    if (st == HCOMM_SUCCESS)
        st = hc_watch_open(c, &cards[c->rank].watch);
    t[2] = hc_clock_now();
    cards[c->rank].nagreed =
        hc_params_agreed_digests(hc_params_get(), cards[c->rank].agreed, HC_PARAMS_AGREED_MAX);
    /* the tuning table this process selects with (read once), not the file now */
    int tuning = hc_params_agreed_index("TUNING_FILE");
    if (tuning >= 0 && tuning < cards[c->rank].nagreed)
        cards[c->rank].agreed[tuning] = hc_tuning_digest();
    if (st == HCOMM_SUCCESS && cards[c->rank].nagreed < 0)
        st = HCOMM_ERR_INVALID_ARG;
    if (st == HCOMM_SUCCESS)
        st = hc_bootstrap_allgather(c->bs, cards, sizeof(*cards));
    if (st == HCOMM_SUCCESS)
        st = comm_check_agreed(c, cards);
    if (st == HCOMM_SUCCESS)
        st = comm_watch_start(c, cards);
    t[3] = hc_clock_now();
    if (st == HCOMM_SUCCESS)
        st = comm_topo_from_cards(c, cards);
    t[4] = hc_clock_now();
    if (st == HCOMM_SUCCESS) {
        for (int r = 0; r < c->nranks; r++)
            c->peers[r] = cards[r].info;
        st = hc_comm_tl_choose(c, cards); /* no connection yet: each on first use */
    }
    free(cards);
    if (st == HCOMM_SUCCESS)
        st = hc_bootstrap_barrier(c->bs);
    if (share_owner) /* every rank is past discovery, or init failed */
        hc_topo_share_remove(share);
    t[5] = hc_clock_now();
    hc_debug(INIT,
             "init took %.1f ms: bootstrap %.1f, discovery %.1f, transports %.1f, exchange "
             "%.1f, model and plans %.1f, choice and barrier %.1f",
             (t[5] - t[6]) * 1e3, (t[0] - t[6]) * 1e3, (t[1] - t[0]) * 1e3, (t[2] - t[1]) * 1e3,
             (t[3] - t[2]) * 1e3, (t[4] - t[3]) * 1e3, (t[5] - t[4]) * 1e3);
    comm_set_spin(c);
    return st;
}

void hc_comm_unregister(hcomm_comm_t comm)
{
    registry_remove(comm);
}

int hc_comm_reregister(hcomm_comm_t comm)
{
    return registry_add(comm);
}

/* Polls every millisecond: the wait is rare and short. */
int hc_comm_wait_released(hcomm_comm_t c)
{
    const struct timespec nap      = {0, 1000000L};
    double                deadline = hc_clock_now() + c->timeout;

    for (;;) {
        /* under the lock: a stream's thread drops its hold inside it, and
         * must have let go of it before the comm (and its lock) is freed */
        hc_comm_lock(c);
        int held = __atomic_load_n(&c->held, __ATOMIC_ACQUIRE);
        hc_comm_unlock(c);
        if (held == 0)
            return 0;
        if (hc_clock_now() > deadline) {
            hc_error(INIT,
                     "communicator destroyed while streams or a revoke still hold it (%d "
                     "after %g s); not freed: it stays valid, destroy or abort it again once "
                     "they let go",
                     held, c->timeout);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
}

void hc_comm_free(hcomm_comm_t c)
{
    hc_watch_close(c);
    hc_watch_shrink_free(c);
    hc_health_free(c);
    free(c->verdict);
    hc_trace_close(c);
    hc_ops_fini(c);
    hc_comm_tl_close(c);
    hc_plans_free(&c->plans);
    if (c->bs != NULL)
        hc_bootstrap_destroy(c->bs);
    hc_comm_cache_clear(c);
    while (c->req_free != NULL) {
        hcomm_request_t req = c->req_free;
        c->req_free         = req->next;
        hc_exec_release(req);
        free(req);
    }
    free(c->scratch);
    hc_stage_spare_free(c);
    free(c->peers);
    free(c->links);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* The last step of init (HCOMM_WARMUP): an 8-byte float32 sum allreduce, the
 * shape of the first call most training programs make, through the path a
 * user's call takes. It connects the pairs that path uses, builds its schedule
 * and touches its buffers (a first touch of a shared page costs a fault, and
 * more under some hypervisors), so the first collective after init costs what
 * later ones do; and it checks the data path end to end once. */
static hcomm_status_t comm_warm(hcomm_comm_t c)
{
    float          v[2] = {1.0f, (float)(c->rank & 1)}; /* sums: ranks, odd ranks */
    hc_coll_args_t a    = {.coll     = HC_COLL_ALLREDUCE,
                           .count    = 2,
                           .dtype    = HCOMM_FLOAT32,
                           .op       = HCOMM_SUM,
                           .in_place = 1};
    double         t0   = hc_clock_now();
    c->ops_uncounted    = 1; /* the program's first collective stays #1 */
    hcomm_status_t st   = hc_coll_issue(c, &a, v, v, NULL);
    c->ops_uncounted    = 0;
    if (st == HCOMM_SUCCESS && (v[0] != (float)c->nranks || v[1] != (float)(c->nranks / 2))) {
        hc_error(INIT,
                 "init's check allreduce returned {%g, %g} where {%d, %d} was due: the "
                 "data path between the ranks is broken",
                 (double)v[0], (double)v[1], c->nranks, c->nranks / 2);
        return HCOMM_ERR_PROTOCOL;
    }
    hc_debug(INIT, "warm-up allreduce: %.1f ms, %d peers connected", (hc_clock_now() - t0) * 1e3,
             c->nconnected);
    return st;
}

hcomm_status_t hc_comm_create(hcomm_comm_t *comm_p, int nranks, const hcomm_unique_id_t *id,
                              int rank, const hc_comm_parent_t *parent)
{
    const hc_params_t *p = hc_params_get();

    if (comm_p == NULL || id == NULL) {
        hc_error(INIT, "hcomm_comm_init: NULL %s", comm_p == NULL ? "comm pointer" : "unique id");
        return HCOMM_ERR_INVALID_ARG;
    }
    if (nranks < 1 || rank < 0 || rank >= nranks) {
        hc_error(INIT, "hcomm_comm_init: rank %d is not in [0, %d)", rank, nranks);
        return HCOMM_ERR_INVALID_RANK;
    }
    /* the whole check, before anything is allocated or connected */
    if (hc_bootstrap_id_check(id, NULL) != HCOMM_SUCCESS)
        return HCOMM_ERR_INVALID_ARG;
    hcomm_comm_t c = calloc(1, sizeof(*c));
    if (c == NULL)
        return HCOMM_ERR_NO_MEMORY;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&c->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    static uint64_t serials;
    c->serial   = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
    c->rank    = rank;
    c->nranks  = nranks;
    c->parent   = parent;
    c->timeout = p->timeout;
    hc_log_set_rank(rank);

    hcomm_status_t st = hc_ops_init(c);
    if (st == HCOMM_SUCCESS)
        st = comm_setup(c, id);
    c->parent = NULL;
    if (st == HCOMM_SUCCESS) {
        hc_trace_open(c); /* before calibration and warm-up: they are operations too */
        hc_request_prefill(c);
    }
    if (st == HCOMM_SUCCESS && registry_add(c) != 0)
        st = HCOMM_ERR_NO_MEMORY;
    else if (st == HCOMM_SUCCESS && (st = hc_comm_calibrate(c)) != HCOMM_SUCCESS)
        registry_remove(c);
    else if (st == HCOMM_SUCCESS && p->warmup && (st = comm_warm(c)) != HCOMM_SUCCESS)
        registry_remove(c);
    if (st != HCOMM_SUCCESS) {
        hc_error(INIT, "rank %d of %d: init failed: %s", rank, nranks, hcomm_status_str(st));
        hc_comm_free(c);
        return st;
    }
    hc_info(INIT, "rank %d of %d ready", rank, nranks);
    *comm_p = c;
    return HCOMM_SUCCESS;
}

