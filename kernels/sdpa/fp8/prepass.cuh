// fp8/prepass.cuh -- the FP8 stage's pre-pass kernels, launched before the attention kernel
// (fp8/launch.cuh): V -> Vt into the scratch (transpose_v_kernel, when the kernel does not
// transpose V itself) and kQkF16's exact fp16 copies of Q and K (widen_qk_kernel).
#pragma once

#include <cstdint>

#include "config.cuh"

namespace sdpa_fp8 {

constexpr int kTransposeThreads = 256;
constexpr int kTransposeKeys = kVtKeyPad;  // keys per block: whole 32-key groups

// Vt[b][h][d][key0 + c] = V[b][h][key0 + fp8_key_of(c % 32) + 32 (c / 32)][d], zero past S.
template <int D>
__global__ void __launch_bounds__(kTransposeThreads) transpose_v_kernel(const uint8_t* __restrict__ v,
                                                                        SdpaTensorStrides vs,
                                                                        uint8_t* __restrict__ vt, int seq_len,
                                                                        int s_pad) {
  constexpr int kRowVecs = D / kChunkBytes;
  constexpr int kLd = D + kChunkBytes;  // padded rows: the column reads below spread over banks
  __shared__ __align__(16) uint8_t tile[kTransposeKeys * kLd];
  const int key0 = static_cast<int>(blockIdx.x) * kTransposeKeys;
  const int h = static_cast<int>(blockIdx.y), b = static_cast<int>(blockIdx.z);
  const uint8_t* v_head = sdpa_head_ptr(v, vs, b, h);
  if constexpr (kPdlOn) {  // V may be the previous kernel's output, Vt its input
    grid_dependency_wait();
    grid_launch_dependents();  // the attention kernel's prologue may start beside this pass
  }
  for (int i = static_cast<int>(threadIdx.x); i < kTransposeKeys * kRowVecs; i += kTransposeThreads) {
    const int row = i / kRowVecs, c = i % kRowVecs;
    uint4 val = make_uint4(0u, 0u, 0u, 0u);
    if (key0 + row < seq_len)
      val = *reinterpret_cast<const uint4*>(v_head + static_cast<int64_t>(key0 + row) * vs.seq + c * kChunkBytes);
    *reinterpret_cast<uint4*>(tile + row * kLd + c * kChunkBytes) = val;
  }
  __syncthreads();
  constexpr int kOutVecs = kTransposeKeys / kChunkBytes;  // 16-byte pieces per Vt row chunk
  uint8_t* vt_head = vt + (static_cast<int64_t>(b) * gridDim.y + h) * D * s_pad + key0;
  for (int i = static_cast<int>(threadIdx.x); i < D * kOutVecs; i += kTransposeThreads) {
    const int d = i / kOutVecs, piece = i % kOutVecs;
    uint32_t words[kChunkBytes / 4];
#pragma unroll
    for (int w = 0; w < kChunkBytes / 4; ++w) {
      uint32_t word = 0;
#pragma unroll
      for (int byte = 0; byte < 4; ++byte) {
        const int c = piece * kChunkBytes + 4 * w + byte;
        const int key = (c / kFp8KeyGroup) * kFp8KeyGroup + fp8_key_of(c % kFp8KeyGroup);
        word |= static_cast<uint32_t>(tile[key * kLd + d]) << (8 * byte);
      }
      words[w] = word;
    }
    *reinterpret_cast<uint4*>(vt_head + static_cast<int64_t>(d) * s_pad + piece * kChunkBytes) =
        make_uint4(words[0], words[1], words[2], words[3]);
  }
}

// kQkF16's pre-pass: Q and K (e4m3, any 16-byte-aligned strides) -> fp16 copies in the
// scratch, contiguous [B][H][S][D] each (q16 then k16), exact. blockIdx.z < B: Q of batch z;
// else K of batch z - B. Each thread widens 16 bytes (one uint4 in, two out).
constexpr int kWidenThreads = 256;
constexpr int kWidenBytes = kChunkBytes;  // e4m3 values per thread

// A template, so that only a build that launches it (kQkF16) compiles it.
template <int D>
__global__ void __launch_bounds__(kWidenThreads) widen_qk_kernel(const uint8_t* __restrict__ q,
                                                                  SdpaTensorStrides qs,
                                                                  const uint8_t* __restrict__ k,
                                                                  SdpaTensorStrides ks, __half* __restrict__ qk16,
                                                                  int seq_len) {
  static_assert(D % kWidenBytes == 0, "a thread's 16 values stay in one row");
  const int batches = static_cast<int>(gridDim.z) / 2;
  const bool is_k = static_cast<int>(blockIdx.z) >= batches;
  const int b = static_cast<int>(blockIdx.z) - (is_k ? batches : 0), h = static_cast<int>(blockIdx.y);
  const int64_t head_elems = static_cast<int64_t>(seq_len) * D;
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * kWidenThreads + threadIdx.x) * kWidenBytes;
  if constexpr (kPdlOn) {  // Q and K may be the previous kernel's output, the scratch its input
    grid_dependency_wait();
    grid_launch_dependents();
  }
  if (i >= head_elems) return;
  const int64_t row = i / D, col = i % D;
  const uint8_t* src = is_k ? sdpa_head_ptr(k, ks, b, h) + row * ks.seq : sdpa_head_ptr(q, qs, b, h) + row * qs.seq;
  const uint4 in = *reinterpret_cast<const uint4*>(src + col);
  const uint32_t words[4] = {in.x, in.y, in.z, in.w};
  uint32_t out[8];
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(words[w] & 0xffffu), __NV_E4M3);
    const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(words[w] >> 16), __NV_E4M3);
    out[2 * w] = static_cast<uint32_t>(lo.x) | (static_cast<uint32_t>(lo.y) << 16);
    out[2 * w + 1] = static_cast<uint32_t>(hi.x) | (static_cast<uint32_t>(hi.y) << 16);
  }
  const int64_t tensor = is_k ? 1 : 0;
  __half* dst = qk16 + ((tensor * batches + b) * gridDim.y + h) * head_elems + i;
  reinterpret_cast<uint4*>(dst)[0] = make_uint4(out[0], out[1], out[2], out[3]);
  reinterpret_cast<uint4*>(dst)[1] = make_uint4(out[4], out[5], out[6], out[7]);
}

}  // namespace sdpa_fp8
