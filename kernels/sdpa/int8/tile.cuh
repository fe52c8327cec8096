// int8/tile.cuh -- one consumer warpgroup's attention math in the INT8 stage: the 8-bit twin of
// sdpa_wgmma_tile.cuh's WgAttentionTile, with its steps and names, so the mainloop and epilogue
// parts run either (Operands<T>::Tile picks it):
//
//   issue_qk(desc_q, desc_k)  S = Q8.K8^T: D/32 s8 wgmma m64n128k32, exact int32 (int8/igmma.cuh)
//   softmax(key0, seq_len)    S as float, times the warpgroup's Q descale, the tile's K descale, the
//                             softmax scale and log2(e); mask, running max, p = 2^(s - max + 8), row sums
//   rescale_o()               O's correction for the P.V about to be issued (int8/pv_accumulation.cuh)
//   pack_p()                  P -> e4m3 A fragments, in fp8_key_of's key order (Vt's keys are stored so)
//   issue_pv(desc_vt)         P8.Vt8: 128/32 e4m3 wgmma m64nDk32, into O over the whole row
//   pv_retired()              nothing: O is the P.V's own accumulator
//   store_o(...)              O * v descale / l + v mean -> staging rows -> 16-byte global stores
//
// The recipe (lib/stagelab/families/sdpa/int8/recipe.py) fixes the blocks: one Q descale per 64 rows
// (a warpgroup's), one K descale per 128-key tile, V per channel less its mean over the keys (added
// back to O: P's rows sum to l), P scaled by 2^8.
#pragma once

#include <cstdint>

#include "../sdpa_common.cuh"
#include "../sdpa_mma.cuh"
#include "igmma.cuh"
#include "pv_accumulation.cuh"

namespace sdpa_int8 {

using namespace sdpa_wgmma;

constexpr int kQBlock = 64;             // rows per Q descale: a consumer warpgroup's (recipe.py Q_BLOCK)
constexpr int kKBlock = 128;            // keys per K descale: one key tile (recipe.py K_BLOCK)
constexpr int kPExp2Offset = 8;         // P = 2^(s - max + 8): a row's largest p is 256, under e4m3's 448
constexpr int kInt8Max = 127;           // the quantizer's codes: -127..127
// The magic-offset scores' exponent addend -kMagic * mul + 8 - max has a magnitude under
// 2 kMagic mul (the scores' own under kMagic: Int8Tile's static_assert), so its rounding is at most
// 2^-24 of that: a bias of every p in a row's tile, which tiles do not share. Held to 2^-10 (a tile's
// weight off by 0.07%, against e4m3 P's 2^-4 per element), mul may reach 2^-10 / (2 kMagic 2^-24),
// about 0.00065. Of the named distributions (1x4x1024, smoothed K, on the CPU) normal (at most 0.00027),
// positive and tiny keep the offset, peaky (0.00058 to 0.002) mostly not; zero_head, outlier, large (to 0.11)
// convert exactly: with the offset everywhere, large failed its budget by up to 8.4x (H200, 2026-11-29).
constexpr float kMagicMaxBiasLog2 = 0x1p-10f;
constexpr float kFloatRoundingUnit = 0x1p-24f;  // half an ulp, relative
constexpr float kMagicMulMax = kMagicMaxBiasLog2 / (2.0f * kMagic * kFloatRoundingUnit);

template <typename Out, int D, int kBlockN, bool kCausal, bool kScalePositive, int kRescaleThreshold>
struct Int8Tile {
  static_assert(D == 64 || D == 128, "head_dim 64 or 128 (the N of the P.V wgmma, one 8-bit swizzle row)");
  static_assert(kBlockN == kKBlock, "one K descale per key tile, and Vt rows of one 128-byte swizzle row");
  static_assert(kRescaleThreshold == 0, "p <= 2^8 fills e4m3 to 256 of 448: no room for a kept (stale) max");
  static_assert(kInt8Max * kInt8Max * D < (1 << kExactIntBits), "int32 scores convert exactly (exact_int_to_float)");
  static_assert(kQBlock == kWgmmaM, "a warpgroup's 64 rows share one Q descale");
  static constexpr int kN8 = 8;
  static constexpr int kRowsPerThread = 2;  // accumulator rows g and g + 8
  static constexpr int kRowsApart = 8;
  static constexpr int kWarpRows = kWgmmaM / kWarpgroupWarps;
  static constexpr int kQuad = 4;
  static constexpr int kDSlices = D / kWgmmaK8;          // k32 slices of Q.K^T
  static constexpr int kKeySlices = kBlockN / kWgmmaK8;  // k32 slices of P.V
  static constexpr int kSAcc = kBlockN / 2;
  static constexpr int kOAcc = D / 2;
  static constexpr int kSTiles = kBlockN / kN8;
  static constexpr int kOTiles = D / kN8;
  static constexpr bool kHasInterleavedSoftmax = false;

  int32_t s_acc[kSAcc];  // the int32 scores; softmax leaves p there as float bits
  float o_acc[kOAcc];
  AccumulatedOverRow<D, kKeySlices> pv;
  uint32_t p_frag[kKeySlices][4];
  float row_max[kRowsPerThread];
  float row_sum[kRowsPerThread];
  float correction[kRowsPerThread];
  float scale_log2;          // softmax scale * log2(e) * this warpgroup's Q descale (bind_item)
  const float* k_descale;    // the item's (batch, kv head): one per key tile
  int k_tiles;               // entries of k_descale
  int next_k_tile;           // the tile whose descale next_k_descale holds (loaded a tile ahead)
  int last_k_tile;           // the tile this warpgroup took last (-1 before an item's first)
  float next_k_descale;
  const float* v_descale;    // the item's (batch, kv head): one per channel
  const float* v_mean;       // the item's (batch, kv head): V's mean per channel, added to O
  int warp_q0;
  int g, t;

  static __device__ __forceinline__ uint64_t desc_qk(uint32_t smem_addr) { return make_desc_kmajor8<D>(smem_addr); }
  static __device__ __forceinline__ uint64_t desc_v(uint32_t smem_addr) { return make_desc_kmajor8<kBlockN>(smem_addr); }

  template <bool kZeroO = true>
  __device__ __forceinline__ void init(float softmax_scale, int first_row_of_warp, int lane) {
    if constexpr (kZeroO) zero_o();
#pragma unroll
    for (int i = 0; i < kSAcc; ++i) s_acc[i] = 0;
#pragma unroll
    for (int i = 0; i < kKeySlices; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) p_frag[i][j] = 0u;
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
      correction[r] = 1.0f;
    }
    scale_log2 = softmax_scale * kSdpaLog2e;
    warp_q0 = first_row_of_warp;
    g = lane / kQuad;
    t = lane % kQuad;
  }
  // The work item's scales: q_row is this warpgroup's first query row (a multiple of 64, maybe past
  // the last row of a ragged item, which then reads the last block's descale and stores nothing).
  template <class KernelParams>
  __device__ __forceinline__ void bind_item(const KernelParams& prm, int b, int h, int q_row) {
    const SdpaProblem& p = prm.p;
    const int q_blocks = sdpa_ceil_div(p.seq_len, kQBlock);
    const int q_block = min(q_row / kQBlock, q_blocks - 1);
    scale_log2 *= prm.q_descale[(static_cast<int64_t>(b) * p.heads + h) * q_blocks + q_block];
    const int64_t kv_bh = static_cast<int64_t>(b) * p.kv_heads + h / (p.heads / p.kv_heads);
    k_tiles = sdpa_ceil_div(p.kv_seq_len, kKBlock);
    k_descale = prm.k_descale + kv_bh * k_tiles;
    v_descale = prm.v_descale + kv_bh * D;
    v_mean = prm.v_mean + kv_bh * D;
    next_k_tile = 0;
    last_k_tile = -1;
    next_k_descale = k_descale[0];
  }
  __device__ __forceinline__ void zero_o() {
#pragma unroll
    for (int i = 0; i < kOAcc; ++i) o_acc[i] = 0.0f;
  }

  // S = Q.K^T: k32 slice kk is the 32 bytes at kk * 32 of every (swizzled) row.
  template <int kQRows>
  __device__ __forceinline__ void issue_qk(uint64_t desc_q, uint64_t desc_k) {
#pragma unroll
    for (int kk = 0; kk < kDSlices; ++kk)
      Igmma<kBlockN>::ss(s_acc, desc_advance(desc_q, kk * kWgmmaK8), desc_advance(desc_k, kk * kWgmmaK8), kk > 0);
  }
  // P.V: Vt is [D][keys], K-major, keys of each 32-key group in fp8_key_of's order.
  __device__ __forceinline__ void issue_pv(uint64_t desc_vt) { pv.issue(o_acc, p_frag, desc_vt); }
  __device__ __forceinline__ void pv_retired() {}

  // The tile's K descale was loaded during the previous tile's softmax (a global load's latency
  // there is under the work, here it would head the chain); the next one is loaded now.
  __device__ __forceinline__ void softmax(int key0, int seq_len) {
    const int k_tile = key0 / kBlockN;
    const float mul = scale_log2 * (k_tile == next_k_tile ? next_k_descale : k_descale[k_tile]);
    // this warpgroup's next tile is as far on as this one was from its last: the next one, or the one
    // after under the key split, where the two warpgroups take alternate tiles
    next_k_tile = 2 * k_tile - last_k_tile;
    last_k_tile = k_tile;
    next_k_descale = k_descale[min(next_k_tile, k_tiles - 1)];
    // A positive scale folds into the exponent. Where its multiplier is small the scores stay as the
    // floats kMagic + s (one IADD each, exact: static_assert above), the offset leaving in the max's
    // subtraction and the exponent's addend; that addend's rounding biases the whole tile of a row
    // (kMagicMulMax), which large scores cannot afford, so those take the exact conversion.
    const bool offset_scores = kScalePositive && mul <= kMagicMulMax;
    if (offset_scores) {
#pragma unroll
      for (int i = 0; i < kSAcc; ++i) s_acc[i] += kMagicBits;
    } else {
#pragma unroll
      for (int i = 0; i < kSAcc; ++i) {
        const float s = exact_int_to_float(s_acc[i]);
        s_acc[i] = __float_as_int(kScalePositive ? s : s * mul);
      }
    }
    const float score_mul = kScalePositive ? mul : 1.0f;
    const float offset = offset_scores ? kMagic : 0.0f;
    mask(key0, seq_len);
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) exponentiate_row(r, score_mul, offset);
  }
  __device__ __forceinline__ void rescale_o() { pv.rescale(o_acc, correction); }
  // Register r of k32 slice kk, byte v0: P at key fp8_key_of(4t + v0 + 16 (r / 2)) of row g + 8 (r % 2),
  // i.e. n8 tiles 4kk + 2 (r / 2) (bytes 0, 1) and the next (bytes 2, 3), rows' pair 2 (r % 2).
  __device__ __forceinline__ void pack_p() {
    constexpr int kNextTile = 4;
#pragma unroll
    for (int kk = 0; kk < kKeySlices; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int first = 4 * (4 * kk + 2 * (r / 2)) + 2 * (r % 2);
        const uint32_t lo = pack_e4m3x2(p_at(first), p_at(first + 1));
        const uint32_t hi = pack_e4m3x2(p_at(first + kNextTile), p_at(first + kNextTile + 1));
        p_frag[kk][r] = lo | (hi << 16);
      }
  }
  __device__ __forceinline__ void reduced_row_sums(float (&l)[kRowsPerThread]) const {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) l[r] = sdpa_mma::quad_sum(row_sum[r]);
  }

  // O * v descale / l + v mean into this warp's 16 rows of the SW128 staging tile, then 16-byte stores of the
  // rows < valid_rows (WgAttentionTile::store_o's layout and order).
  template <int kTileRows, int kFirstTile = 0, int kTiles = kOTiles>
  __device__ __forceinline__ void store_o(unsigned char* staging, int row_base, Out* out, int64_t row_stride,
                                          int valid_rows, int lane, const float (&l)[kRowsPerThread]) {
    static_assert(kFirstTile == 0 && kTiles == kOTiles, "the INT8 stage stores whole rows");
    // The store's addresses are loop-invariant and ptxas hoists them above the key loop, where O, S
    // and P leave them no registers (head_dim 128 spilled 108-140 bytes, 2026-11-27): an empty asm that
    // "rewrites" the row base and the lane's indices keeps them here (WgAttentionTile's store_o does
    // the same past 128 keys).
    asm volatile("" : "+r"(row_base), "+r"(lane), "+r"(g), "+r"(t));
    // Every V descale and mean first: interleaved with the staging stores (a generic pointer that may
    // alias them), each tile's loads waited a global round trip of their own, 3.5 us an item against
    // s18's 0.7 at (128,12,128,64) (timeline, H200, 2026-11-29). S and P are dead here, so the
    // registers hold them.
    float2 vd_of[kOTiles], vm_of[kOTiles];
#pragma unroll
    for (int j = 0; j < kOTiles; ++j) {
      vd_of[j] = __ldg(reinterpret_cast<const float2*>(v_descale + j * kN8 + 2 * t));
      vm_of[j] = __ldg(reinterpret_cast<const float2*>(v_mean + j * kN8 + 2 * t));
    }
#pragma unroll
    for (int j = 0; j < kOTiles; ++j) {
      const float2 vd = vd_of[j], vm = vm_of[j];
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) {
        const float inv_sum = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        const uint32_t off = sw128_offset<kTileRows>(row_base + g + r * kRowsApart, j) + t * sizeof(uint32_t);
        *reinterpret_cast<uint32_t*>(staging + off) = sdpa_mma::pack2<Out>(
            fmaf(o_acc[4 * j + 2 * r] * inv_sum, vd.x, vm.x), fmaf(o_acc[4 * j + 2 * r + 1] * inv_sum, vd.y, vm.y));
      }
    }
    __syncwarp();
    constexpr int kWarpSize = 32;
    constexpr int kElems = kChunkBytes / sizeof(Out);
    constexpr int kChunks = D * sizeof(Out) / kChunkBytes;  // 16-byte chunks per row
    static_assert((kWarpRows * kChunks) % kWarpSize == 0, "O rows of a warp split evenly over its lanes");
#pragma unroll
    for (int i = 0; i < kWarpRows * kChunks / kWarpSize; ++i) {
      const int idx = i * kWarpSize + lane;
      const int row = row_base + idx / kChunks;
      const int chunk = idx % kChunks;
      if (row < valid_rows) {
        const uint4 v = *reinterpret_cast<const uint4*>(staging + sw128_offset<kTileRows>(row, chunk));
        *reinterpret_cast<uint4*>(out + static_cast<int64_t>(row) * row_stride + chunk * kElems) = v;
      }
    }
  }

 private:
  __device__ __forceinline__ float p_at(int i) const { return __int_as_float(s_acc[i]); }
  // Scores past the keys or (causal) above the diagonal become -inf; only the ragged last tile and
  // tiles reaching past this warp's first row need it (warp-uniform).
  __device__ __forceinline__ void mask(int key0, int seq_len) {
    const bool need_mask = (key0 + kBlockN > seq_len) || (kCausal && key0 + kBlockN - 1 > warp_q0);
    if (!need_mask) return;
#pragma unroll
    for (int j = 0; j < kSTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int q = warp_q0 + g + (e / 2) * kRowsApart;
        const int key = key0 + j * kN8 + 2 * t + (e % 2);
        if (!sdpa_key_visible(q, key, seq_len, kCausal)) s_acc[4 * j + e] = __float_as_int(-INFINITY);
      }
  }
  // Row r: the running max grown by the tile's, the correction, p = 2^(s * mul - max + 8) in place
  // (as float bits), and the row sum of those p (the P.V's e4m3 P is rounded from them).
  __device__ __forceinline__ void exponentiate_row(int r, float mul, float offset) {
    float tree[2 * kSTiles];
#pragma unroll
    for (int j = 0; j < kSTiles; ++j) {
      tree[2 * j] = p_at(4 * j + 2 * r);
      tree[2 * j + 1] = p_at(4 * j + 2 * r + 1);
    }
#pragma unroll
    for (int w = 1; w < 2 * kSTiles; w *= 2)
#pragma unroll
      for (int i = 0; i + w < 2 * kSTiles; i += 2 * w) tree[i] = fmaxf(tree[i], tree[i + w]);
    const float mx = fmaxf(row_max[r], (sdpa_mma::quad_max(tree[0]) - offset) * mul);
    const float base = sdpa_softmax_base(mx);       // 0 while the row has seen only -inf
    correction[r] = ex2_approx(row_max[r] - base);  // ex2(-inf) = 0 on the first visible tile
    row_max[r] = mx;
    const float neg_base = fmaf(-offset, mul, static_cast<float>(kPExp2Offset) - base);
#pragma unroll
    for (int j = 0; j < kSTiles; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const float p = ex2_approx(fmaf(p_at(4 * j + 2 * r + c), mul, neg_base));
        s_acc[4 * j + 2 * r + c] = __float_as_int(p);
        tree[2 * j + c] = p;
      }
#pragma unroll
    for (int w = 1; w < 2 * kSTiles; w *= 2)
#pragma unroll
      for (int i = 0; i + w < 2 * kSTiles; i += 2 * w) tree[i] += tree[i + w];
    row_sum[r] = row_sum[r] * correction[r] + tree[0];
  }
};

}  // namespace sdpa_int8
