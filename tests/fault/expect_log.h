/* expect_log.h - the bad-input tests' checks: a call returns the status
 * expected and adds exactly one line to the library's log (none on success).
 * The program points HCOMM_LOG_FILE at log_path before its first library
 * call; cmocka.h comes first. */
#ifndef HCT_EXPECT_LOG_H
#define HCT_EXPECT_LOG_H

#include <stdio.h>

#include "hcomm.h"

static char log_path[256];

/* The lines of HCOMM_LOG_FILE so far. */
static long log_lines(void)
{
    FILE *f = fopen(log_path, "r");
    long  n = 0;
    int   ch;

    if (f == NULL)
        return 0;
    while ((ch = getc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

static void expect_status(const char *call, int line, hcomm_status_t got, hcomm_status_t want,
                          long lines_before, long want_lines)
{
    long lines = log_lines() - lines_before;

    if (got != want)
        fail_msg("line %d: %s returned %s (%d), expected %s (%d)", line, call,
                 hcomm_status_name(got), (int)got, hcomm_status_name(want), (int)want);
    if (lines != want_lines)
        fail_msg("line %d: %s logged %ld lines, expected %ld (log: %s)", line, call, lines,
                 want_lines, log_path);
}

/* The call must return `want` and log one line (none for success). */
#define EXPECT(call, want)                                                                         \
    do {                                                                                           \
        long           b_ = log_lines();                                                           \
        hcomm_status_t s_ = (call);                                                                \
        expect_status(#call, __LINE__, s_, (want), b_, (want) == HCOMM_SUCCESS ? 0 : 1);           \
    } while (0)

/* Either status is right (two arguments are wrong at once); one log line. */
#define EXPECT2(call, want1, want2)                                                                \
    do {                                                                                           \
        long           b_ = log_lines();                                                           \
        hcomm_status_t s_ = (call);                                                                \
        expect_status(#call, __LINE__, s_, s_ == (want2) ? (want2) : (want1), b_, 1);              \
    } while (0)

/* A call inside a group (where a point-to-point peer may be oneself); a
 * rejected call fails the group, as in NCCL: its end returns the refusal
 * (one more line) and runs none of its calls, and does not hang. */
#define GROUP_EXPECT(call, want)                                                                   \
    do {                                                                                           \
        assert_int_equal(hcomm_group_start(), HCOMM_SUCCESS);                                      \
        EXPECT(call, want);                                                                        \
        EXPECT(hcomm_group_end(), want);                                                           \
    } while (0)

#endif
