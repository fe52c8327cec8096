"""SASS opcode counts per kernel instance, read with `cuobjdump -sass` from the stage's object
file (no GPU needed): the evidence that a stage runs on the path it claims (HGMMA for wgmma,
UTMALDG for TMA) and keeps off local memory (LDL/STL)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

from .errors import BuildError

# Opcodes recorded as metrics for every kernel instance, whether or not a gate names them:
# tensor-core paths (HGMMA wgmma, HMMA mma.sync), copies (UTMALDG TMA, LDGSTS cp.async),
# local memory (LDL/STL), mbarrier traffic (SYNCS) and register reallocation (USETMAXREG).
WATCHED_OPCODES = ("HGMMA", "HMMA", "UTMALDG", "LDGSTS", "LDL", "STL", "SYNCS", "USETMAXREG")

_FUNCTION_RE = re.compile(r"^\s*Function\s*:\s*(\S+)")
_ARCH_RE = re.compile(r"arch\s*=\s*(sm_\w+)")
_INSTRUCTION_RE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)")


def parse_sass(text: str) -> dict[tuple[str, str], Counter]:
    """{(mangled name, arch): Counter of opcodes} from `cuobjdump -sass` output."""
    counts: dict[tuple[str, str], Counter] = {}
    arch, current = "", None
    for line in text.splitlines():
        if a := _ARCH_RE.search(line):
            arch = a[1]
        if f := _FUNCTION_RE.match(line):
            current = counts.setdefault((f[1], arch), Counter())
        elif current is not None and (i := _INSTRUCTION_RE.search(line)):
            current[i[1]] += 1
    return counts


def cuobjdump() -> Path:
    from .build import cuda_home

    found = cuda_home() / "bin" / "cuobjdump"
    if found.is_file():
        return found
    on_path = shutil.which("cuobjdump")
    if on_path is None:
        raise BuildError("cuobjdump not found next to nvcc or on PATH", "")
    return Path(on_path)


def object_sass(obj: Path) -> str:
    proc = subprocess.run([str(cuobjdump()), "-sass", str(obj)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BuildError(f"cuobjdump -sass failed on {obj.name}", proc.stderr)
    return proc.stdout
