"""The batch runner and a notebook that ends itself after a hang verdict (stagelab.measure.watchdog), on
the CPU: the notebook's process records `incorrect` (reason `hang`) through the real MLflow
recorder, then exits with HANG_EXIT_CODE; the batch keeps that verdict (not `error`, not `killed`)
and goes on with the next stage. The notebooks' process is a real child running StageRun; only
papermill is left out (it would report the dead kernel as its own exit status 1 and pass the
kernel's stderr through, which the child's stderr stands in for)."""

import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest

from stagelab.run import batch
from stagelab.run.hang_exit import HANG_EXIT_NOTE, hang_exit

from stagelab.core import metrics
from stagelab.measure.watchdog import HANG_EXIT_CODE, HANG_MARKER

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

# What a stage notebook does up to a hang in its checks, with the launch that hangs faked: the
# GPU is said to be there, the build to have happened.
HANGING_NOTEBOOK = """
import sys
from types import SimpleNamespace
from stagelab.core.errors import KernelHang
from stagelab.stage import StageRun

run = StageRun(sys.argv[1], "params/smoke.yaml", mlflow_run_id=sys.argv[2])
run.ctx.gpu_available = True
run.results.built = SimpleNamespace()

def checks_that_hang(ctx, built):
    raise KernelHang("check 1x8x512x64 float16 seed 0", 5.0, 5.0)

run._watched(checks_that_hang, run.ctx, run.results.built)
print("unreachable: the process ends after the verdict")
"""
FINISHING_NOTEBOOK = """
import sys
from types import SimpleNamespace
from stagelab.stage import StageRun

run = StageRun(sys.argv[1], "params/smoke.yaml", mlflow_run_id=sys.argv[2])
run.results.built = SimpleNamespace()  # built, no GPU: the next stage's ordinary verdict
run.finish()
"""


def fake_execute_notebook(notebook, executed, parameters, timeout_s, kernel_name="python3", run_id=None, *,
                          running=None, slot=None):
    source = HANGING_NOTEBOOK if parameters["stage"] == "s0_baseline" else FINISHING_NOTEBOOK
    proc = subprocess.run([sys.executable, "-c", source, parameters["stage"], run_id], capture_output=True,
                          text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "STAGELAB_ROOT": str(ROOT), "PYTHONPATH": str(ROOT / "lib")})
    return proc.returncode, proc.stderr


def test_a_hang_verdict_survives_the_process_exit_and_the_batch_goes_on(tmp_store, monkeypatch, tmp_path):
    monkeypatch.setattr(batch, "execute_notebook", fake_execute_notebook)
    # its own runs folder: tests running beside it (pytest -n) write batches of s0 too
    monkeypatch.setattr(batch, "runs_dir", lambda: tmp_path / "runs")
    summary = batch.run_batch(["s0_baseline", "s1_cp_async"], "params/smoke.yaml", progress=False)
    assert list(summary["stage"]) == ["s0_baseline", "s1_cp_async"]
    outcomes = dict(zip(summary["stage"], summary["outcome"]))
    assert outcomes == {"s0_baseline": "incorrect", "s1_cp_async": "no_gpu"}
    hung = mlflow.get_run(summary.iloc[0]["run_id"])
    assert hung.info.status == "FINISHED"
    assert hung.data.tags[metrics.TAG_OUTCOME_REASON].startswith("hang: check 1x8x512x64 float16 seed 0")
    assert hung.data.tags[metrics.TAG_HANG].startswith("check 1x8x512x64")
    assert hung.data.tags[metrics.TAG_NOTEBOOK_ERROR] == HANG_EXIT_NOTE
    (stderr_log,) = Path(batch.runs_dir()).rglob("s0_baseline.stderr.log")
    assert HANG_MARKER in stderr_log.read_text() and f"status {HANG_EXIT_CODE}" in stderr_log.read_text()


def test_a_hang_whose_record_did_not_finish_is_still_incorrect_hang(tmp_store):
    """Only the marker on stderr: the runner records the hang itself."""
    experiment_id = mlflow.create_experiment("hang-marker")
    run_id = mlflow.tracking.MlflowClient().create_run(experiment_id).info.run_id
    stderr = f"{HANG_MARKER} (chain 1x1x8x64 float16 link 2 not done after 5.0 s (bound 5.0 s)); exiting\n"
    assert hang_exit(run_id, metrics.OUTCOME_RUNNING, stderr) == "incorrect"
    run = mlflow.get_run(run_id)
    assert run.data.tags[metrics.TAG_OUTCOME] == "incorrect" and run.info.status == "FINISHED"
    assert run.data.tags[metrics.TAG_OUTCOME_REASON].startswith("hang: ")
    assert hang_exit(run_id, "incorrect", "Traceback: an ordinary crash") == "incorrect"  # tag seen
    other = mlflow.tracking.MlflowClient().create_run(experiment_id).info.run_id
    assert hang_exit(other, metrics.OUTCOME_RUNNING, "Traceback: an ordinary crash") is None
