"""A tune's MLflow bookkeeping: one parent run per (stage, parameter file, source hash, GPU),
one nested run per configuration, and what an earlier tune of the same source already recorded.

Keying the parent by the source hash is what makes a tune resumable: a second tune of
unchanged sources finds the same parent and skips every configuration recorded under it;
an edited kernel (or header, or binding) hashes differently and starts a fresh parent.
The GPU is part of the key because a timing is a fact about one GPU (and `no_gpu` is
not a result at all on a machine that has one).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import metrics as m
from ..record import tracking
from ..core.envinfo import gpu_info
from ..judge.outcome import OUTCOMES
from ..record.owner import owner_tags
from ..core.context import StageContext

# Outcomes that are a finished measurement of a configuration; `error`, `killed` and a run left
# `running` by a crash are measured again.
FINISHED_OUTCOMES = tuple(o for o in OUTCOMES if o not in (m.OUTCOME_ERROR, m.OUTCOME_KILLED))
# Runs one search may return: far above any search space a tune builds in one go.
MAX_SEARCH_RESULTS = 10_000


def elite_tag(rank: int) -> str:
    """The tune run's tag holding the configuration label of the elite of this rank (1 = best)."""
    return f"elite_{rank}"


def elite_run_tag(rank: int) -> str:
    """The tune run's tag holding the run id of the elite of this rank."""
    return f"elite_{rank}_run"


@dataclass(frozen=True)
class PriorTrial:
    """A configuration an earlier tune of the same parent already measured."""

    run_id: str
    outcome: str
    reason: str
    score_us: float | None


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "\\'") + "'"


class TuneStore:
    def __init__(self, ctx: StageContext, experiment: str | None = None):
        self.ctx = ctx
        self.experiment = experiment or ctx.family.tune_experiment
        self.experiment_id = tracking.init_store(self.experiment)
        self.gpu = gpu_info().get(m.TAG_GPU, "none")

    def _search(self, tags: dict[str, str]) -> list:
        where = " and ".join(f"tags.`{k}` = {_quoted(v)}" for k, v in tags.items())
        return tracking.client().search_runs([self.experiment_id], filter_string=where,
                                             max_results=MAX_SEARCH_RESULTS, order_by=["attributes.start_time DESC"])

    def open_parent(self, source_hash: str) -> str:
        """The tune run of this stage, parameter file, source and GPU: found (and reopened) or created."""
        key = {m.TAG_TUNE_ROLE: m.TUNE_ROLE_PARENT, m.TAG_STAGE: self.ctx.stage.id,
               m.TAG_PARAMS_FILE: self.ctx.params.name, m.TAG_SOURCE_HASH: source_hash, m.TAG_GPU: self.gpu}
        stage = self.ctx.stage
        space = ", ".join(f"{name} in [{', '.join(values)}]" for name, values in stage.search_space.axes)
        found = self._search(key)
        if found:
            run_id = found[0].info.run_id
            tracking.client().update_run(run_id, status="RUNNING")
            # this process owns the reopened run now: the recorded owner is gone, and a batch
            # starting meanwhile would close the run as killed
            tracking.set_tags(run_id, {m.TAG_TUNE_SPACE: space, **owner_tags()})
            return run_id
        from ..record.provenance import run_params, run_tags

        run_id = tracking.create_run(self.experiment_id, stage.id, self.ctx.params.name, tags=key,
                                     name=f"tune:{tracking.run_name(stage.id, self.ctx.params.name)}")
        # the space as first tuned (params cannot change later; the tag follows a grown space)
        tracking.log_params(run_id, {**run_params(self.ctx), **stage.search_space.as_params()})
        tracking.set_tags(run_id, {**run_tags(self.ctx), **key, m.TAG_TUNE_SPACE: space,
                                   "mlflow.source.name": "stagelab tune", "mlflow.source.type": "LOCAL",
                                   "mlflow.note.content": f"### Tune of {stage.title}\n\n{space}"})
        return run_id

    def prior_trials(self, parent_run_id: str) -> dict[str, PriorTrial]:
        """Finished configurations under the parent by label, the newest record of each."""
        prior: dict[str, PriorTrial] = {}
        for run in self._search({m.TAG_PARENT_RUN: parent_run_id}):
            tags = run.data.tags
            label, outcome = tags.get(m.TAG_TUNE_CONFIG), tags.get(m.TAG_OUTCOME)
            if label is None or outcome not in FINISHED_OUTCOMES or label in prior:
                continue
            prior[label] = PriorTrial(run.info.run_id, outcome, tags.get(m.TAG_OUTCOME_REASON, ""),
                                      run.data.metrics.get(m.TUNE_SCORE_US.key()))
        return prior

    def config_run(self, parent_run_id: str, label: str) -> str:
        """A nested run for one configuration, in RUNNING state."""
        stage_id, params_name = self.ctx.stage.id, self.ctx.params.name
        return tracking.create_run(self.experiment_id, stage_id, params_name,
                                   name=f"{stage_id}[{label}]@{params_name}",
                                   tags={m.TAG_PARENT_RUN: parent_run_id, m.TAG_TUNE_ROLE: m.TUNE_ROLE_CONFIG,
                                         m.TAG_TUNE_CONFIG: label})

    def set_elites(self, parent_run_id: str, elites: list[tuple[str, str, float]]) -> None:
        """(label, run id, score) per rank, best first, as the parent's tags and metrics; elite tags of
        an earlier, longer list on the same parent are removed."""
        tags, scores = {}, {}
        for rank, (label, run_id, score) in enumerate(elites, start=1):
            tags[elite_tag(rank)] = label
            tags[elite_run_tag(rank)] = run_id
            scores[m.ELITE_SCORE_US.key(str(rank))] = score
        client = tracking.client()
        present = client.get_run(parent_run_id).data.tags
        for rank in range(len(elites) + 1, len(present) + 1):
            for key in (elite_tag(rank), elite_run_tag(rank)):
                if key in present:
                    client.delete_tag(parent_run_id, key)
        if tags:
            tracking.set_tags(parent_run_id, tags)
            tracking.log_metrics(parent_run_id, scores)
