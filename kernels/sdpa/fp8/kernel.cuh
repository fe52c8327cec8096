// fp8/kernel.cuh -- FP8 (e4m3) warp-specialized attention: s6's structure
// (sdpa_warpspec.cuh: a producer warpgroup issuing TMA boxes on mbarrier
// rings, two consumer warpgroups of 64 query rows, S(n) and P(n-1).V(n-1)
// issued back to back) on e4m3 wgmma with fp32 accumulation.
//
//   pre-pass    (fp8/prepass.cuh) transpose_v_kernel: V [B,H,S,D] -> Vt
//               [B,H,D,S_pad] in the caller's scratch, keys permuted within
//               32-key groups so that P's A fragment is the S accumulator
//               converted in place (fp8/wgmma8.cuh), keys S..S_pad-1 zero (a
//               NaN byte there would poison P = 0 times V). fp8 wgmma reads B
//               K-major only. With kVtInKernel the producer warpgroup's warps
//               1-3 write Vt into shared memory instead (fp8/vt_transpose.cuh).
//   producer    (fp8/producer.cuh) Q once (128 x D bytes), then K(n) (kBlockN
//               x D) and Vt(n) (D x kBlockN) per key tile; rows of D bytes (K)
//               or of one Vt chunk (64 or 128 keys, fp8_vt_chunk_keys) land 64-
//               or 128-byte swizzled; one TMA box per K tile and per Vt chunk.
//   consumers   (fp8/consumer.cuh) WgFp8Tile: S = Q.K^T (D/32 SS wgmma k32),
//               the fp16 stages' online softmax with the scale times q_descale
//               * k_descale, P quantized to e4m3 at 2^8 (FA3's Max_offset),
//               O += P.Vt^T (kBlockN/32 RS wgmma), O * v_descale / (2^8 * row
//               sum) stored through shared memory in the output dtype.
//   kQkF16      a pre-pass (widen_qk_kernel) writes fp16 copies of Q and K
//               (exact) into the scratch; the producer loads them as s6 does
//               (SW128 column blocks of 64 elements) and S = Q.K^T runs on
//               fp16 wgmma (WgFp8Tile, issue 28); V and P.V stay e4m3.
#pragma once

#include <cstdint>

#include "consumer.cuh"
#include "producer.cuh"

namespace sdpa_fp8 {

// kRowSumMma: under the D rows TMA fills in every Vt chunk of every stage, a
// row of e4m3 ones and seven zero rows, written once (TMA never touches them).
// A swizzle only permutes 16-byte pieces within a row, so uniform rows need none.
template <int D, class Cfg>
__device__ __forceinline__ void write_sum_rows(unsigned char* smem) {
  using L = Layout<D, Cfg>;
  constexpr int kChunks = Cfg::kStages * L::kVtChunks;                // chunks of every ring stage
  constexpr int kPieces = kSumRows * L::kVtChunk / kChunkBytes;       // 16-byte pieces of the rows under one chunk
  constexpr int kOnePieces = L::kVtChunk / kChunkBytes;               // ... of the ones row
  constexpr uint32_t kOnes = kE4m3One * 0x01010101u;
  for (int i = static_cast<int>(threadIdx.x); i < kChunks * kPieces; i += Cfg::kThreads) {
    const int piece = i % kPieces;
    const uint32_t word = piece < kOnePieces ? kOnes : 0u;
    *reinterpret_cast<uint4*>(smem + L::kVOffset + (i / kPieces) * L::kVtChunkStride + D * L::kVtChunk +
                              piece * kChunkBytes) = make_uint4(word, word, word, word);
  }
  fence_proxy_async_shared();  // wgmma reads them through the async proxy
}

template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
__global__ void __launch_bounds__(Cfg::kThreads, 1) fp8_kernel(const __grid_constant__ Params prm) {
  using L = Layout<D, Cfg>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_base = sdpa_mma::smem_addr(smem_raw);
  const uint32_t s_base = (raw_base + (kSw128Align - 1)) & ~static_cast<uint32_t>(kSw128Align - 1);
  unsigned char* smem = smem_raw + (s_base - raw_base);
  if (threadIdx.x == 0) {
    const uint32_t bars = s_base + L::kBarOffset;
    mbarrier_init(sdpa_warpspec::full_q_bar(bars), 1);  // the producer's expect_tx arrival
    mbarrier_init(sdpa_warpspec::empty_q_bar(bars), Cfg::kConsumerWarps);  // each consumer warp's last S done
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbarrier_init(sdpa_warpspec::ring_bar<Cfg::kStages>(bars, sdpa_warpspec::kFullK, s), 1);
      // Vt: the producer's expect_tx arrival, or one arrival per transposing warp
      mbarrier_init(sdpa_warpspec::ring_bar<Cfg::kStages>(bars, sdpa_warpspec::kFullV, s),
                    Cfg::kVtInKernel ? kTransposeWarps : 1);
      mbarrier_init(sdpa_warpspec::ring_bar<Cfg::kStages>(bars, sdpa_warpspec::kEmptyK, s), Cfg::kConsumerWarps);
      mbarrier_init(sdpa_warpspec::ring_bar<Cfg::kStages>(bars, sdpa_warpspec::kEmptyV, s), Cfg::kConsumerWarps);
      if constexpr (Cfg::kVtInKernel) {
        mbarrier_init(sdpa_warpspec::ring_bar<Cfg::kStages>(bars, kFullVRaw, s), 1);
        mbarrier_init(sdpa_warpspec::ring_bar<Cfg::kStages>(bars, kEmptyVRaw, s), kTransposeWarps);
      }
    }
    fence_mbarrier_init();
  }
  if constexpr (Cfg::kRowSumMma) write_sum_rows<D, Cfg>(smem);
  __syncthreads();  // the last block-wide barrier: roles diverge below
  if constexpr (kPdl == sdpa_warpspec::Pdl::kEarlyTrigger) grid_launch_dependents();
  // Broadcast so ptxas can prove every role branch warp-uniform (sdpa_warpspec.cuh).
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / kWarpgroupThreads, 0);
  if (wg == 0) {
    setmaxnreg_dec<Cfg::kProducerRegs>();
    if constexpr (Cfg::kVtInKernel) {
      const int warp = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / sdpa_warpspec::kWarpSize, 0);
      const int lane = static_cast<int>(threadIdx.x) % sdpa_warpspec::kWarpSize;
      if (warp > 0) transpose_v<D, Cfg, kCausal>(prm, s_base, warp - 1, lane);
    }
    if (threadIdx.x == 0) produce<D, Cfg, kCausal>(prm, s_base);
    __syncwarp();
  } else {
    setmaxnreg_inc<Cfg::kConsumerRegs>();
    // the descales and O's buffer belong to earlier kernels until the pre-pass is done
    if constexpr (kPdlOn) grid_dependency_wait();
    Consumer<T, D, Cfg, kCausal, kScalePositive> consumer(prm, s_base, smem, wg - 1);
    consumer.run();
  }
}

}  // namespace sdpa_fp8
