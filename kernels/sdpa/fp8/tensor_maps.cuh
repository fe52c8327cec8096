// fp8/tensor_maps.cuh -- the FP8 launch's host side of memory: the scratch the pre-passes fill
// (Vt, kQkF16's fp16 Q and K) and the tensor maps of byte tensors (e4m3 Q, K, V and Vt).
#pragma once

#include <cstdint>

#include "config.cuh"

namespace sdpa_fp8 {

inline int64_t vt_key_stride(int seq_len) { return sdpa_ceil_div(seq_len, kVtKeyPad) * kVtKeyPad; }

// The pre-pass's Vt (none when the kernel transposes V: kVtInKernel), then kQkF16's fp16
// copies of Q and K, contiguous [B][H][S][D] each.
inline int64_t vt_scratch_bytes(const SdpaProblem& p, bool vt_in_kernel) {
  return vt_in_kernel ? 0 : static_cast<int64_t>(p.batch) * p.heads * p.head_dim * vt_key_stride(p.seq_len);
}
inline int64_t qk16_elems(const SdpaProblem& p) {
  return static_cast<int64_t>(p.batch) * p.heads * p.seq_len * p.head_dim;  // of Q, and as many of K
}
inline int64_t scratch_bytes(const SdpaProblem& p, bool vt_in_kernel, bool qk_f16 = false) {
  constexpr int64_t kF16Bytes = 2, kTensors = 2;
  return vt_scratch_bytes(p, vt_in_kernel) + (qk_f16 ? kTensors * kF16Bytes * qk16_elems(p) : 0);
}
// kQkF16: the fp16 Q (tensor 0) or K (tensor 1) in the scratch, and its element strides.
inline __half* qk16_base(const SdpaFp8Problem& f, bool vt_in_kernel, int tensor) {
  return reinterpret_cast<__half*>(static_cast<uint8_t*>(f.scratch) + vt_scratch_bytes(f.attn, vt_in_kernel)) +
         tensor * qk16_elems(f.attn);
}
inline SdpaTensorStrides qk16_strides(const SdpaProblem& p) {
  const int64_t seq = p.head_dim, head = seq * p.seq_len;
  return SdpaTensorStrides{head * p.heads, head, seq};
}

// Q or K: [B, H, S, D] e4m3 with element (= byte) strides; boxes of D x rows.
inline cudaError_t encode_qk_map(CUtensorMap* map, const void* base, const SdpaTensorStrides& s,
                                 const SdpaProblem& p, uint32_t rows) {
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(p.head_dim), static_cast<cuuint64_t>(p.seq_len),
                              static_cast<cuuint64_t>(p.heads), static_cast<cuuint64_t>(p.batch)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(s.seq), static_cast<cuuint64_t>(s.head),
                                 static_cast<cuuint64_t>(s.batch)};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(p.head_dim), rows, 1, 1};
  return encode_u8_map(map, base, dims, strides, box);
}

// Vt: [B, H, D, S_pad] bytes, contiguous; boxes of one chunk of keys x D rows
// (fp8_vt_chunk_keys: a key tile is kBlockN / chunk boxes).
inline cudaError_t encode_vt_map(CUtensorMap* map, const void* vt, const SdpaProblem& p, uint32_t chunk_keys) {
  const int64_t s_pad = vt_key_stride(p.seq_len);
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(s_pad), static_cast<cuuint64_t>(p.head_dim),
                              static_cast<cuuint64_t>(p.heads), static_cast<cuuint64_t>(p.batch)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(s_pad), static_cast<cuuint64_t>(s_pad * p.head_dim),
                                 static_cast<cuuint64_t>(s_pad * p.head_dim * p.heads)};
  const cuuint32_t box[4] = {chunk_keys, static_cast<cuuint32_t>(p.head_dim), 1, 1};
  return encode_u8_map(map, vt, dims, strides, box);
}

}  // namespace sdpa_fp8
