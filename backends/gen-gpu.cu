/*
 * gen-gpu.cu: the benchmark's fresh inputs made on the device (ak-wire.h
 * has the generator, shared with the host, which regenerates the rows it
 * checks).  Built by nvcc for the CUDA runner and by hipcc (-x hip) for
 * the HIP runner.
 */
#ifdef __HIPCC__
#include <hip/hip_runtime.h>
#define gpuStream_t hipStream_t
#define gpuGetLastError hipGetLastError
#else
#include <cuda_runtime.h>
#define gpuStream_t cudaStream_t
#define gpuGetLastError cudaGetLastError
#endif
#include "ak-wire.h"

__global__ void ak_gen_kernel(void *p, int dt, int64_t n, struct ak_gen g,
			      uint64_t seed, int t)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;

	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	     i < n; i += stride)
		ak_gen_store(p, dt, (uint64_t)i, seed, t, &g);
}

/* Queues the fill on stream; the runtime's error code (0 success). */
extern "C" int ak_gpu_generate(void *p, int dt, int64_t n,
			       const struct ak_gen *g, uint64_t seed, int t,
			       void *stream)
{
	int64_t blocks = (n + 255) / 256;

	if (n <= 0)
		return 0;
	if (blocks > 65536)
		blocks = 65536;
	ak_gen_kernel<<<(unsigned)blocks, 256, 0, (gpuStream_t)stream>>>(
		p, dt, n, *g, seed, t);
	return (int)gpuGetLastError();
}
