/* reduce_fatbin_cuda.c - the device reductions' fatbin (reduce_cuda.cu, which
 * nvcc builds into HC_REDUCE_FATBIN: Makefile.am), carried in libhcomm's
 * read-only data for reduce_launch_cuda.c to load. The header is made with
 * the fatbin: including it makes this file rebuild when the fatbin changes. */
#include "device/reduce_cuda_fatbin.h"

#define HC_FATBIN_ASM(path)                                                                        \
    __asm__(".section .rodata\n"                                                                   \
            ".balign 8\n"                                                                          \
            ".globl hc_reduce_cuda_fatbin\n"                                                       \
            ".hidden hc_reduce_cuda_fatbin\n"                                                      \
            ".type hc_reduce_cuda_fatbin, @object\n"                                               \
            "hc_reduce_cuda_fatbin:\n"                                                             \
            ".incbin \"" path "\"\n"                                                               \
            ".size hc_reduce_cuda_fatbin, . - hc_reduce_cuda_fatbin\n"                             \
            ".previous\n");

HC_FATBIN_ASM(HC_REDUCE_FATBIN)
