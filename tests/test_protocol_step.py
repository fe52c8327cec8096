"""The protocol step's CPU side (stagelab.measure.protocol, issue 46): where it runs and where it is
skipped, its launches and reads (a stand-in family and module, no GPU), its verdict as the judge sees
it, and its record. tests/test_protocol_gpu.py runs it on a GPU, on s6 with and without a plant."""

from types import SimpleNamespace

import pandas as pd
import pytest

from stagelab.core import metrics
from stagelab.core.context import StageContext
from stagelab.core.params import OPTIONAL_STEPS, load_params
from stagelab.judge.judge import judge
from stagelab.judge.outcome import ORDERING, PROTOCOL
from stagelab.measure import protocol
from stagelab.measure.chain import ChainResult
from stagelab.measure.protocol import ProtocolLaunch, ProtocolReport, protocol_step, why_not_run
from stagelab.measure.results import CheckReport, StageResults
from stagelab.measure.stress import StressReport, StressRound

VIOLATION = "rule release_before_retire, ring K, slot 1, ring index 5, block 3, consumer warpgroup 0"
SMALL_PARAMS = """description: two small ragged problems
dtypes: [float16, bfloat16]
seeds: [3, 4]
shapes:
  - {shape: [1, 2, 77, 64], causal: [false, true]}
mission: {shape: [1, 2, 77, 64], causal: false}
timing: {dtype: float16}
steps: [protocol]
"""


def context(stage: str, params: str = "params/acceptance.yaml", gpu: bool = True) -> StageContext:
    ctx = StageContext.load(stage, params)
    ctx.gpu_available = gpu
    return ctx


# -- where it runs ----------------------------------------------------------------------------------
def test_acceptance_runs_the_step_and_every_parameter_file_may():
    assert "protocol" in OPTIONAL_STEPS
    assert "protocol" in load_params("params/acceptance.yaml").steps


def test_skipped_without_the_step_without_a_gpu_and_without_the_knob():
    assert why_not_run(context("s6_tma_warpspec", "params/smoke.yaml")) == "smoke has no `steps: [protocol]`"
    assert why_not_run(context("s6_tma_warpspec", gpu=False)) == "no CUDA device"
    assert why_not_run(context("s0_baseline")) == \
        "s0_baseline's sources do not test SDPA_PROTOCOL (no ring-protocol checks)"
    for stage in ("s6_tma_warpspec", "s18_three_turns"):
        assert why_not_run(context(stage)) == ""
    skipped = protocol_step(context("s0_baseline"))
    assert skipped.passed is None and skipped.status == "skipped" and skipped.metrics() == {}
    assert skipped.frame().empty and list(skipped.frame().columns) == ["problem", "dtype", "plan", "report"]


def test_a_comment_naming_the_knob_is_no_check():
    """sdpa_api.h, which every sdpa stage includes, names SDPA_PROTOCOL in a comment."""
    from stagelab.core.stress_spec import includes_knob

    ctx = context("s0_baseline")
    assert includes_knob(ctx.stage.source, ctx.registry.directory, protocol.PROTOCOL_KNOB)  # plain text: yes
    assert not protocol.has_protocol_checks(ctx.stage, ctx.registry)


# -- the launches, with a stand-in family and module (no GPU) ---------------------------------------
class ScriptedModule:
    """protocol_report's answers in order (an exception is raised); each launch sets the plan."""

    def __init__(self, answers):
        self.answers, self.plan, self.launched = list(answers), "", []

    def protocol_report(self):
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


class StandInFamily:
    """The sdpa family, but its launches only note the problem and dtype on the scripted module."""

    def __init__(self, family):
        self.family = family

    def __getattr__(self, name):
        return getattr(self.family, name)

    def module_launch(self, module, shape, inputs, out, input_kind=""):
        def launch():
            module.launched.append((shape.tag, str(inputs[0].dtype)))
            module.plan = f"plan of {shape.tag}"
        return launch

    def last_launch_plan(self, module):
        return module.plan


def scripted_step(tmp_path, monkeypatch, answers) -> tuple[ProtocolReport, ScriptedModule]:
    params_file = tmp_path / "small.yaml"
    params_file.write_text(SMALL_PARAMS)
    real = context("s6_tma_warpspec", str(params_file))
    module = ScriptedModule(answers)
    built = []
    monkeypatch.setattr(protocol, "build_stage", lambda stage, registry: built.append(stage) or SimpleNamespace(module=module))
    monkeypatch.setattr(protocol, "synchronize", lambda *args, **kwargs: None)
    ctx = SimpleNamespace(stage=real.stage, registry=real.registry, params=real.params, gpu_available=True,
                          family=StandInFamily(real.family), device="cpu")
    report = protocol_step(ctx)
    assert built[0].defines["SDPA_PROTOCOL"] == "1"  # the checking build, not the stage's own
    return report, module


def test_each_problem_and_dtype_is_launched_once_and_its_record_read_after_it(tmp_path, monkeypatch):
    report, module = scripted_step(tmp_path, monkeypatch, ["stale", "", "", VIOLATION, ""])
    assert module.launched == [("1x2x77x64", "torch.float16"), ("1x2x77x64", "torch.bfloat16"),
                               ("1x2x77x64_causal", "torch.float16"), ("1x2x77x64_causal", "torch.bfloat16")]
    assert [(l.problem, l.dtype, l.plan, l.report) for l in report.launches] == [
        ("1x2x77x64", "float16", "plan of 1x2x77x64", ""), ("1x2x77x64", "bfloat16", "plan of 1x2x77x64", ""),
        ("1x2x77x64_causal", "float16", "plan of 1x2x77x64_causal", VIOLATION),
        ("1x2x77x64_causal", "bfloat16", "plan of 1x2x77x64_causal", "")]
    assert report.passed is False and report.status == "failed"
    assert report.failures() == (f"s6_tma_warpspec: {VIOLATION} (problem 1x2x77x64_causal float16, plan plan of "
                                 "1x2x77x64_causal); 1 of 4 launches violated the protocol")


def test_a_record_that_cannot_be_read_fails_the_step_naming_the_launch(tmp_path, monkeypatch):
    broken = RuntimeError("sdpa_protocol_report: the violation record could not be read (an illegal memory access)")
    report, _ = scripted_step(tmp_path, monkeypatch, ["", "", broken])
    assert len(report.launches) == 1 and report.passed is False
    assert report.failures() == ("s6_tma_warpspec: the violation record could not be read (at 1x2x77x64 bfloat16: "
                                 f"{broken})")


def test_a_checking_build_without_a_report_is_skipped_saying_why(tmp_path, monkeypatch):
    """A stage whose sources test the knob but whose kernels carry no hooks (s9's FP8 copy includes the
    shared headers) has nothing to check: the step does not run, and says so."""
    report, module = scripted_step(tmp_path, monkeypatch, [None])
    assert module.launched == [] and report.passed is None and report.status == "skipped"
    assert "exports no protocol report" in report.why_not_run and "no ring-protocol hooks" in report.why_not_run


def test_a_clean_run_passes(tmp_path, monkeypatch):
    report, _ = scripted_step(tmp_path, monkeypatch, [""] * 5)
    assert report.passed is True and report.status == "passed" and report.failures() == ""
    assert report.metrics() == {metrics.PROTOCOL_LAUNCHES.key(): 4, metrics.PROTOCOL_VIOLATIONS.key(): 0}


# -- the verdict ------------------------------------------------------------------------------------
def launch(report=""):
    return ProtocolLaunch("1x2x77x64", "float16", "hd64 wgs=2", report)


def judged(**steps):
    checks = CheckReport([], [ChainResult("1x2x77x64", "float16", 8, {})])
    return judge(StageResults(built=object(), checks=checks, **steps), gpu_available=True, has_parent=False,
                 min_gain=0.0)


def test_a_violation_makes_the_stage_incorrect_with_reason_protocol_naming_stage_and_rule():
    report = ProtocolReport("s18_three_turns", [launch(), launch(VIOLATION)])
    outcome = judged(protocol=report)
    assert outcome.outcome == "incorrect" and outcome.reason.startswith(f"{PROTOCOL}: s18_three_turns: {VIOLATION}")
    unread = ProtocolReport("s18_three_turns", [launch()], error="the violation record could not be read (x)")
    assert judged(protocol=unread).reason == f"{PROTOCOL}: s18_three_turns: the violation record could not be read (x)"


def test_a_clean_or_skipped_step_changes_nothing():
    assert judged() == judged(protocol=ProtocolReport("s6_tma_warpspec", [launch(), launch()]))
    assert judged() == judged(protocol=ProtocolReport.not_run("s0_baseline", "no CUDA device"))
    assert judged().outcome == "pass"


def test_the_rule_broken_is_named_before_the_stress_steps_symptom():
    stress = StressReport([StressRound("poison", 0, 4, 1, 1, 0, 1.0, "check 1x2x77x64: error")])
    assert judged(stress=stress).reason.startswith(ORDERING)
    both = judged(stress=stress, protocol=ProtocolReport("s6_tma_warpspec", [launch(VIOLATION)]))
    assert both.reason.startswith(f"{PROTOCOL}: s6_tma_warpspec: {VIOLATION}")


# -- the record -------------------------------------------------------------------------------------
def test_table_metrics_and_tag_reach_the_run_and_the_page(tmp_store, tmp_path):
    from stagelab.judge.outcome import Outcome
    from stagelab.record import tracking
    from stagelab.record.recorder import MlflowRecorder
    from stagelab.core.family import load_family
    from stagelab.record.report import write_report
    from stagelab.record.source_state import current_source_hashes

    recorder = MlflowRecorder(context("s6_tma_warpspec"))
    report = ProtocolReport("s6_tma_warpspec", [launch(), launch(VIOLATION)])
    recorder.record_protocol(report)
    # a run of the current source (no build here records it): the page's tables leave a stale failure out
    current = current_source_hashes(load_family("sdpa"))["s6_tma_warpspec"]
    tracking.set_tags(recorder.run_id, {metrics.TAG_GPU: "Test GPU", metrics.TAG_SOURCE_HASH: current})
    recorder.finish(Outcome("incorrect", f"{PROTOCOL}: {report.failures()}"), StageResults())
    table = pd.read_csv(recorder.artifacts / f"{metrics.TABLE_PROTOCOL}.csv", keep_default_na=False)
    assert list(table.columns) == ["problem", "dtype", "plan", "report"] and list(table["report"]) == ["", VIOLATION]
    run = tracking.client().get_run(recorder.run_id)
    assert run.data.tags[metrics.TAG_PROTOCOL] == "failed"
    assert run.data.metrics[metrics.PROTOCOL_LAUNCHES.key()] == 2
    assert run.data.metrics[metrics.PROTOCOL_VIOLATIONS.key()] == 1
    artifacts = {f.path for f in tracking.client().list_artifacts(recorder.run_id, "results")}
    assert f"results/{metrics.TABLE_PROTOCOL}.csv" in artifacts
    page = write_report(["acceptance"], out_dir=tmp_path / "page").read_text().splitlines()
    header = next(line for line in page if line.startswith("| stage "))
    row = next(line for line in page if line.startswith("| s6_tma_warpspec "))
    cells = dict(zip(*([cell.strip() for cell in line.strip("|").split("|")] for line in (header, row))))
    assert cells["protocol"] == "failed"  # beside the sanitizer's verdict (none here: dropped as empty)


@pytest.mark.parametrize("name", ["protocol_launches", "protocol_violations"])
def test_the_metrics_are_named_once(name):
    named = [m for m in vars(metrics).values() if isinstance(m, metrics.Metric) and m.name == name]
    assert len(named) == 1 and named[0].unit == "count"
