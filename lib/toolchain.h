/*
 * toolchain.h: where each backend's compiler is.  The build step runs it
 * (backends/build.c); the cells of the compiler and the runner read the
 * installation around it, where the GPU runtime's libraries are
 * (lib/cell.h, verify/client.c).
 *
 *   host     $AUTOKERNEL_CC, else cc
 *   cuda     $AUTOKERNEL_NVCC, else $CUDA_HOME/bin/nvcc (CUDA_HOME
 *            defaults to /usr/local/cuda), else nvcc on PATH
 *   hip      $AUTOKERNEL_HIPCC, else $ROCM_PATH/bin/hipcc (/opt/rocm),
 *            else hipcc on PATH
 *   triton   the interpreter that imports torch (lib/python.h), else
 *            python3
 *
 * The answer is static: a string of the environment or of this file.
 */
#ifndef LIB_TOOLCHAIN_H
#define LIB_TOOLCHAIN_H

const char *backend_compiler(const char *backend);

#endif
