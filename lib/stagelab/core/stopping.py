"""Stopping a notebook (or `stagelab ui`'s server) with everything it started, and SIGINT/SIGTERM as an exception.

papermill runs in a session of its own, and jupyter_client starts the kernel in
yet another session, so killing papermill's process group alone leaves the
kernel (and the nvcc or GPU work under it) running as an orphan. `stop_tree`
signals every process group under the notebook's process instead.
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager

import psutil

from .errors import RunnerStopped

# After SIGTERM the notebook's processes get this long to exit before SIGKILL: a kernel
# shuts down in well under a second, and a GPU launch in flight ends in milliseconds.
GRACE_S = 5.0


def _groups(processes: list[psutil.Process]) -> set[int]:
    """Their process groups, never this process's own (we must outlive the stop to record it)."""
    groups = set()
    for process in processes:
        try:
            groups.add(os.getpgid(process.pid))
        except ProcessLookupError:
            pass
    groups.discard(os.getpgrp())
    return groups


def _signal_groups(groups: set[int], signum: int) -> None:
    for group in groups:
        try:
            os.killpg(group, signum)
        except ProcessLookupError:
            pass


def stop_tree(pid: int, grace_s: float = GRACE_S) -> None:
    """SIGTERM the process groups of `pid` and all its descendants; SIGKILL them after `grace_s`."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    groups = _groups(processes)
    _signal_groups(groups, signal.SIGTERM)
    _, alive = psutil.wait_procs(processes, timeout=grace_s)
    if alive:
        _signal_groups(groups, signal.SIGKILL)
        psutil.wait_procs(alive, timeout=grace_s)


@contextmanager
def stop_on_signals():
    """Inside, the first SIGINT or SIGTERM raises RunnerStopped in the main thread; later ones are
    ignored, so a second Ctrl-C cannot cut the recording of the stop short."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    fired: list[int] = []

    def handler(signum, _frame):
        if not fired:
            fired.append(signum)
            raise RunnerStopped(signum)

    previous = {signum: signal.signal(signum, handler) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def run_until_stopped(command: list[str]) -> int:
    """Run a long-lived child (`stagelab ui`'s MLflow server, its workers under it) in a session of
    its own until it exits, or until SIGINT or SIGTERM reaches this process: then the child's whole
    tree is stopped before this process ends, so no server is left holding the port. Returns the
    child's exit status, or 128 + the signal's number, as the shell gives for a process it ended."""
    import subprocess

    with stop_on_signals():
        process = subprocess.Popen(command, start_new_session=True)
        try:
            return process.wait()
        except RunnerStopped as stop:
            stop_tree(process.pid)
            return 128 + stop.signum
