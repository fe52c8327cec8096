"""A stage's knobs (core.knobs) and the defines and variants refused before any build: in a family
written for the test (its own stage source and header), for CUDA and Triton stages, and through the
real `stagelab try` command."""

import difflib
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stagelab.cli.new_family import write_family
from stagelab.core.errors import ConfigError
from stagelab.core.family_sources import FAMILY_PATH_ENV, SELECTED_FAMILY_ENV
from stagelab.core.knobs import check_defines, stage_knobs, macros_tested
from stagelab.core.registry import find_stage
from stagelab.core.trial_spec import TrialSpec
from stagelab.run.trial import load_session

ROOT = Path(__file__).resolve().parents[1]
HEADER = """#ifndef MYOP_COMMON_CUH
#define MYOP_COMMON_CUH
// #if COMMENTED_OUT is not a test the preprocessor makes
#if defined(USE_FAST_MATH) && \\
    (UNROLL > 1 || __CUDA_ARCH__ >= 900)
#define MYOP_FAST 1
#elif !defined(_MSC_VER)
#define MYOP_FAST 0
#endif
#ifdef TRACE_LOADS
#endif
#endif
"""


@pytest.fixture
def family(tmp_path, monkeypatch):
    """A CUDA family on STAGELAB_FAMILY_PATH whose stage includes a header with knobs of its own."""
    folder = tmp_path / "families"
    folder.mkdir()
    monkeypatch.setenv(FAMILY_PATH_ENV, str(folder))
    monkeypatch.delenv(SELECTED_FAMILY_ENV, raising=False)
    family_dir = write_family("myop", folder, "cuda")
    (family_dir / "myop_common.cuh").write_text(HEADER)
    stage = family_dir / "s0_naive.cu"
    stage.write_text('#include "myop_common.cuh"\n' + stage.read_text())
    return family_dir


def test_the_macros_a_source_tests_are_its_knobs_not_its_guard_reserved_names_or_comments():
    assert macros_tested(HEADER) == {"USE_FAST_MATH", "UNROLL", "TRACE_LOADS"}
    assert macros_tested("#pragma once\n#ifndef BLOCK\n#define BLOCK 128\n#endif\n#  elifdef WIDE\n") == {"BLOCK", "WIDE"}


def test_a_cuda_stage_has_its_sources_tests_and_its_registry_defines(family):
    registry, stage = find_stage("s0_naive", "myop")
    assert stage_knobs(stage, registry) == {"BLOCK_THREADS", "USE_FAST_MATH", "UNROLL", "TRACE_LOADS"}
    check_defines(stage, registry, {"UNROLL": "4", "BLOCK_THREADS": "128"}, "test")
    with pytest.raises(ConfigError, match=r"^test: NOPE, ZED are no knobs of stage s0_naive; its knobs: "
                                          r"BLOCK_THREADS, TRACE_LOADS, UNROLL, USE_FAST_MATH$"):
        check_defines(stage, registry, {"NOPE": "1", "ZED": "2", "UNROLL": "2"}, "test")


def test_a_triton_stage_has_the_keys_of_its_knobs_dict(tmp_path, monkeypatch):
    folder = tmp_path / "families"
    folder.mkdir()
    monkeypatch.setenv(FAMILY_PATH_ENV, str(folder))
    write_family("myop", folder, "triton")
    registry, stage = find_stage("s0_naive", "myop")
    assert stage_knobs(stage, registry) == {"BLOCK", "num_warps"}
    registry, stage = find_stage("rms1_triton", "rmsnorm")
    assert stage_knobs(stage, registry) == {"BLOCK", "num_warps"}


def test_an_unknown_define_or_variant_is_refused_when_the_trial_is_prepared(family):
    with pytest.raises(ConfigError, match="trial NOT_A_KNOB=1: NOT_A_KNOB is no knob of stage s0_naive"):
        load_session("s0_naive", [TrialSpec.of(defines={"NOT_A_KNOB": "1"})], params=family / "params/acceptance.yaml")
    with pytest.raises(ConfigError, match=r"has no variant 'wide'; its variants: none; its knobs \(--define "
                                          r"NAME=VALUE\): BLOCK_THREADS, TRACE_LOADS"):
        load_session("s0_naive", [TrialSpec.of(variant="wide")], params=family / "params/acceptance.yaml")
    session = load_session("s0_naive", [TrialSpec.of(defines={"TRACE_LOADS": "1"})], params=family / "params/acceptance.yaml")
    assert session.trials[0].stage.defines["TRACE_LOADS"] == "1"


def test_a_patch_may_add_the_knob_its_defines_turn_on(family, tmp_path):
    source = family / "s0_naive.cu"
    relative = f"myop/{source.name}"
    lines = source.read_text().splitlines(keepends=True)
    patch = tmp_path / "new_knob.diff"
    patch.write_text("".join(difflib.unified_diff(lines, ["#ifdef NEW_KNOB\n", "#endif\n", *lines],
                                                  fromfile=f"a/{relative}", tofile=f"b/{relative}")))
    session = load_session("s0_naive", [TrialSpec.of(patch=patch, defines={"NEW_KNOB": "1"})],
                           params=family / "params/acceptance.yaml")
    assert session.trials[0].stage.defines["NEW_KNOB"] == "1"
    session.cleanup()
    assert lines == source.read_text().splitlines(keepends=True)
    with pytest.raises(ConfigError, match="NEW_KNOB is no knob"):
        load_session("s0_naive", [TrialSpec.of(defines={"NEW_KNOB": "1"})], params=family / "params/acceptance.yaml")


@pytest.mark.parametrize("argv, culprit", [(["s0_baseline", "--define", "NOT_A_KNOB=1"], "NOT_A_KNOB is no knob"),
                                           (["rms1_triton", "--variant", "nope"], "has no variant 'nope'")])
def test_try_refuses_in_one_line_and_builds_nothing(tmp_path, argv, culprit):
    """The issue's command: before, it built for minutes and exited 0."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "lib"), "STAGELAB_ROOT": str(ROOT),
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}", "STAGELAB_BUILD_DIR": str(tmp_path / "build")}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "stagelab", "try", *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and time.monotonic() - started < 60, done.stderr
    error = [line for line in done.stderr.splitlines() if line.startswith("stagelab: error:")]
    assert len(error) == 1 and culprit in error[0] and "its knobs" in error[0], done.stderr
    assert not (tmp_path / "build").exists() and not (tmp_path / "mlflow.db").exists()


def test_a_header_the_stage_does_not_include_adds_no_knob(family):
    """Knobs come from what nvcc reads for this stage: its source and the family headers it includes
    (transitively), not every header in the folder (another stage's tunables)."""
    (family / "myop_other.cuh").write_text("#pragma once\n#ifndef OTHER_STAGES_TILE\n#error set it\n#endif\n")
    registry, stage = find_stage("s0_naive", "myop")
    assert "OTHER_STAGES_TILE" not in stage_knobs(stage, registry)
    (family / "myop_common.cuh").write_text(HEADER.replace("#endif\n", '#include "myop_other.cuh"\n#endif\n', 1))
    assert "OTHER_STAGES_TILE" in stage_knobs(stage, registry)


def test_build_refuses_a_define_that_is_no_knob_in_one_line_and_builds_nothing(tmp_path):
    """`stagelab build --define` (the protocol-checking builds, compiled side by side: SDPA_PROTOCOL=1)
    checks its overrides as `try` does."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "lib"), "STAGELAB_ROOT": str(ROOT),
           "STAGELAB_BUILD_DIR": str(tmp_path / "build")}
    done = subprocess.run([sys.executable, "-m", "stagelab", "build", "s6_tma_warpspec", "--define", "NOT_A_KNOB=1"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    error = [line for line in done.stderr.splitlines() if line.startswith("stagelab: error:")]
    assert done.returncode == 2 and len(error) == 1, done.stderr
    assert "NOT_A_KNOB is no knob of stage s6_tma_warpspec" in error[0] and "SDPA_PROTOCOL" in error[0]
    assert not (tmp_path / "build").exists()
