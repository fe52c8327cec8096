"""The CUDA toolkit on this machine: where it is, its nvcc and the flags that name an architecture.

Below the build and the SASS reader, which both need the toolkit's folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .errors import BuildError


def cuda_home() -> Path:
    """$CUDA_HOME or $CUDA_PATH, else the toolkit that the nvcc on PATH belongs to."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            return Path(os.environ[var])
    nvcc = shutil.which("nvcc")
    candidates = [Path(nvcc).resolve().parent.parent] if nvcc else []
    candidates.append(Path("/usr/local/cuda"))
    for candidate in candidates:
        if (candidate / "include" / "cuda_runtime.h").is_file():
            return candidate
    raise BuildError("cannot find the CUDA toolkit", "set CUDA_HOME to the folder holding bin/nvcc and include/")


def nvcc_binary() -> Path:
    nvcc = cuda_home() / "bin" / "nvcc"
    if not nvcc.is_file():
        raise BuildError("nvcc not found", f"looked for {nvcc}; set CUDA_HOME")
    return nvcc


def nvcc_version() -> str:
    out = subprocess.run([str(nvcc_binary()), "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "unknown"


def gencode_flags(archs: tuple[str, ...]) -> list[str]:
    """sm_90a -> -gencode=arch=compute_90a,code=sm_90a (the form that keeps wgmma legal)."""
    return [f"-gencode=arch=compute_{a[3:]},code={a}" for a in archs]
