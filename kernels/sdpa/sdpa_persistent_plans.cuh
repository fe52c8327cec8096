// sdpa_persistent_plans.cuh -- the dispatch of PersistentSplit<R> (sdpa_persistent_split.cuh) as
// launch plans: which branch (config) a problem takes, every branch the recipe can take, the launch
// plan exports' view of them, and SDPA_PERSISTENT_STAGE, a stage's exports (sdpa_forward launches the
// plan it chose).
#pragma once

#include <string>

#include "sdpa_launch_plan.cuh"

namespace sdpa_persistent {

// The branches of the dispatch, each one config: the short policy's key split or cluster split; the
// few-items launch (s12) with or without turns; the long policy's three warpgroups in turns (s18), two
// in turns, two side by side, or the recipe's first choice (three at head_dim 64).
enum class Branch : int { kKeySplit, kClusterSplit, kFewLongTurns, kFewLong, kThreeTurns, kTurns, kTwoWgs, kThreeWgs };
constexpr const char* kBranchNames[] = {"short.key_split", "short.cluster_split", "few_long.turns", "few_long",
                                        "long.three_turns", "long.turns", "long.two_wgs", "long.three_wgs"};

struct Plan {
  Branch branch = Branch::kTwoWgs;
  bool multicast = false;  // turns at head_dim 128 as K/V multicast clusters (s14)
  int splits = 1;          // CTAs per item (the short policy's cluster split)
};

template <class Cfg>
struct ConfigTag {
  using type = Cfg;
};

template <class R>
struct PersistentDispatch : PersistentSplit<R> {
  using S = PersistentSplit<R>;
  template <int D>
  using LongConfig = typename S::template LongConfig<D>;
  template <int D>
  using LongConfig2 = typename S::template LongConfig2<D>;
  template <int D>
  using LongPingpongConfig = typename S::template LongPingpongConfig<D>;
  template <int D>
  using ThreeTurnsConfig = typename S::template ThreeTurnsConfig<D>;
  template <int D>
  using KeySplitConfig = typename S::template KeySplitConfig<D>;
  using ShortConfig = typename S::ShortConfig;
  template <class C>
  using Unpaired = sdpa_warpspec::Unpaired<C>;
  template <class C>
  using KvMulticast = sdpa_warpspec::KvMulticast<C>;

  // A turns branch, as K/V multicast where the recipe has it and the problem's groups pair up.
  template <int D>
  static Plan turns_plan(Branch branch, const SdpaProblem& p) {
    constexpr int kCtas = 2;  // sdpa_warpspec::KvMulticast's
    return Plan{branch, R::kKvMulticast && D == 128 && (p.heads / p.kv_heads) % kCtas == 0, 1};
  }

  template <typename T, int D>
  static Plan choose_plan(const SdpaProblem& p, const SdpaDevice& device) {
    const int sms = device.sms;
    if (!S::template use_long_policy<D>(p, sms)) {
      if constexpr (S::kKeySplit) return Plan{Branch::kKeySplit};
      return Plan{Branch::kClusterSplit, false, R::kSplits > 0 ? R::kSplits : S::auto_splits(p, sms)};
    }
    const bool turns = S::template turns_allowed<D>(p);
    if constexpr (S::kFewLong) {  // fewer long items than SMs: one per block, no causal pairs
      if (sdpa_ceil_div(p.seq_len, LongConfig2<D>::kBlockM) * p.heads * p.batch < sms) {
        if constexpr (R::kTurnsPastMaxSeq) {
          if (turns) return turns_plan<D>(Branch::kFewLongTurns, p);
        }
        return Plan{Branch::kFewLong};
      }
    }
    if constexpr (S::kThreeTurnsByModel && D == 64) {
      if (turns && S::template three_turns_pay<T>(p, device)) return Plan{Branch::kThreeTurns};
    }
    // Up to kTurnsMaxSeq keys the turns come first (they beat three warpgroups there, its trials).
    if constexpr (S::kTurns) {
      if (turns && sdpa_warpspec::kv_len(p) <= R::kTurnsMaxSeq) return turns_plan<D>(Branch::kTurns, p);
    }
    constexpr bool two_wgs_by_recipe = S::template kLongConsumerWGs<D> == 2;
    const bool two_wgs = two_wgs_by_recipe || (D == 64 && R::kLongWgs64 == 0 && !S::template wgs3_pays_off<D>(p, sms));
    if constexpr (S::kTurns && R::kTurnsPastMaxSeq) {
      if (two_wgs && turns) return turns_plan<D>(Branch::kTurns, p);
    }
    return Plan{two_wgs ? Branch::kTwoWgs : Branch::kThreeWgs};
  }

  // fn(ConfigTag<Cfg>) for the plan's config; `none` for a branch this recipe does not compile. The
  // `if constexpr` guards instantiate exactly the configs the recipe can launch.
  template <int D, class Ret, class Fn>
  static Ret with_config(const Plan& plan, Ret none, Fn&& fn) {
    switch (plan.branch) {
      case Branch::kKeySplit:
        if constexpr (S::kKeySplit) return fn(ConfigTag<KeySplitConfig<D>>{});
        break;
      case Branch::kClusterSplit:
        return fn(ConfigTag<ShortConfig>{});
      case Branch::kFewLongTurns:
        if constexpr (S::kFewLong && R::kTurnsPastMaxSeq) {
          if constexpr (R::kKvMulticast && D == 128) {
            if (plan.multicast) return fn(ConfigTag<KvMulticast<Unpaired<LongPingpongConfig<D>>>>{});
          }
          return fn(ConfigTag<Unpaired<LongPingpongConfig<D>>>{});
        }
        break;
      case Branch::kFewLong:
        if constexpr (S::kFewLong) return fn(ConfigTag<Unpaired<LongConfig2<D>>>{});
        break;
      case Branch::kThreeTurns:
        if constexpr (S::kThreeTurnsByModel && D == 64) return fn(ConfigTag<ThreeTurnsConfig<D>>{});
        break;
      case Branch::kTurns:
        if constexpr (S::kTurns) {
          if constexpr (R::kKvMulticast && D == 128) {
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
  // follows choose_plan's branches and the recipe members they read; what a problem can never reach
  // (two warpgroups side by side where every two-warpgroup launch takes turns, three where D = 128,
  // three warpgroups in turns on a causal launch) is left out.
  template <int D, class Fn>
  static void for_each_plan(bool causal, Fn&& fn) {
    const bool turns = S::kTurns && !(D == 128 && !causal);  // turns_allowed<D>
    const bool multicast = R::kKvMulticast && D == 128 && turns;
    if (S::kKeySplit) fn(Plan{Branch::kKeySplit});
    if (!S::kKeySplit)
      for (int splits = 1; splits <= sdpa_warpspec::kMaxClusterSplits; splits *= 2)
        if (R::kSplits == splits ||
            (R::kSplits == 0 && (splits == 1 || sdpa_warpspec::Layout<__half, D, ShortConfig>::kCanSplit)))
          fn(Plan{Branch::kClusterSplit, false, splits});
    if (S::kFewLong) {
      const bool few_turns = R::kTurnsPastMaxSeq && turns;
      fn(Plan{few_turns ? Branch::kFewLongTurns : Branch::kFewLong});
      if (few_turns && multicast) fn(Plan{Branch::kFewLongTurns, true});
    }
    if (S::kThreeTurnsByModel && D == 64 && !causal) fn(Plan{Branch::kThreeTurns});
    if (turns) {
      fn(Plan{Branch::kTurns});
      if (multicast) fn(Plan{Branch::kTurns, true});
    }
    const bool two_wgs_possible = S::template kLongConsumerWGs<D> == 2 || (D == 64 && R::kLongWgs64 == 0);
    if (two_wgs_possible && !(S::kTurns && R::kTurnsPastMaxSeq && turns)) fn(Plan{Branch::kTwoWgs});
    if (S::template kLongConsumerWGs<D> == 3) fn(Plan{Branch::kThreeWgs});
  }

  // The plan's line for a problem whose schedule is `schedule`.
  template <int D>
  static std::string plan_line(const Plan& plan, bool causal, const sdpa_warpspec::Schedule& schedule) {
    const char* branch = kBranchNames[static_cast<int>(plan.branch)];
    return with_config<D>(plan, std::string("unbuilt ") + branch, [&](auto tag) {
      return sdpa_warpspec::plan_text<D, typename decltype(tag)::type>(causal, branch, plan.splits, schedule);
    });
  }
};

// The launch plan exports' view of a recipe's stage (SDPA_EXPORT_LAUNCH_PLANS), and its launch.
template <class R>
struct PersistentPlans {
  using Dispatch = PersistentDispatch<R>;
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
    return Dispatch::template with_config<D>(plan, sdpa_warpspec::Schedule{}, [&](auto tag) {
      return sdpa_warpspec::schedule_of<T, D, typename decltype(tag)::type>(p, device);
    });
  }
  static std::string describe(const SdpaProblem& problem, const SdpaDevice& device) {
    std::string text;
    sdpa_dispatch(problem, [&](auto tag, auto hd) {
      using T = typename decltype(tag)::type;
      constexpr int D = decltype(hd)::value;
      const Plan plan = Dispatch::template choose_plan<T, D>(problem, device);
      text = Dispatch::template plan_line<D>(plan, problem.causal != 0, schedule_of<T, D>(plan, problem, device));
      return cudaSuccess;
    });
    return text;
  }
  static std::string declared() {
    std::string lines;
    const auto add = [&](auto hd, bool causal) {
      constexpr int D = decltype(hd)::value;
      Dispatch::template for_each_plan<D>(causal, [&](const Plan& plan) {
        Dispatch::template with_config<D>(plan, 0, [&](auto tag) {
          sdpa_warpspec::for_each_schedule<typename decltype(tag)::type>(causal, [&](const auto& schedule) {
            lines += Dispatch::template plan_line<D>(plan, causal, schedule) + "\n";
          });
          return 0;
        });
      });
    };
    sdpa_warpspec::for_each_declared_instance(add);
    return lines;
  }
  static std::string last() {
    const Last& l = last_launch();
    if (l.head_dim == 64) return Dispatch::template plan_line<64>(l.plan, l.causal, l.schedule);
    if (l.head_dim == 128) return Dispatch::template plan_line<128>(l.plan, l.causal, l.schedule);
    return "";
  }
  // sdpa_forward: choose the plan, make its schedule, launch it.
  static cudaError_t forward(const SdpaProblem* problem, cudaStream_t stream) {
    return sdpa_warpspec::forward(problem, [&](auto tag, auto hd) {
      using T = typename decltype(tag)::type;
      constexpr int D = decltype(hd)::value;
      const SdpaDevice device = sdpa_warpspec::this_device();
      if (device.sms <= 0) return cudaErrorNoDevice;
      const Plan plan = Dispatch::template choose_plan<T, D>(*problem, device);
      return Dispatch::template with_config<D>(plan, cudaErrorInvalidValue, [&](auto config) {
        using Cfg = typename decltype(config)::type;
        const sdpa_warpspec::Schedule schedule = sdpa_warpspec::schedule_of<T, D, Cfg>(*problem, device);
        last_launch() = Last{D, problem->causal != 0, plan, schedule};
        return sdpa_warpspec::launch<T, D, Cfg>(*problem, plan.splits, schedule, stream);
      });
    });
  }
  static int64_t smem_bytes(int32_t head_dim, int32_t dtype) {
    return sdpa_stage_smem_bytes<PersistentSplit<R>>(head_dim, dtype);
  }
};

}  // namespace sdpa_persistent

// A persistent stage's exports: ID its stage id, RECIPE its composition (sdpa_persistent_recipe.cuh).
#define SDPA_PERSISTENT_STAGE(ID, RECIPE)                                                        \
  extern "C" cudaError_t sdpa_forward(const SdpaProblem* problem, cudaStream_t stream) {         \
    return sdpa_persistent::PersistentPlans<RECIPE>::forward(problem, stream);                   \
  }                                                                                              \
  extern "C" const char* sdpa_stage_config() {                                                   \
    static const std::string text = sdpa_persistent::recipe_text<RECIPE>(ID);                    \
    return text.c_str();                                                                         \
  }                                                                                              \
  extern "C" int64_t sdpa_dynamic_shared_memory_bytes(int32_t head_dim, int32_t dtype) {         \
    return sdpa_persistent::PersistentPlans<RECIPE>::smem_bytes(head_dim, dtype);                \
  }                                                                                              \
  SDPA_EXPORT_LAUNCH_PLANS(sdpa_persistent::PersistentPlans<RECIPE>)                             \
  SDPA_EXPORT_PROTOCOL_REPORT()

// A stage composed of the Recipe and parts, named as sdpa_persistent_recipe.cuh names them, applied in
// order: SDPA_COMPOSED_STAGE(s13_turns, QRing, OneWaveShort, TurnsPastMaxSeq). Its composition is the
// type sdpa_persistent::composed::<ID>, which names its kernels.
#define SDPA_COMPOSED_STAGE(ID, ...)                                                               \
  namespace sdpa_persistent::composed {                                                            \
  using ID = Compose<Recipe, ##__VA_ARGS__>;                                                       \
  }                                                                                                \
  SDPA_PERSISTENT_STAGE(#ID, sdpa_persistent::composed::ID)
