"""Correctness: a float64 reference and FlashAttention-3's error budget, for any family.

A kernel passes a check when, on fresh random inputs,

    max|out - ref| <= 2 * max|out_lowprec - ref| + atol

where ref is the family's function in float64 and out_lowprec the same function
computed plainly in the input dtype (what a straightforward fp16/bf16
implementation gets wrong), atol is twice the dtype's own rounding error at the
family's output magnitude, nothing non-finite appears, and a second launch on
the same inputs gives the same bits. The output is poisoned with NaN before each
launch, so an element the kernel never wrote fails as non-finite.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

import torch

from .family import Family, KernelFn, Problem


def rounding_atol(ref: torch.Tensor, dtype: torch.dtype, magnitude: float) -> float:
    """FA3's atol: twice the error of one round trip through the dtype at the given magnitude."""
    ref_low = ref.to(dtype)
    return 2 * (ref_low + magnitude - magnitude - ref_low).abs().max().item()


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


def _launch_poisoned(family: Family, kernel: KernelFn, problem: Problem, inputs) -> torch.Tensor:
    out = family.new_output(problem, inputs).fill_(float("nan"))
    family.call(kernel, problem, inputs, out)
    if out.device.type == "cuda":
        torch.cuda.synchronize(out.device)
    return out


def _reasons(first: torch.Tensor, second: torch.Tensor, ref: torch.Tensor, budget: float) -> tuple:
    nonfinite = int((~torch.isfinite(first)).sum().item() + (~torch.isfinite(second)).sum().item())
    err = (first.double() - ref).abs()
    max_err = float("inf") if nonfinite else err.max().item()
    both_finite = torch.isfinite(first) & torch.isfinite(second)
    run_diff = (first.double() - second.double()).abs()[both_finite].max().item() if both_finite.any() else 0.0
    reasons = []
    if nonfinite:
        reasons.append(f"{nonfinite} non-finite or unwritten output elements")
    elif max_err > budget:
        worst = torch.nonzero(err == err.max())[0].tolist()
        reasons.append(f"error {max_err:.3g} over budget {budget:.3g} at index {worst}")
    if run_diff != 0:
        reasons.append(f"two launches on the same inputs differ by {run_diff:.3g} (race?)")
    return max_err, nonfinite, run_diff, reasons


def check_shape(family: Family, kernel: KernelFn, shape: Problem, dtype_name: str, seed: int,
                device: torch.device | str) -> CheckResult:
    """One problem, one dtype, one seed: two poisoned launches judged against the budget."""
    dtype = family.torch_dtype(dtype_name)
    inputs = family.make_inputs(shape, dtype, seed, device)
    ref = family.reference(shape, inputs, torch.float64)
    lowprec_err = (family.reference(shape, inputs, dtype).double() - ref).abs().max().item()
    atol = rounding_atol(ref, dtype, family.atol_magnitude(ref))
    budget = 2 * lowprec_err + atol
    first = _launch_poisoned(family, kernel, shape, inputs)
    second = _launch_poisoned(family, kernel, shape, inputs)
    max_err, nonfinite, run_diff, reasons = _reasons(first, second, ref, budget)
    return CheckResult(
        shape=shape.tag, causal=bool(getattr(shape, "causal", False)), dtype=dtype_name, seed=seed,
        max_abs_err=max_err, lowprec_err=lowprec_err, atol=atol, budget=budget,
        err_budget_ratio=max_err / budget if budget > 0 else float("inf"), nonfinite=nonfinite,
        run_to_run_max_diff=run_diff, passed=not reasons, reason="; ".join(reasons) or "ok",
    )


def _crashed(shape: Problem, dtype_name: str, seed: int, exc: Exception) -> CheckResult:
    return CheckResult(
        shape=shape.tag, causal=bool(getattr(shape, "causal", False)), dtype=dtype_name, seed=seed,
        max_abs_err=float("inf"), lowprec_err=float("nan"), atol=float("nan"), budget=float("nan"),
        err_budget_ratio=float("inf"), nonfinite=-1, run_to_run_max_diff=float("nan"), passed=False,
        reason=f"launch raised {type(exc).__name__}: {exc}")


def _context_lost(exc: Exception) -> bool:
    message = str(exc).lower()
    return "illegal" in message or "unspecified launch failure" in message


def check_all(family: Family, kernel: KernelFn, shapes: Iterable[Problem], dtypes: Iterable[str],
              seeds: Iterable[int], device: torch.device | str,
              progress: Callable[[str], None] | None = None) -> list[CheckResult]:
    """Every (problem, dtype, seed); a launch that raises is recorded as a failed check, not propagated."""
    results = []
    for shape in shapes:
        for dtype_name in dtypes:
            for seed in seeds:
                if progress:
                    progress(f"{shape.tag} {dtype_name} seed {seed}")
                try:
                    results.append(check_shape(family, kernel, shape, dtype_name, seed, device))
                except Exception as exc:  # a crashing kernel is a failed check with its message
                    results.append(_crashed(shape, dtype_name, seed, exc))
                    if _context_lost(exc):
                        raise  # the CUDA context is gone; nothing after this can be trusted
    return results
