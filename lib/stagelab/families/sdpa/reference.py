"""Attention in any precision: the float64 truth and the plain low-precision version."""

from __future__ import annotations

import math

import torch

# Attention scores of one chunk kept at most this large (elements), so the
# float64 reference fits in memory at S=8192 too.
_REFERENCE_CHUNK_ELEMENTS = 1 << 27


def default_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool,
              compute_dtype: torch.dtype) -> torch.Tensor:
    """softmax(q k^T * scale + mask) v, every op in compute_dtype, chunked over batch*heads."""
    b, h, s, d = q.shape
    qf, kf, vf = (t.reshape(b * h, s, d).to(compute_dtype) for t in (q, k, v))
    out = torch.empty((b * h, s, d), dtype=compute_dtype, device=q.device)
    rows_per_chunk = max(1, _REFERENCE_CHUNK_ELEMENTS // (s * s))
    mask = None
    if causal:
        mask = torch.ones((s, s), dtype=torch.bool, device=q.device).triu(diagonal=1)
    for start in range(0, b * h, rows_per_chunk):
        sl = slice(start, start + rows_per_chunk)
        scores = torch.matmul(qf[sl], kf[sl].transpose(-1, -2)) * scale
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        out[sl] = torch.matmul(torch.softmax(scores, dim=-1), vf[sl])
    return out.reshape(b, h, s, d)
