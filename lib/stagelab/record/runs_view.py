"""The runs tables a person sees first: the views of a stagelab experiment in the MLflow UI.

MLflow 3's runs table shows no metric or tag column until someone picks them by hand, and that
choice lives in one browser's local storage. The UI also reads a "shared view" from an
experiment tag `mlflow.sharedViewState.<key>` (what its Share button writes) when the URL carries
`viewStateShareKey=<key>`: its columns, its search filter and its sort. stagelab writes two, and
`stagelab ui` prints a link to each, so every browser opens the same tables:

- the stage comparison (STAGES): stage runs only (a trial has no `outcome` tag), the best stages
  first (best_marks' tag, which `stagelab ui` refreshes), then the newest; the columns say where
  each run is best, its one-line summary with rounded numbers (run_summary), GPU, parameter file
  and outcome, then the mission p50 and speedups as sortable numbers;
- the trials (TRIALS): `stagelab try` runs only, their verdict, summary and conclusion;
- a tune experiment's runs (TUNES): each configuration's outcome, summary and score.

Neither buries the other: each filters the other out, in the UI's search box where a person can
see and widen it. MLflow 3.17's UI picks its GenAI or model-training side from the URL's
`workflowType` (then the toggle's saved choice) and older 3.x from the experiment tag
`mlflow.experimentKind` (tracking.init_store): the links carry the first.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from ..core import metrics

SHARED_VIEW_TAG_PREFIX = "mlflow.sharedViewState."  # the MLflow UI's own prefix (its Share button)
SHARE_KEY_PARAM = "viewStateShareKey"
OUTCOME_TAG = metrics.TAG_OUTCOME
# The tags the views show that stagelab writes for them (named here, the one module every writer,
# reader and the store's set-up may import: tracking.init_store installs the views).
TAG_SUMMARY = "stagelab.summary"  # run_summary: one line, outcome or verdict and the numbers, rounded
TAG_BEST_ON = "stagelab.best_on"  # best_marks: the problems where the run is the best stage
# Stage runs carry an outcome; trial runs a verdict instead (trial_record), so this leaves them out.
STAGE_RUNS_FILTER = f"tags.`{OUTCOME_TAG}` LIKE '%'"


def _column(kind: str, key: str) -> str:
    """The UI's name for a column: `<kind>.`<key>``."""
    return f"{kind}.`{key}`"


@dataclass(frozen=True)
class View:
    """One shared view: its columns in their order (after the run's name and date, which the UI
    pins), the widths of those that hold text, its search box's filter and its sort."""

    columns: tuple[str, ...]
    search_filter: str
    order_by: str = ""  # a column name; empty: the UI's own (newest first)
    ascending: bool = True
    widths: tuple[tuple[str, int], ...] = ()  # (column, pixels); the UI's default is 100

    def state(self) -> str:
        """The view's JSON, as the UI's Share button writes it (the UI takes a shared view's filter
        and sort from its state, not the URL)."""
        state: dict[str, object] = {"selectedColumns": list(self.columns), "columnOrder": list(self.columns),
                                    "columnWidths": dict(self.widths), "searchFilter": self.search_filter}
        if self.order_by:
            state |= {"orderByKey": self.order_by, "orderByAsc": self.ascending}
        return json.dumps(state, sort_keys=True)

    def key(self) -> str:
        """Named after its content, so a change of columns is a new view and old links keep theirs."""
        return "stagelab-" + hashlib.sha256(self.state().encode()).hexdigest()[:16]

    def url(self, base_url: str, experiment_id: str) -> str:
        """The experiment's runs table in the model-training view (not GenAI traces), with this view."""
        return (f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs"
                f"?workflowType=machine_learning&{SHARE_KEY_PARAM}={self.key()}")


# The first screen (the UI's default width beside its assistant panel leaves 825 pixels after the
# pinned name and date): where each run is best, its summary, its GPU and parameter file. Then, a
# scroll away, its outcome and the numbers as numbers, to sort by.
_BEST, _SUMMARY = _column("tags", TAG_BEST_ON), _column("tags", TAG_SUMMARY)
_GPU, _FILE = _column("tags", metrics.TAG_GPU), _column("tags", metrics.TAG_PARAMS_FILE)
STAGES = View(
    columns=(_BEST, _SUMMARY, _GPU, _FILE, _column("tags", OUTCOME_TAG), _column("tags", metrics.TAG_STAGE),
             *(_column("metrics", m.key()) for m in (
                 metrics.MISSION_P50_US, metrics.speedup_geomean(metrics.PARENT),
                 metrics.speedup_geomean(metrics.BEST_CONTENDER), metrics.MAX_REGISTERS))),
    search_filter=STAGE_RUNS_FILTER,
    order_by=_BEST,  # runs without the tag sort last, whatever the direction
    widths=((_BEST, 310), (_SUMMARY, 250), (_GPU, 165), (_FILE, 95)))

TRIALS_FILTER = f"tags.`{metrics.TAG_KIND}` = '{metrics.KIND_TRIAL}'"
_VERDICT, _TRIAL_GPU = _column("tags", metrics.TAG_VERDICT), _column("tags", metrics.TAG_TRIAL_GPU)
TRIALS = View(
    columns=(_SUMMARY, _TRIAL_GPU, _FILE, _VERDICT,
             *(_column("tags", t) for t in (metrics.TAG_HYPOTHESIS, metrics.TAG_CONCLUSION, metrics.TAG_TRIAL_NAME)),
             *(_column("metrics", m.key()) for m in (metrics.speedup_geomean(metrics.TRIAL_DEFAULT_LABEL),
                                                     metrics.speedup_geomean(metrics.BEST_CONTENDER)))),
    search_filter=TRIALS_FILTER,
    widths=((_SUMMARY, 560), (_TRIAL_GPU, 165), (_FILE, 100)))

# A tune's experiment (stagelab-<family>-tune): each tune run with its configurations nested under it.
_CONFIG = _column("tags", metrics.TAG_TUNE_CONFIG)
TUNES = View(
    columns=(_CONFIG, _SUMMARY, _GPU, _FILE,
             *(_column("metrics", m.key()) for m in (metrics.TUNE_SCORE_US, metrics.MISSION_P50_US))),
    search_filter="",
    widths=((_CONFIG, 220), (_SUMMARY, 340), (_GPU, 165), (_FILE, 100)))
VIEWS = (STAGES, TRIALS, TUNES)


def install(client, experiment) -> None:
    """Write the views' tags on `experiment` (an mlflow Experiment) unless there already."""
    for view in VIEWS:
        tag = SHARED_VIEW_TAG_PREFIX + view.key()
        if experiment.tags.get(tag) != view.state():
            client.set_experiment_tag(experiment.experiment_id, tag, view.state())


def runs_url(base_url: str, experiment_id: str) -> str:
    """The stage comparison: stage runs, the best first, stagelab's columns shown."""
    return STAGES.url(base_url, experiment_id)


def trials_url(base_url: str, experiment_id: str) -> str:
    """The experiment's trial runs only (stagelab try), with the trials' columns: the view puts the
    filter in the UI's search box, so a person sees why the table is short and can widen it."""
    return TRIALS.url(base_url, experiment_id)

