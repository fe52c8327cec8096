"""The Python face of an sdpa stage: validate inputs, then launch.

Every rejection happens here, before any launch, with a message that names
the problem; the C++ binding's checks are only a backstop.
"""

from __future__ import annotations

import torch

from ...core.errors import InputError
from ...core.family import BuiltKernel
from .reference import default_scale
from .shapes import SUPPORTED_HEAD_DIMS

SUPPORTED_TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
# The binding's dtype codes (SdpaDtype in kernels/sdpa/sdpa_api.h) by kernel template argument.
KERNEL_DTYPE_CODES = {"fp16": 0, "bf16": 1}

def validate_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, require_cuda: bool = True) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise InputError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise InputError(f"{name} must have 4 dims [batch, heads, seq_len, head_dim], got shape {tuple(t.shape)}")
        if t.dtype not in SUPPORTED_TORCH_DTYPES.values():
            raise InputError(f"{name} has dtype {t.dtype}; supported: {', '.join(SUPPORTED_TORCH_DTYPES)}")
        if require_cuda and t.device.type != "cuda":
            raise InputError(f"{name} is on {t.device}; the kernels run on a CUDA device")
        if not t.is_contiguous():
            raise InputError(f"{name} is not contiguous (strides {t.stride()}); call .contiguous() first")
    if not (q.shape == k.shape == v.shape):
        raise InputError(f"q, k, v must share one shape; got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise InputError(f"q, k, v must share one dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise InputError(f"q, k, v must be on one device; got {q.device}, {k.device}, {v.device}")
    if q.shape[-1] not in SUPPORTED_HEAD_DIMS:
        raise InputError(f"head_dim {q.shape[-1]} is not supported; supported: {list(SUPPORTED_HEAD_DIMS)}")
    if min(q.shape) < 1:
        raise InputError(f"every dimension must be >= 1, got shape {tuple(q.shape)}")

class StageKernel(BuiltKernel):
    """A built stage module wrapped for callers: `kernel(q, k, v, causal=...)`."""

    def into(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
             scale: float, causal: bool) -> None:
        """Launch writing into a preallocated `out` (the checker poisons it first)."""
        validate_inputs(q, k, v)
        if out.shape != q.shape or out.dtype != q.dtype or out.device != q.device or not out.is_contiguous():
            raise InputError("out must be a contiguous tensor of q's shape, dtype and device")
        stream = torch.cuda.current_stream(q.device).cuda_stream
        self.module.forward(q, k, v, out, float(scale), bool(causal), stream)

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
                 causal: bool = False, scale: float | None = None) -> torch.Tensor:
        validate_inputs(q, k, v)
        out = torch.empty_like(q)
        self.into(q, k, v, out, default_scale(q.shape[-1]) if scale is None else scale, causal)
        return out
