/*
rms0_block: RMSNorm forward, one block per row, 16-byte loads, fp32 math.

What it is
  out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight. Block r owns row r. Pass 1: each
  thread walks the row in packs of kPack elements with a stride of the block and sums their squares
  in fp32; a block reduction (warp shuffles, then one float per warp in shared memory) gives the
  row's sum. Pass 2 reads x again (now from L1/L2) with the weight, and writes x * rstd * weight,
  rounded once to the storage dtype. A pack is one 16-byte load where the row's width, its stride
  and the three base addresses allow it; any other row takes the one-element instance of the
  same kernel, so every width is taken.

Why it is the baseline
  It is the textbook kernel, and it fixes the semantics every later stage must meet: eps inside the
  root, the statistic in fp32 (squares of fp16 values overflow fp16 above 256), one rounding of the
  output. RMSNorm moves 4 bytes per element for about 4 flops: memory-bound, so the question is how
  close to the bandwidth torch and Liger get a plain block per row comes, paying a second read of
  each row and two block barriers.

Knobs (-D overrides)
  BLOCK_THREADS=256  threads per row, whole warps up to 1024. Models' hidden sizes (2048..8192)
                     are 256..1024 packs of fp16, so 256 threads give each thread 1..4 packs.

Run: stagelab run --stages rms0_block --params params/rmsnorm-acceptance.yaml
*/
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "rmsnorm_api.h"

#ifndef BLOCK_THREADS
#define BLOCK_THREADS 256
#endif
#define RMS0_STR_(x) #x
#define RMS0_STR(x) RMS0_STR_(x)

namespace {

constexpr int kWarpSize = 32;
constexpr int kThreads = BLOCK_THREADS;
constexpr int kWarps = kThreads / kWarpSize;
// The widest global load or store one thread issues (LDG.E.128 / STG.E.128).
constexpr int kVectorBytes = 16;
static_assert(kThreads % kWarpSize == 0, "BLOCK_THREADS must be whole warps");
static_assert(kThreads >= kWarpSize && kThreads <= 1024, "BLOCK_THREADS must be in [32, 1024]");
// The second reduction step sums one float per warp inside a single warp.
static_assert(kWarps <= kWarpSize, "at most one warp's worth of warps");

// kPack elements moved as one access, aligned to its size so the compiler emits one instruction.
template <typename T, int kPack>
struct alignas(sizeof(T) * kPack) Pack {
  T v[kPack];
};

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Every thread gets the block's sum. Called once per block, so its scratch needs no second barrier.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_sums[kWarps];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  v = warp_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  return warp_sum(lane < kWarps ? warp_sums[lane] : 0.f);
}

template <typename T, int kPack>
__global__ void __launch_bounds__(kThreads) rmsnorm_rms0_kernel(RmsNormProblem p) {
  static_assert(sizeof(Pack<T, kPack>) <= kVectorBytes, "a pack is at most one 16-byte access");
  using P = Pack<T, kPack>;
  const int64_t row = blockIdx.x;
  const P* x = reinterpret_cast<const P*>(static_cast<const T*>(p.x) + row * p.x_row_stride);
  const P* weight = static_cast<const P*>(p.weight);
  P* out = reinterpret_cast<P*>(static_cast<T*>(p.out) + row * p.out_row_stride);
  const int packs = p.cols / kPack;  // the launcher picks kPack to divide cols

  float sum_squares = 0.f;
  for (int i = threadIdx.x; i < packs; i += kThreads) {
    const P v = x[i];
#pragma unroll
    for (int j = 0; j < kPack; ++j) {
      const float f = static_cast<float>(v.v[j]);
      sum_squares = fmaf(f, f, sum_squares);
    }
  }
  const float rstd = rsqrtf(block_sum(sum_squares) / p.cols + p.eps);

  for (int i = threadIdx.x; i < packs; i += kThreads) {
    const P v = x[i], w = weight[i];
    P o;
#pragma unroll
    for (int j = 0; j < kPack; ++j) o.v[j] = T(static_cast<float>(v.v[j]) * rstd * static_cast<float>(w.v[j]));
    out[i] = o;
  }
}

bool aligned(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % kVectorBytes == 0; }

template <typename T>
cudaError_t launch(const RmsNormProblem& p, cudaStream_t stream) {
  constexpr int kVector = kVectorBytes / sizeof(T);
  const bool vectors = p.cols % kVector == 0 && p.x_row_stride % kVector == 0 && p.out_row_stride % kVector == 0 &&
                       aligned(p.x) && aligned(p.weight) && aligned(p.out);
  if (vectors) {
    rmsnorm_rms0_kernel<T, kVector><<<p.rows, kThreads, 0, stream>>>(p);
  } else {
    rmsnorm_rms0_kernel<T, 1><<<p.rows, kThreads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

}  // namespace

extern "C" cudaError_t rmsnorm_forward(const RmsNormProblem* p, cudaStream_t stream) {
  if (p == nullptr || p->rows < 1 || p->cols < 1) return cudaErrorInvalidValue;
  switch (p->dtype) {
    case kRmsNormFloat16: return launch<__half>(*p, stream);
    case kRmsNormBFloat16: return launch<__nv_bfloat16>(*p, stream);
    default: return cudaErrorInvalidValue;
  }
}

extern "C" const char* rmsnorm_stage_config() { return "rms0_block BLOCK_THREADS=" RMS0_STR(BLOCK_THREADS); }
