// sdpa_fp8.cuh -- FP8 (e4m3) warp-specialized attention: s6's structure
// (sdpa_warpspec.cuh: a producer warpgroup issuing TMA boxes on mbarrier
// rings, two consumer warpgroups of 64 query rows, S(n) and P(n-1).V(n-1)
// issued back to back) on e4m3 wgmma with fp32 accumulation.
//
//   pre-pass    transpose_v_kernel: V [B,H,S,D] -> Vt [B,H,D,S_pad] in the
//               caller's scratch, keys permuted within 32-key groups so that
//               P's A fragment is the S accumulator converted in place
//               (sdpa_wgmma_fp8.cuh), keys S..S_pad-1 zero (a NaN byte there
//               would poison P = 0 times V). fp8 wgmma reads B K-major only.
//   producer    Q once (128 x D bytes), then K(n) (kBlockN x D) and Vt(n)
//               (D x kBlockN) per key tile; rows of D bytes (K) or of one
//               Vt chunk (64 or 128 keys, fp8_vt_chunk_keys) land 64- or
//               128-byte swizzled; one TMA box per K tile and per Vt chunk.
//   consumers   WgFp8Tile: S = Q.K^T (D/32 SS wgmma k32), the fp16 stages'
//               online softmax with the scale times q_descale * k_descale,
//               P quantized to e4m3 at 2^8 (FA3's Max_offset), O += P.Vt^T
//               (kBlockN/32 RS wgmma), O * v_descale / (2^8 * row sum) stored
//               through shared memory in the output dtype.
//   kQkF16      a pre-pass (widen_qk_kernel) writes fp16 copies of Q and K
//               (exact) into the scratch; the producer loads them as s6 does
//               (SW128 column blocks of 64 elements) and S = Q.K^T runs on
//               fp16 wgmma (WgFp8Tile, issue 28); V and P.V stay e4m3.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "sdpa_api.h"
#include "sdpa_common.cuh"
#include "sdpa_tma.cuh"
#include "sdpa_warpspec.cuh"
#include "sdpa_wgmma_fp8.cuh"

namespace sdpa_fp8 {

using namespace sdpa_wgmma;
using namespace sdpa_tma;

// Programmatic dependent launch, s9's WS_PDL (s9_fp8.cu): 0 off, 1 the trigger after the prologue, 2
// before the epilogue (sdpa_warpspec::Pdl).
static_assert(WS_PDL >= 0 && WS_PDL <= 2, "WS_PDL: 0 (plain launch), 1 (early trigger) or 2 (late trigger)");
constexpr sdpa_warpspec::Pdl kPdl = static_cast<sdpa_warpspec::Pdl>(WS_PDL);
constexpr bool kPdlOn = kPdl != sdpa_warpspec::Pdl::kOff;
using sdpa_warpspec::kBarBytes;
using sdpa_warpspec::WorkTile;

constexpr int kVtKeyPad = 64;  // S_pad: keys per Vt row rounded up to the pre-pass's key chunk

struct Params {
  sdpa_warpspec::Params ws;  // problem (e4m3 q/k, output), Q/K/Vt maps, work items
  const float* q_descale;
  const float* k_descale;
  const float* v_descale;
};

// The FP8 stage's knobs on top of the warp-specialized Config (Base):
// kFoldPScale, kPolyEvery, kRescaleThreshold, kRowSumMma and kEarlyPack as in WgFp8Tile (sdpa_wgmma_fp8.cuh).
// kVtInKernel: V arrives by TMA as it is (keys x D) and the producer warpgroup's
// other three warps write Vt into shared memory (transpose_v_tile); no pre-pass.
template <class Base, bool kFoldPScale_, int kPolyEvery_, int kRescaleThreshold_ = 0, bool kRowSumMma_ = false,
          bool kVtInKernel_ = false, int kVtBatch_ = 1, bool kEarlyPack_ = false, bool kPvPromote_ = false,
          bool kQkF16_ = false>
struct Fp8Config : Base {
  static constexpr bool kQkF16 = kQkF16_;  // Q and K as fp16 copies, Q.K^T on fp16 wgmma
  static constexpr int kQkElemBytes = kQkF16_ ? 2 : 1;
  static constexpr bool kPvPromote = kPvPromote_;
  // WgFp8Tile's kPvPromote mode; PvPromoteHalves below overrides it (a member, not a template
  // argument: the default configs' types, and so their kernels' names and SASS, stay as they were)
  static constexpr int kPvPromoteMode = kPvPromote_ ? kPvPromoteTile : kPvPromoteOff;
  static constexpr bool kEarlyPack = kEarlyPack_;
  static constexpr bool kVtInKernel = kVtInKernel_;
  static constexpr int kVtBatch = kVtBatch_;  // units per transposing warp with loads in flight together
  static constexpr bool kRowSumMma = kRowSumMma_;
  static constexpr bool kFoldPScale = kFoldPScale_;
  static constexpr int kPolyEvery = kPolyEvery_;
  static constexpr int kRescaleThreshold = kRescaleThreshold_;
  static_assert(kPolyEvery_ >= 0, "0 = every exponential on MUFU, k = every k-th n8 tile on the FMA pipe");
  // The transposing warps hold a VtLane (6 registers), kVtBatch units' fragments (4 each) and
  // the ring state: at 24 registers ptxas spills 12-28 bytes (s9_fp8.cu, log v9), at 40 none.
  static constexpr int kTransposerRegs = 40;
  static_assert(!kVtInKernel_ || Base::kProducerRegs >= kTransposerRegs,
                "VT_IN_KERNEL: the producer warpgroup transposes V and needs PRODUCER_REGS >= 40");
};

// An Fp8Config whose P.V promotion goes by output column halves (kPvPromoteHalves, head_dim 128).
template <class Fp8Cfg>
struct PvPromoteHalves : Fp8Cfg {
  static constexpr int kPvPromoteMode = kPvPromoteHalves;
};

// kVtInKernel: the producer warpgroup's warp 0 issues the TMA boxes, warps 1-3 transpose V.
constexpr int kTransposeWarps = kWarpgroupWarps - 1;
constexpr int kNoSplit = 1;  // one block (or persistent block) per work item, no split-KV
// The raw V ring's barriers, after sdpa_warpspec's four rings (ring_bar's indexing).
constexpr int kFullVRaw = 4, kEmptyVRaw = 5;

// Shared memory: Q, the O staging tile (output dtype), the K and Vt rings, barriers.
// Q and K are e4m3 (D-byte rows) or, kQkF16, fp16 (D / 64 column blocks of 128-byte rows).
template <int D, class Cfg>
struct Layout {
  static constexpr uint32_t kQBytes = Cfg::kBlockM * D * Cfg::kQkElemBytes;
  static constexpr uint32_t kOBytes = Cfg::kBlockM * D * 2;  // 16-bit output
  static constexpr uint32_t kKBytes = Cfg::kBlockN * D * Cfg::kQkElemBytes;
  static constexpr uint32_t kVtLoadBytes = D * Cfg::kBlockN;  // what TMA writes per tile
  // + the ones / zero rows under each chunk (kRowSumMma), written once at the start
  static constexpr uint32_t kVtBytes = (D + (Cfg::kRowSumMma ? kSumRows : 0)) * Cfg::kBlockN;
  static constexpr int kVtChunk = fp8_vt_chunk_keys(Cfg::kBlockN);  // keys per Vt chunk (one TMA box)
  static constexpr int kVtChunks = Cfg::kBlockN / kVtChunk;
  static constexpr uint32_t kVtChunkStride = kVtBytes / kVtChunks;
  static constexpr uint32_t kVRawBytes = Cfg::kVtInKernel ? Cfg::kBlockN * D : 0;  // V as TMA lands it
  static constexpr int kQOffset = 0;
  static constexpr int kOOffset = kQOffset + kQBytes;
  static constexpr int kKOffset = kOOffset + kOBytes;
  static constexpr int kVOffset = kKOffset + Cfg::kStages * kKBytes;
  static constexpr int kVRawOffset = kVOffset + Cfg::kStages * kVtBytes;
  static constexpr int kBarOffset = kVRawOffset + Cfg::kStages * kVRawBytes;
  static constexpr int kRings = Cfg::kVtInKernel ? 6 : 4;  // + the raw V ring's full and empty barriers
  static constexpr int kBarriers = 2 + kRings * Cfg::kStages;  // full_q, empty_q, the rings
  static constexpr int kSmemBytes = kBarOffset + kBarriers * kBarBytes + kSw128Align;
  static_assert(kQBytes % kSw128Align == 0 && kKBytes % kSw128Align == 0, "every tile starts 1024-aligned");
  static_assert(!Cfg::kVtInKernel || kVtChunkStride % kSw128Align == 0,
                "the transposer's Vt chunks start 1024-aligned (swizzle_of_row)");
  // kQkF16 at head_dim 128 (KiB: Q 32, O 32, per stage K 2 x kBlockN / 8, Vt and raw V kBlockN / 8 each):
  // 192-key tiles x 2 stages need 32 + 32 + 2 * (48 + 24 + 24) = 256 > 227; 128-key x 2 need 192.
  static_assert(!Cfg::kQkF16 || static_cast<size_t>(kSmemBytes) <= kSdpaMaxSmemPerBlock,
                "QK_F16 doubles the Q and K tiles: at head_dim 128 use 128-key tiles (BLOCK_N_D128=128) x 2 stages");
  static_assert(static_cast<size_t>(kSmemBytes) <= kSdpaMaxSmemPerBlock, "tiles exceed Hopper shared memory");
};

// ---------------------------------------------------------------- pre-pass --
constexpr int kTransposeThreads = 256;
constexpr int kTransposeKeys = kVtKeyPad;  // keys per block: whole 32-key groups

// Vt[b][h][d][key0 + c] = V[b][h][key0 + fp8_key_of(c % 32) + 32 (c / 32)][d], zero past S.
template <int D>
__global__ void __launch_bounds__(kTransposeThreads) transpose_v_kernel(const uint8_t* __restrict__ v,
                                                                        SdpaTensorStrides vs,
                                                                        uint8_t* __restrict__ vt, int seq_len,
                                                                        int s_pad) {
  constexpr int kRowVecs = D / kChunkBytes;
  constexpr int kLd = D + kChunkBytes;  // padded rows: the column reads below spread over banks
  __shared__ __align__(16) uint8_t tile[kTransposeKeys * kLd];
  const int key0 = static_cast<int>(blockIdx.x) * kTransposeKeys;
  const int h = static_cast<int>(blockIdx.y), b = static_cast<int>(blockIdx.z);
  const uint8_t* v_head = sdpa_head_ptr(v, vs, b, h);
  if constexpr (kPdlOn) {  // V may be the previous kernel's output, Vt its input
    grid_dependency_wait();
    grid_launch_dependents();  // the attention kernel's prologue may start beside this pass
  }
  for (int i = static_cast<int>(threadIdx.x); i < kTransposeKeys * kRowVecs; i += kTransposeThreads) {
    const int row = i / kRowVecs, c = i % kRowVecs;
    uint4 val = make_uint4(0u, 0u, 0u, 0u);
    if (key0 + row < seq_len)
      val = *reinterpret_cast<const uint4*>(v_head + static_cast<int64_t>(key0 + row) * vs.seq + c * kChunkBytes);
    *reinterpret_cast<uint4*>(tile + row * kLd + c * kChunkBytes) = val;
  }
  __syncthreads();
  constexpr int kOutVecs = kTransposeKeys / kChunkBytes;  // 16-byte pieces per Vt row chunk
  uint8_t* vt_head = vt + (static_cast<int64_t>(b) * gridDim.y + h) * D * s_pad + key0;
  for (int i = static_cast<int>(threadIdx.x); i < D * kOutVecs; i += kTransposeThreads) {
    const int d = i / kOutVecs, piece = i % kOutVecs;
    uint32_t words[kChunkBytes / 4];
#pragma unroll
    for (int w = 0; w < kChunkBytes / 4; ++w) {
      uint32_t word = 0;
#pragma unroll
      for (int byte = 0; byte < 4; ++byte) {
        const int c = piece * kChunkBytes + 4 * w + byte;
        const int key = (c / kFp8KeyGroup) * kFp8KeyGroup + fp8_key_of(c % kFp8KeyGroup);
        word |= static_cast<uint32_t>(tile[key * kLd + d]) << (8 * byte);
      }
      words[w] = word;
    }
    *reinterpret_cast<uint4*>(vt_head + static_cast<int64_t>(d) * s_pad + piece * kChunkBytes) =
        make_uint4(words[0], words[1], words[2], words[3]);
  }
}

// kQkF16's pre-pass: Q and K (e4m3, any 16-byte-aligned strides) -> fp16 copies in the
// scratch, contiguous [B][H][S][D] each (q16 then k16), exact. blockIdx.z < B: Q of batch z;
// else K of batch z - B. Each thread widens 16 bytes (one uint4 in, two out).
constexpr int kWidenThreads = 256;
constexpr int kWidenBytes = kChunkBytes;  // e4m3 values per thread

// A template, so that only a build that launches it (kQkF16) compiles it.
template <int D>
__global__ void __launch_bounds__(kWidenThreads) widen_qk_kernel(const uint8_t* __restrict__ q,
                                                                  SdpaTensorStrides qs,
                                                                  const uint8_t* __restrict__ k,
                                                                  SdpaTensorStrides ks, __half* __restrict__ qk16,
                                                                  int seq_len) {
  static_assert(D % kWidenBytes == 0, "a thread's 16 values stay in one row");
  const int batches = static_cast<int>(gridDim.z) / 2;
  const bool is_k = static_cast<int>(blockIdx.z) >= batches;
  const int b = static_cast<int>(blockIdx.z) - (is_k ? batches : 0), h = static_cast<int>(blockIdx.y);
  const int64_t head_elems = static_cast<int64_t>(seq_len) * D;
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * kWidenThreads + threadIdx.x) * kWidenBytes;
  if constexpr (kPdlOn) {  // Q and K may be the previous kernel's output, the scratch its input
    grid_dependency_wait();
    grid_launch_dependents();
  }
  if (i >= head_elems) return;
  const int64_t row = i / D, col = i % D;
  const uint8_t* src = is_k ? sdpa_head_ptr(k, ks, b, h) + row * ks.seq : sdpa_head_ptr(q, qs, b, h) + row * qs.seq;
  const uint4 in = *reinterpret_cast<const uint4*>(src + col);
  const uint32_t words[4] = {in.x, in.y, in.z, in.w};
  uint32_t out[8];
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(words[w] & 0xffffu), __NV_E4M3);
    const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(words[w] >> 16), __NV_E4M3);
    out[2 * w] = static_cast<uint32_t>(lo.x) | (static_cast<uint32_t>(lo.y) << 16);
    out[2 * w + 1] = static_cast<uint32_t>(hi.x) | (static_cast<uint32_t>(hi.y) << 16);
  }
  const int64_t tensor = is_k ? 1 : 0;
  __half* dst = qk16 + ((tensor * batches + b) * gridDim.y + h) * head_elems + i;
  reinterpret_cast<uint4*>(dst)[0] = make_uint4(out[0], out[1], out[2], out[3]);
  reinterpret_cast<uint4*>(dst)[1] = make_uint4(out[4], out[5], out[6], out[7]);
}

// ---------------------------------------------------------------- producer --
// A Q or K tile of kRows rows into dst, its bytes announced on bar: e4m3, one box of D-byte
// rows; kQkF16, fp16, one box per 64-element column block (s6's tma_load_tile).
template <int D, class Cfg, int kRows>
__device__ __forceinline__ void load_qk_tile(uint32_t dst, const CUtensorMap* map, uint32_t bar, int row0, int h,
                                             int b) {
  if constexpr (Cfg::kQkF16) {
    sdpa_warpspec::tma_load_tile<kRows, D / kSw128BlockElems>(dst, map, bar, row0, h, b);
  } else {
    mbarrier_arrive_expect_tx(bar, kRows * D);
    tma_load_4d(dst, map, bar, 0, row0, h, b);
  }
}

template <int D, class Cfg, bool kCausal>
__device__ __forceinline__ void produce(const Params& prm, uint32_t s_base) {
  using L = Layout<D, Cfg>;
  constexpr int kStages = Cfg::kStages;
  const uint32_t bars = s_base + L::kBarOffset;
  prefetch_tensor_map(&prm.ws.q_map);
  prefetch_tensor_map(&prm.ws.k_map);
  prefetch_tensor_map(&prm.ws.v_map);
  // Q, K and V (or the pre-pass's Vt) are earlier kernels' outputs
  if constexpr (kPdlOn) grid_dependency_wait();
  int ring = 0;  // K/V tiles issued so far: the ring position carries across work items (kPersistent)
  sdpa_warpspec::WorkOrder<Cfg, kCausal>::for_each(prm.ws, 0, kNoSplit, [&](const WorkTile& wt, int local) {
    // every S of the previous item has completed (ConsumerSync::release_q)
    if (local > 0) mbarrier_wait(sdpa_warpspec::empty_q_bar(bars), (local - 1) & 1);
    load_qk_tile<D, Cfg, Cfg::kBlockM>(s_base + L::kQOffset, &prm.ws.q_map, sdpa_warpspec::full_q_bar(bars),
                                       wt.q_begin, wt.h, wt.b);
    for (int n = wt.kt_begin; n < wt.kt_end; ++n, ++ring) {
      const uint32_t freed = sdpa_warpspec::ring_parity<kStages>(ring) ^ 1;  // a fresh buffer counts as freed
      const uint32_t slot = ring % kStages;
      const uint32_t full_k = sdpa_warpspec::ring_bar<kStages>(bars, sdpa_warpspec::kFullK, ring);
      const uint32_t full_v = sdpa_warpspec::ring_bar<kStages>(bars, sdpa_warpspec::kFullV, ring);
      mbarrier_wait(sdpa_warpspec::ring_bar<kStages>(bars, sdpa_warpspec::kEmptyK, ring), freed);
      load_qk_tile<D, Cfg, Cfg::kBlockN>(s_base + L::kKOffset + slot * L::kKBytes, &prm.ws.k_map, full_k,
                                         n * Cfg::kBlockN, wt.h, wt.b);
      if constexpr (Cfg::kVtInKernel) {  // V as it is, for the transposing warps
        const uint32_t full_raw = sdpa_warpspec::ring_bar<kStages>(bars, kFullVRaw, ring);
        mbarrier_wait(sdpa_warpspec::ring_bar<kStages>(bars, kEmptyVRaw, ring), freed);
        mbarrier_arrive_expect_tx(full_raw, L::kVRawBytes);
        tma_load_4d(s_base + L::kVRawOffset + slot * L::kVRawBytes, &prm.ws.v_map, full_raw, 0, n * Cfg::kBlockN,
                    wt.h, wt.b);
        continue;
      }
      mbarrier_wait(sdpa_warpspec::ring_bar<kStages>(bars, sdpa_warpspec::kEmptyV, ring), freed);
      mbarrier_arrive_expect_tx(full_v, L::kVtLoadBytes);
#pragma unroll
      for (int c = 0; c < L::kVtChunks; ++c)
        tma_load_4d(s_base + L::kVOffset + slot * L::kVtBytes + c * L::kVtChunkStride, &prm.ws.v_map, full_v,
                    n * Cfg::kBlockN + c * L::kVtChunk, 0, wt.h, wt.b);
    }
  });
}

// kVtInKernel: warps 1-3 of the producer warpgroup. Per key tile: wait for V's
// box and for the Vt slot's release, write Vt (shared memory only, so no PDL
// wait), make it visible to wgmma's async proxy, then one arrival per warp
// fills Vt's barrier and frees V's.
template <int D, class Cfg, bool kCausal>
__device__ __forceinline__ void transpose_v(const Params& prm, uint32_t s_base, int warp, int lane) {
  using L = Layout<D, Cfg>;
  constexpr int kStages = Cfg::kStages;
  const uint32_t bars = s_base + L::kBarOffset;
  int ring = 0;
  sdpa_warpspec::WorkOrder<Cfg, kCausal>::for_each(prm.ws, 0, kNoSplit, [&](const WorkTile& wt, int) {
    for (int n = wt.kt_begin; n < wt.kt_end; ++n, ++ring) {
      const uint32_t parity = sdpa_warpspec::ring_parity<kStages>(ring);
      const uint32_t slot = ring % kStages;
      mbarrier_wait(sdpa_warpspec::ring_bar<kStages>(bars, kFullVRaw, ring), parity);
      mbarrier_wait(sdpa_warpspec::ring_bar<kStages>(bars, sdpa_warpspec::kEmptyV, ring), parity ^ 1);
      transpose_v_tile<D, Cfg::kBlockN, L::kVtChunk, kTransposeWarps, Cfg::kVtBatch>(
          s_base + L::kVRawOffset + slot * L::kVRawBytes, s_base + L::kVOffset + slot * L::kVtBytes,
          L::kVtChunkStride, warp, lane);
      fence_proxy_async_shared();  // st.matrix (generic proxy) before the wgmma reads (async proxy)
      __syncwarp();
      if (lane == 0) {
        mbarrier_arrive(sdpa_warpspec::ring_bar<kStages>(bars, sdpa_warpspec::kFullV, ring));
        mbarrier_arrive(sdpa_warpspec::ring_bar<kStages>(bars, kEmptyVRaw, ring));
      }
    }
  });
}

// ---------------------------------------------------------------- consumer --
// A consumer warpgroup's place in the block and its side of the barriers:
// the rings' full / empty barriers, the operand descriptors of a ring slot,
// the pingpong turns and Q's release.
template <int D, class Cfg>
struct ConsumerSync {
  using L = Layout<D, Cfg>;
  static constexpr int kStages = Cfg::kStages;
  static constexpr int kTurnThreads = 2 * kWarpgroupThreads;  // both consumer warpgroups meet at a turn
  static_assert(!Cfg::kPingpong || Cfg::kConsumerWGs == 2, "pingpong alternates exactly two consumer warpgroups");

  const Params& prm;
  uint32_t s_base, bars;
  unsigned char* smem;
  int cwg, warp_in_wg, lane;

  __device__ __forceinline__ ConsumerSync(const Params& prm_, uint32_t s_base_, unsigned char* smem_, int cwg_)
      : prm(prm_), s_base(s_base_), bars(s_base_ + L::kBarOffset), smem(smem_), cwg(cwg_) {
    const int ctid = static_cast<int>(threadIdx.x) - kWarpgroupThreads;
    warp_in_wg = (ctid % kWarpgroupThreads) / sdpa_warpspec::kWarpSize;
    lane = ctid % sdpa_warpspec::kWarpSize;
  }

  __device__ __forceinline__ void wait_full(int ring, int index) const {
    mbarrier_wait(sdpa_warpspec::ring_bar<kStages>(bars, ring, index), sdpa_warpspec::ring_parity<kStages>(index));
  }
  // A buffer is free once every consumer warp's wgmma reading it has completed.
  __device__ __forceinline__ void release(int ring, int index) const {
    __syncwarp();
    if (lane == 0) mbarrier_arrive(sdpa_warpspec::ring_bar<kStages>(bars, ring, index));
  }
  // Every S (Q.K^T) of this item has completed: the producer may load the next item's Q.
  __device__ __forceinline__ void release_q() const {
    if constexpr (!Cfg::kPersistent) return;  // one item per block: Q is never reloaded
    __syncwarp();
    if (lane == 0) mbarrier_arrive(sdpa_warpspec::empty_q_bar(bars));
  }
  // Q (this warpgroup's rows) and K: e4m3 rows of D bytes, or kQkF16's fp16 SW128 column blocks
  // (a warpgroup's rows start 64 rows of 128 bytes into the first block, as in s6).
  __device__ __forceinline__ uint64_t desc_q() const {
    if constexpr (Cfg::kQkF16) return make_desc_kmajor(s_base + L::kQOffset + cwg * kWgmmaM * kSw128RowBytes);
    return make_desc_kmajor8<D>(s_base + L::kQOffset + cwg * kWgmmaM * D);
  }
  __device__ __forceinline__ uint64_t desc_k(int index) const {
    if constexpr (Cfg::kQkF16) return make_desc_kmajor(s_base + L::kKOffset + (index % kStages) * L::kKBytes);
    return make_desc_kmajor8<D>(s_base + L::kKOffset + (index % kStages) * L::kKBytes);
  }
  __device__ __forceinline__ uint64_t desc_vt(int index) const {
    return make_desc_kmajor8<L::kVtChunk>(s_base + L::kVOffset + (index % kStages) * L::kVtBytes);
  }

  // Pingpong (Cfg::kPingpong, s7's scheme on sdpa_warpspec's named barriers):
  // a warpgroup issues its GEMMs of a tile only between turn_begin (bar.sync on
  // its own barrier) and turn_end (bar.arrive on the other's), then waits for
  // them and runs its softmax while the other warpgroup's GEMMs hold the tensor
  // cores. Without pingpong both are empty and the schedule is s6's.
  __device__ __forceinline__ void turn_begin() const {
    if constexpr (Cfg::kPingpong) sdpa_warpspec::bar_sync(sdpa_warpspec::kTurnBarrier0 + cwg, kTurnThreads);
  }
  __device__ __forceinline__ void turn_end() const {
    if constexpr (Cfg::kPingpong) sdpa_warpspec::bar_arrive(sdpa_warpspec::kTurnBarrier0 + (1 - cwg), kTurnThreads);
  }
  // A turn with no GEMM: a warpgroup with fewer tiles (causal) keeps the alternation.
  __device__ __forceinline__ void empty_turn() const {
    turn_begin();
    turn_end();
  }
};

// One consumer warpgroup's key loop and epilogue, per work item.
template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
struct Consumer : ConsumerSync<D, Cfg> {
  using Sync = ConsumerSync<D, Cfg>;
  using typename Sync::L;
  using Sync::prm, Sync::bars, Sync::smem, Sync::cwg, Sync::warp_in_wg, Sync::lane;
  using Sync::wait_full, Sync::release, Sync::release_q, Sync::desc_q, Sync::desc_k, Sync::desc_vt;
  using Sync::turn_begin, Sync::turn_end, Sync::empty_turn, Sync::kTurnThreads;
  using Tile = WgFp8Tile<T, D, Cfg::kBlockN, kCausal, kScalePositive, Cfg::kFoldPScale, Cfg::kPolyEvery,
                         Cfg::kRescaleThreshold, Cfg::kRowSumMma, Cfg::kEarlyPack, Cfg::kPvPromoteMode, Cfg::kQkF16>;
  static constexpr int kBlockN = Cfg::kBlockN;
  static_assert(Tile::kVtChunkBytes == L::kVtChunkStride, "the tile's descriptors step the layout's Vt chunks");
  static_assert(Tile::kVtChunk == L::kVtChunk, "the tile's and the layout's Vt chunks agree");

  Tile tile;

  __device__ __forceinline__ Consumer(const Params& prm_, uint32_t s_base_, unsigned char* smem_, int cwg_)
      : Sync(prm_, s_base_, smem_, cwg_) {}

  // The first tile: S only. Issue and wait stay in one branch (C7514, sdpa_warpspec.cuh).
  __device__ __forceinline__ void first_tile(int idx, int key0) {
    turn_begin();
    wait_full(sdpa_warpspec::kFullK, idx);
    fence_regs(tile.m.s_acc);
    wgmma_fence();
    tile.template issue_qk<Cfg::kBlockM>(desc_q(), desc_k(idx));
    wgmma_commit();
    turn_end();
    wgmma_wait<0>();
    fence_regs(tile.m.s_acc);
    release(sdpa_warpspec::kEmptyK, idx);
    tile.softmax(key0, prm.ws.p.seq_len);
    tile.pack_p();
  }
  // S(idx) and P(idx-1).V(idx-1) back to back; O's rescale under S, softmax(idx) under P.V.
  // With pingpong, O's rescale moves in front of the turn (under the other
  // warpgroup's GEMMs; s7's default) and K(idx)'s wait too (FlashAttention-3).
  __device__ __forceinline__ void middle_tile(int idx, int key0) {
    if constexpr (Cfg::kPingpong) {
      tile.fence_o();
      tile.rescale_o();
    }
    wait_full(sdpa_warpspec::kFullK, idx);
    turn_begin();
    fence_regs(tile.m.s_acc);
    fence_regs(tile.p8);
    tile.fence_o();
    wgmma_fence();  // p8 (and a rescaled o_acc) were written by ordinary instructions
    tile.template issue_qk<Cfg::kBlockM>(desc_q(), desc_k(idx));
    wgmma_commit();
    if constexpr (!Cfg::kPingpong) {  // under S(idx) on the tensor cores
      tile.fence_o();
      tile.rescale_o();
      tile.fence_o();
    }
    wait_full(sdpa_warpspec::kFullV, idx - 1);
    wgmma_fence();
    tile.issue_pv(desc_vt(idx - 1));
    wgmma_commit();
    turn_end();
    if constexpr (Cfg::kPvPromoteMode == kPvPromoteHalves) {
      promoted_halves_then_softmax(idx, key0);
      return;
    }
    wgmma_wait<1>();  // S(idx) done; P(idx-1).V(idx-1) may still run
    fence_regs(tile.m.s_acc);
    release(sdpa_warpspec::kEmptyK, idx);
    tile.softmax(key0, prm.ws.p.seq_len);
    schedule_boundary(prm.ws.p.seq_len < 0);  // keep the wait below the softmax (sdpa_wgmma.cuh)
    wgmma_wait<0>();
    tile.fence_o();
    fence_regs(tile.p8);
    release(sdpa_warpspec::kEmptyV, idx - 1);
    tile.promote_o();
    tile.pack_p();
  }
  // kPvPromoteHalves: both column halves of P(idx-1).V(idx-1) done and added to O before
  // softmax(idx), so o_tile is dead during the softmax (a half in flight under it spills 4-16
  // bytes at 232 registers); the other warpgroup's turn keeps the tensor cores busy meanwhile.
  __device__ __forceinline__ void promoted_halves_then_softmax(int idx, int key0) {
    wgmma_wait<0>();  // S(idx) and the first half of P(idx-1).V(idx-1)
    fence_regs(tile.m.s_acc);
    tile.fence_o();
    fence_regs(tile.p8);
    release(sdpa_warpspec::kEmptyK, idx);
    tile.pv_second_half(desc_vt(idx - 1));  // reads Vt(idx - 1) before its release
    release(sdpa_warpspec::kEmptyV, idx - 1);
    tile.promote_o();
    tile.softmax(key0, prm.ws.p.seq_len);
    tile.pack_p();
  }
  __device__ __forceinline__ void last_pv(int idx) {
    tile.fence_o();
    tile.rescale_o();
    tile.fence_o();
    fence_regs(tile.p8);
    turn_begin();
    wait_full(sdpa_warpspec::kFullV, idx);
    wgmma_fence();
    tile.issue_pv(desc_vt(idx));
    wgmma_commit();
    turn_end();
    wgmma_wait<0>();
    tile.fence_o();
    tile.pv_second_half(desc_vt(idx));  // kPvPromoteHalves: reads Vt(idx) before its release
    release(sdpa_warpspec::kEmptyV, idx);
    tile.promote_o();
  }

  // This warpgroup's key tiles, then the tiles only the other warpgroup needs
  // (causal): freed in order once landed, so the producer's ring keeps moving.
  // Per work item (one, or a persistent block's stripe): this warpgroup's key
  // tiles, then the tiles only the other warpgroup needs (causal): freed in
  // order once landed, so the producer's ring keeps moving. The ring index
  // carries across items; so do the turns (tiles + 1 per item for both).
  __device__ __forceinline__ void run() {
    const SdpaProblem& p = prm.ws.p;
    // Pingpong: warpgroup 0 takes the first turn.
    if constexpr (Cfg::kPingpong) {
      if (cwg == 1) sdpa_warpspec::bar_arrive(sdpa_warpspec::kTurnBarrier0, kTurnThreads);
    }
    int ring = 0;
    sdpa_warpspec::WorkOrder<Cfg, kCausal>::for_each(prm.ws, 0, kNoSplit, [&](const WorkTile& wt, int local) {
      const int bh = wt.b * p.heads + wt.h;
      const int wg_q0 = wt.q_begin + cwg * kWgmmaM;
      const int needed =
          wg_q0 < p.seq_len ? sdpa_ceil_div(sdpa_kv_end(wg_q0, kWgmmaM, p.seq_len, kCausal), kBlockN) : 0;
      const int tiles = wt.kt_end - wt.kt_begin;
      const int mine = max(0, min(wt.kt_end, needed) - wt.kt_begin);
      tile.init(p.softmax_scale * prm.q_descale[bh] * prm.k_descale[bh], wg_q0 + warp_in_wg * Tile::Base::kWarpRows,
                lane);
      mbarrier_wait(sdpa_warpspec::full_q_bar(bars), local & 1);
      if (mine > 0) first_tile(ring, wt.kt_begin * kBlockN);
      else empty_turn();
      for (int j = 1; j < mine; ++j) middle_tile(ring + j, (wt.kt_begin + j) * kBlockN);
      release_q();
      if (mine > 0) last_pv(ring + mine - 1);
      for (int j = mine; j < tiles; ++j) {
        empty_turn();
        wait_full(sdpa_warpspec::kFullK, ring + j);
        release(sdpa_warpspec::kEmptyK, ring + j);
        wait_full(sdpa_warpspec::kFullV, ring + j);
        release(sdpa_warpspec::kEmptyV, ring + j);
      }
      ring += tiles;
      if constexpr (kPdl == sdpa_warpspec::Pdl::kLateTrigger) grid_launch_dependents();
      if (wg_q0 < p.seq_len) {
        T* o_g = sdpa_head_ptr(static_cast<T*>(p.out), p.out_strides, wt.b, wt.h) +
                 static_cast<int64_t>(wt.q_begin) * p.out_strides.seq;
        tile.template store_o<Cfg::kBlockM>(smem + L::kOOffset, cwg * kWgmmaM + warp_in_wg * Tile::Base::kWarpRows,
                                            o_g, p.out_strides.seq, p.seq_len - wt.q_begin, lane, prm.v_descale[bh]);
      }
    });
  }
};

// kRowSumMma: under the D rows TMA fills in every Vt chunk of every stage, a
// row of e4m3 ones and seven zero rows, written once (TMA never touches them).
// A swizzle only permutes 16-byte pieces within a row, so uniform rows need none.
template <int D, class Cfg>
__device__ __forceinline__ void write_sum_rows(unsigned char* smem) {
  using L = Layout<D, Cfg>;
  constexpr int kChunks = Cfg::kStages * L::kVtChunks;                // chunks of every ring stage
  constexpr int kPieces = kSumRows * L::kVtChunk / kChunkBytes;       // 16-byte pieces of the rows under one chunk
  constexpr int kOnePieces = L::kVtChunk / kChunkBytes;               // ... of the ones row
  constexpr uint32_t kOnes = kE4m3One * 0x01010101u;
  for (int i = static_cast<int>(threadIdx.x); i < kChunks * kPieces; i += Cfg::kThreads) {
    const int piece = i % kPieces;
    const uint32_t word = piece < kOnePieces ? kOnes : 0u;
    *reinterpret_cast<uint4*>(smem + L::kVOffset + (i / kPieces) * L::kVtChunkStride + D * L::kVtChunk +
                              piece * kChunkBytes) = make_uint4(word, word, word, word);
  }
  fence_proxy_async_shared();  // wgmma reads them through the async proxy
}

template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
__global__ void __launch_bounds__(Cfg::kThreads, 1) fp8_kernel(const __grid_constant__ Params prm) {
  using L = Layout<D, Cfg>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_base = sdpa_mma::smem_addr(smem_raw);
  const uint32_t s_base = (raw_base + (kSw128Align - 1)) & ~static_cast<uint32_t>(kSw128Align - 1);
  unsigned char* smem = smem_raw + (s_base - raw_base);
  if (threadIdx.x == 0) {
    const uint32_t bars = s_base + L::kBarOffset;
    mbarrier_init(sdpa_warpspec::full_q_bar(bars), 1);  // the producer's expect_tx arrival
    mbarrier_init(sdpa_warpspec::empty_q_bar(bars), Cfg::kConsumerWarps);  // each consumer warp's last S done
    for (int s = 0; s < Cfg::kStages; ++s) {
      mbarrier_init(sdpa_warpspec::ring_bar<Cfg::kStages>(bars, sdpa_warpspec::kFullK, s), 1);
      // Vt: the producer's expect_tx arrival, or one arrival per transposing warp
      mbarrier_init(sdpa_warpspec::ring_bar<Cfg::kStages>(bars, sdpa_warpspec::kFullV, s),
                    Cfg::kVtInKernel ? kTransposeWarps : 1);
      mbarrier_init(sdpa_warpspec::ring_bar<Cfg::kStages>(bars, sdpa_warpspec::kEmptyK, s), Cfg::kConsumerWarps);
      mbarrier_init(sdpa_warpspec::ring_bar<Cfg::kStages>(bars, sdpa_warpspec::kEmptyV, s), Cfg::kConsumerWarps);
      if constexpr (Cfg::kVtInKernel) {
        mbarrier_init(sdpa_warpspec::ring_bar<Cfg::kStages>(bars, kFullVRaw, s), 1);
        mbarrier_init(sdpa_warpspec::ring_bar<Cfg::kStages>(bars, kEmptyVRaw, s), kTransposeWarps);
      }
    }
    fence_mbarrier_init();
  }
  if constexpr (Cfg::kRowSumMma) write_sum_rows<D, Cfg>(smem);
  __syncthreads();  // the last block-wide barrier: roles diverge below
  if constexpr (kPdl == sdpa_warpspec::Pdl::kEarlyTrigger) grid_launch_dependents();
  // Broadcast so ptxas can prove every role branch warp-uniform (sdpa_warpspec.cuh).
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / kWarpgroupThreads, 0);
  if (wg == 0) {
    setmaxnreg_dec<Cfg::kProducerRegs>();
    if constexpr (Cfg::kVtInKernel) {
      const int warp = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / sdpa_warpspec::kWarpSize, 0);
      const int lane = static_cast<int>(threadIdx.x) % sdpa_warpspec::kWarpSize;
      if (warp > 0) transpose_v<D, Cfg, kCausal>(prm, s_base, warp - 1, lane);
    }
    if (threadIdx.x == 0) produce<D, Cfg, kCausal>(prm, s_base);
    __syncwarp();
  } else {
    setmaxnreg_inc<Cfg::kConsumerRegs>();
    // the descales and O's buffer belong to earlier kernels until the pre-pass is done
    if constexpr (kPdlOn) grid_dependency_wait();
    Consumer<T, D, Cfg, kCausal, kScalePositive> consumer(prm, s_base, smem, wg - 1);
    consumer.run();
  }
}

// ------------------------------------------------------------------ host --
inline int64_t vt_key_stride(int seq_len) { return sdpa_ceil_div(seq_len, kVtKeyPad) * kVtKeyPad; }

// The pre-pass's Vt (none when the kernel transposes V: kVtInKernel), then kQkF16's fp16
// copies of Q and K, contiguous [B][H][S][D] each.
inline int64_t vt_scratch_bytes(const SdpaProblem& p, bool vt_in_kernel) {
  return vt_in_kernel ? 0 : static_cast<int64_t>(p.batch) * p.heads * p.head_dim * vt_key_stride(p.seq_len);
}
inline int64_t qk16_elems(const SdpaProblem& p) {
  return static_cast<int64_t>(p.batch) * p.heads * p.seq_len * p.head_dim;  // of Q, and as many of K
}
inline int64_t scratch_bytes(const SdpaProblem& p, bool vt_in_kernel, bool qk_f16 = false) {
  constexpr int64_t kF16Bytes = 2, kTensors = 2;
  return vt_scratch_bytes(p, vt_in_kernel) + (qk_f16 ? kTensors * kF16Bytes * qk16_elems(p) : 0);
}
// kQkF16: the fp16 Q (tensor 0) or K (tensor 1) in the scratch, and its element strides.
inline __half* qk16_base(const SdpaFp8Problem& f, bool vt_in_kernel, int tensor) {
  return reinterpret_cast<__half*>(static_cast<uint8_t*>(f.scratch) + vt_scratch_bytes(f.attn, vt_in_kernel)) +
         tensor * qk16_elems(f.attn);
}
inline SdpaTensorStrides qk16_strides(const SdpaProblem& p) {
  const int64_t seq = p.head_dim, head = seq * p.seq_len;
  return SdpaTensorStrides{head * p.heads, head, seq};
}

// Tensor map of a 4-D byte tensor (dims innermost first, strides in bytes for
// dims 1..3) with boxes of box[0] x box[1] bytes, swizzled by box[0] (64 or 128).
inline cudaError_t encode_u8_map(CUtensorMap* map, const void* base, const cuuint64_t (&dims)[4],
                                 const cuuint64_t (&strides)[3], const cuuint32_t (&box)[4]) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_tiled_fn();
  if (encode == nullptr) return cudaErrorNotSupported;
  constexpr cuuint32_t kRank = 4;
  const cuuint32_t elem_strides[kRank] = {1, 1, 1, 1};
  const CUtensorMapSwizzle swizzle = box[0] == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  const CUresult res = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, kRank, const_cast<void*>(base), dims, strides, box,
                              elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return res == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// Q or K: [B, H, S, D] e4m3 with element (= byte) strides; boxes of D x rows.
inline cudaError_t encode_qk_map(CUtensorMap* map, const void* base, const SdpaTensorStrides& s,
                                 const SdpaProblem& p, uint32_t rows) {
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(p.head_dim), static_cast<cuuint64_t>(p.seq_len),
                              static_cast<cuuint64_t>(p.heads), static_cast<cuuint64_t>(p.batch)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(s.seq), static_cast<cuuint64_t>(s.head),
                                 static_cast<cuuint64_t>(s.batch)};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(p.head_dim), rows, 1, 1};
  return encode_u8_map(map, base, dims, strides, box);
}

// Vt: [B, H, D, S_pad] bytes, contiguous; boxes of one chunk of keys x D rows
// (fp8_vt_chunk_keys: a key tile is kBlockN / chunk boxes).
inline cudaError_t encode_vt_map(CUtensorMap* map, const void* vt, const SdpaProblem& p, uint32_t chunk_keys) {
  const int64_t s_pad = vt_key_stride(p.seq_len);
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(s_pad), static_cast<cuuint64_t>(p.head_dim),
                              static_cast<cuuint64_t>(p.heads), static_cast<cuuint64_t>(p.batch)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(s_pad), static_cast<cuuint64_t>(s_pad * p.head_dim),
                                 static_cast<cuuint64_t>(s_pad * p.head_dim * p.heads)};
  const cuuint32_t box[4] = {chunk_keys, static_cast<cuuint32_t>(p.head_dim), 1, 1};
  return encode_u8_map(map, vt, dims, strides, box);
}

template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
cudaError_t launch_instance(const Params& prm, cudaStream_t stream) {
  constexpr size_t smem = Layout<D, Cfg>::kSmemBytes;
  auto kernel = fp8_kernel<T, D, Cfg, kCausal, kScalePositive>;
  const cudaError_t err = sdpa_set_smem(kernel, smem);
  if (err != cudaSuccess) return err;
  const int blocks = Cfg::kPersistent
                         ? min(sdpa_warpspec::WorkOrder<Cfg, kCausal>::units(prm.ws), sdpa_warpspec::sm_count())
                         : prm.ws.work_items;
  return sdpa_warpspec::launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), Cfg::kThreads, smem,
                                      sdpa_warpspec::kPlainGrid, kPdlOn, stream, prm);
}

// The pre-pass into the scratch, then the attention kernel reading it (or,
// with kVtInKernel, the attention kernel alone, on V itself).
template <typename T, int D, class Cfg>
cudaError_t launch(const SdpaFp8Problem& f, cudaStream_t stream) {
  const SdpaProblem& p = f.attn;
  cudaError_t err = cudaSuccess;
  if constexpr (Cfg::kQkF16) {
    const int64_t per_head_threads = sdpa_ceil_div<int64_t>(static_cast<int64_t>(p.seq_len) * D, kWidenBytes);
    const dim3 grid(static_cast<unsigned>(sdpa_ceil_div<int64_t>(per_head_threads, kWidenThreads)), p.heads, 2 * p.batch);
    constexpr size_t kNoSmem = 0;
    err = sdpa_warpspec::launch_kernel(widen_qk_kernel<D>, grid, kWidenThreads, kNoSmem, sdpa_warpspec::kPlainGrid,
                                       kPdlOn, stream, static_cast<const uint8_t*>(p.q), p.q_strides,
                                       static_cast<const uint8_t*>(p.k), p.k_strides,
                                       qk16_base(f, Cfg::kVtInKernel, 0), p.seq_len);
    if (err != cudaSuccess) return err;
  }
  if constexpr (!Cfg::kVtInKernel) {
    const int64_t s_pad = vt_key_stride(p.seq_len);
    const dim3 grid(static_cast<unsigned>(s_pad / kTransposeKeys), p.heads, p.batch);
    constexpr size_t kStaticSmemOnly = 0;
    err = sdpa_warpspec::launch_kernel(transpose_v_kernel<D>, grid, kTransposeThreads, kStaticSmemOnly,
                                       sdpa_warpspec::kPlainGrid, kPdlOn, stream, static_cast<const uint8_t*>(p.v),
                                       p.v_strides, static_cast<uint8_t*>(f.scratch), p.seq_len,
                                       static_cast<int>(s_pad));
    if (err != cudaSuccess) return err;
  }
  Params prm{};
  prm.ws.p = p;
  prm.ws.m_tiles = sdpa_ceil_div(p.seq_len, Cfg::kBlockM);
  prm.ws.work_items = prm.ws.m_tiles * p.heads * p.batch;
  prm.q_descale = f.q_descale;
  prm.k_descale = f.k_descale;
  prm.v_descale = f.v_descale;
  if constexpr (Cfg::kQkF16) {
    err = encode_tensor_map(&prm.ws.q_map, qk16_base(f, Cfg::kVtInKernel, 0), qk16_strides(p), p,
                            CU_TENSOR_MAP_DATA_TYPE_FLOAT16, Cfg::kBlockM);
    if (err == cudaSuccess)
      err = encode_tensor_map(&prm.ws.k_map, qk16_base(f, Cfg::kVtInKernel, 1), qk16_strides(p), p,
                              CU_TENSOR_MAP_DATA_TYPE_FLOAT16, Cfg::kBlockN);
  } else {
    err = encode_qk_map(&prm.ws.q_map, p.q, p.q_strides, p, Cfg::kBlockM);
    if (err == cudaSuccess) err = encode_qk_map(&prm.ws.k_map, p.k, p.k_strides, p, Cfg::kBlockN);
  }
  if (err == cudaSuccess) {
    err = Cfg::kVtInKernel ? encode_qk_map(&prm.ws.v_map, p.v, p.v_strides, p, Cfg::kBlockN)
                           : encode_vt_map(&prm.ws.v_map, f.scratch, p, Layout<D, Cfg>::kVtChunk);
  }
  if (err != cudaSuccess) return err;
  const bool positive = p.softmax_scale > 0.0f;  // the descales are positive
  if (p.causal)
    return positive ? launch_instance<T, D, Cfg, true, true>(prm, stream)
                    : launch_instance<T, D, Cfg, true, false>(prm, stream);
  return positive ? launch_instance<T, D, Cfg, false, true>(prm, stream)
                  : launch_instance<T, D, Cfg, false, false>(prm, stream);
}

// Everything a launch needs that the tensor maps do not check themselves.
inline cudaError_t check(const SdpaFp8Problem* f, bool vt_in_kernel, bool qk_f16 = false) {
  if (f == nullptr) return cudaErrorInvalidValue;
  const cudaError_t ok = sdpa_check_problem(f->attn);
  if (ok != cudaSuccess) return ok;
  if (sdpa_problem_is_empty(f->attn)) return cudaSuccess;
  if (f->q_descale == nullptr || f->k_descale == nullptr || f->v_descale == nullptr) return cudaErrorInvalidValue;
  if (scratch_bytes(f->attn, vt_in_kernel, qk_f16) > 0) {
    if (f->scratch == nullptr || f->scratch_bytes < scratch_bytes(f->attn, vt_in_kernel, qk_f16))
      return cudaErrorInvalidValue;
    if (reinterpret_cast<uintptr_t>(f->scratch) % kTmaAlignBytes != 0) return cudaErrorInvalidValue;
  }
  constexpr int kE4m3Bytes = 1, kOutBytes = 2;
  const SdpaProblem& p = f->attn;
  // V (and, kQkF16, Q and K) are read with 16-byte loads by the pre-passes, O written with
  // 16-byte stores; Q and K are checked again by their tensor maps.
  const bool vec_ok = sdpa_vec16_ok(p.q, p.q_strides, kE4m3Bytes) && sdpa_vec16_ok(p.k, p.k_strides, kE4m3Bytes) &&
                      sdpa_vec16_ok(p.v, p.v_strides, kE4m3Bytes) && sdpa_vec16_ok(p.out, p.out_strides, kOutBytes);
  return vec_ok ? cudaSuccess : cudaErrorInvalidValue;
}

}  // namespace sdpa_fp8
