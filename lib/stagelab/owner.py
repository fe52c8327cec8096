"""Who owns a run, and whether that owner is still there.

A run records its owner when it is created: the host, the pid and the start time
of the process that created it (the batch runner, or a notebook's kernel run by
hand), the parameter file's time-out, and a heartbeat the batch runner renews
while the notebook runs. On the owner's own host the process table is the
authority (a pid reused by a later process has another start time); from another
host only the heartbeat can tell, so a heartbeat older than the time-out means
the owner is gone.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime, timezone

import psutil

from . import tags

# psutil reads a process's start time from the kernel in clock ticks (10 ms); a recorded
# start further than this from the live process's means the pid now belongs to another process.
SAME_PROCESS_TOLERANCE_S = 1.0


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, timezone.utc).isoformat(timespec="milliseconds")


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def heartbeat_tags() -> dict[str, str]:
    return {tags.HEARTBEAT: _iso(datetime.now(timezone.utc).timestamp())}


def owner_tags(timeout_s: int | None = None) -> dict[str, str]:
    """This process as the owner of a run it is creating; without a time-out, the default one applies."""
    timeout = {tags.OWNER_TIMEOUT_S: str(timeout_s)} if timeout_s else {}
    return {tags.OWNER_HOST: socket.gethostname(), tags.OWNER_PID: str(os.getpid()),
            tags.OWNER_START: _iso(psutil.Process().create_time()), **timeout, **heartbeat_tags()}


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
    heartbeat: float    # epoch seconds
    timeout_s: int

    @classmethod
    def from_tags(cls, run_tags: dict[str, str], run_start_ms: int, default_timeout_s: int) -> "Owner":
        """The recorded owner; a run from before owners were recorded has none, so its own start
        stands in for the heartbeat and the default time-out applies."""
        start = (run_start_ms or 0) / 1000
        return cls(host=run_tags.get(tags.OWNER_HOST, ""), pid=int(run_tags.get(tags.OWNER_PID, 0)),
                   started=_epoch(run_tags[tags.OWNER_START]) if tags.OWNER_START in run_tags else start,
                   heartbeat=_epoch(run_tags[tags.HEARTBEAT]) if tags.HEARTBEAT in run_tags else start,
                   timeout_s=int(run_tags.get(tags.OWNER_TIMEOUT_S, default_timeout_s)))

    def gone_reason(self, now: float | None = None) -> str | None:
        """Why this owner is gone, or None while it may still be running."""
        if self.host == socket.gethostname() and self.pid:
            if process_alive(self.pid, self.started):
                return None
            return f"its owner, pid {self.pid} on {self.host} (started {_iso(self.started)}), is gone"
        silent = (now or datetime.now(timezone.utc).timestamp()) - self.heartbeat
        if silent > self.timeout_s:
            who = f"pid {self.pid} on {self.host}" if self.host else "an owner that was not recorded"
            return f"no heartbeat from {who} for {silent:.0f}s (time-out {self.timeout_s}s)"
        return None
