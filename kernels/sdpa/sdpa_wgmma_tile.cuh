// sdpa_wgmma_tile.cuh -- one consumer warpgroup's attention math on wgmma, per
// key tile: the registers (S and O accumulators, P fragments, running max and
// sum) and the steps every wgmma stage (s5 onward) sequences in its own way.
//
//   issue_qk(desc_q, desc_k)   S = Q.K^T: D/16 SS wgmma m64 n=BLOCK_N k16
//   softmax(key0, S)           mask, running max, p = ex2(s*scale*log2e - max),
//                              running sum; leaves the O rescale in `correction`
//   rescale_o()                O *= correction (before the P.V of the same tile)
//   pack_p()                   P -> 16-bit A fragments of the P.V wgmma
//   issue_pv(desc_v)           O += P.V: BLOCK_N/16 RS wgmma m64 n=D k16
//   store_o(...)               O / l -> SW128 staging rows -> 16-byte global stores
//
// Layouts (accumulators, SW128 tiles, descriptors) are described in
// sdpa_wgmma.cuh. A stage issues wgmma_fence / commit / wait around these and
// fence_regs() on the members, so the order of tensor-core and register work
// stays the stage's own decision (that order is what the stages differ in).
#pragma once

#include <cstdint>

#include "sdpa_common.cuh"
#include "sdpa_mma.cuh"
#include "sdpa_wgmma.cuh"

namespace sdpa_wgmma {

// kRescaleThreshold (log2 units, 0 = off): a warp keeps its rows' running max,
// and skips O's rescale, until some row's tile max exceeds it by more than the
// threshold; p = ex2(s - max) then stays below 2^kRescaleThreshold, and O and
// the row sum share the stale max, so O / l is unchanged (FlashAttention-4's
// conditional rescaling). FP8's P pays for it with its offset
// (fp8/tile.cuh: 2^(8 - threshold)).
template <typename T, int D, int kBlockN, bool kCausal, bool kScalePositive, int kRescaleThreshold = 0>
struct WgAttentionTile {
  static_assert(D == 64 || D == 128, "head_dim 64 or 128 (the N of the P.V wgmma)");
  static_assert(kBlockN == 48 || kBlockN == 64 || kBlockN == 128 || kBlockN == 176 || kBlockN == 192,
                "BLOCK_N is the N of the Q.K^T wgmma: 48, 64, 128, 176 or 192 (the wrappers sdpa_wgmma.cuh has)");
  static_assert(D % kSw128BlockElems == 0, "head_dim is whole 64-element swizzle column blocks");
  static constexpr int kN8 = 8;               // columns per accumulator n8 tile
  static constexpr int kRowsPerThread = 2;    // accumulator rows g and g + 8
  static constexpr int kRowsApart = 8;
  static constexpr int kWarpRows = kWgmmaM / kWarpgroupWarps;  // 16 rows per warp
  static constexpr int kQuad = 4;
  static_assert(kBlockN % (2 * kN8) == 0, "two n8 accumulator tiles make one k16 A fragment of P");
  static constexpr int kDSlices = D / kWgmmaK;          // k16 slices of Q.K^T
  static constexpr int kKeySlices = kBlockN / kWgmmaK;  // k16 slices of P.V
  static constexpr int kSAcc = kBlockN / 2;             // f32 S accumulators per thread
  static constexpr int kOAcc = D / 2;                   // f32 O accumulators per thread
  static constexpr int kSTiles = kBlockN / kN8;
  static constexpr int kOTiles = D / kN8;
  static constexpr int kSlicesPerBlock = kSw128BlockElems / kWgmmaK;  // 4 k16 slices per column block
  static constexpr int kRowChunks = D * 2 / kChunkBytes;              // 16-byte chunks per row
  using WgS = Wgmma<T, kBlockN>;
  using WgO = Wgmma<T, D>;

  float s_acc[kSAcc];
  float o_acc[kOAcc];
  uint32_t p_frag[kKeySlices][4];
  float row_max[kRowsPerThread];
  float row_sum[kRowsPerThread];  // this lane's partial sums; quad-reduced in store_o
  float correction[kRowsPerThread];
  bool rescale_pending;  // warp-uniform: the last softmax moved this warp's max (kRescaleThreshold > 0)
  float scale_log2;
  int warp_q0;  // sequence index of this warp's first row
  int g, t;     // lane / 4, lane % 4

  // The tile's operands in shared memory: Q and K K-major SW128 (column blocks of 64), V as it is
  // ([keys][D]), read MN-major.
  static __device__ __forceinline__ uint64_t desc_qk(uint32_t smem_addr) { return make_desc_kmajor(smem_addr); }
  static __device__ __forceinline__ uint64_t desc_v(uint32_t smem_addr) {
    return make_desc_mnmajor(smem_addr, kBlockN * kSw128RowBytes);
  }
  // Hooks of an 8-bit tile (int8/tile.cuh), nothing here: the work item's scales, and a P.V retired.
  template <class KernelParams>
  __device__ __forceinline__ void bind_item(const KernelParams&, int /*b*/, int /*h*/, int /*q_row*/) {}
  __device__ __forceinline__ void pv_retired() {}
  static constexpr bool kHasInterleavedSoftmax = true;  // softmax_interleaved below

  // kZeroO = false leaves O alone (a caller that still has to store the last item's O zeroes it
  // with zero_o before the first P.V).
  template <bool kZeroO = true>
  __device__ __forceinline__ void init(float softmax_scale, int first_row_of_warp, int lane) {
    if constexpr (kZeroO) zero_o();
#pragma unroll
    for (int i = 0; i < kSAcc; ++i) s_acc[i] = 0.0f;
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
    if constexpr (kRescaleThreshold > 0) rescale_pending = false;
    scale_log2 = softmax_scale * kSdpaLog2e;
    warp_q0 = first_row_of_warp;
    g = lane / kQuad;
    t = lane % kQuad;
  }

  __device__ __forceinline__ void zero_o() {
#pragma unroll
    for (int i = 0; i < kOAcc; ++i) o_acc[i] = 0.0f;
  }

  // Byte offset of k16 slice kk of a K-major SW128 tile of `rows` rows.
  static __device__ __forceinline__ uint32_t kslice_offset(int kk, int rows) {
    return static_cast<uint32_t>((kk / kSlicesPerBlock) * rows * kSw128RowBytes +
                                 (kk % kSlicesPerBlock) * kKSliceBytes);
  }

  // S = Q.K^T. desc_q: this warpgroup's 64 rows of a Q tile of kQRows rows;
  // desc_k: the K tile (kBlockN rows). The first wgmma overwrites s_acc.
  template <int kQRows>
  __device__ __forceinline__ void issue_qk(uint64_t desc_q, uint64_t desc_k) {
#pragma unroll
    for (int kk = 0; kk < kDSlices; ++kk) {
      WgS::template ss<0>(s_acc, desc_advance(desc_q, kslice_offset(kk, kQRows)),
                          desc_advance(desc_k, kslice_offset(kk, kBlockN)), kk > 0 ? 1 : 0);
    }
  }
  // O += P.V, V row-major [keys][D] read transposed (MN-major descriptor).
  __device__ __forceinline__ void issue_pv(uint64_t desc_v) {
#pragma unroll
    for (int kk = 0; kk < kKeySlices; ++kk) {
      WgO::template rs<1>(o_acc, p_frag[kk], desc_advance(desc_v, kk * kWgmmaK * kSw128RowBytes), 1);
    }
  }

  // Scale + mask S of the tile starting at key0, update the running max / sum;
  // S becomes exp2(S - max + kExp2Offset) in place and `correction` the O
  // rescale per row. kExp2Offset scales p (and the row sum) by 2^kExp2Offset
  // inside the exponent (FP8's P scale, fp8/tile.cuh); kPolyEvery > 0
  // computes every kPolyEvery-th n8 tile's exponentials with ex2_poly3 (FMA
  // pipe) instead of MUFU.EX2. kRowSum = false leaves row_sum alone (a caller
  // that gets the sum from its P.V wgmma). The defaults are the fp16 stages' code.
  template <int kExp2Offset = 0, int kPolyEvery = 0, bool kRowSum = true>
  __device__ __forceinline__ void softmax(int key0, int seq_len) {
    scale_and_mask(key0, seq_len);
    // Each row exponentiated as soon as its max is known, in one loop: ptxas orders the recorded
    // stages' SASS by that order (all maxima first, then the rows, changed every head_dim-128 kernel
    // of s8-s17; tools/sass_md5.py).
    with_row_maxima([&](int r, float mx) { exponentiate_row<kExp2Offset, kPolyEvery, kRowSum>(r, mx); });
  }

  // One tile's softmax in FlashAttention-4's order (SoftmaxOrder::kInterleaved, sdpa_warpspec.cuh's
  // middle_tile), for a caller whose previous P.V may still run: the exponentials of the first
  // kEarlyTiles n8 tiles, a basic-block boundary, wait_previous_pv() (the P.V's wait, after which
  // O and the P fragments are free), O's rescale, then the remaining exponentials with each k16
  // slice of P packed as soon as its two n8 tiles are out and the row sums in two chains per row
  // (even and odd columns) fed as they come. ncu at Llama-3-8B 8k (H100) has FA4's softmax so
  // interleaved, where softmax() + pack_p() end in a pairwise sum tree and 32 packs after the
  // last exponential, whose FADDs and F2FPs stall on their inputs. Replaces softmax(), the later
  // rescale_o() and pack_p() of the tile (fp16 and bf16 P; FP8 keeps softmax()).
  template <int kEarlyTiles, class WaitPreviousPv>
  __device__ __forceinline__ void softmax_interleaved(int key0, int seq_len, WaitPreviousPv&& wait_previous_pv) {
    static_assert(kEarlyTiles >= 0 && kEarlyTiles <= kSTiles && kEarlyTiles % 2 == 0,
                  "the early exponentials are whole k16 slices of P (two n8 tiles each)");
    scale_and_mask(key0, seq_len);
    float mx[kRowsPerThread];
    with_row_maxima([&](int r, float row_mx) { mx[r] = row_mx; });
    const float mul = score_mul();
    float neg_base[kRowsPerThread];
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const float base = sdpa_softmax_base(mx[r]);    // 0 while the row has seen only -inf
      correction[r] = ex2_approx(row_max[r] - base);  // ex2(-inf) = 0 on the first visible tile
      row_max[r] = mx[r];
      neg_base[r] = -base;
    }
    float sum_even[kRowsPerThread] = {}, sum_odd[kRowsPerThread] = {};
    const auto exponentiate_tile = [&](int j) {
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) {
        s_acc[4 * j + 2 * r] = ex2_approx(fmaf(s_acc[4 * j + 2 * r], mul, neg_base[r]));
        s_acc[4 * j + 2 * r + 1] = ex2_approx(fmaf(s_acc[4 * j + 2 * r + 1], mul, neg_base[r]));
        sum_even[r] += s_acc[4 * j + 2 * r];
        sum_odd[r] += s_acc[4 * j + 2 * r + 1];
      }
    };
#pragma unroll
    for (int j = 0; j < kEarlyTiles; ++j) exponentiate_tile(j);
    // The wait stays below the early exponentials: the boundary's condition reads their sums, so
    // neither they nor the wait cross it. (Their bits, not a sign test: LLVM knows a sum of
    // exponentials is never negative and would fold `sum < 0` and the boundary away.)
    float early_sum = 0.0f;
    if constexpr (kEarlyTiles > 0) early_sum = (sum_even[0] + sum_odd[0]) + (sum_even[1] + sum_odd[1]);
    schedule_boundary((seq_len < 0) & (__float_as_int(early_sum) == 0));
    wait_previous_pv();
    rescale_o();
#pragma unroll
    for (int kk = 0; kk < kEarlyTiles / 2; ++kk) pack_slice(kk);
#pragma unroll
    for (int kk = kEarlyTiles / 2; kk < kKeySlices; ++kk) {
      exponentiate_tile(2 * kk);
      exponentiate_tile(2 * kk + 1);
      pack_slice(kk);
    }
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) row_sum[r] = row_sum[r] * correction[r] + (sum_even[r] + sum_odd[r]);
  }

  __device__ __forceinline__ void rescale_o() {
    if constexpr (kRescaleThreshold > 0) {
      if (!rescale_pending) return;  // every correction of the warp is 1
    }
#pragma unroll
    for (int j = 0; j < kOTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o_acc[4 * j + e] *= correction[e / 2];
  }

  // k16 slice kk of P is n8 tiles 2kk and 2kk+1 of S, packed pairwise.
  __device__ __forceinline__ void pack_p() {
#pragma unroll
    for (int kk = 0; kk < kKeySlices; ++kk) pack_slice(kk);
  }
  __device__ __forceinline__ void pack_slice(int kk) {
#pragma unroll
    for (int i = 0; i < 4; ++i) p_frag[kk][i] = sdpa_mma::pack2<T>(s_acc[8 * kk + 2 * i], s_acc[8 * kk + 2 * i + 1]);
  }

  // The full row sums (the lanes of a quad hold partial sums of one row).
  __device__ __forceinline__ void reduced_row_sums(float (&l)[kRowsPerThread]) const {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) l[r] = sdpa_mma::quad_sum(row_sum[r]);
  }

  // O / l (l: reduced_row_sums, or merged split sums) into this warp's 16 rows (from tile row `row_base`) of an SW128 tile
  // of kTileRows rows at `staging`, then 16-byte stores of the rows < valid_rows
  // to `out` (row 0 = tile row 0). Only this warp touches those rows; of their columns,
  // the n8 tiles [kFirstTile, kFirstTile + kTiles) (all of them by default: a key split's
  // warpgroups may store a half each).
  template <int kTileRows, int kFirstTile = 0, int kTiles = kOTiles>
  __device__ __forceinline__ void store_o(unsigned char* staging, int row_base, T* out, int64_t row_stride,
                                          int valid_rows, int lane, const float (&l)[kRowsPerThread]) {
    // A persistent kernel's epilogue addresses are loop-invariant, and ptxas
    // hoists them out of the item loop, where they stay live through the main
    // loop. Past 128 keys S leaves no room for them (BLOCK_N 176: 15 spilled
    // to local memory); an empty asm that "rewrites" the row base and the
    // lane's indices keeps them here, at a few integer instructions per item.
    if constexpr (kBlockN > 128) asm volatile("" : "+r"(row_base), "+r"(lane), "+r"(g), "+r"(t));
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const float inv_sum = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
      const int row = row_base + g + r * kRowsApart;
#pragma unroll
      for (int j = kFirstTile; j < kFirstTile + kTiles; ++j) {
        const uint32_t off = sw128_offset<kTileRows>(row, j) + t * sizeof(uint32_t);
        *reinterpret_cast<uint32_t*>(staging + off) =
            sdpa_mma::pack2<T>(o_acc[4 * j + 2 * r] * inv_sum, o_acc[4 * j + 2 * r + 1] * inv_sum);
      }
    }
    __syncwarp();
    constexpr int kWarpSize = 32;
    constexpr int kElems = kChunkBytes / 2;
    static_assert(kFirstTile >= 0 && kTiles > 0 && kFirstTile + kTiles <= kOTiles, "n8 tiles of O's columns");
    constexpr int kChunks = kTiles * kN8 * 2 / kChunkBytes;  // 16-byte chunks per row stored here
    constexpr int kFirstChunk = kFirstTile * kN8 * 2 / kChunkBytes;
    static_assert(kChunks * kChunkBytes == kTiles * kN8 * 2 && kFirstChunk * kChunkBytes == kFirstTile * kN8 * 2,
                  "whole 16-byte chunks");
    static_assert((kWarpRows * kChunks) % kWarpSize == 0, "O rows of a warp split evenly over its lanes");
#pragma unroll
    for (int i = 0; i < kWarpRows * kChunks / kWarpSize; ++i) {
      const int idx = i * kWarpSize + lane;
      const int row = row_base + idx / kChunks;
      const int chunk = kFirstChunk + idx % kChunks;
      if (row < valid_rows) {
        const uint4 v = *reinterpret_cast<const uint4*>(staging + sw128_offset<kTileRows>(row, chunk));
        *reinterpret_cast<uint4*>(out + static_cast<int64_t>(row) * row_stride + chunk * kElems) = v;
      }
    }
  }

 private:
  template <int kPolyEvery>
  static __device__ __forceinline__ float ex2_of_tile(int j, float x) {
    if constexpr (kPolyEvery > 0) {
      if (j % kPolyEvery == kPolyEvery - 1) return ex2_poly3(x);  // j is unrolled: a compile-time choice
    }
    return ex2_approx(x);
  }
  // With a positive scale, max(s * scale) = max(s) * scale: the max runs on the raw scores and the
  // scale folds into one FFMA per score. Otherwise scale first. Then scores past the keys or (causal)
  // above the diagonal become -inf. Warp-uniform: only the ragged last tile and tiles reaching past
  // this warp's first row (the diagonal) need the mask.
  __device__ __forceinline__ void scale_and_mask(int key0, int seq_len) {
    if constexpr (!kScalePositive) {
#pragma unroll
      for (int i = 0; i < kSAcc; ++i) s_acc[i] *= scale_log2;
    }
    const bool need_mask = (key0 + kBlockN > seq_len) || (kCausal && key0 + kBlockN - 1 > warp_q0);
    if (need_mask) {
#pragma unroll
      for (int j = 0; j < kSTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int q = warp_q0 + g + (e / 2) * kRowsApart;
          const int key = key0 + j * kN8 + 2 * t + (e % 2);
          if (!sdpa_key_visible(q, key, seq_len, kCausal)) s_acc[4 * j + e] = -INFINITY;
        }
    }
  }
  static constexpr unsigned kFullWarp = 0xffffffffu;
  // use(r, mx) with each row's max for this tile's exponentials, row by row: the running max grown
  // by the tile's, or with kRescaleThreshold the kept one unless some row of the warp outgrows it
  // (rescale_pending).
  template <class UseRowMax>
  __device__ __forceinline__ void with_row_maxima(UseRowMax&& use) {
    if constexpr (kRescaleThreshold == 0) {
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) use(r, fmaxf(row_max[r], tile_row_max(r)));
    } else {
      float tile_max[kRowsPerThread];
      bool grows = false;
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) {
        tile_max[r] = tile_row_max(r);
        grows |= tile_max[r] > row_max[r] + static_cast<float>(kRescaleThreshold);  // -inf + t = -inf
      }
      rescale_pending = __any_sync(kFullWarp, grows);
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) use(r, rescale_pending ? fmaxf(row_max[r], tile_max[r]) : row_max[r]);
    }
  }

  __device__ __forceinline__ float score_mul() const { return kScalePositive ? scale_log2 : 1.0f; }
  // Row r's max over this tile, in scaled log2 units (the quad's lanes agree).
  __device__ __forceinline__ float tile_row_max(int r) const {
    // Pairwise trees: log2(BLOCK_N/4) dependent steps instead of a chain.
    float tree[2 * kSTiles];
#pragma unroll
    for (int j = 0; j < kSTiles; ++j) {
      tree[2 * j] = s_acc[4 * j + 2 * r];
      tree[2 * j + 1] = s_acc[4 * j + 2 * r + 1];
    }
#pragma unroll
    for (int w = 1; w < 2 * kSTiles; w *= 2)
#pragma unroll
      for (int i = 0; i + w < 2 * kSTiles; i += 2 * w) tree[i] = fmaxf(tree[i], tree[i + w]);
    return sdpa_mma::quad_max(tree[0]) * score_mul();
  }
  // Row r against running max mx (>= the tile's, or the kept one): correction,
  // p = ex2(s - mx) in place, row sum (kRowSum).
  template <int kExp2Offset, int kPolyEvery, bool kRowSum>
  __device__ __forceinline__ void exponentiate_row(int r, float mx) {
    static_assert(kPolyEvery >= 0 && kPolyEvery <= kSTiles, "a poly share of 1/kPolyEvery of the n8 tiles");
    const float mul = score_mul();
    float tree[2 * kSTiles];
    const float base = sdpa_softmax_base(mx);       // 0 while the row has seen only -inf
    correction[r] = ex2_approx(row_max[r] - base);  // ex2(-inf) = 0 on the first visible tile
    row_max[r] = mx;
    // The offset goes into the FFMA's addend: no instruction added. Without one,
    // -base exactly as before (0.0f - base would differ for base = 0: +0, not -0).
    float neg_base = -base;
    if constexpr (kExp2Offset != 0) neg_base = static_cast<float>(kExp2Offset) - base;
#pragma unroll
    for (int j = 0; j < kSTiles; ++j) {
      s_acc[4 * j + 2 * r] = ex2_of_tile<kPolyEvery>(j, fmaf(s_acc[4 * j + 2 * r], mul, neg_base));
      s_acc[4 * j + 2 * r + 1] = ex2_of_tile<kPolyEvery>(j, fmaf(s_acc[4 * j + 2 * r + 1], mul, neg_base));
      tree[2 * j] = s_acc[4 * j + 2 * r];
      tree[2 * j + 1] = s_acc[4 * j + 2 * r + 1];
    }
    if constexpr (kRowSum) {
#pragma unroll
      for (int w = 1; w < 2 * kSTiles; w *= 2)
#pragma unroll
        for (int i = 0; i + w < 2 * kSTiles; i += 2 * w) tree[i] += tree[i + w];
      row_sum[r] = row_sum[r] * correction[r] + tree[0];
    }
  }
};

}  // namespace sdpa_wgmma
