/*
s1_cp_async: s0 with K/V tiles streamed by 16-byte cp.async into double-buffered
shared memory. Still CUDA cores only.

Changes vs parent s0_baseline, and why
  - K/V tiles are copied global -> shared with cp.async.cg (16 bytes per
    instruction, no register round trip) instead of element-wise loads + fp32
    conversion + shared stores. The copy engine writes raw bytes, so the tiles
    now live in shared memory in the input dtype (fp16/bf16) and are converted
    to fp32 in the inner loop (4 paired conversions per 16-byte vector).
  - Two K/V buffers: the copy of tile t+1 is issued before computing on tile t
    (commit_group / wait_group 1), so global latency overlaps the FMAs instead
    of stalling the whole block behind a __syncthreads.
  - Partial tiles: rows past seq_len are zero-filled by cp.async with
    src-size 0 (nothing is read from global) and their scores masked to -inf.
  - Q and O move as 16-byte vectors. A lane's slice of D is now interleaved in
    16-byte (8-element) vectors instead of float4 pieces, so the lanes of a row
    still read adjacent 16-byte words of a K/V row: conflict-free, broadcast
    across the rows of a warp, and no shared-memory padding needed.
  - 16-byte accesses need 16-byte aligned base pointers and strides that are
    multiples of 8 elements; other layouts return cudaErrorInvalidValue.
  The score / online-softmax / P.V chunk step is s0's (sdpa_rowsplit.cuh), now
  reading 16-bit tiles.

Knobs (-D; their values are stages.yaml's defines): BLOCK_N (32, 64 and 128 all fit: shared memory is
  2 buffers * (K + V) * BLOCK_N * D * 2 bytes = 128 KiB at BLOCK_N=128, D=128),
  BLOCK_M THREADS_PER_ROW KEY_CHUNK; threads = BLOCK_M * THREADS_PER_ROW.

Run:  stagelab run --stages s1_cp_async      (resources only, no GPU: stagelab resources s1_cp_async)
*/
#include <cuda_runtime.h>

#include "sdpa_api.h"
#include "sdpa_common.cuh"
#include "sdpa_export.cuh"
#include "sdpa_rowsplit.cuh"

// The tunables: stages.yaml's compile_options.defines give their values (the registry is
// their one source); a build without them stops here.
#if !defined(THREADS_PER_ROW) || !defined(BLOCK_M) || !defined(KEY_CHUNK) || !defined(BLOCK_N)
#error "s1_cp_async: build with its registry defines (THREADS_PER_ROW, BLOCK_M, KEY_CHUNK, BLOCK_N)"
#endif

namespace {

struct S1Traits : SdpaRowSplitTraits<BLOCK_M, BLOCK_N, THREADS_PER_ROW, KEY_CHUNK> {
  static constexpr const char* kConfig = SDPA_ROWSPLIT_CONFIG("s1_cp_async", " STAGES=2");
  static constexpr bool kVectorIo = true;  // Q/O as 16-byte vectors, K/V by 16-byte cp.async
  static constexpr int kStages = 2;        // double buffering: copy tile t+1 while computing tile t
  // A lane's slice of D is a whole number of 16-byte vectors (8 two-byte elements).
  template <int D>
  static constexpr bool kSplitsD = D % (kThreadsPerRow * kSdpaVecElems<__half>) == 0;
  static_assert(kSplitsD<64> && kSplitsD<128>, "D must split into whole 16-byte vectors per lane");
  // Layout: [stage][K|V][BLOCK_N][D], input dtype, unpadded (reads are conflict-free).
  template <class T, int D>
  static constexpr size_t smem_bytes() {
    return static_cast<size_t>(kStages) * 2 /*K and V*/ * kBlockN * D * sizeof(T);
  }
};
static_assert(S1Traits::smem_bytes<__half, 128>() <= kSdpaMaxSmemPerBlock,
              "BLOCK_N too large: double-buffered K+V tiles exceed the shared-memory limit at D=128");

// min-blocks 1 stated explicitly: with the bare __launch_bounds__(kThreads) form,
// ptxas (CUDA 13.0) capped the bf16 / D=128 / BLOCK_N=64 instance at 128
// registers and spilled; with it every instance is spill-free.
template <class T, int D>
__global__ void __launch_bounds__(S1Traits::kThreads, 1) sdpa_s1_kernel(const SdpaProblem p) {
  using Tr = S1Traits;
  constexpr int kThreadsPerRow = Tr::kThreadsPerRow;
  constexpr int kVec = kSdpaVecElems<T>;  // 8 elements per 16-byte vector
  constexpr int kDimsPerLane = D / kThreadsPerRow;
  constexpr int kVecsPerLane = kDimsPerLane / kVec;

  extern __shared__ SdpaVec16 smem_v16[];  // 16-byte aligned, as cp.async requires
  T* smem = reinterpret_cast<T*>(smem_v16);
  auto k_buf = [&](int stage) { return smem + (stage * 2 + 0) * Tr::kBlockN * D; };
  auto v_buf = [&](int stage) { return smem + (stage * 2 + 1) * Tr::kBlockN * D; };

  const int tid = threadIdx.x;
  const int row = tid / kThreadsPerRow;
  const int part = tid % kThreadsPerRow;
  const int q_begin = blockIdx.x * Tr::kBlockM;
  const int q_idx = q_begin + row;
  const int seq_len = p.seq_len;
  const bool causal = p.causal != 0;
  const SdpaHeadPtrs<T> g = sdpa_head_ptrs<T>(p, blockIdx.z, blockIdx.y);

  const int kv_end = sdpa_kv_end(q_begin, Tr::kBlockM, seq_len, causal);
  const int n_tiles = sdpa_ceil_div(kv_end, Tr::kBlockN);
  // K and V rows [kv_begin, kv_begin + BLOCK_N) into the buffers k_s, v_s.
  auto load_kv = [&](T* k_s, T* v_s, int kv_begin) {
    sdpa_load_rows_async<T, D, Tr::kBlockN, D, Tr::kThreads>(
        kv_begin, seq_len, tid, SdpaRowsCopy<T>{k_s, g.k, p.k_strides.seq},
        SdpaRowsCopy<T>{v_s, g.v, p.v_strides.seq});
  };

  // Start the first K/V copy before touching Q so both are in flight together.
  load_kv(k_buf(0), v_buf(0), 0);
  sdpa_cp_async_commit();

  // q pre-multiplied by softmax_scale * log2(e): scores come out in base-2 units.
  const float qk_scale = p.softmax_scale * kSdpaLog2e;
  float q[kDimsPerLane];
#pragma unroll
  for (int c = 0; c < kVecsPerLane; ++c) {
    const int dim = (c * kThreadsPerRow + part) * kVec;
    SdpaVec16 raw = make_uint4(0, 0, 0, 0);
    if (q_idx < seq_len)
      raw = *reinterpret_cast<const SdpaVec16*>(g.q + q_idx * p.q_strides.seq + dim);
    sdpa_vec_to_float<T>(raw, q + c * kVec);
  }
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) q[i] *= qk_scale;

  float acc[kDimsPerLane];
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) acc[i] = 0.0f;
  float m = -INFINITY;  // running max (base-2 units), identical across the row's lanes
  float l = 0.0f;       // running sum of exp2(s - m)

  for (int t = 0; t < n_tiles; ++t) {
    const int stage = t % Tr::kStages;
    const int kv_begin = t * Tr::kBlockN;
    // Prefetch tile t+1 into the other buffer. Its previous contents (tile t-1)
    // were released by the trailing __syncthreads of iteration t-1.
    if (t + 1 < n_tiles)
      load_kv(k_buf((t + 1) % Tr::kStages), v_buf((t + 1) % Tr::kStages), kv_begin + Tr::kBlockN);
    // Commit even when nothing was issued: the group count stays uniform, so
    // "all but the newest 1 group done" always means "tile t has landed".
    sdpa_cp_async_commit();
    sdpa_cp_async_wait<Tr::kStages - 1>();
    __syncthreads();  // tile t copied by all threads is visible to all threads

    const T* k_s = k_buf(stage);
    const T* v_s = v_buf(stage);
    const int tile_keys = min(Tr::kBlockN, kv_end - kv_begin);
    for (int j0 = 0; j0 < Tr::kBlockN; j0 += Tr::kKeyChunk) {
      float s[Tr::kKeyChunk];      // this key chunk's scores, then probabilities
      if (j0 >= tile_keys) break;  // block-uniform, so the shuffles below stay convergent
      const float chunk_max =
          sdpa_rowsplit_scores<Tr, D>(s, q, k_s, j0, part, kv_begin, q_idx, seq_len, causal);
      const float base = sdpa_rowsplit_rescale(m, l, acc, chunk_max);
      sdpa_rowsplit_pv<Tr, D>(acc, l, s, base, v_s, j0, part);
    }
    __syncthreads();  // all reads of this buffer done before iteration t+1 refills it
  }

  if (q_idx < seq_len) {
    // Every real query sees key 0, so l >= exp2(0) = 1 here: no divide-by-zero.
    const float inv_l = 1.0f / l;
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) acc[i] *= inv_l;
    T* o_row = g.o + q_idx * p.out_strides.seq;
#pragma unroll
    for (int c = 0; c < kVecsPerLane; ++c)
      *reinterpret_cast<SdpaVec16*>(o_row + (c * kThreadsPerRow + part) * kVec) =
          sdpa_float_to_vec<T>(acc + c * kVec);
  }
}

}  // namespace

SDPA_EXPORT_STAGE(S1Traits, sdpa_s1_kernel)
