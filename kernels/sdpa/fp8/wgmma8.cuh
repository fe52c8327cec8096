// fp8/wgmma8.cuh -- e4m3 (FP8) wgmma for the FP8 attention stage (s9_fp8): the m64nNk32
// wrappers (and the row-sum form), 8-bit K-major descriptors, P's key permutation and the
// e4m3 conversion. The tile math on them is fp8/tile.cuh; V -> Vt, fp8/vt_transpose.cuh.
//
//   wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3   N in {64, 128, 192}
//       SS: A and B from shared-memory descriptors
//       RS: A from registers (4 x b32 = 16 e4m3 per thread), B from a descriptor
//   8-bit types have no transpose immediates: both operands are K-major (the
//   contraction dim contiguous) when read from shared memory. V (keys x D,
//   D contiguous) is therefore stored transposed, Vt = [D][keys], by a pre-pass or
//   in shared memory (fp8/vt_transpose.cuh).
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

#include "../sdpa_wgmma.cuh"

namespace sdpa_wgmma {

constexpr int kWgmmaK8 = 32;  // k of one wgmma for 8-bit inputs (32 bytes of a K-major row)
constexpr int kFp8KeyGroup = kWgmmaK8;  // keys permuted within groups of one k32 slice
constexpr int kSwizzleAtomRows = 8;
constexpr uint64_t kDescSwizzle64B = 2ull << 62;  // descriptor swizzle mode 2 = 64-byte

// The key a logical k (0..31) of P's A fragment stands for (see above).
__host__ __device__ __forceinline__ constexpr int fp8_key_of(int k) {
  return 16 * (k / 16) + 8 * ((k % 4) / 2) + 2 * ((k % 16) / 4) + (k % 2);
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

}  // namespace sdpa_wgmma
