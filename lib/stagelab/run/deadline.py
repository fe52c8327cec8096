"""`stagelab run --deadline S`: a batch that must end within S seconds of its start (a lent machine's
call limit, a job's wall time) starts a notebook only where the stage's last whole run of the
parameter file says it ends in time; the others are named and left for the next batch. A notebook
killed at the limit is GPU time spent for no result: three of the eleven H200 acceptance notebooks
of 2026-11-29's session were, after 79 to 132 s each.

A stage's expected seconds (record.durations.expected_seconds, which the pages' re-run list reads
too): the notebook time of its newest run of the file that was not stopped from outside, on a GPU
of the same name where it has one, else on any. They are read from the store and from what the
family's committed pages keep of them (`docs/results/<family>/durations.csv`, or the pages'
`*.runs.csv` where a family's pages predate it), since a lent machine's fresh store has none. A
stage with no such run is started: nothing says it will not fit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..record.durations import ANY_GPU, DURATIONS_FILE, expected_seconds
from .gpus import machine_gpu_name
from .workers import Slot


def known_runs(experiment: str, pages: Path) -> pd.DataFrame:
    """The store's stage runs of the experiment (none where it has none), the committed pages' runs and
    every run's seconds beside them (record.durations), newest first."""
    from ..core.errors import NoRunsError
    from ..record.tables import stage_runs

    frames = []
    try:
        frames.append(stage_runs(experiment))
    except NoRunsError:
        pass
    # durations.csv holds every finished run the pages' runs.csv do (2.7 MB for sdpa, one row per
    # stage and file each); they are read only where a family's pages were written before it
    durations = pages / DURATIONS_FILE
    pages_runs = [durations] if durations.is_file() else sorted(pages.glob("*.runs.csv"))
    frames += [pd.read_csv(path, low_memory=False) for path in pages_runs]
    if not frames:
        return pd.DataFrame()
    started = pd.concat([pd.to_datetime(f.get("start_time", pd.Series(pd.NaT, index=f.index)), utc=True)
                         for f in frames], ignore_index=True)
    runs = pd.concat(frames, ignore_index=True)
    return runs.loc[started.sort_values(ascending=False, na_position="last").index].reset_index(drop=True)


@dataclass
class Deadline:
    """What is left of `seconds` from the batch's start, and whether a stage's notebook fits in it."""

    seconds: float
    expected: dict[tuple[str, str], float]
    started: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.started)

    def refusal(self, stage: str, gpu_name: str = ANY_GPU) -> str | None:
        """Why the stage is not started now (None: start it)."""
        need = self.expected.get((stage, gpu_name), self.expected.get((stage, ANY_GPU)))
        left = self.left()
        if need is None or need <= left:
            return None
        return (f"{stage}: not started, its last whole run took {need:.0f} s and {max(left, 0):.0f} s "
                f"of the {self.seconds:.0f} s deadline are left")


class Admission:
    """run_on_slots' `admit` for a batch with a deadline: a stage is started where it fits what is
    left on its slot's GPU; one that does not is said (`say`) and kept in `refused`."""

    def __init__(self, deadline: Deadline, params_path: Path, say: Callable[[str], None]):
        self.deadline, self.params_path, self.say, self.refused = deadline, params_path, say, []

    @classmethod
    def of(cls, seconds: float | None, experiment: str, family: str, params_path: Path,
           say: Callable[[str], None]) -> Admission | None:
        """The admission of a batch of this file with `seconds` to its deadline; None without one."""
        from ..core.paths import results_dir

        if seconds is None:
            return None
        runs = known_runs(experiment, results_dir(family))
        return cls(Deadline(seconds, expected_seconds(runs, params_path.stem)), params_path, say)

    def __call__(self, stage: str, slot: Slot) -> bool:
        reason = self.deadline.refusal(stage, slot.gpu.name if slot.gpu and slot.gpu.name else machine_gpu_name())
        if reason:
            self.say(reason)
            self.refused.append(stage)
        return reason is None

    def report(self) -> None:
        """The stages the deadline left out, and the command that runs them."""
        if self.refused:
            stages = " ".join(self.refused)
            self.say(f"not started for the deadline: {stages} (`stagelab run --stages {stages} "
                     f"--params {self.params_path}` runs them)")
