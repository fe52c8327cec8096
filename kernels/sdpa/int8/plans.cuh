// int8/plans.cuh -- the INT8 stage's launch plans (sdpa_api.h's plan exports): one Config per head
// dim (launch.cuh's Config, the long policy's two warpgroups in turns), dealt by its scheduler's
// schedules (stripes; causal pairs or the longest-first snake). `stagelab coverage s19_int8` lists
// them, and the check step records the plan of every launch it checks.
#pragma once

#include <string>

#include "../sdpa_launch_plan.cuh"
#include "launch.cuh"

namespace sdpa_int8 {

constexpr const char* kInt8Branch = "long.turns";

template <class R>
struct Int8Plans {
  struct Last {  // kept as numbers: sdpa_int8_forward formats nothing
    int head_dim = 0;
    bool causal = false;
    sdpa_warpspec::Schedule schedule;
  };
  static Last& last_launch() {
    thread_local Last last;
    return last;
  }
  template <int D>
  static std::string line(bool causal, const sdpa_warpspec::Schedule& schedule) {
    return sdpa_warpspec::plan_text<D, Config<R, D>>(causal, kInt8Branch, /*splits=*/1, schedule);
  }
  // The schedule the launch of a problem takes on `device` (the L2 model counts 8-bit K and V).
  template <int D>
  static sdpa_warpspec::Schedule schedule_of(const SdpaProblem& p, const SdpaDevice& device) {
    return sdpa_warpspec::schedule_of<Int8Qk<__half>, D, Config<R, D>>(p, device);
  }
  static std::string describe(const SdpaProblem& p, const SdpaDevice& device) {
    if (p.head_dim == 64) return line<64>(p.causal != 0, schedule_of<64>(p, device));
    return line<128>(p.causal != 0, schedule_of<128>(p, device));
  }
  static std::string declared() {
    std::string lines;
    const auto add = [&](auto hd, bool causal) {
      constexpr int D = decltype(hd)::value;
      sdpa_warpspec::for_each_schedule<Config<R, D>>(causal, [&](const auto& schedule) {
        lines += line<D>(causal, schedule) + "\n";
      });
    };
    sdpa_warpspec::for_each_declared_instance(add);
    return lines;
  }
  static std::string last() {
    const Last& l = last_launch();
    if (l.head_dim == 64) return line<64>(l.causal, l.schedule);
    if (l.head_dim == 128) return line<128>(l.causal, l.schedule);
    return "";
  }
  // sdpa_int8_forward: check, make the schedule for this device, remember the plan, launch.
  static cudaError_t forward(const SdpaInt8Problem* q8, cudaStream_t stream) {
    if (q8 == nullptr) return cudaErrorInvalidValue;
    const cudaError_t ok = check(*q8);
    if (ok != cudaSuccess) return ok;
    if (sdpa_problem_is_empty(q8->attn)) return cudaSuccess;
    const SdpaDevice device = sdpa_warpspec::this_device();
    if (device.sms <= 0) return cudaErrorNoDevice;
    return sdpa_dispatch(q8->attn, [&](auto tag, auto hd) {
      using Out = typename decltype(tag)::type;
      constexpr int D = decltype(hd)::value;
      const sdpa_warpspec::Schedule schedule = schedule_of<D>(q8->attn, device);
      last_launch() = Last{D, q8->attn.causal != 0, schedule};
      return launch<Out, D, Config<R, D>>(*q8, schedule, stream);
    });
  }
};

}  // namespace sdpa_int8

// An INT8 stage's exports: sdpa_int8_forward launches its composition RECIPE (with Int8Operands),
// its launch plans (SDPA_EXPORT_LAUNCH_PLANS); sdpa_int8_quantize makes its operands from fp16/bf16
// inputs (int8/quantize.cuh); sdpa_forward takes no 16-bit problem.
#define SDPA_INT8_STAGE(ID, RECIPE)                                                                 \
  extern "C" cudaError_t sdpa_int8_forward(const SdpaInt8Problem* problem, cudaStream_t stream) {   \
    return sdpa_int8::Int8Plans<RECIPE>::forward(problem, stream);                                  \
  }                                                                                                 \
  extern "C" int64_t sdpa_int8_quantize_scratch_bytes(const SdpaInt8Quantize* args) {               \
    return args == nullptr ? 0 : sdpa_int8::quantize_scratch_bytes(*args);                          \
  }                                                                                                 \
  extern "C" cudaError_t sdpa_int8_quantize(const SdpaInt8Quantize* args, void* scratch, int64_t scratch_bytes, \
                                            cudaStream_t stream) {                                  \
    return sdpa_int8::quantize(args, scratch, scratch_bytes, stream);                               \
  }                                                                                                 \
  extern "C" cudaError_t sdpa_forward(const SdpaProblem*, cudaStream_t) { return cudaErrorNotSupported; } \
  extern "C" const char* sdpa_stage_config() {                                                      \
    static const std::string text = sdpa_persistent::recipe_text<RECIPE>(ID) + " operands=int8_qk_e4m3_pv"; \
    return text.c_str();                                                                            \
  }                                                                                                 \
  extern "C" int64_t sdpa_dynamic_shared_memory_bytes(int32_t head_dim, int32_t) {                  \
    return sdpa_int8::smem_bytes<RECIPE>(head_dim);                                                 \
  }                                                                                                 \
  SDPA_EXPORT_LAUNCH_PLANS(sdpa_int8::Int8Plans<RECIPE>)                                            \
  SDPA_EXPORT_PROTOCOL_REPORT()
