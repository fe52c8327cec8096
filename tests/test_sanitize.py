"""The sanitize step without a GPU: compute-sanitizer's summaries read into verdicts, the skip
paths, and the judgement: a stage that fails sanitizing is `incorrect` whatever its numbers.
The tool outputs below are hand-written in compute-sanitizer's format."""

from dataclasses import replace

import pytest

from stagelab.record import flatten

from stagelab.core import metrics

from stagelab.measure import sanitize
from stagelab.judge.judge import judge
from stagelab.judge.outcome import Evidence, decide
from stagelab.measure.results import CheckReport, StageResults
from stagelab.measure.sanitize import SanitizeReport, SanitizerVerdict, parse_verdict
from stagelab.measure.steps import StageContext

MEMCHECK_CLEAN = """========= COMPUTE-SANITIZER
sm0_block_three_pass 5x77 torch.float16: launched 2x
========= ERROR SUMMARY: 0 errors
"""
MEMCHECK_OOB = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 2 bytes
=========     at softmax_planted_oob_kernel<__half>(SoftmaxProblem)+0x4c0
=========     by thread (0,0,0) in block (4,0,0)
=========     Address 0x7f3c2e000302 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3c2e000000 of size 770 bytes
=========
========= ERROR SUMMARY: 2 errors
"""
RACECHECK_RACE = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at softmax_planted_race_kernel<__half>(SoftmaxProblem)+0x1f0
=========     and Read access at softmax_planted_race_kernel<__half>(SoftmaxProblem)+0x230 [8 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""
RACECHECK_WARNINGS = "========= RACECHECK SUMMARY: 2 hazards displayed (0 errors, 2 warnings)\n"
CHILD_CRASH = "Traceback (most recent call last):\nRuntimeError: CUDA error: an illegal memory access\n"


@pytest.mark.parametrize("tool, output, returncode, status, errors", [
    ("memcheck", MEMCHECK_CLEAN, 0, sanitize.CLEAN, 0),
    ("memcheck", MEMCHECK_OOB, 0, sanitize.ERRORS, 2),
    ("racecheck", RACECHECK_RACE, 0, sanitize.ERRORS, 1),
    ("racecheck", RACECHECK_WARNINGS, 0, sanitize.CLEAN, 0),        # warnings are recorded, not failed
    ("synccheck", CHILD_CRASH, 1, sanitize.CRASHED, None),           # the tool never reached its summary
    ("synccheck", MEMCHECK_CLEAN, 1, sanitize.CRASHED, 0),           # the child failed with nothing counted
    ("racecheck", "========= COMPUTE-SANITIZER\n", None, sanitize.TIMEOUT, None),
])
def test_verdict_from_the_summary_lines(tool, output, returncode, status, errors):
    verdict = parse_verdict(tool, output, returncode)
    assert (verdict.status, verdict.errors) == (status, errors)
    assert verdict.failed == (status in sanitize.FAILING)


def test_report_passes_only_when_every_tool_ran_clean():
    clean = [SanitizerVerdict(tool, sanitize.CLEAN, 0) for tool in sanitize.SANITIZER_TOOLS]
    assert SanitizeReport(clean).passed is True and SanitizeReport(clean).status == sanitize.CLEAN
    race = [*clean[:1], parse_verdict("racecheck", RACECHECK_RACE, 0), clean[2]]
    assert SanitizeReport(race).passed is False and SanitizeReport(race).status == sanitize.ERRORS
    assert "racecheck: errors (1 errors)" in SanitizeReport(race).failures()
    timed_out = [*clean[:2], SanitizerVerdict("synccheck", sanitize.TIMEOUT)]
    assert SanitizeReport(timed_out).passed is None                 # not evidence against the kernel
    assert flatten.sanitize_metrics(SanitizeReport(race)) == {
        metrics.SANITIZER_ERRORS.key("memcheck"): 0, metrics.SANITIZER_ERRORS.key("racecheck"): 1,
        metrics.SANITIZER_WARNINGS.key("racecheck"): 0, metrics.SANITIZER_ERRORS.key("synccheck"): 0}


def context(gpu: bool) -> StageContext:
    return replace(StageContext.load("sm0_block_three_pass", "params/softmax-smoke.yaml"), gpu_available=gpu)


def test_skipped_without_gpu_unavailable_without_the_tool(monkeypatch):
    skipped = sanitize.sanitize_step(context(False))
    assert skipped.status == sanitize.SKIPPED and skipped.passed is None
    monkeypatch.setattr(sanitize, "find_tool", lambda name: None)
    missing = sanitize.sanitize_step(context(True))
    assert missing.status == sanitize.UNAVAILABLE and missing.passed is None
    assert "compute-sanitizer" in missing.verdicts[0].log


def test_each_tool_wraps_the_stage_child(monkeypatch):
    monkeypatch.setattr(sanitize, "find_tool", lambda name: "/opt/cs")
    calls = []

    def run(command, timeout_s, env):
        calls.append((command, env))
        return 0, RACECHECK_RACE if command[2] == "racecheck" else MEMCHECK_CLEAN

    report = sanitize.sanitize_step(context(True), run=run)
    assert sorted(c[0][2] for c in calls) == sorted(sanitize.SANITIZER_TOOLS)  # side by side: any order
    assert [v.tool for v in report.verdicts] == list(sanitize.SANITIZER_TOOLS)  # reported in order
    assert all(v.seconds is not None and v.seconds >= 0 for v in report.verdicts)
    calls.sort(key=lambda c: sanitize.SANITIZER_TOOLS.index(c[0][2]))
    command, env = calls[0]
    assert command[:3] == ["/opt/cs", "--tool", "memcheck"] and command[-1] == "--sanitize"
    assert "stagelab.measure.launch" in command and "sm0_block_three_pass" in command
    assert env["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1"  # allocations the size of the tensors
    assert report.passed is False


GOOD = dict(built=True, gates_passed=True, gpu_available=True, checks_passed=True, has_parent=True,
            speedup_vs_parent=3.0, min_gain=0.05)


@pytest.mark.parametrize("evidence, outcome", [
    (Evidence(**GOOD, sanitize_passed=False, sanitize_failures="racecheck: errors"), "incorrect"),
    (Evidence(**GOOD, sanitize_passed=None), "pass"),               # not sanitized: judged on the rest
    (Evidence(**GOOD, sanitize_passed=True, ncu_gates_passed=False), "resource_fail"),
    (Evidence(**{**GOOD, "checks_passed": False}, ncu_gates_passed=False), "incorrect"),
    (Evidence(**{**GOOD, "gpu_available": False}, sanitize_passed=False), "no_gpu"),
])
def test_sanitize_and_ncu_gates_in_the_outcome_order(evidence, outcome):
    assert decide(evidence).outcome == outcome


def test_judge_calls_a_fast_correct_stage_with_a_race_incorrect():
    from stagelab.measure.checks import CheckResult

    passing = CheckReport([CheckResult(shape="5x77", causal=False, dtype="float16", seed=0, max_abs_err=0.0,
                                       lowprec_err=0.0, atol=1e-3, budget=1e-3, err_budget_ratio=0.0, nonfinite=0,
                                       run_to_run_max_diff=0.0, passed=True, reason="")])
    results = StageResults(checks=passing, sanitize=SanitizeReport([parse_verdict("racecheck", RACECHECK_RACE, 0)]))
    results.built = object()
    outcome = judge(results, gpu_available=True, has_parent=False, min_gain=0.0)
    assert outcome.outcome == "incorrect" and "racecheck" in outcome.reason
