/* device_check_test.c - device_check's buffers in the test memory kind
 * (src/device/device_test.c), which faults on any access but the memory
 * kinds' own copies: runs everywhere. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "device/device.h"
#include "device_check.h"
#include "test_comm.h"

const char *const dc_kind_name = "test";

const char *dc_unusable(void)
{
    return NULL;
}

void dc_bind(int rank)
{
    (void)rank;
}

void *dc_alloc(size_t len)
{
    return hc_mem_test_alloc(len);
}

void dc_free(void *p)
{
    hc_mem_test_free(p);
}

/* Test memory faults when touched directly: else device_check shows nothing. */
void dc_kind_checks(hcomm_comm_t comm)
{
    (void)comm;
    volatile int32_t *p   = hc_mem_test_alloc(4096);
    pid_t             pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        _exit(p[0] == 12345 ? 3 : 4); /* must not get here */
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGSEGV, "a direct read of test memory did not fault");
    CHECK(hc_mem_kind((const void *)(p + 10)) == HC_MEM_TEST, "test memory not classified");
    hc_mem_test_free((void *)p);
}

void dc_copy_rates(size_t bytes)
{
    printf("the test kind's copies are memcpy (%zu bytes asked): no device to time\n", bytes);
}
