"""Nsight Compute's source page: where in the SASS a kernel's warps wait.

The table of ncu_compare says *that* a kernel's warps stall (e.g. `wait` per issued instruction);
this says *at which instructions*. ncu samples each warp's program counter at a fixed interval
(the WarpStateStats and SourceCounters sections) and reports, per SASS instruction, how many
samples found a warp there and why it was not issuing:

    ncu --section WarpStateStats --section SourceCounters --export <file> <child>
    ncu --import <file>.ncu-rep --csv --page source --print-source sass

The source page is one header row, then one row per instruction (address, the SASS text, the
sample counts, instructions executed, ...). Column titles vary between ncu versions, so the
sample column is found by its title's stem; a page without it yields no rows (the raw CSV is kept
beside the summary, to read by hand).
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict

SECTIONS = ("WarpStateStats", "SourceCounters")
SAMPLES_STEM = "warp stall sampling (all"
NOT_ISSUED_STEM = "warp stall sampling (not"
SOURCE_TITLES = ("source", "sass")
ADDRESS_TITLES = ("address", "pc")
HOT_INSTRUCTIONS = 25
HOT_OPCODES = 15
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


def _count(text: str) -> float:
    try:
        return float(text.replace(",", "").strip() or 0)
    except ValueError:
        return math.nan


def opcode(sass: str) -> str:
    """The instruction's opcode with its modifiers: `@!P0 BRA 0x10` -> `BRA`, `MUFU.EX2 R1, R2` -> `MUFU.EX2`."""
    words = sass.strip().rstrip(";").split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].rstrip(",") if words else ""


def parse_source_csv(text: str) -> list[dict]:
    """One dict per SASS instruction: address, sass, samples, not_issued (nan where the page has no
    such column). Lines before the header (==PROF== messages) are skipped; no sample column, no rows."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if SAMPLES_STEM in line.lower()), None)
    if start is None:
        return []
    table = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = table[0]
    samples = _column(header, (SAMPLES_STEM,), exact=False)
    not_issued = _column(header, (NOT_ISSUED_STEM,), exact=False)
    source = _column(header, SOURCE_TITLES, exact=True)
    address = _column(header, ADDRESS_TITLES, exact=True)
    rows = []
    for cells in table[1:]:
        if len(cells) != len(header) or source is None:
            continue
        rows.append({"address": cells[address].strip() if address is not None else str(len(rows)),
                     "sass": cells[source].strip(), "samples": _count(cells[samples]),
                     "not_issued": _count(cells[not_issued]) if not_issued is not None else math.nan})
    return rows


def by_opcode(rows: list[dict]) -> list[tuple[str, float, int]]:
    """(opcode, share of all samples in %, instructions of that opcode), largest share first."""
    total = sum(r["samples"] for r in rows if not math.isnan(r["samples"]))
    shares: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for r in rows:
        name = opcode(r["sass"])
        shares[name] += 0.0 if math.isnan(r["samples"]) else r["samples"]
        counts[name] += 1
    scale = PERCENT / total if total > 0 else 0.0
    return sorted(((name, s * scale, counts[name]) for name, s in shares.items()), key=lambda item: -item[1])


def summary_markdown(label: str, rows: list[dict]) -> str:
    """One subject: the opcodes that hold the most samples, then the hottest instructions (their
    share of the samples and their SASS)."""
    if not rows:
        return f"### {label}\n\nno per-instruction samples on the source page (see {label}.source.csv)\n"
    total = sum(r["samples"] for r in rows if not math.isnan(r["samples"]))
    lines = [f"### {label}", "", f"{len(rows)} SASS instructions, {total:.0f} samples", "",
             "| opcode | % of samples | instructions |", "|---|---|---|"]
    lines += [f"| {name} | {share:.1f} | {count} |" for name, share, count in by_opcode(rows)[:HOT_OPCODES]]
    lines += ["", "| address | % of samples | % not issued | SASS |", "|---|---|---|---|"]
    hot = sorted(rows, key=lambda r: -(0.0 if math.isnan(r["samples"]) else r["samples"]))[:HOT_INSTRUCTIONS]
    scale = PERCENT / total if total > 0 else 0.0
    for r in hot:
        lines.append(f"| {r['address']} | {r['samples'] * scale:.1f} | {r['not_issued'] * scale:.1f} | "
                     f"`{r['sass']}` |")
    return "\n".join(lines) + "\n"
