"""How long each stage run took, beside the pages: `durations.csv` holds every finished stage run's
stage, parameter file, GPU, outcome, start and notebook seconds, a few kilobytes where the pages'
runs.csv hold only each page's latest run per stage. A lent machine starts with an empty store, and
`stagelab run --deadline` (run.deadline) reads its estimates from here: the H200 page's row of s2 on
acceptance.yaml was a run killed after 132 s, while the store knew its whole run of 251 s.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..core import metrics as m

DURATIONS_FILE = "durations.csv"
COLUMNS = ["start_time", f"tags.{m.TAG_STAGE}", "tags.params_file", f"tags.{m.TAG_GPU}", f"tags.{m.TAG_OUTCOME}",
           f"metrics.{m.NOTEBOOK_SECONDS.key()}"]


def write_durations(every_run: pd.DataFrame, out: Path) -> Path:
    """Every finished stage run's columns of COLUMNS (those the store has), newest first, into out/DURATIONS_FILE."""
    outcomes = every_run.get(f"tags.{m.TAG_OUTCOME}", pd.Series(index=every_run.index, dtype=object))
    finished = every_run[outcomes.notna() & (outcomes != m.OUTCOME_RUNNING)]
    path = Path(out) / DURATIONS_FILE
    seconds = f"metrics.{m.NOTEBOOK_SECONDS.key()}"
    kept = finished[[c for c in COLUMNS if c in finished.columns]]
    kept.round({seconds: 1}).to_csv(path, index=False)  # tenths of a second: what an estimate needs
    return path
