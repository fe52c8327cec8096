// sdpa_common.cuh: small device/host helpers shared by every sdpa stage.
//
// Kept deliberately generic and stable (the other shared headers build on it):
// dtype traits, 16-byte vector packing, ceil_div, the shared-memory limit, the
// (dtype, head_dim) -> template dispatch, the exp2 softmax constant and its
// online-softmax step, lane reductions, masking helpers and the cp.async
// wrappers. Every name is prefixed `sdpa_` / `Sdpa` so it cannot collide with a
// stage's own helpers.
#pragma once

#include <cstdint>
#include <type_traits>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "sdpa_api.h"

// ---------------------------------------------------------------------------
// Softmax in base 2.
// softmax(x)_j = exp(x_j - m) / sum exp(x_k - m), and exp(y) = 2^(y * log2(e))
// because e^y = (2^log2(e))^y. exp2f maps to one MUFU.EX2 instruction, expf to
// an extra multiply plus EX2, so kernels fold log2(e) into the score scale once:
//   s2 = (q . k) * softmax_scale * kSdpaLog2e,   p = exp2f(s2 - m2)
// where m2 is the running row max measured in the same base-2 units. Since
// exp2(s2 - m2) == exp(s - m) exactly in real arithmetic, the result is the
// ordinary softmax. log2(e) = 1 / ln(2) = 1.4426950408889634...
constexpr float kSdpaLog2e = 1.4426950408889634f;

// ---------------------------------------------------------------------------
// Integer helpers.
template <class I>
__host__ __device__ constexpr I sdpa_ceil_div(I a, I b) { return (a + b - 1) / b; }

// 16 bytes is the widest single global/shared access (LDG.128 / cp.async.cg).
using SdpaVec16 = uint4;
constexpr int kSdpaVecBytes = static_cast<int>(sizeof(SdpaVec16));
static_assert(kSdpaVecBytes == 16, "uint4 must be 16 bytes");

// Shared memory one block may use, in bytes: the sm_90 per-block opt-in maximum
// (cudaDevAttrMaxSharedMemoryPerBlockOptin). An SM has 228 KiB of shared memory
// and the runtime reserves 1 KiB of it per resident block, so a single block can
// opt in to at most 228 - 1 = 227 KiB = 232448 bytes. Static and dynamic shared
// memory together must stay within it; every stage's layout asserts against this.
constexpr size_t kSdpaMaxSmemPerBlock = 227 * 1024;

// ---------------------------------------------------------------------------
// dtype traits. T is the storage type (__half or __nv_bfloat16); Pair is its
// 2-wide type, used to unpack a 16-byte vector with 4 paired conversions.
template <class T> struct SdpaTraits;

// One specialization per type: its pair type, its SdpaDtype and its CUDA conversion intrinsics
// (scalar to / from float, pair to float2, two floats to a pair; round-to-nearest).
#define SDPA_TRAITS(T, PAIR, DTYPE, TO_FLOAT, FROM_FLOAT, PAIR_TO_FLOAT2, FLOATS_TO_PAIR)                    \
  template <> struct SdpaTraits<T> {                                                                         \
    using Pair = PAIR;                                                                                       \
    static constexpr SdpaDtype kDtype = DTYPE;                                                               \
    static __device__ __forceinline__ float to_float(T x) { return TO_FLOAT(x); }                            \
    static __device__ __forceinline__ T from_float(float x) { return FROM_FLOAT(x); }                        \
    static __device__ __forceinline__ float2 pair_to_float2(Pair x) { return PAIR_TO_FLOAT2(x); }            \
    static __device__ __forceinline__ Pair float2_to_pair(float a, float b) { return FLOATS_TO_PAIR(a, b); } \
  };
SDPA_TRAITS(__half, __half2, kSdpaFloat16, __half2float, __float2half_rn, __half22float2, __floats2half2_rn)
SDPA_TRAITS(__nv_bfloat16, __nv_bfloat162, kSdpaBFloat16, __bfloat162float, __float2bfloat16_rn, __bfloat1622float2,
            __floats2bfloat162_rn)
#undef SDPA_TRAITS

// Elements of T per 16-byte vector (8 for both 2-byte types).
template <class T>
constexpr int kSdpaVecElems = kSdpaVecBytes / static_cast<int>(sizeof(T));

// 16-byte vector <-> kSdpaVecElems floats.
template <class T>
__device__ __forceinline__ void sdpa_vec_to_float(const SdpaVec16& v, float* out) {
  static_assert(sizeof(T) == 2, "only 2-byte storage types are packed");
  const auto* pairs = reinterpret_cast<const typename SdpaTraits<T>::Pair*>(&v);
#pragma unroll
  for (int i = 0; i < kSdpaVecElems<T> / 2; ++i) {
    float2 f = SdpaTraits<T>::pair_to_float2(pairs[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

template <class T>
__device__ __forceinline__ SdpaVec16 sdpa_float_to_vec(const float* in) {
  static_assert(sizeof(T) == 2, "only 2-byte storage types are packed");
  SdpaVec16 v;
  auto* pairs = reinterpret_cast<typename SdpaTraits<T>::Pair*>(&v);
#pragma unroll
  for (int i = 0; i < kSdpaVecElems<T> / 2; ++i)
    pairs[i] = SdpaTraits<T>::float2_to_pair(in[2 * i], in[2 * i + 1]);
  return v;
}

// ---------------------------------------------------------------------------
// Tensor addressing: pointer to element [b, h, 0, 0] of a [B, H, S, D] tensor.
template <class T>
__host__ __device__ __forceinline__ T* sdpa_head_ptr(T* base, const SdpaTensorStrides& s,
                                                     int b, int h) {
  return base + static_cast<int64_t>(b) * s.batch + static_cast<int64_t>(h) * s.head;
}

// Element [b, h, 0, 0] of all four tensors of a problem.
template <class T>
struct SdpaHeadPtrs {
  const T* q;
  const T* k;
  const T* v;
  T* o;
};
template <class T>
__device__ __forceinline__ SdpaHeadPtrs<T> sdpa_head_ptrs(const SdpaProblem& p, int b, int h) {
  return {sdpa_head_ptr(static_cast<const T*>(p.q), p.q_strides, b, h),
          sdpa_head_ptr(static_cast<const T*>(p.k), p.k_strides, b, h),
          sdpa_head_ptr(static_cast<const T*>(p.v), p.v_strides, b, h),
          sdpa_head_ptr(static_cast<T*>(p.out), p.out_strides, b, h)};
}

// ---------------------------------------------------------------------------
// Masking. Query i may attend key j iff j is a real key (j < seq_len) and,
// when causal, j <= i. Padded query rows (i >= seq_len) are computed but never
// stored, so they need no special case beyond not being written.
__device__ __forceinline__ bool sdpa_key_visible(int q_idx, int k_idx, int seq_len, bool causal) {
  return k_idx < seq_len && (!causal || k_idx <= q_idx);
}

// One past the last key any query of the tile [q_begin, q_begin + block_m)
// can see: causal tiles stop at their own diagonal, so later K/V tiles are
// skipped entirely (about half the work for long causal sequences).
__host__ __device__ __forceinline__ int sdpa_kv_end(int q_begin, int block_m, int seq_len,
                                                    bool causal) {
  const int diag_end = q_begin + block_m;
  return (causal && diag_end < seq_len) ? diag_end : seq_len;
}

// Masked scores are -inf. If every score a row has seen so far is -inf the
// running max is -inf too and exp2(-inf - -inf) would be NaN; subtracting 0
// instead makes every p exactly 0 and the rescale factor exp2(-inf - 0) = 0.
__device__ __forceinline__ float sdpa_softmax_base(float running_max) {
  return running_max == -INFINITY ? 0.0f : running_max;
}

// A score that query q_idx may not see becomes -inf (exp2 -> exactly 0).
__device__ __forceinline__ float sdpa_mask_score(float score, int q_idx, int k_idx, int seq_len,
                                                 bool causal) {
  return sdpa_key_visible(q_idx, k_idx, seq_len, causal) ? score : -INFINITY;
}

// ---------------------------------------------------------------------------
// Online softmax (FlashAttention): a row keeps its running max m (base-2 units)
// and running sum l of exp2(s - m); when a new tile raises the max to m_new,
// everything accumulated so far is rescaled by alpha = exp2(m - m_new) and the
// tile's probabilities are p = exp2(s - m_new). With the -inf-safe base,
// alpha is 0 on the first visible tile (m = -inf) and never NaN.
struct SdpaSoftmaxStep {
  float base;   // subtract from this tile's scores before exp2
  float alpha;  // multiply l and the output accumulator by this
};
__device__ __forceinline__ SdpaSoftmaxStep sdpa_softmax_step(float& running_max, float new_max) {
  const float base = sdpa_softmax_base(new_max);
  const float alpha = exp2f(running_max - base);
  running_max = new_max;
  return {base, alpha};
}

// ---------------------------------------------------------------------------
// Reductions over the kLanes consecutive lanes that share one row (kLanes a
// power of two <= 32, rows aligned to kLanes): xor butterflies, every lane ends
// with the result.
template <int kLanes>
__device__ __forceinline__ float sdpa_lanes_sum(float x) {
#pragma unroll
  for (int offset = 1; offset < kLanes; offset *= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}
template <int kLanes>
__device__ __forceinline__ float sdpa_lanes_max(float x) {
#pragma unroll
  for (int offset = 1; offset < kLanes; offset *= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

// ---------------------------------------------------------------------------
// cp.async (sm_80+): 16-byte global -> shared copies that bypass registers.
// src_bytes < 16 zero-fills the rest of the destination; src_bytes == 0 is how
// out-of-range rows are padded with zeros without touching global memory (the
// source address must still be a valid pointer, so callers pass a clamped one).
__device__ __forceinline__ void sdpa_cp_async_16(void* smem_dst, const void* gmem_src,
                                                 int src_bytes) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void sdpa_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Wait until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void sdpa_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// One [rows x D] tile to fill: shared destination (row stride kLd elements, set
// by the caller's template) and the head slice it copies from.
template <class T>
struct SdpaRowsCopy {
  T* dst;
  const T* src;
  int64_t seq_stride;  // elements between consecutive rows of src
};

// Copies rows [row0, row0 + kRows) of every given head slice into its shared
// tile with kThreads cooperating threads, one 16-byte cp.async per vector; the
// tiles are copied in lockstep (vector i of each tile, then vector i + 1).
// Rows at or past seq_len are zero-filled (src-size 0) from a clamped source
// row that is never read.
template <class T, int D, int kRows, int kLd, int kThreads, class... Tiles>
__device__ __forceinline__ void sdpa_load_rows_async(int row0, int seq_len, int tid,
                                                     const Tiles&... tiles) {
  constexpr int kVec = kSdpaVecElems<T>;
  constexpr int kVecsPerRow = D / kVec;
  constexpr int kVecs = kRows * kVecsPerRow;
  static_assert(D % kVec == 0 && kLd % kVec == 0, "rows are whole, 16-byte aligned vectors");
  static_assert(kVecs % kThreads == 0, "each thread copies a whole number of vectors");
#pragma unroll
  for (int i = 0; i < kVecs / kThreads; ++i) {
    const int e = tid + i * kThreads;
    const int r = e / kVecsPerRow;
    const int col = (e % kVecsPerRow) * kVec;
    const int row = row0 + r;
    const bool in = row < seq_len;
    (sdpa_cp_async_16(tiles.dst + r * kLd + col, tiles.src + (in ? row : 0) * tiles.seq_stride + col,
                      in ? kSdpaVecBytes : 0),
     ...);
  }
}

// ---------------------------------------------------------------------------
// Host side: validation and (dtype, head_dim) -> template dispatch.

// Tags carried into a generic lambda so a stage writes its launcher once:
//   return sdpa_dispatch(*p, [&](auto tag, auto hd) {
//     using T = typename decltype(tag)::type;
//     constexpr int D = decltype(hd)::value;
//     return launch<T, D>(*p, stream);
//   });
template <class T> struct SdpaTypeTag { using type = T; };
template <int D> using SdpaHeadDim = std::integral_constant<int, D>;

template <class Fn>
inline cudaError_t sdpa_dispatch(const SdpaProblem& p, Fn&& fn) {
  if (p.dtype == kSdpaFloat16) {
    if (p.head_dim == 64) return fn(SdpaTypeTag<__half>{}, SdpaHeadDim<64>{});
    if (p.head_dim == 128) return fn(SdpaTypeTag<__half>{}, SdpaHeadDim<128>{});
  } else if (p.dtype == kSdpaBFloat16) {
    if (p.head_dim == 64) return fn(SdpaTypeTag<__nv_bfloat16>{}, SdpaHeadDim<64>{});
    if (p.head_dim == 128) return fn(SdpaTypeTag<__nv_bfloat16>{}, SdpaHeadDim<128>{});
  }
  return cudaErrorInvalidValue;
}

// Grid convention of every stage: x = query tiles, y = heads, z = batch.
// gridDim.y and gridDim.z are limited to 65535.
constexpr int kSdpaMaxGridYZ = 65535;

// Common shape checks. Returns cudaSuccess when the problem is launchable;
// callers treat an empty problem (any extent 0) as a no-op before calling it.
// A stage that takes grouped-query attention and kv_seq_len != seq_len (sdpa_api.h) defines
// SDPA_GENERAL_PROBLEM 1 before its includes; every other stage rejects those problems here.
#ifndef SDPA_GENERAL_PROBLEM
#define SDPA_GENERAL_PROBLEM 0
#endif
constexpr bool kSdpaGeneralProblem = SDPA_GENERAL_PROBLEM != 0;

inline cudaError_t sdpa_check_problem(const SdpaProblem& p) {
  if (p.q == nullptr || p.k == nullptr || p.v == nullptr || p.out == nullptr)
    return cudaErrorInvalidValue;
  if (p.batch < 0 || p.heads < 0 || p.seq_len < 0) return cudaErrorInvalidValue;
  if (p.kv_heads < 1 || p.kv_seq_len < 0 || p.heads % p.kv_heads != 0) return cudaErrorInvalidValue;
  const bool plain = p.kv_heads == p.heads && p.kv_seq_len == p.seq_len;
  if (!plain && !kSdpaGeneralProblem) return cudaErrorInvalidValue;
  // bottom-right causal alignment leaves the first seq_len - kv_seq_len queries no key
  if (p.causal && p.kv_seq_len < p.seq_len) return cudaErrorInvalidValue;
  if (p.heads > kSdpaMaxGridYZ || p.batch > kSdpaMaxGridYZ) return cudaErrorInvalidValue;
  if (p.head_dim != 64 && p.head_dim != 128) return cudaErrorInvalidValue;
  return cudaSuccess;
}

inline bool sdpa_problem_is_empty(const SdpaProblem& p) {
  return p.batch == 0 || p.heads == 0 || p.seq_len == 0 || p.kv_seq_len == 0;
}

// 16-byte vector access of a row needs a 16-byte aligned base pointer and
// strides that are whole vectors (multiples of 8 two-byte elements).
inline bool sdpa_vec16_ok(const void* ptr, const SdpaTensorStrides& s, int elem_bytes) {
  const int64_t vec = kSdpaVecBytes / elem_bytes;
  return (reinterpret_cast<uintptr_t>(ptr) % kSdpaVecBytes) == 0 && s.batch % vec == 0 &&
         s.head % vec == 0 && s.seq % vec == 0;
}
inline bool sdpa_problem_vec16_ok(const SdpaProblem& p) {
  constexpr int kElemBytes = 2;  // fp16 and bf16
  return sdpa_vec16_ok(p.q, p.q_strides, kElemBytes) &&
         sdpa_vec16_ok(p.k, p.k_strides, kElemBytes) &&
         sdpa_vec16_ok(p.v, p.v_strides, kElemBytes) &&
         sdpa_vec16_ok(p.out, p.out_strides, kElemBytes);
}

// Opt a kernel in to more than 48 KB of dynamic shared memory (required by the
// runtime for any launch above the static 48 KB default).
template <class Kernel>
inline cudaError_t sdpa_set_smem(Kernel kernel, size_t smem_bytes) {
  constexpr size_t kDefaultSmemLimit = 48 * 1024;
  if (smem_bytes <= kDefaultSmemLimit) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(smem_bytes));
}
