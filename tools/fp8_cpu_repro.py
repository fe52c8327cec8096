"""CPU emulation of s9_fp8's arithmetic, to find why it fails on large-magnitude inputs (issue 28).

s9 (kernels/sdpa/fp8/, WgFp8Tile, WgAttentionTile::softmax) per key tile of BLOCK_N keys: S = Q8.K8^T on
e4m3 wgmma (k32 steps, the first with C = 0), the row max of the raw S times scale*log2(e),
p' = ex2(s*mul + 8 - max) (FOLD_P_SCALE), row sum of p' in fp32, P8 = e4m3(p'), O = O*correction,
then O += P8.Vt (k32 steps accumulating into O); out = O * v_descale / l.

The one thing a float32 matmul does not reproduce is how the tensor core adds e4m3 products: its
"fp32" accumulator keeps about 13 mantissa bits (SageAttention2: FP22, e8m13; DeepSeek-V3: about
14 bits on H800; s9's own log v6 saw it in the row sums). Model (Fasi et al.'s for fp16 tensor cores,
with the FP8 widths): per k32 step the products are exact, every addend (the 32 products and C) is
aligned to the largest one's binade and truncated below 2^(e_max - ALIGN_BITS), and the sum is
truncated to ACC_MANTISSA bits. `accumulation` picks: "fp32" (exact products, float32 sums: what
the lab's emulation assumes), "fp22" (the model) or "f16" (QK_F16: the same e4m3 values, exact in
fp16, on the fp16 wgmma, k16 steps, modelled as float32-wide: addends aligned to the largest with
F16_ALIGN_BITS and the sum truncated to float32's 23 bits, as Fasi et al. measured fp16 tensor
cores with float32 accumulation; an assumption the GPU check tests, not a measurement).

    PYTHONPATH=lib python tools/fp8_cpu_repro.py
"""

from __future__ import annotations

import math
import sys

import torch

from stagelab.measure.checks import error_budget
from stagelab.families.sdpa import FA3_ATOL_MAGNITUDE
from stagelab.families.sdpa.fp8 import quantize_qkv
from stagelab.families.sdpa.fp8.emulation import emulate_fp8_attention
from stagelab.families.sdpa.reference import attention, default_scale

E4M3 = torch.float8_e4m3fn
K_STEP = 32          # k of one e4m3 wgmma
ACC_MANTISSA = 13    # FP22's explicit mantissa bits
ALIGN_BITS = 13      # bits kept below the largest addend's leading bit inside one k32 step
PROMOTED = "fp22-tile"  # P.V: FP22 inside one key tile, the tiles summed in float32 (two-level)
# PV_PROMOTE_D128=2 (kPvPromoteHalves): the same by output column halves, each half's P.V its own
# wgmmas and FADDs. Each output element's k32 steps and FADD are the ones of PROMOTED (the FP22
# model aligns per element), so the two must agree bit for bit: the model checks the split.
PROMOTED_HALVES = "fp22-halves"
K_STEP_F16 = 16      # k of one fp16 wgmma
F16_ALIGN_BITS = 24  # fp16 wgmma with f32 accumulation: float32's 24-bit significand below the largest addend
F32_MANTISSA = 23
QK_F16_BLOCK_N_D128 = 128  # QK_F16 at head_dim 128: fp16 K fits 128-key tiles only (fp8/layout.cuh's Layout)
# (accumulation: (k per wgmma step, alignment bits, sum mantissa bits)) of the tensor-core models
TENSOR_CORE = {"fp22": (K_STEP, ALIGN_BITS, ACC_MANTISSA), "f16": (K_STEP_F16, F16_ALIGN_BITS, F32_MANTISSA)}
P_OFFSET = 8         # FA3's Max_offset (kPExp2Offset)
LOG2E = math.log2(math.e)


def truncate_mantissa(x: torch.Tensor, bits: int) -> torch.Tensor:
    """x rounded toward zero to `bits` explicit mantissa bits (float64 in and out)."""
    exponent = torch.floor(torch.log2(x.abs().clamp_min(1e-300)))
    step = torch.exp2(exponent - bits)
    return torch.where(x == 0, x, torch.trunc(x / step) * step)


def mma_step(products: torch.Tensor, c: torch.Tensor, accumulation: str) -> torch.Tensor:
    """C + sum(products[..., k]) for one wgmma step, float64 in and out."""
    if accumulation == "fp32":
        return (c.float() + products.float().sum(-1)).double()
    _, align_bits, sum_bits = TENSOR_CORE[accumulation]
    addends = torch.cat([products, c.unsqueeze(-1)], dim=-1)
    e_max = torch.floor(torch.log2(addends.abs().amax(-1, keepdim=True).clamp_min(1e-300)))
    step = torch.exp2(e_max - align_bits)
    aligned = torch.trunc(addends / step) * step
    return truncate_mantissa(aligned.sum(-1), sum_bits)


def mma(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, accumulation: str) -> torch.Tensor:
    """C + A.B^T in wgmma k steps (32 for e4m3, 16 for "f16"): a [m, k], b [n, k] (exact e4m3
    values as float64), c [m, n]."""
    k_step = TENSOR_CORE[accumulation][0] if accumulation in TENSOR_CORE else K_STEP
    for k0 in range(0, a.shape[-1], k_step):
        products = a[:, None, k0:k0 + k_step] * b[None, :, k0:k0 + k_step]
        c = mma_step(products, c, accumulation)
    return c


def kernel_head(q8, k8, v8, mul: float, v_descale: float, causal: bool, block_n: int, accumulation: str,
                pv_accumulation: str | None = None):
    """One head of s9 (float64 tensors holding e4m3 values); returns [s, d] float64."""
    s, d = q8.shape
    f32 = torch.float32
    row_max = torch.full((s, 1), -math.inf, dtype=f32)
    row_sum = torch.zeros((s, 1), dtype=f32)
    o = torch.zeros((s, d), dtype=torch.float64)
    rows = torch.arange(s)[:, None]
    for key0 in range(0, s, block_n):
        keys = torch.arange(key0, min(s, key0 + block_n))
        pad = block_n - keys.numel()  # the tail tile's missing keys are zero rows, masked
        k_tile = torch.cat([k8[keys], torch.zeros((pad, d), dtype=k8.dtype)])
        v_tile = torch.cat([v8[keys], torch.zeros((pad, d), dtype=v8.dtype)])
        raw = mma(q8, k_tile, torch.zeros((s, block_n), dtype=torch.float64), accumulation).to(f32)
        key_idx = torch.arange(key0, key0 + block_n)[None, :]
        visible = (key_idx < s) & ((key_idx <= rows) if causal else True)
        raw = raw.masked_fill(~visible, -math.inf)
        new_max = torch.maximum(row_max, raw.amax(-1, keepdim=True) * mul)
        base = torch.where(new_max == -math.inf, torch.zeros_like(new_max), new_max)
        correction = torch.exp2(row_max - base)
        row_max = new_max
        # fma(s, mul, 8 - base): one rounding, as the FFMA
        p = torch.exp2((raw.double() * mul + (P_OFFSET - base).double()).to(f32))
        row_sum = row_sum * correction + p.sum(-1, keepdim=True)
        p8 = p.to(E4M3).double()
        o = (o.to(f32) * correction).double()
        vt = v_tile.transpose(0, 1).contiguous()
        if pv_accumulation == PROMOTED:  # the tile's P.V in fresh accumulators, added to O by FADDs
            o = (o.to(f32) + mma(p8, vt, torch.zeros_like(o), "fp22").to(f32)).double()
        elif pv_accumulation == PROMOTED_HALVES:  # columns [0, d/2) then [d/2, d), one o_tile half each
            o = promoted_halves(o, p8, vt)
        else:
            o = mma(p8, vt, o, pv_accumulation or accumulation)
    return o * v_descale / row_sum.double()


def promoted_halves(o: torch.Tensor, p8: torch.Tensor, vt: torch.Tensor) -> torch.Tensor:
    """O += P8.Vt^T by output column halves (kPvPromoteHalves): each half's P.V in fresh FP22
    accumulators (m64n(d/2)k32 steps), added to that half of O in float32."""
    half = o.shape[-1] // 2
    o = o.to(torch.float32)
    for cols in (slice(0, half), slice(half, None)):
        tile = mma(p8, vt[cols], torch.zeros_like(o[:, cols], dtype=torch.float64), "fp22").to(torch.float32)
        o[:, cols] = o[:, cols] + tile
    return o.double()


def kernel_output(fp8, causal: bool, accumulation: str, pv_accumulation: str | None = None) -> torch.Tensor:
    b, h, s, d = fp8.q.data.shape
    block_n = 128 if d == 64 else 192  # stages.yaml: BLOCK_N_D64, BLOCK_N_D128
    if accumulation == "f16" and d == 128:
        block_n = QK_F16_BLOCK_N_D128
    out = torch.empty((b, h, s, d), dtype=torch.float64)
    scale = default_scale(d)
    for bi in range(b):
        for hi in range(h):
            q8, k8, v8 = (t.data[bi, hi].double() for t in (fp8.q, fp8.k, fp8.v))
            score_scale = torch.tensor(scale, dtype=torch.float32) * fp8.q.descale[bi, hi] * fp8.k.descale[bi, hi]
            mul = (score_scale * torch.tensor(LOG2E, dtype=torch.float32)).item()  # init(): scale * log2e in fp32
            out[bi, hi] = kernel_head(q8, k8, v8, mul, fp8.v.descale[bi, hi].item(), causal, block_n, accumulation,
                                         pv_accumulation)
    return out


DISTRIBUTIONS = {
    "normal": lambda g, shape: [torch.randn(shape, generator=g) for _ in range(3)],
    "large": lambda g, shape: [30 * torch.randn(shape, generator=g), 30 * torch.randn(shape, generator=g),
                               200 * torch.randn(shape, generator=g)],
    "positive": lambda g, shape: [torch.rand(shape, generator=g) for _ in range(3)],
    "outlier": lambda g, shape: outlier_channels(g, [torch.randn(shape, generator=g) for _ in range(3)]),
}
OUTLIER_CHANNELS, OUTLIER_FACTOR = 4, 100.0  # as tools/fp8_large_check.py: a few channels 100x the rest


def outlier_channels(g: torch.Generator, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """The same few head-dim channels of q, k and v scaled by OUTLIER_FACTOR."""
    channels = torch.randperm(tensors[0].shape[-1], generator=g)[:OUTLIER_CHANNELS]
    for t in tensors:
        t[..., channels] *= OUTLIER_FACTOR
    return tensors


# (label, Q.K^T accumulation, P.V accumulation)
MODELS = (
    ("s9 logic, fp32 GEMMs", "fp32", "fp32"),
    ("s9 on FP22 (today)", "fp22", "fp22"),
    ("P.V promoted only", "fp22", PROMOTED),
    ("Q.K^T fp32 only", "fp32", "fp22"),
    ("Q.K^T fp32 + P.V promoted", "fp32", PROMOTED),
    ("QK_F16 (fp16 wgmma model)", "f16", "fp22"),
    ("QK_F16 + P.V promoted", "f16", PROMOTED),
    ("QK_F16 + P.V by halves", "f16", PROMOTED_HALVES),
)


def compare(dist: str, shape, causal: bool, dtype=torch.float16, seed: int = 0) -> None:
    """Max error against float64 on the dequantized inputs, and err / budget (the lab's rule), per model."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (t.to(dtype) for t in DISTRIBUTIONS[dist](g, shape))
    fp8 = quantize_qkv(q, k, v)
    scale = default_scale(shape[-1])
    ref = attention(*fp8.dequantized(torch.float64), scale, causal, torch.float64)
    budget = error_budget(ref, emulate_fp8_attention(fp8, scale, causal), dtype, FA3_ATOL_MAGNITUDE)
    print(f"{dist} {'x'.join(map(str, shape))} causal={int(causal)}: emulation error {budget.lowprec_err:.4g}, "
          f"budget {budget.bound:.4g}", flush=True)
    for label, qk, pv in MODELS:
        out = kernel_output(fp8, causal, qk, pv).to(dtype).double()
        err = (out - ref).abs()
        worst = int(err.argmax())
        print(f"    {label:28s} error {err.max():9.4g} = {err.max() / budget.lowprec_err:5.2f}x emulation, "
              f"err/budget {err.max() / budget.bound:5.2f}  (worst element {out.flatten()[worst]:.4g}, "
              f"exact {ref.flatten()[worst]:.4g})", flush=True)


CASES = (
    ("large", (1, 2, 77, 64), False),
    ("large", (1, 1, 333, 128), True),
    ("large", (1, 1, 700, 64), False),
    ("positive", (1, 1, 1500, 64), False),
    ("positive", (1, 1, 333, 128), True),
    ("positive", (1, 1, 1000, 128), False),  # over budget on the H100 without P.V promoted (3.5x emulation)
    ("normal", (1, 1, 700, 64), False),
    ("outlier", (1, 2, 77, 64), False),
    ("outlier", (1, 1, 333, 128), True),
)


def main(argv=None) -> int:
    """Every case, or those of the distributions named on the command line."""
    wanted = set(argv or []) or set(DISTRIBUTIONS)
    unknown = wanted - set(DISTRIBUTIONS)
    if unknown:
        raise SystemExit(f"unknown distributions {sorted(unknown)}; known: {sorted(DISTRIBUTIONS)}")
    for dist, shape, causal in CASES:
        if dist in wanted:
            compare(dist, shape, causal)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
