"""Judging: the typed results of a run become evidence, and the evidence an outcome."""

from __future__ import annotations

from ..core import metrics
from ..core.launch_plans import EVERY_PLAN
from .outcome import Evidence, Outcome, decide
from ..measure.results import CheckReport, StageResults


def plan_gaps(checks: CheckReport | None) -> str:
    """The launch plans the checks missed, where the parameter file asked `coverage: every_plan`
    ('' otherwise, and for a stage without plans whose launches took none)."""
    if checks is None or checks.coverage != EVERY_PLAN:
        return ""
    return checks.plan_gaps().describe()


def evidence(results: StageResults, *, gpu_available: bool, has_parent: bool, min_gain: float) -> Evidence:
    timing, sanitize, profile = results.timing, results.sanitize, results.profile
    return Evidence(
        built=results.built is not None and results.build_error is None,
        gates_passed=results.resources.passed if results.resources and results.resources.gates else None,
        gpu_available=gpu_available,
        checks_passed=results.checks.passed if results.checks else None,
        checks_failures=results.checks.failures() if results.checks else "",
        hang=results.hang or "",
        stress_passed=results.stress.passed if results.stress else None,
        stress_failures=results.stress.failures() if results.stress else "",
        protocol_passed=results.protocol.passed if results.protocol else None,
        protocol_failures=results.protocol.failures() if results.protocol else "",
        checks_skipped=len(results.checks.skipped) if results.checks else 0,
        sanitize_passed=sanitize.passed if sanitize else None,
        sanitize_failures=sanitize.failures() if sanitize else "",
        plan_gaps=plan_gaps(results.checks),
        ncu_gates_passed=profile.gates_passed if profile else None,
        has_parent=has_parent,
        speedup_vs_parent=timing.speedup_geomean(metrics.PARENT) if timing and has_parent else None,
        min_gain=min_gain,
    )


def judge(results: StageResults, *, gpu_available: bool, has_parent: bool, min_gain: float) -> Outcome:
    if results.build_error is not None:
        return Outcome("build_failed", results.build_error)
    return decide(evidence(results, gpu_available=gpu_available, has_parent=has_parent, min_gain=min_gain))
