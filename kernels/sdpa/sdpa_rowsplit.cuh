// sdpa_rowsplit.cuh: CUDA-core building blocks of the scalar stages (s0_baseline,
// s1_cp_async): kThreadsPerRow consecutive lanes share one query row, each owning
// D / kThreadsPerRow of the head dimension.
//
// A lane's part of a row is a set of "slices" interleaved over the row's lanes:
// slice c of lane `part` covers elements [(c * kThreadsPerRow + part) * E, +E),
// E elements of one 16-byte word, so the lanes of a row read adjacent 16-byte
// words of a K/V row in shared memory (no bank conflicts) and all rows of a
// warp read the same K/V row (a broadcast). How a slice of a K/V row turns into
// E floats depends on how the stage stores its tiles: SdpaRowSlice<float> for
// fp32 tiles (s0), SdpaRowSlice<T> for tiles kept in the 16-bit input dtype (s1).
//
// Scores are produced kKeyChunk keys at a time (sdpa_rowsplit_scores), so the
// running-max rescale (one exp2 plus D / kThreadsPerRow multiplies) is paid once
// per chunk rather than once per key, while only kKeyChunk scores live in
// registers; then sdpa_rowsplit_pv folds the chunk into the fp32 accumulator.
#pragma once

#include <cuda_runtime.h>

#include "sdpa_common.cuh"
#include "sdpa_export.cuh"

// A scalar stage's config string: its id, the knobs, then EXTRA.
#define SDPA_ROWSPLIT_CONFIG(STAGE_ID, EXTRA)                                                 \
  STAGE_ID " BLOCK_M=" SDPA_STR(BLOCK_M) " BLOCK_N=" SDPA_STR(BLOCK_N) " THREADS_PER_ROW="  \
  SDPA_STR(THREADS_PER_ROW) " KEY_CHUNK=" SDPA_STR(KEY_CHUNK) " THREADS=" SDPA_STR(BLOCK_M)   \
  "*" SDPA_STR(THREADS_PER_ROW) EXTRA

// Tiling of the row-split layout, shared by the scalar stages.
template <int kBlockM_, int kBlockN_, int kThreadsPerRow_, int kKeyChunk_>
struct SdpaRowSplitTraits {
  static constexpr int kBlockM = kBlockM_;              // query rows per block
  static constexpr int kBlockN = kBlockN_;              // key/value tile rows
  static constexpr int kThreadsPerRow = kThreadsPerRow_;
  static constexpr int kKeyChunk = kKeyChunk_;          // scores in registers at once
  static constexpr int kThreads = kBlockM * kThreadsPerRow;
  static constexpr int kWarpSize = 32;

  static_assert(kThreadsPerRow >= 1 && (kThreadsPerRow & (kThreadsPerRow - 1)) == 0 &&
                    kThreadsPerRow <= kWarpSize,
                "THREADS_PER_ROW must be a power of two <= 32 so a row's lanes sit in one warp "
                "and reduce with xor shuffles");
  static_assert(kThreads % kWarpSize == 0, "BLOCK_M * THREADS_PER_ROW must be whole warps");
  static_assert(kThreads <= 1024, "at most 1024 threads per block");
  static_assert(kBlockN % kKeyChunk == 0, "BLOCK_N must be a multiple of KEY_CHUNK");
};

// One lane's slice of a K/V row in shared memory, as kElems floats.
template <class E>
struct SdpaRowSlice {  // 16-bit input dtype: one 16-byte vector, 8 elements
  static constexpr int kElems = kSdpaVecElems<E>;
  static __device__ __forceinline__ void load(const E* src, float (&out)[kElems]) {
    sdpa_vec_to_float<E>(*reinterpret_cast<const SdpaVec16*>(src), out);
  }
};
template <>
struct SdpaRowSlice<float> {  // fp32 tiles: one float4
  static constexpr int kElems = 4;
  static __device__ __forceinline__ void load(const float* src, float (&out)[kElems]) {
    const float4 v = *reinterpret_cast<const float4*>(src);
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
    out[3] = v.w;
  }
};

// Scores of keys kv_begin + j0 + [0, kKeyChunk) for this lane's query row q_idx:
// q (already scaled to base-2 units) dotted with rows j0.. of the shared K tile
// (row stride D elements), reduced over the row's lanes and masked to -inf.
// Returns the chunk's max.
template <class Tr, int D, class E>
__device__ __forceinline__ float sdpa_rowsplit_scores(float (&s)[Tr::kKeyChunk], const float* q,
                                                      const E* k_s, int j0, int part, int kv_begin,
                                                      int q_idx, int seq_len, bool causal) {
  using Slice = SdpaRowSlice<E>;
  constexpr int kElems = Slice::kElems;
  constexpr int kSlicesPerLane = D / (Tr::kThreadsPerRow * kElems);
  float chunk_max = -INFINITY;
#pragma unroll
  for (int jj = 0; jj < Tr::kKeyChunk; ++jj) {
    const E* k_row = k_s + (j0 + jj) * D;
    float dot = 0.0f;
#pragma unroll
    for (int c = 0; c < kSlicesPerLane; ++c) {
      float kf[kElems];
      Slice::load(k_row + (c * Tr::kThreadsPerRow + part) * kElems, kf);
#pragma unroll
      for (int e = 0; e < kElems; ++e) dot = fmaf(q[c * kElems + e], kf[e], dot);
    }
    dot = sdpa_lanes_sum<Tr::kThreadsPerRow>(dot);
    s[jj] = sdpa_mask_score(dot, q_idx, kv_begin + j0 + jj, seq_len, causal);
    chunk_max = fmaxf(chunk_max, s[jj]);
  }
  return chunk_max;
}

// acc += sum_j exp2(s_j - base) * V[j0 + j] over the chunk, l += the same
// probabilities (acc and l already rescaled by the caller's softmax step).
template <class Tr, int D, class E>
__device__ __forceinline__ void sdpa_rowsplit_pv(float* acc, float& l, const float (&s)[Tr::kKeyChunk],
                                                 float base, const E* v_s, int j0, int part) {
  using Slice = SdpaRowSlice<E>;
  constexpr int kElems = Slice::kElems;
  constexpr int kSlicesPerLane = D / (Tr::kThreadsPerRow * kElems);
#pragma unroll
  for (int jj = 0; jj < Tr::kKeyChunk; ++jj) {
    const float pj = exp2f(s[jj] - base);
    l += pj;
    const E* v_row = v_s + (j0 + jj) * D;
#pragma unroll
    for (int c = 0; c < kSlicesPerLane; ++c) {
      float vf[kElems];
      Slice::load(v_row + (c * Tr::kThreadsPerRow + part) * kElems, vf);
#pragma unroll
      for (int e = 0; e < kElems; ++e) acc[c * kElems + e] = fmaf(pj, vf[e], acc[c * kElems + e]);
    }
  }
}

// The online-softmax step of one chunk: new running max, l and acc rescaled.
// Returns the base the chunk's probabilities are taken against.
template <int kDimsPerLane>
__device__ __forceinline__ float sdpa_rowsplit_rescale(float& m, float& l, float (&acc)[kDimsPerLane],
                                                       float chunk_max) {
  const SdpaSoftmaxStep step = sdpa_softmax_step(m, fmaxf(m, chunk_max));
  l *= step.alpha;
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) acc[i] *= step.alpha;
  return step.base;
}
