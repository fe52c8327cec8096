// mufu_rate.cu -- how fast one SM sub-partition issues MUFU.EX2 (the softmax's
// exponentials) and FFMA, by warps per sub-partition: the rate that bounds an
// FP8 attention tile's softmax (s9_fp8.cu's log).
//
//   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -o /tmp/mufu_rate tools/microbench/mufu_rate.cu && /tmp/mufu_rate
//
// Each thread runs kChains independent dependency chains of kSteps operations
// (so one warp has kChains operations in flight), one block per SM, warps =
// 4 sub-partitions x warps_per_smsp. Prints SM clocks per warp instruction
// per sub-partition: 8 would mean 4 lanes/clk/SMSP (16/clk/SM).
#include <cstdio>
#include <cuda_runtime.h>

constexpr int kChains = 8;
constexpr int kSteps = 4096;

template <bool kMufu>
__global__ void rate_kernel(float* out, long long* cycles) {
  float v[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) v[c] = -1e-3f * (threadIdx.x + c);
  __syncthreads();
  const long long start = clock64();
  for (int s = 0; s < kSteps; ++s) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      if constexpr (kMufu) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(v[c]));
      else asm volatile("fma.rn.f32 %0, %0, 0f3F7FF000, 0fBA800000;" : "+f"(v[c]));
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

template <bool kMufu>
double clocks_per_warp_instruction(int warps_per_smsp, int sms) {
  const int threads = 4 * 32 * warps_per_smsp;
  float* out;
  long long* cycles;
  cudaMalloc(&out, sizeof(float) * sms * threads);
  cudaMalloc(&cycles, sizeof(long long) * sms);
  rate_kernel<kMufu><<<sms, threads>>>(out, cycles);  // warm-up
  rate_kernel<kMufu><<<sms, threads>>>(out, cycles);
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
  printf("warps/SMSP  MUFU.EX2 clk/warp-instr  FFMA clk/warp-instr\n");
  for (int w : {1, 2, 3, 4, 8}) {
    printf("%10d  %23.2f  %19.2f\n", w, clocks_per_warp_instruction<true>(w, prop.multiProcessorCount),
           clocks_per_warp_instruction<false>(w, prop.multiProcessorCount));
  }
  return 0;
}
