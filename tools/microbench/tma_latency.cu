// tma_latency.cu -- how long one 8 KiB TMA box (64 rows x 64 fp16, SW128: the
// mission's Q tile) takes from issue to its mbarrier completing, from L2, on one
// SM alone: the first load of a launch against later ones, with and without the
// tensor map prefetched first, beside a plain 16-byte ld.global.cg's round trip.
// The question it answers (s8_persistent_split.cu's log, the timeline): is the
// ~1 us the mission's Q spends in flight the TMA's own latency, or something
// in front of it (the tensor map's first fetch)?
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels/sdpa \
//        -o /tmp/tma_latency tools/microbench/tma_latency.cu && /tmp/tma_latency
//
// Then the mission's grid: 128 blocks, each timing its first TMA (its Q tile), with L2
// flushed and warm, alone and 20 launches back to back; and last the kernel's own start
// (kernel_like), piece by piece.
//
// Each single-block launch; thread 0 issues `kRounds` loads one after another
// (each waits for the previous), every one of a tile of the same 512 x 64 head
// (64 KiB, in L2 after the first launch). Clocks are the SM's clock64.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda_check.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "sdpa_api.h"
#include "sdpa_tma.cuh"

namespace {

constexpr int kRows = 64, kHeadDim = 64, kSeq = 512;
constexpr int kTileBytes = kRows * kHeadDim * 2;
constexpr int kRounds = 16;

// 1: wait with mbarrier.test_wait (never suspends) instead of sdpa_tma::mbarrier_wait's try_wait,
// whose thread the hardware may suspend until the phase completes or a time limit passes.
__device__ int g_spin;
__device__ __forceinline__ void wait_phase(uint32_t bar, uint32_t parity) {
  if (!g_spin) return sdpa_tma::mbarrier_wait(bar, parity);
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  }
}

struct Clocks {
  long long tma[kRounds];
  long long ldg[kRounds];
  long long prefetch_wait;
};

__global__ void tma_latency(const __grid_constant__ CUtensorMap map, const uint4* head, int prefetch, Clocks* out) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long bar_storage;
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t tile = (raw + 1023u) & ~1023u;
  const uint32_t bar = static_cast<uint32_t>(__cvta_generic_to_shared(&bar_storage));
  if (threadIdx.x != 0) return;
  sdpa_tma::mbarrier_init(bar, 1);
  sdpa_tma::fence_mbarrier_init();
  long long t0 = clock64();
  if (prefetch) {
    sdpa_tma::prefetch_tensor_map(&map);
    while (clock64() - t0 < 4000) {}  // ~2 us: long enough for any fetch the prefetch started
  }
  out->prefetch_wait = clock64() - t0;
  constexpr int kTiles = kSeq / kRows;
  for (int r = 0; r < kRounds; ++r) {
    t0 = clock64();
    sdpa_tma::mbarrier_arrive_expect_tx(bar, kTileBytes);
    sdpa_tma::tma_load_4d(tile, &map, bar, 0, (r % kTiles) * kRows, 0, 0);
    wait_phase(bar, r & 1);
    out->tma[r] = clock64() - t0;
  }
  unsigned sink = 0;
  for (int r = 0; r < kRounds; ++r) {
    t0 = clock64();
    uint4 v;
    const uint4* p = head + (r % kTiles) * (kTileBytes / 16) + 7;
    asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    sink += v.x ^ v.w;  // the clock read below waits for the load's registers
    asm volatile("" : "+r"(sink));
    out->ldg[r] = clock64() - t0;
  }
  if (sink == 0x12345678u) out->prefetch_wait = -1;  // keeps the loads
}

// Every block of a (2,8,512,64) grid like the mission's (128 blocks, one 64-row Q tile each): the
// first TMA's latency, per block. The L2 state is the caller's: flushed, or warmed by a launch
// before.
// kv_tiles > 0: right after Q, the block also issues that many 128-row tiles of `kv_map` (16 KiB
// each, the mission's K/V ring: 8 = four K and four V), as s8's producer does; Q's latency and the
// last tile's are both recorded (out[block], out[blocks + block]).
// rotate: block q_tile's i-th K/V tile is tile (i + q_tile) of its head rather than tile i, so the
// eight blocks of a head do not all ask L2 for the same lines at the same moment.
__global__ void first_tma_per_block(const __grid_constant__ CUtensorMap map, const __grid_constant__ CUtensorMap kv_map,
                                    int heads, int kv_tiles, int rotate, long long* out) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long bar_storage;
  const uint32_t tile = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  const uint32_t bar = static_cast<uint32_t>(__cvta_generic_to_shared(&bar_storage));
  __shared__ __align__(8) unsigned long long kv_bar_storage;
  const uint32_t kv_bar = static_cast<uint32_t>(__cvta_generic_to_shared(&kv_bar_storage));
  if (threadIdx.x == 0) {
    sdpa_tma::mbarrier_init(bar, 1);
    sdpa_tma::mbarrier_init(kv_bar, 1);
    sdpa_tma::fence_mbarrier_init();
    sdpa_tma::prefetch_tensor_map(&map);
    sdpa_tma::prefetch_tensor_map(&kv_map);
  }
  __syncthreads();
  // Every other thread waits for Q as s8's consumer warpgroups do (blocks of 288 threads: 8 warps).
  if (threadIdx.x != 0) return wait_phase(bar, 0);
  constexpr int kTiles = kSeq / kRows;
  const int q_tile = blockIdx.x % kTiles, h = blockIdx.x / kTiles % heads, b = blockIdx.x / kTiles / heads;
  constexpr int kKvRows = 128, kKvBytes = kKvRows * kHeadDim * 2;
  const long long t0 = clock64();
  sdpa_tma::mbarrier_arrive_expect_tx(bar, kTileBytes);
  sdpa_tma::tma_load_4d(tile, &map, bar, 0, q_tile * kRows, h, b);
  if (kv_tiles > 0) sdpa_tma::mbarrier_arrive_expect_tx(kv_bar, kv_tiles * kKvBytes);
  for (int i = 0; i < kv_tiles; ++i)
    sdpa_tma::tma_load_4d(tile + kTileBytes + i * kKvBytes, &kv_map, kv_bar, 0,
                          ((i + (rotate ? q_tile : 0)) % (kSeq / kKvRows)) * kKvRows, h, b);
  wait_phase(bar, 0);
  out[blockIdx.x] = clock64() - t0;
  if (kv_tiles > 0) {
    wait_phase(kv_bar, 0);
    out[gridDim.x + blockIdx.x] = clock64() - t0;
  }
}

// The kernel's own start, piece by piece: Params with three tensor maps as one __grid_constant__
// struct (sdpa_warpspec::Params), 384 threads with the producer's setmaxnreg.dec and the
// consumers' .inc (kWarpSpec), 158 KiB of shared memory (one block per SM), griddepcontrol.wait
// before the loads when launched with programmatic stream serialization (pdl), and Q, then four
// K and four V tiles of 128 rows from two maps, as s8's key-split producer issues them. The
// consumer thread 128 times Q from the producer's issue (both on the SM's clock64).
struct KernelParams {
  SdpaProblem p;
  CUtensorMap q_map, k_map, v_map;
  int m_tiles, work_items;
};
constexpr int kKernelSmem = 158 * 1024;

// o != nullptr: after its K/V have landed, each block spins ~6000 clocks (the real block's math)
// and writes its 64 x 64 fp16 O tile (8 KiB, 1 MiB per launch) as the real epilogue does, so the
// next launch starts behind those stores.
template <bool kWarpSpec>
__global__ void __launch_bounds__(384, 1) kernel_like(const __grid_constant__ KernelParams prm, int pdl, long long* out,
                                                      uint4* o) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  __shared__ __align__(8) unsigned long long bars[2];
  __shared__ long long issued_at;
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  const uint32_t q_bar = static_cast<uint32_t>(__cvta_generic_to_shared(&bars[0]));
  const uint32_t kv_bar = static_cast<uint32_t>(__cvta_generic_to_shared(&bars[1]));
  if (threadIdx.x == 0) {
    sdpa_tma::mbarrier_init(q_bar, 1);
    sdpa_tma::mbarrier_init(kv_bar, 1);
    sdpa_tma::fence_mbarrier_init();
  }
  __syncthreads();
  constexpr int kTiles = kSeq / kRows, kKvRows = 128, kKvBytes = kKvRows * kHeadDim * 2, kKvTiles = kSeq / kKvRows;
  const int q_tile = blockIdx.x % kTiles, h = blockIdx.x / kTiles % prm.p.heads, b = blockIdx.x / kTiles / prm.p.heads;
  if (threadIdx.x < 128) {
    if constexpr (kWarpSpec) sdpa_tma::setmaxnreg_dec<24>();
    if (threadIdx.x != 0) return;
    sdpa_tma::prefetch_tensor_map(&prm.q_map);
    sdpa_tma::prefetch_tensor_map(&prm.k_map);
    sdpa_tma::prefetch_tensor_map(&prm.v_map);
    if (pdl) sdpa_tma::grid_dependency_wait();
    issued_at = clock64();
    sdpa_tma::mbarrier_arrive_expect_tx(q_bar, kTileBytes);
    sdpa_tma::tma_load_4d(base, &prm.q_map, q_bar, 0, q_tile * kRows, h, b);
    sdpa_tma::mbarrier_arrive_expect_tx(kv_bar, 2 * kKvTiles * kKvBytes);
    for (int i = 0; i < kKvTiles; ++i) {
      sdpa_tma::tma_load_4d(base + kTileBytes + 2 * i * kKvBytes, &prm.k_map, kv_bar, 0, i * kKvRows, h, b);
      sdpa_tma::tma_load_4d(base + kTileBytes + (2 * i + 1) * kKvBytes, &prm.v_map, kv_bar, 0, i * kKvRows, h, b);
    }
    return;
  }
  if constexpr (kWarpSpec) sdpa_tma::setmaxnreg_inc<240>();
  if (pdl) sdpa_tma::grid_dependency_wait();
  wait_phase(q_bar, 0);
  if (threadIdx.x == 128) out[blockIdx.x] = clock64() - *static_cast<volatile long long*>(&issued_at);
  wait_phase(kv_bar, 0);
  if (o == nullptr) return;
  // the real block's ~3 us of math before its epilogue, so that launches overlap as they do there
  for (const long long t = clock64(); clock64() - t < 6000;) {
  }
  constexpr int kChunks = kTileBytes / 16;  // 512 16-byte chunks per tile, two per consumer thread
  for (int c = threadIdx.x - 128; c < kChunks; c += 256) o[blockIdx.x * kChunks + c] = make_uint4(c, c, c, c);
}

}  // namespace

using namespace sdpa_tma;

void one_sm();

namespace {

long long median(long long* v, int n) {
  std::nth_element(v, v + n / 2, v + n);
  return v[n / 2];
}

// The mission's Q layout: the first TMA of each of 128 blocks, with L2 flushed (a 256 MiB write
// between) and warm (the same launch just before), clocks per block (median, max).
void mission_grid() {
  constexpr int kBatch = 2, kHeads = 8, kBlocks = kBatch * kHeads * (kSeq / kRows);
  const size_t elems = size_t(kBatch) * kHeads * kSeq * kHeadDim;
  __half* q = nullptr;
  CHECK(cudaMalloc(&q, elems * sizeof(__half)));
  CHECK(cudaMemset(q, 0x3c, elems * sizeof(__half)));
  constexpr size_t kFlushBytes = size_t(256) << 20;
  void* flush = nullptr;
  CHECK(cudaMalloc(&flush, kFlushBytes));
  SdpaProblem p{};
  p.batch = kBatch;
  p.heads = kHeads;
  p.seq_len = kSeq;
  p.head_dim = kHeadDim;
  const SdpaTensorStrides strides{int64_t(kHeads) * kSeq * kHeadDim, int64_t(kSeq) * kHeadDim, kHeadDim};
  __half* kv = nullptr;  // K's stand-in: its own buffer, as the mission's K and V
  CHECK(cudaMalloc(&kv, elems * sizeof(__half)));
  CHECK(cudaMemset(kv, 0x3c, elems * sizeof(__half)));
  CUtensorMap map, kv_map;
  CHECK(encode_tensor_map(&map, q, strides, p, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, kRows));
  CHECK(encode_tensor_map(&kv_map, kv, strides, p, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 128));
  constexpr int kBackToBack = 20;  // throughput mode's launches: one after another, no sync between
  long long* out = nullptr;
  CHECK(cudaMallocManaged(&out, sizeof(long long) * kBlocks * 2 * kBackToBack));
  constexpr int kMissionKvTiles = 8;
  const int smem = kTileBytes + kMissionKvTiles * 128 * kHeadDim * 2 + 1024;
  CHECK(cudaFuncSetAttribute(first_tma_per_block, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  for (int kv_tiles : {0, kMissionKvTiles}) {
    for (int warm = 0; warm < 3; ++warm) {
      if (!warm) CHECK(cudaMemset(flush, warm, kFlushBytes));
      first_tma_per_block<<<kBlocks, 32, smem>>>(map, kv_map, kHeads, kv_tiles, 0, out);
      CHECK(cudaDeviceSynchronize());
      long long worst = 0;
      for (int i = 0; i < kBlocks; ++i) worst = std::max(worst, out[i]);
      std::printf("mission grid, %s L2, Q + %d K/V tiles: Q's TMA per block, median %lld clocks, max %lld", 
                  warm ? "warm" : "flushed", kv_tiles, median(out, kBlocks), worst);
      if (kv_tiles > 0) std::printf("; all K/V landed: median %lld", median(out + kBlocks, kBlocks));
      std::printf("\n");
    }
    struct Setup {
      int rotate, threads;
    };
    for (const Setup setup : {Setup{0, 32}, Setup{1, 32}, Setup{0, 288}}) {
      const int rotate = setup.rotate;
      if (kv_tiles == 0 && rotate) continue;
      for (int i = 0; i < kBackToBack; ++i)
        first_tma_per_block<<<kBlocks, setup.threads, smem>>>(map, kv_map, kHeads, kv_tiles, rotate,
                                                               out + i * 2 * kBlocks);
      CHECK(cudaDeviceSynchronize());
      long long q_medians[kBackToBack], kv_medians[kBackToBack];
      for (int i = 0; i < kBackToBack; ++i) {
        q_medians[i] = median(out + i * 2 * kBlocks, kBlocks);
        kv_medians[i] = kv_tiles > 0 ? median(out + (i * 2 + 1) * kBlocks, kBlocks) : 0;
      }
      std::printf("mission grid, %d launches back to back, %d threads, Q + %d K/V tiles%s: Q's TMA per block, median "
                  "of the launches' medians %lld clocks (first launch %lld); all K/V landed %lld\n",
                  kBackToBack, setup.threads, kv_tiles, rotate ? " rotated by query tile" : "",
                  median(q_medians + 1, kBackToBack - 1),
                  q_medians[0], median(kv_medians + 1, kBackToBack - 1));
    }
  }
}

}  // namespace

namespace {

// kernel_like's four variants, 20 launches back to back each, with and without PDL.
void kernel_start() {
  constexpr int kBatch = 2, kHeads = 8, kBlocks = kBatch * kHeads * (kSeq / kRows), kBackToBack = 20;
  const size_t elems = size_t(kBatch) * kHeads * kSeq * kHeadDim;
  KernelParams prm{};
  prm.p.batch = kBatch;
  prm.p.heads = kHeads;
  prm.p.seq_len = kSeq;
  prm.p.head_dim = kHeadDim;
  const SdpaTensorStrides strides{int64_t(kHeads) * kSeq * kHeadDim, int64_t(kSeq) * kHeadDim, kHeadDim};
  __half* buffers[3];
  for (auto& buffer : buffers) {
    CHECK(cudaMalloc(&buffer, elems * sizeof(__half)));
    CHECK(cudaMemset(buffer, 0x3c, elems * sizeof(__half)));
  }
  CHECK(encode_tensor_map(&prm.q_map, buffers[0], strides, prm.p, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, kRows));
  CHECK(encode_tensor_map(&prm.k_map, buffers[1], strides, prm.p, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 128));
  CHECK(encode_tensor_map(&prm.v_map, buffers[2], strides, prm.p, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 128));
  long long* out = nullptr;
  CHECK(cudaMallocManaged(&out, sizeof(long long) * kBlocks * kBackToBack));
  uint4* o = nullptr;
  CHECK(cudaMalloc(&o, size_t(kBlocks) * kTileBytes));
  CHECK(cudaFuncSetAttribute(kernel_like<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kKernelSmem));
  CHECK(cudaFuncSetAttribute(kernel_like<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kKernelSmem));
  for (int write_o = 0; write_o < 2; ++write_o)
  for (int warp_spec = 1; warp_spec >= 0; --warp_spec) {
    for (int pdl = 1; pdl >= 0; --pdl) {
      if (write_o && !(warp_spec && pdl)) continue;  // the real kernel's case only
      for (int i = 0; i < kBackToBack; ++i) {
        cudaLaunchConfig_t config{};
        config.gridDim = dim3(kBlocks);
        config.blockDim = dim3(384);
        config.dynamicSmemBytes = kKernelSmem;
        cudaLaunchAttribute attr{};
        attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr.val.programmaticStreamSerializationAllowed = 1;
        config.attrs = &attr;
        config.numAttrs = pdl ? 1 : 0;
        long long* slot = out + i * kBlocks;
        uint4* o_arg = write_o ? o : nullptr;
        CHECK(warp_spec ? cudaLaunchKernelEx(&config, kernel_like<true>, prm, pdl, slot, o_arg)
                        : cudaLaunchKernelEx(&config, kernel_like<false>, prm, pdl, slot, o_arg));
      }
      CHECK(cudaDeviceSynchronize());
      long long medians[kBackToBack];
      for (int i = 0; i < kBackToBack; ++i) medians[i] = median(out + i * kBlocks, kBlocks);
      std::printf("kernel-like start, 384 threads%s, three maps in one Params, 158 KiB, Q + 4 K + 4 V%s%s: "
                  "Q per block, median of the launches' medians %lld clocks\n",
                  warp_spec ? " with setmaxnreg 24/240" : "", pdl ? ", PDL (griddepcontrol.wait)" : "",
                  write_o ? ", each block then writing its O tile" : "",
                  median(medians + 1, kBackToBack - 1));
    }
  }
}

}  // namespace

int main() {
  for (int spin = 0; spin < 2; ++spin) {
    CHECK(cudaMemcpyToSymbol(g_spin, &spin, sizeof(spin)));
    std::printf("=== waits by %s\n", spin ? "mbarrier.test_wait (spinning)" : "mbarrier.try_wait (may suspend)");
    one_sm();
    mission_grid();
  }
  kernel_start();
  return 0;
}

void one_sm() {
  __half* head = nullptr;
  CHECK(cudaMalloc(&head, size_t(kSeq) * kHeadDim * sizeof(__half)));
  CHECK(cudaMemset(head, 0x3c, size_t(kSeq) * kHeadDim * sizeof(__half)));
  SdpaProblem p{};
  p.batch = 1;
  p.heads = 1;
  p.seq_len = kSeq;
  p.head_dim = kHeadDim;
  const SdpaTensorStrides strides{int64_t(kSeq) * kHeadDim, int64_t(kSeq) * kHeadDim, kHeadDim};
  CUtensorMap map;
  CHECK(encode_tensor_map(&map, head, strides, p, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, kRows));
  Clocks* out = nullptr;
  CHECK(cudaMallocManaged(&out, sizeof(Clocks)));
  const int smem = kTileBytes + 1024;
  CHECK(cudaFuncSetAttribute(tma_latency, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  std::printf("SM clocks; ns at the %.2f GHz the device reports as its clock\n", clock_khz / 1e6);
  for (int launch = 0; launch < 4; ++launch) {  // launch 0 brings the head into L2
    const int prefetch = launch % 2;
    tma_latency<<<1, 32, smem>>>(map, reinterpret_cast<const uint4*>(head), prefetch, out);
    CHECK(cudaDeviceSynchronize());
    std::printf("launch %d, prefetch %d: TMA", launch, prefetch);
    for (int r = 0; r < kRounds; ++r) std::printf(" %lld", out->tma[r]);
    std::printf("\n    ld.global.cg");
    for (int r = 0; r < kRounds; ++r) std::printf(" %lld", out->ldg[r]);
    std::printf("\n    first TMA %.0f ns, median later %.0f ns (rough: the reported clock)\n",
                out->tma[0] / (clock_khz / 1e6), out->tma[kRounds / 2] / (clock_khz / 1e6));
  }
}
