"""How long each stage run took, beside the pages: `durations.csv` holds every finished stage run's
stage, parameter file, GPU, outcome, start and notebook seconds, a few kilobytes where the pages'
runs.csv hold only each page's latest run per stage. A lent machine starts with an empty store, and
`stagelab run --deadline` (run.deadline) reads its estimates from here: the H200 page's row of s2 on
acceptance.yaml was a run killed after 132 s, while the store knew its whole run of 251 s.

`expected_seconds` is the one estimate of how long a stage's run of a file takes, read by the
deadline and by the pages' re-run list (record.rerun_plan): its newest whole run's seconds.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..core import metrics as m

DURATIONS_FILE = "durations.csv"
ANY_GPU = ""
_STAGE, _FILE, _GPU, _OUTCOME = (f"tags.{m.TAG_STAGE}", "tags.params_file", f"tags.{m.TAG_GPU}",
                                 f"tags.{m.TAG_OUTCOME}")
_SECONDS = f"metrics.{m.NOTEBOOK_SECONDS.key()}"
COLUMNS = ["start_time", _STAGE, _FILE, _GPU, _OUTCOME, _SECONDS]


def run_seconds(runs: pd.DataFrame) -> pd.Series:
    """Each run's notebook seconds, or its end less its start where it logged none (runs from before
    the metric; the pages' CSVs keep no end)."""
    seconds = pd.to_numeric(runs.get(_SECONDS, pd.Series(index=runs.index, dtype=float)), errors="coerce")
    if {"start_time", "end_time"}.issubset(runs.columns):
        span = (pd.to_datetime(runs["end_time"], utc=True) - pd.to_datetime(runs["start_time"], utc=True))
        seconds = seconds.fillna(span.dt.total_seconds())
    return seconds


def expected_seconds(runs: pd.DataFrame, params_name: str) -> dict[tuple[str, str], float]:
    """(stage, GPU name) -> the seconds of its newest whole run of the file on that GPU, and
    (stage, ANY_GPU) -> on any GPU. A run stopped from outside since then is a lower bound, so the
    larger of the two stands; where a stage has only such runs, the longest. (s2's acceptance row on
    the H200 page is a run killed after 132 s; its one whole run on the pages is the H100's from the
    file's first week, 51 s.) `runs`: stage runs, newest first."""
    if runs.empty or not {_STAGE, _FILE}.issubset(runs.columns):
        return {}
    outcomes = runs.get(_OUTCOME, pd.Series(index=runs.index, dtype=object))
    seconds = run_seconds(runs)
    mine = runs[(runs[_FILE] == params_name) & (outcomes != m.OUTCOME_RUNNING) & seconds.notna()]
    gpus = mine.get(_GPU, pd.Series(ANY_GPU, index=mine.index)).fillna(ANY_GPU)
    expected: dict[tuple[str, str], float] = {}
    settled: set[tuple[str, str]] = set()  # keys whose newest whole run has been seen
    for stage, gpu, outcome, took in zip(mine[_STAGE], gpus, outcomes[mine.index], seconds[mine.index]):
        for key in ((stage, gpu), (stage, ANY_GPU)):
            if key not in settled:
                expected[key] = max(expected.get(key, 0.0), float(took))
                if outcome != m.OUTCOME_KILLED:
                    settled.add(key)
    return expected


def write_durations(every_run: pd.DataFrame, out: Path) -> Path:
    """Every finished stage run's columns of COLUMNS (those the store has), newest first, into out/DURATIONS_FILE."""
    outcomes = every_run.get(_OUTCOME, pd.Series(index=every_run.index, dtype=object))
    finished = every_run[outcomes.notna() & (outcomes != m.OUTCOME_RUNNING)]
    path = Path(out) / DURATIONS_FILE
    kept = finished[[c for c in COLUMNS if c in finished.columns]]
    kept.round({_SECONDS: 1}).to_csv(path, index=False)  # tenths of a second: what an estimate needs
    return path
