// sched/causal_pairs.cuh -- the persistent causal scheduler: a block takes query tiles j and m-1-j of
// one (batch, head) back to back, a unit whose key tiles sum to about the same for every j, so static
// stripes of units balance. Without pairs, block b's items b, b+grid, ... of a head-major,
// longest-first order are as long as their residues mod m_tiles make them: at (2,8,2048,128) causal
// (16 tiles of 128 rows a head, 256 items, 132 blocks) block 0 gets 16 + 12 tile-lengths and block 11
// gets 5 + 1, against a mean of 16.5.
// With the body policy kCausalSnake (s16) the host may choose, per launch, the longest-first snake
// instead: one list of every item (all (batch, head)s' last query tiles, then the ones before), dealt
// round k forward when k is even, backward when odd; the list ends in its shortest items, and each
// block's items of two consecutive rounds sum to about the same.
#pragma once

#include <algorithm>
#include <vector>

#include "work_tile.cuh"

namespace sdpa_warpspec {

template <class Cfg, bool kCausal>
struct CausalPairs {
  static_assert(Cfg::kPersistent && kCausal && Cfg::kCausalPairs, "causal pairs: a persistent causal launch");
  static constexpr bool kMaySnake = Cfg::kCausalSnake;
  static constexpr int kCtas = Cfg::kMulticastCtas;  // a K/V multicast cluster walks one unit (cta_bh)
  __host__ __device__ static bool snake(const Params& prm) { return kMaySnake && prm.causal_snake != 0; }

  // Host: the snake where it pays. It runs every (batch, head)'s items at once where pairs run a few
  // heads' at a time, so it goes only where all of K and V fit in kSnakeL2Share of L2 (Llama-3-8B's 8k
  // prefill, 34 MB of K/V, gained with it on the H100; (4,16,4096,128), 134 MB, lost). And only where
  // it balances better by this model (an item costs its key tiles plus one for its Q, first tile and
  // epilogue): by at least kSnakeMinGain of the busiest block's load. Both walks cost O(items) here,
  // so launches past kSnakeMaxItems (where ceil(units / blocks) rounds lose under 1% anyway) keep pairs.
  static constexpr double kSnakeMinGain = 1.01;
  static constexpr int kSnakeMaxItems = 16384;
  template <typename T, int D>
  static Schedule plan(const SdpaProblem& p, const SdpaDevice& device) {
    Schedule s;
    s.m_tiles = sdpa_ceil_div(p.seq_len, Cfg::kBlockM);
    s.causal_snake = snake_pays<T, D>(p, s.m_tiles, planned_blocks(device), device.l2_bytes) ? 1 : 0;
    return s;
  }
  // Persistent blocks (K/V multicast: clusters) the host's plan deals to. The launch sizes its grid by
  // the occupancy the driver reports (launch_instance); a plan made for a device model counts one block
  // per SM per kMinBlocks, and one cluster per kMulticastCtas SMs (no multicast build walks the snake).
  static int planned_blocks(const SdpaDevice& device) { return device.sms * Cfg::kMinBlocks / kCtas; }
  template <typename T, int D>
  static bool snake_pays(const SdpaProblem& p, int m_tiles, int blocks, int64_t l2_bytes) {
    if constexpr (!kMaySnake) {
      return false;
    } else {
      const int work_items = m_tiles * p.heads * p.batch;
      if (work_items > kSnakeMaxItems || blocks < 1 || work_items / m_tiles / kCtas < 1) return false;
      if (l2_bytes == 0 || kv_bytes_of<T, D>(p) > kSnakeL2Share * static_cast<double>(l2_bytes)) return false;
      const Loads walk = loads(p, m_tiles, blocks);
      return static_cast<double>(walk.snake_max) * kSnakeMinGain <= static_cast<double>(walk.pairs_max);
    }
  }
  // The model's loads (an item costs its key tiles plus one): the busiest block's under pairs and under
  // the snake on `blocks` blocks, and all items' (tools/schedule_balance.py prints them).
  struct Loads {
    long long pairs_max = 0, snake_max = 0, total = 0;
  };
  static Loads loads(const SdpaProblem& p, int m_tiles, int blocks) {
    Loads out;
    const int groups = p.heads * p.batch / kCtas;
    const auto cost = [&](int q_tile) { return key_tiles<Cfg, kCausal>(p, q_tile) + 1; };  // + the item's own
    // pairs: block b takes units b, b + blocks, ...; a unit is query tiles j and m-1-j of one group
    const int pairs = sdpa_ceil_div(m_tiles, 2);
    const int pair_units = pairs * groups;
    const int pair_grid = min(pair_units, blocks);
    for (int b = 0; b < pair_grid; ++b) {
      long long load = 0;
      for (int u = b; u < pair_units; u += pair_grid) {
        const int shorter = u % pairs, longer = m_tiles - 1 - shorter;
        load += cost(longer) + (shorter != longer ? cost(shorter) : 0);
      }
      out.pairs_max = load > out.pairs_max ? load : out.pairs_max;
      out.total += load;
    }
    // the snake: position q of round k goes to block q % grid (k even) or grid-1 - q % grid (k odd)
    const int items = m_tiles * p.heads * p.batch / kCtas;
    const int snake_grid = min(items, blocks);
    std::vector<long long> snake(static_cast<size_t>(snake_grid), 0);
    for (int q = 0; q < items; ++q) {
      const int round = q / snake_grid, slot = q % snake_grid;
      snake[static_cast<size_t>(round % 2 == 0 ? slot : snake_grid - 1 - slot)] += cost(m_tiles - 1 - q / groups);
    }
    out.snake_max = *std::max_element(snake.begin(), snake.end());
    return out;
  }
  static const char* name(const Schedule& s) { return s.causal_snake ? "snake" : "pairs"; }
  template <class Fn>
  static void each_schedule(Fn&& fn) {
    Schedule s;
    fn(s);
    if (kMaySnake) {
      s.causal_snake = 1;
      fn(s);
    }
  }

  // Units the blocks (the clusters) stripe over: pairs of items (a middle tile alone), or the snake's items.
  __host__ __device__ static int units(const Params& prm) {
    return (!snake(prm) ? sdpa_ceil_div(prm.m_tiles, 2) * prm.p.heads * prm.p.batch : prm.work_items) / kCtas;
  }

  // body(tile, local) for each item of this block in order; local counts them (the Q buffer's phase).
  // Query tiles of one (batch, head) are consecutive units: blocks running at the same time share that
  // head's K/V in L2 (items spread over all heads streamed 4x more DRAM traffic at (4,16,4096,128)).
  template <class Body>
  __device__ __forceinline__ static void for_each(const Params& prm, int split, int splits, Body&& body) {
    const int first = static_cast<int>(blockIdx.x) / kCtas;
    const int stride = static_cast<int>(gridDim.x) / kCtas;
    int local = 0;
    // Step k: unit first + (k / 2) * stride, its longer tile first; or (the snake) position first (k
    // even) or stride-1-first (k odd) of round k of the longest-first list, whose position q is query
    // tile m-1 - q / groups of (batch, head) group q % groups. One call site: the body (the whole main
    // loop) is inlined once, and only k and local stay live across it (a second call site spilled at
    // the entry cap). A block's units and positions grow with k, so the first one past the end ends
    // its walk.
    const int pairs = sdpa_ceil_div(prm.m_tiles, 2);
    const bool snake_order = snake(prm);
    const int groups = prm.work_items / prm.m_tiles / kCtas;
    for (int k = 0;; ++k) {
      int group, q_tile;
      if (snake_order) {
        const int q = k * stride + ((k & 1) ? stride - 1 - first : first);
        if (q >= units(prm)) break;
        group = q % groups;
        q_tile = prm.m_tiles - 1 - q / groups;
      } else {
        const int u = first + (k >> 1) * stride;
        if (u >= units(prm)) break;
        const int shorter = u % pairs, longer = prm.m_tiles - 1 - shorter;
        if ((k & 1) && shorter == longer) continue;  // the middle tile of an odd count is a unit alone
        group = u / pairs;
        q_tile = (k & 1) ? shorter : longer;
      }
      body(make_work<Cfg, kCausal>(prm, cta_bh<Cfg>(prm, group), q_tile, split, splits), local++);
    }
  }
};

}  // namespace sdpa_warpspec
