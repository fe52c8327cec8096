/*
s7_pingpong: the two consumer warpgroups of s6 take turns on the tensor cores
(FlashAttention-3's "pingpong" scheduling), so one warpgroup's softmax runs
under the other's GEMMs.

What it is
  s6's kernel (sdpa_warpspec.cuh) with kPingpong on. Two named barriers, one
  per consumer warpgroup, pass a token: a warpgroup waits for its turn
  (bar.sync on its own barrier, 256 threads), issues the GEMMs of its tile
  (S(n) = Q.K(n)^T and P(n-1).V(n-1)), then hands the turn over (bar.arrive on
  the other's barrier) and runs its softmax while the other warpgroup's GEMMs
  occupy the tensor cores. Warpgroup 1 arrives once at the start, so
  warpgroup 0 goes first. Both warpgroups take (key tiles + 1) turns per work
  item whatever they compute (a causal warpgroup with fewer tiles passes its
  extra turns empty), so the token never strands. The O rescale moves out of
  the turn (before it), where the other warpgroup's GEMMs hide it.

Changes vs parent s6_tma_warpspec, and why
  - In s6 both warpgroups issue their GEMMs whenever their data lands, so
    their softmaxes tend to line up and the tensor cores idle while both
    compute exponentials (the softmax of a 64x128 tile is roughly as long as
    its two GEMMs at D=128). Alternating turns gives the tensor cores one
    warpgroup's GEMMs during the other's softmax. FlashAttention-3 reports
    this as its largest single step at head_dim 128.
  - Intra-warpgroup overlap (S(n+1) issued before softmax(n) finishes, the
    issue's second half of s7) is already in s5/s6 and stays.

Knobs (-D; their values are stages.yaml's defines): as s6 (BLOCK_N_D64, BLOCK_N_D128, STAGES_D64,
  STAGES_D128, PRODUCER_REGS, CONSUMER_REGS).

Shared memory, scope and limits: as s6.

Run: stagelab run --stage s7_pingpong
Build / SASS (BAR.SYNC / BAR.ARV around HGMMA):
  nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a --resource-usage \
       -cubin -I kernels/sdpa kernels/sdpa/s7_pingpong.cu -o /tmp/s7.cubin
*/
#include <cuda_runtime.h>

#include "sdpa_api.h"
#include "sdpa_warpspec.cuh"
// The tunables: stages.yaml's compile_options.defines give their values (the registry is
// their one source); a build without them stops here.
#if !defined(BLOCK_N_D64) || !defined(BLOCK_N_D128) || !defined(STAGES_D64) || !defined(STAGES_D128) || \
    !defined(PRODUCER_REGS) || !defined(CONSUMER_REGS)
#error "s7_pingpong: build with its registry defines (BLOCK_N_D64, BLOCK_N_D128, STAGES_D64, STAGES_D128, PRODUCER_REGS, CONSUMER_REGS)"
#endif

namespace {

constexpr int kConsumerWarpgroups = 2;
constexpr bool kPingpong = true;
constexpr bool kPersistent = false;
constexpr int kBlocksPerSm = 1;

template <int D>
using S7Config = sdpa_warpspec::Config<kConsumerWarpgroups, D == 64 ? BLOCK_N_D64 : BLOCK_N_D128,
                                       D == 64 ? STAGES_D64 : STAGES_D128, kPingpong, kPersistent, kBlocksPerSm,
                                       PRODUCER_REGS, CONSUMER_REGS>;

}  // namespace

SDPA_WARPSPEC_EXPORT(S7Config,
                     "s7_pingpong BLOCK_M=128 (2 consumer warpgroups in pingpong + 1 producer) BLOCK_N_D64=" SDPA_STR(
      BLOCK_N_D64) " BLOCK_N_D128=" SDPA_STR(BLOCK_N_D128) " STAGES_D64=" SDPA_STR(STAGES_D64) " STAGES_D128=" SDPA_STR(
      STAGES_D128) " setmaxnreg producer=" SDPA_STR(PRODUCER_REGS) " consumer=" SDPA_STR(CONSUMER_REGS))
