// sdpa_persistent_plans.cuh -- the dispatch of sdpa_persistent_split.cuh as launch plans: which
// branch (config) a problem takes, every branch the build can take, and sdpa_forward, which launches
// the plan it chose. Included at the end of sdpa_persistent_split.cuh (its configs and predicates).
#pragma once

#include <string>

#include "sdpa_launch_plan.cuh"

namespace {

// The branches of the dispatch, each one config: the short policy's key split or cluster split; the
// few-items launch (s12) with or without turns; the long policy's three warpgroups in turns (s18), two
// in turns, two side by side, or the build's first choice (three at head_dim 64).
enum class Branch : int { kKeySplit, kClusterSplit, kFewLongTurns, kFewLong, kThreeTurns, kTurns, kTwoWgs, kThreeWgs };
constexpr const char* kBranchNames[] = {"short.key_split", "short.cluster_split", "few_long.turns", "few_long",
                                        "long.three_turns", "long.turns", "long.two_wgs", "long.three_wgs"};

struct Plan {
  Branch branch = Branch::kTwoWgs;
  bool multicast = false;  // turns at head_dim 128 as K/V multicast clusters (s14)
  int splits = 1;          // CTAs per item (the short policy's cluster split)
};

// A turns branch, as K/V multicast where the build has it and the problem's groups pair up.
template <int D>
inline Plan turns_plan(Branch branch, const SdpaProblem& p) {
  constexpr int kCtas = 2;  // sdpa_warpspec::KvMulticast's
  return Plan{branch, KV_MULTICAST && D == 128 && (p.heads / p.kv_heads) % kCtas == 0, 1};
}

template <typename T, int D>
inline Plan choose_plan(const SdpaProblem& p, const SdpaDevice& device) {
  const int sms = device.sms;
  const Policy policy = pick_policy<D>(p, sms);
  if constexpr (kKeySplit && SHORT_POLICY_ONE_WAVE) {
    if (policy == kFewLong) {
      if constexpr (TURNS_PAST_MAX_SEQ) {
        if (turns_allowed<D>(p)) return turns_plan<D>(Branch::kFewLongTurns, p);
      }
      return Plan{Branch::kFewLong};
    }
  }
  if (policy == kLong) {
    const bool turns = turns_allowed<D>(p);
    if constexpr (kThreeTurnsByModel && D == 64) {
      if (turns && three_turns_pay<T>(p, device)) return Plan{Branch::kThreeTurns};
    }
    // Up to PINGPONG_MAX_SEQ keys the turns come first (they beat three warpgroups there, its trials).
    if constexpr (kShortPingpong) {
      if (turns && sdpa_warpspec::kv_len(p) <= PINGPONG_MAX_SEQ) return turns_plan<D>(Branch::kTurns, p);
    }
    constexpr bool two_wgs_by_build = kLongConsumerWGs<D> == 2;
    const bool two_wgs = two_wgs_by_build || (D == 64 && CONSUMER_WGS_D64 == 0 && !wgs3_pays_off<D>(p, sms));
    if constexpr (kShortPingpong && TURNS_PAST_MAX_SEQ) {
      if (two_wgs && turns) return turns_plan<D>(Branch::kTurns, p);
    }
    return Plan{two_wgs ? Branch::kTwoWgs : Branch::kThreeWgs};
  }
  if constexpr (kKeySplit) return Plan{Branch::kKeySplit};
  return Plan{Branch::kClusterSplit, false, SPLITS > 0 ? SPLITS : auto_splits(p, sms)};
}

template <class Cfg>
struct ConfigTag {
  using type = Cfg;
};
// fn(ConfigTag<Cfg>) for the plan's config; `none` for a branch this build does not compile. The
// `if constexpr` guards instantiate exactly the configs the build can launch.
template <int D, class R, class Fn>
inline R with_config(const Plan& plan, R none, Fn&& fn) {
  using namespace sdpa_warpspec;
  switch (plan.branch) {
    case Branch::kKeySplit:
      if constexpr (kKeySplit) return fn(ConfigTag<KeySplitConfig<D>>{});
      break;
    case Branch::kClusterSplit:
      return fn(ConfigTag<ShortConfig>{});
    case Branch::kFewLongTurns:
      if constexpr (kKeySplit && SHORT_POLICY_ONE_WAVE && TURNS_PAST_MAX_SEQ) {
        if constexpr (KV_MULTICAST && D == 128) {
          if (plan.multicast) return fn(ConfigTag<KvMulticast<Unpaired<LongPingpongConfig<D>>>>{});
        }
        return fn(ConfigTag<Unpaired<LongPingpongConfig<D>>>{});
      }
      break;
    case Branch::kFewLong:
      if constexpr (kKeySplit && SHORT_POLICY_ONE_WAVE) return fn(ConfigTag<Unpaired<LongConfig2<D>>>{});
      break;
    case Branch::kThreeTurns:
      if constexpr (kThreeTurnsByModel && D == 64) return fn(ConfigTag<ThreeTurnsConfig<D>>{});
      break;
    case Branch::kTurns:
      if constexpr (kShortPingpong) {
        if constexpr (KV_MULTICAST && D == 128) {
          if (plan.multicast) return fn(ConfigTag<KvMulticast<LongPingpongConfig<D>>>{});
        }
        return fn(ConfigTag<LongPingpongConfig<D>>{});
      }
      break;
    case Branch::kTwoWgs:
      return fn(ConfigTag<LongConfig2<D>>{});
    case Branch::kThreeWgs:
      return fn(ConfigTag<LongConfig<D>>{});
  }
  return none;
}

// Every plan the dispatch above can reach at head_dim D, causal or not: fn(plan) once for each. It
// follows choose_plan's branches and the build-time switches they read; what a problem can never reach
// (two warpgroups side by side where every two-warpgroup launch takes turns, three where D = 128, three
// warpgroups in turns on a causal launch) is left out.
template <int D, class Fn>
inline void for_each_plan(bool causal, Fn&& fn) {
  const bool turns = kShortPingpong && !(D == 128 && !causal);  // turns_allowed<D>
  const bool multicast = KV_MULTICAST && D == 128 && turns;
  if (kKeySplit) fn(Plan{Branch::kKeySplit});
  if (!kKeySplit)
    for (int splits = 1; splits <= sdpa_warpspec::kMaxClusterSplits; splits *= 2)
      if (SPLITS == splits || (SPLITS == 0 && (splits == 1 || sdpa_warpspec::Layout<__half, D, ShortConfig>::kCanSplit)))
        fn(Plan{Branch::kClusterSplit, false, splits});
  if (kKeySplit && SHORT_POLICY_ONE_WAVE) {
    const bool few_turns = TURNS_PAST_MAX_SEQ && turns;
    fn(Plan{few_turns ? Branch::kFewLongTurns : Branch::kFewLong});
    if (few_turns && multicast) fn(Plan{Branch::kFewLongTurns, true});
  }
  if (kThreeTurnsByModel && D == 64 && !causal) fn(Plan{Branch::kThreeTurns});
  if (turns) {
    fn(Plan{Branch::kTurns});
    if (multicast) fn(Plan{Branch::kTurns, true});
  }
  const bool two_wgs_possible = kLongConsumerWGs<D> == 2 || (D == 64 && CONSUMER_WGS_D64 == 0);
  if (two_wgs_possible && !(kShortPingpong && TURNS_PAST_MAX_SEQ && turns)) fn(Plan{Branch::kTwoWgs});
  if (kLongConsumerWGs<D> == 3) fn(Plan{Branch::kThreeWgs});
}

// The plan's line for a problem whose schedule is `schedule`.
template <int D>
inline std::string plan_line(const Plan& plan, bool causal, const sdpa_warpspec::Schedule& schedule) {
  const char* branch = kBranchNames[static_cast<int>(plan.branch)];
  return with_config<D>(plan, std::string("unbuilt ") + branch, [&](auto tag) {
    return sdpa_warpspec::plan_text<D, typename decltype(tag)::type>(causal, branch, plan.splits, schedule);
  });
}

// The launch plan exports' view of this stage (SDPA_EXPORT_LAUNCH_PLANS).
struct PersistentPlans {
  struct Last {  // kept as numbers: sdpa_forward formats nothing
    int head_dim = 0;
    bool causal = false;
    Plan plan;
    sdpa_warpspec::Schedule schedule;
  };
  static Last& last_launch() {
    thread_local Last last;
    return last;
  }
  template <typename T, int D>
  static sdpa_warpspec::Schedule schedule_of(const Plan& plan, const SdpaProblem& p, const SdpaDevice& device) {
    return with_config<D>(plan, sdpa_warpspec::Schedule{}, [&](auto tag) {
      return sdpa_warpspec::schedule_of<T, D, typename decltype(tag)::type>(p, device);
    });
  }
  static std::string describe(const SdpaProblem& problem, const SdpaDevice& device) {
    std::string text;
    sdpa_dispatch(problem, [&](auto tag, auto hd) {
      using T = typename decltype(tag)::type;
      constexpr int D = decltype(hd)::value;
      const Plan plan = choose_plan<T, D>(problem, device);
      text = plan_line<D>(plan, problem.causal != 0, schedule_of<T, D>(plan, problem, device));
      return cudaSuccess;
    });
    return text;
  }
  static std::string declared() {
    std::string lines;
    const auto add = [&](auto hd, bool causal) {
      constexpr int D = decltype(hd)::value;
      for_each_plan<D>(causal, [&](const Plan& plan) {
        with_config<D>(plan, 0, [&](auto tag) {
          sdpa_warpspec::for_each_schedule<typename decltype(tag)::type>(causal, [&](const auto& schedule) {
            lines += plan_line<D>(plan, causal, schedule) + "\n";
          });
          return 0;
        });
      });
    };
    for (const bool causal : {false, true}) {
      add(SdpaHeadDim<64>{}, causal);
      add(SdpaHeadDim<128>{}, causal);
    }
    return lines;
  }
  static std::string last() {
    const Last& l = last_launch();
    if (l.head_dim == 64) return plan_line<64>(l.plan, l.causal, l.schedule);
    if (l.head_dim == 128) return plan_line<128>(l.plan, l.causal, l.schedule);
    return "";
  }
};

}  // namespace

extern "C" cudaError_t sdpa_forward(const SdpaProblem* problem, cudaStream_t stream) {
  return sdpa_warpspec::forward(problem, [&](auto tag, auto hd) {
    using T = typename decltype(tag)::type;
    constexpr int D = decltype(hd)::value;
    const SdpaDevice device = sdpa_warpspec::this_device();
    if (device.sms <= 0) return cudaErrorNoDevice;
    const Plan plan = choose_plan<T, D>(*problem, device);
    return with_config<D>(plan, cudaErrorInvalidValue, [&](auto config) {
      using Cfg = typename decltype(config)::type;
      const sdpa_warpspec::Schedule schedule = sdpa_warpspec::schedule_of<T, D, Cfg>(*problem, device);
      PersistentPlans::last_launch() = PersistentPlans::Last{D, problem->causal != 0, plan, schedule};
      return sdpa_warpspec::launch<T, D, Cfg>(*problem, plan.splits, schedule, stream);
    });
  });
}

SDPA_EXPORT_LAUNCH_PLANS(PersistentPlans)
