/* reduce_launch_cuda.c - the device reductions of reduce_cuda.cu: its fatbin,
 * which the library carries (reduce_fatbin_cuda.c, where configure found
 * nvcc), loaded once through the runtime's library API and launched on the
 * calling thread's stream (runtime_cuda.h), then waited for. */
#include <pthread.h>
#include <stdio.h>

#include "base/log.h"
#include "device/device.h"
#include "device/runtime_cuda.h"

/* the kernels by hcomm's op (HCOMM_AVG reduces as a sum), the division in
 * AVG's slot */
#define K_DIV HCOMM_AVG
#define K_OPS (K_DIV + 1)

#if defined(HC_HAVE_NVCC) && CUDART_VERSION >= 12000
extern const unsigned char hc_reduce_cuda_fatbin[] __attribute__((visibility("hidden")));

static const char *const k_dtype[HCOMM_DTYPE_COUNT] = {"i8",  "u8",  "i32", "u32", "i64",
                                                       "u64", "f16", "f32", "f64", "bf16"};
static const char *const k_op[K_OPS]                = {[HCOMM_SUM]  = "sum",
                                                       [HCOMM_PROD] = "prod",
                                                       [HCOMM_MAX]  = "max",
                                                       [HCOMM_MIN]  = "min",
                                                       [K_DIV]      = "div"};

static cudaKernel_t   kernels[HCOMM_DTYPE_COUNT][K_OPS];
static char           k_why[256];
static pthread_once_t k_once = PTHREAD_ONCE_INIT;

static void kernels_load(void)
{
    const hc_cudart_t *rt = hc_cudart();
    cudaLibrary_t      lib;
    cudaError_t        e;
    if (rt == NULL) {
        snprintf(k_why, sizeof(k_why), "%s", hc_cudart_why());
        return;
    }
    e = rt->LibraryLoadData(&lib, hc_reduce_cuda_fatbin, NULL, NULL, 0, NULL, NULL, 0);
    for (int d = 0; d < HCOMM_DTYPE_COUNT && e == cudaSuccess; d++)
        for (int o = 0; o < K_OPS && e == cudaSuccess; o++) {
            char name[32];
            snprintf(name, sizeof(name), "hc_k_%s_%s", k_dtype[d], k_op[o]);
            e = rt->LibraryGetKernel(&kernels[d][o], lib, name);
        }
    if (e != cudaSuccess)
        snprintf(k_why, sizeof(k_why), "loading hcomm's reduction kernels: %s",
                 rt->GetErrorString(e));
}

/* Runs kernel (dtype, o) over n elements with args; waits for it. */
static hcomm_status_t kernel_run(hcomm_dtype_t dtype, int o, size_t n, void **args)
{
    const hc_cudart_t *rt = hc_cudart();
    cudaStream_t       s;
    pthread_once(&k_once, kernels_load);
    if (k_why[0] != '\0') {
        hc_error(COLL, "device reduction: %s", k_why);
        return HCOMM_ERR_UNSUPPORTED;
    }
    unsigned    blocks = n / 256 + 1 < 4096 ? (unsigned)(n / 256 + 1) : 4096; /* grid-stride */
    cudaError_t e      = hc_cuda_thread_stream(rt, &s);
    if (e == cudaSuccess)
        e = rt->LaunchKernel((const void *)kernels[dtype][o], (dim3){blocks, 1, 1},
                             (dim3){256, 1, 1}, args, 0, s);
    if (e == cudaSuccess)
        e = rt->StreamSynchronize(s);
    if (e != cudaSuccess) {
        hc_error(COLL, "device reduction of %zu elements: %s", n, rt->GetErrorString(e));
        return HCOMM_ERR_SYSTEM;
    }
    return HCOMM_SUCCESS;
}

hcomm_status_t hc_mem_reduce_native(void *dst, const void *a, const void *b, size_t count,
                                    hcomm_dtype_t dtype, hcomm_op_t op)
{
    unsigned long long n      = count;
    void              *args[] = {&dst, (void *)&a, (void *)&b, &n};
    return count == 0 ? HCOMM_SUCCESS
                      : kernel_run(dtype, op == HCOMM_AVG ? HCOMM_SUM : (int)op, count, args);
}

hcomm_status_t hc_mem_reduce_div_native(void *buf, size_t count, hcomm_dtype_t dtype, int ranks)
{
    unsigned long long n      = count;
    void              *args[] = {&buf, &n, &ranks};
    return count == 0 || ranks <= 1 ? HCOMM_SUCCESS : kernel_run(dtype, K_DIV, count, args);
}
#else
hcomm_status_t hc_mem_reduce_native(void *dst, const void *a, const void *b, size_t count,
                                    hcomm_dtype_t dtype, hcomm_op_t op)
{
    (void)dst, (void)a, (void)b, (void)count, (void)dtype, (void)op;
    hc_error(COLL, "device reduction: this hcomm was built without nvcc (CUDA 12 or later)");
    return HCOMM_ERR_UNSUPPORTED;
}

hcomm_status_t hc_mem_reduce_div_native(void *buf, size_t count, hcomm_dtype_t dtype, int ranks)
{
    (void)buf, (void)count, (void)dtype, (void)ranks;
    hc_error(COLL, "device division: this hcomm was built without nvcc (CUDA 12 or later)");
    return HCOMM_ERR_UNSUPPORTED;
}
#endif
