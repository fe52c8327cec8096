"""The INT8 recipe's quantizer: per-block int8 Q and smoothed K, e4m3 V per channel or head, its edge cases."""

import pytest
import torch

from stagelab.core.errors import InputError
from stagelab.families.sdpa.fp8.quantize import E4M3, E4M3_MAX, e4m3_broadcast_bound
from stagelab.families.sdpa.int8 import (INT8_MAX, PER_HEAD, Int8Recipe, int8_rounding_bound, quantize_int8_qkv,
                                         quantize_v)
from stagelab.families.sdpa.int8.blocks import MIN_DESCALE, quantize_int8_blocks
from stagelab.families.sdpa.reference import attention


def randn(*shape, dtype=torch.float16, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def qkv(heads=2, kv_heads=2, sq=77, sk=77, d=64, dtype=torch.float16):
    return randn(1, heads, sq, d, dtype=dtype, seed=0), randn(1, kv_heads, sk, d, dtype=dtype, seed=1), \
        randn(1, kv_heads, sk, d, dtype=dtype, seed=2)


@pytest.mark.parametrize("block", [16, 32, 77, 128])
def test_each_block_scaled_by_its_own_amax_the_last_one_partial(block):
    x = randn(2, 3, 77, 64, dtype=torch.float32) * torch.linspace(0.1, 10, 77)[:, None]
    data, descale = quantize_int8_blocks(x, block)
    blocks = -(-77 // block)
    assert data.dtype == torch.int8 and descale.dtype == torch.float32 and descale.shape == (2, 3, blocks)
    for i in range(blocks):
        part = x[:, :, i * block:(i + 1) * block]
        torch.testing.assert_close(descale[..., i].double(), part.double().abs().amax(dim=(-2, -1)) / INT8_MAX,
                                   rtol=2 ** -23, atol=0)
        assert (data[:, :, i * block:(i + 1) * block].abs().amax(dim=(-2, -1)) == INT8_MAX).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_q_and_smoothed_k_round_trip_within_half_a_step(dtype):
    q, k, v = qkv(dtype=dtype)
    k = k + 5  # an offset for smoothing to remove
    x = quantize_int8_qkv(q, k, v, q_block=16, k_block=32)
    q_back, k_back, _ = x.dequantized()
    q_bound = int8_rounding_bound(x.q_descale, 16, 77)
    k_bound = int8_rounding_bound(x.k_descale, 32, 77)
    assert ((q_back - q.double()).abs() <= q_bound).all() and ((k_back - k.double()).abs() <= k_bound).all()
    # round to nearest really: the worst error is close to half a step, not a whole one
    assert ((q_back - q.double()).abs() / q_bound).max() > 0.9


def test_v_round_trips_within_e4m3_precision_per_channel_and_per_head():
    q, k, v = qkv()
    v = v * torch.logspace(-3, 2, 64).half()  # channels of very different size
    for v_scaling in ("channel", "head"):
        x = quantize_int8_qkv(q, k, v, v_scaling=v_scaling, smooth_v=False)
        assert x.v.dtype == E4M3 and x.v_descale.shape == (1, 2, 64)
        bound = e4m3_broadcast_bound(v, x.v_descale[:, :, None, :])
        assert ((x.dequantized()[2] - v.double()).abs() <= bound).all()
    per_channel = quantize_int8_qkv(q, k, v, smooth_v=False).v_descale
    torch.testing.assert_close(per_channel.double(), v.double().abs().amax(dim=2) / E4M3_MAX, rtol=2 ** -23, atol=0)
    per_head = quantize_int8_qkv(q, k, v, v_scaling=PER_HEAD, smooth_v=False).v_descale
    assert (per_head == per_head[..., :1]).all() and (per_head[..., 0] == per_channel.amax(-1)).all()


@pytest.mark.parametrize("v_scaling", ["channel", "head"])
def test_smoothing_v_quantizes_v_less_its_mean_over_tokens_and_dequantizing_adds_it_back(v_scaling):
    q, k, v = qkv(heads=4, kv_heads=2)
    offset = torch.linspace(-3, 3, 64)
    v = v * 0.5 + offset.half()  # every channel its own offset
    x = quantize_int8_qkv(q, k, v, v_scaling=v_scaling)
    assert x.smooth_v and x.v_mean.shape == (1, 2, 64) and x.v_mean.dtype == torch.float32
    torch.testing.assert_close(x.v_mean, v.float().mean(dim=2), rtol=0, atol=0)
    centred = v.float() - x.v_mean[:, :, None, :]
    # V's codes and descales are quantize_v's of V - v_mean, bit for bit
    codes, descale = quantize_v(centred, v_scaling)
    assert torch.equal(x.v.view(torch.uint8), codes.view(torch.uint8)) and torch.equal(x.v_descale, descale)
    if v_scaling == "channel":
        torch.testing.assert_close(x.v_descale.double(), centred.double().abs().amax(dim=2) / E4M3_MAX,
                                   rtol=2 ** -23, atol=0)
    # dequantized() adds the mean back: V within e4m3's rounding of the centred values (and float32's)
    bound = e4m3_broadcast_bound(centred, x.v_descale[:, :, None, :]) + v.double().abs() * 2 ** -23
    assert ((x.dequantized()[2] - v.double()).abs() <= bound).all()
    # the offsets are gone from what e4m3 holds: a finer step than without smoothing where they are large
    unsmoothed = quantize_int8_qkv(q, k, v, v_scaling=v_scaling, smooth_v=False)
    assert not unsmoothed.v_mean.any() and not unsmoothed.smooth_v
    large = offset.abs() > 2 if v_scaling == "channel" else slice(None)
    assert (unsmoothed.v_descale[..., large] > 1.5 * x.v_descale[..., large]).all()


def test_smoothing_subtracts_the_mean_over_tokens_per_kv_head_and_channel():
    q, k, v = qkv(heads=4, kv_heads=2)
    k = k + torch.arange(64).half()  # every channel its own offset
    x = quantize_int8_qkv(q, k, v)
    torch.testing.assert_close(x.k_mean, k.float().mean(dim=2))
    assert x.k_mean.shape == (1, 2, 64) and x.smooth_k
    smoothed = x.dequantized(smoothed=True)[1]
    assert smoothed.mean(dim=2).abs().max() < x.k_descale.max()  # the offsets are gone, up to rounding
    unsmoothed = quantize_int8_qkv(q, k, v, smooth_k=False)
    assert not unsmoothed.k_mean.any() and not unsmoothed.smooth_k
    # without smoothing the offsets set the scale: a coarser step
    assert (unsmoothed.k_descale > 10 * x.k_descale).all()


def test_smoothing_leaves_softmax_unchanged_exactly_in_float64():
    """softmax(q.(k - m)) = softmax(q.k): each row's scores move by the one constant q_i.m."""
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 19, 64, generator=gen, dtype=torch.float64) for _ in range(3))
    mean = torch.randn(1, 2, 1, 64, generator=gen, dtype=torch.float64) * 10
    for causal in (False, True):
        plain = attention(q, k, v, 0.125, causal, torch.float64)
        smoothed = attention(q, k - mean, v, 0.125, causal, torch.float64)
        torch.testing.assert_close(smoothed, plain, rtol=0, atol=1e-13)


def test_all_zero_blocks_get_descale_one_and_exact_zeros():
    q, k, v = qkv()
    q[0, 1, 16:32] = 0  # one whole Q block
    k[0, 0, 32:64] = 0  # one whole K block: after smoothing it holds -mean, so zero the whole head
    k[0, 1] = 0
    v[0, 1, :, 5] = 0  # one V channel
    x = quantize_int8_qkv(q, k, v, q_block=16, k_block=32)
    assert x.q_descale[0, 1, 1] == 1 and not x.q[0, 1, 16:32].any()
    assert (x.k_descale[0, 1] == 1).all() and not x.k[0, 1].any() and not x.k_mean[0, 1].any()
    assert x.v_descale[0, 1, 5] == 1 and not x.v[0, 1, :, 5].float().any()
    assert all(torch.isfinite(t).all() for t in x.dequantized())


def test_tiny_blocks_keep_a_normal_float32_descale():
    x = torch.full((1, 1, 8, 64), 1e-40, dtype=torch.float32)  # amax / 127 would be a float32 sub-normal
    data, descale = quantize_int8_blocks(x, 8)
    assert descale.item() == MIN_DESCALE and torch.isfinite(descale).all()
    assert ((data.double() * descale.double() - x.double()).abs() <= int8_rounding_bound(descale, 8, 8)).all()


@pytest.mark.parametrize("name, index, block_text", [
    ("q", (0, 1, 40, 3), r"q: batch 0, head 1, block 2 \(tokens 32-47\) holds 1 inf or NaN value\(s\), "
                         r"the first at token 40, channel 3"),
    ("k", (0, 0, 76, 63), r"k: batch 0, head 0, block 2 \(tokens 64-76\) holds 1"),
    ("v", (0, 1, 5, 7), r"v: batch 0, head 1 holds 1 inf or NaN value\(s\), the first at token 5, channel 7"),
])
@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_nonfinite_inputs_rejected_naming_tensor_batch_head_and_block(name, index, block_text, bad):
    tensors = dict(zip("qkv", qkv()))
    tensors[name][index] = bad
    with pytest.raises(InputError, match=block_text):
        quantize_int8_qkv(tensors["q"], tensors["k"], tensors["v"], q_block=16, k_block=32)


@pytest.mark.parametrize("change, message", [
    (lambda q, k, v: (q.float(), k, v), "one dtype"),
    (lambda q, k, v: (q.double(), k.double(), v.double()), "dtype torch.float64"),
    (lambda q, k, v: (q, k[:, :, :5], v), "k and v must share one shape"),
    (lambda q, k, v: (q[:, :1], k, v), "do not divide"),
    (lambda q, k, v: (q[..., :32], k, v), "share batch and head_dim"),
    (lambda q, k, v: (q[0], k, v), "4 dims"),
    (lambda q, k, v: (q[:, :, :0], k, v), ">= 1"),
])
def test_malformed_inputs_rejected(change, message):
    with pytest.raises(InputError, match=message):
        quantize_int8_qkv(*change(*qkv()))


@pytest.mark.parametrize("kwargs, message", [
    ({"q_block": 0}, "q_block must be a positive int"), ({"k_block": 16.0}, "k_block must be a positive int"),
    ({"q_block": True}, "q_block"), ({"v_scaling": "token"}, "v_scaling must be one of"),
])
def test_bad_recipe_parameters_rejected(kwargs, message):
    with pytest.raises(InputError, match=message):
        quantize_int8_qkv(*qkv(), **kwargs)
    with pytest.raises(InputError, match=message):
        Int8Recipe(**kwargs)


def test_grouped_query_inputs_keep_their_kv_heads_and_bshd_layout():
    q, k, v = qkv(heads=4, kv_heads=2, sq=33, sk=50)
    q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))  # bshd views
    x = quantize_int8_qkv(q, k, v, q_block=16, k_block=32)
    assert x.q.shape == (1, 4, 33, 64) and x.k.shape == x.v.shape == (1, 2, 50, 64)
    assert x.q_descale.shape == (1, 4, 3) and x.k_descale.shape == (1, 2, 2) and x.source_dtype == torch.float16
    assert x.q.stride() == q.stride() and x.k.stride() == k.stride() and x.v.stride() == v.stride()
    grouped = x.grouped()
    assert grouped.k.shape == (1, 4, 50, 64) and torch.equal(grouped.k[:, 1], x.k[:, 0])
    assert torch.equal(grouped.v_descale[:, 3], x.v_descale[:, 1])
    assert grouped.v_mean.shape == (1, 4, 64) and torch.equal(grouped.v_mean[:, 3], x.v_mean[:, 1])
    assert grouped.smooth_v == x.smooth_v and torch.equal(grouped.k_mean[:, 2], x.k_mean[:, 1])
