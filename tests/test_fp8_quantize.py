"""The e4m3 quantizer's guarantees: per-(batch, head) scales, zero heads, non-finite rejection, round trips."""

import pytest
import torch

from stagelab.core.errors import InputError
from stagelab.families.sdpa.fp8 import E4M3, E4M3_MAX, e4m3_rounding_bound, quantize_e4m3, quantize_qkv


def randn(*shape, dtype=torch.float16, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def round_trip_error(x):
    quantized = quantize_e4m3(x, "x")
    return (quantized.dequantize() - x.double()).abs(), e4m3_rounding_bound(x, quantized.descale)


def test_each_head_scaled_to_e4m3_max_by_its_own_amax():
    x = randn(2, 3, 77, 64) * torch.tensor([1e-3, 1.0, 50.0]).view(1, 3, 1, 1).half()
    quantized = quantize_e4m3(x, "q")
    assert quantized.data.dtype == E4M3 and quantized.scale.shape == (2, 3)
    amax = x.double().abs().amax(dim=(-2, -1))
    torch.testing.assert_close(quantized.scale.double(), E4M3_MAX / amax, rtol=1e-6, atol=0)
    torch.testing.assert_close(quantized.descale.double() * quantized.scale.double(),
                               torch.ones_like(amax), rtol=1e-6, atol=0)
    assert torch.equal(quantized.data.float().abs().amax(dim=(-2, -1)), torch.full((2, 3), E4M3_MAX))


def test_all_zero_head_gets_scale_one_and_exact_zeros():
    x = randn(2, 2, 33, 64)
    x[1, 0] = 0
    quantized = quantize_e4m3(x, "k")
    assert quantized.scale[1, 0] == 1 and quantized.descale[1, 0] == 1
    assert torch.equal(quantized.dequantize()[1, 0], torch.zeros(33, 64, dtype=torch.float64))
    assert torch.isfinite(quantized.dequantize()).all()


def test_negative_zero_head_is_a_zero_head():
    x = torch.full((1, 1, 5, 64), -0.0, dtype=torch.float16)
    quantized = quantize_e4m3(x, "v")
    assert quantized.scale.item() == 1 and not quantized.dequantize().any()


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_nonfinite_rejected_naming_tensor_and_head(bad):
    q, k, v = randn(2, 3, 17, 64, seed=0), randn(2, 3, 17, 64, seed=1), randn(2, 3, 17, 64, seed=2)
    k[1, 2, 5, 7] = bad
    with pytest.raises(InputError, match=r"k: head \(batch 1, head 2\) holds 1 inf or NaN"):
        quantize_qkv(q, k, v)


def test_nonfinite_in_several_heads_counts_them():
    x = randn(2, 2, 9, 64)
    x[0, 1, 0, 0] = x[1, 0, 3, 3] = float("nan")
    with pytest.raises(InputError, match=r"x: head \(batch 0, head 1\).*2 head\(s\) in all"):
        quantize_e4m3(x, "x")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_negative_values_round_trip_within_e4m3_precision(dtype):
    x = -randn(2, 2, 77, 64, dtype=dtype).abs()
    error, bound = round_trip_error(x)
    assert (error <= bound).all()
    assert (quantize_e4m3(x, "x").dequantize() <= 0).all()


def test_values_below_e4m3_normal_range_round_trip_within_subnormal_step():
    # One large value sets the scale; the rest land among e4m3's sub-normals after scaling.
    x = randn(1, 1, 33, 64) * 1e-4
    x[0, 0, 0, 0] = -4.0
    scaled = x.double() * quantize_e4m3(x, "x").scale.double()[..., None, None]
    assert (scaled.abs() < torch.finfo(E4M3).tiny).float().mean() > 0.5
    error, bound = round_trip_error(x)
    assert (error <= bound).all()
    assert error.max() > 0  # the case really rounds


@pytest.mark.parametrize("dtype, tiny_value", [
    (torch.float16, 3e-7),  # float16 sub-normals (below 6.1e-5)
    (torch.bfloat16, 1e-39),  # bfloat16 sub-normals (below 1.2e-38): the scale is capped
    (torch.float32, 1e-42),
])
def test_subnormal_inputs_round_trip(dtype, tiny_value):
    x = (randn(1, 2, 17, 64, dtype=torch.float32) * tiny_value).to(dtype)
    assert (x != 0).any() and (x.abs() < torch.finfo(dtype).tiny).all()
    quantized = quantize_e4m3(x, "x")
    assert torch.isfinite(quantized.scale).all() and (quantized.descale >= torch.finfo(torch.float32).tiny).all()
    error, bound = round_trip_error(x)
    assert (error <= bound).all()


@pytest.mark.parametrize("x, message", [
    (torch.zeros(2, 5, 64), "4 dims"),
    (torch.zeros(1, 1, 5, 64, dtype=torch.int32), "floating-point"),
    (torch.zeros(1, 1, 5, 64).to(E4M3), "floating-point"),
    ("q", "torch.Tensor"),
])
def test_malformed_tensors_rejected(x, message):
    with pytest.raises(InputError, match=message):
        quantize_e4m3(x, "q")


def test_qkv_keep_their_own_scales_and_source_dtype():
    q, k, v = (randn(1, 2, 9, 64, dtype=torch.bfloat16, seed=s) * (s + 1) for s in range(3))
    fp8 = quantize_qkv(q, k, v)
    assert fp8.source_dtype == torch.bfloat16
    assert not torch.equal(fp8.q.scale, fp8.v.scale)
    for original, restored in zip((q, k, v), fp8.dequantized()):
        assert (restored - original.double()).abs().max() <= original.double().abs().max() / 8
