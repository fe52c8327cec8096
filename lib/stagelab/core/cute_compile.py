"""CuTe DSL's ahead-of-time compile of one compile spec for one architecture, and ptxas's resource
report on it: what core.build_cute files as kernel instances. Neither needs a GPU.

cute.compile(function, *args, options="--gpu-arch sm_90a --keep-ptx --keep-cubin --dump-dir D")
traces the function with the spec's fake arguments and writes <name>.sm_90a.ptx and .cubin into D
(which must exist). Its ptxas is a library inside the package (CUDA 12.9 in nvidia-cutlass-dsl-libs-cu12
4.8.1), so the report comes from a ptxas of this machine's replayed on the PTX (core.ptxas_replay):
each one found, with and without -lineinfo, until one reproduces CuTe's cubin byte for byte.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import traceback
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from .errors import BuildError
from .ptxas_replay import replay
from .registry import Stage
from .sass import pip_cuda_bins
from .toolchain import cuda_home

# The oldest CuTe DSL checked (4.8.1): fake tensors with symbolic extents, cute.compile's --dump-dir.
MIN_CUTLASS_DSL = (4, 8)
PTXAS_FLAG_SETS = ((), ("-lineinfo",))
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")


def cutlass_dsl_versions() -> dict[str, str]:
    """The installed CuTe DSL's version, the CUDA its compiler library was built for (cu12, cu13)
    and the CUTE_DSL_* settings of this environment (they may change what it compiles); an error
    when there is none, or one older than MIN_CUTLASS_DSL."""
    try:
        found = version("nvidia-cutlass-dsl")
    except PackageNotFoundError as exc:
        raise BuildError("CuTe DSL (nvidia-cutlass-dsl) is not installed: a `backend: cute` stage needs it",
                         "pip install 'stagelab[cute]'  (nvidia-cutlass-dsl==4.8.1)") from exc
    if tuple(int(part) for part in re.findall(r"\d+", found)[:2]) < MIN_CUTLASS_DSL:
        raise BuildError(f"nvidia-cutlass-dsl {found} is older than {'.'.join(map(str, MIN_CUTLASS_DSL))}, the "
                         "oldest the cute backend takes", "pip install 'stagelab[cute]'")
    if importlib.util.find_spec("cutlass") is None:  # installed, but not on this Python's path
        raise BuildError(f"nvidia-cutlass-dsl {found} is installed but `cutlass` does not import",
                         "its nvidia_cutlass_dsl_packages.pth puts it on sys.path; python -S, or a pip --target "
                         "folder not added with site.addsitedir, skips that")
    libs = "unknown"
    for variant in ("cu13", "cu12"):
        try:
            libs = f"{variant} {version(f'nvidia-cutlass-dsl-libs-{variant}')}"
            break
        except PackageNotFoundError:
            continue
    settings = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("CUTE_DSL_"))
    return {"cutlass_dsl": found, "cutlass_dsl_libs": libs, "cute_dsl_env": settings}


def aot_compile(stage: Stage, spec: dict, label: str, arch: str, dump: Path) -> tuple[Path, Path]:
    """The PTX and cubin CuTe DSL keeps for one spec and one architecture, in the new folder `dump`."""
    import cutlass.cute as cute

    dump.mkdir()
    options = f"--gpu-arch {arch} --keep-ptx --keep-cubin --dump-dir {shlex.quote(str(dump))} {spec.get('options', '')}"
    try:
        compiled = cute.compile(spec["function"], *spec["args"], options=options.strip())
    except Exception as exc:
        raise BuildError(f"CuTe DSL could not compile {label} of {stage.source} for {arch}: {type(exc).__name__}",
                         _ANSI_RE.sub("", traceback.format_exc())) from exc
    kept = [sorted(dump.glob(f"*.{arch}.{suffix}")) for suffix in ("ptx", "cubin")]
    if [len(files) for files in kept] != [1, 1]:  # its artifacts hold the text, not the path
        raise BuildError(f"CuTe DSL kept {[p.name for p in dump.iterdir()]} for {label} of {stage.source}, not "
                         f"one .{arch}.ptx and one .{arch}.cubin", str(dump))
    return kept[0][0], kept[1][0]


def ptxas_binaries() -> list[str]:
    """Every ptxas found here, each once: the CUDA toolkit's, on PATH, NVIDIA's pip packages',
    Triton's bundled one (found without importing Triton)."""
    candidates = []
    try:
        candidates.append(cuda_home() / "bin" / "ptxas")
    except BuildError:
        pass  # no toolkit: the others may do
    if on_path := shutil.which("ptxas"):
        candidates.append(Path(on_path))
    candidates += [b / "ptxas" for b in pip_cuda_bins()]
    triton = importlib.util.find_spec("triton")
    if triton is not None and triton.origin:
        candidates.append(Path(triton.origin).parent / "backends" / "nvidia" / "bin" / "ptxas")
    found = {}
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            found.setdefault(candidate.resolve(), str(candidate))
    if not found:
        raise BuildError("no ptxas found for the CuTe DSL build's resource report",
                         "looked in $CUDA_HOME/bin, on PATH, in NVIDIA's pip packages and in Triton's")
    return list(found.values())


def spec_ptxas_flags(spec: dict) -> list[str]:
    """The ptxas flags a spec's options pass (--ptxas-options=... or --ptxas-options '...')."""
    tokens, flags = shlex.split(spec.get("options", "")), []
    for i, token in enumerate(tokens):
        if token.startswith("--ptxas-options="):
            flags += shlex.split(token.split("=", 1)[1])
        elif token == "--ptxas-options" and i + 1 < len(tokens):
            flags += shlex.split(tokens[i + 1])
    return flags


def ptxas_report(spec: dict, ptx: Path, cubin: Path) -> tuple[str, bool]:
    """ptxas --verbose's report on the PTX, and whether that run reproduced CuTe DSL's cubin."""
    extra = spec_ptxas_flags(spec)
    commands = [[tool, *flags, *extra] for tool in ptxas_binaries() for flags in PTXAS_FLAG_SETS]
    return replay(ptx, cubin.read_bytes(), commands, "CuTe DSL")
