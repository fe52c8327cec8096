/*
sm1_warp_online: row softmax, one warp per row, an online max/sum in one read pass.

What it is
  Warp w of block b owns row b * ROWS_PER_BLOCK + w. Each lane walks the row in 16-byte
  vectors (8 fp16/bf16 values) and keeps a running max m and a running sum s of
  exp(x - m), rescaling s whenever m grows (the online softmax of Milakov & Gimelshein).
  The 32 (m, s) pairs are merged with xor shuffles; a second pass writes
  exp(x - m) / s, again in 16-byte vectors. Rows whose start is not 16-byte aligned, and
  the last cols % 8 elements of every row, take a scalar path.

Changed vs sm0_block_three_pass, and why
  - One read pass instead of two for the statistics (online max and sum): the row is read
    twice, not three times.
  - A warp per row: reductions are shuffles only, no shared memory and no __syncthreads,
    and narrow rows no longer leave most of a 256-thread block idle.
  - 16-byte loads and stores: an eighth of the memory instructions of sm0's scalar ones.
  The cost: a very wide row is walked by 32 lanes only, so wide rows may favour sm0.

Knobs (-D overrides)
  ROWS_PER_BLOCK=4   warps (rows) per block

Run: stagelab run --stages sm1_warp_online --params params/softmax-smoke.yaml
*/
#include "softmax_common.cuh"

#ifndef ROWS_PER_BLOCK
#define ROWS_PER_BLOCK 4
#endif

namespace {

struct Traits {
  static constexpr int kRowsPerBlock = ROWS_PER_BLOCK;
  static constexpr int kThreads = kRowsPerBlock * softmax::kWarpSize;
  static constexpr int kVectorBytes = 16;  // one LDG.128 / STG.128 per lane
  static_assert(kRowsPerBlock >= 1 && kThreads <= 1024, "ROWS_PER_BLOCK must be in [1, 32]");
};

// A running (max, sum of exp(x - max)) pair, in log2 units: values are pre-scaled by log2(e).
struct Online {
  float max = -FLT_MAX;
  float sum = 0.f;

  __device__ __forceinline__ void merge(float other_max, float other_sum) {
    const float merged = fmaxf(max, other_max);
    sum = sum * exp2f(max - merged) + other_sum * exp2f(other_max - merged);
    max = merged;
  }
};

template <typename T>
struct Vector {
  static constexpr int kWidth = Traits::kVectorBytes / sizeof(T);
  union {
    uint4 raw;
    T values[kWidth];
  };
};

template <typename T>
__device__ __forceinline__ bool vectors_fit(const void* row) {
  return reinterpret_cast<uintptr_t>(row) % Traits::kVectorBytes == 0;
}

// Statistics of one row, read once: each lane's online pair, then a shuffle merge.
template <typename T>
__device__ __forceinline__ Online row_statistics(const T* x, int cols, int vector_cols, int lane) {
  using V = Vector<T>;
  Online stats;
  for (int v = lane; v < vector_cols; v += softmax::kWarpSize) {
    V chunk;
    chunk.raw = reinterpret_cast<const uint4*>(x)[v];
    float scaled[V::kWidth];
    float chunk_max = -FLT_MAX;
#pragma unroll
    for (int i = 0; i < V::kWidth; ++i) {
      scaled[i] = softmax::to_float(chunk.values[i]) * softmax::kLog2e;
      chunk_max = fmaxf(chunk_max, scaled[i]);
    }
    float chunk_sum = 0.f;
#pragma unroll
    for (int i = 0; i < V::kWidth; ++i) chunk_sum += exp2f(scaled[i] - chunk_max);
    stats.merge(chunk_max, chunk_sum);
  }
  for (int c = vector_cols * V::kWidth + lane; c < cols; c += softmax::kWarpSize) {
    stats.merge(softmax::to_float(x[c]) * softmax::kLog2e, 1.f);
  }
  for (int offset = softmax::kWarpSize / 2; offset > 0; offset /= 2) {
    const float other_max = __shfl_xor_sync(0xffffffffu, stats.max, offset);
    const float other_sum = __shfl_xor_sync(0xffffffffu, stats.sum, offset);
    stats.merge(other_max, other_sum);
  }
  return stats;
}

template <typename T>
__global__ void __launch_bounds__(Traits::kThreads)
softmax_sm1_kernel(SoftmaxProblem p) {
  using V = Vector<T>;
  const int lane = threadIdx.x % softmax::kWarpSize;
  const int row = blockIdx.x * Traits::kRowsPerBlock + threadIdx.x / softmax::kWarpSize;
  if (row >= p.rows) return;  // whole warps leave together: the shuffles below stay full
  const T* x = static_cast<const T*>(p.x) + static_cast<int64_t>(row) * p.x_row_stride;
  T* out = static_cast<T*>(p.out) + static_cast<int64_t>(row) * p.out_row_stride;
  const bool vectors = vectors_fit<T>(x) && vectors_fit<T>(out);
  const int vector_cols = vectors ? p.cols / V::kWidth : 0;

  const Online stats = row_statistics(x, p.cols, vector_cols, lane);
  const float inverse = 1.f / stats.sum;
  for (int v = lane; v < vector_cols; v += softmax::kWarpSize) {
    V chunk;
    chunk.raw = reinterpret_cast<const uint4*>(x)[v];
#pragma unroll
    for (int i = 0; i < V::kWidth; ++i) {
      const float scaled = softmax::to_float(chunk.values[i]) * softmax::kLog2e;
      chunk.values[i] = softmax::from_float<T>(exp2f(scaled - stats.max) * inverse);
    }
    reinterpret_cast<uint4*>(out)[v] = chunk.raw;
  }
  for (int c = vector_cols * V::kWidth + lane; c < p.cols; c += softmax::kWarpSize) {
    out[c] = softmax::from_float<T>(exp2f(softmax::to_float(x[c]) * softmax::kLog2e - stats.max) * inverse);
  }
}

template <typename T>
struct Launch {
  static cudaError_t run(const SoftmaxProblem& p, cudaStream_t stream) {
    const int blocks = (p.rows + Traits::kRowsPerBlock - 1) / Traits::kRowsPerBlock;
    softmax_sm1_kernel<T><<<blocks, Traits::kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  }
};

}  // namespace

SOFTMAX_EXPORTS(Launch, "sm1_warp_online ROWS_PER_BLOCK=" SOFTMAX_STR(ROWS_PER_BLOCK))
