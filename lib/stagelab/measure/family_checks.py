"""A kernel, or several, checked against its family's float64 reference (measure.checks holds the
budget and the pieces these are made of).

`check_kernels` judges several kernels on one set of inputs: each problem, dtype, seed and
distribution draws its inputs and computes the float64 reference and the plain low-precision one
once (the yardstick), then every kernel's two poisoned launches are judged against it, as
`check_all` would judge each alone. A trial session (a stage's default and its variants, as an
acceptance notebook's exploration tries them) checks so: on acceptance.yaml the yardsticks are
most of a check's time (the problem of 683 heads of 2945 keys alone took about 39 s of each 51 s
pass on the H200), so each further kernel costs its own launches only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from itertools import product
from typing import Any

import torch

from ..core.distributions import DEFAULT_DISTRIBUTION, stage_distributions
from ..core.errors import KernelHang
from ..core.family import Family, KernelFn, Problem
from .checks import (CheckResult, ErrorBudget, PlanOf, check_each, context_lost, error_budget,
                     judge_launches, poisoned_launch)


@dataclass(frozen=True)
class Yardstick:
    """One check's inputs with their float64 reference and budget: every kernel checked on these
    inputs is judged against the same three (check_kernels shares them)."""

    inputs: Any
    ref: torch.Tensor
    budget: ErrorBudget


def yardstick(family: Family, shape: Problem, dtype_name: str, seed: int, device: torch.device | str,
              distribution: str = DEFAULT_DISTRIBUTION) -> Yardstick:
    """Fresh inputs of one problem, dtype, seed and distribution, the family's function on them in
    float64 and plainly in the dtype, and the budget between them."""
    dtype = family.torch_dtype(dtype_name)
    inputs = family.make_inputs(shape, dtype, seed, device, distribution)
    ref = family.reference(shape, inputs, torch.float64)
    return Yardstick(inputs, ref, error_budget(ref, family.reference(shape, inputs, dtype), dtype,
                                               family.atol_magnitude(ref)))


def judge_on(family: Family, kernel: KernelFn, shape: Problem, dtype_name: str, seed: int, stick: Yardstick,
             distribution: str = DEFAULT_DISTRIBUTION) -> CheckResult:
    """Two poisoned launches of the kernel on the yardstick's inputs, judged against it."""
    def launch(out: torch.Tensor) -> None:
        family.call(kernel, shape, stick.inputs, out)

    what = f"check {shape.tag} {dtype_name} seed {seed}"
    first = poisoned_launch(family.new_output(shape, stick.inputs), launch, shape.flops(), what)
    second = poisoned_launch(family.new_output(shape, stick.inputs), launch, shape.flops(), what)
    return CheckResult.judged(shape, dtype_name, seed, stick.budget,
                              judge_launches(first, second, stick.ref, stick.budget.bound), distribution)


def check_shape(family: Family, kernel: KernelFn, shape: Problem, dtype_name: str, seed: int,
                device: torch.device | str, distribution: str = DEFAULT_DISTRIBUTION) -> CheckResult:
    """One problem, one dtype, one seed, one input distribution: two poisoned launches judged
    against the budget."""
    stick = yardstick(family, shape, dtype_name, seed, device, distribution)
    return judge_on(family, kernel, shape, dtype_name, seed, stick, distribution)


def check_all(family: Family, kernel: KernelFn, shapes: Iterable[Problem], dtypes: Iterable[str],
              seeds: Iterable[int], device: torch.device | str,
              progress: Callable[[str], None] | None = None,
              distributions: Iterable[str] = (DEFAULT_DISTRIBUTION,), plan_of: PlanOf = None) -> list[CheckResult]:
    """Every (problem, dtype, seed, input distribution) of one family's kernel (plan_of: check_each)."""
    distributions = tuple(distributions)
    for distribution in distributions:  # a misspelt name fails before any launch
        family.require_distribution(distribution)

    def check(shape: Problem, dtype_name: str, seed: int, distribution: str) -> CheckResult:
        return check_shape(family, kernel, shape, dtype_name, seed, device, distribution)
    return check_each(check, shapes, dtypes, seeds, progress, distributions=distributions, plan_of=plan_of)


class CheckAborted(Exception):
    """One kernel of a shared pass hung or lost the CUDA context: nothing after it can be trusted.
    `label` names the kernel, `cause` is what its launch raised."""

    def __init__(self, label: str, cause: Exception):
        super().__init__(f"{label}: {type(cause).__name__}: {cause}")
        self.label, self.cause = label, cause


def check_kernels(family: Family, kernels: dict[str, KernelFn], shapes: Iterable[Problem], dtypes: Iterable[str],
                  seeds: Iterable[int], device: torch.device | str,
                  progress: Callable[[str], None] | None = None,
                  distributions: Iterable[str] = (DEFAULT_DISTRIBUTION,),
                  plan_of: dict[str, PlanOf] | None = None) -> dict[str, list[CheckResult]]:
    """check_all of every labelled kernel, each yardstick made once for all of them (plan_of: a
    reader per label, as check_each's). A kernel whose launch raises gets a failed check; one that
    hangs or loses the context raises CheckAborted naming it."""
    distributions = tuple(distributions)
    for distribution in distributions:  # a misspelt name fails before any launch
        family.require_distribution(distribution)
    results: dict[str, list[CheckResult]] = {label: [] for label in kernels}
    # the order of check_each: dtype innermost, so a family may draw a problem's inputs once for its dtypes
    for shape, seed, distribution, dtype_name in product(shapes, tuple(seeds), distributions, tuple(dtypes)):
        if progress:
            progress(f"{shape.tag} {dtype_name} seed {seed} {distribution}")
        try:
            stick = yardstick(family, shape, dtype_name, seed, device, distribution)
        except KernelHang:
            raise
        except Exception as exc:  # as check_each: a check that raises is failed, for every kernel here
            for label in kernels:
                results[label].append(CheckResult.crashed(shape, dtype_name, seed, exc, distribution))
            if context_lost(exc):
                raise
            continue
        for label, kernel in kernels.items():
            results[label].append(_judged(label, family, kernel, shape, dtype_name, seed, stick, distribution,
                                          (plan_of or {}).get(label)))
    return results


def _judged(label: str, family: Family, kernel: KernelFn, shape: Problem, dtype_name: str, seed: int,
            stick: Yardstick, distribution: str, plan_of: PlanOf) -> CheckResult:
    try:
        result = judge_on(family, kernel, shape, dtype_name, seed, stick, distribution)
    except Exception as exc:  # a crashing kernel is a failed check with its message
        if isinstance(exc, KernelHang) or context_lost(exc):
            raise CheckAborted(label, exc) from exc
        return CheckResult.crashed(shape, dtype_name, seed, exc, distribution)
    return result if plan_of is None else replace(result, plan=plan_of())  # outside the try, as check_each's


def check_stage(family: Family, kernel: Any, problems: list[Problem], dtypes, seeds, device,
                progress: Callable[[str], None] | None = None,
                distributions: Iterable[str] = (DEFAULT_DISTRIBUTION,), plan_of: PlanOf = None) -> list[CheckResult]:
    """The correctness checks of a family's stage_kernel on each requested distribution that applies
    to its input kind: the kind's own checks where the family has some (Family.kind_checks), else
    the lab's float64-reference budget."""
    family.require_input_kind(kernel.input_kind)
    applicable = stage_distributions(family, distributions, kernel.input_kind)
    own_checks = family.kind_checks(kernel.input_kind)
    options = dict(progress=progress, distributions=applicable, plan_of=plan_of)
    if own_checks is not None:
        return own_checks(kernel.into, problems, dtypes, seeds, device, **options)
    return check_all(family, kernel.into, problems, dtypes, seeds, device, **options)
