// int8/pv_accumulation.cuh -- how the INT8 tile's e4m3 P.V reaches O: FlashAttention-3's FP8 P.V, O
// itself the wgmma's accumulator over the whole row, rescaled before each P.V.
//
// e4m3 wgmma keeps about 22 bits of its "f32" accumulator and truncates (issue 28). On plain V those
// truncations add up where every term has one sign (all-positive rows of thousands of keys failed the
// budget on the H200, 2026-11-28). On V smoothed by its mean over the keys (recipe.py's smooth_v, the
// quantizer's default) the terms take both signs and the row-long sum is as accurate as a sum promoted
// into float32 per key tile, on every distribution of a CPU model of the tensor core
// (tools/int8_pv_accumulation.py, history/int8/pv-accumulation-model.md) and on the H200's
// 16384-key positive rows at both head dims (trial s19_int8_d128_192key_row_long).
//
// The per-tile promotion it replaced (O_tile and an FFMA per element a tile) is the trial patch
// history/patches/s19_int8_promoted_per_tile.diff; the row-long sum measured 1.054x over it once its
// rescale was skipped where no row's max grew (trial s19_int8_row_long_skip_rescale_magic).
#pragma once

#include <cstdint>

#include "../sdpa_wgmma.cuh"
#include "../fp8/wgmma8.cuh"

namespace sdpa_int8 {

using sdpa_wgmma::desc_advance;
using sdpa_wgmma::kWgmmaK8;

// Head dim 64's tile fits the 160 registers a third consumer warpgroup leaves, and three warpgroups
// in turns hide the softmax chain (1.2x at (4,16,4096,64), trial s19_int8_no_promotion_three_wgs_d64).
// Head dim 128's does not with 128-key tiles: 96-key ones fit and measured 0.973x
// (s19_int8_three_wgs_d128_96key), 64-key ones 0.94x (s19_int8_three_wgs_d128_64key).
template <int D>
constexpr int kConsumerWarpgroups = D == 64 ? 3 : 2;

constexpr int kPvRowsPerThread = 2;  // accumulator rows g and g + 8
constexpr int kPvN8 = 8;             // columns of an n8 accumulator tile

template <int D, int kKeySlices>
struct AccumulatedOverRow {
  static constexpr int kOAcc = D / 2;
  using WgO = sdpa_wgmma::Wgmma8<D>;

  __device__ __forceinline__ void issue(float (&o_acc)[kOAcc], const uint32_t (&p_frag)[kKeySlices][4],
                                        uint64_t desc_vt) {
#pragma unroll
    for (int kk = 0; kk < kKeySlices; ++kk) WgO::rs(o_acc, p_frag[kk], desc_advance(desc_vt, kk * kWgmmaK8), 1);
  }
  // A warp none of whose rows raised its max has every correction exactly 1 (ex2(0)) and skips the
  // rescale: past a long row's first tiles that is most tiles. The branch also keeps ptxas from
  // sinking the FMULs into the warpgroup's turn, between its Q.K^T and P.V issues, where every other
  // warpgroup would wait on them (history/int8/README.md, the SASS read of 2026-11-29).
  __device__ __forceinline__ void rescale(float (&o_acc)[kOAcc], const float (&correction)[kPvRowsPerThread]) {
    constexpr unsigned kWholeWarp = 0xffffffffu;
    if (!__any_sync(kWholeWarp, correction[0] != 1.0f || correction[1] != 1.0f)) return;
#pragma unroll
    for (int j = 0; j < D / kPvN8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o_acc[4 * j + e] *= correction[e / 2];
  }
};

}  // namespace sdpa_int8
