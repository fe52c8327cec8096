"""The runs table a person sees first: which columns the MLflow UI shows for a stagelab experiment.

MLflow 3's runs table shows no metric or tag column until someone picks them by hand, and that
choice lives in one browser's local storage. The UI also reads a "shared view" from an
experiment tag `mlflow.sharedViewState.<key>` (what its Share button writes) when the URL carries
`viewStateShareKey=<key>`. stagelab writes that tag with the outcome and the batch summary's
metrics as columns, and `runs_url` links to it, so every browser opens the same table.
"""

from __future__ import annotations

import hashlib
import json

from ..core import metrics

SHARED_VIEW_TAG_PREFIX = "mlflow.sharedViewState."  # the MLflow UI's own prefix (its Share button)
SHARE_KEY_PARAM = "viewStateShareKey"

# The batch summary's columns, in its order; the UI names a column `<kind>.`<key>``.
OUTCOME_TAG = "outcome"
TABLE_METRICS = (metrics.MISSION_P50_US, metrics.speedup_geomean(metrics.PARENT),
                 metrics.speedup_geomean(metrics.BEST_CONTENDER), metrics.MAX_REGISTERS, metrics.TOTAL_SPILLS)


def _column(kind: str, key: str) -> str:
    return f"{kind}.`{key}`"


def selected_columns() -> list[str]:
    return [_column("tags", OUTCOME_TAG), *(_column("metrics", m.key()) for m in TABLE_METRICS),
            _column("attributes", "Source")]


def view_state() -> str:
    """The shared view's JSON, as the UI's Share button writes it (only the columns set)."""
    return json.dumps({"selectedColumns": selected_columns()}, sort_keys=True)


def share_key() -> str:
    """Named after its content, so a change of columns is a new view and old links keep theirs."""
    return "stagelab-" + hashlib.sha256(view_state().encode()).hexdigest()[:16]


def install(client, experiment) -> None:
    """Write the view's tag on `experiment` (an mlflow Experiment) unless it is there already."""
    tag = SHARED_VIEW_TAG_PREFIX + share_key()
    if experiment.tags.get(tag) != view_state():
        client.set_experiment_tag(experiment.experiment_id, tag, view_state())


def runs_url(base_url: str, experiment_id: str) -> str:
    """The experiment's runs table in the machine-learning view (not GenAI traces), stagelab's columns shown."""
    return (f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs"
            f"?workflowType=machine_learning&{SHARE_KEY_PARAM}={share_key()}")
