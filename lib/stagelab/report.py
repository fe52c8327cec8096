"""Results pages regenerated from the MLflow store: docs/results/<gpu>.md and its plot.

Takes, for each stage, the newest finished run of each named parameter file on
one GPU, and writes what the record says. Nothing is typed in: rerun
`stagelab report` after a new `stagelab run` and the page follows the store.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from . import tracking
from .envinfo import gpu_label
from .paths import repo_root
from .registry import load_registry

BACKENDS = ("flash", "efficient", "cudnn", "math")


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
    latest = runs.drop_duplicates(subset=["tags.stage", "tags.params_file"], keep="first")
    return latest, gpu


def _metric(row: pd.Series, key: str):
    value = row.get(f"metrics.{key}")
    return None if value is None or pd.isna(value) else float(value)


def ladder_table(runs: pd.DataFrame, params_name: str, mission_tag: str) -> pd.DataFrame:
    order = list(load_registry().stages)
    rows = []
    for _, r in runs[runs["tags.params_file"] == params_name].iterrows():
        row = {
            "stage": r["tags.stage"],
            "outcome": r["tags.outcome"],
            "mission p50 (us)": _metric(r, "mission_p50_us"),
            "vs parent (geomean)": _metric(r, "speedup_vs_parent_geomean"),
        }
        for backend in BACKENDS:
            row[f"vs {backend} @mission"] = _metric(r, f"speedup_vs_{backend}/{mission_tag}")
        row.update({
            "max regs": _metric(r, "max_registers"),
            "max smem (B)": _metric(r, "max_shared_memory_bytes"),
            "spills (B)": _metric(r, "total_spill_bytes"),
            "checks failed": _metric(r, "checks_failed"),
        })
        rows.append(row)
    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame["order"] = frame["stage"].map({s: i for i, s in enumerate(order)})
        frame = frame.sort_values("order").drop(columns="order").dropna(axis=1, how="all")
    return frame


def per_shape_table(runs: pd.DataFrame, params_name: str) -> pd.DataFrame:
    rows = []
    for _, r in runs[runs["tags.params_file"] == params_name].iterrows():
        for col in r.index:
            if col.startswith("metrics.tflops/") and not pd.isna(r[col]):
                shape = col.split("/", 1)[1]
                row = {"stage": r["tags.stage"], "shape": shape, "p50 (us)": _metric(r, f"p50_us/{shape}"),
                       "TFLOP/s": float(r[col])}
                for backend in ("parent", *BACKENDS):
                    row[f"vs {backend}"] = _metric(r, f"speedup_vs_{backend}/{shape}")
                rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    order = {s: i for i, s in enumerate(load_registry().stages)}
    frame = frame.assign(_stage=frame["stage"].map(order), _causal=frame["shape"].str.endswith("_causal"),
                         _size=frame["shape"].str.replace("_causal", "").map(
                             lambda t: tuple(int(x) for x in t.split("x"))))
    frame = frame.sort_values(["_stage", "_size", "_causal"]).drop(columns=["_stage", "_causal", "_size"])
    return frame.dropna(axis=1, how="all")


def _with_sdpa_rows(shapes: pd.DataFrame) -> pd.DataFrame:
    """Add each SDPA backend's TFLOP/s per shape: stage TFLOP/s / speedup over it, the median
    over the stage runs that timed it (each run times the backends beside its stage)."""
    rows = []
    for backend in ("flash", "cudnn", "efficient"):
        column = f"vs {backend}"
        if column not in shapes:
            continue
        derived = shapes.assign(backend_tflops=shapes["TFLOP/s"] / shapes[column]).dropna(subset=["backend_tflops"])
        for shape, group in derived.groupby("shape", sort=False):
            rows.append({"stage": f"sdpa_{backend}", "shape": shape, "TFLOP/s": group["backend_tflops"].median()})
    return pd.concat([shapes[["stage", "shape", "TFLOP/s"]], pd.DataFrame(rows)], ignore_index=True)


def _plot(frames: dict[str, pd.DataFrame], path: Path, gpu: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(len(frames), 1, figsize=(16, 4.8 * len(frames)), squeeze=False)
    for ax, (name, shapes) in zip(axes[:, 0], frames.items()):
        data = _with_sdpa_rows(shapes)
        sns.barplot(data=data, x="shape", y="TFLOP/s", hue="stage", ax=ax, palette="tab10")
        ax.set_title(f"{name}: TFLOP/s per shape on {gpu} (SDPA backends timed in the same runs)")
        ax.tick_params(axis="x", rotation=20)
        ax.legend(fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(params_names: list[str], *, out_dir: str | Path | None = None,
                 experiment: str = tracking.DEFAULT_EXPERIMENT, gpu: str | None = None) -> Path:
    from .params import load_params

    runs, gpu = latest_runs(experiment, params_names, gpu)
    label = gpu_label({"gpu": gpu})
    out = Path(out_dir) if out_dir else repo_root() / "docs" / "results"
    out.mkdir(parents=True, exist_ok=True)
    first = runs.iloc[0]
    lines = [
        f"# Results on {gpu}",
        "",
        f"Generated by `stagelab report --params {' '.join(params_names)}` on "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC from `{tracking.tracking_uri()}`; do not edit by hand.",
        "",
        f"GPU `{gpu}`, driver {first.get('tags.driver', '?')}, SM clock {first.get('tags.sm_clock_mhz', '?')} MHz "
        f"before and {first.get('tags.after_timing_sm_clock_mhz', '?')} MHz right after timing "
        f"(max {first.get('tags.sm_clock_max_mhz', '?')}), "
        f"torch {first.get('tags.torch', '?')} (CUDA {first.get('tags.torch_cuda', '?')}), "
        f"cuDNN {first.get('tags.cudnn', '?')}, {first.get('tags.nvcc', '?')}.",
        "Speedups are ratios of p50 latencies measured side by side in one run "
        "(>1: the stage is faster). Timing mode: the parameter file's first (cold = L2 flushed).",
        "",
    ]
    plot_frames: dict[str, pd.DataFrame] = {}
    for name in params_names:
        subset = runs[runs["tags.params_file"] == name]
        if subset.empty:
            lines += [f"## {name}", "", "_no finished runs on this GPU_", ""]
            continue
        params_file = repo_root() / "params" / f"{name}.yaml"
        mission = load_params(params_file).mission.tag if params_file.is_file() else ""
        commits = sorted(set(subset["tags.git_commit"].fillna("?").str[:10]))
        lines += [f"## {name}", "", f"Runs from commit(s) {', '.join(commits)}; mission shape `{mission}`.", "",
                  ladder_table(runs, name, mission).to_markdown(index=False, floatfmt=".3g"), ""]
        shapes = per_shape_table(runs, name)
        if not shapes.empty:
            lines += ["Per shape (stage p50 and ratios):", "", shapes.to_markdown(index=False, floatfmt=".3g"), ""]
            plot_frames[name] = shapes
    if plot_frames:
        plot_path = out / f"{label}.png"
        _plot(plot_frames, plot_path, gpu)
        lines += [f"![TFLOP/s per shape]({plot_path.name})", ""]
    # The runs behind the page, flat, so the numbers stay traceable without the store itself.
    keep = ["run_id", "start_time", "status"] + sorted(c for c in runs.columns if c.startswith(("tags.", "metrics.", "params."))
                                                     and not c.startswith("tags.mlflow.note"))
    runs[keep].dropna(axis=1, how="all").to_csv(out / f"{label}.runs.csv", index=False)
    lines += [f"The {len(runs)} runs behind this page, with every metric and tag: [{label}.runs.csv]({label}.runs.csv).", ""]
    page = out / f"{label}.md"
    page.write_text("\n".join(lines))
    return page
