/* test_proc.c - hc_proc_gone tells a running process from a dead one, also a
 * zombie (which kill(pid, 0) still finds), through a pidfd and through
 * /proc alike; hc_proc_cpu says where a thread runs. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/proc.h"

static void test_states(void **state)
{
    int   hold[2];
    pid_t child;
    int   pidfd;

    (void)state;
    assert_int_equal(pipe(hold), 0);
    child = fork();
    assert_true(child >= 0);
    if (child == 0) { /* runs until the pipe closes */
        char c;
        close(hold[1]);
        _exit(read(hold[0], &c, 1) == 0 ? 0 : 1);
    }
    close(hold[0]);
    pidfd = hc_proc_open(child);
    assert_int_equal(hc_proc_gone(child, -1), 0);
    if (pidfd >= 0)
        assert_int_equal(hc_proc_gone(child, pidfd), 0);

    close(hold[1]); /* it exits; wait for that without reaping it */
    siginfo_t info;
    assert_int_equal(waitid(P_PID, (id_t)child, &info, WEXITED | WNOWAIT), 0);
    assert_int_equal(kill(child, 0), 0); /* a zombie: kill(2) still finds it */
    assert_int_equal(hc_proc_gone(child, -1), 1);
    if (pidfd >= 0)
        assert_int_equal(hc_proc_gone(child, pidfd), 1);
    else
        print_message("no pidfd here: only the /proc path was tested\n");

    assert_int_equal(waitpid(child, NULL, 0), child);
    assert_int_equal(hc_proc_gone(child, -1), 1);
    if (pidfd >= 0) {
        assert_int_equal(hc_proc_gone(child, pidfd), 1);
        close(pidfd);
    }
    assert_int_equal(hc_proc_gone(0, -1), 0); /* unknown pid: not judged */
    assert_int_equal(hc_proc_gone(getpid(), -1), 0);
}

/* This thread, pinned to each CPU of its mask in turn, is found there; a
 * thread that does not exist is -1. */
static void test_cpu(void **state)
{
    cpu_set_t mask, one;

    (void)state;
    assert_int_equal(sched_getaffinity(0, sizeof(mask), &mask), 0);
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &mask))
            continue;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
        assert_int_equal(hc_proc_cpu(getpid(), gettid()), c);
    }
    assert_int_equal(sched_setaffinity(0, sizeof(mask), &mask), 0);
    assert_int_equal(hc_proc_cpu(getpid(), -5), -1);
    assert_int_equal(hc_proc_cpu(0, 0), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_states),
        cmocka_unit_test(test_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
