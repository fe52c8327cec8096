"""The INT8 budget accepts the recipe computed as a kernel would and catches planted bugs (CPU stand-ins)."""

import math

import pytest
import torch

from stagelab.families.sdpa import Shape, attention
from stagelab.families.sdpa.distributions import DISTRIBUTIONS
from stagelab.families.sdpa.fp8 import UNQUANTIZED_BASELINE
from stagelab.families.sdpa.fp8.budget import STAGE_BASELINE
from stagelab.families.sdpa.fp8.quantize import E4M3
from stagelab.families.sdpa.int8 import (P_EXP2_OFFSET, Int8CheckResult, Int8Recipe, check_int8_all,
                                         check_int8_shape, emulate_int8_attention, recipe_operands)
from stagelab.families.sdpa.reference import causal_mask

# Small blocks, so these short odd problems have several blocks, a partial last one, several key tiles.
RECIPE = Int8Recipe(q_block=16, k_block=32)
# Three K/V heads, so `zero_head`'s zeroed head and the checker's planted one leave one head that is not.
SHAPES = [Shape(1, 3, 77, 64, True), Shape(1, 3, 77, 64, False),
          Shape(1, 6, 45, 128, True, kv_heads=3, kv_seq_len=77, layout="bshd")]
LOG2_E = math.log2(math.e)


def check(kernel, shape, dtype="float16", distribution="normal", seed=0, **kwargs):
    return check_int8_shape(kernel, shape, dtype, seed, "cpu", distribution=distribution, recipe=RECIPE, **kwargs)


def emulation(x, out, scale, causal):
    out.copy_(emulate_int8_attention(x, scale, causal, **RECIPE.emulation_args()))


def float32_operands(x, scale):
    ops = {name: t.float() for name, t in recipe_operands(x).items()}
    ops["row_scale"] = ops["q_descale"] * (scale * LOG2_E)  # the softmax scale in exp2's base, as kernels fold it
    return ops


def tile_scores(ops, keys, causal, sk):
    """A tile's scores, log2-based: the integer dot products are exact in float32 (< 2^24)."""
    scores = (ops["q8"] @ ops["k8"][:, keys].transpose(-1, -2)) * (ops["row_scale"] * ops["k_descale"][..., keys])
    if causal:
        scores = scores.masked_fill(causal_mask(scores.shape[1], "cpu", sk)[:, keys], -math.inf)
    return scores


def as_kernel(x, out, scale, causal, *, tiles=None, rescale_row_sum=True):
    """The recipe in float32 as a kernel computes it: exp2 with the softmax scale and P's offset folded
    in, P in e4m3 from float32, each tile's P.V (exact e4m3 products) summed in float32 and promoted
    into a float32 O. `tiles` and `rescale_row_sum` plant bugs."""
    ops = float32_operands(x, scale)
    sk = ops["k8"].shape[1]
    acc = torch.zeros(ops["q8"].shape[:2] + ops["v8"].shape[-1:])
    row_max = torch.full(ops["row_scale"].shape, -math.inf)
    row_sum = torch.zeros_like(row_max)
    for start in tiles or range(0, sk, RECIPE.key_tile):
        keys = slice(start, start + RECIPE.key_tile)
        scores = tile_scores(ops, keys, causal, sk)
        new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
        finite_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        rescale = torch.exp2(row_max - finite_max)
        p = torch.exp2(scores - finite_max + P_EXP2_OFFSET)
        acc = acc * rescale + p.to(E4M3).float() @ ops["v8"][:, keys]
        row_sum = (row_sum * rescale if rescale_row_sum else row_sum) + p.sum(-1, keepdim=True)
        row_max = new_max
    out.copy_((acc * ops["v_descale"] / row_sum + ops["v_mean"]).reshape(out.shape))


def first_block_descales(x, out, scale, causal):
    """Each head's first Q and K block descale used for all its blocks."""
    x = type(x)(**{**x.__dict__, "q_descale": x.q_descale[..., :1].expand_as(x.q_descale),
                   "k_descale": x.k_descale[..., :1].expand_as(x.k_descale)})
    as_kernel(x, out, scale, causal)


def last_partial_block_dropped(x, out, scale, causal):
    """Key tiles only while whole (77 keys: the last 13 are never read)."""
    sk = x.k.shape[2]
    as_kernel(x, out, scale, causal, tiles=range(0, sk - RECIPE.key_tile + 1, RECIPE.key_tile))


def v_descales_on_the_wrong_channels(x, out, scale, causal):
    as_kernel(type(x)(**{**x.__dict__, "v_descale": x.v_descale.roll(1, dims=-1)}), out, scale, causal)


def v_mean_not_added(x, out, scale, causal):
    """Smoothed V's mean left out of the output (the epilogue's `+ v_mean` forgotten)."""
    as_kernel(type(x)(**{**x.__dict__, "v_mean": torch.zeros_like(x.v_mean)}), out, scale, causal)


def v_mean_on_the_wrong_channels(x, out, scale, causal):
    as_kernel(type(x)(**{**x.__dict__, "v_mean": x.v_mean.roll(1, dims=-1)}), out, scale, causal)


def row_sum_not_rescaled(x, out, scale, causal):
    """The online softmax's classic slip: the row sum kept at older maxima when the max grows."""
    as_kernel(x, out, scale, causal, rescale_row_sum=False)


def zero_channel_nan(x, out, scale, causal):
    """V's descales recomputed from the e4m3 data's amax without the zero guard: 0/0 in a zero channel."""
    amax = x.v.float().abs().amax(dim=2)
    as_kernel(type(x)(**{**x.__dict__, "v_descale": x.v_descale * amax / amax}), out, scale, causal)


@pytest.mark.parametrize("kernel", [emulation, as_kernel])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_recipe_passes(kernel, dtype):
    results = check_int8_all(kernel, SHAPES, [dtype], [0], "cpu", recipe=RECIPE)
    assert all(isinstance(r, Int8CheckResult) and r.passed for r in results), [r.reason for r in results]
    assert all(r.err_budget_ratio < 0.7 for r in results)


@pytest.mark.parametrize("distribution", [d for d in DISTRIBUTIONS if d != "normal"])
def test_a_kernel_computing_the_recipe_passes_every_distribution(distribution):
    for shape in SHAPES[1:]:
        result = check(as_kernel, shape, distribution=distribution)
        assert result.passed and result.err_budget_ratio < 0.7, result.reason
        assert result.err_vs_emulation <= result.emulation_err + result.atol  # the recipe, not another one


@pytest.mark.parametrize("bug, expect", [
    (first_block_descales, "over budget"),
    (last_partial_block_dropped, "over budget"),
    (v_descales_on_the_wrong_channels, "over budget"),
    (v_mean_not_added, "over budget"),
    (v_mean_on_the_wrong_channels, "over budget"),
    (row_sum_not_rescaled, "over budget"),
    (zero_channel_nan, "non-finite"),
])
@pytest.mark.parametrize("shape", SHAPES)
def test_planted_bugs_fail(bug, expect, shape):
    result = check(bug, shape)
    assert not result.passed and expect in result.reason


def test_the_result_reports_errors_against_truth_beside_the_verdict():
    result = check(as_kernel, SHAPES[0])
    assert result.emulation_err == result.lowprec_err > 0
    assert result.budget == pytest.approx(2 * result.emulation_err + result.atol)
    assert 0 < result.err_vs_emulation < result.emulation_err
    assert result.fp16_baseline == UNQUANTIZED_BASELINE
    # quantizing the inputs costs more than anything else; the fp16 baseline costs far less
    assert result.err_vs_truth > result.emulation_err and result.recipe_err_vs_truth > result.emulation_err
    assert 0 < result.baseline_err_vs_truth < result.recipe_err_vs_truth / 10
    assert 0 < result.fa3_fp8_err_vs_truth
    assert {"err_vs_emulation", "err_vs_truth", "recipe_err_vs_truth", "fa3_fp8_err_vs_truth",
            "baseline_err_vs_truth", "fp16_baseline"} <= set(result.as_row())


def test_the_fp16_stage_is_the_baseline_when_given():
    def fp16_stage(q, k, v, out, scale, causal):
        out.copy_(attention(q, k, v, scale, causal, torch.float32))

    result = check(emulation, SHAPES[2], fp16_kernel=fp16_stage)
    assert result.passed and result.fp16_baseline == STAGE_BASELINE


def test_a_crashing_kernel_is_a_failed_check_and_unknown_distributions_fail_first():
    def boom(x, out, scale, causal):
        raise RuntimeError("kernel launch failed: invalid argument")

    [result] = check_int8_all(boom, SHAPES[:1], ["float16"], [0], "cpu", recipe=RECIPE)
    assert isinstance(result, Int8CheckResult) and not result.passed and "invalid argument" in result.reason
    with pytest.raises(Exception, match="no input distribution 'gaussian'"):
        check_int8_all(emulation, SHAPES[:1], ["float16"], [0], "cpu", distributions=["gaussian"])
