"""The INT8 attention recipe's parameters (SageAttention2's Hopper recipe, issue 44), in one place.

A recipe is what the quantizer and the emulation must agree on: the token blocks Q and K are
scaled by, how V is scaled, whether K and V are smoothed, the key tile P is quantized per and the
scale P is quantized at. The trials of the stage choose them; the defaults are the starting point:

- Q_BLOCK = 64: one scale per consumer warpgroup's rows. The fp16 stages' query tiles are 128 or
  192 rows, two or three warpgroups of 64 (wgmma's M); each warpgroup folds its own Q descale
  into its softmax scale, so a finer block than the CTA's tile costs nothing, and a block never
  straddles two warpgroups. SageAttention2's Hopper path quantizes Q per 64 rows too (BLKQ=64).
- K_BLOCK = 128: one scale per key tile of 128 keys (SageAttention2's BLKK=128, the fp16
  stages' head_dim-128 tile), so the K descale is one multiply per tile.
- V per channel: a channel's scale multiplies that output channel alone, so it commutes with
  P.V and costs one multiply per output element at the end (SageAttention2's per_channel_fp8);
  per head (FA3's granularity) is offered for the trials.
- smooth_v = True: see Int8Recipe.smooth_v.
- P_MAX = 2^8: see P_MAX below.
"""

from __future__ import annotations

from dataclasses import dataclass

from ....core.errors import InputError
from ..fp8.quantize import E4M3_MAX

INT8_MAX = 127  # symmetric int8: -127..127 (-128 unused, so the range is symmetric about 0)
Q_BLOCK = 64
K_BLOCK = 128
PER_CHANNEL = "channel"  # V: one e4m3 scale per (batch, kv_head, channel)
PER_HEAD = "head"  # V: one e4m3 scale per (batch, kv_head), FA3's granularity
V_SCALINGS = (PER_CHANNEL, PER_HEAD)
# P's scale into e4m3: P = exp(s - running_max) * P_MAX, so each row's largest P (at its running
# max) is P_MAX, and the row sum, taken of the same P before quantization, carries the same
# factor, which normalizing cancels. In the kernel it is a constant added to the exponent before
# exp2 (no multiply), so any value costs the same; accuracy chooses. Two candidates:
# - 2^8 (FA3's Max_offset = 8, s9's): an exact power of two, the row max at 256 = 2^8 exactly;
# - 448 = 2^8.807 (SageAttention2's S_FP8_OFFSET = log2(448)): e4m3's largest finite value, so
#   0.8 binade more of the row's small P stay normal e4m3 (the sub-normal floor 2^-6 is 2^-14.8
#   of the row max instead of 2^-14).
# Measured against float64 truth (accuracy.py; 1x2x384x64, 1x2x384x128 causal, 1x2x256x64 causal,
# seeds 0-1, fp16): 2^8 is as accurate or slightly better on every distribution (positive: mean
# max error 0.0273 vs 0.0301, relative L1 0.00300 vs 0.00312; normal 0.0356 vs 0.0358; the rest
# equal to 3 digits). Near-uniform rows put P just under the row max, where 2^8's values sit at
# the top of e4m3's [128, 256) binade (spacing 16/256) and 448's in [256, 448] (spacing 32/448);
# the extra sub-normal range matters only for weights below 2^-14 of the row max.
P_EXP2_OFFSET = 8
P_MAX = 2.0 ** P_EXP2_OFFSET


def positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{name} must be a positive int (tokens), got {value!r}")
    return value


def check_blocks(q_block, k_block) -> None:
    """Block sizes are positive whole numbers of tokens; a kernel's tiles are multiples of 16 or
    64, but any size is a valid recipe for the quantizer and the emulation."""
    positive_int("q_block", q_block)
    positive_int("k_block", k_block)


def check_v_scaling(v_scaling) -> None:
    if v_scaling not in V_SCALINGS:
        raise InputError(f"v_scaling must be one of {V_SCALINGS}, got {v_scaling!r}")


def check_p_max(p_max) -> None:
    """P's scale must keep the row max finite in e4m3 and be positive."""
    if not isinstance(p_max, (int, float)) or not 0 < p_max <= E4M3_MAX:
        raise InputError(f"p_max must be in (0, {E4M3_MAX}] (e4m3's largest finite value), got {p_max!r}")


@dataclass(frozen=True)
class Int8Recipe:
    """Everything the quantizer and the emulation of one INT8 stage must share. kv_tile: the key
    tile the kernel quantizes P per (None: k_block, one K scale per tile).

    smooth_v: V's mean over the tokens, per (batch, kv head, channel), is subtracted before V is
    quantized to e4m3 and added to the output (P's rows sum to l, so P.V / l = P.(V - mean) / l +
    mean; SageAttention2's smooth-V). Why: the e4m3 wgmma's accumulator truncates, and on plain V
    every term of an all-positive row has one sign, so a P.V summed over the whole row drifts (the
    H200 measured 10.5x the budget on positive rows of 4099 keys at head_dim 64, 2026-11-28). The
    centred terms take both signs and their truncations cancel: on a CPU model of the tensor core
    (tools/int8_pv_accumulation.py, docs/results/sdpa/history/int8/README.md "Smoothing V would let
    P.V sum over the whole row") the row-long sum on smoothed V is as accurate as the per-tile one on
    every distribution (positive 0.31x the budget against 9.7x on plain V at 4099 keys; normal,
    large, outlier 0.48x-0.50x either way), and smoothing halves the positive rows' error against
    float64 truth (0.00089 against 0.0022 per tile on plain V) while normal's grows a little
    (0.0061 against 0.0050). So s19 at head_dim 64 may sum P.V over the row (int8/pv_accumulation.cuh)."""

    q_block: int = Q_BLOCK
    k_block: int = K_BLOCK
    v_scaling: str = PER_CHANNEL
    smooth_k: bool = True
    smooth_v: bool = True
    kv_tile: int | None = None
    p_max: float = P_MAX

    def __post_init__(self) -> None:
        check_blocks(self.q_block, self.k_block)
        check_v_scaling(self.v_scaling)
        check_p_max(self.p_max)
        if self.kv_tile is not None:
            positive_int("kv_tile", self.kv_tile)

    @property
    def key_tile(self) -> int:
        return self.k_block if self.kv_tile is None else self.kv_tile

    def quantizer_args(self) -> dict:
        """The keyword arguments of quantize_int8_qkv for this recipe."""
        return {"q_block": self.q_block, "k_block": self.k_block, "v_scaling": self.v_scaling,
                "smooth_k": self.smooth_k, "smooth_v": self.smooth_v}

    def emulation_args(self) -> dict:
        """The keyword arguments of emulate_int8_attention for this recipe."""
        return {"kv_tile": self.key_tile, "p_max": self.p_max}


DEFAULT_RECIPE = Int8Recipe()
