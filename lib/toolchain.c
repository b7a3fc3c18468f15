#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "lib/python.h"
#include "lib/toolchain.h"

const char *backend_compiler(const char *backend)
{
	static char nvcc[4096], hipcc[4096];
	const char *env;
	struct stat st;

	if (!strcmp(backend, "host")) {
		env = getenv("AUTOKERNEL_CC");
		return env && *env ? env : "cc";
	}
	if (!strcmp(backend, "triton")) {
		struct strbuf why = STRBUF_INIT;
		const char *py = python_torch(&why);

		strbuf_release(&why);
		return py ? py : "python3";
	}
	if (!strcmp(backend, "cuda")) {
		env = getenv("AUTOKERNEL_NVCC");
		if (env && *env)
			return env;
		env = getenv("CUDA_HOME");
		snprintf(nvcc, sizeof(nvcc), "%s/bin/nvcc",
			 env && *env ? env : "/usr/local/cuda");
		return stat(nvcc, &st) ? "nvcc" : nvcc;
	}
	env = getenv("AUTOKERNEL_HIPCC");
	if (env && *env)
		return env;
	env = getenv("ROCM_PATH");
	snprintf(hipcc, sizeof(hipcc), "%s/bin/hipcc",
		 env && *env ? env : "/opt/rocm");
	return stat(hipcc, &st) ? "hipcc" : hipcc;
}
