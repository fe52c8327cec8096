// sdpa_warpspec_knobs.cuh -- default values of the knobs the warp-specialized
// stages (s6-s8) share; a stage's registry defines or a -D override win.
//   BLOCK_N_D64 / BLOCK_N_D128   keys per K/V tile (64 or 128)
//   STAGES_D64 / STAGES_D128     buffers per K ring and per V ring (>= 2)
//   PRODUCER_REGS / CONSUMER_REGS  the setmaxnreg split of a one-block-per-SM
//                                config: 128 * (24 + 2 * 240) = 64512 <= 65536
#pragma once

#ifndef BLOCK_N_D64
#define BLOCK_N_D64 128
#endif
#ifndef BLOCK_N_D128
#define BLOCK_N_D128 128
#endif
#ifndef STAGES_D64
#define STAGES_D64 3
#endif
#ifndef STAGES_D128
#define STAGES_D128 2
#endif
#ifndef PRODUCER_REGS
#define PRODUCER_REGS 24
#endif
#ifndef CONSUMER_REGS
#define CONSUMER_REGS 240
#endif
// Consumer warpgroups at head_dim 64 (2: 128-row blocks; 3: 192-row blocks,
// FlashAttention-3's head-dim-64 shape, each K/V tile feeding 1.5x the rows).
// With 3 the consumers get the registers that fit (160, sdpa_warpspec::
// fit_consumer_regs), whatever CONSUMER_REGS says. head_dim 128 stays at 2:
// its 64x128 O accumulator and S tile need more than 160 registers.
#ifndef CONSUMER_WGS_D64
#define CONSUMER_WGS_D64 2
#endif
