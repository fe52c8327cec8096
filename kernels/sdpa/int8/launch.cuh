// int8/launch.cuh -- the INT8 stage's host side: its recipe part (Int8Operands), its Configs per head
// dim (the persistent long policy of its composition, consumer warpgroups taking turns, and s12's key
// split), the checks and the tensor maps of its 8-bit operands, and the launch of one schedule
// (int8/plans.cuh chooses it and holds the stage's exports).
#pragma once

#include <algorithm>
#include <string>

#include "../sdpa_persistent_split.cuh"
#include "operands.cuh"
#include "quantize_launch.cuh"

namespace sdpa_int8 {

// The part an INT8 stage composes last: every O rescaled (p <= 2^8 keeps no headroom for a kept max),
// 128-key tiles (one K descale each), and rings as deep as the 16-bit stages' bytes allow at 8 bits.
template <class R>
struct Int8Operands : R {
  struct Body : R::Body {
    static constexpr int kRescaleThresholdD128 = 0;
  };
  static constexpr int kBlockN64 = kKBlock, kBlockN128 = kKBlock;
  static constexpr int kStages64 = 4, kStages128 = 4;
  static_assert(!R::kDeferEpilogue, "a deferred store would read the next item's V descales (bind_item)");
  static_assert(!R::kKvMulticast, "Vt tiles load whole (producer's load_vt_tile)");
};

// The launch of most problems: the composition's long policy, its consumer warpgroups in turns (three
// where P.V accumulates over the row, int8/pv_accumulation.cuh).
template <class R, int D, int kWarpgroups = kConsumerWarpgroups<D>>
using Config = typename sdpa_persistent::PersistentSplit<R>::template LongConfigOf<D, kWarpgroups, kKBlock,
                                                                                   /*Pingpong=*/true>;
// s12's key split: two warpgroups on one 64-row tile, each over alternate key tiles, merged in shared
// memory; one block per tile, not persistent (the 16-bit recipe's config, its rings in 8-bit tiles).
template <class R, int D>
using KeySplitConfig = typename sdpa_persistent::PersistentSplit<R>::template KeySplitConfig<D>;

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// What the kernel reads: TMA bases and strides in whole 16-byte units, Vt long enough, a
// head_dim the tiles take; the rest as sdpa_check_problem (shape, GQA, causal lengths) says.
inline cudaError_t check(const SdpaInt8Problem& q8) {
  const SdpaProblem& p = q8.attn;
  const cudaError_t ok = sdpa_check_problem(p);
  if (ok != cudaSuccess) return ok;
  const bool strides_ok = p.q_strides.seq % 16 == 0 && p.q_strides.head % 16 == 0 && p.q_strides.batch % 16 == 0 &&
                          p.k_strides.seq % 16 == 0 && p.k_strides.head % 16 == 0 && p.k_strides.batch % 16 == 0;
  const bool vt_ok = q8.vt_key_stride >= p.kv_seq_len && q8.vt_key_stride % 16 == 0;
  const bool scales_ok = q8.q_descale != nullptr && q8.k_descale != nullptr && q8.v_descale != nullptr &&
                         q8.v_mean != nullptr;
  if (!strides_ok || !vt_ok || !scales_ok || !aligned16(p.q) || !aligned16(p.k) || !aligned16(p.v)) return cudaErrorInvalidValue;
  constexpr int kOutBytes = 2;  // fp16 or bf16: O's 16-byte stores
  return sdpa_vec16_ok(p.out, p.out_strides, kOutBytes) ? cudaSuccess : cudaErrorInvalidValue;
}

// Q [B, H, Sq, D] and K [B, Hkv, Sk, D] int8 in boxes of D bytes x rows; Vt [B, Hkv, D, stride] in
// boxes of kBlockN keys x D rows.
template <int kQRows, int kKeys>
cudaError_t encode_maps(const SdpaInt8Problem& q8, sdpa_warpspec::Params& prm) {
  using sdpa_tma::encode_u8_map;
  const SdpaProblem& p = q8.attn;
  const auto u64 = [](int64_t v) { return static_cast<cuuint64_t>(v); };
  const cuuint32_t d = static_cast<cuuint32_t>(p.head_dim);
  cudaError_t err = encode_u8_map(&prm.q_map, p.q, {u64(p.head_dim), u64(p.seq_len), u64(p.heads), u64(p.batch)},
                                  {u64(p.q_strides.seq), u64(p.q_strides.head), u64(p.q_strides.batch)}, {d, kQRows, 1, 1});
  if (err == cudaSuccess)
    err = encode_u8_map(&prm.k_map, p.k, {u64(p.head_dim), u64(p.kv_seq_len), u64(p.kv_heads), u64(p.batch)},
                        {u64(p.k_strides.seq), u64(p.k_strides.head), u64(p.k_strides.batch)}, {d, kKeys, 1, 1});
  const int64_t row = q8.vt_key_stride, head = row * p.head_dim;
  if (err == cudaSuccess)
    err = encode_u8_map(&prm.v_map, p.v, {u64(row), u64(p.head_dim), u64(p.kv_heads), u64(p.batch)},
                        {u64(row), u64(head), u64(head * p.kv_heads)}, {kKeys, d, 1, 1});
  return err;
}

template <typename Out, int D, class Cfg>
cudaError_t launch(const SdpaInt8Problem& q8, const sdpa_warpspec::Schedule& schedule, cudaStream_t stream) {
  using T = Int8Qk<Out>;
  const SdpaProblem& p = q8.attn;
  Int8Params prm{};
  sdpa_warpspec::set_problem(prm, p, schedule);
  prm.q_descale = q8.q_descale;
  prm.k_descale = q8.k_descale;
  prm.v_descale = q8.v_descale;
  prm.v_mean = q8.v_mean;
  const cudaError_t err = encode_maps<Cfg::kBlockM, Cfg::kBlockN>(q8, prm);
  if (err != cudaSuccess) return err;
  constexpr int kNoSplit = 1;
  return sdpa_warpspec::launch_masked<T, D, Cfg>(prm, kNoSplit, stream);
}

template <class R>
int64_t smem_bytes(int32_t head_dim) {
  using Layout64 = sdpa_warpspec::Layout<Int8Qk<__half>, 64, Config<R, 64>>;
  using Layout128 = sdpa_warpspec::Layout<Int8Qk<__half>, 128, Config<R, 128>>;
  using Split64 = sdpa_warpspec::Layout<Int8Qk<__half>, 64, KeySplitConfig<R, 64>>;
  using Split128 = sdpa_warpspec::Layout<Int8Qk<__half>, 128, KeySplitConfig<R, 128>>;
  if (head_dim == 64) return std::max(Layout64::kSmemBytes, Split64::kSmemBytes);
  return head_dim == 128 ? std::max(Layout128::kSmemBytes, Split128::kSmemBytes) : 0;
}

}  // namespace sdpa_int8
