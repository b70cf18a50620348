/* device.h - memory kinds: what a buffer the caller passes is, and how to
 * copy it. Host memory is the first kind; CUDA device memory the second,
 * where the build has CUDA; the test kind is memory that only this layer's
 * copies may reach (device_test.c), so that tests run the device paths on
 * machines without a device. Transports move host memory; the executor stages
 * the other kinds through host buffers (core/stage.h). */
#ifndef HC_DEVICE_H
#define HC_DEVICE_H

#include <stddef.h>

#include "hcomm.h"

typedef enum {
    HC_MEM_HOST = 0, /* host memory, pinned or not, and CUDA managed memory */
    HC_MEM_CUDA,     /* CUDA device memory */
    HC_MEM_TEST,     /* the test kind: host pages the caller's address cannot reach */
    HC_MEM_KIND_COUNT
} hc_mem_kind_t;

/* Test regions alive (device_test.c), and the devices the build's own kinds
 * found: -1 before the first hc_mem_kind asked (device_cuda.c), 0 without. */
extern int hc_mem_test_live __attribute__((visibility("hidden")));
extern int hc_mem_native_devices __attribute__((visibility("hidden")));

/* Whether any buffer may be of another kind than host: two loads, so that a
 * process of host memory only pays nothing more per call. */
static inline int hc_mem_maybe_other(void)
{
    return __atomic_load_n(&hc_mem_test_live, __ATOMIC_RELAXED) != 0 ||
           __atomic_load_n(&hc_mem_native_devices, __ATOMIC_RELAXED) != 0;
}

/* The kind of memory p points to; HC_MEM_HOST for NULL, and where the build
 * has no CUDA or no device answers. */
hc_mem_kind_t hc_mem_kind(const void *p);

const char *hc_mem_kind_name(hc_mem_kind_t kind);

/* HCOMM_SUCCESS when p (bytes > 0) is host memory; else HCOMM_ERR_UNSUPPORTED
 * and one line naming call: for the calls that take host memory only. */
hcomm_status_t hc_mem_host_only(const char *call, const void *p, size_t bytes);

/* Copies n bytes between any two kinds; HCOMM_ERR_SYSTEM (logged) when the
 * device refuses. */
hcomm_status_t hc_mem_copy(void *dst, const void *src, size_t n);

/* dst[i] = a[i] OP b[i] (base/reduce.h's semantics) where all three are of
 * one kind: on the device for CUDA memory (its kernels, reduce_cuda.cu),
 * with the host kernels otherwise; HCOMM_ERR_UNSUPPORTED (logged) where the
 * build has no device kernels. hc_mem_reduce_div: the avg's division. */
hcomm_status_t hc_mem_reduce(void *dst, const void *a, const void *b, size_t count,
                             hcomm_dtype_t dtype, hcomm_op_t op);
hcomm_status_t hc_mem_reduce_div(void *buf, size_t count, hcomm_dtype_t dtype, int ranks);

/* Pins n bytes of host memory at p for the device's copy engines (CUDA's
 * cudaHostRegister): 1 when pinned, 0 when not (no device, or refused;
 * copies then still work, staged inside the driver). */
int  hc_mem_host_pin(void *p, size_t n);
void hc_mem_host_unpin(void *p);

/* NCCL's ncclMemAlloc: n bytes of device memory on the calling thread's
 * current device into *p where the build's runtime finds a device;
 * HCOMM_ERR_UNSUPPORTED (not logged) where none, HCOMM_ERR_NO_MEMORY (logged)
 * where the device refuses. hc_mem_device_free frees it. */
hcomm_status_t hc_mem_device_alloc(void **p, size_t n);
void           hc_mem_device_free(void *p);

/* ---- the build's own kinds (device_host.c, or device_cuda.c and
 * reduce_launch_cuda.c): pointers that are not host memory ---- */

hc_mem_kind_t  hc_mem_kind_native(const void *p);
hcomm_status_t hc_mem_copy_native(void *dst, const void *src, size_t n);
hcomm_status_t hc_mem_reduce_native(void *dst, const void *a, const void *b, size_t count,
                                    hcomm_dtype_t dtype, hcomm_op_t op);
hcomm_status_t hc_mem_reduce_div_native(void *buf, size_t count, hcomm_dtype_t dtype, int ranks);

/* ---- the test kind (device_test.c) ---- */

/* len bytes of test memory (zeroed), or NULL (logged); freed with
 * hc_mem_test_free. Its address faults on any access but hc_mem_copy's. */
void *hc_mem_test_alloc(size_t len);
void  hc_mem_test_free(void *p);

/* Where p lies in test memory: its read-write shadow; NULL elsewhere. */
void *hc_mem_test_shadow(const void *p);

#endif
