// sched/work_tile.cuh -- what every scheduler deals: a work item as a block sees it (WorkTile), the
// key tiles a query tile sees, and the Schedule, the host's per-launch choices the scheduler's plan()
// makes before a launch (and the plan exports make for a device model, without a GPU).
#pragma once

#include "../sdpa_warpspec_config.cuh"

namespace sdpa_warpspec {

// One work item as a block (or a cluster rank) sees it.
struct WorkTile {
  int q_begin, h, b;
  int kt_begin, kt_end;  // this CTA's key tiles
};
// The key tiles query tile `q_tile` sees (causal: up to its diagonal, aligned bottom-right).
template <class Cfg, bool kCausal>
__host__ __device__ __forceinline__ int key_tiles(const SdpaProblem& p, int q_tile) {
  return sdpa_ceil_div(sdpa_kv_end(q_tile * Cfg::kBlockM + key_offset(p), Cfg::kBlockM, kv_len(p), kCausal),
                       Cfg::kBlockN);
}
// Query tile `q_tile` of (batch, head) `bh`, and this CTA's share of its key tiles.
template <class Cfg, bool kCausal>
__device__ __forceinline__ WorkTile make_work(const Params& prm, int bh, int q_tile, int split, int splits) {
  const SdpaProblem& p = prm.p;
  WorkTile t;
  t.q_begin = q_tile * Cfg::kBlockM;
  t.h = bh % p.heads;
  t.b = bh / p.heads;
  const int n_tiles = key_tiles<Cfg, kCausal>(p, q_tile);
  const int share = sdpa_ceil_div(n_tiles, splits);
  t.kt_begin = min(split * share, n_tiles);
  t.kt_end = min(t.kt_begin + share, n_tiles);
  return t;
}

// (batch, head) of this CTA from its cluster's (batch, head group) index: a K/V multicast cluster
// (KvMulticast) walks the units of head groups of kMulticastCtas (heads kMulticastCtas * j + rank) as one.
template <class Cfg>
__device__ __forceinline__ int cta_bh(const Params& prm, int group_bh) {
  constexpr int kCtas = Cfg::kMulticastCtas;
  if constexpr (kCtas == 1) return group_bh;
  const int groups = prm.p.heads / kCtas;
  return (group_bh / groups) * prm.p.heads + (group_bh % groups) * kCtas + static_cast<int>(cluster_ctarank());
}

// A launch's per-problem choices, made on the host before it launches (and by the plan exports,
// sdpa_launch_plan.cuh, for a device model without a GPU): the work items the scheduler deals and how.
struct Schedule {
  int m_tiles = 0;       // items per (batch, head)
  int big_tiles = 0;     // mixed tiles: each (batch, head)'s items of kBlockM rows (Params::big_tiles)
  int turns_snake = 0;   // mixed tiles: big items then short ones, in a snake
  int causal_snake = 0;  // causal: the longest-first snake instead of pairs (CausalPairs::plan)
};
// K and V of the whole problem, in bytes.
template <typename T, int D>
inline double kv_bytes_of(const SdpaProblem& p) {
  return 2.0 * p.batch * p.kv_heads * static_cast<double>(kv_len(p)) * D * sizeof(T);
}
// A schedule that runs every (batch, head)'s items at once (the causal snake, the mixed tiles' short
// items after every big one) reads K and V back from L2: only where all of them fit in this share of it.
constexpr double kSnakeL2Share = 0.75;

}  // namespace sdpa_warpspec
