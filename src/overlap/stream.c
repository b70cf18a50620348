/* stream.c - streams: a FIFO of tasks run in order by a thread of the stream's
 * own. A requests task opens its requests' gates and progresses them until they
 * finish;
 * host functions run in place; event records and waits order streams against
 * each other. Every wait is bounded by HCOMM_TIMEOUT without progress. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/params.h"
#include "core/handles.h"
#include "overlap/overlap.h"

typedef enum { TASK_REQUESTS, TASK_HOST, TASK_STEP, TASK_RECORD, TASK_WAIT } task_kind_t;

struct hc_stream_task {
    hc_stream_task_t *next;
    task_kind_t       kind;
    hcomm_host_fn_t   fn;
    hcomm_status_t (*step)(void *, int skip);
    void             *arg;
    hc_event_t       *ev;
    hc_event_rec_t   *rec; /* record: the one it completes; wait: the one it waits for */
    int               refs;         /* the thread, and a CUDA callback on CUDA streams */
    int               go, finished; /* CUDA streams: the CUDA stream reached it; it ran */
    int                  late; /* skipped before the CUDA stream reached it (s->cuda_late) */
    struct hcomm_stream *owner;
    uint64_t             seq; /* s->queued when it was queued (its number, from 1) */
    size_t            nreqs;
    hcomm_request_t   reqs[];
};

struct hcomm_stream {
    pthread_mutex_t   mu;
    pthread_cond_t    work;  /* the thread: a task arrived, or stop */
    pthread_cond_t    done;  /* synchronize: a task finished */
    hc_stream_task_t *head, *tail;
    uint64_t          queued, finished;
    hcomm_status_t    error; /* first failure; sticky */
    uint64_t             nfailed;   /* tasks failed so far */
    hcomm_status_t       last_fail; /* the latest one's status */
    hcomm_request_t   last_req; /* held for hcomm_stream_last_request; under g_last_mu */
    struct hcomm_stream *live_next; /* g_live, under g_last_mu */
    int               stop;
    int                  entering; /* launches between hc_stream_enter and their push; atomic */
    pthread_t         thread;
    void             *cuda;    /* the cudaStream_t work is ordered with, or NULL */
    pthread_cond_t    cuda_cv; /* go / finished of tasks on a CUDA stream */
    int                  cuda_pending; /* their callbacks not yet returned: they use s */
    int                  cuda_skipped; /* tasks the CUDA stream never reached in time */
    int                  cuda_late;    /* of those, the ones whose callback has not come yet */
    int                  waiting_go;   /* the thread waits for the CUDA stream, in no task */
    uint64_t             unordered;    /* an event wait timed out: tasks queued up to this one
                                        * were to run after it, and do not */
};

/* Guards every stream's last_req and the list of live streams: the registry
 * that tells a handle from a destroyed or foreign pointer (hc_stream_check,
 * which never reads through a pointer it has not found there), and through
 * which a communicator's destroy takes back the holds streams keep on its
 * requests (hc_stream_forget_comm). A leaf lock: nothing else is taken under it. */
static pthread_mutex_t      g_last_mu = PTHREAD_MUTEX_INITIALIZER;
static struct hcomm_stream *g_live;

/* Replaces s's last request with req (NULL allowed); the old one, for the caller
 * to drop. */
static hcomm_request_t last_swap(hcomm_stream_t s, hcomm_request_t req)
{
    pthread_mutex_lock(&g_last_mu);
    hcomm_request_t old = s->last_req;
    s->last_req         = req;
    pthread_mutex_unlock(&g_last_mu);
    return old;
}

static void live_add(hcomm_stream_t s)
{
    pthread_mutex_lock(&g_last_mu);
    s->live_next = g_live;
    g_live       = s;
    pthread_mutex_unlock(&g_last_mu);
}

/* Takes s out of the registry, so that no launch enters it any more: 1, or 0
 * when it is not there (logged). */
static int live_remove(hcomm_stream_t s)
{
    int found = 0;

    pthread_mutex_lock(&g_last_mu);
    for (hcomm_stream_t *p = &g_live; *p != NULL && !found; p = &(*p)->live_next)
        if (*p == s) {
            *p    = s->live_next;
            found = 1;
            break;
        }
    pthread_mutex_unlock(&g_last_mu);
    if (!found)
        hc_error(STREAM, "hcomm_stream_destroy: stream %p is NULL, destroyed or not a stream",
                 (void *)s);
    return found;
}

void hc_stream_forget_comm(hcomm_comm_t comm)
{
    for (;;) {
        hcomm_request_t req = NULL;
        pthread_mutex_lock(&g_last_mu);
        for (hcomm_stream_t s = g_live; s != NULL && req == NULL; s = s->live_next)
            if (s->last_req != NULL && hc_request_comm(s->last_req) == comm) {
                req         = s->last_req;
                s->last_req = NULL;
            }
        pthread_mutex_unlock(&g_last_mu);
        if (req == NULL)
            return;
        hc_request_drop(req); /* it lives on while its task still runs it */
    }
}

static void cond_init(pthread_cond_t *c)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}

/* Whether s is a live stream; enter: counted as entering it (under the lock:
 * destroy unlinks first, then waits for those). */
static hcomm_status_t stream_find(hcomm_stream_t s, const char *what, int enter)
{
    int live = 0;

    if (s != NULL) {
        pthread_mutex_lock(&g_last_mu);
        for (hcomm_stream_t p = g_live; p != NULL && !live; p = p->live_next)
            live = p == s;
        if (live && enter)
            __atomic_add_fetch(&s->entering, 1, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&g_last_mu);
    }
    if (!live) {
        hc_error(STREAM, "%s: stream %p is NULL, destroyed or not a stream", what, (void *)s);
        return HCOMM_ERR_INVALID_ARG;
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_stream_check(hcomm_stream_t s, const char *what)
{
    return stream_find(s, what, 0);
}

hcomm_status_t hc_stream_enter(hcomm_stream_t s, const char *what)
{
    return stream_find(s, what, 1);
}

void hc_stream_leave(hcomm_stream_t s)
{
    __atomic_sub_fetch(&s->entering, 1, __ATOMIC_RELEASE);
}

static hc_stream_task_t *task_new(task_kind_t kind, size_t nreqs)
{
    hc_stream_task_t *t = calloc(1, sizeof(*t) + nreqs * sizeof(hcomm_request_t));
    if (t == NULL)
        hc_error(STREAM, "stream: out of memory for a task");
    else
        t->kind = kind, t->nreqs = nreqs, t->refs = 1;
    return t;
}

hc_stream_task_t *hc_stream_task_requests(size_t nreqs)
{
    return task_new(TASK_REQUESTS, nreqs);
}

void hc_stream_task_set_request(hc_stream_task_t *t, size_t i, hcomm_request_t req)
{
    t->reqs[i] = req;
}

void hc_stream_task_shrink(hc_stream_task_t *t, size_t nreqs)
{
    t->nreqs = nreqs;
}

void hc_stream_task_free(hc_stream_task_t *t)
{
    free(t);
}

/* Drops one reference; the caller holds s->mu. */
static void task_unref(hc_stream_task_t *t)
{
    if (--t->refs == 0)
        free(t);
}

/* The CUDA stream's callback: the work before the task on the CUDA stream is
 * done, so the task may run; the CUDA stream's later work waits until it has
 * (the callback returns then), at most HCOMM_TIMEOUT, after which the stream
 * fails (its error is set even if the task succeeds later). */
static void stream_cuda_enter(void *arg)
{
    hc_stream_task_t *t       = arg;
    hcomm_stream_t    s       = t->owner;
    struct timespec   until   = hc_clock_abs_in(hc_params_get()->timeout);
    int               expired = 0;

    pthread_mutex_lock(&s->mu);
    t->go = 1;
    if (t->late) /* skipped already: the tasks behind it may be reached again */
        s->cuda_late--;
    pthread_cond_broadcast(&s->cuda_cv);
    while (!t->finished && !expired)
        expired = pthread_cond_timedwait(&s->cuda_cv, &s->mu, &until) != 0;
    if (!t->finished) {
        /* the CUDA stream's later work runs on what the task has not made
         * yet: the stream fails, as synchronize and query then say */
        hc_error(STREAM,
                 "CUDA stream %p: an hcomm task did not finish within HCOMM_TIMEOUT; "
                 "the CUDA stream goes on, and hcomm stream %p fails",
                 s->cuda, (void *)s);
        if (s->error == HCOMM_SUCCESS)
            s->error = HCOMM_ERR_TIMEOUT;
        s->nfailed++;
        s->last_fail = HCOMM_ERR_TIMEOUT;
    }
    task_unref(t);
    s->cuda_pending--;
    pthread_cond_broadcast(&s->cuda_cv); /* destroy may wait for this */
    pthread_mutex_unlock(&s->mu);
}

void hc_stream_push(hcomm_stream_t s, hc_stream_task_t *t)
{
    hcomm_request_t dropped = NULL;

    pthread_mutex_lock(&s->mu);
    if (t->kind == TASK_REQUESTS) {
        /* the stream keeps a hold on its last request for hcomm_stream_last_request
         * (a group's several requests have no one handle); taken before it is
         * published, as hc_stream_forget_comm may drop it at once */
        if (t->nreqs == 1)
            hc_request_hold(t->reqs[0]);
        dropped = last_swap(s, t->nreqs == 1 ? t->reqs[0] : NULL);
    }
    t->next = NULL;
    if (s->cuda != NULL) { /* the CUDA stream gets a callback that brackets the task */
        t->refs  = 2;
        t->owner = s;
        s->cuda_pending++;
        if (hc_stream_cuda_bracket(s->cuda, stream_cuda_enter, t) != 0) {
            s->cuda_pending--;
            t->refs = 1, t->go = 1;
            if (s->error == HCOMM_SUCCESS)
                s->error = HCOMM_ERR_SYSTEM;
            s->nfailed++;
            s->last_fail = HCOMM_ERR_SYSTEM;
        }
    }
    if (s->tail != NULL)
        s->tail->next = t;
    else
        s->head = t;
    s->tail = t;
    t->seq  = ++s->queued;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    hc_stream_leave(s); /* s may be freed from here */
    if (dropped != NULL)
        hc_request_drop(dropped);
}

static void stream_fail(hcomm_stream_t s, hcomm_status_t st)
{
    pthread_mutex_lock(&s->mu);
    if (s->error == HCOMM_SUCCESS)
        s->error = st;
    s->nfailed++;
    s->last_fail = st;
    pthread_mutex_unlock(&s->mu);
}

uint64_t hc_stream_failures(hcomm_stream_t s, hcomm_status_t *last)
{
    pthread_mutex_lock(&s->mu);
    uint64_t n = s->nfailed;
    if (last != NULL)
        *last = s->last_fail;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* Opens the gates, then progresses every request until all finished; their
 * communicators fail them after HCOMM_TIMEOUT without progress. */
static hcomm_status_t run_requests(hc_stream_task_t *t)
{
    hcomm_status_t first = HCOMM_SUCCESS;

    for (size_t i = 0; i < t->nreqs; i++)
        hc_request_open_gate(t->reqs[i]);
    hc_requests_wait(t->reqs, t->nreqs);
    for (size_t i = 0; i < t->nreqs; i++) {
        hcomm_status_t st = hc_request_status(t->reqs[i]);
        if (st != HCOMM_SUCCESS && first == HCOMM_SUCCESS)
            first = st;
        hc_request_drop(t->reqs[i]);
    }
    return first;
}

static void run_task(hcomm_stream_t s, hc_stream_task_t *t)
{
    hcomm_status_t st = HCOMM_SUCCESS;

    switch (t->kind) {
    case TASK_REQUESTS: st = run_requests(t); break;
    case TASK_HOST: t->fn(t->arg); break;
    case TASK_STEP:
        st = t->step(t->arg, 0);
        break;
    case TASK_RECORD:
        hc_event_complete(t->ev, t->rec);
        hc_event_unref(t->ev);
        break;
    case TASK_WAIT:
        if (hc_event_wait(t->ev, t->rec, hc_params_get()->timeout) != 0) {
            hc_error(STREAM,
                     "stream %p: the event it waits for did not complete within "
                     "HCOMM_TIMEOUT (%g s); the operations queued behind it fail",
                     (void *)s, hc_params_get()->timeout);
            st = HCOMM_ERR_TIMEOUT;
            /* what is queued from now on runs: the program may go on with the
             * stream once it saw the error (sticky all the same) */
            pthread_mutex_lock(&s->mu);
            s->unordered = s->queued;
            pthread_mutex_unlock(&s->mu);
        }
        if (t->rec != NULL)
            hc_event_release(t->ev, t->rec);
        hc_event_unref(t->ev);
        break;
    }
    if (st != HCOMM_SUCCESS)
        stream_fail(s, st);
}

/* CUDA streams: waits (s->mu held) until the CUDA stream reached the task, at
 * most HCOMM_TIMEOUT; 1 to run it, 0 when it never came. Not at all while an
 * earlier task's callback is still to come: CUDA runs callbacks in order, so
 * this one's cannot come first (waiting a full timeout for each task behind a
 * stalled one made synchronize report the stream stuck). */
static int stream_wait_go(hcomm_stream_t s, hc_stream_task_t *t)
{
    struct timespec until   = hc_clock_abs_in(hc_params_get()->timeout);
    int             expired = 0;

    if (s->cuda == NULL)
        return 1;
    s->waiting_go = 1;
    while (!t->go && s->cuda_late == 0 && !expired)
        expired = pthread_cond_timedwait(&s->cuda_cv, &s->mu, &until) != 0;
    s->waiting_go = 0;
    if (t->go)
        return 1;
    if (s->cuda_late == 0)
        hc_error(STREAM,
                 "CUDA stream %p did not reach an hcomm task within HCOMM_TIMEOUT (%g s); it "
                 "and the tasks behind it fail until the CUDA stream catches up",
                 s->cuda, hc_params_get()->timeout);
    t->late = 1;
    s->cuda_late++;
    return 0;
}

/* A task the CUDA stream never reached, or one behind an event wait that timed
 * out: fails instead of running out of order (a request's communicator
 * fails, so its peers do not wait forever; its buffers may not be ready). */
static void stream_skip(hcomm_stream_t s, hc_stream_task_t *t)
{
    stream_fail(s, HCOMM_ERR_TIMEOUT);
    for (size_t i = 0; i < t->nreqs; i++) {
        hc_comm_set_failed(hc_request_comm(t->reqs[i]), HCOMM_ERR_TIMEOUT);
        hc_request_open_gate(t->reqs[i]);
        hc_request_wait(t->reqs[i]);
        hc_request_drop(t->reqs[i]);
    }
    if (t->kind == TASK_STEP) /* its call's later steps count on it */
        (void)t->step(t->arg, 1);
    if (t->ev != NULL) {
        if (t->rec != NULL) /* a skipped record never completes: its waiters time out */
            hc_event_release(t->ev, t->rec);
        hc_event_unref(t->ev);
    }
}

static void *stream_main(void *arg)
{
    hcomm_stream_t s = arg;

    hc_comm_idle_nap_thread(); /* the caller computes beside this thread */
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->head == NULL && !s->stop)
            pthread_cond_wait(&s->work, &s->mu);
        if (s->head == NULL)
            break;
        hc_stream_task_t *t = s->head;
        int               go = stream_wait_go(s, t);
        pthread_mutex_unlock(&s->mu);
        if (go && (t->seq > s->unordered || t->kind == TASK_HOST))
            run_task(s, t); /* a host function runs: it may query the stream's error */
        else
            stream_skip(s, t);
        pthread_mutex_lock(&s->mu);
        s->cuda_skipped += !go;
        s->head = t->next;
        if (s->head == NULL)
            s->tail = NULL;
        s->finished++;
        t->finished = 1;
        pthread_cond_broadcast(&s->done);
        pthread_cond_broadcast(&s->cuda_cv);
        task_unref(t);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static hcomm_status_t stream_create(void *cuda, hcomm_stream_t *out)
{
    hcomm_stream_t s;

    if (out == NULL) {
        hc_error(STREAM, "hcomm_stream_create: NULL output");
        return HCOMM_ERR_INVALID_ARG;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        hc_error(STREAM, "hcomm_stream_create: out of memory");
        return HCOMM_ERR_NO_MEMORY;
    }
    pthread_mutex_init(&s->mu, NULL);
    cond_init(&s->work);
    cond_init(&s->done);
    cond_init(&s->cuda_cv);
    s->cuda = cuda;
    int rc  = pthread_create(&s->thread, NULL, stream_main, s);
    if (rc != 0) {
        hc_error(STREAM, "hcomm_stream_create: pthread_create: %s", strerror(rc));
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->work);
        pthread_cond_destroy(&s->done);
        pthread_cond_destroy(&s->cuda_cv);
        free(s);
        return HCOMM_ERR_SYSTEM;
    }
    live_add(s);
    *out = s;
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_stream_create(hcomm_stream_t *out)
{
    return stream_create(NULL, out);
}

hcomm_status_t hcomm_stream_create_cuda(void *cuda_stream, hcomm_stream_t *out)
{
    const char *why;
    if (!hc_stream_cuda_available(&why)) {
        hc_error(STREAM, "hcomm_stream_create_cuda: %s", why);
        return HCOMM_ERR_UNSUPPORTED;
    }
    if (cuda_stream == NULL) {
        hc_error(STREAM, "hcomm_stream_create_cuda: NULL CUDA stream (the legacy default stream "
                       "cannot be bracketed; create one)");
        return HCOMM_ERR_INVALID_ARG;
    }
    return stream_create(cuda_stream, out);
}

/* Waits until the tasks queued before the call have finished; the timeout
 * restarts whenever one finishes. *stuck: none finished within it (the
 * status is then HCOMM_ERR_TIMEOUT, which a task that timed out also gives:
 * only *stuck tells them apart). */
static hcomm_status_t stream_sync(hcomm_stream_t s, int *stuck)
{
    double         timeout = hc_params_get()->timeout;
    hcomm_status_t st;

    *stuck = 0;
    pthread_mutex_lock(&s->mu);
    uint64_t target = s->queued, seen = s->finished;
    while (s->finished < target) {
        struct timespec until = hc_clock_abs_in(timeout);
        /* waiting for the CUDA stream is bounded by HCOMM_TIMEOUT on its own
         * (the task then fails), and once it gave up the tasks behind are
         * skipped at once (cuda_late): not stuck inside a task, though the
         * two equal timeouts may end in either order */
        if (pthread_cond_timedwait(&s->done, &s->mu, &until) != 0 && s->finished == seen &&
            !s->waiting_go && s->cuda_late == 0) {
            pthread_mutex_unlock(&s->mu);
            hc_error(STREAM, "stream %p: no queued work finished within HCOMM_TIMEOUT (%g s)",
                     (void *)s, timeout);
            *stuck = 1;
            return HCOMM_ERR_TIMEOUT;
        }
        seen = s->finished;
    }
    st = s->error;
    pthread_mutex_unlock(&s->mu);
    return st;
}

hcomm_status_t hcomm_stream_synchronize(hcomm_stream_t s)
{
    int stuck;
    return hc_stream_sync(s, &stuck);
}

/* A host function on s waiting for s would wait for itself. */
static int on_own_thread(hcomm_stream_t s, const char *what)
{
    if (!pthread_equal(pthread_self(), s->thread))
        return 0;
    hc_error(STREAM,
             "%s: called by a host function on stream %p itself, which would wait for "
             "itself; call it from another thread",
             what, (void *)s);
    return 1;
}

hcomm_status_t hc_stream_sync(hcomm_stream_t s, int *stuck)
{
    hcomm_status_t st = hc_stream_check(s, "hcomm_stream_synchronize");
    *stuck            = 0;
    if (st == HCOMM_SUCCESS && on_own_thread(s, "hcomm_stream_synchronize"))
        return HCOMM_ERR_INVALID_USAGE;
    return st != HCOMM_SUCCESS ? st : stream_sync(s, stuck);
}

hcomm_status_t hcomm_stream_query(hcomm_stream_t s)
{
    hcomm_status_t st = hc_stream_check(s, "hcomm_stream_query");
    if (st != HCOMM_SUCCESS)
        return st;
    pthread_mutex_lock(&s->mu);
    st = s->error != HCOMM_SUCCESS ? s->error
         : s->finished < s->queued ? HCOMM_IN_PROGRESS
                                   : HCOMM_SUCCESS;
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* Waits until every CUDA callback of s has returned, at most HCOMM_TIMEOUT
 * (none for a task the CUDA stream never reached: its callback may come any
 * time); 0, or -1 while some are still to come. */
static int stream_cuda_settle(hcomm_stream_t s)
{
    struct timespec until   = hc_clock_abs_in(hc_params_get()->timeout);
    int             expired = 0, left;

    pthread_mutex_lock(&s->mu);
    while (s->cuda_pending > 0 && s->cuda_skipped == 0 && !expired)
        expired = pthread_cond_timedwait(&s->cuda_cv, &s->mu, &until) != 0;
    left = s->cuda_pending;
    pthread_mutex_unlock(&s->mu);
    return left > 0 ? -1 : 0;
}

/* Waits until the launches that found s live have queued their task, at most
 * HCOMM_TIMEOUT: 0, or -1. (They hold no lock the caller waits for: the
 * window covers a collective's queuing on its communicator at most.) */
static int stream_wait_entering(hcomm_stream_t s)
{
    double          until = hc_clock_now() + hc_params_get()->timeout;
    struct timespec nap   = {0, 50000};

    while (__atomic_load_n(&s->entering, __ATOMIC_ACQUIRE) > 0) {
        if (hc_clock_now() > until)
            return -1;
        nanosleep(&nap, NULL);
    }
    return 0;
}

hcomm_status_t hcomm_stream_destroy(hcomm_stream_t s)
{
    hcomm_status_t st = hc_stream_check(s, "hcomm_stream_destroy");
    if (st != HCOMM_SUCCESS)
        return st;
    if (on_own_thread(s, "hcomm_stream_destroy"))
        return HCOMM_ERR_INVALID_USAGE;
    /* out of the registry first: a launch racing the destroy is either
     * refused or queued before the sync below looks (it used to be accepted
     * and never run, or queued into the freed stream) */
    if (!live_remove(s))
        return HCOMM_ERR_INVALID_ARG; /* another thread destroyed it meanwhile */
    if (stream_wait_entering(s) != 0) {
        live_add(s);
        hc_error(STREAM,
                 "hcomm_stream_destroy: a launch onto stream %p did not finish queuing "
                 "within HCOMM_TIMEOUT; not destroyed",
                 (void *)s);
        return HCOMM_ERR_TIMEOUT;
    }
    int stuck;
    st = stream_sync(s, &stuck);
    /* Only a wait that timed out means the thread may still be inside a task;
     * a task that failed with HCOMM_ERR_TIMEOUT (a peer stopped) is finished,
     * and the stream is freed as any other (the kill campaign found streams
     * leaked, with their threads, after every such failure). */
    if (stuck) {
        /* its thread may still be inside a task: a retry may free it */
        live_add(s);
        hc_error(STREAM, "hcomm_stream_destroy: stream %p is stuck; not freed", (void *)s);
        return st;
    }
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_lock(&g_last_mu);
    hcomm_request_t last = s->last_req;
    s->last_req          = NULL;
    pthread_mutex_unlock(&g_last_mu);
    pthread_join(s->thread, NULL);
    if (last != NULL)
        hc_request_drop(last);
    if (stream_cuda_settle(s) != 0) {
        /* a CUDA callback may still come and use s: leave it allocated */
        hc_error(STREAM,
                 "hcomm_stream_destroy: CUDA stream %p has not reached %d of its "
                 "callbacks; stream %p not freed",
                 s->cuda, s->cuda_pending, (void *)s);
        return st;
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->done);
    pthread_cond_destroy(&s->cuda_cv);
    free(s);
    return st;
}

hcomm_status_t hcomm_stream_last_request(hcomm_stream_t s, hcomm_request_t *req)
{
    hcomm_status_t st = hc_stream_check(s, "hcomm_stream_last_request");
    if (st != HCOMM_SUCCESS)
        return st;
    if (req == NULL) {
        hc_error(STREAM, "hcomm_stream_last_request: NULL request pointer");
        return HCOMM_ERR_INVALID_ARG;
    }
    hcomm_request_t last = last_swap(s, NULL);
    if (last == NULL) {
        hc_error(STREAM, "hcomm_stream_last_request: no operation queued since the last request "
                       "(or its communicator was destroyed)");
        return HCOMM_ERR_INVALID_USAGE;
    }
    /* the user's now, as a nonblocking call's: destroy does not wait for it */
    hc_request_give_user(last);
    *req = last;
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_launch_host_func(hcomm_stream_t s, hcomm_host_fn_t fn, void *arg)
{
    hcomm_status_t st = hc_stream_enter(s, "hcomm_launch_host_func");
    if (st != HCOMM_SUCCESS)
        return st;
    if (fn == NULL) {
        hc_stream_leave(s);
        hc_error(STREAM, "hcomm_launch_host_func: NULL function");
        return HCOMM_ERR_INVALID_ARG;
    }
    hc_stream_task_t *t = task_new(TASK_HOST, 0);
    if (t == NULL) {
        hc_stream_leave(s);
        return HCOMM_ERR_NO_MEMORY;
    }
    t->fn  = fn;
    t->arg = arg;
    hc_stream_push(s, t);
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_stream_launch_step(hcomm_stream_t s, hcomm_status_t (*fn)(void *, int), void *arg)
{
    hcomm_status_t st = hc_stream_enter(s, "hcomm stream step");
    if (st != HCOMM_SUCCESS)
        return st;
    hc_stream_task_t *t = task_new(TASK_STEP, 0);
    if (t == NULL) {
        hc_stream_leave(s);
        return HCOMM_ERR_NO_MEMORY;
    }
    t->step = fn;
    t->arg  = arg;
    hc_stream_push(s, t);
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_event_record(hcomm_event_t ev, hcomm_stream_t s)
{
    hcomm_status_t st = hc_stream_enter(s, "hcomm_event_record");
    if (st != HCOMM_SUCCESS)
        return st;
    if ((st = hc_event_check(ev, "hcomm_event_record")) != HCOMM_SUCCESS) {
        hc_stream_leave(s);
        return st;
    }
    hc_stream_task_t *t = task_new(TASK_RECORD, 0);
    if (t == NULL || (t->rec = hc_event_new_record(ev)) == NULL) {
        free(t);
        hc_stream_leave(s);
        return HCOMM_ERR_NO_MEMORY;
    }
    hc_event_ref(ev);
    t->ev = ev;
    hc_stream_push(s, t);
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_stream_wait_event(hcomm_stream_t s, hcomm_event_t ev)
{
    hcomm_status_t st = hc_stream_enter(s, "hcomm_stream_wait_event");
    if (st != HCOMM_SUCCESS)
        return st;
    if ((st = hc_event_check(ev, "hcomm_stream_wait_event")) != HCOMM_SUCCESS) {
        hc_stream_leave(s);
        return st;
    }
    hc_stream_task_t *t = task_new(TASK_WAIT, 0);
    if (t == NULL) {
        hc_stream_leave(s);
        return HCOMM_ERR_NO_MEMORY;
    }
    hc_event_ref(ev);
    t->ev  = ev;
    t->rec = hc_event_capture(ev);
    hc_stream_push(s, t);
    return HCOMM_SUCCESS;
}
