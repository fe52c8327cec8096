"""The rmsnorm family (the lab's example) on CPU: its reference, its checks catching planted bugs,
its parameter files and errors; its CUDA stage built and gated (slow), its Triton stage compiled
ahead of time for sm_90 without a GPU."""

import importlib.util
import os
import subprocess
import sys

import pytest
import torch

from stagelab.core.errors import ConfigError, InputError
from stagelab.core.params import load_params
from stagelab.core.paths import repo_root
from stagelab.families.rmsnorm import EPS, FAMILY, RmsNormProblem, rms_norm
from stagelab.measure.family_checks import check_all, check_shape

KERNELS = repo_root() / "kernels" / "rmsnorm"
Rows = FAMILY.problem  # Rows(rows, cols): the problem a {shape: [rows, cols]} entry names
PROBLEMS = [Rows(1, 1), Rows(3, 7), Rows(5, 1000), Rows(2, 4097)]


def fp32_one_rounding(x, weight, out):
    """What every stage computes: fp32 throughout, one rounding of the output."""
    xf = x.float()
    out.copy_(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * weight.float())


def squares_in_storage_dtype(x, weight, out):
    """The squares in fp16: they overflow for values above 256 (the `large` inputs)."""
    rstd = torch.rsqrt(x.pow(2).sum(-1, keepdim=True).float() / x.shape[-1] + EPS)
    out.copy_(x.float() * rstd * weight.float())


def no_eps(x, weight, out):
    xf = x.float()
    out.copy_(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True)) * weight.float())


def drops_pack_tail(x, weight, out):
    """A 16-byte (8-element) loop that forgets the last cols % 8 columns in the sum."""
    xf = x.float()
    whole = x.shape[-1] - x.shape[-1] % 8
    rstd = torch.rsqrt(xf[:, :whole].pow(2).sum(-1, keepdim=True) / x.shape[-1] + EPS)
    out.copy_(xf * rstd * weight.float())


def test_reference_is_the_plain_formula():
    x, weight = FAMILY.make_inputs(Rows(3, 77), torch.float16, 0, "cpu")
    xd, wd = x.double(), weight.double()
    formula = xd / (xd.pow(2).sum(-1, keepdim=True) / 77 + EPS).sqrt() * wd
    torch.testing.assert_close(rms_norm(x, weight, torch.float64), formula, rtol=1e-12, atol=0)
    torch.testing.assert_close(FAMILY.reference(Rows(3, 77), (x, weight), torch.float64),
                               torch.nn.functional.rms_norm(xd, (77,), wd, EPS), rtol=1e-12, atol=0)


def test_inputs_are_fresh_per_seed_and_distribution():
    a, wa = FAMILY.make_inputs(Rows(4, 64), torch.bfloat16, 0, "cpu")
    b, _ = FAMILY.make_inputs(Rows(4, 64), torch.bfloat16, 1, "cpu")
    large, _ = FAMILY.make_inputs(Rows(4, 64), torch.bfloat16, 0, "cpu", "large")
    assert not torch.equal(a, b) and (wa.float() - 1).abs().max() < 1
    assert large.float().abs().max() > 256  # squares past fp16's range


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fp32_kernel_passes_every_distribution(dtype):
    results = check_all(FAMILY, fp32_one_rounding, PROBLEMS, [dtype], [0, 1], "cpu",
                        distributions=FAMILY.distributions)
    assert all(r.passed for r in results), [r.describe() for r in results if not r.passed]


@pytest.mark.parametrize("bug, problem, distribution", [
    (squares_in_storage_dtype, Rows(5, 1000), "large"),
    (no_eps, Rows(5, 1000), "tiny"),
    (drops_pack_tail, Rows(3, 7), "normal"),
])
def test_planted_bugs_fail(bug, problem, distribution):
    assert not check_shape(FAMILY, bug, problem, "float16", 0, "cpu", distribution=distribution).passed


def test_problem_floor_counts_the_weight_once():
    """Tags, flops and bytes as published results and the page recorded them."""
    (parsed,) = FAMILY.parse_problem("shapes[0]", {"shape": [4096, 1024]})
    assert isinstance(parsed, RmsNormProblem) and parsed == Rows(4096, 1024) and parsed.tag == "4096x1024"
    assert Rows(2, 8).bytes_moved(2) == (2 * 2 + 1) * 8 * 2 and Rows(2, 8).flops() == 4 * 2 * 8
    assert Rows(1023, 4096).bytes_moved(2) == 16769024.0 and Rows(1023, 4096).flops() == 16760832.0


@pytest.mark.parametrize("name", ["rmsnorm-acceptance", "rmsnorm-long", "rmsnorm-try"])
def test_shipped_params_load(name):
    params = load_params(repo_root() / "params" / f"{name}.yaml")
    assert params.family.name == "rmsnorm" and params.timing.contenders == ("torch", "liger")


@pytest.mark.parametrize("body, message", [
    ("shapes: [{shape: [3]}]", "expected a list of 2 sizes"),
    ("shapes: [{shape: [3, 0]}]", r"shape\[1\]: expected a positive integer"),
    ("dtypes: [float32]\nshapes: [{shape: [3, 4]}]", "dtypes: 'float32' is not supported"),
    ("distributions: [peaky]\nshapes: [{shape: [3, 4]}]", "distributions: 'peaky' is not supported"),
])
def test_bad_params_are_named(tmp_path, body, message):
    path = tmp_path / "p.yaml"
    path.write_text(f"family: rmsnorm\n{body}\n")
    with pytest.raises(ConfigError, match=message):
        load_params(path)


@pytest.mark.parametrize("x, weight, out, message", [
    (torch.zeros(2, 3).half(), torch.ones(3).half(), torch.zeros(2, 3).half(), "input 0 is on cpu; a stage runs on a CUDA"),
    (torch.zeros(2, 3), torch.ones(3), torch.zeros(2, 3), r"x must be a \[rows, cols\] float16 or bfloat16.*float32"),
    (torch.zeros(2, 3, 1).half(), torch.ones(3).half(), None, r"x must be a \[rows, cols\].*\(2, 3, 1\)"),
    (torch.zeros(3, 2).half().t(), torch.ones(3).half(), None, r"last dim contiguous.*strides \(1, 2\)"),
    (torch.zeros(2, 3).half(), torch.ones(4).half(), None, r"weight must be a contiguous \[cols\] = \[3\]"),
    (torch.zeros(2, 3).half(), torch.ones(3, 2).half()[:, 0], None, r"weight must be a contiguous"),
    (torch.zeros(2, 3).half(), torch.ones(3).bfloat16(), None, "weight is a bfloat16 tensor.*x is a float16"),
])
def test_bad_inputs_are_named(x, weight, out, message):
    with pytest.raises(InputError, match=message):
        FAMILY.check_inputs(x, weight, out=out)


def test_contenders_say_why_they_cannot_run(monkeypatch):
    inputs = FAMILY.make_inputs(Rows(2, 8), torch.float16, 0, "cpu")
    monkeypatch.setitem(sys.modules, "liger_kernel", None)  # import fails as where it is not installed
    with pytest.raises(RuntimeError, match=r"'liger' is not installed here: Liger-Kernel \(pip install"):
        FAMILY.contender("liger", Rows(2, 8), inputs)
    with pytest.raises(RuntimeError, match="the rmsnorm family has no contender 'apex'"):
        FAMILY.contender("apex", Rows(2, 8), inputs)


@pytest.mark.slow
def test_cuda_stage_builds_meets_its_gates_and_loads_16_bytes(tmp_path, monkeypatch, nvcc_available):
    from stagelab.core.build import build_stage
    from stagelab.core.registry import family_registry
    from stagelab.measure.steps import resource_report

    monkeypatch.setenv("STAGELAB_BUILD_DIR", str(tmp_path))
    registry = family_registry("rmsnorm")
    result = build_stage(registry.get("rms0_block"), registry)
    report = resource_report(registry.get("rms0_block"), result, FAMILY.watched_opcodes)
    assert {r.tag for r in result.resources} == {f"rmsnorm_rms0_kernel.{t}.{p}.sm_90a" for t in ("fp16", "bf16")
                                                 for p in (1, 8)}
    assert report.gates and all(g.passed for g in report.gates), [g for g in report.gates if not g.passed]
    assert "LDG.E.128" in result.sass_listing() and "STG.E.128" in result.sass_listing()
    assert result.module.stage_config() == "rms0_block BLOCK_THREADS=256"


def _triton_stage():
    spec = importlib.util.spec_from_file_location("rms1_triton", KERNELS / "rms1_triton.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_triton_stage_compiles_for_sm90_without_spills_and_with_16_byte_loads(tmp_path):
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from stagelab.core.sass import cuobjdump

    stage = _triton_stage()
    specs = stage.compile_specs()
    assert sorted(s["name"] for s in specs) == ["bf16", "bf16_looped", "fp16", "fp16_looped"]
    for spec in specs:
        names = list(spec["signature"])
        attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in spec["divisible_by_16"]}
        compiled = triton.compile(ASTSource(spec["kernel"], spec["signature"], spec["constexprs"], attrs),
                                  target=GPUTarget("cuda", 90, 32), options={"num_warps": spec["num_warps"]})
        cubin = tmp_path / f"{spec['name']}.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        usage = subprocess.run([str(cuobjdump()), "-res-usage", str(cubin)], capture_output=True, text=True,
                               check=True).stdout
        assert "LOCAL:0" in usage and "STACK:0" in usage, usage  # no spills, no local arrays
        assert "ld.global.v4.b32" in compiled.asm["ptx"], spec["name"]


def test_triton_launcher_reads_its_knobs_at_call_time(monkeypatch):
    pytest.importorskip("triton")
    stage = _triton_stage()
    launches = []

    class Recorder:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: launches.append((grid, args, kwargs))

    monkeypatch.setattr(stage, "_rmsnorm_kernel", Recorder())
    x = torch.zeros(3, 5000, dtype=torch.float16)
    stage.forward(x, x[0], x, EPS)
    stage.KNOBS = {"BLOCK": 1024, "num_warps": 4}  # as the lab replaces them after import
    stage.forward(x, x[0], x, EPS)
    assert [(g, k["BLOCK"], k["ONE_PASS"], k["num_warps"]) for g, _, k in launches] == [
        ((3,), 8192, True, 8), ((3,), 1024, False, 4)]
    assert stage.stage_config() == "rms1_triton BLOCK=1024 num_warps=4"
    stage.KNOBS = {"BLOCK": 1000, "num_warps": 4}
    with pytest.raises(ValueError, match="BLOCK must be a power of two"):
        stage.forward(x, x[0], x, EPS)


# Run in a child: TRITON_INTERPRET must be set before triton is imported (tl.sum and the other
# @triton.jit helpers of triton.language are decorated then).
_INTERPRETED_CHECKS = f"""
import importlib.util
from stagelab.families.rmsnorm import EPS, FAMILY
from stagelab.measure.family_checks import check_all
Rows = FAMILY.problem
spec = importlib.util.spec_from_file_location("rms1_triton", {str(KERNELS / "rms1_triton.py")!r})
stage = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stage)
stage.KNOBS = {{"BLOCK": 64, "num_warps": 4}}  # rows wider than 64 take the looped path
problems = [Rows(1, 1), Rows(3, 7), Rows(5, 64), Rows(4, 100), Rows(2, 1000)]
results = check_all(FAMILY, lambda x, weight, out: stage.forward(x, weight, out, EPS), problems, ["float16"],
                    [0, 1], "cpu", distributions=FAMILY.distributions)
print(len(results), "checks;", [r.describe() for r in results if not r.passed] or "all passed")
"""


def test_triton_stage_is_correct_under_the_interpreter():
    """The Triton stage's arithmetic, masks and loop on CPU (Triton's interpreter), in one pass and
    looped. fp16 only: the interpreter truncates fp32 to bf16, where the GPU rounds to nearest."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", _INTERPRETED_CHECKS], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and "30 checks; all passed" in proc.stdout, proc.stdout + proc.stderr
