/*
s0_baseline: attention forward on CUDA cores only (no tensor cores, no async copies).

What it is
  FlashAttention-2 loop order. One thread block owns BLOCK_M query rows of one
  (batch, head); it streams the keys/values through shared memory in tiles of
  KV_TILE keys and keeps, per query row, an online softmax: running max m,
  running sum l, and an fp32 output accumulator that is rescaled by
  exp2(m_old - m_new) whenever the max grows. The division by l happens once,
  at the very end. The [S, S] score matrix never exists in memory.

Thread layout
  THREADS_PER_ROW consecutive lanes share one query row; each owns D/THREADS_PER_ROW
  of the head dimension (its slice of q and of the accumulator). A score q.k is
  a partial dot product per lane plus a log2(THREADS_PER_ROW)-step xor-shuffle
  reduction, after which every lane of the row holds the full score. Splitting
  D is what keeps D=128 spill-free: a lane holds 32 q values + 32 accumulators
  + KEY_CHUNK scores instead of 128 + 128.
  A lane's slice is interleaved in float4 chunks (chunk c*THREADS_PER_ROW + lane)
  so the lanes of a row read adjacent 16-byte words of a K/V row in shared
  memory: no bank conflicts, and all rows of a warp read the same K/V row, which
  shared memory broadcasts.
  Scores are produced KEY_CHUNK keys at a time, so the running-max rescale
  (one exp2 plus D/THREADS_PER_ROW multiplies) is paid once per chunk rather
  than once per key, while only KEY_CHUNK scores live in registers.

Memory
  K and V tiles are stored in shared memory as fp32 (converted once on load,
  not once per use in the inner loop): 2 * KV_TILE * D * 4 bytes
  = 64 KB for D=128, KV_TILE=64 (hence the >48 KB opt-in).
  Plain element-wise loads; rows past seq_len are zero-filled so that masked
  probabilities (exactly 0) never multiply garbage (0 * NaN = NaN).

Masking
  Keys >= seq_len and (causal) keys > query get score -inf. Causal blocks stop
  at their diagonal tile (sdpa_kv_end). Query rows >= seq_len are computed on
  zeros and never stored.

Knobs (-D overrides): BLOCK_M=64 KV_TILE=64 THREADS_PER_ROW=4 KEY_CHUNK=16
  threads per block = BLOCK_M * THREADS_PER_ROW = 256.

Build / resources:
  nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -I kernels/sdpa \
       --resource-usage -c kernels/sdpa/s0_baseline.cu -o /tmp/s0.o
*/
#include <cuda_runtime.h>

#include "sdpa_api.h"
#include "sdpa_common.cuh"

#ifndef BLOCK_M
#define BLOCK_M 64
#endif
#ifndef KV_TILE
#define KV_TILE 64
#endif
#ifndef THREADS_PER_ROW
#define THREADS_PER_ROW 4
#endif
#ifndef KEY_CHUNK
#define KEY_CHUNK 16
#endif

namespace {

constexpr int kBlockM = BLOCK_M;
constexpr int kKvTile = KV_TILE;
constexpr int kThreadsPerRow = THREADS_PER_ROW;
constexpr int kKeyChunk = KEY_CHUNK;
constexpr int kThreads = kBlockM * kThreadsPerRow;
constexpr int kWarpSize = 32;
// Lanes move float4 (4-float) pieces of K/V rows out of shared memory.
constexpr int kFloat4 = 4;

static_assert(kThreadsPerRow >= 1 && (kThreadsPerRow & (kThreadsPerRow - 1)) == 0 &&
                  kThreadsPerRow <= kWarpSize,
              "THREADS_PER_ROW must be a power of two <= 32 so a row's lanes sit in one warp "
              "and reduce with xor shuffles");
static_assert(kThreads % kWarpSize == 0, "BLOCK_M * THREADS_PER_ROW must be whole warps");
static_assert(kThreads <= 1024, "at most 1024 threads per block");
static_assert(kKvTile % kKeyChunk == 0, "KV_TILE must be a multiple of KEY_CHUNK");

template <class T, int D>
__global__ void __launch_bounds__(kThreads) sdpa_s0_kernel(const SdpaProblem p) {
  using Tr = SdpaTraits<T>;
  // Per lane: D / THREADS_PER_ROW dims, as float4 chunks interleaved over the row's lanes.
  constexpr int kDimsPerLane = D / kThreadsPerRow;
  constexpr int kChunksPerLane = kDimsPerLane / kFloat4;
  static_assert(D % (kThreadsPerRow * kFloat4) == 0,
                "D must split into whole float4 chunks per lane");

  extern __shared__ float4 smem_f4[];  // float4 type guarantees 16-byte alignment
  float* k_s = reinterpret_cast<float*>(smem_f4);  // [KV_TILE][D] fp32
  float* v_s = k_s + kKvTile * D;                  // [KV_TILE][D] fp32

  const int tid = threadIdx.x;
  const int row = tid / kThreadsPerRow;
  const int part = tid % kThreadsPerRow;
  const int q_begin = blockIdx.x * kBlockM;
  const int q_idx = q_begin + row;
  const int h = blockIdx.y;
  const int b = blockIdx.z;
  const int seq_len = p.seq_len;
  const bool causal = p.causal != 0;

  const T* q_g = sdpa_head_ptr(static_cast<const T*>(p.q), p.q_strides, b, h);
  const T* k_g = sdpa_head_ptr(static_cast<const T*>(p.k), p.k_strides, b, h);
  const T* v_g = sdpa_head_ptr(static_cast<const T*>(p.v), p.v_strides, b, h);
  T* o_g = sdpa_head_ptr(static_cast<T*>(p.out), p.out_strides, b, h);

  // q pre-multiplied by softmax_scale * log2(e): scores come out in base-2 units.
  const float qk_scale = p.softmax_scale * kSdpaLog2e;
  float q[kDimsPerLane];
#pragma unroll
  for (int c = 0; c < kChunksPerLane; ++c)
#pragma unroll
    for (int e = 0; e < kFloat4; ++e) {
      const int dim = (c * kThreadsPerRow + part) * kFloat4 + e;
      q[c * kFloat4 + e] =
          q_idx < seq_len ? Tr::to_float(q_g[q_idx * p.q_strides.seq + dim]) * qk_scale : 0.0f;
    }

  float acc[kDimsPerLane];
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) acc[i] = 0.0f;
  float m = -INFINITY;  // running max (base-2 units), identical across the row's lanes
  float l = 0.0f;       // running sum of exp2(s - m)

  const int kv_end = sdpa_kv_end(q_begin, kBlockM, seq_len, causal);
  for (int kv_begin = 0; kv_begin < kv_end; kv_begin += kKvTile) {
    __syncthreads();  // every lane is done with the previous tile before it is overwritten
    for (int e = tid; e < kKvTile * D; e += kThreads) {
      const int r = e / D;
      const int col = e % D;
      const int key = kv_begin + r;
      const bool in = key < seq_len;
      k_s[e] = in ? Tr::to_float(k_g[key * p.k_strides.seq + col]) : 0.0f;
      v_s[e] = in ? Tr::to_float(v_g[key * p.v_strides.seq + col]) : 0.0f;
    }
    __syncthreads();

    const int tile_keys = min(kKvTile, kv_end - kv_begin);
    for (int j0 = 0; j0 < kKvTile; j0 += kKeyChunk) {
      if (j0 >= tile_keys) break;  // block-uniform, so the shuffles below stay convergent
      float s[kKeyChunk];
      float chunk_max = -INFINITY;
#pragma unroll
      for (int jj = 0; jj < kKeyChunk; ++jj) {
        const float* k_row = k_s + (j0 + jj) * D;
        float dot = 0.0f;
#pragma unroll
        for (int c = 0; c < kChunksPerLane; ++c) {
          const float4 kk =
              *reinterpret_cast<const float4*>(k_row + (c * kThreadsPerRow + part) * kFloat4);
          dot = fmaf(q[c * kFloat4 + 0], kk.x, dot);
          dot = fmaf(q[c * kFloat4 + 1], kk.y, dot);
          dot = fmaf(q[c * kFloat4 + 2], kk.z, dot);
          dot = fmaf(q[c * kFloat4 + 3], kk.w, dot);
        }
#pragma unroll
        for (int off = 1; off < kThreadsPerRow; off <<= 1)
          dot += __shfl_xor_sync(0xffffffffu, dot, off);
        const int key = kv_begin + j0 + jj;
        s[jj] = sdpa_key_visible(q_idx, key, seq_len, causal) ? dot : -INFINITY;
        chunk_max = fmaxf(chunk_max, s[jj]);
      }

      const float m_new = fmaxf(m, chunk_max);
      const float base = sdpa_softmax_base(m_new);
      const float alpha = exp2f(m - base);  // 0 on the first visible chunk (m = -inf)
      m = m_new;
      l *= alpha;
#pragma unroll
      for (int i = 0; i < kDimsPerLane; ++i) acc[i] *= alpha;

#pragma unroll
      for (int jj = 0; jj < kKeyChunk; ++jj) {
        const float pj = exp2f(s[jj] - base);
        l += pj;
        const float* v_row = v_s + (j0 + jj) * D;
#pragma unroll
        for (int c = 0; c < kChunksPerLane; ++c) {
          const float4 vv =
              *reinterpret_cast<const float4*>(v_row + (c * kThreadsPerRow + part) * kFloat4);
          acc[c * kFloat4 + 0] = fmaf(pj, vv.x, acc[c * kFloat4 + 0]);
          acc[c * kFloat4 + 1] = fmaf(pj, vv.y, acc[c * kFloat4 + 1]);
          acc[c * kFloat4 + 2] = fmaf(pj, vv.z, acc[c * kFloat4 + 2]);
          acc[c * kFloat4 + 3] = fmaf(pj, vv.w, acc[c * kFloat4 + 3]);
        }
      }
    }
  }

  if (q_idx < seq_len) {
    // Every real query sees key 0, so l >= exp2(0) = 1 here: no divide-by-zero.
    const float inv_l = 1.0f / l;
    T* o_row = o_g + q_idx * p.out_strides.seq;
#pragma unroll
    for (int c = 0; c < kChunksPerLane; ++c)
#pragma unroll
      for (int e = 0; e < kFloat4; ++e)
        o_row[(c * kThreadsPerRow + part) * kFloat4 + e] =
            Tr::from_float(acc[c * kFloat4 + e] * inv_l);
  }
}

// K and V tiles, staged as fp32 whatever the input dtype.
constexpr size_t dynamic_smem_bytes(int head_dim) {
  return 2 * static_cast<size_t>(kKvTile) * head_dim * sizeof(float);
}

template <class T, int D>
cudaError_t launch(const SdpaProblem& p, cudaStream_t stream) {
  const size_t smem = dynamic_smem_bytes(D);
  auto kernel = sdpa_s0_kernel<T, D>;
  cudaError_t err = sdpa_set_smem(kernel, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid(sdpa_ceil_div(p.seq_len, kBlockM), p.heads, p.batch);
  kernel<<<grid, kThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

#define SDPA_STR2(x) #x
#define SDPA_STR(x) SDPA_STR2(x)

}  // namespace

extern "C" cudaError_t sdpa_forward(const SdpaProblem* problem, cudaStream_t stream) {
  if (problem == nullptr) return cudaErrorInvalidValue;
  const cudaError_t ok = sdpa_check_problem(*problem);
  if (ok != cudaSuccess) return ok;
  if (sdpa_problem_is_empty(*problem)) return cudaSuccess;
  return sdpa_dispatch(*problem, [&](auto tag, auto hd) {
    using T = typename decltype(tag)::type;
    constexpr int D = decltype(hd)::value;
    return launch<T, D>(*problem, stream);
  });
}

extern "C" const char* sdpa_stage_config() {
  return "s0_baseline BLOCK_M=" SDPA_STR(BLOCK_M) " KV_TILE=" SDPA_STR(KV_TILE)
         " THREADS_PER_ROW=" SDPA_STR(THREADS_PER_ROW) " KEY_CHUNK=" SDPA_STR(KEY_CHUNK)
         " THREADS=" SDPA_STR(BLOCK_M) "*" SDPA_STR(THREADS_PER_ROW) " smem=fp32 K+V tiles";
}

extern "C" int64_t sdpa_dynamic_shared_memory_bytes(int32_t head_dim, int32_t /*dtype*/) {
  return static_cast<int64_t>(dynamic_smem_bytes(head_dim));
}
