// sdpa_stress.cuh -- the stress knob of the shared sync wrappers (sdpa_tma.cuh, sdpa_wgmma.cuh),
// for `stagelab stress` (lib/stagelab/stress.py): timing perturbed on one side of every hand-off,
// so that a missing wait or an early release meets its window at moments the default timing
// never reaches.
//
//   STRESS_DELAY_NS  0 (default): no code at all, the SASS of every stage is unchanged.
//                    > 0: before each hand-off of the chosen side, a __nanosleep of a
//                    pseudo-random length in [0, STRESS_DELAY_NS], seeded by the SM clock and
//                    the warp's place, so every warp and every pass draws another delay.
//   STRESS_SIDE      1: the producer side -- each TMA issue (tma_load_4d, its multicast form).
//                    2: the consumer side -- each slot release (mbarrier_arrive), each wgmma
//                    issue (wgmma_fence, which precedes it) and each wgmma_wait.
//
// The other side runs at full speed. The delay stays on the issuing thread: the async proxy's
// work already in flight (TMA, wgmma) is not slowed, only what the thread issues next.
//
//   STRESS_POISON    0 (default): no code. 1: right before each TMA copy is issued, the issuing
//                    thread writes NaN over the first 16 bytes of its destination (then orders
//                    that write before the copy with fence.proxy.async). A correct kernel never
//                    sees it: the copy overwrites it, and nobody may read a slot being loaded.
//                    A slot released while a wgmma still reads it, or read before its copy has
//                    landed, is read as NaN at once, instead of only when a copy from L2 (about a
//                    microsecond) outruns the wgmma, which today's timings never show.
//                    2: as 1, and the freed-slot poison below (sdpa_warpspec.cuh's producer).
//
// The freed-slot poison (STRESS_POISON=2): once a work item's loads are issued, the producer
// waits for the release of each slot still holding one of the item's tiles and at once writes
// NaN over the rows its readers' last wgmma reads (poison_tail). A slot is free once released,
// so a correct kernel never sees it. It exists for a release that comes too early but that no
// later load would exploit: the last P.V's V slot, whose next load waits for the next item's Q
// buffer (empty_q, freed after the epilogue has read O, i.e. after the wgmma completed) -- a
// timing perturbation can never make that one show (tests/planted_sdpa.py, pv_no_final_wait).
#pragma once

#include <cstdint>

#ifndef STRESS_DELAY_NS
#define STRESS_DELAY_NS 0
#endif
#ifndef STRESS_SIDE
#define STRESS_SIDE 0
#endif
#ifndef STRESS_POISON
#define STRESS_POISON 0
#endif

namespace sdpa_stress {

constexpr int kProducer = 1;
constexpr int kConsumer = 2;
static_assert(STRESS_DELAY_NS == 0 || STRESS_SIDE == kProducer || STRESS_SIDE == kConsumer,
              "STRESS_SIDE: 1 (producer) or 2 (consumer) when STRESS_DELAY_NS > 0");
static_assert(STRESS_DELAY_NS >= 0 && STRESS_DELAY_NS <= 1000000, "STRESS_DELAY_NS: 0..1000000 (the most "
              "__nanosleep is specified for is 1 ms)");

#if STRESS_DELAY_NS > 0
// lowbias32 (Wellons' hash-prospector): every input bit moves about half the output bits, so
// consecutive clock readings give unrelated delays.
constexpr uint32_t kMix1 = 0x7feb352du, kMix2 = 0x846ca68bu;
// Odd multipliers (the golden ratio's and MurmurHash3's) spread warp and block indices apart.
constexpr uint32_t kWarpSpread = 0x9e3779b9u, kBlockSpread = 0x85ebca6bu;
constexpr uint32_t kWarpThreads = 32;

__device__ __forceinline__ uint32_t delay_ns() {
  uint32_t x = static_cast<uint32_t>(clock64()) ^ (threadIdx.x / kWarpThreads) * kWarpSpread ^ blockIdx.x * kBlockSpread;
  x ^= x >> 16;
  x *= kMix1;
  x ^= x >> 15;
  x *= kMix2;
  x ^= x >> 16;
  return x % (static_cast<uint32_t>(STRESS_DELAY_NS) + 1u);
}
#endif

// Called first thing in every wrapper of side kSide; nothing unless the knob is on for that side.
template <int kSide>
__device__ __forceinline__ void delay() {
#if STRESS_DELAY_NS > 0
  if constexpr (kSide == STRESS_SIDE) __nanosleep(delay_ns());
#endif
}

// Called by the TMA issue wrappers with the copy's shared-memory destination (sdpa_tma.cuh).
__device__ __forceinline__ void poison_destination(uint32_t dst) {
#if STRESS_POISON
  // All ones is NaN in every element type a slot holds (fp16, bf16, e4m3, e5m2); 16 bytes is the
  // least any TMA box holds (its inner extent is a multiple of 16 bytes).
  constexpr uint32_t kNaNBits = 0xffffffffu;
  asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(dst), "r"(kNaNBits) : "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

#if STRESS_POISON >= 2
// The rows the last wgmma reading a slot reads: one wgmma k-step (16) of the P.V's keys; in a K
// slot, every wgmma of S reads every row, the last one among them.
constexpr int kPoisonTailRows = 16;
constexpr uint32_t kPoisonChunkBytes = 16;  // one st.shared.v4.u32

// NaN over rows [kRows - kPoisonTailRows, kRows) of each of a block-major SW128 tile's column
// blocks (kRowBytes per row; whole rows, so the swizzle does not matter), then the proxy fence
// that orders these writes before the next TMA copy into the slot.
template <int kRows, int kColumnBlocks, int kRowBytes>
__device__ __forceinline__ void poison_tail(uint32_t tile) {
  constexpr uint32_t kNaNBits = 0xffffffffu;
  static_assert(kRows >= kPoisonTailRows && kRowBytes % kPoisonChunkBytes == 0, "poison_tail: tile too small");
  for (int cb = 0; cb < kColumnBlocks; ++cb)
    for (uint32_t at = (kRows - kPoisonTailRows) * kRowBytes; at < kRows * kRowBytes; at += kPoisonChunkBytes)
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(tile + cb * kRows * kRowBytes + at),
                   "r"(kNaNBits) : "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
#endif

}  // namespace sdpa_stress
