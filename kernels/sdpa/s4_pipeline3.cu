/*
s4_pipeline3: s3b with a deeper, FlashAttention-2-ordered cp.async pipeline:
K and V stream through separate rings of PIPELINE_STAGES buffers each, and
their copies are issued at the two points in the tile where a buffer frees up.

What it is
  Same math as s3b (mma.sync m16n8k16, ldmatrix(.trans), register softmax
  with exp2f and scale*log2e folded into one multiplier, P reused from the S
  accumulators as the A operand of P.V, XOR-swizzled shared tiles, causal
  tile skipping, heavy query tiles first): the warp-level blocks of
  sdpa_mma_blocks.cuh. Only the load schedule (and WARP_M_TILES) changes.

Changes vs parent s3b_register_softmax, and why
  - s3b copies K(j+1) and V(j+1) together as one group right after the barrier
    of tile j and waits for all of it at the top of tile j+1: one group in
    flight, and V(j+1) has to land before S(j+1) can even start although S
    only needs K.
  - Here K and V are separate cp.async groups, issued in FA2 order:
        top of tile j : wait K(j) ; barrier ; issue V(j+d)   (V buffer of P.V(j-1) is free)
                        S = Q.K(j)^T, mask
        mid tile j    : wait V(j) ; barrier ; issue K(j+1+d) (K buffer of Q.K(j)^T is free)
                        softmax, O += P.V(j)
    with prefetch distance d = PIPELINE_STAGES - 1. Every issue point commits
    exactly one group (empty past the last tile), so the groups alternate
    K, V, K, V ... and between K(j) (or V(j)) and its wait there are always
    exactly 2d younger groups: both waits are cp.async.wait_group 2d.
    PIPELINE_STAGES=1 is FlashAttention-2's own single-buffer schedule (V(j)
    hides behind Q.K(j)^T, K(j+1) behind softmax + P.V(j)); 2 keeps V one and
    K ~1.5 tiles ahead (2d = 2 groups in flight); 3, this stage's default and
    its name, keeps 2d = 4 groups in flight, V two and K ~2.5 tiles ahead, for
    more latency tolerance at the cost of shared memory. The notebook compares
    depths 1, 2 and 3 with the same code.
  - New knob WARP_M_TILES: a warp may own several m16 slices of query rows.
    Every K/V fragment loaded by ldmatrix then feeds WARP_M_TILES mma's, so
    shared-memory traffic per tensor-core FLOP drops by that factor (with one
    slice per warp every 16 query rows re-read the whole K and V tile; our
    reading, not profiled, is that this LDSM traffic is what keeps the dense
    shapes behind FA2, which gives each warp 32 rows). Costs ~WARP_M_TILES x the O and
    S accumulators, so at D=128 pair it with Q_IN_REGISTERS=0 and BLOCK_N=32.
  - The causal "tile entirely above this warp's diagonal" skip (only possible
    when BLOCK_N < BLOCK_M) now predicates the math instead of `continue`, so
    every warp still reaches both barriers of every tile.

Knobs (-D; their values are stages.yaml's defines)
  PIPELINE_STAGES    buffers per K ring and per V ring (1..4); prefetch d = stages-1
  BLOCK_M            query rows per block; must equal NUM_WARPS * WARP_M_TILES * 16
  NUM_WARPS          warps per block
  WARP_M_TILES       m16 query slices per warp (2: 32 rows per warp, see above;
                     spill-free at D=128 with BLOCK_M=128 BLOCK_N=32 Q_IN_REGISTERS=0)
  BLOCK_N            keys per K/V tile (multiple of 16)
  Q_IN_REGISTERS     keep Q's A fragments in registers (0: ldmatrix per tile)

Shared memory: Q + PIPELINE_STAGES x (K + V) = (BLOCK_M + 2*STAGES*BLOCK_N)*D*2 B
  = 56 KiB at D=64, 112 KiB at D=128 (defaults); STAGES=2: 40 / 80 KiB.

Run:  stagelab run --stages s4_pipeline3      (resources only, no GPU: stagelab resources s4_pipeline3)
*/
#include <cuda_runtime.h>

#include "sdpa_api.h"
#include "sdpa_common.cuh"
#include "sdpa_export.cuh"
#include "sdpa_mma.cuh"
#include "sdpa_mma_blocks.cuh"

// The tunables: stages.yaml's compile_options.defines give their values (the registry is
// their one source); a build without them stops here.
#if !defined(PIPELINE_STAGES) || !defined(BLOCK_N) || !defined(WARP_M_TILES) || !defined(BLOCK_M) || \
    !defined(Q_IN_REGISTERS) || !defined(NUM_WARPS)
#error "s4_pipeline3: build with its registry defines (PIPELINE_STAGES, BLOCK_N, WARP_M_TILES, BLOCK_M, Q_IN_REGISTERS, NUM_WARPS)"
#endif

namespace {

using namespace sdpa_mma;

struct S4Traits
    : SdpaMmaTraits<BLOCK_M, BLOCK_N, NUM_WARPS, WARP_M_TILES, PIPELINE_STAGES, Q_IN_REGISTERS != 0> {
  static constexpr const char* kConfig =
      "s4_pipeline3 PIPELINE_STAGES=" SDPA_STR(PIPELINE_STAGES) " BLOCK_M=" SDPA_STR(BLOCK_M)
      " BLOCK_N=" SDPA_STR(BLOCK_N) " NUM_WARPS=" SDPA_STR(NUM_WARPS)
      " WARP_M_TILES=" SDPA_STR(WARP_M_TILES) " Q_IN_REGISTERS=" SDPA_STR(Q_IN_REGISTERS)
      " mma=m16n8k16";
  static constexpr int kPrefetch = kStages - 1;  // tiles a V copy runs ahead of its use
  // Groups alternate K, V, K, V; between a tile's K (or V) group and the wait
  // for it there are exactly 2 * kPrefetch younger groups.
  static constexpr int kGroupsInFlight = 2 * kPrefetch;
  static_assert(kStages >= 1 && kStages <= 4, "PIPELINE_STAGES must be 1..4");
};

template <typename T, int D, bool kCausal>
__global__ void __launch_bounds__(S4Traits::kThreads) sdpa_s4_kernel(const SdpaProblem p) {
  using Tr = S4Traits;
  using L = TileLayout<Tr, T, D>;
  constexpr int kRowChunks = L::kRowChunks;
  using WS = WarpShape<Tr, D>;
  constexpr int kWarpMTiles = Tr::kWarpMTiles;

  const BlockContext<T> c = block_context<Tr, T, D>(p, smem_addr(dynamic_smem()));
  const int kv_end = sdpa_kv_end(c.q_begin, Tr::kBlockM, c.S, kCausal);
  const int n_tiles = sdpa_ceil_div(kv_end, Tr::kBlockN);

  // Each issue point commits exactly one group, empty past the last tile.
  auto issue_k = [&](int tile) {
    if (tile < n_tiles) {
      const int key0 = tile * Tr::kBlockN;
      load_tile_async<T, Tr::kBlockN, D, Tr::kThreads>(c.sK + (tile % Tr::kStages) * L::kKVBytes, c.k_g + key0 * p.k_strides.seq,
                                               p.k_strides.seq, c.S - key0, c.tid);
    }
    cp_async_commit();
  };
  auto issue_v = [&](int tile) {
    if (tile < n_tiles) {
      const int key0 = tile * Tr::kBlockN;
      load_tile_async<T, Tr::kBlockN, D, Tr::kThreads>(c.sV + (tile % Tr::kStages) * L::kKVBytes, c.v_g + key0 * p.v_strides.seq,
                                               p.v_strides.seq, c.S - key0, c.tid);
    }
    cp_async_commit();
  };

  // Prologue: Q rides in K(0)'s group; then V(i), K(i+1) for i < d, so the
  // group order is K0 V0 K1 V1 ... V(d-1) K(d), the steady-state pattern.
  load_tile_async<T, Tr::kBlockM, D, Tr::kThreads>(c.sQ, c.q_g, p.q_strides.seq, c.S - c.q_begin, c.tid);
  issue_k(0);
#pragma unroll
  for (int i = 0; i < Tr::kPrefetch; ++i) {
    issue_v(i);
    issue_k(i + 1);
  }

  const int warp_row0 = c.warp * Tr::kWarpRows;  // first tile row owned by this warp
  // Per-lane ldmatrix address parts (see LdmLane): Q as the A operand, K as
  // an [n][k] B operand, V as a [k][n] B operand read with .trans.
  const LdmLane<kRowChunks> q_lane(warp_row0 + ldm_a_row(c.lane), ldm_a_chunk(c.lane));
  const LdmLane<kRowChunks> k_lane(ldm_bn_row(c.lane), ldm_bn_chunk(c.lane));
  const LdmLane<kRowChunks> v_lane(ldm_bt_row(c.lane), ldm_bt_chunk(c.lane));

  uint32_t q_frag[WS::kQFragMTiles][WS::kQFragSlices][4];
  if constexpr (Tr::kQInRegisters) {
    cp_async_wait<Tr::kGroupsInFlight>();  // Q and K(0) landed
    __syncthreads();
    load_q_fragments<Tr, D>(q_frag, c.sQ, q_lane);
  }

  float o_acc[kWarpMTiles][WS::kDTiles][4];
#pragma unroll
  for (int mt = 0; mt < kWarpMTiles; ++mt)
#pragma unroll
    for (int dt = 0; dt < WS::kDTiles; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o_acc[mt][dt][e] = 0.0f;
  // Running max (in scaled log2 units) and this lane's partial row sum for
  // rows g and g+8 of each m16 slice; the quad reduction of the sum is
  // deferred to the end.
  float row_max[kWarpMTiles][kRowsPerThread];
  float row_sum[kWarpMTiles][kRowsPerThread];
#pragma unroll
  for (int mt = 0; mt < kWarpMTiles; ++mt)
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      row_max[mt][r] = -INFINITY;
      row_sum[mt][r] = 0.0f;
    }
  const float scale_log2 = p.softmax_scale * kSdpaLog2e;
  const int warp_first_q = c.q_begin + warp_row0;
  const int warp_last_q = warp_first_q + Tr::kWarpRows - 1;
  // Query index of accumulator element e of m16 slice mt.
  auto q_index = [&](int mt, int e) { return warp_first_q + mt * kMmaM + c.g + (e / 2) * kRowsApart; };

  for (int n = 0; n < n_tiles; ++n) {
    const int stage = n % Tr::kStages;
    cp_async_wait<Tr::kGroupsInFlight>();  // K(n) landed for this thread ...
    __syncthreads();  // ... and for all; all warps are past P.V(n-1), so its V buffer is free
    issue_v(n + Tr::kPrefetch);  // into buffer (n-1) % kStages

    const int key0 = n * Tr::kBlockN;
    // Whole tile above this warp's diagonal (only possible when BLOCK_N <
    // BLOCK_M): skip the math but not the barriers.
    const bool warp_active = !(kCausal && key0 > warp_last_q);
    const uint32_t sK_t = c.sK + stage * L::kKVBytes;
    const uint32_t sV_t = c.sV + stage * L::kKVBytes;

    float s[kWarpMTiles][WS::kNTiles][4];
    if (warp_active) {
      // ---- S = Q.K^T: each K fragment feeds all kWarpMTiles slices ---------
#pragma unroll
      for (int mt = 0; mt < kWarpMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < WS::kNTiles; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < WS::kDSlices; ++kk) {
        uint32_t a[kWarpMTiles][4];
#pragma unroll
        for (int mt = 0; mt < kWarpMTiles; ++mt) {
          if constexpr (Tr::kQInRegisters) {
#pragma unroll
            for (int i = 0; i < 4; ++i) a[mt][i] = q_frag[Tr::kQInRegisters ? mt : 0][Tr::kQInRegisters ? kk : 0][i];
          } else {
            ldmatrix_x4(a[mt], c.sQ + q_lane.offset(mt * kMmaM, kChunksPerLdm * kk));
          }
        }
#pragma unroll
        for (int np = 0; np < WS::kNTiles / 2; ++np) {
          uint32_t bk[4];
          ldmatrix_x4(bk, sK_t + k_lane.offset(np * 2 * kMmaN, kChunksPerLdm * kk));
#pragma unroll
          for (int mt = 0; mt < kWarpMTiles; ++mt) {
            mma_m16n8k16<T>(s[mt][2 * np], a[mt], bk[0], bk[1]);
            mma_m16n8k16<T>(s[mt][2 * np + 1], a[mt], bk[2], bk[3]);
          }
        }
      }
      // ---- scale (one multiplier: scale * log2 e) and mask -----------------
#pragma unroll
      for (int mt = 0; mt < kWarpMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < WS::kNTiles; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nt][e] *= scale_log2;
      // Masking is needed only on the ragged last tile and on tiles that reach
      // past this warp's first query row (the diagonal); warp-uniform branch.
      const bool need_mask = (key0 + Tr::kBlockN > c.S) || (kCausal && key0 + Tr::kBlockN - 1 > warp_first_q);
      if (need_mask) {
#pragma unroll
        for (int mt = 0; mt < kWarpMTiles; ++mt)
#pragma unroll
          for (int nt = 0; nt < WS::kNTiles; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int key = key0 + nt * kMmaN + 2 * c.t + (e % 2);
              if (!sdpa_key_visible(q_index(mt, e), key, c.S, kCausal)) s[mt][nt][e] = -INFINITY;
            }
      }
    }

    cp_async_wait<Tr::kGroupsInFlight>();  // V(n) landed for this thread ...
    __syncthreads();  // ... and for all; all warps are past Q.K(n)^T, so its K buffer is free
    issue_k(n + 1 + Tr::kPrefetch);  // into buffer n % kStages

    if (!warp_active) continue;  // both barriers of this tile are behind us

    online_softmax<Tr>(s, row_max, row_sum, o_acc);
    warp_pv<Tr, T, D>(o_acc, s, sV_t, v_lane);
  }

  // ---- epilogue: normalise, stage through this warp's Q rows, 16 B stores ---
  // Only this warp ever read Q rows [warp_row0, warp_row0 + kWarpRows), so it
  // may overwrite them after its own last ldmatrix (a __syncwarp orders lanes).
  cp_async_wait<0>();  // only empty groups can remain; drain them anyway
  __syncwarp();
  unsigned char* smem = dynamic_smem();
#pragma unroll
  for (int mt = 0; mt < kWarpMTiles; ++mt)
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const float l = quad_sum(row_sum[mt][r]);
      const float inv_sum = l > 0.0f ? 1.0f / l : 0.0f;
      const int row = warp_row0 + mt * kMmaM + c.g + r * kRowsApart;
#pragma unroll
      for (int dt = 0; dt < WS::kDTiles; ++dt) {
        const uint32_t off = L::kQOffset + swizzled_offset<kRowChunks>(row, dt) + c.t * sizeof(uint32_t);
        *reinterpret_cast<uint32_t*>(smem + off) =
            pack2<T>(o_acc[mt][dt][2 * r] * inv_sum, o_acc[mt][dt][2 * r + 1] * inv_sum);
      }
    }
  __syncwarp();
  write_output_rows<Tr, T, D>(c, warp_row0, p.out_strides.seq);
}

}  // namespace

SDPA_EXPORT_CAUSAL_STAGE(S4Traits, sdpa_s4_kernel)
