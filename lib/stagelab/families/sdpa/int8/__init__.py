"""INT8 attention, the library half (issue 44, SageAttention2's recipe): Q.K^T on int8 with exact
integer accumulation, K and V smoothed, Q and K scaled per block of tokens, P and V in e4m3 with
P.V promoted per key tile (or, at head_dim 64, accumulated over the row); the quantizer, the
recipe's float64 emulation, the budget an INT8 stage is judged by, its errors against float64
truth and the `sageattention` contender (README: INT8); V^T as the stage reads it (operands.py),
the stage's wrapper and its two timed launches (kernel.py) and the wrapper of the stage's own CUDA
quantizer (cuda_quantize.py), imported by the family on first use."""

from .accuracy import (FA3_FP8, INT8_RECIPE, INT8_UNSMOOTHED, METHODS, PLAIN, TruthError, truth_errors,
                       truth_errors_by_distribution)
from .blocks import int8_rounding_bound
from .budget import Int8CheckResult, Int8KernelFn, check_int8_all, check_int8_shape
from .contenders import INT8_CONTENDERS, SAGEATTENTION, sageattention_contender, sageattention_output
from .emulation import e4m3_probabilities, emulate_int8_attention, recipe_operands
from .operands import key_of, vt_operand
from .quantize import Int8Inputs, quantize_int8_qkv, quantize_v
from .recipe import (DEFAULT_RECIPE, INT8_MAX, K_BLOCK, P_EXP2_OFFSET, P_MAX, PER_CHANNEL, PER_HEAD, Q_BLOCK,
                     V_SCALINGS, Int8Recipe)

__all__ = [
    "DEFAULT_RECIPE", "FA3_FP8", "INT8_CONTENDERS", "INT8_MAX", "INT8_RECIPE", "INT8_UNSMOOTHED", "K_BLOCK",
    "METHODS", "P_EXP2_OFFSET", "P_MAX", "PER_CHANNEL", "PER_HEAD", "PLAIN", "Q_BLOCK", "SAGEATTENTION",
    "V_SCALINGS", "Int8CheckResult", "Int8Inputs", "Int8KernelFn", "Int8Recipe", "TruthError", "check_int8_all",
    "check_int8_shape", "e4m3_probabilities", "emulate_int8_attention", "int8_rounding_bound", "key_of",
    "quantize_int8_qkv", "quantize_v", "recipe_operands", "sageattention_contender", "sageattention_output",
    "truth_errors", "truth_errors_by_distribution", "vt_operand",
]
