/* bucket.c - gradient buckets (hcomm_bucket.h) on the public stream API.
 *
 * The caller's thread packs each tensor into its bucket's fusion buffer the
 * moment it is marked ready, so the tensor's memory is read once and the
 * caller goes on producing gradients. A complete bucket whose predecessors are
 * all launched is queued on the stream: an in-place allreduce (AVG) of the
 * fusion buffer (or the compressed one, through the bucket's own compression
 * state), then a host function that unpacks it into the tensors. Since every
 * rank launches buckets strictly in bucket order, every rank issues the same
 * collectives in the same order. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/params.h"
#include "device/device.h"
#include "hcomm_bucket.h"
#include "overlap/overlap.h"

#define FIRST_BUCKET_CAP  ((size_t)1 << 20) /* as DDP: the first bucket starts early */

typedef struct bucket {
    struct hcomm_buckets *owner;
    int                   first, last; /* tensors [first, last) */
    int                   nready;      /* this step */
    size_t                count;       /* elements */
    void                 *fusion;
    hcomm_compress_t      cstate;      /* NULL: plain average */
    /* written on the stream's thread (mark, unpack), read after
     * hcomm_stream_synchronize, which orders the two */
    uint64_t              fails0; /* the stream's failures before its allreduce */
    hcomm_status_t        error;
} bucket_t;

struct hcomm_buckets {
    struct hcomm_buckets *live_next; /* g_live, under g_live_mu */
    hcomm_comm_t   comm;
    hcomm_stream_t stream;
    hcomm_dtype_t  dtype;
    size_t         esize;
    int            ntensors, nbuckets;
    void         **tensors;
    size_t        *counts;
    size_t        *offset;    /* element offset of each tensor in its bucket */
    int           *bucket_of; /* each tensor's bucket */
    unsigned char *ready;     /* this step */
    int            nready;    /* tensors marked this step */
    int            next;      /* the next bucket to launch */
    hcomm_status_t error;     /* the step's first launch failure */
    bucket_t      *b;
};

/* The live bucket sets: a handle is checked against them, never read before
 * it is found there (a destroyed one's memory is freed; a magic word in it was
 * read after free). */
static pthread_mutex_t       g_live_mu = PTHREAD_MUTEX_INITIALIZER;
static struct hcomm_buckets *g_live;

static void live_add(hcomm_buckets_t bk)
{
    pthread_mutex_lock(&g_live_mu);
    bk->live_next = g_live;
    g_live        = bk;
    pthread_mutex_unlock(&g_live_mu);
}

static void live_remove(hcomm_buckets_t bk)
{
    pthread_mutex_lock(&g_live_mu);
    for (struct hcomm_buckets **p = &g_live; *p != NULL; p = &(*p)->live_next)
        if (*p == bk) {
            *p = bk->live_next;
            break;
        }
    pthread_mutex_unlock(&g_live_mu);
}

static hcomm_status_t check(hcomm_buckets_t bk, const char *what)
{
    int live = 0;
    pthread_mutex_lock(&g_live_mu);
    for (struct hcomm_buckets *p = g_live; p != NULL && !live; p = p->live_next)
        live = p == bk;
    pthread_mutex_unlock(&g_live_mu);
    if (!live) {
        hc_error(STREAM, "%s: buckets %p are NULL, destroyed or not buckets", what, (void *)bk);
        return HCOMM_ERR_INVALID_ARG;
    }
    return HCOMM_SUCCESS;
}

/* Tensors in order; a new bucket starts when a tensor with data would push a
 * non-empty bucket past its cap, so a tensor above the cap is alone (empty
 * tensors join whatever bucket is open). Counts buckets into bk->nbuckets and,
 * when b is not NULL, fills it. */
static void cut(hcomm_buckets_t bk, bucket_t *b)
{
    size_t cap   = hc_params_get()->bucket_bytes;
    size_t first = cap < FIRST_BUCKET_CAP ? cap : FIRST_BUCKET_CAP;
    size_t bytes = 0, elems = 0;
    int    nb    = 0;

    for (int i = 0; i < bk->ntensors; i++) {
        size_t tb = bk->counts[i] * bk->esize;
        if (i == 0 || (tb > 0 && bytes > 0 && bytes + tb > (nb == 1 ? first : cap))) {
            if (b != NULL && nb > 0)
                b[nb - 1].last = i, b[nb - 1].count = elems;
            if (b != NULL)
                b[nb].first = i;
            nb++;
            bytes = elems = 0;
        }
        if (b != NULL)
            bk->offset[i] = elems, bk->bucket_of[i] = nb - 1;
        bytes += tb;
        elems += bk->counts[i];
    }
    if (b != NULL)
        b[nb - 1].last = bk->ntensors, b[nb - 1].count = elems;
    bk->nbuckets = nb;
}

static hcomm_status_t check_args(hcomm_comm_t comm, int ntensors, void *const *tensors,
                                 const size_t *counts, hcomm_dtype_t dtype,
                                 const hcomm_compress_config_t *cfg, hcomm_stream_t stream,
                                 hcomm_buckets_t *out)
{
    int nranks;
    hcomm_status_t st = hcomm_comm_size(comm, &nranks);
    if (st != HCOMM_SUCCESS)
        return st;
    if (out == NULL || stream == NULL || ntensors < 1 || tensors == NULL || counts == NULL) {
        hc_error(STREAM, "hcomm_buckets_create: %s", out == NULL ? "NULL output"
                 : stream == NULL ? "a stream is required" : ntensors < 1 ? "no tensors"
                 : "NULL tensor or count list");
        return HCOMM_ERR_INVALID_ARG;
    }
    if (cfg != NULL && (cfg->kind < HCOMM_COMPRESS_NONE || cfg->kind >= HCOMM_COMPRESS_COUNT)) {
        hc_error(STREAM, "hcomm_buckets_create: invalid compression kind %d", (int)cfg->kind);
        return HCOMM_ERR_INVALID_ARG;
    }
    size_t es = hcomm_dtype_size(dtype);
    if (es == 0) {
        hc_error(STREAM, "hcomm_buckets_create: invalid datatype %d", (int)dtype);
        return HCOMM_ERR_INVALID_DTYPE;
    }
    size_t total = 0;
    for (int i = 0; i < ntensors; i++) {
        if (counts[i] > SIZE_MAX / es || total > SIZE_MAX - counts[i] * es) {
            hc_error(STREAM, "hcomm_buckets_create: tensor %d: %zu elements overflow", i,
                     counts[i]);
            return HCOMM_ERR_OVERFLOW;
        }
        total += counts[i] * es;
        if (counts[i] != 0 && tensors[i] == NULL) {
            hc_error(STREAM, "hcomm_buckets_create: tensor %d: NULL with %zu elements", i,
                     counts[i]);
            return HCOMM_ERR_NULL_BUFFER;
        }
    }
    return HCOMM_SUCCESS;
}

static void buckets_free(hcomm_buckets_t bk)
{
    for (int i = 0; bk->b != NULL && i < bk->nbuckets; i++) {
        free(bk->b[i].fusion);
        hcomm_compress_destroy(bk->b[i].cstate);
    }
    free(bk->b);
    free(bk->ready);
    free(bk->bucket_of);
    free(bk->offset);
    free(bk->counts);
    free(bk->tensors);
    free(bk);
}

/* Fusion buffers (and compression states) for the cut buckets. */
static hcomm_status_t buckets_alloc(hcomm_buckets_t bk, const hcomm_compress_config_t *cfg)
{
    for (int i = 0; i < bk->nbuckets; i++) {
        bucket_t *b = &bk->b[i];
        b->owner    = bk;
        if (b->count == 0)
            continue; /* only empty tensors: nothing to send */
        b->fusion = aligned_alloc(64, (b->count * bk->esize + 63) / 64 * 64);
        if (b->fusion == NULL) {
            hc_error(STREAM, "hcomm_buckets_create: out of memory for bucket %d (%zu bytes)", i,
                     b->count * bk->esize);
            return HCOMM_ERR_NO_MEMORY;
        }
        if (cfg != NULL && cfg->kind != HCOMM_COMPRESS_NONE) {
            hcomm_status_t st =
                hcomm_compress_create(bk->comm, cfg, b->count, bk->dtype, &b->cstate);
            if (st != HCOMM_SUCCESS)
                return st;
        }
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hcomm_buckets_create(hcomm_comm_t comm, int ntensors, void *const *tensors,
                                    const size_t *counts, hcomm_dtype_t dtype,
                                    const hcomm_compress_config_t *compress,
                                    hcomm_stream_t stream, hcomm_buckets_t *out)
{
    hcomm_status_t  st = check_args(comm, ntensors, tensors, counts, dtype, compress, stream, out);
    hcomm_buckets_t bk;
    size_t          n = (size_t)ntensors;

    for (size_t i = 0; i < n && st == HCOMM_SUCCESS; i++)
        st = hc_mem_host_only("hcomm_buckets_create", tensors[i], counts[i]);
    if (st != HCOMM_SUCCESS)
        return st;
    bk = calloc(1, sizeof(*bk));
    if (bk == NULL)
        goto err_nomem;
    bk->comm = comm, bk->stream = stream, bk->dtype = dtype, bk->ntensors = ntensors;
    bk->esize     = hcomm_dtype_size(dtype);
    bk->tensors   = malloc(n * sizeof(void *));
    bk->counts    = malloc(n * sizeof(size_t));
    bk->offset    = malloc(n * sizeof(size_t));
    bk->bucket_of = malloc(n * sizeof(int));
    bk->ready     = calloc(n, 1);
    if (!bk->tensors || !bk->counts || !bk->offset || !bk->bucket_of || !bk->ready)
        goto err_free;
    memcpy(bk->tensors, tensors, n * sizeof(void *));
    memcpy(bk->counts, counts, n * sizeof(size_t));
    cut(bk, NULL);
    bk->b = calloc((size_t)bk->nbuckets, sizeof(bucket_t));
    if (bk->b == NULL)
        goto err_free;
    cut(bk, bk->b);
    st = buckets_alloc(bk, compress);
    if (st != HCOMM_SUCCESS)
        goto err_alloc;
    live_add(bk);
    hc_debug(STREAM, "hcomm_buckets_create: %d tensors in %d buckets (%zu bytes each at most)",
             ntensors, bk->nbuckets, hc_params_get()->bucket_bytes);
    *out = bk;
    return HCOMM_SUCCESS;
err_free:
    hc_error(STREAM, "hcomm_buckets_create: out of memory for %d tensors", ntensors);
    st = HCOMM_ERR_NO_MEMORY;
err_alloc:
    buckets_free(bk);
    return st;
err_nomem:
    hc_error(STREAM, "hcomm_buckets_create: out of memory");
    return HCOMM_ERR_NO_MEMORY;
}

/* On the stream, before the bucket's allreduce: what failed before it is
 * not its failure (the stream's error is sticky). Skipped too (a CUDA stream
 * that did not reach it): the allreduce's own fate is what unpack checks. */
static hcomm_status_t mark(void *arg, int skip)
{
    bucket_t *b = arg;
    (void)skip;
    b->fails0 = hc_stream_failures(b->owner->stream, NULL);
    return HCOMM_SUCCESS;
}

/* On the stream, after the bucket's allreduce: skip the copy when it failed
 * (the fusion buffer then holds no average), and fail the bucket when the
 * stream skipped the copy itself (its tensors keep the local gradient). */
static hcomm_status_t unpack(void *arg, int skip)
{
    bucket_t       *b  = arg;
    hcomm_buckets_t bk = b->owner;
    hcomm_status_t  st;

    if (skip) {
        b->error = HCOMM_ERR_TIMEOUT; /* the stream logged it */
        return HCOMM_SUCCESS;
    }
    if (hc_stream_failures(bk->stream, &st) != b->fails0) {
        b->error = st;
        return HCOMM_SUCCESS; /* the allreduce's failure, counted already */
    }
    for (int i = b->first; i < b->last; i++)
        if (bk->counts[i] != 0)
            memcpy(bk->tensors[i], (char *)b->fusion + bk->offset[i] * bk->esize,
                   bk->counts[i] * bk->esize);
    return HCOMM_SUCCESS;
}

/* mark and unpack are steps, not host functions: a skipped host function
 * never runs, and the bucket's tensors kept their local gradient with the
 * step reported a success. */
static hcomm_status_t launch(hcomm_buckets_t bk, bucket_t *b)
{
    hcomm_status_t st;

    if (b->count == 0)
        return HCOMM_SUCCESS;
    st = hc_stream_launch_step(bk->stream, mark, b);
    if (st != HCOMM_SUCCESS)
        return st;
    if (b->cstate != NULL)
        st = hcomm_allreduce_compressed(b->fusion, b->fusion, b->count, bk->dtype, b->cstate,
                                        bk->comm, bk->stream);
    else
        st = hcomm_allreduce(b->fusion, b->fusion, b->count, bk->dtype, HCOMM_AVG, bk->comm,
                             bk->stream);
    if (st == HCOMM_SUCCESS)
        st = hc_stream_launch_step(bk->stream, unpack, b);
    return st;
}

hcomm_status_t hcomm_buckets_ready(hcomm_buckets_t bk, int index)
{
    hcomm_status_t st = check(bk, "hcomm_buckets_ready");
    if (st != HCOMM_SUCCESS)
        return st;
    if (index < 0 || index >= bk->ntensors) {
        hc_error(STREAM, "hcomm_buckets_ready: tensor %d out of range [0, %d)", index,
                 bk->ntensors);
        return HCOMM_ERR_INVALID_ARG;
    }
    if (bk->ready[index]) {
        hc_error(STREAM, "hcomm_buckets_ready: tensor %d marked ready twice in one step", index);
        return HCOMM_ERR_INVALID_USAGE;
    }
    bucket_t *b      = &bk->b[bk->bucket_of[index]];
    bk->ready[index] = 1;
    bk->nready++;
    b->nready++;
    if (bk->counts[index] != 0)
        memcpy((char *)b->fusion + bk->offset[index] * bk->esize, bk->tensors[index],
               bk->counts[index] * bk->esize);
    /* after a failed launch no later bucket goes: the ranks' order is lost */
    while (bk->error == HCOMM_SUCCESS && bk->next < bk->nbuckets &&
           bk->b[bk->next].nready == bk->b[bk->next].last - bk->b[bk->next].first) {
        st = launch(bk, &bk->b[bk->next]);
        if (st != HCOMM_SUCCESS) {
            bk->error = st; /* launch's callee logged it */
            return st;
        }
        bk->next++;
    }
    return bk->error;
}

static void step_reset(hcomm_buckets_t bk)
{
    memset(bk->ready, 0, (size_t)bk->ntensors);
    for (int i = 0; i < bk->nbuckets; i++)
        bk->b[i].nready = 0, bk->b[i].error = HCOMM_SUCCESS;
    bk->nready = 0;
    bk->next   = 0;
    bk->error  = HCOMM_SUCCESS;
}

hcomm_status_t hcomm_buckets_wait(hcomm_buckets_t bk)
{
    hcomm_status_t st = check(bk, "hcomm_buckets_wait");
    if (st != HCOMM_SUCCESS)
        return st;
    if (bk->nready < bk->ntensors) {
        int i = 0;
        while (bk->ready[i])
            i++;
        hc_error(STREAM, "hcomm_buckets_wait: %d of %d tensors not marked ready (first: %d)",
                 bk->ntensors - bk->nready, bk->ntensors, i);
        return HCOMM_ERR_INVALID_USAGE;
    }
    int stuck;
    st = hc_stream_sync(bk->stream, &stuck);
    if (stuck)
        return st; /* buckets may still be running: the step stays as it is */
    /* the step's own errors: the stream's (sticky) may be older */
    st = bk->error;
    for (int i = 0; st == HCOMM_SUCCESS && i < bk->nbuckets; i++)
        st = bk->b[i].error; /* logged where it happened */
    step_reset(bk);
    return st;
}

hcomm_status_t hcomm_buckets_layout(hcomm_buckets_t bk, int b, int *nbuckets, int *first,
                                    int *last)
{
    hcomm_status_t st = check(bk, "hcomm_buckets_layout");
    if (st != HCOMM_SUCCESS)
        return st;
    if (b < 0 || b >= bk->nbuckets) {
        hc_error(STREAM, "hcomm_buckets_layout: bucket %d out of range [0, %d)", b, bk->nbuckets);
        return HCOMM_ERR_INVALID_ARG;
    }
    if (nbuckets != NULL)
        *nbuckets = bk->nbuckets;
    if (first != NULL)
        *first = bk->b[b].first;
    if (last != NULL)
        *last = bk->b[b].last;
    return HCOMM_SUCCESS;
}

void hcomm_buckets_destroy(hcomm_buckets_t bk)
{
    if (bk == NULL || check(bk, "hcomm_buckets_destroy") != HCOMM_SUCCESS)
        return;
    int stuck = 0;
    /* a failed launch may have queued part of its bucket's work */
    if (bk->next > 0 || bk->error != HCOMM_SUCCESS)
        hc_stream_sync(bk->stream, &stuck);
    if (stuck) {
        /* the stream may still write the fusion buffers and tensors */
        hc_error(STREAM, "hcomm_buckets_destroy: the stream is stuck; buckets %p not freed",
                 (void *)bk);
        return;
    }
    live_remove(bk);
    buckets_free(bk);
}
