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
// attribute at all), with programmatic stream serialization when the build asks for PDL (WS_PDL).
constexpr unsigned kPlainGrid = 0;
template <typename... KernelParams, typename... Args>
cudaError_t launch_kernel(void (*kernel)(KernelParams...), dim3 grid, int threads, size_t smem, unsigned cluster_x,
                          cudaStream_t stream, Args... args) {
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
  if constexpr (kPdl) {
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

// WS_CAUSAL_ORDER=1: whether this causal launch walks the longest-first snake instead of causal
// pairs on `blocks` persistent blocks. The snake runs every (batch, head)'s items at once where
// pairs run a few heads' at a time, so it goes only where all of K and V fit in kSnakeL2Share of
// L2: Llama-3-8B's 8k prefill (34 MB of K/V) gained 2.6% with it on the H100, (4,16,4096,128)
// (134 MB) lost 1.8%. And only where it balances better by the model of tools/schedule_balance.py
// (an item costs its key tiles plus one for its Q, first tile and epilogue): by at least
// kSnakeMinGain of the busiest block's load. Both walks cost O(items) here, so launches past
// kSnakeMaxItems (where ceil(units / blocks) rounds lose under 1% anyway) keep pairs.
constexpr double kSnakeL2Share = 0.75;
constexpr double kSnakeMinGain = 1.01;
constexpr int kSnakeMaxItems = 16384;
template <typename T, int D, class Cfg, bool kCausal>
inline bool snake_pays(const Params& prm, int blocks) {
  if constexpr (!WorkOrder<Cfg, kCausal>::kMaySnake) {
    return false;
  } else {
    const SdpaProblem& p = prm.p;
    const int groups = prm.work_items / prm.m_tiles / Cfg::kMulticastCtas;
    if (prm.work_items > kSnakeMaxItems || blocks < 1 || groups < 1) return false;
    int device = 0, l2_bytes = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device) != cudaSuccess)
      return false;
    const double kv_bytes = 2.0 * p.batch * p.kv_heads * static_cast<double>(kv_len(p)) * D * sizeof(T);  // K and V
    if (kv_bytes > kSnakeL2Share * l2_bytes) return false;
    const auto cost = [&](int q_tile) { return key_tiles<Cfg, kCausal>(p, q_tile) + 1; };  // + the item's own
    // pairs: block b takes units b, b + blocks, ...; a unit is query tiles j and m-1-j of one group
    const int pairs = sdpa_ceil_div(prm.m_tiles, 2);
    const int pair_units = pairs * groups;
    const int pair_grid = min(pair_units, blocks);
    long long pairs_max = 0;
    for (int b = 0; b < pair_grid; ++b) {
      long long load = 0;
      for (int u = b; u < pair_units; u += pair_grid) {
        const int shorter = u % pairs, longer = prm.m_tiles - 1 - shorter;
        load += cost(longer) + (shorter != longer ? cost(shorter) : 0);
      }
      pairs_max = load > pairs_max ? load : pairs_max;
    }
    // the snake: position q of round k goes to block q % grid (k even) or grid-1 - q % grid (k odd)
    const int items = prm.work_items / Cfg::kMulticastCtas;
    const int snake_grid = min(items, blocks);
    std::vector<long long> loads(static_cast<size_t>(snake_grid), 0);
    for (int q = 0; q < items; ++q) {
      const int round = q / snake_grid, slot = q % snake_grid;
      loads[static_cast<size_t>(round % 2 == 0 ? slot : snake_grid - 1 - slot)] += cost(prm.m_tiles - 1 - q / groups);
    }
    const long long snake_max = *std::max_element(loads.begin(), loads.end());
    return static_cast<double>(snake_max) * kSnakeMinGain <= static_cast<double>(pairs_max);
  }
}

template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
cudaError_t launch_instance(const Params& prm_in, int splits, cudaStream_t stream) {
  Params prm = prm_in;
  constexpr size_t smem = Layout<T, D, Cfg>::kSmemBytes;
  auto kernel = warpspec_kernel<T, D, Cfg, kCausal, kScalePositive>;
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
    prm.causal_snake = snake_pays<T, D, Cfg, kCausal>(prm, resident) ? 1 : 0;
    blocks = min(WorkOrder<Cfg, kCausal>::units(prm), resident) * kCtas;
  }
  const unsigned cluster = static_cast<unsigned>(kCtas > 1 ? kCtas : splits);
  return launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), Cfg::kThreads, smem, cluster, stream, prm);
}

// Tensor maps, work count and the (causal, scale sign) instance for one config.
// splits: CTAs per work item (1 = no split; ignored by persistent configs).
template <typename T, int D, class Cfg>
cudaError_t launch(const SdpaProblem& p, int splits, cudaStream_t stream) {
  if (splits < 1 || splits > kMaxClusterSplits) return cudaErrorInvalidValue;
  if (splits > 1 && (Cfg::kPersistent || Cfg::kKeySplit || !Layout<T, D, Cfg>::kCanSplit)) return cudaErrorInvalidValue;
  // K/V multicast: the two heads of a cluster read one K/V head
  if (Cfg::kMulticastCtas > 1 && (p.heads / p.kv_heads) % Cfg::kMulticastCtas != 0) return cudaErrorInvalidValue;
  Params prm{};
  prm.p = p;
  prm.m_tiles = sdpa_ceil_div(p.seq_len, Cfg::kBlockM);
  prm.work_items = prm.m_tiles * p.heads * p.batch;
  const CUtensorMapDataType dtype = tensor_map_dtype(p.dtype);
  cudaError_t err = encode_tensor_map(&prm.q_map, p.q, p.q_strides, p, dtype, Cfg::kBlockM);
  // a K/V multicast CTA loads its share of each tile's rows (tma_load_tile_multicast)
  constexpr int kKvBoxRows = Cfg::kBlockN / Cfg::kMulticastCtas;
  if (err == cudaSuccess)
    err = encode_tensor_map(&prm.k_map, p.k, p.k_strides, p, dtype, kKvBoxRows, p.kv_heads, p.kv_seq_len);
  if (err == cudaSuccess)
    err = encode_tensor_map(&prm.v_map, p.v, p.v_strides, p, dtype, kKvBoxRows, p.kv_heads, p.kv_seq_len);
  if (err != cudaSuccess) return err;
  const bool positive = p.softmax_scale > 0.0f;
  if (p.causal)
    return positive ? launch_instance<T, D, Cfg, true, true>(prm, splits, stream)
                    : launch_instance<T, D, Cfg, true, false>(prm, splits, stream);
  return positive ? launch_instance<T, D, Cfg, false, true>(prm, splits, stream)
                  : launch_instance<T, D, Cfg, false, false>(prm, splits, stream);
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
  }
