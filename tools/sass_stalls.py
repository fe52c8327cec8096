"""The issue stalls ptxas scheduled into a stage's kernels (no GPU needed): per kernel, its
instructions, their stall cycles, and how often MUFU.EX2 (or --opcode) follows itself with the
issue cycles its warp loses there (stagelab.core.sass_schedule). A softmax schedule can be judged
here before any device time.

    python tools/sass_stalls.py s17_interleaved_softmax [-D KNOB=1 ...] [--kernel Li64E] [--opcode MUFU.EX2]

`--kernel` keeps the kernels whose mangled name holds the text (Li64E: head_dim 64; 6__half: fp16).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from sass_md5 import parse_defines, sass_of  # noqa: E402
from stagelab.core.sass_schedule import ScheduleSummary, functions, summarize  # noqa: E402

# sdpa_warpspec's kernels are named by their template arguments: the element type, head dim, the
# Config (and the wrappers around it: QRing, KeySplit, ...), then causal and the scale's sign.
_TEMPLATE_RE = re.compile(r"I(\d*_*\w+?)Li(\d+)E.*?ConfigILi(\d+)ELi(\d+)ELi(\d+)ELb(\d)ELb(\d)")
_WRAPPER_RE = re.compile(r"NS_\d+([A-Z][A-Za-z]+)I")
_TAIL_RE = re.compile(r"ELb(\d)ELb(\d)E+vNS_6ParamsE$")


def short_name(mangled: str) -> str:
    """sdpa_warpspec's kernels as `half d64 QRing wgs2 n128 s3 pingpong persistent causal` (and
    `scale<0`: the instance for a negative softmax scale); others as mangled."""
    match = _TEMPLATE_RE.search(mangled)
    if match is None:
        return mangled
    dtype, head_dim, wgs, block_n, stages, pingpong, persistent = match.groups()
    wrappers = [name for name in _WRAPPER_RE.findall(mangled) if name not in ("Config", "Params")]
    tail = _TAIL_RE.search(mangled)
    causal = tail is not None and tail.group(1) == "1"
    negative_scale = tail is not None and tail.group(2) == "0"
    flags = [word for word, on in (("pingpong", pingpong == "1"), ("persistent", persistent == "1"),
                                   ("causal", causal), ("scale<0", negative_scale)) if on]
    return " ".join([re.sub(r"^\d+_*", "", dtype), f"d{head_dim}", *wrappers, f"wgs{wgs}", f"n{block_n}",
                     f"s{stages}", *flags])


def table(rows: list[ScheduleSummary], opcode: str) -> str:
    lines = [f"| kernel | instructions | stall cycles | {opcode} | after another | idle issue cycles |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {short_name(r.function)} | {r.instructions} | {r.stall_cycles} | {r.watched} | {r.back_to_back} "
              f"| {r.idle_cycles} |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage")
    parser.add_argument("-D", dest="defines", action="append", default=[], help="NAME=VALUE stage define override")
    parser.add_argument("--kernel", default="", help="only kernels whose mangled name holds this text")
    parser.add_argument("--opcode", default="MUFU.EX2", help="the instruction whose back-to-back issues are counted")
    parser.add_argument("--listing", type=Path, help="read this cuobjdump -sass listing instead of compiling")
    args = parser.parse_args(argv)
    if args.listing:
        listing = args.listing.read_text()
    else:
        listing = sass_of(args.stage, parse_defines(args.defines), Path(tempfile.mkdtemp(prefix="sass-stalls-")))
    rows = [summarize(name, insts, args.opcode) for name, insts in functions(listing).items() if args.kernel in name]
    if not rows:
        raise SystemExit(f"no kernel of {args.stage} has {args.kernel!r} in its name")
    print(table(rows, args.opcode))
    return 0


if __name__ == "__main__":
    sys.exit(main())
