"""Typed results -> flat {metric key: value} dicts, every key built by the schema (metrics.py)."""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd

from ..core import metrics as m
from ..measure.profile import ProfileReport
from ..measure.results import CheckReport, ResourceReport, TimingReport
from ..measure.sanitize import SanitizeReport


def resource_metrics(report: ResourceReport) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in report.kernels:
        out[m.REGISTERS.key(r.tag)] = r.registers
        out[m.SHARED_MEMORY.key(r.tag)] = r.total_shared_memory_bytes
        out[m.STACK_FRAME.key(r.tag)] = r.stack_frame_bytes
        out[m.SPILL_STORES.key(r.tag)] = r.spill_store_bytes
        out[m.SPILL_LOADS.key(r.tag)] = r.spill_load_bytes
        out[m.BARRIERS.key(r.tag)] = r.barriers
    if report.kernels:
        out[m.MAX_REGISTERS.key()] = max(r.registers for r in report.kernels)
        out[m.MAX_SHARED_MEMORY.key()] = max(r.total_shared_memory_bytes for r in report.kernels)
        out[m.TOTAL_SPILLS.key()] = sum(r.spills for r in report.kernels)
        out[m.MAX_STACK_FRAME.key()] = max(r.stack_frame_bytes for r in report.kernels)
    for row in report.instructions:
        for opcode, count in row.items():
            if opcode != "kernel":
                out[m.INSTRUCTION_COUNT.key(opcode, row["kernel"])] = count
    return out


# What an infinite error / budget ratio (a crashed or non-finite check) is logged as.
INFINITE_RATIO = 1e9


def plan_metrics(report: CheckReport) -> dict[str, float]:
    """How many launch plans the build declares and the checks reached (nothing without plans)."""
    gaps = report.plan_gaps()
    if not report.declared_plans and not gaps:
        return {}
    return {m.LAUNCH_PLANS_DECLARED.key(): gaps.declared, m.LAUNCH_PLANS_REACHED.key(): gaps.reached,
            m.LAUNCH_PLANS_UNDECLARED.key(): len(gaps.undeclared)}


def check_metrics(report: CheckReport) -> dict[str, float]:
    out: dict[str, float] = {m.PROBLEMS_SKIPPED.key(): len(report.skipped)} if report.skipped else {}
    out |= plan_metrics(report)
    if report.chains:
        out[m.CHAINS_TOTAL.key()] = len(report.chains)
        out[m.CHAINS_FAILED.key()] = sum(not c.passed for c in report.chains)
    frame = report.frame()
    if frame.empty:
        return out
    out |= {m.CHECKS_TOTAL.key(): len(frame), m.CHECKS_FAILED.key(): int((~frame["passed"]).sum())}
    worst = frame.groupby(["shape", "dtype"]).agg(max_abs_err=("max_abs_err", "max"),
                                                  err_budget_ratio=("err_budget_ratio", "max"))
    for (shape, dtype), row in worst.iterrows():
        out[m.MAX_ABS_ERR.key(shape, dtype)] = row["max_abs_err"]
        out[m.ERR_BUDGET_RATIO.key(shape, dtype)] = row["err_budget_ratio"]
    # inf (a crashed or non-finite check) is not a number MLflow stores: cap it visibly
    ratios = frame["err_budget_ratio"].replace(float("inf"), INFINITE_RATIO)
    out[m.MAX_ERR_BUDGET_RATIO.key()] = ratios.max()
    for distribution, worst in ratios.groupby(frame["distribution"], sort=False).max().items():
        out[m.CHECK_WORST_RATIO.key(distribution)] = worst
    return out


def _speedup_columns(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if c.startswith("speedup_vs_")]


def timing_metrics(report: TimingReport, mission_tag: str) -> dict[str, float]:
    """The stage's timing keys, then each launch variant's: the same keys of its own timing against the
    parent and the library contenders, under metrics.VARIANT (the floor is the stage's alone)."""
    out = _stage_timing_metrics(report, mission_tag)
    for variant in report.variants():
        mine = _stage_timing_metrics(replace(report.variant_report(variant), floor_us={}), mission_tag)
        out.update({m.VARIANT.key(variant, key): value for key, value in mine.items()})
    return out


def _stage_timing_metrics(report: TimingReport, mission_tag: str) -> dict[str, float]:
    frame = report.frame()
    if frame.empty:
        return {}
    primary = report.primary_mode
    out: dict[str, float] = {}
    mine = frame[frame["contender"] == report.stage_label]
    for _, row in mine.iterrows():
        for stat in m.TIMED_STATS:
            out[stat.timed(row["shape"], row["mode"], primary)] = row[stat.name]
        for stat in m.CLOCK_STATS:  # only where nvidia-smi said something
            if stat.name in row and math.isfinite(row[stat.name]):
                out[stat.timed(row["shape"], row["mode"], primary)] = row[stat.name]
    speedups = report.speedups()
    for _, row in speedups.iterrows():
        for column in _speedup_columns(speedups):
            out[m.Metric(column, "ratio", "").timed(row["shape"], row["mode"], primary)] = row[column]
    mission = mine[(mine["shape"] == mission_tag) & (mine["mode"] == primary)]
    if not mission.empty:
        out[m.MISSION_P50_US.key()] = float(mission["p50_us"].iloc[0])
    for column in _speedup_columns(speedups):
        contender = column.removeprefix("speedup_vs_")
        out[m.speedup_geomean(contender).key()] = report.speedup_geomean(contender)
    for mode, floor in report.floor_us.items():
        out[m.TIMING_FLOOR_US.key(mode)] = floor
    return out


def sweep_metrics(sweep: str, frame: pd.DataFrame) -> dict[str, float]:
    """A notebook sweep (rows of TimingStats: contender = variant label) as metrics."""
    return {m.SWEEP_P50_US.key(sweep, row["contender"], row["shape"] + ("" if row["mode"] == "cold" else f"_{row['mode']}")):
            row["p50_us"] for _, row in frame.iterrows()}


def sanitize_metrics(report: SanitizeReport) -> dict[str, float]:
    """Error (and racecheck warning) counts per tool that reached its summary."""
    out: dict[str, float] = {}
    for verdict in report.verdicts:
        if verdict.errors is not None:
            out[m.SANITIZER_ERRORS.key(verdict.tool)] = verdict.errors
        if verdict.warnings is not None:
            out[m.SANITIZER_WARNINGS.key(verdict.tool)] = verdict.warnings
        if verdict.seconds is not None:
            out[m.SANITIZER_SECONDS.key(verdict.tool)] = verdict.seconds
    return out


_PROFILE_FIELDS = {m.NCU_DURATION_US: ("duration_s", 1e6), m.NCU_TENSOR_UTIL: ("tensor_util_pct", 1),
                   m.NCU_TFLOPS: ("tflops", 1), m.NCU_DRAM_BYTES: ("dram_bytes", 1), m.NCU_DRAM_PCT: ("dram_pct", 1),
                   m.NCU_ARITHMETIC_INTENSITY: ("flop_per_byte", 1), m.NCU_L2_HIT: ("l2_hit_pct", 1),
                   m.NCU_L2_BYTES: ("l2_bytes", 1), m.NCU_L2_PCT: ("l2_pct", 1),
                   m.NCU_OCCUPANCY: ("occupancy_pct", 1), m.NCU_REGISTERS: ("registers", 1),
                   m.NCU_BANK_CONFLICTS: ("bank_conflicts", 1)}


def profile_metrics(report: ProfileReport) -> dict[str, float]:
    """Per profiled problem, every metric of the fixed set and the top stall reasons; the peaks once."""
    out: dict[str, float] = {}
    for p in report.problems:
        for metric, (field, scale) in _PROFILE_FIELDS.items():
            out[metric.key(p.problem)] = getattr(p, field) * scale
        for reason, value in p.stalls.items():
            out[m.NCU_STALL.key(reason, p.problem)] = value
    if report.peak_tflops is not None:
        out[m.NCU_PEAK_TFLOPS.key()] = report.peak_tflops
    if report.peak_dram_gbps is not None:
        out[m.NCU_PEAK_DRAM_GBPS.key()] = report.peak_dram_gbps
    return out
