"""Plain FP8 attention: what a straightforward e4m3 implementation with these scales computes.

It sets the error budget of an FP8 stage, as plain fp16 attention does for the fp16 stages.
The arithmetic follows FlashAttention-3's FP8 forward (hopper/ in Dao-AILab/flash-attention):

- Q.K^T of e4m3 operands accumulated in float32; the per-head Q and K descales folded into the
  softmax scale (flash_fwd_kernel_sm90.h: softmax_scale_log2 *= q_descale * k_descale);
- P quantized to e4m3 with a fixed scale of 2^8: softmax.h's scale_apply_exp2 subtracts
  Max_offset = 8 (set for FP8 in flash_fwd_kernel_sm90.h) from the scaled row max, so
  P = exp2(s * log2(e) - (max * log2(e) - 8)) lies in [0, 256] instead of [0, 1] and uses more
  of e4m3's range (less underflow); the row sum is taken of P in float32, before quantization,
  and carries the same 2^8, so normalizing cancels it;
- P.V of e4m3 operands accumulated in float32, then times v_descale / row_sum (FA3 passes
X

e4m3 values and their products are exact in float32, so float32 matmuls of the e4m3 values are
e4m3 tensor-core products with float32 accumulation (the summation order aside).
"""

from __future__ import annotations

import math

import torch

from ..reference import causal_mask, head_chunks
from .quantize import E4M3, E4M3_MAX, Fp8Inputs

ACCUMULATOR_DTYPE = torch.float32
# FA3's Max_offset for FP8: exp2 is shifted up by this many binades, so P's largest value is 2^8.
P_EXP2_OFFSET = 8
P_MAX = 2.0 ** P_EXP2_OFFSET
if P_MAX > E4M3_MAX:  # the largest P (at each row's max) must stay finite in e4m3
    raise AssertionError(f"P's fixed scale {P_MAX} overflows e4m3 (max {E4M3_MAX})")
LOG2_E = math.log2(math.e)


def quantized_probabilities(scores: torch.Tensor, row_max: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """FA3's P: exp of the scores against row_max, times 2^8, in e4m3 (returned as float32), and
    the float32 row sum of P before quantization. Masked scores are -inf and give P = 0."""
    probabilities = torch.exp2((scores - row_max) * LOG2_E + P_EXP2_OFFSET)
    row_sum = probabilities.sum(dim=-1, keepdim=True)
    return probabilities.to(E4M3).to(ACCUMULATOR_DTYPE), row_sum


def per_head(descale: torch.Tensor) -> torch.Tensor:
    """[batch, heads] descales as [batch*heads, 1, 1], to broadcast over one head's matrix."""
    return descale.reshape(-1, 1, 1).to(ACCUMULATOR_DTYPE)


def flat_e4m3_operands(fp8: Fp8Inputs) -> tuple[torch.Tensor, ...]:
    """Q, K and V's e4m3 values as float32 [batch*heads, seq_len, head_dim] (exact); K and V with
    their own length."""
    return tuple(t.data.to(ACCUMULATOR_DTYPE).flatten(0, 1) for t in (fp8.q, fp8.k, fp8.v))


def emulate_fp8_attention(fp8: Fp8Inputs, softmax_scale: float, causal: bool) -> torch.Tensor:
    """softmax(Q K^T * scale + mask) V on the e4m3 inputs, FA3's way; [batch, heads, seq_len, head_dim]
    in fp8.source_dtype. K and V may be longer than Q (the causal mask aligned bottom-right, as
    reference.py's): a causal row always keeps its diagonal key, so no row is fully masked."""
    b, h, s, d = fp8.q.data.shape
    s_kv = fp8.k.data.shape[2]
    q8, k8, v8 = flat_e4m3_operands(fp8)
    score_scale = softmax_scale * per_head(fp8.q.descale) * per_head(fp8.k.descale)
    output_scale = per_head(fp8.v.descale)
    out = torch.empty((b * h, s, d), dtype=ACCUMULATOR_DTYPE, device=q8.device)
    mask = causal_mask(s, q8.device, s_kv) if causal else None
    for sl in head_chunks(b * h, s, s_kv):
        scores = torch.matmul(q8[sl], k8[sl].transpose(-1, -2)) * score_scale[sl]
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        p8, row_sum = quantized_probabilities(scores, scores.amax(dim=-1, keepdim=True))
        out[sl] = torch.matmul(p8, v8[sl]) * (output_scale[sl] / row_sum)
    return out.reshape(b, h, s, d).to(fp8.source_dtype)
