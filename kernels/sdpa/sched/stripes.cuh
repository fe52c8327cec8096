// sched/stripes.cuh -- the plain scheduler: item w of the flat order (of a cluster's head groups),
// query tiles of one (batch, head) consecutive and in descending order (causal: longest first); a
// persistent block takes items first, first + grid, ... ("stripes"), a non-persistent grid one block
// (or split cluster) per item ("grid"). The host has nothing to choose.
#pragma once

#include "work_tile.cuh"

namespace sdpa_warpspec {

// Item w of the flat order; s9 runs one block per item.
template <class Cfg, bool kCausal>
__device__ __forceinline__ WorkTile decode_work(const Params& prm, int w, int split, int splits) {
  return make_work<Cfg, kCausal>(prm, cta_bh<Cfg>(prm, w / prm.m_tiles), prm.m_tiles - 1 - w % prm.m_tiles, split,
                                 splits);
}

template <class Cfg, bool kCausal>
struct Stripes {
  static constexpr int kCtas = Cfg::kMulticastCtas;  // a K/V multicast cluster walks one unit (cta_bh)

  // Host: the items of kBlockM rows, nothing else to choose.
  template <typename T, int D>
  static Schedule plan(const SdpaProblem& p, const SdpaDevice&) {
    Schedule s;
    s.m_tiles = sdpa_ceil_div(p.seq_len, Cfg::kBlockM);
    return s;
  }
  static const char* name(const Schedule&) { return Cfg::kPersistent ? "stripes" : "grid"; }
  template <class Fn>
  static void each_schedule(Fn&& fn) {
    fn(Schedule{});
  }

  __host__ __device__ static int units(const Params& prm) { return prm.work_items / kCtas; }
  // body(tile, local) for each item of this block in order; local counts them (the Q buffer's phase).
  template <class Body>
  __device__ __forceinline__ static void for_each(const Params& prm, int split, int splits, Body&& body) {
    const int first = Cfg::kPersistent ? static_cast<int>(blockIdx.x) / kCtas : static_cast<int>(blockIdx.x) / splits;
    const int stride = Cfg::kPersistent ? static_cast<int>(gridDim.x) / kCtas : prm.work_items;
    int local = 0;
    for (int w = first; w < units(prm); w += stride) body(decode_work<Cfg, kCausal>(prm, w, split, splits), local++);
  }
};

}  // namespace sdpa_warpspec
