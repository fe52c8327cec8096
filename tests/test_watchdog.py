"""A hang is a verdict (stagelab.measure.watchdog), on the CPU: the bound's arithmetic, the polling of an
event that never completes (a fake: only `query()` is used), the typed error, the outcome and its
reason, the steps that must let a hang through, and the process ending with its own status."""

import math
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from stagelab.measure import chain

from stagelab.measure import watchdog
from stagelab.measure.checks import CheckResult, check_each
from stagelab.core.errors import KernelCrash, KernelHang
from stagelab.judge.outcome import HANG, ORDERING, Evidence, decide
from stagelab.measure.watchdog import (BASE_S, HANG_EXIT_CODE, HANG_MARKER, HANG_VERDICT_S, MAX_BOUND_S, MAX_POLL_S,
                               SLOW_FLOPS_PER_S, launch_bound_s, wait_for)

ROOT = Path(__file__).resolve().parents[1]


class NeverDone:
    """A CUDA event of a launch that hangs."""

    def __init__(self):
        self.queries = 0

    def query(self) -> bool:
        self.queries += 1
        return False


class DoneAfter:
    """An event that completes once `clock` reaches `at`."""

    def __init__(self, clock, at: float):
        self.clock, self.at = clock, at

    def query(self) -> bool:
        return self.clock() >= self.at


class FakeClock:
    def __init__(self):
        self.now = 100.0
        self.sleeps = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_bound_grows_with_flops_and_launches_and_stops_short_of_the_verdict_limit():
    assert launch_bound_s(0.0) == BASE_S
    assert launch_bound_s(2e12) == pytest.approx(BASE_S + 2e12 / SLOW_FLOPS_PER_S)
    assert launch_bound_s(1e12, launches=3) == pytest.approx(BASE_S + 3.0)
    assert launch_bound_s(1e18) == MAX_BOUND_S
    assert MAX_BOUND_S + MAX_POLL_S < HANG_VERDICT_S


@pytest.mark.parametrize("flops, launches", [(-1.0, 1), (1.0, 0)])
def test_bound_rejects_nonsense(flops, launches):
    with pytest.raises(ValueError, match="flops >= 0 and launches >= 1"):
        launch_bound_s(flops, launches)


def test_an_event_that_never_completes_raises_kernel_hang_at_its_bound():
    clock, event = FakeClock(), NeverDone()
    with pytest.raises(KernelHang) as caught:
        wait_for([event], 7.0, "check 2x8x1024x128 float16 seed 0", clock=clock, sleep=clock.sleep)
    hang = caught.value
    assert hang.what == "check 2x8x1024x128 float16 seed 0" and hang.deadline_s == 7.0
    assert 7.0 <= hang.waited_s <= 7.0 + MAX_POLL_S
    assert clock.now - 100.0 == pytest.approx(7.0)  # gave up at the bound, not a poll later
    assert "not done after 7.0 s (bound 7.0 s)" in str(hang)
    assert max(clock.sleeps) <= MAX_POLL_S and event.queries == len(clock.sleeps) + 1


def test_each_event_gets_its_bound_from_the_one_before():
    clock = FakeClock()
    samples = [DoneAfter(clock, 100.0 + 0.8 * 5 * (i + 1)) for i in range(4)]  # each 0.8 of the bound
    wait_for(samples, 5.0, "timing", clock=clock, sleep=clock.sleep)
    late = [DoneAfter(clock, clock.now + 4.0), DoneAfter(clock, clock.now + 4.0 + 6.0)]
    with pytest.raises(KernelHang, match="timing"):
        wait_for(late, 5.0, "timing", clock=clock, sleep=clock.sleep)


def test_a_real_wait_ends_in_wall_time():
    started = time.monotonic()
    with pytest.raises(KernelHang):
        wait_for([NeverDone()], 0.05, "a launch")
    assert time.monotonic() - started < 1.0


def test_a_hang_is_incorrect_with_reason_hang_ahead_of_everything_measured_after():
    evidence = Evidence(built=True, gates_passed=True, gpu_available=True, checks_passed=None,
                        hang="check 1x8x512x64 float16 seed 0 not done after 5.0 s (bound 5.0 s)")
    outcome = decide(evidence)
    assert outcome.outcome == "incorrect" and outcome.reason.startswith(f"{HANG}: check 1x8x512x64")
    stressed = decide(Evidence(built=True, gates_passed=True, gpu_available=True, checks_passed=True,
                               stress_passed=False, stress_failures="consumer_2000ns: 2 of 5 rounds failed"))
    assert stressed.outcome == "incorrect" and stressed.reason == f"{ORDERING}: consumer_2000ns: 2 of 5 rounds failed"


def _problem(tag="1x1x8x64"):
    return SimpleNamespace(tag=tag, causal=False, flops=lambda: 0.0)


def test_checks_record_a_crash_but_let_a_hang_through():
    def check(shape, dtype, seed, distribution):
        if seed == 0:
            raise RuntimeError("invalid argument")
        raise KernelHang(f"check {shape.tag}", 5.0, 5.0)

    with pytest.raises(KernelHang):
        check_each(check, [_problem()], ["float16"], [0, 1])
    crashed = check_each(lambda *a: (_ for _ in ()).throw(RuntimeError("invalid argument")),
                         [_problem()], ["float16"], [0])
    assert isinstance(crashed[0], CheckResult) and not crashed[0].passed


# torch's text for a kernel that died (seen on an H100 with the no_k_full_wait plant, 77fb757)
TORCH_LAUNCH_FAILURE = ("CUDA error: unspecified launch failure\nCUDA kernel errors might be asynchronously "
                        "reported at some other API call, so the stacktrace below might be incorrect.\n"
                        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1")


class DiesAfter:
    """An event whose launch fails: query() is False `polls` times, then raises as torch does."""

    def __init__(self, polls: int):
        self.polls = polls

    def query(self) -> bool:
        self.polls -= 1
        if self.polls < 0:
            raise RuntimeError(TORCH_LAUNCH_FAILURE)
        return False


def test_a_launch_that_dies_while_waited_on_is_a_crash_named_in_one_line():
    clock = FakeClock()
    with pytest.raises(KernelCrash) as caught:
        wait_for([DiesAfter(polls=3)], 7.0, "check 2x8x1024x128 float16 seed 0", clock=clock, sleep=clock.sleep)
    message = str(caught.value)
    assert message.startswith("check 2x8x1024x128 float16 seed 0 crashed on the GPU")
    assert "CUDA error: unspecified launch failure" in message and "\n" not in message
    assert "CUDA_LAUNCH_BLOCKING" not in message and caught.value.waited_s < 7.0


def test_checks_record_a_crash_then_stop_since_the_context_is_lost():
    recorded = []

    def check(shape, dtype_name, seed, distribution):
        if seed == 0:
            raise KernelCrash(f"check {shape.tag}", 0.1, "CUDA error: unspecified launch failure")
        recorded.append(seed)  # never: nothing may run after a lost context

    with pytest.raises(KernelCrash):
        check_each(check, [_problem()], ["float16"], [0, 1])
    assert recorded == []
    crashed = CheckResult.crashed(_problem(), "float16", 0, KernelCrash("check x", 0.1, "CUDA error: oops"))
    assert crashed.reason == "launch raised KernelCrash: check x crashed on the GPU 0.1 s after it was waited on: " \
                             "CUDA error: oops (the CUDA context is lost)"


def test_chains_let_a_hang_through(monkeypatch):
    def hanging_chain(*args, **kwargs):
        raise KernelHang("chain 1x1x8x64 float16 link 0", 5.0, 5.0)

    monkeypatch.setattr(chain, "check_chain", hanging_chain)
    with pytest.raises(KernelHang, match="link 0"):
        chain.check_chains(None, None, [_problem()], "float16")


def test_stage_run_records_the_hang_verdict_then_calls_on_hang():
    from stagelab.stage import StageRun

    ended = []
    run = StageRun("s8_persistent_split", "params/smoke.yaml", track=False, on_hang=ended.append)
    run.ctx.gpu_available = True       # the step below stands in for a GPU launch that hangs
    run.results.built = SimpleNamespace()
    hang = KernelHang("check 1x8x512x64 float16 seed 0", 5.0, 5.0)

    def hanging_step():
        raise hang

    with pytest.raises(KernelHang):
        run._watched(hanging_step)
    assert ended == [hang]
    assert run.outcome.outcome == "incorrect" and run.outcome.reason.startswith(f"{HANG}: check 1x8x512x64")


def test_exit_after_hang_ends_the_process_with_its_status_and_marker():
    code = ("import sys; from stagelab.core.errors import KernelHang; from stagelab.measure.watchdog import exit_after_hang\n"
            "print('recorded', flush=False)\n"
            "exit_after_hang(KernelHang('chain 1x1x8x64 float16 link 3', 5.0, 5.0))\n"
            "print('unreachable')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "lib")})
    assert proc.returncode == HANG_EXIT_CODE
    assert proc.stdout == "recorded\n"  # flushed before os._exit
    assert HANG_MARKER in proc.stderr and "link 3" in proc.stderr


def test_watchdog_sources_never_block_in_synchronize():
    """checks, chains and timing wait only through the watchdog."""
    for name in ("measure/checks.py", "measure/chain.py", "measure/timing.py", "measure/sampling.py", "families/sdpa/fp8/budget.py"):
        text = (ROOT / "lib" / "stagelab" / name).read_text()
        assert "torch.cuda.synchronize(" not in text, name
    assert watchdog.HANG_EXIT_CODE not in (0, 1, 2, 124) and watchdog.HANG_EXIT_CODE < 128


def test_the_cold_spin_covers_a_slow_host_dispatch_and_no_less_than_the_default():
    from stagelab.measure.sampling import (HOST_DISPATCH_MARGIN, HOST_HIDING_SPIN_CYCLES, MAX_SPIN_CYCLES,
                                           SPIN_CLOCK_HZ, hiding_spin_cycles)

    assert hiding_spin_cycles(0.0) == hiding_spin_cycles(20e-6) == HOST_HIDING_SPIN_CYCLES  # a kernel launch
    slow = 3e-3  # a library call that spends 3 ms on the host before its kernel is enqueued
    assert hiding_spin_cycles(slow) == math.ceil(slow * SPIN_CLOCK_HZ * HOST_DISPATCH_MARGIN) > HOST_HIDING_SPIN_CYCLES
    assert hiding_spin_cycles(10.0) == MAX_SPIN_CYCLES
