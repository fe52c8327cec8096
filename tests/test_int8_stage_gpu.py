"""Every INT8 stage (stages.yaml `inputs: int8`) on a GPU: small odd problems (causal and not, grouped-
query attention, Sq != Sk, bshd views, head_dim 64 and 128, fp16 and bf16, the named distributions)
judged by the INT8 budget against the recipe's float64 emulation, on NaN-poisoned outputs; the
wrapper, the family's timed launch and V^T on the device agree with it. Skipped without CUDA, or
while no stage declares `inputs: int8`."""

from pathlib import Path

import pytest
import torch

from stagelab.core.build import build_stage
from stagelab.core.registry import load_registry
from stagelab.families.sdpa import FAMILY, INT8_INPUTS, Shape, default_scale
from stagelab.families.sdpa.distributions import DISTRIBUTIONS, OUTLIER
from stagelab.families.sdpa.int8 import DEFAULT_RECIPE, check_int8_shape, quantize_int8_qkv
from stagelab.families.sdpa.int8.kernel import vt_operand
from stagelab.measure.checks import poisoned_launch

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[1]
REGISTRY = load_registry(ROOT / "kernels" / "sdpa" / "stages.yaml")
INT8_STAGES = [stage.id for stage in REGISTRY.stages.values() if stage.input_kind == INT8_INPUTS]
# Partial Q blocks (64 rows) and K tiles (128 keys), several of each; the mask bottom-right.
SHAPES = [
    Shape(1, 2, 77, 64, False),
    Shape(1, 2, 77, 64, True),
    Shape(2, 4, 45, 128, True, kv_heads=2, kv_seq_len=133),
    Shape(1, 4, 130, 128, False, kv_heads=1, kv_seq_len=45, layout="bshd"),
    Shape(1, 3, 200, 64, True, kv_heads=1, kv_seq_len=333, layout="bshd"),
    Shape(1, 2, 333, 128, True, layout="bshd"),
]
# Grouped-query attention in bshd views with two K/V heads, so K and V are strided too.
BSHD_GQA = Shape(1, 4, 150, 128, True, kv_heads=2, kv_seq_len=270, layout="bshd")


@pytest.fixture(scope="module", params=INT8_STAGES or [None], ids=INT8_STAGES or ["no-int8-stage"])
def kernel(request):
    if request.param is None:
        pytest.skip("no stage in kernels/sdpa/stages.yaml declares inputs: int8")
    stage = REGISTRY.get(request.param)
    return FAMILY.stage_kernel(build_stage(stage, REGISTRY).module, stage.id, stage.input_kind)


def judged(kernel, shape, dtype, distribution, seed=0):
    result = check_int8_shape(kernel.into, shape, dtype, seed, "cuda", distribution=distribution)
    assert result.passed, result.describe()
    return result


@pytest.mark.parametrize("distribution", ["normal", OUTLIER])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=[s.tag for s in SHAPES])
def test_small_problems_meet_the_int8_budget(kernel, shape, dtype, distribution):
    judged(kernel, shape, dtype, distribution)


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_every_named_distribution_meets_the_int8_budget(kernel, distribution):
    judged(kernel, BSHD_GQA, "float16", distribution)


def inputs_of(shape, dtype=torch.float16, distribution="normal"):
    return FAMILY.make_inputs(shape, dtype, 1, "cuda", distribution)


@pytest.mark.parametrize("shape", [SHAPES[2], BSHD_GQA], ids=[SHAPES[2].tag, BSHD_GQA.tag])
def test_the_wrapper_and_the_timed_launch_write_what_into_writes(kernel, shape):
    """`kernel(int8)` (a bshd Q gets a bshd output) and the family's timed launch (quantized and V^T
    built outside it) give into's output bit for bit, every element written over the poison."""
    inputs = inputs_of(shape)
    int8 = quantize_int8_qkv(*inputs, **DEFAULT_RECIPE.quantizer_args())
    scale = default_scale(shape.head_dim)
    expected = poisoned_launch(torch.empty_like(inputs[0]), lambda out: kernel.into(int8, out, scale, shape.causal))
    assert torch.isfinite(expected).all()
    called = kernel(int8, causal=shape.causal)
    assert called.stride() == inputs[0].stride() and torch.equal(called, expected)
    out = torch.empty_like(inputs[0])
    launch = FAMILY.module_launch(kernel.module, shape, inputs, out, INT8_INPUTS)
    poisoned_launch(out, lambda _: launch())
    assert torch.equal(out, expected)


def test_vt_operand_on_the_device_matches_the_cpu():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    v8 = quantize_int8_qkv(*inputs_of(BSHD_GQA), **DEFAULT_RECIPE.quantizer_args()).v
    assert v8.is_cuda and not v8.is_contiguous()  # a bshd view
    assert torch.equal(vt_operand(v8).cpu().view(torch.uint8), vt_operand(v8.cpu()).view(torch.uint8))
