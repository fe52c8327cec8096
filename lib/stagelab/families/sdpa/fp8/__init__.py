"""FP8 (e4m3) attention, the library half: per-(batch, head) quantizer, a plain FP8 emulation in
FlashAttention-3's arithmetic, and the error budget an FP8 stage is judged by (docs/JUDGING.md: FP8)."""

from .budget import (
    STAGE_BASELINE,
    UNQUANTIZED_BASELINE,
    Fp8CheckResult,
    Fp8KernelFn,
    check_fp8_all,
    check_fp8_shape,
    plant_zero_head,
)
from .emulation import P_EXP2_OFFSET, P_MAX, emulate_fp8_attention, quantized_probabilities
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
    "E4M3", "E4M3_MAX", "Fp8CheckResult", "Fp8Inputs", "Fp8KernelFn", "Fp8Tensor", "P_EXP2_OFFSET", "P_MAX",
    "STAGE_BASELINE", "UNQUANTIZED_BASELINE", "check_fp8_all", "check_fp8_shape", "e4m3_rounding_bound",
    "emulate_fp8_attention", "head_scales", "plant_zero_head", "quantize_e4m3", "quantize_qkv",
    "quantized_probabilities",
]
