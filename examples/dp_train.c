/*
 * dp_train.c - data-parallel training with a compressed gradient all-reduce.
 *
 * A multinomial logistic regression, 10 classes x 100000 sparse features plus
 * 10 biases (1,000,010 parameters), trained by minibatch SGD with momentum on
 * a synthetic bag-of-features dataset. Every step each rank computes the dense
 * gradient of its own minibatch; hcomm_allreduce_compressed averages it over
 * the ranks (--compress none|onebit|topk:RATIO|fp16|bf16), and every rank
 * applies the same update to the same weights, so the weights stay identical.
 *
 * The dataset: sample i is a function of (seed, i) alone, so each rank
 * generates only its own shard of the training set (a contiguous block of
 * indexes) and its share of the test set. A sample's class c is uniform; it
 * draws 64-128 feature occurrences from a class distribution p_c(f) =
 * base(f) x exp(g z[c][f]) over all features, where base is a Zipf-like
 * popularity shared by every class and z a standard normal per class and
 * feature: every feature carries a little evidence, no single one much, and
 * 10% of the labels are replaced by a wrong one, so the task is learnable but
 * not easy: with the defaults the plain run ends at training loss 0.81 and
 * 81% test accuracy. L2 regularisation (--weight-decay) gives the objective
 * one minimum that every correct method reaches; the learning rate warms up
 * then decays to 0 (cosine), so a run ends converged, not in SGD noise.
 * --no-error-feedback resets the compression state after every step, to show
 * what the residuals buy. At the end the ranks compare a hash of their weights.
 *
 * Launch: tools/hcomm-run -n 2 examples/dp_train --compress onebit
 * Rank 0 prints one line per epoch, "epoch E loss L accuracy A" (mean cross
 * entropy over the whole training set, test accuracy in percent), then
 * "final loss L accuracy A compress SPEC bytes_sent B".
 */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hcomm.h"
#include "hcomm_compress.h"

#define NCLASS 10

/* Every hcomm call goes through this: a failure ends the rank with status 1
 * (hcomm-run then stops the others). */
#define CHECK(call)                                                                                \
    do {                                                                                           \
        hcomm_status_t st_ = (call);                                                               \
        if (st_ != HCOMM_SUCCESS) {                                                                \
            fprintf(stderr, "dp_train: rank %d: %s failed: %s (%s)\n", g_rank, #call,              \
                    hcomm_status_name(st_), hcomm_status_str(st_));                                \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int g_rank = -1;

typedef struct {
    const char *compress;
    int         epochs, batch, train, test, features;
    uint64_t    seed;
    double      lr, momentum, wd, signal, noise;
    int         verbose, no_feedback;
} options_t;

/* A CSR set of samples: feature f has the value "how many times sample i drew
 * it" (a bag of features); a feature drawn twice appears twice in idx. */
typedef struct {
    int       n;
    int      *label;
    size_t   *off;
    uint32_t *idx;
} dataset_t;

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "dp_train: rank %d: out of memory (%zu bytes)\n", g_rank, bytes);
        exit(1);
    }
    return p;
}

/* ---- random numbers: splitmix64, keyed so any (seed, stream) is independent */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t rng_next(uint64_t *s)
{
    *s += 0x9e3779b97f4a7c15ULL;
    return mix64(*s);
}

static double rng_unit(uint64_t *s) /* [0, 1) */
{
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

static uint64_t rng_key(uint64_t seed, uint64_t a, uint64_t b)
{
    return mix64(mix64(seed ^ mix64(a)) ^ mix64(b + 0x5851f42d4c957f2dULL));
}

static double rng_normal(uint64_t *s)
{
    double u = rng_unit(s), v = rng_unit(s);
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

/* ---- the synthetic dataset ------------------------------------------------ */

/* cdf[c][f]: the cumulative class distributions, the same on every rank. */
static double *make_class_cdf(const options_t *o)
{
    int     nf  = o->features;
    double *cdf = xmalloc((size_t)NCLASS * nf * sizeof(*cdf));

    for (int c = 0; c < NCLASS; c++) {
        uint64_t s   = rng_key(o->seed, 1, (uint64_t)c);
        double   acc = 0.0, *row = cdf + (size_t)c * nf;
        for (int f = 0; f < nf; f++) {
            double base = pow(f + 50.0, -0.6);
            acc += base * exp(o->signal * rng_normal(&s));
            row[f] = acc;
        }
        for (int f = 0; f < nf; f++)
            row[f] /= acc;
    }
    return cdf;
}

static uint32_t draw_feature(const double *row, int nf, double u)
{
    int lo = 0, hi = nf - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (row[mid] > u)
            hi = mid;
        else
            lo = mid + 1;
    }
    return (uint32_t)lo;
}

/* Samples first .. first + n - 1 of the global sequence. */
static void make_dataset(const options_t *o, const double *cdf, long first, int n, dataset_t *d)
{
    size_t cap = (size_t)n * 128;

    d->n      = n;
    d->label  = xmalloc((size_t)n * sizeof(*d->label));
    d->off    = xmalloc(((size_t)n + 1) * sizeof(*d->off));
    d->idx    = xmalloc(cap * sizeof(*d->idx));
    d->off[0] = 0;
    for (int i = 0; i < n; i++) {
        uint64_t      s   = rng_key(o->seed, 2, (uint64_t)(first + i));
        int           c   = (int)(rng_next(&s) % NCLASS);
        int           occ = 64 + (int)(rng_next(&s) % 65);
        size_t        at  = d->off[i];
        const double *row = cdf + (size_t)c * o->features;

        for (int j = 0; j < occ; j++)
            d->idx[at + j] = draw_feature(row, o->features, rng_unit(&s));
        if (rng_unit(&s) < o->noise) /* label noise: the features say c */
            c = (c + 1 + (int)(rng_next(&s) % (NCLASS - 1))) % NCLASS;
        d->label[i]   = c;
        d->off[i + 1] = at + (size_t)occ;
    }
}

static void free_dataset(dataset_t *d)
{
    free(d->label);
    free(d->off);
    free(d->idx);
}

/* ---- the model: w[f * NCLASS + c], then NCLASS biases ---------------------- */

/* Softmax probabilities of sample i into p; returns -log p[label]. */
static double forward(const float *w, int nf, const dataset_t *d, int i, float *p)
{
    const float *bias = w + (size_t)nf * NCLASS;
    float        z[NCLASS], zmax, sum = 0.0f;

    for (int c = 0; c < NCLASS; c++)
        z[c] = 0.0f;
    for (size_t k = d->off[i]; k < d->off[i + 1]; k++) {
        const float *wf = w + (size_t)d->idx[k] * NCLASS;
        for (int c = 0; c < NCLASS; c++)
            z[c] += wf[c];
    }
    zmax = -INFINITY;
    for (int c = 0; c < NCLASS; c++) {
        z[c] += bias[c];
        zmax = z[c] > zmax ? z[c] : zmax;
    }
    for (int c = 0; c < NCLASS; c++) {
        p[c] = expf(z[c] - zmax);
        sum += p[c];
    }
    for (int c = 0; c < NCLASS; c++)
        p[c] /= sum;
    return -log(fmax((double)p[d->label[i]], 1e-30));
}

/* grad = the mean cross-entropy gradient over the samples order[0..nb). */
static void gradient(const float *w, int nf, const dataset_t *d, const int *order, int nb,
                     float *grad)
{
    float *gbias = grad + (size_t)nf * NCLASS;
    float  p[NCLASS];

    memset(grad, 0, ((size_t)nf * NCLASS + NCLASS) * sizeof(*grad));
    for (int b = 0; b < nb; b++) {
        int i = order[b];
        forward(w, nf, d, i, p);
        p[d->label[i]] -= 1.0f;
        for (int c = 0; c < NCLASS; c++) {
            p[c] /= (float)nb;
            gbias[c] += p[c];
        }
        for (size_t k = d->off[i]; k < d->off[i + 1]; k++) {
            float *gf = grad + (size_t)d->idx[k] * NCLASS;
            for (int c = 0; c < NCLASS; c++)
                gf[c] += p[c];
        }
    }
}

/* Momentum SGD with L2: v = mu v + g + wd w; w -= lr v. The L2 term is added
 * here, not communicated: every rank has the same w and the same averaged g,
 * so every rank computes the same update. */
static void sgd_update(float *w, float *v, const float *g, size_t n, const options_t *o, float lr)
{
    float mu = (float)o->momentum, wd = (float)o->wd;
    for (size_t x = 0; x < n; x++) {
        v[x] = mu * v[x] + g[x] + wd * w[x];
        w[x] -= lr * v[x];
    }
}

/* Adds this rank's loss sum and number of correct predictions on d. */
static void evaluate(const float *w, int nf, const dataset_t *d, double *loss, double *correct)
{
    float p[NCLASS];
    for (int i = 0; i < d->n; i++) {
        int best = 0;
        *loss += forward(w, nf, d, i, p);
        for (int c = 1; c < NCLASS; c++)
            best = p[c] > p[best] ? c : best;
        *correct += best == d->label[i];
    }
}

/* ---- the program ----------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out, "Usage: hcomm-run -n N dp_train [options]\n"
                 "  --compress SPEC      none|onebit|topk:RATIO|fp16|bf16 (default none)\n"
                 "  --epochs N           passes over the training set (default 10)\n"
                 "  --seed S             dataset and shuffling seed (default 1)\n"
                 "  --lr X               peak learning rate (default 0.5; warm-up, cosine decay)\n"
                 "  --momentum X         momentum (default 0.9)\n"
                 "  --weight-decay X     L2 coefficient (default 0.001)\n"
                 "  --batch N            samples per rank per step (default 512)\n"
                 "  --train N            training samples, all ranks together (default 80000)\n"
                 "  --test N             test samples (default 10000)\n"
                 "  --signal G           class evidence per feature (default 0.5)\n"
                 "  --label-noise P      share of labels replaced by a wrong one (default 0.1)\n"
                 "  --no-error-feedback  reset the compression state after every step, which\n"
                 "                       drops the residuals: shows what error feedback buys\n"
                 "  --verbose            also print the objective (loss + L2 term) per epoch\n");
}

static double number(const char *text, double lo, double hi)
{
    char  *end;
    double x = strtod(text, &end);
    if (end == text || *end != '\0' || !(x >= lo && x <= hi)) {
        fprintf(stderr, "dp_train: bad value \"%s\": expected a number in [%g, %g]\n", text, lo,
                hi);
        exit(2);
    }
    return x;
}

static void parse_options(int argc, char **argv, options_t *o)
{
    static const struct option longs[] = {{"compress", 1, NULL, 'c'},
                                          {"epochs", 1, NULL, 'e'},
                                          {"seed", 1, NULL, 's'},
                                          {"lr", 1, NULL, 'l'},
                                          {"momentum", 1, NULL, 'm'},
                                          {"weight-decay", 1, NULL, 'w'},
                                          {"batch", 1, NULL, 'b'},
                                          {"train", 1, NULL, 'T'},
                                          {"test", 1, NULL, 't'},
                                          {"signal", 1, NULL, 'g'},
                                          {"label-noise", 1, NULL, 'n'},
                                          {"verbose", 0, NULL, 'v'},
                                          {"help", 0, NULL, 'h'},
                                          {"no-error-feedback", 0, NULL, 'N'},
                                          {NULL, 0, NULL, 0}};
    int                        opt;

    *o = (options_t){"none", 10, 512, 80000, 10000, 100000, 1, 0.5, 0.9, 1e-3, 0.5, 0.1, 0, 0};
    while ((opt = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        switch (opt) {
        case 'c':
            o->compress = optarg;
            break;
        case 'e':
            o->epochs = (int)number(optarg, 1, 1000);
            break;
        case 's':
            o->seed = (uint64_t)number(optarg, 0, 1e15);
            break;
        case 'l':
            o->lr = number(optarg, 0, 1e6);
            break;
        case 'm':
            o->momentum = number(optarg, 0, 0.999);
            break;
        case 'w':
            o->wd = number(optarg, 0, 1);
            break;
        case 'b':
            o->batch = (int)number(optarg, 1, 1 << 20);
            break;
        case 'T':
            o->train = (int)number(optarg, 1, 1 << 24);
            break;
        case 't':
            o->test = (int)number(optarg, 1, 1 << 24);
            break;
        case 'g':
            o->signal = number(optarg, 0, 10);
            break;
        case 'n':
            o->noise = number(optarg, 0, 1);
            break;
        case 'v':
            o->verbose = 1;
            break;
        case 'N':
            o->no_feedback = 1;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    if (optind != argc) {
        usage(stderr);
        exit(2);
    }
}

/* The learning rate of a step: a linear warm-up over the first 5% (momentum
 * and the compression residuals start from zero), then a cosine decay to 0,
 * so that every run ends converged rather than in SGD noise. */
static float learning_rate(const options_t *o, long step, long total)
{
    long warm = total / 20;
    if (step < warm)
        return (float)(o->lr * (double)(step + 1) / (double)warm);
    return (float)(o->lr * 0.5 *
                   (1.0 + cos(3.141592653589793 * (double)(step - warm) / (double)(total - warm))));
}

static void shuffle(int *order, int n, uint64_t key)
{
    uint64_t s = key;
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rng_next(&s) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

typedef struct {
    hcomm_comm_t     comm;
    hcomm_compress_t state;
    char             spec[64]; /* the compression, as hcomm_compress_name writes it */
    int              rank, nranks;
    dataset_t        train, test; /* this rank's shard, its share of the test set */
    float           *w, *v, *grad;
    size_t           nparams;
} trainer_t;

/* Global training loss and test accuracy (percent), the same on every rank. */
static void measure(trainer_t *t, const options_t *o, double *loss, double *acc)
{
    double sums[4] = {0, 0, 0, 0};

    evaluate(t->w, o->features, &t->train, &sums[0], &sums[1]);
    evaluate(t->w, o->features, &t->test, &sums[2], &sums[3]);
    CHECK(hcomm_allreduce(sums, sums, 4, HCOMM_FLOAT64, HCOMM_SUM, t->comm, NULL));
    *loss = sums[0] / o->train;
    *acc  = 100.0 * sums[3] / o->test;
}

/* Rank r holds training samples [train r / n, train (r + 1) / n) and the same
 * share of the test samples, which follow the training ones. */
static void make_shards(trainer_t *t, const options_t *o)
{
    long    n = t->nranks, r = t->rank;
    long    first = o->train * r / n, tfirst = o->test * r / n;
    double *cdf = make_class_cdf(o);

    make_dataset(o, cdf, first, (int)(o->train * (r + 1) / n - first), &t->train);
    make_dataset(o, cdf, o->train + tfirst, (int)(o->test * (r + 1) / n - tfirst), &t->test);
    free(cdf);
}

static void setup(trainer_t *t, const options_t *o)
{
    hcomm_compress_config_t cfg;

    CHECK(hcomm_comm_init_env(&t->comm));
    CHECK(hcomm_comm_rank(t->comm, &t->rank));
    CHECK(hcomm_comm_size(t->comm, &t->nranks));
    g_rank = t->rank;
    CHECK(hcomm_compress_parse(o->compress, &cfg));
    hcomm_compress_name(&cfg, t->spec, sizeof(t->spec));
    t->nparams = (size_t)o->features * NCLASS + NCLASS;
    CHECK(hcomm_compress_create(t->comm, &cfg, t->nparams, HCOMM_FLOAT32, &t->state));
    make_shards(t, o);
    t->w    = calloc(t->nparams, sizeof(*t->w));
    t->v    = calloc(t->nparams, sizeof(*t->v));
    t->grad = xmalloc(t->nparams * sizeof(*t->grad));
    if (t->w == NULL || t->v == NULL) {
        fprintf(stderr, "dp_train: rank %d: out of memory\n", t->rank);
        exit(1);
    }
}

static void teardown(trainer_t *t)
{
    free(t->w);
    free(t->v);
    free(t->grad);
    free_dataset(&t->train);
    free_dataset(&t->test);
    hcomm_compress_destroy(t->state);
    CHECK(hcomm_comm_destroy(t->comm));
}

/* Data parallelism is only right if every rank holds the same weights: compare
 * a hash of them (FNV-1a over the bytes) across the ranks. */
static int weights_agree(trainer_t *t)
{
    const unsigned char *b = (const unsigned char *)t->w;
    uint64_t             h = 0xcbf29ce484222325ULL, lo, hi;

    for (size_t x = 0; x < t->nparams * sizeof(*t->w); x++)
        h = (h ^ b[x]) * 0x100000001b3ULL;
    CHECK(hcomm_allreduce(&h, &lo, 1, HCOMM_UINT64, HCOMM_MIN, t->comm, NULL));
    CHECK(hcomm_allreduce(&h, &hi, 1, HCOMM_UINT64, HCOMM_MAX, t->comm, NULL));
    return lo == hi;
}

/* The objective SGD minimises (the loss plus the L2 term) and the time. */
static void print_details(const trainer_t *t, const options_t *o, double loss, double seconds)
{
    double norm2 = 0.0;
    for (size_t x = 0; x < t->nparams; x++)
        norm2 += (double)t->w[x] * t->w[x];
    printf("  objective %.5f weight_norm2 %.2f seconds %.2f\n", loss + 0.5 * o->wd * norm2, norm2,
           seconds);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One epoch: every rank walks its shard in a fresh order, steps batches. */
static void run_epoch(trainer_t *t, const options_t *o, int epoch, long steps, int *order)
{
    long total = steps * o->epochs, step = steps * (epoch - 1);

    shuffle(order, t->train.n, rng_key(rng_key(o->seed, 3, (uint64_t)t->rank), 4, (uint64_t)epoch));
    for (long s = 0; s < steps; s++, step++) {
        gradient(t->w, o->features, &t->train, order + s * o->batch, o->batch, t->grad);
        CHECK(hcomm_allreduce_compressed(t->grad, t->grad, t->nparams, HCOMM_FLOAT32, t->state,
                                         t->comm, NULL));
        if (o->no_feedback)
            CHECK(hcomm_compress_reset(t->state));
        sgd_update(t->w, t->v, t->grad, t->nparams, o, learning_rate(o, step, total));
    }
}

int main(int argc, char **argv)
{
    options_t o;
    trainer_t t;
    double    loss = 0, acc = 0, t0;
    uint64_t  bytes;
    long      steps;
    int      *order;

    parse_options(argc, argv, &o);
    setup(&t, &o);
    /* The same number of steps on every rank: a shard holds at least
     * train / nranks samples, rounded down. */
    steps = (o.train / t.nranks) / o.batch;
    if (steps < 1) {
        fprintf(stderr, "dp_train: %d training samples on %d ranks make no batch of %d\n", o.train,
                t.nranks, o.batch);
        exit(2);
    }
    if (t.rank == 0)
        printf("dp_train: %d ranks, %zu parameters, %d train / %d test samples, batch %d per "
               "rank, %ld steps per epoch, lr %g momentum %g weight decay %g, compress %s%s\n",
               t.nranks, t.nparams, o.train, o.test, o.batch, steps, o.lr, o.momentum, o.wd, t.spec,
               o.no_feedback ? " without error feedback" : "");
    order = xmalloc((size_t)t.train.n * sizeof(*order));
    t0    = now();
    for (int e = 1; e <= o.epochs; e++) {
        run_epoch(&t, &o, e, steps, order);
        measure(&t, &o, &loss, &acc);
        if (t.rank == 0) {
            printf("epoch %d loss %.5f accuracy %.2f\n", e, loss, acc);
            if (o.verbose)
                print_details(&t, &o, loss, now() - t0);
            fflush(stdout);
        }
    }
    CHECK(hcomm_comm_bytes_sent(t.comm, &bytes));
    if (!weights_agree(&t)) {
        fprintf(stderr, "dp_train: rank %d: the ranks' weights differ\n", t.rank);
        exit(1);
    }
    if (t.rank == 0) {
        printf("time %.2f s, %ld steps, %.0f bytes sent per step\n", now() - t0, steps * o.epochs,
               (double)bytes / (double)(steps * o.epochs));
        printf("final loss %.5f accuracy %.2f compress %s bytes_sent %llu\n", loss, acc, t.spec,
               (unsigned long long)bytes);
    }
    free(order);
    teardown(&t);
    return 0;
}
