/*
s6_tma_warpspec: TMA loads on an mbarrier ring, a producer warp and two
consumer warpgroups with re-split registers (warp specialization), on s5's
wgmma math.

What it is
  One block = 3 warpgroups = 384 threads for BLOCK_M = 128 query rows of one
  (batch, head) (CONSUMER_WGS_D64=3: at D=64, 4 warpgroups = 512 threads for
  192 rows, consumers 1-3):
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

Knobs (-D; their values are stages.yaml's defines)
  BLOCK_N_D64         keys per K/V tile at head_dim 64  (64 or 128)
  BLOCK_N_D128        keys per K/V tile at head_dim 128 (64 or 128)
  STAGES_D64          buffers per K ring and per V ring at head_dim 64 (>= 2)
  STAGES_D128         ... at head_dim 128
  PRODUCER_REGS       registers per producer thread after setmaxnreg.dec
  CONSUMER_REGS       registers per consumer thread after setmaxnreg.inc
                      (3 warpgroups: 128 * (24 + 2 * 240) = 64512 <= 65536)
  CONSUMER_WGS_D64    consumer warpgroups at head_dim 64: 2 (BLOCK_M 128) or
                      3 (BLOCK_M 192, FlashAttention-3's head-dim-64 block;
                      512 threads, consumers at fit_consumer_regs = 160:
                      (65536 - 24 * 128) / 384 = 162, rounded down to 8).
                      head_dim 128 stays at 2 (its O alone is 64 registers).

CONSUMER_WGS_D64=3 (registry variant wg3_d64) builds at 160 consumer
  registers with no spill: each K/V tile feeds 192 rows, but the mission
  shape gets fewer, larger blocks on the SMs; s8's long policy takes it by
  the wave count. Trials: the stage's MLflow record (`stagelab journal
  s6_tma_warpspec`).

Shared memory: (BLOCK_M + 2 * STAGES * BLOCK_N) * D * 2 bytes + the barriers
  + 1024 (slack to align the tiles to the 1024-byte swizzle atom).
  D=64:  (128 + 6*128) * 128 + ... = 115 KiB (3 warpgroups: (192 + 6*128) * 128
  + ... = 121 KiB);  D=128: (128 + 4*128) * 256 = 160 KiB

Scope: head_dim 64 and 128, fp16 and bf16, causal or not, any seq_len >= 1,
  any softmax_scale, strided Q/K/V/O whose base and strides are multiples of
  16 bytes (what a tensor map can address; others: cudaErrorInvalidValue
  before launch). Needs sm_90a (wgmma, setmaxnreg).

Code: the kernel is sdpa_warpspec.cuh with the plain policy (two consumer
  warpgroups, no pingpong, one block per work item, no split); s7 and s8
  switch its policies on. Resources and SASS: stagelab resources s6_tma_warpspec
*/
#include <cuda_runtime.h>

#include "sdpa_api.h"
#include "sdpa_warpspec.cuh"
// The tunables: stages.yaml's compile_options.defines give their values (the registry is
// their one source); a build without them stops here.
#if !defined(BLOCK_N_D64) || !defined(BLOCK_N_D128) || !defined(STAGES_D64) || !defined(STAGES_D128) || \
    !defined(PRODUCER_REGS) || !defined(CONSUMER_REGS) || !defined(CONSUMER_WGS_D64)
#error "s6_tma_warpspec: build with its registry defines (BLOCK_N_D64, BLOCK_N_D128, STAGES_D64, STAGES_D128, PRODUCER_REGS, CONSUMER_REGS, CONSUMER_WGS_D64)"
#endif

namespace {

static_assert(CONSUMER_WGS_D64 == 2 || CONSUMER_WGS_D64 == 3, "CONSUMER_WGS_D64: 2 (128 rows) or 3 (192 rows)");
constexpr bool kPingpong = false;
constexpr bool kPersistent = false;
constexpr int kBlocksPerSm = 1;

// head_dim 128 keeps two: three would leave 160 registers for S 64 + O 64 + P 32.
template <int D>
constexpr int kConsumerWarpgroups = D == 64 ? CONSUMER_WGS_D64 : 2;
// CONSUMER_REGS (240) with two warpgroups; with three, the 160 that fit.
template <int D>
constexpr int kConsumerRegs =
    sdpa_warpspec::fit_consumer_regs(kConsumerWarpgroups<D>, PRODUCER_REGS, kBlocksPerSm, CONSUMER_REGS);

template <int D>
using S6Config = sdpa_warpspec::Config<kConsumerWarpgroups<D>, D == 64 ? BLOCK_N_D64 : BLOCK_N_D128,
                                       D == 64 ? STAGES_D64 : STAGES_D128, kPingpong, kPersistent, kBlocksPerSm,
                                       PRODUCER_REGS, kConsumerRegs<D>>;

}  // namespace

SDPA_WARPSPEC_EXPORT(S6Config,
                     "s6_tma_warpspec BLOCK_M=64*consumer warpgroups (+1 producer): CONSUMER_WGS_D64=" SDPA_STR(
      CONSUMER_WGS_D64) " D128=2 BLOCK_N_D64=" SDPA_STR(
      BLOCK_N_D64) " BLOCK_N_D128=" SDPA_STR(BLOCK_N_D128) " STAGES_D64=" SDPA_STR(STAGES_D64) " STAGES_D128=" SDPA_STR(
      STAGES_D128) " setmaxnreg producer=" SDPA_STR(PRODUCER_REGS) " consumer=" SDPA_STR(CONSUMER_REGS)
      " (3 warpgroups: the most that fits, fit_consumer_regs) loads=TMA(cp.async.bulk.tensor 4d, SW128) + mbarrier rings")
