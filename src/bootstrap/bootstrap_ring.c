/* bootstrap_ring.c - a rank's side of the rendezvous: hello to the root, then
 * a ring of sockets (r connects to r+1, accepts r-1) for allgather and barrier.
 * Every connection proves the job secret first (bootstrap_gate.h). */
#include "bootstrap/bootstrap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "bootstrap/bootstrap_gate.h"
#include "bootstrap/bootstrap_root.h"
#include "bootstrap/bootstrap_wire.h"

#define RING_REDIAL_PAUSE 0.01 /* seconds before connecting again after a server hung up */
#define RING_SETTLE_MAX 10.0   /* seconds a failed init waits for a local root's refusals */

struct hc_bootstrap {
    int      rank;
    int      nranks;
    double   timeout;
    int      succ_fd;
    int      pred_fd;
    uint8_t  cookie[16];
    char     local_ip[HC_SOCK_ADDRSTRLEN];
    uint8_t *scratch; /* nranks bytes for the barrier */
};

/* Listens on the local address that reaches the root (rfd). */
static hcomm_status_t ring_listen(hc_bootstrap_t *bs, int rfd, int *lfd_p,
                                  hc_bootstrap_wire_addr_t *addr)
{
    struct sockaddr_storage local, bound;
    socklen_t               llen = sizeof(local), blen;
    hcomm_status_t          st;
    if (getsockname(rfd, (struct sockaddr *)&local, &llen) != 0) {
        hc_error(BOOT, "rank %d: getsockname on the root connection: %s", bs->rank,
                 strerror(errno));
        return HCOMM_ERR_SYSTEM;
    }
    hc_sock_ip_str((struct sockaddr *)&local, bs->local_ip, sizeof(bs->local_ip));
    if (local.ss_family == AF_INET)
        ((struct sockaddr_in *)&local)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)&local)->sin6_port = 0;
    if ((st = hc_sock_listen((struct sockaddr *)&local, llen, 0, HC_SUBSYS(BOOT), lfd_p, &bound,
                             &blen)))
        return st;
    if ((st = hc_bootstrap_addr_to_wire((struct sockaddr *)&bound, addr)) != HCOMM_SUCCESS)
        close(*lfd_p);
    return st;
}

static void ring_pause(double seconds)
{
    struct timespec ts = {0, (long)(seconds * 1e9)};
    (void)nanosleep(&ts, NULL);
}

/* Proves the secret to the root and says hello, connecting again while the
 * root hangs up first (its gate was full of strangers). */
static hcomm_status_t ring_hello(hc_bootstrap_t *bs, const hc_uid_t *uid, int *rfd,
                                 const hc_bootstrap_wire_addr_t *addr, double deadline)
{
    const struct sockaddr *ra   = (const struct sockaddr *)uid->root_addr;
    socklen_t              rlen = (socklen_t)uid->root_addrlen;
    for (;;) {
        hc_bootstrap_hello_t h;
        hc_gate_client_t     cl;
        memset(&h, 0, sizeof(h));
        h.magic           = htonl(HC_BOOTSTRAP_HELLO_MAGIC);
        h.rank            = (int32_t)htonl((uint32_t)bs->rank);
        h.nranks          = (int32_t)htonl((uint32_t)bs->nranks);
        h.addr            = *addr;
        hcomm_status_t st = hc_gate_client_run(&cl, *rfd, bs->cookie, &h, sizeof(h), deadline,
                                               hc_bootstrap_peer(-1));
        if (st != HCOMM_ERR_REMOTE)
            return st;
        close(*rfd);
        *rfd = -1;
        hc_debug(BOOT, "rank %d: the bootstrap root hung up before its challenge: again", bs->rank);
        ring_pause(RING_REDIAL_PAUSE);
        if ((st = hc_sock_connect(ra, rlen, 0, deadline, hc_bootstrap_peer_up(-1), rfd)))
            return st;
    }
}

/* Connects to the root again after it hung up; 0, or -1 (rfd closed). */
static int ring_redial(hc_bootstrap_t *bs, const hc_uid_t *uid, int *rfd, double deadline)
{
    close(*rfd);
    *rfd = -1;
    ring_pause(RING_REDIAL_PAUSE);
    hc_debug(BOOT, "rank %d: the bootstrap root hung up before its reply: again", bs->rank);
    return hc_sock_connect((const struct sockaddr *)uid->root_addr, (socklen_t)uid->root_addrlen, 0,
                           deadline, hc_bootstrap_peer_up(-1), rfd) == HCOMM_SUCCESS
               ? 0
               : -1;
}

/* Connects to the root, says hello, and learns the successor's address. */
static hcomm_status_t ring_join_root(hc_bootstrap_t *bs, const hc_uid_t *uid, double deadline,
                                     int *lfd_p, struct sockaddr_storage *succ, socklen_t *succ_len)
{
    hc_bootstrap_wire_addr_t addr;
    hc_bootstrap_reply_t     rep;
    hcomm_status_t           st;
    int                      rfd, lfd;
    st = hc_sock_connect(
        (const struct sockaddr *)uid->root_addr, (socklen_t)uid->root_addrlen, 0, deadline,
        uid->flags & HC_UID_ROOT_UP ? hc_bootstrap_peer_up(-1) : hc_bootstrap_peer(-1), &rfd);
    if (st == HCOMM_ERR_REMOTE)
        hc_error(BOOT,
                 "rank %d: the bootstrap root of this unique id has ended: an id serves "
                 "one hcomm_comm_init (or the process that made it is gone)",
                 bs->rank);
    if (st != HCOMM_SUCCESS)
        return st;
    if ((st = ring_listen(bs, rfd, &lfd, &addr)) != HCOMM_SUCCESS)
        goto err_root;
    /* A root that hangs up without a reply never admitted us (it answers every
     * rank it admitted, refusals included): its gate made room. Again. */
    hc_sock_peer_t root = hc_bootstrap_peer(-1);
    root.quiet_close    = 1;
    do {
        if ((st = ring_hello(bs, uid, &rfd, &addr, deadline)) != HCOMM_SUCCESS)
            goto err_listen;
        st = hc_sock_recv_all(rfd, &rep, sizeof(rep), deadline, root);
    } while (st == HCOMM_ERR_REMOTE && hc_clock_now() < deadline &&
             ring_redial(bs, uid, &rfd, deadline) == 0);
    if (st == HCOMM_ERR_REMOTE)
        hc_error(BOOT, "rank %d: the bootstrap root closed every connection before its reply",
                 bs->rank);
    if (st != HCOMM_SUCCESS)
        goto err_listen;
    if ((st = hc_bootstrap_reply_check(&rep, bs->rank, bs->nranks, succ, succ_len)) !=
        HCOMM_SUCCESS)
        goto err_listen;
    close(rfd);
    *lfd_p = lfd;
    return HCOMM_SUCCESS;

err_listen:
    close(lfd);
err_root:
    if (rfd >= 0)
        close(rfd);
    return st;
}

/* The two halves of a rank's place in the ring, made at once. */
typedef struct ring_link {
    hc_bootstrap_t                *bs;
    int                            pred;
    const struct sockaddr_storage *succ;
    socklen_t                      succ_len;
    hc_gate_client_t               cl;     /* towards the successor; cl.fd < 0 until dialled */
    int                            linked; /* the successor took our proof */
    int                            pred_talks; /* data from the predecessor: its watch ends */
    char                           what[48];
    hc_gate_t                      gate; /* for the predecessor, and whoever else knocks */
} ring_link_t;

/* Someone who knows the secret connected: it must be our predecessor. */
static void ring_admit(void *arg, int fd, const void *hello, const char *peer)
{
    ring_link_t              *l = arg;
    hc_bootstrap_ring_hello_t h;
    memcpy(&h, hello, sizeof(h));
    int rank = (int32_t)ntohl((uint32_t)h.rank);
    if (rank != l->pred || l->bs->pred_fd >= 0) {
        hc_error(BOOT, "rank %d: ring connection from %s claims rank %d, expected %d once; refused",
                 l->bs->rank, peer, rank, l->pred);
        close(fd);
        return;
    }
    l->bs->pred_fd = fd;
}

static hcomm_status_t ring_dial(ring_link_t *l, double deadline)
{
    hc_bootstrap_t           *bs        = l->bs;
    int                       succ_rank = (bs->rank + 1) % bs->nranks;
    hc_bootstrap_ring_hello_t h;
    int                       fd;
    hcomm_status_t st = hc_sock_connect((const struct sockaddr *)l->succ, l->succ_len, 0, deadline,
                                        hc_bootstrap_peer_up(succ_rank), &fd);
    if (st != HCOMM_SUCCESS)
        return st;
    memset(&h, 0, sizeof(h));
    h.magic = htonl(HC_BOOTSTRAP_RING_MAGIC);
    h.rank  = (int32_t)htonl((uint32_t)bs->rank);
    st = hc_gate_client_start(&l->cl, fd, &h, sizeof(h), deadline, hc_bootstrap_peer(succ_rank));
    if (st != HCOMM_SUCCESS) {
        close(fd);
        l->cl.fd = -1;
    }
    return st;
}

/* The successor's challenge arrived (or its hang-up): answer, or dial again. */
static hcomm_status_t ring_step(ring_link_t *l, double deadline)
{
    int            succ_rank = (l->bs->rank + 1) % l->bs->nranks;
    hcomm_status_t st =
        hc_gate_client_step(&l->cl, l->bs->cookie, deadline, hc_bootstrap_peer(succ_rank));
    if (st == HCOMM_SUCCESS) {
        l->bs->succ_fd = l->cl.fd;
        l->linked      = 1;
        return st;
    }
    if (st != HCOMM_ERR_REMOTE)
        return st;
    close(l->cl.fd);
    l->cl.fd = -1;
    ring_pause(RING_REDIAL_PAUSE);
    return ring_dial(l, deadline);
}

/* A linked neighbour's socket became readable before the ring closed. The
 * predecessor's first allgather bytes end its watch; a hang-up means it failed
 * or died. A successor sends nothing this way: its hang-up is a failure, or
 * its gate dropping our unchecked proof to make room, so dial again (a closed
 * listener refuses at once). Without the watch, a rank that died after the
 * root answered held every other rank until its deadline. */
static hcomm_status_t ring_watch(ring_link_t *l, int succ, double deadline)
{
    hc_bootstrap_t *bs = l->bs;
    char            b;
    ssize_t         n = recv(succ ? bs->succ_fd : bs->pred_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return HCOMM_SUCCESS;
    if (n > 0 && !succ) {
        l->pred_talks = 1;
        return HCOMM_SUCCESS;
    }
    int rank = succ ? (bs->rank + 1) % bs->nranks : l->pred;
    if (!succ) {
        hc_error(BOOT,
                 "rank %d: bootstrap ring: predecessor rank %d closed its link before the "
                 "ring closed (it failed or died)",
                 bs->rank, rank);
        return HCOMM_ERR_REMOTE;
    }
    hc_debug(BOOT, "rank %d: successor rank %d closed its link: dial again", bs->rank, rank);
    close(bs->succ_fd);
    bs->succ_fd = l->cl.fd = -1;
    l->linked              = 0;
    ring_pause(RING_REDIAL_PAUSE);
    return ring_dial(l, deadline);
}

/* Every rank dials its successor and admits its predecessor in one poll loop,
 * so no wait of one rank on another can close a cycle. */
static hcomm_status_t ring_link_run(ring_link_t *l, double deadline)
{
    struct pollfd  pfd[HC_GATE_MAX_PENDING + 3];
    hcomm_status_t st = ring_dial(l, deadline);
    while ((st == HCOMM_SUCCESS || st == HCOMM_IN_PROGRESS) &&
           !(l->linked && l->bs->pred_fd >= 0)) {
        double now = hc_clock_now(), until = deadline;
        if (now >= deadline) {
            hc_error(BOOT,
                     "rank %d: bootstrap ring not closed in time (successor %s, "
                     "predecessor %d %s)",
                     l->bs->rank, l->linked ? "linked" : "silent", l->pred,
                     l->bs->pred_fd >= 0 ? "linked" : "missing");
            return HCOMM_ERR_TIMEOUT;
        }
        int n = hc_gate_pollfds(&l->gate, pfd, &until);
        int c = n, p = -1;
        pfd[n++] = (struct pollfd){.fd = l->linked ? l->bs->succ_fd : l->cl.fd, .events = POLLIN};
        if (l->bs->pred_fd >= 0 && !l->pred_talks) {
            p        = n;
            pfd[n++] = (struct pollfd){.fd = l->bs->pred_fd, .events = POLLIN};
        }
        /* until may be a gate deadline passed since it was served: not
         * negative, which poll takes as no timeout at all */
        double ms = (until - now) * 1000.0 + 1.0;
        if (poll(pfd, (nfds_t)n, ms < 0 ? 0 : ms > 1000 ? 1000 : (int)ms) < 0 && errno != EINTR) {
            hc_error(BOOT, "rank %d: poll: %s", l->bs->rank, strerror(errno));
            return HCOMM_ERR_SYSTEM;
        }
        hc_gate_serve(&l->gate, pfd);
        if (pfd[c].revents != 0)
            st = l->linked ? ring_watch(l, 1, deadline) : ring_step(l, deadline);
        if (p >= 0 && pfd[p].revents != 0 && (st == HCOMM_SUCCESS || st == HCOMM_IN_PROGRESS))
            st = ring_watch(l, 0, deadline);
    }
    return st == HCOMM_IN_PROGRESS ? HCOMM_SUCCESS : st;
}

static hcomm_status_t ring_link(hc_bootstrap_t *bs, int lfd, const struct sockaddr_storage *succ,
                                socklen_t succ_len, double deadline)
{
    ring_link_t *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        hc_error(BOOT, "rank %d: out of memory for the bootstrap ring", bs->rank);
        return HCOMM_ERR_NO_MEMORY;
    }
    l->bs       = bs;
    l->pred     = (bs->rank + bs->nranks - 1) % bs->nranks;
    l->succ     = succ;
    l->succ_len = succ_len;
    l->cl.fd    = -1;
    snprintf(l->what, sizeof(l->what), "rank %d's bootstrap ring", bs->rank);
    hc_gate_init(&l->gate, lfd, bs->cookie, HC_BOOTSTRAP_RING_MAGIC,
                 sizeof(hc_bootstrap_ring_hello_t), l->what, ring_admit, l);
    hcomm_status_t st = ring_link_run(l, deadline);
    if (!l->linked && l->cl.fd >= 0)
        close(l->cl.fd);
    hc_gate_close(&l->gate);
    free(l);
    return st;
}

hcomm_status_t hc_bootstrap_id_check(const hcomm_unique_id_t *id, hc_uid_t *uid)
{
    hc_uid_t u;
    memcpy(&u, id->internal, sizeof(u));
    int family = ((const struct sockaddr *)u.root_addr)->sa_family;
    /* The length must be the family's: a shorter one (0 included, found by
     * tests/fuzz/fuzz_uid.c) was accepted on bytes past the address, and
     * init then failed in connect() with EINVAL instead of here. */
    size_t want = family == AF_INET    ? sizeof(struct sockaddr_in)
                  : family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                       : 0;
    if (u.magic != HC_UID_MAGIC || u.version != 1 || want == 0 || u.root_addrlen != want ||
        (u.flags & ~HC_UID_ROOT_UP) != 0) {
        hc_error(BOOT, "invalid unique id (bad magic, version or root address): not made by "
                       "hcomm_get_unique_id");
        return HCOMM_ERR_INVALID_ARG;
    }
    if (uid != NULL)
        *uid = u;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_bootstrap_init(const hcomm_unique_id_t *id, int nranks, int rank, double timeout,
                                 hc_bootstrap_t **bs_p)
{
    struct sockaddr_storage succ;
    socklen_t               succ_len;
    hc_uid_t                uid;
    hcomm_status_t          st;
    int                     lfd;
    if (id == NULL || bs_p == NULL || nranks < 1 || !(timeout > 0))
        return HCOMM_ERR_INVALID_ARG;
    if (nranks > HC_BOOTSTRAP_MAX_RANKS) {
        /* the root would refuse it, and only after its own timeout */
        hc_error(BOOT, "rank %d: a communicator of %d ranks: at most %d", rank, nranks,
                 HC_BOOTSTRAP_MAX_RANKS);
        return HCOMM_ERR_INVALID_ARG;
    }
    if (rank < 0 || rank >= nranks)
        return HCOMM_ERR_INVALID_RANK;
    if ((st = hc_bootstrap_id_check(id, &uid)) != HCOMM_SUCCESS)
        return st;
    double          deadline = hc_clock_now() + timeout;
    hc_bootstrap_t *bs       = calloc(1, sizeof(*bs));
    if (bs == NULL || (bs->scratch = malloc((size_t)nranks)) == NULL) {
        hc_error(BOOT, "rank %d: out of memory for the bootstrap", rank);
        free(bs);
        return HCOMM_ERR_NO_MEMORY;
    }
    bs->rank    = rank;
    bs->nranks  = nranks;
    bs->timeout = timeout;
    bs->succ_fd = bs->pred_fd = -1;
    memcpy(bs->cookie, uid.cookie, 16);

    if ((st = ring_join_root(bs, &uid, deadline, &lfd, &succ, &succ_len)) != HCOMM_SUCCESS)
        goto err_free;
    /* One rank: no ring, allgather has nothing to move. */
    if (nranks > 1) {
        if ((st = ring_link(bs, lfd, &succ, succ_len, deadline)) != HCOMM_SUCCESS)
            goto err_listen;
    }
    close(lfd);
    hc_debug(BOOT, "rank %d of %d: bootstrap ring ready (local ip %s)", rank, nranks, bs->local_ip);
    *bs_p = bs;
    return HCOMM_SUCCESS;

err_listen:
    close(lfd);
err_free:
    hc_bootstrap_destroy(bs);
    hc_bootstrap_root_settle(timeout < RING_SETTLE_MAX ? timeout : RING_SETTLE_MAX);
    return st;
}

void hc_bootstrap_destroy(hc_bootstrap_t *bs)
{
    if (bs == NULL)
        return;
    if (bs->succ_fd >= 0)
        close(bs->succ_fd);
    if (bs->pred_fd >= 0)
        close(bs->pred_fd);
    free(bs->scratch);
    free(bs);
}

hcomm_status_t hc_bootstrap_allgather(hc_bootstrap_t *bs, void *data, size_t size)
{
    if (bs == NULL || (data == NULL && size > 0))
        return HCOMM_ERR_INVALID_ARG;
    if (size > SIZE_MAX / (size_t)bs->nranks)
        return HCOMM_ERR_OVERFLOW;
    int   n    = bs->nranks;
    int   succ = (bs->rank + 1) % n, pred = (bs->rank + n - 1) % n;
    char *buf = data;
    /* Step s forwards the slot received at step s-1 (our own at s = 0). Before
     * the last, the successor needs more from us: its close is its failure. */
    for (int s = 0; s < n - 1 && size > 0; s++) {
        size_t         sslot = (size_t)((bs->rank - s + n) % n);
        size_t         rslot = (size_t)((bs->rank - s - 1 + 2 * n) % n);
        hcomm_status_t st    = hc_sock_exchange(
               bs->succ_fd, buf + sslot * size, hc_bootstrap_peer(succ), bs->pred_fd,
               buf + rslot * size, hc_bootstrap_peer(pred), size, bs->timeout, s < n - 2);
        if (st != HCOMM_SUCCESS)
            return st;
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_bootstrap_barrier(hc_bootstrap_t *bs)
{
    if (bs == NULL)
        return HCOMM_ERR_INVALID_ARG;
    bs->scratch[bs->rank] = 1;
    return hc_bootstrap_allgather(bs, bs->scratch, 1);
}

const char *hc_bootstrap_local_ip(const hc_bootstrap_t *bs)
{
    return bs ? bs->local_ip : NULL;
}

const uint8_t *hc_bootstrap_cookie(const hc_bootstrap_t *bs)
{
    return bs ? bs->cookie : NULL;
}
