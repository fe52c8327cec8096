"""Whether a run measured its stage's current source, for the results pages.

A run records the hash of what decided its result (`source_hash`, core.sources.run_source_hash: the
stage, the family headers it and the binding include, the binding, the family's Python). A run whose
hash is not what the checkout's sources hash to now measured code that is gone: the page keeps it
visible, marked stale with its commit, and never names it the best stage. A run with no hash (a
notebook that died before its build was recorded, by a runner older than the tag) cannot be shown
current, so it is stale too.

A stale run that failed (incorrect, error, ...) is left out of a page's tables: its failure belongs to
code that is gone, and beside the stage's name it would read as the current source's. The page's
re-run list names it with that outcome (record.rerun_plan), and the store keeps it.

A run of an older source whose code a later refactor left as it was (`stagelab same-code` compiled
both and found every kernel, the host code and the binding the same: same_code.yaml) measured the
current code: it is current, and its label says it was not re-run (`current (same SASS as e9b45a4)`).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..core import metrics as m
from ..core.family import Family
from ..core.formatting import short_commit
from ..core.registry import family_registry
from ..core.sources import run_source_hash
from ..judge.outcome import FAILED_OUTCOMES
from .same_code_file import SameCode

CURRENT = "current"
# The column of the runs frame (tables.latest_runs) that says it: CURRENT, `current (same SASS as
# gabc1234)` or `stale (commit gabc1234)`.
SOURCE_COLUMN = "source"


def current_source_hashes(family: Family) -> dict[str, str]:
    """Each stage of the family's registry: what a run of it at the checkout's sources records."""
    registry = family_registry(family.name)
    return {stage_id: run_source_hash(stage, registry, family) for stage_id, stage in registry.stages.items()}


def stale_label(commit: object) -> str:
    return f"stale (commit {short_commit(commit)})"


def same_code_label(commit: object) -> str:
    """A run of an older source whose code is the current one's (same_code.yaml): not re-run."""
    return f"{CURRENT} (same SASS as {short_commit(commit)})"


def is_current(state: object) -> bool:
    """Whether a source state (source_states) is the current source, re-run or shown the same code."""
    return state == CURRENT or (isinstance(state, str) and state.startswith(f"{CURRENT} ("))


def _column(runs: pd.DataFrame, tag: str) -> pd.Series:
    return runs.get(f"tags.{tag}", pd.Series(None, index=runs.index, dtype=object))


def source_state(stage: str, recorded: object, *, commit: object, nvcc: object, current: Mapping[str, str],
                 same_code: SameCode) -> str:
    """CURRENT where a run's recorded source hash is its stage's current one; the same-code label
    where same_code.yaml shows its code is the current code under the nvcc that built the run; else
    its stale label (a stage no longer in stages.yaml has no current source: stale)."""
    now = current.get(stage)
    if not isinstance(recorded, str) or now is None:
        return stale_label(commit)
    if recorded == now:
        return CURRENT
    if isinstance(nvcc, str) and same_code.same(stage, recorded, now, nvcc):
        return same_code_label(commit)
    return stale_label(commit)


def source_states(runs: pd.DataFrame, current: Mapping[str, str], same_code: SameCode | None = None) -> pd.Series:
    """Per run (a frame of mlflow.search_runs): its source_state."""
    same_code = same_code or SameCode([])
    columns = zip(runs[f"tags.{m.TAG_STAGE}"], _column(runs, m.TAG_SOURCE_HASH), _column(runs, "git_commit"),
                  _column(runs, "nvcc"))
    states = [source_state(stage, recorded, commit=commit, nvcc=nvcc, current=current, same_code=same_code)
              for stage, recorded, commit, nvcc in columns]
    return pd.Series(states, index=runs.index, dtype=object)


def stale_failure(state: object, outcome: object) -> bool:
    """Whether a run of an older source (its source state) ended in a failed outcome."""
    return not is_current(state) and outcome in FAILED_OUTCOMES


def tables_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs a page's tables show (latest_runs' frame, with its source column): all but the stale
    failures (stale_failure), which the page's re-run list names instead."""
    if runs.empty or SOURCE_COLUMN not in runs:
        return runs
    failed = [stale_failure(state, outcome) for state, outcome in zip(runs[SOURCE_COLUMN], _column(runs, m.TAG_OUTCOME))]
    return runs[[not f for f in failed]]


def mark_stale(frame: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The table's `stage` cells with their run's label where it is not plainly CURRENT: stale
    (`s9_fp8 — stale (commit g51f3545)`) or current by same code, not re-run (`s8_persistent_split —
    current (same SASS as ge9b45a4)`); `runs`: one parameter file's runs from latest_runs, one per stage."""
    if frame.empty or SOURCE_COLUMN not in runs:
        return frame
    states = dict(zip(runs[f"tags.{m.TAG_STAGE}"], runs[SOURCE_COLUMN]))
    return frame.assign(stage=[stage if states.get(stage, CURRENT) == CURRENT else f"{stage} — {states[stage]}"
                               for stage in frame["stage"]])
