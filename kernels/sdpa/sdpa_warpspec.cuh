// sdpa_warpspec.cuh -- the warp-specialized Hopper attention kernel that s6, s7
// and s8 instantiate with different policies (Config below):
//
//   producer warpgroup   setmaxnreg.dec; one thread issues TMA boxes of Q (once
//                        per work item) and K(n), V(n) into rings of kStages
//                        buffers, each with a "full" (transaction bytes) and an
//                        "empty" (one arrival per consumer warp) mbarrier.
//   consumer warpgroups  setmaxnreg.inc; 64 query rows each (1, 2 or 3 of them:
//                        64, 128 or 192 rows per block); per key tile the
//                        intra-warpgroup overlap of s5 (S(n) issued before
//                        P(n-1).V(n-1), softmax(n) under P(n-1).V(n-1)).
//
// Policies:
//   kPingpong    (2 consumer warpgroups) named barriers hand the tensor cores
//                back and forth: a warpgroup issues its GEMMs of a tile only in
//                its turn, so one's softmax runs under the other's GEMMs.
//   kPersistent  grid = min(work items, SMs); each block walks work items
//                blockIdx.x, + gridDim.x, ... with the K/V ring position and
//                the Q buffer's phase carried across items ("empty_q" frees Q
//                once the epilogue has staged O through it). QRing<Config>: two
//                Q buffers, so the next item's Q loads under this item's tiles.
//   split-KV     (not persistent) a thread-block cluster of 1, 2 or 4 CTAs
//                shares one work item; CTA r takes a contiguous share of its
//                key tiles, writes its unnormalised O, row max and row sum to
//                its own shared memory, and rank 0 combines the partials over
//                DSMEM (mapa + ld.shared::cluster). The cluster size is chosen
//                at launch.
//   kKeySplit    (2 consumer warpgroups, not persistent, no pingpong) both
//                warpgroups take the SAME 64 query rows; ring index i (key
//                tile kt_begin + i) belongs to warpgroup i % 2, so each walks
//                half of the item's key tiles with its own O, max and sum;
//                warpgroup 1 parks its partial in shared memory behind a named
//                barrier and warpgroup 0 merges and stores. The producer is
//                unchanged: it issues the tiles in order.
//   kDeferEpilogue (persistent, two Q buffers; DeferEpilogue<Config>) a
//                warpgroup keeps a finished item's O in its accumulators and
//                stores it (staged in that item's Q buffer) right after
//                issuing the next item's first Q.K^T, under that wgmma.
// Work items are (query tile, head, batch), query tiles fastest and in
// descending order: for causal attention each head's longest items go first
// (statically striped over the persistent blocks).
#pragma once

#include <type_traits>

#include "sdpa_warpspec_config.cuh"
#include "sched/work_order.cuh"
#include "mainloop/producer.cuh"
#include "mainloop/consumer.cuh"

namespace sdpa_warpspec {

// The kernel's body, on the parameters of its operand policy (Operands<T>::KernelParams).
template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive, class KernelParams>
__device__ __forceinline__ void warpspec_body(const KernelParams& prm) {
  using L = Layout<T, D, Cfg>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_base = sdpa_mma::smem_addr(smem_raw);
  const uint32_t s_base = (raw_base + (kSw128Align - 1)) & ~static_cast<uint32_t>(kSw128Align - 1);
  unsigned char* smem = smem_raw + (s_base - raw_base);
  uint32_t splits = 1, split = 0;
  if constexpr (!Cfg::kPersistent) {
    asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(splits));
    split = cluster_ctarank();
  }
  if (threadIdx.x == 0) {
    WS_TIMELINE_OPEN(prm.p.out);
    const uint32_t bars = s_base + L::kBarOffset;
    for (int slot = 0; slot < Cfg::kQStages; ++slot) {  // item `slot` is the first to use Q buffer `slot`
      mbarrier_init(full_q_bar<Cfg>(bars, slot), 1);  // the producer's expect_tx arrival
      mbarrier_init(empty_q_bar<Cfg>(bars, slot), Cfg::kConsumerWarps);
    }
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbarrier_init(ring_bar<Cfg::kStages>(bars, kFullK, s), 1);
      mbarrier_init(ring_bar<Cfg::kStages>(bars, kFullV, s), 1);
      // with K/V multicast the peer's consumer warps free our slots too (release_kv)
      mbarrier_init(ring_bar<Cfg::kStages>(bars, kEmptyK, s), Cfg::kRingReleasers * Cfg::kMulticastCtas);
      mbarrier_init(ring_bar<Cfg::kStages>(bars, kEmptyV, s), Cfg::kRingReleasers * Cfg::kMulticastCtas);
    }
    fence_mbarrier_init();
  }
  __syncthreads();  // the last block-wide barrier: roles diverge below
  // K/V multicast: the peer's copies and releases land on our barriers, so both CTAs' inits come first.
  if constexpr (Cfg::kMulticastCtas > 1) cluster_sync();
  WS_STAMP_IF(threadIdx.x == 0, kPrologue);
  if constexpr (Cfg::kPdl == Pdl::kEarlyTrigger) grid_launch_dependents();
  // Broadcast so ptxas can prove every role branch warp-uniform (wgmma and
  // setmaxnreg under a divergent-looking branch get serialized or ignored).
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / kWarpgroupThreads, 0);
  if (wg == 0) {
    setmaxnreg_dec<Cfg::kProducerRegs>();
    if (threadIdx.x == 0) produce<T, D, Cfg, kCausal>(prm, s_base, split, splits);
    __syncwarp();
    if (splits > 1) {  // the consumers' two cluster barriers count every thread
      cluster_sync();
      cluster_sync();
    }
  } else {
    setmaxnreg_inc<Cfg::kConsumerRegs>();
    // O's stores must not land before the previous grid is done with the buffer
    if constexpr (kPdlOn<Cfg>) grid_dependency_wait();
    WS_STAMP_IF(threadIdx.x == kWarpgroupThreads, kConsumerGo);
    Consumer<T, D, Cfg, kCausal, kScalePositive> consumer(prm, s_base, smem, wg - 1);
    consumer.run(split, splits);
  }
  // K/V multicast: the peer's last releases arrive on our barriers; keep them until it is done.
  if constexpr (Cfg::kMulticastCtas > 1) cluster_sync();
}

// The 16-bit stages' kernel (its name, and so its SASS listing's, as before the operand policies).
template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks) warpspec_kernel(const __grid_constant__ Params prm) {
  warpspec_body<T, D, Cfg, kCausal, kScalePositive>(prm);
}
// An operand policy with kernel parameters of its own (int8/operands.cuh's Int8Params).
template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks) warpspec_operands_kernel(
    const __grid_constant__ typename Operands<T>::KernelParams prm) {
  warpspec_body<T, D, Cfg, kCausal, kScalePositive>(prm);
}
template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
constexpr auto kernel_of() {
  if constexpr (std::is_same_v<typename Operands<T>::KernelParams, Params>)
    return warpspec_kernel<T, D, Cfg, kCausal, kScalePositive>;
  else
    return warpspec_operands_kernel<T, D, Cfg, kCausal, kScalePositive>;
}

}  // namespace sdpa_warpspec

#include "sdpa_warpspec_launch.cuh"
