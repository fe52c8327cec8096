"""Nsight Compute's source page: where in the SASS a kernel's warps wait.

The table of ncu_compare says *that* a kernel's warps stall (e.g. `wait` per issued instruction);
this says *at which instructions*. ncu samples each warp's program counter at a fixed interval
(the WarpStateStats and SourceCounters sections) and reports, per SASS instruction, how many
samples found a warp there and why it was not issuing:

    ncu --section WarpStateStats --section SourceCounters --export <file> <child>
    ncu --import <file>.ncu-rep --csv --page source --print-source sass

The source page holds a block per profiled kernel: a `"Kernel Name","<name>"` line, a header
row, then one row per SASS instruction (address, the SASS text, the sample counts, instructions
executed, ..., and the samples of each stall reason, `stall_wait` and so on). CUDA 13.0's ncu
prints each kernel's block twice; the repeat is dropped. Column titles vary between ncu versions,
so the sample column is found by its title's stem; a page without it yields no rows (the raw CSV
is kept beside the summary, to read by hand).
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict

from .ncu import cell_number

SECTIONS = ("WarpStateStats", "SourceCounters")
SAMPLES_STEM = "warp stall sampling (all"
NOT_ISSUED_STEM = "warp stall sampling (not"
SOURCE_TITLES = ("source", "sass")
EXECUTED_TITLE = "instructions executed"
KERNEL_LINE = '"Kernel Name",'
STALL_PREFIX = "stall_"
NOT_ISSUED_SUFFIX = "(Not Issued)"
TOP_REASONS = 3
ADDRESS_TITLES = ("address", "pc")
HOT_INSTRUCTIONS = 25
HOT_OPCODES = 15
KERNEL_NAME_CHARS = 100
PERCENT = 100.0


def source_command(executable: str, report_base: str, child: list[str]) -> list[str]:
    """Sample the program counters of the child's one profiled call (between profiler start and stop)."""
    sections = [arg for name in SECTIONS for arg in ("--section", name)]
    return [executable, *sections, "--profile-from-start", "off", "--target-processes", "all", "--force-overwrite",
            "--export", report_base, *child]


def page_command(executable: str, report: str) -> list[str]:
    return [executable, "--import", report, "--csv", "--page", "source", "--print-source", "sass"]


def _column(header: list[str], stems: tuple[str, ...], exact: bool) -> int | None:
    for i, title in enumerate(header):
        name = title.strip().lower()
        if any(name == stem if exact else name.startswith(stem) for stem in stems):
            return i
    return None


def opcode(sass: str) -> str:
    """The instruction's opcode with its modifiers: `@!P0 BRA 0x10` -> `BRA`, `MUFU.EX2 R1, R2` -> `MUFU.EX2`."""
    words = sass.strip().rstrip(";").split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].rstrip(",") if words else ""


def _reason_columns(header: list[str]) -> dict[str, int]:
    """stall reason -> column of its samples (all samples, not the not-issued copy)."""
    return {title[len(STALL_PREFIX):]: i for i, title in enumerate(header)
            if title.startswith(STALL_PREFIX) and NOT_ISSUED_SUFFIX not in title}


def _parse_table(lines: list[str]) -> list[dict]:
    """One block's instruction rows (see parse_source_page)."""
    start = next((i for i, line in enumerate(lines) if SAMPLES_STEM in line.lower()), None)
    if start is None:
        return []
    table = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = table[0]
    samples = _column(header, (SAMPLES_STEM,), exact=False)
    not_issued = _column(header, (NOT_ISSUED_STEM,), exact=False)
    executed = _column(header, (EXECUTED_TITLE,), exact=True)
    source = _column(header, SOURCE_TITLES, exact=True)
    address = _column(header, ADDRESS_TITLES, exact=True)
    reasons = _reason_columns(header)
    rows = []
    for cells in table[1:]:
        if len(cells) != len(header) or source is None:
            continue
        rows.append({"address": cells[address].strip() if address is not None else str(len(rows)),
                     "sass": cells[source].strip(), "samples": cell_number(cells[samples]),
                     "not_issued": cell_number(cells[not_issued]) if not_issued is not None else math.nan,
                     "executed": cell_number(cells[executed]) if executed is not None else math.nan,
                     "reasons": {name: cell_number(cells[i]) for name, i in reasons.items()}})
    return rows


def parse_source_page(text: str) -> list[tuple[str, list[dict]]]:
    """(kernel name, its instruction rows) per profiled kernel, in launch order. The page opens
    each kernel with a `"Kernel Name","<name>"` line (and this ncu prints every kernel's block
    twice: an identical repeat is dropped); a page without those lines is one unnamed kernel.
    A row: address, sass, samples, not_issued, executed (nan where the page lacks the column)
    and reasons (stall reason -> samples)."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(KERNEL_LINE)]
    if not starts:
        rows = _parse_table(lines)
        return [("", rows)] if rows else []
    kernels, seen = [], set()
    for begin, end in zip(starts, [*starts[1:], len(lines)]):
        block = "\n".join(lines[begin:end]).strip()
        if block in seen:
            continue
        seen.add(block)
        title = next(csv.reader([lines[begin]]))
        name = title[1] if len(title) > 1 else ""
        rows = _parse_table(lines[begin + 1:end])
        if rows:
            kernels.append((name, rows))
    return kernels


def _valid(x: float) -> float:
    return 0.0 if math.isnan(x) else x


def top_reasons(row: dict, count: int = TOP_REASONS) -> list[tuple[str, float]]:
    """The instruction's largest stall reasons by samples."""
    ranked = sorted(((name, _valid(v)) for name, v in row.get("reasons", {}).items()), key=lambda item: -item[1])
    return [(name, v) for name, v in ranked[:count] if v > 0]


def by_opcode(rows: list[dict]) -> list[tuple[str, float, int]]:
    """(opcode, share of all samples in %, instructions of that opcode), largest share first."""
    total = sum(_valid(r["samples"]) for r in rows)
    shares: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for r in rows:
        name = opcode(r["sass"])
        shares[name] += _valid(r["samples"])
        counts[name] += 1
    scale = PERCENT / total if total > 0 else 0.0
    return sorted(((name, s * scale, counts[name]) for name, s in shares.items()), key=lambda item: -item[1])


def reason_shares(rows: list[dict]) -> list[tuple[str, float, str]]:
    """(stall reason, % of all samples, the opcode holding most of them), largest first."""
    total = sum(_valid(r["samples"]) for r in rows)
    by_reason: dict[str, float] = defaultdict(float)
    by_pair: dict[tuple[str, str], float] = defaultdict(float)
    for r in rows:
        for name, v in r.get("reasons", {}).items():
            by_reason[name] += _valid(v)
            by_pair[(name, opcode(r["sass"]))] += _valid(v)
    scale = PERCENT / total if total > 0 else 0.0
    out = []
    for name, v in sorted(by_reason.items(), key=lambda item: -item[1]):
        if v > 0:
            top = max((pair for pair in by_pair if pair[0] == name), key=lambda pair: by_pair[pair])[1]
            out.append((name, v * scale, top))
    return out


def _kernel_markdown(rows: list[dict]) -> list[str]:
    total = sum(_valid(r["samples"]) for r in rows)
    scale = PERCENT / total if total > 0 else 0.0
    lines = [f"{len(rows)} SASS instructions, {total:.0f} samples", ""]
    reasons = reason_shares(rows)
    if reasons:
        lines += ["| stall reason | % of samples | most at |", "|---|---|---|"]
        lines += [f"| {name} | {share:.1f} | {top} |" for name, share, top in reasons[:HOT_OPCODES]]
        lines.append("")
    lines += ["| opcode | % of samples | instructions |", "|---|---|---|"]
    lines += [f"| {name} | {share:.1f} | {count} |" for name, share, count in by_opcode(rows)[:HOT_OPCODES]]
    lines += ["", "| address | % of samples | % not issued | top reasons | SASS |", "|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: -_valid(r["samples"]))[:HOT_INSTRUCTIONS]:
        why = ", ".join(f"{name} {v * scale:.1f}" for name, v in top_reasons(r))
        lines.append(f"| {r['address']} | {_valid(r['samples']) * scale:.1f} | {_valid(r['not_issued']) * scale:.1f} | "
                     f"{why} | `{r['sass']}` |")
    return lines


def summary_markdown(label: str, kernels: list[tuple[str, list[dict]]]) -> str:
    """One subject: per kernel, the stall reasons and where they sit, the opcodes that hold the
    most samples, then the hottest instructions (share of the kernel's samples, top reasons, SASS)."""
    if not kernels:
        return f"### {label}\n\nno per-instruction samples on the source page (see {label}.source.csv)\n"
    lines = [f"### {label}", ""]
    for name, rows in kernels:
        lines += [f"#### {name[:KERNEL_NAME_CHARS] or 'kernel'}", "", *_kernel_markdown(rows), ""]
    return "\n".join(lines)
