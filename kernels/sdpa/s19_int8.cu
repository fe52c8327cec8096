/*
s19_int8: attention on 8-bit operands, on s18's composed parts: Q.K^T on
int8 x int8 wgmma with exact int32 accumulation, P.V on e4m3 wgmma into O
over the whole row, on V smoothed by its mean.

What it is
  The mainloop, epilogue and schedulers of the persistent stages
  (mainloop/, epilogue/, sched/) with the operand policy Int8Qk
  (int8/operands.cuh): int8 Q and K tiles of one 64- or 128-byte swizzle
  row, V as Vt (e4m3, [D][keys], the keys of each 32 in P's fragment
  order), and the tile Int8Tile (int8/tile.cuh) in WgAttentionTile's
  place. The quantizer (lib/stagelab/families/sdpa/int8/) smooths K and
  V by their means over the keys, scales Q per 64 rows (a warpgroup's)
  and K per 128 keys (a tile's) into int8, and V per channel into e4m3;
  the epilogue adds V's mean back (P's rows sum to l); the stage
  also exports it as kernels (int8/quantize.cuh, sdpa_int8_quantize),
  timed with the attention as the stage's `quantizing` launch.

Changes vs parent s18_three_turns, and why
  - e4m3 wgmma keeps about 22 bits of its accumulator and truncates, so
    s9's Q.K^T had to go back to fp16 and FP8 bought nothing (issue 28).
    int8 runs at the e4m3 rate and its int32 sum is exact: the descales
    (the warpgroup's Q block, the tile's K block, the softmax scale and
    log2(e)) fold into the exponent's one multiply per score.
  - P.V keeps e4m3 (P in [0, 2^8], V less its mean, per channel), and O
    accumulates over the row (FlashAttention-3's FP8): the truncating
    sum drifts on one-signed V, but smoothed V's terms take both signs,
    so it is as accurate as a sum promoted per key tile, and it frees
    the registers that fit a third warpgroup at head_dim 64. Its rescale
    is skipped by a warp whose rows' maxima did not grow
    (int8/pv_accumulation.cuh says which trials chose what).
  - Scores stay as int32 plus a float offset's bits through the max (one
    integer add per score) where the scale is positive and its multiplier
    small enough that the offset's rounding cannot bias a tile's weights
    (int8/tile.cuh's kMagicMulMax; large scores convert exactly).
  - The long policy runs its warpgroups in turns (the softmax costs what
    it does at 16 bits while the GEMMs take half the time): two at
    head_dim 128, three at 64; four ring stages hold what the 16-bit
    rings' bytes hold. Problems with fewer 128-row items than SMs take
    s12's key split by s12's rule (int8/plans.cuh): there each item's
    chain of key tiles, not the SMs, set the time. Its rings keep the
    16-bit stage count. Two warpgroups at head_dim 64 by the wave count,
    as s18 has them, lost or tied (trial s19_int8_d64_fewer_wgs_by_waves).

Composition: s18's parts without InterleavedSoftmaxD128 and ThreeTurnsByModel
(the int8 tile has one softmax order) + Int8Operands (int8/launch.cuh).

Run: stagelab run --stage s19_int8 --params params/acceptance.yaml
*/
#define SDPA_GENERAL_PROBLEM 1
#include "int8/plans.cuh"

namespace sdpa_persistent::composed {
using namespace sdpa_persistent;
using s19_int8 = Compose<Recipe, QRing, OneWaveShort, TurnsPastMaxSeq, CausalSnake, sdpa_int8::Int8Operands>;
}  // namespace sdpa_persistent::composed

SDPA_INT8_STAGE("s19_int8", sdpa_persistent::composed::s19_int8)
