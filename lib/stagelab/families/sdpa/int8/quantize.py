"""The INT8 recipe's quantizer: fp16/bf16 Q, K, V in, int8 Q and K and e4m3 V out, with their scales.

Q is [batch, heads, seq_len, head_dim]; K and V are [batch, kv_heads, kv_seq_len, head_dim] with
kv_heads dividing heads (grouped-query attention). SageAttention2's recipe:

- K is smoothed: its mean over the tokens, per (batch, kv_head, channel), is subtracted before
  quantization. Softmax does not change: query i's scores against every key j become
  q_i.(k_j - m) = q_i.k_j - q_i.m, the same constant q_i.m off for every key of the row, and
  softmax(s - c) = softmax(s) for any constant c. What changes is K's range: a channel that
  carries a common offset in every token (as outlier channels of trained models do) no longer
  sets the block's amax, so the other channels keep their int8 resolution.
- Q and K are quantized to int8 per block of tokens (blocks.py): q_block rows, the kernel's
  query tile (or the warpgroup's share of it); k_block keys, the kernel's key tile. The last
  block may be partial.
- V is smoothed too (smooth_v): its mean over the tokens, per (batch, kv_head, channel), is
  subtracted before quantization and added back to the output. The rows of P sum to l, so
  P.V / l = P.(V - mean) / l + mean exactly; what changes is what the e4m3 P.V sums: centred terms
  of both signs, whose truncations in the tensor core's accumulator cancel instead of adding up
  (recipe.py says why that matters).
- V (less its mean) goes to e4m3 with one float32 descale per (batch, kv_head, channel) = amax over
  the tokens / 448 (per head, FA3's granularity, with v_scaling="head").

Every descale is the dequantization factor (x ~= data * descale), as FP8's descales are. The data
keep the inputs' layout (a bshd view's 8-bit data are bshd views too); the scales are contiguous. Inputs
holding inf or NaN are rejected naming the tensor, batch, head, block and token; all-zero blocks
and channels get descale 1 and exact zeros.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ....core.errors import InputError
from ..fp8.quantize import E4M3_MAX, saturated_e4m3
from ..kernel import check_grouped_shapes
from ..reference import grouped_heads
from .blocks import SCALE_DTYPE, amax_descales, dequantize_int8_blocks, quantize_int8_blocks
from .recipe import K_BLOCK, PER_CHANNEL, Q_BLOCK, check_blocks, check_v_scaling

SOURCE_DTYPES = (torch.float16, torch.bfloat16, torch.float32)  # float32: tools and tests
_LAYOUT = "[batch, heads, seq_len, head_dim]"


@dataclass(frozen=True)
class Int8Inputs:
    """The recipe's operands: int8 Q and (smoothed) K per block of tokens, e4m3 V, float32 descales."""

    q: torch.Tensor  # int8 [B, H, Sq, D]
    k: torch.Tensor  # int8 [B, Hkv, Sk, D]: K - k_mean
    v: torch.Tensor  # float8_e4m3fn [B, Hkv, Sk, D]: V - v_mean
    q_descale: torch.Tensor  # float32 [B, H, ceil(Sq / q_block)]
    k_descale: torch.Tensor  # float32 [B, Hkv, ceil(Sk / k_block)]
    v_descale: torch.Tensor  # float32 [B, Hkv, D] (per head: one value repeated over the channels)
    k_mean: torch.Tensor  # float32 [B, Hkv, D]: what smoothing subtracted (zeros when not smoothed)
    v_mean: torch.Tensor  # float32 [B, Hkv, D]: the same for V, added back to the output
    q_block: int
    k_block: int
    v_scaling: str
    smooth_k: bool
    smooth_v: bool
    source_dtype: torch.dtype  # the inputs' dtype, the output's

    def dequantized(self, dtype: torch.dtype = torch.float64, *, smoothed: bool = False) -> tuple[torch.Tensor, ...]:
        """Q, K and V as the 8-bit data hold them, in dtype; K with its mean added back unless
        `smoothed` (attention is the same either way, up to rounding); V with its mean added back
        always (attention's output carries it: the kernel adds it to O)."""
        q = dequantize_int8_blocks(self.q, self.q_descale, self.q_block, dtype)
        k = dequantize_int8_blocks(self.k, self.k_descale, self.k_block, dtype)
        if not smoothed:
            k = k + self.k_mean.to(dtype)[:, :, None, :]
        v = self.v.to(dtype) * self.v_descale.to(dtype)[:, :, None, :] + self.v_mean.to(dtype)[:, :, None, :]
        return q, k, v

    def grouped(self) -> Int8Inputs:
        """The same operands with K, V and their scales repeated for every query head they serve."""
        heads = self.q.shape[1]
        return Int8Inputs(self.q, grouped_heads(self.k, heads), grouped_heads(self.v, heads), self.q_descale,
                          grouped_heads(self.k_descale, heads), grouped_heads(self.v_descale, heads),
                          grouped_heads(self.k_mean, heads), grouped_heads(self.v_mean, heads), self.q_block,
                          self.k_block, self.v_scaling, self.smooth_k, self.smooth_v, self.source_dtype)


def _first_nonfinite(name: str, x: torch.Tensor, block: int | None, why: str) -> None:
    bad = ~torch.isfinite(x)
    if not bad.any():
        return
    b, h, s, d = (int(i) for i in torch.nonzero(bad)[0])
    if block is None:
        where, count = f"batch {b}, head {h}", int(bad[b, h].sum())
    else:
        start = s // block * block
        where = f"batch {b}, head {h}, block {s // block} (tokens {start}-{min(start + block, x.shape[2]) - 1})"
        count = int(bad[b, h, start:start + block].sum())
    raise InputError(f"{name}: {where} holds {count} inf or NaN value(s), the first at token {s}, channel {d} "
                     f"({int(bad.sum())} in the tensor); {why}, so it cannot be quantized")


def _validate_tensor(name: str, x) -> None:
    if not isinstance(x, torch.Tensor):
        raise InputError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 4:
        raise InputError(f"{name} must have 4 dims {_LAYOUT}, got shape {tuple(x.shape)}")
    if x.dtype not in SOURCE_DTYPES:
        raise InputError(f"{name} has dtype {x.dtype}; the INT8 recipe takes {', '.join(map(str, SOURCE_DTYPES))}")
    if min(x.shape) < 1:
        raise InputError(f"{name}: every dimension must be >= 1, got shape {tuple(x.shape)}")


def validate_qkv(q, k, v, q_block: int, k_block: int) -> None:
    """Shapes, dtypes and devices the recipe takes, and no inf or NaN anywhere."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        _validate_tensor(name, x)
    check_grouped_shapes(q, k, v)
    if not q.dtype == k.dtype == v.dtype or not q.device == k.device == v.device:
        raise InputError(f"q, k, v must share one dtype and device; got {q.dtype}, {k.dtype}, {v.dtype} "
                         f"on {q.device}, {k.device}, {v.device}")
    _first_nonfinite("q", q, q_block, "its int8 scale comes from the block's amax")
    _first_nonfinite("k", k, k_block, "its int8 scale comes from the block's amax (after the mean over tokens)")
    _first_nonfinite("v", v, None, "its e4m3 scales come from amaxes over the tokens")


def quantize_v(v: torch.Tensor, v_scaling: str = PER_CHANNEL) -> tuple[torch.Tensor, torch.Tensor]:
    """(e4m3 data, float32 descales [B, Hkv, D]): amax over the tokens (and channels, per head) / 448."""
    check_v_scaling(v_scaling)
    magnitude = v.to(SCALE_DTYPE).abs()
    amax = magnitude.amax(dim=2) if v_scaling == PER_CHANNEL else magnitude.amax(dim=(2, 3))[..., None]
    descale = amax_descales(amax, E4M3_MAX).expand(*v.shape[:2], v.shape[3]).contiguous()
    return saturated_e4m3(v.to(SCALE_DTYPE) / descale[:, :, None, :]), descale


def token_mean(x32: torch.Tensor, smooth: bool) -> torch.Tensor:
    """float32 [B, Hkv, D]: x's mean over the tokens (float32, torch's order), or zeros."""
    if smooth:
        return x32.mean(dim=2)
    return torch.zeros((*x32.shape[:2], x32.shape[3]), dtype=SCALE_DTYPE, device=x32.device)


def quantize_int8_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, q_block: int = Q_BLOCK,
                      k_block: int = K_BLOCK, v_scaling: str = PER_CHANNEL, smooth_k: bool = True,
                      smooth_v: bool = True) -> Int8Inputs:
    """The recipe's operands from fp16/bf16 (or float32) Q, K, V; see the module's docstring."""
    check_blocks(q_block, k_block)
    check_v_scaling(v_scaling)
    validate_qkv(q, k, v, q_block, k_block)
    k32, v32 = k.to(SCALE_DTYPE), v.to(SCALE_DTYPE)
    k_mean, v_mean = token_mean(k32, smooth_k), token_mean(v32, smooth_v)
    q8, q_descale = quantize_int8_blocks(q.to(SCALE_DTYPE), q_block)
    k8, k_descale = quantize_int8_blocks(k32 - k_mean[:, :, None, :], k_block)
    v8, v_descale = quantize_v(v32 - v_mean[:, :, None, :], v_scaling)
    return Int8Inputs(q8, k8, v8, q_descale, k_descale, v_descale, k_mean, v_mean, q_block, k_block, v_scaling,
                      bool(smooth_k), bool(smooth_v), q.dtype)

