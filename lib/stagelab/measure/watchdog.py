"""A hang is a verdict: every launch of the checks, the chains and the timing is waited on by
polling a CUDA event against a deadline, never by blocking in synchronize.

A kernel that never ends (a missing mbarrier wait, a phase that never completes) would otherwise
hold `torch.cuda.synchronize()` until the notebook's time-out, half an hour later, and the batch
would record `error` with nothing said about why. Here, after the work is enqueued, an event is
recorded behind it and `event.query()` is polled; work not done within its bound raises
`KernelHang`. The bound grows with the work's FLOPs:

    bound = BASE_S + launches * flops / SLOW_FLOPS_PER_S, at most MAX_BOUND_S

A hung CUDA context cannot be recovered (every later launch or synchronisation of this process
blocks too), so the caller records the verdict (`incorrect`, reason `hang`) and then ends the
process with `exit_after_hang` (HANG_EXIT_CODE); the batch runner goes on with the next stage.

A launch that fails instead (an illegal address, an "unspecified launch failure") surfaces as a
RuntimeError from `event.query()`; it is raised again as KernelCrash, which names the work and
keeps CUDA's own first line (not torch's paragraph of debugging advice), so the crashed check
says what crashed and how.

Several events (the samples of a timing run) are waited on in order, each given its own bound
from the moment the one before it completed: a hang is work that makes no progress, not a long
queue of work that does.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from ..core.errors import KernelCrash, KernelHang

# Launch latency, a first launch's module load and a GPU clocking up from idle all fit in 5 s
# with room to spare; no correct launch of this lab's problems needs more than a few seconds.
BASE_S = 5.0
# The slowest kernel of the lab (s0's CUDA-core FMAs) runs several TFLOP/s on an H100; 1 TFLOP/s
# leaves a margin of several times for low clocks, a concurrent load and the stress step's sleeps.
SLOW_FLOPS_PER_S = 1e12
# The verdict must come within HANG_VERDICT_S of the launch: the bound stops short of it by the
# polling interval and the time to give up (a few milliseconds), rounded down to whole seconds.
HANG_VERDICT_S = 30.0
MAX_BOUND_S = 25.0
# Polling: the first query at once, then sleeps doubling from FIRST_POLL_S to MAX_POLL_S, so a
# short launch costs microseconds of latency and a long one a query every 10 ms.
FIRST_POLL_S = 50e-6
MAX_POLL_S = 10e-3
# The exit status of a process that ended itself after a hang verdict: not 1 (an exception),
# 2 (usage), 124 (timeout(1)), 128 + n (signal n) or papermill's own codes.
HANG_EXIT_CODE = 86
# What such a process writes last on its stderr (the batch runner reads it there: papermill
# reports a kernel that died, not the kernel's exit status).
HANG_MARKER = "stagelab: hang verdict recorded"


class EventLike(Protocol):
    def query(self) -> bool: ...


def launch_bound_s(flops: float, launches: int = 1) -> float:
    """Seconds `launches` launches of `flops` FLOPs each may take before they count as hung."""
    if flops < 0 or launches < 1:
        raise ValueError(f"launch_bound_s needs flops >= 0 and launches >= 1, got {flops}, {launches}")
    return min(MAX_BOUND_S, BASE_S + launches * flops / SLOW_FLOPS_PER_S)


def wait_for(events: Sequence[EventLike], bound_s: float, what: str, *,
             clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
    """Return once every event has completed, in order; raise KernelHang when one is not done
    `bound_s` after the one before it (the first: after the call)."""
    since = clock()
    for event in events:
        pause = FIRST_POLL_S
        while not _completed(event, what, clock() - since):
            waited = clock() - since
            if waited >= bound_s:
                raise KernelHang(what, waited, bound_s)
            sleep(min(pause, bound_s - waited))
            pause = min(2 * pause, MAX_POLL_S)
        since = clock()


def _completed(event: EventLike, what: str, waited_s: float) -> bool:
    """event.query(), with a CUDA error it reports raised as KernelCrash."""
    try:
        return event.query()
    except RuntimeError as exc:
        lines = str(exc).strip().splitlines()
        raise KernelCrash(what, waited_s, lines[0] if lines else type(exc).__name__) from exc


def synchronize(what: str, flops: float = 0.0, launches: int = 1, stream=None) -> None:
    """Wait for everything enqueued so far on `stream` (default: the current one) under the
    watchdog: what `torch.cuda.synchronize()` did, but a hang raises KernelHang."""
    import torch

    event = torch.cuda.Event()
    event.record(stream)
    wait_for([event], launch_bound_s(flops, launches), what)


def exit_after_hang(hang: KernelHang) -> None:
    """End this process after a hang verdict has been recorded: the CUDA context is lost, and
    Python's own shutdown (atexit, CUDA teardown through torch) could block on it, so os._exit,
    after flushing what was printed."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    message = f"{HANG_MARKER} ({hang}); exiting with status {HANG_EXIT_CODE}\n"
    os.write(2, message.encode())
    os._exit(HANG_EXIT_CODE)
