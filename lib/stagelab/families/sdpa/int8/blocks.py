"""Symmetric int8 quantization per block of tokens: the Q.K^T operands of the INT8 recipe.

A tensor [batch, heads, seq_len, head_dim] is cut along seq_len into blocks of `block` tokens
(the last one partial when block does not divide seq_len); each (batch, head, block) gets one
float32 descale = amax(|block|) / 127, and data = round(x / descale) clamped to [-127, 127]
(round half to even, as the GPU's cvt.rni). Guarantees:

- an all-zero block gets descale 1 and exact zeros (never 0/0 = NaN);
- the descale stays a normal float32 (at least float32's tiny; kernels built with fast math flush
  sub-normals): only blocks with amax below 127 * tiny (~1.5e-36) hit that floor;
- every element round-trips within half a step: |data * descale - x| <= int8_rounding_bound(descale)
  = descale * (1/2 + 2 * 127 * 2^-24) per token: x / descale's float32 rounding, and for K the
  float32 subtraction of its mean (quantize.py), each at most 2^-24 of a value <= 127 descales.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .recipe import INT8_MAX

SCALE_DTYPE = torch.float32
MIN_DESCALE = torch.finfo(SCALE_DTYPE).tiny
# Two float32 roundings of a value of at most 127 descales (see the guarantees above).
_FLOAT32_ROUNDINGS = 2 * INT8_MAX * torch.finfo(SCALE_DTYPE).eps / 2


def block_count(seq_len: int, block: int) -> int:
    return -(-seq_len // block)


def blocked(x: torch.Tensor, block: int) -> torch.Tensor:
    """[B, H, S, D] as [B, H, blocks, block, D], the partial last block padded with zeros (which
    change no block's amax)."""
    b, h, s, d = x.shape
    blocks = block_count(s, block)
    padded = F.pad(x, (0, 0, 0, blocks * block - s))
    return padded.reshape(b, h, blocks, block, d)


def per_token(block_values: torch.Tensor, block: int, seq_len: int) -> torch.Tensor:
    """[B, H, blocks] values repeated for each token of their block: [B, H, seq_len]."""
    return block_values.repeat_interleave(block, dim=-1)[..., :seq_len]


def amax_descales(amax: torch.Tensor, largest_code: float) -> torch.Tensor:
    """float32 descales amax / largest_code: 1 where amax is 0, and never below float32's tiny."""
    amax = amax.to(torch.float64)
    descale = torch.where(amax > 0, amax / largest_code, torch.ones_like(amax))
    return descale.to(SCALE_DTYPE).clamp(min=MIN_DESCALE)


def int8_block_descales(x: torch.Tensor, block: int) -> torch.Tensor:
    """One descale per (batch, head, block of tokens): [B, H, blocks], float32."""
    return amax_descales(blocked(x.abs(), block).amax(dim=(-2, -1)), INT8_MAX)


def quantize_int8_blocks(x: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 data of x's shape, float32 descales [B, H, blocks]) for a float32 tensor x."""
    descale = int8_block_descales(x, block)
    scaled = x.to(SCALE_DTYPE) / per_token(descale, block, x.shape[2])[..., None]
    # |scaled| <= 127 up to float32 rounding; the clamp keeps a rounding above 127.5 from wrapping.
    data = torch.round(scaled).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
    return data, descale


def dequantize_int8_blocks(data: torch.Tensor, descale: torch.Tensor, block: int,
                           dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """data * its block's descale, in dtype (exact in float64)."""
    return data.to(dtype) * per_token(descale.to(dtype), block, data.shape[2])[..., None]


def int8_rounding_bound(descale: torch.Tensor, block: int, seq_len: int) -> torch.Tensor:
    """The most a round trip may move an element of each token: [B, H, seq_len, 1], float64."""
    return per_token(descale.to(torch.float64), block, seq_len)[..., None] * (0.5 + _FLOAT32_ROUNDINGS)
