"""Small helpers for a stage notebook's own exploration cells (sweeps, A/B of knobs)."""

from __future__ import annotations

import pandas as pd
import torch

from .family import Family
from .timing import L2Flusher, summarize, time_mode


def time_kernel(family: Family, kernel, shape, *, dtype: str = "float16", mode: str = "cold",
                warmup: int = 5, repetitions: int = 100, label: str | None = None) -> dict:
    """One built stage kernel on one problem: a TimingStats row as a dict (p50/p90/p99, TFLOP/s)."""
    torch_dtype = family.torch_dtype(dtype)
    inputs = family.make_inputs(shape, torch_dtype, seed=0, device="cuda")
    launch = family.module_launch(kernel.module, shape, inputs, family.new_output(shape, inputs))
    flush = L2Flusher(inputs[0].device) if mode == "cold" else None
    samples = time_mode(launch, mode, flush, warmup=warmup, repetitions=repetitions)
    return summarize(samples, contender=label or kernel.stage_id, shape=shape, mode=mode,
                     element_bytes=torch_dtype.itemsize).as_row()


def sweep(family: Family, kernels: dict, shapes: list, **kwargs) -> pd.DataFrame:
    """Every labelled kernel on every problem, one row each."""
    return pd.DataFrame([time_kernel(family, k, s, label=name, **kwargs) for name, k in kernels.items() for s in shapes])


def time_contender(family: Family, name: str, shape, *, dtype: str = "float16", mode: str = "cold",
                   warmup: int = 5, repetitions: int = 100) -> dict:
    """One library contender (e.g. sdpa's `flash`) on one problem, timed like a stage."""
    torch_dtype = family.torch_dtype(dtype)
    inputs = family.make_inputs(shape, torch_dtype, seed=0, device="cuda")
    launch = family.contender(name, shape, inputs)
    flush = L2Flusher(inputs[0].device) if mode == "cold" else None
    samples = time_mode(launch, mode, flush, warmup=warmup, repetitions=repetitions)
    return summarize(samples, contender=f"{family.name}_{name}", shape=shape, mode=mode,
                     element_bytes=torch_dtype.itemsize).as_row()
