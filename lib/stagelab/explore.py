"""Small helpers for a stage notebook's own exploration cells (sweeps, A/B of knobs)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from .errors import InputError
from .family import Family, refusal
from .gpu_clocks import smi_device_id
from .timing import L2Flusher, time_with_clocks


def _time_launch(family: Family, shape, launch_of: Callable, label: str, *, dtype: str, mode: str,
                 warmup: int, repetitions: int) -> dict:
    """Fresh inputs, `launch_of(inputs)` timed in one mode: a TimingStats row as a dict, with the
    SM clock and board power it ran at where nvidia-smi can say (stagelab.gpu_clocks)."""
    torch_dtype = family.torch_dtype(dtype)
    inputs = family.make_inputs(shape, torch_dtype, seed=0, device="cuda")
    flush = L2Flusher(inputs[0].device) if mode == "cold" else None
    return time_with_clocks(launch_of(inputs), mode, flush, warmup=warmup, repetitions=repetitions, contender=label,
                            shape=shape, element_bytes=torch_dtype.itemsize,
                            device=smi_device_id(inputs[0].device.index or 0)).as_row()


def stage_call(family: Family, kernel, shape, inputs) -> Callable[[], None]:
    """One launch of a built stage kernel on `inputs`, into a fresh output (a contender's
    counterpart is family.contender); InputError, before any launch, for a problem the stage does
    not declare it takes (stages.yaml `supports:`)."""
    reason = refusal(family, shape, getattr(kernel, "supports", ()))
    if reason:
        raise InputError(reason)
    return family.module_launch(kernel.module, shape, inputs, family.new_output(shape, inputs), kernel.input_kind)


def time_kernel(family: Family, kernel, shape, *, dtype: str = "float16", mode: str = "cold",
                warmup: int = 5, repetitions: int = 100, label: str | None = None) -> dict:
    """One built stage kernel on one problem: a TimingStats row as a dict (p50/p90/p99, TFLOP/s)."""
    return _time_launch(family, shape, lambda inputs: stage_call(family, kernel, shape, inputs),
                        label or kernel.stage_id, dtype=dtype, mode=mode, warmup=warmup, repetitions=repetitions)


def sweep(family: Family, kernels: dict, shapes: list, **kwargs) -> pd.DataFrame:
    """Every labelled kernel on every problem, one row each."""
    return pd.DataFrame([time_kernel(family, k, s, label=name, **kwargs) for name, k in kernels.items() for s in shapes])


def time_contender(family: Family, name: str, shape, *, dtype: str = "float16", mode: str = "cold",
                   warmup: int = 5, repetitions: int = 100) -> dict:
    """One library contender (e.g. sdpa's `flash`) on one problem, timed like a stage."""
    return _time_launch(family, shape, lambda inputs: family.contender(name, shape, inputs),
                        family.contender_label(name), dtype=dtype, mode=mode, warmup=warmup, repetitions=repetitions)
