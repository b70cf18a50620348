/* watch.c - the serving side of watch.h: one thread per process polls every
 * watched communicator's listener and gate, and answers each proven query
 * with where that communicator is; it also takes the dump signal. */
#include "core/watch.h"
#include "core/watch_wire.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/params.h"
#include "core/flight.h"
#include "core/ops.h"

#define WATCH_REPLY_TIMEOUT 0.2 /* seconds to hand a reply to the kernel */
#define WATCH_POLL_MS 1000
#define WATCH_RELIC_TIMEOUTS 10 /* a decided shrink is answered this many timeouts */

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static hc_watch_t    **watched;
static int             nwatched, watched_cap;
static unsigned long   watch_gen; /* bumped when the list changes: a poll round's fds are stale */
static pthread_t       watch_thread;
static int             watch_running, watch_stop;
static int             watch_joining; /* the last close waits for the thread to end */
static pthread_cond_t  watch_joined = PTHREAD_COND_INITIALIZER;
static int             wake_fd[2]   = {-1, -1};
static int             dump_signalled; /* an atomic: the handler sets it */

static void wake(void)
{
    int  saved = errno;
    char b     = 1;
    if (wake_fd[1] >= 0)
        (void)!write(wake_fd[1], &b, 1);
    errno = saved;
}

static void dump_handler(int sig)
{
    int  saved = errno;
    char b     = 1;
    (void)sig;
    __atomic_store_n(&dump_signalled, 1, __ATOMIC_RELAXED);
    if (wake_fd[1] >= 0)
        (void)!write(wake_fd[1], &b, 1);
    errno = saved;
}

void hc_watch_lock(void)
{
    pthread_mutex_lock(&watch_lock);
}

void hc_watch_unlock(void)
{
    pthread_mutex_unlock(&watch_lock);
}

void hc_watch_read(hcomm_comm_t c, hc_rank_where_t *w)
{
    hc_ops_pub_t *p = &c->ops_pub;
    for (int tries = 0; tries < 1000; tries++) {
        uint64_t v = __atomic_load_n(&p->ver, __ATOMIC_ACQUIRE);
        w->known   = 1;
        w->seq     = __atomic_load_n(&p->seq, __ATOMIC_RELAXED);
        w->ccount  = __atomic_load_n(&p->ccount, __ATOMIC_RELAXED);
        w->ended   = __atomic_load_n(&p->ended, __ATOMIC_RELAXED);
        w->c_bytes = __atomic_load_n(&p->c_bytes, __ATOMIC_RELAXED);
        w->c_desc  = __atomic_load_n(&p->c_desc, __ATOMIC_RELAXED);
        w->waiting = __atomic_load_n(&p->waiting, __ATOMIC_RELAXED);
        w->revoked = __atomic_load_n(&c->revoked, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if ((v & 1) == 0 && __atomic_load_n(&p->ver, __ATOMIC_RELAXED) == v)
            return;
    }
}

/* c's arrivals into a[HC_ARRIVALS], all in ns; how many. */
static int watch_arrivals_read(hcomm_comm_t c, hc_arrival_t *a)
{
    int n = hc_arrivals_read(c->arrivals, a);
    for (int i = 0; i < n; i++)
        if (a[i].t & HC_ARRIVAL_TICKS)
            a[i].t = hc_trace_ticks_ns(c, a[i].t & ~HC_ARRIVAL_TICKS);
    return n;
}

/* The answer to HC_WATCH_ARRIVALS into buf; its length. */
static size_t watch_pack_arrivals(hcomm_comm_t c, uint8_t *buf)
{
    hc_arrival_t        a[HC_ARRIVALS];
    hc_link_report_t    l[HC_LINKS_REPORTED];
    int                 n = watch_arrivals_read(c, a), nl = hc_links_read(c, l);
    hc_watch_arrivals_t h = {.magic  = htonl(HC_WATCH_ARRIVALS_MAGIC),
                             .rank   = (int32_t)htonl((uint32_t)c->rank),
                             .n      = htonl((uint32_t)n),
                             .nlinks = htonl((uint32_t)nl),
                             .now    = htobe64(hc_clock_now_ns())};
    uint8_t            *p = buf;
    memcpy(p, &h, sizeof(h)), p += sizeof(h);
    for (int i = 0; i < n; i++) {
        uint64_t e[2] = {htobe64(a[i].cseq), htobe64(a[i].t)};
        memcpy(p, e, sizeof(e)), p += sizeof(e);
    }
    for (int i = 0; i < nl; i++) {
        hc_watch_link_t e = {.peer  = (int32_t)htonl((uint32_t)l[i].peer),
                             .cls   = htonl(l[i].cls),
                             .n     = htobe64(l[i].n),
                             .bytes = htobe64(l[i].bytes),
                             .ns    = htobe64(l[i].ns)};
        memcpy(p, &e, sizeof(e)), p += sizeof(e);
    }
    return (size_t)(p - buf);
}

/* A proven query: the answer, then the connection closes. */
static void watch_admit(void *arg, int fd, const void *hello, const char *peer)
{
    static uint8_t   buf[HC_WATCH_ANSWER_MAX]; /* the thread's, under watch_lock */
    hc_watch_t      *w = arg;
    hc_watch_hello_t h;
    size_t           len;
    memcpy(&h, hello, sizeof(h));
    if (w->comm == NULL) { /* a relic answers its decision; anything else: gone */
        len = ntohl(h.kind) == HC_WATCH_SHRINK ? w->relic_len : 0;
        memcpy(buf, w->relic, len);
    } else if (ntohl(h.kind) == HC_WATCH_ARRIVALS) {
        len = watch_pack_arrivals(w->comm, buf);
    } else if (ntohl(h.kind) == HC_WATCH_SHRINK) {
        len = hc_watch_shrink_answer(w->comm, (int32_t)ntohl((uint32_t)h.rank), buf);
    } else {
        if (ntohl(h.kind) == HC_WATCH_REVOKE &&
            !__atomic_exchange_n(&w->comm->revoked, 1, __ATOMIC_RELAXED))
            hc_warn(COLL, "rank %d: rank %d revoked the communicator", w->comm->rank,
                    (int)ntohl((uint32_t)h.rank));
        hc_rank_where_t  where;
        hc_watch_reply_t rep;
        hc_watch_read(w->comm, &where);
        hc_watch_reply_pack(&rep, w->comm->rank, &where);
        memcpy(buf, &rep, len = sizeof(rep));
    }
    hc_sock_peer_t p = {.subsys      = HC_SUBSYS(COLL),
                        .rank        = (int32_t)ntohl((uint32_t)h.rank),
                        .name        = peer,
                        .quiet_close = 1};
    if (len > 0)
        (void)hc_sock_send_all(fd, buf, len, hc_clock_now() + WATCH_REPLY_TIMEOUT, p);
    close(fd);
}

/* ---- rank 0's slow-rank evaluations (core/health.h) ---- */

#define HEALTH_ASK_SECONDS 0.2 /* the watch thread serves nobody meanwhile */

static void watch_arrivals_answer(void *arg, int rank, const void *buf, size_t len, double t0,
                                  double t1)
{
    hcomm_comm_t        c = arg;
    hc_watch_arrivals_t h;
    hc_arrival_t        a[HC_ARRIVALS];
    hc_link_report_t    l[HC_LINKS_REPORTED];
    const uint8_t      *p = buf;
    memcpy(&h, p, sizeof(h)), p += sizeof(h);
    uint32_t n = ntohl(h.n), nl = ntohl(h.nlinks);
    size_t   want = hc_watch_arrivals_len(n, nl);
    if (ntohl(h.magic) != HC_WATCH_ARRIVALS_MAGIC || (int32_t)ntohl((uint32_t)h.rank) != rank ||
        want == 0 || len != want)
        return;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t e[2];
        memcpy(e, p, sizeof(e)), p += sizeof(e);
        a[i] = (hc_arrival_t){be64toh(e[0]), be64toh(e[1])};
    }
    for (uint32_t i = 0; i < nl; i++) {
        hc_watch_link_t e;
        memcpy(&e, p, sizeof(e)), p += sizeof(e);
        l[i] = (hc_link_report_t){.peer  = (int32_t)ntohl((uint32_t)e.peer),
                                  .cls   = ntohl(e.cls),
                                  .n     = be64toh(e.n),
                                  .bytes = be64toh(e.bytes),
                                  .ns    = be64toh(e.ns)};
    }
    hc_health_feed_links(c, rank, l, (int)nl);
    /* its clock read between the proof leaving and the answer coming */
    double mid = (t0 + t1) * 0.5e9;
    hc_health_feed(c, rank, a, (int)n, (double)be64toh(h.now) - mid, (t1 - t0) * 1e9);
}

/* A rank of c's served by this process (ranks as threads): read, not asked. */
static hcomm_comm_t watch_local_peer(hcomm_comm_t c, int rank)
{
    for (int i = 0; i < nwatched; i++) {
        hcomm_comm_t p = watched[i]->comm;
        if (p != NULL && p->rank == rank && memcmp(p->cookie, c->cookie, sizeof(c->cookie)) == 0)
            return p;
    }
    return NULL;
}

/* One evaluation of c (rank 0); watch_lock held. */
static void watch_health(hcomm_comm_t c)
{
    hc_arrival_t     a[HC_ARRIVALS];
    hc_link_report_t l[HC_LINKS_REPORTED];
    unsigned char   *skip = calloc((size_t)c->nranks, 1);
    if (skip == NULL)
        return;
    hc_health_begin(c);
    for (int r = 0; r < c->nranks; r++) {
        hcomm_comm_t p = watch_local_peer(c, r);
        if (p != NULL) {
            hc_health_feed(c, r, a, watch_arrivals_read(p, a), 0, 0);
            hc_health_feed_links(c, r, l, hc_links_read(p, l));
            skip[r] = 1;
        }
    }
    hc_watch_ask(c, HC_WATCH_ARRIVALS, skip, HEALTH_ASK_SECONDS, watch_arrivals_answer, c, NULL);
    free(skip);
    hc_health_judge(c);
}

/* One line per communicator from the dump signal; the rank that owns it
 * writes its full report at its next wait (hc_flight_dump_requested). */
static void watch_dump_all(void)
{
    for (int i = 0; i < nwatched; i++) {
        hc_rank_where_t where;
        hcomm_comm_t    c = watched[i]->comm;
        if (c == NULL)
            continue;
        hc_watch_read(c, &where);
        hc_flight_where_line(c, &where, "dump signal");
        __atomic_store_n(&c->dump_req, 1, __ATOMIC_RELAXED);
    }
}

static void watch_free(hc_watch_t *w)
{
    hc_gate_close(&w->gate);
    close(w->lfd);
    free(w->addrs);
    free(w->relic);
    free(w);
}

/* watch_lock held: drops the relics whose time is up (every one: now < 0). */
static void relics_expire(double now)
{
    for (int i = nwatched - 1; i >= 0; i--) {
        hc_watch_t *w = watched[i];
        if (w->comm == NULL && (now < 0 || now > w->relic_until)) {
            watched[i] = watched[--nwatched];
            watch_gen++;
            watch_free(w);
        }
    }
}

static int watched_live(void)
{
    int n = 0;
    for (int i = 0; i < nwatched; i++)
        n += watched[i]->comm != NULL;
    return n;
}

static void *watch_main(void *arg)
{
    struct pollfd *pfd         = NULL;
    size_t         cap         = 0;
    double         period      = hc_params_get()->health_period;
    double         next_health = hc_clock_now() + period;
    (void)arg;
    pthread_mutex_lock(&watch_lock);
    while (!watch_stop) {
        size_t need = 1 + (size_t)nwatched * (1 + HC_GATE_MAX_PENDING);
        if (need > cap) {
            struct pollfd *p = realloc(pfd, need * sizeof(*pfd));
            if (p == NULL) {
                hc_error(COLL, "watch: out of memory for %zu poll entries; not answering", need);
                break;
            }
            pfd = p, cap = need;
        }
        double        until = hc_clock_now() + WATCH_POLL_MS / 1000.0;
        if (period > 0 && until > next_health)
            until = next_health;
        unsigned long gen   = watch_gen;
        int           n     = 1;
        pfd[0]              = (struct pollfd){.fd = wake_fd[0], .events = POLLIN};
        for (int i = 0; i < nwatched; i++) {
            watched[i]->pfd_first = n;
            n += hc_gate_pollfds(&watched[i]->gate, pfd + n, &until);
        }
        pthread_mutex_unlock(&watch_lock);
        double ms = (until - hc_clock_now()) * 1000.0 + 1.0;
        if (poll(pfd, (nfds_t)n, ms < 0 ? 0 : (int)ms) < 0 && errno != EINTR)
            hc_warn(COLL, "watch: poll: %s", strerror(errno));
        if (pfd[0].revents & POLLIN) {
            char b[64];
            while (read(wake_fd[0], b, sizeof(b)) > 0) {
            }
        }
        pthread_mutex_lock(&watch_lock);
        if (__atomic_exchange_n(&dump_signalled, 0, __ATOMIC_RELAXED))
            watch_dump_all();
        if (gen != watch_gen) /* a list changed under the poll: its fds may be others' */
            continue;
        for (int i = 0; i < nwatched; i++)
            hc_gate_serve(&watched[i]->gate, pfd + watched[i]->pfd_first);
        if (period > 0 && hc_clock_now() >= next_health) {
            for (int i = 0; i < nwatched; i++)
                if (watched[i]->comm != NULL && watched[i]->comm->health != NULL)
                    watch_health(watched[i]->comm);
            next_health = hc_clock_now() + period;
        }
        relics_expire(hc_clock_now());
    }
    pthread_mutex_unlock(&watch_lock);
    free(pfd);
    return NULL;
}

/* "USR1", "SIGUSR2", "10": the signal; 0 for "" or "0"; -1 if unknown. */
static int watch_signal_number(const char *s)
{
    static const struct {
        const char *name;
        int         sig;
    } names[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP}, {"QUIT", SIGQUIT}};
    if (s == NULL || s[0] == '\0' || strcmp(s, "0") == 0)
        return 0;
    if (strncmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(s, names[i].name) == 0)
            return names[i].sig;
    char *end;
    long  v = strtol(s, &end, 10);
    return *end == '\0' && v > 0 && v < NSIG && v != SIGKILL && v != SIGSTOP ? (int)v : -1;
}

/* The dump signal's handler, once per process, where the program has none. */
static void watch_install_signal(void)
{
    static int       done;
    const char      *spec = hc_params_get()->dump_signal;
    int              sig  = watch_signal_number(spec);
    struct sigaction old, sa;
    if (done++)
        return;
    if (sig < 0) {
        hc_warn(COLL, "HCOMM_DUMP_SIGNAL=%s is not a signal (USR1, USR2, HUP, QUIT or a number)",
                spec);
        return;
    }
    if (sig == 0 || sigaction(sig, NULL, &old) != 0)
        return;
    if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) {
        hc_warn(COLL, "HCOMM_DUMP_SIGNAL=%s: the program handles that signal; hcomm leaves it",
                spec);
        return;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = dump_handler;
    sa.sa_flags   = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) == 0)
        hc_info(COLL, "signal %d dumps every communicator's state", sig);
}

/* fork: the child has none of the parent's threads, so it starts with no
 * watch thread and none of the parent's communicators (it may not use them);
 * its own get a thread of its own. The lock is held across the fork so that
 * the child's copy is consistent, and the wake pipe, shared with the parent
 * after a fork, is the child's own from its next start. */
static void watch_fork_prepare(void)
{
    pthread_mutex_lock(&watch_lock);
}
static void watch_fork_parent(void)
{
    pthread_mutex_unlock(&watch_lock);
}
static void watch_fork_child(void)
{
    watch_running = watch_stop = watch_joining = 0;
    nwatched                                   = 0;
    watch_gen++;
    if (wake_fd[0] >= 0)
        close(wake_fd[0]), close(wake_fd[1]);
    wake_fd[0] = wake_fd[1] = -1;
    pthread_mutex_unlock(&watch_lock);
}
static void watch_fork_register(void)
{
    (void)pthread_atfork(watch_fork_prepare, watch_fork_parent, watch_fork_child);
}

/* Starts the thread for the first watched communicator; watch_lock held. */
static hcomm_status_t watch_thread_start(void)
{
    static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
    (void)pthread_once(&fork_once, watch_fork_register);
    if (watch_running)
        return HCOMM_SUCCESS;
    if (wake_fd[0] < 0 && pipe2(wake_fd, O_NONBLOCK | O_CLOEXEC) != 0) {
        hc_error(COLL, "watch: pipe: %s", strerror(errno));
        return HCOMM_ERR_SYSTEM;
    }
    watch_install_signal();
    sigset_t all, old;
    sigfillset(&all); /* signals go to the program's threads, not to this one */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&watch_thread, NULL, watch_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        hc_error(COLL, "watch: pthread_create: %s", strerror(rc));
        return HCOMM_ERR_SYSTEM;
    }
    watch_stop = 0, watch_running = 1;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_watch_open(hcomm_comm_t c, hc_bootstrap_wire_addr_t *addr)
{
    struct sockaddr_storage ss, bound;
    socklen_t               len, blen;
    memset(addr, 0, sizeof(*addr));
    if (!hc_params_get()->watch)
        return HCOMM_SUCCESS;
    hc_watch_t *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return HCOMM_ERR_NO_MEMORY;
    char ip[HC_SOCK_ADDRSTRLEN + 8];
    const char *local = hc_bootstrap_local_ip(c->bs);
    snprintf(ip, sizeof(ip), strchr(local, ':') != NULL ? "[%s]:0" : "%s:0", local); /* IPv6 */
    hcomm_status_t st = hc_sock_parse_addr(ip, HC_SUBSYS(COLL), &ss, &len);
    if (st == HCOMM_SUCCESS)
        st =
            hc_sock_listen((struct sockaddr *)&ss, len, 0, HC_SUBSYS(COLL), &w->lfd, &bound, &blen);
    if (st != HCOMM_SUCCESS) {
        free(w);
        return st;
    }
    if ((st = hc_bootstrap_addr_to_wire((struct sockaddr *)&bound, addr)) != HCOMM_SUCCESS) {
        close(w->lfd);
        free(w);
        return st;
    }
    w->comm = c;
    snprintf(w->what, sizeof(w->what), "rank %d's watch", c->rank);
    memcpy(w->key, c->cookie, sizeof(w->key)); /* a relic outlives c */
    hc_gate_init(&w->gate, w->lfd, w->key, HC_WATCH_HELLO_MAGIC, sizeof(hc_watch_hello_t), w->what,
                 watch_admit, w);
    c->watch = w;
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_watch_start(hcomm_comm_t c, const hc_bootstrap_wire_addr_t *addrs)
{
    hc_watch_t *w = c->watch;
    if (w == NULL)
        return HCOMM_SUCCESS;
    w->addrs = malloc((size_t)c->nranks * sizeof(*addrs));
    if (w->addrs == NULL)
        return HCOMM_ERR_NO_MEMORY;
    memcpy(w->addrs, addrs, (size_t)c->nranks * sizeof(*addrs));
    hcomm_status_t hs = hc_health_create(c);
    if (hs != HCOMM_SUCCESS)
        return hs;
    pthread_mutex_lock(&watch_lock);
    while (watch_joining) /* a thread that is ending cannot take this one */
        pthread_cond_wait(&watch_joined, &watch_lock);
    hcomm_status_t st = HCOMM_SUCCESS;
    if (nwatched == watched_cap) {
        int   cap = watched_cap ? 2 * watched_cap : 8;
        void *p   = realloc(watched, (size_t)cap * sizeof(*watched));
        if (p == NULL)
            st = HCOMM_ERR_NO_MEMORY;
        else
            watched = p, watched_cap = cap;
    }
    if (st == HCOMM_SUCCESS)
        st = watch_thread_start();
    if (st == HCOMM_SUCCESS) {
        watched[nwatched++] = w;
        w->serving          = 1;
        watch_gen++;
    }
    pthread_mutex_unlock(&watch_lock);
    wake();
    return st;
}

void hc_watch_close(hcomm_comm_t c)
{
    hc_watch_t *w = c->watch;
    pthread_t   t;
    int         join = 0;
    if (w == NULL)
        return;
    pthread_mutex_lock(&watch_lock); /* the thread's health round reads c->watch */
    c->watch = NULL;
    /* a shrink this rank decided stays answered for a while, as long as another
     * communicator keeps the thread: a late joiner (its walk finds every
     * lower rank gone) would otherwise coordinate alone and succeed */
    if (w->serving && watched_live() > 1 &&
        (w->relic_len = hc_watch_shrink_decision(c, &w->relic)) > 0) {
        w->comm        = NULL;
        w->relic_until = hc_clock_now() + WATCH_RELIC_TIMEOUTS * c->timeout;
        pthread_mutex_unlock(&watch_lock);
        hc_debug(COLL, "rank %d: its watch answers its shrink decision for %g s more", c->rank,
                 WATCH_RELIC_TIMEOUTS * c->timeout);
        return;
    }
    for (int i = 0; i < nwatched && w->serving; i++)
        if (watched[i] == w) {
            watched[i] = watched[--nwatched];
            watch_gen++;
            w->serving = 0;
        }
    if (watched_live() == 0 && watch_running) { /* the last one: the thread goes too */
        relics_expire(-1);
        watch_stop = 1, watch_running = 0, watch_joining = join = 1;
        t = watch_thread;
    }
    pthread_mutex_unlock(&watch_lock);
    if (join) {
        wake();
        pthread_join(t, NULL);
        pthread_mutex_lock(&watch_lock);
        watch_joining = 0;
        pthread_cond_broadcast(&watch_joined);
        pthread_mutex_unlock(&watch_lock);
    }
    watch_free(w);
}
