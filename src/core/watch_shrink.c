/* watch_shrink.c - the survivors of a failed communicator agree, over the
 * watch channel (the data path is gone), on who is alive and on the new
 * communicator's rendezvous (hcomm_comm_shrink on a failed communicator).
 *
 * The coordinator is the lowest rank that is not excluded and is alive. Every
 * survivor walks the candidates upwards: it asks each in turn to take its
 * join; a candidate that refuses or hangs up (its communicator or process is
 * gone), or stays silent for HC_SHRINK_SILENT watch timeouts (stopped), is
 * dead, and the walk goes on; a survivor that reaches itself coordinates. The
 * coordinator records joins (its watch thread answers them), asks the ranks
 * that have not joined where they are (gone: dead; silent long enough: dead;
 * alive: waited for, up to the communicator's timeout), then decides: the
 * ranks that joined, and a new rendezvous of its own. Joiners keep asking
 * until they get the decision. A rank that dies at any point is found dead
 * by the next question, so the agreement ends within the timeout. */
#include "core/watch.h"
#include "core/watch_wire.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/params.h"

#define HC_SHRINK_SILENT 4 /* watch timeouts a silent rank has before it is dead */
#define SHRINK_POLL_NS 5000000L

struct hc_shrink {
    uint8_t          *joined; /* nranks */
    uint8_t          *alive;  /* the decision */
    int               decided;
    hcomm_unique_id_t id;
};

static void shrink_free(struct hc_shrink *s)
{
    if (s != NULL)
        free(s->joined), free(s->alive), free(s);
}

void hc_watch_shrink_free(hcomm_comm_t c)
{
    shrink_free(c->shrink);
    c->shrink = NULL;
}

static size_t shrink_bitmap_len(int nranks)
{
    return ((size_t)nranks + 7) / 8;
}

size_t hc_watch_shrink_answer_len(int nranks)
{
    return sizeof(hc_watch_shrink_t) + shrink_bitmap_len(nranks);
}

/* The watch thread, watch lock held: records asker's join, answers. */
size_t hc_watch_shrink_answer(hcomm_comm_t c, int asker, uint8_t *buf)
{
    struct hc_shrink *s    = c->shrink;
    hc_watch_shrink_t h    = {.magic = htonl(HC_WATCH_SHRINK_MAGIC),
                              .rank  = (int32_t)htonl((uint32_t)c->rank)};
    uint8_t          *bits = buf + sizeof(h);
    if (c->nranks > HC_WATCH_SHRINK_MAX) /* hc_watch_shrink_agree refuses it */
        return 0;
    memset(bits, 0, shrink_bitmap_len(c->nranks));
    if (s == NULL) {
        h.status = htonl(HC_SHRINK_NOT_YET);
    } else if (!s->decided) {
        if (asker >= 0 && asker < c->nranks)
            s->joined[asker] = 1;
        h.status = htonl(HC_SHRINK_JOINED);
    } else {
        h.status = htonl(HC_SHRINK_DECIDED);
        memcpy(&h.id, &s->id, sizeof(h.id));
        for (int r = 0; r < c->nranks; r++)
            if (s->alive[r])
                bits[r / 8] |= (uint8_t)(1u << (r % 8));
    }
    memcpy(buf, &h, sizeof(h));
    return hc_watch_shrink_answer_len(c->nranks);
}

size_t hc_watch_shrink_decision(hcomm_comm_t c, uint8_t **out)
{
    size_t len = hc_watch_shrink_answer_len(c->nranks);
    *out       = NULL;
    if (c->shrink == NULL || !c->shrink->decided || (*out = malloc(len)) == NULL)
        return 0;
    return hc_watch_shrink_answer(c, -1, *out);
}

typedef struct shrink_reply {
    int               got, status, nranks;
    hcomm_unique_id_t id;
    uint8_t          *alive;
} shrink_reply_t;

static void shrink_reply(void *arg, int rank, const void *buf, size_t len, double t0, double t1)
{
    shrink_reply_t   *r = arg;
    hc_watch_shrink_t h;
    (void)rank, (void)t0, (void)t1;
    memcpy(&h, buf, sizeof(h));
    if (ntohl(h.magic) != HC_WATCH_SHRINK_MAGIC)
        return;
    r->got    = 1;
    r->status = (int)ntohl(h.status);
    r->id     = h.id;
    for (size_t i = 0; i < (len - sizeof(h)) * 8 && i < (size_t)r->nranks; i++)
        r->alive[i] = (((const uint8_t *)buf)[sizeof(h) + i / 8] >> (i % 8)) & 1;
}

static void shrink_nap(void)
{
    struct timespec ts = {0, SHRINK_POLL_NS};
    nanosleep(&ts, NULL);
}

typedef struct where_seen {
    uint8_t *answered;
} where_seen_t;

static void where_seen(void *arg, int rank, const void *buf, size_t len, double t0, double t1)
{
    (void)buf, (void)len, (void)t0, (void)t1;
    ((where_seen_t *)arg)->answered[rank] = 1;
}

/* A joiner keeps the decision it got, to answer late joiners with it as the
 * coordinator does (which may be gone by then); without memory it does not. */
static void shrink_keep(hcomm_comm_t c, const uint8_t *alive, const hcomm_unique_id_t *id)
{
    struct hc_shrink *s = calloc(1, sizeof(*s));
    if (s == NULL || (s->joined = calloc((size_t)c->nranks, 1)) == NULL ||
        (s->alive = malloc((size_t)c->nranks)) == NULL) {
        shrink_free(s);
        return;
    }
    memcpy(s->alive, alive, (size_t)c->nranks);
    s->id      = *id;
    s->decided = 1;
    hc_watch_lock();
    shrink_free(c->shrink);
    c->shrink = s;
    hc_watch_unlock();
}

/* This rank coordinates: takes joins until every candidate joined or is
 * dead, then decides. */
static hcomm_status_t shrink_coordinate(hcomm_comm_t c, const uint8_t *cand, uint8_t *alive,
                                        hcomm_unique_id_t *id, double deadline, double silent)
{
    int               n    = c->nranks;
    struct hc_shrink *s    = calloc(1, sizeof(*s));
    uint8_t          *dead = calloc((size_t)n, 1), *skip = calloc((size_t)n, 1),
            *seen              = calloc((size_t)n, 1);
    uint8_t       *left        = calloc((size_t)n, 1);
    double        *quiet_since = calloc((size_t)n, sizeof(double));
    hcomm_status_t st          = HCOMM_ERR_NO_MEMORY;
    if (s == NULL || dead == NULL || skip == NULL || seen == NULL || left == NULL ||
        quiet_since == NULL || (s->joined = calloc((size_t)n, 1)) == NULL ||
        (s->alive = calloc((size_t)n, 1)) == NULL)
        goto out;
    s->joined[c->rank] = 1;
    for (int r = 0; r < c->rank; r++) /* the walk found the ones below dead */
        dead[r] = cand[r];
    hc_watch_lock();
    shrink_free(c->shrink);
    c->shrink = s;
    hc_watch_unlock();
    for (;;) {
        int pending = 0;
        hc_watch_lock();
        for (int r = 0; r < n; r++) {
            skip[r] = !cand[r] || s->joined[r] || dead[r];
            pending += !skip[r];
        }
        hc_watch_unlock();
        if (pending == 0 || hc_clock_now() > deadline)
            break;
        /* where are the others: gone, silent, or alive and not in shrink yet */
        where_seen_t w = {seen};
        memset(seen, 0, (size_t)n), memset(left, 0, (size_t)n);
        hc_watch_ask(c, HC_WATCH_WHERE, skip, hc_params_get()->watch_timeout, where_seen, &w, left);
        double now = hc_clock_now();
        for (int r = 0; r < n; r++) {
            if (skip[r])
                continue;
            if (left[r] || (!seen[r] && quiet_since[r] > 0 && now - quiet_since[r] > silent))
                dead[r] = 1;
            else if (!seen[r] && quiet_since[r] == 0)
                quiet_since[r] = now;
            else if (seen[r])
                quiet_since[r] = 0;
        }
        shrink_nap();
    }
    hcomm_status_t rs = hc_comm_root_start(c, id);
    hc_watch_lock();
    memcpy(alive, s->joined, (size_t)n);
    memcpy(s->alive, s->joined, (size_t)n);
    s->id      = *id;
    s->decided = rs == HCOMM_SUCCESS; /* else joiners time out; this rank fails now */
    hc_watch_unlock();
    st = rs;
out:
    if (st == HCOMM_ERR_NO_MEMORY && c->shrink != s)
        shrink_free(s);
    free(dead), free(skip), free(seen), free(left), free(quiet_since);
    return st;
}

hcomm_status_t hc_watch_shrink_agree(hcomm_comm_t c, const uint8_t *cand, uint8_t *alive,
                                     hcomm_unique_id_t *id)
{
    double         deadline = hc_clock_now() + c->timeout;
    double         silent   = HC_SHRINK_SILENT * hc_params_get()->watch_timeout;
    uint8_t       *left     = calloc((size_t)c->nranks, 1);
    uint8_t       *skip     = malloc((size_t)c->nranks);
    hcomm_status_t st       = HCOMM_ERR_TIMEOUT;
    if (c->nranks > HC_WATCH_SHRINK_MAX) {
        hc_error(INIT, "hcomm_comm_shrink: a failed communicator of more than %d ranks cannot "
                       "shrink (its answers would not fit)", HC_WATCH_SHRINK_MAX);
        free(left), free(skip);
        return HCOMM_ERR_UNSUPPORTED;
    }
    if (c->watch == NULL || left == NULL || skip == NULL) {
        hc_error(INIT,
                 "hcomm_comm_shrink: a failed communicator shrinks over the watch channel, "
                 "which %s",
                 c->watch == NULL ? "HCOMM_WATCH=0 turned off" : "is out of memory");
        free(left), free(skip);
        return c->watch == NULL ? HCOMM_ERR_UNSUPPORTED : HCOMM_ERR_NO_MEMORY;
    }
    for (int k = 0; k < c->nranks; k++) {
        if (!cand[k])
            continue;
        if (k == c->rank) {
            st = shrink_coordinate(c, cand, alive, id, deadline, silent);
            break;
        }
        shrink_reply_t rep         = {.alive = alive, .nranks = c->nranks};
        double         quiet_since = 0;
        /* once k took the join it decides within its own timeout, which may
         * have started after this rank's: wait for that too */
        int joined = 0;
        memset(skip, 1, (size_t)c->nranks);
        skip[k] = 0;
        for (;;) { /* ask k until it decides, or is found dead */
            double now = hc_clock_now();
            if (now > deadline + (joined ? c->timeout : 0))
                goto out;
            rep.got = 0, left[k] = 0;
            hc_watch_ask(c, HC_WATCH_SHRINK, skip, hc_params_get()->watch_timeout, shrink_reply,
                         &rep, left);
            if (rep.got && rep.status == HC_SHRINK_DECIDED) {
                *id = rep.id;
                shrink_keep(c, alive, id);
                st = alive[c->rank] ? HCOMM_SUCCESS : HCOMM_ERR_REMOTE;
                if (st != HCOMM_SUCCESS)
                    hc_error(INIT,
                             "hcomm_comm_shrink: rank %d decided without rank %d (it found "
                             "it dead)",
                             k, c->rank);
                goto out;
            }
            if (left[k] || (!rep.got && quiet_since > 0 && now - quiet_since > silent)) {
                hc_info(INIT, "hcomm_comm_shrink: rank %d is dead; the next rank coordinates", k);
                break;
            }
            joined      = joined || (rep.got && rep.status == HC_SHRINK_JOINED);
            quiet_since = rep.got ? 0 : quiet_since > 0 ? quiet_since : now;
            shrink_nap();
        }
    }
out:
    if (st == HCOMM_ERR_TIMEOUT)
        hc_error(INIT, "hcomm_comm_shrink: no agreement within the timeout (%g s)", c->timeout);
    free(left), free(skip);
    return st;
}
