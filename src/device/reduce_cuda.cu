/* reduce_cuda.cu - element-wise reductions on a CUDA device, with the host
 * kernels' semantics (base/reduce.c, reduce_half.c): integer sum and prod
 * wrap (unsigned arithmetic); float min/max return a NaN operand (b's when
 * both are) and a on ties; float16 and bfloat16 compute in float32 and round
 * to nearest even; HCOMM_AVG reduces as a sum and the _div kernels divide
 * (8- and 32-bit integers through double, exactly; truncation toward zero).
 *
 * nvcc builds this file into a fatbin that libhcomm carries
 * (reduce_fatbin_cuda.c) and loads with the CUDA runtime it loads itself
 * (reduce_launch_cuda.c): kernels are looked up by name, hence extern "C":
 * hc_k_<dtype>_<op>(dst, a, b, n) and hc_k_<dtype>_div(buf, n, ranks). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace {

enum { OP_SUM, OP_PROD, OP_MIN, OP_MAX };

/* How a dtype is loaded, added, multiplied and stored; min and max compare
 * the loaded values. */
template <typename T, typename U> struct integer { /* U: the unsigned type of T's width */
    typedef T              store;
    typedef T              calc;
    __device__ static T    load(T v) { return v; }
    __device__ static T    put(T v) { return v; }
    __device__ static T    add(T x, T y) { return (T)((U)x + (U)y); }
    __device__ static T    mul(T x, T y) { return (T)((U)x * (U)y); }
    __device__ static bool nan(T) { return false; }
};
template <typename T> struct flt {
    typedef T              store;
    typedef T              calc;
    __device__ static T    load(T v) { return v; }
    __device__ static T    put(T v) { return v; }
    __device__ static T    add(T x, T y) { return x + y; }
    __device__ static T    mul(T x, T y) { return x * y; }
    __device__ static bool nan(T v) { return v != v; }
};
/* float16 and bfloat16: loaded into float32, computed there, rounded back */
struct in_float {
    typedef float          calc;
    __device__ static float add(float x, float y) { return x + y; }
    __device__ static float mul(float x, float y) { return x * y; }
    __device__ static bool  nan(float v) { return v != v; }
};
struct f16 : in_float {
    typedef __half           store;
    __device__ static float  load(__half v) { return __half2float(v); }
    __device__ static __half put(float v) { return __float2half_rn(v); }
};
struct bf16 : in_float {
    typedef __nv_bfloat16           store;
    __device__ static float         load(__nv_bfloat16 v) { return __bfloat162float(v); }
    __device__ static __nv_bfloat16 put(float v) { return __float2bfloat16_rn(v); }
};

template <typename K, int OP>
__device__ void reduce(typename K::store *d, const typename K::store *a,
                       const typename K::store *b, unsigned long long n)
{
    typedef typename K::calc C;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        C x = K::load(a[i]), y = K::load(b[i]), r;
        switch (OP) {
        case OP_SUM: r = K::add(x, y); break;
        case OP_PROD: r = K::mul(x, y); break;
        case OP_MIN: r = K::nan(y) ? y : (y < x ? y : x); break;
        default: r = K::nan(y) ? y : (y > x ? y : x); break;
        }
        d[i] = K::put(r);
    }
}

/* Division: through double for the narrow integers, in the type otherwise. */
template <typename K, bool VIA_DOUBLE>
__device__ void divide(typename K::store *buf, unsigned long long n, int ranks)
{
    typedef typename K::store T;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        if (VIA_DOUBLE)
            buf[i] = (T)((double)buf[i] / (double)ranks);
        else
            buf[i] = K::put(K::load(buf[i]) / (typename K::calc)ranks);
    }
}

} // namespace

/* One named kernel: hc_k_<name>_<opname>. */
#define HC_K_OP(name, K, opname, OP)                                                               \
    extern "C" __global__ void hc_k_##name##_##opname(K::store *d, const K::store *a,              \
                                                      const K::store *b, unsigned long long n)     \
    {                                                                                              \
        reduce<K, OP>(d, a, b, n);                                                                 \
    }
#define HC_K_OPS(name, K)                                                                          \
    HC_K_OP(name, K, sum, OP_SUM)                                                                  \
    HC_K_OP(name, K, prod, OP_PROD)                                                                \
    HC_K_OP(name, K, min, OP_MIN)                                                                  \
    HC_K_OP(name, K, max, OP_MAX)

#define HC_K_DIV(name, K, VIA_DOUBLE)                                                              \
    extern "C" __global__ void hc_k_##name##_div(K::store *buf, unsigned long long n, int ranks)   \
    {                                                                                              \
        divide<K, VIA_DOUBLE>(buf, n, ranks);                                                      \
    }

typedef integer<int8_t, uint8_t>    k_i8;
typedef integer<uint8_t, uint8_t>   k_u8;
typedef integer<int32_t, uint32_t>  k_i32;
typedef integer<uint32_t, uint32_t> k_u32;
typedef integer<int64_t, uint64_t>  k_i64;
typedef integer<uint64_t, uint64_t> k_u64;

HC_K_OPS(i8, k_i8)
HC_K_OPS(u8, k_u8)
HC_K_OPS(i32, k_i32)
HC_K_OPS(u32, k_u32)
HC_K_OPS(i64, k_i64)
HC_K_OPS(u64, k_u64)
HC_K_OPS(f16, f16)
HC_K_OPS(f32, flt<float>)
HC_K_OPS(f64, flt<double>)
HC_K_OPS(bf16, bf16)

HC_K_DIV(i8, k_i8, true)
HC_K_DIV(u8, k_u8, true)
HC_K_DIV(i32, k_i32, true)
HC_K_DIV(u32, k_u32, true)
HC_K_DIV(i64, k_i64, false)
HC_K_DIV(u64, k_u64, false)
HC_K_DIV(f16, f16, false)
HC_K_DIV(f32, flt<float>, false)
HC_K_DIV(f64, flt<double>, false)
HC_K_DIV(bf16, bf16, false)
