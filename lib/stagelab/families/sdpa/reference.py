"""Attention in any precision: the float64 truth and the plain low-precision version."""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

# Attention scores of one chunk kept at most this large (elements), so the
# float64 reference fits in memory at S=8192 too.
_REFERENCE_CHUNK_ELEMENTS = 1 << 27


def default_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)


def head_chunks(batch_heads: int, seq_len: int) -> Iterator[slice]:
    """Slices of the flattened batch*heads axis whose score matrices fit the chunk size together."""
    rows_per_chunk = max(1, _REFERENCE_CHUNK_ELEMENTS // (seq_len * seq_len))
    for start in range(0, batch_heads, rows_per_chunk):
        yield slice(start, start + rows_per_chunk)


def causal_mask(seq_len: int, device: torch.device | str) -> torch.Tensor:
    """True where key j lies after query i (j > i): those scores are masked out."""
    return torch.ones((seq_len, seq_len), dtype=torch.bool, device=device).triu(diagonal=1)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool,
              compute_dtype: torch.dtype) -> torch.Tensor:
    """softmax(q k^T * scale + mask) v, every op in compute_dtype, chunked over batch*heads."""
    b, h, s, d = q.shape
    qf, kf, vf = (t.reshape(b * h, s, d).to(compute_dtype) for t in (q, k, v))
    out = torch.empty((b * h, s, d), dtype=compute_dtype, device=q.device)
    mask = causal_mask(s, q.device) if causal else None
    for sl in head_chunks(b * h, s):
        scores = torch.matmul(qf[sl], kf[sl].transpose(-1, -2)) * scale
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        out[sl] = torch.matmul(torch.softmax(scores, dim=-1), vf[sl])
    return out.reshape(b, h, s, d)
