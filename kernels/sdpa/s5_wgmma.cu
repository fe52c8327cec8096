/*
s5_wgmma: FlashAttention-style forward pass on Hopper warpgroup tensor cores
(wgmma.mma_async, sm_90a), operands in 128-byte-swizzled shared memory.

What it is
  One block = BLOCK_M = 64 * NUM_WARPGROUPS query rows of one (batch, head);
  each consumer warpgroup (4 warps, 128 threads) owns 64 query rows. Per
  BLOCK_N-key tile, per warpgroup:
    S  = Q.K^T        D/16 x wgmma m64nBLOCK_Nk16 "SS": Q (A) and K (B) both
                      K-major from SW128 shared tiles via matrix descriptors
    mask, softmax     -inf masking (ragged last key tile, causal diagonal);
                      online softmax on the wgmma accumulator layout (= the
                      mma.sync C layout per warp): row max / sum by pairwise
                      trees + quad shuffles; scale*log2(e) folded into one FFMA
                      per score (positive scales; others multiply first);
                      ex2.approx.ftz (one MUFU.EX2, no exp2f range fix-up)
    O += P.V          BLOCK_N/16 x wgmma m64nDk16 "RS": P packed to f16/bf16 in
                      registers is the A operand; V (row-major [keys][D], i.e.
                      MN-major for B) is read transposed via imm-trans-b = 1
  O (f32, registers) is normalised at the end, staged through the warpgroup's
  own Q rows in shared memory and written with 16-byte stores.

Changes vs parent s4_pipeline3, and why
  - mma.sync m16n8k16 + ldmatrix -> wgmma: a warpgroup issues one m64nN
    instruction that reads its B operand (and A, for Q.K^T) straight from
    shared memory, so the LDSM traffic and the register staging of every K/V
    fragment disappear, and one K/V tile read feeds 64 query rows (s4: 16 or
    32 per warp). Only wgmma reaches Hopper's full tensor-core rate.
  - Shared tiles use the hardware 128B swizzle (column blocks of 64 elements,
    chunk ^= row % 8 inside 1024-byte atoms) instead of s4's software XOR on
    whole rows: the wgmma descriptors understand only the hardware patterns.
    cp.async still fills them (16-byte copies, unpredicated for full tiles),
    followed by cp.async.wait_group + fence.proxy.async.shared::cta in every
    writing thread + __syncthreads before any wgmma reads them.
  - Intra-warpgroup overlap (FlashAttention-3's "intra-warpgroup pipelining"):
    in iteration n a warpgroup issues S(n) = Q.K(n)^T, rescales O by the
    correction of tile n-1, issues O += P(n-1).V(n-1), waits only for S(n)
    (wgmma.wait_group 1) and runs the softmax of tile n while the tensor cores
    still execute P(n-1).V(n-1); then it waits for that and packs P(n). One
    __syncthreads per tile (s4: two). Two ptxas pitfalls are handled in the
    code: wgmma issued under a branch ptxas cannot prove warp-uniform is
    serialized (the warpgroup index is broadcast with a shuffle and the
    first/last tiles are peeled), and the final wait_group 0 would be hoisted
    above the softmax without schedule_boundary() (sdpa_wgmma.cuh).
  - Load schedule: after iteration n's barrier publishes K(n) and V(n-1), every
    thread issues one cp.async group of K(n-1+STAGES) and V(n-2+STAGES) into the
    buffers iteration n-1 finished with (rings of STAGES buffers).
  - Occupancy over block size: at D=128 one warpgroup per block with 48-key
    tiles, three independent blocks per SM whose barriers do not couple; the
    two-warpgroup 128x128 tiling and 64-key tiles measured slower (its trials,
    the registry's search space). D=64: one warpgroup, 128-key tiles.
  - Causal: as in s4, key tiles entirely above the block's diagonal are never
    loaded; a warpgroup whose 64 rows end before a tile starts skips that
    tile's wgmma (warpgroup-uniform) but still reaches every barrier; masking
    code runs only on warps whose rows straddle the diagonal or the ragged end.

Knobs (-D; their values are stages.yaml's defines)
  NUM_WARPGROUPS_D64     consumer warpgroups per block at head_dim 64 (1 or 2)
  NUM_WARPGROUPS_D128    ... at head_dim 128 (1 or 2); BLOCK_M = 64 * this.
                         NUM_WARPGROUPS=n sets both.
  BLOCK_N_D64            keys per K/V tile at head_dim 64  (48, 64 or 128)
  BLOCK_N_D128           keys per K/V tile at head_dim 128 (48, 64 or 128)
  PIPELINE_STAGES        buffers per K ring and per V ring (>= 2)
  QK_BEFORE_PV           2 warpgroups only: a named barrier between issuing
                         S(n) and P(n-1).V(n-1), both warpgroups' S(n) first

Shared memory: (BLOCK_M + 2 * STAGES * BLOCK_N) * D * 2 bytes + 1024 (slack to
  align the tile base to 1024 bytes for the swizzle atoms).

Scope: head_dim 64 and 128, fp16 and bf16, causal or not, any seq_len >= 1
  (ragged query tiles zero-filled on load and guarded on store, ragged key
  tiles zero-filled and masked), any softmax_scale, strided Q/K/V/O (16-byte
  aligned rows). Other problems: cudaErrorInvalidValue. Needs sm_90a (wgmma).

Run: stagelab run --stage s5_wgmma; resources and SASS: stagelab resources s5_wgmma
*/
#include <cuda_runtime.h>

#include "sdpa_api.h"
#include "sdpa_common.cuh"
#include "sdpa_mma.cuh"
#include "sdpa_wgmma.cuh"

// NUM_WARPGROUPS, when given, sets both per-head-dim counts.
#ifdef NUM_WARPGROUPS
#define NUM_WARPGROUPS_D64 NUM_WARPGROUPS
#define NUM_WARPGROUPS_D128 NUM_WARPGROUPS
#endif
// The tunables: stages.yaml's compile_options.defines give their values (the registry is
// their one source); a build without them stops here.
#if !defined(NUM_WARPGROUPS_D64) || !defined(NUM_WARPGROUPS_D128) || !defined(BLOCK_N_D64) || \
    !defined(BLOCK_N_D128) || !defined(PIPELINE_STAGES) || !defined(QK_BEFORE_PV)
#error "s5_wgmma: build with its registry defines (NUM_WARPGROUPS_D64, NUM_WARPGROUPS_D128, BLOCK_N_D64, BLOCK_N_D128, PIPELINE_STAGES, QK_BEFORE_PV)"
#endif

namespace {

using sdpa_mma::pack2;
using sdpa_mma::quad_max;
using sdpa_mma::quad_sum;
using namespace sdpa_wgmma;

constexpr int kWarpSize = 32;
constexpr int kQuadSize = 4;
constexpr int kStages = PIPELINE_STAGES;
constexpr bool kQkBeforePv = QK_BEFORE_PV != 0;
constexpr int kQkIssuedBarrier = 1;  // named barrier id (0 is __syncthreads)
constexpr size_t kMaxSmemPerBlock = 227 * 1024;  // Hopper opt-in limit per block
constexpr int kRowsPerThread = 2;                // accumulator rows g and g + 8
constexpr int kRowsApart = 8;
constexpr int kN8 = 8;                           // columns per accumulator n8 tile

static_assert(kStages >= 2, "K(n) and V(n-1) are read in the same iteration: >= 2 buffers per ring");
static_assert(kWarpgroupThreads == kWarpgroupWarps * kWarpSize, "a warpgroup is 4 warps");
static_assert(kWgmmaM == kWarpgroupWarps * 16, "each warp owns 16 rows of the m64 accumulator");

template <typename T, int D>
struct Traits {
  static_assert(sizeof(T) == 2, "16-bit storage types only");
  static constexpr int kBlockN = D == 64 ? BLOCK_N_D64 : BLOCK_N_D128;
  static constexpr int kNumWarpgroups = D == 64 ? NUM_WARPGROUPS_D64 : NUM_WARPGROUPS_D128;
  static constexpr int kThreads = kNumWarpgroups * kWarpgroupThreads;
  static constexpr int kBlockM = kNumWarpgroups * kWgmmaM;  // query rows per block
  static_assert(kNumWarpgroups >= 1 && kNumWarpgroups <= 2,
                "NUM_WARPGROUPS_* must be 1 or 2 (3 breaks the even tile-copy split and the register budget)");
  static_assert(D == 64 || D == 128, "head_dim 64 or 128 (the N of the P.V wgmma)");
  static_assert(kBlockN == 48 || kBlockN == 64 || kBlockN == 128,
                "BLOCK_N is the N of the Q.K^T wgmma: 48, 64 or 128 (the wrappers sdpa_wgmma.cuh has)");
  static_assert(D % kSw128BlockElems == 0, "head_dim is whole 64-element swizzle column blocks");
  static_assert(kBlockN % kWgmmaK == 0, "P.V consumes the key tile in k16 slices");
  static_assert(kBlockN % kSw128AtomRows == 0 && kBlockM % kSw128AtomRows == 0, "tiles are whole 8-row atoms");
  static_assert(kBlockN % (2 * kN8) == 0, "two n8 accumulator tiles make one k16 A fragment of P");

  static constexpr int kDSlices = D / kWgmmaK;          // k16 slices of Q.K^T
  static constexpr int kKeySlices = kBlockN / kWgmmaK;  // k16 slices of P.V
  static constexpr int kSAcc = kBlockN / 2;             // f32 S accumulators per thread
  static constexpr int kOAcc = D / 2;                   // f32 O accumulators per thread
  static constexpr int kSTiles = kBlockN / kN8;         // n8 tiles of S
  static constexpr int kOTiles = D / kN8;               // n8 tiles of O
  static constexpr int kSlicesPerBlock = kSw128BlockElems / kWgmmaK;  // 4 k16 slices per column block

  static constexpr int kRowBytes = D * 2;
  static constexpr int kRowChunks = kRowBytes / kChunkBytes;  // 16-byte chunks per row
  static constexpr int kQBytes = kBlockM * kRowBytes;
  static constexpr int kKVBytes = kBlockN * kRowBytes;
  static constexpr int kQOffset = 0;
  static constexpr int kKOffset = kQOffset + kQBytes;
  static constexpr int kVOffset = kKOffset + kStages * kKVBytes;
  static constexpr int kTileBytes = kVOffset + kStages * kKVBytes;
  static constexpr int kSmemBytes = kTileBytes + kSw128Align;  // slack for aligning the base
  static_assert(kQBytes % kSw128Align == 0 && kKVBytes % kSw128Align == 0, "every tile starts 1024-aligned");
  static_assert(static_cast<size_t>(kSmemBytes) <= kMaxSmemPerBlock, "tiles exceed Hopper shared memory");
  // Descriptor address field: 14 bits of (addr >> 4) = 256 KB; LBO field likewise.
  static_assert(kTileBytes + kSw128Align <= (1 << 18), "shared addresses fit the descriptor field");
  static_assert(kBlockN * kSw128RowBytes < (1 << 18), "LBO of the V descriptor fits its field");

  // cp.async tile copies: thread tid always copies chunk tid % kRowChunks;
  // passes step kRowsPerPass rows, a multiple of 8 so row % 8 (the swizzle
  // key) is the same in every pass.
  static constexpr int kRowsPerPass = kThreads / kRowChunks;
  static_assert(kThreads % kRowChunks == 0, "each thread keeps one chunk column");
  static_assert(kRowsPerPass % kSw128AtomRows == 0, "passes keep row % 8");
  static_assert(kBlockM % kRowsPerPass == 0 && kBlockN % kRowsPerPass == 0, "copies split evenly");
  // Epilogue: a warp stores its own 16 rows, D/8 chunks each.
  static_assert((16 * kRowChunks) % kWarpSize == 0, "O rows of a warp split evenly over its lanes");
};

template <typename T, int D, int kRows, bool kCheckRows>
__device__ __forceinline__ void load_tile_sw128_impl(uint32_t smem_tile, const T* gmem, int64_t row_stride,
                                                     int valid_rows, int tid) {
  using Tr = Traits<T, D>;
  constexpr int kRowChunks = Tr::kRowChunks;
  constexpr int kRowsPerPass = Tr::kRowsPerPass;
  constexpr int kElems = kChunkBytes / 2;
  const int row0 = tid / kRowChunks;
  const int chunk = tid % kRowChunks;
  const uint32_t dst = smem_tile + sw128_offset<kRows>(row0, chunk);
  const int64_t pass_stride = sdpa_mma::opaque(row_stride * kRowsPerPass);
  const T* src = gmem + row0 * row_stride + chunk * kElems;
#pragma unroll
  for (int i = 0; i < kRows / kRowsPerPass; ++i) {
    const bool valid = !kCheckRows || row0 + i * kRowsPerPass < valid_rows;
    sdpa_mma::cp_async_16(dst + i * kRowsPerPass * kSw128RowBytes, valid ? src : gmem, valid);
    src += pass_stride;
  }
}

// Copies kRows x D of T (row stride in elements) into an SW128 tile with all
// kThreads threads; rows >= valid_rows are zero-filled (row 0 must be valid).
template <typename T, int D, int kRows>
__device__ __forceinline__ void load_tile_sw128(uint32_t smem_tile, const T* gmem, int64_t row_stride,
                                                int valid_rows, int tid) {
  if (valid_rows >= kRows) {  // block-uniform: whole tile in range, no per-row predicate
    load_tile_sw128_impl<T, D, kRows, false>(smem_tile, gmem, row_stride, valid_rows, tid);
  } else {
    load_tile_sw128_impl<T, D, kRows, true>(smem_tile, gmem, row_stride, valid_rows, tid);
  }
}

template <typename T, int D, bool kCausal, bool kScalePositive>
__global__ void __launch_bounds__(Traits<T, D>::kThreads, 1) sdpa_s5_kernel(const SdpaProblem p) {
  using Tr = Traits<T, D>;
  constexpr int kBlockN = Tr::kBlockN;
  constexpr int kBlockM = Tr::kBlockM;
  using WgS = Wgmma<T, kBlockN>;  // S = Q.K^T: m64 n=BLOCK_N
  using WgO = Wgmma<T, D>;        // O += P.V:  m64 n=D

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // Align the tile base to a 1024-byte swizzle atom (the launch asks for the slack).
  const uint32_t raw_base = sdpa_mma::smem_addr(smem_raw);
  const uint32_t s_base = (raw_base + (kSw128Align - 1)) & ~static_cast<uint32_t>(kSw128Align - 1);
  unsigned char* smem = smem_raw + (s_base - raw_base);
  const uint32_t sQ = s_base + Tr::kQOffset;
  const uint32_t sK = s_base + Tr::kKOffset;
  const uint32_t sV = s_base + Tr::kVOffset;

  const int tid = threadIdx.x;
  // Broadcast from lane 0 so the compiler can prove the warpgroup index (and
  // every branch derived from it) warp-uniform: wgmma under a branch it cannot
  // prove uniform gets serialized (ptxas C7520).
  const int wg = __shfl_sync(0xffffffffu, tid / kWarpgroupThreads, 0);
  const int warp_in_wg = (tid % kWarpgroupThreads) / kWarpSize;
  const int lane = tid % kWarpSize;
  const int g = lane / kQuadSize;
  const int t = lane % kQuadSize;

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

  const int n_tiles = sdpa_ceil_div(sdpa_kv_end(q_begin, kBlockM, S, kCausal), kBlockN);
  // This warpgroup's rows [wg_q0, wg_q0 + 64): the key tiles it needs (0 if
  // every row is padding past the sequence end).
  const int wg_q0 = q_begin + wg * kWgmmaM;
  const int wg_tiles = wg_q0 < S ? sdpa_ceil_div(sdpa_kv_end(wg_q0, kWgmmaM, S, kCausal), kBlockN) : 0;
  const int warp_q0 = wg_q0 + warp_in_wg * 16;  // first row of this warp

  // Group g = {K(g), V(g-1)} (nonexistent tiles skipped); always committed,
  // so the group count per issue point is fixed.
  auto issue_group = [&](int grp) {
    if (grp < n_tiles) {
      const int key0 = grp * kBlockN;
      load_tile_sw128<T, D, kBlockN>(sK + (grp % kStages) * Tr::kKVBytes, k_g + key0 * p.k_strides.seq,
                                     p.k_strides.seq, S - key0, tid);
    }
    const int vt = grp - 1;
    if (vt >= 0 && vt < n_tiles) {
      const int key0 = vt * kBlockN;
      load_tile_sw128<T, D, kBlockN>(sV + (vt % kStages) * Tr::kKVBytes, v_g + key0 * p.v_strides.seq,
                                     p.v_strides.seq, S - key0, tid);
    }
    sdpa_mma::cp_async_commit();
  };

  // Prologue: Q rides in group 0; groups 0 .. STAGES-1 in flight.
  load_tile_sw128<T, D, kBlockM>(sQ, q_g, p.q_strides.seq, S - q_begin, tid);
#pragma unroll
  for (int grp = 0; grp < kStages; ++grp) issue_group(grp);

  // Descriptors. Q: this warpgroup's 64 rows of the Q tile, K-major.
  const uint64_t desc_q = make_desc_kmajor(sQ + wg * kWgmmaM * kSw128RowBytes);
  const uint64_t desc_k0 = make_desc_kmajor(sK);
  const uint64_t desc_v0 = make_desc_mnmajor(sV, kBlockN * kSw128RowBytes);
  // Byte offset of k16 slice kk of a K-major SW128 tile of kRows rows.
  auto kslice_offset = [](int kk, int rows) {
    return static_cast<uint32_t>((kk / Tr::kSlicesPerBlock) * rows * kSw128RowBytes +
                                 (kk % Tr::kSlicesPerBlock) * kKSliceBytes);
  };

  float s_acc[Tr::kSAcc];
  float o_acc[Tr::kOAcc];
  uint32_t p_frag[Tr::kKeySlices][4];
#pragma unroll
  for (int i = 0; i < Tr::kOAcc; ++i) o_acc[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < Tr::kSAcc; ++i) s_acc[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < Tr::kKeySlices; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) p_frag[i][j] = 0u;
  float row_max[kRowsPerThread];
  float row_sum[kRowsPerThread];  // this lane's partial sums; quad-reduced at the end
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.0f;
  }
  const float scale_log2 = p.softmax_scale * kSdpaLog2e;

  // ---- the per-tile steps -------------------------------------------------
  // Block step n, in two halves (every thread, every n = 0 .. n_tiles):
  // block_sync publishes group n ({K(n), V(n-1)}); block_refill then loads
  // into the buffers iteration n-1 finished with. The warpgroups issue their
  // wgmma between the two, so the copies' issue overlaps the tensor cores.
  auto block_sync = [&](int n) {
    if (n == 0) {
      sdpa_mma::cp_async_wait<kStages - 1>();  // group 0: Q, K(0)
    } else {
      sdpa_mma::cp_async_wait<kStages - 2>();  // group n: K(n), V(n-1)
    }
    fence_proxy_async_shared();  // this thread's cp.async writes -> async proxy
    __syncthreads();             // ... for all threads; every wgmma of iteration n-1 is complete
  };
  auto block_refill = [&](int n) {
    if (n >= 1) issue_group(n - 1 + kStages);  // into K(n-1)'s and V(n-2)'s buffers
  };
  // QK_BEFORE_PV (2 warpgroups): every thread passes this named barrier once
  // per block step n >= 1, the warpgroups right after issuing S(n) and before
  // issuing P(n-1).V(n-1). The tensor cores then run S(n) of both warpgroups
  // first and both P.V last, so both softmaxes overlap P.V work (without it a
  // warpgroup can queue S and P.V back to back and the other one's S, and
  // with it its whole softmax, comes last). Measured: no gain, so off.
  auto qk_issued_barrier = [&]() {
    if constexpr (kQkBeforePv && Tr::kNumWarpgroups > 1) named_barrier_sync<kQkIssuedBarrier, Tr::kThreads>();
  };
  // Issue S(n) = Q.K(n)^T (D/16 SS wgmma, s_acc overwritten by the first).
  auto issue_qk = [&](int n) {
    const uint32_t k_tile = static_cast<uint32_t>((n % kStages) * Tr::kKVBytes);
#pragma unroll
    for (int kk = 0; kk < Tr::kDSlices; ++kk) {
      WgS::template ss<0>(s_acc, desc_advance(desc_q, kslice_offset(kk, kBlockM)),
                          desc_advance(desc_k0, k_tile + kslice_offset(kk, kBlockN)), kk > 0 ? 1 : 0);
    }
  };
  // Issue O += P.V(j) (BLOCK_N/16 RS wgmma, P from p_frag, V transposed).
  auto issue_pv = [&](int j) {
    const uint32_t v_tile = static_cast<uint32_t>((j % kStages) * Tr::kKVBytes);
#pragma unroll
    for (int kk = 0; kk < Tr::kKeySlices; ++kk) {
      WgO::template rs<1>(o_acc, p_frag[kk], desc_advance(desc_v0, v_tile + kk * kWgmmaK * kSw128RowBytes), 1);
    }
  };
  // Scale + mask S(n), update the running max / sum; S becomes exp2(S - max)
  // in place and the O rescale factor of each row is returned in `correction`.
  auto softmax = [&](int n, float (&correction)[kRowsPerThread]) {
    const int key0 = n * kBlockN;
    // With a positive scale, max(s * scale) = max(s) * scale: the max runs on
    // the raw scores and the scale folds into one FFMA per score,
    // p = ex2(s * scale_log2 - max_scaled). Otherwise scale first.
    if constexpr (!kScalePositive) {
#pragma unroll
      for (int i = 0; i < Tr::kSAcc; ++i) s_acc[i] *= scale_log2;
    }
    // Warp-uniform: only the ragged last tile and tiles reaching past this
    // warp's first row (the diagonal) need the mask.
    const bool need_mask = (key0 + kBlockN > S) || (kCausal && key0 + kBlockN - 1 > warp_q0);
    if (need_mask) {
#pragma unroll
      for (int j = 0; j < Tr::kSTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int q = warp_q0 + g + (e / 2) * kRowsApart;
          const int key = key0 + j * kN8 + 2 * t + (e % 2);
          if (!sdpa_key_visible(q, key, S, kCausal)) s_acc[4 * j + e] = -INFINITY;
        }
    }
    const float mul = kScalePositive ? scale_log2 : 1.0f;
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      // Pairwise trees: log2(BLOCK_N/4) dependent steps instead of a chain.
      float tree[2 * Tr::kSTiles];
#pragma unroll
      for (int j = 0; j < Tr::kSTiles; ++j) {
        tree[2 * j] = s_acc[4 * j + 2 * r];
        tree[2 * j + 1] = s_acc[4 * j + 2 * r + 1];
      }
#pragma unroll
      for (int w = 1; w < 2 * Tr::kSTiles; w *= 2)
#pragma unroll
        for (int i = 0; i + w < 2 * Tr::kSTiles; i += 2 * w) tree[i] = fmaxf(tree[i], tree[i + w]);
      const float mx = fmaxf(row_max[r], quad_max(tree[0]) * mul);  // scaled log2 units (-inf stays -inf)
      const float base = sdpa_softmax_base(mx);    // 0 while the row has seen only -inf
      correction[r] = ex2_approx(row_max[r] - base);  // ex2(-inf) = 0 on the first visible tile
      row_max[r] = mx;
      const float neg_base = -base;
#pragma unroll
      for (int j = 0; j < Tr::kSTiles; ++j) {
        s_acc[4 * j + 2 * r] = ex2_approx(fmaf(s_acc[4 * j + 2 * r], mul, neg_base));
        s_acc[4 * j + 2 * r + 1] = ex2_approx(fmaf(s_acc[4 * j + 2 * r + 1], mul, neg_base));
        tree[2 * j] = s_acc[4 * j + 2 * r];
        tree[2 * j + 1] = s_acc[4 * j + 2 * r + 1];
      }
#pragma unroll
      for (int w = 1; w < 2 * Tr::kSTiles; w *= 2)
#pragma unroll
        for (int i = 0; i + w < 2 * Tr::kSTiles; i += 2 * w) tree[i] += tree[i + w];
      row_sum[r] = row_sum[r] * correction[r] + tree[0];
    }
  };
  // O *= correction (per row), before the P.V that adds the tile the
  // correction was computed with (FlashAttention-3's order: the rescale runs
  // while S(n) is on the tensor cores).
  auto rescale_o = [&](const float (&correction)[kRowsPerThread]) {
#pragma unroll
    for (int j = 0; j < Tr::kOTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o_acc[4 * j + e] *= correction[e / 2];
  };
  // Pack P = exp2(S - max) into the register A operand of P.V: k16 slice kk
  // is n8 tiles 2kk and 2kk+1 of S.
  auto pack_p = [&](uint32_t (&dst)[Tr::kKeySlices][4]) {
#pragma unroll
    for (int kk = 0; kk < Tr::kKeySlices; ++kk) {
      dst[kk][0] = pack2<T>(s_acc[8 * kk + 0], s_acc[8 * kk + 1]);
      dst[kk][1] = pack2<T>(s_acc[8 * kk + 2], s_acc[8 * kk + 3]);
      dst[kk][2] = pack2<T>(s_acc[8 * kk + 4], s_acc[8 * kk + 5]);
      dst[kk][3] = pack2<T>(s_acc[8 * kk + 6], s_acc[8 * kk + 7]);
    }
  };

  // ---- main loop ------------------------------------------------------------
  // Every thread runs block step n for n = 0 .. n_tiles (the loads need the
  // whole block); the warpgroup's own wgmma work is peeled so that each wgmma
  // issue / wait sequence is straight-line code (ptxas serializes wgmma whose
  // accumulators it cannot prove idle, e.g. across conditionally issued groups):
  //   n = 0                : S(0); softmax(0)
  //   n = 1 .. wg_tiles-1  : issue S(n); O *= corr(n-1); issue P(n-1).V(n-1);
  //                          wait for S(n) only, softmax(n) overlaps P.V
  //   n = wg_tiles         : O *= corr; P.V of the last tile
  //   n > wg_tiles         : barriers and loads only (other warpgroups' tiles)
  float correction[kRowsPerThread];
  int n = 0;
  block_sync(0);
  if (wg_tiles > 0) {
    fence_regs(s_acc);
    wgmma_fence();
    issue_qk(0);
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(s_acc);
    softmax(0, correction);
    pack_p(p_frag);
  }
  for (n = 1; n < wg_tiles; ++n) {
    block_sync(n);
    fence_regs(s_acc);
    fence_regs(p_frag);
    wgmma_fence();  // p_frag (packed) was written by ordinary instructions
    issue_qk(n);
    wgmma_commit();
    qk_issued_barrier();
    fence_regs(o_acc);
    rescale_o(correction);
    fence_regs(o_acc);
    wgmma_fence();  // o_acc (rescaled) was written by ordinary instructions
    issue_pv(n - 1);
    wgmma_commit();
    block_refill(n);
    wgmma_wait<1>();  // S(n) done; P(n-1).V(n-1) may still run
    fence_regs(s_acc);
    softmax(n, correction);
    // Keep the wait below the softmax: ptxas schedules within basic blocks and
    // otherwise hoists the wait to the top of the softmax's block (to interleave
    // the P packing with the exp2s), and nothing overlaps P(n-1).V(n-1).
    schedule_boundary(S < 0);
    wgmma_wait<0>();  // P(n-1).V(n-1) done: o_acc and p_frag are free
    fence_regs(o_acc);
    fence_regs(p_frag);
    pack_p(p_frag);
  }
  if (wg_tiles > 0) {
    block_sync(n);  // n == wg_tiles: publishes V(wg_tiles - 1)
    qk_issued_barrier();
    fence_regs(o_acc);
    rescale_o(correction);
    fence_regs(o_acc);
    fence_regs(p_frag);
    wgmma_fence();
    issue_pv(n - 1);
    wgmma_commit();
    block_refill(n);
    wgmma_wait<0>();
    fence_regs(o_acc);
    ++n;
  }
  for (; n <= n_tiles; ++n) {
    block_sync(n);
    if (n >= 1) qk_issued_barrier();
    block_refill(n);
  }

  // ---- epilogue: normalise, stage through this warpgroup's Q rows ----------
  // Only this warpgroup's wgmma read Q rows [64 wg, 64 wg + 64), and all of
  // them are complete (wait_group 0 above), so each warp may overwrite its own
  // 16 rows; __syncwarp orders its lanes.
  sdpa_mma::cp_async_wait<0>();  // only empty groups can remain; drain them anyway
  // Every warp is past its last wgmma_wait before any warp overwrites the Q
  // rows those warpgroup-wide wgmma read (all threads reach this point).
  __syncthreads();
  const int row_base = wg * kWgmmaM + warp_in_wg * 16;  // tile row of this warp's first row
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const float l = quad_sum(row_sum[r]);
    const float inv_sum = l > 0.0f ? 1.0f / l : 0.0f;
    const int row = row_base + g + r * kRowsApart;
#pragma unroll
    for (int j = 0; j < Tr::kOTiles; ++j) {
      const uint32_t off = Tr::kQOffset + sw128_offset<kBlockM>(row, j) + t * sizeof(uint32_t);
      *reinterpret_cast<uint32_t*>(smem + off) =
          pack2<T>(o_acc[4 * j + 2 * r] * inv_sum, o_acc[4 * j + 2 * r + 1] * inv_sum);
    }
  }
  __syncwarp();
  constexpr int kElems = kChunkBytes / 2;
#pragma unroll
  for (int i = 0; i < 16 * Tr::kRowChunks / kWarpSize; ++i) {
    const int idx = i * kWarpSize + lane;
    const int row = row_base + idx / Tr::kRowChunks;
    const int chunk = idx % Tr::kRowChunks;
    if (q_begin + row < S) {
      const uint4 v = *reinterpret_cast<const uint4*>(smem + Tr::kQOffset + sw128_offset<kBlockM>(row, chunk));
      *reinterpret_cast<uint4*>(o_g + static_cast<int64_t>(row) * p.out_strides.seq + chunk * kElems) = v;
    }
  }
}

template <typename T, int D, bool kCausal, bool kScalePositive>
cudaError_t launch(const SdpaProblem& p, cudaStream_t stream) {
  using Tr = Traits<T, D>;
  constexpr size_t smem = Tr::kSmemBytes;
  auto kernel = sdpa_s5_kernel<T, D, kCausal, kScalePositive>;
  cudaError_t err = sdpa_set_smem(kernel, smem);
  if (err != cudaSuccess) return err;
  const dim3 grid(sdpa_ceil_div(p.seq_len, Tr::kBlockM), p.heads, p.batch);
  kernel<<<grid, Tr::kThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

template <typename T, int D>
cudaError_t launch_dispatch(const SdpaProblem& p, cudaStream_t stream) {
  const bool positive = p.softmax_scale > 0.0f;
  if (p.causal) return positive ? launch<T, D, true, true>(p, stream) : launch<T, D, true, false>(p, stream);
  return positive ? launch<T, D, false, true>(p, stream) : launch<T, D, false, false>(p, stream);
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
    return launch_dispatch<T, D>(*problem, stream);
  });
}

extern "C" const char* sdpa_stage_config() {
  return "s5_wgmma NUM_WARPGROUPS_D64=" SDPA_STR(NUM_WARPGROUPS_D64) " NUM_WARPGROUPS_D128=" SDPA_STR(
      NUM_WARPGROUPS_D128) " BLOCK_M=64*NUM_WARPGROUPS BLOCK_N_D64=" SDPA_STR(BLOCK_N_D64) " BLOCK_N_D128=" SDPA_STR(
      BLOCK_N_D128) " PIPELINE_STAGES=" SDPA_STR(PIPELINE_STAGES) " QK_BEFORE_PV=" SDPA_STR(QK_BEFORE_PV)
         " mma=wgmma.m64nNk16 SS(QK^T)+RS(PV) smem=SW128";
}

extern "C" int64_t sdpa_dynamic_shared_memory_bytes(int32_t head_dim, int32_t dtype) {
  SdpaProblem shape{};
  shape.head_dim = head_dim;
  shape.dtype = dtype;
  int64_t bytes = 0;  // stays 0 for an unsupported (head_dim, dtype)
  sdpa_dispatch(shape, [&](auto tag, auto hd) {
    using T = typename decltype(tag)::type;
    constexpr int D = decltype(hd)::value;
    bytes = Traits<T, D>::kSmemBytes;
    return cudaSuccess;
  });
  return bytes;
}
