/*
s15_deferred_epilogue: a persistent block's two consumer warpgroups store an
item's O only after issuing the next item's first Q.K^T, so the epilogue runs
under tensor-core work instead of between two items.

What it is
  s13_turns with the part DeferredEpilogue (sdpa_warpspec_config.cuh's DeferEpilogue,
  epilogue/epilogue.cuh's store_deferred): on every long-policy config of two
  consumer warpgroups (the turns and the side-by-side ones), a warpgroup that
  finishes an item's last P.V keeps O in its accumulators and moves on to the
  next item. It waits for the next Q, issues the first Q.K^T, and only then
  normalises, stages and stores the finished O (in the finished item's Q
  buffer, which the next item does not use: two Q buffers, s11), while that
  wgmma and the other warpgroup's turn run. O is zeroed before the first P.V.
  The last item of a block stores after its loop, as before.

Changes vs parent s13_turns, and why
  - s13's launch timeline of ViT-B/16 (64x12x197x64, two key tiles per item;
    tools/microbench/sdpa_timeline.cu) shows the gap between one item's last
    P.V and the next item's first key tile at more than twice one key tile's
    S and softmax: the epilogue (normalise, stage, store) sits on that
    boundary, with both warpgroups' tensor-core work stopped, once per item.
  - Short items pay it most often: ViT (2 key tiles), BERT-base at 512 tokens
    (4 key tiles, 12 items a block), where s13 is level with cuDNN.
  - The cost: O of the finished item stays live until the next item's first
    Q.K^T is issued (registers a middle tile holds anyway), and the
    next-but-one Q waits for the deferred store to free its buffer.

Composition: s13's parts + DeferredEpilogue (without it, each item's
epilogue right after its last P.V).

Run: stagelab run --stage s15_deferred_epilogue --params params/models.yaml
*/
#define SDPA_GENERAL_PROBLEM 1
#include "sdpa_persistent_split.cuh"

SDPA_COMPOSED_STAGE(s15_deferred_epilogue, QRing, OneWaveShort, TurnsPastMaxSeq, DeferredEpilogue)
