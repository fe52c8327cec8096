"""`stagelab run --resume`: which (stage, parameter file) pairs already have a finished run of
the stage's current source, so a stopped batch picks up where it stopped. "Source" is the run's
source hash (core.sources): the stage, the family's headers and binding, and the family's Python,
so a fix to the reference or the inputs runs the stages again.

"Finished" is MLflow's FINISHED status: a run the notebook itself closed (pass, valid_negative,
incorrect, uncovered, resource_fail, no_gpu). Runs that erred, failed to build or were killed are run again.
"""

from __future__ import annotations

from ..core import metrics
from ..record import tracking
from ..core.registry import Registry
from ..core.sources import run_source_hash


def finished_run(experiment_id: str, registry: Registry, stage_id: str, params_name: str) -> str | None:
    """The newest FINISHED run of `stage_id` on `params_name` at the stage's current source hash."""
    current = run_source_hash(registry.stages[stage_id], registry)
    runs = tracking.client().search_runs(
        [experiment_id], filter_string=f"tags.{metrics.TAG_STAGE} = '{stage_id}' AND attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"])
    for run in runs:  # params_file compared here: a file name may hold quotes a filter string cannot
        if run.data.tags.get(metrics.TAG_PARAMS_FILE) == params_name and run.data.tags.get(metrics.TAG_SOURCE_HASH) == current:
            return run.info.run_id
    return None
