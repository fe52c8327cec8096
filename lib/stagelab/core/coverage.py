"""Which launch plan each problem of a parameter file takes in one built stage, computed on the host
for a device model, without a GPU (`stagelab coverage`), and the plans no problem takes.

The problems are the ones the stage's checks would run: the file's `shapes` that the stage's
stages.yaml `supports:` lets in (the others are skipped, as the check step skips them), each in every
dtype of the file (a plan may depend on the dtype, through K/V's bytes in L2).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from types import ModuleType

from .family import Family, Problem
from .launch_plans import DeviceModel, PlanGaps
from .params import RunParams
from .registry import Stage
from .supports import split_supported


@dataclass(frozen=True)
class ProblemPlan:
    """The plan one problem takes in the given dtypes, or why the stage rejects it there."""

    problem: str                 # the problem's tag
    dtypes: tuple[str, ...]
    plan: str                    # '' when rejected
    rejected: str = ""           # the stage's message (its launch_plan raised ValueError)


def _plan(family: Family, module: ModuleType, problem: Problem, dtype: str, device: DeviceModel) -> tuple[str, str]:
    try:
        return family.launch_plan_of(module, problem, dtype, device), ""
    except ValueError as exc:  # the stage's own refusal of a problem its `supports:` let in
        return "", str(exc) or type(exc).__name__


def problem_plans(family: Family, module: ModuleType, problems: Iterable[Problem], dtypes: Iterable[str],
                  device: DeviceModel) -> list[ProblemPlan]:
    """One row per problem and plan: the dtypes that take one plan share a row."""
    dtypes = tuple(dtypes)
    rows = []
    for problem in problems:
        by_plan: dict[tuple[str, str], list[str]] = {}
        for dtype in dtypes:
            by_plan.setdefault(_plan(family, module, problem, dtype, device), []).append(dtype)
        rows += [ProblemPlan(problem.tag, tuple(names), plan, rejected) for (plan, rejected), names in by_plan.items()]
    return rows


@dataclass
class CoverageReport:
    """A stage's declared plans against the plans a parameter file's problems take."""

    stage: str
    device: DeviceModel
    declared: tuple[str, ...]
    rows: list[ProblemPlan] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # problem tag -> why the stage does not take it

    @property
    def gaps(self) -> PlanGaps:
        return PlanGaps.of(self.declared, (row.plan for row in self.rows))

    @property
    def rejected(self) -> list[ProblemPlan]:
        return [row for row in self.rows if row.rejected]

    @property
    def covered(self) -> bool:
        """Every declared plan taken, none taken that is not declared, no problem rejected."""
        return not self.gaps and not self.rejected


def coverage_report(family: Family, stage: Stage, module: ModuleType, params: RunParams,
                    device: DeviceModel) -> CoverageReport:
    """The plans of the file's problems that the stage takes; nothing to plan for a stage without plans."""
    declared = tuple(family.declared_launch_plans(module))
    if not declared:
        return CoverageReport(stage.id, device, declared)
    problems, skipped = split_supported(family, params.shapes, stage.supports)
    return CoverageReport(stage.id, device, declared, problem_plans(family, module, problems, params.dtypes, device),
                          skipped)
