"""A notebook that ended itself after its hang verdict (measure.watchdog): a hung CUDA context
cannot be reused, so the notebook records `incorrect` with reason `hang` and exits; the batch
keeps that verdict (never `error` or `killed`) and goes on with the next stage."""

from __future__ import annotations

from ..core import metrics
from ..judge.outcome import HANG, INCORRECT
from ..measure.watchdog import HANG_EXIT_CODE, HANG_MARKER
from ..record import tracking
from .repair import close_run

# The note a run ended by its own hang verdict gets instead of papermill's "kernel died".
HANG_EXIT_NOTE = (f"the notebook's process ended itself after its hang verdict (status {HANG_EXIT_CODE}): "
                  "a hung CUDA context cannot be reused")


def hang_exit(run_id: str, outcome: str, stderr: str) -> str | None:
    """The outcome of a notebook that ended itself after a hang (its marker on stderr, or the
    run's hang tag): its own verdict, or, if it could not finish recording it, `incorrect` with
    the hang as the reason. None: the notebook did not end by a hang."""
    hang = tracking.get_tag(run_id, metrics.TAG_HANG)
    if not hang and HANG_MARKER not in stderr:
        return None
    if outcome == metrics.OUTCOME_RUNNING:
        hang = hang or next(line for line in stderr.splitlines() if HANG_MARKER in line)
        close_run(run_id, INCORRECT, f"{HANG}: {hang}", "FINISHED", **{metrics.TAG_HANG: hang})
        outcome = INCORRECT
    tracking.set_tags(run_id, {metrics.TAG_NOTEBOOK_ERROR: HANG_EXIT_NOTE})
    return outcome
