/*
s3a_no_sp: s2 with the probabilities P written over the fp32 score buffer in
place, so the separate P buffer is gone ("no S/P": one shared buffer for both).

Changes vs parent s2_wmma, and why
  - P (input dtype, 2 bytes) is stored into the same shared-memory rows as the
    fp32 scores S (4 bytes): row r of P starts at the byte where row r of S
    starts, with a leading dimension of 2 * (KV_TILE + 4) elements (the same
    bytes per row). This saves BLOCK_M * (KV_TILE + 8) * 2 bytes (9 KB at
    KV_TILE=64), which is what lets KV_TILE=128 fit at D=128 (220 KB < 227 KB;
    s2 needs 237 KB there). The speed gain is expected to be small: the
    number of shared-memory transactions is unchanged.
  - The aliasing hazard: P element j occupies bytes [2j, 2j+2) of the row, i.e.
    it overwrites score j/2, which in general belongs to the *other* lane of
    the row (lanes own interleaved float2 pairs). So every lane first reads
    all its scores into registers, then a barrier, then P is written. Rows
    are private to one warp (each warp owns 16 query rows), so the barrier
    that makes this safe is __syncwarp, not __syncthreads: no other warp ever
    reads or writes these bytes. The next tile's S store (wmma, after the
    block-wide barrier of the K/V pipeline) comes after this warp's P.V loads
    in program order, so the reverse hazard (S over unread P) cannot occur.
  - Everything else (wmma with K^T as a col_major matrix_b, cp.async double
    buffering, O rescaled in an fp32 shared buffer, causal warp skipping) is
    unchanged from s2.

Shared memory (bytes): Q BLOCK_M*(D+8)*2 + K,V 2*2*KV_TILE*(D+8)*2
  + S/P BLOCK_M*(KV_TILE+4)*4 + O BLOCK_M*(D+8)*4
  = 136 KB at D=128, KV_TILE=64 (s2: 145 KB), 80 KB at D=64 (s2: 89 KB).

Knobs (-D overrides): KV_TILE=64 (multiple of 16; 32, 64 and 128 fit for both
  D), WARPS=4 -> BLOCK_M=64, 128 threads.

Build / resources:
  nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -I kernels/sdpa \
       --resource-usage -c kernels/sdpa/s3a_no_sp.cu -o /tmp/s3a.o
*/
#include <cuda_runtime.h>
#include <mma.h>

#include "sdpa_api.h"
#include "sdpa_common.cuh"

#ifndef KV_TILE
#define KV_TILE 64
#endif
#ifndef WARPS
#define WARPS 4
#endif

namespace {

namespace wmma = nvcuda::wmma;

constexpr int kWmma = 16;  // the m16n16k16 shape: M = N = K = 16
constexpr int kWarps = WARPS;
constexpr int kWarpSize = 32;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kBlockM = kWarps * kWmma;  // one 16-row wmma tile per warp
constexpr int kKvTile = KV_TILE;
constexpr int kStages = 2;  // cp.async double buffering, as in s1
// Two lanes per query row in the softmax: 16 rows * 2 = 32 lanes.
constexpr int kLanesPerRow = kWarpSize / kWmma;
// Row padding: 16 bytes for 2-byte tiles (8 elements; keeps rows 16-byte
// aligned for cp.async and the ldm a multiple of 8 as wmma requires).
constexpr int kPadH = 8;
// fp32 score rows: +4 floats makes the row stride = 4 (mod 32) banks, so the
// float2 reads of the softmax (8 rows x 2 lanes per half warp) are conflict-free.
constexpr int kPadS = 4;
// fp32 O rows: +8 floats makes the stride = 8 (mod 32) banks (D is a multiple
// of 32), so the float4 accesses of the rescale (4 rows x 2 lanes per quarter
// warp) are conflict-free.
constexpr int kPadO = 8;
constexpr size_t kMaxSmemPerBlock = 227 * 1024;  // Hopper opt-in limit per block

static_assert(kWarps >= 1 && kThreads <= 1024, "1..32 warps per block");
static_assert(kKvTile % kWmma == 0, "KV_TILE must be a multiple of the 16-wide wmma tile");
static_assert(kKvTile % (2 * kLanesPerRow) == 0,
              "the softmax reads a row as float2 pairs split over kLanesPerRow lanes");
static_assert((kKvTile + kPadS) % 4 == 0 && (2 * (kKvTile + kPadS)) % 8 == 0,
              "wmma ldm: multiple of 4 for float S, 8 for the 16-bit P aliasing it");

template <int D>
struct Smem {
  static_assert(D % kWmma == 0, "D must be a multiple of 16");
  static_assert(D % 32 == 0, "kPadO bank argument assumes D is a multiple of 32");
  static constexpr int ldq = D + kPadH;         // Q, K, V row stride (elements)
  static constexpr int lds = kKvTile + kPadS;   // score row stride (floats)
  // P aliases S: same bytes per row, counted in 2-byte elements.
  static constexpr int ldp = 2 * lds;
  static constexpr int ldo = D + kPadO;         // O row stride (floats)
  static constexpr size_t q_bytes = size_t(kBlockM) * ldq * 2;
  static constexpr size_t kv_bytes = size_t(kKvTile) * ldq * 2;  // one K or V buffer
  static constexpr size_t s_bytes = size_t(kBlockM) * lds * 4;
  static constexpr size_t o_bytes = size_t(kBlockM) * ldo * 4;
  static constexpr size_t q_off = 0;
  static constexpr size_t k_off = q_off + q_bytes;                 // [stage] K buffers
  static constexpr size_t v_off = k_off + kStages * kv_bytes;      // [stage] V buffers
  static constexpr size_t s_off = v_off + kStages * kv_bytes;
  static constexpr size_t p_off = s_off;  // P lives in the score buffer
  static constexpr size_t o_off = s_off + s_bytes;
  static constexpr size_t total = o_off + o_bytes;
  // wmma pointers must be 32-byte aligned; 128 keeps every region on its own lines.
  static_assert(q_bytes % 128 == 0 && kv_bytes % 128 == 0 && s_bytes % 128 == 0 &&
                    o_bytes % 128 == 0,
                "every shared-memory region must keep 128-byte alignment");
  static constexpr bool fits = total <= kMaxSmemPerBlock;
};
static_assert(Smem<64>::fits, "s3a: shared memory exceeds 227 KB at D=64; lower KV_TILE");

// Copy `rows` rows of a [seq, D] head slice (starting at row0) into a padded
// shared tile; rows past seq_len are zero-filled (src-size 0, clamped source).
template <class T, int D, int kRows>
__device__ __forceinline__ void load_tile_async(T* dst, const T* src, int64_t seq_stride,
                                                int row0, int seq_len, int tid) {
  constexpr int kVec = kSdpaVecElems<T>;
  constexpr int kVecsPerRow = D / kVec;
  constexpr int kVecs = kRows * kVecsPerRow;
  static_assert(kVecs % kThreads == 0, "each thread copies a whole number of vectors");
#pragma unroll
  for (int i = 0; i < kVecs / kThreads; ++i) {
    const int e = tid + i * kThreads;
    const int r = e / kVecsPerRow;
    const int col = (e % kVecsPerRow) * kVec;
    const int g = row0 + r;
    const bool in = g < seq_len;
    sdpa_cp_async_16(dst + r * Smem<D>::ldq + col, src + (in ? g : 0) * seq_stride + col,
                     in ? kSdpaVecBytes : 0);
  }
}

// min-blocks 1 stated explicitly: with the bare __launch_bounds__(kThreads)
// form ptxas (CUDA 13.0) capped some instances at 128 registers and spilled.
template <class T, int D>
__global__ void __launch_bounds__(kThreads, 1) sdpa_s3a_kernel(const SdpaProblem p) {
  using Tr = SdpaTraits<T>;
  using L = Smem<D>;
  using FragA = wmma::fragment<wmma::matrix_a, kWmma, kWmma, kWmma, T, wmma::row_major>;
  using FragKt = wmma::fragment<wmma::matrix_b, kWmma, kWmma, kWmma, T, wmma::col_major>;
  using FragV = wmma::fragment<wmma::matrix_b, kWmma, kWmma, kWmma, T, wmma::row_major>;
  using FragC = wmma::fragment<wmma::accumulator, kWmma, kWmma, kWmma, float>;
  constexpr int kDTiles = D / kWmma;
  constexpr int kNTiles = kKvTile / kWmma;
  constexpr int kPairsPerLane = kKvTile / (2 * kLanesPerRow);  // float2 score pairs
  constexpr int kOVec = 4;                                      // float4 O accesses
  constexpr int kOVecsPerLane = D / (kOVec * kLanesPerRow);

  extern __shared__ SdpaVec16 smem_v16[];
  char* smem = reinterpret_cast<char*>(smem_v16);
  T* q_s = reinterpret_cast<T*>(smem + L::q_off);
  auto k_buf = [&](int st) { return reinterpret_cast<T*>(smem + L::k_off + st * L::kv_bytes); };
  auto v_buf = [&](int st) { return reinterpret_cast<T*>(smem + L::v_off + st * L::kv_bytes); };
  float* s_s = reinterpret_cast<float*>(smem + L::s_off);
  T* p_s = reinterpret_cast<T*>(smem + L::p_off);  // == s_s, reinterpreted
  float* o_s = reinterpret_cast<float*>(smem + L::o_off);

  const int tid = threadIdx.x;
  const int warp = tid / kWarpSize;
  const int lane = tid % kWarpSize;
  const int q_begin = blockIdx.x * kBlockM;
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

  const int kv_end = sdpa_kv_end(q_begin, kBlockM, seq_len, causal);
  const int n_tiles = sdpa_ceil_div(kv_end, kKvTile);

  // Group 0: Q. Group 1: K/V tile 0.
  load_tile_async<T, D, kBlockM>(q_s, q_g, p.q_strides.seq, q_begin, seq_len, tid);
  sdpa_cp_async_commit();
  load_tile_async<T, D, kKvTile>(k_buf(0), k_g, p.k_strides.seq, 0, seq_len, tid);
  load_tile_async<T, D, kKvTile>(v_buf(0), v_g, p.v_strides.seq, 0, seq_len, tid);
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
    const int kv_begin = t * kKvTile;
    if (t + 1 < n_tiles) {
      // Buffer (t+1)%2 held tile t-1, released by the trailing __syncthreads.
      load_tile_async<T, D, kKvTile>(k_buf((t + 1) % kStages), k_g, p.k_strides.seq,
                                     kv_begin + kKvTile, seq_len, tid);
      load_tile_async<T, D, kKvTile>(v_buf((t + 1) % kStages), v_g, p.v_strides.seq,
                                     kv_begin + kKvTile, seq_len, tid);
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

      // (1) S_warp[16 x KV_TILE] = Q_warp . K^T  (K row-major == K^T col-major)
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) {
        FragC acc;
        wmma::fill_fragment(acc, 0.0f);
#pragma unroll
        for (int kd = 0; kd < kDTiles; ++kd) {
          FragKt kt;
          wmma::load_matrix_sync(kt, k_s + n * kWmma * L::ldq + kd * kWmma, L::ldq);
          wmma::mma_sync(acc, q_frag[kd], kt, acc);
        }
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
#pragma unroll
      for (int off = 1; off < kLanesPerRow; off <<= 1)
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, off));
      const float m_new = fmaxf(m, tile_max);
      const float base = sdpa_softmax_base(m_new);
      const float alpha = exp2f(m - base);
      m = m_new;

      // Every lane's scores are in registers now; only after the whole warp is
      // past its reads may P overwrite them (P element j covers score j/2,
      // which is usually the other lane's). Rows are warp-private: __syncwarp.
      __syncwarp();
      T* p_row = p_warp + r_local * L::ldp;
      float tile_sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kPairsPerLane; ++i) {
        const int col = (i * kLanesPerRow + half) * 2;
        const float p0 = exp2f(s[i].x - base);
        const float p1 = exp2f(s[i].y - base);
        tile_sum += p0 + p1;
        *reinterpret_cast<typename Tr::Pair*>(p_row + col) = Tr::float2_to_pair(p0, p1);
      }
      l = l * alpha + tile_sum;

      float* o_row = o_warp + r_local * L::ldo;
#pragma unroll
      for (int i = 0; i < kOVecsPerLane; ++i) {
        float4* o4 = reinterpret_cast<float4*>(o_row + (i * kLanesPerRow + half) * kOVec);
        float4 o = *o4;
        o.x *= alpha; o.y *= alpha; o.z *= alpha; o.w *= alpha;
        *o4 = o;
      }
      __syncwarp();  // P and the rescaled O rows are visible to the whole warp

      // (3) O_warp[16 x D] += P_warp . V
      FragA p_frag[kNTiles];
#pragma unroll
      for (int kn = 0; kn < kNTiles; ++kn)
        wmma::load_matrix_sync(p_frag[kn], p_warp + kn * kWmma, L::ldp);
      // One O tile at a time (not unrolled): the P fragments stay live across
      // the loop, and unrolling over D as well pushed the KV_TILE=128, D=128
      // instance past 255 registers into spills.
#pragma unroll 1
      for (int nd = 0; nd < kDTiles; ++nd) {
        FragC acc;
        wmma::load_matrix_sync(acc, o_warp + nd * kWmma, L::ldo, wmma::mem_row_major);
#pragma unroll
        for (int kn = 0; kn < kNTiles; ++kn) {
          FragV vf;
          wmma::load_matrix_sync(vf, v_s + kn * kWmma * L::ldq + nd * kWmma, L::ldq);
          wmma::mma_sync(acc, p_frag[kn], vf, acc);
        }
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

template <class T, int D>
cudaError_t launch(const SdpaProblem& p, cudaStream_t stream) {
  if constexpr (!Smem<D>::fits) {
    return cudaErrorInvalidValue;  // this KV_TILE does not fit at this head_dim
  } else {
    constexpr size_t smem = Smem<D>::total;
    auto kernel = sdpa_s3a_kernel<T, D>;
    cudaError_t err = sdpa_set_smem(kernel, smem);
    if (err != cudaSuccess) return err;
    const dim3 grid(sdpa_ceil_div(p.seq_len, kBlockM), p.heads, p.batch);
    kernel<<<grid, kThreads, smem, stream>>>(p);
    return cudaGetLastError();
  }
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
    return launch<T, D>(*problem, stream);
  });
}

extern "C" const char* sdpa_stage_config() {
  return "s3a_no_sp BLOCK_M=16*" SDPA_STR(WARPS) " KV_TILE=" SDPA_STR(KV_TILE)
         " WARPS=" SDPA_STR(WARPS) " THREADS=32*" SDPA_STR(WARPS)
         " WMMA=16x16x16 STAGES=2 smem: Q,K,V,S(fp32)/P aliased,O(fp32)";
}

// All shared memory is dynamic; 0 for an unsupported (head_dim, dtype).
// An instance that does not fit (s2: KV_TILE=128 at D=128) reports its full
// would-be footprint, so the shared-memory gate flags it rather than hiding it.
extern "C" int64_t sdpa_dynamic_shared_memory_bytes(int32_t head_dim, int32_t dtype) {
  SdpaProblem shape{};
  shape.head_dim = head_dim;
  shape.dtype = dtype;
  int64_t bytes = 0;
  sdpa_dispatch(shape, [&](auto tag, auto hd) {
    using T = typename decltype(tag)::type;
    constexpr int D = decltype(hd)::value;
    (void)sizeof(T);
    bytes = static_cast<int64_t>(Smem<D>::total);
    return cudaSuccess;
  });
  return bytes;
}
