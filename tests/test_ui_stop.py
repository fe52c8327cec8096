"""Stopping `stagelab ui` (or `stagelab server`) with SIGTERM or SIGINT stops the MLflow server it
started, with the server's own workers: before, killing `stagelab ui` by its pid left the server
holding the port. Real processes on real loopback ports: a stand-in server (a child that starts
an HTTP server of its own, as `mlflow server` starts uvicorn) in seconds, the real one (slow)."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from services import LOOPBACK, STARTUP_S, free_port

ROOT = Path(__file__).resolve().parents[1]
SIGNALS = [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, 128 + signal.SIGINT)]


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex((LOOPBACK, port)) == 0


def wait_until(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def start(command: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    """As from a shell: a process group of its own, so the signal reaches it alone."""
    return subprocess.Popen(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "lib"), **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def stop_and_check(process: subprocess.Popen, port: int, signum: int, status: int) -> None:
    tree = psutil.Process(process.pid).children(recursive=True)
    assert tree, "the server was not started under the command"
    process.send_signal(signum)
    assert process.wait(timeout=30) == status
    assert wait_until(lambda: not listening(port), 10), f"port {port} still held after {signal.Signals(signum).name}"
    gone, alive = psutil.wait_procs(tree, timeout=10)
    assert not alive, f"left running: {[p.pid for p in alive]}"


@pytest.mark.parametrize("signum, status", SIGNALS)
def test_a_signal_stops_the_child_server_and_what_it_started(signum, status):
    port = free_port()
    server = f"import subprocess, sys; subprocess.Popen([sys.executable, '-m', 'http.server', '{port}', " \
             f"'--bind', '{LOOPBACK}']).wait()"
    runner = f"import sys; from stagelab.core.stopping import run_until_stopped; " \
             f"sys.exit(run_until_stopped([sys.executable, '-c', {server!r}]))"
    process = start([sys.executable, "-c", runner])
    try:
        assert wait_until(lambda: listening(port), 30), "the stand-in server never listened"
        stop_and_check(process, port, signum, status)
    finally:
        process.kill()


@pytest.mark.slow
def test_sigterm_to_stagelab_ui_stops_its_mlflow_server(tmp_path):
    port = free_port()
    process = start([sys.executable, "-m", "stagelab", "ui", "--port", str(port)],
                    {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}", "STAGELAB_ROOT": str(ROOT)})
    try:
        assert wait_until(lambda: listening(port), STARTUP_S), "mlflow server never listened"
        stop_and_check(process, port, signal.SIGTERM, 128 + signal.SIGTERM)
    finally:
        process.kill()
