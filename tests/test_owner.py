"""Stopped runs, without notebooks: a run records its owner, and a run whose owner is gone (a dead
pid on this host, or a silent heartbeat from another) is closed as KILLED by `stagelab runs --repair`.
Real SQLite store, runs created by real processes that then exit."""

import os
import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import psutil
from mlflow.tracking import MlflowClient

from stagelab.core import metrics

from stagelab.record import tracking
from stagelab.record.owner import heartbeat_tags
from stagelab.run.supervise import wait_with_heartbeat

CREATE_RUN = """
from stagelab.record import tracking
experiment_id = tracking.init_store("stagelab-sdpa")
print(tracking.create_run(experiment_id, "s0_baseline", "smoke", timeout_s=900))
"""


def run_created_by_a_process_that_exits() -> tuple[str, int]:
    """A run created by another Python process, which has exited by the time this returns; and its pid."""
    proc = subprocess.Popen([sys.executable, "-c", CREATE_RUN], stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate()
    assert proc.returncode == 0
    return out.strip().splitlines()[-1], proc.pid


def test_a_run_records_its_owner(tmp_store):
    run_id = tracking.create_run(tracking.init_store("stagelab-sdpa"), "s0_baseline", "smoke", timeout_s=900)
    recorded = MlflowClient().get_run(run_id).data.tags
    assert recorded[metrics.TAG_OWNER_HOST] == socket.gethostname()
    assert recorded[metrics.TAG_OWNER_PID] == str(os.getpid())
    started = datetime.fromisoformat(recorded[metrics.TAG_OWNER_START]).timestamp()
    assert abs(started - psutil.Process().create_time()) < 1
    assert recorded[metrics.TAG_OWNER_TIMEOUT_S] == "900"


def elsewhere(run_id: str, silent_for_s: float, timeout_s: int) -> None:
    """Make a run look owned by a process on another host that last beat `silent_for_s` ago."""
    beat = datetime.now(timezone.utc) - timedelta(seconds=silent_for_s)
    tracking.set_tags(run_id, {metrics.TAG_OWNER_HOST: "another-host", metrics.TAG_OWNER_PID: "4242",
                               metrics.TAG_OWNER_TIMEOUT_S: str(timeout_s), metrics.TAG_HEARTBEAT: beat.isoformat()})


def test_runs_repair_closes_runs_whose_owner_is_gone(tmp_store, stagelab_cli):
    """Today a run whose runner was killed stays RUNNING forever; `stagelab runs --repair` closes
    exactly the runs whose owner is gone, with the reason as a tag, and leaves live ones alone."""
    dead_owner, dead_pid = run_created_by_a_process_that_exits()
    experiment_id = tracking.init_store("stagelab-sdpa")
    alive_here = tracking.create_run(experiment_id, "s1_cp_async", "smoke", timeout_s=900)
    silent_elsewhere = tracking.create_run(experiment_id, "s2_wmma", "smoke")
    elsewhere(silent_elsewhere, silent_for_s=120, timeout_s=60)
    beating_elsewhere = tracking.create_run(experiment_id, "s3a_no_sp", "smoke")
    elsewhere(beating_elsewhere, silent_for_s=5, timeout_s=60)
    not_beating_elsewhere = tracking.create_run(experiment_id, "s3b_register_softmax", "smoke")  # a tune, say
    tracking.set_tags(not_beating_elsewhere, {metrics.TAG_OWNER_HOST: "another-host"})

    listed = stagelab_cli("runs")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "5 running stage run(s), 2 with their owner gone" in listed.stdout
    assert MlflowClient().get_run(dead_owner).info.status == "RUNNING"  # listing changes nothing

    proc = stagelab_cli("runs", "--repair")
    assert proc.returncode == 0, proc.stderr[-2000:]
    client = MlflowClient()
    for run_id, reason in ((dead_owner, f"pid {dead_pid} on {socket.gethostname()}"),
                           (silent_elsewhere, "no heartbeat from pid 4242 on another-host")):
        run = client.get_run(run_id)
        assert run.info.status == "KILLED" and run.data.tags[metrics.TAG_OUTCOME] == metrics.OUTCOME_KILLED
        assert reason in run.data.tags[metrics.TAG_OUTCOME_REASON]
    left_alone = (alive_here, beating_elsewhere, not_beating_elsewhere)
    assert {client.get_run(r).info.status for r in left_alone} == {"RUNNING"}


def test_runner_renews_the_heartbeat_while_its_notebook_runs(tmp_store):
    run_id = tracking.create_run(tracking.init_store("stagelab-sdpa"), "s0_baseline", "smoke", timeout_s=4)
    tracking.set_tags(run_id, heartbeat_tags())  # as the batch runner creates its runs
    first = MlflowClient().get_run(run_id).data.tags[metrics.TAG_HEARTBEAT]
    # time-out 4 s: a beat each second (BEATS_PER_TIMEOUT), so a 1.5 s "notebook" sees one
    notebook = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
    code, _ = wait_with_heartbeat(notebook, 4, run_id)
    assert code == 0
    last = MlflowClient().get_run(run_id).data.tags[metrics.TAG_HEARTBEAT]
    assert datetime.fromisoformat(last) > datetime.fromisoformat(first)


# A notebook whose child sits in a session of its own, as jupyter_client starts the kernel.
KERNEL_IN_ITS_OWN_SESSION = """
import subprocess, sys, time
child = subprocess.Popen(["sleep", "600"], start_new_session=True)
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(600)
"""


def test_time_out_stops_the_kernel_in_its_own_session_too(tmp_path):
    """Killing papermill's process group alone left the kernel (its own session) running."""
    pid_file = tmp_path / "kernel.pid"
    notebook = subprocess.Popen([sys.executable, "-c", KERNEL_IN_ITS_OWN_SESSION, str(pid_file)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 30
    while not pid_file.is_file() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the stand-in kernel did not start"
        time.sleep(0.05)
    kernel = psutil.Process(int(pid_file.read_text()))
    try:
        code, _ = wait_with_heartbeat(notebook, 1, None)
        _, alive = psutil.wait_procs([kernel], timeout=10)
    finally:  # a failing run must leave no stand-in behind
        notebook.kill()
        try:
            kernel.kill()
        except psutil.NoSuchProcess:
            pass
    assert code is None and not alive
