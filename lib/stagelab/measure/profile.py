"""Nsight Compute on a stage: its kernels alone (by name; each launch also sits in an NVTX range
`stagelab/<stage>/<problem>`), at the mission problem and one long problem, with a fixed metric
set (`ncu`); summaries per problem, roofline peaks read from the device, and the registry's ncu
gates (`gates: {ncu: {tensor_util_min: 0.5}}`).

Without a GPU the step is skipped; without ncu it is recorded unavailable; neither is an error.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from . import ncu
from .launch import child_command, child_environment, find_tool, profile_problems, run_under_tool
from ..core.resources import GateResult, KernelResources, parse_mangled

PROFILED, FAILED, TIMEOUT, UNAVAILABLE, SKIPPED = "profiled", "failed", "timeout", "unavailable", "skipped"
# Per problem: a handful of replay passes of one launch, plus the child's build-cache hit and start.
PROFILE_TIMEOUT_S = 300
TOP_STALLS = 3
PERCENT = 100.0
TERA = 1e12
GIGA = 1e9
# Dense fp16/bf16 tensor FLOP per SM per cycle (fp32 accumulate) by compute capability: the
# whitepapers' peak over SMs x boost clock (A100 312 T / (108 x 1.41 GHz), H100 SXM 989 T / (132 x 1.83 GHz)).
TENSOR_FLOP_PER_SM_CYCLE = {(8, 0): 2048, (9, 0): 4096}
# e4m3 wgmma (QGMMA) runs at twice that rate on sm_90: H100 SXM 1979 vs 989 dense TFLOP/s.
OPCODE_RATE = {"QGMMA": 2}
# Registry gate -> the summary field it bounds (as a fraction of 100%).
GATE_FIELDS = {"tensor_util_min": "tensor_util_pct", "dram_throughput_min": "dram_pct",
               "occupancy_min": "occupancy_pct", "l2_hit_rate_min": "l2_hit_pct"}


@dataclass
class ProblemProfile:
    problem: str
    kernels: str
    duration_s: float
    tensor_util_pct: float
    tflops: float
    dram_bytes: float
    dram_pct: float
    flop_per_byte: float
    l2_hit_pct: float
    l2_bytes: float
    l2_pct: float
    occupancy_pct: float
    registers: float
    bank_conflicts: float
    stalls: dict[str, float]          # the top three reasons, largest first
    sm_clock_hz: float
    dram_peak_bytes_per_s: float


def weighted(rows: list[dict], metric: str, duration: float) -> float:
    """A rate or percentage over several kernels of one launch, weighted by their time
    (nan when ncu did not report it)."""
    return sum(r.get(metric, math.nan) * r[ncu.DURATION] for r in rows) / duration if duration > 0 else math.nan


def total(rows: list[dict], metric: str) -> float:
    return sum(r.get(metric, math.nan) for r in rows)


def summarize(problem: str, flops: float, rows: list[dict]) -> ProblemProfile:
    """The kernels one launch of the stage ran on one problem, as one summary."""
    duration = total(rows, ncu.DURATION)
    dram_bytes = total(rows, ncu.DRAM_BYTES)
    stalls = {reason: weighted(rows, ncu.stall_metric(reason), duration) for reason in ncu.STALL_REASONS}
    top = dict(sorted(stalls.items(), key=lambda item: -item[1])[:TOP_STALLS])
    return ProblemProfile(
        problem=problem, kernels=",".join(sorted({str(r[ncu.KERNEL_COLUMN]) for r in rows})),
        duration_s=duration, tensor_util_pct=weighted(rows, ncu.TENSOR_PIPE, duration),
        tflops=flops / duration / TERA if duration > 0 else math.nan, dram_bytes=dram_bytes,
        dram_pct=weighted(rows, ncu.DRAM_PCT, duration),
        flop_per_byte=flops / dram_bytes if dram_bytes > 0 else math.nan,
        l2_hit_pct=weighted(rows, ncu.L2_HIT, duration), l2_bytes=total(rows, ncu.L2_BYTES),
        l2_pct=weighted(rows, ncu.L2_PCT, duration), occupancy_pct=weighted(rows, ncu.OCCUPANCY, duration),
        registers=max(r.get(ncu.REGISTERS, math.nan) for r in rows), bank_conflicts=total(rows, ncu.BANK_CONFLICTS),
        stalls=top, sm_clock_hz=rows[0].get(ncu.SM_CLOCK_HZ, math.nan),
        dram_peak_bytes_per_s=rows[0].get(ncu.DRAM_PEAK_BYTES_PER_CYCLE, math.nan) * rows[0].get(ncu.DRAM_CLOCK_HZ, math.nan))


# The tensor-core opcodes by what drives them: wgmma (fp16/bf16, then e4m3) before mma.sync/WMMA.
TENSOR_OPCODES = ("HGMMA", "QGMMA", "HMMA")


def tensor_pipe(instructions: list[dict]) -> str:
    """The tensor-core opcode the stage's kernels issue (recorded with the profile; one ncu counter
    covers them all, ncu.TENSOR_PIPE); HMMA when none does."""
    return next((op for op in TENSOR_OPCODES if any(row.get(op, 0) for row in instructions)), "HMMA")


def kernel_regex(kernels: list[KernelResources]) -> str:
    """The stage's kernel functions by base name (what ncu matches by default: no namespace, no
    template arguments), whole names only: ncu searches, so a Triton kernel named `_kernel` would
    otherwise select torch's distribution_elementwise_grid_stride_kernel too (seen on an H200, ncu 2025)."""
    return "^(" + "|".join(sorted({parse_mangled(k.mangled)[0] for k in kernels})) + ")$"


def evaluate_ncu_gates(problems: list[ProblemProfile], gates: tuple[tuple[str, float], ...]) -> list[GateResult]:
    return [GateResult(f"ncu_{key}", p.problem, limit, getattr(p, GATE_FIELDS[key]) / PERCENT,
                       getattr(p, GATE_FIELDS[key]) / PERCENT >= limit)
            for key, limit in gates for p in problems]


@dataclass
class ProfileReport:
    status: str
    problems: list[ProblemProfile] = field(default_factory=list)
    tensor_pipe: str = ""
    peak_tflops: float | None = None
    peak_dram_gbps: float | None = None
    gates: list[GateResult] = field(default_factory=list)
    reports: list[Path] = field(default_factory=list)
    log: str = ""

    @property
    def gates_passed(self) -> bool | None:
        """None when nothing was gated (no gates, or no profile)."""
        return all(g.passed for g in self.gates) if self.gates else None

    def frame(self) -> pd.DataFrame:
        rows = []
        for p in self.problems:
            row = asdict(p)
            stalls = row.pop("stalls")
            rows.append({**row, "top_stalls": ", ".join(f"{k} {v:.2f}" for k, v in stalls.items())})
        return pd.DataFrame(rows)

    def gates_frame(self) -> pd.DataFrame:
        return pd.DataFrame([g.__dict__ for g in self.gates])


def device_peaks(problems: list[ProblemProfile], tensor_opcode: str = "HMMA") -> tuple[float | None, float | None]:
    """Dense tensor TFLOP/s (SMs and compute capability from the device, SM clock under ncu)
    and DRAM GB/s (ncu's peak bytes per DRAM cycle x DRAM clock)."""
    import torch

    if not problems:
        return None, None
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    per_cycle = TENSOR_FLOP_PER_SM_CYCLE.get((props.major, props.minor))
    first = problems[0]
    per_cycle = per_cycle * OPCODE_RATE.get(tensor_opcode, 1) if per_cycle else None  # the stage's own peak
    flops = props.multi_processor_count * first.sm_clock_hz * per_cycle / TERA if per_cycle else None
    return flops, first.dram_peak_bytes_per_s / GIGA


def profile_step(ctx, built, resources, out_dir: Path, run: Callable = run_under_tool) -> ProfileReport:
    """ncu on the stage's child launch per problem; `run(command, timeout_s, env)` is replaceable in tests."""
    if not ctx.gpu_available:
        return ProfileReport(SKIPPED, log="no CUDA device")
    executable = find_tool(ncu.NCU)
    if executable is None:
        return ProfileReport(UNAVAILABLE, log=f"{ncu.NCU} is neither on PATH nor in the CUDA toolkit")
    pipe = tensor_pipe(resources.instructions if resources else [])
    report = ProfileReport(PROFILED, tensor_pipe=pipe)
    out_dir.mkdir(parents=True, exist_ok=True)
    for problem in profile_problems(ctx):
        base = out_dir / f"{ctx.stage.id}_{problem.tag}"
        command = ncu.profile_command(executable, str(base), kernel_regex(built.stage.resources),
                                      ncu.metric_set(), child_command(ctx, "--problem", problem.tag))
        returncode, output = run(command, PROFILE_TIMEOUT_S, child_environment())
        report.log += f"$ {' '.join(command)}\n{output}\n"
        rows = _read_report(executable, base, run, report) if returncode is not None else []
        if returncode is None or returncode != 0 or not rows:
            report.status = TIMEOUT if returncode is None else FAILED
            break
        report.problems.append(summarize(problem.tag, problem.flops(), rows))
    report.peak_tflops, report.peak_dram_gbps = device_peaks(report.problems, pipe)
    report.gates = evaluate_ncu_gates(report.problems, ctx.stage.gates.ncu)
    return report


def _read_report(executable: str, base: Path, run: Callable, report: ProfileReport) -> list[dict]:
    path = base.with_name(base.name + ncu.REPORT_SUFFIX)
    if not path.is_file():
        return []
    report.reports.append(path)
    returncode, text = run(ncu.csv_command(executable, str(path)), PROFILE_TIMEOUT_S, child_environment())
    report.log += f"$ ncu --import {path.name} (raw page, units on its second row)\n{text}\n"  # the units, on record
    return ncu.parse_raw_csv(text) if returncode == 0 else []
