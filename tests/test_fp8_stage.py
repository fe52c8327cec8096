"""The FP8 stage's wiring, without a GPU: input validation, the registry's `inputs: fp8`, the
family routing an FP8 stage to the FP8 budget, and the helper-kernel gate exemption."""

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from stagelab.core.errors import ConfigError, InputError
from stagelab.families.sdpa import FAMILY, FP8_INPUTS, Shape, StageKernel
from stagelab.families.sdpa.fp8 import Fp8CheckResult, Fp8Tensor, emulate_fp8_attention, quantize_qkv
from stagelab.families.sdpa.fp8.kernel import Fp8StageKernel, validate_fp8_inputs, validate_fp8_output
from stagelab.measure.family_checks import check_stage
from stagelab.core.registry import ResourceGates, load_registry
from stagelab.core.resources import KernelResources, evaluate_gates

ROOT = Path(__file__).resolve().parents[1]
SHAPE = (1, 2, 33, 64)


def fp8_inputs(shape=SHAPE, dtype=torch.float16):
    generator = torch.Generator().manual_seed(0)
    return quantize_qkv(*(torch.randn(shape, generator=generator).to(dtype) for _ in range(3)))


def with_tensor(fp8, name, **changes):
    return replace(fp8, **{name: replace(getattr(fp8, name), **changes)})


def test_valid_inputs_pass():
    validate_fp8_inputs(fp8_inputs(), require_cuda=False)


@pytest.mark.parametrize("name, changes, message", [
    ("k", {"data": torch.zeros(SHAPE, dtype=torch.float16)}, "k.data has dtype torch.float16"),
    ("v", {"descale": torch.ones(2, dtype=torch.float32)}, "v.descale has shape (2,); expected [batch, heads]"),
    ("q", {"descale": torch.ones(1, 2, dtype=torch.float64)}, "q.descale has dtype torch.float64"),
    ("k", {"data": torch.zeros(1, 2, 34, 64, dtype=torch.float8_e4m3fn)}, "q, k, v must share one shape"),
    ("v", {"data": torch.zeros(1, 2, 64, 33, dtype=torch.float8_e4m3fn).transpose(-1, -2)},
     "v.data's head_dim is not contiguous"),
])
def test_bad_inputs_name_the_problem(name, changes, message):
    with pytest.raises(InputError) as err:
        validate_fp8_inputs(with_tensor(fp8_inputs(), name, **changes), require_cuda=False)
    assert message in str(err.value)


def test_unsupported_head_dim_and_wrong_container():
    with pytest.raises(InputError, match="head_dim 96 is not supported"):
        validate_fp8_inputs(fp8_inputs((1, 1, 8, 96)), require_cuda=False)
    with pytest.raises(InputError, match="takes Fp8Inputs"):
        validate_fp8_inputs((torch.zeros(SHAPE),) * 3, require_cuda=False)
    with pytest.raises(InputError, match="must be an Fp8Tensor"):
        validate_fp8_inputs(replace(fp8_inputs(), q=torch.zeros(SHAPE)), require_cuda=False)


def test_cuda_required_and_output_checked():
    fp8 = fp8_inputs()
    with pytest.raises(InputError, match="q.data is on cpu"):
        validate_fp8_inputs(fp8)
    with pytest.raises(InputError, match="original dtype torch.float16"):
        validate_fp8_output(fp8, torch.empty(SHAPE, dtype=torch.bfloat16))


def test_registry_declares_the_fp8_stage():
    registry = load_registry(ROOT / "kernels" / "sdpa" / "stages.yaml")
    stage = registry.get("s9_fp8")
    assert stage.input_kind == FP8_INPUTS and stage.parent == "s6_tma_warpspec"
    assert "QGMMA" in stage.gates.sass_require and stage.gates.helper_kernels == ("transpose_v_kernel", "widen_qk_kernel")
    # head_dim 128's tile and ring are s9's own; head_dim 64's are s6's values, all from the registry
    assert {"BLOCK_N_D64", "BLOCK_N_D128", "STAGES_D64", "STAGES_D128"} <= set(stage.defines)
    assert [s.id for s in registry.stages.values() if s.input_kind == FP8_INPUTS] == ["s9_fp8"]


def test_registry_rejects_a_bad_input_kind(tmp_path):
    (tmp_path / "binding.cpp").write_text("// binding")
    (tmp_path / "a.cu").write_text("// stage")
    (tmp_path / "stages.yaml").write_text("family: sdpa\nbinding: binding.cpp\nstages:\n  - {id: a, inputs: [fp8]}\n")
    with pytest.raises(ConfigError, match="inputs: expected the name"):
        load_registry(tmp_path / "stages.yaml")


class FakeModule:
    def __init__(self, fp8: bool):
        self.fp8 = fp8

    def has_fp8(self):
        return self.fp8


def test_family_picks_the_kernel_by_input_kind():
    assert type(FAMILY.stage_kernel(FakeModule(False), "s6")) is StageKernel
    assert isinstance(FAMILY.stage_kernel(FakeModule(True), "s9", FP8_INPUTS), Fp8StageKernel)
    with pytest.raises(InputError, match="exports no FP8 entry"):
        FAMILY.stage_kernel(FakeModule(False), "s6", FP8_INPUTS)
    with pytest.raises(ConfigError, match="no input kind 'int4'"):
        FAMILY.stage_kernel(FakeModule(True), "s9", "int4")


class EmulatedFp8Kernel:
    """Stands in for a built FP8 stage: the FP8 emulation is exactly on budget's yardstick."""

    input_kind = FP8_INPUTS

    @staticmethod
    def into(fp8, out, scale, causal):
        out.copy_(emulate_fp8_attention(fp8, scale, causal))


def test_check_stage_judges_fp8_stages_by_the_fp8_budget():
    shapes = [Shape(1, 2, 33, 64, True), Shape(1, 2, 17, 128, False)]
    results = check_stage(FAMILY, EmulatedFp8Kernel(), shapes, ["float16", "bfloat16"], [0], "cpu")
    assert len(results) == 4 and all(isinstance(r, Fp8CheckResult) and r.passed for r in results)


def test_call_quantizes_for_an_fp8_stage():
    seen = []
    shape = Shape(1, 2, 9, 64, False)
    inputs = FAMILY.make_inputs(shape, torch.float16, 0, "cpu")
    FAMILY.call(lambda fp8, out, scale, causal: seen.append(fp8), shape, inputs, torch.empty(shape.dims),
                FP8_INPUTS)
    assert isinstance(seen[0].q, Fp8Tensor) and seen[0].q.data.dtype == torch.float8_e4m3fn


def kernel_record(mangled):
    return KernelResources(kernel=mangled, mangled=mangled, arch="sm_90a")


def test_helper_kernels_are_exempt_from_sass_require_only():
    main = kernel_record("_ZN8sdpa_fp810fp8_kernelI6__halfLi64EEEvNS_6ParamsE")
    helper = kernel_record("_ZN8sdpa_fp818transpose_v_kernelILi64EEEvPKh17SdpaTensorStridesPhii")
    gates = ResourceGates(sass_require=("QGMMA",), sass_forbid=("LDL",), helper_kernels=("transpose_v_kernel",))
    opcodes = {main.tag: {"QGMMA": 4}, helper.tag: {"LDL": 1}}
    failed = {(g.gate, g.kernel) for g in evaluate_gates([main, helper], gates, opcodes) if not g.passed}
    assert failed == {("sass_forbids_LDL", helper.tag)}
    without = replace(gates, helper_kernels=())
    failed = {g.gate for g in evaluate_gates([main, helper], without, opcodes) if not g.passed}
    assert "sass_requires_QGMMA" in failed


def fp8_key_of(k):
    """fp8/wgmma8.cuh's fp8_key_of, the key the logical k of P's A fragment stands for."""
    return 16 * (k // 16) + 8 * ((k % 4) // 2) + 2 * ((k % 16) // 4) + (k % 2)


def test_p_fragment_is_the_accumulator_at_permuted_keys():
    """WgFp8Tile::pack_p takes, for register r and byte v0 of k32 slice 0, accumulator index
    4 * (2 * (r // 2)) + 2 * (r % 2) + [0, 1, 4, 5][v0]. In CuTe's layouts (f32 accumulator
    CLayout_64xN; 8-bit A ALayout_64x32) that element sits in A's row, at key fp8_key_of(A's k):
    so P.V over Vt with the permuted keys is P.V."""
    assert sorted(fp8_key_of(k) for k in range(32)) == list(range(32))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for r in range(4):
            for v0 in range(4):
                a_row, a_k = g + 8 * (r % 2), 4 * t + v0 + 16 * (r // 2)
                acc = 4 * (2 * (r // 2)) + 2 * (r % 2) + [0, 1, 4, 5][v0]
                j, e = acc // 4, acc % 4
                acc_row, acc_col = g + 8 * (e // 2), 8 * j + 2 * t + (e % 2)
                assert (acc_row, acc_col) == (a_row, fp8_key_of(a_k))


def swizzled_offset(row_bytes, row, byte):
    """The offset of byte `byte` of row `row` as TMA's SWIZZLE_128B / _64B lays a tile out."""
    off = row * row_bytes + byte
    return off ^ (((off >> 7) & (7 if row_bytes == 128 else 3)) << 4)


def swizzle_of_row(row_bytes, r):
    return r % 8 if row_bytes == 128 else (r // 2) % 4


def byte_perm(x, y, selector):
    data = [(x >> (8 * i)) & 0xFF for i in range(4)] + [(y >> (8 * i)) & 0xFF for i in range(4)]
    return sum(data[(selector >> (4 * i)) & 7] << (8 * i) for i in range(4))


def vt_lane(lane, d, vt_chunk):
    """VtLane's constructor (fp8/vt_transpose.cuh)."""
    tile, row = divmod(lane, 8)
    key, chunk = 8 * (tile % 2) + row, tile // 2
    vt_row = 2 * row + (1 if (tile % 2 == 0) == (row >= 4) else 0)
    swapped = lane // 4 >= 4
    return {"src": key * d, "src_xor": (chunk ^ swizzle_of_row(d, key)) * 16,
            "dst": chunk * 16 * vt_chunk + vt_row * vt_chunk, "dst_xor": swizzle_of_row(vt_chunk, vt_row) * 16,
            "first": 0x7531 if swapped else 0x6420, "second": 0x6420 if swapped else 0x7531}


@pytest.mark.parametrize("d, block_n", [(128, 192), (64, 128), (128, 128)])
def test_in_kernel_transpose_writes_the_pre_pass_layout(d, block_n):
    """transpose_v_tile, emulated: ldmatrix.x4.trans (lane l addresses tile l // 8's row l % 8; lane
    (g, t) gets b16 elements [2t][g] and [2t+1][g] of each 8x8 tile), the byte permutes and stmatrix.x4
    (register j of lane l is tile j's row l // 4, b16 columns 2 (l % 4) and +1) at VtLane's addresses
    turn a swizzled V tile into exactly the Vt tile the pre-pass and TMA gave (keys in fp8_key_of's
    order, rows of one 64- or 128-key chunk), and every tile of every ldmatrix / stmatrix covers eight
    distinct 16-byte bank groups (no bank conflicts)."""
    vt_chunk = 128 if block_n % 128 == 0 else 64
    chunk_stride = d * vt_chunk
    v = torch.randint(0, 256, (block_n, d), generator=torch.Generator().manual_seed(d + block_n)).tolist()
    raw = bytearray(block_n * d)
    for key in range(block_n):
        for byte in range(d):
            raw[swizzled_offset(d, key, byte)] = v[key][byte]
    expected = bytearray(block_n * d)
    for row in range(d):
        for col in range(block_n):
            chunk, col_in_chunk = divmod(col, vt_chunk)
            key = 32 * (col // 32) + fp8_key_of(col % 32)
            expected[chunk * chunk_stride + swizzled_offset(vt_chunk, row, col_in_chunk)] = v[key][row]
    lanes = [vt_lane(lane, d, vt_chunk) for lane in range(32)]
    vt = bytearray(block_n * d)
    for key0 in range(0, block_n, 16):
        for chunk0 in range(0, d // 16, 2):
            src = [key0 * d + ln["src"] + ((chunk0 * 16) ^ ln["src_xor"]) for ln in lanes]
            dst = [(key0 // vt_chunk) * chunk_stride + chunk0 * 16 * vt_chunk + ln["dst"]
                   + ((key0 % vt_chunk) ^ ln["dst_xor"]) for ln in lanes]
            for addresses in (src, dst):
                for tile in range(4):
                    assert len({a % 128 // 16 for a in addresses[8 * tile:8 * tile + 8]}) == 8
            regs = []
            for lane in range(32):
                g, t = divmod(lane, 4)
                b16 = [[raw[src[8 * j + r] + 2 * c] | raw[src[8 * j + r] + 2 * c + 1] << 8 for c in range(8)]
                       for j in range(4) for r in (2 * t, 2 * t + 1)]
                r = [b16[2 * j][g] | b16[2 * j + 1][g] << 16 for j in range(4)]
                ln = lanes[lane]
                regs.append([byte_perm(r[0], r[1], ln["first"]), byte_perm(r[0], r[1], ln["second"]),
                             byte_perm(r[2], r[3], ln["first"]), byte_perm(r[2], r[3], ln["second"])])
            for j in range(4):
                for row in range(8):
                    for col in range(8):
                        word = regs[4 * row + col // 2][j] >> (16 * (col % 2))
                        vt[dst[8 * j + row] + 2 * col] = word & 0xFF
                        vt[dst[8 * j + row] + 2 * col + 1] = (word >> 8) & 0xFF
    assert vt == expected
