"""A trial's verdict from typed evidence: what `stagelab try` measured of one change to a stage.

Precedence, first match wins:
  build_failed    the trial did not compile or link
  resource_fail   a registry gate failed on the trial's ptxas report or SASS
  no_gpu          built and resource-checked; no GPU, so checks and timing were skipped
  incorrect       a check failed or a launch crashed (a fast wrong kernel is a failure)
  error           not checked, or correct but not timed, though both were asked for (the CUDA
                  context was lost to another trial's launch, or the default could not run)
                  or the default failed its checks (no speed verdict against a wrong kernel)
  checked         correct; no timing was asked for (tools/quick_check.py without --time)
  faster          correct, and faster than the stage's default by at least min_gain (the geometric
                  mean over the timed problems of default p50 / trial p50, primary mode): the gain
                  that would make it pass as a stage of its own over the default
  valid_negative  correct, but not that much faster

"Correct" is on the parameter file's input distributions: a verdict names those of the family's that
the file left out (a row-long P.V of s19 passed normal and outlier, then failed acceptance's positive).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

VERDICTS = ("faster", "valid_negative", "incorrect", "build_failed", "resource_fail", "no_gpu", "error", "checked")


@dataclass(frozen=True)
class TrialEvidence:
    built: bool
    gates_passed: bool | None = None
    gpu_available: bool = False
    checks_passed: bool | None = None
    crash: str = ""                      # a check that raised
    timing_error: str = ""               # why a correct trial was not timed
    build_error: str = ""
    speedup_vs_default: float | None = None
    min_gain: float = 0.0
    timing_asked: bool = True
    default_correct: bool | None = None  # the default's own checks (None: not checked)
    unchecked_distributions: tuple[str, ...] = ()  # the family's, for this stage, the file left out


@dataclass(frozen=True)
class TrialVerdict:
    verdict: str
    reason: str


def judge_trial(e: TrialEvidence) -> TrialVerdict:
    verdict = _judge(e)
    if verdict.verdict in ("checked", "faster", "valid_negative") and e.unchecked_distributions:
        left_out = ", ".join(e.unchecked_distributions)
        return TrialVerdict(verdict.verdict, f"{verdict.reason}; not checked on {left_out} (left out by the parameter file)")
    return verdict


def _judge(e: TrialEvidence) -> TrialVerdict:
    if not e.built:
        return TrialVerdict("build_failed", e.build_error or "the trial did not build")
    if e.gates_passed is False:
        return TrialVerdict("resource_fail", "a resource gate failed on the trial's ptxas report or SASS")
    if not e.gpu_available:
        return TrialVerdict("no_gpu", "built and resource-checked; no GPU, so checks and timing were skipped")
    if e.crash:
        return TrialVerdict("incorrect", f"a launch crashed: {e.crash}")
    if e.checks_passed is False:
        return TrialVerdict("incorrect", "at least one correctness check failed")
    if e.checks_passed is None:
        return TrialVerdict("error", e.timing_error or "the trial was not checked")
    if e.default_correct is False:
        return TrialVerdict("error", "correct, but the default it is measured against failed its checks: "
                                     "no speed verdict against an incorrect default")
    if not e.timing_asked:
        return TrialVerdict("checked", "correct; no timing was asked for")
    speedup = e.speedup_vs_default
    if speedup is None or not math.isfinite(speedup):
        return TrialVerdict("error", e.timing_error or "correct, but the trial and its default were not both timed")
    gain = speedup - 1.0
    if gain > 0 and gain >= e.min_gain:
        return TrialVerdict("faster", f"correct and {gain:+.1%} over the default (required {e.min_gain:+.1%})")
    return TrialVerdict("valid_negative",
                        f"correct, but {gain:+.1%} over the default is below the required {e.min_gain:+.1%}")
