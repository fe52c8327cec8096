/*
s18_three_turns: at head_dim 64, a non-causal launch runs three consumer
warpgroups taking turns on 192-row items where a model of its blocks' loads
says that beats two on 128-row items.

What it is
  s17_interleaved_softmax with the part ThreeTurnsByModel (sdpa_persistent_split.cuh's
  ThreeTurnsConfig and three_turns_pay; mainloop/warpgroup.cuh's turn_barrier):
  the turns go round three warpgroups as FlashAttention-3's warp scheduler
  barriers do (warpgroup c waits on its own barrier and, its GEMMs issued,
  arrives on c+1's). the MixedTiles scheduler (sched/mixed_tiles.cuh's
  mixed_item) deal each (batch, head)'s items rotated by the round its first
  item falls in, or, where the host's plan_three_turns finds it better and
  K/V fit in L2, cut each head into 192-row and 128-row items and deal all
  big ones first, then the short ones, in a snake.

Changes vs parent s17_interleaved_softmax, and why
  - With two warpgroups at head_dim 64 a key tile's softmax (the timeline
    trials: about half of a middle tile's cycles) is longer than the other
    warpgroup's two GEMMs, so the tensor pipe waits for it every turn. With
    three, each softmax runs under two other warpgroups' GEMMs: more rows
    per unit of time, for the same main loop (tools/sass_loops.py: the
    two-warpgroup loop's instructions, no R2UR, no spills at 160 registers).
  - A 192-row item is coarser: a head of 512 rows is 192 + 192 + 128, of 197
    rows 192 + 5, and 132 blocks then deal whole rounds of them. Where the
    grid is a multiple of the tiles per head, plain stripes give each block
    the same tile in every round (a third of the blocks at BERT-base 512
    run only the 128-row ones); the rotation cycles every block through
    them.
  - The host compares the busiest block of both launches, tile costs
    calibrated on s17's trials (three_turns_pay's comment); three
    warpgroups where that gains at least 2% (BERT-base 512 in rotated
    rounds, SDXL self-attention in the snake of big and short items), two
    elsewhere (ViT's 197 rows, every causal launch). `stagelab coverage
    s18_three_turns` prints which plan each problem takes.

Composition: s17's parts + ThreeTurnsByModel (the recipe's kTurnsWgs64 = 0;
2 is s17's two warpgroups everywhere, 3 three on every head_dim-64 turns
launch, its trials).

Run: stagelab run --stage s18_three_turns --params params/models.yaml
*/
#define SDPA_GENERAL_PROBLEM 1
#include "sdpa_persistent_split.cuh"

SDPA_COMPOSED_STAGE(s18_three_turns, QRing, OneWaveShort, TurnsPastMaxSeq, CausalSnake, InterleavedSoftmaxD128, ThreeTurnsByModel)
