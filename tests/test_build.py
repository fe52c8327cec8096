"""Builds: cached by content, and a compile error carries the whole compiler log."""

import shutil
from pathlib import Path

import pytest

from stagelab.core.build import build_stage
from stagelab.core.errors import BuildError
from stagelab.core.registry import load_registry

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture
def family(tmp_path, monkeypatch):
    """A copy of kernels/sdpa with its own build folder."""
    directory = tmp_path / "sdpa"
    shutil.copytree(ROOT / "kernels" / "sdpa", directory)
    monkeypatch.setenv("STAGELAB_BUILD_DIR", str(tmp_path / "build"))
    return directory


def test_compile_error_carries_the_log(family, nvcc_available):
    source = family / "s0_baseline.cu"
    text = source.read_text().rstrip("\n") + "\nthis is not C++;\n"
    source.write_text(text)
    bad_line = text.count("\n")
    registry = load_registry(family / "stages.yaml")
    with pytest.raises(BuildError) as err:
        build_stage(registry.get("s0_baseline"), registry, load=False)
    assert "nvcc failed on s0_baseline.cu" in str(err.value)
    # nvcc's own diagnostic, pointing at the planted line, is in the log
    assert f"s0_baseline.cu({bad_line}): error" in err.value.log
    assert "-gencode=arch=compute_90a,code=sm_90a" in err.value.log  # the command is in the log too


def test_unchanged_stage_is_not_rebuilt_and_a_change_is(family, nvcc_available):
    registry = load_registry(family / "stages.yaml")
    stage = registry.get("s0_baseline")
    first = build_stage(stage, registry)
    second = build_stage(stage, registry)
    assert not first.cached and second.cached and second.key == first.key
    assert second.seconds < first.seconds / 5
    assert first.module.stage_config() and first.resources
    assert all(r.dynamic_shared_memory_bytes > 0 for r in first.resources)
    knob = build_stage(stage.with_defines({"BLOCK_N": 32}), registry, load=False)
    assert not knob.cached and knob.key != first.key


def test_a_failed_build_comes_back_from_a_worker_process(family, nvcc_available):
    """`stagelab build`, `stagelab tune` and quick_check build in spawned workers: the compile error
    must arrive whole (it once could not be unpickled, so `stagelab build` crashed on a bad stage)."""
    from stagelab.core.build import build_all

    source = family / "s0_baseline.cu"
    source.write_text(source.read_text() + "\nthis is not C++;\n")
    registry = load_registry(family / "stages.yaml")
    [(index, outcome)] = list(build_all([(registry.get("s0_baseline"), registry)], jobs=2))
    assert index == 0 and isinstance(outcome, BuildError)
    assert outcome.reason.startswith("nvcc failed on s0_baseline.cu") and "this is not C++" in outcome.log
