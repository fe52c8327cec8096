"""The sdpa family's standard inputs, its dtypes and the plain call of a kernel on them.

Below the family object (__init__) and its FP8 path (fp8/), which both use them: the FP8 budget
builds the same inputs and calls an fp16 stage the same way, without the family object.
"""

from __future__ import annotations

import torch

from ...core.family import KernelFn, dtype_named
from .kernel import SUPPORTED_TORCH_DTYPES
from .reference import default_scale
from .shapes import Shape

FAMILY_NAME = "sdpa"

# FlashAttention-3's tests set atol from the rounding error at this output magnitude:
# attention outputs of unit-normal inputs are averages of V rows, mostly well under 1.
FA3_ATOL_MAGNITUDE = 0.3


def torch_dtype(name: str) -> torch.dtype:
    return dtype_named(FAMILY_NAME, SUPPORTED_TORCH_DTYPES, name)


def make_inputs(problem: Shape, dtype: torch.dtype, seed: int, device) -> tuple[torch.Tensor, ...]:
    """Fresh standard-normal q, k, v; the generator mixes seed and shape so no two checks share data."""
    generator = torch.Generator(device="cpu").manual_seed(hash((seed, problem.dims, problem.causal)) & (2**63 - 1))
    tensors = [torch.randn(problem.dims, generator=generator, dtype=torch.float32) for _ in range(3)]
    return tuple(t.to(device=device, dtype=dtype) for t in tensors)


def call_plain(kernel: KernelFn, problem: Shape, inputs: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
    """A kernel on the standard inputs: kernel(q, k, v, out, softmax_scale, causal)."""
    q, k, v = inputs
    kernel(q, k, v, out, default_scale(problem.head_dim), problem.causal)
