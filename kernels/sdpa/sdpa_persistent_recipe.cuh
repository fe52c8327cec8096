// sdpa_persistent_recipe.cuh -- what a persistent stage (s8 and above) is made of: Recipe, the
// composition s8's trials chose, and the parts the stages above it add, one type each. A stage file
// names its composition, e.g.
//   using S13 = Compose<Recipe, QRing, OneWaveShort, TurnsPastMaxSeq>;
// and sdpa_persistent_split.cuh builds its configs and its dispatch from it. A part changes the
// recipe members it names and nothing else; a new policy is one more part and a stage naming it.
#pragma once

#include <string>

#include "sdpa_warpspec_config.cuh"

namespace sdpa_persistent {

using sdpa_warpspec::Pdl;
using sdpa_warpspec::SoftmaxOrder;

// Which policy serves a problem: by its shape, or one pinned (a sanitizer or a notebook's build).
enum class Policy : int { kByShape = 0, kLong = 1, kShort = 2 };

struct Recipe {
  // The kernel body's policies (sdpa_warpspec::PlainBody): programmatic dependent launch with the
  // trigger before the epilogue, and O rescaled at head_dim 128 only when a row's max grows by more
  // than 2^8 (s8's trials).
  struct Body : sdpa_warpspec::PlainBody {
    static constexpr Pdl kPdl = Pdl::kLateTrigger;
    static constexpr int kRescaleThresholdD128 = 8;
  };
  // The long policy's tiles, rings and register split (s6's): 128 * (24 + 2 * 240) = 64512 <= 65536.
  static constexpr int kBlockN64 = 128, kBlockN128 = 128;
  static constexpr int kStages64 = 3, kStages128 = 2;
  static constexpr int kProducerRegs = 24, kConsumerRegs = 240;
  // Long policy at head_dim 64: 2 or 3 consumer warpgroups side by side, or 0: by the wave count.
  static constexpr int kLongWgs64 = 0;
  // The warpgroups take turns on sequences up to this many keys, dense head_dim 128 excepted (0: never).
  static constexpr int kTurnsMaxSeq = 2048;
  // Past kTurnsMaxSeq too, every two-warpgroup long launch takes turns (s13).
  static constexpr bool kTurnsPastMaxSeq = false;
  // The warpgroups that take turns at head_dim 64: 2, 3, or 0: three where the host's model says so (s18).
  static constexpr int kTurnsWgs64 = 2;
  static constexpr int kQBuffers = 1;              // Q buffers per persistent block (2: s11)
  static constexpr bool kDeferEpilogue = false;    // O stored under the next item's first Q.K^T (s15)
  static constexpr bool kKvMulticast = false;      // head_dim 128 turns as K/V multicast pairs (s14)
  // Short policy: two consumer warpgroups share each 64-row tile's keys (1: one warpgroup per tile),
  // on tiles of this many keys; without the key split, CTAs per cluster sharing a tile's keys (1, 2, 4
  // or 0: by the SM count).
  static constexpr int kKeySplitWgs = 2;
  static constexpr int kKeySplitBlockN = 128;
  static constexpr int kSplits = 1;
  // The key split only while all its blocks fit one wave, and fewer long items than SMs as one item
  // per block (s12).
  static constexpr bool kShortOneWave = false;
  static constexpr Policy kForcePolicy = Policy::kByShape;
};

// s11: two Q buffers, the next item's Q loading under this item's key tiles.
template <class R>
struct QRing : R {
  static constexpr int kQBuffers = 2;
};
// s12: the short policy's key split only while its blocks fit one wave; fewer long items than SMs
// run one per block.
template <class R>
struct OneWaveShort : R {
  static constexpr bool kShortOneWave = true;
};
// s13: the two-warpgroup long launches take turns past kTurnsMaxSeq keys too.
template <class R>
struct TurnsPastMaxSeq : R {
  static constexpr bool kTurnsPastMaxSeq = true;
};
// s14: head_dim-128 turns of grouped-query problems as clusters of two query heads sharing K/V tiles.
template <class R>
struct KvMulticastTurns : R {
  static constexpr bool kKvMulticast = true;
};
// s15: a two-warpgroup item's O stored under the next item's first Q.K^T.
template <class R>
struct DeferredEpilogue : R {
  static_assert(R::kQBuffers == 2, "a deferred epilogue stages O in its item's Q buffer: compose QRing first");
  static constexpr bool kDeferEpilogue = true;
};
// s16: causal launches walk the longest-first snake where the host's model says it pays.
template <class R>
struct CausalSnake : R {
  struct Body : R::Body {
    static constexpr bool kCausalSnake = true;
  };
};
// s17: FlashAttention-4's softmax order at head_dim 128.
template <class R>
struct InterleavedSoftmaxD128 : R {
  struct Body : R::Body {
    static constexpr SoftmaxOrder kSoftmaxOrder = SoftmaxOrder::kInterleavedD128;
  };
};
// s18: three warpgroups take the turns at head_dim 64 where the host's model says they pay.
template <class R>
struct ThreeTurnsByModel : R {
  static constexpr int kTurnsWgs64 = 0;
};

// Recipe with the parts applied in order, each on top of the ones before it.
template <class R, template <class> class... Parts>
struct ComposeOf {
  using type = R;
};
template <class R, template <class> class Part, template <class> class... Rest>
struct ComposeOf<R, Part, Rest...> {
  using type = typename ComposeOf<Part<R>, Rest...>::type;
};
template <class R, template <class> class... Parts>
using Compose = typename ComposeOf<R, Parts...>::type;

// One line naming a stage's recipe, member by member (its sdpa_stage_config).
template <class R>
inline std::string recipe_text(const char* stage) {
  using Body = typename R::Body;
  std::string text = stage;
  const auto add = [&](const char* name, long long value) {
    text += std::string(" ") + name + "=" + std::to_string(value);
  };
  add("block_n_d64", R::kBlockN64), add("block_n_d128", R::kBlockN128);
  add("stages_d64", R::kStages64), add("stages_d128", R::kStages128);
  add("producer_regs", R::kProducerRegs), add("consumer_regs", R::kConsumerRegs);
  add("long_wgs_d64", R::kLongWgs64), add("turns_max_seq", R::kTurnsMaxSeq);
  add("turns_past_max_seq", R::kTurnsPastMaxSeq), add("turns_wgs_d64", R::kTurnsWgs64);
  add("q_buffers", R::kQBuffers), add("defer_epilogue", R::kDeferEpilogue), add("kv_multicast", R::kKvMulticast);
  add("key_split_wgs", R::kKeySplitWgs), add("key_split_block_n", R::kKeySplitBlockN), add("splits", R::kSplits);
  add("short_one_wave", R::kShortOneWave), add("force_policy", static_cast<int>(R::kForcePolicy));
  add("pdl", static_cast<int>(Body::kPdl)), add("rescale_threshold_d128", Body::kRescaleThresholdD128);
  add("causal_snake", Body::kCausalSnake), add("softmax_order", static_cast<int>(Body::kSoftmaxOrder));
  return text;
}

}  // namespace sdpa_persistent
