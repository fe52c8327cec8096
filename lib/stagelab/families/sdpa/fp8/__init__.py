"""FP8 (e4m3) attention, the library half: per-(batch, head) quantizer, a plain FP8 emulation in
FlashAttention-3's arithmetic, and the error budget an FP8 stage is judged by (README: FP8)."""

from .quantize import (
    E4M3,
    E4M3_MAX,
    Fp8Inputs,
    Fp8Tensor,
    e4m3_rounding_bound,
    head_scales,
    quantize_e4m3,
    quantize_qkv,
)

__all__ = [
    "E4M3", "E4M3_MAX", "Fp8Inputs", "Fp8Tensor", "e4m3_rounding_bound", "head_scales", "quantize_e4m3",
    "quantize_qkv",
]
