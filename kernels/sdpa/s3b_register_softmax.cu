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
  written with 16-byte stores.

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

Knobs (-D overrides)
  BLOCK_M=64         query rows per block; must equal NUM_WARPS * 16
  NUM_WARPS=4        warps per block (each owns 16 query rows)
  BLOCK_N=64         keys per K/V tile (multiple of 16)
  Q_IN_REGISTERS=1   keep Q's A fragments in registers for the whole block
                     (D/16 * 4 registers); 0 re-reads them from shared memory
                     with ldmatrix every tile (fewer registers, more LDSM)

Measured (H100 80GB HBM3, torch 2.11, median of 30, TFLOP/s; causal counts
half the FLOPs), fp16 / bf16:
                         (2,8,2048,128)          (4,16,4096,128)
                         dense      causal       dense      causal
  s3b (this)             212/207    158/165      252/250    266/287
  SDPA flash (FA2)       271/283    146/149      338/338    289/297
  Beats FA2 on causal (2,8,2048,128); 3-8% behind on causal 4096 and 22-26%
  behind on the dense shapes. Likely cause (not profiled): with one m16 slice
  per warp every 16 query rows re-read the whole K/V tile from shared memory;
  s4's WARP_M_TILES knob goes after that.

Shared memory: Q tile + 2 stages x (K + V) tiles = (BLOCK_M + 4*BLOCK_N)*D*2 B
  = 40 KB at D=64, 80 KB at D=128 (defaults).

Build / resources:
  nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -I kernels/sdpa \
       --resource-usage -c kernels/sdpa/s3b_register_softmax.cu -o /tmp/s3b.o
  Eight instances: {half, bf16} x {D=64, D=128} x {causal, not}.
  SASS check (cuobjdump --dump-sass /tmp/s3b.o | grep -c HMMA): the mma.sync
  lowers to HMMA.16816.F32(.BF16).
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
#ifndef Q_IN_REGISTERS
#define Q_IN_REGISTERS 1
#endif

namespace {

using namespace sdpa_mma;

constexpr int kBlockM = BLOCK_M;
constexpr int kBlockN = BLOCK_N;
constexpr int kNumWarps = NUM_WARPS;
constexpr int kThreads = kNumWarps * kWarpSize;
constexpr bool kQInRegisters = Q_IN_REGISTERS != 0;
constexpr int kStages = 2;  // K/V double buffer: copy tile j+1 while computing tile j
// Hopper: 227 KB of shared memory per block at most (opt-in).
constexpr size_t kMaxSmemPerBlock = 227 * 1024;
// Each C fragment holds two accumulator rows per lane: g and g + kRowsApart.
constexpr int kRowsPerThread = 2;
constexpr int kRowsApart = kMmaM / kRowsPerThread;

static_assert(kBlockM == kNumWarps * kMmaM, "each warp owns exactly one m16 slice of query rows");
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
  static_assert((kMmaM * kRowChunks) % kWarpSize == 0, "O rows of a warp split evenly over its lanes");
};

template <typename T, int D, bool kCausal>
__global__ void __launch_bounds__(kThreads) sdpa_s3b_kernel(const SdpaProblem p) {
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

  auto load_kv = [&](int tile, int stage) {
    const int key0 = tile * kBlockN;
    load_tile_async<T, kBlockN, D, kThreads>(sK + stage * L::kKVBytes, k_g + key0 * p.k_strides.seq,
                                             p.k_strides.seq, S - key0, tid);
    load_tile_async<T, kBlockN, D, kThreads>(sV + stage * L::kKVBytes, v_g + key0 * p.v_strides.seq,
                                             p.v_strides.seq, S - key0, tid);
  };

  // Prologue: Q (group 0), then K/V tile 0 (group 1).
  load_tile_async<T, kBlockM, D, kThreads>(sQ, q_g, p.q_strides.seq, S - q_begin, tid);
  cp_async_commit();
  load_kv(0, 0);
  cp_async_commit();

  const int warp_row0 = warp * kMmaM;  // first tile row owned by this warp
  // Per-lane ldmatrix address parts (see LdmLane): Q as the A operand, K as
  // an [n][k] B operand, V as a [k][n] B operand read with .trans.
  const LdmLane<kRowChunks> q_lane(warp_row0 + ldm_a_row(lane), ldm_a_chunk(lane));
  const LdmLane<kRowChunks> k_lane(ldm_bn_row(lane), ldm_bn_chunk(lane));
  const LdmLane<kRowChunks> v_lane(ldm_bt_row(lane), ldm_bt_chunk(lane));

  uint32_t q_frag[kQInRegisters ? kDSlices : 1][4];
  if constexpr (kQInRegisters) {
    cp_async_wait<1>();  // Q landed (K/V tile 0 may still be in flight)
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kDSlices; ++kk)
      ldmatrix_x4(q_frag[kk], sQ + q_lane.offset(0, kChunksPerLdm * kk));
  }

  float o_acc[kDTiles][4];
#pragma unroll
  for (int dt = 0; dt < kDTiles; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) o_acc[dt][e] = 0.0f;
  // Running max (in scaled log2 units) and this lane's partial row sum for
  // rows g and g+8; the quad reduction of the sum is deferred to the end.
  float row_max[kRowsPerThread] = {-INFINITY, -INFINITY};
  float row_sum[kRowsPerThread] = {0.0f, 0.0f};
  const float scale_log2 = p.softmax_scale * kSdpaLog2e;
  const int q_idx[kRowsPerThread] = {q_begin + warp_row0 + g, q_begin + warp_row0 + g + kRowsApart};
  const int warp_last_q = q_begin + warp_row0 + kMmaM - 1;
  const int warp_first_q = q_begin + warp_row0;

  for (int n = 0; n < n_tiles; ++n) {
    const int stage = n % kStages;
    cp_async_wait<0>();  // tile n (and Q) landed for this thread ...
    __syncthreads();     // ... and for all threads; everyone is also done with tile n-1
    if (n + 1 < n_tiles) load_kv(n + 1, (n + 1) % kStages);  // overwrite tile n-1's buffer
    cp_async_commit();

    const int key0 = n * kBlockN;
    // Whole tile above this warp's diagonal: nothing visible (only possible
    // when BLOCK_N < BLOCK_M); skip the math, the running stats are unchanged.
    if (kCausal && key0 > warp_last_q) continue;

    const uint32_t sK_t = sK + stage * L::kKVBytes;
    const uint32_t sV_t = sV + stage * L::kKVBytes;

    // ---- S = Q.K^T -------------------------------------------------------
    float s[kNTiles][4];
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kDSlices; ++kk) {
      uint32_t a_tmp[4];
      if constexpr (!kQInRegisters)
        ldmatrix_x4(a_tmp, sQ + q_lane.offset(0, kChunksPerLdm * kk));
      const uint32_t(&a)[4] = kQInRegisters ? q_frag[kQInRegisters ? kk : 0] : a_tmp;
#pragma unroll
      for (int np = 0; np < kNTiles / 2; ++np) {
        uint32_t bk[4];
        ldmatrix_x4(bk, sK_t + k_lane.offset(np * 2 * kMmaN, kChunksPerLdm * kk));
        mma_m16n8k16<T>(s[2 * np], a, bk[0], bk[1]);
        mma_m16n8k16<T>(s[2 * np + 1], a, bk[2], bk[3]);
      }
    }

    // ---- scale (one multiplier: scale * log2 e) and mask -------------------
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] *= scale_log2;
    // Masking is needed only on the ragged last tile and on tiles that reach
    // past this warp's first query row (the diagonal); warp-uniform branch.
    const bool need_mask = (key0 + kBlockN > S) || (kCausal && key0 + kBlockN - 1 > warp_first_q);
    if (need_mask) {
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + nt * kMmaN + 2 * t + (e % 2);
          if (!sdpa_key_visible(q_idx[e / 2], key, S, kCausal)) s[nt][e] = -INFINITY;
        }
    }

    // ---- online softmax in registers --------------------------------------
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      float mx = row_max[r];
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      mx = quad_max(mx);
      const float base = sdpa_softmax_base(mx);  // 0 while the row has seen only -inf
      const float correction = exp2f(row_max[r] - base);  // exp2(-inf) = 0 on the first visible tile
      row_max[r] = mx;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        s[nt][2 * r] = exp2f(s[nt][2 * r] - base);
        s[nt][2 * r + 1] = exp2f(s[nt][2 * r + 1] - base);
        sum += s[nt][2 * r] + s[nt][2 * r + 1];
      }
      row_sum[r] = row_sum[r] * correction + sum;
#pragma unroll
      for (int dt = 0; dt < kDTiles; ++dt) {
        o_acc[dt][2 * r] *= correction;
        o_acc[dt][2 * r + 1] *= correction;
      }
    }

    // ---- O += P.V (P reused from the S accumulators as the A operand) ------
#pragma unroll
    for (int kk = 0; kk < kKeySlices; ++kk) {
      const uint32_t a[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                             pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < kDTiles / 2; ++dp) {
        uint32_t bv[4];
        ldmatrix_x4_trans(bv, sV_t + v_lane.offset(kk * kMmaK, kChunksPerLdm * dp));
        mma_m16n8k16<T>(o_acc[2 * dp], a, bv[0], bv[1]);
        mma_m16n8k16<T>(o_acc[2 * dp + 1], a, bv[2], bv[3]);
      }
    }
  }

  // ---- epilogue: normalise, stage through this warp's Q rows, 16 B stores ---
  // Only this warp ever read Q rows [warp_row0, warp_row0 + 16), so it may
  // overwrite them after its own last ldmatrix (a __syncwarp orders lanes).
  cp_async_wait<0>();  // no copy may still target shared memory (empty group)
  __syncwarp();
  float inv_sum[kRowsPerThread];
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const float l = quad_sum(row_sum[r]);
    inv_sum[r] = l > 0.0f ? 1.0f / l : 0.0f;
  }
#pragma unroll
  for (int dt = 0; dt < kDTiles; ++dt)
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int row = warp_row0 + g + r * kRowsApart;
      const uint32_t off = L::kQOffset + swizzled_offset<kRowChunks>(row, dt) + t * sizeof(uint32_t);
      *reinterpret_cast<uint32_t*>(smem + off) =
          pack2<T>(o_acc[dt][2 * r] * inv_sum[r], o_acc[dt][2 * r + 1] * inv_sum[r]);
    }
  __syncwarp();
  constexpr int kElems = elems_per_chunk<T>();
#pragma unroll
  for (int i = 0; i < kMmaM * kRowChunks / kWarpSize; ++i) {
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
  auto kernel = sdpa_s3b_kernel<T, D, kCausal>;
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
  return "s3b_register_softmax BLOCK_M=" SDPA_STR(BLOCK_M) " BLOCK_N=" SDPA_STR(BLOCK_N)
         " NUM_WARPS=" SDPA_STR(NUM_WARPS) " Q_IN_REGISTERS=" SDPA_STR(Q_IN_REGISTERS)
         " STAGES=2 mma=m16n8k16";
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
