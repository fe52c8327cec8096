// sdpa_wgmma.cuh -- Hopper (sm_90a) warpgroup tensor-core building blocks for
// the wgmma attention stage (s5_wgmma and whatever follows it).
//
// One thin wrapper per PTX instruction, plus the shared-memory layout and
// matrix-descriptor arithmetic the instructions expect:
//
//   wgmma.fence.sync.aligned                  order register writes before wgmma
//   wgmma.commit_group.sync.aligned           close a group of issued wgmma
//   wgmma.wait_group.sync.aligned N           wait until <= N groups in flight
//   wgmma.mma_async.sync.aligned.m64nNk16     N in {48, 64, 128, 176, 192}, f32 += f16/bf16,
//       SS: A and B from shared-memory descriptors
//       RS: A from registers, B from a descriptor
//   fence.proxy.async.shared::cta             make generic-proxy writes (st.shared,
//                                             cp.async) visible to the async proxy
//                                             (the proxy wgmma reads through)
//
// Everything here is for 16-bit element types (__half, __nv_bfloat16).
//
// ---------------------------------------------------------------------------
// Shared-memory layout: "SW128" tiles
//
// A tile of R rows x C columns (C a multiple of 64 elements = 128 bytes) is
// stored as C/64 column blocks, block-major: block b holds columns
// [64b, 64b+64) of all R rows, R rows of 128 bytes each, so block b starts at
// b * R * 128 bytes. Inside a block, row r's 16-byte chunk c (elements
// 8c..8c+7) lives at
//     r * 128 + ((c ^ (r % 8)) * 16)
// This is exactly the hardware's 128-byte swizzle (address bits [4,7) XOR-ed
// with bits [7,10)) as long as every block starts on a 1024-byte boundary, so
// the tile base must be 1024-byte aligned and R a multiple of 8. The XOR also
// makes 16-byte writes of 8 consecutive rows at one chunk conflict-free.
//
// Matrix descriptor (PTX ISA "Matrix Descriptor Format" for wgmma), 64 bits:
//   bits  0-13  start address >> 4 (shared window)
//   bits 16-29  leading-dimension byte offset (LBO) >> 4
//   bits 32-45  stride-dimension byte offset (SBO) >> 4
//   bits 49-51  base offset (0: the pattern starts 1024-byte aligned)
//   bits 62-63  swizzle mode: 0 none, 1 = 128B, 2 = 64B, 3 = 32B
//
// K-major operand (the contraction dim K is contiguous: Q as A and K as B of
// S = Q.K^T, both row-major [rows][D]): a wgmma k16 slice is 32 bytes of each
// row. Rows come in groups of 8 (one 1024-byte swizzle atom); SBO = 1024 is
// the step between 8-row groups; LBO is unused for swizzled K-major layouts
// (set to 1 by convention). k16 slice kk of a row-major SW128 tile starts at
//     tile + (kk / 4) * R * 128 + (kk % 4) * 32
// (the +32 B steps stay inside the 128-byte swizzled row: the hardware applies
// the XOR on absolute address bits, which is why 1024-byte alignment matters).
//
// MN-major operand (N contiguous: V as B of O = P.V, V row-major [keys][D], so
// K = keys is the strided dim; "transposed" B, imm-trans-b = 1): the canonical
// SW128 MN-major layout is ((64 elems, n-blocks), (8 rows, k-groups)) with
// strides ((1, LBO), (128 B, SBO)): a 64-wide N block of 8 K rows is one
// 1024-byte atom, SBO = 1024 steps to the next 8 K rows, LBO steps to the next
// 64-wide N block = R * 128 bytes in the block-major tile above. k16 slice kk
// (keys 16kk..16kk+15) of a V tile starts at tile + kk * 16 * 128.
//
// ---------------------------------------------------------------------------
// Accumulator layout of m64nNk16 (f32): warp w of the warpgroup owns rows
// 16w..16w+15; inside the warp it is the mma.sync m16n8 C layout repeated over
// N/8 column tiles. With g = lane / 4, t = lane % 4, register 4j+e holds
//     row 16w + g + 8*(e/2), column 8j + 2t + (e%2)
// The register A operand of RS wgmma uses, per warp, the mma.sync m16n8k16 A
// layout (rows 16w..), so two adjacent n8 accumulator tiles of S, packed to 16
// bits pairwise, are one k16 A fragment of P (exactly as in sdpa_mma.cuh).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include "sdpa_stress.cuh"

namespace sdpa_wgmma {

// ---------------------------------------------------------------- geometry --
constexpr int kWarpgroupThreads = 128;  // 4 consecutive warps
constexpr int kWarpgroupWarps = 4;
constexpr int kWgmmaM = 64;             // rows of one wgmma (16 per warp)
constexpr int kWgmmaK = 16;             // k of one wgmma for 16-bit inputs
constexpr int kSw128RowBytes = 128;     // one swizzled row of a column block
constexpr int kSw128BlockElems = 64;    // 16-bit elements per swizzled row
constexpr int kSw128AtomRows = 8;       // rows per 1024-byte swizzle atom
constexpr int kSw128AtomBytes = kSw128RowBytes * kSw128AtomRows;
constexpr int kSw128Align = kSw128AtomBytes;  // tile base alignment
constexpr int kChunkBytes = 16;         // one cp.async / one swizzle unit
constexpr int kChunksPerRow = kSw128RowBytes / kChunkBytes;  // 8
constexpr int kKSliceBytes = kWgmmaK * 2;  // 32 B of a K-major row per k16 slice
static_assert(kChunksPerRow == kSw128AtomRows, "swizzle XORs the chunk with row % 8");

// Byte offset of (row, 16-byte chunk) in an SW128 tile of kRows rows; chunk
// counts 16-byte pieces along the full row (8 per 64-element column block).
template <int kRows>
__host__ __device__ __forceinline__ constexpr uint32_t sw128_offset(int row, int chunk) {
  static_assert(kRows % kSw128AtomRows == 0, "SW128 tiles are whole 8-row atoms");
  return static_cast<uint32_t>((chunk / kChunksPerRow) * kRows * kSw128RowBytes + row * kSw128RowBytes +
                               (((chunk % kChunksPerRow) ^ (row % kSw128AtomRows)) * kChunkBytes));
}

// ------------------------------------------------------------- descriptors --
constexpr uint64_t kDescSwizzle128B = 1ull << 62;

__host__ __device__ __forceinline__ constexpr uint64_t desc_encode(uint32_t bytes) {
  return static_cast<uint64_t>((bytes >> 4) & 0x3FFFu);
}

// Descriptor of an SW128 operand starting at shared address `smem_addr`
// (32-bit shared-window address). lbo_bytes / sbo_bytes as described above.
__device__ __forceinline__ uint64_t make_desc_sw128(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return desc_encode(smem_addr) | (desc_encode(lbo_bytes) << 16) | (desc_encode(sbo_bytes) << 32) |
         kDescSwizzle128B;
}
// K-major SW128: SBO = one 8-row atom, LBO unused (1 by convention).
__device__ __forceinline__ uint64_t make_desc_kmajor(uint32_t smem_addr) {
  return make_desc_sw128(smem_addr, kChunkBytes, kSw128AtomBytes);
}
// MN-major SW128 (transposed B): SBO = next 8 K rows, LBO = next 64-wide N block.
__device__ __forceinline__ uint64_t make_desc_mnmajor(uint32_t smem_addr, uint32_t n_block_bytes) {
  return make_desc_sw128(smem_addr, n_block_bytes, kSw128AtomBytes);
}
// Advance a descriptor's start address by a byte offset (a multiple of 16;
// the address field has no carry into LBO as long as the result is < 256 KB,
// which every shared address is).
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) {
  return desc + static_cast<uint64_t>(bytes >> 4);
}

// -------------------------------------------------------------- sync / fences --
// STRESS_SIDE=2 delays each wgmma issue (its fence) and each wait (sdpa_stress.cuh).
__device__ __forceinline__ void wgmma_fence() {
  sdpa_stress::delay<sdpa_stress::kConsumer>();
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  sdpa_stress::delay<sdpa_stress::kConsumer>();
  static_assert(kPending >= 0 && kPending <= 7, "wait_group takes 0..7");
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Named barrier kId (1..15; 0 is __syncthreads): the first kCount threads to
// arrive wait for each other (kCount a multiple of 32). Compile-time id, so
// ptxas reserves only the barriers actually used.
template <int kId, int kCount>
__device__ __forceinline__ void named_barrier_sync() {
  static_assert(kId >= 1 && kId <= 15, "named barrier ids are 1..15");
  static_assert(kCount % 32 == 0, "whole warps");
  asm volatile("bar.sync %0, %1;\n" ::"n"(kId), "n"(kCount) : "memory");
}

// Compiler-only fences on registers that an in-flight wgmma reads or writes:
// an empty volatile asm that "rewrites" each register, so the compiler can
// neither move a use of the accumulators above wgmma_wait nor a write of them
// below the wgmma that consumes them (no instruction is emitted).
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(int32_t (&r)[N]) {  // an 8-bit Q.K^T's int32 accumulators
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_regs(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

// 2^x with flush-to-zero (one MUFU.EX2). exp2f() adds a range fix-up for
// results below 2^-126 (compare, select, two multiplies per call); softmax
// weights that small are zero for every practical purpose. ex2(-inf) = +0.
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// 2^x on the FMA and integer pipes, no MUFU: Cody-Waite split x = n + f,
// n = floor(x) (an FADD rounding down onto the 1.5 * 2^23 grid, whose low
// mantissa bits then hold n in two's complement), f in [0, 1), 2^f by a cubic
// (p(0) = 1; coefficients a weighted least-squares minimax fit, max relative
// error 8.6e-5 = 2^-13.5 over [0, 1) in float32 Horner), 2^n added into the
// exponent field: about 8 instructions (FMNMX, 3 FADD, 3 FFMA, one shift-add)
// on pipes issuing 64-128/clk/SM, where ex2_approx is one MUFU.EX2 at
// 16/clk/SM: a softmax that is MUFU-bound (FP8 at head_dim 64 and 128) can move
// a share of its exponentials here. x is clamped to >= -126 so the exponent add cannot
// wrap: x = -inf (a masked score) gives 2^-126 * [1, 2), not 0 -- negligible
// in any row sum, and 0 once quantized to e4m3 or 16 bits. Valid for x < 2^22.
__device__ __forceinline__ float ex2_poly3(float x) {
  constexpr float kRoundShift = 12582912.0f;  // 1.5 * 2^23: ulp 1 over [2^23, 2^24)
  constexpr int kMantissaBits = 23;
  constexpr float kC1 = 0.6951163411140442f, kC2 = 0.227647066116333f, kC3 = 0.07706516236066818f;
  constexpr float kMinExp = -126.0f;  // smallest normal exponent: 2^n stays a valid exponent-field add
  x = fmaxf(x, kMinExp);
  const float shifted = __fadd_rd(x, kRoundShift);  // kRoundShift + floor(x)
  const float n = shifted - kRoundShift;
  const float f = x - n;
  const float p = fmaf(fmaf(fmaf(kC3, f, kC2), f, kC1), f, 1.0f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(shifted) << kMantissaBits));
}

// Basic-block boundary for ptxas's scheduler. `never` must be a warp-uniform
// run-time value that is always false (e.g. seq_len < 0) but that the compiler
// cannot prove false; the branch around a volatile no-op then splits the
// code into two basic blocks, and ptxas does not move instructions (notably a
// following wgmma.wait_group) across it. Costs one predicated branch.
__device__ __forceinline__ void schedule_boundary(bool never) {
  if (never) asm volatile("membar.cta;\n" ::: "memory");
}

// ------------------------------------------------------------------ wgmma ---
// Wgmma<T, N>::ss<kTransB>(d, desc_a, desc_b, scale_d)
// Wgmma<T, N>::rs<kTransB>(d, a_regs, desc_b, scale_d)
// d: the N/2 f32 accumulators of this thread (layout above). scale_d = 0
// overwrites d (D = A.B), nonzero accumulates (D += A.B). A is never
// transposed (K-major from shared memory, or registers); kTransB = 1 reads an
// MN-major B. Issued by all 128 threads of a warpgroup with identical
// descriptors; asynchronous until the matching wgmma_wait.
template <typename T, int N>
struct Wgmma;

// The specializations differ only in N and the PTX type name, so one macro writes
// them. Per N: the accumulator register list, and the operand numbers that follow it
// (SS: desc_a, desc_b, scale_d predicate, transpose; RS: four A registers, desc_b,
// scale_d predicate, transpose).
#define SDPA_WGMMA_D8(i) "+f"(d[(i)]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), \
                         "+f"(d[(i) + 4]), "+f"(d[(i) + 5]), "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define SDPA_WGMMA_N48_REGS "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23}"
#define SDPA_WGMMA_N48_OUTS SDPA_WGMMA_D8(0), SDPA_WGMMA_D8(8), SDPA_WGMMA_D8(16)
#define SDPA_WGMMA_N48_SS_PRED "%26"
#define SDPA_WGMMA_N48_SS_OPS "%24, %25, p, 1, 1, 0, %27"
#define SDPA_WGMMA_N48_RS_PRED "%29"
#define SDPA_WGMMA_N48_RS_OPS "{%24, %25, %26, %27}, %28, p, 1, 1, %30"
#define SDPA_WGMMA_N64_REGS "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define SDPA_WGMMA_N64_OUTS SDPA_WGMMA_D8(0), SDPA_WGMMA_D8(8), SDPA_WGMMA_D8(16), SDPA_WGMMA_D8(24)
#define SDPA_WGMMA_N64_SS_PRED "%34"
#define SDPA_WGMMA_N64_SS_OPS "%32, %33, p, 1, 1, 0, %35"
#define SDPA_WGMMA_N64_RS_PRED "%37"
#define SDPA_WGMMA_N64_RS_OPS "{%32, %33, %34, %35}, %36, p, 1, 1, %38"
#define SDPA_WGMMA_N128_REGS "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define SDPA_WGMMA_N128_OUTS SDPA_WGMMA_D8(0), SDPA_WGMMA_D8(8), SDPA_WGMMA_D8(16), SDPA_WGMMA_D8(24), SDPA_WGMMA_D8(32), SDPA_WGMMA_D8(40), SDPA_WGMMA_D8(48), SDPA_WGMMA_D8(56)
#define SDPA_WGMMA_N128_SS_PRED "%66"
#define SDPA_WGMMA_N128_SS_OPS "%64, %65, p, 1, 1, 0, %67"
#define SDPA_WGMMA_N128_RS_PRED "%69"
#define SDPA_WGMMA_N128_RS_OPS "{%64, %65, %66, %67}, %68, p, 1, 1, %70"
#define SDPA_WGMMA_N176_REGS "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87}"
#define SDPA_WGMMA_N176_OUTS SDPA_WGMMA_D8(0), SDPA_WGMMA_D8(8), SDPA_WGMMA_D8(16), SDPA_WGMMA_D8(24), SDPA_WGMMA_D8(32), SDPA_WGMMA_D8(40), SDPA_WGMMA_D8(48), SDPA_WGMMA_D8(56), SDPA_WGMMA_D8(64), SDPA_WGMMA_D8(72), SDPA_WGMMA_D8(80)
#define SDPA_WGMMA_N176_SS_PRED "%90"
#define SDPA_WGMMA_N176_SS_OPS "%88, %89, p, 1, 1, 0, %91"
#define SDPA_WGMMA_N176_RS_PRED "%93"
#define SDPA_WGMMA_N176_RS_OPS "{%88, %89, %90, %91}, %92, p, 1, 1, %94"
#define SDPA_WGMMA_N192_REGS "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}"
#define SDPA_WGMMA_N192_OUTS SDPA_WGMMA_D8(0), SDPA_WGMMA_D8(8), SDPA_WGMMA_D8(16), SDPA_WGMMA_D8(24), SDPA_WGMMA_D8(32), SDPA_WGMMA_D8(40), SDPA_WGMMA_D8(48), SDPA_WGMMA_D8(56), SDPA_WGMMA_D8(64), SDPA_WGMMA_D8(72), SDPA_WGMMA_D8(80), SDPA_WGMMA_D8(88)
#define SDPA_WGMMA_N192_SS_PRED "%98"
#define SDPA_WGMMA_N192_SS_OPS "%96, %97, p, 1, 1, 0, %99"
#define SDPA_WGMMA_N192_RS_PRED "%101"
#define SDPA_WGMMA_N192_RS_OPS "{%96, %97, %98, %99}, %100, p, 1, 1, %102"

// D[64xN] (+)= A[64x16] . B[16xN]. ss: A and B from shared-memory descriptors. rs: A from
// registers (mma.sync A-fragment layout per warp: rows 16*warp.., see sdpa_mma.cuh), B from
// a descriptor.
#define SDPA_WGMMA(T, PTX_T, N)                                                                     \
  template <>                                                                                       \
  struct Wgmma<T, N> {                                                                              \
    template <int kTransB>                                                                          \
    static __device__ __forceinline__ void ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,  \
                                              int scale_d) {                                        \
      static_assert(kTransB == 0 || kTransB == 1, "transpose flag is 0 or 1");                      \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SDPA_WGMMA_N##N##_SS_PRED ", 0;\n"          \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_T "." PTX_T " "            \
                   SDPA_WGMMA_N##N##_REGS ", " SDPA_WGMMA_N##N##_SS_OPS ";\n}\n"                    \
                   : SDPA_WGMMA_N##N##_OUTS                                                         \
                   : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransB));                         \
    }                                                                                               \
    template <int kTransB>                                                                          \
    static __device__ __forceinline__ void rs(float (&d)[N / 2], const uint32_t (&a)[4],            \
                                              uint64_t desc_b, int scale_d) {                       \
      static_assert(kTransB == 0 || kTransB == 1, "transpose flag is 0 or 1");                      \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SDPA_WGMMA_N##N##_RS_PRED ", 0;\n"          \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_T "." PTX_T " "            \
                   SDPA_WGMMA_N##N##_REGS ", " SDPA_WGMMA_N##N##_RS_OPS ";\n}\n"                    \
                   : SDPA_WGMMA_N##N##_OUTS                                                         \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d),         \
                     "n"(kTransB));                                                                 \
    }                                                                                               \
  };

SDPA_WGMMA(__half, "f16", 48)
SDPA_WGMMA(__half, "f16", 64)
SDPA_WGMMA(__half, "f16", 128)
SDPA_WGMMA(__half, "f16", 176)
SDPA_WGMMA(__half, "f16", 192)
SDPA_WGMMA(__nv_bfloat16, "bf16", 48)
SDPA_WGMMA(__nv_bfloat16, "bf16", 64)
SDPA_WGMMA(__nv_bfloat16, "bf16", 128)
SDPA_WGMMA(__nv_bfloat16, "bf16", 176)
SDPA_WGMMA(__nv_bfloat16, "bf16", 192)
#undef SDPA_WGMMA

}  // namespace sdpa_wgmma
