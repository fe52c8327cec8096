// sched/work_order.cuh -- which scheduler a launch of a Config takes, and the host's schedule for a
// problem. Each scheduler is one class with its host half (plan: the per-launch choices, for the
// device the launch runs on or a device model) and its device half (for_each: the items of this
// block, in order), so the two cannot drift:
//   CausalPairs  persistent causal launches (pairs, or the longest-first snake with kCausalSnake)
//   MixedTiles   three warpgroups taking turns, non-causal (192- and 128-row items)
//   Stripes      everything else (persistent stripes, or one block per item)
// A new scheduling policy is one more class here and a Config (a stage's part) that selects it.
#pragma once

#include <type_traits>

#include "causal_pairs.cuh"
#include "mixed_tiles.cuh"
#include "stripes.cuh"

namespace sdpa_warpspec {

template <class Cfg, bool kCausal>
constexpr bool kCausalPairsOf = Cfg::kPersistent && kCausal && Cfg::kCausalPairs;
template <class Cfg, bool kCausal>
using WorkOrder = std::conditional_t<
    kCausalPairsOf<Cfg, kCausal>, CausalPairs<Cfg, kCausal>,
    std::conditional_t<kMixedTiles<Cfg, kCausal>, MixedTiles<Cfg, kCausal>, Stripes<Cfg, kCausal>>>;

// The host's schedule of a launch of Cfg on `device` (the device it runs on, or a model of one).
template <typename T, int D, class Cfg>
inline Schedule schedule_of(const SdpaProblem& p, const SdpaDevice& device) {
  return p.causal ? WorkOrder<Cfg, true>::template plan<T, D>(p, device)
                  : WorkOrder<Cfg, false>::template plan<T, D>(p, device);
}

}  // namespace sdpa_warpspec
