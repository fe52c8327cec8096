"""SASS opcode counts per kernel instance, read with `cuobjdump -sass` from the stage's object
file (no GPU needed): the evidence that a stage runs on the path it claims (HGMMA for wgmma,
UTMALDG for TMA, LDG.E.128 for 16-byte loads) and keeps off local memory (LDL/STL). The opcodes
recorded for every stage are its family's (Family.watched_opcodes)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

from .errors import BuildError
from .toolchain import cuda_home

FUNCTION_RE = re.compile(r"^\s*Function\s*:\s*(\S+)")
# An object's listing says `arch = sm_90a` per embedded cubin, a bare cubin's only `code for sm_90a`.
_ARCH_RE = re.compile(r"(?:arch\s*=|code for)\s*(sm_\w+)")
# An instruction's mnemonic with its modifiers (LDG.E.128, HGMMA.64x128x16.F32), after any predicate.
_INSTRUCTION_RE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)")


def parse_sass_forms(text: str) -> dict[tuple[str, str], Counter]:
    """{(mangled name, arch): Counter of instruction forms, the opcode with its modifiers}
    from `cuobjdump -sass` output."""
    counts: dict[tuple[str, str], Counter] = {}
    arch, current = "", None
    for line in text.splitlines():
        if a := _ARCH_RE.search(line):
            arch = a[1]
        if f := FUNCTION_RE.match(line):
            current = counts.setdefault((f[1], arch), Counter())
        elif current is not None and (i := _INSTRUCTION_RE.search(line)):
            current[i[1]] += 1
    return counts


def base_opcode(form: str) -> str:
    """LDG.E.128 -> LDG."""
    return form.split(".", 1)[0]


def parse_sass(text: str) -> dict[tuple[str, str], Counter]:
    """{(mangled name, arch): Counter of opcodes, modifiers dropped} from `cuobjdump -sass` output."""
    counts = {}
    for key, forms in parse_sass_forms(text).items():
        counts[key] = Counter()
        for form, n in forms.items():
            counts[key][base_opcode(form)] += n
    return counts


def opcode_count(forms: Counter, name: str) -> int:
    """How many instructions a gate's or a watched list's opcode name matches: a name with modifiers
    (LDG.E.128) exactly that instruction form, a bare opcode (LDG) every form of it."""
    if "." in name:
        return forms.get(name, 0)
    return sum(n for form, n in forms.items() if base_opcode(form) == name)


def pip_cuda_bins() -> list[Path]:
    """bin/ folders of NVIDIA's pip packages (nvidia-cuda-cuobjdump, -nvdisasm: the dev extra)."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations) if spec and spec.submodule_search_locations else []
    return [b for root in roots for b in sorted(Path(root).glob("cu*/bin"))]


def cuobjdump() -> Path:
    """cuobjdump next to nvcc, on PATH, or from the pip package; it needs nvdisasm beside it."""
    candidates = [cuda_home() / "bin" / "cuobjdump"]
    if on_path := shutil.which("cuobjdump"):
        candidates.append(Path(on_path))
    candidates += [b / "cuobjdump" for b in pip_cuda_bins()]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise BuildError("cuobjdump not found next to nvcc, on PATH or from pip "
                     "(pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)", "")


def object_sass(obj: Path) -> str:
    tool = cuobjdump()
    # cuobjdump runs nvdisasm, which sits beside it in every layout above
    env = {**os.environ, "PATH": f"{tool.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run([str(tool), "-sass", str(obj)], capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        raise BuildError(f"cuobjdump -sass failed on {obj.name}", proc.stderr)
    return proc.stdout
