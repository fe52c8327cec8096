"""The INT8 recipe's choices as trials of its stage: each variant of the default recipe (Q and K
block sizes, V per head, no K or V smoothing, P's scale, P quantized per longer key tiles) against float64
truth, beside the default, on every named distribution. No GPU: the recipe's float64 emulation
(families/sdpa/int8/emulation.py), which the stage meets within its budget, stands for the kernel.

    python3 tools/int8_recipe_trials.py [--shape 1x4x1024x128] [--variants q_block_32 ...] [--record s19_int8]

Prints one table per variant: per distribution (and causal or not), the variant's relative L1 error and
largest absolute error against truth, and the default's. `--record STAGE --hypothesis '...'` makes each
variant a trial run of STAGE (stagelab.record.measurement_entry; verdict inconclusive, its
conclusion added with `stagelab try-note`), its table attached; issue 44's journal of the recipe.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from stagelab.families.sdpa.distributions import DISTRIBUTIONS  # noqa: E402
from stagelab.families.sdpa.fp8.quantize import E4M3_MAX  # noqa: E402
from stagelab.families.sdpa.inputs import make_inputs  # noqa: E402
from stagelab.families.sdpa.int8.accuracy import TruthError, int8_recipe_output  # noqa: E402
from stagelab.families.sdpa.int8.recipe import DEFAULT_RECIPE, PER_HEAD, Int8Recipe  # noqa: E402
from stagelab.families.sdpa.reference import attention, default_scale  # noqa: E402
from stagelab.families.sdpa.shapes import Shape  # noqa: E402

# Each variant changes one choice of the default recipe (recipe.py says why the default is what it is).
VARIANTS = {
    "q_block_32": replace(DEFAULT_RECIPE, q_block=32),
    "q_block_128": replace(DEFAULT_RECIPE, q_block=128),
    "k_block_64": replace(DEFAULT_RECIPE, k_block=64),
    "k_block_256": replace(DEFAULT_RECIPE, k_block=256),
    "v_per_head": replace(DEFAULT_RECIPE, v_scaling=PER_HEAD),
    "no_k_smoothing": replace(DEFAULT_RECIPE, smooth_k=False),
    "no_v_smoothing": replace(DEFAULT_RECIPE, smooth_v=False),
    "p_max_448": replace(DEFAULT_RECIPE, p_max=E4M3_MAX),  # SageAttention2's P scale
    "p_tile_256": replace(DEFAULT_RECIPE, kv_tile=256),
}
SEED = 0
RELATIVE_L1 = "relative L1 error vs float64 truth"
MAX_ABS = "max abs error vs float64 truth"


def parse_shape(text: str) -> Shape:
    try:
        batch, heads, seq, head_dim = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"--shape {text!r}: write BxHxSxD, e.g. 1x4x1024x128") from None
    return Shape(batch, heads, seq, head_dim, causal=False)  # the inputs; each is run causal and not


def errors(shape: Shape, recipes: dict[str, Int8Recipe], distributions) -> dict[tuple[str, bool, str], TruthError]:
    """(distribution, causal, recipe name) -> the recipe's error against float64 truth on the
    family's inputs of that distribution (seed SEED, fp16)."""
    import torch

    table = {}
    scale = default_scale(shape.head_dim)
    for distribution in distributions:
        q, k, v = make_inputs(shape, torch.float16, SEED, "cpu", distribution)
        for causal in (False, True):
            truth = attention(q, k, v, scale, causal, torch.float64)
            for name, recipe in recipes.items():
                table[distribution, causal, name] = TruthError.of(int8_recipe_output(q, k, v, scale, causal, recipe), truth)
    return table


def significant(x: float) -> float:
    """Four significant digits: the errors differ from the default's in the second or third."""
    return float(f"{x:.4g}")


def numbers(problem: str, table: dict, variant: str) -> list[dict]:
    """One variant's rows in trial-entry form: its error (trial) beside the default's."""
    rows = []
    for distribution, causal, name in table:
        if name != variant:
            continue
        ours, default = table[distribution, causal, variant], table[distribution, causal, "default"]
        where = f"{problem}{'_causal' if causal else ''} {distribution}"
        rows.append({"problem": where, "metric": "other", "quantity": RELATIVE_L1,
                     "trial": significant(ours.relative_l1), "default": significant(default.relative_l1)})
        rows.append({"problem": where, "metric": "other", "quantity": MAX_ABS, "trial": significant(ours.max_abs),
                     "default": significant(default.max_abs)})
    return rows


def markdown(variant: str, rows: list[dict]) -> str:
    lines = [f"# INT8 recipe variant `{variant}` against the default (float64 emulation, seed {SEED}, fp16)", "",
             "| problem | metric | variant | default | ratio |", "|---|---|---|---|---|"]
    for row in rows:
        ratio = row["trial"] / row["default"] if row["default"] else float("nan")
        lines.append(f"| {row['problem']} | {row['quantity']} | {row['trial']:.6f} | {row['default']:.6f} | {ratio:.3f} |")
    return "\n".join(lines) + "\n"


def record(stage: str, variant: str, hypothesis: str, rows: list[dict], table_path: Path, problem: str) -> str | None:
    from stagelab.core.envinfo import git_state
    from stagelab.record.measurement_entry import measurement_entry, record_entry

    entry = measurement_entry(stage, f"recipe {variant}", f"{hypothesis} (tools/int8_recipe_trials.py, {problem})",
                              rows, commit=git_state()["git_commit"], gpu="none: the recipe's float64 emulation on the CPU",
                              date=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M"), source=str(table_path),
                              what="recipe trial")
    return record_entry(entry, table_path.with_suffix(".trials.yaml"), [table_path], "recipe")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="1x4x1024x128", help="BxHxSxD of the inputs (causal and not are both run)")
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=sorted(VARIANTS))
    parser.add_argument("--distributions", nargs="+", default=list(DISTRIBUTIONS))
    parser.add_argument("--out", type=Path, default=Path("build/int8_recipe_trials"), help="the tables go here")
    parser.add_argument("--record", metavar="STAGE", help="record each variant as a trial run of STAGE")
    parser.add_argument("--hypothesis", default="", help="--record: what the variants are to show")
    args = parser.parse_args(argv)
    if args.record and not args.hypothesis.strip():
        raise SystemExit("--record needs --hypothesis")
    unknown = sorted(set(args.distributions) - set(DISTRIBUTIONS))
    if unknown:
        raise SystemExit(f"unknown distributions {unknown}: the family's are {list(DISTRIBUTIONS)}")
    shape = parse_shape(args.shape)
    recipes = {"default": DEFAULT_RECIPE, **{name: VARIANTS[name] for name in args.variants}}
    table = errors(shape, recipes, args.distributions)
    args.out.mkdir(parents=True, exist_ok=True)
    for variant in args.variants:
        rows = numbers(args.shape, table, variant)
        text = markdown(variant, rows)
        sys.stdout.write(text + "\n")
        path = args.out / f"recipe-{variant}.md"
        path.write_text(text)
        if args.record:
            run_id = record(args.record, variant, args.hypothesis, rows, path, args.shape)
            print(f"[recipe {variant}] recorded as trial run {run_id}" if run_id else f"[recipe {variant}] already recorded")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
