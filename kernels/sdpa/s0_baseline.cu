/*
s0_baseline: attention forward on CUDA cores only (no tensor cores, no async copies).

What it is (the root of the ladder, no parent)
  FlashAttention-2 loop order. One thread block owns BLOCK_M query rows of one
  (batch, head); it streams the keys/values through shared memory in tiles of
  BLOCK_N keys and keeps, per query row, an online softmax: running max m,
  running sum l, and an fp32 output accumulator that is rescaled by
  exp2(m_old - m_new) whenever the max grows. The division by l happens once,
  at the very end. The [S, S] score matrix never exists in memory. It fixes the
  semantics (partial tiles, causal mask, scale) every later stage reproduces.

Thread layout (sdpa_rowsplit.cuh)
  THREADS_PER_ROW consecutive lanes share one query row; each owns
  D / THREADS_PER_ROW of the head dimension (its slice of q and of the
  accumulator). A score is a partial dot product per lane plus an xor-shuffle
  reduction. Splitting D is what keeps D=128 spill-free: a lane holds 32 q
  values + 32 accumulators + KEY_CHUNK scores instead of 128 + 128. Slices are
  interleaved in float4 pieces so a row's lanes read adjacent 16-byte words.

Memory
  K and V tiles are stored in shared memory as fp32 (converted once on load,
  not once per use in the inner loop): 2 * BLOCK_N * D * 4 bytes (64 KiB at
  D=128, BLOCK_N=64, hence the >48 KiB opt-in). Plain element-wise loads; rows
  past seq_len are zero-filled so that masked probabilities (exactly 0) never
  multiply garbage (0 * NaN = NaN).

Masking
  Keys >= seq_len and (causal) keys > query get score -inf. Causal blocks stop
  at their diagonal tile (sdpa_kv_end). Query rows >= seq_len are computed on
  zeros and never stored.

Knobs (-D; their values are stages.yaml's defines): BLOCK_M BLOCK_N THREADS_PER_ROW KEY_CHUNK;
  threads per block = BLOCK_M * THREADS_PER_ROW.

Run:  stagelab run --stages s0_baseline      (resources only, no GPU: stagelab resources s0_baseline)
*/
#include <cuda_runtime.h>

#include "sdpa_api.h"
#include "sdpa_common.cuh"
#include "sdpa_export.cuh"
#include "sdpa_rowsplit.cuh"

// The tunables: stages.yaml's compile_options.defines give their values (the registry is
// their one source); a build without them stops here.
#if !defined(BLOCK_M) || !defined(BLOCK_N) || !defined(THREADS_PER_ROW) || !defined(KEY_CHUNK)
#error "s0_baseline: build with its registry defines (BLOCK_M, BLOCK_N, THREADS_PER_ROW, KEY_CHUNK)"
#endif

namespace {

struct S0Traits : SdpaRowSplitTraits<BLOCK_M, BLOCK_N, THREADS_PER_ROW, KEY_CHUNK> {
  static constexpr const char* kConfig = SDPA_ROWSPLIT_CONFIG("s0_baseline", " smem=fp32 K+V tiles");
  static constexpr bool kVectorIo = false;  // element-wise loads and stores: any layout
  static constexpr int kFloat4 = SdpaRowSlice<float>::kElems;  // lanes read fp32 tiles as float4
  template <int D>
  static constexpr bool kSplitsD = D % (kThreadsPerRow * kFloat4) == 0;
  static_assert(kSplitsD<64> && kSplitsD<128>, "D must split into whole float4 slices per lane");
  // K and V tiles, staged as fp32 whatever the input dtype.
  template <class T, int D>
  static constexpr size_t smem_bytes() {
    return 2 * static_cast<size_t>(kBlockN) * D * sizeof(float);
  }
};

template <class T, int D>
__global__ void __launch_bounds__(S0Traits::kThreads) sdpa_s0_kernel(const SdpaProblem p) {
  using Tr = S0Traits;
  using DT = SdpaTraits<T>;
  constexpr int kThreadsPerRow = Tr::kThreadsPerRow;
  constexpr int kFloat4 = Tr::kFloat4;
  constexpr int kDimsPerLane = D / kThreadsPerRow;
  constexpr int kChunksPerLane = kDimsPerLane / kFloat4;

  extern __shared__ float4 smem_f4[];  // float4 type guarantees 16-byte alignment
  float* k_s = reinterpret_cast<float*>(smem_f4);  // [BLOCK_N][D] fp32
  float* v_s = k_s + Tr::kBlockN * D;              // [BLOCK_N][D] fp32

  const int tid = threadIdx.x;
  const int part = tid % kThreadsPerRow;
  const int q_begin = blockIdx.x * Tr::kBlockM;
  const int q_idx = q_begin + tid / kThreadsPerRow;
  const int seq_len = p.seq_len;
  const bool causal = p.causal != 0;
  const SdpaHeadPtrs<T> g = sdpa_head_ptrs<T>(p, blockIdx.z, blockIdx.y);

  // q pre-multiplied by softmax_scale * log2(e): scores come out in base-2 units.
  const float qk_scale = p.softmax_scale * kSdpaLog2e;
  float q[kDimsPerLane];
#pragma unroll
  for (int c = 0; c < kChunksPerLane; ++c)
#pragma unroll
    for (int e = 0; e < kFloat4; ++e) {
      const int dim = (c * kThreadsPerRow + part) * kFloat4 + e;
      q[c * kFloat4 + e] =
          q_idx < seq_len ? DT::to_float(g.q[q_idx * p.q_strides.seq + dim]) * qk_scale : 0.0f;
    }

  float acc[kDimsPerLane];
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) acc[i] = 0.0f;
  float m = -INFINITY;  // running max (base-2 units), identical across the row's lanes
  float l = 0.0f;       // running sum of exp2(s - m)

  const int kv_end = sdpa_kv_end(q_begin, Tr::kBlockM, seq_len, causal);
  for (int kv_begin = 0; kv_begin < kv_end; kv_begin += Tr::kBlockN) {
    __syncthreads();  // every lane is done with the previous tile before it is overwritten
    for (int e = tid; e < Tr::kBlockN * D; e += Tr::kThreads) {
      const int key = kv_begin + e / D;
      const int col = e % D;
      const bool in = key < seq_len;
      k_s[e] = in ? DT::to_float(g.k[key * p.k_strides.seq + col]) : 0.0f;
      v_s[e] = in ? DT::to_float(g.v[key * p.v_strides.seq + col]) : 0.0f;
    }
    __syncthreads();

    const int tile_keys = min(Tr::kBlockN, kv_end - kv_begin);
    for (int j0 = 0; j0 < Tr::kBlockN; j0 += Tr::kKeyChunk) {
      if (j0 >= tile_keys) break;  // block-uniform, so the shuffles below stay convergent
      float s[Tr::kKeyChunk];
      const float chunk_max =
          sdpa_rowsplit_scores<Tr, D>(s, q, k_s, j0, part, kv_begin, q_idx, seq_len, causal);
      const float base = sdpa_rowsplit_rescale(m, l, acc, chunk_max);
      sdpa_rowsplit_pv<Tr, D>(acc, l, s, base, v_s, j0, part);
    }
  }

  if (q_idx < seq_len) {
    // Every real query sees key 0, so l >= exp2(0) = 1 here: no divide-by-zero.
    const float inv_l = 1.0f / l;
    T* o_row = g.o + q_idx * p.out_strides.seq;
#pragma unroll
    for (int c = 0; c < kChunksPerLane; ++c)
#pragma unroll
      for (int e = 0; e < kFloat4; ++e)
        o_row[(c * kThreadsPerRow + part) * kFloat4 + e] = DT::from_float(acc[c * kFloat4 + e] * inv_l);
  }
}

}  // namespace

SDPA_EXPORT_STAGE(S0Traits, sdpa_s0_kernel)
