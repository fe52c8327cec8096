// int8/plans.cuh -- the INT8 stage's launch plans (sdpa_api.h's plan exports): two Configs per head
// dim (launch.cuh's Config, the long policy's warpgroups in turns, and its KeySplitConfig, s12's key
// split for few-item problems), the long one dealt by its scheduler's schedules (stripes; causal pairs
// or the longest-first snake). `stagelab coverage s19_int8` lists
// them, and the check step records the plan of every launch it checks.
#pragma once

#include <string>

#include "../sdpa_launch_plan.cuh"
#include "launch.cuh"

namespace sdpa_int8 {

// The launches of a problem: the long policy's warpgroups in turns, or s12's key split for problems
// whose long items would leave SMs idle.
enum class Int8Launch : int { kLong, kKeySplit };
constexpr const char* kInt8Branch[] = {"long.turns", "short.key_split"};

// s12's rule (PersistentSplit::use_long_policy with kFewLong): fewer two-warpgroup (128-row) items than
// SMs leave SMs idle while each item walks every key tile; the key split's 64-row blocks, two
// warpgroups over alternate key tiles, halve that chain while all of them fit one wave.
constexpr int kRuleWarpgroups = 2;
template <class R, int D>
bool key_split_pays(const SdpaProblem& p, int sms) {
  const auto items = [&](int rows) { return sdpa_ceil_div(p.seq_len, rows) * p.heads * p.batch; };
  return items(Config<R, D, kRuleWarpgroups>::kBlockM) < sms &&
         items(KeySplitConfig<R, D>::kBlockM) <= sms * KeySplitConfig<R, D>::kMinBlocks;
}

template <class R>
struct Int8Plans {
  struct Last {  // kept as numbers: sdpa_int8_forward formats nothing
    int head_dim = 0;
    bool causal = false;
    Int8Launch launch = Int8Launch::kLong;
    sdpa_warpspec::Schedule schedule;
  };
  static Last& last_launch() {
    thread_local Last last;
    return last;
  }
  template <class Cfg>
  struct Tag {
    using type = Cfg;
  };
  template <int D>
  static Int8Launch launch_of(const SdpaProblem& p, const SdpaDevice& device) {
    return key_split_pays<R, D>(p, device.sms) ? Int8Launch::kKeySplit : Int8Launch::kLong;
  }
  // fn(Tag<Cfg>) with the config of a launch at head dim D.
  template <int D, class Fn>
  static auto with_config(Int8Launch which, Fn&& fn) {
    if (which == Int8Launch::kKeySplit) return fn(Tag<KeySplitConfig<R, D>>{});
    return fn(Tag<Config<R, D>>{});
  }
  template <int D, class Cfg>
  static std::string line(bool causal, Int8Launch which, const sdpa_warpspec::Schedule& schedule) {
    return sdpa_warpspec::plan_text<D, Cfg>(causal, kInt8Branch[static_cast<int>(which)], /*splits=*/1, schedule);
  }
  // The schedule the launch of a problem takes on `device` (the L2 model counts 8-bit K and V).
  template <int D, class Cfg>
  static sdpa_warpspec::Schedule schedule_of(const SdpaProblem& p, const SdpaDevice& device) {
    return sdpa_warpspec::schedule_of<Int8Qk<__half>, D, Cfg>(p, device);
  }
  template <int D>
  static std::string describe_at(const SdpaProblem& p, const SdpaDevice& device) {
    const Int8Launch which = launch_of<D>(p, device);
    return with_config<D>(which, [&](auto tag) {
      using Cfg = typename decltype(tag)::type;
      return line<D, Cfg>(p.causal != 0, which, schedule_of<D, Cfg>(p, device));
    });
  }
  static std::string describe(const SdpaProblem& p, const SdpaDevice& device) {
    return p.head_dim == 64 ? describe_at<64>(p, device) : describe_at<128>(p, device);
  }
  static std::string declared() {
    std::string lines;
    const auto add = [&](auto hd, bool causal) {
      constexpr int D = decltype(hd)::value;
      for (const Int8Launch which : {Int8Launch::kKeySplit, Int8Launch::kLong}) {
        with_config<D>(which, [&](auto tag) {
          using Cfg = typename decltype(tag)::type;
          sdpa_warpspec::for_each_schedule<Cfg>(causal, [&](const auto& schedule) {
            lines += line<D, Cfg>(causal, which, schedule) + "\n";
          });
          return 0;
        });
      }
    };
    sdpa_warpspec::for_each_declared_instance(add);
    return lines;
  }
  static std::string last() {
    const Last& l = last_launch();
    const auto text = [&](auto hd) {
      constexpr int D = decltype(hd)::value;
      return with_config<D>(l.launch, [&](auto tag) {
        return line<D, typename decltype(tag)::type>(l.causal, l.launch, l.schedule);
      });
    };
    if (l.head_dim == 64) return text(SdpaHeadDim<64>{});
    if (l.head_dim == 128) return text(SdpaHeadDim<128>{});
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
      const Int8Launch which = launch_of<D>(q8->attn, device);
      return with_config<D>(which, [&](auto config) {
        using Cfg = typename decltype(config)::type;
        const sdpa_warpspec::Schedule schedule = schedule_of<D, Cfg>(q8->attn, device);
        last_launch() = Last{D, q8->attn.causal != 0, which, schedule};
        return launch<Out, D, Cfg>(*q8, schedule, stream);
      });
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
