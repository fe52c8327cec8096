"""What a define or a patch did to each kernel's main loop, read from the SASS of two builds of a
stage (no GPU needed): per kernel, the key-tile loop (of the loops that issue a wgmma, HGMMA, or
QGMMA and IGMMA at 8 bits, the one densest in them and MUFU.EX2), its instructions, R2UR
(vector-to-uniform moves: wgmma descriptors rebuilt each iteration), uniform-datapath
instructions and MUFU.EX2 in the default build and the trial's, the instructions from a pingpong turn's barrier to its first wgmma, and how
similar the trial's opcode sequence is to the default's (1.000: the same sequence)
(stagelab.core.sass_loops).

    python tools/sass_loops.py s8_persistent_split -D WS_PDL=0 [--kernel halfLi64E]
    python tools/sass_loops.py s17_interleaved_softmax --listing TRIAL.sass [--reference DEFAULT.sass]

A removed knob's patch (docs/results/sdpa/history/patches/) is judged by its listing: apply it to
a copy of the checkout, `python tools/sass_md5.py STAGE -D KNOB=1 --root COPY --out DIR`, then
--listing DIR/STAGE.sass.txt.

A trial's kernels are matched to the default's by their template arguments; a Config wrapper
only the trial has (StreamKTail, ...) is left out of the match. Run it before spending device
time on a kernel change: s17's stream-K trials lost 10-15% where this read 32 R2UR in the loop,
and 5-10% where it read a similarity of 0.81-0.85 (with 30 instructions from the turn to the
first HGMMA, the default's 14, and with 12: that count alone did not decide it). A similarity of
1.000 is the default's schedule; anything less is a new one, to be measured.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from sass_md5 import parse_defines, sass_of  # noqa: E402
from sass_stalls import short_name  # noqa: E402
from stagelab.core.sass_loops import LoopComparison, compare_listings  # noqa: E402


def table(rows: list[LoopComparison]) -> str:
    lines = ["| kernel | loop instructions | R2UR | uniform | MUFU.EX2 | turn to wgmma | similarity |",
             "|---|---|---|---|---|---|---|"]
    dash = lambda value: "-" if value is None else value  # noqa: E731
    for row in rows:
        ref, trial = row.reference, row.trial
        lines.append(f"| {short_name(row.kernel)} | {ref.instructions} -> {trial.instructions} | {ref.r2ur} -> {trial.r2ur} "
                     f"| {ref.uniform} -> {trial.uniform} | {ref.watched} -> {trial.watched} "
                     f"| {dash(ref.barrier_to_wgmma)} -> {dash(trial.barrier_to_wgmma)} | {trial.similarity:.3f} |")
    return "\n".join(lines)


def _listings(args: argparse.Namespace) -> tuple[str, str]:
    out = Path(tempfile.mkdtemp(prefix="sass-loops-"))
    (out / "default").mkdir()
    (out / "trial").mkdir()
    reference = args.reference.read_text() if args.reference else sass_of(args.stage, {}, out / "default")
    trial = args.listing.read_text() if args.listing else sass_of(args.stage, parse_defines(args.defines), out / "trial")
    return reference, trial


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage")
    parser.add_argument("-D", dest="defines", action="append", default=[], help="NAME=VALUE define of the trial build")
    parser.add_argument("--kernel", default="", help="only kernels whose mangled name holds this text")
    parser.add_argument("--listing", type=Path, help="the trial's cuobjdump -sass listing instead of compiling it")
    parser.add_argument("--reference", type=Path, help="the default's listing instead of compiling the stage")
    args = parser.parse_args(argv)
    if not args.defines and not args.listing:
        parser.error("give the trial: -D NAME=VALUE or --listing TRIAL.sass")
    rows = compare_listings(*_listings(args), args.kernel)
    if not rows:
        raise SystemExit(f"no kernel of {args.stage} with {args.kernel!r} in its name has a main loop in both builds")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
