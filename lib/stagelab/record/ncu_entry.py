"""An Nsight Compute comparison (tools/ncu_compare.py) as a trial run of the first subject's stage
(measurement_entry), with the table itself as an artifact: the first subject's value of each
summary row is the trial's number, the other subjects' (variants and library contenders) its
contenders.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..core.errors import ConfigError
from .measurement_entry import check_hypothesis, measurement_entry, record_entry

ENTRY_FILE = "ncu_compare.trials.yaml"
TABLE_ARTIFACT = "ncu"
# A summary row's metric in the trial schema (trial_source.METRICS) and its unit, where the metric
# name alone does not say it.
ROW_METRICS = {"time_us": ("us", None), "tflops": ("tflops", None), "registers": ("registers", None),
               "warp_inst_M": ("other", "M")}
STALL_ROW_PREFIX = "stall "
# The rows a journal line shows first (trial_source.JOURNAL_ROWS of them): the time and the pipes that
# explain it before the launch shape.
HEADLINE_ROWS = ("time_us", "tflops", "tensor_pct", "issue_pct", "xu_pct", "fma_pct", "warp_inst_M", "l2_MB")
COUNT_ROWS = ("kernels", "grid", "block", "cluster")


def row_metric(row: str) -> tuple[str, str | None]:
    """(metric, unit) of one of ncu_compare's summary rows."""
    if row in ROW_METRICS:
        return ROW_METRICS[row]
    if row.endswith("_pct"):
        return "pct", None
    if row.endswith("_MB"):
        return "other", "MB"
    if row.startswith(STALL_ROW_PREFIX):
        return "other", "stalls per issue"
    if row in COUNT_ROWS:
        return "other", "count"
    return "other", None


def _number(value) -> float | int | None:
    """A cell as a number; None for a missing or several-kernel cell ('12/34', 'n/a', '–')."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value if isinstance(value, (int, float)) else str(value))
    except ValueError:
        return None
    if math.isnan(number):
        return None
    return int(number) if number.is_integer() else number


def number_rows(problem: str, columns: list[dict], rows: list[str], state: str) -> list[dict]:
    """One number row per summary row that the first subject has a value for, HEADLINE_ROWS first."""
    first, others = columns[0], columns[1:]
    out = []
    for row in sorted(rows, key=lambda row: HEADLINE_ROWS.index(row) if row in HEADLINE_ROWS else len(HEADLINE_ROWS)):
        trial = _number(_cell_of(first, row))
        if trial is None:
            continue
        metric, unit = row_metric(row)
        contenders = {col["label"]: value for col in others if (value := _number(_cell_of(col, row))) is not None}
        number = {"problem": problem, "metric": metric, "quantity": f"ncu {row} at {state}", "trial": trial,
                  "default": None, "contenders": contenders}
        if unit:
            number["unit"] = unit
        out.append(number)
    return out


def _cell_of(column: dict, row: str):
    if row.startswith(STALL_ROW_PREFIX):
        return column.get("stalls", {}).get(row[len(STALL_ROW_PREFIX):])
    return column.get(row)


def comparison_entry(stage: str, problem: str, columns: list[dict], rows: list[str], *, hypothesis: str,
                     state: str, commit: str, gpu: str, date: str, source: str) -> dict:
    """The trial-history entry of one comparison (trial_source's schema)."""
    if not columns:
        raise ConfigError("ncu comparison: no subject was profiled")
    labels = ", ".join(col["label"] for col in columns)
    return measurement_entry(stage, f"ncu_compare {problem}",
                             f"{check_hypothesis(hypothesis, 'ncu comparison')} "
                             f"(tools/ncu_compare.py at {problem}: {labels})",
                             number_rows(problem, columns, rows, state), commit=commit, gpu=gpu, date=date,
                             source=source, what="ncu comparison")


def columns_from_table(text: str) -> tuple[list[dict], list[str]]:
    """ncu_compare.md's summary table read back: (columns, rows), stall rows as `stalls` of each
    column; for a comparison made before the tool recorded its own (the numbers as it printed them)."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    if len(lines) < 3 or not lines[0].startswith("| metric |"):
        raise ConfigError("not an ncu_compare table: its first table must start with '| metric |'")
    labels = [cell.strip() for cell in lines[0].strip("|").split("|")][1:]
    columns: list[dict] = [{"label": label, "stalls": {}} for label in labels]
    rows = []
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells[0] == "address" or len(cells) != len(labels) + 1:
            break  # the sampled program counters' tables follow the summary
        row, values = cells[0], cells[1:]
        rows.append(row)
        for col, value in zip(columns, values):
            if row.startswith(STALL_ROW_PREFIX):
                col["stalls"][row[len(STALL_ROW_PREFIX):]] = value
            else:
                col[row] = value
    return columns, rows


def record_comparison(entry: dict, folder: Path, table: Path) -> str | None:
    """The entry written to `folder` and imported as a trial run, the table attached; the run's id,
    or None where the store already holds this entry."""
    return record_entry(entry, folder / ENTRY_FILE, [table], TABLE_ARTIFACT)
