/*
s6_tma_warpspec: TMA loads on an mbarrier ring, a producer warp and two
consumer warpgroups with re-split registers (warp specialization), on s5's
wgmma math.

What it is
  One block = 3 warpgroups = 384 threads for BLOCK_M = 128 query rows of one
  (batch, head):
    warpgroup 0   producer. setmaxnreg.dec to PRODUCER_REGS; one thread issues
                  every copy: Q once, then K(n) and V(n) for each key tile,
                  each a cp.async.bulk.tensor (TMA) box through a tensor map
                  passed as a __grid_constant__ parameter, landing 128-byte
                  swizzled (the SW128 layout wgmma reads) and completing on
                  the tile's "full" mbarrier. Before refilling a buffer it
                  waits on that buffer's "empty" mbarrier.
    warpgroups 1-2  consumers, 64 query rows each. setmaxnreg.inc to
                  CONSUMER_REGS; per key tile exactly s5's sequence (S(n) on
                  the tensor cores while O is rescaled and P(n-1).V(n-1) is
                  issued; softmax(n) under P(n-1).V(n-1)), but the per-tile
                  __syncthreads is gone: a consumer waits only on the mbarrier
                  of the buffer it reads next, and each of its warps frees a
                  buffer (one arrival on "empty") as soon as its wgmma reading
                  it has completed.
  K and V each have a ring of STAGES buffers; the two rings have their own
  barriers, so K(n+1) may land while V(n) is still being read.

Changes vs parent s5_wgmma, and why
  - cp.async (16-byte copies by all 128-256 threads, per-tile
    wait_group + fence.proxy.async + __syncthreads) -> TMA: one instruction
    per 64-column box, address generation and swizzling in the copy engine,
    zero fill past the sequence end done by the hardware (no ragged-tile
    predicates), and completion tracked per buffer by mbarrier transaction
    counts instead of by a block-wide barrier.
  - Warp specialization: the copies come from a warp that does nothing else,
    so loads are issued as soon as a buffer frees up, not when the slowest
    warpgroup reaches the block barrier; the two consumer warpgroups drift
    independently (their only coupling is the shared K/V buffers).
  - BLOCK_M 64 -> 128 (two consumer warpgroups share each K/V tile: half the
    shared-memory traffic per FLOP), BLOCK_N 48 -> 128 at D=128: the register
    re-split gives consumers 240 registers (s5: one warpgroup, ~134 at 3
    blocks/SM), enough for a 64x128 S and a 64x128 O accumulator.
  - The mission shape (2,8,512,64) gets 64 blocks of 128 rows on 132 SMs
    (s5: 128 blocks of 64): expect no gain there; s8 splits the key range.

Knobs (-D overrides)
  BLOCK_N_D64=128     keys per K/V tile at head_dim 64  (64 or 128)
  BLOCK_N_D128=128    keys per K/V tile at head_dim 128 (64 or 128)
  STAGES_D64=3        buffers per K ring and per V ring at head_dim 64 (>= 2)
  STAGES_D128=2       ... at head_dim 128
  PRODUCER_REGS=24    registers per producer thread after setmaxnreg.dec
  CONSUMER_REGS=240   registers per consumer thread after setmaxnreg.inc
                      (3 warpgroups: 128 * (24 + 2 * 240) = 64512 <= 65536)

Shared memory: (BLOCK_M + 2 * STAGES * BLOCK_N) * D * 2 bytes + the barriers
  + 1024 (slack to align the tiles to the 1024-byte swizzle atom).
  D=64:  (128 + 6*128) * 128 + ... = 115 KiB;  D=128: (128 + 4*128) * 256 = 160 KiB

Scope: head_dim 64 and 128, fp16 and bf16, causal or not, any seq_len >= 1,
  any softmax_scale, strided Q/K/V/O whose base and strides are multiples of
  16 bytes (what a tensor map can address; others: cudaErrorInvalidValue
  before launch). Needs sm_90a (wgmma, setmaxnreg).

Run: stagelab run --stage s6_tma_warpspec
Build / resources / SASS (UTMALDG, SYNCS, USETMAXREG, HGMMA):
  nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a --resource-usage \
       -cubin -I kernels/sdpa kernels/sdpa/s6_tma_warpspec.cu -o /tmp/s6.cubin
  cuobjdump -sass /tmp/s6.cubin | grep -c -E "UTMALDG|HGMMA"
*/
#include <cuda_runtime.h>

#include "sdpa_api.h"
#include "sdpa_common.cuh"
#include "sdpa_export.cuh"
#include "sdpa_mma.cuh"
#include "sdpa_tma.cuh"
#include "sdpa_wgmma.cuh"
#include "sdpa_wgmma_tile.cuh"

#ifndef BLOCK_N_D64
#define BLOCK_N_D64 128
#endif
#ifndef BLOCK_N_D128
#define BLOCK_N_D128 128
#endif
#ifndef STAGES_D64
#define STAGES_D64 3
#endif
#ifndef STAGES_D128
#define STAGES_D128 2
#endif
#ifndef PRODUCER_REGS
#define PRODUCER_REGS 24
#endif
#ifndef CONSUMER_REGS
#define CONSUMER_REGS 240
#endif

namespace {

using namespace sdpa_wgmma;
using namespace sdpa_tma;

constexpr int kWarpSize = 32;
constexpr int kConsumerWarpgroups = 2;
constexpr int kWarpgroups = 1 + kConsumerWarpgroups;  // producer first
constexpr int kThreads = kWarpgroups * kWarpgroupThreads;
constexpr int kBlockM = kConsumerWarpgroups * kWgmmaM;
constexpr int kConsumerWarps = kConsumerWarpgroups * kWarpgroupWarps;  // arrivals that free a buffer
constexpr int kRegisterFile = 64 * 1024;  // 32-bit registers per SM (and per block at most)
static_assert(kWarpgroupThreads * (PRODUCER_REGS + kConsumerWarpgroups * CONSUMER_REGS) <= kRegisterFile,
              "the setmaxnreg split must fit the register file");

struct S6Params {
  SdpaProblem p;
  CUtensorMap q_map, k_map, v_map;
};

template <typename T, int D>
struct Traits {
  static_assert(sizeof(T) == 2, "16-bit storage types only");
  static constexpr int kBlockN = D == 64 ? BLOCK_N_D64 : BLOCK_N_D128;
  static constexpr int kStages = D == 64 ? STAGES_D64 : STAGES_D128;
  static_assert(kStages >= 2, "a buffer is refilled while the other is read: >= 2 per ring");
  static_assert(kBlockN == 64 || kBlockN == 128, "BLOCK_N: 64 or 128 (TMA box rows <= 256, wgmma N)");
  static_assert(D % kSw128BlockElems == 0, "head_dim is whole 64-element TMA boxes / swizzle column blocks");
  static constexpr int kColumnBlocks = D / kSw128BlockElems;  // TMA boxes per tile
  static constexpr int kRowBytes = D * 2;
  static constexpr uint32_t kQBytes = kBlockM * kRowBytes;
  static constexpr uint32_t kKVBytes = kBlockN * kRowBytes;
  static constexpr int kQOffset = 0;
  static constexpr int kKOffset = kQOffset + kQBytes;
  static constexpr int kVOffset = kKOffset + kStages * kKVBytes;
  static constexpr int kBarOffset = kVOffset + kStages * kKVBytes;
  // full_q, then full_k, full_v, empty_k, empty_v rings
  static constexpr int kBarriers = 1 + 4 * kStages;
  static constexpr int kBarBytes = 8;
  static constexpr int kSmemBytes = kBarOffset + kBarriers * kBarBytes + kSw128Align;
  static_assert(kQBytes % kSw128Align == 0 && kKVBytes % kSw128Align == 0, "every tile starts 1024-aligned");
  static_assert(static_cast<size_t>(kSmemBytes) <= kSdpaMaxSmemPerBlock, "tiles exceed Hopper shared memory");
  static_assert(kSmemBytes <= (1 << 18), "shared addresses fit the 14-bit descriptor field (>> 4)");
};

// Barrier addresses of ring `ring` (0 full_k, 1 full_v, 2 empty_k, 3 empty_v) at buffer `stage`.
template <int kStages>
__device__ __forceinline__ uint32_t ring_bar(uint32_t bars, int ring, int stage) {
  constexpr int kBarBytes = 8;
  return bars + (1 + ring * kStages + stage) * kBarBytes;
}
enum Ring : int { kFullK = 0, kFullV = 1, kEmptyK = 2, kEmptyV = 3 };

// Producer: one thread issues Q and every K/V tile of the block in order.
template <typename T, int D>
__device__ __forceinline__ void produce(const S6Params& prm, uint32_t s_base, int q_begin, int n_tiles) {
  using Tr = Traits<T, D>;
  constexpr int kStages = Tr::kStages;
  const int h = blockIdx.y;
  const int b = blockIdx.z;
  const uint32_t bars = s_base + Tr::kBarOffset;
  prefetch_tensor_map(&prm.q_map);
  prefetch_tensor_map(&prm.k_map);
  prefetch_tensor_map(&prm.v_map);
  mbarrier_arrive_expect_tx(bars, Tr::kQBytes);
#pragma unroll
  for (int cb = 0; cb < Tr::kColumnBlocks; ++cb)
    tma_load_4d(s_base + Tr::kQOffset + cb * kBlockM * kSw128RowBytes, &prm.q_map, bars, cb * kSw128BlockElems,
                q_begin, h, b);
  for (int n = 0; n < n_tiles; ++n) {
    const int stage = n % kStages;
    const uint32_t parity = ((n / kStages) & 1) ^ 1;  // a fresh buffer counts as freed
    const int key0 = n * Tr::kBlockN;
    const uint32_t k_dst = s_base + Tr::kKOffset + stage * Tr::kKVBytes;
    const uint32_t v_dst = s_base + Tr::kVOffset + stage * Tr::kKVBytes;
    mbarrier_wait(ring_bar<kStages>(bars, kEmptyK, stage), parity);
    mbarrier_arrive_expect_tx(ring_bar<kStages>(bars, kFullK, stage), Tr::kKVBytes);
#pragma unroll
    for (int cb = 0; cb < Tr::kColumnBlocks; ++cb)
      tma_load_4d(k_dst + cb * Tr::kBlockN * kSw128RowBytes, &prm.k_map, ring_bar<kStages>(bars, kFullK, stage),
                  cb * kSw128BlockElems, key0, h, b);
    mbarrier_wait(ring_bar<kStages>(bars, kEmptyV, stage), parity);
    mbarrier_arrive_expect_tx(ring_bar<kStages>(bars, kFullV, stage), Tr::kKVBytes);
#pragma unroll
    for (int cb = 0; cb < Tr::kColumnBlocks; ++cb)
      tma_load_4d(v_dst + cb * Tr::kBlockN * kSw128RowBytes, &prm.v_map, ring_bar<kStages>(bars, kFullV, stage),
                  cb * kSw128BlockElems, key0, h, b);
  }
}

// A consumer warpgroup's view of the K/V rings: wait until a tile has landed,
// free a buffer once this warp's wgmma reading it has completed.
template <int kStages>
struct RingCursor {
  uint32_t bars;
  int lane;
  __device__ __forceinline__ void wait_full(int ring, int n) const {
    mbarrier_wait(ring_bar<kStages>(bars, ring, n % kStages), (n / kStages) & 1);
  }
  __device__ __forceinline__ void release(int ring, int n) const {
    __syncwarp();
    if (lane == 0) mbarrier_arrive(ring_bar<kStages>(bars, ring, n % kStages));
  }
};

template <typename T, int D, bool kCausal, bool kScalePositive>
__device__ __forceinline__ void consume(const SdpaProblem& p, uint32_t s_base, unsigned char* smem, int cwg,
                                        int q_begin, int n_tiles) {
  using Tr = Traits<T, D>;
  constexpr int kBlockN = Tr::kBlockN;
  using Tile = WgAttentionTile<T, D, kBlockN, kCausal, kScalePositive>;
  const int tid = threadIdx.x % kWarpgroupThreads;
  const int warp_in_wg = tid / kWarpSize;
  const int lane = tid % kWarpSize;
  const int S = p.seq_len;
  const int wg_q0 = q_begin + cwg * kWgmmaM;
  // Key tiles this warpgroup needs (0 if all its rows are past the end); the
  // producer loads the block's n_tiles >= wg_tiles, the rest are only released.
  const int wg_tiles = wg_q0 < S ? sdpa_ceil_div(sdpa_kv_end(wg_q0, kWgmmaM, S, kCausal), kBlockN) : 0;
  const RingCursor<Tr::kStages> ring{s_base + Tr::kBarOffset, lane};
  const uint64_t desc_q = make_desc_kmajor(s_base + Tr::kQOffset + cwg * kWgmmaM * kSw128RowBytes);
  const uint64_t desc_k0 = make_desc_kmajor(s_base + Tr::kKOffset);
  const uint64_t desc_v0 = make_desc_mnmajor(s_base + Tr::kVOffset, kBlockN * kSw128RowBytes);
  auto desc_k = [&](int n) { return desc_advance(desc_k0, (n % Tr::kStages) * Tr::kKVBytes); };
  auto desc_v = [&](int n) { return desc_advance(desc_v0, (n % Tr::kStages) * Tr::kKVBytes); };

  Tile tile;
  tile.init(p.softmax_scale, wg_q0 + warp_in_wg * Tile::kWarpRows, lane);
  mbarrier_wait(s_base + Tr::kBarOffset, 0);  // Q has landed
  int n = 0;
  if (wg_tiles > 0) {
    ring.wait_full(kFullK, 0);
    fence_regs(tile.s_acc);
    wgmma_fence();
    tile.template issue_qk<kBlockM>(desc_q, desc_k(0));
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(tile.s_acc);
    ring.release(kEmptyK, 0);
    tile.softmax(0, S);
    tile.pack_p();
  }
  for (n = 1; n < wg_tiles; ++n) {
    ring.wait_full(kFullK, n);
    fence_regs(tile.s_acc);
    fence_regs(tile.p_frag);
    wgmma_fence();  // p_frag (packed) was written by ordinary instructions
    tile.template issue_qk<kBlockM>(desc_q, desc_k(n));
    wgmma_commit();
    fence_regs(tile.o_acc);
    tile.rescale_o();
    fence_regs(tile.o_acc);
    ring.wait_full(kFullV, n - 1);
    wgmma_fence();  // o_acc (rescaled) was written by ordinary instructions
    tile.issue_pv(desc_v(n - 1));
    wgmma_commit();
    wgmma_wait<1>();  // S(n) done; P(n-1).V(n-1) may still run
    fence_regs(tile.s_acc);
    ring.release(kEmptyK, n);
    tile.softmax(n * kBlockN, S);
    // Keep the wait below the softmax (ptxas would hoist it; see sdpa_wgmma.cuh).
    schedule_boundary(S < 0);
    wgmma_wait<0>();  // P(n-1).V(n-1) done: o_acc and p_frag are free
    fence_regs(tile.o_acc);
    fence_regs(tile.p_frag);
    ring.release(kEmptyV, n - 1);
    tile.pack_p();
  }
  if (wg_tiles > 0) {
    fence_regs(tile.o_acc);
    tile.rescale_o();
    fence_regs(tile.o_acc);
    fence_regs(tile.p_frag);
    ring.wait_full(kFullV, n - 1);
    wgmma_fence();
    tile.issue_pv(desc_v(n - 1));
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(tile.o_acc);
    ring.release(kEmptyV, n - 1);
  }
  // Tiles only the other warpgroup needs (causal diagonal, rows past the end):
  // free them in order, after they landed, so every phase completes.
  for (int m = wg_tiles; m < n_tiles; ++m) {
    ring.wait_full(kFullK, m);
    ring.release(kEmptyK, m);
    ring.wait_full(kFullV, m);
    ring.release(kEmptyV, m);
  }
  // Epilogue: this warpgroup's own Q rows (read only by its own, completed,
  // wgmma) stage O; each warp writes and reads back its 16 rows.
  if (wg_q0 < S) {
    T* o_g = sdpa_head_ptr(static_cast<T*>(p.out), p.out_strides, blockIdx.z, blockIdx.y) +
             static_cast<int64_t>(q_begin) * p.out_strides.seq;
    tile.template store_o<kBlockM>(smem + Tr::kQOffset, cwg * kWgmmaM + warp_in_wg * Tile::kWarpRows, o_g,
                                   p.out_strides.seq, S - q_begin, lane);
  }
}

template <typename T, int D, bool kCausal, bool kScalePositive>
__global__ void __launch_bounds__(kThreads, 1) sdpa_s6_kernel(const __grid_constant__ S6Params prm) {
  using Tr = Traits<T, D>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_base = sdpa_mma::smem_addr(smem_raw);
  const uint32_t s_base = (raw_base + (kSw128Align - 1)) & ~static_cast<uint32_t>(kSw128Align - 1);
  unsigned char* smem = smem_raw + (s_base - raw_base);
  const SdpaProblem& p = prm.p;
  // Broadcast so ptxas can prove every role branch warp-uniform (wgmma and
  // setmaxnreg under a divergent-looking branch get serialized or ignored).
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / kWarpgroupThreads, 0);
  // Reverse order: blockIdx.x == 0 is the last (for causal: longest) query tile.
  const int q_begin = (static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x)) * kBlockM;
  const int n_tiles = sdpa_ceil_div(sdpa_kv_end(q_begin, kBlockM, p.seq_len, kCausal), Tr::kBlockN);

  if (threadIdx.x == 0) {
    const uint32_t bars = s_base + Tr::kBarOffset;
    mbarrier_init(bars, 1);  // full_q: the producer's expect_tx arrival
    for (int s = 0; s < Tr::kStages; ++s) {
      mbarrier_init(ring_bar<Tr::kStages>(bars, kFullK, s), 1);
      mbarrier_init(ring_bar<Tr::kStages>(bars, kFullV, s), 1);
      mbarrier_init(ring_bar<Tr::kStages>(bars, kEmptyK, s), kConsumerWarps);
      mbarrier_init(ring_bar<Tr::kStages>(bars, kEmptyV, s), kConsumerWarps);
    }
    fence_mbarrier_init();
  }
  __syncthreads();  // the last block-wide barrier: roles diverge below

  if (wg == 0) {
    setmaxnreg_dec<PRODUCER_REGS>();
    if (threadIdx.x == 0) produce<T, D>(prm, s_base, q_begin, n_tiles);
  } else {
    setmaxnreg_inc<CONSUMER_REGS>();
    consume<T, D, kCausal, kScalePositive>(p, s_base, smem, wg - 1, q_begin, n_tiles);
  }
}

template <typename T, int D, bool kCausal, bool kScalePositive>
cudaError_t launch(const S6Params& prm, cudaStream_t stream) {
  using Tr = Traits<T, D>;
  constexpr size_t smem = Tr::kSmemBytes;
  auto kernel = sdpa_s6_kernel<T, D, kCausal, kScalePositive>;
  const cudaError_t err = sdpa_set_smem(kernel, smem);
  if (err != cudaSuccess) return err;
  const SdpaProblem& p = prm.p;
  const dim3 grid(sdpa_ceil_div(p.seq_len, kBlockM), p.heads, p.batch);
  kernel<<<grid, kThreads, smem, stream>>>(prm);
  return cudaGetLastError();
}

template <typename T, int D>
cudaError_t launch_with_maps(const SdpaProblem& p, cudaStream_t stream) {
  using Tr = Traits<T, D>;
  S6Params prm{};
  prm.p = p;
  const CUtensorMapDataType dtype = tensor_map_dtype(p.dtype);
  cudaError_t err = encode_tensor_map(&prm.q_map, p.q, p.q_strides, p, dtype, kBlockM);
  if (err == cudaSuccess) err = encode_tensor_map(&prm.k_map, p.k, p.k_strides, p, dtype, Tr::kBlockN);
  if (err == cudaSuccess) err = encode_tensor_map(&prm.v_map, p.v, p.v_strides, p, dtype, Tr::kBlockN);
  if (err != cudaSuccess) return err;
  const bool positive = p.softmax_scale > 0.0f;
  if (p.causal) return positive ? launch<T, D, true, true>(prm, stream) : launch<T, D, true, false>(prm, stream);
  return positive ? launch<T, D, false, true>(prm, stream) : launch<T, D, false, false>(prm, stream);
}

// The footprint query of sdpa_export.cuh wants smem_bytes<T, D>() on one type.
struct SmemOf {
  template <class T, int D>
  static constexpr size_t smem_bytes() {
    return Traits<T, D>::kSmemBytes;
  }
};

}  // namespace

extern "C" cudaError_t sdpa_forward(const SdpaProblem* problem, cudaStream_t stream) {
  if (problem == nullptr) return cudaErrorInvalidValue;
  const cudaError_t ok = sdpa_check_problem(*problem);
  if (ok != cudaSuccess) return ok;
  if (sdpa_problem_is_empty(*problem)) return cudaSuccess;
  // O is written with 16-byte stores; Q/K/V are checked by the tensor maps.
  if (!sdpa_problem_vec16_ok(*problem)) return cudaErrorInvalidValue;
  return sdpa_dispatch(*problem, [&](auto tag, auto hd) {
    using T = typename decltype(tag)::type;
    constexpr int D = decltype(hd)::value;
    return launch_with_maps<T, D>(*problem, stream);
  });
}

extern "C" const char* sdpa_stage_config() {
  return "s6_tma_warpspec BLOCK_M=128 (2 consumer warpgroups + 1 producer) BLOCK_N_D64=" SDPA_STR(
      BLOCK_N_D64) " BLOCK_N_D128=" SDPA_STR(BLOCK_N_D128) " STAGES_D64=" SDPA_STR(STAGES_D64) " STAGES_D128=" SDPA_STR(
      STAGES_D128) " setmaxnreg producer=" SDPA_STR(PRODUCER_REGS) " consumer=" SDPA_STR(CONSUMER_REGS)
      " loads=TMA(cp.async.bulk.tensor 4d, SW128) + mbarrier rings";
}

extern "C" int64_t sdpa_dynamic_shared_memory_bytes(int32_t head_dim, int32_t dtype) {
  return sdpa_stage_smem_bytes<SmemOf>(head_dim, dtype);
}
