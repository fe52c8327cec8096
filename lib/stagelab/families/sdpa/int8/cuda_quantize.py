"""The INT8 stage's own quantizer, on the GPU: the binding's `int8_quantize` (kernels/sdpa/int8/quantize.cuh).

`cuda_quantize(module, q, k, v)` takes fp16/bf16 Q [B, H, Sq, D] and K, V [B, Hkv, Sk, D] (head_dim 64
or 128 and contiguous, bhsd or bshd views, 16-byte aligned) on a CUDA device and returns the default
recipe's operands (recipe.py) as the stage reads them: Int8Inputs, its tensors contiguous, and V^T
(operands.vt_operand's layout). Three launches, deterministic (no float atomics).

Against the torch quantizer (quantize_int8_qkv, then vt_operand):
- Q's codes and descales are the same bit for bit (float32 division, round half to even, descale
  float32(float64(amax) / code));
- K's and V's means are summed in float64 (per 128-key block, then the blocks in order) where torch
  sums in float32 in its own order, so k_mean and v_mean may differ from torch's by float32 rounding;
  K's codes and descales, V^T's bytes and V's descales are torch's formula applied to these means
  (float32 subtraction, e4m3 saturating round to nearest even). Against torch's own, a K code is
  within +-1 and a descale within (the largest difference of the two means + float32 rounding) / 127
  (/ 448 for V), while the difference of the means stays below half a quantization step
  (tests/test_int8_quantize_gpu.py).

The checks run before any launch with quantize.py's messages (inf or NaN named by tensor, batch, head,
block and token; one isfinite pass and a sync per tensor); the binding's TORCH_CHECKs are a backstop.
"""

from __future__ import annotations

import torch

from ....core.errors import InputError
from ..fp8.quantize import E4M3
from ..kernel import SUPPORTED_TORCH_DTYPES, check_aligned
from ..shapes import SUPPORTED_HEAD_DIMS
from .blocks import block_count
from .operands import padded_keys, vt_keys
from .quantize import Int8Inputs, validate_qkv
from .recipe import DEFAULT_RECIPE, K_BLOCK, Q_BLOCK

__all__ = ["cuda_quantize", "has_cuda_quantizer", "quantize_into", "v_from_vt", "validate_cuda_quantize"]


def has_cuda_quantizer(module) -> bool:
    """Whether a built stage exports the INT8 quantizer (sdpa_int8_quantize)."""
    return bool(getattr(module, "has_int8_quantize", lambda: False)())


def validate_cuda_quantize(module, q, k, v) -> None:
    """What the CUDA quantizer takes: quantize.py's shapes, dtypes and finite values, then fp16/bf16,
    head_dim 64 or 128, 16-byte aligned inputs on a CUDA device."""
    if not has_cuda_quantizer(module):
        raise InputError("this stage exports no INT8 quantizer (has_int8_quantize() is false or missing)")
    validate_qkv(q, k, v, Q_BLOCK, K_BLOCK)
    if q.dtype not in SUPPORTED_TORCH_DTYPES.values():
        raise InputError(f"q, k, v have dtype {q.dtype}; the CUDA quantizer takes {', '.join(SUPPORTED_TORCH_DTYPES)}")
    if q.shape[-1] not in SUPPORTED_HEAD_DIMS:
        raise InputError(f"head_dim {q.shape[-1]} is not supported; supported: {list(SUPPORTED_HEAD_DIMS)}")
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_aligned(name, x)
    if q.device.type != "cuda":
        raise InputError(f"q, k, v are on {q.device}; the CUDA quantizer runs on a CUDA device")


def allocate_operands(q: torch.Tensor, k: torch.Tensor) -> tuple[Int8Inputs, torch.Tensor]:
    """The quantizer's outputs, uninitialized and contiguous, as (Int8Inputs, V^T); Int8Inputs.v is a
    placeholder (V^T holds V) until v_from_vt fills it."""
    b, h, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]

    def empty(*shape: int, dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device=q.device)

    vt = empty(b, hkv, d, padded_keys(sk), dtype=E4M3)
    recipe = DEFAULT_RECIPE
    inputs = Int8Inputs(q=empty(b, h, sq, d, dtype=torch.int8), k=empty(b, hkv, sk, d, dtype=torch.int8),
                        v=empty(b, hkv, sk, d, dtype=E4M3),
                        q_descale=empty(b, h, block_count(sq, recipe.q_block), dtype=torch.float32),
                        k_descale=empty(b, hkv, block_count(sk, recipe.k_block), dtype=torch.float32),
                        v_descale=empty(b, hkv, d, dtype=torch.float32), k_mean=empty(b, hkv, d, dtype=torch.float32),
                        v_mean=empty(b, hkv, d, dtype=torch.float32), q_block=recipe.q_block, k_block=recipe.k_block,
                        v_scaling=recipe.v_scaling, smooth_k=True, smooth_v=True, source_dtype=q.dtype)
    return inputs, vt


def quantize_into(module, q, k, v, outputs: Int8Inputs, vt: torch.Tensor) -> None:
    """One run of the quantizer's launches into `outputs` and `vt` (allocate_operands') on the current
    stream, read now so a CUDA graph's capture sees its own; no validation: the callers validate once.
    outputs.v is not written (the stage reads V^T)."""
    module.int8_quantize(q, k, v, outputs.q, outputs.q_descale, outputs.k, outputs.k_descale, outputs.k_mean, vt,
                         outputs.v_descale, outputs.v_mean, torch.cuda.current_stream(q.device).cuda_stream)


def v_from_vt(vt: torch.Tensor, kv_seq_len: int) -> torch.Tensor:
    """e4m3 V [B, Hkv, Sk, D], contiguous, from V^T (the inverse of operands.vt_operand): what the
    recipe's emulation and Int8Inputs.dequantized read."""
    keys = vt_keys(kv_seq_len, vt.device)
    columns = torch.empty(kv_seq_len, dtype=torch.int64, device=vt.device)
    real = keys < kv_seq_len
    columns[keys[real]] = torch.arange(keys.numel(), device=vt.device)[real]
    return vt.view(torch.uint8).index_select(3, columns).transpose(2, 3).contiguous().view(E4M3)


def cuda_quantize(module, q, k, v) -> tuple[Int8Inputs, torch.Tensor]:
    """The default recipe's operands and V^T from the stage's quantizer kernels (the module docstring);
    Int8Inputs.v is V rebuilt from V^T (v_from_vt), for the emulation and the checks."""
    validate_cuda_quantize(module, q, k, v)
    outputs, vt = allocate_operands(q, k)
    quantize_into(module, q, k, v, outputs, vt)
    outputs.v.copy_(v_from_vt(vt, k.shape[2]))
    return outputs, vt
