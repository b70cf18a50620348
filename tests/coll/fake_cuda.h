/* fake_cuda.h - the fake CUDA stream of fake_cuda.c. */
#ifndef HC_TEST_FAKE_CUDA_H
#define HC_TEST_FAKE_CUDA_H

/* Seconds before the first callback runs; set before the first CUDA stream. */
extern double fake_cuda_delay;

/* As CUDA's cudaLaunchHostFunc on the fake stream: fn(arg) after the hcomm
 * tasks queued before it. 0, or -1 out of memory. */
int hc_stream_cuda_bracket(void *cuda_stream, void (*fn)(void *), void *arg);

#endif
