/* test_spill.c - a trace's spill files (core/ops_spill.h): records put one by
 * one come back in order, each as it was put but for op and cseq (those the
 * code carries) or whole (those it does not), and gaps as gaps, through gets
 * of any size and across a reset; a run of like operations costs a few bytes
 * each; coded records cut short, in memory or in the file, are a failed
 * get, not wrong records. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/ops_spill.h"
#include "hcomm.h"

enum { NREC = 20000, CAP = 2048 };

static hc_op_rec_t recs[2 * NREC], got[CAP];
static char        dir[] = "/tmp/test_spill.XXXXXX";

static uint64_t rnd(void)
{
    return (uint64_t)random() << 33 ^ (uint64_t)random() << 11 ^ (uint64_t)random();
}

/* Records seq 1..n: mostly the same 8-byte allreduce a little later each
 * time; now and then another call, extreme values, one the code cannot carry
 * (the coarse clock, never started) or no record at all (a gap: seq 0), or
 * one like the others that waited in the queue. */
static void make_recs(int n, int plain)
{
    uint64_t t = 1ull << 40;
    for (int i = 0; i < n; i++) {
        hc_op_rec_t *r = &recs[i];
        t += 300 + (uint64_t)(random() % 900);
        *r = (hc_op_rec_t){.seq     = (uint64_t)i + 1,
                           .cseq    = (uint64_t)i + 7,
                           .t_issue = t,
                           .t_start = t,
                           .t_end   = t + 1000 + (uint64_t)(random() % 200),
                           .count   = 2,
                           .bytes   = 8,
                           .sent    = 8,
                           .peer    = -1,
                           .status  = HCOMM_SUCCESS,
                           .nsteps  = 1,
                           .coll    = 2,
                           .dtype   = HCOMM_FLOAT32,
                           .algo    = 1,
                           .state   = HC_OP_DONE,
                           .clock   = HC_OP_CLOCK_TICKS};
        int kind = plain ? 0 : (int)(random() % 20);
        if (kind == 1) { /* another call, queued for a while */
            r->t_issue -= 5000, r->count = rnd() >> 20, r->bytes = rnd(), r->sent = rnd();
            r->peer = (int32_t)(random() % 3) - 1, r->nsteps = (uint32_t)random(), r->coll = 0xff;
        } else if (kind == 2) { /* extremes, and a failure */
            r->t_start = t - (1ull << 39), r->t_issue = r->t_start - (1ull << 38);
            r->t_end = UINT64_MAX, r->peer = INT32_MAX, r->status = HCOMM_ERR_TIMEOUT;
            r->state = HC_OP_FAILED, r->count = UINT64_MAX, r->nsteps = UINT32_MAX;
        } else if (kind == 3) { /* not coded: the coarse clock */
            r->clock = HC_OP_CLOCK_COARSE, r->t_start = r->t_end = 0, r->op = 3;
        } else if (kind == 4) { /* not coded: failed before it started */
            r->t_start = 0, r->status = HCOMM_ERR_REMOTE, r->state = HC_OP_FAILED, r->op = 2;
        } else if (kind == 5) {
            r->seq = 0; /* a gap */
        } else if (kind == 6 || kind == 7) { /* like the others, but queued a while */
            r->t_issue -= 1 + (uint64_t)(random() % (kind == 6 ? 60000 : 1000000));
        }
    }
}

static void put_all(hc_spill_t *s, int n)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(recs[i].seq ? hc_spill_put(s, dir, &recs[i]) : hc_spill_gap(s, dir), 0);
}

static void check_one(const hc_op_rec_t *want, const hc_op_rec_t *r, uint64_t seq)
{
    assert_int_equal(r->seq, seq);
    if (want->seq == 0) {
        assert_int_equal(r->state, HC_OP_QUEUED);
        return;
    }
    int whole = want->clock == HC_OP_CLOCK_COARSE || want->t_start < want->t_issue;
    assert_int_equal(r->t_issue, want->t_issue);
    assert_int_equal(r->t_start, want->t_start);
    assert_int_equal(r->t_end, want->t_end);
    assert_int_equal(r->count, want->count);
    assert_int_equal(r->bytes, want->bytes);
    assert_int_equal(r->sent, want->sent);
    assert_int_equal(r->peer, want->peer);
    assert_int_equal(r->status, want->status);
    assert_int_equal(r->nsteps, want->nsteps);
    assert_int_equal(r->coll, want->coll);
    assert_int_equal(r->dtype, want->dtype);
    assert_int_equal(r->algo, want->algo);
    assert_int_equal(r->state, want->state);
    assert_int_equal(r->clock, want->clock);
    assert_int_equal(r->op, whole ? want->op : 0);
    assert_int_equal(r->cseq, whole ? want->cseq : 0);
}

/* Gets all n back in gets of random sizes and checks them. */
static void get_all(hc_spill_t *s, int n)
{
    uint64_t seq = 1;
    while (seq <= (uint64_t)n) {
        uint64_t from = seq;
        long     k    = hc_spill_get(s, got, 1 + (size_t)(random() % CAP), &seq);
        assert_true(k > 0);
        assert_int_equal(seq, from + (uint64_t)k);
        for (long i = 0; i < k; i++)
            check_one(&recs[from - 1 + (uint64_t)i], &got[i], from + (uint64_t)i);
    }
    assert_int_equal(hc_spill_get(s, got, CAP, &seq), 0);
}

static void test_round_trip(void **st)
{
    hc_spill_t s;
    (void)st;
    srandom(7);
    assert_int_equal(hc_spill_init(&s, CAP, 0), 0);
    for (int round = 0; round < 2; round++) { /* the second after a reset */
        make_recs(NREC, 0);
        put_all(&s, NREC);
        get_all(&s, NREC);
        hc_spill_reset(&s);
    }
    hc_spill_fini(&s);
    /* memory for a few thousand: the file takes the rest as it fills */
    assert_int_equal(hc_spill_init(&s, CAP, CAP * 80u), 0);
    make_recs(NREC, 0);
    put_all(&s, NREC);
    assert_true(s.wr_bytes > 0);
    get_all(&s, NREC);
    hc_spill_fini(&s);
}

static void test_like_ops_are_small(void **st)
{
    hc_spill_t s;
    (void)st;
    assert_int_equal(hc_spill_init(&s, CAP, 0), 0);
    make_recs(NREC, 1);
    put_all(&s, NREC);
    assert_int_equal(s.wr_bytes, 0); /* all in memory */
    assert_true(s.fill <= 5u * NREC + 32); /* the short form, but for the first */
    hc_spill_fini(&s);
}

static void test_cut_short(void **st)
{
    hc_spill_t s;
    uint64_t   seq = 1;
    (void)st;
    assert_int_equal(hc_spill_init(&s, CAP, 0), 0); /* in memory */
    make_recs(100, 1);
    put_all(&s, 100);
    assert_int_equal(hc_spill_get(&s, got, 1, &seq), 1);
    s.fill--;
    assert_int_equal(hc_spill_get(&s, got, CAP, &seq), -1);
    hc_spill_fini(&s);
    seq = 1; /* in the file: the memory's room fills once */
    assert_int_equal(hc_spill_init(&s, CAP, CAP * 80u), 0);
    make_recs(2 * NREC, 1);
    put_all(&s, 2 * NREC);
    assert_true(s.wr_bytes > 0 && s.wr_bytes < 2u * NREC * 5u);
    assert_int_equal(ftruncate(s.fd_small, (off_t)s.wr_bytes - 1), 0);
    long k, n = 0;
    while ((k = hc_spill_get(&s, got, CAP, &seq)) > 0)
        n += k;
    assert_int_equal(k, -1);
    assert_true(n < (long)(s.wr_bytes / 5));
    hc_spill_fini(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_like_ops_are_small),
        cmocka_unit_test(test_cut_short),
    };
    if (mkdtemp(dir) == NULL)
        return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rmdir(dir);
    return rc;
}
