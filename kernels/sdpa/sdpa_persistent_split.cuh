// sdpa_persistent_split.cuh -- s8's two policies (a persistent longest-first grid for long sequences,
// a key split inside each short-sequence block) built from a stage's recipe
// (sdpa_persistent_recipe.cuh): PersistentSplit<R> holds the configs the recipe makes and the
// predicates that choose between them; sdpa_persistent_plans.cuh turns them into launch plans and
// SDPA_PERSISTENT_STAGE into the stage's exports. s8_persistent_split.cu says what the policies are
// and why. A stage may define SDPA_GENERAL_PROBLEM (sdpa_api.h: grouped-query attention,
// kv_seq_len != seq_len) before including this.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "sdpa_api.h"
#include "sdpa_export.cuh"
#include "sdpa_persistent_recipe.cuh"
#include "sdpa_warpspec.cuh"

namespace sdpa_persistent {

using sdpa_warpspec::Config;

template <class R>
struct PersistentSplit {
  using Body = typename R::Body;
  static constexpr int kProducerRegs = R::kProducerRegs;
  static_assert(R::kLongWgs64 == 0 || R::kLongWgs64 == 2 || R::kLongWgs64 == 3,
                "kLongWgs64: 2 (128 rows), 3 (192 rows) or 0 (by the wave count)");
  static_assert(R::kQBuffers == 1 || R::kQBuffers == 2, "kQBuffers: 1 or 2 Q buffers per persistent block");
  static_assert(R::kTurnsWgs64 == 0 || R::kTurnsWgs64 == 2 || R::kTurnsWgs64 == 3,
                "kTurnsWgs64: 2 or 3 warpgroups take turns, or 0 (by the model)");
  static_assert(R::kTurnsMaxSeq >= 0, "kTurnsMaxSeq: 0 (off) or the longest sequence that takes turns");
  static_assert(!R::kTurnsPastMaxSeq || R::kTurnsMaxSeq > 0, "kTurnsPastMaxSeq: needs the turns instance");
  static_assert(R::kSplits == 0 || R::kSplits == 1 || R::kSplits == 2 || R::kSplits == 4, "kSplits: 0 (auto), 1, 2 or 4");
  static_assert(R::kKeySplitWgs == 1 || R::kKeySplitWgs == 2, "kKeySplitWgs: 1 (off) or 2 warpgroups per query tile");
  static_assert(R::kKeySplitWgs == 1 || R::kSplits == 1, "key split and cluster split (kSplits) are exclusive");

  // Long: one block per SM; at head_dim 64 optionally 3 consumer warpgroups (160 registers each).
  static constexpr int kLongBlocksPerSm = 1;
  template <int D>
  static constexpr int kLongBlockN = D == 64 ? R::kBlockN64 : R::kBlockN128;
  template <class C>
  using WithQStages = std::conditional_t<R::kQBuffers == 2, sdpa_warpspec::QRing<C>, C>;
  template <class C>
  using WithDeferredEpilogue =
      std::conditional_t<R::kDeferEpilogue && C::kConsumerWGs == 2, sdpa_warpspec::DeferEpilogue<C>, C>;
  template <int D, int WGs, int BlockN = kLongBlockN<D>, bool Pingpong = false>
  using LongConfigOf = WithDeferredEpilogue<WithQStages<Config<
      WGs, BlockN, D == 64 ? R::kStages64 : R::kStages128, Pingpong, /*persistent=*/true, kLongBlocksPerSm,
      kProducerRegs, sdpa_warpspec::fit_consumer_regs(WGs, kProducerRegs, kLongBlocksPerSm, R::kConsumerRegs), Body>>>;
  // The recipe's first choice at each head dim (head_dim 128 keeps two: its O alone is 64 registers).
  template <int D>
  static constexpr int kLongConsumerWGs = D == 64 && R::kLongWgs64 != 2 ? 3 : 2;
  template <int D>
  using LongConfig = LongConfigOf<D, kLongConsumerWGs<D>>;
  template <int D>
  using LongConfig2 = LongConfigOf<D, 2>;
  static constexpr bool kTurns = R::kTurnsMaxSeq > 0;
  template <int D>
  using LongPingpongConfig = LongConfigOf<D, D == 64 && R::kTurnsWgs64 == 3 ? 3 : 2, kLongBlockN<D>, /*Pingpong=*/true>;
  static constexpr bool kThreeTurnsByModel = R::kTurnsWgs64 == 0;
  template <int D>
  using ThreeTurnsConfig = LongConfigOf<D, 3, kLongBlockN<D>, /*Pingpong=*/true>;
  // Whether two warpgroups of a long-policy launch may take turns: never at dense head_dim 128 (there
  // the turns measured slower, s8's trials). Up to kTurnsMaxSeq keys they do (before three warpgroups
  // are considered); past it only with kTurnsPastMaxSeq.
  template <int D>
  static bool turns_allowed(const SdpaProblem& p) {
    return kTurns && !(D == 128 && !p.causal);
  }

  // Three consumer warpgroups did each 192-row item 1.08x faster per row than two did 128-row ones
  // (H100, throughput mode, (4,16,4096,64)), but the persistent grid pays for whole waves: on 132 SMs
  // (2,8,2048,64) has 176 items of 192 rows (2 waves of 1.5x the work) against 256 of 128 (2 waves),
  // and measured slower with three. Compare waves x per-item cost (its rows), three warpgroups' rows
  // 1.08x cheaper: 3 warpgroups when ceil(items3 / sms) * 192 / 1.08 < ceil(items2 / sms) * 128.
  template <int D>
  static bool wgs3_pays_off(const SdpaProblem& p, int sms) {
    constexpr int gain_percent = 108;
    constexpr int rows3 = LongConfig<D>::kBlockM, rows2 = LongConfig2<D>::kBlockM;
    const int waves3 = sdpa_ceil_div(sdpa_ceil_div(p.seq_len, rows3) * p.heads * p.batch, sms);
    const int waves2 = sdpa_ceil_div(sdpa_ceil_div(p.seq_len, rows2) * p.heads * p.batch, sms);
    return waves3 * rows3 * 100 < waves2 * rows2 * gain_percent;
  }
  // Whether a non-causal head_dim-64 launch runs faster with three warpgroups taking turns than two:
  // the busiest block of three's best plan (sched/mixed_tiles.cuh's plan_three_turns, its model;
  // remembered per problem, as launch() reads the same plan) at least kThreeTurnsMinGain under two's
  // (128-row items in stripes). The margin covers the model's error where it was measured (1-2%).
  static constexpr double kThreeTurnsMinGain = 1.02;
  template <typename T>
  static bool three_turns_pay(const SdpaProblem& p, const SdpaDevice& device) {
    if (p.causal) return false;
    const auto plan = sdpa_warpspec::cached_three_turns_plan<ThreeTurnsConfig<64>::kBlockM>(
        p, device.sms, sdpa_warpspec::kv_bytes_of<T, 64>(p), static_cast<int>(device.l2_bytes));
    return plan.two_busiest > 0 &&
           static_cast<double>(plan.busiest) * kThreeTurnsMinGain <= static_cast<double>(plan.two_busiest);
  }

  // Short: two blocks per SM of 2 warpgroups: 2 * 128 * (24 + 232) = 65536.
  static constexpr int kShortBlockN = 128;
  static constexpr int kShortStages = 2;
  using ShortConfig = Config<1, kShortBlockN, kShortStages, /*pingpong=*/false, /*persistent=*/false,
                             /*blocks per SM=*/2, kProducerRegs, 232, Body>;
  // Key split (short policy): two consumer warpgroups on the same 64 rows, each over every other key
  // tile. Three warpgroups no longer fit two blocks per SM (2 * 128 * (24 + 2 * 116) = 65536 leaves
  // 116 registers, under the S, P and O fragments), so one block per SM with s6's 24/240 split; the
  // mission's 128 blocks fit 132 SMs in one wave either way. Each of the K and V rings holds 64 KiB:
  // 4 x 128 keys at D=64, 2 at D=128 (8 and 4 with 64-key tiles); ring depth per warpgroup is stages / 2.
  static constexpr int kKeySplitRingBytes = 64 * 1024;
  template <int D>
  static constexpr int kKeySplitStages = kKeySplitRingBytes / (R::kKeySplitBlockN * D * 2);  // 2-byte elements
  template <int D>
  using KeySplitConfig = sdpa_warpspec::KeySplit<Config<
      R::kKeySplitWgs, R::kKeySplitBlockN, kKeySplitStages<D>, /*pingpong=*/false, /*persistent=*/false,
      /*blocks per SM=*/1, kProducerRegs,
      sdpa_warpspec::fit_consumer_regs(R::kKeySplitWgs, kProducerRegs, /*min_blocks=*/1, R::kConsumerRegs), Body>>;
  static constexpr bool kKeySplit = R::kKeySplitWgs > 1;
  static constexpr bool kFewLong = kKeySplit && R::kShortOneWave;

  // Fewest splits (1, 2, 4) whose CTAs cover every SM, never more than the key tiles.
  static int auto_splits(const SdpaProblem& p, int sms) {
    const int items = sdpa_ceil_div(p.seq_len, ShortConfig::kBlockM) * p.heads * p.batch;
    const int key_tiles = sdpa_ceil_div(sdpa_warpspec::kv_len(p), kShortBlockN);
    int splits = 1;
    while (splits < sdpa_warpspec::kMaxClusterSplits && items * splits < sms && splits * 2 <= key_tiles) splits *= 2;
    return splits;
  }

  template <int D>
  static bool use_long_policy(const SdpaProblem& p, int sms) {
    if (R::kForcePolicy != Policy::kByShape) return R::kForcePolicy == Policy::kLong;
    // by the wave count (0), two warpgroups' 128-row items must fill the SMs; otherwise the recipe's own
    constexpr int rows = R::kLongWgs64 == 0 ? LongConfig2<D>::kBlockM : LongConfig<D>::kBlockM;
    const int long_items = sdpa_ceil_div(p.seq_len, rows) * p.heads * p.batch;
    if (long_items >= sms) return true;
    if constexpr (kFewLong) {
      // The key split halves each 64-row tile's chain of key tiles, but its warpgroups walk them
      // through half a ring each (one slot at head_dim 128): that pays only while every key-split
      // block runs at once. A second wave doubles the chain again, and a long chain (a prefill after
      // a cached prefix: 512 queries over 4096 keys) then runs better as fewer long-policy items.
      const int key_split_blocks = sdpa_ceil_div(p.seq_len, KeySplitConfig<D>::kBlockM) * p.heads * p.batch;
      return key_split_blocks > sms * KeySplitConfig<D>::kMinBlocks;
    }
    return false;
  }

  // The largest footprint of the instances this recipe may launch.
  template <class T, int D>
  static constexpr size_t smem_bytes() {
    using sdpa_warpspec::Layout;
    // 0 for an instance this recipe leaves out
    constexpr int policies = std::max({Layout<T, D, LongConfig<D>>::kSmemBytes, Layout<T, D, LongConfig2<D>>::kSmemBytes,
                                       kTurns ? Layout<T, D, LongPingpongConfig<D>>::kSmemBytes : 0,
                                       kThreeTurnsByModel ? Layout<T, D, ThreeTurnsConfig<D>>::kSmemBytes : 0,
                                       Layout<T, D, ShortConfig>::kSmemBytes});
    if constexpr (kKeySplit) {  // KeySplitConfig exists only with the key split
      return static_cast<size_t>(std::max(policies, Layout<T, D, KeySplitConfig<D>>::kSmemBytes));
    }
    return static_cast<size_t>(policies);
  }
};

}  // namespace sdpa_persistent

#include "sdpa_persistent_plans.cuh"
