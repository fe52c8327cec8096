"""What 8 bits cost against float64 truth, per distribution: a 16-bit stage's run and an 8-bit stage's
run on the same inputs (params/truth-errors.yaml: same shapes and seeds), side by side.

    python tools/truth_errors_table.py FP16_CORRECTNESS_CSV INT8_CORRECTNESS_CSV [--gpu NAME] > table.md

Each CSV is a stage run's `results/correctness.csv` artifact. A 16-bit stage's check compares its output
with float64 attention on the same inputs, so its `max_abs_err` is its error against truth; an 8-bit
stage's rows carry `err_vs_truth` (the stage), `recipe_err_vs_truth` (its recipe's float64 emulation),
`fa3_fp8_err_vs_truth` (FlashAttention-3's FP8 recipe, emulated) and `baseline_err_vs_truth` (float32
attention on the unquantized inputs). Each cell is the largest over the seeds (max |out - truth|).
Distributions a 16-bit stage does not check (outlier: 8-bit stages only) show "not checked".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from stagelab.core.formatting import csv_cells, fixed  # noqa: E402

KEYS = ["shape", "distribution"]
INT8_COLUMNS = {"err_vs_truth": "8-bit stage", "recipe_err_vs_truth": "its recipe (emulated)",
                "fa3_fp8_err_vs_truth": "FA3 FP8 recipe (emulated)", "baseline_err_vs_truth": "float32 attention"}
FP16_COLUMN = "fp16 stage"
NOT_CHECKED = "not checked"


def cell(value: float) -> str:
    """Three significant digits in fixed notation (none scientific in docs/results), or why there is none."""
    return NOT_CHECKED if pd.isna(value) else fixed(value)


def truth_errors(fp16: pd.DataFrame, int8: pd.DataFrame) -> pd.DataFrame:
    """One row per (shape, distribution): the largest error over seeds of each method."""
    missing = [c for c in [*KEYS, *INT8_COLUMNS] if c not in int8.columns]
    if missing:
        raise ValueError(f"the 8-bit CSV lacks {missing}: is it an 8-bit stage's correctness.csv?")
    if "max_abs_err" not in fp16.columns:
        raise ValueError("the fp16 CSV lacks max_abs_err: is it a stage run's correctness.csv?")
    eight = int8.groupby(KEYS)[list(INT8_COLUMNS)].max().rename(columns=INT8_COLUMNS)
    sixteen = fp16.groupby(KEYS)[["max_abs_err"]].max().rename(columns={"max_abs_err": FP16_COLUMN})
    table = eight.join(sixteen, how="left")
    return table[[FP16_COLUMN, *INT8_COLUMNS.values()]].reset_index()


def markdown(table: pd.DataFrame) -> str:
    cells = table.copy()
    for column in cells.columns[len(KEYS):]:
        cells[column] = cells[column].map(cell)
    return cells.to_markdown(index=False, disable_numparse=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fp16_csv", type=Path)
    parser.add_argument("int8_csv", type=Path)
    parser.add_argument("--gpu", default="", help="the GPU both runs ran on, for the table's caption")
    parser.add_argument("--copy-to", type=Path, help="also write both CSVs here, every float in fixed notation "
                        "(docs/results holds no scientific notation), under their own names")
    args = parser.parse_args(argv)
    try:
        fp16, int8 = pd.read_csv(args.fp16_csv), pd.read_csv(args.int8_csv)
        table = truth_errors(fp16, int8)
    except (OSError, ValueError) as exc:
        print(f"truth_errors_table: {exc}", file=sys.stderr)
        return 2
    if args.copy_to:
        args.copy_to.mkdir(parents=True, exist_ok=True)
        for frame, path in ((fp16, args.fp16_csv), (int8, args.int8_csv)):
            csv_cells(frame).to_csv(args.copy_to / path.name, index=False)
    on = f" on {args.gpu}" if args.gpu else ""
    print(f"Max |out - float64 truth| over seeds{on}: `{args.fp16_csv}` (fp16) and `{args.int8_csv}` "
          "(8-bit), same inputs.\n")
    print(markdown(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
