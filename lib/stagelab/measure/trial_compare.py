"""A trial read against the stage's default: resources, SASS opcode counts, the headline numbers.
Tables for the trial's run (artifacts) and the one line the journal shows."""

from __future__ import annotations

import math

import pandas as pd

from ..core import metrics
from ..core.build import BuildResult
from ..core.resources import parse_mangled
from ..core.sass_loops import compare_listings
from .results import ResourceReport, TimingReport

RESOURCE_COLUMNS = ("registers", "total_shared_memory_bytes", "stack_frame_bytes", "spill_store_bytes",
                    "spill_load_bytes", "barriers")


def resources_vs_default(trial: ResourceReport, default: ResourceReport) -> pd.DataFrame:
    """Per kernel instance and resource: the trial's value, the default's, the change."""
    mine = {r.tag: r.as_row() for r in trial.kernels}
    base = {r.tag: r.as_row() for r in default.kernels}
    rows = []
    for tag in sorted(set(mine) | set(base)):
        for column in RESOURCE_COLUMNS:
            t, d = mine.get(tag, {}).get(column), base.get(tag, {}).get(column)
            rows.append({"kernel": tag, "resource": column, "trial": t, "default": d,
                         "change": t - d if t is not None and d is not None else None})
    return pd.DataFrame(rows)


def sass_vs_default(trial: BuildResult, default: BuildResult) -> pd.DataFrame:
    """Every SASS opcode whose count differs between trial and default, per kernel instance and
    architecture, and each instance's total instruction count."""
    mine, base = trial.sass_opcodes(), default.sass_opcodes()
    rows = []
    for key in sorted(set(mine) | set(base)):
        t, d = mine.get(key, {}), base.get(key, {})
        name, args = parse_mangled(key[0])
        kernel = ".".join([name, *args, key[1]])  # the resource tables' tag
        rows.append({"kernel": kernel, "opcode": "(all)", "trial": sum(t.values()), "default": sum(d.values()),
                     "change": sum(t.values()) - sum(d.values())})
        rows += [{"kernel": kernel, "opcode": op, "trial": t.get(op, 0), "default": d.get(op, 0),
                  "change": t.get(op, 0) - d.get(op, 0)}
                 for op in sorted(set(t) | set(d)) if t.get(op, 0) != d.get(op, 0)]
    return pd.DataFrame(rows)


def main_loops_vs_default(trial: BuildResult, default: BuildResult) -> pd.DataFrame:
    """Per kernel instance, its main loop (stagelab.core.sass_loops) in the trial and the default:
    instructions, R2UR, uniform-datapath instructions and the opcode sequence's similarity. Seconds
    for s17's 104 kernels: run.trial reads it once per trial (Measured.main_loops)."""
    rows = []
    for row in compare_listings(default.sass_listing(), trial.sass_listing()):
        name, args = parse_mangled(row.kernel)
        rows.append({"kernel": ".".join([name, *args]), "similarity": row.trial.similarity,
                     **{f"{field}_{side}": getattr(summary, field) for field in ("instructions", "r2ur", "uniform")
                        for side, summary in (("trial", row.trial), ("default", row.reference))}})
    return pd.DataFrame(rows)


def main_loop_metrics(table: pd.DataFrame) -> dict[str, float]:
    """The worst of the main loops' table: the lowest similarity, the most R2UR added."""
    if table.empty:
        return {}
    return {metrics.MAIN_LOOP_SIMILARITY_MIN.key(): float(table["similarity"].min()),
            metrics.MAIN_LOOP_R2UR_ADDED.key(): float((table["r2ur_trial"] - table["r2ur_default"]).max())}


def main_loop_summary(values: dict[str, float]) -> str:
    """The key numbers' words for main_loop_metrics: empty where no kernel has a main loop."""
    similarity = values.get(metrics.MAIN_LOOP_SIMILARITY_MIN.key())
    if similarity is None:
        return ""
    added = values[metrics.MAIN_LOOP_R2UR_ADDED.key()]
    if similarity == 1.0 and added <= 0:
        return "main loops as the default's"
    return f"main loops changed (similarity >= {similarity:.2f}" + (f", +{added:.0f} R2UR)" if added > 0 else ")")


def default_timing_metrics(report: TimingReport) -> dict[str, float]:
    """The default's p50, TFLOP/s and clocks per problem, as `default/<key>` on the trial's run."""
    out: dict[str, float] = {}
    primary = report.primary_mode
    for stats in report.stats:
        if stats.contender != metrics.TRIAL_DEFAULT_LABEL:
            continue
        row = stats.as_row()
        for stat in (metrics.P50_US, metrics.TFLOPS, metrics.GBPS, *metrics.CLOCK_STATS):
            value = row.get(stat.name)
            if value is not None and math.isfinite(value):
                out[metrics.of_default(stat.timed(stats.shape, stats.mode, primary))] = value
    return out


def _row(report: TimingReport, label: str, shape: str):
    for stats in report.stats:
        if stats.contender == label and stats.shape == shape and stats.mode == report.primary_mode:
            return stats
    return None


def _clock(stats) -> str:
    return f"{stats.sm_clock_mhz:.0f}" if stats is not None and math.isfinite(stats.sm_clock_mhz) else "?"


def timing_summary(report: TimingReport, mission: str) -> list[str]:
    """The geometric-mean ratios, and the mission problem's p50 of trial and default with their clocks."""
    parts = []
    vs_default = report.speedup_geomean(metrics.TRIAL_DEFAULT_LABEL)
    if vs_default is not None and math.isfinite(vs_default):
        parts.append(f"{vs_default:.3f}x default (geomean p50, {report.primary_mode})")
    best = report.speedup_geomean(metrics.BEST_CONTENDER)
    if best is not None and math.isfinite(best):
        parts.append(f"{best:.2f}x best library")
    mine, base = _row(report, report.stage_label, mission), _row(report, metrics.TRIAL_DEFAULT_LABEL, mission)
    if mine is not None and base is not None:
        parts.append(f"{mission} {mine.p50_us:.2f} vs {base.p50_us:.2f} us at {_clock(mine)}/{_clock(base)} MHz")
    return parts


def key_numbers(trial, default, mission: str) -> str:
    """One line: timing ratios with clocks, checks, registers and spills against the default."""
    m = trial.measured
    parts = timing_summary(m.timing, mission) if m.timing else []
    for prefix, checks in (("", m.checks), ("default ", default.checks)):
        if checks is not None:
            parts.append(prefix + checks.counts())
    if m.resources and m.resources.kernels and default.resources and default.resources.kernels:
        regs = max(r.registers for r in m.resources.kernels)
        spills = sum(r.spills for r in m.resources.kernels)
        parts.append(f"max registers {regs} vs {max(r.registers for r in default.resources.kernels)}"
                     + (f", {spills} B spilled" if spills else ""))
    if m.main_loops is not None:
        loops = main_loop_summary(main_loop_metrics(m.main_loops))
        if loops:
            parts.append(loops)
    return "; ".join(parts)
