"""Deciding a stage's outcome from what the run measured.

Precedence, first match wins:
  build_failed    the stage did not compile or link
  resource_fail   a registry gate failed on the ptxas report (registers, shared memory, spills)
  no_gpu          built and resource-checked; no GPU, so correctness and timing did not run
  error           every problem of the parameter file was skipped: the stage takes none of them
                  (stages.yaml `supports:`), so nothing was checked
  incorrect       a launch hung (reason `hang: ...`, stagelab.measure.watchdog), compute-sanitizer
                  found errors (memcheck, racecheck, synccheck), any correctness check failed on
                  any input distribution (a fast wrong kernel is a failure; the reason names the
                  distributions that failed), or the stress step caught a check or chain failing
                  under perturbed timing (reason `ordering: ...`, stagelab.measure.stress), or the
                  protocol step's checking build found a ring-protocol violation or could not read
                  its record (reason `protocol: <stage>: <violation>`, stagelab.measure.protocol;
                  judged before `ordering`: it names the rule broken, the stress step only a symptom)
  uncovered       correct on every check, but on a parameter file asking `coverage: every_plan` the
                  checks did not reach every launch plan the stage's build declares (or took one it
                  does not declare): the reason names the plans (core.launch_plans)
  resource_fail   (again, once a GPU ran) an Nsight Compute gate failed (e.g. tensor_util_min)
  valid_negative  correct, but its gain over the parent is below the registry's min_gain
  pass            correct, within its gates, and (when it has a parent) faster by min_gain
The batch runner adds `error` for a notebook that crashed or timed out before deciding, and
`killed` for a run stopped by SIGINT/SIGTERM or left RUNNING by an owner that is gone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# The first word of an `incorrect` outcome's reason when a launch hung, when only the stress
# step's perturbed timing made a check or chain fail (an ordering bug in the async proxy), or when
# the protocol-checking build saw a ring slot used against the protocol (measure.protocol).
HANG = "hang"
INCORRECT = "incorrect"
ORDERING = "ordering"
PROTOCOL = "protocol"
# Correct where checked, but the checks missed a launch plan the parameter file's coverage rule requires.
UNCOVERED = "uncovered"

OUTCOMES = ("build_failed", "resource_fail", "no_gpu", "incorrect", UNCOVERED, "valid_negative", "pass", "error",
            "killed")
# The outcomes that say the stage (or the lab running it) failed, as opposed to passing, not beating its
# parent, finding no GPU or being stopped from outside.
FAILED_OUTCOMES = ("build_failed", "resource_fail", INCORRECT, UNCOVERED, "error")


@dataclass(frozen=True)
class Evidence:
    built: bool
    gates_passed: bool | None = None
    gpu_available: bool = False
    checks_passed: bool | None = None
    checks_failures: str = ""                # which checks failed (by input distribution), for the reason
    hang: str = ""                           # what hung and for how long (stagelab.measure.watchdog); "" when none
    stress_passed: bool | None = None        # None: not stressed
    stress_failures: str = ""                # what failed under stress, for the reason
    protocol_passed: bool | None = None      # None: the protocol step did not run
    protocol_failures: str = ""              # the stage and its first violation, for the reason
    checks_skipped: int = 0                  # problems the stage does not take (never launched)
    sanitize_passed: bool | None = None      # None: not sanitized (no GPU, no compute-sanitizer)
    sanitize_failures: str = ""              # which tools failed, for the reason
    plan_gaps: str = ""                      # launch plans the coverage rule required and the checks missed
    ncu_gates_passed: bool | None = None     # None: no ncu gates, or not profiled
    has_parent: bool = False
    speedup_vs_parent: float | None = None   # geometric mean over timed shapes, parent_p50 / stage_p50
    min_gain: float = 0.0


@dataclass(frozen=True)
class Outcome:
    outcome: str
    reason: str


def decide(e: Evidence) -> Outcome:
    if not e.built:
        return Outcome("build_failed", "the stage did not build")
    if e.gates_passed is False:
        return Outcome("resource_fail", "a resource gate failed on the ptxas report")
    if not e.gpu_available:
        return Outcome("no_gpu", "built and resource-checked; no GPU, so correctness and timing were not run")
    if e.hang:
        return Outcome("incorrect", f"{HANG}: {e.hang}")
    if e.sanitize_passed is False:
        return Outcome("incorrect", f"compute-sanitizer found errors ({e.sanitize_failures})")
    if e.checks_passed is None and e.checks_skipped:
        return Outcome("error", f"the stage takes none of the {e.checks_skipped} problems of the parameter file "
                                "(its stages.yaml `supports:`), so nothing was checked")
    if e.checks_passed is not True:
        detail = f" ({e.checks_failures})" if e.checks_failures else ""
        return Outcome("incorrect", f"at least one correctness check failed{detail}")
    if e.protocol_passed is False:
        return Outcome("incorrect", f"{PROTOCOL}: {e.protocol_failures}")
    if e.stress_passed is False:
        return Outcome("incorrect", f"{ORDERING}: {e.stress_failures}")
    if e.plan_gaps:
        return Outcome(UNCOVERED, f"correct where checked, but the checks did not cover every launch plan "
                                  f"({e.plan_gaps})")
    if e.ncu_gates_passed is False:
        return Outcome("resource_fail", "an Nsight Compute gate failed on the profiled problems")
    if not e.has_parent:
        return Outcome("pass", "correct and within its gates (no parent to beat)")
    if e.speedup_vs_parent is None or not math.isfinite(e.speedup_vs_parent):
        return Outcome("error", "the parent could not be timed, so the gain is unknown")
    gain = e.speedup_vs_parent - 1.0
    if gain < e.min_gain:
        return Outcome("valid_negative",
                       f"correct, but {gain:+.1%} over the parent is below the required {e.min_gain:+.1%}")
    return Outcome("pass", f"correct and {gain:+.1%} over the parent (required {e.min_gain:+.1%})")
