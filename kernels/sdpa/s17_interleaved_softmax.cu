/*
s17_interleaved_softmax: at head_dim 128 a consumer warpgroup's softmax runs
in FlashAttention-4's order, with P's packing, O's rescale and the row sums
interleaved with the exponentials.

What it is
  s16_causal_snake with the part InterleavedSoftmaxD128 (sdpa_wgmma_tile.cuh's
  softmax_interleaved, mainloop/consumer.cuh's middle_tile): on a key tile whose
  predecessor's P.V still runs, the warpgroup takes the row maxima, the
  exponentials of the first two n8 tiles, then the P.V's wait (a basic-block
  boundary whose condition reads those exponentials' sums keeps it there),
  O's rescale, and the other exponentials with each k16 slice of P packed as
  soon as its two n8 tiles are out and the row sums fed into two chains per
  row (even and odd columns). Head_dim 64 and the 232-register short policy
  keep s16's order.

Changes vs parent s16_causal_snake, and why
  - ncu's sampled program counters at Llama-3-8B's 8k prefill (H100,
    tools/ncu_compare.py --source) show s13/s16 and FlashAttention-4 issuing
    the same exponentials, maxima and FFMAs, but s16 ends each softmax in a
    pairwise sum tree and 32 packs after the last exponential, whose FADDs
    and F2FPs wait on their inputs; FA4 spreads them (and O's rescale)
    between its exponentials, which the MUFU pipe paces anyway.
  - In pingpong a warpgroup's softmax and packing must end before its next
    turn, so the tail after the last exponential is on the critical path.
  - The cost: the P.V's wait moves from after the softmax to after its first
    exponentials. At head_dim 64, where the P.V is half as long and the
    softmax as long as the GEMMs, the short items (ViT, SDXL) measured slower
    with it (its trial on s16), so s17 leaves head_dim 64 alone.

Composition: s16's parts + InterleavedSoftmaxD128, a body policy (the
Config's kSoftmaxOrder; SoftmaxOrder::kInterleaved would take head_dim 64
too); two n8 tiles are exponentiated before the P.V's wait.

Run: stagelab run --stage s17_interleaved_softmax --params params/causal_long.yaml
*/
#define SDPA_GENERAL_PROBLEM 1
#include "sdpa_persistent_split.cuh"

SDPA_COMPOSED_STAGE(s17_interleaved_softmax, QRing, OneWaveShort, TurnsPastMaxSeq, CausalSnake, InterleavedSoftmaxD128)
