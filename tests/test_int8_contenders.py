"""SageAttention as the INT8 stage's contender: timed beside INT8 stages only, K never written, and
recorded as unavailable with its reason (never an error) where it is missing or cannot take the problem."""

import sys
import types

import pytest
import torch

from stagelab.families.sdpa import FAMILY, FP8_INPUTS, INT8_INPUTS
from stagelab.families.sdpa.int8 import contenders as int8c
from stagelab.measure.steps import _contenders


def inputs(shape=(1, 4, 9, 64), kv_heads=2, kv_len=None):
    generator = torch.Generator().manual_seed(0)
    b, h, s, d = shape
    kv = (b, kv_heads, kv_len or s, d)
    return torch.randn(shape, generator=generator), torch.randn(kv, generator=generator), \
        torch.randn(kv, generator=generator)


@pytest.fixture
def fake_sage(monkeypatch):
    """A stand-in `sageattention` package whose sageattn smooths K in place, as the real one does."""
    calls = []

    def sageattn(q, k, v, tensor_layout="HND", is_causal=False, sm_scale=None, smooth_k=True):
        calls.append({"k": k, "layout": tensor_layout, "causal": is_causal, "scale": sm_scale, "smooth_k": smooth_k})
        k -= k.mean(dim=2, keepdim=True)
        return torch.zeros_like(q)

    monkeypatch.setitem(sys.modules, "sageattention", types.SimpleNamespace(sageattn=sageattn))
    return calls


def test_only_int8_stages_meet_sageattention():
    assert FAMILY.kind_contenders(INT8_INPUTS) == ("sageattention",)
    assert "sageattention" not in FAMILY.kind_contenders(FP8_INPUTS) + FAMILY.kind_contenders("")
    assert "sageattention" not in FAMILY.contenders  # not timed beside every stage by default


def test_a_missing_package_is_named_in_the_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "sageattention", None)  # import raises ImportError
    with pytest.raises(RuntimeError, match=r"sageattention is not installed .*stagelab\[sage\]"):
        int8c.sageattention_contender(*inputs(), scale=0.125, causal=False)


def test_the_contender_runs_on_a_private_copy_of_k(fake_sage):
    q, k, v = inputs()
    before = k.clone()
    run = int8c.sageattention_contender(q, k, v, scale=0.125, causal=True)
    run()
    assert torch.equal(k, before)  # the family's K is never written
    first, second = fake_sage
    assert first["k"] is second["k"] and first["k"] is not k  # one copy, made outside the timed call
    assert first["layout"] == "HND" and first["causal"] and first["scale"] == 0.125 and first["smooth_k"]


def test_bshd_views_go_in_as_they_are(fake_sage):
    q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in inputs())
    int8c.sageattention_contender(q, k, v, scale=0.125, causal=False)
    assert fake_sage[0]["k"].stride() == k.stride()


@pytest.mark.parametrize("kwargs, causal, message", [
    ({"kv_len": 12}, True, "causal kernel needs equal lengths .* 9 queries and 12 keys"),
    ({"shape": (1, 4, 9, 80)}, False, r"head_dim \[64, 96, 128\], not 80"),
])
def test_problems_it_cannot_take_are_refused_with_the_reason(fake_sage, kwargs, causal, message):
    with pytest.raises(RuntimeError, match=message):
        int8c.sageattention_contender(*inputs(**kwargs), scale=0.125, causal=causal)
    assert not fake_sage  # refused before any call


def test_a_failing_first_call_is_recorded_as_unable_to_run(monkeypatch):
    def broken(*args, **kwargs):
        raise AssertionError("Input tensors must be on cuda.")

    monkeypatch.setitem(sys.modules, "sageattention", types.SimpleNamespace(sageattn=broken))
    with pytest.raises(RuntimeError, match="sageattention cannot run this problem: AssertionError: Input tensors"):
        int8c.sageattention_contender(*inputs(), scale=0.125, causal=False)


def test_the_timing_step_records_it_unavailable_for_int8_stages_only(monkeypatch):
    monkeypatch.setitem(sys.modules, "sageattention", None)
    shape = FAMILY.parse_problem("test", {"shape": [1, 2, 5, 64]})[0]
    for kind, expected in ((INT8_INPUTS, {f"sageattention/{shape.tag}"}), ("", set())):
        ctx = types.SimpleNamespace(family=FAMILY, stage=types.SimpleNamespace(input_kind=kind),
                                    params=types.SimpleNamespace(timing=types.SimpleNamespace(contenders=())))
        unavailable = {}
        assert _contenders(ctx, {}, shape, inputs((1, 2, 5, 64), kv_heads=2), unavailable) == {}
        assert set(unavailable) == expected and all("not installed" in r for r in unavailable.values())


def test_the_output_function_also_copies_k(fake_sage):
    q, k, v = inputs()
    before = k.clone()
    assert int8c.sageattention_output(q, k, v, 0.125, False).shape == q.shape and torch.equal(k, before)
