"""Nsight Compute as stagelab drives it: the fixed metric set (sm_90 names), the command that
profiles a stage's kernels in a child process, and the raw CSV page read back from the report.

    ncu --metrics <set> --kernel-name regex:<stage kernels> --nvtx --export <file> <child>
    ncu --import <file>.ncu-rep --csv --page raw --print-units base

The raw page is one header row ("ID","Process ID",...,"Kernel Name",...,<metric>...), one row of
units, then one row per profiled kernel launch; numbers may carry thousands separators.
"""

from __future__ import annotations

import csv
import io
import math

NCU = "ncu"
REPORT_SUFFIX = ".ncu-rep"

DURATION = "gpu__time_duration.sum"
# Tensor-pipe activity. On sm_90 the counter named for HMMA counts every tensor-core instruction,
# mma.sync (HMMA) and wgmma (HGMMA, QGMMA) alike; the gmma-named one
# (sm__pipe_tensor_op_gmma_cycles_active) read n/a for every HGMMA kernel on an H100 (ncu 2025.3,
# 2026-11-23), while this one read 45% for s9's QGMMA kernel at (1,32,8192,128): 1.1 PFLOP in
# 1628 us under ncu's locked 1.47 GHz, i.e. 675 TFLOP/s of a 1979 * 1.47 / 1.98 = 1469 fp8 peak.
TENSOR_PIPE = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
DRAM_BYTES = "dram__bytes.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
L2_HIT = "lts__t_sector_hit_rate.pct"
# L2 traffic, hits and misses alike: where K/V tiles re-read by every query tile of a head meet
# the L2 bandwidth (the mission shape reads about 4x its 4 MB of inputs from L2 at 64-row tiles)
L2_BYTES = "lts__t_bytes.sum"
L2_PCT = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
REGISTERS = "launch__registers_per_thread"
BANK_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"
# The device's peaks, as ncu measures them under its locked clocks (roofline).
SM_CLOCK_HZ = "sm__cycles_elapsed.avg.per_second"
DRAM_CLOCK_HZ = "dram__cycles_elapsed.avg.per_second"
DRAM_PEAK_BYTES_PER_CYCLE = "dram__bytes.sum.peak_sustained"
# Warp stall reasons of the WarpStateStats section (Volta through Hopper); `selected` is issuing, not a stall.
STALL_REASONS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle",
                 "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction",
                 "not_selected", "short_scoreboard", "sleeping", "tex_throttle", "wait")

# Units of the raw page to SI, by lower-cased unit (base units are asked for; scaled ones, as
# ncu prints them by default, are read all the same), spelled out or abbreviated: an H100's ncu
# wrote durations in a unit the spelled-out names missed (read as seconds: 1e9 too long).
# Units not named here (%, ratios, counts) are kept.
_TIME = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0}
_SIZE = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
UNIT_SCALE = {
    **{f"{p}byte": f for p, f in _SIZE.items()}, **{f"{p}b": f for p, f in _SIZE.items()},
    **{f"{p}second": f for p, f in _TIME.items()}, **{f"{p}s": f for p, f in _TIME.items()},
    **{f"{p}hz": f for p, f in _SIZE.items()},
    **{f"cycle/{p}second": 1.0 / f for p, f in _TIME.items()}, **{f"cycle/{p}s": 1.0 / f for p, f in _TIME.items()},
}
ID_COLUMN = "ID"
KERNEL_COLUMN = "Kernel Name"


# Where the issue slots go (tools/ncu_compare.py): warp instructions, the share of cycles a
# scheduler issued, and the pipes a softmax loads: XU (MUFU: ex2, rcp), FMA (FFMA, FMUL, FADD)
# and ALU (FMNMX, integer and logic, conversions).
WARP_INSTRUCTIONS = "smsp__inst_executed.sum"
ISSUE_ACTIVE = "smsp__issue_active.avg.pct_of_peak_sustained_active"
PIPE_XU = "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"
PIPE_FMA = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
PIPE_ALU = "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"
ISSUE_METRICS = (WARP_INSTRUCTIONS, ISSUE_ACTIVE, PIPE_XU, PIPE_FMA, PIPE_ALU)
# How a library kernel is launched (its tiling shows in grid and block; K/V sharing in the cluster).
GRID_SIZE = "launch__grid_size"
BLOCK_SIZE = "launch__block_size"
CLUSTER_SIZE = "launch__cluster_dim_x"
LAUNCH_METRICS = (GRID_SIZE, BLOCK_SIZE, CLUSTER_SIZE)
# Where L2's sectors come from and what they do: the SMs' own requests (tex: loads, stores, TMA)
# against the copies between the H100's two L2 partitions (ltcfabric: a line homed in the far
# partition is fetched into the near one), and reads against writes. A sector is 32 bytes.
L2_SECTOR_BYTES = 32
L2_FROM_SM = "lts__t_sectors_srcunit_tex.sum"
L2_FROM_FABRIC = "lts__t_sectors_srcunit_ltcfabric.sum"
L2_READS = "lts__t_sectors_op_read.sum"
L2_WRITES = "lts__t_sectors_op_write.sum"
# Each GPC's L2 Request Coalescer (LRC) merges reads of the same sectors by the GPC's SMs: what
# the SMs were sent (xbar2gpc) against what the LRC asked L2 for (lrc2xbar). Blocks that read one
# head's K/V tiles at the same time on one GPC show as a gap between the two.
LRC_TO_SMS = "lrc__xbar2gpc_sectors_op_read.sum"
LRC_FROM_L2 = "lrc__lrc2xbar_sectors_op_read.sum"


def stall_metric(reason: str) -> str:
    return f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"


def metric_set() -> list[str]:
    return [DURATION, TENSOR_PIPE, DRAM_BYTES, DRAM_PCT, L2_HIT, L2_BYTES, L2_PCT, OCCUPANCY, REGISTERS,
            BANK_CONFLICTS, SM_CLOCK_HZ, DRAM_CLOCK_HZ, DRAM_PEAK_BYTES_PER_CYCLE,
            *(stall_metric(r) for r in STALL_REASONS)]


def profile_command(executable: str, report_base: str, kernel_regex: str, metrics: list[str],
                    child: list[str]) -> list[str]:
    """Profile only the stage's kernels (by name: the harness's torch kernels never match) in the child."""
    return [executable, "--metrics", ",".join(metrics), "--kernel-name", f"regex:{kernel_regex}", "--nvtx",
            "--target-processes", "all", "--force-overwrite", "--export", report_base, *child]


def csv_command(executable: str, report: str) -> list[str]:
    return [executable, "--import", report, "--csv", "--page", "raw", "--print-units", "base"]


def cell_number(text: str, unit: str = "") -> float:
    """A metric cell in SI units (thousands separators allowed); nan for what is not a number
    (n/a, an empty cell)."""
    try:
        return float(text.replace(",", "").strip()) * UNIT_SCALE.get(unit.strip().lower(), 1.0)
    except ValueError:
        return math.nan


def parse_raw_csv(text: str) -> list[dict[str, float | str]]:
    """One dict per profiled kernel launch: metric name -> value in SI units (bytes, seconds, hertz;
    percentages as printed), the identifying columns as text. Lines before the header (ncu's
    ==PROF== messages) are skipped; no header means no rows."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f'"{ID_COLUMN}",')), None)
    if start is None:
        return []
    table = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, units, body = table[0], table[1] if len(table) > 1 else [], table[2:]
    metric_columns = {i for i, name in enumerate(header) if "__" in name}
    rows = []
    for cells in body:
        if len(cells) != len(header):
            continue
        rows.append({name: cell_number(cells[i], units[i] if i < len(units) else "") if i in metric_columns
                     else cells[i] for i, name in enumerate(header)})
    return rows
