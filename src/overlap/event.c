/* event.c - events: each record is an object of its own that completes when
 * the recording stream reaches it; a wait captures the event's latest record
 * and waits for that one (CUDA semantics), whatever later records on other
 * streams do. Waiters (stream threads, hcomm_event_synchronize) wait on a
 * condition variable. Events are reference-counted so that one destroyed while
 * streams still hold tasks on it lives until those tasks are done. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/params.h"
#include "overlap/overlap.h"

struct hc_event_rec {
    int done; /* the recording stream reached it */
    int refs; /* the event (while latest), the record task, waiters; under ev->mu */
};

struct hcomm_event {
    struct hcomm_event *live_next; /* g_live, under g_live_mu, until hcomm_event_destroy */
    atomic_int          refs;
    pthread_mutex_t     mu;
    pthread_cond_t      cv;
    hc_event_rec_t     *last; /* the latest record, or NULL: never recorded */
};

/* The caller holds ev->mu. */
static void rec_unref(hc_event_rec_t *r)
{
    if (r != NULL && --r->refs == 0)
        free(r);
}

/* The events the user holds (created, not yet destroyed): a handle is looked
 * up here before anything is read through it. A leaf lock. */
static pthread_mutex_t     g_live_mu = PTHREAD_MUTEX_INITIALIZER;
static struct hcomm_event *g_live;

/* Whether ev is in the registry; with unlink, takes it out. */
static int live_find(hcomm_event_t ev, int unlink)
{
    int found = 0;

    pthread_mutex_lock(&g_live_mu);
    for (struct hcomm_event **p = &g_live; *p != NULL; p = &(*p)->live_next)
        if (*p == ev) {
            found = 1;
            if (unlink)
                *p = ev->live_next;
            break;
        }
    pthread_mutex_unlock(&g_live_mu);
    return found;
}

hcomm_status_t hc_event_check(hcomm_event_t ev, const char *what)
{
    if (ev == NULL || !live_find(ev, 0)) {
        hc_error(STREAM, "%s: event %p is NULL, destroyed or not an event", what, (void *)ev);
        return HCOMM_ERR_INVALID_ARG;
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_event_create(hcomm_event_t *out)
{
    pthread_condattr_t a;
    hcomm_event_t      ev;

    if (out == NULL) {
        hc_error(STREAM, "hcomm_event_create: NULL output");
        return HCOMM_ERR_INVALID_ARG;
    }
    ev = calloc(1, sizeof(*ev));
    if (ev == NULL) {
        hc_error(STREAM, "hcomm_event_create: out of memory");
        return HCOMM_ERR_NO_MEMORY;
    }
    pthread_mutex_init(&ev->mu, NULL);
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&ev->cv, &a);
    pthread_condattr_destroy(&a);
    atomic_init(&ev->refs, 1);
    pthread_mutex_lock(&g_live_mu);
    ev->live_next = g_live;
    g_live        = ev;
    pthread_mutex_unlock(&g_live_mu);
    *out = ev;
    return HCOMM_SUCCESS;
}

void hc_event_ref(hc_event_t *ev)
{
    atomic_fetch_add(&ev->refs, 1);
}

void hc_event_unref(hc_event_t *ev)
{
    if (atomic_fetch_sub(&ev->refs, 1) != 1)
        return;
    rec_unref(ev->last); /* no one else can hold ev->mu now */
    pthread_mutex_destroy(&ev->mu);
    pthread_cond_destroy(&ev->cv);
    free(ev);
}

hcomm_status_t hcomm_event_destroy(hcomm_event_t ev)
{
    if (ev == NULL || !live_find(ev, 1)) { /* found and unlinked at once: destroyed once */
        hc_error(STREAM, "hcomm_event_destroy: event %p is NULL, destroyed or not an event",
                 (void *)ev);
        return HCOMM_ERR_INVALID_ARG;
    }
    hc_event_unref(ev); /* the user's handle is gone; tasks keep their references */
    return HCOMM_SUCCESS;
}

hc_event_rec_t *hc_event_new_record(hc_event_t *ev)
{
    hc_event_rec_t *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        hc_error(STREAM, "hcomm_event_record: out of memory");
        return NULL;
    }
    r->refs = 2; /* the event's, the caller's */
    pthread_mutex_lock(&ev->mu);
    rec_unref(ev->last);
    ev->last = r;
    pthread_mutex_unlock(&ev->mu);
    return r;
}

hc_event_rec_t *hc_event_capture(hc_event_t *ev)
{
    pthread_mutex_lock(&ev->mu);
    hc_event_rec_t *r = ev->last;
    if (r != NULL)
        r->refs++;
    pthread_mutex_unlock(&ev->mu);
    return r;
}

void hc_event_release(hc_event_t *ev, hc_event_rec_t *r)
{
    pthread_mutex_lock(&ev->mu);
    rec_unref(r);
    pthread_mutex_unlock(&ev->mu);
}

void hc_event_complete(hc_event_t *ev, hc_event_rec_t *r)
{
    pthread_mutex_lock(&ev->mu);
    r->done = 1;
    pthread_cond_broadcast(&ev->cv);
    rec_unref(r);
    pthread_mutex_unlock(&ev->mu);
}

int hc_event_wait(hc_event_t *ev, hc_event_rec_t *r, double timeout)
{
    struct timespec until = hc_clock_abs_in(timeout);
    int             rc    = 0;

    if (r == NULL)
        return 0;
    pthread_mutex_lock(&ev->mu);
    while (!r->done && rc == 0)
        rc = pthread_cond_timedwait(&ev->cv, &ev->mu, &until);
    rc = r->done ? 0 : -1;
    pthread_mutex_unlock(&ev->mu);
    return rc;
}

hcomm_status_t hcomm_event_query(hcomm_event_t ev)
{
    hcomm_status_t st = hc_event_check(ev, "hcomm_event_query");
    if (st != HCOMM_SUCCESS)
        return st;
    pthread_mutex_lock(&ev->mu);
    st = ev->last == NULL || ev->last->done ? HCOMM_SUCCESS : HCOMM_IN_PROGRESS;
    pthread_mutex_unlock(&ev->mu);
    return st;
}

hcomm_status_t hcomm_event_synchronize(hcomm_event_t ev)
{
    hcomm_status_t st = hc_event_check(ev, "hcomm_event_synchronize");
    if (st != HCOMM_SUCCESS)
        return st;
    double          timeout = hc_params_get()->timeout;
    hc_event_rec_t *r       = hc_event_capture(ev);
    int             rc      = hc_event_wait(ev, r, timeout);
    if (r != NULL)
        hc_event_release(ev, r);
    if (rc != 0) {
        hc_error(STREAM, "hcomm_event_synchronize: not complete within HCOMM_TIMEOUT (%g s)",
                 timeout);
        return HCOMM_ERR_TIMEOUT;
    }
    return HCOMM_SUCCESS;
}
