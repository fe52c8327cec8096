"""A trial's MLflow run: one per trial, in its stage's experiment, tagged as a trial of the stage
(metrics.TAG_KIND, TAG_TRIAL_OF) so the UI's trials link and the journal find it, and the stage
runs' readers (report, batch summary, --resume) never take it for a stage run: it has no
`outcome` tag, its verdict is TAG_VERDICT.

The run holds the defines or the patch and the source diff against the default; resources and
SASS opcode counts against the default; the checks, the timing ratios against the default and
the library contenders, with the clocks; the verdict, the hypothesis, and later a conclusion
(`add_conclusion`, `stagelab try note`)."""

from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from pathlib import Path

from . import flatten

from ..core import metrics

from . import tracking
from ..core.errors import ConfigError
from .recorder import write_table
from .run_summary import write_summary
from ..measure.trial_compare import (default_timing_metrics, key_numbers, main_loop_metrics, resources_vs_default,
                                     sass_vs_default)


def trial_run_name(stage_id: str, trial_name: str) -> str:
    return f"{stage_id} try {trial_name}"


def trial_tags(stage_id: str, name: str, hypothesis: str, spec_defines: dict, patch: str = "") -> dict[str, str]:
    """The tags every trial run carries, new or imported."""
    return {metrics.TAG_KIND: metrics.KIND_TRIAL, metrics.TAG_TRIAL_OF: stage_id, metrics.TAG_TRIAL_NAME: name,
            metrics.TAG_TRIAL_DEFINES: json.dumps(spec_defines, sort_keys=True), metrics.TAG_TRIAL_PATCH: patch,
            metrics.TAG_HYPOTHESIS: hypothesis,
            "mlflow.note.content": f"### Trial of {stage_id}: {name}\n\n{hypothesis or '(no hypothesis given)'}"}


def _start(session, trial, hypothesis: str, from_run: str | None) -> str:
    from .provenance import run_params, run_tags

    ctx = replace(session.ctx, stage=trial.stage, registry=trial.registry)
    experiment_id = tracking.init_store(ctx.family.experiment)
    tags = {k: v for k, v in run_tags(ctx).items() if k != metrics.TAG_OUTCOME}
    spec = trial.spec
    tags |= trial_tags(ctx.stage.id, spec.name, hypothesis, spec.defines, spec.patch.name if spec.patch else "")
    tags |= {metrics.TAG_TRIAL_COMMIT: tags.get("git_commit", "unknown"), metrics.TAG_TRIAL_GPU: tags.get("gpu", "none"),
             "mlflow.source.name": "stagelab try", "mlflow.source.type": "LOCAL"}
    if spec.variant:
        tags[metrics.TAG_TRIAL_VARIANT] = spec.variant
    if from_run:
        tags[metrics.TAG_TRIAL_FROM_RUN] = from_run
    run_id = tracking.create_run(experiment_id, ctx.stage.id, ctx.params.name, tags=tags,
                                 name=trial_run_name(ctx.stage.id, spec.name), timeout_s=ctx.params.timeout_s)
    tracking.log_params(run_id, run_params(ctx))
    return run_id


def _write_change(folder: Path, session, trial) -> None:
    """The defines or the patch, and the source diff against the default."""
    spec, default = trial.spec, session.ctx.stage
    changed = {k: {"default": default.defines.get(k), "trial": v} for k, v in trial.stage.defines.items()
               if default.defines.get(k) != v}
    (folder / "trial.json").write_text(json.dumps({**spec.describe(), "name": spec.name,
                                                    "defines_vs_default": changed}, indent=2))
    if spec.patch is not None:
        (folder / f"{spec.patch.stem}.diff.txt").write_text(spec.patch.read_text())
    diff = trial.source_diff or f"# no source change: the default's sources built with {json.dumps(changed)}\n"
    (folder / f"{default.id}_default_to_trial.diff.txt").write_text(diff)


def _write_measurements(folder: Path, session, trial) -> dict[str, float]:
    """Tables as artifacts; returns the metrics."""
    m, base = trial.measured, session.default
    out: dict[str, float] = {}
    if m.build_error is not None:
        (folder / "build.log").write_text(f"{m.build_error}\n{m.build_error.log}")
    if m.build is not None:
        (folder / "ptxas.log").write_text(m.build.ptxas_log)
        out[metrics.BUILD_SECONDS.key()] = m.build.seconds
    if m.resources is not None:
        write_table(folder, "resources", m.resources.frame())
        write_table(folder, "gates", m.resources.gates_frame())
        write_table(folder, "resources_vs_default", resources_vs_default(m.resources, base.resources))
        write_table(folder, "sass_vs_default", sass_vs_default(m.build, base.build))
        out |= flatten.resource_metrics(m.resources)
        out |= {metrics.of_default(k): v for k, v in flatten.resource_metrics(base.resources).items()}
    if m.main_loops is not None:
        write_table(folder, "main_loops_vs_default", m.main_loops)
        out |= main_loop_metrics(m.main_loops)
    if m.checks is not None:
        write_table(folder, "correctness", m.checks.frame())
        write_table(folder, "dependent_launches", m.checks.chain_frame())
        out |= flatten.check_metrics(m.checks)
    if base.checks is not None:
        write_table(folder, "correctness_of_default", base.checks.frame())
        out |= {metrics.of_default(k): v for k, v in flatten.check_metrics(base.checks).items()}
    if m.crash or m.timing_error:
        (folder / "crash.log").write_text(m.crash or m.timing_error)
    if m.timing is not None:
        write_table(folder, "timing", m.timing.frame())
        write_table(folder, "speedups", m.timing.speedups())
        out |= flatten.timing_metrics(m.timing, session.ctx.params.mission.tag)
        out |= default_timing_metrics(m.timing)
    return out


def record_trial(session, trial, hypothesis: str = "", from_run: str | None = None) -> str:
    run_id = _start(session, trial, hypothesis, from_run)
    with tempfile.TemporaryDirectory(prefix="stagelab-trial-") as scratch:
        folder = Path(scratch)
        _write_change(folder, session, trial)
        values = _write_measurements(folder, session, trial)
        tracking.log_metrics(run_id, values)
        tracking.log_artifacts(run_id, folder, "trial")
    m = trial.measured
    tracking.set_tags(run_id, {
        metrics.TAG_VERDICT: trial.verdict.verdict, metrics.TAG_VERDICT_REASON: trial.verdict.reason,
        metrics.TAG_KEY_NUMBERS: key_numbers(trial, session.default, session.ctx.params.mission.tag),
        **(m.timing.clocks if m.timing else {})})
    write_summary(run_id)
    tracking.end_run(run_id, "FAILED" if trial.verdict.verdict == "build_failed" else "FINISHED")
    trial.run_id = run_id
    return run_id


def record_session(session, hypothesis: str = "", from_run: str | None = None) -> list[str]:
    return [record_trial(session, trial, hypothesis, from_run) for trial in session.trials]


def add_conclusion(run_id: str, text: str) -> str:
    """`stagelab try note RUN "..."`: the conclusion drawn from a trial, added to its run; returns the
    trial's name. Only a trial run takes one."""
    from ..core.registry import find_stage
    from .conclusions_file import Conclusion, conclusions_path, remember
    from .portable import run_here_or_imported

    if not text.strip():
        raise ConfigError("stagelab try note: the conclusion is empty")
    run = run_here_or_imported(run_id)
    if run is None:
        raise ConfigError(f"no run {run_id!r} in {tracking.tracking_uri()}, nor one imported from a run of that id")
    run_id = run.info.run_id
    if run.data.tags.get(metrics.TAG_KIND) != metrics.KIND_TRIAL:
        raise ConfigError(f"run {run_id} is not a trial (no tag {metrics.TAG_KIND}={metrics.KIND_TRIAL}): "
                          "a conclusion goes on a trial run")
    tracking.set_tags(run_id, {metrics.TAG_CONCLUSION: text.strip()})
    write_summary(run_id)  # the description and summary say the conclusion too
    # kept in the repository too: the records hold the trial's run as it was before this note
    family = find_stage(run.data.tags.get(metrics.TAG_TRIAL_OF, ""))[0].family
    remember(conclusions_path(family), [Conclusion.of(run, text)])
    return run.data.tags.get(metrics.TAG_TRIAL_NAME, run_id)

