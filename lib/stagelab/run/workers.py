"""Running a batch's notebooks side by side: one slot per GPU (or the one slot of a batch without
--gpus), a notebook per slot at a time, each waited on in a thread of its own.

Signals reach only the main thread, so the main thread schedules and the threads only wait on
their papermill processes. On SIGINT/SIGTERM the main thread stops every running notebook's
process tree at once (`RunningNotebooks.stop_all`), starts no more, and waits for each thread to
record its run as killed before the stop propagates, naming what was killed and what never ran.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable, Protocol

from ..core import metrics
from ..core.errors import RunnerStopped
from .gpus import VISIBLE_DEVICES, Gpu
from ..core.stopping import stop_tree

# How often the main thread looks up from waiting: it wakes at once when a notebook ends, and a
# signal interrupts the wait anyway; this only bounds the wait when neither happens.
POLL_S = 1.0


# torch sizes its CPU thread pool from OMP_NUM_THREADS, else from every core: two notebooks side by
# side would each start a pool as large as the machine (torchrun sets 1 for the same reason).
CPU_THREADS = "OMP_NUM_THREADS"


@dataclass(frozen=True)
class Slot:
    """Where one notebook runs: a GPU of its own, or (gpu None) whatever the runner was given;
    beside other slots, with `cpu_threads`, its share of the cores."""
    gpu: Gpu | None = None
    cpu_threads: int | None = None

    def env(self) -> dict[str, str]:
        env = {VISIBLE_DEVICES: self.gpu.index} if self.gpu else {}
        if self.cpu_threads and CPU_THREADS not in os.environ:  # a thread count the user set wins
            env[CPU_THREADS] = str(self.cpu_threads)
        return env

    @property
    def label(self) -> str:
        return f"GPU {self.gpu.index}" if self.gpu else ""

    def tags(self) -> dict[str, str]:
        """What the runner records on the run before the notebook starts; the notebook adds what it saw."""
        if self.gpu is None:
            return {}
        threads = self.env().get(CPU_THREADS)
        return {metrics.TAG_GPU_INDEX: self.gpu.index, **({metrics.TAG_GPU: self.gpu.name} if self.gpu.name else {}),
                **({metrics.TAG_CPU_THREADS: threads} if threads else {})}


def available_cpus() -> int:
    """The cores this process may run on (its affinity mask: a container's or a Slurm job's share)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def slots_for(gpus: list[Gpu] | None, cpus: int | None = None) -> list[Slot]:
    """One slot per GPU, the cores shared out evenly between them; one slot (all cores) without --gpus."""
    if not gpus:
        return [Slot()]
    share = max(1, (cpus or available_cpus()) // len(gpus)) if len(gpus) > 1 else None
    return [Slot(gpu, share) for gpu in gpus]


class RunningNotebooks:
    """The papermill processes running now, so one stop reaches them all; once stopped, none starts."""

    def __init__(self):
        self._lock = threading.Lock()
        self._processes: set[subprocess.Popen] = set()
        self.stopped_by: str | None = None  # the signal's name, once the batch is stopping

    def start(self, command: list[str], env: dict[str, str]) -> subprocess.Popen | None:
        """papermill in a session of its own; None when the batch is already stopping."""
        with self._lock:
            if self.stopped_by:
                return None
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       start_new_session=True, env=env)
            self._processes.add(process)
            return process

    def ended(self, process: subprocess.Popen) -> None:
        with self._lock:
            self._processes.discard(process)

    def stop_all(self, signal_name: str) -> None:
        """Stop every running notebook's process tree, side by side so the grace periods overlap."""
        with self._lock:
            self.stopped_by = signal_name
            processes = list(self._processes)
        stoppers = [threading.Thread(target=stop_tree, args=(process.pid,)) for process in processes]
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers:
            stopper.join()


class Outcome(Protocol):
    stage: str
    outcome: str


def run_on_slots(stages: list[str], slots: list[Slot], run_one: Callable[[str, Slot], Outcome],
                 running: RunningNotebooks, on_start: Callable[[str, Slot], None],
                 on_done: Callable[[Outcome], None], admit: Callable[[str, Slot], bool] | None = None) -> None:
    """Each stage's notebook on the next free slot, `on_done` with each result as it ends; a stage
    that `admit` turns away when its turn comes (run.deadline) is dropped, the queue goes on. Call it
    inside `stopping.stop_on_signals`: a stop ends the running notebooks, waits for their threads
    to record them, and raises RunnerStopped naming those recorded killed."""
    queue: deque[str] = deque(stages)
    active: dict[Future, Slot] = {}
    free = list(slots)
    with ThreadPoolExecutor(max_workers=len(slots), thread_name_prefix="notebook") as pool:
        try:
            while queue or active:
                while queue and free:
                    stage = queue.popleft()
                    if admit is not None and not admit(stage, free[0]):
                        continue
                    slot = free.pop(0)
                    on_start(stage, slot)
                    active[pool.submit(run_one, stage, slot)] = slot
                done, _ = wait(active, timeout=POLL_S, return_when=FIRST_COMPLETED)
                for future in done:
                    free.append(active.pop(future))
                    on_done(future.result())
        except RunnerStopped as stop:
            running.stop_all(stop.signal_name)
            for future in active:
                result = future.result()  # its thread records the run first
                on_done(result)
                if result.outcome == metrics.OUTCOME_KILLED:
                    stop.killed.append(result.stage)
            raise
