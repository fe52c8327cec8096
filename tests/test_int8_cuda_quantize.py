"""The INT8 stage's CUDA quantizer, its Python side without a GPU: what it refuses before any launch
(with quantize.py's messages), the outputs it allocates, V rebuilt from V^T, the `quantizing` timed
launch (the quantizer's kernels then the attention's, on the same buffers) and how its second timing
reaches the run's metrics. tests/test_int8_quantize_gpu.py runs the kernels themselves."""

import re
import types

import pytest
import torch

import stagelab.families.sdpa.int8.kernel as int8_kernel
from stagelab.core import metrics as m
from stagelab.core.errors import InputError
from stagelab.families.sdpa import FAMILY, FP8_INPUTS, INT8_INPUTS, Shape
from stagelab.families.sdpa.fp8.quantize import E4M3
from stagelab.families.sdpa.int8 import DEFAULT_RECIPE, quantize_int8_qkv
from stagelab.families.sdpa.int8.cuda_quantize import allocate_operands, v_from_vt, validate_cuda_quantize
from stagelab.families.sdpa.int8.operands import padded_keys, vt_operand
from stagelab.families.sdpa.kinds import QUANTIZING
from stagelab.measure.results import PARENT_PREFIX, TimingReport, variant_label
from stagelab.measure.steps import _contenders
from stagelab.measure.timing import summarize
from stagelab.record.flatten import timing_metrics

WITH_QUANTIZER = types.SimpleNamespace(has_int8=lambda: True, has_int8_quantize=lambda: True)


def qkv(b=1, h=2, sq=45, d=64, hkv=None, sk=None, dtype=torch.float16, seed=0):
    generator = torch.Generator().manual_seed(seed)
    hkv, sk = hkv or h, sk or sq
    return tuple(torch.randn(dims, generator=generator).to(dtype) for dims in ((b, h, sq, d), (b, hkv, sk, d),
                                                                                (b, hkv, sk, d)))


@pytest.mark.parametrize("sk", [1, 15, 16, 45, 77, 129, 1031])
def test_v_from_vt_inverts_vt_operand(sk):
    v8 = (torch.randn((2, 3, sk, 64), generator=torch.Generator().manual_seed(sk)) * 50).to(E4M3)
    vt = vt_operand(v8)
    back = v_from_vt(vt, sk)
    assert back.dtype == E4M3 and back.is_contiguous() and back.shape == v8.shape
    assert torch.equal(back.view(torch.uint8), v8.view(torch.uint8))


@pytest.mark.parametrize("dims", [dict(sq=1, sk=1), dict(sq=45), dict(h=4, hkv=2, sq=77, sk=129, d=128),
                                  dict(b=2, sq=130, sk=1031)])
def test_the_allocated_outputs_are_what_the_stage_reads(dims):
    q, k, v = qkv(**dims)
    int8, vt = allocate_operands(q, k)
    reference = quantize_int8_qkv(q, k, v, **DEFAULT_RECIPE.quantizer_args())
    for name in ("q", "k", "v", "q_descale", "k_descale", "v_descale", "k_mean"):
        mine, theirs = getattr(int8, name), getattr(reference, name)
        assert mine.shape == theirs.shape and mine.dtype == theirs.dtype and mine.is_contiguous(), name
    assert (int8.q_block, int8.k_block, int8.v_scaling, int8.smooth_k, int8.source_dtype) == \
        (reference.q_block, reference.k_block, reference.v_scaling, True, q.dtype)
    assert vt.dtype == E4M3 and vt.is_contiguous() and vt.shape == vt_operand(reference.v).shape
    assert vt.shape[-1] == padded_keys(k.shape[2])


def test_a_module_without_the_quantizer_is_refused():
    for module in (types.SimpleNamespace(), types.SimpleNamespace(has_int8_quantize=lambda: False)):
        with pytest.raises(InputError, match="exports no INT8 quantizer"):
            validate_cuda_quantize(module, *qkv())


def refused_as_the_torch_quantizer(call, q, k, v) -> str:
    """call(q, k, v) raises quantize_int8_qkv's InputError word for word; its message."""
    with pytest.raises(InputError) as torch_side:
        quantize_int8_qkv(q, k, v)
    with pytest.raises(InputError, match=re.escape(str(torch_side.value))):
        call(q, k, v)
    return str(torch_side.value)


def test_inf_and_nan_are_refused_with_the_torch_quantizers_message():
    q, k, v = qkv(sq=77)
    k[0, 1, 70, 5] = float("nan")
    message = refused_as_the_torch_quantizer(lambda *qkv: validate_cuda_quantize(WITH_QUANTIZER, *qkv), q, k, v)
    assert "k: batch 0, head 1, block 0 (tokens 0-76) holds 1 inf or NaN" in message


@pytest.mark.parametrize("change, message", [
    (lambda q, k, v: (q.float(), k.float(), v.float()), "the CUDA quantizer takes float16, bfloat16"),
    (lambda q, k, v: tuple(torch.zeros(*t.shape[:3], 96, dtype=t.dtype) for t in (q, k, v)), "head_dim 96"),
    (lambda q, k, v: (q, torch.zeros(k.numel() + 1, dtype=k.dtype)[1:].view(k.shape), v), "k: base address"),
    (lambda q, k, v: (q, k, v), "are on cpu; the CUDA quantizer runs on a CUDA device"),
    (lambda q, k, v: (q, k[:, :1], v), "k and v must share one shape"),
])
def test_what_the_kernels_cannot_take_is_refused_before_any_launch(change, message):
    with pytest.raises(InputError, match=message):
        validate_cuda_quantize(WITH_QUANTIZER, *change(*qkv()))


def test_a_bshd_view_is_aligned_as_the_kernels_need():
    q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in qkv(h=4, hkv=2, sq=45, sk=77))
    with pytest.raises(InputError, match="runs on a CUDA device"):  # past every other check
        validate_cuda_quantize(WITH_QUANTIZER, q, k, v)


class RecordingModule:
    """A stand-in for a built INT8 stage: records the binding calls the launches make."""

    def __init__(self):
        self.calls = []

    def has_int8(self):
        return True

    def has_int8_quantize(self):
        return True

    def int8_quantize(self, *args):
        self.calls.append(("int8_quantize", args))

    def int8_forward(self, *args):
        self.calls.append(("int8_forward", args))


def test_the_quantizing_launch_runs_the_quantizer_then_the_attention_on_the_same_buffers(monkeypatch):
    """Checks and allocation once, outside; each launch: int8_quantize into the buffers, then
    int8_forward reading those very tensors (V^T included) into `out`."""
    module = RecordingModule()
    q, k, v = qkv(h=4, hkv=2, sq=77, sk=129)
    made = {}

    def cuda_quantize(mod, *inputs):
        assert mod is module and all(a is b for a, b in zip(inputs, (q, k, v)))
        made["int8"], made["vt"] = allocate_operands(q, k)
        return made["int8"], made["vt"]

    monkeypatch.setattr(int8_kernel, "cuda_quantize", cuda_quantize)
    monkeypatch.setattr(int8_kernel, "validate_int8_inputs", lambda inputs, causal: None)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: types.SimpleNamespace(cuda_stream=7))
    out = torch.empty_like(q)
    launch = int8_kernel.int8_launch_quantizing(module, (q, k, v), out, 0.125, True)
    assert module.calls == []  # nothing launched while the launch is built (the first run is cuda_quantize's)
    launch()
    (first, quantize_args), (second, forward_args) = module.calls
    int8, vt = made["int8"], made["vt"]
    assert first == "int8_quantize" and second == "int8_forward"
    expected = (q, k, v, int8.q, int8.q_descale, int8.k, int8.k_descale, int8.k_mean, vt, int8.v_descale,
                int8.v_mean, 7)
    assert all(a is b for a, b in zip(quantize_args[:-1], expected[:-1])) and quantize_args[-1] == 7
    assert all(a is b for a, b in zip(forward_args[:8], [int8.q, int8.k, vt, int8.q_descale, int8.k_descale,
                                                        int8.v_descale, int8.v_mean, out]))
    assert forward_args[8:] == (0.125, True, 7)


def test_the_family_gives_int8_stages_with_the_quantizer_a_quantizing_variant(monkeypatch):
    built = []
    monkeypatch.setattr(int8_kernel, "int8_launch_quantizing",
                        lambda module, inputs, out, scale, causal: built.append((module, scale, causal)) or "launch")
    shape = Shape(1, 2, 45, 64, True)
    inputs = qkv()
    out = torch.empty_like(inputs[0])
    assert FAMILY.launch_variants(WITH_QUANTIZER, shape, inputs, out, INT8_INPUTS) == {QUANTIZING: "launch"}
    assert built == [(WITH_QUANTIZER, 0.125, True)]
    without = types.SimpleNamespace(has_int8=lambda: True)
    assert FAMILY.launch_variants(without, shape, inputs, out, INT8_INPUTS) == {}
    assert FAMILY.launch_variants(WITH_QUANTIZER, shape, inputs, out, FP8_INPUTS) == {}
    assert FAMILY.launch_variants(WITH_QUANTIZER, shape, inputs, out, "") == {}


def test_the_timing_step_times_the_variant_of_the_runs_stage_only(monkeypatch):
    monkeypatch.setattr(FAMILY, "module_launch", lambda module, shape, inputs, out, kind: f"plain {module}")
    monkeypatch.setattr(FAMILY, "launch_variants",
                        lambda module, shape, inputs, out, kind: {QUANTIZING: f"quantizing {module}"})
    shape = Shape(1, 2, 45, 64, False)
    stage = types.SimpleNamespace(id="s19_int8", input_kind=INT8_INPUTS)
    registry = types.SimpleNamespace(get=lambda stage_id: stage)
    ctx = types.SimpleNamespace(family=FAMILY, stage=stage, registry=registry,
                                params=types.SimpleNamespace(timing=types.SimpleNamespace(contenders=())))
    builds = {"s19_int8": types.SimpleNamespace(module="stage", stage_id="s19_int8"),
              PARENT_PREFIX + "s19_int8": types.SimpleNamespace(module="parent", stage_id="s19_int8")}
    monkeypatch.setattr(FAMILY, "kind_contenders", lambda kind: ())
    contenders = _contenders(ctx, builds, shape, qkv(), {})
    assert contenders == {"s19_int8": "plain stage", "s19_int8+quantizing": "quantizing stage",
                          PARENT_PREFIX + "s19_int8": "plain parent"}


MISSION = Shape(2, 8, 512, 64, False)
LONG = Shape(4, 16, 4096, 128, False)


def rows(contender, p50_by_shape):
    return [summarize([p50] * 100, contender=contender, shape=shape, mode="cold")
            for shape, p50 in p50_by_shape.items()]


def variant_timing():
    stats = (rows("s19_int8", {MISSION: 10.0, LONG: 100.0}) + rows(variant_label("s19_int8", QUANTIZING),
                                                                     {MISSION: 20.0, LONG: 125.0})
             + rows(PARENT_PREFIX + "s18_three_turns", {MISSION: 12.0, LONG: 150.0})
             + rows("sdpa_flash", {MISSION: 30.0, LONG: 160.0}))
    return TimingReport(stats, "s19_int8", "sdpa_", "cold", floor_us={"cold": 4.0})


def test_a_variant_is_not_a_contender_of_the_stage():
    report = variant_timing()
    assert report.variants() == (QUANTIZING,)
    table = report.speedups().set_index("shape")
    assert not [c for c in table.columns if QUANTIZING in c]
    assert table.loc[MISSION.tag, "speedup_vs_parent"] == pytest.approx(1.2)
    assert table.loc[MISSION.tag, "speedup_vs_best"] == pytest.approx(3.0)


def test_the_variants_timing_against_the_parent_and_libraries():
    variant = variant_timing().variant_report(QUANTIZING)
    assert variant.variants() == ()
    table = variant.speedups().set_index("shape")
    assert table.loc[MISSION.tag, "stage_p50_us"] == 20.0
    assert table.loc[LONG.tag, "speedup_vs_parent"] == pytest.approx(1.2)
    assert table.loc[MISSION.tag, "speedup_vs_flash"] == pytest.approx(1.5)


def test_both_timings_are_published_under_their_own_keys():
    flat = timing_metrics(variant_timing(), MISSION.tag)
    assert flat[m.P50_US.key(MISSION.tag)] == 10.0 and flat[m.MISSION_P50_US.key()] == 10.0
    assert flat[m.VARIANT.key(QUANTIZING, m.P50_US.key(MISSION.tag))] == 20.0
    assert flat["variant/quantizing/p50_us/4x16x4096x128"] == 125.0
    assert flat[m.VARIANT.key(QUANTIZING, m.MISSION_P50_US.key())] == 20.0
    assert flat[m.VARIANT.key(QUANTIZING, m.speedup_geomean(m.PARENT).key())] == pytest.approx((0.6 * 1.2) ** 0.5)
    assert flat[m.speedup_geomean(m.PARENT).key()] == pytest.approx((1.2 * 1.5) ** 0.5)
    assert not any(key.startswith("speedup_vs_s19") for key in flat)
    assert m.VARIANT.key(QUANTIZING, m.TIMING_FLOOR_US.key("cold")) not in flat  # one floor, the stage's
