// fp8/consumer_sync.cuh -- a consumer warpgroup's side of the FP8 kernel's barriers: ring waits
// and releases, Q's release, the operand descriptors of a ring slot and the pingpong turns.
#pragma once

#include <cstdint>

#include "layout.cuh"

namespace sdpa_fp8 {

// A consumer warpgroup's place in the block and its side of the barriers:
// the rings' full / empty barriers, the operand descriptors of a ring slot,
// the pingpong turns and Q's release.
template <int D, class Cfg>
struct ConsumerSync {
  using L = Layout<D, Cfg>;
  static constexpr int kStages = Cfg::kStages;
  static constexpr int kTurnThreads = 2 * kWarpgroupThreads;  // both consumer warpgroups meet at a turn
  static_assert(!Cfg::kPingpong || Cfg::kConsumerWGs == 2, "pingpong alternates exactly two consumer warpgroups");

  const Params& prm;
  uint32_t s_base, bars;
  unsigned char* smem;
  int cwg, warp_in_wg, lane;

  __device__ __forceinline__ ConsumerSync(const Params& prm_, uint32_t s_base_, unsigned char* smem_, int cwg_)
      : prm(prm_), s_base(s_base_), bars(s_base_ + L::kBarOffset), smem(smem_), cwg(cwg_) {
    const int ctid = static_cast<int>(threadIdx.x) - kWarpgroupThreads;
    warp_in_wg = (ctid % kWarpgroupThreads) / sdpa_warpspec::kWarpSize;
    lane = ctid % sdpa_warpspec::kWarpSize;
  }

  __device__ __forceinline__ void wait_full(int ring, int index) const {
    mbarrier_wait(sdpa_warpspec::ring_bar<kStages>(bars, ring, index), sdpa_warpspec::ring_parity<kStages>(index));
  }
  // A buffer is free once every consumer warp's wgmma reading it has completed.
  __device__ __forceinline__ void release(int ring, int index) const {
    __syncwarp();
    if (lane == 0) mbarrier_arrive(sdpa_warpspec::ring_bar<kStages>(bars, ring, index));
  }
  // Every S (Q.K^T) of this item has completed: the producer may load the next item's Q.
  __device__ __forceinline__ void release_q() const {
    if constexpr (!Cfg::kPersistent) return;  // one item per block: Q is never reloaded
    __syncwarp();
    if (lane == 0) mbarrier_arrive(sdpa_warpspec::empty_q_bar(bars));
  }
  // Q (this warpgroup's rows) and K: e4m3 rows of D bytes, or kQkF16's fp16 SW128 column blocks
  // (a warpgroup's rows start 64 rows of 128 bytes into the first block, as in s6).
  __device__ __forceinline__ uint64_t desc_q() const {
    if constexpr (Cfg::kQkF16) return make_desc_kmajor(s_base + L::kQOffset + cwg * kWgmmaM * kSw128RowBytes);
    return make_desc_kmajor8<D>(s_base + L::kQOffset + cwg * kWgmmaM * D);
  }
  __device__ __forceinline__ uint64_t desc_k(int index) const {
    if constexpr (Cfg::kQkF16) return make_desc_kmajor(s_base + L::kKOffset + (index % kStages) * L::kKBytes);
    return make_desc_kmajor8<D>(s_base + L::kKOffset + (index % kStages) * L::kKBytes);
  }
  __device__ __forceinline__ uint64_t desc_vt(int index) const {
    return make_desc_kmajor8<L::kVtChunk>(s_base + L::kVOffset + (index % kStages) * L::kVtBytes);
  }

  // Pingpong (Cfg::kPingpong, s7's scheme on sdpa_warpspec's named barriers):
  // a warpgroup issues its GEMMs of a tile only between turn_begin (bar.sync on
  // its own barrier) and turn_end (bar.arrive on the other's), then waits for
  // them and runs its softmax while the other warpgroup's GEMMs hold the tensor
  // cores. Without pingpong both are empty and the schedule is s6's.
  __device__ __forceinline__ void turn_begin() const {
    if constexpr (Cfg::kPingpong) sdpa_warpspec::bar_sync(sdpa_warpspec::kTurnBarrier0 + cwg, kTurnThreads);
  }
  __device__ __forceinline__ void turn_end() const {
    if constexpr (Cfg::kPingpong) sdpa_warpspec::bar_arrive(sdpa_warpspec::kTurnBarrier0 + (1 - cwg), kTurnThreads);
  }
  // A turn with no GEMM: a warpgroup with fewer tiles (causal) keeps the alternation.
  __device__ __forceinline__ void empty_turn() const {
    turn_begin();
    turn_end();
  }
};

}  // namespace sdpa_fp8
