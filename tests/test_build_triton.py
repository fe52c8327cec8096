"""The triton build backend, for real and without a GPU: a Triton stage file compiled ahead of time
for sm_90a, its ptxas report and SASS read as a CUDA stage's are, judged by the same gates; knobs
from the defines; clear errors for a bad file or an unknown knob."""

import subprocess
import sys
from dataclasses import replace

import pytest

from stagelab.core.build import build_all, build_stage, source_hash
from stagelab.core.build_triton import triton_build_key
from stagelab.core.errors import BuildError, ConfigError
from stagelab.core.registry import load_registry
from stagelab.core.sass import cuobjdump
from stagelab.measure.steps import resource_report

pytest.importorskip("triton")
pytestmark = pytest.mark.slow  # each test builds kernels

# A row sum: a loop of masked loads, a cross-warp reduction (Triton's shared memory), one store per row;
# fp16 and bf16 instances of the one kernel.
STAGE_FILE = '''
import triton
import triton.language as tl

KNOBS = {"BLOCK": 1024, "num_warps": 4}


@triton.jit
def _row_sum(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


def compile_specs():
    return [dict(kernel=_row_sum, signature={"x_ptr": f"*{t}", "out_ptr": f"*{t}", "cols": "i32", "BLOCK": "constexpr"},
                 constexprs={"BLOCK": KNOBS["BLOCK"]}, num_warps=KNOBS["num_warps"], name=t) for t in ("fp16", "bf16")]


def stage_config():
    return f"BLOCK={KNOBS['BLOCK']}, num_warps={KNOBS['num_warps']}"


def forward(x, out, stream):
    _row_sum[(x.shape[0],)](x, out, x.shape[1], BLOCK=KNOBS["BLOCK"], num_warps=KNOBS["num_warps"])
'''

REGISTRY = """family: rowsum
defaults:
  backend: triton
  gates: {max_registers: 255, spills_allowed: false, sass_require: [LDG, STG], sass_forbid: [LDL, STL]}
stages:
  - id: t0_rows
    compile_options:
      defines: {BLOCK: 512}
"""


@pytest.fixture
def family(tmp_path, monkeypatch):
    """A family folder outside the repo holding one Triton stage and no binding, with its own build folder."""
    folder = tmp_path / "rowsum"
    folder.mkdir()
    (folder / "stages.yaml").write_text(REGISTRY)
    (folder / "t0_rows.py").write_text(STAGE_FILE)
    monkeypatch.setenv("STAGELAB_BUILD_DIR", str(tmp_path / "build"))
    return folder


def test_a_triton_stage_builds_without_a_gpu_and_meets_its_gates(family):
    registry = load_registry(family / "stages.yaml")
    stage = registry.get("t0_rows")
    built = build_stage(stage, registry)
    assert registry.binding is None and not built.cached
    assert built.module.KNOBS == {"BLOCK": 512, "num_warps": 4} and built.module.stage_config() == "BLOCK=512, num_warps=4"
    assert [r.tag for r in built.resources] == ["_row_sum.fp16.sm_90a", "_row_sum.bf16.sm_90a"]
    assert [r.kernel for r in built.resources] == ["_row_sum<fp16>", "_row_sum<bf16>"]
    opcodes = built.sass_opcodes()
    for record in built.resources:
        assert record.registers > 0 and record.spills == 0
        # the cross-warp reduction's scratch, which Triton sizes at launch (metadata.shared)
        assert record.dynamic_shared_memory_bytes > 0
        assert opcodes[(record.mangled, record.arch)]["LDG"] > 0 and opcodes[(record.mangled, record.arch)]["STG"] > 0
    report = resource_report(stage, built, ("LDG", "STG"))
    assert report.passed and {g.gate for g in report.gates} >= {"max_registers", "no_spills", "sass_requires_LDG",
                                                                 "sass_forbids_LDL"}
    tight_gates = replace(stage.gates, max_registers=8, sass_require=("HGMMA",))
    tight = resource_report(replace(stage, gates=tight_gates), built, ())
    assert {g.gate for g in tight.gates if not g.passed} == {"max_registers", "sass_requires_HGMMA"}
    again = build_stage(stage, registry)
    assert again.cached and again.key == built.key and again.resources == built.resources


def test_the_registers_are_those_of_the_cubin_triton_runs(family):
    """The report comes from a ptxas run of our own; it must describe Triton's cubin, not another."""
    registry = load_registry(family / "stages.yaml")
    built = build_stage(registry.get("t0_rows"), registry, load=False)
    for record, cubin in zip(built.resources, ("_row_sum.fp16.sm_90a.cubin", "_row_sum.bf16.sm_90a.cubin")):
        usage = subprocess.run([str(cuobjdump()), "-res-usage", str(built.directory / cubin)], capture_output=True,
                               text=True, check=True).stdout
        assert f"REG:{record.registers} " in usage
    assert "ptxas_reproduces_cubin\": true" in (built.directory / "build.json").read_text()


def test_a_knob_override_is_a_build_of_its_own_beside_the_first(family):
    registry = load_registry(family / "stages.yaml")
    stage = registry.get("t0_rows")
    first = build_stage(stage, registry)
    other = build_stage(stage.with_defines({"BLOCK": 256, "num_warps": 8}), registry)
    assert other.key != first.key and other.module is not first.module
    assert other.module.KNOBS == {"BLOCK": 256, "num_warps": 8} and first.module.KNOBS["BLOCK"] == 512
    assert source_hash(stage, registry) == first.source_hash == other.source_hash
    (family / "shared.py").write_text("SCALE = 2\n")  # a file the stage may import: part of its source
    assert source_hash(stage, registry) != first.source_hash


def test_an_unknown_knob_names_the_stage_and_the_known_knobs(family):
    registry = load_registry(family / "stages.yaml")
    with pytest.raises(ConfigError) as err:
        build_stage(registry.get("t0_rows").with_defines({"BLOCK_N": 64}), registry)
    assert "stage t0_rows" in str(err.value) and "['BLOCK_N']" in str(err.value)
    assert "t0_rows.py" in str(err.value) and "['BLOCK', 'num_warps']" in str(err.value)


def test_a_syntax_error_is_a_build_error_naming_the_file(family):
    source = family / "t0_rows.py"
    source.write_text(STAGE_FILE + "\ndef broken(:\n")
    registry = load_registry(family / "stages.yaml")
    stage = registry.get("t0_rows")
    with pytest.raises(BuildError) as err:
        build_stage(stage, registry)
    assert str(source) in err.value.reason and "SyntaxError" in err.value.reason
    assert "def broken(:" in err.value.log
    assert f"t0_rows_{triton_build_key(stage, registry)}" not in sys.modules  # a fixed file loads afresh


@pytest.mark.parametrize("old, new, message", [
    ("name=t)", 'name="same")', "compile_specs()[0] and [1] are both _row_sum<same> for sm_90a"),
    ("def stage_config():", "def config():", "t0_rows.py defines no stage_config"),
    ('"cols": "i32"', '"columns": "i32"', "'signature' names ['columns'], not arguments of _row_sum"),
    ("num_warps=KNOBS", "warps=KNOBS", "unknown key(s) ['warps']"),
], ids=["one name for two instances", "no stage_config", "a stray argument", "an unknown spec key"])
def test_a_bad_stage_file_is_a_build_error_that_says_why(family, old, new, message):
    assert old in STAGE_FILE
    (family / "t0_rows.py").write_text(STAGE_FILE.replace(old, new))
    registry = load_registry(family / "stages.yaml")
    with pytest.raises(BuildError) as err:
        build_stage(registry.get("t0_rows"), registry)
    assert message in err.value.reason


def test_a_triton_stage_builds_in_a_worker_process(family):
    """`stagelab build`, `try` and `tune` build in spawned workers, then load from the cache."""
    registry = load_registry(family / "stages.yaml")
    stage = registry.get("t0_rows")
    [(index, outcome)] = list(build_all([(stage.with_defines({"BLOCK": 128}), registry)], jobs=2))
    assert index == 0 and not isinstance(outcome, BuildError) and outcome.module is None
    loaded = build_stage(stage.with_defines({"BLOCK": 128}), registry)
    assert loaded.cached and loaded.key == outcome.key and loaded.module.KNOBS["BLOCK"] == 128
