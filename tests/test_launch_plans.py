"""Launch plans without a GPU: the parameter file's coverage rule, the gaps between declared and taken
plans, the plan each check keeps, the launch_plans table, and the judge's `uncovered` outcome."""

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from stagelab.core import metrics
from stagelab.core.errors import ConfigError
from stagelab.core.launch_plans import EVERY_PLAN, H100_SXM, PLANS_NAMED, DeviceModel, PlanGaps, device_model
from stagelab.core.params import load_params
from stagelab.families.rmsnorm import FAMILY as RMSNORM
from stagelab.families.sdpa import FAMILY as SDPA, Shape, attention
from stagelab.judge.judge import judge
from stagelab.judge.outcome import OUTCOMES, UNCOVERED, Evidence, decide
from stagelab.measure.checks import CheckResult
from stagelab.measure.family_checks import check_all
from stagelab.measure.results import CheckReport, StageResults
from stagelab.record import flatten

ROOT = Path(__file__).resolve().parents[1]
THREE, TWO, SPLIT = "hd64 wgs=3", "hd64 wgs=2", "hd128 split=2"


def write(tmp_path, text):
    path = tmp_path / "p.yaml"
    path.write_text("shapes: [{shape: [1, 2, 3, 64]}]\n" + text)
    return path


# -- the parameter file's rule ------------------------------------------------------------------
def test_coverage_is_opt_in_and_every_plan_is_read(tmp_path):
    assert load_params(write(tmp_path, "")).coverage == ""
    assert load_params(write(tmp_path, "coverage: every_plan\n")).coverage == EVERY_PLAN


@pytest.mark.parametrize("value", ["some_plans", "true", "[every_plan]"])
def test_an_unknown_coverage_rule_is_named(tmp_path, value):
    with pytest.raises(ConfigError, match=r"p\.yaml: coverage: .* is not a coverage rule; supported: \['every_plan'\]"):
        load_params(write(tmp_path, f"coverage: {value}\n"))


def test_the_acceptance_file_asks_for_every_plan():
    assert load_params(ROOT / "params" / "acceptance.yaml").coverage == EVERY_PLAN


# -- device models and gaps ----------------------------------------------------------------------
def test_the_device_model_defaults_to_an_h100_and_takes_either_override():
    assert (H100_SXM.sms, H100_SXM.l2_bytes) == (132, 50 * 2**20) and device_model() is H100_SXM
    assert (device_model(sms=78).sms, device_model(sms=78).l2_bytes) == (78, H100_SXM.l2_bytes)
    assert (device_model(l2_mib=60).sms, device_model(l2_mib=60).l2_bytes) == (132, 60 * 2**20)
    with pytest.raises(ConfigError, match="sms must be a positive integer, got 0"):
        DeviceModel("x", 0, 1)


def test_gaps_name_plans_not_reached_and_plans_not_declared():
    gaps = PlanGaps.of([THREE, TWO, TWO], [TWO, "", "hd64 wgs=4", TWO])
    assert gaps.unreached == (THREE,) and gaps.undeclared == ("hd64 wgs=4",)
    assert (gaps.declared, gaps.reached) == (2, 1) and gaps
    assert THREE in gaps.describe() and "taken but not declared: hd64 wgs=4" in gaps.describe()
    assert not PlanGaps.of([TWO], [TWO]) and PlanGaps.of([TWO], [TWO]).describe() == ""
    assert not PlanGaps.of([], ["", ""])  # a stage without plans: its launches take none


def test_a_long_list_of_gaps_is_cut_and_counted():
    many = [f"plan {i}" for i in range(PLANS_NAMED + 3)]
    text = PlanGaps.of(many, []).describe()
    assert f"plan {PLANS_NAMED - 1}" in text and f"plan {PLANS_NAMED}" not in text and "and 3 more" in text


def test_families_without_plans_declare_none():
    module = object()  # the defaults never look at the module
    assert RMSNORM.declared_launch_plans(module) == () and RMSNORM.last_launch_plan(module) == ""
    assert RMSNORM.launch_plan_of(module, None, "float16", H100_SXM) == ""


# -- the plan each check keeps ---------------------------------------------------------------------
SHAPES = [Shape(1, 2, 77, 64, False), Shape(1, 2, 77, 64, True), Shape(1, 1, 33, 128, False)]


def test_each_check_keeps_the_plan_its_own_launches_took():
    """A stand-in kernel that takes a plan per problem as a planning stage would; plan_of reads its last."""
    last = {"plan": ""}

    def planned(q, k, v, out, scale, causal):
        last["plan"] = f"hd{q.shape[-1]} causal={causal}"
        if q.shape[-1] == 128:
            raise RuntimeError("invalid argument")  # a launch that raises keeps no plan
        out.copy_(attention(q, k, v, scale, causal, torch.float32))

    results = check_all(SDPA, planned, SHAPES, ["float16"], [0, 1], "cpu", plan_of=lambda: last["plan"])
    assert [(r.shape, r.plan) for r in results] == [
        ("1x2x77x64", "hd64 causal=False"), ("1x2x77x64", "hd64 causal=False"),
        ("1x2x77x64_causal", "hd64 causal=True"), ("1x2x77x64_causal", "hd64 causal=True"),
        ("1x1x33x128", ""), ("1x1x33x128", "")]
    assert "plan" not in results[0].as_row()  # the correctness table keeps its columns


def check(shape: str, plan: str, passed: bool = True, dtype: str = "float16", distribution: str = "normal"):
    return CheckResult(shape=shape, causal=False, dtype=dtype, seed=0, max_abs_err=0.1, lowprec_err=0.1, atol=0.0,
                       budget=0.2, err_budget_ratio=0.5 if passed else 2.0, nonfinite=0, run_to_run_max_diff=0.0,
                       passed=passed, reason="ok", distribution=distribution, plan=plan)


def report(coverage: str = EVERY_PLAN, passed: bool = True) -> CheckReport:
    """Checks that reach two of three declared plans (THREE is missed)."""
    return CheckReport([check("1x8x512x64", TWO, passed), check("1x8x512x64", TWO, distribution="large"),
                        check("2x8x2048x128", SPLIT, dtype="bfloat16")],
                       declared_plans=(THREE, TWO, SPLIT), coverage=coverage)


def test_the_launch_plans_table_and_metrics():
    frame = report().plans_frame()
    assert list(frame.columns) == ["shape", "dtype", "distributions", "checks", "plan"]
    assert frame.to_dict("records") == [
        {"shape": "1x8x512x64", "dtype": "float16", "distributions": "normal, large", "checks": 2, "plan": TWO},
        {"shape": "2x8x2048x128", "dtype": "bfloat16", "distributions": "normal", "checks": 1, "plan": SPLIT},
        {"shape": "", "dtype": "", "distributions": "", "checks": 0, "plan": THREE}]
    keys = flatten.check_metrics(report())
    assert keys[metrics.LAUNCH_PLANS_DECLARED.key()] == 3 and keys[metrics.LAUNCH_PLANS_REACHED.key()] == 2
    assert keys[metrics.LAUNCH_PLANS_UNDECLARED.key()] == 0
    assert "launch plans: the checks reached 2 of the 3 declared" in report().summary_lines()[-1]
    without = CheckReport([check("1x8x512x64", "")])
    assert without.plans_frame().empty and metrics.LAUNCH_PLANS_DECLARED.key() not in flatten.check_metrics(without)


def test_the_recorder_logs_the_launch_plans_table(tmp_store):
    from stagelab.core.context import StageContext
    from stagelab.record.recorder import MlflowRecorder

    recorder = MlflowRecorder(StageContext.load("s18_three_turns", "params/acceptance.yaml"))
    recorder.record_checks(report())
    table = recorder.artifacts / f"{metrics.TABLE_LAUNCH_PLANS}.csv"
    assert table.is_file() and THREE in table.read_text()


# -- the rule ---------------------------------------------------------------------------------------
def judged(checks: CheckReport):
    return judge(StageResults(built=object(), checks=checks), gpu_available=True, has_parent=False, min_gain=0.0)


def test_a_missed_plan_on_an_every_plan_file_is_uncovered_and_named():
    outcome = judged(report())
    assert outcome.outcome == UNCOVERED and UNCOVERED in OUTCOMES
    assert f"1 declared plan(s) not reached: {THREE}" in outcome.reason and TWO not in outcome.reason


def test_a_plan_taken_but_not_declared_is_uncovered_too():
    checks = replace(report(), declared_plans=(TWO, SPLIT))
    checks.results.append(check("1x8x4099x64", THREE))
    checks.results.append(check("1x8x4099x64", "hd64 wgs=4"))
    outcome = judged(checks)
    assert outcome.outcome == UNCOVERED and "taken but not declared" in outcome.reason and THREE in outcome.reason


def test_every_plan_reached_passes_and_no_rule_no_verdict():
    covered = replace(report(), declared_plans=(TWO, SPLIT))
    assert judged(covered).outcome == "pass"
    assert judged(report(coverage="")).outcome == "pass"  # a file without the rule: plans are only recorded
    assert judged(replace(report(), declared_plans=())).outcome == UNCOVERED  # checks took plans none declared
    no_plans = CheckReport([check("1x8x512x64", "")], coverage=EVERY_PLAN)
    assert judged(no_plans).outcome == "pass"  # a stage without plans: nothing to cover


def test_incorrect_beats_uncovered_and_uncovered_beats_speed():
    assert judged(report(passed=False)).outcome == "incorrect"
    fast = Evidence(built=True, gates_passed=True, gpu_available=True, checks_passed=True, plan_gaps="x",
                    has_parent=True, speedup_vs_parent=2.0)
    assert decide(fast).outcome == UNCOVERED
    assert decide(replace(fast, stress_passed=False)).outcome == "incorrect"


# -- what a parameter file's problems plan, against a stand-in for the sdpa binding's exports --------
class StandInBinding:
    """The sdpa binding's launch-plan exports as issue 43's contract states them (the real ones are
    tests/test_coverage.py's): three plans, grouped-query problems rejected."""

    def __init__(self):
        self.calls = []

    def launch_plans(self):
        return [THREE, TWO, SPLIT]

    def launch_plan(self, batch, heads, kv_heads, seq_len, kv_seq_len, head_dim, dtype, causal, bshd, sms, l2_bytes):
        self.calls.append((batch, heads, kv_heads, seq_len, kv_seq_len, head_dim, dtype, causal, bshd, sms, l2_bytes))
        if kv_heads != heads:
            raise ValueError("grouped-query attention is not planned")
        return SPLIT if head_dim == 128 else (THREE if dtype == 1 else TWO)


PLANNED = """dtypes: [float16, bfloat16]
shapes:
  - {shape: [2, 6, 197, 64], layout: bshd, kv_seq_len: 300}
  - {shape: [1, 8, 512, 128], causal: true}
  - {shape: [2, 8, 333, 64], kv_heads: 2}
"""


def test_each_problem_is_planned_per_dtype_with_the_contracts_arguments(tmp_path):
    from stagelab.core.coverage import coverage_report
    from stagelab.core.registry import family_registry

    path = tmp_path / "planned.yaml"
    path.write_text(PLANNED)
    binding = StandInBinding()
    stage = family_registry("sdpa").get("s18_three_turns")
    report = coverage_report(SDPA, stage, binding, load_params(path), device_model(sms=78, l2_mib=60))
    assert binding.calls[:2] == [(2, 6, 6, 197, 300, 64, 0, False, True, 78, 60 * 2**20),
                                 (2, 6, 6, 197, 300, 64, 1, False, True, 78, 60 * 2**20)]
    assert [(row.problem, row.dtypes, row.plan) for row in report.rows] == [
        ("2x6x197x64_sk300_bshd", ("float16",), TWO), ("2x6x197x64_sk300_bshd", ("bfloat16",), THREE),
        ("1x8x512x128_causal", ("float16", "bfloat16"), SPLIT),
        ("2x8x333x64_kv2", ("float16", "bfloat16"), "")]
    assert report.rejected[0].rejected == "grouped-query attention is not planned"
    assert not report.gaps and not report.covered  # every plan taken, but a problem its supports let in is refused


def test_the_command_lists_the_plans_and_names_the_one_no_problem_takes(tmp_path, monkeypatch, capsys):
    from types import SimpleNamespace

    from stagelab.cli.main import main
    from stagelab.core import build

    path = tmp_path / "planned.yaml"
    path.write_text("dtypes: [float16]\nshapes: [{shape: [1, 8, 512, 64]}, {shape: [1, 4, 77, 128]}]\n")
    monkeypatch.setattr(build, "build_stage", lambda stage, registry: SimpleNamespace(module=StandInBinding()))
    assert main(["coverage", "s18_three_turns", "--params", str(path)]) == 1
    out = capsys.readouterr().out
    assert "planned for H100 SXM (132 SMs, 50 MiB L2)" in out
    assert f"| 1x8x512x64 | float16  | {TWO}" in out and f"| 1x4x77x128 | float16  | {SPLIT}" in out
    assert "declared plans: 3, taken by a problem of the file: 2" in out
    assert f"declared plans no problem takes (1):\n  {THREE}\n" in out
