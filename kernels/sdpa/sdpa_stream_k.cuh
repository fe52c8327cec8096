// sdpa_stream_k.cuh -- WS_STREAM_K: the last items of a persistent launch dealt as ranges of
// key tiles (the stream-K tail of CUTLASS's data-parallel + stream-K hybrid): the launch's
// tail parameters, the partial slots and their flags. sdpa_warpspec_config.cuh includes it before
// Params and walks the ranges (stream_k_piece); sdpa_warpspec.cuh parks and folds the partials.
//
// A persistent non-causal launch of I equal items on G blocks runs ceil(I / G) items on its
// busiest block: at SDXL self-attention (640 items of 32 key tiles on 132 SMs) 5 where the mean
// is 4.85 (3% of the launch idles at its end), at BERT-base 512 (1536 items of 4) 12 against
// 11.64. With the knob, the stage's own kernel runs the whole rounds (its code untouched: a
// first build that dealt the tail inside it moved ptxas's schedule of its main loop and lost
// 5-15% everywhere), and a second kernel, StreamKTail<Config>, launched behind it with
// programmatic dependent launch, takes the items left (fewer than G) as one list of key tiles
// cut into G contiguous ranges, one a block. A piece that starts past its item's first key tile
// parks its partial (unnormalised fp32 O, row max and row sum) in global memory and raises its
// block's flag; the piece from the item's first key tile, last in the block before, waits for
// the flags of the blocks whose ranges start inside the item, folds their partials in and
// stores. The parked pieces come first in their blocks, so the waits are short.
//
// One set of partial slots per loaded module (static device memory, kStreamKSlots blocks):
// two stream-K launches of one stage must not run at once (on two streams). The flag is
// reset by its reader, so a launch leaves every flag as it found it, CUDA-graph replays included;
// the next launch writes only after griddepcontrol.wait (WS_PDL) or stream order.
#pragma once

#include <climits>
#include <cstdint>

#include "sdpa_common.cuh"
#include "sdpa_wgmma.cuh"

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

constexpr int kStreamKWgs = 2;  // consumer warpgroups a partial slot holds

// A launch's tail (Params::stream_k): items from `begin` on are dealt as ranges of key tiles.
struct StreamKTailParams {
  int begin;      // the first item of the tail (work_items: no tail)
  int rounds;     // striped rounds of this kernel before its range of the tail (0: the tail kernel)
  int key_tiles;  // every item's key tiles
};

// Blocks a stream-K launch may have (one parked tail each); a launch with more runs striped.
constexpr int kStreamKSlots = kStreamK ? 192 : 1;
constexpr int kStreamKMaxHeadDim = 64;  // WS_STREAM_K=1 deals tails at head_dim 64 (sdpa_persistent_split.cuh)
// One warpgroup's parked O: 64 rows x head_dim fp32 as thread-fastest float4s.
constexpr int kStreamKOFloat4s = sdpa_wgmma::kWgmmaM * kStreamKMaxHeadDim / 4;
static __device__ float4 g_stream_k_o[kStreamKSlots * kStreamKWgs * kStreamKOFloat4s];
static __device__ float4 g_stream_k_stats[kStreamKSlots * kStreamKWgs * sdpa_wgmma::kWarpgroupThreads];  // (max, max, sum, sum)
static __device__ int g_stream_k_ready[kStreamKSlots * kStreamKWgs];

// The tail of a launch of `items` items of `key_tiles` on `blocks` blocks: the items past the whole
// rounds (fewer than `blocks`), dealt by the tail kernel alone (rounds 0). None (begin = items)
// where the items divide evenly, fill less than a round, the launch has more blocks than slots, the
// tail has fewer key tiles than blocks, or its busiest block would not be shorter than one item.
inline StreamKTailParams stream_k_tail(int items, int blocks, int key_tiles) {
  StreamKTailParams tail{items, 0, key_tiles};
  if (!kStreamK || blocks > kStreamKSlots || items <= blocks || items % blocks == 0) return tail;
  const int begin = items / blocks * blocks;
  const long long tail_units = static_cast<long long>(items - begin) * key_tiles;
  if ((tail_units + 1) * blocks > INT_MAX) return tail;  // the device's range math is 32-bit
  // every block's range at least one key tile (a head folds the part of each block after it whose
  // range starts inside its item), and the busiest shorter than a whole item
  if (tail_units < blocks || (tail_units + blocks - 1) / blocks >= key_tiles) return tail;
  tail.begin = begin;
  return tail;
}

// A warpgroup's slot in the partial arrays.
__device__ __forceinline__ int stream_k_slot(int block, int cwg) { return block * kStreamKWgs + cwg; }

// After every thread of the warpgroup has parked its partial: the flag, released at GPU scope
// (cumulative over the barrier, as CUTLASS's generic barrier does).
__device__ __forceinline__ void stream_k_publish(int slot, int t, int barrier) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(barrier), "n"(sdpa_wgmma::kWarpgroupThreads) : "memory");
  if (t == 0) asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(g_stream_k_ready + slot), "r"(1) : "memory");
}
// Before any thread of the warpgroup reads the peer's partial: its flag, acquired by every warp,
// then reset once all four have seen it. Each warp polls with lane 0's answer (a shuffle), so the
// loop is warp-uniform, as the work loop must be (stream_k_piece_warp).
__device__ __forceinline__ void stream_k_await(int slot, int t, int barrier) {
  int ready = 0;
  for (;;) {
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(ready) : "l"(g_stream_k_ready + slot) : "memory");
    if (__shfl_sync(0xffffffffu, ready, 0) != 0) break;
    __nanosleep(64);
  }
  asm volatile("bar.sync %0, %1;\n" ::"r"(barrier), "n"(sdpa_wgmma::kWarpgroupThreads) : "memory");
  if (t == 0) asm volatile("st.relaxed.gpu.global.b32 [%0], %1;\n" ::"l"(g_stream_k_ready + slot), "r"(0) : "memory");
}

}  // namespace sdpa_warpspec
