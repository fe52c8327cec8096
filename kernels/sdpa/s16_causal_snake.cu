/*
s16_causal_snake: a persistent causal launch deals its items longest first,
in a snake over the blocks, where that balances the SMs better than causal
pairs and every head's K and V fit in L2.

What it is
  s13_turns with the part CausalSnake (sched/causal_pairs.cuh's CausalPairs:
  its walk and its host plan, snake_pays). s8-s15 stripe causal pairs over
  the persistent blocks: a unit is query tiles j and m-1-j of one head, about
  m+1 key tiles whatever j, so the blocks balance up to whole units. s16
  lists every item longest first (each head's last query tile, then the ones
  before) and deals round k to blocks 0..grid-1 when k is even and
  grid-1..0 when odd. The host picks per launch: the snake where the item
  model of tools/schedule_balance.py gives its busiest block at least 1%
  less than pairs', and K and V of all heads take at most 3/4 of L2.

Changes vs parent s13_turns, and why
  - ncu at Llama-3-8B's 8k causal prefill (1x32x8192x128, 8 K/V heads;
    tools/ncu_compare.py, H100) puts s13's tensor pipe at the same busy
    share of its active cycles as FlashAttention-4's, over a longer kernel:
    FA4 runs 2048 single-item blocks that the hardware hands out as SMs free
    up, s13 runs 1024 equal pairs on 132 blocks, 7.76 of them per block on
    average and 8 on the busiest (0.97 balance).
  - A list that ends in its shortest items lets every block finish within
    about one short item of the others (1.00 by the model at 8k and at
    (4,16,4096,128) causal).
  - The cost: the snake runs every head at once, where pairs run a few
    heads' items together, so K/V reuse in L2 needs all of K and V to fit:
    the trial with the snake everywhere gained at 8k (34 MB of K/V) and lost
    at (4,16,4096,128) causal (134 MB). Where the model gives no gain (the
    2k prefills: 128 items per length, under one wave) pairs stay.

Composition: s13's parts + CausalSnake, a body policy (the Config's
kCausalSnake); without it, causal pairs everywhere.

Run: stagelab run --stage s16_causal_snake --params params/causal_long.yaml
*/
#define SDPA_GENERAL_PROBLEM 1
#include "sdpa_persistent_split.cuh"

SDPA_COMPOSED_STAGE(s16_causal_snake, QRing, OneWaveShort, TurnsPastMaxSeq, CausalSnake)
