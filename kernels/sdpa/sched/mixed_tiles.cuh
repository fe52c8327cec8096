// sched/mixed_tiles.cuh -- the scheduler of three warpgroups taking turns (s18), non-causal: each
// (batch, head)'s rows cut into Params::big_tiles items of kBlockM rows, then items of one warpgroup's
// fewer; one list of every (batch, head)'s big items, then every one's short items, dealt round by
// round to the blocks, round k forward, or with Params::turns_snake backward when k is odd. Its host
// half (plan, over plan_three_turns, the model below) picks the cut and the deal per launch.
#pragma once

#include <algorithm>
#include <vector>

#include "work_tile.cuh"

namespace sdpa_warpspec {

// Why that list:
// - Without short items (BERT-base 512: 192 + 192 + 128 rows): a (batch, head)'s last item may hold
//   fewer rows than the others, and fewer warpgroups with rows run it faster. Dealt head by head,
//   block b would take tile b % m_tiles in every round wherever the grid is a multiple of m_tiles
//   (132 = 44 x 3: a third of the blocks only the short tiles), so each (batch, head)'s tiles are
//   rotated by the round its first item lands in (constant per (batch, head): still each tile once).
// - With short items, in the snake (SDXL self: 14 big and 11 short items a head): the short items
//   come last and even out the rounds' raggedness.
template <class Cfg, bool kCausal>
constexpr bool kMixedTiles = Cfg::kPingpong && Cfg::kConsumerWGs == 3 && !kCausal && Cfg::kMulticastCtas == 1;
// Position q of that list on `grid` blocks: its (batch, head) and tile index.
__host__ __device__ __forceinline__ void mixed_item(int q, int m_tiles, int big_tiles, int big_items, int grid, int& bh,
                                                    int& tile) {
  if (q < big_items) {
    bh = q / big_tiles;
    tile = (q % big_tiles + bh * big_tiles / grid) % big_tiles;
  } else {
    const int small_tiles = m_tiles - big_tiles;
    bh = (q - big_items) / small_tiles;
    tile = big_tiles + (q - big_items) % small_tiles;
  }
}
// Tile `tile`'s first row when a (batch, head)'s first big_tiles tiles hold big_rows rows and the
// others one warpgroup's fewer (tile m_tiles: where the rows end, before clipping to seq_len).
__host__ __device__ __forceinline__ int mixed_tile_begin(int tile, int big_tiles, int big_rows) {
  return tile < big_tiles ? tile * big_rows : big_tiles * big_rows + (tile - big_tiles) * (big_rows - kWgmmaM);
}
// Tile `tile` of (batch, head) `bh` under mixed tiles; its end row is rows_end's (sdpa_warpspec.cuh).
template <class Cfg, bool kCausal>
__device__ __forceinline__ WorkTile make_mixed_work(const Params& prm, int bh, int tile) {
  WorkTile t = make_work<Cfg, kCausal>(prm, bh, 0, 0, 1);  // non-causal: every item the same key tiles
  t.q_begin = mixed_tile_begin(tile, prm.big_tiles, Cfg::kBlockM);
  return t;
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

template <class Cfg, bool kCausal>
struct MixedTiles {
  static_assert(kMixedTiles<Cfg, kCausal>, "mixed tiles: three warpgroups in turns, non-causal, no multicast");

  // Host: the cut and the deal of plan_three_turns (remembered per problem).
  template <typename T, int D>
  static Schedule plan(const SdpaProblem& p, const SdpaDevice& device) {
    const TurnsPlan turns = cached_three_turns_plan<Cfg::kBlockM>(p, device.sms, kv_bytes_of<T, D>(p),
                                                                  static_cast<int>(device.l2_bytes));
    Schedule s;
    s.m_tiles = turns.m_tiles;
    s.big_tiles = turns.big_tiles;
    s.turns_snake = turns.snake ? 1 : 0;
    return s;
  }
  static const char* name(const Schedule& s) {
    return !Cfg::kPersistent ? "grid" : s.turns_snake ? "mixed-snake" : "mixed-rotated";
  }
  template <class Fn>
  static void each_schedule(Fn&& fn) {
    Schedule s;
    fn(s);
    if (Cfg::kPersistent) {
      s.turns_snake = 1;
      fn(s);
    }
  }

  __host__ __device__ static int units(const Params& prm) { return prm.work_items; }
  // body(tile, local) for each item of this block in order; local counts them (the Q buffer's phase).
  // One call site, as CausalPairs' walk.
  template <class Body>
  __device__ __forceinline__ static void for_each(const Params& prm, int split, int splits, Body&& body) {
    const int first = Cfg::kPersistent ? static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x) / splits;
    const int stride = Cfg::kPersistent ? static_cast<int>(gridDim.x) : prm.work_items;
    int local = 0;
    for (int k = 0;; ++k) {
      const int q = k * stride + ((prm.turns_snake != 0 && (k & 1)) ? stride - 1 - first : first);
      if (q >= prm.work_items) break;
      int bh, tile;
      mixed_item(q, prm.m_tiles, prm.big_tiles, prm.big_items, stride, bh, tile);
      body(make_mixed_work<Cfg, kCausal>(prm, bh, tile), local++);
    }
  }
};

}  // namespace sdpa_warpspec
