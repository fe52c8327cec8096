"""The INT8 stage's Python side, without a GPU: V^T's permuted, padded layout, input validation, the
wrapper's refusal of a module without an INT8 entry, and the family routing the `int8` kind."""

from dataclasses import replace

import pytest
import torch

from stagelab.core.errors import InputError
from stagelab.families.sdpa import FAMILY, FP8_INPUTS, INT8_INPUTS, Shape
from stagelab.families.sdpa.distributions import OUTLIER
from stagelab.families.sdpa.fp8 import check_fp8_all
from stagelab.families.sdpa.fp8.quantize import E4M3
from stagelab.families.sdpa.int8 import (DEFAULT_RECIPE, Int8CheckResult, Int8Inputs, check_int8_all,
                                         emulate_int8_attention, quantize_int8_qkv)
from stagelab.families.sdpa.int8.kernel import (Int8StageKernel, validate_int8_inputs, validate_int8_output,
                                                vt_operand)
from stagelab.families.sdpa.int8.operands import key_of, padded_keys, vt_keys
from stagelab.measure.family_checks import check_stage

SHAPE = Shape(1, 2, 45, 64, False)


def int8_inputs(shape=SHAPE, dtype=torch.float16, seed=0, **recipe):
    q, k, v = FAMILY.make_inputs(shape, dtype, seed, "cpu")
    return quantize_int8_qkv(q, k, v, **{**DEFAULT_RECIPE.quantizer_args(), **recipe})


def random_e4m3(shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=generator) * 50).to(E4M3)


def fp8_key_of(k):
    """kernels/sdpa/fp8/wgmma8.cuh's fp8_key_of, written out again (not the module's key_of)."""
    return 16 * (k // 16) + 8 * ((k % 4) // 2) + 2 * ((k % 16) // 4) + (k % 2)


def vt_by_loop(v8):
    """V^T by its definition (int8/operands.py), element by element:
    vt[b, h, d, 32 g + k] = v8[b, h, 32 g + key_of(k), d], 0 past the keys, rows padded to 16 keys."""
    b, h, sk, d = v8.shape
    sk_pad = -(-sk // 16) * 16
    raw = v8.view(torch.uint8)
    vt = torch.zeros((b, h, d, sk_pad), dtype=torch.uint8)
    for column in range(sk_pad):
        key = 32 * (column // 32) + fp8_key_of(column % 32)
        if key < sk:
            vt[:, :, :, column] = raw[:, :, key, :]
    return vt


def test_key_of_is_a_permutation_of_one_key_group_but_not_its_own_inverse():
    keys = [key_of(k) for k in range(32)]
    assert sorted(keys) == list(range(32)) and keys == [fp8_key_of(k) for k in range(32)]
    assert keys[:8] == [0, 1, 8, 9, 2, 3, 10, 11]
    assert [keys[k] for k in keys] != list(range(32))  # so the loop below tells key_of from its inverse
    assert torch.equal(key_of(torch.arange(32)), torch.tensor(keys))


@pytest.mark.parametrize("dims", [(1, 2, 45, 64), (2, 3, 77, 128), (1, 1, 1, 64), (1, 2, 32, 64),
                                  (1, 1, 100, 64), (2, 1, 144, 128)])
def test_vt_operand_matches_the_loop(dims):
    v8 = random_e4m3(dims, seed=dims[2])
    vt = vt_operand(v8)
    assert vt.dtype == E4M3 and vt.is_contiguous()
    assert vt.shape == (dims[0], dims[1], dims[3], padded_keys(dims[2])) and vt.shape[-1] % 16 == 0
    assert torch.equal(vt.view(torch.uint8), vt_by_loop(v8))


def test_vt_operand_of_a_bshd_view_equals_the_contiguous_one():
    v8 = random_e4m3((2, 45, 3, 64))  # [B, Sk, Hkv, D] memory
    view = v8.transpose(1, 2)
    assert not view.is_contiguous()
    assert torch.equal(vt_operand(view).view(torch.uint8), vt_operand(view.contiguous()).view(torch.uint8))


@pytest.mark.parametrize("sk", [45, 77, 96])
def test_p_in_fragment_order_times_vt_is_p_times_v(sk):
    """What the kernel computes with V^T: P's A fragment holds key key_of(k) at k, so P read at
    vt_keys (0 past the keys) times V^T's rows is P.V, whatever the padding holds in P."""
    v8 = random_e4m3((1, 2, sk, 64), seed=sk)
    p = torch.rand((1, 2, 5, sk), dtype=torch.float64)
    keys = vt_keys(sk)
    p_fragment = torch.where(keys < sk, p[..., keys.clamp(max=sk - 1)], torch.full_like(keys, 7, dtype=p.dtype))
    pv = p_fragment @ vt_operand(v8).double().transpose(-1, -2)
    assert torch.allclose(pv, p @ v8.double(), rtol=0, atol=1e-9)  # sums in another order


def test_vt_operand_rejects_what_is_not_e4m3_v():
    with pytest.raises(InputError, match="vt_operand takes e4m3 V"):
        vt_operand(torch.zeros(1, 2, 45, 64, dtype=torch.int8))
    with pytest.raises(InputError, match="vt_operand takes e4m3 V"):
        vt_operand(torch.zeros(2, 45, 64).to(E4M3))


@pytest.mark.parametrize("shape", [SHAPE, Shape(2, 4, 77, 128, True, kv_heads=2, kv_seq_len=133, layout="bshd"),
                                   Shape(1, 3, 130, 64, False, kv_heads=1, kv_seq_len=45)])
def test_the_default_recipes_operands_pass(shape):
    inputs = int8_inputs(shape)
    validate_int8_inputs(inputs, require_cuda=False, causal=shape.causal)
    validate_int8_output(inputs, torch.empty_like(inputs.q, dtype=torch.float16))


def misaligned(t, pad):
    """t's values in memory whose rows are pad elements longer (strides no longer 16-byte multiples)."""
    wide = torch.zeros((*t.shape[:-1], t.shape[-1] + pad), dtype=t.dtype)
    wide[..., :t.shape[-1]] = t
    return wide[..., :t.shape[-1]]


def offset_by_one(t):
    flat = torch.zeros(t.numel() + 1, dtype=t.dtype)
    return flat[1:].view(t.shape).copy_(t)


@pytest.mark.parametrize("field, change, message", [
    ("q", lambda x: x.q.to(torch.float16), "q has dtype torch.float16; the stage takes torch.int8"),
    ("k", lambda x: x.k.to(E4M3), "k has dtype torch.float8_e4m3fn; the stage takes torch.int8"),
    ("v", lambda x: x.v.to(torch.int8), "v has dtype torch.int8; the stage takes torch.float8_e4m3fn"),
    ("k", lambda x: x.k[0], "k must have 4 dims"),
    ("q", lambda x: misaligned(x.q, 8), "q: base address and strides (6480, 3240, 72, 1) (1-byte elements) must be "
                                       "multiples of 16 bytes"),
    ("k", lambda x: offset_by_one(x.k), "k: base address and strides"),
    ("q", lambda x: x.q.transpose(-1, -2).contiguous().transpose(-1, -2), "q's head_dim is not contiguous"),
    ("q_descale", lambda x: torch.ones(1, 2, 3), "q_descale has shape (1, 2, 3); expected [batch, heads, "
                                                  "ceil(seq_len / 64)] = (1, 2, 1)"),
    ("k_descale", lambda x: x.k_descale.double(), "k_descale has dtype torch.float64"),
    ("v_descale", lambda x: torch.ones(1, 2, 1), "v_descale has shape (1, 2, 1); expected [batch, kv_heads, "
                                                  "head_dim] = (1, 2, 64)"),
    ("v_descale", lambda x: torch.ones(1, 64, 2).transpose(1, 2), "v_descale must be contiguous"),
    ("v_mean", lambda x: torch.zeros(1, 2, 1), "v_mean has shape (1, 2, 1); expected [batch, kv_heads, "
                                               "head_dim] = (1, 2, 64)"),
    ("v_mean", lambda x: x.v_mean.half(), "v_mean has dtype torch.float16"),
    ("source_dtype", lambda x: torch.float32, "source_dtype torch.float32 (the output's dtype) is not supported"),
])
def test_bad_inputs_name_the_problem(field, change, message):
    inputs = int8_inputs()
    with pytest.raises(InputError) as err:
        validate_int8_inputs(replace(inputs, **{field: change(inputs)}), require_cuda=False)
    assert message in str(err.value)


@pytest.mark.parametrize("recipe, message", [
    ({"q_block": 32}, "q_block 32 is not the kernel's"),
    ({"k_block": 64}, "k_block 64 is not the kernel's"),
    ({"v_scaling": "head"}, "v_scaling 'head' is not the kernel's"),
])
def test_a_recipe_other_than_the_kernels_is_refused(recipe, message):
    with pytest.raises(InputError, match=message) as err:
        validate_int8_inputs(int8_inputs(**recipe), require_cuda=False)
    assert "DEFAULT_RECIPE.quantizer_args()" in str(err.value)


def test_smooth_k_is_the_callers_choice():
    validate_int8_inputs(int8_inputs(smooth_k=False), require_cuda=False)


def test_smooth_v_is_the_callers_choice_the_kernel_adds_whatever_mean_it_is_given():
    validate_int8_inputs(int8_inputs(smooth_v=False), require_cuda=False)


def test_shapes_head_dim_device_and_causal_are_checked():
    with pytest.raises(InputError, match="head_dim 96 is not supported"):
        validate_int8_inputs(quantize_int8_qkv(*(torch.randn(1, 1, 8, 96, dtype=torch.float16) for _ in range(3))),
                             require_cuda=False)
    inputs = int8_inputs()
    with pytest.raises(InputError, match="k and v must share one shape"):
        validate_int8_inputs(replace(inputs, v=inputs.v[:, :, :40]), require_cuda=False)
    gqa = int8_inputs(Shape(1, 3, 45, 64, False, kv_heads=1))
    with pytest.raises(InputError, match="k and v have 2 heads, which do not divide q's 3"):
        validate_int8_inputs(replace(gqa, k=inputs.k, v=inputs.v), require_cuda=False)
    with pytest.raises(InputError, match="takes Int8Inputs"):
        validate_int8_inputs((inputs.q, inputs.k, inputs.v), require_cuda=False)
    with pytest.raises(InputError, match="q, k, v are on cpu; the kernels run on a CUDA device"):
        validate_int8_inputs(inputs)
    cross = int8_inputs(Shape(1, 2, 77, 64, False, kv_seq_len=45))
    validate_int8_inputs(cross, require_cuda=False)
    with pytest.raises(InputError, match="causal with 45 keys for 77 queries"):
        validate_int8_inputs(cross, require_cuda=False, causal=True)


def test_the_output_is_checked():
    inputs = int8_inputs()
    with pytest.raises(InputError, match="original dtype torch.float16"):
        validate_int8_output(inputs, torch.empty(SHAPE.dims, dtype=torch.bfloat16))
    with pytest.raises(InputError, match=r"out must be a tensor of q's shape \(1, 2, 45, 64\)"):
        validate_int8_output(inputs, torch.empty((1, 2, 46, 64), dtype=torch.float16))
    with pytest.raises(InputError, match="out: base address and strides"):
        validate_int8_output(inputs, misaligned(torch.empty(SHAPE.dims, dtype=torch.float16), 4))


class FakeModule:
    """Only what the wrapper asks a module before any launch: whether it has an INT8 entry."""

    def __init__(self, has_int8):
        if has_int8 is not None:
            self.has_int8 = lambda: has_int8


def test_a_module_without_an_int8_entry_is_refused():
    assert isinstance(FAMILY.stage_kernel(FakeModule(True), "s19", INT8_INPUTS), Int8StageKernel)
    for module in (FakeModule(False), FakeModule(None)):
        with pytest.raises(InputError, match="s18 exports no INT8 entry"):
            FAMILY.stage_kernel(module, "s18", INT8_INPUTS)
    assert Int8StageKernel.input_kind == INT8_INPUTS


def test_the_family_knows_the_int8_kind():
    assert INT8_INPUTS in FAMILY.input_kinds and FP8_INPUTS in FAMILY.input_kinds
    assert FAMILY.kind_checks(INT8_INPUTS) is check_int8_all
    assert FAMILY.kind_checks(FP8_INPUTS) is check_fp8_all
    assert FAMILY.kind_checks("") is None
    assert OUTLIER in FAMILY.distributions_for(INT8_INPUTS) and FAMILY.distributions_for(INT8_INPUTS) == \
        FAMILY.distributions
    assert OUTLIER not in FAMILY.distributions_for("")


def test_call_quantizes_with_the_default_recipe():
    seen = []
    shape = Shape(1, 4, 77, 64, True, kv_heads=2, kv_seq_len=90, layout="bshd")
    inputs = FAMILY.make_inputs(shape, torch.bfloat16, 0, "cpu")
    FAMILY.call(lambda x, out, scale, causal: seen.append((x, scale, causal)), shape, inputs,
                torch.empty(shape.dims), INT8_INPUTS)
    [(x, scale, causal)] = seen
    assert isinstance(x, Int8Inputs) and x.q.dtype == torch.int8 and x.source_dtype == torch.bfloat16
    assert (x.q_block, x.k_block, x.v_scaling, x.smooth_k, x.smooth_v) == (64, 128, "channel", True, True)
    assert scale == 64 ** -0.5 and causal
    validate_int8_inputs(x, require_cuda=False, causal=True)


class EmulatedInt8Kernel:
    """Stands in for a built INT8 stage: the recipe's emulation, exactly the budget's yardstick."""

    input_kind = INT8_INPUTS

    @staticmethod
    def into(x, out, scale, causal):
        validate_int8_inputs(x, require_cuda=False, causal=causal)
        out.copy_(emulate_int8_attention(x, scale, causal, **DEFAULT_RECIPE.emulation_args()))


def test_check_stage_judges_int8_stages_by_the_int8_budget():
    shapes = [Shape(1, 2, 77, 64, True), Shape(1, 4, 45, 128, False, kv_heads=2, kv_seq_len=133, layout="bshd")]
    results = check_stage(FAMILY, EmulatedInt8Kernel(), shapes, ["float16", "bfloat16"], [0], "cpu",
                          distributions=("normal", OUTLIER))
    assert len(results) == 8 and all(isinstance(r, Int8CheckResult) and r.passed for r in results)
    assert {r.distribution for r in results} == {"normal", OUTLIER}
