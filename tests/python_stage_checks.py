"""What every build backend whose stage is a Python file (triton, cute) must do with its stage file,
checked on a family folder holding one such stage: the shared loader (core.python_stage) and build
(core.python_build) as each backend reaches them. test_build_triton and test_build_cute call these
on a stage of their own language."""

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from stagelab.core.build import build_all, build_stage, source_hash
from stagelab.core.errors import BuildError, ConfigError
from stagelab.core.registry import load_registry
from stagelab.core.sass import cuobjdump
from stagelab.measure.steps import resource_report


def _stage(family: Path, stage_id: str):
    registry = load_registry(family / "stages.yaml")
    return registry, registry.get(stage_id)


def unknown_knob_names_the_stage_and_the_known_knobs(family: Path, stage_id: str, knob: str, known: list[str]):
    registry, stage = _stage(family, stage_id)
    with pytest.raises(ConfigError) as err:
        build_stage(stage.with_defines({knob: 64}), registry)
    assert f"stage {stage_id}" in str(err.value) and f"['{knob}']" in str(err.value)
    assert f"{stage_id}.py" in str(err.value) and str(known) in str(err.value)


def syntax_error_is_a_build_error_naming_the_file(family: Path, stage_id: str, text: str, build_key):
    """A broken file is a BuildError naming it, with the traceback; once fixed it loads afresh."""
    source = family / f"{stage_id}.py"
    source.write_text(text + "\ndef broken(:\n")
    registry, stage = _stage(family, stage_id)
    with pytest.raises(BuildError) as err:
        build_stage(stage, registry)
    assert str(source) in err.value.reason and "SyntaxError" in err.value.reason
    assert "def broken(:" in err.value.log
    assert f"{stage_id}_{build_key(stage, registry)}" not in sys.modules


def bad_file_is_a_build_error_that_says_why(family: Path, stage_id: str, text: str, old: str, new: str,
                                            message: str) -> BuildError:
    assert old in text
    (family / f"{stage_id}.py").write_text(text.replace(old, new))
    registry, stage = _stage(family, stage_id)
    with pytest.raises(BuildError) as err:
        build_stage(stage, registry)
    assert message in err.value.reason
    return err.value


def builds_in_a_worker_process(family: Path, stage_id: str, knob: str, value: int):
    """`stagelab build`, `try` and `tune` build in spawned workers, then load from the cache."""
    registry, stage = _stage(family, stage_id)
    stage = stage.with_defines({knob: value})
    [(index, outcome)] = list(build_all([(stage, registry)], jobs=2))
    assert index == 0 and not isinstance(outcome, BuildError) and outcome.module is None
    loaded = build_stage(stage, registry)
    assert loaded.cached and loaded.key == outcome.key and loaded.module.KNOBS[knob] == value


def meets_its_gates_and_is_cached_again(stage, registry, built):
    """Registers, no spills, global loads and stores: the gates pass, tighter ones fail, and the
    same stage built again comes from the cache."""
    opcodes = built.sass_opcodes()
    for record in built.resources:
        assert record.registers > 0 and record.spills == 0
        assert opcodes[(record.mangled, record.arch)]["LDG"] > 0 and opcodes[(record.mangled, record.arch)]["STG"] > 0
    report = resource_report(stage, built, ())
    assert report.passed and {g.gate for g in report.gates} >= {"max_registers", "no_spills", "sass_requires_LDG",
                                                                 "sass_forbids_LDL"}
    tight = resource_report(replace(stage, gates=replace(stage.gates, max_registers=8, sass_require=("HGMMA",))),
                            built, ())
    assert {g.gate for g in tight.gates if not g.passed} == {"max_registers", "sass_requires_HGMMA"}
    again = build_stage(stage, registry)
    assert again.cached and again.key == built.key and again.resources == built.resources
    assert again.summary.startswith("cached")


def registers_are_those_of_the_cubins(built, cubins: tuple[str, ...]):
    """The report comes from a ptxas run of our own; it must describe the DSL's cubins, not others."""
    for record, cubin in zip(built.resources, cubins, strict=True):
        usage = subprocess.run([str(cuobjdump()), "-res-usage", str(built.directory / cubin)], capture_output=True,
                               text=True, check=True).stdout
        assert f"REG:{record.registers} " in usage


def a_shared_file_is_part_of_the_source(family: Path, stage, registry, built):
    assert source_hash(stage, registry) == built.source_hash
    (family / "shared.py").write_text("SCALE = 2\n")  # a file the stage may import
    assert source_hash(stage, registry) != built.source_hash
