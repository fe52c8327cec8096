"""One stage notebook through papermill: a child session on its GPU slot, the run's heartbeat
renewed while it runs, and the first error a cell raised when it fails."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ..core.paths import repo_root
from .supervise import wait_with_heartbeat
from .workers import RunningNotebooks, Slot


def notebook_error(executed: Path, stderr: str) -> str:
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


# papermill gives a kernel 60 s to start by default; a batch of several notebooks on a loaded machine (a
# team's eight concurrent runs on two cores, tests/test_team_server.py) can need longer, and a kernel that
# starts late is not a failed stage.
KERNEL_START_TIMEOUT_S = 300


# A kernel can die before it replies to kernel_info when several start at once on a loaded machine (one of
# a team's eight concurrent runs on two cores did, tests/test_team_server.py; jupyter_client picks a
# kernel's ports before the kernel binds them, so simultaneous starts can collide). Such a notebook ran no
# cell, so it is started again, within the same time-out.
KERNEL_DIED_AT_START = "Kernel died before replying to kernel_info"
KERNEL_START_ATTEMPTS = 3


def execute_notebook(notebook: Path, executed: Path, parameters: dict, timeout_s: int,
                     kernel_name: str = "python3", run_id: str | None = None, *,
                     running: RunningNotebooks | None = None, slot: Slot = Slot()) -> tuple[int | None, str]:
    """papermill in a child session on the slot's GPU; returns (exit code or None on time-out, stderr).
    A batch that is stopping starts no notebook; `running.stop_all` stops one that runs."""
    cmd = [sys.executable, "-m", "papermill", str(notebook), str(executed), "-k", kernel_name,
           "--cwd", str(notebook.parent), "--no-progress-bar", "--start-timeout", str(KERNEL_START_TIMEOUT_S)]
    for key, value in parameters.items():
        cmd += ["-p", key, str(value)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "STAGELAB_ROOT": str(repo_root()), **slot.env()}
    running = running or RunningNotebooks()
    deadline = time.monotonic() + timeout_s
    restarts = ""
    for attempt in range(1, KERNEL_START_ATTEMPTS + 1):
        proc = running.start(cmd, env)
        if proc is None:
            return 1, f"not started: the batch runner received {running.stopped_by}"
        try:
            code, stderr = wait_with_heartbeat(proc, max(1, round(deadline - time.monotonic())), run_id)
        finally:
            running.ended(proc)
        if code in (0, None) or KERNEL_DIED_AT_START not in stderr or attempt == KERNEL_START_ATTEMPTS:
            break
        restarts += f"[stagelab] attempt {attempt}: the kernel died before it replied; started again\n"
    return code, restarts + stderr
