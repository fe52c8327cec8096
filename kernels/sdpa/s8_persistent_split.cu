/*
s8_persistent_split: a persistent grid with a longest-first tile scheduler
for long sequences, and split-KV over thread-block clusters for short ones,
on s7's pingpong kernel.

What it is
  Two policies of sdpa_warpspec.cuh, picked per problem at launch:
  - Long (>= one wave of 128-row work items, items = ceil(S/128) * H * B):
    persistent. grid = number of SMs; block i takes work items i, i + grid,
    ... in the order (query tile descending, head, batch), so for causal
    attention every block starts with the longest items and ends with the
    shortest (longest-first, statically striped). The K/V ring position and
    the Q buffer's phase carry across items: the producer loads the next
    item's Q as soon as the epilogue has staged O out of the Q buffer
    ("empty_q" mbarrier) and its first K/V tiles while the consumers finish
    the previous item. Two consumer warpgroups in pingpong (s7).
  - Short (fewer items than SMs, the mission shape): 64-row query tiles (one
    consumer warpgroup), and the key range of each tile split across a
    thread-block cluster of 2 or 4 CTAs (cudaLaunchKernelEx with a cluster
    dimension). Each CTA attends to a contiguous share of the key tiles and
    parks its unnormalised O (fp32), row max and row sum in its own shared
    memory (over its drained K/V ring); rank 0 reads the peers' partials
    through distributed shared memory (mapa + ld.shared::cluster), rescales
    them to the merged row max and stores the normalised O. Two blocks per
    SM (launch bounds cap registers at 128 on entry; setmaxnreg 24/232).
    Mission (2,8,512,64): 128 tiles of 64 rows (s7: 64 blocks of 128 rows);
    with SPLITS=2, 256 CTAs of two 128-key tiles each.

Changes vs parent s7_pingpong, and why
  - Launch and tail: a non-persistent grid pays a block launch and a cold
    prologue (barrier init, tensor-map prefetch, Q load) per work item and
    ends in a ragged last wave; the persistent producer overlaps the next
    item's loads with the current item's math.
  - Short sequences are latency-bound: each block walks its key tiles one
    after another, so the time is the chain of per-tile steps, not the FLOPs;
    splitting keys shortens the chain and fills the SMs that 128-row blocks
    leave idle, at the cost of one DSMEM combine.

Knobs (-D overrides)
  BLOCK_N_D64=128, BLOCK_N_D128=128, STAGES_D64=3, STAGES_D128=2: the long
                        policy's tiles and ring depth (as s6/s7)
  WS_RESCALE_THRESHOLD_D128=8, WS_RESCALE_THRESHOLD_D64=0
                        conditional O rescale (log2 units; 0 = every tile):
                        a warp keeps its rows' running max, and skips the
                        64 FMULs of O's rescale, until some row's tile max
                        exceeds it by more than 8 (p < 2^8 in fp16/bf16; O
                        and the row sum share the kept max, so O / l is
                        unchanged). Hypothesis, from tools/ncu_compare.py on
                        an H100 at (2,8,2048,128): s8 issued 17.9 M warp
                        instructions where FlashAttention-4 issued 15.6 M
                        for the same work, about 70 more per warp per key
                        tile, the size of the rescale; FA4 rescales only when
                        the max moves. Measured (H100, commit 6033f21,
                        quick_check throughput, TFLOP/s, off / 8, cuDNN and
                        FA4 in the same run):
                        (2,8,2048,128) 577 / 602 (592, 624),
                        (4,16,4096,128) 573 / 589 (582, 614),
                        (1,32,8192,128) 612 / 631 (606, 660),
                        (4,16,4096,128) causal 528 / 558 (502, 570),
                        (2,8,2048,128) causal 475 / 483 (328, 507);
                        head_dim 64 lost: (4,16,4096,64) 466 / 454,
                        (2,8,2048,64) causal 316 / 308, mission 6.71 / 6.95
                        us (its rescale is 32 FMULs, under the vote and the
                        branch), so 8 at head_dim 128 only (2026-11-23).
                        ncu at (2,8,2048,128): warp instructions 17.92 ->
                        16.18 M (FA4 15.62), tensor pipe 67.1 -> 69.8%,
                        dispatch stalls per issue 1.00 -> 0.48. Checks:
                        52/52, worst error/budget 0.240 either way. Raw:
                        docs/results/sdpa/archive/rescale-threshold-*.
  DENSE_BLOCK_N_D128=0  keys per K/V tile of the long policy at head_dim 128
                        without a causal mask (0: BLOCK_N_D128; 176 or 192: a
                        wider S wgmma, m64n176k16 / m64n192k16). Hypothesis:
                        FlashAttention-3 picks 128 x 176 for dense head_dim 128
                        (and 128 for causal); fewer, longer key tiles spend less
                        per key on ring barriers, row-max trees and the O
                        rescale. 0 spills at 240 registers once the epilogue's
                        addresses stay in the epilogue (sdpa_wgmma_tile.cuh,
                        store_o). H100, quick_check, throughput, TFLOP/s,
                        default / 176 / 192 (cuDNN, FA4 in the same run):
                        (1,32,8192,128) 583 / 598 / 582 (583, 636),
                        (4,16,4096,128) 560 / 562 / 550 (568, 599),
                        (2,8,2048,128) 573 / 555 / 539 (581, 627);
                        BLOCK_N_D128=176 for causal too: (2,8,2048,128) causal
                        474 -> 425, (4,16,4096,128) causal 512 -> 499. A valid
                        negative where it matters: 176 gains 2.6% at 8192 keys
                        and loses 3% at 2048 (12 tiles of 176 cover 2112 keys:
                        3% of the work is masked); the default stays 0.
                        Variant dense_n176.
                        Raw output: docs/results/sdpa/archive/dense-block-n-
                        quick-check-nvidia-h100-2026-11-23-fifth.txt.
                        Twelfth session, after FlashAttention-4 was seen at
                        s8's clock (1646 vs 1639 MHz at (4,16,4096,128), 1508
                        vs 1501 at (1,32,8192,128); archive/fa4-clocks-quick-
                        check-*-twelfth.txt), i.e. 4-6% ahead per clock:
                        FlashAttention-3's whole dense head_dim-128 choice,
                        176-key tiles with pingpong (PINGPONG=1,
                        CONSUMER_WGS_D64=2, DENSE_BLOCK_N_D128=176; 0 spills).
                        H100, quick_check, TFLOP/s, default / 176+pingpong /
                        pingpong / 176: (4,16,4096,128) 596 / 587 / 598 / 581,
                        (1,32,8192,128) 639 / 635 / 626 / 636, (2,8,2048,128)
                        605 / 596 / 610 / 571, causal (4,16,4096,128) 560 /
                        571 / 570 / 553; 52/52 and 6/6 each. Nothing outside
                        the spread: the gap to FlashAttention-4 is not its tile
                        or its turns. Raw output: docs/results/sdpa/archive/
                        fa3-dense-config-quick-check-nvidia-h100-2026-11-24-
                        twelfth.txt.
                        tools/ncu_compare.py --source at (4,16,4096,128), same
                        call (H100): s8 958 us, FA4 899 (573.7 / 611.8 TFLOP/s
                        at ncu's clocks). Warp instructions 242.8 / 245.1 M:
                        the same count. What differs is latency: 2.37 / 1.55
                        cycles of "wait" stalls (ptxas's fixed stall counts)
                        per issued instruction, most at MUFU.EX2 in both;
                        tensor pipe 79.0 / 81.8%, issue 35.9 / 37.8%. FA4 runs
                        a non-persistent grid (2048 blocks), and its SASS
                        holds about as many FMULs as FFMAs (134 / 130, where
                        s8's has few FMULs in the loop). So the
                        per-clock gap lies in how the softmax's instructions
                        are scheduled, not in how many there are. Raw output:
                        docs/results/sdpa/archive/ncu-source-fa4-nvidia-h100-
                        2026-11-24-twelfth.md.
  SPLITS=1              CTAs per work item on the short policy: 0 picks the
                        fewest of 1, 2, 4 that give at least one CTA per SM
                        (capped by the key tiles); 1, 2 or 4 force it.
                        Measured on an H100 at the mission shape (throughput,
                        per launch): 1: 6.78 us, auto (2): 8.42 us, 4: 18.5 us;
                        the cluster split is kept as a knob, off by default.
  FORCE_POLICY=0        0 by shape, 1 always long (persistent), 2 always short
  PINGPONG=0            the long policy's consumer warpgroups in pingpong (s7)
                        or not (s6): pingpong measured 0.75x on the long shapes
  PINGPONG_MAX_SEQ=2048 the long policy's pingpong instance (2 consumer
                        warpgroups) for seq_len <= this, except dense head_dim
                        128; the default above for the rest (0: off). H100,
                        quick_check, throughput, TFLOP/s, default / turns:
                        commit 1106e31, PINGPONG=1,CONSUMER_WGS_D64=2 (turns at
                        every length): (2,8,2048,128) causal 490 / 508, dense
                        599 / 593; (2,8,2048,64) 380 / 402, causal 316 / 332;
                        but (4,16,4096,64) 459 / 416, (4,16,4096,128) 586 / 585.
                        Commit 042d61f, PINGPONG_MAX_SEQ=2048 (variant
                        pingpong_short, no dense-128 exception yet):
                        (2,8,2048,128) causal 484 / 512, dense 604 / 588;
                        (2,8,2048,64) 373 / 393, causal 318 / 330; the longer
                        shapes equal within 2%. Promoted with dense head_dim
                        128 left out. Raw output: docs/results/sdpa/archive/
                        pingpong-short-quick-check-nvidia-h100-2026-11-23-sixth.txt.
  CONSUMER_WGS_D64=0    the long policy's consumer warpgroups at head_dim 64:
                        3 = 192-row work items, 160 registers each (s6's
                        knob; needs PINGPONG 0). H100, throughput mode: 454 vs
                        421 TFLOP/s with 2 at (4,16,4096,64) (cuDNN 429 in the
                        same run); promoted 2026-11-23. Variant wg2_d64: 2.
                        The H200 acceptance run (commit 91cd597) then showed
                        3 losing at (2,8,2048,64): 60.0 vs s7's 50.6 us cold,
                        causal 58.2 vs 44.8: 176 items of 192 rows make two
                        waves of 1.5x the work on 132 SMs. 0 picks 2 or 3 per
                        problem by waves x item cost (wgs3_pays_off).
                        H100, quick_check, throughput, commit 9c6a552, us per
                        launch, 3 / 0 / 2 (cuDNN, FA4 in the same run):
                        (2,8,2048,64) 54.09 / 42.65 / 43.12 (40.91, 49.64),
                        causal 51.79 / 37.06 / 37.08 (37.66, 26.37),
                        (4,16,4096,64) 584.1 / 587.9 / 636.7 (613.2, 549.7):
                        0 keeps 3's gain where it pays (0.65% off, inside the
                        spread) and wins back 1.27x / 1.40x where it did not.
                        Promoted to the default 2026-11-23 (night); variants
                        wg3_d64 (always 3) and wg2_d64 (always 2).
  CAUSAL_PAIRS=1        the long policy's causal schedule: each persistent
                        block takes a head's query tiles j and m-1-j back to
                        back (sdpa_warpspec.cuh, WorkOrder), a unit of about
                        m+1 key tiles whatever j, striped over the blocks; 0 is
                        the single-item stripe it replaces (variant
                        causal_pairs_off). Why: with single items block b's
                        lengths follow b's residues mod m: at (2,8,2048,128)
                        causal the longest block carries 28 tile-lengths
                        against a mean of 16.5, and the H100 long run (commit
                        9c6a552) measured 342 TFLOP/s there against 582 dense
                        and FlashAttention-4's 508. With pairs: 128 units of
                        17 on 132 blocks. tools/schedule_balance.py derives
                        these (mean / max block load 0.59 -> 0.97 there, 0.89
                        -> 0.97 at (4,16,4096,128) causal; measured 1.38x and
                        1.08x, below the bound: the other costs did not move). s6/s7 (not persistent) are
                        unaffected (s7's SASS: same 48,384 instructions).
                        H100, quick_check, throughput, commit d24370e, TFLOP/s
                        pairs / off (cuDNN, FA4 in the same run):
                        (2,8,2048,128) causal 472 / 341 (324, 509),
                        (4,16,4096,128) causal 527 / 490 (502, 556),
                        (2,8,2048,64) causal 315 / 223 (228, 325); dense and
                        mission unchanged (same code path). Default since
                        2026-11-23 (night); long.yaml at d24370e: s8 1.47x
                        cuDNN at (2,8,2048,128) causal, 1.07x at (4,16,4096,
                        128) causal.
  KEY_SPLIT_WGS=2       2: the short policy's 64-row tile is shared by two
                        consumer warpgroups that take alternate key tiles of one
                        ring (ring index i -> warpgroup i % 2; the producer is
                        unchanged), each with its own O, max and sum; warpgroup 1
                        parks its partial in shared memory (16 KiB O + 2 KiB
                        stats at D=64), a named barrier, warpgroup 0 merges and
                        stores. Mission: 128 blocks of 2 x 2 tiles of 128 keys
                        (today 1 x 4), no cluster, no DSMEM. One block per SM
                        (3 warpgroups; 24/240). 1 (off) is the record's build
                        and the same SASS as before the knob. H100, per launch:
                        6.54 us (BLOCK_N 128) and 6.59 (64) vs 6.79 off, s5
                        6.39: the chain is shorter but the merge and one block
                        per SM eat it; off (variants key_split, key_split_n64).
                        Promoted 2026-11-24 (eighth session) with WS_PDL=2,
                        where one block per SM is what lets PDL pay (WS_PDL
                        below): 5.49-5.52 us at the mission against 6.95-6.96
                        (H100, three quick_check runs). Alone it measured 6.45
                        against 6.95 in the same run. Variants no_key_split
                        (PDL alone), before_pdl (the build before both).
                        Next hypothesis for the mission: L2 traffic (tested
                        and refuted, below).
                        Every 64-row query tile re-reads its head's whole K and
                        V (512 x 64 x 2 B x 2 = 128 KiB): 8 tiles x 16 heads =
                        16.8 MB through L2 for 4 MB of inputs, about 3 us at
                        5.5 TB/s, against ~5.3 us of kernel (6.4 us per launch
                        less the 1.1 us throughput floor). A cluster of the
                        head's query tiles sharing each K/V tile by TMA
                        multicast would cut that by the cluster size. The
                        profile step reads L2 bytes and L2 throughput %
                        (ncu_l2_bytes, ncu_l2_throughput_pct): on an H100
                        (commit 9c6a552, archive/profile-l2-*) the mission
                        kernel moves 24.3 MB through L2 (s5: 10.6 MB) at 21.8%
                        of L2 peak (s5: 15.7%), top stalls wait, no_instruction,
                        long_scoreboard: L2 is far from saturated, so
                        multicast would not pay. The chain is latency: one
                        warpgroup per SM waiting on fixed-latency dependencies.
                        s5 tuned at the mission (18 tilings) gained 2%.
  KEY_SPLIT_MULTICAST=0 1: where it fits (dense, an even number of 64-row
                        query tiles per head, every key tile in a ring slot
                        of its own: S <= 512 at D=64, <= 256 at D=128), the
                        key split's blocks run in clusters of two consecutive
                        query tiles of a head; each CTA's producer issues
                        half of every K/V tile's rows by TMA multicast into
                        both (sdpa_warpspec.cuh, Multicast), so each tile
                        crosses L2 once per pair: the hypothesis stated
                        under WS_PDL below. H100, quick_check at cb39343
                        (the commit that added it), mission, us per launch:
                        5.85 against 5.54 without, cuDNN 9.41; 52/52 checks,
                        6/6 chains (48 UTMALDG.4D.MULTICAST in the SASS, 0
                        spills). A valid negative: halving the L2 bytes did
                        not pay for the cluster barrier after the barrier
                        inits and the cluster's co-scheduling, so the warm
                        L2 reads are not what bounds the mission. Left off
                        (variant multicast). Raw output: docs/results/sdpa/
                        archive/multicast-quick-check-nvidia-h100-2026-11-24-
                        eighth.txt.
  Timeline of one launch (ninth session): tools/microbench/sdpa_timeline.cu
                        builds the stage with -DWS_TIMELINE=1 (sdpa_timeline.cuh:
                        clock64 and globaltimer stamps per block and phase, none
                        in the default build, whose SASS is unchanged) and
                        tools/timeline_report.py sums them up (device_run.sh
                        TIMELINE=...). H100, mission, 20 launches in one graph,
                        medians over 18 launches x 128 blocks (the stamped build
                        runs 6.1-6.4 us per launch against 5.53), us:
                          barrier init 0.18, griddepcontrol.wait 0.40,
                          Q landed 1.05 later (see below: mostly the wait),
                          the first K tile +0.26,
                          first tile's S and softmax 0.96,
                          the other tile and the last P.V 1.55,
                          wait for warpgroup 1 0.40, fold 0.18,
                          normalise, stage, store 0.50.
                        With 1 or 4 heads (8 or 32 blocks, no contention for
                        L2): Q 1.00, first tile 1.07, the rest 1.95. So neither
                        L2 bandwidth nor contention sets the mission, and the
                        mainloop is each SM's own chain (per block 64 x 512 x 64 at D=64:
                        2048 clocks of MUFU.EX2 and 2048 of HGMMA, ~1.15 us each
                        at 1.78 GHz; 2.5 us measured). Raw: docs/results/sdpa/
                        archive/timeline-mission-nvidia-h100-2026-11-24-ninth.*.
  WS_SLICE_MERGE=0      1: the key split's epilogue by slices of O's columns:
                        each warpgroup parks the other's half, both meet on one
                        barrier, each merges and stores its half (sdpa_warpspec.
                        cuh; four warpgroups always slice). Hypothesis: the
                        timeline's serial epilogue (0.40 + 0.18 + 0.50 us).
                        H100, quick_check, mission: 5.55 vs 5.55 us (52/52
                        checks, 6/6 chains); the store step 0.50 -> 0.41 us, the
                        wait unchanged. A valid negative (variant slice_merge).
  KEY_SPLIT_WGS_D64=2, KEY_SPLIT_BLOCK_N_D64=128: head_dim 64's key split.
                        4 with 64-key tiles and 8 ring slots: four warpgroups of
                        two 64-key tiles each on the 64-row tile (112 registers
                        each: 5 warpgroups hold 96 x 640 registers from launch,
                        sdpa_warpspec::fit_consumer_regs; at 120 setmaxnreg.inc
                        waited forever, a hang the first run caught). Hypothesis:
                        more warpgroups overlap one's MUFU work with another's
                        HGMMA. H100, mission: 6.36 vs 5.53 us (52/52, 6/6); the
                        mainloop 2.32 vs 2.51 us, but the four-way merge 1.62 vs
                        1.08 and the producer's 16 TMAs 3.1 us. 24-40 bytes spill
                        at 112. A valid negative (variant key_split4_d64). Also
                        tried in the timeline, and removed: K tiles before V
                        tiles from the producer (first tile later, the rest
                        earlier, the same period; it spilled in the 24-register
                        producer). Raw: archive/mission-epilogue-quick-check-
                        nvidia-h100-2026-11-24-ninth.txt.
  WS_LATE_MERGER=0      1: the key split's merge by the warpgroup holding the
                        item's last key tile (warpgroup 1 at the mission), the
                        other parking its partial as soon as its tiles are done.
                        Hypothesis: the timeline's warpgroup 1 ends 0.23 us after
                        warpgroup 0, which then waits 0.40 us. H100, quick_check,
                        mission: 5.40 vs 5.47 us (52/52, 6/6): inside the run-to-
                        run spread (5.47-5.55 for the default this session), so
                        no evidence; left off (variant late_merger).
  WS_DIRECT_STORE=0     1: O stored from the accumulators, 4 bytes per lane and
                        row, without the shared-memory staging (blocks that are
                        not persistent). H100, mission: 5.89 vs 5.47 us (52/52,
                        6/6): a valid negative, the 4-byte stores cost more than
                        the staging round trip saves (variant direct_store).
                        Also measured and removed: the producer issuing Q and
                        each warpgroup's first K tile alone and the rest once
                        they had landed (5.85 vs 5.52 us; Q still landed 1.02
                        us after the wait). tools/microbench/tma_latency.cu
                        times one 64-row Q box from a warm L2 at ~1000-1200
                        clocks per block in the mission's grid of 32-thread
                        blocks and ~2000 with the block's eight K/V tiles
                        behind it, but ~740 and ~1000 in blocks of 288 threads
                        (slower dispatch spreads the blocks' first requests);
                        one block alone ~410, ld.global.cg ~280; K/V tiles in
                        another order per query tile (rotated) ~10% slower: a
                        head's blocks asking for the same lines at once help.
                        A replica of the kernel's start (384 threads with
                        setmaxnreg 24/240, three maps in one __grid_constant__
                        Params, 158 KiB, PDL's wait, Q then four K and four V
                        tiles) lands Q in 690-790 clocks, 694 also when each
                        block first spins 6000 clocks and writes its O tile
                        (the previous launch's tail). In the kernel Q lands
                        ~1870 clocks after the producer passes the wait, also
                        with only a few stamps (WS_TIMELINE_MASK: such a build
                        runs 5.51-5.59 us per launch, as the unstamped one).
                        Stamps around the decode and the issue resolved it:
                        the producer passes griddepcontrol.wait 688 clocks
                        after entry, decodes its item in 1181 more, issues Q's
                        TMA in 135 and Q lands 614 after that, the TMA's own
                        latency as in the replica. The "decode" is the wait:
                        decoding before the wait (measured, then removed: 5.52
                        vs 5.55 us, 52/52, 6/6) moved the time into the wait
                        (entry to past the wait and decoded 1868 clocks either
                        way). The wait instruction lets the thread on, and its
                        first memory access waits for the previous grid, which
                        completes about 1 us after a block enters. So ~1 us of
                        each block's 5 us is the previous launch's completion
                        (its slowest block, then the flush), not a load.
                        Raw: archive/mission-epilogue-quick-
                        check-nvidia-h100-2026-11-24-ninth.txt, archive/tma-
                        latency-nvidia-h100-2026-11-24-ninth.txt.
  SHORT_CLUSTER_TILE=0  1: the short policy as 128-row tiles (two consumer
                        warpgroups of 64 rows) whose key tiles a cluster of two
                        CTAs splits, combined over DSMEM (split-KV): each SM
                        takes in Q's 16 KiB and half the keys' 64 KiB, against
                        the key split's 136 KiB, for the same work per SM.
                        Hypothesis: the ~64 bytes per clock an SM takes in from
                        L2 set when a block's data has landed. H100, mission:
                        8.31 vs 5.50 us (52/52, 6/6). The timeline: Q landed
                        1.06 us after the wait as before, and the combine
                        (cluster barriers, DSMEM reads) took 2.28 us. A valid
                        negative (variant cluster_tile).
  KEY_SPLIT_BLOCK_N=128, KEY_SPLIT_STAGES_D64=4, KEY_SPLIT_STAGES_D128=2: the
                        key split's tiles and ring depth (even: slot i % stages
                        always serves warpgroup i % 2); 64 with 8 / 4 halves each
                        step and keeps 4 / 2 slots per warpgroup. With WS_PDL=2,
                        H100, mission, us per launch (commit c3a9ba4): 128 x 4
                        5.50, 64 x 8 5.80, 64 x 4 5.98, 128 x 2 6.49.
  WS_PDL=2              programmatic dependent launch (sdpa_warpspec.cuh):
                        every launch carries programmatic stream serialization;
                        each block waits (griddepcontrol.wait) for the previous
                        grid before its first global access, after its barrier
                        set-up and tensor-map prefetch, and lets the next launch
                        in (griddepcontrol.launch_dependents): 1 right after the
                        prologue, 2 once the consumers' first work item's key
                        tiles are done. Hypothesis: at the mission the gap
                        between two launches (the throughput floor, ~1 us of an
                        empty kernel) and each block's prologue are a fifth of
                        the time; the next grid's dispatch and prologue can run
                        under this grid's tail. Every global read and write
                        stays after the wait, so a launch that follows a kernel
                        writing its inputs stays right (stagelab.chain checks
                        chains of launches, each reading its predecessor's
                        output, against the same chain run one launch at a
                        time: 6/6 in every run below). What it gains needs a
                        predecessor that triggers: in throughput mode that is
                        the previous launch of the same stage; after a kernel
                        without the trigger the launch waits as before, and
                        cold mode (an L2 flush between launches) sees nothing.
                        H100, quick_check, throughput, us per launch at the
                        mission (commits 8304567 and c3a9ba4, two runs):
                        off 6.95 / 6.95, 1: 7.32 / 7.34, 2: 6.79; with
                        KEY_SPLIT_WGS=2: off 6.45, 1: 5.58, 2: 5.49 / 5.52.
                        Why the early trigger loses on the two-blocks-per-SM
                        short policy: the next grid's 128 blocks take the free
                        slots at once, beside this grid's running blocks (the
                        4 idle SMs get two each), and keep those places; with
                        the key split one block fills an SM, so the next
                        grid's blocks land one per SM as this grid's leave.
                        Long shapes: within 1.5% either way (e.g. 4x16x4096x128
                        600 / 605 / 603 TF/s off / 1 / 2), 2x8x2048x64 causal
                        +3-5%. Variants no_pdl, pdl_early.
                        H200, quick_check at 7d6cca6, mission: 5.62 us, key
                        split alone 6.61, the build before both 7.02 (cuDNN
                        9.46, FlashAttention-4 9.40). long.yaml at 7d6cca6:
                        H100 5.56 us (1.70x cuDNN, 1.67x FA4), H200 5.52.
                        Raw output: docs/results/sdpa/archive/pdl-quick-check-
                        nvidia-h{100,200}-2026-11-24-eighth*.txt.
                        Where the rest goes (open): tools/ncu_compare.py
                        --warm at the mission (L2 warm, clocks unlocked,
                        H100, dc0b555): the key-split kernel moves 17.3 MB
                        from the SMs through L2 (cuDNN's 128-row tiles 8.4
                        MB) at 23% of L2 peak over its ncu duration, and its
                        warps wait on `wait` (1.48 per issue) and
                        long_scoreboard (1.31); ncu's own times (8.4 us, cuDNN
                        9.1) run at idle clocks between replays and are not
                        the per-launch time. Hypothesis (tested, refuted by
                        KEY_SPLIT_MULTICAST above): in
                        throughput mode a launch takes ~5.5 us, and 17.3 MB
                        through L2 at a read bandwidth of 5.5-7 TB/s is
                        2.5-3.1 us of it, every SM asking at once at the
                        start (each 64-row tile re-reads its head's 128 KiB;
                        the earlier refutation above read ncu's profile with
                        cold caches and base clocks, where the kernel takes
                        about 10 us: 10.3 in mission.yaml at 7d6cca6). TMA
                        multicast over a
                        cluster of two of a head's query tiles (each CTA
                        issues half of every K/V tile's rows with
                        .multicast::cluster, both barriers expect the whole
                        tile; barrier inits published by a cluster barrier,
                        which PDL hides) would halve those bytes. Simplest
                        where every key tile fits the ring (S <= 512 at
                        D=64: no cross-CTA "empty" barriers) and dense (both
                        CTAs need the same tiles). Raw: docs/results/sdpa/
                        archive/ncu-compare-warm-mission-nvidia-h100-2026-
                        11-24-eighth.md.
  WS_EXP2_POLY_EVERY_D64=0, WS_EXP2_POLY_EVERY_D128=0: every k-th n8 tile's
                        exponentials on the FMA pipe (ex2_poly3, as s9's
                        EXP2_POLY_EVERY). Hypothesis: at head_dim 64 a key
                        tile's MUFU work (64 x 128 / 16 per clock per SM =
                        512 clocks per warpgroup) is twice its GEMMs' (2 x 2 x
                        64 x 128 x 64 / 4096 = 256), so moving a quarter of the
                        exponentials to the FMA pipe should shorten the
                        softmax. H100, quick_check at 7d6cca6, throughput,
                        default / every 4th / 8th / 16th n8 tile at D=64:
                        mission 5.59 / 5.58 / 5.58 / 5.54 us, (4,16,4096,64)
                        464 / 429 / 440 / 447 TFLOP/s, (2,8,2048,64) 407 /
                        422 / 414 / 417, causal 345 / 357 / 354 / 349; every
                        8th at D=128: (4,16,4096,128) 595 -> 589. A valid
                        negative where it matters most (the 4096-key head_dim
                        64 shape loses 4-8%): the cubic's 9 issue slots per
                        value cost more than the MUFU time they free, as on
                        s9 (its log v2, v7). Left at 0 (variants poly4_d64,
                        poly8_d64). Raw output: docs/results/sdpa/archive/
                        poly-d64-quick-check-nvidia-h100-2026-11-24-eighth.txt.
  MBARRIER_SUSPEND_NS=0: try_wait's suspend-time hint (sdpa_tma.cuh), tried
                        after s9's producer was seen spinning ~130 times per
                        wait (s9_fp8.cu log v12). H100, quick_check, 1000 ns:
                        mission 5.51 vs 5.50 us, 593 vs 590 TFLOP/s at
                        (4,16,4096,128), 619 vs 627 at (1,32,8192,128): no
                        change. Variant suspend1000.
  KEY_SPLIT_PINGPONG=0  1: the key split's two warpgroups take s7's turns
                        (named barriers around each warpgroup's GEMM issue;
                        warpgroup 0 owns ceil(tiles / 2) tiles, so it takes at
                        most one turn more). Hypothesis, from the ninth
                        session's timeline: the first tile's S and softmax
                        (0.96 us) and the rest (1.55) are what both warpgroups'
                        S GEMMs, softmaxes and P.Vs take back to back in
                        lockstep (per block 2 x 2 tiles of 64 x 128 at D=64:
                        ~2048 clocks of HGMMA and ~2048 of MUFU.EX2), so one
                        warpgroup's softmax under the other's GEMMs could
                        save up to ~1 us. H100, quick_check, mission, us per
                        launch (52/52, 6/6 each): default 5.51, turns 5.48,
                        turns with WS_LATE_MERGER 5.41, late merger alone
                        5.43 (cuDNN 9.59). The timeline (stamped builds, same
                        call): first tile 0.93 -> 1.03 us, the rest 1.52 ->
                        1.53, the wait for warpgroup 1 0.39 -> 0.39: the turns
                        move nothing; the warpgroups were not waiting on each
                        other's GEMMs. A valid negative (variants
                        key_split_turns, key_split_turns_late). Raw output:
                        docs/results/sdpa/archive/key-split-turns-quick-
                        check-nvidia-h100-2026-11-24-twelfth.txt.
  WS_PV_SS (measured at commit e3ae422, variant pv_ss there, then removed):
                        P.V with P from shared memory. Each warpgroup stored
                        its P by stmatrix (8 STSM per thread per 128-key
                        tile) into an SW128 tile of its own, fenced it to the
                        async proxy, met its warps on a named barrier, and the
                        P.V wgmma read both operands from shared memory (SS),
                        instead of P from registers (RS, FlashAttention-3's
                        choice). Hypothesis: tools/microbench/
                        mufu_wgmma_overlap.cu (s9_fp8.cu's log v13) measured an
                        FFMA stream beside RS wgmmas at 1.73x its time alone,
                        beside SS ones at 1.58x, and the wgmmas at 1.36x /
                        1.27x; a softmax runs under the other warpgroup's P.V.
                        H100, quick_check (52/52, 6/6; 0 spills), default / SS:
                        mission 5.50 / 5.84 us, TFLOP/s (4,16,4096,64) 462 /
                        406, (4,16,4096,128) 593 / 556, causal 541 / 524,
                        (1,32,8192,128) 618 / 585, (2,8,2048,128) 600 / 569.
                        A valid negative: the stores, the fence and the barrier
                        per tile cost more than the lighter wgmma saves. Raw
                        output: docs/results/sdpa/archive/pv-ss-quick-check-
                        nvidia-h100-2026-11-24-twelfth.txt.
  KEY_SPLIT_BLOCK_N_D64=256 (probe, twelfth session; an m64n256k16 wrapper
                        added for it and removed): one 256-key tile per
                        warpgroup at the mission, half the steps. H100: 6.25 vs
                        5.52 us (52/52, 6/6), but the build spilled 144 bytes
                        and ptxas serialized its wgmmas (C7512), so only the
                        timeline counts: the first tile's S and softmax 1.65 us
                        (0.93 for 128 keys: no saving per key), the first K
                        tile 0.43 us after Q (0.28), and warpgroup 1 ends 0.58
                        us after warpgroup 0 (0.22), because its 64 KiB tile
                        lands after warpgroup 0's at the SM's ~64 bytes per
                        clock. Fewer, longer steps do not pay at the mission.
                        Raw output: docs/results/sdpa/archive/key-split-n256-
                        quick-check-nvidia-h100-2026-11-24-twelfth.txt.

Shared memory: long as s7; short (64 + 4*128) * D * 2 + barriers + 1024.
  Key split: (64 + 2*stages*BLOCK_N) * D * 2 + barriers + 128 * (D/2 + 4) * 4
  + 1024: 158,864 B at D=64 (4 x 128 keys), 183,376 B at D=128 (2 x 128).

Scope: as s6: head_dim 64 and 128, fp16 and bf16, causal or not, any
  seq_len >= 1 and scale, 16-byte-addressable strides (cudaErrorInvalidValue
  otherwise, before launch).

Run: stagelab run --stage s8_persistent_split
Build / SASS (UTMALDG, HGMMA, SYNCS, USETMAXREG; LDS/LD through mapa for DSMEM):
  nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a --resource-usage \
       -cubin -I kernels/sdpa kernels/sdpa/s8_persistent_split.cu -o /tmp/s8.cubin
*/
#include <cuda_runtime.h>

#include <algorithm>

#include "sdpa_api.h"
#include "sdpa_export.cuh"
// s8 picks two or three consumer warpgroups at head_dim 64 by the wave count (0, its log);
// s6/s7 keep the shared default of 2
#ifndef CONSUMER_WGS_D64
#define CONSUMER_WGS_D64 0
#endif
// s8 keeps a warp's running max until a row's tile max grows by more than 2^8 at
// head_dim 128 (its log, WS_RESCALE_THRESHOLD_D128); head_dim 64 rescales every tile
#ifndef WS_RESCALE_THRESHOLD_D128
#define WS_RESCALE_THRESHOLD_D128 8
#endif
// s8 launches with programmatic dependent launch, the trigger before the epilogue (its log, WS_PDL)
#ifndef WS_PDL
#define WS_PDL 2
#endif
#include "sdpa_warpspec.cuh"
#include "sdpa_warpspec_knobs.cuh"

#ifndef SPLITS
#define SPLITS 1
#endif
#ifndef FORCE_POLICY
#define FORCE_POLICY 0
#endif
// The long policy's pingpong instance (two consumer warpgroups) for sequences up to this length,
// but dense head_dim 128 (0: off; its log)
#ifndef PINGPONG_MAX_SEQ
#define PINGPONG_MAX_SEQ 2048
#endif
// s8 shares each short-policy query tile between two consumer warpgroups (its log, KEY_SPLIT_WGS)
#ifndef KEY_SPLIT_WGS
#define KEY_SPLIT_WGS 2
#endif
#ifndef KEY_SPLIT_BLOCK_N
#define KEY_SPLIT_BLOCK_N 128
#endif

namespace {

using sdpa_warpspec::Config;

constexpr int kProducerRegs = PRODUCER_REGS;
// Long: one block per SM, 3 warpgroups: 128 * (24 + 2 * 240) = 64512 <= 65536;
// at head_dim 64 optionally 4 warpgroups (CONSUMER_WGS_D64=3, no pingpong): 128 * (24 + 3 * 160).
// 0: 2 or 3 per problem, by wgs3_pays_off below (both instantiated).
static_assert(CONSUMER_WGS_D64 >= 0 && CONSUMER_WGS_D64 <= 3 && CONSUMER_WGS_D64 != 1,
              "CONSUMER_WGS_D64: 2 (128 rows), 3 (192 rows) or 0 (by the wave count)");
constexpr int kLongBlocksPerSm = 1;
template <int D>
constexpr int kLongBlockN = D == 64 ? BLOCK_N_D64 : BLOCK_N_D128;
template <int D, int WGs, int BlockN = kLongBlockN<D>, bool Pingpong = false>
using LongConfigOf = Config<WGs, BlockN, D == 64 ? STAGES_D64 : STAGES_D128,
                            /*pingpong=*/Pingpong, /*persistent=*/true, kLongBlocksPerSm, kProducerRegs,
                            sdpa_warpspec::fit_consumer_regs(WGs, kProducerRegs, kLongBlocksPerSm, CONSUMER_REGS)>;
// The build's first choice at each head dim (head_dim 128 keeps two: its O alone is 64 registers).
template <int D>
constexpr int kLongConsumerWGs = D == 64 && CONSUMER_WGS_D64 != 2 ? 3 : 2;
template <int D>
using LongConfig = LongConfigOf<D, kLongConsumerWGs<D>>;
template <int D>
using LongConfig2 = LongConfigOf<D, 2>;
// Up to PINGPONG_MAX_SEQ keys, the long policy's warpgroups take turns (its log).
static_assert(PINGPONG_MAX_SEQ >= 0, "PINGPONG_MAX_SEQ: 0 (off) or the longest sequence that takes turns");
constexpr bool kShortPingpong = PINGPONG_MAX_SEQ > 0;
template <int D>
using LongPingpongConfig = LongConfigOf<D, 2, kLongBlockN<D>, /*Pingpong=*/true>;

// Three consumer warpgroups did each 192-row item 1.08x faster per row than two did 128-row ones
// (H100, throughput mode, (4,16,4096,64): 454 vs 421 TFLOP/s), but the persistent grid pays for
// whole waves: on 132 SMs (2,8,2048,64) has 176 items of 192 rows (2 waves of 1.5x the work)
// against 256 of 128 (2 waves), and measured 0.84x with three (H200 acceptance). Compare
// waves x per-item cost (its rows), three warpgroups' rows 1.08x cheaper: 3 warpgroups when
// ceil(items3 / sms) * 192 / 1.08 < ceil(items2 / sms) * 128.
template <int D>
inline bool wgs3_pays_off(const SdpaProblem& p, int sms) {
  constexpr int gain_percent = 108;
  constexpr int rows3 = LongConfig<D>::kBlockM, rows2 = LongConfig2<D>::kBlockM;
  const int waves3 = sdpa_ceil_div(sdpa_ceil_div(p.seq_len, rows3) * p.heads * p.batch, sms);
  const int waves2 = sdpa_ceil_div(sdpa_ceil_div(p.seq_len, rows2) * p.heads * p.batch, sms);
  return waves3 * rows3 * 100 < waves2 * rows2 * gain_percent;
}
// Short: two blocks per SM of 2 warpgroups: 2 * 128 * (24 + 232) = 65536.
constexpr int kShortBlockN = 128;
constexpr int kShortStages = 2;
using ShortConfig = Config<1, kShortBlockN, kShortStages, /*pingpong=*/false, /*persistent=*/false,
                           /*blocks per SM=*/2, kProducerRegs, 232>;
static_assert(SPLITS == 0 || SPLITS == 1 || SPLITS == 2 || SPLITS == 4, "SPLITS: 0 (auto), 1, 2 or 4");
// Key split (short policy): two consumer warpgroups on the same 64 rows, each
// over every other key tile. Three warpgroups no longer fit two blocks per SM
// (2 * 128 * (24 + 2 * 116) = 65536 leaves 116 registers, under the S, P and O
// fragments), so one block per SM with s6's 24/240 split; the mission's 128
// blocks fit 132 SMs in one wave either way. Each of the K and V rings holds
// 64 KiB: 4 x 128 keys at D=64, 2 at D=128 (8 and 4 with 64-key tiles); ring
// depth per warpgroup is stages / 2.
static_assert(KEY_SPLIT_WGS == 1 || KEY_SPLIT_WGS == 2, "KEY_SPLIT_WGS: 1 (off) or 2 warpgroups per query tile");
static_assert(KEY_SPLIT_WGS == 1 || SPLITS == 1, "key split and cluster split (SPLITS) are exclusive");
constexpr int kKeySplitRingBytes = 64 * 1024;
template <int D>
constexpr int kKeySplitStages = kKeySplitRingBytes / (KEY_SPLIT_BLOCK_N * D * 2);  // 2-byte elements
template <int D>
using KeySplitConfig = sdpa_warpspec::KeySplit<
    Config<KEY_SPLIT_WGS, KEY_SPLIT_BLOCK_N, kKeySplitStages<D>, /*pingpong=*/false,
           /*persistent=*/false,
           /*blocks per SM=*/1, kProducerRegs,
           sdpa_warpspec::fit_consumer_regs(KEY_SPLIT_WGS, kProducerRegs, /*min_blocks=*/1, CONSUMER_REGS)>>;
constexpr bool kKeySplit = KEY_SPLIT_WGS > 1;
static_assert(FORCE_POLICY >= 0 && FORCE_POLICY <= 2, "FORCE_POLICY: 0 by shape, 1 long, 2 short");

enum Policy : int { kByShape = 0, kLong = 1, kShort = 2 };

// Fewest splits (1, 2, 4) whose CTAs cover every SM, never more than the key tiles.
inline int auto_splits(const SdpaProblem& p, int sms) {
  const int items = sdpa_ceil_div(p.seq_len, ShortConfig::kBlockM) * p.heads * p.batch;
  const int key_tiles = sdpa_ceil_div(p.seq_len, kShortBlockN);
  int splits = 1;
  while (splits < sdpa_warpspec::kMaxClusterSplits && items * splits < sms && splits * 2 <= key_tiles) splits *= 2;
  return splits;
}

template <int D>
inline bool use_long_policy(const SdpaProblem& p, int sms) {
  if (FORCE_POLICY != kByShape) return FORCE_POLICY == kLong;
  // by the wave count (0), two warpgroups' 128-row items must fill the SMs; otherwise the build's own
  constexpr int rows = CONSUMER_WGS_D64 == 0 ? LongConfig2<D>::kBlockM : LongConfig<D>::kBlockM;
  const int long_items = sdpa_ceil_div(p.seq_len, rows) * p.heads * p.batch;
  return long_items >= sms;
}

struct SmemOf {  // the largest footprint of the instances this build may launch
  template <class T, int D>
  static constexpr size_t smem_bytes() {
    using sdpa_warpspec::Layout;
    // 0 for an instance this build leaves out
    constexpr int policies = std::max({Layout<T, D, LongConfig<D>>::kSmemBytes, Layout<T, D, LongConfig2<D>>::kSmemBytes,
                                       kShortPingpong ? Layout<T, D, LongPingpongConfig<D>>::kSmemBytes : 0,
                                       Layout<T, D, ShortConfig>::kSmemBytes});
    if constexpr (kKeySplit) {  // KeySplitConfig exists only when the knob is on
      return static_cast<size_t>(std::max(policies, Layout<T, D, KeySplitConfig<D>>::kSmemBytes));
    }
    return static_cast<size_t>(policies);
  }
};

}  // namespace

extern "C" cudaError_t sdpa_forward(const SdpaProblem* problem, cudaStream_t stream) {
  return sdpa_warpspec::forward(problem, [&](auto tag, auto hd) {
    using T = typename decltype(tag)::type;
    constexpr int D = decltype(hd)::value;
    const int sms = sdpa_warpspec::sm_count();
    if (sms <= 0) return cudaErrorNoDevice;
    if (use_long_policy<D>(*problem, sms)) {
      if constexpr (kShortPingpong) {
        // dense head_dim 128 keeps the default: there the turns measured 0.97-0.99x (its log)
        const bool dense128 = D == 128 && !problem->causal;
        if (problem->seq_len <= PINGPONG_MAX_SEQ && !dense128)
          return sdpa_warpspec::launch<T, D, LongPingpongConfig<D>>(*problem, 1, stream);
      }
      if constexpr (D == 64 && CONSUMER_WGS_D64 == 0) {
        if (!wgs3_pays_off<D>(*problem, sms)) return sdpa_warpspec::launch<T, D, LongConfig2<D>>(*problem, 1, stream);
      }
      return sdpa_warpspec::launch<T, D, LongConfig<D>>(*problem, 1, stream);
    }
    if constexpr (kKeySplit) return sdpa_warpspec::launch<T, D, KeySplitConfig<D>>(*problem, 1, stream);
    const int splits = SPLITS > 0 ? SPLITS : auto_splits(*problem, sms);
    return sdpa_warpspec::launch<T, D, ShortConfig>(*problem, splits, stream);
  });
}

extern "C" const char* sdpa_stage_config() {
  return "s8_persistent_split long: persistent grid=SMs, longest-first, BLOCK_M=128 pingpong BLOCK_N_D64=" SDPA_STR(
      BLOCK_N_D64) " BLOCK_N_D128=" SDPA_STR(BLOCK_N_D128) " STAGES_D64=" SDPA_STR(STAGES_D64) " STAGES_D128=" SDPA_STR(
      STAGES_D128) "; short: BLOCK_M=64 BLOCK_N=128 split-KV cluster SPLITS=" SDPA_STR(SPLITS) " (0=auto)"
      " FORCE_POLICY=" SDPA_STR(FORCE_POLICY) " PINGPONG_MAX_SEQ=" SDPA_STR(PINGPONG_MAX_SEQ) " KEY_SPLIT_WGS=" SDPA_STR(
          KEY_SPLIT_WGS) " KEY_SPLIT_BLOCK_N=" SDPA_STR(KEY_SPLIT_BLOCK_N)
         " CONSUMER_WGS_D64=" SDPA_STR(CONSUMER_WGS_D64) " (long, head_dim 64; 3: consumer 160; 0: 2 or 3 by the wave count)"
         " (long, causal: query tiles j and m-1-j per unit)"
         " WS_RESCALE_THRESHOLD_D128=" SDPA_STR(WS_RESCALE_THRESHOLD_D128)
         " (O rescaled when a row max grows by more than 2^t; 0: every tile)"
         " WS_PDL=" SDPA_STR(WS_PDL) " (programmatic dependent launch; 2: trigger before the epilogue)"
         " setmaxnreg producer/consumer: long 24/240, short 24/232 (2 blocks per SM), key split 24/240";
}

extern "C" int64_t sdpa_dynamic_shared_memory_bytes(int32_t head_dim, int32_t dtype) {
  return sdpa_stage_smem_bytes<SmemOf>(head_dim, dtype);
}
