"""How an INT8 stage is judged: FA3's budget with its own recipe's float64 emulation as the yardstick.

On fresh random inputs of a named distribution (one all-zero head planted), quantized with the
stage's recipe (recipe.Int8Recipe):

    max|out - ref| <= 2 * max|out_emulated - ref| + atol

- ref: float64 attention on the recipe's operands (dequantized int8 Q and smoothed K, e4m3 V plus
  V's mean when smoothed): all the 8-bit inputs hold, so nothing the stage could still know;
- out_emulated: the recipe's float64 emulation (emulation.py) rounded to the output dtype; its
  error is what the recipe itself loses beyond its inputs (P in e4m3 against each tile's running max);
- atol: the output dtype's rounding at FA3's magnitude, as for every sdpa stage.

Why this form. A kernel computing the recipe differs from the emulation only by float32 arithmetic
(scores, exp2, the tensor core's accumulation inside a key tile) and by the P elements whose float32
exponential lands on the other side of an e4m3 rounding midpoint than the float64 one: those move
by one e4m3 step (2^-3 of that weight), the same size as P's own rounding. So no bound on
|out - out_emulated| tighter than the recipe's own P error holds for a correct kernel, and that
error, max|out_emulated - ref|, is the unit FA3's rule measures in. A correct kernel lands near it
(its P rounding is mostly the emulation's); a recipe mistake (a block's descale misapplied, a
partial block dropped, P's scale not carried by the row sum, V's scale or mean on the wrong channel,
long rows of plain V summed in the tensor core's truncating accumulator without promotion: on
all-positive rows of 4099 keys that measured 10.5x the budget, s19 at head_dim 64 on 2026-11-28)
costs more than twice it. Smoothed V (recipe.py's smooth_v, the default) cures the last: its terms
take both signs, so the row-long sum's truncations cancel, and a CPU model of the tensor core
(tools/int8_pv_accumulation.py) puts it at 0.31x the budget on those rows, as the per-tile sum.
By the triangle inequality the rule also bounds |out - out_emulated| by 3x the recipe's error + atol;
the result reports that distance (err_vs_emulation) beside it.

Beside the verdict, what 8 bits cost a user, never judged: the stage's error against float64 truth
(attention on the unquantized inputs), the recipe's, the FA3-recipe FP8 emulation's, and the fp16
baseline's (the fp16 stage's output, or float32 attention on the unquantized inputs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from ....core.family import DEFAULT_DISTRIBUTION, KernelFn
from ....measure.checks import CheckResult, check_each, error_budget, judge_launches, poisoned_launch
from ..distributions import known_distributions
from ..fp8.budget import fp16_baseline_output, plant_zero_head
from ..inputs import FA3_ATOL_MAGNITUDE, make_inputs, torch_dtype
from ..reference import attention, default_scale
from ..shapes import Shape
from .accuracy import fa3_fp8_output
from .emulation import emulate_int8_attention
from .quantize import Int8Inputs, quantize_int8_qkv
from .recipe import DEFAULT_RECIPE, Int8Recipe

# An INT8 stage as the checker calls it: kernel(int8_inputs, out, softmax_scale, causal) writes the
# attention of the recipe's operands into out (the inputs' original dtype, Q's shape).
Int8KernelFn = Callable[[Int8Inputs, torch.Tensor, float, bool], None]


@dataclass
class Int8CheckResult(CheckResult):
    """A CheckResult whose lowprec_err is the recipe emulation's error, plus errors against truth."""

    err_vs_emulation: float = float("nan")  # max|out - recipe emulation (float64)|
    err_vs_truth: float = float("nan")  # max|out - float64 attention on the unquantized inputs|
    recipe_err_vs_truth: float = float("nan")  # the same for the recipe's emulation
    fa3_fp8_err_vs_truth: float = float("nan")  # and for FA3's FP8 recipe emulated (fp8/emulation.py)
    baseline_err_vs_truth: float = float("nan")  # and for the fp16 baseline
    fp16_baseline: str = ""  # which output that is

    @property
    def emulation_err(self) -> float:
        return self.lowprec_err


def _max_error(out: torch.Tensor, against: torch.Tensor) -> float:
    return (out.double() - against.double()).abs().max().item()


def truth_report(shape: Shape, inputs, out: torch.Tensor, emulated: torch.Tensor,
                 fp16_kernel: KernelFn | None) -> dict:
    """The reported (never judged) errors against float64 attention on the unquantized inputs."""
    q, k, v = inputs
    scale = default_scale(shape.head_dim)
    truth = attention(q, k, v, scale, shape.causal, torch.float64)
    baseline, baseline_name = fp16_baseline_output(shape, inputs, fp16_kernel)
    return {"err_vs_truth": _max_error(out, truth), "recipe_err_vs_truth": _max_error(emulated.to(q.dtype), truth),
            "fa3_fp8_err_vs_truth": _max_error(fa3_fp8_output(q, k, v, scale, shape.causal), truth),
            "baseline_err_vs_truth": _max_error(baseline, truth), "fp16_baseline": baseline_name}


def check_int8_shape(kernel: Int8KernelFn, shape: Shape, dtype_name: str, seed: int, device: torch.device | str,
                     fp16_kernel: KernelFn | None = None, distribution: str = DEFAULT_DISTRIBUTION,
                     recipe: Int8Recipe = DEFAULT_RECIPE,
                     quantizer: Callable[..., Int8Inputs] | None = None) -> Int8CheckResult:
    """One problem, one output dtype, one seed, one input distribution: two poisoned launches on the
    recipe's operands judged against the budget. quantizer(q, k, v) makes the operands (default:
    quantize_int8_qkv with the recipe's arguments; a stage's CUDA quantizer, cuda_quantize.py, makes
    the default recipe's), and the yardsticks are computed from what it made."""
    dtype = torch_dtype(dtype_name)
    inputs = plant_zero_head(make_inputs(shape, dtype, seed, device, distribution))
    int8 = (quantizer or (lambda q, k, v: quantize_int8_qkv(q, k, v, **recipe.quantizer_args())))(*inputs)
    scale = default_scale(shape.head_dim)
    ref = attention(*int8.dequantized(torch.float64, smoothed=True), scale, shape.causal, torch.float64)
    emulated = emulate_int8_attention(int8, scale, shape.causal, **recipe.emulation_args())
    budget = error_budget(ref, emulated.to(dtype), dtype, FA3_ATOL_MAGNITUDE)

    def launch(out: torch.Tensor) -> None:
        kernel(int8, out, scale, shape.causal)

    what = f"int8 check {shape.tag} {dtype_name} seed {seed}"
    first = poisoned_launch(torch.empty_like(inputs[0]), launch, shape.flops(), what)  # Q's layout (bshd too)
    second = poisoned_launch(torch.empty_like(inputs[0]), launch, shape.flops(), what)
    verdict = judge_launches(first, second, ref, budget.bound)
    return Int8CheckResult.judged(shape, dtype_name, seed, budget, verdict, distribution,
                                  err_vs_emulation=_max_error(first, emulated),
                                  **truth_report(shape, inputs, first, emulated, fp16_kernel))


def check_int8_all(kernel: Int8KernelFn, shapes: Iterable[Shape], dtypes: Iterable[str], seeds: Iterable[int],
                   device: torch.device | str, fp16_kernel: KernelFn | None = None,
                   progress: Callable[[str], None] | None = None,
                   distributions: Iterable[str] = (DEFAULT_DISTRIBUTION,), plan_of: Callable[[], str] | None = None,
                   recipe: Int8Recipe = DEFAULT_RECIPE) -> list[CheckResult]:
    """Every (problem, output dtype, seed, input distribution); a launch that raises is a failed check."""
    distributions = known_distributions(distributions)

    def check(shape: Shape, dtype_name: str, seed: int, distribution: str) -> CheckResult:
        return check_int8_shape(kernel, shape, dtype_name, seed, device, fp16_kernel, distribution, recipe)
    return check_each(check, shapes, dtypes, seeds, progress, result_type=Int8CheckResult,
                      distributions=distributions, plan_of=plan_of)
