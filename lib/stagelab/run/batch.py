"""Batch runs: execute stage notebooks through papermill, one kernel process each.

The runner initializes the MLflow store and experiment once, closes runs that
an earlier runner left RUNNING when it died (`repair`), creates each stage's run
before its notebook starts (so a notebook that dies still leaves a record), runs
papermill in a session of its own with a time-out while renewing the run's
heartbeat, logs the executed notebook as an artifact, marks any run the notebook
did not finish as `error` with its message, and goes on to the next stage. A notebook whose launch
hung (stagelab.measure.watchdog) records its verdict, `incorrect` with reason `hang`, then ends its own
process (its CUDA context is lost): that run keeps its verdict, and the batch goes on.
With `gpus`, one notebook runs per GPU at a time, each with that GPU alone as its
CUDA_VISIBLE_DEVICES (`workers`); with `shard`, the batch runs one piece of the sweep.
SIGINT/SIGTERM stop every running notebook's whole process tree (`stopping`), record
each run as killed and end the batch, naming the stages that did not run.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from ..core import metrics
from ..record import tracking
from ..core.errors import ConfigError, RunnerStopped
from .deadline import Admission
from .execute import execute_notebook, notebook_error
from .hang_exit import HANG_EXIT_NOTE, hang_exit
from .gpus import Gpu, no_gpu_notice
from ..record.owner import heartbeat_tags
from ..core.params import RunParams, load_params, with_steps
from ..core.family_sources import stage_notebook_file
from ..core.paths import resolve_params_path, runs_dir
from .progress import BatchProgress
from ..core.registry import Registry, family_registry
from ..core.sources import run_source_hash
from .repair import close_run, mark_killed, repair_stale_runs
from .resume import finished_run
from .shard import Shard
from .summary import NotebookResult, summary_row, write_summary
from ..core.stopping import stop_on_signals
from .workers import RunningNotebooks, Slot, run_on_slots, slots_for

def _record_error(run_id: str, outcome: str, error: str) -> str:
    """The outcome to report; a run the notebook never finished is closed as `error` with why."""
    if outcome == metrics.OUTCOME_RUNNING:  # the notebook never reached finish(): record why
        close_run(run_id, metrics.OUTCOME_ERROR, error or "notebook ended before finish()", "FAILED")
        return metrics.OUTCOME_ERROR
    if error:
        tracking.set_tags(run_id, {metrics.TAG_NOTEBOOK_ERROR: error})
    return outcome


@dataclass
class BatchContext:
    """What every notebook of one batch shares."""
    params_path: Path
    experiment_id: str
    experiment: str
    folder: Path  # runs/<batch>: executed notebooks and their stderr
    timeout_s: int
    kernel_name: str = "python3"
    running: RunningNotebooks = field(default_factory=RunningNotebooks)
    tags: dict[str, str] = field(default_factory=dict)  # on every run of the batch (its shard, its steps)
    steps: str | None = None  # `--steps`: the optional steps instead of the file's, comma-separated
    registry: Registry | None = None  # the family whose stages the batch runs

    def parameters(self, stage: str, run_id: str) -> dict[str, str]:
        steps = {} if self.steps is None else {"steps": self.steps}
        return {"stage": stage, "family": self.registry.family, "params_file": str(self.params_path),
                "mlflow_run_id": run_id, "experiment": self.experiment, **steps}


def _log_notebook(batch: BatchContext, stage: str, run_id: str, executed: Path, stderr: str, seconds: float) -> None:
    if executed.is_file():
        tracking.log_artifact(run_id, executed, "notebook")
    (batch.folder / f"{stage}.stderr.log").write_text(stderr)
    tracking.log_artifact(run_id, batch.folder / f"{stage}.stderr.log", "notebook")
    tracking.log_metrics(run_id, {metrics.NOTEBOOK_SECONDS.key(): seconds})


def _killed_by_stop(batch: BatchContext, run_id: str) -> bool:
    """Record a run the batch's stop cut short as killed; False when there was no stop, or the
    notebook finished its run before the stop reached it."""
    if batch.running.stopped_by is None or tracking.client().get_run(run_id).info.status != "RUNNING":
        return False
    mark_killed(run_id, f"the batch runner received {batch.running.stopped_by} while the notebook ran")
    return True


def _execute_and_record(batch: BatchContext, stage: str, run_id: str, slot: Slot) -> NotebookResult:
    notebook = stage_notebook_file(batch.registry, stage)
    executed = batch.folder / f"{stage}.ipynb"
    started = time.perf_counter()
    if not notebook.is_file():
        code, stderr = 1, f"notebook {notebook} does not exist"
    else:
        code, stderr = execute_notebook(notebook, executed, batch.parameters(stage, run_id), batch.timeout_s,
                                        batch.kernel_name, run_id, running=batch.running, slot=slot)
    seconds = time.perf_counter() - started
    _log_notebook(batch, stage, run_id, executed, stderr, seconds)
    gpu = slot.gpu.index if slot.gpu else ""
    if _killed_by_stop(batch, run_id):
        return NotebookResult(stage, run_id, metrics.OUTCOME_KILLED, seconds, executed, "", gpu)
    outcome = tracking.get_tag(run_id, metrics.TAG_OUTCOME) or metrics.OUTCOME_RUNNING
    if code != 0 and (after_hang := hang_exit(run_id, outcome, stderr)) is not None:
        return NotebookResult(stage, run_id, after_hang, seconds, executed, HANG_EXIT_NOTE, gpu)
    error = ""
    if code is None:
        error = f"notebook timed out after {batch.timeout_s}s"
    elif code != 0:
        error = notebook_error(executed, stderr) if executed.is_file() else stderr.strip()[-2000:]
    outcome = _record_error(run_id, outcome, error)
    return NotebookResult(stage, run_id, outcome, seconds, executed, error, gpu)


def run_stage_notebook(batch: BatchContext, stage: str, slot: Slot = Slot()) -> NotebookResult:
    """One stage's notebook on `slot` under its own MLflow run, created here so a notebook that dies
    still leaves a record. A stop of the batch while the run is open records it as killed."""
    # Tagged from the start: a notebook that dies before its build still says which source it ran (a page's staleness).
    source = run_source_hash(batch.registry.stages[stage], batch.registry)
    run_id = tracking.create_run(batch.experiment_id, stage, batch.params_path.stem, timeout_s=batch.timeout_s,
                                 tags={metrics.TAG_BATCH: batch.folder.name, metrics.TAG_SOURCE_HASH: source,
                                       **heartbeat_tags(), **slot.tags(), **batch.tags})
    return _execute_and_record(batch, stage, run_id, slot)


def _plan(stages: list[str] | None, params: str | Path) -> tuple[Path, RunParams, Registry, list[str]]:
    """The parameter file, its family's registry and the stages to run, checked before any work."""
    params_path = resolve_params_path(params)
    run_params = load_params(params_path)  # fail before anything starts on a bad file
    params_path = params_path.resolve()
    registry = family_registry(run_params.family.name)
    stages = list(stages or registry.stages)
    for stage in stages:
        if stage not in registry.stages:
            raise ConfigError(f"stage {stage!r} is not in the {registry.family} family that {params_path.name} "
                              f"describes; its stages: {', '.join(registry.stages)}")
    return params_path, run_params, registry, stages


def _resumed(experiment_id: str, registry: Registry, stage: str, params_name: str) -> NotebookResult | None:
    """The finished run `--resume` keeps for this stage, as a batch result; None: run it again."""
    run_id = finished_run(experiment_id, registry, stage, params_name)
    if run_id is None:
        return None
    return NotebookResult(stage, run_id, tracking.get_tag(run_id, metrics.TAG_OUTCOME) or "", 0.0, None)


def _new_batch(params_path: Path, run_params: RunParams, experiment: str | None, timeout_s: int | None,
               kernel_name: str, shard: Shard | None, steps: tuple[str, ...] | None = None) -> BatchContext:
    """The store and experiment opened, and the batch's own runs/ folder made."""
    experiment = experiment or run_params.family.experiment
    experiment_id = tracking.init_store(experiment)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    runs_dir().mkdir(parents=True, exist_ok=True)
    # A folder of its own even when another batch starts in the same second (concurrent runs on one
    # checkout would otherwise write their executed notebooks over each other's).
    folder = Path(tempfile.mkdtemp(prefix=f"{stamp}-{params_path.stem}-", dir=runs_dir()))
    tags = {metrics.TAG_SHARD: str(shard)} if shard else {}
    if steps is not None:  # the record says the file's steps were overridden, and with what
        tags[metrics.TAG_STEPS_OVERRIDE] = ",".join(steps) or "none"
    return BatchContext(params_path, experiment_id, experiment, folder, timeout_s or run_params.timeout_s,
                        kernel_name, tags=tags, steps=None if steps is None else ",".join(steps))


def run_batch(stages: list[str] | None = None, params: str | Path = "params/acceptance.yaml", *,
              timeout_s: int | None = None, experiment: str | None = None, kernel_name: str = "python3",
              progress: bool = True, resume: bool = False, gpus: list[Gpu] | None = None,
              shard: Shard | None = None, steps: list[str] | None = None,
              deadline_s: float | None = None) -> pd.DataFrame:
    """Run the stages' notebooks, in order, one at a time or (with `gpus`) one per GPU at a time; a
    failing notebook is recorded and the batch goes on. With `shard`, only that piece of the stages;
    with `steps`, these optional steps instead of the parameter file's (checked before any work).
    On start, runs left RUNNING by a runner that is gone are closed as killed; with `resume`, a
    stage with a finished run of its current source on this parameter file is not run again.
    With `deadline_s`, a stage starts only where its last whole run ends in time (run.deadline).
    SIGINT/SIGTERM stop the running notebooks, record each as killed and raise RunnerStopped."""
    params_path, run_params, registry, stages = _plan(stages, params)
    chosen_steps = None if steps is None else with_steps(run_params, steps).steps
    stages = shard.pick(stages) if shard else stages
    batch = _new_batch(params_path, run_params, experiment, timeout_s, kernel_name, shard, chosen_steps)
    batch.registry = registry
    console = BatchProgress(len(stages), params_path.stem + (f", shard {shard}" if shard else ""), progress)
    if stages and (notice := no_gpu_notice(len(stages))):
        console.say(notice)
    results: dict[str, NotebookResult] = {}

    def finished(result: NotebookResult, note: str = "") -> None:
        results[result.stage] = result
        console.done(result, note)

    try:
        with stop_on_signals():
            for stale in repair_stale_runs():
                console.say(f"closed {stale.name} ({stale.run_id}) as killed: {stale.gone_reason}")
            kept = [_resumed(batch.experiment_id, registry, stage, params_path.stem) if resume else None
                    for stage in stages]
            for result in filter(None, kept):
                finished(result, " (resumed: finished at this source)")
            admit = Admission.of(deadline_s, batch.experiment, registry.family, params_path, console.say)
            run_on_slots([stage for stage in stages if stage not in results], slots_for(gpus),
                         lambda stage, slot: run_stage_notebook(batch, stage, slot), batch.running,
                         console.start, finished, admit)
            if admit:
                admit.report()
    except RunnerStopped as stop:
        stop.not_run = [stage for stage in stages if stage not in results]
        raise
    finally:
        console.close()
        summary = write_summary([summary_row(results[stage]) for stage in stages if stage in results], batch.folder)
    return summary
