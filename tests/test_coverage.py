"""`stagelab coverage`: real builds, planned on the host without a GPU; and, on a GPU, the plan each
checked launch took against the host's plan for the same problem on the same device.

The s18 tests need the sdpa binding's launch-plan exports (issue 43, build item 4: `launch_plans`,
`launch_plan`, `last_launch_plan`); they compile every stage's binding and s18 with nvcc, so they run
in the kernels sweep (`make test-kernels`)."""

import shutil
from pathlib import Path

import pytest

from stagelab.cli.main import main
from stagelab.core.build import build_stage
from stagelab.core.family_sources import FAMILY_PATH_ENV, SELECTED_FAMILY_ENV
from stagelab.core.launch_plans import H100_SXM
from stagelab.core.registry import family_registry
from stagelab.families.sdpa import FAMILY as SDPA, Shape

ROOT = Path(__file__).resolve().parents[1]
S18 = "s18_three_turns"
THREE_WARPGROUPS = "wgs=3"


def coverage(capsys, *args) -> tuple[int, str, str]:
    code = main(["coverage", *args])
    out, err = capsys.readouterr()
    return code, out, err


# -- errors, before any build -----------------------------------------------------------------
def test_an_unknown_stage_is_named(capsys):
    code, _, err = coverage(capsys, "s99_nothing", "--params", "params/acceptance.yaml")
    assert code == 2 and "unknown stage 's99_nothing'" in err


def test_a_missing_parameter_file_is_named(capsys, tmp_path):
    code, _, err = coverage(capsys, S18, "--params", str(tmp_path / "nope.yaml"))
    assert code == 2 and f"parameter file not found: {tmp_path / 'nope.yaml'}" in err


@pytest.mark.slow
def test_a_failed_build_is_named(capsys, tmp_path, monkeypatch, nvcc_available):
    """A family outside the repo whose CUDA stage does not compile."""
    folder = tmp_path / "families"
    shutil.copytree(ROOT / "examples" / "families" / "silu", folder / "silu")
    source = folder / "silu" / "s0_naive.cu"
    source.write_text(source.read_text() + "\nthis is not C++;\n")
    monkeypatch.setenv(FAMILY_PATH_ENV, str(folder))
    monkeypatch.delenv(SELECTED_FAMILY_ENV, raising=False)
    monkeypatch.setenv("STAGELAB_BUILD_DIR", str(tmp_path / "build"))
    code, _, err = coverage(capsys, "s0_naive", "--family", "silu")
    assert code == 2 and "s0_naive did not build, so its launch plans cannot be read" in err
    assert "this is not C++" in err  # the compiler's log comes with it


# -- a stage without plans ----------------------------------------------------------------------
@pytest.mark.slow
def test_a_stage_without_plans_says_so(capsys, nvcc_available):
    code, out, _ = coverage(capsys, "rms0_block", "--family", "rmsnorm")
    assert code == 0 and "rms0_block declares no launch plans" in out


# -- s18: the sdpa binding's plans -----------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.kernels
def test_acceptance_takes_every_plan_of_s18_three_warpgroups_included(capsys, nvcc_available):
    code, out, _ = coverage(capsys, S18, "--params", "params/acceptance.yaml")
    assert code == 0, out
    table = [line for line in out.splitlines() if line.startswith("|")]
    assert any(THREE_WARPGROUPS in line for line in table), out
    assert "every declared plan is taken by a problem of the file" in out


# Every stage that compiles the persistent dispatch (sdpa_persistent_plans.cuh), or the INT8 stage's
# (int8/plans.cuh), declares its plans.
PLAN_HEADERS = ('#include "sdpa_persistent_split.cuh"', '#include "int8/plans.cuh"')
PLANNED_STAGES = sorted(path.stem for path in (ROOT / "kernels" / "sdpa").glob("s*.cu")
                        if any(header in path.read_text() for header in PLAN_HEADERS))


def test_the_persistent_stages_are_found():
    assert {"s8_persistent_split", "s12_one_wave", "s14_kv_multicast", S18, "s19_int8"} <= set(PLANNED_STAGES)


@pytest.mark.slow
@pytest.mark.kernels
@pytest.mark.parametrize("stage", [s for s in PLANNED_STAGES if s != S18])
def test_acceptance_takes_every_plan_of_each_persistent_stage(capsys, nvcc_available, stage):
    code, out, _ = coverage(capsys, stage, "--params", "params/acceptance.yaml")
    assert code == 0, out
    assert "every declared plan is taken by a problem of the file" in out


@pytest.mark.slow
@pytest.mark.kernels
def test_a_file_missing_a_declared_plan_fails_naming_it(capsys, tmp_path, nvcc_available):
    registry = family_registry("sdpa")
    module = build_stage(registry.get(S18), registry).module
    problem = Shape(1, 8, 512, 64, False)
    taken = SDPA.launch_plan_of(module, problem, "float16", H100_SXM)
    missed = [plan for plan in SDPA.declared_launch_plans(module) if plan != taken]
    assert taken and missed  # s18 declares more plans than one problem can take
    params = tmp_path / "one.yaml"
    params.write_text("dtypes: [float16]\nshapes: [{shape: [1, 8, 512, 64], causal: false}]\n")
    code, out, _ = coverage(capsys, S18, "--params", str(params))
    assert code == 1
    assert f"declared plans no problem takes ({len(missed)}):" in out
    assert all(f"  {plan}\n" in out for plan in missed) and taken in out


@pytest.mark.slow
@pytest.mark.gpu
def test_each_checked_launch_takes_the_host_plan_for_its_device(tmp_path):
    """What `stagelab coverage` computes on the host is what the check step's launches record."""
    import torch

    from stagelab.core.context import StageContext
    from stagelab.core.launch_plans import DeviceModel
    from stagelab.measure.steps import build_step, check_step

    params = tmp_path / "plans.yaml"
    params.write_text("distributions: [normal]\nshapes:\n  - {shape: [1, 8, 512, 64], causal: [false, true]}\n"
                      "  - {shape: [1, 7, 4099, 64], causal: false}\n  - {shape: [2, 5, 3001, 128], causal: true}\n")
    ctx = StageContext.load(S18, params)
    built = build_step(ctx, with_parent=False)
    report = check_step(ctx, built)
    props = torch.cuda.get_device_properties(0)
    device = DeviceModel(props.name, props.multi_processor_count, props.L2_cache_size)
    by_tag = {shape.tag: shape for shape in ctx.params.shapes}
    assert report.results and all(r.passed for r in report.results)
    for result in report.results:
        host = SDPA.launch_plan_of(built.stage.module, by_tag[result.shape], result.dtype, device)
        assert result.plan and result.plan == host, (result.shape, result.dtype)
