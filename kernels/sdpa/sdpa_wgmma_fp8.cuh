// sdpa_wgmma_fp8.cuh -- e4m3 (FP8) wgmma building blocks for the FP8 attention
// stage (s9_fp8): the m64nNk32 wrappers, 8-bit K-major descriptors, and one
// consumer warpgroup's FP8 per-tile math on top of WgAttentionTile's softmax.
//
//   wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3   N in {64, 128, 192}
//       SS: A and B from shared-memory descriptors
//       RS: A from registers (4 x b32 = 16 e4m3 per thread), B from a descriptor
//   8-bit types have no transpose immediates: both operands are K-major (the
//   contraction dim contiguous) when read from shared memory. V (keys x D,
//   D contiguous) is therefore stored transposed, Vt = [D][keys], by a pre-pass.
//
// ---------------------------------------------------------------------------
// Shared-memory tiles (8-bit): a row of R bytes (R = 64 or 128) is one swizzle
// row of the matching mode (SW64 or SW128), 8 rows form one atom of 8R bytes,
// SBO = 8R steps between atoms, LBO is unused (K-major, swizzled). The k32
// slice kk of a row is the 32 bytes at kk * 32 (inside the swizzled row; the
// hardware applies the XOR on absolute address bits, so tiles start
// 1024-byte aligned). TMA writes the same pattern (CU_TENSOR_MAP_SWIZZLE_64B /
// _128B with a box of R bytes per row).
//
// Register A operand of m64nNk32 for 8-bit types (CuTe's ALayout_64x32): in
// warp w, with g = lane / 4, t = lane % 4, register r (v1 = r % 2, v2 = r / 2)
// byte v0 holds A[16w + g + 8 v1][4t + v0 + 16 v2].
// The f32 accumulator of S holds, in register 4j + e, S[16w + g + 8 (e / 2)]
// [8j + 2t + (e % 2)] (sdpa_wgmma.cuh). For k32 slice kk of P (S tiles
// j = 4kk..4kk+3) a thread already holds 16 values of its rows, but at keys
//     key(k) = 16 v2 + 8 (v0 / 2) + 2t + (v0 % 2)   for logical k = 4t + v0 + 16 v2,
// not at k itself. Instead of moving bytes between lanes, the V pre-pass
// stores Vt's keys of every 32-key group in that order (Vt column k holds key
// key(k)): sum_k P[m][key(k)] * V[key(k)][n] is P.V all the same, and P's
// A fragment is a pure in-register conversion (fp8_key_of below).
#pragma once

#include <cstdint>

#include <cuda_fp8.h>

#include "sdpa_wgmma.cuh"
#include "sdpa_wgmma_tile.cuh"

namespace sdpa_wgmma {

constexpr int kWgmmaK8 = 32;  // k of one wgmma for 8-bit inputs (32 bytes of a K-major row)
constexpr int kFp8KeyGroup = kWgmmaK8;  // keys permuted within groups of one k32 slice
constexpr int kSwizzleAtomRows = 8;
constexpr uint64_t kDescSwizzle64B = 2ull << 62;  // descriptor swizzle mode 2 = 64-byte

// The key a logical k (0..31) of P's A fragment stands for (see above).
__host__ __device__ __forceinline__ constexpr int fp8_key_of(int k) {
  return 16 * (k / 16) + 8 * ((k % 4) / 2) + 2 * ((k % 16) / 4) + (k % 2);
}

// --------------------------------------------- V -> Vt in shared memory --
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

// Descriptor of a K-major 8-bit tile whose rows are kRowBytes (64 or 128) long.
template <int kRowBytes>
__device__ __forceinline__ uint64_t make_desc_kmajor8(uint32_t smem_addr) {
  static_assert(kRowBytes == 64 || kRowBytes == 128, "rows of one 64- or 128-byte swizzle row");
  const uint64_t mode = kRowBytes == 128 ? kDescSwizzle128B : kDescSwizzle64B;
  return desc_encode(smem_addr) | (desc_encode(kChunkBytes) << 16) |
         (desc_encode(kSwizzleAtomRows * kRowBytes) << 32) | mode;
}

// Wgmma8<N>::ss(d, desc_a, desc_b, scale_d) / ::rs(d, a_regs, desc_b, scale_d):
// D[64xN] (+)= A[64x32] . B[32xN], e4m3 x e4m3 -> f32. scale_d = 0 overwrites d.
template <int N>
struct Wgmma8;

// Operand numbers after the N/2 accumulators (see sdpa_wgmma.cuh's macros):
// SS: desc_a, desc_b, scale_d predicate; RS: four A registers, desc_b, predicate.
#define SDPA_WGMMA8_N64_SS "%32, %33, p, 1, 1", "%34"
#define SDPA_WGMMA8_N64_RS "{%32, %33, %34, %35}, %36, p, 1, 1", "%37"
#define SDPA_WGMMA8_N128_SS "%64, %65, p, 1, 1", "%66"
#define SDPA_WGMMA8_N128_RS "{%64, %65, %66, %67}, %68, p, 1, 1", "%69"
#define SDPA_WGMMA8_N192_SS "%96, %97, p, 1, 1", "%98"
#define SDPA_WGMMA8_N192_RS "{%96, %97, %98, %99}, %100, p, 1, 1", "%101"
#define SDPA_WGMMA8_ASM(N, OPS, PRED)                                                      \
  "{\n.reg .pred p;\nsetp.ne.b32 p, " PRED ", 0;\n"                                        \
  "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32.e4m3.e4m3 " SDPA_WGMMA_N##N##_REGS ", " \
  OPS ";\n}\n"
#define SDPA_WGMMA8_ASM_(N, ARGS) SDPA_WGMMA8_ASM(N, ARGS)

#define SDPA_WGMMA8(N)                                                                                 \
  template <>                                                                                          \
  struct Wgmma8<N> {                                                                                   \
    static __device__ __forceinline__ void ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,     \
                                              int scale_d) {                                           \
      asm volatile(SDPA_WGMMA8_ASM_(N, SDPA_WGMMA8_N##N##_SS)                                          \
                   : SDPA_WGMMA_N##N##_OUTS                                                            \
                   : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                          \
    }                                                                                                  \
    static __device__ __forceinline__ void rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, \
                                              int scale_d) {                                           \
      asm volatile(SDPA_WGMMA8_ASM_(N, SDPA_WGMMA8_N##N##_RS)                                          \
                   : SDPA_WGMMA_N##N##_OUTS                                                            \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));           \
    }                                                                                                  \
  };

SDPA_WGMMA8(64)
SDPA_WGMMA8(128)
SDPA_WGMMA8(192)
#undef SDPA_WGMMA8

// Wgmma8Sum<N>::rs(d, sum, a_regs, desc_b): m64n(N+8)k32, RS. The B tile has
// N + 8 rows: N of Vt, then a row of e4m3 ones and seven zero rows, so the
// extra n8 accumulator tile `sum` holds each row's sum of A (= P) in its
// column 0 (sum[0]: row g, sum[2]: row g + 8, lanes with t = 0; the others 0).
template <int N>
struct Wgmma8Sum;
#define SDPA_WGMMA8_SUM(N, NS, REGS, OPS)                                                                 \
  template <>                                                                                            \
  struct Wgmma8Sum<N> {                                                                                  \
    static __device__ __forceinline__ void rs(float (&d)[N / 2], float (&sum)[4], const uint32_t (&a)[4], \
                                              uint64_t desc_b) {                                         \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"   /* scale-d: accumulate */                  \
                   "wgmma.mma_async.sync.aligned.m64n" #NS "k32.f32.e4m3.e4m3 " REGS ", " OPS ";\n}\n"   \
                   : SDPA_WGMMA_N##N##_OUTS, "+f"(sum[0]), "+f"(sum[1]), "+f"(sum[2]), "+f"(sum[3])       \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));                           \
    }                                                                                                    \
  };
SDPA_WGMMA8_SUM(64, 72,
                "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "
                "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35}",
                "{%36, %37, %38, %39}, %40, p, 1, 1")
SDPA_WGMMA8_SUM(128, 136,
                "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "
                "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "
                "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, "
                "%59, %60, %61, %62, %63, %64, %65, %66, %67}",
                "{%68, %69, %70, %71}, %72, p, 1, 1")
#undef SDPA_WGMMA8_SUM
constexpr int kSumRows = 8;             // the B rows Wgmma8Sum appends: one of ones, seven of zeros
constexpr uint32_t kE4m3One = 0x38u;    // 1.0 in e4m3: sign 0, exponent 0111 (bias 7), mantissa 000

// Vt tiles of kBlockN keys are stored as chunks of one swizzle row each: a
// K-major 8-bit row is at most 128 bytes (SW128), so 192 keys take three 64-key
// chunks [D][64] (SW64), 128 keys one chunk [D][128]. Each chunk is one TMA box.
__host__ __device__ constexpr int fp8_vt_chunk_keys(int block_n) { return block_n % 128 == 0 ? 128 : 64; }

// Two floats -> two e4m3 bytes (lo in the low byte), round to nearest even,
// saturating to +-448 (cvt.rn.satfinite.e4m3x2.f32).
__device__ __forceinline__ uint32_t pack_e4m3x2(float lo, float hi) {
  return static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3));
}

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
// tile, s9_fp8.cu's header); halves cost D/4 = 32. The consumer (sdpa_fp8.cuh,
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
