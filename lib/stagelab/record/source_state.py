"""Whether a run measured its stage's current source, for the results pages.

A run records the hash of what decided its result (`source_hash`, core.sources.run_source_hash:
the stage, the family's headers and binding, the family's Python). A run whose hash is not what
the checkout's sources hash to now measured code that is gone: the page keeps it visible, marked
stale with its commit, and never names it the best stage. A run with no hash (a notebook that
died before its build was recorded, by a runner older than the tag) cannot be shown current, so
it is stale too.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..core import metrics as m
from ..core.family import Family
from ..core.formatting import short_commit
from ..core.registry import family_registry
from ..core.sources import run_source_hash

CURRENT = "current"
# The column of the runs frame (tables.latest_runs) that says it: CURRENT or `stale (commit gabc1234)`.
SOURCE_COLUMN = "source"


def current_source_hashes(family: Family) -> dict[str, str]:
    """Each stage of the family's registry: what a run of it at the checkout's sources records."""
    registry = family_registry(family.name)
    return {stage_id: run_source_hash(stage, registry, family) for stage_id, stage in registry.stages.items()}


def stale_label(commit: object) -> str:
    return f"stale (commit {short_commit(commit)})"


def source_states(runs: pd.DataFrame, current: Mapping[str, str]) -> pd.Series:
    """Per run: CURRENT where its recorded source hash is its stage's current one, else its
    stale label (a stage no longer in stages.yaml has no current source: stale)."""
    hashes = runs.get(f"tags.{m.TAG_SOURCE_HASH}", pd.Series(None, index=runs.index, dtype=object))
    commits = runs.get("tags.git_commit", pd.Series(None, index=runs.index, dtype=object))
    states = [CURRENT if isinstance(recorded, str) and current.get(stage) == recorded else stale_label(commit)
              for stage, recorded, commit in zip(runs[f"tags.{m.TAG_STAGE}"], hashes, commits)]
    return pd.Series(states, index=runs.index, dtype=object)



def mark_stale(frame: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The table's `stage` cells with their run's stale label (`s9_fp8 — stale (commit g51f3545)`);
    `runs`: one parameter file's runs from latest_runs, one per stage."""
    if frame.empty or SOURCE_COLUMN not in runs:
        return frame
    states = dict(zip(runs[f"tags.{m.TAG_STAGE}"], runs[SOURCE_COLUMN]))
    return frame.assign(stage=[stage if states.get(stage, CURRENT) == CURRENT else f"{stage} — {states[stage]}"
                               for stage in frame["stage"]])
