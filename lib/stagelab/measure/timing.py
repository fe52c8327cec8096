"""Timing with CUDA events, in three modes, for any family's contenders.

- cold: the L2 is flushed before each launch, and the GPU spins before the start
  event so host dispatch never counts as kernel time; one launch per sample.
- hot: one launch captured in a CUDA graph and replayed; warm caches, no launch gaps.
  The GPU spins before the start event here too: without it the host's graph-replay
  call (~10 us) fell between the events, and an empty kernel read 11-19 us hot on an H100.
- throughput: sampling.THROUGHPUT_LAUNCHES launches captured in one graph, reported per
  launch: what a model's forward pass sees when the call repeats back to back.

Each contender (the stage, its parent, each library contender) is timed in the
same process on the same inputs, its samples taken round robin with the others'
within each mode (sampling.sample_round_robin), so the ratios between them come
from one run and no contender owns a stretch of the run's clock drift. The timing
floor (an empty kernel by the same recipe) is measured beside them: at small
problems the cold figure is mostly floor. Every sample is waited on by the watchdog
(stagelab.measure.watchdog): one that does not end within its bound, from the end
of the sample before it, raises KernelHang. Each row also carries the SM clock and
board power nvidia-smi sampled while the mode's interleaved samples ran
(stagelab.measure.gpu_clocks), one reading for all its contenders.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch

from .gpu_clocks import ClockMonitor, ClockSummary, smi_device_id
from ..core.timing_spec import MIN_REPETITIONS
from .sampling import capped_repetitions, sample_round_robin, sampler

# Flushing twice the L2's size evicts everything the previous launch left there.
L2_FLUSH_FACTOR = 2
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
    """Percentiles of the samples; TFLOP/s and GB/s at the median (problem's flops and byte floor). A
    contender capped to fewer than MIN_REPETITIONS samples (capped_repetitions) has no p99 (nan, which
    the record leaves out): its 99th percentile would be one of its slowest few launches."""
    a = np.asarray(samples_us, dtype=np.float64)
    p25, p50, p75, p90, p99 = np.percentile(a, [25, 50, 75, 90, 99])
    if len(a) < MIN_REPETITIONS:
        p99 = math.nan
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
                     repetitions: int, shape, element_bytes: int, device: str,
                     visits: int | None = None, seconds_each: float | None = None) -> list[TimingStats]:
    """Every contender in one mode, sampled round robin, each summarized with the clock and power
    nvidia-smi saw over the whole interleaved run (one reading for all: their samples alternate
    faster than nvidia-smi samples). `seconds_each`: TimingSpec.seconds_per_contender."""
    samplers = {name: sampler(fn, mode, flush, warmup=warmup, flops=shape.flops()) for name, fn in contenders.items()}
    wanted = capped_repetitions(samplers, repetitions, seconds_each, f"{mode} timing")
    with ClockMonitor(device) as clocks:
        samples = sample_round_robin(samplers, wanted, f"{mode} timing", visits)
    summary = clocks.summary()
    return [summarize(samples[name], contender=name, shape=shape, mode=mode, element_bytes=element_bytes)
            .with_clocks(summary) for name in contenders]


def time_contenders(contenders: dict[str, Callable[[], None]], shape, spec, flush: L2Flusher,
                    element_bytes: int = 2) -> list[TimingStats]:
    """Each contender in each of spec.modes, sampled round robin within each mode."""
    device = smi_device_id(torch.cuda.current_device())
    return [stats for mode in spec.modes
            for stats in time_interleaved(contenders, mode, flush, warmup=spec.warmup, repetitions=spec.repetitions,
                                          shape=shape, element_bytes=element_bytes, device=device,
                                          visits=spec.visits, seconds_each=spec.seconds_per_contender)]


def time_floor(spec, flush: L2Flusher) -> dict[str, float]:
    """The empty kernel's p50 per mode: what no launch can go under."""
    return {mode: float(np.median(time_mode(empty_kernel, mode, flush, warmup=spec.warmup,
                                            repetitions=spec.repetitions)))
            for mode in spec.modes}
