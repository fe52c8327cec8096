// sdpa_warpspec.cuh -- the warp-specialized Hopper attention kernel that s6, s7
// and s8 instantiate with different policies (Config below):
//
//   producer warpgroup   setmaxnreg.dec; one thread issues TMA boxes of Q (once
//                        per work item) and K(n), V(n) into rings of kStages
//                        buffers, each with a "full" (transaction bytes) and an
//                        "empty" (one arrival per consumer warp) mbarrier.
//   consumer warpgroups  setmaxnreg.inc; 64 query rows each (1, 2 or 3 of them:
//                        64, 128 or 192 rows per block); per key tile the
//                        intra-warpgroup overlap of s5 (S(n) issued before
//                        P(n-1).V(n-1), softmax(n) under P(n-1).V(n-1)).
//
// Policies:
//   kPingpong    (2 consumer warpgroups) named barriers hand the tensor cores
//                back and forth: a warpgroup issues its GEMMs of a tile only in
//                its turn, so one's softmax runs under the other's GEMMs.
//   kPersistent  grid = min(work items, SMs); each block walks work items
//                blockIdx.x, + gridDim.x, ... with the K/V ring position and
//                the Q buffer's phase carried across items ("empty_q" frees Q
//                once the epilogue has staged O through it). QRing<Config>: two
//                Q buffers, so the next item's Q loads under this item's tiles.
//   split-KV     (not persistent) a thread-block cluster of 1, 2 or 4 CTAs
//                shares one work item; CTA r takes a contiguous share of its
//                key tiles, writes its unnormalised O, row max and row sum to
//                its own shared memory, and rank 0 combines the partials over
//                DSMEM (mapa + ld.shared::cluster). The cluster size is chosen
//                at launch.
//   kKeySplit    (2 consumer warpgroups, not persistent, no pingpong) both
//                warpgroups take the SAME 64 query rows; ring index i (key
//                tile kt_begin + i) belongs to warpgroup i % 2, so each walks
//                half of the item's key tiles with its own O, max and sum;
//                warpgroup 1 parks its partial in shared memory behind a named
//                barrier and warpgroup 0 merges and stores. The producer is
//                unchanged: it issues the tiles in order.
//   kDeferEpilogue (persistent, two Q buffers; DeferEpilogue<Config>) a
//                warpgroup keeps a finished item's O in its accumulators and
//                stores it (staged in that item's Q buffer) right after
//                issuing the next item's first Q.K^T, under that wgmma.
// Work items are (query tile, head, batch), query tiles fastest and in
// descending order: for causal attention each head's longest items go first
// (statically striped over the persistent blocks).
#pragma once

#include "sdpa_warpspec_config.cuh"
#include "sched/work_order.cuh"

namespace sdpa_warpspec {

// One tile of kRows rows: announce its bytes on `bar`, then one TMA box per
// 64-column block into the block-major SW128 layout.
template <int kRows, int kColumnBlocks>
__device__ __forceinline__ void tma_load_tile(uint32_t dst, const CUtensorMap* map, uint32_t bar, int row0, int h,
                                              int b) {
  mbarrier_arrive_expect_tx(bar, kRows * kColumnBlocks * kSw128RowBytes);
#pragma unroll
  for (int cb = 0; cb < kColumnBlocks; ++cb)
    tma_load_4d(dst + cb * kRows * kSw128RowBytes, map, bar, cb * kSw128BlockElems, row0, h, b);
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
template <class Cfg, int kColumnBlocks>
__device__ __forceinline__ void load_kv_tile(uint32_t dst, const CUtensorMap* map, uint32_t bar, int row0, int h,
                                             int b) {
  if constexpr (Cfg::kMulticastCtas > 1)
    tma_load_tile_multicast<Cfg::kBlockN, kColumnBlocks>(dst, map, bar, row0, h, b);
  else
    tma_load_tile<Cfg::kBlockN, kColumnBlocks>(dst, map, bar, row0, h, b);
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
  WorkOrder<Cfg, kCausal>::for_each(prm, split, splits, [&](const WorkTile& wt, int local) {
    const int h_kv = kv_head(prm.p, wt.h);
    // the epilogue of the item that last used this Q buffer is done with it
    if (local >= Cfg::kQStages) mbarrier_wait(empty_q_bar<Cfg>(bars, local), q_parity<Cfg>(local - Cfg::kQStages));
    WS_STAMP_IF(true, kItemDecoded);
    tma_load_tile<Cfg::kBlockM, kBlocks>(s_base + q_offset<L>(local), &prm.q_map, full_q_bar<Cfg>(bars, local),
                                         wt.q_begin, wt.h, wt.b);
    WS_STAMP_IF(true, kQIssued);
#if STRESS_POISON >= 2
    const int item_ring = ring;
#endif
    for (int n = wt.kt_begin; n < wt.kt_end; ++n, ++ring) {
      const uint32_t freed = ring_parity<kStages>(ring) ^ 1;  // a fresh buffer counts as freed
      const uint32_t slot = (ring % kStages) * L::kKVBytes;
      mbarrier_wait(ring_bar<kStages>(bars, kEmptyK, ring), freed);
      load_kv_tile<Cfg, kBlocks>(s_base + L::kKOffset + slot, &prm.k_map, ring_bar<kStages>(bars, kFullK, ring),
                                 n * Cfg::kBlockN, h_kv, wt.b);
      mbarrier_wait(ring_bar<kStages>(bars, kEmptyV, ring), freed);
      load_kv_tile<Cfg, kBlocks>(s_base + L::kVOffset + slot, &prm.v_map, ring_bar<kStages>(bars, kFullV, ring),
                                 n * Cfg::kBlockN, h_kv, wt.b);
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
struct Consumer {
  using L = Layout<T, D, Cfg>;
  using Tile = WgAttentionTile<T, D, Cfg::kBlockN, kCausal, kScalePositive, kRescaleThresholdOf<Cfg, D>>;
  static constexpr int kStages = Cfg::kStages;
  static constexpr int kBlockN = Cfg::kBlockN;
  static constexpr int kTurnThreads = 2 * kWarpgroupThreads;  // the warpgroup whose turn ends and the next one

  const Params& prm;
  uint32_t s_base, bars;
  unsigned char* smem;
  int cwg, ctid, warp_in_wg, lane;
  WS_TILE_CLOCKS_MEMBER  // WS_TIMELINE: the middle tiles' step clocks
  int local = 0;  // the current work item's index in this block (its Q buffer's slot and phase)
  Tile tile;
  // DeferEpilogue: the last item, whose O waits in the accumulators for the next item's first Q.K^T.
  WorkTile deferred_wt;
  int deferred_local = 0;
  float deferred_l[Tile::kRowsPerThread];
  bool deferred = false;

  __device__ __forceinline__ Consumer(const Params& prm_, uint32_t s_base_, unsigned char* smem_, int cwg_)
      : prm(prm_), s_base(s_base_), bars(s_base_ + L::kBarOffset), smem(smem_), cwg(cwg_) {
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
  }
  // A buffer is free once every consumer warp's wgmma reading it has completed.
  __device__ __forceinline__ void release(uint32_t bar) const {
    __syncwarp();
    if (lane == 0) mbarrier_arrive(bar);
  }
  // A K/V ring slot: with multicast also in the peer CTA, whose producer writes half of our slot.
  __device__ __forceinline__ void release_kv(int ring, int index) const {
    const uint32_t bar = ring_bar<kStages>(bars, ring, index);
    __syncwarp();
    if (lane == 0) {
      mbarrier_arrive(bar);
      if constexpr (Cfg::kMulticastCtas > 1) mbarrier_arrive_cluster(map_to_rank(bar, cluster_ctarank() ^ 1));
    }
  }
  __device__ __forceinline__ uint64_t desc_q() const {
    return make_desc_kmajor(s_base + q_offset<L>(local) + wg_row0() * kSw128RowBytes);
  }
  __device__ __forceinline__ uint64_t desc_k(int index) const {
    return make_desc_kmajor(s_base + L::kKOffset + (index % kStages) * L::kKVBytes);
  }
  __device__ __forceinline__ uint64_t desc_v(int index) const {
    return make_desc_mnmajor(s_base + L::kVOffset + (index % kStages) * L::kKVBytes, kBlockN * kSw128RowBytes);
  }

  // The interleaved softmax order on the configs whose consumers hold 240 registers (the short
  // policy's 232 spilled a register with it at head_dim 128); kInterleavedD128: at head_dim 128 only.
  static constexpr bool kInterleave = Cfg::kConsumerRegs >= 240 &&
                                      (Cfg::kSoftmaxOrder == SoftmaxOrder::kInterleaved ||
                                       (Cfg::kSoftmaxOrder == SoftmaxOrder::kInterleavedD128 && D == 128));
  // n8 tiles whose exponentials softmax_interleaved computes before the P.V's wait.
  static constexpr int kSoftmaxEarlyTiles = 2;

  // Tile j of the item sits at ring index ring + j. The first tile: S only.
  // A warpgroup with no tile still takes the turn. The wgmma issue and its
  // wait stay in one branch: split across a merge point, ptxas cannot prove
  // the accumulators idle and serializes every wgmma of the kernel (C7514).
  __device__ __forceinline__ void first_tile(int ring, int key0, bool active) {
    if (!active) {
      turn_begin();
      turn_end();
      store_deferred();
      return;
    }
    turn_begin();
    wait_full(kFullK, ring);
    WS_STAMP_IF(ctid == 0, kKLanded);
    fence_regs(tile.s_acc);
    wgmma_fence();
    tile.template issue_qk<Cfg::kBlockM>(desc_q(), desc_k(ring));
    wgmma_commit();
    turn_end();
    store_deferred();  // under this Q.K^T and the other warpgroup's turn
    wgmma_wait<0>();
    fence_regs(tile.s_acc);
    release_kv(kEmptyK, ring);
    tile.softmax(key0, kv_len(prm.p));
    tile.pack_p();
  }
  // S(idx) and P.V of this warpgroup's previous tile (ring index idx - kRingStride)
  // issued back to back; softmax(idx) under the P.V.
  __device__ __forceinline__ void middle_tile(int idx, int key0) {
    WS_TILE_BEGIN();
    if constexpr (Cfg::kPingpong && !kInterleave) {  // the other warpgroup's GEMMs cover it
      fence_regs(tile.o_acc);
      tile.rescale_o();
    }
    WS_TILE_STEP(kTileRescale);
    wait_full(kFullK, idx);  // FlashAttention-3 waits before its turn
    WS_TILE_STEP(kTileKWait);
    turn_begin();
    WS_TILE_STEP(kTileTurnWait);
    fence_regs(tile.s_acc);
    fence_regs(tile.p_frag);
    fence_regs(tile.o_acc);
    wgmma_fence();  // p_frag (and a rescaled o_acc) were written by ordinary instructions
    tile.template issue_qk<Cfg::kBlockM>(desc_q(), desc_k(idx));
    wgmma_commit();
    if constexpr (!Cfg::kPingpong && !kInterleave) {  // under S(idx) on the tensor cores
      fence_regs(tile.o_acc);
      tile.rescale_o();
      fence_regs(tile.o_acc);
    }
    const int prev = idx - Cfg::kRingStride;
    wait_full(kFullV, prev);
    wgmma_fence();
    tile.issue_pv(desc_v(prev));
    wgmma_commit();
    turn_end();
    WS_TILE_STEP(kTileIssue);
    wgmma_wait<1>();  // S(idx) done; P(idx-1).V(idx-1) may still run
    fence_regs(tile.s_acc);
    WS_TILE_STEP(kTileSWait);
    release_kv(kEmptyK, idx);
    if constexpr (kInterleave) {  // O's rescale for this tile is in there, after the wait
      tile.template softmax_interleaved<kSoftmaxEarlyTiles>(key0, kv_len(prm.p), [&] {
        wgmma_wait<0>();
        fence_regs(tile.o_acc);
        fence_regs(tile.p_frag);
        release_kv(kEmptyV, prev);
      });
      WS_TILE_STEP(kTileSoftmax);
    } else {
      tile.softmax(key0, kv_len(prm.p));
      schedule_boundary(prm.p.seq_len < 0);  // keep the wait below the softmax (sdpa_wgmma.cuh)
      WS_TILE_STEP(kTileSoftmax);
      wgmma_wait<0>();
      fence_regs(tile.o_acc);
      fence_regs(tile.p_frag);
      WS_TILE_STEP(kTilePvWait);
      release_kv(kEmptyV, prev);
      tile.pack_p();
      WS_TILE_STEP(kTilePack);
    }
  }
  __device__ __forceinline__ void last_pv(int idx) {
    fence_regs(tile.o_acc);
    if constexpr (!kInterleave) tile.rescale_o();  // softmax_interleaved rescaled O already
    fence_regs(tile.o_acc);
    fence_regs(tile.p_frag);
    turn_begin();
    wait_full(kFullV, idx);
    wgmma_fence();
    tile.issue_pv(desc_v(idx));
    wgmma_commit();
    turn_end();
    wgmma_wait<0>();
    fence_regs(tile.o_acc);
    release_kv(kEmptyV, idx);
  }

  // One work item's key tiles; returns how many ring slots it consumed. Both
  // warpgroups take (tiles + 1) pingpong turns per item, whatever they compute.
  __device__ __forceinline__ int mainloop(const WorkTile& wt, int ring) {
    if constexpr (Cfg::kKeySplit) return mainloop_key_split(wt, ring);
    const int end_row = rows_end(wt);
    const int wg_q0 = wt.q_begin + wg_row0();
    const int offset = key_offset(prm.p);  // causal: the keys query wg_q0 sees end at wg_q0 + offset
    const int needed =
        wg_q0 < end_row ? sdpa_ceil_div(sdpa_kv_end(wg_q0 + offset, kWgmmaM, kv_len(prm.p), kCausal), kBlockN) : 0;
    const int tiles = wt.kt_end - wt.kt_begin;
    const int mine = max(0, min(wt.kt_end, needed) - wt.kt_begin);
    // a deferred epilogue still reads O: first_tile zeroes it after the store
    tile.template init<!Cfg::kDeferEpilogue>(prm.p.softmax_scale, wg_q0 + offset + warp_in_wg * Tile::kWarpRows, lane);
    first_tile(ring, wt.kt_begin * kBlockN, mine > 0);
    WS_STAMP_IF(ctid == 0, kFirstTile);
    WS_STAMP_ITEM_IF(ctid == 0, kItemFirstTile, local);
    for (int j = 1; j < mine; ++j) middle_tile(ring + j, (wt.kt_begin + j) * kBlockN);
    if (mine > 0) last_pv(ring + mine - 1);
    WS_STAMP_IF(ctid == 0, kMainloop);
    WS_STAMP_ITEM_IF(ctid == 0, kItemMainloop, local);
    WS_STAMP_IF(ctid == kWarpgroupThreads, kPeerMainloop);
    // Tiles only the other warpgroup needs: free them in order once landed.
    for (int j = mine; j < tiles; ++j) {
      turn_begin();
      turn_end();
      wait_full(kFullK, ring + j);
      release_kv(kEmptyK, ring + j);
      wait_full(kFullV, ring + j);
      release_kv(kEmptyV, ring + j);
    }
    return tiles;
  }
  // Key split: both warpgroups need every tile of the item (same rows); this
  // one takes ring indices cwg, cwg + 2, ... A warpgroup left with none (a
  // one-tile item) keeps init's O = 0, max = -inf, sum = 0: it weighs 0 in
  // the merge. Every row sees key kt_begin * kBlockN of each tile it takes
  // (tile starts are <= q_begin + key_offset and < kv_len), so no row is -inf after one.
  __device__ __forceinline__ int mainloop_key_split(const WorkTile& wt, int ring) {
    constexpr int kStride = Cfg::kRingStride;
    const int tiles = wt.kt_end - wt.kt_begin;
    const int mine = max(0, sdpa_ceil_div(tiles - cwg, kStride));
    tile.init(prm.p.softmax_scale, wt.q_begin + key_offset(prm.p) + warp_in_wg * Tile::kWarpRows, lane);
    first_tile(ring + cwg, (wt.kt_begin + cwg) * kBlockN, mine > 0);
    WS_STAMP_IF(ctid == 0, kFirstTile);
    for (int j = 1; j < mine; ++j) {
      const int i = cwg + j * kStride;
      middle_tile(ring + i, (wt.kt_begin + i) * kBlockN);
    }
    if (mine > 0) last_pv(ring + cwg + (mine - 1) * kStride);
    WS_STAMP_IF(ctid == 0, kMainloop);
    WS_STAMP_IF(ctid == kWarpgroupThreads, kPeerMainloop);
    return tiles;
  }

  // Three warpgroups leave 160 registers: the compiler hoists the epilogue's
  // loop-invariant staging addresses (2 rows x D/8 column tiles) above the
  // key loop, where they do not fit and spill. An opaque row base keeps them
  // after the loop. Two warpgroups (240 registers) keep them hoisted.
  static constexpr bool kLateEpilogueAddresses = Cfg::kConsumerWGs == 3;

  // Item `item`'s O (its Q buffer stages it), normalised by l.
  __device__ __forceinline__ void store(const WorkTile& wt, const float (&l)[Tile::kRowsPerThread], int item) {
    const SdpaProblem& p = prm.p;
    if (wt.q_begin + wg_row0() < rows_end(wt)) {
      T* o_g = sdpa_head_ptr(static_cast<T*>(p.out), p.out_strides, wt.b, wt.h) +
               static_cast<int64_t>(wt.q_begin) * p.out_strides.seq;
      int row_base = wg_row0() + warp_in_wg * Tile::kWarpRows;
      if constexpr (kLateEpilogueAddresses) asm volatile("" : "+r"(row_base));
      tile.template store_o<Cfg::kBlockM>(smem + q_offset<L>(item), row_base, o_g, p.out_strides.seq,
                                          rows_end(wt) - wt.q_begin, lane, l);
    }
    fence_proxy_async_shared();  // the staging writes precede the next Q's TMA overwrite
    release(empty_q_bar<Cfg>(bars, item));
    WS_STAMP_IF(ctid % kWarpgroupThreads == 0 && wg_row0() == 0, kStored);
    WS_STAMP_ITEM_IF(ctid == 0, kItemStored, item);
  }
  // DeferEpilogue: the previous item's O, once this item's first Q.K^T is issued; then O = 0 for
  // this item (init left it).
  __device__ __forceinline__ void store_deferred() {
    if constexpr (Cfg::kDeferEpilogue) {
      if (deferred) store(deferred_wt, deferred_l, deferred_local);
      deferred = false;
      tile.zero_o();
    }
  }

  // Split-KV: every rank parks its partial; rank 0 folds the peers' in and stores.
  __device__ __forceinline__ void combine_and_store(const WorkTile& wt, int split, int splits) {
    float l[Tile::kRowsPerThread];
    tile.reduced_row_sums(l);
    bar_sync(kConsumersDone, Cfg::kConsumerThreads);  // every consumer is done reading the rings
    const uint32_t o_part = s_base + L::kKOffset;
    const uint32_t stat_part = s_base + L::kPartialStatOffset + ctid * 16;
    float4* o_mine = reinterpret_cast<float4*>(smem + L::kKOffset);
#pragma unroll
    for (int i = 0; i < Tile::kOAcc / 4; ++i)
      o_mine[i * Cfg::kConsumerThreads + ctid] =
          make_float4(tile.o_acc[4 * i], tile.o_acc[4 * i + 1], tile.o_acc[4 * i + 2], tile.o_acc[4 * i + 3]);
    *reinterpret_cast<float4*>(smem + L::kPartialStatOffset + ctid * 16) =
        make_float4(tile.row_max[0], tile.row_max[1], l[0], l[1]);
    cluster_sync();  // partials visible cluster-wide
    if (split == 0) {
      for (int r = 1; r < splits; ++r) {
        const float4 st = ld_cluster_f4(map_to_rank(stat_part, r));
        float w_mine[2], w_peer[2];
        merge_stats(0, st.x, st.z, l, w_mine, w_peer);
        merge_stats(1, st.y, st.w, l, w_mine, w_peer);
#pragma unroll
        for (int i = 0; i < Tile::kOAcc / 4; ++i) {
          const float4 v = ld_cluster_f4(map_to_rank(o_part + (i * Cfg::kConsumerThreads + ctid) * 16, r));
          tile.o_acc[4 * i] = tile.o_acc[4 * i] * w_mine[0] + v.x * w_peer[0];
          tile.o_acc[4 * i + 1] = tile.o_acc[4 * i + 1] * w_mine[0] + v.y * w_peer[0];
          tile.o_acc[4 * i + 2] = tile.o_acc[4 * i + 2] * w_mine[1] + v.z * w_peer[1];
          tile.o_acc[4 * i + 3] = tile.o_acc[4 * i + 3] * w_mine[1] + v.w * w_peer[1];
        }
      }
      store(wt, l, local);
    }
    cluster_sync();  // peers keep their shared memory until rank 0 has read it
  }
  // Key split: warpgroup 1 parks O and (max, sum) in the merge area and goes;
  // warpgroup 0 waits for them, folds them into its own and stores. Both are
  // past their last wgmma, so warpgroup 0 may stage O through the Q buffer.
  __device__ __forceinline__ void merge_and_store(const WorkTile& wt) {
    static_assert(Cfg::kKeySplit, "the key-split epilogue");
    constexpr int kPairThreads = 2 * kWarpgroupThreads;
    float l[Tile::kRowsPerThread];
    tile.reduced_row_sums(l);
    const int t = ctid % kWarpgroupThreads;
    float4* o_part = reinterpret_cast<float4*>(smem + L::kMergeOffset);
    float4* stat = reinterpret_cast<float4*>(smem + L::kMergeStatOffset) + t;
    if (cwg == 1) {
      park_partial(o_part, t);
      *stat = make_float4(tile.row_max[0], tile.row_max[1], l[0], l[1]);
      bar_arrive(kKeySplitMerge, kPairThreads);  // orders the stores above before the merger's reads
      release(empty_q_bar<Cfg>(bars, local));
      return;
    }
    bar_sync(kKeySplitMerge, kPairThreads);
    WS_STAMP_IF(t == 0, kMergeReady);
    const float4 st = *stat;
    float w_mine[2], w_peer[2];
    merge_stats(0, st.x, st.z, l, w_mine, w_peer);
    merge_stats(1, st.y, st.w, l, w_mine, w_peer);
    fold_partial(o_part, t, w_mine, w_peer);
    WS_STAMP_IF(t == 0, kFolded);
    store(wt, l, local);
  }
  // O = O_mine * w_mine + O_peer * w_peer, row by row (accumulators 4i, 4i+1: row g; 4i+2, 4i+3: row g+8),
  // from the parked float4s at `part`.
  __device__ __forceinline__ void fold_partial(const float4* part, int t, const float (&w_mine)[2],
                                               const float (&w_peer)[2]) {
#pragma unroll
    for (int i = 0; i < Tile::kOTiles; ++i) {
      const float4 v = part[i * kWarpgroupThreads + t];
      float* o = tile.o_acc + 4 * i;
      o[0] = o[0] * w_mine[0] + v.x * w_peer[0];
      o[1] = o[1] * w_mine[0] + v.y * w_peer[0];
      o[2] = o[2] * w_mine[1] + v.z * w_peer[1];
      o[3] = o[3] * w_mine[1] + v.w * w_peer[1];
    }
  }
  // This warpgroup's O, parked at `dst` as thread-fastest float4s (conflict-free) for the merger.
  __device__ __forceinline__ void park_partial(float4* dst, int t) const {
#pragma unroll
    for (int i = 0; i < Tile::kOTiles; ++i) {
      const float* o = tile.o_acc + 4 * i;
      dst[i * kWarpgroupThreads + t] = make_float4(o[0], o[1], o[2], o[3]);
    }
  }
  // Row r's running max / sum merged with a peer's; the weights rescale both
  // partial O rows to the merged base. A side that saw only masked keys (max
  // -inf) weighs 0, never 0 * inf.
  __device__ __forceinline__ void merge_stats(int r, float peer_max, float peer_sum, float (&l)[2],
                                              float (&w_mine)[2], float (&w_peer)[2]) {
    const float merged = fmaxf(tile.row_max[r], peer_max);
    const float base = sdpa_softmax_base(merged);
    w_mine[r] = tile.row_max[r] == -INFINITY ? 0.0f : ex2_approx(tile.row_max[r] - base);
    w_peer[r] = peer_max == -INFINITY ? 0.0f : ex2_approx(peer_max - base);
    l[r] = l[r] * w_mine[r] + peer_sum * w_peer[r];
    tile.row_max[r] = merged;
  }

  __device__ __forceinline__ void run(int split, int splits) {
    if constexpr (Cfg::kPingpong) {
      // warpgroup 0 takes the first turn, handed over by the last one
      if (cwg == Cfg::kConsumerWGs - 1) bar_arrive(turn_barrier(0), kTurnThreads);
    }
    int ring = 0;
    WorkOrder<Cfg, kCausal>::for_each(prm, split, splits, [&](const WorkTile& wt, int item) {
      local = item;
      mbarrier_wait(full_q_bar<Cfg>(bars, item), q_parity<Cfg>(item));
      WS_STAMP_IF(ctid == 0, kQLanded);
      WS_STAMP_ITEM_IF(ctid == 0, kItemQLanded, item);
      ring += mainloop(wt, ring);
      if constexpr (Cfg::kPdl == Pdl::kLateTrigger) grid_launch_dependents();
      if constexpr (Cfg::kKeySplit) {
        merge_and_store(wt);
      } else if constexpr (Cfg::kDeferEpilogue) {  // stored by the next item's first_tile, or below
        tile.reduced_row_sums(deferred_l);
        deferred_wt = wt;
        deferred_local = item;
        deferred = true;
      } else if (L::kCanSplit && splits > 1) {
        combine_and_store(wt, split, splits);
      } else {
        float l[Tile::kRowsPerThread];
        tile.reduced_row_sums(l);
        store(wt, l, local);
      }
    });
    if constexpr (Cfg::kDeferEpilogue) {
      if (deferred) store(deferred_wt, deferred_l, deferred_local);
    }
    WS_TILE_FLUSH_IF(ctid % kWarpgroupThreads == 0, cwg);
  }
};

template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks) warpspec_kernel(const __grid_constant__ Params prm) {
  using L = Layout<T, D, Cfg>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_base = sdpa_mma::smem_addr(smem_raw);
  const uint32_t s_base = (raw_base + (kSw128Align - 1)) & ~static_cast<uint32_t>(kSw128Align - 1);
  unsigned char* smem = smem_raw + (s_base - raw_base);
  uint32_t splits = 1, split = 0;
  if constexpr (!Cfg::kPersistent) {
    asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(splits));
    split = cluster_ctarank();
  }
  if (threadIdx.x == 0) {
    WS_TIMELINE_OPEN(prm.p.out);
    const uint32_t bars = s_base + L::kBarOffset;
    for (int slot = 0; slot < Cfg::kQStages; ++slot) {  // item `slot` is the first to use Q buffer `slot`
      mbarrier_init(full_q_bar<Cfg>(bars, slot), 1);  // the producer's expect_tx arrival
      mbarrier_init(empty_q_bar<Cfg>(bars, slot), Cfg::kConsumerWarps);
    }
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbarrier_init(ring_bar<Cfg::kStages>(bars, kFullK, s), 1);
      mbarrier_init(ring_bar<Cfg::kStages>(bars, kFullV, s), 1);
      // with K/V multicast the peer's consumer warps free our slots too (release_kv)
      mbarrier_init(ring_bar<Cfg::kStages>(bars, kEmptyK, s), Cfg::kRingReleasers * Cfg::kMulticastCtas);
      mbarrier_init(ring_bar<Cfg::kStages>(bars, kEmptyV, s), Cfg::kRingReleasers * Cfg::kMulticastCtas);
    }
    fence_mbarrier_init();
  }
  __syncthreads();  // the last block-wide barrier: roles diverge below
  // K/V multicast: the peer's copies and releases land on our barriers, so both CTAs' inits come first.
  if constexpr (Cfg::kMulticastCtas > 1) cluster_sync();
  WS_STAMP_IF(threadIdx.x == 0, kPrologue);
  if constexpr (Cfg::kPdl == Pdl::kEarlyTrigger) grid_launch_dependents();
  // Broadcast so ptxas can prove every role branch warp-uniform (wgmma and
  // setmaxnreg under a divergent-looking branch get serialized or ignored).
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / kWarpgroupThreads, 0);
  if (wg == 0) {
    setmaxnreg_dec<Cfg::kProducerRegs>();
    if (threadIdx.x == 0) produce<T, D, Cfg, kCausal>(prm, s_base, split, splits);
    __syncwarp();
    if (splits > 1) {  // the consumers' two cluster barriers count every thread
      cluster_sync();
      cluster_sync();
    }
  } else {
    setmaxnreg_inc<Cfg::kConsumerRegs>();
    // O's stores must not land before the previous grid is done with the buffer
    if constexpr (kPdlOn<Cfg>) grid_dependency_wait();
    WS_STAMP_IF(threadIdx.x == kWarpgroupThreads, kConsumerGo);
    Consumer<T, D, Cfg, kCausal, kScalePositive> consumer(prm, s_base, smem, wg - 1);
    consumer.run(split, splits);
  }
  // K/V multicast: the peer's last releases arrive on our barriers; keep them until it is done.
  if constexpr (Cfg::kMulticastCtas > 1) cluster_sync();
}

}  // namespace sdpa_warpspec

#include "sdpa_warpspec_launch.cuh"
