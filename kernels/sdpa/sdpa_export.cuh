// sdpa_export.cuh: the three extern "C" exports of sdpa_api.h and the kernel
// launch, written once for every stage.
//
// A stage supplies, inside its anonymous namespace:
//   - a traits struct Traits with
//       static constexpr int  kBlockM;     query rows per block (grid.x = ceil(S / kBlockM))
//       static constexpr int  kThreads;    threads per block
//       static constexpr bool kVectorIo;   Q/K/V/O moved as 16-byte vectors: reject other layouts
//       template <class T, int D> static constexpr size_t smem_bytes();   dynamic shared memory
//   - template <class T, int D> SdpaKernel select_kernel(const SdpaProblem&):
//       the kernel instance for the problem (e.g. its causal variant), or nullptr
//       when this configuration cannot run at this head_dim;
// and then, at file scope,
//   SDPA_EXPORT_STAGE(Traits, select_kernel, "config string naming the knobs")
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "sdpa_api.h"
#include "sdpa_common.cuh"

// Stringify a knob's value for the config string: SDPA_STR(BLOCK_N) -> "64".
#define SDPA_STR2(x) #x
#define SDPA_STR(x) SDPA_STR2(x)

// Every stage kernel takes the problem by value and nothing else.
using SdpaKernel = void (*)(SdpaProblem);

// Opt in to the shared memory, launch on the stage grid (x = query tiles,
// y = heads, z = batch) and report the launch error.
inline cudaError_t sdpa_launch(SdpaKernel kernel, int block_m, int threads, size_t smem,
                               const SdpaProblem& p, cudaStream_t stream) {
  if (kernel == nullptr) return cudaErrorInvalidValue;  // does not fit at this head_dim
  const cudaError_t err = sdpa_set_smem(kernel, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid(sdpa_ceil_div(p.seq_len, block_m), p.heads, p.batch);
  kernel<<<grid, threads, smem, stream>>>(p);
  return cudaGetLastError();
}

// sdpa_forward: validation, then (dtype, head_dim) dispatch to select(tag, hd).
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
    return sdpa_launch(select(tag, hd), Traits::kBlockM, Traits::kThreads,
                       Traits::template smem_bytes<T, D>(), *problem, stream);
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

#define SDPA_EXPORT_STAGE(TRAITS, SELECT_KERNEL, CONFIG)                                          \
  extern "C" cudaError_t sdpa_forward(const SdpaProblem* problem, cudaStream_t stream) {          \
    return sdpa_stage_forward<TRAITS>(problem, stream, [&](auto tag, auto hd) {                   \
      return SELECT_KERNEL<typename decltype(tag)::type, decltype(hd)::value>(*problem);          \
    });                                                                                           \
  }                                                                                               \
  extern "C" const char* sdpa_stage_config() { return CONFIG; }                                   \
  extern "C" int64_t sdpa_dynamic_shared_memory_bytes(int32_t head_dim, int32_t dtype) {          \
    return sdpa_stage_smem_bytes<TRAITS>(head_dim, dtype);                                        \
  }
