// s0_naive: the baseline. Thread i computes out[i] = x[i] * sigmoid(x[i]) in fp32 and stores it
// in the storage dtype. Torch-free: raw pointers and a stream, called through binding.cpp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#ifndef BLOCK_THREADS
#error "BLOCK_THREADS: set it in stages.yaml (compile_options.defines)"
#endif
static_assert(BLOCK_THREADS % 32 == 0 && BLOCK_THREADS <= 1024, "whole warps, at most 1024 threads a block");

template <typename T>
__global__ void silu_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t elements) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * BLOCK_THREADS + threadIdx.x;
  if (i < elements) {
    const float v = static_cast<float>(x[i]);
    out[i] = static_cast<T>(v / (1.0f + __expf(-v)));
  }
}

template <typename T>
static cudaError_t launch(const void* x, void* out, int64_t elements, cudaStream_t stream) {
  const int64_t blocks = (elements + BLOCK_THREADS - 1) / BLOCK_THREADS;
  silu_kernel<T><<<static_cast<unsigned>(blocks), BLOCK_THREADS, 0, stream>>>(
      static_cast<const T*>(x), static_cast<T*>(out), elements);
  return cudaGetLastError();
}

extern "C" cudaError_t family_forward(const void* x, void* out, int64_t elements, int32_t dtype,
                                      cudaStream_t stream) {
  if (elements == 0) return cudaSuccess;
  if (dtype == 0) return launch<__half>(x, out, elements, stream);
  if (dtype == 1) return launch<__nv_bfloat16>(x, out, elements, stream);
  return cudaErrorInvalidValue;
}

extern "C" const char* family_stage_config() {
  static char text[64];
  snprintf(text, sizeof(text), "BLOCK_THREADS=%d", BLOCK_THREADS);
  return text;
}
