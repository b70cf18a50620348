/* test_verdict.c - the stuck-operation verdict line (core/verdict.h): who is
 * named, how, and the waiting ranks' ranges. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "algorithms/algo.h"
#include "core/verdict.h"

#define N 8

static const char *const hosts[N] = {"h0", "h0", "h1", "h1", "h2", "h2", "h3", "h3"};

/* Every rank inside collective #42 (seq 50), idle-free, waiting on rank w. */
static void all_at(hc_rank_where_t *w, uint64_t c)
{
    for (int r = 0; r < N; r++)
        w[r] = (hc_rank_where_t){.known   = 1,
                                 .seq     = c + 8,
                                 .ccount  = c,
                                 .ended   = c + 7,
                                 .c_bytes = 16u << 20,
                                 .c_desc  = HC_COLL_ALLREDUCE,
                                 .waiting = -1};
}

static const hc_verdict_op_t op42 = {
    .coll = HC_COLL_ALLREDUCE, .seq = 50, .cseq = 42, .bytes = 16u << 20, .peer = -1};

static void one_behind(void **state)
{
    hc_rank_where_t w[N];
    char            buf[512];
    (void)state;
    all_at(w, 42);
    w[3] = (hc_rank_where_t){.known   = 1,
                             .seq     = 49,
                             .ccount  = 41,
                             .ended   = 49,
                             .c_bytes = 64,
                             .c_desc  = HC_COLL_BROADCAST,
                             .waiting = -1};
    assert_int_equal(hc_verdict_format(&op42, w, hosts, N, 0, buf, sizeof(buf)), 1);
    assert_string_equal(buf, "allreduce #42 (16 MiB): rank 3 (host h1) is at #41 broadcast "
                             "(done: in the program, not in hcomm); ranks 0-2, 4-7 waiting");
}

static void silent_left_and_running(void **state)
{
    hc_rank_where_t w[N];
    char            buf[512];
    (void)state;
    all_at(w, 42);
    w[0]        = (hc_rank_where_t){0};         /* no answer */
    w[5]        = (hc_rank_where_t){.left = 1}; /* gone */
    w[6].ccount = 40, w[6].waiting = 7;         /* behind, inside #40 */
    assert_int_equal(hc_verdict_format(&op42, w, NULL, N, 0, buf, sizeof(buf)), 2);
    assert_string_equal(buf, "allreduce #42 (16 MiB): rank 0 does not answer (stopped or dead); "
                             "rank 6 is at #40 allreduce (running, waiting for rank 7); rank 5 "
                             "has left (aborted or destroyed the communicator, or exited); "
                             "ranks 1-4, 7 waiting");
    /* offline, a missing file */
    assert_int_equal(hc_verdict_format(&op42, w, NULL, N, 1, buf, sizeof(buf)), 2);
    assert_non_null(strstr(buf, "rank 0 left no record (stopped or dead)"));
}

static void data_path(void **state)
{
    hc_rank_where_t w[N];
    char            buf[512];
    (void)state;
    all_at(w, 42);
    w[1].waiting = 2, w[4].waiting = 5;
    assert_int_equal(hc_verdict_format(&op42, w, hosts, N, 0, buf, sizeof(buf)), 2);
    assert_string_equal(buf, "allreduce #42 (16 MiB): every rank reached it; the data path "
                             "stalls: rank 1 waits for rank 2, rank 4 waits for rank 5");
}

static void p2p_peer(void **state)
{
    hc_rank_where_t       w[N];
    char                  buf[512];
    const hc_verdict_op_t op = {.coll = HC_COLL_RECV, .seq = 7, .bytes = 1500, .peer = 4};
    (void)state;
    all_at(w, 42);
    w[4].ended = w[4].seq;
    assert_int_equal(hc_verdict_format(&op, w, hosts, N, 0, buf, sizeof(buf)), 1);
    assert_string_equal(buf, "recv #7 (1500 B from rank 4): rank 4 (host h2) is at #42 allreduce "
                             "(done: in the program, not in hcomm)");
}

static void truncation_and_many(void **state)
{
    hc_rank_where_t w[64];
    char            buf[64];
    (void)state;
    memset(w, 0, sizeof(w)); /* nobody answers */
    assert_int_equal(hc_verdict_format(&op42, w, NULL, 64, 0, buf, sizeof(buf)), 64);
    assert_int_equal(strlen(buf), sizeof(buf) - 1); /* cut, terminated */
    char big[4096];
    hc_verdict_format(&op42, w, NULL, 64, 0, big, sizeof(big));
    assert_non_null(strstr(big, "; and 56 more ranks"));
}

static void bytes(void **state)
{
    char b[32];
    (void)state;
    hc_verdict_bytes(4, b, sizeof(b));
    assert_string_equal(b, "4 B");
    hc_verdict_bytes(4096, b, sizeof(b));
    assert_string_equal(b, "4 KiB");
    hc_verdict_bytes(1536, b, sizeof(b));
    assert_string_equal(b, "1536 B");
    hc_verdict_bytes(3u << 29, b, sizeof(b));
    assert_string_equal(b, "1536 MiB"); /* exact beats short */
    hc_verdict_bytes(15000, b, sizeof(b));
    assert_string_equal(b, "14.6 KiB");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_behind),          cmocka_unit_test(silent_left_and_running),
        cmocka_unit_test(data_path),           cmocka_unit_test(p2p_peer),
        cmocka_unit_test(truncation_and_many), cmocka_unit_test(bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
