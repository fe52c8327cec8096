// fp8/vt_transpose.cuh -- V -> Vt in shared memory for the FP8 stage's P.V (fp8 wgmma reads B
// K-major only): the swizzled offsets of TMA's tiles, one lane's constant part of a 16-key unit
// (VtLane) and a whole key tile by a few warps (transpose_v_tile: ldmatrix.trans, byte
// permutes, stmatrix), keys in fp8_key_of's order (fp8/wgmma8.cuh). The producer warpgroup's
// warps 1-3 run it (fp8/producer.cuh, transpose_v).
#pragma once

#include <cstdint>

#include "../sdpa_mma.cuh"
#include "wgmma8.cuh"

namespace sdpa_wgmma {

// A 1024-byte-aligned tile of kRowBytes-byte rows, as TMA's
// CU_TENSOR_MAP_SWIZZLE_128B / _64B writes it and the descriptors read it,
// holds byte b of row r at r * kRowBytes + (b ^ 16 * swizzle_of_row(r)): the
// 16-byte chunk index XOR the offset's bits 7 and up, i.e. r % 8 for 128-byte
// rows and (r / 2) % 4 for 64-byte rows.
template <int kRowBytes>
__host__ __device__ constexpr uint32_t swizzle_of_row(uint32_t r) {
  static_assert(kRowBytes == 64 || kRowBytes == 128, "rows of one 64- or 128-byte swizzle row");
  return kRowBytes == 128 ? r % 8 : (r / 2) % 4;
}

constexpr int kVtUnitKeys = kFp8KeyGroup / 2;  // fp8_key_of permutes each half of a group within itself
constexpr int kVtUnitChunks = 2;               // 16-byte chunks of D per unit (32 bytes)
constexpr uint32_t kEvenRowBytes = 0x6420u;    // __byte_perm selectors, see VtLane
constexpr uint32_t kOddRowBytes = 0x7531u;

// A lane's constant part of transposing a unit of 16 keys x 32 bytes of D of a V
// tile (keys x D, D-byte rows, as TMA lands it) into 32 rows (d) x 16 columns of
// the Vt tile (rows of kVtChunk keys per chunk), columns in fp8_key_of's order.
// ldmatrix.trans of the 8x8 b16 tiles {keys 0-7 | 8-15} x {bytes 0-15 | 16-31}
// gives lane (g = lane / 4, t = lane % 4), per tile, the bytes V[2t][2g],
// V[2t][2g+1], V[2t+1][2g], V[2t+1][2g+1] (d relative to the tile's chunk).
// Of the tiles of keys 0-7 and 8-15, selector 0x6420 gathers row 2g's keys 2t,
// 2t+1, 8+2t, 9+2t = fp8_key_of(4t .. 4t+3), and 0x7531 row 2g+1's: exactly the
// word stmatrix takes from this lane for columns 4t .. 4t+3. Rows 2g and 2g+1
// swap stored tiles for g >= 4, so each stored tile's eight rows fall in eight
// distinct 16-byte bank groups (one wavefront) with either Vt swizzle; the
// loaded tiles' rows are eight keys, conflict-free by V's own swizzle.
// Unit (key0, chunk0), key0 % 16 = 0, chunk0 even, then reads at
//   v_tile + key0 * D + src + ((chunk0 * 16) ^ src_xor)
// and writes at
//   vt_tile + (key0 / kVtChunk) * chunk_stride + chunk0 * 16 * kVtChunk + dst + ((key0 % kVtChunk) ^ dst_xor),
// which is the swizzled offset of the rows and bytes above (the XOR distributes
// because the row bases are multiples of 16 and chunk0 is even).
template <int D, int kVtChunk>
struct VtLane {
  static constexpr int kTileRows = 8;
  uint32_t src, src_xor, dst, dst_xor, first, second;
  __device__ __forceinline__ explicit VtLane(int lane) {
    const uint32_t tile = lane / kTileRows, row = lane % kTileRows;  // the tile row this lane addresses
    const uint32_t key = kTileRows * (tile % 2) + row, chunk = tile / 2;
    src = key * D;
    src_xor = (chunk ^ swizzle_of_row<D>(key)) * kChunkBytes;
    const bool row_swapped = row >= kTileRows / 2;
    const uint32_t vt_row = 2 * row + (((tile % 2 == 0) == row_swapped) ? 1 : 0);  // d - 16 (chunk0 + chunk)
    dst = chunk * kChunkBytes * kVtChunk + vt_row * kVtChunk;
    dst_xor = swizzle_of_row<kVtChunk>(vt_row) * kChunkBytes;
    const bool swapped = (lane / 4) >= kTileRows / 2;  // this lane's g >= 4
    first = swapped ? kOddRowBytes : kEvenRowBytes;
    second = swapped ? kEvenRowBytes : kOddRowBytes;
  }
};

// A whole kBlockN x D tile by kWarps warps: warp `warp` takes every kWarps-th
// 16 keys, all of D, up to kMaxBatch units' loads in flight before their stores.
// The lane's constants are made per tile: held across the caller's loops over
// tiles and work items, they cost a persistent causal build a spilled register
// (log v10). An empty asm that "rewrites" the lane id keeps ptxas from hoisting them.
template <int D, int kBlockN, int kVtChunk, int kWarps, int kMaxBatch>
__device__ __forceinline__ void transpose_v_tile(uint32_t v_tile, uint32_t vt_tile, uint32_t vt_chunk_stride, int warp,
                                                 int lane_id) {
  asm volatile("" : "+r"(lane_id));
  const VtLane<D, kVtChunk> lane(lane_id);
  constexpr int kKeyUnits = kBlockN / kVtUnitKeys;
  constexpr int kDUnits = D / (kVtUnitChunks * kChunkBytes);
  static_assert(kBlockN % kVtUnitKeys == 0 && kDUnits * kVtUnitChunks * kChunkBytes == D, "whole units");
  static_assert(kVtChunk % kVtUnitKeys == 0, "a unit's 16 columns stay in one Vt chunk");
  constexpr int kBatch = kMaxBatch < kDUnits ? kMaxBatch : kDUnits;
  static_assert(kBatch >= 1 && kDUnits % kBatch == 0, "batches of whole units of one 16-key row");
#pragma unroll 1  // a loop: unrolled, its addresses outgrow the producer warpgroup's registers
  for (int ku = warp; ku < kKeyUnits; ku += kWarps) {
    const uint32_t key0 = ku * kVtUnitKeys;
    const uint32_t src = v_tile + key0 * D + lane.src;
    const uint32_t dst =
        vt_tile + (key0 / kVtChunk) * vt_chunk_stride + lane.dst + ((key0 % kVtChunk) ^ lane.dst_xor);
#pragma unroll
    for (int du = 0; du < kDUnits; du += kBatch) {
      uint32_t r[kBatch][4];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const uint32_t chunk0 = kVtUnitChunks * (du + b);
        sdpa_mma::ldmatrix_x4_trans(r[b], src + ((chunk0 * kChunkBytes) ^ lane.src_xor));
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const uint32_t chunk0 = kVtUnitChunks * (du + b);
        const uint32_t w[4] = {__byte_perm(r[b][0], r[b][1], lane.first), __byte_perm(r[b][0], r[b][1], lane.second),
                               __byte_perm(r[b][2], r[b][3], lane.first), __byte_perm(r[b][2], r[b][3], lane.second)};
        sdpa_mma::stmatrix_x4(dst + chunk0 * kChunkBytes * kVtChunk, w);
      }
    }
  }
}

}  // namespace sdpa_wgmma
