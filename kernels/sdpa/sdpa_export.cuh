// sdpa_export.cuh: the three extern "C" exports of sdpa_api.h and the kernel
// launch, written once for every stage.
//
// A stage supplies, inside its anonymous namespace, a traits struct with
//   static constexpr int  kBlockM;     query rows per block (grid.x = ceil(S / kBlockM))
//   static constexpr int  kThreads;    threads per block
//   static constexpr bool kVectorIo;   Q/K/V/O moved as 16-byte vectors: reject other layouts
//   static constexpr const char* kConfig;   one line naming the knobs' values (SDPA_STR)
//   template <class T, int D> static constexpr size_t smem_bytes();   dynamic shared memory
// and its kernel template, then at file scope one of
//   SDPA_EXPORT_STAGE(Traits, kernel)          kernel<T, D>
//   SDPA_EXPORT_CAUSAL_STAGE(Traits, kernel)   kernel<T, D, causal>, causal a compile-time bool
// A (T, D) instance whose smem_bytes exceeds kSdpaMaxSmemPerBlock is never
// compiled; launching it returns cudaErrorInvalidValue.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include <cuda_runtime.h>

#include "sdpa_api.h"
#include "sdpa_common.cuh"

// Stringify a knob's value for the config string: SDPA_STR(BLOCK_N) -> "64".
#define SDPA_STR2(x) #x
#define SDPA_STR(x) SDPA_STR2(x)

// Copies `text` into a caller's buffer of `capacity` bytes (truncated, NUL-terminated); its length:
// the text exports (launch plans, the protocol report) answer a caller that sizes its buffer by a
// first call with none.
inline int32_t sdpa_copy_text(const std::string& text, char* out, int32_t capacity) {
  if (out != nullptr && capacity > 0) {
    const size_t n = text.size() < static_cast<size_t>(capacity - 1) ? text.size() : static_cast<size_t>(capacity - 1);
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
  }
  return static_cast<int32_t>(text.size());
}

// Every stage kernel takes the problem by value and nothing else.
using SdpaKernel = void (*)(SdpaProblem);

// Opt in to the shared memory, launch on the stage grid (x = query tiles,
// y = heads, z = batch) and report the launch error.
inline cudaError_t sdpa_launch(SdpaKernel kernel, int block_m, int threads, size_t smem,
                               const SdpaProblem& p, cudaStream_t stream) {
  const cudaError_t err = sdpa_set_smem(kernel, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid(sdpa_ceil_div(p.seq_len, block_m), p.heads, p.batch);
  kernel<<<grid, threads, smem, stream>>>(p);
  return cudaGetLastError();
}

// sdpa_forward: validation, then (dtype, head_dim) dispatch to the kernel
// instance select(tag, hd) returns, unless that instance does not fit.
template <class Traits, class Select>
inline cudaError_t sdpa_stage_forward(const SdpaProblem* problem, cudaStream_t stream,
                                      Select&& select) {
  if (problem == nullptr) return cudaErrorInvalidValue;
  const cudaError_t ok = sdpa_check_problem(*problem);
  if (ok != cudaSuccess) return ok;
  if (sdpa_problem_is_empty(*problem)) return cudaSuccess;
  if (Traits::kVectorIo && !sdpa_problem_vec16_ok(*problem)) return cudaErrorInvalidValue;
  return sdpa_dispatch(*problem, [&](auto tag, auto hd) {
    using T = typename decltype(tag)::type;
    constexpr int D = decltype(hd)::value;
    constexpr size_t smem = Traits::template smem_bytes<T, D>();
    if constexpr (smem > kSdpaMaxSmemPerBlock) {
      return cudaErrorInvalidValue;  // e.g. s2 at BLOCK_N=128, D=128
    } else {
      return sdpa_launch(select(tag, hd), Traits::kBlockM, Traits::kThreads, smem, *problem, stream);
    }
  });
}

// sdpa_dynamic_shared_memory_bytes: 0 for an unsupported (head_dim, dtype). An
// instance that does not fit reports its full would-be footprint, so the
// shared-memory gate flags it rather than hiding it.
template <class Traits>
inline int64_t sdpa_stage_smem_bytes(int32_t head_dim, int32_t dtype) {
  SdpaProblem shape{};
  shape.head_dim = head_dim;
  shape.dtype = dtype;
  int64_t bytes = 0;
  sdpa_dispatch(shape, [&](auto tag, auto hd) {
    using T = typename decltype(tag)::type;
    constexpr int D = decltype(hd)::value;
    bytes = static_cast<int64_t>(Traits::template smem_bytes<T, D>());
    return cudaSuccess;
  });
  return bytes;
}

// KERNEL_OF: the kernel instance, an expression in T, D and problem.
#define SDPA_EXPORT_STAGE_WITH(TRAITS, KERNEL_OF)                                                 \
  extern "C" cudaError_t sdpa_forward(const SdpaProblem* problem, cudaStream_t stream) {          \
    return sdpa_stage_forward<TRAITS>(problem, stream, [&](auto tag, auto hd) -> SdpaKernel {     \
      using T = typename decltype(tag)::type;                                                     \
      constexpr int D = decltype(hd)::value;                                                      \
      return KERNEL_OF;                                                                           \
    });                                                                                           \
  }                                                                                               \
  extern "C" const char* sdpa_stage_config() { return TRAITS::kConfig; }                          \
  extern "C" int64_t sdpa_dynamic_shared_memory_bytes(int32_t head_dim, int32_t dtype) {          \
    return sdpa_stage_smem_bytes<TRAITS>(head_dim, dtype);                                        \
  }

#define SDPA_EXPORT_STAGE(TRAITS, KERNEL) SDPA_EXPORT_STAGE_WITH(TRAITS, (KERNEL<T, D>))
#define SDPA_EXPORT_CAUSAL_STAGE(TRAITS, KERNEL) \
  SDPA_EXPORT_STAGE_WITH(TRAITS, (problem->causal ? KERNEL<T, D, true> : KERNEL<T, D, false>))
