"""The Python face of an sdpa stage: validate inputs, then launch.

Every rejection happens here, before any launch, with a message that names
the problem; the C++ binding's checks are only a backstop.
"""

from __future__ import annotations

import torch

from ...core.errors import InputError
from ...core.family import BuiltKernel
from ...core.supports import refusal_message
from .reference import default_scale
from .shapes import BHSD, BSHD, CROSS_LENGTH, GQA, PROBLEM_FEATURES, SUPPORTED_HEAD_DIMS

SUPPORTED_TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
# The binding's dtype codes (SdpaDtype in kernels/sdpa/sdpa_api.h) by kernel template argument.
KERNEL_DTYPE_CODES = {"fp16": 0, "bf16": 1}
# The same codes by parameter-file dtype name (the binding's launch_plan takes them).
DTYPE_CODES = {"float16": KERNEL_DTYPE_CODES["fp16"], "bfloat16": KERNEL_DTYPE_CODES["bf16"]}

# The quantized stages read their 8-bit operands through TMA and 16-byte vectors: every base and
# every stride but head_dim's (contiguous) must be a multiple of this many bytes.
ALIGN_BYTES = 16


def check_operand(name: str, t, dtype: torch.dtype, maker: str) -> None:
    """A 4-dim tensor [batch, heads, seq_len, head_dim] of dtype (a quantized stage's operand, which
    `maker` makes)."""
    if not isinstance(t, torch.Tensor):
        raise InputError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise InputError(f"{name} has dtype {t.dtype}; the stage takes {dtype} ({maker} makes it)")
    if t.dim() != 4:
        raise InputError(f"{name} must have 4 dims [batch, heads, seq_len, head_dim], got shape {tuple(t.shape)}")


def check_aligned(name: str, t: torch.Tensor) -> None:
    """head_dim contiguous, base and other strides multiples of ALIGN_BYTES (a bshd view passes)."""
    if t.stride(-1) != 1:
        raise InputError(f"{name}'s head_dim is not contiguous (strides {t.stride()})")
    step = t.element_size()
    if t.data_ptr() % ALIGN_BYTES or any(s * step % ALIGN_BYTES for s in t.stride()[:-1]):
        raise InputError(f"{name}: base address and strides {t.stride()} ({step}-byte elements) must be "
                         f"multiples of {ALIGN_BYTES} bytes; call .contiguous() first")


def check_descale(name: str, descale, expected: tuple[int, ...], what: str, device: torch.device) -> None:
    """A quantized operand's float32 descales: contiguous, of shape `expected` (`what` names its
    dimensions), on the operand's device."""
    if not isinstance(descale, torch.Tensor):
        raise InputError(f"{name} must be a torch.Tensor, got {type(descale).__name__}")
    if descale.dtype != torch.float32:
        raise InputError(f"{name} has dtype {descale.dtype}; expected {torch.float32}")
    if tuple(descale.shape) != tuple(expected):
        raise InputError(f"{name} has shape {tuple(descale.shape)}; expected {what} = {tuple(expected)}")
    if not descale.is_contiguous() or descale.device != device:
        raise InputError(f"{name} must be contiguous and on {device} (is on {descale.device})")


def tensor_layout(t: torch.Tensor) -> str | None:
    """bhsd for a contiguous [B, H, S, D] tensor, bshd for a [B, H, S, D] view of contiguous
    [B, S, H, D] memory, None for any other strides."""
    if t.is_contiguous():
        return BHSD
    return BSHD if t.transpose(1, 2).is_contiguous() else None


def _check_tensor(name: str, t: torch.Tensor) -> None:
    if not isinstance(t, torch.Tensor):
        raise InputError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != 4:
        raise InputError(f"{name} must have 4 dims [batch, heads, seq_len, head_dim], got shape {tuple(t.shape)}")
    if t.dtype not in SUPPORTED_TORCH_DTYPES.values():
        raise InputError(f"{name} has dtype {t.dtype}; supported: {', '.join(SUPPORTED_TORCH_DTYPES)}")
    if tensor_layout(t) is None:
        raise InputError(f"{name} has strides {t.stride()}: neither contiguous [batch, heads, seq_len, head_dim] nor "
                         "a [batch, heads, seq_len, head_dim] view of [batch, seq_len, heads, head_dim] memory")


def input_features(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[str, ...]:
    """What the inputs need beyond plain attention (shapes.PROBLEM_FEATURES), once they are valid."""
    return tuple(name for name, needed in ((GQA, k.shape[1] != q.shape[1]), (CROSS_LENGTH, k.shape[2] != q.shape[2]),
                                           (BSHD, tensor_layout(q) == BSHD)) if needed)


def check_grouped_shapes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Q [B, H, Sq, D] with K and V [B, Hkv, Sk, D], Hkv dividing H (4-dim tensors already)."""
    if k.shape != v.shape:
        raise InputError(f"k and v must share one shape; got {tuple(k.shape)}, {tuple(v.shape)}")
    if k.shape[0] != q.shape[0] or k.shape[3] != q.shape[3]:
        raise InputError(f"q, k, v must share batch and head_dim; got {tuple(q.shape)}, {tuple(k.shape)}")
    if q.shape[1] % k.shape[1]:
        raise InputError(f"k and v have {k.shape[1]} heads, which do not divide q's {q.shape[1]}")


def validate_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, require_cuda: bool = True,
                    supports: tuple[str, ...] = (), causal: bool = False) -> None:
    """Q [B, H, Sq, D], K and V [B, Hkv, Sk, D], one dtype, device and layout; grouped-query
    attention, Sq != Sk and the bshd layout only where `supports` (the stage's stages.yaml) names them
    (refused whatever the device: the stage cannot take the problem anywhere)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(name, t)
    check_grouped_shapes(q, k, v)
    if not (tensor_layout(q) == tensor_layout(k) == tensor_layout(v)):
        raise InputError(f"q, k, v must share one layout; got strides {q.stride()}, {k.stride()}, {v.stride()}")
    if not (q.dtype == k.dtype == v.dtype):
        raise InputError(f"q, k, v must share one dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise InputError(f"q, k, v must be on one device; got {q.device}, {k.device}, {v.device}")
    if q.shape[-1] not in SUPPORTED_HEAD_DIMS:
        raise InputError(f"head_dim {q.shape[-1]} is not supported; supported: {list(SUPPORTED_HEAD_DIMS)}")
    if min(q.shape) < 1 or min(k.shape) < 1:
        raise InputError(f"every dimension must be >= 1, got shapes {tuple(q.shape)}, {tuple(k.shape)}")
    missing = [f for f in input_features(q, k, v) if f not in supports]
    if missing:
        what = f"q {tuple(q.shape)} with k and v {tuple(k.shape)}"
        raise InputError(refusal_message(PROBLEM_FEATURES, missing, supports, what))
    if causal and k.shape[2] < q.shape[2]:
        raise InputError(f"causal with {k.shape[2]} keys for {q.shape[2]} queries: the mask is aligned "
                         f"bottom-right, so the first {q.shape[2] - k.shape[2]} queries would see no key")
    if require_cuda and q.device.type != "cuda":
        raise InputError(f"q, k, v are on {q.device}; the kernels run on a CUDA device")


class StageKernel(BuiltKernel):
    """A built stage module wrapped for callers: `kernel(q, k, v, causal=...)`. `supports`: the
    problem features its stages.yaml entry declares (none by default); others are refused before launch."""

    def __init__(self, module, stage_id: str, supports: tuple[str, ...] = ()):
        super().__init__(module, stage_id)
        self.supports = tuple(supports)

    def into(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
             scale: float, causal: bool) -> None:
        """Launch writing into a preallocated `out` (the checker poisons it first)."""
        validate_inputs(q, k, v, supports=self.supports, causal=causal)
        if (out.shape != q.shape or out.dtype != q.dtype or out.device != q.device
                or tensor_layout(out) != tensor_layout(q)):
            raise InputError("out must be a tensor of q's shape, dtype, device and layout")
        stream = torch.cuda.current_stream(q.device).cuda_stream
        self.module.forward(q, k, v, out, float(scale), bool(causal), stream)

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
                 causal: bool = False, scale: float | None = None) -> torch.Tensor:
        validate_inputs(q, k, v, supports=self.supports, causal=causal)
        out = torch.empty_like(q)  # keeps q's strides, so a bshd q gets a bshd output
        self.into(q, k, v, out, default_scale(q.shape[-1]) if scale is None else scale, causal)
        return out
