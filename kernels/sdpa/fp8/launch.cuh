// fp8/launch.cuh -- the FP8 stage's host entry: a problem's checks (check), then the pre-passes
// (fp8/prepass.cuh) and the attention kernel (fp8/kernel.cuh) on its tensor maps
// (fp8/tensor_maps.cuh), one instance per causal mask and scale sign (launch).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "prepass.cuh"
#include "kernel.cuh"
#include "tensor_maps.cuh"

namespace sdpa_fp8 {

template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
cudaError_t launch_instance(const Params& prm, cudaStream_t stream) {
  constexpr size_t smem = Layout<D, Cfg>::kSmemBytes;
  auto kernel = fp8_kernel<T, D, Cfg, kCausal, kScalePositive>;
  const cudaError_t err = sdpa_set_smem(kernel, smem);
  if (err != cudaSuccess) return err;
  const int blocks = Cfg::kPersistent
                         ? min(sdpa_warpspec::WorkOrder<Cfg, kCausal>::units(prm.ws), sdpa_warpspec::sm_count())
                         : prm.ws.work_items;
  return sdpa_warpspec::launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), Cfg::kThreads, smem,
                                      sdpa_warpspec::kPlainGrid, kPdlOn, stream, prm);
}

// The pre-pass into the scratch, then the attention kernel reading it (or,
// with kVtInKernel, the attention kernel alone, on V itself).
template <typename T, int D, class Cfg>
cudaError_t launch(const SdpaFp8Problem& f, cudaStream_t stream) {
  const SdpaProblem& p = f.attn;
  cudaError_t err = cudaSuccess;
  if constexpr (Cfg::kQkF16) {
    const int64_t per_head_threads = sdpa_ceil_div<int64_t>(static_cast<int64_t>(p.seq_len) * D, kWidenBytes);
    const dim3 grid(static_cast<unsigned>(sdpa_ceil_div<int64_t>(per_head_threads, kWidenThreads)), p.heads, 2 * p.batch);
    constexpr size_t kNoSmem = 0;
    err = sdpa_warpspec::launch_kernel(widen_qk_kernel<D>, grid, kWidenThreads, kNoSmem, sdpa_warpspec::kPlainGrid,
                                       kPdlOn, stream, static_cast<const uint8_t*>(p.q), p.q_strides,
                                       static_cast<const uint8_t*>(p.k), p.k_strides,
                                       qk16_base(f, Cfg::kVtInKernel, 0), p.seq_len);
    if (err != cudaSuccess) return err;
  }
  if constexpr (!Cfg::kVtInKernel) {
    const int64_t s_pad = vt_key_stride(p.seq_len);
    const dim3 grid(static_cast<unsigned>(s_pad / kTransposeKeys), p.heads, p.batch);
    constexpr size_t kStaticSmemOnly = 0;
    err = sdpa_warpspec::launch_kernel(transpose_v_kernel<D>, grid, kTransposeThreads, kStaticSmemOnly,
                                       sdpa_warpspec::kPlainGrid, kPdlOn, stream, static_cast<const uint8_t*>(p.v),
                                       p.v_strides, static_cast<uint8_t*>(f.scratch), p.seq_len,
                                       static_cast<int>(s_pad));
    if (err != cudaSuccess) return err;
  }
  Params prm{};
  prm.ws.p = p;
  prm.ws.m_tiles = sdpa_ceil_div(p.seq_len, Cfg::kBlockM);
  prm.ws.work_items = prm.ws.m_tiles * p.heads * p.batch;
  prm.q_descale = f.q_descale;
  prm.k_descale = f.k_descale;
  prm.v_descale = f.v_descale;
  if constexpr (Cfg::kQkF16) {
    err = encode_tensor_map(&prm.ws.q_map, qk16_base(f, Cfg::kVtInKernel, 0), qk16_strides(p), p,
                            CU_TENSOR_MAP_DATA_TYPE_FLOAT16, Cfg::kBlockM);
    if (err == cudaSuccess)
      err = encode_tensor_map(&prm.ws.k_map, qk16_base(f, Cfg::kVtInKernel, 1), qk16_strides(p), p,
                              CU_TENSOR_MAP_DATA_TYPE_FLOAT16, Cfg::kBlockN);
  } else {
    err = encode_qk_map(&prm.ws.q_map, p.q, p.q_strides, p, Cfg::kBlockM);
    if (err == cudaSuccess) err = encode_qk_map(&prm.ws.k_map, p.k, p.k_strides, p, Cfg::kBlockN);
  }
  if (err == cudaSuccess) {
    err = Cfg::kVtInKernel ? encode_qk_map(&prm.ws.v_map, p.v, p.v_strides, p, Cfg::kBlockN)
                           : encode_vt_map(&prm.ws.v_map, f.scratch, p, Layout<D, Cfg>::kVtChunk);
  }
  if (err != cudaSuccess) return err;
  const bool positive = p.softmax_scale > 0.0f;  // the descales are positive
  if (p.causal)
    return positive ? launch_instance<T, D, Cfg, true, true>(prm, stream)
                    : launch_instance<T, D, Cfg, true, false>(prm, stream);
  return positive ? launch_instance<T, D, Cfg, false, true>(prm, stream)
                  : launch_instance<T, D, Cfg, false, false>(prm, stream);
}

// Everything a launch needs that the tensor maps do not check themselves.
inline cudaError_t check(const SdpaFp8Problem* f, bool vt_in_kernel, bool qk_f16 = false) {
  if (f == nullptr) return cudaErrorInvalidValue;
  const cudaError_t ok = sdpa_check_problem(f->attn);
  if (ok != cudaSuccess) return ok;
  if (sdpa_problem_is_empty(f->attn)) return cudaSuccess;
  if (f->q_descale == nullptr || f->k_descale == nullptr || f->v_descale == nullptr) return cudaErrorInvalidValue;
  if (scratch_bytes(f->attn, vt_in_kernel, qk_f16) > 0) {
    if (f->scratch == nullptr || f->scratch_bytes < scratch_bytes(f->attn, vt_in_kernel, qk_f16))
      return cudaErrorInvalidValue;
    if (reinterpret_cast<uintptr_t>(f->scratch) % kTmaAlignBytes != 0) return cudaErrorInvalidValue;
  }
  constexpr int kE4m3Bytes = 1, kOutBytes = 2;
  const SdpaProblem& p = f->attn;
  // V (and, kQkF16, Q and K) are read with 16-byte loads by the pre-passes, O written with
  // 16-byte stores; Q and K are checked again by their tensor maps.
  const bool vec_ok = sdpa_vec16_ok(p.q, p.q_strides, kE4m3Bytes) && sdpa_vec16_ok(p.k, p.k_strides, kE4m3Bytes) &&
                      sdpa_vec16_ok(p.v, p.v_strides, kE4m3Bytes) && sdpa_vec16_ok(p.out, p.out_strides, kOutBytes);
  return vec_ok ? cudaSuccess : cudaErrorInvalidValue;
}

}  // namespace sdpa_fp8
