"""Where a kernel's hot loop spends its warp samples, from Nsight Compute's per-instruction page:

    ncu -k regex:warpspec_operands -c 1 --section SourceCounters --section WarpStateStats -o rep BINARY ...
    ncu --import rep.ncu-rep --page source --csv --print-source sass > sass.csv
    python3 tools/ncu_source_summary.py sass.csv [--markdown out.md]

The loop is the instructions executed most often among those of `--anchor` (MUFU by default: the
softmax's exponentials run once per key tile, so their count is the middle tiles'). Prints the
loop's samples by stall reason, by opcode (with each opcode's top stalls), and by stretch of
`--stretch` consecutive instructions, so a reader sees which part of the tile the time sits in.
"""

from __future__ import annotations

import argparse
import collections
import csv
import sys
from pathlib import Path

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
STALL_PREFIX = "stall_"
TOP = 12


def read_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """The header and the instruction rows of ncu's source-page CSV (its first line names the kernel)."""
    rows = list(csv.reader(path.open()))
    header_at = next((i for i, row in enumerate(rows) if SAMPLES in row), None)
    if header_at is None:
        raise SystemExit(f"{path}: no {SAMPLES!r} column: export with --page source --csv --print-source sass")
    header = rows[header_at]
    return header, [row for row in rows[header_at + 1:] if len(row) >= len(header)]


def opcode(source: str) -> str:
    words = source.split()
    if not words:
        return ""
    op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
    return op.split(".")[0]


def loop_rows(header: list[str], rows: list[list[str]], anchor: str) -> list[list[str]]:
    """The rows executed as often as an anchor instruction, at the count whose rows hold the most
    samples (a prologue or an epilogue may hold more anchor instructions, run less often)."""
    col = {name: i for i, name in enumerate(header)}
    counts = {int(row[col[EXECUTED]] or 0) for row in rows if opcode(row[col["Source"]]) == anchor}
    if not counts:
        raise SystemExit(f"no {anchor} instruction in the listing: pick another --anchor")
    samples = collections.Counter()
    for row in rows:
        count = int(row[col[EXECUTED]] or 0)
        if count in counts:
            samples[count] += int(row[col[SAMPLES]] or 0)
    per_tile = samples.most_common(1)[0][0]
    return [row for row in rows if int(row[col[EXECUTED]] or 0) == per_tile]


def summary(header: list[str], loop: list[list[str]], stretch: int) -> str:
    col = {name: i for i, name in enumerate(header)}
    stalls = [name for name in header if name.startswith(STALL_PREFIX) and "Not Issued" not in name]
    total = sum(int(row[col[SAMPLES]] or 0) for row in loop) or 1
    by_stall = collections.Counter()
    by_op = collections.defaultdict(collections.Counter)
    op_samples = collections.Counter()
    for row in loop:
        op_samples[opcode(row[col["Source"]])] += int(row[col[SAMPLES]] or 0)
        for name in stalls:
            value = int(row[col[name]] or 0)
            by_stall[name[len(STALL_PREFIX):]] += value
            by_op[opcode(row[col["Source"]])][name[len(STALL_PREFIX):]] += value
    lines = [f"{len(loop)} instructions in the loop, {total} samples", "", "| stall | share |", "|---|---|"]
    lines += [f"| {name} | {value / total:.3f} |" for name, value in by_stall.most_common(TOP)]
    lines += ["", "| opcode | share | top stalls |", "|---|---|---|"]
    for op, value in op_samples.most_common(TOP):
        top = ", ".join(f"{name} {n / total:.3f}" for name, n in by_op[op].most_common(3) if n)
        lines.append(f"| {op} | {value / total:.3f} | {top} |")
    lines += ["", "| instructions | share | opcodes |", "|---|---|---|"]
    for start in range(0, len(loop), stretch):
        part = loop[start:start + stretch]
        share = sum(int(row[col[SAMPLES]] or 0) for row in part) / total
        ops = collections.Counter(opcode(row[col["Source"]]) for row in part).most_common(4)
        lines.append(f"| {start}-{start + len(part) - 1} | {share:.3f} | "
                     + " ".join(f"{op} {n}" for op, n in ops) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path)
    parser.add_argument("--anchor", default="MUFU", help="an opcode executed once per loop trip")
    parser.add_argument("--stretch", type=int, default=40, help="instructions per stretch")
    parser.add_argument("--markdown", type=Path, help="write the tables here as well")
    args = parser.parse_args(argv)
    header, rows = read_rows(args.csv)
    text = summary(header, loop_rows(header, rows, args.anchor), args.stretch)
    sys.stdout.write(text)
    if args.markdown:
        args.markdown.write_text(f"# {args.csv.name}: the hot loop's warp samples\n\n{text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
