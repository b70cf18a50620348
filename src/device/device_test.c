/* device_test.c - the test kind: memory that hcomm may reach only through
 * hc_mem_copy, as it reaches a GPU's. Each allocation is one memfd mapped
 * twice: at the address the caller gets, with no access, and at a shadow
 * address, read-write, where the copies go. Code that touched a test buffer
 * directly (a transport, a reduction) would fault, so a test that passes with
 * test buffers shows that every byte went through the staging. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/log.h"
#include "device/device.h"

#define TEST_REGIONS 64

typedef struct test_region {
    uintptr_t base; /* the caller's address; 0: a free slot */
    size_t    len;  /* bytes mapped (whole pages) */
    char     *shadow;
} test_region_t;

static test_region_t   regions[TEST_REGIONS];
int                    hc_mem_test_live; /* regions in use (device.h) */
static pthread_mutex_t test_lock = PTHREAD_MUTEX_INITIALIZER;

void *hc_mem_test_shadow(const void *p)
{
    uintptr_t a   = (uintptr_t)p;
    void     *out = NULL;
    if (__atomic_load_n(&hc_mem_test_live, __ATOMIC_ACQUIRE) == 0 || p == NULL)
        return NULL;
    pthread_mutex_lock(&test_lock);
    for (int i = 0; i < TEST_REGIONS && out == NULL; i++)
        if (regions[i].base != 0 && a - regions[i].base < regions[i].len)
            out = regions[i].shadow + (a - regions[i].base);
    pthread_mutex_unlock(&test_lock);
    return out;
}

void *hc_mem_test_alloc(size_t len)
{
    size_t pg   = (size_t)sysconf(_SC_PAGESIZE);
    size_t n    = (len + pg - 1) / pg * pg;
    void  *user = MAP_FAILED, *shadow = MAP_FAILED;
    int    fd = n == 0 ? -1 : memfd_create("hcomm-test-mem", MFD_CLOEXEC);

    if (fd < 0 || ftruncate(fd, (off_t)n) != 0 ||
        (user = mmap(NULL, n, PROT_NONE, MAP_SHARED, fd, 0)) == MAP_FAILED ||
        (shadow = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        hc_error(COLL, "test memory of %zu bytes: %s", len, n == 0 ? "empty" : strerror(errno));
        goto err;
    }
    close(fd);
    pthread_mutex_lock(&test_lock);
    for (int i = 0; i < TEST_REGIONS; i++)
        if (regions[i].base == 0) {
            regions[i] = (test_region_t){(uintptr_t)user, n, shadow};
            __atomic_add_fetch(&hc_mem_test_live, 1, __ATOMIC_RELEASE);
            pthread_mutex_unlock(&test_lock);
            return user;
        }
    pthread_mutex_unlock(&test_lock);
    hc_error(COLL, "test memory: all %d regions in use", TEST_REGIONS);
    munmap(shadow, n);
    munmap(user, n);
    return NULL;
err:
    if (user != MAP_FAILED)
        munmap(user, n);
    if (fd >= 0)
        close(fd);
    return NULL;
}

void hc_mem_test_free(void *p)
{
    test_region_t r = {0, 0, NULL};
    pthread_mutex_lock(&test_lock);
    for (int i = 0; i < TEST_REGIONS; i++)
        if (p != NULL && regions[i].base == (uintptr_t)p) {
            r          = regions[i];
            regions[i] = (test_region_t){0, 0, NULL};
            __atomic_sub_fetch(&hc_mem_test_live, 1, __ATOMIC_RELEASE);
        }
    pthread_mutex_unlock(&test_lock);
    if (r.base == 0)
        return;
    munmap(r.shadow, r.len);
    munmap((void *)r.base, r.len);
}
