/*
s8_persistent_split: a persistent longest-first grid for long sequences, and a
key split inside each short-sequence block, on s7's warp-specialized kernel.

What it is
  Two policies of sdpa_warpspec.cuh, picked per problem at launch
  (sdpa_persistent_plans.cuh's choose_plan; FORCE_POLICY pins one):
  - Long (at least one wave of 128-row work items): persistent, one block per
    SM walking work items i, i + grid, ... (a head's query tiles together,
    descending, so causal blocks start with their longest items; causal
    blocks take tiles j and m-1-j in pairs). The K/V ring position and the Q
    buffer's phase carry across items ("empty_q" frees Q once the epilogue
    has staged O through it), so the next item's loads overlap this item's
    math. Two consumer warpgroups; at head_dim 64 two or three by the wave
    count (wgs3_pays_off); s7's turns for sequences up to PINGPONG_MAX_SEQ
    keys, dense head_dim 128 excepted.
  - Short (fewer items than SMs, the mission shape): 64-row query tiles. By
    default two consumer warpgroups share each tile's keys (ring index i
    belongs to warpgroup i % 2); warpgroup 1 parks its partial O, row max and
    row sum in shared memory and warpgroup 0 merges and stores. Without the
    key split: one consumer warpgroup, two blocks per SM, and optionally the
    keys split over a thread-block cluster of 2 or 4 CTAs whose partials rank
    0 merges through distributed shared memory (mapa + ld.shared::cluster).
  - Programmatic dependent launch: each block waits for the previous grid
    before its first global access and lets the next launch in before its
    epilogue, so the next grid's dispatch and prologue overlap this tail.

Changes vs parent s7_pingpong, and why
  - Launch and tail: a non-persistent grid pays a block launch and a cold
    prologue per work item and ends in a ragged last wave; the persistent
    producer overlaps the next item's loads with the current item's math.
  - Short sequences are latency-bound: a block's time is the chain of its
    per-tile steps, not its FLOPs. Splitting a tile's keys over two
    warpgroups halves the chain for the price of one merge in shared memory.
  - Causal work is balanced by pairing query tiles; the O rescale at
    head_dim 128 is skipped until a row's max grows past a threshold.
  Trials of this stage (measured variants, valid negatives) are runs in its
  MLflow record (`stagelab journal s8_persistent_split`); knobs removed as
  recorded negatives are patches in docs/results/sdpa/history/patches.

Composition: s8's own recipe, sdpa_persistent_recipe.cuh's Recipe with these
members read from its tunables (-D; stages.yaml's defines give every value,
its search space and variants the others; the file states none):
  KEY_SPLIT_WGS          short policy: 2 = the key split, 1 = one warpgroup per tile
  KEY_SPLIT_BLOCK_N      the key split's keys per tile, 64 or 128; each K and V
                         ring holds 64 KiB
  SPLITS                 without the key split: CTAs per cluster sharing a tile's
                         keys, 1, 2, 4 or 0 (by the SM count)
  CONSUMER_WGS_D64       long policy at head_dim 64: 2, 3, or 0 (by waves)
  WS_RESCALE_THRESHOLD_D128  O rescaled when a row max grows by more than 2^t at
                         head_dim 128 (0: every tile)
  PINGPONG_MAX_SEQ       longest sequence whose long-policy items take turns (0: never)
  WS_PDL                 0 plain launches, 1 PDL trigger after the prologue, 2 PDL
                         trigger before the epilogue
  FORCE_POLICY           0 by shape, 1 long, 2 short (sanitizers, notebook)
  The long policy's tiles, rings and register split are the Recipe's (s6's values).

Shared memory: long as s7; short (64 + 4*128) * D * 2 + barriers + 1024.
  Key split: (64 + 2 * stages * BLOCK_N) * D * 2 + barriers + the parked
  partial (128 * (D/2 + 4) * 4) + 1024.

Scope: as s6: head_dim 64 and 128, fp16 and bf16, causal or not, any
  seq_len >= 1 and scale, 16-byte-addressable strides (cudaErrorInvalidValue
  otherwise, before launch).

Run: stagelab run --stage s8_persistent_split
Build / SASS (UTMALDG, HGMMA, SYNCS, USETMAXREG; LDS/LD through mapa for DSMEM):
  stagelab resources s8_persistent_split (nvcc with the registry's defines)
*/
#include "sdpa_persistent_split.cuh"

// s8's tunables: stages.yaml's compile_options.defines give their values (its search space and
// variants the others); the file states none, so a build without them is an error, not a default.
#if !defined(KEY_SPLIT_WGS) || !defined(KEY_SPLIT_BLOCK_N) || !defined(SPLITS) || !defined(CONSUMER_WGS_D64) || \
    !defined(PINGPONG_MAX_SEQ) || !defined(WS_PDL) || !defined(WS_RESCALE_THRESHOLD_D128) || !defined(FORCE_POLICY)
#error "s8_persistent_split: build it with its registry defines (stagelab build s8_persistent_split)"
#endif

namespace {
using namespace sdpa_persistent;
struct S8 : Recipe {
  struct Body : Recipe::Body {
    static_assert(WS_PDL >= 0 && WS_PDL <= 2, "WS_PDL: 0 (plain launch), 1 (early trigger) or 2 (late trigger)");
    static constexpr Pdl kPdl = static_cast<Pdl>(WS_PDL);
    static constexpr int kRescaleThresholdD128 = WS_RESCALE_THRESHOLD_D128;
  };
  static constexpr int kKeySplitWgs = KEY_SPLIT_WGS;
  static constexpr int kKeySplitBlockN = KEY_SPLIT_BLOCK_N;
  static constexpr int kSplits = SPLITS;
  static constexpr int kLongWgs64 = CONSUMER_WGS_D64;
  static constexpr int kTurnsMaxSeq = PINGPONG_MAX_SEQ;
  static_assert(FORCE_POLICY >= 0 && FORCE_POLICY <= 2, "FORCE_POLICY: 0 by shape, 1 long, 2 short");
  static constexpr Policy kForcePolicy = static_cast<Policy>(FORCE_POLICY);
};
}  // namespace

SDPA_PERSISTENT_STAGE("s8_persistent_split", S8)
