"""Small helpers for a stage notebook's own exploration cells (sweeps, A/B of knobs)."""

from __future__ import annotations

import pandas as pd
import torch

from .checks import TORCH_DTYPES, make_inputs
from .params import Shape
from .sdpa import StageKernel, default_scale
from .timing import L2Flusher, summarize, time_mode


def time_kernel(kernel: StageKernel, shape: Shape, *, dtype: str = "float16", mode: str = "cold",
                warmup: int = 5, repetitions: int = 100, label: str | None = None) -> dict:
    """One kernel on one shape: a TimingStats row as a dict (p50/p90/p99, TFLOP/s)."""
    q, k, v = make_inputs(shape, TORCH_DTYPES[dtype], seed=0, device="cuda")
    out = torch.empty_like(q)
    scale = default_scale(shape.head_dim)

    def fn() -> None:
        kernel.module.forward(q, k, v, out, scale, shape.causal, torch.cuda.current_stream().cuda_stream)

    flush = L2Flusher(q.device) if mode == "cold" else None
    samples = time_mode(fn, mode, flush, warmup=warmup, repetitions=repetitions)
    return summarize(samples, contender=label or kernel.stage_id, shape=shape, mode=mode).as_row()


def sweep(kernels: dict[str, StageKernel], shapes: list[Shape], **kwargs) -> pd.DataFrame:
    """Every labelled kernel on every shape, one row each."""
    return pd.DataFrame([time_kernel(k, s, label=name, **kwargs) for name, k in kernels.items() for s in shapes])
