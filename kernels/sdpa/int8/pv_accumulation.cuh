// int8/pv_accumulation.cuh -- how the INT8 tile's e4m3 P.V reaches O, the part Int8Tile holds per
// head dim. e4m3 wgmma keeps about 22 bits of its "f32" accumulator and truncates (issue 28), so:
//
//   PromotedPerTile     each key tile's P.V lands in its own accumulators (O_tile) and is added into O
//                       in float32 as it retires, the rescale folded into that FFMA: the 22-bit sum
//                       spans one tile's keys. Costs O_tile's registers and an FFMA per element a tile.
//   AccumulatedOverRow  FlashAttention-3's FP8 P.V: O itself is the wgmma's accumulator over the whole
//                       row, rescaled before each P.V (which waits for the previous one to retire).
//                       On plain V its truncations add up where every term has one sign (all-positive
//                       rows of thousands of keys failed the budget on the H200, 2026-11-28); on V
//                       smoothed by its mean over the keys (recipe.py's smooth_v, the quantizer's
//                       default) the terms take both signs and it is as accurate as PromotedPerTile
//                       on every distribution of a CPU model of the tensor core
//                       (tools/int8_pv_accumulation.py, history/int8/pv-accumulation-model.md).
//
// The choice per head dim (kPvOverRow) frees O_tile where a third consumer warpgroup then fits.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../sdpa_wgmma.cuh"
#include "../fp8/wgmma8.cuh"

namespace sdpa_int8 {

using sdpa_wgmma::desc_advance;
using sdpa_wgmma::kWgmmaK8;

// Head dim 64 accumulates over the row (on smoothed V): without O_tile's 32 registers its tile fits
// the 160 a third consumer warpgroup leaves (with O_tile it spilled 44-56 bytes), and three warpgroups
// in turns hide the softmax chain (1.2x at (4,16,4096,64) on plain V, trial
// s19_int8_no_promotion_three_wgs_d64, which failed only all-positive rows). Head dim 128
// keeps the promotion: there O over the row measured 0.90x (its rescale waits for the P.V in flight),
// and three warpgroups do not fit 128-key tiles (64-key ones measured 0.94x, s19_int8_three_wgs_d128_64key).
template <int D>
constexpr bool kPvOverRow = D == 64;
template <int D>
constexpr int kConsumerWarpgroups = kPvOverRow<D> ? 3 : 2;

constexpr int kPvRowsPerThread = 2;  // accumulator rows g and g + 8
constexpr int kPvN8 = 8;             // columns of an n8 accumulator tile

template <int D, int kKeySlices>
struct PromotedPerTile {
  static constexpr int kOAcc = D / 2;
  using WgO = sdpa_wgmma::Wgmma8<D>;
  float o_tile[kOAcc];                       // this tile's P.V
  float pv_correction[kPvRowsPerThread];     // O's rescale for the P.V in flight, applied as it retires

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int r = 0; r < kPvRowsPerThread; ++r) pv_correction[r] = 1.0f;
  }
  __device__ __forceinline__ void issue(float (&)[kOAcc], const uint32_t (&p_frag)[kKeySlices][4], uint64_t desc_vt) {
#pragma unroll
    for (int kk = 0; kk < kKeySlices; ++kk)
      WgO::rs(o_tile, p_frag[kk], desc_advance(desc_vt, kk * kWgmmaK8), kk > 0 ? 1 : 0);
  }
  // The correction is set aside: the P.V about to be issued adds into O_tile, retired() applies it.
  __device__ __forceinline__ void rescale(float (&)[kOAcc], const float (&correction)[kPvRowsPerThread]) {
#pragma unroll
    for (int r = 0; r < kPvRowsPerThread; ++r) pv_correction[r] = correction[r];
  }
  // O = O * correction + O_tile, read after the wgmma wait that precedes this call.
  __device__ __forceinline__ void retired(float (&o_acc)[kOAcc]) {
    sdpa_wgmma::fence_regs(o_tile);
#pragma unroll
    for (int j = 0; j < D / kPvN8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o_acc[4 * j + e] = fmaf(o_acc[4 * j + e], pv_correction[e / 2], o_tile[4 * j + e]);
  }
};

template <int D, int kKeySlices>
struct AccumulatedOverRow {
  static constexpr int kOAcc = D / 2;
  using WgO = sdpa_wgmma::Wgmma8<D>;

  __device__ __forceinline__ void init() {}
  __device__ __forceinline__ void issue(float (&o_acc)[kOAcc], const uint32_t (&p_frag)[kKeySlices][4],
                                        uint64_t desc_vt) {
#pragma unroll
    for (int kk = 0; kk < kKeySlices; ++kk) WgO::rs(o_acc, p_frag[kk], desc_advance(desc_vt, kk * kWgmmaK8), 1);
  }
  __device__ __forceinline__ void rescale(float (&o_acc)[kOAcc], const float (&correction)[kPvRowsPerThread]) {
#pragma unroll
    for (int j = 0; j < D / kPvN8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o_acc[4 * j + e] *= correction[e / 2];
  }
  __device__ __forceinline__ void retired(float (&)[kOAcc]) {}
};

template <int D, int kKeySlices>
using PvAccumulationOf =
    std::conditional_t<kPvOverRow<D>, AccumulatedOverRow<D, kKeySlices>, PromotedPerTile<D, kKeySlices>>;

}  // namespace sdpa_int8
