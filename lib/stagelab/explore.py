"""Small helpers for a stage notebook's own exploration cells (sweeps, A/B of knobs)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from .core.errors import InputError
from .core.family import Family
from .core.supports import refusal
from .measure.gpu_clocks import smi_device_id
from .measure.timing import L2Flusher, time_with_clocks


def _time_launch(family: Family, shape, launch_of: Callable, label: str, *, dtype: str, mode: str,
                 warmup: int, repetitions: int) -> dict:
    """Fresh inputs, `launch_of(inputs)` timed in one mode: a TimingStats row as a dict, with the
    SM clock and board power it ran at where nvidia-smi can say (stagelab.measure.gpu_clocks)."""
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


def try_variants(run, name: str, variants: dict[str, dict], *, hypothesis: str, shapes: list | None = None,
                 repetitions: int | None = None, jobs: int | None = None) -> pd.DataFrame:
    """A notebook's variants of its stage as trials (stagelab.run.trial, what `stagelab try` runs): built in
    parallel, checked with the lab's checks, timed beside the stage's default and the library
    contenders on the run's parameter file (only `shapes` and the mission when given), and recorded
    as one trial run each, tagged with the stage run they came from, when the stage run records.
    Returns the timing rows of the file's primary mode (contender = the variant's label, `default`,
    the libraries), also logged as the sweep `name` on the stage run. A variant with no defines is the default itself: left out."""
    import os

    from .record.recorder import NullRecorder
    from .run.trial import Narrowing, run_trials
    from .run.trial_session import TRIAL_LABEL_PREFIX
    from .core.trial_spec import TrialSpec

    specs = [TrialSpec.of(defines={k: str(v) for k, v in defines.items()}, name=label)
             for label, defines in variants.items() if defines]
    narrowing = Narrowing(repetitions=repetitions, only=tuple(s.tag for s in shapes or ()))
    track = not isinstance(run.recorder, NullRecorder)
    session = run_trials(run.stage.id, specs, params=run.params.path, jobs=jobs or os.cpu_count() or 1,
                         hypothesis=hypothesis, track=track, from_run=run.run_id if track else None,
                         narrowing=narrowing)
    for trial in session.trials:
        print(f"{trial.spec.name}: {trial.verdict.verdict} ({trial.verdict.reason})"
              + (f", trial run {trial.run_id}" if trial.run_id else ""))
    timing = session.default.timing
    frame = timing.frame() if timing is not None else pd.DataFrame()
    if not frame.empty:
        frame = frame[frame["mode"] == timing.primary_mode].reset_index(drop=True)
        frame["contender"] = frame["contender"].str.removeprefix(TRIAL_LABEL_PREFIX)
    return run.log_sweep(name, frame)


# What a sweep's chart plots, by the timing column shown: its axis label.
SWEEP_AXIS_LABELS = {"p50_us": "p50 µs", "tflops": "TFLOP/s"}


def show_sweep(frame: pd.DataFrame, *, value: str, title: str):
    """A sweep's rows (try_variants, sweep) as a notebook shows them: the table of `value` by shape and
    contender, then a bar chart of it, one group of bars per contender. Returns the chart's axes."""
    from IPython.display import display

    display(frame.pivot_table(index="shape", columns="contender", values=value))
    return frame.pivot_table(index="contender", columns="shape", values=value).plot(
        kind="bar", ylabel=SWEEP_AXIS_LABELS.get(value, value), title=title)


def part_gain(run) -> pd.DataFrame:
    """What the stage's own part bought, per problem: its p50 against its parent's in this run's timing
    (the parent is the stage without the part), primary mode, with the launch plan the stage took
    there where its family reports plans. Empty before `run.time()` or for a stage without a parent."""
    from .core import metrics

    speedups = run.speedups()
    if speedups.empty or run.parent is None:
        return pd.DataFrame()
    column = metrics.speedup(metrics.PARENT).name  # the parent's timing label is `parent:<id>`, keyed `parent`
    primary = run.results.timing.primary_mode
    frame = speedups[speedups["mode"] == primary][["shape", "stage_p50_us", column]]
    frame = frame.rename(columns={column: f"parent_p50 / {run.stage.id}_p50"}).reset_index(drop=True)
    plans = _plans_by_shape(run)
    if plans:
        frame["plan"] = frame["shape"].map(plans).fillna("")
    return frame


def _plans_by_shape(run) -> dict[str, str]:
    """The launch plan each timed problem takes on this machine's model of the GPU (empty where the
    stage reports none)."""
    from .core.launch_plans import device_model

    built = run.results.built
    if built is None:
        return {}
    module, device, dtype = built.stage.module, device_model(), run.params.dtypes[0]
    plans = {}
    for shape in run.params.timed_shapes():
        try:
            plan = run.family.launch_plan_of(module, shape, dtype, device)
        except ValueError:  # a problem the stage rejects has no plan
            continue
        if plan:
            plans[shape.tag] = plan
    return plans


def show_part_gain(run, *, title: str):
    """part_gain as a notebook shows it: the table, then a bar chart of the ratio per problem (above 1:
    the part made the stage faster there). Returns the chart's axes, or None with nothing timed."""
    from IPython.display import display

    frame = part_gain(run)
    if frame.empty:
        print("nothing timed against the parent: run.time() first")
        return None
    display(frame)
    ratio = [c for c in frame.columns if c.startswith("parent_p50")][0]
    return frame.plot(x="shape", y=ratio, kind="bar", legend=False, ylabel=ratio, title=title)
