"""tools/int8_pv_accumulation.py: its CPU model of s19's P.V sums (issue 44). The exact sum must be the
lab's own recipe emulation, else the budget it judges the modelled sums by is not the stage's; the
FP22 sums must be what tools/fp8_cpu_repro.py's tensor-core model gives."""

import pytest
import torch

from stagelab.families.sdpa.inputs import make_inputs
from stagelab.families.sdpa.int8.emulation import emulate_int8_attention
from stagelab.families.sdpa.int8.quantize import quantize_int8_qkv
from stagelab.families.sdpa.reference import default_scale
from stagelab.families.sdpa.shapes import Shape
from tool_module import load_tool

SHAPE = Shape(1, 1, 300, 64, causal=False)  # three key tiles, the last ragged


@pytest.fixture(scope="module")
def tool():
    return load_tool("int8_pv_accumulation")


@pytest.mark.parametrize("distribution", ["normal", "positive"])
def test_the_exact_sum_of_plain_v_is_the_recipes_emulation(tool, distribution):
    q, k, v = make_inputs(SHAPE, torch.float16, 0, "cpu", distribution)
    _, outs = tool.head_outputs(q, k, v, smooth_v=False)
    plain = quantize_int8_qkv(q, k, v, smooth_v=False)
    emulated = emulate_int8_attention(plain, default_scale(SHAPE.head_dim), False)[0, 0]
    assert torch.allclose(outs["exact"], emulated, rtol=10.0 ** -12, atol=10.0 ** -12)


@pytest.mark.parametrize("distribution", ["normal", "positive"])
def test_the_exact_sum_of_smoothed_v_is_the_default_recipes_emulation(tool, distribution):
    """The model's smoothed V is the recipe's smooth_v (the quantizer's default): same mean, same codes."""
    q, k, v = make_inputs(SHAPE, torch.float16, 0, "cpu", distribution)
    ref, outs = tool.head_outputs(q, k, v, smooth_v=True)
    emulated = emulate_int8_attention(quantize_int8_qkv(q, k, v), default_scale(SHAPE.head_dim), False)[0, 0]
    assert torch.allclose(outs["exact"], emulated, rtol=10.0 ** -12, atol=10.0 ** -12)


def test_smoothing_v_adds_its_mean_back_and_changes_only_what_v_quantizes(tool):
    q, k, v = make_inputs(SHAPE, torch.float16, 1, "cpu", "positive")
    ref_plain, plain = tool.head_outputs(q, k, v, smooth_v=False)
    ref_smooth, smooth = tool.head_outputs(q, k, v, smooth_v=True)
    # both refs are attention on their recipe's operands: within one e4m3 step of V of each other,
    # and the positive rows' outputs sit near V's mean, not near zero (the mean is added back)
    assert (ref_plain - ref_smooth).abs().max() < 0.05 * v.abs().max()
    assert smooth["exact"].mean() > 0.5 * v.float().mean()


def test_the_row_long_sum_truncates_where_the_per_tile_sum_does_not(tool):
    """One-signed terms: the row-long FP22 sum drifts below the exact one; each tile's own sum
    stays nearer (the GPU's failure on positive rows, 2026-11-28, modelled)."""
    q, k, v = make_inputs(Shape(1, 1, 1000, 64, causal=False), torch.float16, 0, "cpu", "positive")
    _, outs = tool.head_outputs(q, k, v, smooth_v=False)
    row_long = (outs["row-long"] - outs["exact"]).abs().max()
    per_tile = (outs["per tile"] - outs["exact"]).abs().max()
    assert row_long > 2 * per_tile
    assert (outs["row-long"] <= outs["exact"] + 10.0 ** -12).float().mean() > 0.99  # truncation: toward zero


def test_a_shape_of_several_heads_is_refused_with_the_reason(tool):
    with pytest.raises(SystemExit, match="one head"):
        tool.parse_shape("2x8x512x64")
