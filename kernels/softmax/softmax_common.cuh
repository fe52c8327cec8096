// Shared blocks of the softmax stages: storage conversion, warp and block reductions,
// and the extern "C" exports, so a stage file holds only its kernel and launcher.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "softmax_api.h"

#define SOFTMAX_STR_(x) #x
#define SOFTMAX_STR(x) SOFTMAX_STR_(x)

namespace softmax {

constexpr int kWarpSize = 32;
// exp(x) = exp2(x * log2(e)): one MUFU.EX2 and a multiply instead of the libm exp.
constexpr float kLog2e = 1.4426950408889634f;  // log2(e)

__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// A block-wide reduction through one float per warp in shared memory; every thread gets the
// result. `identity` (-FLT_MAX for a max, 0 for a sum) fills the lanes past the last warp.
template <int kThreads, typename Op>
__device__ __forceinline__ float block_reduce(float v, float* scratch, Op warp_op, float identity) {
  static_assert(kThreads % kWarpSize == 0 && kThreads <= 1024, "whole warps, at most 1024 threads");
  constexpr int kWarps = kThreads / kWarpSize;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  v = warp_op(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < kWarps ? scratch[lane] : identity;
  v = warp_op(v);
  __syncthreads();  // scratch is reused by the next reduction
  return v;
}

// Both storage types through one templated launcher: `Launch<T>::run(problem, stream)`.
template <template <typename> class Launch>
cudaError_t dispatch(const SoftmaxProblem* p, cudaStream_t stream) {
  if (p == nullptr || p->rows < 1 || p->cols < 1) return cudaErrorInvalidValue;
  switch (p->dtype) {
    case kSoftmaxFloat16: return Launch<__half>::run(*p, stream);
    case kSoftmaxBFloat16: return Launch<__nv_bfloat16>::run(*p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace softmax

// The three exports of softmax_api.h from a stage's launcher template and config string.
#define SOFTMAX_EXPORTS(LAUNCH, CONFIG)                                                            \
  extern "C" cudaError_t softmax_forward(const SoftmaxProblem* p, cudaStream_t stream) {         \
    return softmax::dispatch<LAUNCH>(p, stream);                                                 \
  }                                                                                              \
  extern "C" const char* softmax_stage_config() { return CONFIG; }                              \
  extern "C" int64_t softmax_dynamic_shared_memory_bytes(int32_t, int32_t) { return 0; }
