// sdpa_wmma_stage.cuh: the WMMA attention body of s2_wmma, shared with
// s3a_no_sp, which changes only where P lives in shared memory.
//
// The algorithm (s2_wmma.cu's opening comment says why):
//   - 16x16x16 nvcuda::wmma tiles for S = Q.K^T and O += P.V, fp32 accumulate.
//     K^T is never materialised: row-major K[j][d] (leading dimension ldq) is
//     exactly a *col_major* k x n matrix_b with k = d, n = j. Loading it as
//     row_major would silently compute Q.K instead of Q.K^T. V[j][d] is used as
//     a row_major matrix_b (k = key j, n = head dim d).
//   - Each warp owns 16 query rows (one wmma M tile); its rows of S, P and O are
//     private to it, so the softmax needs only __syncwarp, and __syncthreads is
//     left for the K/V buffers all warps share. Q stays in registers as D/16
//     matrix_a fragments for the whole K/V loop.
//   - WMMA accumulator fragments have an unspecified element layout, so the
//     online softmax runs in shared memory: (1) S fragments are stored as fp32
//     to a score buffer; (2) two lanes per row read their row's scores
//     (softmax_scale * log2(e) applied in fp32), update m and l, write
//     P = exp2(s - m) in the input dtype, and rescale the row of an fp32 O
//     buffer by exp2(m_old - m_new); (3) O fragments are loaded from that
//     buffer, accumulate P.V, and are stored back.
//   - Causal: a warp whose 16 rows all lie above a K/V tile skips it outright.
//   - K/V: cp.async double buffering as in s1; shared rows are padded by 16
//     bytes so the 16-row wmma loads spread over all banks.
//
// A stage derives its traits from SdpaWmmaTraits<NUM_WARPS, BLOCK_N, P aliases S>.
#pragma once

#include <cuda_runtime.h>
#include <mma.h>

#include "sdpa_common.cuh"
#include "sdpa_export.cuh"

// The WMMA stages' knobs (-D overrides), read by SDPA_WMMA_CONFIG and the
// stages' traits: BLOCK_N keys per K/V tile, NUM_WARPS warps of 16 query rows.
// The tunables: stages.yaml's compile_options.defines give their values (the registry is
// their one source); a build without them stops here.
#if !defined(BLOCK_N) || !defined(NUM_WARPS)
#error "s2_wmma and s3a_no_sp: build with its registry defines (BLOCK_N, NUM_WARPS)"
#endif

template <class Tr, int D>
struct SdpaWmmaSmem;

// A WMMA stage's config string: its id, the knobs, and its shared-memory regions.
#define SDPA_WMMA_CONFIG(STAGE_ID, SMEM_REGIONS)                                              \
  STAGE_ID " BLOCK_M=16*" SDPA_STR(NUM_WARPS) " BLOCK_N=" SDPA_STR(BLOCK_N) " NUM_WARPS=" \
  SDPA_STR(NUM_WARPS) " THREADS=32*" SDPA_STR(NUM_WARPS) " WMMA=16x16x16 STAGES=2 smem: " SMEM_REGIONS

// Tiling of the WMMA stages: BLOCK_M = 16 * NUM_WARPS is fixed by the
// one-wmma-row-tile-per-warp layout. kPAliasesScores: false, P has its own
// buffer (s2); true, P is written over the score rows (s3a).
template <int kNumWarps_, int kBlockN_, bool kPAliasesScores_>
struct SdpaWmmaTraits {
  static constexpr bool kPAliasesScores = kPAliasesScores_;
  static constexpr int kWmma = 16;  // the m16n16k16 shape: M = N = K = 16
  static constexpr int kNumWarps = kNumWarps_;
  static constexpr int kWarpSize = 32;
  static constexpr int kThreads = kNumWarps * kWarpSize;
  static constexpr int kBlockM = kNumWarps * kWmma;  // one 16-row wmma tile per warp
  static constexpr int kBlockN = kBlockN_;           // key/value tile rows
  static constexpr int kStages = 2;                  // cp.async double buffering, as in s1
  static constexpr bool kVectorIo = true;            // Q/K/V by cp.async, O by 16-byte stores
  // Two lanes per query row in the softmax: 16 rows * 2 = 32 lanes.
  static constexpr int kLanesPerRow = kWarpSize / kWmma;
  // Row padding: 16 bytes for 2-byte tiles (8 elements; keeps rows 16-byte
  // aligned for cp.async and the ldm a multiple of 8 as wmma requires).
  static constexpr int kPadH = 8;
  // fp32 score rows: +4 floats makes the row stride = 4 (mod 32) banks, so the
  // float2 reads of the softmax (8 rows x 2 lanes per half warp) are conflict-free.
  static constexpr int kPadS = 4;
  // fp32 O rows: +8 floats makes the stride = 8 (mod 32) banks (D is a multiple
  // of 32), so the float4 accesses of the rescale (4 rows x 2 lanes per quarter
  // warp) are conflict-free.
  static constexpr int kPadO = 8;

  static_assert(kNumWarps >= 1 && kThreads <= 1024, "1..32 warps per block");
  static_assert(kBlockN % kWmma == 0, "BLOCK_N must be a multiple of the 16-wide wmma tile");
  static_assert(kBlockN % (2 * kLanesPerRow) == 0,
                "the softmax reads a row as float2 pairs split over kLanesPerRow lanes");
  static_assert((kBlockN + kPadS) % 4 == 0, "wmma ldm of the fp32 scores: a multiple of 4");

  // Dynamic shared memory: the whole layout (also when it does not fit, so the
  // resource gate sees the would-be footprint).
  template <class T, int D>
  static constexpr size_t smem_bytes() { return SdpaWmmaSmem<SdpaWmmaTraits, D>::total; }
};

// Shared-memory layout (bytes): Q, [stage] K, [stage] V, S (fp32), P (input
// dtype; inside S when Tr::kPAliasesScores), O (fp32).
template <class Tr, int D>
struct SdpaWmmaSmem {
  static_assert(D % Tr::kWmma == 0, "D must be a multiple of 16");
  static_assert(D % 32 == 0, "kPadO bank argument assumes D is a multiple of 32");
  static constexpr int ldq = D + Tr::kPadH;          // Q, K, V row stride (elements)
  static constexpr int lds = Tr::kBlockN + Tr::kPadS;  // score row stride (floats)
  // P row stride (elements); aliasing S it keeps S's bytes per row.
  static constexpr int ldp = Tr::kPAliasesScores ? 2 * lds : Tr::kBlockN + Tr::kPadH;
  static constexpr int ldo = D + Tr::kPadO;          // O row stride (floats)
  static_assert(ldp % 8 == 0, "wmma ldm of the 16-bit P: a multiple of 8");
  static constexpr size_t q_bytes = size_t(Tr::kBlockM) * ldq * 2;
  static constexpr size_t kv_bytes = size_t(Tr::kBlockN) * ldq * 2;  // one K or V buffer
  static constexpr size_t s_bytes = size_t(Tr::kBlockM) * lds * 4;
  static constexpr size_t p_bytes = Tr::kPAliasesScores ? 0 : size_t(Tr::kBlockM) * ldp * 2;
  static constexpr size_t o_bytes = size_t(Tr::kBlockM) * ldo * 4;
  static constexpr size_t q_off = 0;
  static constexpr size_t k_off = q_off + q_bytes;                 // [stage] K buffers
  static constexpr size_t v_off = k_off + Tr::kStages * kv_bytes;  // [stage] V buffers
  static constexpr size_t s_off = v_off + Tr::kStages * kv_bytes;
  static constexpr size_t p_off = Tr::kPAliasesScores ? s_off : s_off + s_bytes;
  static constexpr size_t o_off = s_off + s_bytes + p_bytes;
  static constexpr size_t total = o_off + o_bytes;
  // wmma pointers must be 32-byte aligned; 128 keeps every region on its own lines.
  static_assert(q_bytes % 128 == 0 && kv_bytes % 128 == 0 && s_bytes % 128 == 0 &&
                    p_bytes % 128 == 0 && o_bytes % 128 == 0,
                "every shared-memory region must keep 128-byte alignment");
  static constexpr bool fits = total <= kSdpaMaxSmemPerBlock;
};


// acc += a[k] . B(k) for k < kSteps, B(k) the 16x16 matrix_b tile (FragB's layout) at b + k * b_step,
// leading dimension ld: one S tile of Q.K^T (a: Q's fragments, B(k): K^T's tiles down the head
// dimension) and one O tile of P.V (a: P's fragments, B(k): V's tiles down the keys) alike.
template <class FragB, int kSteps, class FragA, class FragC, class T>
__device__ __forceinline__ void sdpa_wmma_row_dot(FragC& acc, const FragA (&a)[kSteps], const T* b, int b_step,
                                                  unsigned ld) {
#pragma unroll
  for (int k = 0; k < kSteps; ++k) {
    FragB frag;
    nvcuda::wmma::load_matrix_sync(frag, b + k * b_step, ld);
    nvcuda::wmma::mma_sync(acc, a[k], frag, acc);
  }
}

// The whole kernel body, one function: a stage's __global__ kernel (which keeps
// its own name and launch bounds) calls it with its traits. Kept in one piece on purpose: split into helpers, nvcc
// optimises the pieces before inlining them and the generated code changes (sdpa_wmma_row_dot, the one
// helper, leaves s2's and s3a's PTX as it was).
template <class Tr, class T, int D>
__device__ __forceinline__ void sdpa_wmma_attention(const SdpaProblem& p) {
  namespace wmma = nvcuda::wmma;
  using DT = SdpaTraits<T>;
  using L = SdpaWmmaSmem<Tr, D>;
  constexpr int kWmma = Tr::kWmma;
  constexpr int kWarpSize = Tr::kWarpSize;
  constexpr int kLanesPerRow = Tr::kLanesPerRow;
  constexpr int kStages = Tr::kStages;
  using FragA = wmma::fragment<wmma::matrix_a, kWmma, kWmma, kWmma, T, wmma::row_major>;
  using FragKt = wmma::fragment<wmma::matrix_b, kWmma, kWmma, kWmma, T, wmma::col_major>;
  using FragV = wmma::fragment<wmma::matrix_b, kWmma, kWmma, kWmma, T, wmma::row_major>;
  using FragC = wmma::fragment<wmma::accumulator, kWmma, kWmma, kWmma, float>;
  constexpr int kDTiles = D / kWmma;
  constexpr int kNTiles = Tr::kBlockN / kWmma;
  constexpr int kPairsPerLane = Tr::kBlockN / (2 * kLanesPerRow);  // float2 score pairs
  constexpr int kOVec = 4;                                          // float4 O accesses
  constexpr int kOVecsPerLane = D / (kOVec * kLanesPerRow);

  extern __shared__ SdpaVec16 smem_v16[];
  char* smem = reinterpret_cast<char*>(smem_v16);
  T* q_s = reinterpret_cast<T*>(smem + L::q_off);
  auto k_buf = [&](int st) { return reinterpret_cast<T*>(smem + L::k_off + st * L::kv_bytes); };
  auto v_buf = [&](int st) { return reinterpret_cast<T*>(smem + L::v_off + st * L::kv_bytes); };
  float* s_s = reinterpret_cast<float*>(smem + L::s_off);
  T* p_s = reinterpret_cast<T*>(smem + L::p_off);  // == s_s when P aliases the scores
  float* o_s = reinterpret_cast<float*>(smem + L::o_off);

  const int tid = threadIdx.x;
  const int warp = tid / kWarpSize;
  const int lane = tid % kWarpSize;
  const int q_begin = blockIdx.x * Tr::kBlockM;
  const int warp_row0 = warp * kWmma;         // first block row owned by this warp
  const int r_local = lane / kLanesPerRow;    // softmax: this lane's row within the warp
  const int half = lane % kLanesPerRow;       // ... and which interleaved half of it
  const int my_row = warp_row0 + r_local;     // block row
  const int q_idx = q_begin + my_row;         // global query index of that row
  const int h = blockIdx.y;
  const int b = blockIdx.z;
  const int seq_len = p.seq_len;
  const bool causal = p.causal != 0;
  const float qk_scale = p.softmax_scale * kSdpaLog2e;  // base-2 softmax, fp32

  const T* q_g = sdpa_head_ptr(static_cast<const T*>(p.q), p.q_strides, b, h);
  const T* k_g = sdpa_head_ptr(static_cast<const T*>(p.k), p.k_strides, b, h);
  const T* v_g = sdpa_head_ptr(static_cast<const T*>(p.v), p.v_strides, b, h);
  T* o_g = sdpa_head_ptr(static_cast<T*>(p.out), p.out_strides, b, h);

  const int kv_end = sdpa_kv_end(q_begin, Tr::kBlockM, seq_len, causal);
  const int n_tiles = sdpa_ceil_div(kv_end, Tr::kBlockN);
  // `rows` rows of a head slice, from row0 on, into a padded shared tile.
  auto load_rows = [&](auto rows, T* dst, const T* src, int64_t seq_stride, int row0) {
    sdpa_load_rows_async<T, D, decltype(rows)::value, L::ldq, Tr::kThreads>(
        row0, seq_len, tid, SdpaRowsCopy<T>{dst, src, seq_stride});
  };
  constexpr std::integral_constant<int, Tr::kBlockM> kQRows{};
  constexpr std::integral_constant<int, Tr::kBlockN> kKvRows{};

  // Group 0: Q. Group 1: K/V tile 0.
  load_rows(kQRows, q_s, q_g, p.q_strides.seq, q_begin);
  sdpa_cp_async_commit();
  load_rows(kKvRows, k_buf(0), k_g, p.k_strides.seq, 0);
  load_rows(kKvRows, v_buf(0), v_g, p.v_strides.seq, 0);
  sdpa_cp_async_commit();

  // Zero this warp's O rows while the copies fly (rows are warp-private).
  float* o_warp = o_s + warp_row0 * L::ldo;
  for (int i = lane; i < kWmma * D / kOVec; i += kWarpSize) {
    const int r = i / (D / kOVec);
    const int c = (i % (D / kOVec)) * kOVec;
    *reinterpret_cast<float4*>(o_warp + r * L::ldo + c) = make_float4(0.f, 0.f, 0.f, 0.f);
  }

  sdpa_cp_async_wait<1>();  // Q landed (tile 0 may still be in flight)
  __syncthreads();
  FragA q_frag[kDTiles];
#pragma unroll
  for (int kd = 0; kd < kDTiles; ++kd)
    wmma::load_matrix_sync(q_frag[kd], q_s + warp_row0 * L::ldq + kd * kWmma, L::ldq);

  float m = -INFINITY;  // running row max, base-2 units; same in both lanes of the row
  float l = 0.0f;       // this lane's partial row sum (its half of the columns)
  float* s_warp = s_s + warp_row0 * L::lds;
  T* p_warp = p_s + warp_row0 * L::ldp;

  for (int t = 0; t < n_tiles; ++t) {
    const int stage = t % kStages;
    const int kv_begin = t * Tr::kBlockN;
    if (t + 1 < n_tiles) {
      // Buffer (t+1)%2 held tile t-1, released by the trailing __syncthreads.
      load_rows(kKvRows, k_buf((t + 1) % kStages), k_g, p.k_strides.seq, kv_begin + Tr::kBlockN);
      load_rows(kKvRows, v_buf((t + 1) % kStages), v_g, p.v_strides.seq, kv_begin + Tr::kBlockN);
    }
    sdpa_cp_async_commit();  // possibly empty: keeps "wait<1> => tile t landed" true
    sdpa_cp_async_wait<kStages - 1>();
    __syncthreads();

    // Causal: the warp's last row q_begin + warp_row0 + 15 sees no key of this
    // tile -> nothing to add (warp-uniform branch, no block barrier inside).
    const bool warp_active = !causal || kv_begin <= q_begin + warp_row0 + kWmma - 1;
    if (warp_active) {
      const T* k_s = k_buf(stage);
      const T* v_s = v_buf(stage);

      // (1) S_warp[16 x BLOCK_N] = Q_warp . K^T  (K row-major == K^T col-major)
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) {
        FragC acc;
        wmma::fill_fragment(acc, 0.0f);
        sdpa_wmma_row_dot<FragKt>(acc, q_frag, k_s + n * kWmma * L::ldq, kWmma, L::ldq);
        wmma::store_matrix_sync(s_warp + n * kWmma, acc, L::lds, wmma::mem_row_major);
      }
      __syncwarp();  // scores stored by the whole warp are visible to every lane

      // (2) online softmax; lane `half` owns float2 pairs 2*i + half of its row.
      const float* s_row = s_warp + r_local * L::lds;
      float2 s[kPairsPerLane];
      float tile_max = -INFINITY;
#pragma unroll
      for (int i = 0; i < kPairsPerLane; ++i) {
        const int col = (i * kLanesPerRow + half) * 2;
        const float2 raw = *reinterpret_cast<const float2*>(s_row + col);
        const int key = kv_begin + col;
        s[i].x = sdpa_key_visible(q_idx, key, seq_len, causal) ? raw.x * qk_scale : -INFINITY;
        s[i].y = sdpa_key_visible(q_idx, key + 1, seq_len, causal) ? raw.y * qk_scale : -INFINITY;
        tile_max = fmaxf(tile_max, fmaxf(s[i].x, s[i].y));
      }
      tile_max = sdpa_lanes_max<kLanesPerRow>(tile_max);
      const SdpaSoftmaxStep step = sdpa_softmax_step(m, fmaxf(m, tile_max));
      if constexpr (Tr::kPAliasesScores) {
        // Every lane's scores are in registers now; only after the whole warp is
        // past its reads may P overwrite them (P element j covers score j/2,
        // which is usually the other lane's). Rows are warp-private: __syncwarp.
        __syncwarp();
      }

      T* p_row = p_warp + r_local * L::ldp;
      float tile_sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kPairsPerLane; ++i) {
        const int col = (i * kLanesPerRow + half) * 2;
        const float p0 = exp2f(s[i].x - step.base);
        const float p1 = exp2f(s[i].y - step.base);
        tile_sum += p0 + p1;
        *reinterpret_cast<typename DT::Pair*>(p_row + col) = DT::float2_to_pair(p0, p1);
      }
      l = l * step.alpha + tile_sum;

      float* o_row = o_warp + r_local * L::ldo;
#pragma unroll
      for (int i = 0; i < kOVecsPerLane; ++i) {
        float4* o4 = reinterpret_cast<float4*>(o_row + (i * kLanesPerRow + half) * kOVec);
        float4 o = *o4;
        o.x *= step.alpha; o.y *= step.alpha; o.z *= step.alpha; o.w *= step.alpha;
        *o4 = o;
      }
      __syncwarp();  // P and the rescaled O rows are visible to the whole warp

      // (3) O_warp[16 x D] += P_warp . V
      FragA p_frag[kNTiles];
#pragma unroll
      for (int kn = 0; kn < kNTiles; ++kn)
        wmma::load_matrix_sync(p_frag[kn], p_warp + kn * kWmma, L::ldp);
      // One O tile at a time (not unrolled): the P fragments stay live across
      // the loop, and unrolling over D as well pushed the BLOCK_N=128, D=128
      // instance past 255 registers into spills.
#pragma unroll 1
      for (int nd = 0; nd < kDTiles; ++nd) {
        FragC acc;
        wmma::load_matrix_sync(acc, o_warp + nd * kWmma, L::ldo, wmma::mem_row_major);
        sdpa_wmma_row_dot<FragV>(acc, p_frag, v_s + nd * kWmma, kWmma * L::ldq, L::ldq);
        wmma::store_matrix_sync(o_warp + nd * kWmma, acc, L::ldo, wmma::mem_row_major);
      }
    }
    __syncthreads();  // all warps done with K/V buffer `stage` before it is refilled
  }
  // The final __syncthreads above also orders the last O stores before the reads below.

  // Normalise once and store. Every real query sees key 0, so l_row >= 1.
  const float l_row = l + __shfl_xor_sync(0xffffffffu, l, 1);
  if (q_idx < seq_len) {
    const float inv_l = 1.0f / l_row;
    constexpr int kVec = kSdpaVecElems<T>;
    const float* o_row = o_warp + r_local * L::ldo;
    T* out_row = o_g + q_idx * p.out_strides.seq;
#pragma unroll
    for (int i = 0; i < D / (kVec * kLanesPerRow); ++i) {
      const int col = (i * kLanesPerRow + half) * kVec;
      float vals[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) vals[e] = o_row[col + e] * inv_l;
      *reinterpret_cast<SdpaVec16*>(out_row + col) = sdpa_float_to_vec<T>(vals);
    }
  }
}

// The rest of a WMMA stage file after its traits: the kernel KERNEL<T, D>
// (launch bounds from TRAITS, min-blocks 1 stated explicitly: with the bare
// __launch_bounds__(kThreads) form ptxas (CUDA 13.0) capped some instances at
// 128 registers and spilled) running sdpa_wmma_attention, a check that D=64
// fits, and the exports. Use it at file scope, after the traits.
#define SDPA_WMMA_STAGE(TRAITS, KERNEL)                                                      \
  namespace {                                                                                \
  static_assert(SdpaWmmaSmem<TRAITS, 64>::fits, "shared memory over the limit at D=64; lower BLOCK_N"); \
  template <class T, int D>                                                                  \
  __global__ void __launch_bounds__(TRAITS::kThreads, 1) KERNEL(const SdpaProblem p) {       \
    sdpa_wmma_attention<TRAITS, T, D>(p);                                                    \
  }                                                                                          \
  }                                                                                          \
  SDPA_EXPORT_STAGE(TRAITS, KERNEL)
