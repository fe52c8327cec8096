"""What a results page needs re-run before every row on it is current: per parameter file, the stages
whose run on this GPU measured an older source (with its outcome where it failed: the page's tables
leave such runs out), was stopped from outside, or is missing, with the command that re-runs them
and how long their last runs took (the plan a session with little GPU time picks from).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ..core import metrics as m
from ..core.formatting import markdown
from .durations import ANY_GPU, expected_seconds, run_seconds
from .source_state import SOURCE_COLUMN, is_current, stale_failure
from .tables import outcome_cell

SECONDS_PER_MINUTE = 60
NOT_RUN = "no run on this GPU (there is one on another)"


@dataclass(frozen=True)
class Rerun:
    """One stage to re-run on one parameter file: why, and its last run's duration (None: no run); a
    run stopped from outside ran for less than a whole run takes, so its duration is a lower bound
    (`at_least`)."""

    params_file: str
    stage: str
    reason: str
    seconds: float | None
    at_least: bool = False


def _reason(run: pd.Series) -> str | None:
    """Why the stage's latest run does not stand for its current source; None where it does."""
    state = run.get(SOURCE_COLUMN)
    if not is_current(state):
        stale = state if isinstance(state, str) else "stale"
        if stale_failure(state, run.get(f"tags.{m.TAG_OUTCOME}")):  # left out of the page's tables
            return f"{stale}, where it ended {outcome_cell(run)}"
        return stale
    if run.get(f"tags.{m.TAG_OUTCOME}") == m.OUTCOME_KILLED:
        return "killed (stopped from outside: says nothing of the stage)"
    return None


def reruns(latest: pd.DataFrame, every_run: pd.DataFrame, params_names: Sequence[str],
           stages: Sequence[str]) -> list[Rerun]:
    """`latest`: latest_runs' frame for one GPU (one row per stage and file, with its source state);
    `every_run`: the stage runs on every GPU, which say what a file's ladder is (a stage with no run
    of a file on this GPU is listed where it has one on another: the pages differ by it) and how long
    a run takes where this GPU has none; `stages`: the family's stages in ladder order."""
    ladder = set(zip(every_run[f"tags.{m.TAG_STAGE}"], every_run["tags.params_file"]))
    newest_first = every_run.sort_values("start_time", ascending=False)
    took = run_seconds(latest)
    plan = []
    for name in params_names:
        expected = expected_seconds(newest_first, name)
        subset = latest[latest["tags.params_file"] == name]
        by_stage = {row[f"tags.{m.TAG_STAGE}"]: row for _, row in subset.iterrows()}
        for stage in stages:
            run = by_stage.get(stage)
            if run is None:
                if (stage, name) in ladder:
                    plan.append(Rerun(name, stage, NOT_RUN, expected.get((stage, ANY_GPU))))
            elif (reason := _reason(run)) is not None:
                seconds = None if pd.isna(took[run.name]) else float(took[run.name])
                plan.append(_rerun(name, stage, reason, run, seconds, expected.get((stage, ANY_GPU))))
    return plan


def _rerun(params_file: str, stage: str, reason: str, run: pd.Series, seconds: float | None,
           whole: float | None) -> Rerun:
    """A killed run's duration is a lower bound; the stage's expected seconds (its newest whole run on
    any GPU, or a longer killed one since), where longer, say more (s2's acceptance run killed after
    2.2 min had taken 4.1 whole)."""
    if run.get(f"tags.{m.TAG_OUTCOME}") != m.OUTCOME_KILLED:
        return Rerun(params_file, stage, reason, seconds)
    if whole is not None and (seconds is None or whole > seconds):
        return Rerun(params_file, stage, reason, whole)
    return Rerun(params_file, stage, reason, seconds, at_least=True)


def _minutes(plan: Sequence[Rerun]) -> str:
    known = [r.seconds for r in plan if r.seconds is not None]
    if not known:
        return "?"
    total = f"{'at least' if any(r.at_least for r in plan) else 'about'} {sum(known) / SECONDS_PER_MINUTE:.0f}"
    return total if len(known) == len(plan) else f"{total} + {len(plan) - len(known)} unknown"


def _minutes_cell(rerun: Rerun) -> str:
    if rerun.seconds is None:
        return "?"
    minutes = f"{rerun.seconds / SECONDS_PER_MINUTE:.1f}"
    return f"more than {minutes}" if rerun.at_least else minutes


def rerun_lines(plan: Sequence[Rerun], gpu: str) -> list[str]:
    """The page's section: a table per file and the `stagelab run` command that re-runs its stages."""
    lines = ["## Not current on this GPU", ""]
    if not plan:
        return lines + [f"Every stage's latest run on `{gpu}` measured its current source.", ""]
    lines += [f"Re-running these on `{gpu}` makes every row above current. Minutes: the stage's latest run "
              "there (more than that where it was stopped from outside, unless its newest whole run anywhere took "
              "longer: then that), or its newest whole run on another GPU where it has none there; on one GPU (a batch over several GPUs divides them). A stale run that "
              "failed is here alone, with its outcome: the tables above leave it out, as its failure belongs "
              "to code that is gone.", ""]
    table = pd.DataFrame([{"parameter file": r.params_file, "stage": r.stage, "why": r.reason,
                           "minutes": _minutes_cell(r)} for r in plan])
    lines += [markdown(table), ""]
    for name in dict.fromkeys(r.params_file for r in plan):
        items = [r for r in plan if r.params_file == name]
        lines.append(f"- {name} ({_minutes(items)} min): "
                     f"`stagelab run --stages {' '.join(r.stage for r in items)} --params params/{name}.yaml`")
    return lines + [""]


def rerun_summary(plan: Sequence[Rerun], gpu: str) -> str:
    """One line for the terminal after `stagelab report`."""
    if not plan:
        return f"{gpu}: every row current"
    return (f"{gpu}: {len(plan)} stage run(s) not current, {_minutes(plan)} min of GPU time "
            "to re-run (the page's 'Not current on this GPU' section lists the commands)")
