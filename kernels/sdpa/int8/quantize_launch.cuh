// int8/quantize_launch.cuh -- the host side of the INT8 quantizer (int8/quantize.cuh): what it takes
// (check_quantize), its scratch, and its three launches; sdpa_int8_quantize and
// sdpa_int8_quantize_scratch_bytes (sdpa_api.h) are these, exported by SDPA_INT8_STAGE.
#pragma once

#include <climits>
#include <cstdint>

#include "quantize.cuh"

namespace sdpa_int8 {

inline int64_t padded_keys(int64_t kv_seq_len) { return sdpa_ceil_div<int64_t>(kv_seq_len, kVtKeyPad) * kVtKeyPad; }

inline bool aligned_to(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }


// The block counts and task counts of a problem the checks passed (task counts fit a grid's x).
inline QuantizeArgs quantize_args(const SdpaInt8Quantize& a) {
  const SdpaProblem& p = a.inputs;
  QuantizeArgs q{};
  q.a = a;
  q.q_blocks = sdpa_ceil_div(p.seq_len, kQBlock);
  q.k_blocks = sdpa_ceil_div(p.kv_seq_len, kKBlock);
  q.q_tasks = p.batch * p.heads * q.q_blocks;
  q.kv_tasks = p.batch * p.kv_heads * q.k_blocks;
  return q;
}

// K's and V's partial sums (float64) and V's maxima and minima (float32), one each per (batch, kv
// head, key block, channel).
constexpr int64_t kPartialBytes = 2 * sizeof(double) + 2 * sizeof(float);

inline int64_t quantize_partials(const SdpaInt8Quantize& a) {
  const SdpaProblem& p = a.inputs;
  return int64_t{p.batch} * p.kv_heads * sdpa_ceil_div(p.kv_seq_len, kKBlock) * p.head_dim;
}

inline int64_t quantize_scratch_bytes(const SdpaInt8Quantize& a) { return quantize_partials(a) * kPartialBytes; }

// Shapes, dtype, the 16-byte loads of the inputs, the outputs' stores, and grids that fit: launch 1
// runs the Q tasks and the key blocks in one grid, launch 3 the key blocks twice.
inline cudaError_t check_quantize(const SdpaInt8Quantize& a) {
  const SdpaProblem& p = a.inputs;
  if (p.q == nullptr || p.k == nullptr || p.v == nullptr) return cudaErrorInvalidValue;
  if (p.batch < 0 || p.heads < 0 || p.seq_len < 0 || p.kv_seq_len < 0 || p.kv_heads < 1 || p.heads % p.kv_heads != 0)
    return cudaErrorInvalidValue;
  if (p.head_dim != 64 && p.head_dim != 128) return cudaErrorInvalidValue;
  if (p.dtype != kSdpaFloat16 && p.dtype != kSdpaBFloat16) return cudaErrorInvalidValue;
  constexpr int kElemBytes = 2;
  if (!sdpa_vec16_ok(p.q, p.q_strides, kElemBytes) || !sdpa_vec16_ok(p.k, p.k_strides, kElemBytes) ||
      !sdpa_vec16_ok(p.v, p.v_strides, kElemBytes))
    return cudaErrorInvalidValue;
  const bool outputs = a.q8 != nullptr && a.q_descale != nullptr && a.k8 != nullptr && a.k_descale != nullptr &&
                       a.k_mean != nullptr && a.vt != nullptr && a.v_descale != nullptr && a.v_mean != nullptr;
  if (!outputs || !aligned_to(a.q8, 8) || !aligned_to(a.k8, 8) || !aligned_to(a.vt, 16) || !aligned_to(a.k_mean, 16) ||
      !aligned_to(a.v_descale, 16) || !aligned_to(a.v_mean, 16))
    return cudaErrorInvalidValue;
  if (a.vt_key_stride != padded_keys(p.kv_seq_len)) return cudaErrorInvalidValue;
  const int64_t q_tasks = int64_t{p.batch} * p.heads * sdpa_ceil_div(p.seq_len, kQBlock);
  const int64_t kv_tasks = int64_t{p.batch} * p.kv_heads * sdpa_ceil_div(p.kv_seq_len, kKBlock);
  return q_tasks + kv_tasks <= INT_MAX && 2 * kv_tasks <= INT_MAX ? cudaSuccess : cudaErrorInvalidValue;
}

template <int D, class T>
cudaError_t launch_quantize(QuantizeArgs q, cudaStream_t stream) {
  int8_stats_kernel<D, T><<<q.q_tasks + q.kv_tasks, kQuantizeThreads, 0, stream>>>(q);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  int8_finalize_kernel<D><<<q.a.inputs.batch * q.a.inputs.kv_heads, D, 0, stream>>>(q);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  int8_kv_kernel<D, T><<<2 * q.kv_tasks, kQuantizeThreads, 0, stream>>>(q);
  return cudaGetLastError();
}

inline cudaError_t quantize(const SdpaInt8Quantize* args, void* scratch, int64_t scratch_bytes, cudaStream_t stream) {
  if (args == nullptr) return cudaErrorInvalidValue;
  const cudaError_t ok = check_quantize(*args);
  if (ok != cudaSuccess) return ok;
  if (sdpa_problem_is_empty(args->inputs)) return cudaSuccess;
  if (scratch == nullptr || !aligned_to(scratch, 16) || scratch_bytes < quantize_scratch_bytes(*args))
    return cudaErrorInvalidValue;
  QuantizeArgs q = quantize_args(*args);
  const int64_t partials = quantize_partials(*args);
  q.k_sum = static_cast<double*>(scratch);
  q.v_sum = q.k_sum + partials;
  q.v_max = reinterpret_cast<float*>(q.v_sum + partials);
  q.v_min = q.v_max + partials;
  return sdpa_dispatch(args->inputs, [&](auto tag, auto hd) {
    using T = typename decltype(tag)::type;
    constexpr int D = decltype(hd)::value;
    return launch_quantize<D, T>(q, stream);
  });
}

}  // namespace sdpa_int8
