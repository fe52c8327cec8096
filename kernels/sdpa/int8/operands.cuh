// int8/operands.cuh -- the INT8 stage's operands as the parts read them (sdpa_warpspec::Operands):
// Q and K int8 (D-byte rows, one 64- or 128-byte swizzle row each), V as Vt, e4m3 [D][keys] (the
// quantizer's layout, keys permuted per 32 for P's fragments), O in the inputs' 16-bit type, and the
// kernel parameters that carry the descales and V's mean.
#pragma once

#include <cstdint>

#include "../sdpa_warpspec_config.cuh"
#include "tile.cuh"

namespace sdpa_int8 {

// The T of an INT8 instance of the parts. One byte: the bytes of a K or V element, as the
// schedulers' L2 model (sched/work_tile.cuh's kv_bytes_of) counts them.
template <typename Out>
struct Int8Qk {
  int8_t element;
};
static_assert(sizeof(Int8Qk<__half>) == 1, "a tag of one byte: an 8-bit element");

struct Int8Params : sdpa_warpspec::Params {
  const float* q_descale;  // [batch, heads, ceil(seq_len / kQBlock)]
  const float* k_descale;  // [batch, kv_heads, ceil(kv_seq_len / kKBlock)]
  const float* v_descale;  // [batch, kv_heads, head_dim]
  const float* v_mean;     // [batch, kv_heads, head_dim]: added to O (V was smoothed by it)
};

}  // namespace sdpa_int8

namespace sdpa_warpspec {

template <typename OutT>
struct Operands<sdpa_int8::Int8Qk<OutT>> {
  using Out = OutT;
  using KernelParams = sdpa_int8::Int8Params;
  static constexpr int kQkBytes = 1;
  static constexpr bool kVTransposed = true;  // Vt tiles: D rows of kBlockN keys (producer's load_vt_tile)
  template <int D, int kBlockN, bool kCausal, bool kScalePositive, int kRescaleThreshold>
  using Tile = sdpa_int8::Int8Tile<OutT, D, kBlockN, kCausal, kScalePositive, kRescaleThreshold>;
};

}  // namespace sdpa_warpspec
