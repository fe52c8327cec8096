// sdpa_launch_plan.cuh -- a launch plan as text (sdpa_api.h's launch plans): the kernel instance's
// parts, its scheduler and its split, for `stagelab coverage` on the CPU and for the check step,
// which records the plan of every launch it checks. A stage whose sdpa_forward picks among several
// instances exports them with SDPA_EXPORT_LAUNCH_PLANS (below).
#pragma once

#include <cstdio>
#include <string>

#include "sdpa_warpspec.cuh"

namespace sdpa_warpspec {

// How a launch of Cfg deals its items: its scheduler's name for the host's choice in `s`.
template <class Cfg>
inline const char* scheduler_name(bool causal, const Schedule& s) {
  return causal ? WorkOrder<Cfg, true>::name(s) : WorkOrder<Cfg, false>::name(s);
}
// Every schedule a launch of Cfg can take (its scheduler's): fn(schedule) once for each.
template <class Cfg, class Fn>
inline void for_each_schedule(bool causal, Fn&& fn) {
  if (causal)
    WorkOrder<Cfg, true>::each_schedule(fn);
  else
    WorkOrder<Cfg, false>::each_schedule(fn);
}

template <class Cfg>
inline const char* epilogue_name(int splits) {
  if (Cfg::kDeferEpilogue) return "deferred";     // O stored under the next item's first Q.K^T
  if (Cfg::kKeySplit) return "key-split-merge";   // two warpgroups' partials merged in shared memory
  return splits > 1 ? "cluster-combine" : "direct";
}

// "hd64 dense long.turns wgs=2 rows=128 keys=128 stages=3 q_buffers=2 turns=1 kv_multicast=off
//  epilogue=deferred sched=stripes split=1" (kv_multicast=x2: a cluster of two CTAs shares each K/V tile)
template <int D, class Cfg>
inline std::string plan_text(bool causal, const char* branch, int splits, const Schedule& s) {
  static_assert(Cfg::kMulticastCtas == 1 || Cfg::kMulticastCtas == 2, "K/V multicast: off or clusters of two");
  char text[256];
  std::snprintf(text, sizeof(text),
                "hd%d %s %s wgs=%d rows=%d keys=%d stages=%d q_buffers=%d turns=%d kv_multicast=%s epilogue=%s "
                "sched=%s split=%d",
                D, causal ? "causal" : "dense", branch, Cfg::kConsumerWGs, Cfg::kBlockM, Cfg::kBlockN, Cfg::kStages,
                Cfg::kQStages, Cfg::kPingpong ? 1 : 0, Cfg::kMulticastCtas == 2 ? "x2" : "off", epilogue_name<Cfg>(splits),
                scheduler_name<Cfg>(causal, s), splits);
  return text;
}

// add(hd, causal) for every head dim and mask a stage declares plans for, in the declared list's order.
template <class Add>
inline void for_each_declared_instance(Add&& add) {
  for (const bool causal : {false, true}) {
    add(SdpaHeadDim<64>{}, causal);
    add(SdpaHeadDim<128>{}, causal);
  }
}

}  // namespace sdpa_warpspec

// The three plan exports of sdpa_api.h over a stage's PLANS type:
//   PLANS::describe(const SdpaProblem&, const SdpaDevice&) -> std::string   (the problem's plan)
//   PLANS::declared() -> std::string                                         (every plan, one per line)
//   PLANS::last() -> std::string                                             (this thread's last launch)
#define SDPA_EXPORT_LAUNCH_PLANS(PLANS)                                                                      \
  extern "C" int32_t sdpa_launch_plan(const SdpaProblem* problem, const SdpaDevice* device, char* out,       \
                                      int32_t capacity) {                                                    \
    if (problem == nullptr || device == nullptr || sdpa_check_problem(*problem) != cudaSuccess) return -1;   \
    if (problem->head_dim != 64 && problem->head_dim != 128) return -1;                                      \
    return sdpa_copy_text(PLANS::describe(*problem, *device), out, capacity);                 \
  }                                                                                                          \
  extern "C" int32_t sdpa_launch_plans(char* out, int32_t capacity) {                                        \
    return sdpa_copy_text(PLANS::declared(), out, capacity);                                  \
  }                                                                                                          \
  extern "C" const char* sdpa_last_launch_plan() {                                                           \
    thread_local std::string text;                                                                           \
    text = PLANS::last();                                                                                    \
    return text.c_str();                                                                                     \
  }
