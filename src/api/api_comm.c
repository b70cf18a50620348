/* api_comm.c - the public calls of a communicator's life: unique ids, init
 * (from an id or the environment), destroy, abort, and what a live one tells. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/auth.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/params.h"
#include "base/sock.h"
#include "bootstrap/launcher.h"
#include "core/comm.h"
#include "core/flight.h"
#include "core/group.h"
#include "core/health.h"
#include "core/watch.h"
#include "overlap/overlap.h"

hcomm_status_t hcomm_comm_init(hcomm_comm_t *comm, int nranks, const hcomm_unique_id_t *id,
                               int rank)
{
    return hc_comm_create(comm, nranks, id, rank, NULL);
}

hcomm_status_t hcomm_comm_grow(hcomm_comm_t comm, int nranks, const hcomm_unique_id_t *id, int rank,
                               hcomm_comm_t *newcomm)
{
    if (comm != NULL && !hc_comm_is_live(comm)) {
        hc_error(INIT, "hcomm_comm_grow: communicator %p is destroyed or aborted", (void *)comm);
        return HCOMM_ERR_INVALID_COMM;
    }
    if (id == NULL || newcomm == NULL) {
        hc_error(INIT, "hcomm_comm_grow: NULL %s", id == NULL ? "id" : "newcomm");
        return HCOMM_ERR_INVALID_ARG;
    }
    if (comm != NULL ? nranks <= comm->nranks : rank < 0 || rank >= nranks) {
        if (comm != NULL)
            hc_error(INIT, "hcomm_comm_grow: %d ranks do not grow a communicator of %d", nranks,
                     comm->nranks);
        else
            hc_error(INIT, "hcomm_comm_grow: new rank %d is not in [0, %d)", rank, nranks);
        return HCOMM_ERR_INVALID_ARG;
    }
    /* members keep their numbers; everyone discovers the new set afresh */
    return hc_comm_create(newcomm, nranks, id, comm != NULL ? comm->rank : rank, NULL);
}

hcomm_status_t hcomm_get_unique_id(hcomm_unique_id_t *id)
{
    uint8_t cookie[16];
    if (id == NULL) {
        hc_error(INIT, "hcomm_get_unique_id: NULL id");
        return HCOMM_ERR_INVALID_ARG;
    }
    hcomm_status_t st = hc_bootstrap_random(cookie, sizeof(cookie));
    if (st != HCOMM_SUCCESS)
        return st;
    return hc_bootstrap_root_start(NULL, cookie, id);
}

/* A cookie from a string (HCOMM_ROOT): keeps unrelated jobs apart, no secret. */
static void comm_cookie_from(const char *s, uint8_t cookie[16])
{
    uint64_t a = hc_hash_str(HC_HASH_FNV_SEED, s), b = hc_hash_str(0x84222325cbf29ce4ull, s);
    memcpy(cookie, &a, 8);
    memcpy(cookie + 8, &b, 8);
}

/* Whether the root is on a loopback address: then only this host reaches it,
 * and a cookie without a secret is allowed (a one-host job needs no setup). */
static int comm_root_is_local(const char *root)
{
    struct sockaddr_storage ss;
    socklen_t               len;
    if (hc_sock_parse_addr(root, HC_SUBSYS(INIT), &ss, &len) != HCOMM_SUCCESS)
        return 0;
    if (ss.ss_family == AF_INET)
        return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
    return ss.ss_family == AF_INET6 &&
           IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr);
}

/* Whether root names a host (not an address) that resolves to loopback
 * here, as Debian's /etc/hosts maps a host's own name to 127.0.1.1, while
 * the job has a secret or runs without one by choice (so it may span
 * hosts). Then rank 0 listens on every interface at root's port (bind), as
 * torch's store does, and the other ranks of this host reach it at the
 * address of the interface HCOMM_SOCKET_IFNAME selects (dial): what they
 * reach the root by is what they listen on, and loopback is out of the
 * other hosts' reach. */
static int comm_root_on_loopback(const char *root, int secret, char *bind, char *dial, size_t size)
{
    struct sockaddr_storage ss, ifa;
    socklen_t               len, ilen;
    struct in_addr          v4;
    char                    host[256];
    const char             *colon = strrchr(root, ':');
    size_t                  hlen  = colon != NULL ? (size_t)(colon - root) : 0;
    if (!secret || root[0] == '[' || colon == NULL || hlen == 0 || hlen >= sizeof(host))
        return 0; /* an IPv6 address, or what the parse will refuse */
    memcpy(host, root, hlen);
    host[hlen] = '\0';
    if (inet_pton(AF_INET, host, &v4) == 1 || !comm_root_is_local(root) ||
        hc_sock_parse_addr(root, HC_SUBSYS(INIT), &ss, &len) != HCOMM_SUCCESS ||
        hc_sock_if_addr(hc_params_get()->socket_ifname, HC_SUBSYS(INIT), &ifa, &ilen) !=
            HCOMM_SUCCESS)
        return 0;
    if (ifa.ss_family == AF_INET)
        ((struct sockaddr_in *)&ifa)->sin_port = ((struct sockaddr_in *)&ss)->sin_port;
    else
        ((struct sockaddr_in6 *)&ifa)->sin6_port = ((struct sockaddr_in6 *)&ss)->sin6_port;
    snprintf(bind, size, ifa.ss_family == AF_INET6 ? "[::]%s" : "0.0.0.0%s", colon);
    hc_sock_addr_str((struct sockaddr *)&ifa, dial, size);
    hc_info(INIT,
            "the root %s resolves to loopback on this host: rank 0 listens on %s, reached "
            "at %s",
            root, bind, dial);
    return 1;
}

/* The cookie for a root the launcher's store did not carry: HCOMM_COOKIE, or
 * (no secret) one derived from the root where the hardening rules allow it. */
static hcomm_status_t comm_env_cookie(const hc_params_t *p, const char *root, const char *from,
                                      uint8_t cookie[16])
{
    if (p->cookie[0] != '\0') {
        if (hc_auth_key_parse(p->cookie, cookie) != 0) {
            hc_error(INIT, "HCOMM_COOKIE: expected 32 hex digits");
            return HCOMM_ERR_INVALID_ARG;
        }
        return HCOMM_SUCCESS;
    }
    int local = comm_root_is_local(root);
    if (local || p->cookie_from_root == 1) {
        comm_cookie_from(root, cookie);
        hc_log_as(local ? HC_LOG_INFO : HC_LOG_WARN, HC_SUBSYS(INIT),
                  "HCOMM_COOKIE not set: cookie derived from the root %s (no secret)", root);
        return HCOMM_SUCCESS;
    }
    hc_error(INIT,
             "HCOMM_COOKIE is not set and the root %s (%s) is not a loopback address: set "
             "HCOMM_COOKIE to the same 32 random hex digits on every rank (hcomm-run does; "
             "before srun or torchrun: export HCOMM_COOKIE=$(openssl rand -hex 16)), or "
             "HCOMM_COOKIE_FROM_ROOT=1 to run without a secret (docs/launchers.md)",
             root, from);
    return HCOMM_ERR_INVALID_USAGE;
}

hcomm_status_t hcomm_comm_init_env(hcomm_comm_t *comm)
{
    const hc_params_t *p = hc_params_get();
    uint8_t            cookie[16];
    hcomm_unique_id_t  id;
    hc_launch_t        l;
    hcomm_status_t     st;

    if (comm == NULL) {
        hc_error(INIT, "hcomm_comm_init_env: NULL comm");
        return HCOMM_ERR_INVALID_ARG;
    }
    st = hc_launch_detect(p->rank, p->nranks, &l);
    if (st != HCOMM_SUCCESS)
        return st;
    /* a store carries the id, secret included; HCOMM_ROOT then only says
     * where rank 0 listens */
    char bind[HC_SOCK_ADDRSTRLEN], dial[HC_SOCK_ADDRSTRLEN];
    if (l.kvs) {
        const char *at = p->root[0] ? p->root : NULL; /* only rank 0 binds */
        if (at != NULL && l.rank == 0 && comm_root_on_loopback(at, 1, bind, dial, sizeof(bind)))
            at = bind;
        st = hc_launch_share_id(&l, at, p->timeout, &id);
    } else {
        const char *root = p->root[0] ? p->root : l.root;
        if (root[0] == '\0') {
            hc_launch_release(&l);
            hc_error(INIT,
                     "hcomm_comm_init_env: HCOMM_ROOT=host:port is not set, and the %s "
                     "launch gives no root: %s (docs/launchers.md)",
                     l.name, l.root_from);
            return HCOMM_ERR_INVALID_USAGE;
        }
        st = comm_env_cookie(p, root, p->root[0] ? "HCOMM_ROOT" : l.root_from, cookie);
        /* the root's name resolved here, its failure final: a resolver
         * that never answers costs one HCOMM_TIMEOUT, not one more per look
         * below */
        struct sockaddr_storage rs;
        socklen_t               rlen;
        if (st == HCOMM_SUCCESS)
            st = hc_sock_parse_addr(root, HC_SUBSYS(INIT), &rs, &rlen);
        if (st != HCOMM_SUCCESS) {
            hc_launch_release(&l);
            return st;
        }
        int lo = comm_root_on_loopback(root, p->cookie[0] != '\0' || p->cookie_from_root == 1, bind,
                                       dial, sizeof(bind));
        /* the launcher's socket serves the first communicator; later ones bind */
        static int root_fd_taken;
        if (l.rank == 0 && p->root_fd >= 0 && p->root[0] &&
            !__atomic_exchange_n(&root_fd_taken, 1, __ATOMIC_ACQ_REL))
            st = hc_bootstrap_root_adopt(p->root_fd, root, cookie, &id);
        else if (l.rank == 0)
            st = hc_bootstrap_root_start(lo ? bind : root, cookie, &id);
        else
            st = hc_bootstrap_id_from_addr(lo ? dial : root, cookie, &id);
    }
    hc_launch_release(&l);
    if (st != HCOMM_SUCCESS)
        return st;
    return hc_comm_create(comm, l.nranks, &id, l.rank, NULL);
}

/* Ends comm once it is drained (abort: failed first, so that every queued
 * request finishes as aborted): no new call can find it, streams let go of
 * its requests, and it is freed. */
static hcomm_status_t comm_end(hcomm_comm_t comm, int abort)
{
    if (abort) /* under the lock: a stream's thread may be in progress */
        hc_comm_set_failed(comm, HCOMM_ERR_ABORTED);
    hc_stream_forget_comm(comm); /* the holds of the streams' last-request slots */
    /* what streams queued runs while the communicator still answers; one a
     * stuck stream holds past its timeout is left as it was, for a retry or
     * an abort (as NCCL leaves a communicator it cannot destroy yet) */
    if (hc_comm_wait_released(comm) != 0)
        return HCOMM_ERR_TIMEOUT;
    hc_comm_drain(comm);
    hc_comm_unregister(comm);
    if (hc_comm_wait_released(comm) != 0) { /* held again since, from another thread */
        (void)hc_comm_reregister(comm);
        return HCOMM_ERR_TIMEOUT;
    }
    hc_comm_orphan_requests(comm);
    hc_comm_free(comm);
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_comm_destroy(hcomm_comm_t comm)
{
    if (!hc_comm_is_live(comm)) {
        hc_error(INIT, "hcomm_comm_destroy: communicator %p is NULL or already destroyed",
                 (void *)comm);
        return HCOMM_ERR_INVALID_COMM;
    }
    if (hc_group_active()) { /* NCCL's rule: its queued calls may name comm */
        hc_error(INIT, "hcomm_comm_destroy: not allowed inside a group (hcomm_group_start "
                       "without hcomm_group_end on this thread)");
        return HCOMM_ERR_INVALID_USAGE;
    }
    return comm_end(comm, 0);
}

hcomm_status_t hcomm_comm_abort(hcomm_comm_t comm)
{
    if (!hc_comm_is_live(comm)) {
        hc_error(INIT, "hcomm_comm_abort: communicator %p is NULL or already destroyed",
                 (void *)comm);
        return HCOMM_ERR_INVALID_COMM;
    }
    return comm_end(comm, 1);
}

hcomm_status_t hcomm_comm_rank(hcomm_comm_t comm, int *rank)
{
    if (!hc_comm_is_live(comm) || rank == NULL) {
        hc_error(INIT, "hcomm_comm_rank: %s", rank ? "invalid communicator" : "NULL rank");
        return rank ? HCOMM_ERR_INVALID_COMM : HCOMM_ERR_INVALID_ARG;
    }
    *rank = comm->rank;
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_comm_size(hcomm_comm_t comm, int *nranks)
{
    if (!hc_comm_is_live(comm) || nranks == NULL) {
        hc_error(INIT, "hcomm_comm_size: %s", nranks ? "invalid communicator" : "NULL nranks");
        return nranks ? HCOMM_ERR_INVALID_COMM : HCOMM_ERR_INVALID_ARG;
    }
    *nranks = comm->nranks;
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_comm_get_error(hcomm_comm_t comm)
{
    if (!hc_comm_is_live(comm)) {
        hc_error(INIT, "hcomm_comm_get_error: invalid communicator %p", (void *)comm);
        return HCOMM_ERR_INVALID_COMM;
    }
    hcomm_status_t st = comm->error;
    return st == HCOMM_SUCCESS && __atomic_load_n(&comm->revoked, __ATOMIC_RELAXED)
               ? HCOMM_ERR_REVOKED
               : st;
}

hcomm_status_t hcomm_comm_set_timeout(hcomm_comm_t comm, double seconds)
{
    if (!hc_comm_is_live(comm)) {
        hc_error(INIT, "hcomm_comm_set_timeout: invalid communicator %p", (void *)comm);
        return HCOMM_ERR_INVALID_COMM;
    }
    if (!(seconds > 0) || !isfinite(seconds)) {
        hc_error(INIT, "hcomm_comm_set_timeout: %g s is not a positive finite timeout", seconds);
        return HCOMM_ERR_INVALID_ARG;
    }
    /* the executor reads it under the lock when a stream drives the comm */
    hc_comm_lock(comm);
    comm->timeout = seconds;
    hc_comm_unlock(comm);
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_comm_revoke(hcomm_comm_t comm)
{
    /* a flag, not the failure itself: another thread may be progressing comm;
     * whichever progresses next fails it, here and on the peers. The hold,
     * first: a call that ends revoked may abort comm while the peers are
     * still being told, and the abort then waits for it. */
    if (!hc_comm_hold_if_live(comm)) {
        hc_error(INIT, "hcomm_comm_revoke: invalid communicator %p", (void *)comm);
        return HCOMM_ERR_INVALID_COMM;
    }
    __atomic_store_n(&comm->revoked, 1, __ATOMIC_RELEASE);
    hc_watch_revoke(comm);
    __atomic_sub_fetch(&comm->held, 1, __ATOMIC_RELEASE);
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_comm_dump_state(hcomm_comm_t comm)
{
    if (!hc_comm_is_live(comm)) {
        hc_error(INIT, "hcomm_comm_dump_state: invalid communicator %p", (void *)comm);
        return HCOMM_ERR_INVALID_COMM;
    }
    hc_comm_lock(comm);
    hc_flight_report(comm, "hcomm_comm_dump_state");
    hc_comm_unlock(comm);
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_comm_get_health(hcomm_comm_t comm, hcomm_health_t *health)
{
    if (!hc_comm_is_live(comm)) {
        hc_error(INIT, "hcomm_comm_get_health: invalid communicator %p", (void *)comm);
        return HCOMM_ERR_INVALID_COMM;
    }
    if (health == NULL) {
        hc_error(INIT, "hcomm_comm_get_health: NULL output");
        return HCOMM_ERR_INVALID_ARG;
    }
    hc_health_get(comm, health);
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_comm_bytes_sent(hcomm_comm_t comm, uint64_t *bytes)
{
    if (!hc_comm_is_live(comm)) {
        hc_error(INIT, "hcomm_comm_bytes_sent: invalid communicator %p", (void *)comm);
        return HCOMM_ERR_INVALID_COMM;
    }
    if (bytes == NULL) {
        hc_error(INIT, "hcomm_comm_bytes_sent: NULL output");
        return HCOMM_ERR_INVALID_ARG;
    }
    *bytes = comm->bytes_sent;
    return HCOMM_SUCCESS;
}
