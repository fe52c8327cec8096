"""The store's newest runs as tables: the ladder of stages, one row per (stage, problem), and
the roofline points. Every metric key comes from the schema (metrics.py); the contenders and
the stage order come from the family. Numbers stay numbers here; core.formatting writes them.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..core import metrics as m
from ..core.errors import NoRunsError
from ..core.family import Family
from ..core.formatting import fixed_numbers
from ..core.timing_spec import TIMING_MODES
from ..core.registry import family_registry
from ..judge.error_cause import error_cause
from . import tracking
from .runs_view import STAGE_RUNS_FILTER
from .same_code_file import SameCode
from .source_state import SOURCE_COLUMN, is_current, source_states


# A failure's reason in a table cell: enough for its exception and message, not its traceback.
REASON_CHARS = 120
# The gpu tag of a run that saw no GPU (its outcome no_gpu: built and gated, never checked or timed).
NO_GPU = "none"


def require_gpu_runs(gpus: list[str], without_gpu: int, params_names: list[str], gpu: str | None) -> None:
    """A clear NoRunsError where the page would have nothing to show: no finished run on a GPU
    (saying so plainly when every one ran without a GPU), or none on the GPU asked for (naming those
    that have runs). `gpus`: the GPUs with finished runs, newest first."""
    files = ", ".join(params_names)
    if not gpus:
        if without_gpu:
            raise NoRunsError(f"every finished run of {files} ({without_gpu}) ran without a GPU (outcome no_gpu): "
                              "they were built and gated but never checked or timed, so there is no page to write; "
                              "run `stagelab run` on a machine with a GPU")
        raise NoRunsError(f"no finished runs of {files} in this store: run `stagelab run` first")
    if gpu is not None and gpu not in gpus:
        asked = (f"no finished runs of {files} on {gpu!r}" if gpu != NO_GPU
                 else "runs without a GPU (outcome no_gpu) were never timed, so there is no page of them")
        raise NoRunsError(f"--gpu {gpu}: {asked}; GPUs with runs of {files}: {', '.join(gpus)}")


def stage_runs(experiment: str) -> pd.DataFrame:
    """Every stage run of the experiment, newest first, as mlflow.search_runs' frame."""
    import mlflow

    mlflow.set_tracking_uri(tracking.tracking_uri())
    found = tracking.client().get_experiment_by_name(experiment)
    if found is None:
        raise NoRunsError(f"no experiment {experiment!r} in {tracking.tracking_uri()}: run `stagelab run` first")
    runs = mlflow.search_runs([found.experiment_id], filter_string=STAGE_RUNS_FILTER,
                              order_by=["attributes.start_time DESC"])
    if runs.empty:
        raise NoRunsError(f"experiment {experiment!r} has no stage runs yet")
    return runs


def runs_frame(runs: list) -> pd.DataFrame:
    """mlflow Runs as stage_runs' frame holds them (run_id, `tags.*`, `metrics.*`, `params.*`), in
    their order: built directly, where mlflow.search_runs' own frame takes longer than the query."""
    rows = [{"run_id": r.info.run_id, **{f"tags.{k}": v for k, v in r.data.tags.items()},
             **{f"metrics.{k}": v for k, v in r.data.metrics.items()},
             **{f"params.{k}": v for k, v in r.data.params.items()}} for r in runs]
    return pd.DataFrame.from_records(rows)


def finished_runs(runs: pd.DataFrame, params_names: list[str]) -> pd.DataFrame:
    """The stage runs of these parameter files that have ended (an outcome other than running)."""
    return runs[runs["tags.params_file"].isin(params_names) & runs["tags.outcome"].notna()
                & (runs["tags.outcome"] != m.OUTCOME_RUNNING)]


def latest_runs(experiment: str, params_names: list[str], gpu: str | None,
                current: Mapping[str, str] | None = None, runs: pd.DataFrame | None = None,
                same_code: SameCode | None = None) -> tuple[pd.DataFrame, str]:
    """Per (stage, parameter file) on one GPU (`gpu`, or the newest run's): the newest run that ended
    on its own. With `current` (stage -> its current source hash, source_state), a run of the
    stage's current source (or of the same code, `same_code`: same_code.yaml) before any stale one,
    and the frame's `source` column says which. `runs`: stage_runs(experiment) already read (one
    search for several GPUs)."""
    runs = finished_runs(stage_runs(experiment) if runs is None else runs, params_names)
    gpus = runs.get("tags.gpu", pd.Series(NO_GPU, index=runs.index)).fillna(NO_GPU)
    runs = runs[gpus != NO_GPU]
    require_gpu_runs(list(runs["tags.gpu"].unique()), int((gpus == NO_GPU).sum()), params_names, gpu)
    gpu = gpu or runs["tags.gpu"].iloc[0]
    runs = runs[runs["tags.gpu"] == gpu]
    # A run stopped from outside (Ctrl-C, a batch's time limit) says nothing of its stage: the newest
    # run that ended on its own stands for the stage, a killed one only where no other did.
    # A stale run stands for the stage only where it has no run of its current source.
    rank = (runs["tags.outcome"] == m.OUTCOME_KILLED).astype(int)
    if current is not None:
        runs = runs.assign(**{SOURCE_COLUMN: source_states(runs, current, same_code)})
        rank += 2 * (~runs[SOURCE_COLUMN].map(is_current)).astype(int)
    runs = runs.assign(_rank=rank).sort_values("_rank", kind="stable").drop(columns="_rank")
    latest = runs.drop_duplicates(subset=["tags.stage", "tags.params_file"], keep="first")
    return latest, gpu


def _metric(row: pd.Series, key: str):
    value = row.get(f"metrics.{key}")
    return None if value is None or pd.isna(value) else float(value)


def stage_order(family: Family) -> dict[str, int]:
    """Each stage's place in the ladder (stages.yaml's order)."""
    return {s: i for i, s in enumerate(family_registry(family.name).stages)}


def _timing_order(run: pd.Series) -> str:
    """How the run's contenders were sampled: its `timing_order` param, or one block each (runs before it)."""
    order = run.get("params.timing_order")
    return order if isinstance(order, str) and order else "blocks"


def outcome_cell(run: pd.Series) -> str:
    """The run's outcome; an `error` also says whose failure it was (judge.error_cause) and why."""
    outcome = run.get(f"tags.{m.TAG_OUTCOME}")
    if outcome != m.OUTCOME_ERROR:
        return outcome
    reason = run.get(f"tags.{m.TAG_OUTCOME_REASON}")
    reason = reason if isinstance(reason, str) else ""
    cause, shown = error_cause(reason), short_reason(reason)
    if cause:
        return f"{outcome}: {cause} ({shown})"
    return f"{outcome} ({shown})" if shown else outcome


def short_reason(reason: str) -> str:
    """A reason as one table cell: its first line, numbers in fixed notation, no `|` (it would
    end the cell), cut at REASON_CHARS."""
    line = fixed_numbers(reason.strip().splitlines()[0] if reason.strip() else "").replace("|", "/")
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"


def timed_contenders(runs: pd.DataFrame, family: Family) -> list[str]:
    """The library contenders the runs hold a per-problem speedup over: the family's, in its order,
    then any other (an FP8 stage's own contenders, Family.kind_contenders)."""
    prefix = f"metrics.{m.speedup('').name}"
    found = {c.removeprefix(prefix).split("/")[0] for c in runs.columns if c.startswith(prefix) and "/" in c}
    other_modes = tuple(f"_{mode}" for mode in TIMING_MODES)  # speedup_vs_flash_hot/...: flash, in hot mode
    others = sorted(c for c in found - {m.PARENT, m.BEST_CONTENDER, *family.contenders} if not c.endswith(other_modes))
    return [*family.contenders, *others]


def ladder_table(runs: pd.DataFrame, params_name: str, mission_tag: str, family: Family) -> pd.DataFrame:
    rows = []
    for _, r in runs[runs["tags.params_file"] == params_name].iterrows():
        row = {
            "stage": r["tags.stage"],
            "outcome": outcome_cell(r),
            "source": r.get(SOURCE_COLUMN),  # current, current by same code, or stale with its commit (latest_runs)
            "mission p50 (µs)": _metric(r, m.MISSION_P50_US.key()),
            "vs parent (geomean)": _metric(r, m.speedup_geomean(m.PARENT).key()),
        }
        for contender in family.contenders:
            row[f"vs {contender} @mission"] = _metric(r, m.speedup(contender).key(mission_tag))
        row.update({
            "max regs": _metric(r, m.MAX_REGISTERS.key()),
            "max smem (B)": _metric(r, m.MAX_SHARED_MEMORY.key()),
            "spills (B)": _metric(r, m.TOTAL_SPILLS.key()),
            "checks failed": _metric(r, m.CHECKS_FAILED.key()),
            "sanitizer": r.get(f"tags.{m.TAG_SANITIZE}"),
            "protocol": r.get(f"tags.{m.TAG_PROTOCOL}"),
            "timing": _timing_order(r),
            "tensor pipe @mission (ncu %)": _metric(r, m.NCU_TENSOR_UTIL.key(mission_tag)),
        })
        rows.append(row)
    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame["order"] = frame["stage"].map(stage_order(family))
        frame = frame.sort_values("order").drop(columns="order").dropna(axis=1, how="all")
    return frame


def distribution_table(runs: pd.DataFrame, params_name: str, family: Family) -> pd.DataFrame:
    """One row per stage: the worst error / budget over the checks of each named input distribution
    (columns in the family's order); a distribution no run of the file was checked on is left out."""
    rows = [{"stage": r["tags.stage"],
             **{name: _metric(r, m.CHECK_WORST_RATIO.key(name)) for name in family.distributions}}
            for _, r in runs[runs["tags.params_file"] == params_name].iterrows()]
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame = frame.dropna(axis=1, how="all")
    if list(frame.columns) == ["stage"]:  # runs from before distributions had names
        return pd.DataFrame()
    frame["order"] = frame["stage"].map(stage_order(family))
    return frame.sort_values("order").drop(columns="order")


def per_shape_table(runs: pd.DataFrame, params_name: str, family: Family, primary_mode: str = "cold",
                    rate_mode: str | None = None) -> pd.DataFrame:
    """One row per (stage, problem): p50 and ratios in the primary mode, and the throughput
    (TFLOP/s or GB/s) in `rate_mode` (throughput mode where it was timed: the cold figure at a
    small problem is mostly the launch-and-event floor)."""
    rate_mode = rate_mode or primary_mode
    rate = m.TFLOPS if family.throughput_unit == "TFLOP/s" else m.GBPS
    rows = []
    prefix = f"metrics.{m.P50_US.name}/"
    contenders = timed_contenders(runs, family)
    for _, r in runs[runs["tags.params_file"] == params_name].iterrows():
        for col in r.index:
            if col.startswith(prefix) and not pd.isna(r[col]):
                shape = col.removeprefix(prefix)
                row = {"stage": r["tags.stage"], "shape": shape, f"p50 ({primary_mode}, µs)": float(r[col]),
                       f"{family.throughput_unit} ({rate_mode})": _metric(r, rate.timed(shape, rate_mode, primary_mode)),
                       # the stage's SM clock meanwhile: power-capped GPUs run contenders at different clocks
                       f"SM MHz ({rate_mode})": _metric(r, m.SM_CLOCK_MHZ.timed(shape, rate_mode, primary_mode))}
                for contender in (m.PARENT, *contenders):
                    row[f"vs {contender}"] = _metric(r, m.speedup(contender).key(shape))
                rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame = frame.assign(_stage=frame["stage"].map(stage_order(family)), _shape=frame["shape"])
    frame = frame.sort_values(["_stage", "_shape"]).drop(columns=["_stage", "_shape"])
    return frame.dropna(axis=1, how="all")


def roofline_points(runs: pd.DataFrame, params_name: str) -> tuple[pd.DataFrame, tuple[float | None, float | None]]:
    """Per (stage, profiled problem): achieved TFLOP/s and FLOP per DRAM byte under ncu; and the
    device's peaks (TFLOP/s, GB/s) as the runs recorded them."""
    rows = []
    prefix = f"metrics.{m.NCU_TFLOPS.name}/"
    chosen = runs[runs["tags.params_file"] == params_name]
    for _, r in chosen.iterrows():
        for col in r.index:
            if col.startswith(prefix) and not pd.isna(r[col]):
                problem = col.removeprefix(prefix)
                rows.append({"stage": r["tags.stage"], "problem": problem, "tflops": float(r[col]),
                             "flop_per_byte": _metric(r, m.NCU_ARITHMETIC_INTENSITY.key(problem))})
    peaks = []
    for metric in (m.NCU_PEAK_TFLOPS, m.NCU_PEAK_DRAM_GBPS):
        column = f"metrics.{metric.key()}"
        peaks.append(float(chosen[column].max()) if column in chosen and chosen[column].notna().any() else None)
    return pd.DataFrame(rows, columns=["stage", "problem", "tflops", "flop_per_byte"]), (peaks[0], peaks[1])


def rate_column(shapes: pd.DataFrame, family: Family) -> str:
    return next(c for c in shapes.columns if c.startswith(family.throughput_unit))
