// sdpa_mma.cuh -- warp-level tensor-core and async-copy building blocks for the
// register-softmax attention stages (s3b_register_softmax, s4_pipeline3, and
// whatever comes after them).
//
// Everything here is a thin, documented wrapper around one PTX instruction (or a
// short fixed sequence of them) plus the index arithmetic that goes with it:
//
//   cp.async.cg.shared.global 16 B   global -> shared without a register hop,
//                                    zero-filled when the source row is invalid
//   ldmatrix.sync.aligned.m8n8.x4    four 8x8 b16 tiles, one 16 B row per lane
//   ldmatrix ... .trans              same, transposed (row-major V as a "col" B)
//   mma.sync.aligned.m16n8k16        row.col, f16 or bf16 inputs, f32 accumulate
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16"), with
// g = lane / 4 (the "group") and t = lane % 4 (the "thread in group"):
//   A (16x16, row-major), 4 x b32 regs, each two consecutive-k halves:
//     a0: row g,   k 2t..2t+1      a1: row g+8, k 2t..2t+1
//     a2: row g,   k 2t+8..2t+9    a3: row g+8, k 2t+8..2t+9
//   B (16x8, "col"), 2 x b32 regs:
//     b0: k 2t..2t+1, col g        b1: k 2t+8..2t+9, col g
//   C/D (16x8, f32), 4 floats:
//     c0,c1: row g, cols 2t,2t+1   c2,c3: row g+8, cols 2t,2t+1
// Consequence used by the kernels: the C fragments of two adjacent n8 tiles
// (cols 0..7 and 8..15), packed pairwise to 16 bit, are exactly the A fragment
// of one k16 slice: {pack(c0,c1) of tile 0, pack(c2,c3) of tile 0,
// pack(c0,c1) of tile 1, pack(c2,c3) of tile 1} = {a0, a1, a2, a3}. So
// P = softmax(S) feeds P.V straight from registers.
//
// Shared-memory tiles are row-major [rows][cols] of 16-bit elements, stored in
// 16-byte "chunks" (8 elements, one ldmatrix row / one cp.async). The chunk
// index is XOR-swizzled with (row % 8): the 8 row addresses one 8x8 ldmatrix
// tile touches then land in 8 distinct 16-byte bank groups, i.e. all 32 banks,
// so every ldmatrix phase is conflict-free without padding (and cp.async
// writes of a whole row are contiguous 16-byte pieces, also conflict-free).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// dtype traits, kSdpaVecBytes, sdpa_ceil_div, the cp.async commit/wait
// wrappers, the -inf-safe softmax base, log2(e) and the host dispatch.
#include "sdpa_common.cuh"

namespace sdpa_mma {

// ---------------------------------------------------------------- geometry --
constexpr int kWarpSize = 32;
// mma.sync.m16n8k16 tile shape.
constexpr int kMmaM = 16;
constexpr int kMmaN = 8;
constexpr int kMmaK = 16;
// One cp.async / one ldmatrix row moves 16 bytes (one "vector" in sdpa_common).
constexpr int kChunkBytes = kSdpaVecBytes;
// Threads that share one accumulator row in the C layout (t = lane % 4).
constexpr int kQuadSize = 4;
// ldmatrix tile edge (8x8 b16) and the swizzle period: XOR-ing the chunk index
// with (row % kSwizzleRows) spreads 8 consecutive rows over 8 bank groups.
constexpr int kLdmRows = 8;
constexpr int kSwizzleRows = 8;
constexpr int kSmemBanks = 32;    // shared-memory banks per SM
constexpr int kSmemBankBytes = 4; // bytes per bank per cycle
constexpr int kBankGroupBytes = kSmemBanks * kSmemBankBytes / kSwizzleRows;
static_assert(kBankGroupBytes == kChunkBytes, "swizzle assumes one chunk per bank group");

// Elements of a 16-bit type per 16-byte chunk.
template <typename T>
__host__ __device__ constexpr int elems_per_chunk() {
  static_assert(sizeof(T) == 2, "tiles hold 16-bit elements");
  return kSdpaVecElems<T>;
}

// Byte offset of (row, chunk) inside a swizzled row-major tile whose rows are
// kRowChunks chunks long. Needs kRowChunks to be a multiple of kSwizzleRows so
// the XOR stays inside the row.
template <int kRowChunks>
__device__ __forceinline__ uint32_t swizzled_offset(int row, int chunk) {
  static_assert(kRowChunks % kSwizzleRows == 0, "swizzle needs >= 8 chunks (128 B) per row");
  return static_cast<uint32_t>((row * kRowChunks + (chunk ^ (row % kSwizzleRows))) * kChunkBytes);
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------- cp.async --
// 16-byte global->shared copy addressed by a 32-bit shared-window address (so
// the swizzled offsets are plain integer adds, no per-copy cvta as in
// sdpa_cp_async_16). When !valid the source size is 0 and the 16
// destination bytes are zero-filled (PTX: src-size < cp-size fills zeros), so
// padded rows of a partial tile read as 0 and never touch out-of-range memory
// (the caller still passes an in-range address).
__device__ __forceinline__ void cp_async_16(uint32_t smem_dst, const void* gmem_src, bool valid) {
  const int src_bytes = valid ? kChunkBytes : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_dst), "l"(gmem_src),
               "n"(kChunkBytes), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { sdpa_cp_async_commit(); }
// Wait until at most kPending of this thread's committed groups are in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  static_assert(kPending >= 0, "wait_group count is non-negative");
  sdpa_cp_async_wait<kPending>();
}

// Hides a value's provenance from the optimizer (an empty volatile asm that
// "modifies" it). Addresses derived from it are then recomputed next to their
// use, a couple of integer ops each, instead of being hoisted out of the key
// loop into dozens of long-lived registers (which cost occupancy or spills).
__device__ __forceinline__ int64_t opaque(int64_t x) {
  asm volatile("" : "+l"(x));
  return x;
}

// Copies a [kRows x kCols] tile of 16-bit T (row stride `row_stride` elements
// in global memory) into a swizzled shared tile with kThreads cooperating
// threads. Rows >= valid_rows are zero-filled. Row 0 must be valid.
// Thread tid always copies chunk column tid % kRowChunks; successive passes
// move down kRowsPerPass rows, a multiple of the swizzle period, so the
// swizzled chunk is the same in every pass and the shared address is one
// register plus an immediate.
template <typename T, int kRows, int kCols, int kThreads>
__device__ __forceinline__ void load_tile_async(uint32_t smem_tile, const T* gmem, int64_t row_stride,
                                                int valid_rows, int tid) {
  constexpr int kElems = elems_per_chunk<T>();
  static_assert(kCols % kElems == 0, "rows are whole 16-byte chunks");
  constexpr int kRowChunks = kCols / kElems;
  static_assert(kThreads % kRowChunks == 0, "each thread keeps one chunk column");
  constexpr int kRowsPerPass = kThreads / kRowChunks;
  static_assert(kRows % kRowsPerPass == 0, "every thread copies the same number of chunks");
  static_assert(kRowsPerPass % kSwizzleRows == 0, "passes keep row % 8, hence the swizzled chunk");
  constexpr uint32_t kPassBytes = kRowsPerPass * kRowChunks * kChunkBytes;
  const int row0 = tid / kRowChunks;
  const int chunk = tid % kRowChunks;
  const uint32_t dst = smem_tile + swizzled_offset<kRowChunks>(row0, chunk);
  const int64_t pass_stride = opaque(row_stride * kRowsPerPass);
  const T* src = gmem + row0 * row_stride + chunk * kElems;
#pragma unroll
  for (int i = 0; i < kRows / kRowsPerPass; ++i) {
    const bool valid = row0 + i * kRowsPerPass < valid_rows;
    cp_async_16(dst + i * kPassBytes, valid ? src : gmem, valid);
    src += pass_stride;
  }
}

// ---------------------------------------------------------------- ldmatrix --
// volatile + "memory": these read shared memory written by cp.async/st.shared
// and must not be hoisted above the __syncthreads() that publishes it.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem)
               : "memory");
}

// stmatrix (sm_90): four 8x8 b16 tiles from registers, lane l giving the
// address of tile l / 8's row l % 8 (16 bytes); register j of lane l holds
// tile j's row l / 4, b16 columns 2 (l % 4) and 2 (l % 4) + 1, as ldmatrix gives them.
__device__ __forceinline__ void stmatrix_x4(uint32_t smem, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
               :
               : "r"(smem), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// Lane -> (row, chunk) of the 16-byte row it addresses for the three x4 loads
// the kernels use. Lane l feeds the row address of 8x8 tile (l / 8), row l % 8.
//
// A operand (16x16 at rows r0.., chunks c0, c0+1): tiles {rows 0-7 | 8-15} x
// {k lo | k hi} in a0..a3 order => row = l % 16, chunk = l / 16.
__device__ __forceinline__ int ldm_a_row(int lane) { return lane % (2 * kLdmRows); }
__device__ __forceinline__ int ldm_a_chunk(int lane) { return lane / (2 * kLdmRows); }
// B operand from an [n][k] row-major tile (K for S = Q.K^T), two n8 tiles x one
// k16 slice: tiles {n 0-7, k lo}, {n 0-7, k hi}, {n 8-15, k lo}, {n 8-15, k hi}
// => regs {b0, b1} of n-tile 0 then {b0, b1} of n-tile 1.
__device__ __forceinline__ int ldm_bn_row(int lane) {
  return lane % kLdmRows + (lane / (2 * kLdmRows)) * kLdmRows;
}
__device__ __forceinline__ int ldm_bn_chunk(int lane) { return (lane / kLdmRows) % 2; }
// B operand from a [k][n] row-major tile (V for O = P.V) with .trans, one k16
// slice x two n8 tiles: tiles {k 0-7, n lo}, {k 8-15, n lo}, {k 0-7, n hi},
// {k 8-15, n hi} => regs {b0, b1} of n-tile 0 then {b0, b1} of n-tile 1.
__device__ __forceinline__ int ldm_bt_row(int lane) {
  return lane % kLdmRows + ((lane / kLdmRows) % 2) * kLdmRows;
}
__device__ __forceinline__ int ldm_bt_chunk(int lane) { return lane / (2 * kLdmRows); }

// Per-lane part of a swizzled ldmatrix address. The lane addresses row
// (row_base + lane_row) and chunk (chunk_base + lane_chunk), where the loops
// pass row_base a multiple of 8 and chunk_base even (both compile-time after
// unrolling) and lane_chunk is 0 or 1. Then the swizzle key is lane_row % 8 for
// every row_base, and (chunk_base + lane_chunk) ^ key
//   == (chunk_base & ~7) + ((chunk_base % 8) ^ (lane_chunk ^ key)),
// so an address is one per-lane register XOR/plus immediates: at most 4
// distinct per-lane values per operand (chunk_base % 8 in {0, 2, 4, 6}).
template <int kRowChunks>
struct LdmLane {
  static constexpr int kRowBytes = kRowChunks * kChunkBytes;
  uint32_t row_bytes;  // byte offset of the lane's row (row_base excluded)
  int key;             // lane_chunk ^ (lane_row % 8)
  __device__ __forceinline__ LdmLane(int lane_row, int lane_chunk)
      : row_bytes(static_cast<uint32_t>(lane_row * kRowBytes)), key(lane_chunk ^ (lane_row % kSwizzleRows)) {}
  __device__ __forceinline__ uint32_t offset(int row_base, int chunk_base) const {
    const int chunk = (chunk_base & ~(kSwizzleRows - 1)) + ((chunk_base % kSwizzleRows) ^ key);
    return row_bytes + static_cast<uint32_t>(row_base * kRowBytes + chunk * kChunkBytes);
  }
};

// ------------------------------------------------------------------- mma ---
// D += A.B for one m16n8k16 tile, fp32 accumulate. Not volatile: pure register
// op, so the compiler may interleave it with the ldmatrix loads.
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

// One specialization per 16-bit input type; PTX_TYPE: its name in the instruction (f16, bf16).
#define SDPA_MMA_M16N8K16(T, PTX_TYPE)                                                                \
  template <>                                                                                         \
  __device__ __forceinline__ void mma_m16n8k16<T>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, \
                                                  uint32_t b1) {                                      \
    asm("mma.sync.aligned.m16n8k16.row.col.f32." PTX_TYPE "." PTX_TYPE ".f32 "                        \
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"                           \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                              \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));                              \
  }
SDPA_MMA_M16N8K16(__half, "f16")
SDPA_MMA_M16N8K16(__nv_bfloat16, "bf16")
#undef SDPA_MMA_M16N8K16

// ------------------------------------------------------------- conversion --
// Two fp32 -> one b32 register of two 16-bit values, `lo` in the low half
// (the lower column index, as the A/B fragments expect). Round-to-nearest.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);

template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

// --------------------------------------------------------- quad reductions --
// Row reductions over the 4 lanes (t = 0..3) that hold one accumulator row.
__device__ __forceinline__ float quad_max(float x) {
#pragma unroll
  for (int offset = 1; offset < kQuadSize; offset *= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}
__device__ __forceinline__ float quad_sum(float x) {
#pragma unroll
  for (int offset = 1; offset < kQuadSize; offset *= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

}  // namespace sdpa_mma
