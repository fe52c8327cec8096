/*
s13_turns: wherever two consumer warpgroups run a long-policy item, they take
turns on the tensor cores, whatever the sequence length (but dense head_dim
128, as before).

What it is
  s12_one_wave with the part TurnsPastMaxSeq (choose_plan in
  sdpa_persistent_plans.cuh): s8-s12 launch the pingpong instance (two
  warpgroups, one's softmax under the other's GEMMs) only up to the recipe's
  kTurnsMaxSeq keys (2048). Past that they launch three warpgroups at head_dim 64 when the wave
  count lets 192-row items pay (wgs3_pays_off), and otherwise two warpgroups
  side by side with no turns. s13 keeps the first two choices and makes the
  last one take turns, and so does s12's few-items launch (Unpaired).

Changes vs parent s12_one_wave, and why
  - kTurnsMaxSeq came from s8's trial at 4096 keys, head_dim 64, where
    the turns lost to three warpgroups ((4,16,4096,64)); at 2048 keys they
    beat two warpgroups without turns at both head dims. Two warpgroups
    without turns past 2048 keys were never measured against the turns.
  - That is the launch of SDXL's self-attention (2x10x4096x64: 440 items of
    192 rows are 3.3 waves on 132 SMs, so two warpgroups' 640 items of 128
    rows run instead), the one models.yaml shape where cuDNN and
    FlashAttention-4 lead; of Llama-3's causal 8k prefill; and of the cached
    prefix's one wave of 128 items, whose each block walks 32 key tiles.
  - A long item is where turns should pay most: the softmax of one
    warpgroup hides under the other's GEMMs on every key tile, with no item
    boundary to break the rhythm.
  - The cost: a turn handoff (two named barriers) per key tile; dense head_dim
    128 keeps its two warpgroups side by side (turns measured slower there).

Composition: Recipe + QRing + OneWaveShort + TurnsPastMaxSeq.

Run: stagelab run --stage s13_turns --params params/models.yaml
*/
#define SDPA_GENERAL_PROBLEM 1
#include "sdpa_persistent_split.cuh"

SDPA_COMPOSED_STAGE(s13_turns, QRing, OneWaveShort, TurnsPastMaxSeq)
