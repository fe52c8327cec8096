// fp8/producer.cuh -- the FP8 kernel's producer warpgroup: warp 0's thread 0 issues Q and every
// K and V (or Vt) tile by TMA into the rings (produce); with kVtInKernel, warps 1-3 write Vt
// into shared memory from the raw V ring (transpose_v).
#pragma once

#include <cstdint>

#include "layout.cuh"
#include "vt_transpose.cuh"

namespace sdpa_fp8 {

// A Q or K tile of kRows rows into dst, its bytes announced on bar: e4m3, one box of D-byte
// rows; kQkF16, fp16, one box per 64-element column block (s6's tma_load_tile).
template <int D, class Cfg, int kRows>
__device__ __forceinline__ void load_qk_tile(uint32_t dst, const CUtensorMap* map, uint32_t bar, int row0, int h,
                                             int b) {
  if constexpr (Cfg::kQkF16) {
    sdpa_warpspec::tma_load_tile<kRows, D / kSw128BlockElems>(dst, map, bar, row0, h, b);
  } else {
    mbarrier_arrive_expect_tx(bar, kRows * D);
    tma_load_4d(dst, map, bar, 0, row0, h, b);
  }
}

template <int D, class Cfg, bool kCausal>
__device__ __forceinline__ void produce(const Params& prm, uint32_t s_base) {
  using L = Layout<D, Cfg>;
  constexpr int kStages = Cfg::kStages;
  const uint32_t bars = s_base + L::kBarOffset;
  prefetch_tensor_map(&prm.ws.q_map);
  prefetch_tensor_map(&prm.ws.k_map);
  prefetch_tensor_map(&prm.ws.v_map);
  // Q, K and V (or the pre-pass's Vt) are earlier kernels' outputs
  if constexpr (kPdlOn) grid_dependency_wait();
  int ring = 0;  // K/V tiles issued so far: the ring position carries across work items (kPersistent)
  sdpa_warpspec::WorkOrder<Cfg, kCausal>::for_each(prm.ws, 0, kNoSplit, [&](const WorkTile& wt, int local) {
    // every S of the previous item has completed (ConsumerSync::release_q)
    if (local > 0) mbarrier_wait(sdpa_warpspec::empty_q_bar(bars), (local - 1) & 1);
    load_qk_tile<D, Cfg, Cfg::kBlockM>(s_base + L::kQOffset, &prm.ws.q_map, sdpa_warpspec::full_q_bar(bars),
                                       wt.q_begin, wt.h, wt.b);
    for (int n = wt.kt_begin; n < wt.kt_end; ++n, ++ring) {
      const uint32_t freed = sdpa_warpspec::ring_parity<kStages>(ring) ^ 1;  // a fresh buffer counts as freed
      const uint32_t slot = ring % kStages;
      const uint32_t full_k = sdpa_warpspec::ring_bar<kStages>(bars, sdpa_warpspec::kFullK, ring);
      const uint32_t full_v = sdpa_warpspec::ring_bar<kStages>(bars, sdpa_warpspec::kFullV, ring);
      mbarrier_wait(sdpa_warpspec::ring_bar<kStages>(bars, sdpa_warpspec::kEmptyK, ring), freed);
      load_qk_tile<D, Cfg, Cfg::kBlockN>(s_base + L::kKOffset + slot * L::kKBytes, &prm.ws.k_map, full_k,
                                         n * Cfg::kBlockN, wt.h, wt.b);
      if constexpr (Cfg::kVtInKernel) {  // V as it is, for the transposing warps
        const uint32_t full_raw = sdpa_warpspec::ring_bar<kStages>(bars, kFullVRaw, ring);
        mbarrier_wait(sdpa_warpspec::ring_bar<kStages>(bars, kEmptyVRaw, ring), freed);
        mbarrier_arrive_expect_tx(full_raw, L::kVRawBytes);
        tma_load_4d(s_base + L::kVRawOffset + slot * L::kVRawBytes, &prm.ws.v_map, full_raw, 0, n * Cfg::kBlockN,
                    wt.h, wt.b);
        continue;
      }
      mbarrier_wait(sdpa_warpspec::ring_bar<kStages>(bars, sdpa_warpspec::kEmptyV, ring), freed);
      mbarrier_arrive_expect_tx(full_v, L::kVtLoadBytes);
#pragma unroll
      for (int c = 0; c < L::kVtChunks; ++c)
        tma_load_4d(s_base + L::kVOffset + slot * L::kVtBytes + c * L::kVtChunkStride, &prm.ws.v_map, full_v,
                    n * Cfg::kBlockN + c * L::kVtChunk, 0, wt.h, wt.b);
    }
  });
}

// kVtInKernel: warps 1-3 of the producer warpgroup. Per key tile: wait for V's
// box and for the Vt slot's release, write Vt (shared memory only, so no PDL
// wait), make it visible to wgmma's async proxy, then one arrival per warp
// fills Vt's barrier and frees V's.
template <int D, class Cfg, bool kCausal>
__device__ __forceinline__ void transpose_v(const Params& prm, uint32_t s_base, int warp, int lane) {
  using L = Layout<D, Cfg>;
  constexpr int kStages = Cfg::kStages;
  const uint32_t bars = s_base + L::kBarOffset;
  int ring = 0;
  sdpa_warpspec::WorkOrder<Cfg, kCausal>::for_each(prm.ws, 0, kNoSplit, [&](const WorkTile& wt, int) {
    for (int n = wt.kt_begin; n < wt.kt_end; ++n, ++ring) {
      const uint32_t parity = sdpa_warpspec::ring_parity<kStages>(ring);
      const uint32_t slot = ring % kStages;
      mbarrier_wait(sdpa_warpspec::ring_bar<kStages>(bars, kFullVRaw, ring), parity);
      mbarrier_wait(sdpa_warpspec::ring_bar<kStages>(bars, sdpa_warpspec::kEmptyV, ring), parity ^ 1);
      transpose_v_tile<D, Cfg::kBlockN, L::kVtChunk, kTransposeWarps, Cfg::kVtBatch>(
          s_base + L::kVRawOffset + slot * L::kVRawBytes, s_base + L::kVOffset + slot * L::kVtBytes,
          L::kVtChunkStride, warp, lane);
      fence_proxy_async_shared();  // st.matrix (generic proxy) before the wgmma reads (async proxy)
      __syncwarp();
      if (lane == 0) {
        mbarrier_arrive(sdpa_warpspec::ring_bar<kStages>(bars, sdpa_warpspec::kFullV, ring));
        mbarrier_arrive(sdpa_warpspec::ring_bar<kStages>(bars, kEmptyVRaw, ring));
      }
    }
  });
}

}  // namespace sdpa_fp8
