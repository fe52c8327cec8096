/*
s9_fp8: s6's warp-specialized kernel on e4m3 (FP8) wgmma: Q.K^T and P.V with
e4m3 operands and fp32 accumulation, per-(batch, head) descales folded into
the softmax scale (Q, K) and into the output (V).

What it is
  Inputs come quantized (stagelab.families.sdpa.fp8.quantize_qkv): e4m3 Q, K, V
  [B, H, S, D] and float32 descales [B, H]; the output is the unquantized
  inputs' dtype (fp16 or bf16). Entry point: sdpa_fp8_forward (sdpa_api.h);
  the fp16 sdpa_forward rejects every problem.
  fp8 wgmma has no transpose bit, so P.V's B operand (V, keys x D) must be
  stored K-major = Vt (keys contiguous). Keys are permuted inside each
  32-key group so that P's e4m3 A fragment is the S accumulator converted in
  registers, no lane shuffles (sdpa_wgmma_fp8.cuh).
  One kernel (VT_IN_KERNEL=1, since log v9): one block = 3 warpgroups for
  BLOCK_M = 128 query rows, as s6. The producer warpgroup (setmaxnreg.dec):
  warp 0 issues one TMA box for Q, then K(n) and V(n) as it is per key tile
  on mbarrier rings; warps 1-3 turn each V tile into the Vt tile in shared
  memory (ldmatrix.trans, two byte permutes per register pair, stmatrix:
  transpose_v_tile), fence it to the async proxy and arrive on Vt's ring.
  Two consumer warpgroups (setmaxnreg.inc) run S(n) = Q.K^T (D/32 SS wgmma
  m64nBLOCK_Nk32) and P(n-1).V(n-1) (BLOCK_N/32 RS wgmma m64nDk32) back to
  back, softmax(n) under the P.V.
  Before log v9 (VT_IN_KERNEL=0, variant prepass): a pre-pass inside
  sdpa_fp8_forward (its time counts) wrote Vt [B, H, D, S_pad] into
  caller-owned scratch (sdpa_fp8_scratch_bytes, allocated by the binding
  through torch's caching allocator), keys S..S_pad-1 zero, and the producer
  loaded Vt tiles by TMA.
  Softmax: s * softmax_scale * q_descale * k_descale * log2(e), online max;
  p = exp2(. - max) in [0, 1] and its fp32 row sum as in s6; P8 = e4m3(2^8 p)
  (FlashAttention-3's Max_offset = 8: P in [0, 256]); O * v_descale / (2^8 l).

Changes vs parent s6_tma_warpspec, and why
  - e4m3 wgmma (QGMMA): twice HGMMA's rate per SM, half the bytes per K/V tile.
  - V transposed by a pre-pass (fp8 wgmma reads both operands K-major only),
    with the key permutation that makes P's register conversion free.
  - Shared tiles of 8-bit rows: D bytes (Q, K: 64- or 128-byte swizzle),
    BLOCK_N bytes (Vt); an O staging tile of its own (Q's buffer is half of O).

Knobs (-D overrides)
  BLOCK_N_D64=128     keys per K/Vt tile at head_dim 64  (64 or 128)
  BLOCK_N_D128=128    keys per K/Vt tile at head_dim 128 (64, 128 or 192; 192:
                      Vt in three 64-key chunks, fp8_vt_chunk_keys)
  STAGES_D64=3        buffers per K ring and per Vt ring at head_dim 64 (>= 2)
  STAGES_D128=3       ... at head_dim 128
  PRODUCER_REGS=24    registers per producer thread after setmaxnreg.dec
  CONSUMER_REGS=240   registers per consumer thread after setmaxnreg.inc
                      (3 warpgroups: 128 * (24 + 2 * 240) = 64512 <= 65536)
  PINGPONG=1          1: s7's turns (named barriers 1 and 2, bar.sync own /
                      bar.arrive other, 256 threads): one warpgroup's softmax
                      under the other's QGMMAs; O's rescale before the turn
  PINGPONG_D64=PINGPONG  the same at head_dim 64 (PINGPONG then applies to 128)
  FOLD_P_SCALE=1      1: P8 = e4m3(exp2(s' - max + 8)) (the 2^8 in the FFMA's
                      addend) instead of e4m3(256 * exp2(s' - max)): one FMUL
                      per score less; equal up to one fp32 rounding of the
                      argument (sdpa_wgmma_fp8.cuh), row sums of 2^8 p
  EXP2_POLY_EVERY=0   k > 0: every k-th n8 tile's exponentials by ex2_poly3
                      (cubic on the FMA pipe, rel. err 8.6e-5) instead of MUFU
  RESCALE_THRESHOLD=0 t > 0: s8's conditional O rescale (a warp keeps its max
                      until a row grows past it by 2^t), P's offset 2^(8 - t);
                      measured no faster at D=128 (log v4)
  VT_IN_KERNEL=0      1: V transposed in shared memory by the producer
                      warpgroup's warps 1-3 (needs PRODUCER_REGS >= 40; the
                      registry builds 40 / 232), no pre-pass, no scratch (log v9)
  VT_BATCH=1          units of 16 keys x 32 bytes whose ldmatrix loads a
                      transposing warp has in flight before their stores
  PERSISTENT=0        1: grid = min(work items, SMs); producer, transposing
                      warps and consumers walk sdpa_warpspec's WorkOrder (query
                      tiles of a head consecutive, longest first), the rings'
                      positions and the turns carried across items; the next
                      item's Q loads once every consumer warp's last S is done
                      (empty_q), under the last P.V and the store (log v10)
  CAUSAL_PAIRS=0      with PERSISTENT, causal: a block takes query tiles j and
                      m-1-j of a head back to back (sdpa_warpspec.cuh)
  PV_PROMOTE_D64=0    1: each key tile's P.V in accumulators of its own, added to
  PV_PROMOTE_D128=0   O in fp32 after its wait (the e4m3 wgmma keeps ~13 mantissa
                      bits; issue 28, tools/fp8_cpu_repro.py); +D/2 FADDs per tile;
                      at D=128 with 192-key tiles it spills (not for use there)
  EARLY_PACK=0        1: P converted to e4m3 inside the softmax (WgFp8Tile's
                      p8_next), copied into the P.V operands after the previous
                      P.V's wait; measured slower (log v12)
  MBARRIER_SUSPEND_NS=0  try_wait's suspend-time hint in ns (sdpa_tma.cuh; 0 = none):
                      measured no faster (log v12)
  ROW_SUM_MMA=0       1: the row sums from the P.V wgmma (m64n(D+8)k32 over a
                      Vt tile with a row of e4m3 ones under it) instead of one
                      FADD per score: the sums of the e4m3 P that P.V uses;
                      slower and over the error budget at 4097 keys (log v6)
  WS_PDL=2            programmatic dependent launch (s8's knob, sdpa_warpspec.cuh):
                      the V pre-pass waits for the previous kernel and lets
                      the attention kernel in at once; the attention kernel's
                      blocks set up beside it and wait before any global
                      access (log v8)

Log (versions; how to run them)
  v1  today's record: the defines above with the three speed knobs 0. H100,
      throughput mode: 759 TFLOP/s (4,16,4096,128) vs s6 577; 808 vs 614
      (1,32,8192,128); 649 vs 508 causal; 502 vs 430 (4,16,4096,64); mission
      (2,8,512,64) 10.6 us vs 9.1. ncu: tensor pipe 45% busy at (1,32,8192,128).
  v2  the knobs. Why: per 128x128 tile at D=128 the QGMMAs take
      2 * 2 * 128^3 / 8192 flop/clk/SM = 1024 clk, and the 16384 exponentials
      16384 / 16 MUFU.EX2/clk/SM = 1024 clk too (at D=64: 512 vs 1024), so the
      softmax must run under the other warpgroup's GEMMs (PINGPONG) and MUFU
      shed work (EXP2_POLY_EVERY); FOLD_P_SCALE trims the FMA pipe. Every
      variant builds with 0 spills, no LDL/STL, no ptxas C75xx advisory.
      Measured (H100, throughput mode, one quick_check run; TFLOP/s at
      4096x128 / 8192x128 / 4096x128 causal / 4096x64, mission us):
        knobs off      745 / 716 / 631 / 496, 10.35 us
        PINGPONG       724 / 713 / 623 / 443, 10.36
        PP + FOLD      763 / 754 / 651 / 498,  9.98   <- promoted (v3)
        PP+FOLD+poly4  722 / 715 / 613 / 458,  9.88
        PP+FOLD+poly2  648 / 664 / 581 / 415, 10.38
        PP+FOLD, STAGES_D128=2  729 / 764 / 646 / 498, 9.98
      s6 in the same run: 577 / 539 / 492 / 422, 9.00 us. The cubic costs
      more FMA-pipe time than the MUFU it saves: the softmax is not MUFU-bound
      alone. Raw output: docs/results/sdpa/archive/variants-quick-check-
      nvidia-h100-2026-11-23-evening.txt.
  v3  defaults PINGPONG=1, FOLD_P_SCALE=1: 1.32x s6 at 4096x128, 1.40x at
      8192x128 in that run; the issue's 1.5x is not reached. Variants
      knobs_off, fold_only, poly4, poly2, stages2. Check and time:
        PYTHONPATH=lib python3 tools/quick_check.py s9_fp8 s6_tma_warpspec --time \
          --contenders cudnn flash_fp8 cudnn_fp8 --variant off=s9_fp8:PINGPONG=0,FOLD_P_SCALE=0

  v4  RESCALE_THRESHOLD=t (s8's conditional O rescale; P's offset 2^(8 - t)).
      Why: ncu at (4,16,4096,128) showed the issue slots contended (48% busy,
      not_selected 0.73 stalls per issue), and the skipped rescale saved s8
      10% of its instructions. Measured (H100, quick_check, throughput, commit
      e39e72e; TFLOP/s default / t=3 / t=4): 4096x128 784 / 775 / 775,
      8192x128 835 / 835 / 836, 4096x128 causal 667 / 663 / 663, 4096x64
      504 / 508 / 509, 2048x64 393 / 417 / 410. Worst error / budget 0.56 /
      0.83 / 0.99: the smaller offset sends more small p to e4m3's subnormals
      and zero. A valid negative: no gain where the 1.5x is asked, and t=4
      sits at the edge of the error budget. Left at 0 (variants rescale3,
      rescale4). Raw output: docs/results/sdpa/archive/s9-rescale-threshold-
      quick-check-nvidia-h100-2026-11-23-sixth.txt.

  v5  BLOCK_N_D128=192, STAGES_D128=2 (promoted). Why: ncu's sampled program
      counters (tools/ncu_compare.py --source, 4096x128) put the consumer warps
      in the softmax most of the time, and per 128-key tile each thread also
      pays O's rescale (64 FMUL, one per score at 128 keys), the turn barrier and
      the max/sum reductions' latency; 192 keys spread those over 1.5x the
      scores. fp8 rows are at most one 128-byte swizzle row, so Vt comes in
      three 64-key chunks (fp8_vt_chunk_keys). 0 spills. Measured (H100,
      quick_check, throughput mode, TFLOP/s, 128-key / 192 x 3 stages / 192 x 2):
      4096x128 785 / 799 / 800, 8192x128 836 / 861 / 883, 4096x128 causal 663 /
      669 / 673, 2048x128 670 / 687 / 687; s8 in the same run 588 and 618, so
      s9/s8 = 1.36x and 1.43x. Checks 52/52, worst error/budget 0.563 as before.
      Raw output: docs/results/sdpa/archive/s9-block-n-192-quick-check-nvidia-
      h100-2026-11-24-seventh.txt. Variant bn128 keeps the v4 build.
  v6  ROW_SUM_MMA=1: a valid negative, left at 0 (variant row_sum_mma). Why:
      the same sampling showed FADD at 12% of the instructions, one per score
      for the row sums; a row of e4m3 ones under each Vt chunk makes the P.V
      wgmma (m64n136k32 at D=128) return them, for 6% more tensor work.
      Measured (H100, quick_check, commit e8b164b): slower everywhere, 701 vs
      800 TFLOP/s at 4096x128, 782 vs 868 at 8192x128, and it fails 3 of 52
      checks at (1,2,4097,64) (error/budget 1.56): the tensor core's fp32
      accumulation of e4m3 products keeps fewer mantissa bits (DeepSeek-V3
      measured about 14 on H800), and a sum of ~4000 values of up to 256 loses
      what the FADDs kept. The FADDs were not the limit. Raw output: docs/
      results/sdpa/archive/s9-row-sum-mma-quick-check-nvidia-h100-2026-11-24-
      seventh.txt.
  v7  PINGPONG_D64=0 (promoted): turns at head_dim 128 only. Why: on the
      192-key tile, with the MUFU rate measured (tools/microbench/mufu_rate.cu,
      H100: MUFU.EX2 8.0 clocks per warp instruction per sub-partition from one
      warp up, i.e. 16 per clock per SM; ex2.approx.f16x2, two MUFU.EX2.F16,
      takes 16: no cheaper exponentials there; FFMA about 1), a 192 x 128 tile at
      D=128 needs 1536 clocks of MUFU per sub-partition and 1536 of QGMMA: the
      same. Measured (H100, quick_check, commit bb0678e, TFLOP/s; default /
      no turns / poly every 8th n8 tile / every 4th / RESCALE_THRESHOLD=2):
      4096x128 805 / 793 / 766 / 733 / 787, 8192x128 893 / 883 / 823 / 795 /
      873, 4096x64 503 / 528 / 445 / 462 / 507, 2048x64 395 / 414 / 382 / 389 /
      413. The cubic still loses; turns lose at D=128 and win at D=64 (where a
      tile's MUFU work is twice its QGMMA work, so the softmax cannot hide under
      the other warpgroup's GEMMs anyway). Confirmed at ab2f9fc with
      PINGPONG_D64=0 alone: 4096x64 506 -> 528, 2048x64 400 -> 423, 2048x64
      causal 233 -> 230, mission 10.32 -> 10.68 us (the price); D=128 unchanged.
      Raw output: docs/results/sdpa/archive/s9-192-variants-quick-check-nvidia-
      h100-2026-11-24-seventh.txt, s9-pingpong-d64-quick-check-...-seventh.txt,
      mufu-rate-nvidia-h100-2026-11-24-seventh.txt.
  v8  WS_PDL=2 (promoted). Why: s9 is two launches, and at the mission
      shape (0.85x s6, a valid negative) the second one's dispatch and
      prologue wait for the pre-pass to end. With PDL the attention kernel's
      blocks start as soon as every pre-pass block has begun, set up their
      barriers and prefetch the tensor maps, and wait (griddepcontrol.wait)
      for the pre-pass's Vt before the first TMA; the pre-pass itself waits
      for the previous kernel before reading V. H100, quick_check,
      throughput, us per launch at the mission (commits 8304567, c3a9ba4):
      off 10.52 / 10.50, trigger after the prologue (1) 10.14 / 10.02,
      trigger before the epilogue (2) 9.47; TFLOP/s at 4096x128 819 / 815 /
      810, 8192x128 880 / 895 (1), 2048x128 670 / 651 / 656: the long shapes
      move within run-to-run spread. Dependent-launch chains (stagelab.chain,
      the same quantized inputs each link: the links share the Vt scratch)
      match the synchronised chain. Variants no_pdl, pdl_early. Raw output:
      docs/results/sdpa/archive/pdl-quick-check-nvidia-h100-2026-11-24-eighth-*.

Shared memory: BLOCK_M * D (Q) + BLOCK_M * D * 2 (O staging)
  + 2 * STAGES * BLOCK_N * D (K, Vt) [+ STAGES * BLOCK_N * D (V as TMA lands
  it), VT_IN_KERNEL] + barriers + 1024 alignment slack.
  D=64 (128 keys x 3): 8 + 16 + 48 [+ 24] KiB = 73 [97] KiB; D=128 (192 keys
  x 2): 16 + 32 + 96 [+ 48] KiB = 145 [193] KiB.

  v9  VT_IN_KERNEL=1, VT_BATCH=2, PRODUCER_REGS=40, CONSUMER_REGS=232
      (promoted). Why: the pre-pass is a second launch (the mission shape's
      9.6 us against s6's 9.0) and at (4,16,4096,128) about 6% of the time
      (ncu's samples: 4651 of 76571, issue-bound integer work), done once per
      head; in the kernel it is done once per query tile, by warps that idle.
      The transposer's first form (a per-unit address computation, ~40
      instructions per 512-byte unit) cost more than the pre-pass: H100,
      quick_check, TFLOP/s default / in-kernel, 806 / 778 at 4096x128, 876 /
      794 at 8192x128 (ncu: +35% warp instructions, tensor pipe 39 vs 51%
      busy), though 7.6 vs 9.6 us at the mission. With per-lane constants
      (VtLane: ~9 instructions per unit, loads of VT_BATCH units in flight)
      and 40 registers for the producer warpgroup: H100, quick_check,
      throughput, commit dc3bb76, default / batch 2 / batch 4 / 40-232 split
      alone: mission 9.62 / 7.52 / 7.65 / 9.55 us, 4096x128 803 / 832 / 814 /
      800, 8192x128 887 / 894 / 853 / 862, 2048x128 659 / 782 / 751 / 667,
      4096x64 533 / 527 / 527 / 532. Checks 52/52 and chains 6/6 for each,
      worst error/budget 0.563 unchanged (the same Vt bytes reach the same
      wgmmas). The layout and the conflict-free bank pattern are checked on
      the CPU (tests/test_fp8_stage.py emulates ldmatrix.trans / stmatrix on
      VtLane's addresses). Variants prepass, vt_batch1, vt_batch4. Raw output:
      docs/results/sdpa/archive/s9-vt-in-kernel-*-tenth*.

  v10 PERSISTENT=1, CAUSAL_PAIRS=1 (promoted). Why: fitting the per-launch
      times of v9 at 11, 22 and 43 key tiles per block (2048, 4096 and 8192
      keys: 21.7, 41 and 78 us per block, 16 rounds of blocks) gives 1.76 us
      per tile and 2.3 us per block spent outside the key loop (prologue, the
      first tile's latency, the store, the next block's launch). A persistent
      block loads the next item's Q and first tiles under the last ones.
      H100, quick_check, throughput, commit b337b26, TFLOP/s one block per
      item / persistent / persistent + pairs: 4096x128 806 / 828 / 826,
      8192x128 854 / 861 / 857, 2048x128 755 / 775 / 776, 4096x64 508 / 516 /
      516, 4096x128 causal 700 / 711 / 730, 2048x128 causal 420 / 432 / 595
      (s8 529 there: longest-first stripes without pairs leave one block with
      1.7x the mean work), mission 7.69 / 7.55 / 7.57 us; 52/52 checks and 6/6
      chains each, error/budget 0.563. s8 in the same run 592 (4096x128) and
      623 (8192x128): s9/s8 = 1.40x and 1.38x. The calls of this session read
      3-4% apart on the same build (806 and 840 at 4096x128), so the issue's
      1.5x is judged side by side only. Variants one_item_per_block,
      persistent_no_pairs. The promoted build's causal head-dim-128 kernels
      spilled 4 bytes in the transposing warps (the pairs' loop state beside
      the hoisted VtLane): its long.yaml run was logged resource_fail (record
      tenth-b); VtLane is now made per tile behind an opaque lane id (0
      spills), and tests/test_resources.py holds every registered build to its
      gates. long.yaml at 61870e5 (H100): pass, 814 / 847 TFLOP/s at
      4096x128 / 8192x128, 617 at 2048x128 causal, 7.67 us at the mission;
      quick_check s9 / s8 820 / 592 and 852 / 615 (1.39x, 1.39x); H200 830 /
      599 and 865 / 615 (1.39x, 1.41x).
  v11 Knobs again on the v10 build, H100, quick_check, commit b422790,
      TFLOP/s at 4096x128 / 8192x128: default 815 / 848, VT_BATCH=1 817 /
      857 (the same), PINGPONG=0 793 / 818, BLOCK_N_D128=128 with 3 stages
      (193 KiB) 733 / 746. Nothing promoted. Where the rest goes: per
      192 x 128 tile at D=128 the QGMMAs and MUFU.EX2 need 1536 clocks each
      per SM (v7) and the consumer warps issue about 720 instructions each
      per tile (ncu: 507 M warp instructions at 8192x128), about 1440 issue
      slots per sub-partition against the same 1536: tensor pipe, MUFU and
      issue are all near their limits together, and ncu reads about 50% for
      the first two. 1.5x s8 (about 890-930 TFLOP/s) needs fewer
      instructions per score or exponentials off MUFU without adding issue
      (the cubic of v2 added more than it saved). Raw output: docs/results/
      sdpa/archive/s9-variants-quick-check-nvidia-h100-2026-11-24-tenth.txt.
  v12 Where the consumer warps' time goes, and three schedules that lose.
      ncu's sampled program counters at 4096x128 (tools/ncu_compare.py
      --source, H100, commit 7c1e84b): the consumer loop is 60% of the
      samples, the transposing warps' loop 22%. Per consumer warp and key tile
      (~2900 clocks at ncu's clock): K/V/turn/S waits ~270, GEMM issue and O's
      rescale ~360, row max ~490, FFMAs ~330, the MUFU phase ~1110, the F2FP
      / PRMT pack ~310; stalls 37% "wait" (the fixed stall counts ptxas sets:
      S08 after a MUFU.EX2, S02 per FMNMX / F2FP), 22% issuing. The warps wait
      little on data or on each other: the softmax's own latency chain is the
      loop. Three ways to overlap more of it with the MUFU.EX2s, all checked
      52/52, all slower (H100, quick_check, TFLOP/s at 4096x128 / 8192x128):
        EXP2_POLY_EVERY 12 / 8 / 6 / 4 (1/12 ... 1/4 of the exponentials on
          the FMA pipe): 741 / 753 / 754 / 731 and 776 / 779 / 791 / 770 vs
          808 and 846.
        EARLY_PACK=1 (P converted to e4m3 in the softmax, into registers of
          its own, copied into the P.V operands after the previous P.V's wait;
          the F2FPs then sit among the MUFU.EX2s, 8% fewer stall-count cycles
          per tile): 765 / 785 vs 826 / 854; without turns 775 / 804. As a
          plain assignment ptxas gave both arrays one set of registers and
          serialized every wgmma (C7513); the copy is an asm mov.
        EXP_GROUPS 2 / 3 / 4 / 6 (the exponentials in that many basic blocks,
          each with its FFMAs and its part of the row sums, the blocks split by
          schedule_boundary and each boundary's condition reading the partial
          sums so that ptxas cannot sink the adds; measured at commit b6e3d84,
          variants exp_groups2/4 there, removed after: 75 lines in the shared
          tile for a loss):
          769 / 748 / 747 / 725 and 796 / 776 / 774 / 756 vs 827 and 847.
      ptxas's own order (every FFMA, then the MUFU.EX2s with the sums' FADDs
      between them, then the pack) stays the fastest found: the two consumer
      warps of a sub-partition seem to do best when one is in its MUFU phase
      while the other is not, and work moved into the MUFU phase takes issue
      slots from the other warp. Clocks (stagelab.gpu_clocks, new): the H100
      reaches its 700 W limit on the long shapes and lowers the SM clock; in
      one call s9 ran at about 1830-1880 MHz, s8 and cuDNN at 1640-1700 MHz
      (4096x128) and 1490-1540 (8192x128): the fp16 kernels are the more
      power-limited, so s9/s8 is not flattered by the clocks. Raw output:
      docs/results/sdpa/archive/s9-*-eleventh.*; variants early_pack,
      poly12, poly6. The same sampling counted ~130 turns of the producer
      warp's retry loop per wait for an empty K slot (6.0 M loop heads, 18 M
      warp instructions on sub-partition 0); MBARRIER_SUSPEND_NS (try_wait's
      suspendTimeHint, sdpa_tma.cuh: the retry loop sleeps in NANOSLEEP.SYNCS)
      at 100 / 1000 / 20000 ns changes nothing: 818 / 819 / 818 vs 821 at
      4096x128, 850 / 851 / 844 vs 851 at 8192x128, 7.65-7.67 vs 7.73 us at the
      mission; s8 with 1000 ns 593 vs 590 and 619 vs 627 (variants suspend1000;
      archive/mbarrier-suspend-quick-check-nvidia-h100-2026-11-24-eleventh.txt).
      Last, a probe that was wrong: turns on the MUFU (a second pair of named
      barriers around each warpgroup's exponentials, so that the two MUFU-bound
      phases could not overlap; ptxas moves register work across bar.sync, so
      the turn was made a data dependency through two words per thread in the O
      staging tile). The words' row-major offsets fell into other warps' rows of
      that SW128 tile: 16 of 52 checks and 2 of 6 chains failed, and the build
      was slower besides (788 / 804 vs 818 / 850 TFLOP/s, 740 vs 759 at 4096x128
      causal). Not committed, not fixed: with turns the phases cannot overlap,
      and the time still went up. Raw output: archive/s9-mufu-turns-quick-
      check-nvidia-h100-2026-11-24-eleventh.txt.
      Not tried, for the 1.5x: (a) 224-key tiles (FlashAttention-3's FP8
      choice at D=128): ~3.5% fewer consumer instructions per key, but S 112 +
      P 28 + O 64 registers leave ~28 of the 232 a consumer thread gets beside
      the transposer's 40, where the 192-key build uses ~36 for the rest; Vt's
      fourth chunk would be 32 keys padded to 64 (2 stages: 225 KiB of shared
      memory). (b) Less energy per tile: s9 runs power-capped at ~1820 MHz of
      1980 on the long shapes; at the full clock its 818 / 848 TFLOP/s would be
      ~890 / ~975, i.e. 1.5x s8.
  v13 SPECULATE_MAX=1 with RESCALE_THRESHOLD=t (twelfth session; measured at
      commit 2637ba1, variant speculate_max there, removed after). Hypothesis,
      from v12's row max (~490 of ~2900 clocks per warp and tile): with a
      threshold the warp keeps its max, so the exponentials need not wait for
      the tile's max. Once every row of the warp has a max, p = ex2(s' - kept +
      offset) at once; the tile max is read from p afterwards (ex2 is
      monotonic), one vote asks whether some p passed 2^(offset + t), and only
      then is that row's p, sum and O scaled by 2^offset / max p, its kept max
      moved up as much. The SASS did what was meant: FMNMX and FADD between the
      MUFU.EX2s, the max tree off the path from the S wgmma to the MUFUs (the
      speculative block: 388 instructions, 831 cycles of stall counts, 96
      MUFU.EX2 of which 67 at S01 and 25 at S08; 0 spills). H100, quick_check
      (checks 52/52, worst error/budget 0.70 at t = 1, 2 and 0.83 at t = 3;
      chains 6/6), TFLOP/s at 4096x128 / 8192x128 / 4096x128 causal /
      4096x64, default / t=2 alone / t=2 speculative / t=1 / t=3:
      821 / 823 / 814 / 788 / 821, 855 / 857 / 852 / 834 / 855,
      759 / 766 / 746 / 721 / 760, 532 / 543 / 495 / 467 / 517.
      A valid negative: taking ~200 cycles of the max tree off each warp's
      chain bought nothing, so that chain is not what sets the tile time; it
      agrees with v12's lesson that a sub-partition's two consumer warps share
      what one of them frees. Removed (60 lines in the shared tile, and a gap
      it left open: a p that overflowed, a jump past 2^120 in one tile, was
      not recovered). Raw output: docs/results/sdpa/archive/s9-speculate-max-
      quick-check-nvidia-h100-2026-11-24-twelfth.txt.
      Why the pipes look like they take turns (ncu at 4096x128: tensor 49%,
      XU 50%): tools/microbench/mufu_wgmma_overlap.cu times one warpgroup's
      wgmma stream beside another's ALU stream on each SM (H100). Beside the
      wgmmas, ex2 takes 1.24x its time alone (SS; 1.26x beside RS wgmmas, P.V's
      form), and the wgmmas keep theirs; beside FFMAs both slow down, FFMA
      1.58x / 1.73x and the wgmmas 1.27x / 1.36x (SS / RS). fp16 and e4m3
      alike. A softmax under the other warpgroup's GEMMs is dearer than alone,
      and its FFMA / FADD / FMNMX work stretches the GEMMs too: part of why
      pingpong reaches ~50% on both pipes, and why every variant that added
      ALU work (v2 / v12's polynomial shares) lost. Raw output: docs/results/
      sdpa/archive/mufu-wgmma-overlap-nvidia-h100-2026-11-24-twelfth.txt.
      Three consumer warpgroups (more warps per sub-partition to hide the
      softmax's latencies, FlashAttention-3's head-dim-64 shape) do not fit at
      D=128: built with 128-key tiles and 152 registers (128 x (40 + 3 x 152)
      <= 65536), ptxas spills 924-1824 bytes per thread (D=64: 20-40).

Scope: head_dim 64 and 128, fp16 or bf16 output, causal or not, any
  seq_len >= 1, any softmax_scale; Q/K/V/O base and strides multiples of 16
  bytes (others: cudaErrorInvalidValue before launch). Needs sm_90a.
*/
#include <cuda_runtime.h>

#include "sdpa_api.h"
// s9 launches the pre-pass and the attention kernel with programmatic dependent launch (log v8)
#ifndef WS_PDL
#define WS_PDL 2
#endif
#include "sdpa_fp8.cuh"
#include "sdpa_warpspec_knobs.cuh"

// Speed knobs, default off (the registry's defines keep the measured s9; see the log above).
#ifndef PINGPONG
#define PINGPONG 1
#endif
#ifndef PINGPONG_D64
#define PINGPONG_D64 PINGPONG
#endif
#ifndef FOLD_P_SCALE
#define FOLD_P_SCALE 1
#endif
#ifndef EXP2_POLY_EVERY
#define EXP2_POLY_EVERY 0
#endif
#ifndef RESCALE_THRESHOLD
#define RESCALE_THRESHOLD 0
#endif
#ifndef ROW_SUM_MMA
#define ROW_SUM_MMA 0
#endif
#ifndef VT_IN_KERNEL
#define VT_IN_KERNEL 0
#endif
#ifndef VT_BATCH
#define VT_BATCH 1
#endif
#ifndef PERSISTENT
#define PERSISTENT 0
#endif
#ifndef EARLY_PACK
#define EARLY_PACK 0
#endif
#ifndef PV_PROMOTE_D64
#define PV_PROMOTE_D64 0
#endif
#ifndef PV_PROMOTE_D128
#define PV_PROMOTE_D128 0
#endif

namespace {

constexpr int kConsumerWarpgroups = 2;
template <int D>
constexpr bool kPingpong = (D == 64 ? PINGPONG_D64 : PINGPONG) != 0;
constexpr bool kPersistent = PERSISTENT != 0;
constexpr int kBlocksPerSm = 1;

template <int D>
using S9Config = sdpa_fp8::Fp8Config<
    sdpa_warpspec::Config<kConsumerWarpgroups, D == 64 ? BLOCK_N_D64 : BLOCK_N_D128, D == 64 ? STAGES_D64 : STAGES_D128,
                          kPingpong<D>, kPersistent, kBlocksPerSm, PRODUCER_REGS, CONSUMER_REGS>,
    FOLD_P_SCALE != 0, EXP2_POLY_EVERY, RESCALE_THRESHOLD, ROW_SUM_MMA != 0, VT_IN_KERNEL != 0, VT_BATCH,
    EARLY_PACK != 0, (D == 64 ? PV_PROMOTE_D64 : PV_PROMOTE_D128) != 0>;

}  // namespace

// The fp16 entry: this stage takes e4m3 inputs only.
extern "C" cudaError_t sdpa_forward(const SdpaProblem*, cudaStream_t) { return cudaErrorNotSupported; }

extern "C" cudaError_t sdpa_fp8_forward(const SdpaFp8Problem* problem, cudaStream_t stream) {
  const cudaError_t ok = sdpa_fp8::check(problem, VT_IN_KERNEL != 0);
  if (ok != cudaSuccess || sdpa_problem_is_empty(problem->attn)) return ok;
  return sdpa_dispatch(problem->attn, [&](auto tag, auto hd) {
    using T = typename decltype(tag)::type;
    constexpr int D = decltype(hd)::value;
    return sdpa_fp8::launch<T, D, S9Config<D>>(*problem, stream);
  });
}

extern "C" int64_t sdpa_fp8_scratch_bytes(const SdpaFp8Problem* problem) {
  return problem == nullptr ? 0 : sdpa_fp8::scratch_bytes(problem->attn, VT_IN_KERNEL != 0);
}

extern "C" const char* sdpa_stage_config() {
  return "s9_fp8 e4m3 wgmma, BLOCK_M=128 (2 consumer warpgroups + 1 producer)"
         " BLOCK_N_D64=" SDPA_STR(BLOCK_N_D64) " BLOCK_N_D128=" SDPA_STR(BLOCK_N_D128)
         " STAGES_D64=" SDPA_STR(STAGES_D64) " STAGES_D128=" SDPA_STR(STAGES_D128)
         " setmaxnreg producer=" SDPA_STR(PRODUCER_REGS) " consumer=" SDPA_STR(CONSUMER_REGS)
         " PINGPONG=" SDPA_STR(PINGPONG) " PINGPONG_D64=" SDPA_STR(PINGPONG_D64)
         " FOLD_P_SCALE=" SDPA_STR(FOLD_P_SCALE) " EXP2_POLY_EVERY=" SDPA_STR(EXP2_POLY_EVERY)
         " RESCALE_THRESHOLD=" SDPA_STR(RESCALE_THRESHOLD) " ROW_SUM_MMA=" SDPA_STR(ROW_SUM_MMA)
         " VT_IN_KERNEL=" SDPA_STR(VT_IN_KERNEL)
         " (0: a pre-pass transposes V to Vt in scratch; 1: the producer warpgroup's warps 1-3 in shared"
         " memory; keys permuted per 32) VT_BATCH=" SDPA_STR(VT_BATCH)
         " PERSISTENT=" SDPA_STR(PERSISTENT) " CAUSAL_PAIRS=" SDPA_STR(CAUSAL_PAIRS)
         " EARLY_PACK=" SDPA_STR(EARLY_PACK)
         " PV_PROMOTE_D64=" SDPA_STR(PV_PROMOTE_D64) " PV_PROMOTE_D128=" SDPA_STR(PV_PROMOTE_D128)
         " WS_PDL=" SDPA_STR(WS_PDL) " (programmatic dependent launch; 2: trigger before the epilogue)";
}

// The attention kernel's launch-time shared memory; the output dtype does not change it.
extern "C" int64_t sdpa_dynamic_shared_memory_bytes(int32_t head_dim, int32_t) {
  if (head_dim == 64) return sdpa_fp8::Layout<64, S9Config<64>>::kSmemBytes;
  if (head_dim == 128) return sdpa_fp8::Layout<128, S9Config<128>>::kSmemBytes;
  return 0;
}
