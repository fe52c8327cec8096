"""Batch runs: execute stage notebooks through papermill, one kernel process each.

The runner initializes the MLflow store and experiment once, closes runs that
an earlier runner left RUNNING when it died (`repair`), creates each stage's run
before its notebook starts (so a notebook that dies still leaves a record), runs
papermill in a session of its own with a time-out while renewing the run's
heartbeat, logs the executed notebook as an artifact, marks any run the notebook
did not finish as `error` with its message, and goes on to the next stage.
SIGINT/SIGTERM stop the notebook's whole process tree (`stopping`), record its
run as killed and end the batch, naming the stages that did not run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from . import metrics, tracking
from .errors import ConfigError, RunnerStopped
from .owner import heartbeat_tags
from .params import RunParams, load_params
from .paths import repo_root, resolve_params_path, runs_dir
from .registry import Registry, family_registry
from .repair import mark_killed, repair_stale_runs
from .resume import finished_run
from .stopping import stop_on_signals, stop_tree
from .supervise import wait_with_heartbeat

# Batch summary column -> the metric it shows (speedups: the geometric mean over the timed problems).
SUMMARY_METRICS = {
    "mission_p50_us": metrics.MISSION_P50_US,
    "speedup_vs_parent": metrics.speedup_geomean(metrics.PARENT),
    "speedup_vs_best": metrics.speedup_geomean(metrics.BEST_CONTENDER),
    "max_registers": metrics.MAX_REGISTERS,
    "max_shared_memory_bytes": metrics.MAX_SHARED_MEMORY,
    "total_spill_bytes": metrics.TOTAL_SPILLS,
}
SUMMARY_COLUMNS = ["stage", "outcome", *SUMMARY_METRICS, "seconds", "run_id"]


@dataclass
class NotebookResult:
    stage: str
    run_id: str
    outcome: str
    seconds: float
    executed: Path | None  # None: a finished run kept by --resume
    error: str = ""


def _notebook_error(executed: Path, stderr: str) -> str:
    """The first error a cell raised, else papermill's own last lines."""
    try:
        import nbformat

        nb = nbformat.read(executed, as_version=4)
        for cell in nb.cells:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    return f"{output.get('ename')}: {output.get('evalue')}"[:2000]
    except Exception:
        pass
    tail = [line for line in stderr.strip().splitlines() if line.strip()][-5:]
    return "\n".join(tail)[:2000] or "notebook failed without a message"


def execute_notebook(notebook: Path, executed: Path, parameters: dict, timeout_s: int,
                     kernel_name: str = "python3", run_id: str | None = None) -> tuple[int | None, str]:
    """papermill in a child session; returns (exit code or None on time-out, stderr).
    On SIGINT/SIGTERM (RunnerStopped) the notebook and its kernel are stopped before it propagates."""
    cmd = [sys.executable, "-m", "papermill", str(notebook), str(executed), "-k", kernel_name,
           "--cwd", str(notebook.parent), "--no-progress-bar"]
    for key, value in parameters.items():
        cmd += ["-p", key, str(value)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "STAGELAB_ROOT": str(repo_root())}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)
    try:
        return wait_with_heartbeat(proc, timeout_s, run_id)
    except RunnerStopped:
        stop_tree(proc.pid)
        proc.communicate()
        raise


def _record_error(run_id: str, outcome: str, error: str) -> str:
    """The outcome to report; a run the notebook never finished is closed as `error` with why."""
    if outcome == metrics.OUTCOME_RUNNING:  # the notebook never reached finish(): record why
        tracking.set_tags(run_id, {metrics.TAG_OUTCOME: metrics.OUTCOME_ERROR,
                                   metrics.TAG_OUTCOME_REASON: error or "notebook ended before finish()"})
        tracking.end_run(run_id, "FAILED")
        return metrics.OUTCOME_ERROR
    if error:
        tracking.set_tags(run_id, {metrics.TAG_NOTEBOOK_ERROR: error})
    return outcome


def _execute_and_record(stage: str, run_id: str, params_path: Path, experiment: str, folder: Path,
                        timeout_s: int, kernel_name: str) -> NotebookResult:
    notebook = repo_root() / "notebooks" / f"{stage}.ipynb"
    executed = folder / f"{stage}.ipynb"
    started = time.perf_counter()
    if not notebook.is_file():
        code, stderr = 1, f"notebook {notebook} does not exist"
    else:
        code, stderr = execute_notebook(
            notebook, executed,
            {"stage": stage, "params_file": str(params_path), "mlflow_run_id": run_id, "experiment": experiment},
            timeout_s, kernel_name, run_id)
    seconds = time.perf_counter() - started
    if executed.is_file():
        tracking.log_artifact(run_id, executed, "notebook")
    (folder / f"{stage}.stderr.log").write_text(stderr)
    tracking.log_artifact(run_id, folder / f"{stage}.stderr.log", "notebook")
    tracking.log_metrics(run_id, {metrics.NOTEBOOK_SECONDS.key(): seconds})
    error = ""
    if code is None:
        error = f"notebook timed out after {timeout_s}s"
    elif code != 0:
        error = _notebook_error(executed, stderr) if executed.is_file() else stderr.strip()[-2000:]
    outcome = _record_error(run_id, tracking.get_tag(run_id, metrics.TAG_OUTCOME) or metrics.OUTCOME_RUNNING, error)
    return NotebookResult(stage, run_id, outcome, seconds, executed, error)


def run_stage_notebook(stage: str, params_path: Path, experiment_id: str, experiment: str, folder: Path,
                       timeout_s: int, kernel_name: str = "python3") -> NotebookResult:
    """One stage's notebook under its own MLflow run, created here so a notebook that dies still
    leaves a record. A stop (RunnerStopped) while the run is open records it as killed."""
    run_id = tracking.create_run(experiment_id, stage, params_path.stem, timeout_s=timeout_s,
                                 tags={metrics.TAG_BATCH: folder.name, **heartbeat_tags()})
    try:
        return _execute_and_record(stage, run_id, params_path, experiment, folder, timeout_s, kernel_name)
    except RunnerStopped as stop:
        if tracking.client().get_run(run_id).info.status == "RUNNING":
            mark_killed(run_id, f"the batch runner received {stop.signal_name} while the notebook ran")
            stop.killed = stage
        raise


def summary_row(result: NotebookResult) -> dict:
    logged = tracking.client().get_run(result.run_id).data.metrics
    return {"stage": result.stage, "outcome": result.outcome,
            **{column: logged.get(metric.key()) for column, metric in SUMMARY_METRICS.items()},
            "seconds": round(result.seconds, 1), "run_id": result.run_id}


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


class _Progress:
    """A tqdm bar over the stages with a line per stage, or plain lines without the bar."""

    def __init__(self, total: int, name: str, enabled: bool):
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=f"stagelab run ({name})", unit="stage")

    def say(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line)
        else:
            print(line)

    def start(self, stage: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(stage)

    def done(self, result: NotebookResult, note: str = "") -> None:
        error = " - " + result.error.splitlines()[0] if result.error else ""
        self.say(f"{result.stage}: {result.outcome} ({result.seconds:.0f}s){note}{error}")
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _resumed(experiment_id: str, registry: Registry, stage: str, params_name: str) -> NotebookResult | None:
    """The finished run `--resume` keeps for this stage, as a batch result; None: run it again."""
    run_id = finished_run(experiment_id, registry, stage, params_name)
    if run_id is None:
        return None
    return NotebookResult(stage, run_id, tracking.get_tag(run_id, metrics.TAG_OUTCOME) or "", 0.0, None)


def _write_summary(rows: list[dict], folder: Path) -> pd.DataFrame:
    summary = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    summary.to_csv(folder / "summary.csv", index=False)
    (folder / "summary.md").write_text(summary.to_markdown(index=False))
    return summary


def run_batch(stages: list[str] | None = None, params: str | Path = "params/acceptance.yaml", *,
              timeout_s: int | None = None, experiment: str | None = None,
              kernel_name: str = "python3", progress: bool = True, resume: bool = False) -> pd.DataFrame:
    """Run the stages' notebooks in order; a failing notebook is recorded and the batch goes on.
    On start, runs left RUNNING by a runner that is gone are closed as killed; with `resume`, a
    stage with a finished run of its current source on this parameter file is not run again.
    SIGINT/SIGTERM stop the running notebook, record it as killed and raise RunnerStopped."""
    params_path, run_params, registry, stages = _plan(stages, params)
    experiment = experiment or run_params.family.experiment
    experiment_id = tracking.init_store(experiment)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    runs_dir().mkdir(parents=True, exist_ok=True)
    # A folder of its own even when another batch starts in the same second (concurrent runs on one
    # checkout would otherwise write their executed notebooks over each other's).
    folder = Path(tempfile.mkdtemp(prefix=f"{stamp}-{params_path.stem}-", dir=runs_dir()))
    timeout = timeout_s or run_params.timeout_s
    console = _Progress(len(stages), params_path.stem, progress)
    rows = []
    try:
        with stop_on_signals():
            for stale in repair_stale_runs():
                console.say(f"closed {stale.name} ({stale.run_id}) as killed: {stale.gone_reason}")
            for stage in stages:
                console.start(stage)
                kept = _resumed(experiment_id, registry, stage, params_path.stem) if resume else None
                result = kept or run_stage_notebook(stage, params_path, experiment_id, experiment, folder,
                                                    timeout, kernel_name)
                rows.append(summary_row(result))
                console.done(result, " (resumed: finished at this source)" if kept else "")
    except RunnerStopped as stop:
        stop.not_run = stages[len(rows) + (1 if stop.killed else 0):]
        raise
    finally:
        console.close()
        summary = _write_summary(rows, folder)
    return summary
