// mainloop/producer.cuh -- the producer warpgroup's loads: one thread issues Q and every K/V tile of
// each work item in order, by TMA into the rings (a K/V multicast CTA its half of each tile into both
// CTAs), in the order the launch's scheduler (sched/) deals the items.
#pragma once

#include "../instrument/protocol.cuh"
#include "../sched/work_order.cuh"
#include "../sdpa_warpspec_config.cuh"

namespace sdpa_warpspec {

// One tile of kRows rows: announce its bytes on `bar`, then one TMA box per
// column block (64 16-bit columns) into the block-major SW128 layout; 8-bit rows of
// 64 or 128 bytes are one box (kRowBytes, swizzled as the tensor map says).
template <int kRows, int kColumnBlocks, int kRowBytes = kSw128RowBytes>
__device__ __forceinline__ void tma_load_tile(uint32_t dst, const CUtensorMap* map, uint32_t bar, int row0, int h,
                                              int b) {
  mbarrier_arrive_expect_tx(bar, kRows * kColumnBlocks * kRowBytes);
#pragma unroll
  for (int cb = 0; cb < kColumnBlocks; ++cb)
    tma_load_4d(dst + cb * kRows * kRowBytes, map, bar, cb * kSw128BlockElems, row0, h, b);
}

// K/V multicast (KvMulticast<Config>): this CTA's half of a kRows-row tile, rows
// [rank * kRows / 2, (rank + 1) * kRows / 2) of every column block, into both CTAs
// of the cluster; this CTA's barrier expects the whole tile, the peer's half included.
template <int kRows, int kColumnBlocks>
__device__ __forceinline__ void tma_load_tile_multicast(uint32_t dst, const CUtensorMap* half_map, uint32_t bar,
                                                        int row0, int h, int b) {
  constexpr int kHalf = kRows / 2;
  constexpr uint16_t kBothCtas = 0b11;
  const int rank = static_cast<int>(cluster_ctarank());
  mbarrier_arrive_expect_tx(bar, kRows * kColumnBlocks * kSw128RowBytes);
#pragma unroll
  for (int cb = 0; cb < kColumnBlocks; ++cb)
    tma_load_4d_multicast(dst + (cb * kRows + rank * kHalf) * kSw128RowBytes, half_map, bar, cb * kSw128BlockElems,
                          row0 + rank * kHalf, h, b, kBothCtas);
}

// One K or V tile into its ring slot: the whole tile, or this CTA's multicast half.
template <class Cfg, int kColumnBlocks, int kRowBytes = kSw128RowBytes>
__device__ __forceinline__ void load_kv_tile(uint32_t dst, const CUtensorMap* map, uint32_t bar, int row0, int h,
                                             int b) {
  if constexpr (Cfg::kMulticastCtas > 1) {
    static_assert(kRowBytes == kSw128RowBytes, "K/V multicast: 16-bit tiles");
    tma_load_tile_multicast<Cfg::kBlockN, kColumnBlocks>(dst, map, bar, row0, h, b);
  } else {
    tma_load_tile<Cfg::kBlockN, kColumnBlocks, kRowBytes>(dst, map, bar, row0, h, b);
  }
}
// A V tile stored transposed (Operands::kVTransposed, 8-bit): Vt's D rows of kBlockN keys, one box
// whose first coordinate is the key (Vt is [batch, kv_heads, D, keys]).
template <class Cfg, int D>
__device__ __forceinline__ void load_vt_tile(uint32_t dst, const CUtensorMap* map, uint32_t bar, int key0, int h,
                                             int b) {
  static_assert(Cfg::kMulticastCtas == 1, "Vt tiles: no K/V multicast");
  mbarrier_arrive_expect_tx(bar, D * Cfg::kBlockN);
  tma_load_4d(dst, map, bar, key0, 0, h, b);
}

// Producer: one thread issues Q and every K/V tile of each work item in order.
template <typename T, int D, class Cfg, bool kCausal>
__device__ __forceinline__ void produce(const Params& prm, uint32_t s_base, int split, int splits) {
  using L = Layout<T, D, Cfg>;
  constexpr int kStages = Cfg::kStages;
  constexpr int kBlocks = L::kColumnBlocks;
  const uint32_t bars = s_base + L::kBarOffset;
  prefetch_tensor_map(&prm.q_map);
  prefetch_tensor_map(&prm.k_map);
  prefetch_tensor_map(&prm.v_map);
  if constexpr (kPdlOn<Cfg>) grid_dependency_wait();  // Q, K, V may be the previous kernel's output
  WS_STAMP_IF(true, kProducerGo);
  int ring = 0;  // K/V tiles issued so far: the ring position carries across work items
  sdpa_protocol::Protocol<kStages, Cfg::kQStages> protocol;  // SDPA_PROTOCOL=1: each refill after its release
  // A slot's release (its empty barrier, for ring index `index`), before it is loaded again.
  const auto wait_released = [&](int empty_ring, int index, uint32_t parity) {
    mbarrier_wait(ring_bar<kStages>(bars, empty_ring, index), parity);
    protocol.drained(empty_ring == kEmptyK ? sdpa_protocol::kRingK : sdpa_protocol::kRingV, index);
  };
  WorkOrder<Cfg, kCausal>::for_each(prm, split, splits, [&](const WorkTile& wt, int local) {
    const int h_kv = kv_head(prm.p, wt.h);
    // the epilogue of the item that last used this Q buffer is done with it
    if (local >= Cfg::kQStages) {
      mbarrier_wait(empty_q_bar<Cfg>(bars, local), q_parity<Cfg>(local - Cfg::kQStages));
      protocol.drained(sdpa_protocol::kRingQ, local);
    }
    protocol.filled(sdpa_protocol::kRingQ, local);
    WS_STAMP_IF(true, kItemDecoded);
    tma_load_tile<Cfg::kBlockM, kBlocks, L::kRowBytes>(s_base + q_offset<L>(local), &prm.q_map, full_q_bar<Cfg>(bars, local),
                                         wt.q_begin, wt.h, wt.b);
    WS_STAMP_IF(true, kQIssued);
#if STRESS_POISON >= 2
    const int item_ring = ring;
#endif
    for (int n = wt.kt_begin; n < wt.kt_end; ++n, ++ring) {
      const uint32_t freed = ring_parity<kStages>(ring) ^ 1;  // a fresh buffer counts as freed
      const uint32_t slot = (ring % kStages) * L::kKVBytes;
      wait_released(kEmptyK, ring, freed);
      protocol.filled(sdpa_protocol::kRingK, ring);
      load_kv_tile<Cfg, kBlocks, L::kRowBytes>(s_base + L::kKOffset + slot, &prm.k_map, ring_bar<kStages>(bars, kFullK, ring),
                                 n * Cfg::kBlockN, h_kv, wt.b);
      wait_released(kEmptyV, ring, freed);
      protocol.filled(sdpa_protocol::kRingV, ring);
      const uint32_t v_bar = ring_bar<kStages>(bars, kFullV, ring);
      if constexpr (Operands<T>::kVTransposed)
        load_vt_tile<Cfg, D>(s_base + L::kVOffset + slot, &prm.v_map, v_bar, n * Cfg::kBlockN, h_kv, wt.b);
      else
        load_kv_tile<Cfg, kBlocks>(s_base + L::kVOffset + slot, &prm.v_map, v_bar, n * Cfg::kBlockN, h_kv, wt.b);
    }
#if STRESS_POISON >= 2
    // Stress only (sdpa_stress.cuh): each slot still holding this item's tiles poisoned as soon as
    // its readers release it (the wait is the one the slot's next load would make: parity of ring r).
    for (int r = max(ring - kStages, item_ring); r < ring; ++r) {
      const uint32_t slot = (r % kStages) * L::kKVBytes;
      mbarrier_wait(ring_bar<kStages>(bars, kEmptyK, r), ring_parity<kStages>(r));
      sdpa_stress::poison_tail<Cfg::kBlockN, kBlocks, kSw128RowBytes>(s_base + L::kKOffset + slot);
      mbarrier_wait(ring_bar<kStages>(bars, kEmptyV, r), ring_parity<kStages>(r));
      sdpa_stress::poison_tail<Cfg::kBlockN, kBlocks, kSw128RowBytes>(s_base + L::kVOffset + slot);
    }
#endif
  });
  WS_STAMP_IF(true, kLoadsIssued);
}

}  // namespace sdpa_warpspec
