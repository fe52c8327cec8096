"""The Python face of an INT8 stage: `kernel(int8_inputs, out, softmax_scale, causal)` (Int8KernelFn).

The compiled module exports `has_int8()` and
`int8_forward(q8, k8, vt8, q_descale, k_descale, v_descale, v_mean, out, softmax_scale, causal, stream)`
(kernels/sdpa/binding.cpp): int8 Q [B, H, Sq, D] and smoothed K [B, Hkv, Sk, D], V^T in e4m3 as
operands.vt_operand builds it (of V - v_mean), Int8Inputs' float32 descales and V's mean, which the
kernel adds to the output. The kernel folds the descales into the softmax scale by its own tiles,
so it takes the default recipe's blocks alone (recipe.py: Q per 64 rows, K per 128 keys, V per
channel; K and V smoothed or not) and head_dim 64 or 128.

Two timed launches on the standard fp16/bf16 inputs: int8_launch, the caller bringing 8-bit inputs
(quantized once outside, as FA3 times its FP8 kernel), and int8_launch_quantizing, the stage's own
quantizer kernels (cuda_quantize.py) inside the launch before int8_forward.

Every rejection happens here, before any launch, with a message that names the problem; the
binding's TORCH_CHECKs are only a backstop.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ....core.errors import InputError
from ....core.family import BuiltKernel
from ..kernel import SUPPORTED_TORCH_DTYPES, check_aligned, check_descale, check_grouped_shapes, check_operand
from ..reference import default_scale
from ..shapes import SUPPORTED_HEAD_DIMS
from .blocks import block_count
from .cuda_quantize import cuda_quantize, quantize_into
from .operands import vt_operand
from .quantize import Int8Inputs, quantize_int8_qkv
from .recipe import DEFAULT_RECIPE

__all__ = ["Int8StageKernel", "int8_forward", "int8_launch", "int8_launch_quantizing", "validate_int8_inputs",
           "validate_int8_output", "vt_operand"]

# The recipe fields the kernel's tiles fix (smooth_k is free: the kernel never sees k_mean; smooth_v
# too, for the kernel adds v_mean, zeros when V is not smoothed, though head_dim 64's P.V summed
# over the row stays within the budget on one-signed V only when smoothed: recipe.py's smooth_v).
_KERNEL_RECIPE = {"q_block": DEFAULT_RECIPE.q_block, "k_block": DEFAULT_RECIPE.k_block,
                  "v_scaling": DEFAULT_RECIPE.v_scaling}


def _check_recipe(inputs: Int8Inputs) -> None:
    for field, kernels in _KERNEL_RECIPE.items():
        if getattr(inputs, field) != kernels:
            raise InputError(f"{field} {getattr(inputs, field)!r} is not the kernel's: the INT8 stage takes the "
                             f"default recipe ({', '.join(f'{f} {v!r}' for f, v in _KERNEL_RECIPE.items())}); "
                             f"quantize with DEFAULT_RECIPE.quantizer_args()")


def _check_descales(inputs: Int8Inputs) -> None:
    b, h, sq, d = inputs.q.shape
    hkv, sk = inputs.k.shape[1], inputs.k.shape[2]
    device = inputs.q.device
    check_descale("q_descale", inputs.q_descale, (b, h, block_count(sq, inputs.q_block)),
                   f"[batch, heads, ceil(seq_len / {inputs.q_block})]", device)
    check_descale("k_descale", inputs.k_descale, (b, hkv, block_count(sk, inputs.k_block)),
                   f"[batch, kv_heads, ceil(kv_seq_len / {inputs.k_block})]", device)
    check_descale("v_descale", inputs.v_descale, (b, hkv, d), "[batch, kv_heads, head_dim]", device)
    check_descale("v_mean", inputs.v_mean, (b, hkv, d), "[batch, kv_heads, head_dim]", device)


def validate_int8_inputs(inputs: Int8Inputs, *, require_cuda: bool = True, causal: bool = False) -> None:
    """The default recipe's operands (int8 Q and K, e4m3 V, float32 descales) of shapes the kernel
    takes (grouped-query attention, any lengths, head_dim 64 or 128), on one device, Q and K aligned."""
    if not isinstance(inputs, Int8Inputs):
        raise InputError(f"an INT8 stage takes Int8Inputs (stagelab.families.sdpa.int8.quantize_int8_qkv), "
                         f"got {type(inputs).__name__}")
    _check_recipe(inputs)
    for name, dtype in (("q", torch.int8), ("k", torch.int8), ("v", torch.float8_e4m3fn)):
        check_operand(name, getattr(inputs, name), dtype, "quantize_int8_qkv")
    q, k, v = inputs.q, inputs.k, inputs.v
    check_grouped_shapes(q, k, v)
    if min(q.shape) < 1 or min(k.shape) < 1:
        raise InputError(f"every dimension must be >= 1, got shapes {tuple(q.shape)}, {tuple(k.shape)}")
    if q.shape[-1] not in SUPPORTED_HEAD_DIMS:
        raise InputError(f"head_dim {q.shape[-1]} is not supported; supported: {list(SUPPORTED_HEAD_DIMS)}")
    if not q.device == k.device == v.device:
        raise InputError(f"q, k, v must be on one device; got {q.device}, {k.device}, {v.device}")
    if require_cuda and q.device.type != "cuda":
        raise InputError(f"q, k, v are on {q.device}; the kernels run on a CUDA device")
    _check_descales(inputs)
    check_aligned("q", q)
    check_aligned("k", k)
    if inputs.source_dtype not in SUPPORTED_TORCH_DTYPES.values():
        raise InputError(f"source_dtype {inputs.source_dtype} (the output's dtype) is not supported; "
                         f"supported: {', '.join(SUPPORTED_TORCH_DTYPES)}")
    if causal and k.shape[2] < q.shape[2]:
        raise InputError(f"causal with {k.shape[2]} keys for {q.shape[2]} queries: the mask is aligned "
                         f"bottom-right, so the first {q.shape[2] - k.shape[2]} queries would see no key")


def validate_int8_output(inputs: Int8Inputs, out: torch.Tensor) -> None:
    """out: Q's shape, on Q's device, in the inputs' original dtype, head_dim contiguous and aligned."""
    q = inputs.q
    if not isinstance(out, torch.Tensor) or out.shape != q.shape or out.device != q.device:
        raise InputError(f"out must be a tensor of q's shape {tuple(q.shape)} on {q.device}")
    if out.dtype != inputs.source_dtype:
        raise InputError(f"out has dtype {out.dtype}; it must have the inputs' original dtype {inputs.source_dtype}")
    check_aligned("out", out)


def int8_forward(module, inputs: Int8Inputs, vt: torch.Tensor, out: torch.Tensor, scale: float,
                 causal: bool) -> None:
    """One launch of the module's int8_forward on the current stream (read now, so a CUDA graph's
    capture sees its own); no validation: the callers validate once."""
    module.int8_forward(inputs.q, inputs.k, vt, inputs.q_descale, inputs.k_descale, inputs.v_descale, inputs.v_mean,
                        out, float(scale), bool(causal), torch.cuda.current_stream(out.device).cuda_stream)


def int8_launch(module, inputs: tuple[torch.Tensor, ...], out: torch.Tensor, scale: float,
                causal: bool) -> Callable[[], None]:
    """The timed launch of an INT8 stage on the standard fp16/bf16 inputs: the caller brings 8-bit
    inputs. Quantizing (quantize_int8_qkv, the default recipe) and V^T (vt_operand) happen once
    here, outside the launch, as FA3 times its FP8 kernel on e4m3 inputs; inside it is int8_forward
    alone, with whatever pre-passes the stage runs in it."""
    int8 = quantize_int8_qkv(*inputs, **DEFAULT_RECIPE.quantizer_args())
    validate_int8_inputs(int8, causal=causal)
    validate_int8_output(int8, out)
    vt = vt_operand(int8.v)

    def launch() -> None:
        int8_forward(module, int8, vt, out, scale, causal)
    return launch


def int8_launch_quantizing(module, inputs: tuple[torch.Tensor, ...], out: torch.Tensor, scale: float,
                           causal: bool) -> Callable[[], None]:
    """The timed launch with the quantization inside it: the stage's quantizer kernels (cuda_quantize.py:
    Q, K and V from the standard fp16/bf16 inputs into int8, V^T in e4m3) then int8_forward, every
    launch on the stream. The checks (finite inputs among them) and the allocations happen once here,
    with a first run of the quantizer whose operands the checks of the attention's inputs read."""
    q, k, v = inputs
    int8, vt = cuda_quantize(module, q, k, v)
    validate_int8_inputs(int8, causal=causal)
    validate_int8_output(int8, out)

    def launch() -> None:
        quantize_into(module, q, k, v, int8, vt)
        int8_forward(module, int8, vt, out, scale, causal)
    return launch


class Int8StageKernel(BuiltKernel):
    """A built INT8 stage: `kernel(int8_inputs, causal=...)`, and `into` is an Int8KernelFn. V^T is
    built on each call (the timed launch, int8_launch, builds it once)."""

    input_kind = "int8"  # the family's INT8_INPUTS (not imported: the family imports this lazily)

    def __init__(self, module, stage_id: str):
        super().__init__(module, stage_id)
        if not getattr(module, "has_int8", lambda: False)():
            raise InputError(f"{stage_id} exports no INT8 entry (has_int8() is false or missing); "
                             f"it takes other inputs")

    def into(self, inputs: Int8Inputs, out: torch.Tensor, scale: float, causal: bool) -> None:
        validate_int8_inputs(inputs, causal=causal)
        validate_int8_output(inputs, out)
        int8_forward(self.module, inputs, vt_operand(inputs.v), out, scale, causal)

    def __call__(self, inputs: Int8Inputs, *, causal: bool = False, scale: float | None = None) -> torch.Tensor:
        validate_int8_inputs(inputs, causal=causal)
        out = torch.empty_like(inputs.q, dtype=inputs.source_dtype)  # keeps Q's strides: bshd in, bshd out
        self.into(inputs, out, default_scale(out.shape[-1]) if scale is None else scale, causal)
        return out
