"""Correctness: a float64 reference and FlashAttention-3's error budget, for any family.

A kernel passes a check when, on fresh random inputs,

    max|out - ref| <= 2 * max|out_lowprec - ref| + atol

where ref is the family's function in float64 and out_lowprec the same function
computed plainly in the input dtype (what a straightforward fp16/bf16
implementation gets wrong), atol is twice the dtype's own rounding error at the
family's output magnitude, nothing non-finite appears, and a second launch on
the same inputs gives the same bits. The output is poisoned with NaN before each
launch, so an element the kernel never wrote fails as non-finite.

The pieces (error_budget, poisoned_launch, judge_launches, check_each) serve any judgement
of this kind: families/sdpa/fp8 uses them with a plain FP8 emulation as out_lowprec.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

import torch

from .errors import KernelHang
from .family import Family, KernelFn, Problem
from .watchdog import synchronize


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

    def as_row(self) -> dict:
        return asdict(self)

    @classmethod
    def judged(cls, shape: Problem, dtype_name: str, seed: int, budget: ErrorBudget,
               verdict: LaunchVerdict, **extra) -> CheckResult:
        """A result from its budget and verdict; `extra` fills a subclass's own fields."""
        bound = budget.bound
        return cls(
            shape=shape.tag, causal=bool(getattr(shape, "causal", False)), dtype=dtype_name, seed=seed,
            max_abs_err=verdict.max_err, lowprec_err=budget.lowprec_err, atol=budget.atol, budget=bound,
            err_budget_ratio=verdict.max_err / bound if bound > 0 else float("inf"),
            nonfinite=verdict.nonfinite, run_to_run_max_diff=verdict.run_diff,
            passed=not verdict.reasons, reason="; ".join(verdict.reasons) or "ok", **extra)

    @classmethod
    def crashed(cls, shape: Problem, dtype_name: str, seed: int, exc: Exception) -> CheckResult:
        return cls(
            shape=shape.tag, causal=bool(getattr(shape, "causal", False)), dtype=dtype_name, seed=seed,
            max_abs_err=float("inf"), lowprec_err=float("nan"), atol=float("nan"), budget=float("nan"),
            err_budget_ratio=float("inf"), nonfinite=-1, run_to_run_max_diff=float("nan"), passed=False,
            reason=f"launch raised {type(exc).__name__}: {exc}")


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
    if nonfinite:
        reasons.append(f"{nonfinite} non-finite or unwritten output elements")
    elif max_err > bound:
        worst = torch.nonzero(err == err.max())[0].tolist()
        reasons.append(f"error {max_err:.3g} over budget {bound:.3g} at index {worst}")
    if run_diff != 0:
        reasons.append(f"two launches on the same inputs differ by {run_diff:.3g} (race?)")
    return LaunchVerdict(max_err, nonfinite, run_diff, tuple(reasons))


def check_shape(family: Family, kernel: KernelFn, shape: Problem, dtype_name: str, seed: int,
                device: torch.device | str) -> CheckResult:
    """One problem, one dtype, one seed: two poisoned launches judged against the budget."""
    dtype = family.torch_dtype(dtype_name)
    inputs = family.make_inputs(shape, dtype, seed, device)
    ref = family.reference(shape, inputs, torch.float64)
    budget = error_budget(ref, family.reference(shape, inputs, dtype), dtype, family.atol_magnitude(ref))

    def launch(out: torch.Tensor) -> None:
        family.call(kernel, shape, inputs, out)

    what = f"check {shape.tag} {dtype_name} seed {seed}"
    first = poisoned_launch(family.new_output(shape, inputs), launch, shape.flops(), what)
    second = poisoned_launch(family.new_output(shape, inputs), launch, shape.flops(), what)
    return CheckResult.judged(shape, dtype_name, seed, budget, judge_launches(first, second, ref, budget.bound))


def _context_lost(exc: Exception) -> bool:
    message = str(exc).lower()
    return "illegal" in message or "unspecified launch failure" in message


def check_each(check: Callable[[Problem, str, int], CheckResult], shapes: Iterable[Problem],
               dtypes: Iterable[str], seeds: Iterable[int], progress: Callable[[str], None] | None = None,
               result_type: type[CheckResult] = CheckResult) -> list[CheckResult]:
    """`check(problem, dtype_name, seed)` on every combination; a launch that raises is recorded
    as a failed check (of result_type), not propagated; a hang (KernelHang) is, since the CUDA
    context it leaves cannot run another check."""
    results = []
    for shape in shapes:
        for dtype_name in dtypes:
            for seed in seeds:
                if progress:
                    progress(f"{shape.tag} {dtype_name} seed {seed}")
                try:
                    results.append(check(shape, dtype_name, seed))
                except KernelHang:
                    raise
                except Exception as exc:  # a crashing kernel is a failed check with its message
                    results.append(result_type.crashed(shape, dtype_name, seed, exc))
                    if _context_lost(exc):
                        raise  # the CUDA context is gone; nothing after this can be trusted
    return results


def check_all(family: Family, kernel: KernelFn, shapes: Iterable[Problem], dtypes: Iterable[str],
              seeds: Iterable[int], device: torch.device | str,
              progress: Callable[[str], None] | None = None) -> list[CheckResult]:
    """Every (problem, dtype, seed) of one family's kernel."""
    def check(shape: Problem, dtype_name: str, seed: int) -> CheckResult:
        return check_shape(family, kernel, shape, dtype_name, seed, device)
    return check_each(check, shapes, dtypes, seeds, progress)
