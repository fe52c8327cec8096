"""Results pages regenerated from the MLflow store: docs/results/<family>/<gpu>.md and its plot.

Takes, for each stage, the newest finished run of each named parameter file on
one GPU, and writes what the record says. Nothing is typed in: rerun
`stagelab report` after a new `stagelab run` and the page follows the store.
Every metric key comes from the schema (metrics.py); the contenders and the
stage order come from the family.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
from mlflow.utils.validation import MAX_EXPERIMENT_TAG_VAL_LENGTH

from . import metrics as m
from . import tracking
from .envinfo import gpu_label
from .family import Family, load_family
from .paths import repo_root
from .registry import family_registry


def latest_runs(experiment: str, params_names: list[str], gpu: str | None) -> tuple[pd.DataFrame, str]:
    import mlflow

    mlflow.set_tracking_uri(tracking.tracking_uri())
    found = tracking.client().get_experiment_by_name(experiment)
    if found is None:
        raise FileNotFoundError(f"no experiment {experiment!r} in {tracking.tracking_uri()}: run `stagelab run` first")
    runs = mlflow.search_runs([found.experiment_id], order_by=["attributes.start_time DESC"])
    if runs.empty:
        raise FileNotFoundError(f"experiment {experiment!r} has no runs yet")
    runs = runs[runs["tags.params_file"].isin(params_names) & runs["tags.outcome"].notna()
                & (runs["tags.outcome"] != "running")]
    runs = runs[runs.get("tags.gpu", pd.Series("none", index=runs.index)).fillna("none") != "none"]
    if gpu is None:
        if runs.empty:
            raise FileNotFoundError("no finished GPU runs for those parameter files")
        gpu = runs["tags.gpu"].iloc[0]
    runs = runs[runs["tags.gpu"] == gpu]
    # A run stopped from outside (Ctrl-C, a batch's time limit) says nothing of its stage: the newest
    # run that ended on its own stands for the stage, a killed one only where no other did.
    stopped = runs["tags.outcome"] == m.OUTCOME_KILLED
    runs = runs.assign(_stopped=stopped).sort_values("_stopped", kind="stable").drop(columns="_stopped")
    latest = runs.drop_duplicates(subset=["tags.stage", "tags.params_file"], keep="first")
    return latest, gpu


def _metric(row: pd.Series, key: str):
    value = row.get(f"metrics.{key}")
    return None if value is None or pd.isna(value) else float(value)


def _stage_order(family: Family) -> dict[str, int]:
    return {s: i for i, s in enumerate(family_registry(family.name).stages)}


def ladder_table(runs: pd.DataFrame, params_name: str, mission_tag: str, family: Family) -> pd.DataFrame:
    rows = []
    for _, r in runs[runs["tags.params_file"] == params_name].iterrows():
        row = {
            "stage": r["tags.stage"],
            "outcome": r["tags.outcome"],
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
            "tensor pipe @mission (ncu %)": _metric(r, m.NCU_TENSOR_UTIL.key(mission_tag)),
        })
        rows.append(row)
    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame["order"] = frame["stage"].map(_stage_order(family))
        frame = frame.sort_values("order").drop(columns="order").dropna(axis=1, how="all")
    return frame


def per_shape_table(runs: pd.DataFrame, params_name: str, family: Family, primary_mode: str = "cold",
                    rate_mode: str | None = None) -> pd.DataFrame:
    """One row per (stage, problem): p50 and ratios in the primary mode, and the throughput
    (TFLOP/s or GB/s) in `rate_mode` (throughput mode where it was timed: the cold figure at a
    small problem is mostly the launch-and-event floor)."""
    rate_mode = rate_mode or primary_mode
    rate = m.TFLOPS if family.throughput_unit == "TFLOP/s" else m.GBPS
    rows = []
    prefix = f"metrics.{m.P50_US.name}/"
    for _, r in runs[runs["tags.params_file"] == params_name].iterrows():
        for col in r.index:
            if col.startswith(prefix) and not pd.isna(r[col]):
                shape = col.removeprefix(prefix)
                row = {"stage": r["tags.stage"], "shape": shape, f"p50 ({primary_mode}, µs)": float(r[col]),
                       f"{family.throughput_unit} ({rate_mode})": _metric(r, rate.timed(shape, rate_mode, primary_mode)),
                       # the stage's SM clock meanwhile: power-capped GPUs run contenders at different clocks
                       f"SM MHz ({rate_mode})": _metric(r, m.SM_CLOCK_MHZ.timed(shape, rate_mode, primary_mode))}
                for contender in (m.PARENT, *family.contenders):
                    row[f"vs {contender}"] = _metric(r, m.speedup(contender).key(shape))
                rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame = frame.assign(_stage=frame["stage"].map(_stage_order(family)), _shape=frame["shape"])
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


def readable(frame: pd.DataFrame) -> str:
    """Markdown for people: a dash where a value does not apply, three significant digits,
    whole numbers for counts and byte sizes in KiB."""
    shown = frame.copy()
    for column in shown.columns:
        if "(B)" in column:
            shown[column] = shown[column] / 1024
            shown = shown.rename(columns={column: column.replace("(B)", "(KiB)")})
    def cell(value):
        if value is None or (isinstance(value, float) and pd.isna(value)):
            return "–"
        if isinstance(value, float):
            return f"{value:.0f}" if value.is_integer() and abs(value) < 1e6 else f"{value:.3g}"
        return str(value)
    return shown.map(cell).to_markdown(index=False, disable_numparse=True)


def _with_contender_rows(shapes: pd.DataFrame, family: Family, value: str) -> pd.DataFrame:
    """Add each library contender's throughput per problem: the stage's divided by its speedup
    over the contender, the median over the stage runs that timed it beside themselves."""
    rows = []
    for contender in family.contenders:
        column = f"vs {contender}"
        if column not in shapes:
            continue
        derived = shapes.assign(derived=shapes[value] / shapes[column]).dropna(subset=["derived"])
        for shape, group in derived.groupby("shape", sort=False):
            rows.append({"stage": family.contender_label(contender), "shape": shape, value: group["derived"].median()})
    return pd.concat([shapes[["stage", "shape", value]], pd.DataFrame(rows)], ignore_index=True)


def _plot(frames: dict[str, pd.DataFrame], path: Path, gpu: str, family: Family) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(len(frames), 1, figsize=(16, 4.8 * len(frames)), squeeze=False)
    for ax, (name, shapes) in zip(axes[:, 0], frames.items()):
        value = rate_column(shapes, family)
        data = _with_contender_rows(shapes, family, value)
        sns.barplot(data=data, x="shape", y=value, hue="stage", ax=ax, palette="tab10")
        ax.set_title(f"{family.name} / {name}: {value} per problem on {gpu} (contenders timed in the same runs)")
        ax.tick_params(axis="x", rotation=20)
        ax.legend(fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _page_header(runs: pd.DataFrame, params_names: list[str], gpu: str, family: Family) -> list[str]:
    first = runs.iloc[0]
    return [
        f"# {family.name} results on {gpu}",
        "",
        f"Generated by `stagelab report --family {family.name} --params {' '.join(params_names)}` on "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC from the project's MLflow store "
        "(`stagelab ui` opens it); do not edit by hand.",
        "",
        f"GPU `{gpu}`, driver {first.get('tags.driver', '?')}, SM clock {first.get('tags.sm_clock_mhz', '?')} MHz "
        f"before and {first.get('tags.after_timing_sm_clock_mhz', '?')} MHz right after timing "
        f"(max {first.get('tags.sm_clock_max_mhz', '?')}), "
        f"torch {first.get('tags.torch', '?')} (CUDA {first.get('tags.torch_cuda', '?')}), "
        f"cuDNN {first.get('tags.cudnn', '?')}, {first.get('tags.nvcc', '?')}.",
        "Speedups are ratios of p50 latencies measured side by side in one run "
        "(>1: the stage is faster), in each parameter file's first timing mode; – : not applicable "
        "(no parent, or a contender that could not run the problem).",
        "",
    ]


def _params_section(runs: pd.DataFrame, name: str, family: Family) -> tuple[list[str], pd.DataFrame]:
    from .params import load_params

    subset = runs[runs["tags.params_file"] == name]
    if subset.empty:
        return [f"## {name}", "", "_no finished runs on this GPU_", ""], pd.DataFrame()
    params_file = repo_root() / "params" / f"{name}.yaml"
    params = load_params(params_file) if params_file.is_file() else None
    mission = params.mission.tag if params else ""
    primary = params.timing.primary_mode if params else "cold"
    rate_mode = "throughput" if params and "throughput" in params.timing.modes else primary
    commits = sorted(set(subset["tags.git_commit"].fillna("?").str[:10]))
    lines = [f"## {name}", "", f"Runs from commit(s) {', '.join(commits)}; mission problem `{mission}`; "
             f"p50 and ratios in {primary} mode.", "", readable(ladder_table(runs, name, mission, family)), ""]
    shapes = per_shape_table(runs, name, family, primary, rate_mode)
    if not shapes.empty:
        lines += ["Per problem:", "", readable(shapes), ""]
    return lines, shapes


def write_report(params_names: list[str], *, family: str = "sdpa", out_dir: str | Path | None = None,
                 experiment: str | None = None, gpu: str | None = None) -> Path:
    from .journal import write_journals

    fam = load_family(family)
    out = Path(out_dir) if out_dir else repo_root() / "docs" / "results" / fam.name
    journals = write_journals(fam.name, out, experiment)  # the trials, whether or not stage runs exist yet
    runs, gpu = latest_runs(experiment or fam.experiment, params_names, gpu)
    label = gpu_label({"gpu": gpu})
    out.mkdir(parents=True, exist_ok=True)
    lines = _page_header(runs, params_names, gpu, fam)
    if journals:
        lines += ["Trial journals (`stagelab journal STAGE`): "
                  + ", ".join(f"[docs/results/{family}/{p.name}]({p.name})" for p in journals), ""]
    plot_frames: dict[str, pd.DataFrame] = {}
    for name in params_names:
        section, shapes = _params_section(runs, name, fam)
        lines += section
        if not shapes.empty:
            plot_frames[name] = shapes
    if plot_frames:
        plot_path = out / f"{label}.png"
        _plot(plot_frames, plot_path, gpu, fam)
        lines += [f"![{fam.throughput_unit} per problem]({plot_path.name})", ""]
    # The runs behind the page, flat, so the numbers stay traceable without the store itself.
    keep = ["run_id", "start_time", "status"] + sorted(c for c in runs.columns if c.startswith(("tags.", "metrics.", "params."))
                                                     and not c.startswith("tags.mlflow.note"))
    runs[keep].dropna(axis=1, how="all").to_csv(out / f"{label}.runs.csv", index=False)
    lines += [f"The {len(runs)} runs behind this page, with every metric and tag: [{label}.runs.csv]({label}.runs.csv).", ""]
    page = out / f"{label}.md"
    page.write_text("\n".join(lines))
    _describe_experiment(experiment or fam.experiment, lines, f"docs/results/{family}/{page.name}")
    return page


def _describe_experiment(experiment: str, lines: list[str], page_name: str) -> None:
    """The page (less its plot and file links) as the experiment's description, so the MLflow
    experiment page itself compares the stages."""
    found = tracking.client().get_experiment_by_name(experiment)
    text = experiment_note([line for line in lines if not line.startswith(("![", "The "))], page_name)
    tracking.client().set_experiment_tag(found.experiment_id, "mlflow.note.content", text)


def experiment_note(lines: list[str], page_name: str, limit: int = MAX_EXPERIMENT_TAG_VAL_LENGTH) -> str:
    """The lines as one note within MLflow's limit on an experiment tag's value: whole lines up
    to the limit, then a pointer to the full page (a page with every stage on every parameter
    file and GPU outgrows it)."""
    text = "\n".join(lines)
    if len(text) <= limit:
        return text
    pointer = f"\n\n_(cut at MLflow's {limit}-character limit on a description: the whole page is {page_name})_"
    kept = text[: limit - len(pointer)].rsplit("\n", 1)[0]
    return kept + pointer
