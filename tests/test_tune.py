"""`stagelab tune` without nvcc or a GPU: builds, gates, checks and timings are faked at the
tune's seams, the MLflow store is a real SQLite one. The slow test at the end builds for real."""

import shutil
from pathlib import Path

import mlflow
import pytest

from stagelab.core import metrics as m
from stagelab.core import build as build_module
from stagelab.record import tracking
from stagelab.tune import search as tune_module
from stagelab.tune.store import elite_run_tag, elite_tag
from stagelab.core.build import BuildResult
from stagelab.measure.checks import CheckResult
from stagelab.core.errors import BuildError
from stagelab.core.resources import GateResult
from stagelab.measure.results import CheckReport, ResourceReport, TimingReport
from stagelab.measure.timing import TimingStats

ROOT = Path(__file__).resolve().parents[1]
STAGE = "sm0_block_three_pass"
SPACE = "BLOCK_THREADS: [128, 256, 512, 1024]"
PARAMS = "params/softmax-smoke.yaml"
# What the fakes make of each BLOCK_THREADS value.
BUILD_FAILS, GATE_FAILS, INCORRECT = "40", "1024", "512"
FAKE_P50_US = {"32": 6.0, "64": 5.0, "128": 3.0, "256": 4.0, INCORRECT: 1.0}


@pytest.fixture
def root(tmp_path, monkeypatch, tmp_store):
    """A project root holding a copy of the softmax family and its smoke parameters."""
    project = tmp_path / "project"
    shutil.copytree(ROOT / "kernels" / "softmax", project / "kernels" / "softmax")
    (project / "params").mkdir()
    shutil.copy(ROOT / PARAMS, project / PARAMS)
    (project / "pyproject.toml").write_text("")
    monkeypatch.setenv("STAGELAB_ROOT", str(project))
    monkeypatch.setenv("STAGELAB_BUILD_DIR", str(tmp_path / "build"))
    return project


def set_space(root: Path, values: str) -> None:
    registry = root / "kernels" / "softmax" / "stages.yaml"
    registry.write_text(registry.read_text().replace(SPACE, f"BLOCK_THREADS: [{values}]"))


def threads(stage) -> str:
    return stage.defines["BLOCK_THREADS"]


@pytest.fixture
def builds(monkeypatch, tmp_path):
    """Fake builds (a static_assert for BUILD_FAILS) and gates (GATE_FAILS spills); returns the
    compiled configurations, one entry per compile."""
    compiled = []

    def fake_build(stage, registry, *, load=True):
        if not load:
            compiled.append(threads(stage))
        if threads(stage) == BUILD_FAILS:
            raise BuildError("nvcc failed on sm0_block_three_pass.cu (exit 1)", "error: static_assert failed")
        return BuildResult(stage.id, "k" + threads(stage), "hash", tmp_path, "ptxas log", [], cached=load, seconds=0.1)

    def fake_gates(ctx, built):
        spills = 8 if threads(ctx.stage) == GATE_FAILS else 0
        return ResourceReport([], [GateResult("no_spills", "kernel", 0, spills, spills == 0)])

    monkeypatch.setattr(tune_module, "build_stage", fake_build)   # the gates' loads
    monkeypatch.setattr(build_module, "build_stage", fake_build)  # the compiles (build.build_all)
    monkeypatch.setattr(BuildResult, "sass_opcodes", lambda self: {})
    monkeypatch.setattr(tune_module, "resource_step", fake_gates)
    return compiled


def children(parent_run_id: str) -> dict[str, object]:
    runs = mlflow.search_runs(search_all_experiments=True,
                              filter_string=f"tags.`{m.TAG_PARENT_RUN}` = '{parent_run_id}'")
    return {row[f"tags.{m.TAG_TUNE_CONFIG}"]: row for _, row in runs.iterrows()}


def outcomes(result) -> dict[str, str]:
    return {t.label: t.outcome.outcome for t in result.trials}


def test_without_a_gpu_every_configuration_is_built_gated_and_recorded(root, builds):
    set_space(root, f"{BUILD_FAILS}, 128, 256, {GATE_FAILS}")
    result = tune_module.tune(STAGE, PARAMS)
    assert outcomes(result) == {"BLOCK_THREADS=40": "build_failed", "BLOCK_THREADS=128": "no_gpu",
                                "BLOCK_THREADS=256": "no_gpu", "BLOCK_THREADS=1024": "resource_fail"}
    assert sorted(builds) == sorted([BUILD_FAILS, "128", "256", GATE_FAILS]) and not result.elites
    runs = children(result.parent_run_id)
    assert {label: row[f"tags.{m.TAG_OUTCOME}"] for label, row in runs.items()} == outcomes(result)
    assert runs["BLOCK_THREADS=128"]["params.knob.BLOCK_THREADS"] == "128"
    assert runs["BLOCK_THREADS=128"]["params.timing_order"] == "round_robin"  # how its samples were taken
    parent = tracking.client().get_run(result.parent_run_id)
    assert parent.data.tags[m.TAG_OUTCOME] == "no_gpu" and parent.info.status == "FINISHED"
    assert parent.data.metrics[m.TUNE_CONFIGS.key("no_gpu")] == 2
    assert parent.data.params["space.BLOCK_THREADS"] == f"{BUILD_FAILS},128,256,{GATE_FAILS}"


def test_a_second_tune_resumes_and_a_changed_source_starts_again(root, builds):
    first = tune_module.tune(STAGE, PARAMS)
    assert len(builds) == 4
    second = tune_module.tune(STAGE, PARAMS)
    assert len(builds) == 4, "nothing is rebuilt at the same source hash"
    assert second.parent_run_id == first.parent_run_id and all(t.reused for t in second.trials)
    assert outcomes(second) == outcomes(first) and len(children(first.parent_run_id)) == 4

    set_space(root, "128, 256, 512, 1024, 2048")  # a grown space measures only what is new
    grown = tune_module.tune(STAGE, PARAMS)
    assert builds[4:] == ["2048"] and grown.parent_run_id == first.parent_run_id

    source = root / "kernels" / "softmax" / f"{STAGE}.cu"
    source.write_text(source.read_text() + "\n// an edit changes the source hash\n")
    third = tune_module.tune(STAGE, PARAMS)
    assert sorted(builds[5:]) == ["1024", "128", "2048", "256", "512"]
    assert third.parent_run_id != first.parent_run_id and not any(t.reused for t in third.trials)
    assert len(children(third.parent_run_id)) == 5


@pytest.fixture
def fake_gpu(monkeypatch, builds):
    """A pretend GPU: checks fail for INCORRECT, timings come from FAKE_P50_US."""
    timed = []

    def fake_check(ctx, built):
        passed = threads(ctx.stage) != INCORRECT
        return CheckReport([CheckResult("3x77", False, "float16", 0, 0.1, 0.1, 0.0, 0.2, 0.5 if passed else 9.0,
                                        0, 0.0, passed, "ok" if passed else "error over budget")])

    def fake_time(ctx, builds_by_label, desc=None):
        timed.extend(builds_by_label)
        report = TimingReport([], ctx.stage.id, ctx.family.library_prefix, ctx.params.timing.primary_mode)
        for shape in ctx.params.timed_shapes():
            rows = [(label, FAKE_P50_US[label.split("=")[1]]) for label in builds_by_label]
            for label, p50 in rows + [(ctx.family.contender_label("torch"), 2.0)]:
                report.stats.append(TimingStats(label, shape.tag, False, report.primary_mode, 100,
                                                p50, p50, p50, 0.0, p50, 1.0, 1.0))
        return report

    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    for module in ("stagelab.tune.store", "stagelab.record.provenance"):
        monkeypatch.setattr(f"{module}.gpu_info", lambda: {"gpu": "Pretend GPU"})
    monkeypatch.setattr(tune_module, "check_step", fake_check)
    monkeypatch.setattr(tune_module, "time_builds", fake_time)
    return timed


def test_the_three_best_correct_configurations_are_the_elites(root, fake_gpu):
    set_space(root, f"32, {BUILD_FAILS}, 64, 128, 256, {INCORRECT}, {GATE_FAILS}")
    result = tune_module.tune(STAGE, PARAMS)
    assert sorted(fake_gpu) == ["BLOCK_THREADS=128", "BLOCK_THREADS=256", "BLOCK_THREADS=32", "BLOCK_THREADS=64"]
    assert outcomes(result)[f"BLOCK_THREADS={INCORRECT}"] == "incorrect"
    assert [t.label for t in result.elites] == ["BLOCK_THREADS=128", "BLOCK_THREADS=256", "BLOCK_THREADS=64"]
    assert tune_module.ELITE_COUNT == 3

    parent = tracking.client().get_run(result.parent_run_id)
    tags, runs = parent.data.tags, children(result.parent_run_id)
    for rank, (label, score) in enumerate([("BLOCK_THREADS=128", 3.0), ("BLOCK_THREADS=256", 4.0),
                                           ("BLOCK_THREADS=64", 5.0)], start=1):
        assert tags[elite_tag(rank)] == label
        assert tags[elite_run_tag(rank)] == runs[label]["run_id"]
        assert parent.data.metrics[m.ELITE_SCORE_US.key(str(rank))] == pytest.approx(score)
        assert runs[label][f"metrics.{m.TUNE_SCORE_US.key()}"] == pytest.approx(score)
    assert elite_tag(4) not in tags and tags[m.TAG_OUTCOME] == "pass"
    assert runs["BLOCK_THREADS=128"][f"metrics.{m.speedup_geomean('torch').key()}"] == pytest.approx(2.0 / 3.0)
    artifacts = {a.path for a in tracking.client().list_artifacts(result.parent_run_id, "results")}
    assert {"results/tune.csv", "results/search.png"} <= artifacts

    fewer = tune_module.tune(STAGE, PARAMS, elite_count=1)  # resumed: the elites are re-ranked, not re-measured
    assert [t.label for t in fewer.elites] == ["BLOCK_THREADS=128"] and len(fake_gpu) == 4
    tags = tracking.client().get_run(result.parent_run_id).data.tags
    assert elite_tag(1) in tags and elite_tag(2) not in tags and elite_run_tag(3) not in tags


def test_promotion_rewrites_only_the_stages_defines_line(tmp_path):
    from stagelab.tune.promote import promote_defaults
    from stagelab.core.registry import load_registry

    family = tmp_path / "sdpa"
    shutil.copytree(ROOT / "kernels" / "sdpa", family)
    registry_file = family / "stages.yaml"
    before = registry_file.read_text()
    diff = promote_defaults(registry_file, "s4_pipeline3", {"PIPELINE_STAGES": "2", "BLOCK_N": "32"})
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed == ["-      defines: {BLOCK_M: 64, NUM_WARPS: 4, BLOCK_N: 64, PIPELINE_STAGES: 3, Q_IN_REGISTERS: 1, "
                       "WARP_M_TILES: 1}",
                       "+      defines: {BLOCK_M: 64, NUM_WARPS: 4, BLOCK_N: 32, PIPELINE_STAGES: 2, Q_IN_REGISTERS: 1, "
                       "WARP_M_TILES: 1}"]
    registry = load_registry(registry_file)
    assert registry.get("s4_pipeline3").defines["BLOCK_N"] == "32"
    assert registry.get("s3b_register_softmax").defines["BLOCK_N"] == "64"  # its neighbour is untouched
    assert len(registry_file.read_text().splitlines()) == len(before.splitlines())
    assert promote_defaults(registry_file, "s4_pipeline3", {"BLOCK_N": "32"}) == ""


@pytest.mark.slow
def test_real_builds_without_a_gpu_stop_before_timing(root, nvcc_available, capsys):
    """nvcc for real: a static_assert rejects BLOCK_THREADS=40 as build_failed, the rest are no_gpu,
    and a second tune builds nothing."""
    from stagelab.cli import main

    set_space(root, f"{BUILD_FAILS}, 128, 256")
    assert main(["tune", STAGE, "--params", PARAMS, "--jobs", "2"]) == 0
    out = capsys.readouterr().out
    assert "timing needs a GPU: 3 configurations" in out
    first = tune_module.tune(STAGE, PARAMS, jobs=2)
    assert outcomes(first) == {"BLOCK_THREADS=40": "build_failed", "BLOCK_THREADS=128": "no_gpu",
                               "BLOCK_THREADS=256": "no_gpu"}
    assert all(t.reused for t in first.trials)
    failed = children(first.parent_run_id)["BLOCK_THREADS=40"]
    log = tracking.client().download_artifacts(failed["run_id"], "build.log")
    assert "BLOCK_THREADS must be whole warps" in Path(log).read_text()


def test_promotion_as_a_named_variant_adds_then_replaces_one_line(tmp_path):
    from stagelab.tune.promote import promote_variant
    from stagelab.core.registry import load_registry

    family = tmp_path / "sdpa"
    shutil.copytree(ROOT / "kernels" / "sdpa", family)
    registry_file = family / "stages.yaml"
    lines = len(registry_file.read_text().splitlines())
    promote_variant(registry_file, "s3b_register_softmax", "h100", {"BLOCK_N": "32", "Q_IN_REGISTERS": "0"})
    promote_variant(registry_file, "s3b_register_softmax", "h200", {"BLOCK_N": "128"})
    diff = promote_variant(registry_file, "s3b_register_softmax", "h100", {"BLOCK_N": "128"})
    assert "-      h100: {BLOCK_N: 32, Q_IN_REGISTERS: 0}" in diff and "+      h100: {BLOCK_N: 128}" in diff
    registry = load_registry(registry_file)
    assert registry.get("s3b_register_softmax").variants == {"h100": {"BLOCK_N": "128"}, "h200": {"BLOCK_N": "128"}}
    assert registry.get("s3b_register_softmax").variant("h100").defines["BLOCK_N"] == "128"
    untouched = load_registry(ROOT / "kernels" / "sdpa" / "stages.yaml").get("s4_pipeline3").variants
    assert registry.get("s4_pipeline3").variants == untouched  # the neighbour's own variants stay as they were
    assert len(registry_file.read_text().splitlines()) == lines + 3


def test_a_stage_run_context_takes_a_variant_by_name(root):
    from stagelab.measure.steps import StageContext

    registry = root / "kernels" / "softmax" / "stages.yaml"
    registry.write_text(registry.read_text().replace(
        f"    search_space:\n      {SPACE}\n", f"    search_space:\n      {SPACE}\n    variants: {{wide: {{BLOCK_THREADS: 512}}}}\n"))
    assert StageContext.load(STAGE, PARAMS, "wide").stage.defines["BLOCK_THREADS"] == "512"
    assert StageContext.load(STAGE, PARAMS, {"BLOCK_THREADS": 64}).stage.defines["BLOCK_THREADS"] == "64"


def test_a_tune_run_imported_from_the_gpu_machine_is_promoted_by_its_printed_id(root, fake_gpu, tmp_path, monkeypatch):
    """Tuning happens on a GPU machine; its store comes back with `stagelab import` and the best
    configuration is promoted in the checkout, found by the id the GPU machine printed."""
    from stagelab import cli
    from stagelab.core.registry import load_registry

    set_space(root, "32, 64, 128, 256")
    remote = tune_module.tune(STAGE, PARAMS)  # the GPU machine's store: tmp_store
    here = f"sqlite:///{tmp_path / 'here.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", here)
    mlflow.set_tracking_uri(here)
    assert cli.main(["import", str(tmp_path / "mlflow.db")]) == 0
    assert cli.main(["tune", STAGE, "--from-run", remote.parent_run_id]) == 2  # neither --promote nor --promote-as
    assert cli.main(["tune", STAGE, "--from-run", "no-such-run", "--promote-as", "fast"]) == 2

    assert cli.main(["tune", STAGE, "--from-run", remote.parent_run_id, "--promote-as", "fast"]) == 0
    registry = load_registry(root / "kernels" / "softmax" / "stages.yaml")
    assert registry.get(STAGE).variants["fast"] == {"BLOCK_THREADS": "128"}
    experiment = tracking.client().get_experiment_by_name(remote.trials[0].ctx.family.tune_experiment)
    local = tracking.client().search_runs([experiment.experiment_id],
                                          filter_string=f"tags.`{m.TAG_TUNE_ROLE}` = '{m.TUNE_ROLE_PARENT}'")
    assert [r.data.tags[m.TAG_PROMOTED] for r in local] == ["variant fast: BLOCK_THREADS=128"]


def test_a_configuration_label_reads_back_as_its_defines():
    from stagelab.core.errors import ConfigError
    from stagelab.core.space import config_label, parse_label

    defines = {"BLOCK_N": "128", "PIPELINE_STAGES": "2", "Q_IN_REGISTERS": "0"}
    assert parse_label(config_label(defines)) == defines
    for bad in ("", "BLOCK_N", "=3,BLOCK_N=1"):
        with pytest.raises(ConfigError, match="not a configuration label"):
            parse_label(bad)
