// fp8/consumer.cuh -- one FP8 consumer warpgroup's key loop (S(n) and P(n-1).V(n-1) back to
// back on WgFp8Tile, fp8/tile.cuh) and its epilogue, per work item.
#pragma once

#include "consumer_sync.cuh"

namespace sdpa_fp8 {

// One consumer warpgroup's key loop and epilogue, per work item.
template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
struct Consumer : ConsumerSync<D, Cfg> {
  using Sync = ConsumerSync<D, Cfg>;
  using typename Sync::L;
  using Sync::prm, Sync::bars, Sync::smem, Sync::cwg, Sync::warp_in_wg, Sync::lane;
  using Sync::wait_full, Sync::release, Sync::release_q, Sync::desc_q, Sync::desc_k, Sync::desc_vt;
  using Sync::turn_begin, Sync::turn_end, Sync::empty_turn, Sync::kTurnThreads;
  using Tile = WgFp8Tile<T, D, Cfg::kBlockN, kCausal, kScalePositive, Cfg::kFoldPScale, Cfg::kPolyEvery,
                         Cfg::kRescaleThreshold, Cfg::kRowSumMma, Cfg::kEarlyPack, Cfg::kPvPromoteMode, Cfg::kQkF16>;
  static constexpr int kBlockN = Cfg::kBlockN;
  static_assert(Tile::kVtChunkBytes == L::kVtChunkStride, "the tile's descriptors step the layout's Vt chunks");
  static_assert(Tile::kVtChunk == L::kVtChunk, "the tile's and the layout's Vt chunks agree");

  Tile tile;

  __device__ __forceinline__ Consumer(const Params& prm_, uint32_t s_base_, unsigned char* smem_, int cwg_)
      : Sync(prm_, s_base_, smem_, cwg_) {}

  // The first tile: S only. Issue and wait stay in one branch (C7514, sdpa_warpspec.cuh).
  __device__ __forceinline__ void first_tile(int idx, int key0) {
    turn_begin();
    wait_full(sdpa_warpspec::kFullK, idx);
    fence_regs(tile.m.s_acc);
    wgmma_fence();
    tile.template issue_qk<Cfg::kBlockM>(desc_q(), desc_k(idx));
    wgmma_commit();
    turn_end();
    wgmma_wait<0>();
    fence_regs(tile.m.s_acc);
    release(sdpa_warpspec::kEmptyK, idx);
    tile.softmax(key0, prm.ws.p.seq_len);
    tile.pack_p();
  }
  // S(idx) and P(idx-1).V(idx-1) back to back; O's rescale under S, softmax(idx) under P.V.
  // With pingpong, O's rescale moves in front of the turn (under the other
  // warpgroup's GEMMs; s7's default) and K(idx)'s wait too (FlashAttention-3).
  __device__ __forceinline__ void middle_tile(int idx, int key0) {
    if constexpr (Cfg::kPingpong) {
      tile.fence_o();
      tile.rescale_o();
    }
    wait_full(sdpa_warpspec::kFullK, idx);
    turn_begin();
    fence_regs(tile.m.s_acc);
    fence_regs(tile.p8);
    tile.fence_o();
    wgmma_fence();  // p8 (and a rescaled o_acc) were written by ordinary instructions
    tile.template issue_qk<Cfg::kBlockM>(desc_q(), desc_k(idx));
    wgmma_commit();
    if constexpr (!Cfg::kPingpong) {  // under S(idx) on the tensor cores
      tile.fence_o();
      tile.rescale_o();
      tile.fence_o();
    }
    wait_full(sdpa_warpspec::kFullV, idx - 1);
    wgmma_fence();
    tile.issue_pv(desc_vt(idx - 1));
    wgmma_commit();
    turn_end();
    if constexpr (Cfg::kPvPromoteMode == kPvPromoteHalves) {
      promoted_halves_then_softmax(idx, key0);
      return;
    }
    wgmma_wait<1>();  // S(idx) done; P(idx-1).V(idx-1) may still run
    fence_regs(tile.m.s_acc);
    release(sdpa_warpspec::kEmptyK, idx);
    tile.softmax(key0, prm.ws.p.seq_len);
    schedule_boundary(prm.ws.p.seq_len < 0);  // keep the wait below the softmax (sdpa_wgmma.cuh)
    wgmma_wait<0>();
    tile.fence_o();
    fence_regs(tile.p8);
    release(sdpa_warpspec::kEmptyV, idx - 1);
    tile.promote_o();
    tile.pack_p();
  }
  // kPvPromoteHalves: both column halves of P(idx-1).V(idx-1) done and added to O before
  // softmax(idx), so o_tile is dead during the softmax (a half in flight under it spills 4-16
  // bytes at 232 registers); the other warpgroup's turn keeps the tensor cores busy meanwhile.
  __device__ __forceinline__ void promoted_halves_then_softmax(int idx, int key0) {
    wgmma_wait<0>();  // S(idx) and the first half of P(idx-1).V(idx-1)
    fence_regs(tile.m.s_acc);
    tile.fence_o();
    fence_regs(tile.p8);
    release(sdpa_warpspec::kEmptyK, idx);
    tile.pv_second_half(desc_vt(idx - 1));  // reads Vt(idx - 1) before its release
    release(sdpa_warpspec::kEmptyV, idx - 1);
    tile.promote_o();
    tile.softmax(key0, prm.ws.p.seq_len);
    tile.pack_p();
  }
  __device__ __forceinline__ void last_pv(int idx) {
    tile.fence_o();
    tile.rescale_o();
    tile.fence_o();
    fence_regs(tile.p8);
    turn_begin();
    wait_full(sdpa_warpspec::kFullV, idx);
    wgmma_fence();
    tile.issue_pv(desc_vt(idx));
    wgmma_commit();
    turn_end();
    wgmma_wait<0>();
    tile.fence_o();
    tile.pv_second_half(desc_vt(idx));  // kPvPromoteHalves: reads Vt(idx) before its release
    release(sdpa_warpspec::kEmptyV, idx);
    tile.promote_o();
  }

  // This warpgroup's key tiles, then the tiles only the other warpgroup needs
  // (causal): freed in order once landed, so the producer's ring keeps moving.
  // Per work item (one, or a persistent block's stripe): this warpgroup's key
  // tiles, then the tiles only the other warpgroup needs (causal): freed in
  // order once landed, so the producer's ring keeps moving. The ring index
  // carries across items; so do the turns (tiles + 1 per item for both).
  __device__ __forceinline__ void run() {
    const SdpaProblem& p = prm.ws.p;
    // Pingpong: warpgroup 0 takes the first turn.
    if constexpr (Cfg::kPingpong) {
      if (cwg == 1) sdpa_warpspec::bar_arrive(sdpa_warpspec::kTurnBarrier0, kTurnThreads);
    }
    int ring = 0;
    sdpa_warpspec::WorkOrder<Cfg, kCausal>::for_each(prm.ws, 0, kNoSplit, [&](const WorkTile& wt, int local) {
      const int bh = wt.b * p.heads + wt.h;
      const int wg_q0 = wt.q_begin + cwg * kWgmmaM;
      const int needed =
          wg_q0 < p.seq_len ? sdpa_ceil_div(sdpa_kv_end(wg_q0, kWgmmaM, p.seq_len, kCausal), kBlockN) : 0;
      const int tiles = wt.kt_end - wt.kt_begin;
      const int mine = max(0, min(wt.kt_end, needed) - wt.kt_begin);
      tile.init(p.softmax_scale * prm.q_descale[bh] * prm.k_descale[bh], wg_q0 + warp_in_wg * Tile::Base::kWarpRows,
                lane);
      mbarrier_wait(sdpa_warpspec::full_q_bar(bars), local & 1);
      if (mine > 0) first_tile(ring, wt.kt_begin * kBlockN);
      else empty_turn();
      for (int j = 1; j < mine; ++j) middle_tile(ring + j, (wt.kt_begin + j) * kBlockN);
      release_q();
      if (mine > 0) last_pv(ring + mine - 1);
      for (int j = mine; j < tiles; ++j) {
        empty_turn();
        wait_full(sdpa_warpspec::kFullK, ring + j);
        release(sdpa_warpspec::kEmptyK, ring + j);
        wait_full(sdpa_warpspec::kFullV, ring + j);
        release(sdpa_warpspec::kEmptyV, ring + j);
      }
      ring += tiles;
      if constexpr (kPdl == sdpa_warpspec::Pdl::kLateTrigger) grid_launch_dependents();
      if (wg_q0 < p.seq_len) {
        T* o_g = sdpa_head_ptr(static_cast<T*>(p.out), p.out_strides, wt.b, wt.h) +
                 static_cast<int64_t>(wt.q_begin) * p.out_strides.seq;
        tile.template store_o<Cfg::kBlockM>(smem + L::kOOffset, cwg * kWgmmaM + warp_in_wg * Tile::Base::kWarpRows,
                                            o_g, p.out_strides.seq, p.seq_len - wt.q_begin, lane, prm.v_descale[bh]);
      }
    });
  }
};

}  // namespace sdpa_fp8
