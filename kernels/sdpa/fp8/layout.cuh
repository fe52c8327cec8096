// fp8/layout.cuh -- the FP8 kernel's warp roles, its two extra barrier rings (the raw V ring of
// the in-kernel transpose) and its shared-memory layout (Q, O staging, the K, Vt and raw V
// rings, the barriers).
#pragma once

#include <cstdint>

#include "config.cuh"

namespace sdpa_fp8 {

// kVtInKernel: the producer warpgroup's warp 0 issues the TMA boxes, warps 1-3 transpose V.
constexpr int kTransposeWarps = kWarpgroupWarps - 1;
constexpr int kNoSplit = 1;  // one block (or persistent block) per work item, no split-KV
// The raw V ring's barriers, after sdpa_warpspec's four rings (ring_bar's indexing).
constexpr int kFullVRaw = 4, kEmptyVRaw = 5;

// Shared memory: Q, the O staging tile (output dtype), the K and Vt rings, barriers.
// Q and K are e4m3 (D-byte rows) or, kQkF16, fp16 (D / 64 column blocks of 128-byte rows).
template <int D, class Cfg>
struct Layout {
  static constexpr uint32_t kQBytes = Cfg::kBlockM * D * Cfg::kQkElemBytes;
  static constexpr uint32_t kOBytes = Cfg::kBlockM * D * 2;  // 16-bit output
  static constexpr uint32_t kKBytes = Cfg::kBlockN * D * Cfg::kQkElemBytes;
  static constexpr uint32_t kVtLoadBytes = D * Cfg::kBlockN;  // what TMA writes per tile
  // + the ones / zero rows under each chunk (kRowSumMma), written once at the start
  static constexpr uint32_t kVtBytes = (D + (Cfg::kRowSumMma ? kSumRows : 0)) * Cfg::kBlockN;
  static constexpr int kVtChunk = fp8_vt_chunk_keys(Cfg::kBlockN);  // keys per Vt chunk (one TMA box)
  static constexpr int kVtChunks = Cfg::kBlockN / kVtChunk;
  static constexpr uint32_t kVtChunkStride = kVtBytes / kVtChunks;
  static constexpr uint32_t kVRawBytes = Cfg::kVtInKernel ? Cfg::kBlockN * D : 0;  // V as TMA lands it
  static constexpr int kQOffset = 0;
  static constexpr int kOOffset = kQOffset + kQBytes;
  static constexpr int kKOffset = kOOffset + kOBytes;
  static constexpr int kVOffset = kKOffset + Cfg::kStages * kKBytes;
  static constexpr int kVRawOffset = kVOffset + Cfg::kStages * kVtBytes;
  static constexpr int kBarOffset = kVRawOffset + Cfg::kStages * kVRawBytes;
  static constexpr int kRings = Cfg::kVtInKernel ? 6 : 4;  // + the raw V ring's full and empty barriers
  static constexpr int kBarriers = 2 + kRings * Cfg::kStages;  // full_q, empty_q, the rings
  static constexpr int kSmemBytes = kBarOffset + kBarriers * kBarBytes + kSw128Align;
  static_assert(kQBytes % kSw128Align == 0 && kKBytes % kSw128Align == 0, "every tile starts 1024-aligned");
  static_assert(!Cfg::kVtInKernel || kVtChunkStride % kSw128Align == 0,
                "the transposer's Vt chunks start 1024-aligned (swizzle_of_row)");
  // kQkF16 at head_dim 128 (KiB: Q 32, O 32, per stage K 2 x kBlockN / 8, Vt and raw V kBlockN / 8 each):
  // 192-key tiles x 2 stages need 32 + 32 + 2 * (48 + 24 + 24) = 256 > 227; 128-key x 2 need 192.
  static_assert(!Cfg::kQkF16 || static_cast<size_t>(kSmemBytes) <= kSdpaMaxSmemPerBlock,
                "QK_F16 doubles the Q and K tiles: at head_dim 128 use 128-key tiles (BLOCK_N_D128=128) x 2 stages");
  static_assert(static_cast<size_t>(kSmemBytes) <= kSdpaMaxSmemPerBlock, "tiles exceed Hopper shared memory");
};

}  // namespace sdpa_fp8
