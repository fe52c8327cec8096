"""The INT8 recipe in float64: the yardstick an INT8 stage is judged by (budget.py).

It computes what the recipe itself computes, with every rounding the recipe prescribes and none
of a GPU's incidental ones (the summation order, float32 accumulation, exp2's approximation):

- S = (q8 . k8^T) * q_descale[query's block] * k_descale[key's block] * softmax_scale. The integer
  dot products are exact in float64 (|q8 . k8| <= 127^2 * head_dim < 2^53), as wgmma's int32
  accumulation is exact (and as its conversion to float32 is, since 127^2 * 128 < 2^24): the
  descales fold into the softmax scale, one float multiply per score.
- Online softmax over key tiles of kv_tile keys (the kernel's key tile): each tile's scores are
  exponentiated against the running row max m, P = exp(S - m) * p_max, so the row's largest P
  so far is p_max (recipe.P_MAX: 2^8 by default, why there); P is quantized to e4m3
  (saturating) against that running max, as the kernel quantizes each tile's P when it has it.
  The row sum is taken of P before quantization (FA3's and SageAttention2's choice).
- Each tile's P.V is computed exactly (e4m3 x e4m3 products are multiples of 2^-18 below 2^18,
  so float64 sums them exactly over tiles of up to 2^16 keys) and added into the running float64
  O after O is rescaled by exp(m_old - m_new): the "promoted per tile" accumulation (each tile in
  the MMA accumulator, then added into float32 registers). A kernel that keeps O in the MMA
  accumulator over the whole row (s19 at head_dim 64) differs from it only by that accumulator's
  roundings, a GPU's incidental ones, which stay small on smoothed V (recipe.py's smooth_v).
- O = O * v_descale[channel] / row_sum + v_mean[channel] at the end: V's per-channel scale commutes
  with P.V, and V's mean (zeros unless smoothed) comes back whole since P's rows sum to row_sum.

Causal masks are aligned bottom-right (reference.py); grouped-query attention repeats K/V heads.
"""

from __future__ import annotations

import torch

from ....core.errors import InputError
from ..fp8.quantize import saturated_e4m3
from ..reference import causal_mask, head_chunks
from .blocks import per_token
from .quantize import Int8Inputs
from .recipe import P_MAX, check_p_max, positive_int

ACCUMULATOR_DTYPE = torch.float64


def recipe_operands(inputs: Int8Inputs) -> dict[str, torch.Tensor]:
    """The operands in float64, flattened over (batch, head), K/V repeated per query head:
    q8 [n, Sq, D], k8 and v8 [n, Sk, D], the per-token descales of Q [n, Sq, 1] and K [n, 1, Sk],
    and V's per-channel descales and means [n, 1, D]."""
    grouped = inputs.grouped()
    b, h, sq, d = grouped.q.shape
    sk = grouped.k.shape[2]

    def flat(t: torch.Tensor, *shape: int) -> torch.Tensor:
        return t.to(ACCUMULATOR_DTYPE).reshape(b * h, *shape)

    return {
        "q8": flat(grouped.q, sq, d), "k8": flat(grouped.k, sk, d), "v8": flat(grouped.v, sk, d),
        "q_descale": flat(per_token(grouped.q_descale, grouped.q_block, sq), sq, 1),
        "k_descale": flat(per_token(grouped.k_descale, grouped.k_block, sk), 1, sk),
        "v_descale": flat(grouped.v_descale, 1, d), "v_mean": flat(grouped.v_mean, 1, d),
    }


def e4m3_probabilities(scores: torch.Tensor, row_max: torch.Tensor, p_max: float) -> tuple[torch.Tensor, ...]:
    """(P = exp(scores - row_max) * p_max in float64, P in e4m3 as float64). Masked scores are
    -inf and give 0; a row_max of -inf (every key so far masked) is taken as 0."""
    finite_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
    p = torch.exp(scores - finite_max) * p_max
    return p, saturated_e4m3(p).to(ACCUMULATOR_DTYPE)


def online_softmax_pv(ops: dict[str, torch.Tensor], softmax_scale: float, mask: torch.Tensor | None,
                      kv_tile: int, p_max: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(O before V's descale and the normalization, the row sums), key tile by key tile."""
    q8, k8, v8 = ops["q8"], ops["k8"], ops["v8"]
    row_scale = ops["q_descale"] * softmax_scale
    out = torch.zeros_like(q8[..., :1].expand(-1, -1, v8.shape[-1]))
    row_max = torch.full_like(row_scale, float("-inf"))
    row_sum = torch.zeros_like(row_scale)
    for start in range(0, k8.shape[1], kv_tile):
        keys = slice(start, start + kv_tile)
        scores = torch.matmul(q8, k8[:, keys].transpose(-1, -2)) * (row_scale * ops["k_descale"][..., keys])
        if mask is not None:
            scores = scores.masked_fill(mask[:, keys], float("-inf"))
        new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
        rescale = torch.exp(row_max - torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max))
        p, p8 = e4m3_probabilities(scores, new_max, p_max)
        out = out * rescale + torch.matmul(p8, v8[:, keys])
        row_sum = row_sum * rescale + p.sum(dim=-1, keepdim=True)
        row_max = new_max
    return out, row_sum


def emulate_int8_attention(inputs: Int8Inputs, softmax_scale: float, causal: bool, *, kv_tile: int | None = None,
                           p_max: float = P_MAX) -> torch.Tensor:
    """The recipe's attention output, float64 [batch, heads, seq_len, head_dim]. kv_tile: the key
    tile P is quantized per (default: inputs.k_block, one K scale per tile)."""
    check_p_max(p_max)
    kv_tile = inputs.k_block if kv_tile is None else kv_tile
    positive_int("kv_tile", kv_tile)
    b, h, sq, d = inputs.q.shape
    sk = inputs.k.shape[2]
    if causal and sk < sq:
        raise InputError(f"causal with {sk} keys for {sq} queries: the mask is aligned bottom-right, so the "
                         f"first {sq - sk} queries would see no key")
    ops = recipe_operands(inputs)
    mask = causal_mask(sq, inputs.q.device, sk) if causal else None
    out = torch.empty((b * h, sq, d), dtype=ACCUMULATOR_DTYPE, device=inputs.q.device)
    for sl in head_chunks(b * h, sq, sk):
        chunk = {name: t[sl] for name, t in ops.items()}
        acc, row_sum = online_softmax_pv(chunk, softmax_scale, mask, kv_tile, p_max)
        out[sl] = acc * chunk["v_descale"] / row_sum + chunk["v_mean"]
    return out.reshape(b, h, sq, d)
