/*
 * dev-gpu.c: the device of the CUDA runner (-DAK_CUDA) and of the HIP
 * runner (-DAK_HIP), on each vendor's runtime API.  The two APIs match
 * name for name, so one file serves both through the gpu* names below.
 *
 * Timing: an event on the runner's stream before the call, and after it
 * an event on the legacy default stream, which waits for all work queued
 * on every blocking stream of the device: a kernel that launches on a
 * stream of its own is timed to its end, and no host round trip lands
 * inside the measurement.  A device-wide synchronize follows every call.
 */
#include <dlfcn.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include "backends/dev.h"

#ifdef AK_HIP
#include <hip/hip_runtime_api.h>
#define GPU(x) hip##x
typedef hipError_t gpuError_t;
typedef hipStream_t gpuStream_t;
typedef hipEvent_t gpuEvent_t;
typedef hipDeviceProp_t gpuDeviceProp;
#define gpuSuccess hipSuccess
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define gpuErrorIllegalAddress hipErrorIllegalAddress
/* l2CacheSize leaves out MI300's 256 MB Infinity Cache, which a timed
 * call must not find warm either. */
#define FLUSH_MIN ((size_t)512 << 20)
const char *dev_backend = "hip";
#else
#include <cuda_runtime_api.h>
#define GPU(x) cuda##x
typedef cudaError_t gpuError_t;
typedef cudaStream_t gpuStream_t;
typedef cudaEvent_t gpuEvent_t;
typedef struct cudaDeviceProp gpuDeviceProp;
#define gpuSuccess cudaSuccess
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define FLUSH_MIN ((size_t)64 << 20)
const char *dev_backend = "cuda";
#endif

static char err[512];
static int sticky;
static gpuStream_t stream;
static gpuEvent_t ev_start, ev_stop;
static void *flush_buf;
static size_t flush_size;
static gpuDeviceProp prop;

/* Records a failed call; errors that poison the context are sticky. */
static int check(gpuError_t e, const char *what)
{
	if (e == gpuSuccess)
		return 0;
	snprintf(err, sizeof(err), "%s: %s error %d: %s", what, dev_backend,
		 (int)e, GPU(GetErrorString)(e));
	/* After these the context is gone: the process must be replaced. */
	if (GPU(DeviceSynchronize)() != gpuSuccess || GPU(GetLastError)() != gpuSuccess)
		sticky = 1;
	return -1;
}

#ifdef AK_HIP
/* The amdgpu kernel driver's version ("6.3.6"), where a DKMS install
 * shows it. */
static void add_driver(json_t *info)
{
	FILE *f = fopen("/sys/module/amdgpu/version", "r");
	char ver[64] = "";

	if (!f)
		return;
	if (fscanf(f, "%63s", ver) == 1)
		json_object_set_new(info, "driver", json_string(ver));
	fclose(f);
}
#else
/* The kernel driver's version ("580.159.04"), where Linux shows it. */
static void add_driver(json_t *info)
{
	FILE *f = fopen("/proc/driver/nvidia/version", "r");
	char line[512], *p;

	if (!f)
		return;
	/* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04 ..." or
	 * "... UNIX Open Kernel Module for x86_64  580.159.04 ...": the first
	 * word after "Kernel Module" made of digits and dots */
	p = fgets(line, sizeof(line), f) ? strstr(line, "Kernel Module") : NULL;
	while (p && *p) {
		size_t n;

		p += strspn(p, " \t\n");
		n = strcspn(p, " \t\n");
		if (n && n < 64 && isdigit((unsigned char)*p) &&
		    strspn(p, "0123456789.") == n) {
			char ver[64];

			memcpy(ver, p, n);
			ver[n] = '\0';
			json_object_set_new(info, "driver", json_string(ver));
			break;
		}
		p += n;
	}
	fclose(f);
}
#endif

static void add_clocks(json_t *info)
{
	int v;

#ifdef AK_CUDA
	if (cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, 0) == cudaSuccess)
		json_object_set_new(info, "clock_mhz", json_integer(v / 1000));
	if (cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, 0) == cudaSuccess)
		json_object_set_new(info, "mem_clock_mhz", json_integer(v / 1000));
	if (cudaDeviceGetAttribute(&v, cudaDevAttrGlobalMemoryBusWidth, 0) == cudaSuccess)
		json_object_set_new(info, "bus_bits", json_integer(v));
#else
	if (hipDeviceGetAttribute(&v, hipDeviceAttributeClockRate, 0) == hipSuccess)
		json_object_set_new(info, "clock_mhz", json_integer(v / 1000));
	if (hipDeviceGetAttribute(&v, hipDeviceAttributeMemoryClockRate, 0) == hipSuccess)
		json_object_set_new(info, "mem_clock_mhz", json_integer(v / 1000));
	if (hipDeviceGetAttribute(&v, hipDeviceAttributeMemoryBusWidth, 0) == hipSuccess)
		json_object_set_new(info, "bus_bits", json_integer(v));
#endif
}

/* Which device this is, among others of its kind: its PCI bus id as
 * nvidia-smi and rocm-smi print it, the CUDA UUID ("GPU-8f3a...") where
 * there is one, and how many devices the process sees (what
 * `run --gpus all` counts). */
static void add_identity(json_t *info, int count)
{
	char bus[32];

	snprintf(bus, sizeof(bus), "%08x:%02x:%02x.0",
		 (unsigned)prop.pciDomainID, (unsigned)prop.pciBusID,
		 (unsigned)prop.pciDeviceID);
	json_object_set_new(info, "pci_bus_id", json_string(bus));
	json_object_set_new(info, "device_count", json_integer(count));
#ifdef AK_CUDA
	{
		const unsigned char *u = (const unsigned char *)prop.uuid.bytes;
		char id[64];

		snprintf(id, sizeof(id), "GPU-%02x%02x%02x%02x-%02x%02x-"
			 "%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8],
			 u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
		json_object_set_new(info, "uuid", json_string(id));
	}
#endif
}

int dev_init(json_t *info)
{
	int n = 0, drv = 0, rt = 0;
	char arch[64];

	if (check(GPU(GetDeviceCount)(&n), "device count"))
		return -1;
	if (n < 1) {
		snprintf(err, sizeof(err), "no %s device found", dev_backend);
		return -1;
	}
	if (check(GPU(SetDevice)(0), "set device") ||
	    check(GPU(GetDeviceProperties)(&prop, 0), "device properties") ||
	    check(GPU(StreamCreate)(&stream), "stream") ||
	    check(GPU(EventCreate)(&ev_start), "event") ||
	    check(GPU(EventCreate)(&ev_stop), "event"))
		return -1;
	GPU(DriverGetVersion)(&drv);
	GPU(RuntimeGetVersion)(&rt);
#ifdef AK_HIP
	snprintf(arch, sizeof(arch), "%s", prop.gcnArchName);
	arch[strcspn(arch, ":")] = '\0';
#else
	snprintf(arch, sizeof(arch), "sm_%d%d", prop.major, prop.minor);
#endif
	flush_size = 2 * (size_t)prop.l2CacheSize;
	if (flush_size < FLUSH_MIN)
		flush_size = FLUSH_MIN;
	if (check(GPU(Malloc)(&flush_buf, flush_size), "flush buffer"))
		return -1;
	json_object_set_new(info, "name", json_string(prop.name));
	json_object_set_new(info, "arch", json_string(arch));
	json_object_set_new(info, "driver_version", json_integer(drv));
	json_object_set_new(info, "runtime_version", json_integer(rt));
	json_object_set_new(info, "sms", json_integer(prop.multiProcessorCount));
	json_object_set_new(info, "l2_bytes", json_integer(prop.l2CacheSize));
	json_object_set_new(info, "memory_bytes",
			    json_integer((json_int_t)prop.totalGlobalMem));
	json_object_set_new(info, "warp_size", json_integer(prop.warpSize));
	add_clocks(info);
	add_driver(info);
	add_identity(info, n);
	return 0;
}

const char *dev_error(void)
{
	return err;
}

int dev_sticky(void)
{
	return sticky;
}

int dev_alloc(void **p, size_t n)
{
	return check(GPU(Malloc)(p, n ? n : 1), "allocation");
}

void dev_free(void *p)
{
	GPU(Free)(p);
}

int dev_h2d(void *dst, const void *src, size_t n)
{
	return check(GPU(Memcpy)(dst, src, n, gpuMemcpyHostToDevice), "copy to device");
}

int dev_d2h(void *dst, const void *src, size_t n)
{
	return check(GPU(Memcpy)(dst, src, n, gpuMemcpyDeviceToHost), "copy to host");
}

int dev_fill(void *p, unsigned char byte, size_t n)
{
	if (check(GPU(Memset)(p, byte, n), "memset"))
		return -1;
	return check(GPU(DeviceSynchronize)(), "memset");
}

int dev_copy(void *dst, const void *src, size_t n)
{
	return check(GPU(MemcpyAsync)(dst, src, n, gpuMemcpyDeviceToDevice,
				      stream), "device copy");
}

void *dev_stream(void)
{
	return (void *)stream;
}

int dev_after_call(void)
{
	if (check(GPU(GetLastError)(), "kernel launch"))
		return -1;
	return check(GPU(DeviceSynchronize)(), "kernel");
}

int dev_sync(void)
{
	return check(GPU(DeviceSynchronize)(), "synchronize");
}

/* backends/gen-gpu.cu, built by nvcc or hipcc */
int ak_gpu_generate(void *p, int dt, int64_t n, const struct ak_gen *g,
		    uint64_t seed, int t, void *stream);

int dev_generate(void *p, int dt, int64_t n, const struct ak_gen *g,
		 uint64_t seed, int t)
{
	return check((gpuError_t)ak_gpu_generate(p, dt, n, g, seed, t,
						 stream), "generate inputs");
}

int dev_flush_cache(void)
{
	static unsigned char v;

	v++;
	if (check(GPU(MemsetAsync)(flush_buf, v, flush_size, stream), "L2 flush"))
		return -1;
	return 0;
}

int dev_timer_start(void)
{
	return check(GPU(EventRecord)(ev_start, stream), "event");
}

int dev_timer_stop(double *us)
{
	float ms = 0;

	/* Stream 0 is the legacy default stream: it waits for all work
	 * queued on the device's blocking streams before this event. */
	if (check(GPU(EventRecord)(ev_stop, (gpuStream_t)0), "event") ||
	    check(GPU(EventSynchronize)(ev_stop), "kernel") ||
	    check(GPU(EventElapsedTime)(&ms, ev_start, ev_stop), "event"))
		return -1;
	*us = ms * 1e3;
	return 0;
}

/* Median of n timings of fn, in microseconds. */
static double median_us(double *t, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
			double x = t[j];

			t[j] = t[j - 1];
			t[j - 1] = x;
		}
	return t[n / 2];
}

static int copy_rate(json_t *out)
{
	size_t n = (size_t)1 << 30;
	void *a, *b;
	double t[9];

	if (dev_alloc(&a, n) || dev_alloc(&b, n))
		return -1;
	if (dev_fill(a, 1, n))
		return -1;
	for (int i = 0; i < 9; i++)
		if (dev_timer_start() || dev_copy(b, a, n) ||
		    dev_timer_stop(&t[i]))
			return -1;
	dev_free(a);
	dev_free(b);
	json_object_set_new(out, "copy_gbps",
			    json_real(2.0 * n / (median_us(t, 9) * 1e3)));
	return 0;
}

#ifdef AK_CUDA
/*
 * The matrix rate through cuBLAS, loaded at run time so that the runner
 * needs no cuBLAS to build or to run kernels: this is the only vendor
 * library call in the tool, and no candidate ever reaches it.
 */
typedef int (*create_fn)(void **);
typedef int (*destroy_fn)(void *);
typedef int (*stream_fn)(void *, cudaStream_t);
typedef int (*gemm_fn)(void *, int, int, int, int, int, const void *,
		       const void *, int, int, const void *, int, int,
		       const void *, void *, int, int, int, int);

static double gemm_tflops(void *h, gemm_fn gemm, int type, int n)
{
	size_t el = type == 0 ? 4 : 2;
	void *a, *b, *c;
	float alpha = 1, beta = 0;
	double t[7];
	int compute = 68;       /* CUBLAS_COMPUTE_32F: no tf32 for f32 */

	if (dev_alloc(&a, el * n * n) || dev_alloc(&b, el * n * n) ||
	    dev_alloc(&c, el * n * n))
		return 0;
	/* Random-looking data: zeros run measurably faster. */
	dev_fill(a, 0x3b, el * n * n);
	dev_fill(b, 0x39, el * n * n);
	for (int i = 0; i < 10; i++) {
		double us = 0;

		if (dev_timer_start() ||
		    gemm(h, 0, 0, n, n, n, &alpha, a, type, n, b, type, n,
			 &beta, c, type, n, compute, -1) ||
		    dev_timer_stop(&us))
			return 0;
		if (i >= 3)
			t[i - 3] = us;
	}
	dev_free(a);
	dev_free(b);
	dev_free(c);
	return 2.0 * n * n * (double)n / (median_us(t, 7) * 1e6);
}

static void matrix_rates(json_t *out)
{
	void *lib = dlopen("libcublas.so", RTLD_NOW);
	void *h = NULL;
	create_fn create;
	destroy_fn destroy;
	stream_fn set_stream;
	gemm_fn gemm;

	if (!lib)
		lib = dlopen("libcublas.so.13", RTLD_NOW);
	if (!lib)
		lib = dlopen("libcublas.so.12", RTLD_NOW);
	if (!lib) {
		json_object_set_new(out, "matrix_method",
				    json_string("unavailable: no libcublas"));
		return;
	}
	*(void **)&create = dlsym(lib, "cublasCreate_v2");
	*(void **)&destroy = dlsym(lib, "cublasDestroy_v2");
	*(void **)&set_stream = dlsym(lib, "cublasSetStream_v2");
	*(void **)&gemm = dlsym(lib, "cublasGemmEx");
	if (!create || !gemm || create(&h))
		return;
	set_stream(h, stream);
	json_object_set_new(out, "matrix_tflops", json_pack("{s:f,s:f,s:f}",
		"f16", gemm_tflops(h, gemm, 2, 8192),
		"bf16", gemm_tflops(h, gemm, 14, 8192),
		"f32", gemm_tflops(h, gemm, 0, 4096)));
	json_object_set_new(out, "matrix_method",
			    json_string("cublasGemmEx, 8192^3 (f32: 4096^3)"));
	destroy(h);
}
#else
/*
 * The matrix rate through rocBLAS, loaded at run time as cuBLAS is above
 * (hipBLAS is a layer over rocBLAS on AMD, so rocBLAS is there whenever
 * either is).  The enum values are rocBLAS's: operation_none 111, f16_r
 * 150, f32_r 151, bf16_r 168, gemm_algo_standard 0.
 */
typedef int (*roc_create_fn)(void **);
typedef int (*roc_destroy_fn)(void *);
typedef int (*roc_stream_fn)(void *, hipStream_t);
typedef int (*roc_gemm_fn)(void *, int, int, int, int, int, const void *,
			   const void *, int, int, const void *, int, int,
			   const void *, const void *, int, int, void *, int,
			   int, int, int, int, unsigned);

static double rocblas_tflops(void *h, roc_gemm_fn gemm, int type, int n)
{
	size_t el = type == 151 ? 4 : 2;
	void *a = NULL, *b = NULL, *c = NULL;
	float alpha = 1, beta = 0;
	double t[7], rate = 0;

	if (dev_alloc(&a, el * n * n) || dev_alloc(&b, el * n * n) ||
	    dev_alloc(&c, el * n * n))
		goto cleanup;
	/* Random-looking data: zeros run measurably faster. */
	dev_fill(a, 0x3b, el * n * n);
	dev_fill(b, 0x39, el * n * n);
	for (int i = 0; i < 10; i++) {
		double us = 0;

		/* f32 accumulation (compute type f32_r) for every dtype */
		if (dev_timer_start() ||
		    gemm(h, 111, 111, n, n, n, &alpha, a, type, n, b, type, n,
			 &beta, c, type, n, c, type, n, 151, 0, 0, 0) ||
		    dev_timer_stop(&us))
			goto cleanup;
		if (i >= 3)
			t[i - 3] = us;
	}
	rate = 2.0 * n * n * (double)n / (median_us(t, 7) * 1e6);
cleanup:
	dev_free(a);
	dev_free(b);
	dev_free(c);
	return rate;
}

static void matrix_rates(json_t *out)
{
	static const char *const names[] = {
		"librocblas.so", "librocblas.so.4", "librocblas.so.0",
		"/opt/rocm/lib/librocblas.so",
	};
	void *lib = NULL, *h = NULL;
	roc_create_fn create;
	roc_destroy_fn destroy;
	roc_stream_fn set_stream;
	roc_gemm_fn gemm;

	for (size_t i = 0; !lib && i < sizeof(names) / sizeof(*names); i++)
		lib = dlopen(names[i], RTLD_NOW);
	if (!lib) {
		json_object_set_new(out, "matrix_method",
				    json_string("unavailable: no librocblas"));
		return;
	}
	*(void **)&create = dlsym(lib, "rocblas_create_handle");
	*(void **)&destroy = dlsym(lib, "rocblas_destroy_handle");
	*(void **)&set_stream = dlsym(lib, "rocblas_set_stream");
	*(void **)&gemm = dlsym(lib, "rocblas_gemm_ex");
	if (!create || !destroy || !set_stream || !gemm || create(&h)) {
		json_object_set_new(out, "matrix_method",
				    json_string("unavailable: librocblas "
						"without rocblas_gemm_ex"));
		return;
	}
	set_stream(h, stream);
	json_object_set_new(out, "matrix_tflops", json_pack("{s:f,s:f,s:f}",
		"f16", rocblas_tflops(h, gemm, 150, 8192),
		"bf16", rocblas_tflops(h, gemm, 168, 8192),
		"f32", rocblas_tflops(h, gemm, 151, 4096)));
	json_object_set_new(out, "matrix_method",
			    json_string("rocblas_gemm_ex, 8192^3 (f32: 4096^3)"));
	destroy(h);
}
#endif

int dev_ceilings(json_t *out)
{
	if (copy_rate(out))
		return -1;
	matrix_rates(out);
	return 0;
}
