// sdpa_warpspec_launch.cuh -- the host half of sdpa_warpspec.cuh (included at its end):
// the launch with clusters and programmatic stream serialization, the tensor maps and
// the (causal, scale sign) instance of one config, validation, and the exports of a
// stage that runs one config unsplit.
#pragma once

#include <algorithm>
#include <vector>

namespace sdpa_warpspec {

inline int sm_count() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return 0;
  return sms;
}

// One launch of `kernel` in thread-block clusters of `cluster_x` blocks (kPlainGrid: no cluster
// attribute at all), with programmatic stream serialization when `pdl` (the Config's Pdl policy).
constexpr unsigned kPlainGrid = 0;
template <typename... KernelParams, typename... Args>
cudaError_t launch_kernel(void (*kernel)(KernelParams...), dim3 grid, int threads, size_t smem, unsigned cluster_x,
                          bool pdl, cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attrs[2] = {};
  unsigned count = 0;
  if (cluster_x != kPlainGrid) {
    attrs[count].id = cudaLaunchAttributeClusterDimension;
    attrs[count++].val.clusterDim = {cluster_x, 1, 1};
  }
  if (pdl) {
    attrs[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  config.attrs = attrs;
  config.numAttrs = count;
  const cudaError_t err = cudaLaunchKernelEx(&config, kernel, static_cast<KernelParams>(args)...);
  return err != cudaSuccess ? err : cudaGetLastError();
}

// How many clusters of `ctas` blocks of `kernel` the device runs at once (at least one).
template <typename Kernel>
cudaError_t max_active_clusters(Kernel kernel, size_t smem, int threads, int ctas, int* clusters) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(ctas));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = smem;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim = {static_cast<unsigned>(ctas), 1, 1};
  config.attrs = &cluster;
  config.numAttrs = 1;
  const cudaError_t err = cudaOccupancyMaxActiveClusters(clusters, kernel, &config);
  if (err == cudaSuccess && *clusters < 1) return cudaErrorInvalidConfiguration;
  return err;
}

// The device's L2 in bytes (0 where it cannot be read: no snake, no mixed tiles).
inline int l2_cache_bytes() {
  int device = 0, l2_bytes = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device) != cudaSuccess)
    return 0;
  return l2_bytes;
}
// The device the host's plans read: SMs and L2 (0 where they cannot be read).
inline SdpaDevice this_device() { return SdpaDevice{sm_count(), l2_cache_bytes()}; }

template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
cudaError_t launch_instance(const typename Operands<T>::KernelParams& prm, int splits, cudaStream_t stream) {
  constexpr size_t smem = Layout<T, D, Cfg>::kSmemBytes;
  auto kernel = kernel_of<T, D, Cfg, kCausal, kScalePositive>();
  const cudaError_t err = sdpa_set_smem(kernel, smem);
  if (err != cudaSuccess) return err;
  constexpr int kCtas = Cfg::kMulticastCtas;
  int blocks = prm.work_items * splits;
  if constexpr (Cfg::kPersistent) {
    // as many blocks (K/V multicast: clusters) as run at once, at most one per unit
    int resident = sm_count() * Cfg::kMinBlocks;
    if constexpr (kCtas > 1) {  // a GPC holds whole clusters only
      const cudaError_t occupancy = max_active_clusters(kernel, smem, Cfg::kThreads, kCtas, &resident);
      if (occupancy != cudaSuccess) return occupancy;
    }
    blocks = min(WorkOrder<Cfg, kCausal>::units(prm), resident) * kCtas;
  }
  const unsigned cluster = static_cast<unsigned>(kCtas > 1 ? kCtas : splits);
  return launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), Cfg::kThreads, smem, cluster, kPdlOn<Cfg>, stream, prm);
}

// The instance for the problem's mask and scale sign (causal x positive scale), launched.
template <typename T, int D, class Cfg>
cudaError_t launch_masked(const typename Operands<T>::KernelParams& prm, int splits, cudaStream_t stream) {
  const bool positive = prm.p.softmax_scale > 0.0f;
  if (prm.p.causal)
    return positive ? launch_instance<T, D, Cfg, true, true>(prm, splits, stream)
                    : launch_instance<T, D, Cfg, true, false>(prm, splits, stream);
  return positive ? launch_instance<T, D, Cfg, false, true>(prm, splits, stream)
                  : launch_instance<T, D, Cfg, false, false>(prm, splits, stream);
}

// The problem and the work its schedule deals, into a launch's parameters.
inline void set_problem(Params& prm, const SdpaProblem& p, const Schedule& schedule) {
  prm.p = p;
  prm.m_tiles = schedule.m_tiles;
  prm.big_tiles = schedule.big_tiles;
  prm.big_items = schedule.big_tiles * p.heads * p.batch;
  prm.turns_snake = schedule.turns_snake;
  prm.causal_snake = schedule.causal_snake;
  prm.work_items = prm.m_tiles * p.heads * p.batch;
}

// Tensor maps, work count and the (causal, scale sign) instance for one config, dealt as `schedule` says.
// splits: CTAs per work item (1 = no split; ignored by persistent configs).
template <typename T, int D, class Cfg>
cudaError_t launch(const SdpaProblem& p, int splits, const Schedule& schedule, cudaStream_t stream) {
  if (splits < 1 || splits > kMaxClusterSplits) return cudaErrorInvalidValue;
  if (splits > 1 && (Cfg::kPersistent || Cfg::kKeySplit || !Layout<T, D, Cfg>::kCanSplit)) return cudaErrorInvalidValue;
  // K/V multicast: the two heads of a cluster read one K/V head
  if (Cfg::kMulticastCtas > 1 && (p.heads / p.kv_heads) % Cfg::kMulticastCtas != 0) return cudaErrorInvalidValue;
  Params prm{};
  set_problem(prm, p, schedule);
  const CUtensorMapDataType dtype = tensor_map_dtype(p.dtype);
  cudaError_t err = encode_tensor_map(&prm.q_map, p.q, p.q_strides, p, dtype, Cfg::kBlockM);
  // a K/V multicast CTA loads its share of each tile's rows (tma_load_tile_multicast)
  constexpr int kKvBoxRows = Cfg::kBlockN / Cfg::kMulticastCtas;
  if (err == cudaSuccess)
    err = encode_tensor_map(&prm.k_map, p.k, p.k_strides, p, dtype, kKvBoxRows, p.kv_heads, p.kv_seq_len);
  if (err == cudaSuccess)
    err = encode_tensor_map(&prm.v_map, p.v, p.v_strides, p, dtype, kKvBoxRows, p.kv_heads, p.kv_seq_len);
  if (err != cudaSuccess) return err;
  return launch_masked<T, D, Cfg>(prm, splits, stream);
}
// The same, scheduled for this device.
template <typename T, int D, class Cfg>
cudaError_t launch(const SdpaProblem& p, int splits, cudaStream_t stream) {
  return launch<T, D, Cfg>(p, splits, schedule_of<T, D, Cfg>(p, this_device()), stream);
}

// sdpa_forward's common front: validation, then (dtype, head_dim) dispatch to
// pick(tag, hd), which launches.
template <class Pick>
cudaError_t forward(const SdpaProblem* problem, Pick&& pick) {
  if (problem == nullptr) return cudaErrorInvalidValue;
  const cudaError_t ok = sdpa_check_problem(*problem);
  if (ok != cudaSuccess) return ok;
  if (sdpa_problem_is_empty(*problem)) return cudaSuccess;
  // O is written with 16-byte stores; Q/K/V are checked by the tensor maps.
  if (!sdpa_problem_vec16_ok(*problem)) return cudaErrorInvalidValue;
  return sdpa_dispatch(*problem, pick);
}

}  // namespace sdpa_warpspec

// The three exports of sdpa_api.h for a stage that runs one config template
// CONFIG<D> unsplit (s6, s7); CONFIG_STRING names its knobs. sdpa_export.cuh's
// footprint query wants smem_bytes<T, D>() on one type: SdpaWarpspecSmemOf.
#define SDPA_WARPSPEC_EXPORT(CONFIG, CONFIG_STRING)                                                   \
  namespace {                                                                                        \
  struct SdpaWarpspecSmemOf {                                                                        \
    template <class T, int D>                                                                        \
    static constexpr size_t smem_bytes() {                                                           \
      return sdpa_warpspec::Layout<T, D, CONFIG<D>>::kSmemBytes;                                     \
    }                                                                                                \
  };                                                                                                 \
  }                                                                                                  \
  extern "C" cudaError_t sdpa_forward(const SdpaProblem* problem, cudaStream_t stream) {             \
    constexpr int kNoSplit = 1;                                                                      \
    return sdpa_warpspec::forward(problem, [&](auto tag, auto hd) {                                  \
      using T = typename decltype(tag)::type;                                                        \
      constexpr int D = decltype(hd)::value;                                                         \
      return sdpa_warpspec::launch<T, D, CONFIG<D>>(*problem, kNoSplit, stream);                     \
    });                                                                                              \
  }                                                                                                  \
  extern "C" const char* sdpa_stage_config() { return CONFIG_STRING; }                               \
  extern "C" int64_t sdpa_dynamic_shared_memory_bytes(int32_t head_dim, int32_t dtype) {             \
    return sdpa_stage_smem_bytes<SdpaWarpspecSmemOf>(head_dim, dtype);                               \
  }                                                                                                  \
  SDPA_EXPORT_PROTOCOL_REPORT()
