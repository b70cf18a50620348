/* device.h - memory kinds: what a buffer the caller passes is. Host memory
 * is the first kind; CUDA device memory the second, where the build has CUDA.
 * Transports declare the kinds they move; where one cannot, the executor will
 * stage through a host buffer. Today every path moves host memory, and the
 * front ends refuse device buffers with a clear error. */
#ifndef HC_DEVICE_H
#define HC_DEVICE_H

typedef enum {
    HC_MEM_HOST = 0, /* host memory, pinned or not, and CUDA managed memory */
    HC_MEM_CUDA,     /* CUDA device memory */
    HC_MEM_KIND_COUNT
} hc_mem_kind_t;

/* The kind of memory p points to; HC_MEM_HOST for NULL, and where the build
 * has no CUDA or no device answers. */
hc_mem_kind_t hc_mem_kind(const void *p);

const char *hc_mem_kind_name(hc_mem_kind_t kind);

#endif
