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


# The trials' table (stagelab try): what was tried, the verdict, the ratio to the default and the clock.
TRIAL_COLUMNS = (metrics.TAG_TRIAL_NAME, metrics.TAG_VERDICT, metrics.TAG_HYPOTHESIS, metrics.TAG_CONCLUSION)
TRIAL_METRICS = (metrics.speedup_geomean(metrics.TRIAL_DEFAULT_LABEL), metrics.speedup_geomean(metrics.BEST_CONTENDER),
                 metrics.MAX_REGISTERS)


def trial_columns() -> list[str]:
    return [*(_column("tags", t) for t in TRIAL_COLUMNS), *(_column("metrics", m.key()) for m in TRIAL_METRICS)]


TRIALS_FILTER = f"tags.`{metrics.TAG_KIND}` = '{metrics.KIND_TRIAL}'"


def view_state(columns: list[str] | None = None, search_filter: str = "") -> str:
    """The shared view's JSON, as the UI's Share button writes it: the columns, and the search box's
    filter when the view has one (the UI takes a shared view's filter from its state, not the URL)."""
    state: dict[str, object] = {"selectedColumns": selected_columns() if columns is None else columns}
    if search_filter:
        state["searchFilter"] = search_filter
    return json.dumps(state, sort_keys=True)


def share_key(columns: list[str] | None = None, search_filter: str = "") -> str:
    """Named after its content, so a change of columns is a new view and old links keep theirs."""
    return "stagelab-" + hashlib.sha256(view_state(columns, search_filter).encode()).hexdigest()[:16]


def trials_view() -> tuple[list[str], str]:
    """The trials' view: their columns, and only trial runs."""
    return trial_columns(), TRIALS_FILTER


def install(client, experiment) -> None:
    """Write the views' tags (stage runs, trials) on `experiment` (an mlflow Experiment) unless there already."""
    for columns, search_filter in ((None, ""), trials_view()):
        tag = SHARED_VIEW_TAG_PREFIX + share_key(columns, search_filter)
        state = view_state(columns, search_filter)
        if experiment.tags.get(tag) != state:
            client.set_experiment_tag(experiment.experiment_id, tag, state)


def trials_url(base_url: str, experiment_id: str) -> str:
    """The experiment's trial runs only (stagelab try), with the trials' columns: the view puts the
    filter in the UI's search box, so a person sees why the table is short and can widen it."""
    return (f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs"
            f"?workflowType=machine_learning&{SHARE_KEY_PARAM}={share_key(*trials_view())}")


def runs_url(base_url: str, experiment_id: str) -> str:
    """The experiment's runs table in the machine-learning view (not GenAI traces), stagelab's columns shown."""
    return (f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs"
            f"?workflowType=machine_learning&{SHARE_KEY_PARAM}={share_key()}")
