"""What a device call carries (tools/device_run.sh): the tree (tracked files and untracked ones git does
not ignore) plus the folders named (the wheelhouse), against the device tool's 64 MiB cap on the
working tree it copies. A call over the cap is refused before it starts (2026-11-29: the records had
grown the tree to 32 MB and the wheelhouse was 34 MB); this says so here, with the largest files,
before a call is spent.

    python3 tools/carry_size.py wheelhouse
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MIB = 1024 * 1024
CARRY_CAP_BYTES = 64 * MIB          # /work/.library/device/README.md: the working tree that travels
# The largest folder a call carries beside the tree: a FlashAttention-4 part of tools/fa4_wheels.sh
# (PART_MB=40); `make wheelhouse` came to 29 MiB on 2026-11-29.
CARRIED_FOLDER_ALLOWANCE_BYTES = 40 * MIB
LARGEST_SHOWN = 5


def tree_files(root: Path) -> list[Path]:
    """The files the device tool copies: tracked ones, and untracked ones git does not ignore."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                            capture_output=True, check=True).stdout
    return [root / name for name in dict.fromkeys(listed.decode().split("\0")) if name and (root / name).is_file()]


def folder_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def sizes(files: list[Path]) -> dict[Path, int]:
    return {f: f.stat().st_size for f in files}


def largest(by_file: dict[Path, int], root: Path) -> str:
    top = sorted(by_file.items(), key=lambda item: -item[1])[:LARGEST_SHOWN]
    return ", ".join(f"{path.relative_to(root)} {size / MIB:.1f} MiB" for path, size in top)


def report(root: Path, folders: list[str]) -> tuple[int, str]:
    """(bytes carried, one line saying it against the cap)."""
    by_file = sizes(tree_files(root))
    for folder in folders:
        by_file.update(sizes(folder_files(root / folder)))
    total = sum(by_file.values())
    verdict = "fits" if total <= CARRY_CAP_BYTES else "OVER the cap: the call would be refused"
    return total, (f"a device call carries {total / MIB:.1f} MiB of {CARRY_CAP_BYTES / MIB:.0f} MiB "
                   f"(the tree{''.join(' + ' + f for f in folders)}): {verdict}; largest: "
                   f"{largest(by_file, root)}")


if __name__ == "__main__":
    carried, line = report(Path.cwd(), sys.argv[1:])
    print(line)
    sys.exit(0 if carried <= CARRY_CAP_BYTES else 1)
