"""docs/results/<family>/conclusions.yaml: the conclusions drawn from trials, kept beside the records.

A conclusion comes after its trial (`stagelab try note RUN "..."`), in whatever store the person
reads the numbers in. The trial itself usually ran on a GPU machine, whose store comes back as a
record (records/*.db.xz) written before anyone had read it. A conclusion kept only as a tag of the
local copy was lost with that store: a fresh checkout imports the records, which never held it
(2026-11-29: 23 of s19_int8's 34 conclusions had gone that way). So `try note` also writes it here,
and `stagelab import` sets each one on the trial runs that lack it.

An entry names its trial by what every copy of the run keeps, whichever store it was copied into:
the stage, the trial's name, its start time to the millisecond (`import` copies the start time;
run ids differ per store) and, for a trial imported from a history file, that file. `run`, for the reader, is the id the trial had where it ran.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..core import metrics
from ..core.errors import ConfigError
from ..core.ledger_file import read_ledger, write_ledger
from ..core.paths import results_dir
from .run_summary import SOURCE_RUN_TAG

FILE_NAME = "conclusions.yaml"
HEADER = ("# Written by `stagelab try note RUN \"...\"`: the conclusion of each trial, which `stagelab import` sets on\n"
          "# the trial's runs (matched by stage, trial name, start time in milliseconds since 1970 UTC, and history file).\n"
          "# Edit a conclusion with `try note` again; an entry removed here stays on the runs already noted.\n")


@dataclass(frozen=True)
class Conclusion:
    stage: str
    trial: str
    started_ms: int
    started: str  # started_ms as a UTC date, for the reader
    imported_from: str  # the history file of a trial imported from one ("" for a trial run by `try`)
    run: str
    conclusion: str

    @property
    def key(self) -> tuple[str, str, int, str]:
        return self.stage, self.trial, self.started_ms, self.imported_from

    @classmethod
    def of(cls, run, text: str) -> "Conclusion":
        stage, trial, started_ms, imported_from = trial_key(run)
        started = datetime.fromtimestamp(started_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        # the id the trial printed where it ran (a copy's own id differs in every store)
        ran_as = run.data.tags.get(SOURCE_RUN_TAG, run.info.run_id)
        return cls(stage, trial, started_ms, started, imported_from, ran_as, text.strip())


def trial_key(run) -> tuple[str, str, int, str]:
    """What names a trial in every store a copy of its run is in (the journal's name for it). Trials
    imported from a history that gave a date alone start at its midnight: their file tells them apart."""
    tags = run.data.tags
    return (tags.get(metrics.TAG_TRIAL_OF, ""), tags.get(metrics.TAG_TRIAL_NAME, run.info.run_name or ""),
            run.info.start_time or 0, tags.get(metrics.TAG_IMPORTED_FROM, ""))


def conclusions_path(family: str) -> Path:
    return results_dir(family) / FILE_NAME


def read_conclusions(path: Path) -> list[Conclusion]:
    """The file's entries; none when it does not exist."""
    return read_ledger(path, Conclusion)


def remember(path: Path, added: list[Conclusion]) -> list[Conclusion]:
    """The file's entries with `added` in place of any of the same trial, written back (oldest first
    per stage, so a new note adds lines rather than moving them)."""
    replaced = {c.key for c in added}
    if len(replaced) < len(added):
        raise ConfigError(f"{path}: two conclusions for one trial: {sorted(c.key for c in added)}")
    entries = [c for c in read_conclusions(path) if c.key not in replaced] + added
    entries.sort(key=lambda c: (c.stage, c.started_ms, c.trial))
    write_ledger(path, HEADER, entries)
    return entries


def apply_conclusions(families: list[str]) -> int:
    """Set the conclusions kept for these families on the trial runs they name that do not say them
    yet, in every experiment of the store; returns how many runs changed."""
    from . import tracking
    from .journal import trials_filter
    from .run_summary import write_summary

    kept = {c.key: c.conclusion for family in families for c in read_conclusions(conclusions_path(family))}
    if not kept:
        return 0
    client = tracking.client()
    experiment_ids = [e.experiment_id for e in client.search_experiments()]
    changed = 0
    for run in client.search_runs(experiment_ids, trials_filter(), max_results=50000) if experiment_ids else []:
        text = kept.get(trial_key(run))
        if text is not None and run.data.tags.get(metrics.TAG_CONCLUSION) != text:
            tracking.set_tags(run.info.run_id, {metrics.TAG_CONCLUSION: text})
            write_summary(run.info.run_id)
            changed += 1
    return changed
