"""Issue 46 on a GPU (skipped without CUDA): the protocol step on params/acceptance.yaml's problems
(small and ragged, and together reaching every launch plan) of every warp-specialized stage, and of
each planted protocol bug's stage (tests/fixtures/planted/protocol/). Without a plant every launch is
clean and every plan the checking build declares is taken; each plant is caught, the report naming
its rule and ring. Every checking build compiles first, side by side (core.build.build_all), into
the repository's build folder (the plants' scratch checkouts share it: their builds key apart)."""

import os

import pytest
import torch
from planted_sdpa import PROTOCOL_PLANTS, make_sdpa_plant_checkout

from stagelab.core.build import build_all, build_stage
from stagelab.core.context import StageContext
from stagelab.core.errors import BuildError
from stagelab.core.launch_plans import PlanGaps
from stagelab.core.paths import build_dir, repo_root
from stagelab.core.registry import load_registry
from stagelab.measure.protocol import PROTOCOL_KNOB, has_protocol_checks, protocol_step

pytestmark = pytest.mark.gpu
ACCEPTANCE = "params/acceptance.yaml"
CHECKING = {PROTOCOL_KNOB: "1"}
REGISTRY = load_registry(repo_root() / "kernels" / "sdpa" / "stages.yaml")
CHECKED_STAGES = [stage_id for stage_id, stage in REGISTRY.stages.items() if has_protocol_checks(stage, REGISTRY)]


@pytest.fixture(scope="module")
def plant_roots(tmp_path_factory):
    """Each plant's scratch checkout, by plant name; every checking build compiled (in parallel)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    scratch = tmp_path_factory.mktemp("protocol")
    roots = {name: make_sdpa_plant_checkout(scratch / name, name) for name in PROTOCOL_PLANTS}
    builds = [(stage.with_defines(CHECKING), REGISTRY) for stage in map(REGISTRY.get, CHECKED_STAGES)]
    for name, plant in PROTOCOL_PLANTS.items():
        registry = load_registry(roots[name] / "kernels" / "sdpa" / "stages.yaml")
        builds.append((registry.get(plant.stage).with_defines(CHECKING), registry))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STAGELAB_BUILD_DIR", str(build_dir()))  # read by the spawned builders too
        failed = [f"{builds[index][0].id}: {outcome}" for index, outcome in build_all(builds, os.cpu_count() or 1)
                  if isinstance(outcome, BuildError)]
        assert not failed, "checking builds failed: " + "; ".join(failed)
        yield roots


def protocol_report(monkeypatch, root, stage_id):
    monkeypatch.setenv("STAGELAB_ROOT", str(root))
    ctx = StageContext.load(stage_id, root / ACCEPTANCE)
    return ctx, protocol_step(ctx)


@pytest.mark.parametrize("stage_id", CHECKED_STAGES)
def test_every_stage_keeps_the_protocol_on_every_launch_plan(stage_id, plant_roots, monkeypatch):
    ctx, report = protocol_report(monkeypatch, repo_root(), stage_id)
    if report.why_not_run:  # s9's FP8 copy has no hooks: the step says so and skips, it does not pass
        assert "exports no protocol report" in report.why_not_run, report.why_not_run
        return
    assert report.passed is True, report.failures()
    print(f"PROTOCOL {stage_id}: {len(report.launches)} launches clean, {report.seconds} s")
    module = build_stage(ctx.stage.with_defines(CHECKING), ctx.registry).module
    gaps = PlanGaps.of(ctx.family.declared_launch_plans(module), [launch.plan for launch in report.launches])
    assert not gaps.unreached, f"plans the protocol step never took: {gaps.unreached}"


@pytest.mark.parametrize("name", sorted(PROTOCOL_PLANTS))
def test_each_planted_protocol_bug_is_caught_with_its_rule_named(name, plant_roots, monkeypatch):
    plant = PROTOCOL_PLANTS[name]
    _, report = protocol_report(monkeypatch, plant_roots[name], plant.stage)
    print(f"PROTOCOL plant {name}: {report.failures() or report.status}")
    assert report.passed is False, f"{name} ({plant.what}) passed the protocol step"
    assert report.failures().startswith(f"{plant.stage}: {plant.expected}"), report.failures()
