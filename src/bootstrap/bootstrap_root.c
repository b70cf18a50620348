/* bootstrap_root.c - the rendezvous root: a detached thread that collects one
 * hello per rank, then tells each rank where its ring successor listens.
 * Connections pass the gate (bootstrap_gate.h) first: a silent, slow or
 * hostile client delays nobody. */
#include "bootstrap/bootstrap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/params.h"
#include "bootstrap/bootstrap_gate.h"
#include "bootstrap/bootstrap_root.h"
#include "bootstrap/bootstrap_wire.h"

_Static_assert(sizeof(hc_uid_t) <= HCOMM_UNIQUE_ID_BYTES, "hc_uid_t fits the unique id");
_Static_assert(sizeof(struct sockaddr_in6) <= sizeof(((hc_uid_t *)0)->root_addr),
               "root_addr holds an IPv6 address");

#define ROOT_REPLY_TIMEOUT 5.0 /* seconds for the replies once all joined */

/* Roots of this process that refused a rank and have not yet answered a hello
 * per rank (hc_bootstrap_root_settle waits for them); the running roots, for
 * hc_bootstrap_root_release. */
static pthread_mutex_t    roots_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t     roots_cv = PTHREAD_COND_INITIALIZER;
static int                roots_unsettled;
static struct root_state *roots_running;

typedef struct root_state {
    int                 lfd;
    double              timeout;
    double              deadline;
    uint8_t             cookie[16];
    char                name[HC_SOCK_ADDRSTRLEN];
    char                what[HC_SOCK_ADDRSTRLEN + 16];
    hc_bootstrap_roll_t roll;
    hc_gate_t           gate;
    int                 unsettled; /* counted in roots_unsettled; under roots_mu */
    int                 released;  /* hc_bootstrap_root_release: atomic */
    struct root_state  *next;      /* in roots_running; under roots_mu */
} root_state_t;

hcomm_status_t hc_bootstrap_random(void *buf, size_t len)
{
    if (buf == NULL && len > 0)
        return HCOMM_ERR_INVALID_ARG;
    return hc_auth_random(buf, len) == 0 ? HCOMM_SUCCESS : HCOMM_ERR_SYSTEM;
}

static void uid_fill(hcomm_unique_id_t *id, const uint8_t cookie[16], const struct sockaddr *sa,
                     socklen_t len, uint32_t flags)
{
    hc_uid_t uid;
    memset(&uid, 0, sizeof(uid));
    uid.magic   = HC_UID_MAGIC;
    uid.version = 1;
    memcpy(uid.cookie, cookie, 16);
    memcpy(uid.root_addr, sa, len);
    uid.root_addrlen = (uint32_t)len;
    uid.flags        = flags;
    memset(id, 0, sizeof(*id));
    memcpy(id->internal, &uid, sizeof(uid));
}

hcomm_status_t hc_bootstrap_id_from_addr(const char *host_port, const uint8_t cookie[16],
                                         hcomm_unique_id_t *id)
{
    struct sockaddr_storage ss;
    socklen_t               len;
    if (host_port == NULL || cookie == NULL || id == NULL)
        return HCOMM_ERR_INVALID_ARG;
    hcomm_status_t st = hc_sock_parse_addr(host_port, HC_SUBSYS(BOOT), &ss, &len);
    if (st != HCOMM_SUCCESS)
        return st;
    in_port_t port = ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                             : ((struct sockaddr_in6 *)&ss)->sin6_port;
    if (port == 0) {
        hc_error(BOOT, "bootstrap root address %s: port 0 cannot be reached", host_port);
        return HCOMM_ERR_INVALID_ARG;
    }
    uid_fill(id, cookie, (struct sockaddr *)&ss, len, 0);
    return HCOMM_SUCCESS;
}

/* Best effort: the connection is being dropped anyway. Only ranks that proved
 * the secret get here; strangers never get an answer. */
void hc_bootstrap_roll_refuse(const hc_bootstrap_roll_t *roll, int fd, hcomm_status_t why)
{
    hc_bootstrap_reply_t r;
    memset(&r, 0, sizeof(r));
    r.magic   = htonl(HC_BOOTSTRAP_REPLY_MAGIC);
    r.status  = (int32_t)htonl((uint32_t)why);
    r.njoined = why == HCOMM_ERR_TIMEOUT ? (int32_t)htonl((uint32_t)roll->njoined) : 0;
    (void)send(fd, &r, sizeof(r), MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
}

static hcomm_status_t roll_alloc(hc_bootstrap_roll_t *roll, int nranks)
{
    roll->rank_fd   = malloc((size_t)nranks * sizeof(*roll->rank_fd));
    roll->rank_addr = calloc((size_t)nranks, sizeof(*roll->rank_addr));
    roll->seen      = calloc((size_t)nranks, 1);
    if (roll->rank_fd == NULL || roll->rank_addr == NULL || roll->seen == NULL) {
        hc_error(BOOT, "bootstrap root: out of memory for %d ranks", nranks);
        free(roll->rank_fd);
        free(roll->rank_addr);
        free(roll->seen);
        roll->rank_fd   = NULL;
        roll->rank_addr = NULL;
        roll->seen      = NULL;
        return HCOMM_ERR_NO_MEMORY;
    }
    for (int r = 0; r < nranks; r++)
        roll->rank_fd[r] = -1;
    roll->nranks = nranks;
    return HCOMM_SUCCESS;
}

static void roll_seen(hc_bootstrap_roll_t *roll, int rank)
{
    if (roll->nranks > 0 && rank >= 0 && rank < roll->nranks && !roll->seen[rank]) {
        roll->seen[rank] = 1;
        roll->nseen++;
    }
}

void hc_bootstrap_roll_admit(void *arg, int fd, const void *hello, const char *peer)
{
    hc_bootstrap_roll_t        *roll = arg;
    hc_bootstrap_hello_t        msg;
    const hc_bootstrap_hello_t *h = &msg;
    memcpy(&msg, hello, sizeof(msg));
    int rank   = (int32_t)ntohl((uint32_t)h->rank);
    int nranks = (int32_t)ntohl((uint32_t)h->nranks);
    hcomm_status_t why    = HCOMM_SUCCESS;
    int            sized  = nranks >= 1 && nranks <= HC_BOOTSTRAP_MAX_RANKS;
    /* The first hello of a valid size makes the roll, a refused one too: a
     * doomed root still learns which of its ranks it has answered. */
    if (roll->nranks == 0 && sized && roll_alloc(roll, nranks) != HCOMM_SUCCESS)
        why = HCOMM_ERR_NO_MEMORY;
    if (nranks == roll->nranks) /* a hello of another size is no rank of this job */
        roll_seen(roll, rank);
    if (roll->doomed != HCOMM_SUCCESS) {
        hc_bootstrap_roll_refuse(roll, fd, roll->doomed);
        return;
    }
    if (why != HCOMM_SUCCESS) {
        /* out of memory: logged by roll_alloc */
    } else if (!sized) {
        hc_error(BOOT, "bootstrap root: rank %d (%s) says %d ranks, not 1 to %d; refused", rank,
                 peer, nranks, HC_BOOTSTRAP_MAX_RANKS);
        why = HCOMM_ERR_INVALID_ARG;
    } else if (nranks != roll->nranks) {
        hc_error(BOOT, "bootstrap root: rank %d (%s) says %d ranks, expected %d; refused", rank,
                 peer, nranks, roll->nranks);
        why = HCOMM_ERR_INVALID_ARG;
    } else if (rank < 0 || rank >= nranks || roll->rank_fd[rank] >= 0) {
        hc_error(BOOT,
                 "bootstrap root: rank %d (%s) of %d is out of range or already joined; "
                 "refused",
                 rank, peer, nranks);
        why = HCOMM_ERR_INVALID_RANK;
    } else if (h->addr.family != 4 && h->addr.family != 6) {
        hc_error(BOOT, "bootstrap root: rank %d (%s) sent an address of family %u; refused", rank,
                 peer, h->addr.family);
        why = HCOMM_ERR_PROTOCOL;
    }
    if (why != HCOMM_SUCCESS) {
        /* a member of the job (it proved the secret) the job cannot have: no
         * init can finish, so every rank is told now, not at the timeout */
        hc_bootstrap_roll_refuse(roll, fd, why);
        roll->doomed = why;
        return;
    }
    roll->rank_fd[rank]   = fd;
    roll->rank_addr[rank] = h->addr;
    roll->njoined++;
    hc_debug(BOOT, "bootstrap root: rank %d of %d joined from %s", rank, nranks, peer);
}

void hc_bootstrap_roll_free(hc_bootstrap_roll_t *roll)
{
    for (int r = 0; r < roll->nranks; r++)
        if (roll->rank_fd[r] >= 0)
            close(roll->rank_fd[r]);
    free(roll->rank_fd);
    free(roll->rank_addr);
    free(roll->seen);
    memset(roll, 0, sizeof(*roll));
}

/* Under roots_mu: st counts as unsettled or not. */
static void root_mark(root_state_t *st, int unsettled)
{
    if (unsettled == st->unsettled)
        return;
    roots_unsettled += unsettled - st->unsettled;
    st->unsettled = unsettled;
    pthread_cond_broadcast(&roots_cv);
}

/* The gate's admission, under roots_mu: a refusal reaches its rank (perhaps
 * this process's, about to exit) only after the root counts as unsettled. */
static void root_admit(void *arg, int fd, const void *hello, const char *peer)
{
    root_state_t *st = arg;
    pthread_mutex_lock(&roots_mu);
    hc_bootstrap_roll_admit(&st->roll, fd, hello, peer);
    if (st->roll.doomed != HCOMM_SUCCESS)
        root_mark(st, 1);
    pthread_mutex_unlock(&roots_mu);
}

/* After root_doom: settled once every rank was answered (unknown while no
 * hello named a valid size). A rank that never comes keeps it unsettled, and
 * hc_bootstrap_root_settle waits at most its bound. */
static void root_settle_check(root_state_t *st)
{
    pthread_mutex_lock(&roots_mu);
    root_mark(st, st->roll.nranks == 0 || st->roll.nseen < st->roll.nranks);
    pthread_mutex_unlock(&roots_mu);
}

void hc_bootstrap_root_settle(double max_seconds)
{
    double until = hc_clock_now() + max_seconds;
    pthread_mutex_lock(&roots_mu);
    if (roots_unsettled > 0)
        hc_info(BOOT,
                "waiting up to %.1f s for this process's bootstrap root to refuse every "
                "rank",
                max_seconds);
    while (roots_unsettled > 0 && hc_clock_now() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double left = until - hc_clock_now(), wait = left < 0.1 ? left : 0.1;
        ts.tv_nsec += (long)(wait * 1e9);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&roots_cv, &roots_mu, &ts);
    }
    pthread_mutex_unlock(&roots_mu);
}

/* fork: the child has none of the parent's root threads, so it counts none
 * of their roots (hc_bootstrap_root_settle in a child of a process with a
 * root waited out its bound, or forever on a lock copied held). */
static void roots_fork_prepare(void)
{
    pthread_mutex_lock(&roots_mu);
}
static void roots_fork_parent(void)
{
    pthread_mutex_unlock(&roots_mu);
}
static void roots_fork_child(void)
{
    roots_unsettled = 0;
    roots_running   = NULL; /* the parent's threads free them */
    pthread_cond_init(&roots_cv, NULL);
    pthread_mutex_unlock(&roots_mu);
}
static void roots_fork_register(void)
{
    (void)pthread_atfork(roots_fork_prepare, roots_fork_parent, roots_fork_child);
}

/* Under roots_mu: st joins or leaves roots_running. */
static void root_link(root_state_t *st, int in)
{
    root_state_t **pp = &roots_running;
    while (*pp != NULL && *pp != st)
        pp = &(*pp)->next;
    if (in && *pp == NULL)
        *pp = st;
    else if (!in && *pp == st)
        *pp = st->next;
}

void hc_bootstrap_root_release(const hcomm_unique_id_t *id)
{
    hc_uid_t uid;
    memcpy(&uid, id, sizeof(uid));
    if (uid.magic != HC_UID_MAGIC)
        return;
    pthread_mutex_lock(&roots_mu);
    for (root_state_t *st = roots_running; st != NULL; st = st->next)
        if (memcmp(st->cookie, uid.cookie, sizeof(st->cookie)) == 0)
            __atomic_store_n(&st->released, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&roots_mu);
}

/* A released root that no rank joined ends quietly. */
static int root_unused(root_state_t *st)
{
    return __atomic_load_n(&st->released, __ATOMIC_RELAXED) && st->roll.nranks == 0 &&
           st->roll.doomed == HCOMM_SUCCESS;
}

/* One poll round; returns 0, or -1 on a poll failure (logged). */
static int root_poll(root_state_t *st)
{
    struct pollfd pfd[HC_GATE_MAX_PENDING + 1];
    double        now   = hc_clock_now();
    double        until = st->deadline;
    int           n     = hc_gate_pollfds(&st->gate, pfd, &until);
    double        ms    = (until - now) * 1000.0 + 1.0;
    /* a release is seen within a second */
    int r = poll(pfd, (nfds_t)n, ms < 0 ? 0 : ms > 1000 ? 1000 : (int)ms);
    if (r < 0 && errno != EINTR) {
        hc_error(BOOT, "%s: poll: %s", st->what, strerror(errno));
        return -1;
    }
    hc_gate_serve(&st->gate, pfd);
    return 0;
}

/* Everyone is in: each rank learns where its successor listens. */
static void root_finish(root_state_t *st)
{
    double deadline = hc_clock_now() + ROOT_REPLY_TIMEOUT;
    hc_bootstrap_roll_t *roll     = &st->roll;
    for (int r = 0; r < roll->nranks; r++) {
        hc_bootstrap_reply_t rep;
        memset(&rep, 0, sizeof(rep));
        rep.magic   = htonl(HC_BOOTSTRAP_REPLY_MAGIC);
        rep.njoined = (int32_t)htonl((uint32_t)roll->njoined);
        rep.succ    = roll->rank_addr[(r + 1) % roll->nranks];
        /* A failure is logged with the rank; that rank's ring fails on its own. */
        (void)hc_sock_send_all(roll->rank_fd[r], &rep, sizeof(rep), deadline, hc_bootstrap_peer(r));
    }
    hc_debug(BOOT, "bootstrap root %s: %d ranks joined", st->name, roll->nranks);
}

static void root_timed_out(root_state_t *st)
{
    hc_bootstrap_roll_t *roll    = &st->roll;
    int                  missing = -1;
    for (int r = 0; r < roll->nranks && missing < 0; r++)
        if (roll->rank_fd[r] < 0)
            missing = r;
    if (roll->nranks == 0) { /* an id nobody used (ncclGetUniqueId on every rank) */
        hc_info(BOOT, "bootstrap root %s: no rank joined in %.1f s: it ends unused", st->name,
                st->timeout);
        return;
    }
    hc_error(BOOT,
             "bootstrap root %s: timed out after %.1f s with %d of %d ranks joined "
             "(first missing: rank %d)",
             st->name, st->timeout, roll->njoined, roll->nranks, missing);
    for (int r = 0; r < roll->nranks; r++)
        if (roll->rank_fd[r] >= 0) {
            hc_bootstrap_roll_refuse(roll, roll->rank_fd[r], HCOMM_ERR_TIMEOUT);
            roll->rank_fd[r] = -1;
        }
}

/* A rank was refused (roll.doomed): the ranks that joined are refused too;
 * later ones are as they come, until the deadline. */
static void root_doom(root_state_t *st)
{
    hc_bootstrap_roll_t *roll = &st->roll;
    if (roll->njoined > 0)
        hc_error(BOOT, "bootstrap root %s: a rank was refused (%s): refusing every rank", st->name,
                 hcomm_status_str(roll->doomed));
    for (int r = 0; r < roll->nranks; r++)
        if (roll->rank_fd[r] >= 0) {
            hc_bootstrap_roll_refuse(roll, roll->rank_fd[r], roll->doomed);
            roll->rank_fd[r] = -1;
        }
    roll->njoined = 0;
}

static void root_free(root_state_t *st)
{
    hc_gate_close(&st->gate);
    hc_bootstrap_roll_free(&st->roll);
    close(st->lfd);
    free(st);
}

static void *root_thread(void *arg)
{
    root_state_t *st = arg;
    while (st->roll.doomed != HCOMM_SUCCESS || st->roll.nranks == 0 ||
           st->roll.njoined < st->roll.nranks) {
        if (st->roll.doomed != HCOMM_SUCCESS) {
            root_doom(st);
            root_settle_check(st);
        }
        if (root_unused(st)) {
            hc_debug(BOOT, "bootstrap root %s: released unused", st->name);
            goto out;
        }
        if (hc_clock_now() >= st->deadline) {
            if (st->roll.doomed == HCOMM_SUCCESS)
                root_timed_out(st);
            goto out;
        }
        if (root_poll(st) != 0)
            goto out;
    }
    root_finish(st);
out:
    pthread_mutex_lock(&roots_mu);
    root_mark(st, 0);
    root_link(st, 0);
    pthread_mutex_unlock(&roots_mu);
    root_free(st);
    return NULL;
}

/* The address to bind: bind_addr, else the interface HCOMM_SOCKET_IFNAME selects. */
static hcomm_status_t root_bind_addr(const char *bind_addr, struct sockaddr_storage *ss,
                                     socklen_t *len)
{
    if (bind_addr != NULL)
        return hc_sock_parse_addr(bind_addr, HC_SUBSYS(BOOT), ss, len);
    return hc_sock_if_addr(hc_params_get()->socket_ifname, HC_SUBSYS(BOOT), ss, len);
}

/* A wildcard bind is advertised with the address of the selected interface. */
static hcomm_status_t root_advertised(struct sockaddr_storage *bound)
{
    struct sockaddr_storage ifa;
    socklen_t               ilen;
    int                     any = bound->ss_family == AF_INET
                                      ? ((struct sockaddr_in *)bound)->sin_addr.s_addr == htonl(INADDR_ANY)
                                      : IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)bound)->sin6_addr);
    if (!any)
        return HCOMM_SUCCESS;
    hcomm_status_t st =
        hc_sock_if_addr(hc_params_get()->socket_ifname, HC_SUBSYS(BOOT), &ifa, &ilen);
    if (st != HCOMM_SUCCESS)
        return st;
    in_port_t port = bound->ss_family == AF_INET ? ((struct sockaddr_in *)bound)->sin_port
                                                 : ((struct sockaddr_in6 *)bound)->sin6_port;
    if (ifa.ss_family == AF_INET)
        ((struct sockaddr_in *)&ifa)->sin_port = port;
    else
        ((struct sockaddr_in6 *)&ifa)->sin6_port = port;
    *bound = ifa;
    return HCOMM_SUCCESS;
}

static hcomm_status_t root_spawn(root_state_t *st)
{
    pthread_attr_t attr;
    pthread_t      tid;
    sigset_t       all, old;
    int            err = pthread_attr_init(&attr);
    if (err == 0) {
        (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        /* The thread inherits a full mask: the application's signals go elsewhere. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        err = pthread_create(&tid, &attr, root_thread, st);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
    }
    if (err != 0) {
        hc_error(BOOT, "bootstrap root %s: pthread_create: %s", st->name, strerror(err));
        return HCOMM_ERR_SYSTEM;
    }
    return HCOMM_SUCCESS;
}

/* Serves the root on st->lfd, listening at bound: from here on the thread owns
 * st (and closes lfd); on failure the caller frees both. */
static hcomm_status_t root_serve(root_state_t *st, struct sockaddr_storage *bound,
                                 hcomm_unique_id_t *id)
{
    hcomm_status_t    status;
    socklen_t         blen;
    hcomm_unique_id_t out;

    if ((status = root_advertised(bound)) != HCOMM_SUCCESS)
        return status;
    blen = bound->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    hc_sock_addr_str((struct sockaddr *)bound, st->name, sizeof(st->name));
    st->timeout  = hc_params_get()->timeout;
    st->deadline = hc_clock_now() + st->timeout;
    uid_fill(&out, st->cookie, (struct sockaddr *)bound, blen, HC_UID_ROOT_UP);
    snprintf(st->what, sizeof(st->what), "bootstrap root %s", st->name);
    hc_gate_init(&st->gate, st->lfd, st->cookie, HC_BOOTSTRAP_HELLO_MAGIC,
                 sizeof(hc_bootstrap_hello_t), st->what, root_admit, st);
    /* Logged first: once spawned, the thread owns st. */
    hc_info(BOOT, "bootstrap root listening on %s", st->name);
    static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
    (void)pthread_once(&fork_once, roots_fork_register);
    pthread_mutex_lock(&roots_mu);
    root_link(st, 1);
    pthread_mutex_unlock(&roots_mu);
    if ((status = root_spawn(st)) != HCOMM_SUCCESS) {
        pthread_mutex_lock(&roots_mu);
        root_link(st, 0);
        pthread_mutex_unlock(&roots_mu);
        return status;
    }
    *id = out;
    return HCOMM_SUCCESS;
}

static root_state_t *root_new(const uint8_t cookie[16], hcomm_status_t *status)
{
    root_state_t *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        hc_error(BOOT, "bootstrap root: out of memory");
        *status = HCOMM_ERR_NO_MEMORY;
        return NULL;
    }
    st->lfd = -1;
    /* NULL cookie: a fresh random one. */
    *status = cookie ? (memcpy(st->cookie, cookie, 16), HCOMM_SUCCESS)
                     : hc_bootstrap_random(st->cookie, 16);
    if (*status != HCOMM_SUCCESS) {
        free(st);
        return NULL;
    }
    return st;
}

hcomm_status_t hc_bootstrap_root_start(const char *bind_addr, const uint8_t cookie[16],
                                       hcomm_unique_id_t *id)
{
    struct sockaddr_storage ss, bound;
    socklen_t               len, blen;
    hcomm_status_t          status;
    root_state_t           *st;

    if (id == NULL)
        return HCOMM_ERR_INVALID_ARG;
    if ((st = root_new(cookie, &status)) == NULL)
        return status;
    if ((status = root_bind_addr(bind_addr, &ss, &len)) == HCOMM_SUCCESS &&
        (status = hc_sock_listen((struct sockaddr *)&ss, len, 0, HC_SUBSYS(BOOT), &st->lfd, &bound,
                                 &blen)) == HCOMM_SUCCESS &&
        (status = root_serve(st, &bound, id)) == HCOMM_SUCCESS)
        return HCOMM_SUCCESS;
    if (st->lfd >= 0)
        close(st->lfd);
    free(st);
    return status;
}

static in_port_t sock_port(const struct sockaddr_storage *ss)
{
    return ss->ss_family == AF_INET ? ((const struct sockaddr_in *)ss)->sin_port
                                    : ((const struct sockaddr_in6 *)ss)->sin6_port;
}

hcomm_status_t hc_bootstrap_root_adopt(int lfd, const char *host_port, const uint8_t cookie[16],
                                       hcomm_unique_id_t *id)
{
    struct sockaddr_storage bound, want;
    socklen_t               blen      = sizeof(bound), wlen;
    int                     listening = 0;
    socklen_t               ilen      = sizeof(listening);
    hcomm_status_t          status;
    root_state_t           *st;

    if (id == NULL)
        return HCOMM_ERR_INVALID_ARG;
    if (getsockopt(lfd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ilen) != 0 || !listening ||
        getsockname(lfd, (struct sockaddr *)&bound, &blen) != 0 ||
        (bound.ss_family != AF_INET && bound.ss_family != AF_INET6)) {
        hc_error(BOOT, "HCOMM_ROOT_FD=%d is not a listening TCP socket", lfd);
        return HCOMM_ERR_INVALID_ARG;
    }
    if (hc_sock_parse_addr(host_port, HC_SUBSYS(BOOT), &want, &wlen) != HCOMM_SUCCESS ||
        sock_port(&want) != sock_port(&bound)) {
        hc_error(BOOT, "HCOMM_ROOT_FD=%d listens on port %u, not on HCOMM_ROOT=%s", lfd,
                 (unsigned)ntohs(sock_port(&bound)), host_port);
        return HCOMM_ERR_INVALID_ARG;
    }
    if ((st = root_new(cookie, &status)) == NULL) {
        close(lfd); /* as below: checked, and no later call takes it */
        return status;
    }
    st->lfd = lfd;
    if (fcntl(lfd, F_SETFD, FD_CLOEXEC) != 0 ||
        fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK) != 0) {
        hc_error(BOOT, "HCOMM_ROOT_FD=%d: fcntl: %s", lfd, strerror(errno));
        status = HCOMM_ERR_SYSTEM;
    } else if ((status = root_serve(st, &bound, id)) == HCOMM_SUCCESS) {
        return HCOMM_SUCCESS;
    }
    /* it is the launcher's listener, checked above, and no later call takes
     * it: closed, so that ranks dialing it are refused instead of waiting in
     * its backlog for their timeout */
    close(lfd);
    free(st);
    return status;
}
