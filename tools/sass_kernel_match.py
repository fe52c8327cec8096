"""Whether two builds of the same stages hold the same kernels, kernel by kernel, when their names
differ: the evidence that a refactor which renames kernels (a Config gains a template parameter, a
stage's policy becomes a type) left every kernel's code as it was. Reads two folders of listings
that `tools/sass_md5.py --out DIR` wrote (one `STAGE.sass.txt` per stage), e.g. before and after:

    python tools/sass_md5.py s8_persistent_split --root /tmp/before --out /tmp/sass-before
    python tools/sass_md5.py s8_persistent_split --out /tmp/sass-after
    python tools/sass_kernel_match.py /tmp/sass-before /tmp/sass-after

Per stage: each kernel's body with its name, addresses and encodings stripped (the instructions
alone: stagelab.core.sass_kernels.instruction_digests) is hashed, and the two builds' hashes are
compared as multisets. Prints each stage's count of kernels matched, then the kernels of either
build that found no twin (by their names), and exits 1 if a stage has any.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from stagelab.core.sass_kernels import instruction_digests as kernels  # name -> md5 of its instructions


def compare(before: dict[str, str], after: dict[str, str]) -> tuple[int, list[str], list[str]]:
    """Matched kernel count, and the names of each side's kernels without a twin."""
    left, right = Counter(before.values()), Counter(after.values())
    common = left & right
    return sum(common.values()), _unmatched(before, left - common), _unmatched(after, right - common)


def _unmatched(named: dict[str, str], spare: Counter) -> list[str]:
    """Names of as many kernels of each hash as `spare` counts: the ones the other build lacks."""
    names = []
    for name, digest in named.items():
        if spare[digest] > 0:
            spare[digest] -= 1
            names.append(name)
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    failed = False
    for path in sorted(args.before.glob("*.sass.txt")):
        twin = args.after / path.name
        stage = path.name.removesuffix(".sass.txt")
        if not twin.is_file():
            print(f"{stage}: no listing in {args.after}")
            failed = True
            continue
        before, after = kernels(path.read_text()), kernels(twin.read_text())
        matched, lonely_before, lonely_after = compare(before, after)
        print(f"{stage}: {matched} of {len(before)} kernels before, {len(after)} after, matched by their code")
        for name in lonely_before:
            print(f"  only before: {name}")
        for name in lonely_after:
            print(f"  only after:  {name}")
        failed |= bool(lonely_before or lonely_after)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
