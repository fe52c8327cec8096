"""Who owns a run, and whether that owner is still there.

A run records its owner when it is created: the host, the pid and the start time
of the process that created it (the batch runner, a tune, or a notebook's kernel
run by hand) and the parameter file's time-out; the batch runner also writes a
heartbeat and renews it while the notebook runs. On the owner's own host the
process table is the authority (a pid reused by a later process has another start
time); from another host only the heartbeat can tell, so a heartbeat older than
the time-out means the owner is gone, and an owner elsewhere that does not beat
(a tune, a notebook run by hand) is left alone.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime, timezone

import psutil

from ..core import metrics

# psutil reads a process's start time from the kernel in clock ticks (10 ms); a recorded
# start further than this from the live process's means the pid now belongs to another process.
SAME_PROCESS_TOLERANCE_S = 1.0


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, timezone.utc).isoformat(timespec="milliseconds")


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def heartbeat_tags() -> dict[str, str]:
    return {metrics.TAG_HEARTBEAT: _iso(datetime.now(timezone.utc).timestamp())}


def owner_tags(timeout_s: int | None = None) -> dict[str, str]:
    """This process as the owner of a run it is creating; without a time-out, the default one applies."""
    timeout = {metrics.TAG_OWNER_TIMEOUT_S: str(timeout_s)} if timeout_s else {}
    return {metrics.TAG_OWNER_HOST: socket.gethostname(), metrics.TAG_OWNER_PID: str(os.getpid()),
            metrics.TAG_OWNER_START: _iso(psutil.Process().create_time()), **timeout}


def process_alive(pid: int, started: float) -> bool:
    """Whether the process `pid` that started at `started` (epoch seconds) still runs."""
    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE and \
            abs(process.create_time() - started) < SAME_PROCESS_TOLERANCE_S
    except psutil.NoSuchProcess:
        return False


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    started: float      # epoch seconds
    heartbeat: float | None  # epoch seconds; None: an owner that does not beat
    timeout_s: int

    @classmethod
    def from_tags(cls, run_tags: dict[str, str], run_start_ms: int, default_timeout_s: int) -> "Owner":
        """The recorded owner; a run from before owners were recorded has none, so its own start
        stands in for the heartbeat and the default time-out applies."""
        start = (run_start_ms or 0) / 1000
        host = run_tags.get(metrics.TAG_OWNER_HOST, "")
        beat = run_tags.get(metrics.TAG_HEARTBEAT)
        return cls(host=host, pid=int(run_tags.get(metrics.TAG_OWNER_PID, 0)),
                   started=_epoch(run_tags[metrics.TAG_OWNER_START]) if metrics.TAG_OWNER_START in run_tags else start,
                   heartbeat=_epoch(beat) if beat else (None if host else start),
                   timeout_s=int(run_tags.get(metrics.TAG_OWNER_TIMEOUT_S, default_timeout_s)))

    @property
    def on_this_host(self) -> bool:
        return self.host == socket.gethostname()

    def gone_reason(self, now: float | None = None) -> str | None:
        """Why this owner is gone, or None while it may still be running."""
        if self.on_this_host and self.pid:
            if process_alive(self.pid, self.started):
                return None
            return f"its owner, pid {self.pid} on {self.host} (started {_iso(self.started)}), is gone"
        if self.heartbeat is None:
            return None  # on another host and not beating: nothing here can tell
        silent = (now or datetime.now(timezone.utc).timestamp()) - self.heartbeat
        if silent > self.timeout_s:
            who = f"pid {self.pid} on {self.host}" if self.host else "an owner that was not recorded"
            return f"no heartbeat from {who} for {silent:.0f}s (time-out {self.timeout_s}s)"
        return None
