/*
s12_one_wave: the short policy's key split only while all its blocks run in
one wave; otherwise the long policy, one item per block when there are fewer
items than SMs.

What it is
  s11_q_ring with the part OneWaveShort (sdpa_persistent_split.cuh's
  use_long_policy, the few_long branch of sdpa_persistent_plans.cuh): when the long policy's 128-row items do not fill the SMs,
  s8-s11 always take the short policy (64-row tiles, two warpgroups splitting
  each tile's keys). s12 takes it only if those key-split blocks fit one wave
  (one block per SM); past that it launches the long policy with its causal
  pairs off (Unpaired, sdpa_warpspec_config.cuh), so each of the few items
  gets a block of its own.

Changes vs parent s11_q_ring, and why
  - The key split halves the chain of key tiles each warpgroup walks, but a
    warpgroup gets only every other ring slot (one at head_dim 128, so no
    load runs ahead of its math). That trade wins for the mission shape: 128
    blocks, one wave, four key tiles. A prefill after a cached prefix (512
    queries over 4096 keys, 32 heads) is 256 key-split blocks, two waves on
    132 SMs, of 32 key tiles each: the halved chain is doubled back by the
    second wave, and each tile waits for its own load.
  - The long policy there has 128 items of 128 rows: one wave, with s11's
    full rings and two Q buffers. Its causal pairs (tiles j and m-1-j on one
    block) balance many unequal causal items; with fewer items than SMs they
    would halve the blocks, so those launches take items one by one.
  - Problems with at least a wave of long items, and one-wave short problems,
    run s11's code unchanged.

Composition: Recipe + QRing + OneWaveShort; without the last part, s11's
rule (the short policy whenever the long items do not fill the SMs).

Run: stagelab run --stage s12_one_wave --params params/models.yaml
*/
#define SDPA_GENERAL_PROBLEM 1
#include "sdpa_persistent_split.cuh"

SDPA_COMPOSED_STAGE(s12_one_wave, QRing, OneWaveShort)
