/*
s3b_register_softmax: FlashAttention-2-style forward kernel on mma.sync
tensor cores with the whole online softmax kept in registers.

What it is
  One block = BLOCK_M query rows of one (batch, head); NUM_WARPS warps, each
  owning one m16 slice (16 query rows). For every BLOCK_N-key tile:
    S  = Q.K^T        mma.sync.m16n8k16 (row.col, f32 accumulate); Q and K
                      fragments come from shared memory via ldmatrix.x4
    S *= scale*log2e  one multiplier, then -inf masking (diagonal/partial tile)
    online softmax    row max / row sum straight from the C fragments: each
                      row lives in one quad (4 lanes), so a row reduction is
                      2 xor-shuffles; exp2f = one MUFU.EX2
    O += P.V          P packed to f16/bf16 in registers is *already* the A
                      fragment of P.V (see sdpa_mma.cuh), V fragments come from
                      ldmatrix.x4.trans of the row-major V tile
  O is normalised by the row sum at the end, staged through shared memory and
  written with 16-byte stores. The per-tile steps are the warp-level blocks of
  sdpa_mma_blocks.cuh (s4 reuses them); this file holds the load schedule.

Changes vs parent s2_wmma, and why
  - WMMA fragments are opaque, so s2 had to store scores to shared memory,
    run the softmax there and reload P: two shared round trips and a
    __syncthreads per tile. With raw mma.sync the fragment layout is known, so
    S, the row statistics and P never leave registers.
  - exp2f with log2(e)*scale folded into one multiplier (exp -> EX2 + FMUL).
  - Shared tiles are XOR-swizzled on 16-byte chunks (chunk ^= row % 8): all
    ldmatrix phases and cp.async writes are bank-conflict free with no padding.
  - K/V tiles stream with 16-byte cp.async into a double buffer; the copy of
    tile j+1 is issued right after the barrier that publishes tile j, so it
    overlaps all of tile j's math, with one __syncthreads per tile.
  - Causal: key tiles entirely above the diagonal are never loaded; only the
    tiles that straddle the diagonal (or the ragged end of the sequence) run
    the masking code (a warp-uniform branch). Query tiles are launched in
    reverse (blockIdx.x = 0 is the last, heaviest tile) so the long causal
    tiles start in the first wave and the short ones fill the tail.
  - With one m16 slice per warp every 16 query rows re-read the whole K/V tile
    from shared memory; s4's WARP_M_TILES knob goes after that.

Knobs (-D; their values are stages.yaml's defines)
  BLOCK_M            query rows per block; must equal NUM_WARPS * 16
  NUM_WARPS          warps per block (each owns 16 query rows)
  BLOCK_N            keys per K/V tile (multiple of 16)
  Q_IN_REGISTERS     keep Q's A fragments in registers for the whole block
                     (D/16 * 4 registers); 0 re-reads them from shared memory
                     with ldmatrix every tile (fewer registers, more LDSM)

Shared memory: Q tile + 2 stages x (K + V) tiles = (BLOCK_M + 4*BLOCK_N)*D*2 B
  = 40 KiB at D=64, 80 KiB at D=128 (defaults).

Run:  stagelab run --stages s3b_register_softmax   (resources only, no GPU: stagelab resources s3b_register_softmax)
  Eight instances: {half, bf16} x {D=64, D=128} x {causal, not}; the mma.sync
  lowers to HMMA.16816.F32(.BF16) in the SASS.
*/
#include <cuda_runtime.h>

#include "sdpa_api.h"
#include "sdpa_common.cuh"
#include "sdpa_export.cuh"
#include "sdpa_mma.cuh"
#include "sdpa_mma_blocks.cuh"

// The tunables: stages.yaml's compile_options.defines give their values (the registry is
// their one source); a build without them stops here.
#if !defined(BLOCK_N) || !defined(BLOCK_M) || !defined(NUM_WARPS) || !defined(Q_IN_REGISTERS)
#error "s3b_register_softmax: build with its registry defines (BLOCK_N, BLOCK_M, NUM_WARPS, Q_IN_REGISTERS)"
#endif

namespace {

using namespace sdpa_mma;

// One m16 slice per warp and a K/V double buffer: copy tile j+1 while computing tile j.
struct S3bTraits : SdpaMmaTraits<BLOCK_M, BLOCK_N, NUM_WARPS, /*warp m tiles=*/1, /*stages=*/2,
                                 Q_IN_REGISTERS != 0> {
  static constexpr const char* kConfig =
      "s3b_register_softmax BLOCK_M=" SDPA_STR(BLOCK_M) " BLOCK_N=" SDPA_STR(BLOCK_N)
      " NUM_WARPS=" SDPA_STR(NUM_WARPS) " Q_IN_REGISTERS=" SDPA_STR(Q_IN_REGISTERS)
      " STAGES=2 mma=m16n8k16";
};

template <typename T, int D, bool kCausal>
__global__ void __launch_bounds__(S3bTraits::kThreads) sdpa_s3b_kernel(const SdpaProblem p) {
  using Tr = S3bTraits;
  using L = TileLayout<Tr, T, D>;
  using WS = WarpShape<Tr, D>;
  constexpr int kRowChunks = L::kRowChunks;

  const BlockContext<T> c = block_context<Tr, T, D>(p, smem_addr(dynamic_smem()));
  const int kv_end = sdpa_kv_end(c.q_begin, Tr::kBlockM, c.S, kCausal);
  const int n_tiles = sdpa_ceil_div(kv_end, Tr::kBlockN);

  // K and V tile `tile` into buffer `stage`, one cp.async group with the caller's commit.
  auto load_kv = [&](int tile, int stage) {
    const int key0 = tile * Tr::kBlockN;
    load_kv_tile<Tr, T, D>(c.sK + stage * L::kKVBytes, c.k_g, p.k_strides.seq, key0, c.S, c.tid);
    load_kv_tile<Tr, T, D>(c.sV + stage * L::kKVBytes, c.v_g, p.v_strides.seq, key0, c.S, c.tid);
  };

  // Prologue: Q (group 0), then K/V tile 0 (group 1).
  load_tile_async<T, Tr::kBlockM, D, Tr::kThreads>(c.sQ, c.q_g, p.q_strides.seq, c.S - c.q_begin, c.tid);
  cp_async_commit();
  load_kv(0, 0);
  cp_async_commit();

  const int warp_row0 = c.warp * kMmaM;  // first tile row owned by this warp
  // Per-lane ldmatrix address parts (see LdmLane): Q as the A operand, K as
  // an [n][k] B operand, V as a [k][n] B operand read with .trans.
  const LdmLane<kRowChunks> q_lane(warp_row0 + ldm_a_row(c.lane), ldm_a_chunk(c.lane));
  const LdmLane<kRowChunks> k_lane(ldm_bn_row(c.lane), ldm_bn_chunk(c.lane));
  const LdmLane<kRowChunks> v_lane(ldm_bt_row(c.lane), ldm_bt_chunk(c.lane));

  uint32_t q_frag[WS::kQFragMTiles][WS::kQFragSlices][4];
  if constexpr (Tr::kQInRegisters) {
    cp_async_wait<1>();  // Q landed (K/V tile 0 may still be in flight)
    __syncthreads();
    load_q_fragments<Tr, D>(q_frag, c.sQ, q_lane);
  }

  float o_acc[1][WS::kDTiles][4];
#pragma unroll
  for (int dt = 0; dt < WS::kDTiles; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) o_acc[0][dt][e] = 0.0f;
  // Running max (in scaled log2 units) and this lane's partial row sum for
  // rows g and g+8; the quad reduction of the sum is deferred to the end.
  float row_max[1][kRowsPerThread] = {{-INFINITY, -INFINITY}};
  float row_sum[1][kRowsPerThread] = {{0.0f, 0.0f}};
  const float scale_log2 = p.softmax_scale * kSdpaLog2e;
  const int q_idx[kRowsPerThread] = {c.q_begin + warp_row0 + c.g, c.q_begin + warp_row0 + c.g + kRowsApart};
  const int warp_last_q = c.q_begin + warp_row0 + kMmaM - 1;
  const int warp_first_q = c.q_begin + warp_row0;

  for (int n = 0; n < n_tiles; ++n) {
    const int stage = n % Tr::kStages;
    cp_async_wait<0>();  // tile n (and Q) landed for this thread ...
    __syncthreads();     // ... and for all threads; everyone is also done with tile n-1
    if (n + 1 < n_tiles) load_kv(n + 1, (n + 1) % Tr::kStages);  // overwrite tile n-1's buffer
    cp_async_commit();

    const int key0 = n * Tr::kBlockN;
    // Whole tile above this warp's diagonal: nothing visible (only possible
    // when BLOCK_N < BLOCK_M); skip the math, the running stats are unchanged.
    if (kCausal && key0 > warp_last_q) continue;

    const uint32_t sK_t = c.sK + stage * L::kKVBytes;
    const uint32_t sV_t = c.sV + stage * L::kKVBytes;
    // ---- S = Q.K^T -------------------------------------------------------
    float s[1][WS::kNTiles][4];
#pragma unroll
    for (int nt = 0; nt < WS::kNTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[0][nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < WS::kDSlices; ++kk) {
      uint32_t a_tmp[4];
      if constexpr (!Tr::kQInRegisters)
        ldmatrix_x4(a_tmp, c.sQ + q_lane.offset(0, kChunksPerLdm * kk));
      const uint32_t(&a)[4] = Tr::kQInRegisters ? q_frag[0][Tr::kQInRegisters ? kk : 0] : a_tmp;
#pragma unroll
      for (int np = 0; np < WS::kNTiles / 2; ++np) {
        uint32_t bk[4];
        ldmatrix_x4(bk, sK_t + k_lane.offset(np * 2 * kMmaN, kChunksPerLdm * kk));
        mma_m16n8k16<T>(s[0][2 * np], a, bk[0], bk[1]);
        mma_m16n8k16<T>(s[0][2 * np + 1], a, bk[2], bk[3]);
      }
    }
    // ---- scale (one multiplier: scale * log2 e) and mask -------------------
#pragma unroll
    for (int nt = 0; nt < WS::kNTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[0][nt][e] *= scale_log2;
    // Masking is needed only on the ragged last tile and on tiles that reach
    // past this warp's first query row (the diagonal); warp-uniform branch.
    const bool need_mask = (key0 + Tr::kBlockN > c.S) || (kCausal && key0 + Tr::kBlockN - 1 > warp_first_q);
    if (need_mask) {
#pragma unroll
      for (int nt = 0; nt < WS::kNTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + nt * kMmaN + 2 * c.t + (e % 2);
          if (!sdpa_key_visible(q_idx[e / 2], key, c.S, kCausal)) s[0][nt][e] = -INFINITY;
        }
    }
    online_softmax<Tr>(s, row_max, row_sum, o_acc);
    warp_pv<Tr, T, D>(o_acc, s, sV_t, v_lane);
  }

  // ---- epilogue: normalise, stage through this warp's Q rows, 16 B stores ---
  // Only this warp ever read Q rows [warp_row0, warp_row0 + 16), so it may
  // overwrite them after its own last ldmatrix (a __syncwarp orders lanes).
  cp_async_wait<0>();  // no copy may still target shared memory (empty group)
  __syncwarp();
  unsigned char* smem = dynamic_smem();
  float inv_sum[kRowsPerThread];
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const float l = quad_sum(row_sum[0][r]);
    inv_sum[r] = l > 0.0f ? 1.0f / l : 0.0f;
  }
#pragma unroll
  for (int dt = 0; dt < WS::kDTiles; ++dt)
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int row = warp_row0 + c.g + r * kRowsApart;
      const uint32_t off = L::kQOffset + swizzled_offset<kRowChunks>(row, dt) + c.t * sizeof(uint32_t);
      *reinterpret_cast<uint32_t*>(smem + off) =
          pack2<T>(o_acc[0][dt][2 * r] * inv_sum[r], o_acc[0][dt][2 * r + 1] * inv_sum[r]);
    }
  __syncwarp();
  write_output_rows<Tr, T, D>(c, warp_row0, p.out_strides.seq);
}

}  // namespace

SDPA_EXPORT_CAUSAL_STAGE(S3bTraits, sdpa_s3b_kernel)
