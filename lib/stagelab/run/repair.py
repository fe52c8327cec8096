"""Closing runs whose owner is gone: a stage run left RUNNING by a runner or kernel that was
killed (kill -9, a crashed machine) is marked KILLED, with the reason as its outcome_reason.

`stagelab run` does this on start and `stagelab runs --repair` on demand; `stagelab runs`
alone lists what it would close.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import metrics
from ..record import tracking
from ..record.run_summary import write_summary
from ..record.owner import Owner
from ..core.params import RunParams

# A store holds far fewer open runs than this; MLflow's SQL store pages beyond it.
MAX_OPEN_RUNS = 50000


@dataclass(frozen=True)
class OpenRun:
    run_id: str
    name: str
    experiment: str
    owner: Owner
    gone_reason: str | None

    @property
    def state(self) -> str:
        if self.gone_reason:
            return f"stale: {self.gone_reason}"
        if self.owner.heartbeat is None and not self.owner.on_this_host:
            return "owner on another host and not beating: cannot tell from here"
        return "owner alive"


def open_runs() -> list[OpenRun]:
    """Every stage run still RUNNING in the store, with its owner and why it is stale (if it is)."""
    client = tracking.client()
    experiments = {e.experiment_id: e.name for e in client.search_experiments()}
    if not experiments:
        return []
    found = client.search_runs(list(experiments), filter_string="attributes.status = 'RUNNING'",
                               max_results=MAX_OPEN_RUNS)
    result = []
    for run in found:
        if metrics.TAG_STAGE not in run.data.tags:
            continue  # not a stage run: someone else's, not ours to close
        owner = Owner.from_tags(run.data.tags, run.info.start_time, RunParams.timeout_s)
        result.append(OpenRun(run.info.run_id, run.info.run_name, experiments[run.info.experiment_id],
                              owner, owner.gone_reason()))
    return result


def close_run(run_id: str, outcome: str, reason: str, status: str, **tags: str) -> None:
    """A run's outcome decided outside its notebook (killed, crashed, hung): its tags, its summary
    (run_summary), its end."""
    tracking.set_tags(run_id, {metrics.TAG_OUTCOME: outcome, metrics.TAG_OUTCOME_REASON: reason, **tags})
    write_summary(run_id)
    tracking.end_run(run_id, status)


def mark_killed(run_id: str, reason: str) -> None:
    close_run(run_id, metrics.OUTCOME_KILLED, reason, "KILLED")


def close_stale(run: OpenRun) -> None:
    mark_killed(run.run_id, f"left RUNNING: {run.gone_reason}")


def repair_stale_runs() -> list[OpenRun]:
    """Mark every open stage run whose owner is gone KILLED; returns those runs."""
    stale = [run for run in open_runs() if run.gone_reason]
    for run in stale:
        close_stale(run)
    return stale
