"""Stopped batches, end to end: a real `stagelab run` runner executing a real papermill notebook
(smoke parameters), stopped by a signal or killed outright, and resumed."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import psutil
import pytest
from mlflow.tracking import MlflowClient

from stagelab.core import metrics

from stagelab.record import tracking
from stagelab.core.sources import run_source_hash
from stagelab.core.registry import family_registry

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

# Starting papermill and its kernel takes a few seconds on a loaded two-core machine; a minute is ample.
KERNEL_START_S = 60
# stopping.GRACE_S (5 s) for the notebook to exit, plus recording the stop in the store.
STOP_S = 30
RESUMED_S0 = r"s0_baseline: no_gpu \(\d+s\) \(resumed"  # the kept run's own seconds, whatever the load


def start_runner(tmp_store: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "MLFLOW_TRACKING_URI": tmp_store}
    return subprocess.Popen([sys.executable, "-m", "stagelab", "run", "--params", "params/smoke.yaml", *args],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # as from a shell: its own group, not pytest's


def _kernels(tree: list[psutil.Process]) -> int:
    count = 0
    for process in tree:
        try:
            count += "ipykernel" in " ".join(process.cmdline())
        except psutil.Error:
            pass  # it ended while we looked
    return count


def wait_for_kernel(runner: subprocess.Popen, count: int = 1) -> list[psutil.Process]:
    """The runner's descendants once `count` notebook kernels are among them."""
    deadline = time.monotonic() + KERNEL_START_S
    while time.monotonic() < deadline:
        tree = psutil.Process(runner.pid).children(recursive=True)
        if _kernels(tree) >= count:
            return tree
        time.sleep(0.5)
    runner.kill()
    pytest.fail(f"{count} kernel(s) did not start: {runner.communicate()[1][-2000:]}")


def kill_left_over(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Kill what is still alive (so a failing test leaves no orphan behind); returns those."""
    alive = [p for p in processes if _running(p)]
    for process in alive:
        kill_if_alive(process)
    return alive


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False  # it ended between the two questions


def kill_if_alive(process: psutil.Process) -> None:
    """SIGKILL; a process that has already ended is what the kill wanted (a kernel ends by itself
    once its parent poller sees papermill gone)."""
    try:
        process.kill()
    except psutil.NoSuchProcess:
        pass


def signal_once_running(runner: subprocess.Popen, signum: int, kernels: int = 1) -> str:
    """Signal the runner once `kernels` notebooks run; check that it and every notebook process end,
    with the signal's exit status. Returns the runner's stderr."""
    notebooks = wait_for_kernel(runner, kernels)
    runner.send_signal(signum)
    try:
        _, stderr = runner.communicate(timeout=STOP_S)
        _, alive = psutil.wait_procs(notebooks, timeout=STOP_S)
    finally:
        left = kill_left_over(notebooks)
    assert not left and not alive, f"still running after the stop: {[p.pid for p in left]}"
    assert runner.returncode == 128 + signum, stderr[-2000:]
    return stderr


def stage_runs(stage: str):
    runs = mlflow.search_runs(experiment_names=["stagelab-sdpa"])
    return runs[runs["tags.stage"] == stage] if not runs.empty else runs


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_the_notebook_and_records_the_run_killed(tmp_store, signum):
    """Today SIGTERM ends the runner alone: its notebook runs on as an orphan, the run stays RUNNING,
    and nothing says that s1 never ran."""
    stderr = signal_once_running(start_runner(tmp_store, "--stages", "s0_baseline", "s1_cp_async"), signum)
    name = signal.Signals(signum).name
    assert f"stopped by {name}; s0_baseline recorded as killed; not run: s1_cp_async" in stderr.strip().splitlines()[-1]
    run = stage_runs("s0_baseline").iloc[0]
    assert run["status"] == "KILLED" and run["tags.outcome"] == metrics.OUTCOME_KILLED
    assert name in run["tags.outcome_reason"]
    assert stage_runs("s1_cp_async").empty


def test_kill_9_leaves_a_run_the_next_start_closes(tmp_store, stagelab_cli):
    """kill -9 of the runner and its notebook leaves the run RUNNING; the next `stagelab run` closes
    it as KILLED with the reason before it starts its own stages."""
    runner = start_runner(tmp_store, "--stages", "s0_baseline")
    tree = [psutil.Process(runner.pid), *wait_for_kernel(runner)]
    for process in tree:  # the runner first, so it cannot record its notebook's death
        kill_if_alive(process)
    runner.communicate()
    psutil.wait_procs(tree, timeout=STOP_S)
    orphan = stage_runs("s0_baseline").iloc[0]
    assert orphan["status"] == "RUNNING"

    proc = stagelab_cli("run", "--stages", "s1_cp_async", "--params", "params/smoke.yaml",
                        "--kernel", "no-such-kernel")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"closed s0_baseline@smoke ({orphan['run_id']}) as killed" in proc.stdout
    run = MlflowClient().get_run(orphan["run_id"])
    assert run.info.status == "KILLED" and run.data.tags[metrics.TAG_OUTCOME] == metrics.OUTCOME_KILLED
    assert f"its owner, pid {runner.pid}" in run.data.tags[metrics.TAG_OUTCOME_REASON]


def finished_run(experiment_id: str, stage: str, source: str, status: str = "FINISHED") -> str:
    run_id = tracking.create_run(experiment_id, stage, "smoke")
    tracking.set_tags(run_id, {metrics.TAG_SOURCE_HASH: source, metrics.TAG_OUTCOME: "no_gpu"})
    tracking.end_run(run_id, status)
    return run_id


def test_resume_runs_only_stages_without_a_finished_run_of_their_source(tmp_store, stagelab_cli):
    """s0 has a finished run of its current source: kept. s1's finished run is of older source and
    s2's run at the current source failed: both run again."""
    registry = family_registry("sdpa")
    experiment_id = tracking.init_store("stagelab-sdpa")
    kept = finished_run(experiment_id, "s0_baseline", run_source_hash(registry.stages["s0_baseline"], registry))
    finished_run(experiment_id, "s1_cp_async", "source-before-an-edit")
    finished_run(experiment_id, "s2_wmma", run_source_hash(registry.stages["s2_wmma"], registry), status="FAILED")

    proc = stagelab_cli("run", "--resume", "--stages", "s0_baseline", "s1_cp_async", "s2_wmma",
                        "--params", "params/smoke.yaml", "--kernel", "no-such-kernel")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(RESUMED_S0, proc.stdout)
    assert list(stage_runs("s0_baseline")["run_id"]) == [kept]
    for stage in ("s1_cp_async", "s2_wmma"):
        assert sorted(stage_runs(stage)["tags.outcome"]) == ["error", "no_gpu"]
