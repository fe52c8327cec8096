"""The best stage on each problem, marked on its run, so the MLflow UI answers what the pages answer.

The results pages (report, best_stage) name the fastest stage on each problem of each parameter
file, per GPU, among each stage's latest run of its current source that passed its checks. A
runs table can show and sort by tags but cannot compute that across runs, so this writes the
answer on the runs themselves: TAG_BEST_ON on each run that is best somewhere (the problems, its
p50 there and its ratio to each library timed beside it), and takes it off runs no longer best.
It is derived: `stagelab ui` writes it again each time it starts, from the same readers as the
pages, so the UI and the pages name the same stage. The stage comparison view (runs_view) sorts
by it, so the best runs come first.
"""

from __future__ import annotations

import pandas as pd

from ..core import metrics as m
from ..core.errors import NoRunsError
from ..core.family import Family
from ..core.formatting import latency, number
from . import tracking
from .runs_view import TAG_BEST_ON
from .same_code_file import SameCode
from .best_stage import PARENT_COLUMN, best_stage_table
from .source_state import current_source_hashes
from .tables import NO_GPU, latest_runs, per_shape_table, stage_runs

_COLUMN = f"tags.{TAG_BEST_ON}"


def _problem_text(row: pd.Series) -> str:
    """`vit-b16_64x12x197x64 9.87 µs: 1.05x cudnn, 0.98x fa4`: the problem, the best stage's p50 and
    its ratio to each library timed beside it."""
    p50 = next(c for c in row.index if c.startswith("p50 ("))
    ratios = [f"{number(v)}x {c.removeprefix('vs ')}" for c, v in row.items()
              if c.startswith("vs ") and c not in (PARENT_COLUMN, "vs previous best") and pd.notna(v)]
    return f"{row['problem']} {latency(row[p50])}" + (f": {', '.join(ratios)}" if ratios else "")


def _file_marks(runs: pd.DataFrame, name: str, family: Family) -> dict[str, str]:
    """One parameter file on one GPU: run id -> `<file> (<gpu>): best on n/N: <problems>`."""
    from .report import file_plan

    subset = runs[runs[f"tags.{m.TAG_PARAMS_FILE}"] == name]
    _, primary, rate_mode, problems = file_plan(name, family)
    shapes = per_shape_table(runs, name, family, primary, rate_mode)
    if shapes.empty:
        return {}
    table = best_stage_table(shapes, subset, family, problems)
    if table.empty or "best stage" not in table.columns:  # only 8-bit stages current: none is "best"
        return {}
    total = shapes["shape"].nunique()
    run_of = dict(zip(subset[f"tags.{m.TAG_STAGE}"], subset["run_id"]))
    marks = {}
    for stage, rows in table.groupby("best stage", sort=False):
        problems_text = "; ".join(_problem_text(row.dropna()) for _, row in rows.iterrows())
        marks[run_of[stage]] = f"{name}: best on {len(rows)}/{total}: {problems_text}"[:tracking.TAG_VALUE_CHARS]
    return marks


def best_marks(family: Family, everything: pd.DataFrame) -> dict[str, str]:
    """Run id -> its TAG_BEST_ON text, over every GPU and parameter file of `everything`, the family's
    stage runs (tables.stage_runs)."""
    finished = everything[everything[f"tags.{m.TAG_OUTCOME}"] != m.OUTCOME_RUNNING]
    gpus = finished.get(f"tags.{m.TAG_GPU}", pd.Series(dtype=object)).dropna()
    names = sorted(finished[f"tags.{m.TAG_PARAMS_FILE}"].dropna().unique())
    current = current_source_hashes(family)
    same_code = SameCode.of_family(family.name)  # the pages' rule: runs of the same code count as current
    marks: dict[str, str] = {}
    for gpu in sorted(set(gpus) - {NO_GPU}):
        runs, _ = latest_runs(family.experiment, names, gpu, current, runs=everything, same_code=same_code)
        for name in names:
            marks |= _file_marks(runs, name, family)
    return marks


def mark_best_runs(family: Family, runs: pd.DataFrame | None = None) -> int:
    """Write TAG_BEST_ON where it changed and delete it where it no longer holds; returns the number
    of runs marked best. `runs`: the family's stage runs when already read. A family with no stage
    runs yet has nothing to mark."""
    try:
        runs = stage_runs(family.experiment) if runs is None else runs
    except NoRunsError:
        return 0
    marks = best_marks(family, runs)
    held = runs[_COLUMN].dropna() if _COLUMN in runs else pd.Series(dtype=object)
    old = dict(zip(runs.loc[held.index, "run_id"], held))
    for run_id, text in marks.items():
        if old.get(run_id) != text:
            tracking.set_tags(run_id, {TAG_BEST_ON: text})
    client = tracking.client()
    for run_id in old.keys() - marks.keys():
        client.delete_tag(run_id, TAG_BEST_ON)
    return len(marks)
