"""Compare two `stagelab run` batches of the same sweep, e.g. one GPU against `--gpus all`:
each stage's mission p50 side by side and the batches' wall times.

    python tools/compare_batches.py runs/<one-gpu batch> runs/<all-gpus batch> [--p50-tolerance 0.03]

Exit 1 when a stage's mission p50 differs by more than the tolerance (sharing a host must not
change what a stage measures). Wall time: from the first run's start to the last run's end, as the
store recorded them (the summary's `seconds` add up per notebook, not per batch).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

# The acceptance bar for --gpus: a stage's mission p50 within 3% of its one-GPU value.
DEFAULT_P50_TOLERANCE = 0.03


def _summary(batch: Path) -> pd.DataFrame:
    return pd.read_csv(batch / "summary.csv").set_index("stage")


def _wall_seconds(summary: pd.DataFrame) -> float:
    from stagelab.record import tracking

    runs = [tracking.client().get_run(run_id).info for run_id in summary["run_id"]]
    return (max(r.end_time or r.start_time for r in runs) - min(r.start_time for r in runs)) / 1000


def compare(one: Path, many: Path, tolerance: float) -> int:
    a, b = _summary(one), _summary(many)
    table = pd.DataFrame({"p50_one_us": a["mission_p50_us"], "p50_many_us": b["mission_p50_us"]}).dropna()
    table["ratio"] = table["p50_many_us"] / table["p50_one_us"]
    table["within"] = (table["ratio"] - 1).abs() <= tolerance
    print(table.to_markdown(floatfmt=".4g"))
    wall_one, wall_many = _wall_seconds(a), _wall_seconds(b)
    print(f"wall: {wall_one:.0f}s one, {wall_many:.0f}s many, ratio {wall_many / wall_one:.2f}")
    return 0 if table["within"].all() else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("one", type=Path, help="runs/<batch> folder of the one-GPU batch")
    parser.add_argument("many", type=Path, help="runs/<batch> folder of the --gpus batch")
    parser.add_argument("--p50-tolerance", type=float, default=DEFAULT_P50_TOLERANCE)
    args = parser.parse_args()
    return compare(args.one, args.many, args.p50_tolerance)


if __name__ == "__main__":
    sys.exit(main())
