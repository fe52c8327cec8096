/*
s2_wmma: s1 with both matrix products on tensor cores via nvcuda::wmma
(16x16x16, fp16/bf16 inputs, fp32 accumulate).

Changes vs parent s1_cp_async, and why
  - S = Q.K^T and O += P.V run as 16x16x16 wmma tiles instead of per-lane
    fp32 FMAs: Hopper's tensor cores do the multiply-adds at many times the
    CUDA-core rate; the fp32 accumulators keep the precision.
  - K^T is never materialised: row-major K in shared memory is read as a
    col_major matrix_b (loading it row_major would compute Q.K, not Q.K^T).
  - Work split: NUM_WARPS warps, each owning 16 query rows (one wmma M tile),
    so a warp's rows of S, P and O are private and the softmax needs only
    __syncwarp. Q is copied once with cp.async and held as matrix_a fragments.
  - The online softmax leaves registers for shared memory: wmma accumulator
    fragments have an unspecified element layout, so a per-row rescale cannot
    be applied to them in place. Each tile stores S as fp32, two lanes per row
    turn it into P (input dtype, in its own buffer here) and rescale an fp32 O
    buffer, and O is reloaded for P.V. The stage's cost lesson: every tile
    round-trips S, P and O through shared memory.
  - Causal: a warp whose 16 rows all lie above a K/V tile skips it outright.
  - K/V: cp.async double buffering as in s1; shared rows padded by 16 bytes so
    the 16-row wmma loads spread over all banks.
  The kernel body lives in sdpa_wmma_stage.cuh (shared with s3a_no_sp); this
  file picks the separate P buffer.

Shared memory (bytes):
  Q  BLOCK_M * (D + 8) * 2
  K,V 2 stages * 2 * BLOCK_N * (D + 8) * 2
  S  BLOCK_M * (BLOCK_N + 4) * 4     fp32 scores
  P  BLOCK_M * (BLOCK_N + 8) * 2     probabilities, input dtype
  O  BLOCK_M * (D + 8) * 4           fp32 output accumulator
  = 145 KiB at D=128, BLOCK_N=64 (89 KiB at D=64): one block of 4 warps per SM
  at D=128, the occupancy cost later stages remove by keeping S/P/O in
  registers. BLOCK_N=128 does not fit at D=128 (237 KiB, over the per-block
  limit kSdpaMaxSmemPerBlock): that instance returns cudaErrorInvalidValue
  (s3a, which drops P, fits).

Knobs (-D; their values are stages.yaml's defines): BLOCK_N (multiple of
  16; 32 and 64 fit for both D, 128 only for D=64), NUM_WARPS ->
  BLOCK_M = 16 * NUM_WARPS = 64, 128 threads.

Run:  stagelab run --stages s2_wmma      (resources only, no GPU: stagelab resources s2_wmma)
*/
#include <cuda_runtime.h>

#include "sdpa_api.h"
#include "sdpa_export.cuh"
#include "sdpa_wmma_stage.cuh"

namespace {

// P gets its own BLOCK_M x (BLOCK_N + 8) buffer in the input dtype.
struct S2Traits : SdpaWmmaTraits<NUM_WARPS, BLOCK_N, /*P aliases S=*/false> {
  static constexpr const char* kConfig = SDPA_WMMA_CONFIG("s2_wmma", "Q,K,V,S(fp32),P,O(fp32)");
};
}  // namespace

// Defines sdpa_s2_kernel<T, D> (the body of sdpa_wmma_stage.cuh with S2Traits) and the exports.
SDPA_WMMA_STAGE(S2Traits, sdpa_s2_kernel)
