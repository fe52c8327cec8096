/*
sm0_block_three_pass: row softmax, one block per row, three passes over global memory.

What it is
  Block r owns row r. Pass 1: each thread walks the row with a stride of BLOCK_THREADS
  and keeps its running max; a block reduction (warp shuffles, then one float per warp
  in shared memory) gives the row max. Pass 2: the same walk sums exp(x - max), reduced
  the same way. Pass 3: writes exp(x - max) / sum. fp32 math, scalar loads, any width.

Why it is the baseline
  It is the textbook kernel: obviously correct, and its cost is plain to see: the row
  is read three times and every block waits on two block-wide barriers per reduction.

Knobs (-D overrides)
  BLOCK_THREADS=256  threads per row (a whole number of warps, at most 1024)

Run: stagelab run --stages sm0_block_three_pass --params params/softmax-smoke.yaml
*/
#include "softmax_common.cuh"

#ifndef BLOCK_THREADS
#define BLOCK_THREADS 256
#endif

namespace {

struct Traits {
  static constexpr int kThreads = BLOCK_THREADS;
  static_assert(kThreads % softmax::kWarpSize == 0, "BLOCK_THREADS must be whole warps");
  static_assert(kThreads >= softmax::kWarpSize && kThreads <= 1024, "BLOCK_THREADS must be in [32, 1024]");
};

template <typename T>
__global__ void __launch_bounds__(Traits::kThreads)
softmax_sm0_kernel(SoftmaxProblem p) {
  __shared__ float scratch[Traits::kThreads / softmax::kWarpSize];
  const T* x = static_cast<const T*>(p.x) + static_cast<int64_t>(blockIdx.x) * p.x_row_stride;
  T* out = static_cast<T*>(p.out) + static_cast<int64_t>(blockIdx.x) * p.out_row_stride;

  float row_max = -FLT_MAX;
  for (int c = threadIdx.x; c < p.cols; c += Traits::kThreads) row_max = fmaxf(row_max, softmax::to_float(x[c]));
  row_max = softmax::block_reduce<Traits::kThreads>(row_max, scratch, softmax::warp_max, -FLT_MAX);

  const float shift = row_max * softmax::kLog2e;
  float row_sum = 0.f;
  for (int c = threadIdx.x; c < p.cols; c += Traits::kThreads) {
    row_sum += exp2f(softmax::to_float(x[c]) * softmax::kLog2e - shift);
  }
  row_sum = softmax::block_reduce<Traits::kThreads>(row_sum, scratch, softmax::warp_sum, 0.f);

  const float inverse = 1.f / row_sum;
  for (int c = threadIdx.x; c < p.cols; c += Traits::kThreads) {
    out[c] = softmax::from_float<T>(exp2f(softmax::to_float(x[c]) * softmax::kLog2e - shift) * inverse);
  }
}

template <typename T>
struct Launch {
  static cudaError_t run(const SoftmaxProblem& p, cudaStream_t stream) {
    softmax_sm0_kernel<T><<<p.rows, Traits::kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  }
};

}  // namespace

SOFTMAX_EXPORTS(Launch, "sm0_block_three_pass BLOCK_THREADS=" SOFTMAX_STR(BLOCK_THREADS))
