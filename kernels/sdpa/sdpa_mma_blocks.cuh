// sdpa_mma_blocks.cuh: warp-level building blocks of the register-softmax
// stages (s3b_register_softmax, s4_pipeline3), on top of the PTX wrappers and
// fragment layouts of sdpa_mma.cuh.
//
// A block owns BLOCK_M query rows of one (batch, head); each of its NUM_WARPS
// warps owns kWarpMTiles m16 slices of them (s3b: one). Per BLOCK_N-key tile
// the stage's kernel computes S = Q.K^T (mma.sync m16n8k16, K fragments by
// ldmatrix.x4), scales and masks it, then calls
//   online_softmax     row max / sum from the C fragments (quad shuffles), O rescaled
//   warp_pv            O += P.V        P packed from the S accumulators is the A operand
// and at the end normalises O into its own Q rows and calls write_output_rows.
// What stays in the stage: the load schedule (which cp.async group, which
// barrier), Q.K^T and the masking, and the O normalisation. Those were tried as
// blocks too, but nvcc optimises an always-inline helper on its own before
// inlining it, and for them that changed the generated code.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "sdpa_common.cuh"
#include "sdpa_mma.cuh"

namespace sdpa_mma {
template <class Tr, typename T, int D>
struct TileLayout;
}  // namespace sdpa_mma

// Tiling of the register-softmax stages.
template <int kBlockM_, int kBlockN_, int kNumWarps_, int kWarpMTiles_, int kStages_, bool kQInRegisters_>
struct SdpaMmaTraits {
  static constexpr int kBlockM = kBlockM_;        // query rows per block
  static constexpr int kBlockN = kBlockN_;        // key/value tile rows
  static constexpr int kNumWarps = kNumWarps_;
  static constexpr int kThreads = kNumWarps * sdpa_mma::kWarpSize;
  static constexpr int kWarpMTiles = kWarpMTiles_;                // m16 slices of query rows per warp
  static constexpr int kWarpRows = kWarpMTiles * sdpa_mma::kMmaM;  // query rows per warp
  static constexpr int kStages = kStages_;        // buffers per K (and V) tile ring
  static constexpr bool kQInRegisters = kQInRegisters_;  // Q's A fragments live in registers
  static constexpr bool kVectorIo = true;         // Q/K/V by cp.async, O by 16-byte stores

  static_assert(kWarpMTiles >= 1, "a warp owns at least one m16 slice");
  static_assert(kBlockM == kNumWarps * kWarpRows, "BLOCK_M must equal NUM_WARPS * WARP_M_TILES * 16");
  static_assert(kBlockN % (2 * sdpa_mma::kMmaN) == 0, "K is read as pairs of n8 tiles per ldmatrix.x4");
  static_assert(kBlockN % sdpa_mma::kMmaK == 0, "P.V consumes the key tile in k16 slices");

  // Dynamic shared memory: the whole TileLayout.
  template <class T, int D>
  static constexpr size_t smem_bytes() { return sdpa_mma::TileLayout<SdpaMmaTraits, T, D>::kBytes; }
};

namespace sdpa_mma {

// Each C fragment holds two accumulator rows per lane: g and g + kRowsApart.
constexpr int kRowsPerThread = 2;
constexpr int kRowsApart = kMmaM / kRowsPerThread;
static_assert(kRowsApart == kLdmRows, "C rows g and g+8 are the two 8-row halves of an m16 tile");
constexpr int kChunksPerLdm = 2;  // an x4 load spans 2 chunks (16 columns)

// The block's dynamic shared memory, one symbol for the kernel and its blocks
// (a block then addresses it as a known shared-memory object, not through a
// generic pointer parameter).
__device__ __forceinline__ unsigned char* dynamic_smem() {
  extern __shared__ __align__(1024) unsigned char sdpa_mma_dynamic_smem[];
  return sdpa_mma_dynamic_smem;
}

// Shared memory: the Q tile, then kStages K tiles, then kStages V tiles, all
// swizzled row-major [rows][D] in the input dtype.
template <class Tr, typename T, int D>
struct TileLayout {
  static_assert(D % kMmaK == 0, "head_dim is a whole number of k16 slices");
  static constexpr int kRowChunks = D / elems_per_chunk<T>();  // 16-byte chunks per row
  static constexpr int kRowBytes = D * static_cast<int>(sizeof(T));
  static constexpr int kQBytes = Tr::kBlockM * kRowBytes;
  static constexpr int kKVBytes = Tr::kBlockN * kRowBytes;
  static constexpr int kQOffset = 0;
  static constexpr int kKOffset = kQOffset + kQBytes;
  static constexpr int kVOffset = kKOffset + Tr::kStages * kKVBytes;
  static constexpr int kBytes = kVOffset + Tr::kStages * kKVBytes;
  static_assert(static_cast<size_t>(kBytes) <= kSdpaMaxSmemPerBlock, "tiles exceed the shared-memory limit");
  static_assert(kRowChunks % kSwizzleRows == 0, "swizzle needs rows of >= 128 bytes (D >= 64)");
  static_assert((Tr::kBlockM * kRowChunks) % Tr::kThreads == 0 && (Tr::kBlockN * kRowChunks) % Tr::kThreads == 0,
                "tile copies split evenly over the block");
  static_assert((Tr::kWarpRows * kRowChunks) % kWarpSize == 0, "O rows of a warp split evenly over its lanes");
};

// Where this block and this thread sit: the block's shared tiles, its query
// tile (launched in reverse: blockIdx.x == 0 is the last, for causal the
// longest, tile, so the long tiles start in the first wave), the head pointers
// (q and o already at the tile's first row) and the lane's place in the mma
// fragments.
template <typename T>
struct BlockContext {
  uint32_t sQ, sK, sV;  // shared-window addresses: Q tile, K ring, V ring
  int tid, warp, lane;
  int g;                // accumulator row within an 8-row half (lane / 4)
  int t;                // accumulator column pair (lane % 4)
  int S;                // sequence length
  int q_begin;          // first query row of the block
  const T* q_g;         // Q rows from q_begin
  const T* k_g;
  const T* v_g;
  T* o_g;               // O rows from q_begin
};

template <class Tr, typename T, int D>
__device__ __forceinline__ BlockContext<T> block_context(const SdpaProblem& p, uint32_t s_base) {
  using L = TileLayout<Tr, T, D>;
  BlockContext<T> c;
  c.sQ = s_base + L::kQOffset;
  c.sK = s_base + L::kKOffset;
  c.sV = s_base + L::kVOffset;
  c.tid = threadIdx.x;
  c.warp = c.tid / kWarpSize;
  c.lane = c.tid % kWarpSize;
  c.g = c.lane / kQuadSize;
  c.t = c.lane % kQuadSize;
  c.S = p.seq_len;
  const int m_tile = static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x);
  c.q_begin = m_tile * Tr::kBlockM;
  const int h = blockIdx.y;
  const int b = blockIdx.z;
  c.q_g = sdpa_head_ptr(static_cast<const T*>(p.q), p.q_strides, b, h) +
          static_cast<int64_t>(c.q_begin) * p.q_strides.seq;
  c.k_g = sdpa_head_ptr(static_cast<const T*>(p.k), p.k_strides, b, h);
  c.v_g = sdpa_head_ptr(static_cast<const T*>(p.v), p.v_strides, b, h);
  c.o_g = sdpa_head_ptr(static_cast<T*>(p.out), p.out_strides, b, h) +
          static_cast<int64_t>(c.q_begin) * p.out_strides.seq;
  return c;
}

// Accumulator shapes of one warp.
template <class Tr, int D>
struct WarpShape {
  static constexpr int kDSlices = D / kMmaK;              // k16 slices of Q.K^T
  static constexpr int kDTiles = D / kMmaN;               // n8 tiles of O
  static constexpr int kNTiles = Tr::kBlockN / kMmaN;     // n8 tiles of S
  static constexpr int kKeySlices = Tr::kBlockN / kMmaK;  // k16 slices of P.V
  static constexpr int kQFragMTiles = Tr::kQInRegisters ? Tr::kWarpMTiles : 1;
  static constexpr int kQFragSlices = Tr::kQInRegisters ? kDSlices : 1;
};

// K or V rows [key0, key0 + BLOCK_N) of a head slice into a swizzled tile;
// rows past S read as zeros.
template <class Tr, typename T, int D>
__device__ __forceinline__ void load_kv_tile(uint32_t smem_tile, const T* head, int64_t seq_stride, int key0,
                                             int S, int tid) {
  load_tile_async<T, Tr::kBlockN, D, Tr::kThreads>(smem_tile, head + key0 * seq_stride, seq_stride, S - key0, tid);
}


// Q's A fragments of this warp's m16 slices (when Q lives in registers).
template <class Tr, int D, int kRowChunks>
__device__ __forceinline__ void load_q_fragments(
    uint32_t (&q_frag)[WarpShape<Tr, D>::kQFragMTiles][WarpShape<Tr, D>::kQFragSlices][4], uint32_t sQ,
    const LdmLane<kRowChunks>& q_lane) {
#pragma unroll
  for (int mt = 0; mt < WarpShape<Tr, D>::kQFragMTiles; ++mt)
#pragma unroll
    for (int kk = 0; kk < WarpShape<Tr, D>::kQFragSlices; ++kk)
      ldmatrix_x4(q_frag[mt][kk], sQ + q_lane.offset(mt * kMmaM, kChunksPerLdm * kk));
}

// Online softmax in registers: per accumulator row, the new max over the tile
// (a quad reduction), P = exp2(S - max) in place in s, the running sum and
// the O accumulator rescaled by exp2(old max - new max). The quad reduction
// of the row sum is deferred to the end (store_output).
template <class Tr, int kNTiles, int kDTiles>
__device__ __forceinline__ void online_softmax(float (&s)[Tr::kWarpMTiles][kNTiles][4],
                                               float (&row_max)[Tr::kWarpMTiles][kRowsPerThread],
                                               float (&row_sum)[Tr::kWarpMTiles][kRowsPerThread],
                                               float (&o_acc)[Tr::kWarpMTiles][kDTiles][4]) {
#pragma unroll
  for (int mt = 0; mt < Tr::kWarpMTiles; ++mt)
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      float mx = row_max[mt][r];
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
      mx = quad_max(mx);
      const SdpaSoftmaxStep step = sdpa_softmax_step(row_max[mt][r], mx);
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        s[mt][nt][2 * r] = exp2f(s[mt][nt][2 * r] - step.base);
        s[mt][nt][2 * r + 1] = exp2f(s[mt][nt][2 * r + 1] - step.base);
        sum += s[mt][nt][2 * r] + s[mt][nt][2 * r + 1];
      }
      row_sum[mt][r] = row_sum[mt][r] * step.alpha + sum;
#pragma unroll
      for (int dt = 0; dt < kDTiles; ++dt) {
        o_acc[mt][dt][2 * r] *= step.alpha;
        o_acc[mt][dt][2 * r + 1] *= step.alpha;
      }
    }
}

// O += P.V: P reused from the S accumulators as the A operand (the C layout of
// two n8 tiles is the A layout of one k16 slice); each V fragment, read with
// ldmatrix.trans, feeds all kWarpMTiles slices.
template <class Tr, typename T, int D, int kRowChunks>
__device__ __forceinline__ void warp_pv(float (&o_acc)[Tr::kWarpMTiles][WarpShape<Tr, D>::kDTiles][4],
                                        const float (&s)[Tr::kWarpMTiles][WarpShape<Tr, D>::kNTiles][4],
                                        uint32_t sV_t, const LdmLane<kRowChunks>& v_lane) {
  using WS = WarpShape<Tr, D>;
#pragma unroll
  for (int kk = 0; kk < WS::kKeySlices; ++kk) {
    uint32_t a[Tr::kWarpMTiles][4];
#pragma unroll
    for (int mt = 0; mt < Tr::kWarpMTiles; ++mt) {
      a[mt][0] = pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
      a[mt][1] = pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
      a[mt][2] = pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
      a[mt][3] = pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < WS::kDTiles / 2; ++dp) {
      uint32_t bv[4];
      ldmatrix_x4_trans(bv, sV_t + v_lane.offset(kk * kMmaK, kChunksPerLdm * dp));
#pragma unroll
      for (int mt = 0; mt < Tr::kWarpMTiles; ++mt) {
        mma_m16n8k16<T>(o_acc[mt][2 * dp], a[mt], bv[0], bv[1]);
        mma_m16n8k16<T>(o_acc[mt][2 * dp + 1], a[mt], bv[2], bv[3]);
      }
    }
  }
}

// Epilogue, second half: after the caller staged this warp's normalised O rows
// (in the input dtype, swizzled) over its own Q rows and ran __syncwarp, write
// whole 16-byte chunks of the rows below S to global memory.
template <class Tr, typename T, int D>
__device__ __forceinline__ void write_output_rows(const BlockContext<T>& c, int warp_row0, int64_t out_stride) {
  using L = TileLayout<Tr, T, D>;
  constexpr int kRowChunks = L::kRowChunks;
  constexpr int kElems = elems_per_chunk<T>();
  const unsigned char* smem = dynamic_smem();
#pragma unroll
  for (int i = 0; i < Tr::kWarpRows * kRowChunks / kWarpSize; ++i) {
    const int idx = i * kWarpSize + c.lane;
    const int row = warp_row0 + idx / kRowChunks;
    const int chunk = idx % kRowChunks;
    if (c.q_begin + row < c.S) {
      const uint4 v = *reinterpret_cast<const uint4*>(smem + L::kQOffset + swizzled_offset<kRowChunks>(row, chunk));
      *reinterpret_cast<uint4*>(c.o_g + static_cast<int64_t>(row) * out_stride + chunk * kElems) = v;
    }
  }
}

}  // namespace sdpa_mma
