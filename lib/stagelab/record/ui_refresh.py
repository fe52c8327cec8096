"""What `stagelab ui` writes into a store before it serves it, so the views (runs_view) show it.

Both are derived from the runs and written again whenever they changed: each decided run's summary
and description (run_summary: a store recorded before summaries existed gets them here, once), and
the best-stage marks (best_marks: a new run can take the best from an older one).
"""

from __future__ import annotations

from . import tracking
from .best_marks import mark_best_runs
from .run_summary import refresh_summaries
from .runs_view import OUTCOME_TAG
from .tables import runs_frame


def refresh(family) -> str:
    """The family's experiments brought up to date; returns a line saying what changed. Reads each
    experiment's runs once, as Runs (mlflow.search_runs' frame of a store's every metric takes
    longer to build than the store takes to read)."""
    c = tracking.client()
    written, best = 0, 0
    for name in (family.experiment, family.tune_experiment):
        found = c.get_experiment_by_name(name)
        if found is None:
            continue
        runs = c.search_runs([found.experiment_id], max_results=50000, order_by=["attributes.start_time DESC"])
        written += refresh_summaries(runs)
        stage_runs = [r for r in runs if OUTCOME_TAG in r.data.tags]
        if name == family.experiment and stage_runs:
            best = mark_best_runs(family, runs_frame(stage_runs))
    return f"{family.name} store: {written} run summaries written, {best} runs marked best on some problem"
