"""The cute build backend, for real and without a GPU: a CuTe DSL stage file compiled ahead of time
for sm_90a, its ptxas report and SASS read as a CUDA stage's are, judged by the same gates; knobs
from the defines; clear errors for a bad file, an unknown knob or a missing CuTe DSL. Each test
that compiles is skipped, with the reason, where cutlass.cute does not import."""

from dataclasses import replace
from importlib.metadata import PackageNotFoundError
from pathlib import Path

import pytest
import python_stage_checks as checks

from stagelab.core import cute_compile
from stagelab.core.build import build_stage, source_hash
from stagelab.core.build_cute import cute_build_key
from stagelab.core.errors import BuildError
from stagelab.core.ptxas_replay import NOT_REPRODUCED
from stagelab.core.registry import load_registry
from stagelab.measure.steps import resource_report

pytestmark = pytest.mark.slow  # each test builds kernels
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "families" / "silu"

# SiLU, one element per thread, fp32 math: fp16 and bf16 instances of the one kernel.
STAGE_FILE = '''
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

KNOBS = {"THREADS": 256}


@cute.kernel
def _silu_kernel(mX: cute.Tensor, mO: cute.Tensor, threads: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * threads + tidx
    if i < cute.size(mX):
        v = mX[i].to(cutlass.Float32)
        mO[i] = (v / (1.0 + cute.math.exp(-v, fastmath=True))).to(mO.element_type)


@cute.jit
def silu(mX: cute.Tensor, mO: cute.Tensor, stream, threads: cutlass.Constexpr):
    _silu_kernel(mX, mO, threads).launch(grid=[(cute.size(mX) + threads - 1) // threads, 1, 1],
                                         block=[threads, 1, 1], stream=stream)


def _args(dtype):
    n = cute.sym_int()
    return [make_fake_compact_tensor(dtype, (n,), assumed_align=16), make_fake_compact_tensor(dtype, (n,), assumed_align=16),
            make_fake_stream(), KNOBS["THREADS"]]


def compile_specs():
    return [dict(function=silu, args=_args(t), name=name) for name, t in (("fp16", cutlass.Float16), ("bf16", cutlass.BFloat16))]


def stage_config():
    return f"THREADS={KNOBS['THREADS']}"
'''

REGISTRY = """family: silu_cute
defaults:
  backend: cute
  gates: {max_registers: 255, spills_allowed: false, sass_require: [LDG, STG], sass_forbid: [LDL, STL]}
stages:
  - id: c0_silu
    compile_options:
      defines: {THREADS: 128}
"""


@pytest.fixture
def build_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("STAGELAB_BUILD_DIR", str(tmp_path / "build"))
    return tmp_path / "build"


@pytest.fixture
def family(tmp_path, build_folder):
    """A family folder outside the repo holding one CuTe DSL stage and no binding."""
    pytest.importorskip("cutlass.cute", reason="CuTe DSL is not installed (pip install 'stagelab[cute]')")
    folder = tmp_path / "silu_cute"
    folder.mkdir()
    (folder / "stages.yaml").write_text(REGISTRY)
    (folder / "c0_silu.py").write_text(STAGE_FILE)
    return folder


def test_a_cute_stage_builds_without_a_gpu_and_meets_its_gates(family):
    registry = load_registry(family / "stages.yaml")
    stage = registry.get("c0_silu")
    built = build_stage(stage, registry)
    assert registry.binding is None and not built.cached
    assert built.module.KNOBS == {"THREADS": 128} and built.module.stage_config() == "THREADS=128"
    assert [r.kernel.rsplit("<", 1)[1] for r in built.resources] == ["fp16>", "bf16>"]
    assert all(r.kernel.startswith("kernel_cutlass__silu_kernel_") and r.arch == "sm_90a" for r in built.resources)
    checks.meets_its_gates_and_is_cached_again(stage, registry, built)


def test_the_registers_are_those_of_the_cubin_cute_dsl_runs(family):
    """The report comes from a ptxas run of our own; it must describe CuTe's cubin, not another."""
    registry = load_registry(family / "stages.yaml")
    built = build_stage(registry.get("c0_silu"), registry, load=False)
    checks.registers_are_those_of_the_cubins(built, ("silu.fp16.sm_90a.cubin", "silu.bf16.sm_90a.cubin"))
    reproduced = '"ptxas_reproduces_cubin": true' in (built.directory / "build.json").read_text()
    assert reproduced == (NOT_REPRODUCED.format(dsl="CuTe DSL") not in built.ptxas_log)


def test_a_knob_override_is_a_build_of_its_own_that_reaches_the_kernel(family):
    registry = load_registry(family / "stages.yaml")
    stage = registry.get("c0_silu")
    first = build_stage(stage, registry)
    other = build_stage(stage.with_defines({"THREADS": 512}), registry)
    assert other.key != first.key and other.module is not first.module
    assert other.module.KNOBS == {"THREADS": 512} and first.module.KNOBS["THREADS"] == 128
    assert ".reqntid 512, 1, 1" in (other.directory / "silu.fp16.sm_90a.ptx").read_text()
    assert ".reqntid 128, 1, 1" in (first.directory / "silu.fp16.sm_90a.ptx").read_text()
    assert other.source_hash == first.source_hash
    checks.a_shared_file_is_part_of_the_source(family, stage, registry, first)


def test_each_architecture_is_an_instance_of_its_own(family):
    registry = load_registry(family / "stages.yaml")
    built = build_stage(replace(registry.get("c0_silu"), arch=("sm_90a", "sm_100a")), registry, load=False)
    assert [(r.kernel.rsplit("<", 1)[1], r.arch) for r in built.resources] == [
        ("fp16>", "sm_90a"), ("bf16>", "sm_90a"), ("fp16>", "sm_100a"), ("bf16>", "sm_100a")]


def test_an_unknown_knob_names_the_stage_and_the_known_knobs(family):
    checks.unknown_knob_names_the_stage_and_the_known_knobs(family, "c0_silu", "BLOCK", ["THREADS"])


def test_a_syntax_error_is_a_build_error_naming_the_file(family):
    checks.syntax_error_is_a_build_error_naming_the_file(family, "c0_silu", STAGE_FILE, cute_build_key)


@pytest.mark.parametrize("old, new, message", [
    ('("bf16", cutlass.BFloat16)', '("fp16", cutlass.Float16)', "compile_specs()[0] and [1] are both kernel_cutlass__"),
    ("def stage_config():", "def config():", "c0_silu.py defines no stage_config"),
    ("dict(function=silu,", "dict(function=_silu_kernel,", "compile_specs()[0]: 'function' is not a @cute.jit"),
    ("args=_args(t),", "args=_args(t), options='--dump-dir /tmp',", "'options' must be a string of cute.compile"),
    ("args=_args(t),", "arguments=_args(t),", "unknown key(s) ['arguments'], missing ['args']"),
    ("mO[i] = (v /", "mO[i, 0] = (v /", "CuTe DSL could not compile compile_specs()[0] (fp16)"),
], ids=["one name for two instances", "no stage_config", "a kernel, not a jit function", "an option the lab sets",
        "an unknown spec key", "a kernel that does not compile"])
def test_a_bad_stage_file_is_a_build_error_that_says_why(family, old, new, message):
    error = checks.bad_file_is_a_build_error_that_says_why(family, "c0_silu", STAGE_FILE, old, new, message)
    assert "\x1b[" not in error.log  # CuTe colours its messages; the log keeps the words


def test_a_cute_stage_builds_in_a_worker_process(family):
    checks.builds_in_a_worker_process(family, "c0_silu", "THREADS", 64)


def test_the_example_family_s_cute_stage_meets_its_gates(build_folder):
    pytest.importorskip("cutlass.cute", reason="CuTe DSL is not installed (pip install 'stagelab[cute]')")
    registry = load_registry(EXAMPLE / "stages.yaml")
    stage = registry.get("s2_cute")
    built = build_stage(stage, registry)
    report = resource_report(stage, built, ())
    assert report.passed and {"sass_requires_LDG.E.128", "sass_requires_STG.E.128"} <= {g.gate for g in report.gates}
    assert [r.kernel.rsplit("<", 1)[1] for r in built.resources] == ["fp16>", "bf16>"]
    # what its launcher refuses before any GPU work: nothing at a compiled function's call checks a
    # tensor against the signature it was compiled for (docs/ARCHITECTURE.md, the cute backend)
    import torch

    halves = torch.zeros(2, 65, dtype=torch.float16)
    with pytest.raises(ValueError, match="16-byte aligned"):
        built.module.forward(halves[:, 1:], torch.zeros(2, 64, dtype=torch.float16), 0)
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        built.module.forward(halves.float(), halves.float(), 0)


def test_without_cute_dsl_a_cute_stage_is_a_build_error_and_its_siblings_build(build_folder, monkeypatch):
    """No CuTe DSL: the example family still loads and builds its Triton stage; only building the
    cute stage fails, saying what to install."""
    pytest.importorskip("triton")
    real_version = cute_compile.version

    def without_cutlass(name):
        if name.startswith("nvidia-cutlass-dsl"):
            raise PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(cute_compile, "version", without_cutlass)
    registry = load_registry(EXAMPLE / "stages.yaml")
    assert registry.get("s2_cute").backend == "cute" and source_hash(registry.get("s2_cute"), registry)
    assert build_stage(registry.get("s1_triton"), registry, load=False).resources
    with pytest.raises(BuildError) as err:
        build_stage(registry.get("s2_cute"), registry)
    assert "nvidia-cutlass-dsl" in err.value.reason and "not installed" in err.value.reason
    assert "pip install 'stagelab[cute]'" in err.value.log
