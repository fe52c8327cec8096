"""Waiting on a notebook's process: renewing its run's heartbeat while it runs (so a runner on
another host can tell this one is alive, see `owner`) and stopping its whole process tree
when it passes its time-out."""

from __future__ import annotations

import subprocess
import time

from ..record import tracking
from ..record.owner import heartbeat_tags
from ..core.stopping import stop_tree

# A live runner renews its runs' heartbeat at least this many times within their time-out, so
# one slow or missed store write never makes it look gone; and at most once a minute, which
# keeps the writes negligible (one tag per running notebook per minute).
BEATS_PER_TIMEOUT = 4
MAX_HEARTBEAT_S = 60


def heartbeat_interval(timeout_s: int) -> float:
    return min(MAX_HEARTBEAT_S, timeout_s / BEATS_PER_TIMEOUT)


def _beat(run_id: str | None) -> None:
    if run_id is None:
        return
    from mlflow.exceptions import MlflowException

    try:
        tracking.set_tags(run_id, heartbeat_tags())
    except MlflowException:
        pass  # a missed beat is harmless: the next one comes long before the time-out


def wait_with_heartbeat(proc: subprocess.Popen, timeout_s: int, run_id: str | None) -> tuple[int | None, str]:
    """Wait for papermill, beating the run's heartbeat; stop it (kernel included) at the time-out."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            _, stderr = proc.communicate(timeout=max(0.0, min(heartbeat_interval(timeout_s),
                                                              deadline - time.monotonic())))
            return proc.returncode, stderr
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                stop_tree(proc.pid)  # the kernel too: a hung kernel must not outlive us
                return None, proc.communicate()[1]
            _beat(run_id)
