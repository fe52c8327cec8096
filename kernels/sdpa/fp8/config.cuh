// fp8/config.cuh -- the FP8 stage's compile-time choices and kernel parameters: WS_PDL's
// launch mode, Params (s6's warp-specialized Params plus the per-(batch, head) descales) and
// Fp8Config, the FP8 knobs on top of a warp-specialized Config (sdpa_warpspec_config.cuh).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "../sdpa_api.h"
#include "../sdpa_common.cuh"
#include "../sdpa_tma.cuh"
#include "../sdpa_warpspec.cuh"
#include "tile.cuh"

namespace sdpa_fp8 {

using namespace sdpa_wgmma;
using namespace sdpa_tma;

// Programmatic dependent launch, s9's WS_PDL (s9_fp8.cu): 0 off, 1 the trigger after the prologue, 2
// before the epilogue (sdpa_warpspec::Pdl).
static_assert(WS_PDL >= 0 && WS_PDL <= 2, "WS_PDL: 0 (plain launch), 1 (early trigger) or 2 (late trigger)");
constexpr sdpa_warpspec::Pdl kPdl = static_cast<sdpa_warpspec::Pdl>(WS_PDL);
constexpr bool kPdlOn = kPdl != sdpa_warpspec::Pdl::kOff;
using sdpa_warpspec::kBarBytes;
using sdpa_warpspec::WorkTile;

constexpr int kVtKeyPad = 64;  // S_pad: keys per Vt row rounded up to the pre-pass's key chunk

struct Params {
  sdpa_warpspec::Params ws;  // problem (e4m3 q/k, output), Q/K/Vt maps, work items
  const float* q_descale;
  const float* k_descale;
  const float* v_descale;
};

// The FP8 stage's knobs on top of the warp-specialized Config (Base):
// kFoldPScale, kPolyEvery, kRescaleThreshold, kRowSumMma and kEarlyPack as in WgFp8Tile (fp8/tile.cuh).
// kVtInKernel: V arrives by TMA as it is (keys x D) and the producer warpgroup's
// other three warps write Vt into shared memory (transpose_v_tile); no pre-pass.
template <class Base, bool kFoldPScale_, int kPolyEvery_, int kRescaleThreshold_ = 0, bool kRowSumMma_ = false,
          bool kVtInKernel_ = false, int kVtBatch_ = 1, bool kEarlyPack_ = false, bool kPvPromote_ = false,
          bool kQkF16_ = false>
struct Fp8Config : Base {
  static constexpr bool kQkF16 = kQkF16_;  // Q and K as fp16 copies, Q.K^T on fp16 wgmma
  static constexpr int kQkElemBytes = kQkF16_ ? 2 : 1;
  static constexpr bool kPvPromote = kPvPromote_;
  // WgFp8Tile's kPvPromote mode; PvPromoteHalves below overrides it (a member, not a template
  // argument: the default configs' types, and so their kernels' names and SASS, stay as they were)
  static constexpr int kPvPromoteMode = kPvPromote_ ? kPvPromoteTile : kPvPromoteOff;
  static constexpr bool kEarlyPack = kEarlyPack_;
  static constexpr bool kVtInKernel = kVtInKernel_;
  static constexpr int kVtBatch = kVtBatch_;  // units per transposing warp with loads in flight together
  static constexpr bool kRowSumMma = kRowSumMma_;
  static constexpr bool kFoldPScale = kFoldPScale_;
  static constexpr int kPolyEvery = kPolyEvery_;
  static constexpr int kRescaleThreshold = kRescaleThreshold_;
  static_assert(kPolyEvery_ >= 0, "0 = every exponential on MUFU, k = every k-th n8 tile on the FMA pipe");
  // The transposing warps hold a VtLane (6 registers), kVtBatch units' fragments (4 each) and
  // the ring state: at 24 registers ptxas spills 12-28 bytes (s9_fp8.cu, log v9), at 40 none.
  static constexpr int kTransposerRegs = 40;
  static_assert(!kVtInKernel_ || Base::kProducerRegs >= kTransposerRegs,
                "VT_IN_KERNEL: the producer warpgroup transposes V and needs PRODUCER_REGS >= 40");
};

// An Fp8Config whose P.V promotion goes by output column halves (kPvPromoteHalves, head_dim 128).
template <class Fp8Cfg>
struct PvPromoteHalves : Fp8Cfg {
  static constexpr int kPvPromoteMode = kPvPromoteHalves;
};

}  // namespace sdpa_fp8
