"""The triton build backend, for real and without a GPU: a Triton stage file compiled ahead of time
for sm_90a, its ptxas report and SASS read as a CUDA stage's are, judged by the same gates; knobs
from the defines; clear errors for a bad file or an unknown knob."""

import pytest
import python_stage_checks as checks

from stagelab.core.build import build_stage
from stagelab.core.build_triton import triton_build_key
from stagelab.core.registry import load_registry

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
    # Triton's own cache, per test: a kernel another test compiled first (the same source, another
    # folder) comes back from ~/.triton/cache, and with Triton 3.8 a replay of its PTX no longer built
    # that cached cubin byte for byte (2026-11-29); each test here judges a compile of its own.
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    return folder


def test_a_triton_stage_builds_without_a_gpu_and_meets_its_gates(family):
    registry = load_registry(family / "stages.yaml")
    stage = registry.get("t0_rows")
    built = build_stage(stage, registry)
    assert registry.binding is None and not built.cached and built.summary.startswith("built in")
    assert built.module.KNOBS == {"BLOCK": 512, "num_warps": 4} and built.module.stage_config() == "BLOCK=512, num_warps=4"
    assert [r.tag for r in built.resources] == ["_row_sum.fp16.sm_90a", "_row_sum.bf16.sm_90a"]
    assert [r.kernel for r in built.resources] == ["_row_sum<fp16>", "_row_sum<bf16>"]
    # the cross-warp reduction's scratch, which Triton sizes at launch (metadata.shared)
    assert all(record.dynamic_shared_memory_bytes > 0 for record in built.resources)
    checks.meets_its_gates_and_is_cached_again(stage, registry, built)


def test_the_registers_are_those_of_the_cubin_triton_runs(family):
    """The report comes from a ptxas run of our own; it must describe Triton's cubin, not another."""
    registry = load_registry(family / "stages.yaml")
    built = build_stage(registry.get("t0_rows"), registry, load=False)
    checks.registers_are_those_of_the_cubins(built, ("_row_sum.fp16.sm_90a.cubin", "_row_sum.bf16.sm_90a.cubin"))
    assert "ptxas_reproduces_cubin\": true" in (built.directory / "build.json").read_text()


def test_a_knob_override_is_a_build_of_its_own_beside_the_first(family):
    registry = load_registry(family / "stages.yaml")
    stage = registry.get("t0_rows")
    first = build_stage(stage, registry)
    other = build_stage(stage.with_defines({"BLOCK": 256, "num_warps": 8}), registry)
    assert other.key != first.key and other.module is not first.module
    assert other.module.KNOBS == {"BLOCK": 256, "num_warps": 8} and first.module.KNOBS["BLOCK"] == 512
    assert other.source_hash == first.source_hash
    checks.a_shared_file_is_part_of_the_source(family, stage, registry, first)


def test_an_unknown_knob_names_the_stage_and_the_known_knobs(family):
    checks.unknown_knob_names_the_stage_and_the_known_knobs(family, "t0_rows", "BLOCK_N", ["BLOCK", "num_warps"])


def test_a_syntax_error_is_a_build_error_naming_the_file(family):
    checks.syntax_error_is_a_build_error_naming_the_file(family, "t0_rows", STAGE_FILE, triton_build_key)


@pytest.mark.parametrize("old, new, message", [
    ("name=t)", 'name="same")', "compile_specs()[0] and [1] are both _row_sum<same> for sm_90a"),
    ("def stage_config():", "def config():", "t0_rows.py defines no stage_config"),
    ('"cols": "i32"', '"columns": "i32"', "'signature' names ['columns'], not arguments of _row_sum"),
    ("num_warps=KNOBS", "warps=KNOBS", "unknown key(s) ['warps']"),
], ids=["one name for two instances", "no stage_config", "a stray argument", "an unknown spec key"])
def test_a_bad_stage_file_is_a_build_error_that_says_why(family, old, new, message):
    checks.bad_file_is_a_build_error_that_says_why(family, "t0_rows", STAGE_FILE, old, new, message)


def test_a_triton_stage_builds_in_a_worker_process(family):
    checks.builds_in_a_worker_process(family, "t0_rows", "BLOCK", 128)
