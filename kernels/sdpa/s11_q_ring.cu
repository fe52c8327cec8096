/*
s11_q_ring: two Q buffers per persistent block, so a work item's Q, and the
first K/V tiles behind it, land while the previous item still computes.

What it is
  s10_general with the part QRing (sdpa_persistent_recipe.cuh), which wraps
  the long policy's configs in sdpa_warpspec_config.cuh's QRing: work item n of a block uses Q buffer n % 2 with
  its own full/empty mbarrier pair, in phase (n / 2) & 1. The epilogue still
  stages O through its item's Q buffer and frees it with "empty_q"; the
  producer waits for that release only before it reuses the buffer two items
  later.

Changes vs parent s10_general, and why
  - With one Q buffer the producer cannot issue item n+1's Q until item n's
    epilogue has staged O through the buffer and freed it; its K/V tiles wait
    behind that Q in the producer's in-order stream. Every item boundary then
    exposes a Q load and a first K load end to end.
  - Short sequences are many short items: ViT-B/16's 197 tokens are two
    128-row items per head with two key tiles each, 1536 items at batch 64,
    about 12 per SM. There the boundary is a large share of an item; at
    thousands of keys per item it is not, so the long shapes should not move.
  - The cost is one more Q tile of shared memory (16 KiB at head_dim 64 with
    two consumer warpgroups, 32 KiB at 128), which every long-policy config
    still fits beside its K/V rings.

Composition: Recipe + QRing. The short policy (one item per block, the
mission shape) is s10's.

Run: stagelab run --stage s11_q_ring --params params/models.yaml
*/
#define SDPA_GENERAL_PROBLEM 1
#include "sdpa_persistent_split.cuh"

SDPA_COMPOSED_STAGE(s11_q_ring, QRing)
