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
// K and V of the whole problem, in bytes.
template <typename T, int D>
inline double kv_bytes_of(const SdpaProblem& p) {
  return 2.0 * p.batch * p.kv_heads * static_cast<double>(kv_len(p)) * D * sizeof(T);
}

// Cfg::kCausalSnake: whether this causal launch walks the longest-first snake instead of causal
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
inline bool snake_pays(const Params& prm, int blocks, int64_t l2_bytes) {
  if constexpr (!WorkOrder<Cfg, kCausal>::kMaySnake) {
    return false;
  } else {
    const SdpaProblem& p = prm.p;
    const int groups = prm.work_items / prm.m_tiles / Cfg::kMulticastCtas;
    if (prm.work_items > kSnakeMaxItems || blocks < 1 || groups < 1) return false;
    if (l2_bytes == 0 || kv_bytes_of<T, D>(p) > kSnakeL2Share * static_cast<double>(l2_bytes)) return false;
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

// Three warpgroups taking turns, non-causal (kMixedTiles): how the items are cut and dealt, and the
// busiest block's load. Per row three warpgroups are faster than two: each softmax hides under two
// other warpgroups' GEMMs. But 192-row items leave ragged last tiles and rounds, so the host models
// both launches' blocks as WorkOrder deals them. A tile costs, per key tile, in hundredths of a
// two-warpgroup 128-row tile's time, by its warpgroups with rows (H100, turns in both):
// - three warpgroups: three with rows 132 (s17's trials of 2026-11-26 with three everywhere:
//   BERT-base 512, SDXL self and ViT-B/16 items at 1.32-1.335), one 91 (ViT-B/16's 5-row tiles, its
//   trial with the short tiles last), two 112 (s18's runs at BERT-base 512 and SDXL self: the model
//   reads 1.064 and 1.025 over s17 where they measured 1.059-1.072 and 1.024);
// - two warpgroups: two with rows 100, one 91.
// The model reads 1.01, 0.76 and 0.95 where s17's trials with three warpgroups in plain stripes
// measured 1.01, 0.77 and 0.94 (BERT-base 512, ViT-B/16, SDXL self). The snake's short items come
// after every big one, so a (batch, head)'s K/V is read twice: only where all of K and V fit in
// kSnakeL2Share of L2 (BERT-base 512's 48 MB did not: its short-tiles-last trial measured 1.00 where
// the model read 1.10). Where the model misses: (4,16,4096,64) reads 1.10 over two warpgroups and
// measured 1.007x (H100 throughput, power-capped) and 0.997x (cold); not understood yet.
constexpr int kThreeTurnsTileCost[4] = {0, 91, 112, 132};  // by warpgroups with rows: none, 1, 2, 3
constexpr int kTwoTurnsTileCost[3] = {0, 91, 100};
// kStripes: two warpgroups' head-major stripes (128-row tiles); kMixed: WorkOrder's list of big then short items
// (kMixedTiles), dealt forward every round; kSnake: the same list, odd rounds backward.
enum class TurnsDeal { kStripes, kMixed, kSnake };
struct TurnsPlan {
  long long busiest = 0;  // the busiest block's load (kThreeTurnsTileCost units per key tile)
  int big_tiles = 0, m_tiles = 0;
  bool snake = false;
  long long two_busiest = 0;  // the same for two warpgroups' 128-row stripes (0: unmodelled, past kTurnsMaxItems)
};
// `heads` (batch, head)s of `seq_len` rows, each cut into big_tiles items of big_rows rows and
// m_tiles - big_tiles of big_rows - kWgmmaM (the last clipped to seq_len), dealt to min(items, sms) blocks.
inline long long turns_busiest_block(int seq_len, int heads, int big_rows, int big_tiles, int m_tiles, int sms,
                                     TurnsDeal deal, std::vector<long long>& loads) {
  const int items = heads * m_tiles, grid = min(items, sms);
  loads.assign(static_cast<size_t>(grid), 0);
  const auto rows_of = [&](int tile) {
    const int begin = mixed_tile_begin(tile, big_tiles, big_rows);
    return max(0, min(mixed_tile_begin(tile + 1, big_tiles, big_rows), seq_len) - begin);
  };
  for (int q = 0; q < items; ++q) {  // list position q: block slot of round q / grid, or mirrored (the snake)
    const int round = q / grid, slot = q % grid;
    const int block = deal == TurnsDeal::kSnake && round % 2 == 1 ? grid - 1 - slot : slot;
    int bh = 0, tile = m_tiles - 1 - q % m_tiles;  // kStripes: the head-major descending stripes
    if (deal != TurnsDeal::kStripes) mixed_item(q, m_tiles, big_tiles, heads * big_tiles, grid, bh, tile);
    const int warpgroups = sdpa_ceil_div(rows_of(tile), kWgmmaM);
    loads[static_cast<size_t>(block)] += deal == TurnsDeal::kStripes ? kTwoTurnsTileCost[warpgroups] : kThreeTurnsTileCost[warpgroups];
  }
  return *std::max_element(loads.begin(), loads.end());
}
// Past this many items the O(items) walks are skipped: rotated stripes of whole items, and three_turns_pay
// keeps two warpgroups.
constexpr int kTurnsMaxItems = 16384;
// The best cut and deal for three warpgroups of kBlockM = 192 rows: rotated stripes of whole 192-row
// items, or (K/V in L2) the snake over every split into big and short items; and the busiest block of
// two warpgroups' launch (128-row items, kBlockM - kWgmmaM) that it must beat.
template <int kBlockM>
inline TurnsPlan plan_three_turns(const SdpaProblem& p, int sms, double kv_bytes, int l2_bytes) {
  std::vector<long long> loads;
  const int heads = p.batch * p.heads;
  constexpr int kTwoRows = kBlockM - kWgmmaM;
  const int two_tiles = sdpa_ceil_div(p.seq_len, kTwoRows);
  TurnsPlan best;
  best.m_tiles = best.big_tiles = sdpa_ceil_div(p.seq_len, kBlockM);
  if (static_cast<long long>(two_tiles) * heads > kTurnsMaxItems) return best;  // unmodelled: rotated stripes
  best.two_busiest = turns_busiest_block(p.seq_len, heads, kTwoRows, two_tiles, two_tiles, sms, TurnsDeal::kStripes, loads);
  best.busiest = turns_busiest_block(p.seq_len, heads, kBlockM, best.big_tiles, best.m_tiles, sms, TurnsDeal::kMixed, loads);
  if (kv_bytes > kSnakeL2Share * l2_bytes) return best;
  // most big items first: of cuts the model ties, the one with the fewest short items (their cost is the less measured)
  for (int big = best.big_tiles - 1; big >= 0; --big) {
    const int m_tiles = big + sdpa_ceil_div(p.seq_len - big * kBlockM, kBlockM - kWgmmaM);
    const long long busiest = turns_busiest_block(p.seq_len, heads, kBlockM, big, m_tiles, sms, TurnsDeal::kSnake, loads);
    if (busiest < best.busiest) best = TurnsPlan{busiest, big, m_tiles, true, best.two_busiest};
  }
  return best;
}
// The plan for this problem, remembered for the last few problems (each plan walks every item of
// every cut: tens of microseconds at SDXL self).
template <int kBlockM>
inline TurnsPlan cached_three_turns_plan(const SdpaProblem& p, int sms, double kv_bytes, int l2_bytes) {
  struct Entry {
    int batch_heads = -1, seq_len = -1, sms = -1, l2_bytes = -1;
    double kv_bytes = -1;
    TurnsPlan plan;
  };
  thread_local Entry cache[4];
  thread_local int next = 0;
  for (const Entry& e : cache)
    if (e.batch_heads == p.batch * p.heads && e.seq_len == p.seq_len && e.sms == sms && e.l2_bytes == l2_bytes &&
        e.kv_bytes == kv_bytes)
      return e.plan;
  Entry& e = cache[next];
  next = (next + 1) % 4;
  e = Entry{p.batch * p.heads, p.seq_len, sms, l2_bytes, kv_bytes, plan_three_turns<kBlockM>(p, sms, kv_bytes, l2_bytes)};
  return e.plan;
}
// The device the host's plans read: SMs and L2 (0 where they cannot be read).
inline SdpaDevice this_device() { return SdpaDevice{sm_count(), l2_cache_bytes()}; }

// A launch's per-problem choices, made on the host before it launches (and by the plan exports,
// sdpa_launch_plan.cuh, for a device model without a GPU): the work items WorkOrder deals and how.
struct Schedule {
  int m_tiles = 0;       // items per (batch, head)
  int big_tiles = 0;     // mixed tiles: each (batch, head)'s items of kBlockM rows (Params::big_tiles)
  int turns_snake = 0;   // mixed tiles: big items then short ones, in a snake
  int causal_snake = 0;  // causal: the longest-first snake instead of pairs (snake_pays)
};
// Persistent blocks (K/V multicast: clusters) the host's plan deals to. The launch sizes its grid by the
// occupancy the driver reports (launch_instance); a plan made for a device model counts one block per SM
// per kMinBlocks, and one cluster per kMulticastCtas SMs (no multicast build walks the snake).
template <class Cfg>
inline int planned_blocks(const SdpaDevice& device) {
  return device.sms * Cfg::kMinBlocks / Cfg::kMulticastCtas;
}
template <typename T, int D, class Cfg>
inline Schedule schedule_of(const SdpaProblem& p, const SdpaDevice& device) {
  Schedule s;
  s.m_tiles = sdpa_ceil_div(p.seq_len, Cfg::kBlockM);
  if constexpr (kMixedTiles<Cfg, false>) {  // three warpgroups in turns: the host's cut and deal
    if (!p.causal) {
      const TurnsPlan plan = cached_three_turns_plan<Cfg::kBlockM>(p, device.sms, kv_bytes_of<T, D>(p),
                                                                   static_cast<int>(device.l2_bytes));
      s.m_tiles = plan.m_tiles;
      s.big_tiles = plan.big_tiles;
      s.turns_snake = plan.snake ? 1 : 0;
    }
  }
  if constexpr (Cfg::kPersistent) {
    if (p.causal) {
      Params prm{};
      prm.p = p;
      prm.m_tiles = s.m_tiles;
      prm.work_items = s.m_tiles * p.heads * p.batch;
      s.causal_snake = snake_pays<T, D, Cfg, true>(prm, planned_blocks<Cfg>(device), device.l2_bytes) ? 1 : 0;
    }
  }
  return s;
}

template <typename T, int D, class Cfg, bool kCausal, bool kScalePositive>
cudaError_t launch_instance(const Params& prm, int splits, cudaStream_t stream) {
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
    blocks = min(WorkOrder<Cfg, kCausal>::units(prm), resident) * kCtas;
  }
  const unsigned cluster = static_cast<unsigned>(kCtas > 1 ? kCtas : splits);
  return launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), Cfg::kThreads, smem, cluster, kPdlOn<Cfg>, stream, prm);
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
  prm.p = p;
  prm.m_tiles = schedule.m_tiles;
  prm.big_tiles = schedule.big_tiles;
  prm.big_items = schedule.big_tiles * p.heads * p.batch;
  prm.turns_snake = schedule.turns_snake;
  prm.causal_snake = schedule.causal_snake;
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
  }
