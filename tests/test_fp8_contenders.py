"""torch's FP8 attention as the FP8 stage's contenders: timed beside FP8 stages only, quantized
once outside the timed call, and recorded as unavailable (never an error) where torch lacks it."""

import re
import types

import pytest
import torch

from stagelab.families.sdpa import FAMILY, FP8_INPUTS
from stagelab.families.sdpa.fp8 import contenders as fp8c
from stagelab.families.sdpa.fp8.quantize import E4M3
from stagelab.measure.steps import _contenders


def inputs(shape=(2, 3, 5, 64)):
    generator = torch.Generator().manual_seed(0)
    return tuple(torch.randn(shape, generator=generator) for _ in range(3))


def test_only_fp8_stages_meet_the_fp8_contenders():
    assert FAMILY.kind_contenders(FP8_INPUTS) == ("flash_fp8", "cudnn_fp8")
    assert FAMILY.kind_contenders("") == ()


def test_a_torch_without_fp8_attention_is_named_in_the_error(monkeypatch):
    def missing(name):
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(fp8c.importlib, "import_module", missing)
    with pytest.raises(RuntimeError, match=re.escape(f"torch {torch.__version__} has no FP8 attention")):
        fp8c.fp8_contender("cudnn_fp8", *inputs(), scale=0.125, causal=False)


def test_a_missing_descaling_mode_names_the_backend(monkeypatch):
    old_torch = types.SimpleNamespace(DescaleType=types.SimpleNamespace(PER_HEAD=0),
                                      _scaled_dot_product_attention_quantized=lambda *a, **k: None)
    monkeypatch.setattr(fp8c.importlib, "import_module", lambda name: old_torch)
    with pytest.raises(RuntimeError, match="no PER_TENSOR descaling .the cudnn_fp8 backend"):
        fp8c.fp8_contender("cudnn_fp8", *inputs(), scale=0.125, causal=False)


@pytest.mark.parametrize("name, descale_shape", [("flash_fp8", (2, 3)), ("cudnn_fp8", (1, 1, 1, 1))])
def test_inputs_are_quantized_once_with_the_descales_the_mode_asks_for(monkeypatch, name, descale_shape):
    calls = []
    fake = types.SimpleNamespace(DescaleType=types.SimpleNamespace(PER_HEAD=0, PER_TENSOR=1),
                                 _scaled_dot_product_attention_quantized=lambda *a, **k: calls.append((a, k)))
    monkeypatch.setattr(fp8c.importlib, "import_module", lambda module: fake)
    monkeypatch.setattr(fp8c, "_activate_fa3", lambda: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    q, k, v = inputs()
    run = fp8c.fp8_contender(name, q, k, v, scale=0.125, causal=True)
    run()
    (args, kwargs), _ = calls
    assert all(t.dtype == E4M3 for t in args) and kwargs["is_causal"] and kwargs["scale"] == 0.125
    assert kwargs["q_descale"].shape == descale_shape and kwargs["v_descale"].dtype == torch.float32
    dequantized = args[0].float() * (kwargs["q_descale"] if name == "cudnn_fp8" else kwargs["q_descale"][..., None, None])
    assert (dequantized - q).abs().max() <= q.abs().max() / 16  # within e4m3's half ulp of 2^-4


def test_flash_fp8_without_flashattention3_names_the_missing_package(monkeypatch):
    import importlib.util

    from torch.nn import attention

    fake = types.SimpleNamespace(DescaleType=types.SimpleNamespace(PER_HEAD=0, PER_TENSOR=1),
                                 _scaled_dot_product_attention_quantized=lambda *a, **k: None)
    monkeypatch.setattr(fp8c.importlib, "import_module", lambda module: fake)
    monkeypatch.setattr(attention, "current_flash_attention_impl", lambda: None, raising=False)
    monkeypatch.setattr(attention, "activate_flash_attention_impl", lambda impl: pytest.fail("activated"), raising=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(RuntimeError, match="FlashAttention-3, whose package .flash_attn_interface. is not installed"):
        fp8c.fp8_contender("flash_fp8", *inputs(), scale=0.125, causal=False)


def test_the_timing_step_records_unavailable_fp8_contenders_for_fp8_stages_only(monkeypatch):
    def missing(name):
        raise ImportError("gone")

    monkeypatch.setattr(fp8c.importlib, "import_module", missing)
    shape = FAMILY.parse_problem("test", {"shape": [1, 2, 5, 64]})[0]
    for kind, expected in ((FP8_INPUTS, {f"flash_fp8/{shape.tag}", f"cudnn_fp8/{shape.tag}"}), ("", set())):
        ctx = types.SimpleNamespace(family=FAMILY, stage=types.SimpleNamespace(input_kind=kind),
                                    params=types.SimpleNamespace(timing=types.SimpleNamespace(contenders=())))
        unavailable = {}
        assert _contenders(ctx, {}, shape, inputs((1, 2, 5, 64)), unavailable) == {}
        assert set(unavailable) == expected and all("has no FP8 attention" in v for v in unavailable.values())
