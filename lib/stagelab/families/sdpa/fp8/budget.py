"""How an FP8 attention stage is judged: FA3's budget with a plain FP8 emulation as the yardstick.

On fresh random inputs of a named distribution (with one all-zero head planted), quantized head by head:

    max|out - ref| <= 2 * max|out_emulated - ref| + atol

where ref is float64 attention on the dequantized inputs (the FP8 stage cannot know more than
they hold), out_emulated the plain FP8 computation with the same scales (emulation.py), and
atol the output dtype's rounding at FA3's magnitude, as for the fp16 stages. Outputs are
poisoned with NaN and launched twice, as checks.py does. The error against the fp16 stage's
output (or float32 attention on the unquantized inputs) is reported beside, never judged: it
is what FP8 costs a user, quantization included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from ....measure.checks import CheckResult, check_each, error_budget, judge_launches, poisoned_launch
from ....core.family import DEFAULT_DISTRIBUTION, KernelFn
from ..distributions import known_distributions
from ..inputs import FA3_ATOL_MAGNITUDE, call_plain, make_inputs, torch_dtype
from ..reference import attention, default_scale
from ..shapes import Shape
from .emulation import emulate_fp8_attention
from .quantize import Fp8Inputs, quantize_qkv

# An FP8 stage as the checker calls it: kernel(fp8_inputs, out, softmax_scale, causal) writes
# attention of the dequantized inputs into out (the inputs' original dtype and shape).
Fp8KernelFn = Callable[[Fp8Inputs, torch.Tensor, float, bool], None]
# (problem, dtype, seed, device) -> (q, k, v): a check's inputs (default: FAMILY.make_inputs).
InputsFn = Callable[[Shape, torch.dtype, int, "torch.device | str"], tuple[torch.Tensor, ...]]
UNQUANTIZED_BASELINE = "float32 attention on the unquantized inputs"
STAGE_BASELINE = "the fp16 stage on the unquantized inputs"


@dataclass
class Fp8CheckResult(CheckResult):
    """A CheckResult whose lowprec_err is the FP8 emulation's error, plus what FP8 costs."""

    err_vs_fp16: float = float("nan")  # max|out - fp16 baseline's output|
    fp16_baseline: str = ""  # which output err_vs_fp16 compares against

    @property
    def emulation_err(self) -> float:
        return self.lowprec_err


def plant_zero_head(inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """Q, K and V with their last (batch, head) all zeros, so every check meets the quantizer's
    zero-scale case; unchanged when Q, or K and V (grouped-query attention), have only one head
    (it would zero the whole problem)."""
    if min(t.shape[0] * t.shape[1] for t in inputs) < 2:
        return inputs
    planted = tuple(t.clone() for t in inputs)
    for t in planted:
        t[-1, -1].zero_()
    return planted


def fp16_baseline_output(shape: Shape, inputs, fp16_kernel: KernelFn | None) -> tuple[torch.Tensor, str]:
    """The output FP8 is compared with for its cost: the fp16 stage's, or float32 attention."""
    if fp16_kernel is None:
        q, k, v = inputs
        exact = attention(q, k, v, default_scale(shape.head_dim), shape.causal, torch.float32)
        return exact.to(q.dtype), UNQUANTIZED_BASELINE
    out = poisoned_launch(torch.empty_like(inputs[0]), lambda out: call_plain(fp16_kernel, shape, inputs, out),
                          shape.flops(), f"fp16 baseline of the fp8 check {shape.tag}")
    return out, STAGE_BASELINE


def check_fp8_shape(kernel: Fp8KernelFn, shape: Shape, dtype_name: str, seed: int,
                    device: torch.device | str, fp16_kernel: KernelFn | None = None,
                    distribution: str = DEFAULT_DISTRIBUTION) -> Fp8CheckResult:
    """One problem, one output dtype, one seed, one input distribution: two poisoned launches
    judged against the budget."""
    dtype = torch_dtype(dtype_name)
    inputs = plant_zero_head(make_inputs(shape, dtype, seed, device, distribution))
    fp8 = quantize_qkv(*inputs)
    scale = default_scale(shape.head_dim)
    ref = attention(*fp8.dequantized(torch.float64), scale, shape.causal, torch.float64)
    budget = error_budget(ref, emulate_fp8_attention(fp8, scale, shape.causal), dtype, FA3_ATOL_MAGNITUDE)

    def launch(out: torch.Tensor) -> None:
        kernel(fp8, out, scale, shape.causal)

    what = f"fp8 check {shape.tag} {dtype_name} seed {seed}"
    first = poisoned_launch(torch.empty_like(inputs[0]), launch, shape.flops(), what)
    second = poisoned_launch(torch.empty_like(inputs[0]), launch, shape.flops(), what)
    verdict = judge_launches(first, second, ref, budget.bound)
    baseline, baseline_name = fp16_baseline_output(shape, inputs, fp16_kernel)
    err_vs_fp16 = (first.double() - baseline.double()).abs().max().item()
    return Fp8CheckResult.judged(shape, dtype_name, seed, budget, verdict, distribution,
                                 err_vs_fp16=err_vs_fp16, fp16_baseline=baseline_name)


def check_fp8_all(kernel: Fp8KernelFn, shapes: Iterable[Shape], dtypes: Iterable[str], seeds: Iterable[int],
                  device: torch.device | str, fp16_kernel: KernelFn | None = None,
                  progress: Callable[[str], None] | None = None,
                  distributions: Iterable[str] = (DEFAULT_DISTRIBUTION,),
                  plan_of: Callable[[], str] | None = None) -> list[CheckResult]:
    """Every (problem, output dtype, seed, input distribution); a launch that raises is a failed check
    (plan_of: measure.checks.check_each)."""
    distributions = known_distributions(distributions)

    def check(shape: Shape, dtype_name: str, seed: int, distribution: str) -> CheckResult:
        return check_fp8_shape(kernel, shape, dtype_name, seed, device, fp16_kernel, distribution)
    return check_each(check, shapes, dtypes, seeds, progress, result_type=Fp8CheckResult,
                      distributions=distributions, plan_of=plan_of)
