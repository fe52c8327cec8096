/*
s14_kv_multicast: grouped-query attention at head_dim 128 loads each K/V tile
once for two query heads of a group: a cluster of two CTAs, one per head,
shares the tile by TMA multicast.

What it is
  s13_turns with the part KvMulticastTurns (turns_plan in
  sdpa_persistent_plans.cuh, sdpa_warpspec_config.cuh's KvMulticast): where s13 launches two warpgroups
  taking turns at head_dim 128 (every causal prefill, the few-items launch
  of a cached prefix) and the group size (heads / kv_heads) is even, the
  persistent grid runs clusters of two CTAs. WorkOrder walks the cluster's
  units in lockstep: CTA r takes query head 2j + r of the same query tile,
  so both need the same K/V head and the same key tiles.
  - Each CTA's producer loads half of every K/V tile's rows (a box of
    BLOCK_N / 2 rows) by multicast into both CTAs; each CTA's "full" barrier
    expects the whole tile.
  - Each consumer warp frees a slot in both CTAs (a remote mbarrier arrive),
    so a slot's "empty" barrier counts both CTAs' warps, and neither producer
    refills it before both have read it.
  - Cluster barriers after the barrier inits and before exit keep every
    remote arrival on live shared memory.

Changes vs parent s13_turns, and why
  - In s8-s13 the query heads of a group are adjacent work items, so their
    K/V tiles come from L2, once per query head. Llama-3-8B's prefills
    (32 query heads over 8 K/V heads) read every K/V tile four times; at
    head_dim 128 a 128-key K/V tile is 64 KiB for 8 MFLOP of the tile's
    GEMMs, so at the rates models.yaml's cached prefix runs the SMs pull
    K/V from L2 at several TB/s. Multicast halves those reads.
  - The cost: a cluster barrier at entry and exit, remote arrivals per slot,
    and a pair of CTAs that wait for the slower one at every refill.
  - Issue 31 names this (or FlashAttention-3's packed heads, which fill an M
    tile with the heads of a group but read the same K/V bytes per tile at
    these query lengths).

Composition: s13's parts + KvMulticastTurns. The multicast launch needs an
even group size; other problems run s13's code.

Run: stagelab run --stage s14_kv_multicast --params params/models.yaml
*/
#define SDPA_GENERAL_PROBLEM 1
#include "sdpa_persistent_split.cuh"

SDPA_COMPOSED_STAGE(s14_kv_multicast, QRing, OneWaveShort, TurnsPastMaxSeq, KvMulticastTurns)
