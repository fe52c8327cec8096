// sdpa_stream_k.cuh -- WS_STREAM_K: the last items of a persistent launch dealt as ranges of
// key tiles (the stream-K tail of CUTLASS's data-parallel + stream-K hybrid), included by
// sdpa_warpspec_config.cuh before the work order.
//
// A persistent non-causal launch of I equal items on G blocks runs ceil(I / G) items on its
// busiest block: at SDXL self-attention (640 items of 32 key tiles on 132 SMs) 5 where the mean
// is 4.85 (3% of the launch idles at its end), at BERT-base 512 (1536 items of 4) 12 against
// 11.64. With the knob, whole rounds run striped as before but the last full one; the items
// left (between G and 2G of them) are one list of key tiles, cut into G contiguous ranges,
// one a block. Every range covers at least one item's keys, so an item splits at most once,
// between neighbouring blocks: block b + 1 takes its tail (keys from the cut to the end) first
// in its range, parks that partial (unnormalised fp32 O, row max and row sum) in global memory
// and raises its flag; block b takes the head (keys from 0) last in its range, waits for the
// flag, folds the partial in and stores. The head ends last, so the wait is at most short.
//
// One set of partial slots per loaded module (static device memory, kStreamKSlots blocks):
// two stream-K launches of one stage must not run at once (on two streams). The flag is
// reset by its reader, so a launch leaves every flag as it found it, CUDA-graph replays included;
// the next launch writes only after griddepcontrol.wait (WS_PDL) or stream order.
#pragma once

#ifndef WS_STREAM_K
#define WS_STREAM_K 0
#endif
static_assert(WS_STREAM_K == 0 || WS_STREAM_K == 1, "WS_STREAM_K: 0 (striped items) or 1 (a stream-K tail)");

namespace sdpa_warpspec {

constexpr bool kStreamK = WS_STREAM_K != 0;

// Which part of its work item a WorkTile is.
enum Piece : int {
  kWholeItem = 0,
  kItemHead = 1,  // keys from 0 up to the cut: its block folds the tail in and stores
  kItemTail = 2,  // keys from the cut to the end: its block parks the partial
};

// The configs that take the tail (StreamKTail<Config> in sdpa_warpspec_config.cuh), on non-causal
// launches: causal items differ in length, and the causal orders balance them already.
template <class Cfg, bool kCausal>
constexpr bool kStreamKOrder = Cfg::kStreamKTail && !kCausal;

// Blocks a stream-K launch may have (one parked tail each); a launch with more runs striped.
constexpr int kStreamKSlots = kStreamK ? 192 : 1;
constexpr int kStreamKMaxHeadDim = 64;  // WS_STREAM_K=1 deals tails at head_dim 64 (sdpa_persistent_split.cuh)
// One warpgroup's parked O: 64 rows x head_dim fp32 as thread-fastest float4s.
constexpr int kStreamKOFloat4s = kWgmmaM * kStreamKMaxHeadDim / 4;
static __device__ float4 g_stream_k_o[kStreamKSlots * kStreamKWgs * kStreamKOFloat4s];
static __device__ float4 g_stream_k_stats[kStreamKSlots * kStreamKWgs * kWarpgroupThreads];  // (max, max, sum, sum)
static __device__ int g_stream_k_ready[kStreamKSlots * kStreamKWgs];

// The first item of the tail: whole rounds but the last full one run striped, so the tail holds
// between G and 2G items and every range covers an item's keys. `items` (no tail) where the items
// divide evenly, fill at most one round, the launch has more blocks than slots, or the busiest
// block's key tiles would not drop (ViT's items of two key tiles: 1536 on 132 blocks run 24 either way).
inline int stream_k_tail_begin(int items, int blocks, int key_tiles) {
  if (!kStreamK || blocks > kStreamKSlots || items <= blocks || items % blocks == 0) return items;
  const int tail_begin = (items / blocks - 1) * blocks;
  const long long tail_units = static_cast<long long>(items - tail_begin) * key_tiles;
  const long long busiest = static_cast<long long>(tail_begin / blocks) * key_tiles + (tail_units + blocks - 1) / blocks;
  const long long striped = static_cast<long long>(sdpa_ceil_div(items, blocks)) * key_tiles;
  return busiest < striped ? tail_begin : items;
}

// Step k of block `first` of `blocks`: the striped item first + k * blocks before the tail, then
// the pieces of the block's range of the tail's key tiles in order. False past the last.
template <class Cfg>
__device__ __forceinline__ bool stream_k_step(const Params& prm, int first, int blocks, int k, WorkTile& wt) {
  const int striped = first + k * blocks;
  if (striped < prm.tail_begin) {
    wt = decode_work<Cfg, false>(prm, striped, 0, 1);
    return true;
  }
  const int tail_items = prm.work_items - prm.tail_begin;
  if (tail_items <= 0) return false;
  const int tiles = prm.item_key_tiles;
  const long long units = static_cast<long long>(tail_items) * tiles;
  const int u0 = static_cast<int>(units * first / blocks);
  const int u1 = static_cast<int>(units * (first + 1) / blocks);
  const int piece = k - prm.tail_begin / blocks;  // the host makes tail_begin whole rounds
  const int u = piece == 0 ? u0 : (u0 / tiles + piece) * tiles;
  if (u >= u1) return false;
  const int item = u / tiles;
  wt = decode_work<Cfg, false>(prm, prm.tail_begin + item, 0, 1);
  wt.kt_begin = u - item * tiles;
  wt.kt_end = min(tiles, u1 - item * tiles);
  wt.piece = wt.kt_begin > 0 ? kItemTail : (wt.kt_end < tiles ? kItemHead : kWholeItem);
  wt.partner = wt.piece == kItemTail ? first : first + 1;  // a tail parks in its own block's slot
  return true;
}

// A warpgroup's slot in the partial arrays.
__device__ __forceinline__ int stream_k_slot(int block, int cwg) { return block * kStreamKWgs + cwg; }

// After every thread of the warpgroup has parked its partial: the flag, released at GPU scope
// (cumulative over the barrier, as CUTLASS's generic barrier does).
__device__ __forceinline__ void stream_k_publish(int slot, int t, int barrier) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(barrier), "n"(kWarpgroupThreads) : "memory");
  if (t == 0) asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(g_stream_k_ready + slot), "r"(1) : "memory");
}
// Before any thread of the warpgroup reads the peer's partial: its flag, acquired, then reset.
__device__ __forceinline__ void stream_k_await(int slot, int t, int barrier) {
  if (t == 0) {
    int ready = 0;
    for (;;) {
      asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(ready) : "l"(g_stream_k_ready + slot) : "memory");
      if (ready != 0) break;
      __nanosleep(64);
    }
    asm volatile("st.relaxed.gpu.global.b32 [%0], %1;\n" ::"l"(g_stream_k_ready + slot), "r"(0) : "memory");
  }
  asm volatile("bar.sync %0, %1;\n" ::"r"(barrier), "n"(kWarpgroupThreads) : "memory");
}

}  // namespace sdpa_warpspec
