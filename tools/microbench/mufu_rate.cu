// mufu_rate.cu -- how fast one SM sub-partition issues MUFU.EX2 (the softmax's
// exponentials) and FFMA, by warps per sub-partition: the rate that bounds an
// FP8 attention tile's softmax (s9_fp8.cu's log).
//
//   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -o /tmp/mufu_rate tools/microbench/mufu_rate.cu && /tmp/mufu_rate
//
// ex2.approx.f16x2 (two exponentials per lane) is timed too: it would halve an
// FP8 softmax's MUFU time if the hardware ran it at the f32 instruction rate.
//
// Each thread runs kChains independent dependency chains of kSteps operations
// (so one warp has kChains operations in flight), one block per SM, warps =
// 4 sub-partitions x warps_per_smsp. Prints SM clocks per warp instruction
// per sub-partition: 8 would mean 4 lanes/clk/SMSP (16/clk/SM).
#include <cstdio>
#include <cuda_runtime.h>

constexpr int kChains = 8;
constexpr int kSteps = 4096;

enum class Op { kEx2F32, kEx2F16x2, kFfma };

template <Op kOp>
__global__ void rate_kernel(float* out, long long* cycles) {
  float v[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) v[c] = -1e-3f * (threadIdx.x + c);
  __syncthreads();
  const long long start = clock64();
  for (int s = 0; s < kSteps; ++s) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      if constexpr (kOp == Op::kEx2F32) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(v[c]));
      if constexpr (kOp == Op::kEx2F16x2) asm volatile("ex2.approx.f16x2 %0, %0;" : "+r"(*reinterpret_cast<unsigned*>(&v[c])));
      if constexpr (kOp == Op::kFfma) asm volatile("fma.rn.f32 %0, %0, 0f3F7FF000, 0fBA800000;" : "+f"(v[c]));
    }
  }
  __syncthreads();
  const long long stop = clock64();
  float acc = 0.f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) acc += v[c];
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
  if (threadIdx.x == 0) cycles[blockIdx.x] = stop - start;
}

template <Op kOp>
double clocks_per_warp_instruction(int warps_per_smsp, int sms) {
  const int threads = 4 * 32 * warps_per_smsp;
  float* out;
  long long* cycles;
  cudaMalloc(&out, sizeof(float) * sms * threads);
  cudaMalloc(&cycles, sizeof(long long) * sms);
  rate_kernel<kOp><<<sms, threads>>>(out, cycles);  // warm-up
  rate_kernel<kOp><<<sms, threads>>>(out, cycles);
  long long host[1024];
  cudaMemcpy(host, cycles, sizeof(long long) * sms, cudaMemcpyDeviceToHost);
  long long total = 0;
  for (int i = 0; i < sms; ++i) total += host[i];
  cudaFree(out);
  cudaFree(cycles);
  const double per_block = static_cast<double>(total) / sms;
  const double instructions_per_smsp = static_cast<double>(warps_per_smsp) * kChains * kSteps;
  return per_block / instructions_per_smsp;
}

int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  // ex2.approx.f16x2 is two MUFU.EX2.F16 in SASS: its clocks are per PTX instruction (64 values).
  printf("warps/SMSP  ex2.f32 clk/warp-instr  ex2.f16x2 clk/warp-instr  FFMA clk/warp-instr\n");
  const int sms = prop.multiProcessorCount;
  for (int w : {1, 2, 3, 4, 8}) {
    printf("%10d  %22.2f  %24.2f  %19.2f\n", w, clocks_per_warp_instruction<Op::kEx2F32>(w, sms),
           clocks_per_warp_instruction<Op::kEx2F16x2>(w, sms), clocks_per_warp_instruction<Op::kFfma>(w, sms));
  }
  return 0;
}
