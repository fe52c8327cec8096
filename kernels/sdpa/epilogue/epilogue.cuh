// epilogue/epilogue.cuh -- a consumer warpgroup's epilogue parts, one per Config part: the direct
// store of O (staged through its item's Q buffer), the deferred store (DeferEpilogue: O kept in the
// accumulators until the next item's first Q.K^T is issued), the key split's merge (KeySplit: two
// warpgroups' partials in shared memory) and the split-KV combine (a cluster's partials over DSMEM).
#pragma once

#include "../mainloop/warpgroup.cuh"

namespace sdpa_warpspec {

template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
struct Epilogue : ConsumerWarpgroup<T, D, Cfg, kCausal, kScalePositive> {
  using Base = ConsumerWarpgroup<T, D, Cfg, kCausal, kScalePositive>;
  SDPA_CONSUMER_WARPGROUP_NAMES(Base);
  // DeferEpilogue: the last item, whose O waits in the accumulators for the next item's first Q.K^T.
  WorkTile deferred_wt;
  int deferred_local = 0;
  float deferred_l[Tile::kRowsPerThread];
  bool deferred = false;

  // Three warpgroups leave 160 registers: the compiler hoists the epilogue's
  // loop-invariant staging addresses (2 rows x D/8 column tiles) above the
  // key loop, where they do not fit and spill. An opaque row base keeps them
  // after the loop. Two warpgroups (240 registers) keep them hoisted.
  static constexpr bool kLateEpilogueAddresses = Cfg::kConsumerWGs == 3;

  // Item `item`'s O (its Q buffer stages it), normalised by l.
  __device__ __forceinline__ void store(const WorkTile& wt, const float (&l)[Tile::kRowsPerThread], int item) {
    const SdpaProblem& p = prm.p;
    protocol.released(sdpa_protocol::kRingQ, item);  // O's staging overwrites the item's Q buffer
    if (wt.q_begin + wg_row0() < rows_end(wt)) {
      using Out = typename Ops::Out;
      Out* o_g = sdpa_head_ptr(static_cast<Out*>(p.out), p.out_strides, wt.b, wt.h) +
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
      protocol.released(sdpa_protocol::kRingQ, local);
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

  // The item's epilogue, as the config's part says: the key split's merge, the deferred store (O
  // waits in the accumulators for the next item's first Q.K^T), the split-KV combine, or the direct
  // store.
  __device__ __forceinline__ void finish(const WorkTile& wt, int item, int split, int splits) {
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
  }
  // After the block's last item: a deferred epilogue's last store.
  __device__ __forceinline__ void finish_block() {
    if constexpr (Cfg::kDeferEpilogue) {
      if (deferred) store(deferred_wt, deferred_l, deferred_local);
    }
  }
};

}  // namespace sdpa_warpspec
