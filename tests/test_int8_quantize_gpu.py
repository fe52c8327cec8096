"""The INT8 stage's CUDA quantizer (kernels/sdpa/int8/quantize.cuh) on a GPU, against the torch
quantizer (quantize_int8_qkv, then vt_operand) on odd problems: key lengths 1, 45, 77, 129 and 1031,
Sq != Sk, grouped-query attention, bshd views, head_dim 64 and 128, fp16 and bf16, the named
distributions. Q's codes and descales must be the same bit for bit; K's and V's means (summed in
float64 here, in float32 by torch) within their rounding of the float64 mean, K's codes and
descales, V^T's bytes and V's descales exactly torch's formula on those means, K's within +-1 and
the means' difference of torch's own, V's dequantized within e4m3's rounding of V. Every output
element is written (poisoned buffers), the same inputs give the same bytes, and attention on the
CUDA-quantized operands passes the INT8 budget against the recipe's emulation of those same operands;
the `quantizing` timed launch gives that output, in a CUDA graph too.
Skipped without CUDA, or while no INT8 stage exports the quantizer."""

import textwrap
from pathlib import Path

import pytest
import torch

from stagelab.core.build import build_stage
from stagelab.families.sdpa import FAMILY, INT8_INPUTS, Shape, default_scale
from stagelab.families.sdpa.distributions import DISTRIBUTIONS, LARGE, NORMAL, OUTLIER, TINY, ZERO_HEAD
from stagelab.families.sdpa.fp8.quantize import e4m3_broadcast_bound
from stagelab.families.sdpa.int8 import DEFAULT_RECIPE, check_int8_shape, quantize_int8_qkv, quantize_v
from stagelab.families.sdpa.int8.blocks import per_token, quantize_int8_blocks
from stagelab.families.sdpa.int8.cuda_quantize import (allocate_operands, cuda_quantize, has_cuda_quantizer,
                                                       quantize_into)
from stagelab.families.sdpa.int8.kernel import int8_forward, validate_int8_inputs, validate_int8_output
from stagelab.families.sdpa.int8.operands import vt_operand
from stagelab.families.sdpa.kinds import QUANTIZING
from stagelab.measure.checks import poisoned_launch
from cpp_exceptions import crash_instead_of_raise, run_in_child
from test_int8_cuda_quantize import refused_as_the_torch_quantizer
from test_int8_stage_gpu import INT8_STAGES, REGISTRY

pytestmark = pytest.mark.gpu
# Partial Q blocks (64 rows) and K blocks (128 keys), one key, several blocks, every layout and grouping.
SHAPES = [
    Shape(1, 2, 45, 64, False),
    Shape(1, 2, 77, 128, False, kv_seq_len=1),
    Shape(1, 2, 1, 64, False, kv_seq_len=77),
    Shape(2, 4, 65, 64, False, kv_heads=2, kv_seq_len=129),
    Shape(1, 3, 50, 64, True, kv_heads=1, kv_seq_len=77, layout="bshd"),
    Shape(1, 4, 130, 128, True, kv_heads=2, kv_seq_len=1031, layout="bshd"),
]
QUANTIZER_DISTRIBUTIONS = [NORMAL, OUTLIER, LARGE, ZERO_HEAD, TINY]
BSHD_GQA = SHAPES[-1]


@pytest.fixture(scope="module", params=INT8_STAGES or [None], ids=INT8_STAGES or ["no-int8-stage"])
def module(request):
    if request.param is None:
        pytest.skip("no stage in kernels/sdpa/stages.yaml declares inputs: int8")
    built = build_stage(REGISTRY.get(request.param), REGISTRY).module
    if not has_cuda_quantizer(built):
        pytest.skip(f"{request.param} exports no INT8 quantizer")
    return built


def inputs_of(shape, dtype=torch.float16, distribution=NORMAL, seed=3):
    return FAMILY.make_inputs(shape, dtype, seed, "cuda", distribution)


def bits(t: torch.Tensor) -> torch.Tensor:
    """The bytes of a tensor as integers of its width, contiguous: equal bits, not equal values."""
    view = {1: torch.uint8, 4: torch.int32}[t.element_size()]
    return t.contiguous().view(view)


def assert_same_bits(mine: torch.Tensor, theirs: torch.Tensor, what: str) -> None:
    assert mine.shape == theirs.shape, what
    differ = bits(mine) != bits(theirs)
    if differ.any():
        raise AssertionError(f"{what}: {int(differ.sum())} of {differ.numel()} differ, the first at "
                             f"{differ.nonzero()[0].tolist()}")


def assert_mean_rounds_the_float64_mean(x: torch.Tensor, mean: torch.Tensor, what: str) -> None:
    """Within float32's half ulp of the float64 mean, and the float64 sums' own rounding (either
    side's): (n - 1) * 2^-53 * mean|x| each, bounded by n * 2^-51 * mean|x|."""
    x64 = x.double()
    exact = x64.mean(dim=2)
    bound = 2.0 ** -24 * exact.abs() + x.shape[2] * 2.0 ** -51 * x64.abs().mean(dim=2)
    excess = (mean.double() - exact).abs() - bound
    assert (excess <= 0).all(), f"{what} off the float64 mean by up to {excess.max().item()} past its bound"


def assert_k_near_torchs(k: torch.Tensor, mine, theirs) -> None:
    """Codes within +-1; a descale within (the largest difference of the two means of its head +
    float32 rounding of K - mean on either side) / 127 and float32 rounding of the descale."""
    code_gap = (mine.k.int() - theirs.k.int()).abs().max().item()
    assert code_gap <= 1, f"K's codes differ from the torch quantizer's by {code_gap}"
    delta = (mine.k_mean - theirs.k_mean).abs().amax(dim=-1, keepdim=True).double()  # [B, Hkv, 1]
    largest = k.double().abs().amax(dim=(2, 3))[..., None] + theirs.k_mean.double().abs().amax(dim=-1, keepdim=True)
    d_mine, d_theirs = mine.k_descale.double(), theirs.k_descale.double()
    bound = (delta + 2.0 ** -23 * largest) / 127 + 2.0 ** -23 * torch.maximum(d_mine, d_theirs)
    excess = (d_mine - d_theirs).abs() - bound
    assert (excess <= 0).all(), f"K's descales differ from torch's past their bound by {excess.max().item()}"


@pytest.mark.parametrize("distribution", QUANTIZER_DISTRIBUTIONS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=[s.tag for s in SHAPES])
def test_the_operands_are_the_torch_quantizers(module, shape, dtype, distribution):
    q, k, v = inputs_of(shape, dtype, distribution)
    mine, vt = cuda_quantize(module, q, k, v)
    theirs = quantize_int8_qkv(q, k, v, **DEFAULT_RECIPE.quantizer_args())
    for name in ("q", "q_descale"):
        assert_same_bits(getattr(mine, name), getattr(theirs, name), name)
    assert_mean_rounds_the_float64_mean(k, mine.k_mean, "k_mean")
    k8, k_descale = quantize_int8_blocks(k.float() - mine.k_mean[:, :, None, :], DEFAULT_RECIPE.k_block)
    assert_same_bits(mine.k, k8, "k (torch's formula on this k_mean)")
    assert_same_bits(mine.k_descale, k_descale, "k_descale (torch's formula on this k_mean)")
    assert_k_near_torchs(k, mine, theirs)
    assert mine.smooth_v and theirs.smooth_v
    assert_mean_rounds_the_float64_mean(v, mine.v_mean, "v_mean")
    centred = v.float() - mine.v_mean[:, :, None, :]
    v8, v_descale = quantize_v(centred, DEFAULT_RECIPE.v_scaling)
    assert_same_bits(mine.v, v8, "v (torch's formula on this v_mean)")
    assert_same_bits(mine.v_descale, v_descale, "v_descale (torch's formula on this v_mean)")
    assert_same_bits(vt, vt_operand(v8), "vt (torch's formula on this v_mean)")
    bound = e4m3_broadcast_bound(centred, mine.v_descale[:, :, None, :]) + v.double().abs() * 2.0 ** -23
    assert ((mine.dequantized()[2] - v.double()).abs() <= bound).all(), "V dequantized past e4m3's rounding"


@pytest.mark.parametrize("shape", [SHAPES[1], SHAPES[3], BSHD_GQA], ids=[SHAPES[1].tag, SHAPES[3].tag, BSHD_GQA.tag])
def test_every_output_is_written_and_the_bytes_repeat(module, shape):
    """Into buffers poisoned with 0xff (NaN in e4m3, -1 in int8, NaN in float32), twice: the same
    bytes as a fresh run, Vt's padding columns zeroed."""
    q, k, v = inputs_of(shape, torch.bfloat16, OUTLIER)
    fresh, fresh_vt = cuda_quantize(module, q, k, v)
    for _ in range(2):
        poisoned, vt = allocate_operands(q, k)
        for t in (poisoned.q, poisoned.k, poisoned.q_descale, poisoned.k_descale, poisoned.k_mean, vt,
                  poisoned.v_descale, poisoned.v_mean):
            t.view(torch.uint8).fill_(0xFF)
        quantize_into(module, q, k, v, poisoned, vt)
        for name in ("q", "k", "q_descale", "k_descale", "k_mean", "v_descale", "v_mean"):
            assert_same_bits(getattr(poisoned, name), getattr(fresh, name), name)
        assert_same_bits(vt, fresh_vt, "vt")


def test_inf_and_nan_are_refused_before_any_launch(module):
    q, k, v = inputs_of(BSHD_GQA)
    v[0, 1, 1000, 7] = float("inf")
    message = refused_as_the_torch_quantizer(lambda *qkv: cuda_quantize(module, *qkv), q, k, v)
    assert "v: batch 0, head 1 holds 1 inf or NaN" in message


def test_the_bindings_backstop_refuses_a_wrong_output(module):
    """Behind cuda_quantize's validation, the binding's own check names a wrong output. Run in a child
    process: where this machine's torch cannot raise a C++ exception from an extension at all
    (tests/cpp_exceptions.py), the child dies, and the test says so rather than failing the binding."""
    child = run_in_child(textwrap.dedent(f"""
        import faulthandler, importlib.util, sys
        faulthandler.enable()  # a crash names its Python line on stderr
        sys.path[:0] = {[str(Path(__file__).parent), str(Path(__file__).parents[1] / "lib")]!r}
        import torch
        from stagelab.families.sdpa.int8.cuda_quantize import allocate_operands
        from test_int8_quantize_gpu import inputs_of, SHAPES
        spec = importlib.util.spec_from_file_location({module.__name__!r}, {module.__file__!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        q, k, v = inputs_of(SHAPES[0])
        int8, vt = allocate_operands(q, k)
        print("module loaded, operands allocated", flush=True)
        try:
            module.int8_quantize(q, k, v, int8.q, int8.q_descale[..., :0], int8.k, int8.k_descale, int8.k_mean, vt,
                                 int8.v_descale, int8.v_mean, torch.cuda.current_stream().cuda_stream)
        except RuntimeError as error:
            print("raised:", error)
        """))
    if child.returncode != 0:
        why = crash_instead_of_raise()
        if why is not None:
            pytest.skip(f"{why} (the binding's call died with exit {child.returncode} the same way)")
    assert child.returncode == 0, f"exit {child.returncode}\nstdout: {child.stdout}\nstderr: {child.stderr[-3000:]}"
    assert "raised:" in child.stdout and "every output must be a contiguous tensor of its shape" in child.stdout


def cuda_quantized(module):
    """(quantizer, kernel) for check_int8_shape: the operands from the stage's quantizer, and the
    attention launched on them with the quantizer's own V^T."""
    made = {}

    def quantizer(q, k, v):
        int8, made["vt"] = cuda_quantize(module, q, k, v)
        return int8

    def kernel(int8, out, scale, causal):
        validate_int8_inputs(int8, causal=causal)
        validate_int8_output(int8, out)
        int8_forward(module, int8, made["vt"], out, scale, causal)
    return quantizer, kernel


def judged(module, shape, dtype, distribution):
    quantizer, kernel = cuda_quantized(module)
    result = check_int8_shape(kernel, shape, dtype, 0, "cuda", distribution=distribution, quantizer=quantizer)
    assert result.passed, result.describe()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=[s.tag for s in SHAPES])
def test_attention_on_the_cuda_operands_meets_the_int8_budget(module, shape, dtype):
    judged(module, shape, dtype, OUTLIER)


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_every_named_distribution_meets_the_int8_budget(module, distribution):
    judged(module, BSHD_GQA, "float16", distribution)


@pytest.mark.parametrize("shape", [SHAPES[3], BSHD_GQA], ids=[SHAPES[3].tag, BSHD_GQA.tag])
def test_the_quantizing_launch_writes_that_output_in_a_graph_too(module, shape):
    """The family's `quantizing` variant (quantizer then attention in one timed launch) gives the
    output of the attention on the CUDA-quantized operands bit for bit, launched and replayed from
    a CUDA graph (the timing's hot and throughput modes capture it)."""
    inputs = inputs_of(shape, torch.bfloat16)
    scale = default_scale(shape.head_dim)
    int8, vt = cuda_quantize(module, *inputs)
    expected = poisoned_launch(torch.empty_like(inputs[0]), lambda out: int8_forward(module, int8, vt, out, scale,
                                                                                     shape.causal))
    assert torch.isfinite(expected).all()
    out = torch.empty_like(inputs[0])
    launch = FAMILY.launch_variants(module, shape, inputs, out, INT8_INPUTS)[QUANTIZING]
    poisoned_launch(out, lambda _: launch())
    assert torch.equal(out, expected)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        launch()  # warm up on the capture's stream, as the timing's samplers do
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch()
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, expected)


def test_per_token_descales_index_the_blocks_the_kernel_reads(module):
    """q_descale and k_descale are laid out [B, H, blocks] as the attention kernel indexes them:
    dequantizing with them round-trips the inputs within half a step (blocks.py's guarantee)."""
    q, k, v = inputs_of(BSHD_GQA, torch.float16, OUTLIER)
    int8, _ = cuda_quantize(module, q, k, v)
    step = per_token(int8.q_descale.double(), DEFAULT_RECIPE.q_block, q.shape[2])[..., None]
    assert ((int8.q.double() * step - q.double()).abs() <= step * (0.5 + 1e-5)).all()
    step = per_token(int8.k_descale.double(), DEFAULT_RECIPE.k_block, k.shape[2])[..., None]
    smoothed = k.double() - int8.k_mean.double()[:, :, None, :]
    assert ((int8.k.double() * step - smoothed).abs() <= step * (0.5 + 1e-5)).all()
