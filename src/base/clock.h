/* clock.h - the monotonic clocks every wait and timeout in the library reads:
 * precise for deadlines and measurements, coarse (a few ms, no syscall cost
 * worth noting) for checks on hot progress paths. */
#ifndef HC_BASE_CLOCK_H
#define HC_BASE_CLOCK_H

#include <limits.h>
#include <stdint.h>
#include <time.h>

static inline uint64_t hc_clock_ts_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Seconds, precise. */
static inline double hc_clock_now(void)
{
    return (double)hc_clock_ts_ns(CLOCK_MONOTONIC) * 1e-9;
}

static inline uint64_t hc_clock_now_ns(void)
{
    return hc_clock_ts_ns(CLOCK_MONOTONIC);
}

/* Seconds and milliseconds, coarse: for timeouts and periodic checks. */
static inline double hc_clock_coarse(void)
{
    return (double)hc_clock_ts_ns(CLOCK_MONOTONIC_COARSE) * 1e-9;
}

static inline uint64_t hc_clock_coarse_ms(void)
{
    return hc_clock_ts_ns(CLOCK_MONOTONIC_COARSE) / 1000000u;
}

/* The CPU's time-stamp counter on x86-64 (about half what clock_gettime
 * costs), CLOCK_MONOTONIC ns elsewhere: for stamps taken on hot paths and
 * turned into ns later, against two readings of both clocks. Only where the
 * kernel keeps time with it (its clocksource is tsc): then it is invariant and
 * the same on every CPU. */
static inline uint64_t hc_clock_ticks(void)
{
#if defined(__x86_64__)
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
#else
    return hc_clock_now_ns();
#endif
}

/* A poll() timeout: milliseconds to a deadline in seconds, rounded up; -1
 * once passed (0 is a valid wait). */
static inline int hc_clock_ms_left(double deadline)
{
    double left = deadline - hc_clock_now();
    if (left <= 0)
        return -1;
    double ms = left * 1000.0 + 1.0;
    return ms > (double)INT_MAX ? INT_MAX : (int)ms;
}

/* A span of seconds as a timespec; a span beyond ~31 years (users set huge
 * timeouts to mean "never") is held there, not converted out of range. */
#define HC_CLOCK_SPAN_MAX 1e9
static inline struct timespec hc_clock_span(double seconds)
{
    if (!(seconds > 0))
        seconds = 0;
    if (seconds > HC_CLOCK_SPAN_MAX)
        seconds = HC_CLOCK_SPAN_MAX;
    time_t          s  = (time_t)seconds;
    struct timespec ts = {s, (long)((seconds - (double)s) * 1e9)};
    return ts;
}

/* An absolute CLOCK_MONOTONIC time seconds from now, for pthread_cond_timedwait
 * on a condition variable set to that clock (hc_clock_cond_init). */
static inline struct timespec hc_clock_abs_in(double seconds)
{
    struct timespec span = hc_clock_span(seconds);
    uint64_t t = hc_clock_now_ns() + (uint64_t)span.tv_sec * 1000000000u + (uint64_t)span.tv_nsec;
    struct timespec ts = {(time_t)(t / 1000000000u), (long)(t % 1000000000u)};
    return ts;
}

#endif
