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
//                once the epilogue has staged O through it).
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
// Work items are (query tile, head, batch), query tiles fastest and in
// descending order: for causal attention each head's longest items go first
// (statically striped over the persistent blocks).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "sdpa_api.h"
#include "sdpa_common.cuh"
#include "sdpa_export.cuh"
#include "sdpa_mma.cuh"
#include "sdpa_tma.cuh"
#include "sdpa_wgmma.cuh"
#include "sdpa_wgmma_tile.cuh"
#include "sdpa_timeline.cuh"

namespace sdpa_warpspec {

using namespace sdpa_wgmma;
using namespace sdpa_tma;

constexpr int kWarpSize = 32;
constexpr int kRegisterFile = 64 * 1024;  // 32-bit registers per SM
constexpr int kMaxClusterSplits = 4;      // key-range splits per work item (cluster size)
constexpr int kBarBytes = 8;
constexpr int kMaxTmaBoxRows = 256;       // cuTensorMapEncodeTiled's limit per box dimension
constexpr int kRegGranule = 8;            // setmaxnreg counts are multiples of 8

// Registers a block holds from launch on: every thread gets the cap that
// __launch_bounds__(threads, min_blocks) leaves, rounded down to the granule.
// setmaxnreg only moves registers between a block's own warps: an .inc that
// asks for more than the .dec calls freed waits forever (a 5-warpgroup block
// gets 96 per thread, 61,440 in all, not the register file's 65,536).
constexpr int entry_regs_per_block(int threads, int min_blocks) {
  return kRegisterFile / min_blocks / threads / kRegGranule * kRegGranule * threads;
}
// The most registers each consumer thread may ask of setmaxnreg.inc, at most
// `wanted`: what the block's registers at entry leave per consumer thread once
// its producer warpgroup holds its share, rounded down to the granule. One block
// per SM, producer at 24: 2 warpgroups (168 * 384 - 24 * 128) / 256 = 240;
// 3 warpgroups (128 * 512 - 24 * 128) / 384 = 162 -> 160; 4 (96 * 640 - 24 * 128)
// / 512 = 114 -> 112.
constexpr int fit_consumer_regs(int consumer_wgs, int producer_regs, int min_blocks, int wanted) {
  const int per_block = entry_regs_per_block((1 + consumer_wgs) * kWarpgroupThreads, min_blocks);
  const int fit = (per_block / kWarpgroupThreads - producer_regs) / consumer_wgs / kRegGranule * kRegGranule;
  return wanted < fit ? wanted : fit;
}
// Pingpong details, measured in s7's notebook: where K(n)'s wait and O's
// rescale sit relative to a warpgroup's turn.
#ifndef WS_WAIT_K_IN_TURN
#define WS_WAIT_K_IN_TURN 0
#endif
#ifndef WS_RESCALE_IN_TURN
#define WS_RESCALE_IN_TURN 0
#endif
// Conditional O rescale at head_dim 128 (sdpa_wgmma_tile.cuh's kRescaleThreshold, log2 units;
// 0 = every tile, the default here; s8 turns it on, where it measured faster). head_dim 64
// rescales every tile.
#ifndef WS_RESCALE_THRESHOLD_D128
#define WS_RESCALE_THRESHOLD_D128 0
#endif
static_assert(WS_RESCALE_THRESHOLD_D128 >= 0 && WS_RESCALE_THRESHOLD_D128 <= 15,
              "WS_RESCALE_THRESHOLD_D128: 0 (off) to 15 (p < 2^15 keeps fp16's 65504 clear)");
template <int D>
constexpr int kRescaleThresholdOf = D == 64 ? 0 : WS_RESCALE_THRESHOLD_D128;
// Programmatic dependent launch (sdpa_tma.cuh): launched with programmatic stream
// serialization, every block waits for the previous grid before its first global access and
// lets the next launch in (launch_dependents), so the next launch's block dispatch and prologue
// overlap this one's tail. 1: the trigger right after the prologue (the next grid's blocks take
// any free slot at once, beside running blocks); 2: after the consumers' first work item's key
// tiles, before its epilogue (they arrive as this grid's blocks finish). 0 (the default here):
// plain launches.
#ifndef WS_PDL
#define WS_PDL 0
#endif
static_assert(WS_PDL >= 0 && WS_PDL <= 2, "WS_PDL: 0 (plain launch), 1 (PDL, early trigger) or 2 (PDL, late trigger)");
constexpr bool kPdl = WS_PDL != 0;
constexpr bool kPdlEarlyTrigger = WS_PDL == 1;
constexpr bool kPdlLateTrigger = WS_PDL == 2;
constexpr bool kWaitKInTurn = WS_WAIT_K_IN_TURN != 0;
constexpr bool kRescaleInTurn = WS_RESCALE_IN_TURN != 0;

struct Params {
  SdpaProblem p;
  CUtensorMap q_map, k_map, v_map;
  int m_tiles;     // query tiles per (batch, head)
  int work_items;  // m_tiles * heads * batch
};

template <int kConsumerWGs_, int kBlockN_, int kStages_, bool kPingpong_, bool kPersistent_, int kMinBlocks_,
          int kProducerRegs_, int kConsumerRegs_>
struct Config {
  static constexpr int kConsumerWGs = kConsumerWGs_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr bool kPingpong = kPingpong_;
  static constexpr bool kPersistent = kPersistent_;
  static constexpr int kMinBlocks = kMinBlocks_;  // blocks per SM the register cap at entry allows
  static constexpr int kProducerRegs = kProducerRegs_;
  static constexpr int kConsumerRegs = kConsumerRegs_;
  static constexpr int kThreads = (1 + kConsumerWGs) * kWarpgroupThreads;  // producer first
  static constexpr bool kKeySplit = false;  // KeySplit<Config> below turns it on
  static constexpr int kBlockM = kConsumerWGs * kWgmmaM;
  // Ring indices between a warpgroup's consecutive key tiles, and the warps
  // that consume (and release) each ring slot.
  static constexpr int kRingStride = 1;
  static constexpr int kConsumerThreads = kConsumerWGs * kWarpgroupThreads;
  static constexpr int kConsumerWarps = kConsumerWGs * kWarpgroupWarps;
  static constexpr int kRingReleasers = kConsumerWarps;
  // Three warpgroups (192 rows, FlashAttention-3's head-dim-64 block) leave each
  // consumer 160 registers (fit_consumer_regs): enough at D=64, not at D=128.
  static_assert(kConsumerWGs >= 1 && kConsumerWGs <= 3, "one to three consumer warpgroups (64, 128 or 192 rows)");
  static_assert(kBlockM <= kMaxTmaBoxRows, "Q is loaded as one TMA box of kBlockM rows per column block");
  static_assert(!kPingpong || kConsumerWGs == 2, "pingpong needs two consumer warpgroups");
  static_assert(kStages >= 2, "a buffer is refilled while the other is read: >= 2 per ring");
  static_assert(kBlockN == 64 || kBlockN == 128 || kBlockN == 176 || kBlockN == 192,
                "BLOCK_N: 64, 128, 176 or 192 (TMA box rows <= 256, a wgmma N with a wrapper)");
  static_assert(kWarpgroupThreads * (kProducerRegs + kConsumerWGs * kConsumerRegs) <=
                    entry_regs_per_block(kThreads, kMinBlocks),
                "the setmaxnreg split must fit the registers the block holds from launch on (fit_consumer_regs)");
};

// A Config whose two consumer warpgroups split the key tiles of ONE
// 64-row query tile (the header's kKeySplit). A derived type rather than a
// Config parameter, so the other configs' kernels keep their names and code.
template <class Base>
struct KeySplit : Base {
  static constexpr bool kKeySplit = true;
  static constexpr int kBlockM = kWgmmaM;  // both warpgroups on the same rows
  static constexpr int kRingStride = Base::kConsumerWGs;
  static constexpr int kRingReleasers = kWarpgroupWarps;  // only the owning warpgroup consumes a slot
  static_assert(Base::kConsumerWGs == 2, "key split: two warpgroups (one parks its partial, one merges)");
  static_assert(!Base::kPingpong, "key split: no turns (both warpgroups take every other tile of one item)");
  // Ring index i is warpgroup i % kConsumerWGs's from 0 on; a persistent block carries
  // the ring position across items, which would shift that ownership.
  static_assert(!Base::kPersistent, "key split: one work item per block (ring index 0 = warpgroup 0)");
  // Slot i % kStages then always serves the same warpgroup, so a warpgroup's
  // parity wait on a slot never races a phase the other one has not consumed
  // (a wait one phase ahead would pass at once).
  static_assert(Base::kStages % Base::kConsumerWGs == 0, "key split: ring slots divide evenly between warpgroups");
};

template <typename T, int D, class Cfg>
struct Layout {
  static_assert(sizeof(T) == 2, "16-bit storage types only");
  static_assert(D % kSw128BlockElems == 0, "head_dim is whole 64-element TMA boxes / swizzle column blocks");
  static constexpr int kColumnBlocks = D / kSw128BlockElems;  // TMA boxes per tile
  static constexpr uint32_t kQBytes = Cfg::kBlockM * D * 2;
  static constexpr uint32_t kKVBytes = Cfg::kBlockN * D * 2;
  static constexpr int kQOffset = 0;
  static constexpr int kKOffset = kQOffset + kQBytes;
  static constexpr int kVOffset = kKOffset + Cfg::kStages * kKVBytes;
  static constexpr int kBarOffset = kVOffset + Cfg::kStages * kKVBytes;
  static constexpr int kBarriers = 2 + 4 * Cfg::kStages;  // full_q, empty_q, then four rings
  // Key split, past the barriers: warpgroup 1's parked fp32 O (kOAcc = D/2 per thread) and its
  // (max, max, sum, sum) per thread.
  static constexpr int kMergeOffset = kBarOffset + kBarriers * kBarBytes;
  static constexpr int kMergeStatOffset = kMergeOffset + kWarpgroupThreads * (D / 2) * 4;
  static constexpr int kMergeBytes = Cfg::kKeySplit ? kMergeStatOffset - kMergeOffset + kWarpgroupThreads * 16 : 0;
  static constexpr int kSmemBytes = kBarOffset + kBarriers * kBarBytes + kMergeBytes + kSw128Align;  // + slack
  // Split-KV partials (fp32 O per consumer thread + row max / sum) reuse the K ring.
  static constexpr int kPartialOBytes = Cfg::kConsumerThreads * (D / 2) * 4;
  static constexpr int kPartialStatOffset = kKOffset + kPartialOBytes;
  static constexpr int kPartialBytes = kPartialOBytes + Cfg::kConsumerThreads * 16;
  // Split-KV needs the partials to fit the drained rings; a config where they do not
  // (e.g. two warpgroups at D=128 with 64-key tiles) runs unsplit only.
  static constexpr bool kCanSplit = kPartialBytes <= 2 * Cfg::kStages * static_cast<int>(kKVBytes);
  static_assert(kQBytes % kSw128Align == 0 && kKVBytes % kSw128Align == 0, "every tile starts 1024-aligned");
  static_assert(static_cast<size_t>(kSmemBytes) <= kSdpaMaxSmemPerBlock, "tiles exceed Hopper shared memory");
  static_assert(kSmemBytes <= (1 << 18), "shared addresses fit the 14-bit descriptor field (>> 4)");
  static_assert(kMergeOffset % 16 == 0, "the merge area is read and written as float4");
};

enum Ring : int { kFullK = 0, kFullV = 1, kEmptyK = 2, kEmptyV = 3 };
template <int kStages>
__device__ __forceinline__ uint32_t ring_bar(uint32_t bars, int ring, int index) {
  return bars + (2 + ring * kStages + index % kStages) * kBarBytes;
}
template <int kStages>
__device__ __forceinline__ uint32_t ring_parity(int index) {
  return static_cast<uint32_t>((index / kStages) & 1);
}
__device__ __forceinline__ uint32_t full_q_bar(uint32_t bars) { return bars; }
__device__ __forceinline__ uint32_t empty_q_bar(uint32_t bars) { return bars + kBarBytes; }

// One work item as a block (or a cluster rank) sees it.
struct WorkTile {
  int q_begin, h, b;
  int kt_begin, kt_end;  // this CTA's key tiles
};
// Query tile `q_tile` of (batch, head) `bh`, and this CTA's share of its key tiles.
template <class Cfg, bool kCausal>
__device__ __forceinline__ WorkTile make_work(const Params& prm, int bh, int q_tile, int split, int splits) {
  const SdpaProblem& p = prm.p;
  WorkTile t;
  t.q_begin = q_tile * Cfg::kBlockM;
  t.h = bh % p.heads;
  t.b = bh / p.heads;
  const int n_tiles = sdpa_ceil_div(sdpa_kv_end(t.q_begin, Cfg::kBlockM, p.seq_len, kCausal), Cfg::kBlockN);
  const int share = sdpa_ceil_div(n_tiles, splits);
  t.kt_begin = min(split * share, n_tiles);
  t.kt_end = min(t.kt_begin + share, n_tiles);
  return t;
}

// Item w of the flat order, query tiles of one (batch, head) consecutive and
// in descending order (causal: longest first); s9 runs one block per item.
template <class Cfg, bool kCausal>
__device__ __forceinline__ WorkTile decode_work(const Params& prm, int w, int split, int splits) {
  return make_work<Cfg, kCausal>(prm, w / prm.m_tiles, prm.m_tiles - 1 - w % prm.m_tiles, split, splits);
}

// Causal pairs (persistent configs): a block takes query tiles
// j and m-1-j of one head back to back, a unit whose key tiles sum to about the
// same for every j, so the static stripes balance. Without it, block b's items
// b, b+grid, ... of a head-major, longest-first order are as long as their
// residues mod m_tiles make them: at (2,8,2048,128) causal (16 tiles of 128
// rows a head, 256 items, 132 blocks) block 0 gets 16 + 12 tile-lengths and
// block 11 gets 5 + 1, against a mean of 16.5: the longest block runs 1.7x the
// mean, and s8 measured 342 TFLOP/s there against 582 dense (H100).
template <class Cfg, bool kCausal>
struct WorkOrder {
  static constexpr bool kPairs = Cfg::kPersistent && kCausal;

  // Units the blocks stripe over: items, or pairs of items (a middle tile alone).
  __host__ __device__ static int units(const Params& prm) {
    return kPairs ? sdpa_ceil_div(prm.m_tiles, 2) * prm.p.heads * prm.p.batch : prm.work_items;
  }

  // body(tile, local) for each item of this block in order; local counts them
  // (the Q buffer's phase). Query tiles of one (batch, head) are consecutive
  // units: blocks running at the same time share that head's K/V in L2 (items
  // spread over all heads streamed 4x more DRAM traffic at (4,16,4096,128) and
  // lost 15%). Within a head the tiles go in descending order: causal longest first.
  template <class Body>
  __device__ __forceinline__ static void for_each(const Params& prm, int split, int splits, Body&& body) {
    const int first = Cfg::kPersistent ? static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x) / splits;
    const int stride = Cfg::kPersistent ? static_cast<int>(gridDim.x) : prm.work_items;
    int local = 0;
    if constexpr (kPairs) {
      // Step k: unit first + (k / 2) * stride, its longer tile first. One call
      // site: the body (the whole main loop) is inlined once, and only k and
      // local stay live across it (a second call site spilled at the entry cap).
      const int pairs = sdpa_ceil_div(prm.m_tiles, 2);
      for (int k = 0;; ++k) {
        const int u = first + (k >> 1) * stride;
        if (u >= units(prm)) break;
        const int shorter = u % pairs, longer = prm.m_tiles - 1 - shorter;
        if ((k & 1) && shorter == longer) continue;  // the middle tile of an odd count is a unit alone
        body(make_work<Cfg, kCausal>(prm, u / pairs, (k & 1) ? shorter : longer, split, splits), local++);
      }
    } else {
      for (int w = first; w < prm.work_items; w += stride) body(decode_work<Cfg, kCausal>(prm, w, split, splits), local++);
    }
  }
};

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
  if constexpr (kPdl) grid_dependency_wait();  // Q, K, V may be the previous kernel's output
  WS_STAMP_IF(true, kProducerGo);
  int ring = 0;  // K/V tiles issued so far: the ring position carries across work items
  WorkOrder<Cfg, kCausal>::for_each(prm, split, splits, [&](const WorkTile& wt, int local) {
    if (local > 0) mbarrier_wait(empty_q_bar(bars), (local - 1) & 1);  // the epilogue is done with Q
    WS_STAMP_IF(true, kItemDecoded);
    tma_load_tile<Cfg::kBlockM, kBlocks>(s_base + L::kQOffset, &prm.q_map, full_q_bar(bars), wt.q_begin, wt.h, wt.b);
    WS_STAMP_IF(true, kQIssued);
    for (int n = wt.kt_begin; n < wt.kt_end; ++n, ++ring) {
      const uint32_t freed = ring_parity<kStages>(ring) ^ 1;  // a fresh buffer counts as freed
      const uint32_t slot = (ring % kStages) * L::kKVBytes;
      mbarrier_wait(ring_bar<kStages>(bars, kEmptyK, ring), freed);
      tma_load_tile<Cfg::kBlockN, kBlocks>(s_base + L::kKOffset + slot, &prm.k_map,
                                           ring_bar<kStages>(bars, kFullK, ring), n * Cfg::kBlockN, wt.h, wt.b);
      mbarrier_wait(ring_bar<kStages>(bars, kEmptyV, ring), freed);
      tma_load_tile<Cfg::kBlockN, kBlocks>(s_base + L::kVOffset + slot, &prm.v_map,
                                           ring_bar<kStages>(bars, kFullV, ring), n * Cfg::kBlockN, wt.h, wt.b);
    }
  });
  WS_STAMP_IF(true, kLoadsIssued);
}

// Named barriers (0 is __syncthreads): the pingpong turn of consumer warpgroup
// c is barrier kTurnBarrier0 + c; kConsumersDone joins all consumer warps.
constexpr int kTurnBarrier0 = 1;
constexpr int kConsumersDone = 3;
constexpr int kKeySplitMerge = kConsumersDone + 1;  // key split: warpgroup 1's partial is in shared memory
__device__ __forceinline__ void bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
struct Consumer {
  using L = Layout<T, D, Cfg>;
  using Tile = WgAttentionTile<T, D, Cfg::kBlockN, kCausal, kScalePositive, kRescaleThresholdOf<D>>;
  static constexpr int kStages = Cfg::kStages;
  static constexpr int kBlockN = Cfg::kBlockN;
  static constexpr int kTurnThreads = 2 * kWarpgroupThreads;  // both consumer warpgroups

  const Params& prm;
  uint32_t s_base, bars;
  unsigned char* smem;
  int cwg, ctid, warp_in_wg, lane;
  Tile tile;

  __device__ __forceinline__ Consumer(const Params& prm_, uint32_t s_base_, unsigned char* smem_, int cwg_)
      : prm(prm_), s_base(s_base_), bars(s_base_ + L::kBarOffset), smem(smem_), cwg(cwg_) {
    ctid = static_cast<int>(threadIdx.x) - kWarpgroupThreads;
    warp_in_wg = (ctid % kWarpgroupThreads) / kWarpSize;
    lane = ctid % kWarpSize;
  }

  // This warpgroup's first query row within the block's tile.
  __device__ __forceinline__ int wg_row0() const { return Cfg::kKeySplit ? 0 : cwg * kWgmmaM; }
  __device__ __forceinline__ void turn_begin() const {
    if constexpr (Cfg::kPingpong) bar_sync(kTurnBarrier0 + cwg, kTurnThreads);
  }
  __device__ __forceinline__ void turn_end() const {
    if constexpr (Cfg::kPingpong) bar_arrive(kTurnBarrier0 + (1 - cwg), kTurnThreads);
  }
  __device__ __forceinline__ void wait_full(int ring, int index) const {
    mbarrier_wait(ring_bar<kStages>(bars, ring, index), ring_parity<kStages>(index));
  }
  // A buffer is free once every consumer warp's wgmma reading it has completed.
  __device__ __forceinline__ void release(uint32_t bar) const {
    __syncwarp();
    if (lane == 0) mbarrier_arrive(bar);
  }
  __device__ __forceinline__ uint64_t desc_q() const {
    return make_desc_kmajor(s_base + L::kQOffset + wg_row0() * kSw128RowBytes);
  }
  __device__ __forceinline__ uint64_t desc_k(int index) const {
    return make_desc_kmajor(s_base + L::kKOffset + (index % kStages) * L::kKVBytes);
  }
  __device__ __forceinline__ uint64_t desc_v(int index) const {
    return make_desc_mnmajor(s_base + L::kVOffset + (index % kStages) * L::kKVBytes, kBlockN * kSw128RowBytes);
  }

  // Tile j of the item sits at ring index ring + j. The first tile: S only.
  // A warpgroup with no tile still takes the turn. The wgmma issue and its
  // wait stay in one branch: split across a merge point, ptxas cannot prove
  // the accumulators idle and serializes every wgmma of the kernel (C7514).
  __device__ __forceinline__ void first_tile(int ring, int key0, bool active) {
    if (!active) {
      turn_begin();
      turn_end();
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
    wgmma_wait<0>();
    fence_regs(tile.s_acc);
    release(ring_bar<kStages>(bars, kEmptyK, ring));
    tile.softmax(key0, prm.p.seq_len);
    tile.pack_p();
  }
  // S(idx) and P.V of this warpgroup's previous tile (ring index idx - kRingStride)
  // issued back to back; softmax(idx) under the P.V.
  __device__ __forceinline__ void middle_tile(int idx, int key0) {
    if constexpr (Cfg::kPingpong && !kRescaleInTurn) {  // the other warpgroup's GEMMs cover it
      fence_regs(tile.o_acc);
      tile.rescale_o();
    }
    if constexpr (!kWaitKInTurn) wait_full(kFullK, idx);  // FlashAttention-3 waits before its turn
    turn_begin();
    if constexpr (kWaitKInTurn) wait_full(kFullK, idx);
    fence_regs(tile.s_acc);
    fence_regs(tile.p_frag);
    fence_regs(tile.o_acc);
    wgmma_fence();  // p_frag (and a rescaled o_acc) were written by ordinary instructions
    tile.template issue_qk<Cfg::kBlockM>(desc_q(), desc_k(idx));
    wgmma_commit();
    if constexpr (!Cfg::kPingpong || kRescaleInTurn) {  // under S(idx) on the tensor cores
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
    wgmma_wait<1>();  // S(idx) done; P(idx-1).V(idx-1) may still run
    fence_regs(tile.s_acc);
    release(ring_bar<kStages>(bars, kEmptyK, idx));
    tile.softmax(key0, prm.p.seq_len);
    schedule_boundary(prm.p.seq_len < 0);  // keep the wait below the softmax (sdpa_wgmma.cuh)
    wgmma_wait<0>();
    fence_regs(tile.o_acc);
    fence_regs(tile.p_frag);
    release(ring_bar<kStages>(bars, kEmptyV, prev));
    tile.pack_p();
  }
  __device__ __forceinline__ void last_pv(int idx) {
    fence_regs(tile.o_acc);
    tile.rescale_o();
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
    release(ring_bar<kStages>(bars, kEmptyV, idx));
  }

  // One work item's key tiles; returns how many ring slots it consumed. Both
  // warpgroups take (tiles + 1) pingpong turns per item, whatever they compute.
  __device__ __forceinline__ int mainloop(const WorkTile& wt, int ring) {
    if constexpr (Cfg::kKeySplit) return mainloop_key_split(wt, ring);
    const int S = prm.p.seq_len;
    const int wg_q0 = wt.q_begin + wg_row0();
    const int needed = wg_q0 < S ? sdpa_ceil_div(sdpa_kv_end(wg_q0, kWgmmaM, S, kCausal), kBlockN) : 0;
    const int tiles = wt.kt_end - wt.kt_begin;
    const int mine = max(0, min(wt.kt_end, needed) - wt.kt_begin);
    tile.init(prm.p.softmax_scale, wg_q0 + warp_in_wg * Tile::kWarpRows, lane);
    first_tile(ring, wt.kt_begin * kBlockN, mine > 0);
    WS_STAMP_IF(ctid == 0, kFirstTile);
    for (int j = 1; j < mine; ++j) middle_tile(ring + j, (wt.kt_begin + j) * kBlockN);
    if (mine > 0) last_pv(ring + mine - 1);
    WS_STAMP_IF(ctid == 0, kMainloop);
    WS_STAMP_IF(ctid == kWarpgroupThreads, kPeerMainloop);
    // Tiles only the other warpgroup needs: free them in order once landed.
    for (int j = mine; j < tiles; ++j) {
      turn_begin();
      turn_end();
      wait_full(kFullK, ring + j);
      release(ring_bar<kStages>(bars, kEmptyK, ring + j));
      wait_full(kFullV, ring + j);
      release(ring_bar<kStages>(bars, kEmptyV, ring + j));
    }
    return tiles;
  }
  // Key split: both warpgroups need every tile of the item (same rows); this
  // one takes ring indices cwg, cwg + 2, ... A warpgroup left with none (a
  // one-tile item) keeps init's O = 0, max = -inf, sum = 0: it weighs 0 in
  // the merge. Every row sees key kt_begin * kBlockN of each tile it takes
  // (tile starts are <= q_begin and < seq_len), so no row is -inf after one.
  __device__ __forceinline__ int mainloop_key_split(const WorkTile& wt, int ring) {
    constexpr int kStride = Cfg::kRingStride;
    const int tiles = wt.kt_end - wt.kt_begin;
    const int mine = max(0, sdpa_ceil_div(tiles - cwg, kStride));
    tile.init(prm.p.softmax_scale, wt.q_begin + warp_in_wg * Tile::kWarpRows, lane);
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

  __device__ __forceinline__ void store(const WorkTile& wt, const float (&l)[Tile::kRowsPerThread]) {
    const SdpaProblem& p = prm.p;
    if (wt.q_begin + wg_row0() < p.seq_len) {
      T* o_g = sdpa_head_ptr(static_cast<T*>(p.out), p.out_strides, wt.b, wt.h) +
               static_cast<int64_t>(wt.q_begin) * p.out_strides.seq;
      int row_base = wg_row0() + warp_in_wg * Tile::kWarpRows;
      if constexpr (kLateEpilogueAddresses) asm volatile("" : "+r"(row_base));
      tile.template store_o<Cfg::kBlockM>(smem + L::kQOffset, row_base, o_g, p.out_strides.seq,
                                          p.seq_len - wt.q_begin, lane, l);
    }
    fence_proxy_async_shared();  // the staging writes precede the next Q's TMA overwrite
    release(empty_q_bar(bars));
    WS_STAMP_IF(ctid % kWarpgroupThreads == 0 && wg_row0() == 0, kStored);
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
      store(wt, l);
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
      release(empty_q_bar(bars));
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
    store(wt, l);
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
      if (cwg == 1) bar_arrive(kTurnBarrier0, kTurnThreads);  // warpgroup 0 takes the first turn
    }
    int ring = 0;
    WorkOrder<Cfg, kCausal>::for_each(prm, split, splits, [&](const WorkTile& wt, int local) {
      mbarrier_wait(full_q_bar(bars), local & 1);
      WS_STAMP_IF(ctid == 0, kQLanded);
      ring += mainloop(wt, ring);
      if constexpr (kPdlLateTrigger) grid_launch_dependents();
      if constexpr (Cfg::kKeySplit) {
        merge_and_store(wt);
      } else if (L::kCanSplit && splits > 1) {
        combine_and_store(wt, split, splits);
      } else {
        float l[Tile::kRowsPerThread];
        tile.reduced_row_sums(l);
        store(wt, l);
      }
    });
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
    mbarrier_init(full_q_bar(bars), 1);  // the producer's expect_tx arrival
    mbarrier_init(empty_q_bar(bars), Cfg::kConsumerWarps);
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbarrier_init(ring_bar<Cfg::kStages>(bars, kFullK, s), 1);
      mbarrier_init(ring_bar<Cfg::kStages>(bars, kFullV, s), 1);
      mbarrier_init(ring_bar<Cfg::kStages>(bars, kEmptyK, s), Cfg::kRingReleasers);
      mbarrier_init(ring_bar<Cfg::kStages>(bars, kEmptyV, s), Cfg::kRingReleasers);
    }
    fence_mbarrier_init();
  }
  __syncthreads();  // the last block-wide barrier: roles diverge below
  WS_STAMP_IF(threadIdx.x == 0, kPrologue);
  if constexpr (kPdlEarlyTrigger) grid_launch_dependents();
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
    if constexpr (kPdl) grid_dependency_wait();
    WS_STAMP_IF(threadIdx.x == kWarpgroupThreads, kConsumerGo);
    Consumer<T, D, Cfg, kCausal, kScalePositive> consumer(prm, s_base, smem, wg - 1);
    consumer.run(split, splits);
  }
}

// ------------------------------------------------------------------ host --
inline int sm_count() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return 0;
  return sms;
}

// One launch of `kernel` in thread-block clusters of `cluster_x` blocks (kPlainGrid: no cluster
// attribute at all), with programmatic stream serialization when the build asks for PDL (WS_PDL).
constexpr unsigned kPlainGrid = 0;
template <typename... KernelParams, typename... Args>
cudaError_t launch_kernel(void (*kernel)(KernelParams...), dim3 grid, int threads, size_t smem, unsigned cluster_x,
                          cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attrs[2] = {};
  unsigned count = 0;
  if (cluster_x != kPlainGrid) {
    attrs[count].id = cudaLaunchAttributeClusterDimension;
    attrs[count++].val.clusterDim = {cluster_x, 1, 1};
  }
  if constexpr (kPdl) {
    attrs[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  config.attrs = attrs;
  config.numAttrs = count;
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, static_cast<KernelParams>(args)...);
  return err != cudaSuccess ? err : cudaGetLastError();
}

template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
cudaError_t launch_instance(const Params& prm, int splits, cudaStream_t stream) {
  constexpr size_t smem = Layout<T, D, Cfg>::kSmemBytes;
  auto kernel = warpspec_kernel<T, D, Cfg, kCausal, kScalePositive>;
  const cudaError_t err = sdpa_set_smem(kernel, smem);
  if (err != cudaSuccess) return err;
  const int blocks = Cfg::kPersistent ? min(WorkOrder<Cfg, kCausal>::units(prm), sm_count() * Cfg::kMinBlocks)
                                      : prm.work_items * splits;
  return launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), Cfg::kThreads, smem, static_cast<unsigned>(splits),
                       stream, prm);
}

// Tensor maps, work count and the (causal, scale sign) instance for one config.
// splits: CTAs per work item (1 = no split; ignored by persistent configs).
template <typename T, int D, class Cfg>
cudaError_t launch(const SdpaProblem& p, int splits, cudaStream_t stream) {
  if (splits < 1 || splits > kMaxClusterSplits) return cudaErrorInvalidValue;
  if (splits > 1 && (Cfg::kPersistent || Cfg::kKeySplit || !Layout<T, D, Cfg>::kCanSplit)) return cudaErrorInvalidValue;
  Params prm{};
  prm.p = p;
  prm.m_tiles = sdpa_ceil_div(p.seq_len, Cfg::kBlockM);
  prm.work_items = prm.m_tiles * p.heads * p.batch;
  const CUtensorMapDataType dtype = tensor_map_dtype(p.dtype);
  cudaError_t err = encode_tensor_map(&prm.q_map, p.q, p.q_strides, p, dtype, Cfg::kBlockM);
  if (err == cudaSuccess) err = encode_tensor_map(&prm.k_map, p.k, p.k_strides, p, dtype, Cfg::kBlockN);
  if (err == cudaSuccess) err = encode_tensor_map(&prm.v_map, p.v, p.v_strides, p, dtype, Cfg::kBlockN);
  if (err != cudaSuccess) return err;
  const bool positive = p.softmax_scale > 0.0f;
  if (p.causal)
    return positive ? launch_instance<T, D, Cfg, true, true>(prm, splits, stream)
                    : launch_instance<T, D, Cfg, true, false>(prm, splits, stream);
  return positive ? launch_instance<T, D, Cfg, false, true>(prm, splits, stream)
                  : launch_instance<T, D, Cfg, false, false>(prm, splits, stream);
}

// sdpa_forward's common front: validation, then (dtype, head_dim) dispatch to
// pick(tag, hd), which launches.
template <class Pick>
cudaError_t forward(const SdpaProblem* problem, Pick&& pick) {
  if (problem == nullptr) return cudaErrorInvalidValue;
  const cudaError_t ok = sdpa_check_problem(*problem);
  if (ok != cudaSuccess) return ok;
  if (sdpa_problem_is_empty(*problem)) return cudaSuccess;
  // O is written with 16-byte stores; Q/K/V are checked by the tensor maps.
  if (!sdpa_problem_vec16_ok(*problem)) return cudaErrorInvalidValue;
  return sdpa_dispatch(*problem, pick);
}

}  // namespace sdpa_warpspec

// The three exports of sdpa_api.h for a stage that runs one config template
// CONFIG<D> unsplit (s6, s7); CONFIG_STRING names its knobs. sdpa_export.cuh's
// footprint query wants smem_bytes<T, D>() on one type: SdpaWarpspecSmemOf.
#define SDPA_WARPSPEC_EXPORT(CONFIG, CONFIG_STRING)                                                   \
  namespace {                                                                                        \
  struct SdpaWarpspecSmemOf {                                                                        \
    template <class T, int D>                                                                        \
    static constexpr size_t smem_bytes() {                                                           \
      return sdpa_warpspec::Layout<T, D, CONFIG<D>>::kSmemBytes;                                     \
    }                                                                                                \
  };                                                                                                 \
  }                                                                                                  \
  extern "C" cudaError_t sdpa_forward(const SdpaProblem* problem, cudaStream_t stream) {             \
    constexpr int kNoSplit = 1;                                                                      \
    return sdpa_warpspec::forward(problem, [&](auto tag, auto hd) {                                  \
      using T = typename decltype(tag)::type;                                                        \
      constexpr int D = decltype(hd)::value;                                                         \
      return sdpa_warpspec::launch<T, D, CONFIG<D>>(*problem, kNoSplit, stream);                     \
    });                                                                                              \
  }                                                                                                  \
  extern "C" const char* sdpa_stage_config() { return CONFIG_STRING; }                               \
  extern "C" int64_t sdpa_dynamic_shared_memory_bytes(int32_t head_dim, int32_t dtype) {             \
    return sdpa_stage_smem_bytes<SdpaWarpspecSmemOf>(head_dim, dtype);                               \
  }
