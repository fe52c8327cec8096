/*
s4_pipeline3: s3b with a deeper, FlashAttention-2-ordered cp.async pipeline:
K and V stream through separate rings of PIPELINE_STAGES buffers each, and
their copies are issued at the two points in the tile where a buffer frees up.

What it is
  Same math as s3b (mma.sync m16n8k16, ldmatrix(.trans), register softmax
  with exp2f and scale*log2e folded into one multiplier, P reused from the S
  accumulators as the A operand of P.V, XOR-swizzled shared tiles, causal
  tile skipping, heavy query tiles first). Only the load schedule changes.

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
    K ~1.5 tiles ahead (2d = 2 groups in flight); 3 keeps 2d = 4 groups in
    flight, V two and K ~2.5 tiles ahead, for more latency tolerance at the
    cost of shared memory.
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

Knobs (-D overrides)
  PIPELINE_STAGES=2  buffers per K ring and per V ring (1..4); prefetch d = stages-1.
                     Default 2, not 3: measured below, depth 3 was 12-13% slower
                     than depth 2 on the dense shapes and 0-8% on the causal
                     ones (more shared memory, no latency left to hide);
                     1 (FA2's exact single-buffer schedule) ~ equal to 2.
  BLOCK_M=64         query rows per block; must equal NUM_WARPS * WARP_M_TILES * 16
  NUM_WARPS=4        warps per block
  WARP_M_TILES=1     m16 query slices per warp (2: 32 rows per warp, see above;
                     spill-free at D=128 with BLOCK_M=128 BLOCK_N=32 Q_IN_REGISTERS=0)
  BLOCK_N=64         keys per K/V tile (multiple of 16)
  Q_IN_REGISTERS=1   keep Q's A fragments in registers (0: ldmatrix per tile)

Shared memory: Q + PIPELINE_STAGES x (K + V) = (BLOCK_M + 2*STAGES*BLOCK_N)*D*2 B
  = 40 KB at D=64, 80 KB at D=128 (defaults, as s3b); STAGES=3: 56 / 112 KB.
  Registers (not shared memory) cap D=128 at 2 blocks/SM for both depths.

Measured (H100 80GB HBM3, torch 2.11, median of 30, TFLOP/s; causal counts
half the FLOPs), fp16 / bf16:
                         (2,8,2048,128)          (4,16,4096,128)
                         dense      causal       dense      causal
  s3b (parent)           212/207    158/165      252/250    266/287
  s4 STAGES=3            216/223    149/141      262/266    243/242
  s4 STAGES=2 (default)  246/251    152/142      301/303    261/263
  s4 STAGES=1            248/253    159/149      296/302    268/271
  s4 STAGES=2 WARP_M_TILES=2 BLOCK_M=128 BLOCK_N=32 Q_IN_REGISTERS=0
                         257/266    129/120      313/317    256/256
  SDPA flash (FA2)       271/283    146/149      338/338    289/297
  SDPA cuDNN             459/471    245/220      636/645    536/524
  Dense shapes gain 15-20% over s3b; causal shapes, dominated by short
  diagonal-heavy tiles and two barriers per tile, stay within noise of s3b.

Build / resources:
  nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -I kernels/sdpa \
       --resource-usage -c kernels/sdpa/s4_pipeline3.cu -o /tmp/s4.o
  (add -DPIPELINE_STAGES=3 for the depth-3 variant)
*/
#include <cuda_runtime.h>

#include "sdpa_api.h"
#include "sdpa_common.cuh"
#include "sdpa_mma.cuh"

#ifndef BLOCK_M
#define BLOCK_M 64
#endif
#ifndef NUM_WARPS
#define NUM_WARPS 4
#endif
#ifndef BLOCK_N
#define BLOCK_N 64
#endif
#ifndef PIPELINE_STAGES
#define PIPELINE_STAGES 2
#endif
#ifndef Q_IN_REGISTERS
#define Q_IN_REGISTERS 1
#endif
#ifndef WARP_M_TILES
#define WARP_M_TILES 1
#endif

namespace {

using namespace sdpa_mma;

constexpr int kBlockM = BLOCK_M;
constexpr int kBlockN = BLOCK_N;
constexpr int kNumWarps = NUM_WARPS;
constexpr int kThreads = kNumWarps * kWarpSize;
constexpr bool kQInRegisters = Q_IN_REGISTERS != 0;
constexpr int kWarpMTiles = WARP_M_TILES;          // m16 slices of query rows per warp
constexpr int kWarpRows = kWarpMTiles * kMmaM;     // query rows per warp
constexpr int kStages = PIPELINE_STAGES;  // buffers per K ring and per V ring
constexpr int kPrefetch = kStages - 1;     // tiles a V copy runs ahead of its use
// Groups alternate K, V, K, V; between a tile's K (or V) group and the wait
// for it there are exactly 2 * kPrefetch younger groups.
constexpr int kGroupsInFlight = 2 * kPrefetch;
static_assert(kStages >= 1 && kStages <= 4, "PIPELINE_STAGES must be 1..4");
// Hopper: 227 KB of shared memory per block at most (opt-in).
constexpr size_t kMaxSmemPerBlock = 227 * 1024;
// Each C fragment holds two accumulator rows per lane: g and g + kRowsApart.
constexpr int kRowsPerThread = 2;
constexpr int kRowsApart = kMmaM / kRowsPerThread;

static_assert(kWarpMTiles >= 1, "a warp owns at least one m16 slice");
static_assert(kBlockM == kNumWarps * kWarpRows, "BLOCK_M must equal NUM_WARPS * WARP_M_TILES * 16");
static_assert(kBlockN % (2 * kMmaN) == 0, "K is read as pairs of n8 tiles per ldmatrix.x4");
static_assert(kBlockN % kMmaK == 0, "P.V consumes the key tile in k16 slices");
static_assert(kRowsApart == kLdmRows, "C rows g and g+8 are the two 8-row halves of an m16 tile");

template <typename T, int D>
struct Layout {
  static_assert(D % kMmaK == 0, "head_dim is a whole number of k16 slices");
  static constexpr int kRowChunks = D / elems_per_chunk<T>();  // 16-byte chunks per row
  static constexpr int kRowBytes = D * static_cast<int>(sizeof(T));
  static constexpr int kQBytes = kBlockM * kRowBytes;
  static constexpr int kKVBytes = kBlockN * kRowBytes;
  static constexpr int kQOffset = 0;
  static constexpr int kKOffset = kQOffset + kQBytes;
  static constexpr int kVOffset = kKOffset + kStages * kKVBytes;
  static constexpr int kBytes = kVOffset + kStages * kKVBytes;
  static_assert(static_cast<size_t>(kBytes) <= kMaxSmemPerBlock, "tiles exceed Hopper shared memory");
  static_assert(kRowChunks % kSwizzleRows == 0, "swizzle needs rows of >= 128 bytes (D >= 64)");
  static_assert((kBlockM * kRowChunks) % kThreads == 0 && (kBlockN * kRowChunks) % kThreads == 0,
                "tile copies split evenly over the block");
  static_assert((kWarpRows * kRowChunks) % kWarpSize == 0, "O rows of a warp split evenly over its lanes");
};

template <typename T, int D, bool kCausal>
__global__ void __launch_bounds__(kThreads) sdpa_s4_kernel(const SdpaProblem p) {
  using L = Layout<T, D>;
  constexpr int kRowChunks = L::kRowChunks;
  constexpr int kDSlices = D / kMmaK;         // k16 slices of Q.K^T
  constexpr int kDTiles = D / kMmaN;          // n8 tiles of O
  constexpr int kNTiles = kBlockN / kMmaN;    // n8 tiles of S
  constexpr int kKeySlices = kBlockN / kMmaK; // k16 slices of P.V
  constexpr int kChunksPerLdm = 2;            // an x4 load spans 2 chunks (16 columns)

  extern __shared__ __align__(1024) unsigned char smem[];
  const uint32_t s_base = smem_addr(smem);
  const uint32_t sQ = s_base + L::kQOffset;
  const uint32_t sK = s_base + L::kKOffset;
  const uint32_t sV = s_base + L::kVOffset;

  const int tid = threadIdx.x;
  const int warp = tid / kWarpSize;
  const int lane = tid % kWarpSize;
  const int g = lane / kQuadSize;  // accumulator row within an 8-row half
  const int t = lane % kQuadSize;  // accumulator column pair

  const int S = p.seq_len;
  // Reverse order: blockIdx.x == 0 is the last (for causal: longest) query tile.
  const int m_tile = static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x);
  const int q_begin = m_tile * kBlockM;
  const int h = blockIdx.y;
  const int b = blockIdx.z;
  const T* q_g = sdpa_head_ptr(static_cast<const T*>(p.q), p.q_strides, b, h) +
                 static_cast<int64_t>(q_begin) * p.q_strides.seq;
  const T* k_g = sdpa_head_ptr(static_cast<const T*>(p.k), p.k_strides, b, h);
  const T* v_g = sdpa_head_ptr(static_cast<const T*>(p.v), p.v_strides, b, h);
  T* o_g = sdpa_head_ptr(static_cast<T*>(p.out), p.out_strides, b, h) +
           static_cast<int64_t>(q_begin) * p.out_strides.seq;

  const int kv_end = sdpa_kv_end(q_begin, kBlockM, S, kCausal);
  const int n_tiles = sdpa_ceil_div(kv_end, kBlockN);

  // Each issue point commits exactly one group, empty past the last tile.
  auto issue_k = [&](int tile) {
    if (tile < n_tiles) {
      const int key0 = tile * kBlockN;
      load_tile_async<T, kBlockN, D, kThreads>(sK + (tile % kStages) * L::kKVBytes, k_g + key0 * p.k_strides.seq,
                                               p.k_strides.seq, S - key0, tid);
    }
    cp_async_commit();
  };
  auto issue_v = [&](int tile) {
    if (tile < n_tiles) {
      const int key0 = tile * kBlockN;
      load_tile_async<T, kBlockN, D, kThreads>(sV + (tile % kStages) * L::kKVBytes, v_g + key0 * p.v_strides.seq,
                                               p.v_strides.seq, S - key0, tid);
    }
    cp_async_commit();
  };

  // Prologue: Q rides in K(0)'s group; then V(i), K(i+1) for i < d, so the
  // group order is K0 V0 K1 V1 ... V(d-1) K(d), the steady-state pattern.
  load_tile_async<T, kBlockM, D, kThreads>(sQ, q_g, p.q_strides.seq, S - q_begin, tid);
  issue_k(0);
#pragma unroll
  for (int i = 0; i < kPrefetch; ++i) {
    issue_v(i);
    issue_k(i + 1);
  }

  const int warp_row0 = warp * kWarpRows;  // first tile row owned by this warp
  // Per-lane ldmatrix address parts (see LdmLane): Q as the A operand, K as
  // an [n][k] B operand, V as a [k][n] B operand read with .trans.
  const LdmLane<kRowChunks> q_lane(warp_row0 + ldm_a_row(lane), ldm_a_chunk(lane));
  const LdmLane<kRowChunks> k_lane(ldm_bn_row(lane), ldm_bn_chunk(lane));
  const LdmLane<kRowChunks> v_lane(ldm_bt_row(lane), ldm_bt_chunk(lane));

  constexpr int kQFragMTiles = kQInRegisters ? kWarpMTiles : 1;
  constexpr int kQFragSlices = kQInRegisters ? kDSlices : 1;
  uint32_t q_frag[kQFragMTiles][kQFragSlices][4];
  if constexpr (kQInRegisters) {
    cp_async_wait<kGroupsInFlight>();  // Q and K(0) landed
    __syncthreads();
#pragma unroll
    for (int mt = 0; mt < kQFragMTiles; ++mt)
#pragma unroll
      for (int kk = 0; kk < kQFragSlices; ++kk)
        ldmatrix_x4(q_frag[mt][kk], sQ + q_lane.offset(mt * kMmaM, kChunksPerLdm * kk));
  }

  float o_acc[kWarpMTiles][kDTiles][4];
#pragma unroll
  for (int mt = 0; mt < kWarpMTiles; ++mt)
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt)
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
  const int warp_first_q = q_begin + warp_row0;
  const int warp_last_q = warp_first_q + kWarpRows - 1;
  // Query index of accumulator element e of m16 slice mt.
  auto q_index = [&](int mt, int e) { return warp_first_q + mt * kMmaM + g + (e / 2) * kRowsApart; };

  for (int n = 0; n < n_tiles; ++n) {
    const int stage = n % kStages;
    cp_async_wait<kGroupsInFlight>();  // K(n) landed for this thread ...
    __syncthreads();  // ... and for all; all warps are past P.V(n-1), so its V buffer is free
    issue_v(n + kPrefetch);  // into buffer (n-1) % kStages

    const int key0 = n * kBlockN;
    // Whole tile above this warp's diagonal (only possible when BLOCK_N <
    // BLOCK_M): skip the math but not the barriers.
    const bool warp_active = !(kCausal && key0 > warp_last_q);
    const uint32_t sK_t = sK + stage * L::kKVBytes;
    const uint32_t sV_t = sV + stage * L::kKVBytes;

    float s[kWarpMTiles][kNTiles][4];
    if (warp_active) {
      // ---- S = Q.K^T: each K fragment feeds all kWarpMTiles slices ---------
#pragma unroll
      for (int mt = 0; mt < kWarpMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kDSlices; ++kk) {
        uint32_t a[kWarpMTiles][4];
#pragma unroll
        for (int mt = 0; mt < kWarpMTiles; ++mt) {
          if constexpr (kQInRegisters) {
#pragma unroll
            for (int i = 0; i < 4; ++i) a[mt][i] = q_frag[kQInRegisters ? mt : 0][kQInRegisters ? kk : 0][i];
          } else {
            ldmatrix_x4(a[mt], sQ + q_lane.offset(mt * kMmaM, kChunksPerLdm * kk));
          }
        }
#pragma unroll
        for (int np = 0; np < kNTiles / 2; ++np) {
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
        for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nt][e] *= scale_log2;
      // Masking is needed only on the ragged last tile and on tiles that reach
      // past this warp's first query row (the diagonal); warp-uniform branch.
      const bool need_mask = (key0 + kBlockN > S) || (kCausal && key0 + kBlockN - 1 > warp_first_q);
      if (need_mask) {
#pragma unroll
        for (int mt = 0; mt < kWarpMTiles; ++mt)
#pragma unroll
          for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int key = key0 + nt * kMmaN + 2 * t + (e % 2);
              if (!sdpa_key_visible(q_index(mt, e), key, S, kCausal)) s[mt][nt][e] = -INFINITY;
            }
      }
    }

    cp_async_wait<kGroupsInFlight>();  // V(n) landed for this thread ...
    __syncthreads();  // ... and for all; all warps are past Q.K(n)^T, so its K buffer is free
    issue_k(n + 1 + kPrefetch);  // into buffer n % kStages

    if (!warp_active) continue;  // both barriers of this tile are behind us

    // ---- online softmax in registers --------------------------------------
#pragma unroll
    for (int mt = 0; mt < kWarpMTiles; ++mt)
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) {
        float mx = row_max[mt][r];
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
        mx = quad_max(mx);
        const float base = sdpa_softmax_base(mx);  // 0 while the row has seen only -inf
        const float correction = exp2f(row_max[mt][r] - base);  // exp2(-inf) = 0 on the first visible tile
        row_max[mt][r] = mx;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
          s[mt][nt][2 * r] = exp2f(s[mt][nt][2 * r] - base);
          s[mt][nt][2 * r + 1] = exp2f(s[mt][nt][2 * r + 1] - base);
          sum += s[mt][nt][2 * r] + s[mt][nt][2 * r + 1];
        }
        row_sum[mt][r] = row_sum[mt][r] * correction + sum;
#pragma unroll
        for (int dt = 0; dt < kDTiles; ++dt) {
          o_acc[mt][dt][2 * r] *= correction;
          o_acc[mt][dt][2 * r + 1] *= correction;
        }
      }

    // ---- O += P.V (P reused from the S accumulators as the A operand; each
    // V fragment feeds all kWarpMTiles slices) ------------------------------
#pragma unroll
    for (int kk = 0; kk < kKeySlices; ++kk) {
      uint32_t a[kWarpMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kWarpMTiles; ++mt) {
        a[mt][0] = pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        a[mt][1] = pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        a[mt][2] = pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        a[mt][3] = pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < kDTiles / 2; ++dp) {
        uint32_t bv[4];
        ldmatrix_x4_trans(bv, sV_t + v_lane.offset(kk * kMmaK, kChunksPerLdm * dp));
#pragma unroll
        for (int mt = 0; mt < kWarpMTiles; ++mt) {
          mma_m16n8k16<T>(o_acc[mt][2 * dp], a[mt], bv[0], bv[1]);
          mma_m16n8k16<T>(o_acc[mt][2 * dp + 1], a[mt], bv[2], bv[3]);
        }
      }
    }
  }

  // ---- epilogue: normalise, stage through this warp's Q rows, 16 B stores ---
  // Only this warp ever read Q rows [warp_row0, warp_row0 + kWarpRows), so it
  // may overwrite them after its own last ldmatrix (a __syncwarp orders lanes).
  cp_async_wait<0>();  // only empty groups can remain; drain them anyway
  __syncwarp();
#pragma unroll
  for (int mt = 0; mt < kWarpMTiles; ++mt)
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const float l = quad_sum(row_sum[mt][r]);
      const float inv_sum = l > 0.0f ? 1.0f / l : 0.0f;
      const int row = warp_row0 + mt * kMmaM + g + r * kRowsApart;
#pragma unroll
      for (int dt = 0; dt < kDTiles; ++dt) {
        const uint32_t off = L::kQOffset + swizzled_offset<kRowChunks>(row, dt) + t * sizeof(uint32_t);
        *reinterpret_cast<uint32_t*>(smem + off) =
            pack2<T>(o_acc[mt][dt][2 * r] * inv_sum, o_acc[mt][dt][2 * r + 1] * inv_sum);
      }
    }
  __syncwarp();
  constexpr int kElems = elems_per_chunk<T>();
#pragma unroll
  for (int i = 0; i < kWarpRows * kRowChunks / kWarpSize; ++i) {
    const int idx = i * kWarpSize + lane;
    const int row = warp_row0 + idx / kRowChunks;
    const int chunk = idx % kRowChunks;
    if (q_begin + row < S) {
      const uint4 v = *reinterpret_cast<const uint4*>(smem + L::kQOffset + swizzled_offset<kRowChunks>(row, chunk));
      *reinterpret_cast<uint4*>(o_g + static_cast<int64_t>(row) * p.out_strides.seq + chunk * kElems) = v;
    }
  }
}

template <typename T, int D, bool kCausal>
cudaError_t launch(const SdpaProblem& p, cudaStream_t stream) {
  constexpr size_t smem = Layout<T, D>::kBytes;
  auto kernel = sdpa_s4_kernel<T, D, kCausal>;
  cudaError_t err = sdpa_set_smem(kernel, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid(sdpa_ceil_div(p.seq_len, kBlockM), p.heads, p.batch);
  kernel<<<grid, kThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

#define SDPA_STR2(x) #x
#define SDPA_STR(x) SDPA_STR2(x)

}  // namespace

extern "C" cudaError_t sdpa_forward(const SdpaProblem* problem, cudaStream_t stream) {
  if (problem == nullptr) return cudaErrorInvalidValue;
  const cudaError_t ok = sdpa_check_problem(*problem);
  if (ok != cudaSuccess) return ok;
  if (sdpa_problem_is_empty(*problem)) return cudaSuccess;
  if (!sdpa_problem_vec16_ok(*problem)) return cudaErrorInvalidValue;
  return sdpa_dispatch(*problem, [&](auto tag, auto hd) {
    using T = typename decltype(tag)::type;
    constexpr int D = decltype(hd)::value;
    return problem->causal ? launch<T, D, true>(*problem, stream) : launch<T, D, false>(*problem, stream);
  });
}

extern "C" const char* sdpa_stage_config() {
  return "s4_pipeline3 PIPELINE_STAGES=" SDPA_STR(PIPELINE_STAGES) " BLOCK_M=" SDPA_STR(BLOCK_M) " BLOCK_N=" SDPA_STR(BLOCK_N)
         " NUM_WARPS=" SDPA_STR(NUM_WARPS) " WARP_M_TILES=" SDPA_STR(WARP_M_TILES)
         " Q_IN_REGISTERS=" SDPA_STR(Q_IN_REGISTERS)
         " mma=m16n8k16";
}

extern "C" int64_t sdpa_dynamic_shared_memory_bytes(int32_t head_dim, int32_t dtype) {
  SdpaProblem shape{};
  shape.head_dim = head_dim;
  shape.dtype = dtype;
  int64_t bytes = 0;  // stays 0 for an unsupported (head_dim, dtype)
  sdpa_dispatch(shape, [&](auto tag, auto hd) {
    using T = typename decltype(tag)::type;
    constexpr int D = decltype(hd)::value;
    bytes = Layout<T, D>::kBytes;
    return cudaSuccess;
  });
  return bytes;
}
