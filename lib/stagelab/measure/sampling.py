"""Samplers: a contender made ready to be timed in one mode (warmed up, its CUDA graph captured, the
spin that hides its host dispatch), and the round-robin loop that takes every contender's samples
in turn (stagelab.measure.timing summarizes them)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..core.timing_spec import MIN_CAPPED_REPETITIONS, TIMING_MODES
from .watchdog import launch_bound_s, synchronize, wait_for

# Before each cold launch the GPU spins this many cycles (~0.5 ms at 2 GHz) so the host
# has time to enqueue start event, launch and end event: host-side dispatch (Python, the
# SDPA backend selection) then never shows up as GPU time between the two events. Seen on
# an H100 without it: SDPA at 2x8x512x64 timed 86 us cold, its kernels take ~20 us.
HOST_HIDING_SPIN_CYCLES = 1_000_000
# A contender whose host side takes longer than that spin (FlashAttention-4's CuTe DSL call: its cold
# figures on models.yaml were milliseconds, 14x-826x the stage's, while its kernels run in microseconds)
# gets a spin of twice its measured dispatch, counted at the highest SM clock Hopper runs (H100/H200:
# 1980 MHz, rounded up), so a slower clock only lengthens it; capped where no launch can be that slow.
SPIN_CLOCK_HZ = 2.0e9
HOST_DISPATCH_MARGIN = 2
MAX_SPIN_CYCLES = 100_000_000  # 50 ms at SPIN_CLOCK_HZ
# Launches per graph in throughput mode: the recipe (20 back-to-back calls).
THROUGHPUT_LAUNCHES = 20


@dataclass(frozen=True)
class Sampler:
    """One contender made ready to be sampled in one mode (warmed up, its graph captured): `run` goes
    between the two events, `before` ahead of them (unmeasured), each sample holds `launches`
    launches, and the watchdog gives one sample `bound_s` from the end of the sample before it."""
    run: Callable[[], None]
    before: Callable[[], None] | None
    launches: int
    bound_s: float


def _spin() -> None:
    """Keep the GPU busy while the host enqueues the start event, a graph replay and the end event."""
    torch.cuda._sleep(HOST_HIDING_SPIN_CYCLES)


def hiding_spin_cycles(host_dispatch_s: float) -> int:
    """GPU cycles to spin before a cold launch so that a host dispatch of `host_dispatch_s` seconds
    (start event, the contender's call, end event) is enqueued before the spin ends."""
    needed = math.ceil(max(host_dispatch_s, 0.0) * SPIN_CLOCK_HZ * HOST_DISPATCH_MARGIN)
    return min(max(HOST_HIDING_SPIN_CYCLES, needed), MAX_SPIN_CYCLES)


def host_dispatch_s(fn: Callable[[], None], flops: float = 0.0, pending: int = 1) -> float:
    """Host seconds of one call of `fn` once the `pending` launches before it are done: what the cold
    spin must cover."""
    synchronize("timing warm-up", flops, launches=max(pending, 1))
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def cold_sampler(fn: Callable[[], None], flush: Callable[[], None], *, warmup: int, flops: float = 0.0) -> Sampler:
    """cold mode: one launch a sample, the L2 flushed and the GPU spinning (long enough to cover the
    contender's host dispatch, measured here) before each."""
    for _ in range(warmup):
        fn()
    spin_cycles = hiding_spin_cycles(host_dispatch_s(fn, flops, pending=warmup))
    synchronize("timing warm-up", flops)  # the dispatch probe's launch

    def flush_then_spin() -> None:
        # keep the GPU busy while the host enqueues the start event, the work and the end event
        flush()
        torch.cuda._sleep(spin_cycles)
    return Sampler(fn, flush_then_spin, 1, launch_bound_s(flops))


def _capture(fn: Callable[[], None], launches: int, warmup: int, flops: float = 0.0) -> torch.cuda.CUDAGraph:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(max(warmup, 1)):  # capture needs lazily-created handles to exist already
            fn()
    torch.cuda.current_stream().wait_stream(side)
    # torch.cuda.graph synchronizes the device as it starts: the warm-up is waited for here first
    synchronize("timing warm-up", flops, launches=max(warmup, 1))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(launches):
            fn()
    for _ in range(max(warmup, 1)):
        graph.replay()
    synchronize("timing warm-up", flops, launches=launches * max(warmup, 1))
    return graph


def graph_sampler(fn: Callable[[], None], launches: int, *, warmup: int, flops: float = 0.0) -> Sampler:
    """hot (one launch) and throughput (THROUGHPUT_LAUNCHES) modes: a graph of `launches` launches replayed."""
    return Sampler(_capture(fn, launches, warmup, flops).replay, _spin, launches, launch_bound_s(flops, launches))


def sampler(fn: Callable[[], None], mode: str, flush: Callable[[], None] | None, *, warmup: int,
            flops: float = 0.0) -> Sampler:
    """`fn` made ready for `mode` ('cold' needs a flusher); `flops`, one launch's, sets the watchdog's bound."""
    if mode == "cold":
        if flush is None:
            raise ValueError("cold timing needs an L2Flusher")
        return cold_sampler(fn, flush, warmup=warmup, flops=flops)
    if mode in ("hot", "throughput"):
        return graph_sampler(fn, 1 if mode == "hot" else THROUGHPUT_LAUNCHES, warmup=warmup, flops=flops)
    raise ValueError(f"unknown timing mode {mode!r}; known: {list(TIMING_MODES)}")


# How the samples of a mode's contenders interleave (a run's param `timing_order`): one sample a
# visit, or `visits` runs of samples per contender (TimingSpec.visits).
TIMING_ORDER = "round_robin"


def timing_order(visits: int | None) -> str:
    return TIMING_ORDER if visits is None else f"{TIMING_ORDER}_{visits}_visits"


def round_robin_order(names: list[str], rounds: int) -> list[str]:
    """Whose sample comes when: round r takes one sample of every contender, in the order rotated by
    r // 2 and reversed in odd rounds. Over 2 * len(names) rounds each contender takes every position
    equally often and follows different contenders, so a drift in clock or temperature over the run,
    or what one kernel leaves behind for the next, falls on every contender alike instead of on
    whichever was timed last. Timed one after another in blocks, two builds of the same kernel
    measured 3% apart on an H100 (bert-base 512 on models.yaml)."""
    order = []
    for r in range(rounds):
        shift = (r // 2) % len(names)
        rotated = names[shift:] + names[:shift]
        order += rotated[::-1] if r % 2 else rotated
    return order


def _sample(one: Sampler) -> tuple[torch.cuda.Event, torch.cuda.Event]:
    """One sample enqueued: `before` unmeasured, then the run between two events (not waited for)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if one.before is not None:
        one.before()
    start.record()
    one.run()
    end.record()
    return start, end


def probe_seconds(one: Sampler, what: str) -> float:
    """GPU seconds of one sample of `one` (its launches, not its `before`), waited for: what a cap on a
    contender's time (capped_repetitions) divides."""
    start, end = _sample(one)
    wait_for([end], one.bound_s, f"{what}: probe")
    return start.elapsed_time(end) / 1e3


def capped_repetitions(samplers: dict[str, Sampler], repetitions: int, seconds_each: float | None,
                       what: str) -> dict[str, int]:
    """Each contender's samples in this mode: `repetitions`, or where `seconds_each` (TimingSpec.
    seconds_per_contender) holds fewer of its samples (one probed here), that many, and at least
    MIN_CAPPED_REPETITIONS."""
    if seconds_each is None:
        return dict.fromkeys(samplers, repetitions)
    wanted = {}
    for name, one in samplers.items():
        took = probe_seconds(one, f"{what}: {name}")
        fit = math.floor(seconds_each / took) if took > 0 else repetitions
        wanted[name] = min(repetitions, max(MIN_CAPPED_REPETITIONS, fit))
    return wanted


def sample_round_robin(samplers: dict[str, Sampler], repetitions: int | dict[str, int], what: str,
                       visits: int | None = None) -> dict[str, list[float]]:
    """`repetitions` samples per launch (microseconds) of every sampler (or per sampler, from
    capped_repetitions). Each contender is visited `visits` times (default: once per sample of the
    most sampled) in round_robin_order and takes its share of its samples in a row per visit, spread
    evenly over the visits: a few long visits let a power-capped GPU settle at each contender's own
    sustained clock, while the reversed rounds still cancel the drift, also for a contender that
    takes fewer samples than the rest."""
    wanted = repetitions if isinstance(repetitions, dict) else dict.fromkeys(samplers, repetitions)
    rounds = max(wanted.values()) if visits is None else visits
    taken, counts, visited = [], dict.fromkeys(samplers, 0), dict.fromkeys(samplers, 0)
    for name in round_robin_order(list(samplers), rounds):
        one = samplers[name]
        visited[name] += 1
        for _ in range(math.ceil(visited[name] * wanted[name] / rounds) - counts[name]):
            taken.append((name, *_sample(one)))
            counts[name] += 1
    samples: dict[str, list[float]] = {name: [] for name in samplers}
    for name, start, end in taken:  # each sample must end within its bound of the one before
        wait_for([end], samplers[name].bound_s, f"{what}: {name}")
        samples[name].append(start.elapsed_time(end) * 1e3 / samplers[name].launches)
    return samples
