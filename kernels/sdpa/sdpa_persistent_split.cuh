// sdpa_persistent_split.cuh -- s8's two policies (a persistent longest-first grid for
// long sequences, a key split inside each short-sequence block) as one body that s8 and
// the stages above it compile: s8_persistent_split.cu says what they are and why. A stage
// defines PERSISTENT_SPLIT_STAGE (its id, for sdpa_stage_config) and may define
// SDPA_GENERAL_PROBLEM (sdpa_api.h: grouped-query attention, kv_seq_len != seq_len) first.
#pragma once
#ifndef PERSISTENT_SPLIT_STAGE
#error "define PERSISTENT_SPLIT_STAGE (the stage id) before including sdpa_persistent_split.cuh"
#endif

#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "sdpa_api.h"
#include "sdpa_export.cuh"
// s8 picks two or three consumer warpgroups at head_dim 64 by the wave count (0, its trials);
// s6/s7 keep the shared default of 2
#ifndef CONSUMER_WGS_D64
#define CONSUMER_WGS_D64 0
#endif
// s8 keeps a warp's running max until a row's tile max grows by more than 2^8 at
// head_dim 128 (its trials, WS_RESCALE_THRESHOLD_D128); head_dim 64 rescales every tile
#ifndef WS_RESCALE_THRESHOLD_D128
#define WS_RESCALE_THRESHOLD_D128 8
#endif
// s8 launches with programmatic dependent launch, the trigger before the epilogue (its trials, WS_PDL)
#ifndef WS_PDL
#define WS_PDL 2
#endif
#include "sdpa_warpspec.cuh"
#include "sdpa_warpspec_knobs.cuh"

#ifndef SPLITS
#define SPLITS 1
#endif
#ifndef FORCE_POLICY
#define FORCE_POLICY 0
#endif
// The long policy's pingpong instance (two consumer warpgroups) for sequences up to this length,
// but dense head_dim 128 (0: off; its trials)
#ifndef PINGPONG_MAX_SEQ
#define PINGPONG_MAX_SEQ 2048
#endif
// s8 shares each short-policy query tile between two consumer warpgroups (its trials, KEY_SPLIT_WGS)
#ifndef KEY_SPLIT_WGS
#define KEY_SPLIT_WGS 2
#endif
#ifndef KEY_SPLIT_BLOCK_N
#define KEY_SPLIT_BLOCK_N 128
#endif

namespace {

using sdpa_warpspec::Config;

constexpr int kProducerRegs = PRODUCER_REGS;
// Long: one block per SM, 3 warpgroups: 128 * (24 + 2 * 240) = 64512 <= 65536;
// at head_dim 64 optionally 4 warpgroups (CONSUMER_WGS_D64=3, no pingpong): 128 * (24 + 3 * 160).
// 0: 2 or 3 per problem, by wgs3_pays_off below (both instantiated).
static_assert(CONSUMER_WGS_D64 >= 0 && CONSUMER_WGS_D64 <= 3 && CONSUMER_WGS_D64 != 1,
              "CONSUMER_WGS_D64: 2 (128 rows), 3 (192 rows) or 0 (by the wave count)");
constexpr int kLongBlocksPerSm = 1;
template <int D>
constexpr int kLongBlockN = D == 64 ? BLOCK_N_D64 : BLOCK_N_D128;
// 1 (s12): the short policy's key split only while all its blocks fit one wave (use_long_policy);
// 0: whenever the long policy's items do not fill the SMs
#ifndef SHORT_POLICY_ONE_WAVE
#define SHORT_POLICY_ONE_WAVE 0
#endif
// Q buffers of the long policy: 1, or 2 (s11: the next item's Q loads under this item's tiles)
#ifndef Q_STAGES
#define Q_STAGES 1
#endif
static_assert(Q_STAGES == 1 || Q_STAGES == 2, "Q_STAGES: 1 or 2 Q buffers per persistent block");
template <class C>
using WithQStages = std::conditional_t<Q_STAGES == 2, sdpa_warpspec::QRing<C>, C>;
// 1 (s15): the long policy's two-warpgroup items store O under the next item's first Q.K^T
// (DeferEpilogue); 0: each item's epilogue between its last P.V and the next item.
#ifndef DEFER_EPILOGUE
#define DEFER_EPILOGUE 0
#endif
static_assert(DEFER_EPILOGUE == 0 || (DEFER_EPILOGUE == 1 && Q_STAGES == 2),
              "DEFER_EPILOGUE: 0 (off) or 1 (needs Q_STAGES=2: O is staged in its item's Q buffer)");
template <class C>
using WithDeferredEpilogue = std::conditional_t<DEFER_EPILOGUE == 1 && C::kConsumerWGs == 2, sdpa_warpspec::DeferEpilogue<C>, C>;
template <int D, int WGs, int BlockN = kLongBlockN<D>, bool Pingpong = false>
using LongConfigOf = WithDeferredEpilogue<WithQStages<Config<WGs, BlockN, D == 64 ? STAGES_D64 : STAGES_D128,
                            /*pingpong=*/Pingpong, /*persistent=*/true, kLongBlocksPerSm, kProducerRegs,
                            sdpa_warpspec::fit_consumer_regs(WGs, kProducerRegs, kLongBlocksPerSm, CONSUMER_REGS)>>>;
// The build's first choice at each head dim (head_dim 128 keeps two: its O alone is 64 registers).
template <int D>
constexpr int kLongConsumerWGs = D == 64 && CONSUMER_WGS_D64 != 2 ? 3 : 2;
template <int D>
using LongConfig = LongConfigOf<D, kLongConsumerWGs<D>>;
template <int D>
using LongConfig2 = LongConfigOf<D, 2>;
// Up to PINGPONG_MAX_SEQ keys, the long policy's warpgroups take turns (its trials).
static_assert(PINGPONG_MAX_SEQ >= 0, "PINGPONG_MAX_SEQ: 0 (off) or the longest sequence that takes turns");
constexpr bool kShortPingpong = PINGPONG_MAX_SEQ > 0;
// The warpgroups that take the turns at head_dim 64: 2 (128-row items, 240 registers); 3 (192-row
// items, 160 registers, as FlashAttention-3's head_dim-64 kernel); 0 (s18): 3 on a non-causal launch
// where three_turns_pay below says so, else 2 (both instantiated).
#ifndef WS_TURNS_WGS_D64
#define WS_TURNS_WGS_D64 2
#endif
static_assert(WS_TURNS_WGS_D64 == 0 || WS_TURNS_WGS_D64 == 2 || WS_TURNS_WGS_D64 == 3,
              "WS_TURNS_WGS_D64: 2 or 3 warpgroups take turns, or 0 (by the model)");
template <int D>
using LongPingpongConfig = LongConfigOf<D, D == 64 && WS_TURNS_WGS_D64 == 3 ? 3 : 2, kLongBlockN<D>, /*Pingpong=*/true>;
constexpr bool kThreeTurnsByModel = WS_TURNS_WGS_D64 == 0;
template <int D>
using ThreeTurnsConfig = LongConfigOf<D, 3, kLongBlockN<D>, /*Pingpong=*/true>;
// 1 (s13): past PINGPONG_MAX_SEQ keys too, every long-policy launch that runs two warpgroups takes
// turns (but dense head_dim 128), the few-items launch included; 0: turns up to PINGPONG_MAX_SEQ only.
#ifndef TURNS_PAST_MAX_SEQ
#define TURNS_PAST_MAX_SEQ 0
#endif
static_assert(TURNS_PAST_MAX_SEQ == 0 || PINGPONG_MAX_SEQ > 0, "TURNS_PAST_MAX_SEQ: needs the pingpong instance");
// 1 (s14): at head_dim 128, grouped-query launches whose two warpgroups take turns run as clusters of
// two query heads of one K/V group that share each K/V tile by TMA multicast (KvMulticast); 0: off.
#ifndef KV_MULTICAST
#define KV_MULTICAST 0
#endif
static_assert(KV_MULTICAST == 0 || KV_MULTICAST == 1, "KV_MULTICAST: 0 (off) or 1 (pairs of query heads)");
// Whether two warpgroups of a long-policy launch may take turns: never at dense head_dim 128 (there the
// turns measured slower, s8's trials). Up to PINGPONG_MAX_SEQ keys they do (before three warpgroups
// are considered); past it only with TURNS_PAST_MAX_SEQ.
template <int D>
inline bool turns_allowed(const SdpaProblem& p) {
  return kShortPingpong && !(D == 128 && !p.causal);
}

// Three consumer warpgroups did each 192-row item 1.08x faster per row than two did 128-row ones
// (H100, throughput mode, (4,16,4096,64): 454 vs 421 TFLOP/s), but the persistent grid pays for
// whole waves: on 132 SMs (2,8,2048,64) has 176 items of 192 rows (2 waves of 1.5x the work)
// against 256 of 128 (2 waves), and measured 0.84x with three (H200 acceptance). Compare
// waves x per-item cost (its rows), three warpgroups' rows 1.08x cheaper: 3 warpgroups when
// ceil(items3 / sms) * 192 / 1.08 < ceil(items2 / sms) * 128.
template <int D>
inline bool wgs3_pays_off(const SdpaProblem& p, int sms) {
  constexpr int gain_percent = 108;
  constexpr int rows3 = LongConfig<D>::kBlockM, rows2 = LongConfig2<D>::kBlockM;
  const int waves3 = sdpa_ceil_div(sdpa_ceil_div(p.seq_len, rows3) * p.heads * p.batch, sms);
  const int waves2 = sdpa_ceil_div(sdpa_ceil_div(p.seq_len, rows2) * p.heads * p.batch, sms);
  return waves3 * rows3 * 100 < waves2 * rows2 * gain_percent;
}
// Whether a non-causal head_dim-64 launch runs faster with three warpgroups taking turns than two:
// the busiest block of three's best plan (sdpa_warpspec_launch.cuh's plan_three_turns, its model;
// remembered per problem, as launch() reads the same plan) at least kThreeTurnsMinGain under two's
// (128-row items in stripes). The margin covers the model's error where it was measured (1-2%; the one
// launch it misses is in sdpa_warpspec_launch.cuh's comment).
constexpr double kThreeTurnsMinGain = 1.02;
template <typename T>
inline bool three_turns_pay(const SdpaProblem& p, const SdpaDevice& device) {
  if (p.causal) return false;
  const auto plan = sdpa_warpspec::cached_three_turns_plan<ThreeTurnsConfig<64>::kBlockM>(
      p, device.sms, sdpa_warpspec::kv_bytes_of<T, 64>(p), static_cast<int>(device.l2_bytes));
  return plan.two_busiest > 0 && static_cast<double>(plan.busiest) * kThreeTurnsMinGain <= static_cast<double>(plan.two_busiest);
}
// Short: two blocks per SM of 2 warpgroups: 2 * 128 * (24 + 232) = 65536.
constexpr int kShortBlockN = 128;
constexpr int kShortStages = 2;
using ShortConfig = Config<1, kShortBlockN, kShortStages, /*pingpong=*/false, /*persistent=*/false,
                           /*blocks per SM=*/2, kProducerRegs, 232>;
static_assert(SPLITS == 0 || SPLITS == 1 || SPLITS == 2 || SPLITS == 4, "SPLITS: 0 (auto), 1, 2 or 4");
// Key split (short policy): two consumer warpgroups on the same 64 rows, each
// over every other key tile. Three warpgroups no longer fit two blocks per SM
// (2 * 128 * (24 + 2 * 116) = 65536 leaves 116 registers, under the S, P and O
// fragments), so one block per SM with s6's 24/240 split; the mission's 128
// blocks fit 132 SMs in one wave either way. Each of the K and V rings holds
// 64 KiB: 4 x 128 keys at D=64, 2 at D=128 (8 and 4 with 64-key tiles); ring
// depth per warpgroup is stages / 2.
static_assert(KEY_SPLIT_WGS == 1 || KEY_SPLIT_WGS == 2, "KEY_SPLIT_WGS: 1 (off) or 2 warpgroups per query tile");
static_assert(KEY_SPLIT_WGS == 1 || SPLITS == 1, "key split and cluster split (SPLITS) are exclusive");
constexpr int kKeySplitRingBytes = 64 * 1024;
template <int D>
constexpr int kKeySplitStages = kKeySplitRingBytes / (KEY_SPLIT_BLOCK_N * D * 2);  // 2-byte elements
template <int D>
using KeySplitConfig = sdpa_warpspec::KeySplit<
    Config<KEY_SPLIT_WGS, KEY_SPLIT_BLOCK_N, kKeySplitStages<D>, /*pingpong=*/false,
           /*persistent=*/false,
           /*blocks per SM=*/1, kProducerRegs,
           sdpa_warpspec::fit_consumer_regs(KEY_SPLIT_WGS, kProducerRegs, /*min_blocks=*/1, CONSUMER_REGS)>>;
constexpr bool kKeySplit = KEY_SPLIT_WGS > 1;
static_assert(FORCE_POLICY >= 0 && FORCE_POLICY <= 2, "FORCE_POLICY: 0 by shape, 1 long, 2 short");

// FORCE_POLICY's values, and pick_policy's kFewLong.
enum Policy : int { kByShape = 0, kLong = 1, kShort = 2, kFewLong = 3 };

// Fewest splits (1, 2, 4) whose CTAs cover every SM, never more than the key tiles.
inline int auto_splits(const SdpaProblem& p, int sms) {
  const int items = sdpa_ceil_div(p.seq_len, ShortConfig::kBlockM) * p.heads * p.batch;
  const int key_tiles = sdpa_ceil_div(sdpa_warpspec::kv_len(p), kShortBlockN);
  int splits = 1;
  while (splits < sdpa_warpspec::kMaxClusterSplits && items * splits < sms && splits * 2 <= key_tiles) splits *= 2;
  return splits;
}

template <int D>
inline bool use_long_policy(const SdpaProblem& p, int sms) {
  if (FORCE_POLICY != kByShape) return FORCE_POLICY == kLong;
  // by the wave count (0), two warpgroups' 128-row items must fill the SMs; otherwise the build's own
  constexpr int rows = CONSUMER_WGS_D64 == 0 ? LongConfig2<D>::kBlockM : LongConfig<D>::kBlockM;
  const int long_items = sdpa_ceil_div(p.seq_len, rows) * p.heads * p.batch;
  if (long_items >= sms) return true;
  if constexpr (kKeySplit && SHORT_POLICY_ONE_WAVE) {
    // The key split halves each 64-row tile's chain of key tiles, but its warpgroups walk them
    // through half a ring each (one slot at head_dim 128): that pays only while every key-split
    // block runs at once. A second wave doubles the chain again, and a long chain (a prefill after
    // a cached prefix: 512 queries over 4096 keys) then runs better as fewer long-policy items.
    const int key_split_blocks = sdpa_ceil_div(p.seq_len, KeySplitConfig<D>::kBlockM) * p.heads * p.batch;
    return key_split_blocks > sms * KeySplitConfig<D>::kMinBlocks;
  }
  return false;
}

// The launch: use_long_policy's choice, and with SHORT_POLICY_ONE_WAVE (s12) a long policy of fewer
// items than SMs as kFewLong (one item per block, no causal pairs).
template <int D>
inline Policy pick_policy(const SdpaProblem& p, int sms) {
  if (!use_long_policy<D>(p, sms)) return kShort;
  if constexpr (kKeySplit && SHORT_POLICY_ONE_WAVE) {
    if (sdpa_ceil_div(p.seq_len, LongConfig2<D>::kBlockM) * p.heads * p.batch < sms) return kFewLong;
  }
  return kLong;
}

struct SmemOf {  // the largest footprint of the instances this build may launch
  template <class T, int D>
  static constexpr size_t smem_bytes() {
    using sdpa_warpspec::Layout;
    // 0 for an instance this build leaves out
    constexpr int policies = std::max({Layout<T, D, LongConfig<D>>::kSmemBytes, Layout<T, D, LongConfig2<D>>::kSmemBytes,
                                       kShortPingpong ? Layout<T, D, LongPingpongConfig<D>>::kSmemBytes : 0,
                                       kThreeTurnsByModel ? Layout<T, D, ThreeTurnsConfig<D>>::kSmemBytes : 0,
                                       Layout<T, D, ShortConfig>::kSmemBytes});
    if constexpr (kKeySplit) {  // KeySplitConfig exists only when the knob is on
      return static_cast<size_t>(std::max(policies, Layout<T, D, KeySplitConfig<D>>::kSmemBytes));
    }
    return static_cast<size_t>(policies);
  }
};

}  // namespace

#include "sdpa_persistent_plans.cuh"

extern "C" const char* sdpa_stage_config() {
  return PERSISTENT_SPLIT_STAGE " long: persistent grid=SMs, longest-first, causal tiles in pairs, BLOCK_M=128"
         " BLOCK_N_D64=" SDPA_STR(BLOCK_N_D64) " BLOCK_N_D128=" SDPA_STR(BLOCK_N_D128) " STAGES_D64=" SDPA_STR(STAGES_D64)
         " STAGES_D128=" SDPA_STR(STAGES_D128) " CONSUMER_WGS_D64=" SDPA_STR(CONSUMER_WGS_D64)
         " (3: consumer 160; 0: 2 or 3 by the wave count) PINGPONG_MAX_SEQ=" SDPA_STR(PINGPONG_MAX_SEQ)
         " WS_RESCALE_THRESHOLD_D128=" SDPA_STR(WS_RESCALE_THRESHOLD_D128) " (0: every tile)"
         "; short: BLOCK_M=64 KEY_SPLIT_WGS=" SDPA_STR(KEY_SPLIT_WGS) " KEY_SPLIT_BLOCK_N=" SDPA_STR(KEY_SPLIT_BLOCK_N)
         " SPLITS=" SDPA_STR(SPLITS) " (0=auto) FORCE_POLICY=" SDPA_STR(FORCE_POLICY)
         " WS_PDL=" SDPA_STR(WS_PDL) " (programmatic dependent launch; 2: trigger before the epilogue)"
         " Q_STAGES=" SDPA_STR(Q_STAGES) " (long policy's Q buffers) SHORT_POLICY_ONE_WAVE="
         SDPA_STR(SHORT_POLICY_ONE_WAVE) " TURNS_PAST_MAX_SEQ=" SDPA_STR(TURNS_PAST_MAX_SEQ) " KV_MULTICAST=" SDPA_STR(KV_MULTICAST)
         " DEFER_EPILOGUE=" SDPA_STR(DEFER_EPILOGUE) " WS_TURNS_WGS_D64=" SDPA_STR(WS_TURNS_WGS_D64) " (0: 2 or 3 by the model)"
         " setmaxnreg producer/consumer: long 24/240, short 24/232 (2 blocks per SM), key split 24/240";
}

extern "C" int64_t sdpa_dynamic_shared_memory_bytes(int32_t head_dim, int32_t dtype) {
  return sdpa_stage_smem_bytes<SmemOf>(head_dim, dtype);
}
