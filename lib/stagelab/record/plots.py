"""Plots people would rather look at than tables."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def latency_plot(timing: pd.DataFrame, path: Path | None = None, *, mode: str | None = None, title: str = ""):
    """Bars of p50 latency per shape, one hue per contender (stage, parent, SDPA backends)."""
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    import seaborn as sns

    data = timing if mode is None else timing[timing["mode"] == mode]
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * data["shape"].nunique() + 3), 4.5))
    sns.barplot(data=data, x="shape", y="p50_us", hue="contender", ax=ax)
    ax.set_yscale("log")
    ax.set_ylabel("p50 latency (us, log scale)")
    ax.set_xlabel("shape  batch x heads x seq_len x head_dim")
    ax.set_title(title or f"latency per shape ({mode or 'all modes'})")
    ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


def error_plot(checks: pd.DataFrame, path: Path | None = None, title: str = ""):
    """Error over budget per check: below 1.0 passes. Coloured by input distribution where there
    are several, else by dtype."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    data = checks.assign(label=checks["shape"] + " " + checks["dtype"])
    hue = "distribution" if "distribution" in data and data["distribution"].nunique() > 1 else "dtype"
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * data["label"].nunique() + 3), 4))
    sns.stripplot(data=data, x="label", y="err_budget_ratio", hue=hue, ax=ax, size=7)
    ax.axhline(1.0, color="red", linestyle="--", linewidth=1)
    ax.set_ylabel("max|out-ref| / budget (pass < 1)")
    ax.set_xlabel("")
    ax.set_title(title or "error against the FlashAttention-3 budget")
    ax.tick_params(axis="x", rotation=45)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


def search_plot(tune: pd.DataFrame, path: Path | None = None, *, score: str, title: str = ""):
    """A tune's search: each timed configuration's score (in search-space order), elites marked.
    `tune` has columns configuration, `score` and elite (its rank, or empty)."""
    import matplotlib

    if path is not None:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    timed = tune[tune[score].notna()].reset_index(drop=True)
    elites = timed[timed["elite"].notna()]
    fig, ax = plt.subplots(figsize=(max(6, 0.25 * len(timed) + 3), 4.5))
    ax.plot(timed.index, timed[score], "o", color="tab:blue", label="correct configuration")
    ax.plot(elites.index, elites[score], "*", color="tab:red", markersize=16, label="elite")
    for index, row in elites.iterrows():
        ax.annotate(f"#{int(row['elite'])} {row['configuration']}", (index, row[score]), fontsize=7,
                    xytext=(4, 6), textcoords="offset points")
    ax.set_xticks(timed.index, timed["configuration"], rotation=90, fontsize=6)
    ax.set_ylabel("geometric-mean p50 (us)")
    ax.set_title(title or "tune: time against configuration")
    ax.legend()
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


# The x range of a roofline, in FLOP per DRAM byte: from memory-bound softmax to long attention.
ROOFLINE_INTENSITY_RANGE = (0.1, 1e4)
ROOFLINE_SAMPLES = 200


def roofline_plot(points: pd.DataFrame, peak_tflops: float | None, peak_dram_gbps: float | None,
                  path: Path | None = None, title: str = ""):
    """Achieved TFLOP/s against FLOP per DRAM byte (Nsight Compute), one hue per stage, one marker per
    problem, under the device's roofs: DRAM bandwidth x intensity, capped by the tensor peak."""
    import matplotlib.pyplot as plt
    import numpy as np
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(8, 5.5))
    low, high = ROOFLINE_INTENSITY_RANGE
    intensity = np.logspace(np.log10(low), np.log10(high), ROOFLINE_SAMPLES)
    if peak_dram_gbps:
        roof = intensity * peak_dram_gbps / 1e3  # GB/s x FLOP/byte = GFLOP/s; /1e3 for TFLOP/s
        if peak_tflops:
            roof = np.minimum(roof, peak_tflops)
        ax.plot(intensity, roof, color="black", linewidth=1.5, label="roof (device peaks)")
    elif peak_tflops:
        ax.axhline(peak_tflops, color="black", linewidth=1.5, label="tensor peak")
    sns.scatterplot(data=points, x="flop_per_byte", y="tflops", hue="stage", style="problem", s=80, ax=ax)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("FLOP per DRAM byte (ncu)")
    ax.set_ylabel("achieved TFLOP/s (problem FLOPs / ncu duration)")
    ax.set_title(title or "roofline")
    ax.legend(fontsize="small", loc="lower right")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
