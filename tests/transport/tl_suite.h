/* tl_suite.h - the transport conformance suite: one set of cases, written over
 * hc_tl_ops_t, run for every transport variant that tl_variants.c lists.
 *
 * A case runs in the cmocka parent and starts worlds: the parent forks the
 * ranks, relays their address blobs over pipes and reaps them; each rank makes
 * its context, connects to its peers in ascending rank order (transport.h's
 * contract) and runs a body. Ranks check with HC_TLT_CHK, which prints why and
 * exits 1; only the parent uses cmocka's asserts, and only once every rank is
 * reaped, so that a failed case leaves no process behind.
 */
#ifndef HC_TL_SUITE_H
#define HC_TL_SUITE_H

#include <stddef.h>
#include <stdint.h>

#include "base/params.h"
#include "transport/transport.h"

#define HC_TLT_MAXR 4
#define HC_TLT_MIB ((size_t)1 << 20)
#define HC_TLT_SKIP 77 /* a body's (and a world's) result: does not apply here */

typedef struct hc_tlt_variant hc_tlt_variant_t;

typedef struct hc_tlt_case {
    const char *name;
    void (*run)(const hc_tlt_variant_t *v); /* in the parent; may assert and skip() */
} hc_tlt_case_t;

/* One line of the table in tl_variants.c. */
struct hc_tlt_variant {
    const char        *name; /* what HC_TEST_TL selects */
    const hc_tl_ops_t *ops;
    void (*tune)(hc_params_t *prm);          /* the variant's parameters; NULL: defaults */
    const char *(*unusable)(void);           /* why it cannot run here (the cases SKIP), or NULL */
    const char *const *env;                  /* "NAME=value" set while its cases run; NULL-ended */
    int (*leftovers)(const uint8_t *cookie); /* what a world left behind: a count */
    const hc_tlt_case_t *extra;              /* cases for this variant only; NULL-name-ended */
};

extern const hc_tlt_variant_t hc_tlt_variants[]; /* ends with a NULL name */
extern const hc_tlt_case_t    hc_tlt_cases[];    /* the generic ones */

typedef struct hc_tlt_board hc_tlt_board_t; /* shared by the ranks of a world */

/* What a rank's body works with. */
typedef struct hc_tlt_env {
    const hc_tlt_variant_t *v;
    const hc_tl_ops_t      *ops;
    int                     rank, nranks;
    hc_tl_ctx_t            *ctx; /* a body that calls fini itself sets it to NULL */
    hc_tl_ep_t             *eps[HC_TLT_MAXR];
    hc_peer_info_t          info[HC_TLT_MAXR];
    uint8_t                 addr[HC_TLT_MAXR][HC_TL_ADDR_MAX];
    size_t                  addrlen[HC_TLT_MAXR];
    hc_params_t             prm;
    hc_tl_params_t          tp;
    hc_tlt_board_t         *board;
} hc_tlt_env_t;

typedef int (*hc_tlt_body_t)(hc_tlt_env_t *env, void *arg); /* 0 or HC_TLT_SKIP */

/* A world; zero means the default. */
typedef struct hc_tlt_world {
    int                nranks;
    double             timeout;    /* connection set-up, seconds (10) */
    double             limit;      /* the parent kills the ranks after this (60 s) */
    unsigned           victims;    /* bit r: rank r is to die of SIGKILL */
    int                zombies;    /* victims stay unreaped until the others end */
    unsigned           bad_cookie; /* bit r: rank r presents another cookie */
    int                no_connect; /* the body connects (or does not) itself */
    const char        *bind_ip;    /* 127.0.0.1 */
    const hc_params_t *params;     /* hc_tlt_params(v) */
    hc_tlt_body_t      body;
    void              *arg;
} hc_tlt_world_t;

/* ---- parent side (tl_suite.c) ---- */

/* The current case, for messages ("tcp4 ordered"). */
void hc_tlt_set_label(const char *variant, const char *name);
/* The defaults with the variant's tuning applied. */
hc_params_t hc_tlt_params(const hc_tlt_variant_t *v);
/* Runs a world: 0 when every rank passed, HC_TLT_SKIP, or 1 (why is printed). */
int hc_tlt_run(const hc_tlt_variant_t *v, const hc_tlt_world_t *w);
/* Runs a world and asserts it passed, or skips the case. */
void hc_tlt_expect(const hc_tlt_variant_t *v, const hc_tlt_world_t *w);

/* ---- rank side ---- */

extern int hc_tlt_rank; /* -1 in the parent */

#define HC_TLT_CHK(c)                                                                              \
    do {                                                                                           \
        if (!(c))                                                                                  \
            hc_tlt_fail(__FILE__, __LINE__, "check failed: %s", #c);                               \
    } while (0)

/* A status check that prints both names. */
#define HC_TLT_CHK_ST(expr, want)                                                                  \
    do {                                                                                           \
        hcomm_status_t got_ = (expr);                                                              \
        if (got_ != (want))                                                                        \
            hc_tlt_fail(__FILE__, __LINE__, "%s is %s, want %s", #expr, hcomm_status_name(got_),   \
                        hcomm_status_name(want));                                                  \
    } while (0)

_Noreturn void hc_tlt_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
double hc_tlt_now(void);

/* Connects to rank q as the library does: calls connect() (each call must
 * return at once) and progresses while it says HCOMM_IN_PROGRESS; the final
 * status. Fails the rank when the transport never times out. */
hcomm_status_t hc_tlt_connect(hc_tlt_env_t *env, int q, hc_tl_ep_t **ep);
/* Connects to every peer in ascending rank order (reachable() must hold). */
void hc_tlt_connect_all(hc_tlt_env_t *env);
/* Progresses until the n requests completed: 0, or -1 after secs. */
int hc_tlt_wait(hc_tlt_env_t *env, hc_tl_req_t *reqs, int n, double secs);
/* The same, and each must have succeeded. */
void hc_tlt_wait_ok(hc_tlt_env_t *env, hc_tl_req_t *reqs, int n, double secs);
/* Two rounds of empty messages with every peer: every endpoint works both ways
 * and both sides of each pair have seen the other's first messages. */
void hc_tlt_sync(hc_tlt_env_t *env);
/* Out-of-band signals between the ranks of a world: slot s of each rank. */
void    hc_tlt_post(hc_tlt_env_t *env, int slot, int64_t val); /* val != 0 */
int64_t hc_tlt_await(hc_tlt_env_t *env, int rank, int slot, double secs);
int64_t hc_tlt_peek(hc_tlt_env_t *env, int rank, int slot); /* 0: not yet posted */
/* Waits (a few seconds at most) until a killed or exited rank is reaped. */
void hc_tlt_await_gone(hc_tlt_env_t *env, int rank);
/* Open file descriptors of this process. */
int hc_tlt_fd_count(void);

/* ---- data (tl_data.c) ---- */

/* The pattern of message idx from src to dst: a byte depends on its offset. */
uint64_t hc_tlt_seed(int src, int dst, int idx);
void     hc_tlt_fill(uint8_t *p, size_t off, size_t n, uint64_t seed);
/* Index of the first of n bytes (at message offset off) that is wrong, or n. */
size_t hc_tlt_check(const uint8_t *p, size_t off, size_t n, uint64_t seed);

/* Buffers for messages; contents undefined. */
void *hc_tlt_alloc(size_t n);
void  hc_tlt_free(void *p, size_t n);

/* Checks a sink's pieces against the pattern as they come. */
typedef struct hc_tlt_sink {
    uint64_t seed;
    size_t   next; /* the offset the next piece must start at */
    size_t   pieces;
} hc_tlt_sink_t;
void hc_tlt_sink_fn(void *arg, size_t off, const void *data, size_t len);

enum { HC_TLT_PLAIN, HC_TLT_SINK, HC_TLT_MIXED /* even messages through the sink */ };
#define HC_TLT_ALL (~0u)
/* The rank sends each of sizes[] to every peer in the mask (bit q: rank q) and
 * receives theirs, all posted before any progress; contents, lengths and guard
 * bytes checked. */
void hc_tlt_exchange(hc_tlt_env_t *env, unsigned peers, const size_t *sizes, int n, int mode);

#endif
