// fp8/tile.cuh -- one consumer warpgroup's FP8 per-tile math (WgFp8Tile): the k32 GEMMs on
// e4m3 wgmma (fp8/wgmma8.cuh), Q.K^T optionally on fp16 wgmma, P's quantization and P.V's
// promotion, on top of WgAttentionTile's fp32 softmax and store (sdpa_wgmma_tile.cuh).
#pragma once

#include <cstdint>

#include "../sdpa_wgmma_tile.cuh"
#include "wgmma8.cuh"

namespace sdpa_wgmma {

// One consumer warpgroup's FP8 math. The fp32 state (S and O accumulators,
// running max / sum) and the softmax, rescale and store are WgAttentionTile's
// (T = the output dtype): the accumulator layout does not depend on the input
// type. FP8 adds the k32 GEMMs and P's quantization:
//   P8 = e4m3(2^kPExp2Offset * p), p = exp2(s * scale * log2(e) - running max) in [0, 1]
// (FlashAttention-3's Max_offset: P in [0, 256] uses more of e4m3's range);
// the row sum stays the fp32 sum of p, so the output is O * v_descale / (2^8 * sum).
// kFoldPScale: the 2^8 goes into the exponent instead, p' = exp2(s' - max + 8)
// (one FMUL per score less: the offset rides in the softmax's FFMA addend), and
// the row sum is the sum of p' = 2^8 p, so store_o divides by it directly.
// Both are exact power-of-two scalings in float32 (p' <= 2^8, no overflow; the
// flush-to-zero threshold moves from p < 2^-126 to p < 2^-134, far below
// e4m3's smallest subnormal 2^-9). They are not bit-identical: s' - max + 8 is
// rounded once at the magnitude of the shifted argument (half an ulp of [4, 8)
// is 2^-22, i.e. p relative error <= 2^-22 ln 2 ~ 1.7e-7 more), so an e4m3 byte
// can flip by one ulp where 2^8 p lies within ~1e-7 of a rounding midpoint.
// kPolyEvery > 0: every kPolyEvery-th n8 tile of S takes ex2_poly3 (FMA pipe,
// relative error <= 8.6e-5, well inside e4m3's 2^-4 half ulp) instead of MUFU.
// kRescaleThreshold > 0: WgAttentionTile's conditional O rescale. p then reaches
// 2^kRescaleThreshold under a kept max, so P's offset gives up as much:
// 2^kPExp2Offset * p <= 2^8 stays inside e4m3's 448, and the price is the
// underflow of small p, e4m3's smallest subnormal 2^-9 meaning p < 2^-(9 + offset).
// kRowSumMma: the row sums come from the P.V wgmma (Wgmma8Sum: Vt's tile carries
// a row of ones) instead of one FADD per score: the sums of the e4m3 P8 that
// P.V multiplies, rescaled with O; the Vt tiles are kSumRows rows longer.
// kEarlyPack: softmax() converts P to e4m3 right away, into p8_next, and pack_p()
// only copies it into p8. The previous tile's P.V reads p8 until its wgmma_wait,
// which the stages put after the softmax; converting into p8 itself has to wait
// for it, and the 48 F2FP + 24 PRMT per thread then run after the exponentials
// instead of in the gaps the MUFU's rate leaves (one MUFU.EX2 per 8 clocks per
// sub-partition). The price: 24 MOVs and 24 registers live across the wait.
// kPvPromote: each tile's P.V goes into accumulators of its own (o_tile, the first
// k32 wgmma overwriting them) and promote_o() adds them to O in float32 once the
// wgmma is done. Why: the e4m3 wgmma's "f32" accumulator keeps about 13 mantissa
// bits and truncates (SageAttention2: FP22; DeepSeek-V3: ~14 bits), so O summed
// over thousands of keys in it drifts low on coherent (all-positive) rows; per tile
// it sums at most kBlockN / 32 k32 steps (two-level accumulation, issue 28). The
// price: D / 2 registers and D / 2 FADDs per thread per key tile. kPvPromote is a mode
// (kPvPromoteOff / Tile / Halves); kPvPromoteHalves promotes by output column halves
// (head_dim 128): columns [0, D/2) by m64n(D/2)k32 wgmmas into o_tile (D/4 registers),
// issued as the tile's P.V, then after its wait pv_second_half() adds them to O's first
// half and runs columns [D/2, D) into the same o_tile, waits, and promote_o() adds them to
// O's second half (wgmma accumulators: register 4j + r is column 8j + 2t + r % 2, so the
// first half of m64nDk32's registers is the m64n(D/2)k32 accumulator of columns [0, D/2)).
// Why: the whole-tile form's D/2 = 64 registers spill at head_dim 128 (128 and 192 keys per
// tile, s9_fp8.cu's header); halves cost D/4 = 32. The consumer (fp8/consumer.cuh,
// promoted_halves_then_softmax) waits for both halves before the softmax, so o_tile is dead
// during it (a half in flight under the softmax still spilled). The price: this warpgroup's
// softmax no longer runs under its own P.V, and two waits per tile; the other warpgroup's
// turn (pingpong) is what keeps the tensor cores busy meanwhile.
// kQkF16: S = Q.K^T on fp16 wgmma (HGMMA, m64nNk16) over fp16 copies of the e4m3 Q
// and K (every e4m3 value is exact in fp16: 3 mantissa bits, exponents 2^-9..2^8),
// in s6's SW128 layout (column blocks of 64 elements, kslice_offset). Why: the
// e4m3 wgmma aligns a k32 group's products to the largest and keeps ~13 bits
// (an H100 gives 448*448 + 31*1 = 200704, exact 200735), so logits of thousands
// of log2 units come out ~2 units off (issue 28, tools/fp8_large_check.py); the
// fp16 wgmma keeps fp32-like accumulation. S's accumulator layout is the same, so
// the softmax, P and P.V (still e4m3) do not change. The price: D/16 HGMMAs at
// half QGMMA's rate instead of D/32 QGMMAs, and twice the bytes per Q and K tile.
constexpr int kPvPromoteOff = 0;     // P.V accumulates into O inside the wgmma
constexpr int kPvPromoteTile = 1;    // each key tile's P.V in D/2 registers of its own, added to O
constexpr int kPvPromoteHalves = 2;  // the same by output column halves: D/4 registers, two waits
template <typename T, int D, int kBlockN, bool kCausal, bool kScalePositive, bool kFoldPScale = false,
          int kPolyEvery = 0, int kRescaleThreshold = 0, bool kRowSumMma = false, bool kEarlyPack = false,
          int kPvPromote = kPvPromoteOff, bool kQkF16 = false>
struct WgFp8Tile {
  using Base = WgAttentionTile<T, D, kBlockN, kCausal, kScalePositive, kRescaleThreshold>;
  static_assert(!(kPvPromote && kRowSumMma), "kPvPromote keeps the row sums in FADDs (kRowSumMma off)");
  static constexpr int kPMaxExp2 = 8;  // FA3's Max_offset for FP8: 2^8 p <= 256 < 448 (e4m3's max)
  static_assert(kRescaleThreshold >= 0 && kRescaleThreshold < kPMaxExp2, "P's offset 2^(8 - threshold) stays >= 2");
  static constexpr int kPExp2Offset = kPMaxExp2 - kRescaleThreshold;
  static constexpr float kPScale = 1 << kPExp2Offset;         // 256 = exp2(kPExp2Offset)
  static constexpr int kDSlices = D / kWgmmaK8;               // k32 slices of Q.K^T
  static constexpr int kKeySlices = kBlockN / kWgmmaK8;       // k32 slices of P.V
  static constexpr int kTilesPerSlice = kWgmmaK8 / Base::kN8;  // 4 accumulator n8 tiles per k32
  static constexpr int kVtChunk = fp8_vt_chunk_keys(kBlockN);  // keys (bytes) per Vt row chunk
  static constexpr int kVtRows = D + (kRowSumMma ? kSumRows : 0);  // rows of a Vt chunk in shared memory
  static constexpr uint32_t kVtChunkBytes = kVtRows * kVtChunk;
  static_assert(kBlockN % kWgmmaK8 == 0, "whole k32 slices of keys");
  static_assert(kBlockN % kVtChunk == 0 && kVtChunk % kWgmmaK8 == 0, "Vt chunks of whole k32 slices");
  static_assert(D == 64 || D == 128, "the N of the P.V wgmma (Wgmma8 has 64 and 128)");
  static_assert(kPvPromote >= kPvPromoteOff && kPvPromote <= kPvPromoteHalves, "kPvPromote: 0 off, 1 tile, 2 halves");
  static_assert(kPvPromote != kPvPromoteHalves || D == 128, "halves of head_dim 64 would need m64n32k32 (no Wgmma8<32>)");
  static constexpr int kOTileAcc =  // o_tile's registers per thread
      kPvPromote == kPvPromoteTile ? Base::kOAcc : kPvPromote == kPvPromoteHalves ? Base::kOAcc / 2 : 1;
  using WgS = Wgmma8<kBlockN>;
  using WgO = Wgmma8<D>;
  using WgOHalf = Wgmma8<kPvPromote == kPvPromoteHalves ? D / 2 : D>;  // kPvPromoteHalves' m64n(D/2)k32

  Base m;
  uint32_t p8[kKeySlices][4];
  uint32_t p8_next[kKeySlices][4];  // kEarlyPack: this tile's P while the previous P.V reads p8
  float sum_acc[4];  // kRowSumMma: the extra n8 tile of P.V (column 0 = row sums, lanes t = 0)
  float o_tile[kOTileAcc];  // kPvPromote: this tile's P.V (Halves: one column half), before promote_o()

  __device__ __forceinline__ void init(float score_scale, int first_row_of_warp, int lane) {
    m.init(score_scale, first_row_of_warp, lane);
#pragma unroll
    for (int i = 0; i < 4; ++i) sum_acc[i] = 0.0f;
    if constexpr (kPvPromote) {
#pragma unroll
      for (int i = 0; i < kOTileAcc; ++i) o_tile[i] = 0.0f;  // overwritten by each tile's first k32 wgmma
    }
#pragma unroll
    for (int i = 0; i < kKeySlices; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) p8[i][j] = 0u;
  }
  // S = Q.K^T; desc_q at this warpgroup's rows of a Q tile of kQRows rows. e4m3: both tiles
  // K-major with D-byte rows, D/32 k32 QGMMAs. kQkF16: both fp16 SW128 tiles (kQRows and
  // kBlockN rows, column blocks of 64 elements), D/16 k16 HGMMAs into the same accumulators.
  template <int kQRows>
  __device__ __forceinline__ void issue_qk(uint64_t desc_q, uint64_t desc_k) {
    if constexpr (kQkF16) {
#pragma unroll
      for (int kk = 0; kk < D / kWgmmaK; ++kk)
        Wgmma<__half, kBlockN>::template ss<0>(m.s_acc, desc_advance(desc_q, Base::kslice_offset(kk, kQRows)),
                                               desc_advance(desc_k, Base::kslice_offset(kk, kBlockN)),
                                               kk > 0 ? 1 : 0);
    } else {
#pragma unroll
      for (int kk = 0; kk < kDSlices; ++kk)
        WgS::ss(m.s_acc, desc_advance(desc_q, kk * kWgmmaK8), desc_advance(desc_k, kk * kWgmmaK8), kk > 0 ? 1 : 0);
    }
  }
  // O += P.Vt^T; desc_vt: the Vt tile's first [D][kVtChunk] chunk, K-major with kVtChunk-byte rows.
  // kPvPromoteHalves: columns [0, D/2) only (pv_second_half() runs the rest).
  __device__ __forceinline__ void issue_pv(uint64_t desc_vt) {
    if constexpr (kPvPromote == kPvPromoteHalves) {
      issue_pv_half<0>(desc_vt);
    } else {
#pragma unroll
      for (int kk = 0; kk < kKeySlices; ++kk) {
        const uint32_t key = kk * kWgmmaK8;
        const uint64_t desc = desc_advance(desc_vt, (key / kVtChunk) * kVtChunkBytes + key % kVtChunk);
        if constexpr (kRowSumMma) Wgmma8Sum<D>::rs(m.o_acc, sum_acc, p8[kk], desc);
        else if constexpr (kPvPromote == kPvPromoteTile) WgO::rs(o_tile, p8[kk], desc, kk > 0 ? 1 : 0);
        else WgO::rs(m.o_acc, p8[kk], desc, 1);
      }
    }
  }
  // kPvPromoteHalves: o_tile = P . (Vt rows [kHalf D/2, (kHalf + 1) D/2))^T. A Vt chunk is D rows of
  // kVtChunk bytes; D/2 rows are whole 8-row swizzle atoms, so the half's descriptor is the
  // chunk's advanced by D/2 rows (its swizzle phase unchanged).
  template <int kHalf>
  __device__ __forceinline__ void issue_pv_half(uint64_t desc_vt) {
    constexpr int kHalfRows = D / 2;
    static_assert(kHalfRows % kSwizzleAtomRows == 0, "a column half starts on a swizzle atom");
#pragma unroll
    for (int kk = 0; kk < kKeySlices; ++kk) {
      const uint32_t key = kk * kWgmmaK8;
      const uint64_t desc = desc_advance(
          desc_vt, (key / kVtChunk) * kVtChunkBytes + kHalf * kHalfRows * kVtChunk + key % kVtChunk);
      WgOHalf::rs(o_tile, p8[kk], desc, kk > 0 ? 1 : 0);
    }
  }
  // kPvPromoteHalves, after the P.V's wgmma_wait and before Vt's release: O[:, 0:D/2) += o_tile,
  // then columns [D/2, D) into o_tile (p8 still holds this P) and their wait; promote_o()
  // adds them. Nothing in the other modes.
  __device__ __forceinline__ void pv_second_half(uint64_t desc_vt) {
    if constexpr (kPvPromote == kPvPromoteHalves) {
#pragma unroll
      for (int i = 0; i < kOTileAcc; ++i) m.o_acc[i] += o_tile[i];
      fence_regs(o_tile);
      fence_regs(p8);
      wgmma_fence();  // o_tile was read by the FADDs above
      issue_pv_half<1>(desc_vt);
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(o_tile);
      fence_regs(p8);
    }
  }
  // O's rescale (and the sums' when they ride in P.V's accumulators).
  __device__ __forceinline__ void rescale_o() {
    m.rescale_o();
    if constexpr (kRowSumMma) {
      if constexpr (kRescaleThreshold > 0) {
        if (!m.rescale_pending) return;
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) sum_acc[i] *= m.correction[i / 2];
    }
  }
  // The accumulators a wgmma writes, fenced against reordering around it.
  __device__ __forceinline__ void fence_o() {
    fence_regs(m.o_acc);
    if constexpr (kRowSumMma) fence_regs(sum_acc);
    if constexpr (kPvPromote != kPvPromoteOff) fence_regs(o_tile);
  }
  // kPvPromote: O += this tile's P.V in float32, after the P.V's wgmma_wait (O and o_tile
  // are relative to the same running max: O's rescale ran before the P.V was issued).
  // kPvPromoteHalves: o_tile holds columns [D/2, D) (pv_second_half), O's second half of registers.
  __device__ __forceinline__ void promote_o() {
    if constexpr (kPvPromote != kPvPromoteOff) {
      constexpr int kFirst = kPvPromote == kPvPromoteHalves ? Base::kOAcc / 2 : 0;
#pragma unroll
      for (int i = 0; i < kOTileAcc; ++i) m.o_acc[kFirst + i] += o_tile[i];
    }
  }
  // S(tile at key0) -> p (or 2^8 p when folded) in place; running max / sum.
  __device__ __forceinline__ void softmax(int key0, int seq_len) {
    m.template softmax<kFoldPScale ? kPExp2Offset : 0, kPolyEvery, !kRowSumMma>(key0, seq_len);
    if constexpr (kEarlyPack) convert_p(p8_next);
  }
  // x (= p) -> 2^8 p for the e4m3 conversion; already scaled when folded.
  static __device__ __forceinline__ float p_scaled(float x) {
    if constexpr (kFoldPScale) return x;
    return kPScale * x;
  }
  // Register r (v1 = r % 2, v2 = r / 2), byte v0 of slice kk is S tile
  // 4kk + 2 v2 + v0 / 2, element e = 2 v1 + v0 % 2 (header comment).
  __device__ __forceinline__ void convert_p(uint32_t (&dst)[kKeySlices][4]) const {
#pragma unroll
    for (int kk = 0; kk < kKeySlices; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int first = 4 * (kTilesPerSlice * kk + 2 * (r / 2)) + 2 * (r % 2);  // v0 = 0
        constexpr int kNextTile = 4;                                               // v0 = 2: the next n8 tile
        const uint32_t lo = pack_e4m3x2(p_scaled(m.s_acc[first]), p_scaled(m.s_acc[first + 1]));
        const uint32_t hi =
            pack_e4m3x2(p_scaled(m.s_acc[first + kNextTile]), p_scaled(m.s_acc[first + kNextTile + 1]));
        dst[kk][r] = lo | (hi << 16);
      }
  }
  // P -> p8, the A fragments of this tile's P.V (a copy of p8_next with kEarlyPack).
  __device__ __forceinline__ void pack_p() {
    if constexpr (kEarlyPack) {
#pragma unroll
      for (int kk = 0; kk < kKeySlices; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          // A mov of its own: as an assignment, p8_next's F2FP/PRMT would define p8's
          // registers under the previous P.V, and ptxas serializes every wgmma (C7513).
          asm volatile("mov.b32 %0, %1;" : "=r"(p8[kk][r]) : "r"(p8_next[kk][r]));
        }
    } else {
      convert_p(p8);
    }
  }
  // Fold V's descale into O and P's fixed scale into the row sums, then store.
  template <int kTileRows>
  __device__ __forceinline__ void store_o(unsigned char* staging, int row_base, T* out, int64_t row_stride,
                                          int valid_rows, int lane, float v_descale) {
    float l[Base::kRowsPerThread];
    if constexpr (kRowSumMma) {  // sums of P8 = e4m3(2^8 p), folded or not; the quad's lane t = 0 holds them
      constexpr unsigned kFullWarp = 0xffffffffu;
#pragma unroll
      for (int r = 0; r < Base::kRowsPerThread; ++r) l[r] = __shfl_sync(kFullWarp, sum_acc[2 * r], lane & ~3);
    } else {
      m.reduced_row_sums(l);
    }
    if constexpr (!kFoldPScale && !kRowSumMma) {  // folded: the sums are of 2^8 p already
#pragma unroll
      for (int r = 0; r < Base::kRowsPerThread; ++r) l[r] *= kPScale;
    }
#pragma unroll
    for (int i = 0; i < Base::kOAcc; ++i) m.o_acc[i] *= v_descale;
    m.template store_o<kTileRows>(staging, row_base, out, row_stride, valid_rows, lane, l);
  }
};

}  // namespace sdpa_wgmma
