"""The FP8 error budget accepts correct FP8 attention and catches planted bugs (CPU stand-ins for kernels)."""

import math

import pytest
import torch

from stagelab.families.sdpa import Shape, attention
from stagelab.families.sdpa.fp8 import (
    E4M3,
    E4M3_MAX,
    P_MAX,
    STAGE_BASELINE,
    UNQUANTIZED_BASELINE,
    Fp8CheckResult,
    check_fp8_all,
    check_fp8_shape,
    emulate_fp8_attention,
    quantize_qkv,
    quantized_probabilities,
)
from stagelab.families.sdpa.fp8.emulation import flat_e4m3_operands, per_head

# Odd sequence lengths (partial tiles), causal and not, both head dims; each has >= 2 heads, so
# the checker plants an all-zero head in every one.
SHAPES = [Shape(1, 2, 77, 64, True), Shape(1, 2, 77, 64, False), Shape(2, 1, 33, 128, True)]
DTYPES = ["float16", "bfloat16"]
KV_TILE = 16  # the tiled variant's key/value block, smaller than the sequences so they span tiles


def emulation(fp8, out, scale, causal):
    out.copy_(emulate_fp8_attention(fp8, scale, causal))


def _tile_scores(q8, k8, score_scale, start, causal):
    scores = q8 @ k8[:, start:start + KV_TILE].transpose(-1, -2) * score_scale
    if causal:
        rows = torch.arange(q8.shape[1]).unsqueeze(1)
        keys = torch.arange(start, start + scores.shape[-1]).unsqueeze(0)
        scores = scores.masked_fill(keys > rows, -math.inf)
    return scores


def tiled_online_softmax(fp8, out, scale, causal):
    """Another order, as a kernel computes it: key tiles in turn, a running row max, P quantized
    against the running max of each tile, the accumulator rescaled when the max grows."""
    q8, k8, v8 = flat_e4m3_operands(fp8)
    score_scale = scale * per_head(fp8.q.descale) * per_head(fp8.k.descale)
    acc = torch.zeros_like(q8)
    row_max = torch.full(q8.shape[:2] + (1,), -math.inf)
    row_sum = torch.zeros_like(row_max)
    for start in range(0, k8.shape[1], KV_TILE):
        scores = _tile_scores(q8, k8, score_scale, start, causal)
        new_max = torch.maximum(row_max, scores.amax(-1, keepdim=True))
        # Rows whose keys are all masked so far keep max -inf; exp2 of -inf - -inf would be NaN.
        safe_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        rescale = torch.exp(row_max - safe_max)
        p8, tile_sum = quantized_probabilities(scores, safe_max)
        acc = acc * rescale + p8 @ v8[:, start:start + KV_TILE]
        row_sum = row_sum * rescale + tile_sum
        row_max = new_max
    out.copy_((acc * per_head(fp8.v.descale) / row_sum).reshape(out.shape))


def missing_descale(fp8, out, scale, causal):
    """Q.K^T of the e4m3 values with the bare softmax scale: the per-head descales never folded in."""
    q8, k8, v8 = (t.data.to(torch.float64) for t in (fp8.q, fp8.k, fp8.v))
    out.copy_(attention(q8, k8, fp8.v.dequantize(), scale, causal, torch.float32))


def scale_applied_twice(fp8, out, scale, causal):
    """Q dequantized, and its descale folded into the softmax scale as well."""
    q, k, v = fp8.dequantized()
    q_twice = q * fp8.q.descale.double()[..., None, None]
    out.copy_(attention(q_twice, k, v, scale, causal, torch.float32))


def zero_head_nan(fp8, out, scale, causal):
    """Stretches each head to e4m3's full range again (scale E4M3_MAX / amax) without the zero
    guard: an all-zero head becomes 0 * inf = NaN."""
    def stretched(t):
        amax = t.data.float().abs().amax(dim=(-2, -1), keepdim=True)
        return t.data.float() * (E4M3_MAX / amax) * (amax / E4M3_MAX) * t.descale[..., None, None]
    out.copy_(attention(stretched(fp8.q), stretched(fp8.k), stretched(fp8.v), scale, causal, torch.float32))


@pytest.mark.parametrize("kernel", [emulation, tiled_online_softmax])
@pytest.mark.parametrize("dtype", DTYPES)
def test_correct_fp8_attention_passes(kernel, dtype):
    results = check_fp8_all(kernel, SHAPES, [dtype], [0, 1], "cpu")
    assert all(r.passed for r in results), [r.reason for r in results if not r.passed]
    assert all(isinstance(r, Fp8CheckResult) and r.err_budget_ratio < 1 for r in results)


@pytest.mark.parametrize("bug, expect", [
    (missing_descale, "over budget"),
    (scale_applied_twice, "over budget"),
    (zero_head_nan, "non-finite"),
])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_planted_bugs_fail(bug, expect, shape, dtype):
    result = check_fp8_shape(bug, shape, dtype, seed=0, device="cpu")
    assert not result.passed
    assert expect in result.reason


def test_result_reports_the_budget_and_what_fp8_costs():
    result = check_fp8_shape(emulation, SHAPES[1], "float16", seed=0, device="cpu")
    assert result.emulation_err == result.lowprec_err == result.max_abs_err > 0
    assert result.budget == pytest.approx(2 * result.emulation_err + result.atol)
    assert result.fp16_baseline == UNQUANTIZED_BASELINE
    # Quantizing the inputs costs more than the computation in e4m3 does.
    assert result.err_vs_fp16 > result.emulation_err
    assert {"err_vs_fp16", "fp16_baseline"} <= set(result.as_row())


def test_fp16_stage_output_is_the_baseline_when_given():
    def fp16_stage(q, k, v, out, scale, causal):
        out.copy_(attention(q, k, v, scale, causal, torch.float32))

    result = check_fp8_shape(emulation, SHAPES[0], "float16", 0, "cpu", fp16_kernel=fp16_stage)
    assert result.passed and result.fp16_baseline == STAGE_BASELINE


def test_crashing_kernel_is_a_failed_fp8_check():
    def boom(fp8, out, scale, causal):
        raise RuntimeError("kernel launch failed: invalid argument")

    [result] = check_fp8_all(boom, SHAPES[:1], ["float16"], [0], "cpu")
    assert isinstance(result, Fp8CheckResult) and not result.passed and "invalid argument" in result.reason


def test_emulation_quantizes_p_with_fa3s_fixed_scale():
    scores = torch.tensor([[0.0, -1.0, -30.0, -math.inf]])
    p8, row_sum = quantized_probabilities(scores, scores.amax(-1, keepdim=True))
    assert p8[0, 0] == P_MAX and p8[0, 3] == 0 and p8.to(E4M3).float().equal(p8)
    assert row_sum.item() == pytest.approx(P_MAX * (1 + math.exp(-1) + math.exp(-30)))


def test_emulation_gives_exact_zeros_for_a_zero_head():
    q, k, v = (torch.randn(1, 2, 9, 64).half() for _ in range(3))
    for t in (q, k, v):
        t[0, 1] = 0
    out = emulate_fp8_attention(quantize_qkv(q, k, v), 0.125, causal=True)
    assert out.dtype == torch.float16 and torch.equal(out[0, 1], torch.zeros(9, 64, dtype=torch.float16))


TENSOR_CORE_MANTISSA = 13  # the e4m3 wgmma's "f32" accumulator keeps about 13 mantissa bits (FP22)
F32_MANTISSA = 23  # QK_F16: the fp16 wgmma's float32 accumulation (modelled as float32-wide, truncating)


def scores_truncated_to(mantissa_bits: int):
    """A kernel: the emulation with Q.K^T rounded toward zero to `mantissa_bits` mantissa bits."""
    def kernel(fp8, out, scale, causal):
        scores_in_bits(fp8, out, scale, causal, mantissa_bits)
    return kernel


def scores_in_fp22(fp8, out, scale, causal):
    """The emulation with Q.K^T rounded toward zero to 13 mantissa bits, as the tensor core keeps it."""
    scores_in_bits(fp8, out, scale, causal, TENSOR_CORE_MANTISSA)


def scores_in_bits(fp8, out, scale, causal, mantissa_bits):
    b, h, s, d = fp8.q.data.shape
    q8, k8, v8 = flat_e4m3_operands(fp8)
    scores = torch.matmul(q8.double(), k8.double().transpose(-1, -2))
    step = torch.exp2(torch.floor(torch.log2(scores.abs().clamp_min(1e-300))) - mantissa_bits)
    scores = (torch.trunc(scores / step) * step).float() * (scale * per_head(fp8.q.descale) * per_head(fp8.k.descale))
    if causal:
        scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    p8, row_sum = quantized_probabilities(scores, scores.amax(dim=-1, keepdim=True))
    out.copy_((torch.matmul(p8, v8) * (per_head(fp8.v.descale) / row_sum)).reshape(b, h, s, d))


def test_large_logits_expose_a_13_bit_accumulator():
    shape = Shape(1, 2, 333, 128, False)
    assert check_fp8_shape(scores_in_fp22, shape, "float16", 0, "cpu").passed  # harmless on N(0, 1)
    on_large = check_fp8_shape(scores_in_fp22, shape, "float16", 0, "cpu", distribution="large")
    assert not on_large.passed and "over budget" in on_large.reason
    assert check_fp8_shape(emulation, shape, "float16", 0, "cpu", distribution="large").passed


def test_a_float32_wide_q_k_accumulator_passes_large_logits():
    """QK_F16's premise (issue 28): Q.K^T of the same e4m3 values with float32's mantissa, as the fp16
    wgmma accumulates, stays inside the budget where the 13-bit one fails."""
    shape = Shape(1, 2, 333, 128, False)
    kernel = scores_truncated_to(F32_MANTISSA)
    assert check_fp8_shape(kernel, shape, "float16", 0, "cpu", distribution="large").passed
    assert not check_fp8_shape(scores_in_fp22, shape, "float16", 0, "cpu", distribution="large").passed
