"""md5 of `cuobjdump -sass` of stages compiled exactly as `stagelab` compiles them (no GPU needed):
the evidence that a header change leaves the default SASS byte-identical.

    python tools/sass_md5.py s6_tma_warpspec s8_persistent_split [-D KNOB=1 ...] [--root CHECKOUT]

`--root` compiles another checkout's kernels (e.g. a copy of main's, before a change); `-D`
overrides stage defines (a stress or plant build). Prints one `md5  stage  defines` line per stage
and writes each listing beside it in --out (default: a temporary folder) for a diff.

The md5 is of the listing with anonymous namespaces' names made uniform: nvcc names them
`_GLOBAL__N__<8 hex digits>` from the source file's path, so the same stage compiled from two
checkouts would differ there alone (s5 has its kernels in one; s6-s9 none). The lab's own
normalisation (stagelab.core.sass_kernels), the one `stagelab same-code` records.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def sass_of(stage_id: str, defines: dict[str, str], out: Path) -> str:
    from stagelab.core.build import nvcc_command
    from stagelab.core.registry import find_stage
    from stagelab.core.sass import object_sass

    registry, stage = find_stage(stage_id)
    stage = stage.with_defines(defines) if defines else stage
    obj = out / f"{stage_id}.o"
    proc = subprocess.run(nvcc_command(stage, registry, obj), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"nvcc failed on {stage_id}:\n{proc.stderr[-4000:]}")
    return object_sass(obj)


def parse_defines(items: list[str]) -> dict[str, str]:
    defines = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"-D takes NAME=VALUE, got {item!r}")
        defines[name] = value
    return defines


def main(argv: list[str] | None = None) -> int:
    from stagelab.core.sass_kernels import listing_md5

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stages", nargs="+")
    parser.add_argument("-D", dest="defines", action="append", default=[], help="NAME=VALUE stage define override")
    parser.add_argument("--root", help="the checkout whose kernels to compile (default: STAGELAB_ROOT)")
    parser.add_argument("--out", help="folder for the listings (default: a temporary folder)")
    args = parser.parse_args(argv)
    if args.root:
        os.environ["STAGELAB_ROOT"] = str(Path(args.root).resolve())
    out = Path(args.out or tempfile.mkdtemp(prefix="sass-md5-"))
    out.mkdir(parents=True, exist_ok=True)
    defines = parse_defines(args.defines)
    label = " ".join(f"-D{k}={v}" for k, v in defines.items()) or "default"
    for stage_id in args.stages:
        listing = sass_of(stage_id, defines, out)
        (out / f"{stage_id}.sass.txt").write_text(listing)
        print(f"{listing_md5(listing)}  {stage_id}  {label}", flush=True)
    print(f"listings in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
