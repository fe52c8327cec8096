"""The sdpa family's standard inputs, its dtypes and the plain call of a kernel on them.

Below the family object (__init__) and its FP8 path (fp8/), which both use them: the FP8 budget
builds the same inputs and calls an fp16 stage the same way, without the family object.
"""

from __future__ import annotations

import torch

from ...core.family import DEFAULT_DISTRIBUTION, KernelFn, dtype_named
from .distributions import draw
from .kernel import SUPPORTED_TORCH_DTYPES
from .reference import default_scale
from .shapes import BSHD, Shape

FAMILY_NAME = "sdpa"

# FlashAttention-3's tests set atol from the rounding error at this output magnitude:
# attention outputs of unit-normal inputs are averages of V rows, mostly well under 1.
FA3_ATOL_MAGNITUDE = 0.3


def torch_dtype(name: str) -> torch.dtype:
    return dtype_named(FAMILY_NAME, SUPPORTED_TORCH_DTYPES, name)


def make_inputs(problem: Shape, dtype: torch.dtype, seed: int, device,
                distribution: str = DEFAULT_DISTRIBUTION) -> tuple[torch.Tensor, ...]:
    """Fresh q, k, v from a named distribution (distributions.py); the generator mixes seed, shape
    and distribution so no two checks share data. A bshd problem gets [B, H, S, D] views of
    [B, S, H, D] memory holding the same values as its bhsd twin."""
    # copy=True: draw() keeps what it returns for the next check, so the caller's tensors are its own
    tensors = (t.to(device=device, dtype=dtype, copy=True) for t in draw(problem, seed, distribution))
    if problem.layout == BSHD:
        return tuple(t.transpose(1, 2).contiguous().transpose(1, 2) for t in tensors)
    return tuple(tensors)


def call_plain(kernel: KernelFn, problem: Shape, inputs: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
    """A kernel on the standard inputs: kernel(q, k, v, out, softmax_scale, causal)."""
    q, k, v = inputs
    kernel(q, k, v, out, default_scale(problem.head_dim), problem.causal)
