// mufu_wgmma_overlap.cu -- do one warpgroup's wgmma stream and another
// warpgroup's MUFU.EX2 (or FFMA) stream run side by side on one SM, or take
// turns? The attention stages' pingpong rests on the first: one warpgroup's
// softmax under the other's GEMMs. ncu read s9 at 4096x128 with the tensor
// pipe 49% busy and the XU (MUFU) pipe 50%, as if the two took turns
// (s9_fp8.cu's log v13).
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels/sdpa \
//     -o /tmp/overlap tools/microbench/mufu_wgmma_overlap.cu && /tmp/overlap
//
// One block per SM, two warpgroups. Warpgroup 0 issues groups of four wgmma
// (m64n128, fp16 k16 or e4m3 k32; A from shared memory (SS) or registers (RS),
// keeping two groups in flight), warpgroup 1 runs kChains independent ex2 (or
// FFMA) chains per thread. Each side is timed alone and then both together,
// in SM clocks from clock64 around its own loop; the iteration counts make
// the two sides about equally long alone. Side by side at full overlap each
// keeps its time alone; taking turns, each takes about the sum.
//
// Measured (H100 80GB HBM3, 2026-11-24; the H200 within 0.1%: trial runs of the history import,
// from archive files mufu-wgmma-overlap-nvidia-h{100,200}-2026-11-24-twelfth.txt; "overlap" 1 = none lost, 0 =
// turns): beside a wgmma stream the ex2 stream takes 1.24x (SS) to 1.26x (RS)
// its time alone (overlap 0.75 / 0.73) while the wgmmas keep theirs; an FFMA
// stream and the wgmmas both slow down, to 1.58x / 1.27x (SS, overlap 0.65)
// and 1.73x / 1.36x (RS, 0.54). fp16 and e4m3 alike. So on Hopper the
// softmax's ALU work and the GEMMs' register-accumulated wgmmas share
// something (the register file's ports, presumably: RS reads A from it, and
// the FFMA stream reads three operands per instruction), and a softmax under
// a GEMM costs more than the same softmax alone.
#include <cstdint>
#include <cstdio>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../../kernels/sdpa/fp8/wgmma8.cuh"
#include "cuda_check.cuh"

namespace {

using namespace sdpa_wgmma;

constexpr int kThreads = 2 * 128;
constexpr int kN = 128;
constexpr int kChains = 8;
constexpr int kSmemBytes = 64 * 1024 + 1024;  // A (64 rows) and B (128 rows) SW128 tiles, 1024-aligned

enum class Tensor { kNone, kF16SS, kF16RS, kE4m3SS, kE4m3RS };
enum class Alu { kNone, kEx2, kFfma };

template <Tensor kT>
__device__ __forceinline__ void wgmma_group(float (&acc)[kN / 2], uint64_t desc_a, uint64_t desc_b,
                                            const uint32_t (&a_regs)[4]) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if constexpr (kT == Tensor::kF16SS) Wgmma<__half, kN>::template ss<0>(acc, desc_a, desc_b, 1);
    if constexpr (kT == Tensor::kF16RS) Wgmma<__half, kN>::template rs<0>(acc, a_regs, desc_b, 1);
    if constexpr (kT == Tensor::kE4m3SS) Wgmma8<kN>::ss(acc, desc_a, desc_b, 1);
    if constexpr (kT == Tensor::kE4m3RS) Wgmma8<kN>::rs(acc, a_regs, desc_b, 1);
  }
}

template <Tensor kT, Alu kA>
__global__ void __launch_bounds__(kThreads, 1) overlap_kernel(int gemm_groups, int alu_steps, float* sink,
                                                              long long* cycles) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023u) & ~1023u;
  // zeros: the products stay 0, whatever the layout
  for (int i = threadIdx.x; i < (kSmemBytes - 1024) / 4; i += kThreads)
    reinterpret_cast<uint32_t*>(smem_raw + (base - raw))[i] = 0u;
  __syncthreads();
  const int wg = threadIdx.x / 128;
  long long start = clock64();
  float out = 0.0f;
  if (wg == 0 && kT != Tensor::kNone) {
    float acc[kN / 2];
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) acc[i] = 0.0f;
    const uint32_t a_regs[4] = {0u, 0u, 0u, 0u};
    const uint64_t desc_a = make_desc_kmajor(base);
    const uint64_t desc_b = make_desc_kmajor(base + 16 * 1024);
    for (int g = 0; g < gemm_groups; ++g) {
      fence_regs(acc);
      wgmma_fence();
      wgmma_group<kT>(acc, desc_a, desc_b, a_regs);
      wgmma_commit();
      wgmma_wait<1>();  // two groups in flight, as the stages keep S and P.V
    }
    wgmma_wait<0>();
    fence_regs(acc);
    for (int i = 0; i < kN / 2; ++i) out += acc[i];
  }
  if (wg == 1 && kA != Alu::kNone) {
    float v[kChains];
#pragma unroll
    for (int c = 0; c < kChains; ++c) v[c] = -1e-3f * (threadIdx.x + c);
    for (int s = 0; s < alu_steps; ++s) {
#pragma unroll
      for (int c = 0; c < kChains; ++c) {
        if constexpr (kA == Alu::kEx2) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(v[c]));
        if constexpr (kA == Alu::kFfma) asm volatile("fma.rn.f32 %0, %0, 0f3F7FF000, 0fBA800000;" : "+f"(v[c]));
      }
    }
#pragma unroll
    for (int c = 0; c < kChains; ++c) out += v[c];
  }
  const long long stop = clock64();
  sink[blockIdx.x * kThreads + threadIdx.x] = out;
  if (threadIdx.x % 128 == 0) cycles[blockIdx.x * 2 + wg] = stop - start;
}

struct Clocks {
  double tensor, alu;  // mean clocks per block of warpgroup 0's and 1's loops
};

template <Tensor kT, Alu kA>
Clocks run(int sms, int gemm_groups, int alu_steps) {
  float* sink;
  long long* cycles;
  CHECK(cudaMalloc(&sink, sizeof(float) * sms * kThreads));
  CHECK(cudaMalloc(&cycles, sizeof(long long) * sms * 2));
  CHECK(cudaFuncSetAttribute(overlap_kernel<kT, kA>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  for (int rep = 0; rep < 2; ++rep)  // the first launch warms up
    overlap_kernel<kT, kA><<<sms, kThreads, kSmemBytes>>>(gemm_groups, alu_steps, sink, cycles);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  long long host[2 * 1024];
  CHECK(cudaMemcpy(host, cycles, sizeof(long long) * sms * 2, cudaMemcpyDeviceToHost));
  double t = 0, a = 0;
  for (int i = 0; i < sms; ++i) {
    t += host[2 * i];
    a += host[2 * i + 1];
  }
  CHECK(cudaFree(sink));
  CHECK(cudaFree(cycles));
  return {t / sms, a / sms};
}

template <Tensor kT, Alu kA>
void compare(const char* name, int sms, int gemm_groups, int alu_steps) {
  const double tensor_alone = run<kT, Alu::kNone>(sms, gemm_groups, alu_steps).tensor;
  const double alu_alone = run<Tensor::kNone, kA>(sms, gemm_groups, alu_steps).alu;
  const Clocks both = run<kT, kA>(sms, gemm_groups, alu_steps);
  // 1.0: each side kept its time alone; 0.0: the two took turns (each took the sum)
  const double longest_alone = tensor_alone > alu_alone ? tensor_alone : alu_alone;
  const double longest_both = both.tensor > both.alu ? both.tensor : both.alu;
  const double overlap = (tensor_alone + alu_alone - longest_both) / (tensor_alone + alu_alone - longest_alone);
  printf("%-26s %12.0f %12.0f %14.0f %14.0f %8.2f\n", name, tensor_alone, alu_alone, both.tensor, both.alu, overlap);
}

}  // namespace

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  printf("%s, %d SMs; clocks per block (clock64), one block of two warpgroups per SM\n", prop.name, sms);
  printf("%-26s %12s %12s %14s %14s %8s\n", "tensor | alu", "tensor alone", "alu alone", "tensor, both", "alu, both",
         "overlap");
  // Sized so that each side alone runs ~0.5-1 M clocks: a group of four m64n128k16 is 64 x 128 x 64 x 2 =
  // 1 MFLOP (~256 clocks at 4096 FLOP/clk/SM), one ex2 step of 8 chains ~64 clocks per sub-partition.
  const int groups = 4096, ex2_steps = 16384, ffma_steps = 65536;
  compare<Tensor::kF16SS, Alu::kEx2>("f16 SS | ex2", sms, groups, ex2_steps);
  compare<Tensor::kF16RS, Alu::kEx2>("f16 RS | ex2", sms, groups, ex2_steps);
  compare<Tensor::kE4m3SS, Alu::kEx2>("e4m3 SS | ex2", sms, groups, ex2_steps);
  compare<Tensor::kE4m3RS, Alu::kEx2>("e4m3 RS | ex2", sms, groups, ex2_steps);
  compare<Tensor::kF16SS, Alu::kFfma>("f16 SS | ffma", sms, groups, ffma_steps);
  compare<Tensor::kF16RS, Alu::kFfma>("f16 RS | ffma", sms, groups, ffma_steps);
  compare<Tensor::kE4m3RS, Alu::kFfma>("e4m3 RS | ffma", sms, groups, ffma_steps);
  return 0;
}
