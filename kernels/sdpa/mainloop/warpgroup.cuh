// mainloop/warpgroup.cuh -- a consumer warpgroup as the mainloop and the epilogue share it: its
// state (the block's shared memory, its rows, its tile's registers, the work item's Q buffer), the
// named barriers of the turns, and its ring operations (wait for a slot, release it, take a turn).
#pragma once

#include "../instrument/protocol.cuh"
#include "../sched/work_order.cuh"
#include "../sdpa_warpspec_config.cuh"

namespace sdpa_warpspec {

// Named barriers (0 is __syncthreads): the pingpong turn of consumer warpgroup
// c is barrier turn_barrier(c); kConsumersDone joins all consumer warps.
constexpr int kTurnBarrier0 = 1;  // warpgroups 0 and 1 (kTurnBarrier0 + c)
constexpr int kConsumersDone = 3;
constexpr int kKeySplitMerge = kConsumersDone + 1;  // key split: warpgroup 1's partial is in shared memory
// A third warpgroup's turn: the ids below it were taken before three warpgroups took turns.
constexpr int kTurnBarrier2 = kKeySplitMerge + 1;
__device__ __forceinline__ int turn_barrier(int cwg) { return cwg == 2 ? kTurnBarrier2 : kTurnBarrier0 + cwg; }
__device__ __forceinline__ void bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
struct ConsumerWarpgroup {
  using L = Layout<T, D, Cfg>;
  using Ops = Operands<T>;
  using Tile = typename Ops::template Tile<D, Cfg::kBlockN, kCausal, kScalePositive, kRescaleThresholdOf<Cfg, D>>;
  using KernelParams = typename Ops::KernelParams;
  static constexpr int kStages = Cfg::kStages;
  static constexpr int kBlockN = Cfg::kBlockN;
  static constexpr int kTurnThreads = 2 * kWarpgroupThreads;  // the warpgroup whose turn ends and the next one

  const KernelParams& prm;
  uint32_t s_base, bars;
  unsigned char* smem;
  int cwg, ctid, warp_in_wg, lane;
  WS_TILE_CLOCKS_MEMBER  // WS_TIMELINE: the middle tiles' step clocks
  int local = 0;  // the current work item's index in this block (its Q buffer's slot and phase)
  Tile tile;
  // SDPA_PROTOCOL=1: this warpgroup's view of the K/V rings, checked at every wait, read and release
  // (instrument/protocol.cuh); otherwise empty hooks.
  mutable sdpa_protocol::Protocol<kStages, Cfg::kQStages> protocol;

  __device__ __forceinline__ ConsumerWarpgroup(const KernelParams& prm_, uint32_t s_base_, unsigned char* smem_, int cwg_)
      : prm(prm_), s_base(s_base_), bars(s_base_ + L::kBarOffset), smem(smem_), cwg(cwg_), protocol(cwg_) {
    ctid = static_cast<int>(threadIdx.x) - kWarpgroupThreads;
    warp_in_wg = (ctid % kWarpgroupThreads) / kWarpSize;
    lane = ctid % kWarpSize;
  }

  // Where an item's rows end: a mixed-tiles item's own end (kMixedTiles), else the sequence's.
  __device__ __forceinline__ int rows_end(const WorkTile& wt) const {
    if constexpr (kMixedTiles<Cfg, kCausal>) {  // from q_begin: one register less across the main loop
      const bool big = wt.q_begin < prm.big_tiles * Cfg::kBlockM;
      return min(wt.q_begin + (big ? Cfg::kBlockM : Cfg::kBlockM - kWgmmaM), prm.p.seq_len);
    }
    return prm.p.seq_len;
  }
  // This warpgroup's first query row within the block's tile.
  __device__ __forceinline__ int wg_row0() const { return Cfg::kKeySplit ? 0 : cwg * kWgmmaM; }
  // The turns go round the consumer warpgroups in order, as FlashAttention-3's
  // warp scheduler barriers do for two or three.
  __device__ __forceinline__ void turn_begin() const {
    if constexpr (Cfg::kPingpong && Cfg::kConsumerWGs == 2) bar_sync(kTurnBarrier0 + cwg, kTurnThreads);
    if constexpr (Cfg::kPingpong && Cfg::kConsumerWGs == 3) bar_sync(turn_barrier(cwg), kTurnThreads);
  }
  __device__ __forceinline__ void turn_end() const {
    if constexpr (Cfg::kPingpong && Cfg::kConsumerWGs == 2) bar_arrive(kTurnBarrier0 + (1 - cwg), kTurnThreads);
    if constexpr (Cfg::kPingpong && Cfg::kConsumerWGs == 3) bar_arrive(turn_barrier(cwg == 2 ? 0 : cwg + 1), kTurnThreads);
  }
  __device__ __forceinline__ void wait_full(int ring, int index) const {
    mbarrier_wait(ring_bar<kStages>(bars, ring, index), ring_parity<kStages>(index));
    protocol.landed(ring == kFullK ? sdpa_protocol::kRingK : sdpa_protocol::kRingV, index);
  }
  // The wgmma groups: commit the ones issued since the last commit; wait for all, or all but the last.
  __device__ __forceinline__ void commit() const {
    wgmma_commit();
    protocol.commit();
  }
  __device__ __forceinline__ void wait_all_wgmma() const {
    wgmma_wait<0>();
    protocol.waited(0);
  }
  __device__ __forceinline__ void wait_wgmma_but_last() const {
    wgmma_wait<1>();
    protocol.waited(1);
  }
  // A buffer is free once every consumer warp's wgmma reading it has completed.
  __device__ __forceinline__ void release(uint32_t bar) const {
    __syncwarp();
    if (lane == 0) mbarrier_arrive(bar);
  }
  // A K/V ring slot: with multicast also in the peer CTA, whose producer writes half of our slot.
  __device__ __forceinline__ void release_kv(int ring, int index) const {
    protocol.released(ring == kEmptyK ? sdpa_protocol::kRingK : sdpa_protocol::kRingV, index);
    const uint32_t bar = ring_bar<kStages>(bars, ring, index);
    __syncwarp();
    if (lane == 0) {
      mbarrier_arrive(bar);
      if constexpr (Cfg::kMulticastCtas > 1) mbarrier_arrive_cluster(map_to_rank(bar, cluster_ctarank() ^ 1));
    }
  }
  __device__ __forceinline__ uint64_t desc_q() const {
    protocol.reads(sdpa_protocol::kRingQ, local);
    return Tile::desc_qk(s_base + q_offset<L>(local) + wg_row0() * L::kRowBytes);
  }
  // A slot's descriptor is made to read it: the next commit group's wgmma reads the slot.
  __device__ __forceinline__ uint64_t desc_k(int index) const {
    protocol.reads(sdpa_protocol::kRingK, index);
    return Tile::desc_qk(s_base + L::kKOffset + (index % kStages) * L::kKVBytes);
  }
  __device__ __forceinline__ uint64_t desc_v(int index) const {
    protocol.reads(sdpa_protocol::kRingV, index);
    return Tile::desc_v(s_base + L::kVOffset + (index % kStages) * L::kKVBytes);
  }
};

// The names of ConsumerWarpgroup that a part built on it (Epilogue, and Consumer on Epilogue) uses
// unqualified: a dependent base's members need a using-declaration each, and one list serves every
// part. B: the part's direct base.
#define SDPA_CONSUMER_WARPGROUP_NAMES(B) \
  using typename B::L;                   \
  using typename B::Ops;                 \
  using typename B::Tile;                \
  using B::B;                            \
  using B::bars;                         \
  using B::commit;                       \
  using B::ctid;                         \
  using B::cwg;                          \
  using B::desc_k;                       \
  using B::desc_q;                       \
  using B::desc_v;                       \
  using B::lane;                         \
  using B::local;                        \
  using B::prm;                          \
  using B::protocol;                     \
  using B::release;                      \
  using B::release_kv;                   \
  using B::rows_end;                     \
  using B::s_base;                       \
  using B::smem;                         \
  using B::tile;                         \
  using B::turn_begin;                   \
  using B::turn_end;                     \
  using B::wait_all_wgmma;               \
  using B::wait_full;                    \
  using B::wait_wgmma_but_last;          \
  using B::warp_in_wg;                   \
  using B::wg_row0

}  // namespace sdpa_warpspec
