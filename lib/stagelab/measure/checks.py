"""Correctness: a float64 reference and FlashAttention-3's error budget, for any family.

A kernel passes a check when, on fresh random inputs,

    max|out - ref| <= 2 * max|out_lowprec - ref| + atol

where ref is the family's function in float64 and out_lowprec the same function computed plainly in the input
dtype (what a straightforward fp16/bf16 implementation gets wrong), atol is twice the dtype's own rounding
error at the family's output magnitude, nothing non-finite appears, and a second launch on the same inputs
gives the same bits. The output is poisoned with NaN before each launch, so an element the kernel never wrote
fails as non-finite. Every (problem, dtype, seed) is checked on each named input distribution the parameter
file asks for (the family's `make_inputs`: e.g. sdpa's `large`, logits in the hundreds), with the same budget;
each result carries its distribution.

The pieces (error_budget, poisoned_launch, judge_launches, check_each) serve any judgement of this kind:
families/sdpa/fp8 uses them with a plain FP8 emulation as out_lowprec.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
import math
from typing import Any

import torch

from ..core.errors import KernelCrash, KernelHang
from ..core.distributions import DEFAULT_DISTRIBUTION
from ..core.family import Family, KernelFn, Problem
from ..core.formatting import fixed
from .watchdog import synchronize

PlanOf = Callable[[], str] | None  # reads the stage's last launch plan (Family.last_launch_plan)


def rounding_atol(ref: torch.Tensor, dtype: torch.dtype, magnitude: float) -> float:
    """FA3's atol: twice the error of one round trip through the dtype at the given magnitude."""
    ref_low = ref.to(dtype)
    return 2 * (ref_low + magnitude - magnitude - ref_low).abs().max().item()


@dataclass(frozen=True)
class ErrorBudget:
    """FA3's bound for one input: `2 * lowprec_err + atol`."""

    lowprec_err: float  # max|out_lowprec - ref|: what the plain low-precision computation gets wrong
    atol: float

    @property
    def bound(self) -> float:
        return 2 * self.lowprec_err + self.atol


def error_budget(ref: torch.Tensor, lowprec_out: torch.Tensor, out_dtype: torch.dtype,
                 magnitude: float) -> ErrorBudget:
    """The budget a kernel writing out_dtype must meet, given the plain low-precision output."""
    lowprec_err = (lowprec_out.double() - ref).abs().max().item()
    return ErrorBudget(lowprec_err, rounding_atol(ref, out_dtype, magnitude))


@dataclass(frozen=True)
class LaunchVerdict:
    """Two launches on one input judged against the reference and a bound."""

    max_err: float
    nonfinite: int
    run_diff: float
    reasons: tuple[str, ...]


def error_budget_ratio(max_err: float, bound: float) -> float:
    """max_err / bound; a zero bound (an all-zero exact output: atol is then 0 too) is met only by
    a zero error, which is a ratio of 0, and any other error is infinitely over it."""
    if bound > 0:
        return max_err / bound
    return 0.0 if max_err == 0 else float("inf")


@dataclass
class CheckResult:
    shape: str
    causal: bool
    dtype: str
    seed: int
    max_abs_err: float
    lowprec_err: float
    atol: float
    budget: float
    err_budget_ratio: float
    nonfinite: int
    run_to_run_max_diff: float
    passed: bool
    reason: str
    distribution: str = DEFAULT_DISTRIBUTION  # the named input distribution the inputs were drawn from
    plan: str = ""  # the launch plan its launches took (core.launch_plans): launch_plans table, not this one's

    def as_row(self) -> dict:
        """The result as a table row, its distribution beside the seed."""
        row = asdict(self)
        row.pop("plan")
        distribution = row.pop("distribution")
        ordered = {}
        for key, value in row.items():
            ordered[key] = value
            if key == "seed":
                ordered["distribution"] = distribution
        return ordered

    @classmethod
    def judged(cls, shape: Problem, dtype_name: str, seed: int, budget: ErrorBudget,
               verdict: LaunchVerdict, distribution: str = DEFAULT_DISTRIBUTION, **extra) -> CheckResult:
        """A result from its budget and verdict; `extra` fills a subclass's own fields."""
        bound = budget.bound
        return cls(
            shape=shape.tag, causal=bool(getattr(shape, "causal", False)), dtype=dtype_name, seed=seed,
            max_abs_err=verdict.max_err, lowprec_err=budget.lowprec_err, atol=budget.atol, budget=bound,
            err_budget_ratio=error_budget_ratio(verdict.max_err, bound),
            nonfinite=verdict.nonfinite, run_to_run_max_diff=verdict.run_diff,
            passed=not verdict.reasons, reason="; ".join(verdict.reasons) or "ok", distribution=distribution,
            **extra)

    @classmethod
    def crashed(cls, shape: Problem, dtype_name: str, seed: int, exc: Exception,
                distribution: str = DEFAULT_DISTRIBUTION) -> CheckResult:
        return cls(
            shape=shape.tag, causal=bool(getattr(shape, "causal", False)), dtype=dtype_name, seed=seed,
            max_abs_err=float("inf"), lowprec_err=float("nan"), atol=float("nan"), budget=float("nan"),
            err_budget_ratio=float("inf"), nonfinite=-1, run_to_run_max_diff=float("nan"), passed=False,
            reason=f"launch raised {type(exc).__name__}: {exc}", distribution=distribution)

    def describe(self) -> str:
        """One line for a person: which check, on which inputs, and its verdict."""
        return f"{self.shape} {self.dtype} seed {self.seed} {self.distribution}: {self.reason}"


def poisoned_launch(out: torch.Tensor, launch: Callable[[torch.Tensor], None], flops: float = 0.0,
                    what: str = "a checked launch") -> torch.Tensor:
    """Fill `out` with NaN, launch into it and wait under the watchdog (a launch of `flops` not
    done in its bound raises KernelHang): an element never written stays non-finite."""
    out.fill_(float("nan"))
    launch(out)
    if out.device.type == "cuda":
        with torch.cuda.device(out.device):
            synchronize(what, flops)
    return out


def judge_launches(first: torch.Tensor, second: torch.Tensor, ref: torch.Tensor, bound: float) -> LaunchVerdict:
    """Non-finite elements, the error against ref over the bound, and bitwise run-to-run agreement."""
    nonfinite = int((~torch.isfinite(first)).sum().item() + (~torch.isfinite(second)).sum().item())
    err = (first.double() - ref).abs()
    max_err = float("inf") if nonfinite else err.max().item()
    both_finite = torch.isfinite(first) & torch.isfinite(second)
    run_diff = (first.double() - second.double()).abs()[both_finite].max().item() if both_finite.any() else 0.0
    reasons = []
    if not math.isfinite(bound):  # NaN compares false: a broken yardstick must not pass everything
        reasons.append(f"the budget is {bound}: the low-precision yardstick is not finite on these inputs, "
                       "so the output cannot be judged")
    if nonfinite:
        reasons.append(f"{nonfinite} non-finite or unwritten output elements")
    elif max_err > bound:
        worst = torch.nonzero(err == err.max())[0].tolist()
        reasons.append(f"error {fixed(max_err)} over budget {fixed(bound)} at index {worst}")
    if run_diff != 0:
        reasons.append(f"two launches on the same inputs differ by {fixed(run_diff)} (race?)")
    return LaunchVerdict(max_err, nonfinite, run_diff, tuple(reasons))


def context_lost(exc: Exception) -> bool:
    if isinstance(exc, KernelCrash):
        return True
    message = str(exc).lower()
    return "illegal" in message or "unspecified launch failure" in message


def check_each(check: Callable[[Problem, str, int, str], CheckResult], shapes: Iterable[Problem],
               dtypes: Iterable[str], seeds: Iterable[int], progress: Callable[[str], None] | None = None,
               result_type: type[CheckResult] = CheckResult,
               distributions: Iterable[str] = (DEFAULT_DISTRIBUTION,), plan_of: PlanOf = None) -> list[CheckResult]:
    """`check(problem, dtype_name, seed, distribution)` on every combination; a launch that raises is recorded
    as a failed check (of result_type), not propagated; a hang (KernelHang) is, since the CUDA context it
    leaves cannot run another check. `plan_of()` after each check that launched fills its `plan`."""
    distributions, dtypes, seeds = tuple(distributions), tuple(dtypes), tuple(seeds)
    results = []
    for shape in shapes:  # dtype innermost: a family may draw a problem's inputs once for its dtypes (sdpa)
        for seed in seeds:
            for distribution in distributions:
                for dtype_name in dtypes:
                    if progress:
                        progress(f"{shape.tag} {dtype_name} seed {seed} {distribution}")
                    try:
                        result = check(shape, dtype_name, seed, distribution)
                    except KernelHang:
                        raise
                    except Exception as exc:  # a crashing kernel is a failed check with its message
                        results.append(result_type.crashed(shape, dtype_name, seed, exc, distribution))
                        if context_lost(exc):
                            raise  # the CUDA context is gone; nothing after this can be trusted
                    else:  # outside the try: a broken plan hook is no failed check
                        results.append(result if plan_of is None else replace(result, plan=plan_of()))
    return results
