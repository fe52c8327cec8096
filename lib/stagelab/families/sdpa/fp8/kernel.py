"""The Python face of an FP8 stage: `kernel(fp8_inputs, out, softmax_scale, causal)` (Fp8KernelFn).

Every rejection happens here, before any launch, with a message that names the problem; the
binding's TORCH_CHECKs (kernels/sdpa/binding.cpp) are only a backstop.
"""

from __future__ import annotations

import torch

from ....core.errors import InputError
from ....core.family import BuiltKernel
from ..kernel import SUPPORTED_TORCH_DTYPES, check_aligned, check_descale, check_operand
from ..reference import default_scale
from ..shapes import SUPPORTED_HEAD_DIMS
from .quantize import E4M3, Fp8Inputs, Fp8Tensor


def _validate_data(name: str, data: torch.Tensor, shape: torch.Size, require_cuda: bool) -> None:
    check_operand(f"{name}.data", data, E4M3, "quantize_qkv")
    if data.shape != shape:
        raise InputError(f"q, k, v must share one shape; {name}.data has {tuple(data.shape)}, q {tuple(shape)}")
    if require_cuda and data.device.type != "cuda":
        raise InputError(f"{name}.data is on {data.device}; the kernels run on a CUDA device")
    check_aligned(f"{name}.data", data)


def validate_fp8_inputs(fp8: Fp8Inputs, *, require_cuda: bool = True) -> None:
    """Q, K, V e4m3 of one shape with head_dim 64 or 128, aligned, and float32 [batch, heads] descales."""
    if not isinstance(fp8, Fp8Inputs):
        raise InputError(f"an FP8 stage takes Fp8Inputs (stagelab.families.sdpa.fp8.quantize_qkv), "
                         f"got {type(fp8).__name__}")
    shape = fp8.q.data.shape if isinstance(fp8.q, Fp8Tensor) and isinstance(fp8.q.data, torch.Tensor) else None
    for name in ("q", "k", "v"):
        tensor = getattr(fp8, name)
        if not isinstance(tensor, Fp8Tensor):
            raise InputError(f"{name} must be an Fp8Tensor, got {type(tensor).__name__}")
        _validate_data(name, tensor.data, shape, require_cuda)
        check_descale(f"{name}.descale", tensor.descale, tensor.data.shape[:2], "[batch, heads]", tensor.data.device)
    if shape[-1] not in SUPPORTED_HEAD_DIMS:
        raise InputError(f"head_dim {shape[-1]} is not supported; supported: {list(SUPPORTED_HEAD_DIMS)}")
    if min(shape) < 1:
        raise InputError(f"every dimension must be >= 1, got shape {tuple(shape)}")
    if fp8.source_dtype not in SUPPORTED_TORCH_DTYPES.values():
        raise InputError(f"source_dtype {fp8.source_dtype} (the output's dtype) is not supported; "
                         f"supported: {', '.join(SUPPORTED_TORCH_DTYPES)}")


def validate_fp8_output(fp8: Fp8Inputs, out: torch.Tensor) -> None:
    q = fp8.q.data
    if not isinstance(out, torch.Tensor) or out.shape != q.shape or out.device != q.device:
        raise InputError(f"out must be a tensor of q's shape {tuple(q.shape)} on {q.device}")
    if out.dtype != fp8.source_dtype or not out.is_contiguous():
        raise InputError(f"out must be contiguous with the inputs' original dtype {fp8.source_dtype}, "
                         f"got {out.dtype}")


class Fp8StageKernel(BuiltKernel):
    """A built FP8 stage: `kernel(fp8, causal=...)`, and `into` is an Fp8KernelFn."""

    input_kind = "fp8"  # the family's FP8_INPUTS (not imported: the family imports this lazily)

    def __init__(self, module, stage_id: str):
        super().__init__(module, stage_id)
        if not getattr(module, "has_fp8", lambda: False)():
            raise InputError(f"{stage_id} exports no FP8 entry (sdpa_fp8_forward); it takes fp16/bf16 inputs")

    def into(self, fp8: Fp8Inputs, out: torch.Tensor, scale: float, causal: bool) -> None:
        validate_fp8_inputs(fp8)
        validate_fp8_output(fp8, out)
        stream = torch.cuda.current_stream(out.device).cuda_stream
        self.module.fp8_forward(fp8.q.data, fp8.k.data, fp8.v.data, fp8.q.descale, fp8.k.descale, fp8.v.descale,
                                out, float(scale), bool(causal), stream)

    def __call__(self, fp8: Fp8Inputs, *, causal: bool = False, scale: float | None = None) -> torch.Tensor:
        validate_fp8_inputs(fp8)
        out = torch.empty(fp8.q.data.shape, dtype=fp8.source_dtype, device=fp8.q.data.device)
        self.into(fp8, out, default_scale(out.shape[-1]) if scale is None else scale, causal)
        return out
