"""Timing with CUDA events, in three modes, for any family's contenders.

- cold: the L2 is flushed before each launch, and the GPU spins before the start
  event so host dispatch never counts as kernel time; one launch per sample.
- hot: one launch captured in a CUDA graph and replayed; warm caches, no launch gaps.
  The GPU spins before the start event here too: without it the host's graph-replay
  call (~10 us) fell between the events, and an empty kernel read 11-19 us hot on an H100.
- throughput: THROUGHPUT_LAUNCHES launches captured in one graph, reported per
  launch: what a model's forward pass sees when the call repeats back to back.

Each contender (the stage, its parent, each library contender) is timed in the
same process on the same inputs, its samples taken round robin with the others'
within each mode (sample_round_robin), so the ratios between them come from one
run and no contender owns a stretch of the run's clock drift. The timing floor (an empty kernel by the same recipe)
is measured beside them: at small problems the cold figure is mostly floor.
Every sample is waited on by the watchdog (stagelab.measure.watchdog): one that does not end within
its bound, from the end of the sample before it, raises KernelHang. Each row also carries the SM clock and board power nvidia-smi sampled while it
was timed (stagelab.measure.gpu_clocks): an H100 at its power limit lowers the clock, and
not by the same amount for every contender.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch

from ..core.params import TIMING_MODES
from .gpu_clocks import ClockMonitor, ClockSummary, smi_device_id
from .watchdog import launch_bound_s, synchronize, wait_for

# Flushing twice the L2's size evicts everything the previous launch left there.
L2_FLUSH_FACTOR = 2
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
# The contender name of the timing floor, an empty kernel timed by each mode's recipe.
FLOOR = "empty_kernel"


@dataclass
class TimingStats:
    contender: str
    shape: str
    causal: bool
    mode: str
    repetitions: int
    p50_us: float
    p90_us: float
    p99_us: float
    iqr_us: float
    mean_us: float
    tflops: float
    gbps: float
    # metrics.CLOCK_STATS: what the GPU ran at meanwhile (nan where nvidia-smi could not say)
    sm_clock_mhz: float = math.nan
    min_sm_clock_mhz: float = math.nan
    power_w: float = math.nan
    power_capped_pct: float = math.nan

    def as_row(self) -> dict:
        return asdict(self)

    def with_clocks(self, clocks: ClockSummary | None) -> TimingStats:
        return replace(self, **clocks.as_row()) if clocks else self


def summarize(samples_us: list[float], *, contender: str, shape, mode: str, element_bytes: int = 2) -> TimingStats:
    """Percentiles of the samples; TFLOP/s and GB/s at the median (problem's flops and byte floor)."""
    a = np.asarray(samples_us, dtype=np.float64)
    p25, p50, p75, p90, p99 = np.percentile(a, [25, 50, 75, 90, 99])
    seconds = p50 * 1e-6
    return TimingStats(
        contender=contender, shape=shape.tag, causal=bool(getattr(shape, "causal", False)), mode=mode,
        repetitions=len(a), p50_us=float(p50), p90_us=float(p90), p99_us=float(p99), iqr_us=float(p75 - p25),
        mean_us=float(a.mean()), tflops=shape.flops() / seconds / 1e12,
        gbps=shape.bytes_moved(element_bytes) / seconds / 1e9,
    )


def geometric_mean(values: list[float]) -> float:
    """The mean of ratios (speedups over problems); NaN when any is missing or not positive."""
    if not values or any(v <= 0 or not math.isfinite(v) for v in values):
        return float("nan")
    return math.exp(sum(math.log(v) for v in values) / len(values))


class L2Flusher:
    """A buffer sized from the device's L2; writing it evicts the cache between launches."""

    def __init__(self, device: torch.device):
        l2_bytes = torch.cuda.get_device_properties(device).L2_cache_size
        self.buffer = torch.empty(L2_FLUSH_FACTOR * l2_bytes, dtype=torch.uint8, device=device)

    def __call__(self) -> None:
        self.buffer.zero_()


def empty_kernel() -> None:
    """The floor: a kernel that spins zero cycles."""
    torch.cuda._sleep(0)


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


def cold_sampler(fn: Callable[[], None], flush: L2Flusher, *, warmup: int, flops: float = 0.0) -> Sampler:
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


def sampler(fn: Callable[[], None], mode: str, flush: L2Flusher | None, *, warmup: int, flops: float = 0.0) -> Sampler:
    """`fn` made ready for `mode` ('cold' needs a flusher); `flops`, one launch's, sets the watchdog's bound."""
    if mode == "cold":
        if flush is None:
            raise ValueError("cold timing needs an L2Flusher")
        return cold_sampler(fn, flush, warmup=warmup, flops=flops)
    if mode in ("hot", "throughput"):
        return graph_sampler(fn, 1 if mode == "hot" else THROUGHPUT_LAUNCHES, warmup=warmup, flops=flops)
    raise ValueError(f"unknown timing mode {mode!r}; known: {list(TIMING_MODES)}")


def round_robin_order(names: list[str], repetitions: int) -> list[str]:
    """Whose sample comes when: round r takes one sample of every contender, in the order rotated by
    r // 2 and reversed in odd rounds. Over 2 * len(names) rounds each contender takes every position
    equally often and follows different contenders, so a drift in clock or temperature over the run,
    or what one kernel leaves behind for the next, falls on every contender alike instead of on
    whichever was timed last. Timed one after another in blocks, two builds of the same kernel
    measured 3% apart on an H100 (bert-base 512 on models.yaml)."""
    order = []
    for r in range(repetitions):
        shift = (r // 2) % len(names)
        rotated = names[shift:] + names[:shift]
        order += rotated[::-1] if r % 2 else rotated
    return order


def sample_round_robin(samplers: dict[str, Sampler], repetitions: int, what: str) -> dict[str, list[float]]:
    """`repetitions` samples per launch (microseconds) of every sampler, taken in round_robin_order."""
    taken = []
    for name in round_robin_order(list(samplers), repetitions):
        one = samplers[name]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if one.before is not None:
            one.before()
        start.record()
        one.run()
        end.record()
        taken.append((name, start, end))
    samples: dict[str, list[float]] = {name: [] for name in samplers}
    for name, start, end in taken:  # each sample must end within its bound of the one before
        wait_for([end], samplers[name].bound_s, f"{what}: {name}")
        samples[name].append(start.elapsed_time(end) * 1e3 / samplers[name].launches)
    return samples


def time_mode(fn: Callable[[], None], mode: str, flush: L2Flusher | None, *, warmup: int,
              repetitions: int, flops: float = 0.0) -> list[float]:
    """Samples in microseconds for one contender in one mode."""
    one = sampler(fn, mode, flush, warmup=warmup, flops=flops)
    return sample_round_robin({mode: one}, repetitions, f"{mode} timing")[mode]


def time_with_clocks(fn: Callable[[], None], mode: str, flush: L2Flusher | None, *, warmup: int, repetitions: int,
                     contender: str, shape, element_bytes: int, device: str) -> TimingStats:
    """One contender in one mode, summarized, with the clock and power nvidia-smi (`device`:
    gpu_clocks.smi_device_id) saw meanwhile."""
    return time_interleaved({contender: fn}, mode, flush, warmup=warmup, repetitions=repetitions, shape=shape,
                            element_bytes=element_bytes, device=device)[0]


def time_interleaved(contenders: dict[str, Callable[[], None]], mode: str, flush: L2Flusher | None, *, warmup: int,
                     repetitions: int, shape, element_bytes: int, device: str) -> list[TimingStats]:
    """Every contender in one mode, sampled round robin, each summarized with the clock and power
    nvidia-smi saw over the whole interleaved run (one reading for all: their samples alternate
    faster than nvidia-smi samples)."""
    samplers = {name: sampler(fn, mode, flush, warmup=warmup, flops=shape.flops()) for name, fn in contenders.items()}
    with ClockMonitor(device) as clocks:
        samples = sample_round_robin(samplers, repetitions, f"{mode} timing")
    summary = clocks.summary()
    return [summarize(samples[name], contender=name, shape=shape, mode=mode, element_bytes=element_bytes)
            .with_clocks(summary) for name in contenders]


def time_contenders(contenders: dict[str, Callable[[], None]], shape, spec, flush: L2Flusher,
                    element_bytes: int = 2) -> list[TimingStats]:
    """Each contender in each of spec.modes, sampled round robin within each mode."""
    device = smi_device_id(torch.cuda.current_device())
    return [stats for mode in spec.modes
            for stats in time_interleaved(contenders, mode, flush, warmup=spec.warmup, repetitions=spec.repetitions,
                                          shape=shape, element_bytes=element_bytes, device=device)]


def time_floor(spec, flush: L2Flusher) -> dict[str, float]:
    """The empty kernel's p50 per mode: what no launch can go under."""
    return {mode: float(np.median(time_mode(empty_kernel, mode, flush, warmup=spec.warmup,
                                            repetitions=spec.repetitions)))
            for mode in spec.modes}
