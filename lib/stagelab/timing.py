"""Timing with CUDA events: cold (L2 flushed between launches) and hot (graph replay).

Each contender (the stage, its parent, each SDPA backend) is timed in the same
process on the same inputs, so the ratios between them come from one run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch

from .params import Shape, TimingSpec

# Flushing twice the L2's size evicts everything the previous launch left there.
L2_FLUSH_FACTOR = 2
# Before each timed launch the GPU spins this many cycles (~0.5 ms at 2 GHz) so the host
# has time to enqueue start event, launch and end event: host-side dispatch (Python, the
# SDPA backend selection) then never shows up as GPU time between the two events. Seen on
# an H100 without it: SDPA at 2x8x512x64 timed 86 us cold, its kernels take ~20 us.
HOST_HIDING_SPIN_CYCLES = 1_000_000


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

    def as_row(self) -> dict:
        return asdict(self)


def summarize(samples_us: list[float], *, contender: str, shape: Shape, mode: str) -> TimingStats:
    a = np.asarray(samples_us, dtype=np.float64)
    p25, p50, p75, p90, p99 = np.percentile(a, [25, 50, 75, 90, 99])
    return TimingStats(
        contender=contender, shape=shape.tag, causal=shape.causal, mode=mode, repetitions=len(a),
        p50_us=float(p50), p90_us=float(p90), p99_us=float(p99), iqr_us=float(p75 - p25),
        mean_us=float(a.mean()), tflops=shape.flops() / (p50 * 1e-6) / 1e12,
    )


class L2Flusher:
    """A buffer sized from the device's L2; writing it evicts the cache between launches."""

    def __init__(self, device: torch.device):
        l2_bytes = torch.cuda.get_device_properties(device).L2_cache_size
        self.buffer = torch.empty(L2_FLUSH_FACTOR * l2_bytes, dtype=torch.uint8, device=device)

    def __call__(self) -> None:
        self.buffer.zero_()


def time_cold(fn: Callable[[], None], flush: L2Flusher, *, warmup: int, repetitions: int) -> list[float]:
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
    for start, end in zip(starts, ends):
        flush()
        torch.cuda._sleep(HOST_HIDING_SPIN_CYCLES)
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]


def time_hot(fn: Callable[[], None], *, warmup: int, repetitions: int) -> list[float]:
    """Graph replay: no launch gaps, warm caches; the steady state of back-to-back calls."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(max(warmup, 1)):  # capture needs lazily-created handles to exist already
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    for _ in range(max(warmup, 1)):
        graph.replay()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repetitions)]
    for start, end in zip(starts, ends):
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]


_BACKENDS = {
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "math": "MATH",
}


def sdpa_backend_context(backend: str):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, _BACKENDS[backend])])


def sdpa_contender(backend: str, q, k, v, scale: float, causal: bool) -> Callable[[], None]:
    """PyTorch SDPA pinned to one backend; raises RuntimeError if it cannot run these inputs."""
    import torch.nn.functional as F

    def run() -> None:
        with sdpa_backend_context(backend):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

    run()  # fails fast, before timing, if the backend is unavailable here
    torch.cuda.synchronize()
    return run


def time_mode(fn: Callable[[], None], mode: str, flush: L2Flusher | None, *, warmup: int,
              repetitions: int) -> list[float]:
    """Samples in microseconds for one contender in one mode ('cold' needs a flusher, 'hot' none)."""
    if mode == "cold":
        if flush is None:
            raise ValueError("cold timing needs an L2Flusher")
        return time_cold(fn, flush, warmup=warmup, repetitions=repetitions)
    return time_hot(fn, warmup=warmup, repetitions=repetitions)


def time_contenders(contenders: dict[str, Callable[[], None]], shape: Shape, spec: TimingSpec,
                    flush: L2Flusher) -> list[TimingStats]:
    """Each contender in each mode, interleaved per mode so drift hits all of them alike."""
    stats = []
    for mode in spec.modes:
        for name, fn in contenders.items():
            samples = time_mode(fn, mode, flush, warmup=spec.warmup, repetitions=spec.repetitions)
            stats.append(summarize(samples, contender=name, shape=shape, mode=mode))
    return stats
