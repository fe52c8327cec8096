"""What the INT8 recipe costs a user: its error against float64 truth, beside FP8's and plain fp16's.

Truth is float64 attention on the unquantized inputs (reference.py). Beside the recipe (its
float64 emulation, rounded to the output dtype as a kernel's output is) stand:

- the same recipe without K smoothing, which shows what smoothing buys on each distribution;
- the FA3-recipe FP8 emulation (fp8/emulation.py: per-head e4m3 Q, K, V, P at 2^8, float32
  accumulation): what s9 is judged by;
- plain attention in the inputs' dtype (reference.py in fp16/bf16), the fp16 stages' yardstick:
  the stand-in for s18 where no GPU runs it (budget.py reports the fp16 stage's own error).

Two measures: the largest absolute error (what the checks judge) and the relative L1 error
sum|out - truth| / sum|truth| (SageAttention's accuracy metric, which a single row cannot dominate).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ..distributions import DISTRIBUTIONS
from ..fp8.emulation import emulate_fp8_attention
from ..fp8.quantize import quantize_qkv
from ..inputs import make_inputs
from ..reference import attention, default_scale, grouped_heads
from ..shapes import Shape
from .emulation import emulate_int8_attention
from .quantize import quantize_int8_qkv
from .recipe import DEFAULT_RECIPE, Int8Recipe

INT8_RECIPE = "int8"
INT8_UNSMOOTHED = "int8_unsmoothed"
FA3_FP8 = "fa3_fp8"
PLAIN = "plain"
METHODS = (INT8_RECIPE, INT8_UNSMOOTHED, FA3_FP8, PLAIN)


@dataclass(frozen=True)
class TruthError:
    """One output's error against float64 truth."""

    max_abs: float
    relative_l1: float

    @classmethod
    def of(cls, out: torch.Tensor, truth: torch.Tensor) -> TruthError:
        """An all-zero truth has relative error 0 when matched exactly, else infinite."""
        error = (out.double() - truth).abs()
        total, missed = truth.abs().sum().item(), error.sum().item()
        relative = missed / total if total else (0.0 if missed == 0 else float("inf"))
        return cls(error.max().item(), relative)


def int8_recipe_output(q, k, v, softmax_scale: float, causal: bool, recipe: Int8Recipe = DEFAULT_RECIPE):
    """The recipe's emulated output in the inputs' dtype."""
    int8 = quantize_int8_qkv(q, k, v, **recipe.quantizer_args())
    return emulate_int8_attention(int8, softmax_scale, causal, **recipe.emulation_args()).to(q.dtype)


def fa3_fp8_output(q, k, v, softmax_scale: float, causal: bool) -> torch.Tensor:
    """FA3's FP8 recipe emulated; K and V repeated per query head first (a repeated head gets the
    same per-head scale as its K/V head, so this is FA3's per-KV-head descaling)."""
    heads = q.shape[1]
    return emulate_fp8_attention(quantize_qkv(q, grouped_heads(k, heads), grouped_heads(v, heads)),
                                 softmax_scale, causal)


def truth_errors(q, k, v, softmax_scale: float, causal: bool,
                 recipe: Int8Recipe = DEFAULT_RECIPE) -> dict[str, TruthError]:
    """Each method's error against float64 attention on these inputs (METHODS, in that order)."""
    truth = attention(q, k, v, softmax_scale, causal, torch.float64)
    outputs = {
        INT8_RECIPE: int8_recipe_output(q, k, v, softmax_scale, causal, recipe),
        INT8_UNSMOOTHED: int8_recipe_output(q, k, v, softmax_scale, causal, replace(recipe, smooth_k=False)),
        FA3_FP8: fa3_fp8_output(q, k, v, softmax_scale, causal),
        PLAIN: attention(q, k, v, softmax_scale, causal, q.dtype),
    }
    return {name: TruthError.of(out, truth) for name, out in outputs.items()}


def truth_errors_by_distribution(shape: Shape, dtype: torch.dtype = torch.float16, seed: int = 0,
                                 distributions=DISTRIBUTIONS, recipe: Int8Recipe = DEFAULT_RECIPE,
                                 device: torch.device | str = "cpu") -> dict[str, dict[str, TruthError]]:
    """truth_errors on the family's standard inputs of each named distribution (the closing
    note's table: distribution -> method -> error)."""
    table = {}
    for distribution in distributions:
        q, k, v = make_inputs(shape, dtype, seed, device, distribution)
        table[distribution] = truth_errors(q, k, v, default_scale(shape.head_dim), shape.causal, recipe)
    return table
