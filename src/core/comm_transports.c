/* comm_transports.c - a communicator's transports: the ones it opens
 * (HCOMM_TRANSPORT: all, or one for every pair), the one that serves each
 * pair (shm inside a host, else the first of HCOMM_NET that both ranks opened
 * and that reaches), and each pair's connection, made the first time a
 * schedule uses the pair. */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/params.h"
#include "core/comm.h"
#include "core/comm_card.h"
#include "core/watch.h"

hcomm_status_t hc_comm_tl_open(hcomm_comm_t c, comm_card_t *card)
{
    int            forced = hc_tl_forced(hc_params_get()->transport);
    hc_tl_params_t tp     = {.rank         = c->rank,
                             .nranks       = c->nranks,
                             .bind_ip      = hc_bootstrap_local_ip(c->bs),
                             .timeout      = c->timeout,
                             .live_timeout = &c->timeout,
                             .self         = &card->info,
                             .params       = hc_params_get()};
    tp.fabric_only = hc_tl_fabric_only(tp.params);
    memcpy(tp.cookie, c->cookie, sizeof(tp.cookie));
    if (forced == -2)
        return HCOMM_ERR_INVALID_ARG;
    for (int t = 0; hc_tl_table[t] != NULL; t++) {
        const hc_tl_ops_t *ops = hc_tl_table[t];
        if (forced >= 0 && t != forced)
            continue;
        hcomm_status_t st = ops->init(&c->tl_ctx[t], &tp);
        if (st == HCOMM_ERR_UNSUPPORTED && forced < 0) { /* nothing here: logged by init */
            c->tl_ctx[t] = NULL;
            continue;
        }
        if (st != HCOMM_SUCCESS) {
            c->tl_ctx[t] = NULL;
            hc_error(INIT, "transport %s: %s", ops->name, hcomm_status_str(st));
            return st;
        }
        c->tl_ops[t]     = ops;
        size_t len       = HC_TL_ADDR_MAX;
        st               = ops->address(c->tl_ctx[t], card->addr[t], &len);
        card->addr_len[t] = (uint32_t)len;
        if (st != HCOMM_SUCCESS)
            return st;
        card->opened |= 1u << t;
    }
    return HCOMM_SUCCESS;
}

/* Whether transport t serves the pair of me and peer. */
static int tl_serves(hcomm_comm_t c, int t, const comm_card_t *me, const comm_card_t *peer)
{
    return t >= 0 && (me->opened & peer->opened & (1u << t)) &&
           c->tl_ops[t]->reachable(c->tl_ctx[t], &me->info, &peer->info, peer->addr[t],
                                   peer->addr_len[t]);
}

/* The transport for a pair, or -1: both ends compute it alike from the cards. */
static int tl_pick(hcomm_comm_t c, const comm_card_t *cards, int peer, int forced)
{
    const comm_card_t *me = &cards[c->rank], *p = &cards[peer];
    uint32_t           usable = 0;
    for (int t = 0; hc_tl_table[t] != NULL; t++)
        if (tl_serves(c, t, me, p))
            usable |= 1u << t;
    return hc_tl_choose(forced, hc_params_get()->net, usable,
                        me->info.host_hash == p->info.host_hash);
}

/* Says which HCOMM_NET names this build does not have: a warning for a name
 * no build has (a typo), debug for one built elsewhere (the default names ib). */
static void tl_check_net(void)
{
    static const char known[] = ",shm,tcp,ib,ofi,ucx,";
    static int        told; /* the parameters are read once: so is this */
    if (__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
        return;
    for (const char *n = hc_params_get()->net; *n != '\0';) {
        size_t len = strcspn(n, ",");
        char   name[24];
        if (len > 0 && hc_tl_index(n, len) < 0) {
            snprintf(name, sizeof(name), ",%.*s,", (int)(len < 20 ? len : 20), n);
            if (len < 20 && strstr(known, name) != NULL)
                hc_debug(INIT, "HCOMM_NET: %.*s is not a transport of this build; skipped",
                         (int)len, n);
            else
                hc_warn(INIT, "HCOMM_NET: no transport named %.*s; skipped", (int)len, n);
        }
        n += len + (n[len] == ',');
    }
}

/* One info line per transport and host: "ranks 0-4,6-63 on vm: shm". */
static int tl_same_class(hcomm_comm_t c, const comm_card_t *cards, int a, int b)
{
    return c->ep_tl[a] == c->ep_tl[b] && cards[a].info.host_hash == cards[b].info.host_hash;
}

static void tl_log_choices(hcomm_comm_t c, const comm_card_t *cards)
{
    char *done = calloc((size_t)c->nranks, 1);
    char  list[256];
    if (done == NULL)
        return;
    done[c->rank] = 1;
    for (int first = 0; first < c->nranks; first++) {
        size_t len   = 0;
        int    count = 0;
        if (done[first])
            continue;
        for (int r = first; r < c->nranks; r++) {
            if (done[r] || !tl_same_class(c, cards, first, r))
                continue;
            int last = r;
            while (last + 1 < c->nranks && !done[last + 1] && tl_same_class(c, cards, r, last + 1))
                last++;
            memset(done + r, 1, (size_t)(last - r + 1));
            count += last - r + 1;
            if (len < sizeof(list))
                len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d", len ? "," : "", r);
            if (last > r && len < sizeof(list))
                len += (size_t)snprintf(list + len, sizeof(list) - len, "-%d", last);
            r = last;
        }
        hc_info(INIT, "%s %s on %s: %s%s", count > 1 ? "ranks" : "rank", list,
                cards[first].info.hostname, c->tl_ops[c->ep_tl[first]]->name,
                len >= sizeof(list) ? " (list cut)" : "");
    }
    free(done);
}

/* Keeps peer's address for its chosen transport, for the connection later. */
static void tl_keep_addr(hcomm_comm_t c, int peer, const void *addr, uint32_t len, size_t *off)
{
    c->addr_off[peer] = (uint32_t)*off;
    c->addr_len[peer] = len;
    memcpy(c->addrs + *off, addr, len);
    *off += len;
}

hcomm_status_t hc_comm_tl_choose(hcomm_comm_t c, const comm_card_t *cards)
{
    int      forced = hc_tl_forced(hc_params_get()->transport);
    uint32_t used   = 0;
    size_t   bytes  = 0, off = 0;
    for (int r = 0; r < c->nranks; r++)
        bytes += r == c->rank ? 0 : HC_TL_ADDR_MAX;
    c->eps       = calloc((size_t)c->nranks, sizeof(*c->eps));
    c->conn_wait = calloc((size_t)c->nranks, sizeof(*c->conn_wait));
    c->ep_tl     = calloc((size_t)c->nranks, sizeof(*c->ep_tl));
    c->addr_off = calloc((size_t)c->nranks, sizeof(*c->addr_off));
    c->addr_len = calloc((size_t)c->nranks, sizeof(*c->addr_len));
    c->addrs    = malloc(bytes ? bytes : 1);
    if (c->eps == NULL || c->conn_wait == NULL || c->ep_tl == NULL || c->addr_off == NULL ||
        c->addr_len == NULL || c->addrs == NULL) {
        hc_error(INIT, "out of memory for %d peers' transports", c->nranks);
        return HCOMM_ERR_NO_MEMORY;
    }
    tl_check_net();
    for (int peer = 0; peer < c->nranks; peer++) {
        if (peer == c->rank)
            continue;
        int t = tl_pick(c, cards, peer, forced);
        if (t < 0) {
            hc_error(INIT, "no transport reaches rank %d on %s (HCOMM_TRANSPORT=%s, HCOMM_NET=%s)",
                     peer, cards[peer].info.hostname, hc_params_get()->transport,
                     hc_params_get()->net);
            return HCOMM_ERR_UNREACHABLE;
        }
        c->ep_tl[peer] = (uint8_t)t;
        used |= 1u << t;
        tl_keep_addr(c, peer, cards[peer].addr[t], cards[peer].addr_len[t], &off);
    }
    tl_log_choices(c, cards);
    /* what no peer uses is closed: both ends of every pair chose alike, so no
     * peer will ever look for it */
    c->pollable = used != 0;
    for (int t = 0; t < HC_TL_TABLE_MAX; t++) {
        if (c->tl_ctx[t] != NULL && !(used & (1u << t))) {
            c->tl_ops[t]->fini(c->tl_ctx[t]);
            c->tl_ctx[t] = NULL;
            c->tl_ops[t] = NULL;
        }
        if (used & (1u << t))
            c->pollable &= c->tl_ops[t]->wait_fds != NULL;
    }
    return HCOMM_SUCCESS;
}

/* From its first connection attempt on, transport t is progressed and polled. */
static void tl_activate(hcomm_comm_t c, int t)
{
    for (int i = 0; i < c->nactive; i++)
        if (c->tl_active[i] == t)
            return;
    c->tl_active[c->nactive++] = (uint8_t)t;
}

#define CONN_ASK_AFTER 1.0 /* seconds waited for a peer before its watch is asked */
#define CONN_ASK_EVERY 1.0 /* the communicator asks one watch at most this often */
#define CONN_ASK_FOR 0.1   /* bounds one ask: progress waits for it */

int hc_comm_peer_left_after(hcomm_comm_t c, int peer, double waited)
{
    double now = hc_clock_now();
    if (waited < CONN_ASK_AFTER || now - c->conn_asked < CONN_ASK_EVERY)
        return 0;
    c->conn_asked = now;
    double limit  = hc_params_get()->watch_timeout;
    return hc_watch_left(c, peer, limit < CONN_ASK_FOR ? limit : CONN_ASK_FOR);
}

int hc_comm_peer_left(hcomm_comm_t c, int peer)
{
    double now = hc_clock_now(), *since = &c->conn_wait[peer];
    if (*since == 0)
        *since = now;
    return hc_comm_peer_left_after(c, peer, now - *since);
}

hcomm_status_t hc_comm_peer_gone(hcomm_comm_t c, int peer)
{
    hc_error(INIT,
             "rank %d: its communicator is gone (destroyed or aborted) before it joined "
             "the pair over %s",
             peer, c->tl_ops[c->ep_tl[peer]]->name);
    return HCOMM_ERR_REMOTE;
}

hcomm_status_t hc_comm_connect(hcomm_comm_t c, int peer)
{
    if (c->eps[peer] != NULL)
        return HCOMM_SUCCESS;
    if (c->error != HCOMM_SUCCESS)
        return c->error;
    int         t  = c->ep_tl[peer];
    hc_tl_ep_t *ep = NULL;
    tl_activate(c, t);
    hcomm_status_t st = c->tl_ops[t]->connect(c->tl_ctx[t], &c->peers[peer],
                                              c->addrs + c->addr_off[peer], c->addr_len[peer], &ep);
    /* it may have joined, sent all it had and left while it was asked: what
     * it sent is taken in by progress (ofi, ucx) before the second look */
    if (st == HCOMM_IN_PROGRESS && hc_comm_peer_left(c, peer)) {
        c->tl_ops[t]->progress(c->tl_ctx[t]);
        st = c->tl_ops[t]->connect(c->tl_ctx[t], &c->peers[peer], c->addrs + c->addr_off[peer],
                                   c->addr_len[peer], &ep);
        if (st == HCOMM_IN_PROGRESS)
            return hc_comm_peer_gone(c, peer);
    }
    if (st == HCOMM_IN_PROGRESS)
        return st;
    if (st != HCOMM_SUCCESS) {
        hc_error(INIT, "rank %d: no connection over %s: %s", peer, c->tl_ops[t]->name,
                 hcomm_status_str(st));
        return st;
    }
    c->eps[peer] = ep;
    c->nconnected++;
    hc_debug(INIT, "rank %d connected over %s", peer, c->tl_ops[t]->name);
    return HCOMM_SUCCESS;
}

void hc_comm_tl_close(hcomm_comm_t c)
{
    for (int t = 0; t < HC_TL_TABLE_MAX; t++)
        if (c->tl_ctx[t] != NULL) {
            c->tl_ops[t]->fini(c->tl_ctx[t]);
            c->tl_ctx[t] = NULL;
        }
    c->nactive = 0;
    free(c->eps);
    free(c->conn_wait);
    free(c->ep_tl);
    free(c->addr_off);
    free(c->addr_len);
    free(c->addrs);
    c->eps       = NULL;
    c->conn_wait = NULL;
    c->ep_tl     = NULL;
    c->addr_off = c->addr_len = NULL;
    c->addrs                  = NULL;
}
