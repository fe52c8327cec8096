"""A notebook whose kernel died before it replied ran no cell: it is started again, within the same
time-out; any other failure is the stage's and is not retried."""

from __future__ import annotations

from pathlib import Path

import pytest

from stagelab.run import execute

DIED = "RuntimeError: " + execute.KERNEL_DIED_AT_START


class Starts:
    """RunningNotebooks' interface, counting the papermill starts a notebook took."""

    stopped_by = None

    def __init__(self):
        self.started = 0

    def start(self, cmd, env):
        self.started += 1
        return object()

    def ended(self, proc):
        pass


def run_with(monkeypatch, outcomes):
    results = iter(outcomes)
    timeouts = []

    def wait(proc, timeout_s, run_id):
        timeouts.append(timeout_s)
        return next(results)

    monkeypatch.setattr(execute, "wait_with_heartbeat", wait)
    starts = Starts()
    code, stderr = execute.execute_notebook(Path("nb.ipynb"), Path("out.ipynb"), {}, 600, running=starts)
    return code, stderr, starts.started, timeouts


def test_a_kernel_that_died_at_start_is_started_again(monkeypatch):
    code, stderr, started, timeouts = run_with(monkeypatch, [(1, DIED), (0, "ok")])
    assert (code, started) == (0, 2)
    assert "attempt 1: the kernel died before it replied" in stderr and stderr.endswith("ok")
    assert timeouts[1] <= timeouts[0] <= 600, "the retry runs within the notebook's time-out"


@pytest.mark.parametrize("outcome", [(1, "ZeroDivisionError: division by zero"), (None, "timed out"), (0, "")])
def test_a_cell_error_a_time_out_or_success_is_final(monkeypatch, outcome):
    code, stderr, started, _ = run_with(monkeypatch, [outcome, (0, "never")])
    assert (code, stderr, started) == (*outcome, 1)


def test_a_kernel_that_keeps_dying_fails_after_the_last_attempt(monkeypatch):
    attempts = execute.KERNEL_START_ATTEMPTS
    code, stderr, started, _ = run_with(monkeypatch, [(1, DIED)] * attempts + [(0, "never")])
    assert (code, started) == (1, attempts) and stderr.endswith(DIED)
