"""Attention in any precision: the float64 truth and the plain low-precision version.

Q is [batch, heads, seq_len, head_dim]; K and V are [batch, kv_heads, kv_seq_len, head_dim], any
strides (a bshd view is read as it is). With kv_heads < heads, query head h reads K/V head
h // (heads / kv_heads) (torch's `enable_gqa`, FlashAttention). The causal mask is aligned
bottom-right: query i sees key j when j <= i + kv_seq_len - seq_len (FlashAttention's alignment
since 2.1; the usual j <= i when the lengths are equal).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

# Attention scores of one chunk kept at most this large (elements), so the
# float64 reference fits in memory at S=8192 too.
_REFERENCE_CHUNK_ELEMENTS = 1 << 27


def default_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)


def head_chunks(batch_heads: int, seq_len: int, kv_seq_len: int | None = None) -> Iterator[slice]:
    """Slices of the flattened batch*heads axis whose score matrices fit the chunk size together."""
    rows_per_chunk = max(1, _REFERENCE_CHUNK_ELEMENTS // (seq_len * (kv_seq_len or seq_len)))
    for start in range(0, batch_heads, rows_per_chunk):
        yield slice(start, start + rows_per_chunk)


def causal_mask(seq_len: int, device: torch.device | str, kv_seq_len: int | None = None) -> torch.Tensor:
    """True where key j lies after what query i may see (j > i + kv_seq_len - seq_len, bottom-right
    aligned): those scores are masked out."""
    kv_seq_len = seq_len if kv_seq_len is None else kv_seq_len
    return torch.ones((seq_len, kv_seq_len), dtype=torch.bool, device=device).triu(diagonal=kv_seq_len - seq_len + 1)


def grouped_heads(kv: torch.Tensor, heads: int) -> torch.Tensor:
    """K or V with each head repeated for the query heads it serves ([B, kv_heads, ...] -> [B, heads, ...])."""
    kv_heads = kv.shape[1]
    if heads % kv_heads:
        raise ValueError(f"{kv_heads} K/V heads do not divide {heads} query heads")
    return kv if kv_heads == heads else kv.repeat_interleave(heads // kv_heads, dim=1)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool,
              compute_dtype: torch.dtype) -> torch.Tensor:
    """softmax(q k^T * scale + mask) v, every op in compute_dtype, chunked over batch*heads; the
    result is [batch, heads, seq_len, head_dim], contiguous."""
    b, h, s, d = q.shape
    s_kv = k.shape[2]
    qf = q.to(compute_dtype).reshape(b * h, s, d)
    kf, vf = (grouped_heads(t.to(compute_dtype), h).reshape(b * h, s_kv, d) for t in (k, v))
    out = torch.empty((b * h, s, d), dtype=compute_dtype, device=q.device)
    mask = causal_mask(s, q.device, s_kv) if causal else None
    for sl in head_chunks(b * h, s, s_kv):
        scores = torch.matmul(qf[sl], kf[sl].transpose(-1, -2)) * scale
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        out[sl] = torch.matmul(torch.softmax(scores, dim=-1), vf[sl])
    return out.reshape(b, h, s, d)
