"""Batch runs: execute stage notebooks through papermill, one kernel process each.

The runner initializes the MLflow store and experiment once, creates each
stage's run before its notebook starts (so a notebook that dies still leaves
a record), runs papermill in its own process group with a time-out, logs the
executed notebook as an artifact, marks any run the notebook did not finish
as `error` with its message, and goes on to the next stage.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from . import metrics, tracking
from .errors import ConfigError
from .params import load_params
from .paths import repo_root, resolve_params_path, runs_dir
from .registry import family_registry

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
    executed: Path
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
                     kernel_name: str = "python3") -> tuple[int | None, str]:
    """papermill in a child process group; returns (exit code or None on time-out, stderr)."""
    cmd = [sys.executable, "-m", "papermill", str(notebook), str(executed), "-k", kernel_name,
           "--cwd", str(notebook.parent), "--no-progress-bar"]
    for key, value in parameters.items():
        cmd += ["-p", key, str(value)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "STAGELAB_ROOT": str(repo_root())}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
        return proc.returncode, stderr
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the kernel process too: a hung kernel must not outlive us
        _, stderr = proc.communicate()
        return None, stderr


def run_stage_notebook(stage: str, params_path: Path, experiment_id: str, experiment: str, folder: Path,
                       timeout_s: int, kernel_name: str = "python3") -> NotebookResult:
    notebook = repo_root() / "notebooks" / f"{stage}.ipynb"
    params_name = params_path.stem
    run_id = tracking.create_run(experiment_id, stage, params_name, tags={"batch": folder.name})
    executed = folder / f"{stage}.ipynb"
    started = time.perf_counter()
    if not notebook.is_file():
        code, stderr = 1, f"notebook {notebook} does not exist"
    else:
        code, stderr = execute_notebook(
            notebook, executed,
            {"stage": stage, "params_file": str(params_path), "mlflow_run_id": run_id, "experiment": experiment},
            timeout_s, kernel_name)
    seconds = time.perf_counter() - started
    if executed.is_file():
        tracking.log_artifact(run_id, executed, "notebook")
    (folder / f"{stage}.stderr.log").write_text(stderr)
    tracking.log_artifact(run_id, folder / f"{stage}.stderr.log", "notebook")
    tracking.log_metrics(run_id, {metrics.NOTEBOOK_SECONDS.key(): seconds})
    outcome = tracking.get_tag(run_id, "outcome") or "running"
    error = ""
    if code is None:
        error = f"notebook timed out after {timeout_s}s"
    elif code != 0:
        error = _notebook_error(executed, stderr) if executed.is_file() else stderr.strip()[-2000:]
    if outcome == "running":  # the notebook never reached finish(): record why
        outcome = "error"
        tracking.set_tags(run_id, {"outcome": "error", "outcome_reason": error or "notebook ended before finish()"})
        tracking.end_run(run_id, "FAILED")
    elif error:
        tracking.set_tags(run_id, {"notebook_error": error})
    return NotebookResult(stage, run_id, outcome, seconds, executed, error)


def summary_row(result: NotebookResult) -> dict:
    logged = tracking.client().get_run(result.run_id).data.metrics
    return {"stage": result.stage, "outcome": result.outcome,
            **{column: logged.get(metric.key()) for column, metric in SUMMARY_METRICS.items()},
            "seconds": round(result.seconds, 1), "run_id": result.run_id}


def run_batch(stages: list[str] | None = None, params: str | Path = "params/acceptance.yaml", *,
              timeout_s: int | None = None, experiment: str | None = None,
              kernel_name: str = "python3", progress: bool = True) -> pd.DataFrame:
    """Run the stages' notebooks in order; a failing notebook is recorded and the batch goes on."""
    params_path = resolve_params_path(params)
    run_params = load_params(params_path)  # fail before anything starts on a bad file
    params_path = params_path.resolve()
    registry = family_registry(run_params.family.name)
    stages = list(stages or registry.stages)
    for stage in stages:
        if stage not in registry.stages:
            raise ConfigError(f"stage {stage!r} is not in the {registry.family} family that {params_path.name} "
                              f"describes; its stages: {', '.join(registry.stages)}")
    experiment = experiment or run_params.family.experiment
    experiment_id = tracking.init_store(experiment)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    runs_dir().mkdir(parents=True, exist_ok=True)
    # A folder of its own even when another batch starts in the same second (concurrent runs on one
    # checkout would otherwise write their executed notebooks over each other's).
    folder = Path(tempfile.mkdtemp(prefix=f"{stamp}-{params_path.stem}-", dir=runs_dir()))
    timeout = timeout_s or run_params.timeout_s

    rows = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(stages), desc=f"stagelab run ({params_path.stem})", unit="stage")
    for stage in stages:
        if bar is not None:
            bar.set_postfix_str(stage)
        result = run_stage_notebook(stage, params_path, experiment_id, experiment, folder, timeout, kernel_name)
        rows.append(summary_row(result))
        if bar is not None:
            bar.write(f"{stage}: {result.outcome} ({result.seconds:.0f}s){' - ' + result.error.splitlines()[0] if result.error else ''}")
            bar.update(1)
    if bar is not None:
        bar.close()
    summary = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    summary.to_csv(folder / "summary.csv", index=False)
    (folder / "summary.md").write_text(summary.to_markdown(index=False))
    return summary
