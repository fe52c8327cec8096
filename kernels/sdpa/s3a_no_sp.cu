/*
s3a_no_sp: s2 with the probabilities P written over the fp32 score buffer in
place, so the separate P buffer is gone ("no S/P": one shared buffer for both).

Changes vs parent s2_wmma, and why
  - P (input dtype, 2 bytes) is stored into the same shared-memory rows as the
    fp32 scores S (4 bytes): row r of P starts at the byte where row r of S
    starts, with a leading dimension of 2 * (BLOCK_N + 4) elements (the same
    bytes per row). This saves BLOCK_M * (BLOCK_N + 8) * 2 bytes (9 KiB at
    BLOCK_N=64), which is what lets BLOCK_N=128 fit at D=128 (220 KiB; s2 needs
    237 KiB there, over kSdpaMaxSmemPerBlock). The speed gain is expected to be
    small: the number of shared-memory transactions is unchanged.
  - The aliasing hazard: P element j occupies bytes [2j, 2j+2) of the row, i.e.
    it overwrites score j/2, which in general belongs to the *other* lane of
    the row (lanes own interleaved float2 pairs). So every lane first reads
    all its scores into registers, then a barrier, then P is written. Rows
    are private to one warp (each warp owns 16 query rows), so the barrier
    that makes this safe is __syncwarp, not __syncthreads: no other warp ever
    reads or writes these bytes. The next tile's S store (wmma, after the
    block-wide barrier of the K/V pipeline) comes after this warp's P.V loads
    in program order, so the reverse hazard (S over unread P) cannot occur.
  - Everything else is s2's body (sdpa_wmma_stage.cuh); this file only sets
    kPAliasesScores, which moves P into S and adds that __syncwarp.

Shared memory (bytes): Q BLOCK_M*(D+8)*2 + K,V 2*2*BLOCK_N*(D+8)*2
  + S/P BLOCK_M*(BLOCK_N+4)*4 + O BLOCK_M*(D+8)*4
  = 136 KiB at D=128, BLOCK_N=64 (s2: 145 KiB), 80 KiB at D=64 (s2: 89 KiB).

Knobs (-D; their values are stages.yaml's defines): BLOCK_N (multiple of
  16; 32, 64 and 128 fit for both D), NUM_WARPS=4 -> BLOCK_M = 16 * NUM_WARPS
  = 64, 128 threads.

Run:  stagelab run --stages s3a_no_sp      (resources only, no GPU: stagelab resources s3a_no_sp)
*/
#include <cuda_runtime.h>

#include "sdpa_api.h"
#include "sdpa_export.cuh"
#include "sdpa_wmma_stage.cuh"

namespace {

// The one change: P is written over the fp32 score rows (ldp = 2 * lds).
struct S3aTraits : SdpaWmmaTraits<NUM_WARPS, BLOCK_N, /*P aliases S=*/true> {
  static constexpr const char* kConfig = SDPA_WMMA_CONFIG("s3a_no_sp", "Q,K,V,S(fp32)/P aliased,O(fp32)");
  static_assert((2 * (kBlockN + kPadS)) % 8 == 0,
                "wmma ldm: the 16-bit P aliasing the score rows needs a multiple of 8");
};
}  // namespace

// Defines sdpa_s3a_kernel<T, D> (the body of sdpa_wmma_stage.cuh with S3aTraits) and the exports.
SDPA_WMMA_STAGE(S3aTraits, sdpa_s3a_kernel)
