/* fake_cuda.c - a CUDA stream without a GPU, for fake_cuda_check: linked
 * before the core library, it replaces the CUDA glue (src/overlap/overlap.h:
 * hc_stream_cuda_*), so hcomm_stream_create_cuda works on any handle. The
 * bracket callbacks run in order on one thread of their own, the first after
 * fake_cuda_delay seconds: a CUDA stream busy with earlier kernels. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "fake_cuda.h"

typedef struct cb {
    void (*fn)(void *);
    void      *arg;
    struct cb *next;
} cb_t;

double fake_cuda_delay;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t  g_cv = PTHREAD_COND_INITIALIZER;
static cb_t           *g_head, *g_tail;
static int             g_started;

static void *runner(void *arg)
{
    struct timespec ts = {(time_t)fake_cuda_delay,
                          (long)((fake_cuda_delay - (double)(time_t)fake_cuda_delay) * 1e9)};
    (void)arg;
    nanosleep(&ts, NULL);
    for (;;) {
        pthread_mutex_lock(&g_mu);
        while (g_head == NULL)
            pthread_cond_wait(&g_cv, &g_mu);
        cb_t *c = g_head;
        g_head  = c->next;
        if (g_head == NULL)
            g_tail = NULL;
        pthread_mutex_unlock(&g_mu);
        c->fn(c->arg);
        free(c);
    }
    return NULL;
}

int hc_stream_cuda_available(const char **why)
{
    *why = "";
    return 1;
}

int hc_stream_cuda_bracket(void *cuda_stream, void (*fn)(void *), void *arg)
{
    cb_t *c = calloc(1, sizeof(*c));
    (void)cuda_stream;
    if (c == NULL)
        return -1;
    c->fn  = fn;
    c->arg = arg;
    pthread_mutex_lock(&g_mu);
    if (!g_started) {
        pthread_t t;
        if (pthread_create(&t, NULL, runner, NULL) != 0) {
            pthread_mutex_unlock(&g_mu);
            free(c);
            return -1;
        }
        pthread_detach(t);
        g_started = 1;
    }
    if (g_tail != NULL)
        g_tail->next = c;
    else
        g_head = c;
    g_tail = c;
    pthread_cond_signal(&g_cv);
    pthread_mutex_unlock(&g_mu);
    return 0;
}

int hc_cuda_stream_id(void *cuda_stream, unsigned long long *id, const char **why)
{
    (void)cuda_stream;
    *id  = 1;
    *why = "";
    return 0;
}
