"""How s19's P.V may accumulate across key tiles, on a CPU model of the e4m3 tensor core (issue 44).

s19 promotes every key tile's P.V into float32 (O_tile, then O += O_tile): the row-long sum in the
wgmma accumulator (FlashAttention-3's FP8 P.V) failed acceptance's all-positive rows on the GPU
(10.5x the budget at 4099 keys, head_dim 64, 2026-11-28), because the accumulator truncates and
every term has one sign. SageAttention2 names a cure besides promotion: smooth V, i.e. subtract
each channel's mean over the keys before V is quantized and add it back at the end (the rows of P
sum to l, so out = P.(V - mean) / l + mean). The centred terms take both signs, so their
truncations would cancel instead of adding up, and the row-long sum would need no O_tile (the
registers three warpgroups need at head_dim 64, where the row-long variant measured 1.20x).

This script models, on one head of the family's inputs, the recipe's P (float64, e4m3 against each
tile's running max: emulation.py) and four ways to sum P.V, each with V plain or smoothed:
- "exact": float64 sums (the recipe's emulation, the budget's yardstick);
- "per tile": each tile's P.V in fresh FP22 accumulators, added to O in float32 (s19 today);
- "row-long": O rescaled in float32, then the tile's P.V accumulated onto it in FP22 (FA3's FP8).
FP22 is tools/fp8_cpu_repro.py's model of the e4m3 wgmma (per k32 step: addends aligned to the
largest and truncated 13 bits below it, the sum truncated to 13 mantissa bits). Each variant is
judged as the stage is (int8/budget.py): max|out - ref| <= 2 * max|emulation - ref| + atol, ref and
emulation those of its own recipe (V plain or smoothed); its error against float64 truth (attention
on the unquantized inputs) is printed beside it.

    PYTHONPATH=lib python3 tools/int8_pv_accumulation.py [--shape 1x1x4099x64] [--distributions positive normal]

The model is a model: its row-long verdict on positive must match the GPU's failure before its
verdict on smoothed V means anything, and the table prints both.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fp8_cpu_repro import mma  # noqa: E402
from stagelab.families.sdpa.distributions import DISTRIBUTIONS  # noqa: E402
from stagelab.families.sdpa.inputs import FA3_ATOL_MAGNITUDE, make_inputs  # noqa: E402
from stagelab.families.sdpa.int8.emulation import e4m3_probabilities, recipe_operands  # noqa: E402
from stagelab.families.sdpa.int8.quantize import quantize_int8_qkv, quantize_v  # noqa: E402
from stagelab.families.sdpa.int8.recipe import P_MAX  # noqa: E402
from stagelab.families.sdpa.reference import attention, default_scale  # noqa: E402
from stagelab.families.sdpa.shapes import Shape  # noqa: E402
from stagelab.measure.checks import error_budget  # noqa: E402

KEY_TILE = 128  # s19's key tile, one K descale block
SUMS = ("exact", "per tile", "row-long")
F64, F32 = torch.float64, torch.float32


def tile_probabilities(scores: torch.Tensor):
    """Per key tile: (keys, P float64, P in e4m3, O's rescale for the tile), the online softmax of
    the recipe's emulation (its row max and e4m3 rounding against the running max)."""
    row_max = torch.full_like(scores[:, :1], float("-inf"))
    for start in range(0, scores.shape[1], KEY_TILE):
        keys = slice(start, start + KEY_TILE)
        new_max = torch.maximum(row_max, scores[:, keys].amax(-1, keepdim=True))
        rescale = torch.exp(row_max - new_max)
        p, p8 = e4m3_probabilities(scores[:, keys], new_max, P_MAX)
        yield keys, p, p8, rescale
        row_max = new_max


def summed(scores: torch.Tensor, v8: torch.Tensor, how: str) -> torch.Tensor:
    """O / l before V's descale: P.V summed `how` (SUMS) over the key tiles."""
    out = torch.zeros((scores.shape[0], v8.shape[1]), dtype=F64)
    row_sum = torch.zeros_like(scores[:, :1])
    for keys, p, p8, rescale in tile_probabilities(scores):
        row_sum = row_sum * rescale + p.sum(-1, keepdim=True)
        vt = v8[keys].transpose(0, 1).contiguous()
        if how == "exact":
            out = out * rescale + p8 @ v8[keys]
        elif how == "per tile":
            tile = mma(p8, vt, torch.zeros_like(out), "fp22").to(F32)
            out = ((out * rescale).to(F32) + tile).double()
        else:
            out = mma(p8, vt, (out * rescale).to(F32).double(), "fp22")
    return out / row_sum


def head_outputs(q, k, v, smooth_v: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(ref: float64 attention on the recipe's operands, {sum: the modelled output}) for one head."""
    mean = v.float().mean(dim=2, keepdim=True) if smooth_v else torch.zeros_like(v[:, :, :1], dtype=F32)
    inputs = quantize_int8_qkv(q, k, v)
    v8, v_descale = quantize_v(v.float() - mean)
    ops = recipe_operands(inputs)
    scale = default_scale(q.shape[-1])
    scores = (ops["q8"][0] @ ops["k8"][0].T) * ops["q_descale"][0] * scale * ops["k_descale"][0]
    v_values = v8[0, 0].double()
    descale, offset = v_descale[0, 0].double(), mean[0, 0].double()
    q_deq, k_deq, _ = inputs.dequantized(F64, smoothed=True)
    v_deq = (v_values * descale + offset)[None, None]
    ref = attention(q_deq, k_deq, v_deq, scale, False, F64)[0, 0]
    return ref, {how: summed(scores, v_values, how) * descale + offset for how in SUMS}


def rows(shape: Shape, distribution: str, seed: int) -> list[dict]:
    q, k, v = make_inputs(shape, torch.float16, seed, "cpu", distribution)
    truth = attention(q.double(), k.double(), v.double(), default_scale(shape.head_dim), False, F64)[0, 0]
    table = []
    for smooth_v in (False, True):
        ref, outs = head_outputs(q, k, v, smooth_v)
        budget = error_budget(ref, outs["exact"].to(torch.float16), torch.float16, FA3_ATOL_MAGNITUDE)
        for how in SUMS[1:]:
            err = (outs[how].to(torch.float16).double() - ref).abs().max().item()
            table.append({"distribution": distribution, "V": "smoothed" if smooth_v else "plain", "P.V sum": how,
                          "error / budget": err / budget.bound,
                          "max err vs truth": (outs[how].to(torch.float16).double() - truth).abs().max().item(),
                          "emulation vs truth": (outs["exact"] - truth).abs().max().item()})
    return table


def fixed(frame):
    """The frame's numbers as text in fixed notation, four significant digits (docs/results keeps no
    scientific notation)."""
    import numpy as np

    def text(x):
        return np.format_float_positional(x, precision=4, unique=False, fractional=False, trim="-")

    return frame.apply(lambda column: column.map(text) if column.dtype.kind == "f" else column)


def parse_shape(text: str) -> Shape:
    try:
        batch, heads, seq, head_dim = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"--shape {text!r}: write 1x1xSxD, e.g. 1x1x4099x64") from None
    if batch != 1 or heads != 1:
        raise SystemExit(f"--shape {text!r}: one head (1x1xSxD): the FP22 model is slow")
    return Shape(batch, heads, seq, head_dim, causal=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="1x1x4099x64")
    parser.add_argument("--distributions", nargs="+", default=["positive", "normal"], choices=sorted(DISTRIBUTIONS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    import pandas as pd

    shape = parse_shape(args.shape)
    frame = pd.DataFrame([row for name in args.distributions for row in rows(shape, name, args.seed)])
    print(f"{args.shape}, seed {args.seed}, fp16 inputs; FP22 model of the e4m3 wgmma (tools/fp8_cpu_repro.py)")
    print(fixed(frame).to_markdown(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
