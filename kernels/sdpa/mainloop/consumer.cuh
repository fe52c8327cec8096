// mainloop/consumer.cuh -- a consumer warpgroup's main loop over a work item's key tiles: S(n)
// issued before P(n-1).V(n-1), softmax(n) under P(n-1).V(n-1) (s5's intra-warpgroup overlap), in
// turns round two or three warpgroups (Cfg::kPingpong) or side by side, over every other key tile
// (KeySplit), with the softmax order of the Config's body policy; each item ends in its epilogue
// (epilogue/epilogue.cuh).
#pragma once

#include "../epilogue/epilogue.cuh"

namespace sdpa_warpspec {

template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
struct Consumer : Epilogue<T, D, Cfg, kCausal, kScalePositive> {
  using Base = Epilogue<T, D, Cfg, kCausal, kScalePositive>;
  SDPA_CONSUMER_WARPGROUP_NAMES(Base);
  using Base::finish;
  using Base::finish_block;
  using Base::store_deferred;
#if WS_TIMELINE
  using Base::tile_clocks;
#endif
  static constexpr int kStages = Cfg::kStages;
  static constexpr int kBlockN = Cfg::kBlockN;
  static constexpr int kTurnThreads = Base::kTurnThreads;

  // The interleaved softmax order on the configs whose consumers hold 240 registers (the short
  // policy's 232 spilled a register with it at head_dim 128); kInterleavedD128: at head_dim 128 only.
  static constexpr bool kInterleave = Tile::kHasInterleavedSoftmax && Cfg::kConsumerRegs >= 240 &&
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
    commit();
    turn_end();
    store_deferred();  // under this Q.K^T and the other warpgroup's turn
    wait_all_wgmma();
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
    commit();
    if constexpr (!Cfg::kPingpong && !kInterleave) {  // under S(idx) on the tensor cores
      fence_regs(tile.o_acc);
      tile.rescale_o();
      fence_regs(tile.o_acc);
    }
    const int prev = idx - Cfg::kRingStride;
    wait_full(kFullV, prev);
    wgmma_fence();
    tile.issue_pv(desc_v(prev));
    commit();
    turn_end();
    WS_TILE_STEP(kTileIssue);
    wait_wgmma_but_last();  // S(idx) done; P(idx-1).V(idx-1) may still run
    fence_regs(tile.s_acc);
    WS_TILE_STEP(kTileSWait);
    release_kv(kEmptyK, idx);
    if constexpr (kInterleave) {  // O's rescale for this tile is in there, after the wait
      tile.template softmax_interleaved<kSoftmaxEarlyTiles>(key0, kv_len(prm.p), [&] {
        wait_all_wgmma();
        fence_regs(tile.o_acc);
        fence_regs(tile.p_frag);
        release_kv(kEmptyV, prev);
      });
      WS_TILE_STEP(kTileSoftmax);
    } else {
      tile.softmax(key0, kv_len(prm.p));
      schedule_boundary(prm.p.seq_len < 0);  // keep the wait below the softmax (sdpa_wgmma.cuh)
      WS_TILE_STEP(kTileSoftmax);
      wait_all_wgmma();
      fence_regs(tile.o_acc);
      fence_regs(tile.p_frag);
      tile.pv_retired();
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
    commit();
    turn_end();
    wait_all_wgmma();
    fence_regs(tile.o_acc);
    tile.pv_retired();
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
    tile.bind_item(prm, wt.b, wt.h, wg_q0);
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
    tile.bind_item(prm, wt.b, wt.h, wt.q_begin);
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

  __device__ __forceinline__ void run(int split, int splits) {
    if constexpr (Cfg::kPingpong) {
      // warpgroup 0 takes the first turn, handed over by the last one
      if (cwg == Cfg::kConsumerWGs - 1) bar_arrive(turn_barrier(0), kTurnThreads);
    }
    int ring = 0;
    WorkOrder<Cfg, kCausal>::for_each(prm, split, splits, [&](const WorkTile& wt, int item) {
      local = item;
      mbarrier_wait(full_q_bar<Cfg>(bars, item), q_parity<Cfg>(item));
      protocol.landed(sdpa_protocol::kRingQ, item);
      WS_STAMP_IF(ctid == 0, kQLanded);
      WS_STAMP_ITEM_IF(ctid == 0, kItemQLanded, item);
      ring += mainloop(wt, ring);
      if constexpr (Cfg::kPdl == Pdl::kLateTrigger) grid_launch_dependents();
      finish(wt, item, split, splits);
    });
    finish_block();
    protocol.finish();
    WS_TILE_FLUSH_IF(ctid % kWarpgroupThreads == 0, cwg);
  }
};

}  // namespace sdpa_warpspec
